"""The procedure as one typed value (issue 26 item 1): memclaim/procedure.py, one floor below
scoring and claims. Its records and keys are exactly memclaim 0.2.0's (the fixture
procedure_keys_v1.json was written by the code before the change, tests/data/fixtures/
make_procedure_keys.py), it is validated once on construction, it binds to a loaded model, and
the default policy is written in one place."""

from __future__ import annotations

import ast
import dataclasses
import json
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _paths import DATA, SRC
from memclaim.errors import InputError, PolicyError, ProcedureMismatchError
from memclaim.procedure import (
    DEFAULT_POLICY,
    ModelIdentity,
    NearVerbatim,
    Procedure,
    PromptSpec,
    WindowSpec,
)

FIXTURE = DATA / "fixtures" / "procedure_keys_v1.json"


def _model(m: dict, sot: dict):
    return SimpleNamespace(**m, sot=SimpleNamespace(to_dict=lambda: dict(sot)))


def _built(case: dict) -> Procedure:
    """A fixture case built the way a public call builds it now: the flat options, then bind."""
    w, pr = case["windows"], case["prompt"]
    opts = dict(
        policies=case["policies"],
        prefix_tokens=w["prefix_tokens"],
        suffix_tokens=w["suffix_tokens"],
        prompt_templates=pr.get("templates", ()),
        chat_template=pr.get("chat", False),
        aggregate=pr.get("aggregate", "max"),
    )
    if w["cut"] == "fields":
        opts.update(prefix_field="prefix", suffix_field="suffix")
    nv = case["near_verbatim"]
    if nv:
        opts.update(near_verbatim=nv["epsilons"], beams=nv["beams"])
    p = Procedure.options(**opts)
    if pr.get("target"):
        p = dataclasses.replace(p, prompt=dataclasses.replace(p.prompt, target=pr["target"]))
    p = p.bind(_model(case["model"], case["sot"]), device_class=case["device_class"])
    return dataclasses.replace(p, memclaim_version="0.2.0")


ROWS = json.loads(FIXTURE.read_text())


def test_the_fixture_covers_every_part():
    cases = [r["case"] for r in ROWS if r["case"]]
    assert len(cases) >= 100 and len(ROWS) - len(cases) >= 5
    for part, n in (
        ("model", 4),
        ("sot", 2),
        ("policies", 3),
        ("windows", 4),
        ("prompt", 6),
        ("near_verbatim", 3),
        ("device_class", 2),
    ):
        assert len({json.dumps(c[part], sort_keys=True) for c in cases}) == n, part


@pytest.mark.parametrize("i", [i for i, r in enumerate(ROWS) if r["case"]])
def test_built_procedures_have_the_records_and_keys_of_0_2_0(i):
    row = ROWS[i]
    p = _built(row["case"])
    assert p.to_dict() == row["record"]
    assert p.keyed_dict() == row["keyed"]
    assert p.key == row["key"]


@pytest.mark.parametrize("i", range(len(ROWS)))
def test_recorded_procedures_read_back_with_their_keys(i):
    """Every record (built ones, the store_v1 fixture's, one without a device class, one with
    fingerprint_v1, one without verify/score, a claim's with policy/policies_scored) reads back
    to the record 0.2.0 read and the same key."""
    row = ROWS[i]
    q = Procedure.from_dict(row["record"])
    assert q.to_dict() == row.get("from_dict", row["record"])
    assert q.keyed_dict() == row["keyed"]
    assert q.key == row["key"]
    assert Procedure.from_dict(q.to_dict()) == q


# ------------------------------------------------------------------ validated on construction
@pytest.mark.parametrize(
    "opts, match",
    [
        (dict(policies=[]), "names no decoding policy"),
        (dict(policies="bogus"), "unknown decoding policy"),
        (dict(policies=[3]), "a decoding policy is a string"),
        (dict(prefix_tokens=-1), "--prefix-tokens must be >= 0"),
        (dict(suffix_tokens=0), "--suffix-tokens must be >= 1"),
        (dict(stride=0), "stride must be >= 1"),
        (dict(prompt_templates=["{bad}"]), "unknown fields"),
        (dict(aggregate="median"), "unknown prompt aggregate"),
        (dict(near_verbatim=[-1]), "near-verbatim epsilon"),
        (dict(near_verbatim="12"), "got the string '12'"),
        (dict(beams=[4]), "--beam applies to --near-verbatim"),
        (dict(near_verbatim=[1], beams=[0]), "beam width must be >= 1"),
        (dict(sot=""), "--sot must be a start-of-text rule"),
        (dict(prefix_field=""), "--prefix-field must name a field"),
    ],
)
def test_bad_options_are_refused_with_a_fix(opts, match):
    with pytest.raises((InputError, PolicyError, ValueError), match=match) as e:
        Procedure.options(**opts)
    assert "fix:" in str(e.value)


