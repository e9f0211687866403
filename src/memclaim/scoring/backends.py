"""Scoring backends behind one written protocol (issue 26 item 3), and their registry.

A backend turns work units (:class:`memclaim.scoring.units.WorkUnit`: the tokenized (prompt,
target) items of up to ``unit_size`` windows) into per-item results
(:class:`memclaim.store.store.UnitResult`), or writes them into the store itself and reports
a :class:`memclaim.scoring.units.UnitReceipt`. :func:`memclaim.scoring.runner.run_scoring`
does everything else: the procedure, the store, resuming, progress, the results table. So a
backend is small:

=====================  ====================================================================
``name``               the name it is registered under (recorded in the run's summary)
``device_class``       the class of device whose numerics its scores have ('cpu', 'cuda'),
                       or None for the model's own (the procedure records it)
``weights_loaded``     whether it loaded the model's weights (the run's summary says so)
``supports(p, stats)`` None, or why it cannot score procedure ``p`` with those statistics
                       (asked before the store is touched; the run is refused with the reason)
``run(units, job)``    yield one result or receipt per unit, in any order
``stats()``            what it measured in the last run (a dict, recorded in the summary)
=====================  ====================================================================

Two members are optional (:data:`OPTIONAL_MEMBERS`; a backend without them gets the default):

==========================  ===============================================================
``computable_stats()``      the statistics it computes when the run asks for none (a
                            :class:`memclaim.scoring.engine.StatSet`; a served model's: every
                            statistic its answers give). Default: the run's default, every one
``describe_model(record)``  the procedure's model record as this backend's scores need it (a
                            served model's: the tokenizer's fingerprint and the server's
                            identity in place of a weights fingerprint). Default: as it is
==========================  ===============================================================

``job`` (:class:`ScoringJob`) is what the run hands every backend: the bound procedure, the
statistics to compute, the store (for a backend whose workers write unit files themselves),
and ``on_batch``, a progress callback to call with the windows of each scored batch (a backend
that does not call it is shown progress per unit).

:func:`register_backend` adds a backend under a name, with a ``make(model, policies, runtime,
log)`` factory that builds it from the run's :class:`memclaim.runtime.Runtime`, and the runtime
settings it accepts; :func:`make_backend` builds the one a runtime names. ``local`` (this
process) and ``ray`` (a pool of Ray actors) are registered by their own modules, loaded when
first named. docs/extending.md shows a backend written from scratch.

>>> sorted(backend_names())
['local', 'ray']
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..errors import DomainError, InputError
from ..procedure import Procedure
from ..runtime import BACKEND_SPEC_FIELDS, BackendSpec, Runtime

if TYPE_CHECKING:  # the annotations' names only
    from ..decoding import Policy
    from ..progress import LogCallback
    from ..store.store import ScoreStore, UnitResult
    from .engine import StatSet
    from .units import UnitReceipt, WorkUnit

__all__ = [
    "Backend",
    "ScoringJob",
    "BackendEntry",
    "OPTIONAL_MEMBERS",
    "register_backend",
    "unregister_backend",
    "backend_names",
    "backend_entry",
    "make_backend",
    "check_backend",
    "default_stats",
    "describe_model_of",
]


@dataclass(frozen=True)
class ScoringJob:
    """What a run hands its backend with the units (see the module docstring).

    >>> ScoringJob(procedure=Procedure(), stats=None).on_batch is None
    True
    """

    procedure: Procedure
    stats: StatSet | None  # the statistics to compute (memclaim.scoring.engine.StatSet)
    store: ScoreStore | None = None
    on_batch: Callable[[int], None] | None = field(default=None, compare=False)


@runtime_checkable
class Backend(Protocol):
    """The scoring backend protocol (see the module docstring for each member)."""

    name: str

    @property
    def device_class(self) -> str | None: ...

    @property
    def weights_loaded(self) -> bool: ...

    def supports(self, procedure: Procedure, stats: StatSet) -> str | None: ...

    def run(
        self, units: Sequence[WorkUnit], job: ScoringJob
    ) -> Iterator[UnitResult | UnitReceipt]: ...

    def stats(self) -> dict: ...


_MEMBERS = ("name", "device_class", "weights_loaded", "supports", "run", "stats")
#: members a backend may leave out (see the module docstring); :func:`default_stats` and
#: :func:`describe_model_of` ask for them, so the runner never probes a backend itself
OPTIONAL_MEMBERS = ("computable_stats", "describe_model")


def default_stats(backend: Backend) -> StatSet | None:
    """The statistics ``backend`` computes when a run asks for none (its optional
    ``computable_stats()``), or None: the run's default.

    >>> default_stats(object()) is None
    True
    """
    member = getattr(backend, "computable_stats", None)
    return None if member is None else member()


def describe_model_of(backend: Backend) -> Callable[[dict], dict] | None:
    """``backend``'s rewrite of the procedure's model record (its optional
    ``describe_model(record)``), or None: the record as it is.

    >>> describe_model_of(object()) is None
    True
    """
    return getattr(backend, "describe_model", None)


def check_backend(obj: Any) -> Backend:
    """``obj`` if it has every member of :class:`Backend`; else an error naming the missing ones.

    >>> check_backend(object())
    Traceback (most recent call last):
    memclaim.errors.InputError: object is not a memclaim scoring backend: it lacks name, device_class, weights_loaded, supports, run, stats
      fix: implement memclaim.scoring.backends.Backend (docs/extending.md shows one), or pass backend= by name
    """
    if isinstance(obj, Backend):
        return obj
    missing = [m for m in _MEMBERS if not hasattr(obj, m)]
    raise InputError(
        f"{type(obj).__name__} is not a memclaim scoring backend: it lacks {', '.join(missing)}",
        hint="implement memclaim.scoring.backends.Backend (docs/extending.md shows one), or pass "
        "backend= by name",
    )


# --------------------------------------------------------------------------- the registry
@dataclass(frozen=True)
class BackendEntry:
    """A registered backend: its ``make(model, policies, runtime, log)`` factory, a one-line
    ``description``, the runtime settings it accepts (``settings``: names of
    :class:`memclaim.runtime.BackendSpec` fields or of its ``options``), and who registered it."""

    name: str
    make: Callable[..., Backend]
    description: str
    settings: tuple[str, ...] = ()
    provider: str = ""


_LOCK = threading.Lock()
_REGISTRY: dict[str, BackendEntry] = {}
# built-in backends, registered by their own modules when first named (Ray's pulls in ray)
_BUILTIN = {"local": "memclaim.scoring.local_backend", "ray": "memclaim.scoring.ray_backend"}


def register_backend(
    name: str,
    make: Callable[..., Backend],
    *,
    description: str,
    settings: Sequence[str] = (),
    provider: str = "",
    replace: bool = False,
) -> BackendEntry:
    """Register the backend ``name``, built for a run by ``make(model, policies, runtime, log)``
    (a :class:`memclaim.models.loader.LoadedModel`, the run's decoding policies, its
    :class:`memclaim.runtime.Runtime`, a one-line log callback or None) and returning a
    :class:`Backend`. ``settings``: the runtime's backend settings it accepts (a setting given
    to another backend is refused naming the backends that take it). A second registration of
    a name raises unless ``replace``.

    >>> import memclaim as mc
    >>> e = mc.register_backend("nothing", lambda model, policies, runtime, log: None, description="a doctest")
    >>> "nothing" in backend_names()
    True
    >>> unregister_backend("nothing"); "nothing" in backend_names()
    False
    """
    if not isinstance(name, str) or not name.strip() or name != name.strip():
        raise DomainError(
            f"a backend needs a plain non-empty name, got {name!r}", hint="e.g. 'served'"
        )
    if not callable(make):
        raise DomainError(
            f"backend {name!r}: make must be callable, got {type(make).__name__}",
            hint="make(model, policies, runtime, log) -> a Backend",
        )
    if not description:
        raise DomainError(f"backend {name!r} needs a one-line description")
    entry = BackendEntry(
        name=name, make=make, description=description, settings=tuple(settings), provider=provider
    )
    with _LOCK:
        if name in _REGISTRY and not replace:
            raise DomainError(
                f"the backend {name!r} is registered already (by {_REGISTRY[name].provider or '?'})",
                hint="pass replace=True to replace it, or choose another name",
            )
        _REGISTRY[name] = entry
    return entry


def unregister_backend(name: str) -> None:
    """Remove ``name`` from the registry (no error if it is not there).

    >>> unregister_backend("never-registered")
    """
    with _LOCK:
        _REGISTRY.pop(name, None)


def backend_names() -> tuple[str, ...]:
    """The registered backends' names, the built-in ones included.

    >>> backend_names()[:2]
    ('local', 'ray')
    """
    with _LOCK:
        return tuple(dict.fromkeys([*_BUILTIN, *_REGISTRY]))


def backend_entry(name: str) -> BackendEntry:
    """The entry of backend ``name`` (a built-in one is loaded on first use); an unknown name is
    refused naming the registered ones.

    >>> backend_entry("local").description
    'this process, one unit after another'
    """
    with _LOCK:
        entry = _REGISTRY.get(name)
    if entry is None and name in _BUILTIN:
        importlib.import_module(_BUILTIN[name])  # the module registers it
        with _LOCK:
            entry = _REGISTRY.get(name)
    if entry is None:
        raise InputError(
            f"unknown backend {name!r}",
            hint=f"one of {', '.join(backend_names())} "
            "(memclaim.scoring.backends.register_backend adds one)",
        )
    return entry


def _flag(setting: str) -> str:
    return "--" + setting.replace("_", "-") if setting in BACKEND_SPEC_FIELDS else setting


def make_backend(
    model: Any,
    policies: Sequence[Policy],
    runtime: Runtime | None = None,
    *,
    log: LogCallback | None = None,
) -> Backend:
    """The backend ``runtime`` names, made for ``model`` and ``policies``: a backend object given
    ready in the runtime is returned as it is; a setting the named backend does not accept is
    refused before it is made, naming the backends that accept it.

    >>> make_backend(None, [], Runtime.options(workers=2))
    Traceback (most recent call last):
    memclaim.errors.InputError: --workers only apply with --backend ray
      fix: add --backend ray, or drop them (use --threads for the local backend)
    """
    runtime = runtime if runtime is not None else Runtime()
    spec = runtime.backend
    if not isinstance(spec, BackendSpec):
        return check_backend(spec)
    entry = backend_entry(spec.kind)
    stray = [k for k in spec.given() if k not in entry.settings]
    if stray:
        takers = sorted(
            {
                n
                for n in backend_names()
                if n != entry.name and all(k in backend_entry(n).settings for k in stray)
            }
        ) or ["another backend"]
        fix = f"add --backend {takers[0]}, or drop them"
        if entry.name == "local":
            fix += " (use --threads for the local backend)"
        raise InputError(
            f"{', '.join(_flag(k) for k in stray)} only apply with --backend {' or '.join(takers)}",
            hint=fix,
        )
    return check_backend(entry.make(model, tuple(policies), runtime, log))
