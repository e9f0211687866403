"""`memclaim score` end to end on a random tiny model, and its bad-input messages."""

from __future__ import annotations

import json

import pytest

from memclaim.cli.main import main


def _passages(path, n=12, words=40):
    import numpy as np

    from memclaim.train.corpus import MarkovZipf

    gen = MarkovZipf(n_words=120, seed=3)
    rng = np.random.default_rng(1)
    path.write_text(
        "".join(
            json.dumps({"id": f"r{i}", "text": gen.passage(rng, n_words=words)}) + "\n"
            for i in range(n)
        )
    )
    return path


def test_score_passages_and_document(random_model_dir, tmp_path, capsys):
    inp = _passages(tmp_path / "p.jsonl")
    rc = main(
        [
            "score",
            str(random_model_dir),
            "--input",
            str(inp),
            "--prefix-tokens",
            "8",
            "--suffix-tokens",
            "8",
            "--policy",
            "top-k:5",
            "--policy",
            "greedy",
            "--out",
            str(tmp_path / "s"),
            "--json",
        ]
    )
    assert rc == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["n_windows"] == 12 and summary["units_scored"] == 1
    doc = tmp_path / "doc.txt"
    doc.write_text(" ".join(json.loads(x)["text"] for x in inp.read_text().splitlines()))
    rc = main(
        [
            "score",
            str(random_model_dir),
            "--document",
            str(doc),
            "--stride",
            "16",
            "--prefix-tokens",
            "8",
            "--suffix-tokens",
            "8",
            "--out",
            str(tmp_path / "s"),
            "--json",
        ]
    )
    assert rc == 0
    s2 = json.loads(capsys.readouterr().out)
    from memclaim.scoring.results import load_run_scores

    rs = load_run_scores(tmp_path / "s", run=s2["run_id"])
    assert rs.policy == "top-k:40" and len(rs) == s2["n_windows"]  # the default policy
    assert len(rs.procedure["policies"]) == 1
    # suffix spans advance by the stride in tokens; spans are inside the document
    assert (rs.suffix_spans[:, 1] <= len(doc.read_text())).all()


def test_parrot_template_is_recorded_in_the_procedure(random_model_dir, tmp_path, capsys):
    inp = _passages(tmp_path / "p.jsonl", n=4)
    rc = main(
        [
            "score",
            str(random_model_dir),
            "--input",
            str(inp),
            "--prefix-tokens",
            "8",
            "--suffix-tokens",
            "6",
            "--prompt-template",
            "Repeat after me: {suffix}\n",
            "--prompt-template",
            "{prefix}",
            "--aggregate",
            "mean",
            "--policy",
            "full",
            "--out",
            str(tmp_path / "s"),
            "--json",
        ]
    )
    assert rc == 0
    from memclaim.scoring.results import load_run_scores

    rs = load_run_scores(tmp_path / "s")
    prompt = dict(rs.procedure["prompt"])
    target = prompt.pop("target")
    assert prompt == {
        "kind": "template",
        "templates": ["Repeat after me: {suffix}\n", "{prefix}"],
        "chat": False,
        "aggregate": "mean",
    }
    assert (
        target["rule"] == "rendered" and "leading whitespace" in target["text"]
    )  # the target rule is recorded
    assert rs.procedure["start_of_text"]["ids"] == []  # the random model's tokenizer adds nothing
    # per window, one target per prompt: after the parrot prompt (ends in a newline) the suffix text
    # without its leading space, tokenized there; after '{prefix}' (ends mid-line) the suffix as in the text
    from memclaim.models import load_model

    tok = load_model(str(random_model_dir)).tokenizer
    for tgt, _pre, suf, ids in zip(
        rs.table.column("target_ids").to_pylist(),
        rs.prefix_texts,
        rs.suffix_texts,
        rs.table.column("suffix_ids").to_pylist(),
    ):
        head = "Repeat after me: " + suf.lstrip() + "\n"
        full = tok.encode(head + suf.lstrip())
        assert tgt[0] == full[len(tok.encode(head)) :]
        assert tgt[1] == ids  # the natural continuation: the document's suffix tokens
    assert rs.table.column("target_tokens").to_pylist() == [
        [len(a), len(b)] for a, b in rs.table.column("target_ids").to_pylist()
    ]


