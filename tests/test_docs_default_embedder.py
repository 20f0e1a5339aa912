"""The default embedder: all-MiniLM-L6-v2 from its wheel, converted to llama.cpp's BERT GGUF by Ember."""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from engine.cancel import CancelToken
from engine.docs.embed import (
    DEFAULT_EMBEDDER,
    LlamaEmbedder,
    chat_model_warning,
    embed_in_groups,
    embedder_kind,
    resolve_embedder,
    shared_embedder,
)
from engine.errors import Cancelled, ModelLoadError
from models.library import default_embedder
from models.library.bert_gguf import phantom

REFERENCE = Path(__file__).parent / "data" / "minilm_reference.json"


@pytest.fixture(scope="module")
def minilm() -> LlamaEmbedder:
    return shared_embedder(DEFAULT_EMBEDDER)


@pytest.mark.slow  # loads the real model (tests/slow_marks.py)
def test_the_vectors_match_sentence_transformers(minilm: LlamaEmbedder) -> None:
    # The reference rows were computed once by sentence-transformers itself (SentenceTransformer.encode,
    # normalize_embeddings=True) on the wheel's own files; the test needs neither it nor torch.
    ref = json.loads(REFERENCE.read_text())
    got = minilm.embed(ref["sentences"])
    cosines = np.einsum("ij,ij->i", got, np.asarray(ref["vectors"], dtype=np.float32))
    assert cosines.min() >= 0.99, cosines


@pytest.mark.slow  # loads the real model (tests/slow_marks.py)
def test_it_is_an_encoder_with_the_wordpiece_vocabulary(minilm: LlamaEmbedder) -> None:
    kind = embedder_kind(Path(minilm.name))
    assert (kind.encoder, kind.context, kind.architecture) == (True, 512, "bert")
    assert minilm.max_tokens == 256  # its window (sentence-transformers cuts at 256), not its 512 positions
    assert minilm.llama.tokenize(b"Hello world, unbelievable") == [101, 7592, 2088, 1010, 23653, 102]  # type: ignore[attr-defined]
    assert (phantom("##ing", False), phantom("word", False), phantom("[CLS]", True)) == ("ing", "\u2581word", "[CLS]")
    # A passage far longer than the model's 512 positions is cut, not an error.
    assert minilm.embed(["word " * 3000]).shape == (1, 384)


@pytest.mark.slow  # the real default embedder
def test_a_chat_model_as_embedder_is_warned_about(smollm_path: Path, minilm: LlamaEmbedder) -> None:
    warning = chat_model_warning(smollm_path)
    assert warning is not None and "chat model" in warning and "slow" in warning
    assert chat_model_warning(Path(minilm.name)) is None


