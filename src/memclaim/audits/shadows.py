"""Shadow models: trained by memclaim itself on random halves of a population, saved with their
membership masks, reused across runs and resumable ([MX] §8.2, App. F.2; Carlini et al. 2022,
"Membership Inference Attacks From First Principles", IEEE S&P, §IV and Alg. 1).

Design of the halves
--------------------
Shadows come in complementary pairs: pair j draws a uniformly random half H_j of the population
(seeded by (design_seed, j)); shadow 2j trains on H_j and shadow 2j + 1 on its complement. So

- every population record is IN exactly N/2 of N shadows and OUT of the other N/2 (LiRA online
  needs both sides for every example, Carlini et al. 2022 Alg. 1; their reference code balances
  the same way),
- each shadow's training half is marginally a uniform random half, so the IN/OUT contrast
  estimates the population-conditional functional **COND** of [MX] App. A (random halves; not
  RO, not LOO, Remark A.3),
- shadow i's mask depends only on (design_seed, i // 2), never on N: a run with 16 shadows
  reuses the 8 of an earlier run and trains 8 more,
- pairs are independent, so the per-target contrast has an exact paired standard error
  sd_j(h_IN,j - h_OUT,j) / sqrt(N/2) (:func:`counterfactual_from_shadows`), with no assumption
  about the dependence of the two models of a pair.

Training (one trainer)
----------------------
Every shadow goes through :func:`memclaim.train.trainer.train_causal_lm`, by the recipe and
model set-up of :mod:`memclaim.train.recipe`:

- ``mode="scratch"`` (the tiny GPT and other small models): a fresh model built from the
  target's ``config.json`` (same architecture, fresh initialization under the shadow's seed),
  the target's tokenizer, the recipe of :mod:`memclaim.train.toy` (:meth:`ShadowRecipe.toy`);
- ``mode="finetune"`` (HF models): a copy of a base checkpoint fine-tuned on its half with
  AdamW, lr 5e-5, batch 8, 3 epochs ([MX] App. F.2 "Fine-tuning"; :meth:`ShadowRecipe.finetune`).
  The base should be the checkpoint the audited model was fine-tuned *from*; fine-tuning the
  audited model itself carries its own exposure to the members into every OUT shadow.

Documents (optional ``background`` texts every shadow sees, plus the records of its half) are
shuffled under the shadow's seed, separated by the start-of-text ids and packed into blocks by
:func:`memclaim.train.trainer.pack_documents`; the stream is padded with separator tokens to a
whole number of blocks so that no IN record falls in the dropped tail.

On disk
-------
``DIR/population.jsonl`` (the declared population), and per shadow ``DIR/<i>/``: an ordinary HF
folder (safetensors + tokenizer) with ``membership.json`` = {population sha256, the IN indices,
design seed, pair, recipe, training summary}. A shadow is trained in ``DIR/.<i>.tmp-*`` and
renamed into place only when complete, so a killed run leaves finished shadows intact and the
next run restarts only the unfinished one. A folder whose population hash, mask or recipe
differs from what is declared is refused (never silently reused or overwritten).
"""

from __future__ import annotations

import json
import math
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from .._version import __version__
from ..errors import DomainError, InputError, ProcedureMismatchError
from ..fsutil import atomic_directory, atomic_write_text, file_lock, sha256_bytes
from ..jsonutil import ResultMixin
from ..privacy.caps import memorization_cap
from ..privacy.tradeoff import neighbors_label, normalize_neighbors, pure
from ..train.recipe import (  # noqa: F401  (re-exported: the shadows' training recipe lives in train/)
    SHADOW_MODES,
    ShadowRecipe,
    load_hf_tokenizer,
    save_model_folder,
    train_on_texts,
    training_blocks,
)
from ..validate import in_open_unit, integer
from ..validate import seed as check_seed
from .counterfactual import (
    CapComparison,
    CounterfactualEstimate,
    compare_to_cap,
    counterfactual_memorization,
    teacher_forcing_probability,
    truncated_logloss,
)

__all__ = [
    "SHADOW_MODES",
    "Population",
    "ShadowRecipe",
    "ShadowSet",
    "CapSpec",
    "ShadowCounterfactual",
    "population_from_texts",
    "shadow_masks",
    "training_blocks",
    "train_on_texts",
    "save_model_folder",
    "ensure_shadows",
    "cap_from_epsilon",
    "counterfactual_from_shadows",
]

