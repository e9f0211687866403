"""Scoring runs: windows -> items -> work units -> engine -> store, resumable at any point.

The driver writes the run description first, then scores the units that are not yet in the
store, writing each unit atomically and then the manifest. Killing it (even ``kill -9``) and
re-running the same command finishes the rest, loses nothing and duplicates nothing; a finished
run re-run does no model work (the weights are not even loaded).
"""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Sequence

import numpy as np

from ..decoding import Policy
from ..errors import DomainError, InputError, StoreError
from ..fsutil import sha256_bytes
from ..jsonutil import ResultMixin
from ..models.loader import config_max_positions
from ..progress import LogCallback, ProgressCallback, Reporter
from ..validate import integer
from .engine import NEAR_TIE_MARGIN, BatchScores, TeacherForcingEngine
from .nearverbatim import estimate_beam_cost, near_verbatim_lower_bound, union_near_verbatim
from .procedure import Procedure
from .prompts import PromptRule, aggregate_logq
from .store import ScoreStore, UnitResult
from .units import DEFAULT_UNIT_SIZE, UnitReceipt, WorkUnit, item_key, make_items, make_units

if TYPE_CHECKING:  # the annotations' names only
    from ..models.loader import LoadedModel
    from ..text.windows import WindowSet


def nv_column(spec: str, epsilon: int) -> str:
    return f"nv_logq:{spec}:eps{epsilon}"


def near_verbatim_columns(engine, items, scores: BatchScores, near_verbatim: dict) -> dict:
    """[EM] App. B.1 Eq. 2: for every item and policy, the union over the (epsilon, beam)
    settings of the certified lower bounds on the epsilon-ball mass, per epsilon; the target's
    term is the engine's teacher-forced log q, checked against the beam's own within the stated
    rounding tolerance (refused beyond it), so the bound is never below the verbatim score.
    Each item's ball is centred on its own target ids (a templated procedure tokenizes the
    target after each prompt, so two prompts may centre their balls on different token
    sequences of the same text); the bounds are aggregated over prompts like log q ([EM] Eq. 15)."""
    eps = sorted(int(e) for e in near_verbatim["epsilons"])
    beams = sorted(int(b) for b in near_verbatim["beams"])
    cols: dict[str, np.ndarray] = {}
    for j, pol in enumerate(engine.policies):
        logs = {e: np.empty(len(items)) for e in eps}
        exact = {e: np.zeros(len(items), dtype=bool) for e in eps}
        found = np.zeros(len(items), dtype=np.int64)
        rows = np.zeros(len(items), dtype=np.int64)
        for i, it in enumerate(items):
            runs = [near_verbatim_lower_bound(engine.lm, it.prompt, it.suffix, policy=pol, epsilon=e, beam=b,
                                              verbatim_logprob=float(scores.logq[i, j]))
                    for e in eps for b in beams]
            u = union_near_verbatim(runs)
            for e in eps:
                logs[e][i] = u.log_bound_at(min(e, u.epsilons[-1]))
                exact[e][i] = bool(u.exact[min(e, len(u.exact) - 1)])
            found[i] = u.n_continuations
            rows[i] = u.forward_rows
        for e in eps:
            cols[nv_column(pol.spec, e)] = logs[e]
            cols[f"nv_exact:{pol.spec}:eps{e}"] = exact[e]
        cols[f"nv_found:{pol.spec}"] = found
        cols[f"nv_forward_rows:{pol.spec}"] = rows
    return cols


def score_unit(engine, unit: WorkUnit, *, batch_size: int, near_verbatim: dict | None = None) -> UnitResult:
    """Score one unit in batches of ``batch_size`` (equal lengths: no padding); with
    ``near_verbatim`` settings, add the near-verbatim lower bounds for every item."""
    parts = []
    items = unit.items
    for a in range(0, len(items), batch_size):
        chunk = items[a:a + batch_size]
        parts.append(engine.score_batch([it.prompt for it in chunk], [it.suffix for it in chunk]))
    scores = BatchScores.concat(parts)
    extra = near_verbatim_columns(engine, items, scores, near_verbatim) if near_verbatim else {}
    return UnitResult(unit_id=unit.unit_id, procedure_key=unit.procedure_key,
                      policies=tuple(p.spec for p in engine.policies),
                      item_keys=tuple(it.key for it in items), prompt_len=tuple(len(it.prompt) for it in items),
                      scores=scores, extra=extra)


