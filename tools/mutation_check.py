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


FPR = "tests/test_claims_conformal.py::test_fpr_guarantee_and_beta_law_by_simulation"

MUTATIONS = (
    Mutation("threshold-K+1", "tau is the (K+1)-th largest control (K itself reported right)",
             "claims/conformal.py", "threshold = float(desc[k - 1])", "threshold = float(desc[min(k, n - 1)])",
             (FPR,)),
    Mutation("threshold-K-1", "tau is the (K-1)-th largest control (K itself reported right)",
             "claims/conformal.py", "threshold = float(desc[k - 1])", "threshold = float(desc[max(k - 2, 0)])",
             (FPR,)),
    Mutation("rank-K+1", "the conformal rank is floor(alpha (N+1)) + 1",
             "claims/conformal.py", "k = floor_times(a, n + 1)  # [EM] Eq. 5, exact",
             "k = floor_times(a, n + 1) + 1", (FPR,)),
    Mutation("ge-for-gt", "a candidate is claimed at score >= tau instead of > tau",
             "claims/conformal.py", "claimed = cand > threshold  # strict >", "claimed = cand >= threshold",
             (FPR,)),
    Mutation("topm-one-more-guess", "the entropy sweep's list adversary wins with m + 1 guesses",
             "mechanisms/noisy_counts.py", "return n_above + position < m", "return n_above + position <= m",
             ("tests/test_experiments_reproduce.py::test_entropy_sweep_numbers",)),
    Mutation("paper-number-moved", "the paper's eta*_2 = 0.632 recorded as 0.642 (Fig. 6 left)",
             "experiments/paper.py", '"0.632", 0.632,', '"0.642", 0.642,',
             ("tests/test_experiments_reproduce.py::test_agrees_with_the_paper",)),
    Mutation("controls-as-members", "the controls' scores are used as the members' (nothing memorized)",
             "claims/conformal.py", '    n, j = ctrl.size, cand.size\n    binary_reason = None\n',
             '    cand = np.resize(ctrl, cand.shape)\n    n, j = ctrl.size, cand.size\n    binary_reason = None\n',
             ("tests/test_real_claims.py::test_population_kjv_verses_against_new_verses", "-m", "real")),
)


def pytest_cmd(tests: tuple[str, ...]) -> list[str]:
    return [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "--no-header", *tests]


def run_tests(tests: tuple[str, ...], src: Path) -> tuple[int, float, str]:
    env = dict(os.environ, PYTHONPATH=str(src) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.perf_counter()
    p = subprocess.run(pytest_cmd(tests), cwd=ROOT, env=env, capture_output=True, text=True)
    tail = (p.stdout + p.stderr).strip().splitlines()
    return p.returncode, time.perf_counter() - t0, tail[-1] if tail else ""


def mutated_copy(m: Mutation, tmp: Path) -> Path:
    dst = tmp / m.name / "src"
    shutil.copytree(ROOT / "src", dst, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    target = dst / "memclaim" / m.file
    text = target.read_text(encoding="utf-8")
    if text.count(m.old) != 1:
        raise SystemExit(f"error: mutation {m.name}: {m.old!r} occurs {text.count(m.old)} times in {m.file} "
                         "(expected once)\nfix: update the mutation table to the code")
    target.write_text(text.replace(m.old, m.new), encoding="utf-8")
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
            print(f"error: unknown mutation(s) {', '.join(map(repr, unknown))}\nfix: one of "
                  f"{', '.join(m.name for m in MUTATIONS)}", file=sys.stderr)
            return 2
        chosen = [m for m in MUTATIONS if m.name in names]
    if args.list:
        for m in chosen:
            print(f"{m.name:22s} {m.what}  [{m.file}; guarded by {' '.join(m.tests)}]")
        return 0
    ok = True
    with tempfile.TemporaryDirectory(prefix="memclaim-mutants-") as tmp:
        clean = Path(tmp) / "clean" / "src"
        shutil.copytree(ROOT / "src", clean, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        baselines: dict[tuple[str, ...], bool] = {}
        print(f"{'mutation':22s} {'baseline':9s} {'mutant':9s} {'seconds':>8s}  last line of the mutant's run")
        for m in chosen:
            if m.tests not in baselines:
                rc, _, _ = run_tests(m.tests, clean)
                baselines[m.tests] = rc == 0
            rc, secs, last = run_tests(m.tests, mutated_copy(m, Path(tmp)))
            killed = rc != 0
            ok &= killed and baselines[m.tests]
            print(f"{m.name:22s} {'passes' if baselines[m.tests] else 'FAILS':9s} "
                  f"{'killed' if killed else 'SURVIVED':9s} {secs:8.1f}  {last[:90]}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
