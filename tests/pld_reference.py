"""An independent, rigorous bracket of the composed Poisson-subsampled Gaussian's hockey-stick
divergence delta(eps), for testing memclaim.privacy.pld (issue 18). Uses numpy and scipy only
(not dp_accounting).

One step releases y = b + N(0, sigma^2); with the record b ~ Bernoulli(q), without it b = 0
(add/remove of one example, sensitivity 1). The privacy loss of the *remove* direction (upper
law P = mixture, lower law Q = N(0, sigma^2)) at x is L(x) = log(1 - q + q e^{(2x - 1)/(2 sigma^2)}),
increasing in x; the *add* direction (upper N(0, sigma^2), lower the mixture) has loss -L(x)
under x ~ N(0, sigma^2). For a direction, delta(eps) = E_upper[(1 - e^{eps - S})_+] with S the
sum of T independent losses, a nondecreasing function of S. Rounding every step's loss up to
a grid of spacing h (and its top tail to +inf) gives S_up >= S pointwise, rounding down (and
the bottom tail to -inf) gives S_dn <= S, so delta computed from S_dn and S_up brackets the
truth. The T-fold convolution is a circular FFT over a window; the mass that can alias into
the window is bounded by Chernoff bounds of the discretized sums, and added to both ends.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

LAMBDAS = (0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0)


def _x_of_loss(l, sigma, q):
    """Inverse of L(x) = log(1 - q + q e^{(2x-1)/(2 sigma^2)}) for l > log(1 - q); -inf below."""
    l = np.asarray(l, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        x = sigma * sigma * (np.log(np.expm1(l) + q) - math.log(q)) + 0.5
    return np.where(l <= math.log1p(-q), -np.inf, x)


def _single_step(direction, sigma, q, h, tail_sd):
    """Grid indices j (losses j h) and, per grid point, P(L <= l_j) and P(L > l_j) accurately."""
    if direction == "remove":
        lo = math.log1p(-q)
        x_hi = 1.0 + tail_sd * sigma
        hi = math.log1p(-q + q * math.exp((2 * x_hi - 1) / (2 * sigma * sigma)))
    else:
        x_hi = tail_sd * sigma
        lo = -math.log1p(-q + q * math.exp((2 * x_hi - 1) / (2 * sigma * sigma)))
        hi = -math.log1p(-q)
    j = np.arange(math.floor(lo / h), math.ceil(hi / h) + 1)
    l = j * h
    if direction == "remove":  # X ~ mixture, L = L(X) increasing: P(L <= l) = P(X <= x(l))
        x = _x_of_loss(l, sigma, q)
        cdf = (1 - q) * stats.norm.cdf(x / sigma) + q * stats.norm.cdf((x - 1) / sigma)
        sf = (1 - q) * stats.norm.sf(x / sigma) + q * stats.norm.sf((x - 1) / sigma)
    else:  # X ~ N(0, s^2), L = -L(X): P(L <= l) = P(X >= x(-l))
        x = _x_of_loss(-l, sigma, q)
        cdf = stats.norm.sf(x / sigma)
        sf = stats.norm.cdf(x / sigma)
    return j, cdf, sf


def _compose(j, p, T, h, window):
    """T-fold sum of the sub-probability pmf p on losses j h: (losses, pmf, aliasing bound)."""
    kA = math.floor(window[0] / h)
    N = 1 << int(math.ceil(math.log2((window[1] - window[0]) / h)))
    a = np.zeros(N)
    np.add.at(a, j % N, p)
    out = np.fft.irfft(np.fft.rfft(a) ** T, n=N)
    k = kA + ((np.arange(N) - kA) % N)
    lj = j * h
    hiB, loA = (kA + N) * h, kA * h
    with np.errstate(over="ignore", divide="ignore"):
        up = min(
            math.exp(min(700.0, T * math.log(float(np.dot(p, np.exp(lam * lj)))) - lam * hiB))
            for lam in LAMBDAS
        )
        dn = min(
            math.exp(min(700.0, T * math.log(float(np.dot(p, np.exp(-lam * lj)))) + lam * loA))
            for lam in LAMBDAS
        )
    return k * h, out, up + dn


def bracket_delta(sigma, q, T, *, epsilons, h, window, direction="remove", tail_sd=12.0):
    """{eps: (lo, hi)} with lo <= delta_direction(eps) <= hi for T composed steps (see module docstring)."""
    j, cdf, sf = _single_step(direction, sigma, q, h, tail_sd)
    # bin (l_{j-1}, l_j]: F(l_j) - F(l_{j-1}), from the survival function where F > 1/2
    mass = np.clip(np.where(cdf[1:] < 0.5, np.diff(cdf), -np.diff(sf)), 0.0, None)
    below, above = float(cdf[0]), float(sf[-1])
    up = np.zeros(j.size)
    up[1:] = mass
    up[0] += below  # the bottom tail rounded up to the lowest grid point
    dn = np.zeros(j.size)
    dn[:-1] = mass
    dn[-1] += above  # the top tail rounded down to the highest grid point
    lu, pu, au = _compose(j, up, T, h, window)
    ld, pd, ad = _compose(j, dn, T, h, window)  # (dn's bottom tail went to -inf: dropped)
    inf_up = -math.expm1(T * math.log1p(-above)) if above < 1 else 1.0  # some step at +inf
    out = {}
    for e in epsilons:
        hu = float(np.sum(np.where(lu > e, pu * -np.expm1(e - lu), 0.0)))
        hd = float(np.sum(np.where(ld > e, pd * -np.expm1(e - ld), 0.0)))
        out[float(e)] = (hd - ad - 1e-11, hu + au + inf_up + 1e-11)  # + FFT round-off margin
    return out
