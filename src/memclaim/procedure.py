"""The extraction procedure as one value ([EM] Def. B.2): (model theta, decoding policies phi,
prompt rule f_P, score, verify), plus how the scored windows are cut and the near-verbatim
settings. It sits one floor below scoring and claims (pure Python: no torch, no I/O), so the
scoring run records it, the store keys its units by it and the claims compare it, all with one
implementation.

A :class:`Procedure` is validated once, on construction; every part is a frozen value:

=================  =========================================================================
``model``          :class:`ModelIdentity`: name, source, fingerprint, dtype, device class
``start_of_text``  what every prompt starts with ({rule, ids, tokens}); ``sot``: the rule asked for
``policies``       decoding policy specs ([EM] Eq. 1); default :data:`DEFAULT_POLICY`
``windows``        :class:`WindowSpec`: prefix/suffix tokens or fields, stride
``prompt``         :class:`PromptSpec`: the prompt rule f_P ([EM] Eq. 14-15)
``near_verbatim``  :class:`NearVerbatim`: epsilons and beams ([EM] App. B.1 Eq. 2), or None
``backend``        the identity a backend adds to the key (a served model's id and version,
                   issue 27), or None: local and Ray scores are the model's, wherever computed
=================  =========================================================================

A procedure without a model is *unbound*: the settings of a call, before its model is loaded
(:meth:`Procedure.bind` adds the model's identity and start of text). Its record
(:meth:`Procedure.to_dict`) is the JSON the store writes and its key (:attr:`Procedure.key`)
names the store's units; both are exactly those of memclaim 0.2.0
(tests/data/fixtures/procedure_keys_v1.json), so no store key changes. Two results computed
under different procedures are never compared silently (:func:`require_same_procedure`).

>>> p = Procedure(policies=["full", "greedy"], windows=WindowSpec(prefix_tokens=16, suffix_tokens=16))
>>> p.policies, p.windows.lengths, p.bound
(('full', 'greedy'), (16, 16), False)
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np

from ._version import __version__
from .decoding import Policy, parse_policies
from .errors import DomainError, InputError, PolicyError, ProcedureMismatchError
from .jsonutil import short_repr
from .validate import integer

__all__ = [
    "Procedure",
    "ModelIdentity",
    "WindowSpec",
    "PromptSpec",
    "NearVerbatim",
    "DEFAULT_POLICY",
    "DEFAULT_PREFIX_TOKENS",
    "DEFAULT_SUFFIX_TOKENS",
    "DEFAULT_BEAM",
    "PROCEDURE_OPTIONS",
    "SCORE_NAME",
    "NUMERICS_FIELDS",
    "NUMERICS_DECLARED",
    "STORED_PROCEDURE_MAY_DIFFER",
    "procedure_differences",
    "numerics_differences",
    "require_same_procedure",
    "check_template",
    "AGGREGATES",
    "TARGET_RULES",
    "MAX_TEMPLATE_WIDTH",
    "aggregate_logq",
]

#: the default decoding policy of every command and function ([EM] §4: top-k sampling, k = 40,
#: the papers' policy); the one place it is written (tests/core/test_procedure.py checks src/)
DEFAULT_POLICY = "top-k:40"
#: one default window for every command, API function and audit that cuts windows ([EM] §4:
#: 50-token prefix and suffix)
DEFAULT_PREFIX_TOKENS = 50
DEFAULT_SUFFIX_TOKENS = 50
#: the near-verbatim beam width when none is given ([EM] App. B.1; 800 is the paper's baseline)
DEFAULT_BEAM = 16

SCORE_NAME = "teacher-forced log q_{theta,phi}(suffix | prompt), natural log, float64"
VERIFY = "conformal test against matched non-member controls ([EM] §3); applied by `memclaim test`"
# fields that describe but do not change the numbers; excluded from the key
_DISPLAY_ONLY = {
    ("model", "name"),
    ("model", "source"),
    ("model", "fingerprint_v1"),
    ("model", "url"),
}  # a served model's URL: the same server moved to another port is the same
# The numerics of a score: the class of the device that computed it and the body's dtype. Both
# are in the key (a unit scored on a GPU is never adopted by a CPU run, nor the reverse), but a
# CPU procedure leaves its device class out of the key, so every store written before device
# classes were recorded (all CPU) keeps its keys. A procedure recorded without a device class
# was computed on the CPU.
NUMERICS_FIELDS = ("model.device_class", "model.dtype")
DEFAULT_DEVICE_CLASS = "cpu"
#: the device classes a procedure records: the CPU, CUDA GPUs, a model behind a server (issue 27)
DEVICE_CLASSES = ("cpu", "cuda", "served")

# Fields of a procedure as the store records it (Procedure.to_dict, with the tested policy in
# "policy") that may differ between the candidates' and the controls' runs: which other policies
# were scored in the same pass, the model's display name and path (the fingerprint identifies
# the weights), the fingerprint an older memclaim recorded for the same folder
# (model.fingerprint_v1, kept beside the current one), the verify step's description, and the
# memclaim version that scored each run (0.2.0 computes the 0.1.0 scores it resumes; both runs'
# records stay in the report's inputs). Everything else (fingerprint, dtype, start-of-text
# rule, prompt rule, lengths, policy) must match.
STORED_PROCEDURE_MAY_DIFFER = (
    "policies_scored",
    "model.name",
    "model.source",
    "model.fingerprint_v1",
    "verify",
    "memclaim_version",
)

# The field a claim's procedure record gains when --allow-mixed-numerics (allow_mixed_numerics=True)
# declared scores computed on different device classes or dtypes comparable: the differences, as
# 'model.device_class: 'cpu' != 'cuda''; the report shows it with the procedure.
NUMERICS_DECLARED = "numerics_declared_comparable"


def _frozen(value: Any) -> Any:
    """Plain JSON-like data as immutable values (dicts as sorted item tuples are not needed: a
    mapping is kept as a dict copy, sequences as tuples), for the frozen parts of a procedure."""
    if isinstance(value, Mapping):
        return {str(k): _frozen(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    return value


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def _closest(name: str, names: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, list(names), n=1, cutoff=0.6)
    return f"did you mean {close[0]}? " if close else ""


# --------------------------------------------------------------------------- the model
@dataclass(frozen=True)
class ModelIdentity:
    """Which model computed the scores: its display name and source (not in the key), the
    fingerprint of what determines its scores, the body's dtype and the device class whose
    numerics the scores have (``cpu`` or ``cuda``; None in a record from before device classes
    were recorded, which was computed on the CPU). ``extra``: other recorded fields, kept as
    read (``fingerprint_v1``, the fingerprint an older memclaim recorded for the same folder).

    >>> ModelIdentity("toy", "toy", "ab" * 32, "float32").to_dict()["device_class"]
    'cpu'
    """

    name: str
    source: str
    fingerprint: str
    dtype: str
    device_class: str | None = DEFAULT_DEVICE_CLASS
    fingerprint_scheme: int | None = (
        None  # what the fingerprint hashes (models.loader); None: 0.1.0's
    )
    extra: Mapping = field(default_factory=dict)

    def __post_init__(self):
        for f in ("name", "source", "fingerprint", "dtype"):
            _model_text(f, getattr(self, f))
        if self.device_class is not None and self.device_class not in DEVICE_CLASSES:
            raise InputError(
                f"a procedure's device class is 'cpu', 'cuda' or 'served', got {self.device_class!r}",
                hint="the class of the device whose numerics the scores have ('served': a model "
                "scored through a server, docs/served.md)",
            )
        if self.fingerprint_scheme is not None:
            object.__setattr__(
                self,
                "fingerprint_scheme",
                integer("fingerprint scheme", self.fingerprint_scheme, minimum=1),
            )
        object.__setattr__(self, "extra", _frozen(dict(self.extra)))

    @classmethod
    def of(cls, model: Any, device_class: str | None = None) -> ModelIdentity:
        """The identity of a loaded model (:class:`memclaim.models.loader.LoadedModel`, or anything
        with its ``name``, ``source``, ``fingerprint``, ``dtype``), scored on ``device_class``
        (default: the model's own, else the CPU)."""
        scheme = getattr(model, "fingerprint_scheme", None)
        return cls(
            name=str(model.name),
            source=str(model.source),
            fingerprint=str(model.fingerprint),
            dtype=str(model.dtype),
            fingerprint_scheme=None if scheme is None else int(scheme),
            device_class=str(
                device_class or getattr(model, "device_class", None) or DEFAULT_DEVICE_CLASS
            ),
        )

    def to_dict(self) -> dict:
        d: dict = {
            "name": self.name,
            "source": self.source,
            "fingerprint": self.fingerprint,
            "dtype": self.dtype,
        }
        if self.fingerprint_scheme is not None:
            d["fingerprint_scheme"] = self.fingerprint_scheme
        if self.device_class is not None:
            d["device_class"] = self.device_class
        d.update(_plain(self.extra))
        return d

    @classmethod
    def from_dict(cls, d: Mapping) -> ModelIdentity:
        if not isinstance(d, Mapping):
            raise ProcedureMismatchError(
                f"a procedure's model is a record (a dict), got {type(d).__name__}: {d!r:.80}",
                hint="pass the procedure dicts recorded in the store or the report",
            )
        known = ("name", "source", "fingerprint", "dtype", "device_class", "fingerprint_scheme")
        return cls(  # a record missing one of the four is refused naming it (None)
            name=_model_text("name", d.get("name")),
            source=_model_text("source", d.get("source")),
            fingerprint=_model_text("fingerprint", d.get("fingerprint")),
            dtype=_model_text("dtype", d.get("dtype")),
            device_class=d.get("device_class"),
            fingerprint_scheme=d.get("fingerprint_scheme"),
            extra={k: v for k, v in d.items() if k not in known},
        )


def _model_text(f: str, v: Any) -> str:
    """``v``, a model identity's text field ``f``: refused unless a non-empty string."""
    if not isinstance(v, str) or not v:
        raise InputError(
            f"a procedure's model {f} must be a non-empty string, got {v!r}",
            hint="build the procedure from a loaded model (Procedure.bind)",
        )
    return v


# --------------------------------------------------------------------------- the windows
@dataclass(frozen=True)
class WindowSpec:
    """How the scored windows are cut ([EM] §4, §5): ``prefix_tokens`` + ``suffix_tokens`` tokens
    from the start of each text (default 50 + 50), every ``stride`` tokens of a document; or, for
    records with explicit prefix and suffix fields (``prefix_field``/``suffix_field``), the whole
    fields (a length None) or the last ``prefix_tokens`` tokens of the prefix field and the first
    ``suffix_tokens`` of the suffix field. A window set carries the spec it was cut with
    (:mod:`memclaim.text.windows`), so a run never records lengths its windows were not cut with.

    Only the lengths and the cut enter the procedure's key: which windows a document yields
    (the stride) and where the fields come from (their names) change no window's score.

    >>> WindowSpec().lengths, WindowSpec(prefix_field="context", suffix_field="verse").lengths
    ((50, 50), (None, None))
    """

    def __repr__(self) -> str:
        return short_repr(self)  # the fields that differ from their defaults

    prefix_tokens: int | None = None
    suffix_tokens: int | None = None
    prefix_field: str | None = None
    suffix_field: str | None = None
    stride: int | None = None
    fields: bool | None = None  # cut at explicit fields; None: whether a field is named

    def __post_init__(self):
        by_fields = (
            bool(self.fields)
            if self.fields is not None
            else (self.prefix_field is not None or self.suffix_field is not None)
        )
        object.__setattr__(self, "fields", by_fields)
        for f in ("prefix_field", "suffix_field"):
            v = getattr(self, f)
            if v is not None and (not isinstance(v, str) or not v):
                raise InputError(
                    f"--{f.replace('_', '-')} must name a field, got {v!r}",
                    hint="e.g. --prefix-field context",
                )
        if not by_fields:  # token windows: an omitted length is the default
            if self.prefix_tokens is None:
                object.__setattr__(self, "prefix_tokens", DEFAULT_PREFIX_TOKENS)
            if self.suffix_tokens is None:
                object.__setattr__(self, "suffix_tokens", DEFAULT_SUFFIX_TOKENS)
        if self.prefix_tokens is not None:
            object.__setattr__(
                self, "prefix_tokens", integer("--prefix-tokens", self.prefix_tokens, minimum=0)
            )
        if self.suffix_tokens is not None:
            object.__setattr__(
                self, "suffix_tokens", integer("--suffix-tokens", self.suffix_tokens, minimum=1)
            )
        if self.stride is not None:
            object.__setattr__(self, "stride", integer("stride", self.stride, minimum=1))

    @property
    def lengths(self) -> tuple[int | None, int | None]:
        return self.prefix_tokens, self.suffix_tokens

    def cut(self) -> dict | None:
        """The procedure's ``windows`` record: how windows were cut where it is not "prefix +
        suffix tokens from the start of each text" (None there, as records always were)."""
        if not self.fields:
            return None
        return {
            "prefix": "field" if self.prefix_tokens is None else "field, last prefix_tokens tokens",
            "suffix": "field"
            if self.suffix_tokens is None
            else "field, first suffix_tokens tokens",
        }

    def same_cut(self, other: WindowSpec) -> bool:
        """Whether windows cut with ``other`` are windows of this spec (lengths and cut; the
        stride and the field names change no window's score)."""
        return self.lengths == other.lengths and bool(self.fields) == bool(other.fields)

    def describe(self) -> str:
        if self.fields:
            side = lambda n, what: "the whole field" if n is None else f"{what} {n} tokens"  # noqa: E731
            return f"prefix {side(self.prefix_tokens, 'last')}, suffix {side(self.suffix_tokens, 'first')}"
        return f"{self.prefix_tokens} + {self.suffix_tokens} tokens"


# --------------------------------------------------------------------------- the prompt rule
AGGREGATES = ("max", "mean")
TARGET_RULES = ("rendered", "document")
#: the widest a template may pad a field ({prefix:>N}): a rendered prompt must fit a model's
#: context, and issue 25's {prefix:>100000000} took 18 GB before any check could see it
MAX_TEMPLATE_WIDTH = 100_000
# the standard format spec up to its width: [[fill]align][sign][z][#][0][width]
_SPEC_WIDTH = re.compile(r"(?:.?[<>=^])?[+\- ]?z?#?0?(\d*)")

_TARGET_RECORD = {
    "rendered": {
        "rule": "rendered",
        "text": "the window's suffix text; leading whitespace removed after the chat assistant header or a "
        "rendered prompt that is empty or ends in whitespace, kept after a prompt that ends mid-line",
        "tokens": "rendered prompt + target tokenized as one string; the target cut at the prompt's end by "
        "character offsets (a token across the cut is refused); the prompt tokenized alone; each "
        "prompt has its own target ids",
        "suffix_tokens": "selects the suffix text in document tokens; the target has as many tokens as that text "
        "has after the prompt (target_tokens in the store)",
        "suffix_field": "{suffix} is the suffix text without its leading whitespace",
    },
    "document": {
        "rule": "document",
        "tokens": "the window's suffix token ids from the document's tokenization; the prompt is tokenized alone",
    },
}


def check_template(t: object) -> str:
    """A prompt template, checked before any window is rendered: a string whose fields are
    {prefix} and {suffix} only, with format specs Python can apply, no field padded beyond
    :data:`MAX_TEMPLATE_WIDTH` characters (the cost is estimated from the spec, not found by
    rendering) and no spec that takes its width from the text (``{prefix:{suffix}}``).

    >>> check_template("Repeat: {prefix}")
    'Repeat: {prefix}'
    """
    if not isinstance(t, str):
        raise InputError(
            f"a prompt template must be a string, got {type(t).__name__} {t!r}",
            hint="e.g. prompt_templates=['Continue: {prefix}']",
        )
    try:
        parts = list(string.Formatter().parse(t))
    except ValueError as exc:
        raise InputError(
            f"bad prompt template {t!r}: {exc}",
            hint="write fields as {prefix} or {suffix}; double braces {{ }} for literal ones",
        ) from None
    names = {f for _, f, _, _ in parts if f is not None}
    bad = names - {"prefix", "suffix"}
    if bad:
        raise InputError(
            f"prompt template {t!r} uses unknown fields {sorted(bad)}",
            hint="only {prefix} and {suffix} are filled in",
        )
    for _, f, spec, _ in parts:
        if f is None or not spec:
            continue
        if "{" in spec:
            raise InputError(
                f"prompt template {t!r}: the format spec {spec!r} of {{{f}}} is filled from the text",
                hint=f"write {{{f}}} (or a fixed spec such as {{{f}:>20}})",
            )
        m = _SPEC_WIDTH.match(spec)
        assert m is not None  # every part of the pattern is optional: it matches any spec
        width = m.group(1)
        if width and int(width) > MAX_TEMPLATE_WIDTH:
            raise InputError(
                f"prompt template {t!r} pads {{{f}}} to {int(width):,} characters (format spec "
                f"{spec!r}): every window's prompt would be that long, far more than any model's "
                f"context holds, and tokenizing one takes about {int(width) * 180 / 2**30:.2g} GiB "
                "(about 180 bytes a character)",
                hint=f"write {{{f}}} without a width (memclaim accepts widths up to "
                f"{MAX_TEMPLATE_WIDTH:,} characters)",
            )
    try:
        t.format(prefix="x", suffix="x")
    except (ValueError, TypeError) as exc:
        raise InputError(
            f"bad prompt template {t!r}: {exc}",
            hint="use format specs for text, e.g. {prefix} or {prefix:>20}",
        ) from None
    return t


@dataclass(frozen=True)
class PromptSpec:
    """The prompt rule f_P ([EM] Def. B.2, Eq. 14-15): the natural prefix (no templates), or
    templates filled with the window's {prefix}/{suffix} text, optionally in the model's chat
    template; several prompts per candidate are aggregated by ``max`` or ``mean`` of the
    probabilities ([EM] Eq. 15). ``target``: what a templated procedure scores ('rendered': the
    suffix text where it stands after the prompt; 'document': the document's suffix tokens).
    The rendering itself is :class:`memclaim.scoring.prompts.PromptRule`'s.

    >>> PromptSpec(templates=["Repeat after me: {suffix}\\n"]).kind, PromptSpec(chat=True).templates
    ('template', ('{prefix}',))
    """

    def __repr__(self) -> str:
        return short_repr(self)  # the fields that differ from their defaults

    templates: tuple[str, ...] = ()  # empty: the natural prefix
    chat: bool = False  # wrap each rendered prompt in the model's chat template
    aggregate: str = "max"
    target: str = "rendered"  # templated procedures: see memclaim.scoring.prompts
    # the recorded description of the target rule where it differs from this version's (a record
    # written by another version is read back as written); None: this version's
    target_record: Mapping | None = field(default=None, repr=False)

    def __post_init__(self):
        templates = self.templates
        if isinstance(templates, str):
            templates = (templates,)
        try:
            templates = tuple(templates or ())
        except TypeError:
            raise InputError(
                f"prompt_templates must be a template string or a list of them, got "
                f"{type(self.templates).__name__} {self.templates!r}",
                hint="e.g. prompt_templates=['Continue: {prefix}']",
            ) from None
        object.__setattr__(self, "templates", templates)
        object.__setattr__(self, "chat", bool(self.chat))
        if self.aggregate not in AGGREGATES:
            raise InputError(
                f"unknown prompt aggregate {self.aggregate!r}", hint="use 'max' or 'mean'"
            )
        if self.target not in TARGET_RULES:
            raise InputError(
                f"unknown target rule {self.target!r}", hint="use 'rendered' or 'document'"
            )
        for t in self.templates:
            check_template(t)
        if self.chat and not self.templates:
            object.__setattr__(self, "templates", ("{prefix}",))
        if self.target_record is not None:
            object.__setattr__(self, "target_record", _frozen(dict(self.target_record)))

    @property
    def kind(self) -> str:
        if not self.templates:
            return "natural-prefix"
        return "chat-template" if self.chat else "template"

    @property
    def n_prompts(self) -> int:
        return max(1, len(self.templates))

    def spec(self) -> PromptSpec:
        """This rule as a plain :class:`PromptSpec` (what a procedure holds)."""
        return PromptSpec(
            templates=self.templates,
            chat=self.chat,
            aggregate=self.aggregate,
            target=self.target,
            target_record=self.target_record,
        )

    def to_dict(self) -> dict:
        d = {
            "kind": self.kind,
            "templates": list(self.templates),
            "chat": self.chat,
            "aggregate": self.aggregate if self.n_prompts > 1 else None,
        }
        if self.templates:  # natural-prefix records stay as they were (their keys must not change)
            d["target"] = (
                _plain(self.target_record)
                if self.target_record is not None
                else dict(_TARGET_RECORD[self.target])
            )
        return d

    @classmethod
    def from_dict(cls, d: Mapping) -> PromptSpec:
        """A recorded prompt rule ({kind, templates, chat, aggregate[, target]}) read back exactly."""
        if not isinstance(d, Mapping):
            raise ProcedureMismatchError(
                f"a procedure's prompt is a record (a dict), got {type(d).__name__}: {d!r:.80}",
                hint="pass the procedure dicts recorded in the store or the report",
            )
        templates = tuple(d.get("templates") or ())
        chat = bool(d.get("chat", False)) or d.get("kind") == "chat-template"
        target_rec = d.get("target")
        rule = "rendered"
        if isinstance(target_rec, Mapping):
            rule = str(target_rec.get("rule", "rendered"))
        return cls(
            templates=templates,
            chat=chat,
            aggregate=d.get("aggregate") or "max",
            target=rule,
            target_record=None
            if target_rec is None or target_rec == _TARGET_RECORD.get(rule)
            else target_rec,
        )


def aggregate_logq(values: np.ndarray, how: str, axis: int = -1) -> np.ndarray:
    """[EM] Eq. 15: score(s) = agg over prompts of score_p(s), on log q values.
    'max' is the max; 'mean' is log(mean of q) = logsumexp - log n (stable for -inf).

    >>> q = np.log([[0.2, 0.4]])  # one candidate, two prompts
    >>> np.exp(aggregate_logq(q, "max")).round(6).tolist(), np.exp(aggregate_logq(q, "mean")).round(6).tolist()
    ([0.4], [0.3])
    """
    values = np.asarray(values, dtype=np.float64)
    if how == "max":
        return values.max(axis=axis)
    if how == "mean":
        n = values.shape[axis]
        m = values.max(axis=axis, keepdims=True)
        safe = np.where(np.isfinite(m), m, 0.0)
        with np.errstate(divide="ignore"):
            out = (
                np.log(np.exp(values - safe).sum(axis=axis))
                + np.squeeze(safe, axis=axis)
                - math.log(n)
            )
        return out
    raise InputError(f"unknown aggregate {how!r}", hint="use 'max' or 'mean'")


# --------------------------------------------------------------------------- near-verbatim
def _edit_counts(value, what: str) -> tuple[int, ...]:
    """Whole numbers given as one int or a sequence of ints; a string is not a sequence of ints
    ('12' is not [1, 2]), nor is a bool or a float with a fraction."""
    if isinstance(value, (str, bytes)):
        raise InputError(
            f"{what} must be whole numbers, got the string {value!r}",
            hint=f"pass a list of integers, e.g. {what}=[1, 2] (a string is read as nothing else)",
        )
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = (value,)
    try:
        items = list(value)
    except TypeError:
        raise InputError(
            f"{what} must be whole numbers, got {type(value).__name__} {value!r}",
            hint=f"e.g. {what}=[1, 2]",
        ) from None
    return tuple(integer(what, v) for v in items)


@dataclass(frozen=True)
class NearVerbatim:
    """Near-verbatim settings ([EM] App. B.1 Eq. 2, §6): the token edit distances ``epsilons`` of
    the certified lower bound on q(B_eps(s) | p), each searched with every beam width of
    ``beams`` (the union is reported). Sorted and without repeats.

    >>> NearVerbatim(epsilons=(2, 1, 1)).to_dict()
    {'epsilons': [1, 2], 'beams': [16]}
    """

    epsilons: tuple[int, ...]
    beams: tuple[int, ...] = (DEFAULT_BEAM,)

    def __post_init__(self):
        raw_eps = _edit_counts(self.epsilons, "near_verbatim")
        raw_beams = _edit_counts(self.beams, "beams")
        if not raw_eps:
            raise InputError(
                "near-verbatim settings name no epsilon", hint="e.g. --near-verbatim 1"
            )
        if min(raw_eps) < 0:
            raise DomainError(
                f"near-verbatim epsilon must be a whole number of token edits >= 0, got "
                f"{list(raw_eps)}",
                hint="e.g. --near-verbatim 1 (one token substitution, insertion or deletion)",
            )
        if not raw_beams or min(raw_beams) < 1:
            raise DomainError(
                f"beam width must be >= 1, got {list(raw_beams)}", hint="e.g. --beam 16"
            )
        object.__setattr__(self, "epsilons", tuple(sorted(set(raw_eps))))
        object.__setattr__(self, "beams", tuple(sorted(set(raw_beams))))

    @classmethod
    def of(cls, epsilons=(), beams=()) -> NearVerbatim | None:
        """From the flat options ``near_verbatim`` (epsilons) and ``beams``: None without
        epsilons; beams without epsilons are refused (they apply to --near-verbatim).

        >>> NearVerbatim.of([2, 1], 8)
        NearVerbatim(epsilons=(1, 2), beams=(8,))
        """
        eps = _edit_counts(epsilons if epsilons is not None else (), "near_verbatim")
        bms = _edit_counts(beams if beams is not None else (), "beams")
        if bms and not eps:
            raise InputError("--beam applies to --near-verbatim", hint="add --near-verbatim EPS")
        if not eps:
            return None
        return cls(epsilons=eps, beams=bms or (DEFAULT_BEAM,))

    def to_dict(self) -> dict:
        return {"epsilons": list(self.epsilons), "beams": list(self.beams)}

    @classmethod
    def from_dict(cls, d: Mapping | None) -> NearVerbatim | None:
        if not d:
            return None
        if not isinstance(d, Mapping):
            raise InputError(
                f"near-verbatim settings are a record {{'epsilons': [...], 'beams': [...]}}, got {d!r:.80}"
            )
        if not d.get("epsilons"):
            return None
        return cls(epsilons=tuple(d["epsilons"]), beams=tuple(d.get("beams") or (DEFAULT_BEAM,)))


# --------------------------------------------------------------------------- the procedure
#: the flat options a public function accepts as shortcuts for its procedure (``procedure=``
#: given as a dict uses the same names)
PROCEDURE_OPTIONS = (
    "policies",
    "prefix_tokens",
    "suffix_tokens",
    "prefix_field",
    "suffix_field",
    "stride",
    "prompt_templates",
    "chat_template",
    "aggregate",
    "near_verbatim",
    "beams",
    "sot",
)
_WINDOW_OPTIONS = ("prefix_tokens", "suffix_tokens", "prefix_field", "suffix_field", "stride")
_PROMPT_OPTIONS = {
    "prompt_templates": "templates",
    "chat_template": "chat",
    "aggregate": "aggregate",
}
# the record's top-level fields (Procedure.to_dict)
_RECORD_FIELDS = (
    "model",
    "start_of_text",
    "policies",
    "prefix_tokens",
    "suffix_tokens",
    "prompt",
    "near_verbatim",
    "score",
    "verify",
    "memclaim_version",
    "windows",
    "backend",
)


def _policy_specs(policies) -> tuple[str, ...]:
    """Decoding policies from a spec string, Policy objects or a sequence of either; None is the
    default (:data:`DEFAULT_POLICY`). An empty sequence names no policy and is refused: it must
    not silently mean the default (issue 25). Duplicates are dropped, the order kept."""
    if policies is None:
        policies = (DEFAULT_POLICY,)
    elif isinstance(policies, (str, Policy)):
        policies = (policies,)
    else:
        try:
            policies = list(policies)
        except TypeError:
            raise PolicyError(
                f"policies must be a policy string or a list of them, got {type(policies).__name__} "
                f"{policies!r}",
                hint=f"e.g. policies=['{DEFAULT_POLICY}', 'greedy']",
            ) from None
        if not policies:
            raise PolicyError(
                "policies=[] names no decoding policy",
                hint=f"name at least one, e.g. policies=['{DEFAULT_POLICY}'], or leave policies out for "
                f"the default {DEFAULT_POLICY}",
            )
    bad = [p for p in policies if not isinstance(p, (str, Policy))]
    if bad:
        raise PolicyError(
            f"a decoding policy is a string such as '{DEFAULT_POLICY}', got {type(bad[0]).__name__} "
            f"{bad[0]!r}",
            hint="e.g. policies=['full', 'greedy', 'temperature:0.7']",
        )
    return tuple(p.spec for p in parse_policies(policies))


def _sot_rule(sot) -> str | None:
    if sot is None:
        return None
    if not isinstance(sot, str) or not sot.strip():
        raise InputError(
            f"--sot must be a start-of-text rule (auto, none, bos, eos, a token or ids), got {sot!r}",
            hint="e.g. --sot bos, or leave it out for the model's own rule",
        )
    return sot


@dataclass(frozen=True)
class Procedure:
    """The extraction procedure of a scoring run ([EM] Def. B.2), validated on construction (see
    the module docstring for the parts). Build it from the flat options with
    :meth:`Procedure.options` (what every public function's shortcuts do), read a recorded one
    with :meth:`from_dict`, and bind it to a loaded model with :meth:`bind`.

    >>> p = Procedure.options(policies=["full"], prefix_tokens=8, suffix_tokens=8, near_verbatim=[1])
    >>> p.policies, p.windows.lengths, p.near_verbatim.to_dict()
    (('full',), (8, 8), {'epsilons': [1], 'beams': [16]})
    >>> Procedure.options(policy="full")
    Traceback (most recent call last):
    memclaim.errors.InputError: unknown procedure option policy='full'
      fix: did you mean policies? The procedure's options are policies, prefix_tokens, suffix_tokens, prefix_field, suffix_field, stride, prompt_templates, chat_template, aggregate, near_verbatim, beams, sot
    """

    def __repr__(self) -> str:
        return short_repr(self)  # the fields that differ from their defaults

    model: ModelIdentity | None = None
    start_of_text: Mapping | None = None  # {rule, ids, tokens}: what every prompt starts with
    policies: tuple[str, ...] = (DEFAULT_POLICY,)
    windows: WindowSpec = field(default_factory=WindowSpec)
    prompt: PromptSpec = field(default_factory=PromptSpec)
    near_verbatim: NearVerbatim | None = None
    sot: str | None = None  # the start-of-text rule asked for (None: the model's own)
    backend: Mapping | None = (
        None  # identity a backend adds to the key (issue 27); None for local and Ray
    )
    score: str = SCORE_NAME
    verify: str = VERIFY
    memclaim_version: str = __version__

    def __post_init__(self):
        if isinstance(self.model, Mapping):
            object.__setattr__(self, "model", ModelIdentity.from_dict(self.model))
        elif self.model is not None and not isinstance(self.model, ModelIdentity):
            raise InputError(
                f"a procedure's model is a ModelIdentity (or its record), got {type(self.model).__name__}",
                hint="bind the procedure to a loaded model with Procedure.bind(model)",
            )
        if self.start_of_text is not None:
            sot = self.start_of_text
            if not isinstance(sot, Mapping) or "rule" not in sot:
                raise InputError(
                    f"a procedure's start of text is a record {{rule, ids, tokens}}, got {sot!r:.80}",
                    hint="bind the procedure to a loaded model with Procedure.bind(model)",
                )
            object.__setattr__(self, "start_of_text", _frozen(dict(sot)))
        if (self.model is None) != (self.start_of_text is None):
            raise InputError(
                "a bound procedure has both a model and a start of text",
                hint="use Procedure.bind(model)",
            )
        if not getattr(self, "_recorded", False):  # a record keeps its policy strings as written
            object.__setattr__(self, "policies", _policy_specs(self.policies))
        else:
            object.__setattr__(self, "policies", tuple(str(p) for p in self.policies))
            for p in self.policies:
                Policy.parse(p)
        if isinstance(self.windows, Mapping):
            object.__setattr__(self, "windows", WindowSpec(**self.windows))
        elif not isinstance(self.windows, WindowSpec):
            raise InputError(
                f"a procedure's windows are a WindowSpec, got {type(self.windows).__name__}"
            )
        if isinstance(self.prompt, Mapping):
            rec = "kind" in self.prompt
            object.__setattr__(
                self,
                "prompt",
                PromptSpec.from_dict(self.prompt) if rec else PromptSpec(**self.prompt),
            )
        elif isinstance(self.prompt, PromptSpec):
            object.__setattr__(self, "prompt", self.prompt.spec())
        else:
            raise InputError(
                f"a procedure's prompt is a PromptSpec, got {type(self.prompt).__name__}"
            )
        nv = self.near_verbatim
        if isinstance(nv, Mapping) or not nv:
            object.__setattr__(self, "near_verbatim", NearVerbatim.from_dict(nv or None))
        elif not isinstance(nv, NearVerbatim):
            raise InputError(
                f"a procedure's near-verbatim settings are NearVerbatim, got {type(nv).__name__}"
            )
        object.__setattr__(self, "sot", _sot_rule(self.sot))
        if self.backend is not None:
            if not isinstance(self.backend, Mapping) or not self.backend:
                raise InputError(
                    f"a backend's identity is a non-empty record, got {self.backend!r:.80}"
                )
            object.__setattr__(self, "backend", _frozen(dict(self.backend)))

    # ------------------------------------------------------------------ building
    @classmethod
    def options(cls, **options) -> Procedure:
        """An unbound procedure from the flat options of the public functions
        (:data:`PROCEDURE_OPTIONS`; an omitted option takes its default); an unknown option is
        refused naming the closest one."""
        return cls().with_options(**options)

    def with_options(self, **options) -> Procedure:
        """This procedure with some flat options replaced (the notebook shortcuts given beside
        ``procedure=``). A window cut by fields takes the whole fields unless lengths are given."""
        for k, v in options.items():
            if k not in PROCEDURE_OPTIONS:
                raise InputError(
                    f"unknown procedure option {k}={v!r:.60}",
                    hint=_closest(k, PROCEDURE_OPTIONS)
                    + "The procedure's options are "
                    + ", ".join(PROCEDURE_OPTIONS),
                )
        if not options:
            return self
        changes: dict = {}
        if "policies" in options:
            changes["policies"] = options["policies"]
        win = {k: options[k] for k in _WINDOW_OPTIONS if k in options}
        if win:
            w = self.windows
            lengths = w.lengths
            if not w.fields and (
                win.get("prefix_field") is not None or win.get("suffix_field") is not None
            ):
                lengths = (None, None)  # fields: the whole fields unless told
            changes["windows"] = WindowSpec(
                prefix_tokens=win.get("prefix_tokens", lengths[0]),
                suffix_tokens=win.get("suffix_tokens", lengths[1]),
                prefix_field=win.get("prefix_field", w.prefix_field),
                suffix_field=win.get("suffix_field", w.suffix_field),
                stride=win.get("stride", w.stride),
            )
        pr = {_PROMPT_OPTIONS[k]: options[k] for k in _PROMPT_OPTIONS if k in options}
        if pr:
            p = self.prompt
            given = {k: v for k, v in pr.items() if not (k == "aggregate" and v is None)}
            templates = (
                p.templates
                if not (p.chat and p.templates == ("{prefix}",) and "templates" not in pr)
                else ()
            )
            changes["prompt"] = PromptSpec(
                templates=given.get("templates", templates),
                chat=given.get("chat", p.chat),
                aggregate=given.get("aggregate", p.aggregate),
                target=given.get("target", p.target),
            )
        if "near_verbatim" in options or "beams" in options:
            cur = self.near_verbatim
            eps = options.get("near_verbatim", cur.epsilons if cur else ())
            beams = options.get(
                "beams", cur.beams if cur and "near_verbatim" not in options else ()
            )
            changes["near_verbatim"] = NearVerbatim.of(eps, beams)
        if "sot" in options:
            changes["sot"] = options["sot"]
        return replace(self, **changes)

    @classmethod
    def coerce(cls, value: Procedure | Mapping | None, **options) -> Procedure:
        """The procedure of a public call: ``value`` (a Procedure; a dict of flat options, or a
        recorded procedure such as a store's or a report's) with the flat ``options`` over it.

        >>> Procedure.coerce({"policies": ["full"]}, prefix_tokens=8).windows.lengths
        (8, 50)
        """
        if value is None:
            base = cls()
        elif isinstance(value, Procedure):
            base = value
        elif isinstance(value, Mapping):
            if any(k in value for k in ("start_of_text", "memclaim_version", "prompt", "model")):
                base = cls.from_dict(value)
            else:
                base = cls.options(**dict(value))
        else:
            raise InputError(
                f"procedure= takes a memclaim Procedure or a dict of its options, got "
                f"{type(value).__name__}",
                hint="e.g. procedure={'policies': ['full'], 'prefix_tokens': 16}",
            )
        return base.with_options(**options)

    def bind(self, model: Any, *, device_class: str | None = None) -> Procedure:
        """This procedure for a loaded ``model`` scored on ``device_class`` (default: the model's):
        its identity and start of text. A procedure bound already (e.g. read from a store) must
        name the same model: a different fingerprint, dtype or start of text is refused.

        >>> from types import SimpleNamespace
        >>> m = SimpleNamespace(name="toy", source="toy", fingerprint="ab" * 32, dtype="float32",
        ...                     sot=SimpleNamespace(to_dict=lambda: {"rule": "auto", "ids": [0], "tokens": ["<s>"]}))
        >>> Procedure().bind(m).model.device_class
        'cpu'
        """
        ident = ModelIdentity.of(model, device_class=device_class)
        sot = dict(model.sot.to_dict())
        if self.model is not None:
            mine = {k: v for k, v in self.model.to_dict().items() if k in ("fingerprint", "dtype")}
            theirs = {k: v for k, v in ident.to_dict().items() if k in ("fingerprint", "dtype")}
            if mine != theirs or _plain(self.start_of_text) != sot:
                diffs = procedure_differences(
                    {"model": mine, "start_of_text": _plain(self.start_of_text)},
                    {"model": theirs, "start_of_text": sot},
                )
                raise ProcedureMismatchError(
                    f"the procedure was recorded for another model than {ident.name!r}: "
                    + "; ".join(diffs),
                    hint="load the model the procedure names (same files, dtype and --sot), or pass the procedure's "
                    "options without its model",
                )
            ident = replace(ident, extra=self.model.extra)
        return replace(self, model=ident, start_of_text=sot, sot=self.sot or sot.get("rule"))

    @property
    def bound(self) -> bool:
        return self.model is not None

    # ------------------------------------------------------------------ records
    @property
    def prefix_tokens(self) -> int | None:
        return self.windows.prefix_tokens

    @property
    def suffix_tokens(self) -> int | None:
        return self.windows.suffix_tokens

    @property
    def device_class(self) -> str:
        """The class of the device whose numerics the scores have (a record without one: the CPU)."""
        return (self.model.device_class if self.model is not None else None) or DEFAULT_DEVICE_CLASS

    def to_dict(self) -> dict:
        """The record the store writes (exactly memclaim 0.2.0's: ``windows`` only for windows cut
        by fields, ``backend`` only where a backend adds its identity)."""
        if self.model is None:
            raise InputError(
                "an unbound procedure has no record: it names no model yet",
                hint="bind it to the loaded model first (Procedure.bind)",
            )
        d = {
            "model": self.model.to_dict(),
            "start_of_text": _plain(self.start_of_text),
            "policies": list(self.policies),
            "prefix_tokens": self.windows.prefix_tokens,
            "suffix_tokens": self.windows.suffix_tokens,
            "prompt": self.prompt.to_dict(),
            "near_verbatim": None if self.near_verbatim is None else self.near_verbatim.to_dict(),
            "score": self.score,
            "verify": self.verify,
            "memclaim_version": self.memclaim_version,
        }
        cut = self.windows.cut()
        if cut is not None:  # absent for windows cut by token counts: records as before
            d["windows"] = cut
        if self.backend is not None:  # absent for the local and Ray backends: their keys as before
            d["backend"] = _plain(self.backend)
        return d

    @classmethod
    def from_dict(cls, d: Mapping) -> Procedure:
        """A recorded procedure (a store's ``procedures/<key>.json``, a report's procedure) read
        back; fields a claim adds beside it (``policy``, ``policies_scored``) are not part of it."""
        if not isinstance(d, Mapping):
            raise ProcedureMismatchError(
                f"expected a procedure record (a dict), got {type(d).__name__}: {d!r:.80}",
                hint="pass the procedure dicts recorded in the store or the report",
            )
        missing = [
            k
            for k in (
                "model",
                "start_of_text",
                "policies",
                "prefix_tokens",
                "suffix_tokens",
                "prompt",
            )
            if k not in d
        ]
        if missing:
            raise ProcedureMismatchError(
                f"the procedure record lacks {', '.join(missing)}",
                hint="pass the procedure dicts recorded in the store or the report",
            )

        def length(v):
            return None if v is None else int(v)

        cut = d.get("windows")
        windows = WindowSpec(
            prefix_tokens=length(d["prefix_tokens"]),
            suffix_tokens=length(d["suffix_tokens"]),
            fields=cut is not None,
        )
        p = cls._recorded_instance(
            model=ModelIdentity.from_dict(d["model"]),
            start_of_text=d["start_of_text"],
            policies=tuple(d["policies"]),
            windows=windows,
            prompt=PromptSpec.from_dict(d["prompt"]),
            near_verbatim=NearVerbatim.from_dict(d.get("near_verbatim")),
            sot=(d["start_of_text"] or {}).get("rule")
            if isinstance(d["start_of_text"], Mapping)
            else None,
            backend=d.get("backend"),
            score=d.get("score", SCORE_NAME),
            verify=d.get("verify", ""),
            memclaim_version=d.get("memclaim_version", "unknown"),
        )
        if cut is not None and cut != windows.cut():  # a cut no version of memclaim wrote
            raise ProcedureMismatchError(
                f"the procedure record's windows {cut!r} do not match its lengths "
                f"({windows.prefix_tokens}, {windows.suffix_tokens})",
                hint="pass the procedure dicts recorded in the store or the report",
            )
        return p

    @classmethod
    def _recorded_instance(cls, **kw) -> Procedure:
        obj = object.__new__(cls)
        object.__setattr__(obj, "_recorded", True)
        for f in fields(cls):
            object.__setattr__(obj, f.name, kw[f.name])
        obj.__post_init__()
        return obj

    def keyed_dict(self) -> dict:
        """The record as it enters the key: without the fields that describe but do not change the
        numbers (display name, source, an older fingerprint, the verify step), a CPU device class,
        the policies sorted (one pass scores them all) and near-verbatim settings that are None."""
        d = self.to_dict()
        d["model"] = {k: v for k, v in d["model"].items() if ("model", k) not in _DISPLAY_ONLY}
        if d["model"].get("device_class", DEFAULT_DEVICE_CLASS) == DEFAULT_DEVICE_CLASS:
            d["model"].pop("device_class", None)  # CPU procedures keep the keys they had before
        d.pop("verify", None)
        d["policies"] = sorted(
            d["policies"]
        )  # one pass scores them all: their order is not part of it
        if d.get("near_verbatim") is None:
            d.pop("near_verbatim", None)  # keys of verbatim-only procedures do not mention it
        return d

    @property
    def key(self) -> str:
        """The store key of this procedure: sha256 of its keyed record as sorted JSON."""
        return hashlib.sha256(json.dumps(self.keyed_dict(), sort_keys=True).encode()).hexdigest()

    def differences(self, other: Procedure, *, ignore: tuple[str, ...] = ()) -> list[str]:
        return procedure_differences(self.keyed_dict(), other.keyed_dict(), ignore=ignore)

    def describe(self) -> str:
        """One line for people: policies, windows, prompt rule, near-verbatim."""
        parts = [", ".join(self.policies), self.windows.describe(), self.prompt.kind]
        if self.near_verbatim is not None:
            parts.append(f"near-verbatim eps {list(self.near_verbatim.epsilons)}")
        return "; ".join(parts)


# --------------------------------------------------------------------------- comparing records
_ABSENT = "<absent>"


def _flatten(d, prefix=""):
    if not isinstance(d, dict):
        raise ProcedureMismatchError(
            f"expected a procedure record (a dict), got {type(d).__name__}: {d!r:.80}",
            hint="pass the procedure dicts recorded in the store or the report",
        )
    out = {}
    for k, v in d.items():
        name = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, name + "."))
        else:
            out[name] = v
    return out


