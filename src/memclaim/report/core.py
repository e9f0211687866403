"""Reports: one document model rendered three ways (report.json, report.md, report.html).

- ``report.json`` has a versioned schema: ``schema_version``, ``memclaim_version``, ``command``,
  ``created_utc``, ``procedure`` (the dict the caller gives), ``inputs`` (path, role, sha256 of
  each input file), ``results`` (every number, from the results' ``to_dict()``), ``statements``
  (what the claim does and does not mean, in words).
- ``report.md`` and a self-contained ``report.html`` (inline CSS, plots as base64 PNG) are built
  from the same :class:`Doc`. Every piece of text is escaped by the renderer (``html.escape``;
  Markdown backslash escapes), so text from the user's data can never inject markup.
- :func:`write_report` renders everything in memory first, stages every file (the three
  reports and any figure) as a temporary file beside its target, and only then renames them
  into place (:func:`memclaim.fsutil.write_files`): a failure while writing (a full disk) leaves
  the previous report whole, and no partial or mixed report is left behind. A file of the same
  name that memclaim did not write is never overwritten.
"""
from __future__ import annotations

import base64
import datetime as _dt
import html
import json
import math
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Sequence

from .._version import __version__
from ..errors import InputError
from ..fsutil import sha256_file, write_files
from ..jsonutil import dumps, to_jsonable

SCHEMA_VERSION = "1.0"
REPORT_FILES = ("report.json", "report.md", "report.html")


# --------------------------------------------------------------------------- document model
@dataclass
class Table:
    headers: Sequence[str]
    rows: Sequence[Sequence[Any]]
    caption: str = ""


@dataclass
class Figure:
    caption: str
    png: bytes
    alt: str = ""


@dataclass
class HeatText:
    """A document's characters coloured by margin bin (the HTML heatmap of [EM] Fig. 18)."""

    text: str
    bins: Sequence[int]  # one small integer per character: -1 uncovered, 0 below tau, 1.. margin bins
    legend: Sequence[tuple[str, str]]  # (css class suffix, label)
    truncated_from: int | None = None


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
        self.blocks.append(("callout", str(text), kind))
        return self

    def bullets(self, items):
        self.blocks.append(("ul", [str(i) for i in items]))
        return self

    def table(self, headers, rows, caption=""):
        self.blocks.append(("table", Table(list(map(str, headers)), [[_cell(c) for c in r] for r in rows], caption)))
        return self

    def figure(self, caption, png: bytes | None, alt=""):
        if png is not None:
            self.blocks.append(("figure", Figure(str(caption), png, str(alt or caption))))
        return self

    def heat(self, heat: HeatText):
        self.blocks.append(("heat", heat))
        return self


def _cell(c) -> str:
    if c is None:
        return "–"
    if isinstance(c, float):
        return fmt_num(c)
    return str(c)


def fmt_num(x, digits: int = 4) -> str:
    if x is None:
        return "–"
    try:
        v = float(x)
    except (TypeError, ValueError):
        return str(x)
    if v != v:
        return "nan"
    if v in (float("inf"), float("-inf")):
        return "∞" if v > 0 else "−∞"
    if v == 0:
        return "0"
    if abs(v) >= 1e6 or abs(v) < 1e-4:
        return f"{v:.{digits - 1}e}"
    return f"{v:.{digits}g}"


def sci_from_log10(log10_value: float, digits: int = 3) -> str:
    """'1.29e-27' from log10 p = -26.89 without exponentiating (works far below 1e-308)."""
    v = float(log10_value)
    if v == float("-inf"):
        return "0"
    e = math.floor(v)
    m = 10 ** (v - e)
    if round(m, digits - 1) >= 10:
        m, e = m / 10, e + 1
    return f"{m:.{digits - 1}f}e{e:+03d}" if e != 0 else f"{m:.{digits - 1}f}"


def pct(x, digits: int = 3) -> str:
    if x is None:
        return "–"
    v = 100 * float(x)
    if v != 0 and abs(v) < 1e-3:
        return f"{v:.2e}%"
    return f"{v:.{digits}g}%"