MEMBERSHIP_FILE = "membership.json"
MEMBERSHIP_SCHEMA = 1
DESIGN = "complementary random halves (pair j: H_j and its complement)"


# ------------------------------------------------------------------------------ population
@dataclass(frozen=True)
class Population(ResultMixin):
    """The declared population the halves are drawn from: ordered ids and texts (texts unique).

    ``sha256`` hashes the ordered texts (what the shadows are trained on, and what the mask
    indexes); ids are carried for reports only.
    """

    ids: tuple[str, ...]
    texts: tuple[str, ...]

    def __post_init__(self):
        if len(self.ids) != len(self.texts):
            raise InputError(f"population has {len(self.ids)} ids and {len(self.texts)} texts")

    @property
    def sha256(self) -> str:
        return sha256_bytes(json.dumps(list(self.texts), ensure_ascii=False).encode("utf-8"))

    def __len__(self) -> int:
        return len(self.texts)

    def index(self, texts: Sequence[str], *, what: str = "texts") -> np.ndarray:
        """Population index of each text; an audited text outside the population is refused."""
        pos = {t: i for i, t in enumerate(self.texts)}
        out = np.empty(len(texts), dtype=np.int64)
        for j, t in enumerate(texts):
            if t not in pos:
                raise InputError(
                    f"{what}[{j}] ({t[:60]!r}...) is not in the shadows' population",
                    hint="the shadow population must contain every audited text (members and non-members)",
                )
            out[j] = pos[t]
        return out


def population_from_texts(*groups: Sequence, names: Sequence[str] | None = None) -> Population:
    """A population from groups of records (``memclaim.text.io.Record``, dicts with id/text, or
    strings), in order. A text that occurs twice, within or across groups, is refused: a record
    cannot be both a member and a non-member, and duplicate rows would double its weight.

    >>> p = population_from_texts(["a cat", "a dog"], [{"id": "x", "text": "a bird"}], names=["members", "nonmembers"])
    >>> p.ids
    ('members:members:0', 'members:members:1', 'nonmembers:x')
    """
    ids, texts, where = [], [], {}
    for g, group in enumerate(groups):
        gname = names[g] if names else f"group {g}"
        for j, r in enumerate(group):
            if isinstance(r, str):
                rid, txt = f"{gname}:{j}", r
            elif isinstance(r, dict):
                rid, txt = str(r.get("id", f"{gname}:{j}")), r.get("text")
            else:
                rid, txt = str(getattr(r, "id", f"{gname}:{j}")), getattr(r, "text", None)
            if not isinstance(txt, str) or not txt.strip():
                raise InputError(
                    f"{gname} record {j} has no text",
                    hint="every population record needs a non-empty text",
                )
            if txt in where:
                raise InputError(
                    f"the text of {gname} record {rid!r} also occurs as {where[txt]}: {txt[:60]!r}...",
                    hint="members and non-members must be distinct texts; remove the duplicate",
                )
            where[txt] = f"{gname} record {rid!r}"
            ids.append(f"{gname}:{rid}" if names else rid)
            texts.append(txt)
    if len(texts) < 2:
        raise InputError(f"a shadow population needs at least two records, got {len(texts)}")
    return Population(tuple(ids), tuple(texts))


