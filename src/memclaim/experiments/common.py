"""Shared plumbing for the reproductions of [MX] §8 (``memclaim reproduce NAME``).

Every reproduction is a function ``run(*, quick, seed, out_dir) -> dict`` that

- draws all randomness from ``numpy.random.SeedSequence(seed)`` split into named streams
  (:func:`rng_streams`), so the same seed gives the same numbers bit for bit on the same stack;
- writes ``NAME.json`` (every number, the seed and stream names, the settings, package versions,
  its numbers beside the paper's, and the checks of the theory's predictions) and
  ``NAME.png``, through :func:`finish`;
- returns the same JSON-ready dict.

The JSON holds no timestamps, paths or timings, so two runs with the same seed and stack produce
byte-identical files. Paper numbers are recorded
as :class:`Comparison`: ours beside the paper's value from :mod:`.paper`, no verdict; whether a
run agrees with the paper is for the tests to decide) and the theory's predictions tested on the
run's own numbers (each with its false-alarm rate) as :class:`Check`.
"""
from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .._version import __version__
from ..errors import InputError
from ..fsutil import write_files
from ..jsonutil import ResultMixin, dumps, to_jsonable
from ..report.style import figure, figure_files
from ..validate import integer
from .paper import paper_value

SCHEMA = "memclaim.reproduction/2"  # 2: paper numbers are comparisons without a verdict


def versions() -> dict[str, str]:
    """Versions of the packages whose arithmetic or random streams the numbers depend on.

    >>> from memclaim.experiments.common import versions
    >>> sorted(versions())
    ['memclaim', 'numpy', 'python', 'scipy']
    """
    import scipy

    return {"memclaim": __version__, "numpy": np.__version__, "scipy": scipy.__version__,
            "python": platform.python_version()}


def check_seed(seed: int) -> int:
    """The master seed as an int in [0, 2**63 - 1] (a DomainError naming the bad value otherwise).

    >>> from memclaim.experiments.common import check_seed
    >>> check_seed(7)
    7
    """
    return integer("seed", seed, minimum=0, maximum=2 ** 63 - 1)


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


def compare(row: str, key: str, ours: float, *, ours_se: float | None = None, note: str = "") -> Comparison:
    """Our number for ``row`` beside the paper's value ``key`` ([MX], :data:`.paper.PAPER`).

    >>> from memclaim.experiments.common import compare
    >>> c = compare("eta-star-k2", "staircase/eta-star-2", 0.63212)
    >>> c.paper, round(c.difference, 5), c.relation
    (0.632, 0.00012, '=')
    """
    p = paper_value(key)
    return Comparison(row, key, p.quantity, p.where, p.value, p.printed, p.relation, p.same_scale, float(ours),
                      float(ours) - p.value, None if ours_se is None else float(ours_se), note)


@dataclass(frozen=True)
class Check(ResultMixin):
    """A qualitative claim of the paper tested on our numbers (``passed``), with the evidence."""

    claim: str
    passed: bool
    detail: str
    false_alarm: str = ""  # the chance the check fails when the claim holds, if statistical


def check(claim: str, passed: bool | np.bool_, detail: str, *, false_alarm: str = "") -> Check:
    """A :class:`Check` of ``claim`` on this run's numbers (``passed`` coerced to a Python bool).

    >>> from memclaim.experiments.common import check
    >>> check("eta*_2 < tanh(eps)", 0.632 < 0.762, "0.632 vs 0.762", false_alarm="0 (exact)").passed
    True
    """
    return Check(claim, bool(passed), detail, false_alarm)


@dataclass(frozen=True)
class PaperClaim(ResultMixin):
    """One of the paper's qualitative empirical claims, and whether it held on this run ([EM]
    reproductions on other models and text). Unlike a :class:`Check` (a guarantee, whose failure
    is a defect and sets the exit status), a claim that does not hold is a finding: the report
    says so, and nothing is tuned until it holds. ``criterion`` states the yes/no rule, fixed
    before the run."""

    claim: str
    where: str
    held: bool
    criterion: str
    evidence: str


def paper_claim(claim: str, where: str, held: bool | np.bool_, *, criterion: str, evidence: str) -> PaperClaim:
    """A :class:`PaperClaim`: the paper's ``claim`` (cited at ``where``), whether it ``held`` on this
    run by the yes/no ``criterion`` fixed before the run, and the ``evidence``.

    >>> from memclaim.experiments.common import paper_claim
    >>> paper_claim("members repeat more", "[EM] §4", 0.31 > 0.12, criterion="G > m/N",
    ...             evidence="31% vs 12%").held
    True
    """
    return PaperClaim(claim, where, bool(held), criterion, evidence)


