"""The one reproduction skeleton (issue 26): settings -> data -> runs -> checks -> figure -> report.

Every reproduction is a subclass of :class:`Reproduction` that names itself (``name``, ``title``,
``reproduces``, ``streams``) and fills the steps; the skeleton runs them in this order and writes
the report through :func:`memclaim.experiments.common.finish`:

=================  ==============================================================================
``settings()``     the run's settings (quick or full), a JSON-ready dict: ``self.s``
``data()``         the inputs: draws from ``self.rngs`` (one stream per name of ``streams``),
                   texts, scored stores, a base model; returned to ``runs``
``runs(data)``     the work (training, scoring, simulation) -> the results, a JSON-ready dict
``checks``         the theory's predictions tested on the results (a failure sets the exit status)
``claims``         the paper's sentences judged on the results (:func:`~.common.paper_claim`)
``differences``    what differs from the paper on this run (models, text, scale)
``paper_numbers``  our numbers beside the paper's (:func:`~.common.compare`)
``figure``         the figure (a matplotlib Figure), given the claims and differences for its footer
``notes``          how to read the numbers
=================  ==============================================================================

then ``recorded_settings`` (default: ``self.s``) and ``caption`` (default: none) complete the
report. One object is one run: a step may keep on ``self`` what a later step needs and the JSON
does not record (a census result, a model). The module of a reproduction keeps its
``run(*, quick, seed, out_dir)`` (what :data:`memclaim.experiments.REPRODUCTIONS` names), whose
body is ``MyFigure(quick=quick, seed=seed, out_dir=out_dir).reproduce()``.

>>> from memclaim.experiments.common import check, new_figure
>>> from memclaim.experiments.skeleton import Reproduction
>>> class Coin(Reproduction):
...     name, title, reproduces, streams = "coin", "a fair coin", ("nothing",), ("flips",)
...     def settings(self):
...         return {"flips": 100 if self.quick else 10_000}
...     def runs(self, data):
...         heads = int(self.rngs["flips"].integers(0, 2, self.s["flips"]).sum())
...         return {"heads": heads, "rate": heads / self.s["flips"]}
...     def checks(self, results):
...         return [check("about half heads", 0.3 < results["rate"] < 0.7, f"{results['rate']:.2f}")]
...     def figure(self, results, *, claims, differences):
...         fig, ax = new_figure()
...         ax.bar([0, 1], [results["heads"], self.s["flips"] - results["heads"]])
...         return fig
>>> res = Coin(quick=True, seed=0, out_dir="reproductions").reproduce()  # doctest: +SKIP
>>> res["results"], res["all_checks_passed"]  # doctest: +SKIP
({'heads': 47, 'rate': 0.47}, True)
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, ClassVar

from .common import Check, Comparison, PaperClaim, check_seed, finish, rng_streams

__all__ = ["Reproduction"]


class Reproduction:
    """One run of a reproduction: the steps of the skeleton (see the module docstring), filled by
    a subclass, and :meth:`reproduce`, which runs them and writes NAME.json, NAME.png / NAME.pdf
    and NAME.md / NAME.html into ``out_dir``."""

    #: the public name (``memclaim reproduce NAME``; NAME.json)
    name: ClassVar[str] = ""
    #: the report's title
    title: ClassVar[str] = ""
    #: what of the papers it regenerates ("[MX] Fig. 6 (left)", ...)
    reproduces: ClassVar[Sequence[str]] = ()
    #: the names of the random streams, ``SeedSequence(seed).spawn(len(streams))`` in this order
    streams: ClassVar[Sequence[str]] = ()

    def __init__(
        self, *, quick: bool = False, seed: int = 0, out_dir: str | os.PathLike = "reproductions"
    ):
        self.quick = bool(quick)
        self.seed = check_seed(seed)
        self.out_dir = out_dir
        self.s: dict[str, Any] = self.settings()
        self.rngs = rng_streams(self.seed, self.streams)

    # ---- the steps a reproduction fills ---------------------------------------------------------
    def settings(self) -> dict[str, Any]:
        """The settings of this run (``self.quick`` picks the tier), recorded in NAME.json."""
        raise NotImplementedError(f"{type(self).__name__} must define settings()")

    def data(self) -> Any:
        """The inputs of the runs (None: the runs make their own)."""
        return None

    def runs(self, data: Any) -> dict[str, Any]:
        """The work on ``data``: the results, a JSON-ready dict (NAME.json's ``results``)."""
        raise NotImplementedError(f"{type(self).__name__} must define runs()")

    def checks(self, results: dict[str, Any]) -> Sequence[Check]:
        """The theory's predictions tested on ``results``."""
        return []

    def claims(self, results: dict[str, Any]) -> Sequence[PaperClaim]:
        """The paper's sentences judged on ``results``."""
        return []

    def differences(self, results: dict[str, Any]) -> Sequence[str]:
        """What differs from the paper on this run."""
        return []

    def paper_numbers(self, results: dict[str, Any]) -> Sequence[Comparison]:
        """Our numbers beside the paper's."""
        return []

    def figure(
        self, results: dict[str, Any], *, claims: Sequence[PaperClaim], differences: Sequence[str]
    ) -> Any:
        """The figure (a matplotlib Figure from :func:`~.common.new_figure` or
        :func:`memclaim.report.style.figure`)."""
        raise NotImplementedError(f"{type(self).__name__} must define figure()")

    def notes(self, results: dict[str, Any]) -> Sequence[str]:
        """Lines on how to read the numbers."""
        return []

    def recorded_settings(self, results: dict[str, Any]) -> dict[str, Any]:
        """The settings NAME.json records (default: :attr:`s`; a reproduction may add what the runs
        found, such as the models' records)."""
        return self.s

    def caption(self, claims: Sequence[PaperClaim], differences: Sequence[str]) -> str | None:
        """The words under the figure, recorded in NAME.json (None: the figure carries its footer)."""
        return None

    # ---- the skeleton ----------------------------------------------------------------------------
    def reproduce(self) -> dict:
        """Run the steps in order and write the report; returns the JSON-ready result
        (:func:`memclaim.experiments.common.finish`)."""
        data = self.data()
        results = self.runs(data)
        checks = list(self.checks(results))
        claims = list(self.claims(results))
        differences = list(self.differences(results))
        paper = list(self.paper_numbers(results))
        fig = self.figure(results, claims=claims, differences=differences)
        return finish(
            self.name,
            title=self.title,
            reproduces=list(self.reproduces),
            seed=self.seed,
            quick=self.quick,
            streams=list(self.streams),
            settings=self.recorded_settings(results),
            results=results,
            paper_numbers=paper,
            checks=checks,
            figure=fig,
            out_dir=self.out_dir,
            notes=list(self.notes(results)),
            paper_claims=claims,
            differences=differences,
            caption=self.caption(claims, differences),
        )
