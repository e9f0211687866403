"""``memclaim budget``: query budgets for a per-query probability p ([EM] §6, Eqs. 10, 34)."""
from __future__ import annotations

import math

import click

from ..errors import DomainError

EXAMPLES = """
Examples:

\b
  memclaim budget --p 1e-6                       # queries to see it once w.p. 95%
  memclaim budget --log10-p -27 --delta 0.01     # p = 1e-27: n is about 4.6e27
  memclaim budget --p 2.5e-5 --n 100000 --json   # and P[at least once in 1e5 queries]
  memclaim budget --log10-p -400 --log10-n 400   # budgets beyond 1e308, from log10 n
"""


def _n_text(q) -> str:
    from ..report.core import sci_from_log10

    if q.n_int is not None:
        return f"{q.n_int:,}"
    if math.isinf(q.log10_n):
        return "infinite (p = 0: never generated)"
    return f"{sci_from_log10(q.log10_n, 4)} (log10 n = {q.log10_n:.6g})"


def budget_summary(*, log_p: float, delta: float, n: float | None = None, log10_n: float | None = None) -> dict:
    from ..claims.budget import log_prob_at_least_once, queries_needed
    from ..claims.scores import LN10
    from ..report.core import sci_from_log10

    q = queries_needed(log_p=log_p, delta=delta)
    out = {"queries_needed": q.to_dict(), "n_text": _n_text(q),
           "statement": (f"A sequence with per-query probability p = {sci_from_log10(log_p / LN10, 4)} is generated at least once "
                         f"with probability >= {1 - delta:g} within n = {_n_text(q)} independent queries "
                         "([EM] Eq. 34)."), "at_n": None}
    if log_p == -math.inf:
        out["statement"] = "A sequence with per-query probability 0 is never generated, whatever the budget."
    if n is not None and log10_n is not None:
        raise DomainError("give --n or --log10-n, not both")
    if n is not None or log10_n is not None:
        if log10_n is not None:
            lp1 = float(log_prob_at_least_once(log_p=log_p, log_n=float(log10_n) * LN10))  # n may overflow a double
            lg_n = float(log10_n)
        else:
            lp1 = float(log_prob_at_least_once(log_p=log_p, n=n))
            lg_n = math.log10(n)
        prob = math.exp(lp1)
        text = f"{prob:.6g}" if prob >= 1e-300 else "0 (underflow)"
        text += f" (log10 = {lp1 / LN10:.6g})"
        n_f = 10.0 ** lg_n if lg_n < 308 else math.inf
        out["at_n"] = {"n": float(n) if n is not None else n_f, "log10_n": lg_n,
                       "n_text": f"{n:g}" if n is not None else sci_from_log10(lg_n, 4),
                       "log_prob_at_least_once": lp1, "log10_prob_at_least_once": lp1 / LN10,
                       "prob_at_least_once": prob, "text": text,
                       "extractable": lp1 >= math.log1p(-delta)}
    return out


@click.command(name="budget", epilog=EXAMPLES, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--p", "p", default=None, help="Per-query probability p in [0, 1].")
@click.option("--log10-p", "log10_p", default=None, help="log10 of p (for p below 1e-308, or for convenience).")
@click.option("--n", "n", default=None, type=float, help="A query budget n: report P[at least once in n].")
@click.option("--log10-n", "log10_n", default=None, type=float,
              help="The budget as log10 n (for budgets beyond 1e308).")
@click.option("--delta", default=0.05, show_default=True, type=float, help="1 - confidence for n_delta.")
@click.option("--out", "out_dir", default=None, type=click.Path(file_okay=False), help="Also write report.{json,md,html}.")
@click.option("--json", "as_json", is_flag=True, help="Print a machine-readable summary.")
def command(p, log10_p, n, log10_n, delta, out_dir, as_json):
    """P[at least once in n] = 1 - (1-p)^n and n_delta = ceil(log delta / log(1-p)), stably from log p."""
    from ..claims.budget import parse_probability

    def num(name, v):
        if v is None:
            return None
        try:
            return float(v)
        except ValueError:
            raise DomainError(f"{name} must be a number, got {v!r}", hint=f"e.g. {name} 1e-6") from None

    if out_dir is not None:
        from .common import check_out_dir

        check_out_dir(out_dir)
    if not 0 < delta < 1:
        raise DomainError(f"--delta must lie strictly between 0 and 1, got {delta!r}", hint="e.g. --delta 0.05")
    log_p = parse_probability(p=num("--p", p), log10_p=num("--log10-p", log10_p))
    summary = budget_summary(log_p=log_p, delta=delta, n=n, log10_n=log10_n)
    if out_dir is not None:
        from ..report.budget import budget_report
        from ..report.core import write_report

        summary["report"] = write_report(out_dir, budget_report(summary))
    if as_json:
        from ..jsonutil import dumps

        click.echo(dumps(summary, indent=1))
        return
    click.echo(summary["statement"])
    if summary["at_n"] is not None:
        a = summary["at_n"]
        click.echo(f"P[at least once in n = {a['n_text']}] = {a['text']}"
                   + ("  (extractable at this confidence)" if a["extractable"] else ""))
    if out_dir is not None:
        click.echo(f"report: {summary['report']['html']}")
