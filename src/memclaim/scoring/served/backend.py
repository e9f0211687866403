"""The served-model scoring backend: work units scored by an inference server's prompt
log-probabilities (vLLM, SGLang, llama-cpp-python, OpenAI-compatible APIs) into the same store.

The science does not change: the score is log q_{θ,φ}(s | p) of [EM] §2 Eq. 1, teacher-forced
on the token ids memclaim cut ([EM] §4), from the server's top-K log-probs at each target
position. What those determine exactly, policy by policy, is
:mod:`memclaim.scoring.served.exactness`; :meth:`OpenAIBackend.supports` says it before any
request, and every stored window carries whether its value is exact (``logq_exact:<policy>``)
with certified bounds (``logq_lower:``/``logq_upper:``). A window whose value is not exact has
``logq`` NaN, which no test reads as a score (:func:`memclaim.store.results.load_run_scores`).

The backend talks to the server the way it answers best (:data:`~.protocols.DIALECTS`): vLLM's
token-id prompts with ``prompt_logprobs`` (many windows per request, ranks included), SGLang's
``/generate`` with ``logprob_start_len``, or the OpenAI legacy ``echo`` + ``logprobs`` (one text
per request, its echoed tokens checked against memclaim's). Requests run ``max_concurrency`` at
a time, each retried with backoff on 429/5xx/timeouts/truncated answers (:mod:`.client`); a unit
is yielded (and written by the runner) when all its windows are back, so a run killed at any
point, or a server that dies mid-run, loses nothing already scored, and re-running resumes.

The procedure ([EM] Def. B.2) records the tokenizer's fingerprint and the server's identity (its
software and version, the served model's id, path and context length, the number of top
log-probs per position, the wire format) and the exactness class of every policy; the URL is
shown but not keyed, the API key is never written anywhere.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ...decoding import Policy
from ...errors import InputError
from ...jsonutil import ResultMixin
from ...progress import LogCallback
from ...store.store import UnitResult
from ...validate import integer
from ..engine import STAT_NAMES, BatchScores, StatSet
from ..units import WorkUnit
from .client import Client, HTTPStatusError, RetryPolicy, ServerError, read_api_key
from .exactness import (
    BOUNDS,
    EXACT,
    REFUSED,
    TopK,
    greedy_flags,
    min_margin,
    policy_class,
    policy_scores,
    statistic_class,
    tokens_needed,
)
from .model import TOKENIZER_FINGERPRINT_SCHEME, ServedModel
from .protocols import (
    DIALECTS,
    ProcessedLogProbsError,
    ServerResponseError,
    Window,
    check_raw_distribution,
    echo_request,
    parse_echo,
    parse_sglang,
    parse_vllm,
    sglang_request,
    vllm_request,
)

if TYPE_CHECKING:
    from ..backends import ScoringJob

__all__ = [
    "OpenAIBackend",
    "ServerInfo",
    "SERVED_STATS",
    "exact_column",
    "lower_column",
    "upper_column",
    "DEFAULT_MAX_CONCURRENCY",
    "DEFAULT_BATCH_WINDOWS",
]

DEFAULT_MAX_CONCURRENCY = 4
DEFAULT_BATCH_WINDOWS = 16  # windows per request where the server takes many (vLLM, SGLang)
# a short request's retries while connecting: a bad --url fails in seconds, not minutes
CONNECT_RETRY = RetryPolicy(attempts=3, base=0.5, cap=2.0, timeout=30.0)
PROBE_TEXT = "In the beginning God created the heaven and the earth."
# what a served run stores by default: everything but the full-distribution moments
SERVED_STATS = ("policy_logq", "greedy", "margin", "token_logprob", "rank")


def exact_column(spec: str) -> str:
    """The unit/results column saying whether a window's log q under ``spec`` is exact.

    >>> exact_column("top-p:0.9"), lower_column("top-p:0.9"), upper_column("top-p:0.9")
    ('logq_exact:top-p:0.9', 'logq_lower:top-p:0.9', 'logq_upper:top-p:0.9')
    """
    return f"logq_exact:{spec}"


def lower_column(spec: str) -> str:
    """The column of a window's certified lower bound on log q under ``spec``.

    >>> lower_column("temperature:0.7")
    'logq_lower:temperature:0.7'
    """
    return f"logq_lower:{spec}"


def upper_column(spec: str) -> str:
    """The column of a window's certified upper bound on log q under ``spec``.

    >>> upper_column("temperature:0.7")
    'logq_upper:temperature:0.7'
    """
    return f"logq_upper:{spec}"


@dataclass(frozen=True)
class ServerInfo(ResultMixin):
    """What the server said about itself (the keyed part of the procedure's ``served`` record,
    with the URL shown beside it)."""

    url: str
    dialect: str  # vllm | sglang | echo
    server: str  # vllm, sglang, llama-cpp-python, or what /v1/models calls its owner
    version: str | None
    model_id: str
    model_root: str | None
    max_model_len: int | None
    top_logprobs: int  # K: top log-probs asked for (and returned) per position
    max_top_logprobs: int | None  # the server's cap, where it said
    prefix_ids: tuple[int, ...] = ()  # tokens the server puts before a text prompt (echo: its BOS)
    settings: dict = field(default_factory=dict)

    def keyed(self) -> dict:
        """The fields that enter the procedure key (the URL does not: a server moved to another
        port is the same server)."""
        return {
            "api": self.dialect,
            "server": self.server,
            "version": self.version,
            "model_id": self.model_id,
            "model_root": self.model_root,
            "max_model_len": self.max_model_len,
            "top_logprobs": self.top_logprobs,
            "settings": dict(self.settings),
        }


def _kernel_text(exc: BaseException) -> str:
    return str(exc).split("\n  fix:")[0]


class OpenAIBackend:
    """Scores units through an inference server (module docstring). ``model``: the
    :class:`~memclaim.scoring.served.model.ServedModel` (tokenizer side); ``url``: the server's
    base URL; ``served_model``: the server's name of the model (default: the one it serves, or
    the one named like ``model``); ``api_key_env``/``api_key_file``: where the key is;
    ``max_concurrency``: requests in flight; ``batch_windows``: windows per request (vLLM,
    SGLang); ``top_logprobs``: K per position (default: the fewest the policies need);
    ``bounds``: accept policies with certified bounds only (temperature without truncation),
    whose windows are stored with NaN log q and their bounds.

    >>> b = OpenAIBackend("http://127.0.0.1:8000", served_model("smollm2"), parse_policies(["full"]))  # doctest: +SKIP
    >>> b.connect().dialect, b.supports(["full", "top-k:40"], "census")                  # doctest: +SKIP
    ('vllm', None)
    """

    name = "openai"
    device_class = "served"
    weights_loaded = False

    def __init__(
        self,
        url: str,
        model: ServedModel,
        policies: Sequence[Policy],
        *,
        served_model: str | None = None,
        api_key_env: str | None = None,
        api_key_file=None,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        batch_windows: int = DEFAULT_BATCH_WINDOWS,
        top_logprobs: int | None = None,
        bounds: bool = False,
        dialect: str = "auto",
        retry: RetryPolicy | None = None,
        log: LogCallback | None = None,
    ):
        self.max_concurrency = integer("--max-concurrency", max_concurrency, minimum=1)
        self.batch_windows = integer("batch_windows", batch_windows, minimum=1)
        if top_logprobs is not None:
            top_logprobs = integer("top_logprobs", top_logprobs, minimum=1)
        if dialect != "auto" and dialect not in DIALECTS:
            raise InputError(
                f"unknown server dialect {dialect!r}", hint=f"one of auto, {', '.join(DIALECTS)}"
            )
        if served_model is not None and (
            not isinstance(served_model, str) or not served_model.strip()
        ):
            raise InputError(
                f"--served-model {served_model!r} is empty",
                hint="the name the server lists at /v1/models",
            )
        self.model = model
        self.policies = tuple(policies)
        self.served_model = served_model
        self.top_logprobs = top_logprobs
        self.bounds = bool(bounds)
        self.dialect = dialect
        self.log = log
        # the key is read now (a missing variable fails before any work) and kept in the client only
        self.client = Client(
            url, api_key=read_api_key(env=api_key_env, file=api_key_file), retry=retry, log=log
        )
        self.info: ServerInfo | None = None
        self.stat_set = StatSet(frozenset(SERVED_STATS))
        self.on_batch = None  # the runner's per-batch progress callback
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._client_time = 0.0  # seconds spent building requests and reading answers (all threads)
        self._stats: dict = {}
        self._pieces: dict[int, str] = {}
        self._piece_index: dict[str, list[int]] | None = None

    # ------------------------------------------------------------------ before any work
    @property
    def url(self) -> str:
        return self.client.url

    def connect(self) -> ServerInfo:
        """Ask the server who it is and probe one short window: a bad URL, a refused key, a wrong
        or missing model, a server without prompt log-probs or with too few of them, or values
        that are not log-probabilities are errors here, before any work. Idempotent."""
        if self.info is not None:
            return self.info
        c = self.client
        try:
            models = c.get("/v1/models", retry=CONNECT_RETRY)
        except HTTPStatusError as exc:
            if exc.status in (401, 403):
                raise
            raise ServerError(
                f"{c.url} is not an OpenAI-compatible server: GET /v1/models answered HTTP "
                f"{exc.status}",
                hint="pass the base URL of a vLLM, SGLang or llama-cpp-python server "
                "(docs/served.md)",
            ) from None
        except ServerError as exc:
            raise ServerError(
                f"cannot reach the server at {c.url}: {_kernel_text(exc).split('; last: ')[-1]}",
                hint=f"start the server, or fix --url (curl {c.url}/v1/models must answer)",
            ) from None
        data = models.get("data") if isinstance(models, dict) else None
        if not isinstance(data, list) or not data:
            raise ServerError(
                f"{c.url}/v1/models lists no model: {str(models)[:200]}",
                hint="start the server with a model loaded",
            )
        ids = [str(d.get("id")) for d in data if isinstance(d, dict)]
        entry = self._pick_model(data, ids)
        owner = str(entry.get("owned_by") or "")
        dialect, server, version, settings = self._identify(owner)
        root = entry.get("root") if isinstance(entry.get("root"), str) else None
        mml = entry.get("max_model_len")
        mml = (
            int(mml)
            if isinstance(mml, int) and not isinstance(mml, bool)
            else settings.pop("context_length", None)
        )
        k = self._k_needed()
        info = ServerInfo(
            url=c.url,
            dialect=dialect,
            server=server,
            version=version,
            model_id=str(entry["id"]),
            model_root=root,
            max_model_len=mml,
            top_logprobs=k,
            max_top_logprobs=None,
            settings=settings,
        )
        self.info = info
        try:
            info = self._probe(info)
        except BaseException:
            self.info = None
            raise
        self.info = info
        if info.max_model_len:
            self.model.set_server_limit(info.max_model_len)
        return info

    def _pick_model(self, data: list, ids: list[str]) -> dict:
        want = self.served_model
        if want is not None:
            for d in data:
                if str(d.get("id")) == want:
                    return d
            raise ServerError(
                f"the server at {self.client.url} does not serve {want!r}; it serves "
                f"{', '.join(map(repr, ids))}",
                hint="pass one of those with --served-model",
            )
        if len(data) == 1:
            return data[0]
        for d in data:
            if str(d.get("id")) in (self.model.name, self.model.path.name):
                return d
        raise ServerError(
            f"the server at {self.client.url} serves {len(ids)} models ({', '.join(map(repr, ids))}); "
            "which one to score is not clear",
            hint="name it with --served-model",
        )

    def _identify(self, owner: str) -> tuple[str, str, str | None, dict]:
        """(dialect, server, version, reported settings) from /v1/models' owner and the servers'
        own metadata endpoints."""
        c = self.client
        quick = RetryPolicy(attempts=1, timeout=30.0)
        settings: dict = {}
        server, version = owner or "unknown", None
        guess = {"vllm": "vllm", "sglang": "sglang"}.get(owner.lower(), None)
        if guess in (None, "sglang"):
            try:
                si = c.get("/get_server_info", retry=quick)
                if isinstance(si, dict) and ("version" in si or "model_path" in si):
                    server, version, guess = (
                        "sglang",
                        str(si.get("version")) if si.get("version") else None,
                        "sglang",
                    )
                    for key in (
                        "dtype",
                        "context_length",
                        "kv_cache_dtype",
                        "quantization",
                        "tp_size",
                        "model_path",
                        "tokenizer_path",
                        "random_seed",
                    ):
                        if key in si:
                            settings[key] = si[key]
            except (ServerError, ValueError):
                pass
        if guess in (None, "vllm"):
            try:
                v = c.get("/version", retry=quick)
                if isinstance(v, dict) and "version" in v:
                    server, version, guess = "vllm", str(v["version"]), "vllm"
            except (ServerError, ValueError):
                pass
        if guess is None:
            guess = "echo"
            if owner == "me":
                server = "llama-cpp-python"  # its /v1/models owner
        dialect = guess if self.dialect == "auto" else self.dialect
        return dialect, server, version, settings

    def _k_needed(self) -> int:
        if self.top_logprobs is not None:
            return self.top_logprobs
        need = [tokens_needed(p) for p in self.policies]
        k = max(
            [n for n in need if n > 0] + [2]
        )  # 2: the greedy flag and the margin every run stores
        if any(n < 0 for n in need):
            k = max(k, 20)  # bounded policies: the more returned, the tighter the bounds
        return k

    def _probe_window(self) -> Window:
        tok = self.model.tokenizer
        ids = tuple(self.model.sot_ids) + tuple(tok.encode(PROBE_TEXT))
        return Window("probe", ids[:-4], ids[-4:])

    def _probe(self, info: ServerInfo) -> ServerInfo:
        w = self._probe_window()
        settings = dict(info.settings)
        cap = None
        k = info.top_logprobs
        try:
            views, prefix = self._score_windows(
                [w], info=info, retry=CONNECT_RETRY, with_prefix=True
            )
        except HTTPStatusError as exc:
            m = re.search(
                r"(?:max(?:imum)?(?: allowed)?|at most)\D{0,20}(\d+)", exc.body_text or "", re.I
            )
            if exc.status == 400 and "logprob" in (exc.body_text or "").lower():
                cap = int(m.group(1)) if m else None
                flag = {"vllm": "--max-logprobs", "sglang": "--max-top-logprobs-num"}.get(
                    info.dialect, "its logprobs limit"
                )
                raise ServerError(
                    f"the server at {info.url} returns at most {cap if cap is not None else 'fewer than'} top "
                    f"log-probs per position; {', '.join(self._specs())} need{'s' if len(self.policies) == 1 else ''} "
                    f"{k} (top-k:k needs k + 1 to see a tie at the k-th value; greedy and the near-tie margin 2)",
                    hint=(
                        f"restart the server with {flag} {k} or more (vLLM caps it at 20 by default)"
                        if info.dialect != "echo"
                        else "use a server that returns more alternatives, or fewer/"
                        "smaller top-k policies"
                    ),
                ) from None
            raise
        except ProcessedLogProbsError as exc:  # before any work: no sampling-estimate hint
            raise ServerError(
                f"the server at {info.url} ({info.server}) returns processed log-probabilities: "
                f"{_kernel_text(exc)}",
                hint=exc.hint,
            ) from None
        except ServerResponseError as exc:
            raise ServerError(
                f"the server at {info.url} ({info.server}) does not return usable prompt "
                f"log-probabilities: {_kernel_text(exc)}",
                hint=(exc.hint or "")
                + (
                    "; for a server with generated-token log-probs only, use "
                    "sampling estimation (memclaim.sample_extraction, "
                    "docs/served.md)"
                ),
            ) from None
        v = views[0]
        got = int(v.n_returned.min()) if v.S else 0
        if got < min(k, self.model.vocab_size) and info.dialect != "echo":
            raise ServerError(
                f"the server returned {got} top log-probs per position where {k} were asked",
                hint="restart the server with a larger logprobs limit (vLLM: --max-logprobs)",
            )
        # the server's own tokenization of a text, where it tokenizes for clients (vLLM): another
        # tokenizer than memclaim's means another model (or a misconfigured one)
        if info.dialect == "vllm":
            try:
                t = self.client.post(
                    "/tokenize",
                    {"model": info.model_id, "prompt": PROBE_TEXT, "add_special_tokens": False},
                    retry=CONNECT_RETRY,
                )
                theirs = [int(x) for x in t.get("tokens", [])]
                ours = self.model.tokenizer.encode(PROBE_TEXT)
                if theirs != ours:
                    raise ServerError(
                        f"the server's model {info.model_id!r} tokenizes {PROBE_TEXT!r} as {theirs[:8]}..., "
                        f"{self.model.name!r}'s tokenizer as {ours[:8]}...: they are different models",
                        hint="pass the served model's own tokenizer folder as MODEL (or --served-model the right one)",
                    )
            except HTTPStatusError:
                pass  # no /tokenize route: the window checks catch a mismatch
        # a server that scales prompt log-probs by the request's temperature (SGLang's output
        # log-probs do): memclaim always asks at T = 1, so what it reads is the raw distribution
        settings["probe_values"] = [round(float(x), 6) for x in v.target_lp]
        return ServerInfo(
            **{
                **info.to_dict(),
                "settings": settings,
                "prefix_ids": tuple(prefix),
                "max_top_logprobs": cap,
            }
        )

    # ------------------------------------------------------------------ protocol answers
    def _specs(self) -> list[str]:
        return [p.spec for p in self.policies]

    def computable_stats(self) -> StatSet:
        """The statistics this server's answers give (ranks need vLLM's or the whole vocabulary;
        the full-distribution moments need the whole vocabulary)."""
        info = self.connect()
        names = {
            n
            for n in STAT_NAMES
            if statistic_class(n, info.top_logprobs, self.model.vocab_size)[0] == EXACT
        }
        if info.dialect != "vllm" and info.top_logprobs < self.model.vocab_size:
            names.discard("rank")
        return StatSet(frozenset(names))

    def supports(self, procedure, statistics=None) -> str | None:
        """Why this server cannot compute ``procedure`` (a Procedure, its dict, or policies) and
        ``statistics`` as memclaim promises, or None: per policy its exactness class from the
        top-K the server returns (:func:`~.exactness.policy_class`), per statistic likewise;
        near-verbatim bounds need the model's own forward passes."""
        info = self.connect()
        if hasattr(procedure, "policies"):
            specs, nv = list(procedure.policies), getattr(procedure, "near_verbatim", None)
        elif isinstance(procedure, dict):
            specs, nv = list(procedure.get("policies", [])), procedure.get("near_verbatim")
        else:
            specs, nv = [p.spec if isinstance(p, Policy) else str(p) for p in procedure], None
        if nv:
            return (
                "near-verbatim lower bounds run beam searches over the model's next-token distributions: a "
                "served model does not give them; drop --near-verbatim or score with --backend local"
            )
        K, V = info.top_logprobs, self.model.vocab_size
        for spec in specs:
            cls, why = policy_class(Policy.parse(spec), K, V)
            if cls == REFUSED:
                return why
            if cls == BOUNDS and not self.bounds:
                return (
                    f"{why}: memclaim would return certified bounds, not a score; pass --served-bounds "
                    "(bounds=True) to store the bounds (never read by a test as a score)"
                )
        if statistics is not None:
            have = self.computable_stats()
            for name in sorted(StatSet.of(statistics).names - have.names):
                cls, why = statistic_class(name, K, V)
                if name == "rank" and cls == EXACT:
                    why = (
                        f"target ranks below the top {K} need the server's count (vLLM returns it; "
                        f"{info.server} does not)"
                    )
                return why or f"{name} is not computable from this server"
        return None

    def exactness(self) -> dict[str, str]:
        """{policy: exactness class} under this server's top-K."""
        info = self.connect()
        return {
            p.spec: policy_class(p, info.top_logprobs, self.model.vocab_size)[0]
            for p in self.policies
        }

    def describe_model(self, desc: dict) -> dict:
        """The procedure's model record for a served run: the tokenizer's fingerprint and the
        server's identity in place of a weights fingerprint, the device class 'served', and the
        exactness class of every policy ([EM] Def. B.2)."""
        info = self.connect()
        served = {
            **info.keyed(),
            "tokenizer_fingerprint": self.model.fingerprint,
            "tokenizer_fingerprint_scheme": TOKENIZER_FINGERPRINT_SCHEME,
            "vocab_size": self.model.vocab_size,
            "exactness": self.exactness(),
        }
        served["settings"].pop("probe_values", None)
        fp = hashlib.sha256(json.dumps(served, sort_keys=True).encode()).hexdigest()
        out = {k: v for k, v in desc.items() if k not in ("fingerprint_scheme",)}
        out.update(
            fingerprint=fp,
            device_class="served",
            dtype=str(info.settings.get("dtype") or "served"),
            served=served,
            url=info.url,
        )
        return out

    def set_stats(self, stats) -> None:
        """The statistics the next run stores (run_scoring sets them before ``run``)."""
        self.stat_set = StatSet.of(stats)

    # ------------------------------------------------------------------ requests
    def _piece(self, i: int) -> str:
        p = self._pieces.get(i)
        if p is None:
            p = self._pieces[i] = self.model.tokenizer.decode([i])
        return p

    def _ids_of_piece(self, piece: str) -> list[int]:
        if self._piece_index is None:
            index: dict[str, list[int]] = {}
            for i in range(len(self.model.tokenizer.tok)):
                p = self._piece(i)
                index.setdefault(p, []).append(i)
                if "\ufffd" in p:
                    # a byte fragment: llama-cpp-python decodes it alone with errors="ignore"
                    # (its key is "" or the valid part), memclaim's tokenizer with U+FFFD
                    index.setdefault(p.replace("\ufffd", ""), []).append(i)
            self._piece_index = index
        return self._piece_index.get(piece, [])

    def _score_windows(
        self,
        windows: Sequence[Window],
        *,
        info: ServerInfo,
        retry: RetryPolicy | None = None,
        with_prefix: bool = False,
    ):
        """One request's worth of windows -> their TopK views (the echo dialect sends one window
        per request). ``with_prefix``: also return the ids the server puts before a text."""
        c, k, V = self.client, info.top_logprobs, self.model.vocab_size
        stop = self._stop
        if info.dialect in ("vllm", "sglang"):
            t = time.perf_counter()
            path, req = (
                ("/v1/completions", vllm_request(info.model_id, windows, k))
                if info.dialect == "vllm"
                else ("/generate", sglang_request(windows, k))
            )
            self._add_client_time(time.perf_counter() - t)
            body = c.post(path, req, retry=retry, cancel=stop)
            t = time.perf_counter()
            views = (parse_vllm if info.dialect == "vllm" else parse_sglang)(body, windows, k, V)
            for v, w in zip(views, windows):  # processed values refused, probe and run alike
                check_raw_distribution(v, k, f"window {w.key[:12]}")
            self._add_client_time(time.perf_counter() - t)
            return (views, ()) if with_prefix else views
        views = []
        for w in windows:
            ids = list(w.prompt) + list(w.target)
            # the whole window as text, its start-of-text token's text included (servers parse
            # special tokens in a text prompt: llama-cpp-python does); the echoed tokens are then
            # aligned by their count (echo_alignment) and each checked against memclaim's
            text = self.model.tokenizer.decode(ids)
            body = c.post(
                "/v1/completions", echo_request(info.model_id, text, k), retry=retry, cancel=stop
            )
            offset = echo_alignment(body, w)
            pieces = [self._piece(i) for i in ids]
            views.append(
                parse_echo(
                    body,
                    w,
                    k,
                    V,
                    pieces=pieces,
                    offset=offset,
                    skip=max(1, -offset),
                    piece_ids=None if _token_ids_keyed(body) else self._ids_of_piece,
                )
            )
            check_raw_distribution(views[-1], k, f"window {w.key[:12]}")
        return (views, ()) if with_prefix else views

    def _add_client_time(self, seconds: float) -> None:
        with self._lock:
            self._client_time += seconds

    # ------------------------------------------------------------------ the run
    def run(self, units: Iterable[WorkUnit], job: ScoringJob | None = None):
        """The protocol's ``run`` (:class:`memclaim.scoring.backends.Backend`): :meth:`run_units`
        with the statistics and the per-batch progress callback of ``job`` (a
        :class:`memclaim.scoring.backends.ScoringJob`; None: those set before)."""
        if job is not None:
            if job.stats is not None:
                self.set_stats(job.stats)
            self.on_batch = job.on_batch
        try:
            yield from self.run_units(units)
        finally:
            if job is not None:
                self.on_batch = None

    def run_units(self, units: Iterable[WorkUnit]):
        """Yield a UnitResult per unit once all its windows are scored, ``max_concurrency``
        requests in flight; stops (cancelling what is in flight) at the first request that
        fails after its retries."""
        info = self.connect()
        self._stop.clear()
        t0 = time.perf_counter()
        n_windows = n_units = 0
        client_seconds = 0.0
        req0, retry0, wait0 = (
            self.client.stats.requests,
            self.client.stats.retries,
            self.client.stats.seconds_in_requests,
        )
        ct0 = self._client_time
        pool = ThreadPoolExecutor(
            max_workers=self.max_concurrency, thread_name_prefix="memclaim-served"
        )
        inflight: dict[Future, tuple[dict, int, int]] = {}
        it = iter(units)
        exhausted = False

        def submit_next() -> bool:
            nonlocal exhausted, client_seconds
            try:
                u = next(it)
            except StopIteration:
                exhausted = True
                return False
            if hasattr(u, "materialize"):
                u = u.materialize()
            t = time.perf_counter()
            windows = [Window(item.key, tuple(item.prompt), tuple(item.suffix)) for item in u.items]
            per = 1 if info.dialect == "echo" else self.batch_windows
            chunks = [windows[a : a + per] for a in range(0, len(windows), per)]
            state = {"unit": u, "parts": [None] * len(chunks), "left": len(chunks)}
            client_seconds += time.perf_counter() - t
            for bi, chunk in enumerate(chunks):
                inflight[pool.submit(self._timed, chunk, info)] = (state, bi, len(chunk))
            return True

        try:
            while True:
                while not exhausted and len(inflight) < 2 * self.max_concurrency:
                    if not submit_next():
                        break
                if not inflight:
                    break
                done, _ = wait(list(inflight), return_when=FIRST_COMPLETED)
                for fut in done:
                    state, bi, n = inflight.pop(fut)
                    views, parse_s = fut.result()  # a failure after the retries stops the run here
                    client_seconds += parse_s
                    state["parts"][bi] = views
                    state["left"] -= 1
                    if self.on_batch is not None:
                        self.on_batch(n)
                    if state["left"] == 0:
                        t = time.perf_counter()
                        res = self._unit_result(
                            state["unit"], [v for part in state["parts"] for v in part]
                        )
                        client_seconds += time.perf_counter() - t
                        n_units += 1
                        n_windows += state["unit"].n_items
                        yield res
        finally:
            self._stop.set()  # in-flight requests give up their retries
            pool.shutdown(wait=True, cancel_futures=True)
            s = self.client.stats
            wall = time.perf_counter() - t0
            in_req = s.seconds_in_requests - wait0
            self._stats = {
                "server": info.server,
                "version": info.version,
                "api": info.dialect,
                "url": info.url,
                "model_id": info.model_id,
                "top_logprobs": info.top_logprobs,
                "max_concurrency": self.max_concurrency,
                "windows_per_request": 1 if info.dialect == "echo" else self.batch_windows,
                "units": n_units,
                "windows": n_windows,
                "requests": s.requests - req0,
                "retries": s.retries - retry0,
                "wall_seconds": wall,
                "seconds_in_requests": in_req,
                "client_seconds": client_seconds + self._client_time - ct0,
                "client_overhead": ((client_seconds + self._client_time - ct0) / wall)
                if wall > 0
                else 0.0,
                "windows_per_second": n_windows / wall if wall > 0 else 0.0,
                "retried_failures": list(s.failures[-5:]),
                "exactness": self.exactness(),
            }

    def _timed(self, chunk, info):
        views = self._score_windows(chunk, info=info)
        return views, 0.0

    def _unit_result(self, unit: WorkUnit, views: list[TopK]) -> UnitResult:
        """One unit's BatchScores from its windows' TopK views, with the per-policy exactness and
        bounds columns."""
        B = len(views)
        S = views[0].S if B else 0
        P = len(self.policies)
        st = self.stat_set
        logq = np.full((B, P), math.nan)
        tok_logq = np.full((B, P, S), math.nan)
        exact = np.zeros((B, P), bool)
        lower = np.full((B, P), -math.inf)
        upper = np.zeros((B, P))
        greedy = np.zeros(B, bool)
        margin = np.zeros(B)
        tok_lp = np.zeros((B, S))
        rank = np.zeros((B, S), np.int64)
        for i, v in enumerate(views):
            for j, pol in enumerate(self.policies):
                ps = policy_scores(pol, v)
                logq[i, j], exact[i, j], lower[i, j], upper[i, j] = ps.window()
                tok_logq[i, j] = ps.value
            hit, decided = greedy_flags(v)
            greedy[i] = bool(np.all(hit & decided))
            margin[i] = min_margin(v)
            tok_lp[i] = v.target_lp
            rank[i] = _ranks(v)
        scores = BatchScores(
            logq=logq if "policy_logq" in st else None,
            token_logq=tok_logq if "policy_logq" in st else None,
            greedy_match=greedy if "greedy" in st else None,
            min_margin=margin if "margin" in st else None,
            token_logprob=tok_lp if "token_logprob" in st else None,
            token_mean=None,
            token_std=None,
            token_rank=rank if "rank" in st else None,
        )
        extra = {}
        if "policy_logq" in st:
            for j, pol in enumerate(self.policies):
                extra[exact_column(pol.spec)] = exact[:, j]
                extra[lower_column(pol.spec)] = lower[:, j]
                extra[upper_column(pol.spec)] = upper[:, j]
        return UnitResult(
            unit_id=unit.unit_id,
            procedure_key=unit.procedure_key,
            policies=tuple(self._specs()),
            item_keys=tuple(it.key for it in unit.items),
            prompt_len=tuple(len(it.prompt) for it in unit.items),
            scores=scores,
            extra=extra,
            stats=st.spec,
        )

    def stats(self) -> dict:
        return dict(self._stats)

    def close(self) -> None:
        self._stop.set()
        self.client.close()


