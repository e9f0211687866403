"""Report rendering: escaping of user text, strict versioned JSON, all-or-nothing writes."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from memclaim.report import core
from memclaim.report.core import (
    Doc,
    HeatText,
    md_escape,
    render,
    render_html,
    render_markdown,
    write_report,
)

NASTY = "<img src=x onerror=alert(1)> **bold** _it_ [link](http://e.vil) | pipe `code` # h\n- item\n1. x & y"


def _unescaped(ch: str, s: str) -> bool:
    return re.search(r"(?<!\\)" + re.escape(ch), s) is not None


def _md_html(md: str) -> str:
    """CommonMark + GFM tables and strikethrough, as GitHub and mkdocs render report.md."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(md)


def _literal(text: str, *, inline: bool = False) -> bool:
    """Whether md_escape(text) renders as one paragraph holding exactly ``text`` (no markup)."""
    import html as _html

    out = _md_html(md_escape(text, inline=inline)).strip()
    tags = set(re.findall(r"</?([a-z0-9]+)", out))
    if not tags <= {"p"}:
        return False
    got = _html.unescape(re.sub(r"</?p>", "", out))
    want = " ".join(text.splitlines()) if inline else text
    return " ".join(got.split()) == " ".join(want.split())


def test_markdown_escaping_renders_literally():
    """Issue 15 item 6: the escaped text renders (markdown-it-py, CommonMark + GFM) as exactly the
    text given, and only characters that would become markup are escaped: brackets, parentheses,
    intraword underscores and numbers read as written in report.md."""
    s = md_escape(NASTY)
    assert _literal(NASTY) and _literal(NASTY, inline=True)
    assert "\\*\\*bold\\*\\*" in s and "\\<img" in s and "\n\\- item" in s and "\n1\\. x" in s
    inline = md_escape("a\nb | c", inline=True)
    assert "\n" not in inline and "\\|" in inline
    for plain in (
        "65.5% of 10.2",
        "G = 8.33% [0.211%, 38.5%]",
        "K = floor(alpha (N+1))",
        "alpha_N = 1/12",
        "([EM] §3)",
        "Beta(1, 11)",
        "-8.12%",
        "a + b = c!",
        "x # y",
    ):
        assert md_escape(plain) == plain, plain  # nothing to escape: left as written
    for hostile in (
        "[x](javascript:alert(1))",
        "![i](x.png)",
        "[a]: http://e.vil",
        "&amp; &#65;",
        "~~gone~~",
        "# heading",
        "> quote",
        "---",
        "***",
        "___",
        "    code",
        "<http://x>",
        "a\n=\nb",
        "[ ] task",
        "1) one",
        "+ plus",
        "_a_ b",
        "a*b*c",
        "`x`",
        "\\*",
        "$x$",
    ):
        assert _literal(hostile) and _literal(hostile, inline=True), hostile


