"""The report of a reproduction (``memclaim reproduce NAME``): NAME.md and NAME.html beside NAME.json.

For each of the paper's sentences the reproduction judges (issue 24 item 2): the sentence as the
paper prints it and where, the test applied (fixed before the run), the numbers it read with their
intervals, and the verdict: held, not held, or not testable here (with the reason). Then the
checks (the theory's predictions and the identities of the implementation; a failed check is a
defect and sets the exit status), our numbers beside the paper's (no verdict: the test suite
holds the tolerances), what differs from the paper, and the notes. Built on the one document model
of :mod:`memclaim.report.core` (every text escaped; numbers by :mod:`memclaim.report.numbers`).
"""

from __future__ import annotations

from typing import Any

from .core import Doc, render_html, render_markdown
from .numbers import num, pct, value

VERDICT_ORDER = ("held", "not held", "not testable here")


def _is_rate_key(key: str) -> bool:
    return any(w in key for w in ("rate", "share_of", "fpr", "coverage", "alpha_n", "difference"))


def number_text(key: str, v: Any) -> str:
    """One recorded number of a verdict for a reader: an estimate with its interval and method
    (``'0.833% [0.0211%, 4.56%] (clopper-pearson, 95%)'``), a count ``k of n``, or the value.
    Rates (keys naming a rate, share, level or coverage) are percentages; ratios of two rates (with
    ``numerator`` and ``denominator``) plain numbers.

    >>> from memclaim.report.reproduction import number_text
    >>> number_text("member_rate", {"count": 1, "n": 120, "rate": 1 / 120, "lower": 0.000211, "upper": 0.0456,
    ...                             "confidence": 0.95, "method": "clopper-pearson"})
    '1 of 120: 0.833% [0.0211%, 4.56%] (clopper-pearson, 95%)'
    >>> number_text("share", {"estimate": 3.315, "lower": 0.392, "upper": 28.0, "confidence": 0.95, "method": "katz log"})
    '3.315 [0.392, 28] (katz log, 95%)'
    """
    if isinstance(v, dict) and "lower" in v and "upper" in v and ("estimate" in v or "rate" in v):
        est = v.get("rate", v.get("estimate"))
        ratio = "numerator" in v  # a ratio of two rates (Katz): a plain number, not a percentage
        f = pct if ("rate" in v or (_is_rate_key(key) and not ratio)) else num
        head = f"{v['count']} of {v['n']}: " if "count" in v and "n" in v else ""
        how = ", ".join(
            x
            for x in (
                str(v.get("method", "")),
                f"{v['confidence']:.0%}" if isinstance(v.get("confidence"), float) else "",
            )
            if x
        )
        return f"{head}{f(est)} [{f(v['lower'])}, {f(v['upper'])}]" + (f" ({how})" if how else "")
    return value(v)


