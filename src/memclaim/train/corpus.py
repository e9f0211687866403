"""Synthetic text: a Markov–Zipf corpus generator with planted records ([MX] §8, App. F).

Words are pronounceable pseudo-words; word frequencies follow a Zipf law and each word has its
own Zipf-distributed successor distribution over a random permutation of the vocabulary (a
first-order Markov chain). Passages are fresh draws from the same chain, so a passage planted in
the training corpus (a member) and one held out (a control) are exchangeable before training:
the held-out draws are the matched non-member controls of [EM] §3 by construction.

Everything is a deterministic function of the seed (numpy ``default_rng``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..errors import InputError
from ..validate import integer, positive

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

_CONSONANTS = list("bdfgklmnprstvz") + ["ch", "sh", "th", "qu"]
_VOWELS = list("aeiou") + ["ai", "ou", "ea"]


@dataclass(frozen=True)
class MarkovZipf:
    """A first-order Markov chain over ``n_words`` pseudo-words with Zipf(``s``) rows."""

    n_words: int = 400
    s: float = 1.1
    mix: float = 0.25  # weight of the global unigram in each successor distribution
    sentence_len: tuple[int, int] = (6, 16)
    seed: int = 0
    words: tuple[str, ...] = field(init=False, repr=False)
    _P: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        integer("n_words", self.n_words, minimum=4)
        positive("s", self.s)
        rng = np.random.default_rng(self.seed)
        words: list[str] = []
        seen: set[str] = set()
        while len(words) < self.n_words:
            n_syl = int(rng.choice([1, 2, 2, 3, 3, 4]))
            w = "".join(
                _CONSONANTS[rng.integers(len(_CONSONANTS))] + _VOWELS[rng.integers(len(_VOWELS))]
                for _ in range(n_syl)
            )
            if w not in seen:
                seen.add(w)
                words.append(w)
        ranks = np.arange(1, self.n_words + 1, dtype=np.float64)
        zipf = ranks ** (-self.s)
        zipf /= zipf.sum()
        P = np.empty((self.n_words, self.n_words))
        for i in range(self.n_words):
            perm = rng.permutation(self.n_words)
            row = np.empty(self.n_words)
            row[perm] = zipf
            P[i] = (1 - self.mix) * row + self.mix * zipf
        object.__setattr__(self, "words", tuple(words))
        object.__setattr__(self, "_P", P)
        object.__setattr__(self, "_unigram", zipf)

    @property
    def transition_matrix(self) -> np.ndarray:
        """Row-stochastic word transition matrix [n_words, n_words] (float64, read-only view)."""
        v = self._P.view()
        v.setflags(write=False)
        return v

    @property
    def start_distribution(self) -> np.ndarray:
        """Distribution of a passage's first word: the Zipf unigram [n_words] (read-only view)."""
        v = self._unigram.view()
        v.setflags(write=False)
        return v

    def sample_words(self, n: int, rng: np.random.Generator) -> list[int]:
        out = [int(rng.choice(self.n_words, p=self._unigram))]
        for _ in range(n - 1):
            out.append(int(rng.choice(self.n_words, p=self._P[out[-1]])))
        return out

    def passage(self, rng: np.random.Generator, *, n_words: int) -> str:
        """A passage of about ``n_words`` words: sentences with capitals and full stops."""
        ids = self.sample_words(n_words, rng)
        lo, hi = self.sentence_len
        out, i = [], 0
        while i < len(ids):
            n = int(rng.integers(lo, hi + 1))
            sent = [self.words[j] for j in ids[i : i + n]]
            sent[0] = sent[0].capitalize()
            out.append(" ".join(sent) + ".")
            i += n
        return " ".join(out)

    def min_entropy_bits(self, n_words: int) -> float:
        """H_inf of a fresh n-word draw: -log2 of the most likely word sequence (Viterbi in log
        space). This is the canary min-entropy that [MX] Cor. 5.3 compares with H*."""
        integer("n_words", n_words, minimum=1)
        with np.errstate(divide="ignore"):
            lp = np.log2(self._unigram)
            lP = np.log2(self._P)
        for _ in range(n_words - 1):
            lp = np.max(lp[:, None] + lP, axis=0)
        return float(-lp.max())

    def entropy_rate_bits(self) -> float:
        """Entropy rate of the word chain (bits/word) under its stationary distribution."""
        w, v = np.linalg.eig(self._P.T)
        pi = np.real(v[:, np.argmin(np.abs(w - 1))])
        pi = np.abs(pi) / np.abs(pi).sum()
        with np.errstate(divide="ignore", invalid="ignore"):
            h = -np.nansum(self._P * np.log2(self._P), axis=1)
        return float(pi @ h)


@dataclass(frozen=True)
class PlantedCorpus:
    """Background documents plus planted records, each inserted ``copies`` times at random
    positions; ``held_out`` are fresh draws never inserted (matched controls)."""

    documents: tuple[str, ...]  # training documents, in training order
    planted: tuple[dict, ...]  # {"id", "text", "copies"}
    held_out: tuple[dict, ...]  # {"id", "text"}
    seed: int
    background: tuple[str, ...] = ()  # the background documents alone (a subset of ``documents``)

    def to_dict(self) -> dict:
        return {
            "seed": self.seed,
            "n_documents": len(self.documents),
            "planted": list(self.planted),
            "held_out": list(self.held_out),
        }


