"""Models: the batched interface (:mod:`.base`), HF/GGUF loading (:mod:`.loader`), the tiny GPT."""
from .base import LanguageModel, SyntheticLM
from .loader import load_model as _load


def load_model(spec, **kwargs):
    """See :func:`memclaim.models.loader.load_model` (imported lazily: it needs transformers)."""
    return _load(spec, **kwargs)


__all__ = ["LanguageModel", "SyntheticLM", "load_model"]
