"""The micro LiRA set-up shared by the tests and ``benchmarks/bench_lira.py``.

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

from ..jsonutil import ResultMixin
from ..models.loader import folder_fingerprint
from ..train.corpus import MarkovZipf
from ..train.toy import _train_tokenizer
from ..validate import integer
from .shadows import ShadowRecipe, save_model_folder, train_on_texts

__all__ = ["varied_difficulty_texts", "MicroSetup", "micro_recipe", "build_micro_lira"]


def varied_difficulty_texts(
    n: int, *, seed: int = 0, words: int = 8, n_words: int = 150
) -> list[str]:
    """``n`` distinct short records of three difficulties, in rotation: a short cycle of 2-3
    frequent words (easy), a Markov-Zipf passage (medium), uniform word salad (hard).

    >>> varied_difficulty_texts(3, words=4)
    ['deaseaki lea deaseaki lea.', 'nebabe totai keathu bideatochi.', 'moudu tethomai vekisuse gamaifoume.']
    """
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
            cyc = [
                gen.words[j] for j in rng.choice(30, size=int(rng.integers(2, 4)), replace=False)
            ]
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


def micro_recipe(
    base: str | Path, *, steps: int = 80, batch_size: int = 64, lr: float = 1e-2, seed: int = 0
) -> ShadowRecipe:
    """The micro recipe: from scratch, ``steps`` AdamW steps of ``batch_size`` x 32 tokens at ``lr``.

    >>> import tempfile
    >>> base = Path(tempfile.mkdtemp())
    >>> _ = (base / "config.json").write_text("{}")  # a model folder (only its fingerprint is read)
    >>> r = micro_recipe(base, steps=10)
    >>> r.mode, r.steps, r.seq_len, r.base_fingerprint[:12]
    ('scratch', 10, 32, '8ef2fb2b00c4')
    """
    return ShadowRecipe(
        mode="scratch",
        base=str(base),
        base_fingerprint=folder_fingerprint(Path(base)),
        steps=steps,
        epochs=None,
        batch_size=batch_size,
        seq_len=32,
        lr=lr,
        warmup_steps=5,
        seed=seed,
    )


def build_micro_lira(
    out_dir: str | Path,
    *,
    n_population: int = 400,
    steps: int = 80,
    batch_size: int = 64,
    lr: float = 1e-2,
    seed: int = 0,
    words: int = 12,
    n_embd: int = 32,
    n_layer: int = 1,
) -> MicroSetup:
    """Build (or reuse, if already built with these arguments) the micro LiRA set-up in ``out_dir``:
    a BPE tokenizer and an untrained 1-layer GPT-2 (``base/``), the population split in random
    halves (members planted once each in the target's training set), and the target trained on the
    members by :func:`micro_recipe` (``target/``).

    >>> s = build_micro_lira("runs/micro", n_population=40, steps=10)  # trains for a few seconds  # doctest: +SKIP
    >>> s.n_members, s.n_nonmembers, Path(s.target).name  # doctest: +SKIP
    (20, 20, 'target')
    """
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    root = Path(out_dir)
    args = {
        "n_population": n_population,
        "steps": steps,
        "batch_size": batch_size,
        "lr": lr,
        "seed": seed,
        "words": words,
        "n_embd": n_embd,
        "n_layer": n_layer,
        "version": 1,
    }
    done = root / "micro.json"
    base, target = root / "base", root / "target"
    if not (done.exists() and json.loads(done.read_text()) == args):
        texts = varied_difficulty_texts(n_population, seed=seed, words=words)
        tok = _train_tokenizer(texts, 1000)
        torch.manual_seed(seed)
        cfg = GPT2Config(
            vocab_size=len(tok),
            n_positions=64,
            n_embd=n_embd,
            n_layer=n_layer,
            n_head=2,
            bos_token_id=0,
            eos_token_id=0,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
        )
        save_model_folder(GPT2LMHeadModel(cfg), tok, base)
        rng = np.random.default_rng([seed, 3])
        is_member = np.zeros(n_population, dtype=bool)
        is_member[rng.permutation(n_population)[: n_population // 2]] = True
        recipe = micro_recipe(base, steps=steps, batch_size=batch_size, lr=lr, seed=seed)
        # the target is trained like shadow "-1": same recipe, its own seed
        model, _, _ = train_on_texts(
            recipe,
            [t for t, m in zip(texts, is_member) if m],
            seed=seed,
            sep_ids=[0],
            tokenizer=tok,
        )
        save_model_folder(model, tok, target)
        for name, keep in (("members", is_member), ("nonmembers", ~is_member)):
            rows = [
                json.dumps({"id": f"{name}-{i}", "text": t})
                for i, (t, k) in enumerate(zip(texts, keep))
                if k
            ]
            (root / f"{name}.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
        done.write_text(json.dumps(args))
    recipe = micro_recipe(base, steps=steps, batch_size=batch_size, lr=lr, seed=seed)
    nm = sum(1 for _ in open(root / "members.jsonl", encoding="utf-8"))
    nn = sum(1 for _ in open(root / "nonmembers.jsonl", encoding="utf-8"))
    return MicroSetup(
        root=str(root),
        base=str(base),
        target=str(target),
        members=str(root / "members.jsonl"),
        nonmembers=str(root / "nonmembers.jsonl"),
        recipe=recipe,
        n_members=nm,
        n_nonmembers=nn,
    )
