"""Issue 14 item 7: a Ray worker with --gpus-per-worker takes the same GPU path as a local run:
its model reports the accelerator as its device, so the engine picks the batched schedule
(statistics batched across windows, one host copy per batch). No GPU here: the device move is
injected, and the worker must report the injected device and the batched schedule."""

from __future__ import annotations

import torch

from _paths import DATA
from memclaim.models import device as device_mod
from memclaim.models import load_model
from memclaim.scoring.ray_backend import ModelRef, ScoringWorker

MODEL = DATA / "fixtures" / "store_v1" / "model"


class _OnFakeCuda:
    """The CPU model, reporting ``cuda:0`` as its device (what to_device gives on a GPU)."""

    def __init__(self, lm):
        self._lm = lm
        self.vocab_size, self.name, self.config = lm.vocab_size, lm.name, lm.config

    @property
    def device(self):
        return torch.device("cuda:0")

    def __getattr__(self, name):
        return getattr(self._lm, name)


def test_gpu_worker_reports_its_cuda_device_and_takes_the_batched_schedule(monkeypatch):
    moved = []

    def fake_to_device(lm, device):
        moved.append(device)
        return _OnFakeCuda(lm)

    monkeypatch.setattr(device_mod, "to_device", fake_to_device)
    ref = ModelRef.from_loaded(load_model(str(MODEL)))
    w = ScoringWorker(ref, ["full"], batch_size=4, threads=1, device="cuda")
    assert w.error is None, w.error
    assert moved == ["cuda"]
    info = w.info()
    assert info["device"] == "cuda" and info["lm_device"] == "cuda:0"
    assert w.engine.schedule == "batched" and info["schedule"] == "batched"


def test_cpu_worker_keeps_the_bit_invariant_schedule():
    ref = ModelRef.from_loaded(load_model(str(MODEL)))
    w = ScoringWorker(ref, ["full"], batch_size=4, threads=1)
    assert (
        w.error is None
        and w.engine.schedule == "cpu-invariant"
        and w.info()["schedule"] == "cpu-invariant"
    )
