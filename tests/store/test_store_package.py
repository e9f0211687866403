"""The store is its own package (issue 26 item 3): memclaim.store.store and memclaim.store.results.
Their former names, memclaim.scoring.store and memclaim.scoring.results, are the same modules, so
code, monkeypatches and pickles written against them keep working."""

from __future__ import annotations

import pickle

import memclaim.scoring.results as old_results
import memclaim.scoring.store as old_store
import memclaim.store as store_pkg
import memclaim.store.results as results
import memclaim.store.store as store


def test_the_former_names_are_the_same_modules():
    assert old_store is store and old_results is results
    from memclaim.scoring.results import RunScores, list_runs, load_run_scores
    from memclaim.scoring.store import SCHEMA_VERSION, ScoreStore, UnitResult, stats_cover

    assert (ScoreStore, UnitResult, SCHEMA_VERSION, stats_cover) == (
        store.ScoreStore,
        store.UnitResult,
        store.SCHEMA_VERSION,
        store.stats_cover,
    )
    assert (RunScores, list_runs, load_run_scores) == (
        results.RunScores,
        results.list_runs,
        results.load_run_scores,
    )
    assert store_pkg.ScoreStore is store.ScoreStore
    assert store_pkg.load_run_scores is results.load_run_scores


def test_a_patch_through_the_former_name_reaches_the_store(monkeypatch):
    """tests and user code that patch memclaim.scoring.store.X patch what the store calls."""
    monkeypatch.setattr(old_store, "atomic_write_bytes", "patched")
    assert store.atomic_write_bytes == "patched"


def test_pickles_naming_the_former_modules_still_load():
    # what pickle.dumps wrote before the move (protocol 0: module and name by reference)
    assert pickle.loads(b"cmemclaim.scoring.store\nScoreStore\n.") is store.ScoreStore
    assert pickle.loads(b"cmemclaim.scoring.results\nload_run_scores\n.") is results.load_run_scores
    # and what it writes now names the new home
    assert b"memclaim.store.store" in pickle.dumps(store.ScoreStore, protocol=0)
