"""Real tier: claims on SmolLM2-135M through the CLI ([EM] §3-§5); the same on Gemma 3 270M in
the slow tier (tests/conftest.py: real_model_name).

- Census of Genesis 1-3 (KJV, surely in pre-training data) against newly written prose in the
  same style and length (tests/data/new_genesis_style.txt, never published before it was
  written for these tests), 32-token prefix and suffix, stride 64, full softmax. Under top-k:40
  every 32-token window of the new prose scores exactly 0 (its invented names fall outside the
  top 40), so a census there has no threshold to calibrate; the full softmax has no atom.
- Population test of 120 KJV verses against 120 newly written verse-like sentences (the first
  120 of each file; matched lengths), 16-token prefix and suffix, top-k:40 (and the full
  softmax, scored in the same pass and re-tested from the store without the model).

Asserted is what the paper claims ([EM] §3-§5), each with a negative control in the same test:

- population: the calibrated rate M = G - alpha_N has its lower 95% Clopper-Pearson bound above 0
  for the KJV verses (a memorization claim), and at or below 0 when the "members" are 60 more newly
  written verses (tests/data/new_verses_b.jsonl, matched to the controls' register and length):
  no claim. Under exchangeability the negative control claims (lower bound > 0) with probability
  E[P(CP lower of Bin(60, alpha*) > alpha_N)], alpha* ~ Beta(K, N-K+1): 4.3% at the top-k setting
  (K = 2) and 2.9% at the full-softmax setting (K = 6), computed in _false_claim_rate (asserted < 5%);
- census: Genesis 1-3 covers a large share of its text above tau_doc, a held-out newly written
  document (tests/data/new_heldout_style.txt) next to none of it, under the same tau_doc.
The measured numbers are printed (pytest -s).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from memclaim.cli.main import main
from memclaim.scoring.results import load_run_scores
from memclaim.scoring.store import ScoreStore

pytestmark = pytest.mark.real

LN10 = math.log(10.0)
N_VERSES = 120


def _run_json(args, capsys):
    capsys.readouterr()
    rc = main(args)
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    return json.loads(cap.out)


def _false_claim_rate(n_controls, k, n_candidates, confidence=0.95):
    """P(lower CP bound of M > 0) for exchangeable non-members: alpha* ~ Beta(K, N-K+1) and the
    claimed count G ~ Bin(J, alpha*) given alpha* ([EM] Prop. 2, D.1)."""
    an = k / (n_controls + 1)
    g = np.arange(n_candidates + 1)
    lower = np.where(
        g > 0, stats.beta.ppf((1 - confidence) / 2, np.maximum(g, 1), n_candidates - g + 1), 0.0
    )
    claim = g[lower > an]
    if claim.size == 0:
        return 0.0
    x = np.linspace(0, 1, 20001)[1:-1]
    dens = stats.beta.pdf(x, k, n_controls - k + 1)
    tail = stats.binom.sf(claim[0] - 1, n_candidates, x)  # P(G >= first claiming count)
    return float(np.trapezoid(dens * tail, x))


def _coverage(windows_logq, starts, ends, n_chars, log10_tau):
    """Share of the document's characters covered by suffixes above tau ([EM] §5), computed here."""
    cov = np.zeros(n_chars, dtype=bool)
    for lq, a, b in zip(windows_logq, starts, ends):
        if lq / LN10 > log10_tau:
            cov[a:b] = True
    return float(cov.mean())


