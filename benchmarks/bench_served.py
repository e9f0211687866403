#!/usr/bin/env python
"""Served scoring (issue 27): the same windows through a running inference server with memclaim's
backend (batched, concurrent), through a plain client loop (one request per window, one at a
time: the server's own time with no client work to speak of), and through memclaim's local
scoring of the same model in float32: throughput of each, memclaim's client overhead, and the
largest difference between served and local scores.

Start the server first (docs/served.md), e.g. vLLM's CPU build on memclaim's SmolLM2 folder:

    VLLM_HOST_IP=127.0.0.1 python -m vllm.entrypoints.openai.api_server \\
        --model $MEMCLAIM_CACHE/models/smollm2-<hash> --served-model-name smollm2 --dtype float32 \\
        --max-logprobs 64 --host 127.0.0.1 --port 8811 --enforce-eager --max-model-len 2048

    python benchmarks/bench_served.py --url http://127.0.0.1:8811 --windows 64 --rounds 3

The three configurations run in interleaved rounds (served, plain loop, local, then again) so a
shared machine slows them alike; the medians over rounds are reported with the load average.
Model loading and the server's start are excluded (the local model is loaded once before timing;
the first served run connects and probes, and every round connects anew, as a user's run does).
"Client overhead" is the time memclaim spends building requests and reading answers (all
threads) over the time its requests were in flight; "max |diff|" is the largest absolute
difference of log q between served and local scoring, per window (sum over the suffix) and per
target token, for every policy the server gives exactly.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch loads (see tests/conftest.py)

ROOT = Path(__file__).resolve().parents[1]


def texts(n: int) -> list[str]:
    rows = [
        json.loads(x)
        for x in (ROOT / "tests" / "data" / "kjv_verses.jsonl").read_text().splitlines()
        if x.strip()
    ]
    return [r["text"] for r in rows[:n]]


def scores_table(res):
    import pyarrow.parquet as pq

    return (
        pq.read_table(Path(res.store) / "runs" / res.run_id / "scores.parquet")
        .to_pandas()
        .set_index("window_id")
    )


def plain_loop(url: str, model_id: str, windows: list[list[int]], n_target: int, k: int) -> float:
    """One request per window, one at a time; sums the targets' log-probs (the full policy)."""
    u = urlsplit(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    t0 = time.perf_counter()
    for ids in windows:
        body = json.dumps(
            {
                "model": model_id,
                "prompt": [ids],
                "max_tokens": 1,
                "prompt_logprobs": k,
                "add_special_tokens": False,
            }
        ).encode()
        c.request(
            "POST", "/v1/completions", body=body, headers={"Content-Type": "application/json"}
        )
        r = c.getresponse()
        d = json.loads(r.read())
        plp = d["choices"][0]["prompt_logprobs"]
        sum(plp[j][str(ids[j])]["logprob"] for j in range(len(ids) - n_target, len(ids)))
    wall = time.perf_counter() - t0
    c.close()
    return wall


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--url", required=True)
    ap.add_argument(
        "--model", default="smollm2", help="memclaim's name or folder of the served model"
    )
    ap.add_argument("--windows", type=int, default=64)
    ap.add_argument("--prefix-tokens", type=int, default=16)
    ap.add_argument("--suffix-tokens", type=int, default=16)
    ap.add_argument("--policies", default="full,greedy,top-k:40")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-concurrency", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=16, help="windows per request (memclaim)")
    ap.add_argument("--threads", type=int, default=2, help="torch threads of the local run")
    a = ap.parse_args()

    import memclaim as mc

    pols = a.policies.split(",")
    T = texts(a.windows)
    local_model = mc.load_model(a.model, dtype="float32")
    work = Path(tempfile.mkdtemp(prefix="bench-served-"))
    rows = {"served": [], "plain": [], "local": []}
    overhead, diffs = [], {}
    try:
        for r in range(a.rounds):
            out = work / f"served{r}"
            t0 = time.perf_counter()
            served = mc.score(
                a.model,
                T,
                prefix_tokens=a.prefix_tokens,
                suffix_tokens=a.suffix_tokens,
                policies=pols,
                backend="openai",
                url=a.url,
                max_concurrency=a.max_concurrency,
                batch_size=a.batch_size,
                out=out,
                progress=False,
            )
            rows["served"].append(time.perf_counter() - t0)
            bs = served.summary.backend_stats
            overhead.append(bs["client_seconds"] / max(bs["seconds_in_requests"], 1e-9))
            st = scores_table(served)
            n = len(st)
            # the plain loop sends the same ids memclaim sent: start of text, then the window's tokens
            tok = local_model.tokenizer
            ids = []
            for wid, row in st.iterrows():
                full = list(local_model.sot_ids) + tok.encode(
                    row["prefix_text"] + row["suffix_text"]
                )
                assert full[-a.suffix_tokens :] == list(row["suffix_ids"]), wid
                ids.append(full)
            k = bs["top_logprobs"]
            rows["plain"].append(plain_loop(a.url, bs["model_id"], ids, a.suffix_tokens, k))
            t0 = time.perf_counter()
            local = mc.score(
                local_model,
                T,
                prefix_tokens=a.prefix_tokens,
                suffix_tokens=a.suffix_tokens,
                policies=pols,
                out=work / f"local{r}",
                threads=a.threads,
                progress=False,
            )
            rows["local"].append(time.perf_counter() - t0)
            if r == 0:
                lt = scores_table(local).loc[st.index]
                import numpy as np

                for p in pols:
                    if not bool(st[f"logq_exact:{p}"].all()):
                        continue
                    x, y = st[f"logq:{p}"].to_numpy(), lt[f"logq:{p}"].to_numpy()
                    both = np.isfinite(x) & np.isfinite(y)
                    same_inf = (~np.isfinite(x)) & (x == y)
                    tx = np.stack(st[f"token_logq:{p}"].to_numpy())
                    ty = np.stack(lt[f"token_logq:{p}"].to_numpy())
                    tb = np.isfinite(tx) & np.isfinite(ty)
                    diffs[p] = {
                        "window_max": float(np.max(np.abs(x[both] - y[both])))
                        if both.any()
                        else 0.0,
                        "token_max": float(np.max(np.abs(tx[tb] - ty[tb]))) if tb.any() else 0.0,
                        "token_median": float(np.median(np.abs(tx[tb] - ty[tb])))
                        if tb.any()
                        else 0.0,
                        "windows_compared": int(both.sum()),
                        "infinite_agree": int(same_inf.sum()),
                        "infinite_disagree": int(
                            ((~np.isfinite(x)) | (~np.isfinite(y))).sum() - same_inf.sum()
                        ),
                    }
                greedy_agree = int((st["greedy_match"] == lt["greedy_match"]).sum())
    finally:
        shutil.rmtree(work, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in rows.items()}
    print(
        f"served scoring: {n} windows of {a.prefix_tokens}+{a.suffix_tokens} tokens, policies {', '.join(pols)}, "
        f"{a.rounds} interleaved rounds, load average {os.getloadavg()[0]:.2f}"
    )
    print(
        f"server: {bs['server']} {bs['version']} at {bs['url']} (model {bs['model_id']}, top-{k} log-probs)"
    )
    print(f"{'configuration':<46} {'median s':>9} {'windows/s':>10}")
    print(
        f"{'memclaim served (' + str(a.batch_size) + ' windows/request, ' + str(a.max_concurrency) + ' in flight)':<46} "
        f"{med['served']:>9.2f} {n / med['served']:>10.2f}"
    )
    print(
        f"{'plain client loop (1 window/request, serial)':<46} {med['plain']:>9.2f} {n / med['plain']:>10.2f}"
    )
    print(
        f"{'memclaim local float32 (' + str(a.threads) + ' threads)':<46} {med['local']:>9.2f} {n / med['local']:>10.2f}"
    )
    print(
        f"speed-up of batching/concurrency over the plain loop: {med['plain'] / med['served']:.2f}x "
        f"(each round's runs: served {', '.join(f'{x:.2f}' for x in rows['served'])}; plain "
        f"{', '.join(f'{x:.2f}' for x in rows['plain'])})"
    )
    print(
        f"memclaim client overhead: median {100 * statistics.median(overhead):.2f}% of the time its requests were in "
        "flight (includes one connect + probe per run)"
    )
    print(f"greedy flags equal to local on {greedy_agree} of {n} windows")
    for p, d in diffs.items():
        print(
            f"  {p:<10} max |diff| per window {d['window_max']:.3g} nats, per token max {d['token_max']:.3g} median "
            f"{d['token_median']:.3g} ({d['windows_compared']} finite windows; -inf in both {d['infinite_agree']}, "
            f"in one only {d['infinite_disagree']})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
