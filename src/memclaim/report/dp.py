"""The report of the differential-privacy bounds ([MX] §3-5, App. F.2): every memorization cap
and extraction quantity of one guarantee, each with its neighbouring relation, functional and
reference, and the canary audit's soundness check when one was given."""

from __future__ import annotations

from ..privacy.tradeoff import neighbors_label
from .core import Doc, ReportBundle, fmt_num, render

__all__ = ["DP_STATEMENTS", "dp_bounds_report"]

DP_STATEMENTS = [
    "Every number names the neighbouring relation its guarantee was proved for (replace-one or add/remove); "
    "memorization caps name the counterfactual functional they bound (RO, LOO; COND needs [MX] Prop. A.2's "
    "slack) ([MX] App. A).",
    "A DP guarantee caps what any extraction procedure can achieve beyond the prior's baseline; it says "
    "nothing about a target planted more often than the copies stated ([MX] Cor. 4.3).",
    "Rows from a DP-SGD trade-off curve are never above the true curve (a certified lower bound, pessimistic "
    "privacy-loss distribution); rows of the (eps, delta) route are valid and looser.",
]


def _value(v) -> str:
    if v is None:
        return "not implied"
    if isinstance(v, str):
        return v
    return fmt_num(v)


def dp_bounds_report(result: dict, *, command: str = "dp bounds") -> ReportBundle:
    """report.{json,md,html} of ``memclaim dp bounds`` from its JSON summary (nothing written).

    >>> import memclaim as mc
    >>> from memclaim.report.dp import dp_bounds_report
    >>> r = mc.dp_bounds(neighbors="add-remove", epsilon=1.0, list_size=4, risk=0.1)  # doctest: +SKIP
    >>> dp_bounds_report(r.to_dict()).markdown.splitlines()[0]  # doctest: +SKIP
    '# Differential-privacy bounds on memorization and extraction'
    """
    doc = Doc("Differential-privacy bounds on memorization and extraction")
    rel = neighbors_label(result["neighbors"])
    # the guarantee's description names its relation already; say it once, in words
    doc.callout(
        f"Guarantee: {result['guarantee']}"
        + ("" if rel in result["guarantee"] else f" [{rel}]")
        + (
            f"; target planted {result['copies']} times (k-fold group curve, [MX] Cor. 4.3)"
            if result.get("copies", 1) > 1
            else ""
        ),
        "result",
    )  # the guarantee assumed, not a claim
    if result.get("guarantee_note"):
        doc.p(result["guarantee_note"] + ".")
    doc.table(
        ["quantity", "value", "relation", "functional", "reference", "note"],
        [
            (
                r["name"],
                _value(r["value"]),
                r["relation"],
                r["functional"],
                r["reference"],
                r["note"],
            )
            for r in result["rows"]
        ],
    )
    if result.get("baseline_interval"):
        lo, hi = result["baseline_interval"]
        doc.p(
            f"The baseline is a certified interval [{fmt_num(lo)}, {fmt_num(hi)}]; the bounds use its upper end."
        )
    if result.get("audit"):
        a = result["audit"]
        doc.h2("Audit soundness ([MX] Cor. 5.3)")
        doc.table(
            ["quantity", "value"],
            [
                ("claimed guarantee", a["claimed"]),
                ("relation", neighbors_label(a["neighbors"])),
                ("list size m", a["m"]),
                (
                    "baseline kappa [lo, hi]",
                    f"[{fmt_num(a['kappa_lo'])}, {fmt_num(a['kappa_hi'])}]",
                ),
                ("successes / trials", f"{a['successes']} / {a['trials']}"),
                (
                    f"success lower bound ({a['confidence']:.0%}, Clopper-Pearson)",
                    _value(a["success_lower"]),
                ),
                ("bound", _value(a["bound"])),
                ("refuted", "yes" if a["refuted"] else "no"),
                ("verdict", a["verdict"]),
            ],
        )
    doc.h2("What this does and does not mean")
    doc.bullets(DP_STATEMENTS)
    return render(
        doc, command=command, procedure=None, inputs=(), results=result, statements=DP_STATEMENTS
    )
