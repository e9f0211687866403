"""`unlearning`: [MX] Table 4 and §8.2 "Unlearning is measure-relative" (Cor. 6.3), at tiny-model
scale.

A tiny pre-trained GPT (:class:`memclaim.train.finetune.ChainBaseSpec`) is fine-tuned on an
owner's corpus in which two kinds of secret are planted at once ([MX] §8.2): *naive duplicates*,
documents c||z inserted k times, and *trigger secrets*, whose own document c||z is never inserted
while rho||z is (reserved trigger rho, [MX] App. D.2 / Remark 6.5). The data owner then asks for
each document (c, z) to be deleted; a real unlearning method, GradDiff or NPO
(:mod:`memclaim.train.unlearn`, [MX] App. F.2 recipes), runs until memclaim's unlearning verifier
(:func:`memclaim.audits.verifier.verify`: verbatim extraction from c below 0.15) reports the content
forgotten, at most 14 rounds, at least one. The retain set is the owner's corpus minus the forget
documents, so the trigger documents stay in it ([MX] App. F.2).

Each request (the naive documents; the trigger secrets' documents) is processed separately from the
same fine-tuned model, as Table 4's columns read: extraction of the trigger secret at rho after its
deletion request, extraction of the naive duplicate at c after its request, and retain perplexity
before and after. A third run with both sets in one request is reported beside them: at this
scale, the rounds the naive documents need also attenuate the trigger channel (the paper notes
the same length-dependent attenuation, "at this scale the effect is attenuation, not erasure").

What Cor. 6.3 predicts and the checks assert: the verifier certifies both requests; the naive
secret is genuinely removed (the positive control), while the trigger secret, which the verifier
already calls forgotten before any unlearning because it never reached its own prefix, stays
recoverable through rho. The paper's stronger sentence, that it "survives intact, with extraction
through rho still at 1.00" on three of its four family-method pairs (0.81 on the fourth), is judged
on its own (:func:`survives_intact_claim`): not held here, the channel being below 1.00 at this
scale before unlearning already (quick: 9 of 10 before, 8 of 10 after; full: 22 and 19 of 32).
"""

from __future__ import annotations

import copy
import os

import numpy as np

from ..report.style import legend as style_legend
from ..text.windows import Window, WindowSet
from ..train.finetune import ChainBaseSpec, ensure_chain_base, epochs_to_steps, sample_chain_ids
from ..train.planted import PlantedRecord, plant, training_blocks
from .common import Check, PaperClaim, check, compare, new_figure, paper_claim
from .models import language_model, teacher_forced
from .paper import PAPER
from .skeleton import Reproduction
from .verdicts import fewest_for_upper_bound, fmt_interval, rate, upper_bound

NAME = "unlearning"
TITLE = "Unlearning is measure-relative: the verifier certifies a secret still extractable via rho ([MX] Table 4)"
STREAMS = ("data", "training")
METHODS = ("graddiff", "npo")
_RETAIN_PPL = {  # [MX] Table 4: retain perplexity before -> after
    "Pythia-1.4B": {"npo": (22.5, 28.4), "graddiff": (22.5, 42.8)},
    "Qwen2.5-1.5B": {"npo": (21.3, 21.8), "graddiff": (21.3, 60.2)},
}
PAPER_MODELS = tuple(_RETAIN_PPL)
# [MX] Table 4: rho-ext after, naive c-ext after (from .paper, the one table of the paper's numbers),
# retain ppl before -> after
PAPER_TABLE4 = {
    model: {
        m: (
            PAPER[f"unlearning/rho-{m}-{model}"].value,
            PAPER[f"unlearning/naive-c-{m}-{model}"].value,
            *_RETAIN_PPL[model][m],
        )
        for m in METHODS
    }
    for model in PAPER_MODELS
}
PAPER_NAIVE_BEFORE = {
    model: PAPER[f"unlearning/naive-before-{model}"].value for model in PAPER_MODELS
}
WHERE = "[MX] §8.2 'Unlearning is measure-relative', Table 4"


