"""Issue 15 item 3: one name per concept across commands, options grouped in --help, help text
on every option, --json on every command that computes something, and the renamed flags of 0.2
still working for one release with a note on stderr (API keywords: a DeprecationWarning).
No model is loaded here."""

from __future__ import annotations

import inspect
import re
import warnings

import click
import pytest

from memclaim.cli.main import SUBCOMMANDS, cli, main
from memclaim.cli.options import GROUP_OF, GROUPS, NEIGHBORS, RENAMED, RENAMED_VALUES, Command


def _leaves():
    ctx = click.Context(cli, info_name="memclaim")
    for name in SUBCOMMANDS:
        cmd = cli.get_command(ctx, name)
        if isinstance(cmd, click.Group):
            for sub in cmd.list_commands(ctx):
                yield f"{name} {sub}", cmd.get_command(ctx, sub)
        else:
            yield name, cmd


LEAVES = dict(_leaves())
# the commands whose every option must be placed in a group by name (no fallback group)
CORE = ("score", "test", "population", "census", "audit run")


def _options(cmd):
    return [p for p in cmd.params if isinstance(p, click.Option)]


def test_every_option_of_every_command_has_help_text():
    missing = [
        f"memclaim {path} {p.opts[0]}"
        for path, cmd in LEAVES.items()
        for p in _options(cmd)
        if not (p.help or "").strip()
    ]
    assert not missing, missing


def test_every_command_prints_json():
    assert len(LEAVES) >= 17
    lacking = [
        path
        for path, cmd in LEAVES.items()
        if not any(p.name == "as_json" and "--json" in p.opts for p in _options(cmd))
    ]
    assert not lacking, lacking


def test_help_lists_options_by_group():
    for path, cmd in LEAVES.items():
        assert isinstance(cmd, Command), path
        text = cmd.get_help(click.Context(cmd, info_name=f"memclaim {path}"))
        heads = re.findall(r"^(\w+) options:$", text, re.M)
        assert heads and set(heads) <= set(GROUPS), (path, heads)
        assert heads == [g for g in GROUPS if g in heads], (path, heads)  # always in the same order
        assert "Output options:" in text and text.index("Show this message") > text.index(
            "Output options:"
        ), path
    for path in CORE:
        cmd = LEAVES[path]
        unplaced = [
            p.opts[0] for p in _options(cmd) if p.name not in GROUP_OF and p.name not in cmd.groups
        ]
        assert not unplaced, (path, unplaced)
    text = LEAVES["population"].get_help(
        click.Context(LEAVES["population"], info_name="memclaim population")
    )
    inputs, procedure = text.split("Inputs options:")[1].split("Procedure options:")
    assert (
        "--members" in inputs
        and "--controls" in inputs
        and "--prefix-tokens" in procedure.split("Claim")[0]
    )
    assert "--alpha" in text.split("Claim options:")[1].split("Output options:")[0]


def test_one_name_per_concept():
    """No command keeps an old spelling as a real option; every relation option is spelled
    'neighbors' and takes the same two values; the window default is the same everywhere."""
    old = {o for renames in RENAMED.values() for o in renames}
    for path, cmd in LEAVES.items():
        opts = {o for p in _options(cmd) for o in p.opts + p.secondary_opts}
        assert not (opts & old), (path, opts & old)
        assert not any(
            o.endswith(("-column", "-relation")) or o in ("--nonmembers", "--fpr", "--quiet")
            for o in opts
        )
        for p in _options(cmd):
            if p.name.endswith("neighbors"):
                assert tuple(p.type.choices) == NEIGHBORS, (path, p.opts)
        for p in _options(cmd):
            if p.name in ("prefix_tokens", "suffix_tokens"):
                assert p.default in (None, 50), (path, p.opts, p.default)
                if p.default is None:
                    assert "[default: 50" in p.help, (path, p.opts)
    from memclaim.api import _audit
    from memclaim.api import _options as api_options

    # audit's window lengths are shortcuts of **options (issue 26), defaulting to the windows' own
    defaults = _audit._AUDIT_DEFAULTS
    assert defaults["prefix_tokens"] == api_options.DEFAULT_PREFIX_TOKENS == 50
    assert defaults["suffix_tokens"] == api_options.DEFAULT_SUFFIX_TOKENS == 50
    assert api_options.window_lengths(None, None) == (50, 50)


