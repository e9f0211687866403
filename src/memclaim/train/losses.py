"""Training losses of causal LMs and Opacus's Poisson sampling rate: shared by the trainer
(:mod:`memclaim.train.trainer`) and DP-SGD (:mod:`memclaim.train.dp`), which both build on them.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ..validate import integer

__all__ = [
    "next_token_loss",
    "per_example_nll",
    "masked_next_token_loss",
    "objective_for",
    "poisson_rate",
]


def next_token_loss(model: torch.nn.Module, batch: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy of a causal LM on a [B, T] batch.

    >>> import torch
    >>> from types import SimpleNamespace
    >>> from memclaim.train.losses import next_token_loss
    >>> uniform = lambda input_ids: SimpleNamespace(logits=torch.zeros(*input_ids.shape, 16))  # p = 1/16 each
    >>> round(float(next_token_loss(uniform, torch.tensor([[0, 5, 6, 7]]))), 4)  # log 16
    2.7726
    """
    logits = model(input_ids=batch).logits  # [B, T, V]
    return torch.nn.functional.cross_entropy(
        logits[:, :-1].reshape(-1, logits.shape[-1]).float(),  # [(B*(T-1)), V]
        batch[:, 1:].reshape(-1),
    )


def per_example_nll(
    model: torch.nn.Module, batch: torch.Tensor, *, pad_id: int | None = None, reduce: str = "mean"
) -> torch.Tensor:
    """Each example's own next-token NLL -> [B]: the mean (``reduce="mean"``) or the sum
    (``"sum"``, = -log p(sequence)) over its targets, targets equal to ``pad_id`` ignored.

    >>> import torch
    >>> from types import SimpleNamespace
    >>> from memclaim.train.losses import per_example_nll
    >>> uniform = lambda input_ids: SimpleNamespace(logits=torch.zeros(*input_ids.shape, 16))  # p = 1/16 each
    >>> per_example_nll(uniform, torch.tensor([[0, 5, 6, 9], [0, 7, 9, 9]]), pad_id=9, reduce="sum")  # 2 and 1 targets
    tensor([5.5452, 2.7726])
    """
    logits = model(input_ids=batch).logits  # [B, T, V]
    targets = batch[:, 1:]  # [B, T-1]
    nll = torch.nn.functional.cross_entropy(
        logits[:, :-1].reshape(-1, logits.shape[-1]).float(),
        targets.reshape(-1),
        reduction="none",
    ).view(targets.shape)  # [B, T-1]
    if pad_id is None:
        return nll.sum(1) if reduce == "sum" else nll.mean(1)
    keep = (targets != pad_id).to(nll.dtype)  # [B, T-1]
    total = (nll * keep).sum(1)
    return total if reduce == "sum" else total / keep.sum(1).clamp_min(1.0)


def masked_next_token_loss(
    model: torch.nn.Module, batch: torch.Tensor, *, pad_id: int
) -> torch.Tensor:
    """Mean over examples of each example's mean token NLL, pad targets ignored.

    >>> import torch
    >>> from types import SimpleNamespace
    >>> from memclaim.train.losses import masked_next_token_loss
    >>> uniform = lambda input_ids: SimpleNamespace(logits=torch.zeros(*input_ids.shape, 16))  # p = 1/16 each
    >>> masked_next_token_loss(uniform, torch.tensor([[0, 5, 6, 9], [0, 7, 9, 9]]), pad_id=9)  # log 16
    tensor(2.7726)
    """
    return per_example_nll(model, batch, pad_id=pad_id).mean()


def objective_for(pad_id: int | None) -> Callable:
    """The batch-mean training loss: :func:`next_token_loss`, or with ``pad_id`` the mean of each
    example's mean NLL with pad targets ignored (:func:`masked_next_token_loss`).

    >>> objective_for(None) is next_token_loss
    True
    """
    if pad_id is None:
        return next_token_loss
    pad = int(pad_id)
    return lambda model, batch: masked_next_token_loss(model, batch, pad_id=pad)


def poisson_rate(n: int, batch_size: int) -> float:
    """Opacus's sampling rate for ``n`` examples and expected batch ``batch_size``:
    1 / ceil(n / batch_size) (``DPDataLoader.from_data_loader``: 1 / len(data_loader)).

    >>> poisson_rate(1000, 64)  # 16 batches
    0.0625
    """
    n = integer("number of examples", n, minimum=1)
    b = integer("batch_size", batch_size, minimum=1)
    return 1.0 / math.ceil(n / b)
