"""The audit runner, shadows, extraction audits, unlearning verifier and `memclaim audit` CLI
(fast tier: a randomly initialized tiny GPT-2 and synthetic arrays; nothing trained for long)."""

from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _paths import ROOT
from memclaim.api import audit_table
from memclaim.audits import extraction as X
from memclaim.audits import shadows as S
from memclaim.audits import verifier as V
from memclaim.audits.run import audit_runs, run_audit
from memclaim.audits.settings import AuditSettings
from memclaim.audits.texts import read_texts
from memclaim.cli.main import main as cli_main
from memclaim.errors import DomainError, InputError, ProcedureMismatchError
from memclaim.report.audit import write_audit_report


# ------------------------------------------------------------------------------- fixtures
def _passages(n, seed, words=30):
    from memclaim.train.corpus import MarkovZipf

    gen = MarkovZipf(n_words=120, seed=3)  # the generator the random model's tokenizer was fit on
    rng = np.random.default_rng(seed)
    return [gen.passage(rng, n_words=words) for _ in range(n)]


@pytest.fixture(scope="module")
def texts():
    t = _passages(16, 101)
    return {"members": t[:8], "nonmembers": t[8:]}


@pytest.fixture(scope="module")
def files(tmp_path_factory, texts):
    d = tmp_path_factory.mktemp("audit-inputs")
    for name, ts in texts.items():
        (d / f"{name}.jsonl").write_text(
            "\n".join(json.dumps({"id": f"{name}-{i}", "text": t}) for i, t in enumerate(ts)) + "\n"
        )
    (d / "one.jsonl").write_text(json.dumps({"id": "x", "text": texts["nonmembers"][0]}) + "\n")
    return d


SMALL = AuditSettings(prefix_tokens=4, suffix_tokens=8, extraction_policy="top-k:5", batch_size=8)


@pytest.fixture(scope="module")
def audited(random_model, texts, tmp_path_factory):
    out = tmp_path_factory.mktemp("audit-out")
    res = run_audit(
        random_model, texts["members"], texts["nonmembers"], out_dir=out, settings=SMALL
    )
    return out, write_audit_report(res, out)


