"""``memclaim test``: the conformal population test on stored or external scores ([EM] §3, §4, H.1).

SCORES is either a score store (the ``--out`` folder of ``memclaim score``, read with
:func:`memclaim.scoring.results.load_run_scores`; the procedures of the two runs must match
except for which other policies were scored) or an external CSV/TSV/Parquet file of scores
computed elsewhere. Thin: read the two score sets, call :func:`run_store_test` /
:func:`run_population_test` (which ``population`` calls too), print a summary.
"""
from __future__ import annotations

import io
from pathlib import Path
from typing import Sequence

import click
import numpy as np

from ..errors import InputError
from ..fsutil import sha256_bytes, sha256_file
from ..jsonutil import read_json_object
from ..text.io import pick_column
from .common import check_out_dir, claim_options

ID_COLUMNS = ("id", "doc_id", "uid", "key", "name")
SCORE_COLUMNS = ("score", "log_prob", "logprob", "log_q", "logq", "prob", "probability")
TEXT_COLUMNS = ("text", "suffix", "passage", "content")


# ------------------------------------------------------------------------ reading score files
class ScoreFile:
    """Scores read from one CSV/TSV/Parquet file: ids, float scores, optional texts, sha256."""

    def __init__(self, path, ids, scores, texts, sha256, columns):
        self.path, self.ids, self.scores, self.texts, self.sha256, self.columns = path, ids, scores, texts, sha256, columns

    def input_record(self, role: str) -> dict:
        return {"role": role, "path": str(self.path), "sha256": self.sha256, "rows": len(self.ids),
                "columns": self.columns}


def _pick(fields, wanted, defaults, what, path, required=True):
    return pick_column(fields, wanted, defaults, what, path, required=required, noun="column")


def _to_float(v, path, where, col):
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    if v is None:
        raise InputError(f"{str(path)!r} {where}: {col!r} is empty", hint="every row needs a score; -inf means probability 0")
    s = str(v).strip()
    try:
        return float(s)
    except ValueError:
        raise InputError(f"{str(path)!r} {where}: {col!r} value {s!r} is not a number",
                         hint="scores must be numbers (use -inf for an exact zero probability)") from None


def read_score_file(path, *, id_column: str | None = None, score_column: str | None = None,
                    text_column: str | None = None) -> ScoreFile:
    """Read an id column and a score column (and optionally a text column) from CSV/TSV/Parquet."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"score file {str(p)!r} does not exist or is not a file", hint="check the path")
    data = p.read_bytes()
    if not data.strip():
        raise InputError(f"score file {str(p)!r} is empty", hint="pass a file with a header and one row per item")
    suffix = p.suffix.lower()
    if suffix in (".parquet", ".pq"):
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(io.BytesIO(data))
        except (pa.ArrowInvalid, OSError) as exc:
            raise InputError(f"{str(p)!r} is not a readable Parquet file: {exc}") from None
        cols = table.column_names
        ic = _pick(cols, id_column, ID_COLUMNS, "id", p)
        sc = _pick(cols, score_column, SCORE_COLUMNS, "score", p)
        tc = _pick(cols, text_column, TEXT_COLUMNS, "text", p, required=bool(text_column))
        ids = [None if x is None else str(x) for x in table.column(ic).to_pylist()]
        raw = table.column(sc).to_pylist()
        texts = table.column(tc).to_pylist() if tc else None
        where = [f"row {i}" for i in range(len(ids))]
    elif suffix in (".csv", ".tsv", ".txt"):
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise InputError(f"{str(p)!r} is not valid UTF-8 (byte offset {exc.start})",
                             hint="re-encode the file as UTF-8") from None
        from ..text.io import read_csv_records

        header, records = read_csv_records(p, text, tsv=suffix == ".tsv")
        if not header:
            raise InputError(f"{str(p)!r} has no header row", hint="add a header such as 'id,score'")
        cols = list(header)
        ic = _pick(cols, id_column, ID_COLUMNS, "id", p)
        sc = _pick(cols, score_column, SCORE_COLUMNS, "score", p)
        tc = _pick(cols, text_column, TEXT_COLUMNS, "text", p, required=bool(text_column))
        rows = [r for _, r in records]
        ids = [r.get(ic) for r in rows]
        raw = [r.get(sc) for r in rows]
        texts = [r.get(tc) for r in rows] if tc else None
        where = [f"line {line}" for line, _ in records]
    else:
        raise InputError(f"cannot tell the format of {str(p)!r} from its extension {suffix!r}",
                         hint="use .csv, .tsv or .parquet")
    if not ids:
        raise InputError(f"{str(p)!r} has a header but no rows", hint="add one row per scored item")
    scores = np.array([_to_float(v, p, w, sc) for v, w in zip(raw, where)], dtype=np.float64)
    seen = {}
    for i, (x, w) in enumerate(zip(ids, where)):
        if x in (None, ""):
            raise InputError(f"{str(p)!r} {w}: empty id", hint="give every row an id")
        if x in seen:
            raise InputError(f"{str(p)!r} {w}: duplicate id {x!r} (first at {where[seen[x]]})", hint="make ids unique")
        seen[x] = i
    return ScoreFile(p, tuple(ids), scores, None if texts is None else tuple(texts), sha256_bytes(data),
                     {"id": ic, "score": sc, "text": tc})


def read_id_list(path) -> tuple[str, ...]:
    """One id per line (blank lines and lines starting with # ignored)."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"id list {str(p)!r} does not exist", hint="one control id per line")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"id list {str(p)!r} is not valid UTF-8 (byte offset {exc.start})",
                         hint="re-encode the file as UTF-8") from None
    out = []
    for line in text.splitlines():
        s = line.strip()
        if s and not s.startswith("#"):
            out.append(s)
    return tuple(out)


