"""Scoring runs: windows -> items -> work units -> engine -> store, resumable at any point.

The driver writes the run description first, then scores the units that are not yet in the
store, writing each unit atomically and then the manifest. Killing it (even ``kill -9``) and
re-running the same command finishes the rest, loses nothing and duplicates nothing; a finished
run re-run does no model work (the weights are not even loaded).
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..decoding import Policy, parse_policies
from ..errors import DomainError, InputError, StoreError
from ..fsutil import file_lock
from ..jsonutil import ResultMixin
from ..models.loader import config_max_positions
from ..procedure import ModelIdentity, NearVerbatim, Procedure, WindowSpec
from ..progress import LogCallback, ProgressCallback, Reporter
from ..runtime import BackendSpec, Runtime
from ..store.store import WRITERS_LOCK, ScoreStore, run_id_of
from .backends import (
    ScoringJob,
    default_stats,
    describe_model_of,
    make_backend,
)
from .engine import StatSet, TeacherForcingEngine, available_memory, run_stats
from .local_backend import LocalBackend, score_unit
from .nearverbatim import (
    near_verbatim_columns,
    near_verbatim_cost_message,
    normalize_near_verbatim,
    nv_column,
)
from .prompts import PromptRule
from .tables import SERVED_COLUMNS, WINDOW_BATCH, _window_batches, write_results
from .units import UnitReceipt, WindowIndex, WorkUnit, item_key

# moved out of this module by issue 26 (item 3: the runner keeps only the run), importable from
# here as before: the local backend (scoring/local_backend.py), the statistic spec
# (scoring/engine.py), the near-verbatim settings (scoring/nearverbatim.py) and result writing
# (scoring/tables.py)
__all__ = [
    "LocalBackend",
    "RunRequest",
    "RunSummary",
    "SERVED_COLUMNS",
    "WINDOW_BATCH",
    "build_procedure",
    "described",
    "index_windows",
    "near_verbatim_columns",
    "near_verbatim_cost_message",
    "normalize_near_verbatim",
    "numerics_drift",
    "nv_column",
    "run_environment",
    "run_scoring",
    "run_stats",
    "score_unit",
    "scoring_pairs",
    "store_procedure_key",
    "write_results",
]
if TYPE_CHECKING:  # the annotations' names only
    from ..models.loader import LoadedModel
    from ..text.windows import WindowSet


@dataclass(frozen=True)
class RunSummary(ResultMixin):
    store: str
    run_id: str
    procedure_key: str
    n_windows: int
    n_items: int
    n_units: int
    units_scored: int
    units_reused: int
    skipped_short: int
    skipped_empty: int
    seconds: float
    windows_per_second: float
    model_loaded: bool
    near_ties: int
    backend: str = "local"
    backend_stats: dict = field(default_factory=dict)
    device: str = "cpu"  # the first compute device of the run (models/placement.py)
    dtype: str = (
        "float32"  # the body's dtype (the unembedding and log-softmax are float32 or better)
    )
    device_class: str = "cpu"
    # a half-precision body's drift from float32 on a sample of the scored windows
    # (:func:`numerics_drift`); None for a float32/float64 body
    numerics_drift: dict | None = None


def build_procedure(
    model: LoadedModel,
    *,
    policies: Sequence[Policy],
    prefix_tokens: int | None,
    suffix_tokens: int | None,
    prompt_rule: PromptRule,
    near_verbatim: dict | None = None,
    windows: dict | None = None,
    device_class: str | None = None,
    describe_model: Callable[[dict], dict] | None = None,
) -> Procedure:
    """The scoring procedure of a run ([EM] Def. B.2): the model (name, fingerprint, dtype, device
    class), start of text, policies, window lengths, prompt rule and near-verbatim settings; its
    key names the store's units. ``describe_model``: a backend's rewrite of the model record (a
    served model's: the tokenizer and the server's identity instead of a weights fingerprint).

    >>> p = build_procedure(load_model("toy"), policies=parse_policies(["full", "greedy"]), prefix_tokens=8,
    ...                     suffix_tokens=8, prompt_rule=PromptRule())  # doctest: +SKIP
    >>> p.key[:12], p.model.device_class  # doctest: +SKIP
    ('b329182bc562', 'cpu')
    """
    spec = WindowSpec(
        prefix_tokens=prefix_tokens, suffix_tokens=suffix_tokens, fields=windows is not None
    )
    procedure = Procedure(
        policies=tuple(p.spec for p in policies),
        windows=spec,
        prompt=prompt_rule,
        near_verbatim=NearVerbatim.from_dict(near_verbatim),
    ).bind(model, device_class=device_class)
    return described(procedure, describe_model)


def described(procedure: Procedure, describe_model: Callable[[dict], dict] | None) -> Procedure:
    """``procedure`` with its model record rewritten by a backend's ``describe_model`` (the
    optional member of :class:`memclaim.scoring.backends.Backend`; None: as it is).

    >>> described(Procedure(), None) == Procedure()
    True
    """
    if describe_model is None or procedure.model is None:
        return procedure
    return dataclasses.replace(
        procedure, model=ModelIdentity.from_dict(describe_model(procedure.model.to_dict()))
    )


def run_environment(model: LoadedModel, procedure: Procedure) -> dict:
    """What computed a run, for its record: torch, CUDA and transformers versions, the device,
    the GPU names and, for a device map, how many modules each device held. Torch is imported
    only if it is already (a run whose units are all stored loads no weights).

    >>> run_environment(m, procedure)  # doctest: +SKIP
    {'python': '3.11.7', 'device_class': 'cpu', 'device': 'cpu', 'torch': '2.13.0+cpu', 'cuda': None, 'transformers': '5.24.0'}
    """
    import platform
    import sys

    env = {"python": platform.python_version(), "device_class": procedure.device_class}
    placement = getattr(model, "placement_record", None)
    if callable(placement):
        env.update(placement())
    env.setdefault("device", env["device_class"])
    torch = sys.modules.get("torch")
    if torch is not None:
        env["torch"] = torch.__version__
        env["cuda"] = torch.version.cuda  # None on a CPU build
        if env["device_class"] == "cuda" and torch.cuda.is_available():
            env["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    tf = sys.modules.get("transformers")
    if tf is not None:
        env["transformers"] = tf.__version__
    return env


# How many scored windows the half-precision drift is measured on (a few seconds of float32 work).
DRIFT_SAMPLE = 8


def numerics_drift(
    model: LoadedModel,
    units: Sequence[WorkUnit],
    policies: Sequence[Policy],
    *,
    sample: int = DRIFT_SAMPLE,
) -> dict | None:
    """A bfloat16/float16 body's drift from float32 ([EM] Def. B.2: the dtype is part of the
    procedure, so this is what changing it does to the numbers): the first ``sample`` scored
    windows scored again by a float32 copy of the model, when that copy fits in the memory of
    the device (else a record saying why not). Reports per policy the largest and the mean
    |delta log q| per target token, and how many greedy flags differ. None for a float32+ body.

    >>> numerics_drift(load_model("toy"), units, parse_policies(["full"])) is None  # float32  # doctest: +SKIP
    True
    """
    dtype = str(getattr(model, "dtype", "float32"))
    if (
        dtype not in ("bfloat16", "float16")
        or not hasattr(model, "path")
        or getattr(model, "path", None) is None
    ):
        return None
    import dataclasses

    import torch

    items = []
    for u in units:  # only the first units' items are made (a book's units are made on demand)
        items.extend(u.items)
        if len(items) >= sample:
            break
    items = items[:sample]
    if not items:
        return None
    lm = model.lm
    n_params = sum(p.numel() for p in lm.model.parameters())
    need = 4 * n_params
    free = available_memory(lm.device)
    record = {
        "dtype": dtype,
        "reference": "float32",
        "windows": len(items),
        "device": str(lm.device),
    }
    if getattr(model, "device_map", None) is not None:
        record.update(
            measured=False,
            reason="the model is loaded with a device map (sharded or offloaded): memclaim "
            "does not load a float32 copy beside it",
        )
        return record
    if need > 0.8 * free:
        record.update(
            measured=False,
            reason=f"the float32 copy ({need / 2**20:,.0f} MiB) does not fit the free memory "
            f"({free / 2**20:,.0f} MiB free on {lm.device})",
        )
        return record
    ref = dataclasses.replace(model, dtype="float32", _lm=None)
    try:
        ref_engine = TeacherForcingEngine(ref.lm, policies)
        engine = TeacherForcingEngine(lm, policies)
        prompts = [list(it.prompt) for it in items]
        suffixes = [list(it.suffix) for it in items]
        got, want = [], []
        for p, sfx in zip(prompts, suffixes):  # one window at a time: windows differ in length
            got.append(engine.score_batch([p], [sfx]))
            want.append(ref_engine.score_batch([p], [sfx]))
    finally:
        ref = ref_engine = None  # noqa: F841 - the float32 copy goes now, not at the end of the run
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    per_policy = {}
    for j, pol in enumerate(policies):
        d = [
            abs(float(g.logq[0, j]) - float(w.logq[0, j])) / len(s)
            for g, w, s in zip(got, want, suffixes)
            if np.isfinite(g.logq[0, j]) and np.isfinite(w.logq[0, j])
        ]
        inf_diff = sum(
            np.isfinite(g.logq[0, j]) != np.isfinite(w.logq[0, j]) for g, w in zip(got, want)
        )
        per_policy[pol.spec] = {
            "max_abs_per_token": max(d) if d else None,
            "mean_abs_per_token": float(np.mean(d)) if d else None,
            "finite_vs_zero_probability_disagreements": int(inf_diff),
        }
    greedy = sum(bool(g.greedy_match[0]) != bool(w.greedy_match[0]) for g, w in zip(got, want))
    record.update(
        measured=True,
        per_policy=per_policy,
        greedy_flags_differing=int(greedy),
        unit="nats per target token, |log q(bf16) - log q(float32)| / suffix length",
    )
    return record


def _context_limit(model):
    limit = getattr(model, "max_positions", None)
    if limit is None and getattr(model, "path", None) is not None:
        limit = config_max_positions(model.path)
    return limit


def _checked_items(model, w, prompt_rule: PromptRule, label: str, limit):
    """One window's (prompt, target) items, refused (InputError naming the window) where the
    model cannot score them."""
    out = prompt_rule.items(w, model.tokenizer, model.sot_ids)
    for prompt, target in out:
        if not prompt:
            raise InputError(
                f"{label}window {w.window_id!r} has an empty prompt (no prefix tokens and no "
                f"start-of-text token; start-of-text rule {model.sot.rule!r}): the model has "
                "nothing to predict the first suffix token from",
                hint="use --prefix-tokens >= 1, or a start-of-text token (--sot auto/bos/eos)",
            )
        n = len(prompt) + len(target)
        if limit is not None and n > limit:
            raise InputError(
                f"{label}window {w.window_id!r} needs {n} positions (prompt {len(prompt)} + target "
                f"{len(target)} tokens), more than the context of {model.name} "
                f"({limit} positions)",
                hint="use a shorter --prefix-tokens/--suffix-tokens (or prompt template), or a model "
                "with a longer context",
            )
    return out


def scoring_pairs(
    model: LoadedModel, window_set: WindowSet, prompt_rule: PromptRule, *, what: str | None = None
) -> tuple:
    """The (prompt ids, target ids) pairs of every window under ``prompt_rule`` (one per prompt,
    each prompt with its own target ids: scoring/prompts.py), each window's item keys and target
    ids, after checking that the model can score them: every prompt has at least one token (the
    first target token is predicted from it), no template cuts a token in two (PromptRule.items
    refuses it), and no prompt + target is longer than the model's context. Raises
    :class:`InputError` naming the window otherwise, before any work; ``population`` and
    ``census`` call it (or :func:`index_windows`, which holds no token lists) for every input
    before scoring the first.

    >>> pairs, window_items, window_targets = scoring_pairs(m, ws, PromptRule(), what="--members")  # doctest: +SKIP
    """
    limit = _context_limit(model)
    label = f"{what}: " if what else ""
    pairs, window_items, window_targets = [], [], []
    for w in window_set.windows:
        keys, targets = [], []
        for prompt, target in _checked_items(model, w, prompt_rule, label, limit):
            pairs.append((prompt, target))
            keys.append(item_key(prompt, target))
            targets.append(list(target))
        window_items.append(keys)
        window_targets.append(targets)
    return pairs, window_items, window_targets


def index_windows(
    model: LoadedModel, window_set: WindowSet, prompt_rule: PromptRule, *, what: str | None = None
) -> WindowIndex:
    """The checks of :func:`scoring_pairs` in one streaming pass, keeping per window only its item
    keys and lengths (:class:`~memclaim.scoring.units.WindowIndex`): a whole book's windows
    (lazy, :class:`~memclaim.text.windows.DocumentWindows`) are never all in memory.

    >>> index = index_windows(load_model("toy"), ws, PromptRule())  # 2 windows  # doctest: +SKIP
    >>> index.n_windows, index.n_prompts, index.n_items  # doctest: +SKIP
    (2, 1, 2)
    """
    limit = _context_limit(model)
    label = f"{what}: " if what else ""
    W = len(window_set)
    keys = plen = tlen = None
    for i, w in enumerate(window_set.windows):
        items = _checked_items(model, w, prompt_rule, label, limit)
        if keys is None:
            keys = np.empty((W, len(items)), dtype="S16")  # the 16 bytes of each item key
            plen = np.empty((W, len(items)), dtype=np.int32)
            tlen = np.empty((W, len(items)), dtype=np.int32)
        for j, (prompt, target) in enumerate(items):
            keys[i, j] = bytes.fromhex(item_key(prompt, target))
            plen[i, j], tlen[i, j] = len(prompt), len(target)
    if keys is None:
        raise InputError(
            "no windows to score", hint="pass texts at least prefix + suffix tokens long"
        )
    return WindowIndex(
        window_set, lambda w: prompt_rule.items(w, model.tokenizer, model.sot_ids), keys, plen, tlen
    )


@dataclass(frozen=True)
class RunRequest:
    """What a scoring run records and reports beside its procedure and runtime: the run's
    ``label`` and ``inputs`` (their hashes and options, recorded with the run), the texts
    skipped as empty before windows were cut, the statistics to store (``stats``: a
    :class:`StatSet`, a spec such as ``"census"`` or names; None: every statistic), and the
    ``progress`` and ``log`` callbacks (None: silent).

    >>> RunRequest(label="members").stats is None
    True
    """

    label: str = "windows"
    inputs: dict | None = None
    skipped_empty: int = 0
    stats: StatSet | str | Iterable[str] | None = None
    progress: ProgressCallback | None = None
    log: LogCallback | None = None


# the keywords run_scoring still takes one by one (its signature before issue 26), by value
_PROCEDURE_KEYWORDS = ("policies", "prefix_tokens", "suffix_tokens", "prompt_rule", "near_verbatim")
_RUNTIME_KEYWORDS = ("batch_size", "unit_size", "backend")
_RUN_KEYWORDS = ("label", "inputs", "skipped_empty", "stats", "progress", "log")


def _split_keywords(options: dict) -> tuple[dict, dict, dict]:
    unknown = sorted(set(options) - set(_PROCEDURE_KEYWORDS + _RUNTIME_KEYWORDS + _RUN_KEYWORDS))
    if unknown:
        import difflib

        names = _PROCEDURE_KEYWORDS + _RUNTIME_KEYWORDS + _RUN_KEYWORDS
        close = difflib.get_close_matches(unknown[0], names, n=1, cutoff=0.6)
        raise InputError(
            f"run_scoring() got an unknown keyword {unknown[0]!r}",
            hint=(f"did you mean {close[0]}? " if close else "") + "it takes procedure=, runtime=, "
            "out_dir=, run= and the keywords " + ", ".join(names),
        )
    return tuple(
        {k: options[k] for k in group if k in options}
        for group in (_PROCEDURE_KEYWORDS, _RUNTIME_KEYWORDS, _RUN_KEYWORDS)
    )


def _run_procedure(window_set: WindowSet, procedure: Procedure | None, given: dict) -> Procedure:
    """The run's unbound (or bound) procedure: ``procedure``, or one made from the keywords;
    its window lengths are those the windows were cut with (``window_set.spec``)."""
    spec = getattr(window_set, "spec", None)
    if procedure is not None:
        if given:
            raise InputError(
                f"run_scoring() got procedure= and its parts {', '.join(sorted(given))}",
                hint="pass one: the Procedure, or its keywords",
            )
        if not isinstance(procedure, Procedure):
            raise InputError(
                f"procedure= takes a memclaim Procedure, got {type(procedure).__name__}",
                hint="memclaim.procedure.Procedure.options(policies=[...], ...)",
            )
    else:
        if "policies" not in given:
            raise InputError(
                "run_scoring() needs procedure= or policies=",
                hint="e.g. policies=parse_policies(['full'])",
            )
        fields = getattr(window_set, "cut", None) is not None
        lengths = {k: given[k] for k in ("prefix_tokens", "suffix_tokens") if k in given}
        if spec is not None:  # omitted lengths are the windows' own
            lengths = {
                "prefix_tokens": spec.prefix_tokens,
                "suffix_tokens": spec.suffix_tokens,
                **lengths,
            }
        procedure = Procedure(
            policies=given["policies"],
            windows=WindowSpec(**lengths, fields=fields),
            prompt=given.get("prompt_rule") or PromptRule(),
            near_verbatim=NearVerbatim.from_dict(
                normalize_near_verbatim(given.get("near_verbatim"), suffix_tokens=0)
            ),
        )
    w = procedure.windows
    if spec is not None and spec.lengths != w.lengths:
        raise InputError(
            f"the windows were cut with {spec.describe()}, but the run would record prefix_tokens="
            f"{w.prefix_tokens}, suffix_tokens={w.suffix_tokens}",
            hint="record the lengths the windows were cut with (window_set.spec)",
        )
    return procedure


def run_scoring(
    model: LoadedModel,
    window_set: WindowSet,
    procedure: Procedure | None = None,
    runtime: Runtime | None = None,
    *,
    out_dir: str | Path,
    run: RunRequest | None = None,
    **keywords: object,
) -> RunSummary:
    """Score ``window_set`` with ``model`` (a LoadedModel) under ``procedure`` (a
    :class:`memclaim.procedure.Procedure`, unbound or bound to this model; its window lengths
    must be those the windows were cut with) as ``runtime`` says (a
    :class:`memclaim.runtime.Runtime`: batch and unit sizes, the backend; default: this process)
    into the store at ``out_dir``. ``run``: the run's label, inputs, statistics and callbacks
    (:class:`RunRequest`).

    The keywords of the signature before issue 26 still work, by value: ``policies``,
    ``prefix_tokens``, ``suffix_tokens`` (default: the windows' own), ``prompt_rule`` and
    ``near_verbatim`` instead of ``procedure``; ``batch_size``, ``unit_size`` and ``backend`` (a
    backend object) over ``runtime``; ``label``, ``inputs``, ``skipped_empty``, ``stats``,
    ``progress`` and ``log`` over ``run``.

    ``stats``: the statistics to compute and store (default every statistic, as ``score`` and
    ``population`` keep them for the audits); log q, the greedy flag and the margin are always
    included (:func:`run_stats`). A stored unit holding fewer statistics than asked is scored
    again. Near-verbatim settings in the procedure add the certified near-verbatim lower
    bounds ([EM] App. B.1 Eq. 2) for every window and policy. ``progress`` receives
    :class:`memclaim.progress.ProgressEvent` values (stage ``"score"``, unit windows: items
    scored, extra ``run_id`` and ``units``); ``log`` receives one-line notes (a concurrent
    writer, the near-verbatim cost). Both None: silent. ``progress=False`` (the former boolean
    option) is read as None; the library draws no bars itself. :func:`memclaim.score` is the
    public way in (it reads the inputs and cuts the windows).

    >>> from memclaim.models import load_model                                       # doctest: +SKIP
    >>> from memclaim.text.windows import passage_windows                            # doctest: +SKIP
    >>> m = load_model("toy")                                                        # doctest: +SKIP
    >>> ws = passage_windows(records, m.tokenizer, prefix_tokens=16, suffix_tokens=16)  # doctest: +SKIP
    >>> s = run_scoring(m, ws, Procedure(policies=["full"], windows=ws.spec), out_dir="runs/toy")  # doctest: +SKIP
    >>> s.n_windows, s.units_scored                                                  # doctest: +SKIP
    (40, 1)
    """
    proc_kw, rt_kw, run_kw = _split_keywords(keywords)
    run = RunRequest(**{**(vars(run) if run is not None else {}), **run_kw})
    progress = run.progress
    if progress is False:
        progress = None
    elif progress is not None and (progress is True or not callable(progress)):
        raise DomainError(
            f"progress must be a callback taking a memclaim.progress.ProgressEvent, or None; got "
            f"{progress!r}",
            hint="pass memclaim.cli.progress.progress_bar() for a console bar, your own "
            "function, or None",
        )
    t0 = time.perf_counter()
    # option domains fail before the store is touched
    runtime = Runtime.coerce(
        runtime, **{k: v for k, v in rt_kw.items() if not (k == "backend" and v is None)}
    )
    procedure = _run_procedure(window_set, procedure, proc_kw)
    policies = parse_policies(procedure.policies)
    prompt_rule = PromptRule.of(procedure.prompt)
    near_verbatim = None if procedure.near_verbatim is None else procedure.near_verbatim.to_dict()
    unit_size = runtime.unit_size
    stats = run.stats
    backend = None
    if not (
        isinstance(runtime.backend, BackendSpec)
        and runtime.backend.kind == "local"
        and not runtime.backend.given()
    ):
        backend = make_backend(model, policies, runtime, log=run.log)  # a ready object: checked
    if stats is None and backend is not None:
        stats = default_stats(backend)  # a served model: every statistic its answers give
    procedure = procedure.bind(
        model, device_class=None if backend is None else backend.device_class
    )
    if backend is not None:
        procedure = described(procedure, describe_model_of(backend))
        # a backend that cannot score this procedure says why, before the store is touched
        why = backend.supports(procedure, run_stats(stats))
        if why:
            raise InputError(
                f"the {backend.name!r} backend cannot score this procedure: {why}",
                hint="drop what it cannot compute, or use another backend (--backend local scores "
                "every procedure; docs/served.md)",
            )
    # every window's (prompt, target) items before the store is touched: a template that cuts a
    # token in two, an empty prompt or a window longer than the context is refused first; one
    # streaming pass that keeps only keys and lengths (a book's windows are made on demand)
    index = index_windows(model, window_set, prompt_rule)
    if (
        backend is None
        and not getattr(model, "weights_loaded", True)
        and _work_left(
            out_dir, procedure, model, index, unit_size=unit_size, needs=run_stats(stats).spec
        )
    ):
        # the weights load (and a folder whose weights do not match its config is refused:
        # models.loader.check_loading_info) before the store is touched
        _ = model.lm
    root = Path(out_dir)
    made = _first_missing(
        root
    )  # the first folder of out_dir's path this run creates (None: it exists)
    fresh = made is not None or (root.is_dir() and not any(root.iterdir()))
    store = ScoreStore(out_dir)
    try:
        with contextlib.ExitStack() as held:
            held.enter_context(
                store.writer()
            )  # shared with other writers; alone, it first clears dead writers' temps
            return _run_locked(
                store,
                held,
                model,
                procedure,
                index,
                window_set,
                t0=t0,
                policies=policies,
                label=run.label,
                inputs=run.inputs,
                batch_size=runtime.batch_size,
                unit_size=unit_size,
                progress=progress,
                backend=backend,
                skipped_empty=run.skipped_empty,
                near_verbatim=near_verbatim,
                log=run.log,
                stats=stats,
                prompt_rule=prompt_rule,
            )
    except Exception:
        if fresh:
            _remove_unused_store(store, made)
        raise


def _first_missing(path: Path) -> Path | None:
    """The outermost folder of ``path`` that does not exist yet (``path`` itself or a parent), or None."""
    path = path.absolute()
    if path.exists():
        return None
    while not path.parent.exists() and path.parent != path:
        path = path.parent
    return path


def _remove_unused_store(store: ScoreStore, made: Path | None) -> None:
    """After a failed run into a store this run created (the folder was new or empty): remove
    what it wrote, unless another writer is live or a unit file holds finished work (a later run
    resumes from it); then the folders this run created (``made`` and those below it), where
    nothing else was put. A folder that existed before is left, empty."""
    root = store.root
    try:
        with file_lock(root / WRITERS_LOCK, blocking=False) as alone:
            if not alone or any((root / "units").rglob("*.parquet")):
                return
            for entry in list(root.iterdir()):
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry)
                else:
                    entry.unlink()
        p, top = root.absolute(), None if made is None else made.absolute()
        while top is not None:
            p.rmdir()  # OSError where something else lies there: it stays
            if p == top:
                break
            p = p.parent
    except OSError:
        pass  # best effort: what is left is a store that a later run resumes


def _work_left(
    out_dir, procedure: Procedure, model, index: WindowIndex, *, unit_size: int, needs: str
) -> bool:
    """Whether a run would score anything: read-only, from the store's manifest as it is (no
    store, or one that cannot be read: yes; the run itself then says why). A run whose units are
    all stored loads no weights."""
    root = Path(out_dir)
    if not (root / "manifest.json").is_file():
        return True
    try:
        store = ScoreStore(root, create=False)
    except StoreError:
        return True
    key = procedure.key
    if key not in store.manifest["procedures"]:
        legacy = (
            tuple(model.legacy_fingerprints())
            if store.has_legacy_procedures() and hasattr(model, "legacy_fingerprints")
            else ()
        )
        key = store.find_procedure(procedure, legacy) or key
    return any(
        not store.unit_done(key, u.unit_id, needs=needs)
        for u in index.units(key, unit_size=unit_size)
    )


def _windows_of(index: WindowIndex, window_set, key: str) -> str:
    """The windows holding item ``key`` (hex), for an error message: "window 'a#0'" (and how many others)."""
    k = int(np.searchsorted(index.uniq, bytes.fromhex(key)))
    if k >= len(index.uniq) or index.key_str(k) != key:
        return f"item {key[:12]}"
    ws = np.flatnonzero((index.inverse == k).any(axis=1))
    if not len(ws):
        return f"item {key[:12]}"
    first = window_set.windows[int(ws[0])].window_id
    more = (
        f" (and {len(ws) - 1} other window{'s' if len(ws) > 2 else ''} with the same text)"
        if len(ws) > 1
        else ""
    )
    return f"window {first!r}{more}"


def store_procedure_key(store: ScoreStore, procedure: Procedure, model: LoadedModel) -> str:
    """The key under which ``store`` holds ``procedure``'s units. A store written before the
    model fingerprint changed (schema 1, fingerprint scheme 1) holds the same procedure under
    the old fingerprint: its key is reused, so a run started then resumes without rescoring,
    and the store learns which current fingerprint the old one names. A procedure recorded by
    another memclaim version (the version is part of the key) is reused the same way
    (:meth:`~memclaim.store.store.ScoreStore.find_procedure`).

    >>> store_procedure_key(ScoreStore("runs/toy"), procedure, m) == procedure.key  # a current store  # doctest: +SKIP
    True
    """
    key = procedure.key
    legacy = ()
    if store.has_legacy_procedures() and hasattr(model, "legacy_fingerprints"):
        legacy = tuple(model.legacy_fingerprints())
        for rec in store.manifest["procedures"].values():
            fp = (rec.get("model") or {}).get("fingerprint")
            if fp in legacy and "fingerprint_scheme" not in rec.get("model", {}):
                store.learn_fingerprint(fp, model.fingerprint, model.fingerprint_scheme)
    if key not in store.manifest["procedures"]:
        # the same procedure recorded by an earlier memclaim version, or under the old fingerprint
        old = store.find_procedure(procedure, legacy)
        if old is not None:
            return old
    return store.add_procedure(procedure)


MANIFEST_EVERY_SECONDS = (
    2.0  # unit files are adopted after a kill: the manifest need not follow each unit
)


def _window_ids(window_set):
    if hasattr(window_set, "window_ids"):
        return window_set.window_ids()
    return (w.window_id for w in window_set.windows)


def _run_id(pkey: str, label: str, units, window_set) -> str:
    """The run's id (:func:`~memclaim.store.store.run_id_of`), its windows' ids streamed."""
    return run_id_of(pkey, label, (u.unit_id for u in units), _window_ids(window_set))


def _run_locked(
    store,
    held,
    model,
    procedure,
    index: WindowIndex,
    window_set,
    *,
    t0,
    policies,
    label,
    inputs,
    batch_size,
    unit_size,
    progress,
    backend,
    skipped_empty,
    near_verbatim,
    log,
    stats=None,
    prompt_rule=None,
) -> RunSummary:
    known_procedures = set(store.manifest["procedures"])
    pkey = store_procedure_key(store, procedure, model)
    units = index.units(pkey, unit_size=unit_size)
    run_id = _run_id(pkey, label, units, window_set)
    # a run this command starts and that fails before its first unit is stored is taken back
    # (store.forget_run): the store is left as it was, with no unfinished run nobody asked for
    new_run = (
        run_id not in store.manifest["runs"] and not (store.run_dir(run_id) / "run.json").exists()
    )
    scored = 0
    try:
        run = {
            "run_id": run_id,
            "label": label,
            "procedure": pkey,
            "created": time.time(),
            "n_windows": len(window_set),
            "n_items": index.n_items,
            "units": [u.unit_id for u in units],
            "inputs": inputs or {},
            "skipped_short": window_set.skipped_short,
            "skipped_short_ids": list(window_set.skipped_ids)[:1000],
            "skipped_empty": skipped_empty,
            "total_chars": window_set.total_chars,
            "batch_size": batch_size,
            "unit_size": unit_size,
            "stats": run_stats(stats).spec,
            "environment": run_environment(model, procedure),
        }
        if not held.enter_context(store.run_lock(run_id, blocking=False)):
            # two copies of one command: wait for the other, then score only what it left undone
            if log is not None:
                log(
                    f"another memclaim process is scoring run {run_id} into {str(store.root)!r}; waiting for it"
                )
            held.enter_context(store.run_lock(run_id))
            store.refresh()
        store.remove_temps(
            store.run_dir(run_id)
        )  # only the run lock's holder writes there: these are dead writers'
        store.write_run_batches(run_id, run, _window_batches(window_set, index, label))
        store.adopt_orphans(pkey, [u.unit_id for u in units])
        stat_set = run_stats(stats)
        needs = stat_set.spec
        for u in units:  # a unit re-scored with more statistics after the last manifest write
            if u.unit_id in store.manifest["units"] and not store.unit_done(
                pkey, u.unit_id, needs=needs
            ):
                store.refresh_unit(pkey, u.unit_id)
        # a unit stored with fewer statistics than this run needs (a census-only unit, for an audit)
        # is scored again, with these statistics, and its file replaced
        todo = [u for u in units if not store.unit_done(pkey, u.unit_id, needs=needs)]
        # a unit file that appeared since the first pass (a dead driver's Ray workers still
        # finishing) counts as done above: record it as well
        todo_ids = {u.unit_id for u in todo}
        store.adopt_orphans(pkey, [u.unit_id for u in units if u.unit_id not in todo_ids])
        store.write_manifest()
        reused = len(units) - len(todo)
        if near_verbatim and todo and log is not None:
            log(near_verbatim_cost_message(todo, near_verbatim, len(policies), model))
        if backend is None:
            backend = LocalBackend(
                lambda: model.lm,
                policies,
                batch_size=batch_size,
                near_verbatim=near_verbatim,
                stats=stat_set,
            )
        total = sum(u.n_items for u in todo)
        # progress per batch (labelled: windows done/total, rate, ETA; units done/total for the
        # "re-run to resume (N of M units done)" note): extra "units_done" counts every unit stored
        # for this run (reused ones included), "units_total" the run's units
        # "items_reused": windows already in the store, so a resumed run counts the whole run's windows
        # as the units do (done = reused + scored this time, of all)
        bar = Reporter(
            progress,
            stage="score",
            label=f"scoring {label}",
            total=total,
            extra={
                "run_id": run_id,
                "units": len(todo),
                "units_total": len(units),
                "units_done": reused,
                "items_reused": sum(u.n_items for u in units) - total,
            },
        )
        scored = 0
        in_batches = [0]  # windows the backend reported by batch since its last unit (job.on_batch)

        def on_batch(n: int) -> None:
            in_batches[0] += n
            bar.advance(n, units_done=reused + scored)

        # the store goes with the job: a backend whose workers write unit files themselves needs it
        job = ScoringJob(procedure=procedure, stats=stat_set, store=store, on_batch=on_batch)
        t_score = time.perf_counter()
        last_manifest = time.perf_counter()
        try:
            for res in backend.run(todo, job):
                if isinstance(res, UnitReceipt):
                    if not store.unit_path(pkey, res.unit_id).exists():
                        raise StoreError(
                            f"a worker reported unit {res.unit_id[:12]} written, but it is not in "
                            f"{str(store.root)!r}",
                            hint="put the store on a filesystem every worker sees",
                        )
                    n_done = res.n_items
                else:
                    store.write_unit(res, where=lambda key: _windows_of(index, window_set, key))
                    n_done = len(res.item_keys)
                store.record_unit(
                    pkey,
                    res.unit_id,
                    n_done,
                    stats=stat_set.spec if isinstance(res, UnitReceipt) else res.stats,
                )
                scored += 1
                bar.extra["units_done"] = reused + scored  # the final event says it too
                # the unit file is on disk (atomic): a killed run adopts it, so the manifest is
                # rewritten at most every MANIFEST_EVERY_SECONDS (a book has thousands of units)
                if time.perf_counter() - last_manifest >= MANIFEST_EVERY_SECONDS:
                    store.write_manifest()
                    last_manifest = time.perf_counter()
                rest, in_batches[0] = n_done - in_batches[0], 0
                if (
                    rest > 0
                ):  # a backend that reports per unit (or a unit it did not report by batch)
                    bar.advance(rest, units_done=reused + scored)
                else:
                    bar.update(bar.done, units_done=reused + scored)
        finally:
            if scored:
                store.write_manifest()  # also on an interruption: what is done is recorded
            bar.close()
        n_scored_items = total
        elapsed_scoring = time.perf_counter() - t_score
        near = write_results(store, run_id, index)
        drift = None
        if scored and isinstance(backend, LocalBackend):
            drift = numerics_drift(model, todo, policies)
        return RunSummary(
            store=str(store.root),
            run_id=run_id,
            procedure_key=pkey,
            n_windows=len(window_set),
            n_items=index.n_items,
            n_units=len(units),
            units_scored=scored,
            units_reused=reused,
            skipped_short=window_set.skipped_short,
            skipped_empty=skipped_empty,
            seconds=time.perf_counter() - t0,
            windows_per_second=(n_scored_items / elapsed_scoring) if n_scored_items else 0.0,
            model_loaded=bool(getattr(model, "weights_loaded", True) or backend.weights_loaded),
            near_ties=near,
            backend=backend.name,
            backend_stats=backend.stats(),
            device=str(run["environment"].get("device", "cpu")),
            dtype=str(model.dtype),
            device_class=procedure.device_class,
            numerics_drift=drift,
        )
    except Exception:
        if new_run and scored == 0:
            store.forget_run(run_id, procedure_key=None if pkey in known_procedures else pkey)
        raise
