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
back with the current fingerprint (``model.fingerprint_v1`` keeps the old one).
"""
from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

import numpy as np

from ..errors import StoreError
from ..fsutil import atomic_write_bytes, atomic_write_text, file_lock
from ..procedure import Procedure

if TYPE_CHECKING:
    import pyarrow as pa

SCHEMA_VERSION = 2
READABLE_SCHEMAS = (1, 2)  # 1: memclaim 0.1.0 (model fingerprint scheme 1), migrated on the next write
MANIFEST_LOCK = ".manifest.lock"
WRITERS_LOCK = ".writers.lock"
RUN_LOCK = ".lock"
_SECTIONS = ("procedures", "units", "runs", "fingerprints")
# what atomic_write_bytes leaves when killed mid-write: ".<name>.<random>.tmp"
_TEMP_NAME = re.compile(r"^\..+\.tmp$")


def _pa():
    import pyarrow as pa
    import pyarrow.parquet as pq

    return pa, pq


def _disk_error(exc: OSError, what: str, root: Path) -> StoreError:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return StoreError(
            f"disk full while writing {what}; the store at {str(root)!r} is intact and holds every unit "
            "finished before this one",
            hint="free some space and re-run the same command: it resumes where it stopped",
        )
    return StoreError(f"cannot write {what} in {str(root)!r}: {exc}", hint="check permissions and free space")


@dataclass(frozen=True, eq=False)
class UnitResult:
    """One unit's rows (all items of the unit, in unit order); a frozen value."""

    unit_id: str
    procedure_key: str
    policies: tuple[str, ...]
    item_keys: tuple[str, ...]
    prompt_len: tuple[int, ...]
    scores: object  # memclaim.scoring.engine.BatchScores, concatenated over the unit
    extra: dict = field(default_factory=dict)  # further per-item columns (e.g. near-verbatim bounds)
    # the statistics the unit holds (memclaim.scoring.engine.StatSet.spec); None: every statistic
    stats: str | None = None


# Every statistic the engine computes (memclaim.scoring.engine.STAT_NAMES; repeated here so the
# store needs no torch). A unit written before statistic sets existed (no "stats" in its
# metadata or manifest entry) holds all of them.
ALL_STAT_NAMES = frozenset(("policy_logq", "greedy", "margin", "token_logprob", "token_moments", "rank"))


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


def _read_json(path: Path) -> dict:
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise StoreError(f"{str(path)!r} is unreadable: {exc}",
                         hint="the store is damaged there; restore the file, or score into a new folder") from None
    if not isinstance(d, dict):
        raise StoreError(f"{str(path)!r} is not a JSON object", hint="restore the file, or score into a new folder")
    return d


