"""Scoring runs: windows -> items -> work units -> engine -> store, resumable at any point.

The driver writes the run description first, then scores the units that are not yet in the
store, writing each unit atomically and then the manifest. Killing it (even ``kill -9``) and
re-running the same command finishes the rest, loses nothing and duplicates nothing; a finished
run re-run does no model work (the weights are not even loaded).
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

import numpy as np

from ..decoding import Policy
from ..fsutil import sha256_bytes
from ..jsonutil import ResultMixin
from .engine import NEAR_TIE_MARGIN, BatchScores
from .procedure import Procedure
from .prompts import PromptRule, aggregate_logq
from .store import ScoreStore, UnitResult
from .units import DEFAULT_UNIT_SIZE, WorkUnit, item_key, make_items, make_units


def concat_scores(parts: Sequence[BatchScores]) -> BatchScores:
    if len(parts) == 1:
        return parts[0]
    return BatchScores(**{f: np.concatenate([getattr(p, f) for p in parts], axis=0)
                          for f in BatchScores.__dataclass_fields__})


def score_unit(engine, unit: WorkUnit, *, batch_size: int) -> UnitResult:
    """Score one unit in batches of ``batch_size`` (equal lengths: no padding)."""
    parts = []
    items = unit.items
    for a in range(0, len(items), batch_size):
        chunk = items[a:a + batch_size]
        parts.append(engine.score_batch([it.prompt for it in chunk], [it.suffix for it in chunk]))
    return UnitResult(unit_id=unit.unit_id, procedure_key=unit.procedure_key,
                      policies=tuple(p.spec for p in engine.policies),
                      item_keys=[it.key for it in items], prompt_len=[len(it.prompt) for it in items],
                      scores=concat_scores(parts))


class LocalBackend:
    """Scores units one after another in this process."""

    name = "local"

    def __init__(self, lm_factory: Callable[[], object], policies: Sequence[Policy], *, batch_size: int = 16):
        self.lm_factory = lm_factory
        self.policies = tuple(policies)
        self.batch_size = batch_size
        self._engine = None

    def engine(self):
        if self._engine is None:
            from .engine import TeacherForcingEngine

            self._engine = TeacherForcingEngine(self.lm_factory(), self.policies)
        return self._engine

    def run(self, units: Iterable[WorkUnit]):
        for unit in units:
            yield score_unit(self.engine(), unit, batch_size=self.batch_size)

    def stats(self) -> dict:
        e = self._engine
        return {} if e is None else {"forward_tokens": e.forward_tokens, "unembed_rows": e.unembed_rows}


@dataclass(frozen=True)
class RunSummary(ResultMixin):
    store: str
    run_id: str
    procedure_key: str
    n_windows: int
    n_items: int
    n_units: int
    units_scored: int
    units_reused: int
    skipped_short: int
    skipped_empty: int
    seconds: float
    windows_per_second: float
    model_loaded: bool
    near_ties: int
    backend: str = "local"
    backend_stats: dict = field(default_factory=dict)


def build_procedure(model, *, policies: Sequence[Policy], prefix_tokens: int, suffix_tokens: int,
                    prompt_rule: PromptRule) -> Procedure:
    return Procedure(model={"name": model.name, "source": model.source, "fingerprint": model.fingerprint,
                            "dtype": model.dtype},
        start_of_text=model.sot.to_dict(), policies=tuple(p.spec for p in policies),
        prefix_tokens=prefix_tokens, suffix_tokens=suffix_tokens, prompt=prompt_rule.to_dict())


def _windows_table(windows, window_items: list[list[str]], label: str):
    import pyarrow as pa

    return pa.table({
        "window_id": [w.window_id for w in windows],
        "source": [w.source for w in windows],
        "index": pa.array([w.index for w in windows], pa.int64()),
        "token_start": pa.array([w.token_start for w in windows], pa.int64()),
        "prefix_start": pa.array([w.prefix_span[0] for w in windows], pa.int64()),
        "prefix_end": pa.array([w.prefix_span[1] for w in windows], pa.int64()),
        "suffix_start": pa.array([w.suffix_span[0] for w in windows], pa.int64()),
        "suffix_end": pa.array([w.suffix_span[1] for w in windows], pa.int64()),
        "prefix_text": [w.prefix_text for w in windows],
        "suffix_text": [w.suffix_text for w in windows],
        "suffix_ids": [list(w.suffix_ids) for w in windows],
        "item_keys": window_items,
        "set": [label] * len(windows),
    })


class _Progress:
    """A rich progress bar with windows/s on stderr (silent when disabled)."""

    def __init__(self, total: int, enabled: bool, description: str):
        self.enabled = enabled and total > 0
        self.bar = None
        if self.enabled:
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                       TimeElapsedColumn, TimeRemainingColumn)

            self.bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TextColumn("{task.fields[rate]}"), TimeElapsedColumn(), TimeRemainingColumn(),
                                console=Console(file=sys.stderr), transient=False)
            self.task = self.bar.add_task(description, total=total, rate="")
            self.bar.start()
        self.t0 = time.perf_counter()
        self.done = 0

    def advance(self, n: int):
        self.done += n
        if self.enabled:
            rate = self.done / max(1e-9, time.perf_counter() - self.t0)
            self.bar.update(self.task, advance=n, rate=f"{rate:.1f} windows/s")

    def close(self):
        if self.enabled:
            self.bar.stop()


def run_scoring(model, window_set, *, policies: Sequence[Policy], prefix_tokens: int, suffix_tokens: int,
                prompt_rule: PromptRule, out_dir, label: str = "windows", inputs: dict | None = None,
                batch_size: int = 16, unit_size: int = DEFAULT_UNIT_SIZE, progress: bool = True,
                backend=None, skipped_empty: int = 0) -> RunSummary:
    """Score ``window_set`` with ``model`` (a LoadedModel) into the store at ``out_dir``."""
    t0 = time.perf_counter()
    procedure = build_procedure(model, policies=policies, prefix_tokens=prefix_tokens,
                                suffix_tokens=suffix_tokens, prompt_rule=prompt_rule)
    store = ScoreStore(out_dir)
    pkey = store.add_procedure(procedure)
    windows = window_set.windows
    pairs, window_items = [], []
    for w in windows:
        keys = []
        for prompt in prompt_rule.build(w, model.tokenizer, model.sot_ids):
            pairs.append((prompt, w.suffix_ids))
            keys.append(item_key(prompt, w.suffix_ids))
        window_items.append(keys)
    items = make_items(pairs)
    units = make_units(items.values(), pkey, unit_size=unit_size)
    run_id = sha256_bytes((pkey + "|" + label + "|" + ",".join(u.unit_id for u in units) + "|" +
                           ",".join(w.window_id for w in windows)).encode())[:16]
    run = {"run_id": run_id, "label": label, "procedure": pkey, "created": time.time(),
           "n_windows": len(windows), "n_items": len(items), "units": [u.unit_id for u in units],
           "inputs": inputs or {}, "skipped_short": window_set.skipped_short,
           "skipped_short_ids": list(window_set.skipped_ids)[:1000], "skipped_empty": skipped_empty,
           "total_chars": window_set.total_chars, "batch_size": batch_size, "unit_size": unit_size}
    store.write_run(run_id, run, _windows_table(windows, window_items, label))
    store.adopt_orphans(pkey, [u.unit_id for u in units])
    store.write_manifest()
    todo = [u for u in units if not store.unit_done(pkey, u.unit_id)]
    reused = len(units) - len(todo)
    if backend is None:
        backend = LocalBackend(lambda: model.lm, policies, batch_size=batch_size)
    bar = _Progress(sum(u.n_items for u in todo), progress, f"scoring {label}")
    scored = 0
    t_score = time.perf_counter()
    try:
        for res in backend.run(todo):
            store.write_unit(res)
            store.record_unit(pkey, res.unit_id, len(res.item_keys))
            store.write_manifest()
            scored += 1
            bar.advance(len(res.item_keys))
    finally:
        bar.close()
    n_scored_items = sum(u.n_items for u in todo)
    elapsed_scoring = time.perf_counter() - t_score
    table = results_table(store, run_id)
    store.write_scores(run_id, table)
    near = int(np.sum(np.asarray(table.column("near_tie").to_pylist(), dtype=bool)))
    return RunSummary(store=str(store.root), run_id=run_id, procedure_key=pkey, n_windows=len(windows),
                      n_items=len(items), n_units=len(units), units_scored=scored, units_reused=reused,
                      skipped_short=window_set.skipped_short, skipped_empty=skipped_empty,
                      seconds=time.perf_counter() - t0,
                      windows_per_second=(n_scored_items / elapsed_scoring) if n_scored_items else 0.0,
                      model_loaded=bool(getattr(model, "weights_loaded", True)), near_ties=near,
                      backend=getattr(backend, "name", "custom"),
                      backend_stats=backend.stats() if hasattr(backend, "stats") else {})


def results_table(store: ScoreStore, run_id: str):
    """One row per window: aggregated log q per policy, greedy flag, near-tie flag, spans, texts,
    and (for single-prompt procedures) the per-token arrays."""
    import pyarrow as pa

    run = store.read_run(run_id)
    proc = store.procedure(run["procedure"])
    policies = proc["policies"]
    agg = (proc["prompt"].get("aggregate") or "max")
    units = store.read_units(run["procedure"], run["units"])
    windows = store.read_windows(run_id)
    index = {k: i for i, k in enumerate(units.column("item_key").to_pylist())}
    wi = windows.column("item_keys").to_pylist()
    rows = [[index[k] for k in keys] for keys in wi]
    n_prompts = len(rows[0]) if rows else 1
    idx = np.asarray(rows, dtype=np.int64).reshape(len(rows), n_prompts)  # [W, n_prompts]
    cols = {name: windows.column(name) for name in windows.column_names if name != "item_keys"}
    for spec in policies:
        v = units.column(f"logq:{spec}").to_numpy()[idx]  # [W, n_prompts]
        cols[f"logq:{spec}"] = pa.array(aggregate_logq(v, agg, axis=1), pa.float64())
    gm = units.column("greedy_match").to_numpy(zero_copy_only=False)[idx]
    mm = units.column("min_margin").to_numpy()[idx]
    cols["greedy_match"] = pa.array(gm.any(axis=1))
    cols["min_margin"] = pa.array(mm.min(axis=1), pa.float64())
    cols["near_tie"] = pa.array(mm.min(axis=1) < NEAR_TIE_MARGIN)
    if n_prompts == 1:
        take = pa.array(idx[:, 0])
        for name in ["token_logprob", "token_mean", "token_std", "token_rank"] + [f"token_logq:{s}" for s in policies]:
            cols[name] = units.column(name).take(take)
    table = pa.table(cols)
    meta = {"run_id": run_id, "procedure": run["procedure"], "policies": policies, "aggregate": agg}
    import json

    return table.replace_schema_metadata({b"memclaim": json.dumps(meta).encode()})
