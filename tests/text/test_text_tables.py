"""memclaim.text.tables: texts given as Python objects read like files (same fields, ids, checks)."""

from __future__ import annotations

import json

import pytest

from memclaim.errors import InputError
from memclaim.text.io import Record, read_passages
from memclaim.text.tables import (
    is_table,
    passages_from_items,
    passages_from_object,
    passages_from_table,
)

RECS = [{"id": "a", "text": "first text"}, {"id": "b", "text": "  "}, {"id": "c", "text": "third"}]


def test_list_dataframe_arrow_and_dataset_give_the_same_records(tmp_path):
    import datasets
    import pandas as pd
    import pyarrow as pa

    ref = passages_from_items(RECS, source="texts")
    assert [(r.id, r.text) for r in ref.records] == [("a", "first text"), ("c", "third")]
    assert ref.skipped_empty == 1 and ref.skipped_ids == ("b",)
    df = pd.DataFrame(RECS)
    for obj, kind in (
        (df, "pandas DataFrame"),
        (pa.Table.from_pandas(df), "pyarrow Table"),
        (datasets.Dataset.from_pandas(df), "datasets Dataset"),
        (RECS, "python list"),
        (iter(RECS), "python iterable"),
    ):
        got, k = passages_from_object(obj, source="texts")
        assert k == kind and got.records == ref.records and got.sha256 == ref.sha256, kind
        assert is_table(obj) == (kind not in ("python list", "python iterable"))
    # a file with the same records holds the same texts (its hash is the file's bytes)
    p = tmp_path / "in.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in RECS), encoding="utf-8")
    assert read_passages(p).records == ref.records
    # a selected Dataset honours its indices mapping
    sel = datasets.Dataset.from_pandas(df).select([2])
    assert [r.id for r in passages_from_table(sel).records] == ["c"]


def test_bare_strings_records_and_prefix_suffix_pairs():
    p = passages_from_items(["x y", Record("r", "ab", suffix_start=1)])
    assert [(r.id, r.text) for r in p.records] == [("rec0", "x y"), ("r", "ab")]
    pair = passages_from_items(
        [{"prefix": "Q: ", "suffix": "A"}], prefix_field="prefix", suffix_field="suffix"
    )
    assert pair.records[0].text == "Q: A" and pair.records[0].suffix == "A"


@pytest.mark.parametrize(
    "obj, match",
    [
        ("one string", "single string"),
        ([3], "expected a text, a dict or a Record"),
        ([{"id": "a", "text": "x"}, {"id": "a", "text": "y"}], "duplicate id 'a'"),
        ([{"body": "x"}, {"id": "b"}], "record has no 'body' field"),
        ([], "is empty"),
        ([{"id": "a", "txt": "x"}], "cannot find a text field"),
        (42, "must be a file path, a list of texts or records, or a table"),
    ],
)
def test_bad_objects_are_refused_with_the_item(obj, match):
    with pytest.raises(InputError, match=match):
        passages_from_object(obj, source="texts")


def test_tables_refuse_missing_columns_and_empty_tables():
    import pandas as pd

    with pytest.raises(InputError, match="cannot find a text field"):
        passages_from_table(pd.DataFrame({"id": ["a"], "txt": ["x"]}))
    with pytest.raises(InputError, match="has no rows"):
        passages_from_table(pd.DataFrame({"text": []}))
    with pytest.raises(InputError, match="has no text field 'body'"):
        passages_from_table(pd.DataFrame({"text": ["x"]}), text_field="body")


# ---------------------------------------------------------------- issue 25 items 4 and 10
def test_objects_memclaim_cannot_read_as_one_set_are_refused_by_name():
    """An in-memory DatasetDict, an IterableDataset and a DataFrame with repeated column names
    raised KeyError/AttributeError/ValueError tracebacks; each is now an InputError with the fix."""
    import datasets
    import pandas as pd

    ds = datasets.Dataset.from_list([{"id": "a", "text": "one two"}])
    with pytest.raises(
        InputError, match=r"texts is a datasets DatasetDict with the splits \['train', 'test'\]"
    ) as e:
        passages_from_object(datasets.DatasetDict(train=ds, test=ds))
    assert e.value.hint == "pass one split, e.g. ds['train']"
    with pytest.raises(InputError, match="IterableDataset, a stream without a length") as e:
        passages_from_object(ds.to_iterable_dataset())
    assert "ds.take(1000)" in e.value.hint
    df = pd.DataFrame([["a", "x", "y"]], columns=["id", "text", "text"])
    with pytest.raises(InputError, match=r"duplicate column names \['text'\]"):
        passages_from_object(df)
    with pytest.raises(InputError, match=r"duplicate column names \['text'\]"):
        passages_from_table(df)


def test_python_ids_are_strings_or_integers_and_valid_unicode():
    """ids were stringified ('True', '[1, 2]', 'nan'); a lone surrogate raised UnicodeEncodeError
    from the hash of the records."""
    assert [
        r.id
        for r in passages_from_items([{"id": 3, "text": "x"}, {"id": "k", "text": "y"}]).records
    ] == ["3", "k"]
    for bad, shown in (
        (True, "id True is a bool"),
        ([1, 2], r"id \[1, 2\] is a list"),
        (float("nan"), "id nan is a float"),
    ):
        with pytest.raises(
            InputError, match=f"'texts' item 1: {shown}, not a string or an integer"
        ):
            passages_from_items([{"id": "a", "text": "x"}, {"id": bad, "text": "y"}])
    with pytest.raises(InputError, match="item 0: id 'a\\\\ud800' holds a lone surrogate U\\+D800"):
        passages_from_items([{"id": "a\ud800", "text": "hello"}])
    with pytest.raises(InputError, match="item 0: the text holds a lone surrogate"):
        passages_from_items(["hel\udc00lo"])


def test_a_first_item_without_id_keeps_the_ids_of_the_others():
    import pandas as pd

    items = ["a bare text", {"text": "no id"}, {"id": "x", "text": "with id"}]
    assert [r.id for r in passages_from_items(items).records] == ["rec0", "rec1", "x"]
    df = pd.DataFrame({"id": [None, "y"], "text": ["first", "second"]})
    assert [r.id for r in passages_from_table(df).records] == ["rec0", "y"]
