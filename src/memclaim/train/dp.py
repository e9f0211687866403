"""DP-SGD for the one trainer, through Opacus ([MX] §8.2 "Calibration under real DP-SGD",
App. F.2 "DP-SGD calibration": DP-Adam through Opacus, per-sample clipping at ||g||_2 <= 1.0,
delta = 1/(10 N) for N training blocks, noise multiplier calibrated by the Opacus accountant to
the target epsilon).

What the guarantee is about (say which quantity):

- **neighbouring relation: add/remove one example**, where an example is one training block
  (a row of the ``blocks`` tensor). Opacus's accountants analyse the Poisson-subsampled Gaussian
  mechanism under add/remove; with Poisson sampling every block enters each step independently
  with probability q, which is what the analysis assumes.
- the counterfactual functional that add/remove f-DP caps directly is **LOO** (leave-one-out,
  [MX] Prop. A.1); RO is capped only through the two-step group curve f^(2). A record planted k
  times as k separate blocks is a group of k additions ([MX] Cor. 4.3, §8.2's (k eps, delta_k)
  conversion). :class:`DPReport` records all of this.
- the caps themselves come from the run's **trade-off curve** (the composed subsampled
  Gaussian's privacy-loss distribution, :func:`memclaim.privacy.pld.dpsgd_curve`), not from
  (eps, delta): ``DPReport.caps_from_curve`` holds eta(f) and the LOO / RO caps for 1, 2, 4, 8
  copies, with the (eps, delta) route's eta beside them; ``DPReport.cap(functional, copies)``
  computes any other.

Opacus provides the per-sample gradients (``GradSampleModule``; HF GPT-2's ``Conv1D`` has no
dedicated Opacus sampler, so Opacus falls back to its functorch sampler for it, which
``tests/train/test_train_dp.py`` checks against a slow per-example loop), the clipping and noise
(``DPOptimizer``), the Poisson data loader (``DPDataLoader``) and the accountant. Learned position
embeddings are the one trap: HF models broadcast ``position_ids`` of shape [1, T] over the batch,
so the embedding's per-sample gradient would be summed over the batch; :class:`ExplicitPositions`
passes [B, T] positions so each example gets its own.

The noise generator is seeded (reproducible runs); Opacus's ``secure_mode`` (a CSPRNG, needed
for a deployed guarantee against floating-point attacks) refuses seeds and is available through
``DPConfig(secure_mode=True)``.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..errors import DomainError, InputError, require
from ..jsonutil import ResultMixin
from ..validate import in_open_unit, integer, positive
from ..validate import seed as check_seed
from .losses import objective_for, poisson_rate

__all__ = [
    "ACCOUNTANTS",
    "DPConfig",
    "DPReport",
    "default_delta",
    "calibrate_noise_multiplier",
    "ExplicitPositions",
    "per_sample_gradients",
    "PrivateRun",
]

ACCOUNTANTS = ("rdp", "prv", "gdp")
NEIGHBORS = "add/remove"
FUNCTIONAL = "LOO"


@dataclass(frozen=True)
class DPConfig(ResultMixin):
    """DP-SGD settings. Give ``target_epsilon`` (the noise multiplier is then calibrated by the
    accountant for the run's sampling rate and step count) or ``noise_multiplier`` (and the
    epsilon is only reported). ``delta`` defaults to 1/(10 N) ([MX] App. F.2)."""

    target_epsilon: float | None = None
    noise_multiplier: float | None = None
    delta: float | None = None
    max_grad_norm: float = 1.0  # [MX] App. F.2: per-sample clipping at ||g||_2 <= 1.0
    accountant: str = "rdp"
    epsilon_tolerance: float = 0.01
    noise_seed: int | None = None  # default: TrainConfig.seed + 1
    grad_sample_mode: str = "hooks"
    secure_mode: bool = False
    cross_check: bool = True  # recompute epsilon with dp_accounting (RDP and PLD)
    curve_caps: bool = True  # report the memorization caps from the run's trade-off curve (PLD)

    def __post_init__(self):
        if (self.target_epsilon is None) == (self.noise_multiplier is None):
            raise DomainError(
                "give exactly one of target_epsilon and noise_multiplier",
                hint=f"got target_epsilon={self.target_epsilon!r}, noise_multiplier={self.noise_multiplier!r}",
            )
        if self.target_epsilon is not None:
            e = self.target_epsilon
            if isinstance(e, (int, float)) and not isinstance(e, bool) and math.isinf(e) and e > 0:
                raise DomainError(
                    "target_epsilon = inf is no privacy guarantee: there is nothing to calibrate",
                    hint="for the eps = inf configuration train without dp (TrainConfig(dp=None, "
                    "sampling='poisson', grad_clip=None)): the same optimizer without clipping or noise",
                )
            positive("target_epsilon", e)
        if self.noise_multiplier is not None:
            positive("noise_multiplier", self.noise_multiplier)
        if self.delta is not None:
            in_open_unit("delta", self.delta)
        positive("max_grad_norm", self.max_grad_norm)
        positive("epsilon_tolerance", self.epsilon_tolerance)
        if self.accountant not in ACCOUNTANTS:
            raise DomainError(
                f"unknown Opacus accountant {self.accountant!r}", hint=f"one of {ACCOUNTANTS}"
            )
        if self.noise_seed is not None:
            check_seed("noise_seed", self.noise_seed)
        if self.grad_sample_mode not in ("hooks", "functorch"):
            raise DomainError(
                f"grad_sample_mode must be 'hooks' or 'functorch', got {self.grad_sample_mode!r}",
                hint="'hooks' uses Opacus's per-layer samplers and falls back to functorch per layer",
            )
        if self.secure_mode and self.noise_seed is not None:
            raise DomainError(
                "secure_mode draws noise from a CSPRNG and refuses a noise seed",
                hint="drop noise_seed, or use secure_mode=False for a reproducible (seeded) run",
            )


@dataclass(frozen=True)
class DPReport(ResultMixin):
    """What a DP-SGD run certifies, with the epsilon actually spent.

    ``epsilon`` is Opacus's accountant over the steps actually taken (fewer than planned if the
    run stopped early); ``epsilon_rdp_dp_accounting`` and ``epsilon_pld_dp_accounting`` recompute
    it with Google's dp_accounting (RDP and privacy-loss distributions,
    :func:`memclaim.privacy.tradeoff.dpsgd_epsilon`) as an independent cross-check: its RDP value
    agrees to within 1% (at noise multipliers below 1 it drops fractional orders whose series does
    not converge in 1000 terms), and its PLD value, the tight one, is at most ``epsilon``."""

    neighbors: str
    functional: str
    sampling: str
    unit: str
    n_examples: int
    sampling_rate: float
    expected_batch_size: float
    planned_steps: int
    steps: int
    empty_batches: int
    noise_multiplier: float
    max_grad_norm: float
    delta: float
    target_epsilon: float | None
    epsilon: float
    accountant: str
    epsilon_rdp_dp_accounting: float | None
    epsilon_pld_dp_accounting: float | None
    secure_mode: bool
    statement: str
    caps_from_curve: dict | None = None

    def curve(self):
        """The run's certified trade-off curve (:class:`memclaim.privacy.pld.DpSgdCurve`, memoized)."""
        return _run_curve(self.noise_multiplier, self.sampling_rate, self.steps, self.delta)

    def cap(self, functional: str = "LOO", *, copies: int = 1):
        """The cap on |mem| of ``functional`` for a record planted ``copies`` times, from the curve
        ([MX] Thm. 4.1, Prop. A.1, Cor. 4.3; relation add/remove of one training block)."""
        from ..privacy.caps import memorization_cap

        if self.steps < 1:
            raise DomainError("a run that took no step has no curve (and releases nothing trained)")
        return memorization_cap(self.curve().curve, functional=functional, copies=copies)


