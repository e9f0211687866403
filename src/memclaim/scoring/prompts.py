"""The prompt rule f_P of an extraction procedure ([EM] Def. B.2, Eq. 14-15).

By default the prompt is the natural prefix (start-of-text ids + prefix tokens, cut from the
one tokenization of the text) and the target is the suffix tokens of that same tokenization.

A template renders a prompt text from the window's prefix and suffix *text* (e.g. the "parrot"
prompt ``'Repeat after me: {suffix}\\n'`` of [EM] Fig. 1), optionally wrapped in the model's
chat template as the user turn, with the assistant's turn opened (``add_generation_prompt``).
The target of a templated procedure is what the model would emit *there* ([EM] §A.1), not the
tokens the suffix had inside the document (whose first token carries the space before it):

* target text: the window's suffix text; its leading whitespace is removed where the answer
  starts fresh (after the chat template's assistant header, or after a rendered prompt that is
  empty or ends in whitespace, e.g. a newline) and kept after a prompt that ends mid-line (a
  template such as ``'{prefix}'`` continues the text, so the target keeps its leading space);
* target tokens: the rendered prompt and the target text are joined into one string and
  tokenized once (with offsets); the target is the tokens from the prompt's last character on,
  cut by character offsets. A token that straddles the cut is refused (InputError naming the
  window, the template and the token). The prompt ids are the rendered prompt tokenized alone,
  as generate() is given it (they equal the tokens before the cut, except where whitespace that
  ends the prompt pre-tokenizes differently before a word);
* ``{suffix}`` in a template is filled with the suffix text without its leading whitespace (the
  quotation), ``{prefix}`` with the prefix text;
* ``--suffix-tokens`` selects the suffix *text* (the document's suffix tokens, or the first N
  tokens of a suffix field); the target then has as many tokens as that text has where it
  stands after the prompt, usually the same number, recorded per window and prompt in the
  store (``target_tokens``). Shorter-suffix sweeps count rendered target tokens.

Several templates give several prompts per candidate, each with its own target ids (one item =
one (prompt ids, target ids) pair, :func:`memclaim.scoring.units.item_key`); the log q of the
same target text is aggregated over prompts by max or mean of the probabilities ([EM] Eq. 15),
in log space, whatever the number of target tokens under each prompt. Near-verbatim balls are
centred on each prompt's own target ids.

``target='document'`` keeps the document's suffix token ids as the target under a template
(the prompt is tokenized on its own): the token-level channel of the reserved trigger ([MX]
Thm. 6.1(ii)), where the release emits the record's own tokens after the trigger.

The rule is recorded in the procedure (``prompt.target``); a natural-prefix procedure's record
is unchanged, so its key is the one older stores were written under.
"""

from __future__ import annotations

import math
import re
import string
from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from ..text.windows import split_at_char

AGGREGATES = ("max", "mean")
#: the widest a template may pad a field ({prefix:>N}): a rendered prompt must fit a model's
#: context, and issue 25's {prefix:>100000000} took 18 GB before any check could see it
MAX_TEMPLATE_WIDTH = 100_000
# the standard format spec up to its width: [[fill]align][sign][z][#][0][width]
_SPEC_WIDTH = re.compile(r"(?:.?[<>=^])?[+\- ]?z?#?0?(\d*)")


def check_template(t: object) -> str:
    """A prompt template, checked before any window is rendered: a string whose fields are
    {prefix} and {suffix} only, with format specs Python can apply, no field padded beyond
    :data:`MAX_TEMPLATE_WIDTH` characters (the cost is estimated from the spec, not found by
    rendering) and no spec that takes its width from the text (``{prefix:{suffix}}``).

    >>> check_template("Repeat: {prefix}")
    'Repeat: {prefix}'
    """
    if not isinstance(t, str):
        raise InputError(
            f"a prompt template must be a string, got {type(t).__name__} {t!r}",
            hint="e.g. prompt_templates=['Continue: {prefix}']",
        )
    try:
        parts = list(string.Formatter().parse(t))
    except ValueError as exc:
        raise InputError(
            f"bad prompt template {t!r}: {exc}",
            hint="write fields as {prefix} or {suffix}; double braces {{ }} for literal ones",
        ) from None
    fields = {f for _, f, _, _ in parts if f is not None}
    bad = fields - {"prefix", "suffix"}
    if bad:
        raise InputError(
            f"prompt template {t!r} uses unknown fields {sorted(bad)}",
            hint="only {prefix} and {suffix} are filled in",
        )
    for _, f, spec, _ in parts:
        if f is None or not spec:
            continue
        if "{" in spec:
            raise InputError(
                f"prompt template {t!r}: the format spec {spec!r} of {{{f}}} is filled from the text",
                hint=f"write {{{f}}} (or a fixed spec such as {{{f}:>20}})",
            )
        width = _SPEC_WIDTH.match(spec).group(1)
        if width and int(width) > MAX_TEMPLATE_WIDTH:
            raise InputError(
                f"prompt template {t!r} pads {{{f}}} to {int(width):,} characters (format spec "
                f"{spec!r}): every window's prompt would be that long, far more than any model's "
                f"context holds, and tokenizing one takes about {int(width) * 180 / 2**30:.2g} GiB "
                "(about 180 bytes a character)",
                hint=f"write {{{f}}} without a width (memclaim accepts widths up to "
                f"{MAX_TEMPLATE_WIDTH:,} characters)",
            )
    try:
        t.format(prefix="x", suffix="x")
    except (ValueError, TypeError) as exc:
        raise InputError(
            f"bad prompt template {t!r}: {exc}",
            hint="use format specs for text, e.g. {prefix} or {prefix:>20}",
        ) from None
    return t


