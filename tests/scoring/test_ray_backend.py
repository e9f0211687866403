"""Ray-distributed scoring: the same store as a local run, workers killed mid-unit, driver death.

One local Ray cluster (3 logical CPUs on the 2 cores) and one pool of 2 worker actors serve the
whole module: a Ray start and a model load per actor take seconds each, so tests that need
fresh actors are few (the CLI test's one worker, and the restarts the fault tests cause). The
cluster tests carry the ``ray`` and ``integration`` markers and skip, with the reason, when
Ray is not installed; the tests of the error that names the extra run either way.
Scores are compared bit for bit with a local run *at the same thread count* (1 torch thread,
what each worker uses): the unembedding matmul of a 1,024-token vocabulary does not give the
same float32 bits with 1 and 2 MKL threads, on any backend.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from memclaim.cli.main import main
from memclaim.decoding import parse_policies
from memclaim.errors import InputError, MissingExtraError, ModelLoadError
from memclaim.scoring.prompts import PromptRule
from memclaim.scoring.runner import run_scoring
from memclaim.scoring.store import ScoreStore

POL = parse_policies(["top-k:5", "greedy", "full"])
PREFIX, SUFFIX, UNIT = 8, 6, 8
RAY_REASON = "needs the optional ray extra: pip install 'memclaim[ray]'"


# --------------------------------------------------------------------------- helpers
def _passages(path: Path, n: int, seed: int = 0) -> Path:
    from memclaim.train.corpus import MarkovZipf

    gen = MarkovZipf(n_words=120, seed=3)
    rng = np.random.default_rng(seed)
    path.write_text(
        "".join(
            json.dumps({"id": f"p{i}", "text": gen.passage(rng, n_words=24)}) + "\n"
            for i in range(n)
        )
    )
    return path


def _windows(model, inp):
    from memclaim.text.io import read_passages
    from memclaim.text.windows import passage_windows

    return passage_windows(
        read_passages(inp).records, model.tokenizer, prefix_tokens=PREFIX, suffix_tokens=SUFFIX
    )


def _run(model, inp, out, backend=None, **kw):
    return run_scoring(
        model,
        _windows(model, inp),
        policies=POL,
        prefix_tokens=PREFIX,
        suffix_tokens=SUFFIX,
        prompt_rule=PromptRule(),
        out_dir=out,
        unit_size=UNIT,
        backend=backend,
        label=f"passages:{Path(inp).name}",
        **kw,
    )  # the CLI's label, so run ids match


def _scores(summary):
    return pq.read_table(Path(summary.store) / "runs" / summary.run_id / "scores.parquet")


def _unit_tables(store: Path) -> dict:
    """unit id -> its table without the file's metadata (which holds the write time)."""
    return {
        f.stem: pq.read_table(f).replace_schema_metadata(None)
        for f in (store / "units").rglob("*.parquet")
    }


def _assert_exactly_once(summary, ref):
    """Every window scored exactly once: the unit files hold each item once, the manifest lists
    every unit of the run, and the numbers equal the local run's bit for bit."""
    store = Path(summary.store)
    keys = []
    for t in _unit_tables(store).values():
        keys += t.column("item_key").to_pylist()
    assert len(keys) == len(set(keys)) == summary.n_items
    run = json.loads((store / "runs" / summary.run_id / "run.json").read_text())
    man = ScoreStore(store, create=False).manifest
    assert set(run["units"]) <= set(man["units"]) and len(run["units"]) == summary.n_units
    assert sum(man["units"][u]["n_items"] for u in run["units"]) == summary.n_items
    assert _scores(summary).equals(_scores(ref), check_metadata=True)
    ref_units = _unit_tables(Path(ref.store))
    units = _unit_tables(store)
    assert units.keys() == ref_units.keys()
    for uid, t in units.items():
        assert t.equals(ref_units[uid]), uid


