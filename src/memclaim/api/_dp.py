"""``memclaim.dp_bounds``: what a differential-privacy guarantee does and does not say about
memorization and extraction ([MX] §3-5, App. F.2).

The guarantee is pure epsilon-DP, (epsilon, delta)-DP, mu-Gaussian DP, a trade-off curve, or a
DP-SGD run (noise multiplier sigma, Poisson sampling rate q, steps T): then every row comes from
the certified trade-off curve of the composed subsampled Gaussian (its privacy-loss
distribution, pessimistic) and names its grid, and the (epsilon, delta) route follows, marked as
the looser one. With ``copies`` = k the memorization caps and every extraction quantity use the
k-fold group curve ([MX] Cor. 4.3; sufficient conditions only). Every number names its
neighbouring relation and, for caps, its counterfactual functional.
"""

from __future__ import annotations

import functools
import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Unpack

from ..errors import DomainError, InputError
from ..fsutil import available_memory
from ..models.loader import LoadedModel
from ..privacy.baseline import BaselineResult, certify_baseline
from ..privacy.baseline_corpus import CorpusBaseline, corpus_baseline
from ..privacy.extraction import AuditSoundness, audit_soundness
from ..privacy.pld import (
    MAX_PLD_POINTS,
    PLD_BYTES_PER_POINT,
    PldTooLarge,
    check_dpsgd_size,
    curve_caps,
    dpsgd_curve,
)
from ..privacy.summary import BoundsSummary
from ..privacy.summary import dp_bounds as _dp_bounds
from ..privacy.tradeoff import TradeOff, approx, check_group_cost, dpsgd_epsilon, gdp, pure
from ..progress import ProgressCallback
from ..report.core import write_report
from ..report.dp import dp_bounds_report
from ..report.privacy import plot_all
from ..text.io import split_lines
from ._common import Result, check_out_dir, jsonable
from ._model import is_loaded_model, load_model
from ._public import public
from ._shortcuts import DPBoundsOptions, take_options

__all__ = [
    "dp_bounds",
    "DPBounds",
    "parse_baseline",
    "guarantee_curve",
    "dp_account",
    "DPAccount",
    "dp_baseline",
    "dp_plots",
]


def parse_baseline(value) -> tuple[float, float] | None:
    """The canary's prior baseline kappa_pi(m): a number, a certified interval (lo, hi), or the
    CLI's text ('0.01' -> (0.01, 0.01); '0.008,0.012' -> (0.008, 0.012))."""
    if value is None:
        return None
    if isinstance(value, (tuple, list)):
        vals = list(value)
        text = repr(value)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        vals, text = [value], repr(value)
    else:
        text = value
        parts = [p.strip() for p in str(value).replace(":", ",").split(",") if p.strip()]
        try:
            vals = [float(p) for p in parts]
        except ValueError:
            raise DomainError(
                f"--baseline must be a number or 'LO,HI', got {text!r}",
                hint="e.g. --baseline 0.001 or --baseline 0.0009,0.0011",
            ) from None
    try:
        vals = [float(v) for v in vals]
    except (TypeError, ValueError):
        raise DomainError(
            f"--baseline must be a number or 'LO,HI', got {text!r}",
            hint="e.g. --baseline 0.001 or --baseline 0.0009,0.0011",
        ) from None
    if len(vals) == 1:
        vals = vals * 2
    if len(vals) != 2:
        raise DomainError(
            f"--baseline must be a number or 'LO,HI', got {text!r}",
            hint="e.g. --baseline 0.001 or --baseline 0.0009,0.0011",
        )
    for v in vals:
        if not (math.isfinite(v) and 0.0 <= v <= 1.0):
            raise DomainError(
                f"baseline kappa must lie in [0, 1], got {v!r}",
                hint="kappa is the prior's top-m probability mass",
            )
    if vals[0] > vals[1]:
        raise DomainError(
            f"--baseline interval is reversed: {vals[0]!r} > {vals[1]!r}",
            hint=f"write the interval as LO,HI: --baseline {vals[1]!r},{vals[0]!r}",
        )
    return vals[0], vals[1]


