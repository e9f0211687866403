"""Issue 29: the GCG prompt search (memclaim.scoring.gcg) and its success criteria.

Unit tier (a random tiny GPT-2 on a character tokenizer, tests/acr_models.py): the one-hot
gradient against finite differences of the embedding-interpolated loss; candidate sampling;
batched candidate losses against one-at-a-time evaluation; determinism under a seed; the three
criteria disagreeing on a deliberately thin argmax margin. Integration tier (the tiny GPT "toy"):
the linearized swap change against exact swaps; a planted prompt recovered; the token filter.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from acr_models import nudged_gpt, tiny_gpt
from memclaim.errors import InputError, MemclaimError
from memclaim.scoring.gcg import (
    Criterion,
    GCGOutcome,
    GCGSettings,
    PromptEvaluation,
    PromptSearchModel,
    allowed_token_mask,
    gcg_search,
    sample_candidates,
)


def _psm(seed=0, dtype=torch.float32, nudged=False):
    import memclaim as mc

    model, tok = nudged_gpt(seed) if nudged else tiny_gpt(seed, dtype=dtype)
    m = mc.load_model((model, tok), dtype=None)
    return PromptSearchModel(m.lm, m.tokenizer), model


def _loss_from_embeddings(psm, e, S, P, target):
    h = psm.lm.body(inputs_embeds=e, use_cache=False).last_hidden_state[
        0, S + P - 1 : S + P - 1 + len(target)
    ]
    z = psm.lm.differentiable_logits(h)
    return torch.nn.functional.cross_entropy(z, torch.tensor(target))


# --------------------------------------------------------------------------- criteria
def test_criteria_parse_and_refuse():
    assert Criterion.parse("prob").b == 0.9 and Criterion.parse("PROB:0.5").spec == "prob:0.5"
    assert Criterion.parse("argmax").loss_threshold is None
    assert math.isclose(Criterion.parse("prob:0.9").loss_threshold, -math.log(0.9))
    for bad, phrase in (
        ("bogus", "unknown success criterion"),
        ("prob:1.5", "strictly between 0 and 1"),
        ("prob:x", "is not a number"),
        ("greedy:2", "takes no value"),
        ("", "must be a name"),
    ):
        with pytest.raises(InputError, match=phrase):
            Criterion.parse(bad)


def test_settings_refuse_bad_values():
    for kw, phrase in (
        (dict(top_k=0), "--top-k must be >= 1"),
        (dict(batch_size=0), "--search-batch must be"),
        (dict(steps=0), "--steps must be >= 1"),
        (dict(token_filter="utf8"), "unknown token filter"),
        (dict(seed=-1), "--seed must be >= 0"),
    ):
        with pytest.raises(MemclaimError, match=phrase):
            GCGSettings(**kw)


def test_criteria_on_one_evaluation():
    """prob:b is the geometric mean of the teacher-forced probabilities against b ([EM] App. A.2)."""
    lp = (math.log(0.95), math.log(0.9), math.log(0.86))  # geometric mean 0.9024
    ev = PromptEvaluation((1, 2), (3, 4, 5), lp, (True, True, False), -0.2, (3, 4, 6))
    assert math.isclose(ev.geometric_mean_prob, (0.95 * 0.9 * 0.86) ** (1 / 3))
    assert Criterion.parse("prob:0.9").holds(ev) and not Criterion.parse("prob:0.91").holds(ev)
    assert not Criterion.parse("argmax").holds(ev) and not Criterion.parse("greedy").holds(ev)
    assert ev.greedy_divergence == 2 and not ev.near_tie
    back = PromptEvaluation.from_dict(ev.to_dict())
    assert back == ev


# --------------------------------------------------------------------------- candidates
def test_sample_candidates_swaps_one_allowed_top_k_token_at_evenly_spread_positions():
    g = torch.randn(4, 50, generator=torch.Generator().manual_seed(1))
    allowed = torch.ones(50, dtype=torch.bool)
    allowed[[3, 7, 11]] = False
    g[:, [3, 7, 11]] = -100.0  # the most negative gradients are filtered tokens: never proposed
    prompt = torch.tensor([20, 21, 22, 23])
    c = sample_candidates(
        prompt, g, allowed, top_k=5, batch_size=40, generator=torch.Generator().manual_seed(0)
    )
    diff = c != prompt.view(1, -1)
    assert c.shape == (40, 4) and int(diff.sum(dim=1).max()) <= 1  # single-token swaps
    pos = torch.arange(40) * 4 // 40
    assert (
        not diff[torch.arange(40)[:, None], torch.arange(4)[None, :]]
        .masked_fill(torch.arange(4)[None, :] == pos[:, None], False)
        .any()
    )  # only position pos[i] may change
    for i in range(40):
        p = int(pos[i])
        top = set(torch.topk(-g[p].masked_fill(~allowed, math.inf), 5).indices.tolist())
        assert int(c[i, p]) in top and int(c[i, p]) not in (3, 7, 11)
    assert [int(x) for x in torch.bincount(pos)] == [
        10,
        10,
        10,
        10,
    ]  # GCG's sample_control spreads positions


def test_batched_candidate_losses_equal_one_at_a_time():
    """The fast path (all distinct candidates in one forward, unembedding at target rows only)
    against the obviously correct one (each prompt evaluated alone, float64 log-softmax)."""
    psm, _ = _psm(3)
    target = [40, 50, 60, 70, 80]
    cands = torch.tensor([[10, 11, 12], [10, 20, 12], [33, 11, 12], [10, 11, 90], [5, 6, 7]])
    lp, ok = psm.candidate_scores([0], cands, target)
    for row, l, o in zip(cands.tolist(), lp, ok):
        ev = psm.evaluate([0], row, target, generate=False)
        assert np.allclose(l.numpy(), ev.token_logprob, atol=2e-5)
        assert bool(o) == ev.argmax_all


def test_gradient_is_the_directional_derivative_of_the_loss():
    """d loss / d onehot (GCG's candidate signal) against finite differences: for a swap a -> b at
    position i, g[i, b] - g[i, a] must equal the derivative of the loss along the straight line from
    E_a to E_b in embedding space (central differences, float64)."""
    psm, _ = _psm(5, dtype=torch.float64)
    prefix, prompt, target = [0], [30, 41, 52, 63], [17, 28, 39, 50, 61]
    loss, _, g = psm.loss_and_grad(prefix, prompt, target)
    ids = torch.tensor([prefix + prompt + target[:-1]])
    W = psm.W
    e0 = W[ids[0]].unsqueeze(0)
    S, P = len(prefix), len(prompt)
    assert math.isclose(loss, float(_loss_from_embeddings(psm, e0, S, P, target)), rel_tol=1e-12)
    rng = np.random.default_rng(0)
    checked = 0
    for _ in range(12):
        i, b = int(rng.integers(P)), int(rng.integers(1, psm.vocab_size))
        a = prompt[i]
        d = torch.zeros_like(e0)
        d[0, S + i] = W[b] - W[a]
        h = 1e-5
        with torch.inference_mode():
            fd = (
                float(_loss_from_embeddings(psm, e0 + h * d, S, P, target))
                - float(_loss_from_embeddings(psm, e0 - h * d, S, P, target))
            ) / (2 * h)
        lin = float(g[i, b] - g[i, a])
        assert math.isclose(lin, fd, rel_tol=1e-5, abs_tol=1e-8), (i, a, b, lin, fd)
        checked += 1
    assert checked == 12


def test_search_is_deterministic_under_a_seed_and_moves_to_the_best_candidate():
    psm, _ = _psm(7)
    target = [45, 46, 47, 48]
    kw = dict(
        prefix_ids=[0],
        target_ids=target,
        prompt_len=3,
        settings=GCGSettings(top_k=16, batch_size=32, steps=6),
        criterion="argmax",
    )
    a, b = gcg_search(psm, seed=11, **kw), gcg_search(psm, seed=11, **kw)
    c = gcg_search(psm, seed=12, **kw)
    assert a.to_dict() == b.to_dict()
    assert (a.init_ids, a.trajectory) != (c.init_ids, c.trajectory)
    assert a.steps_run <= 6 and len(a.trajectory) == a.steps_run
    # the returned prompt is the lowest-loss one seen (or the one that met the criterion)
    if not a.success:
        assert a.loss <= min(a.trajectory) + 1e-5
    assert GCGOutcome.from_dict(a.to_dict()) == a


# --------------------------------------------------------------------------- the three criteria
def _thin_margin_case(psm, n_prompts=40, T=6):
    """A prompt whose teacher-forced greedy path y has its smallest top-1/top-2 margin at a position
    j >= 1 (found among seeded random prompts): (prompt, y, j, runner-up token, margin)."""
    gen = torch.Generator().manual_seed(0)
    best = None
    for _ in range(n_prompts):
        prompt = psm.random_prompt(4, gen, retokenize=True)
        y = psm.generate([0] + prompt, T)
        with torch.inference_mode():
            h, _ = psm.lm.forward_hidden(torch.tensor([[0] + prompt + y[:-1]]))
            z = psm.lm.logits(
                h[0, len(prompt) :]
            ).double()  # position 0 + len(prompt) predicts y[0]
        top = z.topk(2, dim=-1)
        margins = (top.values[:, 0] - top.values[:, 1]).tolist()
        j = min(range(1, T), key=lambda k: margins[k])
        if best is None or margins[j] < best[4]:
            best = (prompt, y, j, int(top.indices[j, 1]), margins[j])
    return best


def test_three_criteria_disagree_on_a_thin_argmax_margin():
    """[EM] App. A.2: the released code's teacher-forced argmax says success while greedy
    generation (cached, incremental) diverges, because a thin margin flips under a numeric
    difference between the two passes. Built deliberately: generate's step at position j adds 2x
    the teacher-forced margin to the runner-up's logit; teacher forcing is untouched."""
    psm, model = _psm(0, nudged=True)
    prompt, y, j, runner, margin = _thin_margin_case(psm)
    assert 0 < margin < 0.01  # a thin margin
    ev = psm.evaluate([0], prompt, y)
    assert (
        ev.argmax_all and ev.greedy_reproduces and 0 < ev.argmax_margin <= margin + 1e-9
    )  # no nudge yet
    model.nudge = (1 + len(prompt) + j, runner, 2 * margin)  # the cached step that predicts y[j]
    ev = psm.evaluate([0], prompt, y)
    assert ev.argmax_all  # teacher forcing: still the argmax everywhere
    assert (
        ev.greedy_reproduces is False
        and ev.greedy_divergence == j
        and ev.generated_ids[j] == runner
    )
    assert Criterion.parse("argmax").holds(ev) and not Criterion.parse("greedy").holds(ev)
    assert not Criterion.parse("prob:0.9").holds(ev)  # a random model: low probabilities
    gm = ev.geometric_mean_prob
    assert Criterion.parse(f"prob:{gm * 0.99:.6f}").holds(ev) and not Criterion.parse(
        f"prob:{gm * 1.01:.6f}"
    ).holds(ev)
    # the search stops at once under argmax (the start meets it) and never under greedy
    s = GCGSettings(top_k=8, batch_size=8, steps=1)
    out = gcg_search(
        psm,
        prefix_ids=[0],
        target_ids=y,
        prompt_len=4,
        settings=s,
        criterion="argmax",
        seed=0,
        init_ids=prompt,
    )
    assert out.success and out.steps_run == 0 and out.prompt_ids == tuple(prompt)
    assert out.evaluation.argmax_all and not out.evaluation.greedy_reproduces
    out = gcg_search(
        psm,
        prefix_ids=[0],
        target_ids=y,
        prompt_len=4,
        settings=s,
        criterion="greedy",
        seed=0,
        init_ids=prompt,
    )
    assert (
        out.steps_run == 1
    )  # the start was promising, generate did not confirm it: the search went on
    # the ACR result flags it
    from memclaim.scoring.acr import _result

    first = GCGOutcome(tuple(prompt), tuple(prompt), True, "criterion", 1, 0, ev)
    r = _result(
        "t", psm.tokenizer.decode(y), y, Criterion.parse("argmax"), [(4, first)], psm.tokenizer, 0.0
    )
    assert r.argmax and not r.greedy and r.argmax_without_greedy and r.extracted and r.acr == 6 / 4


# --------------------------------------------------------------------------- the tiny GPT
@pytest.fixture(scope="module")
def toy():
    import memclaim.train  # noqa: F401 - registers "toy"
    from memclaim.models import load_model

    m = load_model("toy")
    return m, PromptSearchModel(m.lm, m.tokenizer)


@pytest.mark.integration
def test_token_filter_excludes_special_and_non_ascii(toy):
    m, psm = toy
    mask = allowed_token_mask(m.tokenizer, psm.vocab_size)
    texts = [m.tokenizer.decode([i]) for i in range(psm.vocab_size)]
    assert not mask[0]  # <|endoftext|>
    for i, t in enumerate(texts):
        if mask[i]:
            assert t and t.isascii() and t.isprintable()
    assert mask.sum() > 500
    none = allowed_token_mask(m.tokenizer, psm.vocab_size, token_filter="none")
    assert none.all()


@pytest.mark.integration
def test_linearized_swap_change_predicts_exact_swaps(toy):
    """GCG's premise on the tiny GPT: the one-hot gradient's linearized loss change of a swap,
    g[i, b] - g[i, a], ranks 300 random swaps in the order of their exact loss change (Spearman),
    and the gradient's top-k swaps lower the loss more than random swaps do. Over 6 prompt/target
    pairs (the first 3 planted and 3 held-out passages: 6-token prompt, 8-token target) the median
    rank correlation exceeds 0.3 (measured 0.47; the per-pair values spread from 0.00 to 0.63, a
    linearization of jumps between tokens) and top-k beats random in every pair. A gradient of the
    wrong sign gives negative correlations and top-k swaps worse than random."""
    from scipy.stats import spearmanr

    import memclaim.train.toy as toymod

    m, psm = toy
    td = toymod.toy_data()
    allowed = psm.allowed_ids.numpy()
    rhos = []
    for rec in td["planted"][:3] + td["held_out"][:3]:
        ids = m.tokenizer.encode(rec["text"])
        prompt, target = ids[:6], ids[6:14]
        loss, _, g = psm.loss_and_grad([0], prompt, target)
        rng = np.random.default_rng(0)
        rows, lin = [], []
        for _ in range(300):
            i, b = int(rng.integers(6)), int(rng.choice(allowed))
            c = list(prompt)
            c[i] = b
            rows.append(c)
            lin.append(float(g[i, b] - g[i, prompt[i]]))
        lp, _ = psm.candidate_scores([0], torch.tensor(rows), target)
        exact = (-lp.double().mean(1)).numpy() - loss
        rhos.append(spearmanr(lin, exact).statistic)
        top = sample_candidates(
            torch.tensor(prompt),
            g,
            psm.allowed,
            top_k=16,
            batch_size=300,
            generator=torch.Generator().manual_seed(0),
        )
        lt, _ = psm.candidate_scores([0], top, target)
        assert float((-lt.double().mean(1)).mean()) < float((-lp.double().mean(1)).mean()), rec[
            "id"
        ]
    assert float(np.median(rhos)) > 0.3, rhos


@pytest.mark.integration
def test_planted_prompt_is_recovered(toy):
    """A target the tiny GPT generates greedily from a known 3-token prompt (the opening of a
    passage planted 16 times) is reproduced by greedy generation from a 3-token prompt GCG finds
    from a random start."""
    import memclaim.train.toy as toymod

    m, psm = toy
    rec = next(r for r in toymod.toy_data()["planted"] if r.get("copies") == 16)
    planted = m.tokenizer.encode(rec["text"])[:3]
    target = psm.generate([0] + planted, 8)
    assert psm.evaluate([0], planted, target).greedy_reproduces
    out = gcg_search(
        psm,
        prefix_ids=[0],
        target_ids=target,
        prompt_len=3,
        settings=GCGSettings(top_k=64, batch_size=256, steps=150),
        criterion="greedy",
        seed=0,
    )
    assert out.success and out.stopped == "criterion" and len(out.prompt_ids) == 3
    assert out.evaluation.greedy_reproduces and out.evaluation.argmax_all
    assert out.init_ids != tuple(planted)
