"""Exception types. Every user-facing error derives from :class:`MemclaimError` (a ValueError).

Messages repeat the offending value and say how to fix it; the CLI prints them without a
traceback and exits with status 2. Input checks never use ``assert``.
"""

from __future__ import annotations

import types


class MemclaimError(ValueError):
    """Base class: a problem the user can fix. ``hint`` says how."""

    def __init__(self, message: str, *, hint: str | None = None):
        self.hint = hint
        super().__init__(message if hint is None else f"{message}\n  fix: {hint}")


class InputError(MemclaimError):
    """Bad input data: missing/empty files, wrong encoding, texts too short, bad columns."""


class DomainError(MemclaimError):
    """A numeric argument outside its mathematical domain (epsilon <= 0, alpha not in (0,1), ...)."""


class PolicyError(MemclaimError):
    """An unknown or malformed decoding-policy string."""


class ModelLoadError(MemclaimError):
    """A model that cannot be found or loaded (no weights, no tokenizer, pickle refused, ...)."""


class ProcedureMismatchError(MemclaimError):
    """Two results computed under different extraction procedures were about to be compared."""


class StoreError(MemclaimError):
    """The result store is unreadable, inconsistent, or cannot be written."""


class NumericsError(MemclaimError):
    """A computed score outside its domain (NaN, or a log-probability of +inf): the model's
    weights or the arithmetic of a setting are broken, and the value is not stored."""


class MissingExtraError(MemclaimError, ImportError):
    """An optional dependency stack is not installed."""

    def __init__(self, module: str, extra: str):
        super().__init__(
            f"this feature needs the optional package {module!r}, which is not installed",
            hint=f"pip install 'memclaim[{extra}]'",
        )


def require(module: str, extra: str) -> types.ModuleType:
    """Import an optional module lazily; raise :class:`MissingExtraError` naming the extra.

    >>> require("json", "core").dumps([1])
    '[1]'
    >>> require("no_such_module_x", "ray")
    Traceback (most recent call last):
    memclaim.errors.MissingExtraError: this feature needs the optional package 'no_such_module_x', which is not installed
      fix: pip install 'memclaim[ray]'
    """
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise MissingExtraError(module, extra) from exc
