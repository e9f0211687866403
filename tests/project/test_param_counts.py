"""Issue 26: no public function of memclaim (``memclaim.__all__``, ``memclaim.api.__all__``) or of
the scoring floor (``run_scoring``) takes more than 15 explicit parameters; the rest are the
typed shortcuts of ``**options`` (tools/param_counts.py prints the counts)."""

from __future__ import annotations

import sys

from _paths import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import param_counts  # noqa: E402

LIMIT = 15


def test_no_public_function_takes_more_than_15_explicit_parameters():
    counts = param_counts.counts()
    assert {"score", "population", "census", "audit", "run_scoring"} <= set(counts)
    over = {name: n for name, n in counts.items() if n > LIMIT}
    assert not over, "more than 15 explicit parameters: " + ", ".join(
        f"{name} ({n})" for name, n in over.items()
    )


def test_the_count_leaves_the_shortcuts_out_and_counts_the_rest():
    def f(a, b=1, *args, c, d=2, **options):
        pass

    assert param_counts.explicit(f) == 4
