"""What differential privacy does and does not say about memorization and extraction ([MX] §3-5, §7).

- :mod:`.tradeoff`   trade-off functions f_eps, f_{eps,delta}, G_mu, curves from points, group
                     curves f^(k), composition, DP-SGD accounting (dp_accounting) ([MX] §3.1)
- :mod:`.caps`       eta(f), closed forms, the k-copy staircase eta*_k, truncation price,
                     in-support damping; caps per counterfactual functional RO / LOO / COND
                     ([MX] Thm. 4.1, Lemma 4.4, App. A, B)
- :mod:`.extraction` the extraction boundary 1 - f(kappa), alpha*(tau), H*, audit soundness
                     ([MX] Thm. 5.1, Cor. 5.3-5.5, Remarks 5.4, C.4-C.6)
- :mod:`.baseline`   certified kappa_pi(m) by admissible best-first search over a prior model
                     ([MX] App. F.2); the only part that queries a model (torch imported lazily)
- :mod:`.pld`        the trade-off curve of DP-SGD from its privacy-loss distribution (dp_accounting),
                     a certified lower bound with convexity / monotonicity / f <= 1 - alpha checks
- :mod:`.summary`    every quantity for one guarantee as labelled rows: :func:`dp_bounds`
                     (`memclaim dp bounds`), for a curve or a DP-SGD run (sigma, q, T)
- :mod:`.plots`      [MX] Fig. 2-4; :mod:`.demo` the privacy section of `memclaim demo`

Every result names its neighbouring relation ('replace' = replace-one, 'add-remove') and, for
memorization caps, the counterfactual functional. Importing this package does not import torch.
"""

from .baseline import BaselineResult, certify_baseline
from .caps import (
    Eta,
    InSupportDamping,
    MemorizationCap,
    Staircase,
    TruncationPrice,
    cap_map,
    eta,
    eta_approx,
    eta_gdp,
    eta_pure,
    eta_star_k,
    geometric_shift_tv,
    in_support_damping,
    memorization_cap,
    memorization_caps,
    truncation_price,
)
from .extraction import (
    AlphaStar,
    AuditSoundness,
    EntropyVerdict,
    ExtractionBound,
    HStar,
    alpha_star,
    alpha_star_pure,
    audit_soundness,
    clopper_pearson_lower,
    entropy_threshold,
    entropy_verdict,
    extraction_bound,
    extraction_bound_approx,
    extraction_bound_gdp,
    extraction_bound_pure,
    h_star,
    prior_is_safe,
    uniform_prior_kappa,
)
from .pld import CurveCheck, DpSgdCurve, check_curve, curve_caps, curve_from_profile, dpsgd_curve
from .summary import BoundsSummary, Quantity, bounds_summary, dp_bounds
from .tradeoff import (
    DpSgdAccounting,
    TradeOff,
    approx,
    compose,
    dpsgd_epsilon,
    f_eps,
    f_eps_delta,
    f_gdp,
    from_points,
    gdp,
    gdp_delta,
    group,
    group_conversion,
    is_symmetric,
    pure,
    symmetrized,
)

__all__ = [
    "AlphaStar",
    "AuditSoundness",
    "BaselineResult",
    "BoundsSummary",
    "CurveCheck",
    "DpSgdAccounting",
    "DpSgdCurve",
    "EntropyVerdict",
    "check_curve",
    "curve_caps",
    "curve_from_profile",
    "dp_bounds",
    "dpsgd_curve",
    "Eta",
    "ExtractionBound",
    "HStar",
    "InSupportDamping",
    "MemorizationCap",
    "Quantity",
    "Staircase",
    "TradeOff",
    "TruncationPrice",
    "alpha_star",
    "alpha_star_pure",
    "approx",
    "audit_soundness",
    "bounds_summary",
    "cap_map",
    "certify_baseline",
    "clopper_pearson_lower",
    "compose",
    "dpsgd_epsilon",
    "entropy_threshold",
    "entropy_verdict",
    "eta",
    "eta_approx",
    "eta_gdp",
    "eta_pure",
    "eta_star_k",
    "extraction_bound",
    "extraction_bound_approx",
    "extraction_bound_gdp",
    "extraction_bound_pure",
    "f_eps",
    "f_eps_delta",
    "f_gdp",
    "from_points",
    "gdp",
    "gdp_delta",
    "geometric_shift_tv",
    "group",
    "group_conversion",
    "h_star",
    "in_support_damping",
    "is_symmetric",
    "memorization_cap",
    "memorization_caps",
    "prior_is_safe",
    "pure",
    "symmetrized",
    "truncation_price",
    "uniform_prior_kappa",
]
