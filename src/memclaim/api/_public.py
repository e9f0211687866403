"""What every public function of the API does around its body, in one place (:func:`public`).

* **Keywords.** An unknown keyword is answered in memclaim's ``error: ... fix: ...`` form naming
  the closest keyword (a :class:`KeywordError`, which is a TypeError as Python's own answer is,
  and an :class:`~memclaim.errors.InputError`); a keyword renamed in this release (``renamed``,
  old -> new) still works with a DeprecationWarning, and giving both spellings is an error.
* **Progress.** ``progress=True`` (the default) shows a notebook-aware bar (tqdm: widgets in
  Jupyter, text elsewhere; a bar appears only for a step that lasts more than a second),
  ``False`` or None is silent, and a callable receives the
  :class:`memclaim.progress.ProgressEvent` values itself (the CLI passes its rich bars). The
  callbacks are also made ambient (:func:`memclaim.progress.reporting`) so that the steps with
  no parameter for it (building the tiny GPT, converting a GGUF file, loading weights) report
  too; a public function called by another reports to its caller's callbacks.
* **Quiet libraries.** transformers' and huggingface_hub's own bars and warnings are off inside
  the call (:func:`memclaim.models.quiet.quiet_libraries`).
* **Provenance.** The call is recorded (:func:`memclaim.report.core.invoked_as`: the command
  line when the CLI made it, else the Python call with its arguments shortened), and the
  result remembers it, so a report saved later still says how it was made.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import os
import sys
import warnings
from collections.abc import Callable
from contextvars import ContextVar
from fractions import Fraction
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..models.quiet import quiet_libraries
from ..progress import ProgressCallback, ProgressEvent, ambient, ambient_log, reporting
from ..report.core import current_invocation, invoked_as

__all__ = ["public", "KeywordError", "NotebookProgress", "resolve_progress", "describe_call"]

# whether a public call is in progress (a public function called by another inherits its callbacks)
_IN_CALL: ContextVar[bool] = ContextVar("memclaim_in_public_call", default=False)


class KeywordError(InputError, TypeError):
    """An unknown or doubled keyword of a public function: memclaim's error/fix form, and a
    TypeError as Python's own answer to an unknown keyword is.

    >>> raise KeywordError("population() got an unknown keyword 'polcy'", hint="did you mean policies=?")
    Traceback (most recent call last):
    memclaim.api._public.KeywordError: population() got an unknown keyword 'polcy'
      fix: did you mean policies=?
    """


# ------------------------------------------------------------------------------ progress
class NotebookProgress:
    """A progress callback drawing one tqdm bar per operation (stage + label): widgets in a
    Jupyter notebook when ipywidgets is installed, text on stderr otherwise. A bar appears only
    once its operation has lasted a second, so quick steps leave nothing behind. A resumed
    scoring run counts the windows it found done (``items_reused``) in its count.

    >>> sink = NotebookProgress()
    >>> sink(ProgressEvent(stage="score", label="scoring x", done=0, total=4))
    >>> sink(ProgressEvent(stage="score", label="scoring x", done=4, total=4, finished=True))
    """

    def __init__(self):
        self._bars: dict[tuple[str, str], Any] = {}

    @staticmethod
    def _factory():
        if "ipykernel" in sys.modules:
            try:
                import ipywidgets  # noqa: F401 - tqdm.notebook draws with it
                from tqdm.notebook import tqdm

                return tqdm
            except ImportError:
                pass
        from tqdm.std import tqdm

        return tqdm

    def __call__(self, event: ProgressEvent) -> None:
        key = (event.stage, event.label)
        reused = int(event.extra.get("items_reused", 0) or 0)
        bar = self._bars.get(key)
        if bar is None:
            if event.finished:
                return
            total = None if event.total is None else event.total + reused
            bar = self._factory()(
                total=total,
                initial=reused,
                desc=event.label,
                unit=f" {event.unit}",
                delay=1.0,
                leave=True,
                dynamic_ncols=True,
            )
            self._bars[key] = bar
        if (
            event.total is not None and bar.total != event.total + reused
        ):  # a size learnt after the start
            bar.total = event.total + reused
            bar.refresh()
        bar.update(max(0, event.done + reused - bar.n))
        if event.finished:
            bar.close()
            del self._bars[key]


def resolve_progress(progress: bool | ProgressCallback | None) -> ProgressCallback | None:
    """A public function's ``progress`` argument as a callback: True -> the ambient callback
    inside another public call or a :func:`memclaim.progress.reporting` block, else a
    :class:`NotebookProgress`; False/None -> None; a callable -> itself.

    >>> resolve_progress(False) is None, callable(resolve_progress(True))
    (True, True)
    """
    if progress is None or progress is False:
        return None
    if progress is True:
        if _IN_CALL.get() or ambient() is not None:  # inside another call, or a reporting() block
            return ambient()
        return NotebookProgress()
    if not callable(progress):
        raise InputError(
            f"progress must be True, False or a callback taking a memclaim.progress.ProgressEvent, got "
            f"{progress!r}",
            hint="progress=True for a bar, progress=False for none",
        )
    return progress


# ------------------------------------------------------------------------------ provenance
def _short(v: Any) -> str:
    """An argument as the report's call shows it: values literally, data by its shape."""
    if v is None or isinstance(v, (bool, int, float, Fraction)):
        return repr(v)
    if isinstance(v, str):
        return repr(v if len(v) <= 80 else v[:77] + "...")
    if isinstance(v, Path):
        return repr(str(v))
    if isinstance(v, (list, tuple)):
        if len(v) <= 4 and all(
            isinstance(x, (str, int, float, bool)) and len(repr(x)) <= 40 for x in v
        ):
            return repr(list(v))
        return f"<{type(v).__name__} of {len(v)}>"
    if isinstance(v, dict):
        return f"<dict of {len(v)}>"
    name = getattr(v, "name", None)
    if isinstance(name, str) and hasattr(v, "fingerprint"):
        return f"<model {name}>"
    if callable(v):
        return f"<{getattr(v, '__name__', type(v).__name__)}>"
    shape = getattr(v, "shape", None)
    if shape is not None:
        return f"<{type(v).__name__} {'x'.join(map(str, shape))}>"
    return f"<{type(v).__name__}>"


