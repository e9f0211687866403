"""The trade-off curve of DP-SGD from its privacy-loss distribution (issues 18, 24; [MX] §3.1, §8.2).

DP-SGD is T Poisson-subsampled Gaussian releases (noise multiplier sigma, sampling rate q).
Turning it into (eps, delta) and then into eta = delta + (1 - delta) tanh(eps/2) ([MX] Lemma B.2)
is valid but loose (0.871 against a true advantage of about 0.241 at sigma = 1.1, q = 0.01,
T = 3000). [MX]'s caps and boundary are functionals of the trade-off curve f itself, so this
module computes f of the composed mechanism, twice:

1. One step's dominating pairs (dp_accounting's: add/remove has two directions, remove and add;
   replace-one one) are cut at the x where the privacy loss crosses each grid value k d, and
   each bin's mass under both laws is computed from the Gaussian CDFs. The *pessimistic* PLD
   splits each bin between the ends of its loss cell keeping both masses (connect-the-dots:
   delta(eps) exact at the grid values, above the truth between them; a pair that dominates the
   true one); the *optimistic* PLD merges adjacent bins so that each merged atom's loss is a grid
   value (a post-processing: a pair the true one dominates). dp_accounting composes both (FFT,
   T-fold, then block after block). Hand-written because dp_accounting's connect-the-dots forms
   the masses from second differences of delta(eps), whose float cancellation added about
   1.2e-16 / d^2 of spurious mass per step (1.0012 in all at sigma = 1, q = 0.001, T = 1e5,
   d = 1e-4, so that grid was refused and the next one, 1e-3, was 5% loose), and it has no
   optimistic connect-the-dots (its optimistic PLD rounds losses down: a bias growing with T).
2. For each PLD, delta(eps) = the max over its directions bounds both orders of every
   neighbouring pair. A mechanism that is (eps, delta(eps))-DP for every eps >= 0 is f-DP with
   f(alpha) = sup_eps max{0, 1 - delta(eps) - e^eps alpha, e^-eps (1 - delta(eps) - alpha)}
   (Dong, Roth & Su [6], Prop. 2.12). From the pessimistic deltas on a finite eps grid, each
   raised by a float slack (1e-12 max(1, T / 100), above 4 times the composed PLD's total-mass
   error at every setting tried), the curve is never above the true trade-off curve: a certified
   lower bound. eta(f) = delta(0) + slack exactly: the total variation between the two composed
   output laws. From the optimistic PLD, the lower convex hull of points on its trade-off
   curves is never below the true curve; its eta and every quantity computed from it are the
   other end of a certified bracket (the exact advantage is in [eta_optimistic, eta]: 2e-5
   relative at sigma = 1.1, q = 0.01, T = 3000; 0.15% at sigma = 1, q = 0.001, T = 1e5).
3. Checks on every curve: the profile (delta in [0, 1], nonincreasing in eps, total mass of each
   PLD direction <= 1) and the curve (convex, nonincreasing, f(alpha) <= 1 - alpha, f(1) = 0).
   A curve that fails them is refused, never repaired; the default grid (1e-4) doubles while its
   curve is refused, then halves (at most twice) while the certified gap of eta exceeds 0.5%.
4. The eps at which the (eps, delta) route is read is on the grid, so the curve is never below
   that route's f_{eps, delta} (up to the slack). The grid ends where delta falls to 1e-12,
   rounded up to a multiple of 0.25 (float noise in delta's far tail cannot move it).

The curve is a :class:`~memclaim.privacy.tradeoff.TradeOff` of kind 'points' carrying 1 - f at
its vertices (computed as delta + e^eps alpha, without cancellation), so everything downstream
(eta, caps per functional, the k-copy group curve, 1 - f(kappa), alpha*(tau), entropy
thresholds) is computed from it by the ordinary code paths. It is marked ``no_floor``: the
Gaussian mechanism has no infinite privacy loss, so its true 1 - f(0) is 0 and the curve's own
(<= 2 slack) is numerical, not a floor of the k-copy group curves.

Pure math: numpy, scipy and dp_accounting (imported lazily), no torch, no I/O.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import validate
from ..errors import DomainError, require
from ..jsonutil import ResultMixin
from .caps import eta_approx, memorization_cap
from .tradeoff import TradeOff, approx, check_group_cost, neighbors_label, normalize_neighbors

__all__ = [
    "CurveCheck",
    "check_curve",
    "curve_from_profile",
    "DpSgdCurve",
    "dpsgd_curve",
    "curve_caps",
    "DEFAULT_PLD_GRID",
    "DEFAULT_EPSILON_STEP",
    "MAX_PLD_POINTS",
    "PLD_BYTES_PER_POINT",
    "PldTooLarge",
    "pld_points",
    "check_pld_size",
    "check_dpsgd_size",
]

#: dp_accounting's default value_discretization_interval; coarser is faster and still pessimistic.
DEFAULT_PLD_GRID = 1e-4
#: spacing of the eps grid of the envelope; the envelope's relative gap to the true curve is
#: about step^2 / 8 between grid points (3e-6 at 0.005) and zero at the grid points themselves.
DEFAULT_EPSILON_STEP = 0.005
#: absolute float slack added to every delta (FFT round-off of the PLD convolutions is ~1e-14 here)
FLOAT_SLACK = 1e-12
#: a PLD direction whose probabilities sum above 1 + this is refused as numerically invalid
MAX_MASS_ERROR = 1e-3
#: tolerance of the profile and curve checks (round-off, not modelling error)
CHECK_TOL = 1e-9
#: the most points one direction of a PLD may hold, single or composed (issue 25: --steps 1e9 was
#: killed at 19 GB, --noise-multiplier 1e-6 asked for 35 PiB). dp_accounting composes T steps by
#: one FFT of the composed length: measured 34 s and 2.4 GB RSS for 3.1e7 points on one core of
#: the development machine (AMD EPYC), so 2^25 points is about a minute and 2.7 GB per direction.
MAX_PLD_POINTS = 2**25
#: bytes per point of that FFT (complex128 transform, its power and inverse; measured ~79)
PLD_BYTES_PER_POINT = 80
#: dp_accounting's defaults that decide the PLD's size: the Gaussian's truncated tail (log mass)
#: and the tail mass self_compose may drop
_LOG_MASS_TRUNCATION = -50.0
_TAIL_MASS_TRUNCATION = 1e-15


class PldTooLarge(DomainError):
    """A PLD that would not fit the point budget: ``points`` it would hold at ``grid``, the
    ``limit`` it had to fit, and ``grid_needed``, the coarsest power-of-ten grid that would (None
    when no sensible grid would: the noise is too small for any accounting to mean anything)."""

    def __init__(
        self,
        message: str,
        *,
        hint: str,
        points: int,
        grid: float,
        limit: int,
        grid_needed: float | None,
    ):
        super().__init__(message, hint=hint)
        self.points, self.grid, self.limit, self.grid_needed = points, grid, limit, grid_needed


def _adjacencies(dpa, rel: str):
    plm = dpa.pld.privacy_loss_mechanism
    if rel == "add-remove":
        return (plm.AdjacencyType.REMOVE, plm.AdjacencyType.ADD)
    return (plm.AdjacencyType.REPLACE,)


def _single_points(dpa, sigma: float, q: float, rel: str, d: float) -> int:
    """Points of one step's PLD (the larger direction), from the mechanism's connect-the-dots
    bounds alone (nothing is discretized): what from_gaussian_mechanism would allocate."""
    plm = dpa.pld.privacy_loss_mechanism
    n = 0
    for adj in _adjacencies(dpa, rel):
        pl = plm.GaussianPrivacyLoss(
            sigma,
            sensitivity=1.0,
            pessimistic_estimate=True,
            log_mass_truncation_bound=_LOG_MASS_TRUNCATION,
            sampling_prob=q,
            adjacency_type=adj,
        )
        b = pl.connect_dots_bounds()
        n = max(n, math.ceil(b.epsilon_upper / d) - math.floor(b.epsilon_lower / d) + 1)
    return n


def _composed_points(pld, steps: int) -> int:
    """Points of ``pld`` composed ``steps`` times (the larger direction): dp_accounting's own
    Chernoff bounds of the self-convolution (``common.compute_self_convolve_bounds``), which
    decide the length of its FFT."""
    from dp_accounting.pld import common

    n = 0
    for pmf in (pld._pmf_remove, pld._pmf_add):  # private, but the only way to the probabilities
        if pmf is None:
            continue
        probs = np.asarray(pmf.to_dense_pmf()._probs)
        lo, hi = common.compute_self_convolve_bounds(probs, steps, _TAIL_MASS_TRUNCATION)
        n = max(n, hi - lo + 1, probs.size)
    return n


def _too_large(
    points: int, *, d: float, limit: int, what: str, single: bool = False
) -> PldTooLarge:
    # the PLD's length scales as 1/grid: the coarsest power of ten that fits; beyond a grid of 1
    # (a loss resolution of one nat) no accounting is worth having
    need = d * points / limit
    grid_needed = 10.0 ** math.ceil(math.log10(need)) if need > 0 else d
    gib = points * PLD_BYTES_PER_POINT / 2**30
    why = (
        "memclaim composes in one command (about a minute)"
        if limit >= MAX_PLD_POINTS
        else "this machine's available memory holds"
    )
    msg = (
        f"{what} would hold {points:.3g} points at the PLD grid {d:g} (about {gib:.3g} GiB), more than the "
        f"{limit:.3g} points ({limit * PLD_BYTES_PER_POINT / 2**30:.2g} GiB) {why}"
    )
    if grid_needed > 1.0:
        return PldTooLarge(
            msg,
            points=points,
            grid=d,
            limit=limit,
            grid_needed=None,
            hint="the noise is far too small for the run to be private at all: use a realistic noise "
            "multiplier (DP-SGD uses about 0.5 to 10)" + ("" if single else " or fewer steps"),
        )
    return PldTooLarge(
        msg,
        points=points,
        grid=d,
        limit=limit,
        grid_needed=grid_needed,
        hint=f"a coarser PLD grid, {grid_needed:g} (pessimistic: the bounds stay valid, only looser)"
        + ("" if single else ", or fewer steps"),
    )


def check_dpsgd_size(
    *,
    noise_multiplier: float,
    sampling_rate: float,
    steps: int,
    neighbors: str = "add-remove",
    grid: float | None = None,
    max_points: int | None = None,
) -> None:
    """:func:`check_pld_size` for one DP-SGD run given as its settings (checked first): what
    ``dp account`` asks dp_accounting's PLD accountant to compose (``grid`` None: 1e-4).

    >>> check_dpsgd_size(noise_multiplier=1e-6, sampling_rate=0.01, steps=10)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    memclaim.privacy.pld.PldTooLarge: one step of DP-SGD (sigma = 1e-06, q = 0.01): its privacy-loss distribution would hold 5e+15 points at the PLD grid 0.0001 (about 3.73e+08 GiB), more than ...
      fix: the noise is far too small for the run to be private at all: use a realistic noise multiplier (DP-SGD uses about 0.5 to 10)
    """
    hist = _history(noise_multiplier, sampling_rate, steps, None)
    d = (
        DEFAULT_PLD_GRID
        if grid is None
        else validate.positive("value_discretization_interval", grid)
    )
    check_pld_size(hist, normalize_neighbors(neighbors), float(d), max_points)


def pld_points(
    *,
    noise_multiplier: float,
    sampling_rate: float,
    steps: int,
    neighbors: str = "add-remove",
    grid: float = DEFAULT_PLD_GRID,
) -> int:
    """Points of the composed DP-SGD PLD's larger direction at ``grid`` (what the memory and the
    time of the accounting grow with), computed without composing it: the single step's size from
    its bounds, the composition's from dp_accounting's Chernoff bounds ([MX] §8.2; issue 25).

    >>> pld_points(noise_multiplier=1.1, sampling_rate=0.01, steps=3000) > 10 ** 5  # doctest: +SKIP
    True
    """
    dpa = require("dp_accounting", "dp")
    rel = normalize_neighbors(neighbors)
    single = _single_points(dpa, noise_multiplier, sampling_rate, rel, grid)
    if steps <= 1 or single > MAX_PLD_POINTS:
        return single
    return _composed_points(_single_pld(dpa, noise_multiplier, sampling_rate, rel, grid), steps)


def check_pld_size(
    hist: Sequence[tuple[float, float, int]], rel: str, d: float, max_points: int | None = None
) -> None:
    """Refuse, before any PLD is built or composed, DP-SGD settings ``hist`` ((sigma, q, steps)
    blocks, composed) whose PLD at grid ``d`` would hold more than ``max_points`` points
    (default and at most :data:`MAX_PLD_POINTS`; the API lowers it to what this machine's free
    memory holds): :class:`PldTooLarge`, naming the coarser grid that fits.

    >>> check_pld_size(((1.1, 0.01, 10 ** 9),), "add-remove", 1e-4)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    memclaim.privacy.pld.PldTooLarge: DP-SGD over 1,000,000,000 steps (sigma = 1.1, q = 0.01): the composed privacy-loss distribution would hold 2.77e+08 points at the PLD grid 0.0001 ...
      fix: a coarser PLD grid, 0.001 (pessimistic: the bounds stay valid, only looser), or fewer steps
    """
    limit = MAX_PLD_POINTS if max_points is None else max(1, min(int(max_points), MAX_PLD_POINTS))
    dpa = require("dp_accounting", "dp")
    total = 0
    for sigma, q, steps in hist:
        single = _single_points(dpa, sigma, q, rel, d)
        if single > limit:
            raise _too_large(
                single,
                d=d,
                limit=limit,
                single=True,
                what=f"one step of DP-SGD (sigma = {sigma:g}, q = {q:g}): its privacy-loss distribution",
            )
        n = _composed_points(_single_pld(dpa, sigma, q, rel, d), steps) if steps > 1 else single
        total += n
        if total > limit:
            raise _too_large(
                total,
                d=d,
                limit=limit,
                what=f"DP-SGD over {steps:,} steps (sigma = {sigma:g}, q = {q:g}): the composed "
                "privacy-loss distribution",
            )


@functools.lru_cache(maxsize=2)
def _single_pld(dpa, sigma: float, q: float, rel: str, d: float):
    """One step's PLD (cached: the size check and the composition build the same one)."""
    rel_enum = (
        dpa.NeighboringRelation.ADD_OR_REMOVE_ONE
        if rel == "add-remove"
        else dpa.NeighboringRelation.REPLACE_ONE
    )
    return dpa.pld.privacy_loss_distribution.from_gaussian_mechanism(
        standard_deviation=sigma,
        sensitivity=1.0,
        pessimistic_estimate=True,
        value_discretization_interval=d,
        sampling_prob=q,
        use_connect_dots=True,
        neighboring_relation=rel_enum,
    )


