"""The loss attack on a real pretrained model (real tier): SmolLM2-135M on King James verses
(public-domain text that is all over the web, so very likely in its pretraining data) against
newly written verse-like sentences of the same style and length (never published before this
repository, so non-members). Reported: the AUC with its DeLong interval; asserted: only that
the interval lies above 1/2. Gemma 3 270M runs the same check in the slow tier."""

from __future__ import annotations

import json

import pytest

from memclaim.audits.run import run_audit
from memclaim.audits.settings import AuditSettings

pytestmark = pytest.mark.real

N_EACH = 120  # verses per side: enough for a DeLong interval of width about 0.1


def _rows(path, n):
    return [
        json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
    ][:n]


def test_loss_auc_kjv_vs_new_verses(real_model, data_dir, tmp_path, record_property):
    kjv = _rows(data_dir / "kjv_verses.jsonl", N_EACH)
    new = _rows(data_dir / "new_verses.jsonl", N_EACH)
    res = run_audit(
        real_model,
        kjv,
        new,
        out_dir=tmp_path,
        settings=AuditSettings(
            prefix_tokens=16, suffix_tokens=16, attacks=("loss",), extraction_policy=None
        ),
    )
    a = res.attack("loss").auc
    msg = (
        f"{real_model.name} loss AUC, KJV vs new verses ({res.n_members} vs {res.n_nonmembers}, 16+16 tokens): "
        f"{a.auc:.3f} [{a.low:.3f}, {a.high:.3f}] ({a.interval_method})"
    )
    record_property(f"{real_model.name}_kjv_loss_auc", msg)
    print(msg)
    assert (
        res.n_members >= 100 and res.n_nonmembers >= 100
    )  # (verses shorter than 32 tokens are skipped)
    assert a.low > 0.5, msg
