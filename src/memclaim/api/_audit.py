"""``memclaim.audit``: membership-inference and extraction audits with honest intervals ([MX]
§8.2, App. F.2), and ``memclaim.audit_table``: the audit-disagreement table ([MX] Fig. 12).

An audit scores members and non-members once through the scoring engine, runs the registered
attacks (loss, zlib, reference, min-k%, min-k%++, LiRA with shadows memclaim trains itself), the
extraction audits from each record's own prefix (and a trigger), the unlearning verifier, and
with shadows the counterfactual memorization estimate (COND) beside a DP cap.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING

from ..audits.result import AuditResult
from ..audits.run import (
    audit_policies,
    check_served_audit,
    default_shadow_recipe,
    run_audit,
)
from ..audits.settings import AuditSettings
from ..audits.shadows import CapSpec, cap_from_epsilon
from ..audits.table_run import TableResult, run_audit_table
from ..audits.table_spec import TableSpec, read_table_spec
from ..audits.texts import TextSet, read_texts
from ..decoding import parse_policies
from ..errors import InputError
from ..jsonutil import read_json_object
from ..models.placement import resolve_dtype, resolve_placement
from ..privacy.tradeoff import neighbors_label
from ..procedure import DEFAULT_POLICY
from ..progress import LogCallback, ProgressCallback
from ..report.audit import audit_report, write_audit_report, write_table_report
from ..report.core import Doc, pct, write_report
from ..report.words import limit_note, verifier_reading
from ..text.io import read_passages
from ..train.finetune import TRAIN_FILE
from ._common import (
    Result,
    WorkFolder,
    check_limit,
    check_out,
    check_out_dir,
    jsonable,
    make_backend,
    one_policy,
    set_threads,
)
from ._model import scoring_model
from ._options import DEFAULT_PREFIX_TOKENS, DEFAULT_SUFFIX_TOKENS
from ._public import public

if TYPE_CHECKING:  # the annotations' names only; nothing here is imported at run time
    import datasets
    import pandas
    import pyarrow
    import transformers

    from ..models.loader import LoadedModel

__all__ = ["audit", "audit_table", "AuditRun", "AuditTableRun"]


@dataclass(frozen=True, repr=False)
class AuditRun(Result):
    """One audit: ``result`` (:class:`~memclaim.audits.result.AuditResult`: attacks with AUC and
    DeLong interval, TPR at a certified FPR, extraction, verifier, shadows, counterfactual) and,
    once written, the report's paths. Attributes of ``result`` read through
    (``run.attacks``, ``run.headline()``). ``to_dict()`` is what ``memclaim audit --json``
    prints; ``to_pandas()`` one row per attack; ``save(folder)`` writes report.{json,md,html}."""

    result: AuditResult
    work: WorkFolder | None = field(default=None, repr=False, compare=False)

    def __getattr__(self, name):
        if name.startswith("__") or name in ("result", "work"):
            raise AttributeError(name)
        return getattr(self.result, name)

    @property
    def report(self) -> dict | None:
        return self.result.report

    @property
    def limited(self) -> str | None:
        """What a ``limit`` run left out, in words (None for an audit of the whole inputs)."""
        return limit_note(self.result.inputs)

    @property
    def verifier_line(self) -> str | None:
        """The unlearning verifier in one line: its verdict for a model that went through
        unlearning, the recovered fraction alone for any other model."""
        v = self.result.verifier
        if v is None:
            return None
        return verifier_reading(
            v.rate, v.threshold, unlearned=bool(self.result.model.get("unlearned"))
        )

    def to_dict(self) -> dict:
        d = self.result.to_dict()
        if self.limited:
            d["limited"] = self.limited
        return jsonable(d)

    def to_pandas(self):
        """One row per attack: AUC with its interval and method, leak signal, TPR at the certified
        FPR with its Clopper-Pearson interval, what it measures."""
        import pandas as pd

        rows = []
        for e in self.result.attacks:
            a, t = e.auc, e.tpr
            rows.append(
                {
                    "attack": e.attack,
                    "auc": a.auc,
                    "auc_low": a.low,
                    "auc_high": a.high,
                    "interval": a.interval_method,
                    "leak_signal": a.leak_signal,
                    "leak_low": a.leak_low,
                    "leak_high": a.leak_high,
                    "tpr": None if t is None else t.tpr,
                    "tpr_low": None if t is None else t.low,
                    "tpr_high": None if t is None else t.high,
                    "certified_fpr": None if t is None else t.certified_fpr,
                    "measures": e.measures,
                }
            )
        return pd.DataFrame(rows)

    def bundle(self):
        """report.{json,md,html} rendered in memory (nothing written)."""
        return audit_report(self.result)

    def save(self, folder) -> dict:
        """Write report.{json,md,html} into ``folder`` (all or nothing); returns the paths."""
        return write_report(folder, self.bundle())

    def __repr__(self) -> str:
        r = self.result
        if not r.attacks:
            return (
                f"AuditRun({r.n_members} members vs {r.n_nonmembers} controls; no attack was run)"
            )
        best = max(r.attacks, key=lambda e: e.auc.auc)
        return (
            f"AuditRun({r.n_members} members vs {r.n_nonmembers} controls, {len(r.attacks)} attacks; strongest "
            f"{best.attack}: AUC {best.auc.auc:.3f} [{best.auc.low:.3f}, {best.auc.high:.3f}])"
        )

    def _view(self):
        """The notebook view: the report's headline box and its attack table."""
        r = self.result
        doc = Doc("Membership-inference and extraction audit").callout(r.headline(), "result")
        rows = []
        for e in r.attacks:
            a, t = e.auc, e.tpr
            tpr = (
                "–"
                if t is None
                else f"{t.tpr:.3f} [{t.low:.3f}, {t.high:.3f}] at FPR {pct(t.certified_fpr)}"
            )
            rows.append(
                (e.attack, f"{a.auc:.3f} [{a.low:.3f}, {a.high:.3f}]", f"{a.leak_signal:.2f}", tpr)
            )
        return doc.table(
            [
                "attack",
                f"AUC [{100 * r.settings.confidence:g}% CI]",
                "leak signal 2AUC-1",
                "TPR at certified FPR",
            ],
            rows,
        )


