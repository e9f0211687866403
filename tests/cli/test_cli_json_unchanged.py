"""Issue 13 ("behaviour is unchanged"): the CLI's ``--json`` output and the report.json it writes
are the same after the CLI became a thin layer over the public API as before.

``tests/data/fixtures/cli_json_v1.json`` was recorded by this file's ``record`` mode with the CLI
*before* the change (commit 1f06415, `python tests/cli/test_cli_json_unchanged.py --record`), on
inputs cut from the tiny GPT's own corpus, scored by a tiny model with committed weights, on one
CPU. The test runs the same commands now and compares every field (issue 24: on any CPU, by design):

* strings, integers, booleans and the structure exactly;
* numbers computed in float64 from exact inputs (counts, ranks, the CSV scores, the commands'
  settings, the DP formulas, the DP-SGD curve): relative 1e-9 (absolute floor 1e-12). Another
  CPU's libm / SIMD paths (AVX2, AVX-512, NEON) differ by a few ulps (1e-16 relative), which the
  quantile solvers and the PLD's FFT here amplify by far less than 1e7;
* numbers that measure float round-off itself (the PLD's mass excess, a curve check's largest
  violation): absolute 1e-9 (they are below 1e-12 on every CPU; a real defect is >= 1e-6);
* numbers computed from the model's float32 forward pass: the worst-case float32 bound of
  :func:`float32_bounds`, computed from the fixture model's own sizes and weights (every
  reordered sum of the pass moves by at most its length x u32 x the sum of its magnitudes,
  Higham, Accuracy and Stability of Numerical Algorithms, §3.1): 8.1e-5 nats per token and
  6.5e-4 per 8-token score, in log space; relative, for numbers exponentiated from it (budgets);
  divided by the smallest next-token std for min-k%++'s standardized scores. Thread counts, BLAS
  kernels and MKL's reproducibility mode change only the order of these sums, so no CPU can move a
  value further;
* decisions (ranks, claims, p-values, counts above a threshold) exactly: the test first checks that
  no score lies within twice its bound of another it is compared with or of a threshold it is
  compared to (the fixture's closest pair is 1.9e-3 nats apart), so no CPU's rounding can flip one.

A real bug moves far more: the alpha sweep's Beta band with Beta(K, N-K) moves it by ~8%, the
budget view's control memorized rate by 1/12 (both are in tools/mutation_check.py against this test).
Wall-clock fields (seconds, windows/s, dates) and the temporary folder's path are left out.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import sys
from pathlib import Path

import pytest

from _paths import DATA

FIXTURE = DATA / "fixtures" / "cli_json_v1.json"
MODEL = DATA / "fixtures" / "store_v1" / "model"
VOLATILE = {
    "seconds",
    "windows_per_second",
    "created",
    "created_utc",
    "startup_seconds",
    "busy_seconds",
    "steady_windows_per_second",
    "memclaim_version",
    # the sha256 of scores.parquet's bytes: issue 14 writes the file in row groups (the same
    # table, other footer bytes) and a census stores only the statistics it reads; what the
    # file holds is compared by the store tests (tests/store/test_store_stats.py, test_census_book.py)
    "scores_sha256",
}


def make_inputs(d: Path) -> Path:
    """A tiny model with committed weights (the store_v1 fixture's random 1-layer GPT-2: the toy
    GPT is trained on each machine, and its float32 bits may differ from one CPU to another),
    members, controls, two documents, score files and exclusion lists cut deterministically
    from the tiny GPT's generated corpus."""
    from memclaim.train.toy import toy_data

    d.mkdir(parents=True, exist_ok=True)
    shutil.copytree(MODEL, d / "tiny-gpt")
    td = toy_data()
    mem = [r for r in td["planted"] if r["id"].startswith("member")][:12]
    ctl = [r for r in td["held_out"] if r["id"].startswith("control")][:12]
    (d / "m.jsonl").write_text(
        "".join(json.dumps({"id": r["id"], "text": r["text"]}) + "\n" for r in mem)
    )
    (d / "c.jsonl").write_text(
        "".join(json.dumps({"id": r["id"], "text": r["text"]}) + "\n" for r in ctl)
    )
    (d / "doc.txt").write_text(" ".join(r["text"] for r in mem[:3]))
    (d / "ctl.txt").write_text(" ".join(r["text"] for r in ctl[:3]))
    words = (d / "ctl.txt").read_text().split()
    (d / "spans.txt").write_text(
        "# a verified quotation\ntext: " + " ".join(words[3:7]) + "\n0 40\n"
    )
    (d / "excl.txt").write_text(ctl[0]["id"] + "\n")
    rows_m = "".join(f"m{i},{-3.0 - 0.7 * i}\n" for i in range(15))
    rows_c = "".join(f"c{i},{-6.0 - 0.9 * i}\n" for i in range(25))
    (d / "sm.csv").write_text("id,score\n" + rows_m)
    (d / "sc.csv").write_text("id,score\n" + rows_c)
    spec = {
        "settings": {"prefix_tokens": 8, "suffix_tokens": 8},
        "instances": [
            {
                "name": "fixture model",
                "model": "tiny-gpt",
                "members": "m.jsonl",
                "nonmembers": "c.jsonl",
                "baseline": {"kappa": 0.01},
                "informed": {"successes": 3, "trials": 12},
            },
            {
                "name": "pre-scored",
                "members_run": {"store": "../out/score", "run": "passages:m.jsonl"},
                "nonmembers_run": {"store": "../out/score", "run": "passages:c.jsonl"},
            },
        ],
    }
    (d / "instances.json").write_text(json.dumps(spec))
    return d


