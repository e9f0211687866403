"""The trade-off curve of DP-SGD from its privacy-loss distribution (issue 18; [MX] §3.1, §8.2).

DP-SGD is T Poisson-subsampled Gaussian releases (noise multiplier sigma, sampling rate q).
Turning it into (eps, delta) and then into eta = delta + (1 - delta) tanh(eps/2) ([MX] Lemma B.2)
is valid but loose (0.871 against a true advantage of about 0.241 at sigma = 1.1, q = 0.01,
T = 3000). [MX]'s caps and boundary are functionals of the trade-off curve f itself, so this
module computes f of the composed mechanism:

1. dp_accounting's privacy-loss distribution (PLD) of the composed mechanism, with the
   pessimistic ("connect the dots") discretization, gives the hockey-stick divergence
   delta(eps) >= the true one for every eps >= 0. For add/remove the PLD has two directions
   (remove: M(S) against M(S - x); add: M(S) against M(S + x)); ``get_delta_for_epsilon``
   returns their maximum, which bounds both orders of every neighbouring pair.
2. A mechanism that is (eps, delta(eps))-DP for every eps >= 0 is f-DP with
   f(alpha) = sup_eps max{0, 1 - delta(eps) - e^eps alpha, e^-eps (1 - delta(eps) - alpha)}
   (Dong, Roth & Su [6], Prop. 2.12; the convex-conjugate envelope). Any finite set of eps
   gives a curve below the sup, and a delta that is too large only lowers it, so the curve
   built here is never above the true trade-off curve: a certified lower bound, as far as the
   PLD's own pessimistic estimate is (the same trust every PLD accountant's epsilon needs), with
   an explicit slack of 1e-12 added to every delta for the FFT round-off (~1e-14 observed).
   eta(f) = delta(0) exactly (at eps = 0 the two branches meet at slope -1): the total
   variation between the two composed output laws.
3. Checks on every curve: the profile (delta in [0, 1], nonincreasing in eps, total mass of each
   PLD direction <= 1) and the curve (convex, nonincreasing, f(alpha) <= 1 - alpha, f(1) = 0).
   A curve that fails them is refused, never repaired. Seen: at grid 1e-5 (sigma = 1.1, q = 0.01,
   T = 3000) the add direction's probabilities sum to 1.0049 (float cancellation in the fine
   discretization; the excess grows like grid^-2), so its deltas are not trustworthy; memclaim
   refuses a mass excess above 1e-3 and reports the excess it accepted (4.4e-5 at the default
   grid 1e-4 there). The tests check both directions' deltas against an independent bracket.
4. The eps at which the (eps, delta) route is read is on the grid, so the curve is never below
   that route's f_{eps, delta} (up to the slack).

The curve is a :class:`~memclaim.privacy.tradeoff.TradeOff` of kind 'points' carrying 1 - f at
its vertices (computed as delta + e^eps alpha, without cancellation), so everything downstream
(eta, caps per functional, the k-copy group curve, 1 - f(kappa), alpha*(tau), entropy
thresholds) is computed from it by the ordinary code paths.

Pure math: numpy and dp_accounting (imported lazily), no torch, no I/O.
"""
from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from .. import validate
from ..errors import DomainError, require
from ..jsonutil import ResultMixin
from .caps import eta_approx, memorization_cap
from .tradeoff import TradeOff, approx, check_group_cost, neighbors_label, normalize_neighbors

__all__ = ["CurveCheck", "check_curve", "curve_from_profile", "DpSgdCurve", "dpsgd_curve", "curve_caps",
           "DEFAULT_PLD_GRID", "DEFAULT_EPSILON_STEP", "MAX_PLD_POINTS", "PLD_BYTES_PER_POINT", "PldTooLarge",
           "pld_points", "check_pld_size", "check_dpsgd_size"]

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
MAX_PLD_POINTS = 2 ** 25
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

    def __init__(self, message: str, *, hint: str, points: int, grid: float, limit: int,
                 grid_needed: float | None):
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
        pl = plm.GaussianPrivacyLoss(sigma, sensitivity=1.0, pessimistic_estimate=True,
                                     log_mass_truncation_bound=_LOG_MASS_TRUNCATION, sampling_prob=q,
                                     adjacency_type=adj)
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


