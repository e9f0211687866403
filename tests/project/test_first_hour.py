"""Issue 28, "a researcher's first hour": progress that says something from the first second, the
API's keywords, reports that name their procedure and how they were made, results that show
themselves in a notebook, --limit, the figures, and the version the docs name.

Unit tests (no model) unless marked; the 80-column rendering of whole commands is
tests/project/test_render_80.py, the notebook run tests/project/test_notebook.py.
"""

from __future__ import annotations

import io
import json
import math
import re
import warnings

import numpy as np
import pytest

import memclaim as mc
from _paths import ROOT
from memclaim.progress import ProgressEvent, Reporter, ambient, ambient_log, reporting

FIXTURE_MODEL = ROOT / "tests" / "data" / "fixtures" / "store_v1" / "model"


def _strip_ansi(text: str) -> list[str]:
    clean = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text).replace("\r", "\n")
    return [ln for ln in clean.split("\n") if ln.strip()]


# ------------------------------------------------------------------------------ progress in the CLI
class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def _bar(plain: bool, width: int = 80):
    from memclaim.cli.progress import ProgressBar, UnitTracker

    buf, clock = io.StringIO(), Clock()
    return (
        ProgressBar(buf, plain=plain, width=width, clock=clock, tracker=UnitTracker()),
        buf,
        clock,
    )


def _events(
    bar,
    clock,
    times_done,
    *,
    total=101,
    reused=0,
    label="scoring passages:a_rather_long_file_name.jsonl",
):
    extra = {"items_reused": reused, "run_id": "r", "units_total": 4, "units_done": 0}
    bar(ProgressEvent(stage="score", label=label, done=0, total=total, extra=extra))
    for t, done in times_done:
        clock.t = t
        bar(ProgressEvent(stage="score", label=label, done=done, total=total, extra=extra))
    if bar._progress is not None:
        bar._progress.refresh()
    bar(
        ProgressEvent(
            stage="score",
            label=label,
            done=times_done[-1][1],
            total=total,
            finished=True,
            extra=extra,
        )
    )


def test_terminal_bar_keeps_count_rate_and_eta_at_80_columns():
    """The 80-column bar (issue 28 item 2): 'units 0/1…' and a lost ETA before; now the label gives
    way first and the count, the rate and the estimate are whole."""
    bar, buf, clock = _bar(plain=False)
    _events(bar, clock, [(1.5, 10), (3.0, 30)])
    lines = _strip_ansi(buf.getvalue())
    assert lines and all(len(ln) <= 80 for ln in lines), lines
    live = [ln for ln in lines if "30/101 windows" in ln]
    assert live, lines
    running = [
        ln for ln in live if re.search(r"\d+(\.\d)?/s", ln) and re.search(r"ETA \d+:\d\d", ln)
    ]
    assert running, live
    assert "…" in running[-1].split("━")[0]  # the label was shortened, nothing else
    assert re.search(
        r"30/101 windows +\d+:\d\d$", live[-1]
    )  # the finished line: count and time taken


def test_resumed_run_counts_the_whole_run():
    """At resume the windows found done count too (before: windows showed what remained while the
    units showed the run's total)."""
    bar, buf, clock = _bar(plain=True)
    _events(bar, clock, [(1.5, 10), (12.0, 50)], total=61, reused=40, label="scoring members")
    text = buf.getvalue()
    assert "50/101 windows" in text and "90/101 windows" in text, text
    assert "of 61" not in text and "/61 " not in text


def test_plain_lines_off_a_terminal_are_periodic_and_whole():
    """Non-TTY stderr gets plain lines: one when the operation has lasted a second, then at most
    one every PLAIN_EVERY seconds, then the end; never a bar or a control character."""
    from memclaim.cli.progress import PLAIN_EVERY

    bar, buf, clock = _bar(plain=True)
    _events(
        bar,
        clock,
        [(1.2, 1)] + [(1.2 + 0.5 * i, 1 + i) for i in range(1, 60)],
        label="scoring members",
    )
    lines = buf.getvalue().splitlines()
    assert "\x1b" not in buf.getvalue() and "━" not in buf.getvalue()
    assert lines[0].startswith("scoring members: 1/101 windows")
    assert lines[-1].startswith("scoring members: 60 windows in ")
    assert len(lines) <= 2 + int(30 / PLAIN_EVERY) + 1, lines  # 30 s of events


