"""A failed model load carries what kind of failure it is, set where the cause is known (#47).

The window shows the kind's sentence; it never reads the kind back out of the engine's words.
These cover every kind the window has a sentence for, without loading a model.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import gguf_factory as gf
import pytest

from engine.api.errors import LoadFailure
from engine.errors import ModelLoadError
from engine.llama.load_errors import llama_failure, precheck_model_file, read_model_header

LOAD = "llama_model_load: error loading model: "
SHAPE = (
    f"{LOAD}check_tensor_dims: tensor 'blk.0.attn_q.weight' has wrong shape; "
    "expected    576,    576, got    288,   1152"
)


@pytest.mark.parametrize(
    ("log_line", "exc", "kind"),
    [
        (SHAPE, RuntimeError("Failed to load model from file"), LoadFailure.SHAPES),
        ("gguf_init_from_file_impl: invalid magic characters: 'abcd'", RuntimeError(), LoadFailure.NOT_GGUF),
        (
            "tensor 'x' data is not within the file bounds, model is corrupted or incomplete",
            RuntimeError(),
            LoadFailure.INCOMPLETE,
        ),
        (
            "error loading model architecture: unknown model architecture: 'grok'",
            RuntimeError(),
            LoadFailure.ARCHITECTURE,
        ),
        ("ggml_backend_cpu_buffer_type_alloc_buffer: failed to allocate buffer", RuntimeError(), LoadFailure.MEMORY),
        (
            "llama_model_load: error loading model: mmap failed: Cannot allocate memory",
            RuntimeError(),
            LoadFailure.MEMORY,
        ),
        ("", ValueError("Failed to create llama_context"), LoadFailure.MEMORY),
        ("", ValueError("Model path does not exist: /gone/x.gguf"), LoadFailure.MISSING),
        (
            "llama_model_load: error loading model: failed to open x: Permission denied",
            RuntimeError(),
            LoadFailure.DENIED,
        ),
        ("gguf_init_from_file_impl: GGUF version 4 is not supported", RuntimeError(), LoadFailure.OTHER),
        (
            "llama_model_load: error loading model: done_getting_tensors: wrong number of tensors",
            RuntimeError(),
            LoadFailure.OTHER,
        ),
    ],
)
def test_llama_cpps_logged_reason_sets_the_kind(
    tmp_path: Path, log_line: str, exc: Exception, kind: LoadFailure
) -> None:
    model = gf.write_tiny_llama(tmp_path / "m.gguf")  # a sound header: the log alone explains it
    error = llama_failure("m.gguf", model, exc, [log_line] if log_line else [], 4096)
    assert error.kind is kind and str(error).startswith("m.gguf: ") and "\n" not in str(error)


def test_llama_cpps_own_line_is_kept_without_its_column_padding(tmp_path: Path) -> None:
    error = llama_failure("m.gguf", gf.write_tiny_llama(tmp_path / "m.gguf"), RuntimeError(), [SHAPE], 4096)
    assert str(error).endswith("has wrong shape; expected 576, 576, got 288, 1152")
    assert error.kind.value.startswith("This file's tensor shapes don't match its architecture")


def test_the_file_check_and_the_header_set_the_kind(tmp_path: Path) -> None:
    (tmp_path / "folder.gguf").mkdir()
    (tmp_path / "junk.gguf").write_bytes(b"not a model at all")
    (tmp_path / "empty.gguf").write_bytes(b"")
    os.mkfifo(tmp_path / "pipe.gguf")
    whole = gf.write_tiny_llama(tmp_path / "whole.gguf").read_bytes()
    (tmp_path / "cut.gguf").write_bytes(whole[: len(whole) // 2])
    alien = gf.write_tiny_llama(tmp_path / "alien.gguf", architecture="notanarch")
    projector = gf.write_projector(tmp_path / "vision.gguf")

    def kind(check: object, path: Path) -> LoadFailure:
        with pytest.raises(ModelLoadError) as info:
            check(path)  # type: ignore[operator]
        return info.value.kind

    assert kind(precheck_model_file, tmp_path / "gone.gguf") is LoadFailure.MISSING
    assert kind(precheck_model_file, tmp_path / "folder.gguf") is LoadFailure.NOT_GGUF
    assert kind(precheck_model_file, tmp_path / "junk.gguf") is LoadFailure.NOT_GGUF
    assert kind(precheck_model_file, tmp_path / "empty.gguf") is LoadFailure.OTHER
    assert kind(precheck_model_file, tmp_path / "pipe.gguf") is LoadFailure.OTHER
    assert kind(read_model_header, tmp_path / "cut.gguf") is LoadFailure.INCOMPLETE
    assert kind(read_model_header, alien) is LoadFailure.ARCHITECTURE
    assert kind(read_model_header, projector) is LoadFailure.OTHER
    # A header that breaks only once llama.cpp has failed still explains it (a draft model's path).
    cut = llama_failure("draft model cut.gguf", tmp_path / "cut.gguf", RuntimeError(), [], 4096)
    assert cut.kind is LoadFailure.INCOMPLETE and str(cut).startswith("draft model cut.gguf: truncated")


def test_an_os_error_from_a_load_has_its_kind_by_errno() -> None:
    assert LoadFailure.of(FileNotFoundError(errno.ENOENT, "No such file or directory")) is LoadFailure.MISSING
    assert LoadFailure.of(PermissionError(errno.EACCES, "Permission denied")) is LoadFailure.DENIED
    assert LoadFailure.of(OSError(errno.EIO, "Input/output error")) is LoadFailure.OTHER
    assert LoadFailure.of(ModelLoadError("x.gguf: no kind given")) is LoadFailure.OTHER
