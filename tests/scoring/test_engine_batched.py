"""The batched (GPU) schedule, run on the CPU: equal to the CPU schedule within the stated float
tolerance, exact against slow float64 references, branch-free, and the statistics selection."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch

from engine_fixture import TINY_VOCAB, synthetic_lm, tiny_llama
from memclaim.decoding import parse_policies, policy_logprobs
from memclaim.errors import InputError
from memclaim.models.hf import HFLanguageModel
from memclaim.scoring.engine import (
    ALL_STATS,
    BATCHED_TOLERANCE,
    CENSUS_STATS,
    NEAR_TIE_MARGIN,
    STAT_NAMES,
    BatchScores,
    StatSet,
    TeacherForcingEngine,
    auto_batch_size,
    window_activation_bytes,
)

POLICIES = parse_policies(
    [
        "full",
        "greedy",
        "top-k:1",
        "top-k:3",
        "top-k:40",
        "top-p:0.8",
        "temperature:0.7",
        "top-k:3,temperature:0.7",
        "top-p:0.9,temperature:1.3",
        "top-k:5,top-p:0.9",
    ]
)
FIELDS = (
    "logq",
    "token_logq",
    "greedy_match",
    "min_margin",
    "token_logprob",
    "token_mean",
    "token_std",
    "token_rank",
)


@pytest.fixture(scope="module")
def tiny():
    import memclaim  # noqa: F401  (MKL strict mode)

    return tiny_llama()


def _windows(vocab, n, lp, ls, seed=0, ragged=False):
    rng = np.random.default_rng(seed)
    lens = rng.integers(1, lp + 1, n) if ragged else [lp] * n
    return (
        [[0] + [int(v) for v in rng.integers(1, vocab, k)] for k in lens],
        [[int(v) for v in rng.integers(1, vocab, ls)] for _ in range(n)],
    )


def _score(
    lm, prompts, suffixes, *, schedule, batch=None, stats=ALL_STATS, policies=POLICIES, **kw
):
    eng = TeacherForcingEngine(lm, policies, schedule=schedule, stats=stats, **kw)
    batch = batch or len(prompts)
    return BatchScores.concat(
        [
            eng.score_batch(prompts[a : a + batch], suffixes[a : a + batch])
            for a in range(0, len(prompts), batch)
        ]
    )


def _assert_close(a: BatchScores, b: BatchScores, *, atol, rtol, near_tie=NEAR_TIE_MARGIN):
    """a ~ b: finite values within atol + rtol|.|, the same zero-probability tokens, the same
    greedy flags and ranks except where a top-1/top-2 margin is within ``near_tie``."""
    for f in ("token_logq", "token_logprob", "token_mean", "token_std"):
        x, y = getattr(a, f), getattr(b, f)
        if x is None:
            assert y is None, f
            continue
        assert np.array_equal(np.isfinite(x), np.isfinite(y)), f
        fin = np.isfinite(x)
        np.testing.assert_allclose(x[fin], y[fin], atol=atol, rtol=rtol, err_msg=f)
    if a.logq is not None:
        fin = np.isfinite(a.logq)
        assert np.array_equal(fin, np.isfinite(b.logq))
        S = a.token_logq.shape[-1]
        np.testing.assert_allclose(a.logq[fin], b.logq[fin], atol=S * atol, rtol=rtol)
    if a.min_margin is not None:
        np.testing.assert_allclose(a.min_margin, b.min_margin, atol=atol, rtol=rtol)
    if a.greedy_match is not None:
        clear = (
            a.min_margin > near_tie if a.min_margin is not None else np.ones_like(a.greedy_match)
        )
        assert np.array_equal(a.greedy_match[clear], b.greedy_match[clear])
    if a.token_rank is not None:
        assert np.array_equal(a.token_rank, b.token_rank)


# --------------------------------------------------------------------------- batched vs CPU schedule
@pytest.mark.parametrize("ragged", [False, True])
def test_batched_schedule_equals_cpu_schedule_on_tiny_llama(tiny, ragged):
    prompts, suffixes = _windows(TINY_VOCAB, 9, 14, 11, seed=1 + ragged, ragged=ragged)
    cpu = _score(tiny, prompts, suffixes, schedule="cpu-invariant", batch=4)
    for batch, chunk in (
        (9, 256 << 20),
        (4, 7 * TINY_VOCAB * 4),
        (1, 256 << 20),
    ):  # chunks cut across windows
        bat = _score(
            tiny, prompts, suffixes, schedule="batched", batch=batch, logit_chunk_bytes=chunk
        )
        _assert_close(bat, cpu, **BATCHED_TOLERANCE)
    # the tiny model's duplicated unembedding rows make exact argmax ties: both take the first index
    assert (cpu.min_margin == 0).any()


def test_batched_schedule_equals_cpu_schedule_on_exact_ties():
    """SyntheticLM's quantized float64 logits tie everywhere (top-k boundary and argmax): the two
    schedules agree to float64 rounding and break every tie the same way."""
    lm = synthetic_lm()
    prompts, suffixes = _windows(lm.vocab_size, 7, 5, 6, seed=4)
    cpu = _score(lm, prompts, suffixes, schedule="cpu-invariant")
    bat = _score(lm, prompts, suffixes, schedule="batched", logit_chunk_bytes=5 * lm.vocab_size * 4)
    _assert_close(bat, cpu, atol=1e-12, rtol=1e-12, near_tie=-1.0)
    assert np.array_equal(bat.greedy_match, cpu.greedy_match) and (cpu.min_margin == 0).all()


def test_batched_schedule_equals_cpu_schedule_on_gpt2(random_model):
    lm = random_model.lm
    prompts, suffixes = _windows(lm.vocab_size, 6, 20, 9, seed=3, ragged=True)
    cpu = _score(lm, prompts, suffixes, schedule="cpu-invariant")
    bat = _score(lm, prompts, suffixes, schedule="batched", batch=4)
    _assert_close(bat, cpu, **BATCHED_TOLERANCE)


# --------------------------------------------------------------------------- slow references
def _reference(lm64, prompt, suffix, policy):
    """Obviously correct: the whole unpadded sequence through a float64 copy of the model, then per
    token the policy's full log-distribution in float64 (memclaim.decoding.policy_logprobs)."""
    ids = torch.tensor([list(prompt) + list(suffix[:-1])])
    with torch.inference_mode():
        h, _ = lm64.forward_hidden(ids)
        z = lm64.logits(h[0, len(prompt) - 1 :])  # [S, V] float64
    toks = [float(policy_logprobs(z[j : j + 1], policy)[0, t]) for j, t in enumerate(suffix)]
    return toks, z


