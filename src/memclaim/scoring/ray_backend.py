"""Ray-distributed scoring into the same durable store (optional extra ``memclaim[ray]``).

The science does not change: a pool of Ray actors each loads the model once, builds its own
:class:`~memclaim.scoring.engine.TeacherForcingEngine` and scores the *same* deterministic
work units as the local backend with the same
:func:`~memclaim.scoring.local_backend.score_unit` (imported at the top: the local backend's
module imports neither this one nor the runner, so there is no import circle), so on CPU in
float32 the scores are bit-identical to a local run at the same thread count: the
score log q_{θ,φ}(s | p) ([EM] §2, Eq. 1) is a function of the procedure ([EM] Def. B.2) and the
window, never of where it was computed, and what the workers compute is read from the run's
recorded procedure.

Who writes the unit files
-------------------------
A worker that can see the store folder at the same path (checked once per store with a probe
file the driver writes) serializes and writes its unit file itself, atomically (temp file,
fsync, rename: two writers of the same content-addressed unit simply replace one complete
file with another), and returns a small receipt; the driver only checks the file exists and
records it in ``manifest.json``, which stays single-writer. A worker that cannot see the store
(a cluster node without the shared filesystem) returns the unit's scores instead and the
driver writes the file. Writing on the workers keeps Parquet encoding, compression and fsync
off the driver, which would otherwise serialize every unit of every GPU; returning results
keeps clusters without shared storage working. ``write="worker"`` or ``"driver"`` forces one.

Fault tolerance
---------------
Actors restart when their process dies (``max_restarts``) and Ray re-runs the unit they were
scoring (``max_task_retries``). A unit is idempotent: it is keyed by content, a file is
complete or absent, and the driver records units by id, so a unit retried after its worker
died mid-unit (scored but not written, or written but not acknowledged) is neither lost nor
duplicated. When Ray gives up on an actor, the driver drops it from the pool and gives its
units to the others; when no worker is left it stops with every finished unit in the store,
and re-running the same command resumes (the store adopts unit files the manifest missed).
"""

from __future__ import annotations

import math
import os
import secrets
import socket
import time
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ..decoding import Policy, parse_policies
from ..errors import InputError, MemclaimError, ModelLoadError, StoreError, require
from ..fsutil import atomic_write_text
from ..jsonutil import ResultMixin
from ..models import device as device_mod
from ..models.loader import load_model
from ..progress import LogCallback, emit_log
from ..runtime import Runtime
from ..store.store import ScoreStore
from ..validate import batch_size as check_batch_size
from ..validate import integer, nonneg
from .backends import ScoringJob, register_backend
from .engine import TeacherForcingEngine
from .local_backend import score_unit
from .units import UnitReceipt, WorkUnit

if TYPE_CHECKING:
    from types import ModuleType

WRITE_MODES = ("auto", "worker", "driver")
WAIT_NOTE_SECONDS = 30.0  # say why nothing happens when workers wait this long for resources
PROBE_PREFIX = ".ray-probe-"


class WorkerError(MemclaimError):
    """Distributed workers failed in a way that retries could not absorb."""


#: how long a connection attempt to a Ray cluster's --address may take (TCP connect, then the
#: gRPC server's first answer); issue 25: ray.init on a wrong address waited 820 s
RAY_CONNECT_TIMEOUT_S = 10.0
# a gRPC call Ray's GCS serves: a Ray cluster answers it (even a refusal of a missing auth token
# is a gRPC answer); a port that is not gRPC, or a proxy that speaks HTTP/2 for every address,
# answers with an HTTP error or not at all
_GCS_METHOD = b"/ray.rpc.NodeInfoGcsService/GetClusterId"


