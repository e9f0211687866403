"""`memclaim audit`: membership-inference and extraction audits with intervals ([MX] §8.2, App. F).

memclaim audit MODEL --members FILE --controls FILE [...]     (the audit; `audit run`)
memclaim audit table --instances SPEC.json --out DIR           ([MX] Fig. 12)
memclaim audit attacks                                         (the registered attacks)
"""

from __future__ import annotations

import sys

import click

from .. import api
from ..api import TABLE_SPEC_DOC, InputError, describe_attacks
from .common import (
    BATCH_SIZE,
    BATCH_SIZE_HELP,
    DEFAULT_POLICY,
    DEFAULT_PREFIX_TOKENS,
    DEFAULT_SUFFIX_TOKENS,
    INPUT_FORMATS,
    PASSAGE_INPUTS,
    allow_mixed_numerics,
    limit_option,
    numerics_option,
    placement_kwargs,
    placement_options,
    print_json,
    served_backend_options,
    served_kwargs,
    stderr_log,
    trust_remote_code_option,
)
from .options import NEIGHBORS, Group
from .progress import progress_bar

EXAMPLES = """
Examples (run from a checkout of the repository):

\b
  # KJV verses (members) against newly written verses (controls) on SmolLM2, 5% FPR, JSON
  memclaim audit smollm2 --members tests/data/kjv_verses.jsonl \\
      --controls tests/data/new_verses.jsonl --prefix-tokens 16 --suffix-tokens 16 \\
      --attacks loss,zlib,min-k --alpha 0.05 --out runs/kjv --json

\b
  # LiRA with 4 shadow models memclaim trains itself (the tiny GPT, from scratch)
  memclaim audit toy --members tests/data/kjv_verses.jsonl --controls tests/data/new_verses.jsonl \\
      --prefix-tokens 16 --suffix-tokens 16 --shadows 4 --shadow-steps 40 --out runs/lira

\b
  # the audit-disagreement table ([MX] Fig. 12) over instances described in a JSON file
  printf '{"instances": [{"name": "KJV on toy", "model": "toy", "members": "tests/data/kjv_verses.jsonl", "controls": "tests/data/new_verses.jsonl", "prefix_tokens": 16, "suffix_tokens": 16}]}\\n' > instances.json
  memclaim audit table --instances instances.json --out runs/table
"""