# --------------------------------------------------------------------------- without a cluster
def test_missing_ray_names_the_extra(monkeypatch, tmp_path, capsys, toy):
    """With ray absent, the library and the CLI say which extra to install (exit 2)."""
    from memclaim.scoring.ray_backend import require_ray

    monkeypatch.setitem(sys.modules, "ray", None)  # makes `import ray` raise ImportError
    with pytest.raises(MissingExtraError, match=r"memclaim\[ray\]"):
        require_ray()
    inp = _passages(tmp_path / "p.jsonl", 4)
    rc = main(
        [
            "score",
            "toy",
            "--input",
            str(inp),
            "--prefix-tokens",
            "8",
            "--suffix-tokens",
            "6",
            "--out",
            str(tmp_path / "s"),
            "--backend",
            "ray",
            "--no-progress",
        ]
    )
    assert rc == 2
    err = capsys.readouterr().err
    assert "pip install 'memclaim[ray]'" in err
    assert not (tmp_path / "s").exists()  # failed before any work


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--workers", "2"], "--workers only apply with --backend ray"),
        (["--backend", "ray", "--workers", "0"], "--workers must be >= 1, got 0"),
        (
            ["--backend", "ray", "--threads-per-worker", "0"],
            "--threads-per-worker must be >= 1, got 0",
        ),
        (["--backend", "ray", "--gpus-per-worker", "-1"], "--gpus-per-worker must be >= 0, got -1"),
    ],
)
def test_cli_backend_option_errors(toy, tmp_path, capsys, args, fragment):
    inp = _passages(tmp_path / "p.jsonl", 4)
    rc = main(
        [
            "score",
            "toy",
            "--input",
            str(inp),
            "--prefix-tokens",
            "8",
            "--suffix-tokens",
            "6",
            "--out",
            str(tmp_path / "s"),
            "--no-progress",
            *args,
        ]
    )
    assert rc == 2
    assert fragment in capsys.readouterr().err


def test_backend_argument_errors(toy):
    from memclaim.errors import DomainError
    from memclaim.scoring.ray_backend import RayBackend
    from ray_faults import FaultInjection

    with pytest.raises(DomainError, match="--workers"):
        RayBackend(toy, POL, workers=0)
    with pytest.raises(DomainError, match="--threads-per-worker"):
        RayBackend(toy, POL, threads_per_worker=0)
    with pytest.raises(DomainError, match="--gpus-per-worker"):
        RayBackend(toy, POL, gpus_per_worker=-0.5)
    with pytest.raises(InputError, match="'everywhere'"):
        RayBackend(toy, POL, write="everywhere")
    with pytest.raises(InputError, match="'halfway'"):
        FaultInjection("halfway", "/tmp/x")
    b = RayBackend(toy, POL, write="worker")
    with pytest.raises(InputError, match="needs a store"):
        list(b.run([object()]))
    assert list(RayBackend(toy, POL).run([])) == []  # nothing to do: no cluster started


@pytest.mark.integration
def test_device_adapter_scores_like_the_plain_model(toy):
    """The accelerator adapter (inputs to the device, logits back to the CPU) changes no bit
    when the device is the CPU; on a GPU it is the same code with another device string."""
    from memclaim.models.device import DeviceLM
    from memclaim.scoring.engine import TeacherForcingEngine

    rng = np.random.default_rng(0)
    prompts = [[0] + list(rng.integers(1, toy.lm.vocab_size, 7)) for _ in range(5)]
    suffixes = [list(rng.integers(1, toy.lm.vocab_size, 4)) for _ in range(5)]
    a = TeacherForcingEngine(toy.lm, POL).score_batch(prompts, suffixes)
    b = TeacherForcingEngine(DeviceLM(toy.lm, "cpu"), POL).score_batch(prompts, suffixes)
    for f in a.__dataclass_fields__:
        assert np.array_equal(getattr(a, f), getattr(b, f)), f
    # the near-verbatim beam search goes through the KV cache (select_cache) as well
    from memclaim.scoring.runner import score_unit
    from memclaim.scoring.units import make_items, make_units

    (unit,) = make_units(make_items(zip(prompts, suffixes)).values(), "p" * 64)
    nv = {"epsilons": [1], "beams": [2]}
    ra = score_unit(TeacherForcingEngine(toy.lm, POL), unit, batch_size=5, near_verbatim=nv)
    rb = score_unit(
        TeacherForcingEngine(DeviceLM(toy.lm, "cpu"), POL), unit, batch_size=5, near_verbatim=nv
    )
    assert ra.extra.keys() == rb.extra.keys() and any(k.startswith("nv_logq:") for k in ra.extra)
    for k in ra.extra:
        assert np.array_equal(ra.extra[k], rb.extra[k]), k


