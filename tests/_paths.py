"""Where the checkout's parts are, for every test whatever its folder's depth (tests mirror src/
in folders, tools/apply_habits.sh): import these instead of deriving paths from ``__file__``.

>>> (ROOT / "pyproject.toml").is_file(), (DATA / "fixtures").is_dir()
(True, True)
"""
from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent   # tests/ (conftest.py, helpers such as theory_checks.py)
ROOT = TESTS.parent                       # the checkout: pyproject.toml, src/, docs/, tools/
DATA = TESTS / "data"                     # committed test data; fixtures under DATA / "fixtures"
SRC = ROOT / "src" / "memclaim"           # the package's sources

__all__ = ["TESTS", "ROOT", "DATA", "SRC"]
