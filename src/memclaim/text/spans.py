"""Exclusion spans of a census control: verified quotations of earlier text that are removed
from the control before tau_doc is set ([EM] §5, App. E.1; the in-training document is never
culled).

One entry per line (blank lines and lines starting with ``#`` are ignored)::

    text: QUOTED TEXT        every occurrence of this exact text in every control
    START END                characters [START, END) of the control (one control only)
    CONTROL START END        characters [START, END) of the control file named CONTROL

:func:`parse_exclude_spans` reads such a file; :func:`exclude_spans_from_lines` reads the same
entries from a list of strings. ``controls`` holds (name as given, file name, text) per control;
a control is named by either form. Errors name the line and say the fix.

>>> controls = [("ctl.txt", "ctl.txt", "one two three two")]
>>> exclude_spans_from_lines(["text: two", "0 3"], controls)
[((4, 7), (14, 17), (0, 3))]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from ..errors import InputError
from .io import split_lines

__all__ = ["SPANS_FORMAT", "parse_exclude_spans", "exclude_spans_from_lines"]

SPANS_FORMAT = (
    "lines 'text: QUOTE', 'START END' or 'CONTROL START END' (character offsets, end exclusive)"
)

Control = tuple[str, str, str]  # (name as given, file name, text)


def parse_exclude_spans(
    path: str | Path, controls: Sequence[Control]
) -> list[tuple[tuple[int, int], ...]]:
    """Read an exclusion file (format in the module doc) into one tuple of [start, end) spans per
    control (in the order of ``controls``).

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "spans.txt"
    >>> _ = p.write_text("# verified quotation\\ntext: two\\n")
    >>> parse_exclude_spans(p, [("ctl.txt", "ctl.txt", "one two three two")])
    [((4, 7), (14, 17))]
    """
    p = Path(path)
    if not p.is_file():
        raise InputError(
            f"--exclude-spans file {str(p)!r} does not exist",
            hint="one span or 'text: ...' per line",
        )
    try:
        lines = split_lines(p.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise InputError(
            f"--exclude-spans file {str(p)!r} is not valid UTF-8 (byte offset {exc.start})"
        ) from None
    return _parse(lines, controls, lambda n: f"{str(p)!r} line {n}")


def exclude_spans_from_lines(
    lines: Sequence[str], controls: Sequence[Control], *, what: str = "exclude_spans"
) -> list[tuple[tuple[int, int], ...]]:
    """The entries of an exclusion file given as strings (one entry each; format in the module
    doc), e.g. from Python: ``["text: and the grass was burned like stubble"]``.

    >>> exclude_spans_from_lines(["ctl.txt 0 3"], [("a/ctl.txt", "ctl.txt", "one two")])
    [((0, 3),)]
    """
    if isinstance(lines, str):
        raise InputError(
            f"{what} must be a list of entries, got the string {lines[:60]!r}",
            hint="pass a list such as ['text: QUOTE'], or the path of an exclusion file as a Path",
        )
    bad = [x for x in lines if not isinstance(x, str)]
    if bad:
        raise InputError(
            f"{what} entries must be strings, got {type(bad[0]).__name__} {bad[0]!r}",
            hint="write each entry as 'text: QUOTE', 'START END' or 'CONTROL START END'",
        )
    return _parse(list(lines), controls, lambda n: f"{what}[{n - 1}]")


def _parse(lines: list[str], controls: Sequence[Control], where: Callable[[int], str]):
    spans: list[list[tuple[int, int]]] = [[] for _ in controls]
    distinct = {str(Path(given).resolve()) for given, _, _ in controls}

    def add(k, a, b, n):
        text = controls[k][2]
        if not 0 <= a < b <= len(text):
            raise InputError(
                f"{where(n)}: span [{a}, {b}) is not inside control {controls[k][1]!r} "
                f"({len(text)} characters)",
                hint="spans are [START, END) character offsets, START < END",
            )
        spans[k].append((a, b))

    for n, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.lower().startswith("text:"):
            quote = raw.split(":", 1)[1].strip()
            if not quote:
                raise InputError(
                    f"{where(n)}: empty quotation",
                    hint="write 'text: ' followed by the quoted text",
                )
            found = 0
            for k, (_, _, text) in enumerate(controls):
                i = text.find(quote)
                while i >= 0:
                    spans[k].append((i, i + len(quote)))
                    found += 1
                    i = text.find(quote, i + 1)
            if not found:
                raise InputError(
                    f"{where(n)}: the quotation {quote[:80]!r} occurs in no control document",
                    hint="copy the text exactly as it appears in the control (one line), or give "
                    "its character offsets",
                )
            continue
        parts = line.rsplit(maxsplit=2)
        try:
            a, b = int(parts[-2]), int(parts[-1])
        except (ValueError, IndexError):
            raise InputError(
                f"{where(n)}: cannot read {line[:80]!r}",
                hint="use 'START END', 'CONTROL START END' or 'text: QUOTED TEXT'",
            ) from None
        if len(parts) == 2:
            if len(distinct) != 1:
                raise InputError(
                    f"{where(n)}: span {a} {b} does not say which of the {len(distinct)} controls it is in",
                    hint="write 'CONTROL START END' with the control's file name",
                )
            for k in range(len(controls)):
                add(k, a, b, n)
            continue
        name = parts[0]
        ks = [k for k, (given, base, _) in enumerate(controls) if name in (given, base)]
        if not ks:
            raise InputError(
                f"{where(n)}: {name!r} is not one of the controls",
                hint="controls: " + ", ".join(sorted({c[1] for c in controls})),
            )
        for k in ks:
            add(k, a, b, n)
    return [tuple(s) for s in spans]
