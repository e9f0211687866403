"""The keywords a public function takes (issue 26): its explicit parameters and the typed shortcuts
of its ``**options: Unpack[...Options]``, read from the annotation as written (annotations are
postponed, and resolving all of them would import what the signature only names)."""

from __future__ import annotations

import inspect
import re
import typing


def accepted_keywords(fn) -> set[str]:
    """Explicit parameter names plus the shortcut names of ``**options``."""
    params = inspect.signature(fn).parameters
    names = set(params)
    for p in params.values():
        if p.kind is p.VAR_KEYWORD:
            ann = p.annotation
            if isinstance(ann, str):  # "Unpack[ScoreOptions]"
                m = re.fullmatch(r"Unpack\[(\w+)\]", ann)
                assert m, f"{fn.__name__}: **{p.name} is not typed as Unpack[...]: {ann!r}"
                ann = inspect.unwrap(fn).__globals__[m.group(1)]
            else:
                (ann,) = typing.get_args(ann)
            names |= set(ann.__annotations__)
    return names
