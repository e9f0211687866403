"""The flat keywords of the public functions as notebook shortcuts for two values (issue 26).

Every public function that loads a model takes ``procedure=`` (a
:class:`memclaim.procedure.Procedure`, or a dict of its options) and ``runtime=`` (a
:class:`memclaim.runtime.Runtime`, or a dict of its options), and keeps the flat keywords of
earlier releases (``policies=``, ``prefix_tokens=``, ``batch_size=``, ``device=``, ...) as
shortcuts, declared as ``**options: Unpack[...Options]`` with one :class:`~typing.TypedDict` per
function so that type checkers and IDEs know every name. :func:`take_options` is the one place
they are turned into the two values, at the top of each function:

* an unknown keyword is refused naming the closest valid one (:class:`KeywordError`, exit 2
  through the CLI);
* a field given twice (``runtime=Runtime(threads=2)`` and ``threads=4``) is refused naming both
  values: an auditor must never wonder which one ran;
* every option a function reads afterwards has exactly the value its flat keyword had before
  (the function's own default where it was not given), so results, run ids and store keys are
  those of the flat call.

>>> o = take_options("f", ScoreOptions, {"threads": 2, "policies": ["full"]}, runtime={"batch_size": 8})
>>> o.runtime.batch_size, o.runtime.threads, o.procedure.policies, o["unit_size"]
(8, 2, ('full',), 64)
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, TypedDict, TypeVar

from ..procedure import DEFAULT_BEAM, DEFAULT_POLICY, PROCEDURE_OPTIONS, Procedure
from ..runtime import (
    DEFAULT_BACKEND,
    DEFAULT_BATCH_SIZE,
    DEFAULT_GPUS_PER_WORKER,
    DEFAULT_THREADS_PER_WORKER,
    DEFAULT_UNIT_SIZE,
    RUNTIME_OPTIONS,
    SERVED_OPTIONS,
    BackendSpec,
    Runtime,
)
from ._public import KeywordError, _short

__all__ = [
    "take_options",
    "Options",
    "ProcedureOptions",
    "PlacementOptions",
    "RuntimeOptions",
    "ServedOptions",
    "InputOptions",
    "ClaimOptions",
    "ScoreOptions",
    "PopulationOptions",
    "CensusOptions",
    "AuditOptions",
    "ACROptions",
    "ConformalTestOptions",
    "FinetuneOptions",
    "UnlearnOptions",
    "DPBoundsOptions",
    "procedure_flat",
    "runtime_flat",
    "FLAT_DEFAULTS",
]


# ------------------------------------------------------------------------ the shortcut groups
class ProcedureOptions(TypedDict, total=False):
    """The procedure's shortcuts (:data:`memclaim.procedure.PROCEDURE_OPTIONS`)."""

    policies: Sequence[str] | str | None
    prefix_tokens: int | None
    suffix_tokens: int | None
    prefix_field: str | None
    suffix_field: str | None
    stride: int | None
    prompt_templates: Sequence[str]
    chat_template: bool
    aggregate: str
    near_verbatim: Sequence[int]
    beams: Sequence[int]
    sot: str | None


class PlacementOptions(TypedDict, total=False):
    """Where the model runs (:class:`memclaim.runtime.Placement`)."""

    device: str | None
    device_map: str | None
    max_memory: Mapping | Sequence[str] | str | None
    offload_folder: Any
    dtype: str | None


class LoadOptions(PlacementOptions, total=False):
    """Placement plus the opt-ins of loading a model, and torch's CPU threads."""

    allow_pickle: bool
    trust_remote_code: bool
    threads: int | None


class RuntimeOptions(LoadOptions, total=False):
    """The runtime's shortcuts (:data:`memclaim.runtime.RUNTIME_OPTIONS`)."""

    backend: Any  # a registered backend's name, or a ready backend object
    address: str | None
    workers: int | None
    gpus_per_worker: float
    threads_per_worker: int
    batch_size: int | str
    unit_size: int


class ServedOptions(TypedDict, total=False):
    """A served model's settings (``backend="openai"``; :data:`memclaim.runtime.SERVED_OPTIONS`)."""

    url: str | None
    api_key_env: str | None
    api_key_file: Any
    served_model: str | None
    max_concurrency: int | None


