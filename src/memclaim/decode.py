"""Decoding read-outs of a model, for attack authors: next-token log-probabilities, greedy and
temperature decoding, and the scoring engine's teacher-forced per-token statistics.

    >>> from memclaim.decode import greedy_decode, next_token_logprobs, teacher_forced
    >>> from memclaim.models.base import SyntheticLM
    >>> lm = SyntheticLM(vocab_size=8)           # or mc.load_model("toy").lm, or a transformers model
    >>> next_token_logprobs(lm, [[1, 2]]).shape  # log p(. | context), float64
    (1, 8)
    >>> greedy_decode(lm, [[1, 2]], n_tokens=3)  # the argmax continuation, token by token
    array([[0, 1, 2]])
    >>> teacher_forced(lm, [[1, 2]], [[0, 1, 2]]).greedy_match  # ... is what teacher forcing calls greedy
    array([ True])

``model`` is either a transformers causal LM (its ``model(input_ids).logits`` at the last
position, then a float64 log-softmax: the numbers the [MX] reproductions recorded) or a
:class:`memclaim.models.base.LanguageModel` (a loaded model's ``.lm``, a gated release, the
synthetic models of the tests: its :meth:`~memclaim.models.base.LanguageModel.next_token_logits`,
float32 unembedding or better). Scores of a whole suffix under a decoding policy are the scoring
engine's (:func:`memclaim.score`); this module is for the read-outs an attack builds on.

Determinism: batches are cut at fixed sizes and every call runs under a fixed torch thread count
(:func:`torch_threads`, default :data:`THREADS`), because a BLAS reduction may split differently
on another thread count; ties go to the lowest token id. Sampling draws from a numpy Generator
passed in. With the same inputs and software stack the numbers are identical bit for bit.

These helpers were written for the training-based reproductions of [MX] §8
(:mod:`memclaim.experiments.models` re-exports them under their old names).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Union

import numpy as np

from .decoding import Policy
from .errors import DomainError, InputError
from .jsonutil import ResultMixin
from .models.base import LanguageModel
from .validate import integer, positive

if TYPE_CHECKING:  # the annotations' names only (torch and transformers load when a model is run)
    from numpy.typing import ArrayLike
    from transformers import PreTrainedModel

#: what the read-outs take: a transformers causal LM or memclaim's model interface
Model = Union["PreTrainedModel", LanguageModel]

#: torch threads used by default (a fixed count keeps BLAS reductions, hence every number,
#: identical across machines with different core counts).
THREADS = 2

__all__ = [
    "THREADS",
    "TeacherForced",
    "greedy_decode",
    "next_token_logprobs",
    "sample_decode",
    "teacher_forced",
    "torch_threads",
]


@contextlib.contextmanager
def torch_threads(n: int = THREADS) -> Iterator[None]:
    """Run the block with ``n`` torch threads, restoring the previous count afterwards.

    >>> import torch
    >>> from memclaim.decode import torch_threads
    >>> with torch_threads(1):
    ...     torch.get_num_threads()
    1
    """
    import torch

    n = integer("threads", n, minimum=1)
    old = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def _vocab_size(model: Model) -> int:
    return (
        int(model.vocab_size) if isinstance(model, LanguageModel) else int(model.config.vocab_size)
    )


def _positions(model: Model) -> int | None:
    """The context length the model's config states (None: no limit, e.g. a synthetic model)."""
    cfg = getattr(model, "config", None)
    n = getattr(cfg, "n_positions", None) or getattr(cfg, "max_position_embeddings", None)
    return int(n) if n else None


def _as_2d(name: str, rows, vocab_size: int, *, allow_empty_cols: bool = False) -> np.ndarray:
    a = np.asarray(rows)
    if a.ndim == 1:
        a = a[None, :]
    if a.ndim != 2 or (a.size and not np.issubdtype(a.dtype, np.integer)):
        raise InputError(f"{name} must be a 2-d array of token ids (n, t), got shape {a.shape}")
    if a.shape[1] == 0 and not allow_empty_cols:
        raise InputError(f"{name} needs at least one token per row (prepend the start-of-text id)")
    if a.size and (a.min() < 0 or a.max() >= vocab_size):
        raise InputError(f"{name} has token ids outside [0, {vocab_size})")
    return a.astype(np.int64)


