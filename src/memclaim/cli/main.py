"""The ``memclaim`` command. Thin: parse, call the library, print.

Each subcommand lives in its own module ``memclaim.cli.<name>`` exposing a click command or
group named ``command``; modules are imported lazily so ``memclaim --help`` stays fast and a
broken optional stack never breaks unrelated subcommands.
"""

from __future__ import annotations

import importlib
import sys

import click

from ..api import MemclaimError, __version__, cli_invocation, invoked_as
from .progress import TRACKER, close_all

# subcommand name -> module under memclaim.cli
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "score": ("score", "Score texts under an extraction procedure into a durable store."),
    "test": ("test", "Conformal population test on stored (or external) scores."),
    "population": ("population", "Score members and controls, then run the population test."),
    "census": ("census", "Single-document census against a matched control document."),
    "budget": ("budget", "Query budgets: P[at least once in n], n for confidence 1-delta."),
    "dp": ("dp", "Differential-privacy bounds on memorization and extraction."),
    "audit": ("audit", "Membership-inference and extraction audits with intervals."),
    "acr": ("acr", "Adversarial compression (GCG prompt search) on members and matched controls."),
    "reproduce": ("reproduce", "Regenerate a figure of [MX] §8 or [EM] §3-§6 (numbers + plot)."),
    "train": ("train", "The training lab: tiny GPT, fine-tuning, planted records, DP-SGD."),
    "demo": ("demo", "Run the end-to-end demo on the built-in tiny GPT."),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx):
        return list(SUBCOMMANDS)

    def get_command(self, ctx, name):
        if name not in SUBCOMMANDS:
            return None
        modname, _ = SUBCOMMANDS[name]
        try:
            mod = importlib.import_module(f"memclaim.cli.{modname}")
        except ModuleNotFoundError as exc:
            if exc.name == f"memclaim.cli.{modname}":
                return None  # not built yet
            raise
        return mod.command

    def format_commands(self, ctx, formatter):
        rows = [(name, help_) for name, (_, help_) in SUBCOMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="memclaim")
def cli():
    """memclaim: calibrated claims about what a language model memorized and what can be
    extracted from it ([EM], [MX]). Run `memclaim COMMAND --help` for examples."""


#: options that make a command ask for less memory at once, in the order they are suggested
MEMORY_KNOBS = {
    "--batch-size": "a smaller --batch-size",
    "--unit-size": "a smaller --unit-size",
    "--pld-grid": "a coarser --pld-grid",
    "--max-nodes": "a smaller --max-nodes",
    "--physical-batch-size": "a smaller --physical-batch-size",
}


def _command_of(argv) -> tuple[click.Command | None, str]:
    """The subcommand ``argv`` runs and its words (``dp bounds ...`` -> the bounds command,
    'dp bounds'), or (None, 'COMMAND')."""
    cmd: click.Command = cli
    ctx = click.Context(cli)
    words = []
    for word in list(argv or []):
        if not isinstance(cmd, click.Group) or word.startswith("-"):
            break
        sub = cmd.get_command(ctx, word)
        if sub is None:
            break
        cmd = sub
        words.append(word)
    return (None, "COMMAND") if cmd is cli else (cmd, " ".join(words))


def _memory_text(argv) -> str:
    """What a MemoryError prints: the knobs the command has (issue 25: `dp bounds` was told to
    lower --batch-size, an option it does not have)."""
    cmd, path = _command_of(argv)
    opts = {o for p in (cmd.params if cmd is not None else ()) for o in getattr(p, "opts", ())}
    knobs = [how for k, how in MEMORY_KNOBS.items() if k in opts]
    inputs = any(
        o in opts for o in ("--input", "--members", "--document", "--data", "--candidates")
    )
    if knobs:
        return f"out of memory\n  fix: ask for less at a time: {', or '.join(knobs)}" + (
            ", and check that every input is a regular file of reasonable size" if inputs else ""
        )
    return (
        f"out of memory\n  fix: ask for less work (`memclaim {path} --help` lists the options that set its "
        "size), or run it on a machine with more memory"
    )


