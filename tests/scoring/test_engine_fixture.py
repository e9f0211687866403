"""CPU scores equal the ones the engine recorded before the GPU schedule existed
(tests/data/fixtures/engine_cpu_v1.npz, written once by tests/engine_fixture.py).

What is guaranteed (issue 24): on the CPU model, library versions and thread count the fixture was
recorded with (its meta), bit for bit (MKL's conditional-numerical-reproducibility mode, which
memclaim sets, makes a run reproducible there). On any other CPU or thread count the same float32
operations run in another order, and each CPU's value lies within its own rounding error of the
model's float64 value. That error is measured here, against the same model run in float64 on this
CPU, and each side gets 8 times the largest one measured (the errors of reordered float32 sums are
random-walk sized, about sqrt(n) u; Higham & Mary, SIAM J. Sci. Comput. 2019: a sum exceeds 8 of
them with probability below 1e-13) plus 1e-12 (the float64 twin's own libm differences); the
synthetic model is float64 throughout (relative 1e-12). Zero-probability tokens and ranks exactly,
greedy flags exactly except at near-ties (margin <= NEAR_TIE_MARGIN)."""

from __future__ import annotations

import json
import platform
from pathlib import Path

import numpy as np
import pytest

from engine_fixture import FIELDS, FIXTURE, score_cases, synthetic_lm, tiny_llama, unpack


@pytest.fixture(scope="module")
def recorded():
    import memclaim  # noqa: F401  (MKL strict mode before the first matmul)

    return dict(np.load(FIXTURE))


def _check(recorded, prefix, lm, lm64=None, **engine_kwargs):
    """The recorded scores of ``prefix`` against ``lm``'s now; ``lm64``: the same model in float64
    (None: ``lm`` is float64 itself), for the rounding error off the recording machine."""
    from memclaim.scoring.engine import StatSet

    meta = json.loads(str(recorded["meta"]))
    cases = unpack(recorded, prefix)
    assert cases, prefix
    now = score_cases(lm, cases, engine_kwargs=engine_kwargs)
    same = _same_machine(meta)
    exact = None if same or lm64 is None else score_cases(lm64, cases, engine_kwargs=engine_kwargs)
    fields = StatSet.of(engine_kwargs.get("stats", "all")).fields
    for name, *_ in cases:
        for f in FIELDS:
            if f not in fields:
                assert now[f"{name}/{f}"] is None
                continue
            want, got = recorded[f"{prefix}/{name}/{f}"], now[f"{name}/{f}"]
            assert got.dtype == want.dtype and got.shape == want.shape, (prefix, name, f)
            where = (prefix, name, f, meta["cpu"], meta["torch"])
            if same:  # bit for bit where the library guarantees it (see the module docstring)
                assert np.array_equal(got, want, equal_nan=True), where
                continue
            margin = now.get(f"{name}/min_margin")
            if f in ("greedy_match", "token_rank"):
                from memclaim.scoring.engine import NEAR_TIE_MARGIN

                clear = (
                    margin > NEAR_TIE_MARGIN
                    if (f == "greedy_match" and margin is not None)
                    else np.ones(want.shape, dtype=bool)
                )
                assert np.array_equal(got[clear], want[clear]), where
                continue
            fin = np.isfinite(want)
            assert np.array_equal(fin, np.isfinite(got)), where  # the same zero-probability tokens
            if exact is None:  # a float64 model: only libm's last bits differ
                np.testing.assert_allclose(
                    got[fin], want[fin], rtol=1e-12, atol=1e-12, err_msg=str(where)
                )
                continue
            err = np.abs(got[fin] - exact[f"{name}/{f}"][fin])  # this CPU's float32 rounding error
            tol = 8 * (float(err.max()) if err.size else 0.0) + 1e-12
            assert np.all(np.abs(got[fin] - want[fin]) <= 2 * tol), (
                where,
                float(np.max(np.abs(got[fin] - want[fin]))),
                2 * tol,
            )


def _cpu_model() -> str:
    try:
        return next(
            ln.split(":", 1)[1].strip()
            for ln in Path("/proc/cpuinfo").read_text().splitlines()
            if ln.startswith("model name")
        )
    except (OSError, StopIteration):
        return platform.processor()


def _same_machine(meta: dict) -> bool:
    import os

    import torch

    return (
        meta["cpu"] == _cpu_model()
        and meta["torch"] == torch.__version__
        and meta["threads"] == torch.get_num_threads()
        and os.environ.get("MKL_CBWR") == "AUTO,STRICT"
    )


def _tiny64():
    import torch

    from memclaim.models.hf import HFLanguageModel

    return HFLanguageModel(
        tiny_llama().model.double(), name="tiny-llama-64", unembed_dtype=torch.float64
    )


def test_tiny_llama_scores_equal_the_recorded_ones(recorded):
    _check(recorded, "tiny", tiny_llama(), _tiny64())


@pytest.mark.parametrize(
    "stats", ["census", "token_logprob+token_moments", "rank", "greedy", "policy_logq"]
)
def test_a_subset_of_statistics_has_the_recorded_bits(recorded, stats):
    """A census computes fewer statistics, each by the same operations: its log q, greedy flags
    and margins are the recorded bits too (a census unit and an audit unit agree exactly)."""
    _check(recorded, "tiny", tiny_llama(), _tiny64(), stats=stats)
    _check(recorded, "synthetic", synthetic_lm(), stats=stats)


def test_synthetic_scores_equal_the_recorded_ones(recorded):
    _check(recorded, "synthetic", synthetic_lm())


def test_the_fixture_exercises_ties_and_greedy_matches(recorded):
    """The recorded cases hold what the tie rules are about: exact argmax ties (margin 0),
    greedy matches, and zero-probability targets under truncating policies."""
    for prefix in ("tiny", "synthetic"):
        margins = np.concatenate(
            [recorded[f"{prefix}/{n}/min_margin"] for n, *_ in unpack(recorded, prefix)]
        )
        greedy = np.concatenate(
            [recorded[f"{prefix}/{n}/greedy_match"] for n, *_ in unpack(recorded, prefix)]
        )
        assert (margins == 0).any() and greedy.any(), prefix
        assert np.isneginf(recorded[f"{prefix}/equal/logq"]).any()


@pytest.mark.real
def test_smollm2_scores_equal_the_recorded_ones(recorded, smollm2):
    from memclaim.models import load_model

    lm64 = (
        None
        if _same_machine(json.loads(str(recorded["meta"])))
        else load_model("smollm2", load_weights=True, dtype="float64").lm
    )
    _check(recorded, "smollm2", smollm2.lm, lm64)
    _check(recorded, "smollm2", smollm2.lm, lm64, stats="census")
