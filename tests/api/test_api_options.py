"""The light parts of the API and the CLI's shared options: window lengths, output folders,
threads (api/_options.py), the training lab's input readers (api/_train.py), and cli/common.py
(options pass through unchanged, --json prints strict JSON)."""

from __future__ import annotations

import io
import json
import os
from contextlib import redirect_stdout

import click
import pytest
from click.testing import CliRunner

from memclaim.api._options import (
    DEFAULT_PREFIX_TOKENS,
    DEFAULT_SUFFIX_TOKENS,
    check_out_dir,
    set_threads,
    window_lengths,
)
from memclaim.api._train import parse_pairs, read_records, train_tiny
from memclaim.cli import common
from memclaim.errors import InputError


def test_window_lengths_defaults_and_whole_fields():
    assert window_lengths(None, None) == (DEFAULT_PREFIX_TOKENS, DEFAULT_SUFFIX_TOKENS) == (50, 50)
    assert window_lengths(8, None) == (8, 50)
    assert window_lengths(None, None, "p", "s") == (
        None,
        None,
    )  # prefix/suffix fields: the whole field
    assert window_lengths(None, 4, "p", "s") == (None, 4)


def test_check_out_dir_refuses_files_and_unwritable_parents(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(InputError, match="exists and is not a folder"):
        check_out_dir(f)
    with pytest.raises(InputError, match="is a file, not a folder"):
        check_out_dir(f / "sub" / "deeper", option="--out")
    assert check_out_dir(tmp_path / "new" / "deeper") == tmp_path / "new" / "deeper"
    if os.geteuid() != 0:  # root writes anywhere
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o500)
        try:
            with pytest.raises(InputError, match="not writable"):
                check_out_dir(ro / "out")
        finally:
            ro.chmod(0o700)


def test_set_threads_bounds():
    set_threads(None)
    with pytest.raises(InputError, match="--threads must be >= 1"):
        set_threads(0)
    with pytest.raises(InputError, match="more than 8 threads per CPU core"):
        set_threads(8 * (os.cpu_count() or 1) + 1)


def test_planted_counts_and_jsonl_records(tmp_path):
    assert parse_pairs("1:8,8:8", "--duplicates") == ((1, 8), (8, 8))
    assert parse_pairs("", "--canaries") == () == parse_pairs((), "--canaries")
    assert parse_pairs([(2, 3)], "--canaries") == ((2, 3),)
    for bad, match in (
        ("8", "must look like K:N"),
        ("a:b", "must look like K:N"),
        ("0:8", "copies must be >= 1"),
        ([(1, -1)], "counts >= 0"),
    ):
        with pytest.raises(InputError, match=match):
            parse_pairs(bad, "--duplicates")
    p = tmp_path / "plant.jsonl"
    p.write_text('{"id": "a"}\n\n{"id": "b"}\n', encoding="utf-8")
    assert read_records(p) == [{"id": "a"}, {"id": "b"}]
    p.write_text('{"id": "a"}\nnot json\n', encoding="utf-8")
    with pytest.raises(InputError, match="line 2 is not JSON"):
        read_records(p)
    p.write_text("\n", encoding="utf-8")
    with pytest.raises(InputError, match="holds no records"):
        read_records(p)
    with pytest.raises(InputError, match="does not exist"):
        read_records(tmp_path / "missing.jsonl")


def test_train_tiny_refuses_bad_counts_before_training(tmp_path):
    with pytest.raises(InputError, match="--duplicates must look like K:N"):
        train_tiny(out=tmp_path / "m", duplicates="eight")
    assert not (tmp_path / "m").exists()  # nothing written


def test_cli_common_options_and_printing():
    @click.command()
    @common.procedure_options
    @common.model_options
    @common.near_verbatim_options
    def cmd(**kw):
        click.echo(
            json.dumps(
                {
                    k: (v if not isinstance(v, tuple) else [str(x) for x in v])
                    for k, v in kw.items()
                },
                default=str,
            )
        )

    r = CliRunner().invoke(
        cmd, ["--policy", "full", "--prefix-tokens", "8", "--near-verbatim", "2"]
    )
    assert r.exit_code == 0, r.output
    got = json.loads(r.output)
    assert got["prefix_tokens"] == 8 and got["suffix_tokens"] is None  # the API fills the default
    assert (
        got["policies"] == ["full"] and got["nv_eps"] == ["2"] and got["dtype"] == "auto"
    )  # issue 14: auto
    r = CliRunner().invoke(cmd, [])
    assert json.loads(r.output)["policies"] == ["top-k:40"]
    buf = io.StringIO()
    with redirect_stdout(buf):
        common.print_json({"x": float("inf"), "y": (1, 2)})
    assert json.loads(buf.getvalue()) == {"x": "inf", "y": [1, 2]}
    assert common.stderr_log(False) is None and callable(common.stderr_log(True))


def test_a_document_string_that_is_no_file_says_how_to_pass_a_text(tmp_path):
    """A string is a path; a text in memory is a memclaim.Document (the error says so)."""
    from memclaim.api._common import Document, document_path

    with pytest.raises(InputError, match="memclaim.Document") as e:
        document_path("In the beginning God created the heaven and the earth.")
    assert "does not exist" in str(e.value)
    f = tmp_path / "book.txt"
    f.write_text("x")
    assert document_path(str(f)) == f and Document("a text").name == "document"
