"""Where the checkout's parts are, for every test whatever its folder's depth (tests mirror src/
in folders, tools/apply_habits.sh): import these instead of deriving paths from ``__file__``.

>>> (ROOT / "pyproject.toml").is_file(), (DATA / "fixtures").is_dir()
(True, True)
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

TESTS = Path(__file__).resolve().parent  # tests/ (conftest.py, helpers such as theory_checks.py)
ROOT = TESTS.parent  # the checkout: pyproject.toml, src/, docs/, tools/
DATA = TESTS / "data"  # committed test data; fixtures under DATA / "fixtures"
SRC = ROOT / "src" / "memclaim"  # the package's sources

__all__ = ["TESTS", "ROOT", "DATA", "SRC", "test_module"]


def test_module(name: str) -> ModuleType:
    """The test module ``name`` (e.g. "test_cli_json_unchanged"), wherever its folder under tests/:
    for a test that shares another's inputs. The module pytest imported is reused."""
    if name in sys.modules:
        return sys.modules[name]
    (path,) = TESTS.rglob(f"{name}.py")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # as pytest (prepend import mode) names it
    spec.loader.exec_module(module)
    return module


test_module.__test__ = False  # type: ignore[attr-defined]  # a helper: pytest must not collect it
