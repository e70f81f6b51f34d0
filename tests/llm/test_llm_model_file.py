"""Model files are checked before llama.cpp sees them: a missing, empty, non-GGUF, truncated,
damaged or too-large file is refused with a sentence that says why, and llama.cpp is never
asked to load it."""

from __future__ import annotations

import os
import struct
import sys
import time
import zipfile

import pytest
from llm_testkit import tiny_model  # noqa: F401 - fixture

from portalreview.llm import engine as engine_module
from portalreview.llm import model_file as mf
from portalreview.llm.engine import Engine
from portalreview.llm.errors import ModelFileError
from portalreview.llm.testing_model import TINY, ModelShape, write_model


@pytest.fixture
def no_llama(monkeypatch):
    """Fail if a refused file would reach llama.cpp."""

    def refuse(*args, **kwargs):
        raise AssertionError("a file that failed the checks reached llama.cpp")

    monkeypatch.setattr(engine_module, "_load_llama", refuse)


def test_header_of_the_tiny_model(tiny_model):  # noqa: F811
    h = mf.read_header(tiny_model)
    assert h.architecture == "llama"
    assert h.version == 3
    assert h.context_length == TINY.n_ctx_train
    assert h.block_count == TINY.n_layer
    assert h.head_count_kv == TINY.n_head_kv
    assert h.vocab_size == TINY.n_vocab
    assert h.n_params == TINY.n_params() + (2 * TINY.n_layer + 1) * TINY.n_embd  # + norms
    assert h.weight_types == {"F32": len(h.tensors)}
    assert h.data_offset + h.weights_bytes <= h.file_size
    assert h.kv_bytes_per_token() == TINY.n_layer * TINY.n_head_kv * 2 * TINY.head_dim * 2


def test_type_table_agrees_with_the_gguf_package():
    import gguf

    for qtype, (block, size) in gguf.constants.GGML_QUANT_SIZES.items():
        if qtype.value in mf.GGML_TYPES:
            assert mf.GGML_TYPES[qtype.value][1:] == (block, size), qtype.name


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda p: None, "There is no model file"),
        (lambda p: p.mkdir(), "is a folder"),
        (lambda p: p.write_bytes(b""), "is empty"),
        (lambda p: p.write_text("hello, I am a text file\n"), "is not a GGUF model file"),
        (lambda p: p.write_bytes(b"ggjt" + bytes(60)), "old GGML format"),
        (lambda p: p.write_bytes(struct.pack("<Q", 40) + b'{"a": 1}' + bytes(40)), "safetensors"),
        (lambda p: p.write_bytes(b"GGUF" + struct.pack("<I", 99) + bytes(16)), "GGUF version 99"),
        (lambda p: p.write_bytes(b"GGUF" + struct.pack(">I", 3) + bytes(16)), "big-endian"),
        (lambda p: p.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 1, 1) + b"\x05"), "truncated"),
        (lambda p: p.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 0)), "holds no tensors"),
        (
            lambda p: p.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 1, 2**40)),
            "is damaged",
        ),
    ],
)
def test_bad_files_are_refused_with_a_reason(tmp_path, no_llama, make, message):
    path = tmp_path / "model.gguf"
    make(path)
    with pytest.raises(ModelFileError, match=message):
        Engine.load(path)


def test_a_zip_is_named_as_such(tmp_path, no_llama):
    path = tmp_path / "model.gguf"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("data.pkl", b"x")
    with pytest.raises(ModelFileError, match="zip archive"):
        Engine.load(path)


@pytest.mark.parametrize("keep", [0.3, 0.9, 0.999])
def test_truncated_copies_are_refused(tmp_path, tiny_model, no_llama, keep):  # noqa: F811
    data = tiny_model.read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(data[: int(len(data) * keep)])
    with pytest.raises(ModelFileError, match="truncated") as info:
        Engine.load(cut)
    assert "copy the file again" in str(info.value)


def test_a_file_that_cut_inside_its_header_is_truncated(tmp_path, tiny_model, no_llama):  # noqa: F811
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(tiny_model.read_bytes()[:200])
    with pytest.raises(ModelFileError, match="truncated: it ends inside its header"):
        Engine.load(cut)


