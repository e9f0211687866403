"""Membership-inference audits, their metrics with uncertainty, counterfactual memorization
from IN/OUT models, and the audit-disagreement table ([MX] §8.2, App. A, App. F; Fig. 12).

Pure numpy/scipy (matplotlib only for the heatmap, imported lazily): no torch, no I/O. The
scoring engine supplies the per-token arrays; the training module supplies shadow models.
"""

from .attacks import (
    Attack,
    AttackEvaluation,
    ScoredTexts,
    available_attacks,
    describe_attacks,
    evaluate_attack,
    get_attack,
    loss_scores,
    min_k_count,
    min_k_plus_plus_scores,
    min_k_scores,
    perplexity_scores,
    ragged,
    reference_scores,
    register_attack,
    run_attack,
    token_mean_std,
    unregister_attack,
    zlib_length,
    zlib_scores,
)
from .counterfactual import (
    CapComparison,
    CounterfactualEstimate,
    compare_to_cap,
    counterfactual_memorization,
    teacher_forcing_probability,
    truncated_logloss,
)
from .lira import LiRAResult, lira_offline, lira_online, lira_statistic
from .metrics import (
    AUCComparison,
    AUCResult,
    TPRComparison,
    TPRResult,
    certified_threshold,
    compare_aucs,
    compare_tprs,
    min_nonmembers,
    roc_auc,
    tpr_at_fpr,
)
from .table import (
    AuditCell,
    AuditColumn,
    DisagreementTable,
    auc_cell,
    build_table,
    informed_cell,
    rate_cell,
    tpr_cell,
)

__all__ = [name for name in dir() if not name.startswith("_")]
