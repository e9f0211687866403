"""Audits on trained models (integration tier): the built-in tiny GPT with planted duplicated
members, and a micro GPT-2 with members planted once each and a handful of cached shadows for
LiRA. Everything is seeded; the shadows are trained once per test session."""

from __future__ import annotations

import json

import numpy as np
import pytest

from memclaim.audits.metrics import compare_tprs
from memclaim.audits.run import run_audit
from memclaim.audits.settings import AuditSettings
from memclaim.cli.main import main as cli_main

pytestmark = pytest.mark.integration

ALPHA = 0.05  # level of the paired comparison below


# ------------------------------------------------------------------------- the tiny GPT
@pytest.fixture(scope="module")
def toy_sets(toy_data):
    members = [r for r in toy_data["planted"] if r.get("copies") == 16]
    controls = [r for r in toy_data["held_out"] if r["id"].startswith("control-")]
    assert len(members) == 16 and len(controls) == 400
    return members, controls


@pytest.fixture(scope="module")
def toy_reference(toy, tmp_path_factory):
    """A reference model that knows the language but not the members: a 1-layer GPT-2 with the
    toy's tokenizer trained briefly on the toy's background corpus only (same tokenizer, so the
    reference attack also runs per token)."""
    import torch
    from transformers import AutoConfig, GPT2Config, GPT2LMHeadModel

    from memclaim.audits.run import toy_background_texts
    from memclaim.audits.shadows import ShadowRecipe, save_model_folder, train_on_texts
    from memclaim.models import load_model

    root = tmp_path_factory.mktemp("toy-reference")
    tok = toy.tokenizer.tok
    cfg = AutoConfig.from_pretrained(str(toy.path))
    GPT2LMHeadModel(
        GPT2Config(
            vocab_size=cfg.vocab_size,
            n_positions=cfg.n_positions,
            n_embd=64,
            n_layer=1,
            n_head=2,
            bos_token_id=0,
            eos_token_id=0,
        )
    ).save_pretrained(str(root / "base"))
    tok.save_pretrained(str(root / "base"))
    recipe = ShadowRecipe(
        mode="scratch",
        base=str(root / "base"),
        base_fingerprint="-",
        steps=60,
        epochs=None,
        batch_size=16,
        seq_len=128,
        lr=3e-3,
        warmup_steps=10,
    )
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model, _, _ = train_on_texts(
            recipe, toy_background_texts()[:300], seed=0, sep_ids=toy.sot_ids, tokenizer=tok
        )
    finally:
        torch.set_num_threads(threads)
    save_model_folder(model, tok, root / "reference")
    return load_model(str(root / "reference"), sot="bos")


@pytest.fixture(scope="module")
def toy_audit(toy, toy_sets, toy_reference, tmp_path_factory):
    import torch

    out = tmp_path_factory.mktemp("toy-audit")
    members, controls = toy_sets
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small models: threads only add contention on a busy CPU
    try:
        res = run_audit(
            toy,
            members,
            controls,
            out_dir=out,
            settings=AuditSettings(prefix_tokens=32, suffix_tokens=32, fpr="0.01"),
            reference=toy_reference,
        )
    finally:
        torch.set_num_threads(threads)
    return out, res


def test_every_attack_beats_chance_on_planted_members(toy_audit):
    """k = 16 planted members vs 400 held-out controls: every attack that needs no shadows
    separates them with an AUC interval that excludes 1/2 (DeLong, or Hoeffding at complete
    separation), and flags members at the certified FPR 4/401."""
    _, res = toy_audit
    names = {e.attack for e in res.attacks}
    assert names == {"loss", "perplexity", "zlib", "reference", "min-k", "min-k++"}
    for e in res.attacks:
        assert e.auc.low > 0.5, (e.attack, e.auc)
        assert e.tpr.certified_fpr == pytest.approx(4 / 401) and e.tpr.low > e.tpr.certified_fpr, (
            e.attack
        )
    assert res.reference["same_tokenization"] and not res.notes


