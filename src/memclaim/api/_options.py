"""The light part of the API's options (no numpy, no torch at import): window-length defaults,
output folders, torch threads. The CLI's option definitions read these without loading the
scoring stack."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import InputError
from ..procedure import (  # [EM] §4: one home
    DEFAULT_POLICY,
    DEFAULT_PREFIX_TOKENS,
    DEFAULT_SUFFIX_TOKENS,
)
from ..text.io import (
    FORMATS as INPUT_FORMATS,  # the --format choices (text/io imports nothing heavy)
)

__all__ = [
    "DEFAULT_POLICY",
    "DEFAULT_PREFIX_TOKENS",
    "DEFAULT_SUFFIX_TOKENS",
    "INPUT_FORMATS",
    "window_lengths",
    "check_out_dir",
    "set_threads",
]


def window_lengths(prefix_tokens, suffix_tokens, prefix_field=None, suffix_field=None) -> tuple:
    """--prefix-tokens/--suffix-tokens as the run's lengths: the defaults (50, 50) for texts; with
    --prefix-field/--suffix-field an omitted length is None, the whole field."""
    fields = prefix_field is not None or suffix_field is not None
    p = prefix_tokens if prefix_tokens is not None else (None if fields else DEFAULT_PREFIX_TOKENS)
    s = suffix_tokens if suffix_tokens is not None else (None if fields else DEFAULT_SUFFIX_TOKENS)
    return p, s


def check_out_dir(path, option: str = "--out") -> Path:
    """Fail before any work when ``path`` cannot become a folder memclaim writes: it is a file,
    or the nearest folder that exists is not writable (no permission, read-only filesystem)."""
    if isinstance(path, str) and not path.strip():
        raise InputError(
            f"{option} {path!r} is empty (it would name the current folder)",
            hint=f"pass a folder path to {option}, e.g. {option} runs/first",
        )
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise InputError(
            f"{option} {str(path)!r} exists and is not a folder",
            hint=f"pass a folder path to {option}",
        )
    q = p.absolute()
    while not q.exists() and q != q.parent:
        q = q.parent
    if not q.is_dir():
        raise InputError(
            f"{option} {str(path)!r} cannot be created: {str(q)!r} is a file, not a folder",
            hint=f"choose another {option} path",
        )
    read_only = False
    try:
        read_only = bool(os.statvfs(q).f_flag & os.ST_RDONLY)
    except OSError:
        pass
    if read_only or not os.access(q, os.W_OK | os.X_OK):
        why = "is on a read-only filesystem" if read_only else "is not writable by this user"
        raise InputError(
            f"{option} {str(path)!r} cannot be written: {str(q)!r} {why}",
            hint=f"choose a {option} folder you can write (e.g. under your home folder)",
        )
    return p


def set_threads(threads: int | None) -> None:
    """Torch CPU threads (None: leave torch's default)."""
    if threads is None:
        return
    if threads < 1:
        raise InputError(f"--threads must be >= 1, got {threads}", hint="e.g. --threads 4")
    cpus = os.cpu_count() or 1
    if threads > 8 * cpus:
        raise InputError(
            f"--threads {threads} is more than 8 threads per CPU core ({cpus} here): each thread takes "
            "memory and oversubscription only slows the run",
            hint=f"e.g. --threads {cpus}",
        )
    import torch

    torch.set_num_threads(threads)