def limited_texts(ts: TextSet, limit: int) -> TextSet:
    """The first ``limit`` records of one side of an audit, its inputs record saying so."""
    if len(ts.records) <= limit:
        return ts
    return TextSet(
        ts.label,
        tuple(ts.records[:limit]),
        {**ts.inputs, "limit": limit, "records_total": len(ts.records)},
    )


def _cap(
    cap, cap_epsilon, cap_neighbors, cap_functional, cap_slack, cap_slack_note, shadows
) -> CapSpec | None:
    """The cap on |mem_h| the counterfactual estimate is compared with: a :class:`CapSpec`, a
    number (``cap``), or the cap of pure ``cap_epsilon``-DP ([MX] Thm. 4.1)."""
    if cap is not None and cap_epsilon is not None:
        raise InputError("give either --cap or --cap-epsilon, not both")
    if (cap is not None or cap_epsilon is not None) and not shadows:
        raise InputError(
            "a cap is compared with the counterfactual estimate, which needs --shadows N"
        )
    spec = None
    cap_relation = neighbors_label(
        cap_neighbors
    )  # 'replace-one' or 'add/remove', whichever spelling was given
    if isinstance(cap, CapSpec):
        spec = cap
    elif cap_epsilon is not None:
        spec = cap_from_epsilon(cap_epsilon, relation=cap_relation, functional=cap_functional)
    elif cap is not None:
        fn = cap_functional or ("LOO" if cap_relation == "add/remove" else "RO")
        spec = CapSpec(
            value=cap,
            functional=fn,
            relation=cap_relation,
            via_group_privacy=(fn == "RO" and cap_relation == "add/remove"),
            source="--cap",
        )
    if spec is not None and cap_slack is not None:
        spec = replace(
            spec,
            conversion_slack=cap_slack,
            conversion_note=cap_slack_note or "given with --cap-slack",
        )
    return spec


