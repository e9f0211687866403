"""Options and plumbing shared by the scoring subcommands (score, population, census, audit)."""
from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

import click

from ..errors import InputError


def print_json(obj) -> None:
    from ..jsonutil import dumps

    sys.stdout.write(dumps(obj, indent=1) + "\n")


def check_out_dir(path, option: str = "--out") -> Path:
    """Fail before any work when ``path`` cannot become a folder memclaim writes: it is a file,
    or the nearest folder that exists is not writable (no permission, read-only filesystem)."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise InputError(f"{option} {str(path)!r} exists and is not a folder", hint=f"pass a folder path to {option}")
    q = p.absolute()
    while not q.exists() and q != q.parent:
        q = q.parent
    if not q.is_dir():
        raise InputError(f"{option} {str(path)!r} cannot be created: {str(q)!r} is a file, not a folder",
                         hint=f"choose another {option} path")
    read_only = False
    try:
        read_only = bool(os.statvfs(q).f_flag & os.ST_RDONLY)
    except OSError:
        pass
    if read_only or not os.access(q, os.W_OK | os.X_OK):
        why = "is on a read-only filesystem" if read_only else "is not writable by this user"
        raise InputError(f"{option} {str(path)!r} cannot be written: {str(q)!r} {why}",
                         hint=f"choose a {option} folder you can write (e.g. under your home folder)")
    return p


def set_threads(threads: int | None) -> None:
    if threads is None:
        return
    if threads < 1:
        raise InputError(f"--threads must be >= 1, got {threads}", hint="e.g. --threads 4")
    cpus = os.cpu_count() or 1
    if threads > 8 * cpus:
        raise InputError(f"--threads {threads} is more than 8 threads per CPU core ({cpus} here): each thread takes "
                         "memory and oversubscription only slows the run", hint=f"e.g. --threads {cpus}")
    import torch

    torch.set_num_threads(threads)


def _policies(ctx, param, value):
    from ..decoding import parse_policies

    return parse_policies(value or ("top-k:40",))


DEFAULT_PREFIX_TOKENS = 50
DEFAULT_SUFFIX_TOKENS = 50


def window_lengths(prefix_tokens, suffix_tokens, prefix_field=None, suffix_field=None) -> tuple:
    """--prefix-tokens/--suffix-tokens as the run's lengths: the defaults (50, 50) for texts; with
    --prefix-field/--suffix-field an omitted length is None, the whole field."""
    fields = prefix_field is not None or suffix_field is not None
    p = prefix_tokens if prefix_tokens is not None else (None if fields else DEFAULT_PREFIX_TOKENS)
    s = suffix_tokens if suffix_tokens is not None else (None if fields else DEFAULT_SUFFIX_TOKENS)
    return p, s


def procedure_options(f):
    """--prefix-tokens --suffix-tokens --policy --prompt-template --chat-template --aggregate + input fields
    (--text-field --prefix-field --suffix-field --id-field --format). Commands turn the lengths into
    numbers with :func:`window_lengths`."""
    opts = [
        click.option("--prefix-tokens", type=int, default=None,
                     help=f"Natural-prefix length in tokens [default: {DEFAULT_PREFIX_TOKENS}; with --prefix-field: "
                          "the whole field, or its last N tokens]."),
        click.option("--suffix-tokens", type=int, default=None,
                     help=f"Target suffix length in tokens [default: {DEFAULT_SUFFIX_TOKENS}; with --suffix-field: the "
                          "whole field, or its first N tokens]. Under a --prompt-template it selects the suffix text; "
                          "the target is that text tokenized after the prompt."),
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
        click.option("--prefix-field", default=None,
                     help="Field holding each record's prefix (JSONL/CSV/Parquet; with --suffix-field): prefix and "
                          "suffix are tokenized together and cut where the suffix starts, so a target can start a "
                          "sentence."),
        click.option("--suffix-field", default=None,
                     help="Field holding each record's suffix, the target (with --prefix-field; the whole field "
                          "unless --suffix-tokens cuts it)."),
        click.option("--id-field", default=None, help="Field holding the record id."),
        click.option("--format", "input_format", type=click.Choice(["jsonl", "txt", "csv", "parquet"]), default=None,
                     help="Input format (default: from the extension)."),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def _warn_remote_code(ctx, param, value):
    if value:
        click.echo("warning: --trust-remote-code runs the Python code in the model folder (its auto_map classes) "
                   "with your permissions; use it only for a folder whose code you have read or trust", err=True)
    return bool(value)


def trust_remote_code_option(f):
    """--trust-remote-code: the explicit opt-in to run a model folder's own Python code."""
    return click.option("--trust-remote-code", "trust_remote_code", is_flag=True, callback=_warn_remote_code,
                        help="Run the model folder's own Python code (config.json auto_map); refused without this "
                             "flag. The code runs with your permissions: use only for code you trust.")(f)


