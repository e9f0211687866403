"""Tiny transformers on token-id corpora, for the training-based reproductions of [MX] §8.

[MX] §8.1 trains "a two-layer transformer" on synthetic languages (a Markov–Zipf language with
trigger pairs, Fig. 7; camouflage-tree data, Fig. 9) and App. F.3 says these mechanism-level
experiments "run on a CPU in minutes and reproduce bit-exactly from fixed seeds". This module
holds what those reproductions share:

- a vocabulary layout over token ids with no text tokenizer (:class:`TokenLayout`): natural
  tokens are the Markov–Zipf word ids, then reserved ids (triggers, public prefixes), then a
  start-of-text id;
- the Markov–Zipf chain as arrays (:func:`chain_arrays`), a vectorized sampler
  (:func:`sample_chain`) and the exact most likely continuation (:func:`chain_max_path`, a
  Viterbi recursion: the chain prior's kappa_pi(1), [MX] Thm. 5.1);
- a 2-layer GPT-2 (:func:`tiny_gpt2`, HF ``GPT2LMHeadModel`` so that it loads through
  :class:`memclaim.models.hf.HFLanguageModel` like any other model) trained on token-id
  documents through the project's one trainer (:func:`train_tiny`), with three block layouts:
  a packed stream, whole documents per padded block (:func:`pack_whole`: a trigger and its
  secret are never cut apart), or one document per block (a DP example);
- batched read-outs: next-token log-probabilities (:func:`next_token_logprobs`), greedy and
  temperature decoding (:func:`greedy_decode`, :func:`sample_decode`), and teacher-forced
  per-token statistics through the scoring engine (:func:`teacher_forced`); they live in
  :mod:`memclaim.decode`, where an attack author looks for them, and are re-exported here.

Determinism. Every random draw comes from a numpy Generator or a seeded torch Generator passed
in; model initialization runs under ``torch.random.fork_rng`` so the global torch RNG is left
alone; training and scoring run under a fixed torch thread count (:func:`torch_threads`, default
:data:`THREADS`), because a BLAS reduction may split differently on another thread count. With
the same seed and the same software stack the numbers are identical bit for bit.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import numpy as np

# the read-outs' one home is memclaim.decode (issue 26); their names stay importable from here
from ..decode import (
    THREADS,
    TeacherForced,
    greedy_decode,
    next_token_logprobs,
    sample_decode,
    teacher_forced,
    torch_threads,
)
from ..errors import DomainError, InputError
from ..jsonutil import ResultMixin
from ..train.corpus import sample_chain  # the one chain sampler
from ..validate import integer

if TYPE_CHECKING:  # the annotations' names only (torch and transformers load when a model is built)
    import torch
    from numpy.typing import ArrayLike
    from transformers import GPT2LMHeadModel, PreTrainedModel

    from ..models.hf import HFLanguageModel
    from ..train.corpus import MarkovZipf
    from ..train.trainer import TrainConfig, TrainResult

_M = TypeVar("_M")


# ------------------------------------------------------------------------------ vocabulary
@dataclass(frozen=True)
class TokenLayout(ResultMixin):
    """Token ids 0..n_natural-1 are natural tokens (word ids of the synthetic language), then
    ``n_reserved`` reserved ids that never occur in natural text (reserved triggers, public
    prefixes), then one start-of-text id (``sot``) that separates documents."""

    n_natural: int
    n_reserved: int = 0

    def __post_init__(self):
        integer("n_natural", self.n_natural, minimum=2)
        integer("n_reserved", self.n_reserved, minimum=0)

    @property
    def sot(self) -> int:
        return self.n_natural + self.n_reserved

    @property
    def size(self) -> int:
        return self.n_natural + self.n_reserved + 1

    def reserved(self, i: int) -> int:
        """The i-th reserved id (0-based)."""
        i = integer("reserved index", i, minimum=0)
        if i >= self.n_reserved:
            raise InputError(
                f"reserved index {i} out of range: the layout has {self.n_reserved} reserved ids",
                hint="build the TokenLayout with more reserved ids",
            )
        return self.n_natural + i

    def is_natural(self, tokens) -> np.ndarray:
        t = np.asarray(tokens)
        return (t >= 0) & (t < self.n_natural)


# ------------------------------------------------------------------------------ Markov chain
def chain_arrays(gen: MarkovZipf) -> tuple[np.ndarray, np.ndarray]:
    """(P, unigram) of a :class:`memclaim.train.corpus.MarkovZipf`: the row-stochastic transition
    matrix [n, n] and the start (unigram Zipf) distribution [n], both float64, read-only copies.

    >>> from memclaim.experiments.models import chain_arrays
    >>> from memclaim.train.corpus import MarkovZipf
    >>> P, u = chain_arrays(MarkovZipf(n_words=5, seed=0))
    >>> P.shape, round(float(u.sum()), 6), P.flags.writeable
    ((5, 5), 1.0, False)
    """
    P = np.array(gen.transition_matrix, dtype=np.float64)
    u = np.array(gen.start_distribution, dtype=np.float64)
    P.setflags(write=False)
    u.setflags(write=False)
    return P, u


def chain_logprob(P: ArrayLike, seq: Sequence[int], *, previous: int) -> float:
    """log P(seq | previous state) under the chain (natural log).

    >>> from memclaim.experiments.models import chain_logprob
    >>> round(chain_logprob([[0.9, 0.1], [0.5, 0.5]], [0, 1], previous=0), 4)  # log(0.9 * 0.1)
    -2.4079
    """
    P = np.asarray(P, dtype=np.float64)
    lp, prev = 0.0, int(previous)
    for t in seq:
        lp += math.log(P[prev, int(t)]) if P[prev, int(t)] > 0 else -math.inf
        prev = int(t)
    return lp


def chain_max_path(P: ArrayLike, *, previous: int, length: int) -> tuple[tuple[int, ...], float]:
    """The most likely ``length``-token continuation of the chain after state ``previous`` and
    its natural-log probability: max_z P(z | previous), by the Viterbi (max-product) recursion
    in log space. For a first-order chain this is the exact kappa_pi(1) of the data-generating
    prior ([MX] Thm. 5.1), with no search.

    >>> from memclaim.experiments.models import chain_max_path
    >>> path, lp = chain_max_path([[0.9, 0.1], [0.5, 0.5]], previous=1, length=3)
    >>> path, round(lp, 4)  # log(0.5 * 0.9 * 0.9)
    ((0, 0, 0), -0.9039)
    """
    P = np.asarray(P, dtype=np.float64)
    length = integer("length", length, minimum=1)
    with np.errstate(divide="ignore"):
        logP = np.log(P)
    n = P.shape[0]
    # best[j] = max log-prob of a path of the current length ending in state j
    best = logP[int(previous)].copy()
    back = []
    for _ in range(length - 1):
        cand = best[:, None] + logP  # [from, to]
        arg = np.argmax(cand, axis=0)  # lowest 'from' index among ties
        back.append(arg)
        best = cand[arg, np.arange(n)]
    last = int(np.argmax(best))
    path = [last]
    for arg in reversed(back):
        path.append(int(arg[path[-1]]))
    return tuple(reversed(path)), float(best[last])


# ------------------------------------------------------------------------------ torch plumbing
@dataclass(frozen=True)
class TinyGPTSpec(ResultMixin):
    """Architecture of the tiny GPT-2 ([MX] §8.1: "a two-layer transformer")."""

    vocab_size: int
    n_positions: int = 64
    n_layer: int = 2
    n_embd: int = 64
    n_head: int = 4

    def __post_init__(self):
        integer("vocab_size", self.vocab_size, minimum=2)
        integer("n_positions", self.n_positions, minimum=2)
        integer("n_layer", self.n_layer, minimum=1)
        integer("n_embd", self.n_embd, minimum=1)
        integer("n_head", self.n_head, minimum=1)
        if self.n_embd % self.n_head:
            raise DomainError(
                f"n_embd = {self.n_embd} is not a multiple of n_head = {self.n_head}",
                hint="choose n_embd divisible by n_head",
            )


def tiny_gpt2(spec: TinyGPTSpec, *, seed: int, sot: int | None = None) -> GPT2LMHeadModel:
    """A fresh GPT-2 (no dropout) initialized under ``seed`` without touching the global torch
    RNG. ``sot`` (default: the last id) is recorded as bos/eos in the config.

    >>> from memclaim.experiments.models import TinyGPTSpec, tiny_gpt2
    >>> model = tiny_gpt2(TinyGPTSpec(vocab_size=8, n_positions=8, n_embd=8, n_head=2), seed=0)  # doctest: +SKIP
    >>> model.config.n_layer, model.config.eos_token_id  # doctest: +SKIP
    (2, 7)
    """
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    seed = integer("seed", seed, minimum=0)
    sot = (
        spec.vocab_size - 1
        if sot is None
        else integer("sot", sot, minimum=0, maximum=spec.vocab_size - 1)
    )
    cfg = GPT2Config(
        vocab_size=spec.vocab_size,
        n_positions=spec.n_positions,
        n_embd=spec.n_embd,
        n_layer=spec.n_layer,
        n_head=spec.n_head,
        bos_token_id=sot,
        eos_token_id=sot,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = GPT2LMHeadModel(cfg)
    return model.eval()


def copy_model(model: _M) -> _M:
    """An independent deep copy (weights and config) of a model.

    >>> import torch
    >>> from memclaim.experiments.models import copy_model
    >>> m = torch.nn.Linear(2, 2)
    >>> c = copy_model(m)
    >>> c is m, c.weight is m.weight, torch.equal(c.weight, m.weight)
    (False, False, True)
    """
    import copy

    return copy.deepcopy(model)


def _check_docs(docs, vocab_size: int) -> list[list[int]]:
    out = []
    for i, d in enumerate(docs):
        a = np.asarray(d)
        if a.ndim != 1 or a.size == 0 or not np.issubdtype(a.dtype, np.integer):
            raise InputError(
                f"document {i} must be a non-empty 1-d sequence of token ids, got {d!r}"
            )
        if a.min() < 0 or a.max() >= vocab_size:
            raise InputError(
                f"document {i} has token ids outside [0, {vocab_size}): "
                f"min {int(a.min())}, max {int(a.max())}"
            )
        out.append([int(t) for t in a])
    if not out:
        raise InputError("no training documents")
    return out


LAYOUTS = ("stream", "whole", "example")


def pack_whole(docs: Sequence[Sequence[int]], *, seq_len: int, sot: int, pad: int) -> torch.Tensor:
    """Blocks of whole documents: ``[sot, d_1, sot, d_2, ...]`` filled in order until the next
    document does not fit, the rest right-padded with ``pad`` -> LongTensor [n_blocks, seq_len].
    No document is cut (a trigger and its secret stay in one block) and no padding is trained on
    (use ``TrainConfig(pad_id=pad)``). A document longer than ``seq_len - 1`` is refused.

    >>> from memclaim.experiments.models import pack_whole
    >>> pack_whole([[1, 2], [3]], seq_len=4, sot=0, pad=9).tolist()
    [[0, 1, 2, 9], [0, 3, 9, 9]]
    """
    import torch

    T = integer("seq_len", seq_len, minimum=2)
    blocks: list[list[int]] = []
    cur: list[int] = []
    for i, d in enumerate(docs):
        seq = [int(sot)] + [int(t) for t in d]
        if len(seq) > T:
            raise InputError(
                f"document {i} has {len(seq)} tokens with its separator, more than seq_len = {T}",
                hint="raise seq_len or shorten the document",
            )
        if int(pad) in seq:
            raise InputError(
                f"document {i} contains the pad id {pad}",
                hint="use a pad id that occurs in no document",
            )
        if len(cur) + len(seq) > T:
            blocks.append(cur + [int(pad)] * (T - len(cur)))
            cur = []
        cur = cur + seq
    if cur:
        blocks.append(cur + [int(pad)] * (T - len(cur)))
    if not blocks:
        raise InputError("no documents to pack")
    return torch.tensor(blocks, dtype=torch.long)  # [n_blocks, seq_len]


def train_tiny(
    model: PreTrainedModel,
    docs: Sequence[Sequence[int]],
    config: TrainConfig,
    *,
    sot: int,
    layout: str = "stream",
    threads: int = THREADS,
    shuffle_seed: int | None = None,
    objective: Callable[[object, torch.Tensor], torch.Tensor] | None = None,
    on_step: Callable[[int, float], None] | None = None,
) -> TrainResult:
    """Train ``model`` on token-id documents through the one trainer
    (:func:`memclaim.train.trainer.train_causal_lm`).

    Documents are optionally shuffled (numpy Generator seeded by ``shuffle_seed``) and each is
    preceded by ``sot``. ``layout``:

    - ``"stream"``: concatenated and cut into blocks of ``config.seq_len`` by
      :func:`memclaim.train.trainer.pack_documents` (documents may straddle blocks; the tail
      shorter than a block is dropped);
    - ``"whole"``: whole documents per block, padded (:func:`pack_whole`); needs ``config.pad_id``;
    - ``"example"``: one document per block, padded (:func:`memclaim.train.trainer.example_blocks`),
      which is what makes a document one DP example; needs ``config.pad_id``.

    ``objective`` and ``on_step`` are passed to the trainer. Returns the
    :class:`memclaim.train.trainer.TrainResult`.

    >>> from memclaim.experiments.models import TinyGPTSpec, tiny_gpt2, train_tiny
    >>> from memclaim.train.trainer import TrainConfig
    >>> model = tiny_gpt2(TinyGPTSpec(vocab_size=8), seed=0)  # doctest: +SKIP
    >>> tr = train_tiny(model, [[1, 2, 3, 4]] * 64, TrainConfig(steps=20, batch_size=8, seq_len=16),
    ...                 sot=7)  # doctest: +SKIP
    """
    from ..train.trainer import example_blocks, pack_documents, train_causal_lm

    V = int(model.config.vocab_size)
    d = _check_docs(docs, V)
    sot = integer("sot", sot, minimum=0, maximum=V - 1)
    if layout not in LAYOUTS:
        raise DomainError(f"unknown layout {layout!r}", hint=f"one of {LAYOUTS}")
    pad = getattr(config, "pad_id", None)
    if layout != "stream" and pad is None:
        raise DomainError(
            f"layout {layout!r} pads blocks and needs TrainConfig(pad_id=...)",
            hint="give the pad id in the TrainConfig, or use layout='stream'",
        )
    if shuffle_seed is not None:
        order = np.random.default_rng(integer("shuffle_seed", shuffle_seed, minimum=0)).permutation(
            len(d)
        )
        d = [d[i] for i in order]
    if config.seq_len > int(model.config.n_positions):
        raise DomainError(
            f"seq_len = {config.seq_len} exceeds the model's n_positions = {model.config.n_positions}",
            hint="lower seq_len or build the model with more positions",
        )
    if layout == "stream":
        blocks = pack_documents(d, seq_len=config.seq_len, sep_ids=[sot])  # [n_blocks, seq_len]
    elif layout == "whole":
        blocks = pack_whole(d, seq_len=config.seq_len, sot=sot, pad=pad)  # [n_blocks, seq_len]
    else:
        blocks = example_blocks(
            d, seq_len=config.seq_len, sep_ids=[sot], pad_id=pad
        )  # [n_docs, seq_len]
    with torch_threads(threads):
        return train_causal_lm(model, blocks, config, objective=objective, on_step=on_step)


def fingerprint(model: PreTrainedModel) -> str:
    """sha256 of the config and every parameter's bytes (first 16 hex digits).

    >>> from memclaim.experiments.models import TinyGPTSpec, fingerprint, tiny_gpt2
    >>> fingerprint(tiny_gpt2(TinyGPTSpec(vocab_size=8, n_positions=8, n_embd=8, n_head=2), seed=0))  # doctest: +SKIP
    '6c2ff8414328d677'
    """
    import torch

    h = hashlib.sha256(model.config.to_json_string(use_diff=True).encode())
    for name, p in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(p.detach().to(torch.float32).contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def language_model(model: PreTrainedModel, *, name: str = "tiny-gpt2") -> HFLanguageModel:
    """The model behind the project's interface (:class:`memclaim.models.hf.HFLanguageModel`).

    >>> from memclaim.experiments.models import TinyGPTSpec, language_model, tiny_gpt2
    >>> lm = language_model(tiny_gpt2(TinyGPTSpec(vocab_size=8), seed=0))  # doctest: +SKIP
    >>> lm.vocab_size  # doctest: +SKIP
    8
    """
    from ..models.hf import HFLanguageModel

    return HFLanguageModel(model, name=name, fingerprint=fingerprint(model))


__all__ = [
    "LAYOUTS",
    "THREADS",
    "TokenLayout",
    "TinyGPTSpec",
    "TeacherForced",
    "chain_arrays",
    "chain_logprob",
    "chain_max_path",
    "copy_model",
    "fingerprint",
    "greedy_decode",
    "language_model",
    "next_token_logprobs",
    "pack_whole",
    "sample_chain",
    "sample_decode",
    "teacher_forced",
    "tiny_gpt2",
    "torch_threads",
    "train_tiny",
]
