"""Each module under src/memclaim has tests (issue 13 item 6).

A module counts as tested when some test file *uses* it: it imports a name the module defines
and then uses that name (``from memclaim.mechanisms import geometric_shift_tv`` then a call
counts for memclaim.mechanisms.geometric, the module that defines it), or imports the module
and uses one of its attributes (``from memclaim.cli import budget`` then ``budget.command``).
A CLI subcommand's module counts when a test runs that subcommand (a list starting with its
name, in a file that runs the CLI), a reproduction's module when a test runs it by name.
An import that is never used (``import memclaim.x  # noqa: F401``) does not count, nor does a
module named only in a string. A package counts when one of its modules does; a ``__main__``
module counts when a test runs it with ``python -m``. A new module without a test fails here,
and so does a test file that imports a module without exercising it.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re

import memclaim
from _paths import TESTS


def _modules() -> set[str]:
    return {"memclaim"} | {m.name for m in pkgutil.walk_packages(memclaim.__path__, "memclaim.")}


def _owner(module: str, name: str) -> str | None:
    """The memclaim module that ``from module import name`` takes its object from."""
    sub = f"{module}.{name}"
    try:
        importlib.import_module(sub)
        return sub
    except ImportError:
        pass
    try:
        obj = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return None
    owner = getattr(obj, "__module__", None)
    if isinstance(owner, str) and owner.startswith("memclaim"):
        return owner
    return module


def used_modules(source: str) -> set[str]:
    """The memclaim modules a test file exercises (see the module docstring)."""
    tree = ast.parse(source)
    bound: dict[str, str] = {}  # local name -> the memclaim module it stands for, or its owner
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("memclaim"):
                    bound[a.asname or a.name] = (
                        a.name
                    )  # `import memclaim.x.y` binds the dotted path
        elif (
            isinstance(node, ast.ImportFrom)
            and (node.module or "").startswith("memclaim")
            and not node.level
        ):
            for a in node.names:
                owner = _owner(node.module, a.name)
                if owner is not None:
                    bound[a.asname or a.name] = owner
    used: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            # memclaim.x.y.f(...) or alias.f(...): the longest bound dotted prefix, then what its
            # attributes are (a submodule, or an object whose __module__ is the module defining it)
            parts, n = [], node
            while isinstance(n, ast.Attribute):
                parts.append(n.attr)
                n = n.value
            if not isinstance(n, ast.Name):
                continue
            parts.append(n.id)
            parts.reverse()
            for i in range(len(parts) - 1, 0, -1):
                head = ".".join(parts[:i])
                if head in bound:
                    used |= _resolve_attributes(bound[head], parts[i:])
                    break
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in bound:
            used.add(bound[node.id])
    used |= _cli_commands_run(source, bound)
    used |= _reproductions_run(source, bound)
    return used


def _resolve_attributes(module: str, attrs: list[str]) -> set[str]:
    out = {module}
    try:
        obj = importlib.import_module(module)
    except ImportError:
        return out
    for a in attrs:
        try:
            obj = getattr(obj, a)
        except AttributeError:
            break
        owner = (
            obj.__name__ if isinstance(obj, type(memclaim)) else getattr(obj, "__module__", None)
        )
        if not (isinstance(owner, str) and owner.startswith("memclaim")):
            break
        out.add(owner)
        if not isinstance(obj, type(memclaim)):
            break
    return out


def _cli_commands_run(source: str, bound: dict) -> set[str]:
    """The CLI subcommand modules a test runs: a list literal whose first element is a
    subcommand's name, in a file that imports the CLI's entry point (or runs ``memclaim``)."""
    from memclaim.cli.main import SUBCOMMANDS

    runs_cli = "memclaim.cli.main" in bound.values() or re.search(
        r'"memclaim"|\bmemclaim\.cli\b|MEMCLAIM_BIN', source
    )
    if not runs_cli:
        return set()
    out = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.List, ast.Tuple)) and node.elts:
            first = node.elts[0]
            if (
                isinstance(first, ast.Constant)
                and isinstance(first.value, str)
                and first.value in SUBCOMMANDS
            ):
                out.add(f"memclaim.cli.{SUBCOMMANDS[first.value][0]}")
    return out


def _reproductions_run(source: str, bound: dict) -> set[str]:
    """The reproduction modules a test runs by name (memclaim.experiments.run/get_runner, or
    ``memclaim reproduce NAME``)."""
    from memclaim.experiments import REPRODUCTIONS

    if not ({"memclaim.experiments", "memclaim.cli.main"} & set(bound.values())):
        return set()
    out = set()
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value in REPRODUCTIONS
        ):
            out.add(REPRODUCTIONS[node.value][0])
    return out


def _is_module(name: str) -> bool:
    try:
        importlib.import_module(name)
        return True
    except ImportError:
        return False


def untested(modules: set[str], sources: list[str]) -> list[str]:
    used: set[str] = set()
    for src in sources:
        used |= used_modules(src)
    text = "\n".join(sources)
    missing = []
    for m in sorted(modules):
        if m in used or any(u.startswith(m + ".") for u in used):
            continue
        if m.endswith("__main__"):
            pkg = m.rsplit(".", 1)[0]
            if re.search(rf'"-m",\s*"{re.escape(pkg)}"', text):
                continue
        missing.append(m)
    return missing


def test_every_module_is_used_by_a_test():
    sources = [p.read_text(encoding="utf-8") for p in sorted(TESTS.rglob("*.py"))]
    missing = untested(_modules(), sources)
    assert not missing, "modules no test exercises (add a test file for each):\n  " + "\n  ".join(
        missing
    )


def test_the_check_can_fail():
    """An unused import, a module named in a string, and a module nobody imports do not count; a
    used name, a used module attribute and a dotted use do."""
    mods = {
        "memclaim.numeric",
        "memclaim.validate",
        "memclaim.jsonutil",
        "memclaim.fsutil",
        "memclaim.errors",
        "memclaim.progress",
        "memclaim.api._budget",
        "memclaim.api._dp",
        "memclaim.cli.budget",
        "memclaim.cli.dp",
    }
    sources = [
        "import memclaim as mc\nmc.budget(p=0.1)\n",  # the lazy face: the module defining mc.budget
        "from memclaim.cli.main import main\nmain(['budget', '--p', '0.1'])\n",  # a CLI subcommand run
        "import memclaim.fsutil  # noqa: F401\nx = 'memclaim.jsonutil'\n",  # neither counts
        "from memclaim.numeric import logsumexp\nassert logsumexp([0.0]) == 0.0\n",  # a used name
        "from memclaim import validate\nvalidate.positive('x', 1)\n",  # a used module attribute
        "import memclaim.errors\nraise memclaim.errors.InputError('x')\n",  # a dotted use
    ]
    assert untested(mods, sources) == [
        "memclaim.api._dp",
        "memclaim.cli.dp",
        "memclaim.fsutil",
        "memclaim.jsonutil",
        "memclaim.progress",
    ]
