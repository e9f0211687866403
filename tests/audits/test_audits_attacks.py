"""Attacks of memclaim.audits.attacks: hand-computed examples, input validation, the registry,
and the two statistical properties (at chance under identical distributions, above chance on
separated data)."""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest
from scipy import stats

from memclaim.audits import attacks as A
from memclaim.audits.attacks import ScoredTexts
from memclaim.audits.metrics import roc_auc
from memclaim.errors import DomainError, InputError, ProcedureMismatchError

LN2 = math.log(2.0)


# ----------------------------------------------------------------------- hand-computed values
def test_loss_and_perplexity_hand_example():
    lp = [np.array([-1.0, -2.0, -3.0]), np.array([-0.5, -0.5])]
    np.testing.assert_allclose(A.loss_scores(lp), [-2.0, -0.5])
    np.testing.assert_allclose(A.perplexity_scores(lp), [-math.exp(2.0), -math.exp(0.5)])


def test_loss_with_zero_probability_token_is_minus_inf():
    s = A.loss_scores([np.array([-1.0, -np.inf]), np.array([-1.0])])
    assert s[0] == -np.inf and s[1] == -1.0
    assert A.perplexity_scores([np.array([-1.0, -np.inf])])[0] == -np.inf


LIST10 = np.array([-0.1, -2.0, -0.5, -3.0, -0.2, -1.0, -0.3, -4.0, -0.05, -0.6])


@pytest.mark.parametrize(
    "k, expected",
    [
        (0.2, (-4.0 - 3.0) / 2),  # floor(0.2 * 10) = 2 lowest: -4, -3
        (0.25, (-4.0 - 3.0) / 2),  # floor(2.5) = 2
        (0.3, (-4.0 - 3.0 - 2.0) / 3),  # floor(3.0) = 3
        (0.05, -4.0),  # floor(0.5) = 0 -> at least one token
        (1, float(np.mean(LIST10))),  # all tokens
    ],
)
def test_min_k_hand_example(k, expected):
    assert A.min_k_scores([LIST10], k=k)[0] == pytest.approx(expected)


def test_min_k_rounding_is_exact_floor_with_minimum_one():
    # 0.29 * 100 = 28.999999999999996 in binary floating point; k is read as written.
    assert 0.29 * 100 < 29
    assert A.min_k_count(100, k=0.29) == 29
    assert A.min_k_count(100, k="29/100") == 29
    assert A.min_k_count(10, k=0.2) == 2
    assert A.min_k_count(14, k=0.2) == 2  # floor(2.8)
    assert A.min_k_count(15, k=0.2) == 3
    assert A.min_k_count(4, k=0.2) == 1  # floor(0.8) = 0 -> 1
    assert A.min_k_count(7, k=1.0) == 7
    for bad in (0, -0.1, 1.5, float("nan")):
        with pytest.raises(DomainError, match="k"):
            A.min_k_count(10, k=bad)
    with pytest.raises(InputError):
        A.min_k_count(0, k=0.2)


def test_min_k_matches_sorting_reference_on_random_texts():
    rng = np.random.default_rng(3)
    for _ in range(50):
        n = int(rng.integers(1, 40))
        lp = np.log(rng.uniform(0.001, 1, n))
        if rng.random() < 0.3:
            lp = np.round(lp)  # ties
        for k in (0.1, 0.2, 0.5, 1):
            m = max(1, int(math.floor(k * n + 1e-9)))
            ref = float(np.mean(np.sort(lp)[:m]))
            assert A.min_k_scores([lp], k=k)[0] == pytest.approx(ref)


def _known_distributions():
    """Five positions with hand-computable (mu, sigma) and the standardized target score z."""
    dists = [
        ([0.5, 0.25, 0.25], 1, -1.0),  # mu = -1.5 ln2, sigma = 0.5 ln2: z = (-2ln2+1.5ln2)/(0.5ln2)
        ([0.25, 0.25, 0.25, 0.25], 2, 0.0),  # uniform: sigma = 0 -> defined as 0
        ([0.9, 0.1], 1, -3.0),  # Bernoulli: sigma = 0.3 ln 9; z = -0.9 ln9 / (0.3 ln9)
        ([0.5, 0.25, 0.25], 0, 1.0),
        ([0.9, 0.1], 0, 1.0 / 3.0),  # 0.1 ln9 / (0.3 ln9)
    ]
    V = 4
    full = np.full((len(dists), V), -np.inf)
    targets, z = [], []
    for t, (p, tok, zz) in enumerate(dists):
        full[t, : len(p)] = np.log(p)
        targets.append(tok)
        z.append(zz)
    return full, np.array(targets), np.array(z)


