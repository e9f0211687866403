"""The unlearning verifier as deployed in practice ([MX] §8.2 "Unlearning is measure-relative",
Table 4, App. F.2; Cor. 6.3).

What is thresholded. [MX] App. F.2 runs unlearning "until the verifier first reports the
content forgotten (verbatim extraction from c below 0.15)". Extraction there is the *recovered
fraction* (Fig. 10's axis): the fraction of the forget-set records (c, z) whose secret z the
model reproduces verbatim from the record's own prefix c. So the verifier

- decides per record: value = 1 if greedy decoding from c reproduces all of z (teacher-forced
  greedy flag, equal to ``generate``; near-ties counted), else 0 -- or, under a sampling policy
  with list budget m, value = P(at least one of m samples reproduces z) = 1 - (1 - q)^m, exact
  from log q; a record is "retained" when its value is >= the threshold, "forgotten" otherwise;
- decides overall: **forgotten** iff the mean value (the recovered fraction) is < threshold,
  default 0.15.

What it certifies and what it misses ([MX] Cor. 6.3): it measures one channel, the record's
own prefix, verbatim. A secret still recoverable through another prompt (a reserved trigger,
[MX] Thm. 6.1(ii)), paraphrased, or near-verbatim, passes as forgotten; and the rate is a
sample of records, so a threshold on the point estimate says nothing about a single record
beyond its own flag. :class:`VerifierResult` says both in ``statement``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..decoding import Policy
from ..errors import DomainError, InputError
from ..jsonutil import ResultMixin
from ..models import load_model
from ..scoring.prompts import PromptRule, aggregate_logq
from ..text.io import Record
from ..text.windows import WindowSet, passage_windows
from ..train import toy as _toy  # noqa: F401  (registers the named model "toy")
from ..validate import in_open_unit, in_unit, integer
from .extraction import list_success_logprob, pair_windows
from .metrics import clopper_pearson

if TYPE_CHECKING:  # the annotations' names only
    from ..store.results import RunScores

__all__ = [
    "DEFAULT_THRESHOLD",
    "VerifierResult",
    "verify",
    "verify_arrays",
    "verify_run",
    "score_windows",
]

DEFAULT_THRESHOLD = 0.15  # [MX] App. F.2: "verbatim extraction from c below 0.15"
QUANTITY = (
    "recovered fraction: mean over forget-set records of verbatim extraction of the suffix z from the "
    "record's own prefix c ([MX] App. F.2)"
)


@dataclass(frozen=True)
class VerifierResult(ResultMixin):
    """Per-record values and decisions, the recovered fraction, and the overall verdict.

    ``values`` [n]: 1/0 (greedy) or P(at least one of m samples reproduces z). ``decisions``:
    "retained" (value >= threshold) or "forgotten". ``rate``: mean value; ``forgotten``:
    rate < threshold. ``retained`` counts retained records; ``low``/``high``: Clopper-Pearson
    interval of the greedy recovered fraction (None under sampling, where the rate is exact).
    """

    threshold: float
    policy: str
    m: int
    quantity: str
    record_ids: tuple[str, ...]
    values: np.ndarray
    decisions: tuple[str, ...]
    n: int
    retained: int
    rate: float
    low: float | None
    high: float | None
    confidence: float
    forgotten: bool
    near_ties: int
    statement: str

    @property
    def verdict(self) -> str:
        return "forgotten" if self.forgotten else "not forgotten"


def verify_arrays(
    *,
    greedy_match: Sequence[float] | np.ndarray | None = None,
    log_q: Sequence[float] | np.ndarray | None = None,
    policy: str = "greedy",
    m: int = 1,
    threshold: float = DEFAULT_THRESHOLD,
    record_ids: Sequence[str] | None = None,
    near_tie: Sequence[float] | np.ndarray | None = None,
    confidence: float = 0.95,
) -> VerifierResult:
    """The verifier's decision from per-record greedy flags (``policy="greedy"``) or from exact
    log q under a sampling policy with list budget ``m`` ([MX] App. F.2: forgotten when the
    recovered fraction is below ``threshold``, 0.15).

    >>> v = verify_arrays(greedy_match=[True, False, False, False, False, False, False, False])
    >>> v.rate, v.forgotten, v.decisions[:2]
    (0.125, True, ('retained', 'forgotten'))
    """
    thr = in_unit("threshold", threshold, lo_open=True)
    conf = in_open_unit("confidence", confidence)
    mm = integer("m (list budget)", m, minimum=1)
    spec = Policy.parse(policy).spec
    if spec == "greedy":
        if greedy_match is None:
            raise InputError("the greedy verifier needs the greedy flags")
        if mm != 1:
            raise DomainError(
                f"greedy decoding is deterministic: a list budget m = {m} repeats one output",
                hint="use m = 1 with greedy, or a sampling policy with m samples",
            )
        values = np.asarray(greedy_match, dtype=bool).reshape(-1).astype(np.float64)
    else:
        if log_q is None:
            raise InputError(
                f"the verifier under {spec} needs log q of each record under that policy"
            )
        values = np.exp(list_success_logprob(log_q, m=mm))
    n = int(values.size)
    if n == 0:
        raise InputError("the verifier needs at least one forget-set record")
    ids = tuple(str(i) for i in (record_ids if record_ids is not None else range(n)))
    if len(ids) != n:
        raise InputError(f"{len(ids)} record ids for {n} records")
    retained_mask = values >= thr
    rate = float(values.mean())
    forgotten = rate < thr  # [MX] App. F.2
    low = high = None
    if spec == "greedy":
        low, high = clopper_pearson(int(values.sum()), n, confidence=conf)
    nt = 0 if near_tie is None else int(np.count_nonzero(np.asarray(near_tie, dtype=bool)))
    how = "greedy decoding" if spec == "greedy" else f"{spec} with list budget m = {mm}"
    statement = (
        f"The verifier reports the content {'forgotten' if forgotten else 'NOT forgotten'}: {rate:.3f} of "
        f"{n} records are recovered verbatim from their own prefix under {how} "
        f"({'below' if forgotten else 'at or above'} the threshold {thr:g}). It measures one channel "
        "(the record's own prefix, verbatim): a secret recoverable through another prompt such as a reserved "
        "trigger, or near-verbatim, passes as forgotten ([MX] Cor. 6.3)."
    )
    return VerifierResult(
        threshold=thr,
        policy=spec,
        m=mm,
        quantity=QUANTITY,
        record_ids=ids,
        values=values,
        decisions=tuple("retained" if r else "forgotten" for r in retained_mask),
        n=n,
        retained=int(np.count_nonzero(retained_mask)),
        rate=rate,
        low=low,
        high=high,
        confidence=conf,
        forgotten=bool(forgotten),
        near_ties=nt,
        statement=statement,
    )


def verify_run(
    run: RunScores,
    *,
    policy: str = "greedy",
    m: int = 1,
    threshold: float = DEFAULT_THRESHOLD,
    confidence: float = 0.95,
) -> VerifierResult:
    """The verifier on a stored run (natural-prefix prompts) of the forget-set records.

    >>> from memclaim.store.results import load_run_scores  # doctest: +SKIP
    >>> v = verify_run(load_run_scores("runs/audit/scores", run="a2500695b69ca895", policy="full"))  # doctest: +SKIP
    >>> v.rate, v.forgotten, v.decisions[:2]  # doctest: +SKIP
    (0.0, True, ('forgotten', 'forgotten'))
    """
    if run.procedure.get("prompt", {}).get("kind") not in (None, "natural-prefix"):
        raise InputError(
            f"run {run.run_id} was scored with prompt rule {run.procedure['prompt'].get('kind')!r}",
            hint="the verifier reads extraction from the record's own prefix: score with the natural prefix",
        )
    spec = Policy.parse(policy).spec
    lq = None
    if spec != "greedy":
        col = f"logq:{spec}"
        if col not in run.table.column_names:
            raise InputError(f"policy {spec!r} was not scored in run {run.run_id}")
        lq = run.table.column(col).to_numpy().astype(np.float64)
    return verify_arrays(
        greedy_match=run.greedy_match,
        log_q=lq,
        policy=spec,
        m=m,
        threshold=threshold,
        record_ids=run.window_ids,
        near_tie=run.near_tie,
        confidence=confidence,
    )


def score_windows(
    model: object,
    windows: object,
    *,
    policies: Sequence[Policy],
    prompt_rule: PromptRule | None = None,
    batch_size: int = 16,
) -> dict:
    """Score windows with the teacher-forcing engine directly (no store): for in-memory models,
    e.g. between unlearning rounds. ``model`` needs ``.lm``, ``.tokenizer`` and ``.sot_ids``.
    Returns {"greedy_match" [n], "near_tie" [n], "logq": {policy spec: [n]}, "token_logprob": list}.

    >>> s = score_windows(memclaim.load_model("toy"), ws, policies=parse_policies(["greedy", "full"]))  # doctest: +SKIP
    >>> s["greedy_match"][:2], s["logq"]["full"][:2].round(3), s["window_ids"][:2]  # doctest: +SKIP
    (array([False, False]), array([-68.949, -62.589]), ['members-0#0', 'members-1#0'])
    """
    from ..scoring.engine import NEAR_TIE_MARGIN, TeacherForcingEngine

    rule = prompt_rule or PromptRule()
    engine = TeacherForcingEngine(model.lm, tuple(policies))
    ws = list(windows.windows if hasattr(windows, "windows") else windows)
    n = len(ws)
    P = len(engine.policies)
    items = [
        rule.items(w, model.tokenizer, model.sot_ids) for w in ws
    ]  # per window: (prompt, target) per prompt
    prompts = [[p for p, _ in its] for its in items]
    if any(len(p) < 1 for ps in prompts for p in ps):
        raise InputError(
            "a prompt is empty: the model has no start-of-text token and a record has no prefix",
            hint="give the model a start-of-text rule (sot) or use records with a prefix",
        )
    n_prompts = rule.n_prompts
    logq = np.empty((n, n_prompts, P))
    greedy = np.zeros((n, n_prompts), dtype=bool)
    margin = np.empty((n, n_prompts))
    toklp: list = [None] * n
    groups: dict = {}
    for i, its in enumerate(items):
        for j, (p, t) in enumerate(its):
            groups.setdefault((len(p), len(t)), []).append((i, j))
    for key in sorted(groups):
        group = groups[key]
        for a in range(0, len(group), batch_size):
            chunk = group[a : a + batch_size]
            bs = engine.score_batch(
                [items[i][j][0] for i, j in chunk], [items[i][j][1] for i, j in chunk]
            )
            for r, (i, j) in enumerate(chunk):
                logq[i, j] = bs.logq[r]
                greedy[i, j] = bs.greedy_match[r]
                margin[i, j] = bs.min_margin[r]
                if j == 0:
                    toklp[i] = bs.token_logprob[r].copy()
    agg = rule.aggregate
    return {
        "greedy_match": greedy.any(axis=1),
        "near_tie": margin.min(axis=1) < NEAR_TIE_MARGIN,
        "logq": {
            pol.spec: aggregate_logq(logq[:, :, k], agg, axis=1)
            for k, pol in enumerate(engine.policies)
        },
        "token_logprob": toklp,
        "window_ids": [w.window_id for w in ws],
    }


def _as_model(model):
    if hasattr(model, "lm") and hasattr(model, "tokenizer") and hasattr(model, "sot_ids"):
        return model

    return load_model(str(model))


def verify(
    model: object,
    records: object,
    *,
    prefix_tokens: int | None = None,
    suffix_tokens: int | None = None,
    threshold: float = DEFAULT_THRESHOLD,
    policy: str = "greedy",
    m: int = 1,
    batch_size: int = 16,
    confidence: float = 0.95,
) -> VerifierResult:
    """Run the verifier on a model and its forget set.

    ``model``: a :class:`memclaim.models.loader.LoadedModel`, a model spec/path for
    :func:`memclaim.models.load_model`, or any object with ``.lm`` (a
    :class:`memclaim.models.base.LanguageModel`), ``.tokenizer`` and ``.sot_ids``.
    ``records``: (prefix c, secret z) pairs (dicts with ``prefix``/``suffix`` or 2-tuples, cut by
    :func:`memclaim.audits.extraction.pair_windows`), or texts (strings, dicts with ``text``,
    Records) cut into ``prefix_tokens`` + ``suffix_tokens`` (both required then), or a WindowSet.

    >>> canary = {"id": "c0", "prefix": "Boudi queacheachou naidea louni silosi sukafeabea mouchefai fefabope",
    ...           "suffix": " boukegili fuko quo facheavounea"}  # a record planted once in the tiny GPT
    >>> v = verify("toy", [canary])  # doctest: +SKIP
    >>> v.rate, v.forgotten, v.decisions  # doctest: +SKIP
    (0.0, True, ('forgotten',))
    """
    lm = _as_model(model)
    spec = Policy.parse(policy).spec
    if isinstance(records, WindowSet):
        ws = records
    else:
        recs = list(records)
        if not recs:
            raise InputError("the verifier needs at least one forget-set record")
        first = recs[0]
        if (isinstance(first, dict) and "prefix" in first) or (
            isinstance(first, (tuple, list)) and len(first) == 2
        ):
            ws = pair_windows(recs, lm.tokenizer)
        else:
            if prefix_tokens is None or suffix_tokens is None:
                raise InputError(
                    "texts need prefix_tokens and suffix_tokens to cut the prefix c and the suffix z",
                    hint="or pass (prefix, suffix) pairs",
                )
            rs = []
            for j, r in enumerate(recs):
                if isinstance(r, str):
                    rs.append(Record(f"rec{j}", r))
                elif isinstance(r, dict):
                    rs.append(Record(str(r.get("id", f"rec{j}")), r.get("text", "")))
                else:
                    rs.append(r)
            ws = passage_windows(
                rs, lm.tokenizer, prefix_tokens=prefix_tokens, suffix_tokens=suffix_tokens
            )
            if ws.skipped_short:
                raise InputError(
                    f"{ws.skipped_short} forget-set record(s) are shorter than {prefix_tokens} + "
                    f"{suffix_tokens} tokens: {list(ws.skipped_ids)[:5]}",
                    hint="every forget-set record must be verified; use shorter windows",
                )
    pols = [Policy.parse("greedy")] if spec == "greedy" else [Policy.parse(spec)]
    out = score_windows(lm, ws, policies=pols, batch_size=batch_size)
    return verify_arrays(
        greedy_match=out["greedy_match"],
        log_q=None if spec == "greedy" else out["logq"][spec],
        policy=spec,
        m=m,
        threshold=threshold,
        record_ids=out["window_ids"],
        near_tie=out["near_tie"],
        confidence=confidence,
    )