def test_every_rename_names_a_real_option():
    for path, renames in RENAMED.items():
        cmd = LEAVES[path]
        opts = {o for p in _options(cmd) for o in p.opts}
        for old, new in renames.items():
            assert new in opts and old not in opts, (path, old, new)
    for path, flags in RENAMED_VALUES.items():
        cmd = LEAVES[path]
        for flag, values in flags.items():
            p = next(p for p in _options(cmd) if flag in p.opts)
            assert set(values.values()) <= set(p.type.choices), (path, flag)


OLD_NEW = [
    (
        "audit run",
        ["toy", "--members", "m", "--out", "o"],
        ["--nonmembers", "c"],
        ["--controls", "c"],
        "controls",
    ),
    (
        "audit run",
        ["toy", "--members", "m", "--controls", "c", "--out", "o"],
        ["--fpr", "0.05"],
        ["--alpha", "0.05"],
        "alpha",
    ),
    (
        "audit run",
        ["toy", "--members", "m", "--controls", "c", "--out", "o"],
        ["--cap-relation", "add/remove"],
        ["--cap-neighbors", "add-remove"],
        "cap_neighbors",
    ),
    (
        "audit run",
        ["toy", "--members", "m", "--controls", "c", "--out", "o"],
        ["--soundness-relation=replace-one"],
        ["--soundness-neighbors", "replace-one"],
        "soundness_neighbors",
    ),
    (
        "test",
        ["--candidates", "a.csv", "--controls", "b.csv", "--out", "o"],
        ["--id-column", "k"],
        ["--id-field", "k"],
        "id_field",
    ),
    (
        "test",
        ["--candidates", "a.csv", "--controls", "b.csv", "--out", "o"],
        ["--score-column", "s"],
        ["--score-field", "s"],
        "score_field",
    ),
    (
        "test",
        ["--candidates", "a.csv", "--controls", "b.csv", "--out", "o"],
        ["--text-column", "t"],
        ["--text-field", "t"],
        "text_field",
    ),
    ("train tiny", ["--out", "o"], ["--quiet"], ["--no-progress"], "no_progress"),
    (
        "train finetune",
        ["toy", "--data", "d", "--out", "o"],
        ["--quiet"],
        ["--no-progress"],
        "no_progress",
    ),
    (
        "train unlearn",
        ["toy", "--forget", "f", "--retain", "r", "--out", "o"],
        ["--quiet"],
        ["--no-progress"],
        "no_progress",
    ),
    (
        "dp bounds",
        ["--epsilon", "1"],
        ["--neighbors", "replace"],
        ["--neighbors", "replace-one"],
        "neighbors",
    ),
    (
        "dp plot",
        ["--out", "o"],
        ["--neighbors=replace"],
        ["--neighbors", "replace-one"],
        "neighbors",
    ),
    (
        "dp account",
        ["--noise-multiplier", "1", "--sampling-rate", "0.1", "--steps", "2", "--delta", "1e-5"],
        ["--neighbors", "replace"],
        ["--neighbors", "replace-one"],
        "neighbors",
    ),
]


@pytest.mark.parametrize(
    "path, base, old, new, param", OLD_NEW, ids=[f"{c[0]} {c[2][0]}" for c in OLD_NEW]
)
def test_old_spellings_parse_like_the_new_ones_with_a_note(path, base, old, new, param, capsys):
    cmd = LEAVES[path]
    with_new = cmd.make_context(path, base + new).params[param]
    assert capsys.readouterr().err == ""
    with_old = cmd.make_context(path, base + old).params[param]
    err = capsys.readouterr().err
    assert with_old == with_new
    assert err.startswith("note: ") and "removed in the next release" in err
    assert old[0].partition("=")[0] in err and (new[0] in err or new[-1] in err), err


