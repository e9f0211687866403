"""The main commands at 80 columns (issue 28 item 2): each command runs twice, at 80 and at 250
columns, on the committed tiny model (tests/data/fixtures/store_v1/model); its stdout at 80 must
have no line wider than the terminal, no count or word cut short (rich's '…'), and no word broken
in two: every word of the narrow output is a word of the wide one (digits are compared as
digits, since timings differ between the runs). stderr off a terminal holds plain progress
lines, never a drawn bar.

``demo`` trains nothing here (the tiny GPT is cached for the integration tier) but takes minutes:
it is in the slow tier; its console sections are also rendered from fixed data at 80 columns in
the integration tier (test_demo_sections_at_80_columns).
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from _paths import ROOT

MODEL = ROOT / "tests" / "data" / "fixtures" / "store_v1" / "model"
DATA = ROOT / "tests" / "data"
W = ["--prefix-tokens", "8", "--suffix-tokens", "8"]
BOX = "│┃┏┓┗┛┡┩┢┪┣┫┳┻╇╈╋━─┌┐└┘├┤┬┴┼═║╔╗╚╝╠╣╦╩╬╭╮╯╰"

COMMANDS = {
    "score": [
        "score",
        str(MODEL),
        "--input",
        f"{DATA}/kjv_verses.jsonl",
        *W,
        "--policy",
        "full",
        "--policy",
        "top-k:40",
        "--out",
        "runs/s",
    ],
    "population": [
        "population",
        str(MODEL),
        "--members",
        f"{DATA}/kjv_verses.jsonl",
        "--controls",
        f"{DATA}/new_verses.jsonl",
        *W,
        "--policy",
        "full",
        "--alpha",
        "0.1",
        "--out",
        "pop",
    ],
    "census": [
        "census",
        str(MODEL),
        "--document",
        f"{DATA}/genesis_1_3.txt",
        "--control",
        f"{DATA}/new_genesis_style.txt",
        "--stride",
        "16",
        *W,
        "--policy",
        "full",
        "--out",
        "census",
    ],
    "dp bounds": [
        "dp",
        "bounds",
        "--epsilon",
        "1",
        "--neighbors",
        "add-remove",
        "--copies",
        "2",
        "--list-size",
        "4",
        "--risk",
        "0.1",
    ],
    "audit": [
        "audit",
        str(MODEL),
        "--members",
        f"{DATA}/kjv_verses.jsonl",
        "--controls",
        f"{DATA}/new_verses.jsonl",
        *W,
        "--alpha",
        "0.1",
        "--out",
        "audit",
    ],
    "acr": [
        "acr",
        str(MODEL),
        "--members",
        f"{DATA}/kjv_famous_lines.jsonl",
        "--controls",
        f"{DATA}/new_famous_style_lines.jsonl",
        "--limit",
        "2",
        "--criterion",
        "prob:0.5",
        "--top-k",
        "8",
        "--search-batch",
        "8",
        "--steps",
        "1",
        "--max-prompt-tokens",
        "3",
        "--out",
        "acr",
    ],
    "reproduce": ["reproduce", "entropy-sweep", "--quick", "--out", "rep"],
    "demo": ["demo", "--out", "demo"],
}
MARKS = {"dp bounds": [], "demo": [pytest.mark.slow]}


def run_at(argv: list[str], columns: int, cwd: Path, monkeypatch) -> tuple[str, str]:
    from memclaim.cli.main import main

    cwd.mkdir(parents=True, exist_ok=True)
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("COLUMNS", str(columns))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(argv))
    assert rc == 0, f"{argv} exited {rc}\n{out.getvalue()}\n{err.getvalue()}"
    return out.getvalue(), err.getvalue()


def words(text: str) -> set[str]:
    """The words of ``text``: split at spaces and table borders, stripped of the punctuation a
    narrower layout adds or moves (a footnote's '[3]', 'add/remove,' joined with its neighbour);
    numbers are read as one '0' (timings and footnote numbers differ between the runs)."""
    text = re.sub(r"\d+", "0", text)
    out = set()
    for w in re.split(r"[\s" + BOX + r"]+", text):
        w = w.strip(",;:[]()")
        if w and not re.fullmatch(r"[0.+\-e/%]*", w):  # a bare number is not a word that can break
            out.add(w)
    return out


def problems_at_80(narrow: str, wide: str, width: int = 80) -> list[str]:
    """What is wrong with ``narrow`` (a command's output at ``width`` columns) against ``wide``
    (the same at 250): lines too wide, words cut short ('…'), words broken in two."""
    bad = [f"line of {len(ln)} columns: {ln!r}" for ln in narrow.splitlines() if len(ln) > width]
    if "…" in narrow and "…" not in wide:
        bad += [f"cut short: {ln!r}" for ln in narrow.splitlines() if "…" in ln]
    broken = sorted(words(narrow) - words(wide))
    bad += [f"word broken or changed: {w!r}" for w in broken]
    return bad


def test_the_checks_can_fail():
    wide = "the calibrated memorization rate is 0.25 │ windows 240/240"
    assert problems_at_80("the calibrated memori\nzation rate is 0.25 │ windows 240/240", wide) == [
        "word broken or changed: 'memori'",
        "word broken or changed: 'zation'",
    ]
    assert problems_at_80("x" * 81, "x" * 81)[0].startswith("line of 81 columns")
    assert problems_at_80("units 0/1…", "units 0/101")[0] == "cut short: 'units 0/1…'"


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=MARKS.get(n, [pytest.mark.integration])) for n in COMMANDS]
)
def test_command_at_80_columns(name, tmp_path, monkeypatch):
    argv = COMMANDS[name]
    narrow, err = run_at(argv, 80, tmp_path / "narrow", monkeypatch)
    wide, _ = run_at(argv, 250, tmp_path / "wide", monkeypatch)
    bad = problems_at_80(narrow, wide)
    assert not bad, (
        f"`memclaim {name}` at 80 columns:\n" + "\n".join(bad[:20]) + "\n--- output:\n" + narrow
    )
    assert not any(c in err for c in "━╸\x1b"), f"a drawn bar on a non-terminal stderr:\n{err}"
    assert "Loading weights" not in err and "it/s]" not in err  # transformers' own bars stay out


@pytest.mark.integration
def test_demo_sections_at_80_columns():
    """The demo's console sections (the scores table, the audit table, the privacy and report
    lines) from fixed data, at 80 and at 250 columns."""
    from rich.console import Console

    from memclaim.cli.demo import print_audit_section
    from memclaim.privacy.demo import run_demo_section
    from memclaim.report.demo import privacy_summary_lines

    attacks = {
        a: {
            "auc": 0.973,
            "low": 0.912,
            "high": 1.0,
            "leak_signal": 0.95,
            "tpr": {"tpr": 0.81, "certified_fpr": 0.0499},
        }
        for a in ("loss", "perplexity", "zlib", "min-k")
    }
    section = {
        "attacks": attacks,
        "headline": "5 membership attacks on 16 members vs 400 non-members; strongest: "
        "loss, AUC 1.000 [0.660, 1.000] (leak signal 1.00, excludes chance).",
        "tpr_note": None,
        "verifier": {
            "reading": "greedy recovery of the members from their own prefixes: 0.688 (the "
            "unlearning verifier reads it against 0.15 after unlearning; this model was "
            "not unlearned)"
        },
        "report": {"html": "memclaim-demo/audits/report.html"},
    }
    privacy = run_demo_section(
        canaries=[
            {
                "name": "planted passage suffix (~25 words), 16 copies",
                "min_entropy_bits": 67.44,
                "m": 1,
                "tau": 0.1,
                "copies": 16,
            }
        ]
    )
    outs = {}
    for width in (80, 250):
        buf = io.StringIO()
        con = Console(file=buf, width=width, highlight=False)
        print_audit_section(section, con)
        for line in privacy_summary_lines(privacy):
            con.print(line, markup=False)
        outs[width] = buf.getvalue()
    assert not problems_at_80(outs[80], outs[250]), outs[80]
