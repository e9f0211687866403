"""The one training module. Every training run in memclaim goes through :func:`train_causal_lm`:
the tiny GPT here; later fine-tuning of HF models, shadow models, DP-SGD and unlearning extend
it through :class:`TrainConfig` and the ``objective`` hook, never through a second loop.

Runs are seeded and reproducible on a fixed thread count: batches come from a torch Generator
seeded by ``config.seed``, and the model is initialized by the caller under the same seed.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch

from ..jsonutil import ResultMixin
from ..validate import integer, nonneg, positive


@dataclass(frozen=True)
class TrainConfig:
    steps: int = 1000
    batch_size: int = 16
    seq_len: int = 128
    lr: float = 3e-3
    min_lr_ratio: float = 0.1  # cosine decay to lr * min_lr_ratio
    warmup_steps: int = 50
    weight_decay: float = 0.01
    grad_clip: float | None = 1.0
    seed: int = 0
    betas: tuple[float, float] = (0.9, 0.95)

    def __post_init__(self):
        integer("steps", self.steps, minimum=0)
        integer("batch_size", self.batch_size, minimum=1)
        integer("seq_len", self.seq_len, minimum=2)
        positive("lr", self.lr)
        nonneg("weight_decay", self.weight_decay)
        integer("warmup_steps", self.warmup_steps, minimum=0)

    def lr_at(self, step: int) -> float:
        if self.warmup_steps and step < self.warmup_steps:
            return self.lr * (step + 1) / self.warmup_steps
        span = max(1, self.steps - self.warmup_steps)
        t = min(1.0, (step - self.warmup_steps) / span)
        lo = self.lr * self.min_lr_ratio
        return lo + 0.5 * (self.lr - lo) * (1 + math.cos(math.pi * t))


@dataclass(frozen=True)
class TrainResult(ResultMixin):
    steps: int
    tokens: int
    seconds: float
    first_loss: float
    final_loss: float
    losses: tuple[float, ...] = field(repr=False)


def pack_documents(docs: Sequence[Sequence[int]], *, seq_len: int, sep_ids: Sequence[int]) -> torch.Tensor:
    """Concatenate documents, each preceded by ``sep_ids`` (start-of-text), and cut the stream
    into blocks of ``seq_len`` tokens -> LongTensor [n_blocks, seq_len]. The tail is dropped."""
    stream: list[int] = []
    for d in docs:
        stream.extend(sep_ids)
        stream.extend(d)
    n = len(stream) // seq_len
    if n == 0:
        from ..errors import InputError

        raise InputError(f"training data has {len(stream)} tokens, fewer than one block of {seq_len}",
                         hint="add data or lower seq_len")
    return torch.tensor(stream[: n * seq_len], dtype=torch.long).view(n, seq_len)  # [n_blocks, seq_len]


def next_token_loss(model, batch: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy of a causal LM on a [B, T] batch."""
    logits = model(input_ids=batch).logits  # [B, T, V]
    return torch.nn.functional.cross_entropy(
        logits[:, :-1].reshape(-1, logits.shape[-1]).float(),  # [(B*(T-1)), V]
        batch[:, 1:].reshape(-1),
    )


def train_causal_lm(model, blocks: torch.Tensor, config: TrainConfig, *,
                    objective: Callable[[object, torch.Tensor], torch.Tensor] | None = None,
                    on_step: Callable[[int, float], None] | None = None) -> TrainResult:
    """AdamW with warmup + cosine decay over ``config.steps`` steps on ``blocks`` [n, T].

    Batches are drawn epoch by epoch from a seeded permutation. ``objective(model, batch)``
    replaces the next-token loss (unlearning objectives use it); ``on_step(step, loss)`` is
    called after every step (progress bars, early stopping by raising StopIteration).
    """
    objective = objective or next_token_loss
    gen = torch.Generator().manual_seed(config.seed)
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=config.lr, betas=config.betas,
    )
    model.train()
    n = blocks.shape[0]
    perm = torch.randperm(n, generator=gen)
    pos = 0
    losses: list[float] = []
    t0 = time.perf_counter()
    tokens = 0
    step = 0
    try:
        for step in range(config.steps):
            if pos + config.batch_size > n:
                perm = torch.randperm(n, generator=gen)
                pos = 0
            idx = perm[pos:pos + config.batch_size]
            pos += config.batch_size
            batch = blocks[idx]
            for g in opt.param_groups:
                g["lr"] = config.lr_at(step)
            loss = objective(model, batch)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if config.grad_clip:
                torch.nn.utils.clip_grad_norm_(params, config.grad_clip)
            opt.step()
            losses.append(float(loss.detach()))
            tokens += batch.numel()
            if on_step is not None:
                on_step(step, losses[-1])
    except StopIteration:
        pass
    finally:
        model.eval()
    return TrainResult(steps=len(losses), tokens=tokens, seconds=time.perf_counter() - t0,
                       first_loss=losses[0] if losses else math.nan,
                       final_loss=float(sum(losses[-20:]) / len(losses[-20:])) if losses else math.nan,
                       losses=tuple(losses))