def test_a_model_too_large_for_memory_is_refused(tiny_model, no_llama):  # noqa: F811
    with pytest.raises(ModelFileError, match=r"needs about .* GB of memory .* only .* free"):
        Engine.load(tiny_model, gpu=False, available_bytes=100_000)


def test_memory_is_not_checked_against_ram_when_offloading(tiny_model):  # noqa: F811
    h = mf.read_header(tiny_model)
    plan = mf.plan_memory(h, available_bytes=100_000, weights_in_ram=False)
    assert plan.n_ctx >= 16


def test_context_follows_the_model_and_the_budget(tiny_model):  # noqa: F811
    h = mf.read_header(tiny_model)
    per_token = h.kv_bytes_per_token()
    assert mf.plan_memory(h, available_bytes=None).n_ctx == min(TINY.n_ctx_train, 8192)
    small = mf.plan_memory(h, kv_budget_bytes=1024 * per_token, available_bytes=None)
    assert small.n_ctx == 1024
    assert mf.plan_memory(h, kv_budget_bytes=10, available_bytes=None).n_ctx == 512  # floor
    assert mf.plan_memory(h, n_ctx=100_000, available_bytes=None).n_ctx == TINY.n_ctx_train
    assert mf.plan_memory(h, max_ctx=2048, available_bytes=None).n_ctx == 2048


def test_sha256_is_computed_once_and_remembered(tmp_path, monkeypatch):
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF-not-really" * 1000)
    cache = tmp_path / "cache" / "hashes.json"
    first = mf.model_sha256(model, cache)
    import hashlib

    assert first == hashlib.sha256(model.read_bytes()).hexdigest()
    assert cache.exists()
    mf._hash_memo.clear()  # a new run: only the cache file remembers

    def no_reading(*args, **kwargs):
        raise AssertionError("hashed again")

    monkeypatch.setattr(hashlib, "sha256", no_reading)
    assert mf.model_sha256(model, cache) == first
    monkeypatch.undo()
    model.write_bytes(b"changed" * 1000)
    os.utime(model, ns=(1, 1))
    assert mf.model_sha256(model, cache) != first


@pytest.mark.skipif(
    sys.platform == "win32", reason="Windows keeps no change time: docs/llm.md says so"
)
def test_a_file_written_over_with_the_same_size_and_time_is_hashed_again(tmp_path):
    """``cp -p`` (or ``rsync -t``, ``touch -r``) of another model of the same size sets the
    old modification time back: the next run must not take the old file's digest from the
    cache (its suggestions would name weights that did not make them)."""
    import hashlib

    model, other = tmp_path / "m.gguf", tmp_path / "other.gguf"
    model.write_bytes(b"A" * 4096)
    other.write_bytes(b"B" * 4096)
    cache = tmp_path / "hashes.json"
    os.utime(model, ns=(10**18, 10**18))
    first = mf.model_sha256(model, cache)
    mf._hash_memo.clear()  # a new run
    time.sleep(0.01)  # (a later change time)
    model.write_bytes(other.read_bytes())  # written over in place
    os.utime(model, ns=(10**18, 10**18))  # the old modification time set back
    assert mf.model_sha256(model, cache) == hashlib.sha256(b"B" * 4096).hexdigest() != first


def test_scan_lists_models_and_problems(tmp_path, tiny_model):  # noqa: F811
    folder = tmp_path / "models"
    (folder / "sub").mkdir(parents=True)
    write_model(folder / "sub" / "b.gguf", ModelShape(n_vocab=400, n_ctx_train=256))
    (folder / "a.gguf").write_bytes(tiny_model.read_bytes()[:1000])
    (folder / "notes.txt").write_text("not a model")
    (folder / "big-00001-of-00002.gguf").write_bytes(b"GGUF")
    (folder / "big-00002-of-00002.gguf").write_bytes(b"GGUF")
    found = {e.path.name: e for e in mf.scan_models(folder)}
    assert set(found) == {"a.gguf", "b.gguf", "big-00001-of-00002.gguf"}
    assert found["b.gguf"].usable and found["b.gguf"].architecture == "llama"
    assert found["b.gguf"].context_length == 256
    assert not found["a.gguf"].usable and "truncated" in found["a.gguf"].problem
    with pytest.raises(ModelFileError, match="does not exist"):
        mf.scan_models(tmp_path / "nowhere")
