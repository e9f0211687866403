"""The claims commands on score stores: `memclaim test` on stored runs, `memclaim population`
and `memclaim census` end to end, on a randomly initialized tiny GPT-2 (no training; the numbers
are meaningless, the plumbing is what is tested). Every refusal exits with status 2 and leaves
no report behind. The tiny trained GPT and SmolLM2 are in test_integration_claims.py and
test_real_claims.py."""

from __future__ import annotations

import json
import math
import shlex
from pathlib import Path

import numpy as np
import pytest

from memclaim.cli.main import main
from memclaim.scoring.results import list_runs, load_run_scores

LN10 = math.log(10.0)


def _jsonl(path: Path, records) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    from memclaim.train.corpus import MarkovZipf

    d = tmp_path_factory.mktemp("claims-store")
    gen = MarkovZipf(
        n_words=120, seed=3
    )  # the generator the random model's tokenizer was trained on
    rng = np.random.default_rng(11)
    members = [{"id": f"m{i}", "text": gen.passage(rng, n_words=30)} for i in range(12)]
    controls = [{"id": f"c{i}", "text": gen.passage(rng, n_words=30)} for i in range(40)]
    return {
        "dir": d,
        "members": _jsonl(d / "members.jsonl", members),
        "controls": _jsonl(d / "controls.jsonl", controls),
        "document": _write(d / "book.txt", gen.passage(rng, n_words=260)),
        "control_doc": _write(d / "ctrl_book.txt", gen.passage(rng, n_words=260)),
        "short": _write(d / "short.txt", "Too short."),
    }


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def _score(model_dir, inp, out, *, suffix=8, policies=("full", "greedy", "top-k:1")):
    args = [
        "score",
        str(model_dir),
        "--input",
        str(inp),
        "--prefix-tokens",
        "8",
        "--suffix-tokens",
        str(suffix),
        "--out",
        str(out),
        "--no-progress",
        "--json",
    ]
    for p in policies:
        args += ["--policy", p]
    assert main(args) == 0


@pytest.fixture(scope="module")
def store(random_model_dir, data, tmp_path_factory):
    """One store, two runs (members, controls), three policies scored in one pass."""
    s = tmp_path_factory.mktemp("store") / "s"
    _score(random_model_dir, data["members"], s)
    _score(random_model_dir, data["controls"], s)
    return s


def _test_args(
    store, out, *extra, run="passages:members.jsonl", controls_run="passages:controls.jsonl"
):
    args = ["test", "--candidates", str(store), "--controls", str(store), "--out", str(out)]
    if run:
        args += ["--run", run]
    if controls_run:
        args += ["--controls-run", controls_run]
    return args + list(extra)


def test_test_on_two_runs_of_one_store(store, tmp_path, capsys):
    capsys.readouterr()
    runs = list_runs(store)
    ctrl_id = next(rid for rid, r in runs.items() if r["label"] == "passages:controls.jsonl")
    out = tmp_path / "rep"
    # candidates by label, controls by run id prefix
    rc = main(
        _test_args(
            store, out, "--alpha", "0.1", "--policy", "full", "--json", controls_run=ctrl_id[:6]
        )
    )
    assert rc == 0, capsys.readouterr().err
    s = json.loads(capsys.readouterr().out)
    ctrl = load_run_scores(store, run=ctrl_id, policy="full").logq
    cand = load_run_scores(store, run="passages:members.jsonl", policy="full").logq
    k = (1 * (40 + 1)) // 10  # floor(alpha (N + 1)) in exact arithmetic: 4
    assert s["k"] == k and s["n_controls"] == 40 and s["n_candidates"] == 12
    assert s["threshold"] == np.sort(ctrl)[::-1][k - 1]  # the K-th largest control score, exactly
    assert s["n_claimed"] == int(np.sum(cand > s["threshold"]))  # strict >
    rep = json.loads((out / "report.json").read_text())
    assert rep["command"] == "test"
    assert rep["procedure"]["policy"] == "full" and rep["procedure"]["policies_scored"] == [
        "full",
        "greedy",
        "top-k:1",
    ]
    assert "policies" not in rep["procedure"] and rep["procedure"]["suffix_tokens"] == 8
    roles = {i["role"]: i for i in rep["inputs"]}
    assert roles["controls"]["run_id"] == ctrl_id and len(roles["controls"]["scores_sha256"]) == 64
    assert roles["candidates"]["scored_inputs"]["sha256"]  # the hash of the scored passages file
    rows = rep["results"]["population"]["candidates"]
    assert [r["id"] for r in rows] == [f"m{i}" for i in range(12)]  # record ids, not window ids


