"""Issue 14 items 1, 2, 6: device placement, device maps, dtype auto, the procedure's device
class, the refusal of claims that mix numerics, and hub ids from the local HF cache.

This machine has no GPU: the CUDA logic is checked with the GPU count injected
(``n_cuda=``, or :func:`memclaim.models.placement.cuda_device_count` replaced); what runs on a
GPU itself is measured by benchmarks/gpu_check.py."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from _paths import DATA
from memclaim.errors import InputError, ModelLoadError, ProcedureMismatchError
from memclaim.models import placement as pl

FIXTURE_MODEL = DATA / "fixtures" / "store_v1" / "model"


# --------------------------------------------------------------------------- devices
def test_auto_is_the_first_gpu_when_there_is_one_else_the_cpu():
    assert pl.resolve_device("auto", n_cuda=0) == "cpu"
    assert pl.resolve_device("auto", n_cuda=2) == "cuda:0"
    assert pl.resolve_device(None, n_cuda=0) == "cpu"
    assert pl.resolve_device("cuda", n_cuda=1) == "cuda:0"
    assert pl.resolve_device("CUDA:1", n_cuda=2) == "cuda:1"
    assert pl.resolve_device("cpu", n_cuda=4) == "cpu"


def test_cuda_where_there_is_none_names_the_devices_it_sees(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(
        InputError,
        match=r"--device 'cuda'.*no CUDA device.*devices seen: cpu.*CUDA_VISIBLE_DEVICES=''",
    ):
        pl.resolve_device("cuda", n_cuda=0)
    with pytest.raises(InputError, match=r"no GPU 2.*devices seen: cpu, cuda:0, cuda:1") as e:
        pl.resolve_device("cuda:2", n_cuda=2)
    assert "cuda:0, cuda:1" in e.value.hint
    for bad in ("gpu", "cuda:x", "mps", "cuda:-1", "tpu:0"):
        with pytest.raises(InputError, match="not a device memclaim can use"):
            pl.resolve_device(bad, n_cuda=1)


def test_dtype_auto_is_bfloat16_on_a_gpu_and_float32_on_the_cpu():
    assert pl.resolve_dtype("auto", "cpu") == "float32"
    assert pl.resolve_dtype(None, "cpu") == "float32"
    assert pl.resolve_dtype("auto", "cuda:0", bf16_supported=True) == "bfloat16"
    assert (
        pl.resolve_dtype("auto", "cuda:0", bf16_supported=False) == "float32"
    )  # pre-Ampere: no bf16
    assert pl.resolve_dtype("float16", "cpu") == "float16"
    with pytest.raises(ModelLoadError, match="unknown dtype 'int8'"):
        pl.resolve_dtype("int8", "cpu")


# --------------------------------------------------------------------------- --max-memory
def test_max_memory_entries_parse_to_accelerates_form():
    assert pl.parse_max_memory(["cuda:0=2GiB", "1=500MB", "cpu=1024"], n_cuda=2) == {
        0: 2 * 2**30,
        1: 500 * 10**6,
        "cpu": 1024,
    }
    assert pl.parse_max_memory({"cpu": "1.5GB"}, n_cuda=0) == {"cpu": 1_500_000_000}
    assert pl.parse_max_memory("cpu=3KiB", n_cuda=0) == {"cpu": 3072}
    assert pl.parse_max_memory(None) is None and pl.parse_max_memory([], n_cuda=0) is None


@pytest.mark.parametrize(
    "entry, phrase",
    [
        ("cpu:10GB", "not of the form DEVICE=SIZE"),
        ("cpu=10GB=1", "not of the form DEVICE=SIZE"),
        ("cpu=lots", "'lots' is not a size"),
        ("cpu=10 parsecs", "is not a size"),
        ("cpu=", "'' is not a size"),
        ("=5GB", "'' is not a device"),
        ("gpu0=5GB", "'gpu0' is not a device"),
        ("cuda:3=5GB", "there is no GPU 3"),
        ("cpu=0", "more than 0 bytes"),
        ("disk=100GB", "not limited by --max-memory"),
    ],
)
def test_a_malformed_max_memory_is_refused_with_the_expected_form(entry, phrase):
    with pytest.raises(InputError, match=phrase) as e:
        pl.parse_max_memory([entry], n_cuda=1)
    assert entry in str(e.value) or entry.split("=")[0] in str(e.value)
    assert e.value.hint


def test_a_device_named_twice_is_refused():
    with pytest.raises(InputError, match="twice"):
        pl.parse_max_memory(["0=1GB", "cuda:0=2GB"], n_cuda=1)


def test_placement_options_that_need_a_device_map_are_refused_without_one(tmp_path):
    with pytest.raises(InputError, match="--max-memory .* needs --device-map auto"):
        pl.resolve_placement(device="cpu", max_memory=["cpu=1GB"], n_cuda=0)
    with pytest.raises(InputError, match="--offload-folder .* needs --device-map auto"):
        pl.resolve_placement(device="cpu", offload_folder=tmp_path, n_cuda=0)
    with pytest.raises(InputError, match="--device-map 'balanced' is not supported"):
        pl.resolve_placement(device="cpu", device_map="balanced", n_cuda=0)
    with pytest.raises(InputError, match="gives GPU memory .*cuda:0.* but the device is the CPU"):
        pl.resolve_placement(device="cpu", device_map="auto", max_memory=["0=1GB"], n_cuda=1)
    with pytest.raises(InputError, match="gives no GPU memory"):
        pl.resolve_placement(device="cuda", device_map="auto", max_memory=["cpu=1GB"], n_cuda=1)
    f = tmp_path / "a-file"
    f.write_text("mine")
    with pytest.raises(InputError, match="exists and is not a folder"):
        pl.resolve_placement(device="cpu", device_map="auto", offload_folder=f, n_cuda=0)


def test_the_first_gpu_of_max_memory_is_the_compute_device():
    p = pl.resolve_placement(
        device="auto", device_map="auto", max_memory=["1=1GB", "2=1GB"], n_cuda=3
    )
    assert p.device == "cuda:1" and p.device_class == "cuda"
    assert p.max_memory[1] == 10**9 and "cpu" in p.max_memory  # the CPU takes what the GPUs do not
    plain = pl.resolve_placement(device="cuda:1", n_cuda=2)
    assert (plain.device, plain.device_map, plain.max_memory) == ("cuda:1", None, None)


# --------------------------------------------------------------------------- device maps
def _llama_config(tied: bool, layers: int = 6):
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=280,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        tie_word_embeddings=tied,
    )


def _layer_bytes(cfg) -> int:
    d, i, kv = (
        cfg.hidden_size,
        cfg.intermediate_size,
        cfg.num_key_value_heads * (cfg.hidden_size // 4),
    )
    return 4 * (2 * d * d + 2 * d * kv + 3 * d * i + 2 * d)


@pytest.mark.parametrize("tied", [True, False])
def test_a_device_map_keeps_the_unembedding_on_the_first_device_and_offloads_the_rest(
    tied, tmp_path
):
    cfg = _llama_config(tied)
    emb = 4 * 280 * 64
    budget = (
        emb * (1 if tied else 2) + 2 * _layer_bytes(cfg) + 4096
    )  # the embeddings and about two layers
    p = pl.resolve_placement(
        device="cpu",
        device_map="auto",
        max_memory=[f"cpu={budget}"],
        offload_folder=tmp_path,
        n_cuda=0,
    )
    dmap = pl.plan_device_map(cfg, p, "float32")
    assert dmap["lm_head"] == "cpu" and dmap["model.embed_tokens"] == "cpu"
    assert "disk" in dmap.values() and "cpu" in dmap.values()
    assert not list(tmp_path.iterdir())  # planning reads and writes nothing


def test_a_model_too_large_for_the_stated_memory_without_an_offload_folder_is_refused():
    cfg = _llama_config(False)
    p = pl.resolve_placement(device="cpu", device_map="auto", max_memory=["cpu=200000"], n_cuda=0)
    with pytest.raises(
        ModelLoadError,
        match=r"does not fit the stated memory \(cpu=.*would go to disk.*no offload"
        r" folder",
    ) as e:
        pl.plan_device_map(cfg, p, "float32")
    assert "--offload-folder" in e.value.hint
    tiny = pl.resolve_placement(device="cpu", device_map="auto", max_memory=["cpu=1000"], n_cuda=0)
    with pytest.raises(ModelLoadError, match="less than the unembedding and embedding"):
        pl.plan_device_map(cfg, tiny, "float32")


def test_a_device_map_over_two_gpus_puts_the_unembedding_on_the_first(monkeypatch):
    """The GPU count is injected; the map is computed from sizes alone (no CUDA call)."""
    cfg = _llama_config(False, layers=8)
    emb = 4 * 280 * 64
    per_gpu = emb + 3 * _layer_bytes(cfg)
    p = pl.resolve_placement(
        device="auto",
        device_map="auto",
        max_memory=[f"0={per_gpu}", f"1={per_gpu}", "cpu=1GB"],
        n_cuda=2,
    )
    dmap = pl.plan_device_map(cfg, p, "float32")
    assert dmap["lm_head"] == 0 and dmap["model.embed_tokens"] == 0
    assert set(dmap.values()) >= {0, 1}
    assert pl.map_summary(dmap)["cuda:0"] >= 2


# --------------------------------------------------------------------------- procedure keys
def _model_stub(**kw):
    from memclaim.models.loader import StartOfText

    class M:
        name = "toy"
        source = "toy"
        fingerprint = "ab" * 32
        dtype = "float32"
        fingerprint_scheme = 2
        sot = StartOfText("auto", (0,), ("<|endoftext|>",))

    m = M()
    for k, v in kw.items():
        setattr(m, k, v)
    return m


def _procedures(model):
    from memclaim.decoding import parse_policies
    from memclaim.scoring.prompts import PromptRule
    from memclaim.scoring.runner import build_procedure

    a = build_procedure(
        model,
        policies=parse_policies(["top-k:40"]),
        prefix_tokens=50,
        suffix_tokens=50,
        prompt_rule=PromptRule(),
    )
    b = build_procedure(
        model,
        policies=parse_policies(["full", "greedy", "top-p:0.9"]),
        prefix_tokens=50,
        suffix_tokens=50,
        prompt_rule=PromptRule(templates=("Q: {prefix}",)),
        near_verbatim={"epsilons": [1], "beams": [16]},
    )
    return [replace(p, memclaim_version="0.2.0") for p in (a, b)]


# Keys computed by the code before device classes were recorded (commit 7dc10cf), for the same
# procedures: a CPU float32 procedure keeps them, so every existing store stays valid.
KEYS_BEFORE = (
    "4cb307cd0005b5f4ea62c72cff13240f3a8aadb27e2b8e8b8bc6b6a635759ade",
    "61d64b0ea8adc29670eedc240f1b7c29db703c1359eb6d6bd16e7dc08b2c91d7",
)


def test_a_cpu_float32_procedure_keeps_the_key_it_had_before_device_classes():
    procs = _procedures(_model_stub())
    assert tuple(p.key for p in procs) == KEYS_BEFORE
    assert all(p.model.device_class == "cpu" for p in procs)  # recorded, though not in the key
    explicit = _procedures(_model_stub(device_class="cpu"))
    assert tuple(p.key for p in explicit) == KEYS_BEFORE


def test_device_class_and_dtype_enter_the_key():
    cpu = _procedures(_model_stub())
    gpu = _procedures(_model_stub(device_class="cuda"))
    bf16 = _procedures(_model_stub(device_class="cuda", dtype="bfloat16"))
    keys = {p.key for p in cpu + gpu + bf16}
    assert len(keys) == 6
    assert all(p.model.device_class == "cuda" for p in gpu)
    # a backend that scores elsewhere (Ray GPU workers) names its device class
    from memclaim.decoding import parse_policies
    from memclaim.scoring.prompts import PromptRule
    from memclaim.scoring.runner import build_procedure

    ray = build_procedure(
        _model_stub(),
        policies=parse_policies(["top-k:40"]),
        prefix_tokens=50,
        suffix_tokens=50,
        prompt_rule=PromptRule(),
        device_class="cuda",
    )
    assert replace(ray, memclaim_version="0.2.0").key == gpu[0].key


def test_a_procedure_recorded_without_a_device_class_reads_as_cpu():
    from memclaim.procedure import Procedure, procedure_differences

    new = _procedures(_model_stub())[0].to_dict()
    old = json.loads(json.dumps(new))
    del old["model"]["device_class"]
    assert procedure_differences(old, new) == []
    assert Procedure.from_dict(old).key == Procedure.from_dict(new).key
    gpu = dict(new, model=dict(new["model"], device_class="cuda"))
    assert procedure_differences(old, gpu) == ["model.device_class: 'cpu' != 'cuda'"]


def test_claims_that_mix_device_classes_or_dtypes_are_refused_unless_declared_comparable():
    from memclaim.procedure import STORED_PROCEDURE_MAY_DIFFER, require_same_procedure

    cpu = _procedures(_model_stub())[0].to_dict()
    gpu = _procedures(_model_stub(device_class="cuda", dtype="bfloat16"))[0].to_dict()
    with pytest.raises(
        ProcedureMismatchError,
        match=r"different numerics: model.device_class: 'cpu' != 'cuda'; "
        r"model.dtype: 'float32' != 'bfloat16'",
    ) as e:
        require_same_procedure(cpu, gpu, ignore=STORED_PROCEDURE_MAY_DIFFER)
    assert "--allow-mixed-numerics" in e.value.hint
    declared = require_same_procedure(
        cpu, gpu, ignore=STORED_PROCEDURE_MAY_DIFFER, allow_mixed_numerics=True
    )
    assert declared == [
        "model.device_class: 'cpu' != 'cuda'",
        "model.dtype: 'float32' != 'bfloat16'",
    ]
    assert require_same_procedure(cpu, cpu, allow_mixed_numerics=True) == []
    # the flag declares numerics comparable, nothing else
    other = dict(gpu, prefix_tokens=49)
    with pytest.raises(ProcedureMismatchError, match="prefix_tokens: 50 != 49"):
        require_same_procedure(
            cpu, other, ignore=STORED_PROCEDURE_MAY_DIFFER, allow_mixed_numerics=True
        )


# --------------------------------------------------------------------------- loading
@pytest.fixture(scope="module")
def llama_folder(tmp_path_factory):
    """A 6-layer Llama (untied unembedding) with random weights and the fixture model's tokenizer."""
    import torch
    from transformers import LlamaForCausalLM

    d = tmp_path_factory.mktemp("llama")
    torch.manual_seed(0)
    model = LlamaForCausalLM(_llama_config(False))
    model.save_pretrained(str(d), safe_serialization=True)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(FIXTURE_MODEL / f, d / f)
    return d


