"""JSON conversion for results: frozen dataclasses, numpy values, non-finite floats.

Non-finite floats are written as the strings "inf", "-inf" and "nan" so that the output is
strict JSON (RFC 8259) and round-trips through :func:`from_jsonable_float`.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from .errors import InputError


def to_jsonable(obj: Any) -> Any:
    """Plain JSON data from results: dataclasses (through ``to_dict`` when they have one), numpy
    scalars and arrays, tuples, paths, enums; non-finite floats as the strings "inf", "-inf",
    "nan" (strict JSON has no such numbers).

    >>> to_jsonable({"k": (1, float("-inf")), "x": np.float32(0.5)})
    {'k': [1, '-inf'], 'x': 0.5}
    """
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        if hasattr(obj, "to_dict"):
            return to_jsonable(obj.to_dict())
        return {f.name: to_jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return [to_jsonable(v) for v in obj.tolist()]
    if isinstance(obj, (np.bool_, bool)):
        return bool(obj)
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        v = float(obj)
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return v
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, Path):
        return str(obj)
    return obj


def from_jsonable_float(v: Any) -> float:
    """A float back from :func:`to_jsonable`'s form.

    >>> from_jsonable_float("-inf"), from_jsonable_float(2)
    (-inf, 2.0)
    """
    if isinstance(v, str):
        return {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}[v]
    return float(v)


def dumps(obj: Any, **kw: Any) -> str:
    """``obj`` as strict JSON text (:func:`to_jsonable` first; ``kw`` go to :func:`json.dumps`).

    >>> dumps({"p": 0.0, "log_p": float("-inf")})
    '{"p": 0.0, "log_p": "-inf"}'
    """
    return json.dumps(to_jsonable(obj), allow_nan=False, **kw)


class ResultMixin:
    """Mixin for frozen result dataclasses: ``to_dict()`` gives JSON-ready plain data."""

    def to_dict(self) -> dict:
        if not dataclasses.is_dataclass(self):
            raise TypeError(
                f"{type(self).__name__} is not a dataclass: ResultMixin.to_dict reads the fields "
                "of a (frozen) result dataclass"
            )
        return {f.name: to_jsonable(getattr(self, f.name)) for f in dataclasses.fields(self)}


def read_json_object(path: str | Path, what: str, *, hint: str | None = None) -> dict:
    """The JSON object in file ``path`` (UTF-8); ``what`` names the file in the error messages.

    >>> read_json_object("missing.json", "procedure")
    Traceback (most recent call last):
    memclaim.errors.InputError: procedure file 'missing.json' does not exist
      fix: check the path
    """
    p = Path(path)
    try:
        d = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{what} file {str(p)!r} does not exist", hint="check the path") from None
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{what} file {str(p)!r} is not valid UTF-8: {exc}",
            hint=hint or "save it as UTF-8 JSON",
        ) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{what} file {str(p)!r} is not valid JSON: {exc}", hint=hint) from None
    if not isinstance(d, dict):
        raise InputError(
            f"{what} file {str(p)!r} must hold a JSON object, got {type(d).__name__}", hint=hint
        )
    return d


def short_repr(obj: Any) -> str:
    """A frozen dataclass value's repr naming only the fields that differ from their defaults
    (the notebook view of ``memclaim.Runtime``/``memclaim.Procedure``: every field of a value at
    its defaults would fill a screen). Written by hand: ``dataclasses`` has no such option.

    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class V:
    ...     a: int = 1
    ...     b: str = "x"
    ...     def __repr__(self) -> str:
    ...         return short_repr(self)
    >>> V(), V(b="y")
    (V(), V(b='y'))
    """
    import dataclasses

    parts = []
    for f in dataclasses.fields(obj):
        if not f.repr:
            continue
        v = getattr(obj, f.name)
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            parts.append(f"{f.name}={v!r}")
            continue
        if v != default:
            parts.append(f"{f.name}={v!r}")
    return f"{type(obj).__name__}({', '.join(parts)})"
