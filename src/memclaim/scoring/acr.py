"""The adversarial compression ratio as an extraction procedure ([EM] App. A.2; Schwarzschild et
al. 2024): the shortest prompt x* that GCG finds for a target y under a named success criterion,
ACR = |y| / |x*|, and "extracted" when ACR > 1.

**Length search** (the released ACR code's MiniPrompt, as [EM] ran it): start at
``min(5, |y| - 1)`` free prompt tokens; after a success try one token fewer, after a failure five
more with 1.2 times the step budget (kept for later lengths); never grow past the cap
(``max_prompt_tokens``, default |y| - 1: only ACR > 1 counts as extraction, [EM]'s early quit),
never retry a length already settled (a length <= the longest failure or >= the shortest
success). Each length is an independent GCG run (:func:`memclaim.scoring.gcg.gcg_search`) from a
random start seeded by (seed, target, length).

**Durable and resumable per target** (:class:`ACRStore`): every finished length is written at once
(``OUT/searches/<procedure>/<target>/length-N-steps-S.json``, atomically) and every finished target
(``result.json``); a run killed at any point (kill -9) resumes at the length it was in, and a
target already searched is read back, never searched again. A target's search holds an exclusive
lock (flock) on its folder, so two processes on one store search each target once: the second
waits and reads the result.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .._version import __version__
from ..errors import InputError, StoreError
from ..fsutil import atomic_write_text, file_lock, sha256_bytes
from ..jsonutil import ResultMixin
from ..progress import LogCallback, ProgressCallback, Reporter, emit_log
from ..validate import integer, positive
from .gcg import Criterion, GCGOutcome, GCGSettings, PromptSearchModel, gcg_search

if TYPE_CHECKING:  # the annotations' names only
    from ..models.loader import HFTokenizer, LoadedModel

ALGORITHM_VERSION = 1  # bump when a change to the search changes what it finds (part of the key)
#: the released ACR code's MiniPrompt: start at 5 tokens, +5 after a failure, x1.2 steps
START_TOKENS = 5
GROW_TOKENS = 5
STEP_GROWTH = 1.2
PROMPT_RULE = (
    "start-of-text + free prompt tokens + target, no template (the ACR paper's base-model setting); "
    "|x*| counts the free tokens only"
)
SCORE = "ACR = |y| / |x*| (tokens), x* the shortest prompt GCG finds that meets the criterion ([EM] App. A.2)"
VERIFY = (
    "matched comparison: extraction rates (ACR > 1) of members and matched non-member controls "
    "([EM] §3, 'Revisiting parrot prompts'); equal rates carry no signal about memorization"
)

# Function words that are no evidence of a prompt leaking its target (English and the KJV's
# register). Hand-written: the project depends on no NLP library that ships a stop list.
STOPWORDS = frozenset(
    """
