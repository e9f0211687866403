"""Reading user inputs: passages (JSONL, TXT, CSV, Parquet, Arrow IPC/Feather files, and folders
written by HuggingFace ``datasets``' ``save_to_disk``; one text per record, optional id) and single
long documents. Every failure names the file, the record and the fix.

A record may give its prefix and suffix explicitly (``prefix_field`` and ``suffix_field``, for
JSONL/CSV/Parquet): its text is then prefix + suffix and ``Record.suffix_start`` marks where the
suffix starts, so that a target can start a sentence ([EM] App. A.1) and windows are still cut
from one tokenization of the whole text.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InputError, require
from ..fsutil import sha256_bytes, sha256_file

if TYPE_CHECKING:
    import pyarrow as pa

TEXT_FIELDS = ("text", "passage", "content", "document", "body")
ID_FIELDS = ("id", "doc_id", "uid", "key", "name")
#: input formats (``--format``): ``arrow`` is an Arrow IPC file or stream, or a Feather file (v1 or
#: v2); ``datasets`` a folder written by ``datasets.Dataset.save_to_disk`` (the ``datasets`` extra)
FORMATS = ("jsonl", "txt", "csv", "parquet", "arrow", "datasets")
#: the formats a file's extension names (a folder is a ``datasets`` folder)
EXTENSIONS = {
    "jsonl": "jsonl",
    "ndjson": "jsonl",
    "json": "jsonl",
    "txt": "txt",
    "text": "txt",
    "csv": "csv",
    "tsv": "csv",
    "parquet": "parquet",
    "pq": "parquet",
    "arrow": "arrow",
    "feather": "arrow",
    "ipc": "arrow",
    "arrows": "arrow",
}


@dataclass(frozen=True)
class Record:
    """One text. ``suffix_start`` is set when the record gave its prefix and suffix explicitly
    (``--prefix-field``/``--suffix-field``): ``text`` is prefix + suffix and the suffix starts at
    that character (windows are cut there, :func:`memclaim.text.windows.passage_windows`)."""

    id: str
    text: str
    suffix_start: int | None = None

    @property
    def prefix(self) -> str | None:
        return None if self.suffix_start is None else self.text[: self.suffix_start]

    @property
    def suffix(self) -> str | None:
        return None if self.suffix_start is None else self.text[self.suffix_start :]


@dataclass(frozen=True)
class Passages:
    """The records read from one file, with what was skipped and the file's content hash."""

    path: str
    sha256: str
    records: tuple[Record, ...]
    skipped_empty: int = 0
    skipped_ids: tuple[str, ...] = field(default=(), repr=False)

    def __len__(self) -> int:
        return len(self.records)


def _read_bytes(path: Path) -> bytes:
    if not path.exists():
        raise InputError(f"input file {str(path)!r} does not exist", hint="check the path")
    if path.is_dir():
        raise InputError(f"input {str(path)!r} is a directory, not a file", hint="pass a file")
    if not path.is_file():  # a device, pipe or socket: /dev/zero would be read forever
        raise InputError(
            f"input {str(path)!r} is not a regular file (a device, pipe or socket)",
            hint="save the input to a file and pass its path",
        )
    data = path.read_bytes()
    if not data.strip():
        raise InputError(
            f"input file {str(path)!r} is empty", hint="pass a file with at least one text"
        )
    return data


def _decode(path: Path, data: bytes) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(
            f"{str(path)!r} is not valid UTF-8: byte 0x{data[exc.start]:02x} at offset {exc.start} (line {line})",
            hint="re-encode the file as UTF-8, e.g. `iconv -f latin1 -t utf-8 IN > OUT`",
        ) from None
    return text[1:] if text.startswith("\ufeff") else text  # drop a UTF-8 BOM


def split_lines(text: str) -> list[str]:
    """The lines of a text file: split at ``\\n`` only, a ``\\r`` before it dropped (``\\r\\n``
    files). ``str.splitlines`` also splits at form feed, U+2028, U+0085 and other separators
    that are ordinary characters inside a record (issue 25: four TXT lines read as seven
    records; a valid JSONL line holding a raw U+2028 cut in two). The one line splitter of
    every line-oriented input (TXT, JSONL, id lists, exclusion files, kappa samples).

    >>> split_lines("one\\ftwo\\r\\nthree\\u2028four\\n")
    ['one\\x0ctwo', 'three\\u2028four']
    """
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the newline that ends the last line starts no new one
    return [ln[:-1] if ln.endswith("\r") else ln for ln in lines]


