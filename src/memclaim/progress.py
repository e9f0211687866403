"""Progress reports from library code, as values: the caller decides how to show them.

Library code never prints and never imports rich or click. A long operation takes

* ``progress: ProgressCallback | None``: called with a :class:`ProgressEvent` when work starts
  (``done == 0``), after each piece of work, and once when it ends (``finished=True``);
* ``log: LogCallback | None``: called with one human-readable line (a warning, "waiting for
  another process", a cost estimate).

``None`` means silent. The CLI turns events into a rich progress bar on stderr and log lines
into stderr lines (memclaim.cli); the Python API shows a notebook-aware bar (``progress=True``,
its default; ``progress=False`` is silent) and takes any callback of your own.

Steps deep below a public function that have no ``progress`` parameter of their own (building
the tiny GPT, converting a GGUF file, loading weights on first use) report to the **ambient**
callbacks: :func:`reporting` sets them for the duration of a call (the API does it for every
public function), :func:`ambient` and :func:`ambient_log` read them.

>>> events = []
>>> report = Reporter(events.append, stage="score", label="scoring members", total=3)
>>> report.advance(2); report.advance(1); report.close()
>>> [(e.done, e.total, e.finished) for e in events]
[(0, 3, False), (2, 3, False), (3, 3, False), (3, 3, True)]
>>> events[-1].fraction
1.0
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

__all__ = [
    "ProgressEvent",
    "ProgressCallback",
    "LogCallback",
    "Reporter",
    "emit_log",
    "reporting",
    "ambient",
    "ambient_log",
]


@dataclass(frozen=True)
class ProgressEvent:
    """One progress report.

    ``stage`` is a short machine name of the operation ("score", "census", "train", "audit",
    "baseline", ...); ``label`` is what a person reads ("scoring members.txt"; user data: show it
    literally, never as console markup). ``done`` units of ``total`` are finished (``total`` is
    None when unknown). ``unit`` names what is counted ("windows", "steps", "nodes").
    ``elapsed`` is seconds since the operation started; ``finished`` is True on the last event of
    the operation (the bar may close). ``extra`` holds stage-specific numbers (read-only).

    >>> e = ProgressEvent(stage="score", label="scoring x", done=5, total=10, elapsed=2.0)
    >>> e.fraction, e.rate
    (0.5, 2.5)
    """

    stage: str
    label: str
    done: int
    total: int | None
    unit: str = "windows"
    elapsed: float = 0.0
    finished: bool = False
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "extra", MappingProxyType(dict(self.extra)))

    @property
    def fraction(self) -> float | None:
        """``done / total`` (1.0 for an empty operation), None when the total is unknown."""
        if self.total is None:
            return None
        return 1.0 if self.total <= 0 else min(1.0, self.done / self.total)

    @property
    def rate(self) -> float | None:
        """Units per second so far, None before any time has passed."""
        return self.done / self.elapsed if self.elapsed > 0 else None

    def to_dict(self) -> dict:
        """A JSON-ready dict of the fields (``extra`` as a plain dict)."""
        return {
            "stage": self.stage,
            "label": self.label,
            "done": self.done,
            "total": self.total,
            "unit": self.unit,
            "elapsed": self.elapsed,
            "finished": self.finished,
            "extra": dict(self.extra),
        }


ProgressCallback = Callable[[ProgressEvent], None]
LogCallback = Callable[[str], None]


class Reporter:
    """Sends the events of one operation to ``progress`` (a no-op when it is None).

    It emits a start event on creation, one per :meth:`advance`, and a final ``finished`` event on
    :meth:`close` (also as a context manager; closing twice sends one final event).

    >>> with Reporter(None, stage="score", label="x", total=4) as r:
    ...     r.advance(4)
    >>> r.done
    4
    """

    def __init__(
        self,
        progress: ProgressCallback | None,
        *,
        stage: str,
        label: str,
        total: int | None,
        unit: str = "windows",
        extra: Mapping[str, Any] | None = None,
    ):
        self.progress = progress
        self.stage, self.label, self.total, self.unit = stage, label, total, unit
        self.extra = dict(extra or {})
        self.done = 0
        self.closed = False
        self.t0 = time.perf_counter()
        self._send(False)

    def _send(self, finished: bool, extra: Mapping[str, Any] | None = None) -> None:
        if self.progress is None:
            return
        self.progress(
            ProgressEvent(
                stage=self.stage,
                label=self.label,
                done=self.done,
                total=self.total,
                unit=self.unit,
                elapsed=time.perf_counter() - self.t0,
                finished=finished,
                extra={**self.extra, **(extra or {})},
            )
        )

    def advance(self, n: int = 1, **extra: Any) -> None:
        """Record ``n`` more units done and report it."""
        self.done += n
        self._send(False, extra)

    def update(self, done: int, **extra: Any) -> None:
        """Set the units done so far to ``done`` (a running total) and report it."""
        self.done = int(done)
        self._send(False, extra)

    def close(self) -> None:
        """Send the final event (once)."""
        if not self.closed:
            self.closed = True
            self._send(True)

    def __enter__(self) -> Reporter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def emit_log(log: LogCallback | None, message: str) -> None:
    """Call ``log(message)`` unless ``log`` is None.

    >>> emit_log(None, "nothing happens")
    >>> emit_log(print, "waiting for the other process")
    waiting for the other process
    """
    if log is not None:
        log(message)


# (progress, log) of the public call in progress; None outside one
_AMBIENT: ContextVar[tuple] = ContextVar("memclaim_progress_ambient", default=(None, None))


@contextlib.contextmanager
def reporting(
    progress: ProgressCallback | None = None, log: LogCallback | None = None
) -> Iterator[None]:
    """Make ``progress`` and ``log`` the ambient callbacks inside the block (restored after): what
    the steps below a public function report to when they have no parameter for it.

    >>> seen = []
    >>> with reporting(seen.append):
    ...     Reporter(ambient(), stage="build", label="tiny GPT", total=1).close()
    >>> [(e.stage, e.finished) for e in seen], ambient() is None
    ([('build', False), ('build', True)], True)
    """
    token = _AMBIENT.set((progress, log))
    try:
        yield
    finally:
        _AMBIENT.reset(token)


def ambient() -> ProgressCallback | None:
    """The ambient progress callback (:func:`reporting`), None when there is none.

    >>> ambient() is None
    True
    """
    return _AMBIENT.get()[0]


def ambient_log() -> LogCallback | None:
    """The ambient log callback (:func:`reporting`), None when there is none.

    >>> with reporting(log=print):
    ...     emit_log(ambient_log(), "building the tiny GPT")
    building the tiny GPT
    """
    return _AMBIENT.get()[1]
