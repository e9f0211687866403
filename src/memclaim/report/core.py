"""Reports: one document model rendered three ways (report.json, report.md, report.html).

- ``report.json`` has a versioned schema (``schemas/report-1.1.schema.json``, checked by
  :func:`memclaim.report.schema.validate_report`): ``schema_version``, ``memclaim_version``,
  ``command``, ``created_utc``, ``invocation`` (the command line or the Python call that made
  it, :func:`invoked_as`), ``procedure`` (the dict the caller gives), ``inputs`` (path,
  role, sha256 of each input file), ``results`` (every number, from the results' ``to_dict()``),
  ``statements`` (what the claim does and does not mean, in words).
- ``report.md`` and a self-contained ``report.html`` (inline CSS, figures embedded as PNG) are
  rendered from the same :class:`Doc` by Jinja2 templates (``templates/``). Numbers are written
  for readers by :mod:`memclaim.report.numbers` (one convention; never a Python repr). Every
  piece of text is escaped by the renderer (``html.escape``; CommonMark escapes only where a
  character would become markup), so text from the user's data can never inject markup.
- report.md and report.html end with the same provenance line: memclaim's version, the date and
  the command line (or Python call), so that a colleague can rerun it from the report alone.
- Each figure (a matplotlib Figure in :mod:`memclaim.report.style`) is also written beside the
  report as ``NAME.png`` (200 dpi) and ``NAME.pdf``, linked from report.md and report.html.
- The headline's style says what kind of result it is (:data:`CALLOUTS`): a null result is
  never drawn in the success style.
- :func:`write_report` renders everything in memory first, stages every file (the three
  reports and every figure) as a temporary file beside its target, and only then renames them
  into place (:func:`memclaim.fsutil.write_files`): a failure while writing (a full disk) leaves
  the previous report whole, and no partial or mixed report is left behind. A file of the same
  name that memclaim did not write is never overwritten.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as _dt
import html
import json
import os
import re
import shlex
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from .._version import __version__
from ..errors import InputError
from ..fsutil import sha256_file, write_files
from ..jsonutil import dumps, to_jsonable
from . import numbers, style

SCHEMA_VERSION = "1.1"  # 1.1: + "invocation" (1.0's schema is kept beside it)
REPORT_FILES = ("report.json", "report.md", "report.html")


# --------------------------------------------------------------------------- invocation
# How the report being made was asked for: the CLI records its command line, the public API its
# call (memclaim.api); whatever renders a report reads it here, so no report function needs a
# parameter for it. The outermost call wins: `memclaim population` calls the API, and its
# reports name the command line.
_INVOCATION: ContextVar[dict | None] = ContextVar("memclaim_invocation", default=None)


def invocation_text(inv: dict | None) -> str:
    """One line for a reader: ``memclaim ARGS`` (shell-quoted) or the Python call.

    >>> from memclaim.report.core import invocation_text
    >>> invocation_text({"argv": ["population", "toy", "--alpha", "0.1", "--controls-description", "new verses"]})
    "memclaim population toy --alpha 0.1 --controls-description 'new verses'"
    >>> invocation_text({"api": "memclaim.budget(p=2.5e-05, n=100000)"})
    'memclaim.budget(p=2.5e-05, n=100000)'
    """
    if not inv:
        return ""
    if "argv" in inv:
        return shlex.join(["memclaim", *map(str, inv["argv"])])
    return str(inv.get("api") or inv.get("text") or "")


@contextlib.contextmanager
def invoked_as(inv: dict | None, *, replace: bool = False) -> Iterator[dict | None]:
    """Inside the block, reports record ``inv`` as their invocation ({"argv": [...], "cwd": ...}
    or {"api": "memclaim.f(...)"}); an invocation already recorded by an outer call is kept
    unless ``replace`` (a result re-rendered later puts its own back). Yields the one in force.

    >>> from memclaim.report.core import current_invocation, invoked_as
    >>> with invoked_as({"argv": ["budget", "--p", "1e-5"]}):
    ...     with invoked_as({"api": "memclaim.budget(p=1e-05)"}):
    ...         current_invocation()["argv"]
    ['budget', '--p', '1e-5']
    """
    if inv is not None and (replace or _INVOCATION.get() is None):
        inv = dict(inv)
        inv.setdefault("text", invocation_text(inv))
        token = _INVOCATION.set(inv)
        try:
            yield inv
        finally:
            _INVOCATION.reset(token)
    else:
        yield _INVOCATION.get()


def current_invocation() -> dict | None:
    """The invocation reports record now (:func:`invoked_as`), None outside a recorded call.

    >>> from memclaim.report.core import current_invocation
    >>> current_invocation() is None
    True
    """
    return _INVOCATION.get()


def _now_utc() -> str:
    return _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat()


def provenance_line(created_utc: str, inv: dict | None = None) -> str:
    """The line every report ends with: version, date and how it was made.

    >>> from memclaim.report.core import provenance_line
    >>> provenance_line("2026-01-02T03:04:05+00:00", {"argv": ["budget", "--p", "1e-5"]})
    'Made by memclaim 0.2.0 on 2026-01-02 03:04 UTC with: memclaim budget --p 1e-5'
    """
    when = created_utc.replace("T", " ")[:16] + " UTC"
    how = invocation_text(inv)
    return f"Made by memclaim {__version__} on {when}" + (f" with: {how}" if how else "")


# --------------------------------------------------------------------------- document model
@dataclass
class Table:
    headers: Sequence[str]
    rows: Sequence[Sequence[Any]]
    caption: str = ""


@dataclass
class Figure:
    """A figure of a report: its caption, PNG bytes (embedded in report.html) and the files
    written beside the report (``{stem}.png`` at 200 dpi and ``{stem}.pdf``)."""

    caption: str
    png: bytes
    alt: str = ""
    stem: str = ""
    files: dict = field(default_factory=dict)


@dataclass
class HeatText:
    """A document's characters coloured by margin bin (the HTML heatmap of [EM] Fig. 18)."""

    text: str
    bins: Sequence[
        int
    ]  # one small integer per character: -1 uncovered, 0 below tau, 1.. margin bins
    legend: Sequence[tuple[str, str]]  # (css class suffix, label)
    truncated_from: int | None = None


