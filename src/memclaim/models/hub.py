"""The local HuggingFace hub cache: a hub id ('org/name', 'org/name@revision') found there,
never downloaded.

Split out of :mod:`memclaim.models.loader` (issue 26), which re-exports these names.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..errors import ModelLoadError

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
        folder = snapshot_download(
            repo, revision=revision or None, cache_dir=str(cache), local_files_only=True
        )
    except (LocalEntryNotFoundError, FileNotFoundError, OSError, ValueError) as exc:
        raise ModelLoadError(
            f"model {spec!r} is not a named model, not an existing path, and not in the local HuggingFace cache "
            f"{str(cache)!r} ({type(exc).__name__})",
            hint=f"memclaim never downloads: fetch it once (huggingface-cli download {repo}), set HF_HUB_CACHE to the "
            "cache that holds it, or pass the model folder",
        ) from None
    return Path(folder)
