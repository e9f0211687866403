"""``memclaim population``: score members and controls into one store, run the conformal test,
write the report ([EM] §3, §4). Thin: cut windows, two ``run_scoring`` calls (labels ``members``
and ``controls``), then :func:`memclaim.cli.test.run_store_test` on the two runs.

Everything the model computes goes to ``OUT/store`` (resumable: re-running the same command
does no model work), the report to ``OUT/report.{json,md,html}``. Every option is checked, and
both inputs are read and cut into windows, before the model is loaded, so bad input fails at
once with exit status 2 and leaves nothing behind.
"""
from __future__ import annotations

from pathlib import Path

import click

from ..errors import InputError
from .common import (backend_options, build_prompt_rule, check_out_dir, claim_options, make_backend, model_options,
                     near_verbatim_options, near_verbatim_settings, print_json, procedure_options,
                     resolve_run_inputs, run_options, set_threads, window_lengths)
from .progress import progress_bar

EXAMPLES = """
Examples (run from a checkout of the repository):

\b
  # KJV verses (members) against newly written verse-like sentences (controls) on SmolLM2;
  # 16-token prefix and suffix, top-k 40 (the full softmax scored in the same pass), 1% FPR
  memclaim population smollm2 --members tests/data/kjv_verses.jsonl \\
      --controls tests/data/new_verses.jsonl --prefix-tokens 16 --suffix-tokens 16 \\
      --policy top-k:40 --policy full --alpha 0.01 --out reports/verses

\b
  # the test uses the first --policy; test the other one from the store, without the model
  memclaim test --candidates reports/verses/store --run members \\
      --controls reports/verses/store --controls-run controls --policy full \\
      --alpha 0.05 --out reports/verses-full

\b
  # FDR, the budget view and a JSON summary; the same command again reuses the stored scores
  memclaim population smollm2 --members tests/data/kjv_verses.jsonl \\
      --controls tests/data/new_verses.jsonl --prefix-tokens 16 --suffix-tokens 16 \\
      --policy top-k:40 --policy full --alpha 0.01 --fdr 0.1 --budget-delta 0.05 \\
      --out reports/verses --json

\b
  # any local HF folder (safetensors); members and controls as CSV with 'text' and 'id' columns
  memclaim population ./my-model --members members.csv --controls controls.csv \\
      --alpha 0.001 --exclude-controls verified_members.txt --out reports/mine
"""

MEMBERS_LABEL = "members"
CONTROLS_LABEL = "controls"


@click.command("population", epilog=EXAMPLES, context_settings={"help_option_names": ["-h", "--help"],
                                                                 "max_content_width": 100})
@click.argument("model")
@click.option("--members", "members_path", required=True, type=click.Path(dir_okay=False),
              help="Candidate passages (JSONL/TXT/CSV/Parquet, one text per record, optional id).")
@click.option("--controls", "controls_path", required=True, type=click.Path(dir_okay=False),
              help="Matched non-member controls, same format (same source, length and style as the members).")