@public(
    renamed=dict(
        nonmembers="controls",
        fpr="alpha",
        cap_relation="cap_neighbors",
        soundness_relation="soundness_neighbors",
        policy="policies",
    )
)
def audit(
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
    out: str | os.PathLike | None = None,
    reference: str | os.PathLike | LoadedModel | transformers.PreTrainedModel | tuple | None = None,
    shadows: int = 0,
    attacks: Sequence[str] | None = None,
    k: str | float | Fraction = "0.2",
    alpha: str | float | Fraction | None = None,
    confidence: float = 0.95,
    prefix_tokens: int = DEFAULT_PREFIX_TOKENS,
    suffix_tokens: int = DEFAULT_SUFFIX_TOKENS,
    policies: str | Sequence[str] | None = DEFAULT_POLICY,
    m: int = 1,
    trigger: str | None = None,
    verifier_threshold: float = 0.15,
    kappa: float | None = None,
    soundness_epsilon: float | None = None,
    soundness_neighbors: str = "add-remove",
    cap: float | None = None,
    cap_epsilon: float | None = None,
    cap_neighbors: str = "add-remove",
    cap_functional: str | None = None,
    cap_slack: float | None = None,
    cap_slack_note: str | None = None,
    shadow_mode: str | None = None,
    shadow_base: str
    | os.PathLike
    | LoadedModel
    | transformers.PreTrainedModel
    | tuple
    | None = None,
    shadow_steps: int | None = None,
    shadow_epochs: float | None = None,
    shadow_lr: float | None = None,
    shadow_batch_size: int | None = None,
    shadow_seq_len: int | None = None,
    shadow_seed: int | None = None,
    shadow_warmup: int | None = None,
    shadow_background: str
    | os.PathLike
    | Sequence[str | Mapping]
    | pandas.DataFrame
    | pyarrow.Table
    | datasets.Dataset
    | None = None,
    design_seed: int = 0,
    text_field: str | None = None,
    id_field: str | None = None,
    input_format: str | None = None,
    limit: int | None = None,
    dtype: str | None = None,
    sot: str | None = None,
    device: str | None = None,
    device_map: str | None = None,
    max_memory: Mapping | Sequence[str] | str | None = None,
    offload_folder: str | os.PathLike | None = None,
    allow_mixed_numerics: bool = False,
    batch_size: int | str = 16,
    trust_remote_code: bool = False,
    threads: int | None = None,
    backend: str = "local",
    url: str | None = None,
    api_key_env: str | None = None,
    api_key_file: str | os.PathLike | None = None,
    served_model: str | None = None,
    max_concurrency: int | None = None,
    progress: bool | ProgressCallback = True,
    log: LogCallback | None = None,
) -> AuditRun:
    """Audit ``model`` on ``members`` vs non-member ``controls`` (``memclaim audit``): AUC with DeLong
    interval and leak signal 2 AUC - 1 for every attack, TPR at a certified FPR with a
    Clopper-Pearson interval, greedy and sampled extraction from each record's own prefix (and
    ``trigger``), the unlearning verifier, and with ``shadows`` (even, >= 4) LiRA and the
    counterfactual memorization estimate (COND), compared with ``cap`` (a number, or
    ``cap_epsilon`` for a pure-DP cap) when given.

    ``members``/``controls``: text files, lists of texts or records, or tables (pandas, pyarrow,
    ``datasets.Dataset``), read as by :func:`memclaim.score`; ``limit``: only the first N of each
    (a quick look, marked as limited in the report). ``alpha``: the target FPR
    (read exactly; default 0.01 when the controls can certify it, else dropped with a note;
    given explicitly, an FPR the controls cannot certify is refused). ``cap_neighbors``,
    ``soundness_neighbors``: 'add-remove' or 'replace-one'. Renamed in 0.2 (the old names
    still work, with a DeprecationWarning): nonmembers -> controls, fpr -> alpha,
    cap_relation -> cap_neighbors, soundness_relation -> soundness_neighbors, policy ->
    policies. ``policies``: the sampling policy of the extraction audit, a string or a list of
    one (None or 'none': greedy only). ``kappa`` with
    ``soundness_epsilon``: the canary soundness check ([MX] Cor. 5.3). ``out``: the score store,
    shadows and report go there as the CLI writes them (re-running reuses everything);
    ``out=None`` works in a temporary folder and writes no report until ``save(folder)``.

    ``device``, ``device_map``, ``max_memory``, ``offload_folder``, ``dtype``: where and in what
    dtype the model runs (:func:`memclaim.load_model`; default: the first GPU in bfloat16, else
    the CPU in float32); the device class and dtype are part of the procedure. ``allow_mixed_numerics``:
    compare scores computed with different numerics (refused otherwise; the report says so).
    ``batch_size``: windows per forward pass, or ``"auto"`` (on a GPU the largest batch whose
    activations fit 80% of free memory, on the CPU 16; CPU scores are the same at every size).

    ``backend="openai"`` with ``url`` (and ``api_key_env``/``api_key_file``, ``served_model``,
    ``max_concurrency`` as for :func:`memclaim.score`): audit a model behind an inference server
    (docs/served.md), ``model`` naming its tokenizer. The attacks and policies the server's top-K
    log-probs give exactly run; what they cannot give is refused by name before any request:
    min-k%++ (the full distribution's moments; left out, with a note, when ``attacks`` is not
    given), ``shadows`` and ``reference``.

    >>> import memclaim as mc
    >>> a = mc.audit("toy", member_texts, control_texts, prefix_tokens=16, suffix_tokens=16,
    ...              alpha="0.05")                                            # doctest: +SKIP
    >>> a.attack("loss").auc.auc                                              # doctest: +SKIP
    0.97
    """
    set_threads(threads)
    if out is not None:  # OUT/scores and the report: refused now, not after scoring
        check_out(out, store="scores", report=True)
    policy = one_policy(policies, what="the extraction audit")
    if (
        check_limit(limit) is not None
    ):  # the first N members and the first N controls, recorded as limited
        members = limited_texts(
            read_texts(
                members, label="members", text_field=text_field, id_field=id_field, fmt=input_format
            ),
            limit,
        )
        controls = limited_texts(
            read_texts(
                controls,
                label="nonmembers",
                text_field=text_field,
                id_field=id_field,
                fmt=input_format,
            ),
            limit,
        )
    explicit_fpr = alpha is not None
    if isinstance(attacks, str):
        attacks = tuple(a.strip() for a in attacks.split(",") if a.strip())
    settings = AuditSettings(
        prefix_tokens=prefix_tokens,
        suffix_tokens=suffix_tokens,
        attacks=attacks,
        k=k,
        fpr=alpha if explicit_fpr else "0.01",
        confidence=confidence,
        extraction_policy=None if policy is None or str(policy).lower() == "none" else policy,
        m=m,
        trigger=trigger,
        verifier_threshold=verifier_threshold,
        batch_size=batch_size,
    )
    cap_spec = _cap(
        cap, cap_epsilon, cap_neighbors, cap_functional, cap_slack, cap_slack_note, shadows
    )
    if backend not in ("local", "openai"):
        raise InputError(
            f"memclaim audit runs with --backend local or openai, not {backend!r}",
            hint="score with `memclaim score --backend ray` and read the store with memclaim "
            "test, or audit with --backend local",
        )
    if backend == "openai":  # refused by name before any request (issue 27)
        check_served_audit(attacks, reference=reference, shadows=shadows)
    m_loaded = scoring_model(
        model,
        backend=backend,
        dtype=dtype,
        sot=sot,
        trust_remote_code=trust_remote_code,
        device=device,
        device_map=device_map,
        max_memory=max_memory,
        offload_folder=offload_folder,
    )
    backend_obj = make_backend(
        m_loaded,
        parse_policies(audit_policies(settings)),
        backend=backend,
        batch_size=batch_size,
        log=log,
        url=url,
        api_key_env=api_key_env,
        api_key_file=api_key_file,
        served_model=served_model,
        max_concurrency=max_concurrency,
    )
    recipe = None
    background = ()
    if shadows:
        overrides = {
            k_: v
            for k_, v in (
                ("lr", shadow_lr),
                ("batch_size", shadow_batch_size),
                ("seq_len", shadow_seq_len),
                ("seed", shadow_seed),
                ("warmup_steps", shadow_warmup),
            )
            if v is not None
        }
        if shadow_steps is not None and shadow_epochs is not None:
            raise InputError("give either --shadow-steps or --shadow-epochs, not both")
        if shadow_steps is not None:
            overrides.update(steps=shadow_steps, epochs=None)
        elif shadow_epochs is not None:
            overrides.update(epochs=shadow_epochs, steps=None)
        recipe, background = default_shadow_recipe(
            m_loaded, base=shadow_base, mode=shadow_mode, **overrides
        )
        if shadow_background:
            if isinstance(shadow_background, (str, Path)):
                background = tuple(r.text for r in read_passages(shadow_background).records)
            else:
                background = tuple(shadow_background)
    work = WorkFolder(out, prefix="memclaim-audit-")
    res = run_audit(
        m_loaded,
        members,
        controls,
        out_dir=work.path,
        settings=settings,
        reference=reference,
        shadows=shadows,
        shadow_recipe=recipe,
        shadow_background=background,
        design_seed=design_seed,
        cap=cap_spec,
        kappa=kappa,
        soundness_epsilon=soundness_epsilon,
        soundness_relation=neighbors_label(soundness_neighbors),
        text_field=text_field,
        id_field=id_field,
        input_format=input_format,
        dtype=m_loaded.dtype,
        sot=sot,
        allow_mixed_numerics=allow_mixed_numerics,
        progress=progress,
        log=log,
        strict_fpr=explicit_fpr,
        trust_remote_code=trust_remote_code,
        backend=backend_obj if backend == "openai" else None,
    )
    # the verifier gives a verdict only on a model that went through unlearning (memclaim_train.json
    # of `memclaim train unlearn`); any other model's recovered fraction is reported as a number
    res = replace(res, model={**res.model, "unlearned": _was_unlearned(m_loaded)})
    if out is not None:
        res = write_audit_report(res, out)
    return AuditRun(result=res, work=work)


