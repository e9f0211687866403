"""`memclaim train`: the training lab (tiny GPT with planted records, fine-tuning with optional
DP-SGD, unlearning until the verifier reports forgotten). Thin: parse, call memclaim.train, print.
"""
from __future__ import annotations

import json
from pathlib import Path

import click

from ..errors import InputError
from .common import PASSAGE_INPUTS, check_out_dir, trust_remote_code_option

EXAMPLES = """
\b
Examples:
  memclaim train tiny --out lab-gpt --triggers 8 --duplicates 1:8,8:8
  memclaim train finetune smollm2 --data corpus.jsonl --plant plant.jsonl --out ft --epochs 3
  memclaim train finetune lab-gpt --data corpus.txt --out dp-gpt --dp-epsilon 1 --layout examples
  memclaim train unlearn ft --forget forget.jsonl --retain corpus.jsonl --method npo --out ft-unlearned
"""


def _pairs(value: str, what: str) -> tuple[tuple[int, int], ...]:
    """'1:8,8:8' -> ((1, 8), (8, 8))."""
    if not value:
        return ()
    out = []
    for part in value.split(","):
        try:
            k, n = part.split(":")
            out.append((int(k), int(n)))
        except ValueError:
            raise InputError(f"{what} must look like K:N[,K:N...] (copies:count), got {value!r}",
                             hint=f"e.g. {what} 1:8,8:8 (8 records once and 8 records 8 times)") from None
        if out[-1][0] < 1 or out[-1][1] < 0:
            raise InputError(f"{what}: copies must be >= 1 and counts >= 0, got {part!r}", hint=f"e.g. {what} 1:8,8:8")
    return tuple(out)


def _emit(as_json: bool, payload: dict, lines: list[str]) -> None:
    if as_json:
        from .common import print_json

        print_json(payload)
    else:
        for line in lines:
            click.echo(line)


def _log(quiet: bool):
    return (lambda m: None) if quiet else (lambda m: click.echo(m, err=True))


@click.group("train", epilog=EXAMPLES, context_settings={"max_content_width": 100})
def command():
    """The training lab: train and fine-tune models on corpora with planted records (duplicates,
    canaries, reserved-trigger pairs), with DP-SGD through Opacus, and unlearn them. Every run goes
    through memclaim's one trainer, is seeded, and saves an ordinary HF folder with a
    memclaim_train.json manifest."""


@command.command("tiny", epilog=EXAMPLES)
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Output model folder.")
@click.option("--duplicates", default="1:8,8:8", show_default=True, help="Duplicated passages c||z: K:N = N records K times.")
@click.option("--canaries", default="", help="Canaries c||z with uniformly random secrets: K:N = N records K times.")
@click.option("--triggers", type=int, default=8, show_default=True, help="Reserved-trigger pairs rho||z (c||z never inserted).")
@click.option("--trigger-copies", type=int, default=16, show_default=True, help="Copies of each rho||z document.")
@click.option("--steps", type=int, default=800, show_default=True)
@click.option("--batch-size", type=int, default=16, show_default=True)
@click.option("--lr", type=float, default=3e-3, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True, help="Training seed (model init and batches).")
@click.option("--corpus-seed", type=int, default=1, show_default=True, help="Seed of the corpus and planted records.")
@click.option("--overwrite", is_flag=True, help="Replace --out if it is a model folder memclaim wrote (and holds "
              "nothing else); never the current folder or one of its parents.")
