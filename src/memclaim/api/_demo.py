"""``memclaim demo``'s computations, stage by stage, on the built-in tiny GPT (the CLI prints them):
scoring the planted members, held-out controls and a document pair into one store; the claims
(population test and census, one report); the privacy section (its report); the
membership-inference audit; the index linking the reports. Each stage returns JSON-ready data;
``log`` receives the lines a person reads (headlines, where the reports are) and ``progress``
the progress of every step, building the tiny GPT on first use included
(:func:`memclaim.progress.reporting`); transformers' own bars and warnings stay off."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..audits.run import run_audit
from ..audits.settings import AuditSettings
from ..claims.budget import census_budget_view
from ..claims.census import WindowScores, census, flag_near_verbatim
from ..claims.population import population_claim
from ..claims.scores import exact_level
from ..decoding import parse_policies
from ..errors import InputError
from ..fsutil import write_files
from ..models.quiet import quiet_libraries
from ..privacy.demo import run_demo_section
from ..procedure import DEFAULT_POLICY
from ..progress import LogCallback, ProgressCallback, emit_log, reporting
from ..report.audit import write_audit_report
from ..report.census import census_headline
from ..report.core import write_report
from ..report.demo import demo_claims_report, demo_index, demo_privacy_report, privacy_summary_lines
from ..report.population import headline
from ..report.words import verifier_reading
from ..scoring.prompts import PromptRule
from ..scoring.results import load_run_scores
from ..scoring.runner import run_scoring
from ..text.io import Record
from ..text.windows import passage_windows, sliding_windows
from ..train.corpus import MarkovZipf
from ..train.toy import toy_data
from ._common import check_out
from ._model import load_model
from ._runs import stored_test_procedure

__all__ = [
    "PREFIX",
    "SUFFIX",
    "POLICIES",
    "CLAIM_POLICY",
    "demo_scoring",
    "demo_claims",
    "demo_claims_of",
    "demo_canaries",
    "demo_privacy",
    "demo_audits",
    "demo_finish",
    "check_demo_options",
    "NEXT_COMMAND",
]

# what the demo tells a reader to try next, on their own model (its --help has examples that run)
NEXT_COMMAND = (
    "memclaim population MODEL --members MEMBERS.jsonl --controls CONTROLS.jsonl --out my-claim "
    "(MODEL: a HF folder, a .gguf file, smollm2 or gemma3-270m; examples: memclaim population --help)"
)

PREFIX, SUFFIX = 32, 32
POLICIES = ("full", DEFAULT_POLICY, "greedy")
# The claims use the untruncated softmax: under top-k:40 every 32-token control has probability
# exactly 0 on this tiny model, and a test whose controls are all atoms at 0 is refused ([EM] C.4.4).
CLAIM_POLICY = "full"


def check_demo_options(*, out, alpha) -> Path:
    """A bad alpha or output folder fails before the demo scores anything."""
    exact_level("alpha", alpha)
    return check_out(out, store="store", report=True)


def demo_scoring(
    out, *, progress: ProgressCallback | None = None, log: LogCallback | None = None
) -> dict:
    """Score the tiny GPT's planted members, held-out controls and a member/control document pair
    (sliding windows, stride 8) into ``out/store`` under :data:`POLICIES`. Returns the model, its
    data, the runs and the per-duplication score summary (``scoring``: median log10 q, share of
    q > 0 under top-k:40, greedy match). ``log`` gets one line on the model before any scoring."""
    with reporting(progress, log), quiet_libraries():
        return _demo_scoring(Path(out), progress=progress, log=log)


def _demo_scoring(out: Path, *, progress, log) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    data = toy_data()  # builds the tiny GPT on first use, reporting its progress (train/toy.py)
    model = load_model("toy")
    members = [r for r in data["planted"] if r["id"].startswith("member")]
    controls = [r for r in data["held_out"] if r["id"].startswith("control")]
    emit_log(
        log,
        f"tiny GPT: {data['spec']['n_layer']} layers, d={data['spec']['n_embd']}, trained "
        f"{data['train']['steps']} steps (loss {data['train']['first_loss']:.2f} -> "
        f"{data['train']['final_loss']:.2f}); {len(members)} planted passages (copies "
        f"{sorted({r['copies'] for r in members})}), {len(controls)} held-out controls from the same "
        "generator",
    )
    policies = parse_policies(POLICIES)
    store = out / "store"
    kw = dict(
        policies=policies,
        prefix_tokens=PREFIX,
        suffix_tokens=SUFFIX,
        prompt_rule=PromptRule(),
        out_dir=store,
        progress=progress,
    )
    runs = {}
    for label, recs in (("members", members), ("controls", controls)):
        ws = passage_windows(
            [Record(r["id"], r["text"]) for r in recs],
            model.tokenizer,
            prefix_tokens=PREFIX,
            suffix_tokens=SUFFIX,
        )
        runs[label] = run_scoring(model, ws, label=label, inputs={"toy": data["spec"]}, **kw)
    docs = {
        r["id"]: r["text"]
        for r in data["planted"] + data["held_out"]
        if r["id"].startswith("document")
    }
    for label in ("document-member", "document-control"):
        ws = sliding_windows(
            docs[label],
            model.tokenizer,
            prefix_tokens=PREFIX,
            suffix_tokens=SUFFIX,
            stride=8,
            source=label,
        )
        runs[label] = run_scoring(model, ws, label=label, inputs={"toy": data["spec"]}, **kw)
    m = load_run_scores(store, run=runs["members"].run_id, policy=DEFAULT_POLICY)
    c = load_run_scores(store, run=runs["controls"].run_id, policy=DEFAULT_POLICY)
    mg = load_run_scores(store, run=runs["members"].run_id, policy="greedy")
    copies = {r["id"]: r["copies"] for r in members}
    ln10 = np.log(10)
    scoring = {}
    for k in sorted(set(copies.values())):
        sel = np.array([copies[s] == k for s in m.sources])
        v = m.logq[sel]
        scoring[f"members k={k}"] = {
            "n": int(sel.sum()),
            "median_log10_q": float(np.median(v) / ln10),
            "share_nonzero": float(np.isfinite(v).mean()),
            "greedy_match": float(mg.greedy_match[sel].mean()),
        }
    scoring["controls"] = {
        "n": len(c),
        "median_log10_q": float(np.median(c.logq) / ln10),
        "share_nonzero": float(np.isfinite(c.logq).mean()),
        "greedy_match": float(
            load_run_scores(store, run=runs["controls"].run_id, policy="greedy").greedy_match.mean()
        ),
    }
    return {
        "model": model,
        "data": data,
        "members": members,
        "controls": controls,
        "documents": docs,
        "store": store,
        "runs": runs,
        "copies": copies,
        "scoring": scoring,
    }


def _windows(spec, name) -> tuple[WindowScores, str | None, tuple]:
    if isinstance(spec, WindowScores):
        return spec, None, ()
    if not isinstance(spec, dict):
        raise InputError(
            f"census input {name!r} must be a WindowScores or a dict", hint="see demo_claims's doc"
        )
    text = spec.get("text")
    L = spec.get("doc_length", len(text) if text is not None else None)
    w = WindowScores.from_arrays(
        spec["log_scores"], spec["starts"], spec["ends"], doc_length=L, name=spec.get("name", name)
    )
    return w, text, tuple(spec.get("exclude_spans", ()))


def demo_claims(
    *,
    member_logq,
    control_logq,
    census_inputs: dict | None = None,
    out_dir,
    alpha="0.05",
    procedure: dict | None = None,
    member_ids=None,
    control_ids=None,
    log: LogCallback | None = None,
) -> dict:
    """Population test of ``member_logq`` (natural-log q of planted members) against
    ``control_logq`` (held-out controls) at target FPR ``alpha``; if ``census_inputs`` is
    given, a census of ``census_inputs['document']`` against ``census_inputs['control']``
    (each a :class:`WindowScores` or a dict with ``log_scores``, ``starts``, ``ends`` (suffix
    character spans), ``text`` or ``doc_length``, optional ``name`` and, for the control,
    ``exclude_spans``). Writes ``out_dir``/report.{json,md,html}; returns a summary dict."""
    claim = population_claim(
        candidate_scores=member_logq,
        control_scores=control_logq,
        alpha=alpha,
        kind="log-prob",
        candidate_ids=member_ids,
        control_ids=control_ids,
        budget_delta=0.05,
    )
    t = claim.primary_test
    summary = {
        "population": {
            "headline": headline(claim, procedure),
            "k": t.k,
            "alpha_n": t.alpha_n,
            "n_claimed": t.n_claimed,
            "n_candidates": t.n_candidates,
            "threshold_log10_prob": t.threshold_log10_prob,
        }
    }
    emit_log(log, headline(claim, procedure))
    res = bv = None
    flagged, doc_text = (), None
    if census_inputs is not None:
        doc_w, doc_text, _ = _windows(census_inputs["document"], "document")
        ctl_w, ctl_text, excl = _windows(census_inputs["control"], "control")
        res = census(doc_w, ctl_w, exclude_spans=excl)
        bv = census_budget_view(res.heat_log10, log10_tau=res.log10_tau)
        flagged = (
            flag_near_verbatim(ctl_w, ctl_text, candidate_text=doc_text)
            if ctl_text and doc_text
            else ()
        )
        summary["census"] = {
            "headline": census_headline(res, procedure),
            "log10_tau": res.log10_tau,
            "coverage": res.coverage,
        }
        emit_log(log, census_headline(res, procedure))
    bundle = demo_claims_report(
        claim,
        census=res,
        census_budget=bv,
        flagged=flagged,
        document_text=doc_text,
        procedure=procedure,
    )
    summary["report"] = write_report(Path(out_dir), bundle)
    emit_log(log, f"claims report: {summary['report']['html']}")
    return summary


def demo_claims_of(scored: dict, *, out_dir, alpha="0.05", log: LogCallback | None = None) -> dict:
    """:func:`demo_claims` on :func:`demo_scoring`'s runs under :data:`CLAIM_POLICY`: the planted
    members against the held-out controls, and the planted document against the held-out one."""
    with quiet_libraries():
        return _demo_claims_of(scored, out_dir=out_dir, alpha=alpha, log=log)


def _demo_claims_of(scored: dict, *, out_dir, alpha="0.05", log: LogCallback | None = None) -> dict:
    store, runs, docs = scored["store"], scored["runs"], scored["documents"]
    dm = load_run_scores(store, run=runs["document-member"].run_id, policy=CLAIM_POLICY)
    dc = load_run_scores(store, run=runs["document-control"].run_id, policy=CLAIM_POLICY)
    mf = load_run_scores(store, run=runs["members"].run_id, policy=CLAIM_POLICY)
    cf = load_run_scores(store, run=runs["controls"].run_id, policy=CLAIM_POLICY)
    census_inputs = {
        "document": {
            "log_scores": dm.logq,
            "starts": dm.suffix_spans[:, 0],
            "ends": dm.suffix_spans[:, 1],
            "text": docs["document-member"],
            "name": "document-member (planted 4x)",
        },
        "control": {
            "log_scores": dc.logq,
            "starts": dc.suffix_spans[:, 0],
            "ends": dc.suffix_spans[:, 1],
            "text": docs["document-control"],
            "name": "document-control (held out)",
        },
    }
    return demo_claims(
        member_logq=mf.logq,
        control_logq=cf.logq,
        census_inputs=census_inputs,
        out_dir=out_dir,
        alpha=alpha,
        procedure=stored_test_procedure(mf),
        member_ids=list(mf.sources),
        control_ids=list(cf.sources),
        log=log,
    )


def demo_canaries(scored: dict) -> list[dict]:
    """The privacy section's canaries: one per duplication level of the planted passages (a
    passage planted k times is covered only by the k-fold group curve, [MX] Cor. 4.3, so its
    verdict differs from a single copy's), a short secret from the same generator and an 8-bit
    secret; min-entropies from the toy's own Markov-Zipf generator."""
    spec = scored["data"]["spec"]
    members, model = scored["members"], scored["model"]
    gen = MarkovZipf(n_words=spec["n_words"], s=spec["zipf_s"], seed=spec["corpus_seed"])
    words = max(
        1,
        round(
            SUFFIX
            * len(members[0]["text"].split())
            / max(1, len(model.tokenizer.encode(members[0]["text"])))
        ),
    )
    h_inf = gen.min_entropy_bits(words)
    return [
        {
            "name": f"planted passage suffix (~{words} words), {k} cop{'y' if k == 1 else 'ies'}",
            "min_entropy_bits": h_inf,
            "m": 1,
            "tau": 0.1,
            "copies": int(k),
        }
        for k in sorted(set(scored["copies"].values()))
    ] + [
        {
            "name": "3-word secret from the same generator",
            "min_entropy_bits": gen.min_entropy_bits(3),
            "m": 1,
            "tau": 0.1,
        },
        {
            "name": "8-bit secret (256 equally likely values)",
            "min_entropy_bits": 8.0,
            "m": 1,
            "tau": 0.1,
        },
    ]