def model_options(f):
    opts = [
        click.option("--dtype", type=click.Choice(["float32", "bfloat16", "float16", "float64"]), default="float32",
                     show_default=True, help="Body dtype (the unembedding and log-softmax always run in float32+)."),
        click.option("--sot", default=None,
                     help="Start-of-text rule: auto, none, bos, eos, a token or ids (default: per model; "
                          "smollm2 uses <|endoftext|>, gemma3-270m its <bos>)."),
        click.option("--allow-pickle", is_flag=True, help="Allow loading pickle checkpoints (can run arbitrary code)."),
        trust_remote_code_option,
        click.option("--threads", type=int, default=None, help="Torch CPU threads."),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def near_verbatim_options(f):
    """--near-verbatim EPS (repeatable) and --beam B (repeatable) ([EM] App. B.1 Eq. 2, §6)."""
    opts = [
        click.option("--near-verbatim", "nv_eps", type=int, multiple=True,
                     help="Also compute the certified near-verbatim lower bound on q(B_eps(s) | p) for token edit "
                          "distance EPS ([EM] App. B.1 Eq. 2); repeatable (the union over settings is reported)."),
        click.option("--beam", "nv_beams", type=int, multiple=True,
                     help="Beam width(s) for --near-verbatim (default 16; 800 is the paper's baseline, about a "
                          "minute per window on SmolLM2 on 2 cores)."),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def near_verbatim_settings(nv_eps, nv_beams) -> dict | None:
    """The --near-verbatim/--beam options as run_scoring's ``near_verbatim`` argument."""
    if nv_beams and not nv_eps:
        raise InputError("--beam applies to --near-verbatim", hint="add --near-verbatim EPS")
    if not nv_eps:
        return None
    from ..scoring.runner import normalize_near_verbatim

    return normalize_near_verbatim({"epsilons": list(nv_eps), "beams": list(nv_beams or (16,))}, suffix_tokens=0)


def claim_options(f):
    """The population-test options shared by ``test`` and ``population``: decontamination ([EM] D.2),
    multiple testing ([EM] C.5), the tie-breaking seed, the budget view ([EM] F.2), intervals, and
    the description of the controls that goes in the report."""
    opts = [
        click.option("--exclude-controls", "exclude_file", type=click.Path(dir_okay=False), default=None,
                     help="File with control ids verified as members, one per line ([EM] D.2). For a store: "
                          "record ids (passages) or window ids ('doc.txt#3')."),
        click.option("--exclude-control", "exclude_ids", multiple=True, help="A control id to exclude (repeatable)."),
        click.option("--fdr", "fdr", default=None, help="Benjamini-Hochberg at this FDR level ([EM] C.5)."),
        click.option("--fwer", "fwer", default=None, help="Bonferroni at this FWER level ([EM] C.5)."),
        click.option("--seed", default=0, show_default=True, type=int,
                     help="Seed for randomized tie-breaking (recorded)."),
        click.option("--budget-delta", default=None, type=float,
                     help="Add the budget view at confidence 1 - delta ([EM] F.2)."),
        click.option("--budget", "realistic_budget", default=1e5, show_default=True, type=float,
                     help="Realistic query budget n."),
        click.option("--confidence", default=0.95, show_default=True, type=float, help="Confidence of the intervals."),
        click.option("--controls-description", default=None,
                     help="How the controls were chosen and matched (goes in the report)."),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def run_options(f):
    """--batch-size --unit-size --json --no-progress: how a scoring run is cut and reported
    (score, population, census)."""
    opts = [
        click.option("--batch-size", type=int, default=16, show_default=True, help="Windows per forward pass."),
        click.option("--unit-size", type=int, default=64, show_default=True,
                     help="Windows per work unit (the unit of resume and of distribution)."),
        click.option("--json", "as_json", is_flag=True, help="Print a machine-readable summary."),
        click.option("--no-progress", is_flag=True, help="No progress bar."),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


BACKENDS = ("local", "ray")


def backend_options(f):
    """--backend --address --workers --gpus-per-worker --threads-per-worker (distributed scoring)."""
    opts = [
        click.option("--backend", type=click.Choice(BACKENDS), default="local", show_default=True,
                     help="Where units are scored: this process, or a pool of Ray actors (pip install "
                          "'memclaim[ray]'); both write the same store. See docs/distributed.md."),
        click.option("--address", default=None,
                     help="Ray cluster address (host:port, or 'auto'); default: start a local cluster."),
        click.option("--workers", type=int, default=None,
                     help="Ray workers (actors), each loading the model once. Default: fill the cluster."),
        click.option("--gpus-per-worker", type=float, default=0.0, show_default=True,
                     help="GPUs per Ray worker (0 = CPU; 0.5 packs two workers per GPU)."),
        click.option("--threads-per-worker", type=int, default=1, show_default=True,
                     help="Torch CPU threads (and Ray CPUs) per Ray worker."),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def make_backend(model, policies, *, backend: str = "local", address=None, workers=None, gpus_per_worker=0.0,
                 threads_per_worker=1, batch_size: int = 16):
    """The scoring backend the options ask for; None means run_scoring's local default."""
    if backend == "local":
        given = [name for name, v, default in (("--address", address, None), ("--workers", workers, None),
                                               ("--gpus-per-worker", gpus_per_worker, 0.0),
                                               ("--threads-per-worker", threads_per_worker, 1)) if v != default]
        if given:
            raise InputError(f"{', '.join(given)} only apply with --backend ray",
                             hint="add --backend ray, or drop them (use --threads for the local backend)")
        return None
    if workers is not None and workers < 1:
        raise InputError(f"--workers must be >= 1, got {workers}", hint="e.g. --workers 2, or omit it to fill the cluster")
    if threads_per_worker < 1:
        raise InputError(f"--threads-per-worker must be >= 1, got {threads_per_worker}", hint="e.g. --threads-per-worker 1")
    if gpus_per_worker < 0:
        raise InputError(f"--gpus-per-worker must be >= 0, got {gpus_per_worker}",
                         hint="0 for CPU workers, 1 for one GPU each, 0.5 to pack two on a GPU")
    from ..scoring.ray_backend import RayBackend, require_ray

    require_ray()  # fail before any work with the error naming the extra
    return RayBackend(model, policies, batch_size=batch_size, workers=workers, threads_per_worker=threads_per_worker,
                      gpus_per_worker=gpus_per_worker, address=address,
                      log=lambda line: click.echo(line, err=True))


def build_prompt_rule(templates, chat, aggregate):
    from ..scoring.prompts import PromptRule

    return PromptRule(templates=tuple(templates or ()), chat=bool(chat), aggregate=aggregate)


def resolve_run_inputs(model, *, input_path=None, document_path=None, stride=None, prefix_tokens: int | None,
                       suffix_tokens: int | None, text_field=None, id_field=None, input_format=None, label=None,
                       prefix_field=None, suffix_field=None):
    """Read passages or a document and cut windows -> (WindowSet, inputs dict, skipped_empty, label).
    ``prefix_tokens``/``suffix_tokens`` None (with prefix/suffix fields): the whole field."""
    from ..text.io import read_document, read_passages
    from ..text.windows import passage_windows, sliding_windows

    if document_path is not None:
        if prefix_field is not None or suffix_field is not None:
            raise InputError("--prefix-field/--suffix-field apply to passage files, not to --document",
                             hint="a document is one plain text cut by --stride")
        if stride is None:
            raise InputError("--document needs --stride (in tokens)", hint="e.g. --stride 10")
        text, digest = read_document(document_path)
        ws = sliding_windows(text, model.tokenizer, prefix_tokens=prefix_tokens, suffix_tokens=suffix_tokens,
                             stride=stride, source=Path(document_path).name)
        inputs = {"document": str(document_path), "sha256": digest, "stride": stride, "chars": len(text)}
        return ws, inputs, 0, label or f"document:{Path(document_path).name}"
    if stride is not None:
        raise InputError("--stride applies to --document only", hint="drop --stride, or pass --document FILE")
    ps = read_passages(input_path, fmt=input_format, text_field=text_field, id_field=id_field,
                       prefix_field=prefix_field, suffix_field=suffix_field)
    ws = passage_windows(ps.records, model.tokenizer, prefix_tokens=prefix_tokens, suffix_tokens=suffix_tokens)
    inputs = {"passages": str(input_path), "sha256": ps.sha256, "records": len(ps.records) + ps.skipped_empty}
    if prefix_field is not None:
        inputs.update(prefix_field=prefix_field, suffix_field=suffix_field)
    return ws, inputs, ps.skipped_empty, label or f"passages:{Path(input_path).name}"