def test_test_on_store_exclusions_by_record_or_window_id(store, tmp_path, capsys):
    (tmp_path / "verified.txt").write_text("c3\n# verified by hand\nc5#0\n")
    out = tmp_path / "rep"
    rc = main(
        _test_args(
            store,
            out,
            "--alpha",
            "0.1",
            "--policy",
            "full",
            "--exclude-controls",
            str(tmp_path / "verified.txt"),
            "--exclude-control",
            "c7",
            "--json",
        )
    )
    assert rc == 0, capsys.readouterr().err
    s = json.loads(capsys.readouterr().out)
    assert s["pool"] == "decontaminated" and s["n_controls"] == 37
    pop = json.loads((out / "report.json").read_text())["results"]["population"]
    assert pop["excluded_control_ids"] == ["c7", "c3", "c5"] and pop["full"]["n_controls"] == 40


def test_test_on_store_greedy_is_binary(store, tmp_path, capsys):
    out = tmp_path / "rep"
    assert main(_test_args(store, out, "--alpha", "0.1", "--policy", "greedy", "--json")) == 0
    capsys.readouterr()
    ctrl = load_run_scores(store, run="passages:controls.jsonl", policy="greedy")
    m = int(ctrl.greedy_match.sum())
    full = json.loads((out / "report.json").read_text())["results"]["population"]["full"]
    assert (
        full["binary"]
        and full["binary_rates"]["m"] == m
        and full["binary_rates"]["alpha_n_exact"] == f"{m + 1}/41"
    )


@pytest.mark.parametrize(
    "args,kw,match",
    [
        (
            ["--alpha", "0.1", "--policy", "full"],
            {"run": None},
            "holds 2 runs; say which one with --run",
        ),
        (
            ["--alpha", "0.1", "--policy", "full"],
            {"controls_run": None},
            "say which one with --controls-run",
        ),
        (
            ["--alpha", "0.1", "--policy", "full"],
            {"controls_run": "passages:members.jsonl"},
            "are the same run",
        ),
        (["--alpha", "1.5", "--policy", "full"], {}, "alpha must lie strictly between 0 and 1"),
        (["--alpha", "0", "--policy", "full"], {}, "alpha must lie strictly between 0 and 1"),
        (["--alpha", "0.1"], {}, "several policies"),
        (["--alpha", "0.1", "--policy", "top-k:40"], {}, "was not scored"),
        (
            ["--alpha", "0.1", "--policy", "full", "--kind", "prob"],
            {},
            "--kind applies to score files",
        ),
        (
            ["--alpha", "0.1", "--policy", "full", "--binary"],
            {},
            "disagrees with the stored policy",
        ),
        (
            ["--alpha", "0.1", "--policy", "full", "--exclude-control", "nope"],
            {},
            "not among the controls",
        ),
        # the controls all score -inf under top-k:1 (no control's suffix is the greedy path)
        (["--alpha", "0.1", "--policy", "top-k:1"], {}, "control scores are -inf"),
    ],
)
def test_test_on_store_refusals(store, tmp_path, capsys, args, kw, match):
    out = tmp_path / "rep"
    rc = main(_test_args(store, out, *args, **kw))
    err = capsys.readouterr().err
    assert rc == 2 and match in err, err
    assert not out.exists()


def test_test_refuses_store_and_file_mixed(store, tmp_path, capsys):
    (tmp_path / "c.csv").write_text("id,score\na,-1\nb,-2\n")
    out = tmp_path / "rep"
    rc = main(
        [
            "test",
            "--candidates",
            str(store),
            "--run",
            "passages:members.jsonl",
            "--controls",
            str(tmp_path / "c.csv"),
            "--out",
            str(out),
        ]
    )
    assert rc == 2 and "both be score stores or both be score files" in capsys.readouterr().err
    rc = main(
        [
            "test",
            "--candidates",
            str(tmp_path / "c.csv"),
            "--controls",
            str(tmp_path / "c.csv"),
            "--run",
            "x",
            "--out",
            str(out),
        ]
    )
    assert (
        rc == 2
        and "--run and --controls-run select runs of a score store" in capsys.readouterr().err
    )
    rc = main(
        ["test", "--candidates", str(tmp_path), "--controls", str(tmp_path), "--out", str(out)]
    )
    assert rc == 2 and "is not a memclaim score store" in capsys.readouterr().err
    assert not out.exists()


