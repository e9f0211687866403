"""Reading finished runs back from a store, for claims, audits and reports (no model needed)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..decoding import Policy
from ..errors import InputError, StoreError
from .store import ScoreStore, read_parquet


@dataclass(frozen=True)
class RunScores:
    """One run's window-level scores under one decoding policy."""

    store: str
    run_id: str
    label: str
    procedure: dict
    procedure_key: str
    policy: str
    score_kind: str  # 'verbatim' or 'near-verbatim lower bound (eps=E)'
    window_ids: tuple[str, ...]
    sources: tuple[str, ...]
    logq: np.ndarray  # [W] float64 natural-log q under ``policy`` (aggregated over prompts)
    greedy_match: np.ndarray  # [W] bool
    near_tie: np.ndarray  # [W] bool
    prefix_spans: np.ndarray  # [W, 2] char spans [start, end)
    suffix_spans: np.ndarray  # [W, 2]
    prefix_texts: tuple[str, ...]
    suffix_texts: tuple[str, ...]
    inputs: dict
    total_chars: dict
    skipped_short: int
    table: object = field(repr=False)  # the full pyarrow table (per-token columns included)

    @property
    def is_binary(self) -> bool:
        return Policy.parse(self.policy).is_binary

    def __len__(self) -> int:
        return len(self.logq)

    def token_array(self, column: str) -> list[np.ndarray]:
        """Per-token arrays (e.g. 'token_logprob', 'token_mean', 'token_std', 'token_rank',
        'token_logq:<policy>') as a list of 1-D arrays, one per window."""
        if column not in self.table.column_names:
            raise StoreError(
                f"column {column!r} is not in run {self.run_id}",
                hint="per-token columns exist for single-prompt procedures only",
            )
        return [np.asarray(v, dtype=np.float64) for v in self.table.column(column).to_pylist()]


def list_runs(store_dir: str | Path) -> dict:
    """{run id: run record (label, procedure key, inputs, ...)} of a score store.

    >>> runs = list_runs("runs/smol")                    # doctest: +SKIP
    >>> [r["label"] for r in runs.values()]              # doctest: +SKIP
    ['passages:members.jsonl', 'passages:controls.jsonl']
    """
    return ScoreStore(store_dir, create=False).runs()


WINDOW_COLUMNS = (
    "greedy_match",
    "near_tie",
    "prefix_start",
    "prefix_end",
    "suffix_start",
    "suffix_end",
)


