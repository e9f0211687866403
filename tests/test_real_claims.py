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

Only what is robust is asserted: the machinery runs, the thresholds come from the controls
(the K-th largest control score; the decade above the top control window), and the members
clear them more often than the controls. The measured numbers are printed (pytest -s).
"""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from memclaim.cli.main import main
from memclaim.scoring.results import load_run_scores

pytestmark = pytest.mark.real

LN10 = math.log(10.0)
N_VERSES = 120


def _run_json(args, capsys):
    capsys.readouterr()
    rc = main(args)
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    return json.loads(cap.out)


def test_census_genesis_against_new_prose(real_model_name, data_dir, tmp_path, capsys):
    out = tmp_path / "genesis"
    s = _run_json(["census", real_model_name, "--document", str(data_dir / "genesis_1_3.txt"), "--control",
                   str(data_dir / "new_genesis_style.txt"), "--prefix-tokens", "32", "--suffix-tokens", "32",
                   "--stride", "64", "--policy", "full", "--batch-size", "16", "--out", str(out), "--json",
                   "--no-progress"], capsys)
    doc = load_run_scores(out / "store", run="document", policy="full").logq
    ctl = load_run_scores(out / "store", run="control", policy="full").logq
    p = s["pairs"][0]
    # tau_doc from the control: the decade above its top window ([EM] Eq. 31)
    assert p["max_control_log10"] == pytest.approx(float(np.max(ctl)) / LN10, abs=1e-12)
    assert p["log10_tau"] == math.ceil(p["max_control_log10"])
    # Genesis windows clear it; no control window can (tau is above all of them)
    assert p["n_windows_above"] == int(np.sum(doc / LN10 > p["log10_tau"])) > 0
    assert p["coverage"] > 0 and np.all(ctl / LN10 <= p["log10_tau"])
    assert (out / "report.html").exists()
    print(f"\ncensus Genesis 1-3 vs new prose ({real_model_name}, 32+32 tokens, stride 64, full): tau_doc = 1e{p['log10_tau']} "
          f"(top control 10^{p['max_control_log10']:.2f}), {p['n_windows_above']}/{p['n_windows']} windows above, "
          f"coverage {p['coverage']:.3f}, at margins {p['coverage_at_margins']}, max margin {p['max_margin']:.1f}")


def test_population_kjv_verses_against_new_verses(real_model_name, data_dir, tmp_path, capsys):
    for name in ("kjv_verses", "new_verses"):
        lines = (data_dir / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()[:N_VERSES]
        (tmp_path / f"{name}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "verses"
    s = _run_json(["population", real_model_name, "--members", str(tmp_path / "kjv_verses.jsonl"), "--controls",
                   str(tmp_path / "new_verses.jsonl"), "--prefix-tokens", "16", "--suffix-tokens", "16",
                   "--policy", "top-k:40", "--policy", "full", "--alpha", "0.02", "--batch-size", "16",
                   "--out", str(out), "--json", "--no-progress"], capsys)
    store = out / "store"
    summaries = {"top-k:40": s}
    # the full softmax was scored in the same pass: test it from the store, without the model
    summaries["full"] = _run_json(["test", "--candidates", str(store), "--run", "members", "--controls", str(store),
                                   "--controls-run", "controls", "--policy", "full", "--alpha", "0.05", "--out",
                                   str(tmp_path / "full"), "--json"], capsys)
    for policy, t in summaries.items():
        ctrl = load_run_scores(store, run="controls", policy=policy).logq
        cand = load_run_scores(store, run="members", policy=policy).logq
        assert t["n_controls"] == t["n_candidates"] == N_VERSES
        assert t["threshold"] == np.sort(ctrl)[::-1][t["k"] - 1]  # the K-th largest control score
        assert t["n_claimed"] == int(np.sum(cand > t["threshold"]))
        assert t["n_claimed"] / N_VERSES > t["in_sample_fpr"]  # members clear it more often than controls
        print(f"\npopulation KJV vs new verses ({real_model_name}, 16+16 tokens, {policy}, alpha {t['alpha']}): K = {t['k']}, "
              f"alpha_N = {t['alpha_n']:.4f}, tau = 10^{t['threshold_log10_prob']:.2f}, claimed {t['n_claimed']}/"
              f"{N_VERSES}, in-sample FPR {t['in_sample_fpr']:.4f}, G = {t['generation_rate']['estimate']:.4f} "
              f"[{t['generation_rate']['lower']:.4f}, {t['generation_rate']['upper']:.4f}], "
              f"M = {t['calibrated_rate']['estimate']:.4f} [{t['calibrated_rate']['lower']:.4f}, "
              f"{t['calibrated_rate']['upper']:.4f}]")
