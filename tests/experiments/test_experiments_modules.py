"""Every reproduction module named in memclaim.experiments.REPRODUCTIONS imports, has the
``run(*, quick, seed, out_dir)`` entry point the registry promises, and says what it reproduces.
(The runs themselves are in test_experiments_reproduce.py and test_experiments_em*.py.)"""

from __future__ import annotations

import importlib
import inspect

import pytest

from memclaim.experiments import (  # noqa: F401
    REPRODUCTIONS,
    audit_table,
    camouflage,
    canary_floor,
    entropy_sweep,
    gated,
    get_runner,
    per_instance,
    staircase,
    trigger,
)


@pytest.mark.parametrize("name", sorted(REPRODUCTIONS))
def test_registered_reproduction_has_run(name):
    module, description = REPRODUCTIONS[name]
    mod = importlib.import_module(module)
    run = mod.run
    assert get_runner(name) is run
    params = inspect.signature(run).parameters
    for p in ("quick", "seed", "out_dir"):
        assert p in params and params[p].kind is inspect.Parameter.KEYWORD_ONLY
    assert "[MX]" in description or "[EM]" in description
    assert mod.__doc__ and ("[MX]" in mod.__doc__ or "[EM]" in mod.__doc__)
