"""scoring/runner.py keeps only the run (issue 26 item 3); what moved out of it (the local backend,
the statistic spec, the near-verbatim settings, result writing) is still importable from it, the
same objects, so code and pickled Ray tasks that name memclaim.scoring.runner keep working."""

from __future__ import annotations

import pickle

import pytest

import memclaim.scoring.runner as runner
from memclaim.scoring import engine, local_backend, nearverbatim, tables

MOVED = {
    "LocalBackend": local_backend,
    "score_unit": local_backend,
    "run_stats": engine,
    "nv_column": nearverbatim,
    "near_verbatim_columns": nearverbatim,
    "normalize_near_verbatim": nearverbatim,
    "near_verbatim_cost_message": nearverbatim,
    "write_results": tables,
    "WINDOW_BATCH": tables,
    "SERVED_COLUMNS": tables,
}


@pytest.mark.parametrize("name", sorted(MOVED))
def test_a_moved_name_is_importable_from_the_runner(name):
    home = MOVED[name]
    assert getattr(runner, name) is getattr(home, name)
    assert name in runner.__all__
    if callable(getattr(home, name)):
        assert getattr(home, name).__module__ == home.__name__  # defined there, not here
        ref = f"cmemclaim.scoring.runner\n{name}\n.".encode()  # a pickle made before the move
        assert pickle.loads(ref) is getattr(home, name)


def test_the_local_backend_is_registered_by_its_own_module():
    from memclaim.scoring.backends import backend_entry

    assert backend_entry("local").make.__module__ == "memclaim.scoring.local_backend"
