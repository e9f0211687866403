"""Boundary validation helpers. Each raises a :mod:`memclaim.errors` type naming the value."""

from __future__ import annotations

import math
from numbers import Integral, Real

from .errors import DomainError


def finite(name: str, value: float) -> float:
    """``value`` as a float, refused unless a finite real number (not a bool).

    >>> finite("alpha", 3)
    3.0
    >>> finite("alpha", float("nan"))
    Traceback (most recent call last):
    memclaim.errors.DomainError: alpha must be finite, got nan
      fix: pass a finite number for alpha
    """
    if isinstance(value, bool) or not isinstance(value, Real):
        raise DomainError(
            f"{name} must be a real number, got {value!r}", hint=f"pass {name} as a number"
        )
    v = float(value)
    if not math.isfinite(v):
        raise DomainError(
            f"{name} must be finite, got {value!r}", hint=f"pass a finite number for {name}"
        )
    return v


def positive(name: str, value: float, *, allow_inf: bool = False) -> float:
    """``value`` > 0 as a float (finite unless ``allow_inf``).

    >>> positive("epsilon", 1), positive("epsilon", float("inf"), allow_inf=True)
    (1.0, inf)
    """
    if isinstance(value, bool) or not isinstance(value, Real):
        raise DomainError(
            f"{name} must be a real number, got {value!r}", hint=f"pass {name} as a number"
        )
    v = float(value)
    if math.isnan(v) or v <= 0 or (math.isinf(v) and not allow_inf):
        raise DomainError(
            f"{name} must be {'> 0' if allow_inf else 'finite and > 0'}, got {value!r}",
            hint=f"pass a {'' if allow_inf else 'finite '}number > 0 for {name}",
        )
    return v


def nonneg(name: str, value: float) -> float:
    """``value`` >= 0 and finite, as a float.

    >>> nonneg("slack", 0)
    0.0
    """
    v = finite(name, value)
    if v < 0:
        raise DomainError(
            f"{name} must be >= 0, got {value!r}", hint=f"pass a number >= 0 for {name}"
        )
    return v


def in_open_unit(name: str, value: float) -> float:
    """0 < value < 1, as a float.

    >>> in_open_unit("delta", 0.05)
    0.05
    """
    v = finite(name, value)
    if not 0.0 < v < 1.0:
        raise DomainError(
            f"{name} must lie strictly between 0 and 1, got {value!r}",
            hint=f"pass a number in (0, 1) for {name}, e.g. 0.05",
        )
    return v


def in_unit(name: str, value: float, *, lo_open: bool = False, hi_open: bool = False) -> float:
    """``value`` in [0, 1] (either end open on request), as a float.

    >>> in_unit("rate", 1), in_unit("rate", 0.5, lo_open=True, hi_open=True)
    (1.0, 0.5)
    """
    v = finite(name, value)
    lo_ok = v > 0 if lo_open else v >= 0
    hi_ok = v < 1 if hi_open else v <= 1
    if not (lo_ok and hi_ok):
        lo = "(" if lo_open else "["
        hi = ")" if hi_open else "]"
        raise DomainError(
            f"{name} must lie in {lo}0, 1{hi}, got {value!r}", hint=f"pass a number in {lo}0, 1{hi}"
        )
    return v


def integer(
    name: str, value: int, *, minimum: int | None = None, maximum: int | None = None
) -> int:
    """``value`` as an int (a float with an integer value is accepted, a bool is not), within
    [``minimum``, ``maximum``] when given.

    >>> integer("--stride", 8.0, minimum=1)
    8
    """
    if isinstance(value, bool):  # True is an Integral, and 1.0: never a count
        raise DomainError(
            f"{name} must be an integer, got {value!r}", hint=f"pass a whole number for {name}"
        )
    if not isinstance(value, Integral):
        if isinstance(value, Real) and float(value).is_integer():
            value = int(value)
        else:
            raise DomainError(
                f"{name} must be an integer, got {value!r}", hint=f"pass a whole number for {name}"
            )
    v = int(value)
    if minimum is not None and v < minimum:
        raise DomainError(
            f"{name} must be >= {minimum}, got {v}", hint=f"pass a whole number >= {minimum}"
        )
    if maximum is not None and v > maximum:
        raise DomainError(
            f"{name} must be <= {maximum}, got {v}", hint=f"pass a whole number <= {maximum}"
        )
    return v


#: the largest seed: torch's generators take 64-bit seeds (a seed past 2**64 - 1 raised an
#: overflow traceback in torch.manual_seed, issue 25), and a run derives seed + 1 from its own
SEED_MAX = 2**63 - 1


def seed(name: str, value: int) -> int:
    """A random seed: a whole number in [0, 2**63 - 1] (what torch, numpy and Python all take).

    >>> seed("--seed", 7)
    7
    >>> seed("--seed", 1e23)
    Traceback (most recent call last):
    memclaim.errors.DomainError: --seed must be a whole number in [0, 2**63 - 1], got 1e+23
      fix: pass a smaller seed, e.g. --seed 0
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, Real)
        or (not isinstance(value, Integral) and not float(value).is_integer())
    ):
        raise DomainError(f"{name} must be a whole number, got {value!r}", hint=f"e.g. {name} 0")
    if not 0 <= value <= SEED_MAX:
        raise DomainError(
            f"{name} must be a whole number in [0, 2**63 - 1], got {value!r}",
            hint=f"pass a {'smaller' if value > 0 else 'non-negative'} seed, e.g. {name} 0",
        )
    return int(value)


def batch_size(value: int | str, *, name: str = "--batch-size") -> int | str:
    """A batch size: a whole number >= 1, or ``"auto"`` (the engine picks it from free memory:
    on a GPU the largest batch whose activations fit 80% of it, on the CPU 16 windows).

    >>> batch_size(8), batch_size("auto"), batch_size("AUTO")
    (8, 'auto', 'auto')
    """
    if isinstance(value, str):
        if value.strip().lower() == "auto":
            return "auto"
        raise DomainError(
            f"{name} must be a whole number >= 1 or 'auto', got {value!r}",
            hint=f"e.g. {name} 16, or {name} auto to size batches from free memory",
        )
    return integer(name, value, minimum=1)


def query_budget(name: str, value: float) -> float:
    """A number of queries n: finite and >= 1 ([EM] §6: P[at least once in n]).

    >>> query_budget("--budget", 1e5)
    100000.0
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, Real)
        or math.isnan(float(value))
        or not math.isfinite(float(value))
        or float(value) < 1
    ):
        raise DomainError(
            f"{name} must be a finite number of queries >= 1, got {value!r}",
            hint=f"e.g. {name} 1e5 (a realistic attacker's number of samples)",
        )
    return float(value)