def test_planted_members_are_extracted_and_controls_are_not(toy_audit):
    _, res = toy_audit
    ex, en = res.extraction, res.extraction_nonmembers
    assert ex.greedy_low > en.greedy_high  # Clopper-Pearson intervals separate
    assert ex.expected_rate > en.expected_rate
    assert not res.verifier.forgotten  # the verifier sees the duplicated members


def test_cli_reuses_the_library_run(toy_audit, toy_sets, tmp_path, capsys):
    out, lib = toy_audit
    members, controls = toy_sets
    for name, rows in (("m", members), ("c", controls)):
        (tmp_path / f"{name}.jsonl").write_text(
            "\n".join(json.dumps({"id": r["id"], "text": r["text"]}) for r in rows) + "\n"
        )
    rc = cli_main(
        [
            "audit",
            "toy",
            "--members",
            str(tmp_path / "m.jsonl"),
            "--controls",
            str(tmp_path / "c.jsonl"),
            "--out",
            str(out),
            "--attacks",
            "loss,min-k++",
            "--prefix-tokens",
            "32",
            "--suffix-tokens",
            "32",
            "--json",
        ]
    )  # the library run's windows (the default is 50 + 50 since 0.2)
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    d = json.loads(cap.out)
    assert all(
        v["units_scored"] == 0 for v in d["scoring"].values()
    )  # same procedure: no model work
    got = {a["attack"]: a["auc"]["auc"] for a in d["attacks"]}
    assert got == {"loss": lib.attack("loss").auc.auc, "min-k++": lib.attack("min-k++").auc.auc}


def test_trigger_extraction_is_a_second_prompt_rule(toy, toy_sets, toy_audit):
    """A trigger that is not in the training data extracts nothing, while the own-prefix
    audit extracts the duplicated members (the trigger runs are separate store entries)."""
    out, _ = toy_audit
    members, controls = toy_sets
    res = run_audit(
        toy,
        members,
        controls[:20],
        out_dir=out,
        settings=AuditSettings(
            prefix_tokens=32, suffix_tokens=32, trigger="zzq {not a template} ", attacks=("loss",)
        ),
    )
    assert (
        res.trigger_extraction.prompt == "trigger" and res.trigger_extraction.greedy_successes == 0
    )
    assert res.extraction.greedy_successes > 0
    assert res.scoring["members"]["units_scored"] == 0 and "trigger:members" in res.scoring


# ------------------------------------------------------------------------- micro LiRA
N_SHADOWS = 6
FPR = "0.02"


@pytest.fixture(scope="session")
def micro(tmp_path_factory):
    """The micro set-up (400 records, half members planted once) and its 6 shadows: trained once
    per session and reused by every test below."""
    import torch

    from memclaim.audits.micro_lira import build_micro_lira

    root = tmp_path_factory.mktemp("micro-lira")
    threads = torch.get_num_threads()
    torch.set_num_threads(
        1
    )  # a 1-layer model gains nothing from threads and loses a lot on a busy CPU
    try:
        ms = build_micro_lira(root / "setup")
        out = root / "audit"
        res = _micro_audit(ms, out)
    finally:
        torch.set_num_threads(threads)
    return ms, out, res


def _micro_audit(ms, out, **kw):
    return run_audit(
        ms.target,
        ms.members,
        ms.nonmembers,
        out_dir=out,
        sot="bos",
        shadows=N_SHADOWS,
        shadow_recipe=ms.recipe,
        settings=AuditSettings(prefix_tokens=1, suffix_tokens=12, fpr=FPR, extraction_policy=None),
        **kw,
    )


