"""Scoring backends behind one protocol (issue 26 item 3): memclaim.scoring.backends' Backend,
ScoringJob and registry; the runner asks the protocol (no hasattr probing); runner.py and
ray_backend.py no longer import each other; docs/extending.md's example backend registers and
scores through run_scoring with the numbers of the local backend."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from _paths import ROOT, SRC, test_module
from memclaim.errors import DomainError, InputError
from memclaim.runtime import Runtime
from memclaim.scoring.backends import (
    Backend,
    ScoringJob,
    backend_entry,
    backend_names,
    check_backend,
    make_backend,
    register_backend,
    unregister_backend,
)

SCORING = SRC / "scoring"


def _imports(path: Path) -> set[str]:
    """Every memclaim module ``path`` imports (module level, function level, TYPE_CHECKING)."""
    pkg = "memclaim.scoring"
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = pkg.rsplit(".", node.level - 1)[0] if node.level else ""
            mod = f"{base}.{node.module}" if node.level and node.module else (node.module or base)
            out.add(mod)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


def test_runner_and_ray_backend_do_not_import_each_other():
    assert "memclaim.scoring.ray_backend" not in _imports(SCORING / "runner.py")
    assert "memclaim.scoring.backends" in _imports(SCORING / "runner.py")
    assert "memclaim.scoring.backends" in _imports(SCORING / "ray_backend.py")


def test_the_runner_asks_the_protocol_not_hasattr():
    text = (SCORING / "runner.py").read_text(encoding="utf-8")
    assert "hasattr(backend" not in text and "getattr(backend" not in text


def test_built_in_backends_are_registered_by_their_modules():
    assert {"local", "ray"} <= set(backend_names())
    assert backend_entry("local").settings == ()
    assert set(backend_entry("ray").settings) == {
        "address",
        "workers",
        "gpus_per_worker",
        "threads_per_worker",
    }
    with pytest.raises(InputError, match="unknown backend 'spark'") as e:
        backend_entry("spark")
    assert "local, ray" in str(e.value)


class _Fake:
    name = "fake"
    device_class = None
    weights_loaded = False

    def __init__(self, why=None):
        self.why, self.calls = why, []

    def supports(self, procedure, stats):
        return self.why

    def run(self, units, job):
        self.calls.append(job)
        return iter(())

    def stats(self):
        return {}


def test_register_make_and_refuse():
    entry = register_backend(
        "fake",
        lambda model, policies, runtime, log: _Fake(),
        description="a test",
        settings=("url",),
    )
    try:
        assert "fake" in backend_names() and entry.provider == ""
        with pytest.raises(DomainError, match="registered already"):
            register_backend("fake", lambda *a: _Fake(), description="again")
        b = make_backend(None, (), Runtime.options(backend="fake"))
        assert isinstance(b, _Fake) and isinstance(b, Backend)
        # a setting the backend takes (in the runtime's options) passes; a Ray one is refused
        rt = Runtime(backend={"kind": "fake", "options": {"url": "http://x"}})
        assert isinstance(make_backend(None, (), rt), _Fake)
        with pytest.raises(InputError, match="--workers only apply with --backend ray") as e:
            make_backend(None, (), Runtime.options(backend="fake", workers=2))
        assert "fix: add --backend ray" in str(e.value)
    finally:
        unregister_backend("fake")
    assert "fake" not in backend_names()
    with pytest.raises(DomainError, match="plain non-empty name"):
        register_backend(" x", lambda *a: None, description="d")


def test_a_factory_that_returns_no_backend_is_refused():
    register_backend("broken", lambda model, policies, runtime, log: object(), description="a test")
    try:
        with pytest.raises(
            InputError, match="object is not a memclaim scoring backend: it lacks name"
        ):
            make_backend(None, (), Runtime.options(backend="broken"))
    finally:
        unregister_backend("broken")


def test_a_ready_backend_object_in_the_runtime_is_used_as_it_is():
    fake = _Fake()
    assert make_backend(None, (), Runtime(backend=fake)) is fake
    with pytest.raises(InputError, match="not a memclaim scoring backend"):
        make_backend(None, (), Runtime(backend=object()))


@pytest.mark.integration
def test_a_backend_that_does_not_support_the_procedure_is_refused_before_the_store(tmp_path, toy):
    from memclaim.decoding import parse_policies
    from memclaim.scoring.prompts import PromptRule
    from memclaim.scoring.runner import run_scoring
    from memclaim.text.io import read_passages
    from memclaim.text.windows import passage_windows

    inp = tmp_path / "in.txt"
    inp.write_text(
        "In the beginning God created the heaven and the earth, and the earth was without form.\n"
    )
    ws = passage_windows(
        read_passages(inp).records, toy.tokenizer, prefix_tokens=8, suffix_tokens=8
    )
    fake = _Fake(why="it cannot")
    with pytest.raises(
        InputError, match="the 'fake' backend cannot score this procedure: it cannot"
    ):
        run_scoring(
            toy,
            ws,
            policies=parse_policies(["full"]),
            prefix_tokens=8,
            suffix_tokens=8,
            prompt_rule=PromptRule(),
            out_dir=tmp_path / "s",
            backend=fake,
        )
    assert not (tmp_path / "s").exists() and fake.calls == []
    with pytest.raises(InputError, match="not a memclaim scoring backend"):
        run_scoring(
            toy,
            ws,
            policies=parse_policies(["full"]),
            prefix_tokens=8,
            suffix_tokens=8,
            prompt_rule=PromptRule(),
            out_dir=tmp_path / "s",
            backend=object(),
        )
    # a supported run hands the backend its job: the bound procedure, the statistics, the store
    from memclaim.scoring.runner import LocalBackend

    class Recording(_Fake):
        def run(self, units, job):
            self.calls.append(job)
            return LocalBackend(lambda: toy.lm, parse_policies(["full"])).run(units, job)

    ok = Recording()
    s = run_scoring(
        toy,
        ws,
        policies=parse_policies(["full"]),
        prefix_tokens=8,
        suffix_tokens=8,
        prompt_rule=PromptRule(),
        out_dir=tmp_path / "t",
        backend=ok,
        stats="census",
    )
    (job,) = ok.calls
    assert (
        isinstance(job, ScoringJob)
        and job.procedure.key == s.procedure_key
        and job.store is not None
    )
    assert (
        job.stats.spec == "greedy+margin+policy_logq"
        and s.backend == "fake"
        and s.units_scored == s.n_units
    )


@pytest.mark.integration
def test_the_extending_page_backend_scores_like_local(tmp_path):
    """docs/extending.md's example backend, run as written in a fresh interpreter."""
    docs = test_module("test_docs_examples")

    (code,) = docs.python_blocks(ROOT / "docs" / "extending.md", "Adding a scoring backend")
    out = docs.run_example(code, tmp_path).split("\n")
    assert out[0] == "one-by-one 3" and out[1] == "True"


