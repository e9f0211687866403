"""Training a causal LM on a list of texts by a recipe: the shadow models' training
([MX] App. F.2; Carlini et al. 2022 §IV), and targets trained exactly like them (tests,
benchmarks). Model set-up (``scratch``: a fresh model from a base folder's config and
tokenizer; ``finetune``: a copy of the base's weights), data packing (documents shuffled,
separated by start-of-text ids, packed into whole blocks) and the one trainer
(:func:`memclaim.train.trainer.train_causal_lm`). :mod:`memclaim.audits.shadows` decides who
trains on what and keeps the membership records.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import DomainError, InputError
from ..jsonutil import ResultMixin
from ..models.loader import check_loading_info
from ..validate import integer, nonneg, positive
from ..validate import seed as check_seed
from .toy import DEFAULT_SPEC as S

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from .trainer import TrainResult

__all__ = [
    "SHADOW_MODES",
    "ShadowRecipe",
    "training_blocks",
    "train_on_texts",
    "save_model_folder",
    "load_hf_tokenizer",
]

SHADOW_MODES = ("scratch", "finetune")


@dataclass(frozen=True)
class ShadowRecipe(ResultMixin):
    """How every shadow is trained. ``base`` is the model folder whose config (scratch) or weights
    (finetune) the shadows start from, identified in ``membership.json`` by ``base_fingerprint``.
    Either ``steps`` or ``epochs`` (over the shadow's packed blocks) sets the length."""

    mode: str
    base: str
    base_fingerprint: str
    steps: int | None = None
    epochs: float | None = 3.0
    batch_size: int = 8
    seq_len: int = 128
    lr: float = 5e-5
    warmup_steps: int = 0
    weight_decay: float = 0.01
    min_lr_ratio: float = 0.1
    grad_clip: float | None = 1.0
    seed: int = 0
    background_sha256: str | None = None
    device: str = "cpu"  # where shadows train ('cpu' or 'cuda:N'): the audited model's first device

    def __post_init__(self):
        if self.mode not in SHADOW_MODES:
            raise DomainError(
                f"unknown shadow mode {self.mode!r}",
                hint="'scratch' (fresh model from the target's config) or 'finetune' (copy of a base)",
            )
        if (self.steps is None) == (self.epochs is None):
            raise DomainError(
                "give exactly one of steps or epochs for the shadow recipe",
                hint=f"got steps={self.steps!r}, epochs={self.epochs!r}",
            )
        if self.steps is not None:
            integer("shadow steps", self.steps, minimum=1)
        else:
            positive("shadow epochs", self.epochs)
        integer("shadow batch size", self.batch_size, minimum=1)
        integer("shadow seq_len", self.seq_len, minimum=2)
        positive("shadow lr", self.lr)
        integer("shadow warmup steps", self.warmup_steps, minimum=0)
        nonneg("shadow weight decay", self.weight_decay)
        check_seed("shadow seed", self.seed)

    @classmethod
    def toy(cls, base, *, base_fingerprint: str, **overrides) -> ShadowRecipe:
        """The tiny GPT's own recipe (:class:`memclaim.train.toy.ToySpec`): from scratch, 300
        steps of batch 16 x 128 tokens, lr 3e-3, 30 warmup steps."""
        kw = dict(
            mode="scratch",
            base=str(base),
            base_fingerprint=base_fingerprint,
            steps=S.steps,
            epochs=None,
            batch_size=S.batch_size,
            seq_len=S.seq_len,
            lr=S.lr,
            warmup_steps=30,
            seed=S.train_seed,
        )
        kw.update(overrides)
        return cls(**kw)

    @classmethod
    def finetune(cls, base, *, base_fingerprint: str, **overrides) -> ShadowRecipe:
        """[MX] App. F.2 fine-tuning: AdamW, lr 5e-5, batch 8, 3 epochs."""
        kw = dict(
            mode="finetune",
            base=str(base),
            base_fingerprint=base_fingerprint,
            steps=None,
            epochs=3.0,
            batch_size=8,
            seq_len=128,
            lr=5e-5,
            warmup_steps=0,
        )
        kw.update(overrides)
        return cls(**kw)

    def identity(self) -> dict:
        """What must match for a saved shadow to be reused (the base path may move). The device
        enters as its class when it is not the CPU (a GPU's numerics train a different shadow from
        the same seeds; which GPU does not matter); CPU shadows keep the identity they had before
        the device was recorded, so saved shadows stay reusable.

        >>> r = ShadowRecipe.finetune("base", base_fingerprint="ab12")
        >>> "device" in r.identity(), ShadowRecipe.finetune("base", base_fingerprint="ab12", device="cuda:1").identity()["device"]
        (False, 'cuda')
        """
        d = asdict(self)
        d.pop("base")
        dev = str(d.pop("device")).split(":")[0]
        if dev != "cpu":
            d["device"] = dev
        return d

    def shadow_seed(self, index: int) -> int:
        return self.seed + 1 + int(index)


def _train_config(recipe: ShadowRecipe, n_blocks: int, seed: int):
    from .trainer import TrainConfig

    steps = (
        recipe.steps
        if recipe.steps is not None
        else max(1, math.ceil(recipe.epochs * n_blocks / recipe.batch_size))
    )
    return TrainConfig(
        steps=steps,
        batch_size=recipe.batch_size,
        seq_len=recipe.seq_len,
        lr=recipe.lr,
        min_lr_ratio=recipe.min_lr_ratio,
        warmup_steps=min(recipe.warmup_steps, max(0, steps - 1)),
        weight_decay=recipe.weight_decay,
        grad_clip=recipe.grad_clip,
        seed=seed,
    )


def load_hf_tokenizer(path: str | Path) -> PreTrainedTokenizerBase:
    """The fast tokenizer of a local model folder (its custom code never runs).

    >>> from memclaim.train.recipe import load_hf_tokenizer
    >>> from memclaim.train.toy import ensure_toy_model
    >>> tok = load_hf_tokenizer(ensure_toy_model())  # doctest: +SKIP
    >>> tok.is_fast, tok.eos_token, len(tok)  # doctest: +SKIP
    (True, '<|endoftext|>', 1024)
    """
    from transformers import AutoTokenizer

    # shadows are memclaim's own GPT-style models: a base folder's custom code is never run here
    return AutoTokenizer.from_pretrained(str(path), local_files_only=True, trust_remote_code=False)


def _separator(tok, sep_ids: Sequence[int] | None) -> list[int]:
    if sep_ids:
        return [int(i) for i in sep_ids]
    for tid in (tok.eos_token_id, tok.bos_token_id):
        if tid is not None:
            return [int(tid)]
    raise InputError(
        "the tokenizer has no start-of-text, eos or bos token to separate training documents",
        hint="pass a start-of-text rule (--sot) that names a token",
    )


def training_blocks(
    texts: Sequence[str],
    *,
    tokenizer: PreTrainedTokenizerBase,
    seq_len: int,
    seed: int,
    background: Sequence[str] = (),
    sep_ids: Sequence[int] | None = None,
) -> torch.Tensor:
    """The packed training blocks [n_blocks, seq_len] of ``background`` + ``texts``: documents
    tokenized once, shuffled under ``seed``, each preceded by the separator, packed by
    :func:`memclaim.train.trainer.pack_documents`, with a filler of separator tokens so the
    stream fills whole blocks (no record falls in a dropped tail).

    >>> from memclaim.train.recipe import load_hf_tokenizer, training_blocks
    >>> from memclaim.train.toy import ensure_toy_model
    >>> tok = load_hf_tokenizer(ensure_toy_model())  # doctest: +SKIP
    >>> training_blocks(["Ba be bi bo.", "Tu ta."], tokenizer=tok, seq_len=16, seed=0).shape  # doctest: +SKIP
    torch.Size([1, 16])
    """
    from .trainer import pack_documents

    sep = _separator(tokenizer, sep_ids)
    docs = [
        tokenizer(t, add_special_tokens=False)["input_ids"] for t in list(background) + list(texts)
    ]
    order = np.random.default_rng([int(seed), 7]).permutation(len(docs))
    docs = [docs[i] for i in order]
    return pack_documents(docs, seq_len=seq_len, sep_ids=sep, fill=True)


def train_on_texts(
    recipe: ShadowRecipe,
    texts: Sequence[str],
    *,
    seed: int,
    background: Sequence[str] = (),
    sep_ids: Sequence[int] | None = None,
    tokenizer: PreTrainedTokenizerBase | None = None,
    label: str = "training a shadow model",
) -> tuple[PreTrainedModel, TrainResult, PreTrainedTokenizerBase]:
    """Train one model by ``recipe`` on ``background`` + ``texts`` (one document each) through
    the one trainer. Returns (model in eval mode, TrainResult, tokenizer). Used for every shadow,
    and by tests and benchmarks to train a *target* by exactly the shadows' recipe.

    >>> from memclaim.train.recipe import ShadowRecipe, train_on_texts
    >>> from memclaim.train.toy import ensure_toy_model
    >>> recipe = ShadowRecipe.toy(ensure_toy_model(), base_fingerprint="toy", steps=2)  # doctest: +SKIP
    >>> model, result, tok = train_on_texts(recipe, ["Ba be bi bo.", "Tu ta."], seed=1)  # doctest: +SKIP
    >>> type(model).__name__, result.steps, model.training  # doctest: +SKIP
    ('GPT2LMHeadModel', 2, False)
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from .trainer import train_causal_lm

    tok = tokenizer if tokenizer is not None else load_hf_tokenizer(recipe.base)
    blocks = training_blocks(
        texts,
        tokenizer=tok,
        seq_len=recipe.seq_len,
        seed=seed,
        background=background,
        sep_ids=sep_ids,
    )  # [n_blocks, seq_len]
    torch.manual_seed(int(seed))
    if recipe.mode == "scratch":
        config = AutoConfig.from_pretrained(
            str(recipe.base), local_files_only=True, trust_remote_code=False
        )
        model = AutoModelForCausalLM.from_config(config)
    else:
        model, info = AutoModelForCausalLM.from_pretrained(
            str(recipe.base),
            local_files_only=True,
            dtype=torch.float32,
            use_safetensors=True,
            trust_remote_code=False,
            output_loading_info=True,
        )
        check_loading_info(info, recipe.base)
    model.to(recipe.device)  # the trainer puts the blocks where the model is
    model.requires_grad_(True)
    cfg = _train_config(recipe, int(blocks.shape[0]), int(seed))
    result = train_causal_lm(model, blocks, cfg, label=label)  # progress: operation `label`
    model.requires_grad_(False)
    return model, result, tok


def save_model_folder(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, out: str | Path
) -> Path:
    """save_pretrained (safetensors) + the tokenizer: a folder memclaim.models.load_model reads.

    >>> from memclaim.train.recipe import save_model_folder, train_on_texts
    >>> model, result, tok = train_on_texts(recipe, ["Ba be bi bo.", "Tu ta."], seed=1)  # doctest: +SKIP
    >>> save_model_folder(model, tok, "shadow-1")  # doctest: +SKIP
    PosixPath('shadow-1')
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out), safe_serialization=True)
    tokenizer.save_pretrained(str(out))
    return out
