"""The documented Python examples run as written (issue 13): README's "From Python" section on
the tiny GPT, and docs/distributed.md's on a local Ray cluster. Each runs in a fresh interpreter
in an empty folder, so it imports, writes and prints exactly what a reader's copy would."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from _paths import ROOT


def python_blocks(path: Path, section: str) -> list[str]:
    """The ```python blocks under the heading ``section`` (up to the next heading of its level)."""
    text = path.read_text(encoding="utf-8")
    m = re.search(rf"^(#+) {re.escape(section)}\n(.*?)(?=^\1 |\Z)", text, flags=re.M | re.S)
    assert m, f"{path.name} has no section {section!r}"
    return re.findall(r"```python\n(.*?)```", m.group(2), flags=re.S)


def run_example(code: str, cwd: Path, timeout: int = 600) -> str:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
    }
    r = subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert r.returncode == 0, f"the example failed:\n{code}\n--- stderr:\n{r.stderr[-4000:]}"
    return r.stdout


def test_blocks_are_found():
    assert len(python_blocks(ROOT / "README.md", "From Python")) == 1
    assert len(python_blocks(ROOT / "docs" / "distributed.md", "Python API")) == 1


@pytest.mark.integration
def test_readme_python_example_runs(tmp_path):
    (code,) = python_blocks(ROOT / "README.md", "From Python")
    out = run_example(code, tmp_path)
    assert "119828" in out and "claimed" in out and "At target FPR" in out
    assert {p.name for p in (tmp_path / "reports" / "toy").iterdir()} >= {
        "report.json",
        "report.md",
        "report.html",
    }


@pytest.mark.ray
@pytest.mark.integration
def test_distributed_python_example_runs(tmp_path):
    pytest.importorskip("ray", reason="the ray extra is not installed")
    (code,) = python_blocks(ROOT / "docs" / "distributed.md", "Python API")
    out = run_example(code, tmp_path).split("\n")
    assert out[0].startswith("16 ")  # 16 windows, with the per-worker stats after them
    assert out[1].strip() != "0"  # the second run reuses every unit
    assert (tmp_path / "runs" / "toy-ray").is_dir()