@pytest.fixture(scope="module")
def other_tokenizer_model(tmp_path_factory):
    """A random GPT-2 whose BPE tokenizer has another vocabulary (a different tokenization)."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from memclaim.models import load_model
    from memclaim.train.toy import _train_tokenizer

    out = tmp_path_factory.mktemp("other-tok")
    tok = _train_tokenizer(_passages(30, 7) + ["the quick brown fox"], 200)
    torch.manual_seed(1)
    GPT2LMHeadModel(
        GPT2Config(
            vocab_size=len(tok),
            n_positions=128,
            n_embd=32,
            n_layer=1,
            n_head=2,
            bos_token_id=0,
            eos_token_id=0,
        )
    ).save_pretrained(str(out))
    tok.save_pretrained(str(out))
    return load_model(str(out), sot="bos", load_weights=True)


# ----------------------------------------------------------------------------- the runner
def test_audit_runs_every_attack_and_writes_a_report(audited):
    out, res = audited
    names = [e.attack for e in res.attacks]
    assert names == ["loss", "perplexity", "zlib", "min-k", "min-k++"]  # no reference, no shadows
    for e in res.attacks:
        a = e.auc
        assert 0 <= a.low <= a.auc <= a.high <= 1
        assert a.leak_signal == pytest.approx(2 * a.auc - 1)
        assert e.member_scores.shape == (8,) and e.nonmember_scores.shape == (8,)
        assert e.tpr is None  # no FPR asked for
    assert res.n_members == res.n_nonmembers == 8
    for f in ("report.json", "report.md", "report.html"):
        assert (out / f).is_file()
    rep = json.loads((out / "report.json").read_text())
    assert rep["command"] == "audit" and rep["results"]["n_members"] == 8
    assert any("Membership is not extraction" in s for s in rep["statements"])
    # loss scores are the mean suffix log-probs from the store, in window order
    from memclaim.scoring.results import load_run_scores

    run = load_run_scores(res.store, run=res.scoring["members"]["run_id"], policy="full")
    want = [float(np.mean(a)) for a in run.token_array("token_logprob")]
    np.testing.assert_allclose(res.attack("loss").member_scores, want, rtol=0, atol=0)


def test_rerun_reuses_the_store(random_model, texts, audited):
    out, first = audited
    again = run_audit(
        random_model, texts["members"], texts["nonmembers"], out_dir=out, settings=SMALL
    )
    assert all(v["units_scored"] == 0 and v["units_reused"] > 0 for v in again.scoring.values())
    for a, b in zip(first.attacks, again.attacks):
        assert a.auc.auc == b.auc.auc


def test_extraction_and_verifier_read_the_same_pass(audited):
    _, res = audited
    ex = res.extraction
    assert ex.n == 8 and ex.policy == "top-k:5" and ex.m == 1
    assert ex.greedy_successes == int(ex.greedy_match.sum())
    assert ex.log_p_list.shape == (8,) and np.all(ex.log_p_list <= 0)
    ver = res.verifier
    assert ver.rate == pytest.approx(ex.greedy_rate) and ver.forgotten == (ex.greedy_rate < 0.15)


def test_a_user_registered_attack_joins_the_audit(random_model, texts, audited):
    from memclaim.audits.attacks import register_attack, unregister_attack

    out, first = audited

    def longest_token_run(data, k=0.2):  # an attack with a settable k receives the audit's k
        return np.array([float(np.max(a)) for a in data.token_logprobs]) + 0 * float(k)

    register_attack(
        "max-token", longest_token_run, citation="test", measures="the best-predicted token"
    )
    try:
        res = run_audit(
            random_model, texts["members"], texts["nonmembers"], out_dir=out, settings=SMALL
        )
    finally:
        unregister_attack("max-token")
    e = res.attack("max-token")
    assert e.citation == "test" and e.params == {"k": "0.2"}
    np.testing.assert_array_equal(e.member_scores, [a.max() for a in _member_token_logprobs(res)])


def _member_token_logprobs(res):
    from memclaim.scoring.results import load_run_scores

    return load_run_scores(
        res.store, run=res.scoring["members"]["run_id"], policy="full"
    ).token_array("token_logprob")


def test_fewer_than_two_or_overlapping_sets_are_refused(random_model, texts, tmp_path):
    with pytest.raises(InputError, match="at least two non-members"):
        run_audit(
            random_model,
            texts["members"],
            texts["nonmembers"][:1],
            out_dir=tmp_path,
            settings=SMALL,
        )
    with pytest.raises(InputError, match="both members and non-members"):
        run_audit(
            random_model,
            texts["members"],
            texts["members"][:3] + texts["nonmembers"],
            out_dir=tmp_path,
            settings=SMALL,
        )
    with pytest.raises(InputError, match="members: all 2 texts are shorter"):
        run_audit(
            random_model,
            ["too short", "also short"],
            texts["nonmembers"],
            out_dir=tmp_path,
            settings=SMALL,
        )
    with pytest.raises(InputError, match="at least two members; 1 of 3 member texts"):
        run_audit(
            random_model,
            texts["members"][:1] + ["too short", "also short"],
            texts["nonmembers"],
            out_dir=tmp_path,
            settings=SMALL,
        )


def test_uncertifiable_fpr_refused_before_any_model_work(random_model, texts, tmp_path):
    s = AuditSettings(prefix_tokens=4, suffix_tokens=8, fpr="0.01")
    with pytest.raises(
        DomainError, match=r"(?s)cannot certify an FPR of 0.01 with 8 non-members.*at least 99"
    ):
        run_audit(
            random_model, texts["members"], texts["nonmembers"], out_dir=tmp_path / "x", settings=s
        )
    assert not (tmp_path / "x").exists()
    res = run_audit(
        random_model,
        texts["members"],
        texts["nonmembers"],
        out_dir=tmp_path / "y",
        settings=s,
        strict_fpr=False,
    )
    assert res.tpr_note and "99" in res.tpr_note and all(e.tpr is None for e in res.attacks)
    ok = run_audit(
        random_model,
        texts["members"],
        texts["nonmembers"],
        out_dir=tmp_path / "y",
        settings=AuditSettings(prefix_tokens=4, suffix_tokens=8, fpr="1/9"),
    )
    t = ok.attack("loss").tpr
    assert t.k == 1 and t.certified_fpr == pytest.approx(1 / 9) and t.n_nonmembers == 8


def test_attack_needing_missing_inputs_is_refused(random_model, texts, tmp_path):
    for name, hint in (("reference", "--reference"), ("lira-online", "--shadows")):
        with pytest.raises(InputError, match=hint):
            run_audit(
                random_model,
                texts["members"],
                texts["nonmembers"],
                out_dir=tmp_path,
                settings=AuditSettings(prefix_tokens=4, suffix_tokens=8, attacks=(name,)),
            )
    with pytest.raises(DomainError, match="unknown attack"):
        run_audit(
            random_model,
            texts["members"],
            texts["nonmembers"],
            out_dir=tmp_path,
            settings=AuditSettings(prefix_tokens=4, suffix_tokens=8, attacks=("nope",)),
        )
    with pytest.raises(DomainError, match="even number >= 4"):
        run_audit(
            random_model,
            texts["members"],
            texts["nonmembers"],
            out_dir=tmp_path,
            settings=SMALL,
            shadows=3,
        )


def test_runs_under_different_procedures_are_refused(random_model, texts, tmp_path):
    from memclaim.scoring.results import load_run_scores

    a = run_audit(
        random_model, texts["members"], texts["nonmembers"], out_dir=tmp_path, settings=SMALL
    )
    b = run_audit(
        random_model,
        texts["members"],
        texts["nonmembers"],
        out_dir=tmp_path,
        settings=AuditSettings(prefix_tokens=5, suffix_tokens=8, extraction_policy="top-k:5"),
    )
    mem = load_run_scores(tmp_path / "scores", run=a.scoring["members"]["run_id"], policy="full")
    non_other = load_run_scores(
        tmp_path / "scores", run=b.scoring["nonmembers"]["run_id"], policy="full"
    )
    with pytest.raises(ProcedureMismatchError, match="prefix_tokens: 4 != 5"):
        audit_runs(mem, non_other)
    non = load_run_scores(tmp_path / "scores", run=a.scoring["nonmembers"]["run_id"], policy="full")
    res = audit_runs(mem, non, settings=SMALL)
    assert res.attack("loss").auc.auc == a.attack("loss").auc.auc


def test_reference_with_the_same_tokenizer_is_per_token_aligned(random_model, texts, tmp_path):
    res = run_audit(
        random_model,
        texts["members"],
        texts["nonmembers"],
        out_dir=tmp_path,
        settings=SMALL,
        reference=random_model,
    )
    assert res.reference["same_tokenization"] and not res.notes
    ref = res.attack("reference")
    # the model is its own reference: log-likelihood ratio exactly 0 everywhere -> AUC 1/2
    assert np.all(ref.member_scores == 0) and ref.auc.auc == 0.5


def test_reference_with_another_tokenizer_compares_whole_texts(
    random_model, other_tokenizer_model, texts, tmp_path
):
    res = run_audit(
        random_model,
        texts["members"],
        texts["nonmembers"],
        out_dir=tmp_path,
        settings=SMALL,
        reference=other_tokenizer_model,
    )
    assert not res.reference["same_tokenization"]
    assert any("tokenizes differently" in n and "per text" in n for n in res.notes)
    # per text: total suffix log-lik under the target minus total over the same characters under the reference
    from memclaim.scoring.results import load_run_scores

    t = load_run_scores(res.store, run=res.scoring["members"]["run_id"], policy="full")
    r = load_run_scores(res.store, run=res.scoring["reference:members"]["run_id"], policy="full")
    want = [
        a.sum() - b.sum()
        for a, b in zip(t.token_array("token_logprob"), r.token_array("token_logprob"))
    ]
    np.testing.assert_allclose(res.attack("reference").member_scores, want, rtol=1e-12)
    # the reference windows cover the same characters, re-tokenized whole
    tok = other_tokenizer_model.tokenizer
    for pre, suf, rid in zip(
        t.prefix_texts, t.suffix_texts, r.table.column("suffix_ids").to_pylist()
    ):
        assert r.suffix_texts[t.prefix_texts.index(pre)] == suf
        ids = tok.encode(pre + suf)
        assert ids[len(ids) - len(rid) :] == rid


def test_windows_longer_than_the_context_are_refused(
    random_model, other_tokenizer_model, texts, tmp_path
):
    long = AuditSettings(prefix_tokens=60, suffix_tokens=80)  # 140 + start-of-text > 128 positions
    many = _passages(4, 77, words=200)
    with pytest.raises(InputError, match="more than the context"):
        run_audit(other_tokenizer_model, many[:2], many[2:], out_dir=tmp_path, settings=long)


def test_char_aligned_windows_put_straddling_tokens_in_the_suffix(
    random_model, other_tokenizer_model
):
    from memclaim.audits.retokenize import char_aligned_windows as _char_aligned_windows
    from memclaim.text.io import Record
    from memclaim.text.windows import passage_windows

    ws = passage_windows(
        [Record("a", "Bitizi dakotuda beabebesh zou quea raifo shou nu vamai popo mi")],
        random_model.tokenizer,
        prefix_tokens=3,
        suffix_tokens=6,
    )
    aligned, straddles = _char_aligned_windows(ws, other_tokenizer_model)
    w, a = ws.windows[0], aligned.windows[0]
    assert (a.prefix_text, a.suffix_text) == (w.prefix_text, w.suffix_text)
    tok = other_tokenizer_model.tokenizer
    ids, offs = tok.encode_with_offsets(w.prefix_text + w.suffix_text)
    assert list(a.prefix_ids) + list(a.suffix_ids) == ids
    b = len(w.prefix_text)
    assert all(e <= b for s, e in offs[: len(a.prefix_ids)])
    assert straddles == sum(1 for s, e in offs if s < b < e)


def test_read_texts_accepts_sequences_and_refuses_bad_items():
    ts = read_texts(["a b c", {"id": "x", "text": "d e"}, "  "], label="m")
    assert [r.id for r in ts.records] == ["m-0", "x"] and ts.inputs["records"] == 2
    assert ts.inputs["skipped_empty"] == 1  # the blank text is skipped and counted, as in a file
    with pytest.raises(InputError, match="'m' item 0: expected a text, a dict or a Record"):
        read_texts([3], label="m")
    with pytest.raises(InputError, match="duplicate id 'a'"):
        read_texts([{"id": "a", "text": "x"}, {"id": "a", "text": "y"}], label="m")
    # the same reader as memclaim.score's: tables and other field names work too
    import pandas as pd

    tab = read_texts(
        pd.DataFrame({"doc_id": ["p", "q"], "content": ["one two", "three"]}), label="m"
    )
    assert [(r.id, r.text) for r in tab.records] == [("p", "one two"), ("q", "three")]


# ------------------------------------------------------------------------------- shadows
def test_masks_are_complementary_balanced_and_prefix_stable():
    m8 = S.shadow_masks(11, 8, design_seed=3)
    assert m8.shape == (8, 11) and m8.dtype == bool
    assert np.all(m8[0::2] ^ m8[1::2])
    assert np.all(m8.sum(axis=0) == 4)  # every record IN exactly half
    np.testing.assert_array_equal(S.shadow_masks(11, 4, design_seed=3), m8[:4])  # N-independent
    assert not np.array_equal(S.shadow_masks(11, 4, design_seed=4), m8[:4])
    assert set(m8[0::2].sum(axis=1)) == {5}  # floor(11/2) for the first of each pair
    with pytest.raises(DomainError, match="even"):
        S.shadow_masks(10, 5)


def test_population_hash_and_duplicates():
    p = S.population_from_texts(["a", "b"], ["c"], names=("members", "nonmembers"))
    assert (
        p.ids == ("members:members:0", "members:members:1", "nonmembers:nonmembers:0")
        or len(p) == 3
    )
    assert (
        p.sha256 != S.population_from_texts(["b", "a"], ["c"]).sha256
    )  # order is part of the identity
    with pytest.raises(InputError, match="also occurs"):
        S.population_from_texts(["a", "b"], ["a"], names=("members", "nonmembers"))
    with pytest.raises(InputError, match="not in the shadows' population"):
        p.index(["zzz"])


def test_training_blocks_contain_every_record_whole(random_model):
    tok = random_model.tokenizer.tok
    texts = _passages(7, 5, words=9)
    blocks = S.training_blocks(texts, tokenizer=tok, seq_len=16, seed=2, sep_ids=[0])
    assert blocks.shape[1] == 16
    stream = blocks.reshape(-1).tolist()
    for t in texts:
        ids = tok(t, add_special_tokens=False)["input_ids"]
        assert any(stream[i : i + len(ids) + 1] == [0] + ids for i in range(len(stream))), t
    n_tokens = sum(len(tok(t, add_special_tokens=False)["input_ids"]) + 1 for t in texts)
    assert blocks.numel() - n_tokens < 16 + 1  # only the separator filler is added


@pytest.fixture
def tiny_recipe(random_model_dir):
    from memclaim.models.loader import folder_fingerprint

    return S.ShadowRecipe(
        mode="scratch",
        base=str(random_model_dir),
        base_fingerprint=folder_fingerprint(random_model_dir),
        steps=1,
        epochs=None,
        batch_size=2,
        seq_len=16,
        lr=1e-3,
    )


def test_shadows_are_saved_reused_and_resumed(tmp_path, tiny_recipe):
    pop = S.population_from_texts(_passages(6, 9, words=8))
    logs = []
    first = S.ensure_shadows(
        tmp_path, population=pop, n_shadows=4, recipe=tiny_recipe, log=logs.append
    )
    assert first.trained == (0, 1, 2, 3) and first.reused == () and len(logs) == 4
    meta = json.loads((tmp_path / "2" / "membership.json").read_text())
    assert meta["population_sha256"] == pop.sha256 and meta["pair"] == 1 and meta["side"] == 0
    np.testing.assert_array_equal(np.flatnonzero(first.masks[2]), meta["in_indices"])
    for i in range(4):
        assert (tmp_path / str(i) / "config.json").is_file() and (
            tmp_path / str(i) / "tokenizer.json"
        ).is_file()
    again = S.ensure_shadows(tmp_path, population=pop, n_shadows=4, recipe=tiny_recipe)
    assert again.trained == () and again.reused == (0, 1, 2, 3)
    # a killed run: shadow 1 half-written in a temporary folder, never renamed into place
    shutil.rmtree(tmp_path / "1")
    (tmp_path / ".1.tmp-killed").mkdir()
    (tmp_path / ".1.tmp-killed" / "model.safetensors").write_bytes(b"partial")
    (
        tmp_path / "3" / "membership.json"
    ).unlink()  # not a finished shadow: memclaim did not publish it so
    with pytest.raises(
        InputError, match="not a finished memclaim shadow"
    ):  # and never deletes it (issue 12 B7)
        S.ensure_shadows(tmp_path, population=pop, n_shadows=6, recipe=tiny_recipe)
    assert (tmp_path / "3" / "config.json").is_file() and (tmp_path / ".1.tmp-killed").is_dir()
    shutil.rmtree(tmp_path / "3")  # the user moves it away
    resumed = S.ensure_shadows(tmp_path, population=pop, n_shadows=6, recipe=tiny_recipe)
    assert resumed.trained == (1, 3, 4, 5) and resumed.reused == (0, 2)
    assert not list(tmp_path.glob(".1.tmp-*"))
    assert resumed.in_mask(list(pop.texts[:2])).shape == (6, 2)


def test_shadows_of_another_population_or_recipe_are_refused(tmp_path, tiny_recipe):
    from dataclasses import replace

    pop = S.population_from_texts(_passages(6, 9, words=8))
    S.ensure_shadows(tmp_path, population=pop, n_shadows=4, recipe=tiny_recipe)
    other = S.population_from_texts(_passages(6, 10, words=8))
    with pytest.raises(ProcedureMismatchError, match="not to the declared population"):
        S.ensure_shadows(tmp_path, population=other, n_shadows=4, recipe=tiny_recipe)
    # the per-shadow hash is checked too (population file replaced behind our back)
    (tmp_path / "population.jsonl").unlink()
    with pytest.raises(ProcedureMismatchError, match="trained on population"):
        S.ensure_shadows(tmp_path, population=other, n_shadows=4, recipe=tiny_recipe)
    (tmp_path / "population.jsonl").unlink()
    with pytest.raises(ProcedureMismatchError, match="different recipe: steps: 1 != 2"):
        S.ensure_shadows(
            tmp_path, population=pop, n_shadows=4, recipe=replace(tiny_recipe, steps=2)
        )
    with pytest.raises(ProcedureMismatchError, match="different half"):
        S.ensure_shadows(tmp_path, population=pop, n_shadows=4, recipe=tiny_recipe, design_seed=1)


def test_finetune_shadows_start_from_the_base_weights(tmp_path, random_model_dir):
    """mode="finetune" trains a copy of the base checkpoint (a negligible learning rate leaves it
    equal to the base); mode="scratch" re-initializes from the base's config."""
    import torch
    from safetensors.torch import load_file

    from memclaim.models.loader import folder_fingerprint

    fp = folder_fingerprint(random_model_dir)
    pop = S.population_from_texts(_passages(4, 31, words=8))
    kw = dict(
        base=str(random_model_dir),
        base_fingerprint=fp,
        steps=1,
        epochs=None,
        batch_size=1,
        seq_len=16,
        lr=1e-12,
    )
    ft = S.ensure_shadows(
        tmp_path / "ft", population=pop, n_shadows=4, recipe=S.ShadowRecipe(mode="finetune", **kw)
    )
    sc = S.ensure_shadows(
        tmp_path / "sc", population=pop, n_shadows=4, recipe=S.ShadowRecipe(mode="scratch", **kw)
    )
    base = load_file(str(random_model_dir / "model.safetensors"))
    name = next(k for k in base if k.endswith("wte.weight"))
    got_ft = load_file(str(tmp_path / "ft" / "0" / "model.safetensors"))[name]
    got_sc = load_file(str(tmp_path / "sc" / "0" / "model.safetensors"))[name]
    assert torch.allclose(got_ft, base[name], atol=1e-6)
    assert not torch.allclose(got_sc, base[name], atol=1e-3)
    assert (
        json.loads((tmp_path / "ft" / "1" / "membership.json").read_text())["recipe"]["mode"]
        == "finetune"
    )
    assert ft.recipe["mode"] == "finetune" and sc.recipe["mode"] == "scratch"


