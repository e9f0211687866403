"""``memclaim census``: a single-document census against a matched control document ([EM] §5,
App. E). Thin: cut sliding windows of every document and control, score them into one store
(labels ``document`` and ``control``), then :func:`memclaim.report.census.run_census`
(decontamination, tau_doc, coverage, heatmap, budget views, report).

Every option is checked and every document is read and cut into windows before the model is
loaded, so bad input (a document shorter than one window, a span outside the control, a
quotation that is not in the control) fails at once with exit status 2 and leaves nothing
behind. Re-running the same command reuses the stored scores (no model work).

Exclusions (``--exclude-spans FILE``) remove *verified* quotations of earlier text from the
control before tau_doc is set ([EM] §5, E.1); the in-training document is never culled. One
entry per line (blank lines and lines starting with ``#`` are ignored):

    text: QUOTED TEXT        every occurrence of this exact text in every control
    START END                characters [START, END) of the control (one control only)
    CONTROL START END        characters [START, END) of the control file named CONTROL
"""
from __future__ import annotations

from pathlib import Path

import click

from ..errors import InputError
from .common import (backend_options, build_prompt_rule, check_out_dir, make_backend, model_options,
                     near_verbatim_options, near_verbatim_settings, print_json, procedure_options, resolve_run_inputs,
                     run_options, set_threads, window_lengths)
from .progress import progress_bar

EXAMPLES = """
Examples (run from a checkout of the repository):

\b
  # Genesis 1-3 (KJV) against newly written prose in the same style, on SmolLM2; stride =
  # suffix length, so the suffixes tile the text. Full softmax: under top-k:40 every window
  # of the new prose (invented names) scores 0 for this small model, leaving no threshold
  memclaim census smollm2 --document tests/data/genesis_1_3.txt \\
      --control tests/data/new_genesis_style.txt --prefix-tokens 32 --suffix-tokens 32 \\
      --stride 32 --policy full --out reports/genesis

\b
  # exclude a quotation a person verified in the control (here one phrase, for illustration)
  # and flag control windows found near-verbatim in a reference text; JSON summary
  printf 'text: and the grass was burned like stubble\\n' > spans.txt
  memclaim census smollm2 --document tests/data/genesis_1_3.txt \\
      --control tests/data/new_genesis_style.txt --prefix-tokens 32 --suffix-tokens 32 \\
      --stride 32 --policy full --exclude-spans spans.txt \\
      --reference-corpus tests/data/genesis_1_3.txt --out reports/genesis-dense --json

\b
  # several document pairs read at the most conservative (global) threshold ([EM] §7);
  # --pair DOC CTRL is repeatable (equivalently: --document A --control A2 --document B ...)
  memclaim census smollm2 --pair tests/data/genesis_1_3.txt tests/data/new_genesis_style.txt \\
      --pair tests/data/new_genesis_style.txt tests/data/genesis_1_3.txt \\
      --prefix-tokens 32 --suffix-tokens 32 --stride 64 --policy full --global --out reports/global
"""