# --------------------------------------------------------------------------- checks
@dataclass(frozen=True)
class CurveCheck(ResultMixin):
    """The three properties every trade-off curve has ([MX] §3.1; [6] Prop. 2.2), checked on the
    vertices: convex, nonincreasing, f(alpha) <= 1 - alpha (with f(0) <= 1 and f(1) = 0).
    ``max_*`` are the largest violations found (0 when none); ``valid`` when all are <= tolerance."""

    valid: bool
    convex: bool
    nonincreasing: bool
    below_one_minus_alpha: bool
    endpoints: bool
    max_convexity_violation: float
    max_increase: float
    max_above_one_minus_alpha: float
    tolerance: float
    n_vertices: int

    def failures(self) -> list[str]:
        out = []
        if not self.convex:
            out.append(
                f"not convex (a vertex lies {self.max_convexity_violation:.3g} above its neighbours' chord)"
            )
        if not self.nonincreasing:
            out.append(f"rises by up to {self.max_increase:.3g}")
        if not self.below_one_minus_alpha:
            out.append(f"lies above 1 - alpha by up to {self.max_above_one_minus_alpha:.3g}")
        if not self.endpoints:
            out.append("f(0) > 1 or f(1) != 0")
        return out


def check_curve(
    alphas: Sequence[float] | np.ndarray,
    betas: Sequence[float] | np.ndarray,
    *,
    tol: float = CHECK_TOL,
) -> CurveCheck:
    """Check vertices (alpha_i, f(alpha_i)) of a piecewise-linear curve (sorted by alpha):
    convex, nonincreasing, f(alpha) <= 1 - alpha, within ``tol``.

    >>> check_curve([0.0, 0.5, 1.0], [1.0, 0.2, 0.0]).valid, check_curve([0.0, 0.5, 1.0], [1.0, 0.7, 0.0]).valid
    (True, False)
    """
    x = np.asarray(alphas, dtype=np.float64)
    y = np.asarray(betas, dtype=np.float64)
    if x.ndim != 1 or x.shape != y.shape or x.size < 2 or np.any(np.diff(x) <= 0):
        raise DomainError("check_curve needs at least two vertices with strictly increasing alphas")
    dy = np.diff(y)
    # convexity: every vertex on or below the chord of its neighbours, measured in units of f
    # (slope differences would be dominated by rounding near alpha = 0, where slopes ~ -e^eps)
    if x.size >= 3:
        t = (x[1:-1] - x[:-2]) / (x[2:] - x[:-2])
        chord = y[:-2] + t * (y[2:] - y[:-2])
        conv = float(max(0.0, np.max(y[1:-1] - chord)))
    else:
        conv = 0.0
    inc = float(max(0.0, np.max(dy)))
    above = float(max(0.0, np.max(y - (1.0 - x))))
    ends = bool(y[0] <= 1.0 + tol and abs(y[-1]) <= tol and x[0] == 0.0 and x[-1] == 1.0)
    return CurveCheck(
        bool(conv <= tol and inc <= tol and above <= tol and ends),
        conv <= tol,
        inc <= tol,
        above <= tol,
        ends,
        conv,
        inc,
        above,
        tol,
        int(x.size),
    )