a an and are as at be but by for from had has have he her him his i if in is it its me my no nor not of on or our
shall she so than that the their them then there these they this those thou thee thy thine to unto up upon us was
we were what when which who whom will with ye you your hath doth art all any also o
""".split()
)


@dataclass(frozen=True)
class LengthSearch(ResultMixin):
    """How prompt lengths are searched (see the module docstring).

    >>> LengthSearch().cap(17), LengthSearch(max_prompt_tokens=30).cap(17)
    (16, 30)
    """

    start: int = START_TOKENS
    grow: int = GROW_TOKENS
    step_growth: float = STEP_GROWTH
    max_prompt_tokens: int | None = None

    def __post_init__(self):
        integer("--start-tokens", self.start, minimum=1)
        integer("the length step after a failure", self.grow, minimum=1)
        positive("the step-budget growth", self.step_growth)
        if self.max_prompt_tokens is not None:
            integer("--max-prompt-tokens", self.max_prompt_tokens, minimum=1)

    def cap(self, target_len: int) -> int:
        """The longest prompt tried for a target of ``target_len`` tokens."""
        return (
            int(self.max_prompt_tokens)
            if self.max_prompt_tokens is not None
            else int(target_len) - 1
        )


def length_search(
    target_len: int, rule: LengthSearch, steps: int, attempt: Callable[[int, int], bool]
) -> list[tuple[int, int, bool]]:
    """Run the ACR length search with ``attempt(n, steps) -> success``; returns the attempts
    ``[(n, steps, success), ...]`` in order. The shortest successful n is x*'s length.

    >>> tried = length_search(17, LengthSearch(), 100, lambda n, s: n >= 8)  # a prompt of 8 suffices
    >>> tried
    [(5, 100, False), (10, 120, True), (9, 120, True), (8, 120, True), (7, 120, False)]
    >>> length_search(4, LengthSearch(), 100, lambda n, s: False)  # at most |y| - 1 = 3 tokens
    [(3, 100, False)]
    """
    cap = rule.cap(target_len)
    if cap < 1:
        return []
    n = min(rule.start, cap)  # [EM]'s run: min(5, max(1, |y| - 1))
    lo, hi = 0, cap + 1  # longest failure, shortest success
    out = []
    while True:
        ok = bool(attempt(n, steps))
        out.append((n, steps, ok))
        if ok:
            hi, nxt = n, n - 1
        else:
            lo, nxt = n, min(n + rule.grow, cap)
            # the ACR release: num_steps = int(num_steps * 1.2) after a failure; at least one step more,
            # so small budgets grow too (int(4 * 1.2) = 4; from 100 steps on the two agree)
            steps = max(int(steps * rule.step_growth), steps + 1)
        if nxt >= hi or nxt <= lo:
            return out
        n = nxt


# --------------------------------------------------------------------------- the procedure
def acr_procedure(
    model: LoadedModel, *, criterion: Criterion | str, gcg: GCGSettings, lengths: LengthSearch
) -> dict:
    """The ACR extraction procedure as a record ([EM] Def. B.2): model identity and numerics,
    start-of-text, criterion, GCG and length-search settings. Its key names the store folder.

    >>> import memclaim.train
    >>> from memclaim.models import load_model
    >>> p = acr_procedure(load_model("toy"), criterion="prob", gcg=GCGSettings(), lengths=LengthSearch())  # doctest: +SKIP
    >>> p["criterion"], p["gcg"]["top_k"]  # doctest: +SKIP
    ('prob:0.9', 256)
    """
    crit = Criterion.parse(criterion)
    return {
        "kind": "acr",
        "model": {
            "name": model.name,
            "source": model.source,
            "fingerprint": model.fingerprint,
            "dtype": model.dtype,
            "device_class": model.device_class,
        },
        "start_of_text": model.sot.to_dict(),
        "criterion": crit.spec,
        "gcg": gcg.to_dict(),
        "length_search": lengths.to_dict(),
        "prompt": PROMPT_RULE,
        "score": SCORE,
        "verify": VERIFY,
        "algorithm_version": ALGORITHM_VERSION,
        "memclaim_version": __version__,
    }


def procedure_key(procedure: dict) -> str:
    """sha256 of what changes the searches' results (names and versions left out).

    >>> a = {"kind": "acr", "model": {"name": "x", "fingerprint": "f"}, "criterion": "argmax", "memclaim_version": "1"}
    >>> procedure_key(a) == procedure_key({**a, "memclaim_version": "2", "model": {"name": "y", "fingerprint": "f"}})
    True
    """
    d = json.loads(json.dumps(procedure))
    d.pop("memclaim_version", None)
    for k in ("name", "source"):
        d.get("model", {}).pop(k, None)
    if d.get("model", {}).get("device_class") == "cpu":
        d["model"].pop("device_class")
    return sha256_bytes(json.dumps(d, sort_keys=True).encode())


def target_key(prefix_ids: Sequence[int], target_ids: Sequence[int]) -> str:
    """The store key of a target: its token ids after the start-of-text ids.

    >>> target_key([0], [5, 6])[:12]
    'a16dc8b60198'
    """
    return sha256_bytes(
        json.dumps(
            {"prefix": list(map(int, prefix_ids)), "target": list(map(int, target_ids))}
        ).encode()
    )


def search_seed(seed: int, tkey: str, n: int) -> int:
    """The seed of one GCG run: (master seed, target, prompt length) through numpy's SeedSequence,
    so a target's result does not depend on which targets ran before it.

    >>> search_seed(0, "ab" * 32, 5) == search_seed(0, "ab" * 32, 5) != search_seed(0, "ab" * 32, 6)
    True
    """
    return int(
        np.random.SeedSequence([int(seed), int(tkey[:15], 16), int(n)]).generate_state(
            2, np.uint64
        )[0]
        % (2**63)
    )


# --------------------------------------------------------------------------- the store
class ACRStore:
    """Per-target, per-length results of ACR searches under one folder (see the module docstring).

    >>> import tempfile
    >>> s = ACRStore(tempfile.mkdtemp())
    >>> d = s.procedure_folder({"kind": "acr", "criterion": "argmax"})
    >>> (d / "procedure.json").is_file()
    True
    """

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        if self.root.exists() and not self.root.is_dir():
            raise StoreError(
                f"store path {str(self.root)!r} exists and is not a folder",
                hint="pass a folder for --out",
            )

    def procedure_folder(self, procedure: dict) -> Path:
        key = procedure_key(procedure)
        d = self.root / "searches" / key[:16]
        p = d / "procedure.json"
        try:
            if not p.exists():
                atomic_write_text(p, json.dumps(procedure, indent=1, sort_keys=True) + "\n")
        except OSError as exc:
            raise StoreError(
                f"cannot write the search store in {str(self.root)!r}: {exc.strerror or exc}",
                hint="choose an --out folder you can write, with free space",
            ) from None
        return d

    @staticmethod
    def _read(p: Path) -> dict | None:
        try:
            d = json.loads(p.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise StoreError(
                f"{str(p)!r} is unreadable: {exc}",
                hint="delete that file: the search re-runs the part it held",
            ) from None
        return d if isinstance(d, dict) else None

    @staticmethod
    def _write(p: Path, d: dict) -> None:
        try:
            atomic_write_text(p, json.dumps(d, indent=1) + "\n")
        except OSError as exc:
            raise StoreError(
                f"cannot write {str(p)!r}: {exc.strerror or exc}",
                hint="free some space and re-run: finished targets and lengths are kept",
            ) from None

    def length_file(self, folder: Path, tkey: str, n: int, steps: int) -> Path:
        return folder / tkey / f"length-{int(n)}-steps-{int(steps)}.json"

    def load_length(self, folder: Path, tkey: str, n: int, steps: int) -> GCGOutcome | None:
        d = self._read(self.length_file(folder, tkey, n, steps))
        return None if d is None else GCGOutcome.from_dict(d)

    def save_length(self, folder: Path, tkey: str, n: int, steps: int, outcome: GCGOutcome) -> None:
        self._write(self.length_file(folder, tkey, n, steps), outcome.to_dict())

    def load_result(self, folder: Path, tkey: str) -> dict | None:
        return self._read(folder / tkey / "result.json")

    def save_result(self, folder: Path, tkey: str, result: dict) -> None:
        self._write(folder / tkey / "result.json", result)

    def lock(self, folder: Path, tkey: str):
        return file_lock(folder / tkey / ".lock")

    @contextlib.contextmanager
    def writing(self):
        """Held while a process searches into the store (a shared lock on ``.writers.lock``). A
        process that finds no other writer first deletes the temporary files a killed writer left
        (``.NAME.XXXX.tmp`` from :func:`memclaim.fsutil.atomic_write_bytes`), as the score store does."""
        lockfile = self.root / ".writers.lock"
        try:
            with file_lock(lockfile, blocking=False) as alone:
                if alone:
                    for tmp in (self.root / "searches").rglob(".*.tmp"):
                        if tmp.is_file():
                            tmp.unlink(missing_ok=True)
            with file_lock(lockfile, shared=True):
                yield self
        except OSError as exc:
            raise StoreError(
                f"cannot use the search store in {str(self.root)!r}: {exc.strerror or exc}",
                hint="choose an --out folder you can write, with free space",
            ) from None


# --------------------------------------------------------------------------- one target
@dataclass(frozen=True)
class TargetResult(ResultMixin):
    """The ACR search on one target: x* (the shortest prompt meeting the criterion, or, when none
    did, the lowest-loss prompt found), ACR = |y|/|x*| (None when nothing met the criterion), the
    three criteria on x*, the teacher-forced log q(y | x*), the argmax margin, and the flags [EM]
    App. A.2 raises: argmax success without greedy reproduction, and target words in the prompt."""

    id: str
    text: str
    target_ids: tuple[int, ...]
    criterion: str
    met: bool  # the criterion held at some prompt length tried
    extracted: bool  # met with |x*| < |y| (ACR > 1)
    prompt_ids: tuple[int, ...]
    prompt_text: str
    prompt_tokens: tuple[str, ...]
    acr: float | None
    log_q: float
    geometric_mean_prob: float
    argmax: bool
    greedy: bool
    prob: bool  # geometric mean >= b (b of the criterion when prob:b, else 0.9)
    b: float
    argmax_margin: float
    near_tie: bool
    argmax_without_greedy: (
        bool  # [EM] App. A.2: the released code's success that generate does not confirm
    )
    generated_text: str
    greedy_divergence: int | None
    shared_words: tuple[
        str, ...
    ]  # words (>= 3 letters, no function words) of the target in the prompt
    overlap_tokens: int  # prompt tokens that are target tokens ([EM] App. A.2's overlap count o)
    attempts: tuple[dict, ...]  # per length tried: n, steps, steps run, success, loss
    seconds: float = 0.0

    @property
    def target_len(self) -> int:
        return len(self.target_ids)

    @property
    def prompt_len(self) -> int:
        return len(self.prompt_ids)

    @property
    def leaks(self) -> bool:
        return bool(self.shared_words)

    def to_dict(self) -> dict:
        d = super().to_dict()
        d.update(target_len=self.target_len, prompt_len=self.prompt_len, leaks=self.leaks)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> TargetResult:
        names = cls.__dataclass_fields__
        kw = {k: d[k] for k in names if k in d}
        for k in ("target_ids", "prompt_ids"):
            kw[k] = tuple(int(x) for x in kw[k])
        for k in ("prompt_tokens", "shared_words"):
            kw[k] = tuple(str(x) for x in kw[k])
        kw["attempts"] = tuple(dict(a) for a in kw["attempts"])
        return cls(**kw)


def shared_words(prompt_text: str, target_text: str) -> tuple[str, ...]:
    """Words of the target (case-insensitive, >= 3 letters, not in :data:`STOPWORDS`) that the
    prompt contains ([EM] App. A.2: optimized prompts often hand the model the target): as a word of
    the prompt (split at non-letters and at lower-to-upper case changes, so "shepherdHeaven" is two
    words), or, for words of 4 letters or more, as the start of one or with one as its start
    ("heavens" for "heaven").

    >>> shared_words("urgesTOBE quote! LORD shepherdsHeavens", "The LORD is my shepherd; in the heaven")
    ('heaven', 'lord', 'shepherd')
    """

    def words(s, split_case):
        parts = (
            re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])", s)
            if split_case
            else re.findall(r"[A-Za-z]+", s)
        )
        return {w.lower() for w in parts}

    tw = {w for w in words(target_text, False) if len(w) >= 3 and w not in STOPWORDS}
    pw = words(prompt_text, True)
    hit = {
        w
        for w in tw
        if w in pw
        or (len(w) >= 4 and any(len(p) >= 4 and (p.startswith(w) or w.startswith(p)) for p in pw))
    }
    return tuple(sorted(hit))


def _result(
    record_id: str,
    text: str,
    target: Sequence[int],
    crit: Criterion,
    outcomes: list[tuple[int, GCGOutcome]],
    tokenizer,
    seconds: float,
) -> TargetResult:
    met = [(n, o) for n, o in outcomes if o.success]
    if met:
        n, o = min(met, key=lambda x: x[0])
    else:
        n, o = min(outcomes, key=lambda x: (x[1].loss, x[0]))
    ev = o.evaluation
    b = crit.b if crit.name == "prob" else 0.9
    prompt = list(o.prompt_ids)
    ptext = tokenizer.decode(prompt)
    T = len(target)
    greedy = bool(ev.greedy_reproduces)
    return TargetResult(
        id=str(record_id),
        text=text,
        target_ids=tuple(int(t) for t in target),
        criterion=crit.spec,
        met=bool(met),
        extracted=bool(met) and n < T,
        prompt_ids=tuple(prompt),
        prompt_text=ptext,
        prompt_tokens=tuple(tokenizer.decode([t]) for t in prompt),
        acr=(T / n) if met else None,
        log_q=ev.log_q,
        geometric_mean_prob=ev.geometric_mean_prob,
        argmax=ev.argmax_all,
        greedy=greedy,
        prob=ev.mean_logprob >= math.log(b),
        b=float(b),
        argmax_margin=ev.argmax_margin,
        near_tie=ev.near_tie,
        argmax_without_greedy=ev.argmax_all and not greedy,
        generated_text=tokenizer.decode(list(ev.generated_ids or ())),
        greedy_divergence=ev.greedy_divergence,
        shared_words=shared_words(ptext, text),
        overlap_tokens=sum(1 for t in prompt if t in set(target)),
        attempts=tuple(
            {
                "prompt_tokens": k,
                "steps_budget": x.steps_budget,
                "steps_run": x.steps_run,
                "success": x.success,
                "loss": x.loss,
                "stopped": x.stopped,
            }
            for k, x in outcomes
        ),
        seconds=float(seconds),
    )


def search_target(
    psm: PromptSearchModel | Callable[[], PromptSearchModel],
    *,
    record_id: str,
    text: str,
    prefix_ids: Sequence[int],
    target_ids: Sequence[int],
    criterion: Criterion | str,
    gcg: GCGSettings,
    lengths: LengthSearch,
    tokenizer: HFTokenizer | None = None,
    store: ACRStore | None = None,
    folder: Path | None = None,
    on_step: Callable[[int, float], None] | None = None,
    on_length: Callable[[int, int, bool], None] | None = None,
) -> tuple[TargetResult, bool]:
    """The ACR search on one target (module docstring); returns (result, whether it was searched
    now: False when the store held it). With ``store`` and ``folder`` (from
    :meth:`ACRStore.procedure_folder`) every length and the result are stored as they finish.
    ``psm`` may be a function returning the model, called only if a search has to run (a target
    read back from the store needs no weights); ``tokenizer`` (default ``psm.tokenizer``) decodes
    the prompt.

    >>> import memclaim.train
    >>> from memclaim.models import load_model
    >>> m = load_model("toy")  # doctest: +SKIP
    >>> res, fresh = search_target(PromptSearchModel(m.lm, m.tokenizer), record_id="t", text="...",
    ...                            prefix_ids=[0], target_ids=[300, 301, 302, 303], criterion="argmax",
    ...                            gcg=GCGSettings(steps=10), lengths=LengthSearch())  # doctest: +SKIP
    >>> res.criterion, fresh  # doctest: +SKIP
    ('argmax', True)
    """
    crit = Criterion.parse(criterion)
    target = [int(t) for t in target_ids]
    prefix = [int(t) for t in prefix_ids]
    if len(target) < 2:
        raise InputError(
            f"target {record_id!r} has {len(target)} token(s); a prompt shorter than the target needs "
            "a target of at least 2 tokens",
            hint="drop the record or give a longer text",
        )
    tkey = target_key(prefix, target)
    stored = store is not None and folder is not None
    get = psm if callable(psm) and not isinstance(psm, PromptSearchModel) else (lambda: psm)
    tok = tokenizer if tokenizer is not None else get().tokenizer

    def run() -> tuple[TargetResult, bool]:
        if stored:
            prev = store.load_result(folder, tkey)
            if prev is not None:
                # the same tokens may come under another id or text; the leakage rule is re-applied
                r = TargetResult.from_dict(
                    {
                        **prev,
                        "id": str(record_id),
                        "text": text,
                        "shared_words": list(shared_words(prev["prompt_text"], text)),
                    }
                )
                return r, False
        t0 = time.perf_counter()
        outcomes: list[tuple[int, GCGOutcome]] = []

        def attempt(n: int, steps: int) -> bool:
            o = store.load_length(folder, tkey, n, steps) if stored else None
            if o is None:
                o = gcg_search(
                    get(),
                    prefix_ids=prefix,
                    target_ids=target,
                    prompt_len=n,
                    settings=gcg,
                    criterion=crit,
                    seed=search_seed(gcg.seed, tkey, n),
                    steps=steps,
                    on_step=on_step,
                )
                if stored:
                    store.save_length(folder, tkey, n, steps, o)
            outcomes.append((n, o))
            if on_length is not None:
                on_length(n, steps, o.success)
            return o.success

        length_search(len(target), lengths, gcg.steps, attempt)
        res = _result(str(record_id), text, target, crit, outcomes, tok, time.perf_counter() - t0)
        if stored:
            store.save_result(folder, tkey, res.to_dict())
        return res, True

    if not stored:
        return run()
    with store.lock(folder, tkey):  # a second process waits here, then reads the result
        return run()


@dataclass(frozen=True)
class SearchSummary(ResultMixin):
    """What one side's searches did: targets searched now and read back from the store."""

    label: str
    n_targets: int
    searched: int
    reused: int
    seconds: float
    extra: dict = field(default_factory=dict)