def test_lira_beats_the_loss_attack_at_a_low_certified_fpr(micro):
    """Members planted once, of varied difficulty (short cycles, Markov text, word salad): the
    loss attack confuses easy non-members with members; online LiRA calibrates each text against
    IN/OUT shadows. Paired comparison at the certified FPR 4/201 on the same 200 members and 200
    non-members: the paired bootstrap (thresholds re-drawn in every replicate, the p-value the
    library's author recommends) rejects H0: TPR_LiRA <= TPR_loss at level ALPHA = 0.05."""
    _, _, res = micro
    on, loss = res.attack("lira-online"), res.attack("loss")
    c = compare_tprs(
        on.member_scores,
        on.nonmember_scores,
        loss.member_scores,
        loss.nonmember_scores,
        fpr=FPR,
        alternative="greater",
        n_bootstrap=2000,
        seed=0,
    )
    assert c.tpr_a.certified_fpr == pytest.approx(4 / 201)
    assert c.tpr_a.tpr >= c.tpr_b.tpr
    print(
        f"micro LiRA ({N_SHADOWS} shadows): TPR {c.tpr_a.tpr:.3f} [{c.tpr_a.low:.3f}, {c.tpr_a.high:.3f}] vs loss "
        f"{c.tpr_b.tpr:.3f} [{c.tpr_b.low:.3f}, {c.tpr_b.high:.3f}] at FPR {c.tpr_a.certified_fpr:.4f}; "
        f"bootstrap p = {c.bootstrap_p:.4f}, McNemar p = {c.p_value:.2e}; AUC {on.auc.auc:.3f} vs {loss.auc.auc:.3f}"
    )
    assert c.bootstrap_p < ALPHA, (c.tpr_a.tpr, c.tpr_b.tpr, c.bootstrap_p)
    for name in ("lira-online", "lira-offline"):
        assert res.attack(name).auc.low > 0.5


def test_counterfactual_memorization_from_the_shadows(micro):
    """Each record is IN half the shadows: training on it lowers its truncated log-loss, so the
    COND estimate of mem_h for h = log-loss / M is negative with an interval excluding 0."""
    _, _, res = micro
    by = {cf.score.split(" ")[0]: cf for cf in res.counterfactual}
    ll = next(cf for cf in res.counterfactual if "log-loss" in cf.score)
    assert ll.functional == "COND" and ll.estimate.n_targets == 400
    assert ll.estimate.high < 0
    assert "teacher-forcing" in by or any(
        "teacher-forcing" in cf.score for cf in res.counterfactual
    )
    assert set(ll.by_set) == {"members", "non-members"}


def test_shadows_and_scores_are_reused_on_rerun(micro, capsys):
    ms, out, first = micro
    again = _micro_audit(ms, out)
    assert again.shadows.trained == () and again.shadows.reused == tuple(range(N_SHADOWS))
    assert all(v["units_scored"] == 0 for v in again.scoring.values())
    assert again.attack("lira-online").auc.auc == first.attack("lira-online").auc.auc
    # the CLI with the same recipe reuses them too
    r = ms.recipe
    rc = cli_main(
        [
            "audit",
            ms.target,
            "--members",
            ms.members,
            "--controls",
            ms.nonmembers,
            "--out",
            str(out),
            "--sot",
            "bos",
            "--prefix-tokens",
            "1",
            "--suffix-tokens",
            "12",
            "--policy",
            "none",
            "--alpha",
            FPR,
            "--shadows",
            str(N_SHADOWS),
            "--shadow-mode",
            "scratch",
            "--shadow-base",
            r.base,
            "--shadow-steps",
            str(r.steps),
            "--shadow-lr",
            str(r.lr),
            "--shadow-batch-size",
            str(r.batch_size),
            "--shadow-seq-len",
            str(r.seq_len),
            "--shadow-warmup",
            str(r.warmup_steps),
            "--shadow-seed",
            str(r.seed),
            "--attacks",
            "lira-online",
            "--cap-epsilon",
            "1",
            "--json",
        ]
    )
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    d = json.loads(cap.out)
    assert (
        d["shadows"]["trained"] == []
        and d["attacks"][0]["auc"]["auc"] == first.attack("lira-online").auc.auc
    )
    # random halves estimate COND; the add/remove cap tanh(1/2) bounds LOO: refused without a slack
    for cf in d["counterfactual"]:
        assert (
            cf["cap"] is None
            and "COND" in cf["cap_refused"]
            and cf["cap_spec"]["functional"] == "LOO"
        )


