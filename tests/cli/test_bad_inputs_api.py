"""Issue 25: bad inputs through the Python API, table-driven (tests/cli/test_bad_inputs.py is the CLI's).

Each row calls a public function of ``memclaim`` (``import memclaim as mc``) with one bad input
and checks that it raises a memclaim error (:class:`memclaim.errors.MemclaimError`, a
ValueError), never another exception, whose message names the bad value (a phrase given per
row) and whose ``hint`` says how to fix it; and that it changed nothing, with the CLI table's
harness: a previous store and report (one real ``population`` run) are byte-identical
afterwards, the inputs too, a new ``out`` folder was not created, the working folder holds only
the user's file, and no temporary file is left anywhere. Rows that need a model use the tiny GPT
("toy"); most fail before any weight is read. The inputs are the CLI table's (its ``data`` and
``previous`` fixtures, with issue 25's files from ``issue25_inputs``).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import socket
import threading
from types import SimpleNamespace

import pytest
from test_bad_inputs import EDITED_STORES, _snapshot, data, previous  # noqa: F401 - the CLI table's fixtures

import memclaim as mc
from memclaim.errors import MemclaimError

pytestmark = pytest.mark.integration


def _m(c):
    return c.d / "m.jsonl"


def _c(c):
    return c.d / "c.jsonl"


def _texts(n=3, **extra):
    return [
        {"id": f"t{i}", "text": f"text number {i} with a few words in it", **extra}
        for i in range(n)
    ]


def _silent_server(c):
    """A local port that accepts connections and never answers (a wrong --address that hangs)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    conns = []

    def accept():
        while True:
            try:
                conns.append(s.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    c.cleanup.append(s.close)
    return f"127.0.0.1:{s.getsockname()[1]}"


def _ray_silent(c):
    import memclaim.scoring.ray_backend as rb

    c.monkeypatch.setattr(
        rb, "RAY_CONNECT_TIMEOUT_S", 1.0
    )  # the stated limit, shortened for the table
    mc.score(
        "toy",
        _m(c),
        prefix_tokens=8,
        suffix_tokens=8,
        backend="ray",
        address=_silent_server(c),
        out=c.new,
    )


def _dp_out_of_memory(c):
    """The memory the estimates cannot foresee (another process took it): a bare MemoryError
    inside dp_bounds becomes a DomainError naming the options that ask for less."""
    import memclaim.api._dp as dp

    def boom(*a, **k):
        raise MemoryError

    c.monkeypatch.setattr(dp, "_dp_bounds", boom)
    mc.dp_bounds(epsilon=1, neighbors="add-remove")


def _score_files_reordered(c):
    """The candidates' score file again, its rows in another order and with CRLF line endings."""
    rows = (c.d / "s1.csv").read_text().splitlines()
    other = c.tmp / "s1-reordered.csv"
    other.write_bytes(("\r\n".join([rows[0]] + rows[:0:-1]) + "\r\n").encode())
    mc.test(c.d / "s1.csv", other)


def _store_same_texts(c):
    """Two runs of one store scored from the same texts in another order under other ids."""
    texts = _texts(4)
    store = c.tmp / "same-texts-store"
    mc.score(
        "toy", texts, prefix_tokens=3, suffix_tokens=3, policies=["full"], out=store, label="a"
    )
    mc.score(
        "toy",
        [{"id": f"other-{i}", "text": t["text"]} for i, t in enumerate(reversed(texts))],
        prefix_tokens=3,
        suffix_tokens=3,
        policies=["full"],
        out=store,
        label="b",
    )
    mc.test(store, store, run="a", controls_run="b", alpha="0.5")


def _datasets(kind):
    import datasets

    ds = datasets.Dataset.from_list([{"id": "a", "text": "one two three four"}])
    if kind == "dict":
        return datasets.DatasetDict(train=ds, test=ds)
    return ds.to_iterable_dataset()


def _dup_frame():
    import pandas as pd

    return pd.DataFrame([["a", "one two three", "four five six"]], columns=["id", "text", "text"])


def _edited_store(c, how):
    """A copy of the previous run's store edited by hand (issue 25 item 5: the CLI table's
    EDITED_STORES: labels swapped in manifest.json, a procedure file or scores.parquet edited)."""
    store = c.tmp / f"edited-{how}"
    shutil.copytree(c.store, store)
    EDITED_STORES[how](store)
    return store


def _test_edited(c, how):
    store = _edited_store(c, how)
    mc.test(store, store, run="members", controls_run="controls", policy="full", out=c.new)


def _census_edited_unit(c):
    """Issue 25 item 5: a census re-run reads back only sealed units; one edited by hand since the
    first run is refused (naming the unit), not read into the claim."""
    out = c.tmp / "census-out"
    kw = dict(stride=8, **S8, policies=["full"], out=out)
    mc.census("toy", c.d / "doc.txt", c.d / "ctl.txt", **kw)
    m = json.loads((out / "store" / "manifest.json").read_text())
    uid, u = next(iter(m["units"].items()))
    f = out / "store" / "units" / u["procedure"][:16] / f"{uid}.parquet"
    f.write_bytes(f.read_bytes() + b"\0")
    mc.census("toy", c.d / "doc.txt", c.d / "ctl.txt", **kw)


# (case id, call(c) with c.d the inputs, c.rep the previous output, c.store its store, c.new a
# path that must stay absent, c.file a user's file; phrase the message must contain)
S8 = dict(prefix_tokens=8, suffix_tokens=8)
ROWS = [
    # ---- load_model
    ("load-unknown-name", lambda c: mc.load_model("nosuchmodel"), "neither a named model"),
    ("load-folder-not-model", lambda c: mc.load_model(c.d), "has no config.json"),
    ("load-custom-code", lambda c: mc.load_model(c.d / "custom-code-model"), "--trust-remote-code"),
    (
        "load-truncated-safetensors",
        lambda c: mc.load_model(c.d / "corrupt-model"),
        "is corrupt or truncated",
    ),
    ("load-not-gguf", lambda c: mc.load_model(c.d / "not.gguf"), "not a readable GGUF file"),
    ("load-bad-dtype", lambda c: mc.load_model("toy", dtype="int8"), "int8"),
    ("load-bad-device", lambda c: mc.load_model("toy", device="tpu:0"), "'tpu:0' is not a device"),
    (
        "load-bad-pickle",
        lambda c: mc.load_model(c.d / "i25-pickle-model", allow_pickle=True),
        "pytorch_model.bin' (19 bytes) cannot be read as weights",
    ),
    (
        "load-pickle-refused",
        lambda c: mc.load_model(c.d / "i25-pickle-model"),
        "pass --allow-pickle",
    ),
    # ---- score: options (item 7)
    (
        "score-policies-empty",
        lambda c: mc.score("toy", _m(c), policies=[], out=c.new),
        "policies=[] names no",
    ),
    (
        "score-policies-number",
        lambda c: mc.score("toy", _m(c), policies=[5], out=c.new),
        "got int 5",
    ),
    (
        "score-policies-bogus",
        lambda c: mc.score("toy", _m(c), policies="bogus", out=c.new),
        "unknown decoding policy component",
    ),
    (
        "score-nv-string",
        lambda c: mc.score("toy", _m(c), near_verbatim="12", out=c.new),
        "near_verbatim must be whole numbers, got the string '12'",
    ),
    (
        "score-nv-bool",
        lambda c: mc.score("toy", _m(c), near_verbatim=[True], out=c.new),
        "near_verbatim must be an integer, got True",
    ),
    (
        "score-nv-fraction",
        lambda c: mc.score("toy", _m(c), near_verbatim=[1.5], out=c.new),
        "near_verbatim must be an integer, got 1.5",
    ),
    (
        "score-nv-negative",
        lambda c: mc.score("toy", _m(c), near_verbatim=[-1], **S8, out=c.new),
        "near-verbatim epsilon must be a whole number of token edits >= 0, got [-1]",
    ),
    (
        "score-beams-string",
        lambda c: mc.score("toy", _m(c), near_verbatim=[1], beams="4", out=c.new),
        "beams must be whole numbers, got the string '4'",
    ),
    (
        "score-beam-alone",
        lambda c: mc.score("toy", _m(c), beams=[4], **S8, out=c.new),
        "--beam applies to",
    ),
    (
        "score-template-width",
        lambda c: mc.score("toy", _m(c), prompt_templates=["{prefix:>100000000}"], out=c.new),
        "pads {prefix} to 100,000,000 characters",
    ),
    (
        "score-template-nested-width",
        lambda c: mc.score("toy", _m(c), prompt_templates=["{prefix:>{suffix}}"], out=c.new),
        "is filled from the text",
    ),
    (
        "score-template-bad-spec",
        lambda c: mc.score("toy", _m(c), prompt_templates=["{prefix:d}"], out=c.new),
        "bad prompt template '{prefix:d}'",
    ),
    (
        "score-template-field",
        lambda c: mc.score("toy", _m(c), prompt_templates=["{bad}"], out=c.new),
        "unknown fields ['bad']",
    ),
    (
        "score-template-not-text",
        lambda c: mc.score("toy", _m(c), prompt_templates=5, out=c.new),
        "prompt_templates must be a template string or a list of them, got int 5",
    ),
    (
        "score-template-item-not-text",
        lambda c: mc.score("toy", _m(c), prompt_templates=[7], out=c.new),
        "a prompt template must be a string, got int 7",
    ),
    (
        "score-batch-0",
        lambda c: mc.score("toy", _m(c), batch_size=0, out=c.new),
        "must be >= 1, got 0",
    ),
    (
        "score-batch-word",
        lambda c: mc.score("toy", _m(c), batch_size="lots", out=c.new),
        "got 'lots'",
    ),
    (
        "score-unit-0",
        lambda c: mc.score("toy", _m(c), unit_size=0, **S8, out=c.new),
        "unit size must be >= 1",
    ),
    (
        "score-threads-0",
        lambda c: mc.score("toy", _m(c), threads=0, out=c.new),
        "--threads must be >= 1, got 0",
    ),
    # issue 30: stats= (the statistics computed and stored), refused before the model loads
    (
        "score-stats-unknown",
        lambda c: mc.score("toy", _m(c), stats="loss", out=c.new),
        "unknown statistic(s) ['loss']",
    ),
    (
        "score-stats-dangling-plus",
        lambda c: mc.score("toy", _m(c), stats="rank+", out=c.new),
        "malformed statistics 'rank+'",
    ),
    (
        "score-stats-empty",
        lambda c: mc.score("toy", _m(c), stats=[], out=c.new),
        "an empty set of statistics",
    ),
    (
        "score-stats-number",
        lambda c: mc.score("toy", _m(c), stats=5, out=c.new),
        "stats=5 is not a set",
    ),
    (
        "score-stats-bool",
        lambda c: mc.score("toy", _m(c), stats=True, out=c.new),
        "stats=True is not a set",
    ),
    (
        "score-stats-item-number",
        lambda c: mc.score("toy", _m(c), stats=["rank", 3], out=c.new),
        "statistic 3 is not a name",
    ),
    (
        "score-backend",
        lambda c: mc.score("toy", _m(c), backend="spark", out=c.new),
        "unknown backend 'spark'",
    ),
    (
        "score-ray-option-local",
        lambda c: mc.score("toy", _m(c), workers=2, out=c.new),
        "only apply with --backend ray",
    ),
    (
        "score-ray-workers-0",
        lambda c: mc.score("toy", _m(c), backend="ray", workers=0, out=c.new),
        "--workers must be >= 1",
    ),
    # ---- a served model (issue 27)
    (
        "score-served-no-url",
        lambda c: mc.score("toy", _m(c), backend="openai", out=c.new),
        "--backend openai needs --url",
    ),
    (
        "score-served-url-local",
        lambda c: mc.score("toy", _m(c), url="http://127.0.0.1:1", out=c.new),
        "--url applies only with --backend openai",
    ),
    (
        "score-served-refused",
        lambda c: mc.score(
            "toy", _m(c), **S8, backend="openai", url="http://127.0.0.1:1", out=c.new
        ),
        "cannot reach the server at http://127.0.0.1:1",
    ),
    (
        "score-served-concurrency",
        lambda c: mc.score(
            "toy", _m(c), backend="openai", url="http://127.0.0.1:1", max_concurrency=0, out=c.new
        ),
        "--max-concurrency must be >= 1",
    ),
    (
        "score-served-device",
        lambda c: mc.score(
            "toy", _m(c), backend="openai", url="http://127.0.0.1:1", device="cpu", out=c.new
        ),
        "--device places or loads weights",
    ),
    (
        "population-served-no-url",
        lambda c: mc.population("toy", _m(c), _c(c), **S8, backend="openai", out=c.new),
        "--backend openai needs --url",
    ),
    (
        "census-served-key",
        lambda c: mc.census(
            "toy",
            c.d / "doc.txt",
            c.d / "ctl.txt",
            stride=8,
            **S8,
            backend="openai",
            url="http://127.0.0.1:1",
            api_key_env="MEMCLAIM_NO_SUCH_KEY",
            out=c.new,
        ),
        "--api-key-env MEMCLAIM_NO_SUCH_KEY: the environment variable is not set",
    ),
    # ---- a served model's audit and sampling estimates (issue 27): refused before any request
    (
        "audit-served-no-url",
        lambda c: mc.audit("toy", _m(c), _c(c), **S8, backend="openai", out=c.new),
        "--backend openai needs --url",
    ),
    (
        "audit-served-min-k++",
        lambda c: mc.audit(
            "toy",
            _m(c),
            _c(c),
            **S8,
            attacks=["loss", "min-k++"],
            backend="openai",
            url="http://127.0.0.1:1",
            out=c.new,
        ),
        "attack 'min-k++' needs token_mean, token_std",
    ),
    (
        "audit-served-shadows",
        lambda c: mc.audit(
            "toy",
            _m(c),
            _c(c),
            **S8,
            shadows=4,
            backend="openai",
            url="http://127.0.0.1:1",
            out=c.new,
        ),
        "--shadows 4: shadow models are trained from the audited model's weights",
    ),
    (
        "score-estimate-n",
        lambda c: mc.score(
            "toy",
            _m(c),
            **S8,
            backend="openai",
            url="http://127.0.0.1:1",
            estimate="sample:0",
            out=c.new,
        ),
        "--estimate 'sample:0': N must be an integer >= 1",
    ),
    (
        "score-estimate-local",
        lambda c: mc.score("toy", _m(c), **S8, estimate="sample:4", out=c.new),
        "--estimate samples a served model",
    ),
    (
        "score-seed-alone",
        lambda c: mc.score("toy", _m(c), **S8, seed=3, out=c.new),
        "--seed applies to sampling estimates only",
    ),
    # ---- score: inputs (items 4, 10)
    (
        "score-both-inputs",
        lambda c: mc.score("toy", _m(c), document=c.d / "doc.txt", out=c.new),
        "exactly one of",
    ),
    ("score-no-input", lambda c: mc.score("toy", out=c.new), "exactly one of"),
    (
        "score-document-no-stride",
        lambda c: mc.score("toy", document=c.d / "doc.txt", out=c.new),
        "--document needs --stride",
    ),
    (
        "score-stride-0",
        lambda c: mc.score("toy", document=c.d / "doc.txt", stride=0, out=c.new),
        "stride must be >= 1",
    ),
    (
        "score-stride-passages",
        lambda c: mc.score("toy", _m(c), stride=8, out=c.new),
        "--stride applies to --document",
    ),
    (
        "score-missing-file",
        lambda c: mc.score("toy", c.d / "nope.jsonl", out=c.new),
        "does not exist",
    ),
    ("score-empty-file", lambda c: mc.score("toy", c.d / "empty.jsonl", out=c.new), "is empty"),
    (
        "score-latin1",
        lambda c: mc.score("toy", c.d / "latin1.txt", out=c.new),
        "not valid UTF-8: byte 0xe9",
    ),
    (
        "score-unknown-format",
        lambda c: mc.score("toy", c.d / "notes.py", out=c.new),
        "cannot tell the format",
    ),
    (
        "score-bad-format",
        lambda c: mc.score("toy", _m(c), input_format="xml", out=c.new),
        "unknown input format 'xml'",
    ),
    (
        "score-format-on-list",
        lambda c: mc.score("toy", _texts(), input_format="csv", out=c.new),
        "--format applies to files",
    ),
    (
        "score-not-arrow",
        lambda c: mc.score("toy", c.d / "not.arrow", out=c.new),
        "is not a readable Arrow file",
    ),
    (
        "score-csv-open-quote",
        lambda c: mc.score("toy", c.d / "bad.csv", out=c.new),
        "malformed CSV in the record starting on line 2",
    ),
    (
        "score-csv-row-without-text",
        lambda c: mc.score("toy", c.d / "i25_csv_short_row.csv", out=c.new),
        "line 3: record has no 'text' field",
    ),
    (
        "score-text-field",
        lambda c: mc.score("toy", _m(c), text_field="nope", out=c.new),
        "has no text field 'nope'",
    ),
    (
        "score-id-field",
        lambda c: mc.score("toy", _m(c), id_field="nope", out=c.new),
        "has no id field 'nope'",
    ),
    (
        "score-prefix-field-alone",
        lambda c: mc.score("toy", _m(c), prefix_field="text", out=c.new),
        "--prefix-field and --suffix-field go together",
    ),
    ("score-empty-iterable", lambda c: mc.score("toy", iter(()), out=c.new), "texts is empty"),
    (
        "score-single-string",
        lambda c: mc.score("toy", ["one text"][0].encode(), out=c.new),
        "texts must be a list of texts or records, got a single string",
    ),
    (
        "score-list-number",
        lambda c: mc.score("toy", [3, 4], out=c.new),
        "expected a text, a dict or a Record, got int",
    ),
    (
        "score-text-not-string",
        lambda c: mc.score("toy", [{"id": "a", "text": 3}], out=c.new),
        "text is a int, not a string",
    ),
    (
        "score-jsonl-id-bool",
        lambda c: mc.score("toy", c.d / "i25_id_bool.jsonl", out=c.new),
        "line 2: id True is a bool",
    ),
    (
        "score-id-true",
        lambda c: mc.score("toy", [{"id": True, "text": "one two"}], out=c.new),
        "id True is a bool",
    ),
    (
        "score-id-list",
        lambda c: mc.score("toy", [{"id": [1, 2], "text": "one two"}], out=c.new),
        "id [1, 2] is a list",
    ),
    (
        "score-id-nan",
        lambda c: mc.score("toy", [{"id": math.nan, "text": "one two"}], out=c.new),
        "id nan is a float",
    ),
    (
        "score-id-duplicate",
        lambda c: mc.score(
            "toy", [{"id": "a", "text": "x y"}, {"id": "a", "text": "z w"}], out=c.new
        ),
        "duplicate id 'a' (first at item 0)",
    ),
    (
        "score-surrogate-id",
        lambda c: mc.score("toy", [{"id": "a\ud800", "text": "one two"}], out=c.new),
        "holds a lone surrogate U+D800",
    ),
    (
        "score-surrogate-text",
        lambda c: mc.score("toy", ["one\udc00two"], out=c.new),
        "the text holds a lone surrogate U+DC00",
    ),
    (
        "score-surrogate-jsonl",
        lambda c: mc.score("toy", c.d / "i25_surrogate_text.jsonl", out=c.new),
        "line 2: the text holds a lone surrogate U+DC00",
    ),
    (
        "score-surrogate-document",
        lambda c: mc.score(
            "toy", document=mc.Document("a\ud800b c d", name="x"), stride=4, out=c.new
        ),
        "document 'x': the text holds a lone surrogate",
    ),
    (
        "score-document-name",
        lambda c: mc.score("toy", document=mc.Document("a b c", name=5), stride=4, out=c.new),
        "a Document's name must be a non-empty string, got 5",
    ),
    (
        "score-document-empty",
        lambda c: mc.score("toy", document=mc.Document("  ", name="blank"), stride=4, out=c.new),
        "document 'blank' is empty",
    ),
    (
        "score-document-object",
        lambda c: mc.score("toy", document=42, stride=4, out=c.new),
        "document must be a file path or a memclaim.Document, got int",
    ),
    (
        "score-datasetdict",
        lambda c: mc.score("toy", _datasets("dict"), out=c.new),
        "is a datasets DatasetDict with the splits ['train', 'test']",
    ),
    (
        "score-iterable-dataset",
        lambda c: mc.score("toy", _datasets("iterable"), out=c.new),
        "IterableDataset, a stream without a length",
    ),
    (
        "score-dataframe-duplicate-columns",
        lambda c: mc.score("toy", _dup_frame(), out=c.new),
        "duplicate column names ['text']",
    ),
    ("score-not-texts", lambda c: mc.score("toy", 3.5, out=c.new), "got float"),
    (
        "score-short-texts",
        lambda c: mc.score("toy", _m(c), prefix_tokens=200, suffix_tokens=50, out=c.new),
        "use lengths that fit",
    ),
    (
        "score-past-context",
        lambda c: mc.score(
            "toy", c.d / "long.jsonl", prefix_tokens=200, suffix_tokens=100, out=c.new
        ),
        "more than the context of toy",
    ),
    (
        "score-empty-prompt",
        lambda c: mc.score("toy", _m(c), prefix_tokens=0, sot="none", out=c.new),
        "empty prompt",
    ),
    (
        "score-sot-unknown",
        lambda c: mc.score("toy", _m(c), sot="<nosuch>", out=c.new),
        "is not in this tokenizer's vocabulary",
    ),
    (
        "score-no-chat-template",
        lambda c: mc.score("toy", _m(c), chat_template=True, **S8, out=c.new),
        "no chat template",
    ),
    (
        "score-chat-sandbox",
        lambda c: mc.score(c.d / "i25-chat-model", _m(c), chat_template=True, **S8, out=c.new),
        "chat template cannot be rendered: the sandbox refused it",
    ),
    ("score-out-file", lambda c: mc.score("toy", _m(c), out=c.file), "exists and is not a folder"),
    (
        "score-ray-refused",
        lambda c: mc.score("toy", _m(c), **S8, backend="ray", address="127.0.0.1:1", out=c.new),
        "cannot connect to the Ray cluster at '127.0.0.1:1'",
    ),
    (
        "score-ray-silent",
        _ray_silent,
        "is not a Ray cluster: no gRPC answer within the connection attempt timeout of 1 s",
    ),
    (
        "score-ray-address-form",
        lambda c: mc.score("toy", _m(c), **S8, backend="ray", address="localhost", out=c.new),
        "--address 'localhost' is not HOST:PORT",
    ),
    # ---- test (items 6, 7, 10)
    (
        "test-2d-scores",
        lambda c: mc.test([[-1.0, -2.0], [-3.0, -4.0]], [[-5.0, -6.0], [-7.0, -8.0]], alpha="0.2"),
        "candidates must be one score per item (a 1-D array), got an array of shape (2, 2)",
    ),
    (
        "test-scalar-scores",
        lambda c: mc.test(-1.0, [-5.0, -6.0], alpha="0.2"),
        "got a single number",
    ),
    (
        "test-bool-scores",
        lambda c: mc.test([True, False], [-5.0, -6.0, -7.0], alpha="0.2"),
        "holds True/False values, not scores",
    ),
    (
        "test-word-scores",
        lambda c: mc.test(["high", "low"], [-5.0, -6.0], alpha="0.2"),
        "must be scores (numbers)",
    ),
    (
        "test-same-scores",
        lambda c: mc.test([-1.0, -2.0], [-1.0, -2.0], alpha="0.2"),
        "are the same scores",
    ),
    (
        "test-candidate-ids-bool",
        lambda c: mc.test(
            [-1.0, -2.0], [-5.0, -6.0, -7.0], alpha="0.2", candidate_ids=[True, False]
        ),
        "candidate_ids item 0: id True is a bool",
    ),
    (
        "test-control-ids-nan",
        lambda c: mc.test([-1.0], [-5.0, -6.0], alpha="0.2", control_ids=["a", math.nan]),
        "control_ids item 1: id nan is a float",
    ),
    (
        "test-exclude-bool",
        lambda c: mc.test([-1.0], [-5.0, -6.0, -7.0], alpha="0.2", exclude_control_ids=[True]),
        "--exclude-control item 0: id True is a bool",
    ),
    (
        "test-exclude-list",
        lambda c: mc.test([-1.0], [-5.0, -6.0, -7.0], alpha="0.2", exclude_control_ids=[[1]]),
        "id [1] is a list",
    ),
    (
        "test-exclude-number",
        lambda c: mc.test([-1.0], [-5.0, -6.0, -7.0], alpha="0.2", exclude_control_ids=3.5),
        "--exclude-control must be a list of ids, got float 3.5",
    ),
    (
        "test-procedure-list",
        lambda c: mc.test(
            c.d / "s1.csv", c.d / "s2.csv", candidates_procedure=[1], controls_procedure=[2]
        ),
        "--candidates-procedure must be the procedure record (a dict) or the path of its JSON file, got a list",
    ),
    (
        "test-procedure-folder",
        lambda c: mc.test(
            c.d / "s1.csv", c.d / "s2.csv", candidates_procedure=c.d, controls_procedure=c.d
        ),
        "is a folder, not a JSON file",
    ),
    (
        "test-procedure-json-list",
        lambda c: mc.test(
            c.d / "s1.csv",
            c.d / "s2.csv",
            candidates_procedure=c.d / "inst.json",
            controls_procedure=c.d / "inst.json",
        ),
        "is not valid JSON",
    ),
    (
        "test-one-procedure",
        lambda c: mc.test(c.d / "s1.csv", c.d / "s2.csv", candidates_procedure=c.d / "proc.json"),
        "--controls-procedure is not",
    ),
    (
        "test-alpha-2",
        lambda c: mc.test(c.d / "s1.csv", c.d / "s2.csv", alpha=2),
        "alpha must lie strictly between 0 and 1",
    ),
    (
        "test-alpha-word",
        lambda c: mc.test(c.d / "s1.csv", c.d / "s2.csv", alpha="abc"),
        "alpha must be a number",
    ),
    (
        "test-fdr-2",
        lambda c: mc.test(c.d / "s1.csv", c.d / "s2.csv", fdr=2),
        "--fdr must lie strictly between 0 and 1",
    ),
    (
        "test-confidence-1",
        lambda c: mc.test(c.d / "s1.csv", c.d / "s2.csv", confidence=1),
        "--confidence must lie",
    ),
    (
        "test-budget-bool",
        lambda c: mc.test(c.d / "s1.csv", c.d / "s2.csv", realistic_budget=True),
        "--budget must be a finite number of queries >= 1, got True",
    ),
    (
        "test-seed-negative",
        lambda c: mc.test(c.d / "s1.csv", c.d / "s2.csv", seed=-1),
        "--seed must be a whole number in [0, 2**63 - 1], got -1",
    ),
    ("test-seed-huge", lambda c: mc.test(c.d / "s1.csv", c.d / "s2.csv", seed=1e23), "got 1e+23"),
    ("test-same-file", lambda c: mc.test(c.d / "s1.csv", c.d / "s1.csv"), "are the same file"),
    (
        "test-identical-files",
        lambda c: mc.test(c.d / "s1.csv", c.d / "s1_copy.csv"),
        "identical contents",
    ),
    (
        "test-store-same-texts",
        _store_same_texts,
        "hold the same window texts (from inputs in another order",
    ),
    (
        "test-same-scores-reordered",
        _score_files_reordered,
        "hold the same ids and scores (in another order, format or line endings)",
    ),
    ("test-missing-file", lambda c: mc.test(c.d / "nope.csv", c.d / "s2.csv"), "does not exist"),
    ("test-score-word", lambda c: mc.test(c.d / "s_nan.csv", c.d / "s2.csv"), "is not a number"),
    (
        "test-store-and-file",
        lambda c: mc.test(c.store, c.d / "s2.csv", run="members"),
        "both be score stores",
    ),
    ("test-store-needs-run", lambda c: mc.test(c.store, c.store), "say which one with --run"),
    (
        "test-store-same-run",
        lambda c: mc.test(c.store, c.store, run="members", controls_run="members"),
        "are the same run",
    ),
    (
        "test-nv-on-arrays",
        lambda c: mc.test([-1.0], [-2.0, -3.0], near_verbatim=1),
        "needs score stores on both sides",
    ),
    (
        "test-id-field-on-arrays",
        lambda c: mc.test([-1.0], [-2.0, -3.0], id_field="id"),
        "applies to score files, not to arrays",
    ),
    (
        "test-store-no-policy-column",
        lambda c: mc.test(
            c.d / "i25-store-no-column",
            c.d / "i25-store-no-column",
            run="members",
            controls_run="controls",
            policy="full",
        ),
        "scores.parquet' has no column 'logq:full'",
    ),
    (
        "test-store-scores-folder",
        lambda c: mc.test(
            c.d / "i25-store-folder",
            c.d / "i25-store-folder",
            run="members",
            controls_run="controls",
            policy="full",
        ),
        "scores.parquet' is not a file (a folder",
    ),
    (
        "test-exclude-file-missing",
        lambda c: mc.test(c.d / "s1.csv", c.d / "s2.csv", exclude_controls=c.d / "nope.txt"),
        "does not exist",
    ),
    # ---- population (items 6, 7)
    (
        "population-same-file",
        lambda c: mc.population("toy", _m(c), _m(c), out=c.new),
        "are the same file",
    ),
    (
        "population-same-texts",
        lambda c: mc.population("toy", _m(c), c.d / "i25_m_reordered.jsonl", **S8, out=c.new),
        "have the same texts (in another order, format, ids, line endings or whitespace)",
    ),
    (
        "population-same-list",
        lambda c: mc.population("toy", _texts(), list(reversed(_texts())), **S8, out=c.new),
        "have the same texts",
    ),
    (
        "population-policies-empty",
        lambda c: mc.population("toy", _m(c), _c(c), policies=[], out=c.new),
        "policies=[] names no",
    ),
    (
        "population-nv-string",
        lambda c: mc.population("toy", _m(c), _c(c), near_verbatim="12", **S8, out=c.new),
        "got the string '12'",
    ),
    (
        "population-alpha-0",
        lambda c: mc.population("toy", _m(c), _c(c), alpha=0, out=c.new),
        "alpha must lie strictly between 0 and 1",
    ),
    (
        "population-exclude-bool",
        lambda c: mc.population("toy", _m(c), _c(c), exclude_control_ids=[True], out=c.new),
        "id True is a bool",
    ),
    (
        "population-seed",
        lambda c: mc.population("toy", _m(c), _c(c), seed=1e23, out=c.new),
        "--seed must be",
    ),
    (
        "population-stats-unknown",
        lambda c: mc.population("toy", _m(c), _c(c), stats="census+entropy", out=c.new),
        "unknown statistic(s) ['entropy']",
    ),
    (
        "population-stats-dict",
        lambda c: mc.population("toy", _m(c), _c(c), stats={"rank": 1}, out=c.new),
        "is not a set of statistics",
    ),
    (
        "population-datasetdict",
        lambda c: mc.population("toy", _m(c), _datasets("dict"), **S8, out=c.new),
        "--controls: controls is a datasets DatasetDict",
    ),
    (
        "population-batch-0",
        lambda c: mc.population("toy", _m(c), _c(c), batch_size=0, out=c.new),
        "got 0",
    ),
    (
        "population-out-file",
        lambda c: mc.population("toy", _m(c), _c(c), out=c.file),
        "exists and is not a folder",
    ),
    (
        "population-template-width",
        lambda c: mc.population(
            "toy", _m(c), _c(c), prompt_templates=["{suffix:<900000}"], **S8, out=c.new
        ),
        "pads {suffix} to 900,000 characters",
    ),
    # ---- census (items 6, 10)
    (
        "census-crlf-copy",
        lambda c: mc.census("toy", c.d / "doc.txt", c.d / "i25_doc_crlf.txt", stride=8, out=c.new),
        "are the same text (once line endings, whitespace and Unicode form are ignored)",
    ),
    (
        "census-same-text-in-memory",
        lambda c: mc.census(
            "toy",
            mc.Document("A b c.\r\n", name="a"),
            mc.Document("A  b\nc.", name="b"),
            stride=8,
            out=c.new,
        ),
        "the document 'a' and its control 'b' are the same text",
    ),
    (
        "census-pair-twice",
        lambda c: mc.census(
            "toy", pairs=[(c.d / "doc.txt", c.d / "ctl.txt")] * 2, stride=8, out=c.new
        ),
        "repeats pair 1",
    ),
    (
        "census-stride-fraction",
        lambda c: mc.census("toy", c.d / "doc.txt", c.d / "ctl.txt", stride=8.5, out=c.new),
        "--stride must be an integer, got 8.5",
    ),
    (
        "census-stride-bool",
        lambda c: mc.census("toy", c.d / "doc.txt", c.d / "ctl.txt", stride=True, out=c.new),
        "--stride must be an integer, got True",
    ),
    (
        "census-stride-0",
        lambda c: mc.census("toy", c.d / "doc.txt", c.d / "ctl.txt", stride=0, out=c.new),
        "--stride must be >= 1",
    ),
    (
        "census-unpaired",
        lambda c: mc.census("toy", c.d / "doc.txt", stride=8, out=c.new),
        "pair up in order",
    ),
    (
        "census-no-document",
        lambda c: mc.census("toy", stride=8, out=c.new),
        "no document to census",
    ),
    (
        "census-bad-pair",
        lambda c: mc.census("toy", pairs=[(c.d / "doc.txt",)], stride=8, out=c.new),
        "every pair is (document, control)",
    ),
    (
        "census-missing-document",
        lambda c: mc.census("toy", c.d / "nope.txt", c.d / "ctl.txt", stride=8, out=c.new),
        "does not exist",
    ),
    (
        "census-greedy-first",
        lambda c: mc.census(
            "toy",
            c.d / "doc.txt",
            c.d / "ctl.txt",
            stride=8,
            policies=["greedy", "full"],
            out=c.new,
        ),
        "needs a probability score",
    ),
    (
        "census-similarity",
        lambda c: mc.census(
            "toy", c.d / "doc.txt", c.d / "ctl.txt", stride=8, min_similarity=200, out=c.new
        ),
        "--min-similarity must lie in [0, 100]",
    ),
    (
        "census-budget-delta",
        lambda c: mc.census(
            "toy", c.d / "doc.txt", c.d / "ctl.txt", stride=8, budget_delta=2, out=c.new
        ),
        "--budget-delta must lie strictly between 0 and 1",
    ),
    (
        "census-policies-empty",
        lambda c: mc.census(
            "toy", c.d / "doc.txt", c.d / "ctl.txt", stride=8, policies=[], out=c.new
        ),
        "policies=[] names no",
    ),
    (
        "census-exclude-spans-missing",
        lambda c: mc.census(
            "toy",
            c.d / "doc.txt",
            c.d / "ctl.txt",
            stride=8,
            exclude_spans=c.d / "nope.txt",
            out=c.new,
        ),
        "does not exist",
    ),
    (
        "census-short-document",
        lambda c: mc.census("toy", c.d / "short.txt", c.d / "ctl.txt", stride=8, out=c.new),
        "shorter than one window",
    ),
    # ---- audit
    (
        "audit-overlap",
        lambda c: mc.audit("toy", _m(c), _m(c), **S8, out=c.new),
        "both members and non-members",
    ),
    (
        "audit-shadows-3",
        lambda c: mc.audit("toy", _m(c), _c(c), shadows=3, **S8, out=c.new),
        "even number >= 4",
    ),
    (
        "audit-bad-attack",
        lambda c: mc.audit("toy", _m(c), _c(c), attacks=["nosuch"], **S8, out=c.new),
        "unknown attack 'nosuch'",
    ),
    (
        "audit-kappa",
        lambda c: mc.audit("toy", _m(c), _c(c), kappa=2, soundness_epsilon=1, **S8, out=c.new),
        "must lie in [0, 1]",
    ),
    (
        "audit-id-bool",
        lambda c: mc.audit("toy", [{"id": True, "text": "one two three"}], _c(c), **S8, out=c.new),
        "id True is a bool",
    ),
    (
        "audit-datasetdict",
        lambda c: mc.audit("toy", _datasets("dict"), _c(c), **S8, out=c.new),
        "is a datasets DatasetDict",
    ),
    # ---- budget (item 7)
    ("budget-p-true", lambda c: mc.budget(p=True), "--p must be a number, got bool True"),
    ("budget-p-list", lambda c: mc.budget(p=[0.1]), "--p must be a number, got list [0.1]"),
    ("budget-p-word", lambda c: mc.budget(p="abc"), "--p must be a number, got 'abc'"),
    ("budget-p-2", lambda c: mc.budget(p=2), "p must be a probability in [0, 1]"),
    ("budget-log10-positive", lambda c: mc.budget(log10_p=5), "log10 p must be <= 0"),
    ("budget-none", lambda c: mc.budget(), "give exactly one of p, log10 p or log p"),
    (
        "budget-delta-0",
        lambda c: mc.budget(p=0.5, delta=0),
        "--delta must lie strictly between 0 and 1, got 0",
    ),
    (
        "budget-delta-true",
        lambda c: mc.budget(p=0.5, delta=True),
        "--delta must be a number, got bool True",
    ),
    ("budget-n-true", lambda c: mc.budget(p=0.5, n=True), "--n must be a number, got bool True"),
    ("budget-n-negative", lambda c: mc.budget(p=0.5, n=-3), "-3"),
    (
        "budget-n-and-log10-n",
        lambda c: mc.budget(p=0.5, n=10, log10_n=1),
        "give --n or --log10-n, not both (got --n 10 and --log10-n 1)",
    ),
    ("budget-out-file", lambda c: mc.budget(p=0.5, out=c.file), "exists and is not a folder"),
    # ---- dp (items 7, 9, 10)
    (
        "dp-epsilon-negative",
        lambda c: mc.dp_bounds(epsilon=-1, neighbors="replace"),
        "epsilon must be finite and > 0",
    ),
    (
        "dp-copies-0",
        lambda c: mc.dp_bounds(epsilon=1, neighbors="replace", copies=0),
        "copies must be >= 1",
    ),
    (
        "dp-copies-bool",
        lambda c: mc.dp_bounds(epsilon=1, neighbors="replace", copies=True),
        "copies must be an integer, got True",
    ),
    (
        "dp-copies-huge",
        lambda c: mc.dp_bounds(epsilon=1, neighbors="add-remove", copies=10**9),
        "--copies 1,000,000,000: the 1,000,000,000-fold group curves",
    ),
    (
        "dp-copies-huge-approx",
        lambda c: mc.dp_bounds(epsilon=1, delta=1e-9, neighbors="add-remove", copies=10**6),
        "--copies 10,000 or fewer",
    ),
    (
        "dp-copies-huge-dpsgd",
        lambda c: mc.dp_bounds(
            noise_multiplier=1.1,
            sampling_rate=0.01,
            steps=100,
            neighbors="add-remove",
            copies=10**6,
        ),
        "the DP-SGD run's trade-off curve",
    ),
    (
        "dp-noise-tiny",
        lambda c: mc.dp_bounds(
            noise_multiplier=1e-6, sampling_rate=0.01, steps=10, neighbors="add-remove"
        ),
        "would hold 5e+15 points",
    ),
    (
        "dp-steps-huge",
        lambda c: mc.dp_bounds(
            noise_multiplier=1.1, sampling_rate=0.01, steps=10**9, neighbors="add-remove"
        ),
        "would hold 2.77e+08 points",
    ),
    (
        "dp-steps-huge-grid",
        lambda c: mc.dp_bounds(
            noise_multiplier=1.1,
            sampling_rate=0.01,
            steps=10**10,
            neighbors="add-remove",
            pld_grid=1e-3,
        ),
        "at the PLD grid 0.001",
    ),
    (
        "dp-steps-fraction",
        lambda c: mc.dp_bounds(
            noise_multiplier=1.1, sampling_rate=0.01, steps=10.5, neighbors="add-remove"
        ),
        "steps must be an integer, got 10.5",
    ),
    (
        "dp-dpsgd-incomplete",
        lambda c: mc.dp_bounds(noise_multiplier=1.1, neighbors="add-remove"),
        "missing --sampling-rate, --steps",
    ),
    (
        "dp-dpsgd-and-epsilon",
        lambda c: mc.dp_bounds(
            noise_multiplier=1.1, sampling_rate=0.01, steps=10, epsilon=1, neighbors="add-remove"
        ),
        "not both",
    ),
    (
        "dp-mu-and-delta",
        lambda c: mc.dp_bounds(mu=1, delta=1e-5, neighbors="add-remove"),
        "give either --delta (approximate DP) or --mu (Gaussian DP), not both",
    ),
    (
        "dp-mu-bool",
        lambda c: mc.dp_bounds(mu=True, neighbors="add-remove"),
        "mu must be a real number, got True",
    ),
    ("dp-no-guarantee", lambda c: mc.dp_bounds(neighbors="add-remove"), "no guarantee given"),
    (
        "dp-baseline-reversed",
        lambda c: mc.dp_bounds(
            epsilon=1, neighbors="replace-one", baseline=(0.5, 0.1), list_size=1, risk=0.1
        ),
        "interval is reversed",
    ),
    (
        "dp-pld-grid-alone",
        lambda c: mc.dp_bounds(epsilon=1, neighbors="replace", pld_grid=1e-3),
        "--pld-grid applies to DP-SGD settings only",
    ),
    ("dp-neighbors", lambda c: mc.dp_bounds(epsilon=1, neighbors="sideways"), "sideways"),
    (
        "dp-audit-incomplete",
        lambda c: mc.dp_bounds(epsilon=1, neighbors="replace", successes=3),
        "needs --successes, --trials, --baseline and --list-size together",
    ),
    ("dp-out-of-memory", _dp_out_of_memory, "memclaim dp bounds ran out of memory"),
    (
        "dp-account-noise-0",
        lambda c: mc.dp_account(noise_multiplier=0, sampling_rate=0.01, steps=10, delta=1e-5),
        "noise_multiplier must be finite and > 0",
    ),
    (
        "dp-account-noise-tiny",
        lambda c: mc.dp_account(noise_multiplier=1e-6, sampling_rate=0.01, steps=10, delta=1e-5),
        "a realistic --noise-multiplier",
    ),
    (
        "dp-account-steps-huge",
        lambda c: mc.dp_account(noise_multiplier=1.1, sampling_rate=0.01, steps=10**9, delta=1e-5),
        "--pld-grid 0.001",
    ),
    (
        "dp-account-copies-huge",
        lambda c: mc.dp_account(
            noise_multiplier=1.1, sampling_rate=0.01, steps=10, delta=1e-5, copies=10**9
        ),
        "--copies 2,400 or fewer",
    ),
    (
        "dp-plots-max-copies",
        lambda c: mc.dp_plots(c.new, neighbors="add-remove", max_copies=10**6),
        "--max-copies 631 or fewer",
    ),
    (
        "dp-plots-copies",
        lambda c: mc.dp_plots(c.new, neighbors="add-remove", copies=10**9),
        "--copies 200,000 or fewer",
    ),
    (
        "dp-plots-noise-tiny",
        lambda c: mc.dp_plots(
            c.new, neighbors="add-remove", noise_multiplier=1e-6, sampling_rate=0.01, steps=10
        ),
        "a realistic --noise-multiplier",
    ),
    (
        "dp-plots-out-file",
        lambda c: mc.dp_plots(c.file, neighbors="add-remove"),
        "exists and is not a folder",
    ),
    (
        "dp-baseline-secret-0",
        lambda c: mc.dp_baseline("toy", "the", secret_length=0, list_size=1),
        "secret_length must be >= 1",
    ),
    (
        "dp-baseline-custom-code",
        lambda c: mc.dp_baseline(c.d / "custom-code-model", "the", secret_length=1, list_size=1),
        "--trust-remote-code",
    ),
    (
        "dp-corpus-missing",
        lambda c: mc.dp_corpus_baseline(c.d / "nope.jsonl", list_size=1),
        "does not exist",
    ),
    (
        "dp-corpus-out-of-range",
        lambda c: mc.dp_corpus_baseline(c.d / "kappa_bad.jsonl", list_size=1),
        "line 2: kappa = 1.5 is not in [0, 1]",
    ),
    (
        "dp-corpus-other-m",
        lambda c: mc.dp_corpus_baseline(c.d / "kappa_m3.jsonl", list_size=1),
        "list size m = 3, not --list-size 1",
    ),
    # ---- issue 25 items 2, 3: model folders whose weights do not match their config, NaN
    # weights, temperatures below what float64 can apply (the CLI table's inputs)
    ("load-weights-empty", lambda c: mc.load_model(c.d / "empty-weights-model"), "hold no tensors"),
    (
        "score-weights-missing-tensor",
        lambda c: mc.score(c.d / "missing-tensor-model", _m(c), **S8, out=c.store),
        "1 parameter is missing from the weights (transformers would initialise it at random): "
        "transformer.h.1.mlp.c_fc.weight",
    ),
    (
        "score-weights-extra-tensor",
        lambda c: mc.score(c.d / "extra-tensor-model", _m(c), **S8, out=c.new),
        "not used by the architecture: transformer.h.9.mlp.c_fc.weight",
    ),
    (
        "score-config-layer-more",
        lambda c: mc.score(c.d / "extra-layer-model", _m(c), **S8, out=c.store),
        "12 parameters are missing from the weights",
    ),
    (
        "score-weights-empty",
        lambda c: mc.score(c.d / "empty-weights-model", _m(c), **S8, out=c.new),
        "hold no tensors",
    ),
    (
        "population-config-layer-more",
        lambda c: mc.population(c.d / "extra-layer-model", _m(c), _c(c), **S8, out=c.rep),
        "do not match its config.json",
    ),
    (
        "census-weights-missing-tensor",
        lambda c: mc.census(
            c.d / "missing-tensor-model",
            c.d / "doc.txt",
            c.d / "ctl.txt",
            stride=8,
            **S8,
            out=c.new,
        ),
        "missing from the weights",
    ),
    (
        "audit-weights-extra-tensor",
        lambda c: mc.audit(c.d / "extra-tensor-model", _m(c), _c(c), **S8, out=c.new),
        "not used by the architecture",
    ),
    (
        "score-nan-weights-into-a-store",
        lambda c: mc.score(c.d / "nan-model", _m(c), **S8, policies=["full"], out=c.store),
        "logq:full is nan for window",
    ),
    (
        "score-nan-weights-no-out",
        lambda c: mc.score(c.d / "nan-model", _m(c), **S8, policies=["full", "greedy"]),
        "is nan for window",
    ),
    (
        "population-nan-weights",
        lambda c: mc.population(
            c.d / "nan-model", _m(c), _c(c), **S8, policies=["full"], out=c.new
        ),
        "is nan for window",
    ),
    (
        "census-nan-weights",
        lambda c: mc.census(
            c.d / "nan-model",
            c.d / "doc.txt",
            c.d / "ctl.txt",
            stride=8,
            **S8,
            policies=["full"],
            out=c.new,
        ),
        "is nan for window",
    ),
    (
        "score-temperature-below-float64",
        lambda c: mc.score("toy", _m(c), **S8, policies=["temperature:1e-300"], out=c.store),
        "is below 4e-270",
    ),
    (
        "population-temperature-below-float64",
        lambda c: mc.population(
            "toy", _m(c), _c(c), **S8, policies=["top-k:40,temperature:3e-270"], out=c.rep
        ),
        "is below 4e-270",
    ),
    (
        "census-temperature-below-float64",
        lambda c: mc.census(
            "toy",
            c.d / "doc.txt",
            c.d / "ctl.txt",
            stride=8,
            policies="temperature:1e-280",
            out=c.new,
        ),
        "is below 4e-270",
    ),
    # ---- issue 25 item 5: stores edited by hand
    (
        "test-store-labels-swapped",
        lambda c: _test_edited(c, "swapped"),
        "is label 'members' in manifest.json but 'controls' in its run.json",
    ),
    (
        "test-store-procedure-edited",
        lambda c: _test_edited(c, "edited_proc"),
        "does not match the sha256 recorded",
    ),
    (
        "test-store-scores-edited",
        lambda c: _test_edited(c, "edited_scores"),
        "('controls') does not match the sha256 recorded when memclaim wrote it",
    ),
    (
        "test-store-no-policy-column-sealed",
        lambda c: mc.test(
            c.d / "i25-store-no-column-sealed",
            c.d / "i25-store-no-column-sealed",
            run="members",
            controls_run="controls",
            policy="full",
        ),
        "does not match the sha256 recorded when memclaim wrote it",
    ),
    ("census-unit-edited", _census_edited_unit, "does not match the sha256 recorded for it"),
    # ---- issue 25 item 8: --out folders memclaim did not make, refused before any write
    (
        "score-out-users-folder",
        lambda c: mc.score("toy", _m(c), **S8, out=c.d / "users-folder"),
        "is a folder memclaim did not make: it holds '.thesis.tex.swp.tmp', 'thesis.tex'",
    ),
    (
        "score-out-dot",
        lambda c: mc.score("toy", _m(c), **S8, out="."),
        "--out '.' is a folder memclaim did not make: it holds 'mine.txt'",
    ),
    ("score-out-empty", lambda c: mc.score("toy", _m(c), **S8, out=""), "--out '' is empty"),
    (
        "population-foreign-report",
        lambda c: mc.population(
            "toy", _m(c), _c(c), **S8, policies=["full"], out=c.d / "foreign-report"
        ),
        "report.html' exists and memclaim did not write it",
    ),
    (
        "population-store-not-a-store",
        lambda c: mc.population(
            "toy", _m(c), _c(c), **S8, policies=["full"], out=c.d / "foreign-store"
        ),
        "is a folder memclaim did not make: it holds 'notes.txt'",
    ),
    (
        "census-foreign-report",
        lambda c: mc.census(
            "toy",
            c.d / "doc.txt",
            c.d / "ctl.txt",
            stride=8,
            **S8,
            policies=["full"],
            out=c.d / "foreign-report",
        ),
        "report.html' exists and memclaim did not write it",
    ),
    (
        "audit-foreign-report",
        lambda c: mc.audit("toy", _m(c), _c(c), **S8, out=c.d / "foreign-report"),
        "report.html' exists and memclaim did not write it",
    ),
    # ---- training (item 10)
    (
        "train-tiny-seed-huge",
        lambda c: mc.train_tiny(out=c.new, steps=1, seed=1e23),
        "--seed must be a whole number in [0, 2**63 - 1], got 1e+23",
    ),
    (
        "train-tiny-seed-int-huge",
        lambda c: mc.train_tiny(out=c.new, steps=1, seed=10**23),
        "got 1000000000000000000",
    ),
    ("train-tiny-seed-negative", lambda c: mc.train_tiny(out=c.new, steps=1, seed=-1), "got -1"),
    (
        "train-tiny-corpus-seed-bool",
        lambda c: mc.train_tiny(out=c.new, steps=1, corpus_seed=True),
        "--corpus-seed must be a whole number, got True",
    ),
    ("train-tiny-steps-0", lambda c: mc.train_tiny(out=c.new, steps=0), "steps must be >= 1"),
    ("train-tiny-duplicates", lambda c: mc.train_tiny(out=c.new, steps=1, duplicates="8"), "K:N"),
    (
        "train-tiny-user-folder",
        lambda c: mc.train_tiny(out=c.d / "users-folder", steps=1, overwrite=True),
        "did not make",
    ),
    (
        "finetune-seed",
        lambda c: mc.finetune("toy", _m(c), out=c.new, steps=1, seed=-5),
        "--seed must be",
    ),
    (
        "finetune-seq-len",
        lambda c: mc.finetune("toy", _m(c), out=c.new, steps=1, seq_len=4096),
        "--seq-len 4096 is longer than the context of toy",
    ),
    (
        "finetune-missing-data",
        lambda c: mc.finetune("toy", c.d / "nope.jsonl", out=c.new, steps=1),
        "does not exist",
    ),
    (
        "finetune-layout",
        lambda c: mc.finetune("toy", _m(c), out=c.new, layout="heap"),
        "unknown layout 'heap'",
    ),
    (
        "unlearn-seed",
        lambda c: mc.unlearn("toy", c.d / "forget.jsonl", _m(c), out=c.new, seed=2**64),
        "--seed must be a whole number in [0, 2**63 - 1]",
    ),
    (
        "unlearn-method",
        lambda c: mc.unlearn("toy", c.d / "forget.jsonl", _m(c), out=c.new, method="erase"),
        "unknown unlearning method 'erase'",
    ),
    (
        "audit-table-missing",
        lambda c: mc.audit_table(c.d / "nope.json", out=c.new),
        "does not exist",
    ),
    (
        "audit-table-not-json",
        lambda c: mc.audit_table(c.d / "inst.json", out=c.new),
        "not valid JSON",
    ),
    # ---- issue 29: memclaim.acr, refused before any search or store
    (
        "acr-seed",
        lambda c: mc.acr("toy", c.d / "m.jsonl", c.d / "c.jsonl", out=c.new, seed=2**64),
        "--seed must be <= 9223372036854775807",
    ),
    (
        "acr-steps-float",
        lambda c: mc.acr("toy", c.d / "m.jsonl", c.d / "c.jsonl", out=c.new, steps=1.5),
        "--steps must be an integer, got 1.5",
    ),
    (
        "acr-top-k-bool",
        lambda c: mc.acr("toy", c.d / "m.jsonl", c.d / "c.jsonl", out=c.new, top_k=True),
        "--top-k must be an integer, got True",
    ),
    (
        "acr-criterion-nan",
        lambda c: mc.acr("toy", c.d / "m.jsonl", c.d / "c.jsonl", out=c.new, criterion="prob:nan"),
        "b must lie strictly between 0 and 1",
    ),
    (
        "acr-retokenize",
        lambda c: mc.acr("toy", c.d / "m.jsonl", c.d / "c.jsonl", out=c.new, retokenize="no"),
        "retokenize must be True or False, got 'no'",
    ),
    (
        "acr-keyword",
        lambda c: mc.acr("toy", c.d / "m.jsonl", c.d / "c.jsonl", out=c.new, critrion="argmax"),
        "did you mean criterion=",
    ),
    (
        "acr-same-file",
        lambda c: mc.acr("toy", c.d / "m.jsonl", c.d / "m.jsonl", out=c.new),
        "are the same file",
    ),
    # ---- reproduce (issue 26: the CLI's `reproduce` through the API)
    (
        "reproduce-unknown",
        lambda c: mc.reproduce("nosuch", out_dir=c.new),
        "unknown reproduction 'nosuch'",
    ),
    ("reproduce-name-not-text", lambda c: mc.reproduce(3, out_dir=c.new), "unknown reproduction 3"),
    (
        "reproduce-seed",
        lambda c: mc.reproduce("staircase", quick=True, seed=-1, out_dir=c.new),
        "--seed must be >= 0, got -1",
    ),
    (
        "reproduce-seed-huge",
        lambda c: mc.reproduce("staircase", quick=True, seed=2**64, out_dir=c.new),
        "seed must be",
    ),
    (
        "reproduce-out-file",
        lambda c: mc.reproduce("staircase", quick=True, out_dir=c.file / "sub"),
        "is a file, not a folder",
    ),
]


def test_the_api_table_has_at_least_100_rows_over_the_public_functions():
    assert len(ROWS) >= 100
    assert len({r[0] for r in ROWS}) == len(ROWS)  # ids are unique
    called = {r[0].split("-")[0] for r in ROWS}
    assert {
        "load",
        "score",
        "test",
        "population",
        "census",
        "audit",
        "budget",
        "dp",
        "train",
        "finetune",
        "unlearn",
        "acr",
    } <= called


@pytest.mark.parametrize(
    "call, phrase", [pytest.param(call, phrase, id=cid) for cid, call, phrase in ROWS]
)
def test_bad_api_input_raises_a_memclaim_error_and_changes_nothing(
    call,
    phrase,
    data,
    previous,
    tmp_path,  # noqa: F811
    monkeypatch,
):
    rep = tmp_path / "out"
    shutil.copytree(previous, rep)
    afile = tmp_path / "a-file.txt"
    afile.write_text("keep me")
    cwd = tmp_path / "cwd" / "work"
    cwd.mkdir(parents=True)
    (cwd / "mine.txt").write_text("the user's file")
    monkeypatch.chdir(cwd)
    c = SimpleNamespace(
        d=data,
        rep=rep,
        store=rep / "store",
        new=tmp_path / "new-out",
        file=afile,
        tmp=tmp_path,
        monkeypatch=monkeypatch,
        cleanup=[],
    )
    before = {"rep": _snapshot(rep), "data": _snapshot(data), "cwd": _snapshot(tmp_path / "cwd")}
    try:
        with pytest.raises(Exception) as info:
            call(c)
    finally:
        for f in c.cleanup:
            f()
    exc = info.value
    assert isinstance(exc, MemclaimError) and isinstance(exc, ValueError), (
        f"{type(exc).__name__}: {exc}"
    )
    text = " ".join(str(exc).split())
    assert phrase in text, text
    assert exc.hint, f"no fix for: {exc}"
    assert _snapshot(rep) == before["rep"]  # the previous store and report are untouched
    assert _snapshot(data) == before["data"]  # so are the inputs
    assert _snapshot(tmp_path / "cwd") == before["cwd"]
    assert afile.read_text() == "keep me"
    assert not c.new.exists()  # nothing was started
    assert not [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]
    assert not (data / "RAN_CUSTOM_CODE").exists()
    assert os.getcwd() == str(cwd)


# ---------------------------------------------------------------- issue 25: what is not an error
def test_exclude_control_removes_exactly_the_id_given(tmp_path):
    """Item 4: --exclude-control 'x#0' removed record 'x' (the window x#0 of record x) instead of the
    control whose own id is 'x#0'; an exact control id now wins over a window alias."""
    texts = [
        "The first control passage, written for the purpose of this test.",
        "A second control passage with other words in it, also new prose.",
        "Third: a control that sits among the others and is never excluded.",
    ]
    ctl = [
        {"id": "x", "text": texts[0]},
        {"id": "x#0", "text": texts[1]},
        {"id": "y", "text": texts[2]},
    ]
    mem = [{"id": "m1", "text": "A member text that the test scores as its candidate one."}]
    store = tmp_path / "s"
    mc.score(
        "toy", mem, prefix_tokens=4, suffix_tokens=4, policies=["full"], out=store, label="members"
    )
    mc.score(
        "toy", ctl, prefix_tokens=4, suffix_tokens=4, policies=["full"], out=store, label="controls"
    )
    res = mc.test(
        store,
        store,
        run="members",
        controls_run="controls",
        alpha="0.5",
        exclude_control_ids=["x#0"],
    )
    assert res.claim.excluded_control_ids == ("x#0",)
    res = mc.test(
        store,
        store,
        run="members",
        controls_run="controls",
        alpha="0.5",
        exclude_control_ids=["y#0"],
    )
    assert res.claim.excluded_control_ids == ("y",)  # a window id still names its passage


def test_census_takes_a_whole_float_stride(tmp_path, data):  # noqa: F811
    """Item 10: census(stride=8.0) raised a TypeError from the slicing; 8.0 is the stride 8."""
    a = mc.census(
        "toy",
        data / "doc.txt",
        data / "ctl.txt",
        stride=8.0,
        prefix_tokens=8,
        suffix_tokens=8,
        policies=["full"],
    )
    b = mc.census(
        "toy",
        data / "doc.txt",
        data / "ctl.txt",
        stride=8,
        prefix_tokens=8,
        suffix_tokens=8,
        policies=["full"],
    )
    assert a.to_dict()["pairs"] == b.to_dict()["pairs"]


def test_epsilon_beside_mu_is_explained_not_dropped(capsys):
    """Item 7: `dp bounds --mu 1 --epsilon 1` named only G_mu; the guarantee line now says that
    --epsilon is no second guarantee and what it adds."""
    from memclaim.cli.main import main

    b = mc.dp_bounds(mu=1, epsilon=2, neighbors="add-remove")
    assert (
        "--epsilon 2 is not a second guarantee: every cap comes from G_mu alone" in b.guarantee_note
    )
    assert b.value("delta(eps) of mu-GDP at eps = 2") > 0
    assert mc.dp_bounds(mu=1, neighbors="add-remove").value("eta(f)") == b.value("eta(f)")
    assert mc.dp_bounds(mu=1, neighbors="add-remove").guarantee_note is None
    from memclaim.report.dp import dp_bounds_report

    assert (
        "is not a second guarantee" in dp_bounds_report(b.to_dict()).markdown
    )  # the report says it too
    assert (
        main(["dp", "bounds", "--mu", "1", "--epsilon", "2", "--neighbors", "add-remove", "--json"])
        == 0
    )
    assert "is not a second guarantee" in json.loads(capsys.readouterr().out)["guarantee_note"]
    assert main(["dp", "bounds", "--mu", "1", "--epsilon", "2", "--neighbors", "add-remove"]) == 0
    assert "note: --epsilon 2 is not a second guarantee" in " ".join(
        capsys.readouterr().out.split()
    )


def test_out_of_memory_names_only_the_commands_own_options():
    """Item 9: `dp bounds` that ran out of memory was told to lower --batch-size, which it does not have."""
    from memclaim.cli.main import _memory_text

    assert "--batch-size" not in _memory_text(["dp", "bounds", "--epsilon", "1"])
    assert "a coarser --pld-grid" in _memory_text(["dp", "bounds", "--epsilon", "1"])
    assert "a smaller --batch-size, or a smaller --unit-size" in _memory_text(
        ["score", "toy", "--input", "x"]
    )
    assert "`memclaim budget --help`" in _memory_text(["budget", "--p", "0.1"])


def test_the_cost_checks_let_ordinary_settings_through():
    """Item 9: the estimates refuse the absurd, not the ordinary: 3000 DP-SGD steps, 8 copies of
    every kind of guarantee, a 20-character template width, widths up to the stated limit."""
    from memclaim.privacy.pld import MAX_PLD_POINTS, check_dpsgd_size, pld_points
    from memclaim.privacy.tradeoff import approx, check_group_cost, gdp, pure
    from memclaim.scoring.prompts import MAX_TEMPLATE_WIDTH, check_template

    check_dpsgd_size(noise_multiplier=1.1, sampling_rate=0.01, steps=3000)
    assert 10**5 < pld_points(noise_multiplier=1.1, sampling_rate=0.01, steps=3000) < MAX_PLD_POINTS
    for f in (
        pure(1.0, neighbors="add-remove"),
        approx(1.0, 1e-5, neighbors="add-remove"),
        gdp(1.0, neighbors="add-remove"),
        "points",
    ):
        check_group_cost(f, 8)
    check_group_cost(gdp(1.0, neighbors="add-remove"), 10**12)  # G_mu^(k) = G_(k mu): no cost in k
    check_template("{prefix:>20}|{suffix}")
    check_template("{prefix:>%d}" % MAX_TEMPLATE_WIDTH)
    with pytest.raises(MemclaimError, match="pads {prefix} to 100,001 characters"):
        check_template("{prefix:>%d}" % (MAX_TEMPLATE_WIDTH + 1))


def test_pld_points_is_the_size_dp_accounting_composes():
    """The estimate is dp_accounting's own: the composed PLD of a small run has exactly as many
    points as pld_points says (larger direction)."""
    import dp_accounting as dpa

    from memclaim.privacy.pld import pld_points

    for sigma, q, steps in ((1.1, 0.01, 50), (2.0, 0.1, 7)):
        pld = dpa.pld.privacy_loss_distribution.from_gaussian_mechanism(
            standard_deviation=sigma,
            sensitivity=1.0,
            pessimistic_estimate=True,
            value_discretization_interval=1e-3,
            sampling_prob=q,
            use_connect_dots=True,
            neighboring_relation=dpa.NeighboringRelation.ADD_OR_REMOVE_ONE,
        ).self_compose(steps)
        sizes = [p.size for p in (pld._pmf_remove, pld._pmf_add) if p is not None]
        assert pld_points(noise_multiplier=sigma, sampling_rate=q, steps=steps, grid=1e-3) >= max(
            sizes
        )
        assert (
            pld_points(noise_multiplier=sigma, sampling_rate=q, steps=steps, grid=1e-3)
            <= max(sizes) + 2
        )