def test_a_quick_step_shows_nothing_and_an_unknown_total_shows_time():
    bar, buf, clock = _bar(plain=True)
    bar(ProgressEvent(stage="load", label="loading weights", done=0, total=3))
    clock.t = 0.2
    bar(ProgressEvent(stage="load", label="loading weights", done=3, total=3, finished=True))
    assert buf.getvalue() == ""
    bar(ProgressEvent(stage="convert", label="converting a GGUF file", done=0, total=None))
    clock.t = 4.0
    bar(ProgressEvent(stage="convert", label="converting a GGUF file", done=0, total=None))
    bar(
        ProgressEvent(
            stage="convert", label="converting a GGUF file", done=0, total=None, finished=True
        )
    )
    assert buf.getvalue().splitlines() == [
        "converting a GGUF file: 0:04 so far",
        "converting a GGUF file: done in 0:04",
    ]


def test_the_ticker_shows_a_silent_step_within_a_second():
    """A step with no events after its start (a GGUF conversion, a slow first batch) still appears,
    from the background thread, once it has lasted a second."""
    import time

    from memclaim.cli.progress import ProgressBar, UnitTracker

    buf = io.StringIO()
    bar = ProgressBar(buf, plain=True, tracker=UnitTracker())
    with Reporter(bar, stage="start", label="loading PyTorch", total=None):
        deadline = time.monotonic() + 10
        while "loading PyTorch" not in buf.getvalue() and time.monotonic() < deadline:
            time.sleep(0.1)
    assert buf.getvalue().startswith("loading PyTorch: 0:01 so far"), buf.getvalue()


def test_the_startup_shows_until_the_first_operation_and_every_bar_closes_at_the_end():
    """The CLI creates its bar before the API imports torch (tens of seconds on a cold machine):
    that shows as 'starting', ended by the first real operation; main() closes every bar."""
    import time

    from memclaim.cli.progress import _LIVE, STARTUP, close_all, progress_bar

    buf = io.StringIO()
    bar = progress_bar(True, file=buf)
    deadline = time.monotonic() + 10
    while STARTUP not in buf.getvalue() and time.monotonic() < deadline:
        time.sleep(0.1)
    with Reporter(bar, stage="score", label="scoring x", total=2) as r:
        r.advance(2)
    lines = buf.getvalue().splitlines()
    assert lines[0].startswith(f"{STARTUP}: 0:01 so far") and lines[1].startswith(
        f"{STARTUP}: done in "
    ), lines
    silent = progress_bar(True, file=io.StringIO())
    assert silent in _LIVE
    close_all()  # an error before any operation: the startup is dropped without a 'done' line
    assert silent not in _LIVE and not silent._ops and silent._startup is None
    assert progress_bar(False)._startup is None  # --no-progress / --json: nothing at all


# ------------------------------------------------------------------------------ ambient progress
def test_ambient_callbacks_reach_steps_without_a_parameter():
    seen, lines = [], []
    assert ambient() is None and ambient_log() is None
    with reporting(seen.append, lines.append):
        assert ambient() is not None
        Reporter(ambient(), stage="build", label="x", total=2).close()
        ambient_log()("a line")
    assert ambient() is None and [e.finished for e in seen] == [False, True] and lines == ["a line"]


