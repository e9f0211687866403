"""Prompt rules and their targets (issue 12 A2): under a template the target is the suffix text
tokenized where it stands after the rendered prompt; natural-prefix procedures keep their keys;
records may give prefix and suffix explicitly. Unit tier: the random tiny GPT-2 (a byte-level BPE
tokenizer), with a copy of SmolLM2-Instruct's chat template for the chat path."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from memclaim.cli.main import main
from memclaim.decoding import parse_policies
from memclaim.errors import InputError
from memclaim.models.loader import StartOfText
from memclaim.procedure import Procedure, WindowSpec
from memclaim.scoring.prompts import PromptRule
from memclaim.scoring.results import load_run_scores
from memclaim.scoring.runner import build_procedure, run_scoring
from memclaim.text.io import Record, read_passages
from memclaim.text.windows import Window, passage_windows

# SmolLM2-135M-Instruct's chat template, verbatim (tokenizer_config.json of the converted model)
SMOL_CHAT = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
    "<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
    "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}"
    "{% endif %}"
)

TEXT = "Quora mimi sha tova. Lenka pu ri dasho, and the mill turned twice! Zeal words and the end of it all."


def _window(tok, text=TEXT, P=None, S=8):
    """A window of ``text``; by default its suffix starts at a token that begins with a space."""
    if P is None:
        ids, offs = tok.encode_with_offsets(text)
        P = next(
            i
            for i in range(4, len(ids))
            if text[offs[i][0]] == " " and text[offs[i][0] + 1].isalpha()
        )
    return passage_windows([Record("r", text)], tok, prefix_tokens=P, suffix_tokens=S).windows[0]


@pytest.fixture(scope="module")
def chat_tok(random_model_dir):
    """The random model's tokenizer with SmolLM2's chat template and its two special tokens."""
    from transformers import AutoTokenizer

    from memclaim.models.loader import HFTokenizer

    t = AutoTokenizer.from_pretrained(str(random_model_dir), local_files_only=True)
    t.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    t.chat_template = SMOL_CHAT
    return HFTokenizer(t)


# ------------------------------------------------------------------ natural prefix: unchanged
def test_natural_prefix_procedure_keys_are_unchanged():
    """Stores in the wild are keyed by natural-prefix procedures: their keys must not change.
    The expected keys were computed with the code before issue 12 A2 (commit 72bd0be)."""
    model = {"name": "toy", "source": "toy", "fingerprint": "f" * 64, "dtype": "float32"}
    sot = {"rule": "bos", "ids": [1], "tokens": ["<bos>"]}
    p = Procedure(
        model=model,
        start_of_text=sot,
        policies=("top-k:40", "greedy"),
        windows=WindowSpec(prefix_tokens=50, suffix_tokens=50),
        prompt=PromptRule(),
        memclaim_version="0.1.0",
    )
    assert p.key == "9ada2ad9929abe0854d5669a4fe8e43bf7c4bc640e4035b5fde74e3b22a1ebdc"
    p2 = Procedure(
        model=model,
        start_of_text=sot,
        policies=("full",),
        windows=WindowSpec(prefix_tokens=32, suffix_tokens=16),
        prompt=PromptRule(aggregate="mean"),
        near_verbatim={"epsilons": [1, 2], "beams": [16]},
        memclaim_version="0.1.0",
    )
    assert p2.key == "8bfa45e6c2b2a55cdd3f0ecdf775ebf7f3168cee4686590354685797762ba9cd"
    # through the runner's own builder, windows cut by token counts (WindowSet.cut is None)
    m = SimpleNamespace(
        name="smollm2",
        source="smollm2",
        fingerprint="0123456789abcdef" * 4,
        dtype="float32",
        sot=StartOfText("<|endoftext|>", (0,), ("<|endoftext|>",)),
    )
    p3 = build_procedure(
        m,
        policies=parse_policies(["top-k:40", "greedy"]),
        prefix_tokens=50,
        suffix_tokens=50,
        prompt_rule=PromptRule(),
        windows=None,
    )
    p3 = Procedure.from_dict(dict(p3.to_dict(), memclaim_version="0.1.0"))
    assert p3.key == "3bea811de0db7c8c456637fe3d2702aacb94d78b9730e1000e2e31f232ce861c"
    assert PromptRule().to_dict() == {
        "kind": "natural-prefix",
        "templates": [],
        "chat": False,
        "aggregate": None,
    }


def test_natural_prefix_items_are_the_document_tokens(random_model):
    tok = random_model.tokenizer
    w = _window(tok)
    assert PromptRule().items(w, tok, [7]) == [((7,) + w.prefix_ids, w.suffix_ids)]


# ------------------------------------------------------------------ templates
def test_template_target_is_the_suffix_text_tokenized_after_the_prompt(random_model):
    """Before issue 12 A2 the target was the document's suffix ids, whose first token carries the
    space before the suffix; after 'Repeat after me: ...\\n' the model's answer starts fresh."""
    tok = random_model.tokenizer
    w = _window(tok)
    assert w.suffix_text.startswith(" ")
    ((prompt, target),) = PromptRule(templates=("Repeat after me: {suffix}\n",)).items(w, tok, [5])
    head = "Repeat after me: " + w.suffix_text.lstrip() + "\n"
    joint = tok.encode(head + w.suffix_text.lstrip())
    assert prompt == (5,) + tuple(tok.encode(head))  # the rendered prompt as generate() gets it
    assert target == tuple(joint[len(tok.encode(head)) :])
    assert tok.decode(target) == w.suffix_text.lstrip()  # no leading space in the target
    assert target != w.suffix_ids and tok.decode(w.suffix_ids) == w.suffix_text


