"""``memclaim.score``: texts + model + extraction procedure ([EM] Def. B.2) -> a durable score store.

Each window's prefix is the prompt (or the rendered prompt template), the suffix the target;
one teacher-forced pass stores log q under every policy ([EM] Eq. 1), the greedy-match flag and
per-token statistics: every statistic the engine computes (full-softmax log-probs, their mean
and std, ranks), so the store serves the audits as well as the claims (``memclaim census``
stores only what a census reads). The store resumes after any interruption, and re-running
finished work does no model work.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..claims.sampling import (
    ESTIMATE_FILE,
    ESTIMATE_KIND,
    SamplingRun,
    set_estimate,
    window_estimate,
)
from ..decoding import Policy
from ..errors import InputError
from ..fsutil import atomic_write_text
from ..jsonutil import read_json_object
from ..procedure import DEFAULT_POLICY
from ..progress import LogCallback, ProgressCallback
from ..report.core import Doc
from ..report.words import limit_note
from ..scoring.results import RunScores, load_run_scores
from ..scoring.runner import RunSummary, run_scoring, run_stats
from ..scoring.served.sampling import parse_estimate, sample_generations
from ..validate import batch_size as check_batch_size
from ..validate import integer
from ._common import (
    Result,
    WorkFolder,
    build_prompt_rule,
    check_limit,
    check_out,
    check_out_dir,
    copy_tree_into,
    cut_windows,
    jsonable,
    make_backend,
    near_verbatim_settings,
    one_policy,
    policies_of,
    set_threads,
    window_lengths,
)
from ._model import scoring_model
from ._public import public

if TYPE_CHECKING:  # the annotations' names only; nothing here is imported at run time
    import datasets
    import pandas
    import pyarrow
    import transformers

    from ..models.loader import LoadedModel
    from ._common import Document

__all__ = ["score", "ScoreResult", "EstimateResult"]


@dataclass(frozen=True, repr=False)
class ScoreResult(Result):
    """One scoring run: its summary (``summary``, what ``memclaim score --json`` prints), the store
    and run it lives in, and the policies scored. ``scores(policy)`` reads the window scores back
    (a :class:`~memclaim.scoring.results.RunScores`); ``to_pandas()`` is the run's table (one row
    per window); ``save(folder)`` copies the store (e.g. out of a temporary one).

    A result of ``score(..., out=None)`` owns its temporary store: it is deleted when the result
    (and every result derived from it) is garbage-collected."""

    summary: RunSummary
    policies: tuple[str, ...]
    near_verbatim: dict | None = None
    work: WorkFolder | None = field(default=None, repr=False, compare=False)
    inputs: dict = field(
        default_factory=dict, repr=False, compare=False
    )  # what was read (and any --limit)

    @property
    def limited(self) -> str | None:
        """What a ``limit`` run left out, in words (None for a run of the whole input)."""
        return limit_note([{**self.inputs, "role": "input"}])

    @property
    def store(self) -> str:
        return self.summary.store

    @property
    def run_id(self) -> str:
        return self.summary.run_id

    @property
    def temporary(self) -> bool:
        """Whether the store is a temporary folder (``out=None``)."""
        return self.work is not None and self.work.temporary

    def to_dict(self) -> dict:
        d = self.summary.to_dict()
        if self.limited:
            d["limited"] = self.limited
        return jsonable(d)

    def scores(
        self,
        policy: str | None = None,
        *,
        near_verbatim: int | None = None,
        suffix_tokens: int | None = None,
    ) -> RunScores:
        """The run's window scores under ``policy`` (default: the first policy scored)."""
        return load_run_scores(
            self.store,
            run=self.run_id,
            policy=policy or self.policies[0],
            near_verbatim=near_verbatim,
            suffix_tokens=suffix_tokens,
        )

    def to_pandas(self):
        """The run's scores.parquet as a pandas DataFrame: one row per window (ids, spans, texts,
        ``logq:<policy>`` for every policy, greedy match, near-tie, per-token arrays)."""
        return self.scores().table.to_pandas()

    def save(self, folder) -> dict:
        """Copy the store into ``folder`` (new or empty); returns {"store": folder}."""
        return {"store": str(copy_tree_into(Path(self.store), folder, what="score store"))}

    def __repr__(self) -> str:
        s = self.summary
        return (
            f"ScoreResult(run {s.run_id!r}, {s.n_windows} windows, policies {list(self.policies)}, store "
            f"{s.store!r}{' (temporary)' if self.temporary else ''})"
        )

    def _view(self):
        """The notebook view: what was scored, where, and how much work it took."""
        s = self.summary
        rows = [
            ("windows", f"{s.n_windows:,}"),
            ("policies", ", ".join(self.policies)),
            ("units", f"{s.n_units} ({s.units_scored} scored now, {s.units_reused} reused)"),
            ("skipped", f"{s.skipped_short} too short, {s.skipped_empty} empty"),
            ("store", s.store + (" (temporary: save(folder) keeps it)" if self.temporary else "")),
            ("run", s.run_id),
            ("procedure key", s.procedure_key[:16]),
            (
                "scores",
                f"{self.run_id}: scores(policy) for the window scores, to_pandas() for the table",
            ),
        ]
        return Doc("Scoring run").callout(repr(self), "result").table(["field", "value"], rows)


