"""The runtime as one value (issue 26 item 2): memclaim/runtime.py holds every default of how a
run is carried out (placement, backend and its settings, batch and unit sizes, threads), builds
from the public functions' flat options, refuses an unknown or out-of-domain option with a fix,
and feeds the backend registry (memclaim.scoring.backends.make_backend)."""

from __future__ import annotations

import pytest

from memclaim.errors import DomainError, InputError
from memclaim.runtime import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_UNIT_SIZE,
    RUNTIME_OPTIONS,
    BackendSpec,
    Placement,
    Runtime,
)


def test_defaults_have_one_home():
    from memclaim.scoring import units

    rt = Runtime()
    assert (
        (rt.batch_size, rt.unit_size, rt.threads)
        == (DEFAULT_BATCH_SIZE, DEFAULT_UNIT_SIZE, None)
        == (16, 64, None)
    )
    assert units.DEFAULT_UNIT_SIZE is DEFAULT_UNIT_SIZE
    assert (
        rt.backend == BackendSpec("local")
        and rt.backend_kind == "local"
        and rt.placement == Placement()
    )
    assert rt.to_dict()["placement"] == {
        "device": "auto",
        "device_map": None,
        "max_memory": None,
        "offload_folder": None,
        "dtype": "auto",
    }


def test_flat_options_build_the_value():
    rt = Runtime.options(
        device="cpu",
        dtype="float32",
        backend="ray",
        workers=2,
        gpus_per_worker=0.5,
        batch_size="auto",
        unit_size=8,
        threads=2,
    )
    assert rt.placement == Placement(device="cpu", dtype="float32")
    assert rt.backend == BackendSpec("ray", workers=2, gpus_per_worker=0.5)
    assert rt.backend.given() == {"workers": 2, "gpus_per_worker": 0.5}
    assert (rt.batch_size, rt.unit_size, rt.threads) == ("auto", 8, 2)
    # options over a value: only the named ones change
    rt2 = rt.with_options(workers=3)
    assert rt2.backend.kind == "ray" and rt2.backend.workers == 3 and rt2.placement == rt.placement
    assert Runtime.coerce(rt) is rt and Runtime.coerce({"batch_size": 4}, threads=1) == Runtime(
        batch_size=4, threads=1
    )
    assert set(RUNTIME_OPTIONS) >= {
        "device",
        "device_map",
        "max_memory",
        "offload_folder",
        "dtype",
        "backend",
        "address",
        "workers",
        "gpus_per_worker",
        "threads_per_worker",
        "batch_size",
        "unit_size",
        "threads",
    }


@pytest.mark.parametrize(
    "opts, match",
    [
        (dict(batch_sise=8), "unknown runtime option batch_sise=8"),
        (dict(batch_size=0), "must be >= 1, got 0"),
        (dict(unit_size=0), "unit size must be >= 1"),
        (dict(threads=0), "--threads must be >= 1, got 0"),
        (dict(workers=0), "--workers must be >= 1, got 0"),
        (dict(threads_per_worker=0), "--threads-per-worker must be >= 1"),
        (dict(gpus_per_worker=-1), "--gpus-per-worker"),
        (dict(dtype="float8"), "unknown dtype 'float8'"),
        (dict(device_map="balanced"), "--device-map 'balanced'"),
        (dict(device=""), "--device must be a device name"),
        (dict(backend=""), "--backend must name a backend"),
        (dict(allow_pickle="yes"), "allow_pickle must be True or False"),
    ],
)
def test_bad_options_are_refused_with_a_fix(opts, match):
    with pytest.raises((InputError, DomainError), match=match) as e:
        Runtime.options(**opts)
    assert "fix:" in str(e.value)


def test_an_unknown_option_names_the_closest():
    with pytest.raises(InputError, match="did you mean batch_size"):
        Runtime.options(batch_sise=8)
    with pytest.raises(InputError, match="runtime= takes a memclaim Runtime"):
        Runtime.coerce(["cpu"])