# Callout kinds: how a headline looks says what kind of result it is. A null result ("no
# claim", "nothing cleared tau") is never drawn in the success ("claim") style.
CALLOUTS = {
    "claim": "Claim",  # a certified positive result (green)
    "null": "No claim",  # a valid test that claimed nothing (neutral grey)
    "warn": "Not possible",  # no claim was possible at all (vermillion)
    "result": "Result",  # a computed quantity, not a claim (blue)
    "caution": "Caution",  # read the result with this in mind (a --limit run) (amber)
    "note": "Note",
}


@dataclass
class Doc:
    title: str
    blocks: list = field(default_factory=list)

    def h2(self, text):
        self.blocks.append(("h2", str(text)))
        return self

    def h3(self, text):
        self.blocks.append(("h3", str(text)))
        return self

    def p(self, text):
        self.blocks.append(("p", str(text)))
        return self

    def callout(self, text, kind="note"):
        if kind not in CALLOUTS:
            raise InputError(f"unknown callout kind {kind!r}", hint=f"one of {', '.join(CALLOUTS)}")
        self.blocks.append(("callout", str(text), kind))
        return self

    def bullets(self, items):
        self.blocks.append(("ul", [str(i) for i in items]))
        return self

    def table(self, headers, rows, caption=""):
        self.blocks.append(
            (
                "table",
                Table(list(map(str, headers)), [[_cell(c) for c in r] for r in rows], caption),
            )
        )
        return self

    def figure(self, caption, fig, alt="", *, name: str | None = None):
        """Add a figure: a matplotlib Figure (drawn in :mod:`memclaim.report.style`, written beside
        the report as ``name.png`` at 200 dpi and ``name.pdf``) or PNG bytes (PNG only).
        ``None`` adds nothing (figures switched off)."""
        if fig is None:
            return self
        n = sum(1 for b in self.blocks if b[0] == "figure") + 1
        stem = _stem(name or f"figure-{n}")
        if stem in {b[1].stem for b in self.blocks if b[0] == "figure"}:
            raise InputError(
                f"two figures of one report are both named {stem!r}",
                hint="give each figure its own name",
            )
        if isinstance(fig, (bytes, bytearray)):
            files = {f"{stem}.png": bytes(fig)}
        else:
            files = style.figure_files(fig, stem)
        self.blocks.append(
            ("figure", Figure(str(caption), files[f"{stem}.png"], str(alt or caption), stem, files))
        )
        return self

    def links(self, items):
        """A list of links to files beside this one: (text, relative href, description) each."""
        self.blocks.append(("links", [(str(t), str(href), str(d)) for t, href, d in items]))
        return self

    def heat(self, heat: HeatText):
        self.blocks.append(("heat", heat))
        return self

    @property
    def figure_files(self) -> dict[str, bytes]:
        out: dict[str, bytes] = {}
        for b in self.blocks:
            if b[0] == "figure":
                out.update(b[1].files)
        return out


