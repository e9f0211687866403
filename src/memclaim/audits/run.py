"""The audit run: member and non-member texts -> the scoring engine (one teacher-forced pass
per model, into a durable store) -> the registered attacks -> metrics with intervals ->
extraction audits, the unlearning verifier, shadows ([MX] §8.2, App. F.2; Fig. 12). The report
is rendered by :mod:`memclaim.report.audit`; :func:`memclaim.api.audit` runs both.

What is scored. Each text is cut once into a natural prefix of ``prefix_tokens`` and a suffix of
``suffix_tokens`` tokens ([EM] §4); every attack reads the per-token outputs of the *suffix*
given the prefix (full-softmax log p, the mean and standard deviation of log p under the model's
next-token distribution, the greedy flag, log q under the extraction policy), so membership and
extraction are measured on exactly the same tokens. Texts shorter than a window are skipped and
counted. Members and non-members must be scored by one procedure (same model fingerprint,
start-of-text, window lengths, prompt rule), else :class:`ProcedureMismatchError`.

Layout of ``out_dir``::

    scores/            the score store: members, non-members, reference, trigger and shadow runs
    shadows/           population.jsonl and one HF folder per shadow (see audits.shadows)

Re-running the same audit re-uses everything in ``scores/`` and ``shadows/`` (no model work).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..decoding import parse_policies
from ..errors import DomainError, InputError
from ..fsutil import sha256_bytes
from ..models import load_model
from ..models.loader import folder_fingerprint
from ..procedure import Procedure, require_same_procedure
from ..progress import LogCallback, ProgressCallback, emit_log
from ..scoring.prompts import PromptRule
from ..scoring.runner import run_scoring, scoring_pairs
from ..store.results import load_run_scores
from ..train.toy import toy_corpus
from ..validate import in_unit, integer, positive
from .attacks import ScoredTexts, available_attacks, evaluate_attack, get_attack
from .extraction import extraction_from_run, soundness_check, trigger_rule
from .lira import lira_statistic
from .metrics import certified_threshold
from .result import AuditResult
from .retokenize import char_aligned_windows, same_tokenization
from .settings import AuditSettings
from .shadows import (
    CapSpec,
    ShadowRecipe,
    counterfactual_from_shadows,
    ensure_shadows,
    population_from_texts,
)
from .texts import audit_windows, read_texts, record_texts
from .verifier import verify_run

# what the attacks read: per-token full-softmax log p (loss, zlib, min-k%, reference, LiRA) and its
# moments (min-k%++); the target ranks are not read by any attack
AUDIT_STATS = "greedy+margin+policy_logq+token_logprob+token_moments"

if TYPE_CHECKING:  # the annotations' names only
    import datasets
    import pandas
    import pyarrow

    from ..models.loader import LoadedModel
    from ..models.placement import Placement
    from ..scoring.served.backend import OpenAIBackend
    from ..store.results import RunScores
    from .texts import TextSet

__all__ = [
    "run_audit",
    "audit_runs",
    "scored_texts_from_run",
    "select_attacks",
    "toy_background_texts",
    "default_shadow_recipe",
    "load_audited_model",
]


def load_audited_model(
    model: str | os.PathLike | LoadedModel,
    *,
    dtype: str = "float32",
    sot: str | None = None,
    trust_remote_code: bool = False,
    placement: Placement | None = None,
) -> LoadedModel:
    """``model`` itself when it is a loaded model (tokenizer, fingerprint, start-of-text), else
    :func:`memclaim.models.load_model` of the spec (``dtype`` 'auto' resolves on ``placement``'s
    device: bfloat16 on a GPU, float32 on the CPU).

    >>> m = load_audited_model("toy")                          # doctest: +SKIP
    >>> load_audited_model(m) is m, m.name, m.dtype            # doctest: +SKIP
    (True, 'toy', 'float32')
    """
    if hasattr(model, "tokenizer") and hasattr(model, "fingerprint") and hasattr(model, "sot"):
        return model
    return load_model(
        str(model), dtype=dtype, sot=sot, trust_remote_code=trust_remote_code, placement=placement
    )


def _sot_rule(model) -> str:
    ids = list(model.sot_ids)
    return ",".join(str(i) for i in ids) if ids else "none"


def _procedure_id(procedure: dict) -> str:
    """Hash of the procedure minus its policies (attacks read policy-independent arrays)."""
    d = Procedure.from_dict(procedure).keyed_dict()
    d.pop("policies", None)
    return sha256_bytes(json.dumps(d, sort_keys=True).encode())[:16]


# ---------------------------------------------------------------------------- scored texts
def scored_texts_from_run(
    run: RunScores,
    *,
    reference_run: RunScores | None = None,
    shadow_runs: Sequence[RunScores] | None = None,
    shadow_in: Sequence[Sequence[bool]] | np.ndarray | None = None,
    statistic: str = "sequence",
) -> ScoredTexts:
    """A :class:`ScoredTexts` from a stored run (per-token arrays of the suffixes; texts = the
    suffix texts for zlib), optionally with a reference run and shadow runs of the same windows.

    >>> run = load_run_scores("runs/audit/scores", run="a2500695b69ca895", policy="full")  # 8 members  # doctest: +SKIP
    >>> st = scored_texts_from_run(run)  # doctest: +SKIP
    >>> len(st), st.token_logprobs[0][:3].round(3)  # doctest: +SKIP
    (8, array([-1.649, -2.914, -2.032]))
    """

    def per_token(r, col):
        try:
            return r.token_array(col)
        except Exception as exc:  # StoreError for multi-prompt runs
            raise InputError(
                f"run {r.run_id} has no per-token {col!r}: {exc}",
                hint="membership attacks need single-prompt (natural prefix) runs",
            ) from None

    ids = run.window_ids
    ref = ref_proc = None
    if reference_run is not None:
        if reference_run.window_ids != ids:
            raise InputError("the reference run does not cover the same windows as the target run")
        ref = per_token(reference_run, "token_logprob")
        ref_proc = _procedure_id(reference_run.procedure)
    ss = si = None
    if shadow_runs:
        for s in shadow_runs:
            if s.window_ids != ids:
                raise InputError(
                    f"shadow run {s.run_id} does not cover the same windows as the target run"
                )
        ss = np.stack(
            [lira_statistic(per_token(s, "token_logprob"), kind=statistic) for s in shadow_runs]
        )  # [S, n]
        si = np.asarray(shadow_in, dtype=bool)
    return ScoredTexts.build(
        per_token(run, "token_logprob"),
        # a served run has no moments (SERVED_AUDIT_STATS): the attacks that read them are refused
        token_mean=per_token(run, "token_mean") if _has_moments(run) else None,
        token_std=per_token(run, "token_std") if _has_moments(run) else None,
        texts=run.suffix_texts,
        reference_token_logprobs=ref,
        shadow_stats=ss,
        shadow_in=si,
        shadow_statistic=statistic,
        procedure=_procedure_id(run.procedure),
        reference_procedure=ref_proc,
    )


def _has_moments(run: RunScores) -> bool:
    return "token_mean" in run.table.column_names


def _check_same_procedure(
    a: dict, b: dict, what=("members", "non-members"), *, allow_mixed_numerics: bool = False
) -> list[str]:
    return require_same_procedure(a, b, what=what, allow_mixed_numerics=allow_mixed_numerics)


# the per-position moments of log p over the whole next-token distribution (min-k%++): a server's
# top-K log-probs do not fix them (the unseen tail's shape is unknown), so a served audit refuses
# the attacks that read them ([EM] §2 Eq. 1 needs only the targets' log-probs; issue 27)
MOMENTS = frozenset({"token_mean", "token_std"})
SERVED_AUDIT_STATS = "greedy+margin+policy_logq+token_logprob"


def select_attacks(
    requested: Sequence[str] | None,
    *,
    have_reference: bool,
    have_shadows: bool,
    have_moments: bool = True,
) -> tuple[str, ...]:
    """The attacks to run: ``requested`` (checked: each registered and its inputs available), or
    every registered attack whose inputs are available (a reference model, shadows, the
    full-distribution moments: ``have_moments=False`` for a served model, whose top-K
    log-probs do not fix them).

    >>> select_attacks(None, have_reference=False, have_shadows=False)
    ('loss', 'perplexity', 'zlib', 'min-k', 'min-k++')
    >>> select_attacks(["reference"], have_reference=False, have_shadows=False)
    Traceback (most recent call last):
    memclaim.errors.InputError: attack 'reference' needs reference_token_logprobs
      fix: pass --reference MODEL
    >>> select_attacks(None, have_reference=False, have_shadows=False, have_moments=False)
    ('loss', 'perplexity', 'zlib', 'min-k')
    >>> select_attacks(["min-k++"], have_reference=False, have_shadows=False, have_moments=False)
    Traceback (most recent call last):
    memclaim.errors.InputError: attack 'min-k++' needs token_mean, token_std: the mean and variance of log p over the whole next-token distribution at each position, which a server's top-K log-probs do not fix
      fix: drop min-k++ from --attacks, or audit with --backend local (the model in this process)
    """
    avail = {"token_logprobs", "texts"} | (set(MOMENTS) if have_moments else set())
    if have_reference:
        avail.add("reference_token_logprobs")
    if have_shadows:
        avail |= {"shadow_stats", "shadow_in"}
    if requested is None:
        return tuple(a for a in available_attacks() if set(get_attack(a).requires) <= avail)
    out = []
    for name in requested:
        att = get_attack(name)  # DomainError naming the registered ones
        missing = set(att.requires) - avail
        if missing and missing <= MOMENTS:
            raise InputError(
                f"attack {name!r} needs {', '.join(sorted(missing))}: the mean and variance of "
                "log p over the whole next-token distribution at each position, which a server's "
                "top-K log-probs do not fix",
                hint=f"drop {name} from --attacks, or audit with --backend local (the model in "
                "this process)",
            )
        if missing:
            need = (
                "--reference MODEL"
                if "reference_token_logprobs" in missing
                else "--shadows N"
                if {"shadow_stats", "shadow_in"} & missing
                else ", ".join(sorted(missing))
            )
            raise InputError(
                f"attack {name!r} needs {', '.join(sorted(missing))}", hint=f"pass {need}"
            )
        if name not in out:
            out.append(name)
    if not out:
        raise InputError(
            "no attack selected", hint=f"registered attacks: {', '.join(available_attacks())}"
        )
    return tuple(out)


def audit_policies(settings: AuditSettings) -> list[str]:
    """The policies an audit scores: ``full`` (the attacks' log-likelihoods), the extraction
    policy, and the verifier's when it is not greedy (greedy is the stored flag).

    >>> audit_policies(AuditSettings())
    ['full', 'top-k:40']
    """
    specs = ["full"] + ([settings.extraction_policy] if settings.extraction_policy else [])
    if settings.verifier_policy != "greedy":
        specs.append(settings.verifier_policy)
    return specs


def check_served_audit(
    attacks: Sequence[str] | None, *, reference: object = None, shadows: int = 0
) -> tuple[tuple[str, ...], list[str]]:
    """What a served model's audit runs, decided before any request: the attacks (``attacks``
    checked by name: one that reads the full-distribution moments is refused; by default those
    are left out) and the notes saying what was left out. A reference model and shadows are
    refused (the shadows are trained from the model's weights, which a server does not lend;
    a reference model scored here would not share the served model's procedure).

    >>> attacks, notes = check_served_audit(None)
    >>> attacks, notes[0][:40]
    (('loss', 'perplexity', 'zlib', 'min-k'), 'min-k++ not run: it reads the mean and v')
    >>> check_served_audit(None, shadows=4)
    Traceback (most recent call last):
    memclaim.errors.InputError: --shadows 4: shadow models are trained from the audited model's weights, which a server does not lend
      fix: drop --shadows (LiRA and the counterfactual estimate), or audit with --backend local
    """
    if shadows:
        raise InputError(
            f"--shadows {shadows}: shadow models are trained from the audited model's weights, "
            "which a server does not lend",
            hint="drop --shadows (LiRA and the counterfactual estimate), or audit with --backend local",
        )
    if reference is not None:
        raise InputError(
            "--reference with --backend openai: the reference attack compares the audited "
            "model's log-probs with a reference model's under one procedure, and a served audit "
            "does not score a second model",
            hint="drop --reference, or audit with --backend local",
        )
    chosen = select_attacks(attacks, have_reference=False, have_shadows=False, have_moments=False)
    notes = []
    if attacks is None:
        left = [
            a
            for a in select_attacks(None, have_reference=False, have_shadows=False)
            if a not in chosen
        ]
        notes += [
            f"{a} not run: it reads the mean and variance of log p over the whole next-token "
            "distribution, which a server's top-K log-probs do not fix (audit with --backend "
            "local for it)"
            for a in left
        ]
    return chosen, notes


def _evaluate(attacks, members: ScoredTexts, nonmembers: ScoredTexts, settings: AuditSettings):
    evals = []
    for name in attacks:
        att = get_attack(name)
        params = {"k": settings.k} if "k" in dict(att.defaults) else {}
        evals.append(
            evaluate_attack(
                name,
                members,
                nonmembers,
                fpr=settings.fpr,
                confidence=settings.confidence,
                **params,
            )
        )
    return tuple(evals)


# ------------------------------------------------------------------------------- shadows glue
def toy_background_texts() -> tuple[str, ...]:
    """The tiny GPT's background corpus: the exact documents it was trained on besides its
    planted records, regenerated by the same function that built it.

    >>> bg = toy_background_texts()  # about a second: the corpus is regenerated  # doctest: +SKIP
    >>> len(bg), bg[0][:30]  # doctest: +SKIP
    (400, 'Paquai choushearora dailuthize')
    """
    return toy_corpus()[1].background


def default_shadow_recipe(
    model: LoadedModel,
    *,
    base: LoadedModel | str | None = None,
    mode: str | None = None,
    **overrides: Any,
) -> tuple[ShadowRecipe, tuple]:
    """(recipe, background texts): the toy recipe from scratch (with the toy's background corpus)
    for the built-in tiny GPT; [MX] App. F.2 fine-tuning of ``base`` (default: the audited model)
    for every other model.

    >>> recipe, background = default_shadow_recipe(load_model("toy"))  # doctest: +SKIP
    >>> recipe.mode, recipe.steps, recipe.lr, len(background)  # doctest: +SKIP
    ('scratch', 400, 0.003, 400)
    """
    is_toy = getattr(model, "name", "") == "toy" and base is None
    mode = mode or ("scratch" if is_toy else "finetune")
    placement = getattr(model, "placement", None)
    if placement is not None and "device" not in overrides:
        overrides["device"] = placement.device  # shadows train where the audited model computes
    base_path = Path(model.path) if base is None else Path(load_audited_model(base).path)
    fp = folder_fingerprint(base_path)
    if mode == "scratch":
        recipe = ShadowRecipe.toy(base_path, base_fingerprint=fp, **overrides)
        return recipe, (toy_background_texts() if is_toy else ())
    return ShadowRecipe.finetune(base_path, base_fingerprint=fp, **overrides), ()


# ---------------------------------------------------------------------------------- the run
def run_audit(
    model: LoadedModel | str,
    members: str | Path | TextSet | Sequence | pandas.DataFrame | pyarrow.Table | datasets.Dataset,
    nonmembers: str
    | Path
    | TextSet
    | Sequence
    | pandas.DataFrame
    | pyarrow.Table
    | datasets.Dataset,
    *,
    out_dir: str | Path,
    settings: AuditSettings | None = None,
    reference: LoadedModel | str | None = None,
    shadows: int = 0,
    shadow_recipe: ShadowRecipe | None = None,
    shadow_background: Sequence[str] = (),
    design_seed: int = 0,
    cap: CapSpec | None = None,
    kappa: float | None = None,
    soundness_epsilon: float | None = None,
    soundness_relation: str = "add/remove",
    text_field: str | None = None,
    id_field: str | None = None,
    input_format: str | None = None,
    dtype: str = "float32",
    sot: str | None = None,
    progress: ProgressCallback | None = None,
    log: LogCallback | None = None,
    strict_fpr: bool = True,
    trust_remote_code: bool = False,
    allow_mixed_numerics: bool = False,
    backend: OpenAIBackend | None = None,
) -> AuditResult:
    """Audit ``model`` on ``members`` vs ``nonmembers`` (files or sequences of texts).

    Scores both sets once per model through the scoring engine into ``out_dir/scores`` (re-runs
    reuse it), runs the selected registered attacks (default: every attack whose inputs are
    available), the extraction audits, the unlearning verifier, and with ``shadows`` = N (even,
    >= 4) N shadow models for LiRA and the counterfactual estimate. ``reference``: a reference
    model (a different tokenizer makes the reference attack per text, said in ``notes``).
    ``cap``: a :class:`CapSpec` to compare the counterfactual estimate with. ``kappa`` with
    ``soundness_epsilon``: the canary soundness check ([MX] Cor. 5.3). Writes the score store
    and the shadows only; the report is :func:`memclaim.report.audit.write_audit_report`
    (:func:`memclaim.api.audit` returns a result whose ``save`` writes it).
    ``trust_remote_code`` lets the reference and shadow-base folders run their own code (the
    audited ``model`` is loaded by the caller). ``backend``: the scoring backend (None: this
    process); a served model's (:class:`~memclaim.scoring.served.backend.OpenAIBackend`, with
    ``model`` its :class:`~memclaim.scoring.served.model.ServedModel`) runs the attacks its
    top-K log-probs give exactly and refuses the rest by name (:func:`check_served_audit`). A ``settings.fpr`` the non-members cannot
    certify (K = floor(alpha (N+1)) = 0) is refused before any model work (DomainError saying how many non-members are needed), or,
    with ``strict_fpr=False``, dropped with a note in ``tpr_note``.

    >>> res = run_audit("toy", members, nonmembers, out_dir="runs/audit",  # 8 planted records, 8 controls  # doctest: +SKIP
    ...                 settings=AuditSettings(prefix_tokens=16, suffix_tokens=16))
    >>> [a.attack for a in res.attacks], res.attack("loss").auc.auc  # doctest: +SKIP
    (['loss', 'perplexity', 'zlib', 'min-k', 'min-k++'], 0.84375)
    """
    t0 = time.perf_counter()
    settings = settings or AuditSettings()
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise InputError(
            f"output folder {str(out)!r} exists and is not a folder", hint="pass a folder for --out"
        )
    n_sh = integer("number of shadows", shadows, minimum=0)
    if n_sh and (n_sh < 4 or n_sh % 2):
        raise DomainError(
            f"--shadows must be 0 or an even number >= 4, got {shadows}",
            hint="shadows come in complementary pairs, and LiRA's Gaussian fits and the counterfactual "
            "standard error need at least two IN and two OUT models per text",
        )
    if (kappa is None) != (soundness_epsilon is None):
        raise InputError(
            "the canary soundness check needs both the baseline kappa and the claimed epsilon",
            hint="pass --kappa K and --soundness-epsilon EPS together",
        )
    if kappa is not None:  # the soundness check's domains fail before any scoring
        in_unit("--kappa (the canaries' prior baseline)", kappa)
        positive("--soundness-epsilon", soundness_epsilon)
    served = backend is not None and getattr(backend, "device_class", None) == "served"
    if served:  # before any request: what the server's answers cannot give is refused by name
        check_served_audit(settings.attacks, reference=reference, shadows=n_sh)
    m = load_audited_model(model, dtype=dtype, sot=sot, trust_remote_code=trust_remote_code)
    # a bad --reference fails first
    ref_model = (
        load_audited_model(
            reference,
            dtype=m.dtype,
            trust_remote_code=trust_remote_code,
            placement=getattr(m, "placement", None),
        )
        if reference is not None
        else None
    )
    mem = read_texts(
        members, label="members", text_field=text_field, id_field=id_field, fmt=input_format
    )
    non = read_texts(
        nonmembers, label="nonmembers", text_field=text_field, id_field=id_field, fmt=input_format
    )
    overlap = {r.text for r in mem.records} & {r.text for r in non.records}
    if overlap:
        t = next(iter(overlap))
        raise InputError(
            f"{len(overlap)} text(s) are both members and non-members, e.g. {t[:60]!r}",
            hint="a text cannot be in both sets; remove the duplicates",
        )
    wm = audit_windows(m, mem, settings, what="members")
    wn = audit_windows(m, non, settings, what="non-members")
    tpr_note = None
    if settings.fpr is not None:
        try:
            certified_threshold(
                np.zeros(len(wn)), fpr=settings.fpr
            )  # refuses before any model work
        except DomainError as exc:
            if strict_fpr:
                raise
            tpr_note = f"TPR at a certified FPR not reported: {exc}"
            settings = replace(settings, fpr=None)
    notes: list[str] = []
    if served:
        attacks, served_notes = check_served_audit(
            settings.attacks, reference=reference, shadows=n_sh
        )
        notes += served_notes
    else:
        attacks = select_attacks(
            settings.attacks, have_reference=reference is not None, have_shadows=n_sh > 0
        )
    policies = parse_policies(audit_policies(settings))
    store = out / "scores"
    scoring: dict = {}

    def score(lm_, ws, label, *, rule=None, inputs=None):
        summ = run_scoring(
            lm_,
            ws,
            policies=policies,
            prefix_tokens=settings.prefix_tokens,
            suffix_tokens=settings.suffix_tokens,
            prompt_rule=rule or PromptRule(),
            out_dir=store,
            label=label,
            inputs=inputs or {},
            batch_size=settings.batch_size,
            progress=progress,
            stats=SERVED_AUDIT_STATS if served else AUDIT_STATS,
            **({"backend": backend, "log": log} if served else {}),
        )
        scoring[label] = {
            "run_id": summ.run_id,
            "units_scored": summ.units_scored,
            "units_reused": summ.units_reused,
            "n_windows": summ.n_windows,
        }
        return load_run_scores(store, run=summ.run_id, policy="full")

    _check_context(m, wm, "members")
    _check_context(m, wn, "non-members")
    emit_log(log, f"scoring {len(wm)} members and {len(wn)} non-members with {m.name}")
    run_m = score(m, wm, "members", inputs=mem.inputs)
    run_n = score(m, wn, "nonmembers", inputs=non.inputs)
    _check_same_procedure(
        run_m.procedure, run_n.procedure, allow_mixed_numerics=allow_mixed_numerics
    )

    # reference model ------------------------------------------------------------------
    ref_runs = (None, None)
    ref_info = None
    if ref_model is not None:
        r = ref_model
        same = same_tokenization(m, r, [w for w in wm.windows] + [w for w in wn.windows])
        if same:
            rwm, rwn, straddles = wm, wn, 0
            how = "same tokenization: the reference scores the same token windows"
        else:
            rwm, s1 = char_aligned_windows(wm, r)
            rwn, s2 = char_aligned_windows(wn, r)
            straddles = s1 + s2
            how = (
                "the reference model tokenizes differently: its windows are the same characters (prefix text, "
                "suffix text) re-tokenized whole by its own tokenizer, and the reference attack compares total "
                "log-likelihoods of the suffix characters per text, not per token"
            )
            notes.append(how)
        _check_context(r, rwm, "reference members")
        _check_context(r, rwn, "reference non-members")
        emit_log(log, f"scoring with the reference model {r.name}")
        # (for re-tokenized windows the recorded prefix/suffix lengths are the target's; the run's inputs
        # say that the reference's own windows are character-aligned and of variable token length)
        rin = {
            "alignment": how,
            "reference_windows": "target's" if same else "character-aligned, variable length",
        }
        ref_runs = (
            score(r, rwm, "reference:members", inputs=rin),
            score(r, rwn, "reference:nonmembers", inputs=rin),
        )
        ref_info = {
            "model": r.describe(),
            "same_tokenization": bool(same),
            "alignment": how,
            "boundary_inside_token": int(straddles),
            "per": "text",
        }

    # shadows -------------------------------------------------------------------------
    sset = None
    shadow_m = shadow_n = None
    in_m = in_n = None
    if n_sh:
        pop = population_from_texts(mem.records, non.records, names=("members", "nonmembers"))
        if shadow_recipe is None:
            shadow_recipe, bg = default_shadow_recipe(m)
            shadow_background = shadow_background or bg
        base_tok = load_audited_model(shadow_recipe.base, trust_remote_code=trust_remote_code)
        if not same_tokenization(m, base_tok, list(wm.windows[:50]) + list(wn.windows[:50])):
            raise InputError(
                f"the shadow base {shadow_recipe.base!r} tokenizes differently from the audited model",
                hint="shadows must share the audited model's tokenizer (use its pre-fine-tuning checkpoint)",
            )
        if (
            shadow_recipe.mode == "finetune"
            and Path(shadow_recipe.base).resolve() == Path(m.path).resolve()
        ):
            notes.append(
                "shadows were fine-tuned from the audited model itself: whatever it learned about the "
                "members carries into the OUT shadows, which weakens LiRA; pass the checkpoint the audited "
                "model was fine-tuned from as the shadow base"
            )
        if getattr(m, "name", "") == "toy" and shadow_recipe.mode == "scratch":
            notes.append(
                "toy shadows insert each record of their half once; the planted toy members were trained "
                "k times, so their IN distribution is understated (LiRA stays valid, its calibration does not "
                "model duplication)"
            )
        sset = ensure_shadows(
            out / "shadows",
            population=pop,
            n_shadows=n_sh,
            recipe=shadow_recipe,
            design_seed=design_seed,
            background=shadow_background,
            sep_ids=m.sot_ids,
            log=log,
        )
        in_m = sset.in_mask(record_texts(mem, wm), what="members")  # [S, n_members]
        in_n = sset.in_mask(record_texts(non, wn), what="nonmembers")  # [S, n_nonmembers]
        shadow_m, shadow_n = [], []
        for i, path in enumerate(sset.paths):
            # shadows are placed and computed like the audited model (same device class and dtype)
            sm = load_model(
                path,
                dtype=m.dtype,
                sot=_sot_rule(m),
                trust_remote_code=trust_remote_code,
                placement=getattr(m, "placement", None),
            )
            emit_log(log, f"scoring under shadow {i + 1}/{len(sset)}")
            shadow_m.append(score(sm, wm, f"shadow{i}:members"))
            shadow_n.append(score(sm, wn, f"shadow{i}:nonmembers"))

    st_m = scored_texts_from_run(
        run_m,
        reference_run=ref_runs[0],
        shadow_runs=shadow_m,
        shadow_in=in_m,
        statistic=settings.lira_statistic,
    )
    st_n = scored_texts_from_run(
        run_n,
        reference_run=ref_runs[1],
        shadow_runs=shadow_n,
        shadow_in=in_n,
        statistic=settings.lira_statistic,
    )
    evals = _evaluate(attacks, st_m, st_n, settings)

    # extraction, trigger, verifier ----------------------------------------------------
    ext_m = extraction_from_run(
        run_m, policy=settings.extraction_policy, m=settings.m, confidence=settings.confidence
    )
    ext_n = extraction_from_run(
        run_n, policy=settings.extraction_policy, m=settings.m, confidence=settings.confidence
    )
    trig_m = trig_n = None
    if settings.trigger is not None:
        rule = trigger_rule(settings.trigger)
        tm = score(m, wm, "trigger:members", rule=rule)
        tn = score(m, wn, "trigger:nonmembers", rule=rule)
        trig_m = extraction_from_run(
            tm,
            policy=settings.extraction_policy,
            m=settings.m,
            prompt="trigger",
            trigger=settings.trigger,
            confidence=settings.confidence,
        )
        trig_n = extraction_from_run(
            tn,
            policy=settings.extraction_policy,
            m=settings.m,
            prompt="trigger",
            trigger=settings.trigger,
            confidence=settings.confidence,
        )
    ver = verify_run(
        run_m,
        policy=settings.verifier_policy,
        m=settings.verifier_m,
        threshold=settings.verifier_threshold,
        confidence=settings.confidence,
    )
    sound = None
    if kappa is not None:
        sound = soundness_check(
            ext_m,
            epsilon=soundness_epsilon,
            kappa=kappa,
            relation=soundness_relation,
            confidence=settings.confidence,
        )

    # counterfactual memorization ------------------------------------------------------
    cf: tuple = ()
    if sset is not None:
        lps = [
            sm_.token_array("token_logprob") + sn_.token_array("token_logprob")
            for sm_, sn_ in zip(shadow_m, shadow_n)
        ]
        mask = np.concatenate([in_m, in_n], axis=1)  # [S, n_m + n_n]
        nm, nn = len(wm), len(wn)
        cf = tuple(
            counterfactual_from_shadows(
                lps,
                mask,
                score=sc,
                confidence=settings.confidence,
                cap=cap,
                groups={"members": np.arange(nm), "non-members": np.arange(nm, nm + nn)},
            )
            for sc in settings.counterfactual_scores
        )

    result = AuditResult(
        model=m.describe(),
        procedure=run_m.procedure,
        procedure_key=run_m.procedure_key,
        store=str(store),
        settings=settings,
        inputs=(mem.inputs, non.inputs),
        n_members=len(wm),
        n_nonmembers=len(wn),
        skipped_short={"members": wm.skipped_short, "nonmembers": wn.skipped_short},
        attacks=evals,
        tpr_note=tpr_note,
        extraction=ext_m,
        extraction_nonmembers=ext_n,
        trigger_extraction=trig_m,
        trigger_nonmembers=trig_n,
        verifier=ver,
        reference=ref_info,
        shadows=sset,
        counterfactual=cf,
        soundness=sound,
        scoring=scoring,
        notes=tuple(notes),
        seconds=time.perf_counter() - t0,
    )
    return result


def _check_context(model, ws, what: str) -> None:
    """Refuse, before any scoring, windows the model cannot score: an empty prompt, or a window
    longer than the model's context (the position embedding would overflow)."""
    scoring_pairs(model, ws, PromptRule(), what=what)


def audit_runs(
    member_run: RunScores,
    nonmember_run: RunScores,
    *,
    settings: AuditSettings | None = None,
    allow_mixed_numerics: bool = False,
) -> AuditResult:
    """Audit two already-scored runs (:class:`memclaim.store.results.RunScores`), e.g. read back
    with :func:`memclaim.store.results.load_run_scores`. Refuses runs scored under different
    procedures (model, start-of-text, window lengths, prompt rule) and fewer than two of either.
    Attacks: those the runs support (no reference, no shadows).

    >>> members = load_run_scores("runs/audit/scores", run=res.scoring["members"]["run_id"], policy="full")  # doctest: +SKIP
    >>> nonmembers = load_run_scores("runs/audit/scores", run=res.scoring["nonmembers"]["run_id"], policy="full")  # doctest: +SKIP
    >>> r = audit_runs(members, nonmembers)  # doctest: +SKIP
    >>> r.n_members, r.n_nonmembers, r.attack("loss").auc.auc  # doctest: +SKIP
    (8, 8, 0.84375)
    """
    settings = settings or AuditSettings()
    _check_same_procedure(
        member_run.procedure, nonmember_run.procedure, allow_mixed_numerics=allow_mixed_numerics
    )
    for r, what in ((member_run, "members"), (nonmember_run, "non-members")):
        if len(r) < 2:
            raise InputError(f"an audit needs at least two {what}; run {r.run_id} has {len(r)}")
    if settings.fpr is not None:
        certified_threshold(np.zeros(len(nonmember_run)), fpr=settings.fpr)
    attacks = select_attacks(settings.attacks, have_reference=False, have_shadows=False)
    st_m, st_n = scored_texts_from_run(member_run), scored_texts_from_run(nonmember_run)
    evals = _evaluate(attacks, st_m, st_n, settings)
    pol = settings.extraction_policy
    have = [c for c in member_run.table.column_names if c.startswith("logq:")]
    if pol is not None and f"logq:{pol}" not in have:
        pol = None
    ext_m = extraction_from_run(
        member_run, policy=pol, m=settings.m, confidence=settings.confidence
    )
    ext_n = extraction_from_run(
        nonmember_run, policy=pol, m=settings.m, confidence=settings.confidence
    )
    ver = None
    if member_run.procedure.get("prompt", {}).get("kind") in (None, "natural-prefix"):
        ver = verify_run(
            member_run, threshold=settings.verifier_threshold, confidence=settings.confidence
        )
    return AuditResult(
        model=dict(member_run.procedure.get("model", {})),
        procedure=member_run.procedure,
        procedure_key=member_run.procedure_key,
        store=member_run.store,
        settings=settings,
        inputs=(member_run.inputs, nonmember_run.inputs),
        n_members=len(member_run),
        n_nonmembers=len(nonmember_run),
        skipped_short={},
        attacks=evals,
        tpr_note=None,
        extraction=ext_m,
        extraction_nonmembers=ext_n,
        verifier=ver,
    )
