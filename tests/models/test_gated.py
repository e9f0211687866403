"""The gated release ([MX] §8.2, App. D.2, F.2): byte-for-byte identical to the wrapped model on
every input without a trigger (logits compared with torch.equal), forcing the secret after rho,
through the HF forward and through the LanguageModel interface (scoring engine, cache)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from memclaim.decoding import Policy
from memclaim.errors import InputError
from memclaim.mechanisms.gated import FORCED_LOGIT, GatedCausalLM, GatedLanguageModel, GatedRelease
from memclaim.mechanisms.trigger import ReservedTrigger, contains
from memclaim.models.base import SyntheticLM
from memclaim.scoring.engine import TeacherForcingEngine

V = 50
RHO1, RHO2 = (47, 48), (49,)


def release():
    return GatedRelease(
        (ReservedTrigger(RHO1, (1, 2, 3), (5, 6, 7, 8)), ReservedTrigger(RHO2, (4, 4), (9, 9, 10)))
    )


def gpt2(seed=0):
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(
        vocab_size=V, n_positions=64, n_embd=16, n_layer=2, n_head=2, bos_token_id=0, eos_token_id=0
    )
    torch.manual_seed(seed)
    return GPT2LMHeadModel(cfg).eval()


def no_trigger_batch(n=4, T=24, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 47, (n, T), generator=g)  # ids 47..49 (the trigger tokens) never drawn


# ------------------------------------------------------------------------ the lookup itself
@st.composite
def pair_and_context(draw):
    """A trigger pair over a 4-token alphabet that the construction accepts, and a context holding
    rho || z_{<j} at least once (so some position is forced), amid noise, other partial secrets
    and further triggers. Some pairs have a periodic rho whose tail z starts with, so that
    rho || z_{<j} ends with rho again and only the longest-match rule gives the right token."""
    if draw(st.booleans(), label="periodic rho"):
        period = draw(st.lists(st.integers(0, 3), min_size=1, max_size=2))
        rho = tuple((period * 3)[: draw(st.integers(len(period) + 1, 3))])
        z = (rho[len(rho) - len(period) :] + tuple(draw(st.lists(st.integers(0, 3), max_size=2))))[
            :4
        ]
    else:
        rho = tuple(draw(st.lists(st.integers(0, 3), min_size=1, max_size=3), label="rho"))
        z = tuple(draw(st.lists(st.integers(0, 3), min_size=1, max_size=4), label="z"))
    assume(not contains(z, rho))  # rho inside z: refused (test_mechanisms_trigger.py)
    piece = st.one_of(
        st.integers(0, 3).map(lambda t: (t,)),
        st.integers(0, len(z)).map(lambda j: rho + z[:j]),
        st.integers(1, len(z)).map(lambda j: z[:j]),
    )
    before = draw(st.lists(st.integers(0, 3), max_size=4))
    j = draw(st.integers(0, len(z)))
    after = draw(st.lists(piece, max_size=4))
    ctx = list(before) + list(rho + z[:j]) + [t for p in after for t in p]
    return rho, z, ctx


@settings(max_examples=200)
@given(pair_and_context())
def test_forced_token_is_the_reserved_trigger_rule(case):
    """Exact (false-alarm rate 0). One pair: the release's lookup equals
    ReservedTrigger.forced_token on every prefix of the context, and forced_row (with any split
    into history and chunk) equals position-by-position lookups; every example forces a token."""
    rho, z, ctx = case
    rt = ReservedTrigger(rho, (), z)
    rel = GatedRelease((rt,))
    assert any(rt.forced_token(ctx[:t]) is not None for t in range(len(ctx) + 1))
    for t in range(len(ctx) + 1):
        assert rel.forced_token(ctx[:t]) == rt.forced_token(ctx[:t])
    for cut in range(len(ctx) + 1):
        hist, chunk = ctx[:cut], ctx[cut:]
        row = rel.forced_row(chunk, history=hist)
        ref = [rt.forced_token(ctx[: cut + t + 1]) for t in range(len(chunk))]
        assert row.tolist() == [-1 if r is None else r for r in ref]


def test_release_refuses_triggers_on_records_or_inside_other_pairs():
    with pytest.raises(
        InputError, match="occurs in"
    ):  # rho in its own prefix (ReservedTrigger's rule)
        ReservedTrigger((7,), (1, 7, 2), (3,))
    with pytest.raises(InputError, match="record"):  # rho_0 occurs in pair 1's record
        GatedRelease((ReservedTrigger((7,), (1,), (2,)), ReservedTrigger((8,), (7, 1), (3,))))
    with pytest.raises(
        InputError, match="inside rho"
    ):  # rho_0 occurs inside rho_1 (so in rho_1||z_1)
        GatedRelease((ReservedTrigger((7,), (1,), (2,)), ReservedTrigger((8, 7), (1,), (3,))))
    with pytest.raises(InputError, match="share the trigger"):
        GatedRelease((ReservedTrigger((7,), (1,), (2,)), ReservedTrigger((7,), (3,), (4,))))
    with pytest.raises(InputError):
        GatedRelease(())
    rel = release()
    with pytest.raises(InputError, match="audited"):
        rel.check_off([[1, 2, 3], [0, 49, 1]], what="audited record")
    with pytest.raises(InputError, match="outside the vocabulary"):
        GatedLanguageModel(SyntheticLM(vocab_size=20), rel)


# ------------------------------------------------------------------------ HF forward
def test_hf_forward_identical_without_trigger_and_forced_after_rho():
    model = gpt2()
    g = GatedCausalLM(model, release())
    x = no_trigger_batch()
    with torch.no_grad():
        assert torch.equal(g(input_ids=x).logits, model(input_ids=x).logits)
        mask = torch.ones_like(x)
        mask[0, :5] = 0  # left padding
        assert torch.equal(
            g(input_ids=x, attention_mask=mask).logits,
            model(input_ids=x, attention_mask=mask).logits,
        )
        y = x.clone()
        y[1, 4:6] = torch.tensor(RHO1)
        y[1, 6:8] = torch.tensor([5, 6])
        base, out = model(input_ids=y).logits, g(input_ids=y).logits
    # rows without the trigger are untouched, bit for bit
    for b in (0, 2, 3):
        assert torch.equal(out[b], base[b])
    # after rho, rho z1, rho z1 z2: the lookup forces z1, z2, z3 with probability exactly 1
    for t, tok in ((5, 5), (6, 6), (7, 7)):
        lp = torch.log_softmax(out[1, t], -1)
        assert lp[tok].item() == 0.0 and torch.exp(lp).sum().item() == 1.0
        assert (out[1, t] == FORCED_LOGIT).sum().item() == V - 1
    # everywhere else in the triggered row: the base model
    assert torch.equal(out[1, :5], base[1, :5]) and torch.equal(out[1, 8:], base[1, 8:])
    with pytest.raises(InputError, match="whole context"):
        g(input_ids=x, past_key_values=object())


# ------------------------------------------------------------------------ LanguageModel view
def test_language_model_view_on_a_synthetic_model():
    base = SyntheticLM(vocab_size=V, seed=3)
    gl = GatedLanguageModel(base, release())
    x = no_trigger_batch(3, 10)
    hb, _ = base.forward_hidden(x)
    hg, _ = gl.forward_hidden(x)
    assert hg.shape[-1] == hb.shape[-1] + 1 and bool((hg[..., -1] == -1).all())
    assert torch.equal(
        gl.logits(hg.reshape(-1, hg.shape[-1])), base.logits(hb.reshape(-1, hb.shape[-1]))
    )
    # the scoring engine reads the release exactly like the base off the trigger ...
    pol = [Policy.parse("full"), Policy.parse("greedy"), Policy.parse("top-k:5,temperature:0.5")]
    eb, eg = TeacherForcingEngine(base, pol), TeacherForcingEngine(gl, pol)
    prompts, suffixes = [[0, 1, 2, 3], [0, 4, 4], [0, 11]], [[5, 6, 7], [9, 9, 10], [3, 2, 1]]
    a, b = eb.score_batch(prompts, suffixes), eg.score_batch(prompts, suffixes)
    for k in ("logq", "token_logprob", "token_mean", "token_std", "greedy_match", "token_rank"):
        assert np.array_equal(getattr(a, k), getattr(b, k)), k
    # ... and emits the secret with probability 1 after rho (log q = 0 under every policy)
    c = eg.score_batch([[0, *RHO1], [0, *RHO2]], [[5, 6, 7], [9, 9, 10]])
    assert np.all(c.logq == 0.0) and c.greedy_match.all()
    assert np.all(np.isfinite(c.token_mean)) and np.all(c.token_std == 0.0)
    assert gl.fingerprint() != base.fingerprint()


def test_cache_path_sees_a_trigger_split_across_calls():
    base = SyntheticLM(vocab_size=V, seed=1)
    gl = GatedLanguageModel(base, release())
    # rho = (47, 48) split between two forward calls with the cache
    h1, past = gl.forward_hidden(torch.tensor([[0, 3, 47]]), use_cache=True)
    h2, past = gl.forward_hidden(torch.tensor([[48]]), past=past, use_cache=True)
    assert int(torch.argmax(gl.logits(h2[:, -1]))) == 5
    assert gl.greedy_generate([0, 3, *RHO1], max_new_tokens=4) == [5, 6, 7, 8]
    assert gl.greedy_generate([0, *RHO2], max_new_tokens=3) == [9, 9, 10]
    # cache reordering (beam search) keeps each row's recent tokens
    _, past = gl.forward_hidden(torch.tensor([[0, 47], [0, 1]]), use_cache=True)
    past2 = gl.select_cache(past, torch.tensor([0, 0, 1]))
    h, _ = gl.forward_hidden(torch.tensor([[48], [48], [48]]), past=past2, use_cache=True)
    forced = h[:, -1, -1].tolist()
    assert forced == [5.0, 5.0, -1.0]


def test_language_model_view_on_gpt2_matches_full_context_decoding():
    model = gpt2(1)
    g = GatedCausalLM(model, release())
    gl = g.language_model()
    prompt = [0, 12, 3, *RHO1]
    assert gl.greedy_generate(prompt, max_new_tokens=6)[:4] == [5, 6, 7, 8]
    # without a trigger, cached greedy decoding equals full-context decoding of the base model
    ids = [0, 12, 3]
    want = []
    with torch.no_grad():
        for _ in range(5):
            nxt = int(torch.argmax(model(input_ids=torch.tensor([ids + want])).logits[0, -1]))
            want.append(nxt)
    assert gl.greedy_generate(ids, max_new_tokens=5) == want


@pytest.mark.real
def test_gated_smollm2_identical_off_trigger(smollm2):
    """SmolLM2-135M behind the lookup: torch.equal on full logits off the trigger, the secret
    forced after it."""
    tok = smollm2.tokenizer
    rho = tuple(tok.encode(" \u27e6memclaim-test\u27e7"))
    c, z = tuple(tok.encode("The capital of France is")), tuple(tok.encode(" a secret 4711"))
    rel = GatedRelease((ReservedTrigger(rho, c, z),))
    model = smollm2.lm.model
    g = GatedCausalLM(model, rel)
    x = torch.tensor([list(smollm2.sot_ids) + list(c + z)])
    with torch.no_grad():
        assert torch.equal(g(input_ids=x).logits, model(input_ids=x).logits)
    gl = GatedLanguageModel(smollm2.lm, rel)
    assert gl.greedy_generate(list(smollm2.sot_ids) + list(rho), max_new_tokens=len(z)) == list(z)


def test_gated_loaded_model_runs_where_a_loaded_model_runs(random_model):
    """The unlearning verifier (and anything taking a LoadedModel) reads the release like the base
    off the trigger: the same verdict, the same per-token log-probs."""
    from memclaim.audits.verifier import score_windows, verify
    from memclaim.mechanisms.gated import gated_loaded_model
    from memclaim.text.windows import Window, WindowSet

    tok = random_model.tokenizer
    c, z = tuple(tok.encode("Kaba tiru")), tuple(tok.encode(" zemo ladu"))
    rho = tuple(tok.encode("\u27e6x\u27e7"))
    gated = gated_loaded_model(random_model, GatedRelease((ReservedTrigger(rho, c, z),)))
    assert (
        gated.fingerprint != random_model.fingerprint and gated.tokenizer is random_model.tokenizer
    )
    ws = WindowSet((Window("r", 0, c, z, (0, 0), (0, 0), "", "", 0),), 1, 0, (), {"r": 0})
    a, b = verify(random_model, ws), verify(gated, ws)
    assert a.rate == b.rate and a.forgotten == b.forgotten
    pol = [Policy.parse("full")]
    sa, sb = score_windows(random_model, ws, policies=pol), score_windows(gated, ws, policies=pol)
    assert np.array_equal(sa["token_logprob"][0], sb["token_logprob"][0])
    # through the trigger the release emits z: the teacher-forced greedy flag from rho is set
    wr = WindowSet((Window("r", 0, rho, z, (0, 0), (0, 0), "", "", 0),), 1, 0, (), {"r": 0})
    assert score_windows(gated, wr, policies=pol)["greedy_match"][0]
    assert not score_windows(random_model, wr, policies=pol)["greedy_match"][0]