def _too_large(points: int, *, d: float, limit: int, what: str, single: bool = False) -> PldTooLarge:
    # the PLD's length scales as 1/grid: the coarsest power of ten that fits; beyond a grid of 1
    # (a loss resolution of one nat) no accounting is worth having
    need = d * points / limit
    grid_needed = 10.0 ** math.ceil(math.log10(need)) if need > 0 else d
    gib = points * PLD_BYTES_PER_POINT / 2 ** 30
    why = ("memclaim composes in one command (about a minute)" if limit >= MAX_PLD_POINTS
           else "this machine's available memory holds")
    msg = (f"{what} would hold {points:.3g} points at the PLD grid {d:g} (about {gib:.3g} GiB), more than the "
           f"{limit:.3g} points ({limit * PLD_BYTES_PER_POINT / 2 ** 30:.2g} GiB) {why}")
    if grid_needed > 1.0:
        return PldTooLarge(msg, points=points, grid=d, limit=limit, grid_needed=None,
                           hint="the noise is far too small for the run to be private at all: use a realistic noise "
                                "multiplier (DP-SGD uses about 0.5 to 10)" + ("" if single else " or fewer steps"))
    return PldTooLarge(msg, points=points, grid=d, limit=limit, grid_needed=grid_needed,
                       hint=f"a coarser PLD grid, {grid_needed:g} (pessimistic: the bounds stay valid, only looser)"
                            + ("" if single else ", or fewer steps"))


def check_dpsgd_size(*, noise_multiplier: float, sampling_rate: float, steps: int, neighbors: str = "add-remove",
                     grid: float | None = None, max_points: int | None = None) -> None:
    """:func:`check_pld_size` for one DP-SGD run given as its settings (checked first): what
    ``dp account`` asks dp_accounting's PLD accountant to compose (``grid`` None: 1e-4).

    >>> check_dpsgd_size(noise_multiplier=1e-6, sampling_rate=0.01, steps=10)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    memclaim.privacy.pld.PldTooLarge: one step of DP-SGD (sigma = 1e-06, q = 0.01): its privacy-loss distribution would hold 5e+15 points at the PLD grid 0.0001 (about 3.73e+08 GiB), more than ...
      fix: the noise is far too small for the run to be private at all: use a realistic noise multiplier (DP-SGD uses about 0.5 to 10)
    """
    hist = _history(noise_multiplier, sampling_rate, steps, None)
    d = DEFAULT_PLD_GRID if grid is None else validate.positive("value_discretization_interval", grid)
    check_pld_size(hist, normalize_neighbors(neighbors), float(d), max_points)


def pld_points(*, noise_multiplier: float, sampling_rate: float, steps: int, neighbors: str = "add-remove",
               grid: float = DEFAULT_PLD_GRID) -> int:
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


def check_pld_size(hist: Sequence[tuple[float, float, int]], rel: str, d: float, max_points: int | None = None) -> None:
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
            raise _too_large(single, d=d, limit=limit, single=True,
                             what=f"one step of DP-SGD (sigma = {sigma:g}, q = {q:g}): its privacy-loss distribution")
        n = _composed_points(_single_pld(dpa, sigma, q, rel, d), steps) if steps > 1 else single
        total += n
        if total > limit:
            raise _too_large(total, d=d, limit=limit,
                             what=f"DP-SGD over {steps:,} steps (sigma = {sigma:g}, q = {q:g}): the composed "
                                  "privacy-loss distribution")


@functools.lru_cache(maxsize=2)
def _single_pld(dpa, sigma: float, q: float, rel: str, d: float):
    """One step's PLD (cached: the size check and the composition build the same one)."""
    rel_enum = (dpa.NeighboringRelation.ADD_OR_REMOVE_ONE if rel == "add-remove"
                else dpa.NeighboringRelation.REPLACE_ONE)
    return dpa.pld.privacy_loss_distribution.from_gaussian_mechanism(
        standard_deviation=sigma, sensitivity=1.0, pessimistic_estimate=True, value_discretization_interval=d,
        sampling_prob=q, use_connect_dots=True, neighboring_relation=rel_enum)


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
            out.append(f"not convex (a vertex lies {self.max_convexity_violation:.3g} above its neighbours' chord)")
        if not self.nonincreasing:
            out.append(f"rises by up to {self.max_increase:.3g}")
        if not self.below_one_minus_alpha:
            out.append(f"lies above 1 - alpha by up to {self.max_above_one_minus_alpha:.3g}")
        if not self.endpoints:
            out.append("f(0) > 1 or f(1) != 0")
        return out