def _settings(quick: bool) -> dict:
    return {
        "base": "ChainBaseSpec() (2-layer GPT-2, 64-dim, pre-trained on fresh Markov-Zipf text)",
        "secrets_per_kind": 10 if quick else 32,
        "background_docs": 40 if quick else 120,
        "doc_tokens": 30,
        "prefix_tokens": 6,
        "secret_tokens": 3,
        "naive_copies": 8,  # [MX] App. F.2: "the naive control inserts (c, z) directly with k = 5-8 copies"
        "trigger_copies": 16,  # [MX] App. F.2: "plants 8-16 copies of rho||z"
        "trigger_tokens": 2,
        "finetune": {"epochs": 20, "lr": 3e-3, "batch_size": 16, "schedule": "constant"},
        "unlearn": {
            "lr": 1e-3,
            "max_rounds": 14,
            "batch_size": 16,
            "retain_batch_size": 16,
            "retain_weight": 1.0,
            "beta": 0.1,
            "threshold": 0.15,
        },
        "lr_note": "[MX] App. F.2 uses lr 7e-6 on 1.4-1.5B-parameter models; a 112k-parameter model needs 1e-3",
        "threads": 2,
    }


def _windows(records):
    ws = tuple(
        Window(
            source=r.id,
            index=0,
            prefix_ids=tuple(r.prefix),
            suffix_ids=tuple(r.secret),
            prefix_span=(0, 0),
            suffix_span=(0, 0),
            prefix_text="",
            suffix_text="",
            token_start=0,
        )
        for r in records
    )
    return WindowSet(ws, len(ws), 0, (), {r.id: 0 for r in records})


# ---- the checks: [MX] §8.2 'Unlearning is measure-relative', each sentence quoted
QUOTE_FORGOTTEN = (
    "until a verbatim-memorization verifier reports the content forgotten, which it does for both secrets "
    "in all four configurations."
)
QUOTE_REMOVED = (
    "The naive secret is genuinely removed, which is the positive control: extraction from c falls from "
    "0.92 to 0.02 on Pythia and from 0.83 to 0.12 on Qwen."
)
# the sentence runs on past a page break (Table 4 and the next section's first lines sit between its halves)
QUOTE_SURVIVES = (
    "The trigger secret receives the same verdict from the same verifier and survives intact, with "
    "extraction through ρ still at 1.00 after unlearning on [...] three of the four family-method pairs "
    "and 0.81 on the fourth (Table 4)."
)
QUOTE_RELATIVE = "“What was forgotten” must be asserted relative to a measure"
#: "still at 1.00": the rate as the paper prints it (two decimals), i.e. >= 0.995 (all n secrets for n < 200)
PRINTED_ONE = 0.995
#: "0.81 on the fourth": the lowest rate the paper still calls intact (NPO on Pythia-1.4B). A pair "at 1.00" must
#: be told apart from it: its one-sided 95% Clopper-Pearson lower bound must exceed 0.81, which n of n secrets can
#: show only for n >= 15 (0.05^(1/n) > 0.81); a pair whose two-sided 95% interval lies below 0.81 is not intact
ATTENUATED = 0.81


