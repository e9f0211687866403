"""The CLI's modules: every subcommand module has its click command under its registered name,
the console and progress helpers print what they are given (literally), ``python -m`` runs."""

from __future__ import annotations

import importlib
import io
import re
import subprocess
import sys

import click
import pytest
from rich.console import Console

from memclaim.cli import (  # noqa: F401
    audit,
    budget,
    census,
    common,
    demo,
    dp,
    population,
    reproduce,
    score,
    train,
)
from memclaim.cli.console import is_rich, say
from memclaim.cli.main import SUBCOMMANDS
from memclaim.cli.progress import ProgressBar, progress_bar
from memclaim.progress import Reporter


@pytest.mark.parametrize("name", sorted(SUBCOMMANDS))
def test_every_subcommand_module_has_its_command(name):
    mod = importlib.import_module(f"memclaim.cli.{SUBCOMMANDS[name][0]}")
    assert isinstance(mod.command, click.Command) and mod.command.name == name
    cmds = (
        list(mod.command.commands.values())
        if isinstance(mod.command, click.Group)
        else [mod.command]
    )
    for c in cmds:
        assert c.help, f"{name} {c.name}: no help"  # what the command does
        assert "Example" in (c.help or "") + (c.epilog or ""), (
            f"{name} {c.name}: no example"
        )  # how to call it


def test_say_is_literal():
    buf = io.StringIO()
    con = Console(file=buf, width=80, color_system=None)
    say(con, "runs/q[/]z [bold]x")
    assert buf.getvalue().strip() == "runs/q[/]z [bold]x" and is_rich(con)
    lines = []
    say(lines.append, "plain")
    say(None, "dropped")
    assert lines == ["plain"]


def test_progress_bar_draws_and_closes():
    """A bar (on a terminal) or plain lines (elsewhere) for an operation that lasts more than a
    second; the label is shown literally (never as markup); closed on the finished event."""
    for plain in (False, True):
        buf, now = io.StringIO(), [0.0]
        bar = ProgressBar(file=buf, plain=plain, width=80, clock=lambda now=now: now[0])
        with Reporter(bar, stage="score", label="scoring [bold]x.txt", total=3) as r:
            now[0] = 1.5
            r.advance(2)
            now[0] = 2.5
            r.advance(1)
        out = buf.getvalue()
        assert "scoring [bold]x.txt" in out and not bar._ops, (
            out
        )  # literal label; closed when finished
        if plain:  # the end line: count, time taken and rate
            assert re.search(r"scoring \[bold\]x\.txt: 3 windows in 0:0[23], 1\.0/s", out), out
        else:  # the bar's last state: the count of the total and the time taken
            assert re.search(r"3/3 windows  0:0[23]", out), out
    off = progress_bar(False)  # no bar, but units done are still recorded for Ctrl-C's message
    assert (
        isinstance(off, ProgressBar)
        and not off.draw
        and isinstance(progress_bar(True), ProgressBar)
    )
    Reporter(
        ProgressBar(file=buf), stage="s", label="empty", total=0
    ).close()  # nothing to draw: no error


def test_cli_modules_hold_no_library_logic():
    """The CLI only parses options, calls memclaim.api and prints: no module of cli/ imports the
    scoring runner, the claims or a reader of user files directly (those go through the API)."""
    import ast
    from pathlib import Path

    cli_dir = Path(importlib.import_module("memclaim.cli").__file__).parent
    forbidden = (
        "scoring.runner",
        "scoring.results",
        "store.results",
        "claims.",
        "text.io",
        "text.scorefile",
        "text.spans",
        "audits.run",
        "train.",
    )
    found = []
    for f in sorted(cli_dir.glob("*.py")):
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                mod = node.module
                if any(mod.startswith(x) or f".{x}" in f".{mod}" for x in forbidden):
                    found.append(f"{f.name}: from {'.' * node.level}{mod} import ...")
    assert not found, "\n".join(found)


def test_python_m_memclaim_cli():
    r = subprocess.run(
        [sys.executable, "-m", "memclaim.cli", "--version"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0 and "memclaim" in r.stdout
