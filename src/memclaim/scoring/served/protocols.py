"""Request bodies and response parsing for the servers memclaim scores through (no I/O).

Three wire formats carry prompt log-probabilities:

* ``vllm``: vLLM's ``/v1/completions`` with token-id prompts (a list of id lists, one request for
  many windows) and its native ``prompt_logprobs: K``: per prompt position a dict
  ``{token id: {"logprob", "rank", "decoded_token"}}`` holding the top K and the prompt's own token
  (with vLLM's rank, #{v: ℓ_v >= ℓ_t}); the first position is ``null``.
* ``sglang``: SGLang's native ``/generate`` with ``input_ids``, ``return_logprob``,
  ``logprob_start_len`` (log-probs from that prompt position on: entry j scores token start + j)
  and ``top_logprobs_num: K``; ``meta_info.input_token_logprobs`` is a list of
  ``[logprob, token_id, text]`` and ``meta_info.input_top_logprobs`` a list of lists of them.
* ``echo``: the OpenAI legacy completions format (``echo: true`` + ``logprobs: K``), served by
  llama-cpp-python, SGLang's and vLLM's OpenAI routes and some hosted APIs: ``choices[i].logprobs``
  with ``tokens``, ``token_logprobs`` and ``top_logprobs`` (dicts keyed by token *string*; vLLM
  with ``return_tokens_as_token_ids`` writes ``"token_id:N"``). Text prompts (llama-cpp-python
  refuses token ids), so memclaim checks that the echoed tokens are its own.

Every parser returns, per window, a :class:`~memclaim.scoring.served.exactness.TopK` over the
window's target positions, and raises :class:`ServerResponseError` (naming the window and what
is wrong) for a response that does not hold what was asked.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ...errors import MemclaimError
from .exactness import TopK

__all__ = [
    "ServerResponseError",
    "DIALECTS",
    "Window",
    "vllm_request",
    "parse_vllm",
    "sglang_request",
    "parse_sglang",
    "echo_request",
    "parse_echo",
    "check_log_probs",
    "ProcessedLogProbsError",
    "check_raw_distribution",
]

DIALECTS = ("vllm", "sglang", "echo")
# a log-prob above this is not a log-prob (the server returns logits, or scaled values)
LOGPROB_TOLERANCE = 1e-4


class ServerResponseError(MemclaimError):
    """A server's answer does not hold what memclaim asked for (no prompt log-probs, other
    tokens than the window's, values that are not log-probabilities)."""


class ProcessedLogProbsError(ServerResponseError):
    """The server's values are log-probabilities, but not of the model's own distribution: a
    sampling processor (top-k, top-p, min-p) ran before them, or they are logits."""


# vLLM writes a log-prob of -inf as -9999.0 (clamp_prompt_logprobs); a raw float32 log-softmax
# never comes near it (the logits of a real model span tens of nats)
ZEROED = -1000.0
# a position whose returned top-K mass is 1 within float32 rounding while its K-th token still
# carries 1e-3 has a tail of V - K tokens holding < 1e-6 under a token holding 1e-3: a cliff of
# ~7 nats exactly at the rank asked, which a model's raw softmax does not have
RENORMALISED_MASS = 1e-6
RENORMALISED_KTH = math.log(1e-3)
_RAW_FIX = (
    "start the server so that it returns the model's own log-probabilities, before any sampling "
    "processing (vLLM: --logprobs-mode raw_logprobs, the default, not raw_logits, "
    "processed_logits or processed_logprobs; no server-side top-k/top-p/min-p on prompt "
    "log-probs), then run the same command again"
)


