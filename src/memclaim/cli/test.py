"""``memclaim test``: the conformal population test on stored or external scores ([EM] §3, §4, H.1).

SCORES is either a score store (the ``--out`` folder of ``memclaim score``; the procedures of the
two runs must match except for which other policies were scored) or an external CSV/TSV/Parquet
file of scores computed elsewhere. Thin: parse, call :func:`memclaim.test` (which reads the score
sets, runs the claim and writes the report), print a summary.
"""

from __future__ import annotations

import click

from .. import api
from .common import allow_mixed_numerics, claim_options, print_json
from .console import echo
from .options import Command

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
  # scores from another toolkit: CSV files with an id and a natural-log score column
  printf 'id,score\\nm1,-2.0\\nm2,-3.5\\nm3,-1.0\\n' > members.csv
  printf 'id,score\\nc1,-9.0\\nc2,-8.5\\nc3,-7.0\\nc4,-9.5\\nc5,-8.0\\nc6,-6.5\\nc7,-7.7\\nc8,-8.8\\nc9,-9.9\\n' > controls.csv
  memclaim test --candidates members.csv --controls controls.csv --kind log-prob \\
      --alpha 0.1 --policy top-k:40 --out reports/csv

\b
  # exclude a control verified as a member; FDR over the candidates
  printf 'c6\\n' > verified.txt
  memclaim test --candidates members.csv --controls controls.csv --exclude-controls verified.txt \\
      --alpha 0.2 --fdr 0.2 --out reports/decon

\b
  # greedy match flags (1 = reproduced, 0 = not) in a column named 'match': (m+1)/(N+1)
  printf 'id,match\\nm1,1\\nm2,0\\nm3,1\\n' > m.csv
  printf 'id,match\\nc1,0\\nc2,0\\nc3,0\\nc4,1\\nc5,0\\nc6,0\\nc7,0\\nc8,0\\nc9,0\\n' > c.csv
  memclaim test --candidates m.csv --controls c.csv --kind prob --policy greedy \\
      --score-field match --alpha 0.2 --out reports/greedy
"""


@click.command(
    name="test",
    cls=Command,
    epilog=EXAMPLES,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.option(
    "--candidates",
    "candidates",
    required=True,
    type=click.Path(),
    help="A score store (the --out folder of `memclaim score`), or a CSV/TSV/Parquet/Arrow file with an id "
    "and a score column (higher = more memorized).",
)
@click.option(
    "--controls",
    "controls",
    required=True,
    type=click.Path(),
    help="Matched non-member controls: a store (may be the candidates' store) or a file, like --candidates.",
)
@click.option(
    "--run",
    "run",
    default=None,
    help="Store only: the candidates' run (id prefix or label); needed when the store holds several runs.",
)
@click.option(
    "--controls-run",
    "controls_run",
    default=None,
    help="Store only: the controls' run (id prefix or label).",
)
@click.option(
    "--kind",
    default=None,
    type=click.Choice(["log-prob", "prob", "score"]),
    help="Files only (default log-prob): log-prob: natural-log probabilities (-inf = 0); prob: "
    "probabilities; score: any real score. A store always holds natural-log probabilities.",
)
@click.option(
    "--alpha",
    default="0.001",
    show_default=True,
    help="Target FPR in (0, 1); read exactly ('0.001', '0.1%', '1/1000').",
)
@click.option(
    "--near-verbatim",
    "nv_eps",
    type=int,
    default=None,
    help="Store: test the certified near-verbatim lower bound at this token edit distance (scored with "
    "`memclaim score --near-verbatim EPS`) instead of the verbatim score.",
)
@click.option(
    "--policy",
    default=None,
    help="Store: the stored policy to test (needed when several were scored). Files: the policy the scores "
    "were computed under (recorded); 'greedy' means binary scores.",
)
@click.option(
    "--binary/--no-binary",
    default=None,
    help="Force binary (greedy) reading of the scores; default: detect.",
)
@click.option(
    "--id-field",
    "id_field",
    default=None,
    help="Files only: the id column (default: the first of id, doc_id, uid, key, name).",
)
@click.option(
    "--score-field",
    "score_field",
    default=None,
    help="Files only: the score column (default: the first of score, log_prob, logq, prob, ...).",
)
@click.option(
    "--text-field",
    "text_field",
    default=None,
    help="Files only: the text column (checks controls identical to candidates).",
)
@claim_options
@click.option(
    "--candidates-procedure",
    type=click.Path(dir_okay=False),
    default=None,
    help="Files only: JSON procedure record of the candidate scores (checked against the controls').",
)
@click.option(
    "--controls-procedure",
    type=click.Path(dir_okay=False),
    default=None,
    help="Files only: JSON procedure record of the control scores.",
)
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False),
    help="Report folder: report.{json,md,html}.",
)
@click.option("--json", "as_json", is_flag=True, help="Print a machine-readable summary.")
def command(
    candidates,
    controls,
    run,
    controls_run,
    kind,
    alpha,
    nv_eps,
    policy,
    binary,
    id_field,
    score_field,
    text_field,
    exclude_file,
    exclude_ids,
    fdr,
    fwer,
    seed,
    budget_delta,
    realistic_budget,
    confidence,
    controls_description,
    candidates_procedure,
    controls_procedure,
    out_dir,
    as_json,
):
    """Conformal population test ([EM] §3, §4, App. C) on two score stores or two score files
    ([EM] App. H.1: the same verify step applies to scores computed elsewhere)."""
    res = api.test(
        candidates,
        controls,
        alpha=alpha,
        policies=policy,
        run=run,
        controls_run=controls_run,
        near_verbatim=nv_eps,
        kind=kind,
        binary=binary,
        id_field=id_field,
        score_field=score_field,
        text_field=text_field,
        candidates_procedure=candidates_procedure,
        controls_procedure=controls_procedure,
        exclude_controls=exclude_file,
        exclude_control_ids=exclude_ids,
        fdr=fdr,
        fwer=fwer,
        seed=seed,
        budget_delta=budget_delta,
        realistic_budget=realistic_budget,
        confidence=confidence,
        controls_description=controls_description,
        out=out_dir,
        allow_mixed_numerics=allow_mixed_numerics(),
    )
    if as_json:
        print_json(res.to_dict())
        return
    print_claim(res)


def print_claim(res) -> None:
    """The headline, the contamination warning if any, and where the report is, each word-wrapped
    at the console's width."""
    echo(res.headline)
    if res.limited is not None:
        echo("note: " + res.limited)
    if res.warning is not None:
        echo("warning: " + res.warning)
    echo(f"report: {res.report['html']}")
