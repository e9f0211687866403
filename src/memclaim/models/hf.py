"""HuggingFace causal LMs behind :class:`memclaim.models.base.LanguageModel`.

The body (``model.base_model``) runs over every token; the unembedding (``lm_head`` plus the
model's final-logit soft-capping, if its config has one) runs only on the rows the caller
passes, in float32 whatever the body's dtype (a bfloat16 body keeps a float32 copy of the
unembedding matrix so that scored logits are not rounded to bfloat16's 8 mantissa bits).
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

import torch

from .base import LanguageModel

if TYPE_CHECKING:
    from transformers import PretrainedConfig


# On CPU the [N, D] x [D, V] unembedding runs over vocabulary tiles of W, so a tile stays in
# cache while every row uses it; one call streams all of W (Gemma 3: 671 MB in float32) through
# memory for few rows. Measured on this project's 2-core CPUs: 33 -> 57 GFLOP/s for 50 rows and
# 72 -> 79 for 250 rows on Gemma's 262,144 x 640 matrix. MKL's kernels for a tile's last columns
# depend on where the call's column count ends, so tiles are used only when they divide V
# (Gemma 3, SmolLM2, Llama/Qwen-style vocabularies): then, at a given thread count, a row's logits
# have the same bits whatever the other rows of the call, and are within float32 rounding of the
# single product (bit-identical on the Xeons measured; on an AMD EPYC 3 threads reorder some sums;
# tests/scoring/test_engine.py checks both); other
# vocabularies (GPT-2's 50,257) take one call. On a GPU one call is best.
VOCAB_TILES = (2048, 1024, 512, 256)

# The attention kernel memclaim loads models with (``from_pretrained(attn_implementation=...)``;
# the choice is made at load time, by models/loader.py): PyTorch's scaled_dot_product_attention,
# which on CUDA dispatches to FlashAttention-2 / memory-efficient kernels (no [B, H, T, T]
# scores in memory) and on the CPU to its fused kernel. It is transformers' own default where
# the architecture supports it; "eager" is the fallback for architectures that do not.
FAST_ATTENTION = "sdpa"


def attn_implementation(config: PretrainedConfig | None = None) -> str:
    """The ``attn_implementation`` to load a model with: :data:`FAST_ATTENTION` unless the model
    class says it cannot use it (``_supports_sdpa`` False), then "eager".

    >>> attn_implementation()
    'sdpa'
    >>> from transformers import GPT2Config  # doctest: +SKIP
    >>> attn_implementation(GPT2Config())  # doctest: +SKIP
    'sdpa'
    """
    if config is not None:
        try:
            from transformers import AutoModelForCausalLM

            cls = AutoModelForCausalLM._model_mapping[type(config)]
            if getattr(cls, "_supports_sdpa", True) is False:
                return "eager"
        except (KeyError, ImportError, AttributeError):
            pass
    return FAST_ATTENTION


def vocab_tile(vocab: int) -> int | None:
    """The unembedding tile for a vocabulary of this size, or None for one call.

    >>> vocab_tile(49152), vocab_tile(50257)  # SmolLM2's vocabulary is tiled, GPT-2's is not
    (2048, None)
    """
    return next((t for t in VOCAB_TILES if vocab > t and vocab % t == 0), None)


def unembed(
    h: torch.Tensor, w: torch.Tensor, *, tile: int | None = None, out: torch.Tensor | None = None
) -> torch.Tensor:
    """h [N, D] @ w[V, D].T -> [N, V], tiled over the vocabulary on CPU (default tile: vocab_tile(V)).

    ``out``: a contiguous [N, V] tensor of the product's dtype to write into (on the CPU a
    reused buffer spares the page faults of a fresh [N, V] allocation: Gemma's 250-row chunk is
    262 MB; measured 64 -> 73 GFLOP/s per CPU-second); the bits are the same either way.

    >>> h, w = torch.arange(6.).reshape(2, 3), torch.arange(12.).reshape(4, 3)
    >>> unembed(h, w, tile=2)
    tensor([[  5.,  14.,  23.,  32.],
            [ 14.,  50.,  86., 122.]])
    >>> torch.equal(unembed(h, w, tile=2), h @ w.T)
    True
    >>> buf = torch.empty(2, 4)
    >>> unembed(h, w, tile=2, out=buf) is buf, torch.equal(buf, h @ w.T)
    (True, True)
    """
    V = w.shape[0]
    tile = tile or vocab_tile(V)
    if (
        h.device.type == "cuda"
        and h.dtype == torch.float32
        and torch.get_float32_matmul_precision() != "highest"
    ):
        # TF32 (10 mantissa bits) would round the scored logits: the unembedding stays float32
        prev = torch.get_float32_matmul_precision()
        torch.set_float32_matmul_precision("highest")
        try:
            return h @ w.T if out is None else torch.mm(h, w.T, out=out)
        finally:
            torch.set_float32_matmul_precision(prev)
    if h.device.type != "cpu" or tile is None or V <= tile:
        return h @ w.T if out is None else torch.mm(h, w.T, out=out)
    if V % tile:
        raise ValueError(f"unembedding tile {tile} does not divide the vocabulary size {V}")
    z = (
        torch.empty((h.shape[0], V), dtype=torch.result_type(h, w), device=h.device)
        if out is None
        else out
    )
    for a in range(0, V, tile):
        torch.mm(h, w[a : a + tile].T, out=z[:, a : a + tile])
    return z


class HFLanguageModel(LanguageModel):
    def __init__(
        self, model, *, name: str = "hf", fingerprint: str = "", unembed_dtype=torch.float32
    ):
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

    @property
    def attn_implementation(self) -> str:
        """The attention kernel the model was loaded with (see :data:`FAST_ATTENTION`)."""
        return str(getattr(self.config, "_attn_implementation", None) or "eager")

    def fingerprint(self) -> str:
        return self._fingerprint

    @torch.inference_mode()
    def forward_hidden(
        self,
        input_ids,
        *,
        attention_mask=None,
        past: Any = None,
        use_cache: bool = False,
        position_ids=None,
    ):
        kwargs = {}
        if attention_mask is not None:
            kwargs["attention_mask"] = attention_mask
            if position_ids is None:
                # left padding: positions count real tokens only (as transformers' generate does)
                position_ids = (attention_mask.long().cumsum(-1) - 1).clamp_min(0)
                if past is not None:
                    position_ids = position_ids[:, -input_ids.shape[1] :]
        if position_ids is not None:
            kwargs["position_ids"] = position_ids
        if use_cache and past is None:
            from transformers import DynamicCache

            past = DynamicCache(config=self.config)
        if past is not None:
            kwargs[self._cache_kw] = past
        out = self.body(input_ids=input_ids, use_cache=use_cache, **kwargs)
        h = out.last_hidden_state
        if (
            h.device != self._w.device
        ):  # a sharded body (--device-map) ends on its last layer's device
            h = h.to(self._w.device)
        if not use_cache:
            return h, None
        new = getattr(out, "cache", None) or getattr(out, "past_key_values", None) or past
        return h, new

    logits_accept_out = True  # logits(hidden, out=buffer) writes into a reused [N, V] buffer

    @torch.inference_mode()
    def logits(self, hidden, *, out: torch.Tensor | None = None):
        # [N, D] -> [N, V]; float32 unembedding only at the rows asked for. ``out``: a contiguous
        # [N, V] buffer of the unembedding dtype to write into (same bits as a fresh tensor).
        h = hidden.to(self._w.dtype)
        z = unembed(h, self._w, out=out)
        if self._b is not None:
            z.add_(self._b)  # the bits of z + b, without a second [N, V] tensor
        if self._softcap is not None:  # e.g. Gemma 2: tanh(z / cap) * cap, as in its forward()
            z.div_(self._softcap).tanh_().mul_(self._softcap)
        return z

    def differentiable_logits(self, hidden):
        """:meth:`logits` with autograd on (the GCG prompt search's gradient, memclaim.scoring.gcg):
        the same float32 unembedding, bias and soft-capping, untiled ([N, D] -> [N, V])."""
        z = hidden.to(self._w.dtype) @ self._w.T
        if self._b is not None:
            z = z + self._b
        if self._softcap is not None:
            z = torch.tanh(z / self._softcap) * self._softcap
        return z

    def select_cache(self, past, index):
        # shallow copies: reorder_cache index_selects new tensors, the source cache is untouched
        new = copy.copy(past)
        new.layers = [copy.copy(layer) for layer in past.layers]
        new.reorder_cache(index)
        return new
