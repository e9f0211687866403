"""``memclaim.acr``: the adversarial compression ratio (Schwarzschild et al. 2024) as an extraction
procedure under the matched comparison ([EM] §3, App. A.2).

Every member and every matched non-member control is a target y; GCG (Zou et al. 2023) searches
for the shortest prompt x* that meets the success criterion (``argmax``, ``greedy`` or
``prob:b``), ACR = |y|/|x*|, extracted when ACR > 1 (:mod:`memclaim.scoring.acr`). The two sides'
extraction rates are compared like the population test's binary score
(:mod:`memclaim.claims.acr`): equal rates mean the procedure carries no signal about
memorization. Searches go to ``OUT/searches`` as they finish (resumable per target after a kill;
a target already searched is read back), the report to ``OUT/report.{json,md,html}``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Unpack

from ..claims.acr import ACRComparison, Verdict, acr_comparison, succeeds_on_both
from ..claims.scores import exact_level
from ..errors import InputError
from ..progress import LogCallback, ProgressCallback
from ..report.acr import acr_report, acr_summary_doc, headline
from ..report.core import write_report
from ..runtime import Runtime
from ..scoring.acr import LengthSearch, TargetResult, search_sides
from ..scoring.gcg import Criterion, GCGSettings
from ..text.io import read_passages
from ..text.tables import passages_from_object
from ..validate import in_open_unit, integer
from ._common import Result, WorkFolder, check_out_dir, jsonable, set_threads
from ._model import load_model
from ._public import public
from ._shortcuts import ACROptions, take_options

if TYPE_CHECKING:  # the annotations' names only
    import datasets
    import pandas
    import pyarrow
    import transformers

    from ..models.loader import LoadedModel

__all__ = ["acr", "ACRResult"]

SIDES = ("members", "controls")


@dataclass(frozen=True)
class ACRResult(Result):
    """The ACR procedure on members and matched controls: the comparison
    (:class:`~memclaim.claims.acr.ACRComparison`), the paper's sentence checked
    (:class:`~memclaim.claims.acr.Verdict`), every target's result
    (:class:`~memclaim.scoring.acr.TargetResult`), the procedure and the store. ``to_dict()`` is
    what ``memclaim acr --json`` prints, ``to_pandas()`` one row per target, ``save(folder)``
    writes report.{json,md,html} and the figure."""

    comparison: ACRComparison
    verdict: Verdict
    members: tuple[TargetResult, ...]
    controls: tuple[TargetResult, ...]
    procedure: dict
    inputs: tuple
    store: str
    searches: dict
    controls_description: str | None = None
    report: dict | None = None
    work: WorkFolder | None = field(default=None, repr=False, compare=False)

    @property
    def headline(self) -> str:
        """The comparison in words (the report's first block)."""
        return headline(self.comparison)

    def to_dict(self) -> dict:
        c = self.comparison
        side = lambda s: {
            "n": s.n,
            "extracted": s.extracted,
            "met": s.met,  # noqa: E731
            "median_acr_extracted": s.median_acr_extracted,
            "max_acr": s.max_acr,
        }
        rows = [
            {
                "side": label[:-1],
                **{
                    k: v
                    for k, v in r.to_dict().items()
                    if k not in ("attempts", "prompt_tokens", "target_ids", "prompt_ids")
                },
            }
            for label, rs in (("members", self.members), ("controls", self.controls))
            for r in rs
        ]
        return jsonable(
            {
                "headline": self.headline,
                "criterion": c.criterion,
                "members": side(c.members),
                "controls": side(c.controls),
                "member_rate": c.member_rate.to_dict(),
                "control_rate": c.control_rate.to_dict(),
                "difference": c.difference.to_dict(),
                "no_signal": c.no_signal,
                "alpha_n": c.population.primary_test.binary_rates.alpha_n,
                "verdict": self.verdict.to_dict(),
                "flags": c.flags,
                "targets": rows,
                "store": self.store,
                "searches": {k: v.to_dict() for k, v in self.searches.items()},
                "report": self.report,
            }
        )

    def to_pandas(self):
        """One row per target: side, id, lengths, ACR, the three criteria, log q, margin, prompt, flags."""
        import pandas as pd

        return pd.DataFrame([{k: v for k, v in r.items()} for r in self.to_dict()["targets"]])

    def bundle(self):
        """report.{json,md,html} and the figure, rendered in memory (nothing written)."""
        return acr_report(
            self.comparison,
            members=[r.to_dict() for r in self.members],
            controls=[r.to_dict() for r in self.controls],
            verdict=self.verdict,
            procedure=self.procedure,
            inputs=list(self.inputs),
            controls_description=self.controls_description,
            extra_results={"searches": {k: v.to_dict() for k, v in self.searches.items()}},
        )

    def save(self, folder) -> dict:
        """Write report.{json,md,html} and acr.{png,pdf} into ``folder`` (all or nothing); returns the paths."""
        return write_report(folder, self.bundle())

    def __repr__(self) -> str:
        c = self.comparison
        return (
            f"ACRResult({c.criterion}: members {c.members.extracted}/{c.members.n}, controls "
            f"{c.controls.extracted}/{c.controls.n} extracted; difference {100 * c.difference.estimate:+.1f} points "
            f"[{100 * c.difference.lower:+.1f}, {100 * c.difference.upper:+.1f}]; '{self.verdict.sentence}': "
            f"{self.verdict.status})"
        )

    def _view(self):
        """The notebook view: the report's headline and its comparison table (the report's template)."""
        return acr_summary_doc(self.comparison, self.verdict)


def _read_targets(
    model, src, *, label: str, text_field, id_field, input_format, limit: int | None = None
) -> tuple[list, dict]:
    """[(id, text, token ids)] and the input's provenance record, before any model work."""
    fields = dict(text_field=text_field, id_field=id_field)
    if isinstance(src, (str, Path)):
        ps = read_passages(src, fmt=input_format, **fields)
        where = str(src)
    else:
        if input_format is not None:
            raise InputError(
                "--format applies to files, not to texts given in memory", hint="drop input_format"
            )
        ps, kind = passages_from_object(src, source=label, **fields)
        where = f"({kind} in memory)"
    if not ps.records:
        raise InputError(f"--{label} holds no text", hint="give at least one non-empty text")
    seen, rows = set(), []
    for r in ps.records[:limit]:
        if r.id in seen:
            raise InputError(
                f"--{label}: the id {r.id!r} appears twice", hint="give every record a unique id"
            )
        seen.add(r.id)
        ids = model.tokenizer.encode(r.text)  # the target, tokenized once, as the text stands
        if len(ids) < 2:
            raise InputError(
                f"--{label}: target {r.id!r} has {len(ids)} token(s); ACR needs a prompt shorter than "
                "the target, so a target of at least 2 tokens",
                hint="drop the record or give a longer text",
            )
        rows.append((r.id, r.text, ids))
    rec = {
        "role": label,
        "path": where,
        "sha256": ps.sha256,
        "records": len(ps.records) + ps.skipped_empty,
    }
    if limit is not None:
        rec["targets_used"] = len(rows)
    return rows, rec


# the defaults of acr()'s shortcuts that are not the procedure's and runtime's own
# (memclaim.api._shortcuts.FLAT_DEFAULTS); each is the default its keyword had
_ACR_DEFAULTS: dict = {
    "top_k": 256,
    "search_batch": 512,
    "steps": 100,
    "seed": 0,
    "token_filter": "ascii",
    "retokenize": True,
    "start_tokens": 5,
    "max_prompt_tokens": None,
    "confidence": 0.95,
    "limit": None,
    "controls_description": None,
}


@public
def acr(
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
    criterion: str = "prob:0.9",
    alpha: str | float | Fraction = "0.05",
    out: str | os.PathLike | None = None,
    runtime: Runtime | Mapping | None = None,
    progress: bool | ProgressCallback = True,
    log: LogCallback | None = None,
    **options: Unpack[ACROptions],
) -> ACRResult:
    """The ACR procedure on ``members`` and matched non-member ``controls`` with ``model``, and the
    matched comparison of the two ([EM] §3, App. A.2; ``memclaim acr``).

    Each text is a target. For each, GCG (``top_k`` tokens per position, ``search_batch``
    single-token swaps per step, ``steps`` steps per prompt length, x1.2 after each failed length;
    GCG's defaults 256 and 512, the ACR release's 100 steps) searches prompt lengths as the ACR
    release does (start at ``start_tokens``, -1 after a success, +5 after a failure, at most
    ``max_prompt_tokens``, default |y| - 1). ``criterion``: ``argmax`` (the released code's check),
    ``greedy`` (the paper's definition: ``generate`` reproduces y) or ``prob:b`` ([EM]'s relaxation,
    geometric-mean per-token probability >= b; ``prob`` is b = 0.9). Every optimized prompt is also
    evaluated under the other two. ``token_filter``: ``ascii`` (GCG's: no special, non-printable or
    non-ASCII tokens) or ``none``; ``retokenize``: keep only prompts whose text encodes back to them.
    ``alpha``: the level of the binary conformal test on the extraction flags ([EM] D.3). ``limit``:
    only the first ``limit`` targets of each side (in input order, so line-matched pairs stay pairs).

    ``out``: searches go to OUT/searches as they finish and the report to OUT/report.{json,md,html};
    re-running resumes (a target already searched is read back, never searched again).
    ``out=None`` works in a temporary folder and writes no report until ``save(folder)``.
    ``device``, ``device_map``, ``max_memory``, ``offload_folder``, ``dtype``: where and in what dtype
    the model runs (:func:`memclaim.load_model`); the device class and dtype are in the procedure.

    >>> import memclaim as mc
    >>> res = mc.acr("toy", member_texts, control_texts, search_batch=64, top_k=32, steps=20)  # doctest: +SKIP
    >>> res.comparison.member_rate.estimate, res.verdict.status  # doctest: +SKIP
    (0.5, 'held')
    """
    o = take_options(
        acr, ACROptions, options, runtime=runtime, values=("runtime",), defaults=_ACR_DEFAULTS
    )
    (
        top_k,
        search_batch,
        steps,
        seed,
        token_filter,
        retokenize,
        start_tokens,
        max_prompt_tokens,
        confidence,
        limit,
        text_field,
        id_field,
        input_format,
        controls_description,
        dtype,
        sot,
        device,
        device_map,
        max_memory,
        offload_folder,
        allow_pickle,
        trust_remote_code,
        threads,
    ) = o.get(
        "top_k",
        "search_batch",
        "steps",
        "seed",
        "token_filter",
        "retokenize",
        "start_tokens",
        "max_prompt_tokens",
        "confidence",
        "limit",
        "text_field",
        "id_field",
        "input_format",
        "controls_description",
        "dtype",
        "sot",
        "device",
        "device_map",
        "max_memory",
        "offload_folder",
        "allow_pickle",
        "trust_remote_code",
        "threads",
    )
    crit = Criterion.parse(criterion)
    gcg = GCGSettings(
        top_k=top_k,
        batch_size=search_batch,
        steps=steps,
        seed=seed,
        token_filter=token_filter,
        retokenize=retokenize,
    )
    lengths = LengthSearch(start=start_tokens, max_prompt_tokens=max_prompt_tokens)
    exact_level("alpha", alpha)
    in_open_unit("--confidence", confidence)
    if limit is not None:
        limit = integer("--limit", limit, minimum=1)
    if out is not None:
        check_out_dir(out)
    if (
        isinstance(members, (str, Path))
        and isinstance(controls, (str, Path))
        and Path(members).resolve() == Path(controls).resolve()
    ):
        raise InputError(
            f"--members and --controls are the same file {str(members)!r}: a set compared with itself "
            "shows nothing",
            hint="pass matched non-member texts with --controls",
        )
    set_threads(threads)
    m = load_model(
        model,
        dtype=dtype,
        sot=sot,
        allow_pickle=allow_pickle,
        trust_remote_code=trust_remote_code,
        device=device,
        device_map=device_map,
        max_memory=max_memory,
        offload_folder=offload_folder,
    )  # the weights load only if a search has to run
    targets, inputs = {}, []
    for label, src in (("members", members), ("controls", controls)):
        targets[label], rec = _read_targets(
            m,
            src,
            label=label,
            text_field=text_field,
            id_field=id_field,
            input_format=input_format,
            limit=limit,
        )
        inputs.append(rec)
    if inputs[0]["sha256"] == inputs[1]["sha256"]:
        raise InputError(
            "--members and --controls have identical contents: a set compared with itself shows nothing",
            hint="pass matched non-member texts with --controls",
        )
    prefix = list(m.sot_ids)
    ctx = m.max_positions
    for label in SIDES:
        for rid, _, ids in targets[label]:
            need = len(prefix) + lengths.cap(len(ids)) + len(ids)
            if ctx is not None and need > ctx:
                raise InputError(
                    f"--{label}: target {rid!r} ({len(ids)} tokens) with a prompt of up to "
                    f"{lengths.cap(len(ids))} tokens needs {need} positions, more than the context of "
                    f"{m.name} ({ctx} positions)",
                    hint="use shorter texts or --max-prompt-tokens",
                )
    work = WorkFolder(out, prefix="memclaim-acr-")
    procedure, results, searches = search_sides(
        m,
        targets,
        criterion=crit,
        gcg=gcg,
        lengths=lengths,
        store_root=work.path,
        progress=progress,
        log=log,
    )
    mem, ctl = results["members"], results["controls"]
    cmp = acr_comparison(
        member_extracted=[r.extracted for r in mem],
        control_extracted=[r.extracted for r in ctl],
        member_acr=[r.acr for r in mem],
        control_acr=[r.acr for r in ctl],
        criterion=crit.spec,
        member_met=[r.met for r in mem],
        control_met=[r.met for r in ctl],
        member_ids=[r.id for r in mem],
        control_ids=[r.id for r in ctl],
        member_argmax_without_greedy=[r.argmax_without_greedy for r in mem],
        control_argmax_without_greedy=[r.argmax_without_greedy for r in ctl],
        member_leaks=[r.leaks for r in mem],
        control_leaks=[r.leaks for r in ctl],
        alpha=alpha,
        confidence=confidence,
    )
    verdict = succeeds_on_both(
        members_extracted=cmp.members.extracted,
        n_members=cmp.members.n,
        controls_extracted=cmp.controls.extracted,
        n_controls=cmp.controls.n,
    )
    res = ACRResult(
        comparison=cmp,
        verdict=verdict,
        members=tuple(mem),
        controls=tuple(ctl),
        procedure=procedure,
        inputs=tuple(inputs),
        store=str(work.path / "searches"),
        searches=searches,
        controls_description=controls_description,
        work=work,
    )
    if out is not None:
        res = replace(res, report=res.save(out))
    return res
