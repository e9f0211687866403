"""Issue 26 item 2, the CLI's side: the scoring commands build the procedure and runtime values
from their option groups (cli/common.py: procedure_value, runtime_value) and pass them whole to
the API, and --backend offers every backend in the registry, so a backend registered with
register_backend (docs/extending.md's example) is selectable on the command line."""

from __future__ import annotations

import json

import click
import pytest

from _paths import ROOT, test_module
from memclaim.cli import common
from memclaim.cli.main import main
from memclaim.procedure import Procedure
from memclaim.runtime import Runtime
from memclaim.scoring.backends import backend_names, unregister_backend


def _values(argv: list[str]):
    """The values the score command's options build (the command itself is not run)."""
    got = {}

    @click.command()
    @common.procedure_options
    @common.model_options
    @common.near_verbatim_options
    @common.backend_options
    @common.served_bounds_option
    @common.run_options
    @click.option("--stride", type=int, default=None)
    def probe(**kw):
        got["procedure"], got["runtime"] = common.procedure_value(), common.runtime_value()

    probe.main(argv, standalone_mode=False)
    return got["procedure"], got["runtime"]


def test_the_option_groups_build_the_values_the_api_takes():
    proc, rt = _values(
        [
            "--policy", "full", "--policy", "greedy", "--prefix-tokens", "8",
            "--near-verbatim", "1", "--sot", "bos", "--stride", "4",
            "--batch-size", "4", "--unit-size", "8", "--device", "cpu", "--threads", "2",
            "--backend", "ray", "--workers", "2",
        ]
    )  # fmt: skip
    assert proc == Procedure.options(
        policies=["full", "greedy"], prefix_tokens=8, near_verbatim=[1], sot="bos", stride=4
    )
    assert isinstance(rt, Runtime)
    assert (rt.batch_size, rt.unit_size, rt.threads, rt.placement.device) == (4, 8, 2, "cpu")
    assert (rt.backend.kind, rt.backend.workers) == ("ray", 2)
    # a served model's settings ride in the runtime's backend spec
    _, rt = _values(["--backend", "openai", "--url", "http://127.0.0.1:9", "--served-bounds"])
    assert rt.backend.options == {"url": "http://127.0.0.1:9", "served_bounds": True}
    # the defaults are the runtime's and the procedure's own
    proc, rt = _values([])
    assert rt.batch_size == Runtime().batch_size and rt.backend.kind == "local"
    assert proc.policies == Procedure().policies and proc.windows.lengths == (50, 50)


def test_backend_choices_come_from_the_registry():
    choices = common.BackendChoice().choices
    assert set(backend_names()) <= set(choices) and "openai" in choices
    with pytest.raises(click.BadParameter):
        common.BackendChoice().convert("nosuch", None, None)


@pytest.mark.integration
def test_a_registered_backend_is_selectable_on_the_command_line(tmp_path, capsys):
    """docs/extending.md's example backend, registered in this process, runs `memclaim score
    --backend one-by-one` through main() and scores exactly as --backend local."""
    docs = test_module("test_docs_examples")
    (code,) = docs.python_blocks(ROOT / "docs" / "extending.md", "Adding a scoring backend")
    exec(code.split("\ntexts = ")[0], {"__name__": "extending_example"})  # class + register_backend
    try:
        assert "one-by-one" in common.BackendChoice().choices
        assert main(["score", "--help"]) == 0
        assert "one-by-one" in capsys.readouterr().out
        texts = tmp_path / "t.jsonl"
        texts.write_text(
            "".join(
                json.dumps(
                    {"id": f"t{i}", "text": f"passage {i} of the test, with words {i} again"}
                )
                + "\n"
                for i in range(3)
            )
        )
        got = {}
        for backend in ("one-by-one", "local"):
            argv = ["score", "toy", "--input", str(texts), "--prefix-tokens", "6"]
            argv += ["--suffix-tokens", "6", "--policy", "full", "--backend", backend]
            argv += ["--out", str(tmp_path / backend), "--json"]
            assert main(argv) == 0
            got[backend] = json.loads(capsys.readouterr().out)
        assert got["one-by-one"]["backend"] == "one-by-one"
        assert got["one-by-one"]["procedure_key"] == got["local"]["procedure_key"]
        assert got["one-by-one"]["run_id"] == got["local"]["run_id"]
    finally:
        unregister_backend("one-by-one")
    assert "one-by-one" not in common.BackendChoice().choices