def _records(x, label):
    if isinstance(x, (str, Path)):
        return x
    out = []
    for j, r in enumerate(x):
        if isinstance(r, str):
            out.append({"id": f"{label}-{j}", "text": r})
        elif isinstance(r, dict):
            out.append({"id": str(r.get("id", f"{label}-{j}")), "text": r.get("text", "")})
        else:
            out.append(
                {"id": str(getattr(r, "id", f"{label}-{j}")), "text": getattr(r, "text", "")}
            )
    return out


def demo_audits(
    *,
    model,
    members,
    nonmembers,
    out_dir,
    prefix_tokens: int = 32,
    suffix_tokens: int = 32,
    fpr="0.05",
    shadows: int = 0,
    log: LogCallback | None = None,
    progress: ProgressCallback | None = None,
) -> dict:
    """Audit ``model`` (a LoadedModel or spec, e.g. ``"toy"``) on ``members`` vs ``nonmembers``
    (files, texts, dicts with ``text`` or Records) into ``out_dir`` (score store + report; no
    shadows by default: training shadows of the tiny GPT costs about a minute each).

    Returns a JSON-ready summary: per attack the AUC with its interval, leak signal and TPR at
    the certified FPR (dropped with a note when the non-members cannot certify ``fpr``), the
    extraction rates, the verifier's verdict and the report paths."""
    settings = AuditSettings(prefix_tokens=prefix_tokens, suffix_tokens=suffix_tokens, fpr=fpr)
    with reporting(progress, log), quiet_libraries():
        res = run_audit(
            model,
            _records(members, "member"),
            _records(nonmembers, "control"),
            out_dir=out_dir,
            settings=settings,
            shadows=shadows,
            strict_fpr=False,
            progress=progress,
        )
        res = write_audit_report(res, out_dir)
    summary = {
        "headline": res.headline(),
        "n_members": res.n_members,
        "n_nonmembers": res.n_nonmembers,
        "attacks": {},
        "tpr_note": res.tpr_note,
        "report": res.report,
    }
    for e in res.attacks:
        a = e.auc
        summary["attacks"][e.attack] = {
            "auc": a.auc,
            "low": a.low,
            "high": a.high,
            "interval": a.interval_method,
            "leak_signal": a.leak_signal,
            "excludes_chance": a.excludes_chance,
            "tpr": None
            if e.tpr is None
            else {
                "tpr": e.tpr.tpr,
                "low": e.tpr.low,
                "high": e.tpr.high,
                "certified_fpr": e.tpr.certified_fpr,
            },
        }
    ex, en = res.extraction, res.extraction_nonmembers
    summary["extraction"] = {
        "members": {"greedy": ex.greedy_successes, "n": ex.n, "expected_sampled": ex.expected_rate},
        "nonmembers": {
            "greedy": en.greedy_successes,
            "n": en.n,
            "expected_sampled": en.expected_rate,
        },
        "policy": ex.policy,
    }
    summary["verifier"] = {
        "verdict": res.verifier.verdict,
        "rate": res.verifier.rate,
        "threshold": res.verifier.threshold,
        "applies": False,
        "reading": verifier_reading(res.verifier.rate, res.verifier.threshold, unlearned=False),
    }
    emit_log(log, res.headline())
    if res.tpr_note:
        emit_log(log, res.tpr_note)
    emit_log(log, summary["verifier"]["reading"])
    emit_log(log, f"audit report: {res.report['html']}")
    return summary


