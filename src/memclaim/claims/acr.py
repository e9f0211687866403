"""The matched comparison for the adversarial compression ratio ([EM] §3 "Revisiting parrot
prompts", App. A.2): the ACR procedure run on members and on matched non-member controls.

Each target is one success/failure trial (extracted: the criterion held with a prompt shorter
than the target, ACR > 1), so each side's extraction rate is a binomial proportion with a
Clopper-Pearson interval and the difference of the two rates gets Newcombe's interval ([EM]
App. A.1, D.1). The comparison is the population test on this binary score
(:func:`memclaim.claims.population.population_claim` with ``binary=True``): the same report
form, with the certified floor alpha_N = (m+1)/(N+1) of [EM] D.3. The ACR distribution is read
the same way: for each ACR level a, the share of targets with ACR >= a on each side (a rate with
its interval) and their difference. Equal rates mean the procedure carries no signal about
memorization: a success is then explained as well by the procedure as by the target having been
seen ([EM] §3).

Pure: numpy and scipy through memclaim.claims; no torch, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ..errors import InputError
from ..jsonutil import ResultMixin
from .intervals import Interval, clopper_pearson, newcombe_independent
from .population import PopulationClaim, population_claim

HELD, NOT_HELD, NOT_TESTABLE = "held", "not held", "not testable here"
#: [EM] App. A.2 / §1: the sentence the ACR reproduction checks, as the paper states it
PAPER_SENTENCE = "the procedure succeeds on members and on non-members"


@dataclass(frozen=True)
class ACRLevel(ResultMixin):
    """Share of targets with ACR >= ``level`` (``level`` 1 means ACR > 1: extracted) per side."""

    level: float
    member: Interval
    control: Interval
    member_count: int
    control_count: int
    difference: Interval  # member - control, Newcombe (1998b) method 10


@dataclass(frozen=True)
class ACRSide(ResultMixin):
    """One side's ACR values (None where no prompt met the criterion) and summaries."""

    n: int
    extracted: int
    met: int  # the criterion held at some length (ACR may be <= 1 when prompts as long as the target are tried)
    acr: tuple[float | None, ...]
    median_acr_extracted: float | None
    max_acr: float | None


@dataclass(frozen=True)
class ACRComparison(ResultMixin):
    """Members against matched controls under one ACR procedure (see the module docstring)."""

    criterion: str
    population: PopulationClaim
    members: ACRSide
    controls: ACRSide
    levels: tuple[ACRLevel, ...]
    member_rate: Interval
    control_rate: Interval
    difference: Interval
    no_signal: bool  # the difference's interval contains 0
    statement: str
    flags: dict  # {"members": {"argmax_without_greedy": k, "leaks": k}, "controls": {...}}

    def to_dict(self) -> dict:
        d = super().to_dict()
        d["population"] = self.population.to_dict()
        return d


def _side(acr: Sequence[float | None], extracted: Sequence[bool], met: Sequence[bool]) -> ACRSide:
    ex = [float(a) for a, e in zip(acr, extracted) if e and a is not None]
    vals = [a for a in acr if a is not None]
    return ACRSide(
        len(extracted),
        int(sum(bool(e) for e in extracted)),
        int(sum(bool(m) for m in met)),
        tuple(None if a is None else float(a) for a in acr),
        float(np.median(ex)) if ex else None,
        max(vals) if vals else None,
    )


def _flags(values: Sequence[bool] | None, n: int, what: str) -> list[bool]:
    if values is None:
        return [False] * n
    v = [bool(x) for x in values]
    if len(v) != n:
        raise InputError(f"{what}: {len(v)} flags for {n} targets", hint="pass one flag per target")
    return v


