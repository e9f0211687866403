"""Explicit mechanisms of [MX]: the constructions behind its constants and separations.

- :mod:`.randomized_response`: randomized response on a membership bit, BSC post-processing
  ([MX] App. B.4, Fig. 8).
- :mod:`.geometric`: the two-sided geometric mechanism on a copy count ([MX] Lemma 4.4).
- :mod:`.staircase`: the Bernoulli staircase attaining eta*_k ([MX] App. B.5).
- :mod:`.gadget`: the subset-release gadget ([MX] Lemma 5.2).
- :mod:`.noisy_counts`: geometric noisy counts over candidate secrets and the Bayes top-m list
  adversary ([MX] §8.1, Fig. 6 right).
- :mod:`.camouflage`: Construction I, the uniform camouflage tree ([MX] App. D.1).
- :mod:`.trigger`: Construction II, the reserved trigger, as token logic ([MX] App. D.2).
- :mod:`.finite`: exact trade-off / privacy loss of two finite laws (mechanism self-checks).

Pure numpy/scipy: no torch, no I/O.
"""

from .camouflage import (
    CamouflageTree,
    SurvivorPosterior,
    enumerate_completion_logprobs,
    index_to_paths,
    paths_to_index,
    survivor_posterior,
)
from .finite import exact_tradeoff, max_privacy_loss, total_variation
from .gadget import SubsetReleaseGadget, uniform_subsets
from .geometric import TwoSidedGeometric
from .noisy_counts import (
    NoisyHistogramRelease,
    bayes_top_m,
    bayes_top_m_hits,
    min_entropy_bits,
    simulate_top_m_success,
    simulate_top_m_success_uniform,
    top_m_mass,
    top_m_success_exact,
    zipf_prior,
)
from .randomized_response import RandomizedResponse, binary_symmetric_channel
from .staircase import BernoulliStaircase
from .trigger import ReservedTrigger, contains, find_subsequence

__all__ = [
    "BernoulliStaircase",
    "CamouflageTree",
    "NoisyHistogramRelease",
    "RandomizedResponse",
    "ReservedTrigger",
    "SubsetReleaseGadget",
    "SurvivorPosterior",
    "TwoSidedGeometric",
    "bayes_top_m",
    "bayes_top_m_hits",
    "binary_symmetric_channel",
    "contains",
    "enumerate_completion_logprobs",
    "exact_tradeoff",
    "find_subsequence",
    "index_to_paths",
    "max_privacy_loss",
    "min_entropy_bits",
    "paths_to_index",
    "simulate_top_m_success",
    "simulate_top_m_success_uniform",
    "survivor_posterior",
    "top_m_mass",
    "top_m_success_exact",
    "total_variation",
    "uniform_subsets",
    "zipf_prior",
]
