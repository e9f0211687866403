"""Each module under src/memclaim has tests (issue 13 item 6): some test module imports it, or
imports a name it defines (``from memclaim.mechanisms import geometric_shift_tv`` counts for
memclaim.mechanisms.geometric). A package counts when one of its modules does; a ``__main__``
module counts when a test runs it with ``python -m``. A new module without a test fails here."""
from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from pathlib import Path

import memclaim

TESTS = Path(__file__).resolve().parent


def _modules() -> set[str]:
    return {"memclaim"} | {m.name for m in pkgutil.walk_packages(memclaim.__path__, "memclaim.")}


def _imported_by_tests() -> tuple[set[str], str]:
    found: set[str] = set()
    text = []
    for p in sorted(TESTS.rglob("*.py")):
        src = p.read_text(encoding="utf-8")
        text.append(src)
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name.startswith("memclaim")}
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("memclaim"):
                found.add(node.module)
                for a in node.names:
                    sub = f"{node.module}.{a.name}"
                    try:
                        importlib.import_module(sub)
                        found.add(sub)
                        continue
                    except ImportError:
                        pass
                    try:  # a name re-exported by a package: the module that defines it
                        obj = getattr(importlib.import_module(node.module), a.name)
                    except (ImportError, AttributeError):
                        continue
                    owner = getattr(obj, "__module__", None)
                    if isinstance(owner, str) and owner.startswith("memclaim"):
                        found.add(owner)
    return found, "\n".join(text)


def test_every_module_is_imported_by_a_test():
    mods = _modules()
    found, text = _imported_by_tests()
    missing = []
    for m in sorted(mods):
        if m in found:
            continue
        if m.endswith("__main__"):
            pkg = m.rsplit(".", 1)[0]
            if re.search(rf'"-m",\s*"{re.escape(pkg)}"', text):
                continue
        if any(f.startswith(m + ".") for f in found):  # a package, through one of its modules
            continue
        missing.append(m)
    assert not missing, "modules no test imports (add a test file for each):\n  " + "\n  ".join(missing)