def next_token_logprobs(
    model: Model, contexts: ArrayLike, *, batch_size: int = 4096, threads: int = THREADS
) -> np.ndarray:
    """log p(. | context) for each row of ``contexts`` (n, t) (equal-length rows), float64 (n, V).

    Batches are cut at fixed sizes, so a row's numbers do not depend on how many rows are asked
    for beyond its batch.

    >>> from memclaim.decode import next_token_logprobs
    >>> from memclaim.models.base import SyntheticLM
    >>> lp = next_token_logprobs(SyntheticLM(vocab_size=8), [[1, 2], [3, 4]])
    >>> lp.shape, lp.dtype, bool(abs(np.exp(lp).sum(axis=1) - 1).max() < 1e-12)
    ((2, 8), dtype('float64'), True)
    """
    import torch

    V = _vocab_size(model)
    ctx = _as_2d("contexts", contexts, V)
    batch_size = integer("batch_size", batch_size, minimum=1)
    out = np.empty((ctx.shape[0], V), dtype=np.float64)
    with torch_threads(threads), torch.inference_mode():
        for s in range(0, ctx.shape[0], batch_size):
            ids = torch.from_numpy(ctx[s : s + batch_size])
            if isinstance(model, LanguageModel):
                logits = model.next_token_logits(ids.to(model.device))[0].to(
                    "cpu", torch.float64
                )  # [b, V]
            else:
                logits = model(input_ids=ids).logits[:, -1, :].to(torch.float64)  # [b, V]
            out[s : s + ids.shape[0]] = torch.log_softmax(logits, dim=-1).numpy()
    return out


def greedy_decode(
    model: Model,
    prompts: ArrayLike,
    *,
    n_tokens: int,
    batch_size: int = 4096,
    threads: int = THREADS,
) -> np.ndarray:
    """Greedy continuation of ``n_tokens`` tokens after each (equal-length) prompt row, (n, n_tokens).

    Ties go to the lowest token id (numpy argmax), so the output is a deterministic function of
    the logits.

    >>> from memclaim.decode import greedy_decode
    >>> from memclaim.models.base import SyntheticLM
    >>> greedy_decode(SyntheticLM(vocab_size=8), [[7, 1], [7, 2]], n_tokens=3)
    array([[7, 2, 2],
           [5, 2, 2]])
    """
    n_tokens = integer("n_tokens", n_tokens, minimum=1)
    V = _vocab_size(model)
    ctx = _as_2d("prompts", prompts, V)
    positions = _positions(model)
    if positions is not None and ctx.shape[1] + n_tokens > positions + 1:
        raise DomainError(
            f"prompt length {ctx.shape[1]} + {n_tokens} new tokens exceeds the model's "
            f"{positions} positions"
        )
    out = np.empty((ctx.shape[0], n_tokens), dtype=np.int64)
    for t in range(n_tokens):
        lp = next_token_logprobs(model, ctx, batch_size=batch_size, threads=threads)
        out[:, t] = np.argmax(lp, axis=1)
        ctx = np.concatenate([ctx, out[:, t : t + 1]], axis=1)
    return out


