"""The training lab as API (``memclaim train``): a tiny GPT trained from scratch with planted
records ([MX] §8), fine-tuning with planted records and optional DP-SGD ([MX] App. F.2), and
unlearning until memclaim's verifier reports the forget records forgotten ([MX] App. F.2).

Each function checks its options and reads its inputs before any weights are read, trains
through memclaim's one trainer (:mod:`memclaim.train`), saves an ordinary HF folder with a
``memclaim_train.json`` manifest and returns a :class:`TrainRun`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Unpack

from ..audits.extraction import pair_windows
from ..audits.verifier import verify
from ..errors import InputError
from ..models.hf import HFLanguageModel
from ..models.loader import HFTokenizer
from ..models.placement import resolve_device
from ..progress import LogCallback, ProgressCallback
from ..text.io import read_passages, split_lines
from ..train.dp import DPConfig
from ..train.finetune import (
    TinyLabSpec,
    check_output_folder,
    epochs_to_steps,
    load_trainable,
    save_trained,
    tiny_lab_model,
)
from ..train.finetune import finetune as run_finetune
from ..train.planted import add_reserved_tokens, plant, tokenize_record, training_blocks
from ..train.trainer import TrainConfig, example_blocks, pack_documents
from ..train.unlearn import UnlearnConfig
from ..train.unlearn import unlearn as run_unlearn
from ..validate import seed as check_seed
from ._common import Result, jsonable
from ._options import check_out_dir
from ._public import public
from ._shortcuts import FinetuneOptions, UnlearnOptions, take_options

if TYPE_CHECKING:  # the annotations' names only
    from ..models.loader import LoadedModel

__all__ = ["TrainRun", "train_tiny", "finetune", "unlearn", "parse_pairs", "read_records"]

LAYOUTS = ("pack", "examples")
UNLEARN_METHODS = ("npo", "graddiff")


@dataclass(frozen=True, repr=False)
class TrainRun(Result):
    """A trained model folder: ``path``, the ``manifest`` written beside the weights
    (memclaim_train.json; ``to_dict()`` returns it, what ``memclaim train ... --json`` prints) and
    ``lines``, the human summary the CLI prints."""

    path: str
    manifest: dict
    lines: tuple[str, ...]

    def to_dict(self) -> dict:
        return jsonable(self.manifest)

    def save(self, folder) -> dict:
        raise InputError(f"the model is saved already, in {self.path!r}", hint="copy that folder")

    def __repr__(self) -> str:
        return f"TrainRun({self.manifest.get('kind', 'tiny')!r}, {self.path!r})"


def parse_pairs(value: str | Sequence[tuple[int, int]], what: str) -> tuple[tuple[int, int], ...]:
    """Planted-record counts 'K:N[,K:N...]' (N records, K copies each) or pairs (K, N).

    >>> parse_pairs("1:8,8:8", "--duplicates")
    ((1, 8), (8, 8))
    """
    if isinstance(value, str):
        out = []
        for part in value.split(",") if value else ():
            try:
                k, n = part.split(":")
                out.append((int(k), int(n)))
            except ValueError:
                raise InputError(
                    f"{what} must look like K:N[,K:N...] (copies:count), got {value!r}",
                    hint=f"e.g. {what} 1:8,8:8 (8 records once and 8 records 8 times)",
                ) from None
    else:
        out = [tuple(int(x) for x in p) for p in value]
    for k, n in out:
        if k < 1 or n < 0:
            raise InputError(
                f"{what}: copies must be >= 1 and counts >= 0, got {k}:{n}",
                hint=f"e.g. {what} 1:8,8:8",
            )
    return tuple(out)


def read_records(path) -> list[dict]:
    """The JSON objects of a JSONL file (planted or forget records), one per non-blank line."""
    p = Path(path)
    if not p.is_file():
        raise InputError(
            f"{str(p)!r} does not exist", hint="pass a JSONL file, one JSON object per line"
        )
    out = []
    for i, line in enumerate(split_lines(p.read_text(encoding="utf-8")), 1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise InputError(
                f"{str(p)!r} line {i} is not JSON: {exc}", hint="write one JSON object per line"
            ) from None
    if not out:
        raise InputError(f"{str(p)!r} holds no records", hint="write one JSON object per line")
    return out


DEFAULT_SEQ_LEN = 128  # [MX] App. F.2's fine-tuning blocks


def default_seq_len(seq_len: int | None, loaded: LoadedModel) -> int:
    """``seq_len`` as given (load_trainable refused one beyond the model's context), else 128
    tokens ([MX] App. F.2) or the model's context if that is shorter (the lab's tiny GPT has 64
    positions).

    >>> from types import SimpleNamespace
    >>> default_seq_len(None, SimpleNamespace(max_positions=64)), default_seq_len(None, SimpleNamespace(max_positions=None))
    (64, 128)
    >>> default_seq_len(32, SimpleNamespace(max_positions=64))
    32
    """
    if seq_len is not None:
        return int(seq_len)
    limit = loaded.max_positions
    return min(DEFAULT_SEQ_LEN, limit) if limit else DEFAULT_SEQ_LEN


def _texts(path) -> list[str]:
    return [r.text for r in read_passages(path).records]


def _say(log):
    return log if log is not None else (lambda msg: None)


@public
def train_tiny(
    *,
    out: str | os.PathLike,
    duplicates: str | Sequence[tuple[int, int]] = "1:8,8:8",
    canaries: str | Sequence[tuple[int, int]] = "",
    triggers: int = 8,
    trigger_copies: int = 16,
    steps: int = 800,
    batch_size: int = 16,
    lr: float = 3e-3,
    seed: int = 0,
    corpus_seed: int = 1,
    overwrite: bool = False,
    device: str | None = None,
    log: LogCallback | None = None,
    progress: bool | ProgressCallback = True,
) -> TrainRun:
    """Train a tiny GPT from scratch on a Markov-Zipf corpus with planted records ([MX] §8)
    (``memclaim train tiny``): ``duplicates`` and ``canaries`` as 'K:N' (N records K times each),
    ``triggers`` reserved-trigger pairs rho||z with ``trigger_copies`` copies each. ``out``: the
    model folder (``overwrite`` replaces one memclaim wrote, nothing else). ``device``: auto (the
    first GPU when one is present, else the CPU), cpu, cuda or cuda:N; recorded in the manifest
    (the same seeds give a different model on a GPU's numerics).

    >>> import memclaim as mc
    >>> run = mc.train_tiny(out="lab-gpt", steps=200)                # doctest: +SKIP
    >>> run.manifest["train"]["steps"]                               # doctest: +SKIP
    200
    """
    check_seed("--seed", seed)
    check_seed("--corpus-seed", corpus_seed)
    check_out_dir(out)
    check_output_folder(out, overwrite=overwrite)  # before training: never after minutes of work
    dev = resolve_device(device)  # a device that is not there is refused before any work
    spec = TinyLabSpec(
        duplicates=parse_pairs(duplicates, "--duplicates"),
        canaries=parse_pairs(canaries, "--canaries"),
        triggers=triggers,
        trigger_copies=trigger_copies,
        steps=steps,
        batch_size=batch_size,
        lr=lr,
        train_seed=seed,
        corpus_seed=corpus_seed,
    )
    model, tok, manifest = tiny_lab_model(spec, log=_say(log), device=dev)
    path = save_trained(model, tok, out, manifest=manifest, overwrite=overwrite)
    t = manifest["train"]
    by: dict[str, list[int]] = {}
    for r in manifest["records"]:
        k = by.setdefault(r["kind"], [0, 0, 0])
        k[0] += 1
        k[1] += r["extracted_via_prefix"]
        k[2] += r.get("extracted_via_trigger", 0)
    ext = "; ".join(
        f"{kind}: {v[1]}/{v[0]} extracted from c"
        + (f", {v[2]}/{v[0]} via rho" if kind == "trigger" else "")
        for kind, v in by.items()
    )
    n_trig = sum(1 for r in manifest["records"] if r["kind"] == "trigger")
    lines = (
        f"tiny GPT trained: {t['steps']} steps, loss {t['first_loss']:.3f} -> {t['final_loss']:.3f}",
        f"greedy extraction of the planted secrets: {ext}",
        f"planted: {len(manifest['records'])} records ({n_trig} trigger pairs); the list with prefixes, secrets "
        f"and triggers is in {Path(path) / 'memclaim_train.json'}",
        f"saved to {path}",
    )
    return TrainRun(str(path), manifest, lines)


# the defaults of finetune()'s shortcuts that are not the procedure's and runtime's own
# (memclaim.api._shortcuts.FLAT_DEFAULTS); each is the default its keyword had
_FINETUNE_DEFAULTS: dict = {
    "plant_records": None,
    "reserve_triggers": 0,
    "layout": "pack",
    "epochs": 3.0,
    "steps": None,
    "lr": 5e-05,
    "batch_size": 8,
    "seq_len": None,
    "dp_epsilon": None,
    "dp_delta": None,
    "noise_multiplier": None,
    "max_grad_norm": 1.0,
    "physical_batch_size": None,
    "seed": 0,
    "overwrite": False,
}


@public
def finetune(
    model: str | os.PathLike,
    data: str | os.PathLike,
    *,
    out: str | os.PathLike,
    log: LogCallback | None = None,
    progress: bool | ProgressCallback = True,
    **options: Unpack[FinetuneOptions],
) -> TrainRun:
    """Fine-tune ``model`` (a folder, .gguf or named model) on the texts of ``data`` with planted
    records (``memclaim train finetune``; [MX] App. F.2: AdamW, lr 5e-5, 3 epochs).

    ``plant_records``: a JSONL file or a list of records {id, kind: duplicate|canary|trigger,
    prefix, secret, copies, trigger}; ``reserve_triggers`` adds N reserved tokens. ``layout``:
    'pack' (one token stream) or 'examples' (each planted copy its own block: a DP example).
    ``dp_epsilon`` (add/remove) or ``noise_multiplier``: DP-SGD through Opacus. ``device``: where
    the model trains (auto: the first GPU when one is present, else the CPU; cpu, cuda, cuda:N),
    in float32; recorded in the manifest. A model that does not fit one device is not sharded
    for training (accelerate's big-model inference does not train).

    >>> import memclaim as mc
    >>> run = mc.finetune("lab-gpt", "corpus.txt", out="dp-gpt", dp_epsilon=1.0,
    ...                   layout="examples")                          # doctest: +SKIP
    >>> run.manifest["result"]["dp"]["statement"]                     # doctest: +SKIP
    """
    o = take_options(finetune, FinetuneOptions, options, values=(), defaults=_FINETUNE_DEFAULTS)
    (
        plant_records,
        reserve_triggers,
        layout,
        epochs,
        steps,
        lr,
        batch_size,
        seq_len,
        dp_epsilon,
        dp_delta,
        noise_multiplier,
        max_grad_norm,
        physical_batch_size,
        seed,
        threads,
        overwrite,
        trust_remote_code,
        device,
    ) = o.get(
        "plant_records",
        "reserve_triggers",
        "layout",
        "epochs",
        "steps",
        "lr",
        "batch_size",
        "seq_len",
        "dp_epsilon",
        "dp_delta",
        "noise_multiplier",
        "max_grad_norm",
        "physical_batch_size",
        "seed",
        "threads",
        "overwrite",
        "trust_remote_code",
        "device",
    )
    if layout not in LAYOUTS:
        raise InputError(f"unknown layout {layout!r}", hint=f"one of {', '.join(LAYOUTS)}")
    check_seed("--seed", seed)
    say = _say(log)
    check_out_dir(out)
    check_output_folder(out, overwrite=overwrite)
    dev = resolve_device(device)
    dp = None
    if (
        dp_epsilon is not None or noise_multiplier is not None
    ):  # options are checked before any work
        dp = DPConfig(
            target_epsilon=dp_epsilon,
            noise_multiplier=noise_multiplier,
            delta=dp_delta,
            max_grad_norm=max_grad_norm,
        )
    texts = _texts(data)  # bad inputs fail before the weights are read
    if plant_records is None:
        plant_specs = []
    elif isinstance(plant_records, (str, Path)):
        plant_specs = read_records(plant_records)
    else:
        plant_specs = list(plant_records)
    m, tok, sot, loaded = load_trainable(
        model, seq_len=seq_len, trust_remote_code=trust_remote_code, device=dev
    )
    seq_len = default_seq_len(seq_len, loaded)
    reserved = add_reserved_tokens(m, tok, reserve_triggers) if reserve_triggers else []
    background = [list(tok(t, add_special_tokens=False)["input_ids"]) for t in texts]
    records = [tokenize_record(tok, spec) for spec in plant_specs]
    corpus = plant(background, records, seed=seed)
    pad = None
    if layout == "examples":
        pad = tok.pad_token_id if tok.pad_token_id is not None else sot[0]
    n_blocks = training_blocks(corpus, seq_len=seq_len, sep_ids=sot, layout=layout, pad_id=pad).n
    n_steps = steps if steps is not None else epochs_to_steps(epochs, n_blocks, batch_size)
    cfg = TrainConfig(
        steps=n_steps,
        batch_size=batch_size,
        seq_len=seq_len,
        lr=lr,
        warmup_steps=0,
        seed=seed,
        dp=dp,
        pad_id=pad,
        physical_batch_size=physical_batch_size,
        threads=threads,
    )
    say(
        f"fine-tuning {loaded.name} on {n_blocks} blocks of {seq_len} tokens for {n_steps} steps on {dev}"
        + (" with DP-SGD" if dp else "")
    )
    res = run_finetune(m, corpus, cfg, sep_ids=sot, layout=layout, pad_id=pad)
    manifest = {
        "kind": "finetune",
        "base": loaded.describe(),
        "data": str(data),
        "reserved_tokens": reserved,
        "device": dev,
        "result": res.to_dict(),
    }
    path = save_trained(m, tok, out, manifest=manifest, overwrite=overwrite)
    lines = [
        f"fine-tuned {res.train['steps']} steps: loss {res.train['first_loss']:.3f} -> {res.train['final_loss']:.3f}"
    ]
    if res.dp:
        lines.append("DP: " + res.dp["statement"])
    lines.append(f"saved to {path}")
    return TrainRun(str(path), manifest, tuple(lines))


# the defaults of unlearn()'s shortcuts that are not the procedure's and runtime's own
# (memclaim.api._shortcuts.FLAT_DEFAULTS); each is the default its keyword had
_UNLEARN_DEFAULTS: dict = {
    "lr": 7e-06,
    "max_rounds": 14,
    "threshold": 0.15,
    "seq_len": None,
    "batch_size": 8,
    "seed": 0,
    "overwrite": False,
}


@public
def unlearn(
    model: str | os.PathLike,
    forget: str | os.PathLike | Sequence[dict],
    retain: str | os.PathLike,
    *,
    out: str | os.PathLike,
    method: str = "npo",
    log: LogCallback | None = None,
    progress: bool | ProgressCallback = True,
    **options: Unpack[UnlearnOptions],
) -> TrainRun:
    """Unlearn the ``forget`` records (a JSONL file or a list of {id, prefix, suffix|secret}) from
    ``model`` with GradDiff or NPO ([MX] App. F.2: lr 7e-6, up to 14 rounds) until memclaim's
    unlearning verifier reports them forgotten (recovered fraction below ``threshold``); the
    retain perplexity before and after is in the manifest (``memclaim train unlearn``). ``device``:
    where the model is unlearned and verified (auto: the first GPU when one is present, else the
    CPU; cpu, cuda, cuda:N); recorded in the manifest.

    >>> import memclaim as mc
    >>> run = mc.unlearn("ft", "forget.jsonl", "corpus.jsonl", out="ft-unlearned")   # doctest: +SKIP
    >>> run.manifest["result"]["forgotten"]                                          # doctest: +SKIP
    True
    """
    o = take_options(unlearn, UnlearnOptions, options, values=(), defaults=_UNLEARN_DEFAULTS)
    (
        lr,
        max_rounds,
        threshold,
        seq_len,
        batch_size,
        seed,
        threads,
        overwrite,
        trust_remote_code,
        device,
    ) = o.get(
        "lr",
        "max_rounds",
        "threshold",
        "seq_len",
        "batch_size",
        "seed",
        "threads",
        "overwrite",
        "trust_remote_code",
        "device",
    )
    if method not in UNLEARN_METHODS:
        raise InputError(
            f"unknown unlearning method {method!r}", hint=f"one of {', '.join(UNLEARN_METHODS)}"
        )
    check_seed("--seed", seed)
    check_out_dir(out)
    check_output_folder(out, overwrite=overwrite)
    dev = resolve_device(device)
    recs = (
        read_records(forget) if isinstance(forget, (str, Path)) else list(forget)
    )  # before the weights are read
    retain_texts = _texts(retain)
    m, tok, sot, loaded = load_trainable(
        model, seq_len=seq_len, trust_remote_code=trust_remote_code, device=dev
    )
    seq_len = default_seq_len(seq_len, loaded)
    htok = HFTokenizer(tok)
    ws = pair_windows(recs, htok)
    pad = tok.pad_token_id if tok.pad_token_id is not None else sot[0]
    forget_blocks = example_blocks(
        [w.prefix_ids + w.suffix_ids for w in ws.windows],
        seq_len=min(
            seq_len, max(len(w.prefix_ids) + len(w.suffix_ids) for w in ws.windows) + len(sot)
        ),
        sep_ids=sot,
        pad_id=pad,
    )
    retain_blocks = pack_documents(
        [htok.encode(t) for t in retain_texts], seq_len=seq_len, sep_ids=sot
    )

    def verifier(model_):
        view = SimpleNamespace(
            lm=HFLanguageModel(model_, name=loaded.name), tokenizer=htok, sot_ids=sot
        )
        return verify(view, ws, threshold=threshold)

    cfg = UnlearnConfig(
        method=method,
        lr=lr,
        max_rounds=max_rounds,
        batch_size=batch_size,
        seed=seed,
        threads=threads,
    )
    say = _say(log)
    res = run_unlearn(
        m,
        forget_blocks,
        retain_blocks,
        cfg,
        verifier=verifier,
        pad_id=pad,
        on_round=lambda r: say(
            f"round {r.round}: recovered fraction {r.rate:.3f}"
            + (" -> forgotten" if r.forgotten else "")
        ),
    )
    manifest = {
        "kind": "unlearn",
        "base": loaded.describe(),
        "forget": str(forget),
        "retain": str(retain),
        "device": dev,
        "result": res.to_dict(),
    }
    path = save_trained(m, tok, out, manifest=manifest, overwrite=overwrite)
    lines = (
        f"{method}: {res.rounds} rounds, {res.steps} steps; verifier: "
        f"{'forgotten' if res.forgotten else 'NOT forgotten'} (recovered fraction {res.before['rate']:.3f} -> "
        f"{res.after['rate']:.3f}, threshold {threshold:g})",
        f"retain perplexity {res.retain_ppl_before:.2f} -> {res.retain_ppl_after:.2f}",
        "the verifier reads only extraction from each record's own prefix; a secret reachable through another "
        "prompt (e.g. a reserved trigger) passes as forgotten ([MX] Cor. 6.3)",
        f"saved to {path}",
    )
    return TrainRun(str(path), manifest, lines)
