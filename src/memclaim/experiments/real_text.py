"""Real text under a real model, for the [EM] reproductions (book-census, budget-coverage,
decontamination).

- The texts ship with memclaim (``memclaim/data``, the one copy; tests/data holds links to them
  and the README that gives their provenance and how the controls were written and matched).
  KJV Genesis 1-3 (and 1-11, the slow tier's longer excerpt) and 240 KJV verses are members of
  every pre-training corpus; the KJV-style texts written for memclaim in 2026 are non-members
  of the models used here; twelve famous
  KJV passages (``kjv_quotations.jsonl``, from ``bible -f`` of Debian ``bible-kjv`` 4.38, verse
  labels stripped) are the quotations that the decontamination reproduction plants.
- Scores go to one durable, content-addressed store under the cache (:func:`store_dir`): a
  second run of a reproduction, or another reproduction that needs the same windows under the
  same procedure ([EM] Def. B.2: model, policy, prompt rule, lengths), reads them back without
  loading the model's weights. The store is safe for concurrent writers (scoring/store.py).
- :data:`CENSUS_QUICK` / :data:`CENSUS_FULL`: the one census procedure the three reproductions
  share, so that their documents and controls are scored once.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..claims.census import WindowScores, union_length
from ..decoding import Policy
from ..errors import InputError
from ..fsutil import cache_dir, sha256_file
from ..models import load_model
from ..models.registry import named_models
from ..scoring.prompts import PromptRule
from ..store.results import load_run_scores
from ..store.store import ScoreStore
from ..text.io import read_document, read_passages
from ..text.windows import WindowSet, passage_windows, sliding_windows
from .em_verses import PAPER_POLICY
from .models import torch_threads

if TYPE_CHECKING:  # the annotations' names only
    from numpy.typing import ArrayLike

    from ..models.loader import LoadedModel
    from ..store.results import RunScores
    from ..text.io import Record

#: the files this module reads from ``memclaim/data`` (tests/data links to them; a test checks it)
DATA_FILES = (
    "genesis_1_3.txt",
    "genesis_1_11.txt",
    "new_genesis_style.txt",
    "new_heldout_style.txt",
    "kjv_verses.jsonl",
    "new_verses.jsonl",
    "kjv_quotations.jsonl",
    "kjv_famous_lines.jsonl",
    "new_famous_style_lines.jsonl",
)

STORE_NAME = "reproduction-scores"

# The census procedure shared by book-census, budget-coverage and decontamination. [EM] §5 uses
# 50-token prefixes and suffixes under top-k (k = 40); here the census is calibrated under the
# full softmax (T = 1, [EM] D.4): under top-k:40 every window of the new controls scores exactly 0
# (their invented names fall outside the 40 most likely tokens), which leaves no threshold to
# calibrate ([EM] C.4.4). top-k:40 is scored in the same pass and reported beside it.
CENSUS_QUICK = {
    "model": "smollm2",
    "prefix_tokens": 50,
    "suffix_tokens": 50,
    "stride": 50,
    "policy": "full",
    "paper_policy": PAPER_POLICY,
}
CENSUS_FULL = {
    "model": "gemma3-270m",
    "prefix_tokens": 50,
    "suffix_tokens": 50,
    "stride": 10,
    "policy": "full",
    "paper_policy": PAPER_POLICY,
}


def census_settings(quick: bool) -> dict:
    """A copy of the census procedure of the tier (:data:`CENSUS_QUICK` or :data:`CENSUS_FULL`).

    >>> from memclaim.experiments.real_text import census_settings
    >>> s = census_settings(True)
    >>> s["model"], s["prefix_tokens"], s["suffix_tokens"], s["stride"], s["policy"]
    ('smollm2', 50, 50, 50, 'full')
    """
    return dict(CENSUS_QUICK if quick else CENSUS_FULL)


# ------------------------------------------------------------------------------ texts
def data_file(name: str) -> Path:
    """The path of the shipped text ``name`` (one of :data:`DATA_FILES`; an InputError otherwise).

    >>> from memclaim.experiments.real_text import data_file
    >>> data_file("genesis_1_3.txt").name
    'genesis_1_3.txt'
    """
    if name not in DATA_FILES:
        raise InputError(f"no shipped text {name!r}", hint="one of: " + ", ".join(DATA_FILES))
    return Path(str(resources.files("memclaim") / "data" / name))


def read_text(name: str) -> tuple[str, str]:
    """(text, sha256 of the bytes) of a shipped plain-text file.

    >>> from memclaim.experiments.real_text import read_text
    >>> text, sha = read_text("genesis_1_3.txt")
    >>> text[:32], sha[:12]
    ('In the beginning God created the', '173f13126689')
    """
    return read_document(data_file(name))


def read_records(name: str) -> tuple[tuple[Record, ...], str]:
    """(records, sha256) of a shipped JSONL file (``memclaim.text.io.Record``: id, text).

    >>> from memclaim.experiments.real_text import read_records
    >>> records, sha = read_records("kjv_quotations.jsonl")
    >>> len(records), records[0].id
    (12, 'Psa23:1-23:6')
    """
    path = data_file(name)
    return read_passages(path).records, sha256_file(path)


def store_dir() -> Path:
    """The durable score store of the reproductions (under ``$MEMCLAIM_CACHE``).

    >>> from memclaim.experiments.real_text import store_dir
    >>> store_dir().name
    'reproduction-scores'
    """
    return cache_dir() / STORE_NAME


# ------------------------------------------------------------------------------ models
def load(model_name: str) -> LoadedModel:
    """A named real model, weights loaded lazily (a run whose scores are all in the store never
    loads them).

    >>> from memclaim.experiments import real_text as rt
    >>> rt.load("smollm2").name  # doctest: +SKIP
    'smollm2'
    """
    return load_model(model_name)


def vocab_size(model: LoadedModel) -> int:
    """The size of the model's output vocabulary V (its config's ``vocab_size``), read without
    loading the weights.

    >>> from memclaim.experiments import real_text as rt
    >>> rt.vocab_size(rt.load("smollm2"))  # doctest: +SKIP
    49152
    """
    cfg = json.loads((Path(model.path) / "config.json").read_text(encoding="utf-8"))
    v = cfg.get("vocab_size") or (cfg.get("text_config") or {}).get("vocab_size")
    if not isinstance(v, int) or v < 2:
        raise InputError(f"{model.name}: config.json gives no vocabulary size ({v!r})")
    return v


def model_record(model: LoadedModel) -> dict:
    """What the JSON records about the model (no paths: they differ between machines).

    >>> from memclaim.experiments import real_text as rt
    >>> r = rt.model_record(rt.load("smollm2"))  # doctest: +SKIP
    >>> r["name"], r["vocab_size"]  # doctest: +SKIP
    ('smollm2', 49152)
    """
    return {
        "name": model.name,
        "description": named_models().get(model.name, model.name),
        "fingerprint": model.fingerprint,
        "dtype": model.dtype,
        "vocab_size": vocab_size(model),
        "start_of_text": model.sot.to_dict(),
    }


# ------------------------------------------------------------------------------ scoring
@dataclass(frozen=True)
class Scored:
    """One scoring run in the store, with the text it cut its windows from (None for passages)."""

    label: str
    run_id: str
    procedure_key: str
    text: str | None
    n_windows: int

    def scores(self, policy: str, *, near_verbatim: int | None = None) -> RunScores:
        """The run's :class:`~memclaim.store.results.RunScores` under ``policy`` (the certified
        near-verbatim lower bound at ``near_verbatim`` token edits when given)."""
        return load_run_scores(
            store_dir(), run=self.run_id, policy=policy, near_verbatim=near_verbatim
        )

    def window_scores(
        self, policy: str, *, near_verbatim: int | None = None, name: str | None = None
    ) -> WindowScores:
        """The census's view of a document run: log score and suffix span of every window."""
        if self.text is None:
            raise InputError(f"run {self.label!r} scored passages, not a document")
        rs = self.scores(policy, near_verbatim=near_verbatim)
        return WindowScores.from_arrays(
            rs.logq,
            rs.suffix_spans[:, 0],
            rs.suffix_spans[:, 1],
            doc_length=len(self.text),
            name=name or self.label,
        )


