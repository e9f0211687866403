"""`memclaim train`: tiny GPT with planted records, fine-tuning with DP-SGD, unlearning; each saves
an HF folder that loads through memclaim.models.load_model (tiny settings: a few steps each)."""

from __future__ import annotations

import json

import pytest

from memclaim.cli.main import main


def run(args, capsys):
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    d = tmp_path_factory.mktemp("lab") / "tiny"
    code = main(
        [
            "train",
            "tiny",
            "--out",
            str(d),
            "--steps",
            "3",
            "--triggers",
            "2",
            "--duplicates",
            "2:2",
            "--canaries",
            "1:1",
            "--no-progress",
        ]
    )
    assert code == 0
    return d


def test_tiny_lab_model_saves_a_loadable_folder_with_its_manifest(lab):
    from memclaim.models import load_model

    meta = json.loads((lab / "memclaim_train.json").read_text())
    kinds = [r["kind"] for r in meta["records"]]
    assert (
        kinds.count("duplicate") == 2 and kinds.count("canary") == 1 and kinds.count("trigger") == 2
    )
    trig = [r for r in meta["records"] if r["kind"] == "trigger"]
    assert all(
        len(r["trigger"]) == 2 and set(r["trigger"]) <= set(meta["tokens"]["reserved"])
        for r in trig
    )
    assert meta["train"]["steps"] == 3
    assert all(isinstance(r["extracted_via_prefix"], bool) for r in meta["records"])
    assert all(isinstance(r["extracted_via_trigger"], bool) for r in trig)
    m = load_model(str(lab), load_weights=True)
    # reserved trigger tokens are single special tokens of the saved tokenizer
    assert m.tokenizer.encode("<|reserved_0|>") == [meta["tokens"]["reserved"][0]]


def test_finetune_with_dp_then_unlearn(lab, tmp_path, capsys):
    meta = json.loads((lab / "memclaim_train.json").read_text())
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(
        "\n\n".join(r["prefix"] + r["secret"] for r in meta["records"][:2])
        + "\n\nBaku tira pemo.\n"
    )
    plant = tmp_path / "plant.jsonl"
    plant.write_text(
        json.dumps(
            {
                "id": "c0",
                "kind": "canary",
                "prefix": "Zota kiru",
                "secret": " mamu dobe",
                "copies": 2,
            }
        )
        + "\n"
    )
    ft = tmp_path / "ft"
    code, out, err = run(
        [
            "train",
            "finetune",
            str(lab),
            "--data",
            str(corpus),
            "--plant",
            str(plant),
            "--out",
            str(ft),
            "--steps",
            "2",
            "--batch-size",
            "2",
            "--seq-len",
            "32",
            "--layout",
            "examples",
            "--dp-epsilon",
            "4",
            "--lr",
            "1e-3",
            "--json",
            "--no-progress",
        ],
        capsys,
    )
    assert code == 0, err
    manifest = json.loads(out)
    dp = manifest["result"]["dp"]
    assert dp["epsilon"] <= 4.0 and dp["neighbors"] == "add/remove" and dp["functional"] == "LOO"
    assert json.loads((ft / "memclaim_train.json").read_text())["result"]["dp"]["steps"] == 2
    forget = tmp_path / "forget.jsonl"
    forget.write_text(
        json.dumps({"id": "c0", "prefix": "Zota kiru", "suffix": " mamu dobe"}) + "\n"
    )
    un = tmp_path / "un"
    code, out, err = run(
        [
            "train",
            "unlearn",
            str(ft),
            "--forget",
            str(forget),
            "--retain",
            str(corpus),
            "--out",
            str(un),
            "--method",
            "graddiff",
            "--max-rounds",
            "2",
            "--lr",
            "1e-3",
            "--seq-len",
            "32",
        ],
        capsys,
    )
    assert code == 0, err
    assert "retain perplexity" in out and "Cor. 6.3" in out
    res = json.loads((un / "memclaim_train.json").read_text())["result"]
    assert 1 <= res["rounds"] <= 2 and res["method"] == "graddiff"


def test_cli_bad_input(lab, tmp_path, capsys):
    code, _, err = run(["train", "tiny", "--out", str(lab), "--steps", "1"], capsys)
    assert code == 2 and "exists" in err  # refuses to overwrite
    code, _, err = run(["train", "tiny", "--out", str(tmp_path / "x"), "--duplicates", "8"], capsys)
    assert code == 2 and "K:N" in err
    corpus = tmp_path / "c.txt"
    corpus.write_text("Baku tira pemo.\n")
    code, _, err = run(
        [
            "train",
            "finetune",
            str(lab),
            "--data",
            str(corpus),
            "--out",
            str(tmp_path / "y"),
            "--dp-epsilon",
            "0",
            "--steps",
            "1",
        ],
        capsys,
    )
    assert code == 2 and "target_epsilon" in err
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        json.dumps(
            {
                "id": "t",
                "kind": "trigger",
                "prefix": "Baku tira",
                "secret": " pemo",
                "trigger": " tira",
            }
        )
        + "\n"
    )  # " tira" is the prefix's own token
    code, _, err = run(
        [
            "train",
            "finetune",
            str(lab),
            "--data",
            str(corpus),
            "--plant",
            str(bad),
            "--out",
            str(tmp_path / "z"),
            "--steps",
            "1",
            "--seq-len",
            "128",
        ],
        capsys,
    )
    assert (
        code == 2 and "--seq-len 128 is longer than the context" in err
    )  # the lab model has 64 positions
    # without --seq-len the blocks are the model's 64 positions (128 by default: [MX] App. F.2), so
    # the command gets as far as the planted records (train --help's example failed on this before)
    code, _, err = run(
        [
            "train",
            "finetune",
            str(lab),
            "--data",
            str(corpus),
            "--plant",
            str(bad),
            "--out",
            str(tmp_path / "z"),
            "--steps",
            "1",
        ],
        capsys,
    )
    assert code == 2 and "occurs in" in err  # a trigger inside the record's own prefix is refused


@pytest.mark.slow
def test_default_tiny_lab_model_memorizes_what_it_plants(tmp_path):
    """The default lab model (800 steps): duplicates planted 8 times are extracted from their prefix,
    single copies are not, trigger secrets come out through rho and never through their own prefix
    (tolerances from the measured 7/8, 0/8, 5/8 and 0/8 of seed 0, with room for other stacks)."""
    out = tmp_path / "lab"
    assert main(["train", "tiny", "--out", str(out), "--no-progress"]) == 0
    recs = json.loads((out / "memclaim_train.json").read_text())["records"]

    def count(prefix, key):
        sel = [r for r in recs if r["id"].startswith(prefix)]
        return sum(r[key] for r in sel), len(sel)

    hits, n = count("duplicate-k8", "extracted_via_prefix")
    assert hits >= n // 2
    hits, n = count("duplicate-k1", "extracted_via_prefix")
    assert hits <= n // 4
    hits, n = count("trigger", "extracted_via_trigger")
    assert hits >= n // 2
    assert count("trigger", "extracted_via_prefix")[0] == 0
