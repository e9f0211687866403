"""The JSON spec of the audit-disagreement table ([MX] Fig. 12): its format
(:data:`TABLE_SPEC_DOC`), and reading and checking it before any model work
(:func:`read_table_spec`). The table is run by :mod:`memclaim.audits.table_run`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError
from ..jsonutil import read_json_object

__all__ = [
    "TABLE_SPEC_DOC",
    "TABLE_COLUMNS",
    "TABLE_SETTINGS",
    "TableSpec",
    "read_table_spec",
    "baseline_kwargs",
]

TABLE_SPEC_DOC = """\
SPEC.json for `memclaim audit table` (paths relative to the file's folder):

{
  "settings": {"prefix_tokens": 50, "suffix_tokens": 50, "confidence": 0.95,
               "verifier_threshold": 0.15, "shadows": 0},            (all optional; these
                                                                      are the defaults)
  "instances": [
    {"name": "naive duplicate",                                      (row label, unique)
     "model": "runs/model-a",                                        (model spec or folder)
     "members": "secrets.jsonl", "controls": "heldout.jsonl",        (text files)
     "prefix_tokens": 16, "suffix_tokens": 16,                       (optional overrides)
     "shadows": 8,                                                   (optional: adds the LiRA cell)
     "verifier_model": "runs/model-a-unlearned",                     (optional: the verifier runs here)
     "baseline": {"kappa": 0.32} or {"successes": 15, "trials": 48}, (optional prior baseline)
     "informed": {"successes": 46, "trials": 48, "cap": 0.0625}},    (optional ground truth)
    {"name": "pre-scored",
     "members_run": {"store": "runs/s", "run": "members"},           (already-scored runs instead
     "controls_run": {"store": "runs/s", "run": "controls"}}          of model + files)
  ]
}

Columns: extraction at prefix (greedy rate of the members from their own prefix), loss-MIA
(AUC of the loss attack as 2 AUC - 1), LiRA (online, when shadows are given), unlearning
verifier (recovered fraction under the verifier, on verifier_model if given), informed recovery
(the given ground-truth counts). A baseline turns rate cells into "guessed" when the prior alone
matches the rate ([MX] Cor. 5.3). The keys "nonmembers" and "nonmembers_run" (before 0.2) are
still read, with a DeprecationWarning.
"""

# keys renamed in 0.2 (the CLI's --nonmembers became --controls): new -> the name the runner reads
_RENAMED_KEYS = {"controls": "nonmembers", "controls_run": "nonmembers_run"}
_SHOWN = {old: new for new, old in _RENAMED_KEYS.items()}

TABLE_COLUMNS = (
    "extraction at prefix",
    "loss-MIA",
    "LiRA",
    "unlearning verifier",
    "informed recovery",
)
TABLE_SETTINGS = frozenset(
    {"prefix_tokens", "suffix_tokens", "confidence", "verifier_threshold", "shadows", "k", "fpr"}
)


@dataclass(frozen=True)
class TableSpec:
    """A checked spec: the global ``settings``, the ``instances`` (dicts as written) and the folder
    that relative paths are read from."""

    settings: dict
    instances: tuple
    base: Path

    def path(self, v) -> Path:
        """A path of the spec: absolute as given, else relative to the spec's folder."""
        q = Path(v)
        return q if q.is_absolute() else self.base / q


def baseline_kwargs(spec: dict | None, name: str) -> dict:
    """An instance's prior baseline as the rate cells' keyword arguments ([MX] Cor. 5.3).

    >>> baseline_kwargs({"kappa": 0.32}, "a"), baseline_kwargs({"successes": 15, "trials": 48}, "b")
    ({'baseline': 0.32}, {'baseline_successes': 15, 'baseline_trials': 48})
    """
    if not spec:
        return {}
    if not isinstance(spec, dict):
        raise InputError(f"instance {name!r}: baseline must be an object, got {spec!r}")
    if "kappa" in spec:
        return {"baseline": spec["kappa"]}
    if "successes" in spec and "trials" in spec:
        return {"baseline_successes": spec["successes"], "baseline_trials": spec["trials"]}
    raise InputError(
        f"instance {name!r}: baseline needs 'kappa' or 'successes' and 'trials', got {spec!r}"
    )


def read_table_spec(spec: Mapping | str | Path, *, base_dir: str | Path | None = None) -> TableSpec:
    """Read (a JSON file) and check a spec (:data:`TABLE_SPEC_DOC`) before any model work: unknown
    settings, a missing or duplicate name, an instance without a model and texts or pre-scored
    runs, a malformed baseline or ground truth are refused, naming the instance.

    >>> s = read_table_spec({"instances": [{"name": "dup", "model": "toy", "members": "m.jsonl",
    ...                                     "controls": "n.jsonl"}]}, base_dir="specs")
    >>> s.instances[0]["name"], s.path("m.jsonl")
    ('dup', PosixPath('specs/m.jsonl'))
    """
    if isinstance(spec, (str, Path)):
        p = Path(spec)
        data = read_json_object(p, "instances", hint=TABLE_SPEC_DOC)
        base = Path(base_dir) if base_dir is not None else p.parent
    else:
        data, base = dict(spec), Path(base_dir or ".")
    if (
        not isinstance(data, dict)
        or not isinstance(data.get("instances"), list)
        or not data["instances"]
    ):
        raise InputError(
            "the instances spec must be an object with a non-empty list 'instances'",
            hint=TABLE_SPEC_DOC,
        )
    gs = dict(data.get("settings") or {})
    bad = set(gs) - TABLE_SETTINGS
    if bad:
        raise InputError(f"unknown settings {sorted(bad)}", hint=f"known: {sorted(TABLE_SETTINGS)}")
    names = []
    instances = []
    for j, inst in enumerate(data["instances"]):
        if (
            not isinstance(inst, dict)
            or not isinstance(inst.get("name"), str)
            or not inst["name"].strip()
        ):
            raise InputError(f"instance {j} needs a 'name'", hint=TABLE_SPEC_DOC)
        inst = _current_keys(inst)
        instances.append(inst)
        name = inst["name"]
        if name in names:
            raise InputError(f"duplicate instance name {name!r}")
        names.append(name)
        if "members_run" in inst or "nonmembers_run" in inst:
            for key in ("members_run", "nonmembers_run"):
                if not isinstance(inst.get(key), dict) or "store" not in inst[key]:
                    raise InputError(
                        f"instance {name!r}: {_SHOWN.get(key, key)} needs 'store' (and 'run')",
                        hint=TABLE_SPEC_DOC,
                    )
        else:
            for key in ("model", "members", "nonmembers"):
                if key not in inst:
                    raise InputError(
                        f"instance {name!r} lacks {_SHOWN.get(key, key)!r}", hint=TABLE_SPEC_DOC
                    )
        baseline_kwargs(inst.get("baseline"), name)
        inf = inst.get("informed")
        if inf and (not isinstance(inf, dict) or "successes" not in inf or "trials" not in inf):
            raise InputError(
                f"instance {name!r}: informed needs 'successes' and 'trials' (and optional 'cap')"
            )
    return TableSpec(settings=gs, instances=tuple(instances), base=base)


def _current_keys(inst: dict) -> dict:
    """An instance with the documented keys ("controls", "controls_run") under the names the runner
    reads; the old keys still work for one release, with a DeprecationWarning."""
    import warnings

    out = dict(inst)
    for new, old in _RENAMED_KEYS.items():
        if new in out and old in out:
            raise InputError(
                f"instance {inst['name']!r} gives both {new!r} and its old name {old!r}",
                hint=f"keep {new!r} only",
            )
        if new in out:
            out[old] = out.pop(new)
        elif old in out:
            warnings.warn(
                f"the table spec key {old!r} is now {new!r}; the old name is removed in the next release",
                DeprecationWarning,
                stacklevel=3,
            )
    return out