def default_delta(n_examples: int) -> float:
    """delta = 1/(10 N) for N training examples ([MX] App. F.2).

    >>> default_delta(1000)
    0.0001
    """
    return 1.0 / (10.0 * integer("number of training examples", n_examples, minimum=1))


def calibrate_noise_multiplier(
    *,
    target_epsilon: float,
    delta: float,
    sampling_rate: float,
    steps: int,
    accountant: str = "rdp",
    epsilon_tolerance: float = 0.01,
) -> float:
    """The smallest noise multiplier (to ``epsilon_tolerance``) whose epsilon after ``steps``
    Poisson-sampled steps at rate ``sampling_rate`` is at most ``target_epsilon`` at ``delta``.

    Opacus's own search (``opacus.accountants.utils.get_noise_multiplier``) runs first on the
    integer Renyi orders (fast, conservative); for the RDP accountant a bisection on the full
    reported order grid (:data:`REPORT_ORDERS`) then tightens it until the reported epsilon is within
    the tolerance below the target. The result's epsilon never exceeds the target. Memoized.

    >>> from memclaim.train.dp import calibrate_noise_multiplier
    >>> calibrate_noise_multiplier(target_epsilon=1.0, delta=1e-5, sampling_rate=0.01, steps=1000)  # doctest: +SKIP
    1.5234375
    """
    e = positive("target_epsilon", target_epsilon)
    d = in_open_unit("delta", delta)
    q = positive("sampling_rate", sampling_rate)
    if q > 1:
        raise DomainError(f"sampling_rate must be <= 1, got {sampling_rate!r}")
    s = integer("steps", steps, minimum=1)
    if accountant not in ACCOUNTANTS:
        raise DomainError(f"unknown Opacus accountant {accountant!r}", hint=f"one of {ACCOUNTANTS}")
    tol = positive("epsilon_tolerance", epsilon_tolerance)
    return _calibrate(e, d, q, s, accountant, tol)


