"""What two float32 runs of the same computation may differ by (issue 24), for tests that compare
across thread counts, BLAS kernels or CPUs.

MKL guarantees bit-identical results run to run for a fixed number of threads (its conditional
numerical reproducibility mode, which memclaim sets), and across thread counts only in its strict
mode on Intel's AVX2 / AVX-512 code branches: on an AMD EPYC a 3-row product at 3 threads differs
in its last bits from the same rows at 1 or 2. Another thread count or CPU sums the same terms in
another order, and each order's result lies within its own rounding error of the exact (float64)
value. :func:`assert_within_rounding` measures that error on this CPU against the computation in
float64 and allows each side ``factor`` times the largest error measured: reordered float32 sums
err like random walks, about sqrt(n) u (Higham & Mary, SIAM J. Sci. Comput. 41 (2019)), and 8 of
them are exceeded with probability below 1e-13.
"""

from __future__ import annotations

import numpy as np

FACTOR = 8.0
FLOOR = 1e-12  # the float64 reference's own last bits


def within_rounding(got, want, exact, *, factor: float = FACTOR) -> tuple[bool, float, float]:
    """(ok, largest |got - want|, allowed) for two float32 results of one computation and its float64
    value ``exact``: |got - want| <= 2 (factor max|got - exact| + FLOOR), elementwise where finite;
    the non-finite entries (-inf: zero probability) must agree exactly."""
    got, want, exact = (np.asarray(a, dtype=np.float64) for a in (got, want, exact))
    fin = np.isfinite(want)
    if not np.array_equal(fin, np.isfinite(got)) or not np.array_equal(got[~fin], want[~fin]):
        return False, float("inf"), 0.0
    err = np.abs(got[fin] - exact[fin])
    allowed = 2 * (factor * (float(err.max()) if err.size else 0.0) + FLOOR)
    diff = float(np.max(np.abs(got[fin] - want[fin]))) if err.size else 0.0
    return diff <= allowed, diff, allowed


def assert_within_rounding(got, want, exact, *, what: str = "", factor: float = FACTOR) -> None:
    ok, diff, allowed = within_rounding(got, want, exact, factor=factor)
    assert ok, f"{what}: differ by {diff:.3g}, more than two float32 runs may ({allowed:.3g})"
