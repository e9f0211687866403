"""The two sides of an audit as texts: reading members and non-members (a file or a sequence of
texts/records), cutting them into the audit's windows ([EM] §4), and mapping windows back to
their records (for the shadows' IN/OUT masks)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import InputError
from ..text.io import read_passages
from ..text.tables import passages_from_object
from ..text.windows import passage_windows
from .settings import AuditSettings

if TYPE_CHECKING:  # the annotations' names only
    import datasets
    import pandas
    import pyarrow

    from ..models.loader import LoadedModel
    from ..text.windows import WindowSet

__all__ = ["TextSet", "read_texts", "audit_windows", "record_texts"]


@dataclass(frozen=True)
class TextSet:
    """One side of the audit: records and where they came from."""

    label: str
    records: tuple
    inputs: dict

    def __len__(self) -> int:
        return len(self.records)


def read_texts(
    source: str | Path | TextSet | Sequence | pandas.DataFrame | pyarrow.Table | datasets.Dataset,
    *,
    label: str,
    text_field: str | None = None,
    id_field: str | None = None,
    fmt: str | None = None,
) -> TextSet:
    """Records from a file or a datasets folder (JSONL/TXT/CSV/Parquet/Arrow,
    :func:`memclaim.text.io.read_passages`) or
    from Python objects (a sequence of strings, dicts or Records, a pandas DataFrame, a pyarrow
    Table, a ``datasets.Dataset``: :func:`memclaim.text.tables.passages_from_object`, fields
    found by the same names); an item without an id is named ``LABEL-<n>``.

    >>> read_texts(["a member text", {"id": "m2", "text": "another"}], label="members").records[1]
    Record(id='m2', text='another', suffix_start=None)
    """
    if isinstance(source, TextSet):
        return source
    if isinstance(source, (str, Path)):
        ps = read_passages(source, fmt=fmt, text_field=text_field, id_field=id_field)
        return TextSet(
            label,
            ps.records,
            {
                "role": label,
                "path": str(source),
                "sha256": ps.sha256,
                "records": len(ps.records),
                "skipped_empty": ps.skipped_empty,
            },
        )
    if fmt is not None:
        raise InputError(
            f"--format applies to files, not to {label} given in memory", hint="drop the format"
        )
    # the one reader of texts given as Python objects (memclaim.text.tables), with the audit's ids
    ps, _kind = passages_from_object(
        source, source=label, text_field=text_field, id_field=id_field, default_id=f"{label}-{{n}}"
    )
    return TextSet(
        label,
        ps.records,
        {
            "role": label,
            "path": None,
            "sha256": ps.sha256,
            "records": len(ps.records),
            "skipped_empty": ps.skipped_empty,
        },
    )


def audit_windows(
    model: LoadedModel, ts: TextSet, settings: AuditSettings, *, what: str
) -> WindowSet:
    """The audit's windows of one side (``prefix_tokens`` + ``suffix_tokens`` from each record's
    start); refuses fewer than two windows, saying how many texts were too short.

    >>> ts = read_texts(members, label="members")  # 8 texts  # doctest: +SKIP
    >>> ws = audit_windows(memclaim.load_model("toy"), ts, AuditSettings(prefix_tokens=16, suffix_tokens=16), what="members")  # doctest: +SKIP
    >>> len(ws), ws.windows[0].window_id  # doctest: +SKIP
    (8, 'members-0#0')
    """
    one = what[:-1]  # "members" -> "member"
    if not ts.records:
        raise InputError(f"the {what} set is empty", hint=f"give at least two {what}")
    try:
        ws = passage_windows(
            ts.records,
            model.tokenizer,
            prefix_tokens=settings.prefix_tokens,
            suffix_tokens=settings.suffix_tokens,
        )
    except InputError as exc:
        raise InputError(f"{what}: {exc.args[0].split(chr(10))[0]}", hint=exc.hint) from None
    if len(ws) < 2:
        raise InputError(
            f"an audit needs at least two {what}; {len(ws)} of {len(ts.records)} {one} texts are long enough for "
            f"a window of {settings.prefix_tokens} + {settings.suffix_tokens} tokens ({ws.skipped_short} too short)",
            hint=f"add {what} or use shorter windows (--prefix-tokens/--suffix-tokens)",
        )
    return ws


def record_texts(ts: TextSet, ws: WindowSet) -> list[str]:
    """The full record text behind each window (windows are cut from records by id).

    >>> record_texts(ts, ws)[0][:30]  # the ts, ws of audit_windows  # doctest: +SKIP
    'Boudi queacheachou naidea loun'
    """
    by_id = {r.id: r.text for r in ts.records}
    return [by_id[w.source] for w in ws.windows]