def procedure_differences(a: dict, b: dict, *, ignore: tuple[str, ...] = ()) -> list[str]:
    """Every flattened field (``model.fingerprint``, ``prompt.kind``, ...) whose value differs,
    as 'field: a != b'. Missing fields show as <absent>; values are compared with their types
    (True is not 1), lists and tuples alike.

    >>> procedure_differences({"model": {"fingerprint": "a"}, "policy": "full"},
    ...                       {"model": {"fingerprint": "b"}, "policy": "full"})
    ["model.fingerprint: 'a' != 'b'"]
    """
    fa, fb = _flatten(a), _flatten(b)
    for f in (fa, fb):  # recorded before device classes were: computed on the CPU
        if "model.device_class" not in f and any(k.startswith("model.") for k in f):
            f["model.device_class"] = DEFAULT_DEVICE_CLASS
    diffs = []

    def norm(v):
        if isinstance(v, (list, tuple)):
            return ("seq", tuple(norm(x) for x in v))
        return (
            type(v).__name__ if not isinstance(v, (int, float)) or isinstance(v, bool) else "num",
            v,
        )

    for k in sorted(set(fa) | set(fb)):
        if any(k == i or k.startswith(i + ".") for i in ignore):
            continue
        va, vb = fa.get(k, _ABSENT), fb.get(k, _ABSENT)
        if (va is _ABSENT) != (vb is _ABSENT) or norm(va) != norm(vb):
            show = lambda v: v if v is _ABSENT else repr(v)  # noqa: E731
            diffs.append(f"{k}: {show(va)} != {show(vb)}")
    return diffs