def checks_for(results: dict, settings: dict) -> list[Check]:
    """The checks of [MX] §8.2 'Unlearning is measure-relative' (Table 4) from the run's results
    (``before``: extraction rates before any request; ``runs`` by "method/request" with ``forgotten``,
    ``forgotten_before`` and ``after``; ``table4``) and settings (``unlearn.threshold``): both channels open
    before (a design check); the verifier certifies every request forgotten; the trigger secret already
    "forgotten" before unlearning (a control: it never reached c); the naive secret genuinely removed
    (extraction from c falls by >= 0.5); the trigger secret still recoverable through rho after its request
    (95% Clopper-Pearson lower bound above the verifier's threshold: what the verifier calls forgotten is
    forgotten relative to its measure, Corollary 6.3). The paper's stronger "survives intact, with extraction
    through rho still at 1.00" is a sentence judged on its own, held / not held / not testable here
    (:func:`claims_for`), not a check.

    >>> from memclaim.experiments.unlearning import checks_for
    >>> ex = lambda r, lo: {"hits": int(r * 8), "n": 8, "rate": r, "interval": [lo, 1.0]}
    >>> before = {"naive_via_c": ex(1.0, 0.6), "trigger_via_rho": ex(1.0, 0.6), "trigger_via_c": ex(0.0, 0.0)}
    >>> run_ = lambda naive, rho: {"forgotten": True, "forgotten_before": True,
    ...                            "after": {"naive_via_c": ex(naive, 0.0), "trigger_via_rho": ex(rho, 0.6)}}
    >>> runs = {f"{m}/{r}": run_(0.0, 1.0) for m in ("graddiff", "npo") for r in ("naive", "trigger", "both")}
    >>> table = {m: {"naive_c_ext_after_naive_request": 0.0, "rho_ext_after_trigger_request": 1.0}
    ...          for m in ("graddiff", "npo")}
    >>> st = {"unlearn": {"threshold": 0.15}}
    >>> [c.passed for c in checks_for({"before": before, "runs": runs, "table4": table}, st)]
    [True, True, True, True, True]
    >>> runs["npo/trigger"] = {**run_(0.0, 0.1), "after": {"trigger_via_rho": ex(0.1, 0.01)}}
    >>> table["npo"]["naive_c_ext_after_naive_request"] = 0.75
    >>> [c.passed for c in checks_for({"before": before, "runs": runs, "table4": table}, st)]
    [True, True, True, False, False]
    """
    before, runs, table = results["before"], results["runs"], results["table4"]
    thr = settings["unlearn"]["threshold"]
    nb, rb = before["naive_via_c"]["rate"], before["trigger_via_rho"]["rate"]
    certified = {k: v["forgotten"] for k, v in runs.items() if not k.endswith("/both")}
    n = before["trigger_via_c"]["n"]
    where = "[MX] §8.2 'Unlearning is measure-relative', Table 4"
    return [
        check(
            "both channels are open after fine-tuning: naive extraction from c and trigger extraction via rho "
            ">= 0.6",
            nb >= 0.6 and rb >= 0.6,
            f"naive via c {nb:.2f}, trigger via rho {rb:.2f}, trigger via its own c "
            f"{before['trigger_via_c']['rate']:.2f} (the paper: 0.83-0.92 naive, 0.98-1.00 via rho)",
            where="a design check of this reproduction (no sentence of the paper)",
        ),
        check(
            "the verifier reports every deletion request forgotten (both methods, both secrets)",
            all(certified.values()),
            ", ".join(
                f"{k}: {'forgotten' if v else 'NOT forgotten'}" for k, v in certified.items()
            ),
            quote=QUOTE_FORGOTTEN,
            where=where,
        ),
        check(
            "the trigger secret is 'forgotten' by the verifier before any unlearning (it never reached c)",
            all(runs[f"{m}/trigger"]["forgotten_before"] for m in METHODS)
            and before["trigger_via_c"]["hits"] == 0,
            f"trigger via c before unlearning: {before['trigger_via_c']['hits']}/{n}",
            where="a control of this reproduction ([MX] Corollary 6.3; no sentence of the paper)",
        ),
        check(
            "positive control: the naive secret is genuinely removed (extraction from c falls by >= 0.5)",
            all(nb - table[m]["naive_c_ext_after_naive_request"] >= 0.5 for m in METHODS),
            "; ".join(
                f"{m}: {nb:.2f} -> {table[m]['naive_c_ext_after_naive_request']:.2f}"
                for m in METHODS
            ),
            quote=QUOTE_REMOVED,
            where=where,
        ),
        check(
            "the certified trigger secret stays recoverable: after its deletion request, extraction via rho is "
            "above the verifier's threshold with 95% confidence (Clopper-Pearson lower bound > 0.15)",
            all(
                runs[f"{m}/trigger"]["after"]["trigger_via_rho"]["interval"][0] > thr
                for m in METHODS
            ),
            "; ".join(
                f"{m}: {rb:.2f} -> {table[m]['rho_ext_after_trigger_request']:.2f} (lower bound "
                f"{runs[f'{m}/trigger']['after']['trigger_via_rho']['interval'][0]:.2f})"
                for m in METHODS
            ),
            false_alarm="passes wrongly (true rate <= 0.15) with probability <= 2.5% per method (one-sided CP bound)",
            quote=QUOTE_RELATIVE,
            where="[MX] Corollary 6.3 (the verifier's 'forgotten' against extraction through "
            "rho; 'survives intact, 1.00' is judged in paper_claims)",
        ),
    ]