def check_raw_distribution(v: TopK, k: int, where: str) -> None:
    """Refuse a window's answer whose values cannot be the model's raw next-token distribution
    at T = 1, from the answer alone (issue 27); ``k``: the top-K asked. Three tests per target
    position whose returned entries are complete and fewer than the vocabulary:

    * zeroed: a returned token at -inf (vLLM's -9999.0): the model's softmax gives every token a
      positive probability, so a top-k/top-p/min-p processor removed it;
    * renormalised: the returned mass is 1 within :data:`RENORMALISED_MASS` while fewer than
      ``k`` came back or the K-th carries >= 1e-3 (the distribution was cut to the returned set
      and renormalised);
    * impossible mass: real log-probs leave 1 - (returned mass) to the V - n unseen tokens, each
      at most the K-th's probability, so 1 - mass <= (V - n) e^ℓ_(K); more is logits (vLLM's
      ``raw_logits``) or values shifted by a constant.

    A temperature-scaled distribution, or a top-k/top-p cut deeper than the K returned, is a
    valid distribution over what came back and is not detectable from one answer
    (docs/served.md).

    >>> ok = TopK.from_lists([7], [-0.4], [[-0.4, -1.6, -2.6]], [[7, 2, 9]], vocab_size=100)
    >>> check_raw_distribution(ok, 3, "w")
    >>> cut = TopK.from_lists([7], [-0.3], [[-0.3, -1.4, -9999.0]], [[7, 2, 9]], vocab_size=100)
    >>> check_raw_distribution(cut, 3, "w")
    Traceback (most recent call last):
    memclaim.scoring.served.protocols.ProcessedLogProbsError: the server's log-probs at w, target position 0 are not the model's raw distribution: token 9 has log-prob -9999 (probability 0), which a softmax never gives; a top-k/top-p/min-p processor ran before the log-probs
      fix: start the server so that it returns the model's own log-probabilities, before any sampling processing (vLLM: --logprobs-mode raw_logprobs, the default, not raw_logits, processed_logits or processed_logprobs; no server-side top-k/top-p/min-p on prompt log-probs), then run the same command again
    """
    V = int(v.vocab_size)
    for s in range(v.S):
        n = int((v.top_ids[s] >= 0).sum())
        if n == 0 or n >= V or not bool(v.complete[s]):
            continue
        vals = v.top_lp[s, :n]
        ids = v.top_ids[s, :n]
        why = None
        low = np.flatnonzero(vals <= ZEROED)
        if low.size:
            i = int(low[0])
            why = (
                f"token {int(ids[i])} has log-prob {float(vals[i]):.6g} (probability 0), which a "
                "softmax never gives; a top-k/top-p/min-p processor ran before the log-probs"
            )
        else:
            mass = math.fsum(math.exp(float(x)) for x in vals)
            # the K-th largest of the top K (vLLM appends the target below it when it ranks lower)
            t_last = n >= 2 and int(ids[n - 1]) == int(v.target_ids[s])
            kth = float(vals[n - 2] if t_last else vals[n - 1])
            if mass >= 1.0 - RENORMALISED_MASS and (n < min(k, V) or kth >= RENORMALISED_KTH):
                why = (
                    f"its {n} returned values sum to probability {mass:.9f} with the last at "
                    f"{kth:.3g}: the distribution was cut to what came back and renormalised "
                    "(a top-k/top-p processor ran before the log-probs)"
                )
            elif 1.0 - mass > (V - n) * math.exp(kth) * (1 + 1e-3) + 1e-5:
                why = (
                    f"its {n} returned values hold probability {mass:.3g}, leaving "
                    f"{1.0 - mass:.3g} to {V - n} unseen tokens that can hold at most "
                    f"{(V - n) * math.exp(kth):.3g} (each at most the K-th, {kth:.3g}): these are "
                    "logits or shifted values, not log-probabilities"
                )
        if why is not None:
            raise ProcessedLogProbsError(
                f"the server's log-probs at {where}, target position {s} are not the model's raw "
                f"distribution: {why}",
                hint=_RAW_FIX,
            )


@dataclass(frozen=True)
class Window:
    """One item to score: its key (for messages), prompt ids and target ids."""

    key: str
    prompt: tuple[int, ...]
    target: tuple[int, ...]


def _field(obj, name: str, where: str):
    if not isinstance(obj, dict) or name not in obj:
        raise ServerResponseError(
            f"the server's answer has no {name!r} in {where}",
            hint="is this an OpenAI-compatible server with prompt log-probabilities? see "
            "docs/served.md for what each server needs",
        )
    return obj[name]


