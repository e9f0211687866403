"""Shared fixtures. Tiers: unit (no marker), integration (tiny GPT), real (SmolLM2), slow."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

from _paths import DATA

# Idle OpenMP threads sleep instead of spinning: on a shared 2-core machine spinning threads of
# several processes starve each other (a 10x slowdown measured here). Set before torch loads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# Reproducible property tests in CI: the same examples every run.
settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("dev", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return DATA


def _build_random_gpt2(out: Path, *, seed: int = 0, n_layer: int = 2, n_embd: int = 64) -> Path:
    """A randomly initialized tiny GPT-2 with a BPE tokenizer trained on a paragraph: exercises
    the HF loading path in unit tests without training anything substantial."""
    import numpy as np
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from memclaim.train.corpus import MarkovZipf
    from memclaim.train.toy import _train_tokenizer

    gen = MarkovZipf(n_words=120, seed=3)
    rng = np.random.default_rng(3)
    tok = _train_tokenizer([gen.passage(rng, n_words=80) for _ in range(40)], 300)
    torch.manual_seed(seed)
    cfg = GPT2Config(
        vocab_size=len(tok),
        n_positions=256,
        n_embd=n_embd,
        n_layer=n_layer,
        n_head=4,
        bos_token_id=0,
        eos_token_id=0,
    )
    model = GPT2LMHeadModel(cfg)
    model.save_pretrained(str(out), safe_serialization=True)
    tok.save_pretrained(str(out))
    return out


@pytest.fixture(scope="session")
def random_model_dir(tmp_path_factory) -> Path:
    return _build_random_gpt2(tmp_path_factory.mktemp("random-gpt2"))


@pytest.fixture(scope="session")
def random_model(random_model_dir):
    from memclaim.models import load_model

    return load_model(str(random_model_dir), load_weights=True)


@pytest.fixture(scope="session")
def toy_dir():
    from memclaim.train.toy import ensure_toy_model

    return ensure_toy_model()


@pytest.fixture(scope="session")
def toy(toy_dir):
    from memclaim.models import load_model

    return load_model("toy", load_weights=True)


@pytest.fixture(scope="session")
def toy_data(toy_dir):
    from memclaim.train.toy import toy_data as _td

    return _td()


@pytest.fixture(scope="session")
def smollm2():
    from memclaim.models import load_model

    return load_model("smollm2", load_weights=True)


@pytest.fixture(scope="session")
def gemma():
    from memclaim.models import load_model

    return load_model("gemma3-270m", load_weights=True)


# The real tier runs on SmolLM2 in CI; the same checks on Gemma 3 270M (vocabulary 262,144,
# about 2.5x slower per window here) are `slow`: `make test-slow` or `pytest -m slow`.
REAL_MODELS = [
    pytest.param("smollm2", id="smollm2"),
    pytest.param("gemma3-270m", id="gemma3-270m", marks=pytest.mark.slow),
]


@pytest.fixture(scope="session", params=REAL_MODELS)
def real_model(request):
    """A loaded real model: SmolLM2 (real tier), Gemma 3 270M (slow tier)."""
    return request.getfixturevalue("smollm2" if request.param == "smollm2" else "gemma")


@pytest.fixture(params=REAL_MODELS)
def real_model_name(request) -> str:
    """The CLI name of a real model (SmolLM2 in CI, Gemma 3 270M in the slow tier)."""
    return request.param
