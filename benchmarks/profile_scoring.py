#!/usr/bin/env python
"""Where the time goes when memclaim scores windows on the CPU, beside the peer's pattern.

For each model (SmolLM2: 49,152-token vocabulary; Gemma 3 270M: 262,144) one batch of
``--windows`` windows of ``--prefix`` + ``--suffix`` tokens (the sliding windows of
bench_scoring.py) is taken apart stage by stage:

  * model load (from the cached safetensors folder) and tokenization (sliding windows);
  * memclaim: the body over prompt + suffix[:-1], the unembedding at the scored rows (as the
    engine issues it), each statistic on its own and the default / census sets (the engine's
    per-window statistics), the engine end to end (what is left over is Python per window and
    the host-side assembly), and a store write of the batch's unit (Parquet, zstd);
  * the peer's pattern (bench_scoring.reference_scores): the forward pass with the logits of
    every position, then per policy the full [B, T, V] masking, log-softmax and a token loop.

Every stage runs ``--reps`` times; the table shows the median wall time and the median CPU
time of the process (all threads: on a machine shared with other jobs the CPU time is the
steadier of the two) and each stage's share of its side's end-to-end CPU time. The shares say
what can be won where: the body and the unembedding are matmuls both sides must do (memclaim
does the unembedding only at the scored half of the rows), the rest is not. A second table
gives the issue's breakdown for the default and the census statistics (where_time_goes).

    python benchmarks/profile_scoring.py                         # both models, 16 windows, 3 reps
    python benchmarks/profile_scoring.py --models smollm2 --reps 5 --json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_scoring import POLICIES, load_windows, reference_scores  # noqa: E402


class Stage:
    """Median wall and process CPU seconds of a callable over ``reps`` runs."""

    def __init__(self, reps: int):
        self.reps = reps
        self.rows: list[dict] = []

    def __call__(self, side: str, name: str, fn, *, reps: int | None = None, note: str = ""):
        walls, cpus, out = [], [], None
        for _ in range(reps or self.reps):
            w, c = time.perf_counter(), time.process_time()
            out = fn()
            walls.append(time.perf_counter() - w)
            cpus.append(time.process_time() - c)
        self.rows.append(
            {
                "side": side,
                "stage": name,
                "wall_s": statistics.median(walls),
                "cpu_s": statistics.median(cpus),
                "note": note,
            }
        )
        return out


def profile_model(name: str, args) -> dict:
    import torch

    from memclaim.decoding import parse_policies
    from memclaim.models import load_model
    from memclaim.scoring.engine import (
        ALL_STATS,
        CENSUS_STATS,
        STAT_BLOCK_BYTES,
        STAT_NAMES,
        BatchScores,
        StatSet,
        TeacherForcingEngine,
        _chunk_rows,
        _stat_block_rows,
        score_rows,
        stat_blocks,
    )
    from memclaim.scoring.store import ScoreStore, UnitResult

    torch.set_num_threads(args.threads)
    st = Stage(args.reps)
    m = st("setup", "model load", lambda: load_model(name, load_weights=True), reps=1)
    lm = m.lm
    prompts, suffixes = st(
        "setup",
        "tokenize (sliding windows)",
        lambda: load_windows(m, args.windows, args.prefix, args.suffix),
        reps=1,
    )
    pols = parse_policies(POLICIES)
    B, S, Lp = len(prompts), len(suffixes[0]), len(prompts[0])
    ids = torch.tensor([p + s[:-1] for p, s in zip(prompts, suffixes)])  # [B, T]
    targets = torch.tensor(suffixes).view(-1)  # [B*S]
    with torch.inference_mode():
        # warm-up: allocator, MKL, attention kernels
        TeacherForcingEngine(lm, pols).score_batch(prompts[:2], suffixes[:2])
        hidden, _ = st("memclaim", "body (forward_hidden)", lambda: lm.forward_hidden(ids))
        h = hidden[:, Lp - 1 : Lp - 1 + S].reshape(B * S, -1)  # [B*S, D]
        rows = _chunk_rows(lm.vocab_size, 256 << 20)
        group = max(1, rows // S) * S

        def unembed():
            return [lm.logits(h[a : a + group]) for a in range(0, B * S, group)]

        zs = st("memclaim", f"unembedding, {B * S} rows, {group} per call, fresh (before)", unembed)
        z = torch.cat(zs)  # [B*S, V]
        del zs
        zbuf = torch.empty((min(group, B * S), lm.vocab_size))
        st(
            "memclaim",
            "unembedding into one reused buffer",
            lambda: [
                lm.logits(h[a : a + group], out=zbuf[: min(group, B * S - a)])
                for a in range(0, B * S, group)
            ],
        )
        del zbuf

        block = _stat_block_rows(lm.vocab_size, STAT_BLOCK_BYTES)
        blocks = [
            bl
            for c0 in range(0, B * S, group)
            for bl in stat_blocks(c0, min(B * S, c0 + group), S, block)
        ]

        def stats_of(spec, pp=pols, per_window=False):
            ss = StatSet.of(spec)
            if per_window:  # the schedule before issue 30: one call per window
                return lambda: [
                    score_rows(z[a : a + S], targets[a : a + S], pp, ss) for a in range(0, B * S, S)
                ]
            return lambda: [score_rows(z[a:b], targets[a:b], pp, ss) for a, b in blocks]

        st(
            "memclaim",
            "log-softmax alone (T = 1, same blocks)",
            lambda: [torch.log_softmax(z[a:b], dim=-1) for a, b in blocks],
        )
        st(
            "memclaim",
            "statistics: default, window by window (before)",
            stats_of(ALL_STATS, per_window=True),
        )
        st(
            "memclaim",
            "statistics: census, window by window (before)",
            stats_of(CENSUS_STATS, per_window=True),
        )
        st("memclaim", f"statistics: default, blocks of {block} rows", stats_of(ALL_STATS))
        st("memclaim", f"statistics: census, blocks of {block} rows", stats_of(CENSUS_STATS))
        for spec in STAT_NAMES:
            st("memclaim", f"  statistic {spec} alone", stats_of(spec))
        for p in pols:
            st("memclaim", f"  policy {p.spec} alone (with greedy+margin)", stats_of("census", [p]))
        del z
        ends = {}
        for label, spec in (("default", ALL_STATS), ("census", CENSUS_STATS)):
            eng = TeacherForcingEngine(lm, pols, stats=spec)
            ends[label] = st(
                "memclaim",
                f"engine end to end, {label} statistics",
                lambda eng=eng: eng.score_batch(prompts, suffixes),
            )
        scores = ends["default"]
        with tempfile.TemporaryDirectory() as tmp:
            store = ScoreStore(Path(tmp) / "store")
            keys = tuple(f"item{i:04d}" for i in range(B))
            st(
                "memclaim",
                "store write (one unit, Parquet)",
                lambda: store.write_unit(
                    UnitResult(
                        "u0",
                        "p0",
                        tuple(p.spec for p in pols),
                        keys,
                        tuple(len(p) for p in prompts),
                        scores,
                    )
                ),
            )
        assert isinstance(scores, BatchScores)
        # the peer's pattern, taken apart
        hf = lm.model
        full = torch.tensor([p + s for p, s in zip(prompts, suffixes)])  # [B, T+1]
        out = st("peer", "body + lm_head at every position", lambda: hf(full).logits)
        logits = out.float()
        hfull = hf.base_model(full).last_hidden_state.reshape(-1, h.shape[-1])  # [B*(T+1), D]
        st(
            "peer",
            "  of which lm_head at every position",
            lambda: torch.nn.functional.linear(hfull, hf.get_output_embeddings().weight),
        )
        del hfull
        for spec in POLICIES:

            def one(spec=spec):
                x = logits
                if spec == "greedy":
                    return x.argmax(-1)
                x = x.clone()
                if spec.startswith("temperature"):
                    x = x / 0.7
                if spec.startswith("top-k"):
                    kth = torch.topk(x, 40, dim=-1).values[..., -1:]
                    x = x.masked_fill(x < kth, float("-inf"))
                return torch.log_softmax(x, dim=-1)

            st("peer", f"policy {spec} on [B, T, V]", one)
        del logits, out
        st("peer", "peer end to end", lambda: reference_scores(hf, prompts, suffixes, B))
    res = {
        "model": name,
        "vocab": lm.vocab_size,
        "windows": B,
        "prefix": args.prefix,
        "suffix": args.suffix,
        "threads": args.threads,
        "rows": st.rows,
    }
    res["where"] = where_time_goes(st.rows, block)
    return res


def where_time_goes(rows: list[dict], block: int) -> dict:
    """The issue's breakdown (CPU seconds, median of the reps) for the default and the census
    statistic sets, from the stages above: body, unembedding, log-softmax, the policies, the
    per-token statistics, Python per window (the engine end to end less its body, unembedding
    and statistics: the per-window loops, the host-side assembly, tensor bookkeeping),
    tokenization, the store write and the model load. Log-softmax is part of the statistics
    that need it (token_logprob, token_moments); the policies' own log-softmaxes (temperature,
    top-K) are counted with the policies."""
    cpu = {r["stage"]: r["cpu_s"] for r in rows}
    unemb = next(v for k, v in cpu.items() if k.startswith("unembedding into"))
    lsm = cpu["log-softmax alone (T = 1, same blocks)"]
    pol = cpu["  statistic policy_logq alone"]
    out = {}
    for label in ("default", "census"):
        stats = cpu[f"statistics: {label}, blocks of {block} rows"]
        end = cpu[f"engine end to end, {label} statistics"]
        body = cpu["body (forward_hidden)"]
        logsm = lsm if label == "default" else 0.0  # the census set reads no T = 1 log-softmax
        out[label] = {
            "model load": cpu["model load"],
            "tokenization": cpu["tokenize (sliding windows)"],
            "body": body,
            "unembedding": unemb,
            "log-softmax": logsm,
            "policies": pol,
            "per-token statistics": max(0.0, stats - pol - logsm),
            "python per window": max(0.0, end - body - unemb - stats),
            "store write": cpu["store write (one unit, Parquet)"],
            "engine end to end": end,
        }
    return out


def print_where(res: dict) -> None:
    w = res["where"]
    print(f"  where the time goes (CPU s; {res['windows']} windows):")
    print(f"    {'':24} {'default':>9} {'share':>6} {'census':>9} {'share':>6}")
    for key in w["default"]:
        vals = []
        for label in ("default", "census"):
            v, e = w[label][key], w[label]["engine end to end"]
            share = (
                ""
                if key in ("model load", "tokenization", "store write")
                else f"{100 * v / e:5.1f}%"
            )
            vals.append(f"{v:9.3f} {share:>6}")
        print(f"    {key:24} {vals[0]} {vals[1]}")


def print_table(res: dict) -> None:
    rows = res["rows"]
    tot = {
        side: next(
            (r["cpu_s"] for r in rows if r["side"] == side and "end to end" in r["stage"]), None
        )
        for side in ("memclaim", "peer")
    }  # memclaim: shares of the default statistics' end to end
    print(
        f"\n== {res['model']} (vocabulary {res['vocab']:,}): {res['windows']} windows of "
        f"{res['prefix']}+{res['suffix']} tokens, {res['threads']} threads; median of the reps"
    )
    print(f"  {'side':9} {'stage':52} {'wall s':>8} {'CPU s':>8} {'share':>6}")
    for r in rows:
        t = tot.get(r["side"])
        share = f"{100 * r['cpu_s'] / t:5.1f}%" if t else ""
        print(
            f"  {r['side']:9} {r['stage'][:52]:52} {r['wall_s']:8.3f} {r['cpu_s']:8.3f} {share:>6}"
        )


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
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import memclaim  # noqa: F401  (MKL strict mode before the first matmul, as every memclaim run)

    print(f"load: {os.getloadavg()[0]:.2f} (1 min) on {os.cpu_count()} CPUs")
    out = []
    for name in args.models.split(","):
        res = profile_model(name, args)
        print_table(res)
        print_where(res)
        out.append(res)
    print(f"load: {os.getloadavg()[0]:.2f} (1 min)")
    if args.json:
        print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
