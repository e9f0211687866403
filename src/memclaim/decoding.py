"""Decoding policies as exact log-probability transforms ([EM] §2, Eq. 1).

A decoding policy phi turns the model's next-token logits into a distribution q_{theta,phi}(. | context).
The score of a suffix s = (s_1..s_l) given a prompt p is

    log q_{theta,phi}(s | p) = sum_t log q_{theta,phi}(s_t | p, s_<t)            ([EM] Eq. 1)

computed by teacher forcing, in float32 or better whatever the model dtype, summing logs
(never multiplying probabilities), and ``-inf`` when the policy cannot emit a target token.

Policy strings (``Policy.parse``)::

    full                     untruncated softmax at temperature 1
    greedy                   argmax decoding: q = 1 on the argmax token, 0 elsewhere
    temperature:T            softmax of logits / T, no truncation (T >= MIN_TEMPERATURE = 4e-270)
    top-k:K                  keep the K largest logits (ties at the boundary: see below)
    top-p:P                  nucleus: smallest high-probability set with mass >= P (HF rule)
    top-k:40,temperature:0.7 combinations, comma separated, any order

Combinations are applied in HuggingFace's order whatever the order in the string:
temperature, then top-k, then top-p (``transformers`` builds its warpers in that order).

Tie rule at the top-k boundary (matches ``transformers.TopKLogitsWarper``): a token is kept iff
its (temperature-scaled) logit is >= the K-th largest value. Every token tied with the K-th
largest is therefore kept, so the support can hold more than K tokens when there are ties.

Top-p follows ``transformers.TopPLogitsWarper`` operation for operation: sort ascending, drop
the prefix whose cumulative probability is <= 1 - P, always keep the largest token. Ties at the
top-p boundary are ordered by ``torch.sort`` exactly as in ``transformers``.

Note: HuggingFace ``generate(do_sample=True)`` applies ``top_k=50`` unless told otherwise; in
memclaim ``temperature:T`` and ``full`` mean no truncation at all (pass ``top_k=0`` to
``generate`` to compare).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .errors import NumericsError, PolicyError

if TYPE_CHECKING:  # the annotations' names only (torch is imported when a kernel runs)
    import torch

VALID_POLICY_HELP = (
    "valid policies: 'full', 'greedy', 'temperature:T' (T >= 4e-270), 'top-k:K' (integer K >= 1), "
    "'top-p:P' (0 < P <= 1), or a comma-separated combination such as 'top-k:40,temperature:0.7'"
)
# The smallest temperature memclaim applies: the widest gap between two float32 logits (2 x
# 3.4e38) divided by it still fits a float64 (1.8e308), so every log-probability under it is
# finite (or -inf where a logit is) however small the temperature (see scale_logits).
MIN_TEMPERATURE = 4e-270


def _number(x: float) -> str:
    """``x`` as a policy string writes it: the short ``%g`` form where it reads back as ``x``
    (every policy written so far), else the shortest form that does ('0.9999999', not '1')."""
    short = f"{x:g}"
    return short if float(short) == x else repr(float(x))


@dataclass(frozen=True, order=True)
class Policy:
    """A decoding policy. Build it with :meth:`parse`; ``spec`` is its canonical string."""

    greedy: bool = False
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None

    # ----------------------------------------------------------------- parsing / printing
    @classmethod
    def parse(cls, text: str) -> Policy:
        if not isinstance(text, str) or not text.strip():
            raise PolicyError(f"empty decoding policy {text!r}", hint=VALID_POLICY_HELP)
        raw = text.strip().lower()
        if raw == "full":
            return cls()
        if raw == "greedy":
            return cls(greedy=True)
        temperature, top_k, top_p = 1.0, None, None
        seen: set[str] = set()
        for part in raw.split(","):
            part = part.strip()
            m = re.fullmatch(
                r"(temperature|temp|t|top-k|topk|top_k|top-p|topp|top_p)\s*[:=]\s*([^\s]+)", part
            )
            if part in ("full",):
                continue
            if part == "greedy":
                raise PolicyError(
                    f"'greedy' cannot be combined with other settings in {text!r}",
                    hint="greedy ignores temperature/top-k/top-p; pass it as its own --policy",
                )
            if not m:
                raise PolicyError(
                    f"unknown decoding policy component {part!r} in {text!r}",
                    hint=VALID_POLICY_HELP,
                )
            key, val = m.group(1), m.group(2)
            key = {
                "temp": "temperature",
                "t": "temperature",
                "topk": "top-k",
                "top_k": "top-k",
                "topp": "top-p",
                "top_p": "top-p",
            }.get(key, key)
            if key in seen:
                raise PolicyError(f"{key} given twice in {text!r}", hint=VALID_POLICY_HELP)
            seen.add(key)
            try:
                if key == "temperature":
                    temperature = float(val)
                    if not (math.isfinite(temperature) and temperature > 0):
                        raise ValueError

                elif key == "top-k":
                    if not re.fullmatch(r"\d+", val):
                        raise ValueError
                    top_k = int(val)
                    if top_k < 1:
                        raise ValueError
                else:
                    top_p = float(val)
                    if not (0.0 < top_p <= 1.0):
                        raise ValueError
            except ValueError:
                raise PolicyError(
                    f"bad value {val!r} for {key} in {text!r}", hint=VALID_POLICY_HELP
                ) from None
            if key == "temperature" and temperature < MIN_TEMPERATURE:
                raise PolicyError(
                    f"temperature {val!r} in {text!r} is below {MIN_TEMPERATURE:g}: a logit gap divided by it can "
                    "exceed the largest float64, so its probabilities cannot be computed",
                    hint="use a temperature of at least 4e-270 (a very small one is greedy decoding up to ties), or "
                    "the policy 'greedy'",
                )
        if top_p == 1.0:
            top_p = None  # HF skips the warper at top_p = 1.0
        return cls(temperature=temperature, top_k=top_k, top_p=top_p)

    @property
    def spec(self) -> str:
        if self.greedy:
            return "greedy"
        parts = []
        if self.temperature != 1.0:
            parts.append(f"temperature:{_number(self.temperature)}")
        if self.top_k is not None:
            parts.append(f"top-k:{self.top_k}")
        if self.top_p is not None:
            parts.append(f"top-p:{_number(self.top_p)}")
        return ",".join(parts) if parts else "full"

    def __str__(self) -> str:  # pragma: no cover - trivial
        return self.spec

    @property
    def is_binary(self) -> bool:
        """Greedy scores are 0 or -inf (a binary event), [EM] §4."""
        return self.greedy

    def to_dict(self) -> dict:
        return {
            "spec": self.spec,
            "greedy": self.greedy,
            "temperature": self.temperature,
            "top_k": self.top_k,
            "top_p": self.top_p,
        }


def parse_policies(specs: str | Policy | Sequence[str | Policy]) -> tuple[Policy, ...]:
    """Parse several policy strings; duplicates (same canonical spec) are dropped, order kept.

    >>> [p.spec for p in parse_policies(["top-k:40", "greedy", "top-k:40"])]
    ['top-k:40', 'greedy']
    >>> parse_policies(Policy.parse("greedy"))[0].spec
    'greedy'
    """
    if isinstance(specs, (str, Policy)):  # one policy, as a string or a Policy
        specs = [specs]
    out: list[Policy] = []
    for s in specs:
        p = s if isinstance(s, Policy) else Policy.parse(s)
        if p not in out:
            out.append(p)
    if not out:
        raise PolicyError("no decoding policy given", hint=VALID_POLICY_HELP)
    return tuple(out)


# --------------------------------------------------------------------------- torch kernels
# Kept in this module so that every consumer (scoring engine, near-verbatim beams, baseline
# search) uses one definition of each policy. torch is imported lazily: the claims/privacy
# math must not need it.


def _torch():
    import torch

    return torch


def policy_logprobs(logits: torch.Tensor, policy: Policy) -> torch.Tensor:
    """log q_{theta,phi}(v | context) for every vocabulary entry v ([EM] Eq. 1).

    logits: float tensor [N, V] (any float dtype; computed in float32 or float64).
    Returns [N, V] in the computation dtype, ``-inf`` outside the policy's support.
    This materializes [N, V]; the scoring engine calls it on chunks of scored positions only.

    >>> import torch
    >>> policy_logprobs(torch.tensor([[2.0, 1.0, 0.0]], dtype=torch.float64), Policy.parse("top-k:2")).exp()
    tensor([[0.7311, 0.2689, 0.0000]], dtype=torch.float64)
    """
    torch = _torch()
    x = logits if logits.dtype in (torch.float32, torch.float64) else logits.float()
    if policy.greedy:
        # [EM] §4: greedy puts all mass on the argmax (torch.argmax, as transformers' greedy search).
        out = torch.full_like(x, -math.inf)
        out.scatter_(1, x.argmax(dim=-1, keepdim=True), 0.0)
        return out
    x = _warp(x, policy)
    return torch.log_softmax(x, dim=-1)


# Temperatures from this one up are applied as transformers applies them (x / T in the logits'
# dtype): the quotients are at most 16 times the logits. Below it, see scale_logits.
FAST_TEMPERATURE = 2.0**-4


def scale_logits(x: torch.Tensor, temperature: float) -> torch.Tensor:
    """``x / temperature`` ([N, V] logits; TemperatureLogitsWarper: scores / temperature). For a
    temperature from FAST_TEMPERATURE (1/16) to the dtype's largest value, in ``x``'s dtype: the
    same operation, so the same bits, as transformers and as every score stored so far. Below
    it (temperature:1e-45 made float32 quotients of inf, then inf - inf = NaN; 1e-20 made them
    1e21, where a log-probability near 0 rounds away), and above float32's range, each row is
    first shifted by its largest logit (softmax is shift-invariant) and divided in float64: the
    quotients are <= 0 with the maximum at exactly 0, every gap of float32 logits over a
    temperature >= MIN_TEMPERATURE fits, and the order and ties of the logits are kept. The
    choice depends on the temperature only (no host synchronization); a gap of float64 logits
    past float64's range is refused.

    >>> import torch
    >>> x = torch.tensor([[2.0, 1.0, 0.0]])
    >>> scale_logits(x, 0.5).tolist()
    [[4.0, 2.0, 0.0]]
    >>> y = scale_logits(x, 1e-45)  # float32 would give [[inf, inf, 0]] and NaN log-probabilities
    >>> y.dtype, y[0, 0].item(), bool(torch.isfinite(y).all()), round(y[0, 1].item() / 1e45, 12)
    (torch.float64, 0.0, True, -1.0)
    """
    torch = _torch()
    T = float(temperature)
    if T == 1.0:
        return x
    if FAST_TEMPERATURE <= T <= torch.finfo(x.dtype).max:
        return x / T
    y = x.to(torch.float64)
    y = y - y.amax(dim=-1, keepdim=True)  # [N, V] <= 0: the largest logit of each row at 0
    if (
        x.dtype == torch.float64 and y.numel()
    ):  # float32 gaps (< 6.9e38) over T >= 4e-270 always fit
        gap = float((-y).masked_fill(~torch.isfinite(y), 0.0).amax())
        if gap / T > torch.finfo(torch.float64).max:
            raise NumericsError(
                f"temperature {_number(T)}: a logit gap of {gap:.3g} divided by it exceeds the "
                "largest float64, so the probabilities below it cannot be computed",
                hint="use a larger temperature, or the policy 'greedy' (the limit of T -> 0)",
            )
    return y / T


def _warp(x, policy: Policy):
    """Apply temperature, top-k, top-p in HuggingFace's order; removed tokens become -inf."""
    torch = _torch()
    if policy.temperature != 1.0:
        x = scale_logits(x, policy.temperature)  # TemperatureLogitsWarper: scores / temperature
    if policy.top_k is not None:
        k = min(policy.top_k, x.shape[-1])
        kth = torch.topk(x, k, dim=-1).values[..., -1:]
        x = x.masked_fill(x < kth, -math.inf)  # TopKLogitsWarper: keep every tie with the K-th
    if policy.top_p is not None:
        sorted_logits, sorted_idx = torch.sort(x, descending=False)
        cum = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
        remove_sorted = cum <= (1 - policy.top_p)
        remove_sorted[..., -1:] = False  # min_tokens_to_keep = 1
        remove = remove_sorted.scatter(1, sorted_idx, remove_sorted)
        x = x.masked_fill(remove, -math.inf)
    return x