class LocalBackend:
    """Scores units one after another in this process."""

    name = "local"

    def __init__(self, lm_factory: Callable[[], object], policies: Sequence[Policy], *, batch_size: int = 16,
                 near_verbatim: dict | None = None):
        self.lm_factory = lm_factory
        self.policies = tuple(policies)
        self.batch_size = batch_size
        self.near_verbatim = near_verbatim
        self._engine = None

    def engine(self):
        if self._engine is None:
            self._engine = TeacherForcingEngine(self.lm_factory(), self.policies)
        return self._engine

    def run(self, units: Iterable[WorkUnit]):
        for unit in units:
            yield score_unit(self.engine(), unit, batch_size=self.batch_size, near_verbatim=self.near_verbatim)

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


def normalize_near_verbatim(nv: dict | None, *, suffix_tokens: int) -> dict | None:
    """Validate near-verbatim settings: integer epsilons >= 0 and beams >= 1, sorted, unique."""
    if not nv:
        return None
    eps = sorted({int(e) for e in nv.get("epsilons", ())})
    beams = sorted({int(b) for b in nv.get("beams", (16,))})
    if not eps:
        return None
    if eps[0] < 0 or any(float(e) != int(e) for e in nv.get("epsilons", ())):
        raise DomainError(f"near-verbatim epsilon must be a whole number of token edits >= 0, got {nv['epsilons']}",
                          hint="e.g. --near-verbatim 1 (one token substitution, insertion or deletion)")
    if not beams or beams[0] < 1:
        raise DomainError(f"beam width must be >= 1, got {nv.get('beams')}", hint="e.g. --beam 16")
    return {"epsilons": eps, "beams": beams}


def near_verbatim_cost_message(units, nv: dict, n_policies: int, model) -> str:
    rows = 0
    n = 0
    for u in units:
        it = u.items[0]
        per = sum(estimate_beam_cost(prompt_len=len(it.prompt), suffix_len=len(it.suffix), beam=b,
                                     vocab_size=model.lm.vocab_size if model.weights_loaded else 10**9).forward_rows_max
                  for b in nv["beams"]) * len(nv["epsilons"])
        rows += per * u.n_items * n_policies
        n += u.n_items
    return (f"near-verbatim lower bounds (epsilon {nv['epsilons']}, beam {nv['beams']}): at most {rows:,} forward "
            f"rows for {n} windows x {n_policies} policies (~{rows // max(1, n * n_policies):,} per window-policy); "
            "a beam of 800 on SmolLM2 costs about a minute per window on 2 CPU cores")


def build_procedure(model, *, policies: Sequence[Policy], prefix_tokens: int | None, suffix_tokens: int | None,
                    prompt_rule: PromptRule, near_verbatim: dict | None = None,
                    windows: dict | None = None) -> Procedure:
    desc = {"name": model.name, "source": model.source, "fingerprint": model.fingerprint, "dtype": model.dtype}
    if getattr(model, "fingerprint_scheme", None) is not None:
        desc["fingerprint_scheme"] = int(model.fingerprint_scheme)  # what the fingerprint hashes (models.loader)
    return Procedure(model=desc,
        start_of_text=model.sot.to_dict(), policies=tuple(p.spec for p in policies),
        prefix_tokens=prefix_tokens, suffix_tokens=suffix_tokens, prompt=prompt_rule.to_dict(),
        near_verbatim=near_verbatim, windows=windows)


def _windows_table(windows, window_items: list[list[str]], label: str, window_targets: list[list[list[int]]]):
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
        # the target ids scored under each prompt (the suffix ids for the natural prefix; a
        # template's target is tokenized after its rendered prompt, memclaim.scoring.prompts)
        "target_ids": pa.array(window_targets, pa.list_(pa.list_(pa.int64()))),
        "item_keys": window_items,
        "set": [label] * len(windows),
    })


