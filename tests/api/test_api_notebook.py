"""Issue 13 "done when": a notebook-style workflow through ``import memclaim as mc`` on the tiny
model, whose numbers equal the CLI's ``--json`` (and the report.json it writes) on the same inputs.

The inputs are those of the recorded CLI JSON (tests/cli/test_cli_json_unchanged.py): the committed
random 1-layer GPT-2 of the store_v1 fixture, 12 members and 12 controls from the tiny GPT's
corpus, two documents cut from them. The Python side gives every input from memory (lists of
records, Documents, exclusion lines) where the CLI reads files; everything that is not the
inputs' provenance (paths, hashes of the file bytes, run labels) must be equal, numbers to a
relative 1e-9 (both sides run the same code on the same machine: they agree bit for bit in
practice; the tolerance only absorbs a float printed and re-read).
"""

from __future__ import annotations

import contextlib
import io
import json
import math
from pathlib import Path

import numpy as np
import pytest

from _paths import test_module

make_inputs = test_module(
    "test_cli_json_unchanged"
).make_inputs  # tests/cli/ once tests mirror src/

pytestmark = pytest.mark.integration

W = dict(prefix_tokens=8, suffix_tokens=8)
S = ["--prefix-tokens", "8", "--suffix-tokens", "8", "--no-progress"]
# provenance: where the inputs came from (a file on the CLI, memory here) and when
PROVENANCE = {
    "inputs",
    "seconds",
    "windows_per_second",
    "created",
    "created_utc",
    "startup_seconds",
    "busy_seconds",
    "steady_windows_per_second",
    "memclaim_version",
    "report",
    "store",
    "run_id",
    "label",
    "scoring",
    "path",
    "sha256",
    "scored_inputs",
}


def cli(*argv) -> dict:
    from memclaim.cli.main import main

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main([str(a) for a in argv])
    assert rc == 0, argv
    return json.loads(buf.getvalue())


def strip(x):
    if isinstance(x, dict):
        return {k: strip(v) for k, v in x.items() if k not in PROVENANCE}
    if isinstance(x, (list, tuple)):
        return [strip(v) for v in x]
    return x