@click.option("--json", "as_json", is_flag=True, help="Print the manifest as JSON.")
@click.option("--quiet", is_flag=True)
def tiny(out_dir, duplicates, canaries, triggers, trigger_copies, steps, batch_size, lr, seed, corpus_seed,
         overwrite, as_json, quiet):
    """Train a tiny GPT from scratch on a Markov-Zipf corpus with planted records ([MX] §8)."""
    from ..train.finetune import TinyLabSpec, check_output_folder, save_trained, tiny_lab_model

    check_out_dir(out_dir)
    check_output_folder(out_dir, overwrite=overwrite)  # before training: never after minutes of work

    spec = TinyLabSpec(duplicates=_pairs(duplicates, "--duplicates"), canaries=_pairs(canaries, "--canaries"),
                       triggers=triggers, trigger_copies=trigger_copies, steps=steps, batch_size=batch_size, lr=lr,
                       train_seed=seed, corpus_seed=corpus_seed)
    model, tok, manifest = tiny_lab_model(spec, log=_log(quiet))
    out = save_trained(model, tok, out_dir, manifest=manifest, overwrite=overwrite)
    t = manifest["train"]
    recs = manifest["records"]
    by = {}
    for r in recs:
        k = by.setdefault(r["kind"], [0, 0, 0])
        k[0] += 1
        k[1] += r["extracted_via_prefix"]
        k[2] += r.get("extracted_via_trigger", 0)
    ext = "; ".join(f"{kind}: {v[1]}/{v[0]} extracted from c" + (f", {v[2]}/{v[0]} via rho" if kind == "trigger" else "")
                    for kind, v in by.items())
    _emit(as_json, manifest, [
        f"tiny GPT trained: {t['steps']} steps, loss {t['first_loss']:.3f} -> {t['final_loss']:.3f}",
        f"greedy extraction of the planted secrets: {ext}",
        f"planted: {len(manifest['records'])} records ({sum(1 for r in manifest['records'] if r['kind'] == 'trigger')} "
        f"trigger pairs); the list with prefixes, secrets and triggers is in {Path(out) / 'memclaim_train.json'}",
        f"saved to {out}",
    ])


def _read_texts(path, text_field=None):
    from ..text.io import read_passages

    return [r.text for r in read_passages(path, text_field=text_field).records]


def _read_jsonl(path) -> list[dict]:
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{str(p)!r} does not exist", hint="pass a JSONL file, one JSON object per line")
    out = []
    for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise InputError(f"{str(p)!r} line {i} is not JSON: {exc}", hint="write one JSON object per line") from None
    if not out:
        raise InputError(f"{str(p)!r} holds no records", hint="write one JSON object per line")
    return out


@command.command("finetune", epilog=EXAMPLES)
@click.argument("model")
@click.option("--data", required=True, type=click.Path(), help=f"Training texts ({PASSAGE_INPUTS}).")
@click.option("--plant", "plant_file", type=click.Path(dir_okay=False), default=None,
              help="JSONL of planted records: {id, kind: duplicate|canary|trigger, prefix, secret, copies, trigger}.")
@click.option("--reserve-triggers", type=int, default=0, show_default=True,
              help="Add N reserved tokens <|memclaim_reserved_i|> to the tokenizer (usable as triggers).")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False))
@click.option("--layout", type=click.Choice(["pack", "examples"]), default="pack", show_default=True,
              help="pack: one token stream; examples: each planted copy its own block (a DP example).")
@click.option("--epochs", type=float, default=3.0, show_default=True, help="[MX] App. F.2: 3 epochs.")
@click.option("--steps", type=int, default=None, help="Steps (overrides --epochs).")
@click.option("--lr", type=float, default=5e-5, show_default=True, help="[MX] App. F.2: AdamW, lr 5e-5.")
@click.option("--batch-size", type=int, default=8, show_default=True)
@click.option("--seq-len", type=int, default=128, show_default=True)
@click.option("--dp-epsilon", type=float, default=None, help="Train with DP-SGD to this target epsilon (add/remove).")
@click.option("--dp-delta", type=float, default=None, help="delta (default 1/(10 N)).")
@click.option("--noise-multiplier", type=float, default=None, help="DP-SGD with this noise multiplier instead of a target.")
@click.option("--max-grad-norm", type=float, default=1.0, show_default=True, help="Per-sample clipping norm (DP).")
@click.option("--physical-batch-size", type=int, default=None, help="Gradient accumulation chunk size.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--threads", type=int, default=None, help="Torch CPU threads.")
@click.option("--overwrite", is_flag=True, help="Replace --out if it is a model folder memclaim wrote (and holds "
              "nothing else).")