def guarantee_curve(*, epsilon=None, delta=None, mu=None, neighbors) -> TradeOff:
    """The trade-off curve of pure epsilon-DP, (epsilon, delta)-DP or mu-GDP for ``neighbors``."""
    if mu is not None:
        if delta is not None:
            raise DomainError(
                "give either --delta (approximate DP) or --mu (Gaussian DP), not both",
                hint="drop one of them",
            )
        return gdp(mu, neighbors=neighbors)
    if epsilon is None:
        raise DomainError(
            "no guarantee given", hint="pass --epsilon E [--delta D], or --mu M for Gaussian DP"
        )
    if delta is not None:
        return approx(epsilon, delta, neighbors=neighbors)
    return pure(epsilon, neighbors=neighbors)


@dataclass(frozen=True, repr=False)
class DPBounds(Result):
    """Every cap and extraction quantity of one guarantee (``summary``:
    :class:`~memclaim.privacy.summary.BoundsSummary`, one labelled row per quantity), the
    certified baseline interval when one was given, and the canary audit's soundness check
    (``audit``). ``to_dict()`` is what ``memclaim dp bounds --json`` prints; ``to_pandas()`` the
    rows; ``save(folder)`` writes report.{json,md,html}."""

    summary: BoundsSummary
    baseline_interval: tuple[float, float] | None = None
    audit: AuditSoundness | None = None
    guarantee_note: str | None = (
        None  # how options beside the guarantee were read (--epsilon with --mu)
    )

    @property
    def rows(self):
        return self.summary.rows

    def value(self, name: str):
        """The value of the row named ``name`` (e.g. 'eta(f)')."""
        return self.summary.value(name)

    def to_dict(self) -> dict:
        out = self.summary.to_dict()
        kap = self.baseline_interval
        if kap is not None and kap[0] != kap[1]:
            out["baseline_interval"] = list(kap)
        if self.audit is not None:
            out["audit"] = self.audit.to_dict()
        if self.guarantee_note is not None:
            out["guarantee_note"] = self.guarantee_note
        return jsonable(out)

    def to_pandas(self):
        """One row per quantity: name, value, relation, functional, reference, note, exact,
        copies, source."""
        import pandas as pd

        return pd.DataFrame([r.to_dict() for r in self.summary.rows])

    def save(self, folder) -> dict:
        """Write report.{json,md,html} into ``folder`` (all or nothing); returns the paths."""
        return write_report(folder, dp_bounds_report(self.to_dict()))

    def __repr__(self) -> str:
        return f"DPBounds({self.summary.guarantee!r}, {len(self.summary.rows)} rows)"


