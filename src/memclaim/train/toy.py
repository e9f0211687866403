"""The built-in tiny GPT: a GPT-2-architecture model trained (through the one trainer) on a
Markov–Zipf corpus with planted passages at several duplication counts, saved as an ordinary
HF folder (safetensors + tokenizer.json) so it loads through the same path as real models.

Built once per machine and cached under ``$MEMCLAIM_CACHE/toy/<spec hash>``; the folder also
holds ``toy_data.json``: the planted members (with their copy counts), the held-out controls
drawn from the same generator, and a member/control document pair for census demos.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from ..fsutil import atomic_directory, cache_dir, file_lock, sha256_bytes
from ..models.registry import register_model
from ..progress import LogCallback, ProgressCallback, Reporter, ambient, ambient_log
from .corpus import MarkovZipf, PlantedCorpus, build_planted_corpus

SOT = "<|endoftext|>"


@dataclass(frozen=True)
class ToySpec:
    corpus_seed: int = 1
    n_words: int = 300
    zipf_s: float = 1.1
    n_background: int = 400
    passage_words: int = 60
    copies: tuple[tuple[int, int], ...] = ((1, 16), (4, 16), (16, 16))
    n_held_out: int = 400
    document_words: int = 500
    document_copies: int = 4
    vocab_size: int = 1024
    n_layer: int = 2
    n_embd: int = 128
    n_head: int = 4
    n_positions: int = 256
    steps: int = 400
    batch_size: int = 16
    seq_len: int = 128
    lr: float = 3e-3
    train_seed: int = 0
    threads: int = 2
    version: int = 1  # bump when the recipe changes

    def key(self) -> str:
        return sha256_bytes(json.dumps(asdict(self), sort_keys=True).encode())[:16]


DEFAULT_SPEC = ToySpec()


def _train_tokenizer(texts, vocab_size: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[SOT],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=SOT, eos_token=SOT, unk_token=SOT
    )


def toy_corpus(spec: ToySpec = DEFAULT_SPEC) -> tuple[MarkovZipf, PlantedCorpus]:
    """(generator, corpus) of the tiny GPT, regenerated deterministically from its spec: the
    exact training documents (``corpus.documents``), the background alone
    (``corpus.background``), the planted records and the held-out controls.

    >>> from memclaim.train.toy import toy_corpus
    >>> gen, corpus = toy_corpus()  # doctest: +SKIP
    >>> gen.n_words, len(corpus.documents), len(corpus.planted), len(corpus.held_out)  # doctest: +SKIP
    (300, 740, 49, 401)
    """
    import numpy as np

    gen = MarkovZipf(n_words=spec.n_words, s=spec.zipf_s, seed=spec.corpus_seed)
    rng = np.random.default_rng(spec.corpus_seed + 1000)
    doc_member = gen.passage(rng, n_words=spec.document_words)
    doc_control = gen.passage(rng, n_words=spec.document_words)
    corpus = build_planted_corpus(
        gen,
        n_background=spec.n_background,
        passage_words=spec.passage_words,
        copies=dict(spec.copies),
        n_held_out=spec.n_held_out,
        seed=spec.corpus_seed,
        extra_planted=[
            {"id": "document-member", "text": doc_member, "copies": spec.document_copies}
        ],
        extra_held_out=[{"id": "document-control", "text": doc_control}],
    )
    return gen, corpus


def build_toy_model(
    spec: ToySpec,
    out: Path,
    *,
    log: LogCallback | None = None,
    progress: ProgressCallback | None = None,
) -> Path:
    """Generate the corpus, train tokenizer and model, save an HF folder at ``out``. ``log``
    receives the build's summary lines and ``progress`` its progress events (stage "build": the
    corpus, tokenizer and packing, 3 steps; stage "train": the training steps, with the loss in
    ``extra``); None: the ambient callbacks (:func:`memclaim.progress.reporting`), or silent.

    >>> from pathlib import Path
    >>> from memclaim.train.toy import ToySpec, build_toy_model
    >>> out = build_toy_model(ToySpec(steps=2, n_background=10, n_held_out=2), Path("toy-model"))  # doctest: +SKIP
    >>> sorted(p.name for p in out.iterdir())  # doctest: +SKIP
    ['config.json', 'generation_config.json', 'model.safetensors', 'tokenizer.json', 'tokenizer_config.json',
     'toy_data.json']
    """
    log = log or ambient_log() or (lambda msg: None)
    progress = progress or ambient()
    # the corpus (~4 s), the tokenizer and the packed blocks: a count of the 3 steps, so that the
    # seconds before training starts show as progress too
    prep = Reporter(
        progress,
        stage="build",
        label="tiny GPT: corpus and tokenizer (first use only)",
        total=3,
        unit="steps",
    )
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from .trainer import TrainConfig, pack_documents, train_causal_lm

    gen, corpus = toy_corpus(spec)
    prep.advance(1)
    tok = _train_tokenizer(list(corpus.documents), spec.vocab_size)
    prep.advance(1)
    sot_id = tok.convert_tokens_to_ids(SOT)
    docs = [tok(d, add_special_tokens=False)["input_ids"] for d in corpus.documents]
    blocks = pack_documents(docs, seq_len=spec.seq_len, sep_ids=[sot_id])
    prep.advance(1)
    prep.close()
    torch.manual_seed(spec.train_seed)
    config = GPT2Config(
        vocab_size=len(tok),
        n_positions=spec.n_positions,
        n_embd=spec.n_embd,
        n_layer=spec.n_layer,
        n_head=spec.n_head,
        bos_token_id=sot_id,
        eos_token_id=sot_id,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
    )
    model = GPT2LMHeadModel(config)
    threads = torch.get_num_threads()
    torch.set_num_threads(spec.threads)
    try:
        cfg = TrainConfig(
            steps=spec.steps,
            batch_size=spec.batch_size,
            seq_len=spec.seq_len,
            lr=spec.lr,
            seed=spec.train_seed,
            warmup_steps=30,
        )
        log(
            f"training the tiny GPT once ({sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters, "
            f"{blocks.numel()} tokens, {spec.steps} steps on {spec.threads} threads; a few minutes on two CPU cores); "
            "cached afterwards"
        )
        result = train_causal_lm(
            model, blocks, cfg, label="training the tiny GPT (first use only)", progress=progress
        )
    finally:
        torch.set_num_threads(threads)
    log(
        f"tiny GPT trained in {result.seconds:.0f}s: loss {result.first_loss:.2f} -> {result.final_loss:.2f}"
    )
    model.save_pretrained(str(out), safe_serialization=True)
    tok.save_pretrained(str(out))
    data = corpus.to_dict()
    data.update(
        {
            "spec": asdict(spec),
            "train": {k: v for k, v in result.to_dict().items() if k != "losses"},
            "generator_entropy_bits_per_word": gen.entropy_rate_bits(),
        }
    )
    (out / "toy_data.json").write_text(json.dumps(data, indent=1))
    return out


def toy_model_dir(spec: ToySpec = DEFAULT_SPEC) -> Path:
    """Where the tiny GPT of ``spec`` is cached: ``<cache>/toy/<spec hash>`` (not built here).

    >>> from memclaim.train.toy import DEFAULT_SPEC, toy_model_dir
    >>> toy_model_dir().parent.name, toy_model_dir().name == DEFAULT_SPEC.key()
    ('toy', True)
    """
    return cache_dir() / "toy" / spec.key()


def ensure_toy_model(
    spec: ToySpec = DEFAULT_SPEC,
    *,
    log: LogCallback | None = None,
    progress: ProgressCallback | None = None,
) -> Path:
    """Return the cached tiny-GPT folder, building it first if needed (once, under a lock; a few
    minutes on two CPU cores: 400 training steps, measured 397 CPU-seconds). ``log`` receives the
    build's summary lines, ``progress`` its progress events (None: the ambient callbacks of
    :func:`memclaim.progress.reporting`, or silent); a process waiting for another one's build
    says so on ``log``.

    >>> from memclaim.train.toy import ensure_toy_model
    >>> (ensure_toy_model() / "toy_data.json").is_file()  # doctest: +SKIP
    True
    """
    log = log or ambient_log() or (lambda msg: None)
    out = toy_model_dir(spec)
    if (out / "toy_data.json").exists():
        return out
    lock = out.parent / f".{out.name}.lock"
    with file_lock(lock, blocking=False) as got:
        if got:
            if not (out / "toy_data.json").exists():
                with atomic_directory(out) as tmp:
                    build_toy_model(spec, tmp, log=log, progress=progress)
            return out
    log("another process is building the tiny GPT; waiting for it to finish")
    with (
        Reporter(
            progress or ambient(),
            stage="build",
            label="waiting for another process's tiny GPT build",
            total=None,
            unit="steps",
        ),
        file_lock(lock),
    ):
        if not (out / "toy_data.json").exists():  # the other process died: build it here
            with atomic_directory(out) as tmp:
                build_toy_model(spec, tmp, log=log, progress=progress)
    return out


def toy_data(spec: ToySpec = DEFAULT_SPEC) -> dict:
    """The tiny GPT's ``toy_data.json`` (built first if needed): planted members with their copy
    counts, held-out controls, the spec and the training summary.

    >>> from memclaim.train.toy import toy_data
    >>> d = toy_data()  # doctest: +SKIP
    >>> sorted(d)[:4], d["planted"][0]["id"], d["planted"][0]["copies"]  # doctest: +SKIP
    (['generator_entropy_bits_per_word', 'held_out', 'n_documents', 'planted'], 'member-k1-0', 1)
    """
    return json.loads((ensure_toy_model(spec) / "toy_data.json").read_text())


def _resolve_toy(log: LogCallback | None = None, progress: ProgressCallback | None = None) -> Path:
    return ensure_toy_model(DEFAULT_SPEC, log=log, progress=progress)


# the named model "toy" (memclaim.models.registry): models/ resolves it without importing train/
register_model(
    "toy",
    resolve=_resolve_toy,
    sot="bos",
    provider=__name__,
    replace=True,
    description="memclaim's built-in tiny GPT trained on a synthetic corpus with planted passages",
)
