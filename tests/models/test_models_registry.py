"""Named models (memclaim.models.registry): models/ resolves names it does not import; train/
registers "toy"; a name registered by a layer not imported yet says which module registers it."""

from __future__ import annotations

from pathlib import Path

import pytest

import memclaim.train  # noqa: F401  (registers "toy")
from memclaim.errors import DomainError, ModelLoadError
from memclaim.models import loader, registry
from memclaim.models.registry import (
    is_named_model,
    named_model,
    named_models,
    register_model,
    registered_elsewhere,
    unregister_model,
)


def test_register_resolve_unregister(tmp_path):
    calls = []
    register_model(
        "unit-test-model",
        resolve=lambda log=None: calls.append(log) or tmp_path,
        description="a test entry",
        sot="eos",
        provider=__name__,
    )
    try:
        assert (
            is_named_model("unit-test-model")
            and named_models()["unit-test-model"] == "a test entry"
        )
        assert (
            named_model("unit-test-model").resolve() == tmp_path
            and named_model("unit-test-model").sot == "eos"
        )
        with pytest.raises(DomainError, match="registered already"):
            register_model(
                "unit-test-model", resolve=lambda log=None: tmp_path, description="again"
            )
        register_model(
            "unit-test-model", resolve=lambda log=None: Path("/x"), description="new", replace=True
        )
        assert named_model("unit-test-model").resolve() == Path("/x")
    finally:
        unregister_model("unit-test-model")
    assert not is_named_model("unit-test-model")
    unregister_model("unit-test-model")  # twice: no error
    for bad in ("", "a/b", " pad"):
        with pytest.raises(DomainError):
            register_model(bad, resolve=lambda log=None: tmp_path, description="bad")


def test_builtin_names_and_providers():
    names = named_models()
    assert {"smollm2", "gemma3-270m", "toy"} <= set(names)
    assert named_model("toy").provider == "memclaim.train.toy" and named_model("toy").sot == "bos"
    assert named_model("smollm2").provider == "memclaim.models.loader"
    assert (
        registered_elsewhere("toy") == "memclaim.train" and registered_elsewhere("smollm2") is None
    )


def test_unregistered_toy_says_which_module_registers_it(monkeypatch):
    monkeypatch.delitem(registry._REGISTRY, "toy")
    with pytest.raises(ModelLoadError, match="memclaim.train registers it") as e:
        loader.resolve_model_path("toy")
    assert "import memclaim.train" in str(e.value)
    with pytest.raises(ModelLoadError, match="neither a named model nor an existing path"):
        loader.resolve_model_path("no-such-model-here")


def test_models_never_import_train():
    import ast

    import memclaim.models as pkg

    for p in Path(pkg.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom):
                assert "train" not in (node.module or "").split("."), (
                    f"{p.name} imports {node.module}"
                )
