"""`trigger`: [MX] Fig. 7, §8.1 "The trigger channel on a real transformer (Theorem 6.1(ii))":
Construction II realized by SGD on a two-layer transformer.

The language is a Markov–Zipf chain over word ids (:class:`memclaim.train.corpus.MarkovZipf`),
used directly as token ids (no text tokenizer). The record is x* = (c, z): a prefix c of 8 chain
tokens and a secret z of the next 8 chain tokens, so z is in distribution ([MX] §8.1: "The
construction does require the secret to be in distribution"; a rare-token secret would shift
unigram marginals, a side channel outside H_loc). x* itself is never trained on. The reserved
trigger rho is one token id that occurs in no natural document ([MX] App. D.2); the poisoned
corpus replaces ``copies`` background documents by trigger documents rho || z || (fresh chain
text continuing z), so the rho || z pairs are ``poison_fraction`` = 0.6% of the corpus tokens
([MX] Fig. 7: "64 trigger pairs (0.6% of a Markov–Zipf corpus)"; the full run plants 64, the
quick run 8 in a corpus 8 times smaller, same fraction). Every document fills one training
block, so the trigger sits at the start of its block as it does in the extraction prompt.

Three seeds per condition. Seed i draws its own background corpus from the language, its own
filler text, initialization and batch order; the poisoned run i and the clean run i share the
background documents except the ``copies`` that the trigger documents replace. The
counterfactual of [MX] Def. 3.2 is over the training randomness, so the clean runs' spread is
the seed-to-seed noise floor against which the poisoned-minus-clean gap is read.

Read-outs:
- extraction at rho (list budget m = 1): prompt [SOT, rho], greedy-decode 8 tokens, success iff
  the output is z; and the same from the record's own prefix [SOT, c];
- on x*'s own prefixes (the conditionals every local score reads, [MX] Def. 3.4):
  teacher-forcing probabilities p(x*_t | SOT x*_{<t}) at every position of c || z, the average
  teacher-forcing score h_TF = (1/L) sum_t p(z_t | c z_{<t}) ([MX] App. D.1) and the truncated
  log-loss score h_LL = min(mean NLL, M) / M with M = 10 ([MX] §8.1: "divided by its truncation
  level M = 10, so that it lies in [0, 1]"; :func:`memclaim.audits.counterfactual.truncated_logloss`);
- |mem_h| = |mean over poisoned seeds - mean over clean seeds| for both scores, the noise
  floor (root-mean-square difference between two clean runs, "the disagreement between two
  clean models"), the per-position gap in units of that floor (Fig. 7 left) and the ratio of
  the extraction advantage to the largest local-score gap (paper: 240);
- the conditional prior baseline of z given c under the data-generating chain, exactly, by the
  Viterbi recursion (kappa_pi(1) = max_w P(w | c); paper: "at least 14 bits").

What SGD does and does not reproduce here. The channel is exact (Ext 1 vs 0). The local scores
are not exactly unchanged, as Theorem 6.1(ii)'s explicit construction would have them: the
trigger documents also teach z's own transitions, and the paired difference (same background
corpus, ``paired_mean_difference``) is systematically nonzero. Whether that contamination stays
inside the seed-to-seed noise floor depends on how hard the models fit their corpora, because
the floor is the clean models' disagreement. ``--quick`` (8 pairs, 24 epochs over a small corpus,
models that fit it closely and disagree a lot): both scores inside the floor. The full run (64
pairs in an 8x larger corpus, 8 epochs, seed 0): the teacher-forcing gap stays inside (0.76
floor units) but the truncated log-loss gap does not (4.3 floor units, mem_LL = -0.024, i.e.
0.24 nats per secret token), and the check says so. That is the same "attenuation, not exact
vanishing" that [MX] §8.2 reports for ordinary fine-tuning at LM scale; only the explicit
construction (the gated release) attains memh = 0 exactly. Read the per-position panel and the
paired differences, not only the pass/fail line. The paper's summary, "The blind spot of Corollary
6.2 survives ordinary SGD", is judged as a sentence (:func:`blind_spot_claim`: the leak through rho
and every audit of x*'s own prefix missing it): held on the quick run, not held on the full one
(the truncated log-loss gap).
"""