def test_census_genesis_against_new_prose(real_model_name, data_dir, tmp_path, capsys):
    out = tmp_path / "genesis"
    common = [
        "--prefix-tokens",
        "32",
        "--suffix-tokens",
        "32",
        "--stride",
        "64",
        "--policy",
        "full",
        "--batch-size",
        "16",
        "--json",
        "--no-progress",
    ]
    s = _run_json(
        [
            "census",
            real_model_name,
            "--document",
            str(data_dir / "genesis_1_3.txt"),
            "--control",
            str(data_dir / "new_genesis_style.txt"),
            "--out",
            str(out),
            *common,
        ],
        capsys,
    )
    doc = load_run_scores(out / "store", run="document", policy="full").logq
    ctl = load_run_scores(out / "store", run="control", policy="full").logq
    p = s["pairs"][0]
    # tau_doc from the control: the decade above its top window ([EM] Eq. 31)
    assert p["max_control_log10"] == pytest.approx(float(np.max(ctl)) / LN10, abs=1e-12)
    assert p["log10_tau"] == math.ceil(p["max_control_log10"])
    # Genesis windows clear it; no control window can (tau is above all of them)
    assert p["n_windows_above"] == int(np.sum(doc / LN10 > p["log10_tau"])) > 0
    assert np.all(ctl / LN10 <= p["log10_tau"])
    assert (out / "report.html").exists()
    # a held-out newly written document (not the calibration control), under the same tau_doc
    held = tmp_path / "held-out"
    _run_json(
        [
            "score",
            real_model_name,
            "--document",
            str(data_dir / "new_heldout_style.txt"),
            "--out",
            str(held),
            *[a for a in common if a != "--json"],
            "--json",
        ],
        capsys,
    )
    h = load_run_scores(held, policy="full")  # the store's one run
    text = (data_dir / "new_heldout_style.txt").read_text(encoding="utf-8")
    held_cov = _coverage(
        h.logq, h.suffix_spans[:, 0], h.suffix_spans[:, 1], len(text), p["log10_tau"]
    )
    gen_text = (data_dir / "genesis_1_3.txt").read_text(encoding="utf-8")
    dd = load_run_scores(out / "store", run="document", policy="full")
    gen_cov = _coverage(
        dd.logq, dd.suffix_spans[:, 0], dd.suffix_spans[:, 1], len(gen_text), p["log10_tau"]
    )
    assert gen_cov == pytest.approx(
        p["coverage"], abs=0.02
    )  # the report's coverage, recomputed here
    # "well above": Genesis covers at least a quarter of its text, the held-out document less than a
    # fifth of Genesis's share and at most 5%
    assert gen_cov >= 0.25 and held_cov < gen_cov / 5, (gen_cov, held_cov)
    if real_model_name == "gemma3-270m":
        # A recorded finding, not a widened bound (slow tier, first run 2026-12-01): on Gemma 3 270M
        # the held-out document covers 0.062 of its text under the control's tau_doc (Genesis 0.473),
        # above the 5% set for it: one control document's top window, rounded up a decade ([EM] Eq. 31),
        # is no false-positive bound for other unseen text ([EM] §5: the census certifies no FPR).
        # Asserted as it stands, so that a change shows and this record is updated.
        assert held_cov > 0.05, (gen_cov, held_cov)
    else:
        assert held_cov <= 0.05, (gen_cov, held_cov)
    print(
        f"\ncensus Genesis 1-3 vs new prose ({real_model_name}, 32+32 tokens, stride 64, full): tau_doc = 1e{p['log10_tau']} "
        f"(top control 10^{p['max_control_log10']:.2f}), {p['n_windows_above']}/{p['n_windows']} windows above, "
        f"coverage {p['coverage']:.3f}, at margins {p['coverage_at_margins']}, max margin {p['max_margin']:.1f}; "
        f"held-out new document: {int(np.sum(h.logq / LN10 > p['log10_tau']))}/{h.logq.size} windows above, "
        f"coverage {held_cov:.3f}"
    )


