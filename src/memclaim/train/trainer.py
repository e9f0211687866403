"""The one training module. Every training run in memclaim goes through :func:`train_causal_lm`:
the tiny GPT, fine-tuning of HF models, shadow models, DP-SGD and unlearning. They differ only in
:class:`TrainConfig` options and the ``objective`` hook, never in a second loop.

Options (all default to the original behaviour: shuffled epochs, AdamW, warmup + cosine):

- ``sampling``: ``"shuffle"`` draws each batch from a seeded permutation, epoch by epoch;
  ``"poisson"`` includes every block independently with probability q = 1 / ceil(n / batch_size)
  at every step (variable batch size), the sampling DP-SGD's accountant assumes. The rule is the
  one of Opacus's ``UniformWithReplacementSampler`` (``torch.rand(n) < q``), so a non-private run
  with ``sampling="poisson"`` sees the same batches as a DP run with the same seed ([MX] App. F.2:
  "the eps = inf configuration runs the same optimizer with clipping and noise disabled").
- ``dp``: a :class:`memclaim.train.dp.DPConfig` turns the run into DP-SGD (DP-AdamW) through
  Opacus: per-sample gradients, per-sample clipping, Gaussian noise calibrated by Opacus's
  accountant, Poisson sampling by Opacus's data loader; the result carries the epsilon actually
  spent (:class:`memclaim.train.dp.DPReport`). ``grad_clip`` (the batch-gradient clip) is not
  applied in a DP run: per-sample clipping replaces it.
- ``pad_id``: targets equal to ``pad_id`` are ignored and the loss is the mean over examples of
  each example's own mean token loss, so every block's loss depends on that block alone (what
  per-sample clipping needs: a loss averaged over the batch's token count would couple examples).
- ``physical_batch_size``: split each logical batch into chunks of at most this many blocks
  and accumulate (gradient accumulation; in a DP run through Opacus's skip-step mechanism, so
  clipping stays per sample and noise is added once per logical batch, [MX] App. F.2 "physical
  batch 8 with gradient accumulation").
- ``schedule``: ``"cosine"`` (warmup + cosine decay to ``lr * min_lr_ratio``), ``"linear"``
  (warmup + linear decay to the same floor) or ``"constant"`` (warmup, then ``lr``).
- ``threads``: torch threads for the run (restored afterwards); BLAS reductions may split
  differently on another thread count, so a fixed count makes a run reproducible bit for bit.

Runs are seeded and reproducible on a fixed thread count: batches come from a torch Generator
seeded by ``config.seed``, DP noise from a second Generator seeded by ``DPConfig.noise_seed`` (or
``config.seed + 1``), and the model is initialized by the caller under its own seed.
"""

from __future__ import annotations

import contextlib
import math
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from ..errors import DomainError, InputError
from ..jsonutil import ResultMixin
from ..progress import ProgressCallback, Reporter, ambient
from ..validate import integer, nonneg, positive
from ..validate import seed as check_seed
from .dp import DPConfig, PrivateRun
from .losses import (  # noqa: F401
    masked_next_token_loss,
    next_token_loss,
    objective_for,
    per_example_nll,
    poisson_rate,
)

SCHEDULES = ("cosine", "linear", "constant")
SAMPLINGS = ("shuffle", "poisson")