def acr_comparison(
    *,
    member_extracted: Sequence[bool],
    control_extracted: Sequence[bool],
    member_acr: Sequence[float | None],
    control_acr: Sequence[float | None],
    criterion: str,
    member_met: Sequence[bool] | None = None,
    control_met: Sequence[bool] | None = None,
    member_ids: Sequence[str] | None = None,
    control_ids: Sequence[str] | None = None,
    member_argmax_without_greedy: Sequence[bool] | None = None,
    control_argmax_without_greedy: Sequence[bool] | None = None,
    member_leaks: Sequence[bool] | None = None,
    control_leaks: Sequence[bool] | None = None,
    alpha: str | float | Fraction = "0.05",
    confidence: float = 0.95,
) -> ACRComparison:
    """The matched comparison of an ACR procedure's results ([EM] §3, App. A.2).

    ``*_extracted``: per target, the criterion held with a prompt shorter than the target; ``*_acr``:
    |y|/|x*| where the criterion held (None elsewhere); ``*_met``: the criterion held at some
    length (default: ``*_extracted``). The flags count the targets [EM] App. A.2 warns about.

    >>> c = acr_comparison(member_extracted=[True, True, False, False], control_extracted=[True, False, False, False],
    ...                    member_acr=[1.5, 1.2, None, None], control_acr=[1.1, None, None, None], criterion="prob:0.9")
    >>> c.member_rate.estimate, c.control_rate.estimate, c.no_signal
    (0.5, 0.25, True)
    >>> [(lv.level, lv.member_count, lv.control_count) for lv in c.levels]
    [(1.0, 2, 1), (1.1, 2, 1), (1.2, 2, 0), (1.5, 1, 0)]
    """
    me, ce = (
        _flags(member_extracted, len(member_extracted), "members"),
        _flags(control_extracted, len(control_extracted), "controls"),
    )
    J, N = len(me), len(ce)
    if J == 0 or N == 0:
        raise InputError(
            f"the matched comparison needs members and controls, got {J} and {N} targets",
            hint="give at least one member and one control target",
        )
    if len(member_acr) != J or len(control_acr) != N:
        raise InputError(
            "one ACR value (or None) per target is needed",
            hint="pass member_acr/control_acr in order",
        )
    for a, e, side in [(a, e, "member") for a, e in zip(member_acr, me)] + [
        (a, e, "control") for a, e in zip(control_acr, ce)
    ]:
        if e and (a is None or not a > 1):
            raise InputError(
                f"a {side} target is extracted but its ACR is {a!r}", hint="extracted means ACR > 1"
            )
    mm = _flags(member_met, J, "members") if member_met is not None else list(me)
    cm = _flags(control_met, N, "controls") if control_met is not None else list(ce)
    # the population test on the binary score ([EM] D.3): extracted = probability 1, else 0
    pop = population_claim(
        candidate_scores=np.where(me, 0.0, -np.inf),
        control_scores=np.where(ce, 0.0, -np.inf),
        alpha=alpha,
        kind="log-prob",
        binary=True,
        candidate_ids=member_ids,
        control_ids=control_ids,
        confidence=confidence,
        sweep=False,
    )
    b = pop.primary_test.binary_rates
    assert b is not None  # binary=True: the population test reports its binary rates
    levels = []
    # an extracted target's ACR is a number > 1 (checked above): `a is not None` only says so to mypy
    observed = sorted(
        {
            float(a)
            for a, e in zip(list(member_acr) + list(control_acr), me + ce)
            if e and a is not None
        }
    )
    for lv in [1.0] + [x for x in observed if x > 1.0]:
        # level 1: ACR > 1 (extraction); above it: ACR >= level
        mk = sum(
            1
            for a, e in zip(member_acr, me)
            if e and a is not None and (a > lv if lv == 1.0 else a >= lv)
        )
        ck = sum(
            1
            for a, e in zip(control_acr, ce)
            if e and a is not None and (a > lv if lv == 1.0 else a >= lv)
        )
        levels.append(
            ACRLevel(
                lv,
                clopper_pearson(mk, J, confidence=confidence),
                clopper_pearson(ck, N, confidence=confidence),
                mk,
                ck,
                newcombe_independent(mk, J, ck, N, confidence=confidence),
            )
        )
    d = b.difference
    no_signal = d.lower <= 0.0 <= d.upper
    pct = lambda x: f"{100 * x:.1f}%"  # noqa: E731
    rates = (
        f"Under {criterion}, {b.member_count} of {J} members ({pct(b.member_rate.estimate)}, "
        f"{100 * confidence:g}% CP [{pct(b.member_rate.lower)}, {pct(b.member_rate.upper)}]) and {b.m} of {N} "
        f"matched controls ({pct(b.control_rate.estimate)} [{pct(b.control_rate.lower)}, "
        f"{pct(b.control_rate.upper)}]) are extracted (ACR > 1); difference {100 * d.estimate:+.1f} points "
        f"[{100 * d.lower:+.1f}, {100 * d.upper:+.1f}] (Newcombe)."
    )
    if no_signal:
        meaning = (
            " The rates are statistically indistinguishable: equal rates mean the procedure carries no signal "
            "about memorization, so a success on a member is no evidence that the model memorized it "
            "([EM] §3, 'Revisiting parrot prompts')."
        )
    elif d.lower > 0:
        meaning = (
            " Members are extracted more often than matched controls; the difference, not the member rate, is "
            "what may reflect memorization, and the controls' rate is the share of successes any target gets "
            "from the procedure itself ([EM] §3): a success on one member is no memorization claim."
        )
    else:
        meaning = (
            " Controls are extracted more often than members: the procedure's successes say nothing about "
            "memorization here ([EM] §3)."
        )
    flags = {
        side: {
            "argmax_without_greedy": int(sum(_flags(ag, n, side))),
            "leaks": int(sum(_flags(lk, n, side))),
        }
        for side, ag, lk, n in (
            ("members", member_argmax_without_greedy, member_leaks, J),
            ("controls", control_argmax_without_greedy, control_leaks, N),
        )
    }
    return ACRComparison(
        criterion=str(criterion),
        population=pop,
        members=_side(member_acr, me, mm),
        controls=_side(control_acr, ce, cm),
        levels=tuple(levels),
        member_rate=b.member_rate,
        control_rate=b.control_rate,
        difference=d,
        no_signal=bool(no_signal),
        statement=rates + meaning,
        flags=flags,
    )