def test_every_training_run_reports_its_steps(tmp_path):
    """The one trainer reports each step to the ambient callback (the tiny GPT's build, shadows,
    fine-tuning and unlearning all train through it)."""
    import torch

    from memclaim.train.finetune import new_gpt2
    from memclaim.train.trainer import TrainConfig, pack_documents, train_causal_lm

    blocks = pack_documents([[1, 2, 3, 4, 5, 6, 7]] * 8, seq_len=8, sep_ids=[0])
    torch.manual_seed(0)
    model = new_gpt2(vocab_size=16, n_positions=8, n_embd=8, n_head=2)
    seen = []
    with reporting(seen.append):
        train_causal_lm(
            model,
            blocks,
            TrainConfig(steps=3, batch_size=4, seq_len=8, warmup_steps=0),
            label="lab",
        )
    steps = [e for e in seen if e.stage == "train"]
    assert [e.done for e in steps] == [0, 1, 2, 3, 3] and steps[-1].finished and steps[0].total == 3
    assert all(e.label == "lab" and e.unit == "steps" for e in steps) and "loss" in steps[1].extra


def test_the_tiny_gpt_build_reports_its_phases_and_its_training(tmp_path, monkeypatch):
    """Building the tiny GPT on a fresh cache printed nothing for minutes (issue 28 item 1): its
    corpus and tokenizer and then each training step are progress events (a small spec here)."""
    from memclaim.train.toy import ToySpec, ensure_toy_model

    monkeypatch.setenv("MEMCLAIM_CACHE", str(tmp_path / "cache"))
    spec = ToySpec(
        steps=3,
        n_background=6,
        n_held_out=2,
        passage_words=12,
        document_words=30,
        copies=((1, 2),),
        n_layer=1,
        n_embd=16,
        n_head=2,
        n_positions=64,
        seq_len=32,
        batch_size=2,
    )
    seen, lines = [], []
    out = ensure_toy_model(spec, progress=seen.append, log=lines.append)
    assert (out / "toy_data.json").is_file()
    stages = [(e.stage, e.done, e.total, e.finished) for e in seen]
    assert ("build", 3, 3, True) in stages and ("train", 3, 3, True) in stages, stages
    assert any("training the tiny GPT once" in ln for ln in lines)
    seen.clear()
    assert (
        ensure_toy_model(spec, progress=seen.append) == out and seen == []
    )  # cached: nothing to show


# ------------------------------------------------------------------------------ transformers, quiet
def test_transformers_bars_become_memclaim_events_and_warnings_stay_quiet():
    from transformers.utils import logging as hf_logging

    from memclaim.models.quiet import library_bars, quiet_libraries

    seen = []
    with library_bars(seen.append, stage="load", label="loading the weights of x"):
        for _ in hf_logging.tqdm(range(4), desc="Loading weights"):
            pass
        import transformers.modeling_gguf_pytorch_utils as gguf_utils

        for _ in gguf_utils.tqdm(range(2), desc="Converting and de-quantizing GGUF tensors..."):
            pass
    # the whole block is one operation from its start (from_pretrained's seconds before its loop show
    # too), given a count by transformers' bars; the block's own end comes last
    assert (seen[0].done, seen[0].total) == (0, None)
    assert [(e.done, e.total) for e in seen if e.finished] == [(4, 4), (2, 2), (0, None)]
    assert all(e.label == "loading the weights of x" for e in seen)
    before = hf_logging.get_verbosity()
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        with quiet_libraries():
            warnings.warn_explicit(
                "a library's note", UserWarning, "x.py", 1, module="transformers.generation"
            )
            assert hf_logging.get_verbosity() == hf_logging.ERROR
        warnings.warn_explicit("memclaim's own", UserWarning, "y.py", 1, module="memclaim.x")
    assert [str(w.message) for w in got] == [
        "memclaim's own"
    ] and hf_logging.get_verbosity() == before


