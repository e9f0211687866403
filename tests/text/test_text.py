"""Reading inputs and cutting windows in token space."""

from __future__ import annotations

import json

import pytest

from memclaim.errors import InputError
from memclaim.text.io import read_document, read_passages
from memclaim.text.windows import passage_windows, sliding_windows


def test_formats_read_the_same_records(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    recs = [{"id": "a", "text": "first text here"}, {"id": "b", "text": "second, with a comma"}]
    (tmp_path / "p.jsonl").write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    (tmp_path / "p.csv").write_text('id,text\na,first text here\nb,"second, with a comma"\n')
    pq.write_table(
        pa.table({"id": ["a", "b"], "text": [r["text"] for r in recs]}), tmp_path / "p.parquet"
    )
    (tmp_path / "p.txt").write_text("first text here\n\nsecond, with a comma\n")
    for name in ("p.jsonl", "p.csv", "p.parquet"):
        ps = read_passages(tmp_path / name)
        assert [(r.id, r.text) for r in ps.records] == [
            ("a", recs[0]["text"]),
            ("b", recs[1]["text"]),
        ]
    txt = read_passages(tmp_path / "p.txt")
    assert [r.text for r in txt.records] == [recs[0]["text"], recs[1]["text"]]
    assert [r.id for r in txt.records] == ["line1", "line3"]


def test_empty_records_are_skipped_and_counted(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_text('{"id": 1, "text": "ok"}\n{"id": 2, "text": "   "}\n{"id": 3, "text": ""}\n')
    ps = read_passages(p)
    assert len(ps) == 1 and ps.skipped_empty == 2 and ps.skipped_ids == ("2", "3")


@pytest.mark.parametrize(
    "content,fragment",
    [
        (b"", "is empty"),
        (b"   \n\n", "is empty"),
        (b'{"id": 1, "text": "caf\xe9"}\n', "not valid UTF-8: byte 0xe9"),
        (b'{"id": 1, "body2": "x"}\n', "cannot find a text field"),
        (b'{"id": 1, "text": "a"}\n{"id": 2}\n', "line 2: record has no 'text' field"),
        (b'{"id": 1, "text": "a"}\nnot json\n', "line 2: invalid JSON"),
        (b'{"id": 1, "text": ""}\n', "holds no non-empty texts"),
        (b'{"id": 1, "text": 5}\n', "not a string"),
        (b'{"id": 1, "text": "a"}\n{"id": 1, "text": "b"}\n', "duplicate id '1'"),
    ],
)
def test_bad_input_messages(tmp_path, content, fragment):
    p = tmp_path / "bad.jsonl"
    p.write_bytes(content)
    with pytest.raises(InputError) as e:
        read_passages(p)
    assert fragment in str(e.value)
    assert "bad.jsonl" in str(e.value)


def test_missing_file_and_unknown_extension(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        read_passages(tmp_path / "nope.jsonl")
    (tmp_path / "x.docx").write_text("hi")
    with pytest.raises(InputError, match="cannot tell the format"):
        read_passages(tmp_path / "x.docx")
    with pytest.raises(InputError, match="is empty"):
        (tmp_path / "e.txt").write_text("")
        read_document(tmp_path / "e.txt")


TEXT = (
    "Quora mimi sha tova. Lenka pu ri dasho, and the mill turned twice!\n"
    "Zeal — ünïcödé words, tabs\tand  double  spaces; the end of it all is near. "
) * 3


def test_windows_concatenate_to_the_document_ids(random_model):
    tok = random_model.tokenizer
    ids, offsets = tok.encode_with_offsets(TEXT)
    ws = sliding_windows(TEXT, tok, prefix_tokens=7, suffix_tokens=5, stride=3)
    assert len(ws) == (len(ids) - 12) // 3 + 1
    split = 0
    for w in ws.windows:
        s = w.token_start
        assert list(w.prefix_ids) + list(w.suffix_ids) == ids[s : s + 12]
        # spans are contiguous and map back to the exact text
        assert w.prefix_span[1] == w.suffix_span[0]
        assert TEXT[w.prefix_span[0] : w.suffix_span[1]] == w.prefix_text + w.suffix_text
        # byte-level BPE is lossless: the text covered by the window's tokens decodes from its ids,
        # except where a window edge cuts a multi-byte character in two (the span then covers the
        # whole character, the ids only some of its bytes)
        for ids_, text_ in (
            (list(w.prefix_ids) + list(w.suffix_ids), TEXT[offsets[s][0] : offsets[s + 11][1]]),
            (list(w.suffix_ids), w.suffix_text),
        ):
            dec = tok.decode(ids_)
            if "\ufffd" in dec:
                # only the cut character is lost, at an edge of the window
                assert dec.strip("\ufffd").replace("\ufffd", "") in TEXT
                assert "\ufffd" not in dec.strip("\ufffd")
                split += 1
            else:
                assert dec == text_
    assert split < len(ws.windows)


def test_passage_windows_skip_short_texts_and_error_when_none_left(random_model):
    from memclaim.text.io import Record

    tok = random_model.tokenizer
    recs = [Record("long", TEXT), Record("short", "tiny text")]
    ws = passage_windows(recs, tok, prefix_tokens=10, suffix_tokens=10)
    assert len(ws) == 1 and ws.skipped_short == 1 and ws.skipped_ids == ("short",)
    w = ws.windows[0]
    assert w.prefix_ids + w.suffix_ids == tuple(tok.encode_with_offsets(TEXT)[0][:20])
    with pytest.raises(InputError, match="shorter than prefix \\+ suffix = 40"):
        passage_windows([Record("short", "tiny text")], tok, prefix_tokens=20, suffix_tokens=20)
    with pytest.raises(InputError, match="shorter than one window"):
        sliding_windows("tiny", tok, prefix_tokens=20, suffix_tokens=20, stride=5)


# ------------------------------------------------------------------ memory follows the window (issue 12 C13)
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from memclaim.text import windows as W  # noqa: E402
from memclaim.text.io import Record  # noqa: E402

PIECES = [
    "the",
    " the",
    " mill",
    "turned",
    "  ",
    " ",
    "\n",
    "\n\n",
    "\t",
    ",",
    ".",
    "!",
    "ünï",
    "cödé",
    "—",
    "42",
    "1999",
    "'s",
    " Zeal",
    "dasho",
    "ééé",
    "🙂",
    "aaaaaaaa",
    "  double",
    "\r\n",
    "x",
]
texts = st.lists(st.sampled_from(PIECES), min_size=1, max_size=120).map("".join)


def _reference_passage(rec, tok, P, S):
    """The window cut from the tokenization of the whole text (the obviously-correct reference)."""
    ids, offs = tok.encode_with_offsets(rec.text)
    if len(ids) < P + S:
        return None
    pspan, sspan = W._spans(offs, 0, P, S, rec.text)
    return (tuple(ids[:P]), tuple(ids[P : P + S]), pspan, sspan)


@pytest.fixture
def small_slices(monkeypatch):
    """Start slices tiny, so that texts of a few hundred characters exercise the growth."""
    monkeypatch.setattr(W, "SLICE_MIN_CHARS", 0)
    monkeypatch.setattr(W, "SLICE_CHARS_PER_TOKEN", 1)
    monkeypatch.setattr(W, "GUARD_TOKENS", 2)


long_texts = st.lists(st.sampled_from(PIECES), min_size=12, max_size=160).map("".join)


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=long_texts, data=st.data())
def test_sliced_passage_windows_equal_the_whole_tokenization(
    random_model, small_slices, text, data
):
    """Property: the window cut from a slice equals the window cut from the whole text's
    tokenization (ids, spans, texts), on texts with multi-byte characters, runs of whitespace and
    long words, for every prefix/suffix length. P and S are drawn within the text's token count
    (one example in ten asks for one token more than the text has, which must be refused), so
    nine examples in ten compare a window."""
    tok = random_model.tokenizer
    n = len(tok.encode_with_offsets(text)[0])
    P = data.draw(st.integers(0, min(12, n - 1)), label="P")
    S = data.draw(st.integers(1, max(1, min(12, n - P))), label="S")
    if data.draw(st.integers(0, 9), label="too-short draw") == 0:
        S = n - P + 1  # one token more than the text holds
    rec = Record("r", text)
    ref = _reference_passage(rec, tok, P, S)
    if ref is None:
        assert P + S > n
        with pytest.raises(InputError, match="shorter than"):
            passage_windows([rec], tok, prefix_tokens=P, suffix_tokens=S)
        return
    w = passage_windows([rec], tok, prefix_tokens=P, suffix_tokens=S).windows[0]
    assert (w.prefix_ids, w.suffix_ids, w.prefix_span, w.suffix_span) == ref
    assert (
        w.prefix_text == text[ref[2][0] : ref[2][1]]
        and w.suffix_text == text[ref[3][0] : ref[3][1]]
    )


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    prefix=texts,
    suffix=texts,
    P=st.one_of(st.none(), st.integers(0, 10)),
    S=st.one_of(st.none(), st.integers(1, 10)),
)
def test_sliced_field_windows_equal_the_whole_tokenization(
    random_model, small_slices, prefix, suffix, P, S
):
    """Property, for records with explicit prefix and suffix fields: the cut from a slice around
    the boundary equals the cut of the whole prefix + suffix tokenization, and a token across the
    boundary is refused in both."""
    tok = random_model.tokenizer
    text = prefix + suffix
    b = len(prefix)
    ids, offs = tok.encode_with_offsets(text)
    straddle = any(s < b < e for s, e in offs)
    rec = Record("r", text, suffix_start=b)
    if straddle:
        with pytest.raises(InputError, match="falls inside token"):
            passage_windows([rec], tok, prefix_tokens=P, suffix_tokens=S)
        return
    k = sum(1 for _, e in offs if e <= b)
    lo = 0 if P is None else k - P
    hi = len(ids) if S is None else k + S
    if lo < 0 or hi > len(ids):
        with pytest.raises(InputError, match="shorter than asked"):
            passage_windows([rec], tok, prefix_tokens=P, suffix_tokens=S)
        return
    ws = passage_windows([rec], tok, prefix_tokens=P, suffix_tokens=S)
    w = ws.windows[0]
    assert w.prefix_ids == tuple(ids[lo:k]) and w.suffix_ids == tuple(ids[k:hi])
    assert w.prefix_span[1] == w.suffix_span[0] == b and w.suffix_text == text[b : w.suffix_span[1]]
    assert w.suffix_span[1] == max(b, max(e for _, e in offs[k:hi]))
    assert w.token_start in (lo, None)
    assert ws.cut is not None


class CountingTokenizer:
    """Wraps a tokenizer and counts the characters it was asked to tokenize."""

    def __init__(self, tok):
        self.tok = tok
        self.chars = 0
        self.calls = 0

    def encode_with_offsets(self, text):
        self.chars += len(text)
        self.calls += 1
        return self.tok.encode_with_offsets(text)


def test_a_huge_line_is_not_tokenized_whole(random_model):
    """Issue 12 C13: a 4 MB one-line record scored as one 30-token window used to be tokenized
    whole (8.5 GB for a 60 MB line); now only a slice around the window is, and the window is the
    one the whole tokenization gives."""
    tok = CountingTokenizer(random_model.tokenizer)
    line = (TEXT.replace("\n", " ") * 20000)[:4_000_000]
    ws = passage_windows([Record("big", line)], tok, prefix_tokens=20, suffix_tokens=10)
    assert tok.chars < 20_000, tok.chars  # a few kB, not 4 MB
    head = line[
        :5000
    ]  # the reference: the whole tokenization of a prefix long enough for the window
    ids, offs = random_model.tokenizer.encode_with_offsets(head)
    w = ws.windows[0]
    assert w.prefix_ids + w.suffix_ids == tuple(ids[:30])
    assert w.suffix_span == (offs[19][1], offs[29][1]) and ws.total_chars == {"big": 4_000_000}
    # explicit fields: a huge prefix and a huge suffix, both cut: only slices around the boundary
    tok2 = CountingTokenizer(random_model.tokenizer)
    b = 2_000_000
    cut = line[:b].rstrip() + "\n"
    rec = Record("f", cut + line[b:], suffix_start=len(cut))
    w2 = passage_windows([rec], tok2, prefix_tokens=12, suffix_tokens=7).windows[0]
    assert tok2.chars < 40_000, tok2.chars
    a = len(cut) - 4000
    ids2, offs2 = random_model.tokenizer.encode_with_offsets(rec.text[a : len(cut) + 4000])
    k = sum(1 for _, e in offs2 if e + a <= len(cut))
    assert w2.prefix_ids == tuple(ids2[k - 12 : k]) and w2.suffix_ids == tuple(ids2[k : k + 7])
    assert w2.token_start is None  # the prefix field was not tokenized whole: index unknown


# ------------------------------------------------------------------ every script (issue 25 item 1)
from _paths import test_module  # noqa: E402

SCRIPT_PIECES = test_module(
    "test_census_book"
).SCRIPT_PIECES  # tests/claims/ once tests mirror src/

script_texts = st.lists(st.sampled_from(SCRIPT_PIECES), min_size=5, max_size=300).map("".join)


def _check_cuts_in_every_script(tok, text, data):
    ids, offs = tok.encode_with_offsets(text)
    n = len(ids)
    if n < 2:
        return
    P = data.draw(st.integers(0, min(40, n - 1)), label="P")
    S = data.draw(st.integers(1, max(1, min(40, n - P))), label="S")
    w = passage_windows([Record("r", text)], tok, prefix_tokens=P, suffix_tokens=S).windows[0]
    assert w.prefix_ids + w.suffix_ids == tuple(ids[: P + S])
    b = data.draw(st.integers(1, len(text) - 1), label="field boundary") if len(text) > 1 else 0
    k = sum(1 for _, e in offs if e <= b)
    P2, S2 = data.draw(st.integers(0, 20), label="P2"), data.draw(st.integers(1, 20), label="S2")
    rec = Record("r", text, suffix_start=b)
    if b == 0 or k - P2 < 0 or k + S2 > n:
        return
    if any(s < b < e for s, e in offs):
        with pytest.raises(InputError, match="falls inside token"):
            passage_windows([rec], tok, prefix_tokens=P2, suffix_tokens=S2)
        return
    w2 = passage_windows([rec], tok, prefix_tokens=P2, suffix_tokens=S2).windows[0]
    assert w2.prefix_ids == tuple(ids[k - P2 : k]) and w2.suffix_ids == tuple(ids[k : k + S2])


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=script_texts, data=st.data())
def test_sliced_cuts_equal_the_whole_tokenization_in_every_script(
    random_model, small_slices, text, data
):
    """Property (deterministic: no false alarms): passage and field windows cut from slices equal
    the cut of the whole tokenization on texts of CJK, U+3000, emoji (ZWJ sequences, modifiers,
    flags), combining marks and ASCII, and a field boundary is refused only where the whole text
    has a token across it (a slice whose end cut a word once refused a boundary the whole text
    allows)."""
    _check_cuts_in_every_script(random_model.tokenizer, text, data)