@public(renamed=dict(policy="policies"))
def score(
    model: str | os.PathLike | LoadedModel | transformers.PreTrainedModel | tuple,
    texts: str
    | os.PathLike
    | Sequence[str | Mapping]
    | pandas.DataFrame
    | pyarrow.Table
    | datasets.Dataset
    | None = None,
    *,
    document: str | os.PathLike | Document | None = None,
    stride: int | None = None,
    prefix_tokens: int | None = None,
    suffix_tokens: int | None = None,
    policies: Sequence[str] | str | None = (DEFAULT_POLICY,),
    prompt_templates: Sequence[str] = (),
    chat_template: bool = False,
    aggregate: str = "max",
    text_field: str | None = None,
    prefix_field: str | None = None,
    suffix_field: str | None = None,
    id_field: str | None = None,
    input_format: str | None = None,
    limit: int | None = None,
    near_verbatim: Sequence[int] = (),
    beams: Sequence[int] = (),
    out: str | os.PathLike | None = None,
    label: str | None = None,
    batch_size: int | str = 16,
    unit_size: int = 64,
    backend: str = "local",
    address: str | None = None,
    workers: int | None = None,
    gpus_per_worker: float = 0.0,
    threads_per_worker: int = 1,
    url: str | None = None,
    api_key_env: str | None = None,
    api_key_file: str | os.PathLike | None = None,
    served_model: str | None = None,
    max_concurrency: int | None = None,
    served_bounds: bool = False,
    dtype: str | None = None,
    device: str | None = None,
    device_map: str | None = None,
    max_memory: Mapping | Sequence[str] | str | None = None,
    offload_folder: str | os.PathLike | None = None,
    sot: str | None = None,
    allow_pickle: bool = False,
    trust_remote_code: bool = False,
    threads: int | None = None,
    stats: str | Sequence[str] | None = None,
    estimate: str | None = None,
    seed: int = 0,
    progress: bool | ProgressCallback = True,
    log: LogCallback | None = None,
) -> ScoreResult | EstimateResult:
    """Score texts under an extraction procedure ([EM] Def. B.2) into a durable store
    (``memclaim score``).

    ``model``: a name, a path, a model from :func:`memclaim.load_model`, or a transformers model
    with its tokenizer as the pair ``(hf_model, tokenizer)``. ``texts``: a passage file (JSONL/TXT/CSV/
    Parquet/Arrow) or a ``datasets`` folder (save_to_disk), a list of strings or of records (dicts with
    ``text``/``id``, or the
    ``prefix_field``/``suffix_field`` pair), a pandas DataFrame, a pyarrow Table or a
    ``datasets.Dataset``; or ``document`` (a path or :class:`memclaim.Document`) cut into sliding
    windows every ``stride`` tokens. Windows are ``prefix_tokens`` + ``suffix_tokens`` tokens
    (default 50 + 50; with prefix/suffix fields: the whole fields). ``policies``: decoding
    policies ('full', 'greedy', 'temperature:T', 'top-k:K', 'top-p:P', combinations).
    ``near_verbatim``: token edit distances for the certified near-verbatim lower bound ([EM]
    App. B.1) with beam widths ``beams`` (default 16). ``limit``: score only the first N texts (or
    the document's first N windows), for a quick look at a big input; the run's label gains
    ``[:N]`` and its inputs record the limit. ``out``: the store folder (created;
    re-running resumes, finished work is reused); ``out=None`` scores into a **temporary** store
    that lives as long as the result (``save(folder)`` keeps it). ``progress``/``log``:
    callbacks (:mod:`memclaim.progress`); None is silent.

    ``device``, ``device_map``, ``max_memory``, ``offload_folder``, ``dtype``: where and in what
    dtype the model runs (:func:`memclaim.load_model`; default: the first GPU in bfloat16, else
    the CPU in float32); the device class and dtype are part of the procedure.
    ``batch_size``: windows per forward pass, or ``"auto"`` (on a GPU the largest batch whose
    activations fit 80% of free memory, on the CPU 16; CPU scores are the same at every size).
    ``stats``: the statistics to compute and store (None: every one the backend computes, i.e.
    ``"all"`` for a local model and what a served model's answers give; ``"all"``; ``"census"``;
    names joined with ``+`` or a list of names; a :class:`memclaim.scoring.engine.StatSet`);
    log q, the greedy flag and the margin are always kept. What each costs: ``memclaim score --help`` and docs/store.md.

    ``backend="openai"`` scores through an inference server's prompt log-probabilities (vLLM,
    SGLang, llama-cpp-python; docs/served.md): ``model`` is then the served model's tokenizer
    (a name or a folder, no weights needed), ``url`` the server, ``api_key_env``/``api_key_file``
    where its key is, ``served_model`` its name for the model, ``max_concurrency`` the requests in
    flight; ``served_bounds`` stores certified bounds for policies a server's top-K cannot give
    exactly (never read by a test as a score).

    ``estimate="sample:N"`` (with ``backend="openai"``, for a server without prompt
    log-probabilities): no scores; N generations per window under the one policy (``seed`` per
    request where the server honours it), the verbatim match rate of each window (and within
    each ``near_verbatim`` edit distance) with its Clopper-Pearson interval ([EM] App. F.1),
    returned as an :class:`EstimateResult` and written to ``out``/estimate.json. An estimate is
    an interval, not a score: ``memclaim test`` refuses it (docs/served.md).

    >>> import memclaim as mc
    >>> run = mc.score("toy", ["A first passage of text ...", "a second ..."], prefix_tokens=8,
    ...                suffix_tokens=8, policies=["full", "greedy"])          # doctest: +SKIP
    >>> run.scores("full").logq                                               # doctest: +SKIP
    array([-20.1, -35.7])
    """
    if (texts is None) == (document is None):
        raise InputError(
            "give exactly one of --input (passages) or --document (sliding windows)",
            hint="memclaim score MODEL --input FILE ... or --document FILE --stride S ...",
        )
    batch_size = check_batch_size(batch_size)
    check_limit(limit)
    if estimate is not None:
        return _sample_estimate(
            model,
            texts,
            estimate=estimate,
            seed=seed,
            backend=backend,
            url=url,
            api_key_env=api_key_env,
            api_key_file=api_key_file,
            served_model=served_model,
            max_concurrency=max_concurrency,
            policies=policies,
            near_verbatim=near_verbatim,
            beams=beams,
            stats=stats,
            served_bounds=served_bounds,
            document=document,
            stride=stride,
            prefix_tokens=prefix_tokens,
            suffix_tokens=suffix_tokens,
            text_field=text_field,
            prefix_field=prefix_field,
            suffix_field=suffix_field,
            id_field=id_field,
            input_format=input_format,
            limit=limit,
            label=label,
            out=out,
            dtype=dtype,
            device=device,
            log=log,
        )
    if seed != 0:
        raise InputError(
            "--seed applies to sampling estimates only", hint="add --estimate sample:N, or drop it"
        )
    # a bad name is refused before any work; None leaves the choice to the backend (a served
    # model computes what its answers give, a local one everything)
    stat_set = None if stats is None else run_stats(stats)
    pols = policies_of(policies)
    nv = near_verbatim_settings(
        near_verbatim, beams
    )  # every option is checked before the model loads
    prompt_rule = build_prompt_rule(prompt_templates, chat_template, aggregate)
    prefix_tokens, suffix_tokens = window_lengths(
        prefix_tokens, suffix_tokens, prefix_field, suffix_field
    )
    if out is not None:
        check_out(out, store="")  # the store itself: new, empty or memclaim's
    set_threads(threads)
    m = scoring_model(
        model,
        backend=backend,
        dtype=dtype,
        sot=sot,
        allow_pickle=allow_pickle,
        trust_remote_code=trust_remote_code,
        device=device,
        device_map=device_map,
        max_memory=max_memory,
        offload_folder=offload_folder,
    )
    scorer = make_backend(
        m,
        pols,
        backend=backend,
        address=address,
        workers=workers,
        gpus_per_worker=gpus_per_worker,
        threads_per_worker=threads_per_worker,
        batch_size=batch_size,
        log=log,
        url=url,
        api_key_env=api_key_env,
        api_key_file=api_key_file,
        served_model=served_model,
        max_concurrency=max_concurrency,
        served_bounds=served_bounds,
    )
    windows, inputs, skipped_empty, label, _ = cut_windows(
        m,
        texts,
        document=document,
        stride=stride,
        prefix_tokens=prefix_tokens,
        suffix_tokens=suffix_tokens,
        text_field=text_field,
        id_field=id_field,
        input_format=input_format,
        prefix_field=prefix_field,
        suffix_field=suffix_field,
        label=label,
        limit=limit,
    )
    work = WorkFolder(out, prefix="memclaim-store-")
    summary = run_scoring(
        m,
        windows,
        near_verbatim=nv,
        log=log,
        policies=pols,
        prefix_tokens=prefix_tokens,
        suffix_tokens=suffix_tokens,
        prompt_rule=prompt_rule,
        out_dir=work.path,
        label=label,
        inputs=inputs,
        batch_size=batch_size,
        unit_size=unit_size,
        progress=progress,
        skipped_empty=skipped_empty,
        backend=scorer,
        stats=stat_set,
    )
    return ScoreResult(
        summary=summary,
        policies=tuple(p.spec for p in pols),
        near_verbatim=nv,
        work=work,
        inputs=dict(inputs),
    )


