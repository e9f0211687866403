"""Small filesystem helpers: atomic writes (temp file + fsync + rename) and content hashes."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from ._version import __version__
from .errors import InputError


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see either the old file or the whole new one.

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> atomic_write_bytes(d / "sub" / "x.bin", b"data")
    >>> (d / "sub" / "x.bin").read_bytes()
    b'data'
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600 files; give the usual mode
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def write_files(
    folder: str | os.PathLike, files: Mapping[str, bytes], *, owned: Callable[[Path], bool]
) -> dict[str, Path]:
    """Write several files (``{name: bytes}``) into ``folder`` as one change: each is staged
    into a temporary file beside its target (written and fsynced: this is where a full disk
    fails, and then every staged file is removed and every previous file is left as it was),
    then all are renamed into place (renames need no space).

    A file that already exists is replaced only if ``owned(path)`` says memclaim wrote it (e.g.
    the folder's report.json is a memclaim report); anything else is refused before any file is
    written.

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> sorted(write_files(d, {"a.txt": b"1", "b.txt": b"2"}, owned=lambda p: False))
    ['a.txt', 'b.txt']
    >>> write_files(d, {"a.txt": b"3"}, owned=lambda p: False)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    memclaim.errors.InputError: '.../a.txt' exists and memclaim did not write it; memclaim does not overwrite it
      fix: choose another --out folder, or move the file away
    """
    folder = Path(folder)
    for name in files:
        target = folder / name
        if target.is_dir() or target.is_symlink():
            raise InputError(
                f"{str(target)!r} is a folder or a link, not a file memclaim can replace",
                hint="choose another --out folder",
            )
        if target.exists() and not owned(target):
            raise InputError(
                f"{str(target)!r} exists and memclaim did not write it; memclaim does not overwrite it",
                hint="choose another --out folder, or move the file away",
            )
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(
            f"cannot create the output folder {str(folder)!r}: {exc.strerror or exc}",
            hint="choose a folder you can write",
        ) from None
    staged: dict[str, str] = {}
    try:
        for name, data in files.items():
            _stage(folder, name, data, staged)
    except BaseException:
        for tmp in staged.values():
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
        raise
    # nothing failed: rename everything into place, one rename after another (no space needed;
    # only a kill in these microseconds could leave some files new and some old)
    for name, tmp in staged.items():
        os.replace(tmp, folder / name)
    try:
        dfd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass
    return {name: folder / name for name in files}


def _stage(folder: Path, name: str, data: bytes, staged: dict) -> None:
    """Write ``data`` to a new temporary file beside ``folder/name`` (fsynced); record it in ``staged``."""
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=folder)
    staged[name] = tmp
    os.fchmod(fd, 0o666 & ~_umask())
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """:func:`atomic_write_bytes` of ``text`` in UTF-8.

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> atomic_write_text(d / "t.txt", "caf\u00e9")
    >>> len((d / "t.txt").read_bytes())  # the e-acute takes two bytes in UTF-8
    5
    """
    atomic_write_bytes(path, text.encode("utf-8"))


def sha256_bytes(data: bytes) -> str:
    """The hex sha256 of ``data``.

    >>> sha256_bytes(b"")[:16]
    'e3b0c44298fc1c14'
    """
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | os.PathLike, *, chunk: int = 1 << 22) -> str:
    """The hex sha256 of a file's bytes, read in ``chunk``-byte blocks.

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "f").write_bytes(b"abc")
    >>> sha256_file(d / "f", chunk=2) == sha256_bytes(b"abc")
    True
    """
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while True:
            block = fh.read(chunk)
            if not block:
                break
            h.update(block)
    return h.hexdigest()


def cache_dir() -> Path:
    """Where memclaim caches converted models and the tiny GPT (``$MEMCLAIM_CACHE`` overrides;
    else ``$XDG_CACHE_HOME/memclaim`` or ``~/.cache/memclaim``); created if missing.

    >>> cache_dir().is_dir()
    True
    """
    root = os.environ.get("MEMCLAIM_CACHE")
    if root:
        p = Path(root)
    else:
        p = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "memclaim"
    p.mkdir(parents=True, exist_ok=True)
    return p


# A folder memclaim made says so in this file: the names of the files it wrote. Only such a
# folder, holding nothing else, may be replaced (``--overwrite``); see :func:`replaceable_folder`.
MARKER_FILE = ".memclaim-folder.json"


def write_marker(folder: str | os.PathLike, *, kind: str) -> None:
    """Record in ``folder`` that memclaim made it and which files it wrote (call last).

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "model.bin").write_bytes(b"w")
    >>> write_marker(d, kind="model")
    >>> replaceable_folder(d)  # only memclaim's files: --overwrite may replace it
    """
    import json

    folder = Path(folder)
    files = sorted(
        str(p.relative_to(folder))
        for p in folder.rglob("*")
        if p.is_file() and p.name != MARKER_FILE
    )
    atomic_write_text(
        folder / MARKER_FILE,
        json.dumps({"memclaim": __version__, "kind": kind, "files": files}, indent=1),
    )


def _marker(folder: Path) -> dict | None:
    import json

    try:
        m = json.loads((folder / MARKER_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return m if isinstance(m, dict) and isinstance(m.get("files"), list) else None


def replaceable_folder(out: str | os.PathLike, *, option: str = "--out") -> None:
    """Raise unless the existing folder ``out`` may be replaced: memclaim made and marked it,
    it holds only the files memclaim wrote there, it is not a symbolic link, and it is neither
    the current folder nor one of its parents. A missing or empty folder is always fine.

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "notes.txt").write_text("mine")
    >>> replaceable_folder(d)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    memclaim.errors.InputError: --out '...' is a folder memclaim did not make (it has no .memclaim-folder.json); ...
    """
    out = Path(out)
    if not out.exists() and not out.is_symlink():
        return
    if out.is_symlink():
        raise InputError(
            f"{option} {str(out)!r} is a symbolic link; memclaim does not replace it",
            hint=f"pass the folder it points to, or a new {option} folder",
        )
    if not out.is_dir():
        raise InputError(
            f"{option} {str(out)!r} exists and is not a folder",
            hint=f"choose a new {option} folder",
        )
    real, cwd = out.resolve(), Path.cwd().resolve()
    if real == cwd or real in cwd.parents:
        raise InputError(
            f"{option} {str(out)!r} is the current folder or one of its parents; memclaim never "
            "replaces it",
            hint=f"choose a new {option} folder, e.g. {option} models/run1",
        )
    if not any(out.iterdir()):
        return
    marker = _marker(out)
    if marker is None:
        raise InputError(
            f"{option} {str(out)!r} is a folder memclaim did not make (it has no {MARKER_FILE}); "
            "--overwrite replaces only folders memclaim wrote",
            hint=f"choose a new {option} folder, or move {str(out)!r} away yourself",
        )
    ours = set(marker["files"]) | {MARKER_FILE}
    extra = sorted(
        str(p.relative_to(out))
        for p in out.rglob("*")
        if (p.is_file() or p.is_symlink()) and str(p.relative_to(out)) not in ours
    )
    if extra:
        raise InputError(
            f"{option} {str(out)!r} holds files memclaim did not write: {extra[:5]}"
            + (f" and {len(extra) - 5} more" if len(extra) > 5 else ""),
            hint="move them out of the folder first, or choose a new folder",
        )


@contextlib.contextmanager
def atomic_directory(
    out: str | os.PathLike, *, tmp_prefix: str | None = None, replace: bool = False
) -> Iterator[Path]:
    """Build a folder atomically: yields an empty temporary sibling of ``out``; when the block
    ends normally it is renamed to ``out``, otherwise it is deleted. Readers see the old folder,
    the complete new one, or nothing; a killed writer leaves only a hidden temp folder.

    An existing non-empty ``out`` is never deleted unless ``replace`` (the caller has checked
    that memclaim made it, :func:`replaceable_folder`); then it is first renamed aside, so a
    failure leaves it whole, and removed only once the new folder is in place.

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> with atomic_directory(d / "model") as tmp:
    ...     _ = (tmp / "config.json").write_text("{}")
    >>> sorted(p.name for p in (d / "model").iterdir())
    ['config.json']
    """
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(
        tempfile.mkdtemp(prefix=tmp_prefix or f".{out.name}.", suffix=".tmp", dir=out.parent)
    )
    try:
        yield tmp
        old = None
        if out.exists() or out.is_symlink():
            if out.is_dir() and not out.is_symlink() and not any(out.iterdir()):
                out.rmdir()
            elif not replace:
                raise InputError(
                    f"{str(out)!r} already exists; memclaim does not replace it",
                    hint="choose a new folder, or remove it yourself",
                )
            else:
                old = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".old", dir=out.parent))
                os.replace(
                    out, old
                )  # rename aside: the old folder stays whole until the new one is in place
        try:
            os.replace(tmp, out)
        except BaseException:
            if old is not None:
                os.replace(old, out)
            raise
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


@contextlib.contextmanager
def file_lock(
    path: str | os.PathLike, *, shared: bool = False, blocking: bool = True
) -> Iterator[bool]:
    """An advisory lock (flock) held for the block: exclusive by default, ``shared`` for many
    readers/writers at once. With ``blocking=False`` it yields False at once when another
    process holds a conflicting lock (and True when it got the lock).

    flock holds between processes on one machine and on local filesystems; it does not hold
    between NFS clients (see docs/distributed.md).

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> with file_lock(d / ".lock") as got:
    ...     got
    True
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666 & ~_umask())
    try:
        try:
            fcntl.flock(
                fd,
                (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | (0 if blocking else fcntl.LOCK_NB),
            )
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def available_memory() -> int:
    """Bytes of main memory available to a new allocation: ``MemAvailable`` of /proc/meminfo
    (Linux), else the free physical pages. The one home of this number (placement plans, batch
    sizes, the cost checks that refuse work this machine cannot hold).

    >>> available_memory() > 0
    True
    """
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:  # not Linux
        pass
    return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