def test_recipe_validation():
    with pytest.raises(DomainError, match="exactly one of steps or epochs"):
        S.ShadowRecipe(mode="scratch", base="x", base_fingerprint="f", steps=3, epochs=2.0)
    with pytest.raises(DomainError, match="unknown shadow mode"):
        S.ShadowRecipe(mode="distill", base="x", base_fingerprint="f")
    r = S.ShadowRecipe.finetune("x", base_fingerprint="f")
    assert (r.lr, r.batch_size, r.epochs) == (5e-5, 8, 3.0)  # [MX] App. F.2
    assert "base" not in r.identity() and r.shadow_seed(2) == 3


def test_default_shadow_recipes(random_model, random_model_dir):
    from memclaim.audits.run import default_shadow_recipe
    from memclaim.models.loader import folder_fingerprint

    ft, bg = default_shadow_recipe(random_model)
    assert ft.mode == "finetune" and ft.base == str(random_model.path) and bg == ()
    assert ft.base_fingerprint == folder_fingerprint(random_model_dir) and ft.epochs == 3.0
    sc, bg = default_shadow_recipe(random_model, mode="scratch", steps=7)
    assert (
        sc.mode == "scratch" and sc.steps == 7 and sc.lr == 3e-3 and bg == ()
    )  # the toy recipe, no toy corpus