# --------------------------------------------------------------------------- one cluster per module
@pytest.fixture(scope="module")
def cluster():
    ray = pytest.importorskip("ray", reason=RAY_REASON)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # inherited by the workers
    owned = not ray.is_initialized()
    if owned:
        # 3 logical CPUs: the module's 2-worker pool plus one more worker for the tests that
        # need a pool of their own (Ray CPUs are scheduling slots, not pinned cores)
        ray.init(
            address="local",
            num_cpus=3,
            include_dashboard=False,
            logging_level="ERROR",
            object_store_memory=100 << 20,
            _system_config={"worker_niceness": 0},
        )  # as RayBackend does, see there
    yield ray.get_runtime_context().gcs_address
    if owned:
        ray.shutdown()


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    return _passages(tmp_path_factory.mktemp("ray-inputs") / "p.jsonl", 96)


@pytest.fixture(scope="module")
def local_ref(toy, inputs, tmp_path_factory):
    """The local backend's store, scored with 1 torch thread like each Ray worker."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _run(toy, inputs, tmp_path_factory.mktemp("local") / "store")
    finally:
        torch.set_num_threads(n)


@pytest.fixture(scope="module")
def pool(cluster, toy):
    from memclaim.scoring.ray_backend import RayBackend

    with RayBackend(toy, POL, workers=2, threads_per_worker=1) as b:
        yield b


@pytest.fixture
def fresh_pool(pool):
    """The module pool with its per-run settings restored afterwards."""
    yield pool
    pool.write, pool.fault = "auto", None


class _Hooked:
    """A backend that passes units through ``inner`` and calls ``after(i)`` once the i-th result
    has been yielded (to kill a worker, or the driver, at a chosen point of a run)."""

    name = "ray"

    def __init__(self, inner, after):
        self.inner, self.after = inner, after

    device_class = "cpu"

    @property
    def weights_loaded(self):
        return self.inner.weights_loaded

    def supports(self, procedure, stats):
        return self.inner.supports(procedure, stats)

    def run(self, units, job=None):
        for i, res in enumerate(self.inner.run(units, job)):
            yield res
            self.after(i)

    def stats(self):
        return self.inner.stats()


@pytest.mark.ray
@pytest.mark.integration
def test_two_workers_write_the_same_store_as_local(fresh_pool, local_ref, inputs, toy, tmp_path):
    s = _run(toy, inputs, tmp_path / "store", backend=fresh_pool)
    assert s.backend == "ray" and s.run_id == local_ref.run_id and s.model_loaded
    assert s.units_scored == s.n_units == local_ref.n_units and s.n_units >= 8
    _assert_exactly_once(s, local_ref)
    bs = s.backend_stats
    assert bs["write_mode"] == "worker" and bs["workers"] == 2 and bs["restarts"] == 0
    per = bs["per_worker"]
    assert all(w["units"] >= 1 and w["windows_per_second"] > 0 and w["threads"] == 1 for w in per)
    assert sum(w["windows"] for w in per) == bs["windows"] == s.n_items
    assert len({w["pids"][0] for w in per}) == 2  # two processes
    assert bs["forward_tokens"] == local_ref.backend_stats["forward_tokens"]  # the same model work
    assert bs["unembed_rows"] == local_ref.backend_stats["unembed_rows"]
    assert not list((tmp_path / "store").glob(".ray-probe-*"))  # the probe is cleaned up
    # a finished run re-run does no model work and does not touch the pool
    again = _run(toy, inputs, tmp_path / "store", backend=fresh_pool)
    assert again.units_scored == 0 and again.units_reused == s.n_units and again.backend_stats == {}


@pytest.mark.ray
@pytest.mark.integration
@pytest.mark.parametrize("mode", ["driver", "auto-unseen"])
def test_driver_writes_when_workers_cannot(
    fresh_pool, local_ref, inputs, toy, tmp_path, monkeypatch, mode
):
    """write='driver', or a store the workers cannot see (no probe file at their path): the
    workers return the scores and the driver writes the same files."""
    if mode == "driver":
        fresh_pool.write = "driver"
    else:
        monkeypatch.setattr(
            fresh_pool, "_write_probe", lambda: setattr(fresh_pool, "_token", "unseen")
        )
    s = _run(toy, inputs, tmp_path / "store", backend=fresh_pool)
    assert s.backend_stats["write_mode"] == "driver"
    _assert_exactly_once(s, local_ref)


@pytest.mark.ray
@pytest.mark.integration
@pytest.mark.parametrize("stage", ["scored", "written"])
def test_worker_process_killed_mid_unit(fresh_pool, local_ref, inputs, toy, tmp_path, stage):
    """A worker SIGKILLs itself inside a unit, after scoring it (nothing written) or after
    writing its file (the driver never heard of it). Ray restarts the actor and re-runs the
    unit: every window is scored exactly once and the numbers equal the local run's."""
    from ray_faults import FaultInjection

    marker = tmp_path / "died"
    fresh_pool.fault = FaultInjection(stage, str(marker))
    s = _run(toy, inputs, tmp_path / "store", backend=fresh_pool)
    dead_pid = int(marker.read_text())  # a worker really died, once
    bs = s.backend_stats
    assert bs["restarts"] == 1 and bs["requeued_units"] == 0
    (victim,) = [w for w in bs["per_worker"] if w["restarts"]]
    assert (
        victim["pids"][0] == dead_pid and len(victim["pids"]) == 2
    )  # that worker, then its successor
    assert all(w["alive"] for w in bs["per_worker"])
    _assert_exactly_once(s, local_ref)