def search_sides(
    model: LoadedModel,
    sides: dict[str, Sequence[tuple[str, str, Sequence[int]]]],
    *,
    criterion: Criterion | str,
    gcg: GCGSettings,
    lengths: LengthSearch,
    store_root: str | os.PathLike,
    progress: ProgressCallback | None = None,
    log: LogCallback | None = None,
) -> tuple[dict, dict, dict]:
    """The ACR search on every target of every side (``{"members": [(id, text, ids)], ...}``) with
    ``model`` (a :class:`memclaim.models.loader.LoadedModel`), stored under ``store_root``
    (:class:`ACRStore`; resumable). The weights load only when some target is not in the store.
    ``progress`` receives a :class:`memclaim.progress.ProgressEvent` per GCG step and per target
    (stage "acr", unit "targets"); ``log`` one line per prompt length tried.
    Returns (procedure, {side: [TargetResult]}, {side: SearchSummary}).

    >>> import memclaim.train
    >>> from memclaim.models import load_model
    >>> proc, res, summ = search_sides(load_model("toy"), {"members": [("m", "text", [300, 301, 302])],
    ...                                "controls": [("c", "text", [400, 401, 402])]}, criterion="argmax",
    ...                                gcg=GCGSettings(steps=5), lengths=LengthSearch(),
    ...                                store_root="acr-searches")  # doctest: +SKIP
    >>> summ["members"].searched  # doctest: +SKIP
    1
    """
    crit = Criterion.parse(criterion)
    store = ACRStore(store_root)
    procedure = acr_procedure(model, criterion=crit, gcg=gcg, lengths=lengths)
    prefix = list(model.sot_ids)
    holder: dict = {}

    def get_psm() -> PromptSearchModel:
        if "psm" not in holder:
            emit_log(log, f"loading {model.name} for the GCG search")
            holder["psm"] = PromptSearchModel(
                model.lm, model.tokenizer, token_filter=gcg.token_filter
            )
        return holder["psm"]

    results: dict = {}
    summaries: dict = {}
    with store.writing():  # every write below happens under the writers' lock (temp-file cleanup)
        folder = store.procedure_folder(procedure)
        for label, rows in sides.items():
            results[label], summaries[label] = _search_side(
                label,
                rows,
                crit=crit,
                gcg=gcg,
                lengths=lengths,
                store=store,
                folder=folder,
                prefix=prefix,
                get_psm=get_psm,
                model=model,
                progress=progress,
                log=log,
            )
    return procedure, results, summaries