def load_run_scores(
    store_dir: str | Path,
    *,
    run: str | None = None,
    policy: str | None = None,
    near_verbatim: int | None = None,
    suffix_tokens: int | None = None,
    texts: bool = True,
) -> RunScores:
    """Load a run's window scores. ``run`` is a run id (or unique prefix) or a label; it may be
    omitted when the store holds one run. ``policy`` may be omitted when the run has one policy.
    ``near_verbatim`` = EPS selects the certified near-verbatim lower bound at token edit
    distance EPS as the score (the run must have been scored with --near-verbatim EPS).
    ``suffix_tokens`` = n scores only the first n suffix tokens, from the stored per-token log q
    by a cumulative sum, without another model pass ([EM] App. D.3: the 1-50 token sweep).
    ``texts=False`` reads only the window-level numbers (scores, flags, spans): ``window_ids``,
    ``sources``, ``prefix_texts`` and ``suffix_texts`` are None and ``table`` holds those columns
    only (a census of a book reads ~50 bytes a window, not its texts and per-token arrays).

    >>> rs = load_run_scores("runs/smol", run="passages:members.jsonl", policy="top-k:40")  # doctest: +SKIP
    >>> rs.logq[:2], list(rs.sources[:2])                                                   # doctest: +SKIP
    (array([-12.3, -48.1]), ['gen1', 'gen2'])
    """
    if not Path(store_dir).exists():
        raise InputError(
            f"score store {str(store_dir)!r} does not exist",
            hint="pass the --out folder of a `memclaim score` run",
        )
    st = ScoreStore(store_dir, create=False)
    runs = st.runs()
    if not runs:
        raise StoreError(f"store {str(store_dir)!r} holds no runs")
    if run is None:
        if len(runs) > 1:
            raise InputError(
                f"store {str(store_dir)!r} holds {len(runs)} runs; say which with --run",
                hint="runs: " + ", ".join(f"{rid} ({r.get('label')})" for rid, r in runs.items()),
            )
        run_id = next(iter(runs))
    else:
        matches = [rid for rid, r in runs.items() if rid.startswith(run) or r.get("label") == run]
        if len(matches) != 1:
            raise InputError(
                f"run {run!r} matches {len(matches)} runs in {str(store_dir)!r}",
                hint="runs: " + ", ".join(f"{rid} ({r.get('label')})" for rid, r in runs.items()),
            )
        run_id = matches[0]
    meta = st.verify_run(
        run_id
    )  # labels, procedure and scores as memclaim wrote them (schema 3 seals)
    path = st.run_dir(run_id) / "scores.parquet"
    if not path.exists():
        raise StoreError(
            f"run {run_id} in {str(store_dir)!r} is unfinished (no scores.parquet)",
            hint="re-run the scoring command to finish it",
        )
    if not path.is_file():  # a folder in its place (pyarrow would read it as a dataset, or fail)
        raise StoreError(
            f"{str(path)!r} is not a file (a folder or another object is in its place): the scores of "
            f"run {run_id} cannot be read",
            hint="move it out of the store, then re-run the scoring command: it rewrites scores.parquet "
            "from the unit files",
        )
    fix = "re-run the scoring command: it rewrites scores.parquet from the unit files"
    if texts:
        table = read_parquet(path, fix=fix)
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            names = pq.read_schema(path).names
        except (OSError, pa.ArrowException) as exc:
            raise StoreError(f"{str(path)!r} is unreadable: {exc}", hint=fix) from None
        cols = [c for c in names if c in WINDOW_COLUMNS or c.startswith(("logq:", "nv_logq:"))]
        if suffix_tokens is not None:
            cols += [c for c in names if c.startswith("token_logq:")]
        table = read_parquet(path, fix=fix) if not cols else _read_columns(path, cols, fix)
    proc = st.procedure(meta["procedure"])
    policies = proc["policies"]
    if policy is None:
        if len(policies) > 1:
            raise InputError(
                f"run {run_id} has several policies {policies}; choose one with --policy",
                hint=f"e.g. --policy {policies[0]}",
            )
        spec = policies[0]
    else:
        spec = Policy.parse(policy).spec
        if spec not in policies:
            raise InputError(
                f"policy {policy!r} was not scored in run {run_id}",
                hint=f"scored policies: {', '.join(policies)}",
            )
    score_col, kind = f"logq:{spec}", "verbatim"
    _require_columns(
        table,
        path,
        run_id,
        (score_col, *WINDOW_COLUMNS)
        + (("window_id", "source", "prefix_text", "suffix_text") if texts else ()),
    )
    if near_verbatim is not None:
        nv = proc.get("near_verbatim") or {}
        if int(near_verbatim) not in nv.get("epsilons", []):
            raise InputError(
                f"run {run_id} has no near-verbatim scores at epsilon {near_verbatim}",
                hint=f"scored epsilons: {nv.get('epsilons', 'none')}; re-score with --near-verbatim "
                f"{near_verbatim}",
            )
        score_col = f"nv_logq:{spec}:eps{int(near_verbatim)}"
        _require_columns(table, path, run_id, (score_col,))
        kind = (
            f"near-verbatim lower bound (eps={int(near_verbatim)} token edits, beams {nv.get('beams')}): "
            "conservative for members; controls get the same treatment"
        )
    logq = table.column(score_col).to_numpy().astype(np.float64)
    _refuse_inexact(logq, table, spec, run_id, proc)
    if suffix_tokens is not None:
        S = proc["suffix_tokens"]  # None: whole suffix fields (lengths vary by window)
        if near_verbatim is not None:
            raise InputError(
                "--suffix-tokens applies to the verbatim score only",
                hint="near-verbatim balls are defined for the scored suffix length",
            )
        per_token = f"token_logq:{spec}"
        if per_token not in table.column_names:
            raise StoreError(
                f"run {run_id} has no per-token scores (several prompts per window)",
                hint="score with a single prompt to sweep suffix lengths",
            )
        arr = table.column(per_token).to_pylist()
        n = int(suffix_tokens)
        # the scored target tokens of each window: the document's suffix tokens, or under a
        # template the target as tokenized after the prompt (its count can differ from S)
        lens = [len(v) for v in arr]
        shortest = int(np.argmin(lens)) if lens else 0
        top = min(lens) if lens else 0
        if not 1 <= n <= top:
            where = (
                f"the shortest scored target, window {table.column('window_id')[shortest].as_py()!r}, has "
                f"{top} tokens"
                if lens
                else "the run has no windows"
            )
            raise InputError(
                f"suffix length {suffix_tokens} is outside 1..{top}: {where} (the run's suffix length "
                f"is {'the whole suffix field' if S is None else S})",
                hint=f"sweep suffix lengths from 1 to {top}",
            )
        # sum logs left to right over the first n tokens ([EM] Eq. 1 on the shorter suffix)
        logq = np.array([np.cumsum(np.asarray(v, dtype=np.float64))[n - 1] for v in arr])
        target = (
            "suffix tokens"
            if proc.get("prompt", {}).get("kind") == "natural-prefix"
            else "target tokens as tokenized after the prompt"
        )
        kind = f"{kind}, first {n} of {'the' if S is None else S} {target}"
    col = lambda n: table.column(n).to_pylist()  # noqa: E731
    if texts:  # the run's id is the hash of its procedure, label, units and these windows
        st.check_run_id(run_id, meta, table.column("window_id").to_pylist())

    def num(name, dtype=None):  # a numeric column without a Python list of it
        return np.asarray(table.column(name).to_numpy(zero_copy_only=False), dtype=dtype)

    return RunScores(
        store=str(st.root),
        run_id=run_id,
        label=meta.get("label", ""),
        procedure=proc,
        procedure_key=meta["procedure"],
        policy=spec,
        score_kind=kind,
        window_ids=tuple(col("window_id")) if texts else None,
        sources=tuple(col("source")) if texts else None,
        logq=logq,
        greedy_match=num("greedy_match", bool),
        near_tie=num("near_tie", bool),
        prefix_spans=np.stack([num("prefix_start"), num("prefix_end")], axis=1),
        suffix_spans=np.stack([num("suffix_start"), num("suffix_end")], axis=1),
        prefix_texts=tuple(col("prefix_text")) if texts else None,
        suffix_texts=tuple(col("suffix_text")) if texts else None,
        inputs=meta.get("inputs", {}),
        total_chars=meta.get("total_chars", {}),
        skipped_short=int(meta.get("skipped_short", 0)),
        table=table,
    )