# ------------------------------------------------------------------------ the shared entry point
def _say(console, text: str) -> None:
    from .console import say

    say(click.echo if console is None else console, text)


def run_population_test(*, candidate_scores, control_scores, alpha, kind: str, out_dir,
                        candidate_ids: Sequence[str] | None = None, control_ids: Sequence[str] | None = None,
                        candidate_texts: Sequence[str] | None = None, control_texts: Sequence[str] | None = None,
                        candidates_procedure: dict | None = None, controls_procedure: dict | None = None,
                        procedure_ignore: Sequence[str] = (), inputs: Sequence[dict] = (),
                        exclude_control_ids: Sequence[str] = (), binary: bool | None = None,
                        confidence: float = 0.95, fdr_delta=None, fwer_delta=None, seed: int = 0,
                        budget_delta: float | None = None, realistic_budget: float = 1e5,
                        controls_description: str | None = None, command: str = "test",
                        title: str = "Conformal population test", quiet: bool = False, console=None) -> dict:
    """Check the procedures, run the population claim, write report.{json,md,html} into
    ``out_dir`` (all or nothing) and return a summary dict. This is the one function the
    store-reading commands (``test --candidates STORE_DIR``, ``population``) call with two
    arrays plus metadata."""
    from ..claims.population import population_claim
    from ..claims.procedure import require_same_procedure
    from ..report.core import write_report
    from ..report.population import headline, population_report

    procedure = None
    if candidates_procedure is not None and controls_procedure is not None:
        require_same_procedure(candidates_procedure, controls_procedure, ignore=tuple(procedure_ignore))
        procedure = candidates_procedure
    else:
        procedure = candidates_procedure or controls_procedure
    claim = population_claim(candidate_scores=candidate_scores, control_scores=control_scores, alpha=alpha,
                             kind=kind, candidate_ids=candidate_ids, control_ids=control_ids,
                             exclude_control_ids=exclude_control_ids, binary=binary, confidence=confidence,
                             fdr_delta=fdr_delta, fwer_delta=fwer_delta, seed=seed, budget_delta=budget_delta,
                             realistic_budget=realistic_budget)
    extra = {}
    if candidate_texts is not None and control_texts is not None:
        cset = {t: i for i, t in enumerate(candidate_texts) if isinstance(t, str) and t}
        same = [(claim.control_ids[k], claim.candidate_ids[cset[t]]) for k, t in enumerate(control_texts)
                if isinstance(t, str) and t in cset]
        extra["controls_identical_to_a_candidate"] = [{"control": a, "candidate": b} for a, b in same]
    bundle = population_report(claim, procedure=procedure, inputs=inputs, controls_description=controls_description,
                               command=command, title=title, extra_results=extra)
    paths = write_report(out_dir, bundle)
    t = claim.primary_test
    summary = {
        "headline": headline(claim), "pool": claim.primary, "alpha": t.alpha, "k": t.k, "alpha_n": t.alpha_n,
        "threshold": t.threshold, "threshold_log10_prob": t.threshold_log10_prob,
        "n_controls": t.n_controls, "n_candidates": t.n_candidates, "n_claimed": t.n_claimed,
        "generation_rate": t.generation_rate.to_dict(), "calibrated_rate": t.calibrated_rate.to_dict(),
        "in_sample_fpr": t.in_sample_fpr, "claim_possible": t.claim_possible, "report": paths,
    }
    if extra.get("controls_identical_to_a_candidate"):
        summary["warning"] = (f"{len(extra['controls_identical_to_a_candidate'])} control text(s) are identical to a "
                              "candidate text: such controls are likely members (contamination); see report.json")
    if not quiet:
        _say(console, summary["headline"])
        if "warning" in summary:
            _say(console, "warning: " + summary["warning"])
        _say(console, f"report: {paths['html']}")
    return summary


