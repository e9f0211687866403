"""``memclaim.load_model``: a model given as a name, a path, a loaded model, or an already
loaded transformers model with its tokenizer.

A name (``toy``, ``smollm2``, ``gemma3-270m``) or a path (a HF folder, a ``.gguf`` file) goes
through :func:`memclaim.models.load_model` exactly as the CLI's MODEL argument: tokenizer and
fingerprint now, weights on first use, pickle checkpoints and a folder's own Python code
refused unless allowed. A transformers model object is wrapped as it is (put in eval mode, never
copied or modified otherwise): its fingerprint hashes its config, every state-dict tensor (name,
dtype, shape, bytes) and its tokenizer under a scheme of its own (:data:`OBJECTS_FINGERPRINT_SCHEME`),
so a store never mixes its scores with those of anything else by accident.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .. import models as _models
from .. import train as _train  # noqa: F401  (registers the named model "toy")
from ..errors import InputError, ModelLoadError
from ..models.loader import DTYPES, HFTokenizer, LoadedModel, resolve_sot
from ..models.placement import Placement
from ..scoring.served.model import ServedModel, served_model, tokenizer_fingerprint
from ._public import public

if TYPE_CHECKING:  # the annotations' names only; nothing here is imported at run time
    import transformers

__all__ = ["load_model", "ObjectModel", "OBJECTS_FINGERPRINT_SCHEME", "is_loaded_model"]

# What an in-memory model's fingerprint hashes (recorded in every procedure as
# model.fingerprint_scheme): config + state-dict tensors + tokenizer. Folder fingerprints are
# schemes 1 and 2 (memclaim.models.loader); 1001 keeps the two families apart.
OBJECTS_FINGERPRINT_SCHEME = 1001


def is_loaded_model(obj) -> bool:
    """Whether ``obj`` is already a memclaim model (a LoadedModel or something with its interface)."""
    return isinstance(obj, LoadedModel) or all(
        hasattr(obj, a) for a in ("tokenizer", "fingerprint", "sot", "lm")
    )


def _is_transformers_model(obj) -> bool:
    return (
        hasattr(obj, "config")
        and hasattr(obj, "state_dict")
        and hasattr(obj, "get_output_embeddings")
    )


@dataclass(frozen=True, repr=False)
class ObjectModel(LoadedModel):
    """A :class:`~memclaim.models.loader.LoadedModel` built from a transformers model object and
    its tokenizer (no folder: ``path`` is None). Its weights are the object's (``_lm``, set at
    construction); ``max_positions`` comes from its ``config``."""

    config: object = field(default=None, repr=False, compare=False)

    @property
    def max_positions(self) -> int | None:
        cfg = self.config
        for key in ("max_position_embeddings", "n_positions", "n_ctx"):
            v = getattr(cfg, key, None)
            if v is None and getattr(cfg, "text_config", None) is not None:
                v = getattr(cfg.text_config, key, None)
            if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                return v
        return None

    def legacy_fingerprints(self) -> tuple[str, ...]:
        return ()


_tokenizer_digest = tokenizer_fingerprint  # one home: memclaim.scoring.served.model


def object_fingerprint(model, tokenizer) -> str:
    """sha256 over the scheme tag, the model's config (as JSON, without the fields that record who
    wrote it), every state-dict tensor (name, dtype, shape and bytes, in name order) and the
    tokenizer (its tokenizer.json, special tokens and chat template)."""
    import torch

    h = hashlib.sha256()
    h.update(f"memclaim-fingerprint:{OBJECTS_FINGERPRINT_SCHEME}\n".encode())
    cfg = model.config.to_dict()
    for k in (
        "transformers_version",
        "_name_or_path",
        "_commit_hash",
        "dtype",
        "torch_dtype",
        "use_cache",
    ):
        cfg.pop(k, None)
    h.update(b"config:" + json.dumps(cfg, sort_keys=True, default=str).encode() + b"\n")
    for name, t in sorted(model.state_dict().items()):
        t = t.detach().to("cpu").contiguous()
        h.update(f"{name}:{t.dtype}:{tuple(t.shape)}\n".encode())
        h.update(
            (t.view(torch.uint8) if t.dtype != torch.bool else t.to(torch.uint8)).numpy().tobytes()
        )
    h.update(b"tokenizer:" + _tokenizer_digest(tokenizer).encode())
    return h.hexdigest()


def _wrap(model, tokenizer, *, sot, name) -> ObjectModel:
    import torch

    from ..models.hf import HFLanguageModel

    if tokenizer is None:
        raise InputError(
            f"a transformers model ({type(model).__name__}) needs its tokenizer",
            hint="memclaim.load_model(model, tokenizer), or pass the pair (model, tokenizer) as the model",
        )
    tok = HFTokenizer(tokenizer)
    params = list(model.parameters())
    if not params:
        raise ModelLoadError(
            f"the model {type(model).__name__} has no parameters",
            hint="pass a causal language model",
        )
    dt = params[0].dtype
    dtype = str(dt).replace("torch.", "")
    if dtype not in DTYPES:
        raise ModelLoadError(
            f"the model's parameters are {dtype}", hint=f"use one of {', '.join(DTYPES)}"
        )
    fp = object_fingerprint(model, tokenizer)
    cfg_name = getattr(model.config, "_name_or_path", "") or ""
    label = (
        name
        or (Path(cfg_name).name if cfg_name else "")
        or getattr(model.config, "model_type", "")
        or "model"
    )
    lm = HFLanguageModel(
        model,
        name=label,
        fingerprint=fp,
        unembed_dtype=torch.float64 if dt == torch.float64 else torch.float32,
    )
    m = ObjectModel(
        name=label,
        source=f"python object ({type(model).__name__})",
        path=None,
        fingerprint=fp,
        tokenizer=tok,
        sot=resolve_sot(tok, sot if sot is not None else "auto"),
        dtype=dtype,
        fingerprint_scheme=OBJECTS_FINGERPRINT_SCHEME,
        _lm=lm,
        config=model.config,
        placement=Placement(device=str(lm.device) if lm.device.type != "cpu" else "cpu"),
    )
    return m


@public
def load_model(
    model: str
    | os.PathLike
    | LoadedModel
    | transformers.PreTrainedModel
    | tuple[transformers.PreTrainedModel, transformers.PreTrainedTokenizerBase],
    tokenizer: transformers.PreTrainedTokenizerBase | None = None,
    *,
    dtype: str | None = None,
    sot: str | None = None,
    allow_pickle: bool = False,
    trust_remote_code: bool = False,
    load_weights: bool = False,
    name: str | None = None,
    device: str | None = None,
    device_map: str | None = None,
    max_memory: Mapping | Sequence[str] | str | None = None,
    offload_folder: str | os.PathLike | None = None,
) -> LoadedModel:
    """A model for every other function of the API.

    ``model`` is a named model (``"toy"``, ``"smollm2"``, ``"gemma3-270m"``), a path (a HF folder
    with safetensors, or a ``.gguf`` file), a model this function returned before (returned as
    is), or a transformers causal LM object with its ``tokenizer`` (a fast tokenizer), given as
    ``load_model(hf_model, tokenizer)`` or as the pair ``(hf_model, tokenizer)`` (the form every
    other function of the API takes as its ``model``). ``dtype``
    (default float32) is the body dtype for names and paths; ``sot`` the start-of-text rule
    ('auto', 'none', 'bos', 'eos', a token or ids; default: per model). Weights load on first use
    unless ``load_weights``. ``name`` labels an object model in procedures and reports.

    Placement (names and paths; the CLI's ``--device``, ``--device-map``, ``--max-memory``,
    ``--offload-folder``): ``device`` 'auto' (None: the first GPU when one is present, else the
    CPU), 'cpu', 'cuda' or 'cuda:N'; ``device_map='auto'`` shards the model over the visible GPUs
    and offloads what does not fit to CPU memory, then to ``offload_folder`` (accelerate's
    big-model inference), within ``max_memory`` ({'cuda:0': '20GiB', 'cpu': '64GB'} or
    'DEVICE=SIZE' strings); the unembedding stays on the first compute device. ``dtype`` 'auto'
    (None) is a bfloat16 body on a GPU and float32 on the CPU. The device class and dtype are
    recorded in every procedure: scores computed on different ones are never mixed silently.

    >>> import memclaim as mc
    >>> m = mc.load_model("toy")                       # doctest: +SKIP
    >>> m.name, m.weights_loaded                       # doctest: +SKIP
    ('toy', False)
    >>> from transformers import AutoModelForCausalLM, AutoTokenizer   # doctest: +SKIP
    >>> hf = AutoModelForCausalLM.from_pretrained(str(m.path))        # doctest: +SKIP
    >>> mc.load_model(hf, AutoTokenizer.from_pretrained(str(m.path))).fingerprint != m.fingerprint  # doctest: +SKIP
    True
    """
    if isinstance(model, tuple) and len(model) == 2 and _is_transformers_model(model[0]):
        if tokenizer is not None:
            raise InputError(
                "the tokenizer is given twice: in the (model, tokenizer) pair and as tokenizer=",
                hint="pass one of them",
            )
        model, tokenizer = (
            model  # (transformers model, tokenizer): how score/test/... take an object model
        )
    placed = (
        ("device", device),
        ("device_map", device_map),
        ("max_memory", max_memory),
        ("offload_folder", offload_folder),
    )
    if is_loaded_model(model):
        given = [
            k
            for k, v in (
                ("tokenizer", tokenizer),
                ("dtype", dtype),
                ("sot", sot),
                ("name", name),
                *placed,
            )
            if v is not None
        ]
        if given:
            raise InputError(
                f"the model {getattr(model, 'name', model)!r} is loaded already; {', '.join(given)} "
                "cannot change it",
                hint="pass the name or path to load_model with those options",
            )
        return model
    if _is_transformers_model(model):
        if dtype is not None:
            raise InputError(
                "dtype applies to a name or a path; a model object keeps its own dtype",
                hint="convert the model first (model.to(torch.bfloat16)) or drop dtype",
            )
        if allow_pickle or load_weights:
            raise InputError(
                "allow_pickle and load_weights apply to a name or a path, not to a model object",
                hint="drop them: the object's weights are loaded already",
            )
        given = [k for k, v in placed if v is not None]
        if given:
            raise InputError(
                f"{', '.join(given)} place a model loaded from a name or a path; a model object stays "
                "where it is",
                hint="move the object first (model.to('cuda')), or drop them",
            )
        return _wrap(model, tokenizer, sot=sot, name=name)
    if tokenizer is not None:
        raise InputError(
            f"a tokenizer goes with a transformers model object, not with {type(model).__name__} "
            f"{str(model)!r}",
            hint="pass a name or a path alone",
        )
    if name is not None:
        raise InputError(
            "name labels a model object; a name or a path is its own label", hint="drop name"
        )
    if not isinstance(model, (str, Path)):
        raise InputError(
            f"model must be a name, a path, a loaded model or a transformers model, got "
            f"{type(model).__name__}",
            hint="e.g. memclaim.load_model('toy') or load_model('./my-model')",
        )
    # through the package attribute, so that memclaim.models.load_model stays the one place to hook
    return _models.load_model(
        str(model),
        dtype=dtype or "auto",
        sot=sot,
        allow_pickle=allow_pickle,
        trust_remote_code=trust_remote_code,
        load_weights=load_weights,
        device=device or "auto",
        device_map=device_map,
        max_memory=max_memory,
        offload_folder=offload_folder,
    )


def scoring_model(
    model,
    *,
    backend: str = "local",
    dtype: str | None = None,
    sot: str | None = None,
    allow_pickle: bool = False,
    trust_remote_code: bool = False,
    device: str | None = None,
    device_map: str | None = None,
    max_memory=None,
    offload_folder=None,
) -> LoadedModel | ServedModel:
    """The model a scoring operation reads: :func:`load_model`'s, or for ``backend="openai"`` the
    served model's tokenizer side (:func:`memclaim.scoring.served.model.served_model`: no weights
    here, so the options that place or load weights do not apply and are refused)."""
    if backend != "openai":
        return load_model(
            model,
            dtype=dtype,
            sot=sot,
            allow_pickle=allow_pickle,
            trust_remote_code=trust_remote_code,
            device=device,
            device_map=device_map,
            max_memory=max_memory,
            offload_folder=offload_folder,
        )
    device = None if device == "auto" else device  # the CLI's defaults
    dtype = None if dtype == "auto" else dtype
    given = [
        name
        for name, v in (
            ("--dtype", dtype),
            ("--device", device),
            ("--device-map", device_map),
            ("--max-memory", max_memory),
            ("--offload-folder", offload_folder),
        )
        if v is not None
    ]
    if allow_pickle:
        given.append("--allow-pickle")
    if given:
        raise InputError(
            f"{', '.join(given)} {'places or loads' if len(given) == 1 else 'place or load'} weights in "
            "this process; a served model's weights, "
            "dtype and device are the server's",
            hint="drop them (start the server with the dtype and device you want)",
        )
    return served_model(model, sot=sot, trust_remote_code=trust_remote_code)
