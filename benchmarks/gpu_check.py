#!/usr/bin/env python
"""One prepared GPU check: memclaim's engine against the full-logits reference pattern.

Runs on a machine that has only PyTorch and transformers (Python 3.12 or 3.11): memclaim is
imported from this checkout (``PYTHONPATH=src``; the script also adds it itself) and nothing is
downloaded: the models are random-weight Llamas built from configs written below, with the real
hidden sizes, layer counts, heads, KV heads, intermediate sizes and the 128,256-token vocabulary
of Llama-3.2-1B and Llama-3.1-8B (bfloat16 bodies on a GPU).

It prints one table per run (and writes it as JSON with ``--json-out``):

  * windows/s of memclaim (census statistics: log q under greedy, top-k:40, temperature:0.7 with
    the greedy flag and margin; and every statistic) and of the reference pattern of the public
    book-extraction scripts on the same windows: full [B, T, V] logits copied to the host,
    per-policy masking of the full tensor, a Python loop over tokens;
  * the body's achieved FLOP/s (forward pass alone, timed separately) as a fraction of the bf16
    matmul peak measured on this device in the same run;
  * peak device memory while memclaim scores, and the warm-up time (first batch, not counted);
  * GPU-vs-CPU agreement: a small Llama built once on the CPU (float32) is scored there with the
    CPU schedule, copied to the device and scored with the device's (batched) schedule.

    PYTHONPATH=src python benchmarks/gpu_check.py --json-out gpu_check.json     # GPU, < 6 min on an H200
    PYTHONPATH=src python benchmarks/gpu_check.py --device cpu --quick           # CPU, < 2 min

``--device cpu --quick`` runs the same table on the CPU: the same widths and vocabularies at 2
layers, at most 16 windows, float32 (peak and fraction then refer to the float32 matmul peak);
its agreement row compares the batched schedule with the CPU schedule on the CPU.
Targets (issue 14), printed with the verdict: memclaim >= 10x the reference on the 8B shape, the
body >= 40% of the measured bf16 peak, fp32 GPU scores within 1e-3 nats per token of the CPU's.
"""

from __future__ import annotations

import os

os.environ.setdefault(
    "HF_HUB_OFFLINE", "1"
)  # never download: every model here is built from a config
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse  # noqa: E402
import copy  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))  # memclaim from this checkout

POLICIES = ("greedy", "top-k:40", "temperature:0.7")
# config.json numbers of the two models (hidden, intermediate, layers, heads, KV heads, head dim,
# vocabulary, tied embeddings)
SHAPES = {
    "llama-3.2-1b": dict(
        hidden_size=2048,
        intermediate_size=8192,
        num_hidden_layers=16,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=64,
        vocab_size=128256,
        tie_word_embeddings=True,
    ),
    "llama-3.1-8b": dict(
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,
        vocab_size=128256,
        tie_word_embeddings=False,
    ),
}
# the agreement model: small enough to score on the CPU in seconds, the real vocabulary
SMALL = dict(
    hidden_size=512,
    intermediate_size=1536,
    num_hidden_layers=4,
    num_attention_heads=8,
    num_key_value_heads=2,
    head_dim=64,
    vocab_size=128256,
    tie_word_embeddings=False,
)
BOS = 128000  # <|begin_of_text|>
AGREE_TOL = 1e-3  # nats per token, fp32 device against the CPU (issue 14)
TARGET_SPEEDUP_8B = 10.0
TARGET_BODY_FRACTION = 0.40
COLUMNS = (
    "shape",
    "layers",
    "windows",
    "batch",
    "census w/s",
    "all-stats w/s",
    "reference w/s",
    "speed-up",
    "body TFLOP/s",
    "body % peak",
    "peak mem GB",
    "warm-up s",
    "max |dlogq| vs ref",
)
AGREE_COLUMNS = (
    "agreement model",
    "device",
    "windows",
    "max |d| per token",
    "max |d| per window",
    "supports equal",
    "greedy equal",
    f"within {AGREE_TOL:g}",
)


# --------------------------------------------------------------------------- helpers
def sync(device):
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


