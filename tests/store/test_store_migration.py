"""Issue 12 A6: the model fingerprint hashes what determines the scores (a retrained model with
bit-identical weights and tokenizer keeps its fingerprint), and a store written by memclaim
0.1.0 under the old fingerprint (tests/data/fixtures/store_v1, written by that code, see its
make_store_v1.py) still opens, reads the same scores, resumes its killed run without rescoring,
and compares with runs scored by the current code."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from _paths import DATA
from memclaim.cli.main import main
from memclaim.decoding import parse_policies
from memclaim.models import load_model
from memclaim.models.loader import FINGERPRINT_SCHEME, folder_fingerprint, folder_fingerprint_v1
from memclaim.scoring.prompts import PromptRule
from memclaim.scoring.runner import run_scoring
from memclaim.store.results import load_run_scores
from memclaim.store.store import SCHEMA_VERSION, ScoreStore
from memclaim.text.io import read_passages
from memclaim.text.windows import passage_windows

FIXTURE = DATA / "fixtures" / "store_v1"
EXPECTED = json.loads((FIXTURE / "expected.json").read_text())
POLICIES = ("full", "top-k:40", "greedy")  # what make_store_v1.py scored


@pytest.fixture
def old(tmp_path, monkeypatch):
    """A copy of the fixture (the store records the relative paths it was given)."""
    d = tmp_path / "v1"
    shutil.copytree(FIXTURE, d)
    monkeypatch.chdir(d)
    return d


def _score(model, name, label, out="store"):
    ws = passage_windows(
        read_passages(name).records, model.tokenizer, prefix_tokens=8, suffix_tokens=8
    )
    return run_scoring(
        model,
        ws,
        policies=parse_policies(POLICIES),
        prefix_tokens=8,
        suffix_tokens=8,
        prompt_rule=PromptRule(),
        out_dir=out,
        label=label,
        inputs={"passages": name},
        unit_size=2,
        progress=False,
    )


def test_fixture_was_written_under_the_old_fingerprint(old):
    """The fixture is what it claims: schema 1, the scheme-1 fingerprint of its model folder."""
    man = json.loads((old / "store" / "manifest.json").read_text())
    assert man["schema_version"] == 1
    (proc,) = man["procedures"].values()
    assert (
        proc["model"]["fingerprint"]
        == EXPECTED["model"]["fingerprint"]
        == folder_fingerprint_v1(old / "model")
    )
    assert "fingerprint_scheme" not in proc["model"]
    assert folder_fingerprint(old / "model") != EXPECTED["model"]["fingerprint"]


def test_old_store_opens_and_reads_the_same_scores_without_the_model(old):
    before = _files(old / "store")
    rs = load_run_scores("store", run="members", policy="full")
    assert list(rs.window_ids) == EXPECTED["window_ids"]
    assert rs.logq.tolist() == EXPECTED["logq_full"]  # bit for bit
    g = load_run_scores("store", run="members", policy="greedy")
    assert g.greedy_match.tolist() == EXPECTED["greedy"]
    assert rs.procedure_key == EXPECTED["procedure_key"]
    assert (
        _files(old / "store") == before
    )  # reading a schema-1 store does not write it (issue 25 item 5)


def test_old_store_resumes_its_killed_run_without_rescoring(old):
    m = load_model("model")
    assert (
        m.fingerprint_scheme == FINGERPRINT_SCHEME
        and m.fingerprint != EXPECTED["model"]["fingerprint"]
    )
    resumed = _score(m, "controls.jsonl", "controls")
    assert (
        resumed.run_id == EXPECTED["controls_run"]
        and resumed.procedure_key == EXPECTED["procedure_key"]
    )
    assert (resumed.units_reused, resumed.units_scored) == (
        1,
        EXPECTED["controls_units"] - 1,
    )  # only the rest
    again = _score(m, "passages.jsonl", "members")
    assert again.run_id == EXPECTED["members_run"] and again.units_scored == 0
    assert (
        load_run_scores("store", run="members", policy="full").logq.tolist()
        == EXPECTED["logq_full"]
    )
    # the store learned the current fingerprint of the old one and reads back with it
    st = ScoreStore("store", create=False)
    assert st.manifest["schema_version"] == SCHEMA_VERSION
    rec = st.procedure(EXPECTED["procedure_key"])
    assert rec["model"]["fingerprint"] == m.fingerprint
    assert rec["model"]["fingerprint_v1"] == EXPECTED["model"]["fingerprint"]
    assert rec["model"]["fingerprint_scheme"] == FINGERPRINT_SCHEME
    assert (
        len(list((old / "store" / "procedures").iterdir())) == 1
    )  # no second procedure for the same one
    assert len(list((old / "store" / "units").iterdir())) == 1


def test_migrated_old_runs_compare_with_runs_scored_now(old, tmp_path, capsys):
    m = load_model("model")
    fresh = _score(m, "controls.jsonl", "controls", out=str(tmp_path / "fresh"))
    assert (
        fresh.units_scored == fresh.n_units
    )  # a new store: everything scored under the new fingerprint
    args = [
        "test",
        "--candidates",
        "store",
        "--run",
        "members",
        "--controls",
        str(tmp_path / "fresh"),
        "--policy",
        "full",
        "--alpha",
        "0.2",
        "--json",
    ]
    # before the old store has seen the model, its fingerprint is scheme 1: refused, saying how to fix it
    assert main(args + ["--out", str(tmp_path / "r0")]) == 2
    err = capsys.readouterr().err
    assert "model.fingerprint" in err and "memclaim 0.1.0" in err and "nothing is rescored" in err
    _score(
        m, "passages.jsonl", "members"
    )  # the same command once more: no model work, the store learns
    assert main(args + ["--out", str(tmp_path / "r1")]) == 0, capsys.readouterr().err
    rep = json.loads((tmp_path / "r1" / "report.json").read_text())
    assert rep["procedure"]["model"]["fingerprint"] == m.fingerprint


def test_fingerprint_ignores_records_of_how_a_model_was_made(tmp_path):
    """A copy with another training wall time (memclaim_train.json, toy_data.json), other
    generation defaults and another transformers version in config.json has the same
    fingerprint; a changed weight, tokenizer or architecture field does not."""
    a = tmp_path / "a"
    shutil.copytree(FIXTURE / "model", a)
    base = folder_fingerprint(a)
    b = tmp_path / "b"
    shutil.copytree(a, b)
    (b / "memclaim_train.json").write_text(json.dumps({"train": {"seconds": 99.0}}))
    (b / "toy_data.json").write_text(json.dumps({"train": {"seconds": 42.0}}))
    gen = json.loads((b / "generation_config.json").read_text())
    (b / "generation_config.json").write_text(json.dumps({**gen, "max_length": 7}))
    cfg = json.loads((b / "config.json").read_text())
    (b / "config.json").write_text(json.dumps({**cfg, "transformers_version": "9.9.9"}, indent=4))
    (b / "README.md").write_text("notes")
    assert folder_fingerprint(b) == base
    assert folder_fingerprint_v1(b) != folder_fingerprint_v1(a)  # what the old scheme got wrong
    (b / "config.json").write_text(json.dumps({**cfg, "n_head": 1}))
    assert folder_fingerprint(b) != base
    c = tmp_path / "c"
    shutil.copytree(a, c)
    tok = json.loads((c / "tokenizer.json").read_text())
    tok["model"]["vocab"]["zzzz"] = len(tok["model"]["vocab"])
    (c / "tokenizer.json").write_text(json.dumps(tok))
    assert folder_fingerprint(c) != base
    d = tmp_path / "d"
    shutil.copytree(a, d)
    w = bytearray((d / "model.safetensors").read_bytes())
    w[-1] ^= 1
    (d / "model.safetensors").write_bytes(bytes(w))
    assert folder_fingerprint(d) != base


@pytest.mark.integration
def test_a_retrained_model_keeps_its_fingerprint(tmp_path):
    """Train the lab's tiny GPT twice with the same seed: bit-identical weights and tokenizer,
    different recorded wall times, the same fingerprint (and so the same procedure keys)."""
    outs = []
    for name in ("one", "two"):
        out = tmp_path / name
        assert (
            main(
                [
                    "train",
                    "tiny",
                    "--out",
                    str(out),
                    "--steps",
                    "2",
                    "--triggers",
                    "1",
                    "--duplicates",
                    "1:1",
                    "--no-progress",
                ]
            )
            == 0
        )
        outs.append(out)
    a, b = outs
    assert (a / "model.safetensors").read_bytes() == (b / "model.safetensors").read_bytes()
    assert (a / "tokenizer.json").read_bytes() == (b / "tokenizer.json").read_bytes()
    assert (a / "memclaim_train.json").read_bytes() != (
        b / "memclaim_train.json"
    ).read_bytes()  # wall time
    assert folder_fingerprint(a) == folder_fingerprint(b)
    assert load_model(str(a)).fingerprint == load_model(str(b)).fingerprint


def test_schema_newer_than_this_memclaim_is_refused(tmp_path):
    from memclaim.errors import StoreError

    st = tmp_path / "s"
    (st / "units").mkdir(parents=True)
    (st / "manifest.json").write_text(
        json.dumps({"schema_version": 99, "procedures": {}, "units": {}, "runs": {}})
    )
    with pytest.raises(StoreError, match="schema 99"):
        ScoreStore(st, create=False)


# ------------------------------------------------------------------ schema 2 -> 3 (issue 25 item 5)
FIXTURE_V2 = DATA / "fixtures" / "store_v2"
EXPECTED_V2 = json.loads((FIXTURE_V2 / "expected.json").read_text())


@pytest.fixture
def v2(tmp_path, monkeypatch):
    """The schema-2 store (written by the code before seals, make_store_v2.py) beside store_v1's
    model and texts, which it recorded by those relative paths."""
    d = tmp_path / "v2"
    d.mkdir()
    for name in ("model", "passages.jsonl", "controls.jsonl"):
        (shutil.copytree if (FIXTURE / name).is_dir() else shutil.copy)(FIXTURE / name, d / name)
    shutil.copytree(FIXTURE_V2 / "store", d / "store")
    monkeypatch.chdir(d)
    return d


def _files(root: Path) -> dict:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def test_v2_fixture_is_what_it_claims(v2):
    man = json.loads((v2 / "store" / "manifest.json").read_text())
    assert man["schema_version"] == EXPECTED_V2["schema_version"] == 2
    assert "procedure_files" not in man and not any("sha256" in u for u in man["units"].values())
    assert not any("run_sha256" in r for r in man["runs"].values())


def test_v2_store_opens_and_reads_the_same_scores_without_writing(v2):
    before = _files(v2 / "store")
    rs = load_run_scores("store", run="members", policy="full")
    assert list(rs.window_ids) == EXPECTED_V2["window_ids"]
    assert rs.logq.tolist() == EXPECTED_V2["logq_full"]  # bit for bit
    assert (
        load_run_scores("store", run="members", policy="greedy").greedy_match.tolist()
        == EXPECTED_V2["greedy"]
    )
    census = load_run_scores("store", run="census", policy="top-k:40", texts=False)
    assert census.logq.tolist() == EXPECTED_V2["census_logq_top_k_40"]
    assert rs.procedure_key == EXPECTED_V2["procedure_key"]
    assert (
        _files(v2 / "store") == before
    )  # reading does not migrate (a read-only store stays readable)


def test_v2_store_resumes_its_killed_run_and_is_sealed(v2):
    m = load_model("model")
    resumed = _score(m, "controls.jsonl", "controls")
    assert (
        resumed.run_id == EXPECTED_V2["controls_run"]
        and resumed.procedure_key == EXPECTED_V2["procedure_key"]
    )
    assert (resumed.units_reused, resumed.units_scored) == (1, EXPECTED_V2["controls_units"] - 1)
    again = _score(m, "passages.jsonl", "members")
    assert again.run_id == EXPECTED_V2["members_run"] and again.units_scored == 0
    man = json.loads((v2 / "store" / "manifest.json").read_text())
    assert man["schema_version"] == SCHEMA_VERSION == 3
    # every run, unit and procedure written before is sealed as it was, and reads the same
    assert set(man["procedure_files"]) == set(man["procedures"])
    assert all("sha256" in u for u in man["units"].values())
    assert all("run_sha256" in r and "scores_sha256" in r for r in man["runs"].values())
    assert (
        load_run_scores("store", run="members", policy="full").logq.tolist()
        == EXPECTED_V2["logq_full"]
    )
    census = load_run_scores("store", run="census", policy="top-k:40", texts=False)
    assert census.logq.tolist() == EXPECTED_V2["census_logq_top_k_40"]
    assert len(list((v2 / "store" / "procedures").iterdir())) == 2


def test_v2_store_with_swapped_labels_is_refused_before_it_is_sealed(v2):
    """A store of the previous schema has no hashes, but its manifest's labels must still be its
    run.json's: a swap by hand is refused (it flipped a claim, issue 25 item 5)."""
    from memclaim.errors import StoreError

    p = v2 / "store" / "manifest.json"
    man = json.loads(p.read_text())
    a, b = EXPECTED_V2["members_run"], EXPECTED_V2["controls_run"]
    man["runs"][a]["label"], man["runs"][b]["label"] = (
        man["runs"][b]["label"],
        man["runs"][a]["label"],
    )
    p.write_text(json.dumps(man, indent=1, sort_keys=True))
    with pytest.raises(
        StoreError, match="is label 'controls' in manifest.json but 'members' in its run.json"
    ):
        load_run_scores("store", run="controls", policy="full")


