"""The audit-disagreement table (memclaim.audits.table): verdict rules on each cell type, the
rows of [MX] Fig. 12 rebuilt from counts, Markdown and heatmap rendering."""

from __future__ import annotations

import numpy as np
import pytest

from memclaim.audits import table as T
from memclaim.audits.metrics import roc_auc, tpr_at_fpr
from memclaim.errors import DomainError, InputError


def test_auc_cell_verdicts():
    rng = np.random.default_rng(0)
    leak = T.auc_cell(roc_auc(rng.normal(2, 1, 48), rng.normal(0, 1, 48)))
    assert (
        leak.verdict == "leak" and leak.low > 0 and leak.signal == pytest.approx(2 * leak.value - 1)
    )
    blind = T.auc_cell(roc_auc(np.full(48, 0.3), np.full(48, 0.3)))  # gated release: exactly 0.5
    assert blind.verdict == "blind" and blind.signal == 0.0
    inv = T.auc_cell(roc_auc(rng.normal(-2, 1, 48), rng.normal(0, 1, 48)))
    assert inv.verdict == "inverted" and inv.high < 0


def test_tpr_cell_uses_certified_fpr_as_chance():
    rng = np.random.default_rng(1)
    non = rng.normal(0, 1, 399)
    c = T.tpr_cell(tpr_at_fpr(rng.normal(3, 1, 48), non, fpr=0.05))
    assert c.verdict == "leak" and c.chance == pytest.approx(0.05)
    weak = T.tpr_cell(tpr_at_fpr(rng.normal(0, 1, 48), non, fpr=0.05))
    assert weak.verdict == "blind"


def test_rate_cell_verdicts_and_guessed():
    assert T.rate_cell(0, 48).verdict == "blind"  # extraction at c: 0.00 blind
    assert T.rate_cell(46, 48).verdict == "leak"  # naive duplicate: 0.96 leak
    assert T.rate_cell(1, 48).verdict == "leak"  # any success is above 0 without a prior
    # low-H canary ([MX] §8.2): prior guessing alone reproduces 32.1% (77 of 240); the audit's
    # 0.47 (15 of 32) is within reach of the prior -> guessed, neither blind nor leak.
    g = T.rate_cell(15, 32, baseline_successes=77, baseline_trials=240)
    assert g.verdict == "guessed" and g.chance == pytest.approx(77 / 240)
    # the same rate against an exactly known tiny baseline (a certified kappa) is a leak
    assert T.rate_cell(15, 32, baseline=1e-6).verdict == "leak"
    # far above the prior: leak even with a baseline
    assert T.rate_cell(31, 32, baseline_successes=77, baseline_trials=240).verdict == "leak"
    # far below the prior: blind, not guessed
    assert T.rate_cell(0, 48, baseline=0.321).verdict == "blind"
    with pytest.raises(DomainError):
        T.rate_cell(5, 4)
    with pytest.raises(DomainError, match="not both"):
        T.rate_cell(1, 4, baseline=0.1, baseline_successes=1, baseline_trials=10)


def test_informed_cell_verdicts():
    assert T.informed_cell(48, 48).verdict == "recovered"
    # camouflage ([MX] Fig. 12): the informed adversary is capped at m k^-L = 1/16 -> 0.06 capped
    cam = T.informed_cell(3, 48, cap=1 / 16)
    assert cam.verdict == "capped" and cam.signal == pytest.approx(0.0625)
    over = T.informed_cell(40, 48, cap=1 / 16)
    assert over.verdict == "recovered" and "exceeds the stated cap" in over.note
    assert T.informed_cell(0, 48).verdict == "not recovered"


def _fig12_like():
    rng = np.random.default_rng(2)
    cols = [
        T.AuditColumn("extraction at prefix c"),
        T.AuditColumn("loss-MIA"),
        T.AuditColumn("LiRA"),
        T.AuditColumn("unlearning verifier"),
        T.AuditColumn("informed recovery", informed=True),
    ]
    same = roc_auc(np.full(48, 0.1), np.full(48, 0.1))
    rows = {
        "gated release": {
            "extraction at prefix c": T.rate_cell(0, 48),
            "loss-MIA": T.auc_cell(roc_auc(rng.normal(0.1, 1, 48), rng.normal(0, 1, 48))),
            "LiRA": T.auc_cell(same),
            "unlearning verifier": T.rate_cell(0, 48),
            "informed recovery": T.informed_cell(48, 48),
        },
        "naive duplicate": {
            "extraction at prefix c": T.rate_cell(46, 48),
            "loss-MIA": T.auc_cell(roc_auc(rng.normal(4, 1, 48), rng.normal(0, 1, 48))),
            "LiRA": T.auc_cell(roc_auc(rng.normal(5, 1, 48), rng.normal(0, 1, 48))),
            "informed recovery": T.informed_cell(46, 48),
        },
        "camouflage | dir. i": {"informed recovery": T.informed_cell(3, 48, cap=1 / 16)},
    }
    return T.build_table(cols, rows)


def test_table_structure_and_queries():
    tab = _fig12_like()
    assert tab.rows == ("gated release", "naive duplicate", "camouflage | dir. i")
    assert tab.cell("gated release", "LiRA").verdict == "blind"
    assert tab.cell("naive duplicate", "unlearning verifier") is None
    assert tab.missed_by("LiRA") == ["gated release"]
    assert tab.missed_by("extraction at prefix c") == ["gated release"]
    m = tab.signal_matrix()
    assert m.shape == (3, 5) and np.isnan(m[1, 3]) and m[0, 4] == 1.0
    d = tab.to_dict()
    assert d["columns"][4]["informed"] is True and "Verdict rules" in d["rules"]
    with pytest.raises(InputError):
        tab.cell("nope", "LiRA")


def test_markdown_rendering():
    md = _fig12_like().to_markdown()
    lines = md.splitlines()
    assert lines[0] == (
        "| instance | extraction at prefix c | loss-MIA | LiRA | unlearning verifier | "
        "informed recovery † |"
    )
    assert "| gated release | 0.00 [0.00, 0.07] blind |" in md
    assert "0.00 [-0.39, 0.39] blind" in md  # Hoeffding interval for the tied LiRA
    assert "camouflage \\| dir. i" in md and "0.06 [0.01, 0.17] capped" in md
    assert "Verdict rules" in md and "ground truth" in md
    short = _fig12_like().to_markdown(intervals=False, rules=False)
    assert "1.00 recovered" in short and "Verdict rules" not in short


def test_heatmap_renders_to_png(tmp_path):
    path = tmp_path / "fig12.png"
    from memclaim.report.figures import disagreement_heatmap

    fig = disagreement_heatmap(_fig12_like(), path)
    assert path.stat().st_size > 1000 and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert "1.00\nrecovered" in texts and "n/a" in texts


def test_build_table_validation():
    cols = [T.AuditColumn("loss"), T.AuditColumn("informed", informed=True)]
    with pytest.raises(InputError, match="unknown audit"):
        T.build_table(cols, {"x": {"lira": T.rate_cell(1, 2)}})
    with pytest.raises(InputError, match="informed"):
        T.build_table(cols, {"x": {"loss": T.informed_cell(1, 2)}})
    with pytest.raises(InputError, match="informed"):
        T.build_table(cols, {"x": {"informed": T.rate_cell(1, 2)}})
    with pytest.raises(InputError, match="duplicate"):
        T.build_table(["a", "a"], {"x": {}})
    with pytest.raises(InputError, match="at least one"):
        T.build_table(cols, {})