def check_log_probs(values: Sequence[float], where: str) -> None:
    """Refuse values that cannot be natural-log probabilities at T = 1: above 0, or with a
    total probability above 1 (a server returning logits, or log-probs scaled by a temperature).

    >>> check_log_probs([-0.1, -2.5], "probe")
    >>> check_log_probs([3.2, 1.0], "probe")
    Traceback (most recent call last):
    memclaim.scoring.served.protocols.ServerResponseError: the server's values at probe are not log-probabilities at T = 1: largest 3.2, total probability 27
      fix: start the server so that it returns log-probabilities of the model's own distribution (vLLM: --logprobs-mode raw_logprobs, the default; SGLang: leave input log-probs at temperature 1)
    """
    vals = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    if not vals:
        return
    total = math.fsum(math.exp(min(v, 50.0)) for v in vals)
    if max(vals) > LOGPROB_TOLERANCE or total > 1.0 + 1e-3:
        raise ServerResponseError(
            f"the server's values at {where} are not log-probabilities at T = 1: largest {max(vals):.3g}, total "
            f"probability {total:.2g}",
            hint="start the server so that it returns log-probabilities of the model's own distribution (vLLM: "
            "--logprobs-mode raw_logprobs, the default; SGLang: leave input log-probs at temperature 1)",
        )


def _mismatch(w: Window, pos: int, want: int, got, what: str) -> ServerResponseError:
    return ServerResponseError(
        f"window {w.key[:12]}: the server's {what} at target position {pos} is {got!r}, memclaim's token is {want} "
        "(the server scored other tokens than the window's)",
        hint="point memclaim at the server's own tokenizer (the same model folder or name), and check that the server "
        "does not add or change tokens (docs/served.md)",
    )


# --------------------------------------------------------------------------- vLLM
def vllm_request(model: str, windows: Sequence[Window], k: int) -> dict:
    """The /v1/completions body scoring ``windows`` on vLLM: token-id prompts, ``prompt_logprobs``
    K, one generated token (vLLM refuses ``max_tokens`` 0), T = 1 and no truncation so that
    nothing the server applies changes the values.

    >>> vllm_request("smollm2", [Window("a", (0, 5), (7,))], 41)["prompt"]
    [[0, 5, 7]]
    """
    return {
        "model": model,
        "prompt": [list(w.prompt) + list(w.target) for w in windows],
        "max_tokens": 1,
        "prompt_logprobs": int(k),
        "temperature": 1.0,
        "top_p": 1.0,
        "top_k": -1,
        "n": 1,
        "add_special_tokens": False,
    }


def parse_vllm(body: dict, windows: Sequence[Window], k: int, vocab_size: int) -> list[TopK]:
    """TopK per window from vLLM's ``prompt_logprobs`` (module docstring).

    >>> body = {"choices": [{"index": 0, "prompt_logprobs": [None, {"5": {"logprob": -1.2, "rank": 2},
    ...          "3": {"logprob": -0.5, "rank": 1}}, {"7": {"logprob": -0.1, "rank": 1},
    ...          "2": {"logprob": -2.9, "rank": 2}}]}]}
    >>> v = parse_vllm(body, [Window("a", (0, 5), (7,))], 2, 10)[0]
    >>> v.target_lp.tolist(), v.top_ids.tolist(), v.server_rank.tolist()
    ([-0.1], [[7, 2]], [1])
    """
    choices = _field(body, "choices", "the response")
    if not isinstance(choices, list) or len(choices) != len(windows):
        raise ServerResponseError(
            f"the server answered {len(choices) if isinstance(choices, list) else choices!r} "
            f"choices for {len(windows)} prompts"
        )
    by_index = {}
    for i, c in enumerate(choices):
        by_index[int(c.get("index", i)) if isinstance(c, dict) else i] = c
    out = []
    for i, w in enumerate(windows):
        c = by_index.get(i)
        plp = _field(c, "prompt_logprobs", f"choice {i}")
        if plp is None:
            raise ServerResponseError(
                "the server returned no prompt log-probabilities (prompt_logprobs is null)",
                hint="use a vLLM server (>= 0.4) or another server with prompt log-probs; "
                "docs/served.md",
            )
        ids = list(w.prompt) + list(w.target)
        if c.get("prompt_token_ids") is not None and list(c["prompt_token_ids"]) != ids:
            raise ServerResponseError(
                f"window {w.key[:12]}: the server scored prompt ids {c['prompt_token_ids'][:8]}..., "
                f"not the window's {ids[:8]}...",
                hint="the server must take token-id prompts as given (no added BOS)",
            )
        if len(plp) != len(ids):
            raise ServerResponseError(
                f"window {w.key[:12]}: {len(plp)} prompt log-prob entries for {len(ids)} tokens"
            )
        P = len(w.prompt)
        tl, tops, topi, ranks = [], [], [], []
        for j, t in enumerate(w.target):
            d = plp[P + j]
            if not isinstance(d, dict) or str(t) not in d:
                got = None if not isinstance(d, dict) else sorted(d)[:4]
                raise _mismatch(w, j, t, got, "prompt log-prob keys")
            own = d[str(t)]
            lt = float(_field(own, "logprob", f"window {w.key[:12]} position {j}"))
            entries = {
                int(key): float(_field(e, "logprob", f"window {w.key[:12]} position {j}"))
                for key, e in d.items()
            }
            if (
                len(entries) > k
            ):  # the prompt's own token came on top of the K: it is not among them
                entries.pop(t)
            if t not in entries and entries and lt >= min(entries.values()):
                entries[t] = lt  # tied with the K-th: the K and it are a top-(K+1)
            check_log_probs(
                list(entries.values()) + ([] if t in entries else [lt]),
                f"window {w.key[:12]} position {j}",
            )
            tl.append(lt)
            topi.append(list(entries))
            tops.append(list(entries.values()))
            ranks.append(int(own.get("rank") or 0))
        out.append(
            TopK.from_lists(
                list(w.target), tl, tops, topi, vocab_size=vocab_size, server_rank=ranks
            )
        )
    return out