# --------------------------------------------------------------------------- profile -> curve
def _upper_envelope(slopes: np.ndarray, b: np.ndarray, c: np.ndarray, steep: np.ndarray):
    """Lines f = m alpha + b on the upper envelope, in order of increasing alpha.

    Each line is also given as power 1 - f = c - m alpha (c = 1 - b, computed accurately by the
    caller), and ``steep`` marks the lines with slope <= -1. Where two lines cross is computed
    from c for two steep lines (they are on top at small alpha, where f ~ 1 and 1 - b would
    lose every digit of delta) and from b otherwise (at large alpha f ~ 0 and b is accurate).
    Returns (slopes, b, c, start alpha of each (-inf for the first), index in the input).

    The convex-hull trick: sort by slope (steepest first, the maximum at small alpha), drop lines
    never on top. Hand-written because scipy's ConvexHull works on points, not on the dual
    problem of a maximum of lines restricted to an interval.
    """
    order = np.lexsort((-b, slopes))  # by slope, then larger intercept first
    keep = np.concatenate(
        [[True], np.diff(slopes[order]) > 0]
    )  # equal slopes: keep the largest intercept
    idx = order[keep]
    hi: list[int] = []
    hx: list[float] = []  # alpha where line j starts being the maximum

    def cross(i: int, j: int) -> float:  # alpha where flatter line j overtakes line i
        if steep[i] and steep[j]:
            return float((c[j] - c[i]) / (slopes[j] - slopes[i]))
        return float((b[i] - b[j]) / (slopes[j] - slopes[i]))

    for j in idx.tolist():
        while hi:
            x = cross(hi[-1], j)
            if x <= hx[-1]:
                hi.pop()
                hx.pop()
                continue
            break
        hx.append(cross(hi[-1], j) if hi else -math.inf)
        hi.append(j)
    h = np.array(hi, dtype=np.int64)
    return slopes[h], b[h], c[h], np.array(hx), h


def curve_from_profile(
    epsilons: Sequence[float] | np.ndarray,
    deltas: Sequence[float] | np.ndarray,
    *,
    neighbors: str,
    slack: float = FLOAT_SLACK,
    label: str = "",
    note: str = "",
    tol: float = CHECK_TOL,
    mass_excess: float = 0.0,
) -> tuple[TradeOff, CurveCheck]:
    """The trade-off curve sup_i f_{eps_i, delta_i} of a privacy profile ([6] Prop. 2.12).

    ``epsilons``: sorted, >= 0, starting at 0 (eta = delta(0) then sits on the curve);
    ``deltas``: upper bounds on the hockey-stick divergence at each eps, for both orders of the
    neighbouring pair. Every delta is raised by ``slack`` (pessimistic). Refuses a profile that
    no pair of distributions has (delta outside [0, 1] or rising with eps beyond ``tol``; delta
    may exceed 1 by the accepted ``mass_excess`` of the PLD it came from, and is then clipped to 1)
    and a resulting curve that fails :func:`check_curve`. Returns the curve (kind 'points', with
    its powers 1 - f stored at the vertices) and the check.

    >>> from memclaim.privacy.pld import curve_from_profile
    >>> f, check = curve_from_profile([0.0, 1.0, 2.0], [0.5, 0.2, 0.05], neighbors="add-remove")
    >>> f.kind, check.valid, round(float(f(0.1)), 4)
    ('points', True, 0.5282)
    """
    e = np.asarray(epsilons, dtype=np.float64).ravel()
    d = np.asarray(deltas, dtype=np.float64).ravel()
    if e.size == 0 or e.shape != d.shape:
        raise DomainError(
            f"a privacy profile needs matching epsilons and deltas, got {e.size} and {d.size}"
        )
    if not (np.all(np.isfinite(e)) and np.all(np.isfinite(d))):
        raise DomainError(
            "a privacy profile must be finite", hint="drop eps = inf (delta(inf) is the tail mass)"
        )
    if e[0] != 0.0 or np.any(np.diff(e) <= 0):
        raise DomainError(
            f"the profile's epsilons must start at 0 and increase, got {e[:3].tolist()}...",
            hint="eta(f) = delta(0) needs eps = 0 on the grid",
        )
    # ---- the profile checks: every hockey-stick curve is in [0, 1] and nonincreasing in eps
    if np.min(d) < -tol:
        i = int(np.argmin(d))
        raise DomainError(
            f"invalid privacy profile: delta({e[i]:.6g}) = {d[i]:.3g} < 0",
            hint="the PLD is numerically broken at this grid; use a coarser value discretization",
        )
    if np.max(d) > 1.0 + tol + validate.nonneg("mass_excess", mass_excess):
        i = int(np.argmax(d))
        raise DomainError(
            f"invalid privacy profile: delta({e[i]:.6g}) = {d[i]:.6g} > 1",
            hint="the PLD's probabilities sum above 1; use a coarser value discretization",
        )
    rise = np.diff(d)
    if rise.size and np.max(rise) > tol:
        i = int(np.argmax(rise))
        raise DomainError(
            f"invalid privacy profile: delta rises from {d[i]:.6g} at eps = {e[i]:.6g} to "
            f"{d[i + 1]:.6g} at eps = {e[i + 1]:.6g}",
            hint="a hockey-stick divergence is nonincreasing in eps; use a coarser value discretization",
        )
    s = validate.nonneg("slack", slack)
    du = np.clip(d + s, 0.0, 1.0)
    # ---- the lines: slope -e^eps (first branch), -e^-eps (second branch), and f = 0; each with its
    # intercept b in f and c = 1 - b in power 1 - f, both without cancellation:
    #   branch 1: f = 1 - delta - e^eps alpha,       1 - f = delta + e^eps alpha
    #   branch 2: f = e^-eps (1 - delta - alpha),    1 - f = (1 - e^-eps) + e^-eps (delta + alpha)
    E = np.exp(e)  # e <= ~50 in practice; an overflow to inf makes a vertical line at alpha = 0
    r = np.exp(-e)
    slopes = np.concatenate([-E, -r, [0.0]])
    b_all = np.concatenate([1.0 - du, r * (1.0 - du), [0.0]])
    c_all = np.concatenate([du, -np.expm1(-e) + r * du, [1.0]])
    steep_all = np.concatenate([np.ones(e.size, bool), np.zeros(e.size + 1, bool)])
    ok = np.isfinite(slopes)
    idx_all = np.arange(slopes.size)[ok]
    hm, hb, hc, hx, hidx = _upper_envelope(slopes[ok], b_all[ok], c_all[ok], steep_all[ok])
    src = idx_all[hidx]  # original line index of each hull line
    xs = np.concatenate([[0.0], hx[1:]])
    inside = (xs >= 0.0) & (xs < 1.0)
    # the hull line active at alpha = 0 is the last one whose start is <= 0
    first = int(np.nonzero(hx <= 0.0)[0][-1]) if np.any(hx <= 0.0) else 0
    use = np.arange(first, hm.size)
    use = use[(use == first) | inside[use]]
    starts = np.where(use == first, 0.0, hx[use])
    verts = np.concatenate([starts, [1.0]])
    n = e.size
    # f and 1 - f at each vertex from its active line (vertex j lies on line use[j]; alpha = 1 on
    # the last one): the power from c on steep lines (small alpha), f from b on the others
    line_of = np.concatenate([use, [use[-1]]])
    li = src[line_of]
    m_v, b_v, c_v = hm[line_of], hb[line_of], hc[line_of]
    st = li < n
    pw = np.where(st, c_v - m_v * verts, 1.0 - (b_v + m_v * verts))
    ys = np.where(st, 1.0 - pw, b_v + m_v * verts)
    ys = np.clip(ys, 0.0, 1.0)
    pw = np.clip(pw, 0.0, 1.0)
    ys[-1] = 0.0
    pw[-1] = 1.0
    # drop duplicate alphas (two breakpoints at the same float)
    keep = np.concatenate([np.diff(verts) > 0, [True]])
    keep[0] = True
    verts, ys, pw = verts[keep], ys[keep], pw[keep]
    chk = check_curve(verts, ys, tol=tol)
    if not chk.valid:
        raise DomainError(
            "refusing an invalid trade-off curve: " + "; ".join(chk.failures()),
            hint="the privacy profile is numerically inconsistent; use a coarser value discretization",
        )
    pts = tuple((float(a), float(b)) for a, b in zip(verts, ys))
    # sup_eps f_{eps, delta(eps)} with both branches is symmetric: each f_{eps,delta} is ([MX] §3.1)
    return TradeOff(
        "points",
        neighbors,
        points=pts,
        exact=False,
        note=note,
        powers=tuple(pw.tolist()),
        label=label,
        symmetric=True,
    ), chk


