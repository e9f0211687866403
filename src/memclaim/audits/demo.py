"""The audit section of ``memclaim demo`` (tiny GPT: planted members vs held-out controls), and
the micro LiRA set-up shared by the tests and ``benchmarks/bench_lira.py``.

:func:`run_demo_section` runs the membership attacks, the extraction audit and the unlearning
verifier on the tiny model's planted members against held-out controls (no shadows by default:
training shadows of the tiny GPT costs about a minute each), writes the audit report and prints
a short table.

:func:`build_micro_lira` builds a *micro* target (a 1-layer GPT-2 with n_embd 32 on a few hundred
12-word records) whose members are planted once each and have varied difficulty (short cycles,
Markov-Zipf text, uniform word salad): the regime where per-example calibration matters, because
the loss attack confuses easy non-members with members ([MX] §8.2; Carlini et al. 2022 §III).
Target and shadows are trained by the same recipe through :func:`memclaim.audits.shadows.train_on_texts`.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..cli.console import say as _say
from ..jsonutil import ResultMixin
from ..validate import integer

__all__ = ["run_demo_section", "varied_difficulty_texts", "MicroSetup", "micro_recipe", "build_micro_lira"]


def _records(x, label):
    if isinstance(x, (str, Path)):
        return x
    out = []
    for j, r in enumerate(x):
        if isinstance(r, str):
            out.append({"id": f"{label}-{j}", "text": r})
        elif isinstance(r, dict):
            out.append({"id": str(r.get("id", f"{label}-{j}")), "text": r.get("text", "")})
        else:
            out.append({"id": str(getattr(r, "id", f"{label}-{j}")), "text": getattr(r, "text", "")})
    return out


def run_demo_section(*, model, members, nonmembers, out_dir, console=None, prefix_tokens: int = 32,
                     suffix_tokens: int = 32, fpr="0.05", shadows: int = 0) -> dict:
    """Audit ``model`` (a LoadedModel or spec, e.g. ``"toy"``) on ``members`` vs ``nonmembers``
    (files, texts, dicts with ``text`` or Records) into ``out_dir`` (score store + report).

    Returns a JSON-ready summary: per attack the AUC with its interval, leak signal and TPR at
    the certified FPR (dropped with a note when the non-members cannot certify ``fpr``), the
    extraction rates, the verifier's verdict and the report paths."""
    from .runner import AuditSettings, run_audit

    settings = AuditSettings(prefix_tokens=prefix_tokens, suffix_tokens=suffix_tokens, fpr=fpr)
    res = run_audit(model, _records(members, "member"), _records(nonmembers, "control"), out_dir=out_dir,
                    settings=settings, shadows=shadows, strict_fpr=False)
    summary = {"headline": res.headline(), "n_members": res.n_members, "n_nonmembers": res.n_nonmembers,
               "attacks": {}, "tpr_note": res.tpr_note, "report": res.report}
    for e in res.attacks:
        a = e.auc
        summary["attacks"][e.attack] = {
            "auc": a.auc, "low": a.low, "high": a.high, "interval": a.interval_method, "leak_signal": a.leak_signal,
            "excludes_chance": a.excludes_chance,
            "tpr": None if e.tpr is None else {"tpr": e.tpr.tpr, "low": e.tpr.low, "high": e.tpr.high,
                                                "certified_fpr": e.tpr.certified_fpr}}
    ex, en = res.extraction, res.extraction_nonmembers
    summary["extraction"] = {"members": {"greedy": ex.greedy_successes, "n": ex.n, "expected_sampled": ex.expected_rate},
                             "nonmembers": {"greedy": en.greedy_successes, "n": en.n,
                                            "expected_sampled": en.expected_rate},
                             "policy": ex.policy}
    summary["verifier"] = {"verdict": res.verifier.verdict, "rate": res.verifier.rate,
                           "threshold": res.verifier.threshold}
    if console is not None:
        from rich.table import Table

        t = Table(title="Membership-inference audit (planted members vs held-out controls)", title_justify="left")
        for col in ("attack", "AUC [95% CI]", "leak signal", "TPR at certified FPR"):
            t.add_column(col)
        for e in res.attacks:
            a = e.auc
            tp = "-" if e.tpr is None else f"{e.tpr.tpr:.2f} at {e.tpr.certified_fpr:.3g}"
            t.add_row(e.attack, f"{a.auc:.3f} [{a.low:.3f}, {a.high:.3f}]", f"{a.leak_signal:.2f}", tp)
        _say(console, t)
        _say(console, res.headline())
        if res.tpr_note:
            _say(console, res.tpr_note)
        _say(console, f"unlearning verifier: {res.verifier.verdict} (recovered fraction {res.verifier.rate:.3f})")
        _say(console, f"audit report: {res.report['html']}")
    return summary


