"""``memclaim census``: a single-document census against a matched control document ([EM] §5,
App. E). Thin: parse, call :func:`memclaim.census` (sliding windows of every document and
control scored into one store, labels ``document`` and ``control``; decontamination, tau_doc,
coverage, heatmap, budget views, report), print.

Every option is checked and every document is read and cut into windows before the model is
loaded, so bad input (a document shorter than one window, a span outside the control, a
quotation that is not in the control) fails at once with exit status 2 and leaves nothing
behind. Re-running the same command reuses the stored scores (no model work).

Exclusions (``--exclude-spans FILE``) remove *verified* quotations of earlier text from the
control before tau_doc is set ([EM] §5, E.1); the in-training document is never culled. The
file's format: :mod:`memclaim.text.spans`.
"""

from __future__ import annotations

import click

from .. import api
from ..api import InputError
from .common import (
    allow_mixed_numerics,
    backend_options,
    model_options,
    near_verbatim_options,
    numerics_option,
    print_json,
    procedure_options,
    procedure_value,
    run_options,
    runtime_value,
    stderr_log,
)
from .console import echo
from .options import Command
from .progress import progress_bar

EXAMPLES = """
Examples (run from a checkout of the repository):

\b
  # Genesis 1-3 (KJV) against newly written prose in the same style, on SmolLM2; stride =
  # suffix length, so the suffixes tile the text. Full softmax: under top-k:40 every window
  # of the new prose (invented names) scores 0 for this small model, leaving no threshold
  memclaim census smollm2 --document tests/data/genesis_1_3.txt \\
      --control tests/data/new_genesis_style.txt --prefix-tokens 32 --suffix-tokens 32 \\
      --stride 32 --policy full --out reports/genesis

\b
  # exclude a quotation a person verified in the control (here one phrase, for illustration)
  # and flag control windows found near-verbatim in a reference text; JSON summary
  printf 'text: and the grass was burned like stubble\\n' > spans.txt
  memclaim census smollm2 --document tests/data/genesis_1_3.txt \\
      --control tests/data/new_genesis_style.txt --prefix-tokens 32 --suffix-tokens 32 \\
      --stride 32 --policy full --exclude-spans spans.txt \\
      --reference-corpus tests/data/genesis_1_3.txt --out reports/genesis-dense --json

\b
  # several document pairs read at the most conservative (global) threshold ([EM] §7);
  # --pair DOC CTRL is repeatable (equivalently: --document A --control A2 --document B ...)
  memclaim census smollm2 --pair tests/data/genesis_1_3.txt tests/data/new_genesis_style.txt \\
      --pair tests/data/new_genesis_style.txt tests/data/genesis_1_3.txt \\
      --prefix-tokens 32 --suffix-tokens 32 --stride 64 --policy full --global --out reports/global
"""


