"""Issue 26 item 2: the public functions take ``procedure=`` and ``runtime=`` (audit: its
``settings=`` value whole) and keep every flat keyword of 0.2 as a typed shortcut, turned into
the values once by :func:`memclaim.api._shortcuts.take_options`."""

from __future__ import annotations

import inspect

import pytest

import memclaim as mc
from memclaim.api._public import KeywordError
from memclaim.api._shortcuts import (
    ScoreOptions,
    procedure_flat,
    runtime_flat,
    take_options,
)
from memclaim.errors import MemclaimError
from memclaim.procedure import Procedure
from memclaim.runtime import Runtime

# every keyword of these functions before issue 26 (memclaim 0.2.0 at 1640a5b): each must
# still be accepted, explicitly or as a shortcut of **options
KEYWORDS_0_2 = {
    "score": "model texts document stride prefix_tokens suffix_tokens policies prompt_templates chat_template aggregate text_field prefix_field suffix_field id_field input_format limit near_verbatim beams out label batch_size unit_size backend address workers gpus_per_worker threads_per_worker url api_key_env api_key_file served_model max_concurrency served_bounds dtype device device_map max_memory offload_folder sot allow_pickle trust_remote_code threads stats progress log",
    "population": "model members controls alpha prefix_tokens suffix_tokens policies prompt_templates chat_template aggregate text_field prefix_field suffix_field id_field input_format limit near_verbatim beams exclude_controls exclude_control_ids fdr fwer seed budget_delta realistic_budget confidence controls_description out batch_size unit_size backend address workers gpus_per_worker threads_per_worker url api_key_env api_key_file served_model max_concurrency dtype sot device device_map max_memory offload_folder allow_mixed_numerics allow_pickle trust_remote_code threads stats progress log",
    "census": "model document control pairs stride prefix_tokens suffix_tokens policies prompt_templates chat_template aggregate limit near_verbatim beams exclude_spans references min_similarity use_global budget_delta realistic_budget controls_description out batch_size unit_size backend address workers gpus_per_worker threads_per_worker url api_key_env api_key_file served_model max_concurrency dtype device device_map max_memory offload_folder allow_mixed_numerics sot allow_pickle trust_remote_code threads progress log",
    "audit": "model members controls out reference shadows attacks k alpha confidence prefix_tokens suffix_tokens policies m trigger verifier_threshold kappa soundness_epsilon soundness_neighbors cap cap_epsilon cap_neighbors cap_functional cap_slack cap_slack_note shadow_mode shadow_base shadow_steps shadow_epochs shadow_lr shadow_batch_size shadow_seq_len shadow_seed shadow_warmup shadow_background design_seed text_field id_field input_format limit dtype sot device device_map max_memory offload_folder allow_mixed_numerics batch_size trust_remote_code threads progress log",
    "acr": "model members controls criterion top_k search_batch steps seed token_filter retokenize start_tokens max_prompt_tokens alpha confidence limit text_field id_field input_format controls_description out dtype sot device device_map max_memory offload_folder allow_pickle trust_remote_code threads progress log",
    "test": "candidates controls alpha policies run controls_run near_verbatim kind binary id_field score_field text_field candidates_procedure controls_procedure candidate_ids control_ids exclude_controls exclude_control_ids fdr fwer seed budget_delta realistic_budget confidence controls_description out allow_mixed_numerics",
    "finetune": "model data out plant_records reserve_triggers layout epochs steps lr batch_size seq_len dp_epsilon dp_delta noise_multiplier max_grad_norm physical_batch_size seed threads overwrite trust_remote_code device log progress",
    "dp_bounds": "neighbors epsilon delta mu curve noise_multiplier sampling_rate steps pld_grid copies list_size risk baseline truncation in_support_mass dataset_size frequency successes trials confidence independence",
    "unlearn": "model forget retain out method lr max_rounds threshold seq_len batch_size seed threads overwrite trust_remote_code device log progress",
}


def _accepted(fn) -> set[str]:
    sig = inspect.signature(fn)
    names = {n for n, p in sig.parameters.items() if p.kind is not p.VAR_KEYWORD}
    var = [p for p in sig.parameters.values() if p.kind is p.VAR_KEYWORD]
    if var:  # **options: Unpack[XOptions]
        typed = inspect.get_annotations(inspect.unwrap(fn), eval_str=False)[var[0].name]
        mod = inspect.getmodule(inspect.unwrap(fn))
        name = typed.removeprefix("Unpack[").removesuffix("]")
        names |= set(getattr(mod, name).__annotations__)
    return names


@pytest.mark.parametrize("fname", sorted(KEYWORDS_0_2))
def test_every_keyword_of_0_2_is_still_accepted(fname):
    fn = getattr(mc, fname)
    missing = set(KEYWORDS_0_2[fname].split()) - _accepted(fn)
    assert not missing, f"{fname}() no longer takes {sorted(missing)}"


def test_a_shortcut_has_the_value_and_default_its_keyword_had():
    o = take_options("score", ScoreOptions, {"threads": 2, "policies": ["full"]})
    assert o.get("threads", "batch_size", "unit_size", "backend") == (2, 16, 64, "local")
    assert o["policies"] == ["full"] and o.procedure.policies == ("full",)
    assert o.runtime.threads == 2 and "threads" in o and "batch_size" not in o
    # a value's fields reach the options; a keyword over a value sets what the value left out
    o = take_options(
        "score",
        ScoreOptions,
        {"batch_size": 8},
        procedure=Procedure.options(prefix_tokens=8),
        runtime={"backend": "ray", "workers": 2},
    )
    assert o.get("prefix_tokens", "suffix_tokens", "batch_size", "backend", "workers") == (
        8,
        None,  # as the keyword's default: the windows' default length, 50, is chosen later
        8,
        "ray",
        2,
    )
    assert o.procedure.windows.lengths == (8, 50)
    assert o.runtime.backend.kind == "ray" and o.runtime.batch_size == 8
    assert "workers" in o and "prefix_tokens" in o