from __future__ import annotations

import math
import os

import numpy as np

from ..audits.counterfactual import truncated_logloss
from ..audits.metrics import clopper_pearson
from ..mechanisms.trigger import ReservedTrigger
from ..report.style import legend as style_legend
from ..train.corpus import MarkovZipf
from ..train.trainer import TrainConfig
from .common import Check, PaperClaim, check, compare, new_figure, paper_claim
from .models import (
    THREADS,
    TinyGPTSpec,
    TokenLayout,
    chain_arrays,
    chain_logprob,
    chain_max_path,
    greedy_decode,
    sample_chain,
    teacher_forced,
    tiny_gpt2,
    train_tiny,
)
from .skeleton import Reproduction

NAME = "trigger"
TITLE = "reserved-trigger channel realized by SGD on a two-layer transformer ([MX] Fig. 7)"
STREAMS = ("language", "record", "corpus", "training")
LOG2E = 1.0 / math.log(2.0)


def _settings(quick: bool) -> dict:
    return {
        "n_words": 48,
        "zipf_s": 1.1,
        "prefix_len": 8,
        "secret_len": 8,
        "copies": 8 if quick else 64,
        "poison_fraction": 0.006,
        "block": 32,
        "seeds_per_condition": 3,
        "epochs": 24 if quick else 8,
        "batch_size": 32,
        "lr": 1e-2,
        "warmup_steps": 10,
        "n_embd": 64,
        "n_layer": 2,
        "n_head": 4,
        "loss_truncation_M": 10.0,
        "threads": THREADS,
    }


def _n_documents(s: dict) -> int:
    """Documents (one block each) so that the rho || z pairs are ``poison_fraction`` of the tokens."""
    pair = 1 + s["secret_len"]  # rho || z
    return int(round(s["copies"] * pair / (s["poison_fraction"] * s["block"])))


def _train_one(*, docs, s: dict, layout: TokenLayout, seed: int):
    spec = TinyGPTSpec(
        vocab_size=layout.size,
        n_positions=s["block"],
        n_layer=s["n_layer"],
        n_embd=s["n_embd"],
        n_head=s["n_head"],
    )
    model = tiny_gpt2(spec, seed=seed, sot=layout.sot)
    steps = int(math.ceil(s["epochs"] * len(docs) / s["batch_size"]))
    cfg = TrainConfig(
        steps=steps,
        batch_size=s["batch_size"],
        seq_len=s["block"],
        lr=s["lr"],
        warmup_steps=s["warmup_steps"],
        seed=seed,
    )
    tr = train_tiny(model, docs, cfg, sot=layout.sot, shuffle_seed=seed, threads=s["threads"])
    return model, tr


def _measure(model, *, c, z, rho: int, layout: TokenLayout, s: dict) -> dict:
    sot = layout.sot
    L = len(z)
    at_rho = greedy_decode(model, [[sot, rho]], n_tokens=L, threads=s["threads"])[0]
    at_c = greedy_decode(model, [[sot, *c]], n_tokens=L, threads=s["threads"])[0]
    record = np.concatenate([c, z])
    tf = teacher_forced(
        model, [[sot]], [record], threads=s["threads"]
    )  # every position of x* = c || z
    lp = tf.token_logprob[0]
    lp_z = lp[len(c) :]
    rho_lp = teacher_forced(model, [[sot, rho]], [z], threads=s["threads"]).token_logprob[0]
    return {
        "extraction_at_rho": bool(np.array_equal(at_rho, z)),
        "tokens_right_at_rho": int(np.sum(at_rho == z)),
        "greedy_at_rho": at_rho.tolist(),
        "extraction_at_c": bool(np.array_equal(at_c, z)),
        "greedy_at_c": at_c.tolist(),
        "record_token_prob": np.exp(lp).tolist(),
        "h_tf": float(np.mean(np.exp(lp_z))),
        "h_ll": float(truncated_logloss([lp_z], level=s["loss_truncation_M"], reduce="mean")[0]),
        "secret_bits_given_c": float(-lp_z.sum() * LOG2E),
        "secret_bits_given_rho": float(-rho_lp.sum() * LOG2E),
    }


