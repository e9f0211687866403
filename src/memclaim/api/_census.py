"""``memclaim.census``: a single-document census against a matched control document ([EM] §5,
App. E): sliding-window scores of each document and its control into one store, tau_doc =
10^ceil(log10 of the top decontaminated control score) (Eq. 31), the coverage of the document by
window suffixes scoring above it (Eq. 9), the coverage curve over the margin, a per-character
heatmap and the budget view. The census has no certified false-positive rate (see the report).

Exclusions remove *verified* quotations of earlier text from the control before tau_doc is set
([EM] §5, E.1); the in-training document is never culled (format: :mod:`memclaim.text.spans`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Unpack

import numpy as np

from ..claims.census import WindowScores
from ..claims.census_pairs import CensusOfPairs, census_of_pairs
from ..claims.scores import controls_at_atom_hint
from ..errors import InputError
from ..fsutil import sha256_bytes, sha256_file
from ..procedure import STORED_PROCEDURE_MAY_DIFFER, Procedure
from ..progress import LogCallback, ProgressCallback
from ..report.census import census_headline, census_pairs_report
from ..report.core import Doc, fmt_num, pct, write_report
from ..report.words import limit_note
from ..runtime import Runtime
from ..scoring.engine import CENSUS_STATS
from ..scoring.results import RunScores, load_run_scores
from ..scoring.runner import RunSummary, index_windows, run_scoring
from ..text.io import read_document, text_key
from ..text.spans import exclude_spans_from_lines, parse_exclude_spans
from ..validate import batch_size as check_batch_size
from ..validate import in_open_unit, integer, query_budget
from ._common import (
    Document,
    Result,
    WorkFolder,
    build_prompt_rule,
    check_limit,
    check_out,
    cut_windows,
    document_path,
    jsonable,
    make_backend,
    near_verbatim_settings,
    policies_of,
    set_threads,
    window_lengths,
)
from ._model import scoring_model
from ._public import public
from ._runs import store_input_record, stored_test_procedure
from ._shortcuts import CensusOptions, take_options

if TYPE_CHECKING:  # the annotations' names only; nothing here is imported at run time
    import transformers

    from ..models.loader import LoadedModel

__all__ = ["census", "CensusRun"]


@dataclass(frozen=True, repr=False)
class CensusRun(Result):
    """The census of every document/control pair (``census``:
    :class:`~memclaim.claims.census_pairs.CensusOfPairs`, one
    :class:`~memclaim.claims.census.CensusResult` per document in ``census.results``), the
    scoring runs, the inputs' provenance and, once written, the report's paths. ``to_dict()`` is
    what ``memclaim census --json`` prints; ``to_pandas()`` one row per document;
    ``save(folder)`` writes report.{json,md,html}."""

    census: CensusOfPairs
    pairs: tuple
    policy: str
    store: str
    use_global: bool
    runs: dict
    inputs: tuple
    controls_description: str | None = None
    report: dict | None = None
    work: WorkFolder | None = field(default=None, repr=False, compare=False)

    @property
    def headlines(self) -> list[str]:
        """One sentence per document: coverage above tau_doc under the decoding policy used, and
        how tau_doc was set."""
        return [census_headline(r, self.census.procedure) for r in self.census.results]

    @property
    def results(self):
        return self.census.results

    @property
    def limited(self) -> str | None:
        """What a ``limit`` run left out, in words (None for a census of whole documents)."""
        return limit_note(self.inputs)

    def to_dict(self) -> dict:
        c = self.census
        several = len(self.pairs) > 1
        res = [jsonable(r.to_dict()) for r in c.results]
        return jsonable(
            {
                **({"limited": self.limited} if self.limited else {}),
                "headlines": self.headlines,
                "log10_tau": [r.log10_tau for r in c.results],
                "coverage": [r.coverage for r in c.results],
                "n_flagged": len(c.flagged),
                "report": self.report,
                "policy": self.policy,
                "store": self.store,
                "global": bool(self.use_global),
                "per_pair_log10_tau": [t.log10_tau for t in c.thresholds],
                "global_log10_tau": None
                if c.global_threshold is None
                else c.global_threshold.log10_tau,
                "pairs": [
                    {
                        "document": d,
                        "control": k,
                        "n_windows": r["n_windows"],
                        "n_control_windows": r["threshold"]["n_control_windows"],
                        "n_excluded": r["threshold"]["n_excluded"],
                        "max_control_log10": r["threshold"]["max_control_log10"],
                        "log10_tau": r["log10_tau"],
                        "coverage": r["coverage"],
                        "n_windows_above": r["n_windows_above"],
                        "max_margin": r["max_margin"],
                        "coverage_at_margins": r["coverage_at_margins"],
                    }
                    for (d, k), r in zip(self.pairs, res)
                ],
                "scoring": {
                    f"{role}-{i + 1}" if several else role: {
                        k: v
                        for k, v in r.to_dict().items()
                        if k
                        in (
                            "run_id",
                            "n_windows",
                            "units_scored",
                            "units_reused",
                            "model_loaded",
                            "seconds",
                        )
                    }
                    for (i, role), r in self.runs.items()
                },
            }
        )

    def to_pandas(self):
        """One row per document: its control, windows, tau_doc, coverage, windows above, margin."""
        import pandas as pd

        rows = self.to_dict()["pairs"]
        return pd.DataFrame(
            [{k: v for k, v in r.items() if k != "coverage_at_margins"} for r in rows]
        )

    def bundle(self):
        """report.{json,md,html} rendered in memory (nothing written)."""
        return census_pairs_report(
            self.census,
            inputs=list(self.inputs),
            controls_description=self.controls_description,
            command="census",
        )

    def save(self, folder) -> dict:
        """Write report.{json,md,html} into ``folder`` (all or nothing); returns the paths."""
        return write_report(folder, self.bundle())

    def scores(self, pair: int = 0, role: str = "document") -> RunScores:
        """The stored window scores of pair ``pair``'s ``document`` or ``control``."""
        return load_run_scores(self.store, run=self.runs[(pair, role)].run_id, policy=self.policy)

    def __repr__(self) -> str:
        rs = self.census.results
        parts = [
            f"{r.document_name}: {pct(r.coverage)} covered above tau_doc = 1e{r.log10_tau}"
            for r in rs[:2]
        ]
        more = f", +{len(rs) - 2} more" if len(rs) > 2 else ""
        return f"CensusRun({'; '.join(parts)}{more}; policy {self.policy})"

    def _view(self):
        """The notebook view: each document's headline in the report's claim box, and the
        per-document table of :meth:`to_pandas`."""
        doc = Doc("Single-document census")
        for r, line in zip(self.census.results, self.headlines):
            doc.callout(line, "claim" if r.coverage > 0 else "null")
        rows = [
            (
                d["document"],
                d["control"],
                d["n_windows"],
                f"1e{d['log10_tau']}",
                pct(d["coverage"]),
                d["n_windows_above"],
                fmt_num(d["max_margin"]),
            )
            for d in self.to_dict()["pairs"]
        ]
        return doc.table(
            [
                "document",
                "control",
                "windows",
                "tau_doc",
                "coverage",
                "windows above tau",
                "largest margin (log10)",
            ],
            rows,
        )