def _score(m, texts):
    from memclaim.decoding import parse_policies
    from memclaim.scoring.engine import TeacherForcingEngine

    eng = TeacherForcingEngine(m.lm, parse_policies(["full", "top-k:5", "greedy"]))
    ids = [m.tokenizer.encode(t) for t in texts]
    return eng.score_windows([m.sot_ids + i[:6] for i in ids], [i[6:12] for i in ids], batch_size=2)


TEXTS = [
    "the quick brown fox jumps over the lazy dog again and again",
    "a b c d e f g h i j k l m n o p",
    "memclaim scores windows of text under decoding policies",
]


def test_an_offloaded_model_scores_equal_the_plain_load_and_its_files_are_its_own(
    llama_folder, tmp_path
):
    from memclaim.models.loader import load_model

    plain = load_model(str(llama_folder), device="cpu")
    off = tmp_path / "offload"
    off.mkdir()
    (off / "index.json").write_text(
        "not memclaim's"
    )  # a file memclaim did not write: never touched
    layer = _layer_bytes(_llama_config(False))
    m = load_model(
        str(llama_folder),
        device="cpu",
        device_map="auto",
        max_memory=[f"cpu={2 * 4 * 280 * 64 + 2 * layer + 4096}"],
        offload_folder=off,
    )
    assert "disk" in m.device_map.values() and m.device_map["lm_head"] == "cpu"
    assert plain.placement.device_map is None and m.device_class == "cpu"
    a, b = _score(plain, TEXTS), _score(m, TEXTS)
    # the same weights, the same CPU kernels: the same bits
    assert np.array_equal(a.logq, b.logq) and np.array_equal(a.token_logprob, b.token_logprob)
    assert (off / "index.json").read_text() == "not memclaim's"
    subs = [p for p in off.iterdir() if p.is_dir()]
    assert len(subs) == 1 and subs[0].name.startswith("memclaim-offload-")
    rec = m.placement_record()
    assert rec["device_map"] == "auto" and rec["modules_per_device"]["disk"] >= 1


