"""Device placement of the training commands and of the audit table (issue 14 item 1): the
device a model trains on is chosen by --device and recorded; CPU shadows keep the identity
they had before the device was recorded (saved shadows stay reusable); the audit table loads
every model of the table with the placement and dtype it was given. GPU runs: unmeasured here
(no GPU on the CI machines)."""

from __future__ import annotations

import json

import pytest

from memclaim.train.recipe import ShadowRecipe

# the identity keys of a shadow recipe as written by memclaim before the device was recorded
IDENTITY_KEYS_BEFORE = {
    "mode",
    "base_fingerprint",
    "steps",
    "epochs",
    "batch_size",
    "seq_len",
    "lr",
    "warmup_steps",
    "weight_decay",
    "min_lr_ratio",
    "grad_clip",
    "seed",
    "background_sha256",
}


def test_cpu_shadow_identity_is_unchanged_and_a_gpu_adds_its_device_class():
    cpu = ShadowRecipe.finetune("base", base_fingerprint="ab")
    assert set(cpu.identity()) == IDENTITY_KEYS_BEFORE
    assert (
        ShadowRecipe.finetune("base", base_fingerprint="ab", device="cpu").identity()
        == cpu.identity()
    )
    g0 = ShadowRecipe.finetune("base", base_fingerprint="ab", device="cuda:0").identity()
    g1 = ShadowRecipe.finetune("base", base_fingerprint="ab", device="cuda:1").identity()
    assert g0 == g1 and g0["device"] == "cuda" and g0 != cpu.identity()


def test_default_shadow_recipe_trains_where_the_audited_model_computes():
    from types import SimpleNamespace

    from memclaim.audits.run import default_shadow_recipe
    from memclaim.models.placement import Placement
    from memclaim.train.toy import ensure_toy_model

    toy = ensure_toy_model()
    m = SimpleNamespace(name="toy", path=str(toy), placement=Placement(device="cuda:3"))
    recipe, _ = default_shadow_recipe(m)
    assert recipe.device == "cuda:3"
    recipe, _ = default_shadow_recipe(m, device="cpu")  # an explicit choice wins
    assert recipe.device == "cpu"


@pytest.mark.integration
def test_train_tiny_records_its_device(tmp_path):
    import memclaim as mc

    run = mc.train_tiny(out=tmp_path / "lab", steps=2, device="cpu")
    assert run.manifest["train"]["device"] == "cpu"
    saved = json.loads((tmp_path / "lab" / "memclaim_train.json").read_text())
    assert saved["train"]["device"] == "cpu"


def test_audit_table_loads_every_model_with_the_given_placement_and_dtype(tmp_path, monkeypatch):
    import memclaim as mc
    import memclaim.audits.table_run as tr

    seen = []

    class Stop(Exception):
        pass

    def fake_load(model, *, dtype="float32", sot=None, trust_remote_code=False, placement=None):
        seen.append((model, dtype, placement))
        raise Stop

    monkeypatch.setattr(tr, "load_audited_model", fake_load)
    (tmp_path / "m.jsonl").write_text('{"id": "a", "text": "x"}\n')
    spec = {
        "instances": [
            {"name": "one", "model": "toy", "members": "m.jsonl", "nonmembers": "m.jsonl"}
        ]
    }
    with pytest.raises(Stop):
        mc.audit_table(spec, base_dir=tmp_path, device="cpu", dtype="float64")
    ((model, dtype, placement),) = seen
    assert (
        model == "toy"
        and dtype == "float64"
        and placement.device == "cpu"
        and placement.device_map is None
    )
    seen.clear()
    with pytest.raises(Stop):
        mc.audit_table(spec, base_dir=tmp_path)  # defaults: auto -> the CPU here, float32 on it
    ((_, dtype, placement),) = seen
    assert placement.device_class == "cpu" and dtype == "float32"
