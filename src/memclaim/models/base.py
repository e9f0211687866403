"""The small batched model interface every consumer talks to (scoring engine, near-verbatim
beams, baseline search, audits), and synthetic autoregressive models for tests.

A model is split in two, so the engine can run the body over every token but the unembedding
only at positions whose next token is scored (never a [batch, time, vocab] tensor):

    hidden, past = lm.forward_hidden(input_ids, attention_mask=..., past=..., use_cache=...)
    logits = lm.logits(hidden_rows)          # [N, D] -> [N, V], float32 or better

``past`` is an opaque cache; :meth:`LanguageModel.select_cache` reorders/expands it along the
batch axis (beam search), and feeding ``input_ids`` of shape [B, t] with ``past`` continues the
sequences. Positions are implicit (left-to-right, no padding inside ``past``).
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np


class LanguageModel(ABC):
    """Batched causal LM: body and unembedding separated."""

    vocab_size: int
    name: str = "model"
    # True where ``logits(hidden, out=buffer)`` writes into a given contiguous [N, V] buffer
    # (the CPU engine then reuses one buffer instead of allocating [N, V] per call)
    logits_accept_out: bool = False

    @abstractmethod
    def forward_hidden(
        self, input_ids, *, attention_mask=None, past: Any = None, use_cache: bool = False
    ):
        """input_ids LongTensor [B, T] -> (hidden [B, T, D], past or None)."""

    @abstractmethod
    def logits(self, hidden):
        """hidden [N, D] -> logits [N, V] in float32 (float64 allowed)."""

    @abstractmethod
    def select_cache(self, past: Any, index):
        """Return a cache whose batch entry i is entry ``index[i]`` of ``past`` (LongTensor [B'])."""

    def fingerprint(self) -> str:
        """Content hash identifying weights + config (+ tokenizer where relevant)."""
        return "unfingerprinted"

    @property
    def device(self):
        import torch

        return torch.device("cpu")

    def next_token_logits(self, input_ids, *, past=None, use_cache=False):
        """Convenience: logits for the last position of every row -> ([B, V], past)."""
        hidden, past = self.forward_hidden(input_ids, past=past, use_cache=use_cache)
        return self.logits(hidden[:, -1, :]), past


# --------------------------------------------------------------------------- synthetic models
@dataclass
class SyntheticLM(LanguageModel):
    """A small exact autoregressive model for tests: the logits for the next token are a
    deterministic pseudo-random function of the *whole* context (seeded hash), so every
    continuation's probability can be enumerated by brute force.

    ``hidden`` is the logits vector itself (D = V) and ``logits`` is the identity, so the
    engine's body/unembedding split is exercised without a network. ``tie_levels`` > 0
    quantizes logits to that many levels, creating exact ties (for tie-rule tests).
    ``order`` limits the context the model looks at (None = all tokens).
    """

    vocab_size: int = 8
    seed: int = 0
    scale: float = 2.0
    tie_levels: int = 0
    order: int | None = None
    name: str = "synthetic"
    calls: int = field(default=0, repr=False)  # forward rows computed (cost accounting in tests)

    def _row(self, context: Sequence[int]) -> np.ndarray:
        ctx = tuple(int(t) for t in context)
        if self.order is not None:
            ctx = ctx[-self.order :] if self.order > 0 else ()
        h = hashlib.blake2b(repr((self.seed, ctx)).encode(), digest_size=8).digest()
        rng = np.random.default_rng(int.from_bytes(h, "little"))
        z = rng.standard_normal(self.vocab_size) * self.scale
        if self.tie_levels:
            z = (
                np.round(z * self.tie_levels / (3 * self.scale))
                * (3 * self.scale)
                / self.tie_levels
            )
        return z

    def forward_hidden(self, input_ids, *, attention_mask=None, past=None, use_cache=False):
        import torch

        ids = input_ids.tolist()
        prev = past if past is not None else [[] for _ in ids]
        if len(prev) != len(ids):
            raise ValueError(f"cache batch {len(prev)} != input batch {len(ids)}")
        rows = []
        new_past = []
        for ctx0, seq in zip(prev, ids):
            ctx = list(ctx0)
            out = []
            for tok in seq:
                ctx.append(tok)
                out.append(self._row(ctx))
                self.calls += 1
            rows.append(out)
            new_past.append(ctx)
        hidden = torch.tensor(np.asarray(rows, dtype=np.float64), dtype=torch.float64)
        return hidden, (new_past if use_cache else None)

    def logits(self, hidden):
        return hidden

    def select_cache(self, past, index):
        return [list(past[int(i)]) for i in index.tolist()]

    def fingerprint(self) -> str:
        return (
            f"synthetic:{self.vocab_size}:{self.seed}:{self.scale}:{self.tie_levels}:{self.order}"
        )

    # exact reference quantities ------------------------------------------------------------
    def next_logits(self, context: Sequence[int]) -> np.ndarray:
        """Logits after ``context`` (float64), for brute-force references."""
        return self._row(context)