# ------------------------------------------------------------------------------ the API's keywords
def test_an_unknown_keyword_names_the_closest_in_error_fix_form():
    from memclaim.api._public import KeywordError
    from memclaim.errors import InputError

    with pytest.raises(KeywordError) as e:
        mc.budget(p=1e-5, delt=0.1)
    assert isinstance(e.value, TypeError) and isinstance(e.value, InputError)
    assert "unknown keyword delt=0.1" in str(e.value) and "did you mean delta=?" in str(e.value)
    with pytest.raises(KeywordError, match="did you mean policies="):
        mc.test([-1.0], [-2.0] * 9, alpha="0.1", polices="full")


def test_one_spelling_of_policies_everywhere():
    c, k = [-2.0, -3.5, -1.0], [-9.0, -8.5, -7.0, -9.5, -8.0, -6.5, -7.7, -8.8, -9.9]
    new = mc.test(c, k, alpha="0.1", policies="full")
    as_list = mc.test(c, k, alpha="0.1", policies=["full"])
    with pytest.warns(
        DeprecationWarning, match=r"test\(policy=\.\.\.\) is now test\(policies=\.\.\.\)"
    ):
        old = mc.test(c, k, alpha="0.1", policy="full")
    assert (
        new.headline == as_list.headline == old.headline
        and "under decoding policy full" in new.headline
    )
    from memclaim.errors import InputError

    with pytest.raises(InputError, match="test uses one policy, got 2"):
        mc.test(c, k, alpha="0.1", policies=["full", "greedy"])
    with pytest.raises(InputError, match="both policy= and its new name policies="):
        mc.test(c, k, alpha="0.1", policy="full", policies="full")
    from api_keywords import accepted_keywords

    for fn in (mc.score, mc.population, mc.census, mc.audit, mc.test):
        # explicit or among the typed shortcuts (**options, issue 26); the old name only renamed
        assert "policies" in accepted_keywords(fn) and "policy" not in accepted_keywords(fn)


def test_progress_argument_true_false_or_a_callback():
    from memclaim.api._public import NotebookProgress, resolve_progress

    assert resolve_progress(False) is None and resolve_progress(None) is None
    assert isinstance(resolve_progress(True), NotebookProgress)
    sink = []
    with reporting(sink.append):
        assert resolve_progress(True) == sink.append  # inside a call: the caller's callback
    from memclaim.errors import InputError

    with pytest.raises(InputError, match="progress must be True, False or a callback"):
        resolve_progress("yes")


# ------------------------------------------------------------------------------ claim sentences, reports
def test_claim_sentences_name_the_policy_and_a_prompt_rule_that_is_not_the_prefix():
    from memclaim.claims.census import WindowScores, census
    from memclaim.claims.population import population_claim
    from memclaim.report.census import census_headline
    from memclaim.report.population import headline

    c = population_claim(
        candidate_scores=[-1.0, -2.0, -30.0],
        alpha="0.1",
        control_scores=[-9.0, -8.0, -7.0, -6.0, -5.0, -4.0, -3.5, -10.0, -11.0],
    )
    proc = {
        "policy": "top-k:40",
        "policies_scored": ["top-k:40", "greedy"],
        "prompt": {"templates": ["Repeat after me: {suffix}"], "chat": True, "aggregate": None},
    }
    h = headline(c, proc)
    assert (
        "under decoding policy top-k:40 (the one tested; also scored: greedy), prompted with the template "
        "'Repeat after me: {suffix}' in the model's chat template:" in h
    )
    assert "natural" not in headline(
        c, {"policy": "full", "prompt": {"templates": [], "chat": False}}
    )
    ctl = WindowScores.from_arrays(
        [math.log(1e-12), math.log(3e-9)], [0, 10], [10, 20], doc_length=20, name="ctl"
    )
    doc = WindowScores.from_arrays(
        [math.log(2e-3), math.log(1e-20)], [0, 10], [10, 20], doc_length=20, name="doc"
    )
    assert "above tau_doc = 1e-8 under decoding policy full (1 of 2 windows)" in census_headline(
        census(doc, ctl), {"policy": "full"}
    )
    binary = population_claim(
        candidate_scores=[0.0, -np.inf], control_scores=[-np.inf] * 9, alpha="0.1", binary=True
    )
    assert headline(binary, {"policy": "greedy"}).startswith(
        "Greedy (binary) score under decoding policy greedy:"
    )


