"""The model side of a served run: the model's own tokenizer on this machine, no weights.

A served model's weights live on the server (30B-70B models, often on another node); memclaim
needs only its tokenizer here, to cut windows in token space ([EM] §4: a suffix is never
re-tokenized on its own) and to send the server the ids it cut. :func:`served_model` takes the
same MODEL argument as :func:`memclaim.models.load_model` (a named model, a folder, a hub id
in the local cache) but a folder needs no weights: ``tokenizer.json`` (and ``config.json`` for the
vocabulary size and context length) is enough. Its fingerprint hashes the tokenizer, not
weights memclaim never sees; the server's identity enters the procedure beside it
(:mod:`memclaim.scoring.served.backend`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ...errors import ModelLoadError
from ...models.hub import HUB_ID, hub_cache_folder
from ...models.loader import config_max_positions
from ...models.registry import is_named_model, named_model, named_models, registered_elsewhere
from ...models.start_of_text import StartOfText, resolve_sot
from ...models.tokenizer import HFTokenizer, _load_tokenizer
from ...models.weights import _custom_code
from ...progress import LogCallback

if TYPE_CHECKING:  # the annotation's name only
    import transformers

__all__ = ["ServedModel", "served_model", "tokenizer_fingerprint", "TOKENIZER_FINGERPRINT_SCHEME"]

TOKENIZER_FINGERPRINT_SCHEME = "tokenizer-1"


def tokenizer_fingerprint(tok: transformers.PreTrainedTokenizerBase) -> str:
    """sha256 of what decides a fast tokenizer's ids: its tokenizer.json (the backend's JSON), its
    special tokens and chat template.

    >>> from transformers import AutoTokenizer                                   # doctest: +SKIP
    >>> tokenizer_fingerprint(AutoTokenizer.from_pretrained(folder))[:12]        # doctest: +SKIP
    '5d1e0c7f42aa'
    """
    backend = getattr(tok, "backend_tokenizer", None)
    if backend is None:
        raise ModelLoadError(
            f"tokenizer {type(tok).__name__} is not a fast tokenizer (no offsets)",
            hint="pass a transformers fast tokenizer (PreTrainedTokenizerFast, tokenizer.json)",
        )
    special = {
        k: str(v) for k, v in sorted((getattr(tok, "special_tokens_map", None) or {}).items())
    }
    chat = getattr(tok, "chat_template", None)
    blob = json.dumps(
        {"tokenizer": backend.to_str(), "special": special, "chat_template": chat}, sort_keys=True
    )
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class ServedModel:
    """A model scored through a server: name, source, the tokenizer folder, the tokenizer's
    fingerprint, start-of-text rule and vocabulary size; no weights (``lm`` refuses). The
    runner reads it like a :class:`~memclaim.models.loader.LoadedModel`; its context length is
    the server's once the backend has asked (:meth:`set_server_limit`).

    >>> m = served_model("smollm2")                                              # doctest: +SKIP
    >>> m.dtype, m.device_class, m.weights_loaded                                # doctest: +SKIP
    ('served', 'served', False)
    """

    name: str
    source: str
    path: Path
    fingerprint: str
    tokenizer: HFTokenizer
    sot: StartOfText
    vocab_size: int
    dtype: str = "served"
    fingerprint_scheme: None = (
        None  # the procedure's model record names the tokenizer scheme instead
    )
    allow_pickle: bool = False
    trust_remote_code: bool = False
    _server_limit: list = field(default_factory=lambda: [None], repr=False, compare=False)

    device_class = "served"
    weights_loaded = False

    @property
    def sot_ids(self) -> list[int]:
        return list(self.sot.ids)

    @property
    def lm(self):
        raise ModelLoadError(
            f"{self.name!r} is scored through a server: memclaim has no local weights for it",
            hint="this operation needs the model in this process: use --backend local with the "
            "model folder",
        )

    @property
    def max_positions(self) -> int | None:
        """The server's context length (``max_model_len``) once known, else config.json's."""
        return self._server_limit[0] or config_max_positions(self.path)

    def set_server_limit(self, n: int | None) -> None:
        """Record the server's context length (the one value a backend writes, after connecting)."""
        self._server_limit[0] = None if n is None else int(n)

    def legacy_fingerprints(self) -> tuple[str, ...]:
        return ()

    def placement_record(self) -> dict:
        return {"device": "served", "device_class": "served"}

    def describe(self) -> dict:
        return {
            "name": self.name,
            "source": self.source,
            "tokenizer_fingerprint": self.fingerprint,
            "dtype": self.dtype,
            "device_class": "served",
            "start_of_text": self.sot.to_dict(),
        }