@pytest.mark.parametrize(
    "args,fragment",
    [
        (["--input", "{missing}"], "does not exist"),
        (["--input", "{empty}"], "is empty"),
        (["--input", "{latin1}"], "not valid UTF-8"),
        (["--input", "{short}"], "shorter than prefix + suffix"),
        (["--input", "{ok}", "--policy", "top-q:4"], "valid policies"),
        (["--input", "{ok}", "--prompt-template", "{{prefx}}"], "unknown fields"),
        (["--input", "{ok}", "--document", "{ok}"], "exactly one of --input"),
        (["--document", "{ok}"], "needs --stride"),
        (["--input", "{ok}", "--sot", "<nonexistent>"], "not in this tokenizer"),
    ],
)
def test_bad_input_exits_2_with_message(random_model_dir, tmp_path, capsys, args, fragment):
    files = {
        "missing": tmp_path / "nope.jsonl",
        "empty": tmp_path / "empty.jsonl",
        "latin1": tmp_path / "latin1.txt",
        "short": tmp_path / "short.jsonl",
        "ok": _passages(tmp_path / "ok.jsonl"),
    }
    files["empty"].write_text("")
    files["latin1"].write_bytes("caf\xe9 au lait\n".encode("latin-1"))
    files["short"].write_text('{"text": "too short"}\n')
    args = [a.format(**{k: str(v) for k, v in files.items()}) for a in args]
    rc = main(
        [
            "score",
            str(random_model_dir),
            "--prefix-tokens",
            "8",
            "--suffix-tokens",
            "8",
            "--out",
            str(tmp_path / "out"),
        ]
        + args
    )
    err = capsys.readouterr().err
    assert rc == 2, err
    assert fragment in err and err.startswith("error:")


def test_model_errors(tmp_path, capsys, random_model_dir):
    import shutil

    inp = _passages(tmp_path / "p.jsonl", n=2)
    base = ["--input", str(inp), "--out", str(tmp_path / "o")]
    assert main(["score", str(tmp_path / "no-such-model")] + base) == 2
    assert "neither a named model nor an existing path" in capsys.readouterr().err
    empty = tmp_path / "m1"
    empty.mkdir()
    (empty / "config.json").write_text("{}")
    assert main(["score", str(empty)] + base) == 2
    assert "has no weights" in capsys.readouterr().err
    pick = tmp_path / "m2"
    shutil.copytree(random_model_dir, pick)
    (pick / "model.safetensors").rename(pick / "pytorch_model.bin")
    assert main(["score", str(pick)] + base) == 2
    err = capsys.readouterr().err
    assert "pickle" in err and "--allow-pickle" in err
    notok = tmp_path / "m3"
    shutil.copytree(random_model_dir, notok)
    (notok / "tokenizer.json").unlink()
    assert main(["score", str(notok)] + base) == 2
    assert "no tokenizer" in capsys.readouterr().err


def test_shorter_suffixes_from_cumulative_sums_equal_a_fresh_pass(random_model_dir, tmp_path):
    """[EM] App. D.3: scores of the first n suffix tokens come from the stored per-token values
    and equal a separate run at suffix length n (same prefix), up to float32 noise: the longer
    sequence runs attention over more (masked) keys, which changes reduction blocking."""
    import numpy as np

    from memclaim.scoring.results import load_run_scores

    inp = _passages(tmp_path / "p.jsonl", n=6)
    base = [
        "score",
        str(random_model_dir),
        "--input",
        str(inp),
        "--prefix-tokens",
        "8",
        "--policy",
        "top-k:20",
        "--policy",
        "full",
        "--no-progress",
    ]
    assert main(base + ["--suffix-tokens", "10", "--out", str(tmp_path / "long")]) == 0
    assert main(base + ["--suffix-tokens", "4", "--out", str(tmp_path / "short")]) == 0
    for pol in ("top-k:20", "full"):
        swept = load_run_scores(tmp_path / "long", policy=pol, suffix_tokens=4)
        fresh = load_run_scores(tmp_path / "short", policy=pol)
        assert swept.window_ids == fresh.window_ids
        fin = np.isfinite(fresh.logq)
        assert np.array_equal(fin, np.isfinite(swept.logq))
        np.testing.assert_allclose(swept.logq[fin], fresh.logq[fin], atol=1e-4, rtol=0)
        assert "first 4 of 10" in swept.score_kind
