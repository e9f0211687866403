"""Refusing to compare results computed under different extraction procedures ([EM] Def. B.2).

A conformal claim is only valid when the candidates and the controls were scored by the same
procedure (model, decoding policy, prompt rule, score; [EM] C.2 "Setup"), and a comparison of two
models or policies must differ only in what is being compared. Procedures are plain dicts (the
scoring store records them); nested dicts are compared field by field.
"""
from __future__ import annotations

import math
from typing import Iterable

from ..errors import ProcedureMismatchError

_ABSENT = "<absent>"


def _flatten(d, prefix=""):
    out = {}
    if isinstance(d, dict):
        if not d and prefix:
            out[prefix] = {}
        for k, v in d.items():
            key = f"{prefix}.{k}" if prefix else str(k)
            out.update(_flatten(v, key))
    else:
        out[prefix] = d
    return out


def _same(x, y) -> bool:
    if isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y):
        return True
    if isinstance(x, (list, tuple)) and isinstance(y, (list, tuple)):
        return len(x) == len(y) and all(_same(a, b) for a, b in zip(x, y))
    return type(x) is type(y) and x == y or (
        isinstance(x, (int, float)) and isinstance(y, (int, float))
        and not isinstance(x, bool) and not isinstance(y, bool) and x == y)


def procedure_differences(a: dict, b: dict, *, ignore: Iterable[str] = ()) -> list[tuple[str, object, object]]:
    """Every differing field as (dotted.name, value in a, value in b); ``ignore`` names fields
    (or whole sub-dicts by their prefix) that may differ."""
    if not isinstance(a, dict) or not isinstance(b, dict):
        raise ProcedureMismatchError(
            f"procedures must be dicts, got {type(a).__name__} and {type(b).__name__}",
            hint="pass the procedure records stored with the scores")
    ignore = tuple(ignore)
    fa, fb = _flatten(a), _flatten(b)
    diffs = []
    for key in sorted(set(fa) | set(fb)):
        if any(key == ig or key.startswith(ig + ".") for ig in ignore):
            continue
        va, vb = fa.get(key, _ABSENT), fb.get(key, _ABSENT)
        if not _same(va, vb):
            diffs.append((key, va, vb))
    return diffs


def check_same_procedure(a: dict, b: dict, *, ignore: Iterable[str] = (), names=("candidates", "controls")) -> None:
    """Raise :class:`ProcedureMismatchError` naming every differing field, or return None."""
    diffs = procedure_differences(a, b, ignore=ignore)
    if diffs:
        lines = "; ".join(f"{k}: {va!r} ({names[0]}) vs {vb!r} ({names[1]})" for k, va, vb in diffs)
        raise ProcedureMismatchError(
            f"the {names[0]} and the {names[1]} were scored under different extraction procedures "
            f"({len(diffs)} field{'s' if len(diffs) != 1 else ''} differ): {lines}",
            hint="re-score both under one procedure; a claim compares scores only under the same model, "
                 "decoding policy, prompt rule and score ([EM] Def. B.2, C.2)")
