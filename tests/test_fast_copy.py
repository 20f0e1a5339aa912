"""The built-in model's fast copy and `ember models optimize` (issue #41).

The quality gate and the record are real: real llama.cpp quantization, real next-token
distributions (a tiny synthetic model, or the real built-in one under `slow`), a real
SHA-256 over the copy. Speeds are reported, never asserted.
"""

from __future__ import annotations

import ctypes
import json
from pathlib import Path

import pytest

import engine.llama.llama_first  # noqa: F401  # pyright: ignore[reportUnusedImport]
from desktop.cli.main import main
from engine.llama import llama_log
from engine.rewrite import fast_copy, optimize_file, quant_quality, requantize
from models.gguf.meta import read_metadata
from models.library.default_model import default_model_path, shipped_model_path
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


# -- no first-start conversion (issue #48) ---------------------------------------------------


def test_the_builtin_model_is_the_shipped_file_and_optimize_refuses_it_with_the_shipped_verdict(
    capsys: pytest.CaptureFixture[str],
) -> None:
    shipped = shipped_model_path()
    assert default_model_path() == shipped
    assert optimize_file.offer_text(read_metadata(shipped)) is None  # no offer in the window either
    assert main(["models", "optimize", str(shipped)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "the built-in model stays Q4_1" in err[0] and "Q8_0 top-1 agreement 0.944" in err[0]


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


def test_optimize_of_a_gguf_without_tensors_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """OP-02 (adversarial review 3): llama.cpp refuses to load it; that was a ValueError traceback."""
    kvs = [gf.raw_kv_str("general.architecture", "llama"), gf.raw_kv_u32("general.file_type", 3)]
    (tmp_path / "m").mkdir()
    empty = gf.write_raw(tmp_path / "m" / "empty-Q4_1.gguf", gf.raw_gguf(kvs))
    assert main(["models", "optimize", str(empty)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == "ember: models optimize: empty-Q4_1.gguf: llama.cpp cannot load empty-Q4_1.gguf"
    assert all(line.startswith("ember") for line in err)  # progress lines, then the one error line
    assert sorted(p.name for p in empty.parent.iterdir()) == ["empty-Q4_1.gguf"]


def test_a_candidate_is_compared_under_a_temporary_name_only_the_winner_is_renamed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OP-04: a run killed while comparing left an unchecked copy under its final name."""
    model = _tiny(tmp_path, 3, "tiny.Q4_1.gguf")
    seen: list[tuple[str, bool]] = []

    def compare(source: Path, copy: Path, threads: int, max_tokens: int | None = None) -> quant_quality.Quality:
        final = copy.with_name(copy.name.removesuffix(".unchecked"))
        seen.append((copy.name, final.exists()))
        good = "Q8_0" in copy.name
        return quant_quality.Quality(0.0 if good else 1.0, 1.0 if good else 0.5, 1.0 if good else 2.0, 10)

    monkeypatch.setattr(quant_quality, "compare", compare)
    monkeypatch.setattr(
        quant_quality, "measure_speed", lambda p, t: quant_quality.Speed(2.0 if "Q8_0" in p.name else 1.0, 1.0)
    )
    outcome = optimize_file.optimize(model, 1, lambda _m: None)
    assert seen == [("tiny.Q4_0.gguf.unchecked", False), ("tiny.Q8_0.gguf.unchecked", False)]
    kept = model.parent / "tiny.Q8_0.gguf"
    assert outcome.path == kept and read_metadata(kept).quantization == "Q8_0"
    assert sorted(p.name for p in model.parent.iterdir()) == ["tiny.F32.gguf", "tiny.Q4_1.gguf", "tiny.Q8_0.gguf"]
    assert fast_copy.unchecked(kept).name == "tiny.Q8_0.gguf.unchecked"  # gone: the winner was renamed


def test_copy_names_and_offer_text(tmp_path: Path) -> None:
    assert (
        optimize_file.copy_path(Path("/m/SmolLM2-135M-Instruct.Q4_1.gguf"), "Q4_0").name
        == "SmolLM2-135M-Instruct.Q4_0.gguf"
    )
    assert optimize_file.copy_path(Path("/m/model-q5_1.gguf"), "Q8_0").name == "model-Q8_0.gguf"
    assert optimize_file.copy_path(Path("/m/plain.gguf"), "Q4_0").name == "plain.Q4_0.gguf"
    meta = read_metadata(_tiny(tmp_path, 3, "tiny.Q4_1.gguf"))
    text = optimize_file.offer_text(meta)
    assert text is not None and text.startswith("This file's format is slow on this CPU: make a faster copy (about ")
    assert requantize.is_fast("Q4_0") and not requantize.is_fast("Q4_1")


# -- the real built-in model -------------------------------------------------------------------

# One thread: llama.cpp's threads spin at a barrier, and two on a shared CPU (the other xdist worker)
# were measured ten times slower than one (engine/llama/cpu_threads.py). The figures do not change.
DECODE_THREADS = 1


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_builtin_model_converts_and_its_quality_is_measured(tmp_path: Path) -> None:
    shipped = shipped_model_path()
    copy = tmp_path / "smol.Q4_0.gguf"
    requantize.requantize(shipped, copy, "Q4_0", threads=2)
    assert read_metadata(copy).quantization == "Q4_0"
    same = quant_quality.compare(shipped, shipped, DECODE_THREADS, max_tokens=128)
    assert (same.top1_agreement, same.ppl_ratio) == (1.0, 1.0) and same.mean_kl < 1e-6
    other = quant_quality.compare(shipped, copy, DECODE_THREADS, max_tokens=128)
    assert other.mean_kl > 0 and other.tokens == 128  # each text token predicted once (after BOS)
    # Several copies against one source's distributions, computed once: the same figures.
    assert quant_quality.compare_each(shipped, [shipped, copy], DECODE_THREADS, max_tokens=128) == [same, other]


@pytest.mark.slow
@pytest.mark.timeout(1800)  # the whole fixed text through three models: minutes on a loaded 2-core machine
def test_the_shipped_verdict_is_what_the_pinned_file_measures(tmp_path: Path) -> None:
    shipped = shipped_model_path()
    meta = read_metadata(shipped)
    assert (shipped.name, meta.file_size) == optimize_file.BUILTIN_FILE  # a new wheel needs a new verdict
    copies = [tmp_path / f"smol.{fmt}.gguf" for fmt in optimize_file.BUILTIN_VERDICT]
    for fmt, copy in zip(optimize_file.BUILTIN_VERDICT, copies, strict=True):
        requantize.requantize(shipped, copy, fmt, threads=2)
    measured = quant_quality.compare_each(shipped, copies, DECODE_THREADS)  # the source's side once
    for expected, quality in zip(optimize_file.BUILTIN_VERDICT.values(), measured, strict=True):
        assert not quality.passes()
        assert quality.top1_agreement == pytest.approx(expected["top1_agreement"], abs=0.01)
        assert quality.ppl_ratio == pytest.approx(expected["ppl_ratio"], abs=0.01)