# ------------------------------------------------------------------------ score stores
def validate_test_levels(*, alpha, fdr=None, fwer=None, budget_delta=None, confidence=0.95,
                         realistic_budget=1e5) -> None:
    """Check the levels a population test will use before any scoring or reading is done, so a
    typo fails at once (exit 2) instead of after the model work."""
    from ..claims.scores import exact_level
    from ..validate import in_open_unit, query_budget

    query_budget("--budget", realistic_budget)
    exact_level("alpha", alpha)
    if fdr is not None:
        exact_level("--fdr", fdr)
    if fwer is not None:
        exact_level("--fwer", fwer)
    if budget_delta is not None:
        in_open_unit("--budget-delta", budget_delta)
    in_open_unit("--confidence", confidence)


def is_store(path) -> bool:
    """A folder is read as a score store; a file as external scores."""
    return Path(path).is_dir()


def load_store_run(path, *, run: str | None, policy: str | None, role: str, run_option: str,
                   near_verbatim: int | None = None):
    """One run of a score store as :class:`memclaim.scoring.results.RunScores`. ``run`` is a run
    id (or unique prefix) or a label; it may be omitted when the store holds one run."""
    from ..scoring.results import list_runs, load_run_scores

    if run is None:
        runs = list_runs(path)
        if len(runs) > 1:
            raise InputError(
                f"the {role} store {str(path)!r} holds {len(runs)} runs; say which one with {run_option}",
                hint="runs (id, label): " + ", ".join(f"{rid} ({r.get('label')})" for rid, r in runs.items()))
    return load_run_scores(path, run=run, policy=policy, near_verbatim=near_verbatim)


def stored_test_procedure(rs) -> dict:
    """The procedure of one run as the test uses it: the stored record with the tested policy in
    ``policy`` and the policies scored in the same pass in ``policies_scored`` (which may differ
    between candidates and controls, [EM] Def. B.2: the policy under test is what must match)."""
    d = {k: v for k, v in rs.procedure.items() if k != "policies"}
    d["policy"] = rs.policy
    d["policies_scored"] = list(rs.procedure.get("policies", ()))
    if rs.score_kind != "verbatim":
        d["score"] = rs.score_kind  # near-verbatim lower bound: both sides must use the same one
    return d


def store_input_record(rs, role: str) -> dict:
    """Provenance of one run: where it is, its procedure key, and hashes that tie the report to
    the stored scores and to the texts that were scored."""
    scores = Path(rs.store) / "runs" / rs.run_id / "scores.parquet"
    src = rs.inputs.get("passages", rs.inputs.get("document", ""))
    return {"role": role, "path": str(src), "sha256": rs.inputs.get("sha256", ""), "store": rs.store, "run_id": rs.run_id, "label": rs.label,
            "procedure_key": rs.procedure_key, "policy": rs.policy, "windows": len(rs),
            "skipped_short": rs.skipped_short, "scores_sha256": sha256_file(scores), "scored_inputs": rs.inputs}


def run_ids(rs) -> tuple[tuple[str, ...], dict]:
    """Ids for the report and aliases for --exclude-controls. Passages give one window each, so
    the record id names it; sliding windows share a source, so the window id ("doc#i") does."""
    sources = tuple(str(x) for x in rs.sources)
    wids = tuple(str(x) for x in rs.window_ids)
    if len(set(sources)) == len(sources):
        return sources, dict(zip(wids, sources))
    return wids, {}


