"""Trade-off functions: the language of f-DP ([MX] §3.1, following Dong, Roth & Su [6]).

A trade-off function f maps a type-I error level alpha to the least achievable type-II error
when testing the output law on one dataset against its neighbour. A mechanism is f-DP for a
neighbouring relation if T(A(S), A(S')) >= f for all neighbours. Everything downstream (the
memorization caps of :mod:`.caps`, the extraction boundary of :mod:`.extraction`) is a
functional of f, so f is a value here: :class:`TradeOff`, which always carries the neighbouring
relation it was asserted for ('replace' = replace-one, 'add-remove').

Pure math: numpy and scipy only, no torch, no I/O. ``dp_accounting`` is imported lazily, only
by :func:`dpsgd_epsilon` (and by :mod:`.pld`, which builds DP-SGD's trade-off curve).

Numerics: besides ``f(alpha)`` each curve evaluates its *power* ``1 - f(alpha)`` directly
(:meth:`TradeOff.power`), because extraction bounds 1 - f(kappa) at baselines of 1e-20 would be
destroyed by the cancellation in 1 - (1 - e^eps kappa).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
from scipy import special, stats

from .. import validate
from ..errors import DomainError, require
from ..jsonutil import ResultMixin
from ..numeric import log1mexp

__all__ = [
    "NEIGHBORS",
    "normalize_neighbors",
    "neighbors_label",
    "f_eps",
    "f_eps_delta",
    "f_gdp",
    "TradeOff",
    "pure",
    "approx",
    "gdp",
    "from_points",
    "group",
    "GROUP_SECONDS_PER_COPY",
    "MAX_GROUP_SECONDS",
    "group_seconds",
    "check_group_cost",
    "compose",
    "group_conversion",
    "generalized_inverse",
    "SymmetryCheck",
    "is_symmetric",
    "symmetrized",
    "gdp_delta",
    "DpSgdAccounting",
    "dpsgd_epsilon",
]

# --------------------------------------------------------------------------- relations
NEIGHBORS = ("replace", "add-remove")
_NEIGHBOR_ALIASES = {
    "replace": "replace",
    "replace-one": "replace",
    "replace_one": "replace",
    "ro": "replace",
    "add-remove": "add-remove",
    "add/remove": "add-remove",
    "add_remove": "add-remove",
    "add-or-remove": "add-remove",
    "addremove": "add-remove",
}


def normalize_neighbors(value: str) -> str:
    """Canonical neighbouring relation: 'replace' (replace-one) or 'add-remove'.

    >>> normalize_neighbors("replace-one"), normalize_neighbors("add/remove")
    ('replace', 'add-remove')
    """
    key = str(value).strip().lower() if value is not None else ""
    if key not in _NEIGHBOR_ALIASES:
        raise DomainError(
            f"unknown neighbouring relation {value!r}",
            hint="pass neighbors='replace' (replace-one) or neighbors='add-remove'; every DP "
            "number depends on which one the guarantee was proved for",
        )
    return _NEIGHBOR_ALIASES[key]


def neighbors_label(value: str) -> str:
    """Human label: 'replace-one' or 'add/remove'.

    >>> neighbors_label("add-remove")
    'add/remove'
    """
    return {"replace": "replace-one", "add-remove": "add/remove"}[normalize_neighbors(value)]


# --------------------------------------------------------------------------- validation
def _epsilon(value, name: str = "epsilon") -> float:
    # The domain: epsilon must be finite and > 0 (epsilon = inf is "no guarantee").
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise DomainError(
            f"{name} must be a real number, got {value!r}",
            hint=f"pass {name} as a number, e.g. 1.0",
        )
    v = float(value)
    if not math.isfinite(v) or v <= 0:
        raise DomainError(
            f"{name} must be finite and > 0, got {value!r}",
            hint="epsilon = inf (no guarantee) bounds nothing, and epsilon <= 0 is not a DP parameter",
        )
    return v


def _delta(value) -> float:
    v = validate.finite("delta", value)
    if not 0.0 <= v < 1.0:
        raise DomainError(
            f"delta must lie in [0, 1), got {value!r}",
            hint="delta is a probability of failure; delta >= 1 guarantees nothing",
        )
    return v


def _mu(value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise DomainError(
            f"mu must be a real number, got {value!r}", hint="pass mu as a number, e.g. 1.0"
        )
    v = float(value)
    if not math.isfinite(v) or v <= 0:
        raise DomainError(
            f"mu (Gaussian DP) must be finite and > 0, got {value!r}",
            hint="mu = 1/sigma for one Gaussian release with sensitivity 1",
        )
    return v


def _alpha(alpha, name: str = "alpha"):
    """Validate a level (scalar or array) in [0, 1]; returns (float64 array, was_scalar)."""
    scalar = np.ndim(alpha) == 0
    if isinstance(alpha, (str, bytes)):
        raise DomainError(
            f"{name} must be a number or an array of numbers in [0, 1], got {alpha!r}"
        )
    try:
        a = np.asarray(alpha, dtype=np.float64)
    except (TypeError, ValueError):
        raise DomainError(
            f"{name} must be a number or an array of numbers in [0, 1], got {alpha!r}"
        ) from None
    bad = ~np.isfinite(a) | (a < 0.0) | (a > 1.0)
    if np.any(bad):
        first = float(a[bad].flat[0]) if a.ndim else float(a)
        raise DomainError(
            f"{name} must lie in [0, 1], got {first!r}",
            hint="a type-I error level is a probability",
        )
    return a, scalar


def _out(x: np.ndarray, scalar: bool):
    return float(x) if scalar else x


# --------------------------------------------------------------------------- overflow-free pieces
# e^eps overflows float64 above eps ~ 709.78 (math.exp raises there), and every closed form below
# multiplies it by a level in [0, 1]. These helpers keep each quantity finite (or a true +inf
# where the product itself exceeds the float range, which min(1, .) then clips), from eps = 1e-6
# to eps = 1e4 ([MX] §3.1 formulas, rewritten without forming e^eps alone).
_EXP_SAFE = 700.0


def exp_times(eps: float, a):
    """e^eps * a for a >= 0 (scalar or array), +inf only where the product exceeds float range.

    Below eps = 700 the direct product (one rounding); above it exp(eps + log a), with
    exp(eps + log 0) = 0 exactly.
    """
    x = np.asarray(a, dtype=np.float64)
    if eps <= _EXP_SAFE:
        out = math.exp(eps) * x
    else:
        with np.errstate(divide="ignore", over="ignore"):
            out = np.exp(eps + np.log(x))
    return float(out) if np.ndim(a) == 0 else out


def expit_neg(eps: float) -> float:
    """1/(e^eps + 1) = e^-eps/(1 + e^-eps), without overflow (scipy.special.expit(-eps))."""
    return float(special.expit(-eps))


def log_expit_neg(eps: float) -> float:
    """log(1/(e^eps + 1)) = -log(1 + e^eps), without overflow."""
    return -float(np.logaddexp(0.0, eps))


def log_expm1(x: float) -> float:
    """log(e^x - 1) for x > 0, without overflow for large x and without cancellation for small x."""
    if x > 1.0:
        return x + log1mexp(-x)
    return math.log(math.expm1(x))


# --------------------------------------------------------------------------- canonical curves
def f_eps(alpha: float | Sequence[float] | np.ndarray, *, epsilon: float) -> float | np.ndarray:
    """Pure epsilon-DP trade-off f_eps(a) = max{0, 1 - e^eps a, e^-eps (1 - a)} ([MX] §3.1; Lemma B.1).

    >>> round(f_eps(0.1, epsilon=1.0), 6), f_eps([0.0, 1.0], epsilon=1.0).tolist()
    (0.728172, [1.0, 0.0])
    """
    eps = _epsilon(epsilon)
    a, scalar = _alpha(alpha)
    out = np.maximum(0.0, np.maximum(1.0 - exp_times(eps, a), math.exp(-eps) * (1.0 - a)))
    return _out(out, scalar)


def f_eps_delta(
    alpha: float | Sequence[float] | np.ndarray, *, epsilon: float, delta: float
) -> float | np.ndarray:
    """(eps, delta)-DP trade-off max{0, 1 - delta - e^eps a, e^-eps (1 - delta - a)} ([MX] Lemma B.2).

    >>> f_eps_delta(0.0, epsilon=1.0, delta=0.1)
    0.9
    """
    eps = _epsilon(epsilon)
    d = _delta(delta)
    a, scalar = _alpha(alpha)
    out = np.maximum(0.0, np.maximum(1.0 - d - exp_times(eps, a), math.exp(-eps) * (1.0 - d - a)))
    return _out(out, scalar)


def f_gdp(alpha: float | Sequence[float] | np.ndarray, *, mu: float) -> float | np.ndarray:
    """mu-GDP trade-off G_mu(a) = Phi(Phi^-1(1 - a) - mu) ([MX] §3.1).

    >>> round(f_gdp(0.5, mu=1.0), 6)  # Phi(-1)
    0.158655
    """
    m = _mu(mu)
    a, scalar = _alpha(alpha)
    # norm.isf(a) = Phi^-1(1 - a) without forming 1 - a (exact at a = 0 and 1: +-inf).
    out = stats.norm.cdf(stats.norm.isf(a) - m)
    return _out(np.asarray(out, dtype=np.float64), scalar)


def _power_pure(a: np.ndarray, eps: float) -> np.ndarray:
    # 1 - f_eps(a) = min{1, e^eps a, 1 - e^-eps (1 - a)}  ([MX] App. C.2, "Special cases")
    return np.minimum(1.0, np.minimum(exp_times(eps, a), -math.expm1(-eps) + math.exp(-eps) * a))


def _power_approx(a: np.ndarray, eps: float, d: float) -> np.ndarray:
    # 1 - f_{eps,delta}(a) = min{1, delta + e^eps a, 1 - e^-eps (1 - delta - a)}  ([MX] App. C.2)
    return np.minimum(
        1.0, np.minimum(d + exp_times(eps, a), -math.expm1(-eps) + math.exp(-eps) * (d + a))
    )


def _power_gdp(a: np.ndarray, mu: float) -> np.ndarray:
    # 1 - G_mu(a) = Phi(Phi^-1(a) + mu)  ([MX] App. C.2): accurate for tiny a (no 1 - small).
    return np.asarray(stats.norm.cdf(stats.norm.ppf(a) + mu), dtype=np.float64)


# --------------------------------------------------------------------------- the value
_KINDS = ("pure", "approx", "gdp", "points", "group")


@dataclass(frozen=True)
class TradeOff(ResultMixin):
    """A trade-off function asserted for a neighbouring relation; callable on levels alpha.

    kind: 'pure' (f_eps), 'approx' (f_{eps,delta}), 'gdp' (G_mu), 'points' (piecewise-linear
    through the given vertices), 'group' (exact k-fold group curve 1 - (1 - base)^{o k} of a
    base curve). ``exact`` is False when the curve is a valid but loose lower bound of the true
    trade-off (e.g. pure composition by adding epsilons); ``note`` says why.
    Build it with :func:`pure`, :func:`approx`, :func:`gdp`, :func:`from_points`, :func:`group`.
    """

    kind: str
    neighbors: str
    epsilon: float | None = None
    delta: float | None = None
    mu: float | None = None
    points: tuple[tuple[float, float], ...] | None = None
    base: TradeOff | None = None
    k: int = 1
    exact: bool = True
    note: str = ""
    # points curves only: 1 - f at each vertex, computed without cancellation by whoever built the
    # curve (1 - f(alpha) at alpha ~ 1e-12 loses every digit when formed as 1 - 0.999...).
    powers: tuple[float, ...] | None = field(default=None, repr=False, compare=False)
    label: str = ""  # replaces the generic description of a points curve (e.g. its mechanism)
    symmetric: bool = (
        False  # points curves only: built symmetric (f = f^-1), e.g. from a privacy profile
    )
    # points curves only: the mechanism has no floor (its true 1 - f(0) is 0, e.g. DP-SGD's Gaussian
    # noise: no infinite privacy loss); the curve's own 1 - f(0) > 0 is numerical slack, not a floor
    no_floor: bool = False
    # TradeOff.pure(...), .approx, .gdp, .from_points: aliases of the module-level constructors,
    # attached below the constructors (not dataclass fields)
    pure: ClassVar[Callable[..., TradeOff]]
    approx: ClassVar[Callable[..., TradeOff]]
    gdp: ClassVar[Callable[..., TradeOff]]
    from_points: ClassVar[Callable[..., TradeOff]]

    # Typed (private) views of the field each kind carries (pure/approx: epsilon, approx:
    # delta, gdp: mu, points: points, group: base), for code that has already branched on ``kind``. The
    # constructors (pure, approx, gdp, from_points, group) always set them; the type checker cannot
    # see that link between ``kind`` and the optional fields, the assert makes it explicit.
    @property
    def _known_epsilon(self) -> float:
        assert self.epsilon is not None, f"a {self.kind} curve has no epsilon"
        return self.epsilon

    @property
    def _known_delta(self) -> float:
        assert self.delta is not None, f"a {self.kind} curve has no delta"
        return self.delta

    @property
    def _known_mu(self) -> float:
        assert self.mu is not None, f"a {self.kind} curve has no mu"
        return self.mu

    @property
    def _known_points(self) -> tuple[tuple[float, float], ...]:
        assert self.points is not None, f"a {self.kind} curve has no points"
        return self.points

    @property
    def _known_base(self) -> TradeOff:
        assert self.base is not None, f"a {self.kind} curve has no base curve"
        return self.base

    def __post_init__(self):
        if self.kind not in _KINDS:
            raise DomainError(f"unknown trade-off kind {self.kind!r}", hint=f"one of {_KINDS}")
        object.__setattr__(self, "neighbors", normalize_neighbors(self.neighbors))

    # ---------------------------------------------------------------- evaluation
    def __call__(self, alpha):
        """f(alpha), vectorized; a float for scalar input."""
        a, scalar = _alpha(alpha)
        if self.kind == "pure":
            out = np.maximum(
                0.0,
                np.maximum(1.0 - exp_times(self.epsilon, a), math.exp(-self.epsilon) * (1.0 - a)),
            )
        elif self.kind == "approx":
            e, d = self.epsilon, self.delta
            out = np.maximum(
                0.0, np.maximum(1.0 - d - exp_times(e, a), math.exp(-e) * (1.0 - d - a))
            )
        elif self.kind == "gdp":
            out = np.asarray(stats.norm.cdf(stats.norm.isf(a) - self.mu), dtype=np.float64)
        elif self.kind == "points":
            xs, ys = self._xy()
            out = np.interp(a, xs, ys)
        else:  # group
            out = 1.0 - self._power_array(a)
        return _out(np.asarray(out, dtype=np.float64), scalar)

    def power(self, alpha):
        """1 - f(alpha), computed without cancellation where a closed form allows ([MX] App. C.2)."""
        a, scalar = _alpha(alpha)
        return _out(self._power_array(a), scalar)

    def _power_array(self, a: np.ndarray) -> np.ndarray:
        if self.kind == "pure":
            return _power_pure(a, self._known_epsilon)
        if self.kind == "approx":
            return _power_approx(a, self._known_epsilon, self._known_delta)
        if self.kind == "gdp":
            return _power_gdp(a, self._known_mu)
        if self.kind == "points":
            xs, ys = self._xy()
            if self.powers is not None:
                return np.interp(a, xs, self._pw())
            return 1.0 - np.interp(a, xs, ys)
        # [MX] Cor. 4.3 / [6] Thm. 2.14: f^(k) = 1 - (1 - f)^{o k}: iterate the concave map 1 - f.
        x = np.asarray(a, dtype=np.float64)
        for _ in range(self.k):
            x = np.clip(self._known_base._power_array(x), 0.0, 1.0)
        return x

    def _xy(self):
        xy = self.__dict__.get("_xy_cache")
        if xy is None:  # vertices as arrays, once (a frozen dataclass still has an instance dict)
            pts = np.asarray(self.points, dtype=np.float64)
            xy = (pts[:, 0].copy(), pts[:, 1].copy())
            self.__dict__["_xy_cache"] = xy
        return xy

    def _pw(self) -> np.ndarray:
        pw = self.__dict__.get("_pw_cache")
        if pw is None:
            pw = np.asarray(self.powers, dtype=np.float64)
            self.__dict__["_pw_cache"] = pw
        return pw

    def vertex_powers(self) -> np.ndarray:
        """1 - f at the vertices of a points curve (the stored accurate values when given)."""
        xs, ys = self._xy()
        return self._pw() if self.powers is not None else 1.0 - ys

    # ---------------------------------------------------------------- description
    @property
    def parameters(self) -> dict:
        if self.kind == "pure":
            return {"epsilon": self.epsilon}
        if self.kind == "approx":
            return {"epsilon": self.epsilon, "delta": self.delta}
        if self.kind == "gdp":
            return {"mu": self.mu}
        if self.kind == "points":
            return {"n_points": len(self._known_points)}
        return {"k": self.k, **{f"base_{k}": v for k, v in self._known_base.parameters.items()}}

    def describe(self) -> str:
        """e.g. 'f_eps (eps=1) [pure eps-DP, add/remove]'."""
        rel = neighbors_label(self.neighbors)
        if self.kind == "pure":
            s = f"f_eps (eps={self.epsilon:g}) [pure eps-DP, {rel}]"
        elif self.kind == "approx":
            s = f"f_eps,delta (eps={self.epsilon:g}, delta={self.delta:g}) [approximate DP, {rel}]"
        elif self.kind == "gdp":
            s = f"G_mu (mu={self.mu:g}) [Gaussian DP, {rel}]"
        elif self.kind == "points":
            s = (
                f"{self.label} [{rel}]"
                if self.label
                else f"piecewise-linear trade-off curve ({len(self._known_points)} vertices) [{rel}]"
            )
        else:
            inner = self._known_base.describe().split(" [")[0]
            s = f"{self.k}-fold group curve 1-(1-f)^{self.k} of {inner} [{rel}]"
        if not self.exact:
            # a labelled points curve is a mechanism's certified lower bound (e.g. DP-SGD from its PLD),
            # or, labelled optimistic, the other end of its certified bracket (never below the true curve)
            if self.kind == "points" and "optimistic" in self.label:
                s += " (optimistic: never below the true curve; a bracket's end, not a guarantee)"
            else:
                s += (
                    " (certified lower bound)"
                    if (self.kind == "points" and self.label)
                    else " (loose)"
                )
        return s

    def __str__(self) -> str:  # pragma: no cover - trivial
        return self.describe()

    @property
    def symmetric_by_construction(self) -> bool:
        """The three canonical curves are symmetric ([MX] §3.1); so is a group curve of one."""
        if self.kind in ("pure", "approx", "gdp"):
            return True
        if self.kind == "group":
            return self._known_base.symmetric_by_construction
        if self.kind == "points":
            return self.symmetric
        return False


# --------------------------------------------------------------------------- constructors
def pure(epsilon: float, *, neighbors: str) -> TradeOff:
    """Pure epsilon-DP, f_eps, for the neighbouring relation it was proved for.

    >>> f = pure(1.0, neighbors="add-remove")
    >>> f.kind, round(float(f(0.1)), 6)
    ('pure', 0.728172)
    """
    return TradeOff("pure", neighbors, epsilon=_epsilon(epsilon))


def approx(epsilon: float, delta: float, *, neighbors: str) -> TradeOff:
    """(epsilon, delta)-DP, f_{eps,delta}; delta = 0 gives the pure curve (kind 'pure').

    >>> approx(1.0, 1e-5, neighbors="replace").kind, approx(1.0, 0.0, neighbors="replace").kind
    ('approx', 'pure')
    """
    e, d = _epsilon(epsilon), _delta(delta)
    if d == 0.0:
        return TradeOff("pure", neighbors, epsilon=e)
    return TradeOff("approx", neighbors, epsilon=e, delta=d)


def gdp(mu: float, *, neighbors: str) -> TradeOff:
    """mu-Gaussian DP, G_mu.

    >>> round(float(gdp(1.0, neighbors="replace")(0.5)), 6)
    0.158655
    """
    return TradeOff("gdp", neighbors, mu=_mu(mu))


def _lower_convex_hull(x: np.ndarray, y: np.ndarray):
    # Andrew's monotone chain, lower hull only. scipy.spatial.ConvexHull needs >= 3 non-collinear
    # points and returns both hulls; this 1-D lower envelope is simpler to do directly.
    hx: list[float] = []
    hy: list[float] = []
    for xi, yi in zip(x.tolist(), y.tolist()):
        while (
            len(hx) >= 2
            and (hx[-1] - hx[-2]) * (yi - hy[-2]) - (hy[-1] - hy[-2]) * (xi - hx[-2]) <= 0
        ):
            hx.pop()
            hy.pop()
        hx.append(xi)
        hy.append(yi)
    return np.asarray(hx), np.asarray(hy)


def from_points(
    alphas: Sequence[float],
    betas: Sequence[float],
    *,
    neighbors: str,
    convexify: bool = False,
    tol: float = 1e-12,
) -> TradeOff:
    """A trade-off curve given by vertices (alpha_i, f(alpha_i)), linearly interpolated.

    Must include alpha = 0 and alpha = 1 with f(1) = 0, and be a trade-off function: convex,
    nonincreasing, f(alpha) <= 1 - alpha ([MX] App. B conventions). ``convexify=True`` replaces
    the points by their lower convex hull, which is still a valid (smaller) lower bound on the
    true trade-off; otherwise a non-convex input is an error.

    >>> f = from_points([0.0, 0.5, 1.0], [1.0, 0.2, 0.0], neighbors="replace")
    >>> round(float(f(0.25)), 6)
    0.6
    """
    try:
        x = np.asarray(alphas, dtype=np.float64).ravel()
        y = np.asarray(betas, dtype=np.float64).ravel()
    except (TypeError, ValueError):
        raise DomainError("trade-off points must be numbers") from None
    if x.shape != y.shape or x.size < 2:
        raise DomainError(
            f"need matching alphas and betas with at least 2 points, got {x.size} and {y.size}"
        )
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise DomainError("trade-off points must be finite")
    order = np.argsort(x, kind="stable")
    x, y = x[order], y[order]
    if np.any(np.diff(x) <= 0):
        raise DomainError(
            f"alphas must be distinct, got duplicates near {float(x[np.argmin(np.diff(x))])!r}"
        )
    if x[0] != 0.0 or x[-1] != 1.0:
        raise DomainError(
            f"the curve must be given on all of [0, 1]: alphas span [{float(x[0])!r}, {float(x[-1])!r}]",
            hint="include alpha = 0 and alpha = 1 (with f(1) = 0)",
        )
    if np.any((y < -tol) | (y > 1 + tol)):
        i = int(np.argmax((y < -tol) | (y > 1 + tol)))
        raise DomainError(
            f"trade-off values must lie in [0, 1], got f({float(x[i])!r}) = {float(y[i])!r}"
        )
    y = np.clip(y, 0.0, 1.0)
    if y[-1] > tol:
        raise DomainError(
            f"a trade-off function has f(1) = 0, got f(1) = {float(y[-1])!r}",
            hint="at level 1 the test that always rejects has type-II error 0",
        )
    y[-1] = 0.0
    over = y - (1.0 - x)
    if np.any(over > tol):
        i = int(np.argmax(over))
        raise DomainError(
            f"a trade-off function satisfies f(alpha) <= 1 - alpha, got f({float(x[i])!r}) = {float(y[i])!r}",
            hint="the randomized test that ignores the data has type-I + type-II error = 1, so no curve lies above 1 - alpha",
        )
    if convexify:
        x, y = _lower_convex_hull(x, y)
    slopes = np.diff(y) / np.diff(x)
    if np.any(slopes > tol):
        i = int(np.argmax(slopes))
        raise DomainError(
            f"a trade-off function is nonincreasing, but it rises after alpha = {float(x[i])!r}"
        )
    if np.any(np.diff(slopes) < -1e-9 * (1 + np.abs(slopes[:-1]))):
        i = int(np.argmax(-np.diff(slopes)))
        raise DomainError(
            f"a trade-off function is convex, but the points bend down at alpha = {float(x[i + 1])!r}",
            hint="pass convexify=True to use the lower convex hull (still a valid lower bound)",
        )
    pts = tuple((float(a), float(b)) for a, b in zip(x, y))
    return TradeOff("points", neighbors, points=pts)


def group(f: TradeOff, k: int) -> TradeOff:
    """Exact k-fold group trade-off f^(k) = 1 - (1 - f)^{o k} ([MX] Cor. 4.3; [6] Thm. 2.14).

    For mu-GDP this is G_{k mu} exactly (returned as a 'gdp' curve). For pure DP it is *not*
    f_{k eps}: the staircase of [MX] Lemma 4.4 lies strictly above the naive curve for k >= 2.
    The relation is unchanged: a group of k means k steps of the same neighbouring relation.

    >>> from memclaim.privacy.tradeoff import group, pure
    >>> g = group(pure(1.0, neighbors="replace-one"), 2)
    >>> g.kind, round(float(g(0.05)), 4)
    ('group', 0.6305)
    """
    k = validate.integer("k (group size)", k, minimum=1)
    if k == 1:
        return f
    if f.kind == "gdp":
        # G_mu^(k) = G_{k mu}: (1 - G_mu)(a) = Phi(Phi^-1(a) + mu) iterated k times.
        return TradeOff(
            "gdp",
            f.neighbors,
            mu=k * f._known_mu,
            exact=f.exact,
            note=f"group of {k}: G_mu^(k) = G_(k mu) exactly [6]",
        )
    if f.kind == "group":
        return TradeOff("group", f.neighbors, base=f.base, k=f.k * k, exact=f.exact, note=f.note)
    if f.kind == "points":
        return _group_points(f, k)
    return TradeOff("group", f.neighbors, base=f, k=k, exact=f.exact, note=f.note)


#: seconds per copy k of everything `dp bounds` computes from a k-fold group curve (caps,
#: extraction rows), by the base curve's kind, measured at k = 1000 on one core of the
#: development machine (AMD EPYC): a pure curve's group steps are closed forms and an orbit of k
#: points, an (eps, delta) curve's are evaluated by composing 1 - f k times at each of ~175
#: points, a piecewise-linear (DP-SGD) curve's by composing its vertices k times; G_mu^(k) is
#: G_(k mu), one closed form whatever k.
GROUP_SECONDS_PER_COPY = {"pure": 3e-4, "approx": 6e-3, "points": 2.5e-2, "gdp": 0.0}
#: the longest memclaim lets one command spend on group curves before it refuses the --copies
#: (issue 25: --copies 1000000000 still ran at 120 s, and would have run for years)
MAX_GROUP_SECONDS = 60.0


def _base_kind(f: TradeOff) -> str:
    return _base_kind(f._known_base) if f.kind == "group" else f.kind


def group_seconds(f: TradeOff, k: int) -> float:
    """About how long the k-fold group computations of a bounds summary of ``f`` take
    (:data:`GROUP_SECONDS_PER_COPY`, linear in k): the estimate checked before the work.

    >>> group_seconds(pure(1.0, neighbors="replace-one"), 1000)  # doctest: +ELLIPSIS
    0.3...
    """
    k = validate.integer("copies", k, minimum=1)
    return (
        0.0
        if k == 1
        else GROUP_SECONDS_PER_COPY.get(_base_kind(f), GROUP_SECONDS_PER_COPY["points"]) * k
    )


def _duration(seconds: float) -> str:
    for unit, s in (("years", 365.25 * 86400), ("days", 86400), ("hours", 3600), ("minutes", 60)):
        if seconds >= 2 * s:
            return f"{seconds / s:,.3g} {unit}"
    return f"{seconds:.3g} s"


def check_group_cost(
    f: TradeOff | str,
    k: int,
    *,
    option: str = "--copies",
    work: Callable[[int], float] | None = None,
    limit: float = MAX_GROUP_SECONDS,
) -> None:
    """Refuse, before any group curve is computed, ``k`` copies whose group computations would
    take more than ``limit`` seconds (:func:`group_seconds`), naming the largest k that fits.
    ``f``: the guarantee's curve, or its kind ('points' for a DP-SGD curve not computed yet);
    ``work``: k -> the copies computed in all when a command computes several group curves
    (a figure's staircase 1..k: k (k + 1) / 2).

    >>> check_group_cost(pure(1.0, neighbors="replace-one"), 10 ** 9)
    Traceback (most recent call last):
    memclaim.errors.DomainError: --copies 1,000,000,000: the 1,000,000,000-fold group curves of f_eps (eps=1) [pure eps-DP, replace-one] are computed by composing the curve k times (about 0.3 ms per copy), about 3.47 days in all, more than the 60 s one command may take
      fix: --copies 200,000 or fewer (the caps only grow with the copies: the cap for fewer copies is a lower bound, not a cap, for more)
    """
    k = validate.integer(option.lstrip("-"), k, minimum=1)
    kind = f if isinstance(f, str) else _base_kind(f)
    per = GROUP_SECONDS_PER_COPY.get(kind, GROUP_SECONDS_PER_COPY["points"])
    work = work or (lambda j: j)
    total = per * work(k)
    if k == 1 or total <= limit:
        return
    lo, hi = 1, k  # the largest k whose work fits (work grows with k)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if per * work(mid) <= limit else (lo, mid - 1)
    fix = (
        f"{option} {lo:,} or fewer (the caps only grow with the copies: the cap for fewer copies is a lower "
        "bound, not a cap, for more)"
    )
    what = f if isinstance(f, str) else f.describe()
    if what == "points":
        what = "the DP-SGD run's trade-off curve"
    if work is not None and work(k) != k:
        what = f"{what}, for every k up to {k:,},"
    raise DomainError(
        f"{option} {k:,}: the {k:,}-fold group curves of {what} are computed by composing "
        f"the curve k times (about {per * 1e3:.2g} ms per copy), about {_duration(total)} in all, more "
        f"than the {limit:g} s one command may take",
        hint=fix,
    )


def _group_points(f: TradeOff, k: int) -> TradeOff:
    """f^(k) = 1 - p^{o k}, p = 1 - f, of a piecewise-linear curve, exactly, as a points curve.

    p is concave, nondecreasing and piecewise linear, so p^{o k} is too; its kinks are the kinks
    of p and the preimages under p of the kinks of p^{o (k-1)} (the chain rule for piecewise
    linear maps). Collecting those vertices and evaluating p^{o k} at them (k interpolations,
    exact between vertices) gives the group curve without any grid. p is strictly increasing
    where it is below 1 (concave and nondecreasing), so the preimages are unique there.
    Hand-written: no library composes piecewise-linear trade-off curves.
    """
    xs, _ = f._xy()
    ps = f.vertex_powers()
    below = ps < 1.0  # the strictly increasing part of p
    if below.sum() < 2:  # p = 1 almost everywhere: f^(k) = f = 0 beyond alpha = 0
        return f
    xb, pb = xs[below], ps[below]
    last = int(np.nonzero(below)[0][-1])
    if last + 1 < len(xs):  # keep the segment that reaches p = 1
        xb, pb = np.append(xb, xs[last + 1]), np.append(pb, ps[last + 1])
    verts = xs.copy()
    for _ in range(k - 1):
        inside = (verts >= pb[0]) & (verts <= pb[-1])
        pre = np.interp(verts[inside], pb, xb)  # p^{-1}(v) for the kinks v of p^{o j}
        verts = np.unique(np.concatenate([xs, pre, [0.0, 1.0]]))
    q = verts.copy()
    for _ in range(k):
        q = np.clip(np.interp(q, xs, ps), 0.0, 1.0)  # p^{o k} at every vertex
    ys = np.clip(1.0 - q, 0.0, 1.0)
    ys[-1] = 0.0
    pts = tuple((float(a), float(b)) for a, b in zip(verts, ys))
    label = f"{k}-fold group curve 1-(1-f)^{k} of {f.label or 'a piecewise-linear curve'}"
    # the group curve of a symmetric curve is symmetric ([6] Thm. 2.14: f^(k) is the trade-off of a
    # k-fold chain of the same symmetric pair)
    return TradeOff(
        "points",
        f.neighbors,
        points=pts,
        exact=f.exact,
        note=f"{k}-fold group curve of a points curve, exact ([MX] Cor. 4.3)",
        powers=tuple(q.tolist()),
        label=label,
        k=k,
        symmetric=f.symmetric,
        no_floor=f.no_floor,
    )


def group_conversion(*, epsilon: float, delta: float, k: int) -> tuple[float, float]:
    """(eps, delta) -> (k eps, delta_k) with delta_k = delta (e^{k eps} - 1)/(e^eps - 1) ([MX] §8.2).

    A valid but lossy conversion: eta(f_{eps,delta}^(k)) <= eta(f_{k eps, delta_k}). Use
    :func:`group` for the exact group curve. delta_k may exceed 1 (then the guarantee is void).

    >>> ke, dk = group_conversion(epsilon=1.0, delta=1e-5, k=2)
    >>> ke, round(dk / 1e-5, 6)  # delta (e^2 - 1)/(e - 1) = delta (e + 1)
    (2.0, 3.718282)
    """
    e, d = _epsilon(epsilon), _delta(delta)
    k = validate.integer("k (group size)", k, minimum=1)
    if k == 1 or d == 0.0:
        return k * e, d
    # (e^{k eps} - 1)/(e^eps - 1) = sum_{j<k} e^{j eps}, in log space (expm1 keeps small eps
    # accurate; the log form keeps large eps finite); delta_k = inf where it exceeds float range.
    log_dk = math.log(d) + log_expm1(k * e) - log_expm1(e)
    return k * e, (math.exp(log_dk) if log_dk < 709.0 else math.inf)


def group_conversion_curve(f: TradeOff, k: int) -> TradeOff:
    """The (k eps, delta_k) curve of :func:`group_conversion` as a TradeOff (labelled loose)."""
    if f.kind not in ("pure", "approx"):
        raise DomainError(
            f"the (eps, delta) group conversion needs a pure or approximate DP curve, got {f.kind!r}"
        )
    d = f.delta or 0.0
    ke, dk = group_conversion(epsilon=f._known_epsilon, delta=d, k=k)
    if dk >= 1.0:
        raise DomainError(
            f"the group conversion gives delta_k = {dk!r} >= 1 for k = {k}: no guarantee",
            hint="use the exact group curve group(f, k) instead",
        )
    g = approx(ke, dk, neighbors=f.neighbors)
    return TradeOff(
        g.kind,
        g.neighbors,
        epsilon=g.epsilon,
        delta=g.delta,
        exact=False,
        note=f"(eps, delta) -> (k eps, delta_k) group conversion, k = {k} ([MX] §8.2): valid, lossy",
    )


# TradeOff.pure(...), TradeOff.approx(...), ... as aliases of the module-level constructors
TradeOff.pure = staticmethod(pure)
TradeOff.approx = staticmethod(approx)
TradeOff.gdp = staticmethod(gdp)
TradeOff.from_points = staticmethod(from_points)


# --------------------------------------------------------------------------- composition
def _np_curve(p: np.ndarray, q: np.ndarray):
    """Exact trade-off T(P, Q) of two laws on a finite set (Neyman-Pearson with randomization).

    Atoms are rejected in decreasing likelihood ratio q/p; the vertices are
    (alpha, beta) = (P(rejected), 1 - Q(rejected)). ([MX] App. C.3 uses the same construction.)
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        llr = np.where(p > 0, np.log(q) - np.log(p), np.inf)
    order = np.argsort(-llr, kind="stable")
    a = np.concatenate([[0.0], np.cumsum(p[order])])
    b = 1.0 - np.concatenate([[0.0], np.cumsum(q[order])])
    a = np.clip(a / a[-1], 0.0, 1.0)
    b = np.clip(b, 0.0, 1.0)
    b[-1] = 0.0
    # merge duplicate alphas (atoms with p = 0): keep the smallest beta at each alpha
    keep = np.concatenate([np.diff(a) > 0, [True]])
    return a[keep], b[keep]


def _pure_composition_points(epsilons: Sequence[float], *, max_atoms: int = 2_000_000):
    # Pure eps-DP is attained by randomized response ([MX] Lemma B.1); f_e1 (x) ... (x) f_er is the
    # trade-off of the product of RR pairs ([6] Def. 3.1). Equal epsilons group into a binomial.
    groups: dict[float, int] = {}
    for e in epsilons:
        groups[e] = groups.get(e, 0) + 1
    n_atoms = 1
    for r in groups.values():
        n_atoms *= r + 1
    if n_atoms > max_atoms:
        raise DomainError(
            f"exact pure composition would need {n_atoms} atoms",
            hint="use exact=False (eps add up, loose) or a PLD accountant",
        )
    logp = np.zeros(1)
    logq = np.zeros(1)
    for e, r in groups.items():
        j = np.arange(r + 1)  # number of coordinates in the outcome favoured by Q
        lp_hi = -math.log1p(math.exp(-e))  # log(e^e / (1 + e^e))
        lp_lo = log_expit_neg(e)  # log(1 / (1 + e^e)), finite for any eps
        lc = stats.binom.logpmf(j, r, 0.5) + r * math.log(2.0)  # log C(r, j)
        gp = lc + j * lp_lo + (r - j) * lp_hi
        gq = lc + j * lp_hi + (r - j) * lp_lo
        logp = (logp[:, None] + gp[None, :]).ravel()
        logq = (logq[:, None] + gq[None, :]).ravel()
    return _np_curve(np.exp(logp), np.exp(logq))


def compose(*curves: TradeOff, exact: bool = False) -> TradeOff:
    """Trade-off of the joint release of several mechanisms ([MX] Prop. 7.1(c); [6] §3).

    - all mu-GDP: G_mu1 (x) ... = G_sqrt(sum mu_i^2), exact ([6] Cor. 3.3).
    - all pure: exact=False gives f_{sum eps}, a valid but loose lower bound of the exact
      f_e1 (x) f_e2 (x) ...; exact=True computes that exact composition as a points curve.
    - pure / approximate mixes: basic composition (sum eps, sum delta), valid and loose.
    Anything else (curves given as points, DP-SGD): for DP-SGD use
    :func:`memclaim.privacy.pld.dpsgd_curve` (the composed mechanism's trade-off curve from its
    privacy-loss distribution) or :func:`dpsgd_epsilon` (dp_accounting's accountants compose
    mechanisms, not arbitrary curves).
    All curves must be asserted for the same neighbouring relation.

    >>> from memclaim.privacy.tradeoff import compose, gdp
    >>> round(compose(gdp(0.6, neighbors="replace-one"), gdp(0.8, neighbors="replace-one")).mu, 6)  # sqrt(0.36 + 0.64)
    1.0
    """
    if not curves:
        raise DomainError("compose() needs at least one trade-off curve")
    for c in curves:
        if not isinstance(c, TradeOff):
            raise DomainError(f"compose() takes TradeOff values, got {type(c).__name__}")
    rels = {c.neighbors for c in curves}
    if len(rels) > 1:
        raise DomainError(
            f"cannot compose guarantees for different neighbouring relations {sorted(rels)}",
            hint="convert first (an add/remove guarantee gives replace-one via the group curve f^(2))",
        )
    rel = curves[0].neighbors
    if len(curves) == 1:
        return curves[0]
    kinds = {c.kind for c in curves}
    if kinds == {"gdp"}:
        mu = math.sqrt(math.fsum(c._known_mu**2 for c in curves))
        return TradeOff(
            "gdp",
            rel,
            mu=mu,
            exact=all(c.exact for c in curves),
            note=f"composition of {len(curves)} GDP releases: mu's add in quadrature (exact) [6]",
        )
    if kinds == {"pure"}:
        eps = [c._known_epsilon for c in curves]
        if exact:
            xs, ys = _pure_composition_points(eps)
            pts = tuple((float(a), float(b)) for a, b in zip(xs, ys))
            return TradeOff(
                "points",
                rel,
                points=pts,
                exact=all(c.exact for c in curves),
                note=f"exact composition of pure eps-DP with eps = {eps} (product of randomized responses)",
            )
        return TradeOff(
            "pure",
            rel,
            epsilon=math.fsum(eps),
            exact=False,
            note=f"pure composition: eps's add ({' + '.join(f'{e:g}' for e in eps)}); "
            "a valid but loose lower bound on the exact f_e1 (x) f_e2 (x) ...",
        )
    if kinds <= {"pure", "approx"}:
        e = math.fsum(c._known_epsilon for c in curves)
        d = math.fsum((c.delta or 0.0) for c in curves)
        if d >= 1.0:
            raise DomainError(
                f"basic composition gives delta = {d!r} >= 1: no guarantee",
                hint="use a PLD accountant (dpsgd_epsilon) for tight composition",
            )
        g = approx(e, d, neighbors=rel)
        return TradeOff(
            g.kind,
            rel,
            epsilon=g.epsilon,
            delta=g.delta,
            exact=False,
            note="basic composition (eps's and delta's add): valid, loose",
        )
    raise DomainError(
        f"no composition rule for curves of kinds {sorted(kinds)}",
        hint="compose mechanisms with dp_accounting (memclaim.privacy.pld.dpsgd_curve for DP-SGD's trade-off "
        "curve), or pass GDP/pure/approx curves",
    )


# --------------------------------------------------------------------------- symmetry
def generalized_inverse(f: TradeOff, y: float | Sequence[float] | np.ndarray) -> float | np.ndarray:
    """f^-1(y) = inf{x in [0, 1] : f(x) <= y} ([MX] App. C), vectorized bisection.

    Bisection because f is an arbitrary monotone callable here (scipy's root finders need a
    sign change per point and are not vectorized); 64 halvings reach float resolution.

    >>> round(float(generalized_inverse(pure(1.0, neighbors="replace"), 0.5)), 6)  # 1 - e a = 0.5
    0.18394
    """
    yy, scalar = _alpha(y, "y")
    lo = np.zeros_like(yy)
    hi = np.ones_like(yy)
    at0 = np.asarray(f(np.zeros_like(yy))) <= yy
    for _ in range(64):
        mid = 0.5 * (lo + hi)
        ok = np.asarray(f(mid)) <= yy
        hi = np.where(ok, mid, hi)
        lo = np.where(ok, lo, mid)
    out = np.where(at0, 0.0, hi)
    return _out(out, scalar)


@dataclass(frozen=True)
class SymmetryCheck(ResultMixin):
    """Whether f = f^-1 (generalized inverse) on a grid; ``max_gap`` at ``worst_alpha``."""

    symmetric: bool
    max_gap: float
    worst_alpha: float
    tolerance: float
    curve: str


def is_symmetric(f: TradeOff, *, grid: int = 2001, tol: float = 1e-9) -> SymmetryCheck:
    """Check f = f^-1 ([MX] §3.1: WLOG f symmetric) on a grid plus the curve's own vertices.

    >>> from memclaim.privacy.tradeoff import from_points, is_symmetric, pure
    >>> is_symmetric(pure(1.0, neighbors="replace-one")).symmetric
    True
    >>> is_symmetric(from_points([0.0, 0.5, 1.0], [1.0, 0.1, 0.0], neighbors="replace-one")).symmetric
    False
    """
    grid = validate.integer("grid", grid, minimum=3)
    xs = np.linspace(0.0, 1.0, grid)
    if f.kind == "points":
        px, py = f._xy()
        xs = np.unique(np.concatenate([xs, px, py]))
    gap = np.abs(np.asarray(generalized_inverse(f, xs)) - np.asarray(f(xs)))
    i = int(np.argmax(gap))
    return SymmetryCheck(bool(gap[i] <= tol), float(gap[i]), float(xs[i]), float(tol), f.describe())


def _pl_inverse_vertices(x: np.ndarray, y: np.ndarray):
    """Vertices of the generalized inverse of a convex nonincreasing PL curve with f(1) = 0."""
    # Convex + nonincreasing + f(1) = 0 means f is strictly decreasing until it first hits 0, so
    # the inverse is the reflection of that part, plus a flat piece at 0 above f(0).
    first_zero = int(np.argmax(y <= 0.0))
    xr, yr = y[: first_zero + 1][::-1], x[: first_zero + 1][::-1]
    if xr[-1] < 1.0:
        xr = np.append(xr, 1.0)
        yr = np.append(yr, 0.0)
    return xr, yr


def symmetrized(f: TradeOff) -> TradeOff:
    """max(f, f^-1): still a valid guarantee under a symmetric relation, and convex.

    If T(P, Q) >= f and T(Q, P) >= f then T(P, Q) = T(Q, P)^-1 >= f^-1 ([6] Lemma A.2), so the
    mechanism is max(f, f^-1)-DP. The canonical curves are already symmetric and are returned
    unchanged. For points curves the maximum is computed exactly (vertices of both curves and
    their crossings), never by sampling, so the result is not larger than the true maximum.

    >>> from memclaim.privacy.tradeoff import from_points, symmetrized
    >>> s = symmetrized(from_points([0.0, 0.5, 1.0], [1.0, 0.1, 0.0], neighbors="replace-one"))
    >>> [(round(a, 4), round(b, 4)) for a, b in s.points]
    [(0.0, 1.0), (0.1, 0.82), (0.3571, 0.3571), (0.5, 0.2778), (1.0, 0.0)]
    """
    if f.symmetric_by_construction:
        return f
    if f.kind != "points":
        raise DomainError(
            f"symmetrized() supports points curves and the canonical families, got {f.kind!r}"
        )
    x1, y1 = f._xy()
    x2, y2 = _pl_inverse_vertices(x1, y1)
    xs = np.unique(np.concatenate([x1, x2]))
    d = np.interp(xs, x1, y1) - np.interp(xs, x2, y2)
    cross = []
    for i in range(len(xs) - 1):
        if d[i] * d[i + 1] < 0:
            t = d[i] / (d[i] - d[i + 1])
            cross.append(xs[i] + t * (xs[i + 1] - xs[i]))
    xs = np.unique(np.concatenate([xs, cross]))
    ys = np.maximum(np.interp(xs, x1, y1), np.interp(xs, x2, y2))
    pts = tuple((float(a), float(b)) for a, b in zip(xs, ys))
    return TradeOff(
        "points",
        f.neighbors,
        points=pts,
        exact=f.exact,
        note="max(f, f^-1) of a user curve (valid under a symmetric relation)",
    )


# --------------------------------------------------------------------------- GDP duality
def gdp_delta(*, mu: float, epsilon: float) -> float:
    """delta(eps) of mu-GDP: Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2) ([6] Cor. 2.13), exact.

    >>> round(gdp_delta(mu=1.0, epsilon=0.0), 6)  # eps = 0: the total variation 2 Phi(mu/2) - 1
    0.382925
    """
    m = _mu(mu)
    e = validate.nonneg("epsilon", epsilon)
    a = stats.norm.cdf(-e / m + m / 2)
    b = math.exp(e + stats.norm.logcdf(-e / m - m / 2))
    return float(max(a - b, 0.0))


# --------------------------------------------------------------------------- DP-SGD accounting
@dataclass(frozen=True)
class DpSgdAccounting(ResultMixin):
    """epsilon of Poisson-subsampled Gaussian DP-SGD at a target delta (dp_accounting)."""

    epsilon: float
    delta: float
    noise_multiplier: float
    sampling_rate: float
    steps: int
    accountant: str
    neighbors: str
    reference: str = "dp_accounting PLD/RDP accountant; [MX] §8.2 DP-SGD calibration"

    def guarantee(self) -> TradeOff:
        """The (epsilon, delta) curve this accounting certifies, for the same relation."""
        return approx(self.epsilon, self.delta, neighbors=self.neighbors)


def dpsgd_epsilon(
    *,
    noise_multiplier: float,
    sampling_rate: float,
    steps: int,
    delta: float,
    accountant: str = "pld",
    neighbors: str = "add-remove",
    pld_discretization: float = 1e-4,
) -> DpSgdAccounting:
    """epsilon for DP-SGD: ``steps`` Poisson-subsampled Gaussian releases ([3]; [MX] App. F.2).

    accountant: 'pld' (privacy-loss distributions: tight, supports replace-one and add/remove)
    or 'rdp' (Renyi DP, the Opacus default; add/remove only for Poisson sampling).
    pld_discretization: the PLD's privacy-loss grid; coarser is faster and still a valid
    (pessimistic) upper bound on epsilon.

    >>> from memclaim.privacy.tradeoff import dpsgd_epsilon
    >>> acc = dpsgd_epsilon(noise_multiplier=1.0, sampling_rate=0.01, steps=100, delta=1e-5)  # doctest: +SKIP
    >>> round(acc.epsilon, 3)  # doctest: +SKIP
    0.718
    """
    sigma = validate.positive("noise_multiplier", noise_multiplier)
    q = validate.in_unit("sampling_rate", sampling_rate, lo_open=True)
    steps = validate.integer("steps", steps, minimum=1)
    d = validate.in_open_unit("delta", delta)
    rel = normalize_neighbors(neighbors)
    acc_name = str(accountant).strip().lower()
    if acc_name not in ("pld", "rdp"):
        raise DomainError(f"unknown accountant {accountant!r}", hint="use 'pld' or 'rdp'")
    dpa = require("dp_accounting", "dp")
    rel_enum = (
        dpa.NeighboringRelation.ADD_OR_REMOVE_ONE
        if rel == "add-remove"
        else dpa.NeighboringRelation.REPLACE_ONE
    )
    if acc_name == "rdp" and rel == "replace":
        raise DomainError(
            "the RDP accountant supports Poisson-sampled Gaussians only under add/remove",
            hint="use accountant='pld' for replace-one",
        )
    event = dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(sigma)), steps)
    if acc_name == "pld":
        disc = validate.positive("pld_discretization", pld_discretization)
        acc = dpa.pld.PLDAccountant(
            neighboring_relation=rel_enum, value_discretization_interval=disc
        )
    else:
        acc = dpa.rdp.RdpAccountant(neighboring_relation=rel_enum)
    acc.compose(event)
    eps = float(acc.get_epsilon(d))
    return DpSgdAccounting(eps, d, sigma, q, steps, acc_name, rel)