def test_a_model_too_large_is_refused_at_load_before_any_weight_is_read(llama_folder):
    from memclaim.models.loader import load_model

    with pytest.raises(ModelLoadError, match="does not fit the stated memory"):
        load_model(str(llama_folder), device="cpu", device_map="auto", max_memory=["cpu=200KB"])


def test_dtype_auto_on_the_cpu_loads_float32_and_records_the_device_class(llama_folder):
    from memclaim.models.loader import load_model

    m = load_model(str(llama_folder), dtype="auto", device="auto")
    if pl.cuda_device_count() == 0:
        assert (m.dtype, m.device, m.device_class) == ("float32", "cpu", "cpu")
    assert m.describe()["device_class"] == m.device_class


def test_cuda_on_a_machine_without_one_is_refused_at_load(llama_folder, monkeypatch):
    from memclaim.models.loader import load_model

    monkeypatch.setattr(pl, "cuda_device_count", lambda: 0)
    with pytest.raises(InputError, match="devices seen: cpu"):
        load_model(str(llama_folder), device="cuda")


def test_the_attention_kernel_is_chosen_at_load_time(llama_folder):
    from memclaim.models.hf import FAST_ATTENTION
    from memclaim.models.loader import load_model

    m = load_model(str(llama_folder), load_weights=True)
    assert m.lm.attn_implementation == FAST_ATTENTION


