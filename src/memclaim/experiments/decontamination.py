"""`decontamination`: [EM] App. D.2, §5, E.1: known KJV quotations planted in copies of the control
prose (as post-cutoff web text or a later book quoting earlier text would), then the census and
the population test with and without the verified contaminated controls, side by side.

A control that quotes training text is a member, not a non-member: it scores high and raises
the bar that candidates must clear ([EM] §4, §5, C.3), so contamination makes claims more
conservative, and removing only *verified* contaminants restores the threshold that the
control's own prose sets ([EM] E.1: "remove only passages verified as being reused from
earlier sources; the in-training book is never culled"). Here the contaminants are planted, so
which ones are contaminated is known exactly; the near-verbatim flagger of the census
(claims.census.flag_near_verbatim) is run as the inspection step and its suspects are compared
with the planted spans.

- census: Genesis 1-3 against (i) its clean control, (ii) a copy of the control with quotations
  planted at sentence starts (two from Genesis 1-3 itself, like Sunrise on the Reaping quoting
  The Hunger Games; the others from famous KJV passages, like its lines from "The Raven"), and
  (iii) the same copy with the planted spans excluded before tau_doc is set ([EM] Eq. 31). Each
  quotation is cut at a word boundary so that it adds a whole number of strides of tokens where
  the tokenizer allows it: the copy's own-prose windows are then exactly the clean control's
  windows (scored once, reused from the store), and the comparison isolates the quotations.
- population: KJV verses (members) against the newly written verses (controls), one window each
  (16-token prefix, 16-token suffix); some controls are replaced by copies that open with a
  famous KJV passage. The conformal test ([EM] §3, Eq. 5-8) on the clean pool, on the
  contaminated pool, and on the contaminated pool without the verified contaminants
  (claims.population.population_claim, [EM] D.2), at alpha = 0.05 and at the tightest
  certified level K = 1.

The quotations, where they were planted (character spans, token counts) and which controls they
replaced are recorded in the JSON. Draws (which sentences, which passages, which controls) come
from the seed's "plant" stream.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..claims.census import census, coverage_from_heat, flag_near_verbatim, overlapping_windows
from ..claims.conformal import certified_level, population_test, rank_k
from ..claims.intervals import newcombe_paired
from ..claims.population import population_claim
from ..claims.scores import LN10
from ..errors import InputError
from ..report.style import PALETTE, blank_figure, legend, style
from ..text.io import Record
from . import real_text as rt
from .common import PaperClaim, check, compare, paper_claim, paper_footer
from .skeleton import Reproduction
from .verdicts import fmt_interval, rate

if TYPE_CHECKING:  # the annotations' names only
    from ..models.loader import HFTokenizer

NAME = "decontamination"
TITLE = "Planted quotations in the controls: census and population test with and without them ([EM] D.2, §5)"
STREAMS = ("plant",)


# ---- the paper's sentences (issue 24 item 2): quoted, each tested as stated
QUOTE_INFLATES = (
    "Such sequences contaminate the control pool: they’re actually members, not non-members, and can "
    "score high, inflating $\\tau^{(\\mathrm{book})}$."
)
QUOTE_CONSERVATIVE = (
    "Contamination only leads to more conservative claims: a contaminated control is actually a "
    "member; if it scores high, it can raise the bar a candidate must clear to claim memorization "
    "(§C.3, §D.2)."
)
QUOTE_AT_TOP = (
    "Ten of these twelve sit at the top of the control distribution, where they raise the extreme-tail "
    "threshold; the remaining two score exactly $0$, so they don’t move it."
)
QUOTE_RESTORES = (
    "We therefore remove only web-verified contaminants from the control, leave the in-training book "
    "untouched, and set $\\tau^{(\\mathrm{book})}$ from the highest-scoring remaining own-prose "
    "sequence."
)
QUOTE_RAISES = (
    "Their presence raises the calibrated threshold; removing them raises the calibrated rate from "
    "$0.44\\%$ to $3.06\\%$ at the tightest certified FPR."
)


def claims_for(
    *,
    census_rows: dict,
    top_in_plant: bool,
    pool: dict,
    pool_k1: dict,
    paired_k1: dict,
    at_top: int,
    planted: int,
    alpha: float,
    n_members: int,
) -> list[PaperClaim]:
    """The sentences of [EM] §4, §5, E.1, App. D.2 and C.4.3 on contaminated controls judged on this run,
    each by a rule fixed before the run. ``census_rows`` and ``pool`` / ``pool_k1`` map "clean",
    "contaminated", "decontaminated" to the census rows and the population test's rows (at alpha, and at the
    tightest level K = 1); ``paired_k1`` counts members claimed at K = 1 with and without the contaminants
    (both, decontaminated only, contaminated only, neither); ``at_top`` of the ``planted`` controls score
    above every genuine control.

    >>> from memclaim.experiments.decontamination import claims_for
    >>> cen = lambda t, cov, n=0: {"log10_tau": t, "coverage": cov, "n_excluded": n}
    >>> row = lambda n, m, lo, nc: {"n_claimed": n, "calibrated_rate": {"estimate": m, "lower": lo}, "n_controls": nc}
    >>> kw = dict(census_rows={"clean": cen(-61, 0.96), "contaminated": cen(-20, 0.3), "decontaminated":
    ...           cen(-61, 0.96, 4)}, top_in_plant=True, alpha=0.05, n_members=60,
    ...           pool={"clean": row(30, 0.45, 0.3, 60), "contaminated": row(25, 0.37, 0.2, 60),
    ...                 "decontaminated": row(28, 0.42, 0.3, 56)},
    ...           pool_k1={"clean": row(20, 0.32, 0.2, 60), "contaminated": row(3, 0.03, 0.0, 60),
    ...                    "decontaminated": row(18, 0.28, 0.16, 56)})
    >>> [c.verdict for c in claims_for(paired_k1={"both": 3, "decontaminated_only": 15, "contaminated_only": 0,
    ...                                           "neither": 42}, at_top=12, planted=12, **kw)]
    ['held', 'held', 'held', 'held', 'held']
    >>> [c.verdict for c in claims_for(paired_k1={"both": 3, "decontaminated_only": 1, "contaminated_only": 0,
    ...                                           "neither": 56}, at_top=5, planted=12, **kw)][2:]
    ['not held', 'held', 'not held']
    >>> claims_for(paired_k1={"both": 3, "decontaminated_only": 1, "contaminated_only": 0, "neither": 56}, at_top=4,
    ...            planted=4, **kw)[2].verdict  # 4 of 4 at the top: lower bound 0.398, cannot show "most"
    'not testable here'
    """
    cl, dt, ex = census_rows["clean"], census_rows["contaminated"], census_rows["decontaminated"]
    pc, pd, pdec = pool["clean"], pool["contaminated"], pool["decontaminated"]
    kc, kd, kdec = pool_k1["clean"], pool_k1["contaminated"], pool_k1["decontaminated"]
    out = [
        paper_claim(
            "contaminant-inflates-tau",
            "a quotation of training text in the control scores high and inflates tau_doc",
            quote=QUOTE_INFLATES,
            where="[EM] §5, E.1",
            test="tau_doc with the contaminated control > tau_doc with the clean control, and the top control window "
            "lies in a planted quotation (the census is exact: no interval)",
            held=dt["log10_tau"] > cl["log10_tau"] and top_in_plant,
            numbers={
                "log10_tau_clean": cl["log10_tau"],
                "log10_tau_contaminated": dt["log10_tau"],
                "top_window_in_a_quotation": top_in_plant,
            },
            evidence=f"tau_doc clean 1e{cl['log10_tau']}, contaminated 1e{dt['log10_tau']} (top window "
            f"{'inside' if top_in_plant else 'outside'} a planted quotation)",
        )
    ]
    conservative = (
        dt["coverage"] <= cl["coverage"]
        and pd["n_claimed"] <= pc["n_claimed"]
        and kd["n_claimed"] <= kc["n_claimed"]
    )
    out.append(
        paper_claim(
            "more-conservative",
            "contamination only makes claims more conservative",
            quote=QUOTE_CONSERVATIVE,
            where="[EM] §4, C.3, D.2",
            test=f"with the contaminated control, the census covers no more and the population test claims no more "
            f"members, at alpha = {alpha:g} and at the tightest level K = 1, than with the clean one",
            held=conservative,
            numbers={
                "coverage_clean": cl["coverage"],
                "coverage_contaminated": dt["coverage"],
                "claimed_at_alpha": {"clean": pc["n_claimed"], "contaminated": pd["n_claimed"]},
                "claimed_at_k1": {"clean": kc["n_claimed"], "contaminated": kd["n_claimed"]},
            },
            evidence=f"coverage {cl['coverage']:.4f} -> {dt['coverage']:.4f}; members claimed at alpha = {alpha:g}: "
            f"{pc['n_claimed']} -> {pd['n_claimed']}, at K = 1: {kc['n_claimed']} -> {kd['n_claimed']} of "
            f"{n_members}",
        )
    )
    top = rate(at_top, planted)
    best = rate(planted, planted)[
        "lower"
    ]  # every contaminant at the top: the most this many can show
    test = (
        "the share of planted (verified) contaminants scoring above every genuine control is more than half: its "
        "95% Clopper-Pearson lower bound exceeds 1/2 (the paper's 10 of 12 gives 0.516); testable only with enough "
        "contaminants for all of them at the top to show it (6 or more)"
    )
    ev_top = f"{at_top} of {planted} planted controls score above every genuine control: {fmt_interval(top)}"
    out.append(
        paper_claim(
            "contaminants-at-top",
            "most verified contaminants sit at the top of the control distribution",
            quote=QUOTE_AT_TOP,
            where="[EM] App. D.2",
            test=test,
            held=None if best <= 0.5 else top["lower"] > 0.5,
            numbers={"share_at_top": top, "lower_bound_if_all_at_top": best},
            evidence=ev_top
            if best > 0.5
            else (
                f"{planted} contaminants cannot show 'more than half' at 95% even if all "
                f"sit at the top (lower bound {best:.3f}); " + ev_top
            ),
        )
    )
    out.append(
        paper_claim(
            "exclusion-restores-tau",
            "removing only the verified contaminants restores the threshold set by the "
            "control's own prose",
            quote=QUOTE_RESTORES,
            where="[EM] §5, E.1",
            test="tau_doc with the planted spans excluded equals the clean control's tau_doc (exact)",
            held=ex["log10_tau"] == cl["log10_tau"],
            numbers={
                "log10_tau_decontaminated": ex["log10_tau"],
                "log10_tau_clean": cl["log10_tau"],
                "windows_excluded": ex["n_excluded"],
                "coverage_decontaminated": ex["coverage"],
            },
            evidence=f"tau_doc after excluding the {ex['n_excluded']} windows whose suffix overlaps a quotation: "
            f"1e{ex['log10_tau']} (clean control: 1e{cl['log10_tau']}); coverage {ex['coverage']:.4f} (clean "
            f"{cl['coverage']:.4f})",
        )
    )
    # M_dec - M_dirty at K = 1: the same members' paired claims, shifted by the certified levels' difference
    p = paired_k1
    g_diff = newcombe_paired(
        p["both"], p["decontaminated_only"], p["contaminated_only"], p["neither"]
    ).to_dict()
    shift = -(1 / (kdec["n_controls"] + 1) - 1 / (kd["n_controls"] + 1))
    d = {
        **g_diff,
        "estimate": g_diff["estimate"] + shift,
        "lower": g_diff["lower"] + shift,
        "upper": g_diff["upper"] + shift,
        "method": g_diff["method"] + ", shifted by the change in alpha_N",
    }
    out.append(
        paper_claim(
            "exclusion-raises-rate",
            "removing verified contaminants raises the calibrated rate at the tightest level",
            quote=QUOTE_RAISES,
            where="[EM] App. C.4.3, D.2",
            test="at the tightest certified FPR (K = 1), the calibrated rate without the verified contaminants exceeds "
            "the rate with them: Newcombe's paired 95% interval for M_decontaminated - M_contaminated (the same "
            "members; alpha_N = 1/(N+1) of each pool subtracted) lies above 0",
            held=d["lower"] > 0,
            numbers={
                "calibrated_rate_contaminated_k1": kd["calibrated_rate"],
                "calibrated_rate_decontaminated_k1": kdec["calibrated_rate"],
                "difference": d,
                "calibrated_rate_at_alpha": {
                    "contaminated": pd["calibrated_rate"],
                    "decontaminated": pdec["calibrated_rate"],
                },
            },
            evidence=f"M at K = 1: {kd['calibrated_rate']['estimate']:.4f} -> {kdec['calibrated_rate']['estimate']:.4f}: "
            f"difference {fmt_interval(d, digits=2)} (Newcombe paired 95%); at alpha = {alpha:g}: "
            f"{pd['calibrated_rate']['estimate']:.4f} -> {pdec['calibrated_rate']['estimate']:.4f}",
        )
    )
    return out


def _settings(quick: bool) -> dict:
    s = rt.census_settings(quick)
    s.update(
        {
            "document": "genesis_1_3.txt",
            "control": "new_genesis_style.txt",
            "quotations": "kjv_quotations.jsonl",
            "census_plants": {"from_document": 2, "from_other_kjv": 2}
            if quick
            else {"from_document": 2, "from_other_kjv": 4},
            "quote_min_tokens": s["prefix_tokens"]
            + s["suffix_tokens"],  # one window wholly inside each quotation
            "flag_min_similarity": 90.0,
            "members": "kjv_verses.jsonl",
            "controls": "new_verses.jsonl",
            "n_pairs": 60 if quick else 240,
            "population_plants": 4 if quick else 12,
            "population_prefix_tokens": 16,
            "population_suffix_tokens": 16,
            "population_policy": "full",
            "alpha": 0.05,
            "confidence": 0.95,
            "paper_pool": {"n_full": 5000, "n_decontaminated": 4988, "alpha": "1/1000"},
        }
    )
    return s


# ------------------------------------------------------------------------------ planting
def sentence_starts(text: str) -> list[int]:
    """Character offsets where a sentence begins after '. ' (an upper-case letter follows).

    >>> from memclaim.experiments.decontamination import sentence_starts
    >>> sentence_starts("It rained. Then it stopped. and so. End.")
    [11, 36]
    """
    return [i for i in range(2, len(text)) if text[i - 2 : i] == ". " and text[i].isupper()]


def cut_quotation(
    tokenizer: HFTokenizer, text: str, at: int, passage: str, *, min_tokens: int, stride: int
) -> dict:
    """The shortest word-prefix of ``passage`` that, inserted at ``at`` (a sentence start, after a
    space) as ``quote + " "``, adds at least ``min_tokens`` tokens and a multiple of ``stride``
    of them while leaving the tokens around it unchanged ("aligned"); failing that, the shortest
    with at least ``min_tokens`` tokens (or the whole passage). Returns the quote and its counts.
    ``tokenizer`` needs only ``encode(text) -> list`` (here a whitespace one; the run uses the model's).

    >>> from types import SimpleNamespace
    >>> from memclaim.experiments.decontamination import cut_quotation
    >>> words = SimpleNamespace(encode=str.split)
    >>> cut_quotation(words, "It rained. Then it stopped.", 11, "The LORD is my shepherd; I shall not want.",
    ...               min_tokens=3, stride=2)
    {'quote': 'The LORD is my', 'words': 4, 'tokens': 4, 'aligned': True}
    """
    if at < 1 or text[at - 1] != " ":
        raise InputError(
            f"insertion point {at} does not follow a space", hint="insert at a sentence start"
        )
    ids = tokenizer.encode(text)
    words = passage.split(" ")
    fallback = None
    for k in range(1, len(words) + 1):
        q = " ".join(words[:k])
        new = tokenizer.encode(text[:at] + q + " " + text[at:])
        added = len(new) - len(ids)
        if added < min_tokens and k < len(words):
            continue
        t = 0  # the common prefix of the two token sequences
        while t < len(ids) and t < len(new) and ids[t] == new[t]:
            t += 1
        # aligned: the new tokens are the old ones with `added` tokens spliced in at t
        aligned = added > 0 and new[t + added :] == ids[t:]
        cand = {
            "quote": q,
            "words": k,
            "tokens": added,
            "aligned": bool(aligned and added % stride == 0),
        }
        if cand["aligned"]:
            return cand
        if fallback is None:
            fallback = cand
    return fallback


def plant_census(
    tokenizer: HFTokenizer,
    control: str,
    document: str,
    passages: Sequence[Record],
    rng: np.random.Generator,
    *,
    n_document: int,
    n_other: int,
    min_tokens: int,
    stride: int,
) -> tuple[str, list[dict]]:
    """A copy of ``control`` with ``n_document`` quotations from ``document`` and ``n_other`` from
    ``passages`` planted at sentence starts spread over the text (one per equal segment, chosen
    at random within it). Returns the copy and, per quotation, its source, text and span.

    >>> import numpy as np
    >>> from types import SimpleNamespace
    >>> from memclaim.experiments.decontamination import plant_census
    >>> from memclaim.experiments.real_text import read_records, read_text
    >>> (control, _), (genesis, _) = read_text("new_genesis_style.txt"), read_text("genesis_1_3.txt")
    >>> out, plants = plant_census(SimpleNamespace(encode=str.split), control, genesis,
    ...                            read_records("kjv_quotations.jsonl")[0], np.random.default_rng(0), n_document=1,
    ...                            n_other=1, min_tokens=5, stride=1)
    >>> [(p["source"], p["quote"]) for p in plants]
    [('genesis_1_3.txt [2053, 2076)', 'And the evening and the'), ('John3:16-3:18', 'For God so loved the')]
    """
    n = n_document + n_other
    starts = sentence_starts(control)
    seg = len(control) / n
    chosen = []
    for j in range(n):  # one sentence start per segment of the control
        opts = [i for i in starts if j * seg <= i < (j + 1) * seg and i > 0]
        if not opts:
            raise InputError(
                f"no sentence start in segment {j} of the control", hint="plant fewer quotations"
            )
        chosen.append(int(rng.choice(opts)))
    kinds = ["document"] * n_document + ["other"] * n_other
    kinds = [kinds[i] for i in rng.permutation(n)]
    doc_starts = [i for i in sentence_starts(document) if i < len(document) - 400]
    other = [passages[i] for i in rng.permutation(len(passages))[:n_other]]
    plants = []
    for at, kind in zip(chosen, kinds):
        if kind == "document":
            a = int(rng.choice(doc_starts))
            passage = document[a : a + 1200].split("\n")[0]
        else:
            rec = other.pop(0)
            passage = rec.text
        q = cut_quotation(tokenizer, control, at, passage, min_tokens=min_tokens, stride=stride)
        src = f"genesis_1_3.txt [{a}, {a + len(q['quote'])})" if kind == "document" else rec.id
        plants.append(
            {
                "kind": "quotes the document" if kind == "document" else "quotes other KJV text",
                "source": src,
                "insert_at_original": at,
                **q,
            }
        )
    # insert from the last position backwards so the earlier offsets stay valid, then the spans
    out = control
    for p in sorted(plants, key=lambda p: -p["insert_at_original"]):
        at = p["insert_at_original"]
        out = out[:at] + p["quote"] + " " + out[at:]
    plants.sort(key=lambda p: p["insert_at_original"])
    shift = 0
    for p in plants:
        a = p["insert_at_original"] + shift
        p["span"] = [a, a + len(p["quote"])]
        shift += len(p["quote"]) + 1
        if out[a : a + len(p["quote"])] != p["quote"]:  # a programming error
            raise RuntimeError("planted quotation not at its recorded span")
    return out, plants


# ------------------------------------------------------------------------------ the run
def _pool_row(t, label: str) -> dict:
    return {
        "pool": label,
        "n_controls": t.n_controls,
        "alpha": t.alpha,
        "k": t.k,
        "alpha_n": t.alpha_n,
        "alpha_n_exact": t.alpha_n_exact,
        "log10_tau": t.threshold_log10_prob,
        "n_claimed": t.n_claimed,
        "generation_rate": t.generation_rate.to_dict(),
        "calibrated_rate": t.calibrated_rate.to_dict(),
        "claim": bool(t.claim_possible and t.calibrated_rate.lower > 0),
        "no_claim_reason": t.no_claim_reason,
    }


class Decontamination(Reproduction):
    """[EM] App. D.2's contaminated controls, in the census and in the population test, on the
    skeleton (:mod:`.skeleton`)."""

    name, title, streams = NAME, TITLE, STREAMS
    reproduces = (
        "[EM] App. D.2 (contaminated controls)",
        "[EM] §5, E.1 (census decontamination)",
        "[EM] C.4.3 (the calibrated rate rises)",
    )

    def settings(self) -> dict:
        return _settings(self.quick)

    def data(self) -> None:
        """The model and the texts; the quotations planted in the census control and in some
        population controls (drawn from the "plant" stream, census first); the teacher-forced runs
        of the document, both census controls and the three populations (scored once into the
        store). All kept on ``self``."""
        s, rng = self.s, self.rngs["plant"]
        self.m = m = rt.load(s["model"])
        self.doc_text, self.doc_sha = rt.read_text(s["document"])
        self.ctl_text, self.ctl_sha = rt.read_text(s["control"])
        self.passages, self.q_sha = rt.read_records(s["quotations"])
        doc_text, ctl_text, passages = self.doc_text, self.ctl_text, self.passages

        # ---- census: plant and score ([EM] §5, E.1)
        cp = s["census_plants"]
        self.dirty_text, self.plants = plant_census(
            m.tokenizer,
            ctl_text,
            doc_text,
            passages,
            rng,
            n_document=cp["from_document"],
            n_other=cp["from_other_kjv"],
            min_tokens=s["quote_min_tokens"],
            stride=s["stride"],
        )
        self.doc = rt.score_document(m, doc_text, name=s["document"], settings=s)
        self.clean = rt.score_document(m, ctl_text, name=s["control"], settings=s)
        self.dirty = rt.score_document(
            m,
            self.dirty_text,
            name=f"{s['control']} + {len(self.plants)} planted quotations",
            settings=s,
        )

        # ---- population: members vs controls, some controls replaced by quoting copies ([EM] D.2)
        mem, mem_sha = rt.read_records(s["members"])
        con, con_sha = rt.read_records(s["controls"])
        J = s["n_pairs"]
        mem, con = mem[:J], con[:J]
        c = s["population_plants"]
        which = sorted(int(i) for i in rng.choice(J, size=c, replace=False))
        quotes = [passages[i] for i in rng.permutation(len(passages))[:c]]
        planted_ids = [con[i].id for i in which]
        dirty_con = list(con)
        pop_plants = []
        for i, q in zip(which, quotes):
            dirty_con[i] = Record(con[i].id, f"{q.text} {con[i].text}")
            pop_plants.append(
                {
                    "control_id": con[i].id,
                    "line": i + 1,
                    "quotation": q.id,
                    "text_starts": dirty_con[i].text[:80],
                }
            )
        P, S, pol = (
            s["population_prefix_tokens"],
            s["population_suffix_tokens"],
            s["population_policy"],
        )
        pols = (pol, s["paper_policy"])
        sm = rt.score_passages(
            m, mem, name=f"{s['members']}[:{J}]", prefix_tokens=P, suffix_tokens=S, policies=pols
        )
        sc = rt.score_passages(
            m, con, name=f"{s['controls']}[:{J}]", prefix_tokens=P, suffix_tokens=S, policies=pols
        )
        sx = rt.score_passages(
            m,
            dirty_con,
            name=f"{s['controls']}[:{J}] + {c} planted",
            prefix_tokens=P,
            suffix_tokens=S,
            policies=pols,
        )
        self.mem_sha, self.con_sha, self.J, self.c = mem_sha, con_sha, J, c
        self.planted_ids, self.pop_plants, self.sm, self.sc, self.sx = (
            planted_ids,
            pop_plants,
            sm,
            sc,
            sx,
        )

    def runs(self, data: None) -> dict:
        """The census thresholded three ways and its inspection step; the population test on the
        clean, contaminated and decontaminated pools, at alpha and at K = 1; the paper's pool
        arithmetic. The claims are judged here (their keys are a result)."""
        s, m, plants, doc_text, dirty_text = (
            self.s,
            self.m,
            self.plants,
            self.doc_text,
            self.dirty_text,
        )
        doc, clean, dirty, passages = self.doc, self.clean, self.dirty, self.passages
        sm, sc, sx, planted_ids, c, J = self.sm, self.sc, self.sx, self.planted_ids, self.c, self.J
        pol = s["population_policy"]

        # ---- census: threshold three ways ([EM] §5, E.1, Eq. 31)
        wd, wc, wx = (x.window_scores(s["policy"]) for x in (doc, clean, dirty))
        spans = [tuple(p["span"]) for p in plants]
        r_clean = census(wd, wc)
        r_dirty = census(wd, wx)
        r_excl = census(wd, wx, exclude_spans=spans)
        th_dirty = r_dirty.threshold
        overlap = overlapping_windows(wx, spans)
        refs = {s["quotations"]: "\n".join(p.text for p in passages)}
        flags = flag_near_verbatim(
            wx,
            dirty_text,
            candidate_text=doc_text,
            references=refs,
            min_similarity=s["flag_min_similarity"],
            top=len(wx),
        )
        flagged = np.zeros(len(wx), dtype=bool)
        flagged[[f.window for f in flags]] = True
        found = [bool(np.any(flagged & overlapping_windows(wx, [sp]))) for sp in spans]
        false_flags = int(np.count_nonzero(flagged & ~overlap))
        top_in_plant = bool(overlap[th_dirty.argmax_window])
        # windows of the copy outside every quotation's reach (suffix and prefix) vs the clean control's
        own_equal = _own_prose_windows_equal(clean, dirty, s)

        lm_, lc_, lx_ = (x.scores(pol) for x in (sm, sc, sx))
        ids_x = [w.split("#")[0] for w in lx_.window_ids]
        a = s["alpha"]
        t_clean = population_test(
            lm_.logq, lc_.logq, alpha=a, kind="log-prob", confidence=s["confidence"]
        )
        pc = population_claim(
            candidate_scores=lm_.logq,
            control_scores=lx_.logq,
            alpha=a,
            kind="log-prob",
            control_ids=ids_x,
            exclude_control_ids=planted_ids,
            confidence=s["confidence"],
            sweep=False,
        )
        t_dirty, t_dec = pc.full, pc.decontaminated
        # the tightest certified level, K = 1 (alpha = 1/(N+1)): the paper's 0.44% -> 3.06% comparison
        tight = {}
        for label, ctrl in (
            ("clean", lc_.logq),
            ("contaminated", lx_.logq),
            ("decontaminated", lx_.logq[~np.isin(ids_x, planted_ids)]),
        ):
            tight[label] = population_test(
                lm_.logq,
                ctrl,
                alpha=f"1/{ctrl.size + 1}",
                kind="log-prob",
                confidence=s["confidence"],
            )
        is_planted = np.isin(ids_x, planted_ids)
        genuine_max = float(np.max(lx_.logq[~is_planted]))
        at_top = int(np.count_nonzero(lx_.logq[is_planted] > genuine_max))

        # ---- the paper's pool arithmetic, recomputed ([EM] Eq. 5 at its N)
        pp = s["paper_pool"]
        an_full = float(certified_level(alpha=pp["alpha"], n_controls=pp["n_full"]))
        an_dec = float(certified_level(alpha=pp["alpha"], n_controls=pp["n_decontaminated"]))
        k_dec = rank_k(alpha=pp["alpha"], n_controls=pp["n_decontaminated"])

        # the paper's sentences, each judged by its rule fixed before the run (issue 24 item 2)
        cd_, cx_ = (
            np.asarray(tight[k].claimed, dtype=bool) for k in ("decontaminated", "contaminated")
        )
        paired_k1 = {
            "both": int(np.sum(cd_ & cx_)),
            "decontaminated_only": int(np.sum(cd_ & ~cx_)),
            "contaminated_only": int(np.sum(~cd_ & cx_)),
            "neither": int(np.sum(~cd_ & ~cx_)),
        }
        census_rows = {
            "clean": _census_row(r_clean, "clean control"),
            "contaminated": _census_row(r_dirty, "contaminated control"),
            "decontaminated": _census_row(r_excl, "contaminated control, planted spans excluded"),
        }
        pool = {
            "clean": _pool_row(t_clean, "clean"),
            "contaminated": _pool_row(t_dirty, "contaminated"),
            "decontaminated": _pool_row(t_dec, "decontaminated"),
        }
        pool_k1 = {k: _pool_row(tight[k], k) for k in ("clean", "contaminated", "decontaminated")}
        self._claims = claims = {
            c.key: c
            for c in claims_for(
                census_rows=census_rows,
                top_in_plant=top_in_plant,
                pool=pool,
                pool_k1=pool_k1,
                paired_k1=paired_k1,
                at_top=at_top,
                planted=c,
                alpha=a,
                n_members=J,
            )
        }
        # kept for the checks, the paper's numbers, the differences and the figure
        self.wd, self.wx, self.r_clean, self.r_dirty, self.r_excl = wd, wx, r_clean, r_dirty, r_excl
        self.lm_, self.lc_, self.lx_, self.is_planted = lm_, lc_, lx_, is_planted
        self.t_clean, self.t_dirty, self.t_dec, self.tight = t_clean, t_dirty, t_dec, tight
        self.flags, self.found, self.false_flags = flags, found, false_flags
        self.an_full, self.an_dec, self.k_dec, self.at_top = an_full, an_dec, k_dec, at_top
        self.model = model = rt.model_record(m)
        return {
            "model": model,
            "census": {
                "procedure": rt.procedure(doc),
                "texts": {
                    "document": {"file": s["document"], "sha256": self.doc_sha},
                    "control": {"file": s["control"], "sha256": self.ctl_sha},
                    "quotations": {"file": s["quotations"], "sha256": self.q_sha},
                },
                "planted": plants,
                "contaminated_control_characters": len(dirty_text),
                "contaminated_control_own_prose_windows_equal_clean": own_equal,
                "windows": {
                    "clean": len(wc),
                    "contaminated": len(wx),
                    "overlapping_quotations": int(overlap.sum()),
                },
                **census_rows,
                "contaminated_window_log10_scores": wx.log10_scores.tolist(),
                "contaminated_suffix_spans": np.stack([wx.starts, wx.ends], 1).tolist(),
                "top_contaminated_window_in_a_quotation": top_in_plant,
                "flags": {
                    "min_similarity": s["flag_min_similarity"],
                    "flagged_windows": [f.window for f in flags],
                    "quotations_found": found,
                    "false_flags": false_flags,
                    "suspects": [f.to_dict() for f in flags],
                },
            },
            "population": {
                "procedure": rt.procedure(sm),
                "texts": {
                    "members": {"file": s["members"], "sha256": self.mem_sha, "lines": J},
                    "controls": {"file": s["controls"], "sha256": self.con_sha, "lines": J},
                },
                "planted": self.pop_plants,
                "member_log10_scores": (lm_.logq / LN10).tolist(),
                "control_log10_scores_clean": (lc_.logq / LN10).tolist(),
                "control_log10_scores_contaminated": (lx_.logq / LN10).tolist(),
                "control_ids": ids_x,
                "planted_above_every_genuine_control": at_top,
                "at_alpha": list(pool.values()),
                "at_k1": list(pool_k1.values()),
                "at_k1_paired_claims": paired_k1,
            },
            "paper_pool": {
                "alpha_n_full": an_full,
                "alpha_n_decontaminated": an_dec,
                "k_decontaminated": k_dec,
            },
            "paper_claim_keys": list(claims),  # the order of the report's paper_claims
        }

    def checks(self, results: dict) -> list:
        plants, dirty_text, lx_, lc_ = self.plants, self.dirty_text, self.lx_, self.lc_
        is_planted, planted_ids, found, flags = (
            self.is_planted,
            self.planted_ids,
            self.found,
            self.flags,
        )
        false_flags = self.false_flags
        return [
            check(
                "every planted quotation sits verbatim at its recorded span of the contaminated control",
                all(dirty_text[p["span"][0] : p["span"][1]] == p["quote"] for p in plants),
                f"{len(plants)} quotations, spans "
                + ", ".join(f"[{p['span'][0]}, {p['span'][1]})" for p in plants),
            ),
            check(
                "the contaminated pool minus the verified contaminants is the clean pool minus the replaced controls "
                "(the same scores)",
                np.array_equal(
                    np.sort(lx_.logq[~is_planted]),
                    np.sort(
                        lc_.logq[~np.isin([w.split("#")[0] for w in lc_.window_ids], planted_ids)]
                    ),
                ),
                f"{int((~is_planted).sum())} controls compared",
            ),
            check(
                "the census's inspection step (near-verbatim flags against the KJV passages and the document) lists "
                "every planted quotation among its suspects",
                all(found),
                f"{sum(found)} of {len(found)} quotations flagged; {len(flags)} windows flagged, {false_flags} of them "
                "outside every quotation (suspects a person would reject)",
            ),
        ]

    def claims(self, results: dict) -> list[PaperClaim]:
        return list(self._claims.values())

    def paper_numbers(self, results: dict) -> list:
        an_full, an_dec, k_dec, at_top, c, tight = (
            self.an_full,
            self.an_dec,
            self.k_dec,
            self.at_top,
            self.c,
            self.tight,
        )
        return [
            compare(
                "alpha_n_full_pool",
                "decontamination/alpha-n-full",
                an_full,
                note="memclaim's certified_level at the paper's alpha = 0.1%, N = 5000 ([EM] Eq. 5)",
            ),
            compare(
                "alpha_n_decontaminated_pool",
                "decontamination/alpha-n-decontaminated",
                an_dec,
                note="memclaim's certified_level at alpha = 0.1%, N = 4988",
            ),
            compare("k_decontaminated_pool", "decontamination/k-decontaminated", k_dec),
            compare(
                "contaminants_at_top",
                "decontamination/contaminants-at-top",
                at_top / c,
                note=f"ours: {at_top} of {c} planted controls above every genuine control",
            ),
            compare(
                "calibrated_rate_before",
                "decontamination/calibrated-before",
                tight["contaminated"].calibrated_rate.estimate,
                note="ours at K = 1 on the contaminated pool",
            ),
            compare(
                "calibrated_rate_after",
                "decontamination/calibrated-after",
                tight["decontaminated"].calibrated_rate.estimate,
                note="ours at K = 1 without the verified contaminants",
            ),
        ]

    def differences(self, results: dict) -> list[str]:
        s, model, plants, c, J, ctl_text = (
            self.s,
            self.model,
            self.plants,
            self.c,
            self.J,
            self.ctl_text,
        )
        P, S = s["population_prefix_tokens"], s["population_suffix_tokens"]
        return [
            f"model {model['description']} (paper: OLMo 2 for the population pool, Llama 3.1 70B for the census)",
            f"contaminants planted on purpose and known exactly (paper: found by inspection and web search): "
            f"{len(plants)} quotations in the census control, {c} of {J} population controls (paper: 12 of 5000)",
            f"population: {J} KJV verses vs {J} new verses, {P} + {S} tokens, full softmax (paper: 5000 Wikipedia "
            "passages, 50 + 50 tokens, top-k 40)",
            f"census: Genesis 1-3 and a {len(ctl_text):,}-character control (paper: books)",
        ]

    def figure(self, results: dict, *, claims, differences):
        return _figure(
            self.s,
            self.wd,
            self.wx,
            self.plants,
            self.r_clean,
            self.r_dirty,
            self.r_excl,
            self.lm_,
            self.lc_,
            self.lx_,
            self.is_planted,
            self.t_clean,
            self.t_dirty,
            self.t_dec,
            self.tight,
            claims,
            differences,
            self.model,
        )


def run(*, quick: bool, seed: int, out_dir: str | os.PathLike) -> dict:
    """[EM] App. D.2, §5: planted KJV quotations in the controls; census and test with/without.

    Writes ``decontamination.json``, ``decontamination.png`` and ``decontamination.pdf`` into ``out_dir``
    (created) and returns the JSON-ready dict (:func:`memclaim.experiments.common.finish`); what ``memclaim
    reproduce decontamination`` runs.

    >>> from memclaim.experiments.decontamination import run
    >>> res = run(quick=True, seed=0, out_dir="reproductions")  # doctest: +SKIP
    >>> res["name"], res["all_checks_passed"]  # doctest: +SKIP
    ('decontamination', True)
    """
    return Decontamination(quick=quick, seed=seed, out_dir=out_dir).reproduce()


def _census_row(r, label) -> dict:
    th = r.threshold
    return {
        "control": label,
        "log10_tau": r.log10_tau,
        "max_control_log10": th.max_control_log10,
        "argmax_window": th.argmax_window,
        "argmax_span": list(th.argmax_span),
        "n_control_windows": th.n_control_windows,
        "n_excluded": th.n_excluded,
        "coverage": r.coverage,
        "n_windows_above": r.n_windows_above,
        "coverage_at_margins": r.coverage_at_margins,
    }


def _own_prose_windows_equal(clean, dirty, s) -> dict:
    """How many of the contaminated control's windows are item-for-item windows of the clean
    control (the same prefix and suffix tokens): those were not rescored."""
    a = clean.scores(s["policy"])
    b = dirty.scores(s["policy"])
    ka = set(zip(a.prefix_texts, a.suffix_texts))
    same = [(p, x) in ka for p, x in zip(b.prefix_texts, b.suffix_texts)]
    return {"windows": len(same), "equal_to_a_clean_window": int(sum(same))}


# ------------------------------------------------------------------------------ figure
def _figure(
    s,
    wd,
    wx,
    plants,
    r_clean,
    r_dirty,
    r_excl,
    lm_,
    lc_,
    lx_,
    is_planted,
    t_clean,
    t_dirty,
    t_dec,
    tight,
    claims,
    differences,
    model,
):

    with style():
        fig = blank_figure(width=11.5, height=8.0)
        ax = fig.subplot_mosaic([["census", "coverage"], ["scores", "rates"]])
        lines = (
            ("clean control", r_clean, PALETTE["control"], "-"),
            ("contaminated, nothing excluded", r_dirty, PALETTE["threshold"], "--"),
            ("contaminated, quotations excluded", r_excl, PALETTE["bound"], ":"),
        )
        # (a) the contaminated control along its text
        a = ax["census"]
        for i, p in enumerate(plants):
            a.axvspan(
                p["span"][0],
                p["span"][1],
                color=PALETTE["reference"],
                alpha=0.25,
                lw=0,
                label="planted quotation" if i == 0 else None,
            )
        mid = (wx.starts + wx.ends) / 2
        a.plot(
            mid,
            wx.log10_scores,
            "o",
            ms=3,
            color=PALETTE["control"],
            label="contaminated control, one window",
        )
        for lab, r, col, ls in lines:
            a.axhline(
                r.log10_tau,
                color=col,
                ls=ls,
                lw=1.3,
                label=rf"$\tau_{{doc}}$, {lab}: $10^{{{r.log10_tau}}}$",
            )
        lo_y, hi_y = (
            float(wx.log10_scores.min()),
            max(float(wx.log10_scores.max()), r_dirty.log10_tau),
        )
        a.set_ylim(lo_y - 3, hi_y + 0.55 * (hi_y - lo_y))  # room for the legend above the points
        a.set_xlabel("suffix position in the contaminated control (character)")
        a.set_ylabel(r"window score $\log_{10} q(s \mid p)$")
        a.set_title("(a) Census: planted quotations raise the control's top score ([EM] §5)")
        a.legend(loc="upper center", ncol=2, fontsize=7, frameon=False)
        # (b) the document's coverage under the three thresholds
        b = ax["coverage"]
        grid = np.linspace(
            min(r.log10_tau for _, r, _, _ in lines) - 5,
            max(0.0, float(wd.log10_scores.max()) + 1),
            400,
        )
        b.plot(
            grid,
            coverage_from_heat(r_clean.heat_log10, grid),
            color=PALETTE["member"],
            label="Genesis 1-3: coverage above a threshold",
        )
        for lab, r, col, ls in lines:
            b.axvline(
                r.log10_tau, color=col, ls=ls, lw=1.3, label=f"{lab}: coverage {r.coverage:.2f}"
            )
        b.set_xlabel(r"threshold $\log_{10}\tau$")
        b.set_ylabel("coverage (share of characters)")
        b.set_ylim(-0.02, 1.04)
        b.set_title("(b) Census: what each threshold lets the document claim")
        legend(b)
        # (c) the population pool's scores
        c = ax["scores"]
        allv = np.concatenate([lm_.logq, lx_.logq]) / LN10
        bins = np.linspace(math.floor(allv.min()) - 1, math.ceil(allv.max()) + 1, 40)
        c.hist(
            lm_.logq / LN10,
            bins=bins,
            histtype="step",
            color=PALETTE["member"],
            lw=1.4,
            label=f"KJV verses (members), {lm_.logq.size}",
        )
        c.hist(
            lx_.logq[~is_planted] / LN10,
            bins=bins,
            histtype="step",
            color=PALETTE["control"],
            lw=1.4,
            label=f"new verses (controls), {int((~is_planted).sum())}",
        )
        c.hist(
            lx_.logq[is_planted] / LN10,
            bins=bins,
            color=PALETTE["reference"],
            alpha=0.8,
            label=f"controls opening with a KJV quotation, {int(is_planted.sum())}",
        )
        for lab, t, col, ls in (
            ("contaminated pool", t_dirty, PALETTE["threshold"], "--"),
            ("without the verified contaminants", t_dec, PALETTE["bound"], ":"),
        ):
            if t.threshold_log10_prob is not None:
                c.axvline(
                    t.threshold_log10_prob,
                    color=col,
                    ls=ls,
                    lw=1.3,
                    label=rf"$\tau_{{\alpha}}$, {lab} ($\alpha_N$ = {t.alpha_n_exact})",
                )
        c.set_ylim(0, c.get_ylim()[1] * 1.5)
        c.set_xlabel(
            rf"passage score $\log_{{10}} q(s \mid p)$ ({s['population_suffix_tokens']}-token suffix)"
        )
        c.set_ylabel("passages")
        c.set_title(
            rf"(c) Population test: the pool's scores and $\tau$ at $\alpha = {s['alpha']:g}$"
        )
        legend(c)
        # (d) rates with and without the contaminants
        d = ax["rates"]
        groups = [
            (rf"$\alpha = {s['alpha']:g}$", (t_clean, t_dirty, t_dec)),
            ("K = 1 (tightest)", (tight["clean"], tight["contaminated"], tight["decontaminated"])),
        ]
        names = ("clean pool", "contaminated pool", "verified contaminants excluded")
        cols = (PALETTE["control"], PALETTE["threshold"], PALETTE["bound"])
        for g, (_, ts) in enumerate(groups):
            for j, t in enumerate(ts):
                x = g + (j - 1) * 0.27
                e = t.calibrated_rate
                d.bar(x, e.estimate, width=0.25, color=cols[j], label=names[j] if g == 0 else None)
                d.errorbar(
                    x,
                    e.estimate,
                    yerr=[[e.estimate - e.lower], [e.upper - e.estimate]],
                    color="black",
                    capsize=3,
                    lw=1,
                )
        d.axhline(0, color="black", lw=0.8)
        d.set_xticks(range(len(groups)), [gname for gname, _ in groups])
        d.set_ylabel(r"calibrated rate $\hat M = \hat G - \alpha_N$ (95% CP)")
        d.set_title("(d) Population test: calibrated rate of the KJV verses")
        legend(d)
        paper_footer(fig, differences=differences, claims=claims)
        fig.suptitle(
            f"Contaminated controls on {model['name']}: census "
            + rf"$\tau_{{doc}}$ $10^{{{r_clean.log10_tau}}}"
            rf" \to 10^{{{r_dirty.log10_tau}}} \to 10^{{{r_excl.log10_tau}}}$; calibrated rate "
            f"{t_clean.calibrated_rate.estimate:.3f} (clean) / {t_dirty.calibrated_rate.estimate:.3f} "
            f"(contaminated) / {t_dec.calibrated_rate.estimate:.3f} (excluded)"
        )
    return fig
