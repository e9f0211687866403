"""Printing to whatever the caller passed as a console: a rich Console, any callable, or None.

Text is printed literally: a rich Console gets ``markup=False`` so that paths, ids and texts
from the user's data (``runs/q[/]z``) are never read as console markup. Code that wants rich
markup passes a renderable (a Table) or escapes the user's parts with ``rich.markup.escape``.
"""
from __future__ import annotations


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
