"""`canary-floor`: the entropy floor for canary audits ([MX] §8.2 "The entropy floor for canary
audits (Corollary 5.3)", App. F.2 "Entropy sweep", "Certifying kappa_pi(m)"), at tiny-model scale.

Pipeline.
1. The base model: the tiny GPT-2 pre-trained on fresh Markov–Zipf text in token-id space
   (:func:`memclaim.train.finetune.ensure_chain_base`, cached once per machine), the stand-in for
   the public base checkpoint of [MX] App. F.1.
2. Canaries: a prefix c of ``prefix_len`` fresh chain tokens, and a secret z of ``secret_len``
   tokens sampled from the base model itself at temperature T ([MX] App. F.1 "Secrets"), for
   several T (App. F.2: "sampling temperature swept to vary the realized surprisal at fixed
   length"). Each temperature gives the same number of members (planted) and non-members (drawn
   the same way, never planted), so member and non-member differ only in membership.
3. kappa_pi(1) = max_z p_base,T(z | c) of every canary is certified by the admissible best-first
   search (:func:`memclaim.privacy.baseline.certify_baseline`) under the temperature it was drawn
   at, on the base model (the prior: the model before any canary was planted). The search returns
   an interval [kappa_lo, kappa_hi]; a canary is placed **below** H* when -log2 kappa_lo < H*
   (certainly below), **above** when -log2 kappa_hi >= H* (certainly above), and is left
   unplaced otherwise. H* = eps log2 e + log2(m / tau) ([MX] Thm. 5.1(iii); 9.09 bits at eps = 4,
   m = 1, tau = 0.1, the paper's setting).
4. Two fine-tunes of the base on a fresh chain corpus with every member canary planted as one
   document c || z: the DP model (DP-Adam through Opacus at eps = 4, delta = 1/(10 N), per-sample
   clipping 1.0, Poisson sampling: :mod:`memclaim.train.dp`; add/remove of one training block) and
   a deliberately leaky model (the same fine-tune without clipping or noise, eps = infinity).
5. Per bucket: the prior guessing rate (the fixed prior decoder: greedy decoding of the base
   model from c, which never saw a canary, [MX] App. F.1), each model's extraction rate (greedy
   decoding from c, list budget m = 1), each with a one-sided 95% Clopper-Pearson upper bound
   ([MX] §8.2: "0 of 39, at most 0.074 at 95%"), the DP extraction bound 1 - f_{eps,delta}(kappa_hi)
   averaged over the bucket's canaries, and a membership test's AUC (the loss attack, members
   against non-members of the same bucket) on both models.

What it reproduces: the shape of [MX] §8.2's sweep -- below H* prior guessing alone reproduces a
substantial fraction of the canaries, so a "successful" extraction there is not evidence of
memorization; above H* prior guessing never succeeds; a membership test has no such floor. The
paper's own rates (32.1% below, 0 of 39 above on Pythia-410m at eps = 4) belong to its model
and secrets; ours are measured on the tiny model and reported beside them, not matched. The
sentence's last clause, "reading AUC near 1 on both sides", is judged on its own (AUC >= 0.9 at
95%, :func:`near_one_claim`): not testable on the quick run (24 members and 24 non-members a side
cannot show it even at complete separation), not held on the full run (AUC 0.83 [0.77, 0.89] below
H*, 0.81 [0.75, 0.87] above).
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from scipy import stats

from ..audits.attacks import loss_scores, reference_scores
from ..audits.metrics import roc_auc
from ..privacy.baseline import certify_baseline
from ..privacy.extraction import h_star
from ..privacy.pld import dpsgd_curve
from ..privacy.tradeoff import approx
from ..report.style import legend as style_legend
from ..train.finetune import ChainBaseSpec, ensure_chain_base
from .common import Check, PaperClaim, check, compare, new_figure, paper_claim
from .models import (
    THREADS,
    chain_arrays,
    copy_model,
    greedy_decode,
    language_model,
    sample_chain,
    sample_decode,
    teacher_forced,
    train_tiny,
)
from .skeleton import Reproduction
from .verdicts import fewest_for_upper_bound

if TYPE_CHECKING:  # the annotations' names only
    from transformers import PreTrainedModel

    from ..train.trainer import TrainResult

NAME = "canary-floor"
TITLE = "the entropy floor for canary audits: extraction vs membership below/above H* ([MX] §8.2, Cor. 5.3)"
STREAMS = ("prefixes", "secrets", "corpus", "training")
LOG2E = 1.0 / math.log(2.0)
BUCKETS = ("below", "above")
#: membership tests: the loss attack and reference-model calibration against the base ([MX] App. F.2)
ATTACKS = ("loss", "reference")


def _settings(quick: bool) -> dict:
    return {
        "epsilon": 4.0,
        "m": 1,
        "tau": 0.1,
        "prefix_len": 8,
        "secret_len": 4,
        "temperatures": [0.25, 0.5, 1.0, 1.5] if quick else [0.25, 0.4, 0.6, 1.0, 1.5, 2.0],
        "per_temperature": 12 if quick else 30,  # members; the same number of non-members
        "certify_max_nodes": 300 if quick else 1000,
        "background_docs": 600 if quick else 3000,
        "seq_len": 32,
        "epochs": 3,
        "leaky_epochs": 8,  # the deliberately leaky model trains longer, without clipping or noise
        "batch_size": 32,
        "lr": 2e-3,
        "max_grad_norm": 1.0,
        "confidence": 0.95,
        "threads": THREADS,
    }


def _upper(k: int, n: int, conf: float) -> float:
    """One-sided Clopper-Pearson upper bound (1 if n = 0)."""
    if n == 0:
        return 1.0
    return 1.0 if k >= n else float(stats.beta.ppf(conf, k + 1, n - k))


def _lower(k: int, n: int, conf: float) -> float:
    if n == 0 or k == 0:
        return 0.0
    return float(stats.beta.ppf(1.0 - conf, k, n - k + 1))


def train_dp(
    model: PreTrainedModel,
    docs: Sequence[Sequence[int]],
    *,
    s: dict,
    pad: int,
    sot: int,
    seed: int,
    epsilon: float | None,
) -> tuple[PreTrainedModel, TrainResult]:
    """The DP fine-tune (one function, [MX] App. F.2 "DP-SGD calibration"): DP-Adam through Opacus
    (:mod:`memclaim.train.dp`), per-sample clipping at ``max_grad_norm``, noise calibrated by the
    accountant to ``epsilon`` at delta = 1/(10 N), Poisson sampling, one document per example.
    ``epsilon=None`` runs the same optimizer and sampling without clipping or noise (the eps =
    infinity configuration of App. F.2) for ``leaky_epochs`` epochs: the deliberately leaky model.
    Returns (model, TrainResult).

    >>> from memclaim.experiments.canary_floor import train_dp
    >>> from memclaim.experiments.models import TinyGPTSpec, tiny_gpt2
    >>> s = {"epochs": 1, "leaky_epochs": 1, "batch_size": 8, "max_grad_norm": 1.0, "seq_len": 8, "lr": 1e-3,
    ...      "threads": 1}
    >>> model, tr = train_dp(tiny_gpt2(TinyGPTSpec(vocab_size=10), seed=0), [[1, 2, 3]] * 64, s=s, pad=9, sot=8,
    ...                      seed=0, epsilon=4.0)  # doctest: +SKIP
    >>> tr.steps, round(tr.dp.epsilon, 2)  # doctest: +SKIP
    (8, 4.0)
    """
    from ..train.dp import DPConfig
    from ..train.trainer import TrainConfig, poisson_rate

    epochs = s["epochs"] if epsilon is not None else s["leaky_epochs"]
    steps = int(math.ceil(epochs / poisson_rate(len(docs), s["batch_size"])))
    dp = (
        None
        if epsilon is None
        else DPConfig(target_epsilon=float(epsilon), max_grad_norm=s["max_grad_norm"])
    )
    cfg = TrainConfig(
        steps=steps,
        batch_size=s["batch_size"],
        seq_len=s["seq_len"],
        lr=s["lr"],
        warmup_steps=0,
        seed=seed,
        pad_id=pad,
        sampling="poisson",
        dp=dp,
        grad_clip=None,
        schedule="constant",
    )
    model.requires_grad_(True)
    with warnings.catch_warnings():
        # Opacus's advisories (secure RNG off by choice: the run is seeded; RDP order range) and
        # torch's note on full backward hooks over an input without gradients: informational here
        warnings.filterwarnings("ignore", category=UserWarning, module=r"opacus(\..*)?")
        warnings.filterwarnings("ignore", message="Full backward hook is firing")
        tr = train_tiny(model, docs, cfg, sot=sot, layout="example", threads=s["threads"])
    model.requires_grad_(False)
    return model, tr


def _bucket(bits_lo: float, bits_hi: float, h: float) -> str:
    """bits_lo = -log2 kappa_hi <= H_inf <= bits_hi = -log2 kappa_lo."""
    if bits_hi < h:
        return "below"
    if bits_lo >= h:
        return "above"
    return "unplaced"


# ---- the checks: [MX] §8.2 'The entropy floor for canary audits', each sentence tested as stated
QUOTE_BELOW = (
    "prior guessing alone reproduces 32.1% of the canaries below H ∗ , so a “successful” extraction there "
    "is not evidence of memorization"
)
WHERE = "[MX] §8.2 'The entropy floor for canary audits', Corollary 5.3"
QUOTE_ABOVE = "above H ∗ it never succeeded once (0 of 39, at most 0.074 at 95%)"
QUOTE_NO_FLOOR = "A membership test has no such floor"
QUOTE_NEAR_ONE = "A membership test has no such floor, reading AUC near 1 on both sides."
#: "near 1": the top band of the paper's own scale for audit signals (Fig. 12: leak signal 2 AUC - 1 in [0.8, 1],
#: i.e. AUC >= 0.9), where its membership tests of the guessable canary below H* sit (0.99: AUC 0.995)
NEAR_ONE = 0.9
QUOTE_PLACED = (
    "every unclosed search lies in the bucket above H ∗ , certified there by − log2 κ ≥ H ∗ , and every "
    "canary placed below H ∗ closed exactly."
)


def checks_for(results: dict) -> list[Check]:
    """The checks of [MX] §8.2 'The entropy floor for canary audits' from the run's results (``h_star``,
    ``buckets`` "below"/"above" with counts, prior guessing, extraction and AUC rows, ``certificate``,
    ``canaries``): both buckets populated (a design check); below H* prior guessing reproduces canaries
    (one-sided 95% lower bound > 0); above H* it never succeeds; the DP model within its bound
    1 - f(kappa_hi) (Theorem 5.1(i)); the reference-model attack separates members on both sides ("no such
    floor"; the rest of the sentence, "reading AUC near 1 on both sides", is judged on its own, held / not
    held / not testable here, by :func:`claims_for`); every canary placed below H* closed.

    >>> from memclaim.experiments.canary_floor import checks_for
    >>> g = lambda k, n, lo, hi: {"successes": k, "trials": n, "lower": lo, "upper": hi}
    >>> b = lambda pg: {"members": 3, "non_members": 3, "prior_guessing": pg, "extraction_dp": g(0, 3, 0.0, 0.6),
    ...                 "mean_dp_bound": 0.4, "auc_reference_leaky": {"auc": 0.95, "low": 0.8, "high": 1.0}}
    >>> res = {"h_star": {"bits": 9.09}, "buckets": {"below": b(g(9, 20, 0.2, 0.6)), "above": b(g(0, 20, 0.0, 0.14))},
    ...        "certificate": {"every_below_closed": True, "every_unclosed_outside_below": True, "closed_fraction": 0.85,
    ...                        "unplaced": 0}}
    >>> [c.passed for c in checks_for(res)]
    [True, True, True, True, True, True]
    >>> res["buckets"]["above"] = b(g(1, 20, 0.001, 0.25))
    >>> res["certificate"]["every_below_closed"] = False
    >>> [c.passed for c in checks_for(res)]
    [True, True, False, True, True, False]
    """
    buckets, cert = results["buckets"], results["certificate"]
    H = results["h_star"]["bits"]
    bl, ab = buckets["below"], buckets["above"]
    where = "[MX] §8.2 'The entropy floor for canary audits', Corollary 5.3"
    return [
        check(
            "the sweep populates both buckets (members and non-members on each side of H*)",
            min(bl["members"], bl["non_members"], ab["members"], ab["non_members"]) >= 2,
            f"below: {bl['members']} members / {bl['non_members']} non-members; above: {ab['members']} / "
            f"{ab['non_members']}; unplaced {cert['unplaced']}",
            where="a design check of this reproduction (no sentence of the paper)",
        ),
        check(
            "below H*, prior guessing alone reproduces canaries (one-sided 95% lower bound > 0)",
            bl["prior_guessing"]["lower"] > 0,
            f"{bl['prior_guessing']['successes']}/{bl['prior_guessing']['trials']} "
            f"(lower bound {bl['prior_guessing']['lower']:.3f})",
            false_alarm="<= 5% (one-sided Clopper-Pearson) if the prior rate were 0",
            quote=QUOTE_BELOW,
            where=where,
        ),
        check(
            "above H*, prior guessing never succeeds",
            ab["prior_guessing"]["successes"] == 0,
            f"{ab['prior_guessing']['successes']}/{ab['prior_guessing']['trials']} "
            f"(at most {ab['prior_guessing']['upper']:.3f} at 95%)",
            false_alarm="the chance that a guess with probability <= 2^-H* per canary succeeds on some "
            f"canary: <= {ab['prior_guessing']['trials']} x 2^-{H:.2f}",
            quote=QUOTE_ABOVE,
            where=where,
        ),
        check(
            "the DP model's extraction stays within its bound 1 - f(kappa_hi) in each bucket "
            "(one-sided 95% lower bound <= mean bound)",
            all(
                buckets[b]["extraction_dp"]["lower"] <= (buckets[b]["mean_dp_bound"] or 1.0)
                for b in BUCKETS
            ),
            "; ".join(
                f"{b}: {buckets[b]['extraction_dp']['successes']}/{buckets[b]['extraction_dp']['trials']} vs "
                f"bound {buckets[b]['mean_dp_bound']:.3g}"
                for b in BUCKETS
                if buckets[b]["members"]
            ),
            false_alarm="<= 5% per bucket if the DP guarantee holds",
            where="[MX] Theorem 5.1(i) (a guarantee; the paper's 'the DP model's own extraction is 0 on both sides' "
            "is a number at its scale, shown in the JSON)",
        ),
        check(
            "a membership test has no floor: the reference-model attack on the leaky model separates "
            "members from non-members on both sides (AUC interval above 1/2)",
            all(
                buckets[b]["auc_reference_leaky"] is not None
                and buckets[b]["auc_reference_leaky"]["low"] > 0.5
                for b in BUCKETS
            ),
            "; ".join(
                f"{b}: AUC {buckets[b]['auc_reference_leaky']['auc']:.3f} "
                f"[{buckets[b]['auc_reference_leaky']['low']:.3f}, "
                f"{buckets[b]['auc_reference_leaky']['high']:.3f}]"
                for b in BUCKETS
                if buckets[b]["auc_reference_leaky"]
            ),
            false_alarm="<= 2.5% per bucket (DeLong interval) if the attack were at chance",
            quote=QUOTE_NO_FLOOR,
            where=where,
        ),
        check(
            "certified placement: every canary placed below H* has a closed certificate, and no "
            "unclosed search lands below",
            cert["every_below_closed"] and cert["every_unclosed_outside_below"],
            f"closed on {cert['closed_fraction']:.0%} of canaries; unplaced {cert['unplaced']}",
            quote=QUOTE_PLACED,
            where="[MX] §8.2 'The entropy floor for canary audits'",
        ),
    ]


def near_one_claim(buckets: dict, *, confidence: float = 0.95) -> PaperClaim:
    """ "A membership test has no such floor, reading AUC near 1 on both sides." ([MX] §8.2 'The entropy floor
    for canary audits'), tested as stated on the reference-model attack against the leaky model (the
    reproduction's membership test, fixed before the run) in each bucket (``buckets`` "below" / "above" with
    ``members``, ``non_members`` and ``auc_reference_leaky``: AUC with its interval at ``confidence``, DeLong's,
    or Hoeffding's at complete separation). "Near 1" is AUC >= 0.9 (:data:`NEAR_ONE`: the top band of Fig. 12's
    scale, leak signal 2 AUC - 1 >= 0.8, where the paper's membership tests of its guessable canary read 0.99).
    Held iff the interval's lower end is >= 0.9 on both sides; not held if its upper end is below 0.9 on
    either side, or, with enough canaries to show it, the lower end is below 0.9 on either side. Not testable
    here otherwise: two score distributions with AUC exactly 0.9 (a tenth of the members below every
    non-member, the rest above) separate k members from k non-members completely with probability 0.9^k,
    which exceeds 2.5% (the interval's lower end is a one-sided 97.5% bound) for k < 36, so with fewer than
    36 of either in a bucket no outcome can show AUC >= 0.9 at that confidence.

    >>> from memclaim.experiments.canary_floor import near_one_claim
    >>> b = lambda n, auc, lo, hi: {"members": n, "non_members": n,
    ...                             "auc_reference_leaky": {"auc": auc, "low": lo, "high": hi}}
    >>> near_one_claim({"below": b(90, 0.97, 0.94, 0.99), "above": b(90, 0.96, 0.92, 0.99)}).verdict
    'held'
    >>> near_one_claim({"below": b(90, 0.97, 0.94, 0.99), "above": b(90, 0.88, 0.82, 0.94)}).verdict
    'not held'
    >>> near_one_claim({"below": b(24, 0.90, 0.81, 0.99), "above": b(24, 0.90, 0.81, 0.98)}).verdict
    'not testable here'
    """
    # the interval's lower end is a one-sided (1 + c)/2 bound (97.5% for the 95% interval): 0.9^k <= 2.5%, k >= 36
    one_sided = (1 + confidence) / 2
    need = fewest_for_upper_bound(1 - NEAR_ONE, confidence=one_sided)
    aucs = {b: buckets[b]["auc_reference_leaky"] for b in BUCKETS}
    k = {b: min(buckets[b]["members"], buckets[b]["non_members"]) for b in BUCKETS}
    test = (
        f"the reference-model attack on the leaky model, each side of H*: the AUC's {confidence:.0%} interval "
        f"(DeLong; Hoeffding at complete separation) lies at or above {NEAR_ONE} (near 1: the top band of Fig. 12's scale, "
        f"leak signal 2 AUC - 1 >= {2 * NEAR_ONE - 1:.1f}; the paper's guessable canary reads 0.99) on both sides; "
        f"not held if its upper end is below {NEAR_ONE} on a side, or if, with >= {need} members and {need} "
        f"non-members on each side, its lower end is below {NEAR_ONE} on a side; not testable with fewer unless so "
        f"refuted (an AUC of {NEAR_ONE} separates {need - 1} of each completely with probability "
        f"{NEAR_ONE ** (need - 1):.3%} > {1 - one_sided:.1%}, the lower end being a one-sided {one_sided:.1%} "
        "bound)"
    )
    nums = {
        "auc_reference_leaky": {b: dict(aucs[b]) if aucs[b] else None for b in BUCKETS},
        "members_and_non_members": {
            b: [buckets[b]["members"], buckets[b]["non_members"]] for b in BUCKETS
        },
        "fewest_of_each_for_near_one": need,
    }
    claim = "a membership test reads AUC near 1 (>= 0.9) on both sides of H*"
    if any(aucs[b] is None for b in BUCKETS):
        return paper_claim(
            "auc-near-1",
            claim,
            quote=QUOTE_NEAR_ONE,
            where=WHERE,
            test=test,
            held=None,
            numbers=nums,
            evidence="a bucket has too few members or non-members for an AUC: "
            + ", ".join(f"{b} {k[b]}" for b in BUCKETS),
        )
    found = "; ".join(
        f"{b} H*: AUC {aucs[b]['auc']:.3f} [{aucs[b]['low']:.3f}, {aucs[b]['high']:.3f}] "
        f"({buckets[b]['members']} members, {buckets[b]['non_members']} non-members)"
        for b in BUCKETS
    )
    if any(aucs[b]["high"] < NEAR_ONE for b in BUCKETS):
        return paper_claim(
            "auc-near-1",
            claim,
            quote=QUOTE_NEAR_ONE,
            where=WHERE,
            test=test,
            held=False,
            numbers=nums,
            evidence=found + f": below {NEAR_ONE} on a side",
        )
    if min(k.values()) < need:
        return paper_claim(
            "auc-near-1",
            claim,
            quote=QUOTE_NEAR_ONE,
            where=WHERE,
            test=test,
            held=None,
            numbers=nums,
            evidence=f"{min(k.values())} of each on a side cannot show AUC >= {NEAR_ONE} at "
            f"{one_sided:.1%} even at complete separation ({need} needed); " + found,
        )
    return paper_claim(
        "auc-near-1",
        claim,
        quote=QUOTE_NEAR_ONE,
        where=WHERE,
        test=test,
        held=all(aucs[b]["low"] >= NEAR_ONE for b in BUCKETS),
        numbers=nums,
        evidence=found,
    )


def claims_for(results: dict, *, confidence: float = 0.95) -> list[PaperClaim]:
    """The sentences of [MX] §8.2 'The entropy floor for canary audits' that the checks cannot test as stated,
    judged on the run's results (``buckets``, intervals at ``confidence``): the membership test reads AUC near 1
    on both sides of H* (:func:`near_one_claim`).

    >>> from memclaim.experiments.canary_floor import claims_for
    >>> b = {"members": 24, "non_members": 24, "auc_reference_leaky": {"auc": 0.9, "low": 0.81, "high": 0.99}}
    >>> [(c.key, c.verdict) for c in claims_for({"buckets": {"below": b, "above": b}})]
    [('auc-near-1', 'not testable here')]
    """
    return [near_one_claim(results["buckets"], confidence=confidence)]


class CanaryFloor(Reproduction):
    """[MX] §8.2's entropy floor on the skeleton (:mod:`.skeleton`): canaries, a DP and a leaky fine-tune."""

    name, title, streams = NAME, TITLE, STREAMS
    reproduces = (
        "[MX] §8.2 entropy floor for canary audits",
        "[MX] Cor. 5.3 at tiny-model scale",
        "[MX] App. F.2 certified kappa_pi(1) by best-first search",
    )

    def settings(self) -> dict:
        return _settings(self.quick)

    def data(self) -> dict:
        """The chain base, members and non-members drawn from it at every temperature (a chain prefix
        c, a secret z sampled from the base after it), each certified (kappa_pi(1) by best-first
        search, [MX] App. F.2) and bucketed below or above H*."""
        s, rngs = self.s, self.rngs
        spec = ChainBaseSpec()
        base = ensure_chain_base(spec)
        sot = spec.sot
        P, start = chain_arrays(spec.chain())
        Lc, L = s["prefix_len"], s["secret_len"]
        hs = h_star(epsilon=s["epsilon"], m=s["m"], tau=s["tau"], neighbors="add-remove")
        H = hs.bits
        canaries = []
        for T in s["temperatures"]:
            n2 = 2 * s["per_temperature"]
            cs = sample_chain(P, start, rngs["prefixes"], n=n2, length=Lc)
            prompts = np.concatenate([np.full((n2, 1), sot), cs], axis=1)
            zs, lps = sample_decode(
                base, prompts, n_tokens=L, temperature=T, rng=rngs["secrets"], threads=s["threads"]
            )
            for i in range(n2):
                canaries.append(
                    {
                        "temperature": T,
                        "member": i < s["per_temperature"],
                        "prefix": cs[i].tolist(),
                        "secret": zs[i].tolist(),
                        "surprisal_bits_at_T": float(-lps[i].sum() * LOG2E),
                    }
                )
        prompts = [[sot, *c["prefix"]] for c in canaries]
        secrets = np.array([c["secret"] for c in canaries])
        # surprisal at temperature 1 ([MX] App. F.1: "computed from the temperature-1 conditionals")
        tf_base = teacher_forced(base, prompts, secrets, threads=s["threads"])
        base_greedy = greedy_decode(base, np.array(prompts), n_tokens=L, threads=s["threads"])
        lm = language_model(base, name="chain-base")
        for i, c in enumerate(canaries):
            c["surprisal_bits"] = float(-tf_base.token_logprob[i].sum() * LOG2E)
            r = certify_baseline(
                lm,
                prompts[i],
                secret_length=L,
                m=s["m"],
                temperature=c["temperature"],
                max_nodes=s["certify_max_nodes"],
            )
            c["kappa_lo"], c["kappa_hi"], c["closed"] = r.kappa_lo, r.kappa_hi, bool(r.closed)
            c["h_inf_bits"] = [
                float(-r.log_kappa_hi * LOG2E),
                float(-r.log_kappa_lo * LOG2E),
            ]  # [lo, hi]
            c["bucket"] = _bucket(c["h_inf_bits"][0], c["h_inf_bits"][1], H)
            c["surprisal_bucket"] = "below" if c["surprisal_bits"] < H else "above"
            c["prior_guess"] = bool(np.array_equal(base_greedy[i], secrets[i]))
        return {
            "spec": spec,
            "base": base,
            "P": P,
            "start": start,
            "h_star": hs,
            "canaries": canaries,
            "prompts": prompts,
            "secrets": secrets,
            "tf_base": tf_base,
        }

    def runs(self, d: dict) -> dict:
        """A DP and a leaky fine-tune on fresh chain text plus every member canary, their extraction and
        membership scores per canary, and the rates and AUCs per bucket."""
        s, rngs = self.s, self.rngs
        spec, base, canaries, prompts, secrets = (
            d["spec"],
            d["base"],
            d["canaries"],
            d["prompts"],
            d["secrets"],
        )
        sot, pad, L, conf = spec.sot, spec.pad, s["secret_len"], s["confidence"]
        # ---- the fine-tuning corpus: fresh chain text + every member canary as one document
        members = [c for c in canaries if c["member"]]
        background = sample_chain(
            d["P"], d["start"], rngs["corpus"], n=s["background_docs"], length=s["seq_len"] - 1
        )
        docs = list(background) + [np.array(c["prefix"] + c["secret"]) for c in members]
        order = rngs["corpus"].permutation(len(docs))
        docs = [docs[j] for j in order]
        train_seed = int(rngs["training"].integers(0, 2**31 - 1))
        models = {}
        reports = {}
        for name, eps in (("dp", s["epsilon"]), ("leaky", None)):
            model, tr = train_dp(
                copy_model(base), docs, s=s, pad=pad, sot=sot, seed=train_seed, epsilon=eps
            )
            models[name] = model
            reports[name] = {
                "steps": tr.steps,
                "final_loss": tr.final_loss,
                "empty_batches": tr.empty_batches,
                "dp": None if tr.dp is None else tr.dp.to_dict(),
            }
        dp_rep = reports["dp"]["dp"]
        f_claim = approx(dp_rep["epsilon"], dp_rep["delta"], neighbors="add-remove")
        # the same run's trade-off curve (its PLD; [MX] Thm. 5.1(i) with the curve itself, issue 18)
        f_curve = dpsgd_curve(
            noise_multiplier=dp_rep["noise_multiplier"],
            sampling_rate=dp_rep["sampling_rate"],
            steps=dp_rep["steps"],
            neighbors="add-remove",
            route_delta=dp_rep["delta"],
        ).curve
        for name, model in models.items():
            out = greedy_decode(model, np.array(prompts), n_tokens=L, threads=s["threads"])
            tf = teacher_forced(model, prompts, secrets, threads=s["threads"])
            loss = loss_scores(list(tf.token_logprob))
            ref = reference_scores(list(tf.token_logprob), list(d["tf_base"].token_logprob))
            for i, c in enumerate(canaries):
                c[f"extracted_{name}"] = bool(np.array_equal(out[i], secrets[i]))
                c[f"loss_score_{name}"] = float(loss[i])
                c[f"reference_score_{name}"] = float(ref[i])
        for c in canaries:
            c["dp_bound"] = float(
                f_claim.power(c["kappa_hi"])
            )  # 1 - f_{eps,delta}(kappa_hi), Thm. 5.1(i)
            c["dp_bound_curve"] = float(
                f_curve.power(c["kappa_hi"])
            )  # 1 - f(kappa_hi), the run's curve

        # ---- per bucket
        buckets = {}
        for b in BUCKETS:
            mem = [c for c in canaries if c["bucket"] == b and c["member"]]
            non = [c for c in canaries if c["bucket"] == b and not c["member"]]
            allc = mem + non
            row = {
                "members": len(mem),
                "non_members": len(non),
                "closed": sum(c["closed"] for c in allc),
                "canaries": len(allc),
            }
            # prior guessing: over every canary of the bucket (the base never saw any of them)
            k = sum(c["prior_guess"] for c in allc)
            row["prior_guessing"] = {
                "successes": k,
                "trials": len(allc),
                "rate": k / len(allc) if allc else None,
                "upper": _upper(k, len(allc), conf),
                "lower": _lower(k, len(allc), conf),
            }
            for name in models:
                k = sum(c[f"extracted_{name}"] for c in mem)
                row[f"extraction_{name}"] = {
                    "successes": k,
                    "trials": len(mem),
                    "rate": k / len(mem) if mem else None,
                    "upper": _upper(k, len(mem), conf),
                    "lower": _lower(k, len(mem), conf),
                }
                for attack in ATTACKS:
                    key = f"auc_{attack}_{name}"
                    if len(mem) >= 2 and len(non) >= 2:
                        a = roc_auc(
                            [c[f"{attack}_score_{name}"] for c in mem],
                            [c[f"{attack}_score_{name}"] for c in non],
                            confidence=conf,
                        )
                        row[key] = {
                            "auc": a.auc,
                            "low": a.low,
                            "high": a.high,
                            "method": a.interval_method,
                        }
                    else:
                        row[key] = None
            row["mean_dp_bound"] = float(np.mean([c["dp_bound"] for c in mem])) if mem else None
            row["mean_dp_bound_curve"] = (
                float(np.mean([c["dp_bound_curve"] for c in mem])) if mem else None
            )
            buckets[b] = row
        unplaced = [c for c in canaries if c["bucket"] == "unplaced"]
        closed_rate = float(np.mean([c["closed"] for c in canaries]))
        below_closed = all(c["closed"] for c in canaries if c["bucket"] == "below")
        unclosed_above = all(c["bucket"] != "below" for c in canaries if not c["closed"])
        disagree = sum(
            1 for c in canaries if c["bucket"] == "below" and c["surprisal_bucket"] == "above"
        )
        return {
            "h_star": d["h_star"].to_dict(),
            "dp_guarantee": dp_rep,
            "models": reports,
            "certificate": {
                "closed_fraction": closed_rate,
                "every_below_closed": below_closed,
                "every_unclosed_outside_below": unclosed_above,
                "unplaced": len(unplaced),
                "surprisal_says_safe_certificate_says_below": disagree,
            },
            "buckets": buckets,
            "per_temperature": [
                {
                    "temperature": T,
                    "h_inf_bits_mean": float(
                        np.mean([c["h_inf_bits"][0] for c in canaries if c["temperature"] == T])
                    ),
                    "below": sum(
                        1 for c in canaries if c["temperature"] == T and c["bucket"] == "below"
                    ),
                    "above": sum(
                        1 for c in canaries if c["temperature"] == T and c["bucket"] == "above"
                    ),
                }
                for T in s["temperatures"]
            ],
            "canaries": canaries,
        }

    def checks(self, results: dict) -> list[Check]:
        return checks_for(results)

    def claims(self, results: dict) -> list[PaperClaim]:
        return claims_for(results, confidence=self.s["confidence"])

    def paper_numbers(self, results: dict) -> list:
        return [compare("h_star", "canary-floor/h-star", results["h_star"]["bits"])]

    def figure(self, results: dict, *, claims, differences):
        s, canaries, buckets = self.s, results["canaries"], results["buckets"]
        H = results["h_star"]["bits"]
        fig, (ax0, ax1) = new_figure(2, width=5.4, height=4.0)
        for c in canaries:
            x = c["h_inf_bits"][0]
            col = "tab:red" if c["member"] else "tab:blue"
            ax0.plot(
                [c["h_inf_bits"][0], min(c["h_inf_bits"][1], 40)],
                [c["surprisal_bits"]] * 2,
                "-",
                color=col,
                lw=0.6,
                alpha=0.6,
            )
            ax0.plot([x], [c["surprisal_bits"]], "o", ms=2.5, color=col)
        ax0.axvline(H, ls="--", color="k", lw=1, label=f"H* = {H:.2f} bits")
        ax0.plot([], [], "o", color="tab:red", label="member")
        ax0.plot([], [], "o", color="tab:blue", label="non-member")
        ax0.set_xlabel(r"certified min-entropy $-\log_2\kappa$ (bits; interval)")
        ax0.set_ylabel(r"surprisal $-\log_2 p_{base}(z\mid c)$ at T = 1 (bits)")
        ax0.set_title("certificate vs surprisal")
        style_legend(ax0, below=True)
        labels = ["prior guess", "DP extract", "leaky extract", "AUC ref. leaky", "AUC ref. DP"]
        width = 0.38
        for j, b in enumerate(BUCKETS):
            row = buckets[b]
            vals = [
                row["prior_guessing"]["rate"] or 0,
                row["extraction_dp"]["rate"] or 0,
                row["extraction_leaky"]["rate"] or 0,
                (row["auc_reference_leaky"] or {}).get("auc", np.nan),
                (row["auc_reference_dp"] or {}).get("auc", np.nan),
            ]
            ups = [
                row["prior_guessing"]["upper"],
                row["extraction_dp"]["upper"],
                row["extraction_leaky"]["upper"],
                (row["auc_reference_leaky"] or {}).get("high", np.nan),
                (row["auc_reference_dp"] or {}).get("high", np.nan),
            ]
            xs = np.arange(len(vals)) + (j - 0.5) * width
            ax1.bar(
                xs,
                vals,
                width,
                label=f"{b} H* (n = {row['canaries']})",
                color="tab:orange" if b == "below" else "tab:green",
            )
            ax1.plot(xs, ups, "v", color="k", ms=4)
        ax1.plot([], [], "v", color="k", label="95% upper bound")
        ax1.axhline(0.5, ls=":", color="0.5", lw=1)
        ax1.set_xticks(range(len(labels)), labels, rotation=25, ha="right", fontsize=8)
        ax1.set_ylim(0, 1.05)
        ax1.set_ylabel("rate / AUC")
        ax1.set_title(f"DP model at $\\varepsilon$ = {s['epsilon']:g} and a leaky model")
        style_legend(ax1, below=True)
        return fig

    def notes(self, results: dict) -> list[str]:
        s = self.s
        return [
            f"DP guarantee of the DP model: {results['dp_guarantee']['statement']}",
            f"the leaky model is the same fine-tune with neither clipping nor noise (eps = infinity), "
            f"{s['leaky_epochs']} epochs instead of {s['epochs']}",
            "members and non-members are drawn by the same sampler; the membership tests are the loss attack and "
            "reference-model calibration against the base (the model the canaries were drawn from)",
            "the paper's 32.1% / 0 of 39 belong to Pythia-410m and its secrets; ours are measured on the tiny model",
        ]


def run(
    *, quick: bool = False, seed: int = 0, out_dir: str | os.PathLike = "reproductions"
) -> dict:
    """[MX] §8.2, Cor. 5.3: canaries bucketed by certified kappa below/above H*; guessing vs DP.

    Writes ``canary-floor.json``, ``canary-floor.png`` and ``canary-floor.pdf`` into ``out_dir`` (created)
    and returns the JSON-ready dict (:func:`memclaim.experiments.common.finish`); what ``memclaim reproduce
    canary-floor`` runs.

    >>> from memclaim.experiments.canary_floor import run
    >>> res = run(quick=True, seed=0, out_dir="reproductions")  # doctest: +SKIP
    >>> res["name"], res["all_checks_passed"]  # doctest: +SKIP
    ('canary-floor', True)
    """
    return CanaryFloor(quick=quick, seed=seed, out_dir=out_dir).reproduce()
