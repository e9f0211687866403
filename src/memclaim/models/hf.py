"""HuggingFace causal LMs behind :class:`memclaim.models.base.LanguageModel`.

The body (``model.base_model``) runs over every token; the unembedding (``lm_head`` plus the
model's final-logit soft-capping, if its config has one) runs only on the rows the caller
passes, in float32 whatever the body's dtype (a bfloat16 body keeps a float32 copy of the
unembedding matrix so that scored logits are not rounded to bfloat16's 8 mantissa bits).
"""
from __future__ import annotations

import copy
from typing import Any

import torch

from .base import LanguageModel


class HFLanguageModel(LanguageModel):
    def __init__(self, model, *, name: str = "hf", fingerprint: str = "", unembed_dtype=torch.float32):
        self.model = model.eval()
        self.name = name
        self._fingerprint = fingerprint
        self.config = model.config
        self.vocab_size = int(model.get_output_embeddings().weight.shape[0])
        self.body = model.base_model
        head = model.get_output_embeddings()
        w = head.weight.detach()
        self._w = w if w.dtype == unembed_dtype else w.to(unembed_dtype)
        b = getattr(head, "bias", None)
        self._b = None if b is None else b.detach().to(unembed_dtype)
        cap = getattr(model.config, "final_logit_softcapping", None)
        self._softcap = float(cap) if cap else None
        self.body_dtype = next(model.parameters()).dtype
        import inspect

        # transformers 5.x renamed the cache argument from past_key_values to cache
        params = inspect.signature(self.body.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"

    @property
    def device(self):
        return self._w.device

    def fingerprint(self) -> str:
        return self._fingerprint

    @torch.inference_mode()
    def forward_hidden(self, input_ids, *, attention_mask=None, past: Any = None, use_cache: bool = False,
                       position_ids=None):
        kwargs = {}
        if attention_mask is not None:
            kwargs["attention_mask"] = attention_mask
            if position_ids is None:
                # left padding: positions count real tokens only (as transformers' generate does)
                position_ids = (attention_mask.long().cumsum(-1) - 1).clamp_min(0)
                if past is not None:
                    position_ids = position_ids[:, -input_ids.shape[1]:]
        if position_ids is not None:
            kwargs["position_ids"] = position_ids
        if use_cache and past is None:
            from transformers import DynamicCache

            past = DynamicCache(config=self.config)
        if past is not None:
            kwargs[self._cache_kw] = past
        out = self.body(input_ids=input_ids, use_cache=use_cache, **kwargs)
        if not use_cache:
            return out.last_hidden_state, None
        new = getattr(out, "cache", None) or getattr(out, "past_key_values", None) or past
        return out.last_hidden_state, new

    @torch.inference_mode()
    def logits(self, hidden):
        # [N, D] -> [N, V]; float32 unembedding only at the rows asked for
        h = hidden.to(self._w.dtype)
        z = h @ self._w.T
        if self._b is not None:
            z = z + self._b
        if self._softcap is not None:  # e.g. Gemma 2: tanh(z / cap) * cap, as in its forward()
            z = torch.tanh(z / self._softcap) * self._softcap
        return z

    def select_cache(self, past, index):
        # shallow copies: reorder_cache index_selects new tensors, the source cache is untouched
        new = copy.copy(past)
        new.layers = [copy.copy(layer) for layer in past.layers]
        new.reorder_cache(index)
        return new
