"""Reproductions of [MX] §8: one function per figure, each regenerating its numbers and plot.

Every reproduction is a module exposing ``run(*, quick: bool, seed: int, out_dir) -> dict`` that
writes ``NAME.json`` and ``NAME.png`` (see :mod:`.common`). :data:`REPRODUCTIONS` maps the public
name to ``(module, description)``; modules are imported only when run, so a reproduction that
needs an optional stack (torch, a real model) never breaks the others. Later reproductions plug in
by adding an entry here (or calling :func:`register`).
"""
from __future__ import annotations

import importlib
from typing import Callable

from ..errors import InputError

#: name -> (module path, one-line description)
REPRODUCTIONS: dict[str, tuple[str, str]] = {
    "staircase": ("memclaim.experiments.staircase",
                  "[MX] Fig. 6 left: k-copy canary under geometric noisy counts vs eta*_k and tanh(k eps/2)"),
    "entropy-sweep": ("memclaim.experiments.entropy_sweep",
                      "[MX] Fig. 6 right: extraction vs min-entropy against 1 - f_eps(kappa), H*, two canaries"),
    "per-instance": ("memclaim.experiments.per_instance",
                     "[MX] Fig. 8: per-instance calibration, randomized response and BSC families"),
}


def register(name: str, module: str, description: str) -> None:
    """Add (or replace) a reproduction: ``module`` must define ``run(*, quick, seed, out_dir)``."""
    REPRODUCTIONS[name] = (module, description)


def get_runner(name: str) -> Callable[..., dict]:
    """The ``run`` function of reproduction ``name`` (InputError naming the known ones otherwise)."""
    if name not in REPRODUCTIONS:
        raise InputError(f"unknown reproduction {name!r}",
                         hint="one of: " + ", ".join(sorted(REPRODUCTIONS)))
    return importlib.import_module(REPRODUCTIONS[name][0]).run


def run(name: str, *, quick: bool = False, seed: int = 0, out_dir="reproductions") -> dict:
    """Run reproduction ``name`` and return its JSON-ready result (also written to ``out_dir``)."""
    return get_runner(name)(quick=quick, seed=seed, out_dir=out_dir)


__all__ = ["REPRODUCTIONS", "register", "get_runner", "run"]
