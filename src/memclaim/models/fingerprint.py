"""Model fingerprints: what determines a model folder's scores, hashed (scheme 2), the scheme 1
of memclaim 0.1.0 kept to recognise old stores, and the per-file sha256 memo under the cache.

Split out of :mod:`memclaim.models.loader` (issue 26), which re-exports these names.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

from ..errors import ModelLoadError
from ..fsutil import MARKER_FILE, atomic_write_text, cache_dir, sha256_bytes, sha256_file

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
_NOT_SCORED = {
    "memclaim.json",
    "memclaim_train.json",
    "toy_data.json",
    "chain_base.json",
    "membership.json",
    "generation_config.json",
    "training_args.bin",
    "trainer_state.json",
    "all_results.json",
    "train_results.json",
    "eval_results.json",
    "optimizer.pt",
    "scheduler.pt",
    "scaler.pt",
    MARKER_FILE,
}
_NOT_SCORED_SUFFIXES = (".md", ".txt", ".rst", ".png", ".jpg", ".jpeg", ".gif", ".svg", ".lock")
_SCORED_TEXT = {"merges.txt", "vocab.txt"}  # tokenizer files with a documentation suffix
# config.json fields that record who wrote the folder and how, not what the model computes: the
# load dtype is the procedure's own (recorded there) and the weights carry the stored dtype
_CONFIG_NOT_SCORED = {
    "transformers_version",
    "_name_or_path",
    "_commit_hash",
    "dtype",
    "torch_dtype",
    "use_cache",
}


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
        raise ModelLoadError(
            f"config {str(path)!r} is not readable JSON: {exc}",
            hint="restore the model folder's config.json",
        ) from None
    if not isinstance(cfg, dict):
        raise ModelLoadError(
            f"config {str(path)!r} is not a JSON object",
            hint="restore the model folder's config.json",
        )
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
    stores written then (:mod:`memclaim.store.store` migration); it hashed files that change no
    score, such as the tiny GPT's record of its training wall time.

    >>> folder_fingerprint_v1(load_model("smollm2").path)[:12]  # doctest: +SKIP
    'a2e19b5d562f'
    """
    parts = []
    for f in sorted(Path(path).iterdir()):
        if (
            not f.is_file()
            or f.name.startswith(".")
            or f.suffix in (".md", ".txt")
            and f.name != "merges.txt"
        ):
            continue
        if f.name in ("memclaim.json",):
            continue
        parts.append(f"{f.name}:{_file_sha_cached(f)}")
    if not parts:
        raise ModelLoadError(f"model folder {str(path)!r} is empty")
    return sha256_bytes("\n".join(parts).encode())