def test_a_ready_backend_object_takes_no_flat_backend_settings():
    obj = object()
    assert Runtime.options(backend=obj).backend is obj
    with pytest.raises(InputError, match="--workers set up a backend memclaim makes"):
        Runtime.options(backend=obj, workers=2)


@pytest.mark.integration
def test_run_scoring_takes_the_two_values_and_its_old_keywords_alike(tmp_path, toy):
    """run_scoring(model, windows, procedure, runtime, out_dir=, run=): 6 parameters (17
    before); the keywords of the old signature make the same run, and lengths left out are the
    windows' own (they carry their spec)."""
    import inspect

    from memclaim.decoding import parse_policies
    from memclaim.procedure import Procedure
    from memclaim.scoring.prompts import PromptRule
    from memclaim.scoring.results import load_run_scores
    from memclaim.scoring.runner import RunRequest, run_scoring
    from memclaim.text.io import read_passages
    from memclaim.text.windows import passage_windows

    assert len(inspect.signature(run_scoring).parameters) - 1 == 6  # **keywords aside
    inp = tmp_path / "in.txt"
    inp.write_text(
        "In the beginning God created the heaven and the earth, and the earth was without form.\n"
        "And God said, Let there be light: and there was light, and God saw the light, that it was good.\n"
    )
    ws = passage_windows(
        read_passages(inp).records, toy.tokenizer, prefix_tokens=8, suffix_tokens=8
    )
    old = run_scoring(
        toy,
        ws,
        policies=parse_policies(["full", "greedy"]),
        prefix_tokens=8,
        suffix_tokens=8,
        prompt_rule=PromptRule(),
        near_verbatim={"epsilons": [1]},
        out_dir=tmp_path / "a",
        label="x",
        batch_size=1,
        unit_size=1,
    )
    new = run_scoring(
        toy,
        ws,
        Procedure.options(
            policies=["full", "greedy"], prefix_tokens=8, suffix_tokens=8, near_verbatim=[1]
        ),
        Runtime(batch_size=1, unit_size=1),
        out_dir=tmp_path / "b",
        run=RunRequest(label="x"),
    )
    lengths_from_windows = run_scoring(
        toy,
        ws,
        policies=parse_policies(["full", "greedy"]),
        near_verbatim={"epsilons": [1]},
        out_dir=tmp_path / "c",
        label="x",
    )
    assert old.procedure_key == new.procedure_key == lengths_from_windows.procedure_key
    assert old.run_id == new.run_id and old.n_units == new.n_units == 2
    a = load_run_scores(tmp_path / "a", run=old.run_id, policy="full")
    b = load_run_scores(tmp_path / "b", run=new.run_id, policy="full")
    assert (a.logq == b.logq).all()
    with pytest.raises(
        InputError, match="(?s)unknown keyword 'batch_sise'.*did you mean batch_size"
    ):
        run_scoring(
            toy, ws, policies=parse_policies(["full"]), out_dir=tmp_path / "d", batch_sise=2
        )
    with pytest.raises(InputError, match="got procedure= and its parts policies"):
        run_scoring(toy, ws, Procedure(), policies=parse_policies(["full"]), out_dir=tmp_path / "d")
    assert not (tmp_path / "d").exists()


def test_the_values_have_a_short_repr_for_a_notebook():
    """The repr names only what differs from the defaults (the full dataclass repr of a Runtime
    at its defaults ran to 313 characters, a Procedure's to 520)."""
    import memclaim as mc

    assert repr(mc.Runtime()) == "Runtime()"
    assert repr(mc.Runtime(batch_size=4)) == "Runtime(batch_size=4)"
    assert repr(mc.Runtime.options(backend="ray", workers=2, device="cpu")) == (
        "Runtime(placement=Placement(device='cpu'), backend=BackendSpec(kind='ray', workers=2))"
    )
    p = mc.Procedure.options(policies=["full", "greedy"], prefix_tokens=8, suffix_tokens=8)
    assert repr(p).startswith("Procedure(policies=('full', 'greedy'), windows=WindowSpec(")
    assert "prefix_tokens=8" in repr(p) and len(repr(p)) < 120
    assert repr(mc.Procedure()) == "Procedure()"
