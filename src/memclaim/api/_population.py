"""The population test, the main claim ([EM] §3, §4, App. C, D.2, H.1): ``memclaim.test`` on two
score sets, ``memclaim.population`` to score members and controls and test them.

Candidates and controls are two stored runs (results of :func:`memclaim.score`, or store folders
with run ids), two score files (CSV/TSV/Parquet, [EM] App. H.1: the same verify step applies to
scores computed elsewhere), or two arrays / pandas Series of scores. Stored runs must share the
extraction procedure except for which other policies were scored ([EM] Def. B.2, C.2); a set
tested against itself is refused. The claim is calibrated on the controls: a candidate scoring
strictly above the K-th largest control, K = floor(alpha (N+1)), is claimed memorized with a
false-positive rate certified at K/(N+1) relative to the controls' distribution.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..claims.population import PopulationClaim, population_claim
from ..claims.sampling import ESTIMATE_FILE
from ..claims.scores import LN10, PROBABILITY_KINDS, controls_at_atom_hint, exact_level
from ..decoding import Policy
from ..errors import InputError
from ..fsutil import sha256_bytes
from ..jsonutil import read_json_object
from ..procedure import (
    DEFAULT_POLICY,
    NUMERICS_DECLARED,
    STORED_PROCEDURE_MAY_DIFFER,
    require_same_procedure,
)
from ..progress import LogCallback, ProgressCallback
from ..report.core import write_report
from ..report.population import (
    headline,
    population_report,
    population_summary_doc,
    score_histogram_of,
    short_claim,
)
from ..report.words import limit_note
from ..scoring.results import RunScores, load_run_scores
from ..scoring.runner import RunSummary, run_scoring, run_stats, scoring_pairs
from ..text.io import record_id, text_key
from ..text.scorefile import read_id_list, read_score_file
from ..validate import batch_size as check_batch_size
from ..validate import in_open_unit, query_budget
from ..validate import seed as check_seed
from ._common import (
    Result,
    WorkFolder,
    build_prompt_rule,
    check_limit,
    check_out,
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
from ._runs import is_store, load_store_run, run_ids, store_input_record, stored_test_procedure
from ._score import ScoreResult

if TYPE_CHECKING:  # the annotations' names only; nothing here is imported at run time
    import datasets
    import numpy
    import pandas
    import pyarrow
    import transformers

    from ..models.loader import LoadedModel

__all__ = [
    "test",
    "population",
    "TestResult",
    "PopulationResult",
    "validate_test_levels",
    "claim_result",
    "store_test",
]

MEMBERS_LABEL = "members"
CONTROLS_LABEL = "controls"


# ------------------------------------------------------------------------------ the result
@dataclass(frozen=True, repr=False)
class TestResult(Result):
    """A population claim with what the report needs: the claim
    (:class:`~memclaim.claims.population.PopulationClaim`), the procedure, the inputs'
    provenance, and ``report`` (the paths written, once written). ``to_dict()`` is what
    ``memclaim test --json`` prints; ``to_pandas()`` one row per candidate; ``save(folder)``
    writes report.{json,md,html}."""

    __test__ = False  # not a pytest test class, whatever the name says

    claim: PopulationClaim
    procedure: dict | None
    inputs: tuple
    extra: dict
    controls_description: str | None = None
    command: str = "test"
    title: str = "Conformal population test"
    report: dict | None = None

    @property
    def headline(self) -> str:
        """The claim in one sentence (the report's first line), naming the decoding policy it was
        made under (and the prompt rule when it is not the natural prefix)."""
        return headline(self.claim, self.procedure)

    @property
    def test(self):
        """The primary pool's :class:`~memclaim.claims.conformal.PopulationTest`."""
        return self.claim.primary_test

    @property
    def limited(self) -> str | None:
        """What a ``limit`` run left out, in words (None for a run of the whole input)."""
        return limit_note(self.inputs)

    @property
    def warning(self) -> str | None:
        same = self.extra.get("controls_identical_to_a_candidate")
        if not same:
            return None
        return (
            f"{len(same)} control text(s) are identical to a candidate text: such controls are likely members "
            "(contamination); see report.json"
        )

    def to_dict(self) -> dict:
        t = self.claim.primary_test
        summary = {
            "headline": self.headline,
            "pool": self.claim.primary,
            "alpha": t.alpha,
            "k": t.k,
            "alpha_n": t.alpha_n,
            "threshold": t.threshold,
            "threshold_log10_prob": t.threshold_log10_prob,
            "n_controls": t.n_controls,
            "n_candidates": t.n_candidates,
            "n_claimed": t.n_claimed,
            "generation_rate": t.generation_rate.to_dict(),
            "calibrated_rate": t.calibrated_rate.to_dict(),
            "in_sample_fpr": t.in_sample_fpr,
            "claim_possible": t.claim_possible,
            "report": self.report,
        }
        if self.warning is not None:
            summary["warning"] = self.warning
        if self.limited is not None:
            summary["limited"] = self.limited
        return jsonable(summary)

    def to_pandas(self):
        """One row per candidate, the unit in every score column's name: id, ``logq_nats`` (the
        natural log of q) and ``log10_q`` for probability scores (``score`` for other scores,
        in their own units), the p-value (``pvalue_numerator`` / (N+1) and ``pvalue``),
        ``claimed``, ``margin_log10`` (log10 of score / tau), and the FDR/FWER columns when asked
        for. (Before 0.2 the natural log was a column named ``score``.)"""
        import pandas as pd

        rows = jsonable(self.claim.to_dict()["candidates"])
        frame = pd.DataFrame(rows)
        if self.claim.kind in PROBABILITY_KINDS and "score" in frame:
            logq = np.asarray(self.claim.candidate_scores, dtype=np.float64)
            frame.insert(1, "logq_nats", logq)
            frame.insert(2, "log10_q", logq / LN10)
            frame = frame.drop(columns=["score"])
        return frame

    def scores(self, which: str = MEMBERS_LABEL):
        """The scores of ``which`` as tested (``"members"``, also spelled ``"candidates"``, or
        ``"controls"``): a pandas DataFrame with ``id`` and, for probability scores,
        ``logq_nats`` and ``log10_q`` (``score`` otherwise), the first thing to plot.

        >>> import memclaim as mc
        >>> r = mc.test([-2.0, -3.5], [-9.0, -8.5, -7.0, -9.5, -8.0, -6.5, -7.7, -8.8, -9.9], alpha="0.1")
        >>> list(r.scores("controls").columns), round(float(r.scores("members")["log10_q"][0]), 4)
        (['id', 'logq_nats', 'log10_q'], -0.8686)
        """
        import pandas as pd

        key = {"members": "candidates", "candidates": "candidates", "controls": "controls"}.get(
            which
        )
        if key is None:
            raise InputError(
                f"scores({which!r}): unknown set", hint="scores('members') or scores('controls')"
            )
        ids = self.claim.candidate_ids if key == "candidates" else self.claim.control_ids
        v = np.asarray(
            self.claim.candidate_scores if key == "candidates" else self.claim.control_scores,
            dtype=np.float64,
        )
        if self.claim.kind in PROBABILITY_KINDS:
            return pd.DataFrame({"id": list(ids), "logq_nats": v, "log10_q": v / LN10})
        return pd.DataFrame({"id": list(ids), "score": v})

    def plot_scores(self):
        """Member and control score histograms (log10 q) with the threshold tau marked: a
        matplotlib Figure (the figure of the report's "The test" section).

        >>> import memclaim as mc
        >>> r = mc.test([-2.0, -3.5], [-9.0, -8.5, -7.0, -9.5, -8.0, -6.5, -7.7, -8.8, -9.9], alpha="0.1")
        >>> r.plot_scores().axes[0].get_ylabel()
        'count'
        """
        return score_histogram_of(self.claim)

    def _view(self):
        return population_summary_doc(self.claim, self.procedure, title=self.title)

    def bundle(self):
        """report.{json,md,html} rendered in memory (nothing written)."""
        return population_report(
            self.claim,
            procedure=self.procedure,
            inputs=list(self.inputs),
            controls_description=self.controls_description,
            command=self.command,
            title=self.title,
            extra_results=self.extra,
        )

    def save(self, folder) -> dict:
        """Write report.{json,md,html} into ``folder`` (all or nothing); returns the paths."""
        return write_report(folder, self.bundle())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({short_claim(self.claim, self.procedure)})"


@dataclass(frozen=True, repr=False)
class PopulationResult(TestResult):
    """:class:`TestResult` of ``memclaim.population``, with the two scoring runs (``members``,
    ``controls``) in ``runs``, the tested policy and the store."""

    policy: str = ""
    store: str = ""
    runs: dict = field(default_factory=dict)
    work: WorkFolder | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict:
        d = super().to_dict()
        d["policy"] = self.policy
        d["store"] = self.store
        d["scoring"] = {
            label: {
                k: v
                for k, v in r.to_dict().items()
                if k
                in (
                    "run_id",
                    "n_windows",
                    "units_scored",
                    "units_reused",
                    "skipped_short",
                    "skipped_empty",
                    "model_loaded",
                    "near_ties",
                    "seconds",
                )
            }
            for label, r in self.runs.items()
        }
        return jsonable(d)

    def run_scores(self, label: str = MEMBERS_LABEL, policy: str | None = None) -> RunScores:
        """The stored run of ``members`` or ``controls`` under ``policy`` (default: the tested
        one), with every stored column (:class:`~memclaim.scoring.results.RunScores`)."""
        return load_run_scores(
            self.store, run=self.runs[label].run_id, policy=policy or self.policy
        )


# ------------------------------------------------------------------------------ checks
def validate_test_levels(
    *, alpha, fdr=None, fwer=None, budget_delta=None, confidence=0.95, realistic_budget=1e5, seed=0
) -> None:
    """Check the levels a population test will use before any scoring or reading is done, so a
    typo fails at once (exit 2) instead of after the model work."""
    query_budget("--budget", realistic_budget)
    exact_level("alpha", alpha)
    check_seed("--seed", seed)
    if fdr is not None:
        exact_level("--fdr", fdr)
    if fwer is not None:
        exact_level("--fwer", fwer)
    if budget_delta is not None:
        in_open_unit("--budget-delta", budget_delta)
    in_open_unit("--confidence", confidence)


def id_list(ids, what: str) -> list[str]:
    """Ids given in Python (a string, or a sequence of strings or integers) as memclaim stores them:
    True, a float such as nan, a list or None is refused, naming it (:func:`memclaim.text.io.record_id`)."""
    if ids is None:
        return []
    if isinstance(ids, (str, int)) and not isinstance(ids, bool):
        ids = (ids,)
    try:
        items = list(ids)
    except TypeError:
        raise InputError(
            f"{what} must be a list of ids, got {type(ids).__name__} {ids!r}",
            hint="e.g. ['c-3', 'c-7']",
        ) from None
    out = []
    for i, x in enumerate(items):
        rid = record_id(x, f"{what} item {i}")
        if rid is None:
            raise InputError(
                f"{what} item {i} is empty ({x!r})", hint="give every id as a non-empty string"
            )
        out.append(rid)
    return out


def _exclusions(exclude_controls, exclude_control_ids) -> tuple[list, list]:
    """(ids to exclude, provenance records) from an id-list file and ids given directly."""
    excl = id_list(exclude_control_ids, "--exclude-control")
    extra_inputs = []
    if exclude_controls:
        excl += list(read_id_list(exclude_controls))
        extra_inputs.append(
            {
                "role": "excluded control ids",
                "path": str(exclude_controls),
                "sha256": sha256_bytes(Path(exclude_controls).read_bytes()),
            }
        )
    return excl, extra_inputs


# ------------------------------------------------------------------------------ the claim
def claim_result(
    *,
    candidate_scores,
    control_scores,
    alpha,
    kind: str,
    candidate_ids: Sequence[str] | None = None,
    control_ids: Sequence[str] | None = None,
    candidate_texts: Sequence[str] | None = None,
    control_texts: Sequence[str] | None = None,
    candidates_procedure: dict | None = None,
    controls_procedure: dict | None = None,
    procedure_ignore: Sequence[str] = (),
    inputs: Sequence[dict] = (),
    exclude_control_ids: Sequence[str] = (),
    binary: bool | None = None,
    confidence: float = 0.95,
    fdr_delta=None,
    fwer_delta=None,
    seed: int = 0,
    budget_delta: float | None = None,
    realistic_budget: float = 1e5,
    controls_description: str | None = None,
    command: str = "test",
    title: str = "Conformal population test",
    out=None,
    allow_mixed_numerics: bool = False,
) -> TestResult:
    """Check the procedures, run the population claim on two score arrays plus metadata, and
    (with ``out``) write report.{json,md,html} there (all or nothing). Every entry point (files,
    stores, arrays, ``population``) ends here."""
    procedure = None
    if candidates_procedure is not None and controls_procedure is not None:
        mixed = require_same_procedure(
            candidates_procedure,
            controls_procedure,
            ignore=tuple(procedure_ignore),
            allow_mixed_numerics=allow_mixed_numerics,
        )
        procedure = candidates_procedure
        if mixed:  # the report states what --allow-mixed-numerics declared comparable
            procedure = {**procedure, NUMERICS_DECLARED: mixed}
    else:
        procedure = candidates_procedure or controls_procedure
    claim = population_claim(
        candidate_scores=candidate_scores,
        control_scores=control_scores,
        alpha=alpha,
        kind=kind,
        candidate_ids=candidate_ids,
        control_ids=control_ids,
        exclude_control_ids=exclude_control_ids,
        binary=binary,
        confidence=confidence,
        fdr_delta=fdr_delta,
        fwer_delta=fwer_delta,
        seed=seed,
        budget_delta=budget_delta,
        realistic_budget=realistic_budget,
    )
    extra = {}
    if candidate_texts is not None and control_texts is not None:
        cset = {t: i for i, t in enumerate(candidate_texts) if isinstance(t, str) and t}
        same = [
            (claim.control_ids[k], claim.candidate_ids[cset[t]])
            for k, t in enumerate(control_texts)
            if isinstance(t, str) and t in cset
        ]
        extra["controls_identical_to_a_candidate"] = [
            {"control": a, "candidate": b} for a, b in same
        ]
    res = TestResult(
        claim=claim,
        procedure=procedure,
        inputs=tuple(inputs),
        extra=extra,
        controls_description=controls_description,
        command=command,
        title=title,
    )
    if out is not None:
        res = replace(res, report=res.save(out))
    return res


def require_generable_controls(controls: RunScores, *, before: str | None = None) -> None:
    """Refuse, with the fix, a control run whose every score is -inf (probability 0) under its
    policy: no threshold can be calibrated ([EM] C.4.4). ``population`` calls it on the controls
    before scoring the members (``before``), ``test`` on stored runs; the words and the hint are
    those of the claim itself (:func:`memclaim.claims.scores.controls_at_atom_hint`)."""
    s = np.asarray(controls.logq, dtype=float)
    if controls.is_binary or s.size == 0 or not np.all(np.isneginf(s)):
        return
    stop = f"; stopped before scoring the {before}" if before else ""
    raise InputError(
        f"all {s.size} control scores are -inf (probability 0) under {controls.policy}: the procedure "
        "cannot generate any control, so the threshold would be 0 and every generable candidate would "
        f"be claimed ([EM] C.4.4){stop}",
        hint=controls_at_atom_hint(controls.policy),
    )


def store_test(
    *,
    candidates: RunScores,
    controls: RunScores,
    alpha,
    exclude_control_ids: Sequence[str] = (),
    binary: bool | None = None,
    confidence: float = 0.95,
    fdr_delta=None,
    fwer_delta=None,
    seed: int = 0,
    budget_delta: float | None = None,
    realistic_budget: float = 1e5,
    controls_description: str | None = None,
    extra_inputs: Sequence[dict] = (),
    command: str = "test",
    title: str = "Conformal population test",
    out=None,
    allow_mixed_numerics: bool = False,
) -> TestResult:
    """The population test on two stored runs (:class:`~memclaim.scoring.results.RunScores`).

    Refuses runs scored under different procedures, naming every differing field ([EM] Def.
    B.2, C.2), and the same run as both candidates and controls. Scores are the stored natural-log
    q under the loaded policy; the greedy policy is read as a binary score ([EM] §4)."""
    if candidates.store == controls.store and candidates.run_id == controls.run_id:
        raise InputError(
            f"the candidates and the controls are the same run {candidates.run_id} "
            f"({candidates.label!r}) of {candidates.store!r}",
            hint="pass the controls' run with --controls-run (a run id prefix or its label)",
        )
    digest = candidates.inputs.get("sha256")
    if digest and digest == controls.inputs.get("sha256"):
        raise InputError(
            f"the candidates (run {candidates.run_id}, {candidates.label!r}) and the controls (run "
            f"{controls.run_id}, {controls.label!r}) were scored from identical inputs (sha256 "
            f"{digest[:16]}): a set tested against itself certifies nothing",
            hint="score the matched non-member controls and pass that run as the controls",
        )
    window_keys = lambda rs: sorted(
        text_key(a + b) for a, b in zip(rs.prefix_texts, rs.suffix_texts)
    )  # noqa: E731
    if (
        len(candidates) == len(controls)
        and candidates.prefix_texts is not None
        and controls.prefix_texts is not None
        and window_keys(candidates) == window_keys(controls)
    ):
        raise InputError(
            f"the candidates (run {candidates.run_id}, {candidates.label!r}) and the controls (run "
            f"{controls.run_id}, {controls.label!r}) hold the same window texts (from inputs in another "
            "order, format or under other ids): a set tested against itself certifies nothing",
            hint="score the matched non-member controls and pass that run as the controls",
        )
    cproc, kproc = stored_test_procedure(candidates), stored_test_procedure(controls)
    require_same_procedure(
        cproc, kproc, ignore=STORED_PROCEDURE_MAY_DIFFER, allow_mixed_numerics=allow_mixed_numerics
    )
    require_generable_controls(controls)
    if binary is not None and bool(binary) != candidates.is_binary:
        raise InputError(
            f"--{'' if binary else 'no-'}binary disagrees with the stored policy {candidates.policy!r}",
            hint="drop --binary/--no-binary: a store knows whether its policy is greedy",
        )
    cids, _ = run_ids(candidates)
    kids, aliases = run_ids(controls)
    # an id that is a control's own id names that control; only other strings are read as the
    # window id 'source#i' of a passage (a record named 'x#0' is not the window x#0 of record x)
    known = set(kids)
    excl = [
        x if x in known else aliases.get(x, x)
        for x in id_list(exclude_control_ids, "--exclude-control")
    ]
    texts = lambda rs: [a + b for a, b in zip(rs.prefix_texts, rs.suffix_texts)]  # noqa: E731
    inputs = [
        store_input_record(candidates, "candidates"),
        store_input_record(controls, "controls"),
        *extra_inputs,
    ]
    return claim_result(
        candidate_scores=candidates.logq,
        control_scores=controls.logq,
        alpha=alpha,
        kind="log-prob",
        candidate_ids=cids,
        control_ids=kids,
        candidate_texts=texts(candidates),
        control_texts=texts(controls),
        candidates_procedure=cproc,
        controls_procedure=kproc,
        procedure_ignore=STORED_PROCEDURE_MAY_DIFFER,
        inputs=inputs,
        exclude_control_ids=excl,
        binary=candidates.is_binary,
        confidence=confidence,
        fdr_delta=fdr_delta,
        fwer_delta=fwer_delta,
        seed=seed,
        budget_delta=budget_delta,
        realistic_budget=realistic_budget,
        controls_description=controls_description,
        command=command,
        title=title,
        out=out,
        allow_mixed_numerics=allow_mixed_numerics,
    )


# ------------------------------------------------------------------------------ memclaim.test
def _kind_of(x) -> str:
    """'run' (a stored run), 'path' (a store folder or a score file) or 'array'."""
    if isinstance(x, (ScoreResult, RunScores)):
        return "run"
    if isinstance(x, (str, Path)):
        return "path"
    return "array"


def _as_run(x, *, policy, near_verbatim) -> RunScores:
    if isinstance(x, RunScores):
        if policy is not None and Policy.parse(policy).spec != x.policy:
            raise InputError(
                f"policy {policy!r} differs from the loaded run's policy {x.policy!r}",
                hint="load the run under that policy (load_run_scores(..., policy=...)) or drop policy",
            )
        return x
    return x.scores(policy, near_verbatim=near_verbatim)


def _array(x, what: str):
    """Scores and ids (from a pandas Series' index, when it is not 0..n-1) of an array-like."""
    ids = None
    if type(x).__module__.split(".")[0] == "pandas" and hasattr(x, "index"):
        idx = list(x.index)
        if idx != list(range(len(idx))):
            ids = [str(i) for i in idx]
        x = x.to_numpy()
    try:
        raw = np.asarray(x)
        a = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(
            f"{what} must be scores (numbers), a stored run, a store folder or a score file; got "
            f"{type(x).__name__}",
            hint="e.g. a list of natural-log probabilities",
        ) from None
    if a.ndim != 1:
        raise InputError(
            f"{what} must be one score per item (a 1-D array), got {'a single number' if a.ndim == 0 else f'an array of shape {a.shape}'}",
            hint="pass a list or 1-D array of natural-log probabilities (np.ravel it yourself if "
            "its rows really are one set of scores)",
        )
    if raw.dtype == bool or (
        raw.dtype == object and any(isinstance(v, (bool, np.bool_)) for v in raw)
    ):
        raise InputError(
            f"{what} holds True/False values, not scores: {raw[:5].tolist()}",
            hint="pass natural-log probabilities (0/1 flags are a greedy policy's scores: pass them as "
            "0.0 / -inf with kind='log-prob', or binary=True with numbers)",
        )
    return a, ids


def _procedure_arg(p, what: str) -> dict | None:
    if p is None or isinstance(p, dict):
        return p
    if not isinstance(p, (str, os.PathLike)):
        raise InputError(
            f"--{what}-procedure must be the procedure record (a dict) or the path of its JSON file, "
            f"got a {type(p).__name__}: {str(p)[:60]}",
            hint="pass the 'procedure' object of the run that computed the scores, e.g. "
            "json.load(open('procedure.json'))",
        )
    if Path(p).is_dir():
        raise InputError(
            f"--{what}-procedure {str(p)!r} is a folder, not a JSON file",
            hint="pass the JSON file of the procedure record",
        )
    return read_json_object(
        p,
        f"--{what}-procedure",
        hint="the file must hold the procedure record as one JSON object {...}",
    )


@public(
    renamed=dict(
        id_column="id_field",
        score_column="score_field",
        text_column="text_field",
        policy="policies",
    )
)
def test(
    candidates: ScoreResult
    | RunScores
    | str
    | os.PathLike
    | Sequence[float]
    | numpy.ndarray
    | pandas.Series,
    controls: ScoreResult
    | RunScores
    | str
    | os.PathLike
    | Sequence[float]
    | numpy.ndarray
    | pandas.Series,
    *,
    alpha: str | float | Fraction = "0.001",
    policies: str | Sequence[str] | None = None,
    run: str | None = None,
    controls_run: str | None = None,
    near_verbatim: int | None = None,
    kind: str | None = None,
    binary: bool | None = None,
    id_field: str | None = None,
    score_field: str | None = None,
    text_field: str | None = None,
    candidates_procedure: dict | str | os.PathLike | None = None,
    controls_procedure: dict | str | os.PathLike | None = None,
    candidate_ids: Sequence[str] | None = None,
    control_ids: Sequence[str] | None = None,
    exclude_controls: str | os.PathLike | None = None,
    exclude_control_ids: Sequence[str] = (),
    fdr: str | float | Fraction | None = None,
    fwer: str | float | Fraction | None = None,
    seed: int = 0,
    budget_delta: float | None = None,
    realistic_budget: float = 1e5,
    confidence: float = 0.95,
    controls_description: str | None = None,
    out: str | os.PathLike | None = None,
    allow_mixed_numerics: bool = False,
) -> TestResult:
    """The conformal population test ([EM] §3, §4, App. C) of ``candidates`` against matched
    non-member ``controls`` at target FPR ``alpha`` (``memclaim test``).

    Each side is a stored run (a :class:`ScoreResult` of :func:`memclaim.score`, or a
    :class:`~memclaim.scoring.results.RunScores`), a store folder (with ``run`` / ``controls_run``
    when it holds several), a CSV/TSV/Parquet score file ([EM] App. H.1; ``id_field``,
    ``score_field``, ``text_field`` name its columns (``id_column`` etc. before 0.2), ``kind`` =
    'log-prob', 'prob' or 'score'), or an array /
    list / pandas Series of scores (natural-log probabilities unless ``kind`` says otherwise;
    ``candidate_ids``/``control_ids``, or the Series' index). ``policies``: the one stored policy
    to test, a string or a list of one (default: the run's first; ``policy=`` before 0.2); for
    score files, the policy the scores were computed under (recorded). ``alpha``, ``fdr``, ``fwer`` are read exactly ('0.001',
    '0.1%', '1/1000'). ``exclude_controls`` (an id-list file) and ``exclude_control_ids``: controls
    verified as members ([EM] D.2). ``out``: also write report.{json,md,html} there (else call
    ``save(folder)``). ``allow_mixed_numerics``: compare scores computed on different device
    classes or dtypes (refused otherwise; the report states the declared differences).

    >>> import memclaim as mc
    >>> res = mc.test([-2.0, -3.5, -1.0], [-9.0, -8.5, -7.0, -9.5, -8.0, -6.5, -7.7, -8.8, -9.9],
    ...               alpha="0.1")
    >>> res.test.k, res.test.n_claimed
    (1, 3)
    """
    policy = one_policy(policies, what="test")
    sides = (_kind_of(candidates), _kind_of(controls))
    if near_verbatim is not None and not all(
        s == "run" or (s == "path" and is_store(x)) for s, x in zip(sides, (candidates, controls))
    ):
        raise InputError(
            "--near-verbatim selects a stored near-verbatim score; it needs score stores on both sides",
            hint="score with `memclaim score ... --near-verbatim EPS --out STORE`",
        )
    validate_test_levels(
        alpha=alpha,
        fdr=fdr,
        fwer=fwer,
        budget_delta=budget_delta,
        confidence=confidence,
        realistic_budget=realistic_budget,
        seed=seed,
    )
    for x, opt, s in ((candidates, "--candidates", sides[0]), (controls, "--controls", sides[1])):
        if s == "path" and not Path(x).exists():
            raise InputError(
                f"{opt} {str(x)!r} does not exist",
                hint="pass a score store folder (memclaim score --out) or a CSV/TSV/Parquet score file",
            )
        if s == "path" and (
            (Path(x) / ESTIMATE_FILE).is_file() or Path(x).name == ESTIMATE_FILE
        ):  # issue 27: an interval per window is not a score
            raise InputError(
                f"{opt} {str(x)!r} is a sampling estimate (memclaim score --estimate), not "
                "scores: the conformal test ranks every window's score log q among the "
                "controls', and an estimate gives only an interval for each window's extraction "
                "probability (a window never reproduced has it anywhere in [0, upper])",
                hint="score with a server that returns prompt log-probs (vLLM, SGLang, "
                "llama-cpp-python) or a local model, and test that store",
            )
    if out is not None:
        check_out(out, report=True)
    if (candidates_procedure is None) != (controls_procedure is None):
        given, missing = (
            ("--candidates-procedure", "--controls-procedure")
            if candidates_procedure is not None
            else ("--controls-procedure", "--candidates-procedure")
        )
        raise InputError(
            f"{given} is given but {missing} is not: a procedure recorded for one side only cannot "
            "be checked against the other, and a conformal claim holds only when both were scored "
            "under the same procedure ([EM] Def. B.2, C.2)",
            hint=f"pass {missing} too (the JSON procedure record of those scores), or neither",
        )
    excl, extra_inputs = _exclusions(exclude_controls, exclude_control_ids)
    stored = [
        s == "run" or (s == "path" and is_store(x)) for s, x in zip(sides, (candidates, controls))
    ]
    if stored[0] != stored[1] or ("array" in sides and sides[0] != sides[1]):
        what = lambda s, st: "store" if st else ("file" if s == "path" else "array")  # noqa: E731
        raise InputError(
            "--candidates and --controls must both be score stores or both be score files "
            f"(got a {what(sides[0], stored[0])} and a {what(sides[1], stored[1])})",
            hint="score both with `memclaim score` under one procedure, or export both to CSV/Parquet",
        )
    common = dict(
        alpha=alpha,
        exclude_control_ids=excl,
        confidence=confidence,
        fdr_delta=fdr,
        fwer_delta=fwer,
        seed=seed,
        budget_delta=budget_delta,
        realistic_budget=realistic_budget,
        controls_description=controls_description,
        out=out,
        allow_mixed_numerics=allow_mixed_numerics,
    )
    if stored[0]:
        file_only = {
            "--kind": kind not in (None, "log-prob"),
            "--id-field": id_field,
            "--score-field": score_field,
            "--text-field": text_field,
            "--candidates-procedure": candidates_procedure,
            "--controls-procedure": controls_procedure,
            "candidate_ids": candidate_ids,
            "control_ids": control_ids,
        }
        bad = [k for k, v in file_only.items() if v]
        if bad:
            raise InputError(
                f"{', '.join(bad)} appl{'y' if len(bad) > 1 else 'ies'} to score files, not to stores",
                hint="a store records natural-log probabilities, ids, texts and the procedure itself",
            )
        if sides[0] == "path":
            cand = load_store_run(
                candidates,
                run=run,
                policy=policy,
                role="candidates",
                run_option="--run",
                near_verbatim=near_verbatim,
            )
        else:
            cand = _as_run(candidates, policy=policy, near_verbatim=near_verbatim)
        if sides[1] == "path":
            ctrl = load_store_run(
                controls,
                run=controls_run,
                policy=policy,
                role="controls",
                run_option="--controls-run",
                near_verbatim=near_verbatim,
            )
        else:
            ctrl = _as_run(controls, policy=policy, near_verbatim=near_verbatim)
        return store_test(
            candidates=cand, controls=ctrl, binary=binary, extra_inputs=extra_inputs, **common
        )
    if run is not None or controls_run is not None:
        raise InputError(
            "--run and --controls-run select runs of a score store; the scores given are files",
            hint="drop --run/--controls-run, or pass store folders",
        )
    kind = kind or "log-prob"
    if sides[0] == "path":
        if candidate_ids is not None or control_ids is not None:
            raise InputError(
                "candidate_ids/control_ids apply to arrays of scores; a score file has an id column",
                hint="drop them, or pass --id-field",
            )
        if Path(candidates).resolve() == Path(controls).resolve():
            raise InputError(
                f"--candidates and --controls are the same file {str(candidates)!r}: a set tested "
                "against itself certifies nothing",
                hint="pass the matched non-member controls' scores with --controls",
            )
        cf = read_score_file(
            candidates, id_column=id_field, score_column=score_field, text_column=text_field
        )
        kf = read_score_file(
            controls, id_column=id_field, score_column=score_field, text_column=text_field
        )
        if cf.sha256 == kf.sha256:
            raise InputError(
                f"--candidates {str(candidates)!r} and --controls {str(controls)!r} have identical "
                f"contents (sha256 {cf.sha256[:16]}): a set tested against itself certifies nothing",
                hint="pass the matched non-member controls' scores with --controls",
            )
        if sorted(zip(cf.ids, cf.scores.tolist())) == sorted(zip(kf.ids, kf.scores.tolist())):
            raise InputError(
                f"--candidates {str(candidates)!r} and --controls {str(controls)!r} hold the same ids "
                "and scores (in another order, format or line endings): a set tested against itself "
                "certifies nothing",
                hint="pass the matched non-member controls' scores with --controls",
            )
        cs, ks, cids, kids, ctexts, ktexts = (
            cf.scores,
            kf.scores,
            cf.ids,
            kf.ids,
            cf.texts,
            kf.texts,
        )
        inputs = [cf.input_record("candidates"), kf.input_record("controls")]
        source = "external score files"
    else:
        bad = [
            k
            for k, v in (
                ("--id-field", id_field),
                ("--score-field", score_field),
                ("--text-field", text_field),
            )
            if v
        ]
        if bad:
            raise InputError(
                f"{', '.join(bad)} appl{'y' if len(bad) > 1 else 'ies'} to score files, not to arrays",
                hint="pass candidate_ids/control_ids with the arrays",
            )
        cs, cids0 = _array(candidates, "candidates")
        ks, kids0 = _array(controls, "controls")
        cids = id_list(candidate_ids, "candidate_ids") if candidate_ids is not None else cids0
        kids = id_list(control_ids, "control_ids") if control_ids is not None else kids0
        ctexts = ktexts = None
        if (
            cs.size == ks.size
            and np.array_equal(cs, ks, equal_nan=True)
            and (cids is None or kids is None or list(map(str, cids)) == list(map(str, kids)))
        ):
            raise InputError(
                "the candidates and the controls are the same scores: a set tested against itself "
                "certifies nothing",
                hint="pass the matched non-member controls' scores",
            )
        inputs = [
            {
                "role": role,
                "path": "(scores in memory)",
                "sha256": sha256_bytes(a.tobytes()),
                "rows": int(a.size),
            }
            for role, a in (("candidates", cs), ("controls", ks))
        ]
        source = "scores given in memory"
    cproc = _procedure_arg(candidates_procedure, "candidates")
    kproc = _procedure_arg(controls_procedure, "controls")
    if policy is not None:
        pol = Policy.parse(policy)
        if binary is None and pol.is_binary:
            binary = True
        for pr in (cproc, kproc):
            if pr is not None and "policy" in pr and pr["policy"] not in (pol.spec, policy):
                raise InputError(
                    f"--policy {policy!r} disagrees with the procedure file's policy {pr['policy']!r}",
                    hint="drop --policy or fix the procedure record",
                )
        if cproc is None and kproc is None:
            cproc = {"policy": pol.spec, "score_kind": kind, "source": source}
    elif cproc is None and kproc is None:
        cproc = {"policy": "unrecorded", "score_kind": kind, "source": source}
    return claim_result(
        candidate_scores=cs,
        control_scores=ks,
        kind=kind,
        candidate_ids=cids,
        control_ids=kids,
        candidate_texts=ctexts,
        control_texts=ktexts,
        candidates_procedure=cproc,
        controls_procedure=kproc,
        inputs=[*inputs, *extra_inputs],
        binary=binary,
        **common,
    )


# ------------------------------------------------------------------------------ memclaim.population
@public(renamed=dict(policy="policies"))
def population(
    model: str | os.PathLike | LoadedModel | transformers.PreTrainedModel | tuple,
    members: str
    | os.PathLike
    | Sequence[str | Mapping]
    | pandas.DataFrame
    | pyarrow.Table
    | datasets.Dataset,
    controls: str
    | os.PathLike
    | Sequence[str | Mapping]
    | pandas.DataFrame
    | pyarrow.Table
    | datasets.Dataset,
    *,
    alpha: str | float | Fraction = "0.001",
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
    exclude_controls: str | os.PathLike | None = None,
    exclude_control_ids: Sequence[str] = (),
    fdr: str | float | Fraction | None = None,
    fwer: str | float | Fraction | None = None,
    seed: int = 0,
    budget_delta: float | None = None,
    realistic_budget: float = 1e5,
    confidence: float = 0.95,
    controls_description: str | None = None,
    out: str | os.PathLike | None = None,
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
    dtype: str | None = None,
    sot: str | None = None,
    device: str | None = None,
    device_map: str | None = None,
    max_memory: Mapping | Sequence[str] | str | None = None,
    offload_folder: str | os.PathLike | None = None,
    allow_mixed_numerics: bool = False,
    allow_pickle: bool = False,
    trust_remote_code: bool = False,
    threads: int | None = None,
    stats: str | Sequence[str] | None = "census",
    progress: bool | ProgressCallback = True,
    log: LogCallback | None = None,
) -> PopulationResult:
    """Score ``members`` and ``controls`` with ``model`` under one extraction procedure ([EM] Def.
    B.2), then run the conformal population test ([EM] §3, §4) (``memclaim population``).

    ``members``/``controls``: passage files, lists of texts or records, or tables (as for
    :func:`memclaim.score`; ``limit``: only the first N of each, a quick look that the report marks
    as limited). The test uses the first of ``policies``; every policy is stored, so
    :func:`memclaim.test` on ``result.store`` tests the others without the model. With
    ``near_verbatim``, the test runs on the lower bound at the largest epsilon ([EM] §6). ``out``:
    the store goes to OUT/store and the report to OUT/report.{json,md,html}, as the CLI writes
    them (re-running reuses the stored scores); ``out=None`` works in a temporary folder and
    writes no report until ``save(folder)``. Every option is checked and both inputs are cut into
    windows before the model is loaded.

    ``device``, ``device_map``, ``max_memory``, ``offload_folder``, ``dtype``: where and in what
    dtype the model runs (:func:`memclaim.load_model`; default: the first GPU in bfloat16, else
    the CPU in float32); the device class and dtype are part of the procedure. ``allow_mixed_numerics``:
    compare scores computed with different numerics (refused otherwise; the report says so).
    ``batch_size``: windows per forward pass, or ``"auto"`` (on a GPU the largest batch whose
    activations fit 80% of free memory, on the CPU 16; CPU scores are the same at every size).
    ``stats``: the statistics to compute and store; the test reads log q only, so the default
    is ``"census"`` (log q, greedy flag, margin); ``"all"`` adds the per-token full-softmax
    statistics the audits use (None: every statistic, as ``"all"``; see :func:`memclaim.score`).

    >>> import memclaim as mc
    >>> res = mc.population("toy", member_texts, control_texts, prefix_tokens=16, suffix_tokens=16,
    ...                     policies=["full"], alpha="0.1")                   # doctest: +SKIP
    >>> res.headline                                                          # doctest: +SKIP
    'At target FPR alpha = 1/10 (10%) with N = 40 controls: K = 4, ...'
    """
    validate_test_levels(
        alpha=alpha,
        fdr=fdr,
        fwer=fwer,
        budget_delta=budget_delta,
        confidence=confidence,
        realistic_budget=realistic_budget,
        seed=seed,
    )
    batch_size = check_batch_size(batch_size)
    check_limit(limit)
    stat_set = run_stats(stats)  # a bad name is refused before any work
    pols = policies_of(policies)
    nv = near_verbatim_settings(
        near_verbatim, beams
    )  # every option is checked before the model loads
    prompt_rule = build_prompt_rule(prompt_templates, chat_template, aggregate)
    if out is not None:  # OUT/store and the report: refused now, not after scoring
        check_out(out, store="store", report=True)
    if (
        isinstance(members, (str, Path))
        and isinstance(controls, (str, Path))
        and Path(members).resolve() == Path(controls).resolve()
    ):
        raise InputError(
            f"--members and --controls are the same file {str(members)!r}: a set tested against "
            "itself certifies nothing",
            hint="pass matched non-member texts with --controls",
        )
    excl, extra_inputs = _exclusions(exclude_controls, exclude_control_ids)
    prefix_tokens, suffix_tokens = window_lengths(
        prefix_tokens, suffix_tokens, prefix_field, suffix_field
    )
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
    )  # weights load only if scoring is needed
    cut = {}
    for label, src in ((MEMBERS_LABEL, members), (CONTROLS_LABEL, controls)):
        try:
            cut[label] = cut_windows(
                m,
                src,
                prefix_tokens=prefix_tokens,
                suffix_tokens=suffix_tokens,
                text_field=text_field,
                id_field=id_field,
                input_format=input_format,
                label=label,
                prefix_field=prefix_field,
                suffix_field=suffix_field,
                what=label,
                limit=limit,
            )
        except InputError as exc:
            msg = str(exc)
            if exc.hint is not None:  # keep the fix as the fix (one "fix:" line, not two)
                msg = msg[: -len(f"\n  fix: {exc.hint}")]
            raise InputError(f"--{label}: {msg}", hint=exc.hint) from None
    same_bytes = cut[MEMBERS_LABEL][1]["sha256"] == cut[CONTROLS_LABEL][1]["sha256"]
    if same_bytes or cut[MEMBERS_LABEL][4] == cut[CONTROLS_LABEL][4]:
        where = (
            f" {str(members)!r}" if isinstance(members, (str, Path)) else "",
            f" {str(controls)!r}" if isinstance(controls, (str, Path)) else "",
        )
        how = (
            "identical contents"
            if same_bytes
            else "the same texts (in another order, format, ids, line endings or whitespace)"
        )
        raise InputError(
            f"--members{where[0]} and --controls{where[1]} have {how}: a set tested against itself "
            "certifies nothing",
            hint="pass matched non-member texts with --controls",
        )
    for label in (MEMBERS_LABEL, CONTROLS_LABEL):  # every window fits the model, before any scoring
        scoring_pairs(m, cut[label][0], prompt_rule, what=f"--{label}")
    backend_obj = make_backend(
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
    )
    work = WorkFolder(out, prefix="memclaim-population-")
    store = work.path / "store"
    tested = pols[0].spec
    # with near_verbatim, the test runs on the lower bound at the largest epsilon ([EM] §6)
    nv_eps_tested = max(nv["epsilons"]) if nv else None
    scored: dict[str, RunSummary] = {}
    # the controls first: when every one sits at the atom (-inf, e.g. under top-k) there is no
    # threshold ([EM] C.4.4), and the run stops before the members' scoring, with the fix
    for label in (CONTROLS_LABEL, MEMBERS_LABEL):
        windows, inputs, skipped_empty, run_label, *_ = cut[
            label
        ]  # 'members[:N]' for a --limit run
        scored[label] = run_scoring(
            m,
            windows,
            policies=pols,
            prefix_tokens=prefix_tokens,
            suffix_tokens=suffix_tokens,
            prompt_rule=prompt_rule,
            out_dir=store,
            label=run_label,
            inputs=inputs,
            batch_size=batch_size,
            unit_size=unit_size,
            progress=progress,
            skipped_empty=skipped_empty,
            near_verbatim=nv,
            backend=backend_obj,
            log=log,
            stats=stat_set,
        )
        if label == CONTROLS_LABEL:
            ctrl = load_run_scores(
                store, run=scored[label].run_id, policy=tested, near_verbatim=nv_eps_tested
            )
            require_generable_controls(ctrl, before="members")
    runs = {label: scored[label] for label in (MEMBERS_LABEL, CONTROLS_LABEL)}
    cand = load_run_scores(
        store, run=runs[MEMBERS_LABEL].run_id, policy=tested, near_verbatim=nv_eps_tested
    )
    name = lambda x, what: Path(x).name if isinstance(x, (str, Path)) else what  # noqa: E731
    res = store_test(
        candidates=cand,
        controls=ctrl,
        alpha=alpha,
        exclude_control_ids=excl,
        confidence=confidence,
        fdr_delta=fdr,
        fwer_delta=fwer,
        seed=seed,
        budget_delta=budget_delta,
        realistic_budget=realistic_budget,
        controls_description=controls_description,
        extra_inputs=extra_inputs,
        command="population",
        allow_mixed_numerics=allow_mixed_numerics,
        title=f"Population test: {name(members, 'members')} against {name(controls, 'controls')}",
        out=out,
    )
    return PopulationResult(
        **{f: getattr(res, f) for f in TestResult.__dataclass_fields__},
        policy=tested,
        store=str(store),
        runs=runs,
        work=work,
    )
