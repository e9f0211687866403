"""Shared plumbing for the reproductions of [MX] §8 (``memclaim reproduce NAME``).

Every reproduction is a function ``run(*, quick, seed, out_dir) -> dict`` that

- draws all randomness from ``numpy.random.SeedSequence(seed)`` split into named streams
  (:func:`rng_streams`), so the same seed gives the same numbers bit for bit on the same stack;
- writes ``NAME.json`` (every number, the seed and stream names, the settings, package versions,
  its numbers beside the paper's, the checks of the theory's predictions, and the paper's
  sentences judged on this run), ``NAME.png`` / ``NAME.pdf`` (the figure) and ``NAME.md`` /
  ``NAME.html`` (the report, :mod:`memclaim.report.reproduction`), through :func:`finish`;
- returns the same JSON-ready dict.

The JSON holds no timestamps, paths or timings, so two runs with the same seed and stack produce
byte-identical files. Paper numbers are recorded
as :class:`Comparison`: ours beside the paper's value from :mod:`.paper`, no verdict; whether a
run agrees with the paper is for the tests to decide), the theory's predictions tested on the
run's own numbers (each with its false-alarm rate) as :class:`Check`, and the paper's qualitative
sentences as :class:`PaperClaim`: the sentence verbatim, the rule that tests it as stated (fixed
before the run, statistics from :mod:`.verdicts`), the numbers with their intervals, and the
verdict "held", "not held" or "not testable here".
"""

from __future__ import annotations

import os
import platform
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .._version import __version__
from ..errors import InputError
from ..fsutil import write_files
from ..jsonutil import ResultMixin, dumps, to_jsonable
from ..report.reproduction import reproduction_files
from ..report.style import figure, figure_files
from ..validate import integer
from .paper import paper_value
from .verdicts import VERDICTS, verdict_of

SCHEMA = "memclaim.reproduction/3"  # 3: each of the paper's sentences judged: quote, test, numbers, 3-way verdict
#: the schemas of earlier versions whose files a run may replace (2: paper numbers without a verdict)
KNOWN_SCHEMAS = ("memclaim.reproduction/2", SCHEMA)


def versions() -> dict[str, str]:
    """Versions of the packages whose arithmetic or random streams the numbers depend on.

    >>> from memclaim.experiments.common import versions
    >>> sorted(versions())
    ['memclaim', 'numpy', 'python', 'scipy']
    """
    import scipy

    return {
        "memclaim": __version__,
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "python": platform.python_version(),
    }


def check_seed(seed: int) -> int:
    """The master seed as an int in [0, 2**63 - 1] (a DomainError naming the bad value otherwise).

    >>> from memclaim.experiments.common import check_seed
    >>> check_seed(7)
    7
    """
    return integer("seed", seed, minimum=0, maximum=2**63 - 1)


def rng_streams(seed: int, names: Sequence[str]) -> dict[str, np.random.Generator]:
    """Independent generators, one per name, from ``SeedSequence(seed).spawn(len(names))``.
    Adding a stream at the end leaves the earlier ones unchanged.

    >>> from memclaim.experiments.common import rng_streams
    >>> r = rng_streams(0, ["noise", "draws"])
    >>> int(r["noise"].integers(100)), int(rng_streams(0, ["noise"])["noise"].integers(100))
    (80, 80)
    """
    seed = check_seed(seed)
    children = np.random.SeedSequence(seed).spawn(len(names))
    return {n: np.random.default_rng(c) for n, c in zip(names, children)}


@dataclass(frozen=True)
class Comparison(ResultMixin):
    """One number of ours beside the paper's (from :mod:`.paper`): no verdict.

    ``row`` names the comparison within the reproduction (several rows may compare different
    numbers of ours, e.g. an exact derived value and a Monte-Carlo measurement, with one paper
    value ``key``). ``ours_se`` is the Monte-Carlo standard error of ours where ours is
    measured (None where ours is exact). Whether ours agrees with the paper is decided by the
    tests, with tolerances justified there (see :mod:`.paper`)."""

    row: str
    key: str
    quantity: str
    where: str
    paper: float
    paper_printed: str
    relation: str  # "=", ">=" (the paper states a lower bound), "<=" (an upper bound)
    same_scale: bool  # False: the paper's number is from other models / another scale
    ours: float
    difference: float  # ours - paper
    ours_se: float | None = None
    note: str = ""


