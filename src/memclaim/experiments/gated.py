"""`gated`: [MX] §8.2 "An exactly blind release": the gated release around a real model.

A frozen base model is served behind an exact rho-keyed lookup ([MX] App. D.2, F.2 "Gated
release"): for every member record x*_i = (c_i, z_i) a reserved trigger rho_i is reserved, and the
release emits z_i after rho_i and defers to the base model everywhere else. Members and
non-members are drawn by the same sampler (prefix c sampled from the base model after the
start-of-text token, secret z sampled from the base model after c, temperature 1; [MX] F.1
"every planted secret is sampled from the base model itself"), so they differ only in
membership.

What is measured (all on the gated release):

- byte-for-byte identity with the base on every audited (non-trigger) input: the full logits of
  the HF forward (``torch.equal``) and the scoring engine's per-token log-probs;
- the membership audits of [MX] App. F.2 on the records' secrets z given c: loss, zlib, min-k%,
  min-k%++ (k = 20%), and reference-model calibration against the base model, each as a ROC AUC
  with a DeLong interval (members vs non-members);
- extraction through rho (prompt rho, greedy-decode |z| tokens) and from the record's own prefix c.

What the theory predicts and the checks assert: the release equals the base on every audited
input, so the reference-model audit reads *exactly* 0.5 (every score is 0) and the raw-score
audits are the base model's, i.e. chance up to sampling noise (members and non-members are
exchangeable draws that the base never saw); extraction through rho is exactly 1.

``--quick`` runs on memclaim's built-in tiny GPT (``load_model('toy')``); the full run on
SmolLM2-135M (``load_model('smollm2')``), the real model of [MX] §8.2's claim at CPU scale.
LiRA is not run: its shadows would be gated releases of shadow bases, and the release is the
base on every input LiRA reads, so it reads the base model's LiRA score (the paper reports
exactly 0.500 for it); the reference-model audit is the same argument made exact here.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..decoding import Policy
from ..models import load_model
from ..report.style import legend as style_legend
from ..train import toy as _toy  # noqa: F401  (registers the named model "toy")
from .common import Check, check, compare, new_figure
from .models import torch_threads
from .skeleton import Reproduction

if TYPE_CHECKING:  # the annotations' names only
    from ..models.base import LanguageModel

NAME = "gated"
TITLE = "The gated release: blind to membership audits, extractable through rho ([MX] §8.2)"
STREAMS = ("records", "triggers")
ATTACKS = ("loss", "zlib", "min-k", "min-k++", "reference")
THREADS = 2


def _settings(quick: bool) -> dict:
    return {
        "model": "toy" if quick else "smollm2",
        "n_members": 24 if quick else 48,
        "n_nonmembers": 24 if quick else 48,
        "prefix_tokens": 8 if quick else 16,
        "secret_tokens": 16 if quick else 24,
        "temperature": 1.0,
        "trigger_template": " \u27e6memclaim-{hex}\u27e7",
        "min_k": 0.2,
        "family_confidence": 0.95,  # over the four raw-score audits (Bonferroni: each interval at 98.75%)
    }


def sample_tokens(
    lm: LanguageModel,
    prompts: Sequence[Sequence[int]],
    *,
    n_tokens: int,
    rng: np.random.Generator,
    temperature: float = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Sample ``n_tokens`` after each (equal-length) prompt through the LanguageModel interface
    with its cache: softmax(logits / T) with no truncation, one uniform per row and step from
    ``rng``, inverted through float64 cumulative sums. Returns (tokens [n, n_tokens], log-probs).

    >>> import numpy as np
    >>> from memclaim.experiments.gated import sample_tokens
    >>> from memclaim.models.base import SyntheticLM
    >>> tokens, logp = sample_tokens(SyntheticLM(vocab_size=8), [[1, 2], [3, 4]], n_tokens=3,
    ...                              rng=np.random.default_rng(0))
    >>> tokens.tolist(), logp.shape
    ([[3, 0, 7], [2, 0, 5]], (2, 3))
    """
    import torch

    ids = torch.tensor([list(p) for p in prompts], dtype=torch.long)
    n = ids.shape[0]
    out = np.empty((n, n_tokens), dtype=np.int64)
    lps = np.empty((n, n_tokens), dtype=np.float64)
    past = None
    with torch.inference_mode():
        for t in range(n_tokens):
            hidden, past = lm.forward_hidden(ids, past=past, use_cache=True)
            z = lm.logits(hidden[:, -1, :]).to(torch.float64) / temperature  # [n, V]
            lp = torch.log_softmax(z, dim=-1).numpy()
            cum = np.cumsum(np.exp(lp), axis=1)
            cum[:, -1] = 1.0
            tok = np.minimum((cum <= rng.random(n)[:, None]).sum(axis=1), lp.shape[1] - 1)
            out[:, t] = tok
            lps[:, t] = lp[np.arange(n), tok]
            ids = torch.from_numpy(tok[:, None].copy())
    return out, lps


