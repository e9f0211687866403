"""``memclaim budget``: query budgets for a per-query probability p ([EM] §6, Eqs. 10, 34)."""

from __future__ import annotations

import click

from .. import api
from .common import print_json
from .options import Command

EXAMPLES = """
Examples:

\b
  memclaim budget --p 1e-6                       # queries to see it once w.p. 95%
  memclaim budget --log10-p -27 --delta 0.01     # p = 1e-27: n is about 4.6e27
  memclaim budget --p 2.5e-5 --n 100000 --json   # and P[at least once in 1e5 queries]
  memclaim budget --log10-p -400 --log10-n 400   # budgets beyond 1e308, from log10 n
"""


@click.command(
    name="budget",
    cls=Command,
    default_group="Inputs",
    groups={"delta": "Claim"},
    epilog=EXAMPLES,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.option("--p", "p", default=None, help="Per-query probability p in [0, 1].")
@click.option(
    "--log10-p",
    "log10_p",
    default=None,
    help="log10 of p (for p below 1e-308, or for convenience).",
)
@click.option(
    "--n", "n", default=None, type=float, help="A query budget n: report P[at least once in n]."
)
@click.option(
    "--log10-n",
    "log10_n",
    default=None,
    type=float,
    help="The budget as log10 n (for budgets beyond 1e308).",
)
@click.option(
    "--delta", default=0.05, show_default=True, type=float, help="1 - confidence for n_delta."
)
@click.option(
    "--out",
    "out_dir",
    default=None,
    type=click.Path(file_okay=False),
    help="Also write report.{json,md,html}.",
)
@click.option("--json", "as_json", is_flag=True, help="Print a machine-readable summary.")
def command(p, log10_p, n, log10_n, delta, out_dir, as_json):
    """P[at least once in n] = 1 - (1-p)^n and n_delta = ceil(log delta / log(1-p)), stably from log p."""
    res = api.budget(p=p, log10_p=log10_p, delta=delta, n=n, log10_n=log10_n, out=out_dir)
    if as_json:
        print_json(res.to_dict())
        return
    click.echo(res.statement)
    if res.at_n is not None:
        a = res.at_n
        click.echo(
            f"P[at least once in n = {a['n_text']}] = {a['text']}"
            + ("  (extractable at this confidence)" if a["extractable"] else "")
        )
    if out_dir is not None:
        click.echo(f"report: {res.report['html']}")