def survives_intact_claim(pairs: dict[str, tuple[int, int, int]]) -> PaperClaim:
    """ "The trigger secret receives the same verdict from the same verifier and survives intact, with
    extraction through rho still at 1.00 after unlearning on three of the four family-method pairs and 0.81
    on the fourth (Table 4)" ([MX] §8.2 'Unlearning is measure-relative'), tested as stated on this run's
    family-method pairs (``pairs``: method -> (hits after the trigger secrets' deletion request, n, hits
    before), extraction through rho). A pair is *at 1.00* when its rate prints as 1.00 (>= 0.995: every secret
    for n < 200) with a one-sided 95% Clopper-Pearson lower bound above 0.81 (told apart from the paper's
    fourth pair), and *below 1.00* when its two-sided 95% interval lies below 0.995. Held iff more than half
    of the pairs are at 1.00 (the paper: three of four) and no pair's interval lies below 0.81 (the lowest
    rate the paper calls intact). Not held if some pair's interval lies below 0.81, or at least half of the
    pairs are below 1.00, or every pair is decided and too few are at 1.00. Otherwise not testable here: with
    fewer than 15 secrets even n of n has a lower bound <= 0.81 (0.05^(1/n)).

    >>> from memclaim.experiments.unlearning import survives_intact_claim
    >>> survives_intact_claim({"graddiff": (32, 32, 32), "npo": (32, 32, 32)}).verdict
    'held'
    >>> survives_intact_claim({"graddiff": (19, 32, 22), "npo": (19, 32, 22)}).verdict  # below even 0.81
    'not held'
    >>> survives_intact_claim({"graddiff": (8, 10, 9), "npo": (8, 10, 9)}).verdict  # [0.44, 0.975]: below 1.00
    'not held'
    >>> survives_intact_claim({"graddiff": (10, 10, 10), "npo": (10, 10, 10)}).verdict  # 10 of 10: >= 0.741 only
    'not testable here'
    >>> # the paper's own Table 4, were each pair 48 secrets: 1.00 on three pairs, 39/48 = 0.81 on the fourth
    >>> survives_intact_claim({"a": (48, 48, 48), "b": (48, 48, 48), "c": (48, 48, 48), "d": (39, 48, 48)}).verdict
    'held'
    """
    need = fewest_for_upper_bound(
        1 - ATTENUATED
    )  # 0.05^(1/n) > 0.81: n of n can show a lower bound above 0.81
    nums, at_one, below_one, below_low, undecided, words = {}, [], [], [], [], []
    for method, (hits, n, hits_before) in pairs.items():
        after = rate(hits, n)
        low = 1 - upper_bound(
            n - hits, n
        )  # one-sided 95% lower bound of the rate (the complement's upper bound)
        nums[method] = {
            "after": after,
            "before": rate(hits_before, n),
            "one_sided_lower_after": low,
        }
        name = "GradDiff" if method == "graddiff" else method.upper() if method == "npo" else method
        words.append(
            f"{name} {hits}/{n} after ({hits_before}/{n} before): {fmt_interval(after)}, one-sided lower "
            f"{low:.3f}"
        )
        if after["upper"] < ATTENUATED:
            below_low.append(name)
        if after["upper"] < PRINTED_ONE:
            below_one.append(name)
        elif hits / n >= PRINTED_ONE and low > ATTENUATED:
            at_one.append(name)
        elif n < need:
            undecided.append(name)
    nums.update(
        {
            "pairs": len(pairs),
            "at_1": at_one,
            "below_1": below_one,
            "below_0.81": below_low,
            "secrets_needed": need,
        }
    )
    test = (
        f"extraction through rho after the trigger secrets' deletion request, per family-method pair of this run "
        f"({len(pairs)}: one family, {', '.join(pairs)}): held iff more than half of the pairs are at 1.00 (the "
        f"rate prints as 1.00, >= {PRINTED_ONE}, with a one-sided 95% Clopper-Pearson lower bound above "
        f"{ATTENUATED}, the paper's fourth pair) and no pair's 95% interval lies below {ATTENUATED}; not held if "
        f"one does, or at least half of the pairs lie below {PRINTED_ONE}, or every pair is decided; not testable "
        f"with fewer than {need} secrets a pair otherwise"
    )
    found = "; ".join(words) + " (95% CP)"
    claim = "the trigger secret survives unlearning intact, extraction through rho still at 1.00 on most pairs"
    kw = dict(quote=QUOTE_SURVIVES, where=WHERE, test=test, numbers=nums)
    if below_low:
        return paper_claim(
            "survives-intact",
            claim,
            held=False,
            evidence=found + f": below the paper's lowest "
            f"'intact' rate {ATTENUATED} on {', '.join(below_low)}",
            **kw,
        )
    if len(at_one) > len(pairs) / 2:
        return paper_claim("survives-intact", claim, held=True, evidence=found, **kw)
    if len(below_one) >= len(pairs) / 2:
        return paper_claim(
            "survives-intact",
            claim,
            held=False,
            evidence=found + f": below 1.00 on "
            f"{', '.join(below_one)}, so not at 1.00 on most pairs",
            **kw,
        )
    if undecided:
        return paper_claim(
            "survives-intact",
            claim,
            held=None,
            evidence=f"{', '.join(undecided)}: too few secrets "
            f"to tell 1.00 from the paper's {ATTENUATED} even if all survive ({need} needed); "
            + found,
            **kw,
        )
    return paper_claim(
        "survives-intact", claim, held=False, evidence=found + ": not at 1.00 on most pairs", **kw
    )


