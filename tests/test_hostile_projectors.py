"""Hostile vision projectors (adversarial review 3, F4: PJ-01…PJ-11): one line, never an abort.

A projector's numbers reach ggml, which asserts (aborts the process) where they disagree with
its tensors: a short position table (PJ-08) or a NaN epsilon (PJ-10) killed `ember chat` at the
first picture, and one request killed `ember serve` (PJ-11). The header is checked first
(`models.gguf.projector_check`); what it cannot show is probed in a child once per file
(`engine.llama.projector_probe`). Files are written small with the `gguf` package.
"""

from __future__ import annotations

import base64
import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from models.errors import GGUFError
from models.gguf.header import read_header
from models.gguf.projector import read_projector
from models.gguf.projector_check import projector_problem
from models.library.projectors import pair
from tests import gguf_factory as gf
from tests.projector_fixture import png, write_projector_fixture

# The review's projectors (its scripts/mkproj.py), by the knobs of the fixture writer.
HOSTILE: dict[str, tuple[dict[str, Any], str]] = {
    "PJ-02 image size 0": ({"image_size": 0, "pos_rows": 5}, "image size 0 is not 1 to 8192 pixels"),
    "PJ-03 patch size 0": ({"patch": 0, "pos_rows": 5}, "patch size 0 is not 1 to the image size"),
    "PJ-04 a million pixels a side": ({"image_size": 1_000_000, "pos_rows": 5}, "image size 1000000 is not"),
    "PJ-05 no heads": ({"heads": 0}, "attention head count 0 is not a positive number"),
    "PJ-06 blocks missing": (
        {"blocks": 64, "blocks_written": 1},
        "states 64 encoder blocks but holds no tensors for block 1",
    ),
    "PJ-07 unknown type": ({"kind": "nonexistent"}, "projector type 'nonexistent' is not one llama.cpp knows"),
    "PJ-08 short position table": ({"pos_rows": 2}, "position table has 2 rows; its 4 patches need 5"),
    "PJ-09 heads not dividing": ({"heads": 7}, "7 attention heads do not divide its width (32)"),
    "PJ-10 NaN epsilon": ({"eps": float("nan")}, "layer-norm epsilon nan is not a finite number ≥ 0"),
    "negative epsilon": ({"eps": -1.0}, "layer-norm epsilon -1.0 is not a finite number ≥ 0"),
}


def _problem(tmp_path: Path, **knobs: Any) -> str | None:
    return projector_problem(read_header(write_projector_fixture(tmp_path / "mmproj-x.gguf", **knobs)))


def test_the_fixture_projector_is_sound(tmp_path: Path) -> None:
    assert _problem(tmp_path) is None


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_projector_header_is_refused_in_one_line(tmp_path: Path, case: str) -> None:
    knobs, expected = HOSTILE[case]
    problem = _problem(tmp_path, **knobs)
    assert problem is not None and "\n" not in problem and len(problem) < 200
    assert expected in problem


def test_a_graph_the_checks_do_not_model_is_left_to_the_probe(tmp_path: Path) -> None:
    """Shapes are judged only for the standard ViT types; a merger's own layout is not guessed at."""
    assert _problem(tmp_path, kind="qwen2vl_merger", heads=7, pos_rows=2) is None
    assert _problem(tmp_path, kind="qwen2vl_merger", eps=float("nan")) is not None  # every graph normalises


def test_a_patch_kernel_that_disagrees_with_the_header_is_refused(tmp_path: Path) -> None:
    header = read_header(write_projector_fixture(tmp_path / "mmproj-x.gguf"))
    # the header says 7-pixel patches of 14-pixel pictures (4 patches: the table's 5 rows fit); the kernel is 14×14
    lying = replace(header, kv={**header.kv, "clip.vision.patch_size": 7, "clip.vision.image_size": 14})
    assert projector_problem(lying) == "its patch kernel is 14×14→32, its header says 7×7→32"


def test_a_sibling_that_would_abort_is_passed_over_and_named(tmp_path: Path) -> None:
    model = gf.write_tiny_llama(tmp_path / "tiny-Q8_0.gguf", n_embd=576)
    write_projector_fixture(tmp_path / "mmproj-tiny-f16.gguf", pos_rows=2)
    pairing = pair(model, 576)
    assert pairing.projector is None
    assert pairing.refused == ("mmproj-tiny-f16.gguf is refused: its position table has 2 rows; its 4 patches need 5")


def test_a_chosen_projector_that_would_abort_is_refused_in_one_line(tmp_path: Path) -> None:
    model = gf.write_tiny_llama(tmp_path / "tiny.gguf", n_embd=576)
    chosen = write_projector_fixture(tmp_path / "elsewhere.gguf", eps=float("nan"))
    with pytest.raises(GGUFError, match=r"elsewhere.gguf is refused: its layer-norm epsilon nan"):
        pair(model, 576, chosen)


def test_the_refusal_is_read_with_the_metadata(tmp_path: Path) -> None:
    info = read_projector(write_projector_fixture(tmp_path / "mmproj-x.gguf", kind="nonexistent"))
    assert info.problem == "its projector type 'nonexistent' is not one llama.cpp knows"


# -- the probe: a first encode in a child, once per file ------------------------------------------


