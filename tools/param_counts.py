"""Count the explicit parameters of every public function of memclaim (issue 26): the functions
of ``memclaim.__all__`` and ``memclaim.api.__all__``, plus the scoring floor's entry points
(``run_scoring``), largest first. tests/project/test_param_counts.py fails when one is over 15.

An explicit parameter is one named in the signature (positional or keyword); ``*args`` and
``**options`` count as none (they are what the notebook shortcuts go through, validated against
the Procedure/Runtime fields).

    PYTHONPATH=src python tools/param_counts.py [--top 10] [--json]
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import sys

EXTRA = ("memclaim.scoring.runner:run_scoring",)


def explicit(fn) -> int:
    sig = inspect.signature(inspect.unwrap(fn))
    return sum(p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in sig.parameters.values())


def counts() -> dict[str, int]:
    import memclaim
    import memclaim.api

    out = {}
    for mod in (memclaim, memclaim.api):
        for name in mod.__all__:
            obj = getattr(mod, name)
            if inspect.isfunction(obj) or inspect.isfunction(inspect.unwrap(obj)):
                out[name] = explicit(obj)
    for spec in EXTRA:
        mod, _, attr = spec.partition(":")
        out[attr] = explicit(getattr(importlib.import_module(mod), attr))
    return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    c = counts()
    top = dict(list(c.items())[: a.top])
    if a.json:
        print(json.dumps(top))
    else:
        for k, v in top.items():
            print(f"{v:4d}  {k}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
