"""The ``local`` backend: scores work units one after another in this process, with memclaim's
own teacher-forcing engine (:mod:`memclaim.scoring.engine`), on the model's own device.

:func:`score_unit` is the one way a unit is scored by the engine: the local backend calls it,
and so does every Ray worker (:mod:`memclaim.scoring.ray_backend`), so a unit scored on a worker
holds what the local backend would store. The module registers ``local`` with
:func:`memclaim.scoring.backends.register_backend` when it is imported (issue 26 item 3: local
and Ray backends in their own modules; :mod:`memclaim.scoring.runner` re-exports both names).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from ..decoding import Policy
from ..procedure import Procedure
from ..progress import LogCallback
from ..runtime import Runtime
from ..store.store import UnitResult
from .backends import ScoringJob, register_backend
from .engine import BatchScores, StatSet, TeacherForcingEngine, run_stats
from .nearverbatim import near_verbatim_columns
from .units import WorkUnit

__all__ = ["LocalBackend", "score_unit"]


def score_unit(
    engine: TeacherForcingEngine,
    unit: WorkUnit,
    *,
    batch_size: int | str,
    near_verbatim: dict | None = None,
    on_batch: Callable[[int], None] | None = None,
) -> UnitResult:
    """Score one unit in batches of ``batch_size`` (equal lengths: no padding; ``"auto"``: the
    engine sizes them from free memory for the unit's longest window); with
    ``near_verbatim`` settings, add the near-verbatim lower bounds for every item. ``on_batch``
    is called with the number of windows of each batch once it is scored (progress).

    >>> from memclaim.decoding import parse_policies
    >>> from memclaim.models.base import SyntheticLM
    >>> from memclaim.scoring.units import Item
    >>> engine = TeacherForcingEngine(SyntheticLM(), parse_policies(["full", "greedy"]))
    >>> unit = WorkUnit("u0", "pk", (Item("a", (1, 2), (3, 4, 5)), Item("b", (2, 1), (5, 4, 3))))
    >>> r = score_unit(engine, unit, batch_size=2)
    >>> r.item_keys, r.scores.logq.round(4).tolist()
    (('a', 'b'), [[-4.3957, -inf], [-9.0922, -inf]])
    """
    parts = []
    items = unit.items
    if batch_size == "auto":
        batch_size = engine.resolve_batch_size(
            "auto",
            max(len(it.prompt) + len(it.suffix) for it in items) - 1,
            max(len(it.suffix) for it in items),
        )
    for a in range(0, len(items), batch_size):
        chunk = items[a : a + batch_size]
        parts.append(engine.score_batch([it.prompt for it in chunk], [it.suffix for it in chunk]))
        if on_batch is not None:
            on_batch(len(chunk))
    scores = BatchScores.concat(parts)
    extra = near_verbatim_columns(engine, items, scores, near_verbatim) if near_verbatim else {}
    return UnitResult(
        unit_id=unit.unit_id,
        procedure_key=unit.procedure_key,
        policies=tuple(p.spec for p in engine.policies),
        item_keys=tuple(it.key for it in items),
        prompt_len=tuple(len(it.prompt) for it in items),
        scores=scores,
        extra=extra,
        stats=engine.stats.spec,
    )


class LocalBackend:
    """Scores units one after another in this process (the ``local`` backend,
    :mod:`memclaim.scoring.backends`): on the model's own device, so ``device_class`` is None."""

    name = "local"
    device_class = None  # the model's own (models/placement.py)
    weights_loaded = False  # the model itself says whether its weights were read

    def __init__(
        self,
        lm_factory: Callable[[], object],
        policies: Sequence[Policy],
        *,
        batch_size: int | str = 16,
        near_verbatim: dict | None = None,
        stats=None,
    ):
        self.lm_factory = lm_factory
        self.policies = tuple(policies)
        self.batch_size = batch_size
        self.near_verbatim = near_verbatim
        self.stat_set = run_stats(stats)
        self._engine = None

    def set_stats(self, stats) -> None:
        """The statistics the next run needs (a run's :class:`ScoringJob` sets them too)."""
        stats = StatSet.of(stats)
        if stats != self.stat_set:
            self.stat_set, self._engine = stats, None

    def supports(self, procedure: Procedure, stats: StatSet) -> str | None:
        """Every procedure and statistic: the engine computes them all."""
        return None

    def engine(self):
        if self._engine is None:
            self._engine = TeacherForcingEngine(
                self.lm_factory(), self.policies, stats=self.stat_set
            )
        return self._engine

    on_batch: Callable[[int], None] | None = None  # called with the windows of each scored batch

    def run(self, units: Iterable[WorkUnit], job: ScoringJob | None = None):
        """One result per unit; with a run's ``job``, its statistics, near-verbatim settings and
        progress callback."""
        near_verbatim, on_batch = self.near_verbatim, self.on_batch
        if job is not None:
            if job.stats is not None:
                self.set_stats(job.stats)
            nv = job.procedure.near_verbatim
            near_verbatim = None if nv is None else nv.to_dict()
            on_batch = job.on_batch
        for unit in units:
            yield score_unit(
                self.engine(),
                unit,
                batch_size=self.batch_size,
                near_verbatim=near_verbatim,
                on_batch=on_batch,
            )

    def stats(self) -> dict:
        e = self._engine
        return (
            {}
            if e is None
            else {"forward_tokens": e.forward_tokens, "unembed_rows": e.unembed_rows}
        )


def _make_local(
    model, policies: Sequence[Policy], runtime: Runtime, log: LogCallback | None = None
) -> LocalBackend:
    return LocalBackend(lambda: model.lm, policies, batch_size=runtime.batch_size)


register_backend(
    "local", _make_local, description="this process, one unit after another", provider="memclaim"
)