def commands(d: Path, out: Path) -> list[tuple[str, list[str], str | None]]:
    """(name, argv, report folder or None)."""
    S = ["--prefix-tokens", "8", "--suffix-tokens", "8", "--no-progress", "--json"]
    store = str(out / "score")
    M = str(d / "tiny-gpt")
    return [
        (
            "score",
            [
                "score",
                M,
                "--input",
                f"{d}/m.jsonl",
                "--policy",
                "full",
                "--policy",
                "top-k:40",
                "--policy",
                "greedy",
                "--out",
                store,
                *S,
            ],
            None,
        ),
        (
            "score-controls",
            [
                "score",
                M,
                "--input",
                f"{d}/c.jsonl",
                "--policy",
                "full",
                "--policy",
                "top-k:40",
                "--policy",
                "greedy",
                "--out",
                store,
                *S,
            ],
            None,
        ),
        (
            "score-again",
            [
                "score",
                M,
                "--input",
                f"{d}/m.jsonl",
                "--policy",
                "full",
                "--policy",
                "top-k:40",
                "--policy",
                "greedy",
                "--out",
                store,
                *S,
            ],
            None,
        ),
        (
            "test-store",
            [
                "test",
                "--candidates",
                store,
                "--run",
                "passages:m.jsonl",
                "--controls",
                store,
                "--controls-run",
                "passages:c.jsonl",
                "--policy",
                "full",
                "--alpha",
                "0.1",
                "--fdr",
                "0.2",
                "--budget-delta",
                "0.05",
                "--exclude-controls",
                f"{d}/excl.txt",
                "--out",
                str(out / "test-store"),
                "--json",
            ],
            str(out / "test-store"),
        ),
        (
            "test-files",
            [
                "test",
                "--candidates",
                f"{d}/sm.csv",
                "--controls",
                f"{d}/sc.csv",
                "--alpha",
                "0.1",
                "--fwer",
                "0.1",
                "--policy",
                "top-k:40",
                "--out",
                str(out / "test-files"),
                "--json",
            ],
            str(out / "test-files"),
        ),
        (
            "population",
            [
                "population",
                M,
                "--members",
                f"{d}/m.jsonl",
                "--controls",
                f"{d}/c.jsonl",
                "--policy",
                "full",
                "--policy",
                "greedy",
                "--alpha",
                "0.1",
                "--budget-delta",
                "0.05",
                "--exclude-control",
                "control-3",
                "--out",
                str(out / "population"),
                *S,
            ],
            str(out / "population"),
        ),
        (
            "census",
            [
                "census",
                M,
                "--document",
                f"{d}/doc.txt",
                "--control",
                f"{d}/ctl.txt",
                "--stride",
                "8",
                "--policy",
                "full",
                "--exclude-spans",
                f"{d}/spans.txt",
                "--reference-corpus",
                f"{d}/doc.txt",
                "--out",
                str(out / "census"),
                *S,
            ],
            str(out / "census"),
        ),
        ("budget", ["budget", "--p", "2.5e-5", "--n", "100000", "--json"], None),
        ("budget-log", ["budget", "--log10-p", "-400", "--log10-n", "400", "--json"], None),
        (
            "dp-bounds",
            [
                "dp",
                "bounds",
                "--epsilon",
                "1",
                "--neighbors",
                "add-remove",
                "--list-size",
                "4",
                "--risk",
                "0.1",
                "--baseline",
                "0.3,0.355",
                "--copies",
                "2",
                "--json",
            ],
            None,
        ),
        (
            "dp-bounds-mu",
            [
                "dp",
                "bounds",
                "--mu",
                "1",
                "--epsilon",
                "1",
                "--list-size",
                "4",
                "--risk",
                "0.1",
                "--neighbors",
                "replace-one",
                "--json",
            ],
            None,
        ),
        (
            "dp-bounds-audit",
            [
                "dp",
                "bounds",
                "--epsilon",
                "4",
                "--delta",
                "1e-5",
                "--list-size",
                "1",
                "--risk",
                "0.1",
                "--baseline",
                "0.001",
                "--successes",
                "12",
                "--trials",
                "40",
                "--neighbors",
                "add-remove",
                "--json",
            ],
            None,
        ),
        (
            "dp-bounds-dpsgd",
            [
                "dp",
                "bounds",
                "--noise-multiplier",
                "1.1",
                "--sampling-rate",
                "0.01",
                "--steps",
                "100",
                "--neighbors",
                "add-remove",
                "--list-size",
                "1",
                "--risk",
                "0.1",
                "--copies",
                "2",
                "--json",
            ],
            None,
        ),
        (
            "audit",
            [
                "audit",
                M,
                "--members",
                f"{d}/m.jsonl",
                "--controls",
                f"{d}/c.jsonl",
                "--prefix-tokens",
                "8",
                "--suffix-tokens",
                "8",
                "--alpha",
                "0.1",
                "--out",
                str(out / "audit"),
                "--no-progress",
                "--json",
            ],
            str(out / "audit"),
        ),
        (
            "audit-table",
            [
                "audit",
                "table",
                "--instances",
                f"{d}/instances.json",
                "--out",
                str(out / "table"),
                "--json",
            ],
            str(out / "table"),
        ),
    ]