def scoring_pairs(model: LoadedModel, window_set: WindowSet, prompt_rule: PromptRule, *,
                  what: str | None = None) -> tuple:
    """The (prompt ids, target ids) pairs of every window under ``prompt_rule`` (one per prompt,
    each prompt with its own target ids: scoring/prompts.py), each window's item keys and target
    ids, after checking that the model can score them: every prompt has at least one token (the
    first target token is predicted from it), no template cuts a token in two (PromptRule.items
    refuses it), and no prompt + target is longer than the model's context. Raises
    :class:`InputError` naming the window otherwise, before any work; ``population`` and
    ``census`` call it for every input before scoring the first.

    >>> pairs, window_items, window_targets = scoring_pairs(m, ws, PromptRule(), what="--members")  # doctest: +SKIP
    """
    limit = getattr(model, "max_positions", None)
    if limit is None and getattr(model, "path", None) is not None:
        limit = config_max_positions(model.path)
    label = f"{what}: " if what else ""
    pairs, window_items, window_targets = [], [], []
    for w in window_set.windows:
        keys, targets = [], []
        for prompt, target in prompt_rule.items(w, model.tokenizer, model.sot_ids):
            if not prompt:
                raise InputError(f"{label}window {w.window_id!r} has an empty prompt (no prefix tokens and no "
                                 f"start-of-text token; start-of-text rule {model.sot.rule!r}): the model has "
                                 "nothing to predict the first suffix token from",
                                 hint="use --prefix-tokens >= 1, or a start-of-text token (--sot auto/bos/eos)")
            n = len(prompt) + len(target)
            if limit is not None and n > limit:
                raise InputError(f"{label}window {w.window_id!r} needs {n} positions (prompt {len(prompt)} + target "
                                 f"{len(target)} tokens), more than the context of {model.name} "
                                 f"({limit} positions)",
                                 hint="use a shorter --prefix-tokens/--suffix-tokens (or prompt template), or a model "
                                      "with a longer context")
            pairs.append((prompt, target))
            keys.append(item_key(prompt, target))
            targets.append(list(target))
        window_items.append(keys)
        window_targets.append(targets)
    return pairs, window_items, window_targets


def run_scoring(model: LoadedModel, window_set: WindowSet, *, policies: Sequence[Policy], prefix_tokens: int, suffix_tokens: int,
                prompt_rule: PromptRule, out_dir: str | Path, label: str = "windows", inputs: dict | None = None,
                batch_size: int = 16, unit_size: int = DEFAULT_UNIT_SIZE, progress: ProgressCallback | None = None,
                backend=None, skipped_empty: int = 0, near_verbatim: dict | None = None,
                log: LogCallback | None = None) -> RunSummary:
    """Score ``window_set`` with ``model`` (a LoadedModel) into the store at ``out_dir``.

    ``near_verbatim`` = {"epsilons": [...], "beams": [...]} adds the certified near-verbatim
    lower bounds ([EM] App. B.1 Eq. 2) for every window and policy, as part of the procedure.
    ``progress`` receives :class:`memclaim.progress.ProgressEvent` values (stage ``"score"``,
    unit windows: items scored, extra ``run_id`` and ``units``); ``log`` receives one-line notes
    (a concurrent writer, the near-verbatim cost). Both None: silent. ``progress=False`` (the
    former boolean option) is read as None; the library draws no bars itself.
    :func:`memclaim.score` is the public way in (it reads the inputs and cuts the windows).

    >>> from memclaim.models import load_model                                       # doctest: +SKIP
    >>> from memclaim.text.windows import passage_windows                            # doctest: +SKIP
    >>> m = load_model("toy")                                                        # doctest: +SKIP
    >>> ws = passage_windows(records, m.tokenizer, prefix_tokens=16, suffix_tokens=16)  # doctest: +SKIP
    >>> s = run_scoring(m, ws, policies=parse_policies(["full"]), prefix_tokens=16, suffix_tokens=16,
    ...                 prompt_rule=PromptRule(), out_dir="runs/toy")                # doctest: +SKIP
    >>> s.n_windows, s.units_scored                                                  # doctest: +SKIP
    (40, 1)
    """
    if progress is False:
        progress = None
    elif progress is not None and (progress is True or not callable(progress)):
        raise DomainError(f"progress must be a callback taking a memclaim.progress.ProgressEvent, or None; got "
                          f"{progress!r}", hint="pass memclaim.cli.progress.progress_bar() for a console bar, your own "
                                                "function, or None")
    t0 = time.perf_counter()
    integer("unit size", unit_size, minimum=1)  # option domains fail before the store is touched
    integer("batch size", batch_size, minimum=1)
    near_verbatim = normalize_near_verbatim(near_verbatim, suffix_tokens=suffix_tokens)
    procedure = build_procedure(model, policies=policies, prefix_tokens=prefix_tokens,
                                suffix_tokens=suffix_tokens, prompt_rule=prompt_rule, near_verbatim=near_verbatim,
                                windows=getattr(window_set, "cut", None))
    windows = window_set.windows
    # every window's (prompt, target) items before the store is touched: a template that cuts a
    # token in two, an empty prompt or a window longer than the context is refused first
    pairs, window_items, window_targets = scoring_pairs(model, window_set, prompt_rule)
    store = ScoreStore(out_dir)
    with contextlib.ExitStack() as held:
        held.enter_context(store.writer())  # shared with other writers; alone, it first clears dead writers' temps
        return _run_locked(store, held, model, procedure, windows, pairs, window_items, window_targets, window_set,
                           t0=t0, policies=policies, label=label, inputs=inputs, batch_size=batch_size,
                           unit_size=unit_size, progress=progress, backend=backend, skipped_empty=skipped_empty,
                           near_verbatim=near_verbatim, log=log)