@procedure_options
@model_options
@near_verbatim_options
@backend_options
@click.option("--alpha", default="0.001", show_default=True, help="Target FPR in (0, 1); read exactly ('0.001', '0.1%', '1/1000').")
@claim_options
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Output folder: the store goes to OUT/store, the report to OUT/report.{json,md,html}.")
@run_options
def command(model, members_path, controls_path, prefix_tokens, suffix_tokens, policies, prompt_templates,
            chat_template, aggregate, text_field, prefix_field, suffix_field, id_field, input_format, dtype, sot,
            allow_pickle, trust_remote_code, threads, alpha,
            exclude_file, exclude_ids, fdr, fwer, seed, budget_delta, realistic_budget, confidence,
            controls_description, out_dir, batch_size, unit_size, as_json, no_progress, nv_eps=(), nv_beams=(),
            backend="local", address=None, workers=None, gpus_per_worker=0.0, threads_per_worker=1):
    """Score MEMBERS and CONTROLS with MODEL under one extraction procedure ([EM] Def. B.2), then
    run the conformal population test ([EM] §3, §4) and write the report.

    MODEL is as for `memclaim score` (local HF folder, .gguf, smollm2, gemma3-270m, toy). The
    test uses the first --policy; every --policy is stored, so `memclaim test` on OUT/store
    tests the others without the model. Re-running the same command reuses the stored scores.
    """
    from ..fsutil import sha256_bytes
    from ..models import load_model
    from ..scoring.results import load_run_scores
    from ..scoring.runner import run_scoring, scoring_pairs
    from .test import read_id_list, run_store_test, validate_test_levels

    validate_test_levels(alpha=alpha, fdr=fdr, fwer=fwer, budget_delta=budget_delta, confidence=confidence,
                         realistic_budget=realistic_budget)
    if batch_size < 1:
        raise InputError(f"--batch-size must be >= 1, got {batch_size}", hint="e.g. --batch-size 16")
    out = check_out_dir(out_dir)
    if Path(members_path).resolve() == Path(controls_path).resolve():
        raise InputError(f"--members and --controls are the same file {str(members_path)!r}: a set tested against "
                         "itself certifies nothing", hint="pass matched non-member texts with --controls")
    excl = list(exclude_ids)
    extra_inputs = []
    if exclude_file:
        excl += list(read_id_list(exclude_file))
        extra_inputs.append({"role": "excluded control ids", "path": str(exclude_file),
                             "sha256": sha256_bytes(Path(exclude_file).read_bytes())})
    prefix_tokens, suffix_tokens = window_lengths(prefix_tokens, suffix_tokens, prefix_field, suffix_field)
    set_threads(threads)
    m = load_model(model, dtype=dtype, sot=sot, allow_pickle=allow_pickle,
                   trust_remote_code=trust_remote_code)  # weights load only if scoring is needed
    cut = {}
    for label, path in ((MEMBERS_LABEL, members_path), (CONTROLS_LABEL, controls_path)):
        try:
            cut[label] = resolve_run_inputs(m, input_path=path, prefix_tokens=prefix_tokens,
                                            suffix_tokens=suffix_tokens, text_field=text_field, id_field=id_field,
                                            input_format=input_format, label=label, prefix_field=prefix_field,
                                            suffix_field=suffix_field)
        except InputError as exc:
            raise InputError(f"--{label}: {exc}") from None
    if cut[MEMBERS_LABEL][1]["sha256"] == cut[CONTROLS_LABEL][1]["sha256"]:
        raise InputError(f"--members {str(members_path)!r} and --controls {str(controls_path)!r} have identical "
                         "contents: a set tested against itself certifies nothing",
                         hint="pass matched non-member texts with --controls")
    prompt_rule = build_prompt_rule(prompt_templates, chat_template, aggregate)
    for label in (MEMBERS_LABEL, CONTROLS_LABEL):  # every window fits the model, before any scoring
        scoring_pairs(m, cut[label][0], prompt_rule, what=f"--{label}")
    near_verbatim = near_verbatim_settings(nv_eps, nv_beams)
    backend_obj = make_backend(m, policies, backend=backend, address=address, workers=workers,
                               gpus_per_worker=gpus_per_worker, threads_per_worker=threads_per_worker,
                               batch_size=batch_size)
    store = out / "store"
    runs = {}
    for label in (MEMBERS_LABEL, CONTROLS_LABEL):
        windows, inputs, skipped_empty, _ = cut[label]
        runs[label] = run_scoring(m, windows, policies=policies, prefix_tokens=prefix_tokens,
                                  suffix_tokens=suffix_tokens, prompt_rule=prompt_rule, out_dir=store, label=label,
                                  inputs=inputs, batch_size=batch_size, unit_size=unit_size,
                                  progress=progress_bar(not no_progress and not as_json), skipped_empty=skipped_empty,
                                  near_verbatim=near_verbatim, backend=backend_obj,
                                  log=None if as_json else (lambda msg: click.echo(msg, err=True)))
    tested = policies[0].spec
    # with --near-verbatim, the test runs on the lower bound at the largest epsilon ([EM] §6)
    nv_eps_tested = max(near_verbatim["epsilons"]) if near_verbatim else None
    cand = load_run_scores(store, run=runs[MEMBERS_LABEL].run_id, policy=tested, near_verbatim=nv_eps_tested)
    ctrl = load_run_scores(store, run=runs[CONTROLS_LABEL].run_id, policy=tested, near_verbatim=nv_eps_tested)
    summary = run_store_test(
        candidates=cand, controls=ctrl, alpha=alpha, out_dir=out, exclude_control_ids=excl, confidence=confidence,
        fdr_delta=fdr, fwer_delta=fwer, seed=seed, budget_delta=budget_delta, realistic_budget=realistic_budget,
        controls_description=controls_description, extra_inputs=extra_inputs, command="population",
        title=f"Population test: {Path(members_path).name} against {Path(controls_path).name}", quiet=as_json)
    summary["policy"] = tested
    summary["store"] = str(store)
    summary["scoring"] = {label: {k: v for k, v in r.to_dict().items()
                                  if k in ("run_id", "n_windows", "units_scored", "units_reused", "skipped_short",
                                           "skipped_empty", "model_loaded", "near_ties", "seconds")}
                          for label, r in runs.items()}
    if as_json:
        print_json(summary)
        return
    work = [f"{label}: {r.n_windows} windows ({r.units_scored} units scored, {r.units_reused} reused"
            + (f", {r.skipped_short} too short" if r.skipped_short else "") + ")" for label, r in runs.items()]
    click.echo(f"store: {store}  " + "; ".join(work))
    if not any(r.units_scored for r in runs.values()):
        click.echo("nothing was scored: every unit was already in the store (no model work done)")
