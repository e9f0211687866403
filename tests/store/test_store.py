"""The durable store: resume after kill -9, no duplicates, no model work on re-runs, disk full."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from memclaim.decoding import parse_policies
from memclaim.errors import StoreError
from memclaim.scoring.prompts import PromptRule
from memclaim.scoring.runner import run_scoring
from memclaim.store.store import ScoreStore
from memclaim.text.io import read_passages
from memclaim.text.windows import passage_windows

POL = parse_policies(["top-k:5", "greedy", "full"])


def _passages(path: Path, n: int, seed: int = 0) -> Path:
    from memclaim.train.corpus import MarkovZipf

    gen = MarkovZipf(n_words=120, seed=3)
    rng = np.random.default_rng(seed)
    with open(path, "w") as fh:
        for i in range(n):
            fh.write(json.dumps({"id": f"p{i}", "text": gen.passage(rng, n_words=30)}) + "\n")
    return path


def _run(model, inp, out, **kw):
    ps = read_passages(inp)
    ws = passage_windows(ps.records, model.tokenizer, prefix_tokens=8, suffix_tokens=6)
    return run_scoring(
        model,
        ws,
        policies=POL,
        prefix_tokens=8,
        suffix_tokens=6,
        prompt_rule=PromptRule(),
        out_dir=out,
        **kw,
    )


def _scores(out: Path, run_id: str):
    return pq.read_table(out / "runs" / run_id / "scores.parquet").to_pandas()


def _all_item_keys(out: Path):
    keys = []
    for f in (out / "units").rglob("*.parquet"):
        keys += pq.read_table(f, columns=["item_key"]).column("item_key").to_pylist()
    return keys


def test_rerun_is_a_no_op_without_loading_weights(random_model_dir, tmp_path):
    from memclaim.models import load_model

    inp = _passages(tmp_path / "p.jsonl", 40)
    m = load_model(str(random_model_dir))
    s1 = _run(m, inp, tmp_path / "store", unit_size=16)
    assert s1.units_scored == s1.n_units == 3 and s1.model_loaded
    m2 = load_model(str(random_model_dir))
    s2 = _run(m2, inp, tmp_path / "store", unit_size=16)
    assert s2.units_scored == 0 and s2.units_reused == 3 and s2.run_id == s1.run_id
    assert not m2.weights_loaded  # no model work at all
    a, b = _scores(tmp_path / "store", s1.run_id), _scores(tmp_path / "store", s2.run_id)
    assert a.equals(b)
    keys = _all_item_keys(tmp_path / "store")
    assert len(keys) == len(set(keys)) == s1.n_items


def test_duplicate_texts_are_scored_once(random_model, tmp_path):
    inp = tmp_path / "d.jsonl"
    src = _passages(tmp_path / "src.jsonl", 3)
    lines = src.read_text().splitlines()
    recs = [json.loads(x) for x in lines]
    recs.append({"id": "copy", "text": recs[0]["text"]})
    inp.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    s = _run(random_model, inp, tmp_path / "store")
    assert s.n_windows == 4 and s.n_items == 3
    df = _scores(tmp_path / "store", s.run_id)
    row = df.set_index("source")
    assert row.loc["copy", "logq:full"] == row.loc["p0", "logq:full"]


def test_disk_full_leaves_a_readable_store_and_resumes(random_model, tmp_path, monkeypatch):
    import memclaim.store.store as store_mod

    inp = _passages(tmp_path / "p.jsonl", 48)
    ref = _run(random_model, inp, tmp_path / "ref", unit_size=8)
    real = store_mod.atomic_write_bytes
    calls = {"n": 0}

    def flaky(path, data):
        if str(path).endswith(".parquet") and "units" in str(path):
            calls["n"] += 1
            if calls["n"] == 3:
                raise OSError(errno.ENOSPC, "No space left on device")
        return real(path, data)

    monkeypatch.setattr(store_mod, "atomic_write_bytes", flaky)
    with pytest.raises(StoreError, match="disk full") as e:
        _run(random_model, inp, tmp_path / "store", unit_size=8)
    assert "re-run the same command" in str(e.value)
    monkeypatch.setattr(store_mod, "atomic_write_bytes", real)
    st = ScoreStore(tmp_path / "store", create=False)
    assert len(st.manifest["units"]) == 2  # the two finished units, readable
    assert not list((tmp_path / "store").rglob("*.tmp"))  # no half-written file
    s = _run(random_model, inp, tmp_path / "store", unit_size=8)
    assert s.units_reused == 2 and s.units_scored == s.n_units - 2
    assert (
        _scores(tmp_path / "store", s.run_id)
        .drop(columns=[])
        .equals(_scores(tmp_path / "ref", ref.run_id))
    )


def test_orphan_unit_files_are_adopted(random_model, tmp_path):
    inp = _passages(tmp_path / "p.jsonl", 24)
    s = _run(random_model, inp, tmp_path / "store", unit_size=8)
    # simulate a driver killed after writing a unit but before the manifest: drop its entry
    man = json.loads((tmp_path / "store" / "manifest.json").read_text())
    victim = sorted(man["units"])[0]
    del man["units"][victim]
    (tmp_path / "store" / "manifest.json").write_text(json.dumps(man))
    s2 = _run(random_model, inp, tmp_path / "store", unit_size=8)
    assert s2.units_scored == 0 and s2.units_reused == s.n_units


@pytest.mark.parametrize("damage", ["data pages", "cut short"])
def test_an_unreadable_orphan_unit_is_scored_again(random_model, tmp_path, damage):
    """Issue 24 item 4: a unit file the manifest does not know whose data cannot be read (a torn
    copy: the footer intact, the data pages not; or cut short) is scored again on resume, and
    the run's scores equal an undamaged run's. (Before: a readable footer was enough to adopt
    it, and the run then failed reading the results with a StoreError.)"""
    inp = _passages(tmp_path / "p.jsonl", 24)
    s = _run(random_model, inp, tmp_path / "store", unit_size=8)
    ref = _scores(tmp_path / "store", s.run_id)
    man = json.loads((tmp_path / "store" / "manifest.json").read_text())
    victim = sorted(man["units"])[0]
    del man["units"][victim]
    (tmp_path / "store" / "manifest.json").write_text(json.dumps(man))
    path = ScoreStore(tmp_path / "store", create=False).unit_path(s.procedure_key, victim)
    data = bytearray(path.read_bytes())
    footer = int.from_bytes(
        data[-8:-4], "little"
    )  # Parquet: ... footer, its length (4 bytes), b"PAR1"
    if damage == "data pages":
        for i in range(4, len(data) - footer - 8, 7):
            data[i] ^= 0x5A
    else:
        data = data[: len(data) // 2]
    path.write_bytes(bytes(data))
    if damage == "data pages":
        assert pq.read_schema(path).metadata[
            b"memclaim"
        ]  # the footer still reads: only the data is gone
    s2 = _run(random_model, inp, tmp_path / "store", unit_size=8)
    assert s2.units_scored == 1 and s2.units_reused == s.n_units - 1
    assert _scores(tmp_path / "store", s2.run_id).equals(ref)
    assert victim in json.loads((tmp_path / "store" / "manifest.json").read_text())["units"]


def test_a_folder_in_the_way_of_a_unit_is_named_not_deleted(random_model, tmp_path):
    inp = _passages(tmp_path / "p.jsonl", 16)
    s = _run(random_model, inp, tmp_path / "store", unit_size=8)
    man = json.loads((tmp_path / "store" / "manifest.json").read_text())
    victim = sorted(man["units"])[0]
    del man["units"][victim]
    (tmp_path / "store" / "manifest.json").write_text(json.dumps(man))
    path = ScoreStore(tmp_path / "store", create=False).unit_path(s.procedure_key, victim)
    path.unlink()
    path.mkdir()
    (path / "mine.txt").write_text("not memclaim's")
    with pytest.raises(StoreError, match="in the way of unit") as e:
        _run(random_model, inp, tmp_path / "store", unit_size=8)
    assert "move it out" in str(e.value) and (path / "mine.txt").read_text() == "not memclaim's"


def test_kill_9_mid_run_then_resume_equals_uninterrupted(random_model_dir, tmp_path):
    """A real `kill -9` of the CLI mid-run; the re-run finishes the rest, duplicates nothing and
    gives the same numbers as an uninterrupted run."""
    inp = _passages(tmp_path / "p.jsonl", 600)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    cmd = [
        sys.executable,
        "-m",
        "memclaim",
        "score",
        str(random_model_dir),
        "--input",
        str(inp),
        "--prefix-tokens",
        "8",
        "--suffix-tokens",
        "6",
        "--policy",
        "top-k:5",
        "--policy",
        "greedy",
        "--policy",
        "full",
        "--unit-size",
        "4",
        "--batch-size",
        "4",
        "--no-progress",
        "--threads",
        "1",
    ]
    killed = tmp_path / "killed"
    proc = subprocess.Popen(
        cmd + ["--out", str(killed)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    deadline = time.time() + 300
    while time.time() < deadline:
        if len(list((killed / "units").rglob("*.parquet"))) >= 3 or proc.poll() is not None:
            break
        time.sleep(0.02)
    assert proc.poll() is None, "the run finished before it could be killed; enlarge the input"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    n_before = len(list((killed / "units").rglob("*.parquet")))
    out = subprocess.run(
        cmd + ["--out", str(killed), "--json"], env=env, capture_output=True, text=True, check=True
    )
    summary = json.loads(out.stdout)
    assert summary["units_reused"] >= n_before >= 3
    assert summary["units_scored"] + summary["units_reused"] == summary["n_units"]
    keys = _all_item_keys(killed)
    assert len(keys) == len(set(keys)) == summary["n_items"]
    fresh = subprocess.run(
        cmd + ["--out", str(tmp_path / "fresh"), "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    fsum = json.loads(fresh.stdout)
    assert fsum["run_id"] == summary["run_id"]
    assert _scores(killed, summary["run_id"]).equals(_scores(tmp_path / "fresh", fsum["run_id"]))
