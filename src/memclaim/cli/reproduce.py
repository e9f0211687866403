"""`memclaim reproduce NAME`: regenerate the numbers and plot of one figure of [MX] §8 or of [EM]
§3-§6 and App. D.2."""

from __future__ import annotations

import sys

import click

from .. import api
from ..api import REPRODUCTIONS, InputError, dumps
from .console import echo_indented
from .options import Command
from .progress import quiet_library_bars

EXAMPLES = """
\b
Examples (--quick: small Monte-Carlo sizes, seconds; drop it for the paper's sizes, minutes):
  memclaim reproduce --list
  memclaim reproduce staircase --quick
  memclaim reproduce entropy-sweep --quick --out figs --seed 7
  memclaim reproduce per-instance --quick --json > per-instance.json
"""


def _names() -> list[str]:
    return list(REPRODUCTIONS)


@click.command(
    "reproduce",
    cls=Command,
    groups={"seed": "Procedure"},
    epilog=EXAMPLES,
    context_settings={"max_content_width": 100},
)
@click.argument("name", required=False)
@click.option("--quick", is_flag=True, help="Smaller Monte-Carlo sizes (seconds; what CI runs).")
@click.option(
    "--out",
    "out_dir",
    default="reproductions",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Folder for NAME.json and NAME.png (created).",
)
@click.option(
    "--seed",
    type=int,
    default=0,
    show_default=True,
    help="Master seed; the same seed gives the same JSON bit for bit.",
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print the full result as JSON instead of the summary."
)
@click.option(
    "--list", "list_only", is_flag=True, help="List the available reproductions and exit."
)
def command(name, quick, out_dir, seed, as_json, list_only):
    """Regenerate a figure or table of [MX] §8 (the staircase, entropy sweep, camouflage and trigger
    separations, DP calibration, audits, unlearning) or of [EM] §3-§6 and App. D.2 (parrot, greedy,
    alpha sweep, naive vs calibrated, book census, budget coverage, decontamination): writes NAME.json
    (every number, seeds, versions, our numbers beside the paper's, and the checks of the theory's
    predictions, each quoting the sentence it tests), NAME.png and NAME.pdf, and the report NAME.md
    and NAME.html, and prints our numbers beside the paper's (no verdict: agreement with the paper is
    judged by the test suite, with the tolerances and their reasons stated there). The [EM]
    reproductions also say what differs from the paper and judge each of its sentences on this run:
    held, not held, or not testable here (with the reason).

    NAME is one of the reproductions listed by --list. Exit status 1 if a check fails (a sentence that
    does not hold is a finding and leaves it 0).
    """
    if list_only:
        width = max(
            map(len, REPRODUCTIONS)
        )  # the longest name sets the column ("naive-vs-calibrated")
        for n, (_, desc) in REPRODUCTIONS.items():
            click.echo(f"{n:{width}s}  {desc}")
        return
    if not name:
        raise InputError(
            "missing NAME", hint="one of: " + ", ".join(REPRODUCTIONS) + " (or --list)"
        )
    quiet_library_bars()  # the summary is the output: no "Loading weights" bars from transformers on stderr
    run = api.reproduce(name, quick=quick, seed=seed, out_dir=out_dir)
    if as_json:
        sys.stdout.write(dumps(run.to_dict(), indent=2) + "\n")
    else:
        echo_indented([*run.summary_lines(), f"  output folder: {out_dir}"])
    if not run.all_checks_passed:
        raise click.exceptions.Exit(1)