def test_a_bfloat16_run_reports_its_drift_from_float32(llama_folder, tmp_path):
    from memclaim.decoding import parse_policies
    from memclaim.models.loader import load_model
    from memclaim.scoring.prompts import PromptRule
    from memclaim.scoring.runner import run_scoring
    from memclaim.text.io import Record
    from memclaim.text.windows import passage_windows

    pols = parse_policies(["full", "greedy"])
    m = load_model(str(llama_folder), dtype="bfloat16")
    ws = passage_windows(
        [Record(f"t{i}", t) for i, t in enumerate(TEXTS)],
        m.tokenizer,
        prefix_tokens=5,
        suffix_tokens=5,
    )
    s = run_scoring(
        m,
        ws,
        policies=pols,
        prefix_tokens=5,
        suffix_tokens=5,
        prompt_rule=PromptRule(),
        out_dir=tmp_path / "bf16",
    )
    d = s.numerics_drift
    assert d["measured"] and d["dtype"] == "bfloat16" and d["windows"] == len(ws.windows)
    full = d["per_policy"]["full"]
    assert (
        0 < full["max_abs_per_token"] < 1
        and full["mean_abs_per_token"] <= full["max_abs_per_token"]
    )
    assert s.dtype == "bfloat16" and s.device_class == "cpu"
    f32 = run_scoring(
        load_model(str(llama_folder)),
        ws,
        policies=pols,
        prefix_tokens=5,
        suffix_tokens=5,
        prompt_rule=PromptRule(),
        out_dir=tmp_path / "f32",
    )
    assert f32.numerics_drift is None
    from memclaim.scoring.store import ScoreStore

    env = ScoreStore(tmp_path / "f32").read_run(f32.run_id)["environment"]
    assert (
        env["device"] == "cpu" and env["device_class"] == "cpu" and env["torch"] and "cuda" in env
    )