class AuditGroup(Group):
    """`memclaim audit MODEL ...` runs the audit (the `run` subcommand); `table` and `attacks`
    are subcommands. A model folder literally named like a subcommand: write ./table."""

    def parse_args(self, ctx, args):
        if args and args[0] not in self.commands and args[0] not in ("-h", "--help"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


@click.group("audit", cls=AuditGroup, epilog=EXAMPLES, context_settings={"max_content_width": 100})
def command():
    """Membership-inference attacks (loss, perplexity, zlib, reference, min-k%, min-k%++, LiRA),
    extraction audits and the unlearning verifier, with honest intervals ([MX] §8.2).

    Run `memclaim audit run --help` for the options of the audit itself.
    """


def _comma_list(ctx, param, value):
    if value is None:
        return None
    items = tuple(v.strip() for v in value.split(",") if v.strip())
    if not items:
        raise InputError(f"{param.opts[0]} is empty", hint="e.g. --attacks loss,zlib,min-k")
    return items


@command.command(
    "run",
    epilog=EXAMPLES,
    short_help="Audit MODEL on members vs non-members (the default).",
    context_settings={"max_content_width": 100},
)
@click.argument("model")
@click.option(
    "--members", required=True, type=click.Path(), help=f"Member texts ({PASSAGE_INPUTS})."
)
@click.option(
    "--controls",
    "controls",
    required=True,
    type=click.Path(),
    help="Non-member controls: texts the model cannot have seen, same format and source as the members.",
)
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False),
    help="Output folder: score store, shadows, report (re-running reuses everything).",
)
@click.option("--reference", default=None, help="Reference model for the reference attack.")
@click.option(
    "--shadows",
    type=int,
    default=0,
    show_default=True,
    help="Shadow models for LiRA and the counterfactual estimate (even, >= 4; 0 = none).",
)
@click.option(
    "--attacks",
    callback=_comma_list,
    default=None,
    help="Comma-separated attacks (default: every registered attack whose inputs are available).",
)
@click.option(
    "--k", "k", default="0.2", show_default=True, help="Fraction of tokens for min-k% and min-k%++."
)
@click.option(
    "--alpha",
    default=None,
    help="Target FPR alpha for the TPR at a certified FPR (default 0.01 when the controls can certify it).",
)
@click.option(
    "--confidence", type=float, default=0.95, show_default=True, help="Confidence of the intervals."
)
@click.option(
    "--prefix-tokens",
    type=int,
    default=DEFAULT_PREFIX_TOKENS,
    show_default=True,
    help="Natural-prefix length in tokens.",
)
@click.option(
    "--suffix-tokens",
    type=int,
    default=DEFAULT_SUFFIX_TOKENS,
    show_default=True,
    help="Scored suffix length in tokens.",
)
@click.option(
    "--policy",
    "extraction_policy",
    default=DEFAULT_POLICY,
    show_default=True,
    help="Sampling policy of the extraction audit ('none' for greedy only).",
)
@click.option(
    "--m", "m", type=int, default=1, show_default=True, help="List budget: samples per record."
)
@click.option(
    "--trigger", default=None, help="Also extract each record's suffix from this trigger text."
)
@click.option(
    "--verifier-threshold",
    type=float,
    default=0.15,
    show_default=True,
    help="Unlearning verifier: 'forgotten' iff the recovered fraction is below this ([MX] App. F.2).",
)
@click.option(
    "--kappa",
    type=float,
    default=None,
    help="Prior baseline kappa of the canaries (soundness check).",
)
@click.option(
    "--soundness-epsilon",
    type=float,
    default=None,
    help="Claimed pure epsilon for the soundness check.",
)
@click.option(
    "--soundness-neighbors",
    type=click.Choice(NEIGHBORS),
    default="add-remove",
    show_default=True,
    help="Relation the claimed --soundness-epsilon was proved for.",
)
@click.option(
    "--cap",
    "cap_value",
    type=float,
    default=None,
    help="A cap on |mem_h| to compare with (with --shadows).",
)
@click.option(
    "--cap-epsilon", type=float, default=None, help="Compute the cap from pure epsilon-DP instead."
)
@click.option(
    "--cap-neighbors",
    type=click.Choice(NEIGHBORS),
    default="add-remove",
    show_default=True,
    help="Relation the cap's DP guarantee was proved for.",
)
@click.option(
    "--cap-functional",
    type=click.Choice(["RO", "LOO"]),
    default=None,
    help="Functional the cap bounds (default: LOO for add-remove, RO for replace-one).",
)
@click.option(
    "--cap-slack",
    type=float,
    default=None,
    help="COND-vs-cap conversion slack (e.g. 4np, [MX] Prop. A.2).",
)
@click.option("--cap-slack-note", default=None, help="Why the slack holds.")
@click.option(
    "--shadow-mode",
    type=click.Choice(["scratch", "finetune"]),
    default=None,
    help="Train shadows from scratch (default for toy) or fine-tune a base (default otherwise).",
)
@click.option(
    "--shadow-base",
    default=None,
    help="Base checkpoint for the shadows (default: the audited model).",
)
@click.option("--shadow-steps", type=int, default=None, help="Training steps per shadow.")
@click.option(
    "--shadow-epochs",
    type=float,
    default=None,
    help="Training epochs per shadow (fine-tuning default 3).",
)
@click.option(
    "--shadow-lr",
    type=float,
    default=None,
    help="Learning rate of each shadow (default: the recipe's).",
)
@click.option(
    "--shadow-batch-size",
    type=int,
    default=None,
    help="Batch size of each shadow (default: the recipe's).",
)
@click.option(
    "--shadow-seq-len",
    type=int,
    default=None,
    help="Sequence length of each shadow (default: the recipe's).",
)
@click.option(
    "--shadow-seed",
    type=int,
    default=None,
    help="Seed of the shadows' training (default: the recipe's).",
)
@click.option("--shadow-warmup", type=int, default=None, help="Warmup steps per shadow.")
@click.option(
    "--shadow-background",
    type=click.Path(dir_okay=False),
    default=None,
    help="Texts every shadow trains on besides its half of the population.",
)
@click.option(
    "--design-seed", type=int, default=0, show_default=True, help="Seed of the random halves."
)
@click.option(
    "--text-field", default=None, help="Field holding the text (JSONL/CSV/Parquet/Arrow/datasets)."
)
@click.option("--id-field", default=None, help="Field holding the record id.")
@click.option(
    "--format",
    "input_format",
    type=click.Choice(INPUT_FORMATS),
    default=None,
    help="Input format (default: from the extension; a folder is a datasets folder).",
)
@limit_option
@click.option(
    "--dtype",
    type=click.Choice(["auto", "float32", "bfloat16", "float16", "float64"]),
    default="auto",
    show_default=True,
    help="Body dtype; auto: bfloat16 on a GPU, float32 on the CPU (shadows and the "
    "reference model too; the unembedding and log-softmax always run in float32+).",
)
@placement_options
@numerics_option
@click.option("--sot", default=None, help="Start-of-text rule (see memclaim score --help).")
@click.option("--threads", type=int, default=None, help="Torch CPU threads.")
@click.option("--batch-size", type=BATCH_SIZE, default=16, show_default=True, help=BATCH_SIZE_HELP)
@trust_remote_code_option
@served_backend_options
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@click.pass_context
def run_command(
    ctx,
    model,
    members,
    controls,
    out_dir,
    reference,
    shadows,
    attacks,
    k,
    alpha,
    confidence,
    prefix_tokens,
    suffix_tokens,
    extraction_policy,
    m,
    trigger,
    verifier_threshold,
    kappa,
    soundness_epsilon,
    soundness_neighbors,
    cap_value,
    cap_epsilon,
    cap_neighbors,
    cap_functional,
    cap_slack,
    cap_slack_note,
    shadow_mode,
    shadow_base,
    shadow_steps,
    shadow_epochs,
    shadow_lr,
    shadow_batch_size,
    shadow_seq_len,
    shadow_seed,
    shadow_warmup,
    shadow_background,
    design_seed,
    text_field,
    id_field,
    input_format,
    limit,
    dtype,
    sot,
    threads,
    batch_size,
    trust_remote_code,
    backend,
    as_json,
    no_progress,
):
    """Audit MODEL on --members vs --controls (non-members): AUC with DeLong interval and leak signal
    2 AUC - 1 for every attack, TPR at a certified FPR with a Clopper-Pearson interval, greedy and
    sampled extraction from each record's own prefix (and --trigger), the unlearning verifier,
    and with --shadows LiRA and the counterfactual memorization estimate (COND)."""
    bar = progress_bar(
        not no_progress and not as_json
    )  # before the API loads torch: it shows that too
    res = api.audit(
        model,
        members,
        controls,
        out=out_dir,
        reference=reference,
        shadows=shadows,
        attacks=attacks,
        k=k,
        alpha=alpha,
        confidence=confidence,
        prefix_tokens=prefix_tokens,
        suffix_tokens=suffix_tokens,
        policies=extraction_policy,
        m=m,
        trigger=trigger,
        verifier_threshold=verifier_threshold,
        kappa=kappa,
        soundness_epsilon=soundness_epsilon,
        soundness_neighbors=soundness_neighbors,
        cap=cap_value,
        cap_epsilon=cap_epsilon,
        cap_neighbors=cap_neighbors,
        cap_functional=cap_functional,
        cap_slack=cap_slack,
        cap_slack_note=cap_slack_note,
        shadow_mode=shadow_mode,
        shadow_base=shadow_base,
        shadow_steps=shadow_steps,
        shadow_epochs=shadow_epochs,
        shadow_lr=shadow_lr,
        shadow_batch_size=shadow_batch_size,
        shadow_seq_len=shadow_seq_len,
        shadow_seed=shadow_seed,
        shadow_warmup=shadow_warmup,
        shadow_background=shadow_background,
        design_seed=design_seed,
        text_field=text_field,
        id_field=id_field,
        input_format=input_format,
        limit=limit,
        dtype=dtype,
        sot=sot,
        batch_size=batch_size,
        trust_remote_code=trust_remote_code,
        threads=threads,
        **placement_kwargs(),
        backend=backend,
        **served_kwargs(),
        allow_mixed_numerics=allow_mixed_numerics(),
        progress=bar,
        log=stderr_log(not as_json),
    )
    if as_json:
        print_json(res.to_dict())
        return
    _print(res)