def numerics_differences(a: dict, b: dict) -> list[str]:
    """The differences of ``a`` and ``b`` in :data:`NUMERICS_FIELDS` (device class, dtype).

    >>> numerics_differences({"model": {"dtype": "float32"}}, {"model": {"dtype": "bfloat16", "device_class": "cuda"}})
    ["model.device_class: 'cpu' != 'cuda'", "model.dtype: 'float32' != 'bfloat16'"]
    """
    return [d for d in procedure_differences(a, b) if d.split(":", 1)[0] in NUMERICS_FIELDS]


def require_same_procedure(
    a: dict,
    b: dict,
    *,
    what: tuple[str, str] = ("candidates", "controls"),
    ignore: tuple[str, ...] = ("policies",),
    allow_mixed_numerics: bool = False,
) -> list[str]:
    """Refuse to compare results from different procedures ([EM] Def. B.2, C.2); name every
    difference. ``ignore``: fields that may differ (flattened names, or their prefixes).

    Scores computed on different device classes (CPU, GPU) or body dtypes differ in their last
    bits and more (bfloat16 rounds every activation to 8 mantissa bits): they are refused too,
    unless ``allow_mixed_numerics`` declares them comparable. Returns the numerics differences
    so declared (empty when there are none), which the claim's report then states.

    >>> require_same_procedure({"policy": "full"}, {"policy": "greedy"})
    Traceback (most recent call last):
    memclaim.errors.ProcedureMismatchError: candidates and controls were scored under different procedures (1 field differ): policy: 'full' != 'greedy'
      fix: score both with the same model, policy, prompt rule and window lengths
    """
    diffs = procedure_differences(a, b, ignore=ignore)
    mixed = [d for d in diffs if d.split(":", 1)[0] in NUMERICS_FIELDS]
    if mixed and allow_mixed_numerics:
        diffs = [d for d in diffs if d not in mixed]
    elif mixed and len(mixed) == len(diffs):
        raise ProcedureMismatchError(
            f"{what[0]} and {what[1]} were scored with different numerics: "
            + "; ".join(mixed)
            + " (scores "
            "computed on another device class or in another dtype differ, so a threshold calibrated on one set does "
            "not carry over to the other)",
            hint="score both on the same device class and dtype (--device, --dtype), or pass --allow-mixed-numerics "
            "(allow_mixed_numerics=True) to declare them comparable; the report then says so",
        )
    if diffs:
        hint = "score both with the same model, policy, prompt rule and window lengths"
        schemes = [
            ((d or {}).get("model") or {}).get("fingerprint_scheme")
            if isinstance(d, dict)
            else None
            for d in (a, b)
        ]
        if any(k.startswith("model.fingerprint") for k in diffs) and (schemes[0] is None) != (
            schemes[1] is None
        ):
            old = what[0] if schemes[0] is None else what[1]
            hint = (
                f"the {old} were scored by memclaim 0.1.0, whose model fingerprint hashed every file of the model "
                "folder: run the same `memclaim score` command into that store once with the model (nothing is "
                "rescored) so the store records the current fingerprint, then test again"
            )
        raise ProcedureMismatchError(
            f"{what[0]} and {what[1]} were scored under different procedures ({len(diffs)} field"
            f"{'s' if len(diffs) > 1 else ''} differ): " + "; ".join(diffs),
            hint=hint,
        )
    return mixed if allow_mixed_numerics else []
