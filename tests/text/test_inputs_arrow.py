"""Issue 15 item 7: the inputs users have besides JSONL/TXT/CSV/Parquet: Arrow IPC files and
streams, Feather (v1 and v2), and folders written by HuggingFace ``datasets``' ``save_to_disk``,
for passages (``--input``/``--members``/``--controls``/``--nonmembers``, the API) and for score
files (``memclaim test``). The same records, ids, fields and refusals as the other formats; the
CLI rows (exit 2, ``error: ... fix: ...``, nothing written) are in tests/cli/test_bad_inputs.py."""

from __future__ import annotations

import json
import shutil
import sys

import pytest

from memclaim.errors import InputError, MissingExtraError
from memclaim.text.io import detect_format, read_passages
from memclaim.text.scorefile import read_score_file

RECS = [
    {"id": "a", "text": "first text here"},
    {"id": "b", "text": "second, with a comma"},
    {"id": "c", "text": "   "},
    {"id": "d", "text": "the fourth"},
]
EXPECTED = [("a", "first text here"), ("b", "second, with a comma"), ("d", "the fourth")]


def _table(recs=RECS):
    import pyarrow as pa

    return pa.Table.from_pylist(recs)


def _write_arrow(path, kind: str, table=None):
    import pyarrow.feather as feather
    import pyarrow.ipc as ipc

    table = _table() if table is None else table
    if kind == "ipc-file":
        with ipc.new_file(str(path), table.schema) as w:
            w.write_table(table)
    elif kind == "ipc-stream":
        with ipc.new_stream(str(path), table.schema) as w:
            w.write_table(table)
    elif kind == "feather-v2":
        feather.write_feather(table, str(path))
    elif kind == "feather-v1":
        import warnings

        with warnings.catch_warnings():  # pyarrow deprecates writing v1; reading it is what we test
            warnings.simplefilter("ignore")
            feather.write_feather(table.to_pandas(), str(path), version=1)
    return path


def _save_dataset(path, recs=RECS):
    datasets = pytest.importorskip("datasets", reason="the 'datasets' extra is not installed")
    datasets.disable_progress_bars()
    ds = datasets.Dataset.from_list(recs)
    ds.save_to_disk(str(path))
    datasets.enable_progress_bars()
    return path


@pytest.mark.parametrize(
    "kind,name",
    [
        ("ipc-file", "p.arrow"),
        ("ipc-stream", "p.arrow"),
        ("feather-v2", "p.feather"),
        ("feather-v1", "p.feather"),
        ("ipc-file", "p.ipc"),
    ],
)
def test_arrow_files_read_the_same_records_as_jsonl(tmp_path, kind, name):
    (tmp_path / "p.jsonl").write_text("".join(json.dumps(r) + "\n" for r in RECS))
    ref = read_passages(tmp_path / "p.jsonl")
    ps = read_passages(_write_arrow(tmp_path / name, kind))
    assert [(r.id, r.text) for r in ps.records] == EXPECTED == [(r.id, r.text) for r in ref.records]
    assert ps.skipped_empty == 1 and ps.skipped_ids == ("c",)
    assert ps.sha256 == __import__("hashlib").sha256((tmp_path / name).read_bytes()).hexdigest()
    assert detect_format(tmp_path / name) == "arrow"


def test_arrow_fields_and_prefix_suffix_pairs(tmp_path):
    recs = [
        {"uid": "x1", "context": "In the beginning", "verse": " God created", "body": "z"},
        {"uid": "x2", "context": None, "verse": "and the earth", "body": "y"},
    ]
    p = _write_arrow(tmp_path / "pairs.arrow", "ipc-file", _table(recs))
    ps = read_passages(p, prefix_field="context", suffix_field="verse")
    assert [(r.id, r.prefix, r.suffix) for r in ps.records] == [
        ("x1", "In the beginning", " God created"),
        ("x2", "", "and the earth"),
    ]
    ps = read_passages(p, text_field="body", id_field="uid")
    assert [(r.id, r.text) for r in ps.records] == [("x1", "z"), ("x2", "y")]
    with pytest.raises(InputError, match="has no text field 'nope'"):
        read_passages(p, text_field="nope")


