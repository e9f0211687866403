"""Issue 29: the ACR procedure (memclaim.scoring.acr): the length search as the release runs it,
the durable per-target store (resumable after kill -9, a target never searched twice, two
processes on one store), and the leakage flag. Unit tier on a random tiny GPT-2 (tests/acr_models.py).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _paths import TESTS
from acr_models import tiny_gpt
from memclaim.errors import InputError
from memclaim.scoring.acr import (
    ACRStore,
    LengthSearch,
    TargetResult,
    acr_procedure,
    length_search,
    procedure_key,
    search_sides,
    search_target,
    shared_words,
)
from memclaim.scoring.gcg import GCGSettings, PromptSearchModel


# --------------------------------------------------------------------------- the length search
def test_length_search_follows_the_released_miniprompt():
    """The ACR release (prompt_optimization/miniprompt.py as [EM] ran it): start at 5, -1 after a
    success, +5 and 1.2x steps after a failure, never past |y| - 1, never a settled length again."""
    assert length_search(30, LengthSearch(), 100, lambda n, s: n >= 13) == [
        (5, 100, False),
        (10, 120, False),
        (15, 144, True),
        (14, 144, True),
        (13, 144, True),
        (12, 144, False),
    ]
    assert length_search(3, LengthSearch(), 100, lambda n, s: True) == [
        (2, 100, True),
        (1, 100, True),
    ]
    assert (
        length_search(30, LengthSearch(max_prompt_tokens=30), 100, lambda n, s: False)[-1][0] == 30
    )
    assert (
        length_search(1, LengthSearch(), 100, lambda n, s: True) == []
    )  # |y| = 1: no shorter prompt


@settings(max_examples=200, deadline=None)
@given(
    T=st.integers(2, 60), n0=st.integers(1, 70), start=st.integers(1, 12), grow=st.integers(1, 8)
)
def test_length_search_finds_the_shortest_length_of_a_monotone_search(T, n0, start, grow):
    """When success is monotone in the length (success iff n >= n0), the search finds n0 exactly
    if n0 <= |y| - 1 and reports no success otherwise; it never tries a length twice nor past the
    cap. (Deterministic: no false alarm.)"""
    tried = length_search(T, LengthSearch(start=start, grow=grow), 10, lambda n, s: n >= n0)
    ns = [n for n, _, _ in tried]
    assert len(ns) == len(set(ns)) and all(1 <= n <= T - 1 for n in ns)
    ok = [n for n, _, s in tried if s]
    assert (min(ok) if ok else None) == (n0 if n0 <= T - 1 else None)
    steps = [s for _, s, _ in tried]
    assert steps == sorted(steps)


def test_shared_words_ignore_function_words_and_case():
    assert shared_words("the LORD said unto", "The LORD is my shepherd") == ("lord",)
    assert shared_words("xq zz", "The LORD") == ()
    assert shared_words("Shepherds", "shepherd") == (
        "shepherd",
    )  # an inflection of a 4+ letter word
    assert (
        shared_words("gone", "goats") == () and shared_words("goa", "goats") == ()
    )  # not a shared start
    assert shared_words("spreadsEqual heavens", "the heaven and the earth") == ("heaven",)
    assert shared_words("sheep", "the LORD is my shepherd") == ()


# --------------------------------------------------------------------------- on a model
@pytest.fixture(scope="module")
def tiny():
    import memclaim as mc

    model, tok = tiny_gpt(2)
    return mc.load_model((model, tok), dtype=None)


def _sides(m):
    enc = m.tokenizer.encode
    return {
        "members": [("m1", "abcdef", enc("abcdef")), ("m2", "hello!", enc("hello!"))],
        "controls": [("c1", "zyxwvu", enc("zyxwvu")), ("c2", "qrstuv", enc("qrstuv"))],
    }


SMALL = GCGSettings(top_k=8, batch_size=16, steps=3)


def test_search_sides_stores_every_target_and_reads_it_back(tiny, tmp_path):
    lengths = LengthSearch(start=2)
    proc, res, summ = search_sides(
        tiny, _sides(tiny), criterion="prob:0.5", gcg=SMALL, lengths=lengths, store_root=tmp_path
    )
    assert [summ[k].searched for k in ("members", "controls")] == [2, 2]
    folder = tmp_path / "searches" / procedure_key(proc)[:16]
    assert json.loads((folder / "procedure.json").read_text())["criterion"] == "prob:0.5"
    assert len(list(folder.glob("*/result.json"))) == 4
    for r in res["members"] + res["controls"]:
        assert r.attempts and r.prompt_len == len(r.prompt_ids) and r.criterion == "prob:0.5"
        assert (r.acr is not None) == r.met and (not r.extracted or r.acr > 1)
        assert TargetResult.from_dict(json.loads(json.dumps(r.to_dict()))) == r
    # a second run reads every target back (no search runs)
    import memclaim as mc

    events = []
    fresh = mc.load_model((tiny.lm.model, tiny.tokenizer.tok), dtype=None)
    _, res2, summ2 = search_sides(
        fresh,
        _sides(fresh),
        criterion="prob:0.5",
        gcg=SMALL,
        lengths=lengths,
        store_root=tmp_path,
        progress=events.append,
    )
    assert [summ2[k].reused for k in ("members", "controls")] == [2, 2]
    assert [r.to_dict() for r in res2["members"]] == [r.to_dict() for r in res["members"]]
    assert events and events[-1].finished and events[-1].unit == "targets"
    # another criterion is another procedure, another folder
    proc3, _, summ3 = search_sides(
        tiny,
        {"members": _sides(tiny)["members"][:1], "controls": []},
        criterion="argmax",
        gcg=SMALL,
        lengths=lengths,
        store_root=tmp_path,
    )
    assert summ3["members"].searched == 1 and procedure_key(proc3) != procedure_key(proc)


def test_search_target_refuses_a_one_token_target(tiny):
    with pytest.raises(InputError, match="at least 2 tokens"):
        search_target(
            PromptSearchModel(tiny.lm, tiny.tokenizer),
            record_id="x",
            text="a",
            prefix_ids=[0],
            target_ids=[66],
            criterion="argmax",
            gcg=SMALL,
            lengths=LengthSearch(),
        )


def test_two_searchers_on_one_store_search_each_target_once(tiny, tmp_path):
    """Two searches of the same targets at once (threads, each with its own lock file handle: flock
    holds between them as between processes): every target is searched once, the other waits and
    reads the result."""
    out = {}

    def go(name):
        out[name] = search_sides(
            tiny,
            _sides(tiny),
            criterion="argmax",
            gcg=SMALL,
            lengths=LengthSearch(start=2),
            store_root=tmp_path,
        )

    ts = [threading.Thread(target=go, args=(k,)) for k in ("a", "b")]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    searched = sum(out[k][2][s].searched for k in ("a", "b") for s in ("members", "controls"))
    assert searched == 4
    assert [r.to_dict() for r in out["a"][1]["controls"]] == [
        r.to_dict() for r in out["b"][1]["controls"]
    ]


KILL_SCRIPT = r"""
import sys, json
sys.path.insert(0, {tests!r})
import memclaim as mc
from acr_models import tiny_gpt
from memclaim.scoring.acr import LengthSearch, search_sides
from memclaim.scoring.gcg import GCGSettings
model, tok = tiny_gpt(2)
m = mc.load_model((model, tok), dtype=None)
enc = m.tokenizer.encode
sides = {{"members": [(f"m{{i}}", t, enc(t)) for i, t in enumerate(["abcdefgh", "hello world", "qwertyui"])],
          "controls": [(f"c{{i}}", t, enc(t)) for i, t in enumerate(["zyxwvuts", "lorem ipsum", "asdfghjk"])]}}