# Renyi orders. Any set of orders gives a valid RDP -> (eps, delta) conversion, and more orders can
# only lower epsilon. Reported epsilons use REPORT_ORDERS = dp_accounting's default grid (a superset of
# Opacus's default grid: it adds order 11 and 128..1024, which matter at small epsilon), so that
# the independent dp_accounting cross-check reads the same orders. The calibration search uses the
# integer orders of that grid (a closed form in Opacus's analysis, about 7x faster here than the
# fractional orders 1.1..10.9): the calibrated noise is then conservative, and the reported epsilon,
# over a superset of the orders, is at most the calibration's, hence at most the target.
REPORT_ORDERS = tuple(
    [1 + x / 10.0 for x in range(1, 100)] + list(range(11, 64)) + [128, 256, 512, 1024]
)
CALIBRATION_ORDERS = tuple(o for o in REPORT_ORDERS if float(o).is_integer() and o >= 2)


@functools.lru_cache(maxsize=256)
def _calibrate(e: float, d: float, q: float, s: int, accountant: str, tol: float) -> float:
    require("opacus", "dp")
    from opacus.accountants.utils import get_noise_multiplier

    kw = {"alphas": list(CALIBRATION_ORDERS)} if accountant == "rdp" else {}
    try:
        sigma = float(
            get_noise_multiplier(
                target_epsilon=e,
                target_delta=d,
                sample_rate=q,
                steps=s,
                accountant=accountant,
                epsilon_tolerance=tol,
                **kw,
            )
        )
    except ValueError as exc:  # "The privacy budget is too low."
        raise DomainError(
            f"no noise multiplier reaches epsilon = {e:g} at delta = {d:g} with {s} steps at "
            f"sampling rate {q:g} ({exc})",
            hint="raise epsilon, lower the number of steps or the sampling rate",
        ) from None
    if accountant != "rdp":
        return sigma

    # Refine on the full reported grid (the fractional orders matter at large epsilon): bisection
    # between a noise level that overshoots and the integer-order one, which never does, until the
    # reported epsilon is within the tolerance below the target (Opacus's own stopping rule).
    def eps(sg: float) -> float:
        return opacus_epsilon("rdp", ((sg, q, s),), d)

    hi = sigma
    if e - eps(hi) <= tol:
        return hi
    lo = hi
    for _ in range(60):
        lo /= 1.25
        if eps(lo) > e:
            break
    else:
        return hi
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if eps(mid) <= e:
            hi = mid
            if e - eps(hi) <= tol:
                break
        else:
            lo = mid
    return hi


