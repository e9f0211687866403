"""What the scoring operations of the API share: inputs (files, lists, tables, documents) cut into
windows, window lengths, near-verbatim settings, the scoring backend, threads, output folders,
and the base of every result (``to_dict``, ``to_pandas``, ``save``).

Error messages name options as the CLI spells them (``--batch-size`` for ``batch_size``): the
CLI is a thin layer over these functions, and both say the same thing.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from ..decoding import Policy, parse_policies
from ..errors import InputError
from ..fsutil import sha256_bytes
from ..jsonutil import dumps, to_jsonable
from ..scoring.prompts import PromptRule
from ..scoring.ray_backend import RayBackend, require_ray
from ..scoring.runner import normalize_near_verbatim
from ..text.io import read_document, read_passages
from ..text.tables import passages_from_object
from ..report.core import check_report_folder
from ..scoring.store import foreign_entries
from ..text.windows import passage_windows, sliding_windows
from ._options import DEFAULT_PREFIX_TOKENS, DEFAULT_SUFFIX_TOKENS, check_out_dir, set_threads, window_lengths

__all__ = ["Document", "DEFAULT_PREFIX_TOKENS", "DEFAULT_SUFFIX_TOKENS", "DEFAULT_POLICY", "window_lengths",
           "policies_of", "check_out_dir", "check_out", "set_threads", "near_verbatim_settings", "make_backend",
           "build_prompt_rule", "cut_windows", "Result", "WorkFolder"]

DEFAULT_POLICY = "top-k:40"


@dataclass(frozen=True)
class Document:
    """A document given as text rather than as a file path (``score(document=...)``, ``census``).

    >>> Document("In the beginning ...", name="genesis").name
    'genesis'
    """

    text: str
    name: str = "document"

    def __post_init__(self):
        if not isinstance(self.text, str) or not self.text.strip():
            raise InputError(f"document {self.name!r} is empty or not a text", hint="pass the document's text")


def document_path(x, what: str = "document") -> Path:
    """A document given as a path: refused, saying how to pass a text in memory, when no such
    file exists (a string is a path; :class:`Document` holds a text)."""
    p = Path(x)
    if not p.exists():
        shown = str(x) if len(str(x)) <= 80 else str(x)[:77] + "..."
        raise InputError(f"{what} file {shown!r} does not exist",
                         hint="pass the path of a text file, or memclaim.Document(text, name=...) for a text in memory")
    return p


def check_out(out, *, store: str | None = None, report: bool = False, option: str = "--out") -> Path:
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
            shown = ", ".join(repr(x) for x in foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3
                                                                else "")
            what = f"{option} {str(out)!r}" if not store else f"{str(where)!r} (the store of {option} {str(out)!r})"
            raise InputError(f"{what} is a folder memclaim did not make: it holds {shown} and no memclaim "
                             "manifest.json, so memclaim does not write (or clean up temporary files) there",
                             hint=f"choose a new or empty folder for {option}, or the {option} folder of an earlier "
                                  "memclaim run")
    if report:
        check_report_folder(p)
    return p


def policies_of(policies) -> tuple[Policy, ...]:
    """Decoding policies from a spec string, Policy objects or a sequence of either (default top-k:40)."""
    if policies is None or (not isinstance(policies, str) and len(policies) == 0):
        policies = (DEFAULT_POLICY,)
    return parse_policies(policies)


def near_verbatim_settings(nv_eps: Sequence[int] = (), nv_beams: Sequence[int] = ()) -> dict | None:
    """Near-verbatim epsilons and beams ([EM] App. B.1 Eq. 2, §6) as run_scoring's argument."""
    if isinstance(nv_eps, int):
        nv_eps = (nv_eps,)
    if isinstance(nv_beams, int):
        nv_beams = (nv_beams,)
    if nv_beams and not nv_eps:
        raise InputError("--beam applies to --near-verbatim", hint="add --near-verbatim EPS")
    if not nv_eps:
        return None
    return normalize_near_verbatim({"epsilons": list(nv_eps), "beams": list(nv_beams or (16,))}, suffix_tokens=0)


BACKENDS = ("local", "ray")


def make_backend(model, policies, *, backend: str = "local", address=None, workers=None, gpus_per_worker=0.0,
                 threads_per_worker=1, batch_size: int = 16, log=None):
    """The scoring backend the options ask for; None means run_scoring's local default."""
    if backend not in BACKENDS:
        raise InputError(f"unknown backend {backend!r}", hint=f"one of {', '.join(BACKENDS)}")
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
    if getattr(model, "path", None) is None:
        raise InputError(f"the model {model.name!r} is a Python object: Ray workers load a model from a folder",
                         hint="save it (model.save_pretrained(DIR), tokenizer.save_pretrained(DIR)) and pass DIR")
    require_ray()  # fail before any work with the error naming the extra
    return RayBackend(model, policies, batch_size=batch_size, workers=workers, threads_per_worker=threads_per_worker,
                      gpus_per_worker=gpus_per_worker, address=address, log=log)


