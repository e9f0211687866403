"""Reading scores computed elsewhere ([EM] App. H.1: the same verify step applies to scores from
another toolkit): a CSV/TSV/Parquet/Arrow file with an id column and a score column (and optionally a
text column), and id lists (one id per line, e.g. controls verified as members, [EM] D.2).

Every failure names the file, the row and the fix.

>>> import tempfile, pathlib
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> _ = (d / "m.csv").write_text("id,score\\na,-1.5\\nb,-inf\\n")
>>> sf = read_score_file(d / "m.csv")
>>> sf.ids, sf.scores.tolist(), sf.columns["score"]
(('a', 'b'), [-1.5, -inf], 'score')
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..fsutil import sha256_bytes
from .io import pick_column, read_arrow_table, read_csv_records, split_lines

__all__ = [
    "ID_COLUMNS",
    "SCORE_COLUMNS",
    "TEXT_COLUMNS",
    "ScoreFile",
    "read_score_file",
    "read_id_list",
]

ID_COLUMNS = ("id", "doc_id", "uid", "key", "name")
SCORE_COLUMNS = ("score", "log_prob", "logprob", "log_q", "logq", "prob", "probability")
TEXT_COLUMNS = ("text", "suffix", "passage", "content")


@dataclass(frozen=True)
class ScoreFile:
    """Scores read from one CSV/TSV/Parquet file: ids, float64 scores, optional texts, the file's
    sha256 and the columns used."""

    path: Path
    ids: tuple[str, ...]
    scores: np.ndarray = field(repr=False)
    texts: tuple | None = field(repr=False)
    sha256: str
    columns: dict

    def __len__(self) -> int:
        return len(self.ids)

    def input_record(self, role: str) -> dict:
        """Provenance of the file for a report's ``inputs``: role, path, sha256, rows, columns."""
        return {
            "role": role,
            "path": str(self.path),
            "sha256": self.sha256,
            "rows": len(self.ids),
            "columns": self.columns,
        }


def _to_float(v, path, where, col):
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    if v is None:
        raise InputError(
            f"{str(path)!r} {where}: {col!r} is empty",
            hint="every row needs a score; -inf means probability 0",
        )
    s = str(v).strip()
    try:
        return float(s)
    except ValueError:
        raise InputError(
            f"{str(path)!r} {where}: {col!r} value {s!r} is not a number",
            hint="scores must be numbers (use -inf for an exact zero probability)",
        ) from None


def read_score_file(
    path: str | Path,
    *,
    id_column: str | None = None,
    score_column: str | None = None,
    text_column: str | None = None,
) -> ScoreFile:
    """Read an id column and a score column (and optionally a text column) from CSV/TSV/Parquet or
    an Arrow IPC/Feather file.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "scores.csv"
    >>> _ = p.write_text("id,log_prob\\na,-3.5\\nb,-inf\\n")
    >>> f = read_score_file(p)
    >>> f.ids, f.scores.tolist(), f.columns["score"]
    (('a', 'b'), [-3.5, -inf], 'log_prob')

    Columns are found by name (``id``/``doc_id``/..., ``score``/``log_prob``/...) unless given.
    Ids must be non-empty and unique; every score must be a number (``-inf`` for probability 0)."""
    p = Path(path)
    if not p.is_file():
        raise InputError(
            f"score file {str(p)!r} does not exist or is not a file", hint="check the path"
        )
    data = p.read_bytes()
    if not data.strip():
        raise InputError(
            f"score file {str(p)!r} is empty", hint="pass a file with a header and one row per item"
        )
    suffix = p.suffix.lower()
    if suffix in (".parquet", ".pq", ".arrow", ".feather", ".ipc", ".arrows"):
        if suffix in (".parquet", ".pq"):
            import pyarrow as pa
            import pyarrow.parquet as pq

            try:
                table = pq.read_table(io.BytesIO(data))
            except (pa.ArrowInvalid, OSError) as exc:
                raise InputError(f"{str(p)!r} is not a readable Parquet file: {exc}") from None
        else:
            table = read_arrow_table(p, data)
        cols = table.column_names
        ic = pick_column(cols, id_column, ID_COLUMNS, "id", p, noun="column")
        sc = pick_column(cols, score_column, SCORE_COLUMNS, "score", p, noun="column")
        tc = pick_column(
            cols, text_column, TEXT_COLUMNS, "text", p, required=bool(text_column), noun="column"
        )
        ids = [None if x is None else str(x) for x in table.column(ic).to_pylist()]
        raw = table.column(sc).to_pylist()
        texts = table.column(tc).to_pylist() if tc else None
        where = [f"row {i}" for i in range(len(ids))]
    elif suffix in (".csv", ".tsv", ".txt"):
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise InputError(
                f"{str(p)!r} is not valid UTF-8 (byte offset {exc.start})",
                hint="re-encode the file as UTF-8",
            ) from None
        header, records = read_csv_records(p, text, tsv=suffix == ".tsv")
        if not header:
            raise InputError(
                f"{str(p)!r} has no header row", hint="add a header such as 'id,score'"
            )
        cols = list(header)
        ic = pick_column(cols, id_column, ID_COLUMNS, "id", p, noun="column")
        sc = pick_column(cols, score_column, SCORE_COLUMNS, "score", p, noun="column")
        tc = pick_column(
            cols, text_column, TEXT_COLUMNS, "text", p, required=bool(text_column), noun="column"
        )
        rows = [r for _, r in records]
        ids = [r.get(ic) for r in rows]
        raw = [r.get(sc) for r in rows]
        texts = [r.get(tc) for r in rows] if tc else None
        where = [f"line {line}" for line, _ in records]
    else:
        raise InputError(
            f"cannot tell the format of {str(p)!r} from its extension {suffix!r}",
            hint="use .csv, .tsv, .parquet or .arrow/.feather",
        )
    if not ids:
        raise InputError(f"{str(p)!r} has a header but no rows", hint="add one row per scored item")
    scores = np.array([_to_float(v, p, w, sc) for v, w in zip(raw, where)], dtype=np.float64)
    seen = {}
    for i, (x, w) in enumerate(zip(ids, where)):
        if x in (None, ""):
            raise InputError(f"{str(p)!r} {w}: empty id", hint="give every row an id")
        if x in seen:
            raise InputError(
                f"{str(p)!r} {w}: duplicate id {x!r} (first at {where[seen[x]]})",
                hint="make ids unique",
            )
        seen[x] = i
    return ScoreFile(
        p,
        tuple(ids),
        scores,
        None if texts is None else tuple(texts),
        sha256_bytes(data),
        {"id": ic, "score": sc, "text": tc},
    )


def read_id_list(path: str | Path) -> tuple[str, ...]:
    """One id per line (blank lines and lines starting with # ignored).

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "ids.txt"
    >>> _ = p.write_text("# verified members\\nc-3\\n\\nc-7\\n")
    >>> read_id_list(p)
    ('c-3', 'c-7')
    """
    p = Path(path)
    if not p.is_file():
        raise InputError(f"id list {str(p)!r} does not exist", hint="one control id per line")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"id list {str(p)!r} is not valid UTF-8 (byte offset {exc.start})",
            hint="re-encode the file as UTF-8",
        ) from None
    out = []
    for line in split_lines(text):
        s = line.strip()
        if s and not s.startswith("#"):
            out.append(s)
    return tuple(out)