# --------------------------------------------------------------------------- untrusted text
# Characters that display as nothing or change how the text around them displays: C0/C1
# controls (NUL, ESC, ...), DEL, bidirectional embeddings, overrides and isolates (an id
# 'invoice\u202etxt.exe' shows as 'invoiceexe.txt'), directional marks and zero-width
# characters. Reports show each one visibly as its code point, so an id cannot be spoofed on
# screen; report.json keeps the exact string.
_INVISIBLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u115f\u1160\u180e\u200b-\u200f\u202a-\u202e"
                        "\u2060-\u206f\u3164\ufeff\ufff9-\ufffb\U000e0000-\U000e007f]")
ID_DISPLAY_CHARS = 64  # longer ids are shortened in report.md/html (the whole id is in report.json)


def visible(text) -> str:
    """``text`` with every control, bidirectional-formatting and zero-width character replaced by
    a visible ``⟨U+XXXX⟩`` (newlines and tabs kept)."""
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


def short_id(value, limit: int = ID_DISPLAY_CHARS) -> str:
    """An id for display: control characters shown (:func:`visible`) and, past ``limit``
    characters, shortened to its start and end with its length ('abc…xyz (5,000 chars)'), so one
    hostile id cannot push every other column off the page. report.json keeps the full id."""
    s = visible(value)
    if len(s) <= limit:
        return s
    head, tail = (2 * limit) // 3, limit // 4
    return f"{s[:head]}…{s[-tail:]} ({len(str(value)):,} chars)"


# --------------------------------------------------------------------------- escaping
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+!|<>~$&])")
_MD_LINE_START = re.compile(r"^(\s*)([-+=*]|\d+[.)])(?=\s|$)", re.MULTILINE)


def md_escape(text: str, *, inline: bool = False) -> str:
    """Escape text for CommonMark so that it renders literally. ``inline`` (table cells,
    headings) also folds newlines into spaces."""
    s = visible(text)
    if inline:
        s = " ".join(s.splitlines())
    s = _MD_SPECIAL.sub(r"\\\1", s)
    if not inline:  # list markers only matter at the start of a block line
        s = _MD_LINE_START.sub(lambda m: m.group(1) + m.group(2)[:-1] + "\\" + m.group(2)[-1], s)
    return s


def h(text) -> str:
    return html.escape(visible(text), quote=True)


# --------------------------------------------------------------------------- renderers
def render_markdown(doc: Doc) -> str:
    out = [f"# {md_escape(doc.title, inline=True)}", ""]
    nfig = 0
    for b in doc.blocks:
        kind = b[0]
        if kind == "h2":
            out += [f"## {md_escape(b[1], inline=True)}", ""]
        elif kind == "h3":
            out += [f"### {md_escape(b[1], inline=True)}", ""]
        elif kind == "p":
            out += [md_escape(b[1]), ""]
        elif kind == "callout":
            out += ["> " + md_escape(b[1]).replace("\n", "\n> "), ""]
        elif kind == "ul":
            out += [f"- {md_escape(i, inline=True)}" for i in b[1]] + [""]
        elif kind == "table":
            t: Table = b[1]
            if t.caption:
                out += [f"*{md_escape(t.caption, inline=True)}*", ""]
            out.append("| " + " | ".join(md_escape(x, inline=True) for x in t.headers) + " |")
            out.append("|" + "---|" * len(t.headers))
            for r in t.rows:
                out.append("| " + " | ".join(md_escape(x, inline=True) for x in r) + " |")
            out.append("")
        elif kind == "figure":
            nfig += 1
            out += [f"*Figure {nfig}: {md_escape(b[1].caption, inline=True)}* (embedded in report.html)", ""]
        elif kind == "heat":
            ht: HeatText = b[1]
            out += [f"*Per-character heatmap of {len(ht.text)} characters: see report.html.*", ""]
    return "\n".join(out).rstrip() + "\n"


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
        parts.append(f'<span class="h{cls}">{html.escape(_visible_1(text[i:j]), quote=True)}</span>')
        i = j
    parts.append("</pre>")
    if ht.truncated_from:
        parts.append(f'<p class="small">Showing the first {len(text)} of {ht.truncated_from} characters; '
                     "the strip figure covers the whole document.</p>")
    return "".join(parts)


