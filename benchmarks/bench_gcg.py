#!/usr/bin/env python
"""GCG steps per second: memclaim's search (memclaim.scoring.gcg) against a straightforward
implementation of the same algorithm written here, on the same model, target, seed and work.

The reference is GCG as the ACR release and llm-attacks write it: one forward and one backward pass
per step with the prompt as a one-hot matrix times the embedding matrix (full [1, L, V] logits),
the candidate batch (single-token swaps from the gradient's top-k, positions spread evenly) in one
batched forward pass with full [B, L, V] logits and cross-entropy over the target slice, every
candidate evaluated (duplicates too), move to the best. memclaim computes the same gradient from the
embedding's gradient (one [P, D] x [D, V] product), evaluates each distinct candidate once, runs
the unembedding only on the B*T rows that predict a target token, and never builds a [B, L, V]
tensor. The two draw candidates from the same seeded generator; they agree on the first step's
loss (printed) and may drift apart after it through float rounding in the top-k, so the timing
compares the same amount of work per step, not identical trajectories.

FLOPs counted are the ones that must be done per step: the body over every token of the B
candidates (dense layers and attention, as bench_scoring.model_flops_per_window) and the
unembedding over their B*T target rows, plus the gradient pass (3x a forward of one sequence) and
the [P, D] x [D, V] gradient product. Each measurement runs in its own subprocess; the fp32 matmul
peak is measured in the same run.

    python benchmarks/bench_gcg.py                                   # toy and SmolLM2, batch 128
    python benchmarks/bench_gcg.py --models toy --batch 512 --top-k 256 --steps 10
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_scoring import RSSSampler, matmul_peak_gflops, model_flops_per_window  # noqa: E402

TARGET = "In the beginning God created the heaven and the earth."


# --------------------------------------------------------------------------- the reference
def reference_gcg(hf_model, prefix, prompt, target, *, steps, top_k, batch, allowed, seed):
    """GCG written out plainly (see the module docstring); returns (first-step loss, losses, unique counts)."""
    import torch
    import torch.nn.functional as F

    W = hf_model.get_input_embeddings().weight  # [V, D]
    V = W.shape[0]
    S, P, T = len(prefix), len(prompt), len(target)
    gen = torch.Generator().manual_seed(seed)
    ids = torch.tensor(prefix + prompt + target)
    tgt = torch.tensor(target)
    losses = []
    for _ in range(steps):
        one_hot = F.one_hot(ids[S : S + P], V).to(W.dtype).requires_grad_(True)  # [P, V]
        emb = W[ids].detach().clone()
        emb = torch.cat([emb[:S], one_hot @ W, emb[S + P :]]).unsqueeze(0)  # [1, L, D]
        logits = hf_model(inputs_embeds=emb).logits  # [1, L, V]
        loss = F.cross_entropy(logits[0, S + P - 1 : S + P + T - 1], tgt)
        (grad,) = torch.autograd.grad(loss, one_hot)  # [P, V]
        with torch.no_grad():
            g = grad.masked_fill(~allowed.view(1, V), float("inf"))
            top = torch.topk(-g, top_k, dim=1).indices
            pos = (torch.arange(batch) * P) // batch
            pick = torch.randint(0, top_k, (batch,), generator=gen)
            cands = ids.repeat(batch, 1)  # [B, L]
            cands[torch.arange(batch), S + pos] = top[pos, pick]
            out = hf_model(input_ids=cands).logits  # [B, L, V]
            ce = F.cross_entropy(
                out[:, S + P - 1 : S + P + T - 1].transpose(1, 2),
                tgt.repeat(batch, 1),
                reduction="none",
            ).mean(dim=1)  # [B]
            j = int(torch.argmin(ce))
            ids = cands[j]
            losses.append(float(ce[j]))
    return losses


# --------------------------------------------------------------------------- worker
def worker(args):
    import torch

    import memclaim.train  # noqa: F401 - registers "toy"
    from memclaim.models import load_model
    from memclaim.scoring.gcg import GCGSettings, PromptSearchModel, gcg_search

    torch.set_num_threads(args.threads)
    m = load_model(args.model, load_weights=True)
    psm = PromptSearchModel(m.lm, m.tokenizer)
    target = m.tokenizer.encode(TARGET)
    prefix = list(m.sot_ids)
    init = psm.random_prompt(args.prompt, torch.Generator().manual_seed(args.seed), retokenize=True)
    if args.impl == "reference":
        fn = lambda n: reference_gcg(
            m.lm.model,
            prefix,
            init,
            target,
            steps=n,
            top_k=args.top_k,  # noqa: E731
            batch=args.batch,
            allowed=psm.allowed,
            seed=args.seed,
        )
    else:
        # no retokenization filter: the reference has none (the same candidates, the same work)
        s = GCGSettings(
            top_k=args.top_k,
            batch_size=args.batch,
            steps=args.steps,
            seed=args.seed,
            retokenize=False,
        )

        def fn(n):
            out = gcg_search(
                psm,
                prefix_ids=prefix,
                target_ids=target,
                prompt_len=args.prompt,
                settings=s,
                criterion="prob:0.999999",
                seed=args.seed,
                steps=n,
                init_ids=init,
            )
            fn.evaluated = out.candidates_evaluated
            return list(out.trajectory)

    fn(1)  # warm-up outside the measurement
    with RSSSampler() as rss:
        t = time.perf_counter()
        losses = fn(args.steps)
        dt = time.perf_counter() - t
    if args.impl != "reference":
        # gcg_search ends with the exact evaluation of the prompt it returns (a teacher-forced pass and
        # greedy generation), which the reference does not do: timed once more and left out
        t = time.perf_counter()
        psm.evaluate(prefix, init, target)
        dt -= time.perf_counter() - t
    cfg = m.lm.config
    L = len(prefix) + args.prompt + len(target)
    body = model_flops_per_window(
        cfg, m.lm.vocab_size, len(prefix) + args.prompt, len(target)
    )  # one sequence
    d = cfg.hidden_size
    flops_step = args.batch * body + 3 * body + 2 * args.prompt * d * m.lm.vocab_size
    res = {
        "impl": args.impl,
        "model": args.model,
        "batch": args.batch,
        "top_k": args.top_k,
        "prompt": args.prompt,
        "target": len(target),
        "seq": L,
        "steps": args.steps,
        "seconds": dt,
        "steps_per_s": args.steps / dt,
        "gflops": flops_step * args.steps / dt / 1e9,
        "rss_start_mb": rss.start_rss / 2**20,
        "rss_peak_mb": rss.peak / 2**20,
        "losses": losses,
        "evaluated_per_step": getattr(fn, "evaluated", args.batch * args.steps) / args.steps,
    }
    print("RESULT " + json.dumps(res))


def run_worker(**kw):
    cmd = [sys.executable, __file__, "--worker"] + [
        x for k, v in kw.items() for x in (f"--{k.replace('_', '-')}", str(v))
    ]
    env = dict(os.environ, OMP_WAIT_POLICY=os.environ.get("OMP_WAIT_POLICY", "PASSIVE"))
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"worker failed: {' '.join(cmd)}\n{out.stderr[-3000:]}")


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--impl", default="memclaim", help=argparse.SUPPRESS)
    ap.add_argument("--model", default="toy", help=argparse.SUPPRESS)
    ap.add_argument("--models", default="toy,smollm2")
    ap.add_argument("--batch", type=int, default=128, help="candidates per step (GCG: 512)")
    ap.add_argument("--top-k", type=int, default=256)
    ap.add_argument("--prompt", type=int, default=10, help="prompt tokens")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=1, help="interleaved repeats (medians reported)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    import statistics

    import torch

    torch.set_num_threads(args.threads)
    peak = matmul_peak_gflops()
    print(f"fp32 matmul peak (2048^2, {args.threads} threads): {peak:.1f} GFLOP/s")
    rows = []
    for model in args.models.split(","):
        common = dict(
            model=model,
            batch=args.batch,
            top_k=args.top_k,
            prompt=args.prompt,
            steps=args.steps,
            seed=args.seed,
            threads=args.threads,
        )
        runs = {"memclaim": [], "reference": []}
        for _ in range(args.repeats):  # interleaved: the machine's load hits both alike
            runs["memclaim"].append(run_worker(impl="memclaim", **common))
            runs["reference"].append(run_worker(impl="reference", **common))
        med = {
            k: {
                f: statistics.median(r[f] for r in v)
                for f in ("steps_per_s", "gflops", "rss_peak_mb", "seconds")
            }
            | {
                "losses": v[0]["losses"],
                "seq": v[0]["seq"],
                "target": v[0]["target"],
                "evaluated_per_step": v[0]["evaluated_per_step"],
            }
            for k, v in runs.items()
        }
        rows.append({"model": model, **med})
        mine, ref = med["memclaim"], med["reference"]
        print(
            f"\n== {model}: prompt {args.prompt} + target {mine['target']} tokens (+ start-of-text), "
            f"batch {args.batch}, top-k {args.top_k}, {args.steps} steps, median of {args.repeats}"
        )
        for name, r in (("memclaim", mine), ("reference", ref)):
            print(
                f"  {name:9s} {r['steps_per_s']:7.3f} steps/s  {r['gflops']:6.1f} GFLOP/s "
                f"({100 * r['gflops'] / peak:4.1f}% of fp32 peak)  peak RSS {r['rss_peak_mb']:7.0f} MB  "
                f"candidates scored per step {r['evaluated_per_step']:.0f}"
            )
        print(
            f"  speed-up x{mine['steps_per_s'] / ref['steps_per_s']:.2f}; first-step loss memclaim "
            f"{mine['losses'][0]:.5f} vs reference {ref['losses'][0]:.5f}"
        )
    if args.json:
        print(json.dumps({"fp32_peak_gflops": peak, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
