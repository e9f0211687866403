"""A small HTTP JSON client for inference servers: keep-alive connections per thread, retries with
capped exponential backoff on 429/5xx, timeouts, dropped connections and truncated JSON, and
errors that say what to fix for everything else.

Hand-written on the standard library (http.client): the ``openai`` client library does not send
the servers' native fields (vLLM's ``prompt_logprobs``, SGLang's ``/generate``) without
workarounds, is not a dependency of memclaim, and would add its own retry policy under ours.
The API key is read from an environment variable or a file (:func:`read_api_key`) and lives
only in this object's headers: never in a repr, an error message, the store or a report.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from ...errors import InputError, MemclaimError
from ...progress import LogCallback, emit_log

__all__ = [
    "ServerError",
    "HTTPStatusError",
    "Client",
    "RetryPolicy",
    "normalize_url",
    "read_api_key",
]


class ServerError(MemclaimError):
    """The server could not be reached, or kept failing after every retry."""


class HTTPStatusError(ServerError):
    """A non-retryable HTTP answer (4xx other than 408/429): the request itself is refused."""

    def __init__(self, status: int, message: str, body_text: str, *, hint: str | None = None):
        self.status = status
        self.body_text = body_text
        super().__init__(message, hint=hint)


class _Transient(Exception):
    """A failure worth retrying (the reason is in args[0])."""


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a request is retried: ``attempts`` in all, waiting
    ``base * 2^i`` seconds (at most ``cap``, +-25% jitter, or the server's Retry-After) between
    them; each attempt may take ``timeout`` seconds.

    >>> [RetryPolicy(base=0.5, cap=4.0, jitter=0.0).delay(i) for i in range(5)]
    [0.5, 1.0, 2.0, 4.0, 4.0]
    """

    attempts: int = 6
    base: float = 0.5
    cap: float = 30.0
    timeout: float = 600.0
    jitter: float = 0.25

    def delay(self, i: int, retry_after: float | None = None) -> float:
        d = min(self.cap, self.base * (2.0**i))
        if retry_after is not None:
            d = min(self.cap, max(d, retry_after))
        if self.jitter:
            d *= 1.0 + random.uniform(-self.jitter, self.jitter)
        return d


def normalize_url(url: str) -> str:
    """The server's base URL (scheme, host, port, path prefix) without a trailing ``/v1``.

    >>> normalize_url("http://127.0.0.1:8000/v1/")
    'http://127.0.0.1:8000'
    >>> normalize_url("localhost:8000")
    Traceback (most recent call last):
    memclaim.errors.InputError: --url 'localhost:8000' is not an http(s) URL
      fix: pass the server's address, e.g. --url http://127.0.0.1:8000 (the /v1 suffix is optional)
    """
    if not isinstance(url, str) or not url.strip():
        raise InputError(
            f"--url {url!r} is empty",
            hint="pass the server's address, e.g. --url http://127.0.0.1:8000",
        )
    u = urlsplit(url.strip())
    if u.scheme not in ("http", "https") or not u.hostname:
        raise InputError(
            f"--url {url!r} is not an http(s) URL",
            hint="pass the server's address, e.g. --url http://127.0.0.1:8000 (the /v1 suffix is optional)",
        )
    try:
        port = u.port
    except ValueError:
        raise InputError(
            f"--url {url!r} has a bad port", hint="e.g. --url http://127.0.0.1:8000"
        ) from None
    if u.query or u.fragment or u.username or u.password:
        raise InputError(
            f"--url {url!r} has a query, fragment or credentials",
            hint="pass only scheme://host:port[/prefix]; give an API key with --api-key-env or "
            "--api-key-file",
        )
    path = u.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[:-3]
    host = u.hostname if ":" not in u.hostname else f"[{u.hostname}]"
    return f"{u.scheme}://{host}{'' if port is None else f':{port}'}{path}"


