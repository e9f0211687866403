"""memclaim's public Python API: the CLI's operations as functions with keyword-only options and
the CLI's defaults, each returning a frozen result with ``to_dict()`` (what the CLI prints with
``--json``), ``to_pandas()`` where tabular and ``save(folder)`` (the reports the CLI writes).

=================  ==========================================================================
load_model         a name, a path, a loaded model, or a transformers model with its tokenizer
score              texts (files, lists, tables, a document) -> a durable score store
test               the conformal population test on two score sets ([EM] §3, §4)
population         score members and controls, then test them
census             a single-document census against a matched control ([EM] §5)
audit              membership-inference and extraction audits ([MX] §8.2)
audit_table        the audit-disagreement table ([MX] Fig. 12)
dp_bounds          what a DP guarantee caps ([MX] §3-5), incl. DP-SGD curves and k copies
dp_account         epsilon of a DP-SGD run and its trade-off curve's caps
dp_baseline        the certified prior baseline kappa_pi(m) of a canary ([MX] App. F.2)
dp_corpus_baseline the corpus-conditional baseline kappa-bar ([MX] Prop. C.2(b))
dp_plots           [MX] Figs. 2-4 (and a DP-SGD run's curve) as PNG
budget             query budgets for a per-query probability ([EM] §6)
train_tiny         the training lab: a tiny GPT with planted records ([MX] §8)
finetune           fine-tuning with planted records, optionally DP-SGD ([MX] App. F.2)
unlearn            unlearning until the verifier reports forgotten ([MX] App. F.2)
acr                adversarial compression (GCG) on members and matched controls ([EM] App. A.2)
=================  ==========================================================================

Errors are :mod:`memclaim.errors` types (ValueErrors whose message repeats the bad value and says
the fix); options are named as the CLI spells them (``--batch-size`` for ``batch_size``).

Each name is imported on first use (PEP 562), so ``import memclaim.api`` is cheap and a module
of this package (the CLI's option defaults in ``_options``) loads without the scoring stack.
"""
from __future__ import annotations

# public name -> the private module that defines it
_EXPORTS = {
    "load_model": "_model", "score": "_score", "test": "_population", "population": "_population",
    "census": "_census", "audit": "_audit", "audit_table": "_audit", "dp_bounds": "_dp", "budget": "_budget",
    "Document": "_common", "ScoreResult": "_score", "TestResult": "_population", "PopulationResult": "_population",
    "CensusRun": "_census", "AuditRun": "_audit", "AuditTableRun": "_audit", "DPBounds": "_dp",
    "BudgetResult": "_budget", "train_tiny": "_train", "finetune": "_train", "unlearn": "_train", "TrainRun": "_train",
    "dp_account": "_dp", "DPAccount": "_dp", "dp_baseline": "_dp", "dp_corpus_baseline": "_dp", "dp_plots": "_dp",
    "acr": "_acr", "ACRResult": "_acr",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'memclaim.api' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))
