"""The CPU engine's recorded scores: cases, models and the file that holds them.

``tests/data/fixtures/engine_cpu_v1.npz`` was written ONCE by the engine as it was before the
GPU schedule was added (commit recorded in the file's meta), with::

    PYTHONPATH=src python tests/engine_fixture.py --write tests/data/fixtures/engine_cpu_v1.npz

tests/scoring/test_engine_fixture.py asserts that today's CPU schedule reproduces every array bit for
bit (np.array_equal): CPU scores stored before a change stay valid after it. Never rewrite the
file with a newer engine (``--write`` refuses to overwrite); a deliberate change of CPU numerics
needs a new version (engine_cpu_v2.npz) and a new procedure key.

Models (no download, no training, deterministic on every machine):
  * ``tiny``: a 2-layer Llama (GQA, RoPE, RMSNorm, SwiGLU) with weights drawn from numpy's PCG64,
    whose unembedding has duplicated rows, so logits tie exactly (top-k boundary ties, argmax ties);
  * ``synthetic``: memclaim's float64 SyntheticLM with quantized logits (many exact ties);
  * ``smollm2``: the real tier's model (windows stored as ids, so no tokenizer is needed).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from _paths import DATA, ROOT

FIXTURE = DATA / "fixtures" / "engine_cpu_v1.npz"
FIELDS = (
    "logq",
    "token_logq",
    "greedy_match",
    "min_margin",
    "token_logprob",
    "token_mean",
    "token_std",
    "token_rank",
)
POLICY_SPECS = (
    "full",
    "greedy",
    "top-k:1",
    "top-k:3",
    "top-k:40",
    "top-p:0.8",
    "temperature:0.7",
    "top-k:40,temperature:0.7",
    "top-p:0.95,temperature:1.3",
    "top-k:5,top-p:0.9",
)
TINY_VOCAB = 96
TINY_DUPLICATES = 24  # unembedding rows 72..95 copy rows 0..23: their logits tie exactly


def tiny_llama():
    """The ``tiny`` model: a Llama-architecture LM with numpy-seeded weights (float32)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from memclaim.models.hf import HFLanguageModel

    cfg = LlamaConfig(
        vocab_size=TINY_VOCAB,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        tie_word_embeddings=False,
        rms_norm_eps=1e-6,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg).float().eval()
    rng = np.random.default_rng(20240601)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if p.ndim == 1:  # norms
                vals = 1.0 + 0.1 * rng.standard_normal(p.shape)
            elif "lm_head" in name:
                vals = 0.35 * rng.standard_normal(p.shape)
            else:
                vals = 0.12 * rng.standard_normal(p.shape)
            p.copy_(torch.from_numpy(vals.astype(np.float32)))
        w = model.lm_head.weight
        w[TINY_VOCAB - TINY_DUPLICATES :] = w[:TINY_DUPLICATES]
    model.requires_grad_(False)
    return HFLanguageModel(model, name="tiny-llama", fingerprint="tiny-llama-fixture")


def synthetic_lm():
    from memclaim.models.base import SyntheticLM

    return SyntheticLM(vocab_size=16, seed=11, tie_levels=4)


def _greedy_continuation(lm, prompt, n):
    import torch

    ctx = list(prompt)
    for _ in range(n):
        h, _ = lm.forward_hidden(torch.tensor([ctx]))
        ctx.append(int(lm.logits(h[0, -1:])[0].argmax()))
    return ctx[len(prompt) :]


def _random_windows(rng, vocab, n, lp, ls):
    return (
        [[0] + [int(v) for v in rng.integers(1, vocab, lp)] for _ in range(n)],
        [[int(v) for v in rng.integers(1, vocab, ls)] for _ in range(n)],
    )


def tiny_cases(lm, vocab):
    """(name, prompts, suffixes, logit_chunk_bytes) for a small model."""
    rng = np.random.default_rng(7)
    cases = []
    p, s = _random_windows(rng, vocab, 6, 20, 12)
    s[0] = _greedy_continuation(lm, p[0], 12)  # greedy scores 0 somewhere
    s[3] = s[3][:4] + _greedy_continuation(lm, p[3] + s[3][:4], 8)
    cases.append(("equal", p, s, None))
    p, s = _random_windows(rng, vocab, 4, 2, 3)  # shorter than MIN_GEMM_ROWS
    cases.append(("short", p, s, None))
    p = [[0] + [int(v) for v in rng.integers(1, vocab, n)] for n in (3, 17, 9, 1)]
    s = [[int(v) for v in rng.integers(1, vocab, 8)] for _ in p]
    cases.append(("padded", p, s, None))
    p, s = _random_windows(rng, vocab, 3, 6, 9)
    cases.append(("chunked", p, s, 4 * vocab * 4))  # 4 rows per chunk: 9 = 4 + 4 + 1
    return cases


