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
reproduce          regenerate a figure or table of [MX] §8 or [EM] (``reproductions()`` names them)
=================  ==========================================================================

A front end (the ``memclaim`` command) needs a few more names, each re-exported here from its
one home so that it imports this package and nothing else (tests/project/test_import_layers.py): the
errors (``MemclaimError``, ``InputError``, ``DomainError``), the progress protocol
(``ProgressEvent``, ``ProgressCallback``, ``Reporter``), ``dumps`` (strict JSON),
``parse_policies``, ``check_batch_size``, ``check_out_dir``, ``set_threads``, the default policy, the window-length
defaults and input formats, ``describe_attacks`` and ``TABLE_SPEC_DOC`` (the audit's help),
``invoked_as``/``cli_invocation`` (the command line a report records), ``REPRODUCTIONS``,
``demo_stages`` (the stages of ``memclaim demo``), ``privacy_demo_section`` (its privacy
section's numbers) with ``DEMO_EPSILONS`` and ``neighbors_label``, ``quiet_library_bars``
(transformers' own bars off for the process) and ``__version__``; and the values the public
functions take whole (``Procedure``, ``Runtime`` with ``Placement`` and ``BackendSpec``,
``AuditSettings``) with the backend registry (``backend_names``, ``register_backend``).

Errors are :mod:`memclaim.errors` types (ValueErrors whose message repeats the bad value and says
the fix); options are named as the CLI spells them (``--batch-size`` for ``batch_size``).

Each name is imported on first use (PEP 562), so ``import memclaim.api`` is cheap and a module
of this package (the CLI's option defaults in ``_options``) loads without the scoring stack.
"""

from __future__ import annotations

# public name -> the private module that defines it
_EXPORTS = {
    "load_model": "_model",
    "score": "_score",
    "test": "_population",
    "population": "_population",
    "census": "_census",
    "audit": "_audit",
    "audit_table": "_audit",
    "dp_bounds": "_dp",
    "budget": "_budget",
    "Document": "_common",
    "ScoreResult": "_score",
    "EstimateResult": "_score",
    "TestResult": "_population",
    "PopulationResult": "_population",
    "CensusRun": "_census",
    "AuditRun": "_audit",
    "AuditTableRun": "_audit",
    "DPBounds": "_dp",
    "BudgetResult": "_budget",
    "train_tiny": "_train",
    "finetune": "_train",
    "unlearn": "_train",
    "TrainRun": "_train",
    "dp_account": "_dp",
    "DPAccount": "_dp",
    "dp_baseline": "_dp",
    "dp_corpus_baseline": "_dp",
    "dp_plots": "_dp",
    "acr": "_acr",
    "ACRResult": "_acr",
    "reproduce": "_reproduce",
    "reproductions": "_reproduce",
    "ReproductionRun": "_reproduce",
}

__all__ = list(_EXPORTS)

# what a front end needs besides the operations (see above): name -> (module, name there); the
# CLI imports memclaim.api only, so everything it uses is reachable from here
_FRONT_END = {
    "__version__": ("memclaim._version", "__version__"),
    "MemclaimError": ("memclaim.errors", "MemclaimError"),
    "InputError": ("memclaim.errors", "InputError"),
    "DomainError": ("memclaim.errors", "DomainError"),
    "ProgressEvent": ("memclaim.progress", "ProgressEvent"),
    "ProgressCallback": ("memclaim.progress", "ProgressCallback"),
    "Reporter": ("memclaim.progress", "Reporter"),
    "dumps": ("memclaim.jsonutil", "dumps"),
    "parse_policies": ("memclaim.decoding", "parse_policies"),
    "check_batch_size": ("memclaim.validate", "batch_size"),
    "DEFAULT_POLICY": ("memclaim.procedure", "DEFAULT_POLICY"),
    "DEFAULT_PREFIX_TOKENS": ("memclaim.api._options", "DEFAULT_PREFIX_TOKENS"),
    "DEFAULT_SUFFIX_TOKENS": ("memclaim.api._options", "DEFAULT_SUFFIX_TOKENS"),
    "INPUT_FORMATS": ("memclaim.api._options", "INPUT_FORMATS"),
    "check_out_dir": ("memclaim.api._options", "check_out_dir"),
    "set_threads": ("memclaim.api._options", "set_threads"),
    "describe_attacks": ("memclaim.audits.attacks", "describe_attacks"),
    "TABLE_SPEC_DOC": ("memclaim.audits.table_spec", "TABLE_SPEC_DOC"),
    "invoked_as": ("memclaim.report.core", "invoked_as"),
    "cli_invocation": ("memclaim.api._public", "cli_invocation"),
    "REPRODUCTIONS": ("memclaim.experiments", "REPRODUCTIONS"),
    "demo_stages": (
        "memclaim.api._demo",
        None,
    ),  # the module: check_demo_options, demo_scoring, ...
    "privacy_demo_section": ("memclaim.privacy.demo", "run_demo_section"),
    "DEMO_EPSILONS": ("memclaim.privacy.demo", "DEMO_EPSILONS"),
    "neighbors_label": ("memclaim.privacy.tradeoff", "neighbors_label"),
    "quiet_library_bars": ("memclaim.models.quiet", "quiet_library_bars"),
    # the two values every public function takes (issue 26), the audit's settings value and the
    # backend registry (the CLI's --backend choices)
    "Procedure": ("memclaim.procedure", "Procedure"),
    "Runtime": ("memclaim.runtime", "Runtime"),
    "Placement": ("memclaim.runtime", "Placement"),
    "BackendSpec": ("memclaim.runtime", "BackendSpec"),
    "AuditSettings": ("memclaim.audits.settings", "AuditSettings"),
    "backend_names": ("memclaim.scoring.backends", "backend_names"),
    "register_backend": ("memclaim.scoring.backends", "register_backend"),
    # the other two registries a plug-in adds to (docs/extending.md, docs/attacks.md)
    "register_model": ("memclaim.models.registry", "register_model"),
    "unregister_model": ("memclaim.models.registry", "unregister_model"),
    "named_models": ("memclaim.models.registry", "named_models"),
    "register_attack": ("memclaim.audits.attacks", "register_attack"),
}

#: the values re-exported at the top level too (``memclaim.Procedure``, ``memclaim.Runtime``)
VALUES = ("Procedure", "Runtime", "Placement", "BackendSpec", "AuditSettings")


def __getattr__(name: str):
    import importlib

    if name in _EXPORTS:
        value = getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    elif name in _FRONT_END:
        module, attr = _FRONT_END[name]
        value = importlib.import_module(module)
        value = value if attr is None else getattr(value, attr)
    else:
        raise AttributeError(f"module 'memclaim.api' has no attribute {name!r}")
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS) | set(_FRONT_END))
