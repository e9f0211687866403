"""Passages and documents -> (prefix, suffix) windows in token space ([EM] §4, §5).

Token space is decided once: a text is tokenized once (with character offsets), and prefix and
suffix are cut from that one token sequence; a suffix is never re-tokenized on its own. Every
window keeps the character span of its prefix and of its suffix separately: coverage and
heatmaps count only the suffix, which is what was extracted ([EM] Eq. 9).

Spans are contiguous and half-open: the prefix covers [start of its first token, end of its
last token), the suffix covers [end of the prefix, end of its last token). So the whitespace
between prefix and suffix belongs to the suffix, as it does to the suffix's first token.

Records that give their prefix and suffix explicitly (``Record.suffix_start``, from
``--prefix-field``/``--suffix-field``) are tokenized the same way, once, as prefix + suffix; the
boundary is the character where the suffix field starts, and a token that straddles it is
refused. The prefix is the whole prefix field (or its last ``prefix_tokens`` tokens), the suffix
the whole suffix field (or its first ``suffix_tokens`` tokens); spans are [.., boundary) and
[boundary, ..).

Memory follows what is scored, not the record's length ([EM] windows are 100 tokens; a record
may be a 60 MB line): a passage is tokenized only in a character slice around the window, grown
until the window's tokens are stable (:func:`cut_tokens`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ..errors import InputError
from ..procedure import WindowSpec
from ..validate import integer

if TYPE_CHECKING:
    import numpy as np


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
    # index of the first prefix token in the source's token sequence; None where it is not
    # known (a prefix field cut to its last prefix_tokens tokens without tokenizing all of it)
    token_start: int | None

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
    # how the windows were cut (lengths, fields, stride): the procedure of a run scoring them
    # records these lengths and no others (memclaim.procedure.WindowSpec)
    spec: WindowSpec | None = None

    def __len__(self) -> int:
        return len(self.windows)

    @property
    def cut(self) -> dict | None:
        """How windows were cut where it is not "prefix + suffix tokens from the start of each
        text" (e.g. {"prefix": "field", "suffix": "field"}), as the procedure records it."""
        return None if self.spec is None else self.spec.cut()


def _spans(offsets: Sequence[tuple[int, int]], start: int, n_prefix: int, n_suffix: int, text: str):
    p0 = offsets[start][0]
    p1 = max(o[1] for o in offsets[start : start + n_prefix]) if n_prefix else p0
    s1 = max(o[1] for o in offsets[start + n_prefix : start + n_prefix + n_suffix])
    s1 = max(s1, p1)
    return (p0, p1), (p1, s1)


# --------------------------------------------------------------------------- stable cuts
GUARD_TOKENS = 8  # tokens a slice must extend beyond the window on each cut side
SLICE_CHARS_PER_TOKEN = 8  # first slice: this many characters per token needed (English BPE: ~4)
SLICE_MIN_CHARS = 256


def split_at_char(
    ids: Sequence[int], offsets: Sequence[tuple[int, int]], boundary: int, *, text: str, what: str
) -> int:
    """The number k of tokens that end at or before character ``boundary``: tokens [:k] lie
    before it and tokens [k:] at or after it. A token that straddles the boundary is refused
    (InputError naming ``what``, the token and the boundary): the two sides cannot then be cut
    apart in token space ([EM] §4: prefix and suffix are cut from one tokenization).

    >>> split_at_char([1, 2, 3], [(0, 2), (2, 6), (6, 16)], 6, text="In the beginning", what="x")
    2
    """
    k = 0
    while (
        k < len(offsets)
        and offsets[k][1] <= boundary
        and (offsets[k][0] < boundary or offsets[k][1] == offsets[k][0])
    ):
        k += 1
    for t in range(k, len(offsets)):
        s, e = offsets[t]
        if s < boundary < e:
            raise InputError(
                f"{what}: the boundary at character {boundary} falls inside token {t} ({text[s:e]!r}, characters "
                f"{s}-{e}); the two sides cannot be cut apart in token space",
                hint="put the boundary at a token boundary, e.g. move a space from the end of the prefix (or of the "
                "prompt template) to the start of the suffix, or end the template with a newline",
            )
        if s < boundary:
            raise InputError(
                f"{what}: tokens are not in character order around character {boundary}",
                hint="use a standard (fast, offset-mapping) tokenizer",
            )
    return k


