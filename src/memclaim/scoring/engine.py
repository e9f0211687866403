"""The batched teacher-forcing engine ([EM] §2 Eq. 1, §4; App. D.3).

One forward pass over a batch of windows yields, per window:
  * log q_{theta,phi}(s | p) under every requested decoding policy (and per token, so shorter
    suffix lengths come from cumulative sums without another pass, [EM] App. D.3);
  * the greedy-match flag (teacher-forced argmax == target at every position) and the smallest
    top-1/top-2 logit margin, so near-ties are reported, not hidden ([EM] App. A.2);
  * per-token full-softmax log-probs (loss, min-k%), per-token mean and std of log p under the
    full next-token distribution (min-k%++), and the target-token rank (1 = argmax).

The body runs over prompt + suffix[:-1]; the unembedding runs only at the suffix positions, in
chunks of rows sized so a chunk's [rows, V] float32 logits stay under ``logit_chunk_bytes``: a
[batch, time, vocab] tensor is never built (Gemma's vocabulary is 262,144).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from ..decoding import Policy, policy_target_logprob

NEAR_TIE_MARGIN = 1e-5  # [EM] App. A.2: argmax flips under numeric noise below this margin
# Measured with MKL on this project's CPUs (tests/test_engine.py): sgemm results for a row
# are identical for every row count >= 12 and every thread count; calls with 1-3, 5-7 or
# 9-11 rows take other kernels. The engine never issues a matmul with fewer rows.
MIN_GEMM_ROWS = 12


@dataclass
class BatchScores:
    """Per-window outputs of one batch (numpy, float64 where it is a log-probability).

    Shapes: B windows, S suffix tokens, P policies.
    """

    logq: np.ndarray  # [B, P] float64, sum over tokens, -inf when a token is outside the support
    token_logq: np.ndarray  # [B, P, S] float64
    greedy_match: np.ndarray  # [B] bool
    min_margin: np.ndarray  # [B] float64, min over positions of top1 - top2 logit
    token_logprob: np.ndarray  # [B, S] float64, full softmax at temperature 1
    token_mean: np.ndarray  # [B, S] float64, E_{v~p}[log p(v)]
    token_std: np.ndarray  # [B, S] float64, Std_{v~p}[log p(v)]
    token_rank: np.ndarray  # [B, S] int64, 1 + #{v : logit_v > logit_target}


def _chunk_rows(vocab: int, logit_chunk_bytes: int) -> int:
    return max(1, logit_chunk_bytes // (4 * vocab))


def score_rows(logits: torch.Tensor, targets: torch.Tensor, policies: Sequence[Policy]):
    """All per-position statistics for [n, V] logits and [n] targets (float32 or better).

    Passes over the [n, V] block are shared between outputs (one fused log-softmax, one exp, dot
    products without temporaries); CPU logsumexp is avoided (several passes)."""
    x = logits if logits.dtype in (torch.float32, torch.float64) else logits.float()
    t = targets.view(-1, 1)
    logp = torch.log_softmax(x, dim=-1)  # [n, V]
    token_lp = logp.gather(1, t).view(-1)
    p = logp.exp()  # [n, V]
    mean = torch.linalg.vecdot(p, logp)  # [n]  E_p[log p]
    d = (logp - mean[:, None]).square_()  # [n, V]
    var = torch.linalg.vecdot(p, d)  # [n]  E_p[(log p - mean)^2], centered: no cancellation
    del d, p
    rank = (x > x.gather(1, t)).sum(-1, dtype=torch.int32).long() + 1  # int32: no int64 copy of the mask
    if x.shape[-1] > 1:
        top2, top2i = torch.topk(x, 2, dim=-1)  # [n, 2]
        margin = top2[:, 0] - top2[:, 1]
        amax = top2i[:, 0].clone()
        tied = (margin == 0).nonzero().view(-1)
        if tied.numel():  # exact tie for the max: torch.argmax's first index, as transformers' greedy
            amax[tied] = x[tied].argmax(dim=-1)
    else:
        margin = torch.full_like(x[:, 0], math.inf)
        amax = torch.zeros_like(targets)
    greedy = amax == targets
    zero = torch.zeros((), dtype=x.dtype, device=x.device)
    ninf = torch.full((), -math.inf, dtype=x.dtype, device=x.device)
    pol = torch.stack([torch.where(greedy, zero, ninf) if pi.greedy else
                       policy_target_logprob(x, targets, pi, log_softmax_t1=logp) for pi in policies], dim=0)  # [P, n]
    return token_lp, mean, var.clamp_min(0).sqrt(), rank, margin, greedy, pol


class TeacherForcingEngine:
    """Scores equal-length (or left-padded) windows with one forward pass per batch."""

    def __init__(self, lm, policies: Sequence[Policy], *, logit_chunk_bytes: int = 256 << 20):
        self.lm = lm
        self.policies = tuple(policies)
        self.logit_chunk_bytes = int(logit_chunk_bytes)
        self.forward_tokens = 0  # body tokens processed (for FLOP accounting)
        self.unembed_rows = 0

    @torch.inference_mode()
    def score_batch(self, prompts: Sequence[Sequence[int]], suffixes: Sequence[Sequence[int]]) -> BatchScores:
        """prompts: B token lists (start-of-text already prepended); suffixes: B lists of S ids.

        Equal-length prompts run unpadded. Unequal prompts are left-padded with an attention
        mask and positions counted over real tokens only (equal to unpadded scoring up to
        floating-point reassociation; see the tests for the measured tolerance).
        """
        B = len(prompts)
        S = len(suffixes[0])
        if any(len(s) != S for s in suffixes):
            raise ValueError("all suffixes in a batch must have the same length")
        lens = [len(p) for p in prompts]
        Lp = max(lens)
        if min(lens) < 1:
            raise ValueError("every prompt needs at least one token (add a start-of-text token)")
        dev = self.lm.device
        seqs = [list(p) + list(s[:-1]) for p, s in zip(prompts, suffixes)]
        T = Lp + S - 1
        # Short sequences are right-padded to MIN_GEMM_ROWS positions: causal attention keeps
        # the real positions blind to them, and every matmul then has >= MIN_GEMM_ROWS rows,
        # where BLAS results do not depend on the row count or the thread count.
        Tr = max(T, MIN_GEMM_ROWS)
        pad = Lp != min(lens)
        ids = torch.zeros((B, Tr), dtype=torch.long)  # [B, Tr]
        mask = torch.ones((B, Tr), dtype=torch.long) if pad else None
        for i, seq in enumerate(seqs):
            off = T - len(seq)  # left padding
            ids[i, off:T] = torch.tensor(seq, dtype=torch.long)
            if pad:
                mask[i, :off] = 0
        hidden, _ = self.lm.forward_hidden(ids.to(dev), attention_mask=None if mask is None else mask.to(dev))
        self.forward_tokens += int(mask[:, :T].sum()) if pad else B * T
        # position Lp-1+j predicts suffix token j (after left padding every prompt ends at Lp-1)
        h = hidden[:, Lp - 1:Lp - 1 + S, :].reshape(B * S, -1)  # [B*S, D]
        targets = torch.tensor([list(s) for s in suffixes], dtype=torch.long, device=dev).view(B * S)  # [B*S]
        n = B * S
        # The statistics run window by window, each window's S rows cut into the same sub-chunks
        # whatever the batch: a reduction's result can depend on the shape it runs over, so
        # fixing those shapes per window makes a window's scores bit-identical for every batch
        # size and thread count. The unembedding matmul itself runs for several whole windows at
        # once (up to logit_chunk_bytes of logits; W is read once per call, not once per window):
        # with >= MIN_GEMM_ROWS rows a row's product does not depend on the call's row count.
        budget_rows = _chunk_rows(self.lm.vocab_size, self.logit_chunk_bytes)
        step = min(S, budget_rows)
        group = max(1, budget_rows // S) if step == S else 1
        P = len(self.policies)
        f64 = dict(dtype=torch.float64, device=dev)
        tok_lp, tok_mean, tok_std = torch.empty(n, **f64), torch.empty(n, **f64), torch.empty(n, **f64)
        margin = torch.empty(n, **f64)
        tok_rank = torch.empty(n, dtype=torch.long, device=dev)
        greedy = torch.empty(n, dtype=torch.bool, device=dev)
        pol = torch.empty((P, n), **f64)
        if step == S:  # unembedding calls: groups of whole windows; statistics: one window each
            calls = [(g * S, min(B, g + group) * S, S) for g in range(0, B, group)]
        else:  # a window's rows do not fit the budget: one call per sub-chunk
            calls = [(w * S + a0, w * S + min(S, a0 + step), step) for w in range(B) for a0 in range(0, S, step)]
        for c0, c1, sub in calls:
            rows = h[c0:c1]
            if c1 - c0 < MIN_GEMM_ROWS:  # [rows, D] -> [MIN_GEMM_ROWS, D], zero rows appended
                rows = torch.cat([rows, rows.new_zeros(MIN_GEMM_ROWS - (c1 - c0), rows.shape[1])])
            zc = self.lm.logits(rows)  # [rows, V] float32 (or float64)
            for a in range(c0, c1, sub):
                b = min(c1, a + sub)
                lp, mu, sd, rk, mg, gr, pq = score_rows(zc[a - c0:b - c0], targets[a:b], self.policies)
                tok_lp[a:b], tok_mean[a:b], tok_std[a:b] = lp, mu, sd
                tok_rank[a:b], margin[a:b], greedy[a:b] = rk, mg, gr
                pol[:, a:b] = pq
            self.unembed_rows += c1 - c0
            del zc
        token_logq = pol.view(P, B, S).permute(1, 0, 2).cpu().numpy()  # [B, P, S]
        # sum logs in float64 strictly left to right (cumsum is sequential), so a window's
        # score never depends on the batch layout
        logq = np.cumsum(token_logq, axis=2)[:, :, -1]
        return BatchScores(
            logq=logq,
            token_logq=np.ascontiguousarray(token_logq),
            greedy_match=greedy.view(B, S).all(dim=1).cpu().numpy(),
            min_margin=margin.view(B, S).min(dim=1).values.cpu().numpy(),
            token_logprob=tok_lp.view(B, S).cpu().numpy(),
            token_mean=tok_mean.view(B, S).cpu().numpy(),
            token_std=tok_std.view(B, S).cpu().numpy(),
            token_rank=tok_rank.view(B, S).cpu().numpy(),
        )
