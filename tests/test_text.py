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
    pq.write_table(pa.table({"id": ["a", "b"], "text": [r["text"] for r in recs]}), tmp_path / "p.parquet")
    (tmp_path / "p.txt").write_text("first text here\n\nsecond, with a comma\n")
    for name in ("p.jsonl", "p.csv", "p.parquet"):
        ps = read_passages(tmp_path / name)
        assert [(r.id, r.text) for r in ps.records] == [("a", recs[0]["text"]), ("b", recs[1]["text"])]
    txt = read_passages(tmp_path / "p.txt")
    assert [r.text for r in txt.records] == [recs[0]["text"], recs[1]["text"]]
    assert [r.id for r in txt.records] == ["line1", "line3"]


def test_empty_records_are_skipped_and_counted(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_text('{"id": 1, "text": "ok"}\n{"id": 2, "text": "   "}\n{"id": 3, "text": ""}\n')
    ps = read_passages(p)
    assert len(ps) == 1 and ps.skipped_empty == 2 and ps.skipped_ids == ("2", "3")


@pytest.mark.parametrize("content,fragment", [
    (b"", "is empty"),
    (b"   \n\n", "is empty"),
    (b'{"id": 1, "text": "caf\xe9"}\n', "not valid UTF-8: byte 0xe9"),
    (b'{"id": 1, "body2": "x"}\n', "cannot find a text field"),
    (b'{"id": 1, "text": "a"}\n{"id": 2}\n', "line 2: record has no 'text' field"),
    (b'{"id": 1, "text": "a"}\nnot json\n', "line 2: invalid JSON"),
    (b'{"id": 1, "text": ""}\n', "holds no non-empty texts"),
    (b'{"id": 1, "text": 5}\n', "not a string"),
    (b'{"id": 1, "text": "a"}\n{"id": 1, "text": "b"}\n', "duplicate id '1'"),
])
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


TEXT = ("Quora mimi sha tova. Lenka pu ri dasho, and the mill turned twice!\n"
        "Zeal — ünïcödé words, tabs\tand  double  spaces; the end of it all is near. ") * 3


def test_windows_concatenate_to_the_document_ids(random_model):
    tok = random_model.tokenizer
    ids, offsets = tok.encode_with_offsets(TEXT)
    ws = sliding_windows(TEXT, tok, prefix_tokens=7, suffix_tokens=5, stride=3)
    assert len(ws) == (len(ids) - 12) // 3 + 1
    split = 0
    for w in ws.windows:
        s = w.token_start
        assert list(w.prefix_ids) + list(w.suffix_ids) == ids[s:s + 12]
        # spans are contiguous and map back to the exact text
        assert w.prefix_span[1] == w.suffix_span[0]
        assert TEXT[w.prefix_span[0]:w.suffix_span[1]] == w.prefix_text + w.suffix_text
        # byte-level BPE is lossless: the text covered by the window's tokens decodes from its ids,
        # except where a window edge cuts a multi-byte character in two (the span then covers the
        # whole character, the ids only some of its bytes)
        for ids_, text_ in ((list(w.prefix_ids) + list(w.suffix_ids), TEXT[offsets[s][0]:offsets[s + 11][1]]),
                            (list(w.suffix_ids), w.suffix_text)):
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
