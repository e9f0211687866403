"""What a scoring run writes into the store besides its unit files: ``runs/<run>/windows.parquet``
(the window table, written before any unit is scored) and ``runs/<run>/scores.parquet`` (one row
per window, rebuilt from the sealed unit files when the run ends).

Moved from :mod:`memclaim.scoring.runner` (issue 26 item 3: the runner keeps only the run); the
runner re-exports :func:`write_results` and the constants, so older imports keep working.
"""

from __future__ import annotations

import contextlib
import os

import numpy as np

from ..errors import StoreError
from ..store.store import ScoreStore, read_parquet, stat_names
from .engine import NEAR_TIE_MARGIN
from .prompts import aggregate_logq
from .units import WindowIndex

__all__ = ["WINDOW_BATCH", "SERVED_COLUMNS", "write_results"]

WINDOW_BATCH = 4096  # windows per Parquet row group of windows.parquet and scores.parquet
# per-window columns a served run adds (memclaim.scoring.served.backend): whether log q is exact, and
# its certified bounds; carried into scores.parquet like the near-verbatim columns
SERVED_COLUMNS = ("logq_exact:", "logq_lower:", "logq_upper:")


def _windows_table(
    windows, window_items: list[list[str]], label: str, window_targets: list[list[list[int]]]
):
    import pyarrow as pa

    return pa.table(
        {
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
        }
    )


def _window_batches(window_set, index: WindowIndex, label: str):
    """windows.parquet as record batches of WINDOW_BATCH windows (made on demand)."""
    W = len(window_set)
    windows = window_set.windows
    for a in range(0, W, WINDOW_BATCH):
        ws = windows[a : min(W, a + WINDOW_BATCH)]
        keys = [index.window_keys(a + i) for i in range(len(ws))]
        targets = [[list(t) for _, t in index.items_of(w)] for w in ws]
        yield _windows_table(ws, keys, label, targets)


_PER_TOKEN = (
    ("token_logprob", "token_logprob"),
    ("token_mean", "token_moments"),
    ("token_std", "token_moments"),
    ("token_rank", "rank"),
)


