"""Printing to whatever the caller passed as a console: a rich Console, any callable, or None.

Text is printed literally: a rich Console gets ``markup=False`` so that paths, ids and texts
from the user's data (``runs/q[/]z``) are never read as console markup. Code that wants rich
markup passes a renderable (a Table) or escapes the user's parts with ``rich.markup.escape``.
"""

from __future__ import annotations

import sys


def is_rich(console) -> bool:
    return type(console).__module__.startswith("rich")


def say(console, text) -> None:
    if console is None:
        return
    if hasattr(console, "print"):
        if is_rich(console):
            console.print(text, markup=False, highlight=False)
        else:
            console.print(text)
    elif callable(console):
        console(text)


def stdout_console(*, stderr: bool = False):
    """A rich Console on stdout (or stderr) that prints text literally and word-wraps it at the
    terminal's width (80 columns when the output is not a terminal, unless COLUMNS says
    otherwise): what every command's sentences are printed with."""
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, markup=False, emoji=False)


def echo(text: str, *, stderr: bool = False) -> None:
    """Print ``text`` literally, word-wrapped at the console's width (never a word cut in two,
    unless a single word is wider than the console)."""
    stdout_console(stderr=stderr).print(text, markup=False, highlight=False, overflow="fold")


def echo_indented(lines: list[str], *, stderr: bool = False) -> None:
    """Print outline-style ``lines`` (each line's leading spaces are its level) word-wrapped at
    the console's width, every continuation indented four columns past its line's own indent,
    so a long sentence stays under its bullet at 80 columns (rich wraps to the left margin).
    Words are never cut (a single word wider than the console stands on its own line)."""
    import textwrap

    width = stdout_console(stderr=stderr).width
    out = []
    for line in lines:
        body = line.lstrip(" ")
        pad = " " * (len(line) - len(body))
        if len(line) <= width or not body:
            out.append(line)
            continue
        out.append(
            textwrap.fill(
                body,
                width=width,
                initial_indent=pad,
                subsequent_indent=pad + "    ",
                break_long_words=False,
                break_on_hyphens=False,
            )
        )
    stream = sys.stderr if stderr else sys.stdout
    stream.write("\n".join(out) + ("\n" if out else ""))
