"""The examples in memclaim's docstrings run (issue 13: every public function documents itself
with an example). Examples marked ``# doctest: +SKIP`` need a model or write files; the others
are executed here, so an example that stops matching the code fails the suite. The public API
(``memclaim.__all__``) is checked for what ``help(memclaim.X)`` shows: a docstring with an
example and a type hint on every parameter and the return value."""

from __future__ import annotations

import doctest
import importlib
import inspect
import pkgutil

import pytest

import memclaim

MODULES = sorted(
    m.name
    for m in pkgutil.walk_packages(memclaim.__path__, "memclaim.")
    if not m.name.endswith("__main__")
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    mod = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in finder.find(
        mod, name
    ):  # objects defined in the module (re-exports are tested where defined)
        runner.run(test)
    res = runner.summarize(verbose=False)
    assert res.failed == 0, (
        f"{res.failed} of {res.attempted} docstring examples of {name} fail (run with -s to see)"
    )


@pytest.mark.parametrize("name", [n for n in memclaim.__all__ if n != "__version__"])
def test_public_api_is_documented(name):
    obj = getattr(memclaim, name)
    doc = inspect.getdoc(obj) or ""
    assert doc, f"memclaim.{name} has no docstring"
    if inspect.isfunction(obj):
        assert ">>> import memclaim as mc" in doc, f"memclaim.{name}'s docstring has no example"
        sig = inspect.signature(obj)
        missing = [p for p, v in sig.parameters.items() if v.annotation is inspect.Parameter.empty]
        assert not missing, f"memclaim.{name}: parameters without a type hint: {missing}"
        assert sig.return_annotation is not inspect.Signature.empty, (
            f"memclaim.{name} has no return type"
        )


def _public_modules() -> list[str]:
    """memclaim's public modules: no underscore component (memclaim.api's implementation modules
    are checked through memclaim.__all__ above) and not the CLI (documented by --help)."""
    return [
        n
        for n in MODULES
        if not any(p.startswith("_") for p in n.split(".")[1:]) and not n.startswith("memclaim.cli")
    ]


@pytest.mark.parametrize("name", _public_modules())
def test_every_public_function_has_an_example_and_type_hints(name):
    """issue 13 item 6: every public function (a module's __all__, else its non-underscore names;
    functions defined there) has a docstring with an example and a type hint on every parameter
    and its return value."""
    mod = importlib.import_module(name)
    names = getattr(mod, "__all__", None) or [n for n in vars(mod) if not n.startswith("_")]
    bad = []
    for n in names:
        obj = getattr(mod, n, None)
        if not inspect.isfunction(obj) or obj.__module__ != name:
            continue
        why = []
        if ">>>" not in (inspect.getdoc(obj) or ""):
            why.append("no example")
        sig = inspect.signature(obj)
        miss = [p for p, v in sig.parameters.items() if v.annotation is inspect.Parameter.empty]
        if miss:
            why.append(f"parameters without a type hint: {miss}")
        if sig.return_annotation is inspect.Signature.empty:
            why.append("no return type")
        if why:
            bad.append(f"{n}: {'; '.join(why)}")
    assert not bad, f"{name}: " + " | ".join(bad)