def store_procedure_key(store: ScoreStore, procedure: Procedure, model) -> str:
    """The key under which ``store`` holds ``procedure``'s units. A store written before the
    model fingerprint changed (schema 1, fingerprint scheme 1) holds the same procedure under
    the old fingerprint: its key is reused, so a run started then resumes without rescoring,
    and the store learns which current fingerprint the old one names."""
    key = procedure.key
    legacy = ()
    if store.has_legacy_procedures() and hasattr(model, "legacy_fingerprints"):
        legacy = tuple(model.legacy_fingerprints())
        for rec in store.manifest["procedures"].values():
            fp = (rec.get("model") or {}).get("fingerprint")
            if fp in legacy and "fingerprint_scheme" not in rec.get("model", {}):
                store.learn_fingerprint(fp, model.fingerprint, model.fingerprint_scheme)
    if key not in store.manifest["procedures"] and legacy:
        old = store.find_legacy_procedure(procedure, legacy)
        if old is not None:
            return old
    return store.add_procedure(procedure)


def _run_locked(store, held, model, procedure, windows, pairs, window_items, window_targets, window_set, *, t0, policies, label,
                inputs, batch_size, unit_size, progress, backend, skipped_empty, near_verbatim, log) -> RunSummary:
    pkey = store_procedure_key(store, procedure, model)
    items = make_items(pairs)
    units = make_units(items.values(), pkey, unit_size=unit_size)
    run_id = sha256_bytes((pkey + "|" + label + "|" + ",".join(u.unit_id for u in units) + "|" +
                           ",".join(w.window_id for w in windows)).encode())[:16]
    run = {"run_id": run_id, "label": label, "procedure": pkey, "created": time.time(),
           "n_windows": len(windows), "n_items": len(items), "units": [u.unit_id for u in units],
           "inputs": inputs or {}, "skipped_short": window_set.skipped_short,
           "skipped_short_ids": list(window_set.skipped_ids)[:1000], "skipped_empty": skipped_empty,
           "total_chars": window_set.total_chars, "batch_size": batch_size, "unit_size": unit_size}
    if not held.enter_context(store.run_lock(run_id, blocking=False)):
        # two copies of one command: wait for the other, then score only what it left undone
        if log is not None:
            log(f"another memclaim process is scoring run {run_id} into {str(store.root)!r}; waiting for it")
        held.enter_context(store.run_lock(run_id))
        store.refresh()
    store.remove_temps(store.run_dir(run_id))  # only the run lock's holder writes there: these are dead writers'
    store.write_run(run_id, run, _windows_table(windows, window_items, label, window_targets))
    store.adopt_orphans(pkey, [u.unit_id for u in units])
    todo = [u for u in units if not store.unit_done(pkey, u.unit_id)]
    # a unit file that appeared since the first pass (a dead driver's Ray workers still
    # finishing) counts as done above: record it as well
    todo_ids = {u.unit_id for u in todo}
    store.adopt_orphans(pkey, [u.unit_id for u in units if u.unit_id not in todo_ids])
    store.write_manifest()
    reused = len(units) - len(todo)
    if near_verbatim and todo and log is not None:
        log(near_verbatim_cost_message(todo, near_verbatim, len(policies), model))
    if backend is None:
        backend = LocalBackend(lambda: model.lm, policies, batch_size=batch_size, near_verbatim=near_verbatim)
    if hasattr(backend, "attach_store"):
        backend.attach_store(store)  # backends whose workers may write unit files themselves
    bar = Reporter(progress, stage="score", label=f"scoring {label}", total=sum(u.n_items for u in todo),
                   extra={"run_id": run_id, "units": len(todo)})
    scored = 0
    t_score = time.perf_counter()
    try:
        for res in backend.run(todo):
            if isinstance(res, UnitReceipt):
                if not store.unit_path(pkey, res.unit_id).exists():
                    raise StoreError(f"a worker reported unit {res.unit_id[:12]} written, but it is not in "
                                     f"{str(store.root)!r}", hint="put the store on a filesystem every worker sees")
                n_done = res.n_items
            else:
                store.write_unit(res)
                n_done = len(res.item_keys)
            store.record_unit(pkey, res.unit_id, n_done)
            store.write_manifest()
            scored += 1
            bar.advance(n_done, units_done=scored)
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
                      model_loaded=bool(getattr(model, "weights_loaded", True)
                                        or getattr(backend, "weights_loaded", False)), near_ties=near,
                      backend=getattr(backend, "name", "custom"),
                      backend_stats=backend.stats() if hasattr(backend, "stats") else {})


