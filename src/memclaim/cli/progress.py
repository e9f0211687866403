"""The console side of memclaim.progress: rich progress bars on stderr fed by ProgressEvents.

Library code emits :class:`memclaim.progress.ProgressEvent` values; the CLI passes
:func:`progress_bar` as the ``progress`` callback. One bar per operation (``stage`` + ``label``),
updated per scored batch, with labelled columns: what is scored, windows done/total, windows/s,
elapsed, ETA, and units done/total where the event says so. It closes on the ``finished`` event.
Labels are user data (file names) and are shown literally, never as console markup.

With bars off (``--no-progress``, ``--json``) the sink still records the scoring runs' units
done (:data:`TRACKER`), so an interrupted command can say how far it got, and the libraries'
own bars (transformers' "Loading weights", huggingface_hub's) are turned off through their
progress APIs (:func:`quiet_library_bars`).
"""
from __future__ import annotations

import os
import sys

from ..progress import ProgressCallback, ProgressEvent


class UnitTracker:
    """Units done of every scoring run seen in this process (extra ``run_id``, ``units_done``,
    ``units_total`` of the "score" events): what "re-run to resume (N of M units done)" says."""

    def __init__(self):
        self.runs: dict[str, tuple[int, int]] = {}

    def observe(self, event: ProgressEvent) -> None:
        x = event.extra
        if "run_id" in x and "units_total" in x:
            self.runs[str(x["run_id"])] = (int(x.get("units_done", 0)), int(x["units_total"]))

    @property
    def counts(self) -> tuple[int, int] | None:
        """(units done, units in the runs started), or None before any scoring run."""
        if not self.runs:
            return None
        return sum(d for d, _ in self.runs.values()), sum(t for _, t in self.runs.values())

    def reset(self) -> None:
        self.runs.clear()


TRACKER = UnitTracker()


def quiet_library_bars() -> None:
    """Turn off transformers' and huggingface_hub's own progress bars (their APIs: the
    HF_HUB_DISABLE_PROGRESS_BARS setting read when they are imported, and
    ``transformers.utils.logging.disable_progress_bar`` / ``huggingface_hub.utils
    .disable_progress_bars`` when they already are). Nothing is imported for it."""
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    if "huggingface_hub" in sys.modules:
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
    if "transformers" in sys.modules:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()


class ProgressBar:
    """A callable progress sink that draws rich bars on ``file`` (stderr by default); with
    ``draw=False`` it only records units done (:data:`TRACKER`)."""

    def __init__(self, file=None, *, draw: bool = True, tracker: UnitTracker | None = None):
        self.file = file
        self.draw = draw
        self.tracker = TRACKER if tracker is None else tracker
        self._bars: dict[tuple[str, str], tuple] = {}

    def __call__(self, event: ProgressEvent) -> None:
        self.tracker.observe(event)
        if not self.draw:
            return
        key = (event.stage, event.label)
        if key not in self._bars:
            if event.finished or not event.total:
                return  # nothing to draw: an empty operation, or one already over
            from rich.console import Console
            from rich.markup import escape
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

            bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                           TextColumn("{task.completed:,}/{task.total:,} " + escape(event.unit)),
                           TextColumn("{task.fields[rate]}"), TextColumn("elapsed"), TimeElapsedColumn(),
                           TextColumn("ETA"), TimeRemainingColumn(), TextColumn("{task.fields[units]}"),
                           console=Console(file=self.file or sys.stderr), transient=False)
            task = bar.add_task(escape(event.label), total=event.total, rate="", units="")
            bar.start()
            self._bars[key] = (bar, task)
        bar, task = self._bars[key]
        rate = event.rate
        x = event.extra
        units = f"units {int(x['units_done']):,}/{int(x['units_total']):,}" if "units_total" in x else ""
        bar.update(task, completed=event.done, rate="" if rate is None else f"{rate:,.1f} {event.unit}/s",
                   units=units)
        if event.finished:
            bar.stop()
            del self._bars[key]


def progress_bar(enabled: bool = True, *, file=None) -> ProgressCallback:
    """The CLI's progress sink: bars when ``enabled`` (not ``--no-progress`` and not ``--json``);
    otherwise no bar at all (the libraries' own bars are turned off too) but units done are
    still recorded for the interruption message."""
    if not enabled:
        quiet_library_bars()
    return ProgressBar(file, draw=enabled)
