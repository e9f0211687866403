"""memclaim.text.spans: the census's exclusion entries ([EM] §5, App. E.1), from a file or a list."""

from __future__ import annotations

import pytest

from memclaim.errors import InputError
from memclaim.text.spans import exclude_spans_from_lines, parse_exclude_spans

ONE = [("ctl.txt", "ctl.txt", "one two three two")]
TWO = [("a/ctl.txt", "ctl.txt", "alpha beta"), ("b/other.txt", "other.txt", "beta gamma beta")]


def test_quotation_every_occurrence_and_offsets():
    assert exclude_spans_from_lines(["text: two", "0 3"], ONE) == [((4, 7), (14, 17), (0, 3))]
    # a quotation is searched in every control; offsets name their control by either form
    assert exclude_spans_from_lines(
        ["# comment", "", "text: beta", "other.txt 5 10", "a/ctl.txt 0 5"], TWO
    ) == [((6, 10), (0, 5)), ((0, 4), (11, 15), (5, 10))]


def test_file_and_lines_agree(tmp_path):
    p = tmp_path / "spans.txt"
    p.write_text("# verified\ntext: two\n0 3\n", encoding="utf-8")
    assert parse_exclude_spans(p, ONE) == exclude_spans_from_lines(["text: two", "0 3"], ONE)


@pytest.mark.parametrize(
    "lines, match",
    [
        (["text: "], "empty quotation"),
        (["text: four"], "occurs in no control"),
        (["3 2"], r"span \[3, 2\) is not inside"),
        (["0 99"], "not inside control 'ctl.txt'"),
        (["zero one"], "cannot read 'zero one'"),
        (["nope.txt 0 1"], "'nope.txt' is not one of the controls"),
    ],
)
def test_bad_entries_name_the_entry(lines, match):
    with pytest.raises(InputError, match=match) as e:
        exclude_spans_from_lines(lines, ONE)
    assert "exclude_spans[0]" in str(e.value)


def test_two_controls_need_a_name_and_lists_need_strings(tmp_path):
    with pytest.raises(InputError, match="does not say which of the 2 controls"):
        exclude_spans_from_lines(["0 1"], TWO)
    with pytest.raises(InputError, match="must be a list of entries"):
        exclude_spans_from_lines("text: two", ONE)
    with pytest.raises(InputError, match="entries must be strings"):
        exclude_spans_from_lines([(0, 3)], ONE)
    with pytest.raises(InputError, match="does not exist"):
        parse_exclude_spans(tmp_path / "missing.txt", ONE)
    bad = tmp_path / "latin1.txt"
    bad.write_bytes(b"text: caf\xe9\n")
    with pytest.raises(InputError, match="not valid UTF-8"):
        parse_exclude_spans(bad, ONE)
