"""The census report ([EM] §5, §6, App. E, F.3)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..claims.budget import CensusBudgetView
from ..claims.census import CensusResult, FlaggedWindow
from ..claims.census_pairs import CensusOfPairs, census_of_pairs
from ..progress import LogCallback, emit_log
from . import figures, numbers, words
from .core import (
    Doc,
    HeatText,
    ReportBundle,
    fmt_num,
    pct,
    render,
    sci_from_log10,
    short_id,
    write_report,
)
from .population import _procedure_section

HEAT_TEXT_MAX = 20000
_LEGEND = [
    ("u", "not in any suffix"),
    ("0", "below τ"),
    ("1", "Δ ≤ 1"),
    ("2", "1 < Δ ≤ 3"),
    ("3", "3 < Δ ≤ 5"),
    ("4", "5 < Δ ≤ 10"),
    ("5", "Δ > 10"),
]


def heat_bins(heat_log10: np.ndarray, log10_tau: float) -> np.ndarray:
    """-1 uncovered, 0 at or below tau, 1..5 by margin (edges 1, 3, 5, 10).

    >>> import numpy as np
    >>> from memclaim.report.census import heat_bins
    >>> heat_bins(np.array([-np.inf, -9.0, -7.5, -5.0, -1.0]), -8).tolist()  # margins 0.5, 3, 7 above 1e-8
    [-1, 0, 1, 2, 4]
    """
    h = np.asarray(heat_log10, dtype=np.float64)
    m = h - log10_tau
    bins = np.where(np.isneginf(h), -1, 0)
    above = m > 0
    bins = np.where(above, 1 + np.searchsorted([1.0, 3.0, 5.0, 10.0], m, side="left"), bins)
    return bins.astype(np.int64)


HEAT_STRIP_CELLS = (
    400 * 150
)  # at book scale a cell holds several characters (the largest heat among them)


def _heat_strip(r: CensusResult):
    """The heat strip from the census's heat segments, binned to at most HEAT_STRIP_CELLS cells:
    a book is never one number per character here."""
    cells, per = r.heat.binned(HEAT_STRIP_CELLS)
    if per == 1:
        return figures.heat_strip(cells, log10_tau=r.log10_tau)
    return figures.heat_strip(cells, log10_tau=r.log10_tau, chars_per_cell=per)


def census_headline(
    r: CensusResult, procedure: dict | None = None, *, policy: str | None = None
) -> str:
    """The census's one-sentence result: coverage above tau_doc under the procedure it was made
    under (:func:`words.procedure_phrase` of ``procedure``, or ``policy``) and the control it was
    calibrated on.

    >>> import math
    >>> from memclaim.claims.census import WindowScores, census
    >>> from memclaim.report.census import census_headline
    >>> ctl = WindowScores.from_arrays([math.log(1e-12), math.log(3e-9)], [0, 10], [10, 20], doc_length=20, name="ctl")
    >>> doc = WindowScores.from_arrays([math.log(2e-3), math.log(1e-20)], [0, 10], [10, 20], doc_length=20, name="doc")
    >>> census_headline(census(doc, ctl), policy="full")
    'doc: 50% of its 20 characters are covered by window suffixes scoring above tau_doc = 1e-8 under decoding policy full (1 of 2 windows), calibrated against ctl (top own-prose control score 3.00e-09, rounded up a decade; 0 control window(s) excluded as verified contamination).'
    """
    th = r.threshold
    under = words.procedure_phrase(procedure, policy=policy)
    return (
        f"{r.document_name}: {pct(r.coverage)} of its {r.doc_length} characters are covered by window suffixes "
        f"scoring above tau_doc = 1e{r.log10_tau} {under} ({r.n_windows_above} of {r.n_windows} windows), "
        f"calibrated against {th.control_name} (top own-prose control score "
        f"{sci_from_log10(th.max_control_log10)}, rounded up a decade; {th.n_excluded} control window(s) "
        "excluded as verified contamination)."
    )


def build_census_doc(
    results: Sequence[CensusResult],
    *,
    title: str = "Single-document census",
    budget_views: Sequence[CensusBudgetView | None] = (),
    flagged: Sequence[FlaggedWindow] = (),
    document_texts: Sequence[str | None] = (),
    controls_description: str | None = None,
    global_note: str | None = None,
    procedure: dict | None = None,
    inputs: Sequence[dict] = (),
) -> Doc:
    """The census report's document (rendered three ways by :func:`census_report`): per document its
    numbers, coverage against margin, budget view and heat; the controls' decontamination and the
    near-verbatim suspects; what the census does and does not mean.

    >>> import math
    >>> from memclaim.claims.census import WindowScores, census
    >>> from memclaim.report.census import build_census_doc
    >>> ctl = WindowScores.from_arrays([math.log(1e-12), math.log(3e-9)], [0, 10], [10, 20], doc_length=20, name="ctl")
    >>> doc = WindowScores.from_arrays([math.log(2e-3), math.log(1e-20)], [0, 10], [10, 20], doc_length=20, name="doc")
    >>> d = build_census_doc([census(doc, ctl)])  # draws the figures (seconds)  # doctest: +SKIP
    >>> d.title, [b[0] for b in d.blocks][:4]  # doctest: +SKIP
    ('Single-document census', ['callout', 'callout', 'h2', 'table'])
    """
    doc = Doc(title)
    for r in results:
        doc.callout(
            census_headline(r, procedure), "claim" if r.coverage > 0 else "null"
        )  # nothing above tau: a null result
    limited = words.limit_note(inputs)
    if limited:
        doc.callout(limited, "caution")
    doc.callout(words.CENSUS_NO_FPR)
    if global_note:
        doc.p(global_note)
    for k, r in enumerate(results):
        th = r.threshold
        doc.h2(f"Census of {r.document_name}")
        doc.table(
            ["quantity", "value", "meaning"],
            [
                ("document length L", f"{r.doc_length} characters", ""),
                ("windows", r.n_windows, "suffix spans only count ([EM] Eq. 9)"),
                (
                    "control windows",
                    f"{th.n_control_windows} ({th.n_excluded} excluded)",
                    "decontaminated ([EM] E.1)",
                ),
                (
                    "top control score",
                    numbers.prob(th.max_control_log10),
                    f"window {th.argmax_window}, characters [{th.argmax_span[0]}, {th.argmax_span[1]})",
                ),
                (
                    "threshold tau_doc",
                    f"1e{r.log10_tau}",
                    "10^ceil(log10 max control score) ([EM] Eq. 31)",
                ),
                ("windows above tau", r.n_windows_above, "strict >"),
                (
                    "coverage(tau_doc)",
                    f"{pct(r.coverage)} ({r.covered_chars} characters)",
                    "[EM] Eq. 9",
                ),
                ("largest margin", fmt_num(r.max_margin), "log10(score / tau) ([EM] D.5)"),
            ],
        )
        doc.table(
            ["margin Δ", "coverage above tau x 10^Δ"],
            [(m, pct(v)) for m, v in r.coverage_at_margins.items()],
            caption="Coverage as the bar is raised ([EM] §5)",
        )
        bv = budget_views[k] if k < len(budget_views) else None
        if bv is not None:
            doc.h3("Memorized against realistically extractable ([EM] §6, Fig. 7)")
            doc.table(
                ["quantity", "value"],
                [
                    ("memorized (clears tau)", pct(bv.coverage_memorized)),
                    (
                        f"memorized and extractable within n = {bv.realistic_n:g} at {100 * (1 - bv.delta):g}%",
                        pct(bv.at_realistic_n),
                    ),
                    (
                        "budget at which everything above tau is extractable",
                        f"{bv.n_tau.n_int:,}"
                        if bv.n_tau.n_int is not None
                        else f"{sci_from_log10(bv.n_tau.log10_n)}",
                    ),
                ],
            )
            doc.figure(
                "Coverage of the document by windows generated at least once within n queries, and by "
                "those that also clear tau_doc.",
                figures.census_budget_figure(bv),
                name=f"budget-{k + 1}",
            )
        doc.figure(
            f"Per-character heat of {r.document_name}: each character takes the largest score among the "
            "windows whose suffix covers it ([EM] Fig. 18).",
            _heat_strip(r),
            name=f"heat-{k + 1}",
        )
        text = document_texts[k] if k < len(document_texts) else None
        if text is not None and len(text) == r.doc_length:
            bins = heat_bins(r.heat.array(0, HEAT_TEXT_MAX), r.log10_tau)
            n = min(len(text), HEAT_TEXT_MAX)
            doc.heat(
                HeatText(
                    text[:n],
                    bins[:n].tolist(),
                    _LEGEND,
                    truncated_from=len(text) if n < len(text) else None,
                )
            )
    doc.h2("Coverage against margin ([EM] Fig. 6)")
    doc.figure(
        "Share of characters covered by windows whose score exceeds tau x 10^Δ.",
        figures.census_ccdf(results),
        name="coverage",
    )
    doc.h2("Control decontamination")
    for r in results:
        th = r.threshold
        if th.excluded_spans:
            doc.p(
                f"{th.control_name}: excluded spans "
                + ", ".join(f"[{a}, {b})" for a, b in th.excluded_spans)
                + f" ({th.n_excluded} windows)."
            )
        else:
            doc.p(f"{th.control_name}: no spans excluded.")
    if flagged:
        doc.p(
            "Control windows among the highest-scoring whose text also occurs near-verbatim in the candidate "
            "document or a reference text. They are NOT removed automatically: a person must confirm each "
            "before excluding it ([EM] E.1)."
        )
        doc.table(
            ["window", "span", "score", "found in", "similarity", "text"],
            [
                (
                    short_id(f.window),
                    f"[{f.span[0]}, {f.span[1]})",
                    sci_from_log10(f.log10_score),
                    short_id(f.source),
                    fmt_num(f.similarity),
                    f.text[:200],
                )
                for f in flagged[:100]
            ],
        )
    else:
        doc.p("No near-verbatim suspects were flagged (or no reference texts were given).")
    doc.h2("Controls")
    doc.p(
        controls_description
        or "No description of how the control document was chosen was given. Say why it is "
        "a non-member and how it is matched to the document (author, genre, style, length)."
    )
    doc.h2("What this does and does not mean")
    doc.bullets(words.census_statements(near_verbatim=words.is_near_verbatim(procedure)))
    _procedure_section(doc, procedure, inputs)
    return doc


def census_report(
    results: Sequence[CensusResult],
    *,
    budget_views: Sequence[CensusBudgetView | None] = (),
    flagged: Sequence[FlaggedWindow] = (),
    document_texts: Sequence[str | None] = (),
    controls_description: str | None = None,
    global_note: str | None = None,
    procedure: dict | None = None,
    inputs: Sequence[dict] = (),
    command: str = "census",
    title: str = "Single-document census",
    extra_results: dict | None = None,
) -> ReportBundle:
    """Render the three report files for one or more censuses (nothing is written).

    >>> import math
    >>> from memclaim.claims.census import WindowScores, census
    >>> from memclaim.report.census import census_report
    >>> ctl = WindowScores.from_arrays([math.log(1e-12), math.log(3e-9)], [0, 10], [10, 20], doc_length=20, name="ctl")
    >>> doc = WindowScores.from_arrays([math.log(2e-3), math.log(1e-20)], [0, 10], [10, 20], doc_length=20, name="doc")
    >>> b = census_report([census(doc, ctl)])  # draws the figures (seconds)  # doctest: +SKIP
    >>> sorted(b.figures)  # doctest: +SKIP
    ['coverage.pdf', 'coverage.png', 'heat-1.pdf', 'heat-1.png']
    """
    results = list(results)
    procedure = words.with_verify(procedure, words.VERIFY_CENSUS)  # a census has no conformal test
    doc = build_census_doc(
        results,
        title=title,
        budget_views=budget_views,
        flagged=flagged,
        document_texts=document_texts,
        controls_description=controls_description,
        global_note=global_note,
        procedure=procedure,
        inputs=inputs,
    )
    res = {
        "headlines": [census_headline(r, procedure) for r in results],
        "census": [r.to_dict() for r in results],
        "budget": [None if b is None else b.to_dict() for b in budget_views],
        "flagged_control_windows": [f.to_dict() for f in flagged],
        "controls_description": controls_description,
        **(extra_results or {}),
    }
    return render(
        doc,
        command=command,
        procedure=procedure,
        inputs=inputs,
        results=res,
        statements=words.census_statements(near_verbatim=words.is_near_verbatim(procedure)),
    )


def census_pairs_report(
    c: CensusOfPairs,
    *,
    inputs: Sequence[dict] = (),
    controls_description: str | None = None,
    command: str = "census",
    title: str = "Single-document census",
) -> ReportBundle:
    """The report of :func:`memclaim.claims.census_pairs.census_of_pairs` (nothing is written);
    report.json's results add the per-pair and global thresholds.

    >>> import math
    >>> from memclaim.claims.census import WindowScores
    >>> from memclaim.claims.census_pairs import census_of_pairs
    >>> from memclaim.report.census import census_pairs_report
    >>> ctl = WindowScores.from_arrays([math.log(1e-12), math.log(3e-9)], [0, 10], [10, 20], doc_length=20, name="ctl")
    >>> doc = WindowScores.from_arrays([math.log(2e-3), math.log(1e-20)], [0, 10], [10, 20], doc_length=20, name="doc")
    >>> b = census_pairs_report(census_of_pairs([{"document": doc, "control": ctl}]))  # doctest: +SKIP
    >>> b.markdown.splitlines()[0]  # doctest: +SKIP
    '# Single-document census'
    """
    return census_report(
        c.results,
        budget_views=c.budgets,
        flagged=c.flagged,
        document_texts=c.document_texts,
        controls_description=controls_description,
        global_note=c.global_note,
        procedure=c.procedure,
        inputs=inputs,
        command=command,
        title=title,
        extra_results={
            "per_pair_log10_tau": [t.log10_tau for t in c.thresholds],
            "global_log10_tau": None
            if c.global_threshold is None
            else c.global_threshold.log10_tau,
        },
    )


def run_census(
    pairs: Sequence[dict],
    *,
    out_dir: str | Path,
    use_global_threshold: bool = False,
    references: dict | None = None,
    budget_delta: float | None = 0.05,
    realistic_budget: float = 1e5,
    inputs: Sequence[dict] = (),
    controls_description: str | None = None,
    procedure_ignore: Sequence[str] = (),
    min_similarity: float = 90.0,
    command: str = "census",
    log: LogCallback | None = None,
) -> dict:
    """The one call for the ``census`` command: census of each pair, report written (all or nothing).

    Each pair is a dict with ``document`` and ``control`` (:class:`WindowScores`), optional
    ``document_text`` / ``control_text`` (for the heatmap text and near-verbatim flags),
    ``exclude_spans`` (verified quotations in the control), and ``procedure_document`` /
    ``procedure_control`` (checked to be the same procedure, [EM] Def. B.2). With
    ``use_global_threshold`` every document is read at the most conservative threshold ([EM] §7).
    ``log`` receives each headline and the report's path (one line each).

    >>> import math
    >>> from memclaim.claims.census import WindowScores
    >>> from memclaim.report.census import run_census
    >>> ctl = WindowScores.from_arrays([math.log(1e-12), math.log(3e-9)], [0, 10], [10, 20], doc_length=20, name="ctl")
    >>> doc = WindowScores.from_arrays([math.log(2e-3), math.log(1e-20)], [0, 10], [10, 20], doc_length=20, name="doc")
    >>> paths = run_census([{"document": doc, "control": ctl}], out_dir="census-report")  # doctest: +SKIP
    >>> sorted(paths)  # doctest: +SKIP
    ['html', 'json', 'md']
    """
    c = census_of_pairs(
        pairs,
        use_global_threshold=use_global_threshold,
        references=references,
        budget_delta=budget_delta,
        realistic_budget=realistic_budget,
        procedure_ignore=procedure_ignore,
        min_similarity=min_similarity,
    )
    paths = write_report(
        out_dir,
        census_pairs_report(
            c, inputs=inputs, controls_description=controls_description, command=command
        ),
    )
    results, flagged = c.results, c.flagged
    summary = {
        "headlines": [census_headline(r, c.procedure) for r in results],
        "log10_tau": [r.log10_tau for r in results],
        "coverage": [r.coverage for r in results],
        "n_flagged": len(flagged),
        "report": paths,
    }
    for line in summary["headlines"] + [f"report: {paths['html']}"]:
        emit_log(log, line)
    return summary