def _was_unlearned(model) -> bool:
    path = getattr(model, "path", None)
    if path is None:
        return False
    try:
        return (
            read_json_object(Path(path) / TRAIN_FILE, "training manifest").get("kind") == "unlearn"
        )
    except InputError:
        return False


# ------------------------------------------------------------------ the disagreement table
@dataclass(frozen=True, repr=False)
class AuditTableRun(Result):
    """The audit-disagreement table ([MX] Fig. 12): ``result``
    (:class:`~memclaim.audits.table_run.TableResult`: the table and one detail per instance).
    ``to_dict()`` is what ``memclaim audit table --json`` prints; ``to_pandas()`` the leak
    signals (rows = instances, columns = audits); ``save(folder)`` writes every instance's
    report, the table's report.{json,md,html}, table.md and disagreement.png."""

    result: TableResult
    work: WorkFolder | None = field(default=None, repr=False, compare=False)

    @property
    def table(self):
        return self.result.table

    @property
    def report(self) -> dict | None:
        return self.result.report

    def to_dict(self) -> dict:
        return jsonable(self.result.to_dict())

    def to_pandas(self):
        import pandas as pd

        t = self.result.table
        return pd.DataFrame(
            t.signal_matrix(), index=list(t.rows), columns=[c.name for c in t.columns]
        )

    def save(self, folder) -> dict:
        """Write the reports into ``folder`` (each instance's under folder/instances/SLUG when the
        table ran there); returns the table report's paths."""
        return write_table_report(self.result, folder).report

    def __repr__(self) -> str:
        return f"AuditTableRun({len(self.result.table.rows)} instances x {len(self.result.table.columns)} audits)"


