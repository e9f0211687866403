"""Chaos-testing hook for the Ray backend's fault tests (tests/scoring/test_ray_backend.py).

``RayBackend(fault=...)`` calls ``fault.at(stage)`` on the worker at each stage of every unit
(memclaim.scoring.ray_backend.FAULT_STAGES). :class:`FaultInjection` makes the first worker
that reaches ``stage`` kill its own process with SIGKILL, exactly once per ``marker`` file
(created with O_EXCL, so a restarted worker and the other workers carry on).

Ray's workers cannot import this module (it is not in the package), so it is registered with
Ray's cloudpickle to travel by value. docs/distributed.md says how to run these tests.
"""

from __future__ import annotations

import os
import signal
import sys
from dataclasses import dataclass

from memclaim.errors import InputError
from memclaim.scoring.ray_backend import FAULT_STAGES


@dataclass(frozen=True)
class FaultInjection:
    stage: str
    marker: str

    def __post_init__(self):
        if self.stage not in FAULT_STAGES:
            raise InputError(
                f"fault stage {self.stage!r} is not one of {', '.join(map(repr, FAULT_STAGES))}"
            )

    def at(self, stage: str) -> None:
        if stage != self.stage:
            return
        try:
            fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        os.kill(os.getpid(), signal.SIGKILL)


try:  # the class travels to the workers by value
    from ray import cloudpickle as _cloudpickle

    _cloudpickle.register_pickle_by_value(sys.modules[__name__])
except ImportError:  # no ray: the tests that need it skip
    pass