def _text_of(x, texts: dict):
    """(text, sha256, name, where) of a document given as a path or a :class:`Document`."""
    if isinstance(x, Document):
        return x.text, sha256_bytes(x.text.encode("utf-8")), x.name, None
    if not isinstance(x, (str, Path)):
        raise InputError(
            f"a document must be a file path or a memclaim.Document, got {type(x).__name__}",
            hint="pass a path, or memclaim.Document(text, name=...)",
        )
    if x not in texts:
        texts[x] = read_document(
            document_path(x)
        )  # (text, sha256); raises on missing, empty, non-UTF-8
    text, digest = texts[x]
    return text, digest, Path(x).name, str(x)


def _exclusions(exclude_spans, control_specs):
    if exclude_spans is None:
        return [()] * len(control_specs)
    if isinstance(exclude_spans, (str, Path)):
        return parse_exclude_spans(exclude_spans, control_specs)
    return exclude_spans_from_lines(list(exclude_spans), control_specs)


# the defaults of census()'s shortcuts that are not the procedure's and runtime's own
# (memclaim.api._shortcuts.FLAT_DEFAULTS); each is the default its keyword had
_CENSUS_DEFAULTS: dict = {
    "exclude_spans": None,
    "min_similarity": 90.0,
    "use_global": False,
    "budget_delta": 0.05,
    "realistic_budget": 100000.0,
    "controls_description": None,
    "allow_mixed_numerics": False,
}