def _os_error_text(exc: BaseException, argv=None) -> str:
    import errno

    if isinstance(exc, MemoryError):
        return _memory_text(argv if argv is not None else sys.argv[1:])
    where = f" {exc.filename!r}" if getattr(exc, "filename", None) else ""
    what = exc.strerror or str(exc)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        fix = "free some space and re-run the same command (finished work is kept)"
    elif exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        fix = "choose a path you can write (not a read-only filesystem), or fix its permissions"
    else:
        fix = "check the path and re-run the same command"
    return f"{what}:{where}\n  fix: {fix}"


def _interrupted_text() -> str:
    """What Ctrl-C prints: every finished unit is in the store, so the same command resumes; the
    counts come from the scoring runs' progress events (memclaim.cli.progress.TRACKER)."""
    counts = TRACKER.counts
    done = "" if counts is None else f" ({counts[0]} of {counts[1]} units done)"
    return f"interrupted; re-run the same command to resume{done}"


def usage_error_text(exc: click.UsageError) -> str:
    """A click parse error as memclaim prints every bad input: the command's usage line, ``error:``
    with click's message on one line (it names the option and the value), and ``fix:``.

    >>> print(usage_error_text(click.UsageError("Missing option '--neighbors'. Choose from:\\n\\treplace-one,\\n\\tadd-remove")))
    error: Missing option '--neighbors'. Choose from: replace-one, add-remove
      fix: `memclaim COMMAND --help` lists every option and the values it takes
    """
    ctx = exc.ctx
    path = ctx.command_path if ctx is not None else "memclaim COMMAND"
    message = " ".join(exc.format_message().split())
    usage = (ctx.get_usage() + "\n") if ctx is not None else ""
    what = (
        "the commands"
        if ctx is not None and isinstance(ctx.command, click.Group)
        else "every option and the values it takes"
    )
    return f"{usage}error: {message}\n  fix: `{path} --help` lists {what}"


def main(argv=None) -> int:
    args = list(argv if argv is not None else sys.argv[1:])
    try:
        # standalone_mode=False: click returns a command's `raise click.exceptions.Exit(n)` as n
        # instead of raising it (`reproduce` exits 1 when a check fails); every report written
        # records this command line (memclaim.report.core.invoked_as)
        with invoked_as(cli_invocation(args)):
            rv = cli.main(args=args, prog_name="memclaim", standalone_mode=False)
        if isinstance(rv, int) and not isinstance(rv, bool) and rv != 0:
            return rv
    except MemclaimError as exc:
        text = str(exc)
        if getattr(exc, "hint", None) is None:  # every error says how to fix it
            groups = {
                "dp": ("bounds", "account", "plot", "baseline"),
                "audit": ("run", "table", "attacks"),
                "train": ("tiny", "finetune", "unlearn"),
            }
            cmd = " ".join(
                args[:2] if len(args) > 1 and args[1] in groups.get(args[0], ()) else args[:1]
            )
            text += (
                f"\n  fix: correct the value named above (`memclaim {cmd or 'COMMAND'} --help` gives each "
                "option's range)"
            )
        click.echo(f"error: {text}", err=True)
        return 2
    except click.exceptions.Abort as exc:
        # click turns Ctrl-C (KeyboardInterrupt) into Abort before it reaches us: tell them apart
        if isinstance(exc.__cause__ or exc.__context__, KeyboardInterrupt):
            click.echo(_interrupted_text(), err=True)
        else:
            click.echo("aborted", err=True)
        return 130
    except KeyboardInterrupt:
        click.echo(_interrupted_text(), err=True)
        return 130
    except click.UsageError as exc:
        # click's own parse errors (unknown option, missing or invalid value) in memclaim's form:
        # the usage line, then `error:` naming the value and `fix:`, exit 2
        click.echo(usage_error_text(exc), err=True)
        return 2
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except (MemoryError, OSError) as exc:
        # a file that cannot be read or written (permission, read-only filesystem, disk full, a
        # path that vanished): say which and stop; every memclaim write is atomic, so nothing
        # half-written is left behind
        click.echo(f"error: {_os_error_text(exc, argv)}", err=True)
        return 2
    except click.exceptions.Exit as exc:
        return exc.exit_code
    finally:
        close_all()  # no progress line left open (or ticking) after the command, whatever happened
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