# -------------------------------------------------------------------- counterfactual (COND)
def _synthetic_shadow_logprobs(h, rng):
    """Per-token log-probs whose sum is log h (two tokens each)."""
    return [[np.array([math.log(v) / 2, math.log(v) / 2]) for v in row] for row in h]


def test_counterfactual_hand_example_paired_se():
    mask = S.shadow_masks(3, 4, design_seed=0)  # [4, 3]
    h = np.where(mask, 0.6, 0.2) + np.array(
        [[0.00, 0.01, 0.02], [0.03, 0.0, 0.01], [0.02, 0.02, 0.0], [0.01, 0.03, 0.02]]
    )
    lps = _synthetic_shadow_logprobs(h, None)
    cf = S.counterfactual_from_shadows(lps, mask, groups={"all": [0, 1, 2]})
    assert cf.functional == "COND" and cf.design == "random_halves"
    est = cf.estimate
    for j in range(3):
        hin, hout = h[mask[:, j], j], h[~mask[:, j], j]
        assert est.mem[j] == pytest.approx(hin.mean() - hout.mean(), abs=1e-12)
        d = [
            h[2 * p + (0 if mask[2 * p, j] else 1), j] - h[2 * p + (1 if mask[2 * p, j] else 0), j]
            for p in range(2)
        ]
        assert est.se[j] == pytest.approx(np.std(d, ddof=1) / math.sqrt(2), abs=1e-12)
    assert cf.by_set["all"]["n"] == 3 and cf.by_set["all"]["mean_mem"] == pytest.approx(
        est.mean_mem
    )
    with pytest.raises(InputError, match="complementary pairs"):
        S.counterfactual_from_shadows(lps, np.roll(mask, 1, axis=1) & mask)


