"""The [EM] reproductions `book-census`, `budget-coverage` and `decontamination` ([EM] §5, §6,
Figs. 5-7, 18, App. D.2, E.1, F.2-F.3).

- unit: the shipped texts have one copy (tests/data links to memclaim/data); planting quotations (spans, tokens,
  alignment) with stand-in tokenizers; the paper-value table's [EM] rows;
- real (SmolLM2, CI): each `--quick` run writes its files; every headline number is re-derived
  here from the raw window scores in the JSON and from tests/data (never from the code under
  test); agreement with the paper's numbers is decided by the AGREEMENT table (tolerances from
  the paper's rounding; rows from other models are side by side only); the paper's qualitative
  claims are asserted as the run found them, a claim that does not hold being a strict xfail
  that cites the numbers; a second run reads every score back from the durable store without
  loading the model's weights and writes byte-identical JSON;
- slow (Gemma 3 270M): the full runs, the same re-derivations.

The census and the near-verbatim bound are deterministic (teacher forcing and a beam search, no
sampling), so these tests have no false-alarm rate of their own beyond the check that states one
(the held-out negative control, Markov's inequality, <= 5%).
"""

from __future__ import annotations

import json
import math
import re
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from _paths import DATA
from memclaim.cli.main import main
from memclaim.experiments import REPRODUCTIONS, run
from memclaim.experiments import real_text as rt
from memclaim.experiments.decontamination import cut_quotation, plant_census, sentence_starts
from memclaim.experiments.paper import PAPER
from paper_agreement import Agree, SideBySide, assert_agrees, assert_covers, params, rounding

NAMES = ["book-census", "budget-coverage", "decontamination"]
LN10 = math.log(10.0)


# ============================================================================== unit tier
def test_shipped_texts_have_one_copy():
    """The reproductions read memclaim/data (it ships with the package); tests/data, where the
    provenance is documented, holds links to those files, not second copies."""
    for name in rt.DATA_FILES:
        assert (DATA / name).is_symlink() and (DATA / name).samefile(rt.data_file(name)), name


def test_long_excerpt_extends_genesis_1_3():
    """Genesis 1-11 in the format of genesis_1_3.txt: eleven chapter paragraphs, the first three
    exactly Genesis 1-3."""
    long, short = _text("genesis_1_11.txt"), _text("genesis_1_3.txt")
    assert long.endswith("\n") and not long.endswith("\n\n") and long.isascii()
    assert len(long.rstrip("\n").split("\n\n")) == 11
    assert long.startswith(short.rstrip("\n") + "\n\n")


def test_quotation_passages():
    """Twelve famous KJV passages, none of them among the 240 member verses nor in Genesis 1-3."""
    recs = [json.loads(x) for x in (DATA / "kjv_quotations.jsonl").read_text().splitlines()]
    assert len(recs) == 12 and len({r["id"] for r in recs}) == 12
    members = {json.loads(x)["id"] for x in (DATA / "kjv_verses.jsonl").read_text().splitlines()}
    genesis = (DATA / "genesis_1_3.txt").read_text()
    for r in recs:
        assert r["text"].isascii() and "  " not in r["text"] and len(r["text"].split()) >= 60
        book, rest = re.match(r"([0-9]?[A-Za-z]+)(.*)", r["id"]).groups()
        ch, v0 = re.match(r"(\d+):(\d+)-", rest).groups()
        v1 = int(rest.rsplit(":", 1)[1])
        assert not {f"{book}{ch}:{v}" for v in range(int(v0), v1 + 1)} & members
        assert r["text"][:60] not in genesis


class WordTokenizer:
    """GPT-2-like stand-in: a token is a word with its leading space (no merges across spaces)."""

    def __init__(self):
        self.vocab = {}

    def encode(self, text):
        return [self.vocab.setdefault(w, len(self.vocab)) for w in re.findall(r" ?\S+|\s+", text)]


class PairTokenizer:
    """A tokenizer whose tokens are (position, 2-character chunk): any insertion changes every
    later token, so nothing is ever aligned."""

    def encode(self, text):
        return [hash((i, text[i : i + 2])) for i in range(0, len(text), 2)]