# --------------------------------------------------------------------------- hub ids
def _fake_hub_cache(
    root: Path, repo: str, src: Path, commit: str = "0123456789abcdef0123456789abcdef01234567"
) -> Path:
    """huggingface_hub's cache layout, built by hand: models--org--name/{refs/main, blobs/, snapshots/<commit>/}
    with each snapshot file a symlink to its blob (as the hub client writes it)."""
    base = root / ("models--" + repo.replace("/", "--"))
    (base / "refs").mkdir(parents=True)
    (base / "refs" / "main").write_text(commit)
    snap = base / "snapshots" / commit
    snap.mkdir(parents=True)
    (base / "blobs").mkdir()
    for f in src.iterdir():
        blob = base / "blobs" / f"blob-{f.name}"
        shutil.copy(f, blob)
        (snap / f.name).symlink_to(blob)
    return snap


def test_a_hub_id_resolves_from_the_local_cache_without_downloading(tmp_path, monkeypatch):
    from memclaim.models.loader import load_model, resolve_model_path

    snap = _fake_hub_cache(tmp_path / "hub", "acme/tiny-gpt", FIXTURE_MODEL)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    name, folder = resolve_model_path("acme/tiny-gpt")
    assert (name, folder) == ("acme/tiny-gpt", snap)
    assert resolve_model_path("acme/tiny-gpt@main")[1] == snap
    m = load_model("acme/tiny-gpt")
    plain = load_model(str(FIXTURE_MODEL))
    assert (
        m.fingerprint == plain.fingerprint and m.name == "acme/tiny-gpt"
    )  # the same files, the same model


