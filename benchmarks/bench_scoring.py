#!/usr/bin/env python
"""Scoring throughput on the CPU: memclaim's engine against the peer's full-logits pattern.

The peer's pattern (written independently here, after the public book-extraction scripts'
``compute_logprob_batch``): the model's forward pass with the logits of every position as a
[batch, time, vocab] float tensor on the CPU, then per policy temperature and top-k masking of the
whole tensor, log-softmax and a gather of the targets (the greedy flag from the argmax).
memclaim runs the body over every token and the unembedding only at the scored positions, once
for all policies, with the CPU schedule's statistics (bit-identical at every batch size).

Each side runs in its own process (peak RSS is per process, sampled every 5 ms while scoring,
after the model is loaded and one batch has warmed up). The peer's process is plain PyTorch and
transformers, started with the environment this script was started with (memclaim's settings,
such as MKL's strict reproducibility mode, are not imposed on it); both read the same windows.
The sides run ``--rounds`` times (default 3), interleaved and in a rotating order, so that a
busy machine slows both alike; the speed-up is the median over rounds of the paired ratio
(peer seconds / memclaim seconds in the same round), with its spread (min-max) and the same
ratio of CPU seconds (the process's user + system time, steadier when other jobs share the
cores). FLOPs counted are the ones that must be done: the body over every token (dense layers,
attention scores and values) and the unembedding at the scored positions; the fp32 matmul peak
is measured in each round, on the same cores.

    python benchmarks/bench_scoring.py                    # SmolLM2 + Gemma 3 270M, 3 rounds
    python benchmarks/bench_scoring.py --models smollm2 --rounds 5 --json
    python benchmarks/bench_scoring.py --models smollm2 --bf16 --near-verbatim   # extras, once

A third side, the floor, runs memclaim's body over every token and its unembedding at the
scored rows with no statistic at all (floor_pass): no scorer with memclaim's bits computes less,
so the peer's time over the floor's, in the same round, is the ceiling on the speed-up. The
body is the peer's own arithmetic (the same transformers modules, one token fewer per window),
so where it is most of the peer's time, no schedule of the statistics can pass the ceiling.

Targets (issue 30): median speed-up >= 1.5x (SmolLM2) and >= 2x (Gemma) with the default
statistics, >= 2x and >= 3x census-only, peak RSS <= 0.6 of the peer's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
POLICIES = ("greedy", "top-k:40", "temperature:0.7")
ENV0 = dict(os.environ)  # the environment this script was started with (the peer runs in it)
TARGETS = {
    "smollm2": {"default": 1.5, "census": 2.0},
    "gemma3-270m": {"default": 2.0, "census": 3.0},
}
RSS_TARGET = 0.6


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
    """The best of three timings of ``reps`` n x n matmuls, GFLOP/s (wall clock)."""
    import torch

    dt = getattr(torch, dtype)
    a, b = torch.randn(n, n, dtype=dt), torch.randn(n, n, dtype=dt)
    a @ b
    best = 0.0
    for _ in range(3):
        t = time.perf_counter()
        for _ in range(reps):
            a @ b
        best = max(best, reps * 2 * n**3 / (time.perf_counter() - t) / 1e9)
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
    gated = (
        getattr(config, "hidden_act", getattr(config, "hidden_activation", ""))
        in ("silu", "gelu_pytorch_tanh")
        and config.model_type != "gpt2"
    )
    attn_proj = d * heads * head_dim * 2 + d * kv_heads * head_dim * 2  # q, o and k, v
    mlp = d * inter * (3 if gated else 2)
    dense = 2 * T * n_layers * (attn_proj + mlp)
    attn = 2 * 2 * n_layers * heads * head_dim * T * (T + 1) / 2  # causal QK^T and AV
    unembed = 2 * d * vocab * suffix_len
    return dense + attn + unembed


def load_windows(model, n, prefix, suffix):
    """``n`` sliding windows of Genesis 1-3 and the project's own prose (repeated to ``n``):
    (prompts with the start-of-text ids, suffixes), token ids."""
    from memclaim.text.windows import sliding_windows

    text = (HERE.parent / "tests" / "data" / "genesis_1_3.txt").read_text()
    text = text + "\n\n" + (HERE.parent / "tests" / "data" / "new_genesis_style.txt").read_text()
    ws = sliding_windows(
        text,
        model.tokenizer,
        prefix_tokens=prefix,
        suffix_tokens=suffix,
        stride=max(1, prefix // 2),
    )
    wins = list(ws.windows)
    while len(wins) < n:
        wins += wins
    wins = wins[:n]
    prompts = [list(model.sot_ids) + list(w.prefix_ids) for w in wins]
    return prompts, [list(w.suffix_ids) for w in wins]


# --------------------------------------------------------------------------- the two scorers
def reference_scores(hf_model, prompts, suffixes, batch):
    """The peer's pattern: [B, T, V] logits of every position on the CPU, per policy the
    temperature and top-k masking of the whole tensor and a full log-softmax, then a gather of
    the targets (greedy: the argmax at every position). log q per window and policy."""
    import torch

    out = []
    P = len(prompts[0])
    S = len(suffixes[0])
    with torch.inference_mode():
        for a in range(0, len(prompts), batch):
            ids = torch.tensor(
                [p + s for p, s in zip(prompts[a : a + batch], suffixes[a : a + batch])]
            )
            logits = hf_model(ids).logits.float().cpu()  # [B, T, V]
            tgt = ids[:, P:]
            res = {}
            for spec in POLICIES:
                x = logits
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
        r = eng.score_batch(prompts[a : a + batch], suffixes[a : a + batch])
        out += r.logq.tolist()
    return out


def floor_pass(lm, prompts, suffixes, batch, chunk_bytes=256 << 20):
    """The least any scorer with memclaim's bits must compute: the CPU schedule's body over
    prompt + suffix[:-1] and its unembedding at the scored rows (the same calls, into one reused
    buffer), and no statistic at all. The peer's time over this side's, in the same round, is
    the ceiling on memclaim's speed-up with its scores' bits unchanged (it could skip at most
    the last layer at the unscored rows besides: 1.5-2% of the body, issue 30's note)."""
    import torch

    from memclaim.scoring.engine import MIN_GEMM_ROWS, _chunk_rows
    from memclaim.scoring.heap import retain_freed_memory

    retain_freed_memory()  # as the engine does on the CPU (freed memory kept for the next layer)
    S = len(suffixes[0])
    # the engine's calls: whole windows per call (where one window's rows pass the budget the
    # engine cuts it into sub-chunks; the floor keeps the window: not less work, fewer calls)
    per_call = max(1, _chunk_rows(lm.vocab_size, chunk_bytes) // S) * S
    buf = None
    with torch.inference_mode():
        for a in range(0, len(prompts), batch):
            ids = torch.tensor(
                [p + s[:-1] for p, s in zip(prompts[a : a + batch], suffixes[a : a + batch])]
            )
            if ids.shape[1] < MIN_GEMM_ROWS:  # as the engine: short sequences right-padded
                ids = torch.cat([ids, ids.new_zeros(ids.shape[0], MIN_GEMM_ROWS - ids.shape[1])], 1)
            Lp = len(prompts[a])
            hidden, _ = lm.forward_hidden(ids)
            h = hidden[:, Lp - 1 : Lp - 1 + S, :].reshape(-1, hidden.shape[-1])  # [B*S, D]
            for c in range(0, h.shape[0], per_call):
                rows = h[c : c + per_call]
                if rows.shape[0] < MIN_GEMM_ROWS:  # as the engine: zero rows appended
                    rows = torch.cat(
                        [rows, rows.new_zeros(MIN_GEMM_ROWS - rows.shape[0], rows.shape[1])]
                    )
                if buf is None:
                    buf = lm.logits(rows)
                else:
                    lm.logits(rows, out=buf[: rows.shape[0]])
    return []


# --------------------------------------------------------------------------- worker
def worker(args):
    import torch

    torch.set_num_threads(args.threads)
    with open(args.windows_file) as fh:
        w = json.load(fh)
    prompts, suffixes = w["prompts"], w["suffixes"]
    if args.impl == "peer":  # plain transformers: no memclaim import in this process
        from transformers import AutoModelForCausalLM

        t = time.perf_counter()
        model = AutoModelForCausalLM.from_pretrained(
            w["path"], dtype=torch.float32, local_files_only=True
        ).eval()
        load_s = time.perf_counter() - t
        config, vocab = model.config, model.get_output_embeddings().weight.shape[0]
        fn = lambda p, s: reference_scores(model, p, s, args.batch)  # noqa: E731
    else:
        from memclaim.models import load_model

        t = time.perf_counter()
        m = load_model(args.model, dtype=args.dtype, load_weights=True)
        load_s = time.perf_counter() - t
        config, vocab = m.lm.config, m.lm.vocab_size
        if args.impl == "floor":
            fn = lambda p, s: floor_pass(m.lm, p, s, args.batch)  # noqa: E731
        else:
            fn = lambda p, s: memclaim_scores(m.lm, p, s, args.batch, args.stats, args.schedule)  # noqa: E731
    fn(
        prompts[: args.batch], suffixes[: args.batch]
    )  # warm-up on one batch outside the measurement
    with RSSSampler() as rss:
        t, c = time.perf_counter(), time.process_time()
        scores = fn(prompts, suffixes)
        dt, dc = time.perf_counter() - t, time.process_time() - c
    flops = model_flops_per_window(config, vocab, len(prompts[0]), len(suffixes[0])) * len(prompts)
    res = {
        "impl": args.impl,
        "model": args.model,
        "dtype": args.dtype,
        "stats": args.stats,
        "schedule": args.schedule,
        "windows": len(prompts),
        "batch": args.batch,
        "load_seconds": load_s,
        "seconds": dt,
        "cpu_seconds": dc,
        "windows_per_s": len(prompts) / dt,
        "gflops": flops / dt / 1e9,
        "rss_start_mb": rss.start_rss / 2**20,
        "rss_peak_mb": rss.peak / 2**20,
        "scores": scores,
    }
    if args.near_verbatim:
        import numpy as np

        from memclaim.decoding import Policy
        from memclaim.scoring.nearverbatim import near_verbatim_lower_bound

        t = time.perf_counter()
        r = near_verbatim_lower_bound(
            m.lm,
            prompts[0],
            suffixes[0],
            policy=Policy.parse("top-k:40"),
            epsilon=args.nv_epsilon,
            beam=args.nv_beam,
        )
        res["near_verbatim"] = {
            "seconds_per_window": time.perf_counter() - t,
            "epsilon": args.nv_epsilon,
            "beam": args.nv_beam,
            "forward_rows": r.forward_rows,
            "log10_bound": float(r.log_bound / np.log(10)),
            "log10_verbatim": float(r.log_verbatim / np.log(10)),
        }
    print("RESULT " + json.dumps(res))


def run_worker(**kw):
    impl = kw["impl"]
    cmd = [sys.executable, __file__, "--worker"]
    for k, v in kw.items():
        if isinstance(v, bool):
            if v:
                cmd.append(f"--{k.replace('_', '-')}")
        else:
            cmd += [f"--{k.replace('_', '-')}", str(v)]
    env = dict(ENV0) if impl == "peer" else dict(os.environ)
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # both sides: idle OpenMP threads sleep
    t = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    whole = time.perf_counter() - t
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            res = json.loads(line[7:])
            res["process_seconds"] = whole
            return res
    raise RuntimeError(f"worker failed: {' '.join(cmd)}\n{out.stderr[-3000:]}")


# --------------------------------------------------------------------------- report
def _median_spread(xs):
    return statistics.median(xs), min(xs), max(xs)


def summarize(model, runs, peaks, label_of):
    """Per side: medians over rounds; per memclaim variant: the paired ratios against the peer."""
    import numpy as np

    peak = statistics.median(peaks)
    sides = {}
    for key, rs in runs.items():
        sides[key] = {
            "label": label_of[key],
            "rounds": len(rs),
            "seconds": _median_spread([r["seconds"] for r in rs]),
            "cpu_seconds": _median_spread([r["cpu_seconds"] for r in rs]),
            "process_seconds": _median_spread([r["process_seconds"] for r in rs]),
            "load_seconds": statistics.median(r["load_seconds"] for r in rs),
            "windows_per_s": statistics.median(r["windows_per_s"] for r in rs),
            "gflops": statistics.median(r["gflops"] for r in rs),
            "peak_fraction": statistics.median(r["gflops"] for r in rs) / peak,
            "rss_peak_mb": max(r["rss_peak_mb"] for r in rs),
            "rss_start_mb": statistics.median(r["rss_start_mb"] for r in rs),
        }
    peer = runs["peer"]
    for key, rs in runs.items():
        if key == "peer":
            continue
        s = sides[key]
        s["speedup"] = _median_spread([p["seconds"] / r["seconds"] for p, r in zip(peer, rs)])
        s["speedup_cpu"] = _median_spread(
            [p["cpu_seconds"] / r["cpu_seconds"] for p, r in zip(peer, rs)]
        )
        s["speedup_process"] = _median_spread(
            [p["process_seconds"] / r["process_seconds"] for p, r in zip(peer, rs)]
        )
        s["rss_ratio"] = s["rss_peak_mb"] / sides["peer"]["rss_peak_mb"]
        if key == "floor":  # no scores: the ceiling side (floor_pass)
            continue
        a, b = np.array(rs[0]["scores"]), np.array(peer[0]["scores"])
        fin = np.isfinite(a) & np.isfinite(b)
        s["agree_max_abs_diff"] = float(np.max(np.abs(a[fin] - b[fin]))) if fin.any() else 0.0
        s["agree_support"] = bool(np.array_equal(np.isfinite(a), np.isfinite(b)))
        s["target"] = TARGETS.get(model, {}).get(key)  # default and census sides only
    for key in ("default", "census", "batched"):
        if key in sides and sides[key].get("target"):
            # the FLOPs counted are the ones memclaim's bits require (model_flops_per_window), so
            # a speed-up of x over the peer needs x times the peer's fraction of the matmul peak
            sides[key]["needed_peak_fraction"] = (
                sides[key]["target"] * sides["peer"]["peak_fraction"]
            )
        if "floor" in runs and key in sides:  # the ceiling on the speed-up with these bits
            sides[key]["ceiling"] = sides["floor"]["speedup"]
            sides[key]["ceiling_cpu"] = sides["floor"]["speedup_cpu"]
    if "census" in runs and "default" in runs:
        # the census's log q is computed by the same operations as the full run's: the same bits
        sides["census"]["bit_identical_to_default"] = bool(
            all(
                np.array_equal(np.array(c["scores"]), np.array(d["scores"]))
                for c, d in zip(runs["census"], runs["default"])
            )
        )
    if "batched" in runs and "default" in runs:
        d = np.array(runs["default"][0]["scores"])
        b = np.array(runs["batched"][0]["scores"])
        fin = np.isfinite(d) & np.isfinite(b)
        sides["batched"]["vs_invariant_max_abs_diff"] = (
            float(np.max(np.abs(d[fin] - b[fin]))) if fin.any() else 0.0
        )
    # memclaim at the full matmul peak on the FLOPs its bits require: the speed-up no schedule passes
    ceiling_at_peak = 1.0 / sides["peer"]["peak_fraction"]
    return {
        "model": model,
        "fp32_peak_gflops": peak,
        "ceiling_at_peak": ceiling_at_peak,
        "sides": sides,
    }


def say(text):
    """A sentence of the summary, word-wrapped at 80 columns under a two-space indent."""
    print(textwrap.fill(text, 80, initial_indent="  ", subsequent_indent="      "))


def print_summary(res, args):
    sides = res["sides"]
    peer = sides["peer"]
    print()
    print(
        textwrap.fill(
            f"== {res['model']}: {args.windows} windows of {args.prefix}+{args.suffix} tokens, batch {args.batch}, "
            f"{args.threads} threads, policies {', '.join(POLICIES)}; {peer['rounds']} interleaved rounds, "
            f"fp32 matmul peak {res['fp32_peak_gflops']:.1f} GFLOP/s (median of rounds)",
            80,
            subsequent_indent="   ",
        )
    )
    say(
        f"% peak: the FLOPs memclaim's bits require (body over every token, unembedding at the "
        f"scored rows) per second, over the peak; at 100% memclaim would be "
        f"{res['ceiling_at_peak']:.2f}x the peer"
    )
    print(
        f"  {'side':28} {'wall s':>7} {'CPU s':>7} {'win/s':>6} {'% peak':>6} {'RSS MB':>7} "
        f"{'speed-up (min-max)':>20} {'CPU-s ratio':>11} {'RSS':>5}"
    )
    for key, s in sides.items():
        line = (
            f"  {s['label']:28} {s['seconds'][0]:7.2f} {s['cpu_seconds'][0]:7.2f} {s['windows_per_s']:6.2f} "
            f"{100 * s['peak_fraction']:5.1f}% {s['rss_peak_mb']:7.0f}"
        )
        if key != "peer":
            sp = s["speedup"]
            line += (
                f" {sp[0]:6.2f}x ({sp[1]:.2f}-{sp[2]:.2f}) {s['speedup_cpu'][0]:10.2f}x "
                f"{s['rss_ratio']:5.2f}"
            )
        print(line)
    for key, s in sides.items():
        if key in ("peer", "floor"):
            continue
        tgt = s.get("target")
        verdict = (
            ""
            if tgt is None
            else (
                f"; target >= {tgt}x: {'met' if s['speedup'][0] >= tgt else 'NOT met'}, "
                f"RSS <= {RSS_TARGET}: {'met' if s['rss_ratio'] <= RSS_TARGET else 'NOT met'}"
            )
        )
        extra = ""
        if "bit_identical_to_default" in s:
            extra += f"; log q bit-identical to the default run's: {s['bit_identical_to_default']}"
        if "needed_peak_fraction" in s:
            need = s["needed_peak_fraction"]
            extra += f"; {tgt}x needs {100 * need:.0f}% of the matmul peak" + (
                " (more than the peak)" if need > 1 else ""
            )
        if "ceiling" in s:
            ce = s["ceiling"][0]
            extra += (
                f"; ceiling with these bits {ce:.2f}x wall, {s['ceiling_cpu'][0]:.2f}x CPU-s"
                + ("" if tgt is None or tgt <= ce else f" (the target {tgt}x is above it)")
            )
        if "vs_invariant_max_abs_diff" in s:
            extra += f"; log q vs the invariant schedule: max |d| {s['vs_invariant_max_abs_diff']:.2e} nats"
        say(
            f"{s['label']}: scores agree with the peer to {s['agree_max_abs_diff']:.2e} nats (same support: "
            f"{s['agree_support']}); whole process x{s['speedup_process'][0]:.2f}{verdict}{extra}"
        )


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--impl", default="memclaim", help=argparse.SUPPRESS)
    ap.add_argument("--model", default="smollm2", help=argparse.SUPPRESS)
    ap.add_argument("--windows-file", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--stats", default="all", help=argparse.SUPPRESS)
    ap.add_argument("--schedule", default="auto", help=argparse.SUPPRESS)
    ap.add_argument("--models", default="smollm2,gemma3-270m")
    ap.add_argument("--windows", type=int, default=32)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--prefix", type=int, default=50)
    ap.add_argument("--suffix", type=int, default=50)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--rounds", type=int, default=3, help="interleaved rounds of every side (default 3)"
    )
    ap.add_argument("--dtype", default="float32")
    ap.add_argument(
        "--no-census",
        action="store_true",
        help="leave out the census-only (log q, greedy, margin) side",
    )
    ap.add_argument(
        "--no-floor",
        action="store_true",
        help="leave out the floor side (memclaim's body and unembedding at the scored rows, no "
        "statistic: the peer's time over it is the ceiling on the speed-up with these bits)",
    )
    ap.add_argument(
        "--batched",
        action="store_true",
        help="also run memclaim's batched schedule on the CPU (statistics for all rows of a chunk "
        "at once; equal to the invariant schedule within its stated tolerance)",
    )
    ap.add_argument(
        "--bf16",
        action="store_true",
        help="also run memclaim once in bfloat16 and report the drift",
    )
    ap.add_argument(
        "--near-verbatim", action="store_true", help="also time one near-verbatim window"
    )
    ap.add_argument("--nv-epsilon", type=int, default=5)
    ap.add_argument("--nv-beam", type=int, default=16)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    import numpy as np
    import torch

    import memclaim  # noqa: F401  (memclaim's process settings, for the memclaim workers)
    from memclaim.models import load_model

    torch.set_num_threads(args.threads)
    cpu = next(
        (
            ln.split(":", 1)[1].strip()
            for ln in Path("/proc/cpuinfo").read_text().splitlines()
            if ln.startswith("model name")
        ),
        "?",
    )
    print(
        f"CPU: {cpu}, {os.cpu_count()} logical CPUs; load average {os.getloadavg()[0]:.2f} (1 min) at start"
    )
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        for model in args.models.split(","):
            m = load_model(model)
            prompts, suffixes = load_windows(m, args.windows, args.prefix, args.suffix)
            files[model] = str(Path(tmp) / f"{model}.json")
            Path(files[model]).write_text(
                json.dumps({"path": str(m.path), "prompts": prompts, "suffixes": suffixes})
            )
        variants = {
            "peer": ("peer", "all", "auto", "peer (full [B, T, V] logits)"),
            "default": ("memclaim", "all", "auto", "memclaim, default statistics"),
        }
        if not args.no_census:
            variants["census"] = ("memclaim", "census", "auto", "memclaim, census statistics")
        if not args.no_floor:
            variants["floor"] = (
                "floor",
                "all",
                "auto",
                "floor (body + unembedding)",
            )
        if args.batched:
            variants["batched"] = ("memclaim", "all", "batched", "memclaim, batched schedule")
        for model in args.models.split(","):
            runs = {k: [] for k in variants}
            peaks, loads = [], []
            for r in range(args.rounds):
                keys = list(variants)
                keys = keys[r % len(keys) :] + keys[: r % len(keys)]  # rotate the order each round
                loads.append(os.getloadavg()[0])
                peaks.append(matmul_peak_gflops())
                for k in keys:
                    impl, stats, schedule, _ = variants[k]
                    runs[k].append(
                        run_worker(
                            impl=impl,
                            model=model,
                            windows_file=files[model],
                            stats=stats,
                            schedule=schedule,
                            windows=args.windows,
                            batch=args.batch,
                            prefix=args.prefix,
                            suffix=args.suffix,
                            threads=args.threads,
                            dtype="float32",
                        )
                    )
                print(
                    f"  [{model} round {r + 1}/{args.rounds}: load {loads[-1]:.2f} -> {os.getloadavg()[0]:.2f}; "
                    + ", ".join(f"{k} {runs[k][-1]['seconds']:.1f} s" for k in keys)
                    + "]",
                    flush=True,
                )
            res = summarize(model, runs, peaks, {k: v[3] for k, v in variants.items()})
            res["load_average"] = {"per_round_start": loads, "end": os.getloadavg()[0]}
            if args.bf16 or args.near_verbatim:
                common = dict(
                    model=model,
                    windows_file=files[model],
                    windows=args.windows,
                    batch=args.batch,
                    prefix=args.prefix,
                    suffix=args.suffix,
                    threads=args.threads,
                )
                if args.bf16:
                    bf = run_worker(impl="memclaim", dtype="bfloat16", **common)
                    a, b = np.array(runs["default"][0]["scores"]), np.array(bf["scores"])
                    fin = np.isfinite(a) & np.isfinite(b)
                    drift = np.abs(a - b)[fin]
                    res["bfloat16"] = {
                        "windows_per_s": bf["windows_per_s"],
                        "rss_peak_mb": bf["rss_peak_mb"],
                        "logq_drift_nats": {
                            "median": float(np.median(drift)) if drift.size else 0.0,
                            "max": float(drift.max()) if drift.size else 0.0,
                            "support_changed": int((np.isfinite(a) != np.isfinite(b)).sum()),
                        },
                    }
                if args.near_verbatim:
                    nv = run_worker(
                        impl="memclaim",
                        dtype="float32",
                        near_verbatim=True,
                        nv_epsilon=args.nv_epsilon,
                        nv_beam=args.nv_beam,
                        **common,
                    )
                    res["near_verbatim"] = nv["near_verbatim"]
            print_summary(res, args)
            if "bfloat16" in res:
                bf = res["bfloat16"]
                print(
                    f"  bfloat16 {bf['windows_per_s']:.2f} windows/s; log q drift median "
                    f"{bf['logq_drift_nats']['median']:.3g} / max {bf['logq_drift_nats']['max']:.3g} nats per window; "
                    f"support changed in {bf['logq_drift_nats']['support_changed']} window-policies"
                )
            if "near_verbatim" in res:
                nv = res["near_verbatim"]
                print(
                    f"  near-verbatim (eps={nv['epsilon']}, beam={nv['beam']}, top-k:40): "
                    f"{nv['seconds_per_window']:.1f} s per window; {nv['forward_rows']} forward rows; "
                    f"log10 bound {nv['log10_bound']:.1f} vs verbatim {nv['log10_verbatim']:.1f}"
                )
            out.append(res)
    print(f"\nload average {os.getloadavg()[0]:.2f} (1 min) at the end; CPU {cpu}")
    if args.json:
        print(json.dumps({"cpu": cpu, "rows": out}, indent=1))


if __name__ == "__main__":
    main()
