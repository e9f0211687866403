"""Issue 25 item 2: a model folder whose weights do not match its config is refused, and a score
that is NaN (or a log-probability of +inf) is never stored.

transformers fills a parameter the checkpoint lacks with a fresh random initialisation and says
so only in a log line: such a model scored with exit 0, differently on every load, under one
fingerprint (so a resumed run mixed two random models). Each folder here is the committed random
1-layer GPT-2 (tests/data/fixtures/store_v1/model) with one thing broken.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from _paths import ROOT
from memclaim.errors import ModelLoadError, NumericsError
from memclaim.models.loader import check_loading_info, load_model
from memclaim.scoring.store import ScoreStore, UnitResult, first_out_of_domain

MODEL = ROOT / "tests" / "data" / "fixtures" / "store_v1" / "model"
DATA = ROOT / "tests" / "data"


def _folder(
    tmp_path: Path, name: str, *, tensors=None, config=None, raw: bytes | None = None
) -> Path:
    """A copy of the fixture model with its weights replaced by ``tensors`` (a function of the
    original state dict) or ``raw`` bytes, and ``config`` merged into config.json."""
    from safetensors.torch import load_file, save_file

    d = tmp_path / name
    shutil.copytree(MODEL, d)
    if raw is not None:
        (d / "model.safetensors").write_bytes(raw)
    elif tensors is not None:
        save_file(
            tensors(load_file(str(MODEL / "model.safetensors"))),
            str(d / "model.safetensors"),
            metadata={"format": "pt"},
        )
    if config:
        cfg = json.loads((d / "config.json").read_text())
        cfg.update(config)
        (d / "config.json").write_text(json.dumps(cfg))
    return d


def _without(key):
    return lambda sd: {k: v for k, v in sd.items() if k != key}


def _nan_mlp(sd):
    return {
        k: (v.clone().fill_(float("nan")) if k.endswith("mlp.c_fc.weight") else v)
        for k, v in sd.items()
    }


def _with_extra(sd):
    import torch

    return {**sd, "transformer.h.3.extra.weight": torch.zeros(4)}


def _lm_head_too(sd):
    return {**sd, "lm_head.weight": sd["transformer.wte.weight"].clone()}


@pytest.mark.parametrize(
    "name, make, phrase",
    [
        (
            "missing-tensor",
            dict(tensors=_without("transformer.h.0.mlp.c_fc.weight")),
            "1 parameter is missing from the weights (transformers would initialise it at random): "
            "transformer.h.0.mlp.c_fc.weight",
        ),
        (
            "extra-tensor",
            dict(tensors=_with_extra),
            "1 tensor in the weights is not used by the architecture: transformer.h.3.extra.weight",
        ),
        (
            "one-layer-more",
            dict(config={"n_layer": 2}),
            "12 parameters are missing from the weights",
        ),
        ("untied-head-missing", dict(config={"tie_word_embeddings": False}), "lm_head.weight"),
    ],
)
def test_weights_that_do_not_match_the_config_are_refused(tmp_path, name, make, phrase):
    d = _folder(tmp_path, name, **make)
    m = load_model(str(d))  # tokenizer and fingerprint: no weights yet
    with pytest.raises(ModelLoadError, match="do not match its config.json") as e:
        m.lm  # noqa: B018 - loading the weights on first access is what raises
    assert phrase in str(e.value) and "fix:" in str(e.value)
    assert str(d) in str(e.value)


def test_an_empty_weights_file_is_refused_before_the_weights_load(tmp_path):
    from safetensors.torch import save_file

    d = _folder(tmp_path, "empty")
    save_file({}, str(d / "model.safetensors"))
    with pytest.raises(ModelLoadError, match="hold no tensors"):
        load_model(str(d))


def test_tied_weights_are_not_missing(tmp_path):
    """An lm_head tied to the embeddings is legitimately absent from the checkpoint (the fixture
    itself), and a checkpoint that stores it anyway is not refused either."""
    import torch

    for d in (MODEL, _folder(tmp_path, "head-stored", tensors=_lm_head_too)):
        lm = load_model(str(d), load_weights=True).lm
        hf = lm.model
        assert hf.lm_head.weight.data_ptr() == hf.transformer.wte.weight.data_ptr()
        assert torch.isfinite(hf.lm_head.weight).all()


def test_buffers_older_checkpoints_saved_are_not_unexpected(tmp_path):
    """GPT-2 checkpoints written by older transformers hold attn.bias and attn.masked_bias
    buffers, which the architecture computes itself: not a reason to refuse the weights."""
    import torch

    def buffers(sd):
        return {
            **sd,
            "transformer.h.0.attn.bias": torch.ones(1, 1, 64, 64),
            "transformer.h.0.attn.masked_bias": torch.tensor(-1e4),
        }

    d = _folder(tmp_path, "old-buffers", tensors=buffers)
    assert load_model(str(d), load_weights=True).weights_loaded


def test_a_refused_folder_loads_the_same_twice():
    """The reference: a complete folder loads to the same weights every time (a partly random
    one did not, which is why it is refused)."""
    a = load_model(str(MODEL), load_weights=True).lm.model.state_dict()
    b = load_model(str(MODEL), load_weights=True).lm.model.state_dict()
    assert all(bool((a[k] == b[k]).all()) for k in a)


def test_check_loading_info_lists_at_most_eight_names():
    with pytest.raises(ModelLoadError, match=r"20 parameters are missing .*k07 and 12 more"):
        check_loading_info({"missing_keys": [f"k{i:02d}" for i in range(20)]}, "m")
    check_loading_info(
        {
            "missing_keys": set(),
            "unexpected_keys": set(),
            "mismatched_keys": set(),
            "error_msgs": [],
        },
        "m",
    )


def test_nan_weights_are_refused_when_a_unit_is_written_and_nothing_is_stored(tmp_path):
    """NaN weights give NaN scores: the run stops with a NumericsError naming the unit and a
    window, and no unit file holds them."""
    from memclaim.api import score

    d = _folder(tmp_path, "nan", tensors=_nan_mlp)
    out = tmp_path / "store"
    with pytest.raises(
        NumericsError, match=r"unit [0-9a-f]{12}: logq:full is nan for window '"
    ) as e:
        score(
            str(d),
            str(DATA / "kjv_verses.jsonl"),
            prefix_tokens=8,
            suffix_tokens=8,
            policies=["full"],
            out=str(out),
        )
    assert "fix:" in str(e.value)
    assert not list(out.rglob("units/*/*.parquet"))


def _unit(**arrays):
    from memclaim.decoding import parse_policies
    from memclaim.models.base import SyntheticLM
    from memclaim.scoring.engine import TeacherForcingEngine

    s = TeacherForcingEngine(SyntheticLM(), parse_policies(["full", "greedy"])).score_batch(
        [[1, 2], [2, 1]], [[3, 4], [4, 3]]
    )
    for name, (index, value) in arrays.items():
        getattr(s, name)[index] = value
    return UnitResult("u" * 32, "p" * 64, ("full", "greedy"), ("a" * 32, "b" * 32), (2, 2), s)


@pytest.mark.parametrize(
    "field, index, value, column",
    [
        ("logq", (1, 0), np.nan, "logq:full"),
        ("logq", (0, 1), np.inf, "logq:greedy"),
        ("token_logq", (1, 0, 1), np.nan, "token_logq:full"),
        ("token_logprob", (0, 0), np.inf, "token_logprob"),
        ("token_mean", (1, 1), np.nan, "token_mean"),
        ("token_std", (0, 1), np.nan, "token_std"),
        ("min_margin", (1,), np.nan, "min_margin"),
    ],
)
def test_a_unit_with_a_value_no_score_can_take_is_not_written(
    tmp_path, field, index, value, column
):
    res = _unit(**{field: (index, value)})
    row = index[0]
    assert first_out_of_domain(res)[:2] == (column, row)
    store = ScoreStore(tmp_path / "s")
    with pytest.raises(NumericsError, match=f"{column} is {value} for window 'w{row}'"):
        store.write_unit(res, where=lambda key: f"window 'w{0 if key == 'a' * 32 else 1}'")
    assert not list((tmp_path / "s").rglob("*.parquet"))


def test_minus_infinity_and_an_infinite_margin_are_scores():
    """-inf is an exact zero (a policy that cannot generate the suffix): stored as it is."""
    res = _unit(logq=((0, 1), -np.inf), token_logq=((0, 1, 0), -np.inf), min_margin=((1,), np.inf))
    assert first_out_of_domain(res) is None