class InputOptions(TypedDict, total=False):
    """How records are read (:func:`memclaim.score`'s ``texts``)."""

    text_field: str | None
    id_field: str | None
    input_format: str | None


class ClaimOptions(TypedDict, total=False):
    """The population test's settings besides ``alpha`` ([EM] §3, §4)."""

    exclude_controls: Any
    exclude_control_ids: Sequence[str]
    fdr: Any
    fwer: Any
    seed: int
    budget_delta: Any
    realistic_budget: float
    confidence: float
    controls_description: str | None
    allow_mixed_numerics: bool


class ScoreOptions(ProcedureOptions, RuntimeOptions, ServedOptions, InputOptions, total=False):
    """:func:`memclaim.score`'s shortcuts."""

    served_bounds: bool


class PopulationOptions(
    ProcedureOptions, RuntimeOptions, ServedOptions, InputOptions, ClaimOptions, total=False
):
    """:func:`memclaim.population`'s shortcuts."""


class CensusOptions(RuntimeOptions, ServedOptions, total=False):
    """:func:`memclaim.census`'s shortcuts (its windows are cut every ``stride`` tokens of one
    document, so no prefix/suffix fields)."""

    prefix_tokens: int | None
    suffix_tokens: int | None
    policies: Sequence[str] | str | None
    prompt_templates: Sequence[str]
    chat_template: bool
    aggregate: str
    near_verbatim: Sequence[int]
    beams: Sequence[int]
    sot: str | None

    exclude_spans: Any
    min_similarity: float
    use_global: bool
    budget_delta: float
    realistic_budget: float
    controls_description: str | None
    allow_mixed_numerics: bool


class AuditOptions(PlacementOptions, ServedOptions, total=False):
    """:func:`memclaim.audit`'s shortcuts (the fields of its settings value among them)."""

    attacks: Sequence[str] | None
    k: Any
    confidence: float
    prefix_tokens: int
    suffix_tokens: int
    policies: Sequence[str] | str | None
    m: int
    trigger: str | None
    verifier_threshold: float
    batch_size: int | str
    kappa: float | None
    soundness_epsilon: float | None
    soundness_neighbors: str
    cap: float | None
    cap_epsilon: float | None
    cap_neighbors: str
    cap_functional: str | None
    cap_slack: float | None
    cap_slack_note: str | None
    shadow_mode: str | None
    shadow_base: Any
    shadow_steps: int | None
    shadow_epochs: float | None
    shadow_lr: float | None
    shadow_batch_size: int | None
    shadow_seq_len: int | None
    shadow_seed: int | None
    shadow_warmup: int | None
    shadow_background: Any
    design_seed: int
    text_field: str | None
    id_field: str | None
    input_format: str | None
    limit: int | None
    sot: str | None
    allow_mixed_numerics: bool
    trust_remote_code: bool
    threads: int | None
    backend: str  # 'local', or 'openai' with the served settings (issue 27)


class ACROptions(LoadOptions, InputOptions, total=False):
    """:func:`memclaim.acr`'s shortcuts."""

    limit: int | None
    top_k: int
    search_batch: int
    steps: int
    seed: int
    token_filter: str
    retokenize: bool
    start_tokens: int
    max_prompt_tokens: int | None
    confidence: float
    controls_description: str | None
    sot: str | None


class ConformalTestOptions(ClaimOptions, total=False):
    """:func:`memclaim.test`'s shortcuts."""

    kind: str | None
    binary: bool | None
    id_field: str | None
    score_field: str | None
    text_field: str | None
    candidates_procedure: Any
    controls_procedure: Any
    candidate_ids: Any
    control_ids: Any


class _TrainOptions(TypedDict, total=False):
    seq_len: int | None
    batch_size: int
    seed: int
    threads: int | None
    overwrite: bool
    trust_remote_code: bool
    device: str | None


class FinetuneOptions(_TrainOptions, total=False):
    """:func:`memclaim.finetune`'s shortcuts."""

    plant_records: Any
    reserve_triggers: int
    layout: str
    epochs: float
    steps: int | None
    lr: float
    dp_epsilon: float | None
    dp_delta: float | None
    noise_multiplier: float | None
    max_grad_norm: float
    physical_batch_size: int | None


