"""GCG prompt search (Zou et al. 2023) and the exact evaluation of a prompt, for the adversarial
compression ratio ([EM] App. A.2; Schwarzschild et al. 2024).

The search looks for ``P`` free prompt tokens x that make a target y likely after them: the
sequence is ``start-of-text + x + y`` (no template: the ACR paper's base-model setting) and the
objective is GCG's, the mean per-token cross-entropy of y given x (teacher forced). One step:

1. **gradient** of the loss with respect to the one-hot encoding of x: one forward and one
   backward pass over the sequence; d loss / d onehot[i, v] = <d loss / d e_i, E_v> (E the input
   embedding matrix, times the model's embedding scale where it has one);
2. **candidates**: at each position, the ``top_k`` tokens with the most negative gradient among
   the allowed tokens; ``batch_size`` single-token swaps of the current prompt, positions spread
   evenly over the prompt and tokens drawn uniformly from the position's top-k (GCG's
   ``sample_control``), from a seeded generator;
3. **exact evaluation** of every distinct candidate in one batched forward pass (the body over
   every token, the unembedding only where a target token is predicted, log-softmax in row
   chunks: :func:`memclaim.scoring.engine.batched_rows`); duplicates and the current prompt
   itself are evaluated once (their loss is the same number);
4. **move** to the candidate with the lowest loss (GCG moves even when it is worse than the
   current prompt) and keep the lowest-loss prompt seen.

The search stops when the chosen prompt meets the success criterion (:class:`Criterion`,
confirmed by :meth:`PromptSearchModel.evaluate`, a separate single-sequence pass plus greedy
generation), or when the step budget is spent.

Token filter (``token_filter="ascii"``, GCG's ``get_nonascii_toks``): special tokens (every id
the tokenizer marks special) and tokens whose decoded text is empty or not printable ASCII are
never proposed; ids beyond the tokenizer's vocabulary (padding rows of the embedding) neither.
``"none"`` allows every id below the tokenizer's size (the ACR release samples from the whole
vocabulary). ``retokenize=True`` (GCG's ``filter_cand``, made exact): a candidate is kept only if
its decoded text encodes back to the same ids, so the reported prompt text is the prompt.

On the CPU the search is deterministic under its seed: sampling uses a seeded
``torch.Generator``, distinct candidates are evaluated in a fixed (sorted) order and ties go to
the first.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import torch

from ..errors import DomainError, InputError
from ..jsonutil import ResultMixin
from ..validate import in_open_unit, integer
from .engine import NEAR_TIE_MARGIN, StatSet, _chunk_rows, batched_rows

if TYPE_CHECKING:  # the annotations' names only
    from transformers import PreTrainedTokenizerBase

    from ..models.loader import HFTokenizer

#: GCG's defaults (Zou et al. 2023, llm-attacks: topk=256, batch_size=512)
GCG_TOP_K = 256
GCG_BATCH_SIZE = 512
#: the ACR release's step budget per prompt length (config/miniprompt.yaml: num_steps: 100)
ACR_STEPS = 100
TOKEN_FILTERS = ("ascii", "none")
#: [EM] App. A.2: success when the teacher-forced geometric-mean per-token probability >= b, b = 0.9
DEFAULT_B = 0.9
CRITERIA = ("argmax", "greedy", "prob")
CANDIDATE_STATS = StatSet(frozenset(("token_logprob", "greedy")))
LOGIT_CHUNK_BYTES = 256 << 20  # the engine's default budget for [rows, V] float32 logits


# --------------------------------------------------------------------------- settings
@dataclass(frozen=True)
class GCGSettings(ResultMixin):
    """The GCG search's settings (part of the procedure: every one changes what is found).

    >>> GCGSettings().to_dict()["top_k"], GCGSettings(batch_size=64).batch_size
    (256, 64)
    """

    top_k: int = GCG_TOP_K
    batch_size: int = GCG_BATCH_SIZE
    steps: int = ACR_STEPS
    seed: int = 0
    token_filter: str = "ascii"
    retokenize: bool = True

    def __post_init__(self):
        integer("--top-k", self.top_k, minimum=1)
        integer("--search-batch", self.batch_size, minimum=1)
        integer("--steps", self.steps, minimum=1)
        integer("--seed", self.seed, minimum=0, maximum=2**63 - 1)
        if self.token_filter not in TOKEN_FILTERS:
            raise InputError(
                f"unknown token filter {self.token_filter!r}",
                hint=f"one of {', '.join(TOKEN_FILTERS)}",
            )
        if not isinstance(self.retokenize, bool):
            raise InputError(
                f"retokenize must be True or False, got {self.retokenize!r}",
                hint="retokenize=True keeps only prompts whose text encodes back to them "
                "(--no-retokenize on the CLI is False)",
            )


@dataclass(frozen=True)
class Criterion:
    """A success criterion of the ACR search ([EM] App. A.2), by name:

    * ``argmax``: the released ACR code's check, every target token is the teacher-forced argmax;
    * ``greedy``: the ACR paper's definition, greedy generation (``generate``) from the prompt
      reproduces the target token for token;
    * ``prob:b``: [EM]'s relaxation, the teacher-forced geometric-mean per-token probability is
      at least b (mean log-probability >= ln b, i.e. GCG's loss <= -ln b); ``prob`` is b = 0.9.

    >>> Criterion.parse("prob").spec, Criterion.parse("prob:0.5").loss_threshold
    ('prob:0.9', 0.6931471805599453)
    >>> Criterion.parse("greedy").spec
    'greedy'
    """

    name: str
    b: float | None = None

    @classmethod
    def parse(cls, spec: str | Criterion) -> Criterion:
        if isinstance(spec, Criterion):
            return spec
        if not isinstance(spec, str) or not spec.strip():
            raise InputError(
                f"success criterion must be a name, got {spec!r}",
                hint="one of argmax, greedy, prob, prob:B (e.g. prob:0.9)",
            )
        name, _, arg = spec.strip().lower().partition(":")
        if name not in CRITERIA:
            raise InputError(
                f"unknown success criterion {spec!r}",
                hint="one of argmax, greedy, prob, prob:B (e.g. prob:0.9)",
            )
        if name != "prob":
            if arg:
                raise InputError(
                    f"criterion {name!r} takes no value, got {spec!r}", hint=f"write {name}"
                )
            return cls(name)
        if not arg:
            return cls("prob", DEFAULT_B)
        try:
            b = float(arg)
        except ValueError:
            raise InputError(
                f"criterion {spec!r}: {arg!r} is not a number",
                hint="write prob:B with 0 < B < 1, e.g. prob:0.9",
            ) from None
        try:
            b = in_open_unit("the criterion's b", b)
        except DomainError as exc:
            raise InputError(
                f"criterion {spec!r}: b must lie strictly between 0 and 1",
                hint="write prob:B with 0 < B < 1, e.g. prob:0.9",
            ) from exc
        return cls("prob", b)

    @property
    def spec(self) -> str:
        return f"prob:{self.b:g}" if self.name == "prob" else self.name

    @property
    def loss_threshold(self) -> float | None:
        """-ln b for ``prob:b`` (success iff GCG's mean cross-entropy <= it), else None."""
        return -math.log(self.b) if self.name == "prob" else None

    def holds(self, ev: PromptEvaluation) -> bool:
        """Whether the exact evaluation ``ev`` of a prompt meets the criterion."""
        if self.name == "argmax":
            return ev.argmax_all
        if self.name == "greedy":
            return bool(ev.greedy_reproduces)
        return ev.mean_logprob >= math.log(self.b)  # [EM] App. A.2: geometric mean >= b

    def promising(self, loss: float, argmax_all: bool) -> bool:
        """The search's cheap test on a batched forward's numbers; :meth:`holds` confirms it."""
        if self.name == "prob":
            return loss <= self.loss_threshold
        return bool(argmax_all)  # greedy generation can only reproduce what is the argmax


# --------------------------------------------------------------------------- results
@dataclass(frozen=True)
class PromptEvaluation(ResultMixin):
    """One prompt x evaluated on one target y, exactly.

    Teacher forced (one forward pass over start-of-text + x + y without a cache, as the released
    ACR code checks): per-token full-softmax log-probabilities (float64 from float32 logits), the
    argmax flags and the signed margin (logit of the target token minus the largest other logit,
    the smallest over positions: > 0 iff every target token is the argmax; below
    :data:`~memclaim.scoring.engine.NEAR_TIE_MARGIN` a numeric difference can flip it). Greedy
    generation: ``generate(do_sample=False)`` for |y| new tokens from start-of-text + x, with a
    KV cache, compared with y token for token ([EM] App. A.2)."""

    prompt_ids: tuple[int, ...]
    target_ids: tuple[int, ...]
    token_logprob: tuple[float, ...]
    argmax_flags: tuple[bool, ...]
    argmax_margin: float
    generated_ids: tuple[int, ...] | None = None

    @property
    def log_q(self) -> float:
        """Natural log of q(y | x) under the full softmax, teacher forced."""
        return float(math.fsum(self.token_logprob))

    @property
    def mean_logprob(self) -> float:
        """Mean per-token log-probability: minus GCG's loss; exp of it is the geometric mean."""
        return self.log_q / len(self.target_ids)

    @property
    def geometric_mean_prob(self) -> float:
        return math.exp(self.mean_logprob)

    @property
    def argmax_all(self) -> bool:
        return all(self.argmax_flags)

    @property
    def near_tie(self) -> bool:
        return abs(self.argmax_margin) < NEAR_TIE_MARGIN

    @property
    def greedy_reproduces(self) -> bool | None:
        if self.generated_ids is None:
            return None
        return tuple(self.generated_ids[: len(self.target_ids)]) == tuple(self.target_ids)

    @property
    def greedy_divergence(self) -> int | None:
        """The first target position greedy generation gets wrong (None when it reproduces y)."""
        if self.generated_ids is None or self.greedy_reproduces:
            return None
        for i, t in enumerate(self.target_ids):
            if i >= len(self.generated_ids) or self.generated_ids[i] != t:
                return i
        return len(self.target_ids)

    def to_dict(self) -> dict:
        d = super().to_dict()
        d.update(
            log_q=self.log_q,
            mean_logprob=self.mean_logprob,
            geometric_mean_prob=self.geometric_mean_prob,
            argmax_all=self.argmax_all,
            near_tie=self.near_tie,
            greedy_reproduces=self.greedy_reproduces,
            greedy_divergence=self.greedy_divergence,
        )
        return d

    @classmethod
    def from_dict(cls, d: dict) -> PromptEvaluation:
        gen = d.get("generated_ids")
        return cls(
            tuple(int(x) for x in d["prompt_ids"]),
            tuple(int(x) for x in d["target_ids"]),
            tuple(float(x) for x in d["token_logprob"]),
            tuple(bool(x) for x in d["argmax_flags"]),
            float(d["argmax_margin"]),
            None if gen is None else tuple(int(x) for x in gen),
        )


@dataclass(frozen=True)
class GCGOutcome(ResultMixin):
    """One GCG search at one prompt length: the prompt returned (the one that met the criterion,
    else the lowest-loss one seen), its exact evaluation, and how the search went."""

    prompt_ids: tuple[int, ...]
    init_ids: tuple[int, ...]
    success: bool
    stopped: str  # "criterion" (met and confirmed) or "budget" (steps spent)
    steps_budget: int
    steps_run: int
    evaluation: PromptEvaluation
    trajectory: tuple[
        float, ...
    ] = ()  # the loss of the prompt moved to at each step (batched pass)
    candidates_evaluated: int = 0  # distinct candidates scored over all steps
    extra: dict = field(default_factory=dict)

    @property
    def loss(self) -> float:
        """GCG's objective at the returned prompt: the mean cross-entropy (exact evaluation)."""
        return -self.evaluation.mean_logprob

    def to_dict(self) -> dict:
        d = super().to_dict()
        d["evaluation"] = self.evaluation.to_dict()
        d["loss"] = self.loss
        return d

    @classmethod
    def from_dict(cls, d: dict) -> GCGOutcome:
        return cls(
            tuple(int(x) for x in d["prompt_ids"]),
            tuple(int(x) for x in d["init_ids"]),
            bool(d["success"]),
            str(d["stopped"]),
            int(d["steps_budget"]),
            int(d["steps_run"]),
            PromptEvaluation.from_dict(d["evaluation"]),
            tuple(float(x) for x in d.get("trajectory", ())),
            int(d.get("candidates_evaluated", 0)),
            dict(d.get("extra") or {}),
        )


# --------------------------------------------------------------------------- the model side
def allowed_token_mask(
    tokenizer: HFTokenizer | PreTrainedTokenizerBase,
    vocab_size: int,
    *,
    token_filter: str = "ascii",
) -> np.ndarray:
    """[vocab_size] bool: the token ids GCG may propose (see the module docstring).

    ``tokenizer``: a :class:`memclaim.models.loader.HFTokenizer` (or a transformers fast tokenizer).

    >>> import memclaim.train  # registers the tiny GPT "toy"
    >>> from memclaim.models import load_model
    >>> m = load_model("toy")  # doctest: +SKIP
    >>> mask = allowed_token_mask(m.tokenizer, 1024)  # doctest: +SKIP
    >>> bool(mask[0]), int(mask.sum()) < 1024  # <|endoftext|> is special  # doctest: +SKIP
    (False, True)
    """
    if token_filter not in TOKEN_FILTERS:
        raise InputError(
            f"unknown token filter {token_filter!r}", hint=f"one of {', '.join(TOKEN_FILTERS)}"
        )
    tok = getattr(tokenizer, "tok", tokenizer)
    n = min(int(vocab_size), len(tok))
    mask = np.zeros(int(vocab_size), dtype=bool)
    mask[:n] = True
    if token_filter == "none":
        return mask
    special = {int(i) for i in getattr(tok, "all_special_ids", [])}
    special |= {
        int(i)
        for i, t in getattr(tok, "added_tokens_decoder", {}).items()
        if getattr(t, "special", False)
    }
    texts = tok.batch_decode(
        [[i] for i in range(n)], skip_special_tokens=False, clean_up_tokenization_spaces=False
    )
    for i, s in enumerate(texts):
        # GCG's get_nonascii_toks: printable ASCII only (s.isascii() and s.isprintable())
        if i in special or not s or not (s.isascii() and s.isprintable()):
            mask[i] = False
    return mask


class PromptSearchModel:
    """A loaded transformers causal LM (:class:`memclaim.models.hf.HFLanguageModel`) with what the
    GCG search needs: the input embedding (for the one-hot gradient), the body and unembedding
    (for batched candidate losses), ``generate`` (greedy check) and the tokenizer (token filter,
    round trips). ``lm`` is ``LoadedModel.lm``; ``tokenizer`` its ``HFTokenizer``.

    >>> import memclaim.train
    >>> from memclaim.models import load_model
    >>> m = load_model("toy")  # doctest: +SKIP
    >>> psm = PromptSearchModel(m.lm, m.tokenizer)  # doctest: +SKIP
    >>> psm.vocab_size  # doctest: +SKIP
    1024
    """

    def __init__(
        self,
        lm,
        tokenizer,
        *,
        token_filter: str = "ascii",
        logit_chunk_bytes: int = LOGIT_CHUNK_BYTES,
    ):
        model = getattr(lm, "model", None)
        if (
            model is None
            or not hasattr(lm, "differentiable_logits")
            or not hasattr(model, "get_input_embeddings")
        ):
            raise InputError(
                f"the GCG prompt search needs a transformers causal LM, got {type(lm).__name__}",
                hint="load the model with memclaim.load_model (a HF folder, a .gguf file or a named model)",
            )
        self.lm = lm
        self.model = model
        self.tokenizer = tokenizer
        self.tok = getattr(tokenizer, "tok", tokenizer)
        self.emb = model.get_input_embeddings()
        self.W = self.emb.weight.detach()  # [V, D]
        scale = getattr(self.emb, "embed_scale", None)  # Gemma-style scaled embeddings
        self.scale = 1.0 if scale is None else float(scale)
        self.vocab_size = int(self.W.shape[0])
        self.device = self.W.device
        self.token_filter = token_filter
        self.allowed = torch.from_numpy(
            allowed_token_mask(tokenizer, self.vocab_size, token_filter=token_filter)
        )
        if not bool(self.allowed.any()):
            raise InputError(
                "the token filter leaves no token the search may propose",
                hint="use token_filter='none' for this tokenizer",
            )
        self.allowed_ids = self.allowed.nonzero().view(-1)  # [A] CPU
        self.rows = _chunk_rows(int(lm.vocab_size), int(logit_chunk_bytes))
        self.forward_tokens = (
            0  # body tokens run in candidate passes (benchmarks count FLOPs from it)
        )

    # -------------------------------------------------------------- tokens
    def round_trips(self, rows: torch.Tensor) -> torch.Tensor:
        """[B] bool: row b's decoded text encodes back to exactly the same ids."""
        ids = rows.tolist()
        texts = self.tok.batch_decode(
            ids, skip_special_tokens=False, clean_up_tokenization_spaces=False
        )
        enc = self.tok(texts, add_special_tokens=False)["input_ids"]
        return torch.tensor([list(a) == list(b) for a, b in zip(enc, ids)], dtype=torch.bool)

    def random_prompt(
        self, n: int, generator: torch.Generator, *, retokenize: bool, tries: int = 200
    ) -> list[int]:
        """``n`` allowed tokens drawn uniformly (the ACR release starts from random tokens), redrawn
        up to ``tries`` times until the text round-trips when ``retokenize``."""
        for _ in range(tries):
            pick = torch.randint(0, self.allowed_ids.numel(), (n,), generator=generator)
            ids = self.allowed_ids[pick].view(1, n)
            if not retokenize or bool(self.round_trips(ids)[0]):
                return ids.view(-1).tolist()
        return ids.view(-1).tolist()  # the search moves to round-tripping candidates at once

    def check_embedding(self, ids: Sequence[int]) -> None:
        """Refuse a model whose input embedding is not a (scaled) row lookup of its weight: the
        one-hot gradient below would be wrong for it."""
        t = torch.tensor([list(ids)], dtype=torch.long, device=self.device)
        with torch.inference_mode():
            a = self.emb(t)[0].float()
            b = (self.W[t[0]] * self.scale).float()
        if not torch.allclose(a, b, rtol=1e-3, atol=1e-5):
            raise InputError(
                f"the input embedding of {self.lm.name!r} ({type(self.emb).__name__}) is not a row lookup "
                "of its weight matrix, so the one-hot gradient of GCG does not apply to it",
                hint="use a model whose input embedding is an nn.Embedding (optionally scaled)",
            )

    # -------------------------------------------------------------- gradient
    def loss_and_grad(
        self, prefix: Sequence[int], prompt: Sequence[int], target: Sequence[int]
    ) -> tuple[float, bool, torch.Tensor]:
        """(loss, argmax at every target position, grad [P, V] on the CPU, float32 or float64 as the
        model): GCG's mean
        cross-entropy of ``target`` after ``prefix + prompt`` and its gradient with respect to the
        one-hot encoding of ``prompt``, from one forward and one backward pass."""
        S, P, T = len(prefix), len(prompt), len(target)
        ids = torch.tensor(
            [list(prefix) + list(prompt) + list(target[:-1])], dtype=torch.long, device=self.device
        )
        tgt = torch.tensor(list(target), dtype=torch.long, device=self.device)
        with torch.inference_mode(False), torch.enable_grad():
            e = (
                (self.W[ids[0]] * self.scale).unsqueeze(0).detach().requires_grad_(True)
            )  # [1, L, D]
            hidden = self.lm.body(inputs_embeds=e, use_cache=False).last_hidden_state  # [1, L, D]
            h = hidden[
                0, S + P - 1 : S + P - 1 + T
            ]  # [T, D]: position S+P-1+j predicts target token j
            if h.device != self.lm._w.device:
                h = h.to(self.lm._w.device)
            z = self.lm.differentiable_logits(h)  # [T, V] float32 (float64 for a float64 model)
            loss = torch.nn.functional.cross_entropy(
                z, tgt.to(z.device)
            )  # mean over the target (GCG's loss)
            (de,) = torch.autograd.grad(loss, e)
        argmax_all = bool((z.detach().argmax(-1) == tgt.to(z.device)).all())
        # d loss / d onehot[i, v] = <d loss / d e_i, scale * E_v>
        gd = torch.float64 if self.W.dtype == torch.float64 else torch.float32
        g = (de[0, S : S + P].to(gd) @ self.W.to(gd).T) * self.scale  # [P, V]
        return float(loss.detach()), argmax_all, g.cpu()

    # -------------------------------------------------------------- candidates
    @torch.inference_mode()
    def candidate_scores(
        self, prefix: Sequence[int], cands: torch.Tensor, target: Sequence[int]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Teacher-forced scores of every candidate prompt in one batched forward pass: (token
        log-probs [B, T] float32, argmax at every target position [B] bool), on the CPU.

        ``cands``: [B, P] token ids. The body runs over prefix + candidate + target[:-1] for all
        B rows at once; the unembedding only over the B*T rows that predict a target token, in
        chunks of at most 256 MiB of float32 logits (never a [B, L, V] tensor)."""
        B, P = cands.shape
        S, T = len(prefix), len(target)
        dev = self.device
        pre = torch.tensor(list(prefix), dtype=torch.long).view(1, S).expand(B, S)
        tail = torch.tensor(list(target[:-1]), dtype=torch.long).view(1, T - 1).expand(B, T - 1)
        ids = torch.cat([pre, cands.cpu(), tail], dim=1).to(dev)  # [B, L]
        hidden, _ = self.lm.forward_hidden(ids)  # [B, L, D]
        self.forward_tokens += int(ids.numel())
        h = hidden[:, S + P - 1 : S + P - 1 + T, :].reshape(B * T, -1)  # [B*T, D]
        tgt = torch.tensor(list(target), dtype=torch.long, device=h.device).repeat(B)  # [B*T]
        lp = torch.empty(B * T, dtype=torch.float32, device=h.device)
        ok = torch.empty(B * T, dtype=torch.bool, device=h.device)
        for a in range(0, B * T, self.rows):
            b = min(B * T, a + self.rows)
            res = batched_rows(self.lm.logits(h[a:b]), tgt[a:b], (), CANDIDATE_STATS)
            lp[a:b] = res["token_lp"]
            ok[a:b] = res["greedy"]
        return lp.view(B, T).cpu(), ok.view(B, T).all(dim=1).cpu()

    # -------------------------------------------------------------- exact evaluation
    @torch.inference_mode()
    def evaluate(
        self,
        prefix: Sequence[int],
        prompt: Sequence[int],
        target: Sequence[int],
        *,
        generate: bool = True,
    ) -> PromptEvaluation:
        """The exact evaluation of one prompt (:class:`PromptEvaluation`): one teacher-forced pass
        and, with ``generate``, greedy generation of |y| tokens."""
        S, P, T = len(prefix), len(prompt), len(target)
        ids = torch.tensor(
            [list(prefix) + list(prompt) + list(target[:-1])], dtype=torch.long, device=self.device
        )
        hidden, _ = self.lm.forward_hidden(ids)
        z = self.lm.logits(
            hidden[0, S + P - 1 : S + P - 1 + T]
        ).double()  # [T, V] float64 from float32 logits
        tgt = torch.tensor(list(target), dtype=torch.long, device=z.device)
        lp = torch.log_softmax(z, dim=-1).gather(1, tgt.view(-1, 1)).view(-1)
        zt = z.gather(1, tgt.view(-1, 1)).view(-1)
        others = z.scatter(1, tgt.view(-1, 1), -math.inf)
        margin = float((zt - others.max(dim=-1).values).min()) if z.shape[1] > 1 else math.inf
        flags = (
            z.argmax(dim=-1) == tgt
        ).tolist()  # torch.argmax: the first maximal index, as generate
        gen = self.generate(list(prefix) + list(prompt), T) if generate else None
        return PromptEvaluation(
            tuple(int(x) for x in prompt),
            tuple(int(x) for x in target),
            tuple(float(x) for x in lp.tolist()),
            tuple(bool(x) for x in flags),
            margin,
            None if gen is None else tuple(gen),
        )

    @torch.inference_mode()
    def generate(self, context: Sequence[int], n: int) -> list[int]:
        """``n`` tokens of greedy decoding from ``context`` by transformers' ``generate`` (KV cache;
        a fresh GenerationConfig: no sampling, no repetition penalty, no stop at end-of-text)."""
        from transformers import GenerationConfig

        pad = self.tok.pad_token_id if self.tok.pad_token_id is not None else self.tok.eos_token_id
        cfg = GenerationConfig(
            do_sample=False,
            num_beams=1,
            max_new_tokens=int(n),
            min_new_tokens=0,
            eos_token_id=None,
            pad_token_id=0 if pad is None else int(pad),
        )
        ids = torch.tensor([list(context)], dtype=torch.long, device=self.device)
        out = self.model.generate(
            input_ids=ids, attention_mask=torch.ones_like(ids), generation_config=cfg
        )
        return [int(x) for x in out[0, len(context) :].tolist()]


# --------------------------------------------------------------------------- the search
def sample_candidates(
    prompt: torch.Tensor,
    grad: torch.Tensor,
    allowed: torch.Tensor,
    *,
    top_k: int,
    batch_size: int,
    generator: torch.Generator,
) -> torch.Tensor:
    """GCG's candidate batch ([batch_size, P] ids): the ``top_k`` allowed tokens of most negative
    gradient at each position; candidate i swaps position floor(i P / batch) (positions spread
    evenly, GCG's ``sample_control``) to a token drawn uniformly from that position's top-k.

    >>> g = torch.tensor([[0.0, -3.0, -1.0, 5.0], [-2.0, 0.0, 1.0, -4.0]])
    >>> c = sample_candidates(torch.tensor([0, 1]), g, torch.tensor([True, True, True, False]), top_k=1,
    ...                       batch_size=4, generator=torch.Generator().manual_seed(0))
    >>> c.tolist()  # position 0 -> token 1 (grad -3), position 1 -> token 0 (token 3 is not allowed)
    [[1, 1], [1, 1], [0, 0], [0, 0]]
    """
    P, V = grad.shape
    k = min(int(top_k), int(allowed.sum()))
    g = grad.masked_fill(~allowed.view(1, V), math.inf)  # never propose a filtered token
    top = torch.topk(-g, k, dim=1).indices  # [P, k]
    pos = (torch.arange(batch_size) * P) // batch_size  # [B] evenly spread positions
    pick = torch.randint(0, k, (batch_size,), generator=generator)  # [B]
    cands = prompt.view(1, P).repeat(batch_size, 1)  # [B, P]
    cands[torch.arange(batch_size), pos] = top[pos, pick]
    return cands


def gcg_search(
    psm: PromptSearchModel,
    *,
    prefix_ids: Sequence[int],
    target_ids: Sequence[int],
    prompt_len: int,
    settings: GCGSettings,
    criterion: Criterion | str,
    seed: int,
    steps: int | None = None,
    init_ids: Sequence[int] | None = None,
    on_step: Callable[[int, float], None] | None = None,
) -> GCGOutcome:
    """GCG (Zou et al. 2023) for a ``prompt_len``-token prompt eliciting ``target_ids`` after
    ``prefix_ids`` (start-of-text), under ``settings`` for at most ``steps`` steps (default
    ``settings.steps``), stopping when ``criterion`` holds (see the module docstring).
    ``seed`` seeds the candidate sampling and the random start (unless ``init_ids``).
    ``on_step(step, loss)`` is called after every step.

    >>> import memclaim.train
    >>> from memclaim.models import load_model
    >>> m = load_model("toy")  # doctest: +SKIP
    >>> out = gcg_search(PromptSearchModel(m.lm, m.tokenizer), prefix_ids=[0], target_ids=[300, 301, 302],
    ...                  prompt_len=2, settings=GCGSettings(steps=5), criterion="argmax", seed=0)  # doctest: +SKIP
    >>> out.steps_run <= 5, len(out.prompt_ids)  # doctest: +SKIP
    (True, 2)
    """
    crit = Criterion.parse(criterion)
    n = integer("prompt length", prompt_len, minimum=1)
    budget = int(settings.steps if steps is None else integer("steps", steps, minimum=1))
    target = [int(t) for t in target_ids]
    prefix = [int(t) for t in prefix_ids]
    if len(target) < 1:
        raise InputError("the target has no tokens", hint="give a non-empty target text")
    gen = torch.Generator().manual_seed(int(seed) % (2**63))
    if init_ids is None:
        current = psm.random_prompt(n, gen, retokenize=settings.retokenize)
    else:
        current = [int(t) for t in init_ids]
        if len(current) != n:
            raise InputError(f"init_ids has {len(current)} tokens, not {n}")
    init = tuple(current)
    psm.check_embedding(current)
    best, best_loss = list(current), math.inf
    trajectory: list[float] = []
    evaluated = 0
    done_ev: PromptEvaluation | None = None
    steps_run = 0

    def confirm(prompt) -> PromptEvaluation | None:
        ev = psm.evaluate(
            prefix, prompt, target
        )  # teacher forced and generated: every criterion is reported
        return ev if crit.holds(ev) else None

    for step in range(budget):
        loss, argmax_all, grad = psm.loss_and_grad(prefix, current, target)
        if loss < best_loss:
            best, best_loss = list(current), loss
        if step == 0 and crit.promising(loss, argmax_all):  # the start already meets the criterion
            done_ev = confirm(current)
            if done_ev is not None:
                best = list(current)
                break
        cur = torch.tensor(current, dtype=torch.long)
        cands = sample_candidates(
            cur,
            grad,
            psm.allowed,
            top_k=settings.top_k,
            batch_size=settings.batch_size,
            generator=gen,
        )
        uniq = torch.unique(cands, dim=0)  # sorted rows: a fixed evaluation order
        uniq = uniq[(uniq != cur.view(1, -1)).any(dim=1)]  # the current prompt's loss is known
        if settings.retokenize and uniq.shape[0]:
            uniq = uniq[psm.round_trips(uniq)]
        steps_run = step + 1
        if uniq.shape[0] == 0:  # nothing new to try (every swap was filtered): stay
            trajectory.append(loss)
            if on_step is not None:
                on_step(step, loss)
            continue
        lp, ok = psm.candidate_scores(prefix, uniq, target)
        evaluated += int(uniq.shape[0])
        losses = -lp.double().mean(dim=1)  # [U] GCG's loss per candidate
        j = int(torch.argmin(losses))  # ties: the first (the sorted order)
        current = uniq[j].tolist()
        cl = float(losses[j])
        trajectory.append(cl)
        if cl < best_loss:
            best, best_loss = list(current), cl
        if on_step is not None:
            on_step(step, cl)
        if crit.promising(cl, bool(ok[j])):
            done_ev = confirm(current)
            if done_ev is not None:
                best = list(current)
                break
    if done_ev is not None:
        return GCGOutcome(
            tuple(best),
            init,
            True,
            "criterion",
            budget,
            steps_run,
            done_ev,
            tuple(trajectory),
            evaluated,
        )
    ev = psm.evaluate(prefix, best, target)
    return GCGOutcome(
        tuple(best),
        init,
        crit.holds(ev),
        "budget",
        budget,
        steps_run,
        ev,
        tuple(trajectory),
        evaluated,
    )