def test_token_mean_std_from_known_distributions():
    full, _, _ = _known_distributions()
    mu, sd = A.token_mean_std(full)
    np.testing.assert_allclose(mu[0], -1.5 * LN2)
    np.testing.assert_allclose(sd[0], 0.5 * LN2)
    np.testing.assert_allclose(mu[1], -2 * LN2)
    assert sd[1] == pytest.approx(0.0, abs=1e-12)
    np.testing.assert_allclose(mu[2], 0.9 * math.log(0.9) + 0.1 * math.log(0.1))
    np.testing.assert_allclose(sd[2], 0.3 * math.log(9.0))


def test_min_k_plus_plus_from_known_distribution():
    full, targets, z = _known_distributions()
    mu, sd = A.token_mean_std(full)
    sd[1] = 0.0  # exact zero for the uniform row (the engine computes it exactly)
    lp = full[np.arange(len(targets)), targets]
    np.testing.assert_allclose(A.min_k_plus_plus_token_scores(lp, mu, sd), z, atol=1e-12)
    # n = 5: k = 0.4 keeps floor(2.0) = 2 lowest standardized scores: -3, -1.
    assert A.min_k_plus_plus_scores([lp], [mu], [sd], k=0.4)[0] == pytest.approx(-2.0)
    assert A.min_k_plus_plus_scores([lp], [mu], [sd], k=0.2)[0] == pytest.approx(-3.0)
    assert A.min_k_plus_plus_scores([lp], [mu], [sd], k=1)[0] == pytest.approx(np.mean(z))


def test_min_k_plus_plus_zero_sigma_and_zero_probability_token():
    z = A.min_k_plus_plus_token_scores(
        np.array([-np.inf, -1.0]), np.array([-1.0, -1.0]), np.array([0.0, 0.0])
    )
    assert z[0] == -np.inf and z[1] == 0.0


def test_zlib_hand_example():
    # The zlib stream of the empty string: 2-byte header, empty final fixed-Huffman block (2 bytes),
    # Adler-32 checksum (4 bytes) = 8 bytes.
    assert A.zlib_length("") == 8
    assert A.zlib_length("hello") == len(zlib.compress(b"hello"))
    # mean NLL 2 nats over 8 bytes -> -0.25.
    assert A.zlib_scores([np.array([-1.0, -2.0, -3.0])], [""])[0] == pytest.approx(-0.25)
    # A compressible text has a shorter zlib length, so the same loss gives a lower score.
    lp = [np.array([-1.0, -1.0])] * 2
    rep, rnd = "ab" * 200, "".join(chr(33 + (i * 7919) % 90) for i in range(400))
    s = A.zlib_scores(lp, [rep, rnd])
    assert A.zlib_length(rep) < A.zlib_length(rnd) and s[0] < s[1]
    # Non-ASCII text is measured in UTF-8 bytes.
    assert A.zlib_length("é") == len(zlib.compress("é".encode()))


def test_reference_per_text_and_per_token():
    t = [np.array([-1.0, -2.0, -3.0])]
    r = [np.array([-2.0, -2.0, -2.0, -2.0])]  # a reference with its own (longer) tokenization
    assert A.reference_scores(t, r)[0] == pytest.approx(-6.0 - (-8.0))
    with pytest.raises(InputError, match="tokenize differently"):
        A.reference_scores(t, r, per="token")
    assert A.reference_scores(t, [np.array([-2.0, -2.0, -2.0])], per="token")[0] == pytest.approx(
        0.0
    )
    both_zero = A.reference_scores([np.array([-np.inf])], [np.array([-np.inf])])
    assert both_zero[0] == 0.0
    with pytest.raises(DomainError):
        A.reference_scores(t, r, per="word")


# ------------------------------------------------------------------------------- validation
def test_padded_input_equals_ragged():
    padded = np.array([[-1.0, -2.0, 99.0], [-0.5, -0.5, -0.5]])
    d = ScoredTexts.build(padded, lengths=[2, 3])
    np.testing.assert_allclose(A.run_attack("loss", d), [-1.5, -0.5])
    d2 = ScoredTexts.build([[-1.0, -2.0], [-0.5, -0.5, -0.5]])
    np.testing.assert_allclose(A.run_attack("min-k", d2, k=0.5), A.run_attack("min-k", d, k=0.5))


