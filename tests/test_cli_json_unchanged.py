"""Issue 13 ("behaviour is unchanged"): the CLI's ``--json`` output and the report.json it writes
are the same after the CLI became a thin layer over the public API as before.

``tests/data/fixtures/cli_json_v1.json`` was recorded by this file's ``record`` mode with the CLI
*before* the change (commit 1f06415, `python tests/test_cli_json_unchanged.py --record`), on
inputs cut from the tiny GPT's own corpus, scored by a tiny model with committed weights. The test runs the same commands now and compares
every field: strings, integers, booleans and the structure exactly, floats to a relative 1e-6
(float32 matmul bits may differ on another CPU; numbers that moved would differ by far more).
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

FIXTURE = Path(__file__).parent / "data" / "fixtures" / "cli_json_v1.json"
MODEL = Path(__file__).parent / "data" / "fixtures" / "store_v1" / "model"
VOLATILE = {"seconds", "windows_per_second", "created", "created_utc", "startup_seconds", "busy_seconds",
            "steady_windows_per_second", "memclaim_version",
            # the sha256 of scores.parquet's bytes: issue 14 writes the file in row groups (the same
            # table, other footer bytes) and a census stores only the statistics it reads; what the
            # file holds is compared by the store tests (tests/test_store_stats.py, test_census_book.py)
            "scores_sha256"}


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
    (d / "m.jsonl").write_text("".join(json.dumps({"id": r["id"], "text": r["text"]}) + "\n" for r in mem))
    (d / "c.jsonl").write_text("".join(json.dumps({"id": r["id"], "text": r["text"]}) + "\n" for r in ctl))
    (d / "doc.txt").write_text(" ".join(r["text"] for r in mem[:3]))
    (d / "ctl.txt").write_text(" ".join(r["text"] for r in ctl[:3]))
    words = (d / "ctl.txt").read_text().split()
    (d / "spans.txt").write_text("# a verified quotation\ntext: " + " ".join(words[3:7]) + "\n0 40\n")
    (d / "excl.txt").write_text(ctl[0]["id"] + "\n")
    rows_m = "".join(f"m{i},{-3.0 - 0.7 * i}\n" for i in range(15))
    rows_c = "".join(f"c{i},{-6.0 - 0.9 * i}\n" for i in range(25))
    (d / "sm.csv").write_text("id,score\n" + rows_m)
    (d / "sc.csv").write_text("id,score\n" + rows_c)
    spec = {"settings": {"prefix_tokens": 8, "suffix_tokens": 8},
            "instances": [{"name": "fixture model", "model": "tiny-gpt", "members": "m.jsonl", "nonmembers": "c.jsonl",
                           "baseline": {"kappa": 0.01}, "informed": {"successes": 3, "trials": 12}},
                          {"name": "pre-scored", "members_run": {"store": "../out/score", "run": "passages:m.jsonl"},
                           "nonmembers_run": {"store": "../out/score", "run": "passages:c.jsonl"}}]}
    (d / "instances.json").write_text(json.dumps(spec))
    return d


def commands(d: Path, out: Path) -> list[tuple[str, list[str], str | None]]:
    """(name, argv, report folder or None)."""
    S = ["--prefix-tokens", "8", "--suffix-tokens", "8", "--no-progress", "--json"]
    store = str(out / "score")
    M = str(d / "tiny-gpt")
    return [
        ("score", ["score", M, "--input", f"{d}/m.jsonl", "--policy", "full", "--policy", "top-k:40",
                   "--policy", "greedy", "--out", store, *S], None),
        ("score-controls", ["score", M, "--input", f"{d}/c.jsonl", "--policy", "full", "--policy", "top-k:40",
                            "--policy", "greedy", "--out", store, *S], None),
        ("score-again", ["score", M, "--input", f"{d}/m.jsonl", "--policy", "full", "--policy", "top-k:40",
                         "--policy", "greedy", "--out", store, *S], None),
        ("test-store", ["test", "--candidates", store, "--run", "passages:m.jsonl", "--controls", store,
                        "--controls-run", "passages:c.jsonl", "--policy", "full", "--alpha", "0.1", "--fdr", "0.2",
                        "--budget-delta", "0.05", "--exclude-controls", f"{d}/excl.txt",
                        "--out", str(out / "test-store"), "--json"], str(out / "test-store")),
        ("test-files", ["test", "--candidates", f"{d}/sm.csv", "--controls", f"{d}/sc.csv", "--alpha", "0.1",
                        "--fwer", "0.1", "--policy", "top-k:40", "--out", str(out / "test-files"), "--json"],
         str(out / "test-files")),
        ("population", ["population", M, "--members", f"{d}/m.jsonl", "--controls", f"{d}/c.jsonl",
                        "--policy", "full", "--policy", "greedy", "--alpha", "0.1", "--budget-delta", "0.05",
                        "--exclude-control", "control-3", "--out", str(out / "population"), *S],
         str(out / "population")),
        ("census", ["census", M, "--document", f"{d}/doc.txt", "--control", f"{d}/ctl.txt", "--stride", "8",
                    "--policy", "full", "--exclude-spans", f"{d}/spans.txt", "--reference-corpus", f"{d}/doc.txt",
                    "--out", str(out / "census"), *S], str(out / "census")),
        ("budget", ["budget", "--p", "2.5e-5", "--n", "100000", "--json"], None),
        ("budget-log", ["budget", "--log10-p", "-400", "--log10-n", "400", "--json"], None),
        ("dp-bounds", ["dp", "bounds", "--epsilon", "1", "--neighbors", "add-remove", "--list-size", "4", "--risk",
                       "0.1", "--baseline", "0.3,0.355", "--copies", "2", "--json"], None),
        ("dp-bounds-mu", ["dp", "bounds", "--mu", "1", "--epsilon", "1", "--list-size", "4", "--risk", "0.1",
                          "--neighbors", "replace-one", "--json"], None),
        ("dp-bounds-audit", ["dp", "bounds", "--epsilon", "4", "--delta", "1e-5", "--list-size", "1", "--risk", "0.1",
                             "--baseline", "0.001", "--successes", "12", "--trials", "40", "--neighbors",
                             "add-remove", "--json"], None),
        ("dp-bounds-dpsgd", ["dp", "bounds", "--noise-multiplier", "1.1", "--sampling-rate", "0.01", "--steps", "100",
                             "--neighbors", "add-remove", "--list-size", "1", "--risk", "0.1", "--copies", "2",
                             "--json"], None),
        ("audit", ["audit", M, "--members", f"{d}/m.jsonl", "--controls", f"{d}/c.jsonl", "--prefix-tokens",
                   "8", "--suffix-tokens", "8", "--alpha", "0.1", "--out", str(out / "audit"), "--no-progress",
                   "--json"], str(out / "audit")),
        ("audit-table", ["audit", "table", "--instances", f"{d}/instances.json", "--out", str(out / "table"), "--json"],
         str(out / "table")),
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
ADDED_SINCE_FIXTURE = {"device", "dtype", "device_class", "numerics_drift",
                       # issue 28: report.json records the command line that made it (schema 1.1); an
                       # audit records whether its model went through unlearning (the verifier's verdict
                       # applies only then)
                       "invocation", "unlearned"}
# Values that change with memclaim's version (issue 28 released 0.2.0; the fixture was recorded
# by 0.1.0): a procedure records the version, so its key and every run id and path derived from
# it change; the report schema is 1.1 (1.0 plus "invocation").
VERSIONED = {"procedure_key", "run_id", "run", "schema_version"}
# Sentences reworded on purpose since the fixture, each by a named change, compared with the
# change undone. Issue 28: every claim sentence names the decoding policy it was made under, and
# each report states the verify step it applied (a census has no conformal test).
REWORDED = (
    (re.compile(r", under (?:decoding policy [^:(]+(?: \([^)]*\))?|a decoding policy that was not recorded)(?=: )"), ""),
    (re.compile(r" under (?:decoding policy [^ ]+(?: \([^)]*\))?|a decoding policy that was not recorded)(?= \(\d+ of)"), ""),
    (re.compile(r"^Greedy \(binary\) score under decoding policy [^:]+:"), "Greedy (binary) score:"),
    # and H*'s note no longer says "needs only X bits" when X is H* itself
    (re.compile(r"not exact in general; here the exact group curve needs the same "), "not exact; the exact group "
     "curve needs only "),
)
REWORDED_KEYS = {"verify"}


def _reworded(x):
    if isinstance(x, str):
        for pat, rep in REWORDED:
            x = pat.sub(rep, x)
    return x


def _compare(a, b, where="") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        b = {k: v for k, v in b.items() if k in a or k not in ADDED_SINCE_FIXTURE}
        if set(a) != set(b):
            out.append(f"{where}: keys differ: only before {sorted(set(a) - set(b))}, only now {sorted(set(b) - set(a))}")
        for k in set(a) & set(b):
            if k in VERSIONED or k in REWORDED_KEYS:
                continue
            out += _compare(a[k], b[k], f"{where}.{k}")
        return out
    if isinstance(a, str) and isinstance(b, str):
        b = _reworded(b)
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{where}: lengths {len(a)} != {len(b)}"]
        return [e for i, (x, y) in enumerate(zip(a, b)) for e in _compare(x, y, f"{where}[{i}]")]
    if isinstance(a, float) and isinstance(b, (int, float)) and not isinstance(b, bool):
        if a == b or (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-12):
            return []
        return [f"{where}: {a!r} != {b!r}"]
    if type(a) is not type(b) or a != b:
        return [f"{where}: {a!r} != {b!r}"]
    return []


@pytest.mark.integration
def test_cli_json_and_reports_are_unchanged(tmp_path):
    before = _norm(json.loads(FIXTURE.read_text(encoding="utf-8")), "\0")  # volatile keys dropped on both sides
    now = run_all(tmp_path)
    assert set(now) == set(before)
    problems = []
    for name in before:
        problems += _compare(before[name], now[name], name)
    assert not problems, "\n".join(problems[:40])


if __name__ == "__main__":  # pragma: no cover - recording the fixture
    import tempfile

    if "--record" not in sys.argv:
        sys.exit("usage: python tests/test_cli_json_unchanged.py --record")
    root = Path(tempfile.mkdtemp(prefix="memclaim-cli-json-"))
    try:
        rec = run_all(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    FIXTURE.write_text(json.dumps(rec, indent=1, sort_keys=True, allow_nan=True) + "\n", encoding="utf-8")
    print(f"wrote {FIXTURE}")
