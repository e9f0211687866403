"""Likelihood-ratio attack (LiRA; Carlini, Chien, Nasr, Song, Terzis, Tramèr 2022, "Membership
Inference Attacks From First Principles", IEEE S&P; [MX] §8.2, App. F.2: 16 shadows per example,
8 in the length sweep, each trained on an independent split with the target held in or out).

The statistic (our choice; [MX] App. F does not fix it)
------------------------------------------------------
LiRA fits Gaussians to a *logit-scaled confidence* because the logit makes the per-example
score distribution over shadow models approximately normal (Carlini et al. 2022, §IV,
phi(p) = log(p / (1 - p))). For a text scored under teacher forcing we offer:

- ``"sequence"`` (default): phi = logit(p_bar), p_bar = exp(mean_t log p_t) the geometric-mean
  token probability, i.e. phi = lbar - log(1 - exp(lbar)) with lbar = -loss. It is a strictly
  increasing function of the per-text loss, so LiRA here is exactly "the loss attack calibrated
  per example against shadows", the comparison [MX] §8.2 makes; one number per text.
- ``"token"``: phi = mean_t logit(p_t), the mean of per-token logit confidences.

Both are computed in log space (``log(-expm1(l))`` for log(1 - p)) and clipped to
[-LOGIT_CLIP, LOGIT_CLIP], LOGIT_CLIP = 745 = -log of the smallest positive float64, so a token
the model gives probability exactly 1 (log p = 0) or 0 (log p = -inf) yields a finite,
extreme statistic instead of an infinity that would break the Gaussian fits.

Scores (higher = member)
------------------------
- online (Alg. 1): Lambda = log N(phi; mu_in, s_in^2) - log N(phi; mu_out, s_out^2).
- offline (§IV, one-sided): the paper's Lambda = Pr[Z < phi], Z ~ N(mu_out, s_out^2). We
  report the z-score (phi - mu_out) / s_out, which is the same test (Phi is increasing) without
  the saturation of Phi at 1.0 in float64, which would create artificial ties.

Variance
--------
``variance="per_example"`` fits s_in, s_out per example; ``"global"`` pools the within-example
variance over all examples (the fixed-variance variant Carlini et al. 2022 (§IV) recommend when
few shadows are trained, below about 64). We pool *within-example* deviations,
sum_i sum_s (phi_is - mu_i)^2 / sum_i (n_i - 1), the variance the Gaussian model assumes, where
the reference code's ``np.std`` over all examples' scores would add the between-example spread.
``"auto"`` (default) uses per-example fits only if every example has at least
``min_per_example`` scores on the side being fitted (default 32, i.e. 64 shadows), otherwise the
global variance. In per-example mode an example with fewer than 2 scores on a side or with zero
spread falls back to the global variance; the result records which examples did.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from ..errors import DomainError, InputError
from ..jsonutil import ResultMixin
from ..numeric import log1mexp
from ..validate import integer

__all__ = [
    "LOGIT_CLIP",
    "STATISTICS",
    "LiRAResult",
    "lira_statistic",
    "lira_online",
    "lira_offline",
]

LOGIT_CLIP = 745.0
STATISTICS = ("sequence", "token")


def _logit_from_logp(lp: np.ndarray) -> np.ndarray:
    lp = np.minimum(np.asarray(lp, dtype=np.float64), 0.0)
    with np.errstate(invalid="ignore"):
        z = lp - log1mexp(lp)  # -inf - log(1) = -inf ; 0 - (-inf) = +inf
    return np.clip(z, -LOGIT_CLIP, LOGIT_CLIP)


def lira_statistic(token_logprobs: Sequence[np.ndarray], *, kind: str = "sequence") -> np.ndarray:
    """The logit-scaled confidence phi of each text (see module docstring). [n] float64.

    >>> lira_statistic([np.log([0.5, 0.5])]).tolist()  # p_bar = 1/2: logit 0
    [0.0]
    """
    if kind not in STATISTICS:
        raise DomainError(f"unknown LiRA statistic {kind!r}", hint=f"use one of {STATISTICS}")
    arrays = [np.asarray(lp, dtype=np.float64).reshape(-1) for lp in token_logprobs]
    for i, lp in enumerate(arrays):
        if lp.size == 0:
            raise InputError(
                f"text {i} has no scored tokens; the LiRA statistic is undefined",
                hint="drop empty windows before auditing",
            )
    if not arrays:
        return np.empty(0, dtype=np.float64)
    lengths = np.fromiter((a.size for a in arrays), dtype=np.int64, count=len(arrays))
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    cat = np.concatenate(arrays)
    if kind == "sequence":
        return _logit_from_logp(np.add.reduceat(cat, starts) / lengths)
    return np.add.reduceat(_logit_from_logp(cat), starts) / lengths


@dataclass(frozen=True)
class LiRAResult(ResultMixin):
    """Per-example LiRA scores and the Gaussian fits behind them.

    Arrays have one entry per example; ``mu_in``/``sd_in``/``n_in`` are NaN/0 for the offline
    variant. ``global_sd_*`` are the pooled within-example standard deviations (NaN if not
    estimable); ``used_global_*`` flag the examples whose fit used them.
    """

    variant: str
    scores: np.ndarray
    statistic_target: np.ndarray
    mu_in: np.ndarray
    sd_in: np.ndarray
    n_in: np.ndarray
    mu_out: np.ndarray
    sd_out: np.ndarray
    n_out: np.ndarray
    variance: str
    global_sd_in: float
    global_sd_out: float
    used_global_in: np.ndarray
    used_global_out: np.ndarray


def _check_shadows(target_stats, shadow_stats, shadow_in):
    t = np.asarray(target_stats, dtype=np.float64)
    if t.ndim != 1 or t.size == 0:
        raise InputError(f"target statistics must be a non-empty 1-D array, got shape {t.shape}")
    s = np.asarray(shadow_stats, dtype=np.float64)
    if s.ndim != 2 or s.shape[1] != t.size:
        raise InputError(
            f"shadow statistics must have shape [n_shadows, {t.size}], got {s.shape}",
            hint="one row per shadow model, one column per audited text, in the target's order",
        )
    m = np.asarray(shadow_in)
    if m.shape != s.shape:
        raise InputError(f"shadow membership mask has shape {m.shape}, expected {s.shape}")
    if m.dtype != bool:
        if not np.isin(m, (0, 1)).all():
            raise InputError(
                "shadow membership mask must be boolean (True = text was in that shadow's training set)"
            )
        m = m.astype(bool)
    for name, arr in (("target statistics", t), ("shadow statistics", s)):
        if not np.isfinite(arr).all():
            bad = np.argwhere(~np.isfinite(arr))[0]
            raise InputError(
                f"{name} contain a non-finite value at index {tuple(int(b) for b in bad)}",
                hint="compute them with lira_statistic, which clips to +-LOGIT_CLIP",
            )
    return t, s, m


def _side_fit(s: np.ndarray, mask: np.ndarray, side: str, variance: str, min_per_example: int):
    """Per-example means/sds over the shadows where mask is True, with the global fallback."""
    n = mask.sum(axis=0)  # [n_examples]
    with np.errstate(invalid="ignore", divide="ignore"):
        mu = np.where(n > 0, (s * mask).sum(axis=0) / np.maximum(n, 1), np.nan)
        dev2 = ((s - mu) ** 2 * mask).sum(axis=0)  # [n_examples]
        sd = np.where(n > 1, np.sqrt(dev2 / np.maximum(n - 1, 1)), np.nan)
    dof = int(np.sum(np.maximum(n - 1, 0)))
    gsd = math.sqrt(float(dev2[n > 1].sum()) / dof) if dof > 0 else math.nan
    if variance == "auto":
        variance = "per_example" if int(n.min()) >= min_per_example else "global"
    if variance == "global":
        use_global = np.ones(n.shape, dtype=bool)
    else:
        use_global = ~(n > 1) | ~(sd > 0)
    if use_global.any() and not (gsd > 0):
        raise DomainError(
            f"cannot fit the {side} Gaussians: the pooled within-example standard deviation of the "
            f"{side} shadow statistics is {gsd!r} ({dof} degrees of freedom)",
            hint="train more shadow models (at least two per example on each side); identical shadow "
            "statistics mean the shadows carry no calibration information",
        )
    sd = np.where(use_global, gsd, sd)
    return mu, sd, n, variance, gsd, use_global


def _variance_arg(variance: str, min_per_example) -> tuple[str, int]:
    if variance not in ("auto", "per_example", "global"):
        raise DomainError(f"variance must be 'auto', 'per_example' or 'global', got {variance!r}")
    return variance, integer("min_per_example", min_per_example, minimum=2)


def lira_online(
    target_stats: Sequence[float] | np.ndarray,
    shadow_stats: np.ndarray,
    shadow_in: np.ndarray,
    *,
    variance: str = "auto",
    min_per_example: int = 32,
) -> LiRAResult:
    """Online LiRA (Carlini et al. 2022, Alg. 1): IN and OUT Gaussians per example.

    ``target_stats`` [n]: phi of each text under the audited model; ``shadow_stats``
    [S, n]: phi under each shadow; ``shadow_in`` [S, n]: True where text j was in shadow s's
    training set. Every example needs at least one IN and one OUT shadow.

    >>> shadow = np.array([[2.0, 0.0], [2.2, 0.1], [0.0, 2.0], [0.1, 2.1]])  # [S = 4, n = 2]
    >>> inside = np.array([[True, False], [True, False], [False, True], [False, True]])
    >>> r = lira_online([2.1, 0.05], shadow, inside, variance="global")
    >>> bool(r.scores[0] > 0 > r.scores[1])  # text 0 looks IN, text 1 looks OUT
    True
    """
    variance, min_per_example = _variance_arg(variance, min_per_example)
    t, s, m = _check_shadows(target_stats, shadow_stats, shadow_in)
    for side, mask in (("IN", m), ("OUT", ~m)):
        counts = mask.sum(axis=0)
        if (counts == 0).any():
            j = int(np.flatnonzero(counts == 0)[0])
            raise InputError(
                f"example {j} has no {side} shadow model ({int((counts == 0).sum())} examples lack one)",
                hint="online LiRA needs each text both in and out of some shadows' training sets; "
                "train more shadows on random halves, or use lira_offline",
            )
    mu_in, sd_in, n_in, var_in, g_in, u_in = _side_fit(s, m, "IN", variance, min_per_example)
    mu_out, sd_out, n_out, var_out, g_out, u_out = _side_fit(
        s, ~m, "OUT", variance, min_per_example
    )
    # Carlini et al. 2022, Alg. 1, line 10: Lambda = p(conf | N_in) / p(conf | N_out), in logs.
    scores = stats.norm.logpdf(t, mu_in, sd_in) - stats.norm.logpdf(t, mu_out, sd_out)
    used = "global" if (var_in == "global" or var_out == "global") else "per_example"
    return LiRAResult(
        variant="online",
        scores=scores,
        statistic_target=t,
        mu_in=mu_in,
        sd_in=sd_in,
        n_in=n_in,
        mu_out=mu_out,
        sd_out=sd_out,
        n_out=n_out,
        variance=used,
        global_sd_in=g_in,
        global_sd_out=g_out,
        used_global_in=u_in,
        used_global_out=u_out,
    )


def lira_offline(
    target_stats: Sequence[float] | np.ndarray,
    shadow_stats: np.ndarray,
    shadow_in: np.ndarray,
    *,
    variance: str = "auto",
    min_per_example: int = 32,
) -> LiRAResult:
    """Offline LiRA (Carlini et al. 2022, §IV): OUT Gaussians only; score = z-score of phi.

    IN shadows (if any) are ignored. Every example needs at least one OUT shadow.

    >>> shadow = np.array([[0.0, 0.0], [0.2, 0.1], [0.1, 0.2]])
    >>> r = lira_offline([3.0, 0.1], shadow, np.zeros((3, 2), dtype=bool), variance="global")
    >>> bool(r.scores[0] > r.scores[1])
    True
    """
    variance, min_per_example = _variance_arg(variance, min_per_example)
    t, s, m = _check_shadows(target_stats, shadow_stats, shadow_in)
    counts = (~m).sum(axis=0)
    if (counts == 0).any():
        j = int(np.flatnonzero(counts == 0)[0])
        raise InputError(
            f"example {j} has no OUT shadow model",
            hint="offline LiRA needs shadows trained without each audited text",
        )
    mu_out, sd_out, n_out, var_out, g_out, u_out = _side_fit(
        s, ~m, "OUT", variance, min_per_example
    )
    # One-sided test: Pr[Z < phi] = Phi((phi - mu_out)/sd_out); report its argument (monotone).
    scores = (t - mu_out) / sd_out
    nan = np.full(t.shape, np.nan)
    return LiRAResult(
        variant="offline",
        scores=scores,
        statistic_target=t,
        mu_in=nan,
        sd_in=nan,
        n_in=np.zeros(t.shape, dtype=int),
        mu_out=mu_out,
        sd_out=sd_out,
        n_out=n_out,
        variance=var_out,
        global_sd_in=math.nan,
        global_sd_out=g_out,
        used_global_in=np.zeros(t.shape, dtype=bool),
        used_global_out=u_out,
    )