# --------------------------------------------------------------------------- SGLang
def sglang_request(windows: Sequence[Window], k: int) -> dict:
    """The native /generate body scoring ``windows`` on SGLang: ``input_ids``, log-probs from the
    first target position (``logprob_start_len``: one per window), top ``k``, no new tokens,
    T = 1 (SGLang scales returned log-probs by the request's temperature).

    >>> sglang_request([Window("a", (0, 5), (7, 8))], 3)["logprob_start_len"]
    [2]
    """
    return {
        "input_ids": [list(w.prompt) + list(w.target) for w in windows],
        "sampling_params": {"max_new_tokens": 0, "temperature": 1.0, "top_p": 1.0, "top_k": -1},
        "return_logprob": True,
        "logprob_start_len": [len(w.prompt) for w in windows],
        "top_logprobs_num": int(k),
        "return_text_in_logprobs": False,
    }


def parse_sglang(
    body: dict | list, windows: Sequence[Window], k: int, vocab_size: int
) -> list[TopK]:
    """TopK per window from SGLang's ``meta_info.input_token_logprobs`` / ``input_top_logprobs``.

    >>> body = [{"text": "", "meta_info": {"input_token_logprobs": [[-0.2, 7, None]],
    ...          "input_top_logprobs": [[[-0.2, 7, None], [-1.9, 3, None]]]}}]
    >>> parse_sglang(body, [Window("a", (0, 5), (7,))], 2, 10)[0].top_ids.tolist()
    [[7, 3]]
    """
    outs = body if isinstance(body, list) else [body]
    if len(outs) != len(windows):
        raise ServerResponseError(
            f"the server answered {len(outs)} outputs for {len(windows)} prompts"
        )
    res = []
    for o, w in zip(outs, windows):
        meta = _field(o, "meta_info", "an output")
        itl = _field(meta, "input_token_logprobs", "meta_info")
        itop = _field(meta, "input_top_logprobs", "meta_info")
        S = len(w.target)
        if (
            not isinstance(itl, list)
            or len(itl) != S
            or not isinstance(itop, list)
            or len(itop) != S
        ):
            raise ServerResponseError(
                f"window {w.key[:12]}: {len(itl) if isinstance(itl, list) else itl!r} input log-probs for {S} target "
                "tokens (logprob_start_len ignored?)",
                hint="use an SGLang release with logprob_start_len (docs/served.md)",
            )
        tl, tops, topi = [], [], []
        for j, t in enumerate(w.target):
            e = itl[j]
            if not isinstance(e, (list, tuple)) or len(e) < 2 or e[0] is None:
                raise ServerResponseError(
                    f"window {w.key[:12]}: no log-prob for target position {j}: {e!r}"
                )
            if int(e[1]) != t:
                raise _mismatch(w, j, t, e[1], "input token id")
            lt = float(e[0])
            entries = {}
            for x in itop[j] or []:
                entries.setdefault(int(x[1]), float(x[0]))
            if t not in entries and entries and lt >= min(entries.values()):
                entries[t] = lt
            check_log_probs(
                list(entries.values()) + ([] if t in entries else [lt]),
                f"window {w.key[:12]} position {j}",
            )
            tl.append(lt)
            topi.append(list(entries))
            tops.append(list(entries.values()))
        res.append(TopK.from_lists(list(w.target), tl, tops, topi, vocab_size=vocab_size))
    return res