class PeakRSS:
    """Peak resident set size of this process (bytes) while active (the CPU's 'peak memory')."""

    def __init__(self, interval=0.01):
        self.interval, self.peak, self._stop = interval, 0, threading.Event()

    @staticmethod
    def rss():
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def __enter__(self):
        self.peak = self.rss()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()
        return self

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, self.rss())
            time.sleep(self.interval)

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, self.rss())


class PeakMemory:
    """Peak memory while scoring: allocated device memory on CUDA, process RSS on the CPU."""

    def __init__(self, device):
        self.device = device

    def __enter__(self):
        import torch

        if self.device.type == "cuda":
            sync(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
        else:
            self._rss = PeakRSS().__enter__()
        return self

    def __exit__(self, *exc):
        import torch

        if self.device.type == "cuda":
            sync(self.device)
            self.peak = torch.cuda.max_memory_allocated(self.device)
        else:
            self._rss.__exit__(*exc)
            self.peak = self._rss.peak


def matmul_peak_flops(device, dtype, n, reps=10):
    """Best of 3 timed runs of ``reps`` n x n x n matmuls: the measured dense peak (FLOP/s)."""
    import torch

    g = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(n, n, device=device, dtype=dtype, generator=g)
    b = torch.randn(n, n, device=device, dtype=dtype, generator=g)
    for _ in range(2):
        a @ b
    sync(device)
    best = 0.0
    for _ in range(3):
        t = time.perf_counter()
        for _ in range(reps):
            a @ b
        sync(device)
        best = max(best, reps * 2 * n**3 / (time.perf_counter() - t))
    del a, b
    return best


def body_flops_per_window(cfg: dict, T: int) -> float:
    """FLOPs of the body (no unembedding) over T tokens: dense layers + causal attention."""
    d, L, H, kv, hd, inter = (
        cfg["hidden_size"],
        cfg["num_hidden_layers"],
        cfg["num_attention_heads"],
        cfg["num_key_value_heads"],
        cfg["head_dim"],
        cfg["intermediate_size"],
    )
    dense = 2 * T * L * (d * H * hd * 2 + d * kv * hd * 2 + 3 * d * inter)  # q, o, k, v; SwiGLU
    attn = 2 * 2 * L * H * hd * T * (T + 1) / 2  # QK^T and AV, causal half
    return dense + attn


BLOCK = 1_000_003  # a prime: big matrices tile one block of draws, every row a distinct shift


def fill_random(p, std, g):
    """normal(0, std) draws; a matrix over 4M entries repeats one block of BLOCK draws (timings do
    not depend on the values, and filling 1.5B parameters on 2 CPU cores takes a minute
    otherwise). BLOCK is prime and larger than any row, so no two rows are equal (no artificial
    logit ties)."""
    import torch

    flat = p.view(-1)
    if flat.numel() <= 4 * BLOCK:
        flat.normal_(0.0, std, generator=g)
        return
    block = torch.empty(BLOCK, dtype=p.dtype, device=p.device).normal_(0.0, std, generator=g)
    for a in range(0, flat.numel(), BLOCK):
        n = min(BLOCK, flat.numel() - a)
        flat[a : a + n].copy_(block[:n])


def _no_init():
    """transformers' context that skips its weight init (location differs across versions)."""
    for mod in ("transformers.initialization", "transformers.modeling_utils"):
        try:
            return __import__(mod, fromlist=["no_init_weights"]).no_init_weights()
        except (ImportError, AttributeError):
            continue
    import contextlib

    return contextlib.nullcontext()  # its own init then runs first: slower, same result


def build_llama(cfg: dict, *, layers: int, dtype, device, lm_head_std: float = 0.02, seed: int = 0):
    """A random-weight LlamaForCausalLM built directly on ``device`` in ``dtype`` (no download).

    Weights are drawn here (normal(0, 0.02), norms 1; :func:`fill_random`), so they do not
    depend on the installed transformers' init code, which is skipped where the version allows."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from memclaim.models.hf import FAST_ATTENTION

    kw = dict(
        cfg,
        num_hidden_layers=layers,
        max_position_embeddings=4096,
        rms_norm_eps=1e-5,
        rope_theta=500000.0,
        bos_token_id=BOS,
        eos_token_id=128001,
    )
    try:
        config = LlamaConfig(**kw, attn_implementation=FAST_ATTENTION)
    except TypeError:  # older transformers
        config = LlamaConfig(**kw)
        config._attn_implementation = FAST_ATTENTION
    prev = torch.get_default_dtype()
    try:
        torch.set_default_dtype(dtype)
        with torch.device(device), _no_init():
            model = LlamaForCausalLM(config)
    finally:
        torch.set_default_dtype(prev)
    if cfg["tie_word_embeddings"]:
        model.tie_weights()
    if next(model.parameters()).dtype != dtype:  # the default dtype was not honoured
        model = model.to(dtype)
    model = model.to(device).eval()
    g = torch.Generator(device=device).manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 1:
                p.fill_(1.0)
            else:
                fill_random(p, lm_head_std if "lm_head" in name else 0.02, g)
    model.requires_grad_(False)
    return model


def windows(vocab, n, prefix, suffix, seed=0):
    import numpy as np

    rng = np.random.default_rng(seed)
    prompts = [[BOS] + rng.integers(0, BOS, prefix - 1).tolist() for _ in range(n)]
    return prompts, [rng.integers(0, BOS, suffix).tolist() for _ in range(n)]


# --------------------------------------------------------------------------- the two scorers
def reference_scores(model, prompts, suffixes, batch, device):
    """The public scripts' pattern: full [B, T, V] logits copied to the host as float32,
    per-policy masking of the whole tensor, log-softmax, and a Python loop over the suffix tokens.
    Returns per window [log q under each policy] (float64)."""
    import torch

    out = []
    P, S = len(prompts[0]), len(suffixes[0])
    with torch.inference_mode():
        for a in range(0, len(prompts), batch):
            ids = torch.tensor(
                [p + s for p, s in zip(prompts[a : a + batch], suffixes[a : a + batch])],
                device=device,
            )
            logits = model(ids).logits.float().cpu()  # [B, T, V] on the host
            tgt = ids[:, P:].cpu()
            B = ids.shape[0]
            res = {}
            for spec in POLICIES:
                x = logits.clone()
                if spec == "greedy":
                    am = x.argmax(-1)
                    ok = torch.ones(B, dtype=torch.bool)
                    for t in range(S):
                        ok &= am[:, P - 1 + t] == tgt[:, t]
                    res[spec] = torch.where(ok, 0.0, float("-inf")).double().tolist()
                    continue
                if spec.startswith("temperature"):
                    x = x / 0.7
                if spec.startswith("top-k"):
                    kth = torch.topk(x, 40, dim=-1).values[..., -1:]
                    x = x.masked_fill(x < kth, float("-inf"))
                lp = torch.log_softmax(x, dim=-1)
                total = torch.zeros(B, dtype=torch.float64)
                for t in range(S):
                    total += lp[torch.arange(B), P - 1 + t, tgt[:, t]].double()
                res[spec] = total.tolist()
            out += [[res[s][i] for s in POLICIES] for i in range(B)]
            del logits
    return out


def measure_shape(
    name, cfg, *, layers, dtype, device, n_windows, n_ref, prefix, suffix, ref_batch, peak
):
    import numpy as np
    import torch

    from memclaim.decoding import parse_policies
    from memclaim.models.hf import HFLanguageModel
    from memclaim.scoring.engine import TeacherForcingEngine

    t0 = time.perf_counter()
    model = build_llama(cfg, layers=layers, dtype=dtype, device=device)
    sync(device)
    build_s = time.perf_counter() - t0
    lm = HFLanguageModel(model, name=name, unembed_dtype=torch.float32)
    pols = parse_policies(list(POLICIES))
    census = TeacherForcingEngine(lm, pols, stats="census")
    every = TeacherForcingEngine(lm, pols, stats="all")
    prompts, suffixes = windows(cfg["vocab_size"], n_windows, prefix, suffix, seed=1)
    T = prefix + suffix - 1
    batch = min(census.auto_batch_size(T, suffix), n_windows)
    # warm-up, not counted in the rates: on a GPU one batch of each path at its timed shape
    # (kernels, cuBLAS handles and heuristics); on the CPU two windows suffice
    t = time.perf_counter()
    wb, wr = (batch, ref_batch) if device.type == "cuda" else (min(2, batch), min(2, ref_batch))
    census.score_batch(prompts[:wb], suffixes[:wb])
    every.score_batch(prompts[:wb], suffixes[:wb])
    reference_scores(model, prompts[:wr], suffixes[:wr], wr, device)
    sync(device)
    warm = time.perf_counter() - t
    with PeakMemory(device) as mem:
        t = time.perf_counter()
        cen = census.score_windows(prompts, suffixes, batch_size=batch)
        sync(device)
        cen_s = time.perf_counter() - t
        t = time.perf_counter()
        every.score_windows(prompts, suffixes, batch_size=batch)
        sync(device)
        all_s = time.perf_counter() - t
    with PeakMemory(device) as ref_mem:
        t = time.perf_counter()
        ref = reference_scores(model, prompts[:n_ref], suffixes[:n_ref], ref_batch, device)
        sync(device)
        ref_s = time.perf_counter() - t
    # the body alone, on memclaim's batch, best of 3
    ids = torch.tensor(
        [p + s[:-1] for p, s in zip(prompts[:batch], suffixes[:batch])], device=device
    )
    body_s = float("inf")
    for _ in range(3):
        sync(device)
        t = time.perf_counter()
        lm.forward_hidden(ids)
        sync(device)
        body_s = min(body_s, time.perf_counter() - t)
    body_flops = body_flops_per_window(dict(cfg, num_hidden_layers=layers), T) * batch / body_s
    a, b = np.asarray(cen.logq[:n_ref]), np.asarray(ref)
    fin = np.isfinite(a) & np.isfinite(b)
    row = {
        "shape": name,
        "layers": layers,
        "dtype": str(dtype).replace("torch.", ""),
        "windows": n_windows,
        "reference_windows": n_ref,
        "batch": batch,
        "reference_batch": ref_batch,
        "prefix": prefix,
        "suffix": suffix,
        "census w/s": n_windows / cen_s,
        "all-stats w/s": n_windows / all_s,
        "reference w/s": n_ref / ref_s,
        "speed-up": (n_windows / cen_s) / (n_ref / ref_s),
        "speed-up all-stats": (n_windows / all_s) / (n_ref / ref_s),
        "body TFLOP/s": body_flops / 1e12,
        "body % peak": 100 * body_flops / peak,
        "peak mem GB": mem.peak / 1e9,
        "reference peak mem GB": ref_mem.peak / 1e9,
        "warm-up s": warm,
        "build s": build_s,
        "max |dlogq| vs ref": float(np.abs(a[fin] - b[fin]).max()) if fin.any() else 0.0,
        "support equal vs ref": bool(np.array_equal(np.isfinite(a), np.isfinite(b))),
        "attn_implementation": lm.attn_implementation,
        "schedule": census.schedule,
        "tied_embeddings": model.get_output_embeddings().weight
        is model.get_input_embeddings().weight,
    }
    del model, lm, census, every, ids
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return row


def agreement(device, *, n_windows, prefix, suffix):
    """A small Llama built once on the CPU in float32, scored there (CPU schedule) and, copied to
    ``device``, with the device's schedule (batched; forced on a CPU-only run)."""
    import numpy as np
    import torch

    from memclaim.decoding import parse_policies
    from memclaim.models.hf import HFLanguageModel
    from memclaim.scoring.engine import NEAR_TIE_MARGIN, TeacherForcingEngine

    cpu = torch.device("cpu")
    # a larger unembedding scale gives peaked next-token distributions (top-k and margins matter)
    model = build_llama(
        SMALL, layers=SMALL["num_hidden_layers"], dtype=torch.float32, device=cpu, lm_head_std=0.12
    )
    pols = parse_policies(["full", "greedy", "top-k:40", "temperature:0.7", "top-p:0.9"])
    prompts, suffixes = windows(SMALL["vocab_size"], n_windows, prefix, suffix, seed=2)
    ref = TeacherForcingEngine(
        HFLanguageModel(model, name="small"), pols, schedule="cpu-invariant"
    ).score_windows(prompts, suffixes, batch_size=8)
    moved = copy.deepcopy(model).to(device)
    schedule = "auto" if device.type != "cpu" else "batched"
    dev = TeacherForcingEngine(
        HFLanguageModel(moved, name="small"), pols, schedule=schedule
    ).score_windows(prompts, suffixes, batch_size=8)
    diffs, same_support = [], True
    for f in ("token_logq", "token_logprob", "token_mean", "token_std"):
        x, y = getattr(ref, f), getattr(dev, f)
        same_support &= bool(np.array_equal(np.isfinite(x), np.isfinite(y)))
        fin = np.isfinite(x) & np.isfinite(y)
        diffs.append(float(np.abs(x[fin] - y[fin]).max()) if fin.any() else 0.0)
    fin = np.isfinite(ref.logq) & np.isfinite(dev.logq)
    per_window = float(np.abs(ref.logq[fin] - dev.logq[fin]).max()) if fin.any() else 0.0
    clear = (ref.min_margin > NEAR_TIE_MARGIN) & (dev.min_margin > NEAR_TIE_MARGIN)
    greedy_equal = bool(np.array_equal(ref.greedy_match[clear], dev.greedy_match[clear]))
    ranks_equal_frac = float((ref.token_rank == dev.token_rank).mean())
    worst = max(diffs)
    return {
        "agreement model": "llama-small x4 layers fp32",
        "device": str(device),
        "windows": n_windows,
        "max |d| per token": worst,
        "max |d| per window": per_window,
        "supports equal": same_support,
        "greedy equal": greedy_equal,
        f"within {AGREE_TOL:g}": bool(worst <= AGREE_TOL and same_support),
        "per field max |d|": dict(
            zip(("token_logq", "token_logprob", "token_mean", "token_std"), diffs)
        ),
        "ranks equal fraction": ranks_equal_frac,
        "device schedule": schedule if schedule != "auto" else "batched",
    }


# --------------------------------------------------------------------------- output
def fmt(v):
    if isinstance(v, bool):
        return "yes" if v else "NO"
    if isinstance(v, float):
        return f"{v:.3g}" if (abs(v) < 0.01 or abs(v) >= 1e4) and v != 0 else f"{v:.2f}"
    return str(v)


def print_table(columns, rows):
    cells = [[fmt(r[c]) for c in columns] for r in rows]
    widths = [max(len(c), *(len(x[i]) for x in cells)) for i, c in enumerate(columns)]
    print(" | ".join(c.rjust(w) for c, w in zip(columns, widths)))
    print("-+-".join("-" * w for w in widths))
    for x in cells:
        print(" | ".join(v.rjust(w) for v, w in zip(x, widths)))


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--device", default="auto", help="auto (cuda when present), cuda, cuda:N or cpu"
    )
    ap.add_argument(
        "--quick",
        action="store_true",
        help="2 layers, at most 16 windows, float32 (the CPU mode CI runs)",
    )
    ap.add_argument(
        "--shapes", default=",".join(SHAPES), help=f"comma-separated from {', '.join(SHAPES)}"
    )
    ap.add_argument("--windows", type=int, default=None, help="memclaim windows per shape")
    ap.add_argument("--ref-windows", type=int, default=None, help="reference windows per shape")
    ap.add_argument("--prefix", type=int, default=None)
    ap.add_argument("--suffix", type=int, default=None)
    ap.add_argument("--threads", type=int, default=None, help="CPU threads (default: torch's)")
    ap.add_argument(
        "--json-out", default=None, help="write the table (and environment) as JSON here"
    )
    args = ap.parse_args(argv)
    start = time.perf_counter()

    import torch
    import transformers

    import memclaim  # noqa: F401  (MKL strict mode before the first matmul)

    if args.threads:
        torch.set_num_threads(args.threads)
    if args.device == "auto":
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        device = torch.device(args.device)
        if device.type == "cuda" and not torch.cuda.is_available():
            raise SystemExit(
                f"error: --device {args.device}: no CUDA device is visible (torch {torch.__version__})"
            )
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    shapes = [s.strip() for s in args.shapes.split(",") if s.strip()]
    bad = [s for s in shapes if s not in SHAPES]
    if bad:
        raise SystemExit(f"error: unknown shape(s) {bad}; choose from {', '.join(SHAPES)}")
    on_gpu = device.type == "cuda"
    quick = args.quick or not on_gpu
    dtype = torch.float32 if quick else torch.bfloat16
    # budget (H200, < 6 min in all): the 8B shape's reference costs ~1 s per window on the host
    prefix = args.prefix or (50 if on_gpu else 16)
    suffix = args.suffix or (50 if on_gpu else 16)
    plan = {}
    for s in shapes:
        if quick:
            n, nr = min(args.windows or 8, 16), min(args.ref_windows or 8, 16)
        else:
            n = args.windows or (1024 if s == "llama-3.2-1b" else 512)
            nr = args.ref_windows or (64 if s == "llama-3.2-1b" else 32)
        plan[s] = (n, nr)

    env = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "device": str(device),
        "cuda": torch.version.cuda,
        "threads": torch.get_num_threads(),
        "device_name": torch.cuda.get_device_name(device)
        if on_gpu
        else platform.processor() or platform.machine(),
        "quick": quick,
        "dtype": str(dtype).replace("torch.", ""),
        "policies": list(POLICIES),
    }
    print(
        f"gpu_check on {env['device_name']} ({device}); torch {env['torch']}, transformers {env['transformers']}, "
        f"python {env['python']}; {env['dtype']} bodies; policies {', '.join(POLICIES)}",
        flush=True,
    )
    peak_dtype = torch.bfloat16 if not quick else torch.float32
    peak = matmul_peak_flops(device, peak_dtype, 8192 if on_gpu else 1024, reps=20 if on_gpu else 3)
    print(
        f"measured {str(peak_dtype).replace('torch.', '')} matmul peak: {peak / 1e12:.3g} TFLOP/s",
        flush=True,
    )

    rows = []
    for s in shapes:
        n, nr = plan[s]
        layers = 2 if quick else SHAPES[s]["num_hidden_layers"]
        t = time.perf_counter()
        rows.append(
            measure_shape(
                s,
                SHAPES[s],
                layers=layers,
                dtype=dtype,
                device=device,
                n_windows=n,
                n_ref=nr,
                prefix=prefix,
                suffix=suffix,
                ref_batch=min(8, nr),
                peak=peak,
            )
        )
        print(f"  {s}: measured in {time.perf_counter() - t:.0f} s", flush=True)
    agree = agreement(device, n_windows=16, prefix=32 if on_gpu else 16, suffix=16 if on_gpu else 8)

    print()
    print_table(COLUMNS, rows)
    print()
    print_table(AGREE_COLUMNS, [agree])
    verdicts = {}
    if on_gpu and not quick:
        big = next((r for r in rows if r["shape"] == "llama-3.1-8b"), None)
        if big is not None:
            verdicts["speed-up 8B >= 10x"] = big["speed-up"] >= TARGET_SPEEDUP_8B
            verdicts["body >= 40% of bf16 peak (8B)"] = (
                big["body % peak"] >= 100 * TARGET_BODY_FRACTION
            )
    verdicts[f"fp32 device scores within {AGREE_TOL:g} nats/token of the CPU"] = agree[
        f"within {AGREE_TOL:g}"
    ]
    print()
    for k, v in verdicts.items():
        print(f"target {k}: {'met' if v else 'MISSED'}")
    total = time.perf_counter() - start
    print(f"total {total:.0f} s")
    if args.json_out:
        loaded = sorted(m for m in sys.modules if m == "memclaim" or m.startswith("memclaim."))
        out = {
            "env": env,
            "peak_tflops": peak / 1e12,
            "peak_dtype": str(peak_dtype).replace("torch.", ""),
            "columns": list(COLUMNS),
            "rows": rows,
            "agreement_columns": list(AGREE_COLUMNS),
            "agreement": agree,
            "targets": verdicts,
            "seconds": total,
            "memclaim_modules": loaded,
        }
        Path(args.json_out).write_text(json.dumps(out, indent=1))
        print(f"wrote {args.json_out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