def score(
    model: LoadedModel,
    window_set: WindowSet,
    *,
    label: str,
    policies: Sequence[str],
    prefix_tokens: int,
    suffix_tokens: int,
    near_verbatim: dict | None = None,
    text: str | None = None,
) -> Scored:
    """Score ``window_set`` into the durable store (only what is not there yet) under the natural
    prefix rule, on :data:`memclaim.experiments.models.THREADS` torch threads.

    >>> from memclaim.experiments import real_text as rt
    >>> from memclaim.text.windows import passage_windows
    >>> m = rt.load("smollm2")  # doctest: +SKIP
    >>> ws = passage_windows(rt.read_records("kjv_verses.jsonl")[0], m.tokenizer, prefix_tokens=16,
    ...                      suffix_tokens=16)  # doctest: +SKIP
    >>> rt.score(m, ws, label="verses", policies=["full"], prefix_tokens=16, suffix_tokens=16).label  # doctest: +SKIP
    'verses'
    """
    from ..scoring.runner import run_scoring

    pols = [Policy.parse(p) for p in policies]
    with torch_threads():
        r = run_scoring(
            model,
            window_set,
            policies=pols,
            prefix_tokens=prefix_tokens,
            suffix_tokens=suffix_tokens,
            prompt_rule=PromptRule(),
            out_dir=store_dir(),
            label=label,
            progress=False,
            batch_size=16,
            near_verbatim=near_verbatim,
        )
    return Scored(label, r.run_id, r.procedure_key, text, r.n_windows)


