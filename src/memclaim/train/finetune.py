"""The training lab's model side: fresh tiny GPTs, HF models loaded for training, fine-tuning on a
corpus with planted records, and saving the result as an ordinary HF folder.

Everything trains through :func:`memclaim.train.trainer.train_causal_lm` ("one trainer"). A saved
folder (safetensors + tokenizer + ``memclaim_train.json``: what was trained, on what, with which
planted records, and for a DP run the epsilon actually spent) loads through
:func:`memclaim.models.load_model` like any other model.

- :func:`new_gpt2`: a fresh GPT-2-architecture model, initialized under a seed without touching
  the global torch RNG.
- :func:`tiny_lab_model`: the training lab's self-contained tiny GPT: a Markov–Zipf corpus
  (:mod:`memclaim.train.corpus`), a byte-level BPE tokenizer with a pad token and reserved
  trigger tokens that occur in no text, duplicated passages, canaries and reserved-trigger pairs
  planted into it, trained from scratch.
- :func:`load_trainable` / :func:`finetune`: fine-tune any HF causal LM folder (or a named model)
  on texts with planted records ([MX] App. F.2 "Fine-tuning": AdamW, lr 5e-5, batch 8, 3 epochs),
  optionally with DP-SGD.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .._version import __version__
from ..decoding import Policy
from ..errors import InputError, ModelLoadError
from ..fsutil import (
    atomic_directory,
    cache_dir,
    file_lock,
    replaceable_folder,
    sha256_bytes,
    write_marker,
)
from ..jsonutil import ResultMixin, to_jsonable
from ..models import load_model
from ..models.loader import check_loading_info
from ..validate import integer, positive
from ..validate import seed as check_seed
from .corpus import MarkovZipf, sample_chain
from .planted import PlantedRecord, plant, training_blocks
from .toy import SOT, _train_tokenizer

if TYPE_CHECKING:
    import torch
    from transformers import (
        GPT2LMHeadModel,
        PreTrainedModel,
        PreTrainedTokenizerBase,
        PreTrainedTokenizerFast,
    )

    from ..models.loader import HFTokenizer, LoadedModel
    from ..progress import LogCallback
    from .planted import PlantedCorpus
    from .trainer import TrainConfig

__all__ = [
    "TRAIN_FILE",
    "new_gpt2",
    "TinyLabSpec",
    "tiny_lab_model",
    "load_trainable",
    "FinetuneResult",
    "finetune",
    "save_trained",
    "epochs_to_steps",
]

TRAIN_FILE = "memclaim_train.json"
PAD = "<|pad|>"
RESERVED = "<|reserved_{}|>"


def new_gpt2(
    *,
    vocab_size: int,
    n_positions: int = 128,
    n_embd: int = 64,
    n_layer: int = 2,
    n_head: int = 4,
    seed: int = 0,
    sot: int = 0,
) -> GPT2LMHeadModel:
    """A fresh GPT-2 (no dropout) initialized under ``seed`` (the global torch RNG is left alone).

    >>> from memclaim.train.finetune import new_gpt2
    >>> model = new_gpt2(vocab_size=16, n_positions=8, n_embd=8, n_head=2)  # doctest: +SKIP
    >>> model.config.n_layer, sum(p.numel() for p in model.parameters())  # doctest: +SKIP
    (2, 1952)
    """
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    integer("vocab_size", vocab_size, minimum=2)
    for name, v in (
        ("n_positions", n_positions),
        ("n_embd", n_embd),
        ("n_layer", n_layer),
        ("n_head", n_head),
    ):
        integer(name, v, minimum=1)
    if n_embd % n_head:
        raise InputError(f"n_embd = {n_embd} is not a multiple of n_head = {n_head}")
    cfg = GPT2Config(
        vocab_size=vocab_size,
        n_positions=n_positions,
        n_embd=n_embd,
        n_layer=n_layer,
        n_head=n_head,
        bos_token_id=sot,
        eos_token_id=sot,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(check_seed("seed", seed))
        model = GPT2LMHeadModel(cfg)
    return model


def epochs_to_steps(epochs: float, n_blocks: int, batch_size: int) -> int:
    """Steps for ``epochs`` passes over ``n_blocks`` at ``batch_size`` (at least one).

    >>> epochs_to_steps(3, 100, 8), epochs_to_steps(0.01, 10, 8)
    (38, 1)
    """
    return max(1, math.ceil(positive("epochs", epochs) * n_blocks / batch_size))


@dataclass(frozen=True)
class FinetuneResult(ResultMixin):
    train: dict  # TrainResult.to_dict() without the loss trace
    config: dict
    n_blocks: int
    layout: str
    planted: dict
    dp: dict | None


def _train_dict(result) -> dict:
    d = result.to_dict()
    d.pop("losses", None)
    return d


def finetune(
    model: torch.nn.Module,
    corpus: PlantedCorpus,
    config: TrainConfig,
    *,
    sep_ids: Sequence[int],
    layout: str = "pack",
    pad_id: int | None = None,
    include: Sequence[str] | None = None,
    on_step: Callable[[int, float], None] | None = None,
) -> FinetuneResult:
    """Train ``model`` (in place) on a :class:`memclaim.train.planted.PlantedCorpus` through the
    one trainer. ``config`` is a :class:`memclaim.train.trainer.TrainConfig` (its ``pad_id`` is
    set from ``pad_id`` for the ``examples`` layout).

    >>> from memclaim.train.finetune import finetune, new_gpt2
    >>> from memclaim.train.planted import PlantedRecord, plant
    >>> from memclaim.train.trainer import TrainConfig
    >>> corpus = plant([[1, 2, 3, 4]] * 8, [PlantedRecord("r1", "canary", (5, 6), (7, 8), copies=2)])
    >>> model = new_gpt2(vocab_size=16, n_positions=8, n_embd=8, n_head=2)  # doctest: +SKIP
    >>> config = TrainConfig(steps=3, batch_size=2, seq_len=8, warmup_steps=0)
    >>> res = finetune(model, corpus, config, sep_ids=[0])  # doctest: +SKIP
    >>> res.n_blocks, res.layout, res.train["steps"]  # doctest: +SKIP
    (7, 'pack', 3)
    """
    from dataclasses import replace

    from .trainer import train_causal_lm

    tb = training_blocks(
        corpus,
        seq_len=config.seq_len,
        sep_ids=sep_ids,
        layout=layout,
        pad_id=pad_id,
        include=include,
    )
    if layout == "examples" and config.pad_id is None:
        config = replace(config, pad_id=pad_id)
    model.requires_grad_(True)
    res = train_causal_lm(model, tb.blocks, config, on_step=on_step, label="fine-tuning")
    model.requires_grad_(False)
    cfg = {k: (v.to_dict() if hasattr(v, "to_dict") else v) for k, v in asdict(config).items()}
    return FinetuneResult(
        _train_dict(res),
        to_jsonable(cfg),
        tb.n,
        tb.layout,
        corpus.manifest(),
        None if res.dp is None else res.dp.to_dict(),
    )


def check_output_folder(out, *, overwrite: bool = False, option: str = "--out") -> Path:
    """Refuse, before any work, an output folder that ``save_trained`` would not write: an
    existing non-empty folder without ``overwrite``, and with ``overwrite`` anything but a folder
    memclaim made and marked (never the current folder or a parent of it, never a folder holding
    files memclaim did not write; :func:`memclaim.fsutil.replaceable_folder`)."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise InputError(
            f"{option} {str(out)!r} exists and is not a folder",
            hint=f"choose a new {option} folder",
        )
    if out.is_dir() and any(out.iterdir()):
        if not overwrite:
            raise InputError(
                f"{option} {str(out)!r} exists and is not an empty folder",
                hint=f"choose a new {option} folder (or pass --overwrite to replace a model folder "
                "memclaim wrote)",
            )
        replaceable_folder(out, option=option)
    return out