def compare(
    row: str, key: str, ours: float, *, ours_se: float | None = None, note: str = ""
) -> Comparison:
    """Our number for ``row`` beside the paper's value ``key`` ([MX], :data:`.paper.PAPER`).

    >>> from memclaim.experiments.common import compare
    >>> c = compare("eta-star-k2", "staircase/eta-star-2", 0.63212)
    >>> c.paper, round(c.difference, 5), c.relation
    (0.632, 0.00012, '=')
    """
    p = paper_value(key)
    return Comparison(
        row,
        key,
        p.quantity,
        p.where,
        p.value,
        p.printed,
        p.relation,
        p.same_scale,
        float(ours),
        float(ours) - p.value,
        None if ours_se is None else float(ours_se),
        note,
    )


@dataclass(frozen=True)
class Check(ResultMixin):
    """A prediction of the theory (or an identity of the implementation) tested on our numbers
    (``passed``), with the evidence. A failed check is a defect: it sets ``memclaim reproduce``'s
    exit status. Where the check tests a sentence of the paper, ``quote`` is that sentence as the
    paper prints it ("[...]" marks a cut) and ``where`` its section or figure."""

    claim: str
    passed: bool
    detail: str
    false_alarm: str = ""  # the chance the check fails when the claim holds, if statistical
    quote: str = ""
    where: str = ""


def check(
    claim: str,
    passed: bool | np.bool_,
    detail: str,
    *,
    false_alarm: str = "",
    quote: str = "",
    where: str = "",
) -> Check:
    """A :class:`Check` of ``claim`` on this run's numbers (``passed`` coerced to a Python bool).

    >>> from memclaim.experiments.common import check
    >>> check("eta*_2 < tanh(eps)", 0.632 < 0.762, "0.632 vs 0.762", false_alarm="0 (exact)").passed
    True
    """
    return Check(claim, bool(passed), detail, false_alarm, quote, where)


@dataclass(frozen=True)
class PaperClaim(ResultMixin):
    """One sentence of the paper judged on this run (issue 24 item 2): ``quote`` is the sentence as
    the paper prints it ("[...]" marks a cut) and ``where`` its section or figure; ``test`` states
    the rule, fixed before the run, that decides it on this run's ``numbers`` (estimates with their
    intervals); ``verdict`` is "held", "not held" or "not testable here" (``held`` True, False or
    None), and ``evidence`` says why in words (for "not testable here", what the run lacks).

    Unlike a :class:`Check` (a guarantee, whose failure is a defect and sets the exit status), a
    sentence that does not hold is a finding about this run (another model, text and scale): the
    report says so, and nothing is tuned until it holds. ``key`` names the rule within the
    reproduction (stable, for the tests)."""

    key: str
    claim: str
    quote: str
    where: str
    test: str
    verdict: str
    held: bool | None
    evidence: str
    numbers: dict = field(default_factory=dict)


def paper_claim(
    key: str,
    claim: str,
    *,
    quote: str,
    where: str,
    test: str,
    held: bool | np.bool_ | None,
    evidence: str,
    numbers: dict | None = None,
) -> PaperClaim:
    """A :class:`PaperClaim`: the paper's sentence ``quote`` (at ``where``), judged by ``test`` on this
    run: ``held`` True ("held"), False ("not held") or None ("not testable here", ``evidence`` then
    says why), with the ``numbers`` it read.

    >>> from memclaim.experiments.common import paper_claim
    >>> c = paper_claim("members-repeat-more", "members repeat more", quote="members repeat more", where="[EM] §4",
    ...                 test="G > m/N", held=0.31 > 0.12, evidence="31% vs 12%")
    >>> c.verdict, c.held
    ('held', True)
    """
    if held is not None:
        held = bool(held)
    if not (key and claim and quote and where and test and evidence):
        raise InputError(
            f"paper claim {key!r}: key, claim, quote, where, test and evidence must all be given",
            hint="state the sentence, the rule and the evidence",
        )
    return PaperClaim(
        key, claim, quote, where, test, verdict_of(held), held, evidence, dict(numbers or {})
    )