# --------------------------------------------------------------------------- one DP-SGD step, discretized twice
#: each Gaussian component of a step's output law is cut this many standard deviations out (mass
#: 7.6e-24 beyond): in the pessimistic PLD that tail goes to +inf, in the optimistic one to the top
#: grid point (rounded down)
TAIL_SD = 10.0
#: tail mass dp_accounting's self-composition may cut off (its default; the FFT window), added to
#: the pessimistic PLD's infinity mass
COMPOSE_TRUNCATION = 1e-15
#: the default grid is halved (at most MAX_REFINEMENTS times) while the certified gap
#: (eta - eta_optimistic) / eta is above this
TARGET_ACCURACY = 0.005
MAX_REFINEMENTS = 2
#: coarsest grid tried when finer PLDs are refused as numerically invalid
MAX_PLD_GRID = 1e-2
#: most grid points one step's PLD may have (each costs ~50 bytes through the FFT composition)
MAX_STEP_BINS = 4_000_000


@dataclass(frozen=True)
class _Pair:
    """One dominating pair of a DP-SGD step (sensitivity 1, noise sigma, Poisson rate q): Gaussian
    mixtures [(weight, mean)] with standard deviation sigma, oriented so that the privacy loss
    log(upper / lower) increases with x. ``kind`` names the closed-form inverse of the loss."""

    kind: str  # 'remove' | 'add' | 'replace'
    sigma: float
    q: float
    upper: tuple[tuple[float, float], ...]
    lower: tuple[tuple[float, float], ...]


def _step_pairs(sigma: float, q: float, rel: str) -> list[_Pair]:
    """dp_accounting's pairs for one step, reflected x -> -x where needed so the loss increases:
    add/remove: 'remove' = (1-q) N(0) + q N(1) against N(0), 'add' = N(0) against (1-q) N(0) +
    q N(-1) (one pair when q = 1: the two coincide); replace-one: (1-q) N(0) + q N(1) against
    (1-q) N(0) + q N(-1) (symmetric, one pair)."""
    if rel == "add-remove":
        rem = _Pair(
            "remove",
            sigma,
            q,
            ((1.0 - q, 0.0), (q, 1.0)) if q < 1 else ((1.0, 1.0),),
            ((1.0, 0.0),),
        )
        if q == 1.0:
            return [rem]
        return [rem, _Pair("add", sigma, q, ((1.0, 0.0),), ((1.0 - q, 0.0), (q, -1.0)))]
    mix = (lambda m: ((1.0 - q, 0.0), (q, m))) if q < 1 else (lambda m: ((1.0, m),))
    return [_Pair("replace", sigma, q, mix(1.0), mix(-1.0))]


def _log_density(x: np.ndarray, comps, sigma: float) -> np.ndarray:
    out: np.ndarray | None = None
    for w, m in comps:
        v = math.log(w) - (x - m) ** 2 / (2.0 * sigma * sigma)
        out = v if out is None else np.logaddexp(out, v)
    assert out is not None  # a mixture has at least one component (_pairs)
    return out


def _loss(x: np.ndarray, pair: _Pair) -> np.ndarray:
    return _log_density(x, pair.upper, pair.sigma) - _log_density(x, pair.lower, pair.sigma)


def _inverse_loss(l: np.ndarray, pair: _Pair, lo: float, hi: float) -> np.ndarray:
    """x with loss(x) = l, for l inside the loss range of [lo, hi]: closed forms for add/remove,
    bisection (60 halvings of [lo, hi]) for replace-one."""
    s2, q = pair.sigma**2, pair.q
    with np.errstate(divide="ignore", invalid="ignore"):
        if pair.kind == "remove":  # l = log(1 - q + q e^((2x - 1)/(2 s^2)))
            x = s2 * (np.log(np.expm1(l) + q) - math.log(q)) + 0.5
        elif pair.kind == "add":  # l = -log(1 - q + q e^(-(2x + 1)/(2 s^2)))
            x = -s2 * (np.log(np.expm1(-l) + q) - math.log(q)) - 0.5
        else:
            a, b = np.full(l.shape, lo), np.full(l.shape, hi)
            for _ in range(60):
                mid = 0.5 * (a + b)
                below = _loss(mid, pair) < l
                a, b = np.where(below, mid, a), np.where(below, b, mid)
            x = 0.5 * (a + b)
    return np.clip(np.nan_to_num(x, nan=lo, posinf=hi, neginf=lo), lo, hi)


@dataclass(frozen=True)
class _Bins:
    """One pair cut into the x-intervals on which the loss crosses one grid cell [k d, (k+1) d]."""

    cells: np.ndarray  # k of each bin (int64)
    P: np.ndarray  # upper-law mass of each bin
    Q: np.ndarray  # lower-law mass of each bin
    p_below: float  # upper-law mass below the cut (loss below the first cell)
    p_above: float  # upper-law mass above the cut
    q_above: float


def _bins(pair: _Pair, d: float) -> _Bins:
    """Bin masses from the mixtures' CDF (or survival function past the median: no cancellation in
    the tails), with bin edges at the exact x where the loss crosses each grid value k d."""
    from scipy.special import ndtr

    sig = pair.sigma
    means = [m for _, m in pair.upper + pair.lower]
    x_lo, x_hi = min(means) - TAIL_SD * sig, max(means) + TAIL_SD * sig
    l_lo, l_hi = float(_loss(np.array(x_lo), pair)), float(_loss(np.array(x_hi), pair))
    k_lo, k_hi = math.ceil(l_lo / d), math.floor(l_hi / d)
    if k_hi - k_lo + 2 > MAX_STEP_BINS:
        raise DomainError(
            f"a PLD value grid of {d:g} needs {k_hi - k_lo + 2:,} points per step for this mechanism "
            f"(losses from {l_lo:.3g} to {l_hi:.3g}), more than {MAX_STEP_BINS:,}",
            hint=f"use a coarser grid (e.g. {d * 10:g})",
        )
    ks = np.arange(k_lo, k_hi + 1, dtype=np.int64)
    edges = np.concatenate([[x_lo], _inverse_loss(ks * d, pair, x_lo, x_hi), [x_hi]])
    edges = np.maximum.accumulate(edges)
    out = []
    for comps in (pair.upper, pair.lower):
        F = sum(w * ndtr((edges - m) / sig) for w, m in comps)
        S = sum(w * ndtr((m - edges) / sig) for w, m in comps)
        mass = np.where(F[1:] <= 0.5, np.diff(F), -np.diff(S))
        out.append((np.clip(mass, 0.0, None), float(F[0]), float(S[-1])))
    (P, p_below, p_above), (Q, _, q_above) = out
    return _Bins(np.arange(k_lo - 1, k_hi + 1, dtype=np.int64), P, Q, p_below, p_above, q_above)


