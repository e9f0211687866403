"""Models: the batched interface (:mod:`.base`), HF/GGUF loading (:mod:`.loader`, which assembles
:mod:`.tokenizer`, :mod:`.start_of_text`, :mod:`.fingerprint`, :mod:`.weights`, :mod:`.gguf` and
:mod:`.hub`), placement (:mod:`.placement`), named models (:mod:`.registry`; the tiny GPT ``toy``
is registered by :mod:`memclaim.train`)."""

from .base import LanguageModel, SyntheticLM
from .loader import LoadedModel, load_model
from .registry import named_models, register_model

__all__ = [
    "LanguageModel",
    "SyntheticLM",
    "LoadedModel",
    "load_model",
    "named_models",
    "register_model",
]