def _stem(name: str) -> str:
    s = re.sub(r"[^A-Za-z0-9_-]+", "-", str(name)).strip("-")
    if not s or s.lower().startswith("report"):
        raise InputError(
            f"figure name {name!r} is not a usable file name",
            hint="letters, digits, '-' and '_', not starting with 'report'",
        )
    return s


def _cell(c) -> str:
    return numbers.value(c)


def fmt_num(x: object, digits: int = 4) -> str:
    """A plain number for a reader (:func:`memclaim.report.numbers.num`).

    >>> from memclaim.report.core import fmt_num
    >>> fmt_num(0.4621171572), fmt_num(0.4621171572, digits=2)
    ('0.4621', '0.46')
    """
    return numbers.num(x, digits)


sci_from_log10 = numbers.sci_from_log10
pct = numbers.pct


# --------------------------------------------------------------------------- untrusted text
# Characters that display as nothing or change how the text around them displays: C0/C1
# controls (NUL, ESC, ...), DEL, bidirectional embeddings, overrides and isolates (an id
# 'invoice\u202etxt.exe' shows as 'invoiceexe.txt'), directional marks and zero-width
# characters. Reports show each one visibly as its code point, so an id cannot be spoofed on
# screen; report.json keeps the exact string.
_INVISIBLE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u115f\u1160\u180e\u200b-\u200f\u202a-\u202e"
    "\u2060-\u206f\u3164\ufeff\ufff9-\ufffb\U000e0000-\U000e007f]"
)
ID_DISPLAY_CHARS = 64  # longer ids are shortened in report.md/html (the whole id is in report.json)


def visible(text: object) -> str:
    """``text`` with every control, bidirectional-formatting and zero-width character replaced by
    a visible ``⟨U+XXXX⟩`` (newlines and tabs kept).

    >>> from memclaim.report.core import visible
    >>> visible("invoice" + chr(0x202E) + "txt.exe")  # a right-to-left override, shown
    'invoice⟨U+202E⟩txt.exe'
    """
    return _INVISIBLE.sub(lambda m: f"⟨U+{ord(m.group()):04X}⟩", str(text))


def _visible_1(text: str) -> str:
    """As :func:`visible` but one character for one (keeps a heatmap's per-character colours
    aligned): C0 controls and DEL as their Control Pictures (␀, ␛, ␡), the rest as U+FFFD."""

    def one(m):
        c = ord(m.group())
        if c < 0x20:
            return chr(0x2400 + c)
        return "\u2421" if c == 0x7F else "\ufffd"

    return _INVISIBLE.sub(one, text)


def short_id(value: object, limit: int = ID_DISPLAY_CHARS) -> str:
    """An id for display: control characters shown (:func:`visible`) and, past ``limit``
    characters, shortened to its start and end with its length ('abc…xyz (5,000 chars)'), so one
    hostile id cannot push every other column off the page. report.json keeps the full id.

    >>> from memclaim.report.core import short_id
    >>> short_id("doc-1"), short_id("x" * 5000, limit=12)
    ('doc-1', 'xxxxxxxx…xxx (5,000 chars)')
    """
    s = visible(value)
    if len(s) <= limit:
        return s
    head, tail = (2 * limit) // 3, limit // 4
    return f"{s[:head]}…{s[-tail:]} ({len(str(value)):,} chars)"


