"""Issue 25 item 5: a store edited by hand is refused, not read. A manifest with its run labels
swapped flipped a claim (1 of 10 claimed became 4 of 10), and edited procedure files and scores
were accepted. The manifest now seals run.json, scores.parquet, every unit and procedure file
with their sha256 (store schema 3), run.json seals windows.parquet, the run id hashes the label
with the procedure, units and windows, and every reader of a run checks all of it.
"""

from __future__ import annotations

import json
import shutil

import pytest

from _paths import ROOT
from memclaim.cli.main import main
from memclaim.decoding import parse_policies
from memclaim.errors import StoreError
from memclaim.fsutil import sha256_file
from memclaim.models import load_model
from memclaim.scoring.prompts import PromptRule
from memclaim.scoring.runner import run_scoring
from memclaim.store.results import load_run_scores
from memclaim.store.store import ScoreStore
from memclaim.text.io import read_passages
from memclaim.text.windows import passage_windows

MODEL = ROOT / "tests" / "data" / "fixtures" / "store_v1" / "model"
TEXTS = ROOT / "tests" / "data" / "kjv_verses.jsonl"


def _score(out, records, label):
    m = load_model(str(MODEL))
    ws = passage_windows(records, m.tokenizer, prefix_tokens=8, suffix_tokens=8)
    return run_scoring(
        m,
        ws,
        policies=parse_policies(["full"]),
        prefix_tokens=8,
        suffix_tokens=8,
        prompt_rule=PromptRule(),
        out_dir=out,
        label=label,
        unit_size=8,
    )


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    out = tmp_path_factory.mktemp("sealed") / "store"
    recs = read_passages(str(TEXTS)).records
    runs = {
        "members": _score(out, recs[:30], "members"),
        "controls": _score(out, recs[30:60], "controls"),
    }
    return out, {k: v.run_id for k, v in runs.items()}


@pytest.fixture
def store(pristine, tmp_path):
    out, runs = pristine
    d = tmp_path / "store"
    shutil.copytree(out, d)
    return d, runs


def _manifest(d):
    return json.loads((d / "manifest.json").read_text())


def _write_manifest(d, m):
    (d / "manifest.json").write_text(json.dumps(m, indent=1, sort_keys=True))


def _swap_labels(d, runs, *, in_run_json=False, rehash=False):
    m = _manifest(d)
    a, b = runs["members"], runs["controls"]
    m["runs"][a]["label"], m["runs"][b]["label"] = m["runs"][b]["label"], m["runs"][a]["label"]
    if in_run_json:
        for rid in (a, b):
            p = d / "runs" / rid / "run.json"
            run = json.loads(p.read_text())
            run["label"] = m["runs"][rid]["label"]
            p.write_text(json.dumps(run, indent=1, sort_keys=True))
            if rehash:
                m["runs"][rid]["run_sha256"] = sha256_file(p)
    _write_manifest(d, m)


def test_a_store_written_now_is_sealed(store):
    d, runs = store
    m = _manifest(d)
    assert m["schema_version"] == 3
    assert set(m["procedure_files"]) == set(m["procedures"])
    for rid in runs.values():
        assert m["runs"][rid]["run_sha256"] == sha256_file(d / "runs" / rid / "run.json")
        assert m["runs"][rid]["scores_sha256"] == sha256_file(d / "runs" / rid / "scores.parquet")
        run = json.loads((d / "runs" / rid / "run.json").read_text())
        assert run["windows_sha256"] == sha256_file(d / "runs" / rid / "windows.parquet")
    for uid, u in m["units"].items():
        assert u["sha256"] == sha256_file(d / "units" / u["procedure"][:16] / f"{uid}.parquet")
    assert not any("scores_sha256_previous" in r for r in m["runs"].values())


def test_swapped_labels_in_the_manifest_are_refused(store):
    d, runs = store
    _swap_labels(d, runs)
    with pytest.raises(
        StoreError, match="is label 'controls' in manifest.json but 'members' in its run.json"
    ):
        load_run_scores(str(d), run="controls")


