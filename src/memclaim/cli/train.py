"""`memclaim train`: the training lab (tiny GPT with planted records, fine-tuning with optional
DP-SGD, unlearning until the verifier reports forgotten). Thin: parse, call memclaim.api
(train_tiny, finetune, unlearn), print.
"""

from __future__ import annotations

import click

from .. import api
from .common import (
    PASSAGE_INPUTS,
    print_json,
    stderr_log,
    train_device_option,
    trust_remote_code_option,
)
from .options import Group
from .progress import progress_bar

# a training run's batch size, seed and steps decide the model: procedure, not execution
_TRAIN_GROUPS = dict.fromkeys(
    ("batch_size", "seed", "corpus_seed", "physical_batch_size"), "Procedure"
)

EXAMPLES = """
\b
Examples (run from a checkout of the repository):
  memclaim train tiny --out lab-gpt --triggers 8 --duplicates 1:8,8:8
  printf '{"id": "c1", "kind": "canary", "prefix": "The vault code is", "secret": " 4 1 7 9", "copies": 4}\\n' > plant.jsonl
  memclaim train finetune lab-gpt --data tests/data/new_verses_b.jsonl --plant plant.jsonl \
      --out ft --epochs 3
  memclaim train finetune lab-gpt --data tests/data/genesis_1_3.txt --out dp-gpt --dp-epsilon 1 \
      --layout examples --steps 20
  printf '{"id": "c1", "prefix": "The vault code is", "secret": " 4 1 7 9"}\\n' > forget.jsonl
  memclaim train unlearn ft --forget forget.jsonl --retain tests/data/new_verses_b.jsonl \
      --method npo --out ft-unlearned
"""


def _emit(as_json: bool, run) -> None:
    if as_json:
        print_json(run.to_dict())
    else:
        for line in run.lines:
            click.echo(line)


def _log(no_progress: bool):
    return None if no_progress else stderr_log()


@click.group("train", cls=Group, epilog=EXAMPLES, context_settings={"max_content_width": 100})
def command():
    """The training lab: train and fine-tune models on corpora with planted records (duplicates,
    canaries, reserved-trigger pairs), with DP-SGD through Opacus, and unlearn them. Every run goes
    through memclaim's one trainer, is seeded, and saves an ordinary HF folder with a
    memclaim_train.json manifest."""


@command.command("tiny", epilog=EXAMPLES, groups=_TRAIN_GROUPS)
@click.option(
    "--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Output model folder."
)
@click.option(
    "--duplicates",
    default="1:8,8:8",
    show_default=True,
    help="Duplicated passages c||z: K:N = N records K times.",
)
@click.option(
    "--canaries",
    default="",
    help="Canaries c||z with uniformly random secrets: K:N = N records K times.",
)
@click.option(
    "--triggers",
    type=int,
    default=8,
    show_default=True,
    help="Reserved-trigger pairs rho||z (c||z never inserted).",
)
@click.option(
    "--trigger-copies",
    type=int,
    default=16,
    show_default=True,
    help="Copies of each rho||z document.",
)
@click.option("--steps", type=int, default=800, show_default=True, help="Training steps.")
@click.option("--batch-size", type=int, default=16, show_default=True, help="Sequences per step.")
@click.option("--lr", type=float, default=3e-3, show_default=True, help="AdamW learning rate.")
@click.option(
    "--seed", type=int, default=0, show_default=True, help="Training seed (model init and batches)."
)
@click.option(
    "--corpus-seed",
    type=int,
    default=1,
    show_default=True,
    help="Seed of the corpus and planted records.",
)
@click.option(
    "--overwrite",
    is_flag=True,
    help="Replace --out if it is a model folder memclaim wrote (and holds "
    "nothing else); never the current folder or one of its parents.",
)
@train_device_option
@click.option("--json", "as_json", is_flag=True, help="Print the manifest as JSON.")
@click.option("--no-progress", is_flag=True, help="No per-step progress lines on stderr.")
def tiny(
    out_dir,
    duplicates,
    canaries,
    triggers,
    trigger_copies,
    steps,
    batch_size,
    lr,
    seed,
    corpus_seed,
    overwrite,
    device,
    as_json,
    no_progress,
):
    """Train a tiny GPT from scratch on a Markov-Zipf corpus with planted records ([MX] §8)."""
    bar = progress_bar(not no_progress and not as_json)  # before the API loads torch
    _emit(
        as_json,
        api.train_tiny(
            out=out_dir,
            duplicates=duplicates,
            canaries=canaries,
            triggers=triggers,
            trigger_copies=trigger_copies,
            steps=steps,
            batch_size=batch_size,
            lr=lr,
            seed=seed,
            corpus_seed=corpus_seed,
            overwrite=overwrite,
            device=device,
            log=_log(no_progress),
            progress=bar,
        ),
    )


