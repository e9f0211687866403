"""memclaim.progress (ProgressEvent, Reporter) and memclaim._version: the layer-0 values every
long operation reports through, and the version every layer reads."""

import dataclasses
import doctest

import pytest

import memclaim
from memclaim import _version, progress
from memclaim.progress import ProgressEvent, Reporter, emit_log


def test_event_is_frozen_and_extra_read_only():
    e = ProgressEvent(stage="score", label="scoring a", done=1, total=2, extra={"units": 3})
    with pytest.raises(dataclasses.FrozenInstanceError):
        e.done = 2
    with pytest.raises(TypeError):
        e.extra["units"] = 4
    assert e.to_dict()["extra"] == {"units": 3} and e.unit == "windows"


def test_fraction_and_rate_edges():
    assert ProgressEvent(stage="s", label="", done=0, total=0).fraction == 1.0  # empty operation
    assert ProgressEvent(stage="s", label="", done=3, total=None).fraction is None
    assert ProgressEvent(stage="s", label="", done=3, total=6, elapsed=0.0).rate is None
    assert ProgressEvent(stage="s", label="", done=3, total=6, elapsed=1.5).rate == 2.0


def test_reporter_sequence_and_single_close():
    seen = []
    with Reporter(
        seen.append, stage="train", label="toy", total=5, unit="steps", extra={"run": "r"}
    ) as r:
        r.advance(2, loss=1.5)
        r.advance(3)
        r.close()
    assert [(e.done, e.finished) for e in seen] == [(0, False), (2, False), (5, False), (5, True)]
    assert seen[1].extra == {"run": "r", "loss": 1.5} and seen[2].extra == {"run": "r"}
    assert all(e.unit == "steps" and e.stage == "train" for e in seen)
    assert [e.elapsed for e in seen] == sorted(e.elapsed for e in seen)


def test_silent_reporter_and_log():
    r = Reporter(None, stage="s", label="x", total=None)
    r.advance(7)
    r.close()
    assert r.done == 7
    lines = []
    emit_log(lines.append, "a line")
    emit_log(None, "dropped")
    assert lines == ["a line"]


def test_version_has_one_home():
    assert memclaim.__version__ is _version.__version__


def test_doctests():
    for mod in (progress, _version):
        assert doctest.testmod(mod).failed == 0
