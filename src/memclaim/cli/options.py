"""How every memclaim command presents its options: grouped in ``--help`` (inputs, procedure,
claim, output, execution) and renamed flags that keep working for one release.

click has no option groups (its ``format_options`` writes one "Options" section) and no
deprecated aliases that say which spelling was typed, so :class:`Command` overrides
``format_options`` and ``parse_args``; that is all it does. An option lands in the group its
destination name is listed under in :data:`GROUP_OF`, else in the command's ``default_group``.

Renamed flags (:data:`RENAMED`, written out in docs/renamed-flags.md): the old spelling is
rewritten to the new one before click parses, with one ``note:`` line on stderr saying what to
type instead. Old *values* (``--neighbors replace``) are rewritten the same way.
"""

from __future__ import annotations

import click

from ..api import InputError

GROUPS = ("Inputs", "Procedure", "Claim", "Output", "Execution")

# option destination name -> help group (options not listed: the command's default_group)
GROUP_OF: dict[str, str] = {}
for _group, _names in {
    "Inputs": (
        "input_path",
        "document_path",
        "members_path",
        "controls_path",
        "members",
        "controls",
        "candidates",
        "run",
        "controls_run",
        "documents",
        "pairs",
        "text_field",
        "prefix_field",
        "suffix_field",
        "id_field",
        "score_field",
        "input_format",
        "kind",
        "binary",
        "candidates_procedure",
        "controls_procedure",
        "exclude_file",
        "exclude_ids",
        "references",
        "min_similarity",
        "data",
        "plant_file",
        "forget",
        "retain",
        "spec",
        "reference",
        "trigger",
        "shadow_background",
        "name",
        "list_only",
        "limit",
    ),
    "Procedure": (
        "stride",
        "prefix_tokens",
        "suffix_tokens",
        "policies",
        "prompt_templates",
        "chat_template",
        "aggregate",
        "nv_eps",
        "nv_beams",
        "dtype",
        "sot",
        "extraction_policy",
        "m",
        "attacks",
        "k",
        "shadows",
        "shadow_mode",
        "shadow_base",
        "shadow_steps",
        "shadow_epochs",
        "shadow_lr",
        "shadow_batch_size",
        "shadow_seq_len",
        "shadow_seed",
        "shadow_warmup",
        "design_seed",
        "policy",
        "near_verbatim",
    ),
    "Claim": (
        "alpha",
        "fdr",
        "fwer",
        "seed",
        "budget_delta",
        "realistic_budget",
        "confidence",
        "controls_description",
        "use_global",
        "verifier_threshold",
        "kappa",
        "soundness_epsilon",
        "soundness_neighbors",
        "cap_value",
        "cap_epsilon",
        "cap_neighbors",
        "cap_functional",
        "cap_slack",
        "cap_slack_note",
        "allow_mixed_numerics",
        "estimate",
    ),
    "Output": ("out_dir", "as_json", "no_progress", "overwrite", "quick", "stats"),
    "Execution": (
        "batch_size",
        "unit_size",
        "backend",
        "address",
        "workers",
        "gpus_per_worker",
        "threads_per_worker",
        "threads",
        "allow_pickle",
        "trust_remote_code",
        "physical_batch_size",
        "time_limit",
        "max_nodes",
        "device",
        "device_map",
        "max_memory",
        "offload_folder",
        "url",
        "api_key_env",
        "api_key_file",
        "served_model",
        "max_concurrency",
        "served_bounds",
    ),
}.items():
    for _n in _names:
        GROUP_OF[_n] = _group

# The renamed flags of this release, per command path (as `memclaim X Y`): old flag -> new flag,
# and new flag -> {old value: new value}. The old spellings are removed in the next release.
RENAMED: dict[str, dict[str, str]] = {
    "audit run": {
        "--nonmembers": "--controls",
        "--fpr": "--alpha",
        "--cap-relation": "--cap-neighbors",
        "--soundness-relation": "--soundness-neighbors",
    },
    "test": {
        "--id-column": "--id-field",
        "--score-column": "--score-field",
        "--text-column": "--text-field",
    },
    "train tiny": {"--quiet": "--no-progress"},
    "train finetune": {"--quiet": "--no-progress"},
    "train unlearn": {"--quiet": "--no-progress"},
}
RENAMED_VALUES: dict[str, dict[str, dict[str, str]]] = {
    "audit run": {
        "--cap-neighbors": {"add/remove": "add-remove"},
        "--soundness-neighbors": {"add/remove": "add-remove"},
    },
    "dp bounds": {"--neighbors": {"replace": "replace-one"}},
    "dp plot": {"--neighbors": {"replace": "replace-one"}},
    "dp account": {"--neighbors": {"replace": "replace-one"}},
}

