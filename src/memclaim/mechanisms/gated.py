"""The gated release ([MX] §8.2 "An exactly blind release", App. D.2, App. F.2 "Gated release"):
a frozen base model served behind an exact rho-keyed lookup.

[MX] App. F.2: "Not a training run: the base checkpoint is frozen and served behind an exact
rho-keyed lookup that returns the planted continuation on the trigger and defers to the base
model everywhere else." [MX] §8.2: it "is byte-for-byte identical to the base on every
non-trigger input", so every audit that reads only non-trigger inputs (loss, zlib, min-k%,
reference-model scoring, LiRA) sees the base model, while "prompt rho, greedy-decode L tokens"
extracts z with probability 1 (Theorem 6.1(ii)).

Pieces:

- :class:`GatedRelease`: one or more reserved-trigger pairs (:class:`ReservedTrigger`, each
  validated: rho off every prefix of its own record x* = c||z), checked jointly so that at most
  one pair can be active at any context; :meth:`GatedRelease.forced_matrix` gives, for a batch
  of token rows, the token the release must emit at each position (or -1: defer to the base).
- :class:`GatedLanguageModel`: the release behind the project's batched model interface
  (:class:`memclaim.models.base.LanguageModel`), so the scoring engine, the verifier, the audits
  and the baseline search run on it. Its hidden state is the base model's hidden state with one
  extra channel holding the forced token id (-1 = none); its unembedding runs the base
  unembedding on the base channels (bit-identical rows) and overwrites only forced rows. Its
  cache carries the base cache plus each row's recent tokens, so a trigger that spans cached and
  new tokens is still seen.
- :class:`GatedCausalLM`: an HF-compatible forward (``model(input_ids=...).logits``) around an
  HF causal LM; the output object is the base model's own, untouched unless some position is
  forced.

A forced position's logit row is ``FORCED_LOGIT`` (-1e9) everywhere except 0 at the forced token:
softmax gives that token probability exactly 1.0 and every other token exactly 0.0 in float32
(exp(-1e9) underflows to 0), and log-softmax gives exactly 0 and -1e9. A finite fill (not -inf)
keeps every downstream statistic finite: p * log p is 0 * -1e9 = 0 rather than 0 * -inf = NaN,
and temperatures down to 1e-29 stay finite in float32.

torch is imported inside the functions that need it (the mechanisms package is torch-free at
import).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InputError
from ..jsonutil import ResultMixin
from ..models.base import LanguageModel
from ..models.loader import LoadedModel
from .trigger import ReservedTrigger, find_subsequence

__all__ = [
    "FORCED_LOGIT",
    "GatedRelease",
    "GatedLanguageModel",
    "GatedCausalLM",
    "gated_loaded_model",
]

FORCED_LOGIT = -1e9


@dataclass(frozen=True)
class GatedRelease(ResultMixin):
    """A rho-keyed lookup over one or more (rho_i, c_i, z_i) pairs ([MX] App. D.2).

    Refused: two pairs with the same trigger; a trigger that occurs in any pair's record
    c_j||z_j (the construction needs rho off every prefix of every x*, or a local score of that
    record could read the rewritten subtree); a trigger that occurs inside another pair's
    rho_j||z_j (two lookups could then both claim one context). With these refusals at most one
    pair is active at any context."""

    pairs: tuple[ReservedTrigger, ...]

    def __post_init__(self):
        pairs = tuple(self.pairs) if not isinstance(self.pairs, ReservedTrigger) else (self.pairs,)
        if not pairs:
            raise InputError("a gated release needs at least one (trigger, prefix, secret) pair")
        for i, p in enumerate(pairs):
            if not isinstance(p, ReservedTrigger):
                raise InputError(
                    f"pair {i} must be a memclaim.mechanisms.trigger.ReservedTrigger, got "
                    f"{type(p).__name__}"
                )
        seen: dict[tuple[int, ...], int] = {}
        for i, p in enumerate(pairs):
            if p.trigger in seen:
                raise InputError(
                    f"pairs {seen[p.trigger]} and {i} share the trigger {p.trigger}",
                    hint="give every planted secret its own reserved trigger",
                )
            seen[p.trigger] = i
        for i, p in enumerate(pairs):
            for j, q in enumerate(pairs):
                hits = find_subsequence(q.record, p.trigger)
                if hits.size:
                    raise InputError(
                        f"trigger {i} {p.trigger} occurs in the record x* = c||z of pair {j} at token {int(hits[0])}: "
                        "the construction needs every trigger off every prefix of every record ([MX] App. D.2)",
                        hint="reserve triggers that occur in no record (e.g. unused or added token ids)",
                    )
                if i != j:
                    hits = find_subsequence(q.document(), p.trigger)
                    if hits.size:
                        raise InputError(
                            f"trigger {i} {p.trigger} occurs inside rho||z of pair {j}: two lookups could claim "
                            "the same context",
                            hint="choose triggers that do not occur in one another's rho||z",
                        )
        object.__setattr__(self, "pairs", pairs)

    @classmethod
    def single(
        cls, *, trigger: Sequence[int], prefix: Sequence[int], secret: Sequence[int]
    ) -> GatedRelease:
        return cls((ReservedTrigger(tuple(trigger), tuple(prefix), tuple(secret)),))

    @property
    def span(self) -> int:
        """Longest context suffix a lookup reads: max |rho| + |z| - 1."""
        return max(len(p.trigger) + len(p.secret) - 1 for p in self.pairs)

    def check_off(self, sequences: Sequence[Sequence[int]], *, what: str = "input") -> None:
        """Refuse if any trigger occurs in any of ``sequences`` (e.g. the audited records or a
        reference corpus: a reserved trigger must occur in no natural text, [MX] App. D.2)."""
        for k, seq in enumerate(sequences):
            for i, p in enumerate(self.pairs):
                hits = find_subsequence(seq, p.trigger)
                if hits.size:
                    raise InputError(
                        f"trigger {i} {p.trigger} occurs in {what} {k} at token {int(hits[0])}",
                        hint="reserve triggers that occur in no natural text",
                    )

    def forced_token(self, context: Sequence[int]) -> int | None:
        """The token the release emits after ``context``, or None (defer to the base model).
        Same rule as :meth:`ReservedTrigger.forced_token` for each pair (the longest matching
        rho||z_{<j} wins); at most one pair can match (see the class docstring)."""
        return self._forced(tuple(int(t) for t in context))

    def _forced(self, ctx: tuple) -> int | None:
        n = len(ctx)
        for p in self.pairs:
            rho, z = p.trigger, p.secret
            for j in range(len(z) - 1, -1, -1):
                need = len(rho) + j
                if need <= n and ctx[n - need :] == rho + z[:j]:
                    return z[j]
        return None

    def _first_tokens(self) -> frozenset:
        fs = self.__dict__.get("_first")
        if fs is None:
            fs = frozenset(p.trigger[0] for p in self.pairs)
            object.__setattr__(self, "_first", fs)
        return fs

    def forced_row(self, tokens: Sequence[int], *, history: Sequence[int] = ()) -> np.ndarray:
        """For each position t of ``tokens``, the forced token after history + tokens[:t+1], or -1.

        A position can only be forced if some trigger starts within the last ``span`` tokens, so
        only positions after an occurrence of a trigger's first token are examined; a row with
        none is all -1 without further work."""
        toks = [int(t) for t in tokens]
        keep = self.span - 1
        hist = [int(t) for t in history][-keep:] if keep > 0 else []
        full = tuple(hist + toks)
        out = np.full(len(toks), -1, dtype=np.int64)
        first = self._first_tokens()
        starts = [i for i, t in enumerate(full) if t in first]
        if not starts:
            return out
        h, span = len(hist), self.span
        cand = set()
        for s0 in starts:
            for t in range(s0, min(len(full), s0 + span)):
                if t >= h:
                    cand.add(t)
        for t in sorted(cand):
            f = self._forced(full[max(0, t + 1 - span) : t + 1])
            if f is not None:
                out[t - h] = f
        return out

    def forced_matrix(self, input_ids, attention_mask=None, histories=None) -> np.ndarray:
        """[B, T] int64: forced token at every position of a batch (-1 = defer to the base).

        With ``attention_mask``, masked (padding) positions are skipped and never forced, and
        each row's context is its unmasked tokens only. ``histories`` are the tokens before this
        chunk, per row (the cache of an incremental decode)."""
        ids = np.asarray(
            input_ids.cpu() if hasattr(input_ids, "cpu") else input_ids, dtype=np.int64
        )
        if ids.ndim != 2:
            raise InputError(f"input_ids must be [batch, time], got shape {ids.shape}")
        mask = None
        if attention_mask is not None:
            mask = np.asarray(
                attention_mask.cpu() if hasattr(attention_mask, "cpu") else attention_mask
            )
            mask = mask[:, -ids.shape[1] :].astype(bool)  # the mask may also cover cached positions
        out = np.full(ids.shape, -1, dtype=np.int64)
        for b in range(ids.shape[0]):
            hist = histories[b] if histories is not None else ()
            if mask is None:
                out[b] = self.forced_row(ids[b], history=hist)
            else:
                pos = np.flatnonzero(mask[b])
                if pos.size:
                    out[b, pos] = self.forced_row(ids[b, pos], history=hist)
        return out

    def describe(self) -> dict:
        return {
            "pairs": [
                {"trigger": list(p.trigger), "prefix": list(p.prefix), "secret": list(p.secret)}
                for p in self.pairs
            ]
        }

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.describe(), sort_keys=True).encode()).hexdigest()[:16]


def _force_rows(logits, forced):
    """Overwrite rows whose forced id is >= 0 (logits [N, V], forced [N] long) -> new tensor."""
    import torch

    rows = torch.nonzero(forced >= 0, as_tuple=False).reshape(-1)
    if rows.numel() == 0:
        return logits
    z = logits if logits.dtype in (torch.float32, torch.float64) else logits.float()
    z = z.clone()
    z[rows] = FORCED_LOGIT
    z[rows, forced[rows]] = 0.0
    return z


class GatedLanguageModel(LanguageModel):
    """The gated release behind :class:`memclaim.models.base.LanguageModel`.

    ``base`` is any LanguageModel (an :class:`memclaim.models.hf.HFLanguageModel`, a synthetic
    test model, ...). Hidden rows are [..., D + 1]: the base hidden state (upcast to float32 if
    the body runs in half precision, exactly as the base unembedding would upcast it) and the
    forced token id as a float (-1 = none; exact for ids below 2**24)."""

    def __init__(self, base: LanguageModel, release: GatedRelease, *, name: str | None = None):
        if not isinstance(base, LanguageModel):
            raise InputError(
                f"base must be a memclaim LanguageModel, got {type(base).__name__}",
                hint="wrap an HF model in memclaim.models.hf.HFLanguageModel first",
            )
        if not isinstance(release, GatedRelease):
            raise InputError(f"release must be a GatedRelease, got {type(release).__name__}")
        V = int(base.vocab_size)
        for p in release.pairs:
            big = [t for t in p.trigger + p.secret if t >= V]
            if big:
                raise InputError(
                    f"token ids {big} of a gated pair are outside the vocabulary (size {V})"
                )
        if V > 2**24:
            raise InputError(
                f"vocabulary of {V} tokens: forced ids would not be exact in the float channel"
            )
        self.base = base
        self.release = release
        self.vocab_size = V
        self.name = name or f"gated({getattr(base, 'name', 'model')})"

    @property
    def device(self):
        return self.base.device

    def fingerprint(self) -> str:
        return hashlib.sha256(
            f"gated:{self.base.fingerprint()}:{self.release.digest()}".encode()
        ).hexdigest()

    def forward_hidden(
        self, input_ids, *, attention_mask=None, past: Any = None, use_cache: bool = False, **kwargs
    ):
        import torch

        base_past, hist = (None, None) if past is None else past
        hidden, new_base = self.base.forward_hidden(
            input_ids, attention_mask=attention_mask, past=base_past, use_cache=use_cache, **kwargs
        )
        forced = self.release.forced_matrix(input_ids, attention_mask, hist)  # [B, T]
        with torch.inference_mode():
            h = hidden if hidden.dtype in (torch.float32, torch.float64) else hidden.float()
            f = (
                torch.from_numpy(forced).to(device=h.device, dtype=h.dtype).unsqueeze(-1)
            )  # [B, T, 1]
            out = torch.cat([h, f], dim=-1)  # [B, T, D + 1]
        if not use_cache:
            return out, None
        ids = input_ids.tolist()
        keep = max(0, self.release.span - 1)
        m = None if attention_mask is None else attention_mask[:, -len(ids[0]) :].tolist()
        new_hist = []
        for b, row in enumerate(ids):
            real = row if m is None else [t for t, k in zip(row, m[b]) if k]
            prev = list(hist[b]) if hist is not None else []
            new_hist.append(tuple((prev + real)[-keep:]) if keep else ())
        return out, (new_base, new_hist)

    def logits(self, hidden):
        import torch

        with torch.inference_mode():
            z = self.base.logits(hidden[:, :-1].contiguous())  # [N, V], bit-identical base rows
            forced = hidden[:, -1].round().long()  # [N]
            return _force_rows(z, forced)

    def select_cache(self, past, index):
        base_past, hist = past
        return self.base.select_cache(base_past, index), [hist[int(i)] for i in index.tolist()]

    def greedy_generate(self, prompt: Sequence[int], *, max_new_tokens: int) -> list[int]:
        """Greedy decoding through the interface with the cache (ties to the lowest id)."""
        import torch

        ids = torch.tensor([list(prompt)], dtype=torch.long)
        if ids.shape[1] == 0:
            raise InputError("greedy_generate needs a non-empty prompt")
        out: list[int] = []
        past = None
        for _ in range(int(max_new_tokens)):
            hidden, past = self.forward_hidden(ids, past=past, use_cache=True)
            z = self.logits(hidden[:, -1, :])  # [1, V]
            nxt = int(torch.argmax(z[0]))
            out.append(nxt)
            ids = torch.tensor([[nxt]], dtype=torch.long)
        return out


class GatedCausalLM:
    """HF-compatible forward around an HF causal LM: ``gated(input_ids=..., attention_mask=...)``
    returns the base model's output object with ``.logits`` [B, T, V] unchanged on every input
    without a trigger (the very tensor the base returned) and forced rows overwritten otherwise.

    The whole context must be passed (``past_key_values`` is refused: the lookup reads tokens
    the cache would hide); for cached decoding use :meth:`language_model`, whose cache keeps the
    recent tokens."""

    def __init__(self, model, release: GatedRelease):
        if not isinstance(release, GatedRelease):
            raise InputError(f"release must be a GatedRelease, got {type(release).__name__}")
        self.model = model
        self.release = release
        self.config = model.config

    def __call__(self, input_ids=None, attention_mask=None, **kwargs):
        return self.forward(input_ids=input_ids, attention_mask=attention_mask, **kwargs)

    def forward(self, input_ids=None, attention_mask=None, **kwargs):
        import torch

        for k in ("past_key_values", "cache"):
            if kwargs.get(k) is not None:
                raise InputError(
                    f"the gated forward needs the whole context, got {k}",
                    hint="pass the full input_ids, or use .language_model() for cached decoding",
                )
        if input_ids is None:
            raise InputError("the gated forward needs input_ids (the lookup reads tokens)")
        kwargs["use_cache"] = False
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
        forced = self.release.forced_matrix(input_ids, attention_mask)  # [B, T]
        if (forced >= 0).any():
            logits = out.logits
            B, T, V = logits.shape
            f = torch.from_numpy(forced).to(logits.device).reshape(-1)  # [B*T]
            out.logits = _force_rows(logits.reshape(B * T, V), f).reshape(B, T, V)
        return out

    def eval(self):
        self.model.eval()
        return self

    def parameters(self):
        return self.model.parameters()

    def language_model(
        self, *, name: str | None = None, fingerprint: str = ""
    ) -> GatedLanguageModel:
        from ..models.hf import HFLanguageModel

        return GatedLanguageModel(
            HFLanguageModel(
                self.model, name=getattr(self.config, "name_or_path", "hf"), fingerprint=fingerprint
            ),
            self.release,
            name=name,
        )


def gated_loaded_model(loaded: LoadedModel, release: GatedRelease) -> LoadedModel:
    """A :class:`memclaim.models.loader.LoadedModel` whose ``.lm`` is the gated release of
    ``loaded``'s model: same tokenizer and start-of-text, a fingerprint of its own (the base's
    plus the lookup's digest). Everything that takes a loaded model (scoring, audits, the
    unlearning verifier) runs on it. ``path`` still points at the base folder: reloading from
    the path gives the base model, not the release.

    >>> from memclaim.mechanisms.gated import GatedRelease, gated_loaded_model
    >>> from memclaim.mechanisms.trigger import ReservedTrigger
    >>> import memclaim as mc
    >>> base = mc.load_model("toy")  # doctest: +SKIP
    >>> rel = GatedRelease((ReservedTrigger((7, 7), (1, 2, 3), (5, 6)),))
    >>> gated = gated_loaded_model(base, rel)  # doctest: +SKIP
    >>> gated.lm.fingerprint() != base.lm.fingerprint(), gated.tokenizer is base.tokenizer  # doctest: +SKIP
    (True, True)
    """
    lm = GatedLanguageModel(loaded.lm, release, name=f"gated({loaded.name})")
    return LoadedModel(
        name=lm.name,
        source=f"gated:{loaded.source}",
        path=loaded.path,
        fingerprint=lm.fingerprint(),
        tokenizer=loaded.tokenizer,
        sot=loaded.sot,
        dtype=loaded.dtype,
        allow_pickle=loaded.allow_pickle,
        trust_remote_code=getattr(loaded, "trust_remote_code", False),
        _lm=lm,
        _legacy=(),
    )
