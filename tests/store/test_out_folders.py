"""Issue 25 item 8: --out folders. memclaim writes a store only into a new or empty folder or a
memclaim store (never into a folder of other files, and never sweeps temporary files there);
every refusal comes before any write; a command that fails before storing its first unit leaves
no partial store behind (a new folder is removed, an existing store is left byte for byte as it
was), and one that fails later keeps its finished units for the next run to resume.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from _paths import ROOT
from memclaim.decoding import parse_policies
from memclaim.errors import InputError, NumericsError, StoreError
from memclaim.models import load_model
from memclaim.scoring.prompts import PromptRule
from memclaim.scoring.runner import LocalBackend, run_scoring
from memclaim.store.store import ScoreStore, foreign_entries
from memclaim.text.io import read_passages
from memclaim.text.windows import passage_windows

MODEL = ROOT / "tests" / "data" / "fixtures" / "store_v1" / "model"
TEXTS = ROOT / "tests" / "data" / "kjv_verses.jsonl"
POLICIES = parse_policies(["full"])


@pytest.fixture(scope="module")
def model():
    return load_model(str(MODEL))


@pytest.fixture(scope="module")
def windows(model):
    return passage_windows(
        read_passages(str(TEXTS)).records[:40], model.tokenizer, prefix_tokens=8, suffix_tokens=8
    )


class FailingBackend(LocalBackend):
    """Scores ``good`` units, then fails as NaN weights do (a NumericsError)."""

    def __init__(self, model, good: int):
        super().__init__(lambda: model.lm, POLICIES)
        self.good = good

    def run(self, units, job=None):
        for i, res in enumerate(super().run(units, job)):
            if i >= self.good:
                raise NumericsError("unit: logq:full is nan (a test's failure)")
            yield res


def _score(model, windows, out, backend=None):
    return run_scoring(
        model,
        windows,
        policies=POLICIES,
        prefix_tokens=8,
        suffix_tokens=8,
        prompt_rule=PromptRule(),
        out_dir=out,
        unit_size=8,
        backend=backend,
    )


def _snapshot(root: Path) -> dict:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def test_a_folder_of_other_files_is_never_a_store(tmp_path):
    user = tmp_path / "thesis"
    user.mkdir()
    (user / "thesis.tex").write_text("years of work")
    (user / ".thesis.tex.tmp").write_text(
        "the editor's temporary file"
    )  # what the stale-temp sweep deleted
    assert foreign_entries(user) == [".thesis.tex.tmp", "thesis.tex"]
    with pytest.raises(StoreError, match="is not a memclaim score store and not empty"):
        ScoreStore(user)
    assert sorted(p.name for p in user.iterdir()) == [".thesis.tex.tmp", "thesis.tex"]
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "manifest.json").write_text('{"name": "another tool"}')
    assert foreign_entries(tmp_path / "other") == ["manifest.json"]


def test_a_store_killed_before_its_first_manifest_is_still_one(tmp_path):
    d = tmp_path / "s"
    for sub in ("units", "procedures", "runs"):
        (d / sub).mkdir(parents=True)
    (d / ".writers.lock").write_text("")
    (d / ".manifest.json.abc123.tmp").write_text("{")
    assert foreign_entries(d) == []


def test_out_dot_is_refused_in_a_folder_of_other_files_and_accepted_in_a_store(
    model, windows, tmp_path, monkeypatch
):
    from memclaim.api import score

    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.md").write_text("mine")
    monkeypatch.chdir(work)
    with pytest.raises(
        InputError, match="--out '.' is a folder memclaim did not make: it holds 'notes.md'"
    ):
        score(str(MODEL), str(TEXTS), prefix_tokens=8, suffix_tokens=8, policies=["full"], out=".")
    assert [p.name for p in work.iterdir()] == ["notes.md"]
    store = tmp_path / "store"
    _score(model, windows, store)
    monkeypatch.chdir(store)
    again = score(
        str(MODEL), str(TEXTS), prefix_tokens=8, suffix_tokens=8, policies=["full"], out="."
    )
    assert again.summary.store == "."
    with pytest.raises(InputError, match="--out '' is empty"):
        score(str(MODEL), str(TEXTS), prefix_tokens=8, suffix_tokens=8, policies=["full"], out="")


def test_a_run_failing_before_its_first_unit_leaves_no_store(model, windows, tmp_path):
    new = tmp_path / "a" / "b" / "store"
    with pytest.raises(NumericsError):
        _score(model, windows, new, backend=FailingBackend(model, 0))
    assert not (tmp_path / "a").exists()  # the folders the run made are gone
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(NumericsError):
        _score(model, windows, empty, backend=FailingBackend(model, 0))
    assert empty.is_dir() and not list(
        empty.iterdir()
    )  # the user's folder stays, as empty as it was


def test_a_failed_run_leaves_an_existing_store_as_it_was(model, windows, tmp_path):
    store = tmp_path / "store"
    _score(model, windows, store)
    before = _snapshot(store)
    other = passage_windows(
        read_passages(str(TEXTS)).records[40:60], model.tokenizer, prefix_tokens=8, suffix_tokens=8
    )
    with pytest.raises(NumericsError):
        _score(model, other, store, backend=FailingBackend(model, 0))
    assert (
        _snapshot(store) == before
    )  # no run, procedure or lock file of the failed command is left
    assert sorted(p.name for p in (store / "runs").iterdir()) == sorted(
        ScoreStore(store, create=False).runs()
    )


def test_a_run_failing_after_some_units_keeps_them_and_resumes(model, windows, tmp_path):
    store = tmp_path / "store"
    with pytest.raises(NumericsError):
        _score(model, windows, store, backend=FailingBackend(model, 2))
    assert len(list((store / "units").rglob("*.parquet"))) == 2
    done = _score(model, windows, store)
    assert done.units_reused == 2 and done.units_scored == done.n_units - 2
    fresh = _score(model, windows, tmp_path / "fresh")
    from memclaim.store.results import load_run_scores

    assert (
        load_run_scores(str(store), run=done.run_id).logq.tolist()
        == load_run_scores(str(tmp_path / "fresh"), run=fresh.run_id).logq.tolist()
    )


def test_population_refuses_someone_elses_report_before_scoring(tmp_path):
    from memclaim.api import population

    out = tmp_path / "out"
    out.mkdir()
    (out / "report.html").write_text("<p>a colleague's report</p>")
    (out / "coverage.png").write_bytes(b"\x89PNG a colleague's figure")
    rows = read_passages(str(TEXTS)).records
    with pytest.raises(InputError, match="report.html' exists and memclaim did not write it"):
        population(
            str(MODEL),
            [r.text for r in rows[:20]],
            [r.text for r in rows[20:40]],
            prefix_tokens=8,
            suffix_tokens=8,
            policies=["full"],
            alpha="0.2",
            out=str(out),
        )
    assert sorted(p.name for p in out.iterdir()) == [
        "coverage.png",
        "report.html",
    ]  # no store was started