def test_counterfactual_cap_rules():
    mask = S.shadow_masks(5, 4, design_seed=1)
    rng = np.random.default_rng(0)
    h = np.clip(0.3 + 0.05 * mask + 0.01 * rng.standard_normal(mask.shape), 1e-6, 1)
    lps = _synthetic_shadow_logprobs(h, rng)
    loo = S.CapSpec(value=0.4, functional="LOO", relation="add/remove")
    cf = S.counterfactual_from_shadows(lps, mask, cap=loo)
    assert cf.cap is None and "COND" in cf.cap_refused and "Prop. A.2" in cf.cap_refused
    slack = S.CapSpec(
        value=0.4,
        functional="LOO",
        relation="add/remove",
        conversion_slack=0.1,
        conversion_note="test slack",
    )
    ok = S.counterfactual_from_shadows(lps, mask, cap=slack)
    assert ok.cap is not None and ok.cap.effective_cap == pytest.approx(0.5) and ok.cap.within
    ll = S.counterfactual_from_shadows(lps, mask, score="logloss")
    assert "truncated" in ll.score and np.all(np.abs(ll.estimate.mem) <= 1)


def test_cap_from_epsilon_names_relation_and_functional():
    c = S.cap_from_epsilon(1.0, relation="add/remove")
    assert (
        c.functional == "LOO"
        and c.value == pytest.approx(math.tanh(0.5))
        and not c.via_group_privacy
    )
    r = S.cap_from_epsilon(1.0, relation="add/remove", functional="RO")
    assert r.via_group_privacy and r.value == pytest.approx(
        1 - math.exp(-1.0)
    )  # eta(f^(2)), [MX] Cor. 4.3
    assert S.cap_from_epsilon(1.0, relation="replace-one").functional == "RO"
    with pytest.raises(DomainError, match="implies no cap"):
        S.cap_from_epsilon(1.0, relation="replace-one", functional="LOO")