class UnlearnOptions(_TrainOptions, total=False):
    """:func:`memclaim.unlearn`'s shortcuts."""

    method: str
    lr: float
    max_rounds: int
    threshold: float


class DPBoundsOptions(TypedDict, total=False):
    """:func:`memclaim.dp_bounds`'s shortcuts: a DP-SGD run's curve, its copies and the
    baselines and evidence of the caps."""

    curve: Any
    noise_multiplier: float | None
    sampling_rate: float | None
    steps: int | None
    pld_grid: float | None
    copies: int
    list_size: int | None
    risk: Any
    baseline: Any
    truncation: Any
    in_support_mass: Any
    dataset_size: int | None
    frequency: int | None
    successes: int | None
    trials: int | None


# ------------------------------------------------------------------------ defaults
#: the default of every flat option that is a field of the procedure or the runtime: exactly the
#: defaults the functions' keywords had (a function overrides one with ``defaults=``)
FLAT_DEFAULTS: dict[str, Any] = {
    "policies": (DEFAULT_POLICY,),
    "prefix_tokens": None,
    "suffix_tokens": None,
    "prefix_field": None,
    "suffix_field": None,
    "stride": None,
    "prompt_templates": (),
    "chat_template": False,
    "aggregate": "max",
    "near_verbatim": (),
    "beams": (),
    "sot": None,
    "device": None,
    "device_map": None,
    "max_memory": None,
    "offload_folder": None,
    "dtype": None,
    "backend": DEFAULT_BACKEND,
    "address": None,
    "workers": None,
    "gpus_per_worker": DEFAULT_GPUS_PER_WORKER,
    "threads_per_worker": DEFAULT_THREADS_PER_WORKER,
    "batch_size": DEFAULT_BATCH_SIZE,
    "unit_size": DEFAULT_UNIT_SIZE,
    "threads": None,
    "allow_pickle": False,
    "trust_remote_code": False,
    "url": None,
    "api_key_env": None,
    "api_key_file": None,
    "served_model": None,
    "max_concurrency": None,
    "served_bounds": False,
    "text_field": None,
    "id_field": None,
    "input_format": None,
}


def procedure_flat(p: Procedure) -> dict[str, Any]:
    """A procedure as its flat options (the inverse of :meth:`Procedure.options`).

    >>> procedure_flat(Procedure.options(prefix_tokens=8, chat_template=True))["prompt_templates"]
    ()
    """
    nv = p.near_verbatim
    chat_default = p.prompt.chat and p.prompt.templates == ("{prefix}",)
    return {
        "policies": tuple(p.policies),
        "prefix_tokens": p.windows.prefix_tokens,
        "suffix_tokens": p.windows.suffix_tokens,
        "prefix_field": p.windows.prefix_field,
        "suffix_field": p.windows.suffix_field,
        "stride": p.windows.stride,
        "prompt_templates": () if chat_default else tuple(p.prompt.templates),
        "chat_template": p.prompt.chat,
        "aggregate": p.prompt.aggregate,
        "near_verbatim": tuple(nv.epsilons) if nv else (),
        # the default beam is no beam given (so a value and the flat keywords it came from agree;
        # an estimate refuses --beam, issue 27)
        "beams": tuple(nv.beams) if nv and nv.beams != (DEFAULT_BEAM,) else (),
        "sot": p.sot,
    }


def runtime_flat(rt: Runtime) -> dict[str, Any]:
    """A runtime as its flat options (the inverse of :meth:`Runtime.options`).

    >>> runtime_flat(Runtime.options(backend="ray", workers=2))["workers"]
    2
    """
    b = rt.backend
    spec = b if isinstance(b, BackendSpec) else None
    out = {
        **rt.placement.load_kwargs(),
        "backend": spec.kind if spec is not None else b,
        "address": spec.address if spec else None,
        "workers": spec.workers if spec else None,
        "gpus_per_worker": spec.gpus_per_worker if spec else DEFAULT_GPUS_PER_WORKER,
        "threads_per_worker": spec.threads_per_worker if spec else DEFAULT_THREADS_PER_WORKER,
        "batch_size": rt.batch_size,
        "unit_size": rt.unit_size,
        "threads": rt.threads,
        "allow_pickle": rt.allow_pickle,
        "trust_remote_code": rt.trust_remote_code,
    }
    opts = dict(spec.options) if spec else {}
    for k in SERVED_OPTIONS:
        out[k] = opts.get(k, FLAT_DEFAULTS[k])
    return out