def test_test_refuses_different_procedures_naming_the_field(
    random_model_dir, store, data, tmp_path, capsys
):
    """Candidates scored with 6-token suffixes, controls with 8: refused, the field named."""
    other = tmp_path / "other"
    _score(random_model_dir, data["members"], other, suffix=6, policies=("full",))
    capsys.readouterr()
    out = tmp_path / "rep"
    rc = main(
        [
            "test",
            "--candidates",
            str(other),
            "--controls",
            str(store),
            "--controls-run",
            "passages:controls.jsonl",
            "--policy",
            "full",
            "--alpha",
            "0.1",
            "--out",
            str(out),
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2 and "suffix_tokens: 6 != 8" in err and "different procedures" in err
    assert "policies" not in err  # which other policies were scored is not a difference
    assert not out.exists()


# ------------------------------------------------------------------------------ population
def test_population_end_to_end_and_resume(random_model_dir, data, tmp_path, capsys):
    out = tmp_path / "pop"
    args = [
        "population",
        str(random_model_dir),
        "--members",
        str(data["members"]),
        "--controls",
        str(data["controls"]),
        "--prefix-tokens",
        "8",
        "--suffix-tokens",
        "8",
        "--policy",
        "full",
        "--policy",
        "greedy",
        "--alpha",
        "0.1",
        "--fdr",
        "0.1",
        "--budget-delta",
        "0.05",
        "--out",
        str(out),
        "--json",
        "--no-progress",
    ]
    capsys.readouterr()
    assert main(args) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["policy"] == "full" and s["scoring"]["members"]["units_scored"] >= 1
    assert {r["label"] for r in list_runs(out / "store").values()} == {"members", "controls"}
    ctrl = load_run_scores(out / "store", run="controls", policy="full").logq
    assert s["threshold"] == np.sort(ctrl)[::-1][s["k"] - 1]
    names = {p.name for p in out.iterdir()}
    figs = names - {"store", "report.json", "report.md", "report.html"}
    assert {"store", "report.json", "report.md", "report.html"} <= names
    # besides the store and the reports only figure files, each as PNG and its vector PDF
    assert figs and {n.rsplit(".", 1)[1] for n in figs} == {"png", "pdf"}
    assert {n.rsplit(".", 1)[0] for n in figs if n.endswith(".png")} == {
        n.rsplit(".", 1)[0] for n in figs if n.endswith(".pdf")
    }
    rep = json.loads((out / "report.json").read_text())
    assert rep["command"] == "population" and rep["results"]["population"]["fdr"] is not None
    # the same command again: everything comes from the store, the weights are never loaded
    assert main(args) == 0
    s2 = json.loads(capsys.readouterr().out)
    for label in ("members", "controls"):
        assert (
            s2["scoring"][label]["units_scored"] == 0 and not s2["scoring"][label]["model_loaded"]
        )
    assert (s2["threshold"], s2["n_claimed"], s2["k"]) == (s["threshold"], s["n_claimed"], s["k"])
    # the greedy policy was stored in the same pass: re-test it without the model
    assert (
        main(
            _test_args(
                out / "store",
                tmp_path / "greedy",
                "--policy",
                "greedy",
                "--alpha",
                "0.1",
                "--json",
                run="members",
                controls_run="controls",
            )
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["alpha"] == "1/10"


@pytest.mark.parametrize(
    "case", ["empty controls", "alpha 0", "alpha 1", "all too short", "missing members", "fdr 2"]
)
def test_population_bad_input_leaves_nothing(random_model_dir, data, tmp_path, capsys, case):
    (tmp_path / "empty.jsonl").write_text("")
    _jsonl(tmp_path / "short.jsonl", [{"id": "s", "text": "tiny"}])
    members, controls, extra = str(data["members"]), str(data["controls"]), ["--alpha", "0.1"]
    expect = {
        "empty controls": "--controls",
        "alpha 0": "alpha must lie strictly between 0 and 1",
        "alpha 1": "alpha must lie strictly between 0 and 1",
        "all too short": "shorter than prefix + suffix",
        "missing members": "--members",
        "fdr 2": "--fdr must lie strictly between 0 and 1",
    }[case]
    if case == "empty controls":
        controls = str(tmp_path / "empty.jsonl")
    elif case.startswith("alpha"):
        extra = ["--alpha", case.split()[1]]
    elif case == "all too short":
        controls = str(tmp_path / "short.jsonl")
    elif case == "missing members":
        members = str(tmp_path / "nope.jsonl")
    elif case == "fdr 2":
        extra += ["--fdr", "2"]
    out = tmp_path / "pop"
    rc = main(
        [
            "population",
            str(random_model_dir),
            "--members",
            members,
            "--controls",
            controls,
            "--prefix-tokens",
            "8",
            "--suffix-tokens",
            "8",
            "--policy",
            "full",
            "--out",
            str(out),
            *extra,
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2 and expect in err, err
    assert not out.exists()  # neither a report nor a store


# ------------------------------------------------------------------------------ census
def _coverage_reference(scores, spans, doc_len, log10_tau) -> float:
    """Obviously correct [EM] Eq. 9: mark every character of every suffix scoring above tau."""
    covered = np.zeros(doc_len, dtype=bool)
    for s, (a, b) in zip(scores, spans):
        if s / LN10 > log10_tau:
            covered[a:b] = True
    return covered.mean()


def test_census_end_to_end_with_exclusions(random_model_dir, data, tmp_path, capsys):
    ctext = data["control_doc"].read_text()
    quote = ctext[100:140]
    spans = tmp_path / "spans.txt"
    spans.write_text(f"# verified quotations\ntext: {quote}\n{data['control_doc'].name} 400 420\n")
    out = tmp_path / "census"
    args = [
        "census",
        str(random_model_dir),
        "--document",
        str(data["document"]),
        "--control",
        str(data["control_doc"]),
        "--prefix-tokens",
        "8",
        "--suffix-tokens",
        "8",
        "--stride",
        "8",
        "--policy",
        "full",
        "--exclude-spans",
        str(spans),
        "--reference-corpus",
        str(data["control_doc"]),
        "--out",
        str(out),
        "--json",
        "--no-progress",
    ]
    capsys.readouterr()
    assert main(args) == 0, capsys.readouterr().err
    s = json.loads(capsys.readouterr().out)
    store = out / "store"
    assert {r["label"] for r in list_runs(store).values()} == {"document", "control"}
    doc = load_run_scores(store, run="document", policy="full")
    ctl = load_run_scores(store, run="control", policy="full")
    # decontamination: windows whose suffix overlaps an excluded span do not set the threshold
    excl = [(100, 140), (400, 420)]
    keep = [not any(a < e and b > st for st, e in excl) for a, b in ctl.suffix_spans]
    assert 0 < sum(keep) < len(keep)
    top = float(np.max(ctl.logq[keep])) / LN10
    p = s["pairs"][0]
    assert p["n_excluded"] == len(keep) - sum(keep) and p["max_control_log10"] == pytest.approx(
        top, abs=1e-12
    )
    assert p["log10_tau"] == math.ceil(top)  # [EM] Eq. 31: round up to the next decade
    dtext = data["document"].read_text()
    assert p["coverage"] == pytest.approx(
        _coverage_reference(doc.logq, doc.suffix_spans, len(dtext), p["log10_tau"])
    )
    # the control itself, given as reference corpus, flags its own high-scoring windows for a person to confirm
    assert s["n_flagged"] >= 1
    rep = json.loads((out / "report.json").read_text())
    assert rep["command"] == "census" and rep["results"]["budget"][0] is not None
    assert {i["role"] for i in rep["inputs"]} >= {
        "document",
        "control",
        "control exclusions",
        "reference corpus",
    }
    assert "heat-legend" in (out / "report.html").read_text()
    # re-running does no model work
    assert main(args) == 0
    s2 = json.loads(capsys.readouterr().out)
    assert all(r["units_scored"] == 0 and not r["model_loaded"] for r in s2["scoring"].values())
    assert s2["pairs"] == s["pairs"]


def test_census_several_pairs_global_threshold(random_model_dir, data, tmp_path, capsys):
    out = tmp_path / "g"
    capsys.readouterr()
    rc = main(
        [
            "census",
            str(random_model_dir),
            "--pair",
            str(data["document"]),
            str(data["control_doc"]),
            "--document",
            str(data["control_doc"]),
            "--control",
            str(data["document"]),
            "--prefix-tokens",
            "8",
            "--suffix-tokens",
            "8",
            "--stride",
            "16",
            "--policy",
            "full",
            "--global",
            "--out",
            str(out),
            "--json",
            "--no-progress",
        ]
    )
    assert rc == 0, capsys.readouterr().err
    s = json.loads(capsys.readouterr().out)
    assert len(s["pairs"]) == 2 and s["global_log10_tau"] == max(s["per_pair_log10_tau"])
    assert all(p["log10_tau"] == s["global_log10_tau"] for p in s["pairs"])
    assert {r["label"] for r in list_runs(out / "store").values()} == {
        "document-1",
        "control-1",
        "document-2",
        "control-2",
    }


@pytest.mark.parametrize(
    "case",
    [
        "short document",
        "short control",
        "greedy first",
        "unpaired",
        "quote missing",
        "span outside",
        "span ambiguous",
        "stride 0",
        "text field",
    ],
)
def test_census_bad_input_leaves_nothing(random_model_dir, data, tmp_path, capsys, case):
    doc, ctl, extra, policy = str(data["document"]), str(data["control_doc"]), [], "full"
    spans = tmp_path / "spans.txt"
    expect = {
        "short document": "shorter than one window",
        "short control": "shorter than one window",
        "greedy first": "the census needs a probability score",
        "unpaired": "they pair up in order",
        "quote missing": "occurs in no control document",
        "span outside": "is not inside control",
        "span ambiguous": "does not say which",
        "stride 0": "stride",
        "text field": "--text-field",
    }[case]
    if case == "short document":
        doc = str(data["short"])
    elif case == "short control":
        ctl = str(data["short"])
    elif case == "greedy first":
        policy = "greedy"
    elif case == "unpaired":
        extra = ["--document", doc]
    elif case == "quote missing":
        spans.write_text("text: this sentence is not in the control\n")
        extra = ["--exclude-spans", str(spans)]
    elif case == "span outside":
        spans.write_text("10 99999999\n")
        extra = ["--exclude-spans", str(spans)]
    elif case == "span ambiguous":
        spans.write_text("10 20\n")
        extra = ["--exclude-spans", str(spans), "--pair", ctl, doc]
    elif case == "stride 0":
        extra = ["--stride", "0"]
    elif case == "text field":
        extra = ["--text-field", "body"]
    out = tmp_path / "census"
    rc = main(
        [
            "census",
            str(random_model_dir),
            "--document",
            doc,
            "--control",
            ctl,
            "--prefix-tokens",
            "8",
            "--suffix-tokens",
            "8",
            "--stride",
            "8",
            "--policy",
            policy,
            *extra,
            "--out",
            str(out),
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2 and expect in err, err
    assert not out.exists()


@pytest.mark.parametrize("case", ["every window excluded", "every window -inf"])
def test_census_failure_after_scoring_writes_no_report(
    random_model_dir, data, tmp_path, capsys, case
):
    """Failures found only after scoring (decontamination removed every control window; every
    control window scores -inf under top-k:1, so there is no threshold, [EM] C.4.4) leave the
    resumable store but no report."""
    spans = tmp_path / "spans.txt"
    spans.write_text(f"0 {len(data['control_doc'].read_text())}\n")
    extra, policy, expect = ["--exclude-spans", str(spans)], "full", "every one of its"
    if case == "every window -inf":
        extra, policy, expect = [], "top-k:1", "control windows score -inf"
    out = tmp_path / "census"
    rc = main(
        [
            "census",
            str(random_model_dir),
            "--document",
            str(data["document"]),
            "--control",
            str(data["control_doc"]),
            "--prefix-tokens",
            "8",
            "--suffix-tokens",
            "8",
            "--stride",
            "16",
            "--policy",
            policy,
            *extra,
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2 and expect in err, err
    assert (out / "store").is_dir()
    assert not any((out / f).exists() for f in ("report.json", "report.md", "report.html"))


# ------------------------------------------------------------------------------ --help
def _examples(help_text: str, name: str) -> list[list[str]]:
    """The `memclaim NAME ...` command lines of a --help epilog (continuation lines joined)."""
    lines, cur = [], None
    for raw in help_text.splitlines():
        s = raw.strip()
        if cur is not None:
            cur += " " + s.rstrip("\\").strip()
            if not s.endswith("\\"):
                lines.append(cur)
                cur = None
        elif s.startswith(f"memclaim {name} "):
            cur = s.rstrip("\\").strip()
            if not s.endswith("\\"):
                lines.append(cur)
                cur = None
    return [shlex.split(x)[2:] for x in lines]


@pytest.mark.parametrize("name,at_least", [("test", 5), ("population", 3), ("census", 3)])
def test_help_examples_parse(name, at_least, capsys):
    """Every example in --help is a command line the command accepts (parsed, not run; the real
    tier runs the SmolLM2 examples)."""
    import importlib

    assert main([name, "--help"]) == 0
    text = capsys.readouterr().out
    examples = _examples(text, name)
    assert len(examples) >= at_least, text
    cmd = importlib.import_module(f"memclaim.cli.{name}").command
    for args in examples:
        ctx = cmd.make_context(
            name, list(args)
        )  # raises click.UsageError on an unknown or malformed option
        assert ctx.params["out_dir"]
