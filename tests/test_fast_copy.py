"""The built-in model's fast copy and `ember models optimize` (issue #41).

The quality gate and the record are real: real llama.cpp quantization, real next-token
distributions (a tiny synthetic model, or the real built-in one under `slow`), a real
SHA-256 over the copy. Speeds are reported, never asserted.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import time
from pathlib import Path

import pytest

import engine.backends.llama_first  # noqa: F401  # pyright: ignore[reportUnusedImport]
from desktop.cli.main import main
from engine.backends import builtin_convert, llama_log, optimize_file, quant_quality, requantize
from models.gguf.meta import read_metadata
from models.library import fast_builtin
from models.library.default_model import default_model_path, shipped_model_path
from models.library.paths import ember_paths
from tests import gguf_factory as gf


def _tiny(tmp_path: Path, ftype: int, name: str) -> Path:
    """A tiny llama (random F32 weights) quantized by llama.cpp itself into `ftype`."""
    import llama_cpp as lc

    llama_log.install()  # llama.cpp's listing into the log, not the captured stderr
    folder = tmp_path / "models"  # beside EMBER_HOME, which the suite keeps in tmp_path too
    folder.mkdir(exist_ok=True)
    source = gf.write_tiny_llama(folder / "tiny.F32.gguf", n_embd=64, n_ff=128)
    params = lc.llama_model_quantize_default_params()
    params.ftype = ftype
    target = folder / name
    assert lc.llama_model_quantize(str(source).encode(), str(target).encode(), ctypes.pointer(params)) == 0
    return target


# -- the record: used only while its SHA-256 holds -------------------------------------------


def _fake_copy(data: bytes = b"GGUF fast copy") -> Path:
    folder = fast_builtin.folder()
    folder.mkdir(parents=True, exist_ok=True)
    copy = folder / "SmolLM2-135M-Instruct.Q4_0.gguf"
    copy.write_bytes(data)
    import hashlib

    fast_builtin.write_record(
        {
            "source": fast_builtin.source_stamp(shipped_model_path()),
            "verdict": fast_builtin.CONVERTED,
            "format": "Q4_0",
            "file": copy.name,
            "sha256": hashlib.sha256(data).hexdigest(),
        }
    )
    return copy


def test_the_shipped_file_serves_until_a_copy_is_recorded() -> None:
    assert default_model_path() == shipped_model_path()
    assert fast_builtin.needs_conversion(shipped_model_path())


def test_a_verified_copy_is_used_from_then_on() -> None:
    copy = _fake_copy()
    assert default_model_path() == copy
    assert not fast_builtin.needs_conversion(shipped_model_path())


def test_a_corrupt_copy_is_ignored_and_converted_again() -> None:
    copy = _fake_copy()
    time.sleep(0.01)
    copy.write_bytes(b"GGUF fast copy, bit-flipped")  # a new size and time: hashed again
    assert default_model_path() == shipped_model_path()
    assert fast_builtin.needs_conversion(shipped_model_path())


def test_a_record_naming_a_path_outside_its_folder_is_refused() -> None:
    _fake_copy()
    record = fast_builtin.read_record()
    assert record is not None
    fast_builtin.write_record({**record, "file": "../../elsewhere.gguf"})
    assert default_model_path() == shipped_model_path()


def test_a_kept_verdict_stands_for_the_same_shipped_file() -> None:
    fast_builtin.write_record(
        {"source": fast_builtin.source_stamp(shipped_model_path()), "verdict": fast_builtin.KEPT, "format": None}
    )
    assert not fast_builtin.needs_conversion(shipped_model_path())
    assert default_model_path() == shipped_model_path()


# -- the background conversion never holds up a start -----------------------------------------


def test_the_switch_and_a_standing_verdict_start_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    assert builtin_convert.start_in_background() is None  # the suite turns it off (conftest)
    monkeypatch.setenv(builtin_convert.SWITCH, "1")
    fast_builtin.write_record({"source": fast_builtin.source_stamp(shipped_model_path()), "verdict": fast_builtin.KEPT})
    assert builtin_convert.start_in_background() is None


@pytest.mark.timeout(60)
@pytest.mark.slow  # starts a process or uses the real model (tests/slow_marks.py)
def test_the_conversion_runs_beside_a_first_start_that_does_not_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(builtin_convert.SWITCH, "1")
    started = time.perf_counter()
    child = builtin_convert.start_in_background()
    returned = time.perf_counter() - started
    assert child is not None
    try:
        assert returned < 10  # a hang guard: the start returns at once, the child works on
        assert child.poll() is None
        assert default_model_path() == shipped_model_path()  # the shipped file serves meanwhile
        lock = fast_builtin.folder() / builtin_convert.LOCK
        assert lock.read_text() == str(child.pid)
        second = builtin_convert.start_in_background()
        if second is not None:  # a second conversion would be a bug: end it before failing
            os.killpg(second.pid, signal.SIGKILL)
            second.wait(10)
        assert second is None  # one conversion at a time (the lock)
    finally:
        os.killpg(child.pid, signal.SIGKILL)  # our own child's session, by its id
        child.wait(10)


# -- ember models optimize --------------------------------------------------------------------


def test_optimize_refuses_a_file_already_fast_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = _tiny(tmp_path, 2, "tiny.Q4_0.gguf")
    assert read_metadata(model).quantization == "Q4_0"
    assert main(["models", "optimize", str(model)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["ember: models optimize: tiny.Q4_0.gguf: already Q4_0, a format with fast kernels on this CPU"]
    assert sorted(p.name for p in model.parent.iterdir()) == ["tiny.F32.gguf", "tiny.Q4_0.gguf"]


@pytest.mark.slow  # starts a process or uses the real model (tests/slow_marks.py)
def test_optimize_writes_a_copy_beside_a_slow_file_with_its_quality_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    model = _tiny(tmp_path, 3, "tiny.Q4_1.gguf")
    assert read_metadata(model).quantization == "Q4_1"
    assert optimize_file.offer_text(read_metadata(model)) is not None
    status = main(["models", "--json", "--quality-tokens", "600", "optimize", str(model)])
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(report["candidates"]) == {"Q4_0", "Q8_0"}
    for figures in report["candidates"].values():
        assert 0 <= figures["top1_agreement"] <= 1 and figures["ppl_ratio"] > 0 and figures["tokens"] > 500
    written = sorted(p.name for p in model.parent.iterdir() if p.name not in ("tiny.F32.gguf", "tiny.Q4_1.gguf"))
    if status == 0:  # a copy kept: the winner, checked, and nothing else left behind
        assert written == [Path(report["path"]).name] and report["format"] in ("Q4_0", "Q8_0")
        assert read_metadata(Path(report["path"])).quantization == report["format"]
    else:  # none kept: the report says why and no file is left
        assert status == 1 and written == [] and report["path"] is None and report["reason"]
    assert main(["models", "optimize", str(tmp_path / "missing.gguf")]) == 2


def test_a_copy_never_replaces_a_file_already_there(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = _tiny(tmp_path, 3, "tiny.Q4_1.gguf")
    (model.parent / "tiny.Q4_0.gguf").write_bytes(b"the user's own")
    assert main(["models", "optimize", str(model)]) == 2
    assert "tiny.Q4_0.gguf exists already" in capsys.readouterr().err
    assert (model.parent / "tiny.Q4_0.gguf").read_bytes() == b"the user's own"


def test_copy_names_and_offer_text() -> None:
    assert (
        optimize_file.copy_path(Path("/m/SmolLM2-135M-Instruct.Q4_1.gguf"), "Q4_0").name
        == "SmolLM2-135M-Instruct.Q4_0.gguf"
    )
    assert optimize_file.copy_path(Path("/m/model-q5_1.gguf"), "Q8_0").name == "model-Q8_0.gguf"
    assert optimize_file.copy_path(Path("/m/plain.gguf"), "Q4_0").name == "plain.Q4_0.gguf"
    meta = read_metadata(shipped_model_path())
    text = optimize_file.offer_text(meta)
    assert text is not None and text.startswith("This file's format is slow on this CPU: make a faster copy (about ")
    assert requantize.is_fast("Q4_0") and not requantize.is_fast("Q4_1")


# -- the real built-in model -------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_builtin_model_converts_and_its_quality_is_measured(tmp_path: Path) -> None:
    shipped = shipped_model_path()
    copy = tmp_path / "smol.Q4_0.gguf"
    requantize.requantize(shipped, copy, "Q4_0", threads=2)
    assert read_metadata(copy).quantization == "Q4_0"
    same = quant_quality.compare(shipped, shipped, 2, max_tokens=128)
    assert (same.top1_agreement, same.ppl_ratio) == (1.0, 1.0) and same.mean_kl < 1e-6
    other = quant_quality.compare(shipped, copy, 2, max_tokens=128)
    assert other.mean_kl > 0 and other.tokens == 128  # each text token predicted once (after BOS)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_convert_writes_a_record_the_next_start_follows() -> None:
    record = builtin_convert.convert(shipped_model_path(), ember_paths(), threads=2, max_tokens=128)
    assert set(record["candidates"]) == {"Q4_0", "Q8_0"}
    if record["verdict"] == fast_builtin.CONVERTED:
        assert default_model_path().name == record["file"]
    else:
        assert default_model_path() == shipped_model_path() and record["reason"].startswith("no copy kept")
    assert not fast_builtin.needs_conversion(shipped_model_path())
