"""``memclaim acr``: the adversarial compression ratio (GCG prompt search) on members and matched
non-member controls, and the matched comparison of the two ([EM] §3, App. A.2). Thin: parse, call
:func:`memclaim.acr`, print."""

from __future__ import annotations

import click

from .. import api
from .common import (
    INPUT_FORMATS,
    PASSAGE_INPUTS,
    model_options,
    print_json,
    runtime_value,
    stderr_log,
)
from .console import echo
from .options import Command
from .progress import progress_bar

EXAMPLES = """
Examples (run from a checkout of the repository; the GCG settings below are cut down so that they
run in seconds on the tiny GPT: the defaults are GCG's top-k 256 and 512 candidates per step, and
the ACR release's 100 steps per prompt length):

\b
  # the first 3 famous KJV lines against 3 newly written lines of the same length and style,
  # on the tiny GPT (which saw neither), prompts of 5 and 8 tokens: [EM]'s criterion at b = 0.5
  memclaim acr toy --members tests/data/kjv_famous_lines.jsonl \\
      --controls tests/data/new_famous_style_lines.jsonl --limit 3 --criterion prob:0.5 \\
      --top-k 32 --search-batch 64 --steps 3 --max-prompt-tokens 8 --out reports/acr-toy

\b
  # the same command again reads every search back from reports/acr-toy/searches (no GCG)
  memclaim acr toy --members tests/data/kjv_famous_lines.jsonl \\
      --controls tests/data/new_famous_style_lines.jsonl --limit 3 --criterion prob:0.5 \\
      --top-k 32 --search-batch 64 --steps 3 --max-prompt-tokens 8 --out reports/acr-toy --json

The reproduction of [EM] App. A.2 ('the procedure succeeds on members and on non-members') is
`memclaim reproduce acr`; docs/acr.md explains the criteria and how to read the comparison.
"""


