"""audits/table_spec.py: the audit-table spec ([MX] Fig. 12) is checked before any model work,
naming the instance; baselines become the rate cells' arguments ([MX] Cor. 5.3)."""

from __future__ import annotations

import json

import pytest

from memclaim.audits.table_spec import (
    TABLE_COLUMNS,
    TABLE_SPEC_DOC,
    baseline_kwargs,
    read_table_spec,
)
from memclaim.errors import InputError

GOOD = {
    "settings": {"prefix_tokens": 8},
    "instances": [
        {
            "name": "a",
            "model": "toy",
            "members": "m.jsonl",
            "nonmembers": "c.jsonl",
            "baseline": {"kappa": 0.01},
        },
        {
            "name": "b",
            "members_run": {"store": "s", "run": "m"},
            "nonmembers_run": {"store": "s", "run": "c"},
        },
    ],
}


def test_a_good_spec_from_a_mapping_and_a_file(tmp_path):
    s = read_table_spec(GOOD, base_dir=tmp_path)
    assert s.settings == {"prefix_tokens": 8} and [i["name"] for i in s.instances] == ["a", "b"]
    assert s.path("m.jsonl") == tmp_path / "m.jsonl" and str(s.path("/abs/x")) == "/abs/x"
    f = tmp_path / "sub" / "spec.json"
    f.parent.mkdir()
    f.write_text(json.dumps(GOOD), encoding="utf-8")
    assert read_table_spec(f).base == f.parent  # relative paths are read from the spec's folder
    assert "loss-MIA" in TABLE_COLUMNS and "instances" in TABLE_SPEC_DOC


@pytest.mark.parametrize(
    "spec, match",
    [
        ({"instances": []}, "non-empty list 'instances'"),
        (
            {"settings": {"alpha": 1}, "instances": GOOD["instances"]},
            r"unknown settings \['alpha'\]",
        ),
        ({"instances": [{"model": "toy"}]}, "instance 0 needs a 'name'"),
        (
            {"instances": [GOOD["instances"][0], GOOD["instances"][0]]},
            "duplicate instance name 'a'",
        ),
        (
            {"instances": [{"name": "x", "model": "toy", "members": "m"}]},
            "instance 'x' lacks 'controls'",
        ),
        (
            {
                "instances": [
                    {"name": "x", "members_run": {"run": "m"}, "nonmembers_run": {"store": "s"}}
                ]
            },
            "members_run needs 'store'",
        ),
        ({"instances": [{**GOOD["instances"][0], "baseline": {"k": 1}}]}, "baseline needs 'kappa'"),
        (
            {"instances": [{**GOOD["instances"][0], "informed": {"successes": 1}}]},
            "informed needs 'successes' and 'trials'",
        ),
    ],
)
def test_bad_specs_name_the_instance(spec, match):
    with pytest.raises(InputError, match=match):
        read_table_spec(spec)


def test_baseline_kwargs():
    assert baseline_kwargs(None, "a") == {}
    assert baseline_kwargs({"kappa": 0.1}, "a") == {"baseline": 0.1}
    assert baseline_kwargs({"successes": 2, "trials": 9}, "a") == {
        "baseline_successes": 2,
        "baseline_trials": 9,
    }
    with pytest.raises(InputError, match="baseline must be an object"):
        baseline_kwargs(0.1, "a")