# --------------------------------------------------------------------------- escaping
# CommonMark/GFM escaping of literal text: escape a character only where it could start markup,
# so '[0.21%, 38.5%]', 'K = floor(alpha (N+1))' and 'alpha_N' read as written in the .md source.
# (No library escapes for CommonMark; markdown-it-py only parses. The test renders the escaped
# text with markdown-it-py and checks it comes back literally.)
_MD_ALWAYS = re.compile(r"([\\`*~<$])")  # code, emphasis, strike, HTML/autolinks, math
_MD_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")  # intraword _ never emphasizes
_MD_LINK_CLOSE = re.compile(r"\](?=[(\[:])")  # ](url), ][ref], [label]: definitions
_MD_ENTITY = re.compile(r"&(?=#?[A-Za-z0-9]+;)")  # &amp; &#123; would be decoded
_MD_LINE_START = re.compile(
    r"^( {0,3})((?:[-+*]|\d{1,9}[.)]|#{1,6})(?=[ \t]|$)|>|\[)", re.MULTILINE
)
_MD_BREAK_LINE = re.compile(r"^( {0,3})([-=_*])(?=[-=_* \t]*$)", re.MULTILINE)


def md_escape(text: str, *, inline: bool = False) -> str:
    r"""Escape text for CommonMark (and GFM tables) so that it renders literally, escaping only
    the characters that would otherwise become markup there. ``inline`` (table cells, headings,
    list items) also folds newlines into spaces and escapes ``|``.

    >>> from memclaim.report.core import md_escape
    >>> print(md_escape("a *b* | alpha_N", inline=True))
    a \*b\* \| alpha_N
    """
    s = visible(text)
    if inline:
        s = " ".join(s.splitlines())
    # leading blanks would make an indented code block (and render as nothing in HTML anyway)
    s = "\n".join(line.lstrip(" \t") for line in s.split("\n"))
    s = _MD_ALWAYS.sub(r"\\\1", s)
    s = _MD_UNDERSCORE.sub(r"\\_", s)
    s = _MD_LINK_CLOSE.sub(r"\\]", s)
    s = _MD_ENTITY.sub(r"\\&", s)
    if inline:
        s = s.replace("|", "\\|")
        s = re.sub(r"#+\s*$", lambda m: "\\" + m.group(), s)  # a heading's closing #s would vanish
    s = _MD_BREAK_LINE.sub(lambda m: m.group(1) + "\\" + m.group(2), s)
    s = _MD_LINE_START.sub(_line_start, s)
    return s


def _line_start(m) -> str:
    lead, tok = m.group(1), m.group(2)
    if tok[0].isdigit():  # '1.' / '2)' starts an ordered list
        return lead + tok[:-1] + "\\" + tok[-1]
    return lead + "\\" + tok


def h(text: object) -> str:
    """``text`` escaped for HTML (quotes included), its invisible characters shown (:func:`visible`).

    >>> from memclaim.report.core import h
    >>> h('<b title="x">')
    '&lt;b title=&quot;x&quot;&gt;'
    """
    return html.escape(visible(text), quote=True)


# --------------------------------------------------------------------------- renderers
# report.md and report.html come from Jinja2 templates (templates/report.{md,html}.j2); the
# document model above is their only input, and every piece of text passes through an escaping
# filter (HTML: html.escape after visible(); Markdown: md_escape), so text from the user's data
# can never inject markup.
_ENV = {}


def _env(kind: str):
    if kind not in _ENV:
        import jinja2
        from markupsafe import Markup

        env = jinja2.Environment(
            loader=jinja2.PackageLoader("memclaim.report", "templates"),
            autoescape=(kind == "html"),
            trim_blocks=True,
            lstrip_blocks=True,
            keep_trailing_newline=True,
            undefined=jinja2.StrictUndefined,
        )
        env.filters["h"] = lambda t: Markup(h(t))
        env.filters["br"] = lambda t: Markup(str(t).replace("\n", "<br>"))
        env.filters["b64"] = lambda b: base64.b64encode(b).decode("ascii")
        env.filters["md"] = lambda t: md_escape(t)
        env.filters["mdi"] = lambda t: md_escape(t, inline=True)
        _ENV[kind] = env
    return _ENV[kind]