def test_check_backend_names_the_missing_members():
    class Half:
        name = "half"

        def run(self, units, job):
            return iter(())

    with pytest.raises(
        InputError,
        match="Half is not a memclaim scoring backend: it lacks device_class, "
        "weights_loaded, supports, stats",
    ):
        check_backend(Half())


@pytest.mark.integration
def test_the_optional_members_set_the_default_statistics_and_the_model_record(tmp_path, toy):
    """computable_stats() and describe_model(record), the protocol's optional members (a served
    model's backend has both): a run that asks for no statistics computes the backend's, and the
    procedure's model record (hence its key) is the backend's rewrite of it."""
    from memclaim.decoding import parse_policies
    from memclaim.scoring.backends import OPTIONAL_MEMBERS, default_stats, describe_model_of
    from memclaim.scoring.engine import StatSet
    from memclaim.scoring.prompts import PromptRule
    from memclaim.scoring.runner import LocalBackend, run_scoring
    from memclaim.text.io import read_passages
    from memclaim.text.windows import passage_windows

    assert OPTIONAL_MEMBERS == ("computable_stats", "describe_model")
    inp = tmp_path / "in.txt"
    inp.write_text(
        "In the beginning God created the heaven and the earth, and the earth was without form.\n"
    )
    ws = passage_windows(
        read_passages(inp).records, toy.tokenizer, prefix_tokens=8, suffix_tokens=8
    )

    class Described(_Fake):
        def computable_stats(self):
            return StatSet.of("census")

        def describe_model(self, record):
            return {**record, "served_by": "a test"}

        def run(self, units, job):
            self.calls.append(job)
            return LocalBackend(lambda: toy.lm, parse_policies(["full"])).run(units, job)

    b, plain = Described(), _Fake()
    assert default_stats(b).spec == "greedy+margin+policy_logq" and default_stats(plain) is None
    assert describe_model_of(plain) is None
    kw = dict(
        policies=parse_policies(["full"]),
        prefix_tokens=8,
        suffix_tokens=8,
        prompt_rule=PromptRule(),
    )
    s = run_scoring(toy, ws, out_dir=tmp_path / "s", backend=b, **kw)
    (job,) = b.calls
    assert job.stats.spec == "greedy+margin+policy_logq"
    assert (
        job.procedure.model.to_dict()["served_by"] == "a test"
        and job.procedure.key == s.procedure_key
    )
    local = run_scoring(toy, ws, out_dir=tmp_path / "local", **kw)
    assert local.procedure_key != s.procedure_key
