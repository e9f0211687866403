"""Score arrays and exact levels: the boundary every claim function goes through.

Scores are held in one internal convention, "higher = more memorized":

- ``log-prob``: natural-log probabilities log q_{theta,phi}(s | p), float64, ``-inf`` for an exact
  zero ([EM] Eq. 1). Probabilities are never exponentiated here.
- ``prob``: probabilities in [0, 1]; converted once to natural logs (0 -> ``-inf``).
- ``score``: an arbitrary real score from another method ([EM] App. H.1: adversarial
  compression, membership scores, other toolkits). The conformal test only uses the order of the
  scores, so it applies unchanged; thresholds in probability units, margins and budgets do not.

Levels (alpha, delta) are turned into exact fractions before any floor is taken: in floats
``floor(0.29 * 100)`` is 28, while the level the user typed, 29/100, gives 29.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from numbers import Integral

import numpy as np

from ..errors import DomainError, InputError

KINDS = ("log-prob", "prob", "score")
PROBABILITY_KINDS = ("log-prob", "prob")
LN10 = math.log(10.0)

# float32 sums of per-token log-probs can land a hair above 0 for a certain suffix.
_LOGPROB_SLACK = 1e-6


def controls_at_atom_hint(policy: str | None = None, *, binary_possible: bool = True) -> str:
    """The one fix memclaim gives when every control scores -inf (probability 0) under the tested
    policy, so no threshold can be calibrated ([EM] C.4.4): ``memclaim test``, ``population`` and
    ``census`` (and their API functions) all say this. ``policy``: the policy spec, when known.

    >>> "--policy full" in controls_at_atom_hint("top-k:40"), "larger top-k than 40" in controls_at_atom_hint("top-k:40")
    (True, True)
    """
    spec = str(policy) if policy is not None else ""
    larger = ""
    for part in spec.split(","):
        name, _, val = part.partition(":")
        if name == "top-k":
            larger = f" or a larger top-k than {val}"
        elif name == "top-p":
            larger = f" or a larger top-p than {val}"
    fix = (
        f"score under a policy that gives every token some probability, e.g. --policy full (the full "
        f"softmax){larger}: under {spec or 'the tested policy'} no control's suffix can "
        "be generated; if the prompts or tokenization of the controls are wrong (a template, the start-of-text "
        "rule), fix those first"
    )
    if binary_possible:
        fix += "; a greedy (binary) match score is read with --policy greedy or --binary"
    return fix


def parse_kind(kind: str) -> str:
    """The canonical score kind ('log-prob', 'prob' or 'score') of a spelling.

    >>> parse_kind("logprob"), parse_kind("Probability")
    ('log-prob', 'prob')
    """
    if not isinstance(kind, str):
        raise DomainError(
            f"score kind must be a string, got {kind!r}", hint=f"use one of {', '.join(KINDS)}"
        )
    k = kind.strip().lower().replace("_", "-")
    k = {
        "logprob": "log-prob",
        "log-probability": "log-prob",
        "logp": "log-prob",
        "probability": "prob",
        "p": "prob",
    }.get(k, k)
    if k not in KINDS:
        raise DomainError(f"unknown score kind {kind!r}", hint=f"use one of {', '.join(KINDS)}")
    return k


def is_probability_kind(kind: str) -> bool:
    """Whether scores of ``kind`` are (log-)probabilities (budgets and thresholds apply).

    >>> is_probability_kind("prob"), is_probability_kind("score")
    (True, False)
    """
    return parse_kind(kind) in PROBABILITY_KINDS


def as_scores(
    values: Sequence[float] | np.ndarray,
    *,
    kind: str,
    name: str = "scores",
    allow_empty: bool = False,
) -> np.ndarray:
    """Validate ``values`` and return float64 scores in the internal convention (see module doc).

    Raises :class:`InputError` naming the first bad entry (its index and value) and the fix.

    >>> as_scores([0.5, 0.0], kind="prob").tolist()  # probabilities -> natural logs
    [-0.6931471805599453, -inf]
    """
    kind = parse_kind(kind)
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(
            f"{name}: cannot read the values as numbers ({exc})",
            hint="pass a 1-D sequence of floats",
        ) from None
    if arr.ndim != 1:
        raise InputError(
            f"{name}: expected a 1-D array of scores, got shape {arr.shape}",
            hint="pass one score per item",
        )
    if arr.size == 0 and not allow_empty:
        raise InputError(f"{name} is empty", hint="pass at least one score")
    bad = np.flatnonzero(np.isnan(arr))
    if bad.size:
        raise InputError(
            f"{name}[{bad[0]}] is NaN ({bad.size} NaN values in all)",
            hint="a score must be a number; use -inf (log-prob) or 0 (prob) for an impossible suffix",
        )
    if kind == "log-prob":
        bad = np.flatnonzero(arr > _LOGPROB_SLACK)
        if bad.size:
            raise InputError(
                f"{name}[{bad[0]}] = {arr[bad[0]]!r} is not a log-probability (must be <= 0)",
                hint="pass natural-log probabilities, or declare --kind prob / --kind score",
            )
        return arr.copy()
    if kind == "prob":
        bad = np.flatnonzero((arr < 0) | (arr > 1))
        if bad.size:
            raise InputError(
                f"{name}[{bad[0]}] = {arr[bad[0]]!r} is not a probability in [0, 1]",
                hint="pass probabilities, or declare --kind log-prob / --kind score",
            )
        with np.errstate(divide="ignore"):
            return np.log(arr)
    return arr.copy()  # score: any real, +-inf allowed


# ------------------------------------------------------------------------------- exact levels
def exact_fraction(name: str, value: str | float | Fraction | Decimal) -> Fraction:
    """The exact rational a user meant: ``"0.29"``, ``0.29``, ``"0.1%"``, ``Fraction(1, 1000)``.

    A float is read through its shortest repr (``0.29`` -> 29/100), which is what the user
    typed, not the binary double (0.28999999999999998...).

    >>> exact_fraction("alpha", 0.29), exact_fraction("alpha", "0.1%"), exact_fraction("alpha", "1/1000")
    (Fraction(29, 100), Fraction(1, 1000), Fraction(1, 1000))
    """
    if isinstance(value, bool):
        raise DomainError(
            f"{name} must be a number, got {value!r}", hint=f"pass {name} as a number"
        )
    try:
        if isinstance(value, Fraction):
            return value
        if isinstance(value, Decimal):
            if not value.is_finite():
                raise DomainError(
                    f"{name} must be finite, got {value!r}", hint=f"pass a finite number for {name}"
                )
            return Fraction(value)
        if isinstance(value, Integral):
            return Fraction(int(value))
        if isinstance(value, float) or isinstance(value, np.floating):
            v = float(value)
            if not math.isfinite(v):
                raise DomainError(
                    f"{name} must be finite, got {value!r}", hint=f"pass a finite number for {name}"
                )
            return Fraction(Decimal(repr(v)))
        if isinstance(value, str):
            s = value.strip()
            pct = s.endswith("%")
            if pct:
                s = s[:-1].strip()
            if "/" in s:
                f = Fraction(s)
            else:
                d = Decimal(s)
                if not d.is_finite():
                    raise DomainError(
                        f"{name} must be finite, got {value!r}",
                        hint=f"pass a finite number for {name}",
                    )
                f = Fraction(d)
            return f / 100 if pct else f
    except DomainError:
        raise
    except (InvalidOperation, ValueError, ZeroDivisionError):
        raise DomainError(
            f"{name} must be a number such as 0.001, '0.1%' or '1/1000', got {value!r}",
            hint=f"write {name} as a decimal, a percentage or a fraction",
        ) from None
    raise DomainError(
        f"{name} must be a number, got {value!r} ({type(value).__name__})",
        hint=f"write {name} as a decimal, a percentage or a fraction",
    )


def exact_level(name: str, value: str | float | Fraction | Decimal) -> Fraction:
    """An exact level strictly between 0 and 1 (alpha, delta, FDR, FWER): the one parser of
    every level memclaim reads (the claims and the audits alike).

    >>> exact_level("alpha", "0.1%")
    Fraction(1, 1000)
    >>> exact_level("--fpr", "5%") == exact_level("--fpr", 0.05)
    True
    """
    f = exact_fraction(name, value)
    if not 0 < f < 1:
        raise DomainError(
            f"{name} must lie strictly between 0 and 1, got {value!r}",
            hint=f"e.g. {name}=0.001 for 0.1%",
        )
    return f


def floor_times(level: Fraction, m: int) -> int:
    """floor(level * m) in exact integer arithmetic.

    >>> floor_times(Fraction(1, 10), 39), floor_times(Fraction(1, 10), 40)
    (3, 4)
    """
    return (level.numerator * m) // level.denominator


def fraction_str(f: Fraction) -> str:
    """'K/N', or the integer when the denominator is 1.

    >>> fraction_str(Fraction(2, 41)), fraction_str(Fraction(3))
    ('2/41', '3')
    """
    return f"{f.numerator}/{f.denominator}" if f.denominator != 1 else str(f.numerator)


def log10_or_none(log_value: float) -> float:
    """Natural log -> log10 for humans (``-inf`` stays ``-inf``).

    >>> log10_or_none(math.log(1e-5)), log10_or_none(-math.inf)
    (-5.0, -inf)
    """
    return float(log_value) / LN10