def read_parquet(path: Path, *, fix: str = "re-run the scoring command to write it again") -> pa.Table:
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
            raise StoreError(f"store path {str(self.root)!r} exists and is not a folder",
                             hint="pass a folder for --out")
        if create:
            try:
                (self.root / "units").mkdir(parents=True, exist_ok=True)
                (self.root / "procedures").mkdir(exist_ok=True)
                (self.root / "runs").mkdir(exist_ok=True)
            except OSError as exc:
                raise _disk_error(exc, "the store folders", self.root) from None
        elif not (self.root / "manifest.json").exists() and not (self.root / "units").exists():
            raise StoreError(f"{str(self.root)!r} is not a memclaim score store (no manifest.json)",
                             hint="pass the --out folder of a `memclaim score` run")
        self._manifest = self._read_manifest()

    # ------------------------------------------------------------------ manifest
    def _read_manifest(self) -> dict:
        p = self.root / "manifest.json"
        if not p.exists():
            return {"schema_version": SCHEMA_VERSION, **{k: {} for k in _SECTIONS}}
        try:
            m = json.loads(p.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise StoreError(f"manifest {str(p)!r} is unreadable: {exc}",
                             hint="restore it, or delete it: unit files are re-adopted on the next run") from None
        except OSError as exc:
            raise StoreError(f"cannot read {str(p)!r}: {exc}", hint="check the store's permissions") from None
        if not isinstance(m, dict) or m.get("schema_version") not in READABLE_SCHEMAS:
            got = m.get("schema_version") if isinstance(m, dict) else type(m).__name__
            readable = ", ".join(map(str, READABLE_SCHEMAS))
            raise StoreError(f"store schema {got!r} is not one this memclaim reads ({readable})",
                             hint="use the memclaim version that wrote it, or re-score into a new folder")
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
        """What is on disk now, plus every entry this process has added (call under the lock).
        Entries are only ever added, so the union loses no writer's work."""
        disk = self._read_manifest()
        merged = {**disk, **{k: v for k, v in self._manifest.items() if k not in _SECTIONS}}
        for k in _SECTIONS:
            merged[k] = {**disk.get(k, {}), **self._manifest.get(k, {})}
        return merged

    def write_manifest(self) -> None:
        """Merge this process's entries into the manifest on disk and write it, atomically and
        under the manifest lock: concurrent writers of one store are all recorded."""
        with self.manifest_lock():
            merged = self._merged_with_disk()
            merged["schema_version"] = SCHEMA_VERSION
            try:
                atomic_write_text(self.root / "manifest.json", json.dumps(merged, indent=1, sort_keys=True))
            except OSError as exc:
                raise _disk_error(exc, "manifest.json", self.root) from None
            self._manifest = merged
            # under the lock no one else is writing the manifest: its temp files are dead writers'
            self.remove_temps(self.root, prefix=".manifest.json.")

    def refresh(self) -> None:
        """Re-read the manifest (units and runs other processes recorded), keeping this process's entries."""
        with self.manifest_lock():
            self._manifest = self._merged_with_disk()

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
        n = self.remove_temps(self.root) + self.remove_temps(self.root, prefix=".ray-probe-", suffix="")
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
            try:
                atomic_write_text(self.root / "procedures" / f"{key}.json",
                                  json.dumps(procedure.to_dict(), indent=1, sort_keys=True))
            except OSError as exc:
                raise _disk_error(exc, "a procedure file", self.root) from None
            self._manifest["procedures"][key] = procedure.to_dict()
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
        m = {**model, "fingerprint": new["fingerprint"], "fingerprint_scheme": new["scheme"],
             "fingerprint_v1": model.get("fingerprint")}
        return {**rec, "model": m}

    def find_legacy_procedure(self, procedure, legacy_fingerprints: Iterable[str]) -> str | None:
        """The key of a procedure recorded under an older fingerprint of the same model folder
        that is otherwise ``procedure`` (same policies, prompt rule, lengths, version...), or None."""
        d = procedure.to_dict()
        # the memclaim version is part of a procedure's key: a legacy procedure was recorded by the
        # version that wrote it (0.1.0), which this one still resumes
        versions = [d["memclaim_version"]] + sorted({str(p.get("memclaim_version")) for p in
                                                     self._manifest["procedures"].values()
                                                     if "fingerprint_scheme" not in (p.get("model") or {})
                                                     and p.get("memclaim_version")} - {d["memclaim_version"]})
        for fp in legacy_fingerprints:
            old = dict(d["model"], fingerprint=fp)
            old.pop("fingerprint_scheme", None)
            for version in versions:
                key = Procedure.from_dict({**d, "model": old, "memclaim_version": version}).key
                if key in self._manifest["procedures"] or (self.root / "procedures" / f"{key}.json").exists():
                    return key
        return None

    def learn_fingerprint(self, old: str, new: str, scheme: int) -> None:
        """Record that fingerprint ``old`` (scheme 1) and ``new`` name the same model folder."""
        self._manifest.setdefault("fingerprints", {})[old] = {"fingerprint": new, "scheme": int(scheme)}

    def has_legacy_procedures(self) -> bool:
        return any("fingerprint_scheme" not in (p.get("model") or {}) for p in self._manifest["procedures"].values())

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
                    raise StoreError(f"{str(path)!r} is in the way of unit {uid[:12]}: it is not a file memclaim wrote",
                                     hint="move it out of the store and re-run; the unit is then scored again")
                try:
                    meta = self._unit_meta(path)
                    self._check_unit_body(path, meta)   # the data pages too, not only the footer
                except StoreError:
                    path.unlink()  # unreadable: score it again
                    continue
                entry = {"procedure": procedure_key, "n_items": meta["n_items"]}
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
        entry = dict(self._manifest["units"].get(unit_id) or {"procedure": procedure_key,
                                                                "n_items": meta["n_items"]})
        entry.pop("stats", None)
        if meta.get("stats") is not None:
            entry["stats"] = meta["stats"]
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
            raise StoreError(f"unit file {str(path)!r} holds {rows} rows, its metadata says {meta.get('n_items')}")

    def write_unit(self, res: UnitResult) -> Path:
        """Serialize one unit to Parquet and rename it into place (atomic)."""
        pa, pq = _pa()
        s = res.scores
        P = len(res.policies)
        per_token = next(a for a in (s.token_logq, s.token_logprob, s.token_mean, s.token_rank) if a is not None)
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
                cols[f"token_logq:{spec}"] = pa.array(list(s.token_logq[:, j, :]), pa.list_(pa.float64()))
        for name, arr in res.extra.items():
            cols[name] = pa.array(np.asarray(arr))
        meta = {"unit_id": res.unit_id, "procedure": res.procedure_key, "policies": list(res.policies),
                "n_items": len(res.item_keys), "schema_version": SCHEMA_VERSION, "written": time.time()}
        if res.stats is not None and stat_names(res.stats) != ALL_STAT_NAMES:
            meta["stats"] = "+".join(sorted(stat_names(res.stats)))
        table = pa.table(cols).replace_schema_metadata({b"memclaim": json.dumps(meta).encode()})
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, compression="zstd")
        path = self.unit_path(res.procedure_key, res.unit_id)
        try:
            atomic_write_bytes(path, sink.getvalue().to_pybytes())
        except OSError as exc:
            raise _disk_error(exc, f"unit {res.unit_id[:12]}", self.root) from None
        return path

    def record_unit(self, procedure_key: str, unit_id: str, n_items: int, *, stats: str | None = None) -> None:
        """Record a written unit (``stats``: the statistics it holds; None = all)."""
        entry = {"procedure": procedure_key, "n_items": n_items}
        if stats is not None and stat_names(stats) != ALL_STAT_NAMES:
            entry["stats"] = "+".join(sorted(stat_names(stats)))
        self._manifest["units"][unit_id] = entry

    def read_units(self, procedure_key: str, unit_ids: Iterable[str]):
        """Concatenate unit tables -> one pyarrow Table."""
        pa, pq = _pa()
        tables = []
        for uid in unit_ids:
            path = self.unit_path(procedure_key, uid)
            if not path.exists():
                raise StoreError(f"unit {uid[:12]} is missing from {str(self.root)!r}",
                                 hint="re-run the scoring command to finish the run")
            tables.append(read_parquet(path, fix=f"delete {str(path)!r} and re-run the scoring command: the unit is "
                                                 "scored again").replace_schema_metadata(None))
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
            atomic_write_bytes(d / "windows.parquet", sink.getvalue().to_pybytes())
            atomic_write_text(d / "run.json", json.dumps(run, indent=1, sort_keys=True))
        except OSError as exc:
            raise _disk_error(exc, "the run description", self.root) from None
        self._manifest["runs"][run_id] = {k: run[k] for k in ("procedure", "created", "n_windows", "label")
                                          if k in run}

    @contextlib.contextmanager
    def parquet_writer(self, path: Path, schema_of_first=True):
        """Write a Parquet file batch by batch, atomically: a temporary file beside ``path``
        (``.NAME.*.tmp``, removed by the stale-temp sweep if the writer is killed), fsynced, then
        renamed into place. Yields ``write(table)``; the first table's schema (with its
        metadata) is the file's."""
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
        with self.parquet_writer(self.run_dir(run_id) / "windows.parquet") as write:
            for t in batches:
                write(t)
        try:
            atomic_write_text(self.run_dir(run_id) / "run.json", json.dumps(run, indent=1, sort_keys=True))
        except OSError as exc:
            raise _disk_error(exc, "the run description", self.root) from None
        self._manifest["runs"][run_id] = {k: run[k] for k in ("procedure", "created", "n_windows", "label")
                                          if k in run}

    def runs(self) -> dict:
        return dict(self._manifest["runs"])

    def read_run(self, run_id: str) -> dict:
        p = self.run_dir(run_id) / "run.json"
        if not p.exists():
            raise StoreError(f"run {run_id} is not in the store {str(self.root)!r}",
                             hint=f"runs in this store: {', '.join(self._manifest['runs']) or 'none'}")
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