def _norm(x, tmp: str):
    if isinstance(x, dict):
        return {k: _norm(v, tmp) for k, v in x.items() if k not in VOLATILE}
    if isinstance(x, list):
        return [_norm(v, tmp) for v in x]
    if isinstance(x, str):
        return x.replace(tmp, "<TMP>")
    return x


def run_all(root: Path) -> dict:
    from memclaim.cli.main import main

    d = make_inputs(root / "in")
    out = root / "out"
    tmp = str(root)
    got = {}
    import contextlib
    import io

    for name, argv, report in commands(d, out):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            rc = main(argv)
        assert rc == 0, (name, argv)
        rec = {"stdout": _norm(json.loads(buf.getvalue()), tmp)}
        if report is not None:
            rep = json.loads((Path(report) / "report.json").read_text(encoding="utf-8"))
            rec["report"] = _norm(rep, tmp)
        got[name] = rec
    return got


# Keys added since the fixture was recorded, each by a named change; everything recorded before
# stays, with its value. Issue 14: the device and numerics of a run (RunSummary.device, .dtype,
# .device_class, .numerics_drift) and the procedure's model.device_class (not in a CPU key).
# Issue 24: the DP-SGD curve's certified accuracy (its optimistic end and the PLD grids tried).
# Issue 25: how --epsilon beside --mu is read (guarantee_note).
# Issue 28: report.json records the command line that made it (schema 1.1); an audit records
# whether its model went through unlearning (the verifier's verdict applies only then).
ADDED_SINCE_FIXTURE = {
    "device",
    "dtype",
    "device_class",
    "numerics_drift",
    "optimistic",
    "eta_optimistic",
    "eta_accuracy",
    "grids_tried",
    "guarantee_note",
    "invocation",
    "unlearned",
    "verify",
}  # issue 28: every report's procedure states the verify step it applied