@pytest.mark.parametrize(
    "content", [b"not arrow at all\n", b"ARROW1\x00\x00garbage", b"PAR1\x00\x00PAR1"]
)
def test_a_file_that_is_not_arrow_is_refused_naming_it(tmp_path, content):
    p = tmp_path / "bad.arrow"
    p.write_bytes(content)
    with pytest.raises(InputError) as e:
        read_passages(p)
    assert "'" + str(p) + "' is not a readable Arrow file" in str(e.value)
    assert e.value.hint and "--format" in e.value.hint


def test_an_arrow_file_cut_short_is_refused(tmp_path):
    p = _write_arrow(tmp_path / "cut.arrow", "ipc-file")
    data = p.read_bytes()
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match="is not a readable Arrow file"):
        read_passages(p)


def test_arrow_non_string_text_and_no_rows(tmp_path):
    p = _write_arrow(tmp_path / "ints.arrow", "ipc-file", _table([{"id": "a", "text": 5}]))
    with pytest.raises(InputError, match="row 0: text is a int, not a string"):
        read_passages(p)
    import pyarrow as pa

    empty = pa.table({"id": pa.array([], pa.string()), "text": pa.array([], pa.string())})
    p = _write_arrow(tmp_path / "empty.arrow", "ipc-file", empty)
    with pytest.raises(InputError, match="has no rows"):
        read_passages(p)


def test_datasets_folder_reads_the_same_records_with_a_content_digest(tmp_path):
    folder = _save_dataset(tmp_path / "ds")
    ps = read_passages(folder)
    assert [(r.id, r.text) for r in ps.records] == EXPECTED and ps.skipped_empty == 1
    assert detect_format(folder) == "datasets"
    # a copy of the folder names the same content (population refuses identical members and
    # controls by this digest); another record changes it
    shutil.copytree(folder, tmp_path / "copy")
    assert read_passages(tmp_path / "copy").sha256 == ps.sha256
    other = _save_dataset(tmp_path / "other", RECS[:2] + [{"id": "d", "text": "the fourth!"}])
    assert read_passages(other).sha256 != ps.sha256
    assert read_passages(folder, fmt="datasets").sha256 == ps.sha256


def test_datasets_folder_honours_select_and_fields(tmp_path):
    datasets = pytest.importorskip("datasets", reason="the 'datasets' extra is not installed")
    datasets.disable_progress_bars()
    ds = datasets.Dataset.from_list(
        [{"key": f"k{i}", "passage": f"text number {i}"} for i in range(6)]
    )
    ds.select([4, 1, 2]).save_to_disk(str(tmp_path / "sel"))
    datasets.enable_progress_bars()
    ps = read_passages(tmp_path / "sel")
    assert [(r.id, r.text) for r in ps.records] == [
        ("k4", "text number 4"),
        ("k1", "text number 1"),
        ("k2", "text number 2"),
    ]


def test_datasets_folder_without_the_text_column(tmp_path):
    folder = _save_dataset(tmp_path / "notext", [{"id": "a", "sentence": "x"}])
    with pytest.raises(InputError) as e:
        read_passages(folder)
    assert "cannot find a text field among ['id', 'sentence']" in str(e.value)
    assert "--text-field" in e.value.hint
    assert [r.text for r in read_passages(folder, text_field="sentence").records] == ["x"]


def test_datasets_dict_folder_names_its_splits(tmp_path):
    datasets = pytest.importorskip("datasets", reason="the 'datasets' extra is not installed")
    datasets.disable_progress_bars()
    ds = datasets.Dataset.from_list(RECS)
    datasets.DatasetDict(train=ds, validation=ds).save_to_disk(str(tmp_path / "dd"))
    datasets.enable_progress_bars()
    with pytest.raises(InputError) as e:
        read_passages(tmp_path / "dd")
    assert "DatasetDict with the splits ['train', 'validation']" in str(e.value)
    assert str(tmp_path / "dd" / "train") in e.value.hint
    assert [(r.id, r.text) for r in read_passages(tmp_path / "dd" / "train").records] == EXPECTED


