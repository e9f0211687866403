"""Unlearning through the one trainer: gradient difference (GradDiff) and negative preference
optimization (NPO), run until an unlearning verifier reports the content forgotten ([MX] §8.2
"Unlearning is measure-relative", Table 4, App. F.2 "Unlearning").

[MX] App. F.2: "GradDiff (gradient ascent on the forget set with a retain-set regularizer) and
NPO [21], learning rate 7e-6, up to 14 rounds, stopping the round after the verifier first
reports the content forgotten (verbatim extraction from c below 0.15). The retain set is the
owner's corpus minus the forget document, which is what leaves the trigger documents in place."

Objectives (``objective(model, forget_batch)`` hooks for :func:`train_causal_lm`; the forget
batch comes from the trainer, the retain batch from the objective's own seeded generator):

- GradDiff: L = -NLL(forget) + lambda * NLL(retain), NLL the per-example mean token loss
  (Liu et al. 2022; the TOFU baseline of Maini et al. 2024).
- NPO (Zhang, Lin, Bai & Mei 2024, arXiv:2404.05868, Eq. 3): L = (2/beta) E_forget
  log(1 + (pi_theta(y|x) / pi_ref(y|x))^beta) + lambda * NLL(retain), with log pi(y|x) the
  summed token log-likelihood of the forget document and pi_ref the model before unlearning
  (frozen), beta = 0.1 (their default). With lambda > 0 this is their NPO+RT variant; the
  retain term is kept for both methods so they differ only in the forget loss.

A *round* is ``steps_per_round`` optimizer steps (default: one pass over the forget set). After
every round the verifier runs on the model; the run stops after the first round it reports
forgotten, or after ``max_rounds``. At least one round always runs ("stopping the round after
the verifier first reports the content forgotten"), also when the verifier already reports the
content forgotten before unlearning (as it does for a secret planted only through a reserved
trigger, [MX] Cor. 6.3); that verdict is recorded as ``forgotten_before``. Retain-set perplexity
is measured before and after.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..errors import DomainError, InputError
from ..jsonutil import ResultMixin
from ..validate import integer, nonneg, positive
from ..validate import seed as check_seed
from .trainer import TrainConfig, evaluate_nll, model_device, per_example_nll, train_causal_lm

__all__ = ["METHODS", "UnlearnConfig", "RoundReport", "UnlearnResult", "GradDiff", "NPO", "unlearn"]

METHODS = ("graddiff", "npo")


@dataclass(frozen=True)
class UnlearnConfig(ResultMixin):
    """Unlearning settings. ``lr`` 7e-6 and ``max_rounds`` 14 are [MX] App. F.2's for
    billion-parameter models; a tiny model needs a larger learning rate (the reproduction says
    which it uses)."""

    method: str = "npo"
    lr: float = 7e-6
    max_rounds: int = 14
    steps_per_round: int | None = None  # default: ceil(n_forget / batch_size)
    batch_size: int = 8
    retain_batch_size: int = 8
    retain_weight: float = 1.0
    beta: float = 0.1  # NPO temperature (Zhang et al. 2024)
    grad_clip: float | None = 1.0
    seed: int = 0
    threads: int | None = None

    def __post_init__(self):
        if self.method not in METHODS:
            raise DomainError(
                f"unknown unlearning method {self.method!r}", hint=f"one of {METHODS}"
            )
        positive("lr", self.lr)
        integer("max_rounds", self.max_rounds, minimum=1)
        if self.steps_per_round is not None:
            integer("steps_per_round", self.steps_per_round, minimum=1)
        integer("batch_size", self.batch_size, minimum=1)
        integer("retain_batch_size", self.retain_batch_size, minimum=1)
        nonneg("retain_weight", self.retain_weight)
        positive("beta", self.beta)
        check_seed("seed", self.seed)


class _Retain:
    """Seeded retain batches (a permutation, epoch by epoch)."""

    def __init__(self, blocks: torch.Tensor, batch_size: int, seed: int):
        self.blocks, self.B = blocks, min(batch_size, int(blocks.shape[0]))
        self.gen = torch.Generator().manual_seed(seed)
        self.perm, self.pos = torch.randperm(blocks.shape[0], generator=self.gen), 0

    def next(self) -> torch.Tensor:
        if self.pos + self.B > self.blocks.shape[0]:
            self.perm, self.pos = torch.randperm(self.blocks.shape[0], generator=self.gen), 0
        idx = self.perm[self.pos : self.pos + self.B]
        self.pos += self.B
        return self.blocks[idx]


class GradDiff:
    """L = -NLL(forget) + lambda NLL(retain) (gradient ascent on the forget set with a retain
    regularizer, [MX] App. F.2)."""

    name = "graddiff"

    def __init__(
        self,
        retain_blocks: torch.Tensor | None,
        *,
        retain_weight: float = 1.0,
        retain_batch_size: int = 8,
        pad_id: int | None = None,
        seed: int = 0,
    ):
        self.pad_id = pad_id
        self.w = float(retain_weight)
        self.retain = (
            _Retain(retain_blocks, retain_batch_size, seed)
            if (retain_blocks is not None and self.w)
            else None
        )

    def forget_loss(self, model, batch):
        return -per_example_nll(model, batch, pad_id=self.pad_id).mean()

    def __call__(self, model, batch):
        loss = self.forget_loss(model, batch)
        if self.retain is not None:
            loss = (
                loss
                + self.w * per_example_nll(model, self.retain.next(), pad_id=self.pad_id).mean()
            )
        return loss


class NPO(GradDiff):
    """L = (2/beta) mean softplus(beta (log pi_theta(y) - log pi_ref(y))) + lambda NLL(retain)
    (Zhang et al. 2024, Eq. 3; softplus(u) = log(1 + e^u) computed stably)."""

    name = "npo"

    def __init__(self, retain_blocks, *, reference, beta: float = 0.1, **kw):
        super().__init__(retain_blocks, **kw)
        self.beta = positive("beta", beta)
        self.ref = reference.eval()
        for p in self.ref.parameters():
            p.requires_grad_(False)

    def forget_loss(self, model, batch):
        logp = -per_example_nll(
            model, batch, pad_id=self.pad_id, reduce="sum"
        )  # [B] log pi_theta(y | x)
        with torch.no_grad():
            ref = -per_example_nll(self.ref, batch, pad_id=self.pad_id, reduce="sum")  # [B]
        return (2.0 / self.beta) * torch.nn.functional.softplus(self.beta * (logp - ref)).mean()


@dataclass(frozen=True)
class RoundReport(ResultMixin):
    round: int
    steps: int
    forgotten: bool
    rate: float
    loss: float


@dataclass(frozen=True)
class UnlearnResult(ResultMixin):
    method: str
    config: UnlearnConfig
    rounds: int
    steps: int
    forgotten: bool
    stopped: str  # "verifier" (reported forgotten after a round) | "max_rounds"
    before: dict  # verifier summary before unlearning
    after: dict
    history: tuple[RoundReport, ...]
    retain_nll_before: float
    retain_nll_after: float
    forgotten_before: bool = (
        False  # the verifier's verdict before any step (it still runs >= 1 round)
    )

    @property
    def retain_ppl_before(self) -> float:
        return math.exp(self.retain_nll_before)

    @property
    def retain_ppl_after(self) -> float:
        return math.exp(self.retain_nll_after)

    def to_dict(self) -> dict:
        d = super().to_dict()
        d["retain_ppl_before"] = self.retain_ppl_before
        d["retain_ppl_after"] = self.retain_ppl_after
        return d


def _summary(v) -> dict:
    return {
        "forgotten": bool(v.forgotten),
        "rate": float(v.rate),
        "n": int(getattr(v, "n", 0)),
        "threshold": float(getattr(v, "threshold", math.nan)),
    }


def unlearn(
    model: torch.nn.Module,
    forget_blocks: torch.Tensor,
    retain_blocks: torch.Tensor,
    config: UnlearnConfig,
    *,
    verifier: Callable[[object], object],
    pad_id: int | None = None,
    on_round: Callable[[RoundReport], None] | None = None,
) -> UnlearnResult:
    """Unlearn ``forget_blocks`` (one padded block per forget document) from ``model`` in place,
    keeping ``retain_blocks``, until ``verifier(model)`` reports forgotten.

    ``verifier(model)`` returns an object with ``.forgotten`` and ``.rate`` (e.g.
    :func:`memclaim.audits.verifier.verify` bound to the forget records; the model is in eval
    mode during the call). Retain perplexity is exp of the token-weighted mean NLL on
    ``retain_blocks``.

    >>> from memclaim.audits.verifier import verify_arrays
    >>> from memclaim.train.unlearn import UnlearnConfig, unlearn
    >>> # extracted(m): per forget record, does greedy decoding from its prefix give its secret?
    >>> verifier = lambda m: verify_arrays(greedy_match=extracted(m))  # doctest: +SKIP
    >>> config = UnlearnConfig(method="npo", lr=5e-3, batch_size=3, threads=1)
    >>> res = unlearn(model, forget, retain, config, verifier=verifier, pad_id=PAD)  # doctest: +SKIP
    >>> res.forgotten, res.stopped, res.rounds, res.before["rate"], res.after["rate"]  # doctest: +SKIP
    (True, 'verifier', 7, 1.0, 0.0)
    """
    if not isinstance(config, UnlearnConfig):
        raise InputError(f"config must be an UnlearnConfig, got {type(config).__name__}")
    for name, b in (("forget_blocks", forget_blocks), ("retain_blocks", retain_blocks)):
        if not isinstance(b, torch.Tensor) or b.dim() != 2 or b.shape[0] == 0:
            raise InputError(f"{name} must be a non-empty LongTensor [n, T]")
    dev = model_device(model)  # the model is unlearned where it lies; its blocks go there
    forget_blocks, retain_blocks = forget_blocks.to(dev), retain_blocks.to(dev)
    n_forget = int(forget_blocks.shape[0])
    B = min(config.batch_size, n_forget)
    spr = config.steps_per_round or math.ceil(n_forget / B)
    retain_before = evaluate_nll(model, retain_blocks, pad_id=pad_id)
    model.eval()
    with torch.no_grad():
        before = verifier(model)
    history: list[RoundReport] = []
    kw = dict(
        retain_weight=config.retain_weight,
        retain_batch_size=config.retain_batch_size,
        pad_id=pad_id,
        seed=config.seed + 1,
    )
    if config.method == "graddiff":
        objective = GradDiff(retain_blocks, **kw)
    else:
        objective = NPO(retain_blocks, reference=copy.deepcopy(model), beta=config.beta, **kw)
    tc = TrainConfig(
        steps=spr * config.max_rounds,
        batch_size=B,
        seq_len=int(forget_blocks.shape[1]),
        lr=config.lr,
        warmup_steps=0,
        schedule="constant",
        weight_decay=0.0,
        grad_clip=config.grad_clip,
        seed=config.seed,
        pad_id=pad_id,
        threads=config.threads,
    )
    state = {"last": before, "losses": []}

    def on_step(step: int, loss: float):
        state["losses"].append(loss)
        if (step + 1) % spr:
            return
        model.eval()
        with torch.no_grad():
            v = verifier(model)
        model.train()
        state["last"] = v
        rep = RoundReport(
            (step + 1) // spr,
            step + 1,
            bool(v.forgotten),
            float(v.rate),
            float(sum(state["losses"][-spr:]) / spr),
        )
        history.append(rep)
        if on_round is not None:
            on_round(rep)
        if v.forgotten:
            raise StopIteration  # "stopping the round after the verifier first reports the content forgotten"

    flags = [p.requires_grad for p in model.parameters()]
    model.requires_grad_(True)
    try:
        res = train_causal_lm(
            model,
            forget_blocks,
            tc,
            objective=objective,
            on_step=on_step,
            label="unlearning (stops when the verifier reports forgotten)",
        )
    finally:
        for p, f in zip(model.parameters(), flags):
            p.requires_grad_(f)
    after = state["last"]
    retain_after = evaluate_nll(model, retain_blocks, pad_id=pad_id)
    return UnlearnResult(
        config.method,
        config,
        len(history),
        res.steps,
        bool(after.forgotten),
        "verifier" if after.forgotten else "max_rounds",
        _summary(before),
        _summary(after),
        tuple(history),
        retain_before,
        retain_after,
        bool(before.forgotten),
    )