def test_the_flat_views_invert_the_values():
    p = Procedure.options(
        policies=["full", "greedy"], prefix_tokens=8, near_verbatim=[1], beams=[4], sot="bos"
    )
    assert Procedure.options(**procedure_flat(p)) == p
    rt = Runtime.options(batch_size=4, backend="ray", workers=3, device="cpu", url="http://x")
    assert Runtime.options(**runtime_flat(rt)) == rt
    assert runtime_flat(rt)["url"] == "http://x"
    # near-verbatim at the default beam reads back as no beam given, as the keywords had it
    assert procedure_flat(Procedure.options(near_verbatim=[2]))["beams"] == ()
    # a served setting of 0 is a value (refused later, naming it), not "not given"
    assert runtime_flat(Runtime.options(max_concurrency=0))["max_concurrency"] == 0


def test_a_field_given_twice_is_refused_naming_both_values():
    with pytest.raises(KeywordError, match=r"runtime= sets threads=2 and the keyword threads=4"):
        take_options("score", ScoreOptions, {"threads": 4}, runtime=Runtime(threads=2))
    with pytest.raises(KeywordError, match=r"procedure= sets prefix_tokens=8"):
        take_options("score", ScoreOptions, {"prefix_tokens": 8}, procedure={"prefix_tokens": 8})
    # a value at its defaults sets nothing: the keyword fills it in
    assert (
        take_options("score", ScoreOptions, {"threads": 4}, runtime=Runtime()).runtime.threads == 4
    )


def test_an_unknown_keyword_names_the_closest_and_is_a_memclaim_error():
    with pytest.raises(KeywordError) as info:
        mc.score("toy", ["a text"], prefix_tokns=8)
    assert isinstance(info.value, MemclaimError) and isinstance(info.value, TypeError)
    assert "did you mean prefix_tokens=?" in info.value.hint
    with pytest.raises(KeywordError, match="did you mean settings=?"):
        mc.audit("toy", ["a"], ["b"], setings={})


def test_audit_settings_are_passed_whole_and_refused_twice():
    with pytest.raises(KeywordError, match=r"settings= sets m=2 and the keyword m=3"):
        mc.audit("toy", ["a"], ["b"], settings=mc.AuditSettings(m=2), m=3)
    with pytest.raises(KeywordError, match="settings have no field mm"):
        mc.audit("toy", ["a"], ["b"], settings={"mm": 2})


@pytest.mark.integration
def test_values_and_shortcuts_score_the_same_run(tmp_path):
    texts = [f"passage number {i} of a small test with some words in it again" for i in range(4)]
    flat = mc.score(
        "toy",
        texts,
        prefix_tokens=6,
        suffix_tokens=6,
        policies=["full", "greedy"],
        batch_size=3,
        unit_size=2,
        out=tmp_path / "flat",
        progress=False,
    )
    vals = mc.score(
        "toy",
        texts,
        procedure=mc.Procedure.options(
            prefix_tokens=6, suffix_tokens=6, policies=["full", "greedy"]
        ),
        runtime=mc.Runtime(batch_size=3, unit_size=2),
        out=tmp_path / "values",
        progress=False,
    )
    mixed = mc.score(
        "toy",
        texts,
        procedure={"prefix_tokens": 6, "suffix_tokens": 6},
        policies=["full", "greedy"],
        runtime={"batch_size": 3},
        unit_size=2,
        out=tmp_path / "mixed",
        progress=False,
    )
    for other in (vals, mixed):
        assert other.run_id == flat.run_id
        assert other.summary.procedure_key == flat.summary.procedure_key
        for pol in ("full", "greedy"):
            assert other.scores(pol).logq.tolist() == flat.scores(pol).logq.tolist()


@pytest.mark.integration
def test_audit_settings_whole_audit_as_the_shortcuts(tmp_path):
    from memclaim.train.toy import toy_data

    td = toy_data()
    members = [r["text"] for r in td["planted"] if r["id"].startswith("member")][:6]
    controls = [r["text"] for r in td["held_out"] if r["id"].startswith("control")][:6]
    common = dict(attacks=["loss"], progress=False)
    flat = mc.audit(
        "toy", members, controls, prefix_tokens=8, suffix_tokens=8, k="0.3", m=2, **common
    )
    whole = mc.audit(
        "toy",
        members,
        controls,
        settings=mc.AuditSettings(prefix_tokens=8, suffix_tokens=8, k="0.3", m=2),
        **common,
    )
    mixed = mc.audit(
        "toy", members, controls, settings={"prefix_tokens": 8, "suffix_tokens": 8}, k="0.3", m=2,
        runtime={"batch_size": 4}, **common,
    )  # fmt: skip
    ref = flat.to_dict()
    assert mixed.to_dict()["settings"]["batch_size"] == 4  # runtime= reaches the settings
    for other in (whole, mixed):
        d = other.to_dict()
        assert {**d["settings"], "batch_size": 16} == ref["settings"]
        assert d["attacks"] == ref["attacks"]  # CPU scores are the same at every batch size
