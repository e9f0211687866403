"""A reference model with another tokenizer: the same characters, re-tokenized ([MX] §8.2's
reference attack compares likelihoods of the same text under two models)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..errors import InputError
from ..text.windows import Window, WindowSet

if TYPE_CHECKING:
    from ..models.loader import LoadedModel

__all__ = ["same_tokenization", "char_aligned_windows"]


def same_tokenization(a: LoadedModel, b: LoadedModel, windows: Iterable[Window]) -> bool:
    """True iff b's tokenizer gives the same ids as a's on every window's full text (prefix +
    suffix characters) -- the operational meaning of "same tokenizer" for these texts.

    >>> toy, smol = memclaim.load_model("toy"), memclaim.load_model("smollm2")  # doctest: +SKIP
    >>> same_tokenization(toy, toy, ws.windows), same_tokenization(toy, smol, ws.windows)  # doctest: +SKIP
    (True, False)
    """
    for w in windows:
        text = w.prefix_text + w.suffix_text
        if a.tokenizer.encode(text) != b.tokenizer.encode(text):
            return False
    return True


def char_aligned_windows(ws: WindowSet, ref: LoadedModel) -> tuple[WindowSet, int]:
    """The same characters as the target's windows, re-tokenized whole (prefix + suffix text)
    by the reference tokenizer and split at the character boundary; a reference token that
    straddles the boundary goes to the suffix (so the reference scores at least every suffix
    character). Returns (WindowSet, number of straddling boundaries).

    >>> ref_ws, straddles = char_aligned_windows(ws, memclaim.load_model("smollm2"))  # 8 toy windows  # doctest: +SKIP
    >>> len(ref_ws), straddles, ref_ws.windows[0].prefix_ids[:5]  # doctest: +SKIP
    (8, 0, (50, 3232, 89, 10168, 4390))
    """
    out, straddles = [], 0
    for w in ws.windows:
        text = w.prefix_text + w.suffix_text
        b = len(w.prefix_text)
        ids, offsets = ref.tokenizer.encode_with_offsets(text)
        n_prefix = 0
        for s, e in offsets:
            if e <= b:
                n_prefix += 1
            else:
                if s < b:
                    straddles += 1
                break
        if n_prefix == len(ids):
            raise InputError(
                f"window {w.window_id}: the reference tokenizer puts no token in the suffix {w.suffix_text!r}"
            )
        if n_prefix == 0 and not ref.sot_ids:
            raise InputError(
                f"window {w.window_id}: the reference model has no start-of-text token and the prefix "
                "is empty, so there is no prompt",
                hint="give the reference a start-of-text rule (--sot)",
            )
        out.append(
            Window(
                source=w.source,
                index=w.index,
                prefix_ids=tuple(ids[:n_prefix]),
                suffix_ids=tuple(ids[n_prefix:]),
                prefix_span=w.prefix_span,
                suffix_span=w.suffix_span,
                prefix_text=w.prefix_text,
                suffix_text=w.suffix_text,
                token_start=w.token_start,
            )
        )
    return WindowSet(tuple(out), ws.n_sources, 0, (), dict(ws.total_chars), ws.spec), straddles
