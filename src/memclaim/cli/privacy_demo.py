"""The privacy section of `memclaim demo` on the console: rich tables of
:func:`memclaim.privacy.demo.run_demo_section`'s numbers, reached through the API (the library
computes, this prints)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..api import DEMO_EPSILONS, neighbors_label, privacy_demo_section


def print_privacy_section(section: dict, console) -> None:
    """Print the caps table, one table per canary, and the illustrative note."""
    rel = neighbors_label(section["neighbors"])
    t = Table(
        title=escape(
            f"Memorization caps under pure eps-DP [{rel}] ([MX] Thm. 4.1, Prop. A.1, Lemma 4.4)"
        ),
        title_justify="left",
    )
    for col in (
        "epsilon",
        "LOO cap eta(f) = tanh(eps/2)",
        "RO cap eta(f^(2)) = 1 - e^-eps",
        "naive tanh(eps)",
    ):
        t.add_column(col)
    for r in section["caps"]:
        t.add_row(f"{r['epsilon']:g}", f"{r['LOO']:.4f}", f"{r['RO']:.4f}", f"{r['RO_naive']:.4f}")
    console.print(t)
    for c in section["canaries"]:
        k = c["copies"]
        dup = (
            ""
            if k == 1
            else (
                f", planted {k} times: {k}-fold group curve, sufficient only "
                "([MX] Cor. 4.3, remark after Thm. 5.1)"
            )
        )
        tt = Table(
            title=escape(
                f"{c['name']}: H_inf = {c['min_entropy_bits']:.2f} bits, m = {c['m']}, "
                f"tau = {c['tau']:g} [{rel}] ([MX] Thm. 5.1, Cor. 5.3){dup}"
            ),
            title_justify="left",
        )
        for col in (
            "epsilon",
            "H* (bits)" if k == 1 else "H* = k eps log2 e + log2(m/tau)",
            "position",
            "kappa",
            "Ext bound 1 - f(kappa)" if k == 1 else f"Ext bound 1 - f^({k})(kappa)",
        ):
            tt.add_column(col)
        for r in c["by_epsilon"]:
            pos = (
                "above H* (safe at tau)"
                if r["above_h_star"]
                else "below H* (a success may be the prior)"
            )
            tt.add_row(
                f"{r['epsilon']:g}",
                f"{r['h_star_bits']:.4f}",
                pos,
                f"{r['kappa']:.4g} ({r['kappa_source']})",
                f"{r['ext_bound']:.4g}",
            )
        console.print(tt)
    if section["illustrative"]:
        console.print(
            "(illustrative canaries, not measured; pass canaries=[...] for the demo model's own)"
        )


def privacy_section(
    *, canaries: list[dict] | None = None, console=None, epsilons=DEMO_EPSILONS
) -> dict:
    """Compute the section (``memclaim.api.privacy_demo_section``, that is
    :func:`memclaim.privacy.demo.run_demo_section`), print it on ``console`` (a rich Console;
    default: stdout), return its data."""
    section = privacy_demo_section(canaries=canaries, epsilons=epsilons)
    print_privacy_section(section, console if console is not None else Console(highlight=False))
    return section