def test_target_keeps_its_space_after_a_prompt_that_ends_mid_line(random_model):
    """'{prefix}' continues the text: the model would emit the suffix with its leading space, so
    the target is the document's own suffix tokens (what the natural prefix scores)."""
    tok = random_model.tokenizer
    w = _window(tok)
    ((prompt, target),) = PromptRule(templates=("{prefix}",)).items(w, tok, [])
    assert target == w.suffix_ids and prompt == tuple(tok.encode(w.prefix_text))


def test_a_token_across_the_cut_is_refused_with_the_window_and_the_token(random_model):
    """A template that ends in a space: the target's first token ' mill...' would hold that space
    (it straddles the prompt/target boundary): refused, naming the window and the token."""
    tok = random_model.tokenizer
    w = _window(tok, text="Lenka pu ri dasho and the mill turned twice and again", S=4)
    with pytest.raises(InputError) as e:
        PromptRule(templates=("Say it: ",)).items(w, tok, [])
    msg = str(e.value)
    assert (
        "window 'r#0'" in msg
        and "falls inside token" in msg
        and "Say it: " in msg
        and "fix:" in msg
    )


def test_document_target_rule_keeps_the_old_behaviour_for_triggers(random_model):
    tok = random_model.tokenizer
    w = _window(tok)
    from memclaim.audits.extraction import trigger_rule

    rule = trigger_rule("zq {x} }")
    assert rule.target == "document" and rule.to_dict()["target"]["rule"] == "document"
    assert rule.items(w, tok, [0]) == [(tuple([0] + tok.encode("zq {x} }")), w.suffix_ids)]


def test_chat_target_starts_the_assistant_reply(chat_tok):
    """Chat template: the user turn holds the rendered template, the assistant turn is opened and
    the target is the start of the reply, tokenized in the rendered conversation."""
    w = _window(chat_tok)
    rendered = chat_tok.render_chat("Repeat after me: " + w.suffix_text.lstrip())
    assert (
        rendered.endswith("<|im_start|>assistant\n")
        and "You are a helpful AI assistant" in rendered
    )
    ((prompt, target),) = PromptRule(templates=("Repeat after me: {suffix}",), chat=True).items(
        w, chat_tok, [99]
    )
    assert prompt == tuple(
        chat_tok.apply_chat_template("Repeat after me: " + w.suffix_text.lstrip())
    )
    assert chat_tok.tok.convert_ids_to_tokens([prompt[0]]) == [
        "<|im_start|>"
    ]  # no start-of-text before a chat
    ids, offs = chat_tok.encode_with_offsets(rendered + w.suffix_text.lstrip())
    k = sum(1 for _, e in offs if e <= len(rendered))
    assert target == tuple(ids[k:]) and chat_tok.decode(target) == w.suffix_text.lstrip()
    # the tokenizer's own tokenization of the conversation (transformers apply_chat_template)
    own = chat_tok.tok.apply_chat_template(
        [{"role": "user", "content": "Repeat after me: " + w.suffix_text.lstrip()}],
        add_generation_prompt=True,
        tokenize=True,
    )
    own = own["input_ids"] if hasattr(own, "keys") else own
    assert list(prompt) == list(own)