U32 = 2.0**-24  # float32 unit round-off
SUFFIX_TOKENS = 8  # every scored window of commands() has 8 suffix tokens
MODEL_COMMANDS = {
    "score",
    "score-controls",
    "score-again",
    "test-store",
    "population",
    "census",
    "audit",
    "audit-table",
}
F64 = (1e-9, 1e-12, "float64 from exact inputs")
ROUNDOFF = {
    "mass_excess",
    "tail_mass",
    "max_convexity_violation",
    "max_increase",
    "max_above_one_minus_alpha",
}
LOG_SCORES = {"score", "candidate_scores", "control_scores", "threshold"}  # natural log, one score
LOG10_ONE = {
    "threshold_log10_prob",
    "log10_p",
    "max_control_log10",
    "log10_n",
    "log10_budgets",
}  # log10, one score
LOG10_TWO = {"margins_log10", "margin_log10", "max_margin"}  # log10(score / tau)
EXPONENTIATED = {"n", "budgets"}  # exp(log score)
# Values that change with memclaim's version (issue 28 released 0.2.0; the fixture was recorded
# by 0.1.0): a procedure records the version, so its key and every run id and path derived from
# it change; the report schema is 1.1 (1.0 plus "invocation").
VERSIONED = {"procedure_key", "run_id", "run", "schema_version"}
# Sentences reworded on purpose since the fixture, each by a named change, compared with the
# change undone. Issue 28: every claim sentence names the decoding policy it was made under, and
# each report states the verify step it applied (a census has no conformal test).
REWORDED = (
    (
        re.compile(
            r", under (?:decoding policy .+?(?: \([^)]*\))?|a decoding policy that was not recorded)(?=: )"
        ),
        "",
    ),
    (
        re.compile(
            r" under (?:decoding policy [^ ]+(?: \([^)]*\))?|a decoding policy that was not recorded)(?= \(\d+ of)"
        ),
        "",
    ),
    (
        re.compile(r"^Greedy \(binary\) score under decoding policy .+?:(?= )"),
        "Greedy (binary) score:",
    ),
    # and H*'s note no longer says "needs only X bits" when X is H* itself
    (
        re.compile(r"not exact in general; here the exact group curve needs the same "),
        "not exact; the exact group curve needs only ",
    ),
)
REWORDED_KEYS = {"verify"}


def _reworded(x):
    if isinstance(x, str):
        for pat, rep in REWORDED:
            x = pat.sub(rep, x)
    return x


def float32_bounds(model_dir: Path = MODEL, *, moments: tuple[float, float] | None = None) -> dict:
    """Worst-case cross-CPU movement of the model's float32 numbers, from its size and weights.

    One token's log-probability lp = z_t - logsumexp(z) moves by at most 2 dz + (V - 1) u32 + 4 u32:
    the V-term sum of exponentials reordered, exp and log off by an ulp or two, and the logits z
    moved by dz = C u32 Z, where C is the total length of the dot products along one forward pass
    (3D for q, k, v; the positions for the attention scores and their weighted sum; D for the
    attention's projection; D and the MLP's width for the MLP; D for each layer norm and for the
    unembedding) and Z >= |z| bounds every logit (max over the vocabulary of sum |W_v| times the
    final layer norm's largest output). A score sums 8 tokens in float64; min-k%++'s token
    z = (lp - mu) / sigma moves by at most (2 + |z|) dlp / sigma."""
    from safetensors.numpy import load_file

    cfg = json.loads((model_dir / "config.json").read_text())
    w = load_file(str(model_dir / "model.safetensors"))
    D, V, P, L = cfg["n_embd"], cfg["vocab_size"], cfg["n_positions"], cfg["n_layer"]
    F = cfg.get("n_inner") or 4 * D
    wte, g, b = (
        w["transformer.wte.weight"],
        w["transformer.ln_f.weight"],
        w["transformer.ln_f.bias"],
    )
    import numpy as np

    Z = float(np.abs(wte).sum(axis=1).max() * (np.abs(g).max() * math.sqrt(D) + np.abs(b).max()))
    C = L * (3 * D + 2 * P + D + D + F + 2 * D) + D + D
    token = U32 * ((V - 1) + 4 + 2 * C * Z)
    out = {"token": token, "score": SUFFIX_TOKENS * token, "Z": Z, "C": C}
    if moments is not None:  # (smallest token std, largest |z|) of the run
        out["standardized"] = (2 + moments[1]) * token / moments[0]
    return out