def _blocks(doc: Doc, *, html_out: bool) -> list[dict]:
    out, nfig = [], 0
    for b in doc.blocks:
        kind = b[0]
        if kind in ("h2", "h3", "p"):
            out.append({"kind": kind, "text": b[1]})
        elif kind == "callout":
            out.append({"kind": kind, "text": b[1], "style": b[2], "label": CALLOUTS[b[2]]})
        elif kind == "ul":
            out.append({"kind": kind, "entries": b[1]})
        elif kind == "links":
            out.append(
                {
                    "kind": kind,
                    "links": [
                        {"text": t, "href": _safe_href(href), "description": d}
                        for t, href, d in b[1]
                    ],
                }
            )
        elif kind == "table":
            out.append({"kind": kind, "table": b[1]})
        elif kind == "figure":
            nfig += 1
            out.append({"kind": kind, "figure": b[1], "number": nfig})
        elif kind == "heat":
            d = {"kind": kind, "heat": b[1]}
            if html_out:
                from markupsafe import Markup

                d["html"] = Markup(_heat_html(b[1]))
            out.append(d)
    return out


def _safe_href(href: str) -> str:
    """A relative link to a file beside the report: no scheme (javascript:, data:), no absolute path."""
    h_ = str(href)
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", h_) or h_.startswith(("/", "\\")):
        raise InputError(
            f"link {h_!r} is not a relative path", hint="link to a file beside the report"
        )
    return h_


def render_markdown(doc: Doc, *, provenance: str = "") -> str:
    """The report as Markdown (CommonMark with GFM tables): ``doc``'s blocks in order, every text escaped.

    >>> from memclaim.report.core import Doc, render_markdown
    >>> print(render_markdown(Doc("Claims").p("2 of 3 candidates clear tau.").table(["K", "rate"], [[1, 0.5]])))
    # Claims
    <BLANKLINE>
    2 of 3 candidates clear tau.
    <BLANKLINE>
    | K | rate |
    |---|---|
    | 1 | 0.5 |
    """
    text = (
        _env("md")
        .get_template("report.md.j2")
        .render(doc=doc, blocks=_blocks(doc, html_out=False), provenance=provenance)
    )
    return re.sub(r"\n{3,}", "\n\n", text).rstrip() + "\n"


def _css() -> str:
    try:
        return resources.files("memclaim.report").joinpath("report.css").read_text(encoding="utf-8")
    except (FileNotFoundError, OSError):  # pragma: no cover - package data missing
        return "body{font-family:sans-serif;max-width:60em;margin:auto}"


def _heat_html(ht: HeatText) -> str:
    parts = ['<div class="heat-legend">']
    for cls, label in ht.legend:
        parts.append(f'<span class="h{h(cls)}">{h(label)}</span> ')
    parts.append('</div><pre class="heattext">')
    text, bins = ht.text, list(ht.bins)
    i = 0
    while i < len(text):
        j = i
        while j < len(text) and bins[j] == bins[i]:
            j += 1
        cls = "u" if bins[i] < 0 else str(bins[i])
        parts.append(
            f'<span class="h{cls}">{html.escape(_visible_1(text[i:j]), quote=True)}</span>'
        )
        i = j
    parts.append("</pre>")
    if ht.truncated_from:
        parts.append(
            f'<p class="small">Showing the first {len(text):,} of {ht.truncated_from:,} characters; '
            "the strip figure covers the whole document.</p>"
        )
    return "".join(parts)


def render_html(doc: Doc, *, provenance: str = "") -> str:
    """The report as one self-contained HTML page (its CSS inline, figures as PNG data URIs).

    >>> from memclaim.report.core import Doc, render_html
    >>> page = render_html(Doc("Claims").p("2 of 3 candidates clear tau."))
    >>> page.startswith("<!DOCTYPE html>"), "2 of 3 candidates clear tau." in page
    (True, True)
    """
    from markupsafe import Markup

    text = (
        _env("html")
        .get_template("report.html.j2")
        .render(
            doc=doc,
            blocks=_blocks(doc, html_out=True),
            css=Markup(_css()),
            version=__version__,
            schema_version=SCHEMA_VERSION,
            provenance=provenance,
        )
    )
    return text.rstrip() + "\n"


def _scoped_css() -> str:
    """report.css with every rule scoped to ``.memclaim-result`` (a notebook cell must not restyle
    the notebook's own tables and headings); ``body`` becomes the container itself."""
    out = []
    for rule in re.findall(r"([^{}]+)\{([^}]*)\}", _css()):
        sel = ", ".join(
            ".memclaim-result" if x.strip() == "body" else f".memclaim-result {x.strip()}"
            for x in rule[0].split(",")
        )
        body = (
            rule[1]
            .replace("max-width: 62em;", "max-width: 60em;")
            .replace("margin: 2em auto;", "margin: .5em 0;")
        )
        out.append(f"{sel} {{{body}}}")
    out.append(".memclaim-result .memclaim-title { font-weight: 700; font-size: 1.1em; }")
    return "\n".join(out)