@functools.lru_cache(maxsize=1024)
def opacus_epsilon(accountant: str, history: tuple, delta: float) -> float:
    """Opacus's epsilon at ``delta`` for an accountant history ((sigma, q, steps), ...) (memoized:
    a grid of runs with equal settings asks for the same number many times)."""
    require("opacus", "dp")
    from opacus.accountants import create_accountant

    acc = create_accountant(mechanism=accountant)
    acc.history = [tuple(h) for h in history]
    if accountant == "rdp":
        return float(acc.get_epsilon(delta=delta, alphas=list(REPORT_ORDERS)))
    return float(acc.get_epsilon(delta=delta))


CURVE_COPIES = (1, 2, 4, 8)


@functools.lru_cache(maxsize=256)
def _run_curve(sigma: float, q: float, steps: int, delta: float):
    from ..privacy.pld import dpsgd_curve

    return dpsgd_curve(
        noise_multiplier=sigma,
        sampling_rate=q,
        steps=steps,
        neighbors="add-remove",
        route_delta=delta,
    )


def _caps_from_curve(sigma: float, q: float, steps: int, delta: float, epsilon: float) -> dict:
    """eta(f) and the LOO / RO caps of the run from its trade-off curve, for 1, 2, 4, 8 copies, with
    the (eps, delta) route at the accountant's epsilon beside them (no timings: the report is
    part of reproducible JSON)."""
    from ..privacy.pld import curve_caps

    cur = _run_curve(sigma, q, steps, delta)
    out = curve_caps(cur, copies=CURVE_COPIES, epsilon=epsilon, delta=delta)
    if out["epsilon_delta_route"] is not None:
        out["epsilon_delta_route"]["note"] = (
            "(eps, delta) route with the Opacus accountant's epsilon "
            "([MX] Lemma B.2): valid, looser than the curve"
        )
    return out


@functools.lru_cache(maxsize=1024)
def _cross_check(sigma: float, q: float, steps: int, delta: float) -> tuple[float, float]:
    import logging

    # dp_accounting logs (via absl) each fractional Renyi order whose series does not converge at
    # large sampling rates and drops that order: the bound stays valid, the log is noise here
    absl = logging.getLogger("absl")
    level = absl.level
    absl.setLevel(logging.ERROR)
    try:
        return _cross_check_quiet(sigma, q, steps, delta)
    finally:
        absl.setLevel(level)


def _cross_check_quiet(sigma: float, q: float, steps: int, delta: float) -> tuple[float, float]:
    from ..privacy.tradeoff import dpsgd_epsilon

    rdp = dpsgd_epsilon(
        noise_multiplier=sigma, sampling_rate=q, steps=steps, delta=delta, accountant="rdp"
    ).epsilon
    # a coarser PLD grid is faster and still a valid (pessimistic) upper bound
    pld = dpsgd_epsilon(
        noise_multiplier=sigma,
        sampling_rate=q,
        steps=steps,
        delta=delta,
        accountant="pld",
        pld_discretization=1e-3,
    ).epsilon
    return float(rdp), float(pld)