def read_api_key(*, env: str | None = None, file: str | os.PathLike | None = None) -> str | None:
    """The API key from the environment variable named ``env`` or the first line of ``file``
    (never from a command-line value: a flag's value shows in the process list and the shell's
    history); None when neither is given.

    >>> os.environ["MEMCLAIM_DOCTEST_KEY"] = "sk-test"; read_api_key(env="MEMCLAIM_DOCTEST_KEY")
    'sk-test'
    >>> read_api_key(env="MEMCLAIM_NO_SUCH_VARIABLE")
    Traceback (most recent call last):
    memclaim.errors.InputError: --api-key-env MEMCLAIM_NO_SUCH_VARIABLE: the environment variable is not set or empty
      fix: export MEMCLAIM_NO_SUCH_VARIABLE=... before running memclaim, or use --api-key-file
    """
    if env is not None and file is not None:
        raise InputError(
            "give one of --api-key-env and --api-key-file", hint="the key comes from one place"
        )
    if env is not None:
        if not isinstance(env, str) or not env or "=" in env:
            raise InputError(
                f"--api-key-env {env!r} is not an environment variable's name",
                hint="pass the variable's NAME (e.g. --api-key-env OPENAI_API_KEY), never the key",
            )
        key = os.environ.get(env, "").strip()
        if not key:
            raise InputError(
                f"--api-key-env {env}: the environment variable is not set or empty",
                hint=f"export {env}=... before running memclaim, or use --api-key-file",
            )
        return key
    if file is not None:
        p = Path(file)
        try:
            lines = p.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(
                f"--api-key-file {str(file)!r} cannot be read: {type(exc).__name__}",
                hint="pass a text file whose first line is the key (chmod 600)",
            ) from None
        key = lines[0].strip() if lines else ""
        if not key:
            raise InputError(
                f"--api-key-file {str(file)!r} is empty", hint="write the key on its first line"
            )
        return key
    return None


@dataclass
class ClientStats:
    requests: int = 0
    retries: int = 0
    failures: list = field(
        default_factory=list
    )  # the reasons of retried attempts (at most 20 kept)
    seconds_in_requests: float = 0.0
    bytes_sent: int = 0
    bytes_received: int = 0