def test_a_plain_folder_and_format_mismatches(tmp_path):
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "notes.txt").write_text("hello")
    with pytest.raises(
        InputError, match="is a folder, but not one written by datasets' save_to_disk"
    ):
        read_passages(tmp_path / "plain")
    with pytest.raises(InputError, match="is a directory, not a file"):
        read_passages(tmp_path / "plain", fmt="jsonl")
    (tmp_path / "p.jsonl").write_text('{"text": "x"}\n')
    with pytest.raises(InputError, match="--format datasets needs a folder"):
        read_passages(tmp_path / "p.jsonl", fmt="datasets")
    with pytest.raises(InputError, match="input folder .* does not exist"):
        read_passages(tmp_path / "nope", fmt="datasets")


def test_datasets_folder_with_a_data_file_cut_short(tmp_path):
    folder = _save_dataset(tmp_path / "ds")
    arrow = next(folder.glob("*.arrow"))
    data = arrow.read_bytes()
    arrow.write_bytes(data[: len(data) // 3])
    with pytest.raises(InputError, match="is not a readable datasets folder"):
        read_passages(folder)
    arrow.unlink()
    with pytest.raises(InputError, match="is not a readable datasets folder"):
        read_passages(folder)


def test_without_the_datasets_extra_the_error_names_it(tmp_path, monkeypatch):
    folder = _save_dataset(tmp_path / "ds")
    monkeypatch.setitem(sys.modules, "datasets", None)  # `import datasets` raises ImportError
    with pytest.raises(MissingExtraError) as e:
        read_passages(folder)
    assert "pip install 'memclaim[datasets]'" in e.value.hint


def test_score_files_from_arrow(tmp_path):
    import pyarrow as pa

    t = pa.table({"id": ["a", "b", "c"], "score": [-1.5, float("-inf"), -3.0]})
    for kind, name in (
        ("ipc-file", "s.arrow"),
        ("ipc-stream", "s2.arrow"),
        ("feather-v2", "s.feather"),
    ):
        sf = read_score_file(_write_arrow(tmp_path / name, kind, t))
        assert sf.ids == ("a", "b", "c") and sf.scores.tolist() == [-1.5, float("-inf"), -3.0]
    (tmp_path / "bad.feather").write_bytes(b"nope, not feather")
    with pytest.raises(InputError, match="is not a readable Arrow file"):
        read_score_file(tmp_path / "bad.feather")


@pytest.mark.integration
def test_score_a_datasets_folder_and_an_arrow_file_like_jsonl(tmp_path):
    """The API and the CLI: the same windows and the same scores from every format."""
    pytest.importorskip("datasets", reason="the 'datasets' extra is not installed")
    import memclaim as mc
    from memclaim.cli.main import main

    recs = [
        {"id": f"r{i}", "text": f"The mill on the river turned {i} times before the dawn came up."}
        for i in range(3)
    ]
    (tmp_path / "p.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    _save_dataset(tmp_path / "ds", recs)
    _write_arrow(tmp_path / "p.arrow", "ipc-stream", _table(recs))
    kw = dict(prefix_tokens=4, suffix_tokens=4, policies=["full"])
    ref = mc.score("toy", str(tmp_path / "p.jsonl"), **kw).scores("full").logq
    for src in ("ds", "p.arrow"):
        got = mc.score("toy", str(tmp_path / src), **kw).scores("full").logq
        assert got.tolist() == ref.tolist()
    assert (
        main(
            [
                "score",
                "toy",
                "--input",
                str(tmp_path / "ds"),
                "--prefix-tokens",
                "4",
                "--suffix-tokens",
                "4",
                "--policy",
                "full",
                "--out",
                str(tmp_path / "store"),
                "--no-progress",
                "--json",
            ]
        )
        == 0
    )
    run = json.loads(next((tmp_path / "store" / "runs").glob("*/run.json")).read_text())
    assert json.dumps(run).count(str(tmp_path / "ds")) >= 1
