"""Reproductions of [MX] §8 and [EM] §4: one function per figure, each regenerating its numbers and plot.

Every reproduction is a module exposing ``run(*, quick: bool, seed: int, out_dir) -> dict`` that
writes ``NAME.json``, ``NAME.png`` / ``NAME.pdf`` and the report ``NAME.md`` / ``NAME.html`` (see
:mod:`.common`); every one shipped here is a :class:`~.skeleton.Reproduction` subclass (settings ->
data -> runs -> checks -> figure -> report) whose ``run`` is one call of its ``reproduce()``; each of the paper's sentences it judges is quoted and tested as stated, with the
statistics of :mod:`.verdicts` (held, not held, or not testable here). :data:`REPRODUCTIONS` maps the public
name to ``(module, description)``; modules are imported only when run, so a reproduction that
needs an optional stack (torch, a real model) never breaks the others. Later reproductions plug in
by adding an entry here (or calling :func:`register`).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable

from ..errors import InputError

#: name -> (module path, one-line description)
REPRODUCTIONS: dict[str, tuple[str, str]] = {
    "staircase": (
        "memclaim.experiments.staircase",
        "[MX] Fig. 6 left: k-copy canary under geometric noisy counts vs eta*_k and tanh(k eps/2)",
    ),
    "entropy-sweep": (
        "memclaim.experiments.entropy_sweep",
        "[MX] Fig. 6 right: extraction vs min-entropy against 1 - f_eps(kappa), H*, two canaries",
    ),
    "per-instance": (
        "memclaim.experiments.per_instance",
        "[MX] Fig. 8: per-instance calibration, randomized response and BSC families",
    ),
    "unlearning": (
        "memclaim.experiments.unlearning",
        "[MX] Table 4: GradDiff/NPO until the verifier says forgotten; extraction via rho and via c",
    ),
    "gated": (
        "memclaim.experiments.gated",
        "[MX] §8.2: the gated release; reference/loss audits at chance, extraction through rho = 1",
    ),
    "dp-calibration": (
        "memclaim.experiments.dp_calibration",
        "[MX] §8.2: DP-SGD over an eps grid, LOO memorization of k-copy canaries vs the caps",
    ),
    "trigger": (
        "memclaim.experiments.trigger",
        "[MX] Fig. 7: trigger pairs planted by SGD; extraction via rho 1 vs 0, local gaps at the noise floor",
    ),
    "camouflage": (
        "memclaim.experiments.camouflage",
        "[MX] Fig. 9: SGD on camouflage-tree data; flat survivor posterior, TF memorization 1/k - 1/v",
    ),
    "canary-floor": (
        "memclaim.experiments.canary_floor",
        "[MX] §8.2, Cor. 5.3: canaries bucketed by certified kappa below/above H*; guessing vs DP",
    ),
    "audit-table": (
        "memclaim.experiments.audit_table",
        "[MX] Fig. 12 + Fig. 10: six planted leaks through the audit-disagreement table; length sweep",
    ),
    # [EM] (extractable-memorization-from-first-principles) on SmolLM2 / Gemma 3 270M and KJV verses
    "parrot": (
        "memclaim.experiments.parrot",
        "[EM] Fig. 1, App. A.1: 'Repeat after me' on an instruct model; member and control rates, no claim",
    ),
    "greedy": (
        "memclaim.experiments.greedy",
        "[EM] Fig. 3: greedy binary scores at a short and a long suffix; floor alpha_N = (m+1)/(N+1)",
    ),
    "alpha-sweep": (
        "memclaim.experiments.alpha_sweep",
        "[EM] Fig. 4: top-40 alpha sweep: member rate, certified alpha_N, calibrated M with bands",
    ),
    "naive-vs-calibrated": (
        "memclaim.experiments.naive_vs_calibrated",
        "[EM] §4: naive greedy-match and fixed-threshold 'extractions' vs the calibrated test",
    ),
}


def register(name: str, module: str, description: str) -> None:
    """Add (or replace) a reproduction: ``module`` must define ``run(*, quick, seed, out_dir)``.

    >>> from memclaim.experiments import REPRODUCTIONS, register
    >>> register("my-figure", "mypackage.my_figure", "my figure, regenerated")
    >>> REPRODUCTIONS.pop("my-figure")  # (removed again: this example leaves the table as it was)
    ('mypackage.my_figure', 'my figure, regenerated')
    """
    REPRODUCTIONS[name] = (module, description)


# [EM] on real text (SmolLM2 / Gemma 3 270M, KJV Genesis against matched new prose; issue 16)
register(
    "book-census",
    "memclaim.experiments.book_census",
    "[EM] §5, Figs. 5, 6, 18: Genesis 1-3 vs a matched control; tau_doc, coverage, heatmap",
)
register(
    "budget-coverage",
    "memclaim.experiments.budget_coverage",
    "[EM] §6, Fig. 7, F.3: coverage under a query budget, verbatim vs near-verbatim",
)
register(
    "decontamination",
    "memclaim.experiments.decontamination",
    "[EM] App. D.2, §5: planted KJV quotations in the controls; census and test with/without",
)
# [EM] App. A.2: the adversarial compression ratio under the matched comparison (issue 29)
register(
    "acr",
    "memclaim.experiments.acr",
    "[EM] App. A.2: GCG/ACR on famous KJV lines vs new lines; 'succeeds on members and non-members'",
)


def get_runner(name: str) -> Callable[..., dict]:
    """The ``run`` function of reproduction ``name`` (InputError naming the known ones otherwise).

    >>> from memclaim.experiments import get_runner
    >>> get_runner("staircase").__module__
    'memclaim.experiments.staircase'
    """
    if name not in REPRODUCTIONS:
        raise InputError(
            f"unknown reproduction {name!r}", hint="one of: " + ", ".join(sorted(REPRODUCTIONS))
        )
    return importlib.import_module(REPRODUCTIONS[name][0]).run


def run(
    name: str, *, quick: bool = False, seed: int = 0, out_dir: str | os.PathLike = "reproductions"
) -> dict:
    """Run reproduction ``name`` and return its JSON-ready result (also written to ``out_dir``);
    what ``memclaim reproduce NAME [--quick] [--seed S] [--out DIR]`` runs.

    >>> from memclaim.experiments import run
    >>> res = run("staircase", quick=True, seed=0, out_dir="reproductions")  # doctest: +SKIP
    >>> res["name"], res["all_checks_passed"], res["files"]["json"]  # doctest: +SKIP
    ('staircase', True, 'staircase.json')
    """
    return get_runner(name)(quick=quick, seed=seed, out_dir=out_dir)


__all__ = ["REPRODUCTIONS", "register", "get_runner", "run"]
