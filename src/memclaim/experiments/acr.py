"""`acr`: [EM] App. A.2 and §1: the adversarial compression ratio (Schwarzschild et al. 2024) as an
extraction procedure under the matched comparison. The sentence checked, as the paper states it:
"the procedure succeeds on members and on non-members" (held: at least one member and at least
one matched non-member extracted, ACR > 1; not held: a side without success; not testable here:
a side without targets, or searches that did not finish).

Full run (slow tier): SmolLM2-135M-Instruct, famous King James lines the model saw
(``kjv_famous_lines.jsonl``, cut verbatim from the committed KJV texts) against newly written
lines of the same length and style (``new_famous_style_lines.jsonl``, matched line by line; see
tests/data/README.md), under [EM]'s relaxed criterion prob:0.9. The CPU cannot run the paper's
search (GCG's batch of 512 and top-k 256, 100-200 steps per length: about 40 s per step for
SmolLM2 on two cores), so the full run searches the first :data:`FULL` ``pairs`` pairs with a
batch of 64, top-k 64 and 8 steps per length; the JSON says so, and a side without success
under this budget is reported as it came out, not tuned.

Quick run (CI): the tiny GPT, its planted passages seen 16 times (members) against held-out
passages from the same generator (controls), each cut to its first 8 tokens.

Reported beside the verdict: each side's extraction rate with its Clopper-Pearson interval, the
Newcombe interval on the difference, the ACR levels, every target's x* under the three criteria,
the flags of App. A.2 (argmax success that greedy generation does not reproduce; prompts holding
words of the target) and the best teacher-forced geometric-mean probability each target reached.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..claims.acr import HELD, NOT_HELD, NOT_TESTABLE, acr_comparison, succeeds_on_both
from ..models import load_model
from ..report.style import PALETTE, style
from ..scoring.acr import LengthSearch, search_sides
from ..scoring.gcg import GCGSettings
from ..train.toy import toy_data  # also registers the tiny GPT "toy" (the quick tier's model)
from .common import PaperClaim, check, compare, new_figure, paper_claim, paper_footer
from .em_verses import model_info
from .real_text import read_records
from .skeleton import Reproduction
from .verdicts import rate

if TYPE_CHECKING:  # the annotations' names only
    from ..models.loader import LoadedModel

NAME = "acr"
TITLE = "Adversarial compression (ACR) on members and matched non-members ([EM] App. A.2)"
STREAMS: tuple[str, ...] = ()
CRITERION = "prob:0.9"  # [EM] App. A.2: geometric-mean per-token probability >= b, b = 0.9
MEMBERS_FILE, CONTROLS_FILE = "kjv_famous_lines.jsonl", "new_famous_style_lines.jsonl"
#: the CI tier: the tiny GPT, 6 + 6 targets of 8 tokens, a small search
QUICK = {
    "model": "toy",
    "pairs": 6,
    "target_tokens": 8,
    "top_k": 64,
    "search_batch": 96,
    "steps": 15,
}
#: the slow tier on two CPU cores: SmolLM2, the first 4 line pairs, a search far below the paper's (about 25 min of CPU)
FULL = {
    "model": "smollm2",
    "pairs": 4,
    "target_tokens": None,
    "top_k": 64,
    "search_batch": 64,
    "steps": 8,
}
#: [EM]'s run of the ACR release ([EM] App. A.2; the release's config for Llama 2 13B): top-k 250,
#: batch 100, 200 steps; GCG's own defaults are top-k 256, batch 512
PAPER_SEARCH = (
    "top-k 250, batch 100, 200 steps per length (the ACR release as [EM] ran it; GCG: 256, 512)"
)


def settings_for(quick: bool) -> dict:
    """A copy of the tier's settings (:data:`QUICK` or :data:`FULL`).

    >>> from memclaim.experiments.acr import settings_for
    >>> settings_for(True)["model"], settings_for(False)["model"]
    ('toy', 'smollm2')
    """
    return dict(QUICK if quick else FULL)


def targets(model: LoadedModel, quick: bool) -> tuple[dict, dict]:
    """({"members": [(id, text, ids)], "controls": [...]}, provenance) for the tier.

    >>> import memclaim.train
    >>> from memclaim.experiments.acr import targets
    >>> sides, info = targets(load_model("toy"), True)  # doctest: +SKIP
    >>> [len(v) for v in sides.values()], len(sides["members"][0][2])  # doctest: +SKIP
    ([6, 6], 8)
    """
    s = settings_for(quick)
    tok = model.tokenizer
    if quick:
        td = toy_data()
        mem = [r for r in td["planted"] if r.get("copies") == 16][: s["pairs"]]
        ctl = [r for r in td["held_out"] if str(r["id"]).startswith("control")][: s["pairs"]]

        def cut(r):
            ids = tok.encode(r["text"])[: s["target_tokens"]]
            text = tok.decode(ids)
            return (
                r["id"],
                text,
                tok.encode(text),
            )  # the target as its text stands (re-encoded once)

        sides = {"members": [cut(r) for r in mem], "controls": [cut(r) for r in ctl]}
        info = {
            "members": "the tiny GPT's planted passages seen 16 times, first 8 tokens",
            "controls": "held-out passages of the same generator (never trained on), first 8 tokens",
        }
        return sides, info
    sides, info = {}, {}
    for label, name in (("members", MEMBERS_FILE), ("controls", CONTROLS_FILE)):
        recs, sha = read_records(name)
        recs = recs[: s["pairs"]]
        sides[label] = [(r.id, r.text, tok.encode(r.text)) for r in recs]
        info[label] = {"file": name, "sha256": sha, "lines_used": len(recs)}
    return sides, info


def _block(res: dict, comparison, verdict) -> dict:
    rows = {
        label: [{k: v for k, v in r.to_dict().items() if k not in ("seconds",)} for r in rs]
        for label, rs in res.items()
    }
    best = {label: [r.geometric_mean_prob for r in rs] for label, rs in res.items()}
    b = comparison.population.primary_test.binary_rates
    return {
        "members": {
            "n": comparison.members.n,
            "extracted": comparison.members.extracted,
            "rate": comparison.member_rate.to_dict(),
            "median_acr_extracted": comparison.members.median_acr_extracted,
        },
        "controls": {
            "n": comparison.controls.n,
            "extracted": comparison.controls.extracted,
            "rate": comparison.control_rate.to_dict(),
            "median_acr_extracted": comparison.controls.median_acr_extracted,
        },
        "difference_member_minus_control": comparison.difference.to_dict(),
        "no_signal": comparison.no_signal,
        "alpha_n": b.alpha_n,
        "alpha_n_exact": b.alpha_n_exact,
        "statement": comparison.statement,
        "levels": [lv.to_dict() for lv in comparison.levels],
        "flags": comparison.flags,
        "verdict": verdict.to_dict(),
        "best_geometric_mean_prob": {
            label: {"values": v, "median": float(np.median(v)) if v else None}
            for label, v in best.items()
        },
        "targets": rows,
    }


def _plot(b: dict, differences, claims):
    with style():
        fig, (a1, a2) = new_figure(2, width=5.0, height=3.6)
        for x, key, role in ((0, "members", "member"), (1, "controls", "control")):
            r = b[key]["rate"]
            a1.bar(
                [x],
                [r["estimate"]],
                width=0.6,
                color=PALETTE[role],
                yerr=[[r["estimate"] - r["lower"]], [r["upper"] - r["estimate"]]],
                capsize=4,
                label=f"{key}: {b[key]['extracted']}/{b[key]['n']}",
            )
        a1.axhline(
            b["alpha_n"],
            color=PALETTE["threshold"],
            ls="--",
            lw=1.2,
            label=rf"floor $(m+1)/(N+1)$ = {b['alpha_n_exact']}",
        )
        a1.set_xticks([0, 1], ["members", "controls"])
        a1.set_ylim(0, 1.05)
        a1.set_ylabel(f"extracted, ACR > 1 under {CRITERION} (95% CP)")
        a1.set_title("ACR extraction rate")
        a1.legend(fontsize=7)
        for x, key, role in ((0, "members", "member"), (1, "controls", "control")):
            v = b["best_geometric_mean_prob"][key]["values"]
            a2.scatter(
                np.full(len(v), x) + np.linspace(-0.15, 0.15, len(v)), v, color=PALETTE[role], s=18
            )
        a2.axhline(0.9, color=PALETTE["threshold"], ls="--", lw=1.2, label="b = 0.9")
        a2.set_xticks([0, 1], ["members", "controls"])
        a2.set_ylim(0, 1.0)
        a2.set_ylabel("geometric-mean token probability of y given x*")
        a2.set_title("best prompt found per target")
        a2.legend(fontsize=7)
        paper_footer(fig, differences=differences, claims=claims)
    return fig


#: [EM] App. A.2, the sentence "the procedure succeeds on members and on non-members" stands for
QUOTE_BOTH = "We were able to achieve success for both training and non-training data"


def succeeds_claim(b: dict) -> PaperClaim:
    """[EM] App. A.2: "the procedure succeeds on members and on non-members", judged on the run's
    block as stated (``b["verdict"]`` from :func:`memclaim.claims.acr.succeeds_on_both`): held when
    at least one member and at least one matched non-member are extracted (ACR > 1), not held when
    a side has none, not testable here when a side has no target or a search did not finish.
    The numbers are each side's extraction rate with its 95% Clopper-Pearson interval.

    >>> from memclaim.experiments.acr import succeeds_claim
    >>> b = {"verdict": {"sentence": "s", "status": "not held", "reason": "members 1/6, non-members 0/6"},
    ...      "members": {"n": 6, "extracted": 1}, "controls": {"n": 6, "extracted": 0}}
    >>> c = succeeds_claim(b)
    >>> c.verdict, c.numbers["member_rate"]["count"], round(c.numbers["control_rate"]["upper"], 3)
    ('not held', 1, 0.459)
    """
    v = b["verdict"]
    held = None if v["status"] == NOT_TESTABLE else v["status"] == HELD
    numbers = {
        f"{role}_rate": rate(b[side]["extracted"], b[side]["n"]) if b[side]["n"] else None
        for side, role in (("members", "member"), ("controls", "control"))
    }
    return paper_claim(
        "succeeds-on-both",
        v["sentence"],
        quote=QUOTE_BOTH,
        where="[EM] App. A.2 (and §1)",
        test=f"held: >= 1 member and >= 1 matched non-member extracted (ACR > 1 under {CRITERION}); "
        "not held: a side without success; not testable here: a side without targets or a "
        "search that did not finish",
        held=held,
        evidence=v["reason"],
        numbers=numbers,
    )


def claims_for(b: dict) -> list[PaperClaim]:
    """The sentences of [EM] App. A.2 judged on the run's block (``run(...)["results"]``), each by a
    rule fixed before the run (:func:`succeeds_claim`).

    >>> from memclaim.experiments.acr import claims_for
    >>> b = {"verdict": {"sentence": "s", "status": "held", "reason": "members 2/6, non-members 1/6"},
    ...      "members": {"n": 6, "extracted": 2}, "controls": {"n": 6, "extracted": 1}}
    >>> [(c.key, c.verdict) for c in claims_for(b)]
    [('succeeds-on-both', 'held')]
    """
    return [succeeds_claim(b)]


class ACR(Reproduction):
    """[EM] App. A.2's ACR on members and matched non-members on the skeleton (:mod:`.skeleton`)."""

    name, title, streams = NAME, TITLE, STREAMS
    reproduces = (
        "[EM] App. A.2",
        "[EM] §1 (ACR paragraph)",
        "[EM] §3 'Revisiting parrot prompts'",
    )

    def settings(self) -> dict:
        """The tier (:func:`settings_for`); NAME.json records it under ``tier``
        (:meth:`recorded_settings`)."""
        return settings_for(self.quick)

    def data(self) -> tuple:
        """The model and the two sides' targets (members, matched controls)."""
        self.model = load_model(self.s["model"])
        sides, self.info = targets(self.model, self.quick)
        return sides

    def runs(self, sides: dict) -> dict:
        """The length search on every target (kept in ``out_dir/acr-searches``), the comparison of
        the two sides and the verdict: the result block."""
        s = self.s
        gcg = GCGSettings(
            top_k=s["top_k"], batch_size=s["search_batch"], steps=s["steps"], seed=int(self.seed)
        )
        self.procedure, res, _ = search_sides(
            self.model,
            sides,
            criterion=CRITERION,
            gcg=gcg,
            lengths=LengthSearch(),
            store_root=Path(self.out_dir) / "acr-searches",
        )
        self.mem, self.ctl = mem, ctl = res["members"], res["controls"]
        self.cmp = acr_comparison(
            member_extracted=[r.extracted for r in mem],
            control_extracted=[r.extracted for r in ctl],
            member_acr=[r.acr for r in mem],
            control_acr=[r.acr for r in ctl],
            criterion=CRITERION,
            member_met=[r.met for r in mem],
            control_met=[r.met for r in ctl],
            member_ids=[r.id for r in mem],
            control_ids=[r.id for r in ctl],
            member_argmax_without_greedy=[r.argmax_without_greedy for r in mem],
            control_argmax_without_greedy=[r.argmax_without_greedy for r in ctl],
            member_leaks=[r.leaks for r in mem],
            control_leaks=[r.leaks for r in ctl],
        )
        self.verdict = succeeds_on_both(
            members_extracted=self.cmp.members.extracted,
            n_members=self.cmp.members.n,
            controls_extracted=self.cmp.controls.extracted,
            n_controls=self.cmp.controls.n,
        )
        b = _block(res, self.cmp, self.verdict)
        b["model"] = model_info(self.model)
        return b

    def checks(self, b: dict) -> list:
        extracted = [r for r in self.mem + self.ctl if r.extracted]
        return [
            check(
                "every extracted target has |x*| < |y| and ACR = |y|/|x*| > 1",
                all(
                    r.prompt_len < r.target_len
                    and math.isclose(r.acr, r.target_len / r.prompt_len)
                    and r.acr > 1
                    for r in extracted
                ),
                f"{len(extracted)} extracted",
                false_alarm="0 (an identity)",
            ),
            check(
                f"every extracted x* meets {CRITERION} in its exact evaluation (geometric mean >= 0.9)",
                all(r.geometric_mean_prob >= 0.9 - 1e-12 and r.prob for r in extracted),
                f"{len(extracted)} extracted",
                false_alarm="0 (an identity)",
            ),
            check(
                "the binary test's floor is (m+1)/(N+1) ([EM] D.3)",
                b["alpha_n_exact"]
                == f"{self.cmp.controls.extracted + 1}/{self.cmp.controls.n + 1}",
                b["alpha_n_exact"],
                false_alarm="0 (an identity)",
            ),
        ]

    def claims(self, b: dict) -> list[PaperClaim]:
        return claims_for(b)

    def differences(self, b: dict) -> list[str]:
        s = self.s
        return [
            f"model {b['model']['words']} (paper: Llama 2 13B)",
            (
                "text: the tiny GPT's planted passages against held-out ones, 8-token targets"
                if self.quick
                else f"text: the first {s['pairs']} famous KJV lines against newly written lines of "
                "the same length and style (paper: one famous quotation, Gretzky's, and one "
                "post-cutoff quotation, Brunson's)"
            ),
            f"search: top-k {s['top_k']}, batch {s['search_batch']}, {s['steps']} steps per length "
            f"(paper: {PAPER_SEARCH})",
        ]

    def paper_numbers(self, b: dict) -> list:
        mem, ctl = self.mem, self.ctl
        argmax_ok = [r for r in mem + ctl if r.argmax]
        med = lambda xs: float(np.median(xs)) if xs else float("nan")  # noqa: E731
        return [
            compare(
                "member_acr",
                "acr/member-acr",
                med([r.acr for r in mem if r.extracted]),
                note="median ACR of the extracted members (nan: none extracted); the paper's one "
                "quotation",
            ),
            compare(
                "control_acr",
                "acr/control-acr",
                med([r.acr for r in ctl if r.extracted]),
                note="median ACR of the extracted controls (nan: none extracted); the paper's one "
                "quotation",
            ),
            compare(
                "argmax_not_greedy",
                "acr/argmax-not-greedy",
                (sum(r.argmax_without_greedy for r in argmax_ok) / len(argmax_ok))
                if argmax_ok
                else float("nan"),
                note=f"share of x* with an argmax success that greedy generation does not reproduce "
                f"({sum(r.argmax_without_greedy for r in argmax_ok)} of {len(argmax_ok)}; the paper's "
                "prompts were searched under the argmax criterion, ours under prob:0.9)",
            ),
        ]

    def figure(self, b: dict, *, claims, differences):
        return _plot(b, differences, claims)

    def notes(self, b: dict) -> list[str]:
        status = self.verdict.status
        notes = [
            f"the paper's sentence: {status}"
            + ("" if status != NOT_TESTABLE else " (see the verdict's reason)"),
            "each target is one success/failure trial, so each rate is a binomial proportion with a "
            "95% Clopper-Pearson interval and the difference gets Newcombe's interval ([EM] App. A.1, "
            "D.1)",
            "the search is deterministic under the seed on the CPU; searches are kept in acr-searches/ "
            "and read back",
        ]
        if status == NOT_HELD:
            notes.append(
                "not held on this run: a side had no success under this budget; reported as it came "
                "out"
            )
        return notes

    def recorded_settings(self, b: dict) -> dict:
        return {
            "model": b["model"],
            "criterion": CRITERION,
            "tier": self.s,
            "targets": self.info,
            "procedure": self.procedure,
            "paper_search": PAPER_SEARCH,
        }


def run(
    *, quick: bool = False, seed: int = 0, out_dir: str | os.PathLike = "reproductions"
) -> dict:
    """[EM] App. A.2: the ACR procedure on members and matched non-members; the paper's sentence checked.

    Writes ``acr.json``, ``acr.png`` and ``acr.pdf`` into ``out_dir`` and keeps the searches in
    ``out_dir/acr-searches`` (a second run reads them back). Returns the JSON-ready dict.

    >>> from memclaim.experiments.acr import run
    >>> res = run(quick=True, seed=0, out_dir="reproductions")  # doctest: +SKIP
    >>> res["name"], res["results"]["verdict"]["status"] in ("held", "not held", "not testable here")  # doctest: +SKIP
    ('acr', True)
    """
    return ACR(quick=quick, seed=seed, out_dir=out_dir).reproduce()


__all__ = ["run", "targets", "settings_for", "succeeds_claim", "claims_for", "QUOTE_BOTH"]
