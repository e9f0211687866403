"""Issue 15 item 2: checks that fit the data, before the expensive part.

* ``population`` and ``census`` score the controls first and stop before the candidates, with
  the fix, when every control sits at the atom (-inf under the tested policy, [EM] C.4.4): the
  store then holds the controls' run only, so re-running with a better policy reuses nothing
  wrongly and nothing was spent on the members/documents.
* ``test``, ``population`` and ``census`` give that fix in the same words
  (:func:`memclaim.claims.scores.controls_at_atom_hint`).
* Texts shorter than prefix + suffix: the error names lengths that fit (and how many texts each
  keeps).

On the tiny GPT ("toy"): under top-k:1 no control's suffix is the greedy path, so every control
scores -inf; the members (planted, memorized) would not.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import memclaim as mc
from memclaim.claims.scores import controls_at_atom_hint
from memclaim.cli.main import main
from memclaim.errors import InputError

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Path:
    from memclaim.train.toy import ensure_toy_model, toy_data

    ensure_toy_model()
    td = toy_data()
    d = tmp_path_factory.mktemp("early")
    mem = [r for r in td["planted"] if r["id"].startswith("member")][:8]
    ctl = [r for r in td["held_out"] if r["id"].startswith("control")][:8]
    (d / "m.jsonl").write_text(
        "".join(json.dumps({"id": r["id"], "text": r["text"]}) + "\n" for r in mem)
    )
    (d / "c.jsonl").write_text(
        "".join(json.dumps({"id": r["id"], "text": r["text"]}) + "\n" for r in ctl)
    )
    (d / "doc.txt").write_text(" ".join(r["text"] for r in mem[:3]))
    (d / "ctl.txt").write_text(" ".join(r["text"] for r in ctl[:3]))
    return d


def _labels(store: Path) -> list[str]:
    return sorted(
        r["label"] for r in json.loads((store / "manifest.json").read_text())["runs"].values()
    )


def test_population_stops_before_the_members_when_every_control_is_minus_inf(files, tmp_path):
    out = tmp_path / "pop"
    seen = []
    with pytest.raises(InputError) as ei:
        mc.population(
            "toy",
            files / "m.jsonl",
            files / "c.jsonl",
            prefix_tokens=8,
            suffix_tokens=8,
            policies=["top-k:1", "full"],
            alpha="0.2",
            out=out,
            progress=seen.append,
        )
    msg = str(ei.value)
    assert "all 8 control scores are -inf (probability 0) under top-k:1" in msg
    assert "stopped before scoring the members" in msg
    assert ei.value.hint == controls_at_atom_hint("top-k:1")
    assert "--policy full" in ei.value.hint and "larger top-k than 1" in ei.value.hint
    assert _labels(out / "store") == ["controls"]  # the members were never scored
    assert not (out / "report.json").exists()
    # the fix works
    res = mc.population(
        "toy",
        files / "m.jsonl",
        files / "c.jsonl",
        prefix_tokens=8,
        suffix_tokens=8,
        policies=["full", "top-k:1"],
        alpha="0.2",
        out=tmp_path / "pop2",
    )
    assert res.runs["members"].n_windows == 8 and list(res.runs) == ["members", "controls"]


def test_census_stops_before_the_documents_when_a_control_is_all_minus_inf(files, tmp_path, capsys):
    out = tmp_path / "census"
    rc = main(
        [
            "census",
            "toy",
            "--document",
            str(files / "doc.txt"),
            "--control",
            str(files / "ctl.txt"),
            "--stride",
            "8",
            "--prefix-tokens",
            "8",
            "--suffix-tokens",
            "8",
            "--policy",
            "top-k:1",
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "control windows score -inf (probability 0) under top-k:1" in err
    assert "stopped before scoring the documents" in err
    assert "fix: " + controls_at_atom_hint("top-k:1", binary_possible=False) in " ".join(
        err.split()
    )
    assert _labels(out / "store") == ["control"]


def test_test_gives_the_same_fix_on_a_store(files, tmp_path, capsys):
    """`memclaim test` on stored runs whose controls are all -inf: the same words as population."""
    store = tmp_path / "s"
    for f in ("m.jsonl", "c.jsonl"):
        assert (
            main(
                [
                    "score",
                    "toy",
                    "--input",
                    str(files / f),
                    "--prefix-tokens",
                    "8",
                    "--suffix-tokens",
                    "8",
                    "--policy",
                    "top-k:1",
                    "--out",
                    str(store),
                    "--no-progress",
                    "--json",
                ]
            )
            == 0
        )
    capsys.readouterr()
    rc = main(
        [
            "test",
            "--candidates",
            str(store),
            "--run",
            "passages:m.jsonl",
            "--controls",
            str(store),
            "--controls-run",
            "passages:c.jsonl",
            "--alpha",
            "0.2",
            "--out",
            str(tmp_path / "t"),
        ]
    )
    err = " ".join(capsys.readouterr().err.split())
    assert rc == 2
    assert "all 8 control scores are -inf (probability 0) under top-k:1" in err
    assert "fix: " + controls_at_atom_hint("top-k:1") in err


def test_texts_shorter_than_a_window_name_lengths_that_fit(files, tmp_path, capsys):
    rc = main(
        [
            "population",
            "toy",
            "--members",
            str(files / "m.jsonl"),
            "--controls",
            str(files / "c.jsonl"),
            "--prefix-tokens",
            "200",
            "--suffix-tokens",
            "50",
            "--out",
            str(tmp_path / "p"),
        ]
    )
    err = " ".join(capsys.readouterr().err.split())
    assert rc == 2 and not (tmp_path / "p").exists()
    assert "shorter than prefix + suffix = 250 tokens (200 + 50): the texts have" in err
    assert err.count("fix:") == 1 and err.startswith(
        "error: --members: all 8 texts"
    )  # one fix, the right one
    import re

    m = re.search(r"--prefix-tokens (\d+) --suffix-tokens (\d+) keeps every text", err)
    assert m, err
    p, s = int(m.group(1)), int(m.group(2))
    assert p >= 1 and s >= 1 and p >= 3 * s  # the asked 200:50 ratio, kept
    # the lengths named do fit: every text gives a window
    res = mc.population(
        "toy",
        files / "m.jsonl",
        files / "c.jsonl",
        prefix_tokens=p,
        suffix_tokens=s,
        policies=["full"],
        alpha="0.2",
    )
    assert res.runs["members"].n_windows == 8 and res.runs["members"].skipped_short == 0


def test_lengths_that_fit_is_exact():
    from memclaim.text.windows import lengths_that_fit

    hint = lengths_that_fit([33, 40, 44, 44, 70], 50, 50)
    assert (
        "--prefix-tokens 16 --suffix-tokens 17 keeps every text" in hint
    )  # 16 + 17 = 33, the shortest
    assert "--prefix-tokens 22 --suffix-tokens 22 keeps 3 of 5" in hint  # median 44: 44, 44, 70
    assert lengths_that_fit([1, 1], 8, 8).startswith("use longer texts")
    assert "--prefix-tokens 0 --suffix-tokens 2" not in lengths_that_fit([2], 1, 1)
