"""Stored runs as the claims read them: one run of a score store, its procedure for the
same-procedure check ([EM] Def. B.2), its ids, and its provenance record for a report."""

from __future__ import annotations

from pathlib import Path

from ..errors import InputError
from ..fsutil import sha256_file
from ..scoring.results import RunScores, list_runs, load_run_scores

__all__ = ["is_store", "load_store_run", "stored_test_procedure", "store_input_record", "run_ids"]


def is_store(path) -> bool:
    """A folder is read as a score store; a file as external scores."""
    return Path(path).is_dir()


def load_store_run(
    path,
    *,
    run: str | None,
    policy: str | None,
    role: str,
    run_option: str,
    near_verbatim: int | None = None,
) -> RunScores:
    """One run of a score store as :class:`memclaim.scoring.results.RunScores`. ``run`` is a run
    id (or unique prefix) or a label; it may be omitted when the store holds one run."""
    if run is None:
        runs = list_runs(path)
        if len(runs) > 1:
            raise InputError(
                f"the {role} store {str(path)!r} holds {len(runs)} runs; say which one with {run_option}",
                hint="runs (id, label): "
                + ", ".join(f"{rid} ({r.get('label')})" for rid, r in runs.items()),
            )
    return load_run_scores(path, run=run, policy=policy, near_verbatim=near_verbatim)


def stored_test_procedure(rs: RunScores) -> dict:
    """The procedure of one run as the test uses it: the stored record with the tested policy in
    ``policy`` and the policies scored in the same pass in ``policies_scored`` (which may differ
    between candidates and controls, [EM] Def. B.2: the policy under test is what must match)."""
    d = {k: v for k, v in rs.procedure.items() if k != "policies"}
    d["policy"] = rs.policy
    d["policies_scored"] = list(rs.procedure.get("policies", ()))
    if rs.score_kind != "verbatim":
        d["score"] = rs.score_kind  # near-verbatim lower bound: both sides must use the same one
    return d


def store_input_record(rs: RunScores, role: str) -> dict:
    """Provenance of one run: where it is, its procedure key, and hashes that tie the report to
    the stored scores and to the texts that were scored."""
    scores = Path(rs.store) / "runs" / rs.run_id / "scores.parquet"
    src = rs.inputs.get("passages", rs.inputs.get("document", ""))
    return {
        "role": role,
        "path": str(src),
        "sha256": rs.inputs.get("sha256", ""),
        "store": rs.store,
        "run_id": rs.run_id,
        "label": rs.label,
        "procedure_key": rs.procedure_key,
        "policy": rs.policy,
        "windows": len(rs),
        "skipped_short": rs.skipped_short,
        "scores_sha256": sha256_file(scores),
        "scored_inputs": rs.inputs,
    }


def run_ids(rs: RunScores) -> tuple[tuple[str, ...], dict]:
    """Ids for the report and aliases for --exclude-controls. Passages give one window each, so
    the record id names it; sliding windows share a source, so the window id ("doc#i") does."""
    sources = tuple(str(x) for x in rs.sources)
    wids = tuple(str(x) for x in rs.window_ids)
    if len(set(sources)) == len(sources):
        return sources, dict(zip(wids, sources))
    return wids, {}