def test_swapped_labels_in_the_manifest_and_run_json_are_refused(store):
    d, runs = store
    _swap_labels(d, runs, in_run_json=True)
    with pytest.raises(
        StoreError, match=r"run.json of run [0-9a-f]{16} .* does not match the sha256"
    ):
        load_run_scores(str(d), run="controls")


def test_swapped_labels_rehashed_everywhere_are_still_refused(store):
    """Even with every hash recomputed, the run id is the hash of the label, procedure, units
    and windows: the label no longer gives the folder's id."""
    d, runs = store
    _swap_labels(d, runs, in_run_json=True, rehash=True)
    with pytest.raises(StoreError, match="holds the label, procedure, units and windows of run"):
        load_run_scores(str(d), run="controls")


def test_an_edited_procedure_is_refused(store):
    d, runs = store
    (p,) = (d / "procedures").iterdir()
    rec = json.loads(p.read_text())
    rec["prefix_tokens"] = 4
    p.write_text(json.dumps(rec, indent=1, sort_keys=True))
    with pytest.raises(
        StoreError, match="the procedure file of [0-9a-f]{16} .* does not match the sha256"
    ):
        load_run_scores(str(d), run="members")
    m = _manifest(d)  # rehashed: the record no longer hashes to its key
    m["procedure_files"][p.stem] = sha256_file(p)
    _write_manifest(d, m)
    with pytest.raises(StoreError, match="does not hash to its key"):
        load_run_scores(str(d), run="members")


def test_an_edited_display_field_is_refused(store):
    """A field outside the key (the model's name) changed in the file and rehashed: the two
    records of the procedure disagree."""
    d, runs = store
    (p,) = (d / "procedures").iterdir()
    rec = json.loads(p.read_text())
    rec["model"]["name"] = "gpt-5"
    p.write_text(json.dumps(rec, indent=1, sort_keys=True))
    m = _manifest(d)
    m["procedure_files"][p.stem] = sha256_file(p)
    _write_manifest(d, m)
    with pytest.raises(StoreError, match="differs between procedures/ and manifest.json"):
        load_run_scores(str(d), run="members")


def test_edited_scores_are_refused_and_rescoring_restores_them(store):
    import pyarrow as pa
    import pyarrow.parquet as pq

    d, runs = store
    path = d / "runs" / runs["controls"] / "scores.parquet"
    want = load_run_scores(str(d), run="controls").logq.tolist()
    t = pq.read_table(path)
    i = t.column_names.index("logq:full")
    edited = t.set_column(i, "logq:full", pa.array([0.0] * t.num_rows, pa.float64()))
    pq.write_table(edited.replace_schema_metadata(t.schema.metadata), path)
    with pytest.raises(
        StoreError, match="scores.parquet of run [0-9a-f]{16} \\('controls'\\) does not match"
    ):
        load_run_scores(str(d), run="controls")
    recs = read_passages(str(TEXTS)).records
    again = _score(
        d, recs[30:60], "controls"
    )  # the same command: rewrites scores.parquet from the units
    assert again.units_scored == 0
    assert load_run_scores(str(d), run="controls").logq.tolist() == want


def test_an_edited_unit_is_refused_before_scores_are_rebuilt_from_it(store):
    d, runs = store
    m = _manifest(d)
    uid, u = next(iter(m["units"].items()))
    p = d / "units" / u["procedure"][:16] / f"{uid}.parquet"
    p.write_bytes(p.read_bytes() + b"\0")
    run = next(
        r
        for r in runs
        if uid in json.loads((d / "runs" / runs[r] / "run.json").read_text())["units"]
    )
    recs = read_passages(str(TEXTS)).records
    with pytest.raises(StoreError, match=f"unit {uid[:12]} .* does not match the sha256"):
        _score(d, recs[:30] if run == "members" else recs[30:60], run)