@pytest.mark.parametrize(
    "bad, match",
    [
        ([[-1.0, float("nan")]], "NaN"),
        ([[-1.0, float("inf")]], r"\+inf"),
        ([[]], "no scored tokens"),
        ([[-1.0, 0.5]], "above 0"),
    ],
)
def test_bad_token_arrays_refused(bad, match):
    with pytest.raises(InputError, match=match):
        ScoredTexts.build(bad)


def test_small_positive_rounding_is_clipped_to_zero():
    d = ScoredTexts.build([[-1.0, 3e-7]])
    assert d.token_logprobs[0][1] == 0.0


def test_build_checks_shapes():
    with pytest.raises(InputError, match="both or neither"):
        ScoredTexts.build([[-1.0]], token_mean=[[-1.0]])
    with pytest.raises(InputError, match="tokens"):
        ScoredTexts.build([[-1.0, -2.0]], token_mean=[[-1.0]], token_std=[[1.0]])
    with pytest.raises(InputError, match="strings"):
        ScoredTexts.build([[-1.0]], texts=["a", "b"])
    with pytest.raises(InputError, match="lengths"):
        ScoredTexts.build(np.zeros((2, 3)) - 1, lengths=[1, 4])
    with pytest.raises(InputError, match="shape"):
        ScoredTexts.build(
            [[-1.0], [-1.0]], shadow_stats=np.zeros((3, 1)), shadow_in=np.zeros((3, 1), bool)
        )


def test_concat_refuses_different_procedures_and_fields():
    a = ScoredTexts.build([[-1.0], [-2.0]], procedure="model-A/full")
    b = ScoredTexts.build([[-1.0], [-2.0]], procedure="model-B/full")
    with pytest.raises(ProcedureMismatchError, match="model-A"):
        ScoredTexts.concat(a, b)
    c = ScoredTexts.build([[-1.0], [-2.0]], texts=["x", "y"])
    with pytest.raises(InputError, match="texts"):
        ScoredTexts.concat(a, c)


def test_evaluate_refuses_fewer_than_two():
    one = ScoredTexts.build([[-1.0]])
    two = ScoredTexts.build([[-1.0], [-2.0]])
    with pytest.raises(InputError, match="at least two"):
        A.evaluate_attack("loss", one, two)
    with pytest.raises(InputError, match="at least two"):
        A.evaluate_attack("loss", two, one)


# -------------------------------------------------------------------------------- registry
def test_builtin_registry_has_citations_and_statements():
    names = A.available_attacks()
    for n in (
        "loss",
        "perplexity",
        "zlib",
        "reference",
        "min-k",
        "min-k++",
        "lira-online",
        "lira-offline",
    ):
        assert n in names
        a = A.get_attack(n)
        assert a.citation and a.measures and "[MX]" in a.citation
    assert dict(A.get_attack("min-k").defaults) == {"k": 0.2}
    assert {d["name"] for d in A.describe_attacks()} >= set(A.BUILTIN_ATTACKS)


def test_missing_field_and_unknown_param_refused():
    d = ScoredTexts.build([[-1.0], [-2.0]])
    with pytest.raises(InputError, match="texts"):
        A.run_attack("zlib", d)
    with pytest.raises(DomainError, match="no parameter"):
        A.run_attack("min-k", d, q=3)
    with pytest.raises(DomainError, match="unknown attack"):
        A.run_attack("nope", d)


def test_user_can_register_an_attack():
    @A.register_attack("max-token-test", citation="test", measures="highest token log-prob")
    def _mx(data, scale=1.0):
        return np.array([scale * a.max() for a in data.token_logprobs])

    try:
        d = ScoredTexts.build([[-1.0, -3.0], [-2.0, -0.5]])
        np.testing.assert_allclose(A.run_attack("max-token-test", d, scale=2.0), [-2.0, -1.0])
        with pytest.raises(DomainError, match="already registered"):
            A.register_attack("max-token-test", _mx, citation="x", measures="y")
        with pytest.raises(DomainError, match="citation"):
            A.register_attack("other", _mx, citation="", measures="y")
    finally:
        A.unregister_attack("max-token-test")
    assert "max-token-test" not in A.available_attacks()