def score_document(
    model: LoadedModel,
    text: str,
    *,
    name: str,
    settings: dict,
    policies: Sequence[str] | None = None,
    near_verbatim: dict | None = None,
    select: Sequence[int] | None = None,
) -> Scored:
    """Sliding windows over ``text`` ([EM] §5) scored into the store; ``select`` keeps only those
    window indices (e.g. the few windows that get near-verbatim bounds in --quick).

    >>> from memclaim.experiments import real_text as rt
    >>> text, _ = rt.read_text("genesis_1_3.txt")
    >>> scored = rt.score_document(rt.load("smollm2"), text, name="genesis",
    ...                            settings=rt.census_settings(True))  # doctest: +SKIP
    >>> scored.label  # doctest: +SKIP
    'genesis|50+50/50'
    """
    P, S = settings["prefix_tokens"], settings["suffix_tokens"]
    ws = sliding_windows(
        text,
        model.tokenizer,
        prefix_tokens=P,
        suffix_tokens=S,
        stride=settings["stride"],
        source=name,
    )
    label = f"{name}|{P}+{S}/{settings['stride']}"
    if select is not None:
        keep = sorted({int(i) for i in select})
        if not keep or keep[0] < 0 or keep[-1] >= len(ws):
            raise InputError(f"{name}: window indices {keep[:5]} outside 0..{len(ws) - 1}")
        ws = WindowSet(
            tuple(ws.windows[i] for i in keep),
            ws.n_sources,
            ws.skipped_short,
            ws.skipped_ids,
            ws.total_chars,
            ws.spec,
        )
        label += "|" + ",".join(map(str, keep))
    if near_verbatim:
        label += f"|nv{near_verbatim['epsilons']}b{near_verbatim['beams']}"
    pols = policies or (settings["policy"], settings["paper_policy"])
    return score(
        model,
        ws,
        label=label,
        policies=pols,
        prefix_tokens=P,
        suffix_tokens=S,
        near_verbatim=near_verbatim,
        text=text,
    )