def reproduction_doc(result: dict, *, png: bytes | None = None) -> Doc:
    """The document of a reproduction's result (the JSON-ready dict of
    :func:`memclaim.experiments.common.finish`), its figure embedded when ``png`` is given.

    >>> from memclaim.report.reproduction import reproduction_doc
    >>> from memclaim.report.core import render_markdown
    >>> res = {"name": "demo", "title": "a demo", "quick": True, "seed": 0, "reproduces": ["[EM] Fig. 3"],
    ...        "paper_claims": [{"key": "k", "claim": "the floor is close to zero", "quote": "the floor is close "
    ...                          "to zero", "where": "[EM] §4", "test": "upper bound <= 0.1%", "verdict":
    ...                          "not testable here", "held": None, "evidence": "needs 2,995 controls",
    ...                          "numbers": {}}], "checks": [], "paper_numbers": [], "notes": []}
    >>> md = render_markdown(reproduction_doc(res))
    >>> "The paper ([EM] §4): “the floor is close to zero”" in md, "> **Result:** not testable here. needs 2,995" in md
    (True, True)
    """
    quick = " (quick)" if result.get("quick") else ""
    doc = Doc(f"{result['name']}: {result.get('title', '')}{quick}")
    doc.p(
        f"Reproduces: {'; '.join(result.get('reproduces', []))}. Seed {result.get('seed')}; versions: "
        + value(result.get("versions", {}))
        + "."
    )
    claims = result.get("paper_claims", [])
    if claims:
        counts = {v: sum(c["verdict"] == v for c in claims) for v in VERDICT_ORDER}
        doc.h2("The paper's sentences on this run")
        doc.p(
            f"{len(claims)} {'sentence' if len(claims) == 1 else 'sentences'} judged: "
            + ", ".join(f"{counts[v]} {v}" for v in VERDICT_ORDER)
            + ". Each rule was fixed before the run; a sentence that does not hold here is a finding about this "
            "run (another model, text and scale), not a failure of memclaim."
        )
        doc.table(
            ["verdict", "sentence (where)", "test"],
            [[c["verdict"], f"{c['claim']} ({c['where']})", c["test"]] for c in claims],
        )
        for c in claims:
            doc.h3(f"{c['verdict']}: {c['claim']}")
            doc.p(f"The paper ({c['where']}): “{c['quote']}”")
            doc.p(f"Test: {c['test']}")
            nums = c.get("numbers") or {}
            if nums:
                doc.table(["number", "value"], [[k, number_text(k, v)] for k, v in nums.items()])
            doc.callout(f"{c['verdict']}. {c['evidence']}", "result")
    checks = result.get("checks", [])
    if checks:
        doc.h2("Checks (a failed check is a defect: exit status 1)")
        rows = []
        for c in checks:
            said = f"“{c['quote']}” ({c['where']})" if c.get("quote") else (c.get("where") or "")
            rows.append(
                [
                    "pass" if c["passed"] else "FAIL",
                    c["claim"],
                    said,
                    c["detail"],
                    c.get("false_alarm", ""),
                ]
            )
        doc.table(["", "check", "the paper's sentence", "numbers", "false alarm"], rows)
    pn = result.get("paper_numbers", [])
    if pn:
        doc.h2("Ours beside the paper (no verdict: the test suite holds the tolerances)")
        doc.table(
            ["quantity", "where", "ours", "paper", "difference", "note"],
            [
                [
                    p["quantity"],
                    p["where"],
                    num(p["ours"]),
                    ({"=": "", ">=": ">= ", "<=": "<= "}[p["relation"]] + p["paper_printed"]),
                    num(p["difference"]),
                    (p.get("note") or "")
                    + ("" if p["same_scale"] else " (the paper's number is from other models)"),
                ]
                for p in pn
            ],
        )
    if result.get("differences_from_paper"):
        doc.h2("What differs from the paper")
        doc.bullets(result["differences_from_paper"])
    if png is not None:
        doc.figure(result.get("title", result["name"]), png, name=f"{result['name']}-figure")
    if result.get("notes"):
        doc.h2("Notes")
        doc.bullets(result["notes"])
    return doc


def reproduction_files(result: dict, *, png: bytes | None = None) -> dict[str, bytes]:
    """``{"NAME.md": ..., "NAME.html": ...}``: the report rendered both ways (the HTML page is
    self-contained, the figure embedded; the Markdown links NAME.png).

    >>> from memclaim.report.reproduction import reproduction_files
    >>> sorted(reproduction_files({"name": "demo", "title": "t", "checks": [], "paper_numbers": []}))
    ['demo.html', 'demo.md']
    """
    doc = reproduction_doc(result, png=png)
    name = result["name"]
    md = (
        render_markdown(doc)
        .replace(f"]({name}-figure.png)", f"]({name}.png)")
        .replace(f"[{name}-figure.pdf]({name}-figure.pdf)", f"[{name}.pdf]({name}.pdf)")
    )
    return {f"{name}.md": md.encode("utf-8"), f"{name}.html": render_html(doc).encode("utf-8")}


__all__ = ["reproduction_doc", "reproduction_files", "number_text"]
