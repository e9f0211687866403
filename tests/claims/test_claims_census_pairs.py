"""claims/census_pairs.py ([EM] §5, §7): censuses of several pairs, the procedure checked across
pairs, the global threshold the most conservative; memclaim/procedure.py's stored-field list."""

from __future__ import annotations

import numpy as np
import pytest

from memclaim.claims.census import WindowScores, census, census_threshold
from memclaim.claims.census_pairs import census_of_pairs
from memclaim.errors import InputError, ProcedureMismatchError
from memclaim.procedure import (
    STORED_PROCEDURE_MAY_DIFFER,
    procedure_differences,
    require_same_procedure,
)


def _ws(mean, name, n=40, seed=0):
    rng = np.random.default_rng(seed)
    return WindowScores.from_arrays(
        rng.normal(mean, 2, n), np.arange(n) * 5, np.arange(n) * 5 + 5, doc_length=5 * n, name=name
    )


def test_each_pair_alone_equals_the_single_census_and_global_is_most_conservative():
    pairs = [
        {"document": _ws(-10, "d1", seed=1), "control": _ws(-30, "c1", seed=2)},
        {"document": _ws(-12, "d2", seed=3), "control": _ws(-20, "c2", seed=4)},
    ]
    per = census_of_pairs(pairs, budget_delta=None)
    for p, r in zip(pairs, per.results):
        single = census(p["document"], p["control"], threshold=census_threshold(p["control"]))
        assert r.log10_tau == single.log10_tau and r.coverage == single.coverage
    assert per.global_threshold is None and per.budgets == (None, None)
    g = census_of_pairs(pairs, use_global_threshold=True)
    assert g.global_threshold.log10_tau == max(t.log10_tau for t in per.thresholds)
    assert all(r.log10_tau == g.global_threshold.log10_tau for r in g.results)
    assert "most conservative" in g.global_note and all(b is not None for b in g.budgets)


def test_procedures_must_match_within_and_across_pairs():
    proc = {
        "policy": "full",
        "model": {"fingerprint": "a", "name": "x"},
        "policies_scored": ["full"],
    }
    other = {**proc, "model": {"fingerprint": "b", "name": "x"}}
    named = {
        **proc,
        "model": {"fingerprint": "a", "name": "y"},
        "policies_scored": ["full", "greedy"],
    }
    base = {"document": _ws(-10, "d"), "control": _ws(-30, "c")}
    ok = census_of_pairs(
        [{**base, "procedure_document": proc, "procedure_control": named}],
        procedure_ignore=STORED_PROCEDURE_MAY_DIFFER,
    )
    assert ok.procedure == proc
    with pytest.raises(ProcedureMismatchError, match="fingerprint"):
        census_of_pairs([{**base, "procedure_document": proc, "procedure_control": other}])
    with pytest.raises(ProcedureMismatchError, match="fingerprint"):
        census_of_pairs(
            [{**base, "procedure_document": proc}, {**base, "procedure_document": other}]
        )
    with pytest.raises(InputError, match="no document pairs"):
        census_of_pairs([])
    assert procedure_differences(proc, other) and not procedure_differences(proc, dict(proc))
    require_same_procedure(proc, named, ignore=STORED_PROCEDURE_MAY_DIFFER)