PROSE = (
    "And the men went up. And they came to the well of the valley. The women drew water there. "
    "And the elders sat in the gate. Then the herdmen rose early. And it rained in the night. "
    "And the sheep were many. And they rested on the hill."
)
PASSAGE = " ".join(f"w{i}" for i in range(40))


def test_sentence_starts():
    starts = sentence_starts(PROSE)
    assert starts and all(PROSE[i - 2 : i] == ". " and PROSE[i].isupper() for i in starts)
    assert PROSE.index("The women") in starts and 0 not in starts


def test_cut_quotation_aligned_to_the_stride():
    """The shortest word-prefix adding >= min_tokens tokens, a multiple of the stride, with the
    tokens around it unchanged."""
    tok = WordTokenizer()
    at = PROSE.index("The women")
    q = cut_quotation(tok, PROSE, at, PASSAGE, min_tokens=7, stride=5)
    assert q["aligned"] and q["tokens"] == 10 and q["quote"] == " ".join(PASSAGE.split()[:10])
    new = tok.encode(PROSE[:at] + q["quote"] + " " + PROSE[at:])
    old = tok.encode(PROSE)
    t = len(tok.encode(PROSE[:at].rstrip(" ")))  # tokens before the insertion point
    assert new == old[:t] + new[t : t + 10] + old[t:]
    with pytest.raises(Exception, match="does not follow a space"):
        cut_quotation(tok, PROSE, at + 1, PASSAGE, min_tokens=7, stride=5)


def test_cut_quotation_unaligned_falls_back_to_the_shortest_long_enough():
    q = cut_quotation(
        PairTokenizer(), PROSE, PROSE.index("The women"), PASSAGE, min_tokens=6, stride=5
    )
    assert not q["aligned"] and q["tokens"] >= 6
    short = cut_quotation(
        WordTokenizer(), PROSE, PROSE.index("The women"), "a b c", min_tokens=50, stride=5
    )
    assert (
        short["quote"] == "a b c" and short["tokens"] == 3 and not short["aligned"]
    )  # the whole passage


def test_plant_census_records_every_span():
    class Rec:
        def __init__(self, i, text):
            self.id, self.text = i, text

    document = " ".join(f"Doc{i} sentence goes on here." for i in range(120))
    passages = [Rec(f"P{i}", " ".join(f"p{i}x{j}" for j in range(30))) for i in range(5)]
    rng = np.random.default_rng(7)
    out, plants = plant_census(
        WordTokenizer(),
        PROSE * 3,
        document,
        passages,
        rng,
        n_document=2,
        n_other=2,
        min_tokens=6,
        stride=3,
    )
    assert len(plants) == 4 and sorted(p["kind"] for p in plants).count("quotes the document") == 2
    assert [p["span"][0] for p in plants] == sorted(p["span"][0] for p in plants)
    rebuilt = PROSE * 3
    for p in sorted(plants, key=lambda p: -p["insert_at_original"]):
        rebuilt = (
            rebuilt[: p["insert_at_original"]]
            + p["quote"]
            + " "
            + rebuilt[p["insert_at_original"] :]
        )
    assert rebuilt == out
    for p in plants:
        assert out[p["span"][0] : p["span"][1]] == p["quote"] and p["tokens"] >= 6 and p["aligned"]
        if p["kind"] == "quotes the document":
            a, b = map(int, re.search(r"\[(\d+), (\d+)\)", p["source"]).groups())
            assert document[a:b] == p["quote"]
        else:
            assert next(x.text for x in passages if x.id == p["source"]).startswith(p["quote"])


def test_paper_values_of_em():
    """The [EM] rows: each a number the paper prints, with its sentence (checked against the paper
    when the table was written; tests never read /work/shared)."""
    em = {k: v for k, v in PAPER.items() if v.where.startswith("[EM]")}
    assert {
        "book-census/tau-lowest",
        "decontamination/alpha-n-full",
        "decontamination/k-decontaminated",
    } <= set(em)
    for v in em.values():
        assert v.quote and v.printed
    # the paper's Eq. 5 arithmetic at its own pools, independently of memclaim
    assert float(Fraction(int(Fraction(1, 1000) * 5001), 5001)) == pytest.approx(
        PAPER["decontamination/alpha-n-full"].value, abs=rounding(7)
    )
    assert int(Fraction(1, 1000) * 4989) == PAPER["decontamination/k-decontaminated"].value == 4


