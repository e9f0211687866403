"""The console side of memclaim.progress: progress on stderr fed by ProgressEvents.

Library code emits :class:`memclaim.progress.ProgressEvent` values; the CLI passes
:func:`progress_bar` as the ``progress`` callback. One line per operation (``stage`` + ``label``):

* **On a terminal** a rich bar laid out for the terminal's width: what is done, a bar, the
  count ``done/total unit``, the rate and the estimated time left (or, for a step whose size is
  unknown, a spinner and the time so far). The label is shortened first, then the bar; the
  count, rate and estimate are never cut (at 80 columns: ``scoring members ━━━━  45/101
  windows  12/s  ETA 0:05``).
* **Anywhere else** (a pipe, a CI log) plain lines: when the operation has lasted a second,
  then at most every :data:`PLAIN_EVERY` seconds, and when it ends; never a redrawn bar.

An operation that ends within a second shows nothing (loading a small model's weights). A
resumed scoring run counts the windows found done in the store (``items_reused``), so its count,
like its units, is of the whole run; the rate and the estimate come from this run's own work,
measured from its first finished batch (model loading is not counted as scoring time). A
background thread keeps the time and estimate moving between events, so a step with few events
(a GGUF conversion, a slow batch) still shows life at least every :data:`PLAIN_EVERY` seconds.

With bars off (``--no-progress``, ``--json``) the sink still records the scoring runs' units
done (:data:`TRACKER`), so an interrupted command can say how far it got. Labels are user data
(file names) and are shown literally, never as console markup.
"""

from __future__ import annotations

import sys
import threading
import time
import weakref

from .. import api
from ..api import ProgressCallback, ProgressEvent

SHOW_AFTER = 1.0  # seconds an operation must last before it is shown
PLAIN_EVERY = 8.0  # seconds between plain lines of one operation (non-terminal output): under 10 with the tick
TICK = 0.5  # seconds between the background thread's updates


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
    """transformers' and huggingface_hub's own progress bars off for the rest of the process
    (``memclaim.api.quiet_library_bars``; loaded only when a command asks for it)."""
    api.quiet_library_bars()


# ------------------------------------------------------------------------------ numbers for people
def _count(n: int) -> str:
    return f"{n:,}"


def _rate(r: float | None) -> str:
    if r is None:
        return ""
    if r >= 100:
        return f"{r:,.0f}/s"
    if r >= 1:
        return f"{r:.1f}/s"
    if r > 0:
        return f"{1 / r:.1f}s each" if 1 / r < 100 else f"{1 / r:.0f}s each"
    return ""


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    s = int(round(max(0.0, seconds)))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


def _shorten(text: str, width: int) -> str:
    if len(text) <= width:
        return text
    if width <= 1:
        return text[: max(0, width)]
    return text[: width - 1] + "…"


class _Op:
    """One operation's state: counts in the event's units, times on this process's clock."""

    def __init__(self, event: ProgressEvent, now: float):
        self.stage, self.label, self.unit = event.stage, event.label, event.unit
        self.reused = int(event.extra.get("items_reused", 0) or 0)
        self.t0 = now - float(event.elapsed or 0.0)
        self.total = None if event.total is None else int(event.total) + self.reused
        self.done = self.reused + int(event.done)
        self.first: tuple[float, int] | None = (
            None  # (time, done) of the first advance: the rate's origin
        )
        self.last_plain = None
        self.shown = False
        self.task = None

    def update(self, event: ProgressEvent, now: float) -> None:
        done = self.reused + int(event.done)
        if done > self.done and self.first is None:
            self.first = (now, done)  # the first finished batch: the rate counts what follows it
        self.done = done
        if event.total is not None:
            self.total = int(event.total) + self.reused

    def rate(self, now: float) -> float | None:
        if self.first is None or now <= self.first[0]:
            return None
        t, d = self.first
        n = self.done - d
        return n / (now - t) if n > 0 else None

    def eta(self, now: float) -> float | None:
        r = self.rate(now)
        if self.total is None or r is None or r <= 0:
            return None
        return max(0, self.total - self.done) / r

    def count_text(self) -> str:
        if self.total is None:
            return f"{_count(self.done)} {self.unit}" if self.done else ""
        return f"{_count(self.done)}/{_count(self.total)} {self.unit}"

    def plain(self, now: float, finished: bool = False) -> str:
        """The operation in one plain line."""
        elapsed = now - self.t0
        if finished:
            n = f"{_count(self.done)} {self.unit}" if self.done or self.total else "done"
            r = self.rate(now)
            rate = f", {_rate(r)}" if r else ""
            return f"{self.label}: {n} in {_clock(elapsed)}{rate}"
        parts = [self.count_text()]
        if self.total:
            parts[0] += f" ({100 * self.done / self.total:.0f}%)"
        r = self.rate(now)
        if r:
            parts.append(_rate(r))
        eta = self.eta(now)
        parts.append(
            f"about {_clock(eta)} left" if eta is not None else f"{_clock(elapsed)} so far"
        )
        return f"{self.label}: " + ", ".join(p for p in parts if p)


