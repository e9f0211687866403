"""The papers' own numbers that the reproductions are compared with: one place, with sources.

Each :class:`PaperValue` is a number as [MX] (memorization-is-not-extraction) or [EM]
(extractable-memorization-from-first-principles, the keys of its reproductions) prints it, where it
is printed, the sentence it comes from, and what kind of statement it is: a value (``"="``), a
lower bound (``">="``: "at least", "≥") or an upper bound (``"<="``: "at most"). Values the
paper measured on other models (Pythia, Qwen) at another scale are marked ``same_scale=False``:
the reproductions show them side by side, and nothing tests them for agreement.

The reproductions report their own number beside the paper's (:func:`.common.compare`) and the
difference; they pass no verdict. Whether a run agrees with the paper is decided by the tests
(tests/test_experiments_*.py, ``AGREEMENT`` tables), each with a tolerance justified there by the
run's own Monte-Carlo error or by the paper's rounding, so that the implementation never grades
itself. A disagreement is recorded there (an expected failure citing the numbers), never hidden
by a wider tolerance.

Every ``quote`` is copied from the paper's text; ``value`` is what ``printed`` says.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InputError

RELATIONS = ("=", ">=", "<=")


@dataclass(frozen=True)
class PaperValue:
    key: str
    quantity: str
    printed: str  # as the paper prints it
    value: float
    where: str
    quote: str
    relation: str = "="
    same_scale: bool = (
        True  # False: measured on other models / at another scale (side by side only)
    )

    def statement(self) -> str:
        return {"=": "", ">=": ">= ", "<=": "<= "}[self.relation] + self.printed


_MX = "[MX]"
_VALUES = [
    # ---- Fig. 6 left: the k-copy staircase ----------------------------------------------------
    PaperValue(
        "staircase/advantage-k2",
        "measured best-threshold advantage of the k = 2 canary (eps = 1)",
        "0.631",
        0.631,
        f"{_MX} §8.1 (Figs. 6-9 paragraph), Fig. 6 left",
        "sits strictly below the group bound for k ≥ 2 (0.631 [page break] vs 0.762 at k = 2; Fig. 6, left)",
    ),
    PaperValue(
        "staircase/eta-star-2",
        "eta*_2 at eps = 1",
        "0.632",
        0.632,
        f"{_MX} §4 (Lemma 4.4), Fig. 3 caption",
        "η∗k < tanh(kε/2) strictly for all k ≥ 2 (e.g. 0.632 < 0.762 at k = 2, ε = 1)",
    ),
    PaperValue(
        "staircase/group-bound-2",
        "group bound tanh(k eps/2) at k = 2, eps = 1",
        "0.762",
        0.762,
        f"{_MX} §4 (Lemma 4.4), Fig. 3 caption",
        "the k = 2 gap is 0.762 − 0.632 at ε = 1",
    ),
    # ---- Fig. 6 right: the entropy sweep ------------------------------------------------------
    PaperValue(
        "entropy-sweep/h-star",
        "H* at eps = 1, m = 4, tau = 0.1 (bits)",
        "6.77",
        6.77,
        f"{_MX} §8.1",
        "crossing the risk level τ = 0.1 exactly at the predicted threshold H ∗ = 6.77 bits",
    ),
    PaperValue(
        "entropy-sweep/zipf-rate",
        "extraction rate of the Zipf canary (H_inf = 2.5 bits)",
        "41%",
        0.41,
        f"{_MX} §8.1",
        "a low-entropy Zipf-prior canary (H∞ = 2.5 bits) is extracted 41% of the time",
    ),
    PaperValue(
        "entropy-sweep/zipf-kappa",
        "top-m mass kappa of the Zipf canary",
        "0.355",
        0.355,
        f"{_MX} §8.1",
        "the Zipf canary’s top-m mass is κ = 0.355",
    ),
    PaperValue(
        "entropy-sweep/zipf-envelope",
        "entropy envelope m 2^-H_inf of the Zipf canary",
        "0.707",
        0.707,
        f"{_MX} §8.1",
        "against an envelope m2−H∞ = 0.707",
    ),
    PaperValue(
        "entropy-sweep/zipf-bound",
        "bound 1 - f_eps(kappa) for the Zipf canary",
        "0.76",
        0.76,
        f"{_MX} §8.1",
        "the bound 1 − fε (κ) = 0.76 is computed from κ",
    ),
    PaperValue(
        "entropy-sweep/uniform10-rate",
        "extraction rate of the 10-bit uniform canary",
        "1%",
        0.01,
        f"{_MX} §8.1",
        "the same release holds a 10-bit uniform canary to 1%",
    ),
    # ---- Fig. 8: per-instance calibration -----------------------------------------------------
    PaperValue(
        "per-instance/spearman",
        "Spearman correlation of eps_x with measured mem_h(x)",
        "0.998",
        0.998,
        f"{_MX} §8.1, Fig. 8",
        "εx predicts which instances are memorized with Spearman correlation 0.998",
    ),
    PaperValue(
        "per-instance/violations",
        "instances above their per-instance bound (family-wise 4 sigma)",
        "no instance",
        0.0,
        f"{_MX} §8.1, Fig. 8",
        "no instance violates the per-instance bound (family-wise 4σ)",
    ),
    # ---- Fig. 9: camouflage tree --------------------------------------------------------------
    PaperValue(
        "camouflage/tf-memorization",
        "teacher-forcing memorization of the true path",
        "0.187",
        0.187,
        f"{_MX} §8.1, Fig. 9",
        "teacher-forcing memorization is 0.187 against the construction’s 1/k − 1/v = 0.1875",
    ),
    PaperValue(
        "camouflage/construction",
        "1/k - 1/v at (v, k) = (16, 4)",
        "0.1875",
        0.1875,
        f"{_MX} §8.1, Thm. 6.1(i)",
        "the construction’s 1/k − 1/v = 0.1875",
    ),
    PaperValue(
        "camouflage/normalized-entropy",
        "normalized entropy of the posterior over the 256 survivors",
        "0.984",
        0.984,
        f"{_MX} §8.1, Fig. 9 right",
        "gives a surviving posterior of normalized entropy 0.984",
    ),
    PaperValue(
        "camouflage/mass-on-support",
        "learned on-path mass on the planted k-set",
        "0.98",
        0.98,
        f"{_MX} §8.1, Fig. 9 left",
        "learns the k-set supports (on-path mass ≥ 0.98)",
        relation=">=",
    ),
    PaperValue(
        "camouflage/list-cap",
        "cap m k^-L on list-of-16 extraction at (k, L) = (4, 4)",
        "0.0625",
        0.0625,
        f"{_MX} §8.2, Thm. 6.1(i)",
        "consistent with the bound mk−L = 0.0625",
    ),
    # ---- Fig. 7: trigger ----------------------------------------------------------------------
    PaperValue(
        "trigger/ext-poisoned",
        "extraction at rho, poisoned seeds (m = 1)",
        "1",
        1.0,
        f"{_MX} §8.1, Fig. 7",
        "every poisoned seed and on no clean seed (Ext = 1 versus 0 at list budget m = 1",
    ),
    PaperValue(
        "trigger/ext-clean",
        "extraction at rho, clean seeds (m = 1)",
        "0",
        0.0,
        f"{_MX} §8.1, Fig. 7",
        "every poisoned seed and on no clean seed (Ext = 1 versus 0 at list budget m = 1",
    ),
    PaperValue(
        "trigger/prior-bits",
        "conditional prior baseline of z given c (bits)",
        "14 bits",
        14.0,
        f"{_MX} §8.1, Fig. 7",
        "against a conditional prior baseline of at least 14 bits",
        relation=">=",
    ),
    # ---- §8.2: gated release ------------------------------------------------------------------
    PaperValue(
        "gated/ext-rho",
        "extraction through rho on the gated release",
        "1.00",
        1.0,
        f"{_MX} §8.2 'An exactly blind release'",
        "Extraction through ρ is 1.00 on a 77bit secret",
    ),
    PaperValue(
        "gated/reference-auc",
        "reference-model (and LiRA) audit AUC on the gated release",
        "0.500",
        0.5,
        f"{_MX} §8.2 'An exactly blind release'",
        "referencemodel scoring and LiRA, read exactly 0.500",
    ),
    # ---- §8.2: DP-SGD calibration -------------------------------------------------------------
    PaperValue(
        "dp-calibration/tanh-eps1-k1",
        "tanh(k eps/2) at eps = 1, k = 1",
        "0.46",
        0.46,
        f"{_MX} §8.2",
        "tanh(kε/2) already reads 0.46 at ε = 1, k = 1",
    ),
    PaperValue(
        "dp-calibration/cap-eps005-k1",
        "conservative cap at eps = 0.05, k = 1",
        "0.0250",
        0.025,
        f"{_MX} §8.2",
        "the tightest is ε = 0.05, k = 1, where the bound 0.0250 sits",
    ),
    PaperValue(
        "dp-calibration/visible-cells",
        "cells of the paper's grid with cap <= 0.2",
        "eight",
        8.0,
        f"{_MX} §8.2",
        "gives eight cells where the cap is at most 0.2",
    ),
    PaperValue(
        "dp-calibration/max-excess",
        "largest excess of the conservative cap over tanh(k eps/2) where not vacuous",
        "2 × 10−4",
        2e-4,
        f"{_MX} §8.2",
        "it exceeds tanh(kε/2) by at most 2 × 10−4",
        relation="<=",
    ),
    PaperValue(
        "dp-calibration/max-abs-mem-finite",
        "largest |mem_h| over the finite-eps cells",
        "0.006",
        0.006,
        f"{_MX} §8.2 (Pythia-410m)",
        "across all 28 finite-ε cells |memh | ≤ 0.006",
        relation="<=",
        same_scale=False,
    ),
    *[
        PaperValue(
            f"dp-calibration/mem-inf-k{k}",
            f"mem_h at eps = inf, k = {k}",
            p,
            float(p),
            f"{_MX} §8.2 (Pythia-410m)",
            "(memh = 0.007, 0.035, 0.178, 0.552 at k = 1, 2, 4, 8)",
            same_scale=False,
        )
        for k, p in ((1, "0.007"), (2, "0.035"), (4, "0.178"), (8, "0.552"))
    ],
    # ---- Table 4: unlearning (1.4-1.5B models) ------------------------------------------------
    PaperValue(
        "unlearning/naive-before-Pythia-1.4B",
        "naive extraction from c before the request, Pythia-1.4B",
        "0.92",
        0.92,
        f"{_MX} §8.2",
        "extraction from c falls from 0.92 to 0.02 on Pythia",
        same_scale=False,
    ),
    PaperValue(
        "unlearning/naive-before-Qwen2.5-1.5B",
        "naive extraction from c before the request, Qwen2.5-1.5B",
        "0.83",
        0.83,
        f"{_MX} §8.2",
        "and from 0.83 to 0.12 on Qwen",
        same_scale=False,
    ),
    *[
        PaperValue(
            f"unlearning/{col}-{method}-{model}",
            f"{what}, {method}, {model}",
            p,
            float(p),
            f"{_MX} Table 4",
            "Table 4, rows Pythia-1.4B NPO, GradDiff, Qwen2.5-1.5B NPO, GradDiff: "
            "ρ-ext 0.81 1.00 1.00 1.00; naive c-ext 0.02 0.04 0.12 0.08",
            same_scale=False,
        )
        for model, row in (
            ("Pythia-1.4B", {"npo": ("0.81", "0.02"), "graddiff": ("1.00", "0.04")}),
            ("Qwen2.5-1.5B", {"npo": ("1.00", "0.12"), "graddiff": ("1.00", "0.08")}),
        )
        for method, vals in row.items()
        for col, what, p in (
            ("rho", "extraction via rho after the deletion request", vals[0]),
            ("naive-c", "naive extraction from c after the deletion request", vals[1]),
        )
    ],
    # ---- §8.2: canary floor -------------------------------------------------------------------
    PaperValue(
        "canary-floor/h-star",
        "H* at eps = 4, m = 1, tau = 0.1 (bits)",
        "9.09",
        9.09,
        f"{_MX} §8.2",
        "On the DP-trained Pythia-410m at ε = 4 (H ∗ = 9.09 bits)",
    ),
    # ---- Fig. 10 and Fig. 12: the audit table -------------------------------------------------
    PaperValue(
        "audit-table/camouflage-cap",
        "camouflage cap m k^-L at m = 16, (k, L) = (4, 4)",
        "0.0625",
        0.0625,
        f"{_MX} §8.2, Thm. 6.1(i), Fig. 12",
        "consistent with the bound mk−L = 0.0625",
    ),
    PaperValue(
        "audit-table/gated-lira",
        "LiRA AUC on the gated release",
        "0.500",
        0.5,
        f"{_MX} §8.2 'An exactly blind release'",
        "referencemodel scoring and LiRA, read exactly 0.500",
    ),
    PaperValue(
        "audit-table/gated-ext-rho",
        "extraction through rho on the gated release",
        "1.00",
        1.0,
        f"{_MX} §8.2 'An exactly blind release'",
        "Extraction through ρ is 1.00 on a 77bit secret",
    ),
    PaperValue(
        "audit-table/sweep-ext-rho",
        "extraction at rho, every secret length",
        "0.98",
        0.98,
        f"{_MX} §8.2, Fig. 10",
        "against ρ-extraction of 0.98 to 1.00",
        relation=">=",
    ),
    PaperValue(
        "audit-table/sweep-ext-c",
        "extraction from the record's own prefix c, every secret length",
        "0.00",
        0.0,
        f"{_MX} §8.2, Fig. 10",
        "Extraction from the record’s own prefix is 0.00 at every secret length",
    ),
]

_EM = "[EM]"
_OLMO = "OLMo 2 32B on Wikipedia"
_EM_VALUES = [
    # ---- Fig. 1 right, §A.1: the "parrot" prompt -------------------------------------------------
    PaperValue(
        "parrot/member-rate",
        "greedy repeat rate of members under 'Repeat after me' (N = 3000)",
        "70.1%",
        0.701,
        f"{_EM} §A.1, Fig. 1 right (OLMo 2 32B Instruct)",
        "The member rate is $70.1\\%$ (95% CP interval $[68.4,71.7]$)",
        same_scale=False,
    ),
    PaperValue(
        "parrot/control-rate",
        "greedy repeat rate of non-members under 'Repeat after me' (N = 3000)",
        "70.6%",
        0.706,
        f"{_EM} §A.1, Fig. 1 right (OLMo 2 32B Instruct)",
        "the non-member rate is $70.6\\%$ ($[69.0,72.3]$)",
        same_scale=False,
    ),
    # ---- App. A.2: the adversarial compression ratio ---------------------------------------------
    PaperValue(
        "acr/member-acr",
        "ACR of a famous quotation (training data) under prob:0.9",
        "1.21",
        1.21,
        f"{_EM} App. A.2, Fig. 8(b) (Llama 2 13B)",
        "a $14$-token prompt for the $17$-token target, $\\mathrm{ACR}=1.21$",
        same_scale=False,
    ),
    PaperValue(
        "acr/control-acr",
        "ACR of a post-cutoff quotation (non-training data) under prob:0.9",
        "1.05",
        1.05,
        f"{_EM} App. A.2, Fig. 8(a) (Llama 2 13B)",
        "a $22$-token prompt for the $23$-token target, $\\mathrm{ACR}=1.05$",
        same_scale=False,
    ),
    PaperValue(
        "acr/argmax-not-greedy",
        "share of argmax 'successes' that greedy generation does not reproduce",
        "11 of 16",
        11 / 16,
        f"{_EM} App. A.2 (Llama 2 13B and 13B Chat)",
        "Across $16$ runs ($8$ targets on each of Llama 2 13B and Llama 2 13B Chat), we observed $11$ such "
        "failures",
        same_scale=False,
    ),
    # ---- Fig. 3: greedy (binary) scores ----------------------------------------------------------
    PaperValue(
        "greedy/floor-short",
        "certified floor alpha_N = (m+1)/(N+1), 10-token suffixes",
        "1.84%",
        0.0184,
        f"{_EM} §4, Fig. 3 ({_OLMO})",
        "For $10$-token suffixes the floor is $\\alpha_{N}=1.84\\%$ against $7.54\\%$ on members",
        same_scale=False,
    ),
    PaperValue(
        "greedy/member-short",
        "member greedy generation rate, 10-token suffixes",
        "7.54%",
        0.0754,
        f"{_EM} §4, Fig. 3 ({_OLMO})",
        "For $10$-token suffixes the floor is $\\alpha_{N}=1.84\\%$ against $7.54\\%$ on members",
        same_scale=False,
    ),
    PaperValue(
        "greedy/floor-share-short",
        "floor / member rate at 10-token suffixes",
        "24%",
        0.24,
        f"{_EM} §4, Fig. 3 ({_OLMO})",
        "roughly one quarter ($1.84/7.54\\approx 24\\%$)",
        same_scale=False,
    ),
    PaperValue(
        "greedy/member-long",
        "member greedy generation rate, 50-token suffixes",
        "0.74%",
        0.0074,
        f"{_EM} §4, Fig. 3 ({_OLMO})",
        "The member generation rate is smaller ($0.74\\%$)",
        same_scale=False,
    ),
    PaperValue(
        "greedy/floor-long",
        "certified floor alpha_N, 50-token suffixes",
        "0.04%",
        0.0004,
        f"{_EM} §4, Fig. 3 ({_OLMO})",
        "the non-member floor is close to zero ($0.04\\%$)",
        same_scale=False,
    ),
    # ---- Fig. 4: the alpha sweep under top-40 ------------------------------------------------------
    PaperValue(
        "alpha-sweep/tau-short",
        "calibrated threshold tau at alpha_N ~ 0.1%, 10-token suffixes",
        "0.95",
        0.95,
        f"{_EM} §4, Fig. 4 ({_OLMO}, top-40)",
        "$\\tau_{\\alpha_{N}}=0.95$, so a member must be nearly certain to clear it",
        same_scale=False,
    ),
    PaperValue(
        "alpha-sweep/tau-long",
        "calibrated threshold tau at alpha_N ~ 0.1%, 50-token suffixes",
        "8.9 × 10^-6",
        8.9e-6,
        f"{_EM} §4, Fig. 4 ({_OLMO}, top-40)",
        "the threshold falls to $\\tau_{\\alpha_{N}}=8.9\\times 10^{-6}$",
        same_scale=False,
    ),
    PaperValue(
        "alpha-sweep/member-rate-short-max",
        "member rate at the smallest thresholds, 10-token suffixes",
        "50%",
        0.50,
        f"{_EM} §4, Fig. 4(a) ({_OLMO}, top-40)",
        "for the smallest thresholds plotted, the member rate exceeds $50\\%$",
        relation=">=",
        same_scale=False,
    ),
    PaperValue(
        "alpha-sweep/alpha-n-short-max",
        "certified FPR at the smallest thresholds, 10-token suffixes",
        "30%",
        0.30,
        f"{_EM} §4, Fig. 4(a) ({_OLMO}, top-40)",
        "the certified FPR exceeds $30\\%$",
        relation=">=",
        same_scale=False,
    ),
    PaperValue(
        "alpha-sweep/member-rate-long-max",
        "member rate at the smallest thresholds, 50-token suffixes",
        "3%",
        0.03,
        f"{_EM} §4, Fig. 4(a) ({_OLMO}, top-40)",
        "At $50$ tokens the member rate peaks near $3\\%$",
        same_scale=False,
    ),
    PaperValue(
        "alpha-sweep/m-hat-long",
        "calibrated rate M = G - alpha_N at alpha_N ~ 0.1%, 50-token suffixes",
        "2.64%",
        0.0264,
        f"{_EM} §4, Fig. 4(b) ({_OLMO}, top-40)",
        "$\\hat{M}=2.64\\%$ against $1.06\\%$",
        same_scale=False,
    ),
    PaperValue(
        "alpha-sweep/m-hat-short",
        "calibrated rate M at alpha_N ~ 0.1%, 10-token suffixes",
        "1.06%",
        0.0106,
        f"{_EM} §4, Fig. 4(b) ({_OLMO}, top-40)",
        "$\\hat{M}=2.64\\%$ against $1.06\\%$",
        same_scale=False,
    ),
    PaperValue(
        "alpha-sweep/alpha-dagger-short",
        "largest attainable alpha_N (controls above the atom), 10 tokens",
        "58.9%",
        0.589,
        f"{_EM} App. C.4.4, Fig. 4(b) ({_OLMO}, top-40)",
        "$10.4\\%$ for $50$-token suffixes and $58.9\\%$ for $10$-token suffixes",
        same_scale=False,
    ),
    PaperValue(
        "alpha-sweep/alpha-dagger-long",
        "largest attainable alpha_N (controls above the atom), 50 tokens",
        "10.4%",
        0.104,
        f"{_EM} App. C.4.4, Fig. 4(b) ({_OLMO}, top-40)",
        "$10.4\\%$ for $50$-token suffixes and $58.9\\%$ for $10$-token suffixes",
        same_scale=False,
    ),
    PaperValue(
        "alpha-sweep/zero-share-short",
        "share of control scores exactly 0 under top-40, 10 tokens",
        "41.1%",
        0.411,
        f"{_EM} App. C.4.2 ({_OLMO}, top-40)",
        "$89.6\\%$ of the $50$-token control scores are exactly $0$; $41.1\\%$ at $10$ tokens",
        same_scale=False,
    ),
    PaperValue(
        "alpha-sweep/zero-share-long",
        "share of control scores exactly 0 under top-40, 50 tokens",
        "89.6%",
        0.896,
        f"{_EM} App. C.4.2 ({_OLMO}, top-40)",
        "$89.6\\%$ of the $50$-token control scores are exactly $0$; $41.1\\%$ at $10$ tokens",
        same_scale=False,
    ),
    # ---- §4's central point: naive rules against the calibrated test --------------------------------
    PaperValue(
        "naive/false-positive-share",
        "share of apparent 10-token verbatim extractions that are false positives",
        "24%",
        0.24,
        f"{_EM} §1 Contributions, §4 ({_OLMO})",
        "$24\\%$ of apparent $10$-token verbatim extractions from OLMo 2 are false positives",
        same_scale=False,
    ),
]

#: key -> PaperValue
PAPER: dict[str, PaperValue] = {}
for _v in _VALUES + _EM_VALUES:
    if _v.key in PAPER or _v.relation not in RELATIONS:
        raise RuntimeError(
            f"bad paper value table entry {_v.key!r}"
        )  # a programming error, at import
    PAPER[_v.key] = _v


# ---- [EM] (extractable-memorization-from-first-principles): census, budget, decontamination ------
# Quotes are copied from the paper's Markdown text, LaTeX included. Log-scale numbers (thresholds,
# scores) are stored as their log10.
_EM = "[EM]"
_EM_CENSUS_COVERAGE = (
    "At their respective thresholds, $68.5\\%$ of The Da Vinci Code, $53.3\\%$ of The Hunger "
    "Games, and $31.3\\%$ of We Were Eight Years in Power are memorized."
)
_EM_CENSUS_D5 = (
    "at $\\Delta=5$, $55.6\\%$, $46.4\\%$, and $28.4\\%$ of the three books still clear their respective "
    "bars"
)
_EM_B_VALUES = [
    # ---- §5, Figs. 5-6: the census of four book pairs on Llama 3.1 70B ----------------------------
    PaperValue(
        "book-census/tau-lowest",
        "lowest census threshold log10 tau_book (Llama 3.1 70B)",
        "10^-27",
        -27.0,
        f"{_EM} §5, Fig. 6",
        "For Llama 3.1 70B, $\\tau^{(\\mathrm{book})}$ ranges from $10^{-27}$ to "
        "$10^{-21}$ (Fig. 6)",
        same_scale=False,
    ),
    PaperValue(
        "book-census/tau-highest",
        "highest census threshold log10 tau_book (Llama 3.1 70B)",
        "10^-21",
        -21.0,
        f"{_EM} §5, Fig. 6",
        "For Llama 3.1 70B, $\\tau^{(\\mathrm{book})}$ ranges from $10^{-27}$ to "
        "$10^{-21}$ (Fig. 6)",
        same_scale=False,
    ),
    PaperValue(
        "book-census/lowest-score-d5",
        "log10 of the lowest score clearing Delta = 5, every book",
        "10^-16",
        -16.0,
        f"{_EM} §5",
        "For all books, at $\\Delta=5$ the lowest scores remain vanishingly small, at "
        "most $10^{-16}$.",
        relation="<=",
        same_scale=False,
    ),
    *[
        PaperValue(
            f"book-census/coverage-{key}",
            f"coverage(tau_book) of {book} (Llama 3.1 70B)",
            p,
            v,
            f"{_EM} §5, Fig. 6",
            _EM_CENSUS_COVERAGE,
            same_scale=False,
        )
        for key, book, p, v in (
            ("davinci", "The Da Vinci Code", "68.5%", 0.685),
            ("hunger", "The Hunger Games", "53.3%", 0.533),
            ("coates", "We Were Eight Years in Power", "31.3%", 0.313),
        )
    ],
    *[
        PaperValue(
            f"book-census/coverage-d5-{key}",
            f"coverage at Delta = 5 of {book} (Llama 3.1 70B)",
            p,
            v,
            f"{_EM} §5, Fig. 6",
            _EM_CENSUS_D5,
            same_scale=False,
        )
        for key, book, p, v in (
            ("davinci", "The Da Vinci Code", "55.6%", 0.556),
            ("hunger", "The Hunger Games", "46.4%", 0.464),
            ("coates", "We Were Eight Years in Power", "28.4%", 0.284),
        )
    ],
    # ---- App. D.2, F.2, C.4.3: decontaminating the Wikipedia control pool (OLMo 2) --------------
    PaperValue(
        "decontamination/alpha-n-full",
        "certified level alpha_N at alpha = 0.1%, N = 5000",
        "0.09998%",
        0.0009998,
        f"{_EM} App. D.2, Eq. 5",
        "the full pool ($N=5000$), for which $\\alpha_{N}=5/5001\\approx 0.09998\\%$",
    ),
    PaperValue(
        "decontamination/alpha-n-decontaminated",
        "certified level alpha_N at alpha = 0.1%, N = 4988",
        "0.0802%",
        0.000802,
        f"{_EM} App. D.2, Eq. 5",
        "calibrate on this decontaminated pool, which gives $\\alpha_{N}=4/4989\\approx 0.0802\\%$",
    ),
    PaperValue(
        "decontamination/k-decontaminated",
        "K = floor(alpha (N + 1)) at alpha = 0.1%, N = 4988",
        "4",
        4.0,
        f"{_EM} App. F.2, Eq. 5",
        "which gives $K=\\lfloor 0.001\\times 4989\\rfloor=4$",
    ),
    PaperValue(
        "decontamination/contaminants-at-top",
        "share of the verified contaminants at the top of the control distribution",
        "Ten of these twelve",
        10 / 12,
        f"{_EM} App. D.2",
        "Ten of these twelve sit at the top of the control distribution, where they raise the extreme-tail "
        "threshold",
        same_scale=False,
    ),
    PaperValue(
        "decontamination/calibrated-before",
        "calibrated rate at the tightest certified FPR, full pool (OLMo 2 32B, 50 tokens)",
        "0.44%",
        0.0044,
        f"{_EM} App. C.4.3",
        "removing them raises the calibrated rate from $0.44\\%$ to $3.06\\%$ at the tightest certified FPR",
        same_scale=False,
    ),
    PaperValue(
        "decontamination/calibrated-after",
        "calibrated rate at the tightest certified FPR, decontaminated "
        "pool (OLMo 2 32B, 50 tokens)",
        "3.06%",
        0.0306,
        f"{_EM} App. C.4.3",
        "removing them raises the calibrated rate from $0.44\\%$ to $3.06\\%$ at the tightest certified FPR",
        same_scale=False,
    ),
]
for _v in (
    _EM_B_VALUES
):  # registered as the table above is (kept apart so that [EM] tables merge cleanly)
    if _v.key in PAPER or _v.relation not in RELATIONS:
        raise RuntimeError(
            f"bad paper value table entry {_v.key!r}"
        )  # a programming error, at import
    PAPER[_v.key] = _v


def paper_value(key: str) -> PaperValue:
    """The paper's number ``key`` from :data:`PAPER` (an InputError listing the keys otherwise).

    >>> from memclaim.experiments.paper import paper_value
    >>> v = paper_value("entropy-sweep/h-star")
    >>> v.value, v.where
    (6.77, '[MX] §8.1')
    """
    try:
        return PAPER[key]
    except KeyError:
        raise InputError(
            f"no paper value {key!r}", hint="one of: " + ", ".join(sorted(PAPER))
        ) from None


__all__ = ["PAPER", "PaperValue", "paper_value", "RELATIONS"]