def test_v1_store_is_sealed_on_its_first_write(old):
    m = load_model("model")
    _score(m, "controls.jsonl", "controls")
    man = json.loads((old / "store" / "manifest.json").read_text())
    assert man["schema_version"] == 3 and all("sha256" in u for u in man["units"].values())
    assert (
        load_run_scores("store", run="members", policy="full").logq.tolist()
        == EXPECTED["logq_full"]
    )


def test_v2_store_resumes_under_a_later_memclaim_version(v2, monkeypatch):
    """The version is part of a procedure's key: a run started by the version that wrote the
    store resumes under a later one (its procedure is found under the version that recorded it)
    instead of scoring everything again under a new key."""
    import functools

    from memclaim.procedure import Procedure
    from memclaim.scoring import runner

    monkeypatch.setattr(runner, "Procedure", functools.partial(Procedure, memclaim_version="9.9.9"))
    m = load_model("model")
    resumed = _score(m, "controls.jsonl", "controls")
    assert (
        resumed.procedure_key == EXPECTED_V2["procedure_key"]
        and resumed.run_id == EXPECTED_V2["controls_run"]
    )
    assert (resumed.units_reused, resumed.units_scored) == (1, EXPECTED_V2["controls_units"] - 1)
    assert len(list((v2 / "store" / "procedures").iterdir())) == 2  # no procedure under 9.9.9