def demo_privacy(scored: dict, *, out_dir, log: LogCallback | None = None) -> dict:
    """The privacy section ([MX] §4-§5) for :func:`demo_canaries`: its numbers
    (:func:`memclaim.privacy.demo.run_demo_section`), written as a report in ``out_dir``; returns
    the section with ``lines`` (one per canary, what the console shows) and ``report`` (paths)."""
    section = run_demo_section(canaries=demo_canaries(scored))
    section["report"] = write_report(Path(out_dir), demo_privacy_report(section))
    section["lines"] = privacy_summary_lines(section)
    for line in section["lines"]:
        emit_log(log, line)
    emit_log(log, f"privacy report: {section['report']['html']}")
    return section


def _index_owned(path: Path) -> bool:
    try:
        return (
            'name="generator" content="memclaim'
            in path.read_text(encoding="utf-8", errors="replace")[:2000]
        )
    except OSError:
        return False


def demo_finish(out, sections: dict, *, log: LogCallback | None = None) -> dict:
    """Write ``out``/index.html linking the demo's reports (and nothing memclaim did not write is
    replaced); ``log`` gets where the reports are and the command to try next. Returns
    {"index": path, "reports": {name: html path}, "next": the command}."""
    out = Path(out)
    reports = {
        name: sections[name]["report"]["html"]
        for name in ("claims", "privacy", "audits")
        if name in sections and sections[name].get("report")
    }
    what = {
        "claims": (
            "Calibrated claims",
            "population test of the planted passages and census of a planted document ([EM] §3-§6)",
        ),
        "privacy": (
            "Privacy bounds",
            "what a DP guarantee would cap for the canaries ([MX] §4-§5)",
        ),
        "audits": (
            "Membership-inference audit",
            "attacks with intervals, extraction, the verifier ([MX] §8.2)",
        ),
    }
    entries = [
        (
            what[k][0],
            str(Path(p).relative_to(out)) if Path(p).is_relative_to(out) else str(p),
            what[k][1],
        )
        for k, p in reports.items()
    ]
    heads = [sections["claims"]["population"]["headline"]] if "claims" in sections else []
    bundle = demo_index(entries, headlines=heads)
    index = write_files(out, {"index.html": bundle.html.encode("utf-8")}, owned=_index_owned)[
        "index.html"
    ]
    emit_log(
        log,
        f"reports: {index} links the {len(entries)} reports ("
        + ", ".join(str(p) for p in reports.values())
        + ")",
    )
    emit_log(log, f"next, on your own model: {NEXT_COMMAND}")
    return {"index": str(index), "reports": reports, "next": NEXT_COMMAND}
