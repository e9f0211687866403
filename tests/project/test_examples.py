"""Every example a newcomer reads runs as written from a checkout (issue 15): the code blocks of
README.md and docs/*.md, and the examples in every command's --help (epilog and docstring).

Each source (a Markdown file, one command's --help) runs in order in a fresh folder holding a
``tests`` link to the checkout's tests/, as a user copying the examples one after the other
would: later examples may use what earlier ones wrote (``memclaim test`` on a store ``population``
filled). ``memclaim ...`` lines run in this process (``memclaim.cli.main.main``, exit status 0
required; a ``--json`` line must print JSON); other shell lines (``printf ... > f``, ``python -c``)
run in bash with ``python`` being this interpreter; Python blocks are executed.

What cannot run here is checked for its flags only, by parsing the line with the click command
without invoking it: lines that need GPUs (``--gpus-per-worker N``, N > 0) or a running cluster
(``--address``, ``ray start``). Set-up and developer lines (``make``, ``pip install``, ``python
-m pytest``) and program output shown in a block are not run. Each source carries the marks of
its heaviest line: SmolLM2 -> ``real``, Gemma, training, shadows, demo and full reproductions ->
``slow``, the tiny GPT -> ``integration``, ``--backend ray`` -> ``ray``.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import click
import pytest

from _paths import ROOT

# pages whose every block (bash and python, in order, in one fresh folder and namespace) tests/project/test_docs.py runs
# as written, checking the numbers the page quotes: not run a second time here
RUN_BY_TEST_DOCS = {"getting-started.md", "inputs.md", "attacks.md"}
# pages another test runs as written: served.md's block starts a replay server in the background
# and stops it with `kill $server` (one shell, as tests/scoring/test_served_client.py runs it);
# run line by line here, the server would outlive its block and hold its port
RUN_ELSEWHERE = {"served.md": "tests/scoring/test_served_client.py"}
DOCS = [
    ROOT / "README.md",
    *sorted(
        p
        for p in (ROOT / "docs").glob("*.md")
        if p.name not in RUN_BY_TEST_DOCS and p.name not in RUN_ELSEWHERE
    ),
]

SETUP = (
    "make",
    "pip",
    "open",
    "xdg-open",
)  # first words of lines a newcomer types once, not examples
SHELL = ("printf", "python", "cat", "echo", "mkdir", "ls", "ray")
OUTPUT = re.compile(r"^(error|warning|note|fix):")


@dataclass
class Line:
    kind: str  # "memclaim" | "shell" | "python" | "sql"
    text: str
    where: str
    flags_only: str | None = None  # why it is only parsed ("needs GPUs", "needs a cluster")


@dataclass
class Source:
    name: str
    lines: list[Line] = field(default_factory=list)

    def marks(self) -> list:
        texts = [ln.text for ln in self.lines if ln.flags_only is None]
        run = " ".join(texts)
        marks = []
        slow = (
            re.search(r"\bgemma3-270m\b", run)
            or re.search(r"memclaim (train|demo)\b", run)
            or re.search(r"--shadows [1-9]", run)
            or any(re.match(r"memclaim reproduce (?!.*--quick)(?!.*--list)", t) for t in texts)
        )
        if slow:
            marks.append(pytest.mark.slow)
        if re.search(r"\bsmollm2\b|\"smollm2\"", run):
            marks.append(pytest.mark.real)
        if re.search(r"\btoy\b|\"toy\"", run):
            marks.append(pytest.mark.integration)
        if re.search(r"--backend ray|backend=\"ray\"", run):
            marks.append(pytest.mark.ray)
        return marks


def _flags_only(text: str) -> str | None:
    m = re.search(r"--gpus-per-worker[ =]([0-9.]+)", text)
    if m and float(m.group(1)) > 0:
        return "needs GPUs"
    if re.search(r"--address[ =]", text) or text.startswith("ray start"):
        return "needs a Ray cluster"
    return None


def _shell_lines(raw: list[str], where: str) -> list[Line]:
    """Commands of a shell block: continuation lines joined; output, set-up and comments dropped."""
    out, buf = [], ""
    for ln in raw:
        s = ln.strip()
        if buf:
            buf += " " + s
        elif not s or s.startswith("#") or OUTPUT.match(s):
            continue
        else:
            buf = s
        if buf.endswith("\\"):
            buf = buf[:-1].rstrip()
            continue
        cmd, buf = buf, ""
        first = cmd.split()[0]
        if first in SETUP or cmd.startswith("python -m pytest"):
            continue
        if first == "memclaim":
            out.append(Line("memclaim", cmd, where, _flags_only(cmd)))
        elif first in SHELL:
            out.append(Line("shell", cmd, where, _flags_only(cmd)))
        elif first in ("import", "from") or "pd." in cmd:
            out.append(Line("python", cmd, where))
    return out


def markdown_source(path: Path) -> Source:
    """Fenced blocks (```python, ```sql, plain) and indented blocks (4+ spaces after a blank line)."""
    src = Source(str(path.relative_to(ROOT)))
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        ln = lines[i]
        fence = re.match(r"^\s*```(\w*)\s*$", ln)
        if fence:
            lang, j = fence.group(1), i + 1
            while j < len(lines) and not re.match(r"^\s*```\s*$", lines[j]):
                j += 1
            body, where = lines[i + 1 : j], f"{src.name}:{i + 1}"
            # a block the page marks `<!-- not run: REASON -->` (a live server, as test_docs.py
            # reads the mark) is checked for its flags and syntax only
            not_run = re.match(r"^\s*<!-- not run: (.*?) -->\s*$", lines[i - 1]) if i else None
            why = not_run.group(1) if not_run else None
            n0 = len(src.lines)
            if lang == "python":
                src.lines.append(Line("python", "\n".join(body), where))
            elif lang == "sql":
                src.lines.append(Line("sql", "\n".join(body), where))
            elif lang in ("", "sh", "bash", "console"):
                src.lines += _shell_lines(body, where)
            if why is not None:
                for ln in src.lines[n0:]:
                    ln.flags_only = ln.flags_only or why
            i = j + 1
            continue
        if re.match(r"^ {4,}\S", ln) and (i == 0 or not lines[i - 1].strip()):
            j = i
            while j < len(lines) and (
                re.match(r"^ {4,}\S", lines[j])
                or (
                    not lines[j].strip()
                    and j + 1 < len(lines)
                    and re.match(r"^ {4,}\S", lines[j + 1])
                )
            ):
                j += 1
            src.lines += _shell_lines(lines[i:j], f"{src.name}:{i + 1}")
            i = j
            continue
        i += 1
    return src


def _commands():
    from memclaim.cli.main import SUBCOMMANDS, cli

    ctx = click.Context(cli, info_name="memclaim")
    for name in SUBCOMMANDS:
        cmd = cli.get_command(ctx, name)
        yield f"memclaim {name}", cmd
        if isinstance(cmd, click.Group):
            for sub in cmd.list_commands(ctx):
                yield f"memclaim {name} {sub}", cmd.get_command(ctx, sub)


def help_source(path: str, cmd) -> Source:
    """The examples of one command's --help: the lines after an 'Example(s)' heading."""
    text = cmd.get_help(
        click.Context(cmd, info_name=path, max_content_width=200, terminal_width=200)
    )
    after = text.split("Example", 1)[1].split("\n", 1)[1] if "Example" in text else ""
    src = Source(f"{path} --help")
    src.lines = _shell_lines(after.splitlines(), src.name)
    return src


