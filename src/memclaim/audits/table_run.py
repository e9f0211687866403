"""Running the audit-disagreement table ([MX] Fig. 12, Cor. 6.2) from a checked spec
(:mod:`memclaim.audits.table_spec`): each instance's audit (a model and its texts, or two
pre-scored runs), then the table's cells. Nothing is written here but the instances' score
stores; the report is :func:`memclaim.report.audit.write_table_report`
(:func:`memclaim.api.audit_table` runs both)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..jsonutil import ResultMixin
from ..models.placement import Placement
from ..procedure import DEFAULT_PREFIX_TOKENS, DEFAULT_SUFFIX_TOKENS
from ..progress import LogCallback, ProgressCallback, emit_log
from ..store.results import load_run_scores
from ..text.io import read_passages
from ..text.windows import passage_windows
from .result import AuditResult
from .run import audit_runs, load_audited_model, run_audit
from .settings import AuditSettings
from .table import AuditColumn, DisagreementTable, auc_cell, build_table, informed_cell, rate_cell
from .table_spec import TableSpec, baseline_kwargs, read_table_spec
from .verifier import DEFAULT_THRESHOLD, VerifierResult, verify

__all__ = ["TableResult", "run_audit_table", "instance_folder"]


@dataclass(frozen=True)
class TableResult(ResultMixin):
    """The table, one detail dict per instance (headline, store, report paths, verifier) and,
    once written, the table's report paths and heatmap. ``instance_results`` holds each
    model-and-files instance's :class:`AuditResult` and its folder (for its own report)."""

    table: DisagreementTable
    audits: dict
    report: dict | None = None
    heatmap: str | None = None
    instance_results: Mapping[str, tuple] = field(default_factory=dict, repr=False, compare=False)

    def to_dict(self) -> dict:
        return {
            "table": self.table.to_dict(),
            "markdown": self.table.to_markdown(),
            "audits": self.audits,
            "report": self.report,
            "heatmap": self.heatmap,
        }


def _instance_settings(inst: dict, gs: dict) -> AuditSettings:
    return AuditSettings(
        prefix_tokens=int(
            inst.get("prefix_tokens", gs.get("prefix_tokens", DEFAULT_PREFIX_TOKENS))
        ),
        suffix_tokens=int(
            inst.get("suffix_tokens", gs.get("suffix_tokens", DEFAULT_SUFFIX_TOKENS))
        ),
        confidence=float(gs.get("confidence", 0.95)),
        k=gs.get("k", "0.2"),
        verifier_threshold=float(gs.get("verifier_threshold", DEFAULT_THRESHOLD)),
        extraction_policy=None,
        attacks=None,
    )


def instance_folder(out_dir: str | Path, name: str, j: int) -> Path:
    """Where instance ``j`` keeps its score store, shadows and report: OUT/instances/SLUG.

    >>> instance_folder("runs/table", "naive duplicate", 0).as_posix()
    'runs/table/instances/naive-duplicate-0'
    """
    slug = "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in name)[:60] + f"-{j}"
    return Path(out_dir) / "instances" / slug


def _run_instance(
    spec: TableSpec,
    j: int,
    inst: dict,
    *,
    out_dir,
    log,
    progress,
    dtype: str = "auto",
    placement=None,
    allow_mixed_numerics: bool = False,
):
    """One instance's audit: (AuditResult, verifier result, folder or None for pre-scored runs).
    Its model (and its verifier model) are loaded with the table's ``dtype`` and ``placement``."""
    name = inst["name"]
    settings = _instance_settings(inst, spec.settings)
    if "members_run" in inst or "nonmembers_run" in inst:
        mr = load_run_scores(
            spec.path(inst["members_run"]["store"]),
            run=inst["members_run"].get("run"),
            policy=inst["members_run"].get("policy", "full"),
        )
        nr = load_run_scores(
            spec.path(inst["nonmembers_run"]["store"]),
            run=inst["nonmembers_run"].get("run"),
            policy=inst["nonmembers_run"].get("policy", "full"),
        )
        res = audit_runs(
            mr,
            nr,
            settings=replace(settings, attacks=("loss",)),
            allow_mixed_numerics=allow_mixed_numerics,
        )
        return res, res.verifier, None
    n_sh = int(inst.get("shadows", spec.settings.get("shadows", 0)))
    attacks = ("loss",) + (("lira-online",) if n_sh else ())
    model = inst["model"]
    mp = spec.path(model)
    folder = instance_folder(out_dir, name, j)
    loaded = load_audited_model(str(mp) if mp.exists() else model, dtype=dtype, placement=placement)
    res = run_audit(
        loaded,
        spec.path(inst["members"]),
        spec.path(inst["nonmembers"]),
        out_dir=folder,
        settings=replace(settings, attacks=attacks),
        shadows=n_sh,
        log=log,
        progress=progress,
        dtype=loaded.dtype,
        allow_mixed_numerics=allow_mixed_numerics,
    )
    ver = res.verifier
    if inst.get("verifier_model"):
        vp = spec.path(inst["verifier_model"])
        recs = read_passages(spec.path(inst["members"])).records
        ver = _verify_long_enough(
            str(vp) if vp.exists() else inst["verifier_model"],
            recs,
            settings,
            dtype=dtype,
            placement=placement,
        )
    return res, ver, folder