def test_attack_returning_nan_or_wrong_shape_is_refused():
    A.register_attack(
        "bad-test", lambda data: np.full(len(data) + 1, 0.0), citation="t", measures="t"
    )
    A.register_attack(
        "nan-test", lambda data: np.full(len(data), np.nan), citation="t", measures="t"
    )
    try:
        d = ScoredTexts.build([[-1.0], [-2.0]])
        with pytest.raises(InputError, match="shape"):
            A.run_attack("bad-test", d)
        with pytest.raises(InputError, match="NaN"):
            A.run_attack("nan-test", d)
    finally:
        A.unregister_attack("bad-test")
        A.unregister_attack("nan-test")


# ---------------------------------------------------------------- synthetic worlds for properties
V = 8


def _language_world(rng, n, *, memorized: bool):
    """n texts scored by a synthetic model with full next-token distributions over V tokens.

    Non-memorized texts draw each target token from the model's own distribution; memorized ones
    take the model's most likely token with probability 0.8. Texts (for zlib) and the reference
    model's scores (its own tokenization, 1-2x as many tokens) are drawn the same way for both.
    """
    lps, mus, sds, texts, refs = [], [], [], [], []
    for _ in range(n):
        T = int(rng.integers(8, 25))
        logits = rng.normal(0.0, 1.5, size=(T, V))  # [T, V]
        full = logits - np.logaddexp.reduce(logits, axis=1, keepdims=True)  # [T, V]
        p = np.exp(full)
        cdf = np.cumsum(p, axis=1)  # [T, V]
        sampled = np.minimum((cdf < rng.random(T)[:, None] * cdf[:, -1:]).sum(axis=1), V - 1)  # [T]
        if memorized:
            take = rng.random(T) < 0.8
            sampled = np.where(take, full.argmax(axis=1), sampled)
        mu, sd = A.token_mean_std(full)
        lps.append(full[np.arange(T), sampled])
        mus.append(mu)
        sds.append(sd)
        texts.append(" ".join(f"w{int(v)}" for v in rng.integers(0, 50, size=T)))
        R = int(rng.integers(T, 2 * T))
        refs.append(np.log(rng.uniform(0.02, 1.0, size=R)) * (T / R))
    return lps, mus, sds, texts, refs


def _logit_world(
    rng,
    n,
    *,
    member_effect: float,
    n_shadows=8,
    tokens=12,
    difficulty_sd=1.0,
    shadow_effect=1.0,
    noise=1.0,
):
    """LiRA world: text i has difficulty d_i; per-token logits u = d_i + effect + noise, so the
    'token' LiRA statistic is exactly mean(u). Shadow statistics follow the same law with the
    IN effect for the shadows that trained on the text (random halves)."""
    d = rng.normal(0.0, difficulty_sd, size=n)  # [n]
    u = d[:, None] + member_effect + rng.normal(0.0, noise, size=(n, tokens))  # [n, T]
    lps = list(-np.logaddexp(0.0, -u))  # log sigmoid
    # each text in exactly half of the shadows (Carlini et al. 2022's balanced random halves)
    inm = np.argsort(rng.random((n_shadows, n)), axis=0) < n_shadows // 2  # [S, n]
    shadow = (
        d[None, :]
        + shadow_effect * inm
        + rng.normal(0.0, noise / math.sqrt(tokens), size=(n_shadows, n))
    )
    return lps, shadow, inm


def _build(lang, logit, statistic="token"):
    lps, mus, sds, texts, refs = lang
    llp, shadow, inm = logit
    return (
        ScoredTexts.build(
            lps,
            token_mean=mus,
            token_std=sds,
            texts=texts,
            reference_token_logprobs=refs,
            procedure="synthetic",
        ),
        ScoredTexts.build(
            llp,
            shadow_stats=shadow,
            shadow_in=inm,
            shadow_statistic=statistic,
            procedure="synthetic-logit",
        ),
    )


LANG_ATTACKS = ("loss", "perplexity", "zlib", "reference", "min-k", "min-k++")
LIRA_ATTACKS = ("lira-online", "lira-offline")