def write_results(store: ScoreStore, run_id: str, index: WindowIndex | None = None) -> int:
    """Write runs/<run>/scores.parquet, one row per window in window order: the windows table's
    columns (spans, texts, ids), the target tokens scored under each prompt, log q per policy
    aggregated over prompts ([EM] Eq. 15), the greedy and near-tie flags, near-verbatim bounds,
    and (for single-prompt procedures) the per-token arrays of the statistics the run holds.

    Streams: the units are read once, in unit order, into per-item arrays (a few numbers an
    item) and a scratch file of per-token blocks; the file is then written WINDOW_BATCH windows
    at a time, so memory does not grow with the per-token arrays of a book. Returns the number
    of windows with a near-tie.

    >>> write_results(ScoreStore("runs/toy"), summary.run_id)  # writes runs/toy/runs/<run>/scores.parquet  # doctest: +SKIP
    0
    """
    import json
    import tempfile

    import pyarrow as pa
    import pyarrow.parquet as pq

    run = store.read_run(run_id)
    pkey = run["procedure"]
    store.check_procedure(pkey)
    store.check_file(
        store.run_dir(run_id) / "windows.parquet",
        run.get("windows_sha256"),
        f"windows.parquet of run {run_id}",
    )
    proc = store.procedure(pkey)
    policies = proc["policies"]
    agg = proc["prompt"].get("aggregate") or "max"
    held = stat_names(run.get("stats"))  # a run recorded before statistic sets: all of them
    # pre_buffer=False: with Arrow's default read-ahead, iterating a file's row groups keeps the
    # buffers of every group read so far (measured: +135 MB of RSS over a 16x book's windows.parquet,
    # flat without it; benchmarks/bench_book.py)
    wfile = pq.ParquetFile(store.run_dir(run_id) / "windows.parquet", pre_buffer=False)
    if (
        index is not None
    ):  # the run's own index: the distinct items (16-byte keys) and each window's
        uniq, inverse = index.uniq, index.inverse
        W, n_prompts = inverse.shape
    else:
        wk = [
            np.asarray(
                [[bytes.fromhex(k) for k in ks] for ks in b.column(0).to_pylist()], dtype="S16"
            )
            for b in wfile.iter_batches(batch_size=WINDOW_BATCH, columns=["item_keys"])
        ]
        wkeys = np.concatenate(wk) if wk else np.empty((0, 1), "S16")  # [W, n_prompts]
        W, n_prompts = wkeys.shape if wkeys.ndim == 2 else (0, 1)
        uniq, inverse = np.unique(wkeys.reshape(-1), return_inverse=True)
        inverse = inverse.reshape(W, n_prompts)
        del wk, wkeys
    n = len(uniq)
    suffix_len = np.zeros(n, np.int32)
    logq = {spec: np.full(n, np.nan) for spec in policies}
    greedy = np.zeros(n, bool)
    margin = np.full(n, np.nan)
    nv: dict[str, np.ndarray] = {}
    per_token = (
        [name for name, stat in _PER_TOKEN if stat in held] + [f"token_logq:{p}" for p in policies]
        if n_prompts == 1
        else []
    )
    offset = np.zeros(n, np.int64)  # byte offset of each item's [n_cols, S] float64 block
    seen = np.zeros(n, bool)
    fd, scratch = tempfile.mkstemp(
        prefix=".scores-scratch.", suffix=".tmp", dir=store.run_dir(run_id)
    )
    try:
        with os.fdopen(fd, "r+b", buffering=0) as fh:
            pos = 0
            for uid in run["units"]:
                path = store.unit_path(pkey, uid)
                if not path.exists():
                    raise StoreError(
                        f"unit {uid[:12]} is missing from {str(store.root)!r}",
                        hint="re-run the scoring command to finish the run",
                    )
                store.check_unit(
                    pkey, uid
                )  # scores are rebuilt only from the units memclaim sealed
                t = read_parquet(
                    path,
                    fix=f"delete {str(path)!r} and re-run the scoring command: the unit is "
                    "scored again",
                )
                keys = np.asarray(
                    [bytes.fromhex(k) for k in t.column("item_key").to_pylist()], dtype="S16"
                )
                at = np.searchsorted(uniq, keys)
                at = np.minimum(at, max(0, n - 1))
                mine = uniq[at] == keys if n else np.zeros(len(keys), bool)
                at, rows = at[mine], np.flatnonzero(mine)
                if not len(at):
                    continue
                seen[at] = True
                suffix_len[at] = t.column("suffix_len").to_numpy()[rows]
                for spec in policies:
                    logq[spec][at] = t.column(f"logq:{spec}").to_numpy()[rows]
                greedy[at] = t.column("greedy_match").to_numpy(zero_copy_only=False)[rows]
                margin[at] = t.column("min_margin").to_numpy()[rows]
                for name in t.column_names:
                    if name.startswith(
                        ("nv_logq:", "nv_exact:", "nv_found:", "nv_forward_rows:") + SERVED_COLUMNS
                    ):
                        v = t.column(name).to_numpy(zero_copy_only=False)
                        if name not in nv:
                            nv[name] = np.zeros(n, dtype=v.dtype)
                        nv[name][at] = v[rows]
                if per_token:
                    missing = [c for c in per_token if c not in t.column_names]
                    if missing:
                        raise StoreError(
                            f"unit {uid[:12]} lacks {missing} (scored with fewer statistics than run "
                            f"{run_id} records)",
                            hint="re-run the scoring command: it scores the unit "
                            "again with every statistic the run needs",
                        )
                    S = int(t.column("suffix_len")[0].as_py())
                    block = np.stack(
                        [
                            t.column(c)
                            .combine_chunks()
                            .flatten()
                            .to_numpy(zero_copy_only=False)
                            .astype(np.float64)
                            .reshape(len(keys), S)
                            for c in per_token
                        ],
                        axis=1,
                    )
                    block = np.ascontiguousarray(block[rows])  # [rows, n_cols, S]
                    offset[at] = pos + np.arange(len(rows)) * block[0].nbytes
                    fh.write(block.tobytes())
                    pos += block.nbytes
        if n and not seen.all():
            k = uniq[np.flatnonzero(~seen)[0]].ljust(16, b"\0").hex()
            raise StoreError(
                f"item {k[:12]} of run {run_id} is in none of its units",
                hint="re-run the scoring command to finish the run",
            )
        meta = {"run_id": run_id, "procedure": pkey, "policies": policies, "aggregate": agg}
        near = 0
        ncols = len(per_token)
        with (
            open(scratch, "rb") as sf,
            store.parquet_writer(
                store.run_dir(run_id) / "scores.parquet",
                before_replace=lambda digest: store.seal_scores(run_id, digest),
            ) as write,
        ):
            a = 0
            for batch in wfile.iter_batches(batch_size=WINDOW_BATCH):
                tb = pa.Table.from_batches([batch])
                idx = inverse[a : a + tb.num_rows]  # [w, n_prompts] item of each window and prompt
                a += tb.num_rows
                cols = {name: tb.column(name) for name in tb.column_names if name != "item_keys"}
                # target tokens scored under each prompt: a template's target is tokenized after
                # its prompt, so its length can differ from the document's suffix length ([EM]
                # Eq. 15 aggregates log q of the same text over prompts whatever the token counts)
                cols["target_tokens"] = pa.array(suffix_len[idx].tolist(), pa.list_(pa.int64()))
                for spec in policies:
                    cols[f"logq:{spec}"] = pa.array(
                        aggregate_logq(logq[spec][idx], agg, axis=1), pa.float64()
                    )
                mm = margin[idx].min(axis=1)
                cols["greedy_match"] = pa.array(greedy[idx].any(axis=1))
                cols["min_margin"] = pa.array(mm, pa.float64())
                cols["near_tie"] = pa.array(mm < NEAR_TIE_MARGIN)
                near += int(np.count_nonzero(mm < NEAR_TIE_MARGIN))
                for name, v in nv.items():
                    if name.startswith(
                        ("nv_logq:", "logq_lower:", "logq_upper:")
                    ):  # bounds aggregate as log q
                        cols[name] = pa.array(aggregate_logq(v[idx], agg, axis=1), pa.float64())
                    elif name.startswith(("nv_exact:", "logq_exact:")):
                        cols[name] = pa.array(v[idx].all(axis=1))
                    else:
                        cols[name] = pa.array(v[idx].sum(axis=1), pa.int64())
                if per_token:
                    items = idx[:, 0]
                    S = suffix_len[items]
                    blocks = [
                        np.frombuffer(
                            os.pread(sf.fileno(), ncols * int(s_) * 8, int(o)), dtype=np.float64
                        ).reshape(ncols, int(s_))
                        for o, s_ in zip(offset[items], S)
                    ]
                    offs = pa.array(np.concatenate([[0], np.cumsum(S)]).astype(np.int32))
                    for c, name in enumerate(per_token):
                        flat = np.concatenate([b[c] for b in blocks]) if blocks else np.zeros(0)
                        vals = (
                            pa.array(flat.astype(np.int64))
                            if name == "token_rank"
                            else pa.array(flat)
                        )
                        cols[name] = pa.ListArray.from_arrays(offs, vals)
                table = pa.table(cols).replace_schema_metadata(
                    {b"memclaim": json.dumps(meta).encode()}
                )
                write(table)
        store.scores_sealed(
            run_id
        )  # the new scores.parquet is in place: its sha256 alone is recorded
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(scratch)
    return near