def test_whitespace_only_suffix_has_no_target(random_model):
    tok = random_model.tokenizer
    w = Window("d", 3, (1,), (2,), (0, 1), (1, 3), "x", "  ", 0)
    with pytest.raises(InputError, match="only whitespace"):
        PromptRule(templates=("{suffix}\n",)).items(w, tok, [])


def test_the_target_rule_is_recorded_and_changes_the_key():
    natural = PromptRule().to_dict()
    tmpl = PromptRule(templates=("Repeat after me: {suffix}\n",)).to_dict()
    assert "target" not in natural and tmpl["target"]["rule"] == "rendered"
    assert "suffix_tokens" in tmpl["target"] and "leading whitespace" in tmpl["target"]["text"]
    with pytest.raises(InputError, match="target rule"):
        PromptRule(templates=("x",), target="somewhere")


# ------------------------------------------------------------------ several templates in a store
def test_several_templates_store_per_prompt_targets(random_model, tmp_path):
    """Each prompt has its own target ids (items are (prompt, target) pairs); the store records
    them per window, aggregates log q over prompts ([EM] Eq. 15) and a single-prompt run's
    suffix-length sweep counts the rendered target tokens, refusing lengths a window lacks."""
    tok = random_model.tokenizer
    texts = [
        TEXT,
        "Lenka pu ri dasho, and the mill turned twice and more. " * 2,
        "Zeal words and the end " * 3,
    ]
    ws = passage_windows(
        [Record(f"r{i}", t) for i, t in enumerate(texts)], tok, prefix_tokens=5, suffix_tokens=6
    )
    rule = PromptRule(templates=("Repeat after me: {suffix}\n", "{prefix}"), aggregate="mean")
    pol = parse_policies(["full"])
    s = run_scoring(
        random_model,
        ws,
        policies=pol,
        prefix_tokens=5,
        suffix_tokens=6,
        prompt_rule=rule,
        out_dir=tmp_path / "s",
    )
    rs = load_run_scores(tmp_path / "s", run=s.run_id)
    tids = rs.table.column("target_ids").to_pylist()
    for w, t in zip(ws.windows, tids):
        assert [tuple(x) for x in t] == [it[1] for it in rule.items(w, tok, random_model.sot_ids)]
        assert t[1] == list(w.suffix_ids)
        assert (t[0] != list(w.suffix_ids)) == w.suffix_text.startswith(
            " "
        )  # the parrot's target lost its space
    assert rs.table.column("target_tokens").to_pylist() == [[len(a), len(b)] for a, b in tids]
    # [EM] Eq. 15 over the two prompts' own (prompt, target) items
    from memclaim.scoring.engine import TeacherForcingEngine

    eng = TeacherForcingEngine(random_model.lm, pol)
    for i, w in enumerate(ws.windows):
        lq = [
            float(eng.score_batch([p], [t]).logq[0, 0])
            for p, t in rule.items(w, tok, random_model.sot_ids)
        ]
        assert rs.logq[i] == pytest.approx(np.logaddexp(*lq) - np.log(2), abs=1e-9)
    with pytest.raises(Exception, match="several prompts"):
        load_run_scores(tmp_path / "s", run=s.run_id, suffix_tokens=2)
    # one prompt: per-token columns hold the rendered target's tokens; the sweep counts them
    one = PromptRule(templates=("Repeat after me: {suffix}\n",))
    s1 = run_scoring(
        random_model,
        ws,
        policies=pol,
        prefix_tokens=5,
        suffix_tokens=6,
        prompt_rule=one,
        out_dir=tmp_path / "s",
    )
    lens = [
        len(t[0])
        for t in load_run_scores(tmp_path / "s", run=s1.run_id)
        .table.column("target_ids")
        .to_pylist()
    ]
    full = load_run_scores(tmp_path / "s", run=s1.run_id)
    swept = load_run_scores(tmp_path / "s", run=s1.run_id, suffix_tokens=min(lens))
    if min(lens) == max(lens):
        np.testing.assert_allclose(swept.logq, full.logq, rtol=0, atol=1e-12)
    with pytest.raises(InputError, match=rf"outside 1\.\.{min(lens)}.*shortest scored target"):
        load_run_scores(tmp_path / "s", run=s1.run_id, suffix_tokens=min(lens) + 1)