# --------------------------------------------------------------------------- OpenAI legacy echo
def echo_request(model: str, prompt: str | list[int], k: int) -> dict:
    """A /v1/completions body that echoes the prompt with its log-probs (the OpenAI legacy
    format): one prompt (text, or ids where the server takes them), ``logprobs`` K, one token.

    >>> sorted(echo_request("m", "In the beginning", 5))
    ['echo', 'logprobs', 'max_tokens', 'model', 'prompt', 'temperature', 'top_p']
    """
    return {
        "model": model,
        "prompt": prompt,
        "echo": True,
        "logprobs": int(k),
        "max_tokens": 1,
        "temperature": 1.0,
        "top_p": 1.0,
    }


def _echo_token_id(tok: str, piece_ids: Callable[[str], list[int]] | None) -> list[int]:
    if tok.startswith("token_id:"):
        try:
            return [int(tok[len("token_id:") :])]
        except ValueError:
            return []
    return piece_ids(tok) if piece_ids is not None else []


def _echo_alternatives(
    d: dict,
    t: int,
    lt: float,
    own_piece: str,
    k: int,
    vocab_size: int,
    piece_ids: Callable[[str], list[int]] | None,
) -> tuple[dict[int, float], bool]:
    """One position's alternatives ``d`` (token string -> ℓ, as llama-cpp-python returns them:
    its top K, then the target's own entry added) as ``{id: ℓ}``, and whether the position lost
    information an exact policy could need.

    A string that names no single token of memclaim's tokenizer (a byte fragment, which
    llama-cpp-python decodes alone with ``errors="ignore"`` to ``""`` or to its valid part; a
    spelling several tokens share) still carries its value: while the entry count shows nothing
    was merged, the values are all there and only that entry's id is unknown, which matters
    only where its value equals another returned value (ties are settled by id). Such an entry
    gets an id that is neither the target nor another entry's, and the position is incomplete
    only for a merge (fewer entries than K, or the target's entry outside the top K without its
    own slot) or an unknown id at a tied value.

    >>> ids = {"a": [1], "b": [2], "": [7, 8]}.get
    >>> _echo_alternatives({"a": -0.5, "": -1.5, "b": -2.0}, 1, -0.5, "a", 3, 10,
    ...                    lambda x: ids(x, []))
    ({1: -0.5, 2: -2.0, 7: -1.5}, False)
    >>> _echo_alternatives({"a": -0.5, "": -0.5, "b": -2.0}, 1, -0.5, "a", 3, 10,
    ...                    lambda x: ids(x, []))[1]  # a tie with an entry of unknown id
    True
    """
    known: dict[int, float] = {}
    unknown: list[tuple[list[int], float]] = []
    for key, val in d.items():
        cand = _echo_token_id(str(key), piece_ids)
        if str(key) == own_piece and float(val) == lt:
            cand = [t]
        if len(cand) == 1 and cand[0] not in known:
            known[cand[0]] = float(val)
        else:
            unknown.append((cand, float(val)))
    entries = dict(known)
    for cand, val in unknown:
        free = [c for c in cand if c != t and c not in entries]
        i = free[0] if free else next(x for x in range(len(d) + 2) if x != t and x not in entries)
        entries[i] = val
    kk = min(k, vocab_size)
    # a merge (two tokens with one string keep one entry): fewer entries than the top K; or,
    # where the server adds the target's own entry (llama-cpp-python does), a target outside
    # the top K without a slot of its own, or one whose string other tokens share (its entry
    # may have overwritten a top-K token's)
    lost = len(d) < kk
    if t in known and len(d) < kk + 1:
        above = sum(1 for v in d.values() if float(v) > lt)
        shared = piece_ids is not None and len(_echo_token_id(own_piece, piece_ids)) > 1
        lost = lost or above >= kk or shared
    # an entry of unknown id at a value another entry (or the target) also has: ties are
    # settled by id, so the order is unknown
    values = [float(v) for v in d.values()] + ([] if t in known else [lt])
    if any(values.count(val) > 1 for _cand, val in unknown):
        lost = True
    if len(entries) > kk and t in entries:
        entries.pop(t)
    if t not in entries and entries and lt >= min(entries.values()):
        entries[t] = lt
    return entries, lost