def run_store_test(*, candidates, controls, alpha, out_dir, exclude_control_ids: Sequence[str] = (),
                   binary: bool | None = None, confidence: float = 0.95, fdr_delta=None, fwer_delta=None,
                   seed: int = 0, budget_delta: float | None = None, realistic_budget: float = 1e5,
                   controls_description: str | None = None, extra_inputs: Sequence[dict] = (),
                   command: str = "test", title: str = "Conformal population test", quiet: bool = False,
                   console=None) -> dict:
    """The population test on two stored runs (:class:`~memclaim.scoring.results.RunScores`).

    Refuses runs scored under different procedures, naming every differing field ([EM] Def.
    B.2, C.2), and the same run as both candidates and controls. Scores are the stored natural-log
    q under the loaded policy; the greedy policy is read as a binary score ([EM] §4)."""
    from ..claims.procedure import STORED_PROCEDURE_MAY_DIFFER, require_same_procedure

    if candidates.store == controls.store and candidates.run_id == controls.run_id:
        raise InputError(f"the candidates and the controls are the same run {candidates.run_id} "
                         f"({candidates.label!r}) of {candidates.store!r}",
                         hint="pass the controls' run with --controls-run (a run id prefix or its label)")
    digest = candidates.inputs.get("sha256")
    if digest and digest == controls.inputs.get("sha256"):
        raise InputError(f"the candidates (run {candidates.run_id}, {candidates.label!r}) and the controls (run "
                         f"{controls.run_id}, {controls.label!r}) were scored from identical inputs (sha256 "
                         f"{digest[:16]}): a set tested against itself certifies nothing",
                         hint="score the matched non-member controls and pass that run as the controls")
    cproc, kproc = stored_test_procedure(candidates), stored_test_procedure(controls)
    require_same_procedure(cproc, kproc, ignore=STORED_PROCEDURE_MAY_DIFFER)
    if binary is not None and bool(binary) != candidates.is_binary:
        raise InputError(f"--{'' if binary else 'no-'}binary disagrees with the stored policy {candidates.policy!r}",
                         hint="drop --binary/--no-binary: a store knows whether its policy is greedy")
    cids, _ = run_ids(candidates)
    kids, aliases = run_ids(controls)
    excl = [aliases.get(str(x), str(x)) for x in exclude_control_ids]
    texts = lambda rs: [a + b for a, b in zip(rs.prefix_texts, rs.suffix_texts)]  # noqa: E731
    inputs = [store_input_record(candidates, "candidates"), store_input_record(controls, "controls"),
              *extra_inputs]
    return run_population_test(
        candidate_scores=candidates.logq, control_scores=controls.logq, alpha=alpha, kind="log-prob",
        out_dir=out_dir, candidate_ids=cids, control_ids=kids, candidate_texts=texts(candidates),
        control_texts=texts(controls), candidates_procedure=cproc, controls_procedure=kproc,
        procedure_ignore=STORED_PROCEDURE_MAY_DIFFER, inputs=inputs, exclude_control_ids=excl,
        binary=candidates.is_binary, confidence=confidence, fdr_delta=fdr_delta, fwer_delta=fwer_delta, seed=seed,
        budget_delta=budget_delta, realistic_budget=realistic_budget, controls_description=controls_description,
        command=command, title=title, quiet=quiet, console=console)


# ------------------------------------------------------------------------ the command
EXAMPLES = """
Examples (run from a checkout of the repository; the first two need SmolLM2, see DEVELOPERS.md):

\b
  # score KJV verses (members) and newly written verses (controls) into one store, then test
  memclaim score smollm2 --input tests/data/kjv_verses.jsonl --prefix-tokens 16 \\
      --suffix-tokens 16 --policy top-k:40 --policy full --out runs/verses
  memclaim score smollm2 --input tests/data/new_verses.jsonl --prefix-tokens 16 \\
      --suffix-tokens 16 --policy top-k:40 --policy full --out runs/verses
  memclaim test --candidates runs/verses --run passages:kjv_verses.jsonl \\
      --controls runs/verses --controls-run passages:new_verses.jsonl \\
      --alpha 0.01 --policy top-k:40 --out reports/verses

\b
  # the same runs under the full softmax (no atom at zero), FDR, as JSON; no model needed
  memclaim test --candidates runs/verses --run passages:kjv_verses.jsonl \\
      --controls runs/verses --controls-run passages:new_verses.jsonl \\
      --alpha 0.05 --policy full --fdr 0.1 --out reports/verses-full --json

\b
  # scores from another toolkit: natural-log probabilities, 0.1% target FPR
  memclaim test --candidates members.csv --controls controls.csv --kind log-prob \\
      --alpha 0.001 --policy top-k:40 --out reports/wiki50

\b
  # exclude controls verified as members; show both pools; FDR over the candidates
  memclaim test --candidates m.parquet --controls c.parquet --exclude-controls verified.txt \\
      --fdr 0.05 --out reports/decon

\b
  # greedy match flags (1 = reproduced, 0 = not): one operating point, (m+1)/(N+1)
  memclaim test --candidates m.csv --controls c.csv --kind prob --policy greedy --out reports/greedy
"""