def echo_alignment(body: dict, w: Window) -> int:
    """Where a window's ids sit in an echoed completion's tokens: 0 when the server echoes every
    prompt token, then the one generated (the OpenAI format); -1 when it leaves out the prompt's
    first token (llama-cpp-python takes it for a BOS: its echo starts at the second token, whose
    log-prob is null). Anything else means the server tokenized the text otherwise.

    >>> body = {"choices": [{"logprobs": {"tokens": ["In", " the", " end", "."]}}]}
    >>> echo_alignment(body, Window("w", (0, 7, 8), (9,)))
    -1
    """
    try:
        n_echoed = len(body["choices"][0]["logprobs"]["tokens"])
    except (KeyError, IndexError, TypeError):
        raise ServerResponseError(
            "the server returned no echoed tokens (choices[0].logprobs.tokens)",
            hint="the server must echo the prompt with log-probs (echo: true, logprobs: K); "
            "docs/served.md",
        ) from None
    n = len(w.prompt) + len(w.target)
    offset = n_echoed - 1 - n  # one generated token (max_tokens 1)
    if offset not in (0, -1):
        raise ServerResponseError(
            f"window {w.key[:12]}: the server echoed {n_echoed} tokens for a window of {n} (and one generated): it "
            "tokenized the text otherwise than memclaim",
            hint="use the server's own tokenizer (the same model folder or name), or a server that takes token ids "
            "(vLLM, SGLang); docs/served.md",
        )
    return offset


def _token_ids_keyed(body) -> bool:
    try:
        toks = body["choices"][0]["logprobs"]["tokens"]
        return bool(toks) and all(str(t).startswith("token_id:") for t in toks)
    except (KeyError, IndexError, TypeError):
        return False


def _ranks(v: TopK) -> np.ndarray:
    """memclaim's rank (1 + #{v: ℓ_v > ℓ_t}, :mod:`memclaim.scoring.engine`) where the returned
    list decides it, else the server's count (vLLM's counts ties with the target as above it)."""
    out = np.zeros(v.S, np.int64)
    for s in range(v.S):
        n = int((v.top_ids[s] >= 0).sum())
        lt = v.target_lp[s]
        if n and (lt > v.top_lp[s, n - 1] or v.whole_vocabulary(s)):
            out[s] = 1 + int(np.sum(v.top_lp[s, :n] > lt))
        elif v.server_rank is not None and v.server_rank[s] > 0:
            out[s] = int(v.server_rank[s])
        else:
            out[s] = n + 1  # below the list: at least this
    return out