def test_a_kill_between_sealing_and_replacing_scores_reads(store):
    """scores.parquet is sealed before it replaces the old one: a kill between the two leaves
    both hashes recorded, and the file on disk (the old one) still reads."""
    d, runs = store
    m = _manifest(d)
    rid = runs["members"]
    m["runs"][rid]["scores_sha256_previous"] = m["runs"][rid]["scores_sha256"]
    m["runs"][rid]["scores_sha256"] = "0" * 64  # the new file's, never renamed into place
    _write_manifest(d, m)
    assert len(load_run_scores(str(d), run="members")) == 30


def test_memclaim_test_refuses_a_store_with_swapped_labels(store, tmp_path, capsys):
    """The issue's case: the claim on members against controls, from a store whose labels were
    swapped by hand, is refused (exit 2) instead of computed on the wrong sets."""
    d, runs = store
    args = [
        "test",
        "--candidates",
        str(d),
        "--run",
        "members",
        "--controls",
        str(d),
        "--controls-run",
        "controls",
        "--policy",
        "full",
        "--alpha",
        "0.2",
        "--json",
    ]
    assert main(args + ["--out", str(tmp_path / "ok")]) == 0, capsys.readouterr().err
    _swap_labels(d, runs)
    capsys.readouterr()
    assert main(args + ["--out", str(tmp_path / "swapped")]) == 2
    err = capsys.readouterr().err
    assert "in manifest.json but" in err and "fix:" in err and not (tmp_path / "swapped").exists()


def test_a_census_rerun_rewrites_its_own_labels_and_refuses_an_edited_unit(tmp_path):
    """A census re-run recomputes its runs' ids and labels from its inputs and rewrites their
    records (a label swapped by hand in its store is put back, and the result is the same);
    the scores it reads back come only from sealed units."""
    from memclaim.api import census

    doc, ctl = (
        ROOT / "tests" / "data" / "genesis_1_3.txt",
        ROOT / "tests" / "data" / "new_genesis_style.txt",
    )
    kw = dict(
        stride=16, prefix_tokens=8, suffix_tokens=8, policies=["full"], out=str(tmp_path / "c")
    )
    first = census(str(MODEL), document=str(doc), control=str(ctl), **kw)
    d = tmp_path / "c" / "store"
    labels = {rid: r["label"] for rid, r in _manifest(d)["runs"].items()}
    m = _manifest(d)
    a, b = list(m["runs"])
    m["runs"][a]["label"], m["runs"][b]["label"] = m["runs"][b]["label"], m["runs"][a]["label"]
    _write_manifest(d, m)
    again = census(str(MODEL), document=str(doc), control=str(ctl), **kw)
    assert {rid: r["label"] for rid, r in _manifest(d)["runs"].items()} == labels
    assert again.to_dict()["pairs"] == first.to_dict()["pairs"]
    uid, u = next(iter(_manifest(d)["units"].items()))
    p = d / "units" / u["procedure"][:16] / f"{uid}.parquet"
    p.write_bytes(p.read_bytes() + b"\0")
    with pytest.raises(StoreError, match=f"unit {uid[:12]} .* does not match the sha256"):
        census(str(MODEL), document=str(doc), control=str(ctl), **kw)


def test_a_writer_does_not_put_back_an_entry_another_writer_sealed_since(store):
    """Two processes on one store: B seals a run's new scores.parquet while A, which read the
    manifest before, records something else; A's write keeps B's seal (A's stale copy of the
    run's entry put the old hash back, and the run then read as edited)."""
    d, runs = store
    a, b = ScoreStore(d), ScoreStore(d)
    rid = runs["members"]
    b.seal_scores(rid, "f" * 64)
    b.scores_sealed(rid)
    a.learn_fingerprint("0" * 64, "1" * 64, 2)
    a.write_manifest()
    m = _manifest(d)
    assert m["runs"][rid]["scores_sha256"] == "f" * 64 and "0" * 64 in m["fingerprints"]