def _h2_frame(ftype: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    """One HTTP/2 frame (RFC 9113 §4.1): 24-bit length, type, flags, 31-bit stream id."""
    return (
        len(payload).to_bytes(3, "big")
        + bytes([ftype, flags])
        + stream.to_bytes(4, "big")
        + payload
    )


def _grpc_request(path: bytes, authority: bytes) -> bytes:
    """The client preface, empty SETTINGS, then a unary gRPC call of ``path`` with an empty
    message on stream 1: HPACK (RFC 7541) with indexed names and literal values, no Huffman."""

    def lit(
        index: int, value: bytes
    ) -> bytes:  # literal without indexing, indexed name (4-bit prefix)
        return bytes([index, len(value)]) + value

    headers = (
        b"\x83\x86"  # :method POST, :scheme http (static table 3 and 6)
        + lit(4, path)
        + lit(1, authority)  # :path, :authority
        + b"\x0f\x10"
        + bytes([16])
        + b"application/grpc"  # content-type (static 31)
        + b"\x00\x02te\x08trailers"
    )
    return (
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
        + _h2_frame(4, 0, 0)
        + _h2_frame(1, 0x4, 1, headers)  # HEADERS, END_HEADERS
        + _h2_frame(0, 0x1, 1, b"\x00\x00\x00\x00\x00")
    )  # DATA: an empty message, END_STREAM


def _grpc_answer(sock, deadline: float, *, client: bool) -> str | None:
    """None when the server answers stream 1 as a gRPC server (``client``: any gRPC server, the
    Ray Client's; else one that serves the GCS method), else what it did instead."""
    buf = b""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return "no gRPC answer"
        sock.settimeout(left)
        try:
            chunk = sock.recv(65536)
        except OSError:
            return "no gRPC answer"
        if not chunk:
            return "the connection was closed without a gRPC answer"
        buf += chunk
        while len(buf) >= 9:
            n = int.from_bytes(buf[:3], "big")
            if len(buf) < 9 + n:
                break
            ftype, flags, sid, payload = (
                buf[3],
                buf[4],
                int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF,
                buf[9 : 9 + n],
            )
            buf = buf[9 + n :]
            if ftype == 4 and not flags & 0x1:
                sock.sendall(_h2_frame(4, 0x1, 0))  # acknowledge the server's SETTINGS
            elif ftype == 0 and sid == 1 and payload:
                return None  # a reply message
            elif ftype == 1 and sid == 1:
                # :status 200 is static entry 8 (0x88); grpc-status 12 is UNIMPLEMENTED (not Ray's GCS)
                if not (payload[:1] == b"\x88" or b"\x03200" in payload[:8]):
                    return "an HTTP error instead of a gRPC answer (another kind of server, or a proxy)"
                if not client and b"grpc-status\x0212" in payload:
                    return "a gRPC server that is not a Ray cluster's GCS (UNIMPLEMENTED)"
                return None
            elif ftype in (3, 7):  # RST_STREAM, GOAWAY
                return "the call was reset without a gRPC answer"


def probe_ray_address(address: str, timeout: float | None = None) -> None:
    """Check, within ``timeout`` seconds, that ``address`` (HOST:PORT of a cluster's GCS, or
    ray://HOST:PORT of a Ray Client server; ``timeout`` default :data:`RAY_CONNECT_TIMEOUT_S`)
    answers as a Ray cluster before ``ray.init`` is
    asked to join it: a TCP connection, then one gRPC call the GCS serves (any gRPC answer for a
    ray:// address). Ray itself retries a wrong address for many minutes (820 s in issue 25); this
    fails at once on a refused or unknown address and after ``timeout`` on one that never
    answers as gRPC. 'auto' and 'local' are Ray's own words and are not probed. Hand-written
    (HTTP/2 framing and HPACK literals, RFC 9113/7541): Ray has no connection timeout for
    ``ray.init(address=...)`` and the environment has no gRPC client library.

    >>> probe_ray_address("localhost")
    Traceback (most recent call last):
    memclaim.scoring.ray_backend.WorkerError: --address 'localhost' is not HOST:PORT
      fix: pass the address `ray start --head` printed, e.g. --address 10.0.0.5:6379
    """
    if address in ("auto", "local"):
        return
    timeout = RAY_CONNECT_TIMEOUT_S if timeout is None else float(timeout)
    client = address.startswith("ray://")
    hostport = address.split("://", 1)[1] if "://" in address else address
    host, _, port = hostport.rpartition(":")
    host = host.strip("[]")  # [::1]:6379
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise WorkerError(
            f"--address {address!r} is not HOST:PORT",
            hint="pass the address `ray start --head` printed, e.g. --address 10.0.0.5:6379",
        )
    fix = (
        "check the address `ray status` prints on the head node (HOST:6379, or ray://HOST:10001 for Ray Client) "
        "and that this machine can reach it, or leave out --address to start a local cluster"
    )
    deadline = time.monotonic() + timeout
    try:
        sock = socket.create_connection((host, int(port)), timeout=timeout)
    except OSError as exc:
        why = "timed out" if isinstance(exc, socket.timeout) else (exc.strerror or str(exc))
        raise WorkerError(
            f"cannot connect to the Ray cluster at {address!r}: {why} (connection attempt timeout "
            f"{timeout:g} s)",
            hint=fix,
        ) from None
    with sock:
        try:
            sock.sendall(
                _grpc_request(
                    _GCS_METHOD, f"{host}:{port}".encode("idna" if not host.isascii() else "ascii")
                )
            )
            why = _grpc_answer(sock, deadline, client=client)
        except OSError as exc:
            why = f"the connection failed ({exc.strerror or exc})"
    if why is not None:
        raise WorkerError(
            f"{address!r} accepted a connection but is not a Ray cluster: {why} within the connection "
            f"attempt timeout of {timeout:g} s",
            hint=fix,
        )


def require_ray() -> ModuleType:
    """Import Ray lazily; a missing install raises MissingExtraError naming ``memclaim[ray]``.

    >>> require_ray().__name__  # doctest: +SKIP
    'ray'
    """
    return require("ray", "ray")


# --------------------------------------------------------------------------- what a worker loads
@dataclass(frozen=True)
class ModelRef:
    """Enough to load the same model on a worker and prove it is the same (by fingerprint)."""

    path: str  # the HF folder the driver resolved
    source: str  # what the user asked for (a named model or .gguf is re-resolved on other nodes)
    dtype: str
    allow_pickle: bool
    fingerprint: str
    name: str
    trust_remote_code: bool = False  # the driver's opt-in, applied on every worker

    @classmethod
    def from_loaded(cls, model) -> ModelRef:
        return cls(
            path=str(model.path),
            source=str(model.source),
            dtype=model.dtype,
            allow_pickle=bool(model.allow_pickle),
            fingerprint=model.fingerprint,
            name=model.name,
            trust_remote_code=bool(getattr(model, "trust_remote_code", False)),
        )

    def load(self):
        """Load on a worker: the driver's folder if this node has it, else the original source;
        refuse a model whose fingerprint differs from the driver's (a different file at the
        same path would silently change every score)."""
        spec = self.path if Path(self.path).is_dir() else self.source
        # prompts already carry the start-of-text ids, so the worker needs no rule of its own
        m = load_model(
            spec,
            dtype=self.dtype,
            sot="none",
            allow_pickle=self.allow_pickle,
            trust_remote_code=self.trust_remote_code,
        )
        if m.fingerprint != self.fingerprint:
            raise ModelLoadError(
                f"the model on worker node {socket.gethostname()!r} ({spec!r}) has fingerprint "
                f"{m.fingerprint[:16]}, the driver's has {self.fingerprint[:16]}",
                hint="put the same model files on every node (or on a shared filesystem)",
            )
        return m


# --------------------------------------------------------------------------- test hooks
# ``RayBackend(fault=...)`` takes any picklable object with ``at(stage)``; each worker calls it at
# these stages of every unit: "scored" (the unit is scored, nothing written) and "written" (its
# file is written, the driver has not heard of it). The chaos tests' hook that kills the worker
# there lives beside them, in tests/ray_faults.py (docs/distributed.md: running them).
FAULT_STAGES = ("scored", "written")


class FaultHook(Protocol):
    def at(self, stage: str) -> None: ...


# --------------------------------------------------------------------------- the actor
class ScoringWorker:
    """The body of one Ray actor: loads the model once and scores units.

    Load errors are kept and raised from every call (a raised ``__init__`` would surface as an
    opaque ActorDiedError instead of the MemclaimError that says what to fix).
    """

    def __init__(
        self,
        model_ref: ModelRef,
        policy_specs: Sequence[str],
        *,
        batch_size: int,
        threads: int,
        device: str | None = None,
    ):
        t0 = time.perf_counter()
        self.batch_size = batch_size
        self.error: BaseException | None = None
        self.device = device or "cpu"
        self._stores: dict[tuple[str, str], object] = {}
        try:
            import torch
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()  # Ray forwards worker output to the driver's terminal
            torch.set_num_threads(threads)
            policies = parse_policies(list(policy_specs))
            if tuple(p.spec for p in policies) != tuple(policy_specs):
                raise ValueError(f"policies {policy_specs} do not round-trip on this worker")
            lm = model_ref.load().lm
            if device and device != "cpu":
                # the model on the accelerator, reporting that device: the engine then takes the
                # batched schedule (statistics batched across windows, one host copy per batch),
                # the same GPU path as a local run on that device
                lm = device_mod.to_device(lm, device)
            self.engine = TeacherForcingEngine(lm, policies)
        except Exception as exc:  # noqa: BLE001 - re-raised from every call, see the class docstring
            self.error = exc
        self.load_seconds = time.perf_counter() - t0

    def info(self) -> dict:
        import torch

        engine = getattr(self, "engine", None)
        return {
            "pid": os.getpid(),
            "node": socket.gethostname(),
            "device": self.device,
            "lm_device": None if engine is None else str(engine.lm.device),
            "schedule": None if engine is None else engine.schedule,
            "threads": torch.get_num_threads(),
            "load_seconds": self.load_seconds,
            "error": None if self.error is None else f"{type(self.error).__name__}: {self.error}",
        }

    def _store_for(self, root: str | None, token: str | None):
        """The store at ``root`` if this worker sees the driver's probe there, else None."""
        if root is None:
            return None
        key = (root, token or "")
        if key not in self._stores:
            store = None
            try:
                if (Path(root) / f"{PROBE_PREFIX}{token}").read_text() == token:
                    store = ScoreStore(root, create=False)
            except (OSError, MemclaimError):
                store = None
            self._stores[key] = store
        return self._stores[key]

    def score(
        self,
        unit: WorkUnit,
        store_root: str | None = None,
        token: str | None = None,
        fault: FaultHook | None = None,
        must_write: bool = False,
        near_verbatim: dict | None = None,
        stats: str | None = None,
    ) -> dict:
        if self.error is not None:
            raise self.error
        if (
            stats is not None and stats != self.engine.stats.spec
        ):  # the run's statistics (run_stats)
            self.engine = TeacherForcingEngine(self.engine.lm, self.engine.policies, stats=stats)

        t0 = time.perf_counter()
        ft, ur = self.engine.forward_tokens, self.engine.unembed_rows
        res = score_unit(self.engine, unit, batch_size=self.batch_size, near_verbatim=near_verbatim)
        t_scored = time.perf_counter()
        if fault is not None:
            fault.at("scored")
        store = self._store_for(store_root, token)
        if store is None and must_write:
            raise StoreError(
                f"the worker on node {socket.gethostname()!r} cannot see the store {store_root!r}",
                hint="put the store on a filesystem every node mounts at the same path, or let "
                "the driver write the unit files (write='auto' or 'driver')",
            )
        out = {
            "unit_id": unit.unit_id,
            "n_items": unit.n_items,
            "pid": os.getpid(),
            "forward_tokens": self.engine.forward_tokens - ft,
            "unembed_rows": self.engine.unembed_rows - ur,
        }
        if store is not None:
            store.write_unit(res)
            if fault is not None:
                fault.at("written")
            out.update(written=True, result=None)
        else:
            out.update(written=False, result=res)
        out.update(score_seconds=t_scored - t0, seconds=time.perf_counter() - t0)
        return out


# --------------------------------------------------------------------------- results
@dataclass(frozen=True)
class WorkerStats(ResultMixin):
    worker: int
    node: str
    device: str
    threads: int
    pids: tuple[int, ...]  # the processes seen in this run, in order
    restarts: int  # process deaths Ray recovered from (observed as a new process id)
    units: int
    windows: int
    busy_seconds: float  # time inside score() (scoring + writing), summed over units
    windows_per_second: float  # windows / busy_seconds: this worker's own rate
    load_seconds: float  # model load of the (last) process
    alive: bool
    schedule: str = (
        "?"  # the engine's schedule on the worker: "batched" on a GPU, "cpu-invariant" on the CPU
    )


@dataclass(frozen=True)
class RayRunStats(ResultMixin):
    address: str
    workers: int
    threads_per_worker: int
    gpus_per_worker: float
    write_mode: str  # 'worker', 'driver', or 'mixed' (per unit, who wrote the file)
    units: int
    windows: int
    wall_seconds: float  # from the first submission to the last result
    startup_seconds: float  # cluster start/connect + first result (includes model loads)
    windows_per_second: float  # windows / wall_seconds, all workers together
    steady_windows_per_second: float  # after the first result (model loads excluded)
    restarts: int  # worker processes that died and were restarted by Ray
    requeued_units: int  # units moved to another worker after Ray gave up on an actor
    forward_tokens: int
    unembed_rows: int
    per_worker: tuple[WorkerStats, ...] = field(default_factory=tuple)


@dataclass
class _Slot:
    index: int
    actor: object
    ready_ref: object
    alive: bool = True
    inflight: int = 0
    units: int = 0
    windows: int = 0
    busy: float = 0.0
    pid: int | None = None  # the actor's current process, as last observed (kept across runs)
    pids: list = field(default_factory=list)  # processes seen in this run (restarts add more)
    restarts: int = 0  # in this run

    def observe(self, ray, pid: int | None) -> None:
        """Note the process that just answered; a new one means Ray restarted the actor."""
        if self.pid is None:
            try:  # the info() call was queued before any unit, so it has answered by now
                self.pid = ray.get(self.ready_ref, timeout=60)["pid"]
            except Exception:  # noqa: BLE001 - the first process died before answering
                self.pid = pid
            self.pids.append(self.pid)
        if pid is not None and pid != self.pid:
            self.restarts += 1
            self.pid = pid
            self.pids.append(pid)


# --------------------------------------------------------------------------- the backend
class RayBackend:
    """Scores work units on a pool of Ray actors (see the module docstring).

    ``run(units)`` starts the pool (and a local Ray cluster when no ``address`` is given and
    Ray is not already initialized) and stops it afterwards; ``with RayBackend(...) as b:`` keeps
    one pool for several runs. Units are handed out ``inflight_per_worker`` at a time per actor,
    so a worker never waits for the driver between units, and the next unit goes to whichever
    worker finishes first.
    """

    name = "ray"

    def __init__(
        self,
        model,
        policies: Sequence[Policy],
        *,
        batch_size: int = 16,
        workers: int | None = None,
        threads_per_worker: int = 1,
        gpus_per_worker: float = 0.0,
        address: str | None = None,
        write: str = "auto",
        inflight_per_worker: int = 2,
        max_restarts: int = 4,
        max_task_retries: int = 3,
        max_unit_attempts: int = 3,
        fault: FaultHook | None = None,
        init_kwargs: dict | None = None,
        log: LogCallback | None = None,
    ):
        self.model_ref = model if isinstance(model, ModelRef) else ModelRef.from_loaded(model)
        self.policies = tuple(policies)
        self.batch_size = check_batch_size(batch_size)
        self.workers = None if workers is None else integer("--workers", workers, minimum=1)
        self.threads = integer("--threads-per-worker", threads_per_worker, minimum=1)
        self.gpus = nonneg("--gpus-per-worker", gpus_per_worker)
        if write not in WRITE_MODES:
            raise InputError(f"write mode {write!r} is not one of {', '.join(WRITE_MODES)}")
        self.write = write
        self.address = address
        self.depth = integer("inflight per worker", inflight_per_worker, minimum=1)
        self.max_restarts = integer("max restarts", max_restarts, minimum=0)
        self.max_task_retries = integer("max task retries", max_task_retries, minimum=0)
        self.max_unit_attempts = integer("max unit attempts", max_unit_attempts, minimum=1)
        self.fault = fault
        self.log = log  # one-line notes (workers waiting for resources); None: silent
        self.init_kwargs = dict(init_kwargs or {})
        self._ray = None
        self._owns_ray = False
        self._slots: list[_Slot] = []
        self._store = None
        self._store_root: str | None = None
        self._token: str | None = None
        self._stats: dict = {}
        self.weights_loaded = False  # set once a worker has scored (loaded the model)
        self.stat_spec: str | None = None  # the run's statistics (set_stats); None: every statistic
        if address is not None:
            probe_ray_address(
                str(address)
            )  # a wrong --address fails here, within the stated timeout

    def set_stats(self, stats) -> None:
        """The statistics the next run computes (run_scoring calls it before ``run``)."""
        self.stat_spec = (
            None if stats is None else (stats if isinstance(stats, str) else stats.spec)
        )

    # ------------------------------------------------------------------ pool
    @property
    def device_class(self) -> str:
        """The device class whose numerics the workers' scores have: 'cuda' with GPUs per worker
        (their bodies run on a GPU, models/device.py), else 'cpu'. The procedure records it."""
        return "cuda" if self.gpus > 0 else "cpu"

    @property
    def actors(self) -> list:
        return [s.actor for s in self._slots]

    @property
    def started(self) -> bool:
        return bool(self._slots)

    def _init_ray(self):
        ray = require_ray()
        self._ray = ray
        if ray.is_initialized():
            return ray
        kw = {"include_dashboard": False, "logging_level": "ERROR", "log_to_driver": True}
        if self.address:
            kw["address"] = self.address
        else:
            n_cpus = (self.workers or max(1, (os.cpu_count() or 1) // self.threads)) * self.threads
            # address='local': a new cluster even if this machine runs another one (ray.init
            # would otherwise join it); unit results are small (tens of kB), so Ray's default
            # object store (30% of RAM) is far more than needed; Ray runs workers at nice 15,
            # which starves them on a machine that runs anything else, while here the workers
            # are the whole job, as the local backend is: nice 0 like it
            kw.update(
                address="local",
                num_cpus=n_cpus,
                _system_config={"worker_niceness": 0},
                object_store_memory=max(100 << 20, (32 << 20) * (self.workers or 1)),
            )
        kw.update(self.init_kwargs)
        try:
            ray.init(**kw)
        except ConnectionError as exc:
            raise WorkerError(
                f"cannot connect to the Ray cluster at {self.address!r}: {exc}",
                hint="start it with `ray start --head` and pass its address (host:6379), "
                "or leave out --address to start a local cluster",
            ) from None
        self._owns_ray = True
        return ray

    def _pool_size(self, ray) -> int:
        res = ray.cluster_resources()
        cpus, gpus = float(res.get("CPU", 0)), float(res.get("GPU", 0))
        if self.workers is not None:
            n = self.workers
        elif self.gpus > 0:
            n = int(math.floor(gpus / self.gpus + 1e-9))
        else:
            n = int(cpus // self.threads)
        if (
            n < 1
            or n * self.threads > cpus + 1e-9
            or (self.gpus > 0 and n * self.gpus > gpus + 1e-9)
        ):
            raise WorkerError(
                f"the Ray cluster has {cpus:g} CPUs and {gpus:g} GPUs; {max(n, 1)} worker(s) need "
                f"{max(n, 1) * self.threads} CPUs and {max(n, 1) * self.gpus:g} GPUs",
                hint="lower --workers, --threads-per-worker or --gpus-per-worker, or add nodes",
            )
        return n

    def start(self) -> RayBackend:
        if self.started:
            return self
        ray = self._init_ray()
        try:
            n = self._pool_size(ray)
        except BaseException:
            self.close()  # shut down a cluster this backend started
            raise
        cls = ray.remote(ScoringWorker)
        device = "cuda" if self.gpus > 0 else None
        specs = [p.spec for p in self.policies]
        for i in range(n):
            actor = cls.options(
                num_cpus=self.threads,
                num_gpus=self.gpus,
                max_restarts=self.max_restarts,
                max_task_retries=self.max_task_retries,
            ).remote(
                self.model_ref,
                specs,
                batch_size=self.batch_size,
                threads=self.threads,
                device=device,
            )
            self._slots.append(_Slot(i, actor, actor.info.remote()))
        return self

    def close(self) -> None:
        ray = self._ray
        if ray is not None:
            for s in self._slots:
                try:
                    ray.kill(s.actor, no_restart=True)
                except Exception:  # noqa: BLE001 - already gone
                    pass
            if self._owns_ray:
                ray.shutdown()
        self._slots = []
        self._owns_ray = False

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()

    def supports(self, procedure, stats) -> str | None:
        """None for a procedure of the pool's own policies (its workers' engines were built with
        them; one pass scores them all, so their order is no part of it)."""
        mine = [p.spec for p in self.policies]
        if sorted(procedure.policies) != sorted(mine):
            return f"this Ray pool scores policies {mine}, the run's procedure has {list(procedure.policies)}"
        return None

    # ------------------------------------------------------------------ store hook (runner)
    def attach_store(self, store) -> None:
        """Set from a run's :class:`ScoringJob` before ``run``: where workers may write unit files, and where
        the procedure of the units is recorded (its settings are what the workers compute)."""
        self._store = store
        self._store_root = str(Path(store.root).resolve())

    def _procedure_settings(self, units: list[WorkUnit]) -> dict | None:
        """The near-verbatim settings of the units' procedure, after checking that this pool
        scores the procedure's policies (the pool was built with its own list)."""
        if self._store is None:
            return None
        keys = {u.procedure_key for u in units}
        if len(keys) != 1:
            raise InputError(f"one run scores one procedure; got units of {len(keys)} procedures")
        proc = self._store.procedure(keys.pop())
        mine = [p.spec for p in self.policies]
        if sorted(proc["policies"]) != sorted(
            mine
        ):  # one pass scores them all: order is no part of it
            raise InputError(
                f"this Ray pool scores policies {mine}, the run's procedure has {proc['policies']}",
                hint="build the RayBackend with the same policies as run_scoring",
            )
        return proc.get("near_verbatim")

    def _write_probe(self) -> None:
        self._token = None
        if self._store_root is None or self.write == "driver":
            return
        self._token = secrets.token_hex(8)
        atomic_write_text(Path(self._store_root) / f"{PROBE_PREFIX}{self._token}", self._token)

    def _remove_probe(self) -> None:
        if self._token and self._store_root:
            try:
                (Path(self._store_root) / f"{PROBE_PREFIX}{self._token}").unlink()
            except FileNotFoundError:
                pass
        self._token = None

    # ------------------------------------------------------------------ run
    def run(self, units: Iterable[WorkUnit], job: ScoringJob | None = None):
        """Yield, per unit, a UnitReceipt (the worker wrote the file) or a UnitResult; a run's
        ``job`` gives the statistics and the store (progress is per unit)."""
        if job is not None:
            self.set_stats(job.stats)
            if job.store is not None:
                self.attach_store(job.store)
        units = list(units)
        self._stats = {}
        if not units:
            return
        if self.write == "worker" and self._store_root is None:
            raise InputError(
                "write='worker' needs a store: run the backend through run_scoring",
                hint="or use write='auto'",
            )
        near_verbatim = self._procedure_settings(units)
        owns_pool = not self.started
        t0 = time.perf_counter()
        try:
            self._write_probe()
            self.start()
            yield from self._dispatch(units, t0, near_verbatim)
        finally:
            self._remove_probe()
            if owns_pool:
                self.close()

    def _dispatch(self, units: list[WorkUnit], t0: float, near_verbatim: dict | None = None):
        ray = self._ray
        exc_mod = ray.exceptions
        pending = deque((u, 0) for u in units)
        inflight: dict = {}
        for s in self._slots:
            s.inflight = s.units = s.windows = s.restarts = 0
            s.busy = 0.0
            s.pids = [] if s.pid is None else [s.pid]
        root, token = (self._store_root, self._token) if self.write != "driver" else (None, None)
        fault = self.fault
        must = self.write == "worker"

        def fill(slot: _Slot):
            while slot.alive and slot.inflight < self.depth and pending:
                unit, att = pending.popleft()
                if hasattr(
                    unit, "materialize"
                ):  # a streamed unit: its items, not the whole book, travel
                    unit = unit.materialize()
                ref = slot.actor.score.remote(
                    unit, root, token, fault, must, near_verbatim, self.stat_spec
                )
                inflight[ref] = (unit, slot, att)
                slot.inflight += 1

        if not any(s.alive for s in self._slots):
            raise WorkerError(
                "every worker of this Ray pool has died", hint="close the pool and start a new one"
            )
        for s in self._slots:
            fill(s)
        n_written = n_returned = requeued = 0
        ft = ur = 0
        t_first, w_first = None, 0
        last_note = time.perf_counter()
        while inflight:
            ready, _ = ray.wait(list(inflight), num_returns=1, timeout=WAIT_NOTE_SECONDS)
            if not ready:
                if time.perf_counter() - last_note >= WAIT_NOTE_SECONDS:
                    self._note_waiting(ray)
                    last_note = time.perf_counter()
                continue
            ref = ready[0]
            unit, slot, att = inflight.pop(ref)
            slot.inflight -= 1
            try:
                out = ray.get(ref)
            except exc_mod.RayActorError as exc:
                # Ray already restarted this actor and re-ran the unit max_task_retries times
                slot.alive = False
                try:
                    ray.kill(slot.actor, no_restart=True)
                except Exception:  # noqa: BLE001
                    pass
                if att + 1 >= self.max_unit_attempts:
                    raise WorkerError(
                        f"unit {unit.unit_id[:12]} failed on {att + 1} workers; last error: {exc}",
                        hint="every finished unit is in the store; fix the cause (memory? see the Ray "
                        "logs under /tmp/ray/session_latest/logs) and re-run the same command",
                    ) from None
                pending.appendleft((unit, att + 1))
                requeued += 1
                live = [s for s in self._slots if s.alive]
                if not live:
                    raise WorkerError(
                        f"every Ray worker died; last error: {exc}",
                        hint="every finished unit is in the store; re-run the same command "
                        "to resume",
                    ) from None
                for s in live:
                    fill(s)
                continue
            except exc_mod.RayTaskError as exc:
                cause = getattr(exc, "cause", None)
                if isinstance(cause, MemclaimError):
                    raise cause from None
                raise
            if t_first is None:
                t_first, w_first = time.perf_counter(), out["n_items"]
            self.weights_loaded = True
            slot.units += 1
            slot.windows += out["n_items"]
            slot.busy += out["seconds"]
            slot.observe(ray, out["pid"])
            ft += out["forward_tokens"]
            ur += out["unembed_rows"]
            fill(slot)
            if out["written"]:
                n_written += 1
                yield UnitReceipt(
                    unit_id=out["unit_id"], procedure_key=unit.procedure_key, n_items=out["n_items"]
                )
            else:
                n_returned += 1
                yield out["result"]
        if (
            pending
        ):  # unreachable: fill() drains pending while a slot is alive, and none left raises
            raise WorkerError(f"{len(pending)} unit(s) were never scored")
        t_end = time.perf_counter()
        self._stats = self._collect(
            units, t0, t_first or t_end, w_first, t_end, n_written, n_returned, requeued, ft, ur
        )

    def _note_waiting(self, ray) -> None:
        """Say so when workers have not started (a busy cluster queues actors without a word)."""
        refs = [s.ready_ref for s in self._slots if s.alive]
        done, not_ready = ray.wait(refs, num_returns=len(refs), timeout=0)
        if not_ready:
            free = ray.available_resources()
            emit_log(
                self.log,
                f"memclaim: {len(not_ready)} of {len(refs)} Ray worker(s) not started yet (loading "
                f"the model, or queued for resources: each needs {self.threads} CPU(s) and "
                f"{self.gpus:g} GPU(s); the cluster has {free.get('CPU', 0):g} CPUs and "
                f"{free.get('GPU', 0):g} GPUs unreserved)",
            )

    def _collect(
        self, units, t0, t_first, w_first, t_end, n_written, n_returned, requeued, ft, ur
    ) -> dict:
        ray = self._ray
        per = []
        for s in self._slots:
            try:
                info = (
                    ray.get(s.actor.info.remote(), timeout=60)
                    if s.alive
                    else ray.get(s.ready_ref, timeout=5)
                )
            except Exception:  # noqa: BLE001 - a dead actor has no info
                info = {
                    "node": "?",
                    "device": "?",
                    "threads": self.threads,
                    "load_seconds": float("nan"),
                    "pid": None,
                }
            if s.alive:
                s.observe(ray, info.get("pid"))  # a restart after the actor's last unit counts too
            per.append(
                WorkerStats(
                    worker=s.index,
                    node=str(info.get("node")),
                    device=str(info.get("device")),
                    threads=int(info.get("threads") or self.threads),
                    pids=tuple(s.pids),
                    restarts=s.restarts,
                    units=s.units,
                    windows=s.windows,
                    busy_seconds=s.busy,
                    windows_per_second=(s.windows / s.busy) if s.busy > 0 else 0.0,
                    load_seconds=float(info.get("load_seconds", float("nan"))),
                    alive=s.alive,
                    schedule=str(info.get("schedule") or "?"),
                )
            )
        n_windows = sum(u.n_items for u in units)
        wall = t_end - t0
        steady = t_end - t_first  # windows finished after the first result, over the time after it
        done_after_first = n_windows - w_first
        mode = "worker" if n_returned == 0 else ("driver" if n_written == 0 else "mixed")
        address = "local" if not self.address else self.address
        try:
            address = ray.get_runtime_context().gcs_address if ray.is_initialized() else address
        except Exception:  # noqa: BLE001
            pass
        if self._owns_ray and not self.address:
            address = f"a local cluster ({address})"  # started for this pool, gone after it
        return RayRunStats(
            address=str(address),
            workers=len(self._slots),
            threads_per_worker=self.threads,
            gpus_per_worker=self.gpus,
            write_mode=mode,
            units=len(units),
            windows=n_windows,
            wall_seconds=wall,
            startup_seconds=t_first - t0,
            windows_per_second=n_windows / wall if wall > 0 else 0.0,
            steady_windows_per_second=(done_after_first / steady) if steady > 0 else 0.0,
            restarts=sum(w.restarts for w in per),
            requeued_units=requeued,
            forward_tokens=ft,
            unembed_rows=ur,
            per_worker=tuple(per),
        ).to_dict()

    def stats(self) -> dict:
        return dict(self._stats)


def _make_ray(
    model, policies: Sequence[Policy], runtime: Runtime, log: LogCallback | None = None
) -> RayBackend:
    """The ``ray`` backend of a runtime (:mod:`memclaim.scoring.backends`): workers load the
    model from its folder, so a model made in Python is refused, and Ray must be installed."""
    spec = runtime.backend
    if getattr(model, "path", None) is None:
        raise InputError(
            f"the model {model.name!r} is a Python object: Ray workers load a model from a folder",
            hint="save it (model.save_pretrained(DIR), tokenizer.save_pretrained(DIR)) and pass DIR",
        )
    require_ray()  # fail before any work with the error naming the extra
    return RayBackend(
        model,
        policies,
        batch_size=runtime.batch_size,
        workers=spec.workers,
        threads_per_worker=spec.threads_per_worker,
        gpus_per_worker=spec.gpus_per_worker,
        address=spec.address,
        log=log,
    )


register_backend(
    "ray",
    _make_ray,
    description="a pool of Ray actors, on this machine or a cluster (memclaim[ray])",
    settings=("address", "workers", "gpus_per_worker", "threads_per_worker"),
    provider="memclaim",
)