@dataclass(frozen=True)
class Verdict(ResultMixin):
    """The paper's sentence checked as stated: ``held``, ``not held`` or ``not testable here``."""

    sentence: str
    status: str
    reason: str


def succeeds_on_both(
    *,
    members_extracted: int,
    n_members: int,
    controls_extracted: int,
    n_controls: int,
    complete: bool = True,
) -> Verdict:
    """[EM] App. A.2 (and §1): "the procedure succeeds on members and on non-members", as stated:
    held when at least one member and at least one matched non-member are extracted; not held when
    a side has no success; not testable here when a side has no target or the searches did not all
    finish (a search cut short cannot show a failure).

    >>> succeeds_on_both(members_extracted=3, n_members=8, controls_extracted=1, n_controls=8).status
    'held'
    >>> succeeds_on_both(members_extracted=3, n_members=8, controls_extracted=0, n_controls=8).status
    'not held'
    >>> succeeds_on_both(members_extracted=0, n_members=0, controls_extracted=0, n_controls=8).status
    'not testable here'
    """
    for name, k, n in (
        ("members", members_extracted, n_members),
        ("controls", controls_extracted, n_controls),
    ):
        if int(n) < 0 or not 0 <= int(k) <= int(n):
            raise InputError(
                f"{name}: {k} extracted of {n} targets is not a count", hint="0 <= extracted <= n"
            )
    if n_members == 0 or n_controls == 0:
        return Verdict(
            PAPER_SENTENCE,
            NOT_TESTABLE,
            f"{n_members} member and {n_controls} control targets: the sentence needs both",
        )
    if not complete:
        return Verdict(
            PAPER_SENTENCE,
            NOT_TESTABLE,
            "some searches did not finish, so a side without a success is "
            "not a failure of the procedure",
        )
    held = members_extracted >= 1 and controls_extracted >= 1
    return Verdict(
        PAPER_SENTENCE,
        HELD if held else NOT_HELD,
        f"members {members_extracted}/{n_members}, non-members {controls_extracted}/{n_controls} extracted "
        f"(ACR > 1); held means at least one on each side",
    )