@trust_remote_code_option
@click.option("--json", "as_json", is_flag=True)
@click.option("--quiet", is_flag=True)
def finetune(model, data, plant_file, reserve_triggers, out_dir, layout, epochs, steps, lr, batch_size, seq_len,
             dp_epsilon, dp_delta, noise_multiplier, max_grad_norm, physical_batch_size, seed, threads, overwrite,
             trust_remote_code, as_json, quiet):
    """Fine-tune MODEL (a model folder, .gguf or named model) on --data with planted records."""
    from ..train.dp import DPConfig
    from ..train.finetune import (check_output_folder, epochs_to_steps, finetune as run_finetune, load_trainable,
                                  save_trained)
    from ..train.planted import add_reserved_tokens, plant, tokenize_record, training_blocks
    from ..train.trainer import TrainConfig

    say = _log(quiet)
    check_out_dir(out_dir)
    check_output_folder(out_dir, overwrite=overwrite)
    dp = None
    if dp_epsilon is not None or noise_multiplier is not None:  # options are checked before any work
        dp = DPConfig(target_epsilon=dp_epsilon, noise_multiplier=noise_multiplier, delta=dp_delta,
                      max_grad_norm=max_grad_norm)
    texts = _read_texts(data)  # bad inputs fail before the weights are read
    plant_specs = _read_jsonl(plant_file) if plant_file else []
    m, tok, sot, loaded = load_trainable(model, seq_len=seq_len, trust_remote_code=trust_remote_code)
    reserved = add_reserved_tokens(m, tok, reserve_triggers) if reserve_triggers else []
    enc = lambda t: list(tok(t, add_special_tokens=False)["input_ids"])  # noqa: E731
    background = [enc(t) for t in texts]
    records = [tokenize_record(tok, spec) for spec in plant_specs]
    corpus = plant(background, records, seed=seed)
    pad = None
    if layout == "examples":
        pad = tok.pad_token_id if tok.pad_token_id is not None else sot[0]
    n_blocks = training_blocks(corpus, seq_len=seq_len, sep_ids=sot, layout=layout, pad_id=pad).n
    n_steps = steps if steps is not None else epochs_to_steps(epochs, n_blocks, batch_size)
    cfg = TrainConfig(steps=n_steps, batch_size=batch_size, seq_len=seq_len, lr=lr, warmup_steps=0, seed=seed,
                      dp=dp, pad_id=pad, physical_batch_size=physical_batch_size, threads=threads)
    say(f"fine-tuning {loaded.name} on {n_blocks} blocks of {seq_len} tokens for {n_steps} steps"
        + (" with DP-SGD" if dp else ""))
    res = run_finetune(m, corpus, cfg, sep_ids=sot, layout=layout, pad_id=pad)
    manifest = {"kind": "finetune", "base": loaded.describe(), "data": str(data), "reserved_tokens": reserved,
                "result": res.to_dict()}
    out = save_trained(m, tok, out_dir, manifest=manifest, overwrite=overwrite)
    lines = [f"fine-tuned {res.train['steps']} steps: loss {res.train['first_loss']:.3f} -> {res.train['final_loss']:.3f}"]
    if res.dp:
        lines.append("DP: " + res.dp["statement"])
    lines.append(f"saved to {out}")
    _emit(as_json, manifest, lines)


@command.command("unlearn", epilog=EXAMPLES)
@click.argument("model")
@click.option("--forget", required=True, type=click.Path(dir_okay=False),
              help="JSONL of forget records {id, prefix, suffix|secret} (the content to erase).")
@click.option("--retain", required=True, type=click.Path(), help=f"Retain texts ({PASSAGE_INPUTS}).")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False))
@click.option("--method", type=click.Choice(["npo", "graddiff"]), default="npo", show_default=True)
@click.option("--lr", type=float, default=7e-6, show_default=True, help="[MX] App. F.2: 7e-6.")
@click.option("--max-rounds", type=int, default=14, show_default=True, help="[MX] App. F.2: up to 14 rounds.")
@click.option("--threshold", type=float, default=0.15, show_default=True,
              help="The verifier reports forgotten below this recovered fraction ([MX] App. F.2: 0.15).")
