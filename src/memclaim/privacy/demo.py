"""The privacy section of `memclaim demo`: what a DP guarantee would say about the demo's canaries.

For a few epsilon (pure eps-DP under add/remove, the setting of [MX] Thm. 5.1), compute the
memorization caps (LOO directly, Prop. A.1; RO through the group curve f^(2)) and, for each
canary, the entropy threshold H* = eps log2 e + log2(m/tau) and whether the canary clears it
([MX] Thm. 5.1(iii), Cor. 5.3): above H*, extraction is held below tau by the guarantee for every
prior of that min-entropy; below it, a successful extraction may be prior guessing, not leakage.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from .. import validate
from ..errors import DomainError
from ..jsonutil import to_jsonable
from .caps import memorization_cap
from .extraction import alpha_star, entropy_verdict, extraction_bound, h_star
from .tradeoff import pure

__all__ = ["DEMO_EPSILONS", "ILLUSTRATIVE_CANARIES", "run_demo_section"]

DEMO_EPSILONS = (0.5, 1.0, 2.0, 4.0)
NEIGHBORS = "add-remove"

# Illustrative canaries (not measured): the first is the low-entropy Zipf canary of [MX] §8.1
# (H_inf = 2.5 bits, m = 4, top-4 mass kappa = 0.355); the others are uniform secrets, for which
# kappa = m 2^-H_inf exactly.
ILLUSTRATIVE_CANARIES: tuple[dict, ...] = (
    {
        "name": "Zipf-prior canary ([MX] §8.1)",
        "min_entropy_bits": 2.5,
        "m": 4,
        "tau": 0.1,
        "kappa": 0.355,
    },
    {"name": "uniform 10-bit canary", "min_entropy_bits": 10.0, "m": 4, "tau": 0.1},
    {"name": "4-digit PIN", "min_entropy_bits": math.log2(10**4), "m": 1, "tau": 0.1},
    {"name": "6-letter random code", "min_entropy_bits": 6 * math.log2(26), "m": 16, "tau": 0.01},
)


_ALIASES = {
    "h_inf": "min_entropy_bits",
    "min_entropy": "min_entropy_bits",
    "list_size": "m",
    "risk": "tau",
    "kappa_hi": "kappa",
}


def _canary(c: dict, i: int) -> dict:
    if not isinstance(c, dict):
        raise DomainError(f"canary #{i} must be a dict with min_entropy_bits, m, tau, got {c!r}")
    c = {**{_ALIASES.get(k, k): v for k, v in c.items() if k in _ALIASES}, **c}
    for key in ("min_entropy_bits", "m", "tau"):
        if key not in c:
            raise DomainError(
                f"canary #{i} ({c.get('name', '?')}) lacks {key!r}",
                hint="each canary needs min_entropy_bits (H_inf), m (list size) and tau (risk)",
            )
    out = {
        "name": str(c.get("name", f"canary {i}")),
        "min_entropy_bits": validate.nonneg("min_entropy_bits", c["min_entropy_bits"]),
        "m": validate.integer("m (list size)", c["m"], minimum=1),
        "tau": validate.in_open_unit("tau (risk level)", c["tau"]),
        "kappa": None,
        # a canary planted k times is protected only by the k-fold group curve ([MX] Cor. 4.3)
        "copies": validate.integer("copies", c.get("copies", 1), minimum=1),
    }
    if c.get("kappa") is not None:
        out["kappa"] = validate.in_unit("kappa (baseline)", c["kappa"])
    return out


def run_demo_section(
    *, canaries: list[dict] | None = None, epsilons: Sequence[float] = DEMO_EPSILONS
) -> dict:
    """The bounds that would hold for the demo's canaries at a few epsilon, as JSON-ready data
    (nothing is printed: memclaim.cli.privacy_demo renders it as tables).

    canaries: dicts with ``name``, ``min_entropy_bits`` (H_inf; alias ``h_inf``), ``m`` (list
    size; alias ``list_size``), ``tau`` (risk; alias ``risk``) and optionally ``kappa`` (an exact
    baseline kappa_pi(m), or ``kappa_hi``, the upper end of a certified one) and ``copies`` (how
    many times the canary is planted; k >= 2 puts every extraction number on the k-fold group
    curve, [MX] Cor. 4.3, and H* becomes k eps log2 e + log2(m/tau), the remark after
    Thm. 5.1: sufficient conditions only); None uses :data:`ILLUSTRATIVE_CANARIES`.

    >>> out = run_demo_section(canaries=[{"name": "PIN", "min_entropy_bits": 13.3, "m": 1, "tau": 0.1}],
    ...                        epsilons=(1.0,))
    >>> out["canaries"][0]["by_epsilon"][0]["above_h_star"]
    True
    """
    illustrative = canaries is None
    items = [
        _canary(c, i) for i, c in enumerate(ILLUSTRATIVE_CANARIES if canaries is None else canaries)
    ]

    caps_rows = []
    for e in epsilons:
        f = pure(e, neighbors=NEIGHBORS)
        loo = memorization_cap(f, functional="LOO")
        ro = memorization_cap(f, functional="RO")
        caps_rows.append(
            {
                "epsilon": float(e),
                "LOO": loo.value,
                "RO": ro.value,
                "RO_naive": ro.naive,
                "neighbors": NEIGHBORS,
            }
        )

    results = []
    for c in items:
        per_eps = []
        for e in epsilons:
            f = pure(e, neighbors=NEIGHBORS)
            k = c["copies"]
            hs = h_star(epsilon=e, m=c["m"], tau=c["tau"], neighbors=NEIGHBORS, copies=k)
            v = entropy_verdict(
                min_entropy_bits=c["min_entropy_bits"], f=f, m=c["m"], tau=c["tau"], copies=k
            )
            kap = c["kappa"] if c["kappa"] is not None else v.kappa_envelope
            ext = extraction_bound(kap, f, copies=k).value
            per_eps.append(
                {
                    "epsilon": float(e),
                    "h_star_bits": hs.bits,
                    "above_h_star": c["min_entropy_bits"] >= hs.bits,
                    "threshold_bits": v.threshold_bits,
                    "certified_safe": alpha_star(c["tau"], f, copies=k).admits(kap),
                    "kappa": kap,
                    "kappa_source": "given" if c["kappa"] is not None else "envelope m 2^-H_inf",
                    "ext_bound": ext,
                    "neighbors": NEIGHBORS,
                    "copies": k,
                    "exact": bool(k == 1 and hs.exact_on_uniform),
                }
            )
        results.append({**c, "by_epsilon": per_eps})
    return to_jsonable(
        {
            "section": "privacy",
            "neighbors": NEIGHBORS,
            "epsilons": [float(e) for e in epsilons],
            "caps": caps_rows,
            "canaries": results,
            "illustrative": illustrative,
            "reference": "[MX] Thm. 4.1, Prop. A.1, Thm. 5.1, Cor. 5.3",
        }
    )