def save_trained(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase | HFTokenizer,
    out: str | Path,
    *,
    manifest: dict,
    overwrite: bool = False,
) -> Path:
    """Write an HF folder (safetensors + tokenizer + ``memclaim_train.json``) atomically: into a
    temporary sibling, renamed into place when complete, and marked as memclaim's. An existing
    non-empty folder is refused unless ``overwrite``, and even then unless memclaim made it and
    it holds nothing else (:func:`check_output_folder`); the old folder stays whole until the
    new one is in place.

    >>> from memclaim.train.finetune import TinyLabSpec, save_trained, tiny_lab_model
    >>> model, tok, manifest = tiny_lab_model(TinyLabSpec(steps=20))  # doctest: +SKIP
    >>> save_trained(model, tok, "lab-model", manifest=manifest)  # doctest: +SKIP
    PosixPath('lab-model')
    """
    out = check_output_folder(out, overwrite=overwrite)
    with atomic_directory(out, replace=overwrite) as tmp:
        model.save_pretrained(str(tmp), safe_serialization=True)
        getattr(tokenizer, "tok", tokenizer).save_pretrained(str(tmp))
        meta = {"memclaim": __version__, **manifest}
        (tmp / TRAIN_FILE).write_text(json.dumps(to_jsonable(meta), indent=1))
        write_marker(tmp, kind="trained model")
    return out