def parse_echo(
    body: dict,
    window: Window,
    k: int,
    vocab_size: int,
    *,
    pieces: Sequence[str],
    piece_ids: Callable[[str], list[int]] | None,
    offset: int = 0,
    skip: int = 0,
) -> TopK:
    """TopK of one window from an echoed completion. ``pieces``: memclaim's text of each of the
    window's ids (the echoed tokens must be these, in order, from ``offset``: the tokens the
    server adds in front, such as its BOS, are skipped); ``piece_ids``: the ids a token string
    can stand for (None: keys are ``token_id:N``); ``skip``: how many leading tokens are the
    server's own prefix (its BOS, equal to memclaim's start-of-text ids), not compared. A position whose alternatives came back with
    fewer entries than asked (two tokens with one spelling keep one dict entry) is marked
    incomplete, so no policy that reads the list calls it exact; an entry whose string names no
    single token keeps its value (:func:`_echo_alternatives`).

    >>> body = {"choices": [{"logprobs": {"tokens": ["token_id:0", "token_id:5", "token_id:7", "token_id:9"],
    ...   "token_logprobs": [None, -3.0, -0.1, -1.0], "top_logprobs": [None, {"token_id:5": -3.0,
    ...   "token_id:2": -0.3}, {"token_id:7": -0.1, "token_id:1": -2.5}, {"token_id:9": -1.0}]}}]}
    >>> v = parse_echo(body, Window("a", (0, 5), (7,)), 2, 10, pieces=["", "", ""], piece_ids=None)
    >>> v.target_lp.tolist(), v.top_ids.tolist(), v.complete.tolist()
    ([-0.1], [[7, 1]], [True])
    """
    choices = _field(body, "choices", "the response")
    if not isinstance(choices, list) or not choices:
        raise ServerResponseError("the server answered no choices")
    lp = _field(choices[0], "logprobs", "the choice")
    if lp is None:
        raise ServerResponseError(
            "the server returned no log-probabilities (logprobs is null)",
            hint="this server does not echo prompt log-probs: use sampling estimation "
            "(docs/served.md, 'no prompt log-probabilities')",
        )
    tokens = _field(lp, "tokens", "logprobs")
    tlp = _field(lp, "token_logprobs", "logprobs")
    top = _field(lp, "top_logprobs", "logprobs")
    ids = list(window.prompt) + list(window.target)
    n = len(ids)
    if len(tokens) < offset + n or len(tlp) < offset + n:
        raise ServerResponseError(
            f"window {window.key[:12]}: the server echoed {len(tokens) - offset} prompt tokens, the window has {n}",
            hint="the server must echo the prompt with its log-probs (echo: true); docs/served.md",
        )
    P = len(window.prompt)
    # the echoed prompt must be memclaim's tokens, one for one (a retokenized text may differ)
    for j in range(skip, n):
        tok = tokens[offset + j]
        if piece_ids is None:
            got = _echo_token_id(str(tok), None)
            if got != [ids[j]]:
                raise _mismatch(window, j - P, ids[j], tok, "echoed token")
        elif str(tok) != pieces[j] and "\ufffd" not in pieces[j]:
            raise ServerResponseError(
                f"window {window.key[:12]}: the server tokenized the prompt differently: echoed token {j} is {tok!r}, "
                f"memclaim's is {pieces[j]!r} (id {ids[j]})",
                hint="use the server's own tokenizer (the same model folder or name), or a server that takes token "
                "ids (vLLM, SGLang); docs/served.md",
            )
    tl, tops, topi, complete = [], [], [], []
    for j, t in enumerate(window.target):
        pos = offset + P + j
        if tlp[pos] is None:
            raise ServerResponseError(
                f"window {window.key[:12]}: no log-prob for target position {j}"
            )
        lt = float(tlp[pos])
        d = top[pos] if pos < len(top) else None
        d = d if isinstance(d, dict) else {}
        entries, lost = _echo_alternatives(d, t, lt, str(tokens[pos]), k, vocab_size, piece_ids)
        check_log_probs(
            list(entries.values()) + ([] if t in entries else [lt]),
            f"window {window.key[:12]} position {j}",
        )
        tl.append(lt)
        topi.append(list(entries))
        tops.append(list(entries.values()))
        complete.append(not lost)
    return TopK.from_lists(
        list(window.target), tl, tops, topi, vocab_size=vocab_size, complete=complete
    )
