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
"""
from __future__ import annotations

import errno
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import numpy as np

from ..errors import StoreError
from ..fsutil import atomic_write_bytes, atomic_write_text

SCHEMA_VERSION = 1


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


@dataclass
class UnitResult:
    """One unit's rows (all items of the unit, in unit order)."""

    unit_id: str
    procedure_key: str
    policies: tuple[str, ...]
    item_keys: list[str]
    prompt_len: list[int]
    scores: object  # memclaim.scoring.engine.BatchScores, concatenated over the unit
    extra: dict = field(default_factory=dict)  # further per-item columns (e.g. near-verbatim bounds)


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
            return {"schema_version": SCHEMA_VERSION, "procedures": {}, "units": {}, "runs": {}}
        try:
            m = json.loads(p.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise StoreError(f"manifest {str(p)!r} is unreadable: {exc}",
                             hint="restore it, or delete it: unit files are re-adopted on the next run") from None
        if m.get("schema_version") != SCHEMA_VERSION:
            raise StoreError(f"store schema {m.get('schema_version')!r} is not {SCHEMA_VERSION}",
                             hint="use the memclaim version that wrote it, or re-score into a new folder")
        return m

    def write_manifest(self) -> None:
        try:
            atomic_write_text(self.root / "manifest.json", json.dumps(self._manifest, indent=1, sort_keys=True))
        except OSError as exc:
            raise _disk_error(exc, "manifest.json", self.root) from None

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
        if key in self._manifest["procedures"]:
            return self._manifest["procedures"][key]
        p = self.root / "procedures" / f"{key}.json"
        if p.exists():
            return json.loads(p.read_text())
        raise StoreError(f"procedure {key[:16]} is not in the store {str(self.root)!r}")

    # ------------------------------------------------------------------ units
    def unit_path(self, procedure_key: str, unit_id: str) -> Path:
        return self.root / "units" / procedure_key[:16] / f"{unit_id}.parquet"

    def unit_done(self, procedure_key: str, unit_id: str) -> bool:
        if unit_id in self._manifest["units"]:
            return True
        return self.unit_path(procedure_key, unit_id).exists()

    def adopt_orphans(self, procedure_key: str, unit_ids: Iterable[str]) -> int:
        """Record unit files finished after the last manifest write (driver died in between)."""
        n = 0
        for uid in unit_ids:
            if uid not in self._manifest["units"] and self.unit_path(procedure_key, uid).exists():
                try:
                    meta = self._unit_meta(self.unit_path(procedure_key, uid))
                except StoreError:
                    self.unit_path(procedure_key, uid).unlink()  # unreadable: score it again
                    continue
                self._manifest["units"][uid] = {"procedure": procedure_key, "n_items": meta["n_items"]}
                n += 1
        return n

    def _unit_meta(self, path: Path) -> dict:
        pa, pq = _pa()
        try:
            md = pq.read_schema(path).metadata or {}
            return json.loads(md[b"memclaim"].decode())
        except Exception as exc:  # noqa: BLE001 - any parse failure means an unusable file
            raise StoreError(f"unit file {str(path)!r} is unreadable: {exc}") from None

    def write_unit(self, res: UnitResult) -> Path:
        """Serialize one unit to Parquet and rename it into place (atomic)."""
        pa, pq = _pa()
        s = res.scores
        P = len(res.policies)
        cols = {
            "item_key": pa.array(res.item_keys, pa.string()),
            "prompt_len": pa.array(res.prompt_len, pa.int32()),
            "suffix_len": pa.array([s.token_logprob.shape[1]] * len(res.item_keys), pa.int32()),
            "greedy_match": pa.array(s.greedy_match, pa.bool_()),
            "min_margin": pa.array(s.min_margin, pa.float64()),
            "token_logprob": pa.array(list(s.token_logprob), pa.list_(pa.float64())),
            "token_mean": pa.array(list(s.token_mean), pa.list_(pa.float64())),
            "token_std": pa.array(list(s.token_std), pa.list_(pa.float64())),
            "token_rank": pa.array(list(s.token_rank.astype(np.int64)), pa.list_(pa.int64())),
        }
        for j, spec in enumerate(res.policies):
            cols[f"logq:{spec}"] = pa.array(s.logq[:, j], pa.float64())
            cols[f"token_logq:{spec}"] = pa.array(list(s.token_logq[:, j, :]), pa.list_(pa.float64()))
        for name, arr in res.extra.items():
            cols[name] = pa.array(np.asarray(arr))
        meta = {"unit_id": res.unit_id, "procedure": res.procedure_key, "policies": list(res.policies),
                "n_items": len(res.item_keys), "schema_version": SCHEMA_VERSION, "written": time.time()}
        table = pa.table(cols).replace_schema_metadata({b"memclaim": json.dumps(meta).encode()})
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, compression="zstd")
        path = self.unit_path(res.procedure_key, res.unit_id)
        try:
            atomic_write_bytes(path, sink.getvalue().to_pybytes())
        except OSError as exc:
            raise _disk_error(exc, f"unit {res.unit_id[:12]}", self.root) from None
        return path

    def record_unit(self, procedure_key: str, unit_id: str, n_items: int) -> None:
        self._manifest["units"][unit_id] = {"procedure": procedure_key, "n_items": n_items}

    def read_units(self, procedure_key: str, unit_ids: Iterable[str]):
        """Concatenate unit tables -> one pyarrow Table."""
        pa, pq = _pa()
        tables = []
        for uid in unit_ids:
            path = self.unit_path(procedure_key, uid)
            if not path.exists():
                raise StoreError(f"unit {uid[:12]} is missing from {str(self.root)!r}",
                                 hint="re-run the scoring command to finish the run")
            tables.append(pq.read_table(path).replace_schema_metadata(None))
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

    def runs(self) -> dict:
        return dict(self._manifest["runs"])

    def read_run(self, run_id: str) -> dict:
        p = self.run_dir(run_id) / "run.json"
        if not p.exists():
            raise StoreError(f"run {run_id} is not in the store {str(self.root)!r}",
                             hint=f"runs in this store: {', '.join(self._manifest['runs']) or 'none'}")
        return json.loads(p.read_text())

    def read_windows(self, run_id: str):
        _, pq = _pa()
        return pq.read_table(self.run_dir(run_id) / "windows.parquet")

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