def test_batched_schedule_against_float64_per_token_reference(tiny):
    m64 = copy.deepcopy(tiny.model).double()
    lm64 = HFLanguageModel(m64, name="tiny64", unembed_dtype=torch.float64)
    prompts, suffixes = _windows(TINY_VOCAB, 5, 9, 7, seed=9, ragged=True)
    bat = _score(tiny, prompts, suffixes, schedule="batched")
    for i, (p, s) in enumerate(zip(prompts, suffixes)):
        for j, pol in enumerate(POLICIES):
            toks, z = _reference(lm64, p, s, pol)
            toks = np.array(toks)
            # the float32 model against float64: zero-probability tokens agree except at a
            # top-k/top-p boundary within float32 rounding (none in these windows)
            assert np.array_equal(np.isfinite(toks), np.isfinite(bat.token_logq[i, j])), (
                i,
                pol.spec,
            )
            fin = np.isfinite(toks)
            np.testing.assert_allclose(
                bat.token_logq[i, j][fin], toks[fin], atol=1e-4, err_msg=pol.spec
            )
        logp = torch.log_softmax(z, -1).numpy()
        tgt = np.array(s)
        np.testing.assert_allclose(bat.token_logprob[i], logp[np.arange(len(s)), tgt], atol=1e-4)
        p_ = np.exp(logp)
        mean = (p_ * logp).sum(-1)
        np.testing.assert_allclose(bat.token_mean[i], mean, atol=1e-4)
        np.testing.assert_allclose(
            bat.token_std[i], np.sqrt((p_ * (logp - mean[:, None]) ** 2).sum(-1)), atol=1e-4
        )
        zn = z.numpy()
        assert np.array_equal(
            bat.token_rank[i], 1 + (zn > zn[np.arange(len(s)), tgt][:, None]).sum(-1)
        )