@command.command("finetune", epilog=EXAMPLES, groups=_TRAIN_GROUPS)
@click.argument("model")
@click.option(
    "--data", required=True, type=click.Path(), help=f"Training texts ({PASSAGE_INPUTS})."
)
@click.option(
    "--plant",
    "plant_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="JSONL of planted records: {id, kind: duplicate|canary|trigger, prefix, secret, copies, trigger}.",
)
@click.option(
    "--reserve-triggers",
    type=int,
    default=0,
    show_default=True,
    help="Add N reserved tokens <|memclaim_reserved_i|> to the tokenizer (usable as triggers).",
)
@click.option(
    "--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Output model folder."
)
@click.option(
    "--layout",
    type=click.Choice(["pack", "examples"]),
    default="pack",
    show_default=True,
    help="pack: one token stream; examples: each planted copy its own block (a DP example).",
)
@click.option(
    "--epochs", type=float, default=3.0, show_default=True, help="[MX] App. F.2: 3 epochs."
)
@click.option("--steps", type=int, default=None, help="Steps (overrides --epochs).")
@click.option(
    "--lr", type=float, default=5e-5, show_default=True, help="[MX] App. F.2: AdamW, lr 5e-5."
)
@click.option("--batch-size", type=int, default=8, show_default=True, help="Sequences per step.")
@click.option(
    "--seq-len",
    type=int,
    default=None,
    help="Tokens per training sequence (default: 128, [MX] App. F.2, or the model's context if shorter).",
)
@click.option(
    "--dp-epsilon",
    type=float,
    default=None,
    help="Train with DP-SGD to this target epsilon (add/remove).",
)
@click.option("--dp-delta", type=float, default=None, help="delta (default 1/(10 N)).")
@click.option(
    "--noise-multiplier",
    type=float,
    default=None,
    help="DP-SGD with this noise multiplier instead of a target.",
)
@click.option(
    "--max-grad-norm",
    type=float,
    default=1.0,
    show_default=True,
    help="Per-sample clipping norm (DP).",
)
@click.option(
    "--physical-batch-size", type=int, default=None, help="Gradient accumulation chunk size."
)
@click.option(
    "--seed",
    type=int,
    default=0,
    show_default=True,
    help="Training seed (init, batches, DP noise).",
)
@click.option("--threads", type=int, default=None, help="Torch CPU threads.")
@click.option(
    "--overwrite",
    is_flag=True,
    help="Replace --out if it is a model folder memclaim wrote (and holds nothing else).",
)
@trust_remote_code_option
@train_device_option
@click.option("--json", "as_json", is_flag=True, help="Print the manifest as JSON.")
@click.option("--no-progress", is_flag=True, help="No per-step progress lines on stderr.")
def finetune(
    model,
    data,
    plant_file,
    reserve_triggers,
    out_dir,
    layout,
    epochs,
    steps,
    lr,
    batch_size,
    seq_len,
    dp_epsilon,
    dp_delta,
    noise_multiplier,
    max_grad_norm,
    physical_batch_size,
    seed,
    threads,
    overwrite,
    trust_remote_code,
    device,
    as_json,
    no_progress,
):
    """Fine-tune MODEL (a model folder, .gguf or named model) on --data with planted records."""
    bar = progress_bar(not no_progress and not as_json)  # before the API loads torch
    _emit(
        as_json,
        api.finetune(
            model,
            data,
            out=out_dir,
            plant_records=plant_file,
            reserve_triggers=reserve_triggers,
            layout=layout,
            epochs=epochs,
            steps=steps,
            lr=lr,
            batch_size=batch_size,
            seq_len=seq_len,
            dp_epsilon=dp_epsilon,
            dp_delta=dp_delta,
            noise_multiplier=noise_multiplier,
            max_grad_norm=max_grad_norm,
            physical_batch_size=physical_batch_size,
            seed=seed,
            threads=threads,
            overwrite=overwrite,
            trust_remote_code=trust_remote_code,
            device=device,
            log=_log(no_progress),
            progress=bar,
        ),
    )