class ProgressBar:
    """A callable progress sink drawing on ``file`` (stderr by default): a rich bar per operation on
    a terminal, plain periodic lines elsewhere (``plain`` forces one or the other; ``width`` the
    terminal width, default the console's). With ``draw=False`` it only records units done
    (:data:`TRACKER`)."""

    def __init__(
        self,
        file=None,
        *,
        draw: bool = True,
        tracker: UnitTracker | None = None,
        plain: bool | None = None,
        width: int | None = None,
        clock=time.monotonic,
        startup: str | None = None,
    ):
        self.file = file
        self.draw = draw
        self.tracker = TRACKER if tracker is None else tracker
        self._plain = plain
        self._width = width
        self._clock = clock
        self._ops: dict[tuple[str, str], _Op] = {}
        self._lock = threading.RLock()
        self._console = None
        self._progress = None
        self._thread: threading.Thread | None = None
        self._startup: tuple[str, str] | None = None
        _LIVE.add(self)
        if startup and draw:
            # what runs before the first operation reports (importing torch and transformers: seconds
            # to tens of seconds on a cold machine) shows as an operation of its own, ended by the
            # first event of any other one
            self._startup = ("start", startup)
            self(ProgressEvent(stage="start", label=startup, done=0, total=None, unit="steps"))

    # ---------------------------------------------------------------- output
    @property
    def stream(self):
        return self.file or sys.stderr

    @property
    def plain(self) -> bool:
        if self._plain is not None:
            return self._plain
        isatty = getattr(self.stream, "isatty", None)
        return not (isatty is not None and isatty())

    @property
    def console(self):
        if self._console is None:
            from rich.console import Console

            self._console = Console(
                file=self.stream,
                highlight=False,
                markup=False,
                width=self._width,
                force_terminal=None if self._plain is None else not self._plain,
            )
        return self._console

    def _write(self, line: str) -> None:
        if self._progress is not None:
            self._progress.console.print(line, markup=False, highlight=False, soft_wrap=True)
        else:
            self.stream.write(line + "\n")
            self.stream.flush()

    # ---------------------------------------------------------------- rich layout
    # the info column's widest text: "1,234/5,678 windows  123.4/s  ETA 0:00:00" (the count's
    # own width comes from the total)
    def _info_width(self, op: _Op) -> int:
        total = op.total if op.total is not None else max(op.done, 99999)
        return len(f"{_count(total)}/{_count(total)} {op.unit}") + len("  123.4/s  ETA 0:00:00")

    def _columns(self, op: _Op) -> tuple[int, int]:
        """(label width, bar width) at the console's width: the label and the bar share what the
        count, rate and estimate leave (those are never shortened); one space between columns."""
        room = self.console.width - 1 - self._info_width(op) - 2
        label_w = min(len(op.label), 40, max(10, room - 10))
        bar_w = max(3, min(40, room - label_w))
        return label_w, bar_w

    def _rich_task(self, op: _Op):
        from rich.progress import BarColumn, Progress, TextColumn
        from rich.table import Column

        if self._progress is None:
            self._progress = Progress(
                TextColumn("{task.fields[label]}", markup=False, table_column=Column(no_wrap=True)),
                BarColumn(bar_width=10),
                TextColumn("{task.fields[info]}", markup=False, table_column=Column(no_wrap=True)),
                console=self.console,
                transient=False,
                expand=False,
                refresh_per_second=4,
            )
            self._progress.start()
        label_w, bar_w = self._columns(op)
        bar = self._progress.columns[1]
        bar.bar_width = bar_w if len(self._progress.tasks) == 0 else min(bar.bar_width, bar_w)
        return self._progress.add_task(
            "", total=op.total, completed=op.done, label=_shorten(op.label, label_w), info=""
        )

    def _refresh_rich(self, op: _Op, now: float, finished: bool = False) -> None:
        count = op.count_text()
        if finished:
            info = f"{count}  {_clock(now - op.t0)}".strip()
        else:
            r = op.rate(now)
            eta = op.eta(now)
            tail = f"ETA {_clock(eta)}" if op.total is not None else _clock(now - op.t0)
            info = "  ".join(x for x in (count, _rate(r), tail) if x)
        self._progress.update(op.task, completed=op.done, total=op.total, info=info)

    # ---------------------------------------------------------------- events
    def __call__(self, event: ProgressEvent) -> None:
        self.tracker.observe(event)
        if not self.draw:
            return
        key = (event.stage, event.label)
        with self._lock:
            if self._startup is not None and key != self._startup:
                startup, self._startup = self._startup, None
                self(
                    ProgressEvent(
                        stage=startup[0], label=startup[1], done=0, total=None, finished=True
                    )
                )
            now = self._clock()
            op = self._ops.get(key)
            if op is None:
                if event.finished:
                    return  # an operation over before it began (nothing to show)
                op = self._ops[key] = _Op(event, now)
            else:
                op.update(event, now)
            if event.finished:
                del self._ops[key]
                if op.shown:
                    self._show(op, now, finished=True)
                if not self._ops:
                    self._stop()
                return
            self._maybe_show(op, now)
            self._ensure_thread()

    def _maybe_show(self, op: _Op, now: float) -> None:
        if not op.shown and now - op.t0 < SHOW_AFTER:
            return
        self._show(op, now)

    def _show(self, op: _Op, now: float, finished: bool = False) -> None:
        if self.plain:
            if finished or op.last_plain is None or now - op.last_plain >= PLAIN_EVERY:
                op.last_plain = now
                self._write(op.plain(now, finished))
            op.shown = True
            return
        if op.task is None:
            op.task = self._rich_task(op)
        op.shown = True
        self._refresh_rich(op, now, finished)

    def _stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    # ---------------------------------------------------------------- the ticker
    def _ensure_thread(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        self._thread = threading.Thread(target=self._tick, name="memclaim-progress", daemon=True)
        self._thread.start()

    def _tick(self) -> None:
        while True:
            time.sleep(TICK)
            with self._lock:
                if not self._ops:
                    return
                now = self._clock()
                for op in list(self._ops.values()):
                    self._maybe_show(op, now)

    def close(self) -> None:
        """Drop every open operation without a final line (a command that stopped on an error or an
        interruption leaves no bar half-drawn and no line saying 'done')."""
        with self._lock:
            self._ops.clear()
            self._startup = None
            self._stop()
        _LIVE.discard(self)


_LIVE: weakref.WeakSet[ProgressBar] = weakref.WeakSet()


def close_all() -> None:
    """Close every progress sink of this process (the CLI's last step, whatever happened)."""
    for bar in list(_LIVE):
        bar.close()


STARTUP = "starting: loading PyTorch and transformers"


def progress_bar(
    enabled: bool = True, *, file=None, startup: str | None = STARTUP
) -> ProgressCallback:
    """The CLI's progress sink: bars (or plain lines off a terminal) when ``enabled`` (not
    ``--no-progress`` and not ``--json``); otherwise nothing is drawn (the libraries' own bars
    are off too) but units done are still recorded for the interruption message. Create it
    before the API call: ``startup`` names what happens until the first operation reports
    (importing the model stack), shown once it has lasted a second."""
    if not enabled:
        quiet_library_bars()
    return ProgressBar(file, draw=enabled, startup=startup)
