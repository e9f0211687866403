"""What the [EM] §4 reproductions on verses share (``parrot``, ``greedy``, ``alpha-sweep``,
``naive-vs-calibrated``): the populations, the models, and scoring into a durable store.

Populations ([EM] §4: candidates that are members, matched non-member controls, each drawn as
an i.i.d. sample). Members are the 240 King James verses of ``kjv_verses.jsonl``; controls are
the 240 newly written KJV-style verses of ``new_verses.jsonl`` (matched one-to-one by line)
and the 60 of ``new_verses_b.jsonl`` (matched to the even 0-based lines 0, 2, .., 118), 300 in
all, so the smallest certifiable level is 1/(N+1) = 1/301 (the paper's N = 5000 reaches
1/5001). ``--quick`` keeps the even 0-based lines: 120 members against the 120 controls of the
same lines and the 60 of the second set, which are matched to lines among them (N = 180). The
files' provenance, matching and decontamination are in tests/data/README.md.

The data are read from ``$MEMCLAIM_REPRO_DATA`` if set, else from the ``tests/data`` folder of
the source checkout this package runs from; each file's SHA-256 goes into the result.

Scoring goes through the project's one pipeline (windows -> engine -> store): every window is
scored once into ``OUT/store``, a content-addressed score store, so a reproduction that shares
the procedure with another (greedy, alpha-sweep and naive-vs-calibrated share one) and a second
run read the scores back without the model.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..decoding import Policy, parse_policies
from ..errors import InputError
from ..fsutil import sha256_file
from ..models import load_model
from ..scoring.prompts import PromptRule
from ..store.results import load_run_scores
from ..text.io import Record
from ..text.windows import passage_windows

if TYPE_CHECKING:  # the annotations' names only
    from ..models.loader import LoadedModel
    from ..store.results import RunScores

DATA_ENV = "MEMCLAIM_REPRO_DATA"
MEMBERS = ("kjv_verses.jsonl",)
CONTROLS = ("new_verses.jsonl", "new_verses_b.jsonl")
#: the models of each tier: SmolLM2-135M-Instruct (CI), and Gemma 3 270M (base) beside it in full runs
QUICK_MODELS = ("smollm2",)
FULL_MODELS = ("smollm2", "gemma3-270m")
MODEL_SHORT = {"smollm2": "SmolLM2-135M-Instruct", "gemma3-270m": "Gemma 3 270M"}
MODEL_WORDS = {
    "smollm2": "SmolLM2-135M-Instruct (Q4_1 GGUF, float32)",
    "gemma3-270m": "Gemma 3 270M base (Q4_K_M GGUF, float32)",
}


def data_dir() -> Path:
    """The folder holding kjv_verses.jsonl and the controls (see the module docstring).

    >>> from memclaim.experiments.em_verses import data_dir
    >>> sorted(p.name for p in data_dir().glob("*verses*.jsonl"))
    ['kjv_verses.jsonl', 'new_verses.jsonl', 'new_verses_b.jsonl']
    """
    env = os.environ.get(DATA_ENV)
    here = Path(env) if env else Path(__file__).resolve().parents[3] / "tests" / "data"
    missing = [n for n in MEMBERS + CONTROLS if not (here / n).is_file()]
    if missing:
        raise InputError(
            f"the verse data {', '.join(missing)} are not in {str(here)!r}",
            hint=f"run from a memclaim source checkout (tests/data), or set {DATA_ENV} to a folder "
            "holding kjv_verses.jsonl, new_verses.jsonl and new_verses_b.jsonl",
        )
    return here


@dataclass(frozen=True)
class Verse:
    id: str
    text: str
    line: int  # 0-based line in its file


def read_verses(path: Path) -> list[Verse]:
    """The verses of a JSONL file (one ``{"id", "text"}`` object a line; blank lines skipped), each
    with its 0-based line (an InputError naming the line otherwise).

    >>> from memclaim.experiments.em_verses import data_dir, read_verses
    >>> read_verses(data_dir() / "kjv_verses.jsonl")[0].id
    'Ge6:17'
    """
    out = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            out.append(Verse(str(d["id"]), str(d["text"]), i))
        except (ValueError, KeyError, TypeError):
            raise InputError(
                f"{str(path)!r} line {i + 1} is not a JSON object with 'id' and 'text'",
                hint="restore the file from the repository",
            ) from None
    return out


@dataclass(frozen=True)
class Populations:
    members: tuple[Verse, ...]
    controls: tuple[Verse, ...]
    files: dict  # file name -> {"sha256", "lines_used", "role"}
    rule: str

    def describe(self) -> dict:
        return {
            "members": len(self.members),
            "controls": len(self.controls),
            "files": self.files,
            "rule": self.rule,
            "smallest_certifiable_level": f"1/{len(self.controls) + 1}",
        }


def populations(quick: bool, *, every: int | None = None) -> Populations:
    """Members and matched controls (see the module docstring). ``every`` = k (quick runs of costly
    procedures): lines 0, k, 2k, .. of kjv_verses.jsonl and of new_verses.jsonl only (paired by line).

    >>> from memclaim.experiments.em_verses import populations
    >>> d = populations(True).describe()
    >>> d["members"], d["controls"], d["smallest_certifiable_level"]
    (120, 180, '1/181')
    """
    d = data_dir()
    kjv = read_verses(d / MEMBERS[0])
    new, newb = read_verses(d / CONTROLS[0]), read_verses(d / CONTROLS[1])
    if quick and every is not None:
        members = [v for v in kjv if v.line % every == 0]
        controls = [v for v in new if v.line % every == 0]
        newb = []
        rule = f"quick: 0-based lines 0, {every}, {2 * every}, .. of kjv_verses.jsonl and new_verses.jsonl (paired)"
    elif quick:
        keep = lambda v: v.line % 2 == 0  # noqa: E731 - even 0-based lines; new_verses_b matches lines 0, 2, .., 118
        members = [v for v in kjv if keep(v)]
        controls = [v for v in new if keep(v)] + newb
        rule = (
            "quick: even 0-based lines of kjv_verses.jsonl and new_verses.jsonl, and all of new_verses_b.jsonl "
            "(matched to even lines 0..118)"
        )
    else:
        members, controls = kjv, new + newb
        rule = "full: every line of the three files"
    files = {}
    for name, rows, role in (
        (MEMBERS[0], members, "members"),
        (CONTROLS[0], [v for v in controls if v in new], "controls"),
        (CONTROLS[1], newb, "controls"),
    ):
        files[name] = {"sha256": sha256_file(d / name), "role": role, "lines_used": len(rows)}
    return Populations(tuple(members), tuple(controls), files, rule)


def model_info(model: LoadedModel) -> dict:
    """What the JSON records about a model: name, descriptions, fingerprint, dtype, start-of-text
    rule, and the torch and transformers versions (no paths: they differ between machines).

    >>> from memclaim.experiments.em_verses import model_info
    >>> from memclaim.models import load_model
    >>> model_info(load_model("smollm2"))["short"]  # doctest: +SKIP
    'SmolLM2-135M-Instruct'
    """
    import torch
    import transformers

    return {
        "name": model.name,
        "words": MODEL_WORDS.get(model.name, model.name),
        "short": MODEL_SHORT.get(model.name, model.name),
        "fingerprint": model.fingerprint,
        "dtype": model.dtype,
        "start_of_text": model.sot.to_dict(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    }


def score_populations(
    model: LoadedModel,
    pops: Populations,
    *,
    what: str,
    policies: Sequence[str],
    prefix_tokens: int | None,
    suffix_tokens: int | None,
    prompt_rule: PromptRule,
    out_dir: str | os.PathLike,
    records: str = "natural",
    batch_size: int = 16,
) -> dict:
    """Score members and controls under one procedure into ``OUT/store``; returns
    ``{"members": run_id, "controls": run_id, "store": path}``. ``records="quote"`` gives each
    record an empty prefix field and the whole verse as its suffix field (the parrot prompt quotes
    the verse); ``"natural"`` cuts prefix and suffix tokens from the verse itself.

    >>> from memclaim.experiments.em_verses import populations, score_populations
    >>> from memclaim.models import load_model
    >>> from memclaim.scoring.prompts import PromptRule
    >>> runs = score_populations(load_model("smollm2"), populations(True), what="demo", policies=["greedy"],
    ...                          prefix_tokens=16, suffix_tokens=16, prompt_rule=PromptRule(),
    ...                          out_dir="reproductions")  # doctest: +SKIP
    >>> sorted(runs)  # doctest: +SKIP
    ['controls', 'members', 'store']
    """
    from ..scoring.runner import run_scoring

    store = Path(out_dir) / "store"
    runs = {}
    for label, rows in (("members", pops.members), ("controls", pops.controls)):
        if records == "quote":
            recs = [Record(v.id, v.text, suffix_start=0) for v in rows]
        else:
            recs = [Record(v.id, v.text) for v in rows]
        ws = passage_windows(
            recs, model.tokenizer, prefix_tokens=prefix_tokens, suffix_tokens=suffix_tokens
        )
        if ws.skipped_short:
            raise InputError(
                f"{ws.skipped_short} {label} verses are shorter than the procedure's "
                f"{prefix_tokens} + {suffix_tokens} tokens under {model.name} "
                f"(first: {ws.skipped_ids[0]!r})",
                hint="the reproduction's lengths assume every verse has at least 33 tokens",
            )
        summary = run_scoring(
            model,
            ws,
            policies=parse_policies(list(policies)),
            prefix_tokens=prefix_tokens,
            suffix_tokens=suffix_tokens,
            prompt_rule=prompt_rule,
            out_dir=store,
            label=f"{what}:{label}",
            progress=False,
            batch_size=batch_size,
        )
        runs[label] = summary.run_id
    runs["store"] = str(store)
    return runs


def load(runs: dict, label: str, *, policy: str, suffix_tokens: int | None = None) -> RunScores:
    """The scores of population ``label`` ("members" or "controls") of ``runs`` (from
    :func:`score_populations`) under ``policy``, at the first ``suffix_tokens`` target tokens when given.

    >>> from memclaim.experiments import em_verses as ev
    >>> pops, entries = ev.natural_runs(True, "reproductions")  # doctest: +SKIP
    >>> ev.load(entries[0]["runs"], "members", policy="greedy", suffix_tokens=3).logq.shape  # doctest: +SKIP
    (120,)
    """
    return load_run_scores(
        runs["store"], run=runs[label], policy=policy, suffix_tokens=suffix_tokens
    )


def greedy_prefix_flags(scores: RunScores) -> np.ndarray:
    """[W, L] bool: window w's first l+1 target tokens are all the greedy (argmax) token, read from the
    greedy policy's per-token log q (0 or -inf): a match of l tokens is the binary score of the
    l-token suffix ([EM] §4, D.3), from one teacher-forced pass.

    >>> from memclaim.experiments import em_verses as ev
    >>> pops, entries = ev.natural_runs(True, "reproductions")  # doctest: +SKIP
    >>> ev.greedy_prefix_flags(ev.load(entries[0]["runs"], "members", policy="greedy")).shape  # doctest: +SKIP
    (120, 16)
    """
    per_tok = scores.token_array(f"token_logq:{scores.policy}")
    n = min(len(v) for v in per_tok)
    return np.stack([np.cumsum(v[:n]) == 0.0 for v in per_tok])  # 0 + 0 + ... stays exactly 0


def cp(k: int, n: int, confidence: float = 0.95) -> dict:
    """``k`` of ``n`` with its two-sided Clopper-Pearson interval, as a JSON-ready dict.

    >>> from memclaim.experiments.em_verses import cp
    >>> {key: round(v, 4) for key, v in cp(3, 10).items()}
    {'count': 3, 'n': 10, 'rate': 0.3, 'lower': 0.0667, 'upper': 0.6525}
    """
    from ..claims.intervals import clopper_pearson

    iv = clopper_pearson(int(k), int(n), confidence=confidence)
    return {"count": int(k), "n": int(n), "rate": iv.estimate, "lower": iv.lower, "upper": iv.upper}


def intervals_overlap(a: dict, b: dict) -> bool:
    """Whether the intervals of two :func:`cp` dicts share a point.

    >>> from memclaim.experiments.em_verses import cp, intervals_overlap
    >>> intervals_overlap(cp(3, 10), cp(9, 10)), intervals_overlap(cp(0, 10), cp(9, 10))
    (True, False)
    """
    return bool(a["lower"] <= b["upper"] and b["lower"] <= a["upper"])


def nonoverlap_false_alarm(n1: int, n2: int, p: float, confidence: float = 0.95) -> float:
    """P(two independent CP intervals at counts X ~ Bin(n1, p), Y ~ Bin(n2, p) do not overlap): the
    false-alarm rate of "the intervals overlap" as a test of equal rates, at the common rate p.

    >>> from memclaim.experiments.em_verses import nonoverlap_false_alarm
    >>> round(nonoverlap_false_alarm(20, 20, 0.5), 4)
    0.0022
    """
    from scipy import stats

    from ..claims.intervals import clopper_pearson_arrays

    x, y = np.arange(n1 + 1), np.arange(n2 + 1)
    lx, ux = clopper_pearson_arrays(x, np.full_like(x, n1), confidence=confidence)
    ly, uy = clopper_pearson_arrays(y, np.full_like(y, n2), confidence=confidence)
    apart = (lx[:, None] > uy[None, :]) | (ly[None, :] > ux[:, None])
    w = stats.binom.pmf(x, n1, p)[:, None] * stats.binom.pmf(y, n2, p)[None, :]
    return float(np.sum(w[apart]))


# ------------------------------------------------------------------ the natural-prefix procedure
#: [EM] §4 scores each passage from its 50-token natural prefix, with a 10- or 50-token suffix. The
#: shortest verse has 33 tokens under both models, so the window is scaled to fit: a 16-token prefix
#: and a 16-token suffix (the real tier's procedure, tests/claims/test_real_claims.py), and the short length
#: scaled from the paper's ratio, 16 x 10/50 = 3.2 -> 3 tokens. Every length 1..16 is read from the
#: same pass (per-token columns), so the choice hides nothing: the JSON holds the whole sweep.
PREFIX_TOKENS = 16
SUFFIX_TOKENS = 16
SHORT, LONG = 3, 16
#: the papers' sampling policy ([EM] §4: top-k sampling, k = 40), named by its parameters
PAPER_POLICY = Policy(top_k=40).spec
NATURAL_POLICIES = ("greedy", PAPER_POLICY, "full")
LENGTH_RULE = (
    f"{PREFIX_TOKENS}-token natural prefix, suffixes of {SHORT} and {LONG} tokens (the paper's 50-token "
    f"prefix with 10- or 50-token suffixes, scaled to the 33 tokens of the shortest verse: "
    f"{LONG} x 10/50 = 3.2 -> {SHORT}); every length 1..{SUFFIX_TOKENS} from the same pass"
)


def natural_runs(quick: bool, out_dir: str | os.PathLike) -> tuple[Populations, list[dict]]:
    """Score the populations under the natural-prefix procedure for every model of the tier:
    [{"model": model_info, "runs": {...}}, ...] (weights load only if the store lacks scores).

    >>> from memclaim.experiments.em_verses import natural_runs
    >>> pops, entries = natural_runs(True, "reproductions")  # doctest: +SKIP
    >>> [e["model"]["name"] for e in entries], sorted(entries[0]["runs"])  # doctest: +SKIP
    (['smollm2'], ['controls', 'members', 'store'])
    """
    pops = populations(quick)
    out = []
    for name in QUICK_MODELS if quick else FULL_MODELS:
        model = load_model(name)
        runs = score_populations(
            model,
            pops,
            what="em-verses-natural",
            policies=NATURAL_POLICIES,
            prefix_tokens=PREFIX_TOKENS,
            suffix_tokens=SUFFIX_TOKENS,
            prompt_rule=PromptRule(),
            out_dir=out_dir,
        )
        out.append({"model": model_info(model), "runs": runs})
    return pops, out


def tier_differences(
    quick: bool, pops: Populations, *, paper_models: str, paper_text: str, paper_n: str
) -> list[str]:
    """What differs from the paper in this tier: the models, the text and the population sizes.

    >>> from memclaim.experiments.em_verses import populations, tier_differences
    >>> tier_differences(True, populations(True), paper_models="OLMo 2 32B", paper_text="Wikipedia",
    ...                  paper_n="5,000 each")[2]
    'N = 120 members, 180 controls (paper: 5,000 each)'
    """
    models = QUICK_MODELS if quick else FULL_MODELS
    return [
        f"models {', '.join(MODEL_WORDS[m] for m in models)} (paper: {paper_models})",
        f"text: King James verses against newly written KJV-style verses (paper: {paper_text})",
        f"N = {len(pops.members)} members, {len(pops.controls)} controls (paper: {paper_n})",
    ]
