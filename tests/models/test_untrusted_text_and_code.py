"""Issue 12 C14 and C15: text and code from the user's inputs are never trusted.

C14: ids with NUL, bidirectional overrides or other invisible characters are shown visibly in
report.md and report.html (an id cannot pass for another on screen), and a 5,000-character id
is shortened there (report.json keeps every id exactly).
C15: memclaim never runs a model folder's own Python code unless told to (``--trust-remote-code``,
warned about); every transformers loading call says ``trust_remote_code``, and the GGUF
conversion reads only local files.
"""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from memclaim.cli.main import main
from memclaim.errors import ModelLoadError
from memclaim.report.core import ID_DISPLAY_CHARS, Doc, HeatText, render_html, short_id, visible

SPOOF = "report\u202etxt.exe"  # shows as "reportexe.txt" on screen
HOSTILE = ["a\x00b", SPOOF, "zero\u200bwidth", "esc\x1b[2Jape", "L" * 5000, "plain-id"]


def test_visible_and_short_id():
    assert visible("a\x00b\u202ec\u2066d\ufeffe") == "a⟨U+0000⟩b⟨U+202E⟩c⟨U+2066⟩d⟨U+FEFF⟩e"
    assert visible("line one\nline\ttwo") == "line one\nline\ttwo"  # layout characters are kept
    assert visible("café 東京 ﷺ") == "café 東京 ﷺ"  # ordinary text of any script is untouched
    s = short_id("L" * 5000)
    assert len(s) < ID_DISPLAY_CHARS + 30 and "5,000 chars" in s and s.startswith("LLLL")
    assert short_id("short") == "short"


def test_population_report_shows_hostile_ids_visibly_and_keeps_them_exactly_in_json(tmp_path):
    from memclaim.api._population import claim_result

    out = tmp_path / "rep"
    cand = np.array([-1.0, -1.1, -1.2, -1.3, -1.4, -1.5])  # all above every control: all claimed
    ctrl = -np.linspace(20.0, 40.0, 60)
    claim_result(
        candidate_scores=cand,
        control_scores=ctrl,
        alpha="0.1",
        kind="log-prob",
        out=out,
        candidate_ids=HOSTILE,
        control_ids=[f"c{i}" for i in range(60)],
    )
    html = (out / "report.html").read_text(encoding="utf-8")
    md = (out / "report.md").read_text(encoding="utf-8")
    for text in (html, md):
        for bad in ("\x00", "\u202e", "\u200b", "\x1b"):
            assert bad not in text
        for shown in ("⟨U+0000⟩", "⟨U+202E⟩", "⟨U+200B⟩", "⟨U+001B⟩"):
            assert shown in text.replace("\\+", "+")  # Markdown escapes the '+' (it renders as '+')
        assert (
            "L" * 200 not in text and "5,000 chars" in text
        )  # the long id no longer pushes the table apart
        assert "plain-id" in text
    rep = json.loads((out / "report.json").read_text(encoding="utf-8"))
    ids = [c["id"] for c in rep["results"]["population"]["candidates"]]
    assert ids == HOSTILE  # the exact strings, the 5,000 characters included


def test_heatmap_text_shows_control_characters_one_for_one():
    text = "ab\u202ecd\x00e"
    doc = Doc("t").heat(HeatText(text=text, bins=[1, 1, 2, 2, 2, 3, 3], legend=[("1", "x")]))
    html = render_html(doc)
    assert "\u202e" not in html and "\x00" not in html
    assert (
        '<span class="h1">ab</span><span class="h2">\ufffdcd</span><span class="h3">\u2400e</span>'
        in html
    )


# ------------------------------------------------------------------------------------ C15
@pytest.fixture
def custom_code_folder(tmp_path, toy_dir):
    d = tmp_path / "custom"
    shutil.copytree(toy_dir, d)
    cfg = json.loads((d / "config.json").read_text())
    cfg.update(
        model_type="evilgpt",
        auto_map={
            "AutoConfig": "configuration_evil.EvilConfig",
            "AutoModelForCausalLM": "modeling_evil.EvilLM",
        },
    )
    (d / "config.json").write_text(json.dumps(cfg))
    for f in ("configuration_evil.py", "modeling_evil.py"):
        (d / f).write_text(
            f"open({str(tmp_path / 'RAN')!r}, 'w').write('the folder ran its code')\n"
        )
    return d


