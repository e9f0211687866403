"""What one audit found ([MX] §8.2, App. F.2): per attack the AUC with its interval and the TPR
at a certified FPR, the extraction audits, the unlearning verifier, shadows and the
counterfactual estimates. Rendered by :mod:`memclaim.report.audit`."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import InputError
from ..jsonutil import ResultMixin
from .attacks import AttackEvaluation
from .extraction import ExtractionAudit
from .settings import AuditSettings
from .shadows import ShadowSet
from .verifier import VerifierResult

__all__ = ["AuditResult"]


@dataclass(frozen=True)
class AuditResult(ResultMixin):
    """Everything one audit found. ``attacks``: one :class:`AttackEvaluation` per attack (AUC with
    DeLong interval and leak signal; TPR at the certified FPR when one was asked for).
    ``extraction``/``extraction_nonmembers``: greedy and sampling extraction from each record's own
    prefix; ``trigger_*``: the same from the trigger; ``verifier``: the unlearning verifier on
    the members; ``shadows``/``counterfactual``: the shadow set and the mem_h (COND) estimates,
    one per bounded score h (teacher-forcing probability, truncated log-loss / M)."""

    model: dict
    procedure: dict
    procedure_key: str
    store: str
    settings: AuditSettings
    inputs: tuple
    n_members: int
    n_nonmembers: int
    skipped_short: dict
    attacks: tuple
    tpr_note: str | None
    extraction: ExtractionAudit | None
    extraction_nonmembers: ExtractionAudit | None
    trigger_extraction: ExtractionAudit | None = None
    trigger_nonmembers: ExtractionAudit | None = None
    verifier: VerifierResult | None = None
    reference: dict | None = None
    shadows: ShadowSet | None = None
    counterfactual: tuple = ()
    soundness: object | None = None
    scoring: dict = field(default_factory=dict)
    notes: tuple = ()
    seconds: float = 0.0
    report: dict | None = None

    def attack(self, name: str) -> AttackEvaluation:
        for e in self.attacks:
            if e.attack == name:
                return e
        raise InputError(
            f"attack {name!r} was not run in this audit",
            hint=f"run: {', '.join(e.attack for e in self.attacks)}",
        )

    def headline(self) -> str:
        if not self.attacks:
            return "no attack was run"
        best = max(self.attacks, key=lambda e: e.auc.auc)
        a = best.auc
        s = (
            f"{len(self.attacks)} membership attacks on {self.n_members} members vs {self.n_nonmembers} "
            f"non-members; strongest: {best.attack}, AUC {a.auc:.3f} [{a.low:.3f}, {a.high:.3f}] "
            f"(leak signal {a.leak_signal:.2f}, {'excludes' if a.excludes_chance else 'includes'} chance)."
        )
        if self.extraction is not None:
            s += f" Greedy extraction from the records' own prefix: {self.extraction.greedy_successes}/{self.extraction.n}."
        return s