def smollm2_windows():
    """Windows of the committed Genesis excerpt, tokenized by SmolLM2 (used to write the file)."""
    from memclaim.models import load_model
    from memclaim.text.windows import sliding_windows

    m = load_model("smollm2")
    text = (DATA / "genesis_1_3.txt").read_text()
    ws = list(
        sliding_windows(text, m.tokenizer, prefix_tokens=24, suffix_tokens=16, stride=37).windows
    )[:5]
    prompts = [list(m.sot_ids) + list(w.prefix_ids) for w in ws]
    return prompts, [list(w.suffix_ids) for w in ws]


def smollm2_cases():
    p, s = smollm2_windows()
    cases = [("equal", p, s, None)]
    pp = [p[0][:5], p[1], p[2][:13]]
    cases.append(("padded", pp, [x[:6] for x in s[:3]], None))
    cases.append(("chunked", p[:2], s[:2], 5 * 49152 * 4))  # 5 rows per chunk: 16 = 5+5+5+1
    return cases


def pack(cases):
    """Cases -> flat arrays (ragged prompts stored padded with their lengths)."""
    out = {}
    for name, prompts, suffixes, chunk in cases:
        L = max(len(x) for x in prompts)
        ids = np.full((len(prompts), L), -1, dtype=np.int64)
        for i, x in enumerate(prompts):
            ids[i, : len(x)] = x
        out[f"{name}/prompts"] = ids
        out[f"{name}/prompt_len"] = np.array([len(x) for x in prompts], dtype=np.int64)
        out[f"{name}/suffixes"] = np.array(suffixes, dtype=np.int64)
        out[f"{name}/chunk"] = np.array(-1 if chunk is None else chunk, dtype=np.int64)
    return out


def unpack(arrays, prefix):
    """The cases stored under ``prefix`` ('tiny', 'synthetic', 'smollm2')."""
    names = sorted(
        {k.split("/")[1] for k in arrays if k.startswith(prefix + "/") and k.endswith("/prompts")}
    )
    cases = []
    for n in names:
        ids = arrays[f"{prefix}/{n}/prompts"]
        lens = arrays[f"{prefix}/{n}/prompt_len"]
        chunk = int(arrays[f"{prefix}/{n}/chunk"])
        cases.append(
            (
                n,
                [ids[i, : lens[i]].tolist() for i in range(len(lens))],
                arrays[f"{prefix}/{n}/suffixes"].tolist(),
                None if chunk < 0 else chunk,
            )
        )
    return cases


def score_cases(lm, cases, *, engine_kwargs=None):
    """Score every case in one batch each with the engine; {case/field: array}."""
    from memclaim.decoding import parse_policies
    from memclaim.scoring.engine import TeacherForcingEngine

    out = {}
    for name, prompts, suffixes, chunk in cases:
        kw = dict(engine_kwargs or {})
        if chunk is not None:
            kw["logit_chunk_bytes"] = chunk
        r = TeacherForcingEngine(lm, parse_policies(list(POLICY_SPECS)), **kw).score_batch(
            prompts, suffixes
        )
        for f in FIELDS:
            out[f"{name}/{f}"] = getattr(r, f)
    return out


def _meta():
    import platform

    import torch
    import transformers

    root = ROOT
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True
    ).stdout.strip()
    cpu = next(
        (
            ln.split(":", 1)[1].strip()
            for ln in Path("/proc/cpuinfo").read_text().splitlines()
            if ln.startswith("model name")
        ),
        platform.processor(),
    )
    return {
        "engine_commit": commit,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "numpy": np.__version__,
        "cpu": cpu,
        "threads": torch.get_num_threads(),
        "policies": list(POLICY_SPECS),
        "fields": list(FIELDS),
    }


def write(path: Path):
    import torch

    import memclaim  # noqa: F401  (MKL strict mode before the first matmul)

    if path.exists():
        raise SystemExit(
            f"{path} exists; the fixture is written once, by the engine before a change"
        )
    torch.set_num_threads(2)
    arrays = {}
    tiny = tiny_llama()
    tc = tiny_cases(tiny, TINY_VOCAB)
    arrays.update({f"tiny/{k}": v for k, v in pack(tc).items()})
    arrays.update({f"tiny/{k}": v for k, v in score_cases(tiny, tc).items()})
    syn = synthetic_lm()
    sc = tiny_cases(syn, syn.vocab_size)
    arrays.update({f"synthetic/{k}": v for k, v in pack(sc).items()})
    arrays.update({f"synthetic/{k}": v for k, v in score_cases(syn, sc).items()})
    from memclaim.models import load_model

    smol = load_model("smollm2", load_weights=True).lm
    mc = smollm2_cases()
    arrays.update({f"smollm2/{k}": v for k, v in pack(mc).items()})
    arrays.update({f"smollm2/{k}": v for k, v in score_cases(smol, mc).items()})
    arrays["meta"] = np.array(json.dumps(_meta()))
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, **arrays)
    print(f"wrote {path}: {len(arrays)} arrays; meta {arrays['meta']}")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "--write":
        raise SystemExit(__doc__)
    write(Path(sys.argv[2]))