def build_prompt_rule(templates=(), chat: bool = False, aggregate: str = "max") -> PromptRule:
    """The prompt rule f_P: the natural prefix, or templates filled with {prefix}/{suffix} ([EM] Eq. 15)."""
    if isinstance(templates, str):
        templates = (templates,)
    return PromptRule(templates=tuple(templates or ()), chat=bool(chat), aggregate=aggregate)


def cut_windows(model, texts=None, *, document=None, stride=None, prefix_tokens: int | None,
                suffix_tokens: int | None, text_field=None, id_field=None, input_format=None, label=None,
                prefix_field=None, suffix_field=None, what: str = "texts"):
    """Read passages (a file path, a list of texts or records, a table) or a document (a path or a
    :class:`Document`) and cut windows -> (WindowSet, inputs dict, skipped_empty, label).
    ``prefix_tokens``/``suffix_tokens`` None (with prefix/suffix fields): the whole field."""
    if document is not None:
        if prefix_field is not None or suffix_field is not None:
            raise InputError("--prefix-field/--suffix-field apply to passage files, not to --document",
                             hint="a document is one plain text cut by --stride")
        if stride is None:
            raise InputError("--document needs --stride (in tokens)", hint="e.g. --stride 10")
        if isinstance(document, Document):
            text, digest, name, where = document.text, sha256_bytes(document.text.encode("utf-8")), document.name, None
        elif isinstance(document, (str, Path)):
            text, digest = read_document(document_path(document))
            name, where = Path(document).name, str(document)
        else:
            raise InputError(f"document must be a file path or a memclaim.Document, got {type(document).__name__}",
                             hint="pass a path, or memclaim.Document(text, name=...) for a text in memory")
        ws = sliding_windows(text, model.tokenizer, prefix_tokens=prefix_tokens, suffix_tokens=suffix_tokens,
                             stride=stride, source=name)
        inputs = {"document": where if where is not None else f"(text in memory: {name})", "sha256": digest,
                  "stride": stride, "chars": len(text)}
        return ws, inputs, 0, label or f"document:{name}"
    if stride is not None:
        raise InputError("--stride applies to --document only", hint="drop --stride, or pass --document FILE")
    if texts is None:
        raise InputError(f"no {what} given", hint="pass a file path, a list of texts or records, or a table")
    fields = dict(text_field=text_field, id_field=id_field, prefix_field=prefix_field, suffix_field=suffix_field)
    if isinstance(texts, (str, Path)):
        ps = read_passages(texts, fmt=input_format, **fields)
        where, default_label = str(texts), f"passages:{Path(texts).name}"
    else:
        if input_format is not None:
            raise InputError("--format applies to files, not to texts given in memory", hint="drop format")
        ps, kind = passages_from_object(texts, source=what, **fields)
        where, default_label = f"({kind} in memory)", what
    ws = passage_windows(ps.records, model.tokenizer, prefix_tokens=prefix_tokens, suffix_tokens=suffix_tokens)
    inputs = {"passages": where, "sha256": ps.sha256, "records": len(ps.records) + ps.skipped_empty}
    if prefix_field is not None:
        inputs.update(prefix_field=prefix_field, suffix_field=suffix_field)
    return ws, inputs, ps.skipped_empty, label or default_label


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


class Result:
    """The base of every API result: a frozen value with ``to_dict()`` (JSON-ready: what the CLI
    prints with ``--json``), ``to_pandas()`` where tabular, and ``save(folder)`` (the files the
    CLI writes)."""

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


def jsonable(d: Any) -> Any:
    """JSON-ready plain data (floats inf/nan as strings, tuples as lists, numpy as Python)."""
    return to_jsonable(d)


def copy_tree_into(src: Path, dst, *, what: str) -> Path:
    """Copy folder ``src`` to ``dst`` (which must not exist, or be an empty folder) through a staging
    folder renamed into place: never over files memclaim did not write."""
    dst = Path(dst)
    check_out_dir(dst, option="folder")
    if dst.exists() and any(dst.iterdir()):
        raise InputError(f"folder {str(dst)!r} exists and is not empty: the {what} is not copied over it",
                         hint="pass a new folder")
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