@settings(max_examples=10)
@given(seed=st.integers(0, 10_000), effect=st.floats(0.05, 0.3))
def test_paired_interval_covers_the_true_contrast(seed, effect):
    """Coverage of the nominal 95% normal interval mem +- 1.96 SE_paired over 200 independent
    targets, each with 16 complementary pairs whose two models share a pair effect (so unpaired
    Welch misstates the error while the paired SE is exact). Asserted coverage >= 0.88: with 16 pairs the
    normal interval's true coverage is about 0.93 (t with 15 degrees of freedom at 1.96), so a
    false alarm needs a binomial(200, 0.93) count 2.8 standard deviations low: about 0.3% per
    example, under 3% over the 10 derandomized examples. The true contrast is at least 0.05, above
    the interval's half-width (about 0.035 here): an effect of 0 is covered even by an estimator
    that ignores the mask."""
    rng = np.random.default_rng(seed)
    P, T = 16, 200
    mask = S.shadow_masks(T, 2 * P, design_seed=seed)
    pair_effect = np.repeat(
        0.1 * rng.standard_normal((P, T)), 2, axis=0
    )  # [2P, T], shared within a pair
    h = np.clip(
        0.4 + effect * mask + pair_effect + 0.05 * rng.standard_normal((2 * P, T)), 1e-9, 1.0
    )
    true = effect  # clipping is negligible at these levels
    cf = S.counterfactual_from_shadows(_synthetic_shadow_logprobs(h, rng), mask)
    est = cf.estimate
    covered = np.abs(est.mem - true) <= 1.96 * est.se
    assert covered.mean() >= 0.88
    # the Welch SE ignores the shared pair effect: it is the wrong (here too large) one
    assert np.median(cf.welch_se) > np.median(est.se)


# ------------------------------------------------------------------------------ extraction
def test_list_success_matches_the_direct_formula():
    q = np.array([0.5, 0.1, 1e-3, 1.0, 0.0])
    with np.errstate(divide="ignore"):
        lq = np.log(q)
    for m in (1, 2, 7, 1000):
        got = np.exp(X.list_success_logprob(lq, m=m))
        want = 1 - (1 - q) ** m  # obviously correct where q is not tiny
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)
    tiny = X.list_success_logprob(np.array([-800.0]), m=10)  # q = e^-800: 1 - q rounds to 1
    assert tiny[0] == pytest.approx(-800.0 + math.log(10), abs=1e-9)
    with pytest.raises(DomainError, match="m"):
        X.list_success_logprob(lq, m=0)


def test_extraction_from_arrays_counts_and_intervals():
    ex = X.extraction_from_arrays(
        greedy_match=[True, False, True, False],
        near_tie=[False, True, False, False],
        log_q=[0.0, -np.inf, math.log(0.5), math.log(0.25)],
        policy="top-k:40",
        m=2,
    )
    assert (ex.greedy_successes, ex.n, ex.near_ties) == (2, 4, 1)
    assert ex.greedy_low < 0.5 < ex.greedy_high
    assert ex.expected_rate == pytest.approx((1 + 0 + 0.75 + (1 - 0.75**2)) / 4)
    with pytest.raises(InputError, match="policy"):
        X.extraction_from_arrays(greedy_match=[True], log_q=[0.0])
    with pytest.raises(InputError, match="<= 0"):
        X.extraction_from_arrays(greedy_match=[True], log_q=[0.5], policy="full")
    with pytest.raises(InputError, match="at least one record"):
        X.extraction_from_arrays(greedy_match=[])


def test_pair_windows_cut_at_the_character_boundary(random_model):
    tok = random_model.tokenizer
    ws = X.pair_windows(
        [
            {"id": "c0", "prefix": "Bitizi dakotuda", "suffix": " beabebesh zou"},
            ("Rouqua ro", " meapou quea"),
        ],
        tok,
    )
    w = ws.windows[0]
    assert (
        w.source == "c0"
        and w.prefix_text == "Bitizi dakotuda"
        and w.suffix_text == " beabebesh zou"
    )
    assert list(w.prefix_ids) + list(w.suffix_ids) == tok.encode("Bitizi dakotuda beabebesh zou")
    text = "Bitizi dakotuda beabebesh zou"
    ids, offs = tok.encode_with_offsets(text)
    s, e = next((s, e) for s, e in offs if e - s >= 2)  # cut inside a multi-character token
    with pytest.raises(InputError, match="falls inside token"):
        X.pair_windows([{"prefix": text[: s + 1], "suffix": text[s + 1 :]}], tok)
    with pytest.raises(InputError, match="non-empty"):
        X.pair_windows([{"prefix": "a", "suffix": ""}], tok)


def test_trigger_rule_keeps_braces_verbatim(random_model):
    from memclaim.text.windows import Window

    rule = X.trigger_rule("zq {x} }")
    w = Window("a", 0, (1,), (2,), (0, 1), (1, 2), "p", "s", 0)
    assert rule.build(w, random_model.tokenizer, [0]) == [
        tuple([0] + random_model.tokenizer.encode("zq {x} }"))
    ]


def test_soundness_check_uses_the_greedy_counts():
    ex = X.extraction_from_arrays(greedy_match=[True] * 30 + [False] * 10)
    s = X.soundness_check(ex, epsilon=1.0, kappa=1e-6)
    assert s.successes == 30 and s.trials == 40 and s.m == 1 and s.refuted  # 1 - f(1e-6) ~ e * 1e-6
    low_entropy = X.soundness_check(ex, epsilon=1.0, kappa=0.5)
    assert not low_entropy.refuted