@pytest.mark.real
@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=script_texts, data=st.data())
def test_sliced_cuts_equal_the_whole_tokenization_in_every_script_on_smollm2(
    smollm2, small_slices, text, data
):
    """The same property with SmolLM2's tokenizer."""
    _check_cuts_in_every_script(smollm2.tokenizer, text, data)


@pytest.mark.real
def test_a_boundary_the_whole_text_allows_is_not_refused_for_a_slice_on_smollm2(
    smollm2, small_slices
):
    """Found by the property above: the first slice around character 7 ends inside 'aaaaaaaa',
    which SmolLM2 then splits across character 7 though the whole text does not; the cut used to
    be refused on that slice's word."""
    tok = smollm2.tokenizer
    text = "日本語aaaaaaaa日本語日本語日本語"
    ids, offs = tok.encode_with_offsets(text)
    k = sum(1 for _, e in offs if e <= 7)
    assert not any(s < 7 < e for s, e in offs)
    w = passage_windows(
        [Record("r", text, suffix_start=7)], tok, prefix_tokens=0, suffix_tokens=2
    ).windows[0]
    assert w.prefix_ids == () and w.suffix_ids == tuple(ids[k : k + 2])


# ---------------------------------------------------------------- issue 25 item 4: input reading
def test_a_first_record_without_id_does_not_rename_the_others(tmp_path):
    """The id field is looked up over every record: a first record without one is named by its
    position (rec0), the others keep theirs (they were all renamed rec<n> before)."""
    p = tmp_path / "mixed.jsonl"
    p.write_text(
        '{"text": "no id here"}\n{"id": "x", "text": "b two"}\n{"id": 7, "text": "c three"}\n'
    )
    assert [r.id for r in read_passages(p).records] == ["rec0", "x", "7"]
    q = tmp_path / "docid.jsonl"
    q.write_text('{"text": "no id"}\n{"doc_id": "d1", "text": "second"}\n')
    assert [r.id for r in read_passages(q).records] == ["rec0", "d1"]
    # a position name that collides with a given id is a duplicate, named with both records
    c = tmp_path / "collide.jsonl"
    c.write_text('{"text": "first"}\n{"id": "rec0", "text": "second"}\n')
    with pytest.raises(InputError, match=r"line 2: duplicate id 'rec0' \(first at line 1\)"):
        read_passages(c)