def _pessimistic_pmf(b: _Bins, d: float, pld_pmf):
    """Connect-the-dots (Doroshenko et al. 2022, arXiv:2207.04380, Alg. 1): each bin's mass P
    (loss l = log P/Q in its cell [a, a + d]) is split between the cell's ends, P_up = P (e^(a-l) - 1)/(e^(-d) - 1) at a + d and
    the rest at a, which keeps the bin's mass under both laws; the split pair dominates the true
    one, so every composed delta(eps) is at least the true one. Computed per bin from the two
    laws' masses, not from second differences of delta(eps) (dp_accounting's connect-the-dots,
    whose float cancellation adds about 1.2e-16 / d^2 of spurious mass per step: 1.0012 in all at
    sigma = 1, q = 0.001, T = 1e5, d = 1e-4). The tail below the cut goes to the first grid point
    (rounded up), the tail above it to +inf."""
    ok = (b.P > 0) & (b.Q > 0)
    ell = np.log(np.where(ok, b.P, 1.0)) - np.log(np.where(ok, b.Q, 1.0))
    a = b.cells * d
    up = np.where(
        ok, np.clip(np.expm1(a - ell) / math.expm1(-d), 0.0, 1.0), 1.0
    )  # P > 0 = Q: the top
    probs = np.zeros(b.cells.size + 1)
    probs[:-1] += b.P * (1.0 - up)
    probs[1:] += b.P * up
    probs[1 if probs.size > 1 else 0] += b.p_below
    return pld_pmf.DensePLDPmf(d, int(b.cells[0]), probs, b.p_above, True)


def _merge_to_grid(A: list, B: list, d: float) -> tuple[dict, float, float, float]:
    """Walk atoms (A_j, B_j) in order of increasing loss log(A_j / B_j), merging adjacent ones so
    that each merged atom's loss is exactly a grid value k d: the accumulated atom (loss l <= g,
    g the next grid value) takes the share t of the next atom (loss l' >= g) with
    log((A + t A') / (B + t B')) = g, t = A (e^(g-l) - 1) / (A' (1 - e^(g-l'))). Returns
    ({k: A-mass}, and the last accumulated atom (A, B, loss) that reached no grid value)."""
    out: dict[int, float] = {}
    aa = ba = la = 0.0
    have = False
    for aj, bj in zip(A, B):
        if aj <= 0.0 or bj <= 0.0:
            continue
        lj = math.log(aj) - math.log(bj)
        if not have:
            aa, ba, la, have = aj, bj, lj, True
            continue
        k = math.ceil(la / d - 1e-9)
        g = k * d
        if lj > g:
            t = aa * math.expm1(g - la) / (-aj * math.expm1(g - lj))
            if t < 1.0:
                out[k] = out.get(k, 0.0) + aa + t * aj
                aa, ba, la = (1.0 - t) * aj, (1.0 - t) * bj, lj
                continue
        aa, ba = aa + aj, ba + bj
        la = math.log(aa) - math.log(ba)
    return out, aa, ba, (la if have else math.nan)


def _optimistic_pmf(b: _Bins, d: float, pld_pmf):
    """A pair the true one dominates, with every loss on the grid: adjacent bins are merged
    (a randomized post-processing of the output, which can only lose information) in the
    proportions that put each merged atom's loss exactly on a grid point (:func:`_merge_to_grid`).
    The walk starts at the end of the loss range that holds the bulk of the mass (add/remove's
    losses pile up at log(1 - q) or -log(1 - q)) and ends in the other, thin tail, where the
    last atom's loss is rounded down (rounding a loss down is optimistic too) and the tail past
    the cut is merged in (past the top) or dropped (below the bottom). Every composed delta(eps)
    is then at most the true one. Hand-written: dp_accounting's optimistic PLDs round each loss
    down (privacy buckets), a bias of about d/2 per step that grows linearly with the steps
    (5 nats at T = 1e5, d = 1e-4)."""
    P, Q = b.P, b.Q
    downward = P[-2:].sum() > P[:2].sum()  # the bulk sits at the top: walk down (the mirror image)
    if downward:
        # swapping the laws negates every loss: walk the mirror image upward, then map back
        top = ([b.p_above], [b.q_above]) if b.p_above > 0 and b.q_above > 0 else ([], [])
        out_m, qa, pa, la_m = _merge_to_grid(
            top[1] + Q[::-1].tolist(), top[0] + P[::-1].tolist(), d
        )
        # the mirror's masses are the lower law's: the upper law's mass of an atom at loss g is e^g times it
        out = {-k: v * math.exp(-k * d) for k, v in out_m.items()}
        if not math.isnan(la_m):
            k = math.floor(-la_m / d + 1e-9)  # round the last (bottom) atom's loss down
            out[k] = out.get(k, 0.0) + pa
    else:
        out, pa, qa, la = _merge_to_grid(P.tolist(), Q.tolist(), d)
        if b.p_above > 0 and b.q_above > 0:
            pa, qa = pa + b.p_above, qa + b.q_above
            la = math.log(pa) - math.log(qa)
        if not math.isnan(la):
            k = math.floor(la / d + 1e-9)  # round the last (top) atom's loss down
            out[k] = out.get(k, 0.0) + pa
    lo, hi = min(out), max(out)
    probs = np.zeros(hi - lo + 1)
    for k, v in out.items():
        probs[k - lo] += v
    return pld_pmf.DensePLDPmf(d, lo, probs, 0.0, False)


def _step_plds(dpa, sigma: float, q: float, rel: str, d: float):
    """(pessimistic, optimistic) PLDs of one step, as dp_accounting PrivacyLossDistributions."""
    from dp_accounting.pld import pld_pmf

    pess, opt = [], []
    for pair in _step_pairs(sigma, q, rel):
        b = _bins(pair, d)
        pess.append(_pessimistic_pmf(b, d, pld_pmf))
        opt.append(_optimistic_pmf(b, d, pld_pmf))
    make = dpa.pld.privacy_loss_distribution.PrivacyLossDistribution
    return make(*pess), make(*opt)


def _pld_for(dpa, history, rel: str, d: float):
    """(pessimistic, optimistic) PLDs of the composed run: each block's step composed T times,
    blocks composed in order (dp_accounting's FFT composition)."""
    pess = opt = None
    for sigma, q, steps in history:
        p1, o1 = _step_plds(dpa, sigma, q, rel, d)
        if steps > 1:
            p1 = p1.self_compose(steps, tail_mass_truncation=COMPOSE_TRUNCATION)
            o1 = o1.self_compose(steps, tail_mass_truncation=COMPOSE_TRUNCATION)
        pess = p1 if pess is None else pess.compose(p1, tail_mass_truncation=COMPOSE_TRUNCATION)
        opt = o1 if opt is None else opt.compose(o1, tail_mass_truncation=COMPOSE_TRUNCATION)
    return pess, opt


def _directions(pld) -> list:
    return [pld._pmf_remove] if pld._symmetric else [pld._pmf_remove, pld._pmf_add]