def all_sources() -> list[Source]:
    """Every source, each once: a group's subcommands that share its epilog run it once."""
    out, seen = [], set()
    for s in [markdown_source(p) for p in DOCS] + [help_source(p, c) for p, c in _commands()]:
        key = tuple(ln.text for ln in s.lines)
        if key and key in seen:
            continue
        seen.add(key)
        out.append(s)
    return out


# ------------------------------------------------------------------------------ running
def parse_only(argv: list[str]) -> click.Context:
    """Parse a memclaim command line with the click commands, without running it."""
    from memclaim.cli.main import cli

    cmd, ctx = cli, cli.make_context("memclaim", list(argv))
    while isinstance(cmd, click.Group):
        rest = list(getattr(ctx, "_protected_args", [])) + list(ctx.args)
        name, sub, rest = cmd.resolve_command(ctx, rest)
        assert sub is not None, f"no command {name!r} in {argv}"
        cmd, ctx = sub, sub.make_context(name, rest, parent=ctx)
    return ctx


def _run_memclaim(line: Line, shim: Path) -> None:
    from memclaim.cli.main import main

    words = shlex.split(line.text, comments=True)[1:]
    target = None
    if ">" in words:
        k = words.index(">")
        words, target = words[:k], words[k + 1]
    if line.flags_only:
        try:
            parse_only(words)
        except click.exceptions.Exit as e:  # an eager option (--version, --help) ends the parse
            assert e.exit_code == 0, f"{line.where}: `{line.text}` exited {e.exit_code}"
        return
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(words)
    assert rc == 0, (
        f"{line.where}: `{line.text}` exited {rc}\n--- stdout\n{out.getvalue()}\n--- stderr\n{err.getvalue()}"
    )
    if target is not None:
        Path(target).write_text(out.getvalue(), encoding="utf-8")
    if "--json" in words:
        json.loads(out.getvalue())  # --json prints one JSON document and nothing else