def _print(run) -> None:
    res = run.result
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    c = Console(highlight=False)
    c.print(
        f"[bold]memclaim audit[/] {escape(res.model.get('name', ''))}: {res.n_members} members vs "
        f"{res.n_nonmembers} non-members ({res.settings.prefix_tokens}-token prefix, "
        f"{res.settings.suffix_tokens}-token suffix)"
    )
    served = (res.procedure or {}).get("model", {}).get("served")
    if served:  # a served model: which server, and the exactness class of every policy
        cls = ", ".join(f"{p}: {c}" for p, c in served.get("exactness", {}).items())
        c.print(
            f"  served by {escape(str(served.get('server')))} {escape(str(served.get('version') or ''))} "
            f"(model {escape(str(served.get('model_id')))}, top-{served.get('top_logprobs')} "
            f"log-probs per position): {escape(cls)}"
        )
    reused = all(v["units_scored"] == 0 for v in res.scoring.values())
    if reused:
        c.print("  every score was already in the store: no model work done")
    for n in res.notes:
        c.print(f"  [yellow]note:[/] {escape(n)}")
    t = Table(title="membership-inference attacks", title_justify="left")
    for col in ("attack", "AUC [95% CI]", "leak signal 2AUC-1", "TPR at certified FPR [CP]"):
        t.add_column(col)
    for e in res.attacks:
        a = e.auc
        tpr = "-"
        if e.tpr is not None:
            tp = e.tpr
            tpr = f"{tp.tpr:.3f} [{tp.low:.3f}, {tp.high:.3f}] at {tp.certified_fpr:.4g}"
        method = "" if a.interval_method == "delong" else f" ({a.interval_method})"
        t.add_row(
            e.attack,
            f"{a.auc:.3f} [{a.low:.3f}, {a.high:.3f}]{method}",
            f"{a.leak_signal:.2f} [{a.leak_low:.2f}, {a.leak_high:.2f}]",
            tpr,
        )
    c.print(t)
    if res.tpr_note:
        c.print(f"  {escape(res.tpr_note)}")
    for label, ex in (
        ("members", res.extraction),
        ("non-members", res.extraction_nonmembers),
        ("members (trigger)", res.trigger_extraction),
        ("non-members (trigger)", res.trigger_nonmembers),
    ):
        if ex is not None:
            c.print(f"  {label}: {escape(ex.summary())}")
    if res.soundness is not None:
        c.print(f"  canary soundness ([MX] Cor. 5.3): {escape(res.soundness.verdict)}")
    if run.verifier_line is not None:
        c.print(f"  {escape(run.verifier_line)}")
    if res.shadows is not None:
        sh = res.shadows
        c.print(
            f"  shadows: {len(sh)} ({len(sh.trained)} trained now, {len(sh.reused)} reused) under "
            f"{escape(str(sh.root))}"
        )
    for cf in res.counterfactual:
        e = cf.estimate
        c.print(
            f"  counterfactual memorization mem_h ({cf.functional}, random halves; h = {escape(cf.score)}): "
            f"{e.mean_mem:.4g} [{e.low:.4g}, {e.high:.4g}]"
        )
        for g, v in cf.by_set.items():
            c.print(f"    {g}: mean {v['mean_mem']:.4g} (SE {v['se_across']:.2g}, n = {v['n']})")
        if cf.cap is not None:
            c.print(f"    {escape(cf.cap.note)}")
        elif cf.cap_refused:
            c.print(f"    [yellow]cap comparison refused:[/] {escape(cf.cap_refused)}")
    if run.limited:
        c.print(f"  note: {escape(run.limited)}")
    if res.report:
        c.print(f"  report: {escape(str(res.report['html']))}")


