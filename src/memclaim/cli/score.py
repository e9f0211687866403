"""`memclaim score`: texts + model + procedure -> durable score store."""

from __future__ import annotations

import click
from rich.console import Console
from rich.markup import escape

from .. import api
from .common import (
    PASSAGE_INPUTS,
    backend_options,
    model_options,
    near_verbatim_options,
    placement_kwargs,
    print_json,
    procedure_options,
    run_options,
    served_bounds_option,
    served_kwargs,
    stats_option,
    stderr_log,
)
from .options import Command
from .progress import progress_bar

EXAMPLES = """
Examples (run from a checkout of the repository):

\b
  # KJV verses on the built-in tiny GPT: 16-token prefix and suffix, two policies, one pass
  memclaim score toy --input tests/data/kjv_verses.jsonl --prefix-tokens 16 --suffix-tokens 16 \\
      --policy top-k:40 --policy greedy --out runs/toy

\b
  # SmolLM2 under a combined policy (HuggingFace's order), JSON summary
  memclaim score smollm2 --input tests/data/new_verses_b.jsonl --prefix-tokens 16 \\
      --suffix-tokens 16 --policy top-k:40,temperature:0.7 --out runs/smol --json

\b
  # a quick look at a big input: only the first 20 verses (the run is labelled [:20])
  memclaim score toy --input tests/data/kjv_verses.jsonl --prefix-tokens 16 --suffix-tokens 16 \\
      --limit 20 --out runs/quick

\b
  # every sliding window of a document, stride 10 tokens
  memclaim score toy --document tests/data/genesis_1_3.txt --stride 10 --prefix-tokens 32 \\
      --suffix-tokens 32 --policy top-k:40 --out runs/book

\b
  # a prompt template in the model's chat template: the target is the suffix as the answer
  memclaim score smollm2 --input tests/data/new_verses_b.jsonl --prefix-tokens 16 \\
      --suffix-tokens 16 --prompt-template 'Repeat after me: {suffix}\\n' --chat-template \\
      --policy greedy --out runs/parrot

\b
  # records with an explicit prefix and suffix (a target can start a sentence)
  printf '{"id": "g1", "context": "In the beginning", "verse": " God created the heaven."}\\n' > pairs.jsonl
  memclaim score toy --input pairs.jsonl --prefix-field context --suffix-field verse \\
      --policy greedy --out runs/fields

\b
  # one Ray worker per GPU (needs GPUs; docs/distributed.md)
  memclaim score smollm2 --dtype bfloat16 --input tests/data/kjv_verses.jsonl --out runs/smol \\
      --backend ray --gpus-per-worker 1
"""