def policy_target_logprob(
    logits: torch.Tensor,
    targets: torch.Tensor,
    policy: Policy,
    *,
    log_softmax_t1: torch.Tensor | None = None,
    top_t1: torch.Tensor | None = None,
    groups: Sequence[tuple[int, int]] | None = None,
) -> torch.Tensor:
    """log q_{theta,phi}(target_i | context_i) for each row i; [N, V] logits, [N] targets -> [N].

    Only the normalizer over the policy's support is needed, so top-k avoids building a masked
    copy of the row: log Z = logsumexp over the K largest values plus the extra ties at the
    boundary, which equals the masked logsumexp of the HF rule. ``log_softmax_t1`` may pass an
    already computed ``log_softmax(logits)`` (the engine has it) for the untruncated T = 1 case,
    ``top_t1`` the values of ``torch.topk(logits, m)`` for some m > K (or m = V) for top-K at
    T = 1; ``groups``: see :func:`topk_normalizer`. Row-wise log_softmax is used rather than
    logsumexp: on CPU it is one fused pass.

    >>> import torch
    >>> x = torch.tensor([[2.0, 1.0, 0.0]], dtype=torch.float64)
    >>> fast = policy_target_logprob(x, torch.tensor([1]), Policy.parse("top-k:2"))
    >>> bool(torch.isclose(fast, policy_logprobs(x, Policy.parse("top-k:2"))[:, 1], rtol=1e-15, atol=0))
    True
    """
    torch = _torch()
    x = logits if logits.dtype in (torch.float32, torch.float64) else logits.float()
    t = targets.view(-1, 1)
    if policy.greedy:
        hit = x.argmax(dim=-1) == targets
        return torch.where(
            hit, torch.zeros((), dtype=x.dtype), torch.full((), -math.inf, dtype=x.dtype)
        )
    if policy.top_p is None and policy.top_k is not None:
        if policy.temperature != 1.0:
            x = scale_logits(x, policy.temperature)
        k = min(policy.top_k, x.shape[-1])
        kth, log_z = topk_normalizer(
            x, k, top=top_t1 if policy.temperature == 1.0 else None, groups=groups
        )
        xt = x.gather(1, t)
        out = torch.where(xt >= kth, xt - log_z, torch.full_like(xt, -math.inf))
        return out.view(-1)
    if policy.top_p is None and policy.top_k is None:
        if policy.temperature == 1.0 and log_softmax_t1 is not None:
            return log_softmax_t1.gather(1, t).view(-1)
        if policy.temperature != 1.0:
            x = scale_logits(x, policy.temperature)
        return torch.log_softmax(x, dim=-1).gather(1, t).view(-1)
    lp = policy_logprobs(x, policy)
    return lp.gather(1, t).view(-1)