def test_reports_carry_date_version_and_how_they_were_made(tmp_path):
    """A result saved later still names the call that made it; under the CLI, the command line."""
    from memclaim.cli.main import main

    res = mc.test(
        [-2.0, -3.5, -1.0], [-9.0, -8.5, -7.0, -9.5, -8.0, -6.5, -7.7, -8.8, -9.9], alpha="0.1"
    )
    res.save(tmp_path / "api")
    rep = json.loads((tmp_path / "api" / "report.json").read_text())
    assert rep["schema_version"] == "1.1" and rep["memclaim_version"] == mc.__version__
    assert rep["invocation"]["api"] == "memclaim.test([-2.0, -3.5, -1.0], <list of 9>, alpha='0.1')"
    md = (tmp_path / "api" / "report.md").read_text()
    assert re.search(
        r"Made by memclaim \S+ on \d{4}-\d\d-\d\d \d\d:\d\d UTC with: memclaim\.test\(", md
    )
    assert "Made by memclaim" in (tmp_path / "api" / "report.html").read_text()
    (tmp_path / "m.csv").write_text("id,score\nm1,-2.0\nm2,-3.5\n")
    (tmp_path / "c.csv").write_text("id,score\n" + "".join(f"c{i},{-6.0 - i}\n" for i in range(9)))
    argv = [
        "test",
        "--candidates",
        str(tmp_path / "m.csv"),
        "--controls",
        str(tmp_path / "c.csv"),
        "--alpha",
        "0.1",
        "--policy",
        "full",
        "--out",
        str(tmp_path / "cli"),
        "--json",
    ]
    import contextlib

    with contextlib.redirect_stdout(io.StringIO()):
        assert main(argv) == 0
    inv = json.loads((tmp_path / "cli" / "report.json").read_text())["invocation"]
    assert inv["argv"] == argv and inv["text"].startswith("memclaim test --candidates")
    from memclaim.report.schema import validate_report

    validate_report(json.loads((tmp_path / "cli" / "report.json").read_text()))


def test_census_report_states_its_own_verify_step_and_the_demo_report_one_procedure_table():
    from memclaim.claims.census import WindowScores, census
    from memclaim.claims.population import population_claim
    from memclaim.report.census import census_report
    from memclaim.report.demo import demo_claims_report
    from memclaim.report.words import VERIFY_CENSUS

    ctl = WindowScores.from_arrays(
        [math.log(1e-12), math.log(3e-9)], [0, 10], [10, 20], doc_length=20, name="ctl"
    )
    doc = WindowScores.from_arrays(
        [math.log(2e-3), math.log(1e-20)], [0, 10], [10, 20], doc_length=20, name="doc"
    )
    proc = {
        "policy": "full",
        "verify": "conformal test against matched non-member controls ([EM] §3); applied by "
        "`memclaim test`",
        "model": {"name": "toy", "fingerprint": "ab"},
    }
    b = census_report([census(doc, ctl)], procedure=proc)
    assert json.loads(b.json_text)["procedure"]["verify"] == VERIFY_CENSUS
    assert (
        "memclaim test" not in b.markdown
        and "conformal test" not in b.markdown.split("## Procedure")[1]
    )
    c = population_claim(
        candidate_scores=[-1.0, -2.0, -30.0],
        alpha="0.1",
        control_scores=[-9.0, -8.0, -7.0, -6.0, -5.0, -4.0, -3.5, -10.0, -11.0],
    )
    md = demo_claims_report(c, procedure=proc).markdown
    assert "No procedure record was given." not in md and "{'" not in md
    assert md.count("## Procedure and inputs") == 1 and "| model.name | toy |" in md


