"""The audit runner: member and non-member texts -> the scoring engine (one teacher-forced pass
per model, into a durable store) -> the registered attacks -> metrics with intervals ->
extraction audits, the unlearning verifier, shadows -> report ([MX] §8.2, App. F.2; Fig. 12).

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
    report.{json,md,html}

Re-running the same command re-uses everything in ``scores/`` and ``shadows/`` (no model work).
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np

from ..errors import DomainError, InputError
from ..fsutil import sha256_bytes
from ..jsonutil import ResultMixin, read_json_object
from ..validate import in_open_unit, integer
from .attacks import AttackEvaluation, ScoredTexts, evaluate_attack, get_attack, available_attacks
from .extraction import ExtractionAudit, extraction_from_run, soundness_check, trigger_rule
from .metrics import certified_threshold, exact_level
from .shadows import (SCORES, CapSpec, ShadowRecipe, ShadowSet, counterfactual_from_shadows, ensure_shadows,
                      population_from_texts)
from .verifier import DEFAULT_THRESHOLD, VerifierResult, verify_run

__all__ = [
    "AuditSettings",
    "TextSet",
    "AuditResult",
    "read_texts",
    "run_audit",
    "audit_runs",
    "scored_texts_from_run",
    "toy_background_texts",
    "default_shadow_recipe",
    "build_audit_doc",
    "audit_statements",
    "TABLE_SPEC_DOC",
    "TableResult",
    "audit_table",
]

SHADOW_ATTACKS = ("lira-online", "lira-offline")


# ---------------------------------------------------------------------------------- settings
@dataclass(frozen=True)
class AuditSettings(ResultMixin):
    """Everything that fixes the audit's numbers besides the models and texts.

    ``k``: the min-k% / min-k%++ fraction (read exactly as written). ``fpr``: target FPR for the
    TPR at a certified FPR (None: no TPR). ``extraction_policy``/``m``: the sampling policy and
    list budget of the extraction audit (None: greedy only). ``trigger``: a trigger text for a
    second extraction audit. ``verifier_*``: the unlearning verifier ([MX] App. F.2).
    """

    prefix_tokens: int = 32
    suffix_tokens: int = 32
    attacks: tuple[str, ...] | None = None
    k: object = "0.2"
    fpr: object = None
    confidence: float = 0.95
    extraction_policy: str | None = "top-k:40"
    m: int = 1
    trigger: str | None = None
    verifier_threshold: float = DEFAULT_THRESHOLD
    verifier_policy: str = "greedy"
    verifier_m: int = 1
    lira_statistic: str = "sequence"
    counterfactual_scores: tuple = ("teacher-forcing", "logloss")
    batch_size: int = 16

    def __post_init__(self):
        from ..decoding import Policy

        integer("prefix tokens", self.prefix_tokens, minimum=0)
        integer("suffix tokens", self.suffix_tokens, minimum=1)
        in_open_unit("confidence", self.confidence)
        integer("m (list budget)", self.m, minimum=1)
        integer("verifier m", self.verifier_m, minimum=1)
        integer("batch size", self.batch_size, minimum=1)
        if self.fpr is not None:
            exact_level("fpr", self.fpr)
        from .attacks import _exact_k

        _exact_k(self.k)
        if self.extraction_policy is not None:
            p = Policy.parse(self.extraction_policy)
            object.__setattr__(self, "extraction_policy", p.spec)
        object.__setattr__(self, "verifier_policy", Policy.parse(self.verifier_policy).spec)
        if self.attacks is not None:
            object.__setattr__(self, "attacks", tuple(self.attacks))
        bad = [sc for sc in self.counterfactual_scores if sc not in SCORES]
        if bad:
            raise DomainError(f"unknown counterfactual score(s) {bad}", hint=f"one of {sorted(SCORES)}")
        if self.trigger is not None and not (isinstance(self.trigger, str) and self.trigger):
            raise InputError(f"the trigger must be a non-empty text, got {self.trigger!r}")


# ------------------------------------------------------------------------------------ inputs
@dataclass(frozen=True)
class TextSet:
    """One side of the audit: records and where they came from."""

    label: str
    records: tuple
    inputs: dict

    def __len__(self) -> int:
        return len(self.records)


def read_texts(source, *, label: str, text_field=None, id_field=None, fmt=None) -> TextSet:
    """Records from a file (JSONL/TXT/CSV/Parquet, :func:`memclaim.text.io.read_passages`) or
    from a sequence of strings, dicts with ``text`` (and ``id``) or Records."""
    from ..text.io import Record, read_passages

    if isinstance(source, TextSet):
        return source
    if isinstance(source, (str, Path)):
        ps = read_passages(source, fmt=fmt, text_field=text_field, id_field=id_field)
        return TextSet(label, ps.records, {"role": label, "path": str(source), "sha256": ps.sha256,
                                            "records": len(ps.records), "skipped_empty": ps.skipped_empty})
    recs = []
    for j, r in enumerate(source):
        if isinstance(r, Record):
            recs.append(r)
        elif isinstance(r, str):
            recs.append(Record(f"{label}-{j}", r))
        elif isinstance(r, dict) and isinstance(r.get("text"), str):
            recs.append(Record(str(r.get("id", f"{label}-{j}")), r["text"]))
        else:
            raise InputError(f"{label}[{j}] must be a text, a dict with 'text' or a Record, got {type(r).__name__}")
    recs = [r for r in recs if r.text.strip()]
    if len({r.id for r in recs}) != len(recs):
        raise InputError(f"{label}: record ids are not unique", hint="give every record its own id")
    digest = sha256_bytes(json.dumps([[r.id, r.text] for r in recs], ensure_ascii=False).encode("utf-8"))
    return TextSet(label, tuple(recs), {"role": label, "path": None, "sha256": digest, "records": len(recs)})


def _windows(model, ts: TextSet, settings: AuditSettings, *, what: str):
    from ..text.windows import passage_windows

    one = what[:-1]  # "members" -> "member"
    if not ts.records:
        raise InputError(f"the {what} set is empty", hint=f"give at least two {what}")
    try:
        ws = passage_windows(ts.records, model.tokenizer, prefix_tokens=settings.prefix_tokens,
                             suffix_tokens=settings.suffix_tokens)
    except InputError as exc:
        raise InputError(f"{what}: {exc.args[0].split(chr(10))[0]}", hint=exc.hint) from None
    if len(ws) < 2:
        raise InputError(
            f"an audit needs at least two {what}; {len(ws)} of {len(ts.records)} {one} texts are long enough for "
            f"a window of {settings.prefix_tokens} + {settings.suffix_tokens} tokens ({ws.skipped_short} too short)",
            hint=f"add {what} or use shorter windows (--prefix-tokens/--suffix-tokens)")
    return ws


def _load(model, *, dtype="float32", sot=None, trust_remote_code: bool = False):
    if hasattr(model, "tokenizer") and hasattr(model, "fingerprint") and hasattr(model, "sot"):
        return model
    from ..models import load_model

    return load_model(str(model), dtype=dtype, sot=sot, trust_remote_code=trust_remote_code)


def _sot_rule(model) -> str:
    ids = list(model.sot_ids)
    return ",".join(str(i) for i in ids) if ids else "none"


def _procedure_id(procedure: dict) -> str:
    """Hash of the procedure minus its policies (attacks read policy-independent arrays)."""
    from ..scoring.procedure import Procedure

    d = Procedure.from_dict(procedure).keyed_dict()
    d.pop("policies", None)
    return sha256_bytes(json.dumps(d, sort_keys=True).encode())[:16]


# ---------------------------------------------------------------------------- scored texts
def scored_texts_from_run(run, *, reference_run=None, shadow_runs=None, shadow_in=None,
                          statistic: str = "sequence") -> ScoredTexts:
    """A :class:`ScoredTexts` from a stored run (per-token arrays of the suffixes; texts = the
    suffix texts for zlib), optionally with a reference run and shadow runs of the same windows."""
    from .lira import lira_statistic

    def per_token(r, col):
        try:
            return r.token_array(col)
        except Exception as exc:  # StoreError for multi-prompt runs
            raise InputError(f"run {r.run_id} has no per-token {col!r}: {exc}",
                             hint="membership attacks need single-prompt (natural prefix) runs") from None

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
                raise InputError(f"shadow run {s.run_id} does not cover the same windows as the target run")
        ss = np.stack([lira_statistic(per_token(s, "token_logprob"), kind=statistic) for s in shadow_runs])  # [S, n]
        si = np.asarray(shadow_in, dtype=bool)
    return ScoredTexts.build(per_token(run, "token_logprob"), token_mean=per_token(run, "token_mean"),
                             token_std=per_token(run, "token_std"), texts=run.suffix_texts,
                             reference_token_logprobs=ref, shadow_stats=ss, shadow_in=si,
                             shadow_statistic=statistic, procedure=_procedure_id(run.procedure),
                             reference_procedure=ref_proc)


def _check_same_procedure(a: dict, b: dict, what=("members", "non-members")) -> None:
    from ..scoring.procedure import require_same_procedure

    require_same_procedure(a, b, what=what)


def _select_attacks(requested, *, have_reference: bool, have_shadows: bool) -> tuple[str, ...]:
    avail = {"token_logprobs", "token_mean", "token_std", "texts"}
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
        if missing:
            need = ("--reference MODEL" if "reference_token_logprobs" in missing else
                    "--shadows N" if {"shadow_stats", "shadow_in"} & missing else ", ".join(sorted(missing)))
            raise InputError(f"attack {name!r} needs {', '.join(sorted(missing))}", hint=f"pass {need}")
        if name not in out:
            out.append(name)
    if not out:
        raise InputError("no attack selected", hint=f"registered attacks: {', '.join(available_attacks())}")
    return tuple(out)


def _evaluate(attacks, members: ScoredTexts, nonmembers: ScoredTexts, settings: AuditSettings):
    evals = []
    for name in attacks:
        att = get_attack(name)
        params = {"k": settings.k} if "k" in dict(att.defaults) else {}
        evals.append(evaluate_attack(name, members, nonmembers, fpr=settings.fpr, confidence=settings.confidence,
                                     **params))
    return tuple(evals)


# ------------------------------------------------------------------------------------ result
@dataclass(frozen=True)
class AuditResult(ResultMixin):
    """Everything one audit found. ``attacks``: one :class:`AttackEvaluation` per attack (AUC with
    DeLong interval and leak signal; TPR at the certified FPR when one was asked for).
    ``extraction``/``extraction_nonmembers``: greedy and sampling extraction from each record's own
    prefix; ``trigger_*``: the same from the trigger; ``verifier``: the unlearning verifier on
    the members; ``shadows``/``counterfactual``: the shadow set and the mem_h (COND) estimates,
    one per bounded score h (teacher-forcing probability, truncated log-loss / M)."""

    model: dict
    procedure: dict
    procedure_key: str
    store: str
    settings: AuditSettings
    inputs: tuple
    n_members: int
    n_nonmembers: int
    skipped_short: dict
    attacks: tuple
    tpr_note: str | None
    extraction: ExtractionAudit | None
    extraction_nonmembers: ExtractionAudit | None
    trigger_extraction: ExtractionAudit | None = None
    trigger_nonmembers: ExtractionAudit | None = None
    verifier: VerifierResult | None = None
    reference: dict | None = None
    shadows: ShadowSet | None = None
    counterfactual: tuple = ()
    soundness: object | None = None
    scoring: dict = field(default_factory=dict)
    notes: tuple = ()
    seconds: float = 0.0
    report: dict | None = None

    def attack(self, name: str) -> AttackEvaluation:
        for e in self.attacks:
            if e.attack == name:
                return e
        raise InputError(f"attack {name!r} was not run in this audit",
                         hint=f"run: {', '.join(e.attack for e in self.attacks)}")

    def headline(self) -> str:
        if not self.attacks:
            return "no attack was run"
        best = max(self.attacks, key=lambda e: e.auc.auc)
        a = best.auc
        s = (f"{len(self.attacks)} membership attacks on {self.n_members} members vs {self.n_nonmembers} "
             f"non-members; strongest: {best.attack}, AUC {a.auc:.3f} [{a.low:.3f}, {a.high:.3f}] "
             f"(leak signal {a.leak_signal:.2f}, {'excludes' if a.excludes_chance else 'includes'} chance).")
        if self.extraction is not None:
            s += f" Greedy extraction from the records' own prefix: {self.extraction.greedy_successes}/{self.extraction.n}."
        return s


# ------------------------------------------------------------------------------- shadows glue
def toy_background_texts() -> tuple[str, ...]:
    """The tiny GPT's background corpus: the exact documents it was trained on besides its
    planted records, regenerated by the same function that built it."""
    from ..train.toy import toy_corpus

    return toy_corpus()[1].background


def default_shadow_recipe(model, *, base=None, mode: str | None = None, **overrides) -> tuple[ShadowRecipe, tuple]:
    """(recipe, background texts): the toy recipe from scratch (with the toy's background corpus)
    for the built-in tiny GPT; [MX] App. F.2 fine-tuning of ``base`` (default: the audited model)
    for every other model."""
    from ..models.loader import folder_fingerprint

    is_toy = getattr(model, "name", "") == "toy" and base is None
    mode = mode or ("scratch" if is_toy else "finetune")
    base_path = Path(model.path) if base is None else Path(_load(base).path)
    fp = folder_fingerprint(base_path)
    if mode == "scratch":
        recipe = ShadowRecipe.toy(base_path, base_fingerprint=fp, **overrides)
        return recipe, (toy_background_texts() if is_toy else ())
    return ShadowRecipe.finetune(base_path, base_fingerprint=fp, **overrides), ()


# ---------------------------------------------------------------------------------- the run
def _say(log, msg):
    if log is not None:
        log(msg)


def run_audit(model, members, nonmembers, *, out_dir, settings: AuditSettings | None = None, reference=None,
              shadows: int = 0, shadow_recipe: ShadowRecipe | None = None, shadow_background: Sequence[str] = (),
              design_seed: int = 0, cap: CapSpec | None = None, kappa=None, soundness_epsilon=None,
              soundness_relation: str = "add/remove", text_field=None, id_field=None, input_format=None,
              dtype: str = "float32", sot=None, progress=None,
              log: Callable[[str], None] | None = None, write: bool = True,
              strict_fpr: bool = True, trust_remote_code: bool = False) -> AuditResult:
    """Audit ``model`` on ``members`` vs ``nonmembers`` (files or sequences of texts).

    Scores both sets once per model through the scoring engine into ``out_dir/scores`` (re-runs
    reuse it), runs the selected registered attacks (default: every attack whose inputs are
    available), the extraction audits, the unlearning verifier, and with ``shadows`` = N (even,
    >= 4) N shadow models for LiRA and the counterfactual estimate. ``reference``: a reference
    model (a different tokenizer makes the reference attack per text, said in ``notes``).
    ``cap``: a :class:`CapSpec` to compare the counterfactual estimate with. ``kappa`` with
    ``soundness_epsilon``: the canary soundness check ([MX] Cor. 5.3). Writes the report unless
    ``write=False``. ``trust_remote_code`` lets the reference and shadow-base folders run their
    own code (the audited ``model`` is loaded by the caller). A ``settings.fpr`` the non-members cannot certify (K = floor(alpha (N+1)) = 0)
    is refused before any model work (DomainError saying how many non-members are needed), or,
    with ``strict_fpr=False``, dropped with a note in ``tpr_note``.
    """
    from ..decoding import parse_policies
    from ..scoring.prompts import PromptRule
    from ..scoring.results import load_run_scores
    from ..scoring.runner import run_scoring

    t0 = time.perf_counter()
    settings = settings or AuditSettings()
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise InputError(f"output folder {str(out)!r} exists and is not a folder", hint="pass a folder for --out")
    n_sh = integer("number of shadows", shadows, minimum=0)
    if n_sh and (n_sh < 4 or n_sh % 2):
        raise DomainError(f"--shadows must be 0 or an even number >= 4, got {shadows}",
                          hint="shadows come in complementary pairs, and LiRA's Gaussian fits and the counterfactual "
                               "standard error need at least two IN and two OUT models per text")
    if (kappa is None) != (soundness_epsilon is None):
        raise InputError("the canary soundness check needs both the baseline kappa and the claimed epsilon",
                         hint="pass --kappa K and --soundness-epsilon EPS together")
    if kappa is not None:  # the soundness check's domains fail before any scoring
        from ..validate import in_unit, positive

        in_unit("--kappa (the canaries' prior baseline)", kappa)
        positive("--soundness-epsilon", soundness_epsilon)
    m = _load(model, dtype=dtype, sot=sot, trust_remote_code=trust_remote_code)
    ref_model = (_load(reference, dtype=dtype, trust_remote_code=trust_remote_code)  # a bad --reference fails first
                 if reference is not None else None)
    mem = read_texts(members, label="members", text_field=text_field, id_field=id_field, fmt=input_format)
    non = read_texts(nonmembers, label="nonmembers", text_field=text_field, id_field=id_field, fmt=input_format)
    overlap = {r.text for r in mem.records} & {r.text for r in non.records}
    if overlap:
        t = next(iter(overlap))
        raise InputError(f"{len(overlap)} text(s) are both members and non-members, e.g. {t[:60]!r}",
                         hint="a text cannot be in both sets; remove the duplicates")
    wm = _windows(m, mem, settings, what="members")
    wn = _windows(m, non, settings, what="non-members")
    tpr_note = None
    if settings.fpr is not None:
        try:
            certified_threshold(np.zeros(len(wn)), fpr=settings.fpr)  # refuses before any model work
        except DomainError as exc:
            if strict_fpr:
                raise
            tpr_note = f"TPR at a certified FPR not reported: {exc}"
            settings = replace(settings, fpr=None)
    attacks = _select_attacks(settings.attacks, have_reference=reference is not None, have_shadows=n_sh > 0)
    pol_specs = ["full"] + ([settings.extraction_policy] if settings.extraction_policy else [])
    if settings.verifier_policy != "greedy":
        pol_specs.append(settings.verifier_policy)
    policies = parse_policies(pol_specs)
    store = out / "scores"
    scoring: dict = {}
    notes: list[str] = []

    def score(lm_, ws, label, *, rule=None, inputs=None):
        summ = run_scoring(lm_, ws, policies=policies, prefix_tokens=settings.prefix_tokens,
                           suffix_tokens=settings.suffix_tokens, prompt_rule=rule or PromptRule(), out_dir=store,
                           label=label, inputs=inputs or {}, batch_size=settings.batch_size, progress=progress)
        scoring[label] = {"run_id": summ.run_id, "units_scored": summ.units_scored,
                          "units_reused": summ.units_reused, "n_windows": summ.n_windows}
        return load_run_scores(store, run=summ.run_id, policy="full")

    _check_context(m, wm, "members")
    _check_context(m, wn, "non-members")
    _say(log, f"scoring {len(wm)} members and {len(wn)} non-members with {m.name}")
    run_m = score(m, wm, "members", inputs=mem.inputs)
    run_n = score(m, wn, "nonmembers", inputs=non.inputs)
    _check_same_procedure(run_m.procedure, run_n.procedure)

    # reference model ------------------------------------------------------------------
    ref_runs = (None, None)
    ref_info = None
    if ref_model is not None:
        r = ref_model
        same = _same_tokenization(m, r, [w for w in wm.windows] + [w for w in wn.windows])
        if same:
            rwm, rwn, straddles = wm, wn, 0
            how = "same tokenization: the reference scores the same token windows"
        else:
            rwm, s1 = _char_aligned_windows(wm, r)
            rwn, s2 = _char_aligned_windows(wn, r)
            straddles = s1 + s2
            how = ("the reference model tokenizes differently: its windows are the same characters (prefix text, "
                   "suffix text) re-tokenized whole by its own tokenizer, and the reference attack compares total "
                   "log-likelihoods of the suffix characters per text, not per token")
            notes.append(how)
        _check_context(r, rwm, "reference members")
        _check_context(r, rwn, "reference non-members")
        _say(log, f"scoring with the reference model {r.name}")
        # (for re-tokenized windows the recorded prefix/suffix lengths are the target's; the run's inputs
        # say that the reference's own windows are character-aligned and of variable token length)
        rin = {"alignment": how, "reference_windows": "target's" if same else "character-aligned, variable length"}
        ref_runs = (score(r, rwm, "reference:members", inputs=rin), score(r, rwn, "reference:nonmembers", inputs=rin))
        ref_info = {"model": r.describe(), "same_tokenization": bool(same), "alignment": how,
                    "boundary_inside_token": int(straddles), "per": "text"}

    # shadows -------------------------------------------------------------------------
    sset = None
    shadow_m = shadow_n = None
    in_m = in_n = None
    if n_sh:
        pop = population_from_texts(mem.records, non.records, names=("members", "nonmembers"))
        if shadow_recipe is None:
            shadow_recipe, bg = default_shadow_recipe(m)
            shadow_background = shadow_background or bg
        base_tok = _load(shadow_recipe.base, trust_remote_code=trust_remote_code)
        if not _same_tokenization(m, base_tok, list(wm.windows[:50]) + list(wn.windows[:50])):
            raise InputError(f"the shadow base {shadow_recipe.base!r} tokenizes differently from the audited model",
                             hint="shadows must share the audited model's tokenizer (use its pre-fine-tuning checkpoint)")
        if shadow_recipe.mode == "finetune" and Path(shadow_recipe.base).resolve() == Path(m.path).resolve():
            notes.append("shadows were fine-tuned from the audited model itself: whatever it learned about the "
                         "members carries into the OUT shadows, which weakens LiRA; pass the checkpoint the audited "
                         "model was fine-tuned from as the shadow base")
        if getattr(m, "name", "") == "toy" and shadow_recipe.mode == "scratch":
            notes.append("toy shadows insert each record of their half once; the planted toy members were trained "
                         "k times, so their IN distribution is understated (LiRA stays valid, its calibration does not "
                         "model duplication)")
        sset = ensure_shadows(out / "shadows", population=pop, n_shadows=n_sh, recipe=shadow_recipe,
                              design_seed=design_seed, background=shadow_background, sep_ids=m.sot_ids, log=log)
        in_m = sset.in_mask(_record_texts(mem, wm), what="members")        # [S, n_members]
        in_n = sset.in_mask(_record_texts(non, wn), what="nonmembers")     # [S, n_nonmembers]
        from ..models import load_model

        shadow_m, shadow_n = [], []
        for i, path in enumerate(sset.paths):
            sm = load_model(path, dtype=dtype, sot=_sot_rule(m), trust_remote_code=trust_remote_code)
            _say(log, f"scoring under shadow {i + 1}/{len(sset)}")
            shadow_m.append(score(sm, wm, f"shadow{i}:members"))
            shadow_n.append(score(sm, wn, f"shadow{i}:nonmembers"))

    st_m = scored_texts_from_run(run_m, reference_run=ref_runs[0], shadow_runs=shadow_m, shadow_in=in_m,
                                 statistic=settings.lira_statistic)
    st_n = scored_texts_from_run(run_n, reference_run=ref_runs[1], shadow_runs=shadow_n, shadow_in=in_n,
                                 statistic=settings.lira_statistic)
    evals = _evaluate(attacks, st_m, st_n, settings)

    # extraction, trigger, verifier ----------------------------------------------------
    ext_m = extraction_from_run(run_m, policy=settings.extraction_policy, m=settings.m, confidence=settings.confidence)
    ext_n = extraction_from_run(run_n, policy=settings.extraction_policy, m=settings.m, confidence=settings.confidence)
    trig_m = trig_n = None
    if settings.trigger is not None:
        rule = trigger_rule(settings.trigger)
        tm = score(m, wm, "trigger:members", rule=rule)
        tn = score(m, wn, "trigger:nonmembers", rule=rule)
        trig_m = extraction_from_run(tm, policy=settings.extraction_policy, m=settings.m, prompt="trigger",
                                     trigger=settings.trigger, confidence=settings.confidence)
        trig_n = extraction_from_run(tn, policy=settings.extraction_policy, m=settings.m, prompt="trigger",
                                     trigger=settings.trigger, confidence=settings.confidence)
    ver = verify_run(run_m, policy=settings.verifier_policy, m=settings.verifier_m,
                     threshold=settings.verifier_threshold, confidence=settings.confidence)
    sound = None
    if kappa is not None:
        sound = soundness_check(ext_m, epsilon=soundness_epsilon, kappa=kappa, relation=soundness_relation,
                                confidence=settings.confidence)

    # counterfactual memorization ------------------------------------------------------
    cf: tuple = ()
    if sset is not None:
        lps = [sm_.token_array("token_logprob") + sn_.token_array("token_logprob")
               for sm_, sn_ in zip(shadow_m, shadow_n)]
        mask = np.concatenate([in_m, in_n], axis=1)  # [S, n_m + n_n]
        nm, nn = len(wm), len(wn)
        cf = tuple(counterfactual_from_shadows(lps, mask, score=sc, confidence=settings.confidence, cap=cap,
                                               groups={"members": np.arange(nm), "non-members": np.arange(nm, nm + nn)})
                   for sc in settings.counterfactual_scores)

    result = AuditResult(
        model=m.describe(), procedure=run_m.procedure, procedure_key=run_m.procedure_key, store=str(store),
        settings=settings, inputs=(mem.inputs, non.inputs), n_members=len(wm), n_nonmembers=len(wn),
        skipped_short={"members": wm.skipped_short, "nonmembers": wn.skipped_short}, attacks=evals,
        tpr_note=tpr_note, extraction=ext_m, extraction_nonmembers=ext_n, trigger_extraction=trig_m,
        trigger_nonmembers=trig_n, verifier=ver, reference=ref_info, shadows=sset, counterfactual=cf,
        soundness=sound, scoring=scoring, notes=tuple(notes), seconds=time.perf_counter() - t0)
    if write:
        result = write_audit_report(result, out)
    return result


def _record_texts(ts: TextSet, ws) -> list[str]:
    """The full record text behind each window (windows are cut from records by id)."""
    by_id = {r.id: r.text for r in ts.records}
    return [by_id[w.source] for w in ws.windows]


def _check_context(model, ws, what: str) -> None:
    """Refuse, before any scoring, windows the model cannot score: an empty prompt, or a window
    longer than the model's context (the position embedding would overflow)."""
    from ..scoring.prompts import PromptRule
    from ..scoring.runner import scoring_pairs

    scoring_pairs(model, ws, PromptRule(), what=what)


def _same_tokenization(a, b, windows) -> bool:
    """True iff b's tokenizer gives the same ids as a's on every window's full text (prefix +
    suffix characters) -- the operational meaning of "same tokenizer" for these texts."""
    for w in windows:
        text = w.prefix_text + w.suffix_text
        if a.tokenizer.encode(text) != b.tokenizer.encode(text):
            return False
    return True


def _char_aligned_windows(ws, ref):
    """The same characters as the target's windows, re-tokenized whole (prefix + suffix text)
    by the reference tokenizer and split at the character boundary; a reference token that
    straddles the boundary goes to the suffix (so the reference scores at least every suffix
    character). Returns (WindowSet, number of straddling boundaries)."""
    from ..text.windows import Window, WindowSet

    out, straddles = [], 0
    for w in ws.windows:
        text = w.prefix_text + w.suffix_text
        b = len(w.prefix_text)
        ids, offsets = ref.tokenizer.encode_with_offsets(text)
        n_prefix = 0
        for (s, e) in offsets:
            if e <= b:
                n_prefix += 1
            else:
                if s < b:
                    straddles += 1
                break
        if n_prefix == len(ids):
            raise InputError(f"window {w.window_id}: the reference tokenizer puts no token in the suffix {w.suffix_text!r}")
        if n_prefix == 0 and not ref.sot_ids:
            raise InputError(f"window {w.window_id}: the reference model has no start-of-text token and the prefix "
                             "is empty, so there is no prompt", hint="give the reference a start-of-text rule (--sot)")
        out.append(Window(source=w.source, index=w.index, prefix_ids=tuple(ids[:n_prefix]),
                          suffix_ids=tuple(ids[n_prefix:]), prefix_span=w.prefix_span, suffix_span=w.suffix_span,
                          prefix_text=w.prefix_text, suffix_text=w.suffix_text, token_start=w.token_start))
    return WindowSet(tuple(out), ws.n_sources, 0, (), dict(ws.total_chars)), straddles


def audit_runs(member_run, nonmember_run, *, settings: AuditSettings | None = None) -> AuditResult:
    """Audit two already-scored runs (:class:`memclaim.scoring.results.RunScores`), e.g. read back
    with :func:`memclaim.scoring.results.load_run_scores`. Refuses runs scored under different
    procedures (model, start-of-text, window lengths, prompt rule) and fewer than two of either.
    Attacks: those the runs support (no reference, no shadows)."""
    settings = settings or AuditSettings()
    _check_same_procedure(member_run.procedure, nonmember_run.procedure)
    for r, what in ((member_run, "members"), (nonmember_run, "non-members")):
        if len(r) < 2:
            raise InputError(f"an audit needs at least two {what}; run {r.run_id} has {len(r)}")
    if settings.fpr is not None:
        certified_threshold(np.zeros(len(nonmember_run)), fpr=settings.fpr)
    attacks = _select_attacks(settings.attacks, have_reference=False, have_shadows=False)
    st_m, st_n = scored_texts_from_run(member_run), scored_texts_from_run(nonmember_run)
    evals = _evaluate(attacks, st_m, st_n, settings)
    pol = settings.extraction_policy
    have = [c for c in member_run.table.column_names if c.startswith("logq:")]
    if pol is not None and f"logq:{pol}" not in have:
        pol = None
    ext_m = extraction_from_run(member_run, policy=pol, m=settings.m, confidence=settings.confidence)
    ext_n = extraction_from_run(nonmember_run, policy=pol, m=settings.m, confidence=settings.confidence)
    ver = None
    if member_run.procedure.get("prompt", {}).get("kind") in (None, "natural-prefix"):
        ver = verify_run(member_run, threshold=settings.verifier_threshold, confidence=settings.confidence)
    return AuditResult(model=dict(member_run.procedure.get("model", {})), procedure=member_run.procedure,
                       procedure_key=member_run.procedure_key, store=member_run.store, settings=settings,
                       inputs=(member_run.inputs, nonmember_run.inputs), n_members=len(member_run),
                       n_nonmembers=len(nonmember_run), skipped_short={}, attacks=evals, tpr_note=None,
                       extraction=ext_m, extraction_nonmembers=ext_n, verifier=ver)


# ------------------------------------------------------------------------------------ report
def audit_statements(result: AuditResult) -> list[str]:
    """What the numbers do and do not mean, in words (report.json ``statements``)."""
    s = [
        "AUC is the probability that a random member scores above a random non-member (ties count one half); "
        "the interval is DeLong's (Hoeffding's where DeLong's variance is exactly zero). The leak signal 2 AUC - 1 "
        "is 0 at chance and 1 at full separation ([MX] Fig. 12).",
        "A TPR at a certified FPR uses a threshold set on the non-members by the conformal rank rule K = "
        "floor(alpha (N + 1)): a fresh non-member exchangeable with them is flagged with probability at most "
        "K / (N + 1). The TPR interval is Clopper-Pearson over the members ([EM] Eq. 5-6).",
        "Membership is not extraction. An attack that separates members from non-members says the model treats "
        "them differently on these tokens, not that anything can be generated; and a clean membership audit does "
        "not mean nothing is extractable: a secret reachable only through another prompt is invisible to every "
        "loss-based score ([MX] Thm. 6.1, Cor. 6.2).",
        "The guarantees hold for non-members exchangeable with the members (same source, format and length): "
        "non-members from another distribution make every attack look stronger than it is.",
        "Extraction rates are measured from the records' own prefixes (and the trigger, if given) only; the "
        "unlearning verifier thresholds the greedy recovered fraction at the stated level and certifies nothing "
        "about other prompts ([MX] Cor. 6.3).",
    ]
    if result.counterfactual:
        s.append("The counterfactual estimate comes from shadows trained on random halves of the population: it "
                 "estimates the population-conditional functional COND, not RO or LOO; a DP cap applies to RO "
                 "(replace-one) or LOO (add/remove), and comparing COND with it needs [MX] Prop. A.2's slack "
                 "([MX] App. A, Remark A.3).")
    return s


def _iv(x, lo, hi, d=3) -> str:
    return f"{x:.{d}f} [{lo:.{d}f}, {hi:.{d}f}]"


def _roc_png(result: AuditResult) -> bytes | None:
    try:
        from ..report.figures import _fig, _png
    except Exception:  # pragma: no cover - matplotlib missing
        return None
    fig, (ax,) = _fig(6.0, 4.2)
    nn = result.n_nonmembers
    for e in result.attacks:
        # empirical ROC by sweeping every distinct score (scikit-learn's roc_curve is not a dependency)
        x, y = e.member_scores, e.nonmember_scores
        thr = np.unique(np.concatenate([x, y]))[::-1]
        tpr = np.array([0.0] + [float(np.mean(x >= t)) for t in thr])
        fpr = np.array([0.0] + [float(np.mean(y >= t)) for t in thr])
        ax.plot(np.maximum(fpr, 0.5 / nn), np.maximum(tpr, 0.5 / max(1, result.n_members)), label=e.attack, lw=1.2)
    grid = np.logspace(math.log10(0.5 / nn), 0, 50)
    ax.plot(grid, grid, color="0.6", ls="--", lw=0.8, label="chance")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("false-positive rate (non-members)")
    ax.set_ylabel("true-positive rate (members)")
    ax.set_title("ROC curves (log-log; zero rates drawn at half a count)", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    return _png(fig)


def build_audit_doc(result: AuditResult, *, title: str = "Membership-inference and extraction audit"):
    from ..report.core import Doc, fmt_num

    doc = Doc(title)
    doc.callout(result.headline(), "claim")
    for n in result.notes:
        doc.callout(n, "note")
    doc.h2("Membership-inference attacks")
    fpr_head = "TPR at certified FPR [CP]"
    rows = []
    for e in result.attacks:
        a = e.auc
        tpr = "–"
        if e.tpr is not None:
            t = e.tpr
            tpr = f"{t.true_positives}/{t.n_members} = {_iv(t.tpr, t.low, t.high)} at {t.certified_fpr:.4g}"
        rows.append([e.attack, _iv(a.auc, a.low, a.high), a.interval_method,
                     _iv(a.leak_signal, a.leak_low, a.leak_high, 2), tpr, e.measures])
    doc.table(["attack", f"AUC [{100 * result.settings.confidence:g}% CI]", "interval", "leak signal 2AUC-1", fpr_head,
               "what it measures"], rows,
              caption=f"{result.n_members} members vs {result.n_nonmembers} non-members; suffix of "
                      f"{result.settings.suffix_tokens} tokens after a {result.settings.prefix_tokens}-token prefix")
    if result.tpr_note:
        doc.p(result.tpr_note)
    doc.figure("ROC curves of every attack (log-log)", _roc_png(result))
    doc.table(["attack", "citation"], [[e.attack, e.citation] for e in result.attacks])
    if result.reference is not None:
        doc.p(f"Reference model: {result.reference['model']['name']} — {result.reference['alignment']}.")
    doc.h2("Extraction audits")
    rows = []
    for label, ex in (("members, own prefix", result.extraction), ("non-members, own prefix", result.extraction_nonmembers),
                      ("members, trigger", result.trigger_extraction), ("non-members, trigger", result.trigger_nonmembers)):
        if ex is None:
            continue
        samp = "–" if ex.policy is None else f"{fmt_num(ex.expected_rate)} (m = {ex.m}, {ex.policy})"
        rows.append([label, f"{ex.greedy_successes}/{ex.n}", _iv(ex.greedy_rate, ex.greedy_low, ex.greedy_high),
                     samp, ex.near_ties])
    doc.table(["records", "greedy reproduced", "greedy rate [CP]", "expected fraction under sampling (exact)",
               "near-ties"], rows)
    if result.soundness is not None:
        doc.p(f"Canary soundness ([MX] Cor. 5.3): {result.soundness.verdict}.")
    if result.verifier is not None:
        doc.h2("Unlearning verifier")
        doc.p(result.verifier.statement)
    if result.shadows is not None:
        sh = result.shadows
        doc.h2("Shadow models")
        doc.p(f"{len(sh)} shadows ({sh.recipe['mode']}), {sh.design}; population of {sh.population_size} records "
              f"(sha256 {sh.population_sha256[:16]}); trained now: {len(sh.trained)}, reused: {len(sh.reused)}.")
        for cf in result.counterfactual:
            est = cf.estimate
            rows = [[g, v["n"], fmt_num(v["mean_mem"]), fmt_num(v["se_across"]), fmt_num(v["max_mem"])]
                    for g, v in cf.by_set.items()]
            doc.table(["texts", "n", f"mean mem_h ({cf.functional})", "SE across texts", "max"], rows,
                      caption=f"h = {cf.score}; {cf.se_method}")
            doc.p(f"Overall mean mem_{cf.functional} = {fmt_num(est.mean_mem)} "
                  f"[{fmt_num(est.low)}, {fmt_num(est.high)}] over {est.n_targets} texts.")
            if cf.cap is not None:
                doc.p(f"Against the cap: {cf.cap.note}.")
            elif cf.cap_refused:
                doc.p(f"Comparison with the cap refused: {cf.cap_refused}")
    doc.h2("What this does and does not mean")
    doc.bullets(audit_statements(result))
    doc.h2("Procedure and inputs")
    proc = result.procedure
    doc.table(["field", "value"], [
        ("model", f"{proc.get('model', {}).get('name')} (fingerprint {str(proc.get('model', {}).get('fingerprint'))[:16]})"),
        ("start of text", str(proc.get("start_of_text", {}).get("tokens"))),
        ("window", f"{proc.get('prefix_tokens')} prefix + {proc.get('suffix_tokens')} suffix tokens"),
        ("policies", ", ".join(proc.get("policies", []))),
        ("store", result.store)] + [(f"input {i.get('role')}", f"{i.get('path')} sha256 {str(i.get('sha256'))[:16]}")
                                     for i in result.inputs])
    return doc


def write_audit_report(result: AuditResult, out_dir) -> AuditResult:
    from ..report.core import render, write_report

    doc = build_audit_doc(result)
    results = result.to_dict()
    results.pop("report", None)
    bundle = render(doc, command="audit", procedure=result.procedure, inputs=list(result.inputs), results=results,
                    statements=audit_statements(result))
    paths = write_report(Path(out_dir), bundle)
    return replace(result, report=paths)


# ------------------------------------------------------------------ the disagreement table
TABLE_SPEC_DOC = """\
SPEC.json for `memclaim audit table` (paths relative to the file's folder):

{
  "settings": {"prefix_tokens": 32, "suffix_tokens": 32, "confidence": 0.95,
               "verifier_threshold": 0.15, "shadows": 0},            (all optional)
  "instances": [
    {"name": "naive duplicate",                                      (row label, unique)
     "model": "runs/model-a",                                        (model spec or folder)
     "members": "secrets.jsonl", "nonmembers": "heldout.jsonl",      (text files)
     "prefix_tokens": 16, "suffix_tokens": 16,                       (optional overrides)
     "shadows": 8,                                                   (optional: adds the LiRA cell)
     "verifier_model": "runs/model-a-unlearned",                     (optional: the verifier runs here)
     "baseline": {"kappa": 0.32} or {"successes": 15, "trials": 48}, (optional prior baseline)
     "informed": {"successes": 46, "trials": 48, "cap": 0.0625}},    (optional ground truth)
    {"name": "pre-scored",
     "members_run": {"store": "runs/s", "run": "members"},           (already-scored runs instead
     "nonmembers_run": {"store": "runs/s", "run": "nonmembers"}}      of model + files)
  ]
}

Columns: extraction at prefix (greedy rate of the members from their own prefix), loss-MIA
(AUC of the loss attack as 2 AUC - 1), LiRA (online, when shadows are given), unlearning
verifier (recovered fraction under the verifier, on verifier_model if given), informed recovery
(the given ground-truth counts). A baseline turns rate cells into "guessed" when the prior alone
matches the rate ([MX] Cor. 5.3).
"""

TABLE_COLUMNS = ("extraction at prefix", "loss-MIA", "LiRA", "unlearning verifier", "informed recovery")


@dataclass(frozen=True)
class TableResult(ResultMixin):
    table: object
    audits: dict
    report: dict | None = None
    heatmap: str | None = None

    def to_dict(self) -> dict:
        return {"table": self.table.to_dict(), "markdown": self.table.to_markdown(), "audits": self.audits,
                "report": self.report, "heatmap": self.heatmap}


def _baseline_kwargs(spec: dict | None, name: str) -> dict:
    if not spec:
        return {}
    if not isinstance(spec, dict):
        raise InputError(f"instance {name!r}: baseline must be an object, got {spec!r}")
    if "kappa" in spec:
        return {"baseline": spec["kappa"]}
    if "successes" in spec and "trials" in spec:
        return {"baseline_successes": spec["successes"], "baseline_trials": spec["trials"]}
    raise InputError(f"instance {name!r}: baseline needs 'kappa' or 'successes' and 'trials', got {spec!r}")


def audit_table(spec: Mapping | str | Path, *, out_dir, base_dir=None, log=None, write: bool = True) -> TableResult:
    """Run the audits of every instance in ``spec`` (a dict or a JSON file, see
    :data:`TABLE_SPEC_DOC`) and assemble the [MX] Fig. 12 disagreement table."""
    from .table import AuditColumn, auc_cell, build_table, informed_cell, rate_cell

    if isinstance(spec, (str, Path)):
        p = Path(spec)
        data = read_json_object(p, "instances", hint=TABLE_SPEC_DOC)
        base = Path(base_dir) if base_dir is not None else p.parent
    else:
        data, base = dict(spec), Path(base_dir or ".")
    if not isinstance(data, dict) or not isinstance(data.get("instances"), list) or not data["instances"]:
        raise InputError("the instances spec must be an object with a non-empty list 'instances'", hint=TABLE_SPEC_DOC)
    gs = dict(data.get("settings") or {})
    known = {"prefix_tokens", "suffix_tokens", "confidence", "verifier_threshold", "shadows", "k", "fpr"}
    bad = set(gs) - known
    if bad:
        raise InputError(f"unknown settings {sorted(bad)}", hint=f"known: {sorted(known)}")
    out = Path(out_dir)

    def path(v):
        q = Path(v)
        return q if q.is_absolute() else base / q

    names = []
    for j, inst in enumerate(data["instances"]):  # validate every instance before any model work
        if not isinstance(inst, dict) or not isinstance(inst.get("name"), str) or not inst["name"].strip():
            raise InputError(f"instance {j} needs a 'name'", hint=TABLE_SPEC_DOC)
        name = inst["name"]
        if name in names:
            raise InputError(f"duplicate instance name {name!r}")
        names.append(name)
        if "members_run" in inst or "nonmembers_run" in inst:
            for key in ("members_run", "nonmembers_run"):
                if not isinstance(inst.get(key), dict) or "store" not in inst[key]:
                    raise InputError(f"instance {name!r}: {key} needs 'store' (and 'run')", hint=TABLE_SPEC_DOC)
        else:
            for key in ("model", "members", "nonmembers"):
                if key not in inst:
                    raise InputError(f"instance {name!r} lacks {key!r}", hint=TABLE_SPEC_DOC)
        _baseline_kwargs(inst.get("baseline"), name)
        inf = inst.get("informed")
        if inf and (not isinstance(inf, dict) or "successes" not in inf or "trials" not in inf):
            raise InputError(f"instance {name!r}: informed needs 'successes' and 'trials' (and optional 'cap')")
    rows: dict = {}
    details: dict = {}
    any_lira = any_informed = False
    for j, inst in enumerate(data["instances"]):
        name = inst["name"]
        settings = AuditSettings(prefix_tokens=int(inst.get("prefix_tokens", gs.get("prefix_tokens", 32))),
                                 suffix_tokens=int(inst.get("suffix_tokens", gs.get("suffix_tokens", 32))),
                                 confidence=float(gs.get("confidence", 0.95)), k=gs.get("k", "0.2"),
                                 verifier_threshold=float(gs.get("verifier_threshold", DEFAULT_THRESHOLD)),
                                 extraction_policy=None, attacks=None)
        n_sh = int(inst.get("shadows", gs.get("shadows", 0)))
        slug = "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in name)[:60] + f"-{j}"
        idir = out / "instances" / slug
        _say(log, f"instance {name!r}")
        bl = _baseline_kwargs(inst.get("baseline"), name)
        if "members_run" in inst or "nonmembers_run" in inst:
            from ..scoring.results import load_run_scores

            mr = load_run_scores(path(inst["members_run"]["store"]), run=inst["members_run"].get("run"),
                                 policy=inst["members_run"].get("policy", "full"))
            nr = load_run_scores(path(inst["nonmembers_run"]["store"]), run=inst["nonmembers_run"].get("run"),
                                 policy=inst["nonmembers_run"].get("policy", "full"))
            res = audit_runs(mr, nr, settings=replace(settings, attacks=("loss",)))
            ver = res.verifier
        else:
            attacks = ("loss",) + (("lira-online",) if n_sh else ())
            model = inst["model"]
            mp = path(model)
            res = run_audit(str(mp) if mp.exists() else model, path(inst["members"]), path(inst["nonmembers"]),
                            out_dir=idir, settings=replace(settings, attacks=attacks), shadows=n_sh, log=log,
                            write=write)
            ver = res.verifier
            if inst.get("verifier_model"):
                from ..text.io import read_passages

                vp = path(inst["verifier_model"])
                recs = read_passages(path(inst["members"])).records
                ver = _verify_long_enough(str(vp) if vp.exists() else inst["verifier_model"], recs, settings)
        cells = {}
        ex = res.extraction
        cells["extraction at prefix"] = rate_cell(ex.greedy_successes, ex.n, confidence=settings.confidence,
                                                  note="greedy, record's own prefix", **bl)
        cells["loss-MIA"] = auc_cell(res.attack("loss").auc)
        if any(e.attack == "lira-online" for e in res.attacks):
            cells["LiRA"] = auc_cell(res.attack("lira-online").auc)
            any_lira = True
        if ver is not None:
            cells["unlearning verifier"] = rate_cell(
                ver.retained, ver.n, confidence=settings.confidence, **bl,
                note=f"verifier: {ver.verdict} (recovered {ver.rate:.3f} {'<' if ver.forgotten else '>='} {ver.threshold:g})")
        inf = inst.get("informed")
        if inf:
            cells["informed recovery"] = informed_cell(int(inf["successes"]), int(inf["trials"]), cap=inf.get("cap"),
                                                       confidence=settings.confidence)
            any_informed = True
        rows[name] = cells
        details[name] = {"headline": res.headline(), "store": res.store, "report": res.report,
                         "verifier": None if ver is None else {"rate": ver.rate, "verdict": ver.verdict,
                                                                "threshold": ver.threshold}}
    cols = [AuditColumn("extraction at prefix", description="greedy extraction from the record's own prefix"),
            AuditColumn("loss-MIA", description="loss attack, 2 AUC - 1")]
    if any_lira:
        cols.append(AuditColumn("LiRA", description="online LiRA with shadows, 2 AUC - 1"))
    cols.append(AuditColumn("unlearning verifier", description="recovered fraction (verbatim, own prefix)"))
    if any_informed:
        cols.append(AuditColumn("informed recovery", informed=True, description="ground truth"))
    table = build_table(cols, rows)
    result = TableResult(table=table, audits=details)
    if write:
        result = _write_table(result, out)
    return result


def _verify_long_enough(model, records, settings: AuditSettings) -> VerifierResult:
    """The verifier on the member records long enough for the audit's windows (the same records
    the other columns read)."""
    from ..text.windows import passage_windows
    from .verifier import verify

    lm = _load(model)
    ws = passage_windows(records, lm.tokenizer, prefix_tokens=settings.prefix_tokens,
                         suffix_tokens=settings.suffix_tokens)
    return verify(lm, ws, threshold=settings.verifier_threshold, confidence=settings.confidence)


def _write_table(result: TableResult, out: Path) -> TableResult:
    import io

    from ..report.core import Doc, render, short_id, write_report
    from ..report.figures import disagreement_heatmap

    heat = out / "disagreement.png"
    buf = io.BytesIO()
    disagreement_heatmap(result.table, None).savefig(buf, format="png", dpi=150)
    png = buf.getvalue()
    doc = Doc("Audit disagreement ([MX] Fig. 12)")
    doc.p("Rows are leakage instances, columns are audits; each cell is the audit's leak signal (0 = chance, "
          "1 = full detection; rates directly, AUCs as 2 AUC - 1) with its interval and a verdict by the rules "
          "below. No single audit sees every leak ([MX] Cor. 6.2).")
    t = result.table
    doc.table(["instance"] + [c.name + (" (ground truth)" if c.informed else "") for c in t.columns],
              [[short_id(r)] + ["–" if c is None else f"{c.signal:.2f} [{c.low:.2f}, {c.high:.2f}] {c.verdict}"
                                for c in row] for r, row in zip(t.rows, t.cells)])
    doc.figure("Audit disagreement heatmap", png)
    doc.h2("Verdict rules")
    doc.p(t.rules)
    bundle = render(doc, command="audit table", procedure=None, inputs=(), results=result.to_dict(),
                    statements=["No single audit suffices: read each column for what it misses ([MX] Cor. 6.2)."])
    # the reports, table.md and the heatmap as one change (staged, then renamed into place)
    paths = write_report(out, bundle, extra_files={"table.md": t.to_markdown().encode("utf-8"),
                                                   "disagreement.png": png})
    return replace(result, report=paths, heatmap=str(heat))