proc, res, summ = search_sides(m, sides, criterion="prob:0.6", gcg=GCGSettings(top_k=8, batch_size=16, steps=4),
                               lengths=LengthSearch(start=3), store_root={root!r})
print(json.dumps({{"searched": {{k: v.searched for k, v in summ.items()}},
                  "results": {{k: [r.to_dict() for r in v] for k, v in res.items()}}}}))
"""


def _run(root: Path, *, kill_after: str | None = None) -> dict | None:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            [str(TESTS.parent / "src"), os.environ.get("PYTHONPATH", "")]
        ),
    }
    p = subprocess.Popen(
        [sys.executable, "-c", KILL_SCRIPT.format(tests=str(TESTS), root=str(root))],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    if kill_after is None:
        out, err = p.communicate(timeout=900)
        assert p.returncode == 0, err[-3000:]
        return json.loads(out.strip().splitlines()[-1])
    deadline = time.time() + 900
    while time.time() < deadline and p.poll() is None:
        if list(root.glob(kill_after)):
            break
        time.sleep(0.05)
    assert p.poll() is None, "the search ended before it could be killed"
    p.send_signal(signal.SIGKILL)  # kill -9: no handler runs
    p.communicate()
    return None


@pytest.mark.integration  # three fresh interpreters (about a minute), not the unit tier's seconds
def test_a_search_killed_with_sigkill_resumes_where_it_stopped(tmp_path):
    """kill -9 after the first target finished: the next run searches only the targets without a
    result (the finished lengths of the interrupted one are read back too), and its results equal an
    uninterrupted run's, bit for bit (the search is deterministic under its seed on the CPU)."""
    killed = tmp_path / "killed"
    _run(killed, kill_after="searches/*/*/result.json")
    done = list(killed.glob("searches/*/*/result.json"))
    assert 1 <= len(done) < 6
    for f in killed.rglob(
        "*.json"
    ):  # atomic writes: a file is whole or absent (a kill may leave a .tmp)
        json.loads(f.read_text())
    resumed = _run(killed)
    assert not list(
        killed.rglob("*.tmp")
    )  # the next writer, finding no other, removed what the kill left
    assert sum(resumed["searched"].values()) == 6 - len(done)
    fresh = _run(tmp_path / "fresh")
    strip = lambda d: {
        k: [{f: v for f, v in r.items() if f != "seconds"} for r in rs]  # noqa: E731
        for k, rs in d["results"].items()
    }
    assert strip(resumed) == strip(fresh)


def test_procedure_key_ignores_names_and_versions_only(tiny):
    p = acr_procedure(tiny, criterion="prob", gcg=GCGSettings(), lengths=LengthSearch())
    assert (
        p["criterion"] == "prob:0.9" and p["gcg"]["top_k"] == 256 and p["gcg"]["batch_size"] == 512
    )
    q = json.loads(json.dumps(p))
    q["memclaim_version"], q["model"]["name"] = "0.0", "renamed"
    assert procedure_key(q) == procedure_key(p)
    for change in (
        {"criterion": "argmax"},
        {"gcg": {**p["gcg"], "seed": 1}},
        {"length_search": {**p["length_search"], "max_prompt_tokens": 30}},
    ):
        assert procedure_key({**p, **change}) != procedure_key(p)


def test_store_refuses_a_damaged_file(tmp_path):
    s = ACRStore(tmp_path)
    folder = s.procedure_folder({"kind": "acr"})
    (folder / "k").mkdir()
    (folder / "k" / "result.json").write_text("{cut sho")
    from memclaim.errors import StoreError

    with pytest.raises(StoreError, match="is unreadable"):
        s.load_result(folder, "k")