def test_an_unknown_option_names_the_closest_field():
    with pytest.raises(InputError, match=r"unknown procedure option prefix_token=8") as e:
        Procedure.options(prefix_token=8)
    assert "did you mean prefix_tokens?" in str(e.value)


def test_defaults_live_in_the_value():
    p = Procedure.options()
    assert (
        p.policies == (DEFAULT_POLICY,)
        and p.windows.lengths == (50, 50)
        and p.near_verbatim is None
    )
    assert p.prompt == PromptSpec() and p.prompt.kind == "natural-prefix" and not p.bound
    fields = Procedure.options(prefix_field="context", suffix_field="verse")
    assert fields.windows.lengths == (None, None) and fields.windows.cut() == {
        "prefix": "field",
        "suffix": "field",
    }
    # a token procedure given fields takes the whole fields unless lengths are given with them
    assert Procedure.options(prefix_tokens=8).with_options(
        prefix_field="c", suffix_field="v"
    ).windows.lengths == (None, None)
    assert Procedure.options().with_options(
        prefix_field="c", suffix_field="v", suffix_tokens=4
    ).windows.lengths == (None, 4)
    assert Procedure.options(chat_template=True).prompt.templates == ("{prefix}",)
    assert Procedure.options(near_verbatim=[2, 1, 1]).near_verbatim == NearVerbatim((1, 2), (16,))


def test_coerce_takes_a_value_a_dict_of_options_or_a_record():
    p = Procedure.options(policies=["full"], prefix_tokens=8, suffix_tokens=8)
    assert Procedure.coerce(p) is p
    assert Procedure.coerce({"policies": ["full"], "prefix_tokens": 8, "suffix_tokens": 8}) == p
    assert Procedure.coerce(p, policies="greedy").policies == ("greedy",)
    rec = ROWS[0]["record"]
    assert Procedure.coerce(rec).key == ROWS[0]["key"]
    with pytest.raises(InputError, match="procedure= takes a memclaim Procedure"):
        Procedure.coerce(["full"])


def test_an_unbound_procedure_has_no_record():
    with pytest.raises(InputError, match="an unbound procedure has no record"):
        Procedure.options().to_dict()


def test_bind_records_the_model_and_refuses_another():
    m = _model(
        dict(
            name="toy", source="toy", fingerprint="ab" * 32, dtype="float32", fingerprint_scheme=2
        ),
        dict(rule="auto", ids=[0], tokens=["<|endoftext|>"]),
    )
    p = Procedure.options(policies="full").bind(m)
    assert (
        p.model == ModelIdentity("toy", "toy", "ab" * 32, "float32", "cpu", 2) and p.sot == "auto"
    )
    assert p.bind(m) == p  # the same model again
    other = _model(
        dict(
            name="toy", source="toy", fingerprint="cd" * 32, dtype="float32", fingerprint_scheme=2
        ),
        dict(rule="auto", ids=[0], tokens=["<|endoftext|>"]),
    )
    with pytest.raises(ProcedureMismatchError, match="recorded for another model") as e:
        p.bind(other)
    assert "model.fingerprint" in str(e.value) and "fix:" in str(e.value)
    assert (
        p.bind(m, device_class="cuda").key != p.key
    )  # the device class enters the key off the CPU


def test_a_backend_identity_enters_the_key_only_where_a_backend_adds_it():
    """Issue 27: a served model's id and version belong in the key of its scores; local and Ray
    procedures (no backend identity) keep their keys and records."""
    rec = ROWS[0]["record"]
    p = Procedure.from_dict(rec)
    assert "backend" not in p.to_dict() and p.key == ROWS[0]["key"]
    served = dataclasses.replace(
        p, backend={"kind": "openai", "model_id": "smollm2", "version": "0.32.0"}
    )
    assert served.to_dict()["backend"]["model_id"] == "smollm2"
    assert served.key != p.key
    assert Procedure.from_dict(served.to_dict()).key == served.key
    other = dataclasses.replace(
        p, backend={"kind": "openai", "model_id": "smollm2", "version": "0.33.0"}
    )
    assert other.key != served.key


def test_a_windows_record_that_contradicts_its_lengths_is_refused():
    rec = json.loads(json.dumps(ROWS[0]["record"]))
    rec["windows"] = {"prefix": "field", "suffix": "field"}  # but the lengths are 50 + 50
    with pytest.raises(ProcedureMismatchError, match="do not match its lengths"):
        Procedure.from_dict(rec)