def _max_points() -> int:
    """The most PLD points one direction may hold here: :data:`MAX_PLD_POINTS` (about a minute),
    or fewer when this machine's available memory holds fewer."""
    return max(1, min(MAX_PLD_POINTS, available_memory() // PLD_BYTES_PER_POINT))


def _pld_options(exc: PldTooLarge, *, grid_option: bool) -> PldTooLarge:
    """``exc`` with a fix that names only options the command has (``dp plot`` has no --pld-grid)."""
    if exc.grid_needed is not None and grid_option:
        hint = (
            f"--pld-grid {exc.grid_needed:g} (a coarser grid is pessimistic: the bounds stay valid, only "
            "looser), or fewer --steps"
        )
    elif exc.grid_needed is not None:
        hint = "fewer --steps or a larger --noise-multiplier (the figure's PLD grid is 1e-4)"
    else:
        hint = (
            "a realistic --noise-multiplier (DP-SGD uses about 0.5 to 10): at this noise the run is not private "
            "at all"
        )
    msg = str(exc)[: -len(f"\n  fix: {exc.hint}")] if exc.hint else str(exc)
    return PldTooLarge(
        msg,
        hint=hint,
        points=exc.points,
        grid=exc.grid,
        limit=exc.limit,
        grid_needed=exc.grid_needed,
    )


def _memory_guard(command: str, fix: str):
    """Decorator: a MemoryError the cost estimates did not foresee is a DomainError naming the
    command and the options that ask for less (issue 25: the API raised a bare MemoryError)."""

    def wrap(fn):
        @functools.wraps(fn)
        def inner(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except MemoryError:
                raise DomainError(
                    f"memclaim {command} ran out of memory ({available_memory() / 2**30:.3g} GiB "
                    "available here)",
                    hint=fix,
                ) from None

        return inner

    return wrap


def _audit_complete(successes, trials, kappa, list_size) -> None:
    if successes is None or trials is None or kappa is None or list_size is None:
        raise DomainError(
            "the audit check needs --successes, --trials, --baseline and --list-size together",
            hint="pass all four, or none",
        )


# the defaults of dp_bounds()'s shortcuts that are not the procedure's and runtime's own
# (memclaim.api._shortcuts.FLAT_DEFAULTS); each is the default its keyword had
_DP_BOUNDS_DEFAULTS: dict = {
    "curve": None,
    "noise_multiplier": None,
    "sampling_rate": None,
    "steps": None,
    "pld_grid": None,
    "copies": 1,
    "list_size": None,
    "risk": None,
    "baseline": None,
    "truncation": None,
    "in_support_mass": None,
    "dataset_size": None,
    "frequency": None,
    "successes": None,
    "trials": None,
}


@public
@_memory_guard("dp bounds", "a coarser --pld-grid, fewer --steps or fewer --copies")
def dp_bounds(
    *,
    neighbors: str,
    epsilon: float | None = None,
    delta: float | None = None,
    mu: float | None = None,
    confidence: float = 0.95,
    independence: str = "separate-runs",
    **options: Unpack[DPBoundsOptions],
) -> DPBounds:
    """Every memorization cap and extraction-boundary quantity for one guarantee (``memclaim dp
    bounds``).

    The guarantee: ``epsilon`` [``delta``], ``mu`` (Gaussian DP; ``epsilon`` then also shows the
    GDP curve's epsilon), a :class:`~memclaim.privacy.tradeoff.TradeOff` ``curve``, or DP-SGD
    settings ``noise_multiplier``, ``sampling_rate``, ``steps`` (``delta``: the delta of the
    (epsilon, delta) route shown beside the curve, default 1e-5; ``pld_grid``: the PLD's value
    discretization). ``neighbors``: 'replace' or 'add-remove', the relation the guarantee was
    proved for. ``copies``: k copies of the target. ``list_size`` m, ``risk`` tau and
    ``baseline`` kappa_pi(m) (a number or a certified interval (lo, hi)) for the extraction
    boundary; ``truncation`` M, ``in_support_mass`` omega, ``dataset_size`` n, ``frequency`` p for
    the conversions. ``successes``/``trials`` with ``baseline`` and ``list_size``: the canary
    audit's soundness check ([MX] Cor. 5.3).

    >>> import memclaim as mc
    >>> b = mc.dp_bounds(epsilon=1, neighbors="replace", copies=2)
    >>> round(b.value("eta(f)"), 4)
    0.4621
    """
    o = take_options(dp_bounds, DPBoundsOptions, options, values=(), defaults=_DP_BOUNDS_DEFAULTS)
    (
        curve,
        noise_multiplier,
        sampling_rate,
        steps,
        pld_grid,
        copies,
        list_size,
        risk,
        baseline,
        truncation,
        in_support_mass,
        dataset_size,
        frequency,
        successes,
        trials,
    ) = o.get(
        "curve",
        "noise_multiplier",
        "sampling_rate",
        "steps",
        "pld_grid",
        "copies",
        "list_size",
        "risk",
        "baseline",
        "truncation",
        "in_support_mass",
        "dataset_size",
        "frequency",
        "successes",
        "trials",
    )
    kap = parse_baseline(baseline)
    note = None
    kw = dict(
        copies=copies,
        m=list_size,
        tau=risk,
        kappa=None if kap is None else kap[1],
        truncation=truncation,
        omega=in_support_mass,
        n=dataset_size,
        frequency=frequency,
    )
    dpsgd = [v is not None for v in (noise_multiplier, sampling_rate, steps)]
    audit_asked = successes is not None or trials is not None
    if any(dpsgd):
        if not all(dpsgd):
            missing = [
                o
                for o, v in zip(("--noise-multiplier", "--sampling-rate", "--steps"), dpsgd)
                if not v
            ]
            raise DomainError(
                f"DP-SGD settings are incomplete: missing {', '.join(missing)}",
                hint="give --noise-multiplier, --sampling-rate and --steps together",
            )
        if epsilon is not None or mu is not None or curve is not None:
            raise DomainError(
                "give either DP-SGD settings or --epsilon/--mu, not both",
                hint="with DP-SGD settings epsilon comes from the accountant; --delta sets the "
                "delta of the (epsilon, delta) route",
            )
        # the cost of the k copies and of the PLD, estimated before either is computed (issue 25)
        check_group_cost("points", copies)
        try:
            summary = _dp_bounds(
                noise_multiplier=noise_multiplier,
                sampling_rate=sampling_rate,
                steps=steps,
                neighbors=neighbors,
                delta=delta,
                pld_grid=pld_grid,
                max_points=_max_points(),
                **kw,
            )
        except PldTooLarge as exc:
            raise _pld_options(exc, grid_option=True) from None
        f = None
        if audit_asked:  # the audit reads the same certified curve
            _audit_complete(successes, trials, kap, list_size)
            f = dpsgd_curve(
                noise_multiplier=noise_multiplier,
                sampling_rate=sampling_rate,
                steps=steps,
                neighbors=neighbors,
                route_delta=1e-5 if delta is None else delta,
                value_discretization_interval=pld_grid,
                max_points=_max_points(),
            ).curve
    else:
        if pld_grid is not None:
            raise DomainError(
                "--pld-grid applies to DP-SGD settings only",
                hint="add --noise-multiplier, --sampling-rate and --steps, or drop --pld-grid",
            )
        if curve is not None:
            if epsilon is not None or delta is not None or mu is not None:
                raise DomainError(
                    "give either a trade-off curve or --epsilon/--delta/--mu, not both",
                    hint="drop curve, or the epsilon/delta/mu",
                )
            f = curve
        else:
            f = guarantee_curve(epsilon=epsilon, delta=delta, mu=mu, neighbors=neighbors)
        summary = _dp_bounds(f, gdp_epsilon=epsilon if mu is not None else None, **kw)
        if mu is not None and epsilon is not None:
            # --epsilon beside --mu is no second guarantee: say so beside the guarantee (issue 25:
            # it read as silently dropped)
            note = (
                f"--epsilon {epsilon:g} is not a second guarantee: every cap comes from G_mu alone, and "
                f"--epsilon adds the row delta(eps = {epsilon:g}) of G_mu"
            )
    audit = None
    if audit_asked:
        _audit_complete(successes, trials, kap, list_size)
        audit = audit_soundness(
            f,
            successes=successes,
            trials=trials,
            m=list_size,
            kappa_interval=kap,
            confidence=confidence,
            independence=independence,
            copies=copies,
        )
    return DPBounds(summary=summary, baseline_interval=kap, audit=audit, guarantee_note=note)


# ------------------------------------------------------------------ DP-SGD accounting
@dataclass(frozen=True, repr=False)
class DPAccount(Result):
    """epsilon of a DP-SGD run (``accounting``: dp_accounting's PLD or RDP accountant), the run's
    trade-off curve (``curve``, from its privacy-loss distribution) and what the curve caps
    (``caps``: the advantage eta(f), the LOO and RO memorization caps for each copy count, beside
    the looser (epsilon, delta) route). ``to_dict()`` is what ``memclaim dp account --json``
    prints."""

    accounting: object
    curve: object
    caps: dict

    @property
    def epsilon(self) -> float:
        return self.accounting.epsilon

    def to_dict(self) -> dict:
        out = self.accounting.to_dict()
        out["from_curve"] = self.caps
        out["curve"] = self.curve.to_dict()
        return out

    def to_pandas(self):
        """One row per copy count: copies and the LOO and RO caps from the curve."""
        import pandas as pd

        return pd.DataFrame(jsonable(self.caps["caps"]))

    def save(self, folder) -> dict:
        raise InputError("dp account writes no report", hint="use to_dict() / --json")

    def __repr__(self) -> str:
        return f"DPAccount(epsilon={self.epsilon:.6g}, delta={self.accounting.delta:g}, {self.caps['neighbors']})"


@public
@_memory_guard("dp account", "a coarser --pld-grid, --accountant rdp, or fewer --copies")
def dp_account(
    *,
    noise_multiplier: float,
    sampling_rate: float,
    steps: int,
    delta: float,
    accountant: str = "pld",
    neighbors: str = "add-remove",
    copies: int = 1,
    pld_grid: float | None = None,
) -> DPAccount:
    """epsilon of DP-SGD (Poisson-subsampled Gaussian) at ``delta`` via dp_accounting's PLD or RDP
    ``accountant``, and the caps of the run's trade-off curve for 1 and ``copies`` copies ([MX]
    §3-4, Cor. 4.3) (``memclaim dp account``). ``pld_grid``: the PLD's value discretization
    (default 1e-4).

    >>> import memclaim as mc
    >>> a = mc.dp_account(noise_multiplier=1.1, sampling_rate=0.01, steps=100, delta=1e-5)
    >>> a.epsilon < 1, a.caps["neighbors"]
    (True, 'add/remove')
    """
    check_group_cost("points", copies)  # the costs are estimated before any PLD is built (issue 25)
    try:
        check_dpsgd_size(
            noise_multiplier=noise_multiplier,
            sampling_rate=sampling_rate,
            steps=steps,
            neighbors=neighbors,
            grid=pld_grid,
            max_points=_max_points(),
        )
        res = dpsgd_epsilon(
            noise_multiplier=noise_multiplier,
            sampling_rate=sampling_rate,
            steps=steps,
            delta=delta,
            accountant=accountant,
            neighbors=neighbors,
            **({} if pld_grid is None else {"pld_discretization": pld_grid}),
        )
        cur = dpsgd_curve(
            noise_multiplier=noise_multiplier,
            sampling_rate=sampling_rate,
            steps=steps,
            neighbors=neighbors,
            route_delta=delta,
            value_discretization_interval=pld_grid,
            max_points=_max_points(),
        )
    except PldTooLarge as exc:
        raise _pld_options(exc, grid_option=True) from None
    caps = curve_caps(cur, copies=sorted({1, copies}), epsilon=res.epsilon, delta=res.delta)
    return DPAccount(accounting=res, curve=cur, caps=caps)


# ------------------------------------------------------------------ certified baselines
@public
def dp_baseline(
    model: str | os.PathLike | LoadedModel,
    prefix: str,
    *,
    secret_length: int,
    list_size: int,
    temperature: float = 1.0,
    max_nodes: int = 100_000,
    time_limit: float | None = None,
    batch_size: int = 64,
    trust_remote_code: bool = False,
    dtype: str | None = None,
    device: str | None = None,
    device_map: str | None = None,
    max_memory: Mapping | Sequence[str] | str | None = None,
    offload_folder: str | os.PathLike | None = None,
    progress: bool | ProgressCallback = True,
) -> BaselineResult:
    """Certify kappa_pi(m), the top-``list_size`` prior mass of length-``secret_length``
    continuations of ``prefix`` under ``model`` at ``temperature`` ([MX] App. F.2) (``memclaim dp
    baseline``). ``model`` must be the PRIOR (the base before any canary was planted). The
    result's interval [kappa_lo, kappa_hi] is valid whenever the search stops (``max_nodes``
    vocabulary rows, ``time_limit`` seconds) and closes to a point when it finishes.

    >>> import memclaim as mc
    >>> b = mc.dp_baseline("toy", "the", secret_length=2, list_size=1, max_nodes=50)   # doctest: +SKIP
    >>> b.kappa_lo <= b.kappa_hi                                                        # doctest: +SKIP
    True
    """
    placed = {
        "device": device,
        "device_map": device_map,
        "max_memory": max_memory,
        "offload_folder": offload_folder,
    }
    # a loaded model, or anything with its scoring interface (.lm, .tokenizer, .sot_ids)
    has_interface = hasattr(model, "lm") and hasattr(model, "tokenizer")
    if is_loaded_model(model) or has_interface:
        m = (
            load_model(model, dtype=dtype, **placed) if is_loaded_model(model) else model
        )  # refuses re-placing
    else:  # float32 unless told: the certified interval is about the model's probabilities
        m = load_model(
            model, trust_remote_code=trust_remote_code, dtype=dtype or "float32", **placed
        )
    ids = list(getattr(m, "sot_ids", []) or []) + list(m.tokenizer.encode(prefix))
    return certify_baseline(
        m.lm,
        ids,
        secret_length=secret_length,
        m=list_size,
        temperature=temperature,
        max_nodes=max_nodes,
        time_limit=time_limit,
        batch_size=batch_size,
        progress=progress,
    )


def read_kappa_samples(path: str | os.PathLike, m: int) -> tuple[list[float], list[float]]:
    """Per-draw brackets ``(kappa_lo, kappa_hi)`` from a JSONL file: each line ``{"kappa": x}`` or
    ``{"kappa_lo": a, "kappa_hi": b}`` (an optional ``"m"`` must equal the list size ``m``; e.g. the
    ``--json`` output of ``memclaim dp baseline`` run on each draw's prior). Bad lines raise with
    their line number."""
    p = Path(path)
    if not p.is_file():
        raise InputError(
            f"--corpus-samples file {str(path)!r} does not exist", hint="check the path"
        )
    lo, hi = [], []
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"--corpus-samples file {str(path)!r} is not valid UTF-8 (byte {exc.start}: "
            f"{exc.object[exc.start : exc.start + 1]!r})",
            hint="write the JSONL file as UTF-8",
        ) from None
    for i, line in enumerate(split_lines(text), 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
        except ValueError:
            raise InputError(
                f"{str(path)!r} line {i} is not JSON: {line[:60]!r}",
                hint='one object per line, e.g. {"kappa": 0.01}',
            ) from None
        if not isinstance(d, dict) or not (
            {"kappa"} <= d.keys() or {"kappa_lo", "kappa_hi"} <= d.keys()
        ):
            raise InputError(
                f"{str(path)!r} line {i} has neither 'kappa' nor 'kappa_lo' and 'kappa_hi': {line[:60]!r}",
                hint='e.g. {"kappa": 0.01} or {"kappa_lo": 0.009, "kappa_hi": 0.011}',
            )
        if "m" in d and d["m"] != m:
            raise DomainError(
                f"{str(path)!r} line {i} was computed for list size m = {d['m']!r}, not --list-size {m}",
                hint="kappa-bar needs every draw's top-m mass for the protocol's list size",
            )
        a, b = (d["kappa"], d["kappa"]) if "kappa" in d else (d["kappa_lo"], d["kappa_hi"])
        for v in (a, b):
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise DomainError(
                    f"{str(path)!r} line {i}: kappa values must be numbers, got {v!r}",
                    hint='e.g. {"kappa": 0.01}',
                )
            if not 0.0 <= v <= 1.0:  # NaN fails too
                raise DomainError(
                    f"{str(path)!r} line {i}: kappa = {v!r} is not in [0, 1]",
                    hint="each value is a top-m prior mass, a probability",
                )
        if a > b:
            raise DomainError(
                f"{str(path)!r} line {i}: the bracket is reversed (kappa_lo = {a!r} > kappa_hi = {b!r})",
                hint="each draw needs kappa_lo <= kappa(S^-) <= kappa_hi",
            )
        lo.append(float(a))
        hi.append(float(b))
    if not lo:
        raise InputError(
            f"--corpus-samples file {str(path)!r} holds no draws (no non-empty line)",
            hint='one line per draw of the corpus remainder, e.g. {"kappa": 0.01}',
        )
    return lo, hi


@public
def dp_corpus_baseline(
    samples: str | os.PathLike | Sequence[float] | Sequence[tuple[float, float]],
    *,
    list_size: int,
    confidence: float = 0.95,
    method: str = "betting",
) -> CorpusBaseline:
    """The corpus-conditional baseline kappa-bar of [MX] Prop. C.2(b) with a certified interval
    (``memclaim dp baseline --corpus-samples FILE``). ``samples``: a JSONL path (see
    :func:`read_kappa_samples`), a sequence of per-draw values, or of ``(kappa_lo, kappa_hi)``
    brackets, one per independent draw of the corpus remainder S^-. The assumptions are in the
    result (``assumptions``) and in docs/baselines.md.

    >>> import memclaim as mc
    >>> r = mc.dp_corpus_baseline([0.01, 0.02, 0.015, 0.012], list_size=1)
    >>> r.mean_lo <= r.upper <= 1.0
    True
    """
    if isinstance(samples, (str, os.PathLike)):
        lo, hi = read_kappa_samples(samples, list_size)
        return corpus_baseline(
            kappa_lo=lo, kappa_hi=hi, m=list_size, confidence=confidence, method=method
        )
    rows = list(samples)
    if rows and all(isinstance(r, (tuple, list)) and len(r) == 2 for r in rows):
        return corpus_baseline(
            kappa_lo=[r[0] for r in rows],
            kappa_hi=[r[1] for r in rows],
            m=list_size,
            confidence=confidence,
            method=method,
        )
    return corpus_baseline(kappa=rows, m=list_size, confidence=confidence, method=method)


# ------------------------------------------------------------------ figures
@public
@_memory_guard("dp plot", "fewer --steps, --copies or --max-copies")
def dp_plots(
    out: str | os.PathLike,
    *,
    neighbors: str,
    epsilon: float = 1.0,
    delta: float = 0.1,
    mu: float = 1.0,
    copies: int = 4,
    max_copies: int = 8,
    risk: float = 0.1,
    list_size: int = 1,
    boundary_epsilons: Sequence[float] = (1.0, 3.0),
    noise_multiplier: float | None = None,
    sampling_rate: float | None = None,
    steps: int | None = None,
    dpsgd_delta: float = 1e-5,
) -> list[Path]:
    """Draw [MX] Fig. 2 (advantage curves), Fig. 3 (staircase) and Fig. 4 (boundary vs baseline)
    into ``out``; with DP-SGD settings (all three of ``noise_multiplier``, ``sampling_rate``,
    ``steps``) also the run's trade-off curve against its (epsilon, ``dpsgd_delta``) envelope
    (``memclaim dp plot``). Returns the PNG paths.

    >>> import memclaim as mc
    >>> [p.name for p in mc.dp_plots("figs", neighbors="add-remove")]              # doctest: +SKIP
    ['fig2_advantage.png', 'fig3_staircase.png', 'fig4_boundary.png']
    """
    cur = None
    given = [v is not None for v in (noise_multiplier, sampling_rate, steps)]
    # Fig. 3 computes the staircase eta*_j for j = 1..max_copies (each ~j) and the orbit of
    # --copies; Fig. 4 the --copies-fold group curve: estimated before anything is drawn
    f_pure = pure(epsilon, neighbors=neighbors)
    check_group_cost(f_pure, copies, option="--copies")
    check_group_cost(f_pure, max_copies, option="--max-copies", work=lambda j: j * (j + 1) / 2)
    if any(given):
        if not all(given):
            missing = [
                o
                for o, v in zip(("--noise-multiplier", "--sampling-rate", "--steps"), given)
                if not v
            ]
            raise DomainError(
                f"DP-SGD settings are incomplete: missing {', '.join(missing)}",
                hint="give --noise-multiplier, --sampling-rate and --steps together",
            )
        try:
            cur = dpsgd_curve(
                noise_multiplier=noise_multiplier,
                sampling_rate=sampling_rate,
                steps=steps,
                neighbors=neighbors,
                route_delta=dpsgd_delta,
                max_points=_max_points(),
            )
        except PldTooLarge as exc:
            raise _pld_options(exc, grid_option=False) from None
    check_out_dir(out)
    return plot_all(
        out,
        epsilon=epsilon,
        delta=delta,
        mu=mu,
        copies=copies,
        max_copies=max_copies,
        tau=risk,
        m=list_size,
        boundary_epsilons=tuple(boundary_epsilons),
        neighbors=neighbors,
        dpsgd=cur,
    )