# ------------------------------------------------------------------ sampling estimates (issue 27)
@dataclass(frozen=True, repr=False)
class EstimateResult(Result):
    """A sampling estimate ([EM] App. F.1) of a served model without prompt log-probabilities:
    ``run`` (:class:`~memclaim.scoring.served.sampling.SamplingRun`: per window the verbatim
    match rate of n generations with its Clopper-Pearson interval) and where it was written.
    An interval per window, not a score: no test reads it."""

    run: SamplingRun
    path: Path | None = None

    def to_dict(self) -> dict:
        d = self.run.to_dict()
        if self.path is not None:
            d["path"] = str(self.path)
        return jsonable(d)

    def to_pandas(self):
        import pandas as pd

        return pd.DataFrame(
            [
                {k: v for k, v in w.to_dict().items() if k != "near_verbatim"}
                for w in self.run.windows
            ]
        )

    def save(self, folder) -> dict:
        p = _write_estimate(self.run, folder)
        return {"estimate": str(p)}

    def __repr__(self) -> str:
        x = self.run.extracted
        return (
            f"EstimateResult({len(self.run.windows)} windows x {self.run.n} samples under "
            f"{self.run.policy}: {sum(w.verbatim > 0 for w in self.run.windows)} reproduced, "
            f"rate {x.estimate:.3f} [{x.lower:.3f}, {x.upper:.3f}])"
        )

    def _view(self):
        rows = [
            (
                w.window_id,
                f"{w.verbatim}/{w.n}",
                f"[{w.interval.lower:.4f}, {w.interval.upper:.4f}]",
            )
            for w in self.run.windows
        ]
        return (
            Doc("Sampling estimate (not a score)")
            .callout(repr(self), "result")
            .table(["window", "verbatim", "interval"], rows)
        )


