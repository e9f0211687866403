"""`memclaim demo`: the whole pipeline on the built-in tiny GPT, end to end, in a few minutes.

Trains (once, then cached) a tiny GPT on a Markov–Zipf corpus with passages planted 1, 4 and 16
times, scores the planted members and held-out controls drawn from the same generator, and
runs each stage that has landed: calibrated claims (population test + census, HTML report),
privacy bounds for the planted canaries, and membership-inference audits.
"""
from __future__ import annotations

import json
from pathlib import Path

import click
import numpy as np

from .common import print_json
from .progress import progress_bar

PREFIX, SUFFIX = 32, 32
POLICIES = ("full", "top-k:40", "greedy")
# The claims use the untruncated softmax: under top-k:40 every 32-token control has probability
# exactly 0 on this tiny model, and a test whose controls are all atoms at 0 is refused ([EM] C.4.4).
CLAIM_POLICY = "full"


def _jsonl(path: Path, records) -> Path:
    path.write_text("".join(json.dumps({"id": r["id"], "text": r["text"]}) + "\n" for r in records))
    return path


@click.command("demo")
@click.option("--out", "out_dir", default="memclaim-demo", show_default=True, type=click.Path(file_okay=False),
              help="Where the store and reports go (re-running reuses the store).")
@click.option("--alpha", default="0.05", show_default=True, help="Target FPR of the population test.")
@click.option("--json", "as_json", is_flag=True, help="Print a machine-readable summary.")
@click.option("--no-progress", is_flag=True)
def command(out_dir, alpha, as_json, no_progress):
    """Run the end-to-end demo on the built-in tiny GPT.

    \b
    Example:
      memclaim demo --out memclaim-demo
      open memclaim-demo/claims/report.html
    """
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from ..decoding import parse_policies
    from ..models import load_model
    from ..scoring.prompts import PromptRule
    from ..scoring.results import load_run_scores
    from ..scoring.runner import run_scoring
    from ..text.io import Record
    from ..text.windows import passage_windows, sliding_windows
    from ..train.corpus import MarkovZipf
    from ..train.toy import DEFAULT_SPEC, toy_data

    from ..claims.scores import exact_level
    from .common import check_out_dir

    exact_level("alpha", alpha)  # a bad --alpha fails before the demo scores anything
    out = check_out_dir(out_dir)
    con = Console(stderr=as_json, highlight=False)
    out.mkdir(parents=True, exist_ok=True)
    con.rule("[bold]memclaim demo[/]: the tiny GPT")
    data = toy_data()
    model = load_model("toy")
    members = [r for r in data["planted"] if r["id"].startswith("member")]
    controls = [r for r in data["held_out"] if r["id"].startswith("control")]
    con.print(f"tiny GPT: {data['spec']['n_layer']} layers, d={data['spec']['n_embd']}, trained "
              f"{data['train']['steps']} steps (loss {data['train']['first_loss']:.2f} -> {data['train']['final_loss']:.2f}); "
              f"{len(members)} planted passages (copies {sorted({r['copies'] for r in members})}), "
              f"{len(controls)} held-out controls from the same generator")
    policies = parse_policies(POLICIES)
    store = out / "store"
    kw = dict(policies=policies, prefix_tokens=PREFIX, suffix_tokens=SUFFIX, prompt_rule=PromptRule(),
              out_dir=store, progress=progress_bar(not no_progress and not as_json))
    runs = {}
    for label, recs in (("members", members), ("controls", controls)):
        ws = passage_windows([Record(r["id"], r["text"]) for r in recs], model.tokenizer,
                             prefix_tokens=PREFIX, suffix_tokens=SUFFIX)
        runs[label] = run_scoring(model, ws, label=label, inputs={"toy": data["spec"]}, **kw)
    docs = {r["id"]: r["text"] for r in data["planted"] + data["held_out"] if r["id"].startswith("document")}
    for label in ("document-member", "document-control"):
        ws = sliding_windows(docs[label], model.tokenizer, prefix_tokens=PREFIX, suffix_tokens=SUFFIX, stride=8,
                             source=label)
        runs[label] = run_scoring(model, ws, label=label, inputs={"toy": data["spec"]}, **kw)
    scored = sum(r.units_scored for r in runs.values())
    con.print(f"scored into {escape(str(store))} ({scored} units computed, "
              f"{sum(r.units_reused for r in runs.values())} reused from an earlier run)")

    m = load_run_scores(store, run=runs["members"].run_id, policy="top-k:40")
    c = load_run_scores(store, run=runs["controls"].run_id, policy="top-k:40")
    mg = load_run_scores(store, run=runs["members"].run_id, policy="greedy")
    copies = {r["id"]: r["copies"] for r in members}
    t = Table(title=f"Teacher-forced scores, {PREFIX}-token prefix, {SUFFIX}-token suffix", title_justify="left")
    for col in ("set", "n", "median log10 q (top-k:40)", "share q > 0 (top-k:40)", "greedy match"):
        t.add_column(col)
    summary = {"scoring": {}}
    ln10 = np.log(10)
    for k in sorted(set(copies.values())):
        sel = np.array([copies[s] == k for s in m.sources])
        v = m.logq[sel]
        row = {"n": int(sel.sum()), "median_log10_q": float(np.median(v) / ln10),
               "share_nonzero": float(np.isfinite(v).mean()), "greedy_match": float(mg.greedy_match[sel].mean())}
        summary["scoring"][f"members k={k}"] = row
        t.add_row(f"members, {k} copies", str(row["n"]), f"{row['median_log10_q']:.1f}", f"{row['share_nonzero']:.2f}",
                  f"{row['greedy_match']:.2f}")
    row = {"n": len(c), "median_log10_q": float(np.median(c.logq) / ln10), "share_nonzero": float(np.isfinite(c.logq).mean()),
           "greedy_match": float(load_run_scores(store, run=runs["controls"].run_id, policy="greedy").greedy_match.mean())}
    summary["scoring"]["controls"] = row
    t.add_row("held-out controls", str(row["n"]), f"{row['median_log10_q']:.1f}", f"{row['share_nonzero']:.2f}",
              f"{row['greedy_match']:.2f}")
    con.print(t)

    sections = {}
    con.rule("[bold]Calibrated claims[/] ([EM] §3-§6)")
    from ..claims.demo import run_demo_section as claims_section

    dm = load_run_scores(store, run=runs["document-member"].run_id, policy=CLAIM_POLICY)
    dc = load_run_scores(store, run=runs["document-control"].run_id, policy=CLAIM_POLICY)
    mf = load_run_scores(store, run=runs["members"].run_id, policy=CLAIM_POLICY)
    cf = load_run_scores(store, run=runs["controls"].run_id, policy=CLAIM_POLICY)
    census_inputs = {
        "document": {"log_scores": dm.logq, "starts": dm.suffix_spans[:, 0], "ends": dm.suffix_spans[:, 1],
                     "text": docs["document-member"], "name": "document-member (planted 4x)"},
        "control": {"log_scores": dc.logq, "starts": dc.suffix_spans[:, 0], "ends": dc.suffix_spans[:, 1],
                    "text": docs["document-control"], "name": "document-control (held out)"},
    }
    con.print(f"policy for the claims: {CLAIM_POLICY} (untruncated softmax)")
    sections["claims"] = claims_section(member_logq=mf.logq, control_logq=cf.logq, census_inputs=census_inputs,
                                        out_dir=out / "claims", console=con, alpha=alpha, procedure=mf.procedure,
                                        member_ids=list(mf.sources), control_ids=list(cf.sources))

    con.rule("[bold]Privacy bounds[/] ([MX] §4-§5)")
    from .privacy_demo import privacy_section

    spec = data["spec"]
    gen = MarkovZipf(n_words=spec["n_words"], s=spec["zipf_s"], seed=spec["corpus_seed"])
    words = max(1, round(SUFFIX * len(members[0]["text"].split()) / max(1, len(model.tokenizer.encode(members[0]["text"])))))
    h_inf = gen.min_entropy_bits(words)
    # one row per duplication level: a passage planted k times is covered only by the k-fold group
    # curve ([MX] Cor. 4.3), so its verdict differs from a single copy's
    canaries = [
        {"name": f"planted passage suffix (~{words} words), {k} cop{'y' if k == 1 else 'ies'}",
         "min_entropy_bits": h_inf, "m": 1, "tau": 0.1, "copies": int(k)}
        for k in sorted(set(copies.values()))
    ] + [
        {"name": "3-word secret from the same generator", "min_entropy_bits": gen.min_entropy_bits(3), "m": 1,
         "tau": 0.1},
        {"name": "8-bit secret (256 equally likely values)", "min_entropy_bits": 8.0, "m": 1, "tau": 0.1},
    ]
    sections["privacy"] = privacy_section(canaries=canaries, console=con)

    try:
        from ..audits.demo import run_demo_section as audits_section
    except ImportError:
        audits_section = None
    if audits_section is not None:
        con.rule("[bold]Membership-inference audits[/] ([MX] §8.2)")
        strong = [r for r in members if r["copies"] == max(copies.values())]
        sections["audits"] = audits_section(model=model, members=strong, nonmembers=controls,
                                            out_dir=out / "audits", console=con)
    summary.update({"store": str(store), "runs": {k: v.to_dict() for k, v in runs.items()}, "sections": sections})
    if as_json:
        print_json(summary)