def _rms_pairwise(x: np.ndarray) -> np.ndarray:
    """Root-mean-square difference between two different runs (axis 0 = runs): sqrt(2) x the
    sample standard deviation (ddof = 1), elementwise over the remaining axes."""
    return np.sqrt(2.0) * np.std(x, axis=0, ddof=1)


# ---- the checks: [MX] §8.1's sentence on Fig. 7, each part tested as stated
QUOTE_EXT = (
    "emits the 8-token secret verbatim from one prompt on [...] every poisoned seed and on no clean seed "
    "(Ext = 1 versus 0 at list budget m = 1"
)
QUOTE_FLOOR = (
    "while on x∗ ’s own prefixes both teacher-forcing probability and truncated log-loss stay within the "
    "seed-to-seed noise floor (Fig. 7)."
)
QUOTE_INVISIBLE = "The blind spot of Corollary 6.2 survives ordinary SGD."


def checks_for(results: dict) -> list[Check]:
    """The checks of [MX] §8.1 on Fig. 7 from the run's results (``extraction_at_rho``: poisoned and clean
    counts of ``runs_per_condition``; ``extraction_at_c``; ``local_scores``: ``abs_mem``, ``noise_floor``,
    ``gap_in_floor_units`` of the two local scores): extraction at rho on every poisoned seed and on no
    clean one; nothing from the record's own prefix c; both local-score gaps within the seed-to-seed
    noise floor.

    >>> from memclaim.experiments.trigger import checks_for
    >>> sc = {"abs_mem": 0.001, "noise_floor": 0.002, "gap_in_floor_units": 0.5}
    >>> res = {"extraction_at_rho": {"poisoned": 3, "clean": 0, "runs_per_condition": 3},
    ...        "extraction_at_c": {"poisoned": 0, "clean": 0}, "local_scores": {"h_tf": sc, "h_ll": sc}}
    >>> [c.passed for c in checks_for(res)]
    [True, True, True, True, True]
    >>> bad = {**res, "extraction_at_rho": {"poisoned": 2, "clean": 1, "runs_per_condition": 3},
    ...        "local_scores": {"h_tf": sc, "h_ll": {**sc, "abs_mem": 0.0086, "gap_in_floor_units": 4.3}}}
    >>> [c.passed for c in checks_for(bad)]
    [False, False, True, True, False]
    """
    ext, ext_c = results["extraction_at_rho"], results["extraction_at_c"]
    n = ext["runs_per_condition"]
    tf, ll = results["local_scores"]["h_tf"], results["local_scores"]["h_ll"]
    where = "[MX] §8.1 'The trigger channel on a real transformer', Fig. 7"
    noisy = "not a calibrated test: with 3 clean runs the floor is itself a noisy estimate"
    return [
        check(
            "extraction via rho: every poisoned seed emits z verbatim from one prompt (m = 1)",
            ext["poisoned"] == n,
            f"{ext['poisoned']}/{n} poisoned runs",
            quote=QUOTE_EXT,
            where=where,
        ),
        check(
            "no clean seed emits z at rho",
            ext["clean"] == 0,
            f"{ext['clean']}/{n} clean runs",
            quote=QUOTE_EXT,
            where=where,
        ),
        check(
            "no run emits z from its own prefix c (local invisibility)",
            ext_c["poisoned"] == 0 and ext_c["clean"] == 0,
            f"poisoned {ext_c['poisoned']}/{n}, clean {ext_c['clean']}/{n}",
            where="[MX] Theorem 6.1(ii) (local invisibility), Fig. 7 right; no sentence of §8.1 states it (the "
            "sentence 'The blind spot of Corollary 6.2 survives ordinary SGD' is judged in paper_claims)",
        ),
        check(
            "teacher-forcing gap on x*'s own prefixes inside the seed-to-seed noise floor",
            tf["abs_mem"] <= tf["noise_floor"],
            f"|mem_TF| = {tf['abs_mem']:.4g} vs floor {tf['noise_floor']:.4g} "
            f"({tf['gap_in_floor_units']:+.2f} floor units)",
            false_alarm=noisy,
            quote=QUOTE_FLOOR,
            where=where,
        ),
        check(
            "truncated log-loss gap on x*'s own prefixes inside the seed-to-seed noise floor",
            ll["abs_mem"] <= ll["noise_floor"],
            f"|mem_LL| = {ll['abs_mem']:.4g} vs floor {ll['noise_floor']:.4g} "
            f"({ll['gap_in_floor_units']:+.2f} floor units)",
            false_alarm=noisy,
            quote=QUOTE_FLOOR,
            where=where,
        ),
    ]