@pytest.mark.ray
@pytest.mark.integration
def test_actor_killed_by_the_driver_mid_run(fresh_pool, local_ref, inputs, toy, tmp_path):
    """`ray.kill` of a busy worker actor right after the first unit comes back."""
    import ray

    killed = []

    def kill_after_first(i):
        if i == 0:
            killed.append(fresh_pool.actors[0])
            ray.kill(killed[0], no_restart=False)  # Ray restarts it and re-runs its units

    s = _run(toy, inputs, tmp_path / "store", backend=_Hooked(fresh_pool, kill_after_first))
    assert len(killed) == 1 and s.backend_stats["restarts"] == 1
    _assert_exactly_once(s, local_ref)


@pytest.mark.ray
@pytest.mark.integration
def test_resume_after_the_driver_dies(fresh_pool, local_ref, inputs, toy, tmp_path):
    """The driver dies after recording two units while workers still hold units in flight (their
    files land after it is gone, orphaned). The re-run adopts what is on disk, scores only the
    rest, and ends with every window scored once and the local run's numbers."""

    def die_after_two(i):
        if i == 1:
            raise KeyboardInterrupt  # the driver is gone: nothing more is recorded

    out = tmp_path / "store"
    with pytest.raises(KeyboardInterrupt):
        _run(toy, inputs, out, backend=_Hooked(fresh_pool, die_after_two))
    assert len(ScoreStore(out, create=False).manifest["units"]) == 2
    s = _run(toy, inputs, out, backend=fresh_pool)
    assert s.units_reused >= 2 and s.units_scored + s.units_reused == s.n_units
    assert s.units_scored == s.backend_stats.get("units", 0)
    _assert_exactly_once(s, local_ref)


