"""How a run is carried out, as one value (issue 26): where the model runs (:class:`Placement`),
which backend scores the work units (:class:`BackendSpec`), batch and unit sizes, threads, and
the opt-ins for loading a model. The runtime changes no score on the CPU (scores are the same at
every batch size, unit size and backend there; DESIGN.md "Devices"); the device class and dtype
it chooses are recorded in the procedure (:mod:`memclaim.procedure`), which keys the scores.

Every default of these settings lives here, once: the CLI's option defaults and help read them,
the API's keywords default to them, and the backends take them from the value they are given.

>>> rt = Runtime.options(batch_size=32, backend="ray", workers=2)
>>> rt.batch_size, rt.backend.kind, rt.backend.workers, rt.unit_size
(32, 'ray', 2, 64)
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .errors import InputError
from .jsonutil import short_repr
from .validate import batch_size as check_batch_size
from .validate import integer, nonneg

__all__ = [
    "Runtime",
    "Placement",
    "BackendSpec",
    "RUNTIME_OPTIONS",
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_UNIT_SIZE",
    "DEFAULT_BACKEND",
    "DEFAULT_THREADS_PER_WORKER",
    "DEFAULT_GPUS_PER_WORKER",
    "DEFAULT_DEVICE",
    "DEFAULT_DTYPE",
    "BACKEND_SPEC_FIELDS",
    "SERVED_OPTIONS",
]

#: windows per forward pass (``"auto"``: sized from free memory on a GPU, 16 on the CPU)
DEFAULT_BATCH_SIZE = 16
#: windows per work unit: the unit of resume and of distribution
DEFAULT_UNIT_SIZE = 64
#: where units are scored: this process
DEFAULT_BACKEND = "local"
#: torch CPU threads (and Ray CPUs) per Ray worker
DEFAULT_THREADS_PER_WORKER = 1
#: GPUs per Ray worker (0: CPU workers)
DEFAULT_GPUS_PER_WORKER = 0.0
#: the first GPU when one is present, else the CPU (memclaim.models.placement)
DEFAULT_DEVICE = "auto"
#: bfloat16 on a GPU that supports it, float32 on the CPU
DEFAULT_DTYPE = "auto"

_DEVICE_MAPS = ("auto",)
_DTYPES = ("auto", "float32", "bfloat16", "float16", "float64")


def _closest(name: str, names: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, list(names), n=1, cutoff=0.6)
    return f"did you mean {close[0]}? " if close else ""


@dataclass(frozen=True)
class Placement:
    """Where the model's weights live and run, and in what dtype (:mod:`memclaim.models.placement`
    resolves it when the model loads: a device that is not there is refused then, naming the
    devices it sees). ``device``: auto, cpu, cuda or cuda:N; ``device_map``: 'auto' shards the model
    over the GPUs and offloads the rest (with ``max_memory`` per device and ``offload_folder``);
    ``dtype``: the body's dtype (auto: bfloat16 on a GPU, float32 on the CPU).

    >>> Placement(device="cpu").to_dict()["device"]
    'cpu'
    """

    def __repr__(self) -> str:
        return short_repr(self)  # the fields that differ from their defaults

    device: str | None = None  # None: DEFAULT_DEVICE
    device_map: str | None = None
    max_memory: Any = None  # ('cuda:0=20GiB', 'cpu=64GB'), a dict, or one such string
    offload_folder: str | None = None
    dtype: str | None = None  # None: DEFAULT_DTYPE

    def __post_init__(self):
        if self.device is not None and (
            not isinstance(self.device, str) or not self.device.strip()
        ):
            raise InputError(
                f"--device must be a device name, got {self.device!r}",
                hint="auto, cpu, cuda or cuda:N",
            )
        if self.device_map is not None and self.device_map not in _DEVICE_MAPS:
            raise InputError(
                f"--device-map {self.device_map!r} is not one memclaim knows",
                hint="use --device-map auto, or leave it out",
            )
        if self.dtype is not None and self.dtype not in _DTYPES:
            raise InputError(
                f"unknown dtype {self.dtype!r}", hint=f"use one of {', '.join(_DTYPES)}"
            )
        if isinstance(self.max_memory, (list, tuple)):
            object.__setattr__(self, "max_memory", tuple(self.max_memory) or None)
        elif isinstance(self.max_memory, Mapping):
            object.__setattr__(self, "max_memory", dict(self.max_memory) or None)
        if self.offload_folder is not None:
            object.__setattr__(self, "offload_folder", str(self.offload_folder))

    def load_kwargs(self) -> dict:
        """The keywords of :func:`memclaim.load_model` this placement sets."""
        return {
            "device": self.device,
            "device_map": self.device_map,
            "max_memory": self.max_memory,
            "offload_folder": self.offload_folder,
            "dtype": self.dtype,
        }

    def to_dict(self) -> dict:
        mm = self.max_memory
        return {
            "device": self.device or DEFAULT_DEVICE,
            "device_map": self.device_map,
            "max_memory": list(mm) if isinstance(mm, tuple) else mm,
            "offload_folder": self.offload_folder,
            "dtype": self.dtype or DEFAULT_DTYPE,
        }


#: the fields of a backend spec a flat option may set (``backend`` sets the kind)
BACKEND_SPEC_FIELDS = ("address", "workers", "gpus_per_worker", "threads_per_worker")


@dataclass(frozen=True)
class BackendSpec:
    """Which backend scores the work units and its settings: ``kind`` (a registered backend:
    :func:`memclaim.scoring.backends.backend_names`; 'local' is this process, 'ray' a pool of
    Ray actors), and for Ray the cluster ``address``, ``workers``, ``gpus_per_worker`` and
    ``threads_per_worker``. ``options``: settings of other backends (a served model's URL, ...).
    Which backend accepts which setting is the backend's to say (checked against the registry
    when the run starts, before any work).

    >>> BackendSpec("ray", workers=2).given()
    {'workers': 2}
    """

    def __repr__(self) -> str:
        return short_repr(self)  # the fields that differ from their defaults

    kind: str = DEFAULT_BACKEND
    address: str | None = None
    workers: int | None = None
    gpus_per_worker: float = DEFAULT_GPUS_PER_WORKER
    threads_per_worker: int = DEFAULT_THREADS_PER_WORKER
    options: Mapping = field(default_factory=dict)

    def __post_init__(self):
        if not isinstance(self.kind, str) or not self.kind.strip():
            raise InputError(
                f"--backend must name a backend, got {self.kind!r}", hint="e.g. --backend local"
            )
        if self.workers is not None:
            object.__setattr__(self, "workers", integer("--workers", self.workers, minimum=1))
        object.__setattr__(
            self,
            "threads_per_worker",
            integer("--threads-per-worker", self.threads_per_worker, minimum=1),
        )
        object.__setattr__(
            self, "gpus_per_worker", nonneg("--gpus-per-worker", self.gpus_per_worker)
        )
        if self.address is not None:
            object.__setattr__(self, "address", str(self.address))
        object.__setattr__(self, "options", dict(self.options or {}))

    def given(self) -> dict:
        """The settings given that differ from their defaults (besides the kind)."""
        out = {}
        for name, default in (
            ("address", None),
            ("workers", None),
            ("gpus_per_worker", DEFAULT_GPUS_PER_WORKER),
            ("threads_per_worker", DEFAULT_THREADS_PER_WORKER),
        ):
            if getattr(self, name) != default:
                out[name] = getattr(self, name)
        out.update(self.options)
        return out

    def to_dict(self) -> dict:
        return {
            "kind": self.kind,
            "address": self.address,
            "workers": self.workers,
            "gpus_per_worker": self.gpus_per_worker,
            "threads_per_worker": self.threads_per_worker,
            "options": dict(self.options),
        }


#: the flat options a public function accepts as shortcuts for its runtime (``runtime=`` given
#: as a dict uses the same names)
RUNTIME_OPTIONS = (
    "device",
    "device_map",
    "max_memory",
    "offload_folder",
    "dtype",
    "backend",
    "address",
    "workers",
    "gpus_per_worker",
    "threads_per_worker",
    "batch_size",
    "unit_size",
    "threads",
    "allow_pickle",
    "trust_remote_code",
)
#: a served model's settings (``backend="openai"``, docs/served.md): flat options kept in the
#: backend spec's ``options``
SERVED_OPTIONS = (
    "url",
    "api_key_env",
    "api_key_file",
    "served_model",
    "max_concurrency",
    "served_bounds",
)
_PLACEMENT_OPTIONS = ("device", "device_map", "max_memory", "offload_folder", "dtype")


@dataclass(frozen=True)
class Runtime:
    """How a run is carried out (see the module docstring): ``placement``, ``backend`` (a
    :class:`BackendSpec`, or a backend object made by hand, e.g. a Ray pool kept open across
    runs), ``batch_size`` (windows per forward pass, or 'auto'), ``unit_size`` (windows per work
    unit), ``threads`` (torch CPU threads; None leaves torch's default), and the opt-ins
    ``allow_pickle`` (pickle checkpoints) and ``trust_remote_code`` (a model folder's own code).

    >>> Runtime().to_dict()["backend"]["kind"], Runtime.options(device="cpu").placement.device
    ('local', 'cpu')
    >>> Runtime.options(batch_sise=8)
    Traceback (most recent call last):
    memclaim.errors.InputError: unknown runtime option batch_sise=8
      fix: did you mean batch_size? The runtime's options are device, device_map, max_memory, offload_folder, dtype, backend, address, workers, gpus_per_worker, threads_per_worker, batch_size, unit_size, threads, allow_pickle, trust_remote_code
    """

    def __repr__(self) -> str:
        return short_repr(self)  # the fields that differ from their defaults

    placement: Placement = field(default_factory=Placement)
    backend: Any = field(default_factory=BackendSpec)  # BackendSpec, or a ready backend object
    batch_size: int | str = DEFAULT_BATCH_SIZE
    unit_size: int = DEFAULT_UNIT_SIZE
    threads: int | None = None
    allow_pickle: bool = False
    trust_remote_code: bool = False

    def __post_init__(self):
        if isinstance(self.placement, Mapping):
            object.__setattr__(self, "placement", Placement(**self.placement))
        elif not isinstance(self.placement, Placement):
            raise InputError(
                f"a runtime's placement is a Placement, got {type(self.placement).__name__}"
            )
        if isinstance(self.backend, str):
            object.__setattr__(self, "backend", BackendSpec(self.backend))
        elif isinstance(self.backend, Mapping):
            object.__setattr__(self, "backend", BackendSpec(**self.backend))
        elif self.backend is None:
            object.__setattr__(self, "backend", BackendSpec())
        object.__setattr__(self, "batch_size", check_batch_size(self.batch_size))
        object.__setattr__(self, "unit_size", integer("unit size", self.unit_size, minimum=1))
        if self.threads is not None:
            object.__setattr__(self, "threads", integer("--threads", self.threads, minimum=1))
        for f in ("allow_pickle", "trust_remote_code"):
            if not isinstance(getattr(self, f), bool):
                raise InputError(
                    f"{f} must be True or False, got {getattr(self, f)!r}",
                    hint=f"{f}=True to opt in, False (the default) otherwise",
                )

    # ------------------------------------------------------------------ building
    @classmethod
    def options(cls, **options) -> Runtime:
        """A runtime from the flat options of the public functions (:data:`RUNTIME_OPTIONS`; an
        omitted option takes its default); an unknown option is refused naming the closest one."""
        return cls().with_options(**options)

    def with_options(self, **options) -> Runtime:
        """This runtime with some flat options replaced (the shortcuts given beside ``runtime=``)."""
        for k, v in options.items():
            if k not in RUNTIME_OPTIONS and k not in SERVED_OPTIONS:
                raise InputError(
                    f"unknown runtime option {k}={v!r:.60}",
                    hint=_closest(k, RUNTIME_OPTIONS)
                    + "The runtime's options are "
                    + ", ".join(RUNTIME_OPTIONS),
                )
        if not options:
            return self
        changes: dict = {}
        pl = {k: options[k] for k in _PLACEMENT_OPTIONS if k in options}
        if pl:
            changes["placement"] = replace(self.placement, **pl)
        be = {k: options[k] for k in BACKEND_SPEC_FIELDS if k in options}
        served = {  # None/False: not given (the CLI passes every option); 0 is a value
            k: options[k]
            for k in SERVED_OPTIONS
            if options.get(k) is not None and options.get(k) is not False
        }
        if served:  # a served model's settings, kept beside the other backends' options
            cur_opts = self.backend.options if isinstance(self.backend, BackendSpec) else {}
            be["options"] = {**cur_opts, **served}
        if "backend" in options or be:
            kind = options.get("backend", None)
            cur = self.backend
            if kind is not None and not isinstance(kind, str):  # a ready backend object
                if be:
                    raise InputError(
                        f"{', '.join('--' + k.replace('_', '-') for k in be)} set up a backend memclaim "
                        "makes; a backend object given ready takes its own settings",
                        hint="drop them, or pass backend= by name",
                    )
                changes["backend"] = kind
            else:
                base = cur if isinstance(cur, BackendSpec) else BackendSpec()
                changes["backend"] = replace(base, kind=base.kind if kind is None else kind, **be)
        for k in ("batch_size", "unit_size", "threads", "allow_pickle", "trust_remote_code"):
            if k in options:
                changes[k] = options[k]
        return replace(self, **changes)

    @classmethod
    def coerce(cls, value: Runtime | Mapping | None, **options) -> Runtime:
        """The runtime of a public call: ``value`` (a Runtime, or a dict of flat options) with the
        flat ``options`` over it.

        >>> Runtime.coerce({"batch_size": 4}, threads=2).threads
        2
        """
        if value is None:
            base = cls()
        elif isinstance(value, Runtime):
            base = value
        elif isinstance(value, Mapping):
            base = cls.options(**dict(value))
        else:
            raise InputError(
                f"runtime= takes a memclaim Runtime or a dict of its options, got {type(value).__name__}",
                hint="e.g. runtime={'batch_size': 32, 'device': 'cpu'}",
            )
        return base.with_options(**options)

    @property
    def backend_kind(self) -> str:
        """The backend's registered name (a ready object's ``name``)."""
        b = self.backend
        return b.kind if isinstance(b, BackendSpec) else str(getattr(b, "name", type(b).__name__))

    def to_dict(self) -> dict:
        b = self.backend
        return {
            "placement": self.placement.to_dict(),
            "backend": b.to_dict()
            if isinstance(b, BackendSpec)
            else {"kind": self.backend_kind, "object": True},
            "batch_size": self.batch_size,
            "unit_size": self.unit_size,
            "threads": self.threads,
            "allow_pickle": self.allow_pickle,
            "trust_remote_code": self.trust_remote_code,
        }
