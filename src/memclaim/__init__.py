"""memclaim: calibrated claims about memorization and extraction in language models.

The pipeline: text -> windows -> scoring -> store -> claims -> report (the repository's README.md,
"The pipeline"; DEVELOPERS.md describes each package). The public API is this package's
namespace, loaded on first use so that ``import memclaim`` stays fast (it imports neither torch
nor numpy)::

    import memclaim as mc
    run = mc.score("toy", ["a text ...", "another ..."], prefix_tokens=16, suffix_tokens=16)
    res = mc.test(members_run, controls_run, alpha="0.01")
    res.save("reports/members")

Functions: load_model, score, test, population, census, audit, audit_table, dp_bounds, budget,
dp_account, dp_baseline, dp_plots, acr, the training lab's train_tiny, finetune, unlearn, and
reproduce (with reproductions) (``help(memclaim.census)`` for each); results: ScoreResult,
EstimateResult, TestResult, PopulationResult, CensusRun, AuditRun, AuditTableRun, DPBounds,
BudgetResult, TrainRun, ACRResult, ReproductionRun; Document for a text given in memory; the
values the functions take whole: Procedure (``procedure=``), Runtime with Placement and
BackendSpec (``runtime=``), AuditSettings (``audit(settings=)``). The documentation site
(``make docs``) has a tutorial and the full reference.
"""

import os as _os

# MKL's strict conditional-numerical-reproducibility mode: with it a row of a float32 matmul
# has the same bits whatever the number of rows of the call, at a given thread count, on every
# CPU tried (without it, on AVX-512/AMX Xeons a row's product depends on the call's row count, so
# a window's score would depend on its batch); across thread counts MKL promises the same bits
# only on Intel's AVX2/AVX-512 branches (an AMD EPYC differs at 3 threads: docs/reproducibility.md). MKL reads this at its first call, so it is set
# here, before memclaim runs any matmul; a value the user set is kept ("AUTO" restores MKL's
# default). Measured: 70-77 GFLOP/s with it against 73 without on a 2048^2 sgemm, 2 threads.
_os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

from ._version import __version__  # noqa: E402  (after MKL_CBWR: see above)

# the public API, re-exported lazily from memclaim.api (PEP 562)
_API = (
    "load_model",
    "score",
    "test",
    "population",
    "census",
    "audit",
    "audit_table",
    "dp_bounds",
    "budget",
    "Document",
    "ScoreResult",
    "EstimateResult",
    "TestResult",
    "PopulationResult",
    "CensusRun",
    "AuditRun",
    "AuditTableRun",
    "DPBounds",
    "BudgetResult",
    "train_tiny",
    "finetune",
    "unlearn",
    "TrainRun",
    "dp_account",
    "DPAccount",
    "dp_baseline",
    "dp_corpus_baseline",
    "dp_plots",
    "acr",
    "ACRResult",
    "reproduce",
    "reproductions",
    "ReproductionRun",
    # the values the functions take whole (issue 26): procedure=, runtime=, audit's settings=
    "Procedure",
    "Runtime",
    "Placement",
    "BackendSpec",
    "AuditSettings",
    # the registries a plug-in adds to (docs/extending.md): named models, attacks, backends
    "register_model",
    "named_models",
    "register_attack",
    "register_backend",
)

__all__ = ["__version__", *_API]


def __getattr__(name: str):
    if name in _API:
        from . import api

        value = getattr(api, name)
        globals()[name] = value  # later lookups skip this function
        return value
    raise AttributeError(f"module 'memclaim' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_API))