def test_group_curve_words_when_h_star_is_the_exact_threshold():
    from memclaim.privacy.extraction import group_curve_words
    from memclaim.privacy.summary import bounds_summary  # noqa: F401 - the row that says it

    r = mc.dp_bounds(epsilon=1.0, neighbors="add-remove", copies=2, list_size=4, risk=0.1)
    note = next(x.note for x in r.rows if x.name.startswith("H* ="))
    assert "needs only" not in note and "the same 8.20732 bits" in note
    assert group_curve_words(9.0, 7.5) == "not exact; the exact group curve needs only 7.5 bits"


def test_the_verifier_gives_a_verdict_only_after_unlearning(tmp_path):
    from memclaim.api._audit import _was_unlearned
    from memclaim.report.words import verifier_reading

    assert "forgotten" not in verifier_reading(0.0, 0.15, unlearned=False)
    assert verifier_reading(0.0, 0.15, unlearned=True).startswith("unlearning verifier: forgotten")
    assert verifier_reading(0.5, 0.15, unlearned=True).startswith(
        "unlearning verifier: not forgotten"
    )

    class M:
        path = tmp_path

    assert not _was_unlearned(M())
    (tmp_path / "memclaim_train.json").write_text(json.dumps({"kind": "unlearn"}))
    assert _was_unlearned(M())


# ------------------------------------------------------------------------------ results in a notebook
def test_results_have_a_short_repr_and_an_html_view_from_the_report_template():
    res = mc.test(
        [-2.0, -3.5, -1.0], [-9.0, -8.5, -7.0, -9.5, -8.0, -6.5, -7.7, -8.8, -9.9], alpha="0.1"
    )
    results = [
        res,
        mc.budget(p=2.5e-5, n=100000),
        mc.dp_bounds(epsilon=1.0, neighbors="add-remove"),
    ]
    for r in results:
        text = repr(r)
        assert len(text) <= 240 and "\n" not in text, text
        page = r._repr_html_()
        assert page.startswith('<div class="memclaim-result">') and "<table>" in page
        assert "<html" not in page and "callout" in page
    assert res.headline in res._repr_html_().replace("&#39;", "'") or "claim" in res._repr_html_()
    model = mc.load_model(FIXTURE_MODEL)
    assert len(repr(model)) <= 160 and "weights not loaded yet" in repr(model)
    assert "<table>" in model._repr_html_()


def test_scores_and_to_pandas_carry_the_unit_in_every_column():
    res = mc.test(
        [-2.0, -3.5, -1.0], [-9.0, -8.5, -7.0, -9.5, -8.0, -6.5, -7.7, -8.8, -9.9], alpha="0.1"
    )
    df = res.to_pandas()
    assert "score" not in df.columns and {"logq_nats", "log10_q", "margin_log10", "claimed"} <= set(
        df.columns
    )
    np.testing.assert_allclose(df["log10_q"], np.array([-2.0, -3.5, -1.0]) / math.log(10))
    m, c = res.scores("members"), res.scores("controls")
    assert list(m.columns) == ["id", "logq_nats", "log10_q"] and len(c) == 9
    other = mc.test([2.0, 3.5], [1.0] * 9, alpha="0.1", kind="score")
    assert "score" in other.to_pandas().columns and list(other.scores("controls").columns) == [
        "id",
        "score",
    ]


# ------------------------------------------------------------------------------ figures
def test_score_histograms_mark_tau_and_count_what_cannot_be_drawn():
    from memclaim.report.figures import score_histograms

    res = mc.test(
        [-2.0, -3.5, -np.inf], [-9.0, -8.5, -7.0, -9.5, -8.0, -6.5, -7.7, -8.8, -9.9], alpha="0.1"
    )
    fig = res.plot_scores()
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[0].endswith("(2 drawn; 1 at q = 0 not drawn)") and any("τ" in x for x in labels)
    tau_x = [ln.get_xdata()[0] for ln in ax.get_lines()]
    assert tau_x and math.isclose(tau_x[0], res.test.threshold / math.log(10))
    assert (
        score_histograms([1.0], [0.0], threshold=None, probability=False).axes[0].get_xlabel()
        == "score"
    )