_Settings = TypeVar("_Settings", Procedure, Runtime)


def _given(
    value: Any, kind: type[_Settings], flat: Callable[[_Settings], dict[str, Any]]
) -> dict[str, Any]:
    """The options ``value`` (a Procedure/Runtime, or a dict of its options) sets: a dict's keys,
    or a value's fields that differ from a default value's."""
    if value is None:
        return {}
    if isinstance(value, Mapping) and not (
        kind is Procedure and any(k in value for k in ("start_of_text", "prompt", "model"))
    ):
        return dict(value)
    made = kind.coerce(value)
    mine, default = flat(made), flat(kind())
    return {k: v for k, v in mine.items() if v != default[k]}


@dataclass(frozen=True)
class Options:
    """What :func:`take_options` returns: the call's ``procedure`` and ``runtime`` (unbound
    values, validated), and every flat option's
    effective value (``o["batch_size"]``, or several at once with :meth:`get`); ``name in o``:
    whether the option was given (as a keyword, or by one of the values)."""

    procedure: Procedure | None
    runtime: Runtime | None
    flat: dict[str, Any] = field(repr=False)
    given: frozenset[str] = frozenset()

    def __getitem__(self, name: str) -> Any:
        return self.flat[name]

    def __contains__(self, name: str) -> bool:
        return name in self.given

    def get(self, *names: str) -> tuple:
        """The effective values of ``names``, in order."""
        return tuple(self.flat[n] for n in names)


def _keys(typed: type) -> tuple[str, ...]:
    """A TypedDict's keys, its bases' first (in the order they are declared)."""
    return tuple(typed.__annotations__)


def _refuse_twice(fname: str, what: str, given: Mapping, flat_given: Mapping) -> None:
    twice = [k for k in flat_given if k in given]
    if twice:
        k = twice[0]
        raise KeywordError(
            f"{fname}() got {k} twice: {what}= sets {k}={_short(given[k])} and the keyword "
            f"{k}={_short(flat_given[k])}",
            hint=f"give {k} once: in {what}= or as {k}=, not both",
        )