def _table_help() -> str:
    head, rest = TABLE_SPEC_DOC.split("\n\n", 1)
    spec, cols = rest.rsplit("\n\n", 1)
    return (
        "The audit-disagreement table ([MX] Fig. 12): rows = leakage instances, columns = audits (extraction "
        "at prefix, loss-MIA, LiRA, unlearning verifier, informed recovery), cells = leak signal with interval "
        "and verdict. Writes report.{json,md,html}, table.md and disagreement.png.\n\n"
        + head
        + "\n\n\b\n"
        + spec
        + "\n\n"
        + cols
    )


TABLE_EXAMPLES = """
\b
Example (run from a checkout of the repository):
  printf '{"instances": [{"name": "KJV on toy", "model": "toy", "members": "tests/data/kjv_verses.jsonl", "controls": "tests/data/new_verses.jsonl", "prefix_tokens": 16, "suffix_tokens": 16}]}\\n' > instances.json
  memclaim audit table --instances instances.json --out reports/table
  memclaim audit table --instances instances.json --out reports/table --json > table.json
"""


@command.command(
    "table",
    help=_table_help(),
    short_help="The audit-disagreement table ([MX] Fig. 12).",
    epilog=TABLE_EXAMPLES,
    context_settings={"max_content_width": 100},
)
@click.option(
    "--instances",
    "spec",
    required=True,
    type=click.Path(dir_okay=False),
    help="JSON spec of the leakage instances (see above).",
)
@click.option(
    "--out",
    "out_dir",
    required=True,
    type=click.Path(file_okay=False),
    help="Output folder: report.{json,md,html}, table.md and disagreement.png.",
)
@click.option("--threads", type=int, default=None, help="Torch CPU threads.")
@click.option(
    "--dtype",
    type=click.Choice(["auto", "float32", "bfloat16", "float16", "float64"]),
    default="auto",
    show_default=True,
    help="Body dtype of every model of the table; auto: bfloat16 on a GPU, float32 on the CPU.",
)
@placement_options
@numerics_option
@click.option("--json", "as_json", is_flag=True, help="Print the table as JSON.")
def table_command(spec, out_dir, threads, dtype, as_json):
    res = api.audit_table(
        spec,
        out=out_dir,
        threads=threads,
        dtype=dtype,
        **placement_kwargs(),
        allow_mixed_numerics=allow_mixed_numerics(),
        log=stderr_log(not as_json),
    )
    if as_json:
        print_json(res.to_dict())
        return
    sys.stdout.write(res.table.to_markdown(rules=False))
    sys.stdout.write(f"\nreport: {res.report['html']}\nheatmap: {res.result.heatmap}\n")


@command.command(
    "attacks",
    short_help="List the registered attacks.",
    epilog="\b\nExample:\n  memclaim audit attacks --json\n",
)
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
def attacks_command(as_json):
    """List the registered attacks with their citations and what each measures."""
    rows = describe_attacks()
    if as_json:
        print_json(rows)
        return
    for r in rows:
        click.echo(f"{r['name']:<13} {r['measures']}\n{'':<13} {r['citation']}")