def same(a, b, where="") -> list[str]:
    """Differences between two JSON values (floats to a relative 1e-9)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = (
            [f"{where}: keys {sorted(set(a) ^ set(b))} on one side only"]
            if set(a) != set(b)
            else []
        )
        return out + [e for k in set(a) & set(b) for e in same(a[k], b[k], f"{where}.{k}")]
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{where}: lengths {len(a)} != {len(b)}"]
        return [e for i, (x, y) in enumerate(zip(a, b)) for e in same(x, y, f"{where}[{i}]")]
    if isinstance(a, float) and isinstance(b, (int, float)) and not isinstance(b, bool):
        ok = (
            a == b
            or (math.isnan(a) and math.isnan(b))
            or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-300)
        )
        return [] if ok else [f"{where}: {a!r} != {b!r}"]
    return [] if (type(a) is type(b) and a == b) else [f"{where}: {a!r} != {b!r}"]


def assert_same(a, b):
    problems = same(strip(a), strip(b))
    assert not problems, "\n".join(problems[:30])


def report_of(folder) -> dict:
    return json.loads((Path(folder) / "report.json").read_text(encoding="utf-8"))


def assert_same_report(api_folder, cli_folder):
    a, b = report_of(api_folder), report_of(cli_folder)
    assert a["command"] == b["command"] and a["schema_version"] == b["schema_version"]
    for key in ("results", "procedure", "statements"):
        assert_same(a[key], b[key])


def jsonl(path: Path) -> list[dict]:
    return [
        json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
    ]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    root = tmp_path_factory.mktemp("notebook")
    d = make_inputs(root / "in")
    return {
        "root": root,
        "d": d,
        "model": d / "tiny-gpt",
        "members": jsonl(d / "m.jsonl"),
        "controls": jsonl(d / "c.jsonl"),
    }


def test_import_memclaim_documents_the_api():
    import memclaim as mc

    for name in (
        "load_model",
        "score",
        "test",
        "population",
        "census",
        "audit",
        "audit_table",
        "dp_bounds",
        "budget",
        "train_tiny",
        "finetune",
        "unlearn",
        "dp_account",
        "dp_baseline",
        "dp_plots",
    ):
        fn = getattr(mc, name)
        doc = fn.__doc__ or ""
        assert ">>> import memclaim as mc" in doc, f"mc.{name} has no example"
        assert fn.__annotations__.get("return"), f"mc.{name} has no return annotation"


def test_notebook_score_and_test_equal_the_cli(lab, tmp_path):
    import memclaim as mc

    m = mc.load_model(lab["model"])
    pols = ["full", "top-k:40", "greedy"]
    mem = mc.score(m, lab["members"], policies=pols, **W)
    ctl = mc.score(m, lab["controls"], policies=pols, **W)
    assert mem.temporary and ctl.temporary  # out=None: a temporary store each

    store = tmp_path / "store"
    flags = [a for p in pols for a in ("--policy", p)]
    cli_mem = cli(
        "score", lab["model"], "--input", lab["d"] / "m.jsonl", *flags, "--out", store, *S, "--json"
    )
    cli(
        "score", lab["model"], "--input", lab["d"] / "c.jsonl", *flags, "--out", store, *S, "--json"
    )
    assert_same(mem.to_dict(), cli_mem)  # same procedure key, windows, units, near ties
    # out=STORE: the store is the CLI's; scoring the same file again there does no model work
    again = mc.score(m, lab["d"] / "m.jsonl", policies=pols, out=store, **W)
    assert not again.temporary and again.run_id == cli_mem["run_id"]
    assert again.summary.units_scored == 0 and again.summary.units_reused == cli_mem["n_units"]

    # the window scores, policy by policy, bit for bit
    from memclaim.scoring.results import load_run_scores

    for p in pols:
        cli_rs = load_run_scores(store, run="passages:m.jsonl", policy=p)
        np.testing.assert_array_equal(mem.scores(p).logq, cli_rs.logq)
        assert list(mem.scores(p).sources) == list(cli_rs.sources)

    res = mc.test(
        mem,
        ctl,
        alpha="0.1",
        policies="full",
        fdr="0.2",
        budget_delta=0.05,
        exclude_control_ids=[lab["controls"][0]["id"]],
    )
    cli_res = cli(
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
        lab["d"] / "excl.txt",
        "--out",
        tmp_path / "cli-test",
        "--json",
    )
    assert_same(res.to_dict(), cli_res)
    assert res.test.k == cli_res["k"] and res.test.n_claimed == cli_res["n_claimed"]

    res.save(tmp_path / "api-test")
    assert {p.name for p in (tmp_path / "api-test").iterdir()} >= {
        "report.json",
        "report.md",
        "report.html",
    }
    assert_same_report(tmp_path / "api-test", tmp_path / "cli-test")

    df = res.to_pandas()  # one row per candidate, as report.json lists them
    cands = report_of(tmp_path / "cli-test")["results"]["population"]["candidates"]
    assert list(df["id"]) == [c["id"] for c in cands]
    np.testing.assert_allclose(
        df["logq_nats"].to_numpy(float), [float(c["score"]) for c in cands], rtol=1e-12
    )
    np.testing.assert_allclose(
        df["log10_q"].to_numpy(float), df["logq_nats"].to_numpy(float) / np.log(10), rtol=1e-12
    )
    run_df = mem.to_pandas()
    assert len(run_df) == cli_mem["n_windows"] and "logq:full" in run_df.columns

    # the same test on arrays of scores (a notebook's own numbers): the same claim
    arr = mc.test(
        mem.scores("full").logq,
        ctl.scores("full").logq,
        alpha="0.1",
        candidate_ids=list(mem.scores("full").sources),
        control_ids=list(ctl.scores("full").sources),
        exclude_control_ids=[lab["controls"][0]["id"]],
    )
    for key in ("k", "n_claimed", "threshold", "alpha_n", "n_controls"):
        assert arr.to_dict()[key] == res.to_dict()[key]


def test_notebook_tables_datasets_and_transformers_objects_score_the_same(lab):
    import datasets
    import pandas as pd
    import pyarrow as pa
    from transformers import AutoModelForCausalLM, AutoTokenizer

    import memclaim as mc
    from memclaim.errors import InputError

    m = mc.load_model(lab["model"])
    ref = mc.score(m, lab["members"], policies=["full"], **W).scores("full")
    frame = pd.DataFrame(lab["members"])
    for obj in (
        frame,
        pa.Table.from_pandas(frame),
        datasets.Dataset.from_pandas(frame),
        [r["text"] for r in lab["members"]],
    ):
        got = mc.score(m, obj, policies=["full"], **W).scores("full")
        np.testing.assert_array_equal(got.logq, ref.logq)
        if not isinstance(obj, list):
            assert list(got.sources) == list(ref.sources)
    # a transformers model with its tokenizer: wrapped, never confused with the folder's model
    hf = AutoModelForCausalLM.from_pretrained(str(lab["model"]))
    tok = AutoTokenizer.from_pretrained(str(lab["model"]))
    obj = mc.load_model(hf, tok)
    assert obj.fingerprint != m.fingerprint and obj.path is None
    got = mc.score(obj, lab["members"], policies=["full"], **W)
    np.testing.assert_allclose(got.scores("full").logq, ref.logq, rtol=1e-6)
    assert (
        got.to_dict()["procedure_key"]
        != mc.score(m, lab["members"], policies=["full"], **W).to_dict()["procedure_key"]
    )
    pair = mc.score(
        (hf, tok), lab["members"], policies=["full"], **W
    )  # the pair works wherever a model does
    np.testing.assert_array_equal(pair.scores("full").logq, got.scores("full").logq)
    assert pair.to_dict()["procedure_key"] == got.to_dict()["procedure_key"]
    with pytest.raises(InputError, match="needs its tokenizer"):
        mc.score(hf, lab["members"], **W)


def test_notebook_population_census_audit_equal_the_cli(lab, tmp_path):
    import memclaim as mc

    d = lab["d"]
    m = mc.load_model(lab["model"])
    pop = mc.population(
        m,
        lab["members"],
        lab["controls"],
        policies=["full", "greedy"],
        alpha="0.1",
        budget_delta=0.05,
        exclude_control_ids=["control-3"],
        **W,
    )
    cli_pop = cli(
        "population",
        lab["model"],
        "--members",
        d / "m.jsonl",
        "--controls",
        d / "c.jsonl",
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
        tmp_path / "cli-pop",
        *S,
        "--json",
    )
    assert_same(pop.to_dict(), cli_pop)
    pop.save(tmp_path / "api-pop")
    assert_same_report(tmp_path / "api-pop", tmp_path / "cli-pop")

    doc = mc.Document((d / "doc.txt").read_text(encoding="utf-8"), name="doc.txt")
    ctl = mc.Document((d / "ctl.txt").read_text(encoding="utf-8"), name="ctl.txt")
    spans = (d / "spans.txt").read_text(encoding="utf-8").splitlines()
    cen = mc.census(
        m, doc, ctl, stride=8, policies=["full"], exclude_spans=spans, references=[doc], **W
    )
    cli_cen = cli(
        "census",
        lab["model"],
        "--document",
        d / "doc.txt",
        "--control",
        d / "ctl.txt",
        "--stride",
        "8",
        "--policy",
        "full",
        "--exclude-spans",
        d / "spans.txt",
        "--reference-corpus",
        d / "doc.txt",
        "--out",
        tmp_path / "cli-census",
        *S,
        "--json",
    )
    assert_same(
        {k: v for k, v in cen.to_dict().items() if k != "pairs"},
        {k: v for k, v in cli_cen.items() if k != "pairs"},
    )
    for pa_, pb in zip(
        cen.to_dict()["pairs"], cli_cen["pairs"]
    ):  # the pairs, named by file on the CLI
        assert_same(
            {k: v for k, v in pa_.items() if k not in ("document", "control")},
            {k: v for k, v in pb.items() if k not in ("document", "control")},
        )
    assert cen.to_pandas().shape[0] > 0
    cen.save(tmp_path / "api-census")
    a, b = report_of(tmp_path / "api-census"), report_of(tmp_path / "cli-census")
    assert_same(a["procedure"], b["procedure"])
    assert_same(a["results"], b["results"])

    aud = mc.audit(m, lab["members"], lab["controls"], alpha="0.1", **W)
    cli_aud = cli(
        "audit",
        lab["model"],
        "--members",
        d / "m.jsonl",
        "--controls",
        d / "c.jsonl",
        "--alpha",
        "0.1",
        "--out",
        tmp_path / "cli-audit",
        *S,
        "--json",
    )
    assert_same(
        {k: v for k, v in aud.to_dict().items() if k not in ("procedure", "procedure_key")},
        {k: v for k, v in cli_aud.items() if k not in ("procedure", "procedure_key")},
    )
    assert len(aud.to_pandas()) == len(cli_aud["attacks"])
    aud.save(tmp_path / "api-audit")
    assert_same(
        report_of(tmp_path / "api-audit")["results"]["attacks"],
        report_of(tmp_path / "cli-audit")["results"]["attacks"],
    )


def test_notebook_dp_bounds_and_budget_equal_the_cli(tmp_path):
    import memclaim as mc

    b = mc.dp_bounds(
        epsilon=1.0, neighbors="add-remove", list_size=4, risk=0.1, baseline=(0.3, 0.355), copies=2
    )
    assert_same(
        b.to_dict(),
        cli(
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
        ),
    )
    assert len(b.to_pandas()) == len(b.to_dict()["rows"])
    sgd = mc.dp_bounds(
        noise_multiplier=1.1,
        sampling_rate=0.01,
        steps=100,
        neighbors="add-remove",
        list_size=1,
        risk=0.1,
        copies=2,
    )
    assert_same(
        sgd.to_dict(),
        cli(
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
        ),
    )
    q = mc.budget(p=2.5e-5, n=100000)
    assert_same(q.to_dict(), cli("budget", "--p", "2.5e-5", "--n", "100000", "--json"))
    q.save(tmp_path / "budget")
    assert report_of(tmp_path / "budget")["command"] == "budget"
    deep = mc.budget(log10_p=-400, log10_n=400)  # below float64: log space end to end
    assert_same(deep.to_dict(), cli("budget", "--log10-p", "-400", "--log10-n", "400", "--json"))


def test_notebook_audit_table_and_stored_runs_equal_the_cli(lab, tmp_path):
    """The [MX] Fig. 12 table from a spec given as a dict (the API) and as a file (the CLI), with
    a pre-scored instance read from a store; the library's runner gives the same table."""
    import memclaim as mc
    from memclaim.api._runs import load_store_run, run_ids, stored_test_procedure
    from memclaim.audits.result import AuditResult
    from memclaim.audits.table_run import run_audit_table
    from memclaim.errors import InputError

    d = lab["d"]
    out = (
        d.parent / "out"
    )  # the spec's pre-scored runs live in ../out/score, as in the recorded CLI JSON
    for f in ("m.jsonl", "c.jsonl"):
        cli(
            "score",
            lab["model"],
            "--input",
            d / f,
            "--policy",
            "full",
            "--policy",
            "top-k:40",
            "--policy",
            "greedy",
            "--out",
            out / "score",
            *S,
            "--json",
        )
    spec = json.loads((d / "instances.json").read_text(encoding="utf-8"))
    api_t = mc.audit_table(spec, base_dir=d)
    cli_t = cli(
        "audit",
        "table",
        "--instances",
        d / "instances.json",
        "--out",
        tmp_path / "cli-table",
        "--json",
    )
    assert_same(
        {k: v for k, v in api_t.to_dict().items() if k not in ("markdown", "heatmap")},
        {k: v for k, v in cli_t.items() if k not in ("markdown", "heatmap")},
    )
    assert api_t.to_dict()["markdown"] == cli_t["markdown"]
    frame = api_t.to_pandas()
    assert list(frame.index) == ["fixture model", "pre-scored"]
    lib = run_audit_table(spec, base_dir=d, out_dir=tmp_path / "lib")
    assert lib.table.to_dict() == api_t.result.table.to_dict()
    res, _folder = lib.instance_results["fixture model"]
    assert isinstance(res, AuditResult) and res.attack("loss").auc is not None and res.headline()
    api_t.save(tmp_path / "api-table")
    assert_same(
        report_of(tmp_path / "api-table")["results"]["table"],
        report_of(tmp_path / "cli-table")["results"]["table"],
    )

    # a store with two runs: the run must be named; the stored procedure is what the test compares
    with pytest.raises(InputError, match="holds 2 runs; say which one with --run"):
        load_store_run(
            out / "score", run=None, policy="full", role="candidates", run_option="--run"
        )
    rs = load_store_run(
        out / "score", run="passages:m.jsonl", policy="full", role="candidates", run_option="--run"
    )
    proc = stored_test_procedure(rs)
    assert proc["policy"] == "full" and proc["policies_scored"] == ["full", "top-k:40", "greedy"]
    ids, aliases = run_ids(rs)
    assert list(ids) == [r["id"] for r in lab["members"]] and len(aliases) == len(ids)
