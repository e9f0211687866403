"""memclaim.jsonutil: the one reader of user-supplied JSON files (procedures, audit specs)."""

from __future__ import annotations

import pytest

from memclaim.errors import InputError
from memclaim.jsonutil import read_json_object


def test_reads_an_object(tmp_path):
    p = tmp_path / "p.json"
    p.write_text('{"a": 1, "b": "é"}', encoding="utf-8")
    assert read_json_object(p, "procedure") == {"a": 1, "b": "é"}


@pytest.mark.parametrize(
    "content,message",
    [
        (None, "procedure file .* does not exist"),
        (b"\xff\xfe{}", "not valid UTF-8"),
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "must hold a JSON object, got list"),
    ],
)
def test_bad_files_name_the_file_and_the_problem(tmp_path, content, message):
    p = tmp_path / "bad.json"
    if content is not None:
        p.write_bytes(content)
    with pytest.raises(InputError, match=message) as e:
        read_json_object(p, "procedure", hint="see docs/store.md")
    assert "bad.json" in str(e.value)


def test_to_dict_reads_a_result_dataclass_and_refuses_anything_else():
    """ResultMixin.to_dict on a frozen dataclass gives JSON-ready data; mixed into a class that is
    no dataclass it says so (mypy checks jsonutil since issue 26 item 6)."""
    import dataclasses
    import math

    from memclaim.jsonutil import ResultMixin

    @dataclasses.dataclass(frozen=True)
    class R(ResultMixin):
        x: float

    assert R(-math.inf).to_dict() == {"x": "-inf"}

    class NotAData(ResultMixin):
        pass

    with pytest.raises(TypeError, match="NotAData is not a dataclass"):
        NotAData().to_dict()
