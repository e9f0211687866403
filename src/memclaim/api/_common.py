"""What the scoring operations of the API share: inputs (files, lists, tables, documents) cut into
windows, window lengths, near-verbatim settings, the scoring backend, threads, output folders,
and the base of every result (``to_dict``, ``to_pandas``, ``save``).

Error messages name options as the CLI spells them (``--batch-size`` for ``batch_size``): the
CLI is a thin layer over these functions, and both say the same thing.
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..decoding import Policy, parse_policies
from ..errors import InputError, PolicyError
from ..fsutil import sha256_bytes
from ..jsonutil import dumps, to_jsonable
from ..procedure import DEFAULT_POLICY, NearVerbatim
from ..report.core import Doc, check_report_folder, invocation_text, invoked_as, render_fragment
from ..runtime import Runtime
from ..scoring.backends import Backend, backend_names
from ..scoring.backends import make_backend as registry_make_backend
from ..scoring.prompts import PromptRule
from ..scoring.runner import normalize_near_verbatim
from ..scoring.served.backend import DEFAULT_BATCH_WINDOWS, DEFAULT_MAX_CONCURRENCY, OpenAIBackend
from ..scoring.served.model import ServedModel
from ..scoring.store import foreign_entries
from ..text.io import check_unicode, read_document, read_passages, text_key
from ..text.tables import passages_from_object
from ..text.windows import passage_windows, sliding_windows
from ._options import (
    DEFAULT_PREFIX_TOKENS,
    DEFAULT_SUFFIX_TOKENS,
    check_out_dir,
    set_threads,
    window_lengths,
)

__all__ = [
    "Document",
    "DEFAULT_PREFIX_TOKENS",
    "DEFAULT_SUFFIX_TOKENS",
    "DEFAULT_POLICY",
    "window_lengths",
    "policies_of",
    "one_policy",
    "check_out_dir",
    "check_out",
    "set_threads",
    "near_verbatim_settings",
    "make_backend",
    "build_prompt_rule",
    "cut_windows",
    "check_limit",
    "limited_label",
    "Result",
    "WorkFolder",
]


@dataclass(frozen=True)
class Document:
    """A document given as text rather than as a file path (``score(document=...)``, ``census``).

    >>> Document("In the beginning ...", name="genesis").name
    'genesis'
    """

    text: str
    name: str = "document"

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise InputError(
                f"a Document's name must be a non-empty string, got {self.name!r}",
                hint="e.g. Document(text, name='genesis')",
            )
        check_unicode(self.name, "the document's name")
        if not isinstance(self.text, str) or not self.text.strip():
            raise InputError(
                f"document {self.name!r} is empty or not a text", hint="pass the document's text"
            )
        check_unicode(self.text, "the text", f"document {self.name!r}")


def document_path(x, what: str = "document") -> Path:
    """A document given as a path: refused, saying how to pass a text in memory, when no such
    file exists (a string is a path; :class:`Document` holds a text)."""
    p = Path(x)
    if not p.exists():
        shown = str(x) if len(str(x)) <= 80 else str(x)[:77] + "..."
        raise InputError(
            f"{what} file {shown!r} does not exist",
            hint="pass the path of a text file, or memclaim.Document(text, name=...) for a text in memory",
        )
    return p


def check_out(
    out, *, store: str | None = None, report: bool = False, option: str = "--out"
) -> Path:
    """Everything about an output folder that can fail, checked before any work
    (:func:`check_out_dir`): with ``store`` (``""``: the folder itself, ``"store"``: a subfolder)
    the score store there is new, empty or memclaim's (a folder of other files is never written
    into, nor its temporary files swept); with ``report`` no report file or figure there is
    someone else's (:func:`memclaim.report.core.check_report_folder`).

    >>> check_out("runs/new", store="")  # doctest: +SKIP
    PosixPath('runs/new')
    """
    p = check_out_dir(out, option)
    if store is not None:
        where = p / store if store else p
        foreign = foreign_entries(where)
        if foreign:
            shown = ", ".join(repr(x) for x in foreign[:3]) + (
                f" and {len(foreign) - 3} more" if len(foreign) > 3 else ""
            )
            what = (
                f"{option} {str(out)!r}"
                if not store
                else f"{str(where)!r} (the store of {option} {str(out)!r})"
            )
            raise InputError(
                f"{what} is a folder memclaim did not make: it holds {shown} and no memclaim "
                "manifest.json, so memclaim does not write (or clean up temporary files) there",
                hint=f"choose a new or empty folder for {option}, or the {option} folder of an earlier "
                "memclaim run",
            )
    if report:
        check_report_folder(p)
    return p


def policies_of(policies) -> tuple[Policy, ...]:
    """Decoding policies from a spec string, Policy objects or a sequence of either; None is the
    default (top-k:40). An empty sequence names no policy and is refused: it must not silently
    mean the default (issue 25).

    >>> [p.spec for p in policies_of(["full", "greedy"])], policies_of(None)[0].spec
    (['full', 'greedy'], 'top-k:40')
    """
    if policies is None:
        policies = (DEFAULT_POLICY,)
    elif isinstance(policies, (str, Policy)):
        policies = (policies,)
    else:
        try:
            policies = list(policies)
        except TypeError:
            raise PolicyError(
                f"policies must be a policy string or a list of them, got {type(policies).__name__} "
                f"{policies!r}",
                hint="e.g. policies=['top-k:40', 'greedy']",
            ) from None
        if not policies:
            raise PolicyError(
                "policies=[] names no decoding policy",
                hint=f"name at least one, e.g. policies=['top-k:40'], or leave policies out for "
                f"the default {DEFAULT_POLICY}",
            )
    bad = [p for p in policies if not isinstance(p, (str, Policy))]
    if bad:
        raise PolicyError(
            f"a decoding policy is a string such as 'top-k:40', got {type(bad[0]).__name__} {bad[0]!r}",
            hint="e.g. policies=['full', 'greedy', 'temperature:0.7']",
        )
    return parse_policies(policies)


def one_policy(policies, *, what: str, default: str | None = None) -> str | None:
    """The one policy of a function that uses one (``test``, ``audit``), from ``policies`` given as
    everywhere else: a spec string (a combination such as 'top-k:40,temperature:0.7' is one
    policy), a Policy, or a sequence of one of them; None (or an empty sequence) -> ``default``.

    >>> one_policy(["full"], what="test"), one_policy("top-k:40", what="test"), one_policy(None, what="test")
    ('full', 'top-k:40', None)
    """
    if policies is None or (not isinstance(policies, (str, Policy)) and len(policies) == 0):
        return default
    if isinstance(policies, (str, Policy)):
        return policies.spec if isinstance(policies, Policy) else policies
    items = list(policies)
    if len(items) > 1:
        raise InputError(
            f"{what} uses one policy, got {len(items)}: {', '.join(map(str, items))}",
            hint=f"pass one, e.g. policies={str(items[0])!r} (score every policy first with "
            "memclaim.score(..., policies=[...]) and call it once per policy)",
        )
    x = items[0]
    return x.spec if isinstance(x, Policy) else str(x)


def near_verbatim_settings(nv_eps: Sequence[int] = (), nv_beams: Sequence[int] = ()) -> dict | None:
    """Near-verbatim epsilons and beams ([EM] App. B.1 Eq. 2, §6) as run_scoring's argument: each
    a whole number or a list of them (a string such as '12' is refused, not read as [1, 2]).

    >>> near_verbatim_settings([2, 1], 8)
    {'epsilons': [1, 2], 'beams': [8]}
    """
    nv = NearVerbatim.of(nv_eps, nv_beams)  # the procedure value's parsing, defaults and checks
    return None if nv is None else normalize_near_verbatim(nv.to_dict(), suffix_tokens=0)


def make_backend(
    model,
    policies,
    *,
    backend: str = "local",
    address=None,
    workers=None,
    gpus_per_worker=0.0,
    threads_per_worker=1,
    batch_size: int | str = 16,
    log=None,
    url: str | None = None,
    api_key_env: str | None = None,
    api_key_file=None,
    served_model: str | None = None,
    max_concurrency: int | None = None,
    served_bounds: bool = False,
) -> Backend:
    """The scoring backend the options ask for. A served model's backend (``openai``) connects
    and probes the server here, before any work; ``local``, ``ray`` and any registered backend
    are built from the runtime the options make (:class:`memclaim.runtime.Runtime`) by the
    registry (:func:`memclaim.scoring.backends.make_backend`)."""
    if backend != "openai" and backend not in backend_names():
        raise InputError(
            f"unknown backend {backend!r}",
            hint=f"one of {', '.join([*backend_names(), 'openai'])} "
            "(memclaim.scoring.backends.register_backend adds one)",
        )
    served = [
        name
        for name, v, default in (
            ("--url", url, None),
            ("--api-key-env", api_key_env, None),
            ("--api-key-file", api_key_file, None),
            ("--served-model", served_model, None),
            ("--max-concurrency", max_concurrency, None),
            ("--served-bounds", served_bounds, False),
        )
        if v != default
    ]
    if backend != "openai" and served:
        raise InputError(
            f"{', '.join(served)} {'applies' if len(served) == 1 else 'apply'} only with --backend openai",
            hint="add --backend openai --url URL to score through a server, or drop them",
        )
    if backend == "openai":
        given = [
            name
            for name, v, default in (
                ("--address", address, None),
                ("--workers", workers, None),
                ("--gpus-per-worker", gpus_per_worker, 0.0),
                ("--threads-per-worker", threads_per_worker, 1),
            )
            if v != default
        ]
        if given:
            raise InputError(f"{', '.join(given)} only apply with --backend ray", hint="drop them")
        if url is None:
            raise InputError(
                "--backend openai needs --url",
                hint="e.g. --url http://127.0.0.1:8000 (docs/served.md)",
            )
        if not isinstance(model, ServedModel):
            raise InputError(
                f"a served model is named by its tokenizer folder or a name, not {type(model).__name__}",
                hint="pass the folder holding the served model's tokenizer.json, or a named model",
            )
        b = OpenAIBackend(
            url,
            model,
            policies,
            served_model=served_model,
            api_key_env=api_key_env,
            api_key_file=api_key_file,
            max_concurrency=DEFAULT_MAX_CONCURRENCY if max_concurrency is None else max_concurrency,
            batch_windows=batch_size if isinstance(batch_size, int) else DEFAULT_BATCH_WINDOWS,
            bounds=served_bounds,
            log=log,
        )
        b.connect()
        return b
    runtime = Runtime.options(
        backend=backend,
        address=address,
        workers=workers,
        gpus_per_worker=gpus_per_worker,
        threads_per_worker=threads_per_worker,
        batch_size=batch_size,
    )
    return registry_make_backend(model, policies, runtime, log=log)


def build_prompt_rule(templates=(), chat: bool = False, aggregate: str = "max") -> PromptRule:
    """The prompt rule f_P: the natural prefix, or templates filled with {prefix}/{suffix} ([EM] Eq. 15)."""
    if isinstance(templates, str):
        templates = (templates,)
    try:
        templates = tuple(templates or ())
    except TypeError:
        raise InputError(
            f"prompt_templates must be a template string or a list of them, got "
            f"{type(templates).__name__} {templates!r}",
            hint="e.g. prompt_templates=['Continue: {prefix}']",
        ) from None
    return PromptRule(templates=templates, chat=bool(chat), aggregate=aggregate)


def check_limit(limit) -> int | None:
    """``--limit N`` (score only the first N texts, or the first N windows of a document): a whole
    number >= 1, or None for everything.

    >>> check_limit(None), check_limit(10)
    (None, 10)
    """
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InputError(
            f"--limit must be a whole number >= 1, got {limit!r}",
            hint="e.g. --limit 10 to score the first 10 texts (or a document's first 10 windows); "
            "omit it to score everything",
        )
    return limit


def limited_label(label: str, limit: int | None) -> str:
    """The run label of a limited run ('members[:10]'): a store never mistakes it for the full run."""
    return label if limit is None else f"{label}[:{limit}]"


def cut_windows(
    model,
    texts=None,
    *,
    document=None,
    stride=None,
    prefix_tokens: int | None,
    suffix_tokens: int | None,
    text_field=None,
    id_field=None,
    input_format=None,
    label=None,
    prefix_field=None,
    suffix_field=None,
    what: str = "texts",
    limit: int | None = None,
):
    """Read passages (a file path, a list of texts or records, a table) or a document (a path or a
    :class:`Document`) and cut windows -> (WindowSet, inputs dict, skipped_empty, label, text key).
    The text key names the texts whatever their file, order, ids, line endings or whitespace
    (:func:`memclaim.text.io.text_key`): a set tested against its own copy is refused with it.
    ``prefix_tokens``/``suffix_tokens`` None (with prefix/suffix fields): the whole field.

    ``limit`` (``--limit N``, the one place it is applied): only the first N records, or a
    document's first N windows, are cut; when it cuts anything, the inputs record says so
    (``limit``, and ``records_total`` or ``windows_total``) and the label gains ``[:N]``, so a
    limited run is never taken for the full one, in the store or in a report."""
    limit = check_limit(limit)
    if document is not None:
        if prefix_field is not None or suffix_field is not None:
            raise InputError(
                "--prefix-field/--suffix-field apply to passage files, not to --document",
                hint="a document is one plain text cut by --stride",
            )
        if stride is None:
            raise InputError("--document needs --stride (in tokens)", hint="e.g. --stride 10")
        if isinstance(document, Document):
            text, digest, name, where = (
                document.text,
                sha256_bytes(document.text.encode("utf-8")),
                document.name,
                None,
            )
        elif isinstance(document, (str, Path)):
            text, digest = read_document(document_path(document))
            name, where = Path(document).name, str(document)
        else:
            raise InputError(
                f"document must be a file path or a memclaim.Document, got {type(document).__name__}",
                hint="pass a path, or memclaim.Document(text, name=...) for a text in memory",
            )
        ws = sliding_windows(
            text,
            model.tokenizer,
            prefix_tokens=prefix_tokens,
            suffix_tokens=suffix_tokens,
            stride=stride,
            source=name,
        )
        inputs = {
            "document": where if where is not None else f"(text in memory: {name})",
            "sha256": digest,
            "stride": stride,
            "chars": len(text),
        }
        label = label or f"document:{name}"
        if limit is not None and len(ws) > limit:
            inputs.update(limit=limit, windows_total=len(ws))
            ws.n_windows = (
                limit  # a DocumentWindows makes its windows on demand, from the first n_windows
            )
            label = limited_label(label, limit)
        return ws, inputs, 0, label, text_key(text)
    if stride is not None:
        raise InputError(
            "--stride applies to --document only", hint="drop --stride, or pass --document FILE"
        )
    if texts is None:
        raise InputError(
            f"no {what} given", hint="pass a file path, a list of texts or records, or a table"
        )
    fields = dict(
        text_field=text_field,
        id_field=id_field,
        prefix_field=prefix_field,
        suffix_field=suffix_field,
    )
    if isinstance(texts, (str, Path)):
        ps = read_passages(texts, fmt=input_format, **fields)
        where, default_label = str(texts), f"passages:{Path(texts).name}"
    else:
        if input_format is not None:
            raise InputError(
                "--format applies to files, not to texts given in memory", hint="drop format"
            )
        ps, kind = passages_from_object(texts, source=what, **fields)
        where, default_label = f"({kind} in memory)", what
    records = ps.records
    inputs = {"passages": where, "sha256": ps.sha256, "records": len(ps.records) + ps.skipped_empty}
    label = label or default_label
    if limit is not None and len(records) > limit:
        records = records[:limit]
        inputs.update(limit=limit, records_total=len(ps.records))
        label = limited_label(label, limit)
    ws = passage_windows(
        records, model.tokenizer, prefix_tokens=prefix_tokens, suffix_tokens=suffix_tokens
    )
    if prefix_field is not None:
        inputs.update(prefix_field=prefix_field, suffix_field=suffix_field)
    key = sha256_bytes("\n".join(sorted(text_key(r.text) for r in records)).encode("ascii"))
    return ws, inputs, ps.skipped_empty, label, key


# ------------------------------------------------------------------------------ results
class WorkFolder:
    """A folder the API works in: the caller's (kept), or a temporary one deleted when the last
    result that uses it is garbage-collected (or when the interpreter exits)."""

    def __init__(self, path=None, *, prefix: str = "memclaim-"):
        self._tmp = None
        if path is None:
            self._tmp = tempfile.TemporaryDirectory(prefix=prefix)
            path = self._tmp.name
        self.path = Path(path)

    @property
    def temporary(self) -> bool:
        return self._tmp is not None

    def __repr__(self) -> str:
        return f"WorkFolder({str(self.path)!r}{', temporary' if self.temporary else ''})"


def _as_made(method):
    """Run a result's report-rendering method with the invocation that made the result in force
    (unless one is already: inside the call that made it, or inside a command line)."""

    @functools.wraps(method)
    def inner(self, *args, **kwargs):
        with invoked_as(getattr(self, "_invocation", None)):
            return method(self, *args, **kwargs)

    inner._as_made = True
    return inner


class Result:
    """The base of every API result: a frozen value with ``to_dict()`` (JSON-ready: what the CLI
    prints with ``--json``), ``to_pandas()`` where tabular, and ``save(folder)`` (the files the
    CLI writes). A report rendered from a result (``save``, ``bundle``) names the call that made
    the result, however much later it is saved."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for name in ("save", "bundle"):
            f = cls.__dict__.get(name)
            if f is not None and not getattr(f, "_as_made", False):
                setattr(cls, name, _as_made(f))

    def to_dict(self) -> dict:  # pragma: no cover - every result defines it
        raise NotImplementedError

    def to_json(self, **kw) -> str:
        """``to_dict()`` as strict JSON (non-finite floats as "inf", "-inf", "nan")."""
        return dumps(self.to_dict(), **kw)

    def to_pandas(self):
        raise NotImplementedError(f"{type(self).__name__} is not tabular")

    def save(self, folder) -> dict:  # pragma: no cover - every result defines it
        raise NotImplementedError

    def _repr_pretty_(self, p, cycle):  # IPython: a short line, not the whole dataclass
        p.text(repr(self))

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    def _view(self):
        """The notebook view's document (:class:`memclaim.report.core.Doc`): a callout and the key
        table; results override it with their report's own claim box and table."""
        d = self.to_dict()
        rows = [
            (k, v) for k, v in d.items() if isinstance(v, (str, int, float, bool)) or v is None
        ][:12]
        return (
            Doc(type(self).__name__).callout(repr(self), "result").table(["field", "value"], rows)
        )

    def _repr_html_(self) -> str:
        """The result in a notebook: its claim box and key table, rendered by the template of the
        HTML reports (:func:`memclaim.report.core.render_fragment`), and how it was made."""
        inv = getattr(self, "_invocation", None)
        return render_fragment(
            self._view(), provenance=f"made by {invocation_text(inv)}" if inv else ""
        )


def jsonable(d: Any) -> Any:
    """JSON-ready plain data (floats inf/nan as strings, tuples as lists, numpy as Python)."""
    return to_jsonable(d)


def copy_tree_into(src: Path, dst, *, what: str) -> Path:
    """Copy folder ``src`` to ``dst`` (which must not exist, or be an empty folder) through a staging
    folder renamed into place: never over files memclaim did not write."""
    dst = Path(dst)
    check_out_dir(dst, option="folder")
    if dst.exists() and any(dst.iterdir()):
        raise InputError(
            f"folder {str(dst)!r} exists and is not empty: the {what} is not copied over it",
            hint="pass a new folder",
        )
    if Path(src).resolve() == dst.resolve():
        return dst
    stage = dst.parent / f".{dst.name}.{os.getpid()}.tmp"
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        shutil.copytree(src, stage)
        if dst.exists():
            dst.rmdir()
        os.replace(stage, dst)
    finally:
        if stage.exists():
            shutil.rmtree(stage, ignore_errors=True)
    return dst