@pytest.mark.integration
def test_a_worker_refuses_a_different_model(toy):
    """A worker whose model files differ from the driver's (by fingerprint) refuses to score, and
    says so from every call (a failed actor __init__ would only say 'actor died')."""
    from dataclasses import replace

    from memclaim.scoring.ray_backend import ModelRef, ScoringWorker
    from memclaim.scoring.units import make_items, make_units

    wrong = replace(ModelRef.from_loaded(toy), fingerprint="0" * 64)
    with pytest.raises(ModelLoadError, match="fingerprint"):
        wrong.load()
    w = ScoringWorker(wrong, [p.spec for p in POL], batch_size=4, threads=1)
    (unit,) = make_units(make_items([([0, 5, 6], [7, 8])]).values(), "p" * 64)
    for _ in range(2):
        with pytest.raises(ModelLoadError, match="the driver's has 0000000000000000"):
            w.score(unit)
    ok = ScoringWorker(ModelRef.from_loaded(toy), [p.spec for p in POL], batch_size=4, threads=1)
    out = ok.score(unit)  # no store given: the scores come back to the driver
    assert out["written"] is False and out["result"].item_keys == (
        unit.items[0].key,
    )  # a frozen value


@pytest.mark.integration
def test_a_unit_file_landing_during_start_up_is_recorded(
    toy, inputs, local_ref, tmp_path, monkeypatch
):
    """A dead driver's Ray workers may still be finishing units while the next run starts: a unit
    file that lands after the store's first adoption pass is counted as done, so it must be
    recorded in the manifest too (deterministic: the file is copied in right after that pass)."""
    import shutil

    import torch

    real = ScoreStore.adopt_orphans
    calls = []

    def adopt(self, pkey, ids):
        n = real(self, pkey, ids)
        if not calls:
            src = sorted((Path(local_ref.store) / "units").rglob("*.parquet"))[0]
            dst = self.unit_path(pkey, src.stem)
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst)
        calls.append(n)
        return n

    monkeypatch.setattr(ScoreStore, "adopt_orphans", adopt)
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        s = _run(toy, inputs, tmp_path / "store")
    finally:
        torch.set_num_threads(n)
    assert calls[0] == 0 and s.units_reused == 1 and s.units_scored == s.n_units - 1
    _assert_exactly_once(s, local_ref)  # includes: every unit of the run is in the manifest


@pytest.mark.ray
@pytest.mark.integration
def test_cluster_too_small_and_unseen_store_are_clear_errors(
    fresh_pool, cluster, toy, inputs, tmp_path, monkeypatch
):
    from memclaim.errors import StoreError
    from memclaim.scoring.ray_backend import RayBackend, WorkerError

    with pytest.raises(WorkerError, match="has 3 CPUs"):
        RayBackend(toy, POL, workers=4).start()
    # write='worker' on a store the workers cannot see: the worker's StoreError reaches the
    # driver as itself (not wrapped in a Ray error), with the fix
    fresh_pool.write = "worker"
    monkeypatch.setattr(fresh_pool, "_write_probe", lambda: setattr(fresh_pool, "_token", "unseen"))
    with pytest.raises(StoreError, match="cannot see the store") as e:
        _run(toy, inputs, tmp_path / "store", backend=fresh_pool)
    assert "every node mounts at the same path" in str(e.value)


@pytest.mark.ray
@pytest.mark.integration
def test_the_procedure_decides_what_workers_compute(fresh_pool, toy, tmp_path):
    """Near-verbatim bounds are part of the procedure ([EM] App. B.1 Eq. 2): the workers compute
    them because the run's procedure asks for them, with the local run's numbers; a pool built
    for other policies than the run's refuses to score."""
    import torch

    inp = _passages(tmp_path / "p.jsonl", 6, seed=5)
    nv = {"epsilons": [1], "beams": [2]}
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        ref = _run(toy, inp, tmp_path / "local", near_verbatim=nv)
    finally:
        torch.set_num_threads(n)
    s = _run(toy, inp, tmp_path / "ray", backend=fresh_pool, near_verbatim=nv)
    got = _scores(s)
    assert any(c.startswith("nv_logq:") for c in got.column_names)
    assert got.equals(_scores(ref), check_metadata=True)
    with pytest.raises(InputError, match="the run's procedure has"):
        run_scoring(
            toy,
            _windows(toy, inp),
            policies=parse_policies(["greedy"]),
            prefix_tokens=PREFIX,
            suffix_tokens=SUFFIX,
            prompt_rule=PromptRule(),
            out_dir=tmp_path / "other",
            backend=fresh_pool,
        )


