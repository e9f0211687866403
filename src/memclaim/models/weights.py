"""A model folder's weights: the checks before any work (config, weights files' headers, pickle
checkpoints, a folder's own code), the device map planned from config.json, and the lazy load of
the weights behind :attr:`memclaim.models.loader.LoadedModel.lm`.

Split out of :mod:`memclaim.models.loader` (issue 26), which re-exports these names.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ModelLoadError
from ..progress import ambient
from .placement import Placement, plan_device_map
from .quiet import library_bars

if TYPE_CHECKING:  # the annotation's name only (loader imports this module)
    from .loader import LoadedModel

PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")
DTYPES = ("float32", "bfloat16", "float16", "float64")


def _torch_dtype(name: str):
    import torch

    if name not in DTYPES:
        raise ModelLoadError(f"unknown dtype {name!r}", hint=f"use one of {', '.join(DTYPES)}")
    return getattr(torch, name)


def _load_weights(m: LoadedModel):
    import torch
    from safetensors import SafetensorError
    from transformers import AutoConfig, AutoModelForCausalLM

    from .hf import HFLanguageModel, attn_implementation

    dtype = _torch_dtype(m.dtype)
    import pickle

    # a bad pickle (--allow-pickle) fails in torch.load with UnpicklingError or EOFError
    errors = (
        Exception
        if m.trust_remote_code
        else (OSError, ValueError, RuntimeError, SafetensorError, pickle.UnpicklingError, EOFError)
    )
    kwargs = {}
    try:
        config = AutoConfig.from_pretrained(
            str(m.path), local_files_only=True, trust_remote_code=m.trust_remote_code
        )
        # the attention kernel is chosen at load time (models/hf.py: FAST_ATTENTION, eager where unsupported)
        kwargs["attn_implementation"] = attn_implementation(config)
    except Exception:  # noqa: BLE001 - advisory only: from_pretrained below reports an unreadable config
        pass
    if m.device_map is not None:
        # accelerate's big-model inference with the map planned in load_model (models/placement.py)
        kwargs["device_map"] = m.device_map
        if "disk" in m.device_map.values():
            kwargs["offload_folder"] = _offload_dir(m)
    elif m.device_class != "cpu":
        kwargs["device_map"] = {"": m.device}  # straight onto the GPU, no CPU copy of the weights
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # its load report table would repeat, unasked, what is refused below
    try:
        # transformers' "Loading weights" bar reports to memclaim's progress instead (models/quiet.py)
        with library_bars(
            ambient(), stage="load", label=f"loading the weights of {m.name}", unit="tensors"
        ):
            model, info = AutoModelForCausalLM.from_pretrained(
                str(m.path),
                dtype=dtype,
                use_safetensors=None if m.allow_pickle else True,
                local_files_only=True,
                low_cpu_mem_usage=True,
                trust_remote_code=m.trust_remote_code,
                output_loading_info=True,
                **kwargs,
            )
    except errors as exc:
        raise ModelLoadError(
            f"cannot load model weights from {str(m.path)!r}: {exc}",
            hint="check that the folder was saved completely (save_pretrained) and is not truncated",
        ) from None
    finally:
        hf_logging.set_verbosity(verbosity)
    check_loading_info(info, m.path)
    model.requires_grad_(False)
    return HFLanguageModel(
        model,
        name=m.name,
        fingerprint=m.fingerprint,
        unembed_dtype=torch.float32 if dtype != torch.float64 else torch.float64,
    )


# Buffers older transformers versions wrote into checkpoints and today's architectures compute
# themselves (GPT-2's attention mask bias, rotary inverse frequencies, position ids): unexpected
# in such a checkpoint, and harmless.
_SAVED_BUFFER = re.compile(r"(^|\.)(masked_bias|rotary_emb\.inv_freq|position_ids)$")


def check_loading_info(info: Mapping, path: Path | str) -> None:
    """Refuse a model that transformers filled in with freshly initialised (random) weights: a
    parameter the architecture has and the checkpoint lacks (missing: a tensor left out, a
    config with more layers than the weights, an empty weights file), a tensor of the
    checkpoint the architecture does not use (unexpected: the weights belong to another
    configuration), or a tensor of another shape. ``info`` is what ``from_pretrained(...,
    output_loading_info=True)`` returns; weights that are tied (an lm_head shared with the
    embeddings) are not missing there. Such a model scores at random, differently on every
    load, under the same fingerprint.

    >>> check_loading_info({"missing_keys": [], "unexpected_keys": []}, "m")
    >>> check_loading_info({"missing_keys": ["h.1.attn.weight", "h.1.mlp.weight"]}, "m")
    Traceback (most recent call last):
    memclaim.errors.ModelLoadError: the weights in 'm' do not match its config.json: 2 parameters are missing from the weights (transformers would initialise them at random): h.1.attn.weight, h.1.mlp.weight
      fix: restore the weights file(s) the folder was saved with (save_pretrained), or fix config.json (e.g. its number of layers) to match them
    """

    def listed(keys) -> str:
        keys = sorted(str(k) for k in keys)
        return ", ".join(keys[:8]) + (f" and {len(keys) - 8} more" if len(keys) > 8 else "")

    problems = []
    missing = list(info.get("missing_keys") or ())
    unexpected = [k for k in info.get("unexpected_keys") or () if not _SAVED_BUFFER.search(str(k))]
    mismatched = list(info.get("mismatched_keys") or ())
    if missing:
        problems.append(
            f"{len(missing)} parameter{'s are' if len(missing) != 1 else ' is'} missing from the weights "
            f"(transformers would initialise {'them' if len(missing) != 1 else 'it'} at random): "
            f"{listed(missing)}"
        )
    if unexpected:
        problems.append(
            f"{len(unexpected)} tensor{'s' if len(unexpected) != 1 else ''} in the weights "
            f"{'are' if len(unexpected) != 1 else 'is'} not used by the architecture: {listed(unexpected)}"
        )
    if mismatched:
        names = [k[0] if isinstance(k, (tuple, list)) else k for k in mismatched]
        problems.append(
            f"{len(mismatched)} tensor{'s have' if len(mismatched) != 1 else ' has'} another shape than "
            f"the config says: {listed(names)}"
        )
    if problems:
        raise ModelLoadError(
            f"the weights in {str(path)!r} do not match its config.json: " + "; ".join(problems),
            hint="restore the weights file(s) the folder was saved with (save_pretrained), or fix "
            "config.json (e.g. its number of layers) to match them",
        )


def _offload_dir(m: LoadedModel) -> str:
    """A new folder inside --offload-folder for this process's offloaded layers, removed when the
    process ends: memclaim never writes over (or deletes) files it did not write there."""
    import atexit
    import shutil
    import tempfile

    root = Path(m.placement.offload_folder)
    try:
        root.mkdir(parents=True, exist_ok=True)
        d = tempfile.mkdtemp(prefix=f"memclaim-offload-{m.fingerprint[:12]}-", dir=root)
    except OSError as exc:
        raise ModelLoadError(
            f"cannot create the offload folder in {str(root)!r}: {exc}",
            hint="choose an --offload-folder on a local disk you can write",
        ) from None
    atexit.register(shutil.rmtree, d, ignore_errors=True)
    return d


def _plan(path: Path, placement: Placement, dtype: str, trust_remote_code: bool) -> dict | None:
    """The device map of a --device-map auto placement, planned from config.json alone."""
    if placement.device_map is None:
        return None
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(
            str(path), local_files_only=True, trust_remote_code=trust_remote_code
        )
    except (OSError, ValueError, KeyError) as exc:
        raise ModelLoadError(
            f"cannot read the config of {str(path)!r} to plan the device map: {exc}",
            hint="restore the model folder's config.json",
        ) from None
    return plan_device_map(config, placement, dtype, path=str(path))


def _custom_code(path: Path) -> list[str]:
    """What a folder asks transformers to run from its own Python files: the auto_map entries of
    config.json and tokenizer_config.json ('AutoModelForCausalLM -> modeling_x.MyLM', ...)."""
    found = []
    for name in ("config.json", "tokenizer_config.json"):
        try:
            cfg = json.loads((path / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        amap = cfg.get("auto_map") if isinstance(cfg, dict) else None
        if isinstance(amap, dict):
            for k, v in amap.items():
                found.append(f"{name}: {k} -> {v}")
        elif amap:
            found.append(f"{name}: auto_map {amap!r}")
    return found


def _check_weights(path: Path) -> None:
    """Open each safetensors file's header (no tensor data is read): a truncated or corrupt file
    is refused here, before any store or report is touched."""
    from safetensors import SafetensorError, safe_open

    files = sorted(path.glob("*.safetensors"))
    n = 0
    for f in files:
        try:
            with safe_open(str(f), framework="np") as fh:
                n += len(list(fh.keys()))
        except (SafetensorError, OSError, ValueError) as exc:
            raise ModelLoadError(
                f"weights file {str(f)!r} ({f.stat().st_size:,} bytes) is corrupt or truncated: {exc}",
                hint="copy or download the model again (compare the file's size and sha256 with "
                "the source), or re-save it with save_pretrained",
            ) from None
    if files and n == 0:
        shown = ", ".join(repr(f.name) for f in files)
        raise ModelLoadError(
            f"the weights of {str(path)!r} ({shown}) hold no tensors: the model would be "
            "initialised at random",
            hint="restore the weights file(s) the folder was saved with (save_pretrained)",
        )


def _check_pickles(path: Path) -> None:
    """With --allow-pickle and no safetensors: open each pickle checkpoint as transformers will
    (``torch.load(weights_only=True)``, memory-mapped: the tensors are not read), so that a file
    that is not a checkpoint is refused here, before any store or report is touched, and not as a
    traceback from the lazy weight load (issue 25). A checkpoint in torch's legacy (non-zip)
    format cannot be memory-mapped: it is left to the load itself, whose error is a
    ModelLoadError too."""
    import pickle
    import zipfile

    import torch

    for f in sorted(
        p
        for p in path.iterdir()
        if p.is_file() and p.name.endswith(PICKLE_SUFFIXES) and p.name != "training_args.bin"
    ):
        legacy = not zipfile.is_zipfile(f)
        try:
            if legacy:
                with open(
                    f, "rb"
                ) as fh:  # a legacy checkpoint starts with a pickle protocol marker
                    head = fh.read(2)
                if len(head) < 2 or head[0] != 0x80:
                    raise pickle.UnpicklingError(f"not a torch checkpoint (starts with {head!r})")
                continue
            torch.load(str(f), map_location="cpu", weights_only=True, mmap=True)
        except (
            pickle.UnpicklingError,
            EOFError,
            RuntimeError,
            OSError,
            ValueError,
            zipfile.BadZipFile,
        ) as exc:
            raise ModelLoadError(
                f"pickle checkpoint {str(f)!r} ({f.stat().st_size:,} bytes) cannot be read as "
                f"weights: {type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}",
                hint="copy the model again, or convert it to safetensors with the library that "
                "wrote it (model.save_pretrained(folder, safe_serialization=True))",
            ) from None


def _check_folder(path: Path, allow_pickle: bool, trust_remote_code: bool = False) -> None:
    files = [f.name for f in path.iterdir() if f.is_file()]
    if "config.json" not in files:
        raise ModelLoadError(
            f"model folder {str(path)!r} has no config.json",
            hint="point MODEL at a HuggingFace model folder (config.json, *.safetensors, tokenizer.json)",
        )
    has_st = any(f.endswith(".safetensors") for f in files)
    pickles = [f for f in files if f.endswith(PICKLE_SUFFIXES) and f != "training_args.bin"]
    if not has_st:
        if pickles and not allow_pickle:
            raise ModelLoadError(
                f"model folder {str(path)!r} holds only pickle checkpoints {pickles}; loading a pickle can run "
                "arbitrary code, so memclaim refuses it",
                hint="convert it to safetensors, or pass --allow-pickle if you trust the file",
            )
        if not pickles:
            raise ModelLoadError(
                f"model folder {str(path)!r} has no weights (*.safetensors)",
                hint="save the model with save_pretrained(safe_serialization=True)",
            )
    if "tokenizer.json" not in files:
        raise ModelLoadError(
            f"model folder {str(path)!r} has no tokenizer (tokenizer.json)",
            hint="save the tokenizer beside the weights: tokenizer.save_pretrained(folder)",
        )
    code = _custom_code(path)
    if code and not trust_remote_code:
        raise ModelLoadError(
            f"model folder {str(path)!r} asks to run its own Python code ({'; '.join(code)}); memclaim does not "
            "run a model folder's code unless told to",
            hint="read the code and pass --trust-remote-code if you trust it (trust_remote_code=True in Python); if "
            "the architecture is built into transformers, delete auto_map from the config instead",
        )