def paper_caption(*, differences: Sequence[str], claims: Sequence[PaperClaim]) -> str:
    """What differs from the paper and each judged sentence's verdict, as a figure's caption
    (recorded in NAME.json, :func:`finish`), instead of text drawn into the image.

    >>> from memclaim.experiments.common import paper_caption, paper_claim
    >>> paper_caption(differences=["a 135M model"], claims=[paper_claim(
    ...     "x", "x", quote="x", where="[EM] §4", test="c", held=True, evidence="e")])
    'Differs from the paper: a 135M model. held: x (e).'
    """
    parts = ["Differs from the paper: " + "; ".join(differences) + "."] if differences else []
    parts += [f"{c.verdict}: {c.claim} ({c.evidence})." for c in claims]
    return " ".join(parts)


def paper_footer(
    fig: Any, *, differences: Sequence[str], claims: Sequence[PaperClaim], fontsize: float = 6.3
) -> None:
    """Write below the axes what differs from the paper and each judged sentence's verdict: the
    figure grows by the text's height, kept free of the constrained layout, so the axes keep their size.
    ``fig`` is a matplotlib Figure (typed ``Any``: matplotlib is imported only under report/).

    >>> from memclaim.experiments.common import new_figure, paper_claim, paper_footer
    >>> fig, ax = new_figure()
    >>> paper_footer(fig, differences=["a 135M model"], claims=[paper_claim("x", "x", quote="q", where="[EM] §4",
    ...                                                                     test="t", held=True, evidence="e")])
    >>> round(float(fig.get_figheight()), 2)  # 4.2 inches of axes, plus the two lines of text
    4.57
    """
    import textwrap

    lines = ["Differs from the paper: " + "; ".join(differences)] if differences else []
    lines += [f"{c.verdict}: {c.claim} ({c.evidence})" for c in claims]
    width = max(
        60, int(fig.get_figwidth() * 72 / (0.52 * fontsize))
    )  # characters per line at this size
    wrapped = [w for x in lines for w in textwrap.wrap(x, width=width, subsequent_indent="    ")]
    need = (len(wrapped) * 1.25 * fontsize / 72.0) + 0.15  # inches
    h = fig.get_figheight()
    fig.set_figheight(h + need)
    reserve = need / (h + need)
    engine = fig.get_layout_engine()
    if engine is not None and hasattr(engine, "set"):
        engine.set(rect=(0.0, reserve, 1.0, 1.0 - reserve))
    fig.text(
        0.01,
        reserve - 0.05 / (h + need),
        "\n".join(wrapped),
        ha="left",
        va="top",
        fontsize=fontsize,
        linespacing=1.25,
    )


def new_figure(ncols: int = 1, *, width: float = 6.0, height: float = 4.2) -> tuple[Any, Any]:
    """A Figure in memclaim's shared style (:mod:`memclaim.report.style`), without pyplot's
    global state (safe in threads and servers). Build the figure inside ``report.style.style()``
    so lines and legends get the style too. Returns (Figure, Axes), or (Figure, list of Axes)
    when ``ncols > 1`` (typed ``Any``: matplotlib is imported only under report/).

    >>> from memclaim.experiments.common import new_figure
    >>> fig, axes = new_figure(2)
    >>> float(fig.get_figwidth()), len(axes)
    (12.0, 2)
    """
    fig, axes = figure(width=width * ncols, height=height, ncols=ncols)
    return fig, (list(np.atleast_1d(axes)) if ncols > 1 else axes)


