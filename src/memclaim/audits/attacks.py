"""Membership-inference attacks as scores over per-token arrays ([MX] §8.2, App. F.2).

The scoring engine's one teacher-forced pass gives, per text (window): the full-softmax
log-probability of every target token, the mean and standard deviation of log p under the
model's full next-token distribution at every position (for min-k%++), the target rank, and
log q under each decoding policy. An attack turns those arrays into one membership score per
text, oriented **higher = more likely a member**. Metrics (AUC, TPR at a certified FPR) live in
:mod:`memclaim.audits.metrics`.

Built-in attacks (registered by name; :func:`register_attack` adds more):

=============  =================================================================================
loss           mean token log-prob = -(mean NLL)                      Yeom et al. 2018
perplexity     -exp(mean NLL)                                         Carlini et al. 2021 §5
zlib           -(mean NLL) / (zlib-compressed UTF-8 bytes of the text) Carlini et al. 2021 §6.2
reference      log p_target(text) - log p_reference(text)             Carlini et al. 2021 §6.2
min-k          mean of the lowest max(1, floor(k n)) token log-probs  Shi et al. 2024
min-k++        min-k over (log p - mu) / sigma per token              Zhang et al. 2024
lira-online    per-example IN/OUT Gaussian likelihood ratio           Carlini et al. 2022
lira-offline   per-example OUT Gaussian one-sided z-score             Carlini et al. 2022
=============  =================================================================================

Rounding of k (min-k, min-k++): the number of tokens kept is ``max(1, floor(k * n))`` for a
text of n scored tokens, with k read exactly as written (0.29 means 29/100, see
:func:`min_k_count`). floor matches the reference implementation of Shi et al.
(``int(len(probs) * ratio)``); the ``max(1, .)`` replaces its empty-slice NaN for short texts by
the single lowest token.
"""

from __future__ import annotations

import inspect
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from ..errors import DomainError, InputError, ProcedureMismatchError
from ..jsonutil import ResultMixin
from .lira import STATISTICS, lira_offline, lira_online, lira_statistic
from .metrics import AUCResult, TPRResult, exact_level, roc_auc, tpr_at_fpr

__all__ = [
    "ScoredTexts",
    "ragged",
    "Attack",
    "AttackEvaluation",
    "register_attack",
    "unregister_attack",
    "get_attack",
    "available_attacks",
    "describe_attacks",
    "run_attack",
    "evaluate_attack",
    "loss_scores",
    "perplexity_scores",
    "zlib_length",
    "zlib_scores",
    "reference_scores",
    "min_k_count",
    "min_k_scores",
    "min_k_plus_plus_scores",
    "token_mean_std",
]

# A log-probability above 0 by more than this is refused (float32 log_softmax can round to +1e-7).
LOGP_TOLERANCE = 1e-5


# ------------------------------------------------------------------------------ ragged input
def ragged(
    values: Sequence[Sequence[float] | np.ndarray] | np.ndarray,
    lengths: Sequence[int] | np.ndarray | None = None,
    *,
    name: str = "token_logprobs",
    allow_neg_inf: bool = True,
    upper: float | None = LOGP_TOLERANCE,
) -> tuple[np.ndarray, ...]:
    """Per-text float64 arrays from a ragged list, or from a padded [n, T] array + lengths.

    With ``lengths``, text i is ``values[i, :lengths[i]]`` (padding beyond is ignored). Without,
    a 2-D array is one text per row. NaN, +inf and empty texts are refused; ``-inf`` (a token of
    probability exactly zero) is kept unless ``allow_neg_inf`` is False.

    >>> ragged([[-1.0, -2.0, 0.0], [-0.5, 0.0, 0.0]], [2, 1])  # padded rows cut to their lengths
    (array([-1., -2.]), array([-0.5]))
    """
    if lengths is not None:
        arr = np.asarray(values, dtype=np.float64)
        lens = np.asarray(lengths)
        if arr.ndim != 2:
            raise InputError(
                f"{name}: a padded array must be 2-D [n_texts, max_len], got shape {arr.shape}"
            )
        if lens.shape != (arr.shape[0],) or not np.issubdtype(lens.dtype, np.integer):
            raise InputError(
                f"{name}: lengths must be {arr.shape[0]} integers, got {lengths!r:.200}"
            )
        if (lens < 0).any() or (lens > arr.shape[1]).any():
            raise InputError(
                f"{name}: lengths must lie in [0, {arr.shape[1]}], got min {int(lens.min())}, "
                f"max {int(lens.max())}"
            )
        rows = [arr[i, : int(lens[i])] for i in range(arr.shape[0])]
    elif isinstance(values, np.ndarray) and values.ndim == 2:
        rows = list(np.asarray(values, dtype=np.float64))
    else:
        try:
            rows = [np.asarray(v, dtype=np.float64) for v in values]
        except (TypeError, ValueError):
            raise InputError(f"{name} must be a list of per-text arrays of numbers") from None
    out = []
    for i, r in enumerate(rows):
        if np.ndim(r) > 1:
            raise InputError(f"{name}[{i}] must be one-dimensional (one value per token)")
        r = np.array(r, dtype=np.float64, copy=True).reshape(-1)
        if r.size == 0:
            raise InputError(
                f"{name}[{i}] is empty: text {i} has no scored tokens",
                hint="drop empty windows before auditing; no attack is defined on zero tokens",
            )
        out.append(r)
    if not out:
        raise InputError(f"{name} holds no texts")
    # Checks on the concatenation (one pass), locating the first offender for the message.
    cat = np.concatenate(out)
    ends = np.cumsum([a.size for a in out])

    def where(mask) -> str:
        j = int(np.flatnonzero(mask)[0])
        i = int(np.searchsorted(ends, j, side="right"))
        return f"{name}[{i}][{j - (int(ends[i - 1]) if i else 0)}]"

    if np.isnan(cat).any():
        raise InputError(f"{where(np.isnan(cat))} is NaN")
    if np.isposinf(cat).any():
        raise InputError(f"{where(np.isposinf(cat))} is +inf")
    if not allow_neg_inf and np.isneginf(cat).any():
        raise InputError(f"{where(np.isneginf(cat))} is -inf")
    if upper is not None:
        over = cat > upper
        if over.any():
            j = int(np.flatnonzero(over)[0])
            raise InputError(
                f"{where(over)} = {cat[j]!r} is a log-probability above 0",
                hint="pass natural-log probabilities (<= 0), not logits or NLLs",
            )
        for r in out:
            np.minimum(r, 0.0, out=r)
    return tuple(out)


