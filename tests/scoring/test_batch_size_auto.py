"""--batch-size auto (issue 14 item 3): accepted by every scoring command and API call, sized by
the engine from free memory, and on the CPU the same scores as any fixed batch size."""

from __future__ import annotations

import json

import numpy as np
import pytest

import memclaim as mc
from memclaim.cli.main import main
from memclaim.decoding import parse_policies
from memclaim.errors import DomainError
from memclaim.models.base import SyntheticLM
from memclaim.scoring.engine import AUTO_BATCH_CPU, TeacherForcingEngine
from memclaim.scoring.runner import score_unit
from memclaim.scoring.units import Item, WorkUnit
from memclaim.validate import batch_size


def test_the_validator():
    assert batch_size(3) == 3 and batch_size(" Auto ") == "auto" and batch_size(4.0) == 4
    for bad in (0, -1, "lots", True, 2.5):
        with pytest.raises(DomainError, match="--batch-size"):
            batch_size(bad)


def test_score_unit_asks_the_engine_for_auto_and_cuts_batches_by_it(monkeypatch):
    engine = TeacherForcingEngine(SyntheticLM(), parse_policies(["full", "greedy"]))
    asked = []

    def fake_auto(seq_len, suffix_len, *, free_bytes=None):
        asked.append((seq_len, suffix_len))
        return 3

    monkeypatch.setattr(engine, "auto_batch_size", fake_auto)
    items = tuple(
        Item(f"w{i}", (1 + i % 4, 2, 3 + i % 2), (3, 4, 5 + i % 3)) for i in range(7)
    )  # one length: a unit's
    sizes = []
    auto = score_unit(engine, WorkUnit("u", "pk", items), batch_size="auto", on_batch=sizes.append)
    assert asked == [(3 + 3 - 1, 3)] and sizes == [3, 3, 1]  # the unit's window length
    fixed = score_unit(engine, WorkUnit("u", "pk", items), batch_size=7)
    assert np.array_equal(auto.scores.logq, fixed.scores.logq)  # bit-identical on the CPU


def test_cpu_auto_is_the_cpu_batch():
    engine = TeacherForcingEngine(SyntheticLM(), parse_policies(["full"]))
    assert engine.resolve_batch_size("auto", 100, 50) == AUTO_BATCH_CPU


@pytest.mark.integration
def test_cli_and_api_take_auto_with_the_same_scores(toy, data_dir, tmp_path, capsys):
    args = [
        "score",
        "toy",
        "--input",
        str(data_dir / "kjv_verses.jsonl"),
        "--prefix-tokens",
        "8",
        "--suffix-tokens",
        "8",
        "--no-progress",
        "--json",
    ]
    assert main(args + ["--batch-size", "auto", "--out", str(tmp_path / "a")]) == 0
    run_auto = json.loads(capsys.readouterr().out)
    assert main(args + ["--batch-size", "5", "--out", str(tmp_path / "b")]) == 0
    run_five = json.loads(capsys.readouterr().out)
    a = mc.score(
        "toy",
        texts=data_dir / "kjv_verses.jsonl",
        prefix_tokens=8,
        suffix_tokens=8,
        batch_size="auto",
    )
    sa = mc.score(
        "toy", texts=data_dir / "kjv_verses.jsonl", prefix_tokens=8, suffix_tokens=8, batch_size=5
    )
    assert np.array_equal(
        a.to_pandas()["logq:top-k:40"].to_numpy(), sa.to_pandas()["logq:top-k:40"].to_numpy()
    )
    stored = json.loads((tmp_path / "a" / "runs" / run_auto["run_id"] / "run.json").read_text())
    assert stored["batch_size"] == "auto"
    assert (
        run_auto["procedure_key"] == run_five["procedure_key"]
    )  # batch size is not part of the procedure