def render_fragment(doc: Doc, *, provenance: str = "") -> str:
    """``doc`` as an HTML fragment for a notebook cell (a result's ``_repr_html_``): the same
    blocks, from the same template, as report.html, under its own scoped style.

    >>> from memclaim.report.core import Doc, render_fragment
    >>> html_text = render_fragment(Doc("Population test").callout("2 of 3 claimed.", "claim"))
    >>> html_text.startswith('<div class="memclaim-result">'), "2 of 3 claimed." in html_text
    (True, True)
    """
    from markupsafe import Markup

    text = (
        _env("html")
        .get_template("fragment.html.j2")
        .render(
            doc=doc,
            blocks=_blocks(doc, html_out=True),
            css=Markup(_scoped_css()),
            provenance=provenance,
        )
    )
    return text.strip() + "\n"


# --------------------------------------------------------------------------- json + writing
def input_record(path: str | Path, *, role: str) -> dict:
    """{role, path, sha256, bytes} of an input file (the hash ties the report to its inputs).

    >>> import pathlib, tempfile
    >>> from memclaim.report.core import input_record
    >>> with tempfile.TemporaryDirectory() as d:
    ...     f = pathlib.Path(d, "scores.jsonl")
    ...     _ = f.write_bytes(b"abc")
    ...     r = input_record(f, role="candidates")
    >>> r["role"], r["bytes"], r["sha256"][:12]
    ('candidates', 3, 'ba7816bf8f01')
    """
    p = Path(path)
    if not p.is_file():
        raise InputError(f"input file {str(p)!r} does not exist", hint="check the path")
    return {"role": role, "path": str(p), "sha256": sha256_file(p), "bytes": p.stat().st_size}


def build_json(
    *,
    command: str,
    procedure: dict | None,
    inputs: Sequence[dict],
    results: dict,
    statements: Sequence[str] = (),
    created_utc: str | None = None,
    invocation: dict | None = None,
) -> str:
    """report.json's text: schema and memclaim versions, the command, when and how it was made
    (``invocation``, default: :func:`current_invocation`; left out when there is none), its
    procedure record, the inputs (with their hashes), the results and the plain-language
    statements; ``created_utc`` defaults to now.

    >>> import json
    >>> from memclaim.report.core import build_json
    >>> text = build_json(command="test", procedure=None, inputs=[], results={"k": 1},
    ...                   created_utc="2025-01-01T00:00:00+00:00")
    >>> d = json.loads(text)
    >>> d["command"], d["results"], sorted(d)
    ('test', {'k': 1}, ['command', 'created_utc', 'inputs', 'memclaim_version', 'procedure', 'results', 'schema_version', 'statements'])
    """
    if created_utc is None:
        created_utc = _now_utc()
    if invocation is None:
        invocation = current_invocation()
    payload = {
        "schema_version": SCHEMA_VERSION,
        "memclaim_version": __version__,
        "command": command,
        "created_utc": created_utc,
        **({"invocation": to_jsonable(invocation)} if invocation else {}),
        "procedure": to_jsonable(procedure or {}),
        "inputs": to_jsonable(list(inputs)),
        "results": to_jsonable(results),
        "statements": list(statements),
    }
    return dumps(payload, indent=1, sort_keys=False) + "\n"


@dataclass(frozen=True)
class ReportBundle:
    json_text: str
    markdown: str
    html: str
    figures: dict = field(default_factory=dict)  # {file name: bytes}: each figure's PNG and PDF


def render(
    doc: Doc,
    *,
    command: str,
    procedure: dict | None,
    inputs: Sequence[dict],
    results: dict,
    statements: Sequence[str] = (),
) -> ReportBundle:
    """Render all three files in memory (nothing is written).

    >>> from memclaim.report.core import Doc, render
    >>> b = render(Doc("Claims").p("text"), command="test", procedure=None, inputs=[], results={"k": 1})
    >>> '"command": "test"' in b.json_text, b.markdown.splitlines()[0], b.figures
    (True, '# Claims', {})
    """
    created, inv = _now_utc(), current_invocation()
    line = provenance_line(created, inv)
    return ReportBundle(
        build_json(
            command=command,
            procedure=procedure,
            inputs=inputs,
            results=results,
            statements=statements,
            created_utc=created,
            invocation=inv,
        ),
        render_markdown(doc, provenance=line),
        render_html(doc, provenance=line),
        doc.figure_files,
    )


