"""Issue 12 B9, B11: several writers of one store.

Two real processes score into one store at the same time (tiny GPT). A small driver script
holds each process at its first unit until the other has reached the same point (or, for two
copies of one command, until the other is waiting for the run's lock), so the writes really
interleave, whatever the machine's speed:

* two runs with different inputs: both runs and every unit of both are recorded;
* two copies of one command: the run's units are scored once in all.

And the temporary files of killed writers are deleted by the next writer that finds itself
alone, never while another writer is live.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from memclaim.fsutil import file_lock
from memclaim.store.store import WRITERS_LOCK, ScoreStore

pytestmark = pytest.mark.integration

# Runs ``memclaim`` with a barrier: the first unit this process scores waits until the other
# process has reached its first unit too, or is blocked on the run's lock (a second copy of
# the same run). ``started/ME`` is written when a scoring run begins. Never waits longer than
# 120 s (then it simply goes on).
DRIVER = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path

    import memclaim.scoring.local_backend as L  # where the local backend looks score_unit up
    import memclaim.scoring.runner as R
    from memclaim.cli.main import main

    me, other, sync, argv = sys.argv[1], sys.argv[2], Path(sys.argv[3]), json.loads(sys.argv[4])
    first = [True]
    real_score_unit = L.score_unit

    def score_unit(*a, **k):
        if first[0]:
            first[0] = False
            (sync / f"scoring-{me}").touch()
            deadline = time.time() + 120
            while time.time() < deadline and not ((sync / f"scoring-{other}").exists()
                                                  or (sync / f"waiting-{other}").exists()):
                time.sleep(0.01)
        return real_score_unit(*a, **k)

    L.score_unit = score_unit
    if hasattr(R.ScoreStore, "run_lock"):
        real_lock = R.ScoreStore.run_lock

        def run_lock(self, run_id, *, blocking=True):
            if blocking:
                (sync / f"waiting-{me}").touch()
            return real_lock(self, run_id, blocking=blocking)

        R.ScoreStore.run_lock = run_lock
    sys.exit(main(argv))
""")


def _texts(path: Path, records) -> Path:
    path.write_text("".join(json.dumps({"id": r["id"], "text": r["text"]}) + "\n" for r in records))
    return path


@pytest.fixture(scope="module")
def inputs(tmp_path_factory, toy_data):
    d = tmp_path_factory.mktemp("concurrent-inputs")
    mem = [r for r in toy_data["planted"] if r["id"].startswith("member")][:8]
    ctl = [r for r in toy_data["held_out"] if r["id"].startswith("control")][:8]
    (d / "driver.py").write_text(DRIVER)
    return d, _texts(d / "members.jsonl", mem), _texts(d / "controls.jsonl", ctl)


def _score_argv(inp: Path, store: Path) -> list[str]:
    return [
        "score",
        "toy",
        "--input",
        str(inp),
        "--prefix-tokens",
        "8",
        "--suffix-tokens",
        "8",
        "--policy",
        "full",
        "--policy",
        "greedy",
        "--unit-size",
        "2",
        "--batch-size",
        "2",
        "--threads",
        "1",
        "--no-progress",
        "--json",
        "--out",
        str(store),
    ]


def _together(driver: Path, sync: Path, argv_a: list[str], argv_b: list[str]) -> tuple[dict, dict]:
    sync.mkdir()
    env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
    procs = [
        subprocess.Popen(
            [sys.executable, str(driver), me, other, str(sync), json.dumps(argv)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for me, other, argv in (("a", "b", argv_a), ("b", "a", argv_b))
    ]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
        outs.append(json.loads(out))
    return outs[0], outs[1]


def test_two_runs_into_one_store_at_once_are_both_recorded(inputs, tmp_path):
    d, members, controls = inputs
    store = tmp_path / "store"
    a, b = _together(
        d / "driver.py",
        tmp_path / "sync",
        _score_argv(members, store),
        _score_argv(controls, store),
    )
    assert (tmp_path / "sync" / "scoring-a").exists() and (
        tmp_path / "sync" / "scoring-b"
    ).exists()  # they overlapped (and the driver's patch of score_unit took effect)
    man = json.loads((store / "manifest.json").read_text())
    assert set(man["runs"]) == {a["run_id"], b["run_id"]}
    st = ScoreStore(store, create=False)
    for s in (a, b):
        run = st.read_run(s["run_id"])
        assert set(run["units"]) <= set(man["units"])  # every unit of both runs is in the manifest
        assert s["units_scored"] == s["n_units"]
    from memclaim.store.results import load_run_scores

    for s in (a, b):
        assert len(load_run_scores(store, run=s["run_id"], policy="full")) == s["n_windows"]
    assert not list(store.rglob("*.tmp"))


def test_two_copies_of_one_command_score_its_units_once(inputs, tmp_path):
    d, members, _ = inputs
    store = tmp_path / "store"
    argv = _score_argv(members, store)
    a, b = _together(d / "driver.py", tmp_path / "sync", argv, argv)
    assert a["run_id"] == b["run_id"]
    assert a["units_scored"] + b["units_scored"] == a["n_units"]  # once in all, not twice
    assert (
        a["units_scored"] + a["units_reused"]
        == a["n_units"]
        == b["units_scored"] + b["units_reused"]
    )
    man = json.loads((store / "manifest.json").read_text())
    assert len(man["units"]) == a["n_units"]
    assert not list(store.rglob("*.tmp"))


def _stale(store: Path) -> list[Path]:
    """What a writer killed mid-write leaves: temporary unit, run and manifest files."""
    st = ScoreStore(store, create=False)
    (rid,) = st.runs()
    pk = st.read_run(rid)["procedure"]
    paths = [
        store / "units" / pk[:16] / ".0123abcd.parquet.k9x2.tmp",
        store / "runs" / rid / ".scores.parquet.q1w2.tmp",
        store / ".manifest.json.zz11.tmp",
        store / "procedures" / f".{pk}.json.aa00.tmp",
        store / ".ray-probe-deadbeef",
    ]
    for p in paths:
        p.write_bytes(b"half a file")
    return paths


def test_stale_temp_files_are_removed_only_when_no_writer_is_live(inputs, tmp_path, capsys):
    from memclaim.cli.main import main

    _, members, _ = inputs
    store = tmp_path / "store"
    assert main(_score_argv(members, store)) == 0
    capsys.readouterr()
    stale = _stale(store)
    keep = store / "notes.tmp"  # not a memclaim temporary name: never touched
    keep.write_text("mine")
    with file_lock(
        store / WRITERS_LOCK, shared=True
    ):  # another writer is live (as a scoring run holds it)
        assert main(_score_argv(members, store)) == 0
    capsys.readouterr()
    unit_tmp, run_tmp, manifest_tmp, proc_tmp, probe = stale
    assert (
        unit_tmp.exists() and proc_tmp.exists() and probe.exists()
    )  # may be the live writer's: kept
    assert not manifest_tmp.exists()  # written only under the manifest lock: a dead writer's
    assert not run_tmp.exists()  # written only under the run's lock: a dead writer's
    assert main(_score_argv(members, store)) == 0  # alone now: the dead writers' files go
    assert not unit_tmp.exists() and not proc_tmp.exists() and not probe.exists()
    assert keep.read_text() == "mine"
    assert [p for p in store.rglob("*.tmp")] == [keep]