def take_options(
    fn: Callable | str,
    typed: type,
    options: Mapping[str, Any],
    *,
    procedure: Procedure | Mapping | None = None,
    runtime: Runtime | Mapping | None = None,
    defaults: Mapping[str, Any] | None = None,
    values: Sequence[str] = ("procedure", "runtime"),
) -> Options:
    """A public call's flat keywords ``options`` (those of the TypedDict ``typed``) with its
    ``procedure`` and ``runtime`` values, checked and combined once: an unknown keyword is
    refused naming the closest one (``fn``: the public function, or its name; its own
    parameters are named in the hint too), a field set both by a value and by its keyword is refused naming both values, and
    every option of ``typed`` gets its effective value (the keyword, else the value's field,
    else the function's default: :data:`FLAT_DEFAULTS` overridden by ``defaults``). ``values``:
    which of the two values the function takes (a function that loads a model but scores no
    procedure of its own takes only ``runtime``).

    >>> take_options("score", ScoreOptions, {"batch_sise": 8})
    Traceback (most recent call last):
    memclaim.api._public.KeywordError: score() got an unknown keyword batch_sise=8
      fix: did you mean batch_size=? ...
    >>> take_options("score", ScoreOptions, {"threads": 4}, runtime=Runtime(threads=2))
    Traceback (most recent call last):
    memclaim.api._public.KeywordError: score() got threads twice: runtime= sets threads=2 and the keyword threads=4
      fix: give threads once: in runtime= or as threads=, not both
    """
    if isinstance(fn, str):
        fname, explicit = fn, []
    else:
        fname = fn.__name__
        explicit = [
            n
            for n, p in inspect.signature(fn).parameters.items()
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        ]
    names = _keys(typed)
    for k, v in options.items():
        if k not in names:
            valid = [*explicit, *names]
            close = difflib.get_close_matches(k, valid, n=1, cutoff=0.6)
            raise KeywordError(
                f"{fname}() got an unknown keyword {k}={_short(v)}",
                hint=(f"did you mean {close[0]}=? " if close else "")
                + f"{fname}() takes "
                + ", ".join(valid),
            )
    base = {k: FLAT_DEFAULTS[k] for k in names if k in FLAT_DEFAULTS}
    base.update({k: v for k, v in (defaults or {}).items() if k in names})
    flat = dict(base)
    proc_keys = [k for k in names if k in PROCEDURE_OPTIONS]
    rt_keys = [k for k in names if k in RUNTIME_OPTIONS or k in SERVED_OPTIONS]
    proc = rt = None
    if "procedure" in values:
        pg = _given(procedure, Procedure, procedure_flat)
        stray = [k for k in pg if k not in proc_keys]
        if stray:
            if stray[0] not in PROCEDURE_OPTIONS:
                Procedure.options(**{stray[0]: pg[stray[0]]})  # refused, naming the closest
            raise KeywordError(
                f"{fname}() has no procedure setting {stray[0]} (procedure= sets "
                f"{stray[0]}={_short(pg[stray[0]])})",
                hint=f"{fname}() takes the procedure settings " + ", ".join(proc_keys),
            )
        _refuse_twice(fname, "procedure", pg, {k: options[k] for k in proc_keys if k in options})
        flat.update({k: v for k, v in pg.items() if k in proc_keys})
        proc = Procedure.coerce(procedure, **{k: options[k] for k in proc_keys if k in options})
    elif procedure is not None:
        raise KeywordError(f"{fname}() takes no procedure=", hint="drop procedure=")
    if "runtime" in values:
        rg = _given(runtime, Runtime, runtime_flat)
        _refuse_twice(fname, "runtime", rg, {k: options[k] for k in rt_keys if k in options})
        stray = [k for k in rg if k not in rt_keys]
        if stray:
            if stray[0] not in RUNTIME_OPTIONS and stray[0] not in SERVED_OPTIONS:
                Runtime.options(**{stray[0]: rg[stray[0]]})  # refused, naming the closest
            raise KeywordError(
                f"{fname}() has no runtime setting {stray[0]} (runtime= sets "
                f"{stray[0]}={_short(rg[stray[0]])})",
                hint=f"{fname}() takes the runtime settings " + ", ".join(rt_keys),
            )
        flat.update(rg)
        rt = Runtime.coerce(runtime, **{k: options[k] for k in rt_keys if k in options})
    elif runtime is not None:
        raise KeywordError(f"{fname}() takes no runtime=", hint="drop runtime=")
    flat.update(options)
    given = set(options)
    if proc is not None:
        given.update(k for k in pg if k in proc_keys)
    if rt is not None:
        given.update(rg)
    return Options(procedure=proc, runtime=rt, flat=flat, given=frozenset(given))


def coerce_settings(fname: str, kind: type, value: Any, flat_given: Mapping[str, Any]) -> Any:
    """A settings value (a dataclass ``kind``, or a dict of its fields) with the flat keywords
    ``flat_given`` (field name -> value) over it; a field set by both is refused naming both.

    >>> from dataclasses import make_dataclass
    >>> S = make_dataclass("S", [("k", int, 1)], frozen=True)
    >>> coerce_settings("f", S, {"k": 2}, {}).k
    2
    """
    if value is None:
        return None
    if isinstance(value, Mapping):
        known = [f.name for f in fields(kind)]
        for k in value:
            if k not in known:
                close = difflib.get_close_matches(k, known, n=1, cutoff=0.6)
                raise KeywordError(
                    f"{fname}() settings have no field {k}",
                    hint=(f"did you mean {close[0]}? " if close else "")
                    + f"the settings' fields are {', '.join(known)}",
                )
        given = dict(value)
        value = kind(**value)
    elif is_dataclass(value) and isinstance(value, kind):
        default = kind()
        given = {
            f.name: getattr(value, f.name)
            for f in fields(kind)
            if getattr(value, f.name) != getattr(default, f.name)
        }
    else:
        raise KeywordError(
            f"{fname}() settings= takes a {kind.__name__} or a dict of its fields, got "
            f"{type(value).__name__}",
            hint=f"e.g. settings={kind.__name__}(...)",
        )
    _refuse_twice(fname, "settings", given, flat_given)
    return value