def _tables(pm):
    """(losses ascending, P suffix sums, Q suffix sums, P prefix sums, Q prefix sums, infinity
    mass) of one direction's dense pmf; suffix[i] sums atoms i.. (len n + 1)."""
    dn = pm.to_dense_pmf()
    p = np.clip(np.asarray(dn._probs, dtype=np.float64), 0.0, None)
    loss = (np.arange(p.size) + dn._lower_loss) * dn._discretization
    with np.errstate(divide="ignore", over="ignore"):
        qm = np.where(
            p > 0, np.exp(np.log(np.where(p > 0, p, 1.0)) - loss), 0.0
        )  # no e^-l overflow
    zero = np.zeros(1)
    suf = lambda v: np.concatenate([np.cumsum(v[::-1])[::-1], zero])  # noqa: E731
    pre = lambda v: np.concatenate([zero, np.cumsum(v)])  # noqa: E731
    return loss, suf(p), suf(qm), pre(p), pre(qm), float(dn._infinity_mass)


def _optimistic_delta(pld_opt, eps: np.ndarray) -> np.ndarray:
    """delta(eps) of the optimistic PLD, max over its directions, without the infinity mass
    (the optimistic pmfs put none there; what the composition adds is its truncation)."""
    out: np.ndarray | None = None
    for pm in _directions(pld_opt):
        loss, sp, sq, _, _, _ = _tables(pm)
        i = np.searchsorted(loss, eps, side="right")
        v = sp[i] - np.exp(eps) * sq[i]
        out = v if out is None else np.maximum(out, v)
    assert out is not None  # a PLD has at least one direction (_directions)
    return np.clip(out, 0.0, 1.0)


def _optimistic_curve(pld_opt, eps: np.ndarray, *, rel: str, slack: float, label: str) -> TradeOff:
    """A points curve never below the true trade-off curve: the lower convex hull of points on the
    optimistic (dominated) PLD's trade-off curves, at loss thresholds t = eps >= 0.

    Each direction's discrete pair (P, Q) has the Neyman-Pearson curve through (alpha, f) =
    (Q(l > t), P(l <= t)), and the swapped pair its inverse through (P(l <= t), Q(l > t)). Every
    such point lies on or above the true curve f (the dominated pair's curves are above the true
    pair's, f is below both orders of every neighbouring pair, [6] Prop. 2.12), and so does the
    lower convex hull of any set of them (f is convex). Thresholds t >= 0 only: there every mass is
    P-mass or Q-mass of losses > 0, weighted by e^-l <= 1, while at very negative losses the FFT's
    round-off (~1e-18 per atom) times e^-l swamps the Q-masses (1.0017 in all at sigma = 0.6,
    q = 0.02, T = 1000). f is raised by ``slack`` (float round-off, as the pessimistic curve's
    deltas are)."""
    al, fs, pw = [np.array([0.0, 1.0])], [np.array([1.0, 0.0])], [np.array([0.0, 1.0])]
    for pm in _directions(pld_opt):
        loss, sp, sq, pp, _, _ = _tables(pm)
        i = np.searchsorted(loss, eps, side="right")
        al += [sq[i], pp[i]]  # the pair: alpha = Q(l > t); its inverse: alpha = P(l <= t)
        fs += [pp[i], sq[i]]  # f = P(l <= t);                f = Q(l > t)
        pw += [sp[i], 1.0 - sq[i]]  # 1 - f = P(l > t);         1 - f = Q(l <= t)
    a, f, p = (np.clip(np.concatenate(v), 0.0, 1.0) for v in (al, fs, pw))
    order = np.lexsort((-p, a))  # by alpha, the largest power first at equal alpha
    a, f, p = a[order], f[order], p[order]
    keep = np.concatenate([[True], np.diff(a) > 0])
    a, f, p = a[keep], f[keep], p[keep]
    # upper concave hull of the power (= lower convex hull of f), Andrew's monotone chain
    h: list[int] = []
    for j in range(a.size):
        while len(h) >= 2:
            i0, i1 = h[-2], h[-1]
            if (a[i1] - a[i0]) * (p[j] - p[i0]) - (p[i1] - p[i0]) * (a[j] - a[i0]) >= 0:
                h.pop()
                continue
            break
        h.append(j)
    a, f, p = a[h], f[h], p[h]
    f = np.minimum(f + slack, 1.0 - a)
    p = np.maximum(p - slack, a)
    f[-1], p[-1] = 0.0, 1.0
    return TradeOff(
        "points",
        rel,
        points=tuple(zip(a.tolist(), f.tolist())),
        exact=False,
        powers=tuple(p.tolist()),
        label=label,
        symmetric=True,
        note=(
            "optimistic: never below the true trade-off curve (a dominated PLD whose losses sit on the "
            "grid by merging, its vertices at loss thresholds +-eps); for the certified accuracy"
        ),
    )


# --------------------------------------------------------------------------- DP-SGD
@dataclass(frozen=True)
class DpSgdCurve(ResultMixin):
    """The trade-off curve of DP-SGD (Poisson-subsampled Gaussian, composed) from its PLD.

    ``curve`` is never above the true trade-off curve for the relation ``neighbors`` (the
    pessimistic PLD, a finite eps grid, and ``slack`` added to every delta all push it down);
    ``eta`` = delta(0) + slack = eta(curve) is the advantage (the total variation between the
    composed output laws). ``optimistic`` is a curve never below the true one (from a PLD the
    true one dominates) and ``eta_optimistic`` its advantage: the exact advantage lies in
    [eta_optimistic, eta], the certified accuracy of eta. ``history`` lists (noise multiplier,
    sampling rate, steps) blocks. ``epsilon_delta`` is the (eps, delta) route from the same PLD at
    ``route_delta`` (eps = ``route_epsilon``), kept beside the curve as the looser alternative.
    ``grids_tried``: the PLD value grids computed, in order (the last one is used).
    """

    curve: TradeOff = field(repr=False)
    history: tuple[tuple[float, float, int], ...]
    neighbors: str
    value_discretization_interval: float
    epsilon_max: float
    epsilon_step: float
    n_epsilons: int
    slack: float
    mass_excess: float
    tail_mass: float
    eta: float
    route_delta: float | None
    route_epsilon: float | None
    check: CurveCheck
    seconds: float
    optimistic: TradeOff = field(repr=False)
    eta_optimistic: float
    grids_tried: tuple[float, ...] = ()
    reference: str = (
        "PLD by connect-the-dots (pessimistic) and by merging (optimistic), composed by dp_accounting; "
        "profile -> curve by [6] Prop. 2.12; [MX] §3.1, §8.2"
    )

    @property
    def noise_multiplier(self) -> float:
        return self.history[0][0]

    @property
    def sampling_rate(self) -> float:
        return self.history[0][1]

    @property
    def steps(self) -> int:
        return sum(h[2] for h in self.history)

    @property
    def eta_accuracy(self) -> float:
        """eta - eta_optimistic: the exact advantage is at most this far below eta (certified)."""
        return max(0.0, self.eta - self.eta_optimistic)

    def mechanism(self) -> str:
        parts = [f"sigma = {s:g}, q = {q:g}, T = {t}" for s, q, t in self.history]
        return "DP-SGD (" + "; then ".join(parts) + ")"

    def grid(self) -> str:
        """What grid the curve was computed on (every row that uses the curve says this)."""
        extra = "" if self.route_epsilon is None else " incl. the route's eps"
        spacing = (
            f"step {self.epsilon_step:g}"
            if self.epsilon_max <= 10
            else f"step {self.epsilon_step:g} to 10, relative {self.epsilon_step / 10:g} above"
        )
        return (
            f"PLD value grid {self.value_discretization_interval:g} (pessimistic; optimistic beside it), eps grid "
            f"[0, {self.epsilon_max:.4g}] {spacing} ({self.n_epsilons} points{extra}), delta slack "
            f"{self.slack:.2g}; exact eta in [{self.eta_optimistic:.6g}, {self.eta:.6g}]"
        )

    def epsilon_delta_curve(self) -> TradeOff | None:
        """f_{eps, delta} of the (eps, delta) route, for the same relation (looser)."""
        if (
            self.route_epsilon is None
            or not math.isfinite(self.route_epsilon)
            or self.route_epsilon <= 0
        ):
            return None
        assert (
            self.route_delta is not None
        )  # the route's delta is set with its epsilon (dpsgd_curve)
        return approx(self.route_epsilon, self.route_delta, neighbors=self.neighbors)

    def to_dict(self) -> dict:
        """JSON-ready summary; the curves themselves as their description, vertex count and a sample."""
        d = super().to_dict()
        a = np.concatenate([[0.0], np.logspace(-12, -1, 12), np.linspace(0.2, 1.0, 9)])
        d["curve"] = {
            "description": self.curve.describe(),
            "n_vertices": len(self.curve._known_points),
            "sample": [
                {"alpha": float(x), "f": float(self.curve(x)), "power": float(self.curve.power(x))}
                for x in a
            ],
        }
        d["optimistic"] = {
            "description": self.optimistic.describe(),
            "n_vertices": len(self.optimistic._known_points),
        }
        d["eta_accuracy"] = self.eta_accuracy
        d["mechanism"] = self.mechanism()
        d["grid"] = self.grid()
        return d