def test_registry(capsys):
    assert main(["reproduce", "--list"]) == 0
    listed = capsys.readouterr().out
    assert all(n in listed and n in REPRODUCTIONS for n in NAMES)


# ============================================================================== re-derivations
def _covered(n_chars, spans, mask) -> float:
    cov = np.zeros(n_chars, dtype=bool)
    for (a, b), keep in zip(spans, mask):
        if keep:
            cov[a:b] = True
    return float(cov.mean())


def _lg(xs):
    return np.array([-np.inf if x == "-inf" else x for x in xs], dtype=np.float64)


def _text(name):
    return (DATA / name).read_text(encoding="utf-8")


def rederive_book_census(r):
    res = r["results"]
    t = res["texts"]
    d, c, h = (_lg(t[k]["window_log10_scores"]) for k in ("document", "control", "held_out"))
    tau = math.ceil(float(c.max()))  # [EM] Eq. 31
    assert res["log10_tau_doc"] == tau and not np.any(c > tau)
    L = len(_text("genesis_1_3.txt"))
    assert t["document"]["characters"] == L
    spans = t["document"]["suffix_spans"]
    assert res["coverage_at_tau_doc"] == pytest.approx(_covered(L, spans, d > tau), abs=1e-12)
    assert res["coverage_at_margins"]["5"] == pytest.approx(
        _covered(L, spans, d > tau + 5), abs=1e-12
    )
    assert res["held_out_census"]["n_windows_above"] == int(np.sum(h > tau))
    V, ell = res["model"]["vocab_size"], r["settings"]["suffix_tokens"]
    chance = -ell * math.log10(V)
    assert res["naive_thresholds"]["log10_chance_bar"] == pytest.approx(chance, rel=1e-12)
    for k, f in (
        ("document", "genesis_1_3.txt"),
        ("control", "new_genesis_style.txt"),
        ("held_out", "new_heldout_style.txt"),
    ):
        lg = _lg(t[k]["window_log10_scores"])
        assert res["naive_thresholds"]["coverage"][k]["chance_bar"] == pytest.approx(
            _covered(len(_text(f)), t[k]["suffix_spans"], lg > chance), abs=1e-12
        )
    return tau


def rederive_budget_coverage(r):
    res = r["results"]
    d = r["settings"]["delta"]
    n = r["settings"]["realistic_budget"]
    lp_min10 = math.log10(-math.expm1(math.log(d) / n))  # p_min = 1 - delta^(1/n)  ([EM] Eq. 10)
    assert res["log10_p_min_realistic_budget"] == pytest.approx(lp_min10, abs=1e-9)
    pw = res["near_verbatim_per_window"]
    assert [w["window"] for w in pw] == res["near_verbatim_windows"]
    for w in pw:
        assert w["log10_near_verbatim"] >= w["log10_verbatim"]
    # extractable within n on the bounded windows: the share of their suffix characters
    L = len(_text("genesis_1_3.txt"))
    spans = [w["suffix_span"] for w in pw]
    cover_all = _covered(L, spans, [True] * len(pw))
    for key, col in (
        ("verbatim_subset", "log10_verbatim"),
        ("near_verbatim_subset", "log10_near_verbatim"),
    ):
        v = res["views"][key]
        i = int(np.searchsorted(v["log10_budgets"], math.log10(n), side="right")) - 1
        lp = _lpmin(v["log10_budgets"][i], d)  # the grid's budget at or below n
        ours = _covered(L, spans, [w[col] >= lp for w in pw]) / cover_all
        assert v["coverage_extractable"][i] == pytest.approx(ours, abs=1e-12)
    return res["log10_tau_doc"]


def _lpmin(log10_n, delta):
    return math.log10(-math.expm1(math.log(delta) / 10.0**log10_n))