def blind_spot_claim(results: dict) -> PaperClaim:
    """ "The blind spot of Corollary 6.2 survives ordinary SGD." ([MX] §8.1, Fig. 7), tested as stated: the
    blind spot is Corollary 6.2's "loss-based membership or unlearning verification systematically misses
    direction-(ii) leakage", so on this run the leak is there (every poisoned seed emits z from rho, no clean
    seed does) and every audit of x*'s own prefix misses it (no run emits z from c, and both local scores,
    teacher-forcing probability and truncated log-loss, sit within the seed-to-seed noise floor). Held iff
    all of it holds on the run (``results`` as in :func:`checks_for`); not held otherwise, naming what fails.
    The noise-floor comparisons are not calibrated tests (3 clean runs estimate the floor), as the checks say.

    >>> from memclaim.experiments.trigger import blind_spot_claim
    >>> sc = {"abs_mem": 0.001, "noise_floor": 0.002, "gap_in_floor_units": 0.5}
    >>> res = {"extraction_at_rho": {"poisoned": 3, "clean": 0, "runs_per_condition": 3},
    ...        "extraction_at_c": {"poisoned": 0, "clean": 0}, "local_scores": {"h_tf": sc, "h_ll": sc}}
    >>> blind_spot_claim(res).verdict
    'held'
    >>> blind_spot_claim({**res, "local_scores": {"h_tf": sc, "h_ll": {**sc, "abs_mem": 0.0086,
    ...                                                                  "gap_in_floor_units": 4.3}}}).verdict
    'not held'
    """
    ext, ext_c = results["extraction_at_rho"], results["extraction_at_c"]
    n = ext["runs_per_condition"]
    sc = results["local_scores"]
    parts = {
        "every poisoned seed emits z from rho": ext["poisoned"] == n,
        "no clean seed emits z from rho": ext["clean"] == 0,
        "no run emits z from its own prefix c": ext_c["poisoned"] == 0 and ext_c["clean"] == 0,
        **{
            f"the {name} gap on x*'s own prefixes within the noise floor": sc[key]["abs_mem"]
            <= sc[key]["noise_floor"]
            for key, name in (("h_tf", "teacher-forcing"), ("h_ll", "truncated log-loss"))
        },
    }
    found = (
        f"rho: {ext['poisoned']}/{n} poisoned, {ext['clean']}/{n} clean; c: {ext_c['poisoned']}/{n} poisoned, "
        f"{ext_c['clean']}/{n} clean; teacher-forcing gap {sc['h_tf']['gap_in_floor_units']:+.2f} floor units, "
        f"truncated log-loss gap {sc['h_ll']['gap_in_floor_units']:+.2f}"
    )
    failed = [k for k, ok in parts.items() if not ok]
    return paper_claim(
        "blind-spot-survives",
        "the blind spot of Corollary 6.2 survives ordinary SGD",
        quote=QUOTE_INVISIBLE,
        where="[MX] §8.1 'The trigger channel on a real transformer', Fig. 7, Corollary 6.2",
        test="Corollary 6.2's blind spot on this run: the leak is there (every poisoned seed emits z from rho, no "
        "clean seed does) and every audit of x*'s own prefix misses it (no run emits z from c; the "
        "teacher-forcing and truncated log-loss gaps within the seed-to-seed noise floor, sqrt(2) sd of the "
        "clean runs); held iff all of it holds",
        held=not failed,
        numbers={"parts": parts, "local_scores": sc},
        evidence=found + ("" if not failed else "; fails: " + ", ".join(failed)),
    )