# ------------------------------------------------------------------------------- verifier
def test_verifier_threshold_semantics():
    r = V.verify_arrays(greedy_match=[True] + [False] * 9)  # 0.10 < 0.15
    assert (
        r.forgotten
        and r.decisions[0] == "retained"
        and r.retained == 1
        and r.rate == pytest.approx(0.1)
    )
    assert "channel" in r.statement
    edge = V.verify_arrays(
        greedy_match=[True, False], threshold=0.5
    )  # rate == threshold: not forgotten
    assert not edge.forgotten
    s = V.verify_arrays(log_q=[math.log(0.1), math.log(0.01)], policy="top-k:40", m=3)
    np.testing.assert_allclose(s.values, [1 - 0.9**3, 1 - 0.99**3])
    assert s.decisions == ("retained", "forgotten") and s.low is None
    with pytest.raises(DomainError, match="deterministic"):
        V.verify_arrays(greedy_match=[True], m=2)
    with pytest.raises(DomainError, match="threshold"):
        V.verify_arrays(greedy_match=[True], threshold=0.0)
    assert V.DEFAULT_THRESHOLD == 0.15  # [MX] App. F.2


def test_verifier_greedy_flag_equals_generate(random_model):
    """The teacher-forced greedy flag against the slow reference: HF generate() from the prefix
    (the records' suffixes are the model's own greedy continuations for half of them)."""
    import torch

    lm = random_model.lm.model
    tok = random_model.tokenizer
    recs = []
    for j, t in enumerate(_passages(6, 21, words=6)):
        ids = tok.encode(t)[:4]
        out = lm.generate(
            torch.tensor([[0] + ids]), max_new_tokens=5, do_sample=False, pad_token_id=0
        )
        cont = out[0, 5:].tolist()
        if j % 2:
            cont[-1] = (cont[-1] + 1) % lm.config.vocab_size  # break the last token: not extracted
        recs.append({"id": f"r{j}", "prefix_ids": ids, "cont": cont})
    from memclaim.text.windows import Window, WindowSet

    ws = WindowSet(
        tuple(
            Window(r["id"], 0, tuple(r["prefix_ids"]), tuple(r["cont"]), (0, 0), (0, 0), "", "", 0)
            for r in recs
        ),
        len(recs),
        0,
        (),
        {},
    )
    res = V.verify(random_model, ws, threshold=0.15)
    assert [d == "retained" for d in res.decisions] == [j % 2 == 0 for j in range(6)]
    assert res.rate == pytest.approx(0.5) and not res.forgotten


def test_verify_accepts_pairs_and_texts(random_model):
    res = V.verify(random_model, [("Bitizi dakotuda", " beabebesh zou")])
    assert res.n == 1 and res.record_ids == ("rec0#0",)
    with pytest.raises(InputError, match="prefix_tokens and suffix_tokens"):
        V.verify(random_model, ["some text here"])
    with pytest.raises(InputError, match="shorter than"):
        V.verify(random_model, ["short"], prefix_tokens=4, suffix_tokens=8)


# ----------------------------------------------------------------------- disagreement table
def test_table_from_prescored_runs_and_informed_counts(audited, tmp_path):
    out, res = audited
    store = res.store
    spec = {
        "settings": {"prefix_tokens": 4, "suffix_tokens": 8},
        "instances": [
            {
                "name": "random model",
                "members_run": {"store": store, "run": res.scoring["members"]["run_id"]},
                "nonmembers_run": {"store": store, "run": res.scoring["nonmembers"]["run_id"]},
                "informed": {"successes": 7, "trials": 8},
            },
            {
                "name": "guessable",
                "members_run": {"store": store, "run": res.scoring["members"]["run_id"]},
                "nonmembers_run": {"store": store, "run": res.scoring["nonmembers"]["run_id"]},
                "baseline": {"kappa": 0.5},
                "informed": {"successes": 0, "trials": 8, "cap": 0.1},
            },
        ],
    }
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    t = audit_table(tmp_path / "spec.json", out=tmp_path / "table")
    names = [c.name for c in t.table.columns]
    assert names == ["extraction at prefix", "loss-MIA", "unlearning verifier", "informed recovery"]
    assert t.table.cell("random model", "loss-MIA").signal == pytest.approx(
        2 * res.attack("loss").auc.auc - 1
    )
    assert t.table.cell("random model", "informed recovery").verdict == "recovered"
    assert t.table.cell("guessable", "informed recovery").verdict == "capped"
    assert "verifier:" in t.table.cell("random model", "unlearning verifier").note
    for f in ("report.html", "report.json", "table.md", "disagreement.png"):
        assert (tmp_path / "table" / f).is_file()
    # the verdict rules read as paragraphs and list items, not the docstring's broken lines
    html = (tmp_path / "table" / "report.html").read_text(encoding="utf-8")
    rules = html[html.index("Verdict rules</h2>") :]
    assert rules.count("<li>") == 6, rules[:2000]
    assert "the unlearning verifier, optionally with" in rules  # one line where a role was cut out
    assert ":func:" not in rules and "``" not in rules and "\n, " not in rules