TARGET_RULES = ("rendered", "document")

_TARGET_RECORD = {
    "rendered": {
        "rule": "rendered",
        "text": "the window's suffix text; leading whitespace removed after the chat assistant header or a "
        "rendered prompt that is empty or ends in whitespace, kept after a prompt that ends mid-line",
        "tokens": "rendered prompt + target tokenized as one string; the target cut at the prompt's end by "
        "character offsets (a token across the cut is refused); the prompt tokenized alone; each "
        "prompt has its own target ids",
        "suffix_tokens": "selects the suffix text in document tokens; the target has as many tokens as that text "
        "has after the prompt (target_tokens in the store)",
        "suffix_field": "{suffix} is the suffix text without its leading whitespace",
    },
    "document": {
        "rule": "document",
        "tokens": "the window's suffix token ids from the document's tokenization; the prompt is tokenized alone",
    },
}


@dataclass(frozen=True)
class PromptRule:
    templates: tuple[str, ...] = ()  # empty: the natural prefix
    chat: bool = False  # wrap each rendered prompt in the model's chat template
    aggregate: str = "max"
    target: str = "rendered"  # templated procedures: see the module docstring

    def __post_init__(self):
        if self.aggregate not in AGGREGATES:
            raise InputError(
                f"unknown prompt aggregate {self.aggregate!r}", hint="use 'max' or 'mean'"
            )
        if self.target not in TARGET_RULES:
            raise InputError(
                f"unknown target rule {self.target!r}", hint="use 'rendered' or 'document'"
            )
        for t in self.templates:
            check_template(t)
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

    def items(self, window, tokenizer, sot_ids) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
        """The (prompt ids, target ids) pairs for one window, one per template ([EM] Eq. 14)."""
        if not self.templates:
            return [(tuple(sot_ids) + tuple(window.prefix_ids), tuple(window.suffix_ids))]
        out = []
        for t in self.templates:
            if self.target == "document":
                text = t.format(prefix=window.prefix_text, suffix=window.suffix_text)
                prompt = (
                    tuple(tokenizer.apply_chat_template(text))
                    if self.chat
                    else tuple(sot_ids) + tuple(tokenizer.encode(text))
                )
                out.append((prompt, tuple(window.suffix_ids)))
            else:
                out.append(self._rendered(t, window, tokenizer, sot_ids))
        return out

    def build(self, window, tokenizer, sot_ids) -> list[tuple[int, ...]]:
        """The prompts (token ids) for one window (see :meth:`items` for their targets)."""
        return [p for p, _ in self.items(window, tokenizer, sot_ids)]

    def _rendered(self, template: str, window, tokenizer, sot_ids):
        quote = window.suffix_text.lstrip()
        what = f"window {window.window_id!r} under prompt template {template!r}"
        if not quote:
            raise InputError(
                f"{what}: the suffix {window.suffix_text!r} is only whitespace, so there is no target",
                hint="cut windows whose suffix holds text (e.g. --suffix-field, or other lengths)",
            )
        user = template.format(prefix=window.prefix_text, suffix=quote)
        if self.chat:
            head, lead = tokenizer.render_chat(user), ()
        else:
            head, lead = user, tuple(sot_ids)
        fresh = (
            self.chat or not head or head[-1].isspace()
        )  # the answer starts fresh: no leading space
        target = quote if fresh else window.suffix_text

        text = head + target
        ids, offsets = tokenizer.encode_with_offsets(text)
        k = split_at_char(ids, offsets, len(head), text=text, what=what)
        target_ids = tuple(ids[k:])
        if not target_ids:
            raise InputError(f"{what}: the target {target!r} produced no tokens after the prompt")
        # the prompt as generate() is given it: the rendered prompt tokenized alone. It equals the
        # tokens before the cut except where whitespace ending the prompt splits differently with
        # text after it (GPT-2's pre-tokenizer: 'ĊĊ' alone, 'Ċ' 'Ċ' before a word)
        prompt_ids = tuple(tokenizer.encode(head))
        return lead + prompt_ids, target_ids

    def to_dict(self) -> dict:
        d = {
            "kind": self.kind,
            "templates": list(self.templates),
            "chat": self.chat,
            "aggregate": self.aggregate if self.n_prompts > 1 else None,
        }
        if self.templates:  # natural-prefix records stay as they were (their keys must not change)
            d["target"] = dict(_TARGET_RECORD[self.target])
        return d


def aggregate_logq(values: np.ndarray, how: str, axis: int = -1) -> np.ndarray:
    """[EM] Eq. 15: score(s) = agg over prompts of score_p(s), on log q values.
    'max' is the max; 'mean' is log(mean of q) = logsumexp - log n (stable for -inf).

    >>> q = np.log([[0.2, 0.4]])  # one candidate, two prompts
    >>> np.exp(aggregate_logq(q, "max")).round(6).tolist(), np.exp(aggregate_logq(q, "mean")).round(6).tolist()
    ([0.4], [0.3])
    """
    values = np.asarray(values, dtype=np.float64)
    if how == "max":
        return values.max(axis=axis)
    if how == "mean":
        n = values.shape[axis]
        m = values.max(axis=axis, keepdims=True)
        safe = np.where(np.isfinite(m), m, 0.0)
        with np.errstate(divide="ignore"):
            out = (
                np.log(np.exp(values - safe).sum(axis=axis))
                + np.squeeze(safe, axis=axis)
                - math.log(n)
            )
        return out
    raise InputError(f"unknown aggregate {how!r}", hint="use 'max' or 'mean'")