@click.command(name="test", epilog=EXAMPLES, context_settings={"help_option_names": ["-h", "--help"],
                                                                "max_content_width": 100})
@click.option("--candidates", "candidates", required=True, type=click.Path(),
              help="A score store (the --out folder of `memclaim score`), or a CSV/TSV/Parquet file with an id "
                   "and a score column (higher = more memorized).")
@click.option("--controls", "controls", required=True, type=click.Path(),
              help="Matched non-member controls: a store (may be the candidates' store) or a file, like --candidates.")
@click.option("--run", "run", default=None,
              help="Store only: the candidates' run (id prefix or label); needed when the store holds several runs.")
@click.option("--controls-run", "controls_run", default=None, help="Store only: the controls' run (id prefix or label).")
@click.option("--kind", default=None, type=click.Choice(["log-prob", "prob", "score"]),
              help="Files only (default log-prob): log-prob: natural-log probabilities (-inf = 0); prob: "
                   "probabilities; score: any real score. A store always holds natural-log probabilities.")
@click.option("--alpha", default="0.001", show_default=True, help="Target FPR in (0, 1); read exactly ('0.001', '0.1%', '1/1000').")
@click.option("--near-verbatim", "nv_eps", type=int, default=None,
              help="Store: test the certified near-verbatim lower bound at this token edit distance (scored with "
                   "`memclaim score --near-verbatim EPS`) instead of the verbatim score.")
@click.option("--policy", default=None,
              help="Store: the stored policy to test (needed when several were scored). Files: the policy the scores "
                   "were computed under (recorded); 'greedy' means binary scores.")
@click.option("--binary/--no-binary", default=None, help="Force binary (greedy) reading of the scores; default: detect.")
@click.option("--id-column", default=None, help="Files only.")
@click.option("--score-column", default=None, help="Files only.")
@click.option("--text-column", default=None, help="Files only: text column (checks controls identical to candidates).")
@claim_options
@click.option("--candidates-procedure", type=click.Path(dir_okay=False), default=None,
              help="Files only: JSON procedure record of the candidate scores (checked against the controls').")