# ------------------------------------------------------------------------------ exclusions
def parse_exclude_spans(path, controls: list[tuple[str, str, str]]) -> list[tuple[tuple[int, int], ...]]:
    """Read an exclusion file (format in the module doc) into one tuple of [start, end) spans per
    control. ``controls`` holds (name as given, file name, text) per pair; a control named by
    either form. Errors name the line and say the fix."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"--exclude-spans file {str(p)!r} does not exist", hint="one span or 'text: ...' per line")
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise InputError(f"--exclude-spans file {str(p)!r} is not valid UTF-8 (byte offset {exc.start})") from None
    spans: list[list[tuple[int, int]]] = [[] for _ in controls]
    distinct = {str(Path(given).resolve()) for given, _, _ in controls}

    def where(n):
        return f"{str(p)!r} line {n}"

    def add(k, a, b, n):
        text = controls[k][2]
        if not 0 <= a < b <= len(text):
            raise InputError(f"{where(n)}: span [{a}, {b}) is not inside control {controls[k][1]!r} "
                             f"({len(text)} characters)", hint="spans are [START, END) character offsets, START < END")
        spans[k].append((a, b))

    for n, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.lower().startswith("text:"):
            quote = raw.split(":", 1)[1].strip()
            if not quote:
                raise InputError(f"{where(n)}: empty quotation", hint="write 'text: ' followed by the quoted text")
            found = 0
            for k, (_, _, text) in enumerate(controls):
                i = text.find(quote)
                while i >= 0:
                    spans[k].append((i, i + len(quote)))
                    found += 1
                    i = text.find(quote, i + 1)
            if not found:
                raise InputError(f"{where(n)}: the quotation {quote[:80]!r} occurs in no control document",
                                 hint="copy the text exactly as it appears in the control (one line), or give "
                                      "its character offsets")
            continue
        parts = line.rsplit(maxsplit=2)
        try:
            a, b = int(parts[-2]), int(parts[-1])
        except (ValueError, IndexError):
            raise InputError(f"{where(n)}: cannot read {line[:80]!r}",
                             hint="use 'START END', 'CONTROL START END' or 'text: QUOTED TEXT'") from None
        if len(parts) == 2:
            if len(distinct) != 1:
                raise InputError(f"{where(n)}: span {a} {b} does not say which of the {len(distinct)} controls it is in",
                                 hint="write 'CONTROL START END' with the control's file name")
            for k in range(len(controls)):
                add(k, a, b, n)
            continue
        name = parts[0]
        ks = [k for k, (given, base, _) in enumerate(controls) if name in (given, base)]
        if not ks:
            raise InputError(f"{where(n)}: {name!r} is not one of the controls",
                             hint="controls: " + ", ".join(sorted({c[1] for c in controls})))
        for k in ks:
            add(k, a, b, n)
    return [tuple(s) for s in spans]


# ------------------------------------------------------------------------------ the command
@click.command("census", epilog=EXAMPLES, context_settings={"help_option_names": ["-h", "--help"],
                                                             "max_content_width": 100})
@click.argument("model")
@click.option("--document", "documents", multiple=True, type=click.Path(dir_okay=False),
              help="The candidate document (a text file). Repeatable, paired in order with --control.")
@click.option("--control", "controls", multiple=True, type=click.Path(dir_okay=False),
              help="Its matched control: a document the model cannot have seen, same author/genre/style/length.")
@click.option("--pair", "pairs", multiple=True, type=(click.Path(dir_okay=False), click.Path(dir_okay=False)),
              metavar="DOC CTRL", help="A document and its control (repeatable; adds to --document/--control).")
@click.option("--stride", type=int, required=True, help="Sliding-window stride in tokens.")
@procedure_options
@model_options
@near_verbatim_options
@backend_options
@click.option("--exclude-spans", "exclude_file", type=click.Path(dir_okay=False), default=None,
              help="Verified quotations to remove from the control(s) before tau_doc is set ([EM] E.1): lines "
                   "'text: QUOTE', 'START END' or 'CONTROL START END' (character offsets, end exclusive).")
@click.option("--reference-corpus", "references", multiple=True, type=click.Path(dir_okay=False),
              help="A text file to search for near-verbatim copies of high-scoring control windows (repeatable); "
                   "flagged windows are listed for a person to confirm, never removed automatically.")
@click.option("--min-similarity", default=90.0, show_default=True, type=float,
              help="rapidfuzz partial_ratio (0-100) at which a control window is flagged.")
@click.option("--global", "use_global", is_flag=True,
              help="Read every document at the most conservative threshold over all pairs ([EM] §7).")
@click.option("--budget-delta", default=0.05, show_default=True, type=float,
              help="Budget view at confidence 1 - delta ([EM] §6, Fig. 7).")
@click.option("--budget", "realistic_budget", default=1e5, show_default=True, type=float, help="Realistic query budget n.")
@click.option("--controls-description", default=None, help="How the control was chosen and matched (goes in the report).")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Output folder: the store goes to OUT/store, the report to OUT/report.{json,md,html}.")
@run_options
def command(model, documents, controls, pairs, stride, prefix_tokens, suffix_tokens, policies, prompt_templates,
            chat_template, aggregate, text_field, prefix_field, suffix_field, id_field, input_format, dtype, sot,
            allow_pickle, trust_remote_code, threads,
            exclude_file, references, min_similarity, use_global, budget_delta, realistic_budget,
            controls_description, out_dir, batch_size, unit_size, as_json, no_progress, nv_eps=(), nv_beams=(),
            backend="local", address=None, workers=None, gpus_per_worker=0.0, threads_per_worker=1):
    """Census of each DOCUMENT against its CONTROL ([EM] §5): sliding-window scores for both,
    tau_doc = 10^ceil(log10 of the top decontaminated control score) (Eq. 31), coverage of the
    document by the suffixes of windows scoring above tau_doc (Eq. 9), the coverage curve over
    the margin, a per-character heatmap and the budget view, in OUT/report.{json,md,html}.

    The census uses the first --policy (a probability score; greedy's 0/1 score has no
    threshold to set). The census has no certified false-positive rate: see the report.
    """
    from ..fsutil import sha256_file
    from ..models import load_model
    from ..report.census import run_census
    from ..scoring.results import load_run_scores
    from ..scoring.runner import run_scoring, scoring_pairs
    from ..text.io import read_document
    from ..validate import in_open_unit, integer, query_budget

    # --------------------------------------------------------------- check everything first
    if len(documents) != len(controls):
        raise InputError(f"{len(documents)} --document but {len(controls)} --control: they pair up in order",
                         hint="give one --control per --document, or use --pair DOC CTRL")
    pair_paths = list(zip(documents, controls)) + [tuple(p) for p in pairs]
    if not pair_paths:
        raise InputError("no document to census", hint="pass --document BOOK --control BOOK (or --pair DOC CTRL)")
    passage_only = {"--text-field": text_field, "--prefix-field": prefix_field, "--suffix-field": suffix_field,
                    "--id-field": id_field, "--format": input_format}
    bad = [k for k, v in passage_only.items() if v]
    if bad:
        raise InputError(f"{', '.join(bad)} appl{'y' if len(bad) > 1 else 'ies'} to passage files, not to documents",
                         hint="a census reads each document as one plain text")
    integer("--stride", stride, minimum=1)
    prefix_tokens, suffix_tokens = window_lengths(prefix_tokens, suffix_tokens)
    if budget_delta is not None:
        in_open_unit("--budget-delta", budget_delta)
    if not 0 <= min_similarity <= 100:
        raise InputError(f"--min-similarity must lie in [0, 100], got {min_similarity!r}", hint="e.g. 90")
    if batch_size < 1:
        raise InputError(f"--batch-size must be >= 1, got {batch_size}", hint="e.g. --batch-size 16")
    query_budget("--budget", realistic_budget)
    tested = policies[0]
    if tested.is_binary:
        raise InputError(f"the census needs a probability score, but the first --policy is {tested.spec!r} "
                         "(a 0/1 score: there is no threshold to calibrate, [EM] §5)",
                         hint="put a sampling policy first, e.g. --policy top-k:40 or --policy full")
    out = check_out_dir(out_dir)
    texts = {}
    for path in dict.fromkeys([p for pair in pair_paths for p in pair] + list(references)):
        texts[path] = read_document(path)  # (text, sha256); raises on missing, empty, non-UTF-8
    for d, c in pair_paths:
        if Path(d).resolve() == Path(c).resolve() or texts[d][1] == texts[c][1]:
            raise InputError(f"the document {str(d)!r} and its control {str(c)!r} are the same text: a document "
                             "censused against itself sets tau_doc from its own scores",
                             hint="pass a matched control the model cannot have seen (same author, genre, length)")
    control_specs = [(c, Path(c).name, texts[c][0]) for _, c in pair_paths]
    exclusions = parse_exclude_spans(exclude_file, control_specs) if exclude_file else [()] * len(pair_paths)
    refs = {}
    for r in references:
        name = Path(r).name
        refs[name if name not in refs else str(r)] = texts[r][0]

    # --------------------------------------------------------------- windows, then scores
    set_threads(threads)
    m = load_model(model, dtype=dtype, sot=sot, allow_pickle=allow_pickle,
                   trust_remote_code=trust_remote_code)  # weights load only if scoring is needed
    several = len(pair_paths) > 1
    jobs = []  # (pair index, role, path, label, (windows, inputs, skipped_empty, label))
    for i, (d, c) in enumerate(pair_paths):
        for role, path in (("document", d), ("control", c)):
            label = f"{role}-{i + 1}" if several else role
            cut = resolve_run_inputs(m, document_path=path, stride=stride, prefix_tokens=prefix_tokens,
                                     suffix_tokens=suffix_tokens, label=label)
            jobs.append((i, role, path, label, cut))
    prompt_rule = build_prompt_rule(prompt_templates, chat_template, aggregate)
    for _, _, path, label, cut in jobs:  # every window fits the model, before any scoring
        scoring_pairs(m, cut[0], prompt_rule, what=str(path))
    near_verbatim = near_verbatim_settings(nv_eps, nv_beams)
    backend_obj = make_backend(m, policies, backend=backend, address=address, workers=workers,
                               gpus_per_worker=gpus_per_worker, threads_per_worker=threads_per_worker,
                               batch_size=batch_size)
    store = out / "store"
    runs = {}
    for i, role, path, label, (windows, inputs, _, _) in jobs:
        runs[(i, role)] = run_scoring(m, windows, policies=policies, prefix_tokens=prefix_tokens,
                                      suffix_tokens=suffix_tokens, prompt_rule=prompt_rule, out_dir=store,
                                      label=label, inputs=inputs, batch_size=batch_size, unit_size=unit_size,
                                      progress=progress_bar(not no_progress and not as_json), near_verbatim=near_verbatim,
                                      backend=backend_obj,
                                      log=None if as_json else (lambda msg: click.echo(msg, err=True)))

    # --------------------------------------------------------------- the census
    from ..claims.census import WindowScores
    from ..claims.procedure import STORED_PROCEDURE_MAY_DIFFER
    from .test import store_input_record, stored_test_procedure

    census_pairs, inputs = [], []
    for i, (d, c) in enumerate(pair_paths):
        entry = {"exclude_spans": exclusions[i]}
        for role, path in (("document", d), ("control", c)):
            rs = load_run_scores(store, run=runs[(i, role)].run_id, policy=tested.spec,
                                 near_verbatim=max(near_verbatim["epsilons"]) if near_verbatim else None)
            text = texts[path][0]
            entry[role] = WindowScores.from_arrays(rs.logq, rs.suffix_spans[:, 0], rs.suffix_spans[:, 1],
                                                   doc_length=len(text), name=Path(path).name)
            entry[f"{role}_text"] = text
            entry[f"procedure_{role}"] = stored_test_procedure(rs)
            rec = store_input_record(rs, role if not several else f"{role} of pair {i + 1}")
            rec.update({"path": str(path), "sha256": texts[path][1], "chars": len(text)})
            inputs.append(rec)
        census_pairs.append(entry)
    if exclude_file:
        inputs.append({"role": "control exclusions", "path": str(exclude_file),
                       "sha256": sha256_file(exclude_file)})
    for r in references:
        inputs.append({"role": "reference corpus", "path": str(r), "sha256": texts[r][1]})
    summary = run_census(census_pairs, out_dir=out, use_global_threshold=use_global, references=refs or None,
                         budget_delta=budget_delta, realistic_budget=realistic_budget, inputs=inputs,
                         controls_description=controls_description, procedure_ignore=STORED_PROCEDURE_MAY_DIFFER,
                         min_similarity=min_similarity, command="census")
    import json

    report = json.loads(Path(summary["report"]["json"]).read_text(encoding="utf-8"))
    res = report["results"]
    summary.update({
        "policy": tested.spec, "store": str(store), "global": bool(use_global),
        "per_pair_log10_tau": res["per_pair_log10_tau"], "global_log10_tau": res["global_log10_tau"],
        "pairs": [{"document": str(d), "control": str(c), "n_windows": r["n_windows"],
                   "n_control_windows": r["threshold"]["n_control_windows"],
                   "n_excluded": r["threshold"]["n_excluded"],
                   "max_control_log10": r["threshold"]["max_control_log10"], "log10_tau": r["log10_tau"],
                   "coverage": r["coverage"], "n_windows_above": r["n_windows_above"], "max_margin": r["max_margin"],
                   "coverage_at_margins": r["coverage_at_margins"]}
                  for (d, c), r in zip(pair_paths, res["census"])],
        "scoring": {f"{role}-{i + 1}" if several else role: {
            k: v for k, v in r.to_dict().items()
            if k in ("run_id", "n_windows", "units_scored", "units_reused", "model_loaded", "seconds")}
            for (i, role), r in runs.items()},
    })
    if as_json:
        print_json(summary)
        return
    for line in summary["headlines"]:
        click.echo(line)
    if summary["n_flagged"]:
        click.echo(f"{summary['n_flagged']} control window(s) flagged as near-verbatim copies: confirm them in the "
                   "report before excluding them with --exclude-spans")
    click.echo(f"report: {summary['report']['html']}")
    if not any(r.units_scored for r in runs.values()):
        click.echo("nothing was scored: every unit was already in the store (no model work done)")
