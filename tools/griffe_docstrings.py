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

Used by mkdocs.yml (mkdocstrings' ``extensions`` option); tests/test_docs.py tests it.
"""
from __future__ import annotations

import re

import griffe

ROLE = re.compile(r":(?:py:)?(?:func|class|mod|meth|data|attr|exc|obj|const|func):`(~?)([^`<]+?)(?:\s*<[^`]+>)?`")


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
                block.append(lines[i][len(indent):])
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


class MarkdownDocstrings(griffe.Extension):
    """Rewrite every docstring with :func:`markdown_docstring` once the object tree is built."""

    def on_object(self, *, obj, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = markdown_docstring(obj.docstring.value)
