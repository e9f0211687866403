"""``memclaim test``: the conformal population test on external score files ([EM] §3, §4, H.1).

Thin: read the two score files, call :func:`run_population_test` (which the store-reading
commands call too, with arrays from the store), print a summary.
"""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Sequence

import click
import numpy as np

from ..errors import InputError
from ..fsutil import sha256_bytes

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
    fields = list(fields)
    if wanted:
        if wanted not in fields:
            raise InputError(f"{str(path)!r} has no {what} column {wanted!r}; columns are {fields}",
                             hint=f"pass --{what}-column with one of {fields}")
        return wanted
    for c in defaults:
        if c in fields:
            return c
    if required:
        raise InputError(f"{str(path)!r}: cannot find a {what} column among {fields}",
                         hint=f"name it one of {list(defaults)} or pass --{what}-column")
    return None


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
        reader = csv.DictReader(io.StringIO(text), dialect="excel-tab" if suffix == ".tsv" else "excel")
        if not reader.fieldnames:
            raise InputError(f"{str(p)!r} has no header row", hint="add a header such as 'id,score'")
        cols = list(reader.fieldnames)
        ic = _pick(cols, id_column, ID_COLUMNS, "id", p)
        sc = _pick(cols, score_column, SCORE_COLUMNS, "score", p)
        tc = _pick(cols, text_column, TEXT_COLUMNS, "text", p, required=bool(text_column))
        rows = list(reader)
        ids = [r.get(ic) for r in rows]
        raw = [r.get(sc) for r in rows]
        texts = [r.get(tc) for r in rows] if tc else None
        where = [f"line {i + 2}" for i in range(len(rows))]
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
    out = []
    for line in p.read_text(encoding="utf-8").splitlines():
        s = line.strip()
        if s and not s.startswith("#"):
            out.append(s)
    return tuple(out)


def _read_json(path, what) -> dict:
    p = Path(path)
    try:
        d = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{what} file {str(p)!r} does not exist") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{what} file {str(p)!r} is not valid JSON: {exc}") from None
    if not isinstance(d, dict):
        raise InputError(f"{what} file {str(p)!r} must hold a JSON object")
    return d


# ------------------------------------------------------------------------ the shared entry point
def _say(console, text: str) -> None:
    if console is None:
        click.echo(text)
    elif hasattr(console, "print"):
        console.print(text, markup=False, highlight=False) if _is_rich(console) else console.print(text)
    elif callable(console):
        console(text)


def _is_rich(console) -> bool:
    return type(console).__module__.startswith("rich")


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
    from ..claims.procedure import check_same_procedure
    from ..report.core import write_report
    from ..report.population import headline, population_report

    procedure = None
    if candidates_procedure is not None and controls_procedure is not None:
        check_same_procedure(candidates_procedure, controls_procedure, ignore=procedure_ignore)
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


# ------------------------------------------------------------------------ the command
EXAMPLES = """
Examples:

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


@click.command(name="test", epilog=EXAMPLES, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--candidates", "candidates", required=True, type=click.Path(dir_okay=False),
              help="CSV/TSV/Parquet with an id and a score column (higher = more memorized).")
@click.option("--controls", "controls", required=True, type=click.Path(dir_okay=False),
              help="Matched non-member controls, same format and same procedure.")
@click.option("--kind", default="log-prob", show_default=True, type=click.Choice(["log-prob", "prob", "score"]),
              help="log-prob: natural-log probabilities (-inf = 0); prob: probabilities; score: any real score.")
@click.option("--alpha", default="0.001", show_default=True, help="Target FPR in (0, 1); read exactly ('0.001', '0.1%', '1/1000').")
@click.option("--policy", default=None, help="Decoding policy the scores were computed under (recorded); 'greedy' means binary scores.")
@click.option("--binary/--no-binary", default=None, help="Force binary (greedy) reading of the scores; default: detect.")
@click.option("--id-column", default=None)
@click.option("--score-column", default=None)
@click.option("--text-column", default=None, help="Optional text column (checks controls identical to candidates).")
@click.option("--exclude-controls", "exclude_file", type=click.Path(dir_okay=False), default=None,
              help="File with control ids verified as members, one per line ([EM] D.2).")
@click.option("--exclude-control", "exclude_ids", multiple=True, help="A control id to exclude (repeatable).")
@click.option("--fdr", "fdr", default=None, help="Benjamini-Hochberg at this FDR level ([EM] C.5).")
@click.option("--fwer", "fwer", default=None, help="Bonferroni at this FWER level ([EM] C.5).")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed for randomized tie-breaking (recorded).")
@click.option("--budget-delta", default=None, type=float, help="Add the budget view at confidence 1 - delta ([EM] F.2).")
@click.option("--budget", "realistic_budget", default=1e5, show_default=True, type=float, help="Realistic query budget n.")
@click.option("--confidence", default=0.95, show_default=True, type=float, help="Confidence of the intervals.")
@click.option("--controls-description", default=None, help="How the controls were chosen and matched (goes in the report).")
@click.option("--candidates-procedure", type=click.Path(dir_okay=False), default=None,
              help="JSON procedure record of the candidate scores (checked against the controls').")
@click.option("--controls-procedure", type=click.Path(dir_okay=False), default=None)
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Report folder.")
@click.option("--json", "as_json", is_flag=True, help="Print a machine-readable summary.")
def command(candidates, controls, kind, alpha, policy, binary, id_column, score_column, text_column, exclude_file,
            exclude_ids, fdr, fwer, seed, budget_delta, realistic_budget, confidence, controls_description,
            candidates_procedure, controls_procedure, out_dir, as_json):
    """Conformal population test on scores computed elsewhere ([EM] §3, App. H.1)."""
    cand = read_score_file(candidates, id_column=id_column, score_column=score_column, text_column=text_column)
    ctrl = read_score_file(controls, id_column=id_column, score_column=score_column, text_column=text_column)
    cproc = _read_json(candidates_procedure, "procedure") if candidates_procedure else None
    kproc = _read_json(controls_procedure, "procedure") if controls_procedure else None
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
    excl = list(exclude_ids)
    if exclude_file:
        excl += list(read_id_list(exclude_file))
    inputs = [cand.input_record("candidates"), ctrl.input_record("controls")]
    if exclude_file:
        inputs.append({"role": "excluded control ids", "path": str(exclude_file),
                       "sha256": sha256_bytes(Path(exclude_file).read_bytes())})
    summary = run_population_test(
        candidate_scores=cand.scores, control_scores=ctrl.scores, alpha=alpha, kind=kind, out_dir=out_dir,
        candidate_ids=cand.ids, control_ids=ctrl.ids, candidate_texts=cand.texts, control_texts=ctrl.texts,
        candidates_procedure=cproc, controls_procedure=kproc, inputs=inputs, exclude_control_ids=excl,
        binary=binary, confidence=confidence, fdr_delta=fdr, fwer_delta=fwer, seed=seed, budget_delta=budget_delta,
        realistic_budget=realistic_budget, controls_description=controls_description, quiet=as_json)
    if as_json:
        from ..jsonutil import dumps

        click.echo(dumps(summary, indent=1))