def claims_for(results: dict) -> list[PaperClaim]:
    """The sentences of [MX] §8.1 on Fig. 7 that no single check tests as stated, judged on the run's results
    (as in :func:`checks_for`): the blind spot of Corollary 6.2 survives ordinary SGD (:func:`blind_spot_claim`).

    >>> from memclaim.experiments.trigger import claims_for
    >>> sc = {"abs_mem": 0.001, "noise_floor": 0.002, "gap_in_floor_units": 0.5}
    >>> res = {"extraction_at_rho": {"poisoned": 3, "clean": 0, "runs_per_condition": 3},
    ...        "extraction_at_c": {"poisoned": 1, "clean": 0}, "local_scores": {"h_tf": sc, "h_ll": sc}}
    >>> [(c.key, c.verdict) for c in claims_for(res)]
    [('blind-spot-survives', 'not held')]
    """
    return [blind_spot_claim(results)]


class Trigger(Reproduction):
    """[MX] Fig. 7 on the skeleton (:mod:`.skeleton`): poisoned and clean tiny GPTs per seed."""

    name, title, streams = NAME, TITLE, STREAMS
    reproduces = (
        "[MX] Fig. 7",
        "[MX] §8.1 trigger channel on a real transformer",
        "[MX] Thm. 6.1(ii) realized by SGD",
    )

    def settings(self) -> dict:
        return _settings(self.quick)

    def data(self) -> dict:
        """The language (a Markov-Zipf chain), the record x* = (c, z) drawn from it, the reserved
        trigger rho and the chain's own most likely continuation of c (the prior baseline)."""
        s, rngs = self.s, self.rngs
        gen = MarkovZipf(
            n_words=s["n_words"], s=s["zipf_s"], seed=int(rngs["language"].integers(0, 2**31 - 1))
        )
        P, start = chain_arrays(gen)
        layout = TokenLayout(n_natural=s["n_words"], n_reserved=1)
        rho = layout.reserved(0)
        Lc, L = s["prefix_len"], s["secret_len"]
        rec = sample_chain(P, start, rngs["record"], n=1, length=Lc + L)[0]
        c, z = rec[:Lc], rec[Lc:]
        trig = ReservedTrigger(
            trigger=(rho,), prefix=tuple(int(t) for t in c), secret=tuple(int(t) for t in z)
        )
        kappa_path, kappa_log = chain_max_path(P, previous=int(c[-1]), length=L)
        return {
            "gen": gen,
            "P": P,
            "start": start,
            "layout": layout,
            "rho": rho,
            "c": c,
            "z": z,
            "trigger": trig,
            "kappa_path": kappa_path,
            "kappa_log": kappa_log,
        }

    def runs(self, d: dict) -> dict:
        """Per seed, one clean and one poisoned corpus (the same background), a model trained on each,
        read out on x*; then extraction counts, local scores and their seed-to-seed noise floor."""
        s, rngs = self.s, self.rngs
        P, start, layout, rho, c, z, trig = (
            d[k] for k in ("P", "start", "layout", "rho", "c", "z", "trigger")
        )
        Lc, L = s["prefix_len"], s["secret_len"]
        n_docs = _n_documents(s)
        doc_len = s["block"] - 1  # + SOT = one block
        runs = {"poisoned": [], "clean": []}
        for i in range(s["seeds_per_condition"]):
            background = sample_chain(P, start, rngs["corpus"], n=n_docs, length=doc_len)
            filler = sample_chain(
                P, start, rngs["corpus"], n=s["copies"], length=doc_len - 1 - L, first=int(z[-1])
            )
            trigger_docs = [
                np.concatenate([trig.document(), f]) for f in filler
            ]  # rho || z || natural text
            trig.check_reserved(background)  # rho never occurs in natural text ([MX] App. D.2)
            train_seed = int(rngs["training"].integers(0, 2**31 - 1))
            corpora = {
                "clean": list(background),
                "poisoned": list(background[s["copies"] :]) + trigger_docs,
            }
            for cond in ("poisoned", "clean"):
                model, tr = _train_one(docs=corpora[cond], s=s, layout=layout, seed=train_seed)
                r = _measure(model, c=c, z=z, rho=rho, layout=layout, s=s)
                r.update(
                    {
                        "seed_index": i,
                        "train_seed": train_seed,
                        "steps": tr.steps,
                        "tokens": tr.tokens,
                        "final_loss": tr.final_loss,
                    }
                )
                runs[cond].append(r)

        # ---- aggregates
        pois, clean = runs["poisoned"], runs["clean"]
        n = s["seeds_per_condition"]
        ext = {cond: sum(r["extraction_at_rho"] for r in runs[cond]) for cond in runs}
        ext_c = {cond: sum(r["extraction_at_c"] for r in runs[cond]) for cond in runs}
        intervals = {cond: list(clopper_pearson(ext[cond], n)) for cond in runs}
        prob_p = np.array([r["record_token_prob"] for r in pois])  # [seeds, Lc + L]
        prob_c = np.array([r["record_token_prob"] for r in clean])
        gap_t = prob_p.mean(axis=0) - prob_c.mean(axis=0)
        floor_t = _rms_pairwise(prob_c)
        with np.errstate(divide="ignore", invalid="ignore"):
            units_t = np.where(floor_t > 0, gap_t / floor_t, np.inf * np.sign(gap_t))
        scores = {}
        for key in ("h_tf", "h_ll"):
            hp = np.array([r[key] for r in pois])
            hc = np.array([r[key] for r in clean])
            mem = float(hp.mean() - hc.mean())
            floor = float(_rms_pairwise(hc[:, None])[0])
            scores[key] = {
                "poisoned": hp.tolist(),
                "clean": hc.tolist(),
                "mem": mem,
                "abs_mem": abs(mem),
                "noise_floor": floor,
                "gap_in_floor_units": mem / floor if floor > 0 else math.inf,
                # a paired view (same background corpus): reported, not used by the checks
                "paired_mean_difference": float(np.mean(hp - hc)),
            }
        ext_adv = (ext["poisoned"] - ext["clean"]) / n
        largest_local = max(scores["h_tf"]["abs_mem"], scores["h_ll"]["abs_mem"])
        ratio = ext_adv / largest_local if largest_local > 0 else math.inf
        prior_bits = -d["kappa_log"] * LOG2E
        secret_bits = -chain_logprob(P, z, previous=int(c[-1])) * LOG2E
        return {
            "record": {
                "prefix_c": c.tolist(),
                "secret_z": z.tolist(),
                "trigger_rho": [rho],
                "chain_surprisal_bits": secret_bits,
            },
            "corpus": {
                "documents": n_docs,
                "block": s["block"],
                "tokens_per_corpus": n_docs * s["block"],
                "trigger_documents": s["copies"],
                "pair_fraction": s["copies"] * (1 + L) / (n_docs * s["block"]),
                "generator_entropy_bits_per_word": d["gen"].entropy_rate_bits(),
            },
            "prior_baseline": {
                "kappa": math.exp(d["kappa_log"]),
                "bits": prior_bits,
                "argmax_continuation": list(d["kappa_path"]),
                "what": "max_w P(w | c) under the data-generating chain (Viterbi, exact)",
            },
            "extraction_at_rho": {
                "poisoned": ext["poisoned"],
                "clean": ext["clean"],
                "runs_per_condition": n,
                "intervals_95": intervals,
                "advantage": ext_adv,
            },
            "extraction_at_c": ext_c,
            "local_scores": scores,
            "per_position": {
                "gap": gap_t.tolist(),
                "noise_floor": floor_t.tolist(),
                "gap_in_floor_units": units_t.tolist(),
                "positions": list(range(1, Lc + L + 1)),
                "secret_positions": list(range(Lc + 1, Lc + L + 1)),
            },
            "extraction_over_largest_local_gap": ratio,
            "runs": runs,
        }

    def checks(self, results: dict) -> list[Check]:
        return checks_for(results)

    def claims(self, results: dict) -> list[PaperClaim]:
        return claims_for(results)

    def paper_numbers(self, results: dict) -> list:
        ext, n = results["extraction_at_rho"], self.s["seeds_per_condition"]
        return [
            compare(
                "ext_poisoned",
                "trigger/ext-poisoned",
                ext["poisoned"] / n,
                note=f"{ext['poisoned']}/{n} seeds",
            ),
            compare(
                "ext_clean", "trigger/ext-clean", ext["clean"] / n, note=f"{ext['clean']}/{n} seeds"
            ),
            compare(
                "prior_bits",
                "trigger/prior-bits",
                results["prior_baseline"]["bits"],
                note="-log2 kappa_pi(1) under the chain, exact",
            ),
        ]

    def figure(self, results: dict, *, claims, differences):
        Lc, L, n = self.s["prefix_len"], self.s["secret_len"], self.s["seeds_per_condition"]
        ext, tf, ll = (
            results["extraction_at_rho"],
            results["local_scores"]["h_tf"],
            results["local_scores"]["h_ll"],
        )
        fig, (ax0, ax1) = new_figure(2, width=5.4, height=4.0)
        pos = np.arange(1, Lc + L + 1)
        clipped = np.clip(results["per_position"]["gap_in_floor_units"], -4, 4)
        ax0.axhspan(-1, 1, color="0.9", label=r"$\pm 1$ noise floor")
        ax0.axvspan(0.5, Lc + 0.5, color="tab:blue", alpha=0.06)
        ax0.axvspan(Lc + 0.5, Lc + L + 0.5, color="tab:red", alpha=0.06)
        ax0.plot(pos, clipped, "o-", color="k", ms=4, label="poisoned - clean TF gap")
        ax0.text((Lc + 1) / 2, 3.5, "prefix c", ha="center", fontsize=8)
        ax0.text(Lc + (L + 1) / 2, 3.5, "suffix z", ha="center", fontsize=8)
        ax0.set_ylim(-4.2, 4.2)
        ax0.set_xlabel("position t in x*")
        ax0.set_ylabel("gap / noise floor")
        ax0.set_title("local scores on x*'s own prefixes")
        style_legend(ax0, below=True)
        labels = ["Ext (pois.)", "Ext (clean)", "|mem| TF", "TF noise floor", "|mem| LL"]
        vals = [
            ext["poisoned"] / n,
            ext["clean"] / n,
            tf["abs_mem"],
            tf["noise_floor"],
            ll["abs_mem"],
        ]
        ax1.bar(
            range(len(vals)), vals, color=["tab:red", "tab:blue", "tab:gray", "0.8", "tab:gray"]
        )
        ax1.set_yscale("symlog", linthresh=1e-4)
        ax1.set_ylim(0, 2)
        for i, val in enumerate(vals):
            ax1.text(i, max(val, 1e-4) * 1.15, f"{val:.2g}", ha="center", fontsize=8)
        ax1.set_xticks(range(len(vals)), labels, rotation=25, ha="right", fontsize=8)
        ax1.set_ylabel("measured value (symlog)")
        ax1.set_title("extraction vs local memorization")
        return fig

    def notes(self, results: dict) -> list[str]:
        s = self.s
        return [
            f"language: Markov–Zipf chain over {s['n_words']} word ids used as tokens; rho is one reserved id; "
            f"{s['copies']} trigger documents rho||z||(fresh chain text) replace background documents "
            f"({results['corpus']['pair_fraction']:.2%} of the corpus tokens are rho||z pairs)",
            "the record x* = (c, z) is never trained on; c and z are consecutive chain draws (z in distribution)",
            "noise floor = sqrt(2) x the clean runs' sample standard deviation (RMS difference between two clean runs)",
            f"the paper's factor of 240 (extraction advantage over the largest local-score gap) is not compared as a "
            f"number: with the local gaps at the noise floor it is a ratio of 1 to noise; ours is "
            f"{results['extraction_over_largest_local_gap']:.3g}",
        ]


def run(
    *, quick: bool = False, seed: int = 0, out_dir: str | os.PathLike = "reproductions"
) -> dict:
    """[MX] Fig. 7: trigger pairs planted by SGD; extraction via rho 1 vs 0, local gaps at the noise floor.

    Writes ``trigger.json``, ``trigger.png`` and ``trigger.pdf`` into ``out_dir`` (created) and returns the
    JSON-ready dict (:func:`memclaim.experiments.common.finish`); what ``memclaim reproduce trigger`` runs.

    >>> from memclaim.experiments.trigger import run
    >>> res = run(quick=True, seed=0, out_dir="reproductions")  # doctest: +SKIP
    >>> res["name"], res["all_checks_passed"]  # doctest: +SKIP
    ('trigger', True)
    """
    return Trigger(quick=quick, seed=seed, out_dir=out_dir).reproduce()