def _memclaim_report(path: Path) -> bool:
    """Whether ``path`` (report.*, or a figure beside them) belongs to a memclaim report: its
    folder's report.json is one (schema, memclaim version and command recorded)."""
    try:
        d = json.loads((path.parent / "report.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return (
        isinstance(d, dict) and "schema_version" in d and "memclaim_version" in d and "command" in d
    )


# The names of the figures reports write beside report.* (Doc.figure's ``name``, or figure-N).
_FIGURE_FILE = re.compile(
    r"^(roc|disagreement|coverage|binary|alpha-sweep|budget(-\d+)?|heat-\d+|figure-\d+)"
    r"\.(png|pdf)$"
)


def check_report_folder(out_dir: str | Path) -> None:
    """Refuse, before any work, a folder a report could not be written into: it holds a report
    file (report.json, .md, .html) or a report figure (``coverage.png``, ...) that memclaim did
    not write (the folder's report.json is not a memclaim report), or one of them is a folder or
    a link. :func:`write_report` refuses the same at the end; a command that scores first asks
    here, so that nothing is scored (or stored) for a report it then cannot write.

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> check_report_folder(d)
    >>> _ = (d / "report.html").write_text("<p>someone else's</p>")
    >>> check_report_folder(d)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    memclaim.errors.InputError: '.../report.html' exists and memclaim did not write it; memclaim does not overwrite it
      fix: choose another --out folder, or move the file away
    """
    out = Path(out_dir)
    if not out.is_dir():
        return
    ours = _memclaim_report(out / "report.json")
    figures = sorted(e for e in out.iterdir() if _FIGURE_FILE.match(e.name))
    for entry in [out / name for name in REPORT_FILES if os.path.lexists(out / name)] + figures:
        if entry.is_dir() or entry.is_symlink():
            raise InputError(
                f"{str(entry)!r} is a folder or a link, not a file memclaim can replace",
                hint="choose another --out folder",
            )
        if not ours:
            raise InputError(
                f"{str(entry)!r} exists and memclaim did not write it; memclaim does not overwrite it",
                hint="choose another --out folder, or move the file away",
            )


def write_report(
    out_dir: str | Path, bundle: ReportBundle, *, extra_files: dict | None = None
) -> dict:
    """Write report.json, report.md, report.html (and ``extra_files``, ``{name: bytes}``, e.g.
    figures) into ``out_dir`` as one change (:func:`memclaim.fsutil.write_files`): every file
    is staged first and then renamed into place, so a failure (a full disk) leaves the previous
    report whole; a file memclaim did not write is never overwritten.

    >>> import os, tempfile
    >>> from memclaim.report.core import Doc, render, write_report
    >>> b = render(Doc("Claims").p("text"), command="test", procedure=None, inputs=[], results={})
    >>> with tempfile.TemporaryDirectory() as d:
    ...     _ = write_report(d, b)
    ...     sorted(os.listdir(d))
    ['report.html', 'report.json', 'report.md']
    """
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise InputError(
            f"report folder {str(out)!r} exists and is not a folder",
            hint="pass a folder path to --out",
        )
    files = {
        name: text.encode("utf-8")
        for name, text in zip(REPORT_FILES, (bundle.json_text, bundle.markdown, bundle.html))
    }
    for name, data in {**bundle.figures, **(extra_files or {})}.items():
        files[name] = data if isinstance(data, bytes) else str(data).encode("utf-8")
    try:
        paths = write_files(out, files, owned=_memclaim_report)
    except OSError as exc:
        import errno

        full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
        raise InputError(
            f"{'disk full while writing' if full else 'cannot write'} the report in {str(out)!r}: "
            f"{exc.strerror or exc}; the previous report there (if any) is unchanged",
            hint="free some space and re-run" if full else "choose a --out folder you can write",
        ) from None
    return {k.split(".")[1]: str(v) for k, v in paths.items() if k in REPORT_FILES}