def test_population_kjv_verses_against_new_verses(real_model_name, data_dir, tmp_path, capsys):
    for name in ("kjv_verses", "new_verses"):
        lines = (data_dir / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()[:N_VERSES]
        (tmp_path / f"{name}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "verses"
    s = _run_json(
        [
            "population",
            real_model_name,
            "--members",
            str(tmp_path / "kjv_verses.jsonl"),
            "--controls",
            str(tmp_path / "new_verses.jsonl"),
            "--prefix-tokens",
            "16",
            "--suffix-tokens",
            "16",
            "--policy",
            "top-k:40",
            "--policy",
            "full",
            "--alpha",
            "0.02",
            "--batch-size",
            "16",
            "--out",
            str(out),
            "--json",
            "--no-progress",
        ],
        capsys,
    )
    store = out / "store"
    summaries = {"top-k:40": s}
    # the full softmax was scored in the same pass: test it from the store, without the model
    summaries["full"] = _run_json(
        [
            "test",
            "--candidates",
            str(store),
            "--run",
            "members",
            "--controls",
            str(store),
            "--controls-run",
            "controls",
            "--policy",
            "full",
            "--alpha",
            "0.05",
            "--out",
            str(tmp_path / "full"),
            "--json",
        ],
        capsys,
    )
    # negative control: "members" that are 60 more newly written verses, scored into the same store
    # (the controls' scores are reused), tested against the same controls at the same alpha
    _run_json(
        [
            "score",
            real_model_name,
            "--input",
            str(data_dir / "new_verses_b.jsonl"),
            "--prefix-tokens",
            "16",
            "--suffix-tokens",
            "16",
            "--policy",
            "top-k:40",
            "--policy",
            "full",
            "--batch-size",
            "16",
            "--out",
            str(store),
            "--json",
            "--no-progress",
        ],
        capsys,
    )
    neg_run = next(
        rid
        for rid, r in ScoreStore(store, create=False).runs().items()
        if r.get("label") not in ("members", "controls")
    )
    negatives = {
        policy: _run_json(
            [
                "test",
                "--candidates",
                str(store),
                "--run",
                neg_run,
                "--controls",
                str(store),
                "--controls-run",
                "controls",
                "--policy",
                policy,
                "--alpha",
                alpha,
                "--out",
                str(tmp_path / f"neg-{policy}"),
                "--json",
            ],
            capsys,
        )
        for policy, alpha in (("top-k:40", "0.02"), ("full", "0.05"))
    }
    for policy, t in summaries.items():
        ctrl = load_run_scores(store, run="controls", policy=policy).logq
        cand = load_run_scores(store, run="members", policy=policy).logq
        assert t["n_controls"] == t["n_candidates"] == N_VERSES
        assert t["threshold"] == np.sort(ctrl)[::-1][t["k"] - 1]  # the K-th largest control score
        assert t["n_claimed"] == int(np.sum(cand > t["threshold"]))
        # the claim ([EM] Eq. 8, D.1): the calibrated rate's lower 95% bound is above 0 ...
        m = t["calibrated_rate"]
        g = t["n_claimed"]
        cp_lower = (
            stats.beta.ppf(0.025, g, N_VERSES - g + 1) if g else 0.0
        )  # Clopper-Pearson, two-sided 95%
        assert m["lower"] == pytest.approx(cp_lower - t["alpha_n"], abs=1e-9)
        assert m["lower"] > 0, (policy, m)
        # ... and no claim for the newly written "members" (same controls, same threshold)
        neg = negatives[policy]
        negc = load_run_scores(store, run=neg_run, policy=policy).logq
        assert neg["n_candidates"] == negc.size == 60 and neg["threshold"] == t["threshold"]
        assert neg["n_claimed"] == int(np.sum(negc > neg["threshold"]))
        assert neg["calibrated_rate"]["lower"] <= 0, (
            policy,
            neg["calibrated_rate"],
            neg["n_claimed"],
        )
        assert _false_claim_rate(N_VERSES, t["k"], 60) < 0.05
        print(
            f"\npopulation KJV vs new verses ({real_model_name}, 16+16 tokens, {policy}, alpha {t['alpha']}): K = {t['k']}, "
            f"alpha_N = {t['alpha_n']:.4f}, tau = 10^{t['threshold_log10_prob']:.2f}, claimed {t['n_claimed']}/"
            f"{N_VERSES}, in-sample FPR {t['in_sample_fpr']:.4f}, G = {t['generation_rate']['estimate']:.4f} "
            f"[{t['generation_rate']['lower']:.4f}, {t['generation_rate']['upper']:.4f}], "
            f"M = {t['calibrated_rate']['estimate']:.4f} [{t['calibrated_rate']['lower']:.4f}, "
            f"{t['calibrated_rate']['upper']:.4f}]; negative control (60 new verses as members): claimed "
            f"{negatives[policy]['n_claimed']}/60, M lower {negatives[policy]['calibrated_rate']['lower']:.4f} "
            f"(false-claim rate under exchangeability {_false_claim_rate(N_VERSES, t['k'], 60):.3f})"
        )