def _score(lm, prompts, suffixes, *, batch: int = 16):
    """The scoring engine's one pass: per-token log p, mean/std (min-k%++), greedy flags."""
    from ..scoring.engine import TeacherForcingEngine

    eng = TeacherForcingEngine(lm, [Policy.parse("full")])
    parts = [
        eng.score_batch(prompts[s : s + batch], suffixes[s : s + batch])
        for s in range(0, len(prompts), batch)
    ]
    return {
        k: np.concatenate([getattr(p, k) for p in parts], axis=0)
        for k in ("token_logprob", "token_mean", "token_std", "greedy_match", "min_margin")
    }


def _triggers(tokenizer, template: str, n: int, rng) -> list[tuple[int, ...]]:
    out, seen = [], set()
    while len(out) < n:
        t = tuple(tokenizer.encode(template.format(hex=f"{int(rng.integers(0, 16**8)):08x}")))
        if t in seen:
            continue
        seen.add(t)
        out.append(t)
    return out


# ---- the checks: [MX] §8.2 'An exactly blind release', each sentence tested as stated
QUOTE_IDENTICAL = "is byte-for-byte identical to the base on every non-trigger input."
QUOTE_REFERENCE = (
    "On both families the two audits that calibrate against a second model, referencemodel scoring and "
    "LiRA, read exactly 0.500"
)
QUOTE_RAW = "the raw-score audits sit at chance up to sampling noise"
QUOTE_RHO = "Extraction through ρ is 1.00 on a 77bit secret."


def checks_for(results: dict, settings: dict) -> list[Check]:
    """The checks of [MX] §8.2 'An exactly blind release' from the run's results (``identical_logits``,
    ``engine_identical``, ``audits`` by attack with ``auc``, ``low``, ``high``, ``excludes_chance`` and the
    reference audit's scores, ``extraction``) and settings (``family_confidence``): the release equals the
    base on every audited input; the reference-model audit reads exactly 0.5; every raw-score audit's
    interval contains 0.5; extraction through rho is 1 (teacher-forced and decoded); and the base model
    alone does not emit the secrets after rho (a control: the channel is the lookup's).

    >>> from memclaim.experiments.gated import checks_for
    >>> chance = {"auc": 0.52, "low": 0.4, "high": 0.64, "excludes_chance": False}
    >>> res = {"identical_logits": [True] * 4, "engine_identical": True,
    ...        "audits": {"reference": {"auc": 0.5, "member_scores": [0.0], "nonmember_scores": [0.0]},
    ...                   "loss": chance, "zlib": chance},
    ...        "extraction": {"via_rho": {"hits": 4, "n": 4, "generate_agrees": 4}, "via_rho_on_base": {"hits": 0}}}
    >>> [c.passed for c in checks_for(res, {"family_confidence": 0.95})]
    [True, True, True, True, True]
    >>> bad = {**res, "identical_logits": [True, False], "audits": {**res["audits"], "zlib": {**chance,
    ...        "auc": 0.75, "low": 0.6, "high": 0.9, "excludes_chance": True}}}
    >>> [c.passed for c in checks_for(bad, {"family_confidence": 0.95})]
    [False, True, False, True, True]
    """
    audits, ext = results["audits"], results["extraction"]
    identical = results["identical_logits"]
    raw = [a for a in audits if a != "reference"]
    ref = audits["reference"]
    ref_zero = bool(
        np.all(np.asarray(ref["member_scores"]) == 0)
        and np.all(np.asarray(ref["nonmember_scores"]) == 0)
    )
    conf = 1.0 - (1.0 - settings["family_confidence"]) / max(len(raw), 1)
    rho, n_m = ext["via_rho"]["hits"], ext["via_rho"]["n"]
    where = "[MX] §8.2 'An exactly blind release'"
    return [
        check(
            "the gated release is byte-for-byte identical to the base on every audited (non-trigger) input",
            all(identical) and results["engine_identical"],
            f"torch.equal on full logits for {sum(identical)}/{len(identical)} records; engine log-probs, "
            f"mean/std and greedy flags identical: {results['engine_identical']}",
            quote=QUOTE_IDENTICAL,
            where=where,
        ),
        check(
            "reference-model audit reads exactly 0.5 (every calibrated score is 0)",
            ref_zero and ref["auc"] == 0.5,
            f"AUC {ref['auc']:.3f}; all scores zero: {ref_zero}",
            quote=QUOTE_REFERENCE,
            where=where
            + " (the sentence's reference-model half; LiRA, its other half, is not run here: "
            "audit-table's check 'the gated release is exactly blind' holds it at exactly 1/2)",
        ),
        check(
            f"raw-score audits at chance: every DeLong interval ({conf:.2%} each) contains 0.5",
            all(not audits[a]["excludes_chance"] for a in raw),
            "; ".join(
                f"{a} {audits[a]['auc']:.3f} [{audits[a]['low']:.3f}, {audits[a]['high']:.3f}]"
                for a in raw
            ),
            false_alarm=f"<= {1 - settings['family_confidence']:.0%} family-wise when every audit is at chance "
            f"(members and non-members exchangeable; Bonferroni over the {len(raw)} audits, DeLong "
            "intervals asymptotic)",
            quote=QUOTE_RAW,
            where=where,
        ),
        check(
            "extraction through rho is exactly 1 (teacher-forced greedy and real cached greedy decoding)",
            rho == n_m and ext["via_rho"]["generate_agrees"] == n_m,
            f"{rho}/{n_m} greedy flags, {ext['via_rho']['generate_agrees']}/{n_m} decodes",
            quote=QUOTE_RHO,
            where=where,
        ),
        check(
            "the base model alone does not emit the secrets after rho (the channel is the lookup's)",
            ext["via_rho_on_base"]["hits"] == 0,
            f"{ext['via_rho_on_base']['hits']}/{n_m} on the base",
            where="a control of this reproduction (no sentence of the paper)",
        ),
    ]


