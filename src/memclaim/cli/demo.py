"""`memclaim demo`: the whole pipeline on the built-in tiny GPT, end to end, in a few minutes.
Thin: the stages compute in the API (``memclaim.api.demo_stages``); this prints them.

Trains (once, then cached) a tiny GPT on a Markov–Zipf corpus with passages planted 1, 4 and 16
times, scores the planted members and held-out controls drawn from the same generator, and
runs each stage: calibrated claims (population test + census), privacy bounds for the planted
canaries and membership-inference audits, one report each, linked from OUT/index.html. Every
step that takes more than a second shows its progress, from the first second on (loading
PyTorch, building the tiny GPT on first use, scoring).
"""

from __future__ import annotations

import click

from .. import api
from ..api import Reporter
from .common import print_json
from .console import echo, say
from .options import Command
from .progress import progress_bar


@click.command("demo", cls=Command)
@click.option(
    "--out",
    "out_dir",
    default="memclaim-demo",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Where the store and reports go (re-running reuses the store).",
)
@click.option(
    "--alpha", default="0.05", show_default=True, help="Target FPR of the population test."
)
@click.option("--json", "as_json", is_flag=True, help="Print a machine-readable summary.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
def command(out_dir, alpha, as_json, no_progress):
    """Run the end-to-end demo on the built-in tiny GPT.

    \b
    Example:
      memclaim demo --out memclaim-demo      # then open memclaim-demo/index.html
    """
    from rich.console import Console

    con = Console(stderr=as_json, highlight=False)
    # the first line within a second of starting; then every step shows its progress
    con.rule("[bold]memclaim demo[/]: the tiny GPT")
    bar = progress_bar(not no_progress and not as_json, startup=None)  # its own first step below
    with Reporter(
        bar, stage="start", label="loading PyTorch and transformers", total=None, unit="steps"
    ):
        from rich.markup import escape
        from rich.table import Table

        demo = api.demo_stages  # the stages import torch and transformers (the first step)

    out = demo.check_demo_options(
        out=out_dir, alpha=alpha
    )  # a bad --alpha fails before any scoring
    log = lambda line: say(con, line)
    scored = demo.demo_scoring(out, progress=bar, log=log)
    runs, store = scored["runs"], scored["store"]
    con.print(
        f"scored into {escape(str(store))} ({sum(r.units_scored for r in runs.values())} units computed, "
        f"{sum(r.units_reused for r in runs.values())} reused from an earlier run)"
    )
    t = Table(
        title=f"Teacher-forced scores, {demo.PREFIX}-token prefix, {demo.SUFFIX}-token suffix",
        title_justify="left",
    )
    for col in ("set", "n", "median log10 q (top-k:40)", "share q > 0 (top-k:40)", "greedy match"):
        t.add_column(col)
    for name, row in scored["scoring"].items():
        k = name.split("=")[-1]
        label = (
            "held-out controls"
            if name == "controls"
            else f"members, {k} cop{'y' if k == '1' else 'ies'}"
        )
        t.add_row(
            label,
            str(row["n"]),
            f"{row['median_log10_q']:.1f}",
            f"{row['share_nonzero']:.2f}",
            f"{row['greedy_match']:.2f}",
        )
    con.print(t)

    sections = {}
    con.rule("[bold]Calibrated claims[/] ([EM] §3-§6)")
    con.print(f"policy for the claims: {demo.CLAIM_POLICY} (untruncated softmax)")
    # the stages' own steps report their progress; these say what runs between them (the tests,
    # drawing the figures, writing the reports), so the demo is never silent for long
    with Reporter(
        bar,
        stage="demo",
        label="calibrated claims: the test, the census and their report",
        total=None,
    ):
        sections["claims"] = demo.demo_claims_of(
            scored, out_dir=out / "claims", alpha=alpha, log=log
        )

    con.rule("[bold]Privacy bounds[/] ([MX] §4-§5)")
    # the caps and canary tables are in the privacy report; the console gets one line per canary
    with Reporter(bar, stage="demo", label="privacy bounds and their report", total=None):
        sections["privacy"] = demo.demo_privacy(scored, out_dir=out / "privacy", log=log)

    con.rule("[bold]Membership-inference audits[/] ([MX] §8.2)")
    copies = scored["copies"]
    strong = [r for r in scored["members"] if r["copies"] == max(copies.values())]
    with Reporter(bar, stage="demo", label="membership-inference audit and its report", total=None):
        sections["audits"] = a = demo.demo_audits(
            model=scored["model"],
            members=strong,
            nonmembers=scored["controls"],
            out_dir=out / "audits",
            progress=bar,
        )
    print_audit_section(a, con)

    con.rule("[bold]Reports[/]")
    finished = demo.demo_finish(out, sections)
    echo(
        f"open {finished['index']}: it links the {len(finished['reports'])} reports "
        f"({', '.join(finished['reports'].values())})",
        stderr=as_json,
    )
    echo(f"next, on your own model: {finished['next']}", stderr=as_json)
    summary = {
        "scoring": scored["scoring"],
        "store": str(store),
        "runs": {k: v.to_dict() for k, v in runs.items()},
        "sections": sections,
        "index": finished["index"],
        "next": finished["next"],
    }
    if as_json:
        print_json(summary)


def print_audit_section(a: dict, con) -> None:
    """The audit section on the console: the attacks table, the headline, the verifier, the report."""
    from rich.table import Table

    t = Table(
        title="Membership-inference audit (planted members vs held-out controls)",
        title_justify="left",
    )
    for col in ("attack", "AUC [95% CI]", "leak signal", "TPR at certified FPR"):
        t.add_column(col)
    for name, e in a["attacks"].items():
        tp = (
            "-" if e["tpr"] is None else f"{e['tpr']['tpr']:.2f} at {e['tpr']['certified_fpr']:.3g}"
        )
        t.add_row(
            name, f"{e['auc']:.3f} [{e['low']:.3f}, {e['high']:.3f}]", f"{e['leak_signal']:.2f}", tp
        )
    say(con, t)
    say(con, a["headline"])
    if a["tpr_note"]:
        say(con, a["tpr_note"])
    say(con, a["verifier"]["reading"])
    say(con, f"audit report: {a['report']['html']}")
