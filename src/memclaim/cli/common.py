"""Options and plumbing shared by the scoring subcommands (score, population, census, audit)."""
from __future__ import annotations

import functools
import sys
from pathlib import Path

import click

from ..errors import InputError


def print_json(obj) -> None:
    from ..jsonutil import dumps

    sys.stdout.write(dumps(obj, indent=1) + "\n")


def set_threads(threads: int | None) -> None:
    if threads is None:
        return
    if threads < 1:
        raise InputError(f"--threads must be >= 1, got {threads}")
    import torch

    torch.set_num_threads(threads)


def _policies(ctx, param, value):
    from ..decoding import parse_policies

    return parse_policies(value or ("top-k:40",))


def procedure_options(f):
    """--prefix-tokens --suffix-tokens --policy --prompt-template --chat-template --aggregate + input fields."""
    opts = [
        click.option("--prefix-tokens", type=int, default=50, show_default=True, help="Natural-prefix length in tokens."),
        click.option("--suffix-tokens", type=int, default=50, show_default=True, help="Target suffix length in tokens."),
        click.option("--policy", "policies", multiple=True, callback=_policies,
                     help="Decoding policy (repeatable): full, greedy, temperature:T, top-k:K, top-p:P or a "
                          "combination like top-k:40,temperature:0.7. Default top-k:40."),
        click.option("--prompt-template", "prompt_templates", multiple=True,
                     help="Prompt rule f_P: a template filled with {prefix}/{suffix} text (repeatable: several "
                          "prompts per candidate). Default: the natural prefix."),
        click.option("--chat-template", is_flag=True, help="Wrap each prompt in the model's chat template."),
        click.option("--aggregate", type=click.Choice(["max", "mean"]), default="max", show_default=True,
                     help="Aggregate over several prompts ([EM] Eq. 15)."),
        click.option("--text-field", default=None, help="Field holding the text (JSONL/CSV/Parquet)."),
        click.option("--id-field", default=None, help="Field holding the record id."),
        click.option("--format", "input_format", type=click.Choice(["jsonl", "txt", "csv", "parquet"]), default=None,
                     help="Input format (default: from the extension)."),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def model_options(f):
    opts = [
        click.option("--dtype", type=click.Choice(["float32", "bfloat16", "float16", "float64"]), default="float32",
                     show_default=True, help="Body dtype (the unembedding and log-softmax always run in float32+)."),
        click.option("--sot", default=None,
                     help="Start-of-text rule: auto, none, bos, eos, a token or ids (default: per model; "
                          "smollm2 uses <|endoftext|>, gemma3-270m its <bos>)."),
        click.option("--allow-pickle", is_flag=True, help="Allow loading pickle checkpoints (can run arbitrary code)."),
        click.option("--threads", type=int, default=None, help="Torch CPU threads."),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def build_prompt_rule(templates, chat, aggregate):
    from ..scoring.prompts import PromptRule

    return PromptRule(templates=tuple(templates or ()), chat=bool(chat), aggregate=aggregate)


def resolve_run_inputs(model, *, input_path=None, document_path=None, stride=None, prefix_tokens: int,
                       suffix_tokens: int, text_field=None, id_field=None, input_format=None, label=None):
    """Read passages or a document and cut windows -> (WindowSet, inputs dict, skipped_empty, label)."""
    from ..text.io import read_document, read_passages
    from ..text.windows import passage_windows, sliding_windows

    if document_path is not None:
        if stride is None:
            raise InputError("--document needs --stride (in tokens)", hint="e.g. --stride 10")
        text, digest = read_document(document_path)
        ws = sliding_windows(text, model.tokenizer, prefix_tokens=prefix_tokens, suffix_tokens=suffix_tokens,
                             stride=stride, source=Path(document_path).name)
        inputs = {"document": str(document_path), "sha256": digest, "stride": stride, "chars": len(text)}
        return ws, inputs, 0, label or f"document:{Path(document_path).name}"
    if stride is not None:
        raise InputError("--stride applies to --document only")
    ps = read_passages(input_path, fmt=input_format, text_field=text_field, id_field=id_field)
    ws = passage_windows(ps.records, model.tokenizer, prefix_tokens=prefix_tokens, suffix_tokens=suffix_tokens)
    inputs = {"passages": str(input_path), "sha256": ps.sha256, "records": len(ps.records) + ps.skipped_empty}
    return ws, inputs, ps.skipped_empty, label or f"passages:{Path(input_path).name}"
