"""The prompt rule f_P of an extraction procedure ([EM] Def. B.2, Eq. 14-15).

By default the prompt is the natural prefix (start-of-text ids + prefix tokens, cut from the
one tokenization of the text). A template renders a prompt text from the window's prefix and
suffix *text* (e.g. the "parrot" prompt ``'Repeat after me: {suffix}\\n'`` of [EM] Fig. 1), which
is tokenized on its own; the target is always the suffix tokens from the document's
tokenization. Several templates give several prompts per candidate, aggregated by max or mean
of the probabilities ([EM] Eq. 15), computed in log space.
"""
from __future__ import annotations

import math
import string
from dataclasses import dataclass

import numpy as np

from ..errors import InputError

AGGREGATES = ("max", "mean")


@dataclass(frozen=True)
class PromptRule:
    templates: tuple[str, ...] = ()  # empty: the natural prefix
    chat: bool = False  # wrap each rendered prompt in the model's chat template
    aggregate: str = "max"

    def __post_init__(self):
        if self.aggregate not in AGGREGATES:
            raise InputError(f"unknown prompt aggregate {self.aggregate!r}", hint="use 'max' or 'mean'")
        for t in self.templates:
            try:
                fields = {f for _, f, _, _ in string.Formatter().parse(t) if f is not None}
            except ValueError as exc:
                raise InputError(f"bad prompt template {t!r}: {exc}",
                                 hint="write fields as {prefix} or {suffix}; double braces {{ }} for literal ones") from None
            bad = fields - {"prefix", "suffix"}
            if bad:
                raise InputError(f"prompt template {t!r} uses unknown fields {sorted(bad)}",
                                 hint="only {prefix} and {suffix} are filled in")
        if self.chat and not self.templates:
            object.__setattr__(self, "templates", ("{prefix}",))

    @property
    def kind(self) -> str:
        if not self.templates:
            return "natural-prefix"
        return "chat-template" if self.chat else "template"

    @property
    def n_prompts(self) -> int:
        return max(1, len(self.templates))

    def build(self, window, tokenizer, sot_ids) -> list[tuple[int, ...]]:
        """The prompts (token ids) for one window."""
        if not self.templates:
            return [tuple(sot_ids) + tuple(window.prefix_ids)]
        out = []
        for t in self.templates:
            text = t.format(prefix=window.prefix_text, suffix=window.suffix_text)
            if self.chat:
                out.append(tuple(tokenizer.apply_chat_template(text)))
            else:
                out.append(tuple(sot_ids) + tuple(tokenizer.encode(text)))
        return out

    def to_dict(self) -> dict:
        return {"kind": self.kind, "templates": list(self.templates), "chat": self.chat,
                "aggregate": self.aggregate if self.n_prompts > 1 else None}


def aggregate_logq(values: np.ndarray, how: str, axis: int = -1) -> np.ndarray:
    """[EM] Eq. 15: score(s) = agg over prompts of score_p(s), on log q values.
    'max' is the max; 'mean' is log(mean of q) = logsumexp - log n (stable for -inf)."""
    values = np.asarray(values, dtype=np.float64)
    if how == "max":
        return values.max(axis=axis)
    if how == "mean":
        n = values.shape[axis]
        m = values.max(axis=axis, keepdims=True)
        safe = np.where(np.isfinite(m), m, 0.0)
        with np.errstate(divide="ignore"):
            out = np.log(np.exp(values - safe).sum(axis=axis)) + np.squeeze(safe, axis=axis) - math.log(n)
        return out
    raise InputError(f"unknown aggregate {how!r}", hint="use 'max' or 'mean'")
