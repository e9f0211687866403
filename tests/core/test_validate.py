"""memclaim.validate: numeric domains, with the value and a fix in every message."""

from __future__ import annotations

import math

import numpy as np
import pytest

from memclaim import validate as V
from memclaim.errors import DomainError


def test_accepts_and_returns_plain_numbers():
    assert V.finite("x", np.float32(1.5)) == 1.5 and type(V.finite("x", 2)) is float
    assert (
        V.positive("x", 1e-300) == 1e-300 and V.positive("x", math.inf, allow_inf=True) == math.inf
    )
    assert V.nonneg("x", 0) == 0.0
    assert V.in_open_unit("a", 0.5) == 0.5
    assert V.in_unit("p", 0.0) == 0.0 and V.in_unit("p", 1) == 1.0
    assert V.integer("n", np.int64(3), minimum=1, maximum=3) == 3 and V.integer("n", 4.0) == 4


@pytest.mark.parametrize(
    "call",
    [
        lambda: V.finite("x", math.nan),
        lambda: V.finite("x", "1"),
        lambda: V.finite("x", True),
        lambda: V.positive("x", 0),
        lambda: V.positive("x", math.inf),
        lambda: V.nonneg("x", -1e-9),
        lambda: V.in_open_unit("a", 0),
        lambda: V.in_open_unit("a", 1),
        lambda: V.in_unit("p", 1.01),
        lambda: V.in_unit("p", 0, lo_open=True),
        lambda: V.in_unit("p", 1, hi_open=True),
        lambda: V.integer("n", 2.5),
        lambda: V.integer("n", 0, minimum=1),
        lambda: V.integer("n", 9, maximum=8),
        lambda: V.integer("n", True),
    ],
)
def test_refuses_outside_the_domain(call):
    with pytest.raises(DomainError):
        call()


def test_message_names_the_value():
    with pytest.raises(DomainError, match="n") as e:
        V.integer("n", 0, minimum=1)
    assert "0" in str(e.value)
