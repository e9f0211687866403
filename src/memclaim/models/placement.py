"""Where a model's weights live and run: ``--device``, ``--device-map``, ``--max-memory``,
``--offload-folder`` and ``--dtype auto``.

* ``device``: ``auto`` (the first GPU when one is present, else the CPU), ``cpu``, ``cuda`` (the
  first GPU) or ``cuda:N``. A device that is not there is refused, naming the devices that are.
* ``device_map="auto"``: accelerate's big-model inference (the path peer toolkits take,
  ``from_pretrained(device_map=..., max_memory=..., offload_folder=...)``): the layers are
  spread over the visible GPUs in order, what does not fit goes to CPU memory, then to the
  offload folder on disk. memclaim computes the map itself with transformers' own
  ``get_balanced_memory`` + ``infer_auto_device_map`` on an empty (meta) copy of the model,
  *before* any weight is read, so that (1) the unembedding (``lm_head``) and a tied input
  embedding are put on the first compute device (the scored logits are computed there, in
  float32, from a resident matrix) and (2) a model that does not fit the stated memory without
  an offload folder is refused before any store is touched or any window scored.
* Every offloaded layer *runs* on the first compute device (accelerate moves its weights there
  for its forward pass), so a run's numerics are those of that device's class: ``cpu`` or
  ``cuda``. That class and the dtype enter the procedure (see :mod:`memclaim.procedure`).

Only this module decides placement; :mod:`memclaim.models.loader` applies it at load time.
The number of visible GPUs comes from :func:`cuda_device_count` (tests replace it to check the
logic on a machine without a GPU).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import InputError, ModelLoadError
from ..fsutil import available_memory

if TYPE_CHECKING:
    from transformers import PretrainedConfig

__all__ = [
    "Placement",
    "resolve_placement",
    "resolve_device",
    "resolve_dtype",
    "parse_max_memory",
    "visible_devices",
    "cuda_device_count",
    "plan_device_map",
    "DEVICE_CHOICES",
    "DEVICE_MAPS",
    "DTYPE_CHOICES",
]

DEVICE_CHOICES = "auto, cpu, cuda, cuda:N"
DEVICE_MAPS = ("auto",)
DTYPE_CHOICES = ("auto", "float32", "bfloat16", "float16", "float64")
_SIZE_FORM = (
    "DEVICE=SIZE, e.g. cuda:0=20GiB, 0=20GiB or cpu=64GB (units B, KB, MB, GB, KiB, MiB, GiB, TiB)"
)


def cuda_device_count() -> int:
    """The CUDA devices PyTorch sees (0 without a GPU or without a CUDA build).

    >>> cuda_device_count()  # on a machine without a GPU  # doctest: +SKIP
    0
    """
    import torch

    try:
        return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0
    except (
        RuntimeError,
        AssertionError,
    ):  # a broken driver reads as no GPU; the error below says what is seen
        return 0


def visible_devices(n_cuda: int | None = None) -> list[str]:
    """['cpu', 'cuda:0', ...]: what a ``--device`` may name here.

    >>> visible_devices(2)
    ['cpu', 'cuda:0', 'cuda:1']
    """
    n = cuda_device_count() if n_cuda is None else int(n_cuda)
    return ["cpu"] + [f"cuda:{i}" for i in range(n)]


def _seen(n_cuda: int) -> str:
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    gpus = "no CUDA device" if n_cuda == 0 else f"{n_cuda} CUDA device{'s' if n_cuda > 1 else ''}"
    return (
        f"this machine shows {gpus} (devices seen: {', '.join(visible_devices(n_cuda))}"
        + (f"; CUDA_VISIBLE_DEVICES={env!r}" if env is not None else "")
        + ")"
    )


def resolve_device(spec: str | None, *, n_cuda: int | None = None) -> str:
    """``auto``/``cpu``/``cuda``/``cuda:N`` -> a concrete device ('cpu' or 'cuda:N'); refuses a
    device that is not there, naming the devices it sees.

    >>> resolve_device("auto", n_cuda=0), resolve_device("cuda", n_cuda=2)
    ('cpu', 'cuda:0')
    """
    n = cuda_device_count() if n_cuda is None else int(n_cuda)
    s = "auto" if spec is None else str(spec).strip().lower()
    if s == "auto":
        return "cuda:0" if n > 0 else "cpu"
    if s == "cpu":
        return "cpu"
    m = re.fullmatch(r"cuda(?::(\d+))?", s)
    if m is None:
        raise InputError(
            f"--device {spec!r} is not a device memclaim can use",
            hint=f"use one of {DEVICE_CHOICES}; {_seen(n)}",
        )
    idx = int(m.group(1) or 0)
    if n == 0:
        raise InputError(
            f"--device {spec!r}: {_seen(n)}",
            hint="use --device cpu (or auto), or run on a machine with a GPU and a CUDA build of PyTorch",
        )
    if idx >= n:
        raise InputError(
            f"--device {spec!r}: there is no GPU {idx}; {_seen(n)}",
            hint=f"use one of {', '.join(visible_devices(n)[1:])}",
        )
    return f"cuda:{idx}"


def device_class(device: str) -> str:
    """'cpu' or 'cuda' (what decides the numerics of a run)."""
    return str(device).split(":")[0]


def resolve_dtype(dtype: str | None, device: str, *, bf16_supported: bool | None = None) -> str:
    """``auto``: a bfloat16 body on a GPU that supports it (float32 on one that does not), float32 on
    the CPU; any other name is returned as given (checked by the loader). The unembedding and
    log-softmax stay float32 or better whatever the body (:mod:`memclaim.models.hf`).

    >>> resolve_dtype("auto", "cuda:0", bf16_supported=True), resolve_dtype("auto", "cpu")
    ('bfloat16', 'float32')
    """
    d = "auto" if dtype is None else str(dtype)
    if d != "auto":
        if d not in DTYPE_CHOICES:
            raise ModelLoadError(
                f"unknown dtype {dtype!r}", hint=f"use one of {', '.join(DTYPE_CHOICES)}"
            )
        return d
    if device_class(device) != "cuda":
        return "float32"
    if bf16_supported is None:
        import torch

        bf16_supported = bool(torch.cuda.is_bf16_supported())
    return "bfloat16" if bf16_supported else "float32"


def _parse_size(text: str, entry: str) -> int:
    from accelerate.utils import convert_file_size_to_int

    t = text.strip()
    if re.fullmatch(r"\d+", t):
        return int(t)
    if not re.fullmatch(r"\d+(\.\d+)?\s*([KMGT]i?B)", t, flags=re.IGNORECASE):
        raise InputError(
            f"--max-memory {entry!r}: {text.strip()!r} is not a size", hint=f"write {_SIZE_FORM}"
        )
    t = t.replace(" ", "")
    if t.upper().endswith("TIB"):
        return int(float(t[:-3]) * 2**40)
    if t.upper().endswith("TB"):
        return int(float(t[:-2]) * 10**12)
    try:
        return int(convert_file_size_to_int(t.upper().replace("IB", "iB")))
    except ValueError:
        raise InputError(
            f"--max-memory {entry!r}: {text.strip()!r} is not a size", hint=f"write {_SIZE_FORM}"
        ) from None


def parse_max_memory(
    entries: str | Iterable[str] | Mapping[str | int, int | str] | None,
    *,
    n_cuda: int | None = None,
) -> dict | None:
    """``--max-memory`` entries ('cuda:0=20GiB', '1=20GiB', 'cpu=64GB'; or a dict) -> accelerate's
    ``max_memory`` ({0: bytes, 'cpu': bytes}). Refuses a malformed entry with the expected form, a
    size of zero, a device named twice and a GPU that is not there.

    >>> parse_max_memory(["cuda:0=20GiB", "cpu=64GB"], n_cuda=1)
    {0: 21474836480, 'cpu': 64000000000}
    """
    if entries is None:
        return None
    if isinstance(entries, dict):
        items = [(str(k), v) for k, v in entries.items()]
    elif isinstance(entries, str):
        items = None
        entries = [entries]
    else:
        items = None
    if items is None:
        items = []
        for e in entries:
            if not isinstance(e, str) or e.count("=") != 1:
                raise InputError(
                    f"--max-memory {e!r} is not of the form DEVICE=SIZE", hint=f"write {_SIZE_FORM}"
                )
            k, v = e.split("=")
            items.append((k, v))
    if not items:
        return None
    n = cuda_device_count() if n_cuda is None else int(n_cuda)
    out: dict = {}
    for k, v in items:
        entry = f"{k}={v}"
        key = k.strip().lower()
        m = re.fullmatch(r"(?:cuda:)?(\d+)", key)
        if m is not None:
            idx = int(m.group(1))
            if idx >= n:
                raise InputError(
                    f"--max-memory {entry!r}: there is no GPU {idx}; {_seen(n)}",
                    hint="name only devices that are there (cpu, or cuda:N below the GPU count)",
                )
            dev = idx
        elif key == "cpu":
            dev = "cpu"
        elif key == "disk":
            raise InputError(
                f"--max-memory {entry!r}: the disk is not limited by --max-memory",
                hint="layers that fit neither the GPUs nor the CPU go to --offload-folder DIR",
            )
        else:
            raise InputError(
                f"--max-memory {entry!r}: {k.strip()!r} is not a device", hint=f"write {_SIZE_FORM}"
            )
        size = (
            int(v) if isinstance(v, int) and not isinstance(v, bool) else _parse_size(str(v), entry)
        )
        if size <= 0:
            raise InputError(
                f"--max-memory {entry!r}: a device's memory must be more than 0 bytes",
                hint=f"write {_SIZE_FORM}, or leave the device out",
            )
        if dev in out:
            raise InputError(
                f"--max-memory names {k.strip()!r} twice", hint="give each device once"
            )
        out[dev] = size
    return out


@dataclass(frozen=True)
class Placement:
    """A resolved placement: the first compute device, the device map rule and its limits."""

    device: str = "cpu"  # 'cpu' or 'cuda:N': where the unembedding and every offloaded layer run
    device_map: str | None = None  # None (the whole model on ``device``) or 'auto'
    max_memory_items: tuple | None = (
        None  # accelerate's max_memory as pairs ((0, bytes), ('cpu', bytes))
    )
    offload_folder: str | None = None
    n_cuda: int = field(default=0, compare=False)

    @property
    def max_memory(self) -> dict | None:
        """accelerate's form {0: bytes, 'cpu': bytes} (None: what accelerate sees free)."""
        return None if self.max_memory_items is None else dict(self.max_memory_items)

    @property
    def device_class(self) -> str:
        return device_class(self.device)

    def to_dict(self) -> dict:
        d = {"device": self.device, "device_class": self.device_class}
        if self.device_map is not None:
            d.update(
                device_map=self.device_map,
                max_memory=None
                if self.max_memory is None
                else {str(k): v for k, v in self.max_memory.items()},
                offload_folder=self.offload_folder,
            )
        return d