def test_a_hub_id_missing_from_the_cache_is_refused_with_how_to_fetch_it(tmp_path, monkeypatch):
    from memclaim.models.loader import resolve_model_path

    (tmp_path / "hub").mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    # no network is reached either way: local_files_only
    with pytest.raises(
        ModelLoadError, match=r"'meta-llama/Llama-3.1-8B' .*not in the local HuggingFace cache"
    ) as e:
        resolve_model_path("meta-llama/Llama-3.1-8B")
    assert (
        "huggingface-cli download meta-llama/Llama-3.1-8B" in e.value.hint
        and "never downloads" in e.value.hint
    )
    _fake_hub_cache(tmp_path / "hub", "acme/tiny-gpt", FIXTURE_MODEL)
    with pytest.raises(ModelLoadError, match="not in the local HuggingFace cache"):
        resolve_model_path("acme/tiny-gpt@v2")  # a revision the cache does not hold


def test_hub_ids_and_the_cache_they_are_read_from(tmp_path, monkeypatch):
    """models/hub.py: what counts as a hub id (a path-like name with one slash, optionally at a
    revision), and the cache read: HF_HUB_CACHE, else HF_HOME/hub, looked up at call time."""
    from memclaim.models import hub

    assert all(
        hub.HUB_ID.fullmatch(s)
        for s in (
            "acme/tiny-gpt",
            "org/name@main",
            "meta-llama/Llama-3.1-8B",
            "org/name@" + "0" * 40,
        )
    )
    assert not any(
        hub.HUB_ID.fullmatch(s) for s in ("smollm2", "a/b/c", "/abs/path", "org/", "@x/y")
    )
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    assert hub.hub_cache_dir() == tmp_path / "home" / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "direct"))
    assert hub.hub_cache_dir() == tmp_path / "direct"


# --------------------------------------------------------------------------- the claim's report
def test_a_test_on_mixed_numerics_is_refused_and_allowed_only_when_declared_and_then_stated(
    tmp_path,
):
    import memclaim as mc

    proc = {
        "model": {"name": "m", "fingerprint": "f" * 64, "dtype": "float32"},
        "policy": "full",
        "prefix_tokens": 8,
        "suffix_tokens": 8,
    }  # recorded without a device class: the CPU
    gpu = {**proc, "model": {**proc["model"], "dtype": "bfloat16", "device_class": "cuda"}}
    cands, ctrls = [-2.0, -3.5, -1.0], [-9.0, -8.5, -7.0, -9.5, -8.0, -6.5, -7.7, -8.8, -9.9]
    with pytest.raises(ProcedureMismatchError, match="different numerics"):
        mc.test(cands, ctrls, alpha="0.1", candidates_procedure=proc, controls_procedure=gpu)
    res = mc.test(
        cands,
        ctrls,
        alpha="0.1",
        candidates_procedure=proc,
        controls_procedure=gpu,
        allow_mixed_numerics=True,
        out=tmp_path / "rep",
    )
    declared = res.procedure["numerics_declared_comparable"]
    assert declared == [
        "model.device_class: 'cpu' != 'cuda'",
        "model.dtype: 'float32' != 'bfloat16'",
    ]
    md = (tmp_path / "rep" / "report.md").read_text().replace("\\", "")  # Markdown escapes
    assert (
        "declared comparable with --allow-mixed-numerics" in md
        and "model.device_class: 'cpu' != 'cuda'" in md
    )
    rep = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert "numerics_declared_comparable" in json.dumps(rep)
    same = mc.test(
        cands,
        ctrls,
        alpha="0.1",
        candidates_procedure=proc,
        controls_procedure=proc,
        allow_mixed_numerics=True,
    )
    assert "numerics_declared_comparable" not in same.procedure


def test_every_model_loading_api_function_takes_the_placement_keywords():
    import memclaim as mc
    from api_keywords import accepted_keywords as accepted

    for fn in (mc.load_model, mc.score, mc.population, mc.census, mc.audit, mc.dp_baseline):
        missing = {"device", "device_map", "max_memory", "offload_folder", "dtype"} - accepted(fn)
        assert not missing, (fn.__name__, missing)
    for fn in (mc.test, mc.population, mc.census, mc.audit):
        assert "allow_mixed_numerics" in accepted(fn), fn.__name__


def test_a_loaded_model_cannot_be_placed_again(llama_folder):
    import memclaim as mc

    m = mc.load_model(str(llama_folder))
    with pytest.raises(InputError, match="device, device_map .*cannot change it"):
        mc.load_model(m, device="cpu", device_map="auto")