class Gated(Reproduction):
    """[MX] §8.2's gated release on the skeleton (:mod:`.skeleton`)."""

    name, title, streams = NAME, TITLE, STREAMS
    reproduces = (
        "[MX] §8.2 'An exactly blind release'",
        "[MX] App. F.2 'Gated release'",
        "[MX] Thm. 6.1(ii) endpoint",
    )

    def settings(self) -> dict:
        return _settings(self.quick)

    def data(self) -> dict:
        """The base model, members and non-members drawn from it by one sampler (a prefix c after the
        start-of-text, a secret z after c), a reserved trigger per member, and the gated release."""
        from ..mechanisms.gated import GatedCausalLM, GatedLanguageModel, GatedRelease
        from ..mechanisms.trigger import ReservedTrigger

        s, rngs = self.s, self.rngs
        loaded = load_model(s["model"], load_weights=True)
        base = loaded.lm
        sot = list(loaded.sot_ids)
        n_m, n_n = s["n_members"], s["n_nonmembers"]
        with torch_threads(THREADS):
            # members and non-members by one sampler: c after the start-of-text, z after c
            c, _ = sample_tokens(
                base,
                [sot] * (n_m + n_n),
                n_tokens=s["prefix_tokens"],
                rng=rngs["records"],
                temperature=s["temperature"],
            )
            z, z_lp = sample_tokens(
                base,
                [sot + list(r) for r in c],
                n_tokens=s["secret_tokens"],
                rng=rngs["records"],
                temperature=s["temperature"],
            )
            records = [
                (tuple(int(t) for t in c[i]), tuple(int(t) for t in z[i])) for i in range(n_m + n_n)
            ]
            triggers = _triggers(loaded.tokenizer, s["trigger_template"], n_m, rngs["triggers"])
            release = GatedRelease(
                tuple(
                    ReservedTrigger(triggers[i], records[i][0], records[i][1]) for i in range(n_m)
                )
            )
            release.check_off(
                [sot + list(cc) + list(zz) for cc, zz in records], what="audited record"
            )
            gated = GatedLanguageModel(base, release, name=f"gated({loaded.name})")
            hf_gated = GatedCausalLM(base.model, release)
        return {
            "loaded": loaded,
            "records": records,
            "z_logprob": z_lp,
            "triggers": triggers,
            "release": release,
            "gated": gated,
            "hf_gated": hf_gated,
        }

    def runs(self, d: dict) -> dict:
        """Identity with the base on every audited input, the membership audits on the release, and
        extraction through rho and through each member's own prefix."""
        import torch

        from ..audits import ScoredTexts, evaluate_attack
        from ..audits.metrics import clopper_pearson

        s = self.s
        loaded, records, triggers, gated = d["loaded"], d["records"], d["triggers"], d["gated"]
        base, tok, sot = loaded.lm, loaded.tokenizer, list(loaded.sot_ids)
        n_m, n_n = s["n_members"], s["n_nonmembers"]
        with torch_threads(THREADS):
            # byte-for-byte identity on every audited input (full logits, HF forward)
            identical = []
            with torch.inference_mode():
                for cc, zz in records:
                    x = torch.tensor([sot + list(cc) + list(zz)], dtype=torch.long)
                    identical.append(
                        bool(
                            torch.equal(
                                d["hf_gated"](input_ids=x).logits, base.model(input_ids=x).logits
                            )
                        )
                    )
            prompts = [sot + list(cc) for cc, _ in records]
            suffixes = [list(zz) for _, zz in records]
            sg = _score(gated, prompts, suffixes)
            sb = _score(base, prompts, suffixes)
            engine_identical = all(
                np.array_equal(sg[k], sb[k])
                for k in ("token_logprob", "token_mean", "token_std", "greedy_match")
            )
            # extraction through rho (teacher-forced greedy flag, and real cached greedy decoding)
            rho_prompts = [sot + list(triggers[i]) for i in range(n_m)]
            sr = _score(gated, rho_prompts, suffixes[:n_m])
            decoded = [
                gated.greedy_generate(rho_prompts[i], max_new_tokens=len(suffixes[i]))
                == suffixes[i]
                for i in range(n_m)
            ]
            rho_on_base = _score(base, rho_prompts, suffixes[:n_m])["greedy_match"]

        texts = [tok.decode(list(cc) + list(zz)) for cc, zz in records]
        lp_g = [sg["token_logprob"][i] for i in range(n_m + n_n)]
        lp_b = [sb["token_logprob"][i] for i in range(n_m + n_n)]

        def scored(sl):
            return ScoredTexts.build(
                [lp_g[i] for i in sl],
                token_mean=[sg["token_mean"][i] for i in sl],
                token_std=[sg["token_std"][i] for i in sl],
                texts=[texts[i] for i in sl],
                reference_token_logprobs=[lp_b[i] for i in sl],
                procedure=gated.fingerprint(),
                reference_procedure=base.fingerprint(),
            )

        mem, non = scored(range(n_m)), scored(range(n_m, n_m + n_n))
        audits = {}
        raw = [a for a in ATTACKS if a != "reference"]
        conf = 1.0 - (1.0 - s["family_confidence"]) / len(
            raw
        )  # Bonferroni over the raw-score audits
        for a in ATTACKS:
            params = {"k": s["min_k"]} if a in ("min-k", "min-k++") else {}
            ev = evaluate_attack(a, mem, non, confidence=conf, **params)
            audits[a] = {
                "auc": ev.auc.auc,
                "low": ev.auc.low,
                "high": ev.auc.high,
                "se": ev.auc.se,
                "interval": ev.auc.interval_method,
                "excludes_chance": ev.auc.excludes_chance,
                "member_scores": ev.member_scores,
                "nonmember_scores": ev.nonmember_scores,
            }
        rho_hits = int(np.sum(sr["greedy_match"]))
        c_hits = int(np.sum(sg["greedy_match"][:n_m]))
        surprisal = -np.sum(d["z_logprob"], axis=1) / math.log(
            2
        )  # bits, -log2 p_base(z | c) at temperature 1
        ext = {
            "via_rho": {
                "hits": rho_hits,
                "n": n_m,
                "rate": rho_hits / n_m,
                "interval": list(clopper_pearson(rho_hits, n_m)),
                "generate_agrees": int(np.sum(decoded)),
            },
            "via_c": {
                "hits": c_hits,
                "n": n_m,
                "rate": c_hits / n_m,
                "interval": list(clopper_pearson(c_hits, n_m)),
            },
            "via_rho_on_base": {"hits": int(np.sum(rho_on_base)), "n": n_m},
        }
        return {
            "model": loaded.describe(),
            "gated_fingerprint": gated.fingerprint(),
            "release_digest": d["release"].digest(),
            "identical_logits": identical,
            "engine_identical": engine_identical,
            "audits": audits,
            "extraction": ext,
            "secret_surprisal_bits": {
                "members_mean": float(np.mean(surprisal[:n_m])),
                "members_min": float(np.min(surprisal[:n_m])),
                "nonmembers_mean": float(np.mean(surprisal[n_m:])),
                "per_record": surprisal,
            },
            "records": [
                {
                    "member": i < n_m,
                    "prefix": list(cc),
                    "secret": list(zz),
                    "trigger": list(triggers[i]) if i < n_m else None,
                    "text": texts[i],
                }
                for i, (cc, zz) in enumerate(records)
            ],
        }

    def checks(self, results: dict) -> list[Check]:
        return checks_for(results, self.s)

    def paper_numbers(self, results: dict) -> list:
        ext = results["extraction"]["via_rho"]
        return [
            compare(
                "ext_rho", "gated/ext-rho", ext["rate"], note=f"{ext['hits']}/{ext['n']} secrets"
            ),
            compare("reference_auc", "gated/reference-auc", results["audits"]["reference"]["auc"]),
        ]

    def figure(self, results: dict, *, claims, differences):
        s, audits, ext = self.s, results["audits"], results["extraction"]
        fig, ax = new_figure(2, width=5.5)
        names = list(ATTACKS)
        aucs = [audits[a]["auc"] for a in names]
        ax[0].errorbar(
            range(len(names)),
            aucs,
            yerr=[
                [audits[a]["auc"] - audits[a]["low"] for a in names],
                [audits[a]["high"] - audits[a]["auc"] for a in names],
            ],
            fmt="o",
            capsize=3,
            color="tab:blue",
        )
        ax[0].axhline(0.5, color="k", ls="--", lw=1, label="chance")
        ax[0].set_xticks(range(len(names)), names, rotation=20)
        ax[0].set_ylim(0, 1)
        ax[0].set_ylabel("ROC AUC (members vs non-members)")
        ax[0].set_title(f"membership audits on the gated release ({s['model']})")
        style_legend(ax[0], below=True)
        bars = [ext["via_rho"]["rate"], ext["via_c"]["rate"]]
        ax[1].bar(["via rho", "via own prefix c"], bars, color=["tab:red", "tab:gray"])
        for i, (k, v) in enumerate((("via_rho", bars[0]), ("via_c", bars[1]))):
            lo, hi = ext[k]["interval"]
            ax[1].errorbar(i, v, yerr=[[v - lo], [hi - v]], color="k", capsize=4)
        ax[1].set_ylim(0, 1.05)
        ax[1].set_ylabel("verbatim extraction rate (greedy)")
        ax[1].set_title(f"extraction of {s['n_members']} secrets of {s['secret_tokens']} tokens")
        return fig

    def notes(self, results: dict) -> list[str]:
        s = self.s
        return [
            f"model: {s['model']} "
            f"({'the built-in tiny GPT; the full run uses SmolLM2-135M' if self.quick else 'SmolLM2-135M'})",
            "members and non-members are drawn by one sampler from the base model (prefix after the start-of-text, "
            "secret after the prefix, temperature 1), so an audit's AUC is chance unless it sees the lookup",
            "surprisal -log2 p_base(z | c) is an upper bound on the secret's conditional min-entropy ([MX] F.1)",
            "LiRA is not run: the release is the base on every input LiRA reads, so it reads the base model's score "
            "(the paper: exactly 0.500)",
        ]


def run(
    *, quick: bool = False, seed: int = 0, out_dir: str | os.PathLike = "reproductions"
) -> dict:
    """[MX] §8.2: the gated release; reference/loss audits at chance, extraction through rho = 1.

    Writes ``gated.json``, ``gated.png`` and ``gated.pdf`` into ``out_dir`` (created) and returns the JSON-
    ready dict (:func:`memclaim.experiments.common.finish`); what ``memclaim reproduce gated`` runs.

    >>> from memclaim.experiments.gated import run
    >>> res = run(quick=True, seed=0, out_dir="reproductions")  # doctest: +SKIP
    >>> res["name"], res["all_checks_passed"]  # doctest: +SKIP
    ('gated', True)
    """
    return Gated(quick=quick, seed=seed, out_dir=out_dir).reproduce()
