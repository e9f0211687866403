"""Passages from Python objects: a list of texts or of records (dicts with text/id or
prefix/suffix fields, :class:`~memclaim.text.io.Record`), a pandas DataFrame, a pyarrow Table
or a HuggingFace ``datasets.Dataset``: the same records, fields, ids and checks as a file read by
:func:`memclaim.text.io.read_passages` (fields found by the same names, empty texts skipped and
counted, duplicate ids refused), with a content hash over the records in place of the file's.

>>> p = passages_from_items(["first text", {"id": "b", "text": "second"}], source="texts")
>>> [(r.id, r.text) for r in p.records], p.sha256[:8]
([('rec0', 'first text'), ('b', 'second')], 'ac652b5e')
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from ..errors import InputError
from ..fsutil import sha256_bytes
from .io import (
    TEXT_FIELDS,
    Passages,
    Record,
    check_fields,
    id_field_of,
    passages_from_rows,
    pick_column,
    table_rows,
)

if TYPE_CHECKING:  # the annotations' names only
    import datasets
    import pandas
    import pyarrow

__all__ = ["passages_from_items", "passages_from_table", "passages_from_object", "is_table"]


def _digest(rows) -> str:
    """sha256 over the rows as JSON: what the records are, whatever object held them (ids as the
    strings they become; call it on rows :func:`passages_from_rows` has checked)."""
    return sha256_bytes(
        json.dumps(
            [[None if i is None else str(i), t] for i, t, _ in rows],
            ensure_ascii=False,
            default=str,
        ).encode("utf-8")
    )


def _checked(rows, *, source: str, prefix_field, suffix_field, default_id: str) -> Passages:
    """:func:`passages_from_rows` on ``rows``, then their digest (only valid text can be hashed:
    a lone surrogate is refused by the check, not by the encoder)."""
    ps = passages_from_rows(
        rows,
        source=source,
        sha256="",
        prefix_field=prefix_field,
        suffix_field=suffix_field,
        default_id=default_id,
    )
    return replace(ps, sha256=_digest(rows))


def passages_from_items(
    items: Sequence,
    *,
    source: str = "texts",
    text_field: str | None = None,
    id_field: str | None = None,
    prefix_field: str | None = None,
    suffix_field: str | None = None,
    default_id: str = "rec{n}",
) -> Passages:
    """Records from a sequence of strings, dicts or Records (item ``n`` is named ``source[n]`` in
    errors; an item without an id is named ``default_id.format(n=n)``). A dict's text field is found as in a JSONL file (``text``, ``passage``, ...) unless
    ``text_field`` is given; with ``prefix_field``/``suffix_field`` each dict gives both.

    >>> p = passages_from_items([{"doc_id": "x", "body": "a text"}, {"doc_id": "y", "body": " "}])
    >>> [(r.id, r.text) for r in p.records], p.skipped_ids
    ([('x', 'a text')], ('y',))
    """
    if isinstance(items, (str, bytes)):
        raise InputError(
            f"{source} must be a list of texts or records, got a single string {str(items)[:60]!r}",
            hint="pass a list such as ['first text', 'second text'], or a file path",
        )
    pair = check_fields(text_field=text_field, prefix_field=prefix_field, suffix_field=suffix_field)
    items = list(items)
    rows: list[tuple] = []
    tf = None
    idf = id_field_of((o for o in items if isinstance(o, dict)), id_field, source)
    for n, obj in enumerate(items):
        where = f"item {n}"
        if isinstance(obj, Record):
            if pair:
                if obj.suffix_start is None:
                    raise InputError(
                        f"{source!r} {where}: a Record without suffix_start has no prefix and suffix",
                        hint="give Record(id, prefix + suffix, suffix_start=len(prefix))",
                    )
                rows.append((obj.id, (obj.prefix, obj.suffix), where))
            else:
                rows.append((obj.id, obj.text, where))
            continue
        if isinstance(obj, str):
            if pair:
                raise InputError(
                    f"{source!r} {where}: a bare string has no prefix and suffix fields",
                    hint="give records like {'prefix': ..., 'suffix': ...}",
                )
            rows.append((None, obj, where))
            continue
        if not isinstance(obj, dict):
            raise InputError(
                f"{source!r} {where}: expected a text, a dict or a Record, got {type(obj).__name__}",
                hint="give texts as strings or records like {'id': ..., 'text': ...}",
            )
        if tf is None:
            if pair:
                tf = (
                    pick_column(obj.keys(), prefix_field, (), "prefix", source, required=True),
                    pick_column(obj.keys(), suffix_field, (), "suffix", source, required=True),
                )
            else:
                tf = pick_column(obj.keys(), text_field, TEXT_FIELDS, "text", source, required=True)
        rid = obj.get(idf) if idf else None  # checked (str or int) in passages_from_rows
        keys = tf if pair else (tf,)
        missing = [f for f in keys if f not in obj]
        if missing:
            raise InputError(
                f"{source!r} {where}: record has no {missing[0]!r} field: {str(obj)[:80]}",
                hint="give every record the same fields, or remove it",
            )
        rows.append((rid, (obj[tf[0]], obj[tf[1]]) if pair else obj[tf], where))
    if not rows:
        raise InputError(f"{source} is empty", hint="pass at least one text")
    return _checked(
        rows,
        source=source,
        prefix_field=prefix_field,
        suffix_field=suffix_field,
        default_id=default_id,
    )


def is_table(obj: object) -> bool:
    """A pandas DataFrame, a pyarrow Table or a HuggingFace Dataset (checked without importing them).

    >>> import pyarrow as pa
    >>> is_table(pa.table({"text": ["x"]})), is_table(["x"])
    (True, False)
    """
    top = _top(obj)
    if top == "pandas":
        return hasattr(obj, "columns")
    return top in ("pyarrow", "datasets") and hasattr(obj, "column_names")


def _top(obj) -> str:
    return type(obj).__module__.split(".")[0]


def _check_table(obj, source: str) -> None:
    """Refuse, naming it, a table-like object memclaim cannot read as one set of texts: a
    ``datasets.DatasetDict`` (several splits), an ``IterableDataset`` (a stream without a length)
    or a pandas DataFrame whose column names repeat (which column is the text?)."""
    top, name = _top(obj), type(obj).__name__
    if top == "datasets" and name in ("DatasetDict", "IterableDatasetDict"):
        splits = list(obj.keys())
        raise InputError(
            f"{source} is a datasets {name} with the splits {splits}: memclaim reads one set of texts "
            "per input",
            hint=f"pass one split, e.g. ds[{(splits[0] if splits else 'train')!r}]",
        )
    if top == "datasets" and name == "IterableDataset":
        raise InputError(
            f"{source} is a datasets IterableDataset, a stream without a length: memclaim reads and "
            "checks every text before any work, and a stream may not end",
            hint="materialize the texts you mean, e.g. datasets.Dataset.from_list(list(ds.take(1000))), "
            "or load the dataset without streaming=True",
        )
    if top == "pandas" and hasattr(obj, "columns"):
        cols = [str(c) for c in obj.columns]
        dup = sorted({c for c in cols if cols.count(c) > 1})
        if dup:
            raise InputError(
                f"{source}: the DataFrame has duplicate column names {dup} (columns {cols}): which one "
                "holds the texts or ids is ambiguous",
                hint="rename the columns (df.columns = [...]) or select the ones you mean",
            )


def _to_arrow(obj):
    import pyarrow as pa

    if isinstance(obj, pa.Table):
        return obj
    if _top(obj) == "pandas":
        return pa.Table.from_pandas(obj, preserve_index=False)
    if _top(obj) == "datasets":
        return obj.with_format("arrow")[:]  # honours select/shuffle (the indices mapping)
    raise InputError(
        f"cannot read texts from a {type(obj).__name__}",
        hint="pass a list, a pandas DataFrame, a pyarrow Table or a datasets.Dataset",
    )


def passages_from_table(
    table: pandas.DataFrame | pyarrow.Table | datasets.Dataset,
    *,
    source: str = "table",
    text_field: str | None = None,
    id_field: str | None = None,
    prefix_field: str | None = None,
    suffix_field: str | None = None,
    default_id: str = "rec{n}",
) -> Passages:
    """Records from the rows of a pandas DataFrame, a pyarrow Table or a ``datasets.Dataset``,
    columns found as in a CSV/Parquet file (``text``/``passage``/..., ``id``/``doc_id``/...).

    >>> import pyarrow as pa
    >>> [r.id for r in passages_from_table(pa.table({"uid": [7, 8], "content": ["a", "b"]})).records]
    ['7', '8']
    """
    pair = check_fields(text_field=text_field, prefix_field=prefix_field, suffix_field=suffix_field)
    _check_table(table, source)
    rows = table_rows(
        _to_arrow(table),
        source,
        text_field=text_field,
        id_field=id_field,
        prefix_field=prefix_field,
        suffix_field=suffix_field,
        pair=pair,
    )
    return _checked(
        rows,
        source=source,
        prefix_field=prefix_field,
        suffix_field=suffix_field,
        default_id=default_id,
    )


def passages_from_object(
    obj: object, *, source: str = "texts", **fields: str | None
) -> tuple[Passages, str]:
    """(records, kind) from a list or a table; ``kind`` says what the object was ("python list",
    "pandas DataFrame", "pyarrow Table", "datasets Dataset"). ``fields``: ``text_field``,
    ``id_field``, ``prefix_field``, ``suffix_field``, ``default_id`` as for :func:`passages_from_items`.

    >>> p, kind = passages_from_object(("one", "two"))
    >>> len(p), kind
    (2, 'python list')
    """
    _check_table(obj, source)
    if is_table(obj):
        kind = {"pandas": "pandas DataFrame", "datasets": "datasets Dataset"}.get(
            _top(obj), "pyarrow Table"
        )
        return passages_from_table(obj, source=source, **fields), kind
    if isinstance(
        obj, (list, tuple, str, bytes)
    ):  # a single string is refused there, not read letter by letter
        return passages_from_items(obj, source=source, **fields), "python list"
    try:
        items = list(obj)
    except TypeError:
        raise InputError(
            f"{source} must be a file path, a list of texts or records, or a table, got "
            f"{type(obj).__name__}",
            hint="e.g. ['first text', 'second text']",
        ) from None
    return passages_from_items(items, source=source, **fields), "python iterable"
