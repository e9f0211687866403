"""tools/mutation_check.py: every mutation still applies to the code (its text occurs exactly once
in the file it names), and each names tests that exist. Running the mutants is a manual check
(`python tools/mutation_check.py`; issue 17's closing note lists the kills), not part of CI."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from _paths import ROOT

spec = importlib.util.spec_from_file_location(
    "mutation_check", ROOT / "tools" / "mutation_check.py"
)
mutation_check = importlib.util.module_from_spec(spec)
sys.modules["mutation_check"] = mutation_check  # dataclasses look their module up there
spec.loader.exec_module(mutation_check)


@pytest.mark.parametrize("m", mutation_check.MUTATIONS, ids=lambda m: m.name)
def test_each_mutation_applies_once_and_names_real_tests(m):
    text = (ROOT / "src" / "memclaim" / m.file).read_text(encoding="utf-8")
    # matched as code, whatever the formatter's line breaks and quotes (mutation_check.occurrences)
    assert len(mutation_check.occurrences(text, m.old)) == 1, (m.name, m.old)
    assert m.new != m.old and not mutation_check.occurrences(text, m.new)
    for node in (t for t in m.tests if t.startswith("tests/")):
        path, _, name = node.partition("::")
        assert f"def {name}(" in (ROOT / path).read_text(encoding="utf-8"), node


def test_list_and_unknown_names():
    run = lambda *a: subprocess.run(
        [sys.executable, str(ROOT / "tools" / "mutation_check.py"), *a],
        capture_output=True,
        text=True,
    )
    p = run("--list")
    assert p.returncode == 0 and len(p.stdout.splitlines()) == len(mutation_check.MUTATIONS)
    p = run("--only", "no-such-mutant")
    assert (
        p.returncode == 2
        and "error: unknown mutation(s) 'no-such-mutant'" in p.stderr
        and "fix:" in p.stderr
    )


def test_a_mutation_applies_after_the_formatter_rewraps_and_requotes_its_line():
    # ruff format (tools/apply_habits.sh) may break a line, change spacing and quotes
    code = "x = f(a,\n      'b')  # c\ny = f(a, c)\n"
    assert mutation_check.occurrences(code, 'f(a, "b")') == [(4, 19)]
    assert mutation_check.occurrences(code, "f(a,c)") == [(29, 36)]
    assert mutation_check.occurrences(code, "f(a, d)") == []