class Client:
    """JSON over HTTP(S) to ``url`` (:func:`normalize_url`), thread-safe: each thread keeps its
    own keep-alive connection. ``sleep`` and ``log`` are injectable (tests)."""

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        retry: RetryPolicy | None = None,
        log: LogCallback | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.url = normalize_url(url)
        u = urlsplit(self.url)
        self._https = u.scheme == "https"
        self._host = u.hostname
        self._port = u.port or (443 if self._https else 80)
        self._prefix = u.path
        self._headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": "memclaim",
        }
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self.retry = retry or RetryPolicy()
        self.log = log
        self.sleep = sleep
        self._local = threading.local()
        self._lock = threading.Lock()
        self.stats = ClientStats()

    def __repr__(self) -> str:  # never the key
        return f"Client({self.url!r}, key {'set' if 'Authorization' in self._headers else 'none'})"

    # ------------------------------------------------------------------ one attempt
    def _conn(self, timeout: float):
        c = getattr(self._local, "conn", None)
        if c is None:
            cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            c = cls(self._host, self._port, timeout=timeout)
            self._local.conn = c
        c.timeout = timeout
        if c.sock is not None:
            c.sock.settimeout(timeout)
        return c

    def _drop(self) -> None:
        c = getattr(self._local, "conn", None)
        if c is not None:
            try:
                c.close()
            except OSError:
                pass
        self._local.conn = None

    def _once(self, method: str, path: str, data: bytes | None, timeout: float):
        """(status, headers, body bytes); raises _Transient for a dropped connection or timeout."""
        try:
            c = self._conn(timeout)
            c.request(method, self._prefix + path, body=data, headers=self._headers)
            r = c.getresponse()
            raw = r.read()
            if r.getheader("Connection", "").lower() == "close":
                self._drop()
            return r.status, r, raw
        except (ConnectionRefusedError, socket.gaierror) as exc:
            self._drop()
            raise _Transient(f"cannot connect ({exc.strerror or exc})") from None
        except TimeoutError:
            self._drop()
            raise _Transient(f"no answer within {timeout:g} s") from None
        except (http.client.HTTPException, ConnectionError, OSError) as exc:
            self._drop()
            raise _Transient(f"the connection failed ({type(exc).__name__}: {exc})") from None

    # ------------------------------------------------------------------ with retries
    def request(
        self,
        method: str,
        path: str,
        body: dict | None = None,
        *,
        retry: RetryPolicy | None = None,
        expect_json: bool = True,
        cancel: threading.Event | None = None,
    ):
        """Send, retrying transient failures; return the decoded JSON (or the text when
        ``expect_json`` is False). Raises :class:`HTTPStatusError` for a refused request and
        :class:`ServerError` once the retries are spent, or at once when ``cancel`` is set
        (another request of the run failed: this one gives up its retries)."""
        retry = retry or self.retry
        data = None if body is None else json.dumps(body).encode()
        last = ""
        t_first = time.perf_counter()
        for attempt in range(retry.attempts):
            retry_after = None
            t0 = time.perf_counter()
            try:
                status, resp, raw = self._once(method, path, data, retry.timeout)
                with self._lock:
                    self.stats.requests += 1
                    self.stats.seconds_in_requests += time.perf_counter() - t0
                    self.stats.bytes_sent += len(data or b"")
                    self.stats.bytes_received += len(raw)
                text = raw.decode("utf-8", errors="replace")
                if status in (408, 429) or status >= 500:
                    ra = resp.getheader("Retry-After")
                    try:
                        retry_after = float(ra) if ra is not None else None
                    except ValueError:
                        retry_after = None
                    raise _Transient(f"HTTP {status}: {_brief(text)}")
                if status >= 400:
                    raise _status_error(status, text, self.url + path)
                if not expect_json:
                    return text
                try:
                    return json.loads(text)
                except ValueError:
                    self._drop()
                    raise _Transient(
                        f"an unreadable answer ({len(raw)} bytes, not complete JSON: "
                        f"{_brief(text[-60:])})"
                    ) from None
            except _Transient as exc:
                last = str(exc)
                with self._lock:
                    self.stats.retries += 1
                    if len(self.stats.failures) < 20:
                        self.stats.failures.append(last)
                if attempt + 1 >= retry.attempts or (cancel is not None and cancel.is_set()):
                    break
                d = retry.delay(attempt, retry_after)
                emit_log(
                    self.log,
                    f"memclaim: {self.url}{path}: {last}; retrying in {d:.1f} s "
                    f"(attempt {attempt + 2} of {retry.attempts})",
                )
                if cancel is not None:
                    if cancel.wait(d):
                        break
                else:
                    self.sleep(d)
        raise ServerError(
            f"the server at {self.url} did not answer {method} {path} after {retry.attempts} attempts over "
            f"{time.perf_counter() - t_first:.0f} s; last: {last}",
            hint="check that the server is running and reachable (curl "
            + self.url
            + "/v1/models); every unit "
            "finished so far is in the store: re-run the same command to resume",
        )

    def get(self, path: str, **kw):
        return self.request("GET", path, **kw)

    def post(self, path: str, body: dict, **kw):
        return self.request("POST", path, body, **kw)

    def close(self) -> None:
        self._drop()


def _brief(text: str, n: int = 200) -> str:
    t = " ".join(text.split())
    return t if len(t) <= n else t[:n] + "..."


def _message(text: str) -> str:
    """The server's own error message from an OpenAI-style error body, else the text."""
    try:
        body = json.loads(text)
    except ValueError:
        return _brief(text)
    if isinstance(body, dict):
        e = body.get("error", body)
        if isinstance(e, dict) and e.get("message"):
            return _brief(str(e["message"]), 400)
        if isinstance(body.get("detail"), str):
            return _brief(body["detail"], 400)
        if isinstance(body.get("message"), str):
            return _brief(body["message"], 400)
    return _brief(text)


def _status_error(status: int, text: str, where: str) -> HTTPStatusError:
    msg = _message(text)
    if status in (401, 403):
        return HTTPStatusError(
            status,
            f"the server refused the request (HTTP {status}: {msg})",
            text,
            hint="give the server's API key with --api-key-env NAME (an environment variable) or "
            "--api-key-file PATH; check that it is the key this server accepts",
        )
    if status == 404:
        return HTTPStatusError(
            status,
            f"{where}: HTTP 404 ({msg})",
            text,
            hint="check --url (the server's base address) and the served model's name "
            "(curl URL/v1/models lists them)",
        )
    return HTTPStatusError(status, f"the server refused the request (HTTP {status}: {msg})", text)
