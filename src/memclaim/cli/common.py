"""The click options shared by the scoring subcommands (score, population, census, audit), and
printing. What the options mean is the API's (:mod:`memclaim.api`): the commands pass them on."""

from __future__ import annotations

import sys

import click

from ..api import (  # noqa: F401
    DEFAULT_POLICY,
    DEFAULT_PREFIX_TOKENS,
    DEFAULT_SUFFIX_TOKENS,
    INPUT_FORMATS,
    check_batch_size,
    check_out_dir,
    dumps,
    parse_policies,
    set_threads,
)

#: what a passage input may be (the help of --input, --members, --controls, ...)
PASSAGE_INPUTS = "JSONL/TXT/CSV/Parquet/Arrow file, or a folder written by datasets' save_to_disk"


def print_json(obj) -> None:
    """``obj`` as indented strict JSON on stdout (what every ``--json`` prints)."""
    sys.stdout.write(dumps(obj, indent=1) + "\n")


def stderr_log(enabled: bool = True):
    """A ``log`` callback writing one line to stderr (None when not ``enabled``, e.g. with --json)."""
    return (lambda msg: click.echo(msg, err=True)) if enabled else None


def _policies(ctx, param, value):
    return parse_policies(value or (DEFAULT_POLICY,))


def procedure_options(f):
    """--prefix-tokens --suffix-tokens --policy --prompt-template --chat-template --aggregate + input fields
    (--text-field --prefix-field --suffix-field --id-field --format). The API turns omitted lengths
    into the defaults (:func:`memclaim.api._common.window_lengths`)."""
    opts = [
        click.option(
            "--prefix-tokens",
            type=int,
            default=None,
            help=f"Natural-prefix length in tokens [default: {DEFAULT_PREFIX_TOKENS}; with --prefix-field: "
            "the whole field, or its last N tokens].",
        ),
        click.option(
            "--suffix-tokens",
            type=int,
            default=None,
            help=f"Target suffix length in tokens [default: {DEFAULT_SUFFIX_TOKENS}; with --suffix-field: the "
            "whole field, or its first N tokens]. Under a --prompt-template it selects the suffix text; "
            "the target is that text tokenized after the prompt.",
        ),
        click.option(
            "--policy",
            "policies",
            multiple=True,
            callback=_policies,
            help="Decoding policy (repeatable): full, greedy, temperature:T, top-k:K, top-p:P or a "
            f"combination like top-k:40,temperature:0.7. Default {DEFAULT_POLICY}.",
        ),
        click.option(
            "--prompt-template",
            "prompt_templates",
            multiple=True,
            help="Prompt rule f_P: a template filled with {prefix}/{suffix} text (repeatable: several "
            "prompts per candidate). Default: the natural prefix.",
        ),
        click.option(
            "--chat-template", is_flag=True, help="Wrap each prompt in the model's chat template."
        ),
        click.option(
            "--aggregate",
            type=click.Choice(["max", "mean"]),
            default="max",
            show_default=True,
            help="Aggregate over several prompts ([EM] Eq. 15).",
        ),
        click.option(
            "--text-field",
            default=None,
            help="Field holding the text (JSONL/CSV/Parquet/Arrow/datasets).",
        ),
        click.option(
            "--prefix-field",
            default=None,
            help="Field holding each record's prefix (JSONL/CSV/Parquet/Arrow/datasets; with --suffix-field): prefix and "
            "suffix are tokenized together and cut where the suffix starts, so a target can start a "
            "sentence.",
        ),
        click.option(
            "--suffix-field",
            default=None,
            help="Field holding each record's suffix, the target (with --prefix-field; the whole field "
            "unless --suffix-tokens cuts it).",
        ),
        click.option("--id-field", default=None, help="Field holding the record id."),
        click.option(
            "--format",
            "input_format",
            type=click.Choice(INPUT_FORMATS),
            default=None,
            help="Input format (default: from the extension; a folder is a datasets folder).",
        ),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def _warn_remote_code(ctx, param, value):
    if value:
        click.echo(
            "warning: --trust-remote-code runs the Python code in the model folder (its auto_map classes) "
            "with your permissions; use it only for a folder whose code you have read or trust",
            err=True,
        )
    return bool(value)


def trust_remote_code_option(f):
    """--trust-remote-code: the explicit opt-in to run a model folder's own Python code."""
    return click.option(
        "--trust-remote-code",
        "trust_remote_code",
        is_flag=True,
        callback=_warn_remote_code,
        help="Run the model folder's own Python code (config.json auto_map); refused without this "
        "flag. The code runs with your permissions: use only for code you trust.",
    )(f)


_PLACEMENT = "memclaim.placement"


def _placement_value(name: str):
    def store(ctx, param, value):
        if name == "max_memory":
            value = tuple(value) or None
        ctx.meta.setdefault(_PLACEMENT, {})[name] = value
        return value

    return store


def placement_options(f):
    """--device --device-map --max-memory --offload-folder: where the model's weights live and run
    (memclaim.models.placement). The values reach the command through :func:`placement_kwargs`, so
    every model-loading command takes the same group and passes it to the API as it is."""
    opts = [
        click.option(
            "--device",
            default="auto",
            show_default=True,
            expose_value=False,
            callback=_placement_value("device"),
            help="auto (the first GPU when one is present, else the CPU), cpu, cuda or cuda:N. The device "
            "class (cpu, cuda) and the dtype are part of the procedure: scores from different ones are "
            "never mixed silently.",
        ),
        click.option(
            "--device-map",
            type=click.Choice(["auto"]),
            default=None,
            expose_value=False,
            callback=_placement_value("device_map"),
            help="auto: shard the model over the visible GPUs and offload what does not fit to CPU memory, "
            "then to --offload-folder (accelerate's big-model inference); the unembedding stays on the "
            "first compute device.",
        ),
        click.option(
            "--max-memory",
            multiple=True,
            metavar="DEVICE=SIZE",
            expose_value=False,
            callback=_placement_value("max_memory"),
            help="With --device-map auto: the memory a device may hold, e.g. cuda:0=20GiB, 1=20GiB, "
            "cpu=64GB (repeatable).",
        ),
        click.option(
            "--offload-folder",
            type=click.Path(file_okay=False),
            default=None,
            expose_value=False,
            callback=_placement_value("offload_folder"),
            help="With --device-map auto: a folder for the layers that fit neither the GPUs nor the CPU "
            "(memclaim writes them in a new subfolder there and removes it at exit). Without it, a "
            "model too large for --max-memory is refused before any scoring.",
        ),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def train_device_option(f):
    """--device for the training commands: where the model trains (float32). No --device-map:
    accelerate's big-model inference places a model for inference, not for training."""
    return click.option(
        "--device",
        default="auto",
        show_default=True,
        help="auto (the first GPU when one is present, else the CPU), cpu, cuda or cuda:N; the "
        "manifest records it (a GPU's numerics give a different model from the same seeds). "
        "Training does not shard a model over devices (no --device-map).",
    )(f)


def placement_kwargs() -> dict:
    """The placement options of the running command, as the API's keywords (device, device_map,
    max_memory, offload_folder)."""
    got = click.get_current_context().meta.get(_PLACEMENT, {})
    return {k: got.get(k) for k in ("device", "device_map", "max_memory", "offload_folder")}


def _numerics_value(ctx, param, value):
    ctx.meta["memclaim.allow_mixed_numerics"] = bool(value)
    return value


def numerics_option(f):
    """--allow-mixed-numerics: declare scores computed on different device classes or dtypes comparable."""
    return click.option(
        "--allow-mixed-numerics",
        is_flag=True,
        expose_value=False,
        callback=_numerics_value,
        help="Compare scores computed on different device classes (cpu, cuda) or dtypes, which are "
        "refused otherwise (their numerics differ); the report states it.",
    )(f)


def allow_mixed_numerics() -> bool:
    """Whether the running command was given --allow-mixed-numerics."""
    return bool(click.get_current_context().meta.get("memclaim.allow_mixed_numerics", False))


def model_options(f):
    opts = [
        click.option(
            "--dtype",
            type=click.Choice(["auto", "float32", "bfloat16", "float16", "float64"]),
            default="auto",
            show_default=True,
            help="Body dtype; auto: bfloat16 on a GPU, float32 on the CPU (the unembedding and log-softmax "
            "always run in float32+).",
        ),
        placement_options,
        click.option(
            "--sot",
            default=None,
            help="Start-of-text rule: auto, none, bos, eos, a token or ids (default: per model; "
            "smollm2 uses <|endoftext|>, gemma3-270m its <bos>).",
        ),
        click.option(
            "--allow-pickle",
            is_flag=True,
            help="Allow loading pickle checkpoints (can run arbitrary code).",
        ),
        trust_remote_code_option,
        click.option("--threads", type=int, default=None, help="Torch CPU threads."),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def near_verbatim_options(f):
    """--near-verbatim EPS (repeatable) and --beam B (repeatable) ([EM] App. B.1 Eq. 2, §6)."""
    opts = [
        click.option(
            "--near-verbatim",
            "nv_eps",
            type=int,
            multiple=True,
            help="Also compute the certified near-verbatim lower bound on q(B_eps(s) | p) for token edit "
            "distance EPS ([EM] App. B.1 Eq. 2); repeatable (the union over settings is reported).",
        ),
        click.option(
            "--beam",
            "nv_beams",
            type=int,
            multiple=True,
            help="Beam width(s) for --near-verbatim (default 16; 800 is the paper's baseline, about a "
            "minute per window on SmolLM2 on 2 cores).",
        ),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def claim_options(f):
    """The population-test options shared by ``test`` and ``population``: decontamination ([EM] D.2),
    multiple testing ([EM] C.5), the tie-breaking seed, the budget view ([EM] F.2), intervals, and
    the description of the controls that goes in the report."""
    opts = [
        click.option(
            "--exclude-controls",
            "exclude_file",
            type=click.Path(dir_okay=False),
            default=None,
            help="File with control ids verified as members, one per line ([EM] D.2). For a store: "
            "record ids (passages) or window ids ('doc.txt#3').",
        ),
        click.option(
            "--exclude-control",
            "exclude_ids",
            multiple=True,
            help="A control id to exclude (repeatable).",
        ),
        click.option(
            "--fdr", "fdr", default=None, help="Benjamini-Hochberg at this FDR level ([EM] C.5)."
        ),
        click.option(
            "--fwer", "fwer", default=None, help="Bonferroni at this FWER level ([EM] C.5)."
        ),
        click.option(
            "--seed",
            default=0,
            show_default=True,
            type=int,
            help="Seed for randomized tie-breaking (recorded).",
        ),
        click.option(
            "--budget-delta",
            default=None,
            type=float,
            help="Add the budget view at confidence 1 - delta ([EM] F.2).",
        ),
        click.option(
            "--budget",
            "realistic_budget",
            default=1e5,
            show_default=True,
            type=float,
            help="Realistic query budget n.",
        ),
        click.option(
            "--confidence",
            default=0.95,
            show_default=True,
            type=float,
            help="Confidence of the intervals.",
        ),
        click.option(
            "--controls-description",
            default=None,
            help="How the controls were chosen and matched (goes in the report).",
        ),
        numerics_option,
    ]
    for o in reversed(opts):
        f = o(f)
    return f


class BatchSizeType(click.ParamType):
    """--batch-size: a whole number >= 1 or 'auto' (validate.batch_size says what each means)."""

    name = "N|auto"

    def convert(self, value, param, ctx):
        text = str(value).strip()
        try:  # validate.batch_size decides; a DomainError and int()'s error are both ValueErrors
            return check_batch_size(text if text.lower() == "auto" else int(text))
        except ValueError:
            self.fail(f"{value!r} is not a whole number >= 1 or 'auto'", param, ctx)


BATCH_SIZE = BatchSizeType()
BATCH_SIZE_HELP = (
    "Windows per forward pass, or 'auto': on a GPU the largest batch whose activations fit 80% of "
    "its free memory, on the CPU 16 (scores are the same at every batch size on the CPU)."
)


LIMIT_HELP = (
    "Score only the first N texts (a document: its first N windows): a quick look at a big input. "
    "The run is labelled [:N] and its report says it is limited."
)


def limit_option(f):
    """--limit N: only the first N texts (or a document's first N windows) are scored (every
    scoring command; the API's ``limit``)."""
    return click.option(
        "--limit", type=click.IntRange(min=1), default=None, metavar="N", help=LIMIT_HELP
    )(f)


def run_options(f):
    """--limit --batch-size --unit-size --json --no-progress: how much of the input is scored, how
    a scoring run is cut and how it is reported (score, population, census)."""
    opts = [
        limit_option,
        click.option(
            "--batch-size", type=BATCH_SIZE, default=16, show_default=True, help=BATCH_SIZE_HELP
        ),
        click.option(
            "--unit-size",
            type=int,
            default=64,
            show_default=True,
            help="Windows per work unit (the unit of resume and of distribution).",
        ),
        click.option("--json", "as_json", is_flag=True, help="Print a machine-readable summary."),
        click.option("--no-progress", is_flag=True, help="No progress bar."),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


# What each statistic costs: benchmarks/profile_scoring.py (issue 30), CPU seconds per 1,000
# scored target tokens, windows of 50 + 50 tokens, float32, 2 threads on a 2-core AMD EPYC (Zen 3);
# each statistic computed alone over the engine's blocks (greedy+margin cost nothing more when a
# top-K policy at temperature 1 is scored: one topk serves both). docs/devices.md has the table.
STATS_HELP = (
    "Statistics to compute and store, joined with '+': policy_logq (log q under every --policy), greedy (the "
    "greedy-match flag), margin (the top-1/top-2 logit margin), token_logprob (per-token log p: loss, min-k%), "
    "token_moments (per-token mean and std of log p: min-k%++), rank (the target's rank); or the sets 'all' "
    "and 'census' (policy_logq+greedy+margin, always kept). Measured cost, CPU seconds per 1,000 scored "
    "tokens of 50+50-token windows on a 2-core AMD EPYC, Gemma 3 270M / SmolLM2-135M: the forward pass "
    "and unembedding every run pays 11.1 / 6.8; policy_logq under greedy, top-k:40, temperature:0.7 "
    "1.6 / 0.23; greedy+margin 0.61 / 0.09 (free beside a top-k policy); token_logprob 0.41 / 0.08; "
    "token_moments 1.6 / 0.48; rank 0.35 / 0.05."
)


def stats_option(default: str | None):
    """--stats SET: the statistics a scoring command computes and stores (its default: ``default``;
    None: every one the backend computes, i.e. 'all' locally and what a served model's answers give)."""
    if default is None:
        return click.option(
            "--stats",
            "stats",
            default=None,
            metavar="SET",
            help=STATS_HELP + " [default: all; with --backend openai, every statistic the "
            "server's answers give]",
        )
    return click.option(
        "--stats", "stats", default=default, show_default=True, metavar="SET", help=STATS_HELP
    )


_SERVED = "memclaim.served"


def _served_value(name: str):
    def store(ctx, param, value):
        ctx.meta.setdefault(_SERVED, {})[name] = value
        return value

    return store


def backend_options(f):
    """--backend --address --workers --gpus-per-worker --threads-per-worker (distributed scoring);
    --url --api-key-env --api-key-file --served-model --max-concurrency (a served model)."""
    opts = [
        click.option(
            "--backend",
            type=click.Choice(["local", "ray", "openai"]),
            default="local",
            show_default=True,
            help="Where units are scored: this process, a pool of Ray actors (pip install "
            "'memclaim[ray]'), or an OpenAI-compatible server (vLLM, SGLang, llama-cpp-python; "
            "docs/served.md); all write the same store. See docs/distributed.md.",
        ),
        click.option(
            "--address",
            default=None,
            help="Ray cluster address (host:port, or 'auto'); default: start a local cluster.",
        ),
        click.option(
            "--workers",
            type=int,
            default=None,
            help="Ray workers (actors), each loading the model once. Default: fill the cluster.",
        ),
        click.option(
            "--gpus-per-worker",
            type=float,
            default=0.0,
            show_default=True,
            help="GPUs per Ray worker (0 = CPU; 0.5 packs two workers per GPU).",
        ),
        click.option(
            "--threads-per-worker",
            type=int,
            default=1,
            show_default=True,
            help="Torch CPU threads (and Ray CPUs) per Ray worker.",
        ),
    ]
    for o in reversed(opts + _served_opts()):
        f = o(f)
    return f


def served_backend_options(f):
    """--backend local|openai and the served model's options (:func:`backend_options` without
    Ray's), for the commands that score locally or through a server only (audit)."""
    opts = [
        click.option(
            "--backend",
            type=click.Choice(["local", "openai"]),
            default="local",
            show_default=True,
            help="Where the model runs: this process, or an OpenAI-compatible server (vLLM, "
            "SGLang, llama-cpp-python; docs/served.md).",
        )
    ]
    for o in reversed(opts + _served_opts()):
        f = o(f)
    return f


def _served_opts() -> list:
    return [
        # the served model's options reach the command through served_kwargs() (no new parameters)
        click.option(
            "--url",
            default=None,
            expose_value=False,
            callback=_served_value("url"),
            help="With --backend openai: the server's base URL, e.g. http://127.0.0.1:8000.",
        ),
        click.option(
            "--api-key-env",
            default=None,
            metavar="NAME",
            expose_value=False,
            callback=_served_value("api_key_env"),
            help="With --backend openai: the environment variable holding the server's API key "
            "(never the key itself).",
        ),
        click.option(
            "--api-key-file",
            default=None,
            type=click.Path(dir_okay=False),
            metavar="PATH",
            expose_value=False,
            callback=_served_value("api_key_file"),
            help="With --backend openai: a file whose first line is the API key.",
        ),
        click.option(
            "--served-model",
            default=None,
            metavar="NAME",
            expose_value=False,
            callback=_served_value("served_model"),
            help="With --backend openai: the server's name of the model (default: the one it serves).",
        ),
        click.option(
            "--max-concurrency",
            type=int,
            default=None,
            expose_value=False,
            callback=_served_value("max_concurrency"),
            help="With --backend openai: requests in flight at once [default: 4].",
        ),
    ]


def served_kwargs() -> dict:
    """The served-model options of the running command (:func:`backend_options`) as the API's
    keywords (url, api_key_env, api_key_file, served_model, max_concurrency)."""
    got = click.get_current_context().meta.get(_SERVED, {})
    out = {
        k: got.get(k)
        for k in ("url", "api_key_env", "api_key_file", "served_model", "max_concurrency")
    }
    if "served_bounds" in got:  # score's own flag
        out["served_bounds"] = bool(got["served_bounds"])
    return out


def served_bounds_option(f):
    """--served-bounds (score): store certified bounds where a server's top-K gives no exact score."""
    return click.option(
        "--served-bounds",
        is_flag=True,
        default=False,
        expose_value=False,
        callback=_served_value("served_bounds"),
        help="With --backend openai: accept policies a server's top-K log-probs give only certified "
        "bounds for (temperature without truncation) and store the bounds; a test never reads "
        "them as scores.",
    )(f)