def _encode_slice(tokenizer, text: str, a: int, z: int):
    ids, offs = tokenizer.encode_with_offsets(text[a:z])
    if a:
        offs = [(s + a, e + a) for s, e in offs]
    return list(ids), [tuple(o) for o in offs]


def cut_tokens(
    tokenizer: OffsetTokenizer,
    text: str,
    *,
    at: int = 0,
    before: int | None = 0,
    after: int | None = None,
    what: str = "text",
) -> tuple[list[int], list[tuple[int, int]], list[int], list[tuple[int, int]], int | None]:
    """The tokens around character ``at`` as in the tokenization of the whole ``text``: the last
    ``before`` tokens that end at or before ``at`` and the first ``after`` tokens that start at or
    after it (None: all of them; fewer where the text has fewer), as
    ``(ids_before, offsets_before, ids_after, offsets_after, first_index)`` with character offsets
    into ``text``; ``first_index`` is the index of the first returned token in the whole text's
    tokenization, or None where the slice did not reach the start of the text (then it is not
    known). A token straddling ``at`` is refused.

    Only a slice of ``text`` is tokenized: it starts SLICE_CHARS_PER_TOKEN characters per token
    needed on each counted side and doubles until each side either reaches the end of the text or
    holds GUARD_TOKENS tokens beyond the ones taken, and the tokens taken (ids and offsets) are
    the same as in the previous, half-as-long slice. A slice that covers the whole text is exact.
    Otherwise the cut relies on the tokenizer being local (the tokens of a span do not depend on
    text many tokens away), as byte-level BPE, SentencePiece and WordPiece are: two cuts at
    different distances that agree are taken as the whole text's tokens; tests/text/test_text.py
    checks this against full tokenization. A hand-written search: tokenizers have no API for
    "the first n tokens of a text".

    >>> import memclaim; tok = memclaim.load_model("toy").tokenizer  # doctest: +SKIP
    >>> cut_tokens(tok, "In the beginning was the word", at=16, before=2, after=3)  # doctest: +SKIP
    ([78, 71], [(14, 15), (15, 16)], [221, 87, 65], [(16, 17), (17, 18), (18, 19)], 9)
    """
    n = len(text)
    want_l = 0 if before is None else before
    want_r = 0 if after is None else after
    grow_l = SLICE_MIN_CHARS + SLICE_CHARS_PER_TOKEN * (want_l + GUARD_TOKENS)
    grow_r = SLICE_MIN_CHARS + SLICE_CHARS_PER_TOKEN * (want_r + GUARD_TOKENS)
    prev = None
    straddled = False
    while True:
        a = 0 if before is None else max(0, at - grow_l)
        z = n if after is None else min(n, at + grow_r)
        ids, offs = _encode_slice(tokenizer, text, a, z)
        try:
            k = split_at_char(ids, offs, at, text=text, what=what) if at else 0
        except InputError:
            # a token across ``at`` in a slice may be the slice's own (a word cut by the slice's
            # end merges differently): refused where the whole text or two slices in a row say so
            if (a == 0 and z == n) or straddled:
                raise
            straddled, prev = True, None
            grow_l, grow_r = grow_l * 2, grow_r * 2
            continue
        straddled = False
        left_ok = a == 0 or k >= want_l + GUARD_TOKENS
        right_ok = z == n or len(ids) - k >= want_r + GUARD_TOKENS
        if left_ok and right_ok:
            lo = 0 if before is None else max(0, k - before)
            hi = len(ids) if after is None else min(len(ids), k + after)
            cand = (ids[lo:k], offs[lo:k], ids[k:hi], offs[k:hi], lo if a == 0 else None)
            if (a == 0 and z == n) or cand[:4] == (prev[:4] if prev else None):
                return cand
            prev = cand
        if not left_ok or (left_ok and right_ok and a > 0):
            grow_l *= 2
        if not right_ok or (left_ok and right_ok and z < n):
            grow_r *= 2