def test_markdown_escaping_property():
    """Any text over markup characters renders literally (hypothesis; deterministic, no
    false alarms: a failure is a real escaping bug)."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    alphabet = st.sampled_from(
        list("ab1 .-+*_=#>[]()!&;<`~|\\$:") + ["\n", "http://", "&amp;", "    "]
    )

    @settings(max_examples=300, deadline=None, derandomize=True)
    @given(st.lists(alphabet, max_size=24).map("".join))
    def check(t):
        if t.strip():
            assert _literal(t, inline=True), repr(t)
            assert _literal(t.replace("\n", " ")), repr(t)

    check()


def test_html_and_markdown_escape_every_user_text():
    doc = Doc(f"title {NASTY}")
    doc.h2(NASTY).p(NASTY).callout(NASTY, "warn").bullets([NASTY]).table(
        [NASTY], [[NASTY]], caption=NASTY
    )
    doc.heat(HeatText("<b>x</b>", [1, 1, 1, 0, 0, 0, -1, -1], [("1", "<legend>")]))
    html = render_html(doc)
    assert "<img src=x" not in html and "<b>" not in html and "<legend>" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html and '"h1">&lt;b&gt;</span>' in html
    md = render_markdown(doc)
    for ch in ("<", "`"):
        assert not _unescaped(ch, md), ch
    assert "[link\\](http" in md  # the link cannot form
    assert "<a " not in _md_html(md) and "<img" not in _md_html(md) and "<code>" not in _md_html(md)
    assert (
        md.count("\\| pipe") == 6
    )  # escaped in every inline block: title, heading, item, caption, header, cell
    assert "**bold**" not in md.replace("**Warning:**", "").replace("**Not possible:**", "")
    assert md.count("\\*\\*bold\\*\\*") == 8


def test_json_is_strict_and_versioned():
    doc = Doc("t").p("x")
    b = render(
        doc,
        command="unit",
        procedure={"policy": "full", "nested": {"a": 1}},
        inputs=[{"role": "r", "path": "p", "sha256": "0" * 64}],
        results={
            "inf": math.inf,
            "ninf": -math.inf,
            "nan": math.nan,
            "arr": np.array([1.0, -np.inf]),
        },
        statements=["s"],
    )
    d = json.loads(
        b.json_text, parse_constant=lambda c: pytest.fail(f"non-strict JSON constant {c}")
    )
    assert d["schema_version"] == core.SCHEMA_VERSION and d["command"] == "unit"
    assert d["results"]["inf"] == "inf" and d["results"]["arr"] == [1.0, "-inf"]
    assert d["procedure"]["nested"] == {"a": 1} and d["statements"] == ["s"]
    assert d["created_utc"].endswith("+00:00")


def test_write_is_all_or_nothing(tmp_path, monkeypatch):
    """Issue 12 B8: a report write that fails (disk full while writing report.md) leaves the
    previous report byte-identical and no temporary file; the earlier code deleted it."""
    import errno

    from memclaim import fsutil
    from memclaim.errors import InputError

    b = render(Doc("t").p("x"), command="unit", procedure={}, inputs=[], results={})
    out = tmp_path / "rep"
    paths = write_report(out, b)
    assert sorted(p.name for p in out.iterdir()) == ["report.html", "report.json", "report.md"]
    assert paths["html"].endswith("report.html")
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    real = fsutil._stage

    def full_disk(folder, name, data, staged):
        if name == "report.md":
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(folder, name, data, staged)

    monkeypatch.setattr(fsutil, "_stage", full_disk)
    b2 = render(Doc("new").p("y"), command="unit", procedure={}, inputs=[], results={})
    with pytest.raises(InputError, match="disk full.*previous report there .* is unchanged"):
        write_report(out, b2)
    assert {
        p.name: p.read_bytes() for p in out.iterdir()
    } == before  # old report whole, no temp file
    monkeypatch.setattr(fsutil, "_stage", real)
    write_report(out, b2)  # re-running after the space is freed replaces it
    assert "new" in (out / "report.md").read_text()
    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError, match="not a folder"):
        write_report(tmp_path / "file", b)


def test_report_never_overwrites_a_file_memclaim_did_not_write(tmp_path):
    b = render(Doc("t").p("x"), command="unit", procedure={}, inputs=[], results={})
    mine = tmp_path / "notes"
    mine.mkdir()
    (mine / "report.md").write_text("my own notes")
    from memclaim.errors import InputError

    with pytest.raises(InputError, match="memclaim did not write it"):
        write_report(mine, b)
    assert (mine / "report.md").read_text() == "my own notes"
    assert sorted(p.name for p in mine.iterdir()) == ["report.md"]  # nothing written beside it
    (mine / "report.json").write_text('{"my": "data"}')
    with pytest.raises(InputError, match="memclaim did not write it"):
        write_report(mine, b)
    assert (mine / "report.json").read_text() == '{"my": "data"}'
    # a folder holding a memclaim report is replaced on a re-run
    ours = tmp_path / "ours"
    write_report(ours, b)
    write_report(
        ours, render(Doc("again").p("z"), command="unit", procedure={}, inputs=[], results={})
    )
    assert "again" in (ours / "report.md").read_text()


def test_failure_while_rendering_writes_nothing(tmp_path, monkeypatch):
    from memclaim.api._population import claim_result
    from memclaim.claims.population import population_claim
    from memclaim.report import population as rp

    def boom(*a, **k):
        raise RuntimeError("plot failed")

    monkeypatch.setattr(rp.figures, "alpha_sweep_figure", boom)
    with pytest.raises(RuntimeError, match="plot failed"):
        claim_result(
            candidate_scores=[-1.0, -2.0],
            control_scores=-np.arange(1.0, 40.0),
            alpha="0.1",
            kind="log-prob",
            out=tmp_path / "r",
        )
    assert not (tmp_path / "r").exists()
    assert population_claim  # the claim itself is fine; only rendering failed