def _check_estimate_out(out) -> Path:
    """OUT for an estimate: new, empty, or holding only memclaim's estimate.json (re-run: replaced)."""
    p = check_out_dir(out)
    if p.is_dir():
        others = sorted(x.name for x in p.iterdir() if x.name != ESTIMATE_FILE)
        mine = p / ESTIMATE_FILE
        ours = True
        if mine.exists():
            try:
                ours = read_json_object(mine, "estimate").get("kind") == ESTIMATE_KIND
            except InputError:
                ours = False
        if others or not ours:
            raise InputError(
                f"--out {str(out)!r} holds files memclaim's sampling estimate did not write "
                f"({', '.join(repr(x) for x in (others or [ESTIMATE_FILE])[:3])})",
                hint="choose a new or empty folder for --out",
            )
    return p


def _write_estimate(run: SamplingRun, folder) -> Path:
    p = _check_estimate_out(folder)
    p.mkdir(parents=True, exist_ok=True)
    f = p / ESTIMATE_FILE
    atomic_write_text(f, json.dumps(jsonable(run.to_dict()), indent=1) + "\n")
    return f


def _sample_estimate(
    model,
    texts,
    *,
    estimate,
    seed,
    backend,
    url,
    api_key_env,
    api_key_file,
    served_model,
    max_concurrency,
    policies,
    near_verbatim,
    beams,
    stats,
    served_bounds,
    document,
    stride,
    prefix_tokens,
    suffix_tokens,
    text_field,
    prefix_field,
    suffix_field,
    id_field,
    input_format,
    limit,
    label,
    out,
    dtype,
    device,
    log,
) -> EstimateResult:
    n = parse_estimate(estimate)
    if backend != "openai" or url is None:
        raise InputError(
            "--estimate samples a served model: it needs --backend openai --url URL",
            hint="a local model gives exact scores: drop --estimate, or add --backend openai --url URL",
        )
    if document is not None:
        raise InputError("--estimate reads --input passages, not --document", hint="use --input")
    given = [
        name
        for name, v in (
            ("--beams", tuple(beams)),
            ("--stats", stats),
            ("--served-bounds", served_bounds),
        )
        if v not in ((), None, False)
    ]
    if given:
        raise InputError(
            f"{', '.join(given)} do not apply to --estimate (no scores are computed)",
            hint="drop them",
        )
    policy = one_policy(policies, what="--estimate")
    pol = Policy.parse(policy or "full")
    eps = tuple(integer("--near-verbatim", e, minimum=0) for e in near_verbatim)
    prefix_tokens, suffix_tokens = window_lengths(
        prefix_tokens, suffix_tokens, prefix_field, suffix_field
    )
    if out is not None:
        _check_estimate_out(out)
    m = scoring_model(model, backend="openai", dtype=dtype, device=device)
    windows, *_ = cut_windows(
        m,
        texts,
        prefix_tokens=prefix_tokens,
        suffix_tokens=suffix_tokens,
        text_field=text_field,
        id_field=id_field,
        input_format=input_format,
        prefix_field=prefix_field,
        suffix_field=suffix_field,
        label=label,
        limit=limit,
    )
    if not windows.windows:
        raise InputError("no window to sample", hint="give texts long enough for one window")
    gen = sample_generations(
        url,
        m,
        windows.windows,
        n=n,
        policy=pol,
        seed=seed,
        served_model=served_model,
        api_key_env=api_key_env,
        api_key_file=api_key_file,
        max_concurrency=4 if max_concurrency is None else max_concurrency,
        log=log,
    )
    ests = tuple(
        window_estimate(w.window_id, w.suffix_ids, gen.by_window[w.window_id], epsilons=eps)
        for w in windows.windows
    )
    run = SamplingRun(
        windows=ests,
        extracted=set_estimate(ests),
        n=n,
        policy=pol.spec,
        seed=seed,
        server=gen.server,
        requests=gen.requests,
    )
    path = _write_estimate(run, out) if out is not None else None
    return EstimateResult(run=run, path=path)