def _check_lengths(prefix_tokens: int, suffix_tokens: int):
    integer("prefix tokens", prefix_tokens, minimum=0)
    integer("suffix tokens", suffix_tokens, minimum=1)


def _length_summary(lengths) -> str:
    if not lengths:
        return ""
    ls = sorted(lengths)
    if len(ls) == 1:
        return f": the text has {ls[0]} tokens"
    return f": the texts have {ls[0]} to {ls[-1]} tokens, median {ls[len(ls) // 2]}"


def _split(total: int, prefix_tokens: int, suffix_tokens: int) -> tuple[int, int]:
    """``total`` tokens split in the asked prefix:suffix ratio, suffix >= 1."""
    p = (total * prefix_tokens) // max(1, prefix_tokens + suffix_tokens)
    p = min(p, total - 1)
    return p, total - p


def lengths_that_fit(
    lengths: Iterable[int], prefix_tokens: int, suffix_tokens: int, *, what: str = "every text"
) -> str:
    """The fix for texts shorter than one window: prefix/suffix lengths (in the asked ratio) that
    keep every text, and half of them, given their token counts ``lengths``.

    >>> lengths_that_fit([12, 30, 40], 50, 10)
    'use lengths that fit: --prefix-tokens 10 --suffix-tokens 2 keeps every text; --prefix-tokens 25 --suffix-tokens 5 keeps 2 of 3 (or use longer texts)'
    """
    ls = sorted(int(x) for x in lengths)
    if not ls or ls[-1] < 2:
        return "use longer texts (each needs at least 2 tokens: a prefix of 1 and a suffix of 1)"
    shortest, median = ls[0], ls[len(ls) // 2]
    out = []
    if shortest >= 2:
        p, q = _split(shortest, prefix_tokens, suffix_tokens)
        out.append(f"--prefix-tokens {p} --suffix-tokens {q} keeps {what}")
    if median >= 2 and median != shortest and len(ls) > 1:
        p, q = _split(median, prefix_tokens, suffix_tokens)
        out.append(
            f"--prefix-tokens {p} --suffix-tokens {q} keeps {sum(x >= median for x in ls)} of {len(ls)}"
        )
    if not out:
        p, q = _split(ls[-1], prefix_tokens, suffix_tokens)
        out.append(f"--prefix-tokens {p} --suffix-tokens {q} keeps the longest")
    return "use lengths that fit: " + "; ".join(out) + " (or use longer texts)"


def passage_windows(
    records: Iterable,
    tokenizer: OffsetTokenizer,
    *,
    prefix_tokens: int | None,
    suffix_tokens: int | None,
) -> WindowSet:
    """One window per passage: the first ``prefix_tokens`` tokens are the natural prefix, the next
    ``suffix_tokens`` the suffix ([EM] §4: 50-token prefix, 10- or 50-token suffix). Passages
    shorter than prefix + suffix tokens are skipped and counted; an error if none is left.

    Records with an explicit prefix and suffix (``suffix_start`` set) are cut at that character
    instead: the prefix is the whole prefix field (``prefix_tokens=None``) or its last
    ``prefix_tokens`` tokens, the suffix the whole suffix field (``suffix_tokens=None``) or its first
    ``suffix_tokens`` tokens; a side shorter than asked is skipped and counted as short.

    Each record is tokenized only around its window (:func:`cut_tokens`), so memory follows the
    window, not the record.

    >>> import memclaim; tok = memclaim.load_model("toy").tokenizer  # doctest: +SKIP
    >>> from memclaim.text.io import Record
    >>> w = passage_windows([Record("a", "In the beginning was the word")], tok, prefix_tokens=4, suffix_tokens=3)  # doctest: +SKIP
    >>> w.windows[0].prefix_text, w.windows[0].suffix_text  # doctest: +SKIP
    ('In the', ' begi')
    """
    recs = list(records)
    split = [getattr(r, "suffix_start", None) is not None for r in recs]
    fields = bool(recs) and all(split)
    if any(split) and not fields:
        raise InputError(
            "some records give an explicit prefix and suffix and others do not",
            hint="read every record with --prefix-field/--suffix-field, or none",
        )
    if fields:
        if prefix_tokens is not None:
            integer("prefix tokens", prefix_tokens, minimum=0)
        if suffix_tokens is not None:
            integer("suffix tokens", suffix_tokens, minimum=1)
    else:
        if prefix_tokens is None or suffix_tokens is None:
            raise InputError(
                "the whole-field prefix/suffix (no --prefix-tokens/--suffix-tokens) needs records with "
                "explicit prefix and suffix fields",
                hint="pass --prefix-field and --suffix-field, or give --prefix-tokens and --suffix-tokens",
            )
        _check_lengths(prefix_tokens, suffix_tokens)
    out: list[Window] = []
    skipped: list[str] = []
    short_lengths: list[
        int
    ] = []  # token counts of the texts too short for the window (exact: < need)
    chars: dict = {}
    for rec in recs:
        chars[rec.id] = len(rec.text)
        if fields:
            b = rec.suffix_start
            pid, poff, sid, soff, first = cut_tokens(
                tokenizer,
                rec.text,
                at=b,
                before=prefix_tokens,
                after=suffix_tokens,
                what=f"record {rec.id!r}",
            )
            if (
                (prefix_tokens is not None and len(pid) < prefix_tokens)
                or not sid
                or (suffix_tokens is not None and len(sid) < suffix_tokens)
            ):
                skipped.append(rec.id)
                continue
            p0 = poff[0][0] if pid else b
            s1 = max(b, max(e for _, e in soff))
            out.append(
                Window(
                    source=rec.id,
                    index=0,
                    prefix_ids=tuple(pid),
                    suffix_ids=tuple(sid),
                    prefix_span=(p0, b),
                    suffix_span=(b, s1),
                    prefix_text=rec.text[p0:b],
                    suffix_text=rec.text[b:s1],
                    token_start=first,
                )
            )
            continue
        need = prefix_tokens + suffix_tokens
        _, _, ids, offsets, _ = cut_tokens(
            tokenizer, rec.text, at=0, before=0, after=need, what=f"record {rec.id!r}"
        )
        if len(ids) < need:
            skipped.append(rec.id)
            short_lengths.append(len(ids))
            continue
        pspan, sspan = _spans(offsets, 0, prefix_tokens, suffix_tokens, rec.text)
        out.append(
            Window(
                source=rec.id,
                index=0,
                prefix_ids=tuple(ids[:prefix_tokens]),
                suffix_ids=tuple(ids[prefix_tokens:need]),
                prefix_span=pspan,
                suffix_span=sspan,
                prefix_text=rec.text[pspan[0] : pspan[1]],
                suffix_text=rec.text[sspan[0] : sspan[1]],
                token_start=0,
            )
        )
    n = len(recs)
    if not out:
        if fields:
            raise InputError(
                f"all {n} records are shorter than asked (prefix tokens {prefix_tokens}, suffix tokens {suffix_tokens}; "
                "None = the whole field)",
                hint="use smaller --prefix-tokens/--suffix-tokens, or omit them to take the whole fields",
            )
        raise InputError(
            f"all {n} texts are shorter than prefix + suffix = {prefix_tokens + suffix_tokens} tokens ({prefix_tokens} + "
            f"{suffix_tokens}){_length_summary(short_lengths)}",
            hint=lengths_that_fit(short_lengths, prefix_tokens, suffix_tokens),
        )
    spec = WindowSpec(prefix_tokens=prefix_tokens, suffix_tokens=suffix_tokens, fields=fields)
    return WindowSet(tuple(out), n, len(skipped), tuple(skipped), chars, spec)


# --------------------------------------------------------------------------- whole documents
DOCUMENT_CHUNK_CHARS = 1 << 16  # a book is tokenized in slices of this many characters (at least)
STITCH_TOKENS = 32  # tokens a slice holds beyond the point where the next one starts
STITCH_AGREE = 8  # tokens (ids and offsets) two slices must share where they are stitched


def _pre_token_starts(tokenizer, text: str, a: int, lo: int, hi: int):
    """The characters in [lo, hi] where ``tokenizer``'s pre-tokenizer starts a piece of the slice
    ``text[a:]`` (as offsets into the whole text), or None where the tokenizer cannot say."""
    import numpy as np

    f = getattr(tokenizer, "pre_token_starts", None)
    starts = f(text) if f is not None else None
    if starts is None:
        return None
    s = np.asarray(starts, dtype=np.int64) + a
    return s[(s >= lo) & (s <= hi)]


def _clean(st, en, k: int) -> bool:
    """True where token ``k`` starts a character of its own (no byte of its first character is
    in token k - 1, as when a multi-byte character is split over byte tokens)."""
    return k == 0 or bool(en[k - 1] <= st[k])


def _restart(tokenizer, text: str, a: int, z: int, ids, st, en, c: int) -> int | None:
    """The index k of the token of the slice ``text[a:z]`` (tokens ``ids``, ``st``, ``en``) at
    which the next slice starts: at most STITCH_TOKENS tokens before the slice's end and after
    token ``c`` (the first not yet yielded), at the start of a pre-token where the tokenizer says
    where those are (tokens never cross one, and a regex pre-tokenizer scanning from the slice's
    start puts the same boundaries there as in the whole text: the next slice then tokenizes from
    a boundary of the whole text's tokenization), else at a token that starts a character of its
    own. None where no such token is left."""
    import numpy as np

    last = len(ids) - STITCH_TOKENS
    if last <= c:
        return None
    pre = _pre_token_starts(tokenizer, text[a:z], a, int(st[c]) + 1, int(st[last]))
    if pre is not None and len(pre):
        for p in pre[::-1]:
            k = int(np.searchsorted(st, p, side="left"))
            if c < k <= last and st[k] == p and _clean(st, en, k):
                return k
    for k in range(last, c, -1):
        if _clean(st, en, k):
            return k
    return None


def _join(ids, st, en, k: int, nids, nst, nen) -> tuple[int, int] | None:
    """``(j, i)``: token j >= k of this slice and token i of the next are the same token, both
    start a character of their own, and the two tokenizations agree (ids and offsets) on the
    STITCH_AGREE tokens from there, ending at least STITCH_AGREE // 2 tokens before this slice's
    end (which its own cut may change). None where they never agree."""
    import numpy as np

    limit = len(ids) - STITCH_AGREE - STITCH_AGREE // 2  # the run [j, j + AGREE) ends before this
    for i in range(len(nids) - STITCH_AGREE + 1):
        if not _clean(nst, nen, i):
            continue
        j = int(np.searchsorted(st, nst[i], side="left"))
        if j > limit:
            return None
        while j <= limit and st[j] == nst[i]:
            if (
                j >= k
                and _clean(st, en, j)
                and en[j] == nen[i]
                and np.array_equal(ids[j : j + STITCH_AGREE], nids[i : i + STITCH_AGREE])
                and np.array_equal(st[j : j + STITCH_AGREE], nst[i : i + STITCH_AGREE])
                and np.array_equal(en[j : j + STITCH_AGREE], nen[i : i + STITCH_AGREE])
            ):
                return j, i
            j += 1
    return None


def encode_slices(
    tokenizer: OffsetTokenizer, text: str, *, chunk_chars: int = DOCUMENT_CHUNK_CHARS
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The tokenization of the whole ``text``, slice by slice: yields ``(ids, starts, ends)``
    int64 arrays whose concatenation is the whole text's tokenization, so memory follows the
    slice, not the book (a tokenizer's Python lists of ids and offset tuples take ~150 bytes a
    token).

    Slices of ``chunk_chars`` characters (longer where that holds too few tokens to stitch) are
    tokenized once each and chained: the next slice starts STITCH_TOKENS tokens or more before
    the end of the current one, at a pre-token boundary where the tokenizer says where those are
    (:func:`_restart`), and takes over at the first token where the two tokenizations agree for
    STITCH_AGREE tokens (same ids, same offsets) and which starts a character of its own in both
    (a join between the byte tokens of one character, as CJK characters and emoji are split by
    byte-level BPE, would repeat or drop bytes). From there on the next slice's own tokens are
    yielded: every token yielded comes from a tokenization that started at a verified boundary,
    and the part of it near its own end (which the cut may change) is replaced by the next
    slice's. This equals the whole text's tokenization for local tokenizers (byte-level BPE,
    SentencePiece, WordPiece; exactly so where the restart is a regex pre-tokenizer's boundary
    and the tokenizer has no normalizer: BPE never merges across a pre-token):
    tests/claims/test_census_book.py checks it against one-shot tokenization with small slices, on
    scripts whose characters are several tokens. Where no agreement is found, the rest is
    tokenized in one piece from the current slice's start (exact, at the memory cost of the
    rest). Hand-written: tokenizers have no streaming encoder with offsets.

    >>> import memclaim; tok = memclaim.load_model("toy").tokenizer  # doctest: +SKIP
    >>> [len(ids) for ids, starts, ends in encode_slices(tok, "In the beginning " * 2000, chunk_chars=8192)]  # doctest: +SKIP
    [5750, 5750, 5748, 5748, 1004]
    """
    import numpy as np

    n = len(text)

    def encode(a: int, size: int):
        # a slice of at least `size` characters from a, grown until it holds enough tokens to
        # stitch (or reaches the end)
        while True:
            z = n if n - a <= size else a + size
            ids, offs = tokenizer.encode_with_offsets(text[a:z])
            ids = np.asarray(ids, dtype=np.int64)
            offs = np.asarray(offs, dtype=np.int64).reshape(-1, 2) + a
            if z == n or len(ids) > 3 * STITCH_TOKENS:
                return z, ids, np.ascontiguousarray(offs[:, 0]), np.ascontiguousarray(offs[:, 1])
            size *= 2

    a = 0
    z, ids, st, en = encode(0, chunk_chars)
    c = 0  # the first token of the current slice not yet yielded
    done = 0  # tokens yielded
    while z < n:
        k = _restart(tokenizer, text, a, z, ids, st, en, c)
        cut = None
        if k is not None:
            b = int(st[k])
            nz, nids, nst, nen = encode(b, chunk_chars)
            cut = _join(ids, st, en, k, nids, nst, nen)
        if cut is None:  # no agreement: the rest in one piece, from where this slice started
            rz, rids, rst, ren = encode(a, n - a)
            if not (
                np.array_equal(rids[c : c + STITCH_AGREE], ids[c : c + STITCH_AGREE])
                and np.array_equal(rst[c : c + STITCH_AGREE], st[c : c + STITCH_AGREE])
            ):
                # the longer tokenization from the slice's start moved the tokens taken from it:
                # the whole text in one piece, from the token after the last one yielded
                rz, rids, rst, ren = encode(0, n)
                c = done
            ids, st, en, z = rids, rst, ren, rz
            break
        j, i = cut
        yield ids[c:j], st[c:j], en[c:j]
        done += j - c
        a, z, ids, st, en, c = b, nz, nids, nst, nen, i
    yield ids[c:], st[c:], en[c:]


def encode_document(
    tokenizer: OffsetTokenizer, text: str, *, chunk_chars: int = DOCUMENT_CHUNK_CHARS
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The tokenization of the whole ``text`` as arrays ``(ids, starts, ends)`` (int64), from
    :func:`encode_slices`.

    >>> import memclaim; tok = memclaim.load_model("toy").tokenizer  # doctest: +SKIP
    >>> ids, starts, ends = encode_document(tok, "In the beginning")  # doctest: +SKIP
    >>> ids[:5], starts[:5], ends[:5]  # doctest: +SKIP
    (array([ 41,  78, 275,  69, 273]), array([0, 1, 2, 5, 6]), array([1, 2, 5, 6, 8]))
    """
    import numpy as np

    parts = list(encode_slices(tokenizer, text, chunk_chars=chunk_chars))
    if not parts:
        z = np.zeros(0, np.int64)
        return z, z, z
    return tuple(np.concatenate([p[i] for p in parts]) for i in range(3))


def _compact_ids(a):
    import numpy as np

    if a.size == 0 or (int(a.min()) >= 0 and int(a.max()) < 2**16):
        return a.astype(np.uint16)
    return a.astype(np.int32) if int(a.max()) < 2**31 else a


class _LazyWindows(Sequence):
    """The windows of a :class:`DocumentWindows`, made one at a time when asked for."""

    def __init__(self, doc: DocumentWindows):
        self._doc = doc

    def __len__(self) -> int:
        return len(self._doc)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self._doc.window(j) for j in range(*i.indices(len(self)))]
        return self._doc.window(i)

    def __iter__(self):
        for j in range(len(self)):
            yield self._doc.window(j)


