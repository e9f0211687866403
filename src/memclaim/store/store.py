"""The durable, content-addressed score store.

Layout of a store folder (readable with pandas, polars or DuckDB without memclaim)::

    manifest.json                      written only by the driver, atomically
    procedures/<pkey>.json             each extraction procedure, by key
    units/<pkey[:16]>/<unit>.parquet   immutable per-unit results, written atomically
    runs/<run>/run.json                what was asked: inputs (with hashes), options, procedure
    runs/<run>/windows.parquet         window table: ids, char spans, texts, item keys
    runs/<run>/scores.parquet          convenience join: one row per window (written at the end)

Results are keyed by (procedure, item content): an *item* is one (prompt ids, suffix ids) pair;
a window has one item per prompt. A unit file is complete or absent (temp file + fsync +
rename), so a run killed at any point leaves a readable store; the next run adopts every unit
file on disk, including ones finished after the last manifest write, and scores only the rest.

Several processes may write one store at once. Every manifest update is a read-modify-write
under an exclusive lock (``.manifest.lock``) that merges this process's entries into what is on
disk, so every writer's runs and units are recorded. A scoring run holds its run's lock
(``runs/<run>/.lock``: two copies of one command score its units once) and a shared lock on
``.writers.lock``; a run that finds no other writer (it gets that lock exclusively) first deletes
the temporary files that killed writers left behind. The locks are ``flock`` locks: they hold
between processes of one machine and on local filesystems, not between NFS clients
(docs/distributed.md).

Schema history: 1 (memclaim 0.1.0): procedures keyed with model fingerprint scheme 1, which
hashed every file of the model folder. 2: fingerprint scheme 2 (what determines the scores);
``fingerprints`` maps a scheme-1 fingerprint to the scheme-2 one of the same folder, learned when
a run with the model finds a procedure recorded under the old one; such a procedure keeps its
key and its units (so a run started before the upgrade resumes without rescoring), and reads
back with the current fingerprint (``model.fingerprint_v1`` keeps the old one). 3: seals. The
manifest records the sha256 of every procedure file (``procedure_files``), unit file
(``units.<id>.sha256``), run.json (``runs.<id>.run_sha256``) and finished scores.parquet
(``runs.<id>.scores_sha256``), and run.json the sha256 of its windows.parquet, so a label is tied
to its procedure, inputs, windows and scores; :meth:`ScoreStore.verify_run` checks them (and
that the run's label, procedure and id agree everywhere) before a run is read, and a unit or
windows file is checked before scores.parquet is rebuilt from it. A store of schema 1 or 2 is
sealed as it is on its first write by this version; until then (and for what it held before)
only the agreements are checked.
"""

from __future__ import annotations

import contextlib
import copy
import errno
import json
import os
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import NumericsError, StoreError
from ..fsutil import atomic_write_bytes, atomic_write_text, file_lock, sha256_bytes, sha256_file
from ..procedure import Procedure

if TYPE_CHECKING:
    import pyarrow as pa

SCHEMA_VERSION = 3
# 1: memclaim 0.1.0 (model fingerprint scheme 1), 2: no seals; both migrated on the next write
READABLE_SCHEMAS = (1, 2, 3)
MANIFEST_LOCK = ".manifest.lock"
WRITERS_LOCK = ".writers.lock"
RUN_LOCK = ".lock"
_SECTIONS = ("procedures", "units", "runs", "fingerprints", "procedure_files")
_UNSEEN = object()
# what atomic_write_bytes leaves when killed mid-write: ".<name>.<random>.tmp"
_TEMP_NAME = re.compile(r"^\..+\.tmp$")


# What a store folder holds at its top (see the layout above) besides memclaim's temporary files.
STORE_ENTRIES = frozenset(
    ("manifest.json", "units", "procedures", "runs", MANIFEST_LOCK, WRITERS_LOCK)
)