def tolerance(command: str, key: str, attack: str | None, bounds: dict) -> tuple[float, float, str]:
    """(relative, absolute, why) for the float ``key`` of ``command`` (see the module docstring)."""
    if key in ROUNDOFF:
        return 0.0, 1e-9, "a measure of round-off itself"
    if command not in MODEL_COMMANDS:
        return F64
    if attack is not None and key in ("member_scores", "nonmember_scores", "threshold"):
        if attack in ("loss", "min-k"):
            return 0.0, bounds["token"], "a mean of float32 token log-probabilities"
        if attack in ("perplexity", "zlib"):
            return bounds["token"], 0.0, "exp of, or a ratio to, a mean token log-probability"
        return 0.0, bounds["standardized"], "min-k%++: token log-probabilities over their std"
    if command == "census" and key in ("log10_p", "log10_n", "log10_budgets", "n", "budgets"):
        return F64  # the census's tau_doc is an integer decade: its budget axis is exact
    if key in LOG_SCORES:
        return 0.0, bounds["score"], "a float32 window score"
    if key in LOG10_ONE:
        return 0.0, bounds["score"] / math.log(10), "a float32 window score, in log10"
    if key in LOG10_TWO:
        return 0.0, 2 * bounds["score"] / math.log(10), "two float32 window scores, in log10"
    if key in EXPONENTIATED:
        return (
            2 * bounds["score"],
            0.0,
            "exp of a float32 score: its absolute error becomes relative",
        )
    return F64  # rates, intervals, AUCs, coverages: functions of counts and ranks (decisions: see below)


def _compare(a, b, bounds, where="", command="", attack=None) -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        b = {k: v for k, v in b.items() if k in a or k not in ADDED_SINCE_FIXTURE}
        if set(a) != set(b):
            out.append(
                f"{where}: keys differ: only before {sorted(set(a) - set(b))}, only now {sorted(set(b) - set(a))}"
            )
        attack = a.get("attack", attack) if isinstance(a.get("attack"), str) else attack
        for k in set(a) & set(b):
            if k in VERSIONED or k in REWORDED_KEYS:
                continue
            out += _compare(a[k], b[k], bounds, f"{where}.{k}", command, attack)
        return out
    if isinstance(a, str) and isinstance(b, str):
        b = _reworded(b)
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{where}: lengths {len(a)} != {len(b)}"]
        return [
            e
            for i, (x, y) in enumerate(zip(a, b))
            for e in _compare(x, y, bounds, f"{where}[{i}]", command, attack)
        ]
    if isinstance(a, float) and isinstance(b, (int, float)) and not isinstance(b, bool):
        key = where.rsplit(".", 1)[-1].split("[", 1)[0]
        rel, tol, why = tolerance(command, key, attack, bounds)
        if (
            a == b
            or (math.isnan(a) and math.isnan(b))
            or math.isclose(a, b, rel_tol=rel, abs_tol=tol)
        ):
            return []
        return [f"{where}: {a!r} != {b!r} (beyond rel {rel:.2g} / abs {tol:.2g}: {why})"]
    if type(a) is not type(b) or a != b:
        return [f"{where}: {a!r} != {b!r}"]
    return []