def results_table(store: ScoreStore, run_id: str):
    """One row per window: aggregated log q per policy, greedy flag, near-tie flag, spans, texts,
    the target tokens scored under each prompt, and (for single-prompt procedures) the per-token
    arrays (one entry per target token)."""
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
    # target tokens scored under each prompt: a template's target is tokenized after its prompt,
    # so its length can differ from the document's suffix length ([EM] Eq. 15 aggregates log q of
    # the same text over prompts whatever the token counts)
    tl = units.column("suffix_len").to_numpy()[idx]  # [W, n_prompts]
    cols["target_tokens"] = pa.array(tl.tolist(), pa.list_(pa.int64()))
    for spec in policies:
        v = units.column(f"logq:{spec}").to_numpy()[idx]  # [W, n_prompts]
        cols[f"logq:{spec}"] = pa.array(aggregate_logq(v, agg, axis=1), pa.float64())
    gm = units.column("greedy_match").to_numpy(zero_copy_only=False)[idx]
    mm = units.column("min_margin").to_numpy()[idx]
    cols["greedy_match"] = pa.array(gm.any(axis=1))
    cols["min_margin"] = pa.array(mm.min(axis=1), pa.float64())
    cols["near_tie"] = pa.array(mm.min(axis=1) < NEAR_TIE_MARGIN)
    for name in units.column_names:
        if name.startswith("nv_logq:"):
            v = units.column(name).to_numpy()[idx]
            cols[name] = pa.array(aggregate_logq(v, agg, axis=1), pa.float64())
        elif name.startswith("nv_exact:"):
            v = units.column(name).to_numpy(zero_copy_only=False)[idx]
            cols[name] = pa.array(v.all(axis=1))
        elif name.startswith(("nv_found:", "nv_forward_rows:")):
            cols[name] = pa.array(units.column(name).to_numpy()[idx].sum(axis=1), pa.int64())
    if n_prompts == 1:
        take = pa.array(idx[:, 0])
        for name in ["token_logprob", "token_mean", "token_std", "token_rank"] + [f"token_logq:{s}" for s in policies]:
            cols[name] = units.column(name).take(take)
    table = pa.table(cols)
    meta = {"run_id": run_id, "procedure": run["procedure"], "policies": policies, "aggregate": agg}
    import json

    return table.replace_schema_metadata({b"memclaim": json.dumps(meta).encode()})
