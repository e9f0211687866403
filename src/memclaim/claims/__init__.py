"""Calibrated memorization claims ([EM] §3-§6, App. C-F): pure numpy/scipy, no torch, no I/O
(except :mod:`.demo`, which writes the demo's report).

- :mod:`.conformal`: the conformal population test, p-values, the alpha sweep
- :mod:`.population`: the test with ids, decontamination, multiple testing, budgets
- :mod:`.intervals`: Clopper-Pearson, Wilson, Newcombe (independent, paired), the Beta law
- :mod:`.multiple`: Benjamini-Hochberg and Bonferroni ([EM] C.5)
- :mod:`.compare`: paired/independent differences, matching candidates by text
- :mod:`.census`: the single-document census
- :mod:`.budget`: query budgets and extractable memorization

Claims compare procedures with :func:`memclaim.procedure.require_same_procedure` (one floor below
claims and scoring: the procedure is a value of its own).
"""

from .budget import (  # noqa: F401
    extractable_memorization,
    log_prob_at_least_once,
    prob_at_least_once,
    queries_needed,
)
from .census import (  # noqa: F401
    WindowScores,
    census,
    census_threshold,
    coverage,
    flag_near_verbatim,
    global_census,
    global_threshold,
)
from .compare import (  # noqa: F401
    compare_population_claims,
    independent_difference,
    match_by_text,
    paired_difference,
)
from .conformal import alpha_sweep, conformal_pvalues, population_test, randomized_pvalues, rank_k  # noqa: F401
from .multiple import bonferroni_capacity, controls_needed, fdr_claims, fwer_claims  # noqa: F401
from .population import population_claim  # noqa: F401