def render_html(doc: Doc) -> str:
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f"<title>{h(doc.title)}</title><style>{_css()}</style></head><body>",
           f"<h1>{h(doc.title)}</h1>"]
    nfig = 0
    for b in doc.blocks:
        kind = b[0]
        if kind == "h2":
            out.append(f"<h2>{h(b[1])}</h2>")
        elif kind == "h3":
            out.append(f"<h3>{h(b[1])}</h3>")
        elif kind == "p":
            out.append("<p>" + h(b[1]).replace("\n", "<br>") + "</p>")
        elif kind == "callout":
            out.append(f'<div class="callout {h(b[2])}">' + h(b[1]).replace("\n", "<br>") + "</div>")
        elif kind == "ul":
            out.append("<ul>" + "".join(f"<li>{h(i)}</li>" for i in b[1]) + "</ul>")
        elif kind == "table":
            t: Table = b[1]
            cap = f"<caption>{h(t.caption)}</caption>" if t.caption else ""
            head = "".join(f"<th>{h(x)}</th>" for x in t.headers)
            body = "".join("<tr>" + "".join(f"<td>{h(x)}</td>" for x in r) + "</tr>" for r in t.rows)
            out.append(f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
        elif kind == "figure":
            nfig += 1
            f: Figure = b[1]
            data = base64.b64encode(f.png).decode("ascii")
            out.append(f'<figure><img alt="{h(f.alt)}" src="data:image/png;base64,{data}">'
                       f"<figcaption>Figure {nfig}: {h(f.caption)}</figcaption></figure>")
        elif kind == "heat":
            out.append(_heat_html(b[1]))
    out.append(f'<footer>memclaim {h(__version__)} · report schema {h(SCHEMA_VERSION)}</footer></body></html>')
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- json + writing
def input_record(path, *, role: str) -> dict:
    """{role, path, sha256, bytes} of an input file (the hash ties the report to its inputs)."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"input file {str(p)!r} does not exist", hint="check the path")
    return {"role": role, "path": str(p), "sha256": sha256_file(p), "bytes": p.stat().st_size}


def build_json(*, command: str, procedure: dict | None, inputs: Sequence[dict], results: dict,
               statements: Sequence[str] = (), created_utc: str | None = None) -> str:
    if created_utc is None:
        created_utc = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()
    payload = {
        "schema_version": SCHEMA_VERSION,
        "memclaim_version": __version__,
        "command": command,
        "created_utc": created_utc,
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


def render(doc: Doc, *, command: str, procedure: dict | None, inputs: Sequence[dict], results: dict,
           statements: Sequence[str] = ()) -> ReportBundle:
    """Render all three files in memory (nothing is written)."""
    return ReportBundle(build_json(command=command, procedure=procedure, inputs=inputs, results=results,
                                   statements=statements),
                        render_markdown(doc), render_html(doc))


def _memclaim_report(path: Path) -> bool:
    """Whether ``path`` (report.*, or a figure beside them) belongs to a memclaim report: its
    folder's report.json is one (schema, memclaim version and command recorded)."""
    try:
        d = json.loads((path.parent / "report.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(d, dict) and "schema_version" in d and "memclaim_version" in d and "command" in d


def write_report(out_dir, bundle: ReportBundle, *, extra_files: dict | None = None) -> dict:
    """Write report.json, report.md, report.html (and ``extra_files``, ``{name: bytes}``, e.g.
    figures) into ``out_dir`` as one change (:func:`memclaim.fsutil.write_files`): every file
    is staged first and then renamed into place, so a failure (a full disk) leaves the previous
    report whole; a file memclaim did not write is never overwritten."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise InputError(f"report folder {str(out)!r} exists and is not a folder", hint="pass a folder path to --out")
    files = {name: text.encode("utf-8") for name, text in
             zip(REPORT_FILES, (bundle.json_text, bundle.markdown, bundle.html))}
    for name, data in (extra_files or {}).items():
        files[name] = data if isinstance(data, bytes) else str(data).encode("utf-8")
    try:
        paths = write_files(out, files, owned=_memclaim_report)
    except OSError as exc:
        import errno

        full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
        raise InputError(f"{'disk full while writing' if full else 'cannot write'} the report in {str(out)!r}: "
                         f"{exc.strerror or exc}; the previous report there (if any) is unchanged",
                         hint="free some space and re-run" if full else "choose a --out folder you can write") from None
    return {k.split(".")[1]: str(v) for k, v in paths.items() if k in REPORT_FILES}