@pytest.mark.parametrize(
    "value,shown",
    [
        ("true", "id True is a bool"),
        ("[1, 2]", r"id \[1, 2\] is a list"),
        ("NaN", "id nan is a float"),
        ("1.5", "id 1.5 is a float"),
    ],
)
def test_ids_that_are_not_strings_or_integers_are_refused(tmp_path, value, shown):
    p = tmp_path / "ids.jsonl"
    p.write_text(f'{{"id": "a", "text": "one"}}\n{{"id": {value}, "text": "two"}}\n')
    with pytest.raises(InputError, match=f"line 2: {shown}, not a string or an integer"):
        read_passages(p)


def test_txt_lines_split_only_at_newlines(tmp_path):
    """Form feed, U+2028 and U+0085 are characters of a line, not line ends (str.splitlines
    made 4 lines 7 records); CRLF files read as LF files."""
    p = tmp_path / "x.txt"
    p.write_bytes("one\x0ctwo\nthree\u2028four\r\nfive\x85six\n\nseven\n".encode("utf-8"))
    ps = read_passages(p)
    assert [(r.id, r.text) for r in ps.records] == [
        ("line1", "one\x0ctwo"),
        ("line2", "three\u2028four"),
        ("line3", "five\x85six"),
        ("line5", "seven"),
    ]


