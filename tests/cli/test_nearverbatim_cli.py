"""`memclaim score --near-verbatim`: the bounds land in the store beside the verbatim scores."""

from __future__ import annotations

import json

import numpy as np

from memclaim.cli.main import main
from memclaim.scoring.results import load_run_scores


def test_near_verbatim_scores_in_the_store(random_model_dir, tmp_path, capsys):
    from memclaim.train.corpus import MarkovZipf

    gen = MarkovZipf(n_words=120, seed=3)
    rng = np.random.default_rng(9)
    inp = tmp_path / "p.jsonl"
    inp.write_text(
        "".join(
            json.dumps({"id": f"r{i}", "text": gen.passage(rng, n_words=20)}) + "\n"
            for i in range(3)
        )
    )
    rc = main(
        [
            "score",
            str(random_model_dir),
            "--input",
            str(inp),
            "--prefix-tokens",
            "6",
            "--suffix-tokens",
            "4",
            "--policy",
            "full",
            "--policy",
            "top-k:20",
            "--near-verbatim",
            "0",
            "--near-verbatim",
            "2",
            "--beam",
            "4",
            "--beam",
            "8",
            "--out",
            str(tmp_path / "s"),
            "--json",
        ]
    )
    assert rc == 0, capsys.readouterr().err
    verb = load_run_scores(tmp_path / "s", policy="full")
    nv0 = load_run_scores(tmp_path / "s", policy="full", near_verbatim=0)
    nv2 = load_run_scores(tmp_path / "s", policy="full", near_verbatim=2)
    assert verb.score_kind == "verbatim" and nv2.score_kind.startswith(
        "near-verbatim lower bound (eps=2"
    )
    np.testing.assert_allclose(
        nv0.logq, verb.logq, rtol=0, atol=1e-9
    )  # the 0-ball is the suffix itself
    assert (nv2.logq >= verb.logq).all() and (nv2.logq > verb.logq).any()
    assert (nv2.logq <= 0).all()
    assert verb.procedure["near_verbatim"] == {"epsilons": [0, 2], "beams": [4, 8]}
    tk = load_run_scores(tmp_path / "s", policy="top-k:20", near_verbatim=2)
    assert (tk.logq >= load_run_scores(tmp_path / "s", policy="top-k:20").logq).all()
    rc = main(
        [
            "score",
            str(random_model_dir),
            "--input",
            str(inp),
            "--prefix-tokens",
            "6",
            "--suffix-tokens",
            "4",
            "--beam",
            "4",
            "--out",
            str(tmp_path / "s2"),
        ]
    )
    assert rc == 2 and "--beam applies to --near-verbatim" in capsys.readouterr().err
    rc = main(
        [
            "score",
            str(random_model_dir),
            "--input",
            str(inp),
            "--prefix-tokens",
            "6",
            "--suffix-tokens",
            "4",
            "--near-verbatim",
            "-1",
            "--out",
            str(tmp_path / "s3"),
        ]
    )
    assert rc == 2 and "epsilon" in capsys.readouterr().err


def test_population_on_the_near_verbatim_bound(random_model_dir, tmp_path, capsys):
    """`population --near-verbatim`: the test runs on the lower bound, and the report says so."""
    from memclaim.train.corpus import MarkovZipf

    gen = MarkovZipf(n_words=120, seed=3)
    rng = np.random.default_rng(11)
    files = {}
    for name in ("members", "controls"):
        files[name] = tmp_path / f"{name}.jsonl"
        files[name].write_text(
            "".join(
                json.dumps({"id": f"{name}{i}", "text": gen.passage(rng, n_words=20)}) + "\n"
                for i in range(19)
            )
        )
    out = tmp_path / "pop"
    rc = main(
        [
            "population",
            str(random_model_dir),
            "--members",
            str(files["members"]),
            "--controls",
            str(files["controls"]),
            "--prefix-tokens",
            "6",
            "--suffix-tokens",
            "4",
            "--policy",
            "full",
            "--near-verbatim",
            "1",
            "--beam",
            "4",
            "--alpha",
            "0.1",
            "--out",
            str(out),
            "--json",
        ]
    )
    assert rc == 0, capsys.readouterr().err
    report = json.loads((out / "report.json").read_text())
    text = json.dumps(report)
    assert "near-verbatim lower bound (eps=1" in text
    assert any("certified lower bound" in s for s in report["statements"])
    # the same store tested again from the CLI on the verbatim score: a different score, no model
    rc = main(
        [
            "test",
            "--candidates",
            str(out / "store"),
            "--run",
            "members",
            "--controls",
            str(out / "store"),
            "--controls-run",
            "controls",
            "--alpha",
            "0.1",
            "--out",
            str(tmp_path / "t"),
            "--json",
        ]
    )
    assert rc == 0
    rc = main(
        [
            "test",
            "--candidates",
            str(files["members"]),
            "--controls",
            str(files["controls"]),
            "--near-verbatim",
            "1",
            "--alpha",
            "0.1",
            "--out",
            str(tmp_path / "t2"),
        ]
    )
    assert rc == 2 and "needs score stores" in capsys.readouterr().err