@public
def audit_table(
    spec: Mapping | str | Path | TableSpec,
    *,
    out: str | os.PathLike | None = None,
    base_dir: str | os.PathLike | None = None,
    threads: int | None = None,
    dtype: str | None = None,
    device: str | None = None,
    device_map: str | None = None,
    max_memory: Mapping | Sequence[str] | str | None = None,
    offload_folder: str | os.PathLike | None = None,
    allow_mixed_numerics: bool = False,
    progress: bool | ProgressCallback = True,
    log: LogCallback | None = None,
) -> AuditTableRun:
    """Run the audits of every instance of ``spec`` (a JSON file or a dict; format:
    :data:`memclaim.audits.table_spec.TABLE_SPEC_DOC`, paths relative to the file's folder or
    ``base_dir``) and assemble the audit-disagreement table (``memclaim audit table``). Every
    instance is checked before any model work. ``out``: each instance's store and report under
    OUT/instances, the table's report.{json,md,html}, table.md and disagreement.png in OUT;
    ``out=None`` works in a temporary folder (reports on ``save(folder)``). ``device``,
    ``device_map``, ``max_memory``, ``offload_folder``, ``dtype``: where and in what dtype every
    model of the table runs, as for :func:`memclaim.audit` (shadows train and score there too);
    checked before any instance runs. ``allow_mixed_numerics``: an instance may compare scores
    computed with different numerics (refused otherwise; its report says so).

    >>> import memclaim as mc
    >>> t = mc.audit_table("spec.json")                                       # doctest: +SKIP
    >>> t.to_pandas().loc["naive duplicate", "loss-MIA"]                      # doctest: +SKIP
    0.94
    """
    set_threads(threads)
    if out is not None:
        check_out_dir(out)
    checked = spec if isinstance(spec, TableSpec) else read_table_spec(spec, base_dir=base_dir)
    placement = resolve_placement(
        device=device, device_map=device_map, max_memory=max_memory, offload_folder=offload_folder
    )  # a device that is not there: refused now
    body = resolve_dtype(dtype, placement.device)
    work = WorkFolder(out, prefix="memclaim-audit-table-")
    res = run_audit_table(
        checked,
        out_dir=work.path,
        log=log,
        progress=progress,
        dtype=body,
        placement=placement,
        allow_mixed_numerics=allow_mixed_numerics,
    )
    if out is not None:
        res = write_table_report(res, out)
    return AuditTableRun(result=res, work=work)
