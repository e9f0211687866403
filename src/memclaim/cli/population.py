"""``memclaim population``: score members and controls into one store, run the conformal test,
write the report ([EM] §3, §4). Thin: parse, call :func:`memclaim.population` (two scoring runs,
labels ``members`` and ``controls``, then the test on the two runs), print.

Everything the model computes goes to ``OUT/store`` (resumable: re-running the same command
does no model work), the report to ``OUT/report.{json,md,html}``. Every option is checked, and
both inputs are read and cut into windows, before the model is loaded, so bad input fails at
once with exit status 2 and leaves nothing behind.
"""

from __future__ import annotations

import click

from .. import api
from .common import (
    PASSAGE_INPUTS,
    allow_mixed_numerics,
    backend_options,
    claim_options,
    model_options,
    near_verbatim_options,
    print_json,
    procedure_options,
    procedure_value,
    run_options,
    runtime_value,
    stats_option,
    stderr_log,
)
from .console import echo
from .options import Command
from .progress import progress_bar
from .test import print_claim

EXAMPLES = """
Examples (run from a checkout of the repository):

\b
  # KJV verses (members) against newly written verse-like sentences (controls) on SmolLM2;
  # 16-token prefix and suffix, top-k 40 (the full softmax scored in the same pass), 1% FPR
  memclaim population smollm2 --members tests/data/kjv_verses.jsonl \\
      --controls tests/data/new_verses.jsonl --prefix-tokens 16 --suffix-tokens 16 \\
      --policy top-k:40 --policy full --alpha 0.01 --out reports/verses

\b
  # the test uses the first --policy; test the other one from the store, without the model
  memclaim test --candidates reports/verses/store --run members \\
      --controls reports/verses/store --controls-run controls --policy full \\
      --alpha 0.05 --out reports/verses-full

\b
  # FDR, the budget view and a JSON summary; the same command again reuses the stored scores
  memclaim population smollm2 --members tests/data/kjv_verses.jsonl \\
      --controls tests/data/new_verses.jsonl --prefix-tokens 16 --suffix-tokens 16 \\
      --policy top-k:40 --policy full --alpha 0.01 --fdr 0.1 --budget-delta 0.05 \\
      --out reports/verses --json

\b
  # members and controls as CSV with 'id' and 'text' columns; the built-in tiny GPT, which never
  # saw the KJV, under the full softmax (under top-k:40 its controls all score 0); one control
  # excluded as verified
  python -c "import pandas as pd; pd.read_json('tests/data/kjv_verses.jsonl', lines=True).to_csv('members.csv', index=False)"
  python -c "import pandas as pd; pd.read_json('tests/data/new_verses.jsonl', lines=True).to_csv('controls.csv', index=False)"
  memclaim population toy --members members.csv --controls controls.csv --prefix-tokens 16 \\
      --suffix-tokens 16 --policy full --alpha 0.05 --exclude-control new-007 --out reports/mine
"""


@click.command(
    "population",
    cls=Command,
    epilog=EXAMPLES,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.argument("model")
@click.option(
    "--members",
    "members_path",
    required=True,
    type=click.Path(),
    help=f"Candidate passages ({PASSAGE_INPUTS}; one text per record, optional id).",
)
@click.option(
    "--controls",
    "controls_path",
    required=True,
    type=click.Path(),
    help="Matched non-member controls, same format (same source, length and style as the members).",
)
@procedure_options
@model_options
@near_verbatim_options
@backend_options
@click.option(
    "--alpha",
    default="0.001",
    show_default=True,
    help="Target FPR in (0, 1); read exactly ('0.001', '0.1%', '1/1000').",
)
@claim_options
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False),
    help="Output folder: the store goes to OUT/store, the report to OUT/report.{json,md,html}.",
)
@run_options
@stats_option("census")
def command(
    model,
    members_path,
    controls_path,
    prefix_tokens,
    suffix_tokens,
    policies,
    prompt_templates,
    chat_template,
    aggregate,
    text_field,
    prefix_field,
    suffix_field,
    id_field,
    input_format,
    dtype,
    sot,
    allow_pickle,
    trust_remote_code,
    threads,
    alpha,
    exclude_file,
    exclude_ids,
    fdr,
    fwer,
    seed,
    budget_delta,
    realistic_budget,
    confidence,
    controls_description,
    out_dir,
    limit,
    batch_size,
    unit_size,
    as_json,
    no_progress,
    nv_eps=(),
    nv_beams=(),
    backend="local",
    address=None,
    workers=None,
    gpus_per_worker=0.0,
    threads_per_worker=1,
    stats="census",
):
    """Score MEMBERS and CONTROLS with MODEL under one extraction procedure ([EM] Def. B.2), then
    run the conformal population test ([EM] §3, §4) and write the report.

    MODEL is as for `memclaim score` (local HF folder, .gguf, smollm2, gemma3-270m, toy). The
    test uses the first --policy; every --policy is stored, so `memclaim test` on OUT/store
    tests the others without the model. Re-running the same command reuses the stored scores.
    """
    bar = progress_bar(
        not no_progress and not as_json
    )  # before the API loads torch: it shows that too
    res = api.population(
        model,
        members_path,
        controls_path,
        alpha=alpha,
        text_field=text_field,
        id_field=id_field,
        input_format=input_format,
        limit=limit,
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
        stats=stats,
        procedure=procedure_value(),
        runtime=runtime_value(),
        progress=bar,
        log=stderr_log(not as_json),
    )
    if as_json:
        print_json(res.to_dict())
        return
    print_claim(res)
    runs = res.runs
    work = [
        f"{label}: {r.n_windows} windows ({r.units_scored} units scored, {r.units_reused} reused"
        + (f", {r.skipped_short} too short" if r.skipped_short else "")
        + ")"
        for label, r in runs.items()
    ]
    echo(f"store: {res.store}  " + "; ".join(work))
    if not any(r.units_scored for r in runs.values()):
        echo("nothing was scored: every unit was already in the store (no model work done)")