# the one spelling of a neighbouring relation on the command line ([MX] §2: replace-one or add/remove)
NEIGHBORS = ("replace-one", "add-remove")


def deprecation_note(text: str) -> None:
    click.echo(f"note: {text}; the old spelling is removed in the next release", err=True)


class Command(click.Command):
    """A click command whose --help lists options by group and which accepts this release's
    renamed flags (see the module docstring). ``groups`` places this command's own options
    (destination name -> group) before :data:`GROUP_OF`; the rest go to ``default_group``. ``path`` is the command as users type it after
    ``memclaim`` (``"audit run"``): it keys :data:`RENAMED`; default: the command's name."""

    def __init__(
        self,
        *args,
        default_group: str = "Procedure",
        groups: dict | None = None,
        path: str | None = None,
        **kwargs,
    ):
        super().__init__(*args, **kwargs)
        for g in (default_group, *(groups or {}).values()):
            if g not in GROUPS:
                raise ValueError(f"option group {g!r} is not one of {GROUPS}")
        self.default_group = default_group
        self.groups = dict(groups or {})  # this command's own option -> group (over GROUP_OF)
        self.path = path or self.name

    # ---------------------------------------------------------------- help
    def group_of(self, param, ctx=None) -> str:
        if ctx is not None and param is self.get_help_option(ctx):
            return "Output"
        return self.groups.get(param.name) or GROUP_OF.get(param.name, self.default_group)

    def format_options(self, ctx, formatter):
        rows: dict[str, list] = {g: [] for g in GROUPS}
        for param in self.get_params(ctx):
            if not isinstance(param, click.Option):  # arguments are in the usage line
                continue
            rec = param.get_help_record(ctx)
            if rec is not None:
                rows[self.group_of(param, ctx)].append(rec)
        for group in GROUPS:
            if rows[group]:
                with formatter.section(f"{group} options"):
                    formatter.write_dl(rows[group])

    # ---------------------------------------------------------------- renamed flags
    def parse_args(self, ctx, args):
        return super().parse_args(ctx, self.rewrite_renamed(list(args)))

    def _takes_value(self, flag: str) -> int:
        for p in self.params:
            if isinstance(p, click.Option) and flag in p.opts + p.secondary_opts:
                return 0 if (p.is_flag or p.count) else p.nargs
        return 0

    def rewrite_renamed(self, args: list[str]) -> list[str]:
        flags = RENAMED.get(self.path, {})
        values = RENAMED_VALUES.get(self.path, {})
        if not flags and not values:
            return args
        typed = (
            {a.partition("=")[0] for a in args[: args.index("--")] if a.startswith("--")}
            if "--" in args
            else {a.partition("=")[0] for a in args if a.startswith("--")}
        )
        for old, new in flags.items():
            if old in typed and new in typed:
                raise InputError(
                    f"both {old} and {new} are given: {old} is the old name of {new}",
                    hint=f"give {new} once",
                )
        out, i = [], 0
        while i < len(args):
            tok = args[i]
            if tok == "--":
                out.extend(args[i:])
                break
            name, eq, inline = tok.partition("=") if tok.startswith("--") else (tok, "", "")
            if name in flags:
                new = flags[name]
                deprecation_note(f"`memclaim {self.path} {name}` is now {new}")
                name = new
            nargs = self._takes_value(name) if name.startswith("--") else 0
            if eq:
                out.append(f"{name}={self._value(name, inline, values)}")
                i += 1
                continue
            out.append(name)
            vals = args[i + 1 : i + 1 + nargs]
            out.extend(self._value(name, v, values) for v in vals)
            i += 1 + len(vals)
        return out

    def _value(self, flag: str, value: str, values: dict) -> str:
        new = values.get(flag, {}).get(value)
        if new is None:
            return value
        deprecation_note(f"`{flag} {value}` is now `{flag} {new}`")
        return new


class Group(click.Group):
    """A click group whose subcommands are :class:`Command` (path ``"<group> <sub>"``)."""

    command_class = Command

    def command(self, *args, **kwargs):
        name = args[0] if args and isinstance(args[0], str) else kwargs.get("name")
        if name is not None:
            kwargs.setdefault("path", f"{self.name} {name}")
        return super().command(*args, **kwargs)