# ------------------------------------------------------------------ demo section and table
def test_demo_section_summarizes_the_toy_audit(toy, toy_sets, toy_audit):
    from memclaim.api._demo import demo_audits

    out, lib = toy_audit
    members, controls = toy_sets
    said = []
    summary = demo_audits(
        model=toy, members=members, nonmembers=controls, out_dir=out, log=said.append
    )
    assert set(summary["attacks"]) == {"loss", "perplexity", "zlib", "min-k", "min-k++"}
    assert (
        summary["attacks"]["loss"]["auc"] == lib.attack("loss").auc.auc
    )  # same store, same numbers
    assert all(
        a["excludes_chance"] and a["tpr"]["certified_fpr"] == pytest.approx(20 / 401)
        for a in summary["attacks"].values()
    )
    assert summary["verifier"]["verdict"] == "not forgotten"
    assert summary["report"]["html"].endswith("report.html") and said
    json.dumps(summary)  # JSON-ready


def test_disagreement_table_with_a_model_instance(toy, toy_sets, tmp_path):
    """One row audited from files (model + members + non-members), with an exact prior baseline
    that the greedy extraction rate clearly exceeds (leak) and ground-truth counts."""
    from memclaim.api import audit_table

    members, controls = toy_sets
    for name, rows in (("m", members), ("c", controls[:60])):
        (tmp_path / f"{name}.jsonl").write_text(
            "\n".join(json.dumps({"id": r["id"], "text": r["text"]}) for r in rows) + "\n"
        )
    spec = {
        "settings": {
            "prefix_tokens": 32,
            "suffix_tokens": 32,
        },  # toy texts: 71-82 tokens (default 50 + 50)
        "instances": [
            {
                "name": "toy k=16",
                "model": "toy",
                "members": "m.jsonl",
                "nonmembers": "c.jsonl",
                "verifier_model": "toy",
                "baseline": {"kappa": 0.01},
                "informed": {"successes": 16, "trials": 16},
            }
        ],
    }
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    res = audit_table(tmp_path / "spec.json", out=tmp_path / "table")
    t = res.table
    assert [c.name for c in t.columns] == [
        "extraction at prefix",
        "loss-MIA",
        "unlearning verifier",
        "informed recovery",
    ]
    assert t.cell("toy k=16", "loss-MIA").verdict == "leak"
    assert t.cell("toy k=16", "extraction at prefix").verdict == "leak"
    ver = t.cell("toy k=16", "unlearning verifier")
    assert (
        ver.signal == t.cell("toy k=16", "extraction at prefix").signal
        and "not forgotten" in ver.note
    )
    assert t.cell("toy k=16", "informed recovery").verdict == "recovered"
    assert (tmp_path / "table" / "disagreement.png").stat().st_size > 0


def test_toy_background_is_the_toy_training_corpus(toy, toy_data):
    """The regenerated background passages are disjoint from the planted and held-out records, and
    the toy model predicts them far better than fresh draws from the same generator would be if it
    had never seen them (mean token log-prob above that of the held-out controls)."""
    from memclaim.audits.run import toy_background_texts
    from memclaim.audits.verifier import score_windows
    from memclaim.decoding import Policy
    from memclaim.text.io import Record
    from memclaim.text.windows import passage_windows
    from memclaim.train.toy import DEFAULT_SPEC

    bg = toy_background_texts()
    assert len(bg) == DEFAULT_SPEC.n_background and len(set(bg)) == len(bg)
    records = {r["text"] for r in toy_data["planted"]} | {r["text"] for r in toy_data["held_out"]}
    assert not set(bg) & records

    def mean_lp(texts):
        ws = passage_windows(
            [Record(str(i), t) for i, t in enumerate(texts)],
            toy.tokenizer,
            prefix_tokens=8,
            suffix_tokens=32,
        )
        out = score_windows(toy, ws, policies=[Policy.parse("full")])
        return float(np.mean([a.mean() for a in out["token_logprob"]]))

    assert mean_lp(bg[:40]) > mean_lp([r["text"] for r in toy_data["held_out"][:40]])
