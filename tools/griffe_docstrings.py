"""Griffe extension for the API reference: memclaim's docstrings are written for ``help()`` and
doctest (reST-flavoured plain text), and mkdocstrings renders them as Markdown. Three things would
render wrongly, so they are rewritten before rendering, and nothing else:

- doctest examples (``>>>`` and ``...`` lines with their expected output, up to a blank line) become
  fenced ``pycon`` blocks: as plain Markdown, ``>>>`` is a nested block quote and the output's
  ``[...]`` is read as a link reference;
- reST roles (``:func:`memclaim.score```, ``:class:`~memclaim.text.io.Record```) become code spans
  (the ``~`` form shows the last component, as Sphinx does);
- a paragraph ending in ``::`` (a reST literal block follows) ends in ``:``; the indented block
  after it is already a Markdown code block.

A function's docstring also gains a table of its parameters (name, type, default, and the
clause of the docstring that describes it, where one names it as ``name``): the docstrings are
prose for ``help()``, and the site shows them as tables (:func:`parameters_table`).

Used by mkdocs.yml (mkdocstrings' ``extensions`` option); tests/project/test_docs.py tests it.
"""

from __future__ import annotations

import html
import re

import griffe

ROLE = re.compile(
    r":(?:py:)?(?:func|class|mod|meth|data|attr|exc|obj|const|func):`(~?)([^`<]+?)(?:\s*<[^`]+>)?`"
)


def _role(m: re.Match) -> str:
    tilde, target = m.group(1), m.group(2).strip()
    return f"`{target.rsplit('.', 1)[-1] if tilde else target}`"


def markdown_docstring(text: str) -> str:
    """The Markdown form of a docstring (see the module docstring)."""
    out: list[str] = []
    lines = text.splitlines()
    i = 0
    fenced = False  # inside a fenced block already (so that a second pass changes nothing)
    while i < len(lines):
        line = lines[i]
        stripped = line.lstrip()
        if stripped.startswith("```"):
            fenced = not fenced
        if fenced or stripped.startswith("```"):
            out.append(line)
            i += 1
            continue
        if stripped.startswith(">>>"):
            indent = line[: len(line) - len(stripped)]
            block = []
            while i < len(lines) and lines[i].strip() and lines[i].startswith(indent):
                block.append(lines[i][len(indent) :])
                i += 1
            if out and out[-1].strip():
                out.append("")
            out += [f"{indent}```pycon", *[f"{indent}{b}" for b in block], f"{indent}```"]
            continue
        line = ROLE.sub(_role, line)
        if line.rstrip().endswith("::") and not line.rstrip().endswith(":::"):
            line = line.rstrip()[:-1]
        out.append(line)
        i += 1
    return "\n".join(out)


def _clause(text: str, name: str) -> str:
    """The clause of ``text`` that describes ``name`` (written ``name`` in double backticks): from
    the mention to the end of its sentence or clause, at most 200 characters; '' when not named."""
    m = re.search(r"``" + re.escape(name) + r"``", text)
    if not m:
        return ""
    start = max(
        text.rfind(". ", 0, m.start()),
        text.rfind("; ", 0, m.start()),
        text.rfind("\n\n", 0, m.start()),
    )
    start = 0 if start < 0 else start + 2
    end = len(text)
    for stop in (". ", ".\n", "; ", "\n\n"):
        k = text.find(stop, m.end())
        if k >= 0:
            end = min(end, k + 1)
    clause = " ".join(text[start:end].split()).replace("``", "`")
    clause = ROLE.sub(_role, clause)
    return clause if len(clause) <= 200 else clause[:197].rsplit(" ", 1)[0] + " ..."


def parameters_table(params, docstring: str) -> str:
    """A Markdown table of a function's parameters: ``params`` as (name, annotation, default)
    (default None for a required one), ``docstring`` the prose that describes them.

    >>> print(parameters_table([("texts", "list[str]", None), ("limit", "int | None", "None")],
    ...                        "Score ``texts``. ``limit``: only the first N."))
    | parameter | type | default | described as |
    |---|---|---|---|
    | `texts` | <code>list[str]</code> | required | Score `texts`. |
    | `limit` | <code>int &#124; None</code> | <code>None</code> | `limit`: only the first N. |
    """

    def code(
        text: str,
    ) -> str:  # inline HTML: a pipe inside a Markdown code span would end the table cell
        return "<code>" + html.escape(text).replace("|", "&#124;") + "</code>"

    rows = ["| parameter | type | default | described as |", "|---|---|---|---|"]
    for name, annotation, default in params:
        ann = code(annotation) if annotation else ""
        dflt = "required" if default is None else code(default)
        what = _clause(docstring, name).replace("|", "\\|")
        rows.append(f"| `{name}` | {ann} | {dflt} | {what} |")
    return "\n".join(rows)


class MarkdownDocstrings(griffe.Extension):
    """Rewrite every docstring with :func:`markdown_docstring` once the object tree is built, and
    give a public function's docstring a table of its parameters (:func:`parameters_table`)."""

    def on_object(self, *, obj, **kwargs) -> None:
        if obj.docstring is None:
            return
        text = obj.docstring.value
        params = []
        if getattr(obj, "is_function", False) and not obj.name.startswith("_"):
            for p in obj.parameters:
                if p.name in ("self", "cls") or str(p.kind.value).startswith("variadic"):
                    continue
                params.append(
                    (
                        p.name,
                        str(p.annotation) if p.annotation is not None else "",
                        None if p.default is None else str(p.default),
                    )
                )
        value = markdown_docstring(text)
        if params and "| parameter | type |" not in value:
            value = (
                value.rstrip() + "\n\n**Parameters**\n\n" + parameters_table(params, text) + "\n"
            )
        obj.docstring.value = value