def test_table_spec_errors(tmp_path):
    p = tmp_path / "s.json"
    p.write_text("{not json")
    with pytest.raises(InputError, match="not valid JSON"):
        audit_table(p, out=tmp_path / "o")
    with pytest.raises(InputError, match="non-empty list 'instances'"):
        audit_table({"instances": []}, out=tmp_path / "o")
    with pytest.raises(InputError, match="lacks 'members'"):
        audit_table({"instances": [{"name": "a", "model": "toy"}]}, out=tmp_path / "o")
    with pytest.raises(InputError, match="duplicate instance"):
        audit_table(
            {
                "instances": [
                    {
                        "name": "a",
                        "members_run": {"store": str(tmp_path), "run": "x"},
                        "nonmembers_run": {"store": str(tmp_path)},
                    },
                    {"name": "a"},
                ]
            },
            out=tmp_path / "o",
        )


# ------------------------------------------------------------------------------------ CLI
def _cli(capsys, *args):
    rc = cli_main(list(args))
    return rc, capsys.readouterr()


def test_cli_audit_json_and_reuse(random_model_dir, files, tmp_path, capsys):
    args = [
        "audit",
        str(random_model_dir),
        "--members",
        str(files / "members.jsonl"),
        "--controls",
        str(files / "nonmembers.jsonl"),
        "--prefix-tokens",
        "4",
        "--suffix-tokens",
        "8",
        "--out",
        str(tmp_path / "o"),
        "--attacks",
        "loss,zlib",
        "--kappa",
        "0.5",
        "--soundness-epsilon",
        "1",
        "--json",
    ]
    rc, cap = _cli(capsys, *args)
    assert rc == 0, cap.err
    d = json.loads(cap.out)
    assert [a["attack"] for a in d["attacks"]] == ["loss", "zlib"]
    assert (
        d["soundness"]["trials"] == 8 and d["soundness"]["m"] == 1 and not d["soundness"]["refuted"]
    )
    assert (
        "TPR at a certified FPR not reported" in d["tpr_note"] and "99" in d["tpr_note"]
    )  # default 0.01, 8 < 99
    rc, cap = _cli(capsys, *args[:-1])
    assert rc == 0 and "no model work done" in cap.out and "loss" in cap.out


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--alpha", "0.01"], "at least 99 non-members"),
        (["--shadows", "3"], "even number >= 4"),
        (["--cap", "0.2"], "needs --shadows"),
        (["--kappa", "0.1"], "both the baseline kappa and the claimed epsilon"),
        (["--attacks", "reference"], "--reference"),
        (["--k", "1.5"], "k"),
        (["--policy", "top-k:0"], "top-k"),
    ],
)
def test_cli_bad_options_exit_2(random_model_dir, files, tmp_path, capsys, extra, message):
    rc, cap = _cli(
        capsys,
        "audit",
        str(random_model_dir),
        "--members",
        str(files / "members.jsonl"),
        "--controls",
        str(files / "nonmembers.jsonl"),
        "--prefix-tokens",
        "4",
        "--suffix-tokens",
        "8",
        "--out",
        str(tmp_path / "o"),
        *extra,
    )
    assert rc == 2 and "error:" in cap.err and message in cap.err


def test_cli_bad_inputs_exit_2(random_model_dir, files, tmp_path, capsys):
    base = [
        "audit",
        str(random_model_dir),
        "--out",
        str(tmp_path / "o"),
        "--prefix-tokens",
        "4",
        "--suffix-tokens",
        "8",
    ]
    rc, cap = _cli(
        capsys,
        *base,
        "--members",
        str(files / "members.jsonl"),
        "--controls",
        str(files / "one.jsonl"),
    )
    assert rc == 2 and "at least two non-members" in cap.err
    rc, cap = _cli(
        capsys,
        *base,
        "--members",
        str(tmp_path / "missing.jsonl"),
        "--controls",
        str(files / "nonmembers.jsonl"),
    )
    assert rc == 2 and "does not exist" in cap.err
    rc, cap = _cli(
        capsys,
        "audit",
        str(tmp_path / "no-model"),
        "--members",
        "a",
        "--controls",
        "b",
        "--out",
        "o",
    )
    assert rc == 2 and "neither a named model nor an existing path" in cap.err
    rc, cap = _cli(
        capsys,
        "audit",
        "table",
        "--instances",
        str(tmp_path / "none.json"),
        "--out",
        str(tmp_path / "t"),
    )
    assert rc == 2 and "does not exist" in cap.err


def test_cli_help_and_attack_list(capsys):
    rc, cap = _cli(capsys, "audit", "--help")
    assert rc == 0 and "table" in cap.out and "attacks" in cap.out
    rc, cap = _cli(capsys, "audit", "run", "--help")
    assert rc == 0 and "--members" in cap.out and "--shadows" in cap.out
    rc, cap = _cli(capsys, "audit", "table", "--help")
    assert rc == 0 and "members_run" in cap.out
    rc, cap = _cli(capsys, "audit", "attacks", "--json")
    names = [a["name"] for a in json.loads(cap.out)]
    assert {"loss", "zlib", "min-k++", "lira-online"} <= set(names)


# ------------------------------------------------------------------- slow benchmark
@pytest.mark.slow
def test_full_lira_benchmark_with_16_shadows(tmp_path, capsys):
    """The slow benchmark (benchmarks/bench_lira.py, minutes): 16 shadows of the micro model;
    online LiRA's TPR at the certified FPR 4/201 exceeds the loss attack's by the paired
    bootstrap at level 0.05. Kept here, outside the integration module, so `-m integration`
    does not select it."""
    import importlib.util

    path = ROOT / "benchmarks" / "bench_lira.py"
    spec = importlib.util.spec_from_file_location("bench_lira", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--out", str(tmp_path), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    last = d["results"][-1]
    assert last["shadows"] == 16
    v = last["lira_vs_loss"]
    assert v["tpr_lira"] >= v["tpr_loss"] and v["bootstrap_p"] < 0.05
