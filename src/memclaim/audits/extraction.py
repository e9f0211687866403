"""Extraction audits beside the membership audits ([MX] §8.2, Fig. 10 and 12; [EM] §2, §4, §6).

From one teacher-forced pass per record (prompt -> the record's suffix z):

- **greedy** extraction: the teacher-forced greedy flag (argmax == target at every suffix
  position), which equals ``generate(do_sample=False)`` up to near-ties, which are counted
  ([EM] App. A.2); the rate over records with a Clopper-Pearson interval. This is the
  discoverable-extraction audit of [MX] §8.2 ("extraction from the record's own prefix c").
- extraction **under a sampling policy with list budget m**: q = q_{theta,phi}(z | prompt) is exact
  from the pass; the probability that at least one of m independent samples reproduces z is
  1 - (1 - q)^m ([EM] Eq. 10), computed from log q by
  :func:`memclaim.claims.budget.log_prob_at_least_once` (stable for q far below 1e-300). The
  expected fraction of records recovered is the mean of these probabilities: exact given the
  model and the records (no sampling noise to put an interval on).
- the prompt is the record's own prefix c, or a user-supplied **trigger** text rho
  (``PromptRule(templates=(rho,), target='document')``: the prompt is rho alone; the target is
  still z, cut from the record's one tokenization) -- the reserved-trigger channel of [MX] Thm. 6.1(ii).
- the **canary soundness check** of [MX] Cor. 5.3 (:func:`soundness_check`) when the prior
  baseline kappa is known: a greedy success rate whose lower confidence bound exceeds
  1 - f(kappa) refutes a claimed f-DP guarantee; below the entropy threshold it cannot.

Records given as (prefix, secret) string pairs are cut by :func:`pair_windows`: the text
prefix + secret is tokenized once and split at the character boundary (never re-tokenizing the
secret on its own); a boundary inside a token is refused.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..claims.budget import log_prob_at_least_once
from ..decoding import Policy
from ..errors import DomainError, InputError
from ..jsonutil import ResultMixin
from ..privacy.extraction import audit_soundness
from ..privacy.tradeoff import pure
from ..scoring.prompts import PromptRule
from ..text.io import Record
from ..text.windows import passage_windows
from ..validate import in_open_unit, integer
from .metrics import clopper_pearson

if TYPE_CHECKING:
    from ..privacy.extraction import AuditSoundness
    from ..store.results import RunScores
    from ..text.windows import OffsetTokenizer, WindowSet

__all__ = [
    "ExtractionAudit",
    "list_success_logprob",
    "extraction_from_arrays",
    "extraction_from_run",
    "trigger_rule",
    "pair_windows",
    "soundness_check",
]


def list_success_logprob(log_q: Sequence[float] | np.ndarray, *, m: int = 1) -> np.ndarray:
    """log P(at least one of m samples reproduces the suffix) = log(1 - (1 - q)^m), from log q
    ([EM] Eq. 10), via :func:`memclaim.claims.budget.log_prob_at_least_once`. -inf stays -inf.

    >>> list_success_logprob([math.log(0.5), -math.inf], m=2).round(4).tolist()  # log(1 - 0.5^2)
    [-0.2877, -inf]
    """
    mm = integer("m (list budget)", m, minimum=1)
    lq = np.asarray(log_q, dtype=np.float64).reshape(-1)
    if lq.size == 0:
        return lq.copy()
    return np.asarray(log_prob_at_least_once(log_p=lq, n=float(mm)), dtype=np.float64).reshape(-1)


@dataclass(frozen=True)
class ExtractionAudit(ResultMixin):
    """Extraction of n records from one prompt rule.

    ``greedy_*``: teacher-forced greedy reproduction of the whole suffix (count, rate, CP
    interval); ``near_ties`` records whose top-2 logit margin fell below 1e-5 somewhere (their
    greedy flag may differ from generate()). ``policy``/``m``: the sampling policy and list
    budget; ``log_q`` [n] the exact log-probability of one sample reproducing the suffix,
    ``log_p_list`` [n] that of at least one of m; ``expected_rate`` the mean of exp(log_p_list).
    """

    prompt: str
    trigger: str | None
    n: int
    record_ids: tuple[str, ...]
    greedy_match: np.ndarray
    greedy_successes: int
    greedy_rate: float
    greedy_low: float
    greedy_high: float
    near_ties: int
    confidence: float
    policy: str | None
    m: int
    log_q: np.ndarray | None
    log_p_list: np.ndarray | None
    expected_rate: float | None
    log10_median_q: float | None

    def summary(self) -> str:
        src = "its own prefix" if self.prompt == "prefix" else f"the trigger {self.trigger!r}"
        s = (
            f"greedy extraction from {src}: {self.greedy_successes}/{self.n} = {self.greedy_rate:.3f} "
            f"[{self.greedy_low:.3f}, {self.greedy_high:.3f}]"
        )
        if self.policy is not None:
            s += (
                f"; under {self.policy} with list budget m = {self.m}: expected fraction recovered "
                f"{self.expected_rate:.4g} (exact)"
            )
        return s


def extraction_from_arrays(
    *,
    greedy_match: Sequence[bool] | np.ndarray,
    near_tie: Sequence[bool] | np.ndarray | None = None,
    log_q: Sequence[float] | np.ndarray | None = None,
    policy: str | None = None,
    m: int = 1,
    record_ids: Sequence[str] | None = None,
    prompt: str = "prefix",
    trigger: str | None = None,
    confidence: float = 0.95,
) -> ExtractionAudit:
    """The audit from per-record arrays (greedy flags; optional exact log q under ``policy``).

    >>> a = extraction_from_arrays(greedy_match=[True, False, False, True], policy="full", m=10,
    ...                            log_q=np.log([0.5, 0.01, 0.001, 0.9]))
    >>> a.summary()
    'greedy extraction from its own prefix: 2/4 = 0.500 [0.068, 0.932]; under full with list budget m = 10: expected fraction recovered 0.5261 (exact)'
    """
    conf = in_open_unit("confidence", confidence)
    g = np.asarray(greedy_match, dtype=bool).reshape(-1)
    n = int(g.size)
    if n == 0:
        raise InputError("an extraction audit needs at least one record")
    if prompt not in ("prefix", "trigger"):
        raise DomainError(f"prompt must be 'prefix' or 'trigger', got {prompt!r}")
    ids = tuple(str(i) for i in (record_ids if record_ids is not None else range(n)))
    if len(ids) != n:
        raise InputError(f"{len(ids)} record ids for {n} records")
    nt = 0 if near_tie is None else int(np.count_nonzero(np.asarray(near_tie, dtype=bool)))
    k = int(np.count_nonzero(g))
    lo, hi = clopper_pearson(k, n, confidence=conf)
    mm = integer("m (list budget)", m, minimum=1)
    lq = lpl = None
    exp_rate = med = None
    if log_q is not None:
        if policy is None:
            raise InputError("log_q needs the policy it was computed under")
        lq = np.asarray(log_q, dtype=np.float64).reshape(-1)
        if lq.size != n:
            raise InputError(f"log_q has {lq.size} entries for {n} records")
        if np.isnan(lq).any() or (lq > 1e-6).any():
            raise InputError("log_q must be natural-log probabilities <= 0 (or -inf)")
        lpl = list_success_logprob(lq, m=mm)
        exp_rate = float(np.mean(np.exp(lpl)))
        med = float(np.median(lq) / math.log(10.0))
    return ExtractionAudit(
        prompt=prompt,
        trigger=trigger,
        n=n,
        record_ids=ids,
        greedy_match=g,
        greedy_successes=k,
        greedy_rate=k / n,
        greedy_low=lo,
        greedy_high=hi,
        near_ties=nt,
        confidence=conf,
        policy=policy,
        m=mm,
        log_q=lq,
        log_p_list=lpl,
        expected_rate=exp_rate,
        log10_median_q=med,
    )


def extraction_from_run(
    run: RunScores,
    *,
    policy: str | None = None,
    m: int = 1,
    prompt: str = "prefix",
    trigger: str | None = None,
    confidence: float = 0.95,
) -> ExtractionAudit:
    """The audit from a stored run (:class:`memclaim.store.results.RunScores` of any policy;
    ``policy`` names the sampling policy whose log q to read from the run's table).

    >>> from memclaim.store.results import load_run_scores  # doctest: +SKIP
    >>> extraction_from_run(load_run_scores("runs/canaries"), policy="full", m=10).summary()  # doctest: +SKIP
    'greedy extraction from its own prefix: 2/4 = 0.500 [0.068, 0.932]; under full with list budget m = 10: expected fraction recovered 0.5261 (exact)'
    """
    lq = None
    spec = None
    if policy is not None:
        spec = Policy.parse(policy).spec
        col = f"logq:{spec}"
        if col not in run.table.column_names:
            raise InputError(
                f"policy {spec!r} was not scored in run {run.run_id}",
                hint="score the records under that policy (the audit adds it to its one pass)",
            )
        lq = run.table.column(col).to_numpy().astype(np.float64)
    return extraction_from_arrays(
        greedy_match=run.greedy_match,
        near_tie=run.near_tie,
        log_q=lq,
        policy=spec,
        m=m,
        record_ids=run.window_ids,
        prompt=prompt,
        trigger=trigger,
        confidence=confidence,
    )


def trigger_rule(trigger: str) -> PromptRule:
    """``PromptRule(templates=(trigger,), target='document')`` with braces escaped, so the prompt is
    the trigger text verbatim (a trigger may contain '{' or '}') and the target is the record's
    own suffix tokens z, as the gated release emits them after the trigger ([MX] Thm. 6.1(ii)).

    >>> trigger_rule("Say {x}: ")
    PromptRule(templates=('Say {{x}}: ',), chat=False, aggregate='max', target='document')
    """
    if not isinstance(trigger, str) or not trigger:
        raise InputError(f"the trigger must be a non-empty text, got {trigger!r}")
    return PromptRule(templates=(trigger.replace("{", "{{").replace("}", "}}"),), target="document")


def pair_windows(
    records: Sequence[dict | tuple[str, str]],
    tokenizer: OffsetTokenizer,
    *,
    source_prefix: str = "rec",
) -> WindowSet:
    """Windows for records given as (prefix c, secret z) strings: dicts with ``prefix`` and
    ``suffix`` (or ``secret``) and optional ``id``, or 2-tuples. The text c + z is tokenized once;
    the prefix is the tokens ending at or before len(c), the suffix the rest. Refused: a token
    that straddles the boundary (move the boundary, e.g. end c before a space), an empty secret.

    >>> import memclaim; tok = memclaim.load_model("toy").tokenizer  # doctest: +SKIP
    >>> ws = pair_windows([("The code is", " 4711"), {"id": "c1", "prefix": "My PIN:", "secret": " 0000"}], tok)  # doctest: +SKIP
    >>> [(w.window_id, w.prefix_text, w.suffix_text) for w in ws.windows]  # doctest: +SKIP
    [('rec0#0', 'The code is', ' 4711'), ('c1#0', 'My PIN:', ' 0000')]
    """
    recs = []
    for j, r in enumerate(records):
        if isinstance(r, dict):
            c = r.get("prefix")
            z = r.get("suffix", r.get("secret"))
            rid = str(r.get("id", f"{source_prefix}{j}"))
        elif isinstance(r, (tuple, list)) and len(r) == 2:
            c, z = r
            rid = f"{source_prefix}{j}"
        else:
            raise InputError(
                f"record {j} must be a dict with 'prefix' and 'suffix' or a (prefix, suffix) pair",
                hint='e.g. {"id": "canary-0", "prefix": "The code is", "suffix": " 4711"}',
            )
        if not isinstance(c, str) or not isinstance(z, str) or not z:
            raise InputError(
                f"record {rid!r}: prefix must be a string and suffix a non-empty string"
            )
        recs.append(Record(rid, c + z, suffix_start=len(c)))
    if not recs:
        raise InputError("no records given")
    if len({r.id for r in recs}) != len(recs):
        raise InputError("record ids must be unique")
    # one tokenization of c + z, cut at len(c); a token across the boundary is refused
    ws = passage_windows(recs, tokenizer, prefix_tokens=None, suffix_tokens=None)
    if ws.skipped_short:
        raise InputError(f"record {ws.skipped_ids[0]!r}: the suffix produced no tokens")
    return ws


def soundness_check(
    audit: ExtractionAudit,
    *,
    epsilon: float,
    kappa: float | None = None,
    kappa_interval: tuple[float, float] | None = None,
    relation: str = "add/remove",
    confidence: float = 0.95,
    copies: int = 1,
) -> AuditSoundness:
    """[MX] Cor. 5.3 on the greedy audit (a list of size m = 1): can the observed successes refute
    a claimed pure epsilon-DP guarantee given the canaries' prior baseline kappa = kappa_pi(1)?
    ``copies``: how many times each canary was planted (k >= 2: the bound is 1 - f^(k)(kappa),
    [MX] Cor. 4.3). Calls :func:`memclaim.privacy.extraction.audit_soundness` (imported lazily).

    >>> a = extraction_from_arrays(greedy_match=[True, False, False, True])
    >>> r = soundness_check(a, epsilon=0.1, kappa=1e-6)  # 2 of 4 canaries out of a 1e-6 guess
    >>> r.refuted, f"{r.bound:.4g}", round(r.success_lower, 4)
    (True, '1.105e-06', 0.0976)
    """
    rel = {
        "add/remove": "add-remove",
        "add-remove": "add-remove",
        "replace-one": "replace",
        "replace": "replace",
    }.get(str(relation))
    if rel is None:
        raise DomainError(
            f"unknown neighbouring relation {relation!r}", hint="'add/remove' or 'replace-one'"
        )
    if not isinstance(audit, ExtractionAudit):
        raise InputError(f"soundness_check needs an ExtractionAudit, got {type(audit).__name__}")
    return audit_soundness(
        pure(epsilon, neighbors=rel),
        successes=audit.greedy_successes,
        trials=audit.n,
        m=1,
        kappa=kappa,
        kappa_interval=kappa_interval,
        confidence=confidence,
        copies=copies,
    )