@pytest.mark.parametrize(
    ("returncode", "refused", "cached"),
    [(-6, True, True), (0, False, True), (3, False, True), (124, False, True), (None, False, False)],
    ids=["SIGABRT", "encoded", "clip refused it itself", "timed out", "could not start"],
)
def test_how_the_probe_child_ended_decides_and_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, returncode: int | None, refused: bool, cached: bool
) -> None:
    """Only a child killed by a signal refuses; every ending but a failed start is remembered."""
    import subprocess

    from engine.llama import cpu, machine_cache, projector_probe

    monkeypatch.setenv(machine_cache.CACHE_ENV, str(tmp_path / "cache"))
    ended = None if returncode is None else subprocess.CompletedProcess(["x"], returncode, "", "clip: bad")
    monkeypatch.setattr(cpu, "run", lambda *_a, **_k: ended)
    projector = write_projector_fixture(tmp_path / "mmproj-x.gguf")
    verdict = projector_probe.check_projector(tmp_path / "model.gguf", projector)
    assert (verdict is not None) == refused
    if verdict is not None:
        assert verdict == (
            "mmproj-x.gguf is refused: llama.cpp died of SIGABRT encoding a first picture "
            "with it (a damaged or hostile projector)"
        )
    assert (tmp_path / "cache" / projector_probe.CACHE_FILE).exists() == cached


@pytest.mark.slow
def test_the_probe_passes_a_sound_projector_once_and_reads_its_cache_after(
    tmp_path: Path, smollm_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engine.llama import cpu, machine_cache, projector_probe

    monkeypatch.setenv(machine_cache.CACHE_ENV, str(tmp_path / "cache"))
    projector = write_projector_fixture(tmp_path / "mmproj-ok.gguf")
    assert projector_probe.check_projector(smollm_path, projector) is None
    cached = json.loads((tmp_path / "cache" / projector_probe.CACHE_FILE).read_text())
    assert list(cached.values()) == [""]

    def no_child(*_args: Any, **_kw: Any) -> None:
        raise AssertionError("probed twice")

    monkeypatch.setattr(cpu, "run", no_child)
    copy = tmp_path / "elsewhere" / "mmproj-copy.gguf"  # the same file elsewhere: the same verdict
    copy.parent.mkdir()
    copy.write_bytes(projector.read_bytes())
    assert projector_probe.check_projector(smollm_path, copy) is None


@pytest.mark.slow
def test_the_probe_catches_an_abort_the_header_checks_would_miss(
    tmp_path: Path, smollm_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engine.llama import cpu, machine_cache, projector_probe

    monkeypatch.setenv(machine_cache.CACHE_ENV, str(tmp_path / "cache"))
    # PJ-08 handed straight to the probe (past the header checks): ggml's GGML_ASSERT kills the child only
    projector = write_projector_fixture(tmp_path / "mmproj-short.gguf", pos_rows=2)
    refused = projector_probe.check_projector(smollm_path, projector)
    assert refused is not None and "\n" not in refused
    assert refused.startswith("mmproj-short.gguf is refused: llama.cpp died of SIGABRT encoding a first picture")
    monkeypatch.setattr(cpu, "run", lambda *_a, **_k: None)  # cached: no second child
    assert projector_probe.check_projector(smollm_path, projector) == refused


@pytest.mark.slow
@pytest.mark.parametrize("knobs", [{"pos_rows": 2}, {"eps": float("nan")}], ids=["PJ-08", "PJ-10"])
def test_ember_chat_with_a_hostile_projector_beside_the_model_ends_in_one_line(
    tmp_path: Path, ember_home: Path, smollm_path: Path, knobs: dict[str, Any]
) -> None:
    from tests.test_cli_chat import ember

    folder = tmp_path / "models"
    folder.mkdir()
    os.symlink(smollm_path, folder / "SmolLM2-135M-Instruct.Q4_1.gguf")
    write_projector_fixture(folder / "mmproj-SmolLM2-135M-Instruct-f16.gguf", **knobs)
    picture = tmp_path / "ok.png"
    picture.write_bytes(png(28, 28))
    model = str(folder / "SmolLM2-135M-Instruct.Q4_1.gguf")
    result = ember("chat", "--model", model, "--image", str(picture), "--max-tokens", "3", "x", home=ember_home)
    assert result.returncode == 3, result.stderr  # a refusal, not SIGABRT (-6 / 134)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "mmproj-SmolLM2-135M-Instruct-f16.gguf is refused" in lines[0]
    assert "GGML_ASSERT" not in result.stderr


@pytest.mark.slow
def test_ember_serve_answers_a_picture_for_a_hostile_projector_with_a_400_and_lives_on(
    tmp_path: Path, smollm_path: Path
) -> None:
    """PJ-11: one chat request carrying a picture killed `ember serve` (exit 134)."""
    import httpx
    from serve_helpers import serve

    from engine.llama.llama import LlamaBackend

    folder = tmp_path / "models"
    folder.mkdir()
    os.symlink(smollm_path, folder / "SmolLM2-135M-Instruct.Q4_1.gguf")
    write_projector_fixture(folder / "mmproj-SmolLM2-135M-Instruct-f16.gguf", eps=float("nan"))
    s = serve(LlamaBackend(folder / "SmolLM2-135M-Instruct.Q4_1.gguf", n_ctx=512, n_threads=1))
    try:
        picture = "data:image/png;base64," + base64.b64encode(png(28, 28)).decode()
        content = [{"type": "text", "text": "what is it"}, {"type": "image_url", "image_url": {"url": picture}}]
        body = {"model": "m", "max_tokens": 3, "messages": [{"role": "user", "content": content}]}
        response = httpx.post(f"{s.url}/chat/completions", json=body, timeout=120)
        assert response.status_code == 400, response.text
        message = response.json()["error"]["message"]
        assert "mmproj-SmolLM2-135M-Instruct-f16.gguf is refused: its layer-norm epsilon nan" in message
        assert "\n" not in message
        plain = {"model": "m", "max_tokens": 3, "messages": [{"role": "user", "content": "hi"}]}
        assert httpx.post(f"{s.url}/chat/completions", json=plain, timeout=120).status_code == 200
    finally:
        s.close()
