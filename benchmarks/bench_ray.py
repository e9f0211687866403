#!/usr/bin/env python
"""Ray scaling: 1 and 2 local workers (one torch thread each) against the local backend with the
same total threads, and the overhead Ray adds per work unit.

Every configuration scores the same windows into a fresh store. Model loads and Ray start-up
are excluded: the local model is loaded before timing, and both Ray pools (1 and 2 workers)
are started and warmed up first (their actors keep the model between runs). The four
configurations run in interleaved rounds (local 1 thread, local 2 threads, Ray 1x1, Ray 2x1,
then again), so a machine shared with other work slows them alike; ratios are taken within a
round and the median over rounds is reported, with the load average.

Two measures per run:
  * wall clock: windows/s as the user sees it;
  * CPU time of the whole process tree (this driver, the Ray workers, and the Ray daemons that
    ray.init started: raylet, GCS, ...), which the other users of a shared machine do not
    inflate: the CPU cost of a unit under each backend.

    python benchmarks/bench_ray.py                      # tiny GPT
    python benchmarks/bench_ray.py --models toy,smollm2 --windows 256 --unit-size 32
    python benchmarks/bench_ray.py --write driver       # workers return scores, the driver writes

Columns: "CPU-bound ceiling" = cores the configuration can use (1 or 2) x 1000 / CPU ms per
window: the rate it would reach if its threads never waited for a core, a projection for an
idle machine (on a shared one, Linux's per-session fair share caps this whole process tree at
whatever the other sessions leave, however many workers it runs). "vs local" divides by the local backend with the same total threads (Ray 1x1 by
local 1 thread, Ray 2x1 by local 2 threads); "scaling" divides the 2-worker (or 2-thread) rate
by the 1-worker (1-thread) rate. Overhead per unit = time (or CPU time) per unit with one Ray
worker minus the same locally with one thread: dispatch, transfer, the driver's manifest write,
the worker's file write, Ray's daemons.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch loads (see tests/conftest.py)

POLICIES = ("greedy", "top-k:40", "temperature:0.7")
CONFIGS = ("local 1t", "local 2t", "ray 1x1t", "ray 2x1t")


def tree_cpu_seconds() -> float:
    """user + system CPU seconds of this process and every live descendant (Ray's included)."""
    import psutil

    me = psutil.Process()
    total = sum(me.cpu_times()[:2])
    for child in me.children(recursive=True):
        try:
            total += sum(child.cpu_times()[:2])
        except psutil.NoSuchProcess:
            pass
    return total


def _windows(model, n: int, prefix: int, suffix: int, seed: int = 0):
    import numpy as np

    from memclaim.text.io import Record
    from memclaim.text.windows import passage_windows
    from memclaim.train.corpus import MarkovZipf

    gen = MarkovZipf(n_words=400, seed=seed)
    rng = np.random.default_rng(seed)
    words = max(8, int(1.3 * (prefix + suffix)))
    recs = [Record(f"w{i}", gen.passage(rng, n_words=words)) for i in range(n)]
    return passage_windows(recs, model.tokenizer, prefix_tokens=prefix, suffix_tokens=suffix)


def _score(model, ws, args, backend=None) -> dict:
    from memclaim.decoding import parse_policies
    from memclaim.scoring.prompts import PromptRule
    from memclaim.scoring.runner import run_scoring

    out = Path(tempfile.mkdtemp(prefix="bench-ray-"))
    try:
        c0, t0 = tree_cpu_seconds(), time.perf_counter()
        s = run_scoring(
            model,
            ws,
            policies=parse_policies(list(POLICIES)),
            prefix_tokens=args.prefix,
            suffix_tokens=args.suffix,
            prompt_rule=PromptRule(),
            out_dir=out / "store",
            batch_size=args.batch,
            unit_size=args.unit_size,
            backend=backend,
        )
        wall, cpu = time.perf_counter() - t0, tree_cpu_seconds() - c0
        return {"summary": s, "wall": wall, "cpu": cpu, "rate": s.n_items / wall}
    finally:
        shutil.rmtree(out, ignore_errors=True)


def bench_model(name: str, args) -> dict:
    import torch

    from memclaim.decoding import parse_policies
    from memclaim.models import load_model
    from memclaim.scoring.ray_backend import RayBackend

    model = load_model(name, dtype=args.dtype, load_weights=True)
    ws = _windows(model, args.windows, args.prefix, args.suffix)
    warm = _windows(model, 2 * args.unit_size, args.prefix, args.suffix, seed=1)
    pol = parse_policies(list(POLICIES))
    pools = {
        w: RayBackend(
            model, pol, batch_size=args.batch, workers=w, threads_per_worker=1, write=args.write
        )
        for w in (1, 2)
    }
    rounds = []
    try:
        for p in pools.values():
            p.start()
            _score(model, warm, args, backend=p)  # every actor loads the model
        for threads in (1, 2):
            torch.set_num_threads(threads)
            _score(model, warm, args)
        for r in range(args.repeats):
            row = {}
            for cfg in CONFIGS:
                if cfg.startswith("local"):
                    torch.set_num_threads(int(cfg.split()[1][0]))
                    row[cfg] = _score(model, ws, args)
                else:
                    torch.set_num_threads(2)
                    row[cfg] = _score(model, ws, args, backend=pools[int(cfg.split()[1][0])])
            rounds.append(row)
            print(
                f"  round {r + 1}/{args.repeats}: "
                + ", ".join(f"{c} {row[c]['rate']:.1f} w/s" for c in CONFIGS)
                + f"  (load {os.getloadavg()[0]:.1f})",
                file=sys.stderr,
                flush=True,
            )
    finally:
        for p in pools.values():
            p.close()
    first = rounds[0]["local 1t"]["summary"]
    n, n_units = first.n_items, first.n_units
    med = statistics.median

    def ratio(a, b, key="rate"):
        return med(r[a][key] / r[b][key] for r in rounds)

    return {
        "model": name,
        "windows": n,
        "units": n_units,
        "unit_size": args.unit_size,
        "rounds": len(rounds),
        "rate": {c: med(r[c]["rate"] for r in rounds) for c in CONFIGS},
        "best_rate": {c: max(r[c]["rate"] for r in rounds) for c in CONFIGS},
        "cpu_ms_per_window": {c: 1e3 * med(r[c]["cpu"] for r in rounds) / n for c in CONFIGS},
        "vs_local": {
            "ray 1x1t": ratio("ray 1x1t", "local 1t"),
            "ray 2x1t": ratio("ray 2x1t", "local 2t"),
        },
        "scaling": {"ray": ratio("ray 2x1t", "ray 1x1t"), "local": ratio("local 2t", "local 1t")},
        "overhead_ms_per_unit": 1e3
        * med((r["ray 1x1t"]["wall"] - r["local 1t"]["wall"]) / n_units for r in rounds),
        "overhead_cpu_ms_per_unit": 1e3
        * med((r["ray 1x1t"]["cpu"] - r["local 1t"]["cpu"]) / n_units for r in rounds),
        "unit_ms_local_1t": 1e3 * med(r["local 1t"]["wall"] for r in rounds) / n_units,
        "unit_cpu_ms_local_1t": 1e3 * med(r["local 1t"]["cpu"] for r in rounds) / n_units,
        "ray_stats": rounds[-1]["ray 2x1t"]["summary"].backend_stats,
    }


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--models", default="toy", help="comma-separated: toy, smollm2, gemma3-270m, a folder"
    )
    ap.add_argument("--windows", type=int, default=1024)
    ap.add_argument("--unit-size", type=int, default=64)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--prefix", type=int, default=32)
    ap.add_argument("--suffix", type=int, default=32)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--repeats", type=int, default=3, help="interleaved rounds")
    ap.add_argument("--write", choices=["auto", "worker", "driver"], default="auto")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    import ray

    load_before = os.getloadavg()
    # 3 logical CPUs: the 1-worker and the 2-worker pools stay up side by side (idle actors use
    # no CPU); only one configuration runs at a time, on the machine's 2 cores
    ray.init(
        address="local",
        num_cpus=3,
        include_dashboard=False,
        logging_level="ERROR",
        object_store_memory=100 << 20,
        _system_config={"worker_niceness": 0},
    )  # as RayBackend does, see there
    try:
        results = [bench_model(m.strip(), args) for m in args.models.split(",") if m.strip()]
    finally:
        ray.shutdown()
    load_after = os.getloadavg()
    if args.json:
        print(
            json.dumps(
                {
                    "results": results,
                    "loadavg_before": load_before,
                    "loadavg_after": load_after,
                    "cpus": os.cpu_count(),
                    "ray": ray.__version__,
                },
                indent=1,
                default=str,
            )
        )
        return 0
    print(
        f"# Ray scaling on {os.cpu_count()} CPUs, ray {ray.__version__}; policies {', '.join(POLICIES)}; "
        f"{args.prefix}+{args.suffix} tokens, {args.dtype}, units of {args.unit_size}, batch {args.batch}; "
        f"unit files written by: {args.write}"
    )
    print(
        f"# load average before {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}, "
        f"after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}; medians over "
        f"{args.repeats} interleaved rounds"
    )
    print()
    print(
        "| model | windows | config | windows/s (median, best) | CPU ms/window | CPU-bound ceiling, windows/s | "
        "vs local, same threads | scaling 1->2 |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        for cfg in CONFIGS:
            vs = f"{r['vs_local'][cfg]:.2f}" if cfg in r["vs_local"] else "-"
            sc = (
                f"{r['scaling']['ray']:.2f}"
                if cfg == "ray 2x1t"
                else f"{r['scaling']['local']:.2f}"
                if cfg == "local 2t"
                else "-"
            )
            cores = 2 if cfg.endswith("2t") or cfg.startswith("ray 2") else 1
            ceiling = cores * 1e3 / r["cpu_ms_per_window"][cfg]
            print(
                f"| {r['model']} | {r['windows']} | {cfg} | {r['rate'][cfg]:.1f} ({r['best_rate'][cfg]:.1f}) | "
                f"{r['cpu_ms_per_window'][cfg]:.2f} | {ceiling:.0f} | {vs} | {sc} |"
            )
    print()
    for r in results:
        per = r["ray_stats"].get("per_worker", [])
        print(
            f"{r['model']}: {r['units']} units of {r['unit_size']}; a unit takes {r['unit_ms_local_1t']:.0f} ms "
            f"({r['unit_cpu_ms_local_1t']:.0f} ms CPU) locally on 1 thread; Ray overhead per unit "
            f"{r['overhead_ms_per_unit']:.1f} ms wall, {r['overhead_cpu_ms_per_unit']:.1f} ms CPU; "
            "2 workers, last round: "
            + ", ".join(
                f"worker {w['worker']} {w['windows_per_second']:.1f} windows/s busy ({w['units']} units)"
                for w in per
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