# ------------------------------------------------------------------------------ the command
@click.command(
    "census",
    cls=Command,
    epilog=EXAMPLES,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.argument("model")
@click.option(
    "--document",
    "documents",
    multiple=True,
    type=click.Path(dir_okay=False),
    help="The candidate document (a text file). Repeatable, paired in order with --control.",
)
@click.option(
    "--control",
    "controls",
    multiple=True,
    type=click.Path(dir_okay=False),
    help="Its matched control: a document the model cannot have seen, same author/genre/style/length.",
)
@click.option(
    "--pair",
    "pairs",
    multiple=True,
    type=(click.Path(dir_okay=False), click.Path(dir_okay=False)),
    metavar="DOC CTRL",
    help="A document and its control (repeatable; adds to --document/--control).",
)
@click.option("--stride", type=int, required=True, help="Sliding-window stride in tokens.")
@procedure_options
@model_options
@numerics_option
@near_verbatim_options
@backend_options
@click.option(
    "--exclude-spans",
    "exclude_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="Verified quotations to remove from the control(s) before tau_doc is set ([EM] E.1): lines "
    "'text: QUOTE', 'START END' or 'CONTROL START END' (character offsets, end exclusive).",
)
@click.option(
    "--reference-corpus",
    "references",
    multiple=True,
    type=click.Path(dir_okay=False),
    help="A text file to search for near-verbatim copies of high-scoring control windows (repeatable); "
    "flagged windows are listed for a person to confirm, never removed automatically.",
)
@click.option(
    "--min-similarity",
    default=90.0,
    show_default=True,
    type=float,
    help="rapidfuzz partial_ratio (0-100) at which a control window is flagged.",
)
@click.option(
    "--global",
    "use_global",
    is_flag=True,
    help="Read every document at the most conservative threshold over all pairs ([EM] §7).",
)
@click.option(
    "--budget-delta",
    default=0.05,
    show_default=True,
    type=float,
    help="Budget view at confidence 1 - delta ([EM] §6, Fig. 7).",
)
@click.option(
    "--budget",
    "realistic_budget",
    default=1e5,
    show_default=True,
    type=float,
    help="Realistic query budget n.",
)
@click.option(
    "--controls-description",
    default=None,
    help="How the control was chosen and matched (goes in the report).",
)
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False),
    help="Output folder: the store goes to OUT/store, the report to OUT/report.{json,md,html}.",
)
@run_options
def command(
    model,
    documents,
    controls,
    pairs,
    stride,
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
    exclude_file,
    references,
    min_similarity,
    use_global,
    budget_delta,
    realistic_budget,
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
):
    """Census of each DOCUMENT against its CONTROL ([EM] §5): sliding-window scores for both,
    tau_doc = 10^ceil(log10 of the top decontaminated control score) (Eq. 31), coverage of the
    document by the suffixes of windows scoring above tau_doc (Eq. 9), the coverage curve over
    the margin, a per-character heatmap and the budget view, in OUT/report.{json,md,html}.

    The census uses the first --policy (a probability score; greedy's 0/1 score has no
    threshold to set). The census has no certified false-positive rate: see the report.
    """

    if len(documents) != len(controls):
        raise InputError(
            f"{len(documents)} --document but {len(controls)} --control: they pair up in order",
            hint="give one --control per --document, or use --pair DOC CTRL",
        )
    passage_only = {
        "--text-field": text_field,
        "--prefix-field": prefix_field,
        "--suffix-field": suffix_field,
        "--id-field": id_field,
        "--format": input_format,
    }
    bad = [k for k, v in passage_only.items() if v]
    if bad:
        raise InputError(
            f"{', '.join(bad)} appl{'y' if len(bad) > 1 else 'ies'} to passage files, not to documents",
            hint="a census reads each document as one plain text",
        )
    bar = progress_bar(
        not no_progress and not as_json
    )  # before the API loads torch: it shows that too
    res = api.census(
        model,
        pairs=list(zip(documents, controls)) + [tuple(p) for p in pairs],
        stride=stride,
        limit=limit,
        exclude_spans=exclude_file,
        references=references,
        min_similarity=min_similarity,
        use_global=use_global,
        budget_delta=budget_delta,
        realistic_budget=realistic_budget,
        controls_description=controls_description,
        out=out_dir,
        allow_mixed_numerics=allow_mixed_numerics(),
        procedure=procedure_value("stride"),
        runtime=runtime_value(),
        progress=bar,
        log=stderr_log(not as_json),
    )
    if as_json:
        print_json(res.to_dict())
        return
    for line in res.headlines:
        echo(line)
    if res.limited is not None:
        echo("note: " + res.limited)
    n_flagged = len(res.census.flagged)
    if n_flagged:
        echo(
            f"{n_flagged} control window(s) flagged as near-verbatim copies: confirm them in the report before "
            "excluding them with --exclude-spans"
        )
    echo(f"report: {res.report['html']}")
    if not any(r.units_scored for r in res.runs.values()):
        echo("nothing was scored: every unit was already in the store (no model work done)")