def check_unicode(value: str, what: str, where: str = "") -> str:
    """``value`` unchanged when it is valid Unicode text; a lone surrogate (U+D800..U+DFFF, which a
    JSON escape such as ``"\\ud800"`` or a Python string can hold but no UTF-8 file, tokenizer or
    report can) is an error naming where it is.

    >>> check_unicode("caf\u00e9", "text")
    'caf\u00e9'
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        shown = (
            value[max(0, exc.start - 20) : exc.start + 20]
            .encode("utf-8", "backslashreplace")
            .decode("utf-8")
        )
        raise InputError(
            f"{where + ': ' if where else ''}{what} holds a lone surrogate "
            f'U+{ord(value[exc.start]):04X} at character {exc.start} (near "{shown}"), which is not '
            "valid Unicode text",
            hint="fix the escape (a surrogate pair such as \\ud83d\\ude00 is one "
            "character; a lone \\ud800 is none), or remove the character",
        ) from None
    return value


def normalized_text(text: str) -> str:
    """The text as identity checks compare it: Unicode NFC, every run of whitespace (line endings
    CRLF/CR/LF, tabs, U+2028, non-breaking spaces, ...) one space, no whitespace at either end. Two
    files that differ only in line endings, wrapping or a trailing newline are the same text
    (issue 25: a document censused against its own CRLF copy was accepted).

    >>> normalized_text("In the\\r\\nbeginning \\n") == normalized_text("In the beginning")
    True
    """
    import unicodedata

    return " ".join(unicodedata.normalize("NFC", text).split())


def text_key(text: str) -> str:
    """sha256 of :func:`normalized_text`: what "the same text" means for identity checks.

    >>> text_key("a\\r\\nb") == text_key("a b\\n")
    True
    """
    return sha256_bytes(normalized_text(text).encode("utf-8", "surrogatepass"))


def record_id(value: Any, where: str) -> str | None:
    """A record id as memclaim stores it: a string as given, an integer (not a bool) written in
    decimal; None (or "") when the record has none. Anything else (True, a float such as nan,
    a list) is an error naming the record: it would be stringified into an id nobody wrote.

    >>> record_id("gen1", "line 1"), record_id(7, "row 0"), record_id(None, "row 1")
    ('gen1', '7', None)
    """
    if value is None or (isinstance(value, str) and value == ""):
        return None
    if isinstance(value, str):
        return check_unicode(value, f"id {value!r}", where)
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    import numbers

    if (
        isinstance(value, numbers.Integral)
        and not isinstance(value, bool)
        and type(value).__name__ != "bool_"
    ):
        return str(int(value))  # a numpy integer
    raise InputError(
        f"{where}: id {value!r} is a {type(value).__name__}, not a string or an integer",
        hint="write ids as strings (or whole numbers); a float, a bool or a list is not an id",
    )


def detect_format(path: str | Path, fmt: str | None = None) -> str:
    """The input format of ``path``: ``fmt`` when given (checked), ``datasets`` for a folder, else
    from the file's extension (:data:`EXTENSIONS`).

    >>> detect_format("verses.ndjson"), detect_format("x.dat", "csv"), detect_format("book.feather")
    ('jsonl', 'csv', 'arrow')
    """
    if fmt:
        fmt = fmt.lower()
        if fmt not in FORMATS:
            raise InputError(
                f"unknown input format {fmt!r}", hint=f"use one of {', '.join(FORMATS)}"
            )
        return fmt
    if Path(path).is_dir():
        return "datasets"
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix not in EXTENSIONS:
        raise InputError(
            f"cannot tell the format of {str(path)!r} from its extension {suffix!r}",
            hint="use .jsonl/.txt/.csv/.parquet/.arrow/.feather, a datasets folder (save_to_disk), or pass --format",
        )
    return EXTENSIONS[suffix]


def read_arrow_table(path: Path, data: bytes) -> pa.Table:
    """A pyarrow Table from the bytes of an Arrow file: the IPC file format (which Feather v2 is),
    the IPC stream format (what ``datasets`` writes as ``*.arrow``) or Feather v1, tried in that
    order; anything else is an error naming the file.

    >>> import pyarrow as pa, pyarrow.ipc as ipc
    >>> t, sink = pa.table({"id": ["a", "b"], "text": ["one", "two"]}), pa.BufferOutputStream()
    >>> with ipc.new_stream(sink, t.schema) as w: w.write_table(t)
    >>> read_arrow_table(Path("x.arrow"), sink.getvalue().to_pybytes()).to_pydict()
    {'id': ['a', 'b'], 'text': ['one', 'two']}
    """
    import pyarrow as pa
    import pyarrow.feather as feather
    import pyarrow.ipc as ipc

    buf = pa.py_buffer(data)
    errors = []
    for kind, read in (
        ("IPC file", lambda: ipc.open_file(buf).read_all()),
        ("IPC stream", lambda: ipc.open_stream(buf).read_all()),
        ("Feather", lambda: feather.read_table(pa.BufferReader(buf))),
    ):
        try:
            return read()
        except (pa.ArrowException, OSError, ValueError) as exc:
            errors.append(f"{kind}: {exc}")
    raise InputError(
        f"{str(path)!r} is not a readable Arrow file (tried the IPC file and stream formats and "
        f"Feather: {errors[0]})",
        hint="write it with pyarrow.ipc.new_file / pyarrow.feather.write_feather, or pass "
        "--format for the format it is in",
    )


def _folder_digest(path: Path) -> str:
    """sha256 naming a folder's contents: of the lines 'relative path NUL sha256 of the file's bytes'
    of every regular file under it, in sorted order (a copy of the folder has the same digest)."""
    lines = []
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        lines.append(
            f"{f.relative_to(path).as_posix()}\0{sha256_file(f)}\n"
        )  # in chunks: shards can be large
    return sha256_bytes("".join(lines).encode("utf-8"))


def read_datasets_folder(path: str | Path) -> tuple[pa.Table, str]:
    """(pyarrow Table, sha256) of a folder written by ``datasets.Dataset.save_to_disk``, loaded with
    ``datasets.load_from_disk`` (the ``datasets`` extra, imported only here). A ``DatasetDict``
    folder (several splits) is refused with the split folders to pass instead; the sha256 is
    :func:`_folder_digest` of the folder.

    >>> import datasets  # doctest: +SKIP
    >>> datasets.Dataset.from_dict({"text": ["one", "two"]}).save_to_disk("ds")  # doctest: +SKIP
    >>> table, sha = read_datasets_folder("ds")  # doctest: +SKIP
    >>> table.num_rows, table.column_names, sha[:12]  # doctest: +SKIP
    (2, ['text'], 'cc6240885d70')
    """
    path = Path(path)
    if not path.exists():
        raise InputError(f"input folder {str(path)!r} does not exist", hint="check the path")
    if not path.is_dir():
        raise InputError(
            f"--format datasets needs a folder written by Dataset.save_to_disk; {str(path)!r} is a file",
            hint="pass the folder, or drop --format to read the file by its extension",
        )
    dd = path / "dataset_dict.json"
    if dd.is_file():
        try:
            splits = list(json.loads(dd.read_text(encoding="utf-8")).get("splits", []))
        except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
            splits = sorted(p.name for p in path.iterdir() if p.is_dir())
        raise InputError(
            f"{str(path)!r} is a datasets DatasetDict with the splits {splits}: memclaim reads one "
            "set of texts per input",
            hint=f"pass one split's folder, e.g. {str(path / splits[0]) if splits else str(path / 'train')!r}",
        )
    if not (path / "state.json").is_file():
        raise InputError(
            f"input {str(path)!r} is a folder, but not one written by datasets' save_to_disk "
            "(it has no state.json)",
            hint="pass a file (JSONL/TXT/CSV/Parquet/Arrow), or a folder written by "
            "Dataset.save_to_disk",
        )
    datasets = require("datasets", "datasets")
    import pyarrow as pa

    bars_were_off = datasets.are_progress_bars_disabled()
    datasets.disable_progress_bars()  # no "Loading dataset" bar of its own under memclaim's progress
    try:
        ds = datasets.load_from_disk(str(path))
    except (FileNotFoundError, ValueError, KeyError, TypeError, OSError, pa.ArrowException) as exc:
        raise InputError(
            f"{str(path)!r} is not a readable datasets folder: {type(exc).__name__}: {exc}",
            hint="write it again with Dataset.save_to_disk, or check that no file in it was cut short "
            "or removed",
        ) from None
    finally:
        if not bars_were_off:
            datasets.enable_progress_bars()
    if (
        not hasattr(ds, "with_format")
        or not hasattr(ds, "column_names")
        or isinstance(ds.column_names, dict)
    ):
        raise InputError(
            f"{str(path)!r} holds a {type(ds).__name__}, not one Dataset",
            hint="pass one split's folder",
        )
    table = ds.with_format("arrow")[:]  # the rows in the dataset's order (indices mapping applied)
    return table, _folder_digest(path)


def table_rows(
    table: pa.Table,
    path: str | Path,
    *,
    text_field: str | None,
    id_field: str | None,
    prefix_field: str | None,
    suffix_field: str | None,
    pair: bool,
) -> list[tuple[str | None, Any, str]]:
    """(id as stored, text or (prefix, suffix), where) rows of an Arrow table (Parquet, Arrow,
    datasets, a pyarrow/pandas table given in Python): the one column picking for tables (the ids
    are checked by :func:`passages_from_rows`).

    >>> import pyarrow as pa
    >>> t = pa.table({"id": ["a", "b"], "text": ["one", "two"]})
    >>> table_rows(t, "x.parquet", text_field=None, id_field=None, prefix_field=None, suffix_field=None, pair=False)
    [('a', 'one', 'row 0'), ('b', 'two', 'row 1')]
    """
    cols = [str(c) for c in table.column_names]
    idf = pick_column(cols, id_field, ID_FIELDS, "id", path, required=False)
    if pair:
        pf = pick_column(cols, prefix_field, (), "prefix", path, required=True)
        sf = pick_column(cols, suffix_field, (), "suffix", path, required=True)
        texts = list(zip(table.column(pf).to_pylist(), table.column(sf).to_pylist()))
    else:
        tf = pick_column(cols, text_field, TEXT_FIELDS, "text", path, required=True)
        texts = table.column(tf).to_pylist()
    if not texts:
        raise InputError(f"{str(path)!r} has no rows", hint="pass a table with at least one text")
    ids = table.column(idf).to_pylist() if idf else [None] * len(texts)
    return [(i, t, f"row {n}") for n, (i, t) in enumerate(zip(ids, texts))]


def pick_column(
    fields: Iterable[str],
    preferred: str | None,
    candidates: Sequence[str],
    what: str,
    path: str | Path,
    *,
    required: bool = True,
    noun: str = "field",
) -> str | None:
    """The field (or column) of a file that holds ``what``: ``preferred`` if given (it must
    exist), else the first of ``candidates`` present; None when nothing fits and not ``required``.
    ``noun`` is the word of the file's kind ("field" for records, "column" for tables): the
    messages use it; the option they name is ``--{what}-field`` for both (one name per concept). The one column picker of
    memclaim (input records here, score files too).

    >>> pick_column(["id", "text"], None, ("text", "content"), "text", "in.jsonl")
    'text'
    >>> pick_column(["name", "logq"], "logq", ("score",), "score", "s.csv", noun="column")
    'logq'
    """
    fields = list(fields)
    if preferred:
        if preferred not in fields:
            raise InputError(
                f"{str(path)!r} has no {what} {noun} {preferred!r}; {noun}s are {fields}",
                hint=f"pass --{what}-field with one of {fields}",
            )
        return preferred
    for c in candidates:
        if c in fields:
            return c
    if required:
        raise InputError(
            f"{str(path)!r}: cannot find a {what} {noun} among {fields}",
            hint=f"name it one of {list(candidates)} or pass --{what}-field",
        )
    return None


def id_field_of(records: Iterable[dict], id_field: str | None, path: str | Path) -> str | None:
    """The id field of records given as dicts (JSONL lines, Python dicts): ``id_field`` when given
    (some record must have it), else the first of :data:`ID_FIELDS` that any record has. Looked
    up over every record, not the first one only: a first record without an id must not make
    memclaim ignore the ids of all the others (issue 25). A record without the field is named by
    its position (``rec<n>``).

    >>> id_field_of([{"text": "a"}, {"id": "x", "text": "b"}], None, "in.jsonl")
    'id'
    """
    found: list[str] = []
    first_keys = None
    for obj in records:
        if first_keys is None:
            first_keys = list(obj.keys())
        if id_field is not None:
            if id_field in obj:
                return id_field
            continue
        for c in ID_FIELDS:
            if c in obj and c not in found:
                found.append(c)
        if found and found[0] == ID_FIELDS[0]:
            break  # nothing outranks the first candidate
    if id_field is not None:
        if first_keys is None:
            return None  # bare strings only: they have no fields at all
        raise InputError(
            f"{str(path)!r} has no id field {id_field!r}; fields are {first_keys}",
            hint=f"pass --id-field with one of {first_keys}",
        )
    for c in ID_FIELDS:
        if c in found:
            return c
    return None


def read_passages(
    path: str | Path,
    *,
    fmt: str | None = None,
    text_field: str | None = None,
    id_field: str | None = None,
    prefix_field: str | None = None,
    suffix_field: str | None = None,
) -> Passages:
    """Read one text per record. Records whose text is empty/whitespace are skipped and counted;
    a record without the text field, or a non-string text, is an error naming the record.

    With ``prefix_field`` and ``suffix_field`` (both, and not with ``text_field``) each record
    gives its prefix and suffix: the record's text is prefix + suffix, ``suffix_start`` is
    len(prefix). A null or empty prefix is the empty prefix; a record whose suffix is null, empty
    or whitespace is skipped and counted as empty; a record without one of the fields, or a
    non-string field, is an error naming the record.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "in.jsonl"
    >>> _ = p.write_text('{"id": "a", "text": "first"}\\n{"id": "b", "text": ""}\\n')
    >>> ps = read_passages(p)
    >>> [(r.id, r.text) for r in ps.records], ps.skipped_empty
    ([('a', 'first')], 1)
    """
    path = Path(path)
    fmt = detect_format(path, fmt)
    pair = check_fields(text_field=text_field, prefix_field=prefix_field, suffix_field=suffix_field)
    if pair:
        if fmt == "txt":
            raise InputError(
                f"{str(path)!r} is plain text: it has no fields for --prefix-field/--suffix-field",
                hint="give the records as JSONL, CSV or Parquet with a prefix and a suffix field",
            )
    fields = dict(
        text_field=text_field,
        id_field=id_field,
        prefix_field=prefix_field,
        suffix_field=suffix_field,
        pair=pair,
    )
    if fmt == "datasets":
        table, digest = read_datasets_folder(path)
        return passages_from_rows(
            table_rows(table, path, **fields),
            source=str(path),
            sha256=digest,
            prefix_field=prefix_field,
            suffix_field=suffix_field,
        )
    data = _read_bytes(path)
    digest = sha256_bytes(data)
    rows: list[tuple[str | None, object, str]] = []  # (id, text or (prefix, suffix), where)
    if fmt in ("parquet", "arrow"):
        if fmt == "arrow":
            table = read_arrow_table(path, data)
        else:
            import pyarrow as pa
            import pyarrow.parquet as pq

            try:
                table = pq.read_table(io.BytesIO(data))
            except (pa.ArrowInvalid, OSError) as exc:
                raise InputError(
                    f"{str(path)!r} is not a readable Parquet file: {exc}", hint="check the file"
                ) from None
        rows = table_rows(table, path, **fields)
    else:
        text = _decode(path, data)
        if fmt == "txt":
            # one text per non-empty line; ids are line numbers (1-based)
            for n, line in enumerate(split_lines(text), start=1):
                if line.strip():
                    rows.append((f"line{n}", line, f"line {n}"))
        elif fmt == "jsonl":
            stripped = text.lstrip()
            if stripped.startswith("["):
                try:
                    objs = json.loads(text)
                except json.JSONDecodeError as exc:
                    raise InputError(
                        f"{str(path)!r}: invalid JSON: {exc}", hint="use one JSON object per line"
                    ) from None
                items = [(o, f"item {n}") for n, o in enumerate(objs)]
            else:
                items = []
                for n, line in enumerate(split_lines(text), start=1):
                    if not line.strip():
                        continue
                    try:
                        items.append((json.loads(line), f"line {n}"))
                    except json.JSONDecodeError as exc:
                        raise InputError(
                            f"{str(path)!r} line {n}: invalid JSON ({exc.msg})",
                            hint="use one JSON object per line",
                        ) from None
            tf = None
            idf = id_field_of((o for o, _ in items if isinstance(o, dict)), id_field, path)
            for obj, where in items:
                if isinstance(obj, str):
                    if pair:
                        raise InputError(
                            f"{str(path)!r} {where}: a bare string has no prefix and suffix fields",
                            hint='write records like {"prefix": ..., "suffix": ...}',
                        )
                    rows.append((None, obj, where))
                    continue
                if not isinstance(obj, dict):
                    raise InputError(
                        f"{str(path)!r} {where}: expected a JSON object or string, got {type(obj).__name__}",
                        hint='write records like {"id": ..., "text": ...}',
                    )
                if tf is None:
                    if pair:
                        tf = (
                            pick_column(
                                obj.keys(), prefix_field, (), "prefix", path, required=True
                            ),
                            pick_column(
                                obj.keys(), suffix_field, (), "suffix", path, required=True
                            ),
                        )
                    else:
                        tf = pick_column(
                            obj.keys(), text_field, TEXT_FIELDS, "text", path, required=True
                        )
                rid = obj.get(idf) if idf else None  # checked with the others in passages_from_rows
                if pair:
                    missing = [f for f in tf if f not in obj]
                    if missing:
                        raise InputError(
                            f"{str(path)!r} {where}: record has no {missing[0]!r} field: {str(obj)[:80]}",
                            hint='give every record a prefix and a suffix (null or "" for an empty '
                            "prefix), or remove it",
                        )
                    rows.append((rid, (obj[tf[0]], obj[tf[1]]), where))
                    continue
                if tf not in obj:
                    raise InputError(
                        f"{str(path)!r} {where}: record has no {tf!r} field: {str(obj)[:80]}",
                        hint="give every record a text, or remove it",
                    )
                rows.append((rid, obj[tf], where))
        else:  # csv / tsv
            fieldnames, records_ = read_csv_records(path, text, tsv=path.suffix.lower() == ".tsv")
            if not fieldnames:
                raise InputError(
                    f"{str(path)!r}: CSV has no header row",
                    hint="add a header with a 'text' column",
                )
            idf = pick_column(fieldnames, id_field, ID_FIELDS, "id", path, required=False)
            wanted = (
                (
                    pick_column(fieldnames, prefix_field, (), "prefix", path, required=True),
                    pick_column(fieldnames, suffix_field, (), "suffix", path, required=True),
                )
                if pair
                else (
                    pick_column(fieldnames, text_field, TEXT_FIELDS, "text", path, required=True),
                )
            )
            for line, row in records_:
                # a row with fewer fields than the header has None for the missing ones: a record
                # without its text stops the command (docs/inputs.md), an empty field is skipped
                missing = [f for f in wanted if row.get(f) is None]
                if missing:
                    n_fields = sum(v is not None for v in row.values())
                    raise InputError(
                        f"{str(path)!r} line {line}: record has no {missing[0]!r} field (the row has "
                        f"{n_fields} of the header's {len(fieldnames)} fields)",
                        hint="give every row all the header's fields (an empty text is written as "
                        "two delimiters, e.g. 'id,'), or remove the row",
                    )
                rid = row.get(idf) if idf else None
                rows.append(
                    (rid, tuple(row[f] for f in wanted) if pair else row[wanted[0]], f"line {line}")
                )
    return passages_from_rows(
        rows, source=str(path), sha256=digest, prefix_field=prefix_field, suffix_field=suffix_field
    )


def read_csv_records(
    path: Path, text: str, *, tsv: bool = False
) -> tuple[list[str], list[tuple[int, dict]]]:
    """(header, [(line where the record starts, {column: value})]) of a CSV/TSV text, read
    strictly: a quoted field left open (which would swallow every following row into one
    field), a stray quote or a row with more fields than the header is an error naming the line.

    >>> read_csv_records(Path("in.csv"), 'id,text\\na,"one, two"\\n')
    (['id', 'text'], [(2, {'id': 'a', 'text': 'one, two'})])
    """
    reader = csv.reader(io.StringIO(text), dialect="excel-tab" if tsv else "excel", strict=True)
    out: list[tuple[int, dict]] = []
    header: list[str] = []
    start = 1
    try:
        for row in reader:
            if not header:
                header = row
            elif row:
                if len(row) > len(header):
                    raise InputError(
                        f"{str(path)!r} line {start}: {len(row)} fields, the header has {len(header)}",
                        hint="quote fields that contain the delimiter",
                    )
                out.append((start, dict(zip(header, row + [None] * (len(header) - len(row))))))
            start = reader.line_num + 1
    except csv.Error as exc:
        raise InputError(
            f"{str(path)!r}: malformed CSV in the record starting on line {start}: {exc}",
            hint='close every quoted field with a double quote; write a quote inside a field as "" '
            "(a field left open would merge all following rows into one)",
        ) from None
    return header, out


def read_document(path: str | Path) -> tuple[str, str]:
    """Read one long UTF-8 document; returns (text, sha256 of the bytes).

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "book.txt"
    >>> _ = p.write_bytes(b"In the beginning")
    >>> read_document(p)[0]
    'In the beginning'
    """
    path = Path(path)
    data = _read_bytes(path)
    return _decode(path, data), sha256_bytes(data)


def check_fields(
    *,
    text_field: str | None = None,
    prefix_field: str | None = None,
    suffix_field: str | None = None,
) -> bool:
    """Check the field options of a passage input; True when records give prefix and suffix
    fields (both, different, and not with a text field).

    >>> check_fields(), check_fields(prefix_field="context", suffix_field="target")
    (False, True)
    """
    pair = prefix_field is not None or suffix_field is not None
    if pair:
        if prefix_field is None or suffix_field is None:
            raise InputError(
                f"--prefix-field and --suffix-field go together, got only "
                f"{'--prefix-field' if prefix_field else '--suffix-field'} "
                f"{prefix_field if prefix_field else suffix_field!r}",
                hint="name both fields, e.g. --prefix-field context --suffix-field target",
            )
        if prefix_field == suffix_field:
            raise InputError(
                f"--prefix-field and --suffix-field name the same field {prefix_field!r}",
                hint="the prefix and the suffix must be two different fields",
            )
        if text_field is not None:
            raise InputError(
                f"--text-field {text_field!r} cannot be combined with --prefix-field/--suffix-field",
                hint="a record's text is its prefix field + its suffix field; drop --text-field",
            )
    return pair


def passages_from_rows(
    rows: Sequence[tuple],
    *,
    source: str,
    sha256: str,
    prefix_field: str | None = None,
    suffix_field: str | None = None,
    default_id: str = "rec{n}",
) -> Passages:
    """Records from ``rows`` of (id or None, text or (prefix, suffix), where): an id is a string
    or an integer (:func:`record_id`; True, a float such as nan or a list is refused), a record
    without one is named ``default_id`` with its row number ``n`` (``rec<n>``), whatever the
    other records have; empty texts (or suffixes) are skipped and counted; a non-string text, a
    text or id that is not valid Unicode (a lone surrogate) or a duplicate id is an error naming
    ``source`` and the row.

    >>> p = passages_from_rows([(None, "x", "row 0"), ("k", "y", "row 1")], source="t", sha256="")
    >>> [r.id for r in p.records]
    ['rec0', 'k']
    """
    path = source
    pair = prefix_field is not None or suffix_field is not None
    records: list[Record] = []
    skipped: list[str] = []
    seen: dict[str, str] = {}
    for n, (rid, txt, where) in enumerate(rows):
        at = f"{str(path)!r} {where}"
        rid = record_id(rid, at)
        if rid is None:
            rid = default_id.format(n=n)
        start = None
        if pair:
            pre, suf = txt
            for name, v in ((prefix_field, pre), (suffix_field, suf)):
                if v is not None and not isinstance(v, str):
                    raise InputError(
                        f"{at}: field {name!r} is a {type(v).__name__}, not a string",
                        hint="store the prefix and the suffix as strings",
                    )
                if v is not None:
                    check_unicode(v, f"field {name!r}", at)
            pre = pre or ""
            start = len(pre)
            txt = (
                None if suf is None or not suf.strip() else pre + suf
            )  # no target: skipped as empty
        elif txt is not None and not isinstance(txt, str):
            raise InputError(
                f"{at}: text is a {type(txt).__name__}, not a string", hint="store texts as strings"
            )
        elif txt is not None:
            check_unicode(txt, "the text", at)
        if rid in seen:
            raise InputError(
                f"{at}: duplicate id {rid!r} (first at {seen[rid]})",
                hint="make record ids unique (a record without an id is named "
                f"{default_id.format(n='<n>')!r} by its position)",
            )
        seen[rid] = where
        if txt is None or not txt.strip():
            skipped.append(rid)
            continue
        records.append(Record(rid, txt, start))
    if not records:
        raise InputError(
            f"{str(path)!r} holds no non-empty {'suffixes' if pair else 'texts'} "
            f"({len(skipped)} empty records)",
            hint=f"check the {'suffix' if pair else 'text'} field and the file contents",
        )
    return Passages(str(path), sha256, tuple(records), len(skipped), tuple(skipped))