@pytest.mark.integration
def test_a_folder_that_needs_its_own_code_is_refused_without_the_opt_in(
    custom_code_folder, tmp_path, capsys
):
    from memclaim.models import load_model

    with pytest.raises(ModelLoadError, match="asks to run its own Python code") as e:
        load_model(str(custom_code_folder))
    assert "AutoModelForCausalLM -> modeling_evil.EvilLM" in str(
        e.value
    ) and "--trust-remote-code" in str(e.value)
    # the same folder whose model_type transformers knows would silently load the built-in class: refused too
    cfg = json.loads((custom_code_folder / "config.json").read_text())
    (custom_code_folder / "config.json").write_text(json.dumps({**cfg, "model_type": "gpt2"}))
    with pytest.raises(ModelLoadError, match="auto_map"):
        load_model(str(custom_code_folder))
    assert not (tmp_path / "RAN").exists()
    # the opt-in passes memclaim's check (what the code then does is transformers' and the folder's
    # business; not run here, it would write into the user's HF modules cache), and the CLI warns
    from memclaim.models.loader import _check_folder

    _check_folder(custom_code_folder, False, trust_remote_code=True)
    rc = main(
        [
            "score",
            str(tmp_path / "nosuch-model"),
            "--input",
            str(tmp_path / "none.jsonl"),
            "--out",
            str(tmp_path / "o"),
            "--trust-remote-code",
        ]
    )
    err = capsys.readouterr().err
    assert (
        rc == 2 and "warning: --trust-remote-code runs the Python code in the model folder" in err
    )


@pytest.mark.parametrize(
    "cmd",
    [
        ["score"],
        ["population"],
        ["census"],
        ["audit", "run"],
        ["dp", "baseline"],
        ["train", "finetune"],
        ["train", "unlearn"],
    ],
)
def test_every_command_that_loads_a_model_has_the_opt_in(cmd, capsys):
    assert main([*cmd, "--help"]) == 0
    assert "--trust-remote-code" in capsys.readouterr().out


def _calls(tree):
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "from_pretrained"
        ):
            base = node.func.value
            yield node, (base.id if isinstance(base, ast.Name) else getattr(base, "attr", ""))


def test_every_auto_class_load_in_the_package_says_trust_remote_code():
    """Static: each AutoConfig/AutoTokenizer/AutoModel*.from_pretrained call in src/ passes
    trust_remote_code explicitly (a concrete class such as GPT2LMHeadModel runs no remote code)."""
    import memclaim

    root = Path(memclaim.__file__).parent
    missing = []
    n = 0
    for f in root.rglob("*.py"):
        for node, cls in _calls(ast.parse(f.read_text(encoding="utf-8"))):
            if not cls.startswith("Auto"):
                continue
            n += 1
            if "trust_remote_code" not in {k.arg for k in node.keywords}:
                missing.append(f"{f.relative_to(root)}:{node.lineno} {cls}.from_pretrained")
    assert n >= 8 and not missing, missing


@pytest.mark.integration
def test_loading_the_toy_never_trusts_remote_code(monkeypatch):
    import transformers

    from memclaim.models import load_model

    seen = []
    for cls in (transformers.AutoTokenizer, transformers.AutoModelForCausalLM):
        real = cls.from_pretrained.__func__

        def spy(klass, *a, _real=real, **kw):
            seen.append((klass.__name__, kw.get("trust_remote_code"), kw.get("local_files_only")))
            return _real(klass, *a, **kw)

        monkeypatch.setattr(cls, "from_pretrained", classmethod(spy))
    load_model("toy", load_weights=True)
    assert {s[0] for s in seen} == {"AutoTokenizer", "AutoModelForCausalLM"}
    assert all(t is False and local is True for _, t, local in seen), seen


# ------------------------------------------------------------------- paths read as console markup
@pytest.mark.integration
def test_an_out_path_with_console_markup_is_printed_literally(tmp_path, toy_data, capsys):
    """Issue 12 C12: `--out runs/q[/]z`: the store was written, then rich read the path as markup
    and the success was reported as a failure (a traceback). Paths and labels print literally."""
    recs = [r for r in toy_data["planted"] if r["id"].startswith("member")][:3]
    inp = tmp_path / "p[bold]q.jsonl"
    inp.write_text("".join(json.dumps({"id": r["id"], "text": r["text"]}) + "\n" for r in recs))
    out = tmp_path / "q[/]z"
    rc = main(
        [
            "score",
            "toy",
            "--input",
            str(inp),
            "--prefix-tokens",
            "8",
            "--suffix-tokens",
            "8",
            "--policy",
            "full",
            "--out",
            str(out),
        ]
    )  # with the progress bar, whose label names the input file
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    assert f"-> {out}" in " ".join(cap.out.split()) and "q[/]z" in cap.out
    assert (out / "manifest.json").exists()
