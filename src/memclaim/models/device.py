"""A CPU-loaded HF model whose body runs on an accelerator (Ray GPU workers use it).

The scoring engine builds its input ids and targets on the CPU (``device`` says so), so inputs
move to the accelerator here and the [rows, V] logits come back in float32 (float64 for a
float64 body); the engine scores them on the CPU. The KV cache of the near-verbatim search
stays on the accelerator. On ``device="cpu"`` it is the plain model, bit for bit
(tests/scoring/test_ray_backend.py checks it).
"""

from __future__ import annotations

import torch

from .base import LanguageModel
from .hf import HFLanguageModel

__all__ = ["DeviceLM", "to_device"]


def to_device(lm: HFLanguageModel, device: str) -> HFLanguageModel:
    """``lm``'s model moved to ``device`` as an :class:`HFLanguageModel` whose ``device`` is that
    device (float32 unembedding, float64 for a float64 body): the scoring engine then builds its
    inputs there and takes the batched schedule (a Ray GPU worker uses it; :class:`DeviceLM`
    keeps the callers' tensors on the CPU instead).

    >>> import memclaim  # doctest: +SKIP
    >>> to_device(memclaim.load_model("toy").lm, "cuda").device  # doctest: +SKIP
    device(type='cuda', index=0)
    """
    return HFLanguageModel(
        lm.model.to(device),
        name=lm.name,
        fingerprint=lm.fingerprint(),
        unembed_dtype=torch.float64 if lm.body_dtype == torch.float64 else torch.float32,
    )


class DeviceLM(LanguageModel):
    """``lm`` (an :class:`~memclaim.models.hf.HFLanguageModel` on the CPU) with its body moved to
    ``device`` ("cuda", "cuda:1", ...); callers keep handing it CPU tensors.

    >>> DeviceLM(loaded.lm, "cuda").logits(hidden_rows)  # doctest: +SKIP
    """

    def __init__(self, lm: HFLanguageModel, device: str):
        model = lm.model.to(device)
        self.inner = HFLanguageModel(
            model,
            name=lm.name,
            fingerprint=lm.fingerprint(),
            unembed_dtype=torch.float64 if lm.body_dtype == torch.float64 else torch.float32,
        )
        self.vocab_size = self.inner.vocab_size
        self.name = self.inner.name
        self._device = torch.device(device)

    @property
    def device(self) -> torch.device:
        return torch.device("cpu")  # where the callers' tensors live

    def fingerprint(self) -> str:
        return self.inner.fingerprint()

    def forward_hidden(self, input_ids, *, attention_mask=None, past=None, use_cache=False):
        mask = None if attention_mask is None else attention_mask.to(self._device)
        return self.inner.forward_hidden(
            input_ids.to(self._device), attention_mask=mask, past=past, use_cache=use_cache
        )

    def logits(self, hidden):
        return self.inner.logits(hidden.to(self._device)).cpu()

    def select_cache(self, past, index):
        return self.inner.select_cache(past, index.to(self._device))