# ------------------------------------------------------------------------------ micro LiRA
def varied_difficulty_texts(n: int, *, seed: int = 0, words: int = 8, n_words: int = 150) -> list[str]:
    """``n`` distinct short records of three difficulties, in rotation: a short cycle of 2-3
    frequent words (easy), a Markov-Zipf passage (medium), uniform word salad (hard)."""
    from ..train.corpus import MarkovZipf

    n = integer("n", n, minimum=3)
    w = integer("words", words, minimum=2)
    gen = MarkovZipf(n_words=n_words, seed=seed + 5)
    rng = np.random.default_rng([seed, 11])
    out, seen = [], set()
    i = 0
    while len(out) < n:
        kind = i % 3
        i += 1
        if kind == 0:
            cyc = [gen.words[j] for j in rng.choice(30, size=int(rng.integers(2, 4)), replace=False)]
            toks = [cyc[t % len(cyc)] for t in range(w)]
        elif kind == 1:
            toks = [gen.words[j] for j in gen.sample_words(w, rng)]
        else:
            toks = [gen.words[j] for j in rng.integers(0, n_words, size=w)]
        text = " ".join(toks) + "."
        if text not in seen:
            seen.add(text)
            out.append(text)
    return out


@dataclass(frozen=True)
class MicroSetup(ResultMixin):
    root: str
    base: str  # fresh (untrained) model folder: config + tokenizer the shadows start from
    target: str  # the audited model folder
    members: str  # members.jsonl
    nonmembers: str  # nonmembers.jsonl
    recipe: object  # the ShadowRecipe the target was trained with
    n_members: int
    n_nonmembers: int


def micro_recipe(base, *, steps: int = 80, batch_size: int = 64, lr: float = 1e-2, seed: int = 0):
    """The micro recipe: from scratch, ``steps`` AdamW steps of ``batch_size`` x 32 tokens at ``lr``."""
    from ..models.loader import folder_fingerprint
    from .shadows import ShadowRecipe

    return ShadowRecipe(mode="scratch", base=str(base), base_fingerprint=folder_fingerprint(Path(base)), steps=steps,
                        epochs=None, batch_size=batch_size, seq_len=32, lr=lr, warmup_steps=5, seed=seed)


def build_micro_lira(out_dir, *, n_population: int = 400, steps: int = 80, batch_size: int = 64, lr: float = 1e-2,
                     seed: int = 0, words: int = 12, n_embd: int = 32, n_layer: int = 1) -> MicroSetup:
    """Build (or reuse, if already built with these arguments) the micro LiRA set-up in ``out_dir``:
    a BPE tokenizer and an untrained 1-layer GPT-2 (``base/``), the population split in random
    halves (members planted once each in the target's training set), and the target trained on the
    members by :func:`micro_recipe` (``target/``)."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from ..train.toy import _train_tokenizer
    from .shadows import save_model_folder, train_on_texts

    root = Path(out_dir)
    args = {"n_population": n_population, "steps": steps, "batch_size": batch_size, "lr": lr, "seed": seed, "words": words, "n_embd": n_embd,
            "n_layer": n_layer, "version": 1}
    done = root / "micro.json"
    base, target = root / "base", root / "target"
    if not (done.exists() and json.loads(done.read_text()) == args):
        texts = varied_difficulty_texts(n_population, seed=seed, words=words)
        tok = _train_tokenizer(texts, 1000)
        torch.manual_seed(seed)
        cfg = GPT2Config(vocab_size=len(tok), n_positions=64, n_embd=n_embd, n_layer=n_layer, n_head=2,
                         bos_token_id=0, eos_token_id=0, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
        save_model_folder(GPT2LMHeadModel(cfg), tok, base)
        rng = np.random.default_rng([seed, 3])
        is_member = np.zeros(n_population, dtype=bool)
        is_member[rng.permutation(n_population)[: n_population // 2]] = True
        recipe = micro_recipe(base, steps=steps, batch_size=batch_size, lr=lr, seed=seed)
        # the target is trained like shadow "-1": same recipe, its own seed
        model, _, _ = train_on_texts(recipe, [t for t, m in zip(texts, is_member) if m], seed=seed, sep_ids=[0],
                                     tokenizer=tok)
        save_model_folder(model, tok, target)
        for name, keep in (("members", is_member), ("nonmembers", ~is_member)):
            rows = [json.dumps({"id": f"{name}-{i}", "text": t}) for i, (t, k) in enumerate(zip(texts, keep)) if k]
            (root / f"{name}.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
        done.write_text(json.dumps(args))
    recipe = micro_recipe(base, steps=steps, batch_size=batch_size, lr=lr, seed=seed)
    nm = sum(1 for _ in open(root / "members.jsonl", encoding="utf-8"))
    nn = sum(1 for _ in open(root / "nonmembers.jsonl", encoding="utf-8"))
    return MicroSetup(root=str(root), base=str(base), target=str(target), members=str(root / "members.jsonl"),
                      nonmembers=str(root / "nonmembers.jsonl"), recipe=recipe, n_members=nm, n_nonmembers=nn)