def test_batched_schedule_equals_brute_force_on_synthetic():
    """Exact float64 logits with many ties: every policy's per-token log q equals the brute-force
    one-context-at-a-time float64 value (the greedy policy included: torch.argmax's first index)."""
    lm = synthetic_lm()
    prompts, suffixes = _windows(lm.vocab_size, 6, 4, 5, seed=2)
    g = list(prompts[0])
    for _ in range(5):
        g.append(int(np.argmax(lm.next_logits(g))))  # np.argmax: first maximal index
    suffixes[0] = g[len(prompts[0]) :]
    out = _score(lm, prompts, suffixes, schedule="batched", logit_chunk_bytes=7 * lm.vocab_size * 4)
    for i, (p, s) in enumerate(zip(prompts, suffixes)):
        ctx = list(p)
        for k, t in enumerate(s):
            z = torch.tensor(lm.next_logits(ctx))[None]
            for j, pol in enumerate(POLICIES):
                want = float(policy_logprobs(z, pol)[0, t])
                got = out.token_logq[i, j, k]
                assert (got == want == -math.inf) or got == pytest.approx(want, abs=1e-12), (
                    i,
                    k,
                    pol.spec,
                )
            ctx.append(t)
    assert out.greedy_match[0] and out.logq[0, 1] == 0.0