@command.command("unlearn", epilog=EXAMPLES, groups=_TRAIN_GROUPS)
@click.argument("model")
@click.option(
    "--forget",
    required=True,
    type=click.Path(dir_okay=False),
    help="JSONL of forget records {id, prefix, suffix|secret} (the content to erase).",
)
@click.option(
    "--retain", required=True, type=click.Path(), help=f"Retain texts ({PASSAGE_INPUTS})."
)
@click.option(
    "--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Output model folder."
)
@click.option(
    "--method",
    type=click.Choice(["npo", "graddiff"]),
    default="npo",
    show_default=True,
    help="Unlearning objective: NPO or gradient difference ([MX] App. F.2).",
)
@click.option("--lr", type=float, default=7e-6, show_default=True, help="[MX] App. F.2: 7e-6.")
@click.option(
    "--max-rounds", type=int, default=14, show_default=True, help="[MX] App. F.2: up to 14 rounds."
)
@click.option(
    "--threshold",
    type=float,
    default=0.15,
    show_default=True,
    help="The verifier reports forgotten below this recovered fraction ([MX] App. F.2: 0.15).",
)
@click.option(
    "--seq-len",
    type=int,
    default=None,
    help="Tokens per training sequence (default: 128, [MX] App. F.2, or the model's context if shorter).",
)
@click.option("--batch-size", type=int, default=8, show_default=True, help="Sequences per step.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the unlearning run.")
@click.option("--threads", type=int, default=None, help="Torch CPU threads.")
@click.option(
    "--overwrite",
    is_flag=True,
    help="Replace --out if it is a model folder memclaim wrote (and holds nothing else).",
)
@trust_remote_code_option
@train_device_option
@click.option("--json", "as_json", is_flag=True, help="Print the manifest as JSON.")
@click.option("--no-progress", is_flag=True, help="No per-step progress lines on stderr.")
def unlearn_cmd(
    model,
    forget,
    retain,
    out_dir,
    method,
    lr,
    max_rounds,
    threshold,
    seq_len,
    batch_size,
    seed,
    threads,
    overwrite,
    trust_remote_code,
    device,
    as_json,
    no_progress,
):
    """Unlearn the --forget records from MODEL (GradDiff or NPO, [MX] App. F.2) until memclaim's
    unlearning verifier reports them forgotten; report retain perplexity before and after."""
    bar = progress_bar(not no_progress and not as_json)  # before the API loads torch
    _emit(
        as_json,
        api.unlearn(
            model,
            forget,
            retain,
            out=out_dir,
            method=method,
            lr=lr,
            max_rounds=max_rounds,
            threshold=threshold,
            seq_len=seq_len,
            batch_size=batch_size,
            seed=seed,
            threads=threads,
            overwrite=overwrite,
            trust_remote_code=trust_remote_code,
            device=device,
            log=_log(no_progress),
            progress=bar,
        ),
    )