def _run_shell(line: Line, shim: Path) -> None:
    if line.flags_only:  # a cluster's own commands (ray start): nothing memclaim can check here
        return
    env = dict(os.environ, PATH=f"{shim}{os.pathsep}{os.environ.get('PATH', '')}")
    r = subprocess.run(
        ["bash", "-c", line.text], env=env, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, (
        f"{line.where}: `{line.text}` exited {r.returncode}\n{r.stdout}\n{r.stderr}"
    )


def _run_python(line: Line, shim: Path) -> None:
    code = compile(line.text, line.where, "exec")
    if line.flags_only:
        return  # the page says why it is not run here (a live server): compiled (syntax) only
    if re.search(r"^[^#\n]*gpus_per_worker\s*=\s*[1-9]", line.text, re.M):
        return  # needs GPUs: compiled (syntax), not run
    exec(code, {"__name__": "__example__"})


def _run_sql(line: Line, shim: Path) -> None:
    duckdb = pytest.importorskip("duckdb", reason="the SQL example needs DuckDB")
    duckdb.sql(line.text).fetchall()


RUNNERS = {"memclaim": _run_memclaim, "shell": _run_shell, "python": _run_python, "sql": _run_sql}
SOURCES = all_sources()


def test_every_source_has_examples_and_none_names_a_missing_file():
    """The collection itself: the README and every command contribute examples, and no example
    names an input that neither tests/data holds nor an earlier line of its source writes."""
    by_name = {s.name: s for s in SOURCES}
    assert by_name["README.md"].lines and all(
        by_name[f"memclaim {c} --help"].lines
        for c in ("score", "test", "population", "census", "budget")
    )
    for s in SOURCES:
        made: set[str] = set()
        for ln in s.lines:
            for m in re.finditer(
                r"--(?:input|members|controls|document|control|candidates|data|forget|retain|"
                r"instances|exclude-controls|plant) (\S+)",
                ln.text,
            ):
                p = m.group(1)
                if (
                    p.startswith(("tests/data/", "runs/", "reports/", "pop/", "lab-gpt", "ft"))
                    or p in made
                ):
                    continue
                pytest.fail(f"{ln.where}: `{ln.text}` reads {p!r}, which no earlier example writes")
            made.update(re.findall(r">\s*(\S+)", ln.text))
            made.update(re.findall(r"to_csv\('([^']+)'", ln.text))


@pytest.mark.parametrize(
    "source", [pytest.param(s, id=s.name, marks=s.marks()) for s in SOURCES if s.lines]
)
def test_examples_run_as_written(source, tmp_path, monkeypatch):
    (tmp_path / "tests").symlink_to(ROOT / "tests", target_is_directory=True)
    shim = tmp_path / ".bin"
    shim.mkdir()
    for prog, body in (
        ("python", f'exec "{sys.executable}" "$@"'),
        ("memclaim", f'exec "{sys.executable}" -m memclaim.cli.main "$@"'),
    ):
        (shim / prog).write_text(f"#!/bin/sh\n{body}\n")
        (shim / prog).chmod(0o755)
    monkeypatch.chdir(tmp_path)
    for line in source.lines:
        RUNNERS[line.kind](line, shim)


def test_parse_only_catches_a_bad_flag():
    """The flags-only check can fail: an unknown option or a bad choice is a click error."""
    parse_only(
        [
            "score",
            "smollm2",
            "--input",
            "x.jsonl",
            "--out",
            "o",
            "--backend",
            "ray",
            "--gpus-per-worker",
            "1",
        ]
    )
    with pytest.raises(click.UsageError):
        parse_only(
            ["score", "smollm2", "--input", "x.jsonl", "--out", "o", "--gpus-per-wrker", "1"]
        )
    with pytest.raises(click.BadParameter):
        parse_only(["score", "smollm2", "--input", "x.jsonl", "--out", "o", "--backend", "slurm"])