def _instance_cells(
    inst: dict, res: AuditResult, ver: VerifierResult | None, settings: AuditSettings
) -> dict:
    bl = baseline_kwargs(inst.get("baseline"), inst["name"])
    cells = {}
    ex = res.extraction
    cells["extraction at prefix"] = rate_cell(
        ex.greedy_successes,
        ex.n,
        confidence=settings.confidence,
        note="greedy, record's own prefix",
        **bl,
    )
    cells["loss-MIA"] = auc_cell(res.attack("loss").auc)
    if any(e.attack == "lira-online" for e in res.attacks):
        cells["LiRA"] = auc_cell(res.attack("lira-online").auc)
    if ver is not None:
        cells["unlearning verifier"] = rate_cell(
            ver.retained,
            ver.n,
            confidence=settings.confidence,
            **bl,
            note=f"verifier: {ver.verdict} (recovered {ver.rate:.3f} {'<' if ver.forgotten else '>='} {ver.threshold:g})",
        )
    inf = inst.get("informed")
    if inf:
        cells["informed recovery"] = informed_cell(
            int(inf["successes"]),
            int(inf["trials"]),
            cap=inf.get("cap"),
            confidence=settings.confidence,
        )
    return cells


def _columns(any_lira: bool, any_informed: bool) -> list[AuditColumn]:
    cols = [
        AuditColumn(
            "extraction at prefix", description="greedy extraction from the record's own prefix"
        ),
        AuditColumn("loss-MIA", description="loss attack, 2 AUC - 1"),
    ]
    if any_lira:
        cols.append(AuditColumn("LiRA", description="online LiRA with shadows, 2 AUC - 1"))
    cols.append(
        AuditColumn("unlearning verifier", description="recovered fraction (verbatim, own prefix)")
    )
    if any_informed:
        cols.append(AuditColumn("informed recovery", informed=True, description="ground truth"))
    return cols


def run_audit_table(
    spec: Mapping | str | Path | TableSpec,
    *,
    out_dir: str | Path,
    base_dir: str | Path | None = None,
    log: LogCallback | None = None,
    progress: ProgressCallback | None = None,
    dtype: str = "auto",
    placement: Placement | None = None,
    allow_mixed_numerics: bool = False,
) -> TableResult:
    """Run the audits of every instance in ``spec`` (a dict, a JSON file or a :class:`TableSpec`,
    see :data:`TABLE_SPEC_DOC`) and assemble the [MX] Fig. 12 disagreement table. Each
    model-and-files instance keeps its store under ``out_dir/instances/SLUG``; nothing else is
    written (:func:`memclaim.report.audit.write_table_report` writes the reports). Every model of
    the table is loaded with ``dtype`` and ``placement`` (a
    :class:`~memclaim.models.placement.Placement`; None: the default device); pre-scored runs
    are read as they are, and ``allow_mixed_numerics`` lets an instance compare runs scored with
    different numerics.

    >>> from memclaim.audits.table_run import run_audit_table
    >>> t = run_audit_table("instances.json", out_dir="runs/table")            # doctest: +SKIP
    >>> list(t.table.rows)                                                      # doctest: +SKIP
    ['naive duplicate', 'pre-scored']
    """
    if not isinstance(spec, TableSpec):
        spec = read_table_spec(
            spec, base_dir=base_dir
        )  # every instance is checked before any model work
    rows: dict = {}
    details: dict = {}
    results: dict = {}
    for j, inst in enumerate(spec.instances):
        name = inst["name"]
        emit_log(log, f"instance {name!r}")
        res, ver, folder = _run_instance(
            spec,
            j,
            inst,
            out_dir=out_dir,
            log=log,
            progress=progress,
            dtype=dtype,
            placement=placement,
            allow_mixed_numerics=allow_mixed_numerics,
        )
        rows[name] = _instance_cells(inst, res, ver, _instance_settings(inst, spec.settings))
        details[name] = {
            "headline": res.headline(),
            "store": res.store,
            "report": res.report,
            "verifier": None
            if ver is None
            else {"rate": ver.rate, "verdict": ver.verdict, "threshold": ver.threshold},
        }
        if folder is not None:
            results[name] = (res, folder)
    any_lira = any("LiRA" in cells for cells in rows.values())
    any_informed = any("informed recovery" in cells for cells in rows.values())
    table = build_table(_columns(any_lira, any_informed), rows)
    return TableResult(table=table, audits=details, instance_results=results)


def _verify_long_enough(
    model, records, settings: AuditSettings, *, dtype: str = "auto", placement=None
) -> VerifierResult:
    """The verifier on the member records long enough for the audit's windows (the same records
    the other columns read)."""
    lm = load_audited_model(model, dtype=dtype, placement=placement)
    ws = passage_windows(
        records,
        lm.tokenizer,
        prefix_tokens=settings.prefix_tokens,
        suffix_tokens=settings.suffix_tokens,
    )
    return verify(lm, ws, threshold=settings.verifier_threshold, confidence=settings.confidence)