def sample_decode(
    model: Model,
    prompts: ArrayLike,
    *,
    n_tokens: int,
    temperature: float,
    rng: np.random.Generator,
    batch_size: int = 4096,
    threads: int = THREADS,
) -> tuple[np.ndarray, np.ndarray]:
    """Sample ``n_tokens`` tokens after each prompt row from softmax(logits / T), no truncation
    (the ``temperature:T`` policy of :mod:`memclaim.decoding`).

    Returns (tokens (n, n_tokens), log-prob of each sampled token at that temperature (n, n_tokens)).
    Sampling is by inversion of float64 cumulative sums with one uniform per row and step from
    ``rng``.

    >>> import numpy as np
    >>> from memclaim.decode import sample_decode
    >>> from memclaim.models.base import SyntheticLM
    >>> tokens, logp = sample_decode(SyntheticLM(vocab_size=8), [[7]], n_tokens=4, temperature=1.0,
    ...                              rng=np.random.default_rng(0))
    >>> tokens, logp.round(2)
    (array([[3, 5, 1, 1]]), array([[-1.36, -1.35, -0.15, -4.08]]))
    """
    n_tokens = integer("n_tokens", n_tokens, minimum=1)
    T = positive("temperature", temperature)
    V = _vocab_size(model)
    ctx = _as_2d("prompts", prompts, V)
    out = np.empty((ctx.shape[0], n_tokens), dtype=np.int64)
    lps = np.empty((ctx.shape[0], n_tokens), dtype=np.float64)
    for t in range(n_tokens):
        lp = next_token_logprobs(model, ctx, batch_size=batch_size, threads=threads) / T
        lp = lp - np.logaddexp.reduce(lp, axis=1, keepdims=True)  # log softmax(logits / T)
        cum = np.cumsum(np.exp(lp), axis=1)
        cum[:, -1] = 1.0
        u = rng.random(ctx.shape[0])
        tok = np.minimum((cum <= u[:, None]).sum(axis=1), V - 1)
        out[:, t] = tok
        lps[:, t] = lp[np.arange(ctx.shape[0]), tok]
        ctx = np.concatenate([ctx, tok[:, None]], axis=1)
    return out, lps


@dataclass(frozen=True)
class TeacherForced(ResultMixin):
    """Per-token teacher-forced statistics of target rows given prompt rows (the scoring
    engine's one pass, :class:`memclaim.scoring.engine.TeacherForcingEngine`), shapes (n, S):
    full-softmax log p of each target token, and the mean / std of log p under the model's
    full next-token distribution at that position (min-k%++), plus the greedy-match flag (n,)."""

    token_logprob: np.ndarray
    token_mean: np.ndarray
    token_std: np.ndarray
    greedy_match: np.ndarray

    @property
    def token_prob(self) -> np.ndarray:
        return np.exp(self.token_logprob)


def teacher_forced(
    model: Model,
    prompts: Sequence[Sequence[int]],
    targets: ArrayLike,
    *,
    batch_size: int = 512,
    threads: int = THREADS,
) -> TeacherForced:
    """Teacher-forced statistics of each ``targets`` row after the matching ``prompts`` row.

    ``model`` is an HF causal LM or any :class:`memclaim.models.base.LanguageModel` (e.g. a gated
    release). Prompts may differ in length (the engine left-pads with an attention mask); targets
    must all have the same length within the call.

    >>> from memclaim.decode import teacher_forced
    >>> from memclaim.models.base import SyntheticLM
    >>> tf = teacher_forced(SyntheticLM(vocab_size=8), [[1, 2]], [[3, 4]])
    >>> tf.token_logprob.round(3), tf.greedy_match
    (array([[-1.144, -2.48 ]]), array([False]))
    """
    import torch

    from .models.hf import HFLanguageModel
    from .scoring.engine import TeacherForcingEngine

    lm = model if isinstance(model, LanguageModel) else HFLanguageModel(model)
    V = int(lm.vocab_size)
    tg = _as_2d("targets", targets, V)
    pr = [list(map(int, p)) for p in prompts]
    if len(pr) != tg.shape[0]:
        raise InputError(f"{len(pr)} prompts for {tg.shape[0]} target rows")
    for i, p in enumerate(pr):
        if not p or min(p) < 0 or max(p) >= V:
            raise InputError(f"prompt {i} must be a non-empty list of token ids in [0, {V})")
    batch_size = integer("batch_size", batch_size, minimum=1)
    engine = TeacherForcingEngine(lm, [Policy()])
    parts = []
    with torch_threads(threads), torch.inference_mode():
        for s in range(0, len(pr), batch_size):
            parts.append(
                engine.score_batch(pr[s : s + batch_size], tg[s : s + batch_size].tolist())
            )
    return TeacherForced(
        token_logprob=np.concatenate([p.token_logprob for p in parts], axis=0),
        token_mean=np.concatenate([p.token_mean for p in parts], axis=0),
        token_std=np.concatenate([p.token_std for p in parts], axis=0),
        greedy_match=np.concatenate([p.greedy_match for p in parts], axis=0),
    )