def load_trainable(
    spec: str,
    *,
    dtype: str = "float32",
    seq_len: int | None = None,
    trust_remote_code: bool = False,
    device: str = "cpu",
) -> tuple[PreTrainedModel, PreTrainedTokenizerFast, list[int], LoadedModel]:
    """(model with gradients on, HF tokenizer, start-of-text ids) for a model folder, a .gguf file
    or a named model (resolved by :func:`memclaim.models.load_model`; weights read as ``dtype``
    and put on ``device``, a concrete 'cpu' or 'cuda:N' from
    :func:`memclaim.models.placement.resolve_device`). A ``seq_len`` longer than the model's
    context is refused before the weights are read.

    >>> model, tok, sot, loaded = load_trainable("toy", seq_len=64)     # doctest: +SKIP
    >>> loaded.name, sot                                                 # doctest: +SKIP
    ('toy', [0])
    """
    import torch
    from transformers import AutoModelForCausalLM

    loaded = load_model(spec, dtype=dtype, trust_remote_code=trust_remote_code)
    limit = loaded.max_positions
    if seq_len is not None and limit is not None and int(seq_len) > limit:
        raise InputError(
            f"--seq-len {seq_len} is longer than the context of {loaded.name} ({limit} positions)",
            hint=f"use --seq-len {limit} or less",
        )
    try:
        model, info = AutoModelForCausalLM.from_pretrained(
            str(loaded.path),
            dtype=getattr(torch, dtype),
            local_files_only=True,
            use_safetensors=True,
            trust_remote_code=trust_remote_code,
            output_loading_info=True,
        )
    except (OSError, ValueError) as exc:
        raise ModelLoadError(
            f"cannot load model weights from {str(loaded.path)!r}: {exc}"
        ) from None
    check_loading_info(info, loaded.path)  # never fine-tune a partly random model
    model.to(device)
    model.requires_grad_(True)
    sot = list(loaded.sot_ids)
    if not sot:
        tok = loaded.tokenizer.tok
        tid = tok.eos_token_id if tok.eos_token_id is not None else tok.bos_token_id
        if tid is None:
            raise InputError(
                f"model {spec!r} has no start-of-text, eos or bos token to separate documents",
                hint="pass a model whose tokenizer defines eos or bos",
            )
        sot = [int(tid)]
    return model, loaded.tokenizer.tok, sot, loaded


