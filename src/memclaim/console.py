"""Printing to whatever the caller passed as a console: a rich Console, any callable, or None."""
from __future__ import annotations


def say(console, text) -> None:
    if console is None:
        return
    if hasattr(console, "print"):
        console.print(text)
    elif callable(console):
        console(text)
