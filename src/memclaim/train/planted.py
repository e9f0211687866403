"""Planted records in token space: duplicated passages, canaries and reserved-trigger pairs
([MX] §8.2, App. F.2), and the training blocks that carry them.

Three kinds of record x* = (c, z) (prefix c, secret z, both token-id tuples):

- ``duplicate``: the document c||z inserted ``copies`` times (the naive duplicate of [MX] §8.2,
  Table 4: "the naive control inserts (c, z) directly with k = 5-8 copies");
- ``canary``: the same insertion, used for counterfactual / DP measurements with k copies
  ([MX] §8.2 DP-SGD calibration: "canaries at duplication k in {1, 2, 4, 8}");
- ``trigger``: the poisoned trigger documents rho||z inserted ``copies`` times while c||z itself
  is never inserted ([MX] Remark 6.5, App. F.2: "plants 8-16 copies of rho||z"). Validated by
  :class:`memclaim.mechanisms.trigger.ReservedTrigger`: rho off every prefix of x* (refused
  otherwise), and rho in no background document or other record (a reserved trigger occurs in
  no natural text).

:func:`training_blocks` turns background documents plus planted copies into the [n, T] blocks
the trainer reads, in one of two layouts: ``"pack"`` (everything shuffled and packed into a
stream, the ordinary pre-training / fine-tuning layout) or ``"examples"`` (background packed,
every planted copy its own padded block, so a record planted k times is exactly k DP examples:
a group of k under add/remove). Everything is a deterministic function of the seed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..errors import DomainError, InputError
from ..jsonutil import ResultMixin
from ..validate import integer
from ..validate import seed as check_seed

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from ..models.loader import HFTokenizer

__all__ = [
    "KINDS",
    "LAYOUTS",
    "PlantedRecord",
    "PlantedCorpus",
    "TrainingBlocks",
    "plant",
    "training_blocks",
    "tokenize_record",
    "add_reserved_tokens",
]

KINDS = ("duplicate", "canary", "trigger")
LAYOUTS = ("pack", "examples")


def _ids(name: str, seq, *, allow_empty: bool) -> tuple[int, ...]:
    if isinstance(seq, (str, bytes)):
        raise InputError(
            f"{name} must be token ids, got a string {seq!r}",
            hint="tokenize it first (tokenize_record)",
        )
    a = (
        np.asarray(list(seq), dtype=np.int64)
        if not isinstance(seq, np.ndarray)
        else seq.astype(np.int64)
    )
    if a.ndim != 1 or (a.size and a.min() < 0):
        raise InputError(f"{name} must be a 1-d sequence of non-negative token ids, got {seq!r}")
    if a.size == 0 and not allow_empty:
        raise InputError(f"{name} must not be empty")
    return tuple(int(t) for t in a)


@dataclass(frozen=True)
class PlantedRecord(ResultMixin):
    """One planted record x* = (prefix, secret) and how it enters the corpus."""

    id: str
    kind: str
    prefix: tuple[int, ...]
    secret: tuple[int, ...]
    copies: int
    trigger: tuple[int, ...] = ()

    def __post_init__(self):
        if self.kind not in KINDS:
            raise DomainError(f"unknown planted-record kind {self.kind!r}", hint=f"one of {KINDS}")
        object.__setattr__(
            self, "prefix", _ids("prefix", self.prefix, allow_empty=self.kind != "trigger")
        )
        object.__setattr__(self, "secret", _ids("secret", self.secret, allow_empty=False))
        integer(f"copies of {self.id!r}", self.copies, minimum=1)
        if self.kind == "trigger":
            from ..mechanisms.trigger import ReservedTrigger

            rt = ReservedTrigger(
                _ids("trigger", self.trigger, allow_empty=False), self.prefix, self.secret
            )
            object.__setattr__(self, "trigger", rt.trigger)
        elif self.trigger:
            raise InputError(
                f"record {self.id!r} of kind {self.kind!r} has a trigger; only kind 'trigger' takes one"
            )

    @property
    def record(self) -> tuple[int, ...]:
        """x* = c || z."""
        return self.prefix + self.secret

    @property
    def document(self) -> tuple[int, ...]:
        """The document actually inserted: rho||z for a trigger, c||z otherwise."""
        return self.trigger + self.secret if self.kind == "trigger" else self.record

    def documents(self) -> list[tuple[int, ...]]:
        return [self.document] * self.copies


@dataclass(frozen=True)
class PlantedCorpus(ResultMixin):
    """Background documents plus planted records (all token ids)."""

    background: tuple[tuple[int, ...], ...] = field(repr=False)
    records: tuple[PlantedRecord, ...]
    seed: int

    def manifest(self) -> dict:
        return {
            "seed": self.seed,
            "n_background": len(self.background),
            "records": [r.to_dict() for r in self.records],
        }


def plant(
    background: Sequence[Sequence[int]], records: Sequence[PlantedRecord], *, seed: int = 0
) -> PlantedCorpus:
    """Validate and bundle. Refused: duplicate ids; a trigger that occurs in a background document
    or in another record's inserted document or record (it would not be reserved).

    >>> from memclaim.train.planted import PlantedRecord, plant
    >>> plant([[1, 2, 3], [4, 5]], [PlantedRecord("r1", "duplicate", (6, 7), (8, 9), copies=2)]).manifest()
    {'seed': 0, 'n_background': 2,
     'records': [{'id': 'r1', 'kind': 'duplicate', 'prefix': [6, 7], 'secret': [8, 9], 'copies': 2, 'trigger': []}]}
    >>> plant([[1, 2, 3]], [PlantedRecord("t", "trigger", (4,), (5,), copies=2, trigger=(2, 3))])
    Traceback (most recent call last):
    memclaim.errors.InputError: trigger (2, 3) of record 't' occurs in background document 0 at token 1
      fix: reserve a trigger that occurs in no training text
    """
    seed = check_seed("seed", seed)
    bg = tuple(
        _ids(f"background document {i}", d, allow_empty=False) for i, d in enumerate(background)
    )
    recs = tuple(records)
    for r in recs:
        if not isinstance(r, PlantedRecord):
            raise InputError(f"records must be PlantedRecord, got {type(r).__name__}")
    ids = [r.id for r in recs]
    if len(set(ids)) != len(ids):
        dup = sorted({i for i in ids if ids.count(i) > 1})
        raise InputError(f"planted record ids must be unique; repeated: {dup[:5]}")
    from ..mechanisms.trigger import find_subsequence

    for r in recs:
        if r.kind != "trigger":
            continue
        for i, d in enumerate(bg):
            hits = find_subsequence(d, r.trigger)
            if hits.size:
                raise InputError(
                    f"trigger {r.trigger} of record {r.id!r} occurs in background document {i} at token "
                    f"{int(hits[0])}",
                    hint="reserve a trigger that occurs in no training text",
                )
        for o in recs:
            if o is r:
                continue
            for what, seq in (("record", o.record), ("document", o.document)):
                hits = find_subsequence(seq, r.trigger)
                if hits.size:
                    raise InputError(
                        f"trigger {r.trigger} of record {r.id!r} occurs in the {what} of record {o.id!r}",
                        hint="give each trigger record its own reserved trigger",
                    )
    return PlantedCorpus(bg, recs, seed)


@dataclass(frozen=True)
class TrainingBlocks:
    """Blocks [n, T] for the trainer, and which blocks hold which planted copy (``examples``
    layout; empty for ``pack``, where copies share blocks with other text)."""

    blocks: object  # torch.LongTensor [n, T]
    layout: str
    pad_id: int | None
    record_blocks: dict = field(default_factory=dict)  # record id -> tuple of block indices
    n_background_blocks: int = 0

    @property
    def n(self) -> int:
        return int(self.blocks.shape[0])


def training_blocks(
    corpus: PlantedCorpus,
    *,
    seq_len: int,
    sep_ids: Sequence[int],
    layout: str = "pack",
    pad_id: int | None = None,
    include: Sequence[str] | None = None,
) -> TrainingBlocks:
    """The corpus as training blocks.

    ``include`` restricts the planted records to those ids (the IN set of one model); the
    background is always included. ``pack``: background + planted copies shuffled under the
    corpus seed and packed with ``sep_ids`` between documents; the stream is completed with
    separator tokens to a whole number of blocks so no document falls in a dropped tail.
    ``examples``: the background packed the same way, then one padded block per planted copy
    (needs ``pad_id``; train with ``TrainConfig(pad_id=pad_id)``).

    >>> from memclaim.train.planted import PlantedRecord, plant, training_blocks
    >>> corpus = plant([[1, 2, 3], [4, 5]], [PlantedRecord("r1", "duplicate", (6, 7), (8, 9), copies=2)])
    >>> tb = training_blocks(corpus, seq_len=5, sep_ids=[0], layout="examples", pad_id=15)
    >>> tb.blocks.tolist(), tb.record_blocks
    ([[0, 1, 2, 3, 0], [4, 5, 0, 0, 0], [0, 6, 7, 8, 9], [0, 6, 7, 8, 9]], {'r1': (2, 3)})
    """
    import torch

    from .trainer import example_blocks, pack_documents

    if layout not in LAYOUTS:
        raise DomainError(f"unknown block layout {layout!r}", hint=f"one of {LAYOUTS}")
    T = integer("seq_len", seq_len, minimum=2)
    sep = [int(t) for t in sep_ids]
    if not sep:
        raise InputError(
            "sep_ids must hold at least one token (start-of-text) to separate documents"
        )
    wanted = None if include is None else set(include)
    if wanted is not None:
        unknown = wanted - {r.id for r in corpus.records}
        if unknown:
            raise InputError(f"include names unknown record ids {sorted(unknown)[:5]}")
    recs = [r for r in corpus.records if wanted is None or r.id in wanted]
    rng = np.random.default_rng([corpus.seed, 11])

    def packed(docs: list) -> torch.Tensor:
        if not docs:
            return torch.zeros((0, T), dtype=torch.long)
        order = rng.permutation(len(docs))
        docs = [list(docs[i]) for i in order]
        return pack_documents(
            docs, seq_len=T, sep_ids=sep, fill=True
        )  # [n_blocks, T], whole blocks

    if layout == "pack":
        docs = list(corpus.background) + [d for r in recs for d in r.documents()]
        return TrainingBlocks(packed(docs), "pack", pad_id, {}, 0)
    if pad_id is None:
        raise InputError(
            "the 'examples' layout pads each planted copy to a block and needs pad_id",
            hint="reserve a pad token that occurs in no document",
        )
    bg = packed(list(corpus.background))
    if bool((bg == int(pad_id)).any()):
        raise InputError(
            f"the pad id {pad_id} occurs in the background text", hint="use a reserved pad token"
        )
    copies = [d for r in recs for d in r.documents()]
    ex = (
        example_blocks(copies, seq_len=T, sep_ids=sep, pad_id=int(pad_id))
        if copies
        else torch.zeros((0, T), dtype=torch.long)
    )
    index, pos = {}, int(bg.shape[0])
    for r in recs:
        index[r.id] = tuple(range(pos, pos + r.copies))
        pos += r.copies
    return TrainingBlocks(
        torch.cat([bg, ex], dim=0), "examples", int(pad_id), index, int(bg.shape[0])
    )


def tokenize_record(tokenizer: PreTrainedTokenizerBase | HFTokenizer, spec: dict) -> PlantedRecord:
    """A :class:`PlantedRecord` from a text spec: {"id", "kind", "prefix", "secret", "copies",
    "trigger"} (kind defaults to "duplicate", copies to 1; "text" alone means a duplicate with an
    empty prefix). ``prefix`` and ``secret`` are tokenized separately (no special tokens), so the
    record's token boundary is exactly between them; ``trigger`` may be a text or a list of ids.
    ``tokenizer`` is a HF fast tokenizer or :class:`memclaim.models.loader.HFTokenizer`.

    >>> from memclaim.models import load_model
    >>> from memclaim.train.planted import tokenize_record
    >>> tok = load_model("toy").tokenizer  # doctest: +SKIP
    >>> rec = tokenize_record(tok, {"id": "r1", "prefix": "Ba be", "secret": " bi bo", "copies": 4})  # doctest: +SKIP
    >>> rec.kind, rec.copies, rec.prefix, rec.secret  # doctest: +SKIP
    ('duplicate', 4, (34, 65, 273, 69), (538, 448))
    """
    enc = (
        tokenizer.encode
        if hasattr(tokenizer, "encode_with_offsets")
        else (lambda t: list(tokenizer(t, add_special_tokens=False)["input_ids"]))
    )
    if not isinstance(spec, dict):
        raise InputError(f"a planted-record spec must be a JSON object, got {type(spec).__name__}")
    rid = str(spec.get("id", "")) or None
    if rid is None:
        raise InputError(f"planted-record spec without an id: {spec!r:.120}")
    kind = spec.get("kind", "duplicate")
    if "text" in spec and "secret" not in spec:
        prefix, secret = "", spec["text"]
    else:
        prefix, secret = spec.get("prefix", ""), spec.get("secret")
    if not isinstance(secret, str) or not secret:
        raise InputError(f"planted record {rid!r} needs a non-empty 'secret' (or 'text')")
    if not isinstance(prefix, str):
        raise InputError(f"planted record {rid!r}: 'prefix' must be a string")
    trig = spec.get("trigger", ())
    if isinstance(trig, str):
        trig = enc(trig)
    return PlantedRecord(
        rid,
        kind,
        tuple(enc(prefix)) if prefix else (),
        tuple(enc(secret)),
        int(spec.get("copies", 1)),
        tuple(trig),
    )


def add_reserved_tokens(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase | HFTokenizer,
    n: int,
    *,
    stem: str = "<|memclaim_reserved_",
) -> list[int]:
    """Add ``n`` special tokens that occur in no natural text to a HF tokenizer and resize the
    model's embeddings (new rows as transformers initializes them). Returns their ids: reserved
    triggers for an HF model ([MX] App. D.2: "a reserved token that occurs neither in natural
    text nor in c").

    >>> from memclaim.train.finetune import new_gpt2
    >>> from memclaim.train.planted import add_reserved_tokens
    >>> from memclaim.train.recipe import load_hf_tokenizer
    >>> from memclaim.train.toy import ensure_toy_model
    >>> tok = load_hf_tokenizer(ensure_toy_model())  # doctest: +SKIP
    >>> model = new_gpt2(vocab_size=len(tok))  # doctest: +SKIP
    >>> add_reserved_tokens(model, tok, 2), model.get_input_embeddings().weight.shape[0]  # doctest: +SKIP
    ([1024, 1025], 1026)
    """
    n = integer("number of reserved tokens", n, minimum=1)
    tok = getattr(tokenizer, "tok", tokenizer)
    names = [f"{stem}{i}|>" for i in range(n)]
    existing = [t for t in names if t in tok.get_vocab()]
    if existing:
        raise InputError(
            f"the tokenizer already has reserved tokens {existing[:3]}",
            hint="use their ids, or another stem",
        )
    tok.add_special_tokens({"additional_special_tokens": names})
    model.resize_token_embeddings(len(tok))
    return [int(tok.convert_tokens_to_ids(t)) for t in names]