def _history(
    noise_multiplier, sampling_rate, steps, history
) -> tuple[tuple[float, float, int], ...]:
    if history is not None:
        if noise_multiplier is not None or sampling_rate is not None or steps is not None:
            raise DomainError(
                "give either history=((sigma, q, steps), ...) or noise_multiplier/sampling_rate/steps"
            )
        out = []
        for h in history:
            try:
                s, q, t = h
            except (TypeError, ValueError):
                raise DomainError(
                    f"each history entry must be (noise multiplier, sampling rate, steps), got {h!r}"
                ) from None
            out.append(
                (
                    validate.positive("noise_multiplier", s),
                    validate.in_unit("sampling_rate", q, lo_open=True),
                    validate.integer("steps", t, minimum=1),
                )
            )
        if not out:
            raise DomainError("an empty DP-SGD history has no guarantee to compute")
        return tuple(out)
    if noise_multiplier is None or sampling_rate is None or steps is None:
        raise DomainError(
            "DP-SGD needs noise_multiplier, sampling_rate and steps",
            hint="e.g. noise_multiplier=1.1, sampling_rate=0.01, steps=3000",
        )
    return (
        (
            validate.positive("noise_multiplier", noise_multiplier),
            validate.in_unit("sampling_rate", sampling_rate, lo_open=True),
            validate.integer("steps", steps, minimum=1),
        ),
    )


def dpsgd_curve(
    *,
    noise_multiplier: float | None = None,
    sampling_rate: float | None = None,
    steps: int | None = None,
    history: Sequence | None = None,
    neighbors: str = "add-remove",
    value_discretization_interval: float | None = None,
    epsilon_step: float = DEFAULT_EPSILON_STEP,
    route_delta: float | None = 1e-5,
    max_points: int | None = None,
) -> DpSgdCurve:
    """The certified trade-off curve of DP-SGD ([MX] §3.1, §8.2; issue 18) and its accuracy
    (issue 24). See the module docstring.

    ``noise_multiplier`` sigma, ``sampling_rate`` q (Poisson), ``steps`` T, or a ``history`` of
    several such blocks (composed). ``neighbors``: 'add-remove' (Opacus's and DP-SGD's usual
    relation) or 'replace' (replace-one). ``value_discretization_interval``: the PLD's loss
    grid, used as given. Left at None, it starts at 1e-4, doubles while a PLD is refused as
    numerically invalid, and then halves (at most twice) while the certified gap
    (eta - eta_optimistic) / eta exceeds 0.5%; every grid computed is recorded
    (``grids_tried``), the last one is used.
    ``route_delta``: also return eps at this delta from the same PLD (the (eps, delta) route).
    ``max_points``: the most points the PLD may hold (default :data:`MAX_PLD_POINTS`); settings
    that need more are refused before any is computed (:class:`PldTooLarge` names the grid that
    fits), not found out by running out of memory.
    Memoized: the same settings return the same curve.

    >>> from memclaim.privacy.pld import dpsgd_curve
    >>> cur = dpsgd_curve(noise_multiplier=1.0, sampling_rate=0.01, steps=100)  # doctest: +SKIP
    >>> round(cur.eta, 4), round(cur.route_epsilon, 3), cur.eta_accuracy < 1e-5  # doctest: +SKIP
    (0.0507, 0.718, True)
    """
    hist = _history(noise_multiplier, sampling_rate, steps, history)
    rel = normalize_neighbors(neighbors)
    step = validate.positive("epsilon_step", epsilon_step)
    rd = None if route_delta is None else validate.in_open_unit("route_delta", route_delta)
    if value_discretization_interval is not None:
        d = float(validate.positive("value_discretization_interval", value_discretization_interval))
        check_pld_size(hist, rel, d, max_points)
        return dataclasses.replace(_dpsgd_curve(hist, rel, d, float(step), rd), grids_tried=(d,))
    tried: list[float] = []
    d, cur = DEFAULT_PLD_GRID, None
    while (
        cur is None
    ):  # coarser (by 2) while the PLD is refused: coarser stays pessimistic, only looser
        check_pld_size(hist, rel, d, max_points)  # too large is refused with the grid that fits
        tried.append(d)
        try:
            cur = _dpsgd_curve(hist, rel, d, float(step), rd)
        except _InvalidPld:
            if d * 2 > MAX_PLD_GRID * (1 + 1e-9):
                raise
            d *= 2
    for _ in range(MAX_REFINEMENTS):  # finer (by 2) while the certified gap is wide
        if cur.eta_accuracy <= TARGET_ACCURACY * cur.eta:
            break
        try:
            check_pld_size(hist, rel, d / 2, max_points)
            finer = _dpsgd_curve(hist, rel, d / 2, float(step), rd)
        except DomainError:  # refused, or too many grid points: keep the valid coarser curve
            tried.append(d / 2)
            break
        tried.append(d / 2)
        d, cur = d / 2, finer
    return dataclasses.replace(cur, grids_tried=tuple(tried))


class _InvalidPld(DomainError):
    """The PLD at this grid is numerically invalid (a coarser one may be fine)."""


#: the eps grid ends where delta falls to this (lines beyond add less than the slack itself),
#: rounded up to a multiple of EPSILON_MAX_QUANTUM so that float noise in delta's far tail
#: (~1e-16) cannot move the grid's end from one CPU to another
EPSILON_MAX_DELTA = FLOAT_SLACK
EPSILON_MAX_QUANTUM = 0.25