def build_planted_corpus(
    gen: MarkovZipf,
    *,
    n_background: int,
    passage_words: int,
    copies: dict[int, int],
    n_held_out: int,
    seed: int,
    extra_planted: list[dict] | None = None,
    extra_held_out: list[dict] | None = None,
) -> PlantedCorpus:
    """``copies`` maps duplication count k -> number of records planted k times ([MX] §8.2's
    k-copy canaries). ``extra_planted``/``extra_held_out`` add caller-made records (e.g. long
    documents for a census, trigger pairs) with their own ``copies``.

    >>> from memclaim.train.corpus import MarkovZipf, build_planted_corpus
    >>> c = build_planted_corpus(MarkovZipf(n_words=20), n_background=3, passage_words=5, copies={2: 1},
    ...                          n_held_out=1, seed=0)
    >>> len(c.documents), c.planted[0]["id"], c.documents.count(c.planted[0]["text"]), c.held_out[0]["id"]
    (5, 'member-k2-0', 2, 'control-0')
    """
    integer("n_background", n_background, minimum=0)
    rng = np.random.default_rng(seed)
    background = [gen.passage(rng, n_words=passage_words) for _ in range(n_background)]
    planted: list[dict] = []
    for k in sorted(copies):
        integer("copies", k, minimum=1)
        for j in range(copies[k]):
            planted.append(
                {
                    "id": f"member-k{k}-{j}",
                    "text": gen.passage(rng, n_words=passage_words),
                    "copies": k,
                }
            )
    held_out = [
        {"id": f"control-{j}", "text": gen.passage(rng, n_words=passage_words)}
        for j in range(n_held_out)
    ]
    planted += list(extra_planted or [])
    held_out += list(extra_held_out or [])
    docs = list(background)
    for rec in planted:
        docs += [rec["text"]] * int(rec["copies"])
    order = rng.permutation(len(docs))
    return PlantedCorpus(
        tuple(docs[i] for i in order), tuple(planted), tuple(held_out), seed, tuple(background)
    )


# --------------------------------------------------------------------------- chain sampling
def _check_chain(P, start) -> tuple[np.ndarray, np.ndarray]:
    P = np.asarray(P, dtype=np.float64)
    if P.ndim != 2 or P.shape[0] != P.shape[1] or P.shape[0] < 2:
        raise InputError(
            f"the transition matrix must be square [n, n] with n >= 2, got shape {P.shape}"
        )
    if np.any(P < 0) or np.any(np.abs(P.sum(axis=1) - 1.0) > 1e-9):
        raise InputError("the transition matrix must have non-negative rows summing to 1")
    s = np.asarray(start, dtype=np.float64)
    if s.shape != (P.shape[0],) or np.any(s < 0) or abs(s.sum() - 1.0) > 1e-9:
        raise InputError(
            f"the start distribution must be a probability vector of length {P.shape[0]}"
        )
    return P, s


def sample_chain(
    P: ArrayLike,
    start: ArrayLike,
    rng: np.random.Generator,
    *,
    n: int,
    length: int,
    first: ArrayLike | None = None,
) -> np.ndarray:
    """``n`` independent chain paths of ``length`` tokens, shape (n, length), int64.

    The first token is drawn from ``start`` unless ``first`` (one state per path, or a scalar)
    is given, in which case each path *continues* from that state (its first token is drawn from
    the row P[first]). Vectorized over paths: one uniform per path and step, inverted through the
    row's cumulative sums (numpy's Generator.choice takes one distribution per call, which would
    cost a Python call per token).

    >>> import numpy as np
    >>> from memclaim.train.corpus import sample_chain
    >>> P = [[0.0, 1.0], [1.0, 0.0]]  # a chain that alternates between its two states
    >>> sample_chain(P, [1.0, 0.0], np.random.default_rng(0), n=2, length=4).tolist()
    [[0, 1, 0, 1], [0, 1, 0, 1]]
    >>> sample_chain(P, [1.0, 0.0], np.random.default_rng(0), n=2, length=3, first=[0, 1]).tolist()
    [[1, 0, 1], [0, 1, 0]]
    """
    P, s = _check_chain(P, start)
    n = integer("n", n, minimum=0)
    length = integer("length", length, minimum=1)
    cum = np.cumsum(P, axis=1)
    cum[:, -1] = 1.0  # guard the last bin against rounding
    out = np.empty((n, length), dtype=np.int64)
    if first is None:
        cs = np.cumsum(s)
        cs[-1] = 1.0
        state = np.searchsorted(cs, rng.random(n), side="right")
        out[:, 0] = state
        t0 = 1
    else:
        state = np.broadcast_to(np.asarray(first, dtype=np.int64), (n,)).copy()
        if state.size and (state.min() < 0 or state.max() >= P.shape[0]):
            raise InputError(f"first states must lie in [0, {P.shape[0]})")
        t0 = 0
    for t in range(t0, length):
        u = rng.random(n)
        state = (cum[state] <= u[:, None]).sum(axis=1)  # first index with cum > u
        state = np.minimum(state, P.shape[0] - 1)
        out[:, t] = state
    return out