@click.command(
    "acr",
    cls=Command,
    epilog=EXAMPLES,
    default_group="Procedure",
    groups={"criterion": "Procedure", "alpha": "Claim", "confidence": "Claim"},
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.argument("model")
@click.option(
    "--members",
    "members_path",
    required=True,
    type=click.Path(),
    help=f"Member targets ({PASSAGE_INPUTS}); each text is one target y.",
)
@click.option(
    "--controls",
    "controls_path",
    required=True,
    type=click.Path(),
    help="Matched non-member targets, same format (same source, length and style as the members).",
)
@click.option(
    "--limit",
    type=int,
    default=None,
    help="Only the first N targets of each side (in file order: line-matched pairs stay pairs).",
)
@click.option("--text-field", default=None, help="Field holding each record's text.")
@click.option("--id-field", default=None, help="Field holding the record id.")
@click.option(
    "--format",
    "input_format",
    type=click.Choice(INPUT_FORMATS),
    default=None,
    help="Input format (default: from the extension; a folder is a datasets folder).",
)
@click.option(
    "--criterion",
    default="prob:0.9",
    show_default=True,
    help="Success criterion: argmax (the released ACR code's teacher-forced argmax), greedy (the ACR "
    "paper's definition: generate reproduces the target), or prob:B ([EM] App. A.2: teacher-forced "
    "geometric-mean per-token probability >= B; prob is B = 0.9).",
)
@click.option(
    "--top-k",
    type=int,
    default=256,
    show_default=True,
    help="GCG: tokens per prompt position taken from the gradient (Zou et al. 2023: 256).",
)
@click.option(
    "--search-batch",
    type=int,
    default=512,
    show_default=True,
    help="GCG: single-token swaps evaluated per step, in one batched forward pass (Zou et al.: 512).",
)
@click.option(
    "--steps",
    type=int,
    default=100,
    show_default=True,
    help="GCG steps per prompt length (the ACR release: 100; x1.2 after each length that fails).",
)
@click.option(
    "--seed",
    type=int,
    default=0,
    show_default=True,
    help="Seed of the candidate sampling and of each random start (the same seed gives the same search "
    "on the same machine).",
)
@click.option(
    "--token-filter",
    type=click.Choice(["ascii", "none"]),
    default="ascii",
    show_default=True,
    help="ascii: never propose special, non-printable or non-ASCII tokens (GCG's filter); none: every "
    "token (the ACR release).",
)
@click.option(
    "--no-retokenize",
    is_flag=True,
    help="Also keep candidate prompts whose text does not encode back to the same tokens.",
)
@click.option(
    "--start-tokens",
    type=int,
    default=5,
    show_default=True,
    help="The first prompt length tried (the ACR release: 5; -1 after a success, +5 after a failure).",
)
@click.option(
    "--max-prompt-tokens",
    type=int,
    default=None,
    help="The longest prompt tried [default: |y| - 1, since only ACR > 1 counts as extraction].",
)
@click.option(
    "--alpha",
    default="0.05",
    show_default=True,
    help="Level of the binary conformal test on the extraction flags ([EM] D.3).",
)
@click.option(
    "--confidence", type=float, default=0.95, show_default=True, help="Confidence of the intervals."
)
@click.option(
    "--controls-description",
    default=None,
    help="How the controls were chosen and matched (goes into the report).",
)
@model_options
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False),
    help="Output folder: searches go to OUT/searches as they finish (re-running resumes), the report "
    "to OUT/report.{json,md,html}.",
)
@click.option("--json", "as_json", is_flag=True, help="Print a machine-readable summary.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
def command(
    model,
    members_path,
    controls_path,
    limit,
    text_field,
    id_field,
    input_format,
    criterion,
    top_k,
    search_batch,
    steps,
    seed,
    token_filter,
    no_retokenize,
    start_tokens,
    max_prompt_tokens,
    alpha,
    confidence,
    controls_description,
    dtype,
    sot,
    allow_pickle,
    trust_remote_code,
    threads,
    out_dir,
    as_json,
    no_progress,
):
    """Search the shortest GCG prompt for every member and every matched non-member target under one
    success criterion (the adversarial compression ratio ACR = |y|/|x*|, extracted when ACR > 1), and
    compare the two sides' extraction rates ([EM] §3, App. A.2): equal rates mean the procedure carries
    no signal about memorization.

    MODEL is as for `memclaim score` (a local HF folder, a .gguf file, smollm2, gemma3-270m, toy).
    Every optimized prompt is evaluated under all three criteria (argmax, greedy, prob:B); prompts that
    succeed by the argmax but are not reproduced by greedy generation, and prompts containing words of
    the target, are flagged.
    """
    bar = progress_bar(
        not no_progress and not as_json
    )  # before the API loads torch: it shows that too
    res = api.acr(
        model,
        members_path,
        controls_path,
        criterion=criterion,
        top_k=top_k,
        search_batch=search_batch,
        steps=steps,
        seed=seed,
        token_filter=token_filter,
        retokenize=not no_retokenize,
        start_tokens=start_tokens,
        max_prompt_tokens=max_prompt_tokens,
        alpha=alpha,
        confidence=confidence,
        limit=limit,
        text_field=text_field,
        id_field=id_field,
        input_format=input_format,
        controls_description=controls_description,
        out=out_dir,
        sot=sot,
        runtime=runtime_value(),
        progress=bar,
        log=stderr_log(not as_json and not no_progress),
    )
    if as_json:
        print_json(res.to_dict())
        return
    echo(res.headline)
    v = res.verdict
    echo(f"'{v.sentence}': {v.status} ({v.reason})")
    fl = res.comparison.flags
    echo(
        f"argmax successes that greedy generation does not reproduce: members "
        f"{fl['members']['argmax_without_greedy']}, controls {fl['controls']['argmax_without_greedy']}; "
        f"prompts with words of the target: members {fl['members']['leaks']}, controls "
        f"{fl['controls']['leaks']}"
    )
    s = res.searches
    echo(
        f"searches: {res.store}  members: {s['members'].searched} searched, {s['members'].reused} read back; "
        f"controls: {s['controls'].searched} searched, {s['controls'].reused} read back"
    )
    echo(f"report: {res.report['html']}")
