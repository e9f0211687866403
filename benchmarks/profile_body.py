#!/usr/bin/env python
"""The transformer body on the CPU (issue 30): what a faster body could keep bit for bit.

For each model, ``--windows`` windows of ``--prefix`` + ``--suffix`` tokens (bench_scoring's
sliding windows) go through the body (``forward_hidden``) at ``--threads`` threads:

  1. one window per call against stacked calls of B windows ([B, T], the engine's CPU schedule):
     whether every window's hidden states are bit-identical (torch.equal) to its own call, for B
     in 2, 4, 8, 16, and the CPU and wall seconds of per-window, B = 4 and B = 16 (interleaved);
  2. the last decoder layer's cost (the body with and without it): the bound on what computing
     that layer only at the scored rows could save (about half of it), and whether the pieces
     such a layer would run on a subset of rows (its MLP; attention with the scored queries
     only, a boolean causal mask) give those rows' bits;
  3. the process's minor page faults and system time per body pass with glibc's default
     thresholds and after memclaim's ``retain_freed_memory`` (memclaim/scoring/heap.py; it is
     per-process and cannot be undone, so the default runs first here, not interleaved:
     bench_scoring.py compares whole processes).

CPU seconds are the process's (all threads): steadier than wall time on a shared machine.

    python benchmarks/profile_body.py                       # SmolLM2 and Gemma 3 270M
    python benchmarks/profile_body.py --models toy --reps 5
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_scoring import load_windows  # noqa: E402


def timed(fns: dict, reps: int) -> dict:
    """Median (wall, CPU) seconds of each callable, the callables interleaved in every rep."""
    res: dict = {k: ([], []) for k in fns}
    for _ in range(reps):
        for k, f in fns.items():
            w, c = time.perf_counter(), time.process_time()
            f()
            res[k][0].append(time.perf_counter() - w)
            res[k][1].append(time.process_time() - c)
    return {k: (statistics.median(w), statistics.median(c)) for k, (w, c) in res.items()}


def profile(name: str, args) -> None:
    import torch
    import torch.nn.functional as F

    import memclaim.train  # noqa: F401  (registers the tiny GPT "toy")
    from memclaim.models import load_model
    from memclaim.scoring.heap import retain_freed_memory

    torch.set_num_threads(args.threads)
    m = load_model(name, load_weights=True)
    lm = m.lm
    prompts, suffixes = load_windows(m, args.windows, args.prefix, args.suffix)
    ids = torch.tensor([p + s[:-1] for p, s in zip(prompts, suffixes)])  # [B, T]
    n, T = ids.shape
    print(f"\n== {name}: {n} windows of {T} body tokens, {torch.get_num_threads()} threads")
    with torch.inference_mode():
        lm.forward_hidden(ids[:2])
        one = [lm.forward_hidden(ids[i : i + 1])[0][0] for i in range(n)]
        for B in (2, 4, 8, 16):
            if B > n:
                break
            same = all(
                torch.equal(h, one[a + j])
                for a in range(0, n, B)
                for j, h in enumerate(lm.forward_hidden(ids[a : a + B])[0])
            )
            print(f"  stacked [B={B:2}, T] bit-identical to one window per call: {same}")

        def stacked(B):
            return lambda: [lm.forward_hidden(ids[a : a + B]) for a in range(0, n, B)]

        fns = {"one window per call": lambda: [lm.forward_hidden(ids[i : i + 1]) for i in range(n)]}
        fns.update({f"stacked, B = {B}": stacked(B) for B in (4, 16) if B <= n})
        for k, (w, c) in timed(fns, args.reps).items():
            print(f"  body, {k:22} wall {w:7.3f} s   CPU {c:7.3f} s")

        body = lm.body
        layers = getattr(body, "layers", None) or getattr(body, "h", None)
        attr = "layers" if hasattr(body, "layers") else "h"
        if layers is not None and len(layers) > 1:
            short = torch.nn.ModuleList(list(layers)[:-1])

            def run(mods):
                setattr(body, attr, mods)
                try:
                    lm.forward_hidden(ids)
                finally:
                    setattr(body, attr, layers)

            t = timed({"all": lambda: run(layers), "short": lambda: run(short)}, args.reps)
            last = t["all"][1] - t["short"][1]
            print(
                f"  last of {len(layers)} layers: {last:.3f} CPU s of {t['all'][1]:.3f} "
                f"({100 * last / t['all'][1]:.1f}%; scored rows only would save about "
                f"{100 * last / t['all'][1] * args.suffix / T:.1f}% of the body)"
            )
            mlp = getattr(layers[-1], "mlp", None)
            S, Lp = len(suffixes[0]), len(prompts[0])
            rows = slice(Lp - 1, Lp - 1 + S)
            if mlp is not None:
                x = torch.randn(n * T, lm.config.hidden_size)
                print(
                    f"  MLP at the scored rows == those rows of all: {torch.equal(mlp(x[rows]), mlp(x)[rows])}"
                )
            q = torch.randn(n, 4, T, 64)
            k, v = torch.randn_like(q), torch.randn_like(q)
            causal = torch.ones(T, T, dtype=torch.bool).tril()
            full = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            part = F.scaled_dot_product_attention(
                q[:, :, Lp - 1 :], k, v, attn_mask=causal[Lp - 1 :]
            )
            print(
                f"  attention with the scored queries only == those rows: {torch.equal(part, full[:, :, Lp - 1 :])}"
            )

        def faults(label):
            lm.forward_hidden(ids)
            r0, c = resource.getrusage(resource.RUSAGE_SELF), time.process_time()
            lm.forward_hidden(ids)
            r1 = resource.getrusage(resource.RUSAGE_SELF)
            print(
                f"  body pass, {label:30} minor faults {r1.ru_minflt - r0.ru_minflt:8,}  "
                f"system {r1.ru_stime - r0.ru_stime:.2f} s  CPU {time.process_time() - c:.2f} s"
            )

        faults("glibc's default thresholds")
        faults(f"after retain_freed_memory: {retain_freed_memory()}")


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--models", default="smollm2,gemma3-270m")
    ap.add_argument("--windows", type=int, default=16)
    ap.add_argument("--prefix", type=int, default=50)
    ap.add_argument("--suffix", type=int, default=50)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import memclaim  # noqa: F401  (MKL strict mode before the first matmul, as every memclaim run)

    print(f"load: {os.getloadavg()[0]:.2f} (1 min) on {os.cpu_count()} CPUs")
    for name in args.models.split(","):
        profile(name, args)
    print(f"load: {os.getloadavg()[0]:.2f} (1 min)")


if __name__ == "__main__":
    main()