@pytest.mark.slow
def test_the_converted_file_is_checked_and_made_again_when_corrupt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "embedders" / "minilm.gguf"
    monkeypatch.setenv("EMBER_DEFAULT_EMBEDDER", str(target))
    path = default_embedder.default_embedder_path()
    good = default_embedder.sha256(path)
    assert default_embedder.content_sha256(path) == default_embedder.CONTENT_SHA256
    assert default_embedder.record_path(path).read_text().split()[0] == good  # what this install wrote
    with path.open("r+b") as f:  # a flipped byte in the middle of a weight
        f.seek(path.stat().st_size // 2)
        f.write(b"\x00\x01\x02\x03")
    assert default_embedder.default_embedder_path() == path and default_embedder.sha256(path) == good
    default_embedder.record_path(path).unlink()  # an older Ember's file, with no record: made again
    made = path.stat().st_mtime_ns
    assert default_embedder.default_embedder_path() == path and path.stat().st_mtime_ns != made
    assert not list(target.parent.glob("*.part"))


@pytest.mark.slow
def test_another_gguf_layout_of_the_same_model_is_accepted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Another gguf version may write the header differently (keys added, reordered, padded): the
    # bytes change, the content does not, and the file is accepted and recorded as written.
    from models.library import bert_gguf

    reference = _reference_sha(tmp_path)
    plain = bert_gguf._hyperparameters  # pyright: ignore[reportPrivateUsage]

    def with_an_extra_key(writer, config, pooling):  # type: ignore[no-untyped-def]
        writer.add_string("general.description", "written by another gguf version")
        plain(writer, config, pooling)

    monkeypatch.setattr(bert_gguf, "_hyperparameters", with_an_extra_key)
    monkeypatch.setenv("EMBER_DEFAULT_EMBEDDER", str(tmp_path / "minilm.gguf"))
    path = default_embedder.default_embedder_path()
    assert default_embedder.sha256(path) != reference  # other bytes…
    assert default_embedder.content_sha256(path) == default_embedder.CONTENT_SHA256  # …the same model
    assert default_embedder.default_embedder_path() == path  # and its record holds on the next use


def _reference_sha(tmp_path: Path) -> str:
    plain = tmp_path / "plain" / "minilm.gguf"
    from models.library import bert_gguf

    plain.parent.mkdir()
    bert_gguf.convert(default_embedder._members(default_embedder.archive_path()), plain)  # pyright: ignore[reportPrivateUsage]
    return default_embedder.sha256(plain)


@pytest.mark.slow
def test_a_conversion_that_does_not_match_is_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EMBER_DEFAULT_EMBEDDER", str(tmp_path / "minilm.gguf"))
    with pytest.raises(default_embedder.DefaultEmbedderMissing) as info:
        default_embedder.default_embedder_path(expected="0" * 64)
    assert "\n" not in str(info.value) and "unexpected weights" in str(info.value)
    assert not list(tmp_path.iterdir())  # neither the file, its record nor a partial one is left


def test_a_converter_that_cannot_be_imported_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The frozen app once left `gguf` out: the ModuleNotFoundError escaped as a traceback.
    monkeypatch.setenv("EMBER_DEFAULT_EMBEDDER", str(tmp_path / "minilm.gguf"))
    monkeypatch.setitem(sys.modules, "gguf", None)  # `import gguf` raises ModuleNotFoundError
    with pytest.raises(ModelLoadError) as info:
        resolve_embedder(DEFAULT_EMBEDDER)
    assert str(info.value).startswith("cannot prepare the default embedding model: the gguf package is missing")
    assert "\n" not in str(info.value) and not list(tmp_path.iterdir())


def test_any_conversion_failure_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from models.library import bert_gguf

    def broken(files: object, out: Path) -> None:
        out.write_bytes(b"GGUF half")
        raise RuntimeError("the disk went away\nand took a second line with it")

    monkeypatch.setattr(bert_gguf, "convert", broken)
    monkeypatch.setenv("EMBER_DEFAULT_EMBEDDER", str(tmp_path / "minilm.gguf"))
    with pytest.raises(default_embedder.DefaultEmbedderMissing) as info:
        default_embedder.default_embedder_path()
    assert str(info.value) == (
        "cannot prepare the default embedding model: the disk went away and took a second line with it"
    )
    assert not list(tmp_path.iterdir())


def test_a_missing_or_broken_archive_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBER_DEFAULT_EMBEDDER", str(tmp_path / "minilm.gguf"))
    broken = tmp_path / "model.zip"
    broken.write_bytes(b"PK\x03\x04 not really a zip")
    monkeypatch.setenv("EMBER_DEFAULT_EMBEDDER_ZIP", str(broken))
    with pytest.raises(ModelLoadError) as info:
        LlamaEmbedder.load(resolve_embedder(DEFAULT_EMBEDDER))
    assert "\n" not in str(info.value) and "default embedding model" in str(info.value)


@pytest.mark.slow  # the real default embedder
def test_cancel_is_seen_between_groups_within_a_second(minilm: LlamaEmbedder) -> None:
    texts = ["A passage about a subject of some length, with several words in it. " * 12] * 400
    stop = CancelToken()
    threading.Timer(0.3, stop.cancel).start()
    started = time.monotonic()
    with pytest.raises(Cancelled):
        embed_in_groups(minilm, texts, stop)
    assert time.monotonic() - started - 0.3 < 30  # against a hang only: a group of 2 takes under a second


@pytest.mark.slow  # the real default embedder
def test_the_shared_embedder_is_loaded_once(minilm: LlamaEmbedder) -> None:
    assert shared_embedder(DEFAULT_EMBEDDER) is minilm