def rederive_decontamination(r):
    res = r["results"]
    s = r["settings"]
    ce = res["census"]
    # the contaminated control, rebuilt here from tests/data and the recorded plants
    text = _text("new_genesis_style.txt")
    plants = ce["planted"]
    for p in sorted(plants, key=lambda p: -p["insert_at_original"]):
        text = text[: p["insert_at_original"]] + p["quote"] + " " + text[p["insert_at_original"] :]
    assert len(text) == ce["contaminated_control_characters"]
    genesis = _text("genesis_1_3.txt")
    quotes = {
        json.loads(x)["id"]: json.loads(x)["text"]
        for x in _text("kjv_quotations.jsonl").splitlines()
    }
    for p in plants:
        a, b = p["span"]
        assert text[a:b] == p["quote"]
        if p["kind"] == "quotes the document":
            assert p["quote"] in genesis
        else:
            assert quotes[p["source"]].startswith(p["quote"])
    lg = _lg(ce["contaminated_window_log10_scores"])
    sp = np.array(ce["contaminated_suffix_spans"])
    over = np.zeros(len(lg), dtype=bool)
    for a, b in (p["span"] for p in plants):
        over |= (sp[:, 0] < b) & (sp[:, 1] > a)
    assert ce["contaminated"]["log10_tau"] == math.ceil(float(lg.max()))
    assert ce["decontaminated"]["log10_tau"] == math.ceil(float(lg[~over].max()))
    assert ce["decontaminated"]["n_excluded"] == int(over.sum())
    # the population test at alpha and at K = 1, recomputed ([EM] Eq. 5-8, D.1)
    po = res["population"]
    m = np.array(po["member_log10_scores"])
    planted = {p["control_id"] for p in po["planted"]}
    dirty = np.array(po["control_log10_scores_contaminated"])
    keep = np.array([i not in planted for i in po["control_ids"]])
    pools = {
        "clean": np.array(po["control_log10_scores_clean"]),
        "contaminated": dirty,
        "decontaminated": dirty[keep],
    }
    for rows, alpha_of in (
        (po["at_alpha"], lambda n: Fraction(s["alpha"]).limit_denominator(10**6)),
        (po["at_k1"], lambda n: Fraction(1, n + 1)),
    ):
        for row in rows:
            z = pools[row["pool"]]
            N = z.size
            k = int(alpha_of(N) * (N + 1))
            tau = np.sort(z)[::-1][k - 1]
            g = int(np.sum(m > tau))
            assert (row["n_controls"], row["k"], row["n_claimed"]) == (N, k, g)
            assert row["log10_tau"] == pytest.approx(tau, abs=1e-12)
            cr = row["calibrated_rate"]
            assert cr["estimate"] == pytest.approx(g / m.size - k / (N + 1), abs=1e-12)
            lo = stats.beta.ppf(0.025, g, m.size - g + 1) if g else 0.0
            assert cr["lower"] == pytest.approx(lo - k / (N + 1), abs=1e-9)
    at_top = int(np.sum(dirty[~keep] > dirty[keep].max()))
    assert po["planted_above_every_genuine_control"] == at_top
    return ce["clean"]["log10_tau"]


REDERIVE = {
    "book-census": rederive_book_census,
    "budget-coverage": rederive_budget_coverage,
    "decontamination": rederive_decontamination,
}

# The paper's numbers and when a run agrees (see tests/paper_agreement.py). Every census and
# population number of [EM] is from Llama 3.1 70B or OLMo 2 32B: side by side only.
_SIDE = SideBySide("the paper's number is from Llama 3.1 70B / OLMo 2 on books and Wikipedia")
AGREEMENT = {
    "book-census": {
        row: _SIDE
        for row in (
            "log10_tau_doc_vs_lowest",
            "log10_tau_doc_vs_highest",
            "lowest_score_at_margin_5",
            *[f"coverage_vs_{k}" for k in ("davinci", "hunger", "coates")],
            *[f"coverage_margin5_vs_{k}" for k in ("davinci", "hunger", "coates")],
        )
    },
    "budget-coverage": {},
    "decontamination": {
        "alpha_n_full_pool": Agree(
            rounding(7),
            "exact on our side (memclaim's certified_level at alpha = 1/1000, "
            "N = 5000); the paper prints 0.09998%, i.e. 7 decimals of the fraction",
            ours=lambda r: r["results"]["paper_pool"]["alpha_n_full"],
        ),
        "alpha_n_decontaminated_pool": Agree(
            rounding(6),
            "exact on our side (N = 4988); the paper prints 0.0802%",
            ours=lambda r: r["results"]["paper_pool"]["alpha_n_decontaminated"],
        ),
        "k_decontaminated_pool": Agree(
            0, "an exact integer", ours=lambda r: r["results"]["paper_pool"]["k_decontaminated"]
        ),
        "contaminants_at_top": _SIDE,
        "calibrated_rate_before": _SIDE,
        "calibrated_rate_after": _SIDE,
    },
}