def _closest(xs, ys) -> float:
    """The smallest |x - y| over x in xs, y in ys (inf if either is empty)."""
    import numpy as np

    xs, ys = np.sort(np.asarray(xs, float)), np.sort(np.asarray(ys, float))
    if xs.size == 0 or ys.size == 0:
        return math.inf
    i = np.clip(np.searchsorted(ys, xs), 1, ys.size - 1) if ys.size > 1 else np.zeros(xs.size, int)
    return float(
        np.min(np.minimum(np.abs(xs - ys[i - 1 if ys.size > 1 else 0]), np.abs(xs - ys[i])))
    )


def decision_gaps(rec: dict, bounds: dict, root: Path, now: dict | None = None) -> list[str]:
    """Every comparison the commands make, with the distance between its two sides in the
    recorded fixture and the bound a CPU could move each side by: the decisions are stable when
    every distance exceeds twice the bound. ``root``: this run's folder (the census's and the
    audit's stores, for the window scores the JSON does not carry)."""
    import numpy as np
    import pyarrow.parquet as pq

    from memclaim.claims.budget import min_log_prob_for_budget

    bad = []

    def need(what, gap, bound):
        if not gap > 2 * bound:
            bad.append(f"{what}: closest pair {gap:.3g} apart, a CPU may move each by {bound:.3g}")

    for name in ("population", "test-store"):
        pop = rec[name]["report"]["results"]["population"]
        cand, ctrl = pop["candidate_scores"], pop["control_scores"]
        need(
            f"{name}: candidates against controls (p-values, claims, sweep)",
            _closest(cand, ctrl),
            bounds["score"],
        )
        need(
            f"{name}: controls against controls (the K-th control, ties)",
            min(np.diff(np.sort(ctrl))),
            bounds["score"],
        )
        bud = pop["budget"]
        pmin = np.asarray(
            min_log_prob_for_budget(
                log_n=np.asarray(bud["log10_budgets"]) * math.log(10), delta=bud["delta"]
            )
        )
        # the budget axis itself moves with tau (a float32 score): 2 bounds on top of the score's own
        need(
            f"{name}: scores against the budget axis' p_min(n)",
            _closest(cand + ctrl, pmin),
            2 * bounds["score"],
        )
    for at in rec["audit"]["stdout"]["attacks"]:
        rel, tol, _ = tolerance("audit", "member_scores", at["attack"], bounds)
        m, n = at["member_scores"], at["nonmember_scores"]
        mag = max(abs(v) for v in m + n)
        # AUC and TPR compare members with non-members (the threshold is the K-th largest non-member:
        # which one it is moves it by less than their gap, and K - 1 non-members stay above it)
        need(
            f"audit {at['attack']}: members against non-members (AUC, TPR)",
            _closest(m, n),
            tol + rel * mag,
        )
    cen = rec["census"]["report"]["results"]["census"][0]
    tau10 = cen["log10_tau"]
    one10 = bounds["score"] / math.log(10)
    top = cen["threshold"]["max_control_log10"]
    need(
        "census: the top control window against its decade (tau_doc = 10^ceil)",
        abs(top - round(top)) or math.inf,
        one10,
    )
    # the run id of this run's store (it changes with memclaim's version: VERSIONED)
    run = (now or rec)["census"]["stdout"]["scoring"]["document"]["run_id"]
    doc10 = pq.read_table(
        root / "out" / "census" / "store" / "runs" / run / "scores.parquet", columns=["logq:full"]
    ).column(0).to_numpy() / math.log(10)
    margins = np.asarray(cen["curve"]["margins"])
    need(
        "census: document windows against tau_doc + the coverage curve's margins",
        _closest(doc10, tau10 + margins),
        one10,
    )
    bud = rec["census"]["report"]["results"]["budget"][0]
    pmin10 = np.asarray(
        min_log_prob_for_budget(
            log_n=np.asarray(bud["log10_budgets"]) * math.log(10), delta=bud["delta"]
        )
    ) / math.log(10)
    need(
        "census: document windows against the budget axis' p_min(n)", _closest(doc10, pmin10), one10
    )
    return bad