def _world(seed, n, separated: bool):
    rng = np.random.default_rng(seed)
    mem = _build(
        _language_world(rng, n, memorized=separated),
        _logit_world(rng, n, member_effect=1.0 if separated else 0.0),
    )
    non = _build(_language_world(rng, n, memorized=False), _logit_world(rng, n, member_effect=0.0))
    return mem, non


def test_every_attack_sits_at_chance_on_identical_distributions():
    """Under identical member/non-member distributions, each attack's 95% DeLong interval on the
    AUC should exclude 0.5 in about 5% of independent seeds (DeLong's Wald interval is slightly
    liberal at 40 + 40: ~5.4% in a 4000-seed check). Over S = 100 seeds we require, per attack,
    at most binom.ppf(0.999, S, 0.06) exclusions: the false-alarm rate of this check is below
    0.1% per attack (about 0.8% for all eight) if the true exclusion rate is 6% or less."""
    S, n = 100, 40
    limit = int(stats.binom.ppf(0.999, S, 0.06))
    counts = dict.fromkeys(LANG_ATTACKS + LIRA_ATTACKS, 0)
    aucs = {a: [] for a in counts}
    for seed in range(S):
        (mem_l, mem_g), (non_l, non_g) = _world(1000 + seed, n, separated=False)
        for a in counts:
            m, nn = (mem_l, non_l) if a in LANG_ATTACKS else (mem_g, non_g)
            ev = A.evaluate_attack(a, m, nn)
            counts[a] += ev.auc.excludes_chance
            aucs[a].append(ev.auc.auc)
    for a, c in counts.items():
        assert c <= limit, f"{a}: interval excluded 0.5 in {c}/{S} null seeds (limit {limit})"
        # and the AUCs centre on 1/2: |mean - 0.5| within 4 standard errors of the seed mean
        v = np.array(aucs[a])
        assert abs(v.mean() - 0.5) < 4 * v.std(ddof=1) / math.sqrt(S), a


def test_every_attack_beats_chance_on_separated_data():
    (mem_l, mem_g), (non_l, non_g) = _world(7, 60, separated=True)
    for a in LANG_ATTACKS + LIRA_ATTACKS:
        m, nn = (mem_l, non_l) if a in LANG_ATTACKS else (mem_g, non_g)
        ev = A.evaluate_attack(a, m, nn, fpr=0.05)
        assert ev.auc.leak_low > 0, (a, ev.auc)
        assert ev.auc.auc > 0.6, (a, ev.auc.auc)
        assert ev.tpr is not None and ev.tpr.tpr > ev.tpr.certified_fpr


def test_evaluate_attack_reports_and_refuses_uncertifiable_fpr():
    (mem_l, _), (non_l, _) = _world(11, 10, separated=True)
    ev = A.evaluate_attack("loss", mem_l, non_l)
    assert ev.tpr is None and ev.auc.n_members == 10
    d = ev.to_dict()
    assert d["attack"] == "loss" and isinstance(d["member_scores"], list)
    with pytest.raises(DomainError, match="at least 19 non-members"):
        A.evaluate_attack("loss", mem_l, non_l, fpr=0.05)


def test_loss_attack_orientation_matches_auc():
    # Members with higher log-probs -> AUC above 1/2 (scores are "higher = member").
    mem = ScoredTexts.build([[-0.1, -0.2], [-0.3], [-0.2, -0.1, -0.1]])
    non = ScoredTexts.build([[-2.0, -1.0], [-3.0], [-1.5]])
    ev = A.evaluate_attack("loss", mem, non)
    assert ev.auc.auc == 1.0
    assert roc_auc(ev.member_scores, ev.nonmember_scores).auc == 1.0


def test_reference_reads_exactly_half_when_target_equals_reference():
    """[MX] §8.2, gated release: "the two audits that calibrate against a second model,
    reference-model scoring and LiRA, read exactly 0.500" when the target agrees with the base
    (the reference) on every audited text."""
    rng = np.random.default_rng(4)
    lps = [np.log(rng.uniform(0.01, 1, int(rng.integers(3, 9)))) for _ in range(96)]
    mem = ScoredTexts.build(lps[:48], reference_token_logprobs=lps[:48])
    non = ScoredTexts.build(lps[48:], reference_token_logprobs=lps[48:])
    ev = A.evaluate_attack("reference", mem, non)
    assert ev.auc.auc == 0.5 and not ev.auc.excludes_chance
    assert np.all(ev.member_scores == 0.0)