def check_curve(alphas: Sequence[float] | np.ndarray, betas: Sequence[float] | np.ndarray, *, tol: float = CHECK_TOL) -> CurveCheck:
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
    return CurveCheck(bool(conv <= tol and inc <= tol and above <= tol and ends), conv <= tol, inc <= tol,
                      above <= tol, ends, conv, inc, above, tol, int(x.size))


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
    order = np.lexsort((-b, slopes))      # by slope, then larger intercept first
    keep = np.concatenate([[True], np.diff(slopes[order]) > 0])   # equal slopes: keep the largest intercept
    idx = order[keep]
    hi: list[int] = []
    hx: list[float] = []   # alpha where line j starts being the maximum

    def cross(i: int, j: int) -> float:   # alpha where flatter line j overtakes line i
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


def curve_from_profile(epsilons: Sequence[float] | np.ndarray, deltas: Sequence[float] | np.ndarray, *, neighbors: str, slack: float = FLOAT_SLACK, label: str = "",
                       note: str = "", tol: float = CHECK_TOL, mass_excess: float = 0.0) -> tuple[TradeOff, CurveCheck]:
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
        raise DomainError(f"a privacy profile needs matching epsilons and deltas, got {e.size} and {d.size}")
    if not (np.all(np.isfinite(e)) and np.all(np.isfinite(d))):
        raise DomainError("a privacy profile must be finite", hint="drop eps = inf (delta(inf) is the tail mass)")
    if e[0] != 0.0 or np.any(np.diff(e) <= 0):
        raise DomainError(f"the profile's epsilons must start at 0 and increase, got {e[:3].tolist()}...",
                          hint="eta(f) = delta(0) needs eps = 0 on the grid")
    # ---- the profile checks: every hockey-stick curve is in [0, 1] and nonincreasing in eps
    if np.min(d) < -tol:
        i = int(np.argmin(d))
        raise DomainError(f"invalid privacy profile: delta({e[i]:.6g}) = {d[i]:.3g} < 0",
                          hint="the PLD is numerically broken at this grid; use a coarser value discretization")
    if np.max(d) > 1.0 + tol + validate.nonneg("mass_excess", mass_excess):
        i = int(np.argmax(d))
        raise DomainError(f"invalid privacy profile: delta({e[i]:.6g}) = {d[i]:.6g} > 1",
                          hint="the PLD's probabilities sum above 1; use a coarser value discretization")
    rise = np.diff(d)
    if rise.size and np.max(rise) > tol:
        i = int(np.argmax(rise))
        raise DomainError(f"invalid privacy profile: delta rises from {d[i]:.6g} at eps = {e[i]:.6g} to "
                          f"{d[i + 1]:.6g} at eps = {e[i + 1]:.6g}",
                          hint="a hockey-stick divergence is nonincreasing in eps; use a coarser value discretization")
    s = validate.nonneg("slack", slack)
    du = np.clip(d + s, 0.0, 1.0)
    # ---- the lines: slope -e^eps (first branch), -e^-eps (second branch), and f = 0; each with its
    # intercept b in f and c = 1 - b in power 1 - f, both without cancellation:
    #   branch 1: f = 1 - delta - e^eps alpha,       1 - f = delta + e^eps alpha
    #   branch 2: f = e^-eps (1 - delta - alpha),    1 - f = (1 - e^-eps) + e^-eps (delta + alpha)
    E = np.exp(e)               # e <= ~50 in practice; an overflow to inf makes a vertical line at alpha = 0
    r = np.exp(-e)
    slopes = np.concatenate([-E, -r, [0.0]])
    b_all = np.concatenate([1.0 - du, r * (1.0 - du), [0.0]])
    c_all = np.concatenate([du, -np.expm1(-e) + r * du, [1.0]])
    steep_all = np.concatenate([np.ones(e.size, bool), np.zeros(e.size + 1, bool)])
    ok = np.isfinite(slopes)
    idx_all = np.arange(slopes.size)[ok]
    hm, hb, hc, hx, hidx = _upper_envelope(slopes[ok], b_all[ok], c_all[ok], steep_all[ok])
    src = idx_all[hidx]                           # original line index of each hull line
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
        raise DomainError("refusing an invalid trade-off curve: " + "; ".join(chk.failures()),
                          hint="the privacy profile is numerically inconsistent; use a coarser value discretization")
    pts = tuple((float(a), float(b)) for a, b in zip(verts, ys))
    # sup_eps f_{eps, delta(eps)} with both branches is symmetric: each f_{eps,delta} is ([MX] §3.1)
    return TradeOff("points", neighbors, points=pts, exact=False, note=note, powers=tuple(pw.tolist()),
                    label=label, symmetric=True), chk


