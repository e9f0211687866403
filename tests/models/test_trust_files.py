"""Issue 12 B7, B10 (and the rest of their class): memclaim never deletes or replaces a folder
it did not make, never the current folder or a parent of it, and never a model folder that
another process has published and may be reading."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from memclaim.cli.main import main
from memclaim.errors import InputError
from memclaim.fsutil import MARKER_FILE, atomic_directory, replaceable_folder


def _tree(root: Path) -> dict:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


TINY = ["--steps", "1", "--triggers", "1", "--duplicates", "1:1", "--no-progress"]


def test_overwrite_refuses_a_folder_memclaim_did_not_make(tmp_path, capsys):
    mine = tmp_path / "thesis"
    mine.mkdir()
    (mine / "chapter1.tex").write_text("years of work")
    (mine / "figs").mkdir()
    (mine / "figs" / "a.png").write_bytes(b"\x89PNG")
    before = _tree(mine)
    assert main(["train", "tiny", "--out", str(mine), "--overwrite", *TINY]) == 2
    err = capsys.readouterr().err
    assert "memclaim did not make" in err and "fix:" in err
    assert _tree(mine) == before


def test_overwrite_never_replaces_the_current_folder_or_a_parent(tmp_path, monkeypatch, capsys):
    work = tmp_path / "project" / "work"
    work.mkdir(parents=True)
    (work / "data.csv").write_text("the user's data")
    monkeypatch.chdir(work)
    before = _tree(tmp_path)
    for out in (".", "..", str(work), str(tmp_path)):
        assert main(["train", "tiny", "--out", out, "--overwrite", *TINY]) == 2, out
        assert "current folder or one of its parents" in capsys.readouterr().err
    assert _tree(tmp_path) == before
    # even a folder memclaim made is not replaced while it is the current folder
    made = tmp_path / "made"
    assert main(["train", "tiny", "--out", str(made), *TINY]) == 0
    monkeypatch.chdir(made)
    assert main(["train", "tiny", "--out", ".", "--overwrite", *TINY]) == 2
    assert "current folder" in capsys.readouterr().err


def test_overwrite_replaces_a_marked_folder_only_while_it_holds_nothing_else(tmp_path, capsys):
    out = tmp_path / "lab"
    assert main(["train", "tiny", "--out", str(out), *TINY]) == 0
    marker = json.loads((out / MARKER_FILE).read_text())
    assert "model.safetensors" in marker["files"] and "memclaim_train.json" in marker["files"]
    assert main(["train", "tiny", "--out", str(out), *TINY]) == 2  # no --overwrite: refused
    assert "not an empty folder" in capsys.readouterr().err
    first = (out / "memclaim_train.json").read_text()
    assert main(["train", "tiny", "--out", str(out), "--overwrite", "--seed", "1", *TINY]) == 0
    assert (out / "memclaim_train.json").read_text() != first  # replaced, by a marked folder again
    assert (out / MARKER_FILE).exists()
    (out / "my-notes.txt").write_text("added by the user")
    before = _tree(out)
    assert main(["train", "tiny", "--out", str(out), "--overwrite", *TINY]) == 2
    err = capsys.readouterr().err
    assert "holds files memclaim did not write" in err and "my-notes.txt" in err
    assert _tree(out) == before
    link = tmp_path / "link"
    (out / "my-notes.txt").unlink()
    link.symlink_to(out, target_is_directory=True)
    assert main(["train", "tiny", "--out", str(link), "--overwrite", *TINY]) == 2
    assert "symbolic link" in capsys.readouterr().err
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary folder left


def test_atomic_directory_never_deletes_an_existing_folder_unless_told(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep").write_text("x")
    with pytest.raises(InputError, match="already exists"):
        with atomic_directory(out) as tmp:
            (tmp / "new").write_text("y")
    assert _tree(out) == {"keep": b"x"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    # replace=True: the old folder stays whole if the new one fails ...
    with pytest.raises(RuntimeError):
        with atomic_directory(out, replace=True) as tmp:
            (tmp / "new").write_text("y")
            raise RuntimeError("disk full")
    assert _tree(out) == {"keep": b"x"}
    # ... and is replaced as a whole when it succeeds
    with atomic_directory(out, replace=True) as tmp:
        (tmp / "new").write_text("y")
    assert _tree(out) == {"new": b"y"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    with atomic_directory(tmp_path / "empty-ok") as tmp:
        (tmp / "a").write_text("a")
    (tmp_path / "e2").mkdir()
    with atomic_directory(tmp_path / "e2") as tmp:  # an empty folder loses nothing
        (tmp / "a").write_text("a")
    assert (tmp_path / "e2" / "a").exists()
    with pytest.raises(InputError, match="current folder"):
        replaceable_folder(Path.cwd())


def test_shadow_folder_memclaim_did_not_make_is_not_deleted(tmp_path):
    """A folder at OUT/shadows/<i> without membership.json is not a shadow memclaim published
    (it publishes them whole by one rename): the earlier code deleted it and trained anew."""
    from memclaim.audits.shadows import ShadowRecipe, ensure_shadows, population_from_texts

    root = tmp_path / "shadows"
    (root / "0").mkdir(parents=True)
    (root / "0" / "results.csv").write_text("a user's file in the way")
    pop = population_from_texts(
        [f"member text {i}" for i in range(4)], [f"other text {i}" for i in range(4)]
    )
    recipe = ShadowRecipe(
        mode="scratch",
        base=str(tmp_path / "no-base-needed"),
        base_fingerprint="-",
        steps=1,
        epochs=None,
    )
    with pytest.raises(InputError, match="not a finished memclaim shadow"):
        ensure_shadows(root, population=pop, n_shadows=4, recipe=recipe)
    assert _tree(root) == {
        "0/results.csv": b"a user's file in the way"
    }  # untouched, nothing written beside it


# ----------------------------------------------------------------------- B10: GGUF conversion lock
def _write_gguf(path: Path) -> Path:
    import gguf
    import numpy as np

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(1)
    w.add_tensor("token_embd.weight", np.zeros((16, 8), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


class _FakeModel:
    def __init__(self, barrier):
        self.hf_quantizer = object()
        self.config = type("C", (), {})()
        self._barrier = barrier

    def save_pretrained(self, folder, safe_serialization=True):
        Path(folder, "model.safetensors").write_bytes(b"weights")
        Path(folder, "config.json").write_text("{}")


class _FakeTok:
    def save_pretrained(self, folder):
        Path(folder, "tokenizer.json").write_text("{}")


def test_concurrent_gguf_conversions_publish_once_and_never_replace(tmp_path, monkeypatch):
    """Two threads convert the same GGUF at once (separate flock descriptions contend like two
    processes). The first publishes the folder; the second must not convert again, and above
    all must not delete and replace the folder the first published (and may be reading)."""
    import transformers

    from memclaim.models import loader

    monkeypatch.setenv("MEMCLAIM_CACHE", str(tmp_path / "cache"))
    gguf_file = _write_gguf(tmp_path / "m.gguf")
    entered = threading.Event()
    conversions, calls = [], []

    def fake_model(folder, gguf_file=None, **kw):
        conversions.append(threading.current_thread().name)
        calls.append(kw)
        if len(conversions) == 1:
            # the first converter waits (up to 2 s) for the second to start converting too
            entered.wait(timeout=2.0)
        else:
            entered.set()
        return _FakeModel(entered)

    def fake_tok(folder, gguf_file=None, **kw):
        calls.append(kw)
        return _FakeTok()

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", fake_model)
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", fake_tok)
    results, errors, inodes = {}, [], {}

    def convert(name):
        try:
            out = loader.convert_gguf(gguf_file, label="t")
            results[name] = out
            inodes[name] = os.stat(out).st_ino
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    first = threading.Thread(target=convert, args=("first",), name="first")
    first.start()
    deadline = time.time() + 60
    while not conversions and not errors and time.time() < deadline:
        time.sleep(0.001)
    second = threading.Thread(target=convert, args=("second",), name="second")
    second.start()
    first.join(60)
    second.join(60)
    assert not errors, errors
    assert results["first"] == results["second"]
    assert conversions == ["first"]  # the second waited for the lock, then found it published
    assert inodes["first"] == inodes["second"] == os.stat(results["first"]).st_ino  # never replaced
    assert not [p for p in results["first"].parent.iterdir() if p.name.endswith(".tmp")]
    # issue 12 C15: the conversion reads only the local file and never runs a repository's code
    assert calls and all(
        kw.get("local_files_only") is True and kw.get("trust_remote_code") is False for kw in calls
    )