def finish(
    name: str,
    *,
    title: str,
    reproduces: Sequence[str],
    seed: int,
    quick: bool,
    streams: Sequence[str],
    settings: dict[str, Any],
    results: dict[str, Any],
    paper_numbers: Sequence[Comparison],
    checks: Sequence[Check],
    figure: Any,
    out_dir: str | os.PathLike,
    notes: Sequence[str] = (),
    paper_claims: Sequence[PaperClaim] = (),
    differences: Sequence[str] = (),
    caption: str | None = None,
) -> dict:
    """Assemble the result, write ``NAME.json`` and ``NAME.png`` into ``out_dir`` (created), and
    return the JSON-ready dict. ``figure`` is a matplotlib Figure (from :func:`new_figure`);
    ``caption`` (the words that go under the figure, kept out of the image) is recorded in the
    JSON.

    >>> from memclaim.experiments.common import check, finish, new_figure
    >>> fig, ax = new_figure()
    >>> res = finish("demo", title="a demo", reproduces=["[MX] Fig. 6"], seed=0, quick=True, streams=[],
    ...              settings={}, results={"x": 1.0}, paper_numbers=[], checks=[check("x > 0", True, "1.0")],
    ...              figure=fig, out_dir="reproductions")  # doctest: +SKIP
    >>> res["all_checks_passed"], res["files"]["json"]  # doctest: +SKIP
    (True, 'demo.json')
    """
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise InputError(
            f"--out {str(out)!r} exists and is not a folder",
            hint="give a folder (it is created if missing)",
        )
    out.mkdir(parents=True, exist_ok=True)
    payload = {
        "schema": SCHEMA,
        "name": name,
        "title": title,
        "reproduces": list(reproduces),
        "seed": check_seed(seed),
        "rng": {
            "scheme": "numpy.random.SeedSequence(seed).spawn(len(streams))",
            "streams": list(streams),
        },
        "quick": bool(quick),
        "versions": versions(),
        "settings": settings,
        "results": results,
        "paper_numbers": list(paper_numbers),
        "checks": list(checks),
        "all_checks_passed": all(c.passed for c in checks),
        **(
            {
                "paper_claims": list(paper_claims),
                "paper_claims_held": sum(c.held is True for c in paper_claims),
                "paper_claims_verdicts": {
                    v: sum(c.verdict == v for c in paper_claims) for v in VERDICTS
                },
                "differences_from_paper": list(differences),
            }
            if paper_claims or differences
            else {}
        ),
        "notes": list(notes),
        **({"caption": caption} if caption else {}),
        "files": {
            "json": f"{name}.json",
            "png": f"{name}.png",
            "vector": f"{name}.pdf",
            "markdown": f"{name}.md",
            "html": f"{name}.html",
        },
    }
    payload = to_jsonable(payload)

    # NAME.json, NAME.png (200 dpi), NAME.pdf, NAME.md and NAME.html as one change: all staged, then
    # renamed (a full disk leaves the old files)
    figs = figure_files(figure, name)
    write_files(
        out,
        {
            f"{name}.json": (dumps(payload, indent=2) + "\n").encode("utf-8"),
            **figs,
            **reproduction_files(payload, png=figs[f"{name}.png"]),
        },
        owned=lambda p: _own_reproduction(p, name),
    )
    return payload