def _folder(spec: str, log: LogCallback | None) -> tuple[str, Path]:
    if is_named_model(spec):
        return spec, Path(named_model(spec).resolve(log))
    p = Path(spec).expanduser()
    if p.is_dir():
        return p.name, p
    if p.is_file():
        raise ModelLoadError(
            f"{spec!r} is a file; a served model needs its tokenizer's folder (tokenizer.json)",
            hint="pass the model's folder (only tokenizer.json and config.json are read) or a "
            "named model",
        )
    if registered_elsewhere(spec):
        named_model(spec)  # says which layer registers it
    if HUB_ID.fullmatch(spec):
        return spec, hub_cache_folder(spec)
    raise ModelLoadError(
        f"model {spec!r} is neither a named model nor an existing folder",
        hint="pass the folder holding the served model's tokenizer.json, a hub id in the local "
        f"HuggingFace cache (org/name), or one of: {', '.join(named_models())}",
    )


def served_model(
    spec: str | Path,
    *,
    sot: str | None = None,
    trust_remote_code: bool = False,
    log: LogCallback | None = None,
) -> ServedModel:
    """The tokenizer side of a served model: ``spec`` is a named model, a folder (weights not
    needed) or a hub id in the local cache; ``sot`` the start-of-text rule (default: the named
    model's, else 'auto').

    >>> served_model("smollm2").sot.ids                                          # doctest: +SKIP
    (0,)
    """
    if not isinstance(spec, (str, Path)):
        raise ModelLoadError(
            f"a served model is named by a folder or a name, got {type(spec).__name__}",
            hint="pass the served model's tokenizer folder or a named model (e.g. 'smollm2')",
        )
    name, path = _folder(str(spec), log)
    if not (path / "tokenizer.json").is_file():
        raise ModelLoadError(
            f"model folder {str(path)!r} has no tokenizer (tokenizer.json)",
            hint="copy the served model's tokenizer files (tokenizer.json, tokenizer_config.json, "
            "config.json) into a folder and pass it",
        )
    code = _custom_code(path)
    if code and not trust_remote_code:
        raise ModelLoadError(
            f"model folder {str(path)!r} asks to run its own Python code ({'; '.join(code)})",
            hint="read the code and pass --trust-remote-code if you trust it",
        )
    tokenizer = _load_tokenizer(path, trust_remote_code=trust_remote_code)
    rule = sot if sot is not None else (named_model(name).sot if is_named_model(name) else "auto")
    vocab = len(tokenizer.tok)
    try:
        cfg = json.loads((path / "config.json").read_text(encoding="utf-8"))
        v = cfg.get("vocab_size") or (cfg.get("text_config") or {}).get("vocab_size")
        if isinstance(v, int) and not isinstance(v, bool) and v > vocab:
            vocab = v  # the logits' width: padded vocabularies have rows no token maps to
    except (OSError, ValueError, AttributeError):
        pass
    return ServedModel(
        name=name,
        source=str(spec),
        path=path,
        fingerprint=tokenizer_fingerprint(tokenizer.tok),
        tokenizer=tokenizer,
        sot=resolve_sot(tokenizer, rule),
        vocab_size=vocab,
        trust_remote_code=trust_remote_code,
    )