@public(renamed=dict(policy="policies"))
def census(
    model: str | os.PathLike | LoadedModel | transformers.PreTrainedModel | tuple,
    document: str | os.PathLike | Document | None = None,
    control: str | os.PathLike | Document | None = None,
    *,
    pairs: Sequence[tuple] = (),
    stride: int,
    limit: int | None = None,
    references: Sequence[str | os.PathLike | Document] = (),
    out: str | os.PathLike | None = None,
    procedure: Procedure | Mapping | None = None,
    runtime: Runtime | Mapping | None = None,
    progress: bool | ProgressCallback = True,
    log: LogCallback | None = None,
    **options: Unpack[CensusOptions],
) -> CensusRun:
    """Census of ``document`` against its matched ``control`` ([EM] §5) (``memclaim census``).

    ``document``/``control``: text files or :class:`memclaim.Document` values; ``pairs`` adds
    more (document, control) pairs, read at one global threshold with ``use_global`` ([EM] §7).
    Windows of ``prefix_tokens`` + ``suffix_tokens`` (default 50 + 50) every ``stride`` tokens;
    stride = suffix length tiles the text; ``limit``: only each document's first N windows (a quick
    look, marked as limited in the report). The census uses the first of ``policies`` (a
    probability score; greedy's 0/1 score has no threshold). ``exclude_spans``: an exclusion file
    or a list of its lines ('text: QUOTE', 'START END', 'CONTROL START END'). ``references``:
    texts (files or Documents) searched for near-verbatim copies of high-scoring control windows
    (flagged for a person to confirm, never removed). ``out``: the store goes to OUT/store and the
    report to OUT/report.{json,md,html}; ``out=None`` works in a temporary folder (report on
    ``save(folder)``). Everything is checked and every document cut into windows before the
    model is loaded.

    ``device``, ``device_map``, ``max_memory``, ``offload_folder``, ``dtype``: where and in what
    dtype the model runs (:func:`memclaim.load_model`; default: the first GPU in bfloat16, else
    the CPU in float32); the device class and dtype are part of the procedure. ``allow_mixed_numerics``:
    compare scores computed with different numerics (refused otherwise; the report says so).
    ``batch_size``: windows per forward pass, or ``"auto"`` (on a GPU the largest batch whose
    activations fit 80% of free memory, on the CPU 16; CPU scores are the same at every size).

    ``procedure`` and ``runtime`` (a :class:`memclaim.Procedure` and a :class:`memclaim.Runtime`,
    or dicts of their options; the stride is ``stride``) carry the scoring whole, as for
    :func:`memclaim.score`; every option above is also a keyword of its own (``**options``), and
    an option given both ways is refused naming both values.

    >>> import memclaim as mc
    >>> c = mc.census("toy", "book.txt", "new-book.txt", stride=32, prefix_tokens=32, suffix_tokens=32,
    ...               policies=["full"])                                       # doctest: +SKIP
    >>> c.results[0].coverage, c.results[0].log10_tau                          # doctest: +SKIP
    (0.42, -19)
    >>> c = mc.census("toy", "book.txt", "new-book.txt", stride=32,
    ...               procedure={"prefix_tokens": 32, "suffix_tokens": 32},
    ...               runtime=mc.Runtime(batch_size=32))                      # doctest: +SKIP
    """
    o = take_options(
        census,
        CensusOptions,
        options,
        procedure=procedure,
        runtime=runtime,
        defaults=_CENSUS_DEFAULTS,
    )
    (
        prefix_tokens,
        suffix_tokens,
        policies,
        prompt_templates,
        chat_template,
        aggregate,
        near_verbatim,
        beams,
        exclude_spans,
        min_similarity,
        use_global,
        budget_delta,
        realistic_budget,
        controls_description,
        batch_size,
        unit_size,
        backend,
        address,
        workers,
        gpus_per_worker,
        threads_per_worker,
        url,
        api_key_env,
        api_key_file,
        served_model,
        max_concurrency,
        dtype,
        device,
        device_map,
        max_memory,
        offload_folder,
        allow_mixed_numerics,
        sot,
        allow_pickle,
        trust_remote_code,
        threads,
    ) = o.get(
        "prefix_tokens",
        "suffix_tokens",
        "policies",
        "prompt_templates",
        "chat_template",
        "aggregate",
        "near_verbatim",
        "beams",
        "exclude_spans",
        "min_similarity",
        "use_global",
        "budget_delta",
        "realistic_budget",
        "controls_description",
        "batch_size",
        "unit_size",
        "backend",
        "address",
        "workers",
        "gpus_per_worker",
        "threads_per_worker",
        "url",
        "api_key_env",
        "api_key_file",
        "served_model",
        "max_concurrency",
        "dtype",
        "device",
        "device_map",
        "max_memory",
        "offload_folder",
        "allow_mixed_numerics",
        "sot",
        "allow_pickle",
        "trust_remote_code",
        "threads",
    )
    # --------------------------------------------------------------- check everything first
    if (document is None) != (control is None):
        n_d, n_c = int(document is not None), int(control is not None)
        raise InputError(
            f"{n_d} --document but {n_c} --control: they pair up in order",
            hint="give one --control per --document, or use --pair DOC CTRL",
        )
    pair_items = ([(document, control)] if document is not None else []) + [tuple(p) for p in pairs]
    if not pair_items:
        raise InputError(
            "no document to census", hint="pass --document BOOK --control BOOK (or --pair DOC CTRL)"
        )
    if any(len(p) != 2 for p in pair_items):
        raise InputError(
            "every pair is (document, control)", hint="e.g. pairs=[('a.txt', 'a-control.txt')]"
        )
    stride = integer(
        "--stride", stride, minimum=1
    )  # 8.0 is the stride 8 (sliding_windows slices by it)
    check_limit(limit)
    prefix_tokens, suffix_tokens = window_lengths(prefix_tokens, suffix_tokens)
    if budget_delta is not None:
        in_open_unit("--budget-delta", budget_delta)
    if not 0 <= min_similarity <= 100:
        raise InputError(
            f"--min-similarity must lie in [0, 100], got {min_similarity!r}", hint="e.g. 90"
        )
    batch_size = check_batch_size(batch_size)
    query_budget("--budget", realistic_budget)
    pols = policies_of(policies)
    nv = near_verbatim_settings(
        near_verbatim, beams
    )  # every option is checked before the model loads
    prompt_rule = build_prompt_rule(prompt_templates, chat_template, aggregate)
    tested = pols[0]
    if tested.is_binary:
        raise InputError(
            f"the census needs a probability score, but the first --policy is {tested.spec!r} "
            "(a 0/1 score: there is no threshold to calibrate, [EM] §5)",
            hint="put a sampling policy first, e.g. --policy top-k:40 or --policy full",
        )
    if out is not None:  # OUT/store and the report: refused now, not after scoring
        check_out(out, store="store", report=True)
    files: dict = {}
    docs = []  # per pair: ((text, sha, name, where) of the document, of the control)
    for d, c in pair_items:
        docs.append((_text_of(d, files), _text_of(c, files)))
    refs_read = [_text_of(r, files) for r in references]
    seen_pairs: dict[tuple[str, str], int] = {}
    for i, ((d, c), (dt, ct)) in enumerate(zip(pair_items, docs)):
        same_path = (
            dt[3] is not None and ct[3] is not None and Path(d).resolve() == Path(c).resolve()
        )
        # the same text whatever its line endings, wrapping or Unicode normal form (issue 25)
        dkey, ckey = text_key(dt[0]), text_key(ct[0])
        if same_path or dt[1] == ct[1] or dkey == ckey:
            how = (
                ""
                if same_path or dt[1] == ct[1]
                else " (once line endings, whitespace and Unicode form are ignored)"
            )
            raise InputError(
                f"the document {str(dt[3] or dt[2])!r} and its control {str(ct[3] or ct[2])!r} are the "
                f"same text{how}: a document censused against itself sets tau_doc from its own scores",
                hint="pass a matched control the model cannot have seen (same author, genre, length)",
            )
        if (dkey, ckey) in seen_pairs:
            j = seen_pairs[(dkey, ckey)]
            raise InputError(
                f"pair {i + 1} ({str(dt[3] or dt[2])!r}, {str(ct[3] or ct[2])!r}) repeats pair {j + 1} "
                f"({str(docs[j][0][3] or docs[j][0][2])!r}, {str(docs[j][1][3] or docs[j][1][2])!r}): the "
                "same document and control would be censused and reported twice",
                hint="give each (document, control) pair once",
            )
        seen_pairs[(dkey, ckey)] = i
    control_specs = [(ct[3] or ct[2], ct[2], ct[0]) for _, ct in docs]
    exclusions = _exclusions(exclude_spans, control_specs)
    refs = {}
    for text, _, name, where in refs_read:
        refs[name if name not in refs else str(where or name)] = text

    # --------------------------------------------------------------- windows, then scores
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
    several = len(pair_items) > 1
    jobs = []  # (pair index, role, (text, sha, name, where), label, (windows, inputs, skipped_empty, label))
    for i, ((d, c), (dt, ct)) in enumerate(zip(pair_items, docs)):
        for role, src, info in (("document", d, dt), ("control", c, ct)):
            label = f"{role}-{i + 1}" if several else role
            arg = src if info[3] is not None else Document(info[0], name=info[2])
            cut = cut_windows(
                m,
                document=arg,
                stride=stride,
                prefix_tokens=prefix_tokens,
                suffix_tokens=suffix_tokens,
                label=label,
                limit=limit,
            )
            jobs.append((i, role, info, cut[3], cut))  # cut[3]: the label, '[:N]' added by --limit
    for _, _, info, _label, cut in jobs:  # every window fits the model, before any scoring
        index_windows(m, cut[0], prompt_rule, what=str(info[3] or info[2]))  # streaming: keys only
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
    work = WorkFolder(out, prefix="memclaim-census-")
    store = work.path / "store"
    scored: dict[tuple, RunSummary] = {}
    nv_tested = max(nv["epsilons"]) if nv else None
    # every control first: a control whose every window sits at the atom (-inf, e.g. under top-k)
    # leaves no threshold ([EM] C.4.4, Eq. 31); stop before scoring the documents, with the fix
    for i, role, info, label, (windows, inputs, *_) in sorted(
        jobs, key=lambda j: j[1] != "control"
    ):
        scored[(i, role)] = run_scoring(
            m,
            windows,
            policies=pols,
            prefix_tokens=prefix_tokens,
            suffix_tokens=suffix_tokens,
            prompt_rule=prompt_rule,
            out_dir=store,
            label=label,
            inputs=inputs,
            batch_size=batch_size,
            unit_size=unit_size,
            progress=progress,
            near_verbatim=nv,
            backend=backend_obj,
            log=log,
            stats=CENSUS_STATS,
        )  # log q only: no full-softmax moments or ranks
        if role == "control":
            rs = load_run_scores(
                store, run=scored[(i, role)].run_id, policy=tested.spec, near_verbatim=nv_tested
            )
            if np.all(np.isneginf(np.asarray(rs.logq, dtype=float))):
                raise InputError(
                    f"control {str(info[3] or info[2])!r}: all {len(rs.logq)} control windows score -inf "
                    f"(probability 0) under {tested.spec}, so there is no threshold to calibrate "
                    "([EM] C.4.4); stopped before scoring the documents",
                    hint=controls_at_atom_hint(tested.spec, binary_possible=False),
                )
    runs = {(i, role): scored[(i, role)] for i, role, *_ in jobs}

    # --------------------------------------------------------------- the census
    census_inputs, inputs = [], []
    for i, (dt, ct) in enumerate(docs):
        entry = {"exclude_spans": exclusions[i]}
        for role, (text, digest, name, where) in (("document", dt), ("control", ct)):
            rs = load_run_scores(
                store,
                run=runs[(i, role)].run_id,
                policy=tested.spec,
                near_verbatim=max(nv["epsilons"]) if nv else None,
                texts=False,
            )  # numbers and spans only: a book's texts stay on disk
            entry[role] = WindowScores.from_arrays(
                rs.logq,
                rs.suffix_spans[:, 0],
                rs.suffix_spans[:, 1],
                doc_length=len(text),
                name=name,
            )
            entry[f"{role}_text"] = text
            entry[f"procedure_{role}"] = stored_test_procedure(rs)
            rec = store_input_record(rs, role if not several else f"{role} of pair {i + 1}")
            rec.update(
                {
                    "path": str(where) if where is not None else f"(text in memory: {name})",
                    "sha256": digest,
                    "chars": len(text),
                }
            )
            inputs.append(rec)
        census_inputs.append(entry)
    if isinstance(exclude_spans, (str, Path)):
        inputs.append(
            {
                "role": "control exclusions",
                "path": str(exclude_spans),
                "sha256": sha256_file(exclude_spans),
            }
        )
    elif exclude_spans is not None:
        inputs.append(
            {
                "role": "control exclusions",
                "path": "(entries given in memory)",
                "sha256": sha256_bytes("\n".join(exclude_spans).encode("utf-8")),
            }
        )
    for _, digest, name, where in refs_read:
        inputs.append(
            {
                "role": "reference corpus",
                "path": str(where) if where is not None else f"(text in memory: {name})",
                "sha256": digest,
            }
        )
    c = census_of_pairs(
        census_inputs,
        use_global_threshold=use_global,
        references=refs or None,
        budget_delta=budget_delta,
        realistic_budget=realistic_budget,
        procedure_ignore=STORED_PROCEDURE_MAY_DIFFER,
        min_similarity=min_similarity,
        allow_mixed_numerics=allow_mixed_numerics,
    )
    shown = tuple((str(dt[3] or dt[2]), str(ct[3] or ct[2])) for dt, ct in docs)
    res = CensusRun(
        census=c,
        pairs=shown,
        policy=tested.spec,
        store=str(store),
        use_global=bool(use_global),
        runs=runs,
        inputs=tuple(inputs),
        controls_description=controls_description,
        work=work,
    )
    if out is not None:
        res = replace(res, report=res.save(out))
    return res