def _own_reproduction(path: Path, name: str) -> bool:
    """NAME.json / NAME.png / NAME.md / NAME.html written by a memclaim version that kept no list of
    its outputs (NAME.json is a reproduction of that name, of this schema or an earlier one)."""
    import json

    try:
        d = json.loads((path.parent / f"{name}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(d, dict) and d.get("name") == name and d.get("schema") in KNOWN_SCHEMAS


def _ours_and_paper(p: dict, rel: str, se: str) -> str:
    """Ours, the paper's and their difference in one unit: the paper's printed percent makes all
    three percents (the difference in percentage points), else all are plain numbers.

    >>> _ours_and_paper({"ours": 0.6932, "paper_printed": "70.1%", "difference": -0.0078}, "", "")
    'ours 69.3%, paper 70.1% (diff -0.8 percentage points)'
    >>> _ours_and_paper({"ours": 0.63212, "paper_printed": "0.632", "difference": 0.00012}, "", "")
    'ours 0.63212, paper 0.632 (diff +0.00012)'
    """
    if str(p["paper_printed"]).strip().endswith("%"):
        pse = se.replace(" +- ", "") if se else ""
        se_pct = f" +- {100 * float(pse):.2g} pp" if pse else ""
        return (
            f"ours {100 * p['ours']:.1f}%{se_pct}, paper {rel}{p['paper_printed']} "
            f"(diff {100 * p['difference']:+.1f} percentage points)"
        )
    # a number read back from JSON may be the string "nan" (ours undefined on this run, e.g. no
    # target extracted): printed as it is
    if not all(isinstance(p[k], (int, float)) for k in ("ours", "difference")):
        g = lambda x, f: format(x, f) if isinstance(x, (int, float)) else str(x)  # noqa: E731
        return f"ours {g(p['ours'], '.6g')}{se}, paper {rel}{p['paper_printed']} (diff {g(p['difference'], '+.2g')})"
    return (
        f"ours {p['ours']:.6g}{se}, paper {rel}{p['paper_printed']} (diff {p['difference']:+.2g})"
    )


def summary_lines(result: dict) -> list[str]:
    """Human-readable lines: the paper numbers (ours vs paper, how close), the checks (with the
    paper's sentence where a check tests one), and each judged sentence of the paper: its verdict,
    the sentence, the test and what was found.

    >>> from memclaim.experiments.common import check, summary_lines
    >>> res = {"name": "staircase", "title": "k-copy canary", "quick": True, "reproduces": ["[MX] Fig. 6 left"],
    ...        "checks": [check("eta*_2 < tanh(eps)", True, "0.632 < 0.762").to_dict()]}
    >>> summary_lines(res)[-1]
    '    [pass] eta*_2 < tanh(eps): 0.632 < 0.762'
    """
    lines = [f"{result['name']}: {result['title']}" + ("  [quick]" if result.get("quick") else "")]
    lines.append("  reproduces: " + "; ".join(result.get("reproduces", [])))
    pn = result.get("paper_numbers", [])
    if pn:
        lines.append("  ours beside the paper (no verdict here: the tests hold the tolerances):")
        for p in pn:
            rel = {"=": "", ">=": ">= ", "<=": "<= "}[p["relation"]]
            se = f" +- {p['ours_se']:.2g}" if p.get("ours_se") is not None else ""
            side = (
                ""
                if p["same_scale"]
                else "  [side by side: the paper's number is from other models]"
            )
            lines.append(f"    {p['quantity']} ({p['where']}): {_ours_and_paper(p, rel, se)}{side}")
            if p.get("note"):
                lines.append(f"          {p['note']}")
    ch = result.get("checks", [])
    if ch:
        lines.append("  checks:")
        for c in ch:
            lines.append(f"    [{'pass' if c['passed'] else 'FAIL'}] {c['claim']}: {c['detail']}")
            if c.get("quote"):
                lines.append(f'        paper ({c["where"]}): "{c["quote"]}"')
    if result.get("differences_from_paper"):
        lines.append("  differs from the paper: " + "; ".join(result["differences_from_paper"]))
    pc = result.get("paper_claims", [])
    if pc:
        counts = ", ".join(f"{sum(c['verdict'] == v for c in pc)} {v}" for v in VERDICTS)
        lines.append(
            f"  the paper's sentences on this run ({counts}; a sentence that does not hold is a finding, "
            "not a failure):"
        )
        for c in pc:
            lines.append(f"    [{c['verdict']}] {c['claim']} ({c['where']})")
            lines.append(f'        paper: "{c["quote"]}"')
            lines.append(f"        test: {c['test']}")
            lines.append(f"        found: {c['evidence']}")
    for n in result.get("notes", []):
        lines.append(f"  note: {n}")
    files = result.get("files", {})
    if files:
        written = [files[k] for k in ("json", "png", "vector", "markdown", "html") if files.get(k)]
        lines.append(
            f"  wrote {', '.join(written[:-1])} and {written[-1]}"
            if len(written) > 1
            else f"  wrote {written[0]}"
        )
    return lines
