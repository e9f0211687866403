"""Real tier (issue 12 A2): under SmolLM2-Instruct's chat template with the "Repeat after me"
prompt, the target is the suffix text tokenized as the start of the assistant's reply, and the
teacher-forced greedy flag equals whether greedy generate() after the rendered prompt reproduces
it. The suffixes start a sentence: records give the previous verse as the prefix and the verse,
after a space, as the suffix (tests/data: KJV members and matched new controls)."""

from __future__ import annotations

import json

import pytest
import torch

from memclaim.decoding import parse_policies
from memclaim.scoring.engine import NEAR_TIE_MARGIN, TeacherForcingEngine
from memclaim.scoring.prompts import PromptRule
from memclaim.text.io import Record
from memclaim.text.windows import passage_windows

pytestmark = pytest.mark.real

TEMPLATE = "Repeat after me: {suffix}"
# KJV verses (members) and new verses (controls) that SmolLM2-135M-Instruct repeats verbatim in
# their first 12 tokens, and some it does not (measured; the test checks both outcomes occur)
N = 10


def _records(data_dir, name):
    verses = [json.loads(x)["text"] for x in (data_dir / name).read_text().splitlines()][: N + 1]
    # prefix: the previous verse; suffix: " " + the verse (it starts a sentence, after a space)
    return [
        Record(f"{name}:{i}", verses[i - 1] + " " + verses[i], suffix_start=len(verses[i - 1]))
        for i in range(1, N + 1)
    ]


def _generate(hf, prompt, n):
    with torch.inference_mode():
        g = hf.generate(
            torch.tensor([list(prompt)]),
            attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
            max_new_tokens=n,
            do_sample=False,
            num_beams=1,
            pad_token_id=0,
        )
    return g[0, len(prompt) :].tolist()


def test_rendered_chat_prompt_is_the_templates_own_tokenization(smollm2):
    tok = smollm2.tokenizer
    user = "Repeat after me: And God said, Let there be light."
    own = tok.tok.apply_chat_template(
        [{"role": "user", "content": user}], add_generation_prompt=True, tokenize=True
    )
    own = list(own["input_ids"] if hasattr(own, "keys") else own)
    assert tok.apply_chat_template(user) == own
    assert tok.render_chat(user).endswith("<|im_start|>assistant\n")


def test_teacher_forced_greedy_equals_generate_after_the_chat_prompt(smollm2, data_dir):
    m = smollm2
    rule = PromptRule(templates=(TEMPLATE,), chat=True)
    old = PromptRule(
        templates=(TEMPLATE,), chat=True, target="document"
    )  # the rule before issue 12 A2
    eng = TeacherForcingEngine(m.lm, parse_policies(["greedy"]))
    flags, old_flags, reproduced = [], [], []
    for name in ("kjv_verses.jsonl", "new_verses.jsonl"):
        ws = passage_windows(
            _records(data_dir, name), m.tokenizer, prefix_tokens=None, suffix_tokens=12
        )
        for w in ws.windows:
            assert w.suffix_text.startswith(" ") and w.suffix_text[1].isupper()  # starts a sentence
            ((prompt, target),) = rule.items(w, m.tokenizer, m.sot_ids)
            assert (
                m.tokenizer.decode(target) == w.suffix_text.lstrip()
            )  # the reply starts without the space
            assert prompt == tuple(
                m.tokenizer.apply_chat_template("Repeat after me: " + w.suffix_text.lstrip())
            )
            bs = eng.score_batch([prompt], [target])
            gen = _generate(m.lm.model, prompt, len(target))
            if bs.min_margin[0] >= NEAR_TIE_MARGIN:  # [EM] App. A.2: near-ties may flip
                assert bool(bs.greedy_match[0]) == (gen == list(target)), (
                    w.window_id,
                    m.tokenizer.decode(gen),
                )
            flags.append(bool(bs.greedy_match[0]))
            reproduced.append(gen == list(target))
            ((p0, t0),) = old.items(w, m.tokenizer, m.sot_ids)
            assert t0 == w.suffix_ids and m.tokenizer.decode(t0[:1]).startswith(" ")
            old_flags.append(bool(eng.score_batch([p0], [t0]).greedy_match[0]))
    assert any(reproduced) and not all(reproduced)  # both outcomes are exercised
    # the old target (the document's suffix ids, leading-space token first) is never what the
    # model emits after the assistant header: 0% greedy extraction for everything
    assert not any(old_flags)