def paper_footer(fig: Any, *, differences: Sequence[str], claims: Sequence[PaperClaim], fontsize: float = 6.3) -> None:
    """Write below the axes what differs from the paper and which of its claims held (yes/no): the
    figure grows by the text's height, kept free of the constrained layout, so the axes keep their size.
    ``fig`` is a matplotlib Figure (typed ``Any``: matplotlib is imported only under report/).

    >>> from memclaim.experiments.common import new_figure, paper_claim, paper_footer
    >>> fig, ax = new_figure()
    >>> paper_footer(fig, differences=["a 135M model"], claims=[paper_claim("x", "[EM] §4", True, criterion="c",
    ...                                                                     evidence="e")])
    >>> round(float(fig.get_figheight()), 2)  # 4.2 inches of axes, plus the two lines of text
    4.57
    """
    import textwrap

    lines = ["Differs from the paper: " + "; ".join(differences)] if differences else []
    lines += [f"{'held' if c.held else 'did not hold'}: {c.claim} ({c.evidence})" for c in claims]
    width = max(60, int(fig.get_figwidth() * 72 / (0.52 * fontsize)))  # characters per line at this size
    wrapped = [w for x in lines for w in textwrap.wrap(x, width=width, subsequent_indent="    ")]
    need = (len(wrapped) * 1.25 * fontsize / 72.0) + 0.15  # inches
    h = fig.get_figheight()
    fig.set_figheight(h + need)
    reserve = need / (h + need)
    engine = fig.get_layout_engine()
    if engine is not None and hasattr(engine, "set"):
        engine.set(rect=(0.0, reserve, 1.0, 1.0 - reserve))
    fig.text(0.01, reserve - 0.05 / (h + need), "\n".join(wrapped), ha="left", va="top", fontsize=fontsize,
             linespacing=1.25)


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


def finish(name: str, *, title: str, reproduces: Sequence[str], seed: int, quick: bool,
           streams: Sequence[str], settings: dict[str, Any], results: dict[str, Any],
           paper_numbers: Sequence[Comparison], checks: Sequence[Check], figure: Any,
           out_dir: str | os.PathLike, notes: Sequence[str] = (), paper_claims: Sequence[PaperClaim] = (),
           differences: Sequence[str] = ()) -> dict:
    """Assemble the result, write ``NAME.json`` and ``NAME.png`` into ``out_dir`` (created), and
    return the JSON-ready dict. ``figure`` is a matplotlib Figure (from :func:`new_figure`).

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
        raise InputError(f"--out {str(out)!r} exists and is not a folder",
                         hint="give a folder (it is created if missing)")
    out.mkdir(parents=True, exist_ok=True)
    payload = {
        "schema": SCHEMA,
        "name": name,
        "title": title,
        "reproduces": list(reproduces),
        "seed": check_seed(seed),
        "rng": {"scheme": "numpy.random.SeedSequence(seed).spawn(len(streams))", "streams": list(streams)},
        "quick": bool(quick),
        "versions": versions(),
        "settings": settings,
        "results": results,
        "paper_numbers": list(paper_numbers),
        "checks": list(checks),
        "all_checks_passed": all(c.passed for c in checks),
        **({"paper_claims": list(paper_claims), "paper_claims_held": sum(c.held for c in paper_claims),
            "differences_from_paper": list(differences)} if paper_claims or differences else {}),
        "notes": list(notes),
        "files": {"json": f"{name}.json", "png": f"{name}.png", "vector": f"{name}.pdf"},
    }
    payload = to_jsonable(payload)

    # NAME.json, NAME.png (200 dpi) and NAME.pdf as one change: all staged, then renamed (a full
    # disk leaves the old files)
    write_files(out, {f"{name}.json": (dumps(payload, indent=2) + "\n").encode("utf-8"),
                      **figure_files(figure, name)}, owned=lambda p: _own_reproduction(p, name))
    return payload


def _own_reproduction(path: Path, name: str) -> bool:
    """NAME.json / NAME.png written by a memclaim version that kept no list of its outputs."""
    import json

    try:
        d = json.loads((path.parent / f"{name}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(d, dict) and d.get("name") == name and d.get("schema") == SCHEMA


def summary_lines(result: dict) -> list[str]:
    """Human-readable lines: the paper numbers (ours vs paper, how close) and the checks.

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
            side = "" if p["same_scale"] else "  [side by side: the paper's number is from other models]"
            # a number read back from JSON may be the string "nan" (ours undefined on this run, e.g. no
            # target extracted): printed as it is
            g = lambda x, f: format(x, f) if isinstance(x, (int, float)) else str(x)  # noqa: E731
            lines.append(f"    {p['quantity']} ({p['where']}): ours {g(p['ours'], '.6g')}{se}, paper {rel}"
                         f"{p['paper_printed']} (diff {g(p['difference'], '+.2g')}){side}")
            if p.get("note"):
                lines.append(f"          {p['note']}")
    ch = result.get("checks", [])
    if ch:
        lines.append("  checks:")
        for c in ch:
            lines.append(f"    [{'pass' if c['passed'] else 'FAIL'}] {c['claim']}: {c['detail']}")
    if result.get("differences_from_paper"):
        lines.append("  differs from the paper: " + "; ".join(result["differences_from_paper"]))
    pc = result.get("paper_claims", [])
    if pc:
        lines.append(f"  the paper's claims on this run ({result.get('paper_claims_held', 0)} of {len(pc)} held; "
                     "a claim that did not hold is a finding, not a failure):")
        for c in pc:
            lines.append(f"    [{'held' if c['held'] else 'did not hold'}] {c['claim']} ({c['where']}): {c['evidence']}")
    for n in result.get("notes", []):
        lines.append(f"  note: {n}")
    files = result.get("files", {})
    if files:
        written = [files[k] for k in ("json", "png", "vector") if files.get(k)]
        lines.append(f"  wrote {', '.join(written[:-1])} and {written[-1]}" if len(written) > 1
                     else f"  wrote {written[0]}")
    return lines