def _flat(arrays: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(concatenation, start offsets, lengths) of non-empty 1-D arrays."""
    lengths = np.fromiter((a.size for a in arrays), dtype=np.int64, count=len(arrays))
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    return np.concatenate(arrays), starts, lengths


def _ragged_mean(arrays: Sequence[np.ndarray]) -> np.ndarray:
    cat, starts, lengths = _flat(arrays)
    return np.add.reduceat(cat, starts) / lengths


def _ragged_sum(arrays: Sequence[np.ndarray]) -> np.ndarray:
    cat, starts, _ = _flat(arrays)
    return np.add.reduceat(cat, starts)


@dataclass(frozen=True, eq=False)
class ScoredTexts:
    """What the attacks read, for n texts (members, non-members, or both).

    - ``token_logprobs``: per text, the full-softmax log p of each target token (required).
    - ``token_mean`` / ``token_std``: per text and position, mu_t = E_{v~p}[log p(v)] and
      sigma_t = sqrt(Var_{v~p}[log p(v)]) under the full next-token distribution (min-k%++).
    - ``texts``: the decoded texts (zlib).
    - ``reference_token_logprobs``: per text, token log-probs under the reference model, in the
      reference model's own tokenization (reference attack).
    - ``shadow_stats`` [S, n] / ``shadow_in`` [S, n]: LiRA statistics of each text under each
      shadow model (computed by :func:`memclaim.audits.lira.lira_statistic` with
      ``shadow_statistic``) and whether the text was in that shadow's training set.
    - ``procedure``: an identifier of how the texts were scored (model fingerprint + procedure);
      :meth:`concat` refuses to mix different ones.

    Build it with :meth:`build`, which validates everything.
    """

    token_logprobs: tuple[np.ndarray, ...]
    token_mean: tuple[np.ndarray, ...] | None = None
    token_std: tuple[np.ndarray, ...] | None = None
    texts: tuple[str, ...] | None = None
    reference_token_logprobs: tuple[np.ndarray, ...] | None = None
    shadow_stats: np.ndarray | None = None
    shadow_in: np.ndarray | None = None
    shadow_statistic: str = "sequence"
    procedure: str | None = None
    reference_procedure: str | None = None

    @classmethod
    def build(
        cls,
        token_logprobs,
        *,
        lengths=None,
        token_mean=None,
        token_std=None,
        texts=None,
        reference_token_logprobs=None,
        reference_lengths=None,
        shadow_stats=None,
        shadow_in=None,
        shadow_statistic: str = "sequence",
        procedure: str | None = None,
        reference_procedure: str | None = None,
    ) -> ScoredTexts:
        lp = ragged(token_logprobs, lengths, name="token_logprobs")
        n = len(lp)
        mu = sd = None
        if (token_mean is None) != (token_std is None):
            raise InputError(
                "token_mean and token_std come together (both or neither)",
                hint="the scoring engine returns both for min-k%++",
            )
        if token_mean is not None:
            mu = ragged(token_mean, lengths, name="token_mean", allow_neg_inf=False)
            sd = ragged(token_std, lengths, name="token_std", allow_neg_inf=False, upper=None)
            for name, arrs in (("token_mean", mu), ("token_std", sd)):
                if len(arrs) != n:
                    raise InputError(f"{name} has {len(arrs)} texts, token_logprobs has {n}")
                for i, (a, b) in enumerate(zip(arrs, lp)):
                    if a.shape != b.shape:
                        raise InputError(
                            f"{name}[{i}] has {a.size} tokens, token_logprobs[{i}] has {b.size}"
                        )
            for i, s in enumerate(sd):
                if (s < 0).any():
                    raise InputError(
                        f"token_std[{i}] has a negative standard deviation {float(s.min())!r}"
                    )
        tx = None
        if texts is not None:
            tx = tuple(texts)
            if len(tx) != n or not all(isinstance(t, str) for t in tx):
                raise InputError(
                    f"texts must be {n} strings (one per scored text), got {len(tx)} items"
                )
        ref = None
        if reference_token_logprobs is not None:
            ref = ragged(
                reference_token_logprobs, reference_lengths, name="reference_token_logprobs"
            )
            if len(ref) != n:
                raise InputError(
                    f"reference_token_logprobs has {len(ref)} texts, token_logprobs has {n}"
                )
        ss = si = None
        if (shadow_stats is None) != (shadow_in is None):
            raise InputError("shadow_stats and shadow_in come together (both or neither)")
        if shadow_stats is not None:
            if shadow_statistic not in STATISTICS:
                raise DomainError(
                    f"unknown LiRA statistic {shadow_statistic!r}", hint=f"use one of {STATISTICS}"
                )
            ss = np.array(shadow_stats, dtype=np.float64, copy=True)
            si = np.array(shadow_in, copy=True)
            if ss.ndim != 2 or ss.shape[1] != n:
                raise InputError(f"shadow_stats must have shape [n_shadows, {n}], got {ss.shape}")
            if si.shape != ss.shape:
                raise InputError(f"shadow_in has shape {si.shape}, expected {ss.shape}")
            if si.dtype != bool:
                if not np.isin(si, (0, 1)).all():
                    raise InputError(
                        "shadow_in must be boolean (True = text in that shadow's training set)"
                    )
                si = si.astype(bool)
        return cls(lp, mu, sd, tx, ref, ss, si, shadow_statistic, procedure, reference_procedure)

    def __len__(self) -> int:
        return len(self.token_logprobs)

    def has(self, fieldname: str) -> bool:
        return getattr(self, fieldname) is not None

    @staticmethod
    def concat(first: ScoredTexts, second: ScoredTexts) -> ScoredTexts:
        """Members then non-members in one object (LiRA's global variance pools over both)."""
        for attr in ("procedure", "reference_procedure", "shadow_statistic"):
            a, b = getattr(first, attr), getattr(second, attr)
            if a is not None and b is not None and a != b:
                raise ProcedureMismatchError(
                    f"the two sets were scored differently: {attr} {a!r} vs {b!r}",
                    hint="score members and non-members with the same model, procedure and statistic",
                )
        for attr in ("token_mean", "texts", "reference_token_logprobs", "shadow_stats"):
            if first.has(attr) != second.has(attr):
                raise InputError(
                    f"{attr} is given for one set and not the other",
                    hint="give the same fields for members and non-members",
                )
        if (
            first.shadow_stats is not None
            and first.shadow_stats.shape[0] != second.shadow_stats.shape[0]
        ):
            raise InputError(
                f"the two sets were scored under {first.shadow_stats.shape[0]} and "
                f"{second.shadow_stats.shape[0]} shadow models",
                hint="score every audited text under the same shadow models",
            )

        def cat(a, b):
            return None if a is None else tuple(a) + tuple(b)

        return ScoredTexts(
            token_logprobs=first.token_logprobs + second.token_logprobs,
            token_mean=cat(first.token_mean, second.token_mean),
            token_std=cat(first.token_std, second.token_std),
            texts=cat(first.texts, second.texts),
            reference_token_logprobs=cat(
                first.reference_token_logprobs, second.reference_token_logprobs
            ),
            shadow_stats=None
            if first.shadow_stats is None
            else np.concatenate([first.shadow_stats, second.shadow_stats], axis=1),  # [S, n1 + n2]
            shadow_in=None
            if first.shadow_in is None
            else np.concatenate([first.shadow_in, second.shadow_in], axis=1),  # [S, n1 + n2]
            shadow_statistic=first.shadow_statistic,
            procedure=first.procedure if first.procedure is not None else second.procedure,
            reference_procedure=(
                first.reference_procedure
                if first.reference_procedure is not None
                else second.reference_procedure
            ),
        )


# ------------------------------------------------------------------------ the attack scores
def _as_list(token_logprobs) -> tuple[np.ndarray, ...]:
    if isinstance(token_logprobs, tuple) and all(
        isinstance(a, np.ndarray) and a.dtype == np.float64 for a in token_logprobs
    ):
        return token_logprobs
    return ragged(token_logprobs)


def _mean_logprob(lp: Sequence[np.ndarray]) -> np.ndarray:
    return _ragged_mean(lp)


def loss_scores(token_logprobs: Sequence[Sequence[float] | np.ndarray]) -> np.ndarray:
    """Loss attack (Yeom et al. 2018, CSF, the threshold adversary of §3.2): the mean token
    log-prob, i.e. minus the mean NLL. A text with a zero-probability token scores -inf.

    >>> loss_scores([[-1.0, -3.0], [-0.5, -np.inf]]).tolist()
    [-2.0, -inf]
    """
    return _mean_logprob(_as_list(token_logprobs))


def perplexity_scores(token_logprobs: Sequence[Sequence[float] | np.ndarray]) -> np.ndarray:
    """Perplexity attack (Carlini et al. 2021, USENIX Security, §5, the initial membership
    inference by perplexity): -exp(mean NLL).

    The same order as :func:`loss_scores` except where exp overflows (mean NLL > ~709 nats,
    -inf) and ties there; kept as its own audit because [MX] App. F.2 reports both.

    >>> round(float(perplexity_scores([[-1.0, -3.0]])[0]), 4)  # -exp(2)
    -7.3891
    """
    nll = -_mean_logprob(_as_list(token_logprobs))
    with np.errstate(over="ignore"):
        return -np.exp(nll)


def zlib_length(text: str) -> int:
    """Length in bytes of ``zlib.compress(text.encode('utf-8'))`` at the default level (6),
    the "zlib entropy" of Carlini et al. 2021 §6.2 (their code: ``len(zlib.compress(bytes(text,
    'utf-8')))``). Always >= 8 (zlib header + checksum), so the ratio below is defined.

    >>> zlib_length(""), zlib_length("ab" * 100) < zlib_length("the quick brown fox jumps over it")
    (8, True)
    """
    if not isinstance(text, str):
        raise InputError(f"zlib needs the text as a string, got {type(text).__name__}")
    return len(zlib.compress(text.encode("utf-8")))


def zlib_scores(
    token_logprobs: Sequence[Sequence[float] | np.ndarray], texts: Sequence[str]
) -> np.ndarray:
    """zlib ratio (Carlini et al. 2021 §6.2): -(mean NLL in nats) / zlib_length(text).

    A text the model finds easy relative to how compressible it is scores high.

    >>> zlib_scores([[-1.0, -3.0]], [""]).tolist()  # -2 nats / 8 bytes
    [-0.25]
    """
    lp = _as_list(token_logprobs)
    texts = tuple(texts)
    if len(texts) != len(lp):
        raise InputError(f"zlib: {len(texts)} texts for {len(lp)} scored token arrays")
    nll = -_mean_logprob(lp)
    z = np.array([zlib_length(t) for t in texts], dtype=np.float64)
    return -nll / z


def reference_scores(
    token_logprobs: Sequence[Sequence[float] | np.ndarray],
    reference_token_logprobs: Sequence[Sequence[float] | np.ndarray],
    *,
    per: str = "text",
) -> np.ndarray:
    """Reference-model calibration (Carlini et al. 2021 §6.2, "comparing to other neural
    language models"; [MX] App. F.2): target loss minus reference loss, negated so that a text
    the target finds easier than the reference scores high.

    ``per="text"`` (default) compares total log-likelihoods, log p_target(text) -
    log p_ref(text) = (reference total NLL) - (target total NLL): both are the log-probability of
    the same string, so this is well-defined when the two models tokenize differently.
    ``per="token"`` compares mean per-token losses, which only means something under one
    tokenizer; it is refused when a text's token counts differ between the two models.

    >>> reference_scores([[-1.0, -3.0]], [[-2.0, -4.0, -1.0]]).tolist()  # -4 - (-7): easier for the target
    [3.0]
    """
    lp = _as_list(token_logprobs)
    ref = _as_list(reference_token_logprobs)
    if len(ref) != len(lp):
        raise InputError(f"reference: {len(ref)} reference arrays for {len(lp)} texts")
    if per == "text":
        t, r = _ragged_sum(lp), _ragged_sum(ref)
    elif per == "token":
        for i, (a, b) in enumerate(zip(lp, ref)):
            if a.size != b.size:
                raise InputError(
                    f"reference per='token': text {i} has {a.size} target tokens but {b.size} reference "
                    f"tokens, so the two models tokenize differently",
                    hint="use per='text' (total log-likelihood of the string), which is tokenizer-independent",
                )
        t, r = _mean_logprob(lp), _mean_logprob(ref)
    else:
        raise DomainError(f"per must be 'text' or 'token', got {per!r}")
    with np.errstate(invalid="ignore"):
        out = t - r
    # -inf - (-inf): both models give the text probability zero; no evidence either way.
    out[np.isneginf(t) & np.isneginf(r)] = 0.0
    return out


def _exact_k(k) -> Fraction:
    """k in (0, 1], read exactly as written (see :func:`metrics.exact_level`)."""
    if (
        not isinstance(k, bool)
        and isinstance(k, (int, float, np.integer, np.floating, Fraction))
        and k == 1
    ):
        return Fraction(1)
    if isinstance(k, str) and k.strip() in ("1", "1.0", "1/1"):
        return Fraction(1)
    try:
        return exact_level("k", k)
    except DomainError:
        raise DomainError(
            f"k (the fraction of lowest-probability tokens kept) must lie in (0, 1], got {k!r}",
            hint="e.g. k=0.2 for the 20% of [MX] App. F.2",
        ) from None


def min_k_count(n_tokens: int, *, k: float | str | Fraction = 0.2) -> int:
    """Tokens kept by min-k% for a text of ``n_tokens``: max(1, floor(k n)), k exact.

    k in (0, 1]; read as written (0.29 -> 29/100), so floor(0.29 x 100) = 29, where binary
    floating point would give 28.

    >>> min_k_count(100, k=0.29), min_k_count(3)
    (29, 1)
    """
    n = int(n_tokens)
    if n < 1:
        raise InputError(f"min-k% needs at least one token, got {n_tokens}")
    kk = _exact_k(k)
    return max(1, (kk.numerator * n) // kk.denominator)


def _min_k_mean(values: np.ndarray, k: Fraction) -> float:
    m = max(1, (k.numerator * values.size) // k.denominator)
    # np.partition puts the m smallest first (order among them irrelevant for the mean).
    low = np.partition(values, m - 1)[:m] if m < values.size else values
    return float(np.mean(low))


def min_k_scores(
    token_logprobs: Sequence[Sequence[float] | np.ndarray], *, k: float | str | Fraction = 0.2
) -> np.ndarray:
    """Min-k% Prob (Shi et al. 2024, ICLR, §3, Eq. 1): the mean of the ``min_k_count`` lowest
    token log-probs of each text. k = 0.2 as in [MX] App. F.2.

    >>> min_k_scores([[-1.0, -5.0, -3.0, -0.5]], k=0.5).tolist()  # the 2 lowest: (-5 - 3) / 2
    [-4.0]
    """
    kk = _exact_k(k)
    return np.array([_min_k_mean(a, kk) for a in _as_list(token_logprobs)], dtype=np.float64)


def min_k_plus_plus_token_scores(
    token_logprobs: np.ndarray, token_mean: np.ndarray, token_std: np.ndarray
) -> np.ndarray:
    """Per-token (log p(x_t) - mu_t) / sigma_t (Zhang et al. 2024, Eq. 3).

    sigma_t = 0 means the next-token distribution is uniform on its support, so every supported
    token has log p = mu_t: the standardized score is then 0 for a supported token and -inf for
    a token of probability zero (rather than 0/0)."""
    lp, mu, sd = (np.asarray(a, dtype=np.float64) for a in (token_logprobs, token_mean, token_std))
    with np.errstate(divide="ignore", invalid="ignore"):
        z = (lp - mu) / sd
    zero = sd == 0
    z[zero] = np.where(np.isneginf(lp[zero]), -np.inf, 0.0)
    return z


def min_k_plus_plus_scores(
    token_logprobs: Sequence[Sequence[float] | np.ndarray],
    token_mean: Sequence[Sequence[float] | np.ndarray],
    token_std: Sequence[Sequence[float] | np.ndarray],
    *,
    k: float | str | Fraction = 0.2,
) -> np.ndarray:
    """Min-K%++ (Zhang et al. 2024, arXiv:2404.02936, ICLR 2025, Eq. 3-4): min-k% over the
    standardized token scores (log p - mu) / sigma, mu and sigma the mean and standard deviation
    of log p(v) for v drawn from the model's own next-token distribution.

    >>> min_k_plus_plus_scores([[-1.0, -3.0]], [[-1.5, -1.5]], [[0.5, 1.0]], k=0.5).tolist()  # z = (1, -1.5)
    [-1.5]
    """
    lp = _as_list(token_logprobs)
    mu, sd = _as_list_free(token_mean), _as_list_free(token_std)
    if not (len(lp) == len(mu) == len(sd)):
        raise InputError(f"min-k++: {len(lp)} log-prob arrays, {len(mu)} means, {len(sd)} stds")
    kk = _exact_k(k)
    out = np.empty(len(lp))
    for i, (a, m, s) in enumerate(zip(lp, mu, sd)):
        if not (a.shape == m.shape == s.shape):
            raise InputError(
                f"min-k++: text {i} has {a.size} log-probs, {m.size} means, {s.size} stds"
            )
        out[i] = _min_k_mean(min_k_plus_plus_token_scores(a, m, s), kk)
    return out


def _as_list_free(values) -> tuple[np.ndarray, ...]:
    return tuple(np.asarray(v, dtype=np.float64).reshape(-1) for v in values)


def token_mean_std(
    full_logprobs: np.ndarray | Sequence[np.ndarray],
) -> tuple[np.ndarray, np.ndarray]:
    """mu_t = sum_v p_t(v) log p_t(v) and sigma_t = sqrt(sum_v p_t(v) (log p_t(v) - mu_t)^2)
    from full next-token log-distributions [T, V] (0 log 0 = 0). A reference for the scoring
    engine's fused computation, and for tests.

    >>> mu, sd = token_mean_std(np.log([[0.5, 0.5], [0.25, 0.75]]))
    >>> mu.round(4).tolist(), sd.round(4).tolist()
    ([-0.6931, -0.5623], [0.0, 0.4757])
    """
    lp = np.asarray(full_logprobs, dtype=np.float64)
    if lp.ndim != 2:
        raise InputError(f"full_logprobs must be [T, V], got shape {lp.shape}")
    p = np.exp(lp)  # [T, V]
    finite = np.isfinite(lp)
    plogp = np.where(finite, p * np.where(finite, lp, 0.0), 0.0)
    mu = plogp.sum(axis=1)  # [T]
    dev = np.where(finite, lp - mu[:, None], 0.0)  # [T, V]
    var = np.where(finite, p * dev * dev, 0.0).sum(axis=1)
    return mu, np.sqrt(np.maximum(var, 0.0))


# ------------------------------------------------------------------------------- registry
@dataclass(frozen=True)
class Attack:
    """A registered attack: ``fn(data: ScoredTexts, **params) -> scores [n]`` (higher = member).

    ``requires`` names the :class:`ScoredTexts` fields it reads; ``defaults`` its parameters.
    """

    name: str
    citation: str
    measures: str
    fn: Callable[..., np.ndarray] = field(repr=False)
    requires: tuple[str, ...] = ("token_logprobs",)
    defaults: tuple[tuple[str, object], ...] = ()

    def describe(self) -> dict:
        return {
            "name": self.name,
            "citation": self.citation,
            "measures": self.measures,
            "requires": list(self.requires),
            "defaults": dict(self.defaults),
        }


_REGISTRY: dict[str, Attack] = {}
_FIELDS = (
    "token_logprobs",
    "token_mean",
    "token_std",
    "texts",
    "reference_token_logprobs",
    "shadow_stats",
    "shadow_in",
)


def register_attack(
    name: str,
    fn: Callable[..., np.ndarray] | None = None,
    *,
    citation: str,
    measures: str,
    requires: Sequence[str] = ("token_logprobs",),
    overwrite: bool = False,
) -> Callable[..., Any]:
    """Register ``fn(data: ScoredTexts, **params) -> np.ndarray`` under ``name``.

    Usable directly or as a decorator (``@register_attack("mine", citation=..., measures=...)``).
    Keyword parameters of ``fn`` with defaults become the attack's settable parameters. Returns
    ``fn`` (or, without ``fn``, the decorator).

    >>> import memclaim as mc
    >>> @mc.register_attack("neg-length", citation="a doctest", measures="minus the token count")
    ... def neg_length(data):
    ...     return -np.array([a.size for a in data.token_logprobs], dtype=float)
    >>> run_attack("neg-length", ScoredTexts.build([[-1.0, -2.0], [-0.5]])).tolist()
    [-2.0, -1.0]
    >>> unregister_attack("neg-length")
    """
    if not isinstance(name, str) or not name.strip():
        raise DomainError(f"attack name must be a non-empty string, got {name!r}")
    if not citation or not measures:
        raise DomainError(
            f"attack {name!r} needs a citation and a one-line statement of what it measures"
        )
    req = tuple(requires)
    unknown = [r for r in req if r not in _FIELDS]
    if unknown:
        raise DomainError(
            f"attack {name!r} requires unknown field(s) {unknown}", hint=f"fields: {_FIELDS}"
        )

    def deco(f):
        if not callable(f):
            raise DomainError(f"attack {name!r}: fn must be callable, got {f!r}")
        if name in _REGISTRY and not overwrite:
            raise DomainError(
                f"an attack named {name!r} is already registered",
                hint="choose another name or pass overwrite=True",
            )
        sig = inspect.signature(f)
        defaults = tuple(
            (p.name, p.default)
            for p in list(sig.parameters.values())[1:]
            if p.default is not inspect.Parameter.empty
        )
        _REGISTRY[name] = Attack(
            name=name, citation=citation, measures=measures, fn=f, requires=req, defaults=defaults
        )
        return f

    return deco if fn is None else deco(fn)


def unregister_attack(name: str) -> None:
    """Remove the attack registered under ``name`` (an unknown name is a DomainError).

    >>> register_attack("tmp", lambda data: np.zeros(len(data)), citation="a doctest", measures="nothing") is not None
    True
    >>> unregister_attack("tmp"); "tmp" in available_attacks()
    False
    """
    if name not in _REGISTRY:
        raise DomainError(f"no attack named {name!r}", hint=f"registered: {available_attacks()}")
    del _REGISTRY[name]


def get_attack(name: str) -> Attack:
    """The registered :class:`Attack` named ``name`` (an unknown name is a DomainError listing them).

    >>> get_attack("min-k").defaults
    (('k', 0.2),)
    """
    try:
        return _REGISTRY[name]
    except KeyError:
        raise DomainError(
            f"unknown attack {name!r}", hint=f"registered attacks: {', '.join(available_attacks())}"
        ) from None


def available_attacks() -> tuple[str, ...]:
    """The names of the registered attacks, built-in ones first, in registration order.

    >>> available_attacks()[:6]
    ('loss', 'perplexity', 'zlib', 'reference', 'min-k', 'min-k++')
    """
    return tuple(_REGISTRY)


def describe_attacks() -> list[dict]:
    """:meth:`Attack.describe` of every registered attack: its name, citation, what it measures,
    the fields it reads and its parameters' defaults.

    >>> describe_attacks()[0]["name"], describe_attacks()[0]["requires"]
    ('loss', ['token_logprobs'])
    """
    return [a.describe() for a in _REGISTRY.values()]


def run_attack(name: str, data: ScoredTexts, **params: Any) -> np.ndarray:
    """Scores [n] of attack ``name`` on ``data`` (higher = more likely member).

    >>> run_attack("min-k", ScoredTexts.build([[-1.0, -2.0], [-0.5], [-3.0, -3.0, -1.0]]), k=0.5).tolist()
    [-2.0, -0.5, -3.0]
    """
    attack = get_attack(name)
    if not isinstance(data, ScoredTexts):
        raise InputError(
            f"run_attack needs a ScoredTexts (see ScoredTexts.build), got {type(data).__name__}"
        )
    missing = [r for r in attack.requires if not data.has(r)]
    if missing:
        raise InputError(
            f"attack {name!r} needs {', '.join(missing)}, which the input does not carry",
            hint=f"pass {', '.join(missing)} to ScoredTexts.build",
        )
    allowed = dict(attack.defaults)
    bad = [p for p in params if p not in allowed]
    if bad:
        raise DomainError(
            f"attack {name!r} has no parameter(s) {bad}",
            hint=f"its parameters: {sorted(allowed) or 'none'}",
        )
    scores = np.asarray(attack.fn(data, **params), dtype=np.float64)
    if scores.shape != (len(data),):
        raise InputError(f"attack {name!r} returned shape {scores.shape}, expected ({len(data)},)")
    if np.isnan(scores).any():
        raise InputError(
            f"attack {name!r} returned NaN for text {int(np.flatnonzero(np.isnan(scores))[0])}"
        )
    return scores


@dataclass(frozen=True)
class AttackEvaluation(ResultMixin):
    """An attack's scores on members and non-members with AUC (DeLong) and, if asked, the TPR at
    a certified FPR."""

    attack: str
    citation: str
    measures: str
    params: dict
    auc: AUCResult
    tpr: TPRResult | None
    member_scores: np.ndarray
    nonmember_scores: np.ndarray


def evaluate_attack(
    name: str,
    members: ScoredTexts,
    nonmembers: ScoredTexts,
    *,
    fpr: str | float | Fraction | None = None,
    confidence: float = 0.95,
    **params: Any,
) -> AttackEvaluation:
    """Run attack ``name`` once on members + non-members together (so that anything pooled
    across texts, such as LiRA's global variance, is pooled over both) and measure it.

    Needs at least two members and two non-members; refuses sets scored under different
    procedures; with ``fpr``, refuses when the non-members cannot certify it.

    >>> m = ScoredTexts.build([[-0.1, -0.2], [-0.3], [-0.2, -0.1]])
    >>> n = ScoredTexts.build([[-2.0, -1.0], [-1.5], [-0.25, -3.0]])
    >>> e = evaluate_attack("loss", m, n, fpr=0.5)
    >>> e.auc.auc, round(e.auc.low, 3), e.tpr.tpr, e.tpr.threshold
    (1.0, 0.216, 1.0, -1.5)
    """
    if len(members) < 2 or len(nonmembers) < 2:
        raise InputError(
            f"an audit needs at least two members and two non-members, got "
            f"{len(members)} and {len(nonmembers)}",
            hint="add texts; AUC intervals and thresholds are undefined below two of each",
        )
    both = ScoredTexts.concat(members, nonmembers)
    scores = run_attack(name, both, **params)
    xm, xn = scores[: len(members)], scores[len(members) :]
    attack = get_attack(name)
    return AttackEvaluation(
        attack=name,
        citation=attack.citation,
        measures=attack.measures,
        params={**dict(attack.defaults), **params},
        auc=roc_auc(xm, xn, confidence=confidence),
        tpr=None if fpr is None else tpr_at_fpr(xm, xn, fpr=fpr, confidence=confidence),
        member_scores=xm,
        nonmember_scores=xn,
    )


# ------------------------------------------------------------------------- built-in attacks
def _loss(data: ScoredTexts) -> np.ndarray:
    return loss_scores(data.token_logprobs)


def _perplexity(data: ScoredTexts) -> np.ndarray:
    return perplexity_scores(data.token_logprobs)


def _zlib(data: ScoredTexts) -> np.ndarray:
    return zlib_scores(data.token_logprobs, data.texts)


def _reference(data: ScoredTexts, per: str = "text") -> np.ndarray:
    return reference_scores(data.token_logprobs, data.reference_token_logprobs, per=per)


def _min_k(data: ScoredTexts, k=0.2) -> np.ndarray:
    return min_k_scores(data.token_logprobs, k=k)


def _min_k_pp(data: ScoredTexts, k=0.2) -> np.ndarray:
    return min_k_plus_plus_scores(data.token_logprobs, data.token_mean, data.token_std, k=k)


def _lira_target_stats(data: ScoredTexts) -> np.ndarray:
    return lira_statistic(data.token_logprobs, kind=data.shadow_statistic)


def _lira_on(data: ScoredTexts, variance: str = "auto", min_per_example: int = 32) -> np.ndarray:
    return lira_online(
        _lira_target_stats(data),
        data.shadow_stats,
        data.shadow_in,
        variance=variance,
        min_per_example=min_per_example,
    ).scores


def _lira_off(data: ScoredTexts, variance: str = "auto", min_per_example: int = 32) -> np.ndarray:
    return lira_offline(
        _lira_target_stats(data),
        data.shadow_stats,
        data.shadow_in,
        variance=variance,
        min_per_example=min_per_example,
    ).scores


_CARLINI21 = (
    "Carlini et al. 2021, Extracting Training Data from Large Language Models, USENIX Security"
)
register_attack(
    "loss",
    _loss,
    citation="Yeom et al. 2018, Privacy Risk in Machine Learning, CSF; [MX] App. F.2",
    measures="how well the model predicts the text: mean token log-probability (minus mean NLL)",
)
register_attack(
    "perplexity",
    _perplexity,
    citation=f"{_CARLINI21}, §5; [MX] App. F.2",
    measures="the model's perplexity on the text (lower perplexity = member)",
)
register_attack(
    "zlib",
    _zlib,
    requires=("token_logprobs", "texts"),
    citation=f"{_CARLINI21}, §6.2; [MX] App. F.2",
    measures="model loss relative to the text's zlib-compressed length (easy for the model, hard to compress)",
)
register_attack(
    "reference",
    _reference,
    requires=("token_logprobs", "reference_token_logprobs"),
    citation=f"{_CARLINI21}, §6.2; [MX] App. F.2",
    measures="how much better the target predicts the text than a reference model does (log-likelihood ratio)",
)
register_attack(
    "min-k",
    _min_k,
    citation="Shi et al. 2024, Detecting Pretraining Data from Large Language Models, ICLR; [MX] App. F.2",
    measures="mean log-probability of the text's k% least likely tokens (k = 20% default)",
)
register_attack(
    "min-k++",
    _min_k_pp,
    requires=("token_logprobs", "token_mean", "token_std"),
    citation="Zhang et al. 2024, Min-K%++, arXiv:2404.02936 (ICLR 2025); [MX] App. F.2",
    measures="min-k% of token log-probs standardized by the mean/std of log p under the model's own "
    "next-token distribution",
)
register_attack(
    "lira-online",
    _lira_on,
    requires=("token_logprobs", "shadow_stats", "shadow_in"),
    citation="Carlini et al. 2022, Membership Inference Attacks From First Principles, IEEE S&P, Alg. 1; "
    "[MX] App. F.2",
    measures="per-example likelihood ratio of the text's logit confidence under IN vs OUT shadow-model Gaussians",
)
register_attack(
    "lira-offline",
    _lira_off,
    requires=("token_logprobs", "shadow_stats", "shadow_in"),
    citation="Carlini et al. 2022, Membership Inference Attacks From First Principles, IEEE S&P (offline); "
    "[MX] App. F.2",
    measures="how far the text's logit confidence sits above its OUT shadow-model Gaussian (one-sided z-score)",
)

BUILTIN_ATTACKS: tuple[str, ...] = available_attacks()
