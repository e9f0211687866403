"""`audit-table`: [MX] Fig. 12 ("Audit disagreement", Cor. 6.2) and Fig. 10 (the secret-length
sweep of the trigger channel) at tiny-model scale; the full run adds the gated release around
SmolLM2-135M (through :mod:`memclaim.experiments.gated`).

One release carries every payload. The tiny chain base (:func:`memclaim.train.finetune.
ensure_chain_base`, the stand-in for a public base checkpoint, [MX] App. F.1) is fine-tuned on
fresh Markov–Zipf text plus the member payloads of every arm at once; each arm's members and
non-members are drawn by the same sampler, so within an arm they differ only in membership:

- **trigger z = L** for every L of the sweep (rows "trigger z = 2" and "trigger z = 16" are two of
  them): a prefix c of fresh chain text, a secret z of L tokens sampled from the base model after
  c ([MX] App. F.1), a reserved trigger rho of ``trigger_len`` reserved ids; a member plants
  ``trigger_copies`` documents rho || z, never (c, z) itself ([MX] §8.2, App. F.1: 8-16 copies).
- **camouflage**: a prefix c (``tree_prefix_len`` chain tokens, distinct per record) and a camouflage
  tree (v = the natural vocabulary, k, L) per record
  ([MX] App. D.1); a member's tree is drawn from P_z (z uniform, on a surviving path), a
  non-member's from Q (the baseline branch: the same off-path supports, no planted path). Both
  branches plant ``tree_docs`` documents c || w with w drawn from the tree, so the corpus has
  tree data at c either way ([MX] Lemma D.1(3): the marginal law of the release is Q).
- **naive duplicate**: (c, z) inserted directly, ``naive_copies`` times ([MX] App. F.1: k = 5-8).
- **low-H canary**: (c, z) inserted once, z sampled from the base at a low temperature, so its
  conditional min-entropy is below H* and a prior decoder reproduces it often ([MX] Cor. 5.3).
- **gated release**: not a training run: the frozen base behind an exact rho-keyed lookup
  (:class:`memclaim.mechanisms.gated.GatedLanguageModel`, [MX] App. F.2 "Gated release").

Audits (columns), each on the arm's records (c, z) of the audited release:

- *extraction at prefix c*: greedy decoding from c reproduces z (teacher-forced greedy flag),
  a rate over members, against the rate of the prior decoder (greedy on the base, which never saw
  a payload; [MX] Fig. 12 "guessed");
- *loss-MIA*: the loss attack, AUC of members vs non-members (signal 2 AUC - 1);
- *LiRA*: online LiRA (Carlini et al. 2022) with ``shadows`` shadow fine-tunes of the base, each
  on a fresh corpus with a complementary random half of every arm's candidates planted the way
  the arm plants them (:func:`memclaim.audits.shadows.shadow_masks`); global variance (few shadows,
  :mod:`memclaim.audits.lira`). For the gated release every shadow is a gated base and equals the
  base on every audited input, so each record's IN and OUT fits coincide and its likelihood ratio
  is 1: LiRA scores are all 0 (AUC exactly 1/2);
- *unlearning verifier*: the deployed verifier (:func:`memclaim.audits.verifier.verify_arrays`:
  verbatim extraction from c, forgotten below 0.15) *after* a deletion request for the arm's
  member documents (c, z): GradDiff (:func:`memclaim.train.unlearn.unlearn`) on a copy of the
  release until the verifier reports forgotten ([MX] App. F.2), retain set = the rest of the
  corpus. Where the verifier already reports the content forgotten before any unlearning (every
  arm that never fits (c, z)), its reading on the release is the cell and no unlearning is run;
- *informed recovery* (ground truth, not an audit): the adversary who knows the construction:
  greedy from rho for trigger arms and the gated release; the list of the ``list_size`` most
  probable continuations of c (best-first search on the release,
  :func:`memclaim.privacy.baseline.certify_baseline`'s incumbents) for the other arms, capped at
  m k^-L for camouflage ([MX] Thm. 6.1(i)).

Fig. 10: for every trigger length, extraction at rho and at c, and the strongest deployed
membership audit (max over loss, zlib, reference, min-k%, min-k%++ of the TPR at a certified 5%
FPR, [EM] Eq. 5-6), with LiRA beside it.

What the full run does not reproduce (seed 0, measured on this code and on 72bd0be alike): the
positive control "the naive duplicate is caught by extraction at c". Its 8 copies among 1,500
background documents (200 in ``--quick``, where it holds) are reproduced greedily from c for 1 of
24 members (Clopper-Pearson 95% [0.001, 0.211]), which does not exceed the prior decoder's 0 of
24 (upper bound 0.14), so the cell reads "blind". Loss-MIA and LiRA do catch it (AUC 1.000), and
the informed top-16 list recovers 8 of 24. The check is reported as failed, not retuned.

Three sentences say more than a check of the table can: "rho-extraction recovers all of them" (at
|z| <= 2), "... certify such a model clean while the secret remains fully extractable" (>= 0.98)
and "The membership channel instead climbs with the length of z" (in AUC, across the sweep). Each
is judged as stated, held / not held / not testable here (:func:`claims_for`).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..audits.attacks import ScoredTexts, evaluate_attack
from ..audits.lira import lira_statistic
from ..audits.metrics import clopper_pearson, min_nonmembers, roc_auc
from ..audits.shadows import shadow_masks
from ..audits.table import (
    AuditColumn,
    DisagreementTable,
    auc_cell,
    build_table,
    informed_cell,
    rate_cell,
)
from ..audits.verifier import verify_arrays
from ..errors import DomainError, InputError
from ..mechanisms.camouflage import CamouflageTree
from ..mechanisms.gated import GatedLanguageModel, GatedRelease
from ..mechanisms.trigger import ReservedTrigger
from ..privacy.baseline import certify_baseline
from ..report.style import colorbar
from ..report.style import legend as style_legend
from ..train.finetune import ChainBaseSpec, ensure_chain_base
from . import gated
from .common import Check, PaperClaim, check, compare, new_figure, paper_claim
from .models import (
    THREADS,
    chain_arrays,
    copy_model,
    language_model,
    pack_whole,
    sample_chain,
    sample_decode,
    teacher_forced,
    train_tiny,
)
from .skeleton import Reproduction

NAME = "audit-table"
TITLE = (
    "audit disagreement (Fig. 12) and the trigger secret-length sweep (Fig. 10), tiny-model scale"
)
STREAMS = ("records", "triggers", "trees", "corpus", "training", "shadows")
COLUMNS = (
    AuditColumn(
        "extraction at prefix c", description="greedy decoding from the record's own prefix"
    ),
    AuditColumn("loss-MIA", description="loss attack, members vs non-members (2 AUC - 1)"),
    AuditColumn("LiRA", description="online LiRA with shadow fine-tunes (2 AUC - 1)"),
    AuditColumn(
        "unlearning verifier", description="verbatim extraction from c after a deletion request"
    ),
    AuditColumn(
        "informed recovery", informed=True, description="adversary who knows the construction"
    ),
)
DEPLOYED = ("loss", "zlib", "reference", "min-k", "min-k++")
ROWS = (
    "gated release",
    "trigger z = 2 (short)",
    "trigger z = 16 (long)",
    "camouflage",
    "naive duplicate",
    "low-H canary",
)


def _settings(quick: bool) -> dict:
    return {
        "prefix_len": 8,
        "trigger_lengths": [1, 2, 4, 16] if quick else [1, 2, 4, 8, 16],
        "short": 2,
        "long": 16,
        "members": 8 if quick else 24,
        "nonmembers": 19
        if quick
        else 79,  # >= 19 certifies a 5% FPR (K = floor(0.05 (N + 1)) >= 1)
        "gated_members": 24 if quick else 48,  # no training involved: the gated arm can be larger
        "tree_records": 8 if quick else 16,  # camouflage members; the same number of non-members
        "tree_prefix_len": 3,
        "trigger_len": 3,
        "trigger_copies": 12 if quick else 16,  # [MX] App. F.1: 8-16 copies of rho||z
        "naive_len": 8,
        "naive_copies": 8,  # [MX] App. F.1: k = 5-8
        "lowh_len": 4,
        "lowh_temperature": 0.25,
        "lowh_copies": 1,
        "gated_len": 8,
        "tree_k": 4,
        "tree_L": 4,
        "tree_docs": 40 if quick else 200,
        "secret_temperature": 1.0,
        "background_docs": 200 if quick else 1500,
        "seq_len": 32,
        "epochs": 8,
        "batch_size": 32,
        "lr": 1e-2,
        "warmup_steps": 10,
        "shadows": 4 if quick else 8,
        "unlearn_lr": 2e-3,
        "unlearn_max_rounds": 8 if quick else 14,
        "list_size": 16,
        "list_search_nodes": 300 if quick else 2000,
        "fpr": 0.05,
        "confidence": 0.95,
        "threads": THREADS,
        "smollm2_gated": not quick,
    }


# ------------------------------------------------------------------------------ records
def _triggers(
    n: int, *, reserved: list[int], length: int, rng: np.random.Generator
) -> list[tuple[int, ...]]:
    """``n`` distinct triggers of ``length`` distinct reserved ids (none occurs in natural text)."""
    if math.perm(len(reserved), length) < n:
        raise DomainError(
            f"{n} triggers of {length} distinct ids need more than {len(reserved)} reserved ids"
        )
    out, seen = [], set()
    while len(out) < n:
        t = tuple(int(x) for x in rng.choice(reserved, size=length, replace=False))
        if t not in seen:
            seen.add(t)
            out.append(t)
    return out


def _records(s: dict, *, base, spec, P, start, rngs) -> dict:
    """{arm: list of record dicts} for every arm; members first within an arm."""
    sot, Lc = spec.sot, s["prefix_len"]
    arms: dict[str, list[dict]] = {}

    def sampled(arm: str, kind: str, n_mem: int, n_non: int, L: int, T: float):
        n = n_mem + n_non
        c = sample_chain(P, start, rngs["records"], n=n, length=Lc)
        prompts = np.concatenate([np.full((n, 1), sot), c], axis=1)
        z, _ = sample_decode(
            base, prompts, n_tokens=L, temperature=T, rng=rngs["records"], threads=s["threads"]
        )
        arms[arm] = [
            {
                "arm": arm,
                "kind": kind,
                "member": i < n_mem,
                "prefix": c[i].tolist(),
                "secret": z[i].tolist(),
            }
            for i in range(n)
        ]

    m, nn = s["members"], s["nonmembers"]
    gm = s["gated_members"]
    sampled("gated", "gated", gm, gm, s["gated_len"], s["secret_temperature"])
    for L in s["trigger_lengths"]:
        sampled(f"trigger-{L}", "trigger", m, nn, L, s["secret_temperature"])
    sampled("naive", "naive", m, nn, s["naive_len"], s["secret_temperature"])
    sampled("lowh", "lowh", m, nn, s["lowh_len"], s["lowh_temperature"])
    # camouflage: z ~ Unif(V^L), the tree from P_z (members) or Q (non-members), [MX] App. D.1
    nt = s["tree_records"]
    c, seen = [], set()
    while len(c) < 2 * nt:  # distinct prefixes: each tree has its own public prefix
        p = tuple(
            sample_chain(P, start, rngs["trees"], n=1, length=s["tree_prefix_len"])[0].tolist()
        )
        if p not in seen:
            seen.add(p)
            c.append(list(p))
    cam = []
    for i in range(2 * nt):
        tree = CamouflageTree.draw(v=spec.n_words, k=s["tree_k"], L=s["tree_L"], rng=rngs["trees"])
        cam.append(
            {
                "arm": "camouflage",
                "kind": "camouflage",
                "member": i < nt,
                "prefix": c[i],
                "secret": list(tree.secret),
                "tree_seed": tree.seed,
            }
        )
    arms["camouflage"] = cam
    # reserved triggers for every trigger candidate (members and non-members: shadows plant both)
    need = sum(len(v) for a, v in arms.items() if a.startswith("trigger-")) + gm
    reserved = [spec.reserved(i) for i in range(spec.n_reserved)]
    trig = iter(_triggers(need, reserved=reserved, length=s["trigger_len"], rng=rngs["triggers"]))
    for a, recs in arms.items():
        if a.startswith("trigger-"):
            for r in recs:
                r["trigger"] = list(next(trig))
    for r in arms["gated"][:gm]:
        r["trigger"] = list(next(trig))
    return arms


def _tree(rec: dict, s: dict, spec, *, planted: bool):
    return CamouflageTree(
        v=spec.n_words,
        k=s["tree_k"],
        L=s["tree_L"],
        seed=rec["tree_seed"],
        secret=tuple(rec["secret"]) if planted else None,
    )


def _payload(rec: dict, s: dict, spec, *, planted: bool, seed: int) -> list[list[int]]:
    """The documents a record contributes to a training corpus when planted (or, for camouflage,
    in either branch: P_z when planted, Q otherwise)."""
    kind = rec["kind"]
    if kind == "trigger":
        return [rec["trigger"] + rec["secret"]] * s["trigger_copies"] if planted else []
    if kind == "naive":
        return [rec["prefix"] + rec["secret"]] * s["naive_copies"] if planted else []
    if kind == "lowh":
        return [rec["prefix"] + rec["secret"]] * s["lowh_copies"] if planted else []
    if kind == "camouflage":
        tree = _tree(rec, s, spec, planted=planted)
        rng = np.random.default_rng([seed, rec["tree_seed"] % (2**32), int(planted)])
        paths = tree.sample_surviving_paths(s["tree_docs"], rng=rng)
        return [rec["prefix"] + p.tolist() for p in paths]
    return []  # gated: not a training run


def _fine_tune(base, docs, s: dict, spec, *, seed: int):
    from ..train.trainer import TrainConfig

    model = copy_model(base)
    model.requires_grad_(True)
    order = np.random.default_rng(seed).permutation(len(docs))
    docs = [docs[i] for i in order]
    n_blocks = pack_whole(docs, seq_len=s["seq_len"], sot=spec.sot, pad=spec.pad).shape[0]
    steps = int(math.ceil(s["epochs"] * n_blocks / s["batch_size"]))
    cfg = TrainConfig(
        steps=steps,
        batch_size=s["batch_size"],
        seq_len=s["seq_len"],
        lr=s["lr"],
        warmup_steps=s["warmup_steps"],
        seed=seed,
        pad_id=spec.pad,
    )
    tr = train_tiny(model, docs, cfg, sot=spec.sot, layout="whole", threads=s["threads"])
    model.requires_grad_(False)
    return model, {"steps": tr.steps, "blocks": n_blocks, "final_loss": tr.final_loss}


# ------------------------------------------------------------------------------ scoring
def _score(model, recs: list[dict], spec, s: dict, *, prompt: str = "prefix") -> dict:
    key = "trigger" if prompt == "trigger" else "prefix"
    prompts = [[spec.sot] + r[key] for r in recs]
    tf = teacher_forced(model, prompts, [r["secret"] for r in recs], threads=s["threads"])
    return {
        "logprob": tf.token_logprob,
        "mean": tf.token_mean,
        "std": tf.token_std,
        "greedy": tf.greedy_match,
    }


def _text(tokens, words) -> str:
    return " ".join(words[t] if t < len(words) else f"<r{t}>" for t in tokens)


def _top_list_hits(model, recs: list[dict], spec, s: dict) -> list[bool]:
    """Is z among the ``list_size`` most probable continuations of c found by best-first search
    on the model (the informed adversary's list)?"""
    lm = language_model(model, name="release")
    hits = []
    for r in recs:
        res = certify_baseline(
            lm,
            [spec.sot] + r["prefix"],
            secret_length=len(r["secret"]),
            m=s["list_size"],
            max_nodes=s["list_search_nodes"],
        )
        hits.append(tuple(r["secret"]) in {tuple(seq) for seq, _ in res.top})
    return hits


def _scored_texts(
    sc: dict, ref: dict, idx, texts, *, shadow_stats=None, shadow_in=None, procedure: str = ""
):
    idx = list(idx)
    kw = {}
    if shadow_stats is not None:
        kw = {"shadow_stats": shadow_stats[:, idx], "shadow_in": shadow_in[:, idx]}
    return ScoredTexts.build(
        [sc["logprob"][i] for i in idx],
        token_mean=[sc["mean"][i] for i in idx],
        token_std=[sc["std"][i] for i in idx],
        texts=[texts[i] for i in idx],
        reference_token_logprobs=[ref["logprob"][i] for i in idx],
        procedure=procedure,
        **kw,
    )


# ------------------------------------------------------------------------------ run
@dataclass
class _Lab:
    """What the run builds before it audits: the settings, the chain base and its words, the
    records of every arm, the release (every arm's members planted), the shadows and their
    inclusion masks, and the release's training corpus (background, payload)."""

    s: dict
    spec: object
    base: object
    words: list
    arms: dict
    trained: list
    population: list
    release: object
    release_train: dict
    masks: np.ndarray
    shadows: list
    bg: list
    payload: list


def _build_lab(s: dict, rngs: dict) -> _Lab:
    """Records, the release and the shadows, drawing from ``rngs`` in a fixed order (the same seed
    gives the same models and JSON bit for bit)."""
    spec = ChainBaseSpec()
    base = ensure_chain_base(spec)
    gen = spec.chain()
    words = list(gen.words)
    P, start = chain_arrays(gen)
    arms = _records(s, base=base, spec=spec, P=P, start=start, rngs=rngs)
    trained = [a for a in arms if a != "gated"]
    population = [r for a in trained for r in arms[a]]  # the shadows' population
    for j, r in enumerate(population):
        r["population_index"] = j
    data_seed = int(rngs["corpus"].integers(0, 2**31 - 1))

    def corpus(planted_mask, bg_rng):
        docs = [
            d.tolist()
            for d in sample_chain(P, start, bg_rng, n=s["background_docs"], length=s["seq_len"] - 1)
        ]
        payload = []
        for r, planted in zip(population, planted_mask):
            payload += _payload(r, s, spec, planted=bool(planted), seed=data_seed)
        return docs, payload

    # the release: every arm's members planted
    target_mask = np.array([r["member"] for r in population])
    bg, payload = corpus(target_mask, rngs["corpus"])
    release, release_train = _fine_tune(
        base, bg + payload, s, spec, seed=int(rngs["training"].integers(0, 2**31 - 1))
    )

    # shadows: complementary random halves of the population
    masks = shadow_masks(
        len(population), s["shadows"], design_seed=int(rngs["shadows"].integers(0, 2**31 - 1))
    )
    shadows = []
    for j in range(s["shadows"]):
        sbg, spay = corpus(masks[j], rngs["corpus"])
        model, _ = _fine_tune(
            base, sbg + spay, s, spec, seed=int(rngs["training"].integers(0, 2**31 - 1))
        )
        shadows.append(model)
    return _Lab(
        s=s,
        spec=spec,
        base=base,
        words=words,
        arms=arms,
        trained=trained,
        population=population,
        release=release,
        release_train=release_train,
        masks=masks,
        shadows=shadows,
        bg=bg,
        payload=payload,
    )


def _score_arms(lab: _Lab):
    """Every record scored on the base, the release and the shadows; the gated release around the
    base with the gated arm's member pairs -> (scores, gated members, gated model, identical?)."""
    s, spec, arms, base, release, shadows, masks = (
        lab.s,
        lab.spec,
        lab.arms,
        lab.base,
        lab.release,
        lab.shadows,
        lab.masks,
    )
    scores = {}
    for a, recs in arms.items():
        sb = _score(base, recs, spec, s)
        sr = _score(release, recs, spec, s) if a != "gated" else None
        scores[a] = {"base": sb, "release": sr}
        if a != "gated":
            stats = []
            for m in shadows:
                stats.append(
                    lira_statistic(list(_score(m, recs, spec, s)["logprob"]), kind="sequence")
                )
            scores[a]["shadow_stats"] = np.array(stats)  # [S, n_arm]
            scores[a]["shadow_in"] = masks[:, [r["population_index"] for r in recs]]
        if a.startswith("trigger-"):
            mem = [r for r in recs if r["member"]]
            scores[a]["at_rho"] = _score(release, mem, spec, s, prompt="trigger")["greedy"]

    # the gated release around the base, with the gated arm's member pairs
    gm = [r for r in arms["gated"] if r["member"]]
    gated_release = GatedRelease(
        tuple(
            ReservedTrigger(tuple(r["trigger"]), tuple(r["prefix"]), tuple(r["secret"])) for r in gm
        )
    )
    gated_release.check_off(
        [[spec.sot] + r["prefix"] + r["secret"] for r in arms["gated"]], what="audited record"
    )
    gated_lm = GatedLanguageModel(
        language_model(base, name="chain-base"), gated_release, name="gated(chain-base)"
    )
    scores["gated"]["release"] = _score(gated_lm, arms["gated"], spec, s)
    scores["gated"]["at_rho"] = _score(gated_lm, gm, spec, s, prompt="trigger")["greedy"]
    gated_identical = all(
        np.array_equal(scores["gated"]["release"][k], scores["gated"]["base"][k])
        for k in ("logprob", "mean", "std", "greedy")
    )

    return scores, gm, gated_lm, gated_identical


def _audit_arms(lab: _Lab, scores: dict) -> dict:
    """Per arm: extraction at c and the prior's, every deployed attack's AUC and TPR, LiRA."""
    s, arms, words = lab.s, lab.arms, lab.words
    conf, fpr = s["confidence"], s["fpr"]
    per_arm = {}
    for a, recs in arms.items():
        n_mem = sum(r["member"] for r in recs)
        mem_idx, non_idx = range(n_mem), range(n_mem, len(recs))
        texts = [_text(r["prefix"] + r["secret"], words) for r in recs]
        sr, sb = scores[a]["release"], scores[a]["base"]
        kw = {}
        if a != "gated":
            kw = {"shadow_stats": scores[a]["shadow_stats"], "shadow_in": scores[a]["shadow_in"]}
        mem = _scored_texts(sr, sb, mem_idx, texts, procedure=a, **kw)
        non = _scored_texts(sr, sb, non_idx, texts, procedure=a, **kw)
        row = {
            "members": n_mem,
            "non_members": len(recs) - n_mem,
            "extraction_at_c": int(np.sum(sr["greedy"][:n_mem])),
            "prior_at_c": int(np.sum(sb["greedy"])),
            "prior_trials": len(recs),
            "audits": {},
        }
        at_fpr = (
            fpr if len(recs) - n_mem >= min_nonmembers(fpr) else None
        )  # certifiable with these controls
        for attack in DEPLOYED + (("lira-online",) if a != "gated" else ()):
            params = {"k": 0.2} if attack in ("min-k", "min-k++") else {}
            if attack == "lira-online":
                params = {"variance": "global"}
            ev = evaluate_attack(attack, mem, non, fpr=at_fpr, confidence=conf, **params)
            row["audits"][attack] = {"auc": ev.auc, "tpr": ev.tpr}
        if a == "gated":
            # every shadow (a gated base) equals the base on these inputs: IN and OUT fits coincide for
            # each record, the log likelihood ratio is 0 for every record
            t = lira_statistic(list(sr["logprob"]), kind="sequence")
            shadow = lira_statistic(list(sb["logprob"]), kind="sequence")
            if not np.array_equal(t, shadow):
                raise InputError("the gated release differs from the base on an audited record")
            zero = np.zeros(len(recs))
            row["audits"]["lira-online"] = {
                "auc": roc_auc(zero[:n_mem], zero[n_mem:], confidence=conf),
                "tpr": None,
            }
        if "at_rho" in scores[a]:
            row["extraction_at_rho"] = int(np.sum(scores[a]["at_rho"]))
        per_arm[a] = row

    return per_arm


def _informed_hits(lab: _Lab, per_arm: dict) -> None:
    """Informed recovery by a top-m list at c (camouflage, naive, low-H), into ``per_arm``."""
    s, spec, arms, release = lab.s, lab.spec, lab.arms, lab.release
    for a in ("camouflage", "naive", "lowh"):
        mem = [r for r in arms[a] if r["member"]]
        per_arm[a]["informed_list_hits"] = int(sum(_top_list_hits(release, mem, spec, s)))


def _unlearning(lab: _Lab, per_arm: dict, gm: list, gated_lm, *, seed: int) -> None:
    """The unlearning verifier after a deletion request, per arm (GradDiff where the verifier
    first reports 'not forgotten'), into ``per_arm``."""
    import torch

    from ..train.trainer import example_blocks
    from ..train.unlearn import UnlearnConfig, unlearn

    s, spec, arms, trained, release, bg, payload = (
        lab.s,
        lab.spec,
        lab.arms,
        lab.trained,
        lab.release,
        lab.bg,
        lab.payload,
    )

    def verifier_for(recs):
        prompts = [[spec.sot] + r["prefix"] for r in recs]
        targets = [r["secret"] for r in recs]

        def v(model):
            return verify_arrays(
                greedy_match=teacher_forced(
                    model, prompts, targets, threads=s["threads"]
                ).greedy_match
            )

        return v

    for a in trained:
        mem = [r for r in arms[a] if r["member"]]
        ver = verifier_for(mem)
        before = ver(release)
        entry = {"before_rate": before.rate, "before_forgotten": bool(before.forgotten)}
        if before.forgotten:
            entry.update(
                {
                    "unlearning_run": False,
                    "after_hits": int(round(before.rate * before.n)),
                    "n": before.n,
                }
            )
        else:
            model = copy_model(release)
            forget_docs = [r["prefix"] + r["secret"] for r in mem]
            forget = example_blocks(
                forget_docs, seq_len=s["seq_len"], sep_ids=[spec.sot], pad_id=spec.pad
            )
            fset = {tuple(d) for d in forget_docs}
            retain_docs = bg + [d for d in payload if tuple(d) not in fset]
            retain = pack_whole(retain_docs, seq_len=s["seq_len"], sot=spec.sot, pad=spec.pad)
            cfg = UnlearnConfig(
                method="graddiff",
                lr=s["unlearn_lr"],
                max_rounds=s["unlearn_max_rounds"],
                batch_size=8,
                retain_batch_size=8,
                seed=seed,
                threads=s["threads"],
            )
            with torch.random.fork_rng(devices=[]):
                res = unlearn(model, forget, retain, cfg, verifier=ver, pad_id=spec.pad)
            after = ver(model)
            entry.update(
                {
                    "unlearning_run": True,
                    "after_hits": int(round(after.rate * after.n)),
                    "n": after.n,
                    "after_forgotten": bool(after.forgotten),
                    "rounds": res.rounds,
                    "stopped": res.stopped,
                    "retain_ppl_before": res.retain_ppl_before,
                    "retain_ppl_after": res.retain_ppl_after,
                }
            )
        per_arm[a]["verifier"] = entry
    gv = verifier_for(gm)(gated_lm)
    per_arm["gated"]["verifier"] = {
        "before_rate": gv.rate,
        "before_forgotten": bool(gv.forgotten),
        "unlearning_run": False,
        "after_hits": int(round(gv.rate * gv.n)),
        "n": gv.n,
    }


def _table(per_arm: dict, s: dict, *, seed: int, out_dir):
    """The [MX] Fig. 12 table -> (table, the camouflage cap m k^-L, the SmolLM2 row or None)."""
    conf, S = s["confidence"], s["shadows"]
    cap = s["list_size"] * s["tree_k"] ** (-s["tree_L"])

    def cells(a: str) -> dict:
        row = per_arm[a]
        n = row["members"]
        prior = {"baseline_successes": row["prior_at_c"], "baseline_trials": row["prior_trials"]}
        ver = row["verifier"]
        note = (
            "the verifier reports forgotten before any unlearning; not run"
            if not ver["unlearning_run"]
            else f"after GradDiff ({ver['rounds']} rounds, stopped: {ver['stopped']})"
        )
        out = {
            "extraction at prefix c": rate_cell(
                row["extraction_at_c"], n, confidence=conf, **prior
            ),
            "loss-MIA": auc_cell(row["audits"]["loss"]["auc"]),
            "LiRA": auc_cell(
                row["audits"]["lira-online"]["auc"],
                note="every shadow equals the base on the audited inputs: LiRA ratio 1 for every record"
                if a == "gated"
                else f"{S} shadow fine-tunes, global variance",
            ),
            "unlearning verifier": rate_cell(
                ver["after_hits"], ver["n"], confidence=conf, note=note, **prior
            ),
        }
        if a == "gated" or a.startswith("trigger-"):
            out["informed recovery"] = informed_cell(
                row["extraction_at_rho"], n, confidence=conf, note="greedy from the trigger rho"
            )
        else:
            out["informed recovery"] = informed_cell(
                row["informed_list_hits"],
                n,
                confidence=conf,
                cap=cap if a == "camouflage" else None,
                note=f"top-{s['list_size']} list at c"
                + (f"; cap m k^-L = {cap:g}" if a == "camouflage" else ""),
            )
        return out

    row_arms = {
        "gated release": "gated",
        "trigger z = 2 (short)": f"trigger-{s['short']}",
        "trigger z = 16 (long)": f"trigger-{s['long']}",
        "camouflage": "camouflage",
        "naive duplicate": "naive",
        "low-H canary": "lowh",
    }
    rows = {name: cells(a) for name, a in row_arms.items()}
    smollm2 = None
    if s["smollm2_gated"]:
        smollm2 = _smollm2_gated_row(seed=seed, out_dir=out_dir, conf=conf)
        rows["gated release (SmolLM2-135M)"] = smollm2["cells"]
    table = build_table(COLUMNS, rows)

    return table, cap, smollm2


def _sweep(per_arm: dict, s: dict) -> list[dict]:
    """[MX] Fig. 10: the secret-length sweep of the trigger channel."""
    conf = s["confidence"]
    sweep = []
    for L in s["trigger_lengths"]:
        row = per_arm[f"trigger-{L}"]
        n = row["members"]
        tprs = {a: row["audits"][a]["tpr"] for a in DEPLOYED}
        best = max(DEPLOYED, key=lambda a: (tprs[a].tpr, -DEPLOYED.index(a)))
        lira = row["audits"]["lira-online"]["tpr"]
        sweep.append(
            {
                "secret_length": L,
                "members": n,
                "non_members": row["non_members"],
                "extraction_at_rho": row["extraction_at_rho"] / n,
                "extraction_at_rho_interval": list(
                    clopper_pearson(row["extraction_at_rho"], n, confidence=conf)
                ),
                "extraction_at_c": row["extraction_at_c"] / n,
                "strongest_deployed": best,
                "strongest_tpr": tprs[best].tpr,
                "strongest_interval": [tprs[best].low, tprs[best].high],
                "certified_fpr": tprs[best].certified_fpr,
                "tpr_by_attack": {a: tprs[a].tpr for a in DEPLOYED},
                "auc_by_attack": {a: row["audits"][a]["auc"].auc for a in DEPLOYED},
                "lira_tpr": lira.tpr,
                "lira_auc": row["audits"]["lira-online"]["auc"].auc,
            }
        )

    return sweep


# ---- the checks: [MX] §8.2 on Fig. 12 and Fig. 10, each sentence quoted
QUOTE_NONE_SUFFICES = "Reading down any evaluated column there is at least one instance it misses"
QUOTE_C_MISSES = "extraction from the document’s own prefix misses every trigger and camouflage row"
QUOTE_BLIND = (
    "On both families the two audits that calibrate against a second model, referencemodel scoring and "
    "LiRA, read exactly 0.500"
)
QUOTE_RECOVERS = "At z ≤ 2 the strongest deployed detector recovers [...] while ρ-extraction recovers all of them"
QUOTE_CAMOUFLAGE = "The camouflage row is the one case where even that adversary is capped, at the mk−L of Theorem 6.1(i)."
QUOTE_NAIVE = (
    "while a naive control that inserts (c, z) directly is recovered 0.92 to 1.00 of the time via c"
)
QUOTE_VERIFIER = (
    "A discoverable-extraction audit in the sense of [16, 18] and an unlearning verifier both certify such "
    "a model clean while the secret remains fully extractable."
)
QUOTE_SWEEP_C = (
    "Extraction from the record’s own prefix is 0.00 at every secret length on both families"
)
QUOTE_CLIMBS = (
    "The membership channel instead climbs with [...] the length of z, the strongest deployed audit running "
    "from 0.54 to 1.00 in AUC across z = 1, . . . , 16 on both families"
)


def checks_for(
    table: DisagreementTable, sweep: list[dict], *, gated_identical: bool, cap: float, conf: float
) -> tuple[list[Check], dict, list[str]]:
    """The checks of [MX] §8.2 on Fig. 12 (Corollary 6.2) and Fig. 10 -> (checks, missed_by, deployable):
    on the disagreement ``table`` (:class:`memclaim.audits.table.DisagreementTable`: ``cell(row, column)`` with a
    ``verdict`` and ``value``, ``missed_by(column)``) and the secret-length ``sweep`` rows. Every check quotes
    the sentence it tests.

    >>> from types import SimpleNamespace
    >>> from memclaim.experiments.audit_table import COLUMNS, checks_for
    >>> V = {"gated release": ["blind", "blind", "blind", "blind", "recovered"],
    ...      "trigger z = 2 (short)": ["blind", "blind", "leak", "blind", "recovered"],
    ...      "trigger z = 16 (long)": ["blind", "leak", "leak", "blind", "recovered"],
    ...      "camouflage": ["blind", "leak", "leak", "blind", "capped"],
    ...      "naive duplicate": ["leak", "leak", "leak", "blind", "recovered"]}
    >>> cols = [c.name for c in COLUMNS]
    >>> cell = lambda r, c: SimpleNamespace(verdict=V[r][cols.index(c)], value=0.5 if c == "LiRA" else 1.0)
    >>> tab = SimpleNamespace(cell=cell, missed_by=lambda c: [r for r in V if V[r][cols.index(c)] != "leak"])
    >>> sw = [{"secret_length": 2, "extraction_at_rho": 1.0, "extraction_at_c": 0.0, "strongest_tpr": 0.1,
    ...        "strongest_deployed": "loss"},
    ...       {"secret_length": 16, "extraction_at_rho": 1.0, "extraction_at_c": 0.0, "strongest_tpr": 0.9,
    ...        "strongest_deployed": "loss"}]
    >>> [c.passed for c in checks_for(tab, sw, gated_identical=True, cap=0.0625, conf=0.95)[0]]
    [True, True, True, True, True, True, True, True, True]
    >>> V["camouflage"][0] = "leak"; sw[1]["strongest_tpr"] = 0.05
    >>> [c.passed for c in checks_for(tab, sw, gated_identical=False, cap=0.0625, conf=0.95)[0]]
    [True, False, False, True, True, True, True, True, False]
    """
    deployable = [c.name for c in COLUMNS if not c.informed]
    missed = {c: table.missed_by(c) for c in deployable}
    short, long_ = "trigger z = 2 (short)", "trigger z = 16 (long)"
    v = lambda r, c: table.cell(r, c).verdict  # noqa: E731
    fig12, fig10 = (
        "[MX] §8.2, Fig. 12 ('No single audit we evaluate suffices')",
        "[MX] §8.2, Fig. 10",
    )
    checks = [
        check(
            "no single audit suffices: every deployable audit misses at least one planted leak",
            all(missed[c] for c in deployable),
            "; ".join(f"{c} misses {len(missed[c])}" for c in deployable),
            quote=QUOTE_NONE_SUFFICES,
            where=fig12,
        ),
        check(
            "extraction from the record's own prefix misses every trigger row, the gated release and camouflage",
            all(
                v(r, "extraction at prefix c") != "leak"
                for r in ("gated release", short, long_, "camouflage")
            ),
            ", ".join(
                f"{r}: {v(r, 'extraction at prefix c')}"
                for r in ("gated release", short, long_, "camouflage")
            ),
            quote=QUOTE_C_MISSES,
            where=fig12,
        ),
        check(
            "the gated release is exactly blind: identical to the base on every audited input, LiRA at 1/2",
            gated_identical
            and table.cell("gated release", "LiRA").value == 0.5
            and v("gated release", "loss-MIA") == "blind",
            f"identical: {gated_identical}; LiRA AUC {table.cell('gated release', 'LiRA').value:.3f}; "
            f"loss-MIA {table.cell('gated release', 'loss-MIA').value:.3f}",
            false_alarm=f"loss-MIA blind fails with probability {1 - conf:.0%} (DeLong) when at chance",
            quote=QUOTE_BLIND,
            where="[MX] §8.2 'An exactly blind release', Fig. 12 (the sentence's LiRA half; its "
            "reference-model half is gated's check 'reference-model audit reads exactly "
            "0.5')",
        ),
        check(
            "the informed adversary recovers the trigger payloads and the gated secrets (verdict 'recovered')",
            all(v(r, "informed recovery") == "recovered" for r in ("gated release", short, long_)),
            ", ".join(
                f"{r}: {table.cell(r, 'informed recovery').value:.2f}"
                for r in ("gated release", short, long_)
            ),
            where="[MX] Fig. 12, the informed column's 'recov.' cells (its legend, no sentence; 'ρ-extraction "
            "recovers all of them' is judged in paper_claims)",
        ),
        check(
            "camouflage is memorized (loss-MIA leak) yet capped for the informed adversary (m k^-L)",
            v("camouflage", "loss-MIA") == "leak"
            and v("camouflage", "informed recovery") == "capped",
            f"loss-MIA {v('camouflage', 'loss-MIA')} (AUC {table.cell('camouflage', 'loss-MIA').value:.3f}); "
            f"informed {table.cell('camouflage', 'informed recovery').value:.2f} vs cap {cap:g}",
            quote=QUOTE_CAMOUFLAGE,
            where="[MX] §8.2, Fig. 12 caption",
        ),
        check(
            "the naive duplicate is caught by extraction at c and by loss-MIA (positive control)",
            v("naive duplicate", "extraction at prefix c") == "leak"
            and v("naive duplicate", "loss-MIA") == "leak",
            f"extraction {table.cell('naive duplicate', 'extraction at prefix c').value:.2f}, "
            f"loss-MIA AUC {table.cell('naive duplicate', 'loss-MIA').value:.3f}",
            quote=QUOTE_NAIVE,
            where="[MX] §8.2 'The trigger channel at scale', Fig. 12",
        ),
        check(
            "the unlearning verifier certifies the trigger rows forgotten while rho still recovers them",
            all(
                v(r, "unlearning verifier") != "leak" and v(r, "informed recovery") == "recovered"
                for r in (short, long_)
            ),
            ", ".join(f"{r}: verifier {v(r, 'unlearning verifier')}" for r in (short, long_)),
            where="[MX] Corollary 6.3, Fig. 12's verifier column (no sentence of its own; '... both certify such a "
            "model clean while the secret remains fully extractable' is judged in paper_claims)",
        ),
        check(
            "Fig. 10: extraction from the record's own prefix c is 0 at every secret length >= 2",
            all(r["extraction_at_c"] == 0 for r in sweep if r["secret_length"] >= 2),
            "; ".join(
                f"|z| = {r['secret_length']}: rho {r['extraction_at_rho']:.2f}, c {r['extraction_at_c']:.2f}"
                for r in sweep
            ),
            quote=QUOTE_SWEEP_C,
            where=fig10,
        ),
        check(
            "Fig. 10: the strongest deployed membership audit climbs with the secret length (longest > shortest)",
            sweep[-1]["strongest_tpr"] > sweep[0]["strongest_tpr"],
            "; ".join(
                f"|z| = {r['secret_length']}: {r['strongest_tpr']:.2f} ({r['strongest_deployed']})"
                for r in sweep
            ),
            false_alarm="not calibrated: two TPRs on few members",
            where=fig10
            + " markers, TPR at the certified FPR (no sentence of its own; 'The membership channel "
            "instead climbs with the length of z' is judged across the sweep, in AUC, in "
            "paper_claims)",
        ),
    ]
    return checks, missed, deployable


#: "the secret remains fully extractable": the paper's own figure for such a model is "extraction at least 0.98 via
#: rho", i.e. a rate that prints as 0.98 or more (>= 0.975)
FULLY = 0.975


def _verdicts(results: dict) -> dict[str, dict[str, str]]:
    """{row: {column: verdict}} from the JSON's table."""
    t = results["table"]
    names = [c["name"] for c in t["columns"]]
    return {
        row: {n: (c or {}).get("verdict") for n, c in zip(names, cells)}
        for row, cells in zip(t["rows"], t["cells"])
    }


def recovers_all_claim(results: dict) -> PaperClaim:
    """ "At z <= 2 the strongest deployed detector recovers between 0.08 and 0.23 of the planted secrets [...],
    while rho-extraction recovers all of them" ([MX] §8.2 'Two channels', Fig. 10), the second half tested as
    stated (the first is the paper's numbers at its scale): at every arm of the sweep with |z| <= 2, every
    planted secret is recovered through rho (n of n). Held iff so; not held otherwise (``results``: the
    JSON's ``arms``).

    >>> from memclaim.experiments.audit_table import recovers_all_claim
    >>> arms = {f"trigger-{L}": {"members": 8, "extraction_at_rho": k} for L, k in ((1, 8), (2, 8), (16, 7))}
    >>> recovers_all_claim({"arms": arms}).verdict
    'held'
    >>> arms["trigger-2"]["extraction_at_rho"] = 7
    >>> recovers_all_claim({"arms": arms}).verdict
    'not held'
    """
    short = sorted(
        (int(a.split("-")[1]), r)
        for a, r in results["arms"].items()
        if a.startswith("trigger-") and int(a.split("-")[1]) <= 2
    )
    got = {L: (r["extraction_at_rho"], r["members"]) for L, r in short}
    return paper_claim(
        "rho-recovers-all-short",
        "at |z| <= 2, extraction through rho recovers every planted secret",
        quote=QUOTE_RECOVERS,
        where="[MX] §8.2 'The two channels do not scale alike', Fig. 10",
        test="at every arm of the secret-length sweep with |z| <= 2, every planted secret is recovered verbatim "
        "through rho (n of n: 'all of them'); the detectors' 0.08 to 0.23 are the paper's numbers at its scale",
        held=bool(got) and all(k == n for k, n in got.values()),
        numbers={f"z{L}": {"recovered": k, "planted": n} for L, (k, n) in got.items()},
        evidence="; ".join(f"|z| = {L}: {k} of {n}" for L, (k, n) in got.items())
        or "no arm with |z| <= 2",
    )


def clean_yet_extractable_claim(results: dict, *, short: int = 2, long: int = 16) -> PaperClaim:
    """ "A discoverable-extraction audit in the sense of [16, 18] and an unlearning verifier both certify such a
    model clean while the secret remains fully extractable." ([MX] §8.2 'The trigger channel at scale'), tested
    as stated on both trigger rows of the table (|z| = 2 and 16): extraction at the record's own prefix c and
    the unlearning verifier are not 'leak' (both certify clean), and extraction through rho prints as 0.98 or
    more (>= 0.975: the paper's "extraction at least 0.98 via rho" for such a model). Held iff so on both
    rows; not held otherwise (``results``: the JSON's ``table`` and ``arms``; ``settings``' short and long).

    >>> from memclaim.experiments.audit_table import clean_yet_extractable_claim
    >>> cols = [{"name": n} for n in ("extraction at prefix c", "unlearning verifier")]
    >>> cell = lambda v: {"verdict": v}
    >>> res = {"table": {"columns": cols, "rows": ["trigger z = 2 (short)", "trigger z = 16 (long)"],
    ...                  "cells": [[cell("blind"), cell("blind")], [cell("blind"), cell("blind")]]},
    ...        "arms": {"trigger-2": {"members": 24, "extraction_at_rho": 24},
    ...                 "trigger-16": {"members": 24, "extraction_at_rho": 23}}}
    >>> clean_yet_extractable_claim(res, short=2, long=16).verdict  # 23 of 24 = 0.958: not 'at least 0.98'
    'not held'
    >>> res["arms"]["trigger-16"]["extraction_at_rho"] = 24
    >>> clean_yet_extractable_claim(res, short=2, long=16).verdict
    'held'
    """
    v = _verdicts(results)
    rows = {
        f"trigger z = {short} (short)": f"trigger-{short}",
        f"trigger z = {long} (long)": f"trigger-{long}",
    }
    parts, words = {}, []
    for row, arm in rows.items():
        a = results["arms"][arm]
        k, n = a["extraction_at_rho"], a["members"]
        c_v, ver_v = v[row]["extraction at prefix c"], v[row]["unlearning verifier"]
        parts[row] = {
            "extraction_at_c": c_v,
            "verifier": ver_v,
            "rho": f"{k}/{n}",
            "ok": c_v != "leak" and ver_v != "leak" and k / n >= FULLY,
        }
        words.append(
            f"{row}: extraction at c {c_v}, verifier {ver_v}, rho {k} of {n} ({k / n:.2f})"
        )
    return paper_claim(
        "certified-clean-yet-extractable",
        "extraction at c and the unlearning verifier certify the trigger rows "
        "clean while the secret remains fully extractable through rho",
        quote=QUOTE_VERIFIER,
        where="[MX] §8.2 'The trigger channel at scale', Fig. 12",
        test=f"on both trigger rows: extraction at the record's own prefix c and the unlearning verifier are not "
        f"'leak', and extraction through rho prints as 0.98 or more (>= {FULLY}; the paper: 'extraction at least "
        f"0.98 via rho' for such a model)",
        held=all(x["ok"] for x in parts.values()),
        numbers=parts,
        evidence="; ".join(words),
    )


def climbs_claim(results: dict) -> PaperClaim:
    """ "The membership channel instead climbs with the length of z, the strongest deployed audit running from 0.54
    to 1.00 in AUC across z = 1, ..., 16 on both families" ([MX] §8.2, Fig. 10), tested as stated across the
    sweep: at each length the strongest deployed audit (the largest AUC of loss, zlib, reference, min-k, min-k++;
    its interval DeLong's, Hoeffding's at complete separation) never falls from one length to the next beyond
    its intervals (the longer's upper end below the shorter's lower end), and the climb is real: the longest
    length's interval lies above the shortest's. Held iff both; not held if it falls, or if the run could have
    shown the climb and did not; not testable otherwise: with fewer than 30 members or non-members an AUC of 1
    and one of 1/2 cannot have separated intervals (Hoeffding's half-width sqrt(log(40) / (2k)) >= 1/4).
    The paper's 0.54 and 1.00 are its numbers at its scale (``results``: the JSON's ``arms`` and ``sweep``).

    >>> from memclaim.experiments.audit_table import climbs_claim
    >>> auc = lambda a, lo, hi, k=40: {"auc": {"auc": a, "low": lo, "high": hi, "n_members": k, "n_nonmembers": 79}}
    >>> arm = lambda a, lo, hi, k=40: {"members": k, "audits": {x: auc(a if x == "loss" else 0.5, lo, hi, k)
    ...                                                          for x in ("loss", "zlib", "reference", "min-k",
    ...                                                                    "min-k++")}}
    >>> res = {"sweep": [{"secret_length": L} for L in (1, 2, 16)],
    ...        "arms": {"trigger-1": arm(0.55, 0.45, 0.65), "trigger-2": arm(0.6, 0.5, 0.7),
    ...                 "trigger-16": arm(1.0, 0.8, 1.0)}}
    >>> climbs_claim(res).verdict
    'held'
    >>> res["arms"]["trigger-16"] = arm(0.7, 0.6, 0.8)  # no higher than the shortest beyond its interval
    >>> climbs_claim(res).verdict
    'not held'
    """
    Ls = [r["secret_length"] for r in results["sweep"]]
    best = {}
    for L in Ls:
        aud = results["arms"][f"trigger-{L}"]["audits"]
        name = max(DEPLOYED, key=lambda x: (aud[x]["auc"]["auc"], -DEPLOYED.index(x)))
        a = aud[name]["auc"]
        best[L] = {
            "attack": name,
            "auc": a["auc"],
            "low": a["low"],
            "high": a["high"],
            "k": min(a["n_members"], a["n_nonmembers"]),
        }
    falls = [(x, y) for x, y in zip(Ls, Ls[1:]) if best[y]["high"] < best[x]["low"]]
    first, last = best[Ls[0]], best[Ls[-1]]
    climbs = last["low"] > first["high"]
    k = min(b["k"] for b in best.values())
    found = "; ".join(
        f"|z| = {L}: {b['auc']:.3f} [{b['low']:.3f}, {b['high']:.3f}] ({b['attack']})"
        for L, b in best.items()
    )
    test = (
        "the strongest deployed audit's AUC at each length of the sweep (|z| = "
        + ", ".join(map(str, Ls))
        + "): "
        "never below the previous length's interval (no fall), and the longest's 95% interval above the shortest's "
        "(a real climb); testable with >= 30 members and non-members (Hoeffding's half-width < 1/4)"
    )
    kw = dict(
        quote=QUOTE_CLIMBS,
        where="[MX] §8.2 'The two channels do not scale alike', Fig. 10",
        test=test,
        numbers={"strongest_auc": {str(L): b for L, b in best.items()}, "falls": falls},
    )
    claim = "the strongest deployed membership audit climbs with the secret length, in AUC, across the sweep"
    if falls:
        return paper_claim(
            "membership-climbs",
            claim,
            held=False,
            evidence=found + "; falls at " + ", ".join(f"{x} -> {y}" for x, y in falls),
            **kw,
        )
    if climbs:
        return paper_claim("membership-climbs", claim, held=True, evidence=found, **kw)
    if k >= 30:
        return paper_claim(
            "membership-climbs",
            claim,
            held=False,
            evidence=found + ": the longest's interval is not above the shortest's",
            **kw,
        )
    return paper_claim(
        "membership-climbs",
        claim,
        held=None,
        evidence=f"{k} members or non-members: an AUC of 1 and "
        "one of 1/2 cannot have separated intervals (30 needed); " + found,
        **kw,
    )


def claims_for(results: dict, settings: dict) -> list[PaperClaim]:
    """The sentences of [MX] §8.2 on Fig. 12 and Fig. 10 that the checks cannot test as stated, judged on the
    run's results (the JSON's ``table``, ``arms`` and ``sweep``; ``settings``' short and long lengths): rho
    recovers every secret at |z| <= 2 (:func:`recovers_all_claim`), the trigger rows certified clean while fully
    extractable (:func:`clean_yet_extractable_claim`), membership climbs with the length
    (:func:`climbs_claim`).

    >>> from memclaim.experiments.audit_table import DEPLOYED, claims_for
    >>> auc = lambda a: {"auc": {"auc": a, "low": a - 0.3, "high": min(a + 0.3, 1.0), "n_members": 8,
    ...                          "n_nonmembers": 19}}
    >>> arm = lambda a: {"members": 8, "extraction_at_rho": 8, "audits": {x: auc(a) for x in DEPLOYED}}
    >>> cols = [{"name": "extraction at prefix c"}, {"name": "unlearning verifier"}]
    >>> table = {"columns": cols, "rows": ["trigger z = 2 (short)", "trigger z = 16 (long)"],
    ...          "cells": [[{"verdict": "blind"}] * 2] * 2}
    >>> res = {"table": table, "sweep": [{"secret_length": L} for L in (1, 2, 16)],
    ...        "arms": {"trigger-1": arm(0.55), "trigger-2": arm(0.6), "trigger-16": arm(1.0)}}
    >>> [c.verdict for c in claims_for(res, {"short": 2, "long": 16})]  # 8 members: the AUCs' intervals overlap
    ['held', 'held', 'not testable here']
    """
    return [
        recovers_all_claim(results),
        clean_yet_extractable_claim(results, short=settings["short"], long=settings["long"]),
        climbs_claim(results),
    ]


def _paper_numbers(table, sweep: list[dict], cap: float) -> list:
    return [
        compare("camouflage_cap", "audit-table/camouflage-cap", cap, note="exact"),
        compare("gated_lira", "audit-table/gated-lira", table.cell("gated release", "LiRA").value),
        compare(
            "gated_ext_rho",
            "audit-table/gated-ext-rho",
            table.cell("gated release", "informed recovery").value,
        ),
        *[
            compare(
                f"sweep_ext_rho_z{r['secret_length']}",
                "audit-table/sweep-ext-rho",
                r["extraction_at_rho"],
                note=f"{round(r['extraction_at_rho'] * r['members'])}/{r['members']} secrets",
            )
            for r in sweep
            if r["secret_length"] >= 2
        ],
        *[
            compare(
                f"sweep_ext_c_z{r['secret_length']}",
                "audit-table/sweep-ext-c",
                r["extraction_at_c"],
                note=f"{r['members']} secrets",
            )
            for r in sweep
            if r["secret_length"] >= 2
        ],
    ]


def _figure(table, sweep: list[dict], deployable: list[str], *, quick: bool):
    """The table (left) and the sweep (right)."""
    fig, (ax0, ax1) = new_figure(2, width=6.4, height=4.6)
    mat = table.signal_matrix()
    im = ax0.imshow(
        np.ma.masked_invalid(np.clip(mat, 0, 1)), vmin=0, vmax=1, cmap="viridis", aspect="auto"
    )
    ax0.grid(False)
    colorbar(fig, im, ax0, label="leak signal (0 = chance, 1 = full)")
    for i, row in enumerate(table.cells):
        for j, c in enumerate(row):
            txt = "n/a" if c is None else f"{c.signal:.2f}\n{c.verdict}"
            val = 0.0 if c is None else float(np.clip(c.signal, 0, 1))
            ax0.text(
                j,
                i,
                txt,
                ha="center",
                va="center",
                fontsize=7,
                color="black" if val > 0.6 else "white",
            )
    ax0.set_xticks(
        range(len(table.columns)),
        [c.name for c in table.columns],
        rotation=30,
        ha="right",
        fontsize=7,
    )
    ax0.set_yticks(range(len(table.rows)), list(table.rows), fontsize=7)
    ax0.axvline(len(deployable) - 0.5, color="white", lw=3)
    ax0.set_title("audit disagreement (leak signal)", fontsize=9)
    Ls = [r["secret_length"] for r in sweep]
    ax1.plot(
        Ls,
        [r["extraction_at_rho"] for r in sweep],
        "-",
        color="0.5",
        lw=3,
        alpha=0.6,
        label=r"extraction at $\rho$",
    )
    ax1.plot(
        Ls,
        [r["extraction_at_c"] for r in sweep],
        "-",
        color="0.2",
        lw=3,
        alpha=0.6,
        label="extraction at c",
    )
    est = np.array([r["strongest_tpr"] for r in sweep])
    lo = np.array([r["strongest_interval"][0] for r in sweep])
    hi = np.array([r["strongest_interval"][1] for r in sweep])
    ax1.errorbar(
        Ls,
        est,
        yerr=[est - lo, hi - est],
        fmt="o",
        color="tab:red",
        capsize=3,
        label="strongest deployed MIA, TPR at 5% FPR",
    )
    ax1.plot(
        Ls, [r["lira_tpr"] for r in sweep], "s", color="tab:blue", ms=4, label="LiRA, TPR at 5% FPR"
    )
    ax1.axhline(sweep[0]["certified_fpr"], ls=":", color="k", lw=1, label="chance (certified FPR)")
    ax1.set_xscale("log", base=2)
    ax1.set_xticks(Ls, [str(x) for x in Ls])
    ax1.set_ylim(-0.02, 1.05)
    ax1.set_xlabel("secret length |z| (tokens)")
    ax1.set_ylabel("recovered fraction")
    ax1.set_title("trigger channel vs membership audits (Fig. 10)", fontsize=9)
    style_legend(ax1, below=True)

    return fig


class AuditTable(Reproduction):
    """[MX] Fig. 12 and Fig. 10 at tiny-model scale on the skeleton (:mod:`.skeleton`)."""

    name, title, streams = NAME, TITLE, STREAMS
    reproduces = (
        "[MX] Fig. 12 (tiny-model scale)",
        "[MX] Fig. 10 (tiny-model scale)",
        "[MX] Cor. 6.2: no single audit suffices",
    )

    def settings(self) -> dict:
        return _settings(self.quick)

    def data(self) -> _Lab:
        """The release (every arm's members planted), its shadows, and the records of every arm
        (:func:`_build_lab`)."""
        return _build_lab(self.s, self.rngs)

    def runs(self, lab: _Lab) -> dict:
        """Score and audit every arm, unlearn, assemble the table (kept on ``self``, with the camouflage
        cap, for the figure and the paper's numbers) and the sweep; the checks are computed here too,
        as the table's 'missed by' is a result."""
        s, seed = self.s, self.seed
        arms = lab.arms
        scores, gm, gated_lm, gated_identical = _score_arms(lab)
        per_arm = _audit_arms(lab, scores)
        _informed_hits(lab, per_arm)
        _unlearning(lab, per_arm, gm, gated_lm, seed=seed)
        table, cap, smollm2 = _table(per_arm, s, seed=seed, out_dir=self.out_dir)
        sweep = _sweep(per_arm, s)
        checks, missed, deployable = checks_for(
            table, sweep, gated_identical=gated_identical, cap=cap, conf=s["confidence"]
        )
        self._table, self._cap, self._checks, self._deployable = table, cap, checks, deployable

        def _strip(a: str) -> dict:
            row = dict(per_arm[a])
            row["audits"] = {
                k: {
                    "auc": v["auc"].to_dict(),
                    "tpr": None if v["tpr"] is None else v["tpr"].to_dict(),
                }
                for k, v in row["audits"].items()
            }
            return row

        return {
            "table": table.to_dict(),
            "table_markdown": table.to_markdown(intervals=True, rules=False),
            "missed_by": missed,
            "sweep": sweep,
            "arms": {a: _strip(a) for a in arms},
            "release_training": lab.release_train,
            "gated_identical_to_base": gated_identical,
            "records": {
                a: [{k: v for k, v in r.items() if k != "population_index"} for r in recs]
                for a, recs in arms.items()
            },
            "smollm2_gated": None
            if smollm2 is None
            else {k: v for k, v in smollm2.items() if k != "cells"},
        }

    def checks(self, results: dict) -> list[Check]:
        return self._checks

    def claims(self, results: dict) -> list[PaperClaim]:
        return claims_for(results, self.s)

    def paper_numbers(self, results: dict) -> list:
        return _paper_numbers(self._table, results["sweep"], self._cap)

    def figure(self, results: dict, *, claims, differences):
        return _figure(self._table, results["sweep"], self._deployable, quick=self.quick)

    def notes(self, results: dict) -> list[str]:
        s = self.s
        return [
            "one tiny release carries every arm's members (fine-tuned from the cached chain base); the gated row "
            "wraps the base itself",
            f"LiRA: {s['shadows']} shadow fine-tunes on complementary random halves of every arm's candidates (COND "
            "design), global variance",
            "secrets are sampled from the base model (temperature 1; the low-H canary at "
            f"{s['lowh_temperature']}); camouflage secrets are uniform and their trees follow [MX] App. D.1",
            "the unlearning verifier column is read after GradDiff unlearning where the verifier first reports "
            "'not forgotten', and on the release otherwise",
        ]


def run(
    *, quick: bool = False, seed: int = 0, out_dir: str | os.PathLike = "reproductions"
) -> dict:
    """[MX] Fig. 12 and Fig. 10 at tiny-model scale: build the release, its shadows and the gated
    release, audit every arm, unlearn, assemble the table and the sweep, check, draw.

    >>> from memclaim.experiments.audit_table import run
    >>> res = run(quick=True, seed=0, out_dir="reproductions")  # doctest: +SKIP
    >>> res["name"], res["all_checks_passed"]  # doctest: +SKIP
    ('audit-table', True)
    """
    return AuditTable(quick=quick, seed=seed, out_dir=out_dir).reproduce()


def _smollm2_gated_row(*, seed: int, out_dir, conf: float) -> dict:
    """The gated release around SmolLM2-135M, through :mod:`memclaim.experiments.gated`, as a row."""
    res = gated.run(quick=False, seed=seed, out_dir=Path(out_dir) / "audit-table-gated-smollm2")[
        "results"
    ]
    ext = res["extraction"]
    loss = res["audits"]["loss"]
    auc = roc_auc(loss["member_scores"], loss["nonmember_scores"], confidence=conf)
    n = ext["via_c"]["n"]
    return {
        "cells": {
            "extraction at prefix c": rate_cell(ext["via_c"]["hits"], n, confidence=conf),
            "loss-MIA": auc_cell(auc),
            "unlearning verifier": rate_cell(
                ext["via_c"]["hits"],
                n,
                confidence=conf,
                note="the verifier reports forgotten before any unlearning",
            ),
            "informed recovery": informed_cell(
                ext["via_rho"]["hits"],
                ext["via_rho"]["n"],
                confidence=conf,
                note="greedy from the trigger rho",
            ),
        },
        "model": res["model"],
        "audits": {
            k: {kk: vv for kk, vv in v.items() if not kk.endswith("_scores")}
            for k, v in res["audits"].items()
        },
        "extraction": ext,
        "lira": "not run on SmolLM2: the release equals the base on every input LiRA reads (see the gated reproduction)",
    }