def describe_call(name: str, args: tuple, kwargs: dict) -> str:
    """``memclaim.NAME(...)`` with the arguments given (not the defaults), data shortened.

    >>> describe_call("population", ("toy", [{"id": "a", "text": "..."}] * 40), {"alpha": "0.1", "policies": ["full"]})
    "memclaim.population('toy', <list of 40>, alpha='0.1', policies=['full'])"
    """
    parts = [_short(a) for a in args]
    parts += [f"{k}={_short(v)}" for k, v in kwargs.items() if k not in ("progress", "log")]
    return f"memclaim.{name}({', '.join(parts)})"


def remember_invocation(result: Any, inv: dict | None) -> Any:
    """Attach ``inv`` to a frozen result (attribute ``_invocation``, not a field), so that reports
    it renders later name the call that made it."""
    if inv is not None and hasattr(result, "__dict__") and not isinstance(result, type):
        try:
            object.__setattr__(result, "_invocation", inv)
        except (AttributeError, TypeError):  # pragma: no cover - a value without a __dict__
            pass
    return result


# ------------------------------------------------------------------------------ the decorator
def _renamed(fname: str, kwargs: dict, renamed: dict[str, str]) -> dict:
    for old, new in renamed.items():
        if old in kwargs:
            if new in kwargs:
                raise KeywordError(
                    f"{fname}() got both {old}= and its new name {new}=",
                    hint=f"pass {new}= only ({old}= is its old name)",
                )
            warnings.warn(
                f"{fname}({old}=...) is now {fname}({new}=...); the old name is removed in the next "
                "release",
                DeprecationWarning,
                stacklevel=3,
            )
            kwargs[new] = kwargs.pop(old)
    return kwargs


def public(fn: Callable | None = None, *, renamed: dict[str, str] | None = None) -> Callable:
    """Decorate a public function of the API (see the module docstring). ``renamed`` maps the
    keywords renamed in this release to their new names.

    >>> @public(renamed={"policy": "policies"})
    ... def f(x: int, *, policies: str = "full", progress=True) -> str:
    ...     return policies
    >>> f(1, policies="greedy")
    'greedy'
    >>> f(1, polices="greedy")
    Traceback (most recent call last):
    memclaim.api._public.KeywordError: f() got an unknown keyword polices='greedy'
      fix: did you mean policies=? f() takes x, policies, progress
    """
    renamed = dict(renamed or {})

    def wrap(fn: Callable) -> Callable:
        sig = inspect.signature(fn)
        params = sig.parameters
        takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        names = [
            n
            for n, p in params.items()
            if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        ]
        progress_default = params["progress"].default if "progress" in params else None

        @functools.wraps(fn)
        def inner(*args, **kwargs):
            kwargs = _renamed(fn.__name__, kwargs, renamed)
            if not takes_any:
                for k in kwargs:
                    if k not in params or params[k].kind is inspect.Parameter.POSITIONAL_ONLY:
                        close = difflib.get_close_matches(k, names + list(renamed), n=1, cutoff=0.6)
                        guess = renamed.get(close[0], close[0]) if close else None
                        hint = (
                            (f"did you mean {guess}=? " if guess else "")
                            + f"{fn.__name__}() takes "
                            + ", ".join(names)
                        )
                        raise KeywordError(
                            f"{fn.__name__}() got an unknown keyword {k}={_short(kwargs[k])}",
                            hint=hint,
                        )
            nested = _IN_CALL.get()
            call = describe_call(fn.__name__, args, kwargs)
            if "progress" in params:
                kwargs["progress"] = resolve_progress(kwargs.get("progress", progress_default))
            if "log" in params and kwargs.get("log") is None and nested:
                kwargs["log"] = ambient_log()
            progress = kwargs.get("progress") if "progress" in params else ambient()
            log = kwargs.get("log") if "log" in params else ambient_log()
            token = _IN_CALL.set(True)
            try:
                with invoked_as({"api": call}) as inv, reporting(progress, log), quiet_libraries():
                    result = fn(*args, **kwargs)
            finally:
                _IN_CALL.reset(token)
            return remember_invocation(result, inv)

        inner.renamed_keywords = dict(renamed)
        inner.__signature__ = sig
        return inner

    return wrap(fn) if fn is not None else wrap


def cli_invocation(argv) -> dict:
    """The invocation record of a command line (``memclaim`` + ``argv``), with the folder it ran in.

    >>> cli_invocation(["budget", "--p", "1e-5"])["argv"]
    ['budget', '--p', '1e-5']
    """
    return {"argv": [str(a) for a in argv], "cwd": os.getcwd()}


def invocation_of(result: Any) -> dict | None:
    """The invocation a result remembers (:func:`remember_invocation`), else the one in force."""
    return getattr(result, "_invocation", None) or current_invocation()
