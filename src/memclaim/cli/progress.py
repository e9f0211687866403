"""The console side of memclaim.progress: a rich progress bar on stderr fed by ProgressEvents.

Library code emits :class:`memclaim.progress.ProgressEvent` values; the CLI passes
:func:`progress_bar` as the ``progress`` callback. One bar per operation (``stage`` + ``label``),
with the rate in the event's unit; it closes on the ``finished`` event. Labels are user data
(file names) and are shown literally, never as console markup.
"""
from __future__ import annotations

import sys

from ..progress import ProgressCallback, ProgressEvent


class ProgressBar:
    """A callable progress sink that draws rich bars on ``file`` (stderr by default)."""

    def __init__(self, file=None):
        self.file = file
        self._bars: dict[tuple[str, str], tuple] = {}

    def __call__(self, event: ProgressEvent) -> None:
        key = (event.stage, event.label)
        if key not in self._bars:
            if event.finished or not event.total:
                return  # nothing to draw: an empty operation, or one already over
            from rich.console import Console
            from rich.markup import escape
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                                       TimeRemainingColumn)

            bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                           TextColumn("{task.fields[rate]}"), TimeElapsedColumn(), TimeRemainingColumn(),
                           console=Console(file=self.file or sys.stderr), transient=False)
            task = bar.add_task(escape(event.label), total=event.total, rate="")
            bar.start()
            self._bars[key] = (bar, task)
        bar, task = self._bars[key]
        rate = event.rate
        bar.update(task, completed=event.done, rate="" if rate is None else f"{rate:.1f} {event.unit}/s")
        if event.finished:
            bar.stop()
            del self._bars[key]


def progress_bar(enabled: bool = True, *, file=None) -> ProgressCallback | None:
    """A :class:`ProgressBar` when ``enabled`` (the CLI: not ``--no-progress`` and not ``--json``), else None."""
    return ProgressBar(file) if enabled else None
