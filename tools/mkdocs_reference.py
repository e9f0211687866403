"""mkdocs hook: the two reference pages, generated at build time from the code so that neither can
drift from it.

- ``cli.md``: the ``--help`` of every ``memclaim`` command and subcommand, verbatim, as click
  renders it at 100 columns.
- ``api.md``: every public name of ``memclaim`` (the lazy exports of :mod:`memclaim.api`, in their
  listed order), then the error types and the progress callbacks, each rendered by mkdocstrings
  from its docstring and signature.

Neither page is a file in ``docs/`` (a hand-copied page would go stale): the build refuses one
that is. ``python tools/mkdocs_reference.py cli|api`` prints a page, for reading offline.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLI_PAGE = "cli.md"
API_PAGE = "api.md"
WIDTH = 100


def _use_checkout():
    src = str(ROOT / "src")
    if src not in sys.path:  # document this checkout's code, as mkdocstrings does (paths: [src])
        sys.path.insert(0, src)


# ------------------------------------------------------------------------------ the CLI
def _help(command, name: str, parent=None):
    """(help text, context) of ``command`` as ``--help`` prints it."""
    ctx = command.make_context(
        name,
        [],
        parent=parent,
        resilient_parsing=True,
        terminal_width=WIDTH,
        max_content_width=WIDTH,
    )
    return ctx.get_help(), ctx


def _walk(command, path: list[str], parent=None):
    """(path, command, help) for ``command`` and, for a group, each of its subcommands in listed order."""
    import click

    text, ctx = _help(command, path[-1] if path else "memclaim", parent)
    yield path, command, text
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not getattr(sub, "hidden", False):
                yield from _walk(sub, path + [name], ctx)


def commands() -> list[tuple[str, str, str]]:
    """[(``memclaim score``, its one-line summary, its --help text), ...] for every command, the top
    level first."""
    _use_checkout()
    from memclaim.cli.main import SUBCOMMANDS, cli

    return [
        (
            " ".join(["memclaim", *path]),
            SUBCOMMANDS[path[0]][1] if len(path) == 1 else cmd.get_short_help_str(limit=WIDTH),
            text,
        )
        for path, cmd, text in _walk(cli, [])
    ]


def _anchor(name: str) -> str:
    return name.replace(" ", "-")


def cli_markdown() -> str:
    """The CLI page: an index of the commands, then each command's --help verbatim."""
    _use_checkout()
    from memclaim import __version__

    items = commands()
    lines = [
        "# Command-line reference",
        "",
        f"Generated from `--help` when this site was built (memclaim {__version__}): what each command "
        "prints with `--help`, verbatim. The options are keywords of the [Python API](api.md) with the "
        "same defaults.",
        "",
    ]
    for name, short, _ in items[1:]:
        depth = name.count(" ") - 1
        lines.append(
            f"{'    ' * depth}- [`{name}`](#{_anchor(name)}){': ' + short if short else ''}"
        )
    lines.append("")
    for name, _, text in items:
        lines += [f"## {name} {{#{_anchor(name)}}}", "", "```text", text.rstrip(), "```", ""]
    return "\n".join(lines)


# ------------------------------------------------------------------------------ the API
def api_names() -> list[tuple[str, str]]:
    """[(public name, the module that defines it)] of ``memclaim``'s lazy exports, in listed order."""
    _use_checkout()
    import memclaim
    from memclaim import api

    names = [n for n in memclaim.__all__ if n != "__version__"]
    missing = [n for n in names if n not in api._EXPORTS and n not in api._FRONT_END]
    if missing:
        raise SystemExit(f"memclaim.__all__ names {missing}, which memclaim.api does not export")
    # an operation is defined in a private module of memclaim.api; a value the operations take
    # whole (Procedure, Runtime, ...) in its own home, re-exported by memclaim.api
    return [
        (n, f"memclaim.api.{api._EXPORTS[n]}" if n in api._EXPORTS else api._FRONT_END[n][0])
        for n in names
    ]


def _block(path: str, **options) -> list[str]:
    lines = [f"::: {path}"]
    if options:
        lines.append("    options:")
        lines += [f"      {k}: {v}" for k, v in options.items()]
    return lines + [""]


def api_markdown() -> str:
    """The API page: functions, then results and values, then errors and progress callbacks."""
    _use_checkout()
    from memclaim import __version__

    names = api_names()
    funcs = [(n, m) for n, m in names if n[:1].islower()]
    classes = [(n, m) for n, m in names if n[:1].isupper()]
    lines = [
        "# Python API",
        "",
        f"Generated from the docstrings when this site was built (memclaim {__version__}).",
        "",
        "`import memclaim as mc` gives every name below (each is loaded on first use, so `import memclaim` "
        "imports neither torch nor pandas). Options are keyword-only and named and defaulted as the "
        "[command line](cli.md)'s; every result is a frozen value with `to_dict()` (what `--json` prints), "
        "`to_pandas()` where tabular and `save(folder)` (the reports the CLI writes). Errors are "
        "`ValueError`s of the types at the end of this page.",
        "",
        "| name | what |",
        "|---|---|",
    ]
    import importlib

    sys.path.insert(0, str(ROOT / "tools"))
    from griffe_docstrings import markdown_docstring  # the rewriting the docstrings below get

    for n, m in names:
        obj = getattr(importlib.import_module(m), n)
        first = (obj.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")
        first = markdown_docstring(first).replace("|", "\\|")
        lines.append(f"| [`mc.{n}`](#memclaim.{n}) | {first} |")
    # each name is documented under its public name: the heading reads memclaim.NAME and the
    # anchor #memclaim.NAME leads to it (mkdocstrings also keeps the defining module's path as an id)
    lines += ["", "## Functions", ""]
    for n, m in funcs:
        lines += [f"[](){{#memclaim.{n}}}", ""] + _block(f"{m}.{n}", heading=f"memclaim.{n}")
    lines += ["## Results and values", ""]
    for n, m in classes:
        lines += [f"[](){{#memclaim.{n}}}", ""] + _block(
            f"{m}.{n}", heading=f"memclaim.{n}", members_order="source", inherited_members="false"
        )
    lines += [
        "## Errors",
        "",
        "Every error memclaim raises for bad input is one of these (all `ValueError`s): "
        "the message repeats the bad value and `hint` says how to fix it.",
        "",
    ]
    lines += _block(
        "memclaim.errors", show_root_heading="false", members_order="source", heading_level=3
    )
    lines += ["## Progress callbacks", ""]
    lines += _block(
        "memclaim.progress", show_root_heading="false", members_order="source", heading_level=3
    )
    return "\n".join(lines)


# ------------------------------------------------------------------------------ mkdocs events
def on_files(files, config, **kwargs):
    """mkdocs event: add the generated pages to the site's files."""
    from mkdocs.structure.files import File

    for page, make in ((CLI_PAGE, cli_markdown), (API_PAGE, api_markdown)):
        if files.get_file_from_path(page) is not None:
            raise SystemExit(
                f"docs/{page} exists, but that page is generated from the code: delete the file"
            )
        files.append(File.generated(config, page, content=make()))
    return files


if __name__ == "__main__":
    which = sys.argv[1] if len(sys.argv) > 1 else "cli"
    sys.stdout.write({"cli": cli_markdown, "api": api_markdown}[which]())