def test_figures_at_a_papers_width_and_no_flat_sweeps():
    from memclaim.claims.conformal import alpha_sweep
    from memclaim.report import style
    from memclaim.report.figures import _plot_distinct, alpha_sweep_figure

    sw = alpha_sweep(
        [-1.0, -2.0, -30.0], [-9.0, -8.0, -7.0, -6.0, -5.0, -4.0, -3.5, -10.0, -11.0, -12, -13, -14]
    )
    fig = alpha_sweep_figure(sw, alpha_n=0.1)
    assert fig.get_figwidth() <= style.TEXT_WIDTH + 1e-9 and len(fig.axes) == 3  # was 11 inches
    few = alpha_sweep([-1.0], [-9.0, -8.0])
    assert few.k.size < 3
    assert "too few operating points" in alpha_sweep_figure(few).texts[0].get_text()
    with style.style():
        f2, ax = style.figure(width=4, height=3)
        _plot_distinct(ax, [0, 1], [([1, 2], "a", {}), ([1, 2], "b", {}), ([0, 0], "c", {})])
    assert [ln.get_label() for ln in ax.get_lines()] == [
        "a = b",
        "c",
    ]  # no line hidden under another


# ------------------------------------------------------------------------------ --limit
def test_limit_is_checked_before_any_work():
    from memclaim.api._common import check_limit
    from memclaim.errors import InputError

    assert check_limit(None) is None and check_limit(3) == 3
    for bad in (0, -1, 2.5, True, "3"):
        with pytest.raises(InputError, match="--limit must be a whole number >= 1"):
            check_limit(bad)


@pytest.mark.integration
def test_limit_scores_the_first_texts_and_the_run_says_so(tmp_path):
    """--limit at the input level: the first N texts (a document's first N windows); the run is
    labelled [:N], its inputs record the limit, and a later full run is another run."""
    from memclaim.report.words import limit_note

    texts = [
        {"id": f"t{i}", "text": "In the beginning God created the heaven and the earth. " * 3}
        for i in range(6)
    ]
    run = mc.score(
        FIXTURE_MODEL,
        texts,
        prefix_tokens=8,
        suffix_tokens=8,
        policies="full",
        limit=2,
        out=tmp_path / "s",
        progress=False,
    )
    assert (
        run.summary.n_windows == 2 and run.inputs["limit"] == 2 and run.inputs["records_total"] == 6
    )
    rec = json.loads((tmp_path / "s" / "runs" / run.run_id / "run.json").read_text())
    assert rec["label"].endswith("[:2]") and rec["inputs"]["limit"] == 2
    assert run.limited.startswith("Limited run (--limit 2): only the first 2 of 6 texts")
    full = mc.score(
        FIXTURE_MODEL,
        texts,
        prefix_tokens=8,
        suffix_tokens=8,
        policies="full",
        out=tmp_path / "s",
        progress=False,
    )
    assert full.summary.n_windows == 6 and full.run_id != run.run_id and full.limited is None
    assert (
        mc.score(
            FIXTURE_MODEL,
            texts,
            prefix_tokens=8,
            suffix_tokens=8,
            policies="full",
            limit=10,
            progress=False,
        ).limited
        is None
    )  # a limit that cuts nothing is the full run
    doc = mc.Document("In the beginning God created the heaven and the earth. " * 20, name="g")
    d = mc.score(
        FIXTURE_MODEL,
        document=doc,
        stride=4,
        prefix_tokens=8,
        suffix_tokens=8,
        policies="full",
        limit=3,
        progress=False,
    )
    assert d.summary.n_windows == 3 and d.inputs["windows_total"] > 3
    assert limit_note([{"role": "document", "scored_inputs": d.inputs}]).startswith(
        "Limited run (--limit 3): only the first 3 of"
    )