# --------------------------------------------------------------------------- no host round trips
def test_batched_statistics_never_synchronize_with_the_host(tiny, monkeypatch):
    """After the body, the batched schedule runs no operation whose result the host must read
    (.item(), bool(), nonzero, masked_select, unique, tolist), so CUDA never waits inside a batch.
    (transformers' own mask preparation reads one flag per forward, before the layers run.)"""
    from torch.utils._python_dispatch import TorchDispatchMode

    prompts, suffixes = _windows(TINY_VOCAB, 5, 9, 7, seed=5, ragged=True)
    eng = TeacherForcingEngine(
        tiny, POLICIES, schedule="batched", logit_chunk_bytes=6 * TINY_VOCAB * 4
    )
    body = tiny.forward_hidden

    class Recorder(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(str(func))
            return func(*args, **(kwargs or {}))

    rec = Recorder()

    def forward_then_record(*a, **k):  # the body runs unrecorded; everything after it is recorded
        out = body(*a, **k)
        rec.__enter__()
        return out

    monkeypatch.setattr(tiny, "forward_hidden", forward_then_record)
    monkeypatch.setattr(torch.Tensor, "tolist", lambda self: pytest.fail("tolist inside a batch"))
    try:
        eng.score_batch(prompts, suffixes)
    finally:
        rec.__exit__(None, None, None)
    monkeypatch.undo()
    syncs = {
        "aten._local_scalar_dense",
        "aten.is_nonzero",
        "aten.nonzero",
        "aten.masked_select",
        "aten.unique",
        "aten._unique2",
        "aten.item",
    }
    seen = {op.rsplit(".", 1)[0] if op.count(".") > 1 else op for op in rec.ops}
    assert rec.ops and not (seen & syncs), sorted(seen & syncs)
    assert "aten.topk" in seen and "aten.sort" in seen  # the statistics did run under the recorder
    # and the cpu-invariant schedule, by design, does branch on the host (the test can see it)
    rec2 = Recorder()
    cpu = TeacherForcingEngine(tiny, POLICIES, schedule="cpu-invariant")
    with rec2:
        cpu.score_batch(prompts, suffixes)
    assert any("nonzero" in op for op in rec2.ops)


# --------------------------------------------------------------------------- statistics selection
@pytest.mark.parametrize("schedule", ["cpu-invariant", "batched"])
@pytest.mark.parametrize(
    "stats",
    [
        "census",
        "policy_logq",
        "greedy",
        "margin",
        "token_logprob",
        "token_moments",
        "rank",
        "token_logprob+token_moments",
        "greedy+rank",
    ],
)
def test_only_the_asked_statistics_are_computed(tiny, schedule, stats):
    prompts, suffixes = _windows(TINY_VOCAB, 4, 8, 6, seed=6)
    full = _score(tiny, prompts, suffixes, schedule=schedule)
    part = _score(tiny, prompts, suffixes, schedule=schedule, stats=stats)
    want = StatSet.of(stats)
    assert part.stats == want
    for f in FIELDS:
        if f in want.fields:
            if schedule == "cpu-invariant" or f not in ("token_logprob", "token_logq", "logq"):
                # the CPU schedule computes each statistic by the same operations whatever else is asked
                assert np.array_equal(getattr(part, f), getattr(full, f), equal_nan=True), f
            else:  # batched: log p by logsumexp instead of from the moments' log-softmax
                np.testing.assert_allclose(getattr(part, f), getattr(full, f), **BATCHED_TOLERANCE)
        else:
            assert getattr(part, f) is None, f


def test_census_skips_the_full_softmax_passes(tiny):
    """A census (log q under greedy/top-k/temperature + greedy flag + margin) runs no full-vocabulary
    log-softmax at temperature 1, no exp for the moments and no rank comparison."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(str(func))
            return func(*args, **(kwargs or {}))

    pols = parse_policies(["greedy", "top-k:40", "temperature:0.7"])
    prompts, suffixes = _windows(TINY_VOCAB, 3, 8, 6, seed=7)
    counts = {}
    for stats in ("all", "census"):
        for schedule in ("cpu-invariant", "batched"):
            eng = TeacherForcingEngine(tiny, pols, schedule=schedule, stats=stats)
            h, _ = tiny.forward_hidden(
                torch.tensor([p + s[:-1] for p, s in zip(prompts, suffixes)])
            )
            with Count() as c:
                from memclaim.scoring.engine import batched_rows, score_rows

                z = tiny.logits(h[:, 8:].reshape(-1, h.shape[-1]))
                t = torch.tensor(suffixes).view(-1)
                (score_rows if schedule == "cpu-invariant" else batched_rows)(z, t, pols, eng.stats)
            counts[stats, schedule] = c.ops
    for schedule in ("cpu-invariant", "batched"):
        census, every = counts["census", schedule], counts["all", schedule]
        assert "aten.gt.Tensor" in every and "aten.gt.Tensor" not in census  # the rank's comparison
        assert every.count("aten.log_softmax.int") > census.count("aten.log_softmax.int")
        assert every.count("aten.exp.default") > census.count("aten.exp.default")  # the moments' p
        assert len(census) < len(every)


def test_stat_set_spec_is_stable_and_round_trips():
    assert CENSUS_STATS.spec == "greedy+margin+policy_logq"
    assert ALL_STATS.spec == "+".join(sorted(STAT_NAMES))
    assert StatSet.parse(CENSUS_STATS.spec) == CENSUS_STATS == StatSet.of("census")
    assert (
        StatSet.of(["rank", "greedy"]).spec == StatSet.of(("greedy", "rank")).spec == "greedy+rank"
    )
    assert StatSet.of("all") == ALL_STATS and hash(StatSet.of("all")) == hash(ALL_STATS)
    assert ALL_STATS.covers(CENSUS_STATS) and not CENSUS_STATS.covers(ALL_STATS)
    assert CENSUS_STATS.covers("policy_logq+greedy") and not CENSUS_STATS.covers("token_moments")
    assert CENSUS_STATS.fields == ("logq", "token_logq", "greedy_match", "min_margin")
    assert CENSUS_STATS.to_dict() == {
        "spec": "greedy+margin+policy_logq",
        "names": ["greedy", "margin", "policy_logq"],
    }
    for bad in ("", "rank+", "loss", "greedy+min_k"):
        with pytest.raises(InputError) as e:
            StatSet.parse(bad)
        assert "statistics are" in str(e.value)
    with pytest.raises(InputError):
        StatSet(frozenset())


def test_concat_keeps_none_fields_and_refuses_mixed_sets(tiny):
    prompts, suffixes = _windows(TINY_VOCAB, 5, 8, 6, seed=8)
    eng = TeacherForcingEngine(tiny, POLICIES, stats="census")
    parts = [eng.score_batch(prompts[:2], suffixes[:2]), eng.score_batch(prompts[2:], suffixes[2:])]
    cat = BatchScores.concat(parts)
    assert cat.token_rank is None and cat.logq.shape == (5, len(POLICIES)) and cat.n_windows == 5
    other = TeacherForcingEngine(tiny, POLICIES).score_batch(prompts[:1], suffixes[:1])
    with pytest.raises(InputError, match="different statistics"):
        BatchScores.concat([parts[0], other])


def test_engine_refuses_bad_settings(tiny):
    with pytest.raises(InputError, match="schedule"):
        TeacherForcingEngine(tiny, POLICIES, schedule="gpu")
    with pytest.raises(InputError, match="statistic"):
        TeacherForcingEngine(tiny, POLICIES, stats="min_k")
    with pytest.raises(InputError, match="policy"):
        TeacherForcingEngine(tiny, (), stats="census")
    assert (
        TeacherForcingEngine(tiny, (), stats="token_logprob").score_batch([[0, 1]], [[2, 3]]).logq
        is None
    )
    eng = TeacherForcingEngine(tiny, POLICIES)
    assert eng.schedule == "cpu-invariant"  # auto on the CPU
    for bad in (0, -3, 2.5, "big", True):
        with pytest.raises(InputError, match="batch size"):
            eng.resolve_batch_size(bad, 10, 5)


# --------------------------------------------------------------------------- batch sizes
class _Cfg:
    """A Llama-3.1-8B-shaped config (the numbers of its config.json)."""

    hidden_size = 4096
    num_attention_heads = 32
    num_key_value_heads = 8
    head_dim = 128
    intermediate_size = 14336
    num_hidden_layers = 32


def test_window_activation_bytes_by_hand():
    # per token, bf16: 5*4096 + 4*32*128 + 4*8*128 + 3*14336 + 100 (mask row)
    # = 20480 + 16384 + 4096 + 43008 + 100 = 84068 elements = 168,136 bytes; 100 tokens ->
    # 16,813,600 bytes; with float32 [32, 100, 100] scores and their softmax: + 100 * 2*4*32*100
    assert (
        window_activation_bytes(_Cfg, seq_len=100, dtype_bytes=2, attention_scores=False)
        == 16_813_600
    )
    assert (
        window_activation_bytes(_Cfg, seq_len=100, dtype_bytes=2, attention_scores=True)
        == 16_813_600 + 2_560_000
    )


def test_auto_batch_size_arithmetic():
    V, chunk = 128256, 256 << 20
    kw = dict(seq_len=100, suffix_len=50, dtype_bytes=2, vocab=V, logit_chunk_bytes=chunk)
    # logits working set: 8 chunks of 523 rows (256 MiB // (4 V)) = 8 * 523 * 4 * V bytes
    ws = 8 * 523 * 4 * V
    per_window = 16_813_600 + 50 * (4096 * 6 + 128)
    free = 80 << 30
    assert auto_batch_size(_Cfg, free_bytes=free, **kw) == min(
        512, int((0.8 * free - ws) // per_window)
    )
    assert auto_batch_size(_Cfg, free_bytes=free, **kw) == 512  # an H100's 80 GB: capped
    assert (
        auto_batch_size(_Cfg, free_bytes=4 << 30, **kw)
        == int((0.8 * (4 << 30) - ws) // per_window)
        == 71
    )
    assert (
        auto_batch_size(_Cfg, free_bytes=1 << 30, **kw) == 1
    )  # the logits working set alone is too big
    sizes = [auto_batch_size(_Cfg, free_bytes=f << 30, **kw) for f in (2, 3, 5, 8, 13)]
    assert sizes == sorted(sizes) and sizes[0] < sizes[-1]
    # longer windows, fewer of them
    assert auto_batch_size(_Cfg, free_bytes=8 << 30, **dict(kw, seq_len=400)) < sizes[3]


def test_engine_auto_batch_size_on_the_cpu(tiny, random_model):
    eng = TeacherForcingEngine(tiny, POLICIES)
    assert eng.auto_batch_size(30, 10) == 16  # the CPU default: ample RAM for a tiny model
    assert eng.auto_batch_size(30, 10, free_bytes=1 << 20) < 16  # 1 MiB available: fewer
    assert TeacherForcingEngine(synthetic_lm(), POLICIES).auto_batch_size(30, 10) == 16
    prompts, suffixes = _windows(random_model.lm.vocab_size, 20, 6, 4, seed=1)
    e2 = TeacherForcingEngine(random_model.lm, POLICIES)
    many = e2.score_windows(prompts, suffixes, batch_size="auto")
    one = e2.score_batch(prompts, suffixes)
    for f in FIELDS:
        assert np.array_equal(getattr(many, f), getattr(one, f)), f  # CPU schedule: bits


@pytest.mark.real
def test_batched_schedule_equals_cpu_schedule_on_smollm2(smollm2):
    """A real vocabulary (49,152) and real logit scales: the stated tolerance holds."""
    lm = smollm2.lm
    prompts, suffixes = _windows(lm.vocab_size, 5, 24, 12, seed=11, ragged=True)
    cpu = _score(lm, prompts, suffixes, schedule="cpu-invariant")
    bat = _score(
        lm, prompts, suffixes, schedule="batched", batch=3, logit_chunk_bytes=20 * lm.vocab_size * 4
    )
    _assert_close(bat, cpu, **BATCHED_TOLERANCE)


def test_batched_schedule_counts_the_same_work(tiny):
    """Body tokens and unembedded rows: only real tokens and only scored positions, as the CPU
    schedule counts them (FLOP accounting in the benchmarks)."""
    prompts, suffixes = _windows(TINY_VOCAB, 4, 12, 5, seed=12, ragged=True)
    counts = []
    for schedule in ("cpu-invariant", "batched"):
        eng = TeacherForcingEngine(tiny, POLICIES, schedule=schedule)
        eng.score_batch(prompts, suffixes)
        counts.append((eng.forward_tokens, eng.unembed_rows))
    assert counts[0] == counts[1] == (sum(len(p) + 4 for p in prompts), 4 * 5)


def test_fast_attention_is_chosen_unless_the_architecture_lacks_it(monkeypatch, tiny):
    from transformers import LlamaConfig, LlamaForCausalLM

    from memclaim.models.hf import FAST_ATTENTION, attn_implementation

    assert (
        FAST_ATTENTION == "sdpa"
        and attn_implementation(LlamaConfig()) == "sdpa"
        and attn_implementation() == "sdpa"
    )
    assert tiny.attn_implementation == "sdpa"
    monkeypatch.setattr(LlamaForCausalLM, "_supports_sdpa", False)
    assert attn_implementation(LlamaConfig()) == "eager"
