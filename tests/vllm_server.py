"""Start, kill and stop a real vLLM server for the `slow` and `served` tiers (issue 27): the command
of docs/served.md on memclaim's converted SmolLM2 folder, in a session of its own so that vLLM's
engine process goes with it (tests/scoring/test_served_vllm.py, test_served_vllm_restart.py)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def up(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/v1/models", timeout=5) as r:
            return r.status == 200
    except OSError:
        return False


def start_vllm(py: str, port: int, log: Path) -> subprocess.Popen:
    """vLLM's OpenAI server on memclaim's converted SmolLM2 folder (docs/served.md's command), in
    a session of its own so that its engine process goes with it."""
    from memclaim.models.registry import named_model

    folder = named_model("smollm2").resolve(None)
    cmd = [
        py,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(folder),
        "--served-model-name",
        "smollm2",
        "--dtype",
        "float32",
        "--max-logprobs",
        "64",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--gpu-memory-utilization",
        "0.1",
        "--enforce-eager",
        "--max-model-len",
        "2048",
    ]
    with open(log, "a") as fh:
        return subprocess.Popen(
            cmd,
            stdout=fh,
            stderr=subprocess.STDOUT,
            env={**os.environ, "VLLM_HOST_IP": "127.0.0.1"},
            start_new_session=True,
        )


def wait_up(proc: subprocess.Popen, port: int, log: Path) -> str:
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 600
    while not up(url):
        if proc.poll() is not None or time.monotonic() > deadline:
            stop(proc)
            pytest.fail(f"vLLM did not start (exit {proc.poll()}):\n{log.read_text()[-3000:]}")
        time.sleep(3)
    return url


def kill_9(proc: subprocess.Popen) -> None:
    """SIGKILL to the server's whole session (the API process and vLLM's engine process)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(60)


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        kill_9(proc)  # the engine process may outlive its parent
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(60)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass
    kill_9(proc)
