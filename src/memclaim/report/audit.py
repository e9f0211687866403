"""The audit report ([MX] §8.2, App. F.2): the attacks with their intervals, the extraction
audits, the unlearning verifier, shadows and counterfactual estimates, what the numbers do and
do not mean; and the audit-disagreement table's report ([MX] Fig. 12, Cor. 6.2).

Renders :class:`memclaim.audits.result.AuditResult` and
:class:`memclaim.audits.table_run.TableResult`; audits/ never imports this module.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from pathlib import Path

import numpy as np

from ..audits.result import AuditResult
from ..audits.table_run import TableResult
from . import style, words
from .core import Doc, ReportBundle, fmt_num, pct, render, short_id, write_report
from .figures import _fig, disagreement_heatmap
from .numbers import value

__all__ = [
    "audit_statements",
    "build_audit_doc",
    "audit_report",
    "write_audit_report",
    "table_report",
    "write_table_report",
]


def audit_statements(result: AuditResult) -> list[str]:
    """What the numbers do and do not mean, in words (report.json ``statements``).

    >>> import memclaim as mc
    >>> from memclaim.report.audit import audit_statements
    >>> run = mc.audit("toy", member_texts, control_texts, prefix_tokens=16, suffix_tokens=16)  # doctest: +SKIP
    >>> audit_statements(run.result)[0][:60]  # doctest: +SKIP
    'AUC is the probability that a random member scores above a '
    """
    s = [
        "AUC is the probability that a random member scores above a random non-member (ties count one half); "
        "the interval is DeLong's (Hoeffding's where DeLong's variance is exactly zero). The leak signal 2 AUC - 1 "
        "is 0 at chance and 1 at full separation ([MX] Fig. 12).",
        "A TPR at a certified FPR uses a threshold set on the non-members by the conformal rank rule K = "
        "floor(alpha (N + 1)): a fresh non-member exchangeable with them is flagged with probability at most "
        "K / (N + 1). The TPR interval is Clopper-Pearson over the members ([EM] Eq. 5-6).",
        "Membership is not extraction. An attack that separates members from non-members says the model treats "
        "them differently on these tokens, not that anything can be generated; and a clean membership audit does "
        "not mean nothing is extractable: a secret reachable only through another prompt is invisible to every "
        "loss-based score ([MX] Thm. 6.1, Cor. 6.2).",
        "The guarantees hold for non-members exchangeable with the members (same source, format and length): "
        "non-members from another distribution make every attack look stronger than it is.",
        "Extraction rates are measured from the records' own prefixes (and the trigger, if given) only; the "
        "unlearning verifier thresholds the greedy recovered fraction at the stated level and certifies nothing "
        "about other prompts ([MX] Cor. 6.3).",
    ]
    if result.counterfactual:
        s.append(
            "The counterfactual estimate comes from shadows trained on random halves of the population: it "
            "estimates the population-conditional functional COND, not RO or LOO; a DP cap applies to RO "
            "(replace-one) or LOO (add/remove), and comparing COND with it needs [MX] Prop. A.2's slack "
            "([MX] App. A, Remark A.3)."
        )
    return s


def _iv(x, lo, hi, d=3) -> str:
    return f"{x:.{d}f} [{lo:.{d}f}, {hi:.{d}f}]"


def _roc_figure(result: AuditResult):
    with style.style():
        fig, (ax,) = _fig(style.TEXT_WIDTH, 4.2)
        nn = result.n_nonmembers
        for e in result.attacks:
            # empirical ROC by sweeping every distinct score (scikit-learn's roc_curve is not a dependency)
            x, y = e.member_scores, e.nonmember_scores
            thr = np.unique(np.concatenate([x, y]))[::-1]
            tpr = np.array([0.0] + [float(np.mean(x >= t)) for t in thr])
            fpr = np.array([0.0] + [float(np.mean(y >= t)) for t in thr])
            ax.plot(
                np.maximum(fpr, 0.5 / nn),
                np.maximum(tpr, 0.5 / max(1, result.n_members)),
                label=f"{e.attack} (AUC {e.auc.auc:.3f})",
                lw=1.2,
            )
        grid = np.logspace(math.log10(0.5 / nn), 0, 50)
        ax.plot(grid, grid, color="0.6", ls="--", lw=0.8, label="chance")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("false-positive rate (non-members)")
        ax.set_ylabel("true-positive rate (members)")
        ax.set_title("ROC curves (log-log; zero rates drawn at half a count)")
        style.legend(ax, outside=True)
    return fig


def build_audit_doc(
    result: AuditResult, *, title: str = "Membership-inference and extraction audit"
) -> Doc:
    """The audit report's document (rendered three ways by :func:`audit_report`).

    >>> import memclaim as mc
    >>> from memclaim.report.audit import build_audit_doc
    >>> run = mc.audit("toy", member_texts, control_texts, prefix_tokens=16, suffix_tokens=16)  # doctest: +SKIP
    >>> doc = build_audit_doc(run.result)  # doctest: +SKIP
    >>> doc.title, [b[0] for b in doc.blocks][:4]  # doctest: +SKIP
    ('Membership-inference and extraction audit', ['callout', 'h2', 'table', 'figure'])
    """
    doc = Doc(title)
    doc.callout(result.headline(), "result")  # a measurement, not a certified claim
    limited = words.limit_note(result.inputs)
    if limited:
        doc.callout(limited, "caution")
    for n in result.notes:
        doc.callout(n, "note")
    doc.h2("Membership-inference attacks")
    fpr_head = "TPR at certified FPR [CP]"
    rows = []
    for e in result.attacks:
        a = e.auc
        tpr = "–"
        if e.tpr is not None:
            t = e.tpr
            tpr = f"{t.true_positives}/{t.n_members} = {_iv(t.tpr, t.low, t.high)} at FPR {pct(t.certified_fpr)}"
        rows.append(
            [
                e.attack,
                _iv(a.auc, a.low, a.high),
                a.interval_method,
                _iv(a.leak_signal, a.leak_low, a.leak_high, 2),
                tpr,
                e.measures,
            ]
        )
    doc.table(
        [
            "attack",
            f"AUC [{100 * result.settings.confidence:g}% CI]",
            "interval",
            "leak signal 2AUC-1",
            fpr_head,
            "what it measures",
        ],
        rows,
        caption=f"{result.n_members} members vs {result.n_nonmembers} non-members; suffix of "
        f"{result.settings.suffix_tokens} tokens after a {result.settings.prefix_tokens}-token prefix",
    )
    if result.tpr_note:
        doc.p(result.tpr_note)
    doc.figure("ROC curves of every attack (log-log)", _roc_figure(result), name="roc")
    doc.table(["attack", "citation"], [[e.attack, e.citation] for e in result.attacks])
    if result.reference is not None:
        doc.p(
            f"Reference model: {result.reference['model']['name']} — {result.reference['alignment']}."
        )
    doc.h2("Extraction audits")
    rows = []
    for label, ex in (
        ("members, own prefix", result.extraction),
        ("non-members, own prefix", result.extraction_nonmembers),
        ("members, trigger", result.trigger_extraction),
        ("non-members, trigger", result.trigger_nonmembers),
    ):
        if ex is None:
            continue
        samp = (
            "–" if ex.policy is None else f"{fmt_num(ex.expected_rate)} (m = {ex.m}, {ex.policy})"
        )
        rows.append(
            [
                label,
                f"{ex.greedy_successes}/{ex.n}",
                _iv(ex.greedy_rate, ex.greedy_low, ex.greedy_high),
                samp,
                ex.near_ties,
            ]
        )
    doc.table(
        [
            "records",
            "greedy reproduced",
            "greedy rate [CP]",
            "expected fraction under sampling (exact)",
            "near-ties",
        ],
        rows,
    )
    if result.soundness is not None:
        doc.p(f"Canary soundness ([MX] Cor. 5.3): {result.soundness.verdict}.")
    if result.verifier is not None:
        doc.h2("Unlearning verifier")
        v = result.verifier
        doc.p(
            words.verifier_reading(
                v.rate, v.threshold, unlearned=bool(result.model.get("unlearned"))
            )
            + "."
        )
        doc.p(v.statement)
    if result.shadows is not None:
        sh = result.shadows
        doc.h2("Shadow models")
        doc.p(
            f"{len(sh)} shadows ({sh.recipe['mode']}), {sh.design}; population of {sh.population_size} records "
            f"(sha256 {sh.population_sha256[:16]}); trained now: {len(sh.trained)}, reused: {len(sh.reused)}."
        )
        for cf in result.counterfactual:
            est = cf.estimate
            rows = [
                [g, v["n"], fmt_num(v["mean_mem"]), fmt_num(v["se_across"]), fmt_num(v["max_mem"])]
                for g, v in cf.by_set.items()
            ]
            doc.table(
                ["texts", "n", f"mean mem_h ({cf.functional})", "SE across texts", "max"],
                rows,
                caption=f"h = {cf.score}; {cf.se_method}",
            )
            doc.p(
                f"Overall mean mem_{cf.functional} = {fmt_num(est.mean_mem)} "
                f"[{fmt_num(est.low)}, {fmt_num(est.high)}] over {est.n_targets} texts."
            )
            if cf.cap is not None:
                doc.p(f"Against the cap: {cf.cap.note}.")
            elif cf.cap_refused:
                doc.p(f"Comparison with the cap refused: {cf.cap_refused}")
    doc.h2("What this does and does not mean")
    doc.bullets(audit_statements(result))
    doc.h2("Procedure and inputs")
    proc = result.procedure
    doc.table(
        ["field", "value"],
        [
            (
                "model",
                f"{value(proc.get('model', {}).get('name'))} "
                f"(fingerprint {value(proc.get('model', {}).get('fingerprint'))[:16]})",
            ),
            ("start of text", value(proc.get("start_of_text", {}).get("tokens"))),
            (
                "window",
                f"{proc.get('prefix_tokens')} prefix + {proc.get('suffix_tokens')} suffix tokens",
            ),
            ("policies", ", ".join(proc.get("policies", []))),
            ("store", value(result.store)),
        ]
        + [
            (
                f"input {value(i.get('role'))}",
                f"{value(i.get('path'))} sha256 {value(i.get('sha256'))[:16]}",
            )
            for i in result.inputs
        ],
    )
    return doc


def audit_report(result: AuditResult) -> ReportBundle:
    """report.{json,md,html} of one audit, rendered in memory (nothing is written); report.json's
    ``results`` is the result's ``to_dict()`` without the report paths.

    >>> import memclaim as mc
    >>> from memclaim.report.audit import audit_report
    >>> run = mc.audit("toy", member_texts, control_texts, prefix_tokens=16, suffix_tokens=16)  # doctest: +SKIP
    >>> b = audit_report(run.result)  # doctest: +SKIP
    >>> sorted(b.figures), b.markdown.splitlines()[0]  # doctest: +SKIP
    (['roc.pdf', 'roc.png'], '# Membership-inference and extraction audit')
    """
    doc = build_audit_doc(result)
    results = result.to_dict()
    results.pop("report", None)
    return render(
        doc,
        command="audit",
        procedure=result.procedure,
        inputs=list(result.inputs),
        results=results,
        statements=audit_statements(result),
    )


def write_audit_report(result: AuditResult, out_dir: str | Path) -> AuditResult:
    """Write the audit's report.{json,md,html} into ``out_dir`` (all or nothing); returns the
    result with ``report`` = the paths written.

    >>> import memclaim as mc
    >>> from memclaim.report.audit import write_audit_report
    >>> run = mc.audit("toy", member_texts, control_texts, prefix_tokens=16, suffix_tokens=16)  # doctest: +SKIP
    >>> sorted(write_audit_report(run.result, "audit-report").report)  # doctest: +SKIP
    ['html', 'json', 'md']
    """
    paths = write_report(Path(out_dir), audit_report(result))
    return replace(result, report=paths)


# ------------------------------------------------------------------ the disagreement table
def _plain(rst: str) -> str:
    """Docstring markup (the verdict rules are audits/table.py's documentation) as plain words for
    a reader: no ``:func:`` roles, double backquotes, bold stars or keyword arguments."""
    s = rst.replace("columns with ``informed=False``", "columns not marked informed")
    s = s.replace("columns with ``informed=True``", "columns marked informed")
    s = re.sub(
        r" ?\(:func:`[^`]+`\)", "", s
    )  # "(:func:`auc_cell`)": the code that applies the rule
    s = re.sub(r";\s*:func:`[^`]+`", "", s)
    s = s.replace(" (stated once, applied by the cell constructors below; ", " (")
    s = re.sub(r":\w+:`([^`]+)`", r"\1", s)
    s = re.sub(r"``([^`]+)``", r"\1", s)
    s = re.sub(r"\*\*([^*]+)\*\*", r"\1", s)
    return re.sub(r"(?<![\w*])\*([^*\s][^*]*)\*(?![\w*])", r"\1", s)


def rule_blocks(text: str) -> list[tuple[str, str | list[str]]]:
    """Plain-text rules (paragraphs, and ``  - `` items whose lines wrap) as report blocks: each
    paragraph and each item one line of words, so the page reflows them instead of keeping the
    docstring's line breaks.

    >>> rule_blocks("Rules:\\n\\nGroup A\\n  - one\\n    wrapped , here;\\n  - two")
    [('p', 'Rules:'), ('p', 'Group A'), ('ul', ['one wrapped, here;', 'two'])]
    """

    def words(parts: list[str]) -> str:
        return re.sub(r"\s+([,;:.)])", r"\1", " ".join(p for p in parts if p))

    blocks: list[tuple[str, str | list[str]]] = []
    for para in re.split(r"\n\s*\n", text.strip()):
        head, items = [], []
        for line in para.splitlines():
            stripped = line.strip()
            if stripped.startswith("- "):
                items.append([stripped[2:]])
            elif items:
                items[-1].append(stripped)
            else:
                head.append(stripped)
        if head:
            blocks.append(("p", words(head)))
        if items:
            blocks.append(("ul", [words(i) for i in items]))
    return blocks


def table_report(result: TableResult) -> tuple[ReportBundle, dict[str, bytes]]:
    """report.{json,md,html} of the audit-disagreement table ([MX] Fig. 12) and its extra files
    (table.md, disagreement.png), rendered in memory.

    >>> import memclaim as mc
    >>> from memclaim.report.audit import table_report
    >>> t = mc.audit_table("spec.json")  # doctest: +SKIP
    >>> bundle, extra = table_report(t.result)  # doctest: +SKIP
    >>> sorted(extra), sorted(bundle.figures)  # doctest: +SKIP
    (['table.md'], ['disagreement.pdf', 'disagreement.png'])
    """
    fig = disagreement_heatmap(result.table, None)
    doc = Doc("Audit disagreement ([MX] Fig. 12)")
    doc.p(
        "Rows are leakage instances, columns are audits; each cell is the audit's leak signal (0 = chance, "
        "1 = full detection; rates directly, AUCs as 2 AUC - 1) with its interval and a verdict by the rules "
        "below. No single audit sees every leak ([MX] Cor. 6.2)."
    )
    t = result.table
    doc.table(
        ["instance"] + [c.name + (" (ground truth)" if c.informed else "") for c in t.columns],
        [
            [short_id(r)]
            + [
                "–" if c is None else f"{c.signal:.2f} [{c.low:.2f}, {c.high:.2f}] {c.verdict}"
                for c in row
            ]
            for r, row in zip(t.rows, t.cells)
        ],
    )
    doc.figure("Audit disagreement heatmap", fig, name="disagreement")
    doc.h2("Verdict rules")
    for kind, block in rule_blocks(_plain(t.rules)):
        doc.bullets(block) if kind == "ul" else doc.p(block)
    bundle = render(
        doc,
        command="audit table",
        procedure=None,
        inputs=(),
        results=result.to_dict(),
        statements=[
            "No single audit suffices: read each column for what it misses ([MX] Cor. 6.2)."
        ],
    )
    return bundle, {"table.md": t.to_markdown().encode("utf-8")}


def write_table_report(result: TableResult, out_dir: str | Path) -> TableResult:
    """Write every instance's audit report (into its folder under ``out_dir/instances``), then
    the table's report.{json,md,html}, table.md and disagreement.png into ``out_dir`` (staged,
    then renamed into place as one change). Returns the result with the report paths filled in.

    >>> import memclaim as mc
    >>> from memclaim.report.audit import write_table_report
    >>> t = mc.audit_table("spec.json")  # doctest: +SKIP
    >>> written = write_table_report(t.result, "table-report")  # doctest: +SKIP
    >>> sorted(written.report), written.heatmap  # doctest: +SKIP
    (['html', 'json', 'md'], 'table-report/disagreement.png')
    """
    out = Path(out_dir)
    audits = {}
    for name, detail in result.audits.items():
        res, folder = result.instance_results.get(name, (None, None))
        d = dict(detail)
        if res is not None and folder is not None:
            d["report"] = write_audit_report(res, folder).report
        audits[name] = d
    result = replace(result, audits=audits)
    bundle, extra = table_report(result)
    paths = write_report(out, bundle, extra_files=extra)
    return replace(result, report=paths, heatmap=str(out / "disagreement.png"))
