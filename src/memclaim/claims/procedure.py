"""Refusing to compare results computed under different extraction procedures ([EM] Def. B.2).

A conformal claim is only valid when the candidates and the controls were scored by the same
procedure (model, decoding policy, prompt rule, score; [EM] C.2 "Setup"), and a comparison of two
models or policies must differ only in what is being compared.

There is one implementation, in :mod:`memclaim.scoring.procedure` (pure Python, to the left of
``claims`` in the pipeline); this module re-exports it for the claim functions, plus the list of
fields of a *stored* procedure that describe but do not change the numbers.
"""

from __future__ import annotations

from ..scoring.procedure import (  # noqa: F401
    NUMERICS_FIELDS,
    numerics_differences,
    procedure_differences,
    require_same_procedure,
)

# Fields of a procedure as the store records it (memclaim.scoring.procedure.Procedure.to_dict,
# with the tested policy in "policy") that may differ between the candidates' and the controls'
# runs: which other policies were scored in the same pass, the model's display name and path
# (the fingerprint identifies the weights), the fingerprint an older memclaim recorded for the
# same folder (model.fingerprint_v1, kept beside the current one), the verify step's description,
# and the memclaim version that scored each run (0.2.0 computes the 0.1.0 scores it resumes; both
# runs' records stay in the report's inputs). Everything else (fingerprint, dtype, start-of-text
# rule, prompt rule, lengths, policy) must match.
STORED_PROCEDURE_MAY_DIFFER = (
    "policies_scored",
    "model.name",
    "model.source",
    "model.fingerprint_v1",
    "verify",
    "memclaim_version",
)

# The field a claim's procedure record gains when --allow-mixed-numerics (allow_mixed_numerics=True)
# declared scores computed on different device classes or dtypes comparable: the differences, as
# 'model.device_class: 'cpu' != 'cuda''; the report shows it with the procedure.
NUMERICS_DECLARED = "numerics_declared_comparable"

__all__ = [
    "procedure_differences",
    "require_same_procedure",
    "numerics_differences",
    "NUMERICS_FIELDS",
    "NUMERICS_DECLARED",
    "STORED_PROCEDURE_MAY_DIFFER",
]
