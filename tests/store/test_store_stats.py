"""Issue 14 item 3 (store side): the statistic set is part of what a stored unit holds.

A unit records the statistics it was scored with (unit metadata + manifest entry; units written
before statistic sets existed hold every statistic). A census-only unit (CENSUS_STATS) is never
adopted by a run that needs more (an audit's full-softmax moments): that run scores the unit
again and replaces its file; a unit holding every statistic serves a census as it is. The old
store (tests/data/fixtures/store_v1) resumes with a census-only run without rescoring."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from _paths import DATA
from memclaim.decoding import parse_policies
from memclaim.models import load_model
from memclaim.scoring.engine import ALL_STATS, CENSUS_STATS
from memclaim.scoring.prompts import PromptRule
from memclaim.scoring.runner import run_scoring, run_stats
from memclaim.store.results import load_run_scores
from memclaim.store.store import ScoreStore, stats_cover
from memclaim.text.io import read_passages
from memclaim.text.windows import passage_windows

FIXTURE = DATA / "fixtures" / "store_v1"
POLICIES = ("full", "top-k:40", "greedy")


@pytest.fixture(scope="module")
def model():
    return load_model(str(FIXTURE / "model"))


def _run(model, out, stats, label="members"):
    ws = passage_windows(
        read_passages(FIXTURE / "passages.jsonl").records,
        model.tokenizer,
        prefix_tokens=8,
        suffix_tokens=8,
    )
    return run_scoring(
        model,
        ws,
        policies=parse_policies(POLICIES),
        prefix_tokens=8,
        suffix_tokens=8,
        prompt_rule=PromptRule(),
        out_dir=out,
        label=label,
        inputs={},
        unit_size=2,
        stats=stats,
    )


def _unit_files(out):
    return sorted((Path(out) / "units").rglob("*.parquet"))


def test_stats_cover_and_old_units_hold_everything():
    assert stats_cover(
        None, "token_logprob+token_moments"
    )  # a unit without a record: every statistic
    assert stats_cover(None, None)
    assert stats_cover(ALL_STATS.spec, CENSUS_STATS.spec)
    assert not stats_cover(CENSUS_STATS.spec, ALL_STATS.spec)
    assert not stats_cover(CENSUS_STATS.spec, None)
    assert run_stats("policy_logq").covers(CENSUS_STATS)  # greedy and margin always come along


def test_census_only_units_hold_census_columns_and_are_not_adopted_by_a_full_run(model, tmp_path):
    out = tmp_path / "store"
    first = _run(model, out, CENSUS_STATS)
    assert first.units_scored == first.n_units > 0
    f = _unit_files(out)[0]
    meta = json.loads(pq.read_schema(f).metadata[b"memclaim"])
    assert meta["stats"] == CENSUS_STATS.spec
    cols = set(pq.read_schema(f).names)
    assert "token_mean" not in cols and "token_rank" not in cols and "token_logprob" not in cols
    assert "logq:full" in cols and "greedy_match" in cols
    st = ScoreStore(out, create=False)
    assert all(u.get("stats") == CENSUS_STATS.spec for u in st.manifest["units"].values())
    census_scores = load_run_scores(out, run=first.run_id, policy="full")
    assert "token_mean" not in census_scores.table.column_names

    full = _run(model, out, None)  # every statistic: the census-only units are scored again
    assert full.units_scored == full.n_units and full.units_reused == 0
    assert full.run_id == first.run_id  # the same windows, procedure and units
    meta = json.loads(pq.read_schema(_unit_files(out)[0]).metadata[b"memclaim"])
    assert "stats" not in meta  # every statistic, recorded as units always were
    rs = load_run_scores(out, run=full.run_id, policy="full")
    assert "token_mean" in rs.table.column_names
    assert rs.logq.tolist() == census_scores.logq.tolist()  # a census's log q has a full run's bits

    again = _run(model, out, CENSUS_STATS)  # a full unit serves a census as it is
    assert again.units_scored == 0 and again.units_reused == again.n_units


def test_a_killed_rescore_is_adopted_from_the_unit_files(model, tmp_path):
    """A full re-score that replaced unit files but died before the manifest said so: the files'
    metadata is read again, and nothing is scored a third time."""
    out = tmp_path / "store"
    _run(model, out, CENSUS_STATS)
    saved = (out / "manifest.json").read_text()
    _run(model, out, None)
    (out / "manifest.json").write_text(saved)  # the manifest as it was before the full run
    again = _run(model, out, None)
    assert again.units_scored == 0


def test_old_store_resumes_a_census_run_without_rescoring(tmp_path, monkeypatch):
    d = tmp_path / "v1"
    shutil.copytree(FIXTURE, d)
    monkeypatch.chdir(d)
    m = load_model("model")
    before = {p: p.stat().st_mtime_ns for p in _unit_files("store")}
    ws = passage_windows(
        read_passages("passages.jsonl").records, m.tokenizer, prefix_tokens=8, suffix_tokens=8
    )
    s = run_scoring(
        m,
        ws,
        policies=parse_policies(POLICIES),
        prefix_tokens=8,
        suffix_tokens=8,
        prompt_rule=PromptRule(),
        out_dir="store",
        label="members",
        inputs={"passages": "passages.jsonl"},
        unit_size=2,
        stats=CENSUS_STATS,
    )
    assert s.units_reused == s.n_units and s.units_scored == 0  # 0.1.0 units hold every statistic
    assert {p: p.stat().st_mtime_ns for p in _unit_files("store")} == before


def test_score_and_population_store_only_the_statistics_asked_for(tmp_path):
    """Issue 30: `score --stats` and `population --stats` (API ``stats=``) compute and store only
    the statistics asked for; population's test reads log q only, so its default is the census
    set, and score keeps every statistic by default. A bad name is refused before any work."""
    import memclaim as mc
    from memclaim.errors import InputError

    model = str(FIXTURE / "model")
    texts = str(FIXTURE / "passages.jsonl")
    kw = dict(prefix_tokens=8, suffix_tokens=8, policies=list(POLICIES))

    def stored(store):
        runs = json.loads((Path(store) / "manifest.json").read_text())["runs"]
        return {
            json.loads((Path(store) / "runs" / rid / "run.json").read_text())["stats"]
            for rid in runs
        }

    census = mc.score(model, texts, stats="census", out=tmp_path / "census", **kw)
    assert stored(census.store) == {CENSUS_STATS.spec}
    assert "token_logprob" not in census.scores("full").table.column_names
    ranks = mc.score(
        model, texts, stats="rank", out=tmp_path / "rank", **kw
    )  # + the census set, always kept
    assert stored(ranks.store) == {"greedy+margin+policy_logq+rank"}
    cols = ranks.scores("full").table.column_names
    assert "token_rank" in cols and "token_mean" not in cols
    every = mc.score(model, texts, out=tmp_path / "every", **kw)
    assert stored(every.store) == {ALL_STATS.spec}
    assert (
        every.scores("full").logq.tolist() == census.scores("full").logq.tolist()
    )  # the same bits

    ctl = str(FIXTURE / "controls.jsonl")
    pop = mc.population(model, texts, ctl, alpha="0.5", out=tmp_path / "pop", **kw)
    assert stored(Path(pop.store)) == {CENSUS_STATS.spec}
    pop_all = mc.population(
        model, texts, ctl, alpha="0.5", stats="all", out=tmp_path / "pop-all", **kw
    )
    assert stored(Path(pop_all.store)) == {ALL_STATS.spec}
    assert pop_all.headline == pop.headline  # the test reads log q only

    for bad, fn in (("loss", mc.score), ("rank+", mc.score)):
        with pytest.raises(InputError, match="statistic"):
            fn(model, texts, stats=bad, out=tmp_path / "never", **kw)
    with pytest.raises(InputError, match="unknown statistic"):
        mc.population(
            model, texts, ctl, alpha="0.5", stats="census+entropy", out=tmp_path / "never2", **kw
        )
    assert not (tmp_path / "never").exists() and not (tmp_path / "never2").exists()