@dataclass(frozen=True)
class TrainConfig:
    steps: int = 1000
    batch_size: int = 16
    seq_len: int = 128
    lr: float = 3e-3
    min_lr_ratio: float = 0.1  # cosine/linear decay to lr * min_lr_ratio
    warmup_steps: int = 50
    weight_decay: float = 0.01
    grad_clip: float | None = 1.0
    seed: int = 0
    betas: tuple[float, float] = (0.9, 0.95)
    # ---- extensions (defaults keep the original behaviour)
    schedule: str = "cosine"
    sampling: str | None = None  # None: "poisson" for a DP run, "shuffle" otherwise
    pad_id: int | None = None
    dp: object | None = None  # memclaim.train.dp.DPConfig
    physical_batch_size: int | None = None
    threads: int | None = None

    def __post_init__(self):
        integer("steps", self.steps, minimum=0)
        integer("batch_size", self.batch_size, minimum=1)
        integer("seq_len", self.seq_len, minimum=2)
        positive("lr", self.lr)
        nonneg("weight_decay", self.weight_decay)
        integer("warmup_steps", self.warmup_steps, minimum=0)
        nonneg("min_lr_ratio", self.min_lr_ratio)
        check_seed("seed", self.seed)
        if self.grad_clip is not None:
            positive("grad_clip", self.grad_clip)
        if self.schedule not in SCHEDULES:
            raise DomainError(
                f"unknown learning-rate schedule {self.schedule!r}", hint=f"one of {SCHEDULES}"
            )
        if self.sampling is not None and self.sampling not in SAMPLINGS:
            raise DomainError(f"unknown sampling {self.sampling!r}", hint=f"one of {SAMPLINGS}")
        if self.pad_id is not None:
            integer("pad_id", self.pad_id, minimum=0)
        if self.physical_batch_size is not None:
            integer("physical_batch_size", self.physical_batch_size, minimum=1)
        if self.threads is not None:
            integer("threads", self.threads, minimum=1)
        if self.dp is not None:
            if not isinstance(self.dp, DPConfig):
                raise InputError(
                    f"dp must be a memclaim.train.dp.DPConfig, got {type(self.dp).__name__}"
                )
            if self.sampling == "shuffle":
                raise DomainError(
                    "a DP-SGD run needs Poisson sampling: Opacus's accountant (and the add/remove guarantee "
                    "it certifies) assumes every example is included independently at every step",
                    hint="leave sampling unset (or 'poisson') for a DP run",
                )

    @property
    def sampling_mode(self) -> str:
        return self.sampling or ("poisson" if self.dp is not None else "shuffle")

    def lr_at(self, step: int) -> float:
        if self.warmup_steps and step < self.warmup_steps:
            return self.lr * (step + 1) / self.warmup_steps
        if self.schedule == "constant":
            return self.lr
        span = max(1, self.steps - self.warmup_steps)
        t = min(1.0, (step - self.warmup_steps) / span)
        lo = self.lr * self.min_lr_ratio
        if self.schedule == "linear":
            return self.lr - (self.lr - lo) * t
        return lo + 0.5 * (self.lr - lo) * (1 + math.cos(math.pi * t))


@dataclass(frozen=True)
class TrainResult(ResultMixin):
    steps: int
    tokens: int
    seconds: float
    first_loss: float
    final_loss: float
    losses: tuple[float, ...] = field(repr=False)
    sampling: str = "shuffle"
    empty_batches: int = 0  # Poisson steps that drew no block (a DP step still adds noise)
    dp: object | None = None  # memclaim.train.dp.DPReport for a DP-SGD run


