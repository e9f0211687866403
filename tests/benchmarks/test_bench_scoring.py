"""benchmarks/bench_scoring.py's floor side is the engine's own work less the statistics: the
same body calls and the same unembedding calls (rows per call), so that the peer's time over
the floor's is a true ceiling on memclaim's speed-up with its bits (issue 30). Integration tier:
the built-in tiny GPT. Timings are never asserted."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from _paths import ROOT

pytestmark = pytest.mark.integration


class Recorder:
    """A language model that records the shapes of the body and unembedding calls made on it."""

    def __init__(self, lm):
        self._lm = lm
        self.calls: list[tuple[str, tuple[int, ...]]] = []

    def __getattr__(self, name):
        return getattr(self._lm, name)

    def forward_hidden(self, ids, **kw):
        self.calls.append(("body", tuple(ids.shape)))
        return self._lm.forward_hidden(ids, **kw)

    def logits(self, rows, **kw):
        self.calls.append(("unembed", tuple(rows.shape)))
        return self._lm.logits(rows, **kw)


def _bench():
    name = "bench_scoring_under_test"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, ROOT / "benchmarks" / "bench_scoring.py"
        )
        assert spec is not None and spec.loader is not None
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    return sys.modules[name]


def _windows(n: int, prompt: int, suffix: int, vocab: int):
    prompts = [[(7 * i + j) % vocab for j in range(prompt)] for i in range(n)]
    suffixes = [[(11 * i + 3 * j + 1) % vocab for j in range(suffix)] for i in range(n)]
    return prompts, suffixes


@pytest.mark.parametrize("chunk_rows", [None, 12])
def test_floor_makes_the_engines_body_and_unembedding_calls(toy, chunk_rows):
    from memclaim.decoding import parse_policies
    from memclaim.scoring.engine import TeacherForcingEngine

    bench = _bench()
    lm = toy.lm
    V = int(lm.vocab_size)
    chunk = 256 << 20 if chunk_rows is None else chunk_rows * 4 * V  # 12 rows: 2 windows a call
    prompts, suffixes = _windows(5, 9, 6, V)
    eng_lm, floor_lm = Recorder(lm), Recorder(lm)
    eng = TeacherForcingEngine(
        eng_lm, parse_policies(bench.POLICIES), stats="census", logit_chunk_bytes=chunk
    )
    for a in range(0, 5, 4):
        eng.score_batch(prompts[a : a + 4], suffixes[a : a + 4])
    assert bench.floor_pass(floor_lm, prompts, suffixes, 4, chunk_bytes=chunk) == []
    assert floor_lm.calls == eng_lm.calls
    assert [c for c in floor_lm.calls if c[0] == "body"] == [("body", (4, 14)), ("body", (1, 14))]
    if chunk_rows == 12:  # 4 windows of 6 rows: two calls of 12, then one of 6 padded to 12
        assert [c[1][0] for c in floor_lm.calls if c[0] == "unembed"] == [12, 12, 12]