# ---------------------------------------------------------------------------------- masks
def shadow_masks(n_population: int, n_shadows: int, *, design_seed: int = 0) -> np.ndarray:
    """[n_shadows, n_population] bool: complementary random halves (see the module docstring).

    Pair j permutes the population with ``default_rng([design_seed, j])``; shadow 2j keeps the
    first floor(n/2) records of the permutation, shadow 2j+1 the rest. n_shadows must be even.

    >>> shadow_masks(4, 4).astype(int).tolist()  # rows 0/1 and 2/3 are complementary
    [[1, 0, 1, 0], [0, 1, 0, 1], [1, 0, 0, 1], [0, 1, 1, 0]]
    """
    n = integer("population size", n_population, minimum=2)
    s = integer("number of shadows", n_shadows, minimum=2)
    if s % 2:
        raise DomainError(
            f"the number of shadows must be even, got {n_shadows}",
            hint="shadows come in complementary pairs so that every record is IN exactly half of them",
        )
    seed = check_seed("design seed", design_seed)
    out = np.zeros((s, n), dtype=bool)
    for j in range(s // 2):
        perm = np.random.default_rng([seed, j]).permutation(n)
        out[2 * j, perm[: n // 2]] = True
        out[2 * j + 1] = ~out[2 * j]
    return out


# ------------------------------------------------------------------------------ shadow set
@dataclass(frozen=True)
class ShadowSet(ResultMixin):
    """N shadows on disk: folder paths, the [N, n_population] IN masks, and what was trained now."""

    root: str
    paths: tuple[str, ...]
    masks: np.ndarray
    population_sha256: str
    population_size: int
    design: str
    design_seed: int
    recipe: dict
    trained: tuple[int, ...]
    reused: tuple[int, ...]
    seconds: float
    population: Population = field(repr=False, compare=False, default=None)

    def __len__(self) -> int:
        return len(self.paths)

    def in_mask(self, texts: Sequence[str], *, what: str = "texts") -> np.ndarray:
        """[N, len(texts)] bool: was text j in shadow i's training half."""
        return self.masks[:, self.population.index(texts, what=what)]

    def to_dict(self) -> dict:
        d = super().to_dict()
        d.pop("population", None)
        d["masks"] = {
            "shape": list(self.masks.shape),
            "in_per_record": self.masks.sum(axis=0).tolist()[:50],
        }
        return d


def _read_membership(folder: Path) -> dict | None:
    p = folder / MEMBERSHIP_FILE
    if not p.is_file():
        return None
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(
            f"{str(p)!r} is unreadable: {exc}",
            hint="delete that shadow folder; it will be trained again",
        ) from None


def _check_reuse(
    folder: Path,
    meta: dict,
    *,
    index: int,
    population: Population,
    mask: np.ndarray,
    recipe: ShadowRecipe,
    design_seed: int,
) -> None:
    declared = population.sha256
    if meta.get("population_sha256") != declared:
        raise ProcedureMismatchError(
            f"shadow {index} in {str(folder)!r} was trained on population {str(meta.get('population_sha256'))[:16]} "
            f"({meta.get('n_population')} records), not on the declared population {declared[:16]} "
            f"({len(population)} records)",
            hint="use another output folder for this population, or delete the shadows folder to retrain",
        )
    got = np.zeros(len(population), dtype=bool)
    idx = np.asarray(meta.get("in_indices", []), dtype=np.int64)
    if idx.size and (idx.min() < 0 or idx.max() >= len(population)):
        raise ProcedureMismatchError(
            f"shadow {index} in {str(folder)!r} has IN indices outside the population"
        )
    got[idx] = True
    if int(meta.get("design_seed", -1)) != design_seed or not np.array_equal(got, mask):
        raise ProcedureMismatchError(
            f"shadow {index} in {str(folder)!r} was trained on a different half (design seed "
            f"{meta.get('design_seed')!r}, declared {design_seed})",
            hint="use the design seed the shadows were trained with, or another output folder",
        )
    want = recipe.identity()
    have = meta.get("recipe", {})
    diffs = [f"{k}: {have.get(k)!r} != {v!r}" for k, v in want.items() if have.get(k) != v]
    if diffs:
        raise ProcedureMismatchError(
            f"shadow {index} in {str(folder)!r} was trained with a different recipe: "
            + "; ".join(diffs),
            hint="pass the same shadow settings as the run that trained them, or use another output folder",
        )


def _write_population(root: Path, population: Population) -> None:
    p = root / "population.jsonl"
    if p.exists():
        first = p.read_text(encoding="utf-8").split("\n", 1)[0]
        try:
            head = json.loads(first)
        except json.JSONDecodeError:
            head = {}
        if head.get("population_sha256") != population.sha256:
            raise ProcedureMismatchError(
                f"the shadows folder {str(root)!r} belongs to population {str(head.get('population_sha256'))[:16]}, "
                f"not to the declared population {population.sha256[:16]} ({len(population)} records)",
                hint="shadows trained on another population cannot calibrate this audit; use another output "
                "folder, or delete the shadows folder to retrain",
            )
        return
    lines = [json.dumps({"population_sha256": population.sha256, "n": len(population)})]
    lines += [
        json.dumps({"index": i, "id": rid, "text": t}, ensure_ascii=False)
        for i, (rid, t) in enumerate(zip(population.ids, population.texts))
    ]
    atomic_write_text(p, "\n".join(lines) + "\n")


def ensure_shadows(
    shadow_dir: str | Path,
    *,
    population: Population,
    n_shadows: int,
    recipe: ShadowRecipe,
    design_seed: int = 0,
    background: Sequence[str] = (),
    sep_ids: Sequence[int] | None = None,
    log: Callable[[str], None] | None = None,
) -> ShadowSet:
    """Train the missing shadows among 0..n_shadows-1 under ``shadow_dir`` and return all of them.

    Finished shadows are reused after checking population hash, mask and recipe (a mismatch is
    refused with :class:`ProcedureMismatchError`); half-trained ones (temporary folders of a
    killed run) are deleted and trained again.

    >>> from memclaim.audits.micro_lira import micro_recipe, varied_difficulty_texts
    >>> pop = population_from_texts(varied_difficulty_texts(12))
    >>> ss = ensure_shadows("runs/shadows", population=pop, n_shadows=2, recipe=micro_recipe("runs/micro/base", steps=5))  # doctest: +SKIP
    >>> len(ss), ss.trained, ss.reused, ss.masks.sum(axis=1).tolist()  # doctest: +SKIP
    (2, (0, 1), (), [6, 6])
    """
    if not isinstance(population, Population):
        raise InputError(
            f"population must be a Population (see population_from_texts), got {type(population).__name__}"
        )
    bg = tuple(background)
    bg_hash = sha256_bytes(json.dumps(list(bg), ensure_ascii=False).encode("utf-8")) if bg else None
    if recipe.background_sha256 != bg_hash:
        recipe = replace(recipe, background_sha256=bg_hash)
    masks = shadow_masks(len(population), n_shadows, design_seed=design_seed)
    root = Path(shadow_dir)
    for i in range(n_shadows):
        folder = root / str(i)
        if (folder.exists() or folder.is_symlink()) and (
            not folder.is_dir() or _read_membership(folder) is None
        ):
            # memclaim publishes a shadow whole (membership.json inside) by one rename: anything
            # else at this path is not memclaim's, and is never deleted
            raise InputError(
                f"{str(folder)!r} already exists and is not a finished memclaim shadow (no "
                f"{MEMBERSHIP_FILE}); memclaim does not delete it",
                hint=f"move {str(folder)!r} away, or give the audit another --out folder",
            )
    root.mkdir(parents=True, exist_ok=True)
    _write_population(root, population)
    say = log or (lambda msg: None)
    t0 = time.perf_counter()
    trained, reused, paths = [], [], []
    tok_cache: dict = {}
    for i in range(n_shadows):
        folder = root / str(i)
        meta = _read_membership(folder) if folder.is_dir() else None
        if meta is not None:
            _check_reuse(
                folder,
                meta,
                index=i,
                population=population,
                mask=masks[i],
                recipe=recipe,
                design_seed=design_seed,
            )
            reused.append(i)
            paths.append(str(folder))
            continue
        with file_lock(
            root / f".{i}.lock"
        ):  # one trainer per shadow: a live one's temp folder is never touched
            meta = _read_membership(folder) if folder.is_dir() else None
            if meta is not None:  # another audit trained it while we waited
                _check_reuse(
                    folder,
                    meta,
                    index=i,
                    population=population,
                    mask=masks[i],
                    recipe=recipe,
                    design_seed=design_seed,
                )
                reused.append(i)
                paths.append(str(folder))
                continue
            for stale in root.glob(
                f".{i}.tmp-*"
            ):  # left by a killed run (we hold the lock): restart this shadow
                shutil.rmtree(stale, ignore_errors=True)
            _train_shadow(
                i,
                folder,
                population=population,
                masks=masks,
                recipe=recipe,
                design_seed=design_seed,
                bg=bg,
                sep_ids=sep_ids,
                say=say,
                tok_cache=tok_cache,
            )
        trained.append(i)
        paths.append(str(folder))
    return ShadowSet(
        root=str(root),
        paths=tuple(paths),
        masks=masks,
        population_sha256=population.sha256,
        population_size=len(population),
        design=DESIGN,
        design_seed=int(design_seed),
        recipe=recipe.identity(),
        trained=tuple(trained),
        reused=tuple(reused),
        seconds=time.perf_counter() - t0,
        population=population,
    )


def _train_shadow(
    i, folder, *, population, masks, recipe, design_seed, bg, sep_ids, say, tok_cache
) -> None:
    """Train shadow ``i`` and publish it at ``folder`` whole (membership.json inside), by one rename."""
    if "tok" not in tok_cache:
        tok_cache["tok"] = load_hf_tokenizer(recipe.base)
    tok = tok_cache["tok"]
    seed = recipe.shadow_seed(i)
    in_idx = np.flatnonzero(masks[i])
    say(
        f"training shadow {i + 1}/{len(masks)} ({recipe.mode}, {in_idx.size} of {len(population)} records IN)"
    )
    with atomic_directory(folder, tmp_prefix=f".{i}.tmp-") as tmp:
        model, result, _ = train_on_texts(
            recipe,
            [population.texts[j] for j in in_idx],
            seed=seed,
            background=bg,
            sep_ids=sep_ids,
            tokenizer=tok,
            label=f"training shadow {i + 1} of {len(masks)}",
        )
        save_model_folder(model, tok, tmp)
        meta = {
            "schema": MEMBERSHIP_SCHEMA,
            "index": i,
            "pair": i // 2,
            "side": i % 2,
            "design": DESIGN,
            "design_seed": int(design_seed),
            "population_sha256": population.sha256,
            "n_population": len(population),
            "n_in": int(in_idx.size),
            "in_indices": in_idx.tolist(),
            "seed": seed,
            "recipe": recipe.identity(),
            "base_path": recipe.base,
            "train": {k: v for k, v in result.to_dict().items() if k != "losses"},
            "memclaim_version": __version__,
            "created": time.time(),
        }
        atomic_write_text(tmp / MEMBERSHIP_FILE, json.dumps(meta, indent=1))


# ------------------------------------------------------------------- counterfactual + cap
@dataclass(frozen=True)
class CapSpec(ResultMixin):
    """A cap on |mem_h| to compare a shadow estimate with (see
    :func:`memclaim.audits.counterfactual.compare_to_cap` for the rules)."""

    value: float
    functional: str
    relation: str
    via_group_privacy: bool = False
    conversion_slack: float | None = None
    conversion_note: str | None = None
    source: str = ""


def cap_from_epsilon(
    epsilon: float, *, relation: str = "add/remove", functional: str | None = None, copies: int = 1
) -> CapSpec:
    """The cap pure epsilon-DP puts on a functional ([MX] Thm. 4.1, Prop. A.1, Lemma 4.4), via
    :func:`memclaim.privacy.caps.memorization_cap`. ``functional`` defaults to the one the
    relation caps directly (LOO for add/remove, RO for replace-one); RO under add/remove goes
    through the group curve f^(2). ``relation`` is any of privacy/'s names for the
    neighbouring relations (:func:`memclaim.privacy.tradeoff.normalize_neighbors`).

    >>> cap_from_epsilon(1.0).functional, cap_from_epsilon(1.0, relation="replace-one").functional
    ('LOO', 'RO')
    """
    rel = normalize_neighbors(relation)
    fn = functional or ("LOO" if rel == "add-remove" else "RO")
    cap = memorization_cap(pure(epsilon, neighbors=rel), functional=fn, copies=copies)
    if cap.value is None:
        raise DomainError(f"pure epsilon-DP under {relation} implies no cap on {fn}: {cap.reason}")
    return CapSpec(
        value=float(cap.value),
        functional=fn,
        relation=neighbors_label(rel),
        via_group_privacy=(fn == "RO" and rel == "add-remove"),
        source=f"pure eps = {float(epsilon):g}, {cap.theorem}, curve {cap.curve}",
    )


@dataclass(frozen=True)
class ShadowCounterfactual(ResultMixin):
    """mem_h over the audited texts from the shadows (COND, random halves; [MX] App. A).

    ``estimate.se`` is the paired standard error over the N/2 independent pairs (each pair has
    one IN and one OUT model for every text); ``welch_se`` the unpaired Welch one, for reference.
    ``cap`` is the comparison with a user cap (None if no cap or ``cap_refused`` says why).
    """

    score: str
    functional: str
    design: str
    estimate: CounterfactualEstimate
    welch_se: np.ndarray
    se_method: str
    by_set: dict
    cap: CapComparison | None
    cap_spec: CapSpec | None
    cap_refused: str | None


SCORES = {
    "teacher-forcing": "teacher-forcing probability q(suffix | prefix) = exp(sum log p) ([MX] Thm. 4.1)",
    "logloss": "mean token log-loss truncated at M and divided by M ([MX] §8.1, M = 10)",
}


def counterfactual_from_shadows(
    shadow_token_logprobs: Sequence[Sequence[np.ndarray]],
    in_mask: np.ndarray,
    *,
    score: str = "teacher-forcing",
    level: float = 10.0,
    groups: dict | None = None,
    confidence: float = 0.95,
    cap: CapSpec | None = None,
) -> ShadowCounterfactual:
    """mem_h(x) = E[h | x in] - E[h | x out] for each audited text from its scores under N
    shadows (``shadow_token_logprobs[s][j]``: per-token log-probs of text j under shadow s) and
    ``in_mask`` [N, n] from complementary pairs (rows 2j, 2j+1 complementary). Named COND
    (random halves). ``groups`` maps a name to the column indices to summarize (e.g. members,
    non-members). With ``cap``, compared by :func:`compare_to_cap`; a comparison the rules refuse
    (e.g. a COND estimate against an RO cap without the Prop. A.2 slack) is reported as refused.

    >>> mask = shadow_masks(2, 4)  # 4 shadows, 2 texts; a text scores higher where it was trained on
    >>> lp = [[np.array([-0.1, -0.2]) if mask[s, j] else np.array([-2.0, -1.0]) for j in range(2)] for s in range(4)]
    >>> c = counterfactual_from_shadows(lp, mask)
    >>> c.functional, c.estimate.mem.round(4).tolist()  # e^-0.3 - e^-3
    ('COND', [0.691, 0.691])
    """
    conf = in_open_unit("confidence", confidence)
    mask = np.asarray(in_mask, dtype=bool)
    S = len(shadow_token_logprobs)
    if mask.ndim != 2 or mask.shape[0] != S:
        raise InputError(f"in_mask must be [n_shadows={S}, n_texts], got {mask.shape}")
    if S % 2 or not np.all(mask[0::2] ^ mask[1::2]):
        raise InputError(
            "shadows must come in complementary pairs (rows 2j and 2j+1 complementary)",
            hint="build the masks with shadow_masks",
        )
    if score == "teacher-forcing":
        h = np.stack([teacher_forcing_probability(lp) for lp in shadow_token_logprobs])  # [S, n]
    elif score == "logloss":
        h = np.stack(
            [truncated_logloss(lp, level=level, reduce="mean") for lp in shadow_token_logprobs]
        )
    else:
        raise DomainError(f"unknown score {score!r}", hint=f"one of {sorted(SCORES)}")
    name = (
        SCORES[score]
        if score == "teacher-forcing"
        else f"mean token log-loss truncated at M = {level:g}, / M"
    )
    est = counterfactual_memorization(h, mask, design="random_halves", score=name, confidence=conf)
    # paired SE: per pair j, d_j = h(IN model of the pair) - h(OUT model); pairs are independent
    a, b = h[0::2], h[1::2]  # [P, n]
    d = np.where(mask[0::2], a - b, b - a)  # [P, n]
    P = d.shape[0]
    se = d.std(axis=0, ddof=1) / math.sqrt(P) if P >= 2 else np.full(d.shape[1], math.nan)
    T = est.mem.size
    within = float(math.sqrt(float(np.sum(se**2))) / T)
    from scipy import stats

    z = float(stats.norm.ppf(0.5 + conf / 2.0))
    quoted = est.mean_se if T >= 2 else float(se[0])
    paired = replace(
        est,
        se=se,
        mean_se_within=within,
        low=est.mean_mem - z * quoted,
        high=est.mean_mem + z * quoted,
    )
    by_set = {}
    for gname, cols in (groups or {}).items():
        cols = np.asarray(cols, dtype=np.int64)
        if cols.size == 0:
            continue
        m = est.mem[cols]
        by_set[gname] = {
            "n": int(cols.size),
            "mean_mem": float(m.mean()),
            "se_across": float(m.std(ddof=1) / math.sqrt(m.size)) if m.size >= 2 else math.nan,
            "max_mem": float(m.max()),
            "min_mem": float(m.min()),
        }
    comp, refused = None, None
    if cap is not None:
        try:
            comp = compare_to_cap(
                paired,
                cap=cap.value,
                cap_functional=cap.functional,
                cap_relation=cap.relation,
                via_group_privacy=cap.via_group_privacy,
                conversion_slack=cap.conversion_slack,
                conversion_note=cap.conversion_note,
            )
        except (ProcedureMismatchError, DomainError) as exc:
            refused = str(exc)
    return ShadowCounterfactual(
        score=name,
        functional=est.functional,
        design=est.design,
        estimate=paired,
        welch_se=est.se,
        se_method=f"paired over {P} independent complementary pairs",
        by_set=by_set,
        cap=comp,
        cap_spec=cap,
        cap_refused=refused,
    )
