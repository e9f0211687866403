"""Issue 12 D16: bad inputs across every command, table-driven.

Each case runs ``memclaim.cli.main.main(argv)`` in-process and checks that it stops with exit
status 2 and ``error: ... fix: ...`` (a phrase of the message given per case), never a
traceback, and that it changed nothing: a previous store and report in ``--out`` (copied from
one real ``population`` run) are byte-identical afterwards, a new ``--out`` was not created, and
no temporary file is left anywhere. Cases that need a model use the tiny GPT ("toy"); the rest
need none. The concurrency half of D16 is in tests/store/test_store_concurrency.py.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from memclaim.cli.main import main

# the shared inputs are cut from the tiny GPT's corpus and its folder (trained once, cached)
pytestmark = pytest.mark.integration
NO_GPU = pytest.mark.skipif(
    __import__("torch").cuda.is_available(), reason="needs a machine without a GPU"
)
LINUX = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="uses /proc, which refuses any mkdir"
)
try:
    import datasets as _datasets  # noqa: F401

    DATASETS = pytest.mark.skipif(False, reason="")
except ImportError:
    DATASETS = pytest.mark.skip(
        reason="the 'datasets' extra is not installed (pip install 'memclaim[datasets]')"
    )


def _write_gguf(path: Path, *, truncate: int = 0) -> Path:
    import gguf
    import numpy as np

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(1)
    w.add_tensor("token_embd.weight", np.zeros((16, 8), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    if truncate:
        data = path.read_bytes()
        path.write_bytes(data[:-truncate])
    return path


def _broken_models(d: Path, toy: Path) -> None:
    """Issue 25 item 2: copies of the tiny GPT whose weights do not match the config (a tensor
    left out or added, a layer more in config.json, no tensors at all) or hold NaN."""
    from safetensors.torch import load_file, save_file

    sd = load_file(str(toy / "model.safetensors"))
    variants = {
        "missing-tensor-model": (
            {k: v for k, v in sd.items() if k != "transformer.h.1.mlp.c_fc.weight"},
            {},
        ),
        "extra-tensor-model": (
            {
                **sd,
                "transformer.h.9.mlp.c_fc.weight": sd["transformer.h.1.mlp.c_fc.weight"].clone(),
            },
            {},
        ),
        "extra-layer-model": (None, {"n_layer": 3}),
        "empty-weights-model": ({}, {}),
        "nan-model": (
            {
                k: (v.clone().fill_(float("nan")) if k.endswith("ln_f.weight") else v)
                for k, v in sd.items()
            },
            {},
        ),
    }
    for name, (tensors, cfg) in variants.items():
        shutil.copytree(toy, d / name)
        if tensors is not None:
            save_file(tensors, str(d / name / "model.safetensors"), metadata={"format": "pt"})
        if cfg:
            c = json.loads((d / name / "config.json").read_text())
            c.update(cfg)
            (d / name / "config.json").write_text(json.dumps(c))


@pytest.fixture(scope="session")
def data(tmp_path_factory) -> Path:
    """Inputs, good and bad, shared by every case (none of them is ever written by a case)."""
    d = tmp_path_factory.mktemp("bad-inputs")
    from memclaim.train.toy import ensure_toy_model, toy_data

    toy = ensure_toy_model()
    td = toy_data()
    mem = [r for r in td["planted"] if r["id"].startswith("member")][:8]
    ctl = [r for r in td["held_out"] if r["id"].startswith("control")][:8]
    (d / "m.jsonl").write_text(
        "".join(json.dumps({"id": r["id"], "text": r["text"]}) + "\n" for r in mem)
    )
    (d / "c.jsonl").write_text(
        "".join(json.dumps({"id": r["id"], "text": r["text"]}) + "\n" for r in ctl)
    )
    shutil.copy(d / "m.jsonl", d / "m_copy.jsonl")
    (d / "long.jsonl").write_text(
        json.dumps({"id": "long", "text": " ".join([mem[0]["text"]] * 10)}) + "\n"
    )
    (d / "long_c.jsonl").write_text(
        json.dumps({"id": "long_c", "text": " ".join([ctl[0]["text"]] * 10)}) + "\n"
    )
    (d / "doc.txt").write_text(" ".join(r["text"] for r in mem[:3]))
    (d / "ctl.txt").write_text(" ".join(r["text"] for r in ctl[:3]))
    (d / "short.txt").write_text("two words")
    (d / "bad.csv").write_text(
        'id,text\n1,"an open quote that never closes\n2,a second row\n3,a third row\n'
    )
    (d / "empty.jsonl").write_text("\n\n")
    (d / "latin1.txt").write_bytes("caf\xe9 au lait\n".encode("latin-1"))
    (d / "notes.py").write_text("print('hi')\n")
    (d / "s1.csv").write_text("id,score\na,-1\nb,-2\nc,-3\n")
    (d / "s1_copy.csv").write_text("id,score\na,-1\nb,-2\nc,-3\n")
    (d / "s2.csv").write_text("id,score\nx,-1.5\ny,-2.5\nz,-3.5\n")
    # procedure records of score files computed on the CPU in float32 and on a GPU in bfloat16 (issue 14)
    proc = {
        "model": {"name": "m", "fingerprint": "f" * 64, "dtype": "float32", "device_class": "cpu"},
        "policy": "full",
        "prefix_tokens": 8,
        "suffix_tokens": 8,
    }
    (d / "proc_cpu.json").write_text(json.dumps(proc))
    (d / "proc_gpu.json").write_text(
        json.dumps(
            {**proc, "model": {**proc["model"], "dtype": "bfloat16", "device_class": "cuda"}}
        )
    )
    (d / "s_nan.csv").write_text("id,score\nx,minus one\n")
    (d / "s_open.csv").write_text('id,score\n"x,-1\ny,-2\n')
    (d / "proc.json").write_text(json.dumps({"policy": "full"}))
    (d / "forget.jsonl").write_text(json.dumps({"id": "f", "prefix": "ab", "suffix": " cd"}) + "\n")
    (d / "inst.json").write_text("[1, 2")
    (d / "table.json").write_text(
        json.dumps(
            {
                "instances": [
                    {"name": "toy", "model": "toy", "members": "m.jsonl", "nonmembers": "c.jsonl"}
                ]
            }
        )
    )
    (d / "afile").write_text("a file, not a folder")
    (d / "kappa.jsonl").write_text('{"kappa": 0.1}\n{"kappa": 0.2}\n')
    (d / "kappa_bad.jsonl").write_text('{"kappa": 0.1}\n{"kappa": 1.5}\n{kappa: 0.1}\n')
    (d / "kappa_m3.jsonl").write_text('{"kappa_lo": 0.1, "kappa_hi": 0.2, "m": 3}\n')
    corrupt = d / "corrupt-model"
    shutil.copytree(toy, corrupt)
    w = (corrupt / "model.safetensors").read_bytes()
    (corrupt / "model.safetensors").write_bytes(w[: len(w) // 2])  # a download cut in half
    custom = d / "custom-code-model"
    shutil.copytree(toy, custom)
    cfg = json.loads((custom / "config.json").read_text())
    cfg.update(
        model_type="evilgpt",
        auto_map={
            "AutoConfig": "configuration_evil.EvilConfig",
            "AutoModelForCausalLM": "modeling_evil.EvilLM",
        },
    )
    (custom / "config.json").write_text(json.dumps(cfg))
    for f in ("configuration_evil.py", "modeling_evil.py"):
        (custom / f).write_text(f"open({str(d / 'RAN_CUSTOM_CODE')!r}, 'w').write('x')\n")
    _write_gguf(d / "cut.gguf", truncate=100)
    (d / "not.gguf").write_bytes(b"GGUF\x03\x00")
    user = d / "users-folder"
    user.mkdir()
    (user / "thesis.tex").write_text("years of work")
    # issue 15 item 7: Arrow files and datasets folders that are not what they should be
    (d / "not.arrow").write_text("id,text\na,this is a CSV file named .arrow\n")
    (d / "not.feather").write_bytes(b"FEA1 but then nothing")
    (d / "plain-folder").mkdir()
    (d / "plain-folder" / "notes.txt").write_text("a folder of notes, not a dataset")
    _broken_models(d, toy)
    # issue 25 item 8: folders memclaim did not make, one with the user's own temporary file
    (user / ".thesis.tex.swp.tmp").write_text("an editor's temporary file")
    (d / "foreign-report").mkdir()
    (d / "foreign-report" / "report.html").write_text("<p>someone else's report</p>")
    (d / "foreign-store" / "store").mkdir(parents=True)
    (d / "foreign-store" / "store" / "notes.txt").write_text("not a store")
    issue25_inputs(d, toy, mem, ctl)
    try:
        import datasets
    except ImportError:  # the rows that need it are skipped (DATASETS below)
        return d
    datasets.disable_progress_bars()
    datasets.Dataset.from_list([{"id": r["id"], "sentence": r["text"]} for r in mem]).save_to_disk(
        str(d / "ds-notext")
    )
    ds = datasets.Dataset.from_list([{"id": r["id"], "text": r["text"]} for r in mem])
    datasets.DatasetDict(train=ds, test=ds).save_to_disk(str(d / "ds-dict"))
    datasets.enable_progress_bars()
    return d


@pytest.fixture(scope="session")
def previous(tmp_path_factory, data) -> Path:
    """A real population run's output (store + report): what every case's --out holds before."""
    out = tmp_path_factory.mktemp("previous") / "out"
    rc = main(
        [
            "population",
            "toy",
            "--members",
            str(data / "m.jsonl"),
            "--controls",
            str(data / "c.jsonl"),
            "--prefix-tokens",
            "8",
            "--suffix-tokens",
            "8",
            "--policy",
            "full",
            "--alpha",
            "0.2",
            "--out",
            str(out),
            "--no-progress",
            "--json",
        ]
    )
    assert rc == 0
    assert (out / "report.json").exists() and (out / "store" / "manifest.json").exists()
    return out


def _snapshot(root: Path) -> dict:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


# (case id, argv with {d} data, {rep} previous output, {store} its store, {new} a path that must
# stay absent, {file} a regular file; phrase the message must contain; whether it loads the toy's tokenizer)
S = "score toy --input {d}/m.jsonl --prefix-tokens 8 --suffix-tokens 8 --out {store} --no-progress"
P = "population toy --members {d}/m.jsonl --controls {d}/c.jsonl --prefix-tokens 8 --suffix-tokens 8 --out {rep}"
C = (
    "census toy --document {d}/doc.txt --control {d}/ctl.txt --stride 8 --prefix-tokens 8 --suffix-tokens 8 "
    "--policy full --out {rep}"
)
T = "test --candidates {d}/s1.csv --controls {d}/s2.csv --out {rep}"
TS = "test --candidates {store} --controls {store}"
A = "audit toy --members {d}/m.jsonl --controls {d}/c.jsonl --prefix-tokens 8 --suffix-tokens 8 --out {rep}"
R = "acr toy --members {d}/m.jsonl --controls {d}/c.jsonl --out {new}"
CASES = [
    # ---- score: the model and the windows
    (
        "score-empty-prompt",
        "score toy --input {d}/m.jsonl --prefix-tokens 0 --sot none --out {store}",
        "empty prompt",
        1,
    ),
    (
        "score-longer-than-context",
        "score toy --input {d}/long.jsonl --prefix-tokens 200 --suffix-tokens 100 --out {store}",
        "more than the context of toy (256 positions)",
        1,
    ),
    (
        "score-template-past-context",
        "score toy --input {d}/long.jsonl --prefix-tokens 250 --suffix-tokens 6 "
        "--prompt-template 'Repeat: {{prefix}}' --out {store}",
        "more than the context",
        1,
    ),
    (
        "score-truncated-safetensors",
        "score {d}/corrupt-model --input {d}/m.jsonl --prefix-tokens 8 --suffix-tokens 8 "
        "--out {store}",
        "is corrupt or truncated",
        0,
    ),
    (
        "score-custom-code",
        "score {d}/custom-code-model --input {d}/m.jsonl --out {store}",
        "--trust-remote-code",
        0,
    ),
    (
        "score-truncated-gguf",
        "score {d}/cut.gguf --input {d}/m.jsonl --out {new}",
        "not a readable GGUF file",
        0,
    ),
    (
        "score-not-gguf",
        "score {d}/not.gguf --input {d}/m.jsonl --out {new}",
        "not a readable GGUF file",
        0,
    ),
    (
        "score-csv-open-quote",
        "score toy --input {d}/bad.csv --prefix-tokens 2 --suffix-tokens 2 --out {store}",
        "malformed CSV in the record starting on line 2",
        1,
    ),
    (
        "score-device-input",
        "score toy --input /dev/zero --format txt --out {store}",
        "not a regular file",
        1,
    ),
    ("score-bad-policy", S + " --policy bogus", "unknown decoding policy component", 1),
    # ---- issue 15: windows longer than the texts name lengths that fit; an old flag beside its new name
    (
        "population-texts-shorter-than-window",
        "population toy --members {d}/m.jsonl --controls {d}/c.jsonl "
        "--prefix-tokens 200 --suffix-tokens 50 --out {rep}",
        "use lengths that fit: --prefix-tokens",
        1,
    ),
    (
        "census-document-shorter-than-window",
        "census toy --document {d}/doc.txt --control {d}/ctl.txt --stride 8 "
        "--prefix-tokens 200 --suffix-tokens 50 --policy full --out {rep}",
        "keeps the document",
        1,
    ),
    (
        "audit-old-and-new-flag",
        A + " --nonmembers {d}/c.jsonl",
        "--nonmembers is the old name of --controls",
        0,
    ),
    (
        "test-old-and-new-flag",
        T + " --score-column score --score-field score",
        "--score-column is the old name",
        0,
    ),
    ("score-top-k-0", S + " --policy top-k:0", "bad value '0' for top-k", 1),
    (
        "score-batch-0",
        S + " --batch-size 0",
        "Invalid value for '--batch-size': '0' is not a whole number >= 1 or 'auto'",
        0,
    ),
    (
        "score-batch-word",
        S + " --batch-size lots",
        "'lots' is not a whole number >= 1 or 'auto'",
        0,
    ),
    (
        "audit-batch-negative",
        A + " --batch-size -4",
        "'-4' is not a whole number >= 1 or 'auto'",
        1,
    ),
    ("score-unit-0", S + " --unit-size 0", "unit size must be >= 1", 1),
    # ---- issue 30: the statistics a scoring command computes
    ("score-stats-unknown", S + " --stats loss", "unknown statistic(s) ['loss']", 1),
    ("score-stats-dangling-plus", S + " --stats 'rank+'", "malformed statistics 'rank+'", 1),
    (
        "population-stats-unknown",
        P + " --stats census+entropy",
        "unknown statistic(s) ['entropy']",
        1,
    ),
    ("score-stats-empty", S + " --stats ''", "malformed statistics ''", 1),
    # ---- issue 28: --limit N (the first N texts, or a document's first N windows)
    (
        "score-limit-0",
        S + " --limit 0",
        "Invalid value for '--limit': 0 is not in the range x>=1",
        0,
    ),
    ("population-limit-word", P + " --limit some", "'some' is not a valid integer", 0),
    (
        "census-limit-negative",
        C + " --limit -3",
        "Invalid value for '--limit': -3 is not in the range x>=1",
        0,
    ),
    (
        "audit-limit-0",
        A + " --limit 0",
        "Invalid value for '--limit': 0 is not in the range x>=1",
        0,
    ),
    ("score-threads-0", S + " --threads 0", "--threads must be >= 1", 0),
    ("score-threads-absurd", S + " --threads 100000", "threads per CPU core", 0),
    ("score-template-field", S + " --prompt-template '{{bad}}'", "unknown fields ['bad']", 1),
    ("score-template-brace", S + " --prompt-template '{{prefix'", "bad prompt template", 1),
    ("score-no-chat-template", S + " --chat-template", "no chat template", 1),
    ("score-sot-unknown", S + " --sot '<nosuch>'", "is not in this tokenizer's vocabulary", 1),
    ("score-sot-out-of-vocab", S + " --sot 99999", "outside the vocabulary", 1),
    ("score-text-field", S + " --text-field nope", "has no text field 'nope'", 1),
    ("score-nv-negative", S + " --near-verbatim -1", "near-verbatim epsilon", 1),
    ("score-beam-alone", S + " --beam 4", "--beam applies to --near-verbatim", 1),
    ("score-missing-input", "score toy --input {d}/nope.jsonl --out {store}", "does not exist", 1),
    ("score-empty-input", "score toy --input {d}/empty.jsonl --out {store}", "is empty", 1),
    ("score-latin1", "score toy --input {d}/latin1.txt --out {store}", "not valid UTF-8", 1),
    (
        "score-unknown-format",
        "score toy --input {d}/notes.py --out {store}",
        "cannot tell the format",
        1,
    ),
    (
        "score-not-arrow",
        "score toy --input {d}/not.arrow --out {store}",
        "is not a readable Arrow file",
        1,
    ),
    (
        "score-not-feather",
        "score toy --input {d}/not.feather --out {store}",
        "is not a readable Arrow file",
        1,
    ),
    (
        "score-plain-folder",
        "score toy --input {d}/plain-folder --out {store}",
        "is a folder, but not one written by datasets' save_to_disk",
        1,
    ),
    (
        "score-format-datasets-file",
        "score toy --input {d}/m.jsonl --format datasets --out {store}",
        "--format datasets needs a folder",
        1,
    ),
    pytest.param(
        "score-datasets-no-text",
        "score toy --input {d}/ds-notext --out {store}",
        "cannot find a text field among ['id', 'sentence']",
        1,
        marks=DATASETS,
        id="score-datasets-no-text",
    ),
    (
        "score-both-inputs",
        "score toy --input {d}/m.jsonl --document {d}/doc.txt --out {store}",
        "exactly one of",
        0,
    ),
    (
        "score-no-stride",
        "score toy --document {d}/doc.txt --out {store}",
        "--document needs --stride",
        1,
    ),
    (
        "score-stride-0",
        "score toy --document {d}/doc.txt --stride 0 --out {store}",
        "stride must be >= 1",
        1,
    ),
    (
        "score-unknown-model",
        "score nosuchmodel --input {d}/m.jsonl --out {store}",
        "neither a named model",
        0,
    ),
    (
        "score-folder-not-model",
        "score {d} --input {d}/m.jsonl --out {store}",
        "has no config.json",
        0,
    ),
    ("score-ray-workers", S + " --backend ray --workers 0", "--workers must be >= 1", 1),
    ("score-ray-option-local", S + " --workers 2", "only apply with --backend ray", 1),
    # issue 27: a served model (--backend openai); nothing here reaches a server that answers
    ("score-served-no-url", S + " --backend openai", "--backend openai needs --url", 1),
    (
        "score-served-url-local",
        S + " --url http://127.0.0.1:1",
        "--url applies only with --backend openai",
        1,
    ),
    (
        "score-served-url-form",
        S + " --backend openai --url localhost:8000",
        "--url 'localhost:8000' is not an http(s) URL",
        1,
    ),
    (
        "score-served-refused",
        S + " --backend openai --url http://127.0.0.1:1",
        "cannot reach the server at http://127.0.0.1:1: cannot connect",
        1,
    ),
    (
        "score-served-key-env",
        S + " --backend openai --url http://127.0.0.1:1 --api-key-env MEMCLAIM_NO_SUCH_KEY",
        "--api-key-env MEMCLAIM_NO_SUCH_KEY: the environment variable is not set",
        1,
    ),
    (
        "score-served-key-both",
        S + " --backend openai --url http://127.0.0.1:1 --api-key-env A --api-key-file {file}",
        "give one of --api-key-env and --api-key-file",
        1,
    ),
    (
        "score-served-concurrency",
        S + " --backend openai --url http://127.0.0.1:1 --max-concurrency 0",
        "--max-concurrency must be >= 1",
        1,
    ),
    (
        "score-served-dtype",
        S + " --backend openai --url http://127.0.0.1:1 --dtype float32",
        "--dtype places or loads weights in this process",
        1,
    ),
    (
        "score-served-ray-option",
        S + " --backend openai --url http://127.0.0.1:1 --workers 2",
        "--workers only apply with --backend ray",
        1,
    ),
    (
        "score-served-bounds-local",
        S + " --served-bounds",
        "--served-bounds applies only with --backend openai",
        1,
    ),
    # issue 27: a served model's audit refuses what the server's top-K cannot give, before any request
    ("audit-served-no-url", A + " --backend openai", "--backend openai needs --url", 1),
    (
        "audit-served-url-local",
        A + " --url http://127.0.0.1:1",
        "--url applies only with --backend openai",
        1,
    ),
    (
        "audit-served-min-k++",
        A + " --backend openai --url http://127.0.0.1:1 --attacks loss,min-k++",
        "attack 'min-k++' needs token_mean, token_std",
        1,
    ),
    (
        "audit-served-shadows",
        A + " --backend openai --url http://127.0.0.1:1 --shadows 4",
        "--shadows 4: shadow models are trained from the audited model's weights",
        1,
    ),
    (
        "audit-served-reference",
        A + " --backend openai --url http://127.0.0.1:1 --reference toy",
        "--reference with --backend openai",
        1,
    ),
    (
        "audit-served-unreachable",
        A + " --backend openai --url http://127.0.0.1:1",
        "cannot reach the server at http://127.0.0.1:1: cannot connect",
        1,
    ),
    # issue 27: sampling estimates (--estimate sample:N) need a server; a bad N fails first
    (
        "score-estimate-n",
        S + " --backend openai --url http://127.0.0.1:1 --estimate sample:0",
        "--estimate 'sample:0': N must be an integer >= 1",
        1,
    ),
    ("score-estimate-kind", S + " --estimate census:4", "--estimate 'census:4' is not sample:N", 1),
    ("score-estimate-local", S + " --estimate sample:4", "--estimate samples a served model", 1),
    (
        "score-estimate-stats",
        S + " --backend openai --url http://127.0.0.1:1 --estimate sample:4 --stats all",
        "--stats do not apply to --estimate",
        1,
    ),
    (
        "score-estimate-unreachable",
        "score toy --input {d}/m.jsonl --prefix-tokens 8 --suffix-tokens 8 --out {new} "
        "--backend openai --url http://127.0.0.1:1 --estimate sample:4",
        "cannot reach the server at http://127.0.0.1:1",
        1,
    ),
    (
        "score-estimate-into-store",
        S + " --backend openai --url http://127.0.0.1:1 --estimate sample:4",
        "holds files memclaim's sampling estimate did not write",
        1,
    ),
    ("score-seed-alone", S + " --seed 3", "--seed applies to sampling estimates only", 1),
    ("score-out-is-file", "score toy --input {d}/m.jsonl --out {file}", "is a file", 0),
    pytest.param(
        "score-out-unwritable",
        "score toy --input {d}/m.jsonl --prefix-tokens 8 --suffix-tokens 8 "
        "--out /proc/memclaim-store",
        "cannot write",
        1,
        marks=LINUX,
        id="score-out-unwritable",
    ),
    # ---- test: files and stores
    (
        "test-same-file",
        "test --candidates {d}/s1.csv --controls {d}/s1.csv --out {rep}",
        "are the same file",
        0,
    ),
    (
        "test-identical-files",
        "test --candidates {d}/s1.csv --controls {d}/s1_copy.csv --out {rep}",
        "identical contents",
        0,
    ),
    (
        "test-one-procedure",
        T + " --candidates-procedure {d}/proc.json",
        "--controls-procedure is not",
        0,
    ),
    (
        "test-negative-budget",
        T + " --budget -5",
        "--budget must be a finite number of queries >= 1",
        0,
    ),
    ("test-nan-budget", T + " --budget nan", "--budget must be a finite number", 0),
    ("test-alpha-2", T + " --alpha 2", "alpha must lie strictly between 0 and 1", 0),
    ("test-alpha-text", T + " --alpha abc", "alpha must be a number", 0),
    (
        "test-confidence-1",
        T + " --confidence 1",
        "--confidence must lie strictly between 0 and 1",
        0,
    ),
    ("test-fdr-2", T + " --fdr 2", "--fdr must lie strictly between 0 and 1", 0),
    (
        "test-score-not-number",
        "test --candidates {d}/s_nan.csv --controls {d}/s2.csv --out {rep}",
        "is not a number",
        0,
    ),
    (
        "test-scores-not-arrow",
        "test --candidates {d}/not.feather --controls {d}/s2.csv --out {rep}",
        "is not a readable Arrow file",
        0,
    ),
    (
        "test-score-open-quote",
        "test --candidates {d}/s_open.csv --controls {d}/s2.csv --out {rep}",
        "malformed CSV",
        0,
    ),
    (
        "test-store-and-file",
        TS + " --controls {d}/s2.csv --run members --out {rep}",
        "both be score stores",
        0,
    ),
    ("test-store-needs-run", TS + " --out {rep}", "say which one with --run", 0),
    (
        "test-store-same-run",
        TS + " --run members --controls-run members --out {rep}",
        "are the same run",
        0,
    ),
    (
        "test-store-file-option",
        TS + " --run members --controls-run controls --kind prob --out {rep}",
        "applies to score files",
        0,
    ),
    ("test-nv-on-files", T + " --near-verbatim 1", "needs score stores on both sides", 0),
    (
        "test-store-missing-policy",
        TS + " --run members --controls-run controls --policy greedy --out {rep}",
        "was not scored in run",
        0,
    ),
    ("test-exclude-not-utf8", T + " --exclude-controls {d}/latin1.txt", "is not valid UTF-8", 0),
    (
        "test-store-damaged-run",
        "test --candidates {damaged} --run members --controls {damaged} --controls-run controls "
        "--policy full --out {rep}",
        "run.json' is unreadable",
        0,
    ),
    (
        "test-store-damaged-scores",
        "test --candidates {damaged} --run controls --controls {damaged} --controls-run "
        "members --policy full --out {rep}",
        "scores.parquet' is unreadable",
        0,
    ),
    pytest.param(
        "test-out-unwritable",
        "test --candidates {d}/s1.csv --controls {d}/s2.csv --out /proc/memclaim-rep",
        "cannot create the output folder",
        0,
        marks=LINUX,
        id="test-out-unwritable",
    ),
    # ---- population
    (
        "population-same-file",
        "population toy --members {d}/m.jsonl --controls {d}/m.jsonl --out {rep}",
        "are the same file",
        0,
    ),
    (
        "population-identical",
        "population toy --members {d}/m.jsonl --controls {d}/m_copy.jsonl --prefix-tokens 8 "
        "--suffix-tokens 8 --out {rep}",
        "identical contents",
        1,
    ),
    (
        "population-empty-prompt",
        "population toy --members {d}/m.jsonl --controls {d}/c.jsonl --prefix-tokens 0 "
        "--sot none --out {rep}",
        "--members: window",
        1,
    ),
    (
        "population-longer-than-context",
        "population toy --members {d}/long.jsonl --controls {d}/long_c.jsonl "
        "--prefix-tokens 200 --suffix-tokens 100 --out {new}",
        "more than the context",
        1,
    ),
    ("population-budget", P + " --budget -5", "--budget must be a finite number", 0),
    ("population-alpha-0", P + " --alpha 0", "alpha must lie strictly between 0 and 1", 0),
    pytest.param(
        "population-datasets-dict",
        "population toy --members {d}/ds-dict --controls {d}/c.jsonl "
        "--prefix-tokens 8 --suffix-tokens 8 --out {rep}",
        "is a datasets DatasetDict with the splits ['train', 'test']",
        1,
        marks=DATASETS,
        id="population-datasets-dict",
    ),
    (
        "population-controls-not-arrow",
        "population toy --members {d}/m.jsonl --controls {d}/not.arrow "
        "--prefix-tokens 8 --suffix-tokens 8 --out {rep}",
        "is not a readable Arrow file",
        1,
    ),
    # ---- census
    ("census-budget", C + " --budget -5", "--budget must be a finite number", 0),
    (
        "census-same-text",
        "census toy --document {d}/doc.txt --control {d}/doc.txt --stride 8 --out {rep}",
        "are the same text",
        0,
    ),
    (
        "census-greedy-first",
        "census toy --document {d}/doc.txt --control {d}/ctl.txt --stride 8 --policy greedy "
        "--policy full --out {rep}",
        "needs a probability score",
        0,
    ),
    (
        "census-unpaired",
        "census toy --document {d}/doc.txt --stride 8 --out {rep}",
        "pair up in order",
        0,
    ),
    ("census-similarity", C + " --min-similarity 200", "--min-similarity must lie in [0, 100]", 0),
    (
        "census-short-document",
        "census toy --document {d}/short.txt --control {d}/ctl.txt --stride 8 --out {rep}",
        "shorter than one window",
        1,
    ),
    ("census-missing-spans", C + " --exclude-spans {d}/nope.txt", "does not exist", 0),
    # ---- budget
    ("budget-p-2", "budget --p 2", "p must be a probability in [0, 1]", 0),
    ("budget-p-text", "budget --p abc", "--p must be a number", 0),
    ("budget-log10-positive", "budget --log10-p 5", "log10 p must be <= 0", 0),
    ("budget-delta-0", "budget --p 0.5 --delta 0", "--delta must lie strictly between 0 and 1", 0),
    ("budget-none", "budget", "give exactly one of p, log10 p or log p", 0),
    ("budget-n-negative", "budget --p 0.5 --n -3", "finite number of queries >= 1", 0),
    # ---- dp
    (
        "dp-epsilon-negative",
        "dp bounds --epsilon -1 --neighbors replace",
        "epsilon must be finite and > 0",
        0,
    ),
    (
        "dp-copies-0",
        "dp bounds --epsilon 1 --neighbors replace-one --copies 0",
        "copies must be >= 1",
        0,
    ),
    (
        "dp-delta-1",
        "dp bounds --epsilon 1 --delta 1 --neighbors replace",
        "delta must lie in [0, 1)",
        0,
    ),
    (
        "dp-baseline-reversed",
        "dp bounds --epsilon 1 --neighbors replace-one --baseline 0.5,0.1 --list-size 1 --risk 0.1",
        "interval is reversed",
        0,
    ),
    (
        "dp-account-noise-0",
        "dp account --noise-multiplier 0 --sampling-rate 0.01 --steps 10 --delta 1e-5",
        "noise_multiplier must be finite and > 0",
        0,
    ),
    ("dp-plot-out-file", "dp plot --out {file} --neighbors replace", "is a file", 0),
    (
        "dp-baseline-custom-code",
        "dp baseline {d}/custom-code-model --prefix abc --secret-length 2 --list-size 1",
        "--trust-remote-code",
        0,
    ),
    (
        "dp-baseline-secret-0",
        "dp baseline toy --prefix abc --secret-length 0 --list-size 1",
        "secret_length must be >= 1",
        1,
    ),
    (
        "dp-corpus-samples-missing",
        "dp baseline --corpus-samples {new} --list-size 1",
        "does not exist",
        0,
    ),
    (
        "dp-corpus-samples-empty",
        "dp baseline --corpus-samples {d}/empty.jsonl --list-size 1",
        "holds no draws",
        0,
    ),
    (
        "dp-corpus-samples-not-utf8",
        "dp baseline --corpus-samples {d}/latin1.txt --list-size 1",
        "is not valid UTF-8",
        0,
    ),
    (
        "dp-corpus-samples-out-of-range",
        "dp baseline --corpus-samples {d}/kappa_bad.jsonl --list-size 1",
        "line 2: kappa = 1.5 is not in [0, 1]",
        0,
    ),
    (
        "dp-corpus-samples-other-m",
        "dp baseline --corpus-samples {d}/kappa_m3.jsonl --list-size 1",
        "list size m = 3, not --list-size 1",
        0,
    ),
    (
        "dp-corpus-samples-with-model",
        "dp baseline toy --corpus-samples {d}/kappa.jsonl --list-size 1",
        "--corpus-samples replaces MODEL",
        0,
    ),
    (
        "dp-corpus-samples-m-0",
        "dp baseline --corpus-samples {d}/kappa.jsonl --list-size 0",
        "m (list size) must be",
        0,
    ),
    (
        "dp-baseline-no-model",
        "dp baseline --prefix abc --secret-length 2 --list-size 1",
        "MODEL, --prefix and --secret-length are required",
        0,
    ),
    # ---- audit
    (
        "audit-plain-folder",
        "audit toy --members {d}/plain-folder --controls {d}/c.jsonl --out {rep}",
        "is a folder, but not one written by datasets' save_to_disk",
        1,
    ),
    pytest.param(
        "audit-datasets-no-text",
        "audit toy --members {d}/m.jsonl --controls {d}/ds-notext --out {rep}",
        "cannot find a text field among ['id', 'sentence']",
        1,
        marks=DATASETS,
        id="audit-datasets-no-text",
    ),
    (
        "audit-overlap",
        "audit toy --members {d}/m.jsonl --controls {d}/m.jsonl --out {rep}",
        "both members and non-members",
        1,
    ),
    ("audit-shadows-3", A + " --shadows 3", "even number >= 4", 1),
    ("audit-unknown-reference", A + " --reference nosuchmodel", "neither a named model", 1),
    (
        "audit-empty-prompt",
        "audit toy --members {d}/m.jsonl --controls {d}/c.jsonl --prefix-tokens 0 --sot none "
        "--out {new}",
        "empty prompt",
        1,
    ),
    ("audit-bad-attack", A + " --attacks nosuch", "unknown attack 'nosuch'", 1),
    (
        "audit-kappa",
        "audit toy --members {d}/m.jsonl --controls {d}/c.jsonl --kappa 2 --soundness-epsilon 1 "
        "--out {new}",
        "--kappa (the canaries' prior baseline) must lie in [0, 1]",
        1,
    ),
    (
        "audit-custom-code",
        "audit {d}/custom-code-model --members {d}/m.jsonl --controls {d}/c.jsonl --out {rep}",
        "--trust-remote-code",
        0,
    ),
    (
        "audit-table-missing",
        "audit table --instances {d}/nope.json --out {rep}",
        "does not exist",
        0,
    ),
    (
        "audit-table-not-json",
        "audit table --instances {d}/inst.json --out {rep}",
        "not valid JSON",
        0,
    ),
    # ---- reproduce
    ("reproduce-unknown", "reproduce nosuch --out {new}", "unknown reproduction 'nosuch'", 0),
    ("reproduce-no-name", "reproduce", "missing NAME", 0),
    ("reproduce-seed", "reproduce staircase --seed -1 --out {new}", "--seed must be >= 0", 0),
    ("reproduce-out-file", "reproduce staircase --out {file}", "is a file", 0),
    # ---- train
    (
        "train-overwrite-user-folder",
        "train tiny --out {d}/users-folder --overwrite --steps 1",
        "did not make",
        0,
    ),
    (
        "train-overwrite-cwd",
        "train tiny --out . --overwrite --steps 1",
        "is the current folder or one of its parents",
        0,
    ),
    (
        "train-overwrite-parent",
        "train tiny --out .. --overwrite --steps 1",
        "current folder or one of its parents",
        0,
    ),
    (
        "train-exists",
        "train tiny --out {d}/users-folder --steps 1",
        "exists and is not an empty folder",
        0,
    ),
    ("train-steps-0", "train tiny --out {new} --steps 0", "steps must be >= 1", 0),
    ("train-duplicates", "train tiny --out {new} --duplicates 8", "K:N", 0),
    (
        "train-finetune-seq-len",
        "train finetune toy --data {d}/m.jsonl --out {new} --steps 1 --seq-len 4096",
        "--seq-len 4096 is longer than the context of toy (256 positions)",
        1,
    ),
    (
        "train-finetune-custom-code",
        "train finetune {d}/custom-code-model --data {d}/m.jsonl --out {new} --steps 1",
        "--trust-remote-code",
        0,
    ),
    (
        "train-finetune-dp-epsilon",
        "train finetune toy --data {d}/m.jsonl --out {new} --steps 1 --dp-epsilon 0",
        "target_epsilon must be finite and > 0",
        0,
    ),
    (
        "train-finetune-not-arrow",
        "train finetune toy --data {d}/not.arrow --out {new} --steps 1",
        "is not a readable Arrow file",
        0,
    ),
    (
        "train-finetune-missing-data",
        "train finetune toy --data {d}/nope.jsonl --out {new} --steps 1",
        "does not exist",
        0,
    ),
    (
        "train-unlearn-seq-len",
        "train unlearn toy --forget {d}/forget.jsonl --retain {d}/m.jsonl --out {new} "
        "--seq-len 4096",
        "longer than the context",
        1,
    ),
    (
        "train-unlearn-overwrite-user",
        "train unlearn toy --forget {d}/forget.jsonl --retain {d}/m.jsonl "
        "--out {d}/users-folder --overwrite",
        "did not make",
        0,
    ),
    # ---- demo
    ("demo-alpha", "demo --alpha 2 --out {new}", "alpha must lie strictly between 0 and 1", 0),
    ("demo-out-file", "demo --out {file}", "is a file", 0),
    # ---- device placement (issue 14): refused before any store, report or weight is touched
    pytest.param(
        "score-device-cuda-none",
        S + " --device cuda",
        "devices seen: cpu",
        0,
        id="score-device-cuda-none",
        marks=NO_GPU,
    ),
    ("score-device-bogus", S + " --device tpu:0", "is not a device memclaim can use", 0),
    (
        "score-max-memory-form",
        S + " --device-map auto --max-memory cpu:1GB",
        "is not of the form DEVICE=SIZE",
        0,
    ),
    (
        "score-max-memory-size",
        S + " --device-map auto --max-memory cpu=lots",
        "'lots' is not a size",
        0,
    ),
    (
        "score-max-memory-gpu",
        S + " --device-map auto --max-memory cuda:7=1GB",
        "there is no GPU 7",
        0,
    ),
    ("score-max-memory-no-map", S + " --max-memory cpu=1GB", "needs --device-map auto", 0),
    ("score-offload-no-map", S + " --offload-folder {new}", "needs --device-map auto", 0),
    (
        "score-too-large-no-offload",
        S + " --device-map auto --max-memory cpu=1MB",
        "does not fit the stated memory",
        1,
    ),
    (
        "population-too-large-no-offload",
        P + " --device-map auto --max-memory cpu=1MB",
        "does not fit the stated memory",
        1,
    ),
    pytest.param(
        "census-device-cuda-none",
        C + " --device cuda:0",
        "devices seen: cpu",
        0,
        id="census-device-cuda-none",
        marks=NO_GPU,
    ),
    (
        "audit-max-memory-form",
        A + " --device-map auto --max-memory 20GB",
        "is not of the form DEVICE=SIZE",
        0,
    ),
    (
        "dp-baseline-max-memory",
        "dp baseline toy --prefix the --secret-length 2 --list-size 1 --device-map auto "
        "--max-memory cpu=0",
        "more than 0 bytes",
        0,
    ),
    pytest.param(
        "train-tiny-device-cuda-none",
        "train tiny --out {new} --steps 1 --device cuda",
        "devices seen: cpu",
        0,
        id="train-tiny-device-cuda-none",
        marks=NO_GPU,
    ),
    pytest.param(
        "train-finetune-device-cuda-none",
        "train finetune toy --data {d}/m.jsonl --out {new} --steps 1 --device cuda:0",
        "devices seen: cpu",
        0,
        id="train-finetune-device-cuda-none",
        marks=NO_GPU,
    ),
    (
        "train-unlearn-device-bogus",
        "train unlearn toy --forget {d}/forget.jsonl --retain {d}/m.jsonl --out {new} --device gpu",
        "is not a device memclaim can use",
        0,
    ),
    (
        "audit-table-max-memory-form",
        "audit table --instances {d}/table.json --out {new} --device-map auto --max-memory 20GB",
        "is not of the form DEVICE=SIZE",
        0,
    ),
    (
        "audit-table-offload-no-map",
        "audit table --instances {d}/table.json --out {new} --offload-folder {new}",
        "needs --device-map auto",
        0,
    ),
    (
        "audit-table-dtype",
        "audit table --instances {d}/table.json --out {new} --dtype int8",
        "Invalid value for '--dtype'",
        0,
    ),
    pytest.param(
        "audit-table-device-cuda-none",
        "audit table --instances {d}/table.json --out {new} --device cuda:1",
        "devices seen: cpu",
        0,
        id="audit-table-device-cuda-none",
        marks=NO_GPU,
    ),
    (
        "test-mixed-numerics",
        T + " --candidates-procedure {d}/proc_cpu.json --controls-procedure {d}/proc_gpu.json",
        "different numerics: model.device_class: 'cpu' != 'cuda'",
        0,
    ),
    # ---- issue 25 (items 1, 2, 3, 5, 8): broken model folders, out-of-domain policies, stores
    # edited by hand, --out folders memclaim did not make
    (
        "score-weights-missing-tensor",
        "score {d}/missing-tensor-model --input {d}/m.jsonl --prefix-tokens 8 "
        "--suffix-tokens 8 --out {store}",
        "1 parameter is missing from the weights",
        0,
    ),
    (
        "score-weights-extra-tensor",
        "score {d}/extra-tensor-model --input {d}/m.jsonl --prefix-tokens 8 "
        "--suffix-tokens 8 --out {new}",
        "not used by the architecture: transformer.h.9.mlp.c_fc.weight",
        0,
    ),
    (
        "score-config-layer-more",
        "score {d}/extra-layer-model --input {d}/m.jsonl --prefix-tokens 8 --suffix-tokens 8 "
        "--out {store}",
        "12 parameters are missing from the weights",
        0,
    ),
    (
        "population-config-layer-more",
        "population {d}/extra-layer-model --members {d}/m.jsonl --controls {d}/c.jsonl "
        "--prefix-tokens 8 --suffix-tokens 8 --out {rep}",
        "do not match its config.json",
        0,
    ),
    (
        "census-weights-missing-tensor",
        "census {d}/missing-tensor-model --document {d}/doc.txt --control {d}/ctl.txt "
        "--stride 8 --prefix-tokens 8 --suffix-tokens 8 --policy full --out {new}",
        "missing from the weights",
        0,
    ),
    (
        "score-weights-empty",
        "score {d}/empty-weights-model --input {d}/m.jsonl --out {store}",
        "hold no tensors",
        0,
    ),
    ("score-temperature-below-float64", S + " --policy temperature:1e-300", "is below 4e-270", 1),
    (
        "population-temperature-below-float64",
        P + " --policy top-k:40,temperature:3e-270",
        "is below 4e-270",
        0,
    ),
    (
        "score-nan-weights-into-a-store",
        "score {d}/nan-model --input {d}/m.jsonl --prefix-tokens 8 --suffix-tokens 8 "
        "--policy full --out {store}",
        "logq:full is nan for window",
        0,
    ),
    (
        "population-nan-weights-new-out",
        "population {d}/nan-model --members {d}/m.jsonl --controls {d}/c.jsonl "
        "--prefix-tokens 8 --suffix-tokens 8 --policy full --out {new}",
        "is nan for window",
        0,
    ),
    (
        "census-nan-weights-new-out",
        "census {d}/nan-model --document {d}/doc.txt --control {d}/ctl.txt --stride 8 "
        "--prefix-tokens 8 --suffix-tokens 8 --policy full --out {new}",
        "is nan for window",
        0,
    ),
    (
        "score-out-users-folder",
        "score toy --input {d}/m.jsonl --prefix-tokens 8 --suffix-tokens 8 --out {d}/users-folder",
        "is a folder memclaim did not make: it holds '.thesis.tex.swp.tmp', 'thesis.tex'",
        0,
    ),
    (
        "score-out-dot",
        "score toy --input {d}/m.jsonl --prefix-tokens 8 --suffix-tokens 8 --out .",
        "--out '.' is a folder memclaim did not make: it holds 'mine.txt'",
        0,
    ),
    ("score-out-empty", "score toy --input {d}/m.jsonl --out ''", "--out '' is empty", 0),
    (
        "population-foreign-report-before-scoring",
        "population toy --members {d}/m.jsonl --controls {d}/c.jsonl "
        "--prefix-tokens 8 --suffix-tokens 8 --policy full --out {d}/foreign-report",
        "report.html' exists and memclaim did not write it",
        0,
    ),
    (
        "census-foreign-report-before-scoring",
        C.replace("{rep}", "{d}/foreign-report"),
        "report.html' exists and memclaim did not write it",
        0,
    ),
    (
        "population-store-not-a-store",
        "population toy --members {d}/m.jsonl --controls {d}/c.jsonl --prefix-tokens 8 "
        "--suffix-tokens 8 --policy full --out {d}/foreign-store",
        "is a folder memclaim did not make: it holds 'notes.txt'",
        0,
    ),
    (
        "audit-foreign-report-before-scoring",
        "audit toy --members {d}/m.jsonl --controls {d}/c.jsonl --prefix-tokens 8 "
        "--suffix-tokens 8 --out {d}/foreign-report",
        "report.html' exists and memclaim did not write it",
        0,
    ),
    (
        "test-store-labels-swapped",
        "test --candidates {swapped} --run members --controls {swapped} --controls-run "
        "controls --policy full --out {new}",
        "in manifest.json but",
        0,
    ),
    (
        "test-store-procedure-edited",
        "test --candidates {edited_proc} --run members --controls {edited_proc} "
        "--controls-run controls --policy full --out {new}",
        "does not match the sha256 recorded",
        0,
    ),
    (
        "test-store-scores-edited",
        "test --candidates {edited_scores} --run members --controls {edited_scores} "
        "--controls-run controls --policy full --out {new}",
        "scores.parquet of run",
        0,
    ),
    # ---- issue 29: memclaim acr (adversarial compression), refused before any search or store
    ("acr-criterion-unknown", R + " --criterion bogus", "unknown success criterion 'bogus'", 0),
    ("acr-criterion-b", R + " --criterion prob:1.5", "b must lie strictly between 0 and 1", 0),
    ("acr-criterion-b-text", R + " --criterion prob:high", "'high' is not a number", 0),
    ("acr-top-k-0", R + " --top-k 0", "--top-k must be >= 1", 0),
    ("acr-search-batch-0", R + " --search-batch 0", "--search-batch must be >= 1", 0),
    ("acr-steps-0", R + " --steps 0", "--steps must be >= 1", 0),
    ("acr-seed-negative", R + " --seed -1", "--seed must be >= 0", 0),
    ("acr-token-filter", R + " --token-filter utf8", "'utf8' is not one of 'ascii', 'none'", 0),
    ("acr-start-tokens-0", R + " --start-tokens 0", "--start-tokens must be >= 1", 0),
    (
        "acr-max-prompt-tokens-0",
        R + " --max-prompt-tokens 0",
        "--max-prompt-tokens must be >= 1",
        0,
    ),
    ("acr-limit-0", R + " --limit 0", "--limit must be >= 1", 0),
    ("acr-alpha", R + " --alpha 2", "alpha must lie strictly between 0 and 1", 0),
    ("acr-confidence", R + " --confidence 1", "--confidence must lie strictly between 0 and 1", 0),
    (
        "acr-same-file",
        "acr toy --members {d}/m.jsonl --controls {d}/m.jsonl --out {new}",
        "are the same file",
        0,
    ),
    (
        "acr-identical",
        "acr toy --members {d}/m.jsonl --controls {d}/m_copy.jsonl --out {rep}",
        "identical contents",
        1,
    ),
    (
        "acr-longer-than-context",
        "acr toy --members {d}/long.jsonl --controls {d}/long_c.jsonl --out {new}",
        "more than the context of toy (256 positions)",
        1,
    ),
    (
        "acr-missing-members",
        "acr toy --members {d}/nope.jsonl --controls {d}/c.jsonl --out {new}",
        "does not exist",
        1,
    ),
    (
        "acr-members-not-arrow",
        "acr toy --members {d}/not.arrow --controls {d}/c.jsonl --out {new}",
        "is not a readable Arrow file",
        1,
    ),
    ("acr-out-is-file", R.replace("{new}", "{file}"), "is a file", 0),
    (
        "acr-unknown-model",
        "acr nosuchmodel --members {d}/m.jsonl --controls {d}/c.jsonl --out {new}",
        "neither a named model",
        0,
    ),
    (
        "acr-custom-code",
        "acr {d}/custom-code-model --members {d}/m.jsonl --controls {d}/c.jsonl --out {new}",
        "--trust-remote-code",
        0,
    ),
    ("acr-device-bogus", R + " --device tpu:0", "is not a device memclaim can use", 0),
    # ---- issue 25 (items 4, 6, 7, 9, 10; inputs written by issue25_inputs below): input reading,
    # identity on normalized text, costs estimated before the work, no traceback
    (
        "score-i25-csv-row-without-text",
        "score toy --input {d}/i25_csv_short_row.csv --prefix-tokens 2 --suffix-tokens 2 "
        "--out {store}",
        "line 3: record has no 'text' field (the row has 1 of the header's 2 fields)",
        1,
    ),
    (
        "score-i25-id-bool",
        "score toy --input {d}/i25_id_bool.jsonl --out {store}",
        "line 2: id True is a bool",
        1,
    ),
    (
        "score-i25-surrogate-id",
        "score toy --input {d}/i25_surrogate_id.jsonl --out {store}",
        "line 1: id 'a\\ud800' holds a lone surrogate U+D800",
        1,
    ),
    (
        "score-i25-surrogate-text",
        "score toy --input {d}/i25_surrogate_text.jsonl --out {store}",
        "line 2: the text holds a lone surrogate U+DC00",
        1,
    ),
    (
        "census-i25-crlf-copy",
        "census toy --document {d}/doc.txt --control {d}/i25_doc_crlf.txt --stride 8 --out {rep}",
        "are the same text (once line endings, whitespace and Unicode form are ignored)",
        0,
    ),
    (
        "census-i25-pair-twice",
        "census toy --pair {d}/doc.txt {d}/ctl.txt --pair {d}/doc.txt {d}/ctl.txt --stride 8 "
        "--out {rep}",
        "repeats pair 1",
        0,
    ),
    (
        "population-i25-same-texts",
        "population toy --members {d}/m.jsonl --controls {d}/i25_m_reordered.jsonl "
        "--prefix-tokens 8 --suffix-tokens 8 --out {rep}",
        "have the same texts (in another order, format, ids",
        1,
    ),
    (
        "score-i25-template-width",
        S + " --prompt-template 'x{{prefix:>100000000}}'",
        "pads {prefix} to 100,000,000 characters",
        0,
    ),
    (
        "dp-i25-steps",
        "dp bounds --noise-multiplier 1.1 --sampling-rate 0.01 --steps 1000000000 --neighbors add-remove",
        "fix: --pld-grid 0.001",
        0,
    ),
    (
        "dp-i25-copies",
        "dp bounds --epsilon 1 --copies 1000000000 --neighbors add-remove",
        "--copies 1,000,000,000: the 1,000,000,000-fold group curves",
        0,
    ),
    (
        "dp-i25-noise",
        "dp bounds --noise-multiplier 1e-6 --sampling-rate 0.01 --steps 10 --neighbors add-remove",
        "fix: a realistic --noise-multiplier",
        0,
    ),
    (
        "dp-i25-account-noise",
        "dp account --noise-multiplier 1e-6 --sampling-rate 0.01 --steps 10 --delta 1e-5",
        "would hold 5e+15 points at the PLD grid 0.0001",
        0,
    ),
    (
        "dp-i25-account-steps",
        "dp account --noise-multiplier 1.1 --sampling-rate 0.01 --steps 1000000000 --delta 1e-5",
        "fix: --pld-grid 0.001",
        0,
    ),
    (
        "dp-i25-account-copies",
        "dp account --noise-multiplier 1.1 --sampling-rate 0.01 --steps 10 --delta 1e-5 "
        "--copies 1000000000",
        "fix: --copies 2,400 or fewer",
        0,
    ),
    (
        "dp-i25-plot-noise",
        "dp plot --out {new} --neighbors add-remove --noise-multiplier 1e-6 --sampling-rate 0.01 "
        "--steps 10",
        "fix: a realistic --noise-multiplier",
        0,
    ),
    (
        "dp-i25-plot-max-copies",
        "dp plot --out {new} --neighbors add-remove --max-copies 1000000",
        "fix: --max-copies 631 or fewer",
        0,
    ),
    (
        "score-i25-ray-address",
        S + " --backend ray --address 127.0.0.1:1",
        "cannot connect to the Ray cluster at '127.0.0.1:1': Connection refused (connection attempt timeout 10 s)",
        1,
    ),
    (
        "score-i25-chat-sandbox",
        "score {d}/i25-chat-model --input {d}/m.jsonl --prefix-tokens 8 --suffix-tokens 8 "
        "--chat-template --out {store}",
        "chat template cannot be rendered: the sandbox refused it",
        0,
    ),
    (
        "test-i25-no-policy-column",
        "test --candidates {d}/i25-store-no-column --run members --controls "
        "{d}/i25-store-no-column --controls-run controls --policy full --out {rep}",
        "scores.parquet' has no column 'logq:full'",
        0,
    ),
    (
        "test-i25-no-policy-column-sealed",
        "test --candidates {d}/i25-store-no-column-sealed --run members --controls "
        "{d}/i25-store-no-column-sealed --controls-run controls --policy full --out {rep}",
        "does not match the sha256 recorded when memclaim wrote it",
        0,
    ),
    (
        "test-i25-scores-folder",
        "test --candidates {d}/i25-store-folder --run members --controls {d}/i25-store-folder "
        "--controls-run controls --policy full --out {rep}",
        "scores.parquet' is not a file (a folder",
        0,
    ),
    (
        "train-i25-seed",
        "train tiny --seed 100000000000000000000000 --steps 1 --out {new}",
        "--seed must be a whole number in [0, 2**63 - 1], got 100000000000000000000000",
        0,
    ),
    (
        "score-i25-bad-pickle",
        "score {d}/i25-pickle-model --allow-pickle --input {d}/m.jsonl --out {store}",
        "pytorch_model.bin' (19 bytes) cannot be read as weights",
        0,
    ),
]


def _swap_labels(store: Path) -> None:
    m = json.loads((store / "manifest.json").read_text())
    a, b = sorted(m["runs"])
    m["runs"][a]["label"], m["runs"][b]["label"] = m["runs"][b]["label"], m["runs"][a]["label"]
    (store / "manifest.json").write_text(json.dumps(m, indent=1, sort_keys=True))


def _edit_procedure(store: Path) -> None:
    (p,) = (store / "procedures").iterdir()
    rec = json.loads(p.read_text())
    rec["suffix_tokens"] = 4
    p.write_text(json.dumps(rec, indent=1, sort_keys=True))


def _edit_scores(store: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    m = json.loads((store / "manifest.json").read_text())
    rid = next(r for r, e in m["runs"].items() if e["label"] == "controls")
    path = store / "runs" / rid / "scores.parquet"
    t = pq.read_table(path)
    col = t.column_names.index("logq:full")
    t = t.set_column(col, "logq:full", pa.array([-1e9] * t.num_rows, pa.float64()))
    pq.write_table(t, path)


EDITED_STORES = {
    "swapped": _swap_labels,
    "edited_proc": _edit_procedure,
    "edited_scores": _edit_scores,
}


def _unseal(store: Path) -> None:
    """Make ``store`` what memclaim wrote before seals (schema 2, issue 25 item 5): no sha256 in
    manifest.json or run.json."""
    p = store / "manifest.json"
    m = json.loads(p.read_text())
    m["schema_version"] = 2
    m.pop("procedure_files", None)
    for section, keys in (
        ("units", ("sha256",)),
        ("runs", ("run_sha256", "scores_sha256", "scores_sha256_previous")),
    ):
        m[section] = {
            k: {f: v for f, v in e.items() if f not in keys} for k, e in m[section].items()
        }
    p.write_text(json.dumps(m, indent=1, sort_keys=True))
    for run in (store / "runs").glob("*/run.json"):
        r = json.loads(run.read_text())
        r.pop("windows_sha256", None)
        run.write_text(json.dumps(r, indent=1, sort_keys=True))


def issue25_inputs(d: Path, toy: Path, mem: list, ctl: list) -> None:
    """The inputs of issue 25's rows (called by the ``data`` fixture): bad records, a document's
    CRLF copy, the members reordered under other ids, a model whose chat template the sandbox
    refuses, a model whose pickle is not one, and two stores whose scores.parquet was edited."""
    import pyarrow.parquet as pq

    from memclaim.api import score

    (d / "i25_csv_short_row.csv").write_text("id,text\na,hello there\nb\nc,world at large\n")
    (d / "i25_id_bool.jsonl").write_text(
        '{"id": "a", "text": "one two three"}\n{"id": true, "text": "four five"}\n'
    )
    (d / "i25_surrogate_id.jsonl").write_text('{"id": "a\\ud800", "text": "one two three"}\n')
    (d / "i25_surrogate_text.jsonl").write_text(
        '{"id": "a", "text": "one"}\n{"id": "b", "text": "tw\\udc00o"}\n'
    )
    words = (d / "doc.txt").read_text().split(" ")
    (d / "i25_doc_crlf.txt").write_bytes(
        "\r\n".join(" ".join(words[i : i + 9]) for i in range(0, len(words), 9)).encode("utf-8")
        + b"\r\n"
    )
    (d / "i25_m_reordered.jsonl").write_text(
        "".join(
            json.dumps({"id": f"copy-{i}", "text": r["text"] + "\n"}) + "\n"
            for i, r in reversed(list(enumerate(mem)))
        )
    )
    chat = d / "i25-chat-model"
    shutil.copytree(toy, chat)
    cfg = json.loads((chat / "tokenizer_config.json").read_text())
    cfg["chat_template"] = "{{ messages[0]['content'].__class__.__mro__ }}"
    (chat / "tokenizer_config.json").write_text(json.dumps(cfg))
    pickled = d / "i25-pickle-model"
    pickled.mkdir()
    for f in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        shutil.copy(toy / f, pickled / f)
    (pickled / "pytorch_model.bin").write_bytes(b"not a pickle at all")
    base = d / "i25-store"
    for label, f in (("members", "m.jsonl"), ("controls", "c.jsonl")):
        score(
            "toy", d / f, prefix_tokens=8, suffix_tokens=8, policies=["full"], out=base, label=label
        )
    manifest = json.loads((base / "manifest.json").read_text())
    members = next(rid for rid, r in manifest["runs"].items() if r["label"] == "members")
    # a scores.parquet without its policy column: in a store of the previous schema (no seals,
    # _unseal), the column is what is missing; in a sealed store, the file is not the one sealed
    for name in ("i25-store-no-column", "i25-store-no-column-sealed"):
        shutil.copytree(base, d / name)
        f = d / name / "runs" / members / "scores.parquet"
        table = pq.read_table(f)
        pq.write_table(table.drop_columns(["logq:full"]), f)
    _unseal(d / "i25-store-no-column")
    shutil.copytree(base, d / "i25-store-folder")
    f = d / "i25-store-folder" / "runs" / members / "scores.parquet"
    f.unlink()
    f.mkdir()
    (f / "part-0.parquet").write_bytes(
        pq.read_table(base / "runs" / members / "scores.parquet").to_pandas().to_parquet()
    )
    shutil.rmtree(base)


def _case(c):
    if hasattr(c, "marks"):  # a pytest.param (itself a tuple)
        _, argv, phrase, _ = c.values
        return pytest.param(argv, phrase, id=c.id, marks=list(c.marks))
    cid, argv, phrase, _ = c
    return pytest.param(argv, phrase, id=cid)


def test_there_are_at_least_60_cases_covering_every_command():
    from memclaim.cli.main import SUBCOMMANDS

    argvs = [c.values[1] if hasattr(c, "marks") else c[1] for c in CASES]
    assert len(argvs) >= 60
    assert {a.split()[0] for a in argvs} == set(SUBCOMMANDS)


@pytest.mark.parametrize("argv, phrase", [_case(c) for c in CASES])
def test_bad_input_stops_cleanly_and_changes_nothing(
    argv, phrase, data, previous, tmp_path, monkeypatch, capsys
):
    import shlex

    rep = tmp_path / "out"
    shutil.copytree(previous, rep)
    new = tmp_path / "new-out"
    afile = tmp_path / "a-file.txt"
    afile.write_text("keep me")
    cwd = tmp_path / "cwd" / "work"
    cwd.mkdir(parents=True)
    (cwd / "mine.txt").write_text("the user's file")
    monkeypatch.chdir(cwd)
    damaged = tmp_path / "damaged"
    if (
        "{damaged}" in argv
    ):  # a store whose members run.json and controls scores.parquet were cut short
        shutil.copytree(previous / "store", damaged)
        runs = json.loads((damaged / "manifest.json").read_text())["runs"]
        for rid, r in runs.items():
            f = (
                damaged
                / "runs"
                / rid
                / ("run.json" if r["label"] == "members" else "scores.parquet")
            )
            f.write_bytes(f.read_bytes()[:40])
    edited = {name: tmp_path / name for name in EDITED_STORES if "{" + name + "}" in argv}
    for (
        name,
        path,
    ) in edited.items():  # issue 25 item 5: stores edited by hand after memclaim wrote them
        shutil.copytree(previous / "store", path)
        EDITED_STORES[name](path)
    before = {"rep": _snapshot(rep), "data": _snapshot(data), "cwd": _snapshot(tmp_path / "cwd")}
    args = shlex.split(
        argv.format(
            d=data, rep=rep, store=rep / "store", new=new, file=afile, damaged=damaged, **edited
        )
    )
    capsys.readouterr()
    rc = main(args)
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "Traceback" not in err
    assert phrase in " ".join(err.split()), err
    assert "error:" in err, (
        err
    )  # click's parse errors too (cli/main.usage_error_text), never click's 'Error:' form
    assert not [line for line in err.splitlines() if line.startswith("Error:")], err
    assert "fix:" in err.split("error:", 1)[1], err
    assert _snapshot(rep) == before["rep"]  # the previous store and report are untouched
    assert _snapshot(data) == before["data"]  # so are the inputs and every other folder
    assert _snapshot(tmp_path / "cwd") == before["cwd"]
    assert afile.read_text() == "keep me"
    assert not new.exists()  # nothing was started
    assert not [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]
    assert not (data / "RAN_CUSTOM_CODE").exists()  # a model folder's code never ran
    assert not Path("/proc/memclaim-store").exists()
    assert os.getcwd() == str(cwd)