# ------------------------------------------------------------------------------ docs and --help
DEPRECATED = [
    r"--nonmembers\b",
    r"--fpr\b",
    r"--cap-relation\b",
    r"--soundness-relation\b",
    r"--id-column\b",
    r"--score-column\b",
    r"--text-column\b",
    r"(?<![\w-])--quiet\b",
    r"--neighbors[ =]replace(?!-one)\b",
    r'"nonmembers(_run)?"\s*:',
    r"(?<![\w.])(nonmembers|fpr|cap_relation|soundness_relation|id_column|"
    r"score_column|text_column)=",
    r"(?<![\w.-])policy=",
]
# pages that document the renames themselves
RENAME_PAGES = {"renamed-flags.md", "changelog.md"}


def deprecated_spellings(text: str) -> list[str]:
    return [m.group(0) for pat in DEPRECATED for m in re.finditer(pat, text)]


def test_the_deprecated_spelling_scanner_can_fail():
    assert deprecated_spellings("memclaim audit toy --nonmembers c.jsonl --fpr 0.05") == [
        "--nonmembers",
        "--fpr",
    ]
    assert deprecated_spellings('{"members": "m", "nonmembers": "c"}') == ['"nonmembers":']
    assert deprecated_spellings("mc.test(a, b, policy='full')") == ["policy="]
    assert (
        deprecated_spellings(
            "--policy full --neighbors replace-one, policies='full', extraction_policy="
        )
        == []
    )


def test_no_deprecated_spelling_in_docs_readme_or_help():
    """The docs, the README and every command's --help teach the current names only (issue 28
    item 5: getting started, docs/inputs.md and `audit --help` taught --nonmembers, --fpr and the
    JSON key nonmembers)."""
    import importlib.util

    sources = {"README.md": (ROOT / "README.md").read_text(encoding="utf-8")}
    for p in sorted((ROOT / "docs").glob("*.md")):
        if p.name not in RENAME_PAGES:
            sources[f"docs/{p.name}"] = p.read_text(encoding="utf-8")
    spec = importlib.util.spec_from_file_location(
        "mkdocs_reference", ROOT / "tools" / "mkdocs_reference.py"
    )
    ref = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ref)
    for name, _, text in ref.commands():
        sources[f"{name} --help"] = text
    found = {where: hits for where, text in sources.items() if (hits := deprecated_spellings(text))}
    assert not found, found


def test_version_is_the_one_the_docs_and_the_changelog_name():
    import subprocess
    import sys

    r = subprocess.run(
        [sys.executable, "-m", "memclaim.cli", "--version"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**__import__("os").environ, "PYTHONPATH": str(ROOT / "src")},
    )
    assert r.returncode == 0 and r.stdout.strip() == f"memclaim, version {mc.__version__}"
    major_minor = ".".join(mc.__version__.split(".")[:2])
    assert f"# Flags renamed in {major_minor}" in (ROOT / "docs" / "renamed-flags.md").read_text()
    assert f"## [{mc.__version__}] - " in (ROOT / "CHANGELOG.md").read_text()
    import tomllib

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" in pyproject["project"]["dynamic"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "memclaim._version.__version__"
    }


def test_output_gaps_tool_times_a_commands_silences():
    """tools/output_gaps.py (how `make demo`'s time to first progress and longest silence were
    measured) times each line of both streams."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("output_gaps", ROOT / "tools" / "output_gaps.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    res = tool.run(
        [
            sys.executable,
            "-c",
            "import sys, time; print('a', flush=True); time.sleep(0.6); "
            "print('b', file=sys.stderr, flush=True)",
        ]
    )
    assert res["returncode"] == 0 and res["lines"] == 2
    assert [x["stream"] for x in res["timeline"]] == ["out", "err"]
    assert res["longest_silence_s"] >= 0.5 and res["first_line_s"] < res["total_s"]