def pack_documents(
    docs: Sequence[Sequence[int]], *, seq_len: int, sep_ids: Sequence[int], fill: bool = False
) -> torch.Tensor:
    """Concatenate documents, each preceded by ``sep_ids`` (start-of-text), and cut the stream
    into blocks of ``seq_len`` tokens -> LongTensor [n_blocks, seq_len]. The tail is dropped;
    with ``fill`` a filler document of separator tokens first completes the stream to a whole
    number of blocks, so no document falls in a dropped tail (the one home of that rule: the
    planted corpora and the shadows' training data use it).

    >>> pack_documents([[5, 6, 7], [8]], seq_len=3, sep_ids=[0]).tolist()
    [[0, 5, 6], [7, 0, 8]]
    >>> pack_documents([[5, 6, 7], [8, 9]], seq_len=3, sep_ids=[0], fill=True).tolist()
    [[0, 5, 6], [7, 0, 8], [9, 0, 0]]
    """
    if fill:
        docs = list(docs)
        total = sum(len(sep_ids) + len(d) for d in docs)
        missing = (-total) % seq_len
        if missing:
            n_fill = (
                missing - len(sep_ids)
            ) % seq_len  # pack_documents puts len(sep) more before it
            docs.append((list(sep_ids) * (n_fill // len(sep_ids) + 1))[:n_fill])
    stream: list[int] = []
    for d in docs:
        stream.extend(sep_ids)
        stream.extend(d)
    n = len(stream) // seq_len
    if n == 0:
        raise InputError(
            f"training data has {len(stream)} tokens, fewer than one block of {seq_len}",
            hint="add data or lower seq_len",
        )
    return torch.tensor(stream[: n * seq_len], dtype=torch.long).view(
        n, seq_len
    )  # [n_blocks, seq_len]


def example_blocks(
    docs: Sequence[Sequence[int]], *, seq_len: int, sep_ids: Sequence[int], pad_id: int
) -> torch.Tensor:
    """One block per document: ``sep_ids + doc``, right-padded with ``pad_id`` to ``seq_len``
    -> LongTensor [n_docs, seq_len]. Use with ``TrainConfig(pad_id=...)`` so padding is not
    trained on. One block per document is what makes a document one DP *example* (a document
    planted k times is then k examples, a group of k under add/remove).

    >>> example_blocks([[5, 6], [7]], seq_len=4, sep_ids=[0], pad_id=9).tolist()
    [[0, 5, 6, 9], [0, 7, 9, 9]]
    """
    pad = integer("pad_id", pad_id, minimum=0)
    T = integer("seq_len", seq_len, minimum=2)
    sep = [int(t) for t in sep_ids]
    if not docs:
        raise InputError("no documents to turn into example blocks")
    out = torch.full((len(docs), T), pad, dtype=torch.long)  # [n_docs, seq_len]
    for i, d in enumerate(docs):
        seq = sep + [int(t) for t in d]
        if len(seq) > T:
            raise InputError(
                f"document {i} has {len(seq)} tokens with its separator, more than seq_len = {T}",
                hint="raise seq_len or shorten the document; an example is never cut",
            )
        if pad in d:
            raise InputError(
                f"document {i} contains the pad id {pad}",
                hint="use a pad id that never occurs in the data",
            )
        out[i, : len(seq)] = torch.tensor(seq, dtype=torch.long)
    return out


def default_objective(config: TrainConfig) -> Callable:
    """The training loss for ``config``: next-token NLL, pad targets ignored when ``config.pad_id`` is set.

    >>> callable(default_objective(TrainConfig(steps=1, pad_id=9)))
    True
    """
    return objective_for(config.pad_id)


def model_device(model: torch.nn.Module) -> torch.device:
    """The device of ``model``'s first parameter: where training batches are put (a model is
    trained where it lies; the API moves it there first, ``--device``).

    >>> import torch
    >>> model_device(torch.nn.Linear(2, 2))
    device(type='cpu')
    """
    for p in model.parameters():
        return p.device
    return torch.device("cpu")


@torch.no_grad()
def evaluate_nll(
    model: torch.nn.Module, blocks: torch.Tensor, *, pad_id: int | None = None, batch_size: int = 32
) -> float:
    """Token-weighted mean next-token NLL (nats) of ``model`` over ``blocks`` [n, T]; exp of it
    is the perplexity. The model is put in eval mode (and left there).

    >>> import torch
    >>> from types import SimpleNamespace
    >>> from memclaim.train.trainer import evaluate_nll
    >>> class Uniform(torch.nn.Module):  # p = 1/16 for every next token
    ...     def forward(self, input_ids): return SimpleNamespace(logits=torch.zeros(*input_ids.shape, 16))
    >>> round(evaluate_nll(Uniform(), torch.tensor([[0, 5, 6, 9]]), pad_id=9), 4)  # log 16: perplexity 16
    2.7726
    """
    _check_blocks(blocks)
    model.eval()
    dev = model_device(model)
    total, count = 0.0, 0
    for s in range(0, blocks.shape[0], batch_size):
        b = blocks[s : s + batch_size].to(dev, non_blocking=True)
        sums = per_example_nll(model, b, pad_id=pad_id, reduce="sum")  # [b]
        n = (b[:, 1:] != pad_id).sum() if pad_id is not None else b[:, 1:].numel()
        total += float(sums.double().sum())
        count += int(n)
    if count == 0:
        raise InputError("no target tokens to evaluate (every target is padding)")
    return total / count


@contextlib.contextmanager
def _threads(n: int | None):
    if n is None:
        yield
        return
    old = torch.get_num_threads()
    torch.set_num_threads(int(n))
    try:
        yield
    finally:
        torch.set_num_threads(old)


def _check_blocks(blocks) -> None:
    if not isinstance(blocks, torch.Tensor) or blocks.dim() != 2 or blocks.dtype != torch.long:
        raise InputError(
            f"blocks must be a LongTensor [n_blocks, seq_len], got "
            f"{type(blocks).__name__} {getattr(blocks, 'shape', '')} {getattr(blocks, 'dtype', '')}"
        )
    if blocks.shape[0] == 0 or blocks.shape[1] < 2:
        raise InputError(
            f"blocks has shape {tuple(blocks.shape)}: need at least one block of >= 2 tokens"
        )


class _Batches:
    """Index batches: a seeded permutation epoch by epoch, or Poisson inclusion."""

    def __init__(self, n: int, config: TrainConfig, gen: torch.Generator):
        self.n, self.gen, self.B = n, gen, config.batch_size
        self.mode = config.sampling_mode
        self.q = poisson_rate(n, self.B) if self.mode == "poisson" else None
        self.perm = torch.randperm(n, generator=gen) if self.mode == "shuffle" else None
        self.pos = 0

    def next(self) -> torch.Tensor:
        if self.mode == "poisson":
            # the rule of opacus.utils.uniform_sampler.UniformWithReplacementSampler
            mask = torch.rand(self.n, generator=self.gen) < self.q
            return mask.nonzero(as_tuple=False).reshape(-1)
        if self.pos + self.B > self.n:
            # a new epoch; with batch_size > n every step is the whole (reshuffled) set
            self.perm = torch.randperm(self.n, generator=self.gen)
            self.pos = 0
        idx = self.perm[self.pos : self.pos + self.B]
        self.pos += self.B
        return idx


def _chunks(batch: torch.Tensor, size: int | None) -> list[torch.Tensor]:
    if size is None or batch.shape[0] <= size:
        return [batch]
    return list(batch.split(size))


def train_causal_lm(
    model: torch.nn.Module,
    blocks: torch.Tensor,
    config: TrainConfig,
    *,
    objective: Callable[[torch.nn.Module, torch.Tensor], torch.Tensor] | None = None,
    on_step: Callable[[int, float], None] | None = None,
    label: str = "training",
    progress: ProgressCallback | None = None,
) -> TrainResult:
    """AdamW with warmup + decay over ``config.steps`` steps on ``blocks`` [n, T].

    ``objective(model, batch)`` replaces the next-token loss (unlearning objectives use it); it
    must return the mean over the batch's examples of a per-example loss (in a DP run Opacus
    computes per-example gradients of exactly that). ``on_step(step, loss)`` is called after
    every step (verifiers, early stopping by raising StopIteration). Every step is also reported
    to ``progress`` (default: the ambient callback of :func:`memclaim.progress.reporting`) as
    operation ``label``, stage "train", with the loss in ``extra``: every training run of
    memclaim (the tiny GPT, shadows, fine-tuning, unlearning) shows its progress the same way.
    See the module docstring for sampling, DP-SGD, padding, accumulation and schedules.

    >>> from memclaim.train.finetune import new_gpt2
    >>> from memclaim.train.trainer import TrainConfig, pack_documents, train_causal_lm
    >>> blocks = pack_documents([[1, 2, 3, 4, 5, 6, 7]] * 8, seq_len=8, sep_ids=[0])
    >>> model = new_gpt2(vocab_size=16, n_positions=8, n_embd=8, n_head=2)  # doctest: +SKIP
    >>> config = TrainConfig(steps=30, batch_size=4, seq_len=8, lr=1e-2, warmup_steps=0)
    >>> res = train_causal_lm(model, blocks, config)  # doctest: +SKIP
    >>> res.steps, round(res.first_loss, 2), round(res.final_loss, 2)  # doctest: +SKIP
    (30, 2.79, 1.69)
    """
    _check_blocks(blocks)
    objective = objective or default_objective(config)
    bar = Reporter(
        progress or ambient(), stage="train", label=label, total=config.steps, unit="steps"
    )

    def step_done(step: int, loss: float) -> None:
        bar.advance(1, loss=loss)
        if on_step is not None:
            on_step(step, loss)

    with bar, _threads(config.threads), warnings.catch_warnings():
        # Opacus's per-sample hooks fire a full backward hook on the embedding, whose input (token
        # ids) needs no gradient; torch warns about that benign case on every DP step
        warnings.filterwarnings("ignore", message="Full backward hook is firing")
        return _run(model, blocks, config, objective, step_done)


def _run(model, blocks, config: TrainConfig, objective, on_step) -> TrainResult:
    gen = torch.Generator().manual_seed(config.seed)
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise InputError(
            "the model has no trainable parameters", hint="call model.requires_grad_(True) first"
        )
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    opt = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": config.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=config.lr,
        betas=config.betas,
    )
    n = blocks.shape[0]
    # the blocks go where the model is (once: a training set is small next to the model); index
    # draws stay on the CPU generator, so a run's batches are the same on every device
    blocks = blocks.to(model_device(model))
    private = None
    if config.dp is not None:
        private = PrivateRun(model, blocks, config, opt, gen)
        module, opt, batches = private.module, private.optimizer, private.batches()
    else:
        module, sampler = model, _Batches(n, config, gen)

        def _draw():
            while True:
                yield blocks[sampler.next()]

        batches = _draw()
    model.train()
    losses: list[float] = []
    t0 = time.perf_counter()
    tokens = 0
    empty = 0
    try:
        for step in range(config.steps):
            batch = next(batches)  # [b, T]
            for g in opt.param_groups:
                g["lr"] = config.lr_at(step)
            b = int(batch.shape[0])
            if b == 0:
                # a Poisson draw with no block: a DP step still adds noise (and is accounted);
                # a non-private step has nothing to do
                empty += 1
                if private is not None:
                    private.empty_step()
                losses.append(math.nan)
                if on_step is not None:
                    on_step(step, math.nan)
                continue
            opt.zero_grad(set_to_none=True)
            parts = _chunks(batch, config.physical_batch_size)
            total = 0.0
            for j, chunk in enumerate(parts):
                loss = objective(module, chunk)
                w = chunk.shape[0] / b
                if private is not None:
                    # Opacus scales per-sample gradients by the chunk size (loss_reduction="mean"):
                    # no reweighting; the DP optimizer sums clipped per-sample gradients itself
                    loss.backward()
                    if j < len(parts) - 1:
                        opt.signal_skip_step(do_skip=True)
                        opt.step()
                        opt.zero_grad(set_to_none=True)
                else:
                    (loss * w if len(parts) > 1 else loss).backward()
                total += float(loss.detach()) * w
            if private is None and config.grad_clip:
                torch.nn.utils.clip_grad_norm_(params, config.grad_clip)
            opt.step()
            losses.append(total)
            tokens += batch.numel()
            if on_step is not None:
                on_step(step, total)
    except StopIteration:
        pass
    finally:
        model.eval()
        report = private.close(steps=len(losses), empty=empty) if private is not None else None
    finite = [x for x in losses if not math.isnan(x)]
    return TrainResult(
        steps=len(losses),
        tokens=tokens,
        seconds=time.perf_counter() - t0,
        first_loss=finite[0] if finite else math.nan,
        final_loss=float(sum(finite[-20:]) / len(finite[-20:])) if finite else math.nan,
        losses=tuple(losses),
        sampling=config.sampling_mode,
        empty_batches=empty,
        dp=report,
    )
