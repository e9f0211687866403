"""The batched teacher-forcing engine ([EM] §2 Eq. 1, §4; App. D.3).

One forward pass over a batch of windows yields, per window, the statistics a run asks for
(:class:`StatSet`; all of them unless told otherwise):

  * ``policy_logq``: log q_{theta,phi}(s | p) under every requested decoding policy, and per token,
    so shorter suffix lengths come from cumulative sums without another pass ([EM] App. D.3);
  * ``greedy``: the greedy-match flag (teacher-forced argmax == target at every position);
  * ``margin``: the smallest top-1/top-2 logit margin, so near-ties are reported, not hidden
    ([EM] App. A.2);
  * ``token_logprob``: per-token full-softmax log-probs (loss, min-k%);
  * ``token_moments``: per-token mean and std of log p under the full next-token distribution
    (min-k%++);
  * ``rank``: the target-token rank (1 = argmax).

A census needs only ``policy_logq`` + ``greedy`` + ``margin`` (:data:`CENSUS_STATS`) and does not
pay for the full-softmax moments and ranks an audit needs.

The body runs over prompt + suffix[:-1]; the unembedding runs only at the suffix positions, in
chunks of rows sized so a chunk's [rows, V] float32 logits stay under ``logit_chunk_bytes``: a
[batch, time, vocab] tensor is never built (Gemma's vocabulary is 262,144).

Two schedules compute the same quantities (``schedule=``):

  * ``"cpu-invariant"`` (the default on the CPU): statistics window by window, in fixed shapes, so at
    a given thread count a window's scores are bit-identical for every batch size, and bit-identical
    to the scores this engine recorded before the batched schedule existed on that CPU and thread
    count (tests/data/fixtures/engine_cpu_v1.npz); across thread counts and CPUs the same float32
    sums run in another order, and scores agree within float32 rounding (docs/reproducibility.md).
  * ``"batched"`` (the default on CUDA): statistics for all windows of a chunk at once (no
    per-window Python loop), branch-free (no ``.item()``/``nonzero`` inside a batch: the top-k
    boundary ties are counted for every row), results gathered into one device buffer and copied
    to the host once per batch (pinned memory on CUDA, as are the input ids). It equals the CPU
    schedule to :data:`BATCHED_TOLERANCE` (float reassociation, not a different rule).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from ..decoding import Policy, _warp, policy_target_logprob, scale_logits
from ..errors import InputError
from ..fsutil import available_memory as cpu_available_memory
from .heap import retain_freed_memory

if TYPE_CHECKING:
    from transformers import PretrainedConfig

NEAR_TIE_MARGIN = 1e-5  # [EM] App. A.2: argmax flips under numeric noise below this margin
# Measured with MKL on this project's CPUs (tests/scoring/test_engine.py): at a fixed thread count, sgemm
# results for a row are identical for every row count >= 12 (on Intel Xeons in MKL's strict mode
# also across thread counts; on an AMD EPYC not: 3 threads reorder some sums); calls with 1-3, 5-7
# or 9-11 rows take other kernels. The engine never issues a matmul with fewer rows.
MIN_GEMM_ROWS = 12
# The batched schedule against the CPU schedule on the same model (tests/scoring/test_engine_batched.py):
# per token, |difference| <= atol + rtol * |value| nats (log q, log p, mean, std); ranks and
# greedy flags equal wherever the top-1/top-2 margin exceeds NEAR_TIE_MARGIN.
BATCHED_TOLERANCE = {"atol": 2e-5, "rtol": 1e-5}
SCHEDULES = ("auto", "cpu-invariant", "batched")


# --------------------------------------------------------------------------- statistic sets
STAT_NAMES = ("policy_logq", "greedy", "margin", "token_logprob", "token_moments", "rank")
# the BatchScores fields each statistic fills
STAT_FIELDS = {
    "policy_logq": ("logq", "token_logq"),
    "greedy": ("greedy_match",),
    "margin": ("min_margin",),
    "token_logprob": ("token_logprob",),
    "token_moments": ("token_mean", "token_std"),
    "rank": ("token_rank",),
}
STAT_PRESETS = {"all": STAT_NAMES, "census": ("policy_logq", "greedy", "margin")}
STAT_HELP = (
    f"statistics are {', '.join(STAT_NAMES)} (or the presets "
    f"{', '.join(f'{k!r}' for k in STAT_PRESETS)}), joined with '+', e.g. 'greedy+margin+policy_logq'"
)


@dataclass(frozen=True)
class StatSet:
    """Which per-window statistics the engine computes; hashable, ordered by name.

    ``spec`` is the stable string form (the sorted names joined with ``+``), recorded with a
    stored unit; :meth:`parse` reads it back. A unit computed with set A can serve a run that
    needs set B iff ``A.covers(B)``.
    """

    names: frozenset

    def __post_init__(self):
        bad = sorted(set(self.names) - set(STAT_NAMES))
        if bad:
            raise InputError(f"unknown statistic(s) {bad}", hint=STAT_HELP)
        if not self.names:
            raise InputError("an empty set of statistics", hint=STAT_HELP)
        object.__setattr__(self, "names", frozenset(self.names))

    @classmethod
    def of(cls, stats: StatSet | str | Iterable[str]) -> StatSet:
        """A StatSet from a StatSet, a spec string ('census', 'all', 'greedy+margin') or names."""
        if isinstance(stats, StatSet):
            return stats
        if isinstance(stats, str):
            return cls.parse(stats)
        if isinstance(stats, (bytes, Mapping)) or not isinstance(
            stats, Iterable
        ):  # stats=5, True, b"rank"
            raise InputError(
                f"stats={stats!r} is not a set of statistics (got {type(stats).__name__})",
                hint=STAT_HELP,
            )
        names: set[str] = set()
        for s in stats:
            if not isinstance(s, str):
                raise InputError(f"statistic {s!r} is not a name", hint=STAT_HELP)
            names |= set(STAT_PRESETS.get(s, (s,)))
        return cls(frozenset(names))

    @classmethod
    def parse(cls, text: str) -> StatSet:
        parts = [p.strip() for p in str(text).split("+")]
        if not all(parts):
            raise InputError(f"malformed statistics {text!r}", hint=STAT_HELP)
        return cls.of(parts)

    @property
    def spec(self) -> str:
        return "+".join(sorted(self.names))

    def __contains__(self, name: str) -> bool:
        return name in self.names

    def covers(self, other: StatSet | str | Iterable[str]) -> bool:
        return StatSet.of(other).names <= self.names

    @property
    def fields(self) -> tuple[str, ...]:
        """The BatchScores fields this set fills (the others are None)."""
        return tuple(f for n in STAT_NAMES if n in self.names for f in STAT_FIELDS[n])

    def __str__(self) -> str:  # pragma: no cover - trivial
        return self.spec

    def to_dict(self) -> dict:
        return {"spec": self.spec, "names": sorted(self.names)}


ALL_STATS = StatSet(frozenset(STAT_NAMES))
CENSUS_STATS = StatSet(frozenset(STAT_PRESETS["census"]))


def run_stats(stats: StatSet | str | Iterable[str] | None = None) -> StatSet:
    """The statistics a scoring run computes and stores: ``stats`` (default: every statistic) plus
    :data:`CENSUS_STATS` (log q, greedy flag and margin), which every results table holds (the
    greedy and near-tie columns cost one top-2 per row).

    >>> run_stats("greedy").spec
    'greedy+margin+policy_logq'
    """
    s = ALL_STATS if stats is None else StatSet.of(stats)
    return StatSet(s.names | CENSUS_STATS.names)


@dataclass(frozen=True, eq=False)
class BatchScores:
    """Per-window outputs of one batch (numpy, float64 where it is a log-probability); a frozen
    value (``eq=False``: arrays have no single truth value; compare fields with numpy).

    Shapes: B windows, S suffix tokens, P policies. A field whose statistic was not asked for
    (see :class:`StatSet`, :data:`STAT_FIELDS`) is None; :attr:`stats` says which were.
    """

    logq: (
        np.ndarray | None
    )  # [B, P] float64, sum over tokens, -inf when a token is outside the support
    token_logq: np.ndarray | None  # [B, P, S] float64
    greedy_match: np.ndarray | None  # [B] bool
    min_margin: np.ndarray | None  # [B] float64, min over positions of top1 - top2 logit
    token_logprob: np.ndarray | None  # [B, S] float64, full softmax at temperature 1
    token_mean: np.ndarray | None  # [B, S] float64, E_{v~p}[log p(v)]
    token_std: np.ndarray | None  # [B, S] float64, Std_{v~p}[log p(v)]
    token_rank: np.ndarray | None  # [B, S] int64, 1 + #{v : logit_v > logit_target}

    @property
    def stats(self) -> StatSet:
        """The statistics these scores hold (those whose fields are not None)."""
        return StatSet(
            frozenset(
                n for n, fs in STAT_FIELDS.items() if all(getattr(self, f) is not None for f in fs)
            )
        )

    @property
    def n_windows(self) -> int:
        return len(
            next(
                getattr(self, f) for f in self.__dataclass_fields__ if getattr(self, f) is not None
            )
        )

    @classmethod
    def concat(cls, parts: Sequence[BatchScores]) -> BatchScores:
        """Concatenate batches along the window axis (all parts must hold the same statistics)."""
        if not parts:
            raise InputError("no batches to concatenate")
        if len(parts) == 1:
            return parts[0]
        kinds = {p.stats for p in parts}
        if len(kinds) != 1:
            raise InputError(f"batches hold different statistics: {sorted(k.spec for k in kinds)}")
        return cls(
            **{
                f: None
                if getattr(parts[0], f) is None
                else np.concatenate([getattr(p, f) for p in parts], axis=0)
                for f in cls.__dataclass_fields__
            }
        )


def _chunk_rows(vocab: int, logit_chunk_bytes: int) -> int:
    return max(1, logit_chunk_bytes // (4 * vocab))


# The CPU schedule's statistics run over blocks of STAT_BLOCK_ROWS rows, fewer where their
# [rows, V] float32 logits would pass STAT_BLOCK_BYTES, so that the dozen passes over them
# (log-softmax, exp, products, compares, top-k) read cache, not memory, and each torch call
# still has rows enough to pay for itself. Measured on a 2-core AMD EPYC (Zen 3, 32 MB L3;
# benchmarks/profile_scoring.py), 16 windows of 50 scored rows, CPU seconds, default / census
# statistics: Gemma 3 (V = 262,144) window by window (52 MB per pass) 6.0 / 1.5, blocks of 4
# rows 2.3 / 0.95, 8 rows 2.2 / 0.83, 16 rows 2.2 / 0.78, 32 rows 4.3 / 1.0; SmolLM2
# (V = 49,152) window by window 0.80 / 0.37, 16 rows 0.47 / 0.17, 42 rows 0.51 / 0.17, 80 rows
# 0.53 / 0.24.
STAT_BLOCK_ROWS = 16
STAT_BLOCK_BYTES = 16 << 20


def _stat_block_rows(vocab: int, block_bytes: int) -> int:
    return max(2, min(STAT_BLOCK_ROWS, block_bytes // (4 * vocab)))


def stat_blocks(c0: int, c1: int, sub: int, block: int) -> list[tuple[int, int]]:
    """Row ranges [a, b) covering [c0, c1) on which the CPU schedule computes its statistics.

    [c0, c1) is cut into the schedule's sub-chunks of ``sub`` rows (a window, or part of one).
    A sub-chunk of one row stays on its own: a float sum over one row of >= 32,768 elements is
    split between threads (torch's two-pass reduction), so its bits differ from the same row
    summed inside a call of several rows. The other rows, which every kernel of the statistics
    treats row by row whatever the call's row count, are cut into blocks of ``block`` rows
    (spanning sub-chunks and windows), never leaving a block of one row.

    >>> stat_blocks(0, 100, 50, 8)[:2], stat_blocks(0, 100, 50, 8)[-1]
    ([(0, 8), (8, 16)], (88, 100))
    >>> stat_blocks(0, 16, 5, 4)  # sub-chunks 5 + 5 + 5 + 1: the last row stays alone
    [(0, 4), (4, 8), (8, 15), (15, 16)]
    >>> stat_blocks(0, 3, 1, 8)  # suffixes of one token: every row alone, as before
    [(0, 1), (1, 2), (2, 3)]
    """
    out: list[tuple[int, int]] = []
    run = c0  # start of the current run of multi-row sub-chunks

    def cut(a: int, b: int) -> None:
        while a < b:
            e = b if b - a < 2 * block else a + block  # never a last block of one row
            out.append((a, e))
            a = e

    a = c0
    while a < c1:
        b = min(c1, a + sub)
        if b - a == 1:
            cut(run, a)
            out.append((a, b))
            run = b
        a = b
    cut(run, c1)
    return out


# --------------------------------------------------------------------------- batch sizes
# Bytes of [rows, V] float32 temporaries alive at once while a chunk's statistics run, in units
# of the chunk's logits (logits, log-softmax, exp, centred squares; top-p adds sorted values,
# int64 indices, softmax and cumulative sums).
LOGIT_WORKSET = 8
AUTO_BATCH_CPU = 16  # CPU: throughput is flat beyond ~16 windows (measured, bench_scoring.py)
AUTO_BATCH_MAX = 512  # a GPU is saturated long before: ~50k tokens per forward at T = 100


def window_activation_bytes(
    config: PretrainedConfig, *, seq_len: int, dtype_bytes: int, attention_scores: bool
) -> int:
    """Peak bytes one window of ``seq_len`` tokens adds inside the body's forward pass (no cache,
    inference mode). Per token, in the body's dtype: 5 x hidden (residual stream, its normed
    copy, the attention projection's output, the residual sum, the last hidden state kept for the
    unembedding), 4 x heads x head_dim (q, rotated q, the attention output and its contiguous
    copy), 4 x kv_heads x head_dim (k, rotated k, v, a GQA expansion), 3 x intermediate (the
    MLP's activation, up projection and their product), and one row of the [T, T] attention
    mask; with ``attention_scores`` (a math/CPU attention) also the [heads, T, T] scores and
    their softmax in float32. Layer temporaries are freed between layers, so the peak is one
    layer's worth.

    >>> import types
    >>> cfg = types.SimpleNamespace(hidden_size=64, num_attention_heads=4, intermediate_size=256)
    >>> window_activation_bytes(cfg, seq_len=60, dtype_bytes=4, attention_scores=False)
    398400
    """
    d = int(config.hidden_size)
    heads = int(config.num_attention_heads)
    head_dim = int(getattr(config, "head_dim", None) or d // heads)
    kv = int(getattr(config, "num_key_value_heads", None) or heads)
    inter = int(
        getattr(config, "intermediate_size", None) or getattr(config, "n_inner", None) or 4 * d
    )
    per_token = dtype_bytes * (
        5 * d + 4 * heads * head_dim + 4 * kv * head_dim + 3 * inter + seq_len
    )
    scores = 2 * 4 * heads * seq_len if attention_scores else 0
    return int(seq_len * (per_token + scores))


def auto_batch_size(
    config: PretrainedConfig,
    *,
    seq_len: int,
    suffix_len: int,
    dtype_bytes: int,
    free_bytes: int,
    vocab: int,
    logit_chunk_bytes: int,
    attention_scores: bool = False,
    safety: float = 0.8,
    max_batch: int = AUTO_BATCH_MAX,
) -> int:
    """The largest batch (windows) whose forward pass fits ``safety * free_bytes``.

    Memory = the logits working set (``LOGIT_WORKSET`` chunks of at most ``logit_chunk_bytes``,
    independent of the batch) + per window its body activations
    (:func:`window_activation_bytes`) and its scored rows' hidden states and float64 results.
    Clamped to [1, max_batch]; 1 when even one window does not fit (the run then fails loudly
    at allocation rather than silently doing nothing).

    >>> import types
    >>> cfg = types.SimpleNamespace(hidden_size=64, num_attention_heads=4, intermediate_size=256)
    >>> auto_batch_size(cfg, seq_len=60, suffix_len=10, dtype_bytes=4, free_bytes=2**30, vocab=512,
    ...                 logit_chunk_bytes=2**24)  # a tiny model: the cap AUTO_BATCH_MAX
    512
    """
    rows = _chunk_rows(vocab, logit_chunk_bytes)
    logits_ws = LOGIT_WORKSET * min(rows, max(1, max_batch * suffix_len)) * 4 * vocab
    per_window = window_activation_bytes(
        config, seq_len=seq_len, dtype_bytes=dtype_bytes, attention_scores=attention_scores
    )
    per_window += suffix_len * (int(config.hidden_size) * (dtype_bytes + 4) + 8 * 16)
    room = safety * free_bytes - logits_ws
    return int(min(max_batch, max(1, room // per_window)))


def available_memory(device: str | torch.device) -> int:
    """Bytes free for tensors on ``device``: on CUDA the driver's free memory plus what PyTorch's
    caching allocator holds but does not use; on the CPU MemAvailable from /proc/meminfo.

    >>> available_memory("cpu") > 0
    True
    """
    device = torch.device(device)
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return int(free + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device))
    return cpu_available_memory()


# --------------------------------------------------------------------------- CPU statistics
def _needs_logp(policies: Sequence[Policy], stats: StatSet) -> bool:
    if "token_logprob" in stats or "token_moments" in stats:
        return True
    return "policy_logq" in stats and any(
        not p.greedy and p.temperature == 1.0 and p.top_k is None and p.top_p is None
        for p in policies
    )


def _needs_top2(policies: Sequence[Policy], stats: StatSet) -> bool:
    return (
        "greedy" in stats
        or "margin" in stats
        or ("policy_logq" in stats and any(p.greedy for p in policies))
    )


def _plain_topk(pi: Policy) -> bool:
    """A top-K policy at temperature 1 without top-p: its normalizer reads topk(x, K + 1)."""
    return not pi.greedy and pi.top_k is not None and pi.top_p is None and pi.temperature == 1.0


def score_rows(
    logits: torch.Tensor,
    targets: torch.Tensor,
    policies: Sequence[Policy],
    stats: StatSet = ALL_STATS,
    *,
    groups: Sequence[tuple[int, int]] | None = None,
) -> dict[str, torch.Tensor]:
    """The CPU schedule's per-position statistics for [n, V] logits and [n] targets (float32 or
    better): a dict with the entries ``stats`` asks for (token_lp, mean, std, rank, margin,
    greedy, pol [P, n]).

    Each entry is computed by the same operations whatever else is asked for (a census's log q
    has the bits of a full run's). Passes over the [n, V] block are shared between outputs
    (one fused log-softmax, one exp; one topk serves the top-2 and every top-K policy at
    temperature 1, whose values are exact); CPU logsumexp is avoided (several passes).

    Every kernel used computes a row's result from that row alone, by the same instructions in
    any call of two rows or more, with one exception: ``torch.logaddexp`` (the top-K boundary
    ties) takes a vectorized or a scalar path by the row's place among the call's tied rows,
    and the two differ in the last bit. ``groups`` (row ranges [a, b); default: all rows) are
    the units whose tie corrections share a call: the engine passes its per-window ranges, so
    that rows of several windows scored in one block keep the bits of window-by-window calls.

    >>> from memclaim.decoding import Policy
    >>> x = torch.tensor([[2.0, 1.0, 0.0], [0.0, 3.0, 1.0]], dtype=torch.float64)
    >>> r = score_rows(x, torch.tensor([0, 2]), [Policy.parse("greedy"), Policy.parse("top-k:2")], StatSet.of("all"))
    >>> r["rank"].tolist(), r["greedy"].tolist(), r["pol"].numpy().round(4).tolist()
    ([1, 2], [True, False], [[0.0, -inf], [-0.3133, -2.1269]])
    """
    x = logits if logits.dtype in (torch.float32, torch.float64) else logits.float()
    t = targets.view(-1, 1)
    V = x.shape[-1]
    out = {}
    logp = torch.log_softmax(x, dim=-1) if _needs_logp(policies, stats) else None  # [n, V]
    if "token_logprob" in stats:
        out["token_lp"] = logp.gather(1, t).view(-1)
    if "token_moments" in stats:
        p = logp.exp()  # [n, V]
        mean = torch.linalg.vecdot(p, logp)  # [n]  E_p[log p]
        d = (logp - mean[:, None]).square_()  # [n, V]
        var = torch.linalg.vecdot(p, d)  # [n]  E_p[(log p - mean)^2], centered: no cancellation
        del d, p
        out["mean"], out["std"] = mean, var.clamp_min(0).sqrt()
    if "rank" in stats:
        out["rank"] = (x > x.gather(1, t)).sum(
            -1, dtype=torch.int32
        ).long() + 1  # int32: no int64 mask copy
    need2 = _needs_top2(policies, stats)
    kmax = (
        max((min(pi.top_k, V) for pi in policies if _plain_topk(pi)), default=0)
        if "policy_logq" in stats
        else 0
    )
    top = topi = None
    if (need2 and V > 1) or kmax:
        # one topk for the top-2 and every top-K policy at T = 1 (values sorted descending; the
        # first two are topk(x, 2)'s, the first K + 1 are topk(x, K + 1)'s: exact maxima)
        top, topi = torch.topk(x, min(max(kmax + 1, 2), V), dim=-1)  # [n, width]
    greedy = None
    if need2:
        if V > 1:
            margin = top[:, 0] - top[:, 1]
            amax = topi[:, 0].clone()
            tied = (margin == 0).nonzero().view(-1)
            if (
                tied.numel()
            ):  # exact tie for the max: torch.argmax's first index, as transformers' greedy
                amax[tied] = x[tied].argmax(dim=-1)
        else:
            margin = torch.full_like(x[:, 0], math.inf)
            amax = torch.zeros_like(targets)
        greedy = amax == targets
        out["margin"], out["greedy"] = margin, greedy
    if "policy_logq" in stats:
        zero = torch.zeros((), dtype=x.dtype, device=x.device)
        ninf = torch.full((), -math.inf, dtype=x.dtype, device=x.device)
        out["pol"] = torch.stack(
            [
                torch.where(greedy, zero, ninf)
                if pi.greedy
                else policy_target_logprob(
                    x, targets, pi, log_softmax_t1=logp, top_t1=top, groups=groups
                )
                for pi in policies
            ],
            dim=0,
        )  # [P, n]
    return out


# --------------------------------------------------------------------------- batched statistics
def _logsumexp(x):
    # max-shifted, one temporary; rows of -inf only (impossible for logits) would give nan
    m = x.amax(dim=-1, keepdim=True)
    return (x - m).exp_().sum(dim=-1).log_().add_(m.view(-1))


def batched_policy_logprob(
    x: torch.Tensor,
    targets: torch.Tensor,
    xt: torch.Tensor,
    policy: Policy,
    *,
    lp1_t: torch.Tensor | None = None,
    amax: torch.Tensor | None = None,
    scaled: dict[float, torch.Tensor] | None = None,
) -> torch.Tensor:
    """log q_{theta,phi}(target_i | context_i) for [n, V] logits, branch-free (no host sync).

    The rules are :func:`memclaim.decoding.policy_target_logprob`'s (HF warper order, every tie
    at the top-k boundary kept); only the arithmetic differs: log Z by logsumexp over the support
    instead of log-softmax, and the top-k boundary's extra ties counted for every row (one
    compare-and-sum pass) instead of only for the rows found tied on the host. ``xt``: the
    targets' logits [n]; ``lp1_t``: their full-softmax log-probs when already computed; ``amax``:
    the rows' argmax (greedy); ``scaled``: a dict caching x / T between policies.

    >>> from memclaim.decoding import Policy
    >>> x, t = torch.tensor([[2.0, 1.0, 0.0], [0.0, 3.0, 1.0]], dtype=torch.float64), torch.tensor([0, 2])
    >>> batched_policy_logprob(x, t, x.gather(1, t.view(-1, 1)).view(-1), Policy.parse("top-k:2"))
    tensor([-0.3133, -2.1269], dtype=torch.float64)
    """
    if policy.greedy:
        # [EM] §4: all mass on the argmax (torch.argmax: the first maximal index, as transformers)
        return torch.where(amax == targets, 0.0, -math.inf).to(x.dtype)
    if policy.top_p is not None:  # sort-based nucleus, operation for operation as transformers
        y = _warp(x, policy)
        return y.gather(1, targets.view(-1, 1)).view(-1) - _logsumexp(y)
    T = policy.temperature
    if scaled is not None and T in scaled:
        y = scaled[T]
    else:
        y = scale_logits(
            x, T
        )  # TemperatureLogitsWarper: scores / temperature (float64 where x's dtype falls short)
        if scaled is not None:
            scaled[T] = y
    yt = xt if T == 1.0 else y.gather(1, targets.view(-1, 1)).view(-1)
    if policy.top_k is None:
        if T == 1.0 and lp1_t is not None:
            return lp1_t
        return yt - _logsumexp(y)
    V = y.shape[-1]
    k = min(policy.top_k, V)
    top = torch.topk(y, min(k + 1, V), dim=-1).values  # [n, k(+1)]
    kth = top[:, k - 1]
    log_z = _logsumexp(top[:, :k])
    if k < V:
        # tokens tied with the K-th largest beyond the K topk returned: log(Z + extra * e^kth)
        extra = (y >= kth[:, None]).sum(dim=-1) - k  # [n] >= 0, 0 when the boundary is not tied
        log_z = torch.where(extra > 0, torch.logaddexp(log_z, kth + extra.to(y.dtype).log()), log_z)
    return torch.where(yt >= kth, yt - log_z, -math.inf)


def batched_rows(
    logits: torch.Tensor, targets: torch.Tensor, policies: Sequence[Policy], stats: StatSet
) -> dict[str, torch.Tensor]:
    """The batched schedule's per-position statistics for [n, V] logits (any n): the same dict as
    :func:`score_rows`, computed for all rows at once without host synchronization.

    >>> from memclaim.decoding import Policy
    >>> x = torch.tensor([[2.0, 1.0, 0.0], [0.0, 3.0, 1.0]], dtype=torch.float64)
    >>> r = batched_rows(x, torch.tensor([0, 2]), [Policy.parse("greedy"), Policy.parse("top-k:2")], StatSet.of("all"))
    >>> r["rank"].tolist(), r["greedy"].tolist(), r["pol"].numpy().round(4).tolist()
    ([1, 2], [True, False], [[0.0, -inf], [-0.3133, -2.1269]])
    """
    x = logits if logits.dtype in (torch.float32, torch.float64) else logits.float()
    t = targets.view(-1, 1)
    xt = x.gather(1, t).view(-1)
    out = {}
    lp1_t = None  # the targets' full-softmax log-probs
    if "token_moments" in stats:
        logp = torch.log_softmax(x, dim=-1)
        lp1_t = logp.gather(1, t).view(-1)
        p = logp.exp()
        mean = torch.linalg.vecdot(p, logp)  # E_p[log p]
        var = torch.linalg.vecdot(p, (logp - mean[:, None]).square_())  # centred: no cancellation
        del p, logp
        out["mean"], out["std"] = mean, var.clamp_min(0).sqrt()
    elif _needs_logp(policies, stats):
        lp1_t = xt - _logsumexp(x)
    if "token_logprob" in stats:
        out["token_lp"] = lp1_t
    if "rank" in stats:
        out["rank"] = (x > xt[:, None]).sum(-1) + 1
    amax = None
    if _needs_top2(policies, stats):
        amax = x.argmax(dim=-1)  # first maximal index on ties (documented torch semantics)
        out["greedy"] = amax == targets
        if "margin" in stats:
            if x.shape[-1] > 1:
                top2 = torch.topk(x, 2, dim=-1).values
                out["margin"] = top2[:, 0] - top2[:, 1]
            else:
                out["margin"] = torch.full_like(xt, math.inf)
    if "policy_logq" in stats:
        scaled: dict = {}
        out["pol"] = torch.stack(
            [
                batched_policy_logprob(x, targets, xt, pi, lp1_t=lp1_t, amax=amax, scaled=scaled)
                for pi in policies
            ],
            dim=0,
        )
    return out


# --------------------------------------------------------------------------- the engine
class TeacherForcingEngine:
    """Scores equal-length (or left-padded) windows with one forward pass per batch.

    ``stats``: the statistics to compute (:class:`StatSet`, a spec string such as ``"census"``
    or names); the others come back as None. ``schedule``: ``"auto"`` (cpu-invariant on the
    CPU, batched elsewhere), ``"cpu-invariant"`` or ``"batched"`` (see the module docstring).
    """

    def __init__(
        self,
        lm,
        policies: Sequence[Policy],
        *,
        logit_chunk_bytes: int = 256 << 20,
        stats: StatSet | str | Iterable[str] = ALL_STATS,
        schedule: str = "auto",
    ):
        self.lm = lm
        self.policies = tuple(policies)
        self.logit_chunk_bytes = int(logit_chunk_bytes)
        if self.logit_chunk_bytes < 1:
            raise InputError(f"logit_chunk_bytes must be positive, got {logit_chunk_bytes!r}")
        self.stats = StatSet.of(stats)
        if "policy_logq" in self.stats and not self.policies:
            raise InputError(
                "the statistic policy_logq needs at least one decoding policy",
                hint="pass policies, or leave policy_logq out of the statistics",
            )
        if schedule not in SCHEDULES:
            raise InputError(
                f"unknown engine schedule {schedule!r}", hint=f"use one of {', '.join(SCHEDULES)}"
            )
        self.schedule = (
            ("cpu-invariant" if torch.device(lm.device).type == "cpu" else "batched")
            if schedule == "auto"
            else schedule
        )
        # on the CPU, freed tensors' memory stays in the process for the next layer's (glibc:
        # no page faults per pass; the same bits; memclaim/scoring/heap.py)
        self.heap = retain_freed_memory() if torch.device(lm.device).type == "cpu" else None
        self.forward_tokens = 0  # body tokens processed (for FLOP accounting)
        self.unembed_rows = 0
        self.stat_block_bytes = STAT_BLOCK_BYTES
        self._zbuf = None  # the CPU schedule's reused logits buffer (see _unembed)

    def _unembed(self, rows: torch.Tensor) -> torch.Tensor:
        """lm.logits(rows), written into one [rows, V] buffer kept between calls where the model
        accepts ``out=`` (a fresh [250, 262144] float32 tensor costs 64k page faults per call);
        the bits are the same either way."""
        if not getattr(self.lm, "logits_accept_out", False):
            return self.lm.logits(rows)
        n = rows.shape[0]
        zb = self._zbuf
        if zb is None or zb.shape[0] < n or zb.device != rows.device:
            self._zbuf = None  # free the smaller buffer first
            self._zbuf = self.lm.logits(
                rows
            )  # the first (or a larger) call's fresh tensor becomes the buffer
            return self._zbuf
        return self.lm.logits(rows, out=zb[:n])

    # ----------------------------------------------------------------- batch sizes
    def auto_batch_size(
        self, seq_len: int, suffix_len: int, *, free_bytes: int | None = None
    ) -> int:
        """``batch_size="auto"``: on CUDA the largest batch whose activations fit 80% of the free
        device memory (:func:`auto_batch_size`); on the CPU :data:`AUTO_BATCH_CPU` windows (CPU
        throughput is flat beyond it), fewer only if available RAM says so. A model without a
        config (synthetic test models) gets :data:`AUTO_BATCH_CPU`."""
        config = getattr(self.lm, "config", None)
        dev = torch.device(self.lm.device)
        if config is None or not hasattr(config, "hidden_size"):
            return AUTO_BATCH_CPU
        dtype = getattr(self.lm, "body_dtype", torch.float32)
        free = available_memory(dev) if free_bytes is None else int(free_bytes)
        n = auto_batch_size(
            config,
            seq_len=seq_len,
            suffix_len=suffix_len,
            dtype_bytes=torch.empty((), dtype=dtype).element_size(),
            free_bytes=free,
            vocab=self.lm.vocab_size,
            logit_chunk_bytes=self.logit_chunk_bytes,
            attention_scores=dev.type != "cuda",
        )
        return min(n, AUTO_BATCH_CPU) if dev.type == "cpu" else n

    def resolve_batch_size(self, batch_size, seq_len: int, suffix_len: int) -> int:
        if batch_size == "auto":
            return self.auto_batch_size(seq_len, suffix_len)
        if (
            isinstance(batch_size, bool)
            or not isinstance(batch_size, (int, np.integer))
            or batch_size < 1
        ):
            raise InputError(f"batch size must be a positive integer or 'auto', got {batch_size!r}")
        return int(batch_size)

    def score_windows(
        self,
        prompts: Sequence[Sequence[int]],
        suffixes: Sequence[Sequence[int]],
        *,
        batch_size="auto",
    ) -> BatchScores:
        """Score many windows in batches of ``batch_size`` (an int or ``"auto"``)."""
        if not prompts:
            raise InputError("no windows to score")
        n = self.resolve_batch_size(
            batch_size, max(len(p) for p in prompts) + len(suffixes[0]) - 1, len(suffixes[0])
        )
        return BatchScores.concat(
            [
                self.score_batch(prompts[a : a + n], suffixes[a : a + n])
                for a in range(0, len(prompts), n)
            ]
        )

    # ----------------------------------------------------------------- scoring
    @torch.inference_mode()
    def score_batch(
        self, prompts: Sequence[Sequence[int]], suffixes: Sequence[Sequence[int]]
    ) -> BatchScores:
        """prompts: B token lists (start-of-text already prepended); suffixes: B lists of S ids.

        Equal-length prompts run unpadded. Unequal prompts are left-padded with an attention
        mask and positions counted over real tokens only (equal to unpadded scoring up to
        floating-point reassociation; see the tests for the measured tolerance).
        """
        B = len(prompts)
        if B == 0 or len(suffixes) != B:
            raise InputError(
                f"a batch needs as many suffixes as prompts (>= 1), got {B} and {len(suffixes)}"
            )
        S = len(suffixes[0])
        if S < 1 or any(len(s) != S for s in suffixes):
            raise ValueError("all suffixes in a batch must have the same length")
        lens = [len(p) for p in prompts]
        if min(lens) < 1:
            raise ValueError("every prompt needs at least one token (add a start-of-text token)")
        if self.schedule == "batched":
            return self._score_batched(prompts, suffixes, lens, S)
        return self._score_cpu(prompts, suffixes, lens, S)

    def _score_cpu(self, prompts, suffixes, lens, S) -> BatchScores:
        B = len(prompts)
        Lp = max(lens)
        dev = self.lm.device
        seqs = [list(p) + list(s[:-1]) for p, s in zip(prompts, suffixes)]
        T = Lp + S - 1
        # Short sequences are right-padded to MIN_GEMM_ROWS positions: causal attention keeps
        # the real positions blind to them, and every matmul then has >= MIN_GEMM_ROWS rows,
        # where, at a given thread count, BLAS results do not depend on the row count.
        Tr = max(T, MIN_GEMM_ROWS)
        pad = Lp != min(lens)
        ids = torch.zeros((B, Tr), dtype=torch.long)  # [B, Tr]
        mask = torch.ones((B, Tr), dtype=torch.long) if pad else None
        for i, seq in enumerate(seqs):
            off = T - len(seq)  # left padding
            ids[i, off:T] = torch.tensor(seq, dtype=torch.long)
            if pad:
                mask[i, :off] = 0
        hidden, _ = self.lm.forward_hidden(
            ids.to(dev), attention_mask=None if mask is None else mask.to(dev)
        )
        self.forward_tokens += int(mask[:, :T].sum()) if pad else B * T
        # position Lp-1+j predicts suffix token j (after left padding every prompt ends at Lp-1)
        h = hidden[:, Lp - 1 : Lp - 1 + S, :].reshape(B * S, -1)  # [B*S, D]
        targets = torch.tensor([list(s) for s in suffixes], dtype=torch.long, device=dev).view(
            B * S
        )  # [B*S]
        n = B * S
        # Each window's S rows are cut into the same sub-chunks whatever the batch (the window,
        # or sub-chunks of `step` rows when a window's logits exceed logit_chunk_bytes). The
        # unembedding matmul runs for several whole windows at once (up to logit_chunk_bytes of
        # logits; W is read once per call, not once per window): with >= MIN_GEMM_ROWS rows a
        # row's product does not depend on the call's row count. The statistics run over blocks
        # of rows sized to stay in cache (stat_blocks): every kernel they use computes a row's
        # result from that row alone, the same way in any call of >= 2 rows, so a block may
        # span windows; a sub-chunk of one row keeps its own call (a one-row float sum over a
        # large vocabulary is split between threads: other bits). A window's scores are thus
        # bit-identical for every batch size (at a given thread count). tests/scoring/test_engine_fixture.py
        # holds the bits recorded when the statistics ran window by window.
        budget_rows = _chunk_rows(self.lm.vocab_size, self.logit_chunk_bytes)
        step = min(S, budget_rows)
        group = max(1, budget_rows // S) if step == S else 1
        P = len(self.policies)
        st = self.stats
        f64 = dict(dtype=torch.float64, device=dev)
        buf = {}
        if "token_logprob" in st:
            buf["token_lp"] = torch.empty(n, **f64)
        if "token_moments" in st:
            buf["mean"], buf["std"] = torch.empty(n, **f64), torch.empty(n, **f64)
        if "margin" in st:
            buf["margin"] = torch.empty(n, **f64)
        if "rank" in st:
            buf["rank"] = torch.empty(n, dtype=torch.long, device=dev)
        if "greedy" in st:
            buf["greedy"] = torch.empty(n, dtype=torch.bool, device=dev)
        if "policy_logq" in st:
            buf["pol"] = torch.empty((P, n), **f64)
        if step == S:  # unembedding calls: groups of whole windows; statistics: one window each
            calls = [(g * S, min(B, g + group) * S, S) for g in range(0, B, group)]
        else:  # a window's rows do not fit the budget: one call per sub-chunk
            calls = [
                (w * S + a0, w * S + min(S, a0 + step), step)
                for w in range(B)
                for a0 in range(0, S, step)
            ]
        block = _stat_block_rows(self.lm.vocab_size, self.stat_block_bytes)
        for c0, c1, sub in calls:
            rows = h[c0:c1]
            if c1 - c0 < MIN_GEMM_ROWS:  # [rows, D] -> [MIN_GEMM_ROWS, D], zero rows appended
                rows = torch.cat([rows, rows.new_zeros(MIN_GEMM_ROWS - (c1 - c0), rows.shape[1])])
            zc = self._unembed(rows)  # [rows, V] float32 (or float64)
            for a, b in stat_blocks(c0, c1, sub, block):
                # the block's rows by window (sub-chunk), for the tie corrections (score_rows)
                groups = [
                    (max(a, g) - a, min(b, g + sub) - a) for g in range(a - (a - c0) % sub, b, sub)
                ]
                res = score_rows(
                    zc[a - c0 : b - c0], targets[a:b], self.policies, st, groups=groups
                )
                for k, v in buf.items():
                    if k == "pol":
                        v[:, a:b] = res[k]
                    else:
                        v[a:b] = res[k]
            self.unembed_rows += c1 - c0
            del zc
        host = {k: v.cpu().numpy() for k, v in buf.items()}
        return self._assemble(host, B, S)

    def _assemble(self, host: dict, B: int, S: int) -> BatchScores:
        """Per-token host arrays -> BatchScores (window reductions on the host, in float64)."""
        P = len(self.policies)
        logq = token_logq = None
        if "pol" in host:
            token_logq = np.ascontiguousarray(
                host["pol"].reshape(P, B, S).transpose(1, 0, 2)
            )  # [B, P, S]
            # sum logs in float64 strictly left to right (cumsum is sequential), so a window's
            # score never depends on the batch layout
            logq = np.cumsum(token_logq, axis=2)[:, :, -1]

        def per_token(k, dtype=None):
            if k not in host:
                return None
            a = host[k].reshape(B, S)
            return a if dtype is None else a.astype(dtype)

        g = per_token("greedy", bool)
        m = per_token("margin")
        return BatchScores(
            logq=logq,
            token_logq=token_logq,
            greedy_match=None if g is None else g.all(axis=1),
            min_margin=None if m is None else m.min(axis=1),
            token_logprob=per_token("token_lp"),
            token_mean=per_token("mean"),
            token_std=per_token("std"),
            token_rank=per_token("rank", np.int64),
        )

    def _score_batched(self, prompts, suffixes, lens, S) -> BatchScores:
        """All windows' statistics at once per chunk of rows; one device->host copy per batch."""
        B = len(prompts)
        Lp = max(lens)
        T = Lp + S - 1
        dev = torch.device(self.lm.device)
        cuda = dev.type == "cuda"
        pad = Lp != min(lens)
        ids_np = np.zeros((B, T), dtype=np.int64)
        tg_np = np.empty((B, S), dtype=np.int64)
        mask_np = np.ones((B, T), dtype=np.int64) if pad else None
        for i, (p, s) in enumerate(zip(prompts, suffixes)):
            off = Lp - len(p)  # left padding
            ids_np[i, off:Lp] = p
            ids_np[i, Lp:] = s[:-1]
            tg_np[i] = s
            if pad:
                mask_np[i, :off] = 0

        def to_dev(a):
            t = torch.from_numpy(a)
            return t.pin_memory().to(dev, non_blocking=True) if cuda else t.to(dev)

        ids, targets = to_dev(ids_np), to_dev(tg_np).view(B * S)
        mask = None if mask_np is None else to_dev(mask_np)
        hidden, _ = self.lm.forward_hidden(ids, attention_mask=mask)
        self.forward_tokens += int(mask_np.sum()) if pad else B * T
        h = hidden[:, Lp - 1 : Lp - 1 + S, :].reshape(B * S, -1)  # [B*S, D]
        n = B * S
        st = self.stats
        P = len(self.policies)
        # one float64 device buffer for every per-token result (ints and flags are exact in
        # float64), so the host receives the batch in a single copy
        layout = ([("pol", P)] if "policy_logq" in st else []) + [
            (k, 1)
            for k, s in (
                ("token_lp", "token_logprob"),
                ("mean", "token_moments"),
                ("std", "token_moments"),
                ("rank", "rank"),
                ("greedy", "greedy"),
                ("margin", "margin"),
            )
            if s in st
        ]
        width = sum(w for _, w in layout)
        out = torch.empty((width, n), dtype=torch.float64, device=dev)
        rows = _chunk_rows(self.lm.vocab_size, self.logit_chunk_bytes)
        for a in range(0, n, rows):
            b = min(n, a + rows)
            res = batched_rows(self.lm.logits(h[a:b]), targets[a:b], self.policies, st)
            r = 0
            for k, w in layout:
                if w == 1:
                    out[r, a:b] = res[k]
                else:
                    out[r : r + w, a:b] = res[k]
                r += w
            self.unembed_rows += b - a
        host_t = torch.empty((width, n), dtype=torch.float64, pin_memory=cuda)
        host_t.copy_(out, non_blocking=cuda)
        if cuda:
            torch.cuda.current_stream(dev).synchronize()
        arr = (
            host_t.numpy().copy() if cuda else host_t.numpy()
        )  # do not keep page-locked memory alive
        host, r = {}, 0
        for k, w in layout:
            host[k] = arr[r] if w == 1 else arr[r : r + w]
            r += w
        return self._assemble(host, B, S)