@functools.lru_cache(maxsize=64)
def _dpsgd_curve(hist, rel, d, step, rd) -> DpSgdCurve:
    t0 = time.perf_counter()
    dpa = require("dp_accounting", "dp")
    pld, pld_opt = _pld_for(dpa, hist, rel, d)
    # total mass of each direction (delta at eps = -inf; 1 in exact arithmetic, pessimistic and
    # optimistic alike up to 1e-15 of truncation) and the tail mass (delta at +inf)
    tabs = [_tables(pm) for pm in _directions(pld)]
    masses = [t[5] + t[1][0] for t in tabs] + [_tables(pm)[1][0] for pm in _directions(pld_opt)]
    mass = max(masses[: len(tabs)])
    tail = max(t[5] for t in tabs)
    excess = max(0.0, mass - 1.0)
    if excess > MAX_MASS_ERROR:
        raise _InvalidPld(
            f"the privacy-loss distribution at grid {d:g} is numerically invalid: its probabilities sum to "
            f"{mass:.6g} > 1",
            hint=f"use a coarser value discretization (e.g. {min(1e-3, d * 10):g}); it stays "
            "pessimistic",
        )
    # eps grid: from 0 to where delta reaches the slack (beyond it no line adds more than the slack)
    probe = np.arange(0.0, 500.0 + EPSILON_MAX_QUANTUM / 2, EPSILON_MAX_QUANTUM)
    dp_probe = _profile(pld, probe, check=False)
    low = np.nonzero(dp_probe <= max(EPSILON_MAX_DELTA, tail))[0]
    e_hi = float(probe[low[0]]) if low.size else 500.0
    e_hi = min(max(e_hi, EPSILON_MAX_QUANTUM) + 2 * step, 500.0)
    eps = _epsilon_grid(e_hi, step)
    re = None
    if rd is not None:
        re = float(pld.get_epsilon_for_delta(rd))
        if math.isfinite(re) and 0.0 < re < eps[-1]:
            # the route's eps on the grid: the curve then dominates f_(eps, delta) of the route
            eps = np.unique(np.concatenate([eps, [re]]))
    deltas = _profile(pld, eps)
    # the FFT's round-off grows with the composition (the total mass is off by 3.5e-13 at T = 3000,
    # 2.7e-11 at T = 1e5, 2.2e-10 at T = 1e6): every delta gets the slack 1e-12 max(1, T / 100), fixed
    # in advance (so that it is the same number on every CPU), and at least 4 times the measured
    # total-mass error should the round-off ever exceed that
    slack = max(_slack_for(hist), 4.0 * max(abs(m - 1.0) for m in masses))
    rel_label = neighbors_label(rel)
    mech = "; then ".join(f"sigma={s:g}, q={q:g}, T={t}" for s, q, t in hist)
    label = f"DP-SGD trade-off curve from the PLD ({mech}; grid {d:g})"
    try:
        curve, chk = curve_from_profile(
            eps,
            deltas,
            neighbors=rel,
            slack=slack,
            label=label,
            mass_excess=excess,
            note=(
                f"certified lower bound on the trade-off curve [{rel_label}]: pessimistic PLD (connect-the-dots), "
                f"delta(eps) = max over the PLD's two directions, eps grid step {step:g}, slack {slack:.2g}"
            ),
        )
    except DomainError as exc:
        raise _InvalidPld(
            str(exc).split("\n")[0], hint=f"use a coarser value discretization (e.g. {d * 2:g})"
        ) from None
    # a Gaussian mechanism has no infinite privacy loss: delta(inf) = 0, so 1 - f(0) = 0 and the curve's
    # own 1 - f(0) (the slack plus delta at the grid's end, <= 2e-12) is numerical slack, not a floor
    # of the k-copy group curves (whose composition amplifies it: 0.976 at 5 copies of sigma = 0.6,
    # q = 0.02, T = 1000)
    curve = dataclasses.replace(curve, no_floor=True)
    opt = _optimistic_curve(
        pld_opt,
        eps,
        rel=rel,
        slack=slack,
        label=f"optimistic DP-SGD trade-off curve ({mech}; grid {d:g})",
    )
    eta_opt = float(max(0.0, _optimistic_delta(pld_opt, np.zeros(1))[0] - slack))
    return DpSgdCurve(
        curve,
        hist,
        rel,
        d,
        float(eps[-1]),
        step,
        int(eps.size),
        slack,
        excess,
        tail,
        float(min(1.0, deltas[0] + slack)),
        rd,
        re,
        chk,
        time.perf_counter() - t0,
        opt,
        eta_opt,
    )


def _slack_for(hist) -> float:
    """The delta slack fixed in advance: FLOAT_SLACK max(1, T / 100) for T steps in all."""
    return FLOAT_SLACK * max(1.0, sum(t for _, _, t in hist) / 100.0)


def _epsilon_grid(e_hi: float, step: float) -> np.ndarray:
    """0, step, 2 step, ... up to eps = 10, then relative steps of step/10 up to ``e_hi``.

    The envelope's gap to the true curve between two tangent slopes -e^eps is second order in
    their spacing; beyond eps = 10 the lines only shape the curve at alpha < e^-10 tau, where a
    relative spacing keeps the count of lines (and the time) bounded at weak privacy."""
    lin = np.arange(0.0, min(e_hi, 10.0) + step / 2, step)
    if e_hi <= 10.0:
        return lin
    n = int(math.ceil(math.log(e_hi / 10.0) / math.log1p(step / 10.0)))
    geo = 10.0 * np.exp(np.arange(1, n + 1) * math.log1p(step / 10.0))
    return np.unique(np.concatenate([lin, geo[geo < e_hi], [e_hi]]))


def _profile(pld, eps: np.ndarray, *, check: bool = True) -> np.ndarray:
    """delta(eps) = max over the PLD's directions, at sorted eps >= 0.

    Fast path: dp_accounting's own formula (delta = inf mass + sum_{l > eps} p_l - e^eps sum_{l > eps}
    p_l e^-l, its ``_get_delta_for_epsilon_vectorized``) evaluated with numpy suffix sums on the
    dense pmfs instead of that function's Python loop over every atom (about 30 s for 3 million
    atoms). It reads the PLD's internal pmfs, so (``check``) it is checked against the public
    ``get_delta_for_epsilon`` at the first eps and falls back to it on any mismatch or change of
    the library's internals.
    """
    try:
        out: np.ndarray | None = None
        for pm in _directions(pld):
            loss, sp, sq, _, _, inf = _tables(pm)
            i = np.searchsorted(loss, eps, side="right")  # first loss > eps
            d = inf + sp[i] - np.exp(eps) * sq[i]
            out = d if out is None else np.maximum(out, d)
        if out is None:  # no direction: the library's internals changed; fall back as below
            raise ValueError("the PLD has no direction")
        if (
            check
        ):  # one eps: dp_accounting's loop over the atoms takes seconds at large eps on long runs
            ref = float(pld.get_delta_for_epsilon(float(eps[0])))
            if not np.allclose(out[0], ref, rtol=1e-9, atol=1e-12):
                raise ValueError("fast profile disagrees with dp_accounting")
        return out
    except (AttributeError, TypeError, ValueError):
        return np.asarray(pld.get_delta_for_epsilon(eps), dtype=np.float64)


# --------------------------------------------------------------------------- caps from the curve
def curve_caps(
    cur: DpSgdCurve,
    *,
    copies: Sequence[int] = (1,),
    epsilon: float | None = None,
    delta: float | None = None,
) -> dict:
    """Memorization caps of a DP-SGD run from its curve ([MX] Thm. 4.1, Prop. A.1, Cor. 4.3), JSON-ready.

    For each k in ``copies``: the cap on RO and on LOO (None where the relation implies none,
    with the reason), each computed from the curve's group curves (f^(k), f^(2k)). Beside them
    the (eps, delta) route's eta = delta + (1 - delta) tanh(eps/2) ([MX] Lemma B.2) for the given
    ``epsilon`` and ``delta`` (default: the curve's own route), labelled looser.

    >>> from memclaim.privacy.pld import curve_caps, dpsgd_curve
    >>> cur = dpsgd_curve(noise_multiplier=1.0, sampling_rate=0.01, steps=100)  # doctest: +SKIP
    >>> caps = curve_caps(cur)  # doctest: +SKIP
    >>> round(caps["caps"][0]["LOO"], 4), round(caps["epsilon_delta_route"]["eta"], 4)  # doctest: +SKIP
    (0.0507, 0.3444)
    """
    copies = [validate.integer("copies", k, minimum=1) for k in copies]
    check_group_cost(cur.curve, max(copies))  # before any group curve is composed
    rows = []
    for k in copies:
        row: dict[str, Any] = {"copies": k}
        for fn in ("LOO", "RO"):
            c = memorization_cap(cur.curve, functional=fn, copies=k)
            row[fn] = c.value
            if (
                c.value is not None
            ):  # the same cap from the optimistic curve: the exact cap lies between
                row[f"{fn}_optimistic"] = memorization_cap(
                    cur.optimistic, functional=fn, copies=k
                ).value
            row[f"{fn}_theorem"] = c.theorem
            if c.reason:
                row[f"{fn}_reason"] = c.reason
        rows.append(row)
    e = cur.route_epsilon if epsilon is None else float(epsilon)
    d = cur.route_delta if delta is None else float(delta)
    route: dict[str, Any] | None = None
    if e is not None and d is not None and math.isfinite(e) and e > 0:
        route = {
            "epsilon": e,
            "delta": d,
            "eta": eta_approx(e, d),
            "note": "(eps, delta) route ([MX] Lemma B.2): valid, looser than the curve",
        }
    return {
        "source": f"trade-off curve of {cur.mechanism()}: {cur.grid()}",
        "neighbors": neighbors_label(cur.neighbors),
        "eta": cur.eta,
        "eta_optimistic": cur.eta_optimistic,
        "eta_accuracy": cur.eta_accuracy,
        "caps": rows,
        "epsilon_delta_route": route,
        "eta_ratio_route_over_curve": (route["eta"] / cur.eta if route and cur.eta > 0 else None),
        "check": cur.check.to_dict(),
    }
