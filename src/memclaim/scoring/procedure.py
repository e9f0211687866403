"""An extraction procedure is a value ([EM] Def. B.2): (model theta, decoding policies phi,
prompt rule f_P, score, verify). It is recorded, with the model fingerprint and the package
version, in every result; two results under different procedures are never compared silently.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from .._version import __version__
from ..errors import ProcedureMismatchError
from ..fsutil import sha256_bytes

SCORE_NAME = "teacher-forced log q_{theta,phi}(suffix | prompt), natural log, float64"
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


@dataclass(frozen=True)
class Procedure:
    model: dict  # name, source, fingerprint, dtype
    start_of_text: dict  # rule, ids, tokens
    policies: tuple[str, ...]
    prefix_tokens: int | None
    suffix_tokens: int | None
    prompt: dict  # PromptRule.to_dict()
    near_verbatim: dict | None = None  # {"epsilons": [...], "beams": [...]} ([EM] App. B.1 Eq. 2)
    # how windows were cut where it is not "prefix_tokens + suffix_tokens from the start of each
    # text" (records with explicit prefix/suffix fields: WindowSet.cut); prefix_tokens or
    # suffix_tokens None there means the whole field
    windows: dict | None = None
    score: str = SCORE_NAME
    verify: str = (
        "conformal test against matched non-member controls ([EM] §3); applied by `memclaim test`"
    )
    memclaim_version: str = field(default=__version__)

    def to_dict(self) -> dict:
        d = {
            "model": dict(self.model),
            "start_of_text": dict(self.start_of_text),
            "policies": list(self.policies),
            "prefix_tokens": self.prefix_tokens,
            "suffix_tokens": self.suffix_tokens,
            "prompt": dict(self.prompt),
            "near_verbatim": None if self.near_verbatim is None else dict(self.near_verbatim),
            "score": self.score,
            "verify": self.verify,
            "memclaim_version": self.memclaim_version,
        }
        if self.windows is not None:  # absent for windows cut by token counts: records as before
            d["windows"] = dict(self.windows)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> Procedure:
        def length(v):
            return None if v is None else int(v)

        return cls(
            model=d["model"],
            start_of_text=d["start_of_text"],
            policies=tuple(d["policies"]),
            prefix_tokens=length(d["prefix_tokens"]),
            suffix_tokens=length(d["suffix_tokens"]),
            prompt=d["prompt"],
            near_verbatim=d.get("near_verbatim"),
            windows=d.get("windows"),
            score=d.get("score", SCORE_NAME),
            verify=d.get("verify", ""),
            memclaim_version=d.get("memclaim_version", "unknown"),
        )

    def keyed_dict(self) -> dict:
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
        return sha256_bytes(json.dumps(self.keyed_dict(), sort_keys=True).encode())

    def differences(self, other: Procedure, *, ignore: tuple[str, ...] = ()) -> list[str]:
        return procedure_differences(self.keyed_dict(), other.keyed_dict(), ignore=ignore)


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