def resolve_placement(
    *,
    device: str | None = "auto",
    device_map: str | None = None,
    max_memory: str | Iterable[str] | Mapping[str | int, int | str] | None = None,
    offload_folder: str | Path | None = None,
    n_cuda: int | None = None,
) -> Placement:
    """Check and resolve the placement options (no model is read).

    >>> resolve_placement(device="cuda", device_map="auto", max_memory=["0=20GiB", "cpu=8GiB"], n_cuda=1)
    Placement(device='cuda:0', device_map='auto', max_memory_items=((0, 21474836480), ('cpu', 8589934592)),
              offload_folder=None, n_cuda=1)
    """
    n = cuda_device_count() if n_cuda is None else int(n_cuda)
    dev = resolve_device(device, n_cuda=n)
    if device_map is not None and device_map not in DEVICE_MAPS:
        raise InputError(
            f"--device-map {device_map!r} is not supported",
            hint="use --device-map auto (shard over the visible GPUs, offload the rest), or leave it out",
        )
    mm = parse_max_memory(max_memory, n_cuda=n)
    if device_map is None:
        if mm is not None:
            raise InputError(
                f"--max-memory {max_memory!r} needs --device-map auto",
                hint="add --device-map auto, or drop --max-memory (without a device map the whole model "
                "goes on --device)",
            )
        if offload_folder is not None:
            raise InputError(
                f"--offload-folder {str(offload_folder)!r} needs --device-map auto",
                hint="add --device-map auto, or drop --offload-folder",
            )
        return Placement(device=dev, n_cuda=n)
    if mm is not None:
        gpus = sorted(k for k in mm if k != "cpu")
        if device_class(dev) == "cpu" and gpus:
            raise InputError(
                f"--max-memory gives GPU memory ({', '.join(f'cuda:{g}' for g in gpus)}) but the device "
                "is the CPU",
                hint="drop --device cpu (or name only cpu in --max-memory)",
            )
        if device_class(dev) == "cuda":
            if not gpus:
                raise InputError(
                    f"--max-memory {max_memory!r} gives no GPU memory, but the device is {dev}",
                    hint="add cuda:N=SIZE entries, or use --device cpu to run on the CPU",
                )
            dev = f"cuda:{gpus[0]}"  # the first GPU of the map computes the unembedding
        mm = dict(mm)
        mm.setdefault("cpu", _cpu_available())
    elif device_class(dev) == "cpu":
        mm = {"cpu": _cpu_available()}  # the CPU alone (GPUs are not used when --device cpu)
    if offload_folder is not None:
        p = Path(offload_folder).expanduser()
        if p.exists() and not p.is_dir():
            raise InputError(
                f"--offload-folder {str(offload_folder)!r} exists and is not a folder",
                hint="pass a folder (memclaim writes its offloaded layers in a new subfolder there)",
            )
        q = p.absolute()
        while not q.exists() and q != q.parent:
            q = q.parent
        if not os.access(q, os.W_OK | os.X_OK):
            raise InputError(
                f"--offload-folder {str(offload_folder)!r} cannot be written ({str(q)!r} is not "
                "writable)",
                hint="choose a folder on a local disk you can write, with room for the model",
            )
        offload_folder = str(p)
    return Placement(
        device=dev,
        device_map="auto",
        max_memory_items=None if mm is None else tuple(mm.items()),
        offload_folder=offload_folder,
        n_cuda=n,
    )