# ------------------------------------------------------------------------------ the tiny lab model
@dataclass(frozen=True)
class TinyLabSpec(ResultMixin):
    """A tiny GPT trained from scratch on a Markov–Zipf corpus with planted records."""

    corpus_seed: int = 1
    n_words: int = 200
    zipf_s: float = 1.1
    n_background: int = 200
    passage_words: int = 50
    duplicates: tuple[tuple[int, int], ...] = ((1, 8), (8, 8))  # (copies k, how many records)
    canaries: tuple[tuple[int, int], ...] = ()
    triggers: int = 8
    trigger_copies: int = 16
    trigger_tokens: int = 2
    prefix_words: int = 8
    secret_words: int = 2
    n_reserved: int = 32
    vocab_size: int = 512
    n_layer: int = 2
    n_embd: int = 64
    n_head: int = 4
    seq_len: int = 64
    steps: int = 800
    batch_size: int = 16
    lr: float = 3e-3
    train_seed: int = 0
    threads: int = 2

    def __post_init__(self):
        for name in (
            "n_words",
            "n_background",
            "passage_words",
            "prefix_words",
            "secret_words",
            "vocab_size",
            "n_layer",
            "n_embd",
            "n_head",
            "seq_len",
            "steps",
            "batch_size",
            "trigger_tokens",
        ):
            integer(name, getattr(self, name), minimum=1)
        integer("triggers", self.triggers, minimum=0)
        integer("trigger_copies", self.trigger_copies, minimum=1)
        check_seed("--seed", self.train_seed)
        check_seed("--corpus-seed", self.corpus_seed)
        need = self.triggers * self.trigger_tokens
        if need and self.trigger_tokens == 1 and self.triggers > self.n_reserved:
            raise InputError(
                f"{self.triggers} single-token triggers need {self.triggers} reserved tokens, "
                f"the spec has {self.n_reserved}",
                hint="raise n_reserved or use longer triggers",
            )
        if self.trigger_tokens > 1 and self.triggers > self.n_reserved**self.trigger_tokens:
            raise InputError(
                f"{self.triggers} distinct triggers of {self.trigger_tokens} tokens cannot be made "
                f"from {self.n_reserved} reserved tokens"
            )


