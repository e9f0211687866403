"""The settings that fix an audit's numbers besides the models and the texts ([MX] §8.2)."""

from __future__ import annotations

from dataclasses import dataclass

from ..decoding import Policy
from ..errors import DomainError, InputError
from ..jsonutil import ResultMixin
from ..procedure import DEFAULT_POLICY, DEFAULT_PREFIX_TOKENS, DEFAULT_SUFFIX_TOKENS
from ..validate import batch_size as check_batch_size
from ..validate import in_open_unit, integer
from .attacks import _exact_k
from .metrics import exact_level
from .shadows import SCORES
from .verifier import DEFAULT_THRESHOLD

__all__ = ["AuditSettings", "SHADOW_ATTACKS"]

SHADOW_ATTACKS = ("lira-online", "lira-offline")


@dataclass(frozen=True)
class AuditSettings(ResultMixin):
    """Everything that fixes the audit's numbers besides the models and texts.

    ``k``: the min-k% / min-k%++ fraction (read exactly as written). ``fpr``: target FPR for the
    TPR at a certified FPR (None: no TPR). ``extraction_policy``/``m``: the sampling policy and
    list budget of the extraction audit (None: greedy only). ``trigger``: a trigger text for a
    second extraction audit. ``verifier_*``: the unlearning verifier ([MX] App. F.2).

    >>> AuditSettings(prefix_tokens=16, suffix_tokens=16, fpr="1%").extraction_policy
    'top-k:40'
    """

    prefix_tokens: int = (
        DEFAULT_PREFIX_TOKENS  # [EM] §4: 50 + 50, as every command (32 + 32 before 0.2)
    )
    suffix_tokens: int = DEFAULT_SUFFIX_TOKENS
    attacks: tuple[str, ...] | None = None
    k: object = "0.2"
    fpr: object = None
    confidence: float = 0.95
    extraction_policy: str | None = DEFAULT_POLICY
    m: int = 1
    trigger: str | None = None
    verifier_threshold: float = DEFAULT_THRESHOLD
    verifier_policy: str = "greedy"
    verifier_m: int = 1
    lira_statistic: str = "sequence"
    counterfactual_scores: tuple = ("teacher-forcing", "logloss")
    batch_size: int | str = 16

    def __post_init__(self):
        integer("prefix tokens", self.prefix_tokens, minimum=0)
        integer("suffix tokens", self.suffix_tokens, minimum=1)
        in_open_unit("confidence", self.confidence)
        integer("m (list budget)", self.m, minimum=1)
        integer("verifier m", self.verifier_m, minimum=1)
        object.__setattr__(self, "batch_size", check_batch_size(self.batch_size))
        if self.fpr is not None:
            exact_level("fpr", self.fpr)
        _exact_k(self.k)
        if self.extraction_policy is not None:
            p = Policy.parse(self.extraction_policy)
            object.__setattr__(self, "extraction_policy", p.spec)
        object.__setattr__(self, "verifier_policy", Policy.parse(self.verifier_policy).spec)
        if self.attacks is not None:
            object.__setattr__(self, "attacks", tuple(self.attacks))
        bad = [sc for sc in self.counterfactual_scores if sc not in SCORES]
        if bad:
            raise DomainError(
                f"unknown counterfactual score(s) {bad}", hint=f"one of {sorted(SCORES)}"
            )
        if self.trigger is not None and not (isinstance(self.trigger, str) and self.trigger):
            raise InputError(f"the trigger must be a non-empty text, got {self.trigger!r}")