def _cpu_available() -> int:
    return available_memory()


def _fmt_bytes(n: float) -> str:
    return (
        f"{n / 2**30:.2f} GiB"
        if n >= 2**30
        else f"{n / 2**20:.2f} MiB"
        if n >= 2**20
        else f"{n / 2**10:.1f} KiB"
    )


def _module_bytes(module) -> int:
    return sum(p.numel() * p.element_size() for p in module.parameters())


def plan_device_map(
    config: PretrainedConfig, placement: Placement, dtype: str, *, path: str | None = None
) -> dict:
    """The device map of ``placement`` (device_map 'auto') for a model of ``config`` in ``dtype``:
    transformers' own ``get_balanced_memory`` + ``infer_auto_device_map`` on an empty (meta) model,
    with room reserved on the first compute device for the unembedding and the input embedding,
    which are then put there. Refuses, before any weight is read, a map that needs the disk when
    there is no offload folder, and a first device too small for the unembedding.

    >>> from transformers import AutoConfig  # doctest: +SKIP
    >>> config = AutoConfig.from_pretrained(memclaim.load_model("toy").path)  # doctest: +SKIP
    >>> plan_device_map(config, resolve_placement(device="cpu", device_map="auto", max_memory=["cpu=8GiB"]), "float32")  # doctest: +SKIP
    {'': 'cpu'}
    """
    import torch
    from accelerate import init_empty_weights
    from transformers import AutoModelForCausalLM
    from transformers.integrations.accelerate import get_balanced_memory, infer_auto_device_map

    tdtype = getattr(torch, dtype)
    with init_empty_weights():
        meta = AutoModelForCausalLM.from_config(config, dtype=tdtype)
    main: object = "cpu" if placement.device_class == "cpu" else int(placement.device.split(":")[1])
    head = meta.get_output_embeddings()
    emb = meta.get_input_embeddings()
    names = {id(mod): name for name, mod in meta.named_modules()}
    keep = [names[id(head)]] + ([names[id(emb)]] if emb is not None and id(emb) in names else [])
    sizes = {name: _module_bytes(meta.get_submodule(name)) for name in keep}
    extra = (
        head.weight.numel() * 4 if head.weight.dtype != torch.float32 else 0
    )  # its float32 copy (models/hf.py)
    mm = dict(placement.max_memory or {})
    if not mm:  # GPUs and CPU as accelerate sees them
        from transformers.integrations.accelerate import get_max_memory

        mm = get_max_memory(None)
        if main != "cpu":  # --device cuda:N: the GPUs from N on
            mm = {k: v for k, v in mm.items() if k == "cpu" or (isinstance(k, int) and k >= main)}
    if main not in mm:
        mm[main] = _cpu_available()
    what = str(path or getattr(config, "_name_or_path", "") or "the model")
    tied = head.weight is getattr(emb, "weight", None) or bool(
        getattr(config, "tie_word_embeddings", False)
    )
    need = max(sizes.values()) if tied else sum(sizes.values())  # a tied matrix is held once
    if mm[main] <= need + extra:
        raise ModelLoadError(
            f"--max-memory gives the first compute device {placement.device} "
            f"{_fmt_bytes(mm[main])}, less than the unembedding and embedding of {what} need there "
            f"({_fmt_bytes(need + extra)})",
            hint=f"give {placement.device} more than {_fmt_bytes(need + extra)} in --max-memory",
        )
    no_split = getattr(meta, "_no_split_modules", None)

    def infer(limits):
        if main != "cpu":
            limits = get_balanced_memory(meta, max_memory=limits, no_split_module_classes=no_split)
        return dict(
            infer_auto_device_map(meta, max_memory=limits, no_split_module_classes=no_split)
        )

    def device_of(dmap, name):
        hits = [k for k in dmap if k == "" or name == k or name.startswith(k + ".")]
        return dmap[max(hits, key=len)] if hits else None

    budget = dict(mm)
    budget[main] -= extra
    dmap = infer(budget)
    away = [n for n in keep if device_of(dmap, n) != main]
    if away:  # plan again with their room taken from the first device, then put them there
        budget[main] -= sum(sizes[n] for n in away)
        dmap = infer(budget)
    for name in keep:  # the scored logits come from a resident matrix on the first compute device
        for k in [k for k in dmap if k == name or k.startswith(name + ".")]:
            del dmap[k]
        if device_of(dmap, name) != main:
            dmap[name] = main
    if "disk" in dmap.values() and placement.offload_folder is None:
        on_disk = [k or "(the whole model)" for k, v in dmap.items() if v == "disk"]
        total = _module_bytes(meta)
        raise ModelLoadError(
            f"{what} ({_fmt_bytes(total)} in {dtype}) does not fit the stated memory "
            f"({_limits(placement.max_memory or mm)}):"
            f" {len(on_disk)} module(s) would go to disk ({', '.join(on_disk[:4])}"
            f"{', ...' if len(on_disk) > 4 else ''}) and there is no offload folder",
            hint="add --offload-folder DIR (a local disk with room for those layers), or give more "
            "memory in --max-memory",
        )
    return dmap


def _limits(mm: dict) -> str:
    return ", ".join(f"{k if k == 'cpu' else f'cuda:{k}'}={_fmt_bytes(v)}" for k, v in mm.items())


def map_summary(dmap: dict | None) -> dict | None:
    """How many modules each device of a device map holds ({'cuda:0': 12, 'disk': 3})."""
    if not dmap:
        return None
    out: dict = {}
    for v in dmap.values():
        name = f"cuda:{v}" if isinstance(v, int) else str(v)
        out[name] = out.get(name, 0) + 1
    return out