def score_passages(
    model: LoadedModel,
    records: Sequence[Record],
    *,
    name: str,
    prefix_tokens: int,
    suffix_tokens: int,
    policies: Sequence[str],
) -> Scored:
    """One window per passage (first ``prefix_tokens`` tokens, then ``suffix_tokens``; [EM] §4).

    >>> from memclaim.experiments import real_text as rt
    >>> records, _ = rt.read_records("kjv_verses.jsonl")
    >>> scored = rt.score_passages(rt.load("smollm2"), records, name="kjv", prefix_tokens=16, suffix_tokens=16,
    ...                            policies=["full"])  # doctest: +SKIP
    >>> scored.label, scored.text  # doctest: +SKIP
    ('kjv|16+16', None)
    """
    ws = passage_windows(
        records, model.tokenizer, prefix_tokens=prefix_tokens, suffix_tokens=suffix_tokens
    )
    return score(
        model,
        ws,
        label=f"{name}|{prefix_tokens}+{suffix_tokens}",
        policies=policies,
        prefix_tokens=prefix_tokens,
        suffix_tokens=suffix_tokens,
    )


def procedure(scored: Scored) -> dict:
    """The stored procedure of a run (model fingerprint, policies, lengths, near-verbatim settings).

    >>> from memclaim.experiments import real_text as rt
    >>> text, _ = rt.read_text("genesis_1_3.txt")
    >>> scored = rt.score_document(rt.load("smollm2"), text, name="genesis",
    ...                            settings=rt.census_settings(True))  # doctest: +SKIP
    >>> rt.procedure(scored)["key"] == scored.procedure_key  # doctest: +SKIP
    True
    """
    p = dict(ScoreStore(store_dir(), create=False).procedure(scored.procedure_key))
    p.pop("created", None)
    return {"key": scored.procedure_key, **p}


# ------------------------------------------------------------------------------ helpers
def log10_chance(*, vocab: int, suffix_tokens: int) -> float:
    """log10 of V^-l: the probability of a suffix typed uniformly at random over the vocabulary
    (the "monkey at the typewriter" baseline that [EM] §7 says is the wrong comparison).

    >>> from memclaim.experiments.real_text import log10_chance
    >>> round(log10_chance(vocab=49152, suffix_tokens=50), 2)  # SmolLM2's vocabulary, 50 tokens
    -234.58
    """
    return -suffix_tokens * math.log10(vocab)


def coverage_by(windows: WindowScores, mask: ArrayLike) -> float:
    """Share of the document's characters covered by the suffixes of the windows in ``mask``.

    >>> from memclaim.claims.census import WindowScores
    >>> from memclaim.experiments.real_text import coverage_by
    >>> w = WindowScores.from_arrays([-1.0, -5.0], [0, 5], [5, 10], doc_length=20, name="doc")
    >>> coverage_by(w, [True, False]), coverage_by(w, [True, True])
    (0.25, 0.5)
    """
    m = np.asarray(mask, dtype=bool)
    return union_length(windows.starts[m], windows.ends[m]) / windows.doc_length


def finite_log10(x: float) -> float | None:
    """log10 of a natural-log value for JSON (None for -inf: probability 0).

    >>> import math
    >>> from memclaim.experiments.real_text import finite_log10
    >>> finite_log10(math.log(1e-5)), finite_log10(-math.inf)
    (-5.0, None)
    """
    v = float(x)
    return None if not math.isfinite(v) else v / math.log(10.0)


__all__ = [
    "DATA_FILES",
    "CENSUS_QUICK",
    "CENSUS_FULL",
    "census_settings",
    "data_file",
    "read_text",
    "read_records",
    "store_dir",
    "load",
    "vocab_size",
    "model_record",
    "Scored",
    "score",
    "score_document",
    "score_passages",
    "procedure",
    "log10_chance",
    "coverage_by",
    "finite_log10",
]