def test_an_old_flag_works_end_to_end(tmp_path, capsys):
    (tmp_path / "m.csv").write_text("id,match\nm1,1\nm2,0\nm3,1\n")
    (tmp_path / "c.csv").write_text(
        "id,match\n" + "".join(f"c{i},{int(i == 4)}\n" for i in range(1, 10))
    )
    args = [
        "test",
        "--candidates",
        str(tmp_path / "m.csv"),
        "--controls",
        str(tmp_path / "c.csv"),
        "--kind",
        "prob",
        "--policy",
        "greedy",
        "--alpha",
        "0.2",
        "--json",
    ]
    assert main(args + ["--score-field", "match", "--out", str(tmp_path / "new")]) == 0
    new = capsys.readouterr()
    assert main(args + ["--score-column", "match", "--out", str(tmp_path / "old")]) == 0
    old = capsys.readouterr()
    assert "note: `memclaim test --score-column` is now --score-field" in old.err
    assert "note:" not in new.err
    assert (tmp_path / "old" / "report.json").exists()
    strip = lambda s: re.sub(r"/\S+/(old|new)\b", "OUT", s)  # noqa: E731
    assert strip(old.out) == strip(new.out)


def test_a_value_that_looks_like_an_old_flag_is_left_alone(capsys):
    """Only flags are rewritten, never the value of another option."""
    cmd = LEAVES["test"]
    ctx = cmd.make_context(
        "test",
        [
            "--candidates",
            "a.csv",
            "--controls",
            "b.csv",
            "--out",
            "o",
            "--controls-description",
            "--id-column",
        ],
    )
    assert ctx.params["controls_description"] == "--id-column" and ctx.params["id_field"] is None
    assert capsys.readouterr().err == ""


def test_api_old_keywords_warn_and_work(tmp_path):
    import memclaim as mc
    from memclaim.errors import InputError

    (tmp_path / "a.csv").write_text("key,s\na,-1.0\nb,-2.0\n")
    (tmp_path / "b.csv").write_text("key,s\n" + "".join(f"c{i},-{5 + i}.0\n" for i in range(9)))
    new = mc.test(
        str(tmp_path / "a.csv"),
        str(tmp_path / "b.csv"),
        alpha="0.1",
        id_field="key",
        score_field="s",
    )
    with pytest.warns(
        DeprecationWarning, match=r"test\(id_column=...\) is now test\(id_field=...\)"
    ):
        old = mc.test(
            str(tmp_path / "a.csv"),
            str(tmp_path / "b.csv"),
            alpha="0.1",
            id_column="key",
            score_field="s",
        )
    assert old.headline == new.headline and (old.test.k, old.test.n_claimed) == (
        new.test.k,
        new.test.n_claimed,
    )
    with pytest.raises(InputError, match="both id_column= and its new name id_field="):
        mc.test(
            str(tmp_path / "a.csv"),
            str(tmp_path / "b.csv"),
            alpha="0.1",
            id_column="key",
            id_field="key",
        )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mc.test(
            str(tmp_path / "a.csv"),
            str(tmp_path / "b.csv"),
            alpha="0.1",
            id_field="key",
            score_field="s",
        )
    from memclaim.api._shortcuts import AuditOptions

    # the new names, in the signature or among its typed shortcuts (**options, issue 26)
    assert set(inspect.signature(mc.audit).parameters) | set(AuditOptions.__annotations__) >= {
        "controls",
        "alpha",
        "cap_neighbors",
        "soundness_neighbors",
    }


@pytest.mark.parametrize(
    "argv, phrase, path",
    [
        (
            ["dp", "bounds", "--noise-multiplier", "1.1"],
            "Missing option '--neighbors'. Choose from: replace-one, add-remove",
            "memclaim dp bounds",
        ),
        (["score", "--bogus"], "No such option '--bogus'", "memclaim score"),
        (
            ["dp", "bounds", "--epsilon", "abc", "--neighbors", "add-remove"],
            "'abc' is not a valid float",
            "memclaim dp bounds",
        ),
        (
            ["census", "smollm2", "--stride", "ten"],
            "'ten' is not a valid integer",
            "memclaim census",
        ),
        (["nosuch"], "No such command 'nosuch'", "memclaim"),
    ],
)
def test_click_parse_errors_print_error_and_fix_and_exit_2(argv, phrase, path, capsys):
    """click's own parse errors read like every other bad input: the usage line, `error:` naming
    the option and value on one line, `fix:` pointing to the command's help, exit status 2."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert lines[0].startswith(f"Usage: {path} ")
    assert lines[1].startswith("error: ") and phrase in lines[1], err
    assert lines[2] == f"  fix: `{path} --help` lists " + (
        "the commands" if path == "memclaim" else "every option and the values it takes"
    )
    assert "Error:" not in err and len(lines) == 3