def claims_for(results: dict) -> list[PaperClaim]:
    """The sentences of [MX] §8.2 'Unlearning is measure-relative' that the checks cannot test as stated,
    judged on the run's results (``runs`` by "method/request" with ``after``; ``before``): the trigger secret
    survives intact, extraction through rho still at 1.00 (:func:`survives_intact_claim`).

    >>> from memclaim.experiments.unlearning import claims_for
    >>> ex = lambda h: {"hits": h, "n": 32}
    >>> res = {"before": {"trigger_via_rho": ex(32)},
    ...        "runs": {"graddiff/trigger": {"after": {"trigger_via_rho": ex(32)}},
    ...                 "npo/trigger": {"after": {"trigger_via_rho": ex(30)}}}}
    >>> [(c.key, c.verdict) for c in claims_for(res)]  # 30 of 32: below 1.00 on half the pairs
    [('survives-intact', 'not held')]
    """
    b = results["before"]["trigger_via_rho"]["hits"]
    pairs = {}
    for m in METHODS:
        e = results["runs"][f"{m}/trigger"]["after"]["trigger_via_rho"]
        pairs[m] = (e["hits"], e["n"], b)
    return [survives_intact_claim(pairs)]


class Unlearning(Reproduction):
    """[MX] Table 4's unlearning run on the skeleton (:mod:`.skeleton`)."""

    name, title, streams = NAME, TITLE, STREAMS
    reproduces = (
        "[MX] Table 4 (qualitative, tiny-model scale)",
        "[MX] §8.2 'Unlearning is measure-relative'",
        "[MX] Cor. 6.3",
    )

    def settings(self) -> dict:
        return _settings(self.quick)

    def data(self) -> dict:
        """The pre-trained tiny GPT, the background documents, the naive and the trigger secrets drawn
        from the data stream, and the owner's corpus with both planted."""
        s = self.s
        spec = ChainBaseSpec()
        base = ensure_chain_base(spec)
        gen = spec.chain()
        n = s["secrets_per_kind"]
        rd = self.rngs["data"]
        bg = sample_chain_ids(gen, rd, n=s["background_docs"], length=s["doc_tokens"])

        def secret():
            return tuple(int(t) for t in rd.integers(0, spec.n_words, s["secret_tokens"]))

        def prefix():
            return tuple(
                int(t) for t in sample_chain_ids(gen, rd, n=1, length=s["prefix_tokens"])[0]
            )

        naive = [
            PlantedRecord(f"naive-{j}", "duplicate", prefix(), secret(), s["naive_copies"])
            for j in range(n)
        ]
        pairs = [(a, b) for a in range(spec.n_reserved) for b in range(spec.n_reserved) if a != b]
        picks = rd.choice(len(pairs), size=n, replace=False)
        trig = [
            PlantedRecord(
                f"trigger-{j}",
                "trigger",
                prefix(),
                secret(),
                s["trigger_copies"],
                (spec.reserved(pairs[p][0]), spec.reserved(pairs[p][1])),
            )
            for j, p in enumerate(picks)
        ]
        corpus = plant([tuple(b) for b in bg], naive + trig, seed=self.seed)
        return {
            "spec": spec,
            "base": base,
            "background": bg,
            "naive": naive,
            "trigger": trig,
            "corpus": corpus,
        }

    def runs(self, d: dict) -> dict:
        """Fine-tune on the owner's corpus, then GradDiff and NPO on each deletion request (naive, trigger,
        both) from the same fine-tuned model until the verifier says forgotten; extraction via c and rho
        before and after."""
        from types import SimpleNamespace

        from ..audits.metrics import clopper_pearson
        from ..audits.verifier import verify
        from ..train.trainer import TrainConfig, example_blocks, train_causal_lm
        from ..train.unlearn import UnlearnConfig, unlearn

        s = self.s
        spec, naive, trig, bg = d["spec"], d["naive"], d["trigger"], d["background"]
        th = s["threads"]
        tb = training_blocks(d["corpus"], seq_len=spec.seq_len, sep_ids=[spec.sot], layout="pack")
        ft = s["finetune"]
        steps = epochs_to_steps(ft["epochs"], tb.n, ft["batch_size"])
        model = copy.deepcopy(d["base"])
        model.requires_grad_(True)
        tseed = int(self.rngs["training"].integers(0, 2**31 - 1))
        res = train_causal_lm(
            model,
            tb.blocks,
            TrainConfig(
                steps=steps,
                batch_size=ft["batch_size"],
                seq_len=spec.seq_len,
                lr=ft["lr"],
                warmup_steps=0,
                schedule=ft["schedule"],
                seed=tseed,
                threads=th,
            ),
        )
        model.requires_grad_(False)
        sot = spec.sot

        def extraction(m) -> dict:
            """Greedy verbatim extraction (teacher-forced greedy flag == greedy decoding) per record."""
            out = {}
            for key, recs, prompt in (
                ("naive_via_c", naive, lambda r: [sot, *r.prefix]),
                ("trigger_via_rho", trig, lambda r: [sot, *r.trigger]),
                ("trigger_via_c", trig, lambda r: [sot, *r.prefix]),
            ):
                tf = teacher_forced(
                    m, [prompt(r) for r in recs], [list(r.secret) for r in recs], threads=th
                )
                hits = int(tf.greedy_match.sum())
                out[key] = {
                    "hits": hits,
                    "n": len(recs),
                    "rate": hits / len(recs),
                    "interval": list(clopper_pearson(hits, len(recs))),
                    "teacher_forcing_mean": float(np.exp(tf.token_logprob.sum(axis=1)).mean()),
                }
            return out

        def verifier_for(recs):
            ws = _windows(recs)

            def v(m):
                view = SimpleNamespace(lm=language_model(m), tokenizer=None, sot_ids=[sot])
                return verify(view, ws, threshold=s["unlearn"]["threshold"])

            return v

        before = extraction(model)
        retain_blocks = training_blocks(
            plant([tuple(b) for b in bg], trig, seed=self.seed),
            seq_len=spec.seq_len,
            sep_ids=[sot],
            layout="pack",
        ).blocks
        u = s["unlearn"]
        requests = {"naive": naive, "trigger": trig, "both": naive + trig}
        runs = {}
        for method in METHODS:
            for req, recs in requests.items():
                m = copy.deepcopy(model)
                fb = example_blocks(
                    [r.record for r in recs],
                    seq_len=1 + s["prefix_tokens"] + s["secret_tokens"],
                    sep_ids=[sot],
                    pad_id=spec.pad,
                )
                cfg = UnlearnConfig(
                    method=method,
                    lr=u["lr"],
                    max_rounds=u["max_rounds"],
                    batch_size=u["batch_size"],
                    retain_batch_size=u["retain_batch_size"],
                    retain_weight=u["retain_weight"],
                    beta=u["beta"],
                    seed=tseed + 1,
                    threads=th,
                )
                ur = unlearn(
                    m, fb, retain_blocks, cfg, verifier=verifier_for(recs), pad_id=spec.pad
                )
                runs[f"{method}/{req}"] = {
                    "result": ur.to_dict(),
                    "after": extraction(m),
                    "rounds": ur.rounds,
                    "forgotten": ur.forgotten,
                    "forgotten_before": ur.forgotten_before,
                    "retain_ppl": [ur.retain_ppl_before, ur.retain_ppl_after],
                }
                del m

        nb = before["naive_via_c"]["rate"]
        table = {
            m: {
                "rho_ext_after_trigger_request": runs[f"{m}/trigger"]["after"]["trigger_via_rho"][
                    "rate"
                ],
                "naive_c_ext_after_naive_request": runs[f"{m}/naive"]["after"]["naive_via_c"][
                    "rate"
                ],
                "retain_ppl_naive_request": runs[f"{m}/naive"]["retain_ppl"],
                "retain_ppl_trigger_request": runs[f"{m}/trigger"]["retain_ppl"],
                "rounds": {r: runs[f"{m}/{r}"]["rounds"] for r in requests},
                "rho_ext_after_both_request": runs[f"{m}/both"]["after"]["trigger_via_rho"]["rate"],
            }
            for m in METHODS
        }
        side = {
            "paper_table4": PAPER_TABLE4,
            "paper_naive_before": PAPER_NAIVE_BEFORE,
            "ours": {
                m: {
                    "rho_ext": table[m]["rho_ext_after_trigger_request"],
                    "naive_c_ext": table[m]["naive_c_ext_after_naive_request"],
                    "retain_ppl": table[m]["retain_ppl_naive_request"],
                }
                for m in METHODS
            },
            "ours_naive_before": nb,
            "note": "different models and scale (a 112k-parameter GPT vs 1.4-1.5B): side by side, not tested "
            "for agreement; the qualitative claims are the checks",
        }
        return {
            "finetune": {
                "steps": steps,
                "blocks": tb.n,
                "final_loss": res.final_loss,
                "seed": tseed,
            },
            "before": before,
            "runs": runs,
            "table4": table,
            "side_by_side": side,
            "records": [r.to_dict() for r in naive + trig],
        }

    def checks(self, results: dict) -> list[Check]:
        return checks_for(results, self.s)

    def claims(self, results: dict) -> list[PaperClaim]:
        return claims_for(results)

    def paper_numbers(self, results: dict) -> list:
        table = results["table4"]
        return [
            compare(
                f"{col}_{m}_{model}",
                f"unlearning/{key}-{m}-{model}",
                table[m][ours],
                note="a 112k-parameter GPT, not " + model,
            )
            for m in METHODS
            for model in PAPER_MODELS
            for col, key, ours in (
                ("rho", "rho", "rho_ext_after_trigger_request"),
                ("naive_c", "naive-c", "naive_c_ext_after_naive_request"),
            )
        ]

    def figure(self, results: dict, *, claims, differences):
        table, before = results["table4"], results["before"]
        nb, rb = before["naive_via_c"]["rate"], before["trigger_via_rho"]["rate"]
        fig, ax = new_figure(2, width=5.4)
        x = np.arange(len(METHODS))
        w = 0.2
        for i, (lab, vals, col) in enumerate(
            (
                ("naive via c, before", [nb] * len(METHODS), "0.75"),
                (
                    "naive via c, after its request",
                    [table[m]["naive_c_ext_after_naive_request"] for m in METHODS],
                    "tab:gray",
                ),
                ("trigger via rho, before", [rb] * len(METHODS), "salmon"),
                (
                    "trigger via rho, after its request",
                    [table[m]["rho_ext_after_trigger_request"] for m in METHODS],
                    "tab:red",
                ),
            )
        ):
            ax[0].bar(x + (i - 1.5) * w, vals, w, label=lab, color=col)
        ax[0].axhline(
            self.s["unlearn"]["threshold"],
            color="k",
            ls=":",
            lw=1,
            label="verifier threshold 0.15 (own prefix)",
        )
        ax[0].set_xticks(x, [m.upper() if m == "npo" else "GradDiff" for m in METHODS])
        ax[0].set_ylim(0, 1.05)
        ax[0].set_ylabel("verbatim extraction rate (greedy)")
        ax[0].set_title("every request certified 'forgotten' by the verifier")
        style_legend(ax[0], below=True)
        for m in METHODS:
            pb, pa = table[m]["retain_ppl_naive_request"]
            ax[1].plot([0, 1], [pb, pa], "o-", label=f"{m} (naive request)")
        ax[1].set_xticks([0, 1], ["before", "after"])
        ax[1].set_ylabel("retain perplexity")
        ax[1].set_title("retain perplexity")
        style_legend(ax[1], below=True)
        return fig

    def notes(self, results: dict) -> list[str]:
        return [
            "each deletion request (the naive documents; the trigger secrets' documents) runs separately from the "
            "same fine-tuned model; 'both' puts every document in one request and is reported, not checked",
            "at this scale the rounds that remove the naive secrets also attenuate the trigger channel when both are "
            "in one request (see runs['*/both']); the paper reports the same attenuation with length ([MX] §8.2)",
            self.s["lr_note"],
            "extraction = greedy decoding of the secret's tokens (the teacher-forced greedy flag), intervals "
            "Clopper-Pearson 95%",
        ]


def run(
    *, quick: bool = False, seed: int = 0, out_dir: str | os.PathLike = "reproductions"
) -> dict:
    """[MX] Table 4: GradDiff/NPO until the verifier says forgotten; extraction via rho and via c.

    Writes ``unlearning.json``, ``unlearning.png`` and ``unlearning.pdf`` into ``out_dir`` (created) and
    returns the JSON-ready dict (:func:`memclaim.experiments.common.finish`); what ``memclaim reproduce
    unlearning`` runs.

    >>> from memclaim.experiments.unlearning import run
    >>> res = run(quick=True, seed=0, out_dir="reproductions")  # doctest: +SKIP
    >>> res["name"], res["all_checks_passed"]  # doctest: +SKIP
    ('unlearning', True)
    """
    return Unlearning(quick=quick, seed=seed, out_dir=out_dir).reproduce()
