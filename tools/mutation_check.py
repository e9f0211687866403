"""Mutation check: do the tests that guard memclaim's statistical claims fail when the code is broken?

Each mutation below is a deliberate bug a reviewer would try first (issue 17: a wrong conformal
rank, >= for >, a simulated attack that makes one guess too many, a paper number moved, the
controls' scores used as members). For each one this script copies ``src/`` to a temporary
folder, applies the one-line change (the old text must occur exactly once, or the script stops),
runs the tests that guard it against the mutated copy (``PYTHONPATH`` puts the copy ahead of the
installed checkout) and reports whether they failed ("killed") or passed ("SURVIVED"). It runs the
same tests on the unmutated code first: they must pass there, or a kill would mean nothing.

    python tools/mutation_check.py                # every mutation (the real-tier one scores SmolLM2)
    python tools/mutation_check.py --list
    python tools/mutation_check.py --only rank-K+1,ge-for-gt

Exit status 0 when every mutation is killed and every baseline passes, 1 otherwise. Nothing in
the checkout is changed. Written by hand: mutation tools (mutmut, cosmic-ray) mutate at random
over a whole package; here each mutation is a named bug tied to the test meant to catch it.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Mutation:
    name: str
    what: str  # the bug, in words
    file: str  # under src/memclaim
    old: str
    new: str
    tests: tuple[str, ...]  # pytest node ids / options that must fail under the mutation


FPR = "tests/claims/test_claims_conformal.py::test_fpr_guarantee_and_beta_law_by_simulation"
BUDGET_POP = "tests/claims/test_claims_budget.py::test_population_budget_view_hand_values_at_tau_and_at_the_realistic_budget"
BUDGET_CENSUS = (
    "tests/claims/test_claims_budget.py::"
    "test_census_budget_view_hand_values_and_coverage_at_the_realistic_budget_is_at_most_memorized"
)
SWEEP_BAND = "tests/claims/test_claims_conformal.py::test_sweep_beta_band_is_the_beta_k_n_minus_k_plus_1_law_by_hand"
FROZEN_JSON = "tests/cli/test_cli_json_unchanged.py::test_cli_json_and_reports_are_unchanged"
_BAND = (
    "b_lo = stats.beta.ppf((1 - confidence) / 2, grid, n - grid + 1)\n"
    "    b_hi = stats.beta.ppf((1 + confidence) / 2, grid, n - grid + 1)"
)

MUTATIONS = (
    Mutation(
        "threshold-K+1",
        "tau is the (K+1)-th largest control (K itself reported right)",
        "claims/conformal.py",
        "threshold = float(desc[k - 1])",
        "threshold = float(desc[min(k, n - 1)])",
        (FPR,),
    ),
    Mutation(
        "threshold-K-1",
        "tau is the (K-1)-th largest control (K itself reported right)",
        "claims/conformal.py",
        "threshold = float(desc[k - 1])",
        "threshold = float(desc[max(k - 2, 0)])",
        (FPR,),
    ),
    Mutation(
        "rank-K+1",
        "the conformal rank is floor(alpha (N+1)) + 1",
        "claims/conformal.py",
        "k = floor_times(a, n + 1)  # [EM] Eq. 5, exact",
        "k = floor_times(a, n + 1) + 1",
        (FPR,),
    ),
    Mutation(
        "ge-for-gt",
        "a candidate is claimed at score >= tau instead of > tau",
        "claims/conformal.py",
        "claimed = cand > threshold  # strict >",
        "claimed = cand >= threshold",
        (FPR,),
    ),
    Mutation(
        "topm-one-more-guess",
        "the entropy sweep's list adversary wins with m + 1 guesses",
        "mechanisms/noisy_counts.py",
        "return n_above + position < m",
        "return n_above + position <= m",
        ("tests/experiments/test_experiments_reproduce.py::test_entropy_sweep_numbers",),
    ),
    Mutation(
        "paper-number-moved",
        "the paper's eta*_2 = 0.632 recorded as 0.642 (Fig. 6 left)",
        "experiments/paper.py",
        '"0.632", 0.632,',
        '"0.642", 0.642,',
        ("tests/experiments/test_experiments_reproduce.py::test_agrees_with_the_paper",),
    ),
    Mutation(
        "controls-as-members",
        "the controls' scores are used as the members' (nothing memorized)",
        "claims/conformal.py",
        "    n, j = ctrl.size, cand.size\n    binary_reason = None\n",
        "    cand = np.resize(ctrl, cand.shape)\n    n, j = ctrl.size, cand.size\n    binary_reason = None\n",
        (
            "tests/claims/test_real_claims.py::test_population_kjv_verses_against_new_verses",
            "-m",
            "real",
        ),
    ),
    # issue 24 item 4: wrong lines that passed the targeted tests before; each now has a hand-value test
    Mutation(
        "budget-realistic-controls-below-tau",
        "the population budget view at the realistic budget counts controls extractable but below tau",
        "claims/budget.py",
        "a2 = int(np.count_nonzero((ctrl > log_tau) & (ctrl >= lr)))",
        "a2 = int(np.count_nonzero(ctrl >= lr))",
        (BUDGET_POP,),
    ),
    Mutation(
        "budget-control-memorized-at-tau",
        "the budget view's control memorized rate counts the K-th control at tau",
        "claims/budget.py",
        "km = ctrl[ctrl > log_tau]",
        "km = ctrl[ctrl >= log_tau]",
        (BUDGET_POP,),
    ),
    Mutation(
        "budget-control-memorized-at-tau-json",
        "the same bug, against the frozen CLI JSON alone",
        "claims/budget.py",
        "km = ctrl[ctrl > log_tau]",
        "km = ctrl[ctrl >= log_tau]",
        (FROZEN_JSON,),
    ),
    Mutation(
        "census-budget-realistic-no-tau",
        "the census budget view (heat segments) at the realistic budget drops tau_doc",
        "claims/budget.py",
        "at_real = float(ws[up & (hs >= lr)].sum() / L)",
        "at_real = float(ws[hs >= lr].sum() / L)",
        (BUDGET_CENSUS,),
    ),
    Mutation(
        "census-budget-realistic-no-tau-array",
        "the census budget view (per-character array) at the realistic budget drops tau_doc",
        "claims/budget.py",
        "at_real = float(np.count_nonzero((h > log10_tau) & (h >= lr)) / hs.size)",
        "at_real = float(np.count_nonzero(h >= lr) / hs.size)",
        (BUDGET_CENSUS,),
    ),
    Mutation(
        "tpr-bootstrap-lt-for-le",
        "compare_tprs' bootstrap p counts d* < 0 instead of d* <= 0",
        "audits/metrics.py",
        "pg = (1 + np.count_nonzero(d <= 0)) / (b_count + 1)",
        "pg = (1 + np.count_nonzero(d < 0)) / (b_count + 1)",
        (
            "tests/audits/test_audits_metrics.py::test_compare_tprs_bootstrap_counts_tied_replicates_against_the_alternative",
        ),
    ),
    Mutation(
        "census-coverage-at-tau",
        "census coverage counts characters at exactly tau_doc (strict > dropped)",
        "claims/census.py",
        "covered = int(heat.chars_above([th.log10_tau])[0])",
        "covered = int(heat.chars_above([th.log10_tau], strict=False)[0])",
        (
            "tests/claims/test_claims_census.py::test_a_window_scoring_exactly_tau_doc_is_not_covered",
        ),
    ),
    Mutation(
        "global-census-first-spans",
        "global_census decontaminates every control with the first pair's spans",
        "claims/census.py",
        "ex = exclude_spans[i] if i < len(exclude_spans) else ()",
        "ex = exclude_spans[0] if exclude_spans else ()",
        (
            "tests/claims/test_claims_census.py::test_global_census_decontaminates_each_control_with_its_own_spans",
        ),
    ),
    Mutation(
        "sweep-beta-band-N-K",
        "the alpha sweep's band on alpha* from Beta(K, N-K) instead of Beta(K, N-K+1)",
        "claims/conformal.py",
        _BAND,
        _BAND.replace("n - grid + 1", "n - grid"),
        (SWEEP_BAND,),
    ),
    Mutation(
        "sweep-beta-band-N-K-json",
        "the same bug, against the frozen CLI JSON alone",
        "claims/conformal.py",
        _BAND,
        _BAND.replace("n - grid + 1", "n - grid"),
        (FROZEN_JSON,),
    ),
    Mutation(
        "store-orphan-footer-only",
        "resume adopts an orphan unit file whose footer reads (its data pages unread)",
        "store/store.py",
        "self._check_unit_body(path, meta)   # the data pages too, not only the footer",
        "pass  # the footer only",
        ("tests/store/test_store.py::test_an_unreadable_orphan_unit_is_scored_again",),
    ),
    # issue 24 item 5
    Mutation(
        "greedy-rate-subtracts-K",
        "greedy scores' calibrated rate subtracts K/(N+1), not the floor (m+1)/(N+1)",
        "claims/conformal.py",
        'cal = gen.shifted(-rates.alpha_n, method_suffix=", shifted by -alpha_N = -(m+1)',
        'cal = gen.shifted(-float(alpha_n), method_suffix=", shifted by -alpha_N = -(m+1)',
        (
            "tests/claims/test_claims_conformal.py::test_greedy_calibrated_rate_subtracts_the_floor_everywhere",
        ),
    ),
)


def pytest_cmd(tests: tuple[str, ...]) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-x",
        "-p",
        "no:cacheprovider",
        "--no-header",
        *tests,
    ]


def run_tests(tests: tuple[str, ...], src: Path) -> tuple[int, float, str]:
    env = dict(os.environ, PYTHONPATH=str(src) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.perf_counter()
    p = subprocess.run(pytest_cmd(tests), cwd=ROOT, env=env, capture_output=True, text=True)
    tail = (p.stdout + p.stderr).strip().splitlines()
    return p.returncode, time.perf_counter() - t0, tail[-1] if tail else ""


def occurrences(text: str, old: str) -> list[tuple[int, int]]:
    r"""Where ``old`` occurs in ``text`` as code, whatever the formatter did to it: blanks and line
    breaks may appear or vanish between any two characters, and either quote matches either
    (ruff format rewraps long lines, normalizes spacing and quotes; issue 26 item 6). Spans.

    >>> occurrences("x = f(a,\n      'b')  # c", 'f(a, "b")')
    [(4, 19)]
    """
    chars = ["[\"']" if c in "'\"" else re.escape(c) for c in old if not c.isspace()]
    return [mt.span() for mt in re.finditer(r"\s*".join(chars), text)]


def mutated_copy(m: Mutation, tmp: Path) -> Path:
    dst = tmp / m.name / "src"
    shutil.copytree(ROOT / "src", dst, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    target = dst / "memclaim" / m.file
    text = target.read_text(encoding="utf-8")
    spans = occurrences(text, m.old)
    if len(spans) != 1:
        raise SystemExit(
            f"error: mutation {m.name}: {m.old!r} occurs {len(spans)} times in {m.file} "
            "(expected once)\nfix: update the mutation table to the code"
        )
    ((start, end),) = spans
    target.write_text(text[:start] + m.new + text[end:], encoding="utf-8")
    return dst


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help="comma-separated mutation names")
    ap.add_argument("--list", action="store_true", help="list the mutations and exit")
    args = ap.parse_args(argv)
    chosen = list(MUTATIONS)
    if args.only is not None:
        names = args.only.split(",")
        unknown = sorted(set(names) - {m.name for m in MUTATIONS})
        if unknown:
            print(
                f"error: unknown mutation(s) {', '.join(map(repr, unknown))}\nfix: one of "
                f"{', '.join(m.name for m in MUTATIONS)}",
                file=sys.stderr,
            )
            return 2
        chosen = [m for m in MUTATIONS if m.name in names]
    if args.list:
        for m in chosen:
            print(f"{m.name:22s} {m.what}  [{m.file}; guarded by {' '.join(m.tests)}]")
        return 0
    ok = True
    with tempfile.TemporaryDirectory(prefix="memclaim-mutants-") as tmp:
        clean = Path(tmp) / "clean" / "src"
        shutil.copytree(
            ROOT / "src", clean, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
        )
        baselines: dict[tuple[str, ...], bool] = {}
        print(
            f"{'mutation':22s} {'baseline':9s} {'mutant':9s} {'seconds':>8s}  last line of the mutant's run"
        )
        for m in chosen:
            if m.tests not in baselines:
                rc, _, _ = run_tests(m.tests, clean)
                baselines[m.tests] = rc == 0
            rc, secs, last = run_tests(m.tests, mutated_copy(m, Path(tmp)))
            killed = rc != 0
            ok &= killed and baselines[m.tests]
            print(
                f"{m.name:22s} {'passes' if baselines[m.tests] else 'FAILS':9s} "
                f"{'killed' if killed else 'SURVIVED':9s} {secs:8.1f}  {last[:90]}",
                flush=True,
            )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