# --------------------------------------------------------------------------- DP-SGD
@dataclass(frozen=True)
class DpSgdCurve(ResultMixin):
    """The trade-off curve of DP-SGD (Poisson-subsampled Gaussian, composed) from its PLD.

    ``curve`` is never above the true trade-off curve for the relation ``neighbors`` (the
    pessimistic PLD, a finite eps grid, and ``slack`` added to every delta all push it down);
    ``eta`` = delta(0) + slack = eta(curve) is the advantage (the total variation between the
    composed output laws). ``history`` lists (noise multiplier, sampling rate, steps) blocks.
    ``epsilon_delta`` is the (eps, delta) route from the same PLD at ``route_delta`` (eps =
    ``route_epsilon``), kept beside the curve as the looser alternative.
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
    reference: str = ("dp_accounting PLD (pessimistic, connect-the-dots), profile -> curve by [6] Prop. 2.12; "
                      "[MX] §3.1, §8.2")

    @property
    def noise_multiplier(self) -> float:
        return self.history[0][0]

    @property
    def sampling_rate(self) -> float:
        return self.history[0][1]

    @property
    def steps(self) -> int:
        return sum(h[2] for h in self.history)

    def mechanism(self) -> str:
        parts = [f"sigma = {s:g}, q = {q:g}, T = {t}" for s, q, t in self.history]
        return "DP-SGD (" + "; then ".join(parts) + ")"

    def grid(self) -> str:
        """What grid the curve was computed on (every row that uses the curve says this)."""
        extra = "" if self.route_epsilon is None else " incl. the route's eps"
        spacing = (f"step {self.epsilon_step:g}" if self.epsilon_max <= 10 else
                   f"step {self.epsilon_step:g} to 10, relative {self.epsilon_step / 10:g} above")
        return (f"PLD value grid {self.value_discretization_interval:g} (pessimistic), eps grid [0, "
                f"{self.epsilon_max:.4g}] {spacing} ({self.n_epsilons} points{extra}), delta slack "
                f"{self.slack:.2g}, PLD mass excess {self.mass_excess:.2g}")

    def epsilon_delta_curve(self) -> TradeOff | None:
        """f_{eps, delta} of the (eps, delta) route, for the same relation (looser)."""
        if self.route_epsilon is None or not math.isfinite(self.route_epsilon) or self.route_epsilon <= 0:
            return None
        return approx(self.route_epsilon, self.route_delta, neighbors=self.neighbors)

    def to_dict(self) -> dict:
        """JSON-ready summary; the curve itself as its description, vertex count and a sample."""
        d = super().to_dict()
        a = np.concatenate([[0.0], np.logspace(-12, -1, 12), np.linspace(0.2, 1.0, 9)])
        d["curve"] = {"description": self.curve.describe(), "n_vertices": len(self.curve.points),
                      "sample": [{"alpha": float(x), "f": float(self.curve(x)), "power": float(self.curve.power(x))}
                                 for x in a]}
        d["mechanism"] = self.mechanism()
        d["grid"] = self.grid()
        return d


def _pld_for(dpa, history, rel, d):
    pld = None
    for sigma, q, steps in history:
        one = _single_pld(dpa, sigma, q, rel, d)
        if steps > 1:
            one = one.self_compose(steps)
        pld = one if pld is None else pld.compose(one)
    return pld


def _history(noise_multiplier, sampling_rate, steps, history) -> tuple[tuple[float, float, int], ...]:
    if history is not None:
        if noise_multiplier is not None or sampling_rate is not None or steps is not None:
            raise DomainError("give either history=((sigma, q, steps), ...) or noise_multiplier/sampling_rate/steps")
        out = []
        for h in history:
            try:
                s, q, t = h
            except (TypeError, ValueError):
                raise DomainError(f"each history entry must be (noise multiplier, sampling rate, steps), got {h!r}") \
                    from None
            out.append((validate.positive("noise_multiplier", s), validate.in_unit("sampling_rate", q, lo_open=True),
                        validate.integer("steps", t, minimum=1)))
        if not out:
            raise DomainError("an empty DP-SGD history has no guarantee to compute")
        return tuple(out)
    if noise_multiplier is None or sampling_rate is None or steps is None:
        raise DomainError("DP-SGD needs noise_multiplier, sampling_rate and steps",
                          hint="e.g. noise_multiplier=1.1, sampling_rate=0.01, steps=3000")
    return ((validate.positive("noise_multiplier", noise_multiplier),
             validate.in_unit("sampling_rate", sampling_rate, lo_open=True),
             validate.integer("steps", steps, minimum=1)),)


def dpsgd_curve(*, noise_multiplier: float | None = None, sampling_rate: float | None = None,
                steps: int | None = None, history: Sequence | None = None,
                neighbors: str = "add-remove", value_discretization_interval: float | None = None,
                epsilon_step: float = DEFAULT_EPSILON_STEP, route_delta: float | None = 1e-5,
                max_points: int | None = None) -> DpSgdCurve:
    """The certified trade-off curve of DP-SGD ([MX] §3.1, §8.2; issue 18). See the module docstring.

    ``noise_multiplier`` sigma, ``sampling_rate`` q (Poisson), ``steps`` T, or a ``history`` of
    several such blocks (composed). ``neighbors``: 'add-remove' (Opacus's and DP-SGD's usual
    relation) or 'replace' (replace-one). ``value_discretization_interval``: the PLD's loss
    grid (coarser: faster and more pessimistic; too fine: float cancellation, refused). Left at
    None, it is 1e-4, and 1e-3 then 1e-2 if the finer PLD is refused as numerically invalid
    (long runs: the add direction's float error grows with the number of steps); the grid used
    is recorded in the result.
    ``route_delta``: also return eps at this delta from the same PLD (the (eps, delta) route).
    ``max_points``: the most points the PLD may hold (default :data:`MAX_PLD_POINTS`); settings
    that need more are refused before any is computed (:class:`PldTooLarge` names the grid that
    fits), not found out by running out of memory.
    Memoized: the same settings return the same curve.

    >>> from memclaim.privacy.pld import dpsgd_curve
    >>> cur = dpsgd_curve(noise_multiplier=1.0, sampling_rate=0.01, steps=100)  # doctest: +SKIP
    >>> round(cur.eta, 4), round(cur.route_epsilon, 3)  # doctest: +SKIP
    (0.0507, 0.718)
    """
    hist = _history(noise_multiplier, sampling_rate, steps, history)
    rel = normalize_neighbors(neighbors)
    step = validate.positive("epsilon_step", epsilon_step)
    rd = None if route_delta is None else validate.in_open_unit("route_delta", route_delta)
    if value_discretization_interval is not None:
        d = validate.positive("value_discretization_interval", value_discretization_interval)
        check_pld_size(hist, rel, float(d), max_points)
        return _dpsgd_curve(hist, rel, float(d), float(step), rd)
    for d in (DEFAULT_PLD_GRID, 1e-3, 1e-2):   # coarser stays pessimistic, only looser
        check_pld_size(hist, rel, d, max_points)  # too large is refused with the grid that fits
        try:
            return _dpsgd_curve(hist, rel, d, float(step), rd)
        except _InvalidPld:
            if d == 1e-2:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


class _InvalidPld(DomainError):
    """dp_accounting returned a numerically invalid PLD at this grid (a coarser one may be fine)."""


@functools.lru_cache(maxsize=64)
def _dpsgd_curve(hist, rel, d, step, rd) -> DpSgdCurve:
    t0 = time.perf_counter()
    dpa = require("dp_accounting", "dp")
    pld = _pld_for(dpa, hist, rel, d)
    # total mass of the heavier direction (delta at eps = -inf) and the tail mass (delta at +inf)
    mass = float(pld.get_delta_for_epsilon(-math.inf))
    tail = float(pld.get_delta_for_epsilon(math.inf))
    excess = max(0.0, mass - 1.0)
    if excess > MAX_MASS_ERROR:
        raise _InvalidPld(
            f"the privacy-loss distribution at grid {d:g} is numerically invalid: its probabilities sum to "
            f"{mass:.6g} > 1 (float cancellation in the discretization; seen at grid 1e-5 for sigma = 1.1, "
            f"q = 0.01, T = 3000)",
            hint=f"use a coarser value discretization (e.g. {min(1e-3, d * 10):g}); it stays pessimistic")
    # eps grid: from 0 to where delta reaches the tail floor (beyond it no line adds anything)
    floor = max(4.0 * tail, 1e-14)
    e_hi = float(pld.get_epsilon_for_delta(floor))
    if not math.isfinite(e_hi) or e_hi <= 0:
        e_hi = step
    e_hi = min(e_hi + 2 * step, 500.0)
    eps = _epsilon_grid(e_hi, step)
    re = None
    if rd is not None:
        re = float(pld.get_epsilon_for_delta(rd))
        if math.isfinite(re) and 0.0 < re < eps[-1]:
            # the route's eps on the grid: the curve then dominates f_(eps, delta) of the route
            eps = np.unique(np.concatenate([eps, [re]]))
    deltas = _profile(pld, eps)
    slack = FLOAT_SLACK
    rel_label = neighbors_label(rel)
    mech = "; then ".join(f"sigma={s:g}, q={q:g}, T={t}" for s, q, t in hist)
    label = f"DP-SGD trade-off curve from the PLD ({mech}; grid {d:g})"
    curve, chk = curve_from_profile(
        eps, deltas, neighbors=rel, slack=slack, label=label, mass_excess=excess,
        note=(f"certified lower bound on the trade-off curve [{rel_label}]: pessimistic PLD (dp_accounting), "
              f"delta(eps) = max over the PLD's two directions, eps grid step {step:g}, slack {slack:.2g}"))
    return DpSgdCurve(curve, hist, rel, d, float(eps[-1]), step, int(eps.size), slack, excess, tail,
                      float(min(1.0, deltas[0] + slack)), rd, re, chk, time.perf_counter() - t0)


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


def _profile(pld, eps: np.ndarray) -> np.ndarray:
    """delta(eps) = max over the PLD's directions, at sorted eps >= 0.

    Fast path: dp_accounting's own formula (delta = inf mass + sum_{l > eps} p_l - e^eps sum_{l > eps}
    p_l e^-l, its ``_get_delta_for_epsilon_vectorized``) evaluated with numpy suffix sums on the
    dense pmfs instead of that function's Python loop over every atom (about 30 s for 3 million
    atoms). It reads the PLD's internal pmfs, so it is checked against the public
    ``get_delta_for_epsilon`` at three eps and falls back to it on any mismatch or change of the
    library's internals.
    """
    try:
        pmfs = [pld._pmf_remove] if pld._symmetric else [pld._pmf_remove, pld._pmf_add]
        out = None
        for pm in pmfs:
            dn = pm.to_dense_pmf()
            p = np.asarray(dn._probs, dtype=np.float64)
            loss = (np.arange(p.size) + dn._lower_loss) * dn._discretization
            w = np.where(loss > 0, p * np.exp(-np.maximum(loss, 0.0)), 0.0)   # only l > eps >= 0 is summed
            upper = np.concatenate([np.cumsum(p[::-1])[::-1], [0.0]])
            lower = np.concatenate([np.cumsum(w[::-1])[::-1], [0.0]])
            i = np.searchsorted(loss, eps, side="right")                        # first loss > eps
            d = float(dn._infinity_mass) + upper[i] - np.exp(eps) * lower[i]
            out = d if out is None else np.maximum(out, d)
        probe = [0, eps.size // 2, eps.size - 1]
        ref = np.array([float(pld.get_delta_for_epsilon(float(eps[j]))) for j in probe])
        if not np.allclose(out[probe], ref, rtol=1e-9, atol=1e-12):
            raise ValueError("fast profile disagrees with dp_accounting")
        return out
    except (AttributeError, TypeError, ValueError):
        return np.asarray(pld.get_delta_for_epsilon(eps), dtype=np.float64)


# --------------------------------------------------------------------------- caps from the curve
def curve_caps(cur: DpSgdCurve, *, copies: Sequence[int] = (1,), epsilon: float | None = None,
               delta: float | None = None) -> dict:
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
        row = {"copies": k}
        for fn in ("LOO", "RO"):
            c = memorization_cap(cur.curve, functional=fn, copies=k)
            row[fn] = c.value
            row[f"{fn}_theorem"] = c.theorem
            if c.reason:
                row[f"{fn}_reason"] = c.reason
        rows.append(row)
    e = cur.route_epsilon if epsilon is None else float(epsilon)
    d = cur.route_delta if delta is None else float(delta)
    route = None
    if e is not None and d is not None and math.isfinite(e) and e > 0:
        route = {"epsilon": e, "delta": d, "eta": eta_approx(e, d),
                 "note": "(eps, delta) route ([MX] Lemma B.2): valid, looser than the curve"}
    return {"source": f"trade-off curve of {cur.mechanism()}: {cur.grid()}",
            "neighbors": neighbors_label(cur.neighbors), "eta": cur.eta, "caps": rows,
            "epsilon_delta_route": route,
            "eta_ratio_route_over_curve": (route["eta"] / cur.eta if route and cur.eta > 0 else None),
            "check": cur.check.to_dict()}