@pytest.mark.ray
@pytest.mark.integration
def test_a_worker_gone_for_good_hands_its_units_to_the_others(
    fresh_pool, local_ref, inputs, toy, tmp_path
):
    """`ray.kill(..., no_restart=True)`: Ray will not bring the actor back, so its units fail;
    the driver drops it from the pool and gives them to the other worker. (Runs last among the
    pool's tests: the module pool keeps one worker from here on.)"""
    import ray

    def kill_for_good(i):
        if i == 0:
            ray.kill(fresh_pool.actors[0], no_restart=True)

    s = _run(toy, inputs, tmp_path / "store", backend=_Hooked(fresh_pool, kill_for_good))
    bs = s.backend_stats
    assert bs["requeued_units"] >= 1
    assert [w["alive"] for w in bs["per_worker"]] == [False, True]
    _assert_exactly_once(s, local_ref)


@pytest.mark.ray
@pytest.mark.integration
def test_cli_score_with_ray_backend(cluster, local_ref, inputs, tmp_path, capsys):
    rc = main(
        [
            "score",
            "toy",
            "--input",
            str(inputs),
            "--prefix-tokens",
            str(PREFIX),
            "--suffix-tokens",
            str(SUFFIX),
            "--policy",
            "top-k:5",
            "--policy",
            "greedy",
            "--policy",
            "full",
            "--unit-size",
            str(UNIT),
            "--out",
            str(tmp_path / "s"),
            "--backend",
            "ray",
            "--address",
            cluster,
            "--workers",
            "1",
            "--json",
        ]
    )
    assert rc == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["backend"] == "ray" and summary["backend_stats"]["workers"] == 1
    assert summary["run_id"] == local_ref.run_id
    got = pq.read_table(tmp_path / "s" / "runs" / summary["run_id"] / "scores.parquet")
    assert got.equals(_scores(local_ref), check_metadata=True)


@pytest.mark.slow
@pytest.mark.ray
@pytest.mark.integration
def test_kill_9_distributed_driver_then_resume(cluster, local_ref, inputs, tmp_path):
    """A real `kill -9` of a `memclaim score --backend ray` driver process connected to the
    cluster; the re-run with the same command finishes and equals the local run."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    out = tmp_path / "s"
    cmd = [
        sys.executable,
        "-m",
        "memclaim",
        "score",
        "toy",
        "--input",
        str(inputs),
        "--prefix-tokens",
        str(PREFIX),
        "--suffix-tokens",
        str(SUFFIX),
        "--policy",
        "top-k:5",
        "--policy",
        "greedy",
        "--policy",
        "full",
        "--unit-size",
        str(UNIT),
        "--out",
        str(out),
        "--backend",
        "ray",
        "--address",
        cluster,
        "--workers",
        "2",
        "--no-progress",
        "--json",
    ]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        man = out / "manifest.json"
        if man.exists() and len(json.loads(man.read_text()).get("units", {})) >= 3:
            break
        time.sleep(0.2)
    proc.kill()
    proc.wait()
    done = len(ScoreStore(out, create=False).manifest["units"])
    assert done >= 3
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["units_reused"] >= done and s["units_scored"] + s["units_reused"] == s["n_units"]
    got = pq.read_table(out / "runs" / s["run_id"] / "scores.parquet")
    assert got.equals(_scores(local_ref), check_metadata=True)
