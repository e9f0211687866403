"""The store: memclaim's durable results, a stage of its own (DESIGN.md: text -> windows ->
scoring -> store -> claims -> report; issue 26 item 3).

- :mod:`memclaim.store.store`: the content-addressed score store (:class:`ScoreStore`): procedures,
  unit files, runs, the manifest, locks, seals and the migration of older stores.
- :mod:`memclaim.store.results`: reading a finished run back (:func:`load_run_scores`,
  :func:`list_runs`, :class:`RunScores`), which is all that claims, audits and reports need: they
  never need the model again.

The store knows files, keys and columns, not the engine: it imports no scoring, model or text
module and loads no torch (``tests/project/test_import_layers.py``). The scoring run writes into
it; in the imports it therefore sits one floor below ``scoring``. ``memclaim.scoring.store`` and
``memclaim.scoring.results``, its former names, are these same modules.

>>> from memclaim.store import ScoreStore, load_run_scores
>>> ScoreStore.__module__, load_run_scores.__module__
('memclaim.store.store', 'memclaim.store.results')
"""

from .results import RunScores, list_runs, load_run_scores
from .store import SCHEMA_VERSION, ScoreStore, UnitResult

__all__ = [
    "SCHEMA_VERSION",
    "RunScores",
    "ScoreStore",
    "UnitResult",
    "list_runs",
    "load_run_scores",
]