@pytest.mark.parametrize("fixture", ["old", "v2"])
def test_an_old_store_with_an_edited_procedure_is_refused(fixture, request):
    """Stores of schema 1 and 2 have no seals, but a procedure record is its key's content: one
    edited by hand (in procedures/ or in the manifest) is refused, not read as the procedure the
    scores were computed under (issue 25 item 5)."""
    from memclaim.errors import StoreError

    d = request.getfixturevalue(fixture)
    key = (EXPECTED if fixture == "old" else EXPECTED_V2)["procedure_key"]
    f = d / "store" / "procedures" / f"{key}.json"
    rec = json.loads(f.read_text())
    f.write_text(
        json.dumps({**rec, "suffix_tokens": rec["suffix_tokens"] + 1}, indent=1, sort_keys=True)
    )
    with pytest.raises(StoreError, match=f"procedure file {key[:16]} does not hash to its key"):
        load_run_scores("store", run="members", policy="full")
    f.write_text(json.dumps(rec, indent=1, sort_keys=True))
    p = d / "store" / "manifest.json"
    man = json.loads(p.read_text())
    man["procedures"][key]["prefix_tokens"] += 1
    p.write_text(json.dumps(man, indent=1, sort_keys=True))
    with pytest.raises(StoreError, match=f"procedure {key[:16]} does not hash to its key"):
        load_run_scores("store", run="members", policy="full")