def test_jsonl_with_a_raw_line_separator_is_read(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_text(
        json.dumps({"id": "a", "text": "x\u2028y\x85z"}, ensure_ascii=False)
        + "\r\n"
        + json.dumps({"id": "b", "text": "w"})
        + "\n",
        encoding="utf-8",
    )
    assert [(r.id, r.text) for r in read_passages(p).records] == [
        ("a", "x\u2028y\x85z"),
        ("b", "w"),
    ]


def test_id_lists_and_exclusion_files_split_only_at_newlines(tmp_path):
    from memclaim.text.scorefile import read_id_list
    from memclaim.text.spans import parse_exclude_spans

    p = tmp_path / "ids.txt"
    p.write_text("c\u20283\r\nc-7\n", encoding="utf-8")
    assert read_id_list(p) == ("c\u20283", "c-7")
    s = tmp_path / "spans.txt"
    s.write_text("text: two\x0cthree\n", encoding="utf-8")
    assert parse_exclude_spans(s, [("ctl.txt", "ctl.txt", "one two\x0cthree four")]) == [((4, 13),)]


def test_a_csv_row_missing_its_text_stops_the_command(tmp_path):
    """docs/inputs.md: a record without the text field stops the command; an empty text field
    ('b,') is skipped and counted, a row that ends before it ('b') is an error naming the line."""
    p = tmp_path / "x.csv"
    p.write_text("id,text\na,hello\nb,\nc,world\n")
    ps = read_passages(p)
    assert [r.id for r in ps.records] == ["a", "c"] and ps.skipped_empty == 1
    p.write_text("id,text\na,hello\nb\nc,world\n")
    with pytest.raises(
        InputError, match=r"line 3: record has no 'text' field \(the row has 1 of the header's 2"
    ):
        read_passages(p)
    f = tmp_path / "f.csv"
    f.write_text("id,context,target\na,In the,beginning\nb,And God\n")
    with pytest.raises(InputError, match="line 3: record has no 'target' field"):
        read_passages(f, prefix_field="context", suffix_field="target")


@pytest.mark.parametrize(
    "line,what",
    [
        ('{"id": "a\\ud800", "text": "hello"}', "id 'a\\\\ud800' holds a lone surrogate"),
        ('{"id": "a", "text": "hel\\udc00lo"}', "the text holds a lone surrogate U\\+DC00"),
    ],
)
def test_a_lone_surrogate_is_refused_where_it_is(tmp_path, line, what):
    p = tmp_path / "x.jsonl"
    p.write_text(line + "\n")
    with pytest.raises(InputError, match=f"line 1: {what}"):
        read_passages(p)


def test_normalized_text_ignores_line_endings_whitespace_and_unicode_form():
    from memclaim.text.io import text_key

    assert (
        text_key("In the\r\nbeginning\r\n")
        == text_key("In the beginning")
        == text_key("In  the\tbeginning\n")
    )
    assert text_key("caf\u00e9") == text_key("cafe\u0301")  # NFC and NFD
    assert text_key("In the beginning") != text_key("In the beginning.")