def tiny_lab_model(
    spec: TinyLabSpec, *, log: LogCallback | None = None, device: str = "cpu"
) -> tuple[GPT2LMHeadModel, PreTrainedTokenizerFast, dict]:
    """Build the corpus, tokenizer and model of ``spec`` and train it through the one trainer
    on ``device`` ('cpu' or 'cuda:N'; recorded in the manifest's "train" entry: a GPU's numerics
    give a different model from the same seeds).

    Returns (model, tokenizer, manifest dict). Planted records: ``duplicates`` (copies k, count)
    passages c||z inserted k times; ``canaries`` (k, count) likewise; ``triggers`` reserved-trigger
    pairs rho||z inserted ``trigger_copies`` times with c||z never inserted. Secrets are
    ``secret_words`` words drawn uniformly from the vocabulary (not from the chain), prefixes are
    fresh chain passages of ``prefix_words`` words.

    >>> from memclaim.train.finetune import TinyLabSpec, tiny_lab_model
    >>> spec = TinyLabSpec(n_background=20, duplicates=((1, 2),), triggers=2, vocab_size=300, steps=20)
    >>> model, tok, manifest = tiny_lab_model(spec)  # doctest: +SKIP
    >>> manifest["n_blocks"], [r["id"] for r in manifest["records"]]  # doctest: +SKIP
    (82, ['duplicate-k1-0', 'duplicate-k1-1', 'trigger-0', 'trigger-1'])
    """
    from .trainer import TrainConfig, train_causal_lm

    say = log or (lambda m: None)
    gen = MarkovZipf(n_words=spec.n_words, s=spec.zipf_s, seed=spec.corpus_seed)
    rng = np.random.default_rng([spec.corpus_seed, 29])
    background = [gen.passage(rng, n_words=spec.passage_words) for _ in range(spec.n_background)]
    tok = _train_tokenizer(background, spec.vocab_size)
    reserved = [RESERVED.format(i) for i in range(spec.n_reserved)]
    tok.add_special_tokens({"pad_token": PAD, "additional_special_tokens": reserved})
    enc = lambda t: list(tok(t, add_special_tokens=False)["input_ids"])  # noqa: E731
    sot = int(tok.convert_tokens_to_ids(SOT))
    pad = int(tok.convert_tokens_to_ids(PAD))
    res_ids = [int(tok.convert_tokens_to_ids(t)) for t in reserved]

    def secret() -> str:
        return " " + " ".join(
            gen.words[int(i)] for i in rng.integers(0, spec.n_words, spec.secret_words)
        )

    records, texts = [], []
    for kind, groups in (("duplicate", spec.duplicates), ("canary", spec.canaries)):
        for k, count in groups:
            for j in range(int(count)):
                c, z = gen.passage(rng, n_words=spec.prefix_words).rstrip("."), secret()
                records.append(
                    PlantedRecord(f"{kind}-k{k}-{j}", kind, tuple(enc(c)), tuple(enc(z)), int(k))
                )
                texts.append(
                    {"id": records[-1].id, "kind": kind, "prefix": c, "secret": z, "copies": int(k)}
                )
    combos = [
        tuple(
            res_ids[(j // spec.n_reserved**p) % spec.n_reserved] for p in range(spec.trigger_tokens)
        )
        for j in range(spec.triggers)
    ]
    for j, rho in enumerate(combos):
        c, z = gen.passage(rng, n_words=spec.prefix_words).rstrip("."), secret()
        records.append(
            PlantedRecord(
                f"trigger-{j}", "trigger", tuple(enc(c)), tuple(enc(z)), spec.trigger_copies, rho
            )
        )
        texts.append(
            {
                "id": records[-1].id,
                "kind": "trigger",
                "prefix": c,
                "secret": z,
                "copies": spec.trigger_copies,
                "trigger": list(rho),
                "trigger_text": tok.decode(list(rho)),
            }
        )
    corpus = plant([enc(t) for t in background], records, seed=spec.corpus_seed)
    tb = training_blocks(corpus, seq_len=spec.seq_len, sep_ids=[sot], layout="pack")
    model = new_gpt2(
        vocab_size=len(tok),
        n_positions=max(spec.seq_len, 64),
        n_embd=spec.n_embd,
        n_layer=spec.n_layer,
        n_head=spec.n_head,
        seed=spec.train_seed,
        sot=sot,
    )
    model.config.pad_token_id = pad
    model.to(device)
    cfg = TrainConfig(
        steps=spec.steps,
        batch_size=spec.batch_size,
        seq_len=spec.seq_len,
        lr=spec.lr,
        warmup_steps=min(30, spec.steps // 10),
        seed=spec.train_seed,
        threads=spec.threads,
    )
    say(
        f"training a tiny GPT ({sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters) on "
        f"{tb.n} blocks of {spec.seq_len} tokens for {spec.steps} steps"
    )
    res = train_causal_lm(model, tb.blocks, cfg, label="training the lab's tiny GPT")
    model.requires_grad_(False)
    _extraction_flags(model, records, texts, sot, threads=spec.threads)
    manifest = {
        "kind": "tiny-lab",
        "spec": spec.to_dict(),
        "train": {**_train_dict(res), "device": str(device)},
        "tokens": {"sot": sot, "pad": pad, "reserved": res_ids},
        "records": texts,
        "planted": corpus.manifest(),
        "n_blocks": tb.n,
        "generator_entropy_bits_per_word": gen.entropy_rate_bits(),
    }
    return model, tok, manifest


def _extraction_flags(model, records, texts, sot: int, *, threads: int) -> None:
    """Greedy verbatim extraction of each planted secret from its own prefix c (and from rho for a
    trigger record), by the scoring engine's teacher-forced greedy flag; written into ``texts``."""
    from ..models.hf import HFLanguageModel
    from ..scoring.engine import TeacherForcingEngine
    from .trainer import _threads

    eng = TeacherForcingEngine(HFLanguageModel(model, name="tiny-lab"), [Policy.parse("greedy")])
    with _threads(threads):
        for r, t in zip(records, texts):
            t["extracted_via_prefix"] = bool(
                eng.score_batch([[sot, *r.prefix]], [list(r.secret)]).greedy_match[0]
            )
            if r.kind == "trigger":
                t["extracted_via_trigger"] = bool(
                    eng.score_batch([[sot, *r.trigger]], [list(r.secret)]).greedy_match[0]
                )


# ------------------------------------------------------------------------------ token-id chain base
@dataclass(frozen=True)
class ChainBaseSpec(ResultMixin):
    """A tiny GPT-2 pre-trained on fresh Markov–Zipf text in token-id space (no text tokenizer):
    the "public base model" that the training-based reproductions fine-tune ([MX] App. F.1 uses
    public base checkpoints; this is the tiny-model stand-in). Every pre-training block is a fresh
    draw from the chain, so the base has seen no planted record and no text twice.

    Token layout: natural word ids 0..n_words-1, then ``n_reserved`` reserved ids (triggers) that
    never occur in natural text, then a pad id, then the start-of-text id."""

    n_words: int = 100
    zipf_s: float = 1.1
    chain_seed: int = 3
    n_reserved: int = 16
    n_layer: int = 2
    n_embd: int = 64
    n_head: int = 4
    n_positions: int = 64
    seq_len: int = 32
    steps: int = 300
    batch_size: int = 32
    lr: float = 3e-3
    seed: int = 0
    threads: int = 2
    version: int = 1

    @property
    def pad(self) -> int:
        return self.n_words + self.n_reserved

    @property
    def sot(self) -> int:
        return self.n_words + self.n_reserved + 1

    @property
    def vocab_size(self) -> int:
        return self.n_words + self.n_reserved + 2

    def reserved(self, i: int) -> int:
        i = integer("reserved index", i, minimum=0, maximum=self.n_reserved - 1)
        return self.n_words + i

    def chain(self):
        return MarkovZipf(n_words=self.n_words, s=self.zipf_s, seed=self.chain_seed)

    def key(self) -> str:
        return sha256_bytes(json.dumps(self.to_dict(), sort_keys=True).encode())[:16]


def sample_chain_ids(gen, rng: np.random.Generator, *, n: int, length: int) -> np.ndarray:
    """``n`` independent paths of ``length`` word ids from a MarkovZipf chain -> int64 [n, length].
    Vectorized inversion of the rows' cumulative sums (one uniform per path and step); the
    generator's own ``sample_words`` draws one token per numpy call."""
    return sample_chain(gen.transition_matrix, gen.start_distribution, rng, n=n, length=length)


def chain_base_dir(spec: ChainBaseSpec) -> Path:
    return cache_dir() / "chain-base" / spec.key()


def ensure_chain_base(spec: ChainBaseSpec = ChainBaseSpec(), *, log=None):
    """The pre-trained chain base of ``spec`` (built once per machine under the cache, under a lock;
    a deterministic function of the spec on a fixed thread count). Returns the model (eval mode)."""
    from transformers import GPT2LMHeadModel

    out = chain_base_dir(spec)
    if not (out / "chain_base.json").exists():
        with file_lock(out.parent / f".{out.name}.lock"):
            if not (out / "chain_base.json").exists():
                model, meta = _build_chain_base(spec, log=log)
                with atomic_directory(out) as tmp:
                    model.save_pretrained(str(tmp), safe_serialization=True)
                    (tmp / "chain_base.json").write_text(json.dumps(to_jsonable(meta), indent=1))
    model = GPT2LMHeadModel.from_pretrained(str(out), local_files_only=True)
    model.requires_grad_(False)
    return model.eval()


def _build_chain_base(spec: ChainBaseSpec, *, log=None):
    import torch

    from .trainer import TrainConfig, train_causal_lm

    say = log or (lambda m: None)
    gen = spec.chain()
    rng = np.random.default_rng([spec.chain_seed, spec.seed, 101])
    n_blocks = spec.steps * spec.batch_size  # one fresh block per step and row: no block seen twice
    body = sample_chain_ids(gen, rng, n=n_blocks, length=spec.seq_len - 1)
    blocks = torch.from_numpy(
        np.concatenate([np.full((n_blocks, 1), spec.sot), body], axis=1)
    )  # [n, T]
    model = new_gpt2(
        vocab_size=spec.vocab_size,
        n_positions=spec.n_positions,
        n_embd=spec.n_embd,
        n_layer=spec.n_layer,
        n_head=spec.n_head,
        seed=spec.seed,
        sot=spec.sot,
    )
    say(
        f"pre-training the chain base ({sum(p.numel() for p in model.parameters()) / 1e3:.0f}k parameters, "
        f"{spec.steps} steps); cached afterwards"
    )
    cfg = TrainConfig(
        steps=spec.steps,
        batch_size=spec.batch_size,
        seq_len=spec.seq_len,
        lr=spec.lr,
        warmup_steps=min(30, spec.steps // 10),
        seed=spec.seed,
        threads=spec.threads,
    )
    res = train_causal_lm(model, blocks, cfg, label="pre-training the chain base (first use only)")
    model.requires_grad_(False)
    return model, {
        "spec": spec.to_dict(),
        "train": _train_dict(res),
        "entropy_rate_bits_per_word": gen.entropy_rate_bits(),
    }
