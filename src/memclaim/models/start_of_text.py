"""Start of text: the token ids put before every scored text (recorded in the procedure), from a
rule ('auto', 'none', 'bos', 'eos', a token string or ids).

Split out of :mod:`memclaim.models.loader` (issue 26), which re-exports these names.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ModelLoadError
from .tokenizer import HFTokenizer


@dataclass(frozen=True)
class StartOfText:
    """What is prepended to every prompt, recorded in the procedure."""

    rule: str  # as given: 'auto', 'none', 'bos', 'eos', a token string or ids
    ids: tuple[int, ...]
    tokens: tuple[str, ...]

    def to_dict(self):
        return {"rule": self.rule, "ids": list(self.ids), "tokens": list(self.tokens)}


def resolve_sot(tokenizer: HFTokenizer, rule: str) -> StartOfText:
    """The start-of-text ids put before every scored text, from ``rule``: 'auto' (what the
    tokenizer itself adds, e.g. Gemma's <bos>), 'none', 'bos', 'eos', a token string, or
    comma-separated ids; a token or id the vocabulary lacks is refused.

    >>> tok = load_model("smollm2").tokenizer  # doctest: +SKIP
    >>> resolve_sot(tok, "auto"), resolve_sot(tok, "<|endoftext|>")  # doctest: +SKIP
    (StartOfText(rule='auto', ids=(), tokens=()), StartOfText(rule='<|endoftext|>', ids=(0,), tokens=('<|endoftext|>',)))
    """
    tok = tokenizer.tok
    rule = (rule or "auto").strip()
    if rule == "none":
        ids: list[int] = []
    elif rule == "auto":
        ids = tokenizer.auto_prefix_ids()
    elif rule in ("bos", "eos"):
        tid = tok.bos_token_id if rule == "bos" else tok.eos_token_id
        if tid is None:
            raise ModelLoadError(
                f"start-of-text rule {rule!r}: this tokenizer has no {rule} token",
                hint="pass --sot none, or a token string / id",
            )
        ids = [int(tid)]
    elif all(p.strip().isdigit() for p in rule.split(",")):
        ids = [int(p) for p in rule.split(",")]
        bad = [i for i in ids if i >= len(tok)]
        if bad:
            raise ModelLoadError(
                f"start-of-text ids {bad} are outside the vocabulary (size {len(tok)})",
                hint=f"use ids below {len(tok)}, or 'auto', 'none', 'bos', 'eos' or a token string",
            )
    else:
        tid = tokenizer.token_id(rule)
        if tid is None:
            raise ModelLoadError(
                f"start-of-text token {rule!r} is not in this tokenizer's vocabulary",
                hint="use 'auto', 'none', 'bos', 'eos', a token string or ids",
            )
        ids = [tid]
    return StartOfText(rule, tuple(ids), tuple(tokenizer.convert_ids_to_tokens(ids)))
