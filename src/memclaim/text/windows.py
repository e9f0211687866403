"""Passages and documents -> (prefix, suffix) windows in token space ([EM] §4, §5).

Token space is decided once: a text is tokenized once (with character offsets), and prefix and
suffix are cut from that one token sequence; a suffix is never re-tokenized on its own. Every
window keeps the character span of its prefix and of its suffix separately: coverage and
heatmaps count only the suffix, which is what was extracted ([EM] Eq. 9).

Spans are contiguous and half-open: the prefix covers [start of its first token, end of its
last token), the suffix covers [end of the prefix, end of its last token). So the whitespace
between prefix and suffix belongs to the suffix, as it does to the suffix's first token.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Iterable, Protocol, Sequence

from ..errors import InputError
from ..validate import integer


class OffsetTokenizer(Protocol):
    def encode_with_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        """Token ids of ``text`` (no special tokens) and each token's [start, end) char offsets."""


@dataclass(frozen=True)
class Window:
    """One candidate: the natural prefix and the target suffix, in token ids and char spans."""

    source: str  # record id, or the document name
    index: int  # window number within the source
    prefix_ids: tuple[int, ...]
    suffix_ids: tuple[int, ...]
    prefix_span: tuple[int, int]
    suffix_span: tuple[int, int]
    prefix_text: str
    suffix_text: str
    token_start: int  # index of the first prefix token in the source's token sequence

    @property
    def window_id(self) -> str:
        return f"{self.source}#{self.index}"

    def content_hash(self) -> str:
        h = hashlib.sha256()
        h.update(repr((self.prefix_ids, self.suffix_ids)).encode())
        return h.hexdigest()


@dataclass(frozen=True)
class WindowSet:
    windows: tuple[Window, ...]
    n_sources: int
    skipped_short: int  # sources shorter than prefix + suffix tokens
    skipped_ids: tuple[str, ...]
    total_chars: dict  # source -> length in characters (for coverage)

    def __len__(self) -> int:
        return len(self.windows)


def _spans(offsets: Sequence[tuple[int, int]], start: int, n_prefix: int, n_suffix: int, text: str):
    p0 = offsets[start][0]
    p1 = max(o[1] for o in offsets[start:start + n_prefix]) if n_prefix else p0
    s1 = max(o[1] for o in offsets[start + n_prefix:start + n_prefix + n_suffix])
    s1 = max(s1, p1)
    return (p0, p1), (p1, s1)


def _check_lengths(prefix_tokens: int, suffix_tokens: int):
    integer("prefix tokens", prefix_tokens, minimum=0)
    integer("suffix tokens", suffix_tokens, minimum=1)


def passage_windows(records: Iterable, tokenizer: OffsetTokenizer, *, prefix_tokens: int,
                    suffix_tokens: int) -> WindowSet:
    """One window per passage: the first ``prefix_tokens`` tokens are the natural prefix, the next
    ``suffix_tokens`` the suffix ([EM] §4: 50-token prefix, 10- or 50-token suffix). Passages
    shorter than prefix + suffix tokens are skipped and counted; an error if none is left."""
    _check_lengths(prefix_tokens, suffix_tokens)
    need = prefix_tokens + suffix_tokens
    out: list[Window] = []
    skipped: list[str] = []
    chars: dict = {}
    n = 0
    for rec in records:
        n += 1
        ids, offsets = tokenizer.encode_with_offsets(rec.text)
        chars[rec.id] = len(rec.text)
        if len(ids) < need:
            skipped.append(rec.id)
            continue
        pspan, sspan = _spans(offsets, 0, prefix_tokens, suffix_tokens, rec.text)
        out.append(Window(
            source=rec.id, index=0,
            prefix_ids=tuple(ids[:prefix_tokens]),
            suffix_ids=tuple(ids[prefix_tokens:need]),
            prefix_span=pspan, suffix_span=sspan,
            prefix_text=rec.text[pspan[0]:pspan[1]], suffix_text=rec.text[sspan[0]:sspan[1]],
            token_start=0,
        ))
    if not out:
        raise InputError(
            f"all {n} texts are shorter than prefix + suffix = {need} tokens",
            hint="use longer texts or smaller --prefix-tokens/--suffix-tokens",
        )
    return WindowSet(tuple(out), n, len(skipped), tuple(skipped), chars)


def sliding_windows(text: str, tokenizer: OffsetTokenizer, *, prefix_tokens: int, suffix_tokens: int,
                    stride: int, source: str = "document") -> WindowSet:
    """Sliding windows over one long document ([EM] §5, census): window = prefix + suffix tokens,
    advancing ``stride`` tokens; window i starts at token i*stride. The tail that does not fill a
    whole window is not scored (reported via the coverage denominator, which is the whole text)."""
    _check_lengths(prefix_tokens, suffix_tokens)
    integer("stride", stride, minimum=1)
    need = prefix_tokens + suffix_tokens
    ids, offsets = tokenizer.encode_with_offsets(text)
    if len(ids) < need:
        raise InputError(
            f"document {source!r} has {len(ids)} tokens, shorter than one window of {need} tokens",
            hint="use a longer document or smaller --prefix-tokens/--suffix-tokens",
        )
    out = []
    for i, start in enumerate(range(0, len(ids) - need + 1, stride)):
        pspan, sspan = _spans(offsets, start, prefix_tokens, suffix_tokens, text)
        out.append(Window(
            source=source, index=i,
            prefix_ids=tuple(ids[start:start + prefix_tokens]),
            suffix_ids=tuple(ids[start + prefix_tokens:start + need]),
            prefix_span=pspan, suffix_span=sspan,
            prefix_text=text[pspan[0]:pspan[1]], suffix_text=text[sspan[0]:sspan[1]],
            token_start=start,
        ))
    return WindowSet(tuple(out), 1, 0, (), {source: len(text)})
