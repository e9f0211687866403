"""Boundary validation helpers. Each raises a :mod:`memclaim.errors` type naming the value."""
from __future__ import annotations

import math
from numbers import Integral, Real

from .errors import DomainError


def finite(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, Real):
        raise DomainError(f"{name} must be a real number, got {value!r}")
    v = float(value)
    if not math.isfinite(v):
        raise DomainError(f"{name} must be finite, got {value!r}")
    return v


def positive(name: str, value, *, allow_inf: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, Real):
        raise DomainError(f"{name} must be a real number, got {value!r}")
    v = float(value)
    if math.isnan(v) or v <= 0 or (math.isinf(v) and not allow_inf):
        raise DomainError(f"{name} must be {'> 0' if allow_inf else 'finite and > 0'}, got {value!r}")
    return v


def nonneg(name: str, value) -> float:
    v = finite(name, value)
    if v < 0:
        raise DomainError(f"{name} must be >= 0, got {value!r}")
    return v


def in_open_unit(name: str, value) -> float:
    """0 < value < 1."""
    v = finite(name, value)
    if not 0.0 < v < 1.0:
        raise DomainError(f"{name} must lie strictly between 0 and 1, got {value!r}")
    return v


def in_unit(name: str, value, *, lo_open: bool = False, hi_open: bool = False) -> float:
    v = finite(name, value)
    lo_ok = v > 0 if lo_open else v >= 0
    hi_ok = v < 1 if hi_open else v <= 1
    if not (lo_ok and hi_ok):
        lo = "(" if lo_open else "["
        hi = ")" if hi_open else "]"
        raise DomainError(f"{name} must lie in {lo}0, 1{hi}, got {value!r}")
    return v


def integer(name: str, value, *, minimum: int | None = None, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral):
        if isinstance(value, Real) and float(value).is_integer():
            value = int(value)
        else:
            raise DomainError(f"{name} must be an integer, got {value!r}")
    v = int(value)
    if minimum is not None and v < minimum:
        raise DomainError(f"{name} must be >= {minimum}, got {v}")
    if maximum is not None and v > maximum:
        raise DomainError(f"{name} must be <= {maximum}, got {v}")
    return v