# The paper's sentences as the quick runs (SmolLM2-135M) judged them (issue 24 item 2): True (held), a
# NotTestable (the rule cannot be tested as stated here, and the report says so), or a string: a sentence
# that does not hold, a strict xfail with the numbers; if it ever holds, update the record.
class NotTestable(str):
    """The reason a rule is not testable on the quick run (the verdict must be "not testable here")."""


CLAIMS_QUICK = {
    "book-census": {
        "substantial-coverage": True,
        "kept-at-margin-5": True,
        "lowest-score-at-margin-5": True,
        "memorized-beyond-realistic-budget": True,
        "chance-bar-flags-non-members": True,
    },
    "budget-coverage": {
        "near-verbatim-dominates-first": True,
        # recorded as a strict xfail ("did not hold") before issue 24; the verdict is now what it always was:
        # untestable with a bound that cannot fall below the verbatim score
        "verbatim-overtakes-bound": NotTestable(
            "by construction: memclaim's near-verbatim bound includes the target's own teacher-forced term, so it is "
            ">= the verbatim score at every window (the 4 bounded windows gain 0.44 to 6.5 decades); the paper's beam "
            "can miss the target"
        ),
        "realistic-budget-smaller": True,
    },
    "decontamination": {
        "contaminant-inflates-tau": True,
        "more-conservative": True,
        # a strict xfail before issue 24 (at least half at the top: 1 of 4); 'most' is now tested as the paper's
        # 10 of 12 shows it (95% CP lower bound > 1/2), which 4 planted controls cannot show even if all are on top
        "contaminants-at-top": NotTestable(
            "4 planted controls: even 4 of 4 at the top has a 95% CP lower bound of "
            "0.398; SmolLM2 puts 1 of 4 there (Eccl 3, 10^-11.1, above the top "
            "genuine 10^-15.8)"
        ),
        "exclusion-restores-tau": True,
        # held before issue 24 (point estimates at alpha = 5% and K = 1); the paper's "raises the calibrated rate
        # [...] at the tightest certified FPR" is now tested with Newcombe's paired interval at K = 1
        "exclusion-raises-rate": "M at K = 1 rises from 0.03% to 3.25% (1 -> 3 of 60 members claimed, alpha_N "
        "1/61 -> 1/57): the paired difference +3.2% [-3.8%, +11.7%] does not exclude 0",
    },
}


def _claim_params(table):
    out = []
    for name, claims in table.items():
        for key, expect in claims.items():
            marks = (
                ()
                if expect is True or isinstance(expect, NotTestable)
                else (pytest.mark.xfail(strict=True, reason=expect),)
            )
            out.append(pytest.param(name, key, id=f"{name}/{key}", marks=marks))
    return out


# ============================================================================== real tier (quick)
@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("em-b-quick")
    return out, {name: run(name, quick=True, seed=0, out_dir=out) for name in NAMES}