def topk_normalizer(
    x: torch.Tensor,
    k: int,
    *,
    top: torch.Tensor | None = None,
    groups: Sequence[tuple[int, int]] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(K-th largest value [N, 1], log Z over the HF top-k support [N, 1]) of rows x [N, V].

    The support is every token >= the K-th largest (ties at the boundary kept, as in
    TopKLogitsWarper). topk(K+1) shows whether the boundary is tied; only rows where it is pay
    for an exact count of the tied tokens over the whole row. ``top``: the values of
    ``torch.topk(x, m)`` already computed for some m > K (or m = V), sorted descending.

    ``groups``: row ranges [a, b) whose tie corrections are computed in one call each (default:
    all rows in one call). torch.logaddexp's vectorized and scalar paths differ in the last bit,
    so which path a row takes depends on how many tied rows share its call: the CPU engine
    passes its per-window ranges so that a window's bits do not depend on its neighbours.

    >>> import torch
    >>> kth, log_z = topk_normalizer(torch.tensor([[3.0, 1.0, 1.0, 0.0]], dtype=torch.float64), 2)
    >>> float(kth), round(float(log_z.exp()), 4)  # the tie at the boundary is kept: e^3 + 2e
    (1.0, 25.5221)
    """
    torch = _torch()
    V = x.shape[-1]
    if top is None:
        top = torch.topk(x, min(k + 1, V), dim=-1).values  # [N, k(+1)]
    kth = top[:, k - 1 : k]  # [N, 1]
    log_z = torch.logsumexp(top[:, :k], dim=-1, keepdim=True)
    if k < V:
        tied = (top[:, k] == top[:, k - 1]).nonzero().view(-1)
        if tied.numel():
            # extra copies of exp(kth) beyond the K returned by topk: log(Z + extra * e^kth)
            extra = ((x[tied] >= kth[tied]).sum(dim=-1, keepdim=True) - k).to(
                x.dtype
            )  # [n_tied, 1]
            term = kth[tied] + torch.log(extra)
            if groups is None:
                log_z[tied] = torch.logaddexp(log_z[tied], term)
            else:
                for a, b in groups:
                    sel = ((tied >= a) & (tied < b)).nonzero().view(-1)
                    if sel.numel():
                        rows = tied[sel]
                        log_z[rows] = torch.logaddexp(log_z[rows], term[sel])
    return kth, log_z
