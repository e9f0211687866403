"""``memclaim.reproduce``: regenerate a figure or table of [MX] §8 or [EM] §3-§6 and App. D.2 (the
reproductions of :mod:`memclaim.experiments`), what ``memclaim reproduce NAME`` runs; and the
names the command lists."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from .. import train as _train  # noqa: F401  (registers the named model "toy": the quick runs load it)
from ..errors import InputError
from ..experiments import REPRODUCTIONS, run
from ..experiments.common import check_seed, summary_lines
from ._options import check_out_dir
from ._public import public

__all__ = ["reproduce", "reproductions", "ReproductionRun"]


def reproductions() -> dict[str, str]:
    """Every reproduction's name and what it regenerates, in the order ``memclaim reproduce
    --list`` prints them.

    >>> import memclaim as mc
    >>> mc.reproductions()["staircase"][:17]
    '[MX] Fig. 6 left:'
    """
    return {name: desc for name, (_, desc) in REPRODUCTIONS.items()}


@dataclass(frozen=True)
class ReproductionRun:
    """One reproduction's run: its JSON-ready result (``to_dict()``, what ``--json`` prints, the
    content of NAME.json), the folder that holds NAME.json, NAME.png/.pdf and NAME.md/.html, and
    the summary ``memclaim reproduce`` prints (our numbers beside the paper's, the checks, the
    paper's sentences judged on this run)."""

    name: str
    out_dir: str
    result: dict = field(repr=False)

    def to_dict(self) -> dict:
        """The result as written to NAME.json."""
        return self.result

    @property
    def all_checks_passed(self) -> bool:
        """Whether every check of the theory's predictions held (a paper sentence judged "not
        held" is a finding, not a failed check)."""
        return bool(self.result.get("all_checks_passed", True))

    def summary_lines(self) -> list[str]:
        """The lines ``memclaim reproduce`` prints (:func:`memclaim.experiments.common.summary_lines`)."""
        return summary_lines(self.result)

    def __repr__(self) -> str:
        checks = "all checks passed" if self.all_checks_passed else "a check failed"
        return f"ReproductionRun({self.name!r}, {checks}, out_dir={self.out_dir!r})"


@public
def reproduce(
    name: str, *, quick: bool = False, seed: int = 0, out_dir: str | os.PathLike = "reproductions"
) -> ReproductionRun:
    """Regenerate reproduction ``name`` (one of :func:`reproductions`) at master seed ``seed``:
    writes NAME.json (every number, the seeds, versions, our numbers beside the paper's and the
    checks of the theory's predictions, each quoting the sentence it tests), NAME.png, NAME.pdf
    and the report NAME.md / NAME.html into ``out_dir`` (created); ``quick`` runs the small
    Monte-Carlo sizes. The same seed gives the same JSON bit for bit.

    >>> import memclaim as mc
    >>> run = mc.reproduce("staircase", quick=True, seed=0, out_dir="reproductions")  # doctest: +SKIP
    >>> run.all_checks_passed, run.to_dict()["files"]["json"]  # doctest: +SKIP
    (True, 'staircase.json')
    >>> mc.reproduce("nosuch")
    Traceback (most recent call last):
    memclaim.errors.InputError: unknown reproduction 'nosuch'
      fix: one of: ...
    """
    if not isinstance(name, str) or name not in REPRODUCTIONS:
        raise InputError(
            f"unknown reproduction {name!r}", hint="one of: " + ", ".join(REPRODUCTIONS)
        )
    if isinstance(seed, int) and not isinstance(seed, bool) and seed < 0:
        raise InputError(f"--seed must be >= 0, got {seed}", hint="e.g. --seed 0")
    seed = check_seed(seed)
    check_out_dir(out_dir)
    return ReproductionRun(
        name=name,
        out_dir=os.fspath(out_dir),
        result=run(name, quick=quick, seed=seed, out_dir=out_dir),
    )