@click.option("--seq-len", type=int, default=128, show_default=True)
@click.option("--batch-size", type=int, default=8, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--threads", type=int, default=None)
@click.option("--overwrite", is_flag=True, help="Replace --out if it is a model folder memclaim wrote (and holds "
              "nothing else).")
@trust_remote_code_option
@click.option("--json", "as_json", is_flag=True)
@click.option("--quiet", is_flag=True)
def unlearn_cmd(model, forget, retain, out_dir, method, lr, max_rounds, threshold, seq_len, batch_size, seed,
                threads, overwrite, trust_remote_code, as_json, quiet):
    """Unlearn the --forget records from MODEL (GradDiff or NPO, [MX] App. F.2) until memclaim's
    unlearning verifier reports them forgotten; report retain perplexity before and after."""
    from types import SimpleNamespace

    from ..audits.extraction import pair_windows
    from ..audits.verifier import verify
    from ..models.hf import HFLanguageModel
    from ..models.loader import HFTokenizer
    from ..train.finetune import check_output_folder, load_trainable, save_trained
    from ..train.trainer import example_blocks, pack_documents
    from ..train.unlearn import UnlearnConfig, unlearn

    check_out_dir(out_dir)
    check_output_folder(out_dir, overwrite=overwrite)
    recs = _read_jsonl(forget)  # bad inputs fail before the weights are read
    retain_texts = _read_texts(retain)
    m, tok, sot, loaded = load_trainable(model, seq_len=seq_len, trust_remote_code=trust_remote_code)
    htok = HFTokenizer(tok)
    ws = pair_windows(recs, htok)
    pad = tok.pad_token_id if tok.pad_token_id is not None else sot[0]
    forget_blocks = example_blocks([w.prefix_ids + w.suffix_ids for w in ws.windows],
                                   seq_len=min(seq_len, max(len(w.prefix_ids) + len(w.suffix_ids) for w in ws.windows)
                                               + len(sot)), sep_ids=sot, pad_id=pad)
    retain_docs = [htok.encode(t) for t in retain_texts]
    retain_blocks = pack_documents(retain_docs, seq_len=seq_len, sep_ids=sot)

    def verifier(model_):
        view = SimpleNamespace(lm=HFLanguageModel(model_, name=loaded.name), tokenizer=htok, sot_ids=sot)
        return verify(view, ws, threshold=threshold)

    cfg = UnlearnConfig(method=method, lr=lr, max_rounds=max_rounds, batch_size=batch_size, seed=seed, threads=threads)
    say = _log(quiet)
    res = unlearn(m, forget_blocks, retain_blocks, cfg, verifier=verifier, pad_id=pad,
                  on_round=lambda r: say(f"round {r.round}: recovered fraction {r.rate:.3f}"
                                         + (" -> forgotten" if r.forgotten else "")))
    manifest = {"kind": "unlearn", "base": loaded.describe(), "forget": str(forget), "retain": str(retain),
                "result": res.to_dict()}
    out = save_trained(m, tok, out_dir, manifest=manifest, overwrite=overwrite)
    _emit(as_json, manifest, [
        f"{method}: {res.rounds} rounds, {res.steps} steps; verifier: "
        f"{'forgotten' if res.forgotten else 'NOT forgotten'} (recovered fraction {res.before['rate']:.3f} -> "
        f"{res.after['rate']:.3f}, threshold {threshold:g})",
        f"retain perplexity {res.retain_ppl_before:.2f} -> {res.retain_ppl_after:.2f}",
        "the verifier reads only extraction from each record's own prefix; a secret reachable through another "
        "prompt (e.g. a reserved trigger) passes as forgotten ([MX] Cor. 6.3)",
        f"saved to {out}",
    ])