@click.command("score", cls=Command, epilog=EXAMPLES, context_settings={"max_content_width": 100})
@click.argument("model")
@click.option(
    "--input",
    "input_path",
    type=click.Path(),
    help=f"Passages: {PASSAGE_INPUTS}; one text per record.",
)
@click.option(
    "--document",
    "document_path",
    type=click.Path(dir_okay=False),
    help="One long document for sliding windows.",
)
@click.option(
    "--stride", type=int, default=None, help="Sliding-window stride in tokens (with --document)."
)
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False),
    help="Store folder (created; re-running resumes).",
)
@procedure_options
@model_options
@near_verbatim_options
@backend_options
@served_bounds_option
@run_options
@stats_option(None)
@click.option(
    "--estimate",
    default=None,
    metavar="sample:N",
    help="With --backend openai, for a server without prompt log-probs: no scores; N "
    "generations per window under the --policy, the verbatim (and --near-verbatim) match "
    "rate with its Clopper-Pearson interval ([EM] App. F.1), written to OUT/estimate.json. "
    "An estimate, not a score: memclaim test refuses it.",
)
@click.option(
    "--seed",
    type=int,
    default=0,
    show_default=True,
    help="With --estimate: the first request's seed (then +1 per request), where the server "
    "honours seeds.",
)
def command(
    model,
    input_path,
    document_path,
    stride,
    out_dir,
    prefix_tokens,
    suffix_tokens,
    policies,
    prompt_templates,
    chat_template,
    aggregate,
    text_field,
    prefix_field,
    suffix_field,
    id_field,
    input_format,
    dtype,
    sot,
    allow_pickle,
    trust_remote_code,
    threads,
    nv_eps,
    nv_beams,
    batch_size,
    unit_size,
    backend,
    address,
    workers,
    gpus_per_worker,
    threads_per_worker,
    as_json,
    no_progress,
    limit,
    stats,
    estimate,
    seed,
):
    """Score texts under an extraction procedure ([EM] Def. B.2) into a durable store.

    MODEL is a local HF folder (safetensors), a .gguf file, a named model (smollm2,
    gemma3-270m) or `toy` (the built-in tiny GPT). Each window's prefix is the prompt (or the
    rendered --prompt-template), the suffix is the target; the store gets log q under every
    --policy, the greedy-match flag and per-token statistics from one teacher-forced pass.
    """
    bar = progress_bar(
        not no_progress and not as_json
    )  # before the API loads torch: it shows that too
    res = api.score(
        model,
        input_path,
        document=document_path,
        stride=stride,
        prefix_tokens=prefix_tokens,
        suffix_tokens=suffix_tokens,
        policies=policies,
        prompt_templates=prompt_templates,
        chat_template=chat_template,
        aggregate=aggregate,
        text_field=text_field,
        prefix_field=prefix_field,
        suffix_field=suffix_field,
        id_field=id_field,
        input_format=input_format,
        limit=limit,
        near_verbatim=nv_eps,
        beams=nv_beams,
        out=out_dir,
        batch_size=batch_size,
        unit_size=unit_size,
        backend=backend,
        address=address,
        workers=workers,
        gpus_per_worker=gpus_per_worker,
        threads_per_worker=threads_per_worker,
        dtype=dtype,
        sot=sot,
        **placement_kwargs(),
        **served_kwargs(),
        allow_pickle=allow_pickle,
        trust_remote_code=trust_remote_code,
        threads=threads,
        stats=stats,
        estimate=estimate,
        seed=seed,
        progress=bar,
        log=stderr_log(not as_json),
    )
    if as_json:
        print_json(res.to_dict())
        return
    c = Console(highlight=False)
    if estimate is not None:
        _print_estimate(c, res)
        return
    summary = res.summary
    c.print(
        f"[bold]memclaim score[/] -> {escape(summary.store)}  (run {summary.run_id}, procedure "
        f"{summary.procedure_key[:12]})"
    )
    c.print(
        f"  windows {summary.n_windows}  units {summary.n_units} (scored {summary.units_scored}, "
        f"reused {summary.units_reused})  skipped: {summary.skipped_short} too short, {summary.skipped_empty} empty"
    )
    if summary.units_scored:
        c.print(f"  {summary.windows_per_second:.1f} windows/s")
        bs = summary.backend_stats
        if summary.backend == "openai" and bs:
            c.print(
                f"  served by {escape(str(bs['server']))} {escape(str(bs['version'] or ''))} at "
                f"{escape(str(bs['url']))} (model {escape(str(bs['model_id']))}, top-{bs['top_logprobs']} "
                f"log-probs per position): {bs['requests']} requests, {bs['retries']} retried"
            )
            for spec, cls in bs["exactness"].items():
                c.print(f"    {escape(spec)}: {escape(cls)}")
        else:
            c.print(
                f"  device {escape(summary.device)}, body {summary.dtype} (unembedding float32+)"
            )
        drift = summary.numerics_drift
        if drift and drift.get("measured"):
            worst = max((v["max_abs_per_token"] or 0.0) for v in drift["per_policy"].values())
            c.print(
                f"  {drift['dtype']} drift from float32 on {drift['windows']} windows: at most {worst:.3g} nats per "
                f"target token; {drift['greedy_flags_differing']} greedy flag(s) differ"
            )
        elif drift:
            c.print(
                f"  {drift['dtype']} drift from float32 not measured: {escape(drift['reason'])}"
            )
        if summary.backend == "ray" and bs:
            c.print(
                f"  ray: {bs['workers']} worker(s) at {escape(str(bs['address']))}, {bs['windows_per_second']:.1f} windows/s "
                f"overall ({bs['steady_windows_per_second']:.1f} after start-up {bs['startup_seconds']:.1f} s), "
                f"unit files written by the {bs['write_mode']}; restarts {bs['restarts']}"
            )
            for w in bs["per_worker"]:
                c.print(
                    f"    worker {w['worker']} ({escape(str(w['node']))}, {escape(str(w['device']))}, "
                    f"{w['threads']} thread(s)): "
                    f"{w['units']} units, {w['windows']} windows, {w['windows_per_second']:.1f} windows/s"
                )
    else:
        c.print("  nothing to score: every unit was already in the store (no model work done)")
    if summary.near_ties:
        c.print(
            f"  [yellow]{summary.near_ties} window(s) have a top-2 logit margin below 1e-5 at some suffix "
            "position: their greedy flag may differ from generate() ([EM] App. A.2); see column near_tie[/]"
        )
    c.print(f"  results: {summary.store}/runs/{summary.run_id}/scores.parquet", markup=False)
    if res.limited:
        c.print(f"  note: {res.limited}", markup=False)


def _print_estimate(c, res) -> None:
    run = res.run
    x = run.extracted
    c.print(
        f"[bold]memclaim score --estimate[/] -> {escape(str(res.path))}  ({len(run.windows)} "
        f"windows x {run.n} generations under {escape(run.policy)}, {run.requests} requests to "
        f"{escape(str(run.server['model_id']))})"
    )
    c.print(
        f"  windows reproduced verbatim at least once: {sum(w.verbatim > 0 for w in run.windows)}"
        f"/{len(run.windows)} = {x.estimate:.3f} [{x.lower:.3f}, {x.upper:.3f}] "
        f"({x.confidence:.0%} Clopper-Pearson)"
    )
    for w in run.windows[:10]:
        iv = w.interval
        near = "".join(f", within {e} edits {k}/{w.n}" for e, k in zip(w.epsilons, w.near))
        c.print(
            f"  {escape(w.window_id)}: verbatim {w.verbatim}/{w.n}, rate in "
            f"[{iv.lower:.4f}, {iv.upper:.4f}]{near}"
        )
    if len(run.windows) > 10:
        c.print(f"  ... {len(run.windows) - 10} more in {escape(str(res.path))}")
    c.print(
        "  [yellow]note:[/] a sampling estimate is an interval for each window's extraction "
        "probability, not its score log q: memclaim test (the conformal test) refuses it"
    )