@click.option("--controls-procedure", type=click.Path(dir_okay=False), default=None, help="Files only.")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Report folder.")
@click.option("--json", "as_json", is_flag=True, help="Print a machine-readable summary.")
def command(candidates, controls, run, controls_run, kind, alpha, nv_eps, policy, binary, id_column, score_column,
            text_column, exclude_file, exclude_ids, fdr, fwer, seed, budget_delta, realistic_budget, confidence,
            controls_description, candidates_procedure, controls_procedure, out_dir, as_json):
    """Conformal population test ([EM] §3, §4, App. C) on two score stores or two score files
    ([EM] App. H.1: the same verify step applies to scores computed elsewhere)."""
    if nv_eps is not None and not (is_store(candidates) and is_store(controls)):
        raise InputError("--near-verbatim selects a stored near-verbatim score; it needs score stores on both sides",
                         hint="score with `memclaim score ... --near-verbatim EPS --out STORE`")
    validate_test_levels(alpha=alpha, fdr=fdr, fwer=fwer, budget_delta=budget_delta, confidence=confidence,
                         realistic_budget=realistic_budget)
    for path, opt in ((candidates, "--candidates"), (controls, "--controls")):
        if not Path(path).exists():
            raise InputError(f"{opt} {str(path)!r} does not exist",
                             hint="pass a score store folder (memclaim score --out) or a CSV/TSV/Parquet score file")
    check_out_dir(out_dir)
    if (candidates_procedure is None) != (controls_procedure is None):
        given, missing = (("--candidates-procedure", "--controls-procedure") if candidates_procedure
                          else ("--controls-procedure", "--candidates-procedure"))
        raise InputError(f"{given} is given but {missing} is not: a procedure recorded for one side only cannot "
                         "be checked against the other, and a conformal claim holds only when both were scored "
                         "under the same procedure ([EM] Def. B.2, C.2)",
                         hint=f"pass {missing} too (the JSON procedure record of those scores), or neither")
    excl = list(exclude_ids)
    if exclude_file:
        excl += list(read_id_list(exclude_file))
    extra_inputs = []
    if exclude_file:
        extra_inputs.append({"role": "excluded control ids", "path": str(exclude_file),
                             "sha256": sha256_bytes(Path(exclude_file).read_bytes())})
    if is_store(candidates) != is_store(controls):
        raise InputError("--candidates and --controls must both be score stores or both be score files "
                         f"(got a {'store' if is_store(candidates) else 'file'} and a "
                         f"{'store' if is_store(controls) else 'file'})",
                         hint="score both with `memclaim score` under one procedure, or export both to CSV/Parquet")
    if is_store(candidates):
        file_only = {"--kind": kind not in (None, "log-prob"), "--id-column": id_column, "--score-column": score_column,
                     "--text-column": text_column, "--candidates-procedure": candidates_procedure,
                     "--controls-procedure": controls_procedure}
        bad = [k for k, v in file_only.items() if v]
        if bad:
            raise InputError(f"{', '.join(bad)} appl{'y' if len(bad) > 1 else 'ies'} to score files, not to stores",
                             hint="a store records natural-log probabilities, ids, texts and the procedure itself")
        cand = load_store_run(candidates, run=run, policy=policy, role="candidates", run_option="--run",
                              near_verbatim=nv_eps)
        ctrl = load_store_run(controls, run=controls_run, policy=policy, role="controls", run_option="--controls-run",
                              near_verbatim=nv_eps)
        summary = run_store_test(
            candidates=cand, controls=ctrl, alpha=alpha, out_dir=out_dir, exclude_control_ids=excl, binary=binary,
            confidence=confidence, fdr_delta=fdr, fwer_delta=fwer, seed=seed, budget_delta=budget_delta,
            realistic_budget=realistic_budget, controls_description=controls_description,
            extra_inputs=extra_inputs, quiet=as_json)
        if as_json:
            from ..jsonutil import dumps

            click.echo(dumps(summary, indent=1))
        return
    if run is not None or controls_run is not None:
        raise InputError("--run and --controls-run select runs of a score store; the scores given are files",
                         hint="drop --run/--controls-run, or pass store folders")
    kind = kind or "log-prob"
    if Path(candidates).resolve() == Path(controls).resolve():
        raise InputError(f"--candidates and --controls are the same file {str(candidates)!r}: a set tested against "
                         "itself certifies nothing",
                         hint="pass the matched non-member controls' scores with --controls")
    cand = read_score_file(candidates, id_column=id_column, score_column=score_column, text_column=text_column)
    ctrl = read_score_file(controls, id_column=id_column, score_column=score_column, text_column=text_column)
    if cand.sha256 == ctrl.sha256:
        raise InputError(f"--candidates {str(candidates)!r} and --controls {str(controls)!r} have identical contents "
                         f"(sha256 {cand.sha256[:16]}): a set tested against itself certifies nothing",
                         hint="pass the matched non-member controls' scores with --controls")
    cproc = read_json_object(candidates_procedure, "procedure") if candidates_procedure else None
    kproc = read_json_object(controls_procedure, "procedure") if controls_procedure else None
    if policy is not None:
        from ..decoding import Policy

        pol = Policy.parse(policy)
        if binary is None and pol.is_binary:
            binary = True
        for pr in (cproc, kproc):
            if pr is not None and "policy" in pr and pr["policy"] not in (pol.spec, policy):
                raise InputError(f"--policy {policy!r} disagrees with the procedure file's policy {pr['policy']!r}",
                                 hint="drop --policy or fix the procedure record")
        if cproc is None and kproc is None:
            cproc = {"policy": pol.spec, "score_kind": kind, "source": "external score files"}
    elif cproc is None and kproc is None:
        cproc = {"policy": "unrecorded", "score_kind": kind, "source": "external score files"}
    inputs = [cand.input_record("candidates"), ctrl.input_record("controls"), *extra_inputs]
    summary = run_population_test(
        candidate_scores=cand.scores, control_scores=ctrl.scores, alpha=alpha, kind=kind, out_dir=out_dir,
        candidate_ids=cand.ids, control_ids=ctrl.ids, candidate_texts=cand.texts, control_texts=ctrl.texts,
        candidates_procedure=cproc, controls_procedure=kproc, inputs=inputs, exclude_control_ids=excl,
        binary=binary, confidence=confidence, fdr_delta=fdr, fwer_delta=fwer, seed=seed, budget_delta=budget_delta,
        realistic_budget=realistic_budget, controls_description=controls_description, quiet=as_json)
    if as_json:
        from ..jsonutil import dumps

        click.echo(dumps(summary, indent=1))