def token_moments(root: Path, rec: dict) -> tuple[float, float]:
    """(smallest next-token std, largest |(lp - mean) / std|) over the audit's scored windows:
    min-k%++'s denominators and standardized token scores."""
    import numpy as np
    import pyarrow.parquet as pq

    store = root / "out" / "audit" / "scores"
    std_min, z_max = math.inf, 0.0
    for run in rec["audit"]["stdout"]["scoring"].values():
        t = pq.read_table(
            store / "runs" / run["run_id"] / "scores.parquet",
            columns=["token_logprob", "token_mean", "token_std"],
        )
        lp, mu, sd = (
            np.concatenate([np.asarray(v) for v in t.column(c).to_pylist()]) for c in t.column_names
        )
        std_min, z_max = (
            min(std_min, float(sd.min())),
            max(z_max, float(np.max(np.abs(lp - mu) / sd))),
        )
    return std_min, z_max


def test_float32_bounds_of_the_fixture_model():
    """The stated bound, on the fixture model (D = 16, MLP 64, 64 positions, 1 layer, V = 280):
    C = 336 multiply-adds along a pass, |z| <= 1.6, so 8.1e-5 nats per token, 6.5e-4 per score."""
    b = float32_bounds()
    assert b["C"] == 336 and 1.5 < b["Z"] < 1.7
    assert 8e-5 < b["token"] < 8.2e-5 and b["score"] == SUFFIX_TOKENS * b["token"]


@pytest.mark.integration
def test_cli_json_and_reports_are_unchanged(tmp_path):
    before = _norm(
        json.loads(FIXTURE.read_text(encoding="utf-8")), "\0"
    )  # volatile keys dropped on both sides
    now = run_all(tmp_path)
    assert set(now) == set(before)
    bounds = float32_bounds(moments=token_moments(tmp_path, now))
    unstable = decision_gaps(before, bounds, tmp_path, now)
    assert not unstable, (
        "the fixture's inputs sit too close to a decision for any CPU:\n" + "\n".join(unstable)
    )
    problems = []
    for name in before:
        problems += _compare(before[name], now[name], bounds, name, name)
    assert not problems, "\n".join(problems[:40])


def rerecord(names: list[str]) -> None:
    """Record the named commands again (a number that was wrong, corrected by a named issue), every
    other entry of the fixture byte for byte as it was. Issue 24 item 3: dp-bounds-dpsgd (the
    DP-SGD curve from a PLD without float cancellation, and its certified accuracy)."""
    import contextlib
    import io
    import tempfile

    from memclaim.cli.main import main

    rec = json.loads(FIXTURE.read_text(encoding="utf-8"))
    root = Path(tempfile.mkdtemp(prefix="memclaim-cli-json-"))
    try:
        d = make_inputs(root / "in")
        for name, argv, report in commands(d, root / "out"):
            if name not in names:
                continue
            assert report is None, "re-recording reads --json output only"
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                assert main(argv) == 0, argv
            rec[name] = {"stdout": _norm(json.loads(buf.getvalue()), str(root))}
    finally:
        shutil.rmtree(root, ignore_errors=True)
    FIXTURE.write_text(
        json.dumps(rec, indent=1, sort_keys=True, allow_nan=True) + "\n", encoding="utf-8"
    )


if __name__ == "__main__":  # pragma: no cover - recording the fixture
    import tempfile

    if "--rerecord" in sys.argv:
        rerecord(sys.argv[sys.argv.index("--rerecord") + 1].split(","))
        sys.exit(f"re-recorded {sys.argv[sys.argv.index('--rerecord') + 1]} in {FIXTURE}")
    if "--record" not in sys.argv:
        sys.exit(
            "usage: python tests/cli/test_cli_json_unchanged.py --record | --rerecord NAME[,NAME]"
        )
    root = Path(tempfile.mkdtemp(prefix="memclaim-cli-json-"))
    try:
        rec = run_all(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    FIXTURE.write_text(
        json.dumps(rec, indent=1, sort_keys=True, allow_nan=True) + "\n", encoding="utf-8"
    )
    print(f"wrote {FIXTURE}")
