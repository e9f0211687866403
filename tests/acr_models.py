"""Small models for the GCG/ACR tests (issue 29), built in memory in well under a second.

- :func:`char_tokenizer`: a character-level fast tokenizer over printable ASCII plus ``<s>`` (id 0),
  whose every text round-trips exactly;
- :func:`tiny_gpt`: a random 2-layer GPT-2 over that vocabulary (float64 on request, for finite
  differences), with peaked logits so that greedy paths are well defined;
- :class:`CachedStepNudge`: a GPT-2 whose ``generate`` (KV-cached incremental steps) adds a small
  amount to one logit at one step, while a teacher-forced pass (the body and the unembedding,
  without ``forward``) is untouched: the numeric difference between teacher forcing and cached
  generation that [EM] App. A.2 blames for argmax "successes" that greedy generation does not
  reproduce, made deliberate.
"""

from __future__ import annotations

import torch


def char_tokenizer():
    from tokenizers import Tokenizer, decoders, models
    from transformers import PreTrainedTokenizerFast

    vocab = {"<s>": 0, **{chr(c): i + 1 for i, c in enumerate(range(32, 127))}}
    tk = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token=None))
    tk.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<s>", eos_token="<s>")


def _config(vocab: int):
    from transformers import GPT2Config

    return GPT2Config(
        vocab_size=vocab,
        n_positions=96,
        n_embd=32,
        n_layer=2,
        n_head=2,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        initializer_range=0.4,
        bos_token_id=0,
        eos_token_id=0,
    )


def tiny_gpt(seed: int = 0, *, dtype=torch.float32, cls=None):
    """(model, tokenizer): a random tiny GPT-2 on the character tokenizer, in eval mode."""
    from transformers import GPT2LMHeadModel

    tok = char_tokenizer()
    torch.manual_seed(seed)
    model = (cls or GPT2LMHeadModel)(_config(len(tok))).to(dtype).eval()
    model.requires_grad_(False)
    return model, tok


def _nudge_class():
    from transformers import GPT2LMHeadModel

    class CachedStepNudge(GPT2LMHeadModel):
        """``nudge = (positions, token, amount)``: in a forward call that continues a cache with one
        token (a generate step) and leaves it holding ``positions`` positions, ``amount`` is added to
        the logit of ``token``; that step predicts position ``positions`` of the sequence. Teacher
        forcing (no cache) is unchanged."""

        nudge: tuple | None = None

        def forward(self, *args, **kwargs):
            out = super().forward(*args, **kwargs)
            past = kwargs.get(
                "cache", kwargs.get("past_key_values")
            )  # transformers 5 calls it cache
            ids = kwargs.get("input_ids", args[0] if args else None)
            if (
                self.nudge is not None
                and past is not None
                and ids is not None
                and ids.shape[1] == 1
            ):
                positions, token, amount = self.nudge
                if (
                    int(past.get_seq_length()) == positions
                ):  # the cache now holds this step's input too
                    out.logits[:, -1, token] += amount
            return out

    return CachedStepNudge


def nudged_gpt(seed: int = 0):
    """(model, tokenizer) of a :class:`CachedStepNudge` tiny GPT-2 (no nudge set yet)."""
    return tiny_gpt(seed, cls=_nudge_class())