class DocumentWindows:
    """The sliding windows of one document ([EM] §5) as a WindowSet whose windows are made on
    demand from one tokenization (:func:`encode_slices`): memory is the text, the token ids
    (2 bytes a token for vocabularies below 65,536) and three character offsets per window,
    whatever the book's length. ``windows`` is a read-only sequence of :class:`Window` values
    equal to what cutting them all at once from the whole text's tokenization gives.

    The offsets kept per window are the prefix start, the prefix end and the suffix end: a
    span's end is the largest end offset of its tokens ([EM] Eq. 9), which is its last token's
    when the tokenizer's end offsets never decrease (checked; otherwise every token's offsets
    are kept, 8 bytes a token)."""

    n_sources = 1
    skipped_short = 0
    skipped_ids: tuple = ()
    cut = None  # token windows (memclaim.procedure.WindowSpec.cut)

    def __init__(
        self,
        text: str,
        slices,
        *,
        prefix_tokens: int,
        suffix_tokens: int,
        stride: int,
        source: str = "document",
    ):
        import numpy as np

        self.text, self.source = text, source
        self.prefix_tokens, self.suffix_tokens, self.stride = prefix_tokens, suffix_tokens, stride
        self.spec = WindowSpec(
            prefix_tokens=prefix_tokens, suffix_tokens=suffix_tokens, stride=stride
        )
        P, need = prefix_tokens, prefix_tokens + suffix_tokens
        self.need = need
        ids, p0, p1, s1 = [], [], [], []
        g = 0  # global index of the slice's first token
        last_end = -1
        monotone = True
        for a_ids, a_s, a_e in slices:
            n = len(a_ids)
            ids.append(_compact_ids(a_ids))
            if n:
                if monotone and (a_e[0] < last_end or (n > 1 and bool(np.any(np.diff(a_e) < 0)))):
                    monotone = False
                last_end = int(a_e[-1])
            # tokens of this slice at positions t with t % stride == r, for window starts (r = 0),
            # prefix ends (r = P - 1) and suffix ends (r = need - 1)
            for out, arr, r in ((p0, a_s, 0), (p1, a_e, P - 1), (s1, a_e, need - 1)):
                first = (r - g) % stride
                out.append(arr[first::stride].astype(np.int64))
            g += n
        self.ids = np.concatenate(ids) if ids else np.zeros(0, np.uint16)
        del ids
        N = len(self.ids)
        self.n_windows = (N - need) // stride + 1 if N >= need else 0
        W = self.n_windows
        self.monotone = monotone
        self.starts = self.ends = None
        self.p0 = self.p1 = self.s1 = None
        if monotone:  # positions r, r + stride, ...: window k's is the (r // stride + k)-th
            self.p0 = np.concatenate(p0)[:W]
            self.p1 = np.concatenate(p1)[(P - 1) // stride :][:W] if P else self.p0
            self.s1 = np.concatenate(s1)[(need - 1) // stride :][:W]
        # else: DocumentWindows.from_text keeps every token's offsets instead
        self.total_chars = {source: len(text)}

    @classmethod
    def from_text(
        cls,
        text,
        tokenizer,
        *,
        prefix_tokens,
        suffix_tokens,
        stride,
        source="document",
        chunk_chars: int = DOCUMENT_CHUNK_CHARS,
    ) -> DocumentWindows:
        import numpy as np

        d = cls(
            text,
            encode_slices(tokenizer, text, chunk_chars=chunk_chars),
            prefix_tokens=prefix_tokens,
            suffix_tokens=suffix_tokens,
            stride=stride,
            source=source,
        )
        if not d.monotone:  # exact spans from every token's offsets (8 bytes a token)
            ids, st, en = encode_document(tokenizer, text, chunk_chars=chunk_chars)
            d.ids, d.starts, d.ends = _compact_ids(ids), st.astype(np.int64), en.astype(np.int64)
        return d

    def __len__(self) -> int:
        return self.n_windows

    @property
    def windows(self) -> _LazyWindows:
        return _LazyWindows(self)

    def window_ids(self):
        """The window ids, in order, without making the windows."""
        return (f"{self.source}#{i}" for i in range(self.n_windows))

    def spans(self, i: int) -> tuple[int, int, int]:
        """(prefix start, prefix end, suffix end) of window ``i`` (character offsets)."""
        if self.monotone:
            p0, p1, s1 = int(self.p0[i]), int(self.p1[i]), int(self.s1[i])
            return p0, (p1 if self.prefix_tokens else p0), max(s1, p1 if self.prefix_tokens else p0)
        start, P, need = i * self.stride, self.prefix_tokens, self.need
        p0 = int(self.starts[start])
        p1 = int(self.ends[start : start + P].max()) if P else p0
        return p0, p1, max(int(self.ends[start + P : start + need].max()), p1)

    def window(self, i: int) -> Window:
        if not -self.n_windows <= i < self.n_windows:
            raise IndexError(f"window {i} of {self.n_windows}")
        i %= self.n_windows
        start, P, need = i * self.stride, self.prefix_tokens, self.need
        p0, p1, s1 = self.spans(i)
        return Window(
            source=self.source,
            index=i,
            prefix_ids=tuple(self.ids[start : start + P].tolist()),
            suffix_ids=tuple(self.ids[start + P : start + need].tolist()),
            prefix_span=(p0, p1),
            suffix_span=(p1, s1),
            prefix_text=self.text[p0:p1],
            suffix_text=self.text[p1:s1],
            token_start=start,
        )


def sliding_windows(
    text: str,
    tokenizer: OffsetTokenizer,
    *,
    prefix_tokens: int,
    suffix_tokens: int,
    stride: int,
    source: str = "document",
    chunk_chars: int = DOCUMENT_CHUNK_CHARS,
) -> DocumentWindows:
    """Sliding windows over one long document ([EM] §5, census): window = prefix + suffix tokens,
    advancing ``stride`` tokens; window i starts at token i*stride. The tail that does not fill a
    whole window is not scored (reported via the coverage denominator, which is the whole text).
    The text is tokenized once (in slices, :func:`encode_document`) and the windows are made on
    demand (:class:`DocumentWindows`).

    >>> import memclaim; tok = memclaim.load_model("toy").tokenizer  # doctest: +SKIP
    >>> d = sliding_windows("In the beginning was the word", tok, prefix_tokens=4, suffix_tokens=3, stride=4)  # doctest: +SKIP
    >>> len(d), d.window(1).prefix_text, d.window(1).suffix_text  # doctest: +SKIP
    (4, ' begin', 'ning')
    """
    _check_lengths(prefix_tokens, suffix_tokens)
    integer("stride", stride, minimum=1)
    need = prefix_tokens + suffix_tokens
    d = DocumentWindows.from_text(
        text,
        tokenizer,
        prefix_tokens=prefix_tokens,
        suffix_tokens=suffix_tokens,
        stride=stride,
        source=source,
        chunk_chars=chunk_chars,
    )
    if len(d.ids) < need:
        raise InputError(
            f"document {source!r} has {len(d.ids)} tokens, shorter than one window of {need} tokens ({prefix_tokens} + "
            f"{suffix_tokens})",
            hint=lengths_that_fit([len(d.ids)], prefix_tokens, suffix_tokens, what="the document"),
        )
    return d