def _search_side(
    label: str,
    rows,
    *,
    crit: Criterion,
    gcg: GCGSettings,
    lengths: LengthSearch,
    store: ACRStore,
    folder: Path,
    prefix: list,
    get_psm,
    model,
    progress,
    log,
) -> tuple[list, SearchSummary]:
    """One side of :func:`search_sides`: (results, summary)."""
    t0 = time.perf_counter()
    fresh_count = 0
    out_rows = []
    with Reporter(
        progress, stage="acr", label=f"ACR search: {label}", total=len(rows), unit="targets"
    ) as rep:
        for i, (rid, text, ids) in enumerate(rows):

            def on_step(step, loss, _i=i, _rid=rid):
                rep.update(_i, target=_rid, step=step, loss=loss)

            def on_length(n, s, ok, _rid=rid):
                emit_log(
                    log,
                    f"{label} {_rid}: {n}-token prompt, {s} steps: {'met' if ok else 'not met'} "
                    f"({crit.spec})",
                )

            res, fresh = search_target(
                get_psm,
                record_id=rid,
                text=text,
                prefix_ids=prefix,
                target_ids=ids,
                criterion=crit,
                gcg=gcg,
                lengths=lengths,
                tokenizer=model.tokenizer,
                store=store,
                folder=folder,
                on_step=on_step,
                on_length=on_length,
            )
            fresh_count += int(fresh)
            out_rows.append(res)
            rep.update(i + 1, target=rid)
    return out_rows, SearchSummary(
        label, len(rows), fresh_count, len(rows) - fresh_count, time.perf_counter() - t0
    )
