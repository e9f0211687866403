#!/usr/bin/env python
"""Scoring throughput: memclaim's engine against a naive reference on the same windows.

The reference follows the public book-extraction scripts: full logits for the batch as a
[batch, time, vocab] float tensor, temperature and top-k masking on the full tensor per policy,
log-softmax, and a Python loop over suffix tokens. memclaim runs the body over every token and
the unembedding only at the scored positions, once for all policies.

Each measurement runs in its own subprocess (peak RSS is per process); RSS is sampled every
5 ms while scoring, after the model is loaded from the cached safetensors folder. FLOPs counted
are the ones that must be done: the body over every token (dense layers + attention scores and
values) and the unembedding over scored positions only. The fp32 matmul peak is measured in
the same run.

    python benchmarks/bench_scoring.py                        # SmolLM2 + Gemma 3 270M, float32
    python benchmarks/bench_scoring.py --models smollm2 --windows 32 --bf16 --near-verbatim
    python benchmarks/bench_scoring.py --census               # + census-only (log q, greedy, margin)
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
POLICIES = ("greedy", "top-k:40", "temperature:0.7")


# --------------------------------------------------------------------------- helpers
class RSSSampler:
    """Peak resident set size (bytes) of this process while active, sampled from /proc."""

    def __init__(self, interval=0.005):
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._page = os.sysconf("SC_PAGE_SIZE")

    def _rss(self):
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * self._page

    def __enter__(self):
        self.start_rss = self._rss()
        self.peak = self.start_rss
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()
        return self

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, self._rss())
            time.sleep(self.interval)

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, self._rss())


def matmul_peak_gflops(dtype="float32", n=2048, reps=8):
    import torch

    dt = getattr(torch, dtype)
    a, b = torch.randn(n, n, dtype=dt), torch.randn(n, n, dtype=dt)
    a @ b
    best = 0.0
    for _ in range(3):
        t = time.perf_counter()
        for _ in range(reps):
            a @ b
        best = max(best, reps * 2 * n ** 3 / (time.perf_counter() - t) / 1e9)
    return best


def model_flops_per_window(config, vocab, prompt_len, suffix_len):
    """FLOPs that must be done for one window: the body over prompt + suffix - 1 tokens and the
    unembedding over the suffix positions."""
    d = config.hidden_size
    n_layers = config.num_hidden_layers
    T = prompt_len + suffix_len - 1
    heads = config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or d // heads
    kv_heads = getattr(config, "num_key_value_heads", heads) or heads
    inter = getattr(config, "intermediate_size", None) or 4 * d
    gated = getattr(config, "hidden_act", getattr(config, "hidden_activation", "")) in (
        "silu", "gelu_pytorch_tanh") and config.model_type != "gpt2"
    attn_proj = d * heads * head_dim * 2 + d * kv_heads * head_dim * 2  # q, o and k, v
    mlp = d * inter * (3 if gated else 2)
    dense = 2 * T * n_layers * (attn_proj + mlp)
    attn = 2 * 2 * n_layers * heads * head_dim * T * (T + 1) / 2  # causal QK^T and AV
    unembed = 2 * d * vocab * suffix_len
    return dense + attn + unembed


def load_windows(model, n, prefix, suffix):
    from memclaim.text.windows import sliding_windows

    text = (HERE.parent / "tests" / "data" / "genesis_1_3.txt").read_text()
    text = text + "\n\n" + (HERE.parent / "tests" / "data" / "new_genesis_style.txt").read_text()
    ws = sliding_windows(text, model.tokenizer, prefix_tokens=prefix, suffix_tokens=suffix, stride=max(1, prefix // 2))
    wins = list(ws.windows)
    while len(wins) < n:
        wins += wins
    wins = wins[:n]
    prompts = [list(model.sot_ids) + list(w.prefix_ids) for w in wins]
    return prompts, [list(w.suffix_ids) for w in wins]


# --------------------------------------------------------------------------- the two scorers
def reference_scores(hf_model, prompts, suffixes, batch):
    """The naive pattern: [B, T, V] logits, full-tensor masking per policy, Python token loop."""
    import torch

    out = []
    P = len(prompts[0])
    S = len(suffixes[0])
    with torch.inference_mode():
        for a in range(0, len(prompts), batch):
            ids = torch.tensor([p + s for p, s in zip(prompts[a:a + batch], suffixes[a:a + batch])])
            logits = hf_model(ids).logits.float()  # [B, T, V]
            tgt = ids[:, P:]
            res = {}
            for spec in POLICIES:
                x = logits.clone()
                if spec == "greedy":
                    am = x.argmax(-1)
                    ok = torch.ones(ids.shape[0], dtype=torch.bool)
                    for t in range(S):
                        ok &= am[:, P - 1 + t] == tgt[:, t]
                    res[spec] = torch.where(ok, 0.0, float("-inf")).tolist()
                    continue
                if spec.startswith("temperature"):
                    x = x / 0.7
                if spec.startswith("top-k"):
                    kth = torch.topk(x, 40, dim=-1).values[..., -1:]
                    x = x.masked_fill(x < kth, float("-inf"))
                lp = torch.log_softmax(x, dim=-1)
                total = torch.zeros(ids.shape[0], dtype=torch.float64)
                for t in range(S):
                    total += lp[torch.arange(ids.shape[0]), P - 1 + t, tgt[:, t]].double()
                res[spec] = total.tolist()
            out += [[res[s][i] for s in POLICIES] for i in range(ids.shape[0])]
    return out


def memclaim_scores(lm, prompts, suffixes, batch, stats="all", schedule="auto"):
    from memclaim.decoding import parse_policies
    from memclaim.scoring.engine import TeacherForcingEngine

    eng = TeacherForcingEngine(lm, parse_policies(POLICIES), stats=stats, schedule=schedule)
    out = []
    for a in range(0, len(prompts), batch):
        r = eng.score_batch(prompts[a:a + batch], suffixes[a:a + batch])
        out += r.logq.tolist()
    return out


# --------------------------------------------------------------------------- worker
def worker(args):
    import numpy as np
    import torch

    from memclaim.models import load_model

    torch.set_num_threads(args.threads)
    m = load_model(args.model, dtype=args.dtype, load_weights=True)
    prompts, suffixes = load_windows(m, args.windows, args.prefix, args.suffix)
    # warm-up on one batch outside the measurement
    fn = (lambda p, s: reference_scores(m.lm.model, p, s, args.batch)) if args.impl == "reference" else \
        (lambda p, s: memclaim_scores(m.lm, p, s, args.batch, args.stats, args.schedule))
    fn(prompts[: args.batch], suffixes[: args.batch])
    with RSSSampler() as rss:
        t = time.perf_counter()
        scores = fn(prompts, suffixes)
        dt = time.perf_counter() - t
    flops = model_flops_per_window(m.lm.config, m.lm.vocab_size, len(prompts[0]), len(suffixes[0])) * len(prompts)
    res = {"impl": args.impl, "model": args.model, "dtype": args.dtype, "stats": args.stats, "schedule": args.schedule, "windows": len(prompts), "batch": args.batch,
           "seconds": dt, "windows_per_s": len(prompts) / dt, "gflops": flops / dt / 1e9,
           "rss_start_mb": rss.start_rss / 2**20, "rss_peak_mb": rss.peak / 2**20,
           "scores": scores}
    if args.near_verbatim:
        from memclaim.decoding import Policy
        from memclaim.scoring.nearverbatim import near_verbatim_lower_bound

        t = time.perf_counter()
        r = near_verbatim_lower_bound(m.lm, prompts[0], suffixes[0], policy=Policy.parse("top-k:40"),
                                      epsilon=args.nv_epsilon, beam=args.nv_beam)
        res["near_verbatim"] = {"seconds_per_window": time.perf_counter() - t, "epsilon": args.nv_epsilon,
                                "beam": args.nv_beam, "forward_rows": r.forward_rows,
                                "log10_bound": float(r.log_bound / np.log(10)),
                                "log10_verbatim": float(r.log_verbatim / np.log(10))}
    print("RESULT " + json.dumps(res))


def run_worker(**kw):
    cmd = [sys.executable, __file__, "--worker"]
    for k, v in kw.items():
        if isinstance(v, bool):
            if v:
                cmd.append(f"--{k.replace('_', '-')}")
        else:
            cmd += [f"--{k.replace('_', '-')}", str(v)]
    env = dict(os.environ, OMP_WAIT_POLICY=os.environ.get("OMP_WAIT_POLICY", "PASSIVE"))
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"worker failed: {' '.join(cmd)}\n{out.stderr[-3000:]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--impl", default="memclaim", help=argparse.SUPPRESS)
    ap.add_argument("--model", default="smollm2", help=argparse.SUPPRESS)
    ap.add_argument("--models", default="smollm2,gemma3-270m")
    ap.add_argument("--windows", type=int, default=32)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--prefix", type=int, default=50)
    ap.add_argument("--suffix", type=int, default=50)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--bf16", action="store_true", help="also run memclaim in bfloat16 and report the drift")
    ap.add_argument("--near-verbatim", action="store_true", help="also time one near-verbatim window")
    ap.add_argument("--nv-epsilon", type=int, default=5)
    ap.add_argument("--nv-beam", type=int, default=16)
    ap.add_argument("--no-reference", action="store_true")
    ap.add_argument("--stats", default="all", help=argparse.SUPPRESS)
    ap.add_argument("--schedule", default="auto", help=argparse.SUPPRESS)
    ap.add_argument("--census", action="store_true",
                    help="also run memclaim census-only (log q under the policies + greedy flag and margin; "
                         "no full-softmax moments, no ranks), as a census needs")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    import numpy as np
    import torch

    torch.set_num_threads(args.threads)
    peak = matmul_peak_gflops()
    print(f"fp32 matmul peak (2048^2, {args.threads} threads): {peak:.1f} GFLOP/s")
    rows = []
    for model in args.models.split(","):
        common = dict(model=model, windows=args.windows, batch=args.batch, prefix=args.prefix, suffix=args.suffix,
                      threads=args.threads)
        mine = run_worker(impl="memclaim", dtype="float32", near_verbatim=args.near_verbatim,
                          nv_epsilon=args.nv_epsilon, nv_beam=args.nv_beam, **common)
        # flat in the number of windows: the same batch size, twice the windows
        more = run_worker(impl="memclaim", dtype="float32", **dict(common, windows=2 * args.windows))
        row = {"model": model, "memclaim": mine, "memclaim_2x_windows_rss_mb": more["rss_peak_mb"]}
        if args.census:
            cen = run_worker(impl="memclaim", dtype="float32", stats="census", **common)
            row["census"] = cen
            # the census's log q is computed by the same operations as the full run's: same bits
            row["census_bit_identical"] = bool(np.array_equal(np.array(cen["scores"]), np.array(mine["scores"])))
        if not args.no_reference:
            ref = run_worker(impl="reference", dtype="float32", **common)
            a, b = np.array(mine["scores"]), np.array(ref["scores"])
            fin = np.isfinite(a) & np.isfinite(b)
            row["reference"] = ref
            row["agree_max_abs_diff"] = float(np.max(np.abs(a[fin] - b[fin]))) if fin.any() else 0.0
            row["agree_support"] = bool(np.array_equal(np.isfinite(a), np.isfinite(b)))
        if args.bf16:
            bf = run_worker(impl="memclaim", dtype="bfloat16", **common)
            a, b = np.array(mine["scores"]), np.array(bf["scores"])
            fin = np.isfinite(a) & np.isfinite(b)
            drift = np.abs(a - b)[fin]
            row["bfloat16"] = {k: bf[k] for k in ("windows_per_s", "gflops", "rss_peak_mb")}
            row["bfloat16"]["logq_drift_nats"] = {"median": float(np.median(drift)) if drift.size else 0.0,
                                                  "max": float(drift.max()) if drift.size else 0.0,
                                                  "support_changed": int((np.isfinite(a) != np.isfinite(b)).sum())}
        rows.append(row)
        print(f"\n== {model}: {args.windows} windows of {args.prefix}+{args.suffix} tokens, batch {args.batch}, "
              f"policies {', '.join(POLICIES)}")
        print(f"  memclaim   {mine['windows_per_s']:7.2f} windows/s  {mine['gflops']:6.1f} GFLOP/s "
              f"({100 * mine['gflops'] / peak:4.1f}% of fp32 peak)  peak RSS {mine['rss_peak_mb']:7.0f} MB "
              f"(+{mine['rss_peak_mb'] - mine['rss_start_mb']:.0f} MB while scoring; "
              f"{row['memclaim_2x_windows_rss_mb']:.0f} MB with twice the windows)")
        if "reference" in row:
            ref = row["reference"]
            print(f"  reference  {ref['windows_per_s']:7.2f} windows/s  {ref['gflops']:6.1f} GFLOP/s "
                  f"({100 * ref['gflops'] / peak:4.1f}% of fp32 peak)  peak RSS {ref['rss_peak_mb']:7.0f} MB "
                  f"(+{ref['rss_peak_mb'] - ref['rss_start_mb']:.0f} MB while scoring)")
            print(f"  speed-up x{mine['windows_per_s'] / ref['windows_per_s']:.2f}; peak RSS ratio "
                  f"{mine['rss_peak_mb'] / ref['rss_peak_mb']:.2f}; scores agree to "
                  f"{row['agree_max_abs_diff']:.2e} nats (same support: {row['agree_support']})")
        if "census" in row:
            cen = row["census"]
            vs = f"x{cen['windows_per_s'] / row['reference']['windows_per_s']:.2f} vs reference; " \
                if "reference" in row else ""
            print(f"  census     {cen['windows_per_s']:7.2f} windows/s  (stats {cen['stats']}: {vs}"
                  f"x{cen['windows_per_s'] / mine['windows_per_s']:.2f} vs every statistic; log q bit-identical "
                  f"to the full run: {row['census_bit_identical']})  peak RSS {cen['rss_peak_mb']:7.0f} MB")
        if "bfloat16" in row:
            bf = row["bfloat16"]
            print(f"  bfloat16   {bf['windows_per_s']:7.2f} windows/s (x{bf['windows_per_s'] / mine['windows_per_s']:.2f} "
                  f"vs float32); log q drift median {bf['logq_drift_nats']['median']:.3g} / max "
                  f"{bf['logq_drift_nats']['max']:.3g} nats per window; support changed in "
                  f"{bf['logq_drift_nats']['support_changed']} window-policies")
        if "near_verbatim" in mine:
            nv = mine["near_verbatim"]
            print(f"  near-verbatim (eps={nv['epsilon']}, beam={nv['beam']}, top-k:40): "
                  f"{nv['seconds_per_window']:.1f} s per window vs {1 / mine['windows_per_s']:.2f} s verbatim; "
                  f"{nv['forward_rows']} forward rows; log10 bound {nv['log10_bound']:.1f} vs verbatim "
                  f"{nv['log10_verbatim']:.1f}")
    if args.json:
        for r in rows:
            for k in ("memclaim", "reference", "census"):
                if k in r:
                    r[k].pop("scores", None)
        print(json.dumps({"fp32_peak_gflops": peak, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