def _assert_report(out: Path, name: str, r: dict, quick_flag: bool):
    assert (
        r["schema"] == "memclaim.reproduction/3" and r["name"] == name and r["quick"] is quick_flag
    )
    failed = [c["claim"] for c in r["checks"] if not c["passed"]]
    assert not failed and r["all_checks_passed"]
    assert json.loads((out / f"{name}.json").read_text()) == r
    assert (out / f"{name}.png").stat().st_size > 10_000
    assert (out / f"{name}.pdf").read_bytes()[:4] == b"%PDF"
    assert {"memclaim", "numpy", "scipy"} <= set(r["versions"])
    res = r["results"]
    assert r["differences_from_paper"] and r["paper_claims"] and res["model"]["fingerprint"]
    assert len(res["paper_claim_keys"]) == len(r["paper_claims"])
    assert all(c["quote"] and c["test"] and c["evidence"] and c["where"] for c in r["paper_claims"])
    assert r["paper_claims_held"] == sum(c["held"] is True for c in r["paper_claims"])
    md = (out / f"{name}.md").read_text()
    assert (
        all(f"### {c['verdict']}: " in md for c in r["paper_claims"])
        and (out / f"{name}.html").exists()
    )
    assert_covers(r, AGREEMENT[name])
    assert {p["row"] for p in r["paper_numbers"]} == set(AGREEMENT[name])


@pytest.mark.real
@pytest.mark.parametrize("name", NAMES)
def test_quick_run_writes_its_report(quick, name):
    out, results = quick
    _assert_report(out, name, results[name], True)
    assert results[name]["results"]["model"]["name"] == "smollm2"


@pytest.mark.real
@pytest.mark.parametrize("name", NAMES)
def test_quick_numbers_rederived(quick, name):
    REDERIVE[name](quick[1][name])


@pytest.mark.real
def test_quick_runs_share_the_census(quick):
    """The three reproductions read one census procedure from the store: the same threshold."""
    r = quick[1]
    taus = {
        rederive_book_census(r["book-census"]),
        rederive_budget_coverage(r["budget-coverage"]),
        rederive_decontamination(r["decontamination"]),
    }
    assert len(taus) == 1
    assert (
        r["budget-coverage"]["results"]["coverage_at_tau_doc"]
        == r["book-census"]["results"]["coverage_at_tau_doc"]
    )


@pytest.mark.real
@pytest.mark.parametrize("name, row", params({n: AGREEMENT[n] for n in NAMES}))
def test_agrees_with_the_paper(quick, name, row):
    assert_agrees(quick[1][name], row, AGREEMENT[name][row])


@pytest.mark.real
@pytest.mark.parametrize("name, key", _claim_params(CLAIMS_QUICK))
def test_paper_claims_quick(quick, name, key):
    r = quick[1][name]
    claims = dict(zip(r["results"]["paper_claim_keys"], r["paper_claims"]))
    assert set(claims) == set(CLAIMS_QUICK[name]) and all(k == c["key"] for k, c in claims.items())
    if isinstance(CLAIMS_QUICK[name][key], NotTestable):
        assert claims[key]["verdict"] == "not testable here" and claims[key]["held"] is None, (
            claims[key]["evidence"]
        )
        return
    assert claims[key]["held"], claims[key]["evidence"]


@pytest.mark.real
def test_second_run_reads_the_store_only(quick, tmp_path, monkeypatch, capsys):
    """A second run of each loads no weights (every score is in the durable store) and writes
    byte-identical JSON; through the CLI too."""
    import memclaim.models.loader as loader

    def refuse(*a, **k):
        raise AssertionError("a second run loaded the model's weights")

    monkeypatch.setattr(loader, "_load_weights", refuse)
    out, _ = quick
    for name in NAMES:
        rc = main(["reproduce", name, "--quick", "--out", str(tmp_path), "--seed", "0"])
        assert rc == 0, capsys.readouterr().err
        assert (tmp_path / f"{name}.json").read_bytes() == (out / f"{name}.json").read_bytes()
    printed = capsys.readouterr().out
    assert "the paper's sentences on this run" in printed and "differs from the paper" in printed


# ============================================================================== slow tier (full)
@pytest.fixture(scope="module")
def full(tmp_path_factory):
    out = tmp_path_factory.mktemp("em-b-full")
    return out, {name: run(name, quick=False, seed=0, out_dir=out) for name in NAMES}


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_full_run(full, name):
    out, results = full
    r = results[name]
    _assert_report(out, name, r, False)
    assert r["results"]["model"]["name"] == "gemma3-270m"
    REDERIVE[name](r)
    for row, spec in AGREEMENT[name].items():
        if not isinstance(spec, SideBySide):
            assert_agrees(r, row, spec)