def _refuse_inexact(logq: np.ndarray, table, spec: str, run_id: str, proc: dict) -> None:
    """A served run stores NaN where a window's log q is not exact (certified bounds only,
    memclaim.scoring.served.exactness): such a window is never read as a score."""
    bad = np.flatnonzero(np.isnan(logq))
    if not len(bad):
        return
    served = (proc.get("model") or {}).get("served") or {}
    cls = (served.get("exactness") or {}).get(spec, "not exact")
    first = (
        f" (first: window {table.column('window_id')[int(bad[0])].as_py()!r})"
        if "window_id" in table.column_names
        else ""
    )
    raise InputError(
        f"{len(bad)} of {len(logq)} windows of run {run_id} have no exact score under {spec}{first}: the "
        f"server's top-{served.get('top_logprobs', '?')} log-probs give {cls}; their certified bounds are "
        f"in the columns logq_lower:{spec} and logq_upper:{spec}",
        hint="a test needs exact scores: restart the server with more top log-probs (vLLM: "
        "--max-logprobs) and score again, or test another policy",
    )


def _require_columns(table, path: Path, run_id: str, columns) -> None:
    """Every column a reader needs is in the run's scores.parquet: a file edited by hand (a policy's
    column dropped) is a StoreError naming the columns, not a KeyError."""
    missing = [c for c in columns if c not in table.column_names]
    if missing:
        raise StoreError(
            f"{str(path)!r} has no column{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))} "
            f"though run {run_id}'s procedure scored it (the file was edited or replaced)",
            hint="move the file out of the store and re-run the scoring command: it rewrites "
            "scores.parquet from the unit files",
        )


def _read_columns(path, columns, fix):
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return pq.read_table(path, columns=list(columns))
    except (OSError, pa.ArrowException) as exc:
        raise StoreError(f"{str(path)!r} is unreadable: {exc}", hint=fix) from None