def foreign_entries(root: str | os.PathLike) -> list[str]:
    """The entries of folder ``root`` that say it is not a memclaim store, sorted: none for a
    path that does not exist, an empty folder, or a folder with memclaim's manifest.json; else
    its manifest.json when that is not memclaim's, or every entry a store does not hold. A store
    killed before its first manifest write holds only store entries, and is one.

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> foreign_entries(d), foreign_entries(d / "new")
    ([], [])
    >>> _ = (d / "thesis.tex").write_text("years of work"); (d / "runs").mkdir()
    >>> foreign_entries(d)
    ['thesis.tex']
    """
    root = Path(root)
    if not root.is_dir():
        return []
    manifest = root / "manifest.json"
    if manifest.is_file():
        try:
            m = json.loads(manifest.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return ["manifest.json"]
        return [] if isinstance(m, dict) and "schema_version" in m else ["manifest.json"]
    return sorted(
        e.name
        for e in root.iterdir()
        if e.name not in STORE_ENTRIES
        and not (_TEMP_NAME.match(e.name) and e.name.startswith(".manifest.json."))
        and not e.name.startswith(".ray-probe-")
    )


def _pa():
    import pyarrow as pa
    import pyarrow.parquet as pq

    return pa, pq


def _shown(names: list[str], n: int = 3) -> str:
    shown = ", ".join(repr(x) for x in names[:n])
    return shown + (f" and {len(names) - n} more" if len(names) > n else "")


def _disk_error(exc: OSError, what: str, root: Path) -> StoreError:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return StoreError(
            f"disk full while writing {what}; the store at {str(root)!r} is intact and holds every unit "
            "finished before this one",
            hint="free some space and re-run the same command: it resumes where it stopped",
        )
    return StoreError(
        f"cannot write {what} in {str(root)!r}: {exc}", hint="check permissions and free space"
    )


@dataclass(frozen=True, eq=False)
class UnitResult:
    """One unit's rows (all items of the unit, in unit order); a frozen value."""

    unit_id: str
    procedure_key: str
    policies: tuple[str, ...]
    item_keys: tuple[str, ...]
    prompt_len: tuple[int, ...]
    scores: object  # memclaim.scoring.engine.BatchScores, concatenated over the unit
    extra: dict = field(
        default_factory=dict
    )  # further per-item columns (e.g. near-verbatim bounds)
    # the statistics the unit holds (memclaim.scoring.engine.StatSet.spec); None: every statistic
    stats: str | None = None


# Every statistic the engine computes (memclaim.scoring.engine.STAT_NAMES; repeated here so the
# store needs no torch). A unit written before statistic sets existed (no "stats" in its
# metadata or manifest entry) holds all of them.
ALL_STAT_NAMES = frozenset(
    ("policy_logq", "greedy", "margin", "token_logprob", "token_moments", "rank")
)


def stat_names(spec: str | None) -> frozenset[str]:
    """The statistic names of a stored spec ('greedy+margin+policy_logq'); None: all of them.

    >>> sorted(stat_names("greedy+margin")), len(stat_names(None))
    (['greedy', 'margin'], 6)
    """
    return ALL_STAT_NAMES if spec is None else frozenset(x for x in str(spec).split("+") if x)


def stats_cover(have: str | None, need: str | None) -> bool:
    """Whether a unit holding statistics ``have`` serves a run that needs ``need`` (specs; None =
    all): a census-only unit never serves an audit that needs the full-softmax statistics.

    >>> stats_cover(None, "greedy+margin"), stats_cover("greedy+margin+policy_logq", None)
    (True, False)
    """
    return stat_names(need) <= stat_names(have)


# Unit columns that are natural-log probabilities (or their mean): finite or -inf, never NaN or
# +inf; the other float columns (the std of log-probabilities, the top-1/top-2 logit margin) may
# be +inf but never NaN.
_LOGPROB_FIELDS = ("logq", "token_logq", "token_logprob", "token_mean")
_FLOAT_FIELDS = ("token_std", "min_margin")


def first_out_of_domain(res: UnitResult) -> tuple[str, int, float] | None:
    """The first value of a unit that no score can take, as ``(column, row, value)``: NaN
    anywhere, or +inf in a log-probability column (log q under a policy, per-token log-probs and
    their mean, near-verbatim bounds); None when every value is in its domain.

    >>> from memclaim.decoding import parse_policies
    >>> from memclaim.models.base import SyntheticLM
    >>> from memclaim.scoring.engine import TeacherForcingEngine
    >>> s = TeacherForcingEngine(SyntheticLM(), parse_policies(["full"])).score_batch([[1, 2]], [[3, 4]])
    >>> unit = UnitResult("u", "pk", ("full",), ("a",), (2,), s)
    >>> first_out_of_domain(unit) is None
    True
    >>> s.logq[0, 0] = float("nan")
    >>> first_out_of_domain(unit)
    ('logq:full', 0, nan)
    """
    s = res.scores

    def rows(a, bad):  # per row: any bad value in it
        a = np.asarray(a, dtype=np.float64)
        return bad(a).reshape(len(a), -1).any(axis=1) if a.size else np.zeros(len(a), bool)

    def first(name, a, bad):
        a = np.asarray(a, dtype=np.float64)
        r = rows(a, bad)
        if r.any():
            i = int(np.flatnonzero(r)[0])
            v = a[i].reshape(-1)
            return name, i, float(v[bad(v)][0])
        return None

    def nan_or_pinf(a):
        return np.isnan(a) | np.isposinf(a)

    checks = []
    for f in _LOGPROB_FIELDS:
        a = getattr(s, f, None)
        if a is None:
            continue
        if f in ("logq", "token_logq"):
            for j, spec in enumerate(res.policies):
                col = a[:, j]
                exact = res.extra.get(f"logq_exact:{spec}")
                if (
                    exact is not None and f == "logq"
                ):  # a served model's bounds-only windows hold NaN
                    # by design: their value lives in logq_lower/logq_upper (checked below) and is never
                    # tested as exact
                    col = np.where(np.asarray(exact, bool), col, -np.inf)
                elif (
                    exact is not None
                ):  # per token, a served window may be exact as a whole (a token
                    # surely outside the nucleus: -inf) while later tokens' values are not fixed (NaN)
                    col = np.where(np.isnan(col), -np.inf, col)
                checks.append(
                    (f"{'logq' if f == 'logq' else 'token_logq'}:{spec}", col, nan_or_pinf)
                )
        else:
            checks.append((f, a, nan_or_pinf))
    for f in _FLOAT_FIELDS:
        a = getattr(s, f, None)
        if a is not None:
            checks.append((f, a, np.isnan))
    for name, a in res.extra.items():
        arr = np.asarray(a)
        if arr.dtype.kind == "f":
            checks.append((name, arr, nan_or_pinf if name.startswith("nv_logq:") else np.isnan))
    for name, a, bad in checks:
        hit = first(name, a, bad)
        if hit is not None:
            return hit
    return None


def run_id_of(
    procedure_key: str, label: str, unit_ids: Iterable[str], window_ids: Iterable[str]
) -> str:
    """A run's id: sha256(procedure key | label | unit ids | window ids)[:16], hashed as it
    streams (the same bytes as one string joined in memory, so run ids are those of every
    earlier version). It ties the label to what was scored: a label moved to another run's
    folder no longer gives that folder's id.

    >>> run_id_of("pk", "members", ["u1", "u2"], ["a#0", "b#0"])
    'c51c2f16e4e31f7b'
    """
    import hashlib

    h = hashlib.sha256()
    h.update((procedure_key + "|" + label + "|").encode())
    h.update(",".join(unit_ids).encode())
    h.update(b"|")
    for i, wid in enumerate(window_ids):
        h.update((("," if i else "") + wid).encode())
    return h.hexdigest()[:16]


def _edited(what: str, detail: str) -> StoreError:
    return StoreError(
        f"{what} {detail}: the store was changed after memclaim wrote it (edited by hand?), so its "
        "labels, procedures and scores cannot be trusted together",
        hint="restore the store from a copy, or score again into a new --out folder (re-running the "
        "same scoring command rewrites a run's scores.parquet from its checked unit files)",
    )


def _read_json(path: Path) -> dict:
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise StoreError(
            f"{str(path)!r} is unreadable: {exc}",
            hint="the store is damaged there; restore the file, or score into a new folder",
        ) from None
    if not isinstance(d, dict):
        raise StoreError(
            f"{str(path)!r} is not a JSON object",
            hint="restore the file, or score into a new folder",
        )
    return d


def read_parquet(
    path: Path, *, fix: str = "re-run the scoring command to write it again"
) -> pa.Table:
    """A Parquet file of the store; a damaged one (truncated, bit rot) is a StoreError naming it.

    >>> import tempfile
    >>> p = Path(tempfile.mkdtemp()) / "windows.parquet"
    >>> _ = p.write_bytes(b"PAR1 cut short")
    >>> read_parquet(p)
    Traceback (most recent call last):
    memclaim.errors.StoreError: '...windows.parquet' is unreadable: ... Parquet magic bytes not found in footer. ...
    """
    pa, pq = _pa()
    try:
        return pq.read_table(path)
    except (OSError, pa.ArrowException) as exc:
        raise StoreError(f"{str(path)!r} is unreadable: {exc}", hint=fix) from None


class ScoreStore:
    def __init__(self, root: str | os.PathLike, *, create: bool = True):
        self.root = Path(root)
        if self.root.exists() and not self.root.is_dir():
            raise StoreError(
                f"store path {str(self.root)!r} exists and is not a folder",
                hint="pass a folder for --out",
            )
        if create and (foreign := foreign_entries(self.root)):
            # never write (or sweep temporary files) in a folder memclaim did not make
            raise StoreError(
                f"{str(self.root)!r} is not a memclaim score store and not empty: it holds "
                f"{_shown(foreign)}",
                hint="choose a new or empty folder for --out, or the --out folder "
                "of an earlier memclaim run",
            )
        if create:
            try:
                (self.root / "units").mkdir(parents=True, exist_ok=True)
                (self.root / "procedures").mkdir(exist_ok=True)
                (self.root / "runs").mkdir(exist_ok=True)
            except OSError as exc:
                raise _disk_error(exc, "the store folders", self.root) from None
        elif not (self.root / "manifest.json").exists() and not (self.root / "units").exists():
            raise StoreError(
                f"{str(self.root)!r} is not a memclaim score store (no manifest.json)",
                hint="pass the --out folder of a `memclaim score` run",
            )
        self._manifest = self._read_manifest()
        self._synced = copy.deepcopy(self._manifest)  # the manifest as last read or written
        self._written: dict[str, str] = {}  # unit id -> sha256 of the file this process just wrote

    # ------------------------------------------------------------------ manifest
    def _read_manifest(self) -> dict:
        p = self.root / "manifest.json"
        if not p.exists():
            return {"schema_version": SCHEMA_VERSION, **{k: {} for k in _SECTIONS}}
        try:
            m = json.loads(p.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise StoreError(
                f"manifest {str(p)!r} is unreadable: {exc}",
                hint="restore it, or delete it: unit files are re-adopted on the next run",
            ) from None
        except OSError as exc:
            raise StoreError(
                f"cannot read {str(p)!r}: {exc}", hint="check the store's permissions"
            ) from None
        if not isinstance(m, dict) or m.get("schema_version") not in READABLE_SCHEMAS:
            got = m.get("schema_version") if isinstance(m, dict) else type(m).__name__
            readable = ", ".join(map(str, READABLE_SCHEMAS))
            raise StoreError(
                f"store schema {got!r} is not one this memclaim reads ({readable})",
                hint="use the memclaim version that wrote it, or re-score into a new folder",
            )
        for k in _SECTIONS:
            m.setdefault(k, {})
        return m

    @contextlib.contextmanager
    def manifest_lock(self):
        """The exclusive lock every manifest read-modify-write holds."""
        try:
            with file_lock(self.root / MANIFEST_LOCK):
                yield
        except OSError as exc:
            raise _disk_error(exc, "the manifest lock", self.root) from None

    def _merged_with_disk(self) -> dict:
        """What is on disk now, plus every entry this process has added or changed since it last
        read or wrote the manifest (call under the lock): the union loses no writer's work, and
        an entry another writer changed meanwhile (a run it finished and sealed) is not put back
        as this process last saw it."""
        disk = self._read_manifest()
        merged = {**disk, **{k: v for k, v in self._manifest.items() if k not in _SECTIONS}}
        for k in _SECTIONS:
            seen = self._synced.get(k, {})
            mine = {
                key: v
                for key, v in self._manifest.get(k, {}).items()
                if seen.get(key, _UNSEEN) != v
            }
            merged[k] = {**disk.get(k, {}), **mine}
        return merged

    def _synced_to(self, merged: dict) -> None:
        self._manifest = merged
        self._synced = copy.deepcopy(merged)

    def write_manifest(self) -> None:
        """Merge this process's entries into the manifest on disk and write it, atomically and
        under the manifest lock: concurrent writers of one store are all recorded."""
        with self.manifest_lock():
            merged = self._merged_with_disk()
            self._seal(merged)  # a store written before seals: sealed as it is (schema 3)
            merged["schema_version"] = SCHEMA_VERSION
            try:
                atomic_write_text(
                    self.root / "manifest.json", json.dumps(merged, indent=1, sort_keys=True)
                )
            except OSError as exc:
                raise _disk_error(exc, "manifest.json", self.root) from None
            self._synced_to(merged)
            # under the lock no one else is writing the manifest: its temp files are dead writers'
            self.remove_temps(self.root, prefix=".manifest.json.")

    def _seal(self, m: dict) -> None:
        """Record in manifest ``m`` the hashes it lacks: the procedure files, run.json and
        scores.parquet of runs recorded without them, and unit files (every entry of a store
        written before seals; everything this version writes is sealed as it is written)."""
        for key in m["procedures"]:
            f = self.root / "procedures" / f"{key}.json"
            if key not in m["procedure_files"] and f.is_file():
                m["procedure_files"][key] = sha256_file(f)
        for rid, entry in list(m["runs"].items()):
            d = self.run_dir(rid)
            if "run_sha256" not in entry and (d / "run.json").is_file():
                entry = dict(entry, run_sha256=sha256_file(d / "run.json"))
                if (d / "scores.parquet").is_file():
                    entry["scores_sha256"] = sha256_file(d / "scores.parquet")
                m["runs"][rid] = entry
        for uid, entry in list(m["units"].items()):
            if "sha256" not in entry:
                f = self.unit_path((entry or {}).get("procedure", ""), uid)
                if f.is_file():
                    m["units"][uid] = dict(entry, sha256=sha256_file(f))

    def forget_run(self, run_id: str, *, procedure_key: str | None = None) -> None:
        """Take back a run this process added and stored nothing for (a command that failed
        before its first unit): its folder and manifest entry, and ``procedure_key``'s record
        when this run added it and nothing else uses it, so that the store is as it was and no
        later command finds an unfinished run it never asked for."""
        import shutil

        with self.manifest_lock():
            merged = self._merged_with_disk()
            merged["runs"].pop(run_id, None)
            self._manifest["runs"].pop(run_id, None)
            unused = (
                procedure_key is not None
                and not any(
                    (r or {}).get("procedure") == procedure_key for r in merged["runs"].values()
                )
                and not any(
                    (u or {}).get("procedure") == procedure_key for u in merged["units"].values()
                )
            )
            if unused:
                merged["procedures"].pop(procedure_key, None)
                self._manifest["procedures"].pop(procedure_key, None)
                merged["procedure_files"].pop(procedure_key, None)
                self._manifest["procedure_files"].pop(procedure_key, None)
            try:
                atomic_write_text(
                    self.root / "manifest.json", json.dumps(merged, indent=1, sort_keys=True)
                )
            except OSError as exc:
                raise _disk_error(exc, "manifest.json", self.root) from None
            self._synced_to(merged)
        shutil.rmtree(self.run_dir(run_id), ignore_errors=True)
        if unused:
            with contextlib.suppress(FileNotFoundError):
                (self.root / "procedures" / f"{procedure_key}.json").unlink()
            with contextlib.suppress(OSError):  # only if empty: another run's units stay
                (self.root / "units" / procedure_key[:16]).rmdir()

    def refresh(self) -> None:
        """Re-read the manifest (units and runs other processes recorded), keeping this process's entries."""
        with self.manifest_lock():
            self._synced_to(self._merged_with_disk())

    # ------------------------------------------------------------------ locks and stale temp files
    def run_lock(self, run_id: str, *, blocking: bool = True):
        """The lock a scoring run holds on its run (yields False when not blocking and taken)."""
        return file_lock(self.run_dir(run_id) / RUN_LOCK, blocking=blocking)

    @contextlib.contextmanager
    def writer(self):
        """Held by every scoring run (shared). A run that gets it exclusively is the only writer:
        it first deletes the temporary files of killed writers; yields how many it deleted."""
        removed = 0
        with file_lock(self.root / WRITERS_LOCK, blocking=False) as alone:
            if alone:
                removed = self.remove_stale_temps()
        with file_lock(self.root / WRITERS_LOCK, shared=True):
            yield removed

    def remove_stale_temps(self) -> int:
        """Delete temporary files of killed writers (``.*.tmp`` in the store's folders, and Ray
        probe files). Call only when no writer is live (holding ``.writers.lock`` exclusively)."""
        n = self.remove_temps(self.root) + self.remove_temps(
            self.root, prefix=".ray-probe-", suffix=""
        )
        for sub in ("procedures", "units", "runs"):
            base = self.root / sub
            if base.is_dir():
                n += self.remove_temps(base)
                for d in base.iterdir():
                    if d.is_dir():
                        n += self.remove_temps(d)
        return n

    @staticmethod
    def remove_temps(folder: Path, *, prefix: str = ".", suffix: str = ".tmp") -> int:
        n = 0
        try:
            entries = list(folder.iterdir())
        except OSError:
            return 0
        for f in entries:
            name = f.name
            if not (name.startswith(prefix) and name.endswith(suffix)):
                continue
            if suffix == ".tmp" and not _TEMP_NAME.match(name):
                continue
            try:
                if f.is_file() and not f.is_symlink():
                    f.unlink()
                    n += 1
            except OSError:
                pass
        return n

    @property
    def manifest(self) -> dict:
        return self._manifest

    # ------------------------------------------------------------------ procedures
    def add_procedure(self, procedure) -> str:
        key = procedure.key
        if key not in self._manifest["procedures"]:
            text = json.dumps(procedure.to_dict(), indent=1, sort_keys=True)
            try:
                atomic_write_text(self.root / "procedures" / f"{key}.json", text)
            except OSError as exc:
                raise _disk_error(exc, "a procedure file", self.root) from None
            self._manifest["procedures"][key] = procedure.to_dict()
            self._manifest["procedure_files"][key] = sha256_bytes(text.encode("utf-8"))
        return key

    def procedure(self, key: str) -> dict:
        """The procedure record of ``key``, with the model's current fingerprint when the store
        learned it for a scheme-1 record (see the schema history above)."""
        if key in self._manifest["procedures"]:
            rec = self._manifest["procedures"][key]
        else:
            p = self.root / "procedures" / f"{key}.json"
            if not p.exists():
                raise StoreError(f"procedure {key[:16]} is not in the store {str(self.root)!r}")
            rec = _read_json(p)
        return self._current_fingerprint(rec)

    def _current_fingerprint(self, rec: dict) -> dict:
        model = rec.get("model") or {}
        new = self._manifest.get("fingerprints", {}).get(model.get("fingerprint"))
        if not new or "fingerprint_scheme" in model:
            return rec
        m = {
            **model,
            "fingerprint": new["fingerprint"],
            "fingerprint_scheme": new["scheme"],
            "fingerprint_v1": model.get("fingerprint"),
        }
        return {**rec, "model": m}

    def find_procedure(self, procedure, legacy_fingerprints: Iterable[str] = ()) -> str | None:
        """The key of a procedure the store holds that is ``procedure`` recorded by another
        memclaim version (the version is part of a procedure's key, and a store written by an
        earlier version resumes: store_v1 and store_v2 were written by 0.1.0) or under one of
        ``legacy_fingerprints``, older fingerprints of the same model folder (schema 1), or
        None. ``procedure``'s own key is not looked for.

        >>> ScoreStore("runs/old", create=False).find_procedure(procedure)  # written by 0.1.0  # doctest: +SKIP
        'b314a29f159cc4e34bf2adbc231522d275431f38a625cf581859beabf1fa5797'
        """
        d = procedure.to_dict()
        versions = [d["memclaim_version"]] + sorted(
            {
                str(p.get("memclaim_version"))
                for p in self._manifest["procedures"].values()
                if isinstance(p, dict) and p.get("memclaim_version")
            }
            - {d["memclaim_version"]}
        )
        bare = {k: v for k, v in d["model"].items() if k != "fingerprint_scheme"}
        models = [d["model"]] + [dict(bare, fingerprint=fp) for fp in legacy_fingerprints]
        for i, model in enumerate(models):
            for j, version in enumerate(versions):
                if i == 0 and j == 0:
                    continue  # the procedure itself
                key = Procedure.from_dict({**d, "model": model, "memclaim_version": version}).key
                if (
                    key in self._manifest["procedures"]
                    or (self.root / "procedures" / f"{key}.json").exists()
                ):
                    return key
        return None

    def find_legacy_procedure(self, procedure, legacy_fingerprints: Iterable[str]) -> str | None:
        """The key of a procedure recorded under an older fingerprint of the same model folder
        that is otherwise ``procedure`` (same policies, prompt rule, lengths; any memclaim version
        :meth:`find_procedure` accepts), or None."""
        return self.find_procedure(procedure, legacy_fingerprints)

    def learn_fingerprint(self, old: str, new: str, scheme: int) -> None:
        """Record that fingerprint ``old`` (scheme 1) and ``new`` name the same model folder."""
        self._manifest.setdefault("fingerprints", {})[old] = {
            "fingerprint": new,
            "scheme": int(scheme),
        }

    def has_legacy_procedures(self) -> bool:
        return any(
            "fingerprint_scheme" not in (p.get("model") or {})
            for p in self._manifest["procedures"].values()
        )

    # ------------------------------------------------------------------ units
    def unit_path(self, procedure_key: str, unit_id: str) -> Path:
        return self.root / "units" / procedure_key[:16] / f"{unit_id}.parquet"

    def unit_stats(self, unit_id: str) -> str | None:
        """The statistics a recorded unit holds (a spec; None = all, as every unit written before
        statistic sets existed)."""
        return (self._manifest["units"].get(unit_id) or {}).get("stats")

    def unit_done(self, procedure_key: str, unit_id: str, *, needs: str | None = None) -> bool:
        """Whether the unit is stored with at least the statistics ``needs`` (a spec; None = all).
        A unit file on disk that the manifest does not know yet counts only after
        :meth:`adopt_orphans` has read its metadata."""
        if unit_id in self._manifest["units"]:
            return stats_cover(self.unit_stats(unit_id), needs)
        if needs is not None and stat_names(needs) != ALL_STAT_NAMES:
            return False
        return self.unit_path(procedure_key, unit_id).exists()

    def adopt_orphans(self, procedure_key: str, unit_ids: Iterable[str]) -> int:
        """Record unit files finished after the last manifest write (driver died in between).

        An orphan is adopted only if all of it reads back (footer and every data page, as many
        rows as its metadata says): a file whose footer survived but whose data did not (a torn
        copy, bit rot) is removed and its unit scored again, never recorded as done."""
        n = 0
        for uid in unit_ids:
            path = self.unit_path(procedure_key, uid)
            if uid not in self._manifest["units"] and path.exists():
                if not path.is_file():
                    raise StoreError(
                        f"{str(path)!r} is in the way of unit {uid[:12]}: it is not a file memclaim wrote",
                        hint="move it out of the store and re-run; the unit is then scored again",
                    )
                try:
                    meta = self._unit_meta(path)
                    self._check_unit_body(path, meta)  # the data pages too, not only the footer
                except StoreError:
                    path.unlink()  # unreadable: score it again
                    continue
                entry = {
                    "procedure": procedure_key,
                    "n_items": meta["n_items"],
                    "sha256": sha256_file(self.unit_path(procedure_key, uid)),
                }
                if meta.get("stats") is not None:
                    entry["stats"] = meta["stats"]
                self._manifest["units"][uid] = entry
                n += 1
        return n

    def refresh_unit(self, procedure_key: str, unit_id: str) -> None:
        """Re-read the statistics of a recorded unit from its file (a run killed after replacing
        the file with one holding more statistics, before the manifest said so)."""
        path = self.unit_path(procedure_key, unit_id)
        try:
            meta = self._unit_meta(path)
        except StoreError:
            return
        entry = dict(
            self._manifest["units"].get(unit_id)
            or {"procedure": procedure_key, "n_items": meta["n_items"]}
        )
        entry.pop("stats", None)
        if meta.get("stats") is not None:
            entry["stats"] = meta["stats"]
        entry["sha256"] = sha256_file(path)
        self._manifest["units"][unit_id] = entry

    def _unit_meta(self, path: Path) -> dict:
        pa, pq = _pa()
        try:
            md = pq.read_schema(path).metadata or {}
            return json.loads(md[b"memclaim"].decode())
        except Exception as exc:  # noqa: BLE001 - any parse failure means an unusable file
            raise StoreError(f"unit file {str(path)!r} is unreadable: {exc}") from None

    @staticmethod
    def _check_unit_body(path: Path, meta: dict) -> None:
        """Read every page of a unit file: StoreError unless it decodes to ``meta['n_items']`` rows."""
        rows = read_parquet(path).num_rows
        if rows != meta.get("n_items"):
            raise StoreError(
                f"unit file {str(path)!r} holds {rows} rows, its metadata says {meta.get('n_items')}"
            )

    def write_unit(self, res: UnitResult, *, where: Callable[[str], str] | None = None) -> Path:
        """Serialize one unit to Parquet and rename it into place (atomic). A unit holding a
        value no score can take (:func:`first_out_of_domain`) is refused with a NumericsError
        naming it (``where(item_key)`` says which window an item is), and nothing is written."""
        bad = first_out_of_domain(res)
        if bad is not None:
            column, row, value = bad
            key = res.item_keys[row]
            what = where(key) if where is not None else f"item {key[:12]}"
            raise NumericsError(
                f"unit {res.unit_id[:12]}: {column} is {value} for {what}; a score is a log-probability, finite or "
                "-inf (an exact zero), so nothing of this unit was stored",
                hint="the model computes NaN or infinity: check its weights for NaN/inf (a damaged or diverged "
                "checkpoint) and run it in float32 (--dtype float32); if one decoding policy's columns are the "
                "bad ones, change that policy's parameter",
            )
        pa, pq = _pa()
        s = res.scores
        per_token = next(
            a for a in (s.token_logq, s.token_logprob, s.token_mean, s.token_rank) if a is not None
        )
        cols = {
            "item_key": pa.array(res.item_keys, pa.string()),
            "prompt_len": pa.array(res.prompt_len, pa.int32()),
            "suffix_len": pa.array([per_token.shape[-1]] * len(res.item_keys), pa.int32()),
        }
        # only the statistics the unit was scored with (the others are None): the unit's
        # metadata says which, so a unit never serves a run needing more (stats_cover)
        if s.greedy_match is not None:
            cols["greedy_match"] = pa.array(s.greedy_match, pa.bool_())
        if s.min_margin is not None:
            cols["min_margin"] = pa.array(s.min_margin, pa.float64())
        for name in ("token_logprob", "token_mean", "token_std"):
            if getattr(s, name) is not None:
                cols[name] = pa.array(list(getattr(s, name)), pa.list_(pa.float64()))
        if s.token_rank is not None:
            cols["token_rank"] = pa.array(list(s.token_rank.astype(np.int64)), pa.list_(pa.int64()))
        if s.logq is not None:
            for j, spec in enumerate(res.policies):
                cols[f"logq:{spec}"] = pa.array(s.logq[:, j], pa.float64())
                cols[f"token_logq:{spec}"] = pa.array(
                    list(s.token_logq[:, j, :]), pa.list_(pa.float64())
                )
        for name, arr in res.extra.items():
            cols[name] = pa.array(np.asarray(arr))
        meta = {
            "unit_id": res.unit_id,
            "procedure": res.procedure_key,
            "policies": list(res.policies),
            "n_items": len(res.item_keys),
            "schema_version": SCHEMA_VERSION,
            "written": time.time(),
        }
        if res.stats is not None and stat_names(res.stats) != ALL_STAT_NAMES:
            meta["stats"] = "+".join(sorted(stat_names(res.stats)))
        table = pa.table(cols).replace_schema_metadata({b"memclaim": json.dumps(meta).encode()})
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, compression="zstd")
        path = self.unit_path(res.procedure_key, res.unit_id)
        data = sink.getvalue().to_pybytes()
        try:
            atomic_write_bytes(path, data)
        except OSError as exc:
            raise _disk_error(exc, f"unit {res.unit_id[:12]}", self.root) from None
        self._written[res.unit_id] = sha256_bytes(data)  # record_unit seals the unit with it
        return path

    def record_unit(
        self, procedure_key: str, unit_id: str, n_items: int, *, stats: str | None = None
    ) -> None:
        """Record a written unit (``stats``: the statistics it holds; None = all)."""
        entry = {"procedure": procedure_key, "n_items": n_items}
        if stats is not None and stat_names(stats) != ALL_STAT_NAMES:
            entry["stats"] = "+".join(sorted(stat_names(stats)))
        digest = self._written.pop(unit_id, None)  # written here; else a worker wrote the file
        entry["sha256"] = (
            digest if digest is not None else sha256_file(self.unit_path(procedure_key, unit_id))
        )
        self._manifest["units"][unit_id] = entry

    def read_units(self, procedure_key: str, unit_ids: Iterable[str]):
        """Concatenate unit tables -> one pyarrow Table."""
        pa, pq = _pa()
        tables = []
        for uid in unit_ids:
            path = self.unit_path(procedure_key, uid)
            if not path.exists():
                raise StoreError(
                    f"unit {uid[:12]} is missing from {str(self.root)!r}",
                    hint="re-run the scoring command to finish the run",
                )
            tables.append(
                read_parquet(
                    path,
                    fix=f"delete {str(path)!r} and re-run the scoring command: the unit is "
                    "scored again",
                ).replace_schema_metadata(None)
            )
        if not tables:
            raise StoreError("no units to read")
        return pa.concat_tables(tables, promote_options="default")

    # ------------------------------------------------------------------ runs
    def run_dir(self, run_id: str) -> Path:
        return self.root / "runs" / run_id

    def write_run(self, run_id: str, run: dict, windows_table) -> None:
        pa, pq = _pa()
        d = self.run_dir(run_id)
        try:
            sink = pa.BufferOutputStream()
            pq.write_table(windows_table, sink, compression="zstd")
            data = sink.getvalue().to_pybytes()
            atomic_write_bytes(d / "windows.parquet", data)
        except OSError as exc:
            raise _disk_error(exc, "the run description", self.root) from None
        self._write_run_json(run_id, dict(run, windows_sha256=sha256_bytes(data)))

    def _write_run_json(self, run_id: str, run: dict) -> None:
        """run.json (with its windows.parquet's sha256) and the manifest entry that seals it."""
        text = json.dumps(run, indent=1, sort_keys=True)
        try:
            atomic_write_text(self.run_dir(run_id) / "run.json", text)
        except OSError as exc:
            raise _disk_error(exc, "the run description", self.root) from None
        entry = {k: run[k] for k in ("procedure", "created", "n_windows", "label") if k in run}
        entry["run_sha256"] = sha256_bytes(text.encode("utf-8"))
        self._manifest["runs"][run_id] = entry

    @contextlib.contextmanager
    def parquet_writer(
        self,
        path: Path,
        schema_of_first=True,
        *,
        before_replace: Callable[[str], None] | None = None,
    ):
        """Write a Parquet file batch by batch, atomically: a temporary file beside ``path``
        (``.NAME.*.tmp``, removed by the stale-temp sweep if the writer is killed), fsynced, then
        renamed into place. Yields ``write(table)``; the first table's schema (with its
        metadata) is the file's. ``before_replace`` is called with the finished file's sha256
        before it is renamed into place (to seal it first)."""
        import tempfile

        pa, pq = _pa()
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
        state = {"writer": None}

        def write(table):
            if state["writer"] is None:
                state["writer"] = pq.ParquetWriter(tmp, table.schema, compression="zstd")
            elif table.schema != state["writer"].schema:
                table = table.cast(state["writer"].schema)
            state["writer"].write_table(table)

        try:
            yield write
            if state["writer"] is None:
                raise StoreError(f"nothing to write to {str(path)!r}")
            state["writer"].close()
            state["writer"] = None
            with open(tmp, "rb") as fh:
                os.fsync(fh.fileno())
            os.chmod(tmp, 0o644)
            if before_replace is not None:
                before_replace(sha256_file(tmp))
            os.replace(tmp, path)
        except OSError as exc:
            raise _disk_error(exc, path.name, self.root) from None
        finally:
            if state["writer"] is not None:
                with contextlib.suppress(Exception):
                    state["writer"].close()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)

    def write_run_batches(self, run_id: str, run: dict, batches) -> None:
        """:meth:`write_run` with the windows table given as an iterable of tables (row groups):
        a book's windows are never one table in memory."""
        digest = {}
        with self.parquet_writer(
            self.run_dir(run_id) / "windows.parquet",
            before_replace=lambda d: digest.setdefault("sha256", d),
        ) as write:
            for t in batches:
                write(t)
        self._write_run_json(run_id, dict(run, windows_sha256=digest["sha256"]))

    def seal_scores(self, run_id: str, digest: str) -> None:
        """Record the sha256 of the scores.parquet about to replace the run's (written to the
        manifest first: a kill between the two leaves both hashes recorded, the one on disk
        among them); :meth:`scores_sealed` then drops the previous one."""
        entry = dict(self._manifest["runs"].get(run_id) or {})
        old = entry.get("scores_sha256")
        entry["scores_sha256"] = digest
        if old is not None and old != digest:
            entry["scores_sha256_previous"] = old
        self._manifest["runs"][run_id] = entry
        self.write_manifest()

    def scores_sealed(self, run_id: str) -> None:
        entry = self._manifest["runs"].get(run_id) or {}
        if "scores_sha256_previous" in entry:
            self._manifest["runs"][run_id] = {
                k: v for k, v in entry.items() if k != "scores_sha256_previous"
            }
            self.write_manifest()

    def check_file(self, path: Path, recorded: str | None, what: str) -> None:
        """Refuse ``path`` when a sha256 is recorded for it and the file's differs."""
        if recorded is not None and path.is_file() and sha256_file(path) != recorded:
            raise _edited(what, f"({str(path)!r}) does not match the sha256 recorded for it")

    def check_unit(self, procedure_key: str, unit_id: str) -> None:
        """A unit file must be the one the manifest sealed (before scores are rebuilt from it)."""
        self.check_file(
            self.unit_path(procedure_key, unit_id),
            (self._manifest["units"].get(unit_id) or {}).get("sha256"),
            f"unit {unit_id[:12]}",
        )

    def check_procedure(self, key: str) -> None:
        """The procedure file and the manifest's record of ``key`` are what was written: the file
        matches its recorded sha256, each record hashes to its key (the key is the procedure's
        content address), and the two records agree."""
        f = self.root / "procedures" / f"{key}.json"
        self.check_file(
            f, self._manifest["procedure_files"].get(key), f"the procedure file of {key[:16]}"
        )
        records = []
        if key in self._manifest["procedures"]:
            records.append(
                ("the manifest's record of procedure", self._manifest["procedures"][key])
            )
        if f.is_file():
            records.append(("the procedure file", _read_json(f)))
        for what, rec in records:
            try:
                got = Procedure.from_dict(rec).key
            except (KeyError, TypeError, ValueError, AttributeError):
                got = None
            if got != key:
                raise _edited(
                    f"{what} {key[:16]}", "does not hash to its key (a field was changed)"
                )
        if len(records) == 2 and records[0][1] != records[1][1]:
            raise _edited(f"procedure {key[:16]}", "differs between procedures/ and manifest.json")

    def verify_run(self, run_id: str) -> dict:
        """Check that run ``run_id`` is what memclaim wrote before it is read, and return its
        run.json: the manifest's label and procedure are run.json's, and run.json, its procedure
        and its scores.parquet match the sha256s the manifest sealed them with (schema 3). A
        StoreError names what differs (:meth:`check_run_id` adds the run id's own check).

        >>> ScoreStore("runs/toy", create=False).verify_run("4e5dc3e9a378a94a")["label"]  # doctest: +SKIP
        'members'
        """
        entry = self._manifest["runs"].get(run_id) or {}
        path = self.run_dir(run_id) / "run.json"
        if not path.exists():
            raise StoreError(
                f"run {run_id} is not in the store {str(self.root)!r}",
                hint=f"runs in this store: {', '.join(self._manifest['runs']) or 'none'}",
            )
        run = _read_json(path)  # a damaged (cut, unparsable) file says so first
        self.check_file(path, entry.get("run_sha256"), f"run.json of run {run_id}")
        for field_ in ("label", "procedure"):
            if field_ in entry and entry[field_] != run.get(field_):
                raise _edited(
                    f"run {run_id}",
                    f"is {field_} {entry[field_]!r} in manifest.json but "
                    f"{run.get(field_)!r} in its run.json",
                )
        if run.get("run_id", run_id) != run_id:
            raise _edited(f"the run.json in runs/{run_id}", f"is run {run.get('run_id')!r}")
        self.check_procedure(run["procedure"])
        scores = self.run_dir(run_id) / "scores.parquet"
        sealed = [h for h in (entry.get("scores_sha256"), entry.get("scores_sha256_previous")) if h]
        if sealed and scores.is_file() and sha256_file(scores) not in sealed:
            # a damaged (cut, unreadable) file says so first
            read_parquet(
                scores,
                fix="re-run the scoring command: it rewrites scores.parquet from the unit files",
            )
            raise _edited(
                f"scores.parquet of run {run_id} ({run.get('label')!r})",
                "does not match the sha256 recorded when memclaim wrote it",
            )
        return run

    @staticmethod
    def check_run_id(run_id: str, run: dict, window_ids: Iterable[str]) -> None:
        """The run's id is the hash of its procedure, label, units and ``window_ids`` (its
        scores.parquet's, in order; :func:`run_id_of`): a label moved to another run fails here
        even where every file was rehashed to match."""
        if isinstance(run.get("units"), list) and isinstance(run.get("procedure"), str):
            again = run_id_of(run["procedure"], str(run.get("label", "")), run["units"], window_ids)
            if again != run_id:
                raise _edited(
                    f"run {run_id}", f"holds the label, procedure, units and windows of run {again}"
                )

    def runs(self) -> dict:
        return dict(self._manifest["runs"])

    def read_run(self, run_id: str) -> dict:
        p = self.run_dir(run_id) / "run.json"
        if not p.exists():
            raise StoreError(
                f"run {run_id} is not in the store {str(self.root)!r}",
                hint=f"runs in this store: {', '.join(self._manifest['runs']) or 'none'}",
            )
        return _read_json(p)

    def read_windows(self, run_id: str):
        return read_parquet(self.run_dir(run_id) / "windows.parquet")

    def write_scores(self, run_id: str, table) -> Path:
        pa, pq = _pa()
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, compression="zstd")
        path = self.run_dir(run_id) / "scores.parquet"
        try:
            atomic_write_bytes(path, sink.getvalue().to_pybytes())
        except OSError as exc:
            raise _disk_error(exc, "scores.parquet", self.root) from None
        return path