# ------------------------------------------------------------------ explicit prefix and suffix fields
PAIRS = [
    {"id": "a", "context": "Lenka pu ri dasho.", "verse": " And the mill turned twice!"},
    {"id": "b", "context": "", "verse": "Zeal words and the end of it all."},
    {"id": "c", "context": "Quora mimi sha tova.\n", "verse": "The mill turned."},
    {"id": "d", "context": "nothing follows", "verse": "   "},
]


def _write_pairs(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "p.jsonl").write_text("\n".join(json.dumps(r) for r in PAIRS) + "\n")
    import csv

    with open(tmp_path / "p.csv", "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=["id", "context", "verse"])
        wr.writeheader()
        wr.writerows(PAIRS)
    pq.write_table(
        pa.table({k: [r[k] for r in PAIRS] for k in ("id", "context", "verse")}),
        tmp_path / "p.parquet",
    )


def test_records_give_prefix_and_suffix_fields(tmp_path):
    _write_pairs(tmp_path)
    for name in ("p.jsonl", "p.csv", "p.parquet"):
        ps = read_passages(tmp_path / name, prefix_field="context", suffix_field="verse")
        assert [(r.id, r.prefix, r.suffix) for r in ps.records] == [
            (r["id"], r["context"], r["verse"]) for r in PAIRS[:3]
        ]
        assert ps.skipped_empty == 1 and ps.skipped_ids == (
            "d",
        )  # a whitespace suffix has no target
        assert all(r.text == r.prefix + r.suffix for r in ps.records)


@pytest.mark.parametrize(
    "kw,fragment",
    [
        ({"prefix_field": "context"}, "go together"),
        ({"prefix_field": "verse", "suffix_field": "verse"}, "same field"),
        (
            {"prefix_field": "context", "suffix_field": "verse", "text_field": "text"},
            "cannot be combined",
        ),
        ({"prefix_field": "ctx", "suffix_field": "verse"}, "has no prefix field 'ctx'"),
    ],
)
def test_bad_field_options(tmp_path, kw, fragment):
    _write_pairs(tmp_path)
    with pytest.raises(InputError, match=fragment):
        read_passages(tmp_path / "p.jsonl", **kw)


def test_bad_field_records(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_text('{"context": "a", "verse": "b"}\n{"verse": "c"}\n')
    with pytest.raises(InputError, match="line 2: record has no 'context' field"):
        read_passages(p, prefix_field="context", suffix_field="verse")
    p.write_text('{"context": 3, "verse": "b"}\n')
    with pytest.raises(InputError, match="field 'context' is a int"):
        read_passages(p, prefix_field="context", suffix_field="verse")
    (tmp_path / "x.txt").write_text("a\n")
    with pytest.raises(InputError, match="no fields"):
        read_passages(tmp_path / "x.txt", prefix_field="context", suffix_field="verse")


def test_field_windows_tokenize_prefix_and_suffix_together(random_model, tmp_path):
    """Natural prefix with explicit fields: prefix text + suffix text tokenized once, cut at the
    boundary by character offsets (the suffix field's own leading space stays in its first token)."""
    tok = random_model.tokenizer
    _write_pairs(tmp_path)
    ps = read_passages(tmp_path / "p.jsonl", prefix_field="context", suffix_field="verse")
    ws = passage_windows(ps.records, tok, prefix_tokens=None, suffix_tokens=None)
    for r, w in zip(ps.records, ws.windows):
        ids, offs = tok.encode_with_offsets(r.text)
        k = sum(1 for _, e in offs if e <= len(r.prefix))
        assert w.prefix_ids == tuple(ids[:k]) and w.suffix_ids == tuple(ids[k:])
        assert w.suffix_text == r.suffix and w.prefix_text == r.prefix and w.token_start == 0
    assert ws.cut == {"prefix": "field", "suffix": "field"}
    cut = passage_windows(ps.records, tok, prefix_tokens=2, suffix_tokens=3)
    assert cut.skipped_ids == ("b",)  # an empty prefix has fewer than 2 tokens
    w = cut.windows[0]
    ids, offs = tok.encode_with_offsets(ps.records[0].text)
    k = sum(1 for _, e in offs if e <= len(ps.records[0].prefix))
    assert (
        w.prefix_ids == tuple(ids[k - 2 : k])
        and w.suffix_ids == tuple(ids[k : k + 3])
        and w.token_start == k - 2
    )
    with pytest.raises(InputError, match="explicit prefix and suffix fields"):
        passage_windows([Record("x", TEXT)], tok, prefix_tokens=None, suffix_tokens=4)
    with pytest.raises(InputError, match="some records"):
        passage_windows([Record("x", TEXT), ps.records[0]], tok, prefix_tokens=2, suffix_tokens=2)


def test_cli_score_with_fields_takes_the_whole_suffix_field(random_model_dir, tmp_path, capsys):
    _write_pairs(tmp_path)
    out = tmp_path / "s"
    rc = main(
        [
            "score",
            str(random_model_dir),
            "--input",
            str(tmp_path / "p.jsonl"),
            "--prefix-field",
            "context",
            "--suffix-field",
            "verse",
            "--prompt-template",
            "Repeat after me: {suffix}\n",
            "--policy",
            "greedy",
            "--out",
            str(out),
            "--json",
            "--no-progress",
        ]
    )
    assert rc == 0, capsys.readouterr().err
    s = json.loads(capsys.readouterr().out)
    rs = load_run_scores(out, run=s["run_id"])
    proc = rs.procedure
    assert proc["prefix_tokens"] is None and proc["suffix_tokens"] is None  # the whole fields
    assert proc["windows"] == {"prefix": "field", "suffix": "field"}
    assert rs.inputs["prefix_field"] == "context" and rs.inputs["suffix_field"] == "verse"
    assert list(rs.suffix_texts) == [r["verse"] for r in PAIRS[:3]]
    from memclaim.models import load_model

    tok = load_model(str(random_model_dir)).tokenizer
    for r, tgt in zip(PAIRS[:3], rs.table.column("target_ids").to_pylist()):
        assert tok.decode(tgt[0]) == r["verse"].lstrip()  # the whole field, leading space removed
    # natural prefix: record 'b' has an empty prefix, and this model adds no start-of-text token
    rc = main(
        [
            "score",
            str(random_model_dir),
            "--input",
            str(tmp_path / "p.jsonl"),
            "--prefix-field",
            "context",
            "--suffix-field",
            "verse",
            "--suffix-tokens",
            "3",
            "--out",
            str(tmp_path / "s3"),
            "--no-progress",
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2 and "window 'b#0' has an empty prompt" in err and not (tmp_path / "s3").exists()
    # --suffix-tokens cuts the field (counted in the fields' own tokenization)
    rc = main(
        [
            "score",
            str(random_model_dir),
            "--input",
            str(tmp_path / "p.jsonl"),
            "--prefix-field",
            "context",
            "--suffix-field",
            "verse",
            "--suffix-tokens",
            "3",
            "--sot",
            "bos",
            "--out",
            str(tmp_path / "s3"),
            "--json",
            "--no-progress",
        ]
    )
    assert rc == 0
    s3 = json.loads(capsys.readouterr().out)
    rs3 = load_run_scores(tmp_path / "s3", run=s3["run_id"])
    assert rs3.procedure["suffix_tokens"] == 3 and all(
        len(t[0]) == 3 for t in rs3.table.column("target_ids").to_pylist()
    )
    # the text-mode procedure has no 'windows' record (older stores keep their keys)
    rc = main(
        [
            "score",
            str(random_model_dir),
            "--input",
            str(tmp_path / "p.jsonl"),
            "--text-field",
            "verse",
            "--prefix-tokens",
            "2",
            "--suffix-tokens",
            "2",
            "--out",
            str(tmp_path / "t"),
            "--json",
            "--no-progress",
        ]
    )
    assert rc == 0
    st = json.loads(capsys.readouterr().out)
    assert "windows" not in load_run_scores(tmp_path / "t", run=st["run_id"]).procedure


@pytest.mark.parametrize(
    "args,fragment",
    [
        (["--prefix-field", "context"], "go together"),
        # 'Say: ' + 'the mill': the token 'Ġth' holds the template's last space and the target's first letters
        (
            ["--prefix-field", "context", "--suffix-field", "verse", "--prompt-template", "Say: "],
            "falls inside token",
        ),
    ],
)
def test_cli_field_errors_exit_2_before_writing(random_model_dir, tmp_path, capsys, args, fragment):
    _write_pairs(tmp_path)
    (tmp_path / "p.jsonl").write_text(
        json.dumps({"id": "q", "context": "Lenka", "verse": " the mill turned"}) + "\n"
    )
    out = tmp_path / "out"
    rc = main(
        ["score", str(random_model_dir), "--input", str(tmp_path / "p.jsonl"), "--out", str(out)]
        + args
    )
    err = capsys.readouterr().err
    assert rc == 2 and fragment in err and "fix:" in err
    assert not (out / "manifest.json").exists() and not (out / "procedures").exists()


def test_cli_fields_refused_with_a_document(random_model_dir, tmp_path, capsys):
    (tmp_path / "doc.txt").write_text(TEXT * 5)
    rc = main(
        [
            "score",
            str(random_model_dir),
            "--document",
            str(tmp_path / "doc.txt"),
            "--stride",
            "4",
            "--prefix-field",
            "a",
            "--suffix-field",
            "b",
            "--out",
            str(tmp_path / "o"),
        ]
    )
    assert rc == 2 and "passage files" in capsys.readouterr().err


def test_near_verbatim_balls_are_centred_on_each_prompts_target(random_model, tmp_path):
    """With a template, each item's near-verbatim ball is centred on its own rendered target ids;
    the runner hands the beam the item's target and the engine's log q of that same target (the
    beam's own check, issue 12 A3, would refuse a log q of another token sequence), and the
    aggregated bound is never below the aggregated verbatim score."""
    tok = random_model.tokenizer
    ws = passage_windows(
        [Record("r0", TEXT), Record("r1", "Lenka pu ri dasho, and the mill turned twice. " * 2)],
        tok,
        prefix_tokens=5,
        suffix_tokens=3,
    )
    rule = PromptRule(templates=("Repeat after me: {suffix}\n", "{prefix}"), aggregate="max")
    s = run_scoring(
        random_model,
        ws,
        policies=parse_policies(["full"]),
        prefix_tokens=5,
        suffix_tokens=3,
        prompt_rule=rule,
        out_dir=tmp_path / "nv",
        near_verbatim={"epsilons": [1], "beams": [4]},
    )
    rs = load_run_scores(tmp_path / "nv", run=s.run_id)
    nv = load_run_scores(tmp_path / "nv", run=s.run_id, near_verbatim=1)
    assert np.all(nv.logq >= rs.logq)
    from memclaim.scoring.nearverbatim import near_verbatim_lower_bound

    w = ws.windows[0]
    (p, t), _ = rule.items(w, tok, random_model.sot_ids)
    own = near_verbatim_lower_bound(random_model.lm, p, t, policy="full", epsilon=1, beam=4)
    assert own.suffix_ids == t and own.log_bound <= nv.logq[0] + 1e-9