# ------------------------------------------------------------------ round trips
_specs = st.sampled_from(
    ["full", "greedy", "top-k:40", "top-p:0.9", "temperature:0.7", "top-k:5,temperature:2"]
)


@settings(max_examples=60, deadline=None)
@given(
    pols=st.lists(_specs, min_size=1, max_size=4),
    p=st.integers(0, 64),
    s=st.integers(1, 64),
    fields=st.booleans(),
    templ=st.sampled_from([(), ("Q: {prefix}",), ("{prefix}", "A: {suffix}\n")]),
    chat=st.booleans(),
    agg=st.sampled_from(["max", "mean"]),
    eps=st.lists(st.integers(0, 3), max_size=3),
    dc=st.sampled_from(["cpu", "cuda"]),
    dtype=st.sampled_from(["float32", "bfloat16"]),
)
def test_every_procedure_reads_back_to_itself(pols, p, s, fields, templ, chat, agg, eps, dc, dtype):
    """A record written by this version reads back to the same value and key (no store key can
    drift between writing and reading)."""
    opts = dict(
        policies=pols,
        prefix_tokens=p,
        suffix_tokens=s,
        prompt_templates=templ,
        chat_template=chat,
        aggregate=agg,
        near_verbatim=eps,
    )
    if fields:
        opts.update(prefix_field="a", suffix_field="b")
    m = _model(
        dict(name="m", source="m", fingerprint="ef" * 32, dtype=dtype, fingerprint_scheme=2),
        dict(rule="none", ids=[], tokens=[]),
    )
    q = Procedure.options(**opts).bind(m, device_class=dc)
    back = Procedure.from_dict(json.loads(json.dumps(q.to_dict())))
    assert back.to_dict() == q.to_dict() and back.key == q.key


# ------------------------------------------------------------------ the default policy in one place
def _string_constants(tree: ast.AST):
    """(node, parent) for every string constant that is not a docstring."""
    docstrings = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        ):
            docstrings.add(id(node.body[0].value))
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            if (
                isinstance(child, ast.Constant)
                and isinstance(child.value, str)
                and id(child) not in docstrings
            ):
                yield child, node


def test_the_default_policy_is_written_once():
    """Issue 26: "top-k:40" was written in 8 places. Now the literal appears in src/ once, as
    ``DEFAULT_POLICY = "top-k:40"`` in memclaim/procedure.py; every default, example policy list
    and paper setting names the constant (docstrings and help texts may mention it)."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for const, parent in _string_constants(tree):
            if const.value == DEFAULT_POLICY:
                found.append((path.relative_to(SRC).as_posix(), const.lineno, parent))
    assert len(found) == 1, [f[:2] for f in found]
    path, _, parent = found[0]
    assert (
        path == "procedure.py"
        and isinstance(parent, ast.Assign)
        and parent.targets[0].id == "DEFAULT_POLICY"
    )


# ------------------------------------------------------------------ windows carry their spec
def test_a_run_cannot_record_lengths_its_windows_were_not_cut_with(tmp_path):
    """Issue 26: prefix tokens went down into the windows and back up into the procedure with
    nothing checking that they agree; a window set now carries its WindowSpec and run_scoring
    refuses other lengths before the store is touched."""
    from memclaim.decoding import parse_policies
    from memclaim.scoring.prompts import PromptRule
    from memclaim.scoring.runner import run_scoring
    from memclaim.text.windows import WindowSet

    ws = WindowSet((), 0, 0, (), {}, WindowSpec(prefix_tokens=16, suffix_tokens=16))
    assert ws.cut is None and ws.spec.lengths == (16, 16)
    with pytest.raises(
        InputError, match="windows were cut with 16 \\+ 16 tokens.*prefix_tokens=8"
    ) as e:
        run_scoring(
            None,
            ws,
            policies=parse_policies(["full"]),
            prefix_tokens=8,
            suffix_tokens=16,
            prompt_rule=PromptRule(),
            out_dir=tmp_path / "store",
        )
    with pytest.raises(
        InputError, match="windows were cut with 16 \\+ 16 tokens.*prefix_tokens=50"
    ):
        run_scoring(None, ws, Procedure(policies="full"), out_dir=tmp_path / "store")
    assert "fix:" in str(e.value) and not (tmp_path / "store").exists()
    fields = WindowSet((), 0, 0, (), {}, WindowSpec(prefix_field="p", suffix_field="s"))
    assert fields.cut == {"prefix": "field", "suffix": "field"}