class ExplicitPositions(torch.nn.Module):
    """Wraps a HF causal LM so every call passes position ids of shape [B, T] (0..T-1 per row).

    HF models broadcast [1, T] positions over the batch; a learned position embedding then sees
    a batch of one and Opacus would sum its per-sample gradients over the batch. Numerically the
    forward pass is unchanged."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    @property
    def config(self):
        return self.model.config

    def forward(self, input_ids=None, **kwargs):
        if "position_ids" not in kwargs or kwargs["position_ids"] is None:
            B, T = input_ids.shape
            kwargs["position_ids"] = (
                torch.arange(T, device=input_ids.device).unsqueeze(0).expand(B, T)
            )  # [B, T]
        return self.model(input_ids=input_ids, **kwargs)


def per_sample_gradients(
    model: torch.nn.Module,
    batch: torch.Tensor,
    *,
    objective: Callable[[torch.nn.Module, torch.Tensor], torch.Tensor] | None = None,
    pad_id: int | None = None,
    grad_sample_mode: str = "hooks",
) -> dict[str, torch.Tensor]:
    """Per-example gradients of the training loss by Opacus's ``GradSampleModule`` exactly as a
    DP-SGD run computes them (before clipping): {parameter name: tensor [B, *shape]}.

    ``objective(model, batch)`` is the batch-mean loss (default: next-token NLL, per-example mean
    with ``pad_id`` targets ignored). The model's parameters keep no gradient state afterwards.

    >>> import torch
    >>> from memclaim.train.dp import per_sample_gradients
    >>> from memclaim.train.finetune import new_gpt2
    >>> model = new_gpt2(vocab_size=16, n_positions=8, n_embd=8, n_head=2)  # doctest: +SKIP
    >>> g = per_sample_gradients(model, torch.tensor([[0, 1, 2, 3], [0, 4, 5, 6]]))  # doctest: +SKIP
    >>> len(g), tuple(g["transformer.wte.weight"].shape)  # doctest: +SKIP
    (28, (2, 16, 8))
    """
    require("opacus", "dp")
    from opacus import GradSampleModule

    if not any(p.requires_grad for p in model.parameters()):
        # a frozen model (as finetune and load_model leave it) has no gradient to sample
        raise InputError(
            "the model has no trainable parameters", hint="call model.requires_grad_(True) first"
        )
    obj = objective or objective_for(pad_id)
    was_training = model.training
    model.train()  # Opacus records activations only in training mode
    gsm = GradSampleModule(
        ExplicitPositions(model),
        batch_first=True,
        loss_reduction="mean",
        strict=False,
        force_functorch=(grad_sample_mode == "functorch"),
    )
    try:
        gsm.zero_grad(set_to_none=True)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Full backward hook is firing")
            obj(gsm, batch).backward()
        out = {}
        for name, p in model.named_parameters():
            if p.requires_grad:
                gs = getattr(p, "grad_sample", None)
                if gs is None:
                    raise InputError(f"Opacus computed no per-sample gradient for {name}")
                out[name] = gs.detach().clone()
        return out
    finally:
        gsm.cleanup()
        for p in model.parameters():
            p.grad = None
        model.train(was_training)


class PrivateRun:
    """The Opacus side of a DP-SGD run inside :func:`memclaim.train.trainer.train_causal_lm`:
    wraps model, optimizer and data; yields Poisson batches; closes with a :class:`DPReport`."""

    def __init__(self, model, blocks, config, optimizer, gen):
        require("opacus", "dp")
        from opacus import PrivacyEngine
        from torch.utils.data import DataLoader, TensorDataset

        dp: DPConfig = config.dp
        n = int(blocks.shape[0])
        self.dp, self.n, self.config = dp, n, config
        self.q = poisson_rate(n, config.batch_size)
        self.delta = dp.delta if dp.delta is not None else default_delta(n)
        if self.delta >= 1.0 / n:
            raise DomainError(
                f"delta = {self.delta:g} is not below 1/N = {1.0 / n:g} for N = {n} training examples: a guarantee "
                "with delta >= 1/N permits publishing a random example verbatim",
                hint="use delta << 1/N; the default is 1/(10 N) ([MX] App. F.2)",
            )
        if config.steps < 1:
            raise DomainError("a DP-SGD run needs at least one step")
        if dp.noise_multiplier is not None:
            self.sigma = float(dp.noise_multiplier)
        else:
            self.sigma = calibrate_noise_multiplier(
                target_epsilon=dp.target_epsilon,
                delta=self.delta,
                sampling_rate=self.q,
                steps=config.steps,
                accountant=dp.accountant,
                epsilon_tolerance=dp.epsilon_tolerance,
            )
        loader = DataLoader(
            TensorDataset(blocks),
            batch_size=config.batch_size,
            generator=None if dp.secure_mode else gen,
        )
        noise_gen = None
        if not dp.secure_mode:
            noise_gen = torch.Generator().manual_seed(
                dp.noise_seed if dp.noise_seed is not None else config.seed + 1
            )
        with warnings.catch_warnings():
            # the seeded PRNG is deliberate (reproducible runs); secure_mode=True is the CSPRNG path
            warnings.filterwarnings("ignore", message="Secure RNG turned off")
            self.engine = PrivacyEngine(accountant=dp.accountant, secure_mode=dp.secure_mode)
            made = self.engine.make_private(
                module=ExplicitPositions(model),
                optimizer=optimizer,
                data_loader=loader,
                noise_multiplier=self.sigma,
                max_grad_norm=dp.max_grad_norm,
                poisson_sampling=True,
                noise_generator=noise_gen,
                grad_sample_mode=dp.grad_sample_mode,
                loss_reduction="mean",
            )
        self.module, self.optimizer, self.loader = made
        self.opacus_rate = float(self.loader.sample_rate)
        if abs(self.opacus_rate - self.q) > 1e-15:  # both are 1 / ceil(n / B)
            raise InputError(
                f"Opacus samples at rate {self.opacus_rate}, memclaim planned {self.q}"
            )
        self._model = model

    def batches(self):
        while True:
            for (b,) in self.loader:
                yield b

    def empty_step(self):
        """A Poisson step that drew no example: zero per-sample gradients, so the optimizer still
        adds the noise and the accountant counts the step (the model cannot run on zero rows)."""
        self.optimizer.zero_grad(set_to_none=True)  # clears the previous step's summed gradient
        for p in self.optimizer.params:
            p.grad_sample = torch.zeros((0,) + tuple(p.shape), dtype=p.dtype, device=p.device)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    def close(self, *, steps: int, empty: int) -> DPReport:
        self.module.cleanup()  # remove Opacus hooks and per-sample attributes from the model
        for p in self._model.parameters():
            p.grad = None
            for attr in ("summed_grad", "grad_sample"):
                if hasattr(p, attr):
                    try:
                        delattr(p, attr)
                    except AttributeError:
                        pass
        # accountant history: [(noise multiplier, sample rate, number of steps), ...]
        history = tuple(
            (float(h[0]), float(h[1]), int(h[2])) for h in self.engine.accountant.history
        )
        taken = sum(h[2] for h in history)
        eps = opacus_epsilon(self.dp.accountant, history, self.delta) if taken else 0.0
        e_rdp = e_pld = None
        if taken and self.dp.cross_check:
            e_rdp, e_pld = _cross_check(self.sigma, self.q, taken, self.delta)
        dp = self.dp
        caps = None
        if taken and dp.curve_caps:
            if len({(h[0], h[1]) for h in history}) != 1:
                raise InputError(
                    f"the accountant history mixes noise levels or sampling rates: {history}"
                )
            caps = _caps_from_curve(self.sigma, self.q, taken, self.delta, eps)
        stmt = (
            f"({eps:.4g}, {self.delta:.3g})-DP under add/remove of one training block (Poisson sampling at "
            f"q = {self.q:.4g}, {taken} steps, noise multiplier {self.sigma:.4g}, per-sample clipping at "
            f"{dp.max_grad_norm:g}; Opacus {dp.accountant.upper()} accountant). Capped directly: the LOO "
            f"functional ([MX] Prop. A.1); a record planted as k blocks is a group of k."
        )
        if caps is not None:
            c1 = caps["caps"][0]
            route = caps["epsilon_delta_route"]
            stmt += (
                f" From the run's trade-off curve (PLD): |mem_LOO| <= {c1['LOO']:.4g}, |mem_RO| <= {c1['RO']:.4g}"
                + (f" (the (eps, delta) route gives {route['eta']:.4g})." if route else ".")
            )
        return DPReport(
            neighbors=NEIGHBORS,
            functional=FUNCTIONAL,
            sampling="Poisson (Opacus DPDataLoader)",
            unit="one training block (a row of the blocks tensor)",
            n_examples=self.n,
            sampling_rate=self.q,
            expected_batch_size=self.q * self.n,
            planned_steps=self.config.steps,
            steps=taken,
            empty_batches=empty,
            noise_multiplier=self.sigma,
            max_grad_norm=dp.max_grad_norm,
            delta=self.delta,
            target_epsilon=dp.target_epsilon,
            epsilon=eps,
            accountant=dp.accountant,
            epsilon_rdp_dp_accounting=e_rdp,
            epsilon_pld_dp_accounting=e_pld,
            secure_mode=dp.secure_mode,
            statement=stmt,
            caps_from_curve=caps,
        )
