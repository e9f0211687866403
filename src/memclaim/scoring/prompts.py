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

from dataclasses import dataclass

from ..errors import InputError

# one home for the rule's fields, checks and record, and for the aggregate over prompts ([EM] Eq. 15)
from ..procedure import (  # noqa: F401
    AGGREGATES,
    MAX_TEMPLATE_WIDTH,
    TARGET_RULES,
    PromptSpec,
    aggregate_logq,
    check_template,
)
from ..text.windows import split_at_char


@dataclass(frozen=True)
class PromptRule(PromptSpec):
    """The prompt rule f_P (:class:`memclaim.procedure.PromptSpec`: templates, chat, aggregate,
    target rule, validated there) with its rendering: the (prompt ids, target ids) items of a
    window (see the module docstring).

    >>> PromptRule(templates=("Repeat: {suffix}",)).kind
    'template'
    """

    @classmethod
    def of(cls, spec: PromptSpec) -> PromptRule:
        """The rule of a procedure's :class:`~memclaim.procedure.PromptSpec`."""
        if isinstance(spec, PromptRule):
            return spec
        return cls(
            templates=spec.templates,
            chat=spec.chat,
            aggregate=spec.aggregate,
            target=spec.target,
            target_record=spec.target_record,
        )

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
