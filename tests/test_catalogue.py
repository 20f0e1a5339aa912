"""The shipped model catalogue and its "fits this machine" marks (issue #34), with faked free memory."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from models.formats import BY_KEY
from models.library.catalogue import (
    CATALOGUE_FILE,
    CatalogueError,
    parse_catalogue,
    parse_entry,
    read_catalogue,
    search,
    shipped_catalogue,
)
from models.library.fit import Fit, FreeMemory, estimate_need, fit_file, ranked, short_list, suggest
from models.library.memory import compute_buffer_bytes

GB = 1_000_000_000
ROOT = Path(__file__).resolve().parents[1]


def entry(key: str):  # type: ignore[no-untyped-def]
    return next(e for e in shipped_catalogue() if e.key == key)


# --- the list itself ----------------------------------------------------------------------


def test_the_shipped_catalogue_spans_small_to_14b_and_every_entry_names_its_sources() -> None:
    entries = shipped_catalogue()
    assert 15 <= len(entries) <= 20
    sizes = [e.parameters_b for e in entries]
    assert min(sizes) < 0.5 and max(sizes) >= 14
    for e in entries:
        assert e.checked_against, e.key
        assert e.tool_calls is None or e.tool_calls in BY_KEY
        assert e.licence_url.startswith("https://") and e.page_url == f"https://huggingface.co/{e.repo}"
        assert all(f.name.endswith(".gguf") and f.size > 50_000_000 for f in e.files)
        assert e.context_length >= 8192
    assert {e.key for e in entries if e.thinks} >= {"qwen3-4b", "deepseek-r1-distill-qwen-7b"}


def test_docs_catalogue_lists_every_entry_with_what_it_was_checked_against() -> None:
    doc = (ROOT / "docs" / "catalogue.md").read_text(encoding="utf-8")
    for e in shipped_catalogue():
        assert f"`{e.key}`" in doc, e.key
        assert e.repo in doc, e.repo


def test_the_wheel_and_the_frozen_app_carry_the_catalogue() -> None:
    spec = (ROOT / "packaging" / "ember.spec").read_text(encoding="utf-8")
    assert "catalogue.json" in spec
    assert CATALOGUE_FILE.parent == ROOT / "models" / "library"  # inside the package hatch ships


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda d: d.update(version=2), "not a version 1 catalogue"),
        (lambda d: d["models"][0].update(tool_calls="smoke-signals"), "not in models.formats"),
        (lambda d: d["models"][0].update(files=[]), "'files' is missing or empty"),
        (lambda d: d["models"][0].update(checked_against=[]), "no source it was checked against"),
        (lambda d: d["models"][0]["files"][0].update(name="../evil.bin"), "is not a .gguf file name"),
        (lambda d: d["models"][0].update(repo="no-owner"), "is not owner/name"),
        (lambda d: d["models"][1].update(key=d["models"][0]["key"]), "two entries share a key"),
        (lambda d: d["models"][0].update(thinks="yes"), "'thinks' is missing or not a bool"),
        (lambda d: d["models"][0].update(projector={"file": "m.bin", "size": 9}), "not an mmproj*.gguf file name"),
        (lambda d: d["models"][0].update(projector={"file": "mmproj-x.gguf", "size": 0}), "mmproj-x.gguf has no size"),
        (lambda d: d["models"][0].update(projector="mmproj-x.gguf"), "'projector' is not an object"),
    ],
)
def test_a_damaged_catalogue_is_refused_in_one_line(change, said: str) -> None:  # type: ignore[no-untyped-def]
    data = json.loads(CATALOGUE_FILE.read_text(encoding="utf-8"))
    change(data)
    with pytest.raises(CatalogueError, match=re.escape(said)) as caught:
        parse_catalogue(data)
    assert "\n" not in str(caught.value)


def test_an_unreadable_catalogue_file_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "catalogue.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(CatalogueError, match="the model catalogue cannot be read"):
        read_catalogue(bad)
    with pytest.raises(CatalogueError, match="does not exist"):
        read_catalogue(tmp_path / "missing.json")


def test_search_matches_every_word_offline() -> None:
    entries = shipped_catalogue()
    assert [e.key for e in search(entries, "qwen3 4b")] == ["qwen3-4b"]
    assert {e.key for e in search(entries, "thinking")} == {e.key for e in entries if e.thinks}
    assert search(entries, "  ") == list(entries)
    assert search(entries, "no such model") == []


# --- the estimate ---------------------------------------------------------------------------


def test_the_need_is_weights_plus_kv_at_the_context_plus_compute() -> None:
    qwen = entry("qwen3-4b")
    need = estimate_need(2_500_000_000, 4096, architecture=qwen.architecture)
    assert need.kv_cache == 2 * 36 * 8 * 128 * 2 * 4096  # K and V, f16, every layer
    assert need.compute == compute_buffer_bytes(4096)
    assert need.total == 2_500_000_000 + need.kv_cache + need.compute
    q8 = estimate_need(2_500_000_000, 4096, architecture=qwen.architecture, kv_cache="q8_0")
    assert q8.kv_cache == int(need.kv_cache * 34 / 64)


def test_a_model_without_checked_figures_gets_a_high_guess_from_its_size() -> None:
    guess = estimate_need(9 * GB, 4096, parameters_b=14.7)
    assert guess.kv_cache > 40 * 10 * 128 * 4 * 4096  # phi-4's real need (40 layers, 10 KV heads) is below it


# --- the marks ----------------------------------------------------------------------------


def test_on_a_big_gpu_a_4b_model_runs_on_the_gpu() -> None:
    free = FreeMemory(ram_bytes=64 * GB, gpu_bytes=80 * GB, gpu_name="Test GPU")
    verdict = fit_file(entry("qwen3-4b"), entry("qwen3-4b").default_file, free)
    assert verdict.fit is Fit.GPU and "of the 80.0 GB free on Test GPU" in verdict.reason


def test_without_a_gpu_small_models_run_on_the_cpu_and_big_ones_are_too_big() -> None:
    free = FreeMemory(ram_bytes=8 * GB)
    small = fit_file(entry("qwen3-4b"), entry("qwen3-4b").default_file, free)
    assert small.fit is Fit.CPU and "of the 8.0 GB free memory" in small.reason
    big = fit_file(entry("phi-4"), entry("phi-4").default_file, free)
    assert big.fit is Fit.TOO_BIG and "only 8.0 GB is free" in big.reason and not big.fits


def test_a_small_gpu_takes_part_of_a_7b_model() -> None:
    free = FreeMemory(ram_bytes=16 * GB, gpu_bytes=4 * GB, gpu_name="Small GPU")
    verdict = fit_file(entry("qwen2.5-7b-instruct"), entry("qwen2.5-7b-instruct").default_file, free)
    assert verdict.fit is Fit.PARTIAL
    assert re.search(r"about \d+% of it fits on Small GPU", verdict.reason)


def test_a_model_too_big_for_the_gpu_and_memory_together_is_too_big() -> None:
    free = FreeMemory(ram_bytes=2 * GB, gpu_bytes=4 * GB)
    assert fit_file(entry("phi-4"), entry("phi-4").files[-1], free).fit is Fit.TOO_BIG


def test_unknown_free_memory_says_so() -> None:
    verdict = fit_file(entry("qwen3-4b"), entry("qwen3-4b").default_file, FreeMemory(None))
    assert verdict.fit is Fit.CPU and "unknown" in verdict.reason


def test_the_default_list_is_what_fits_best_first() -> None:
    entries = shipped_catalogue()
    roomy = short_list(ranked(entries, FreeMemory(ram_bytes=64 * GB, gpu_bytes=80 * GB)))
    assert [s.entry.key for s in roomy][:2] == ["phi-4", "qwen3-8b"]  # the best, all on the GPU
    assert all(s.verdict.fit is Fit.GPU for s in roomy)
    tight = short_list(ranked(entries, FreeMemory(ram_bytes=3 * GB)))
    assert tight and all(s.verdict.fit is Fit.CPU for s in tight)
    assert all(s.verdict.need.total <= 3 * GB for s in tight)
    qualities = [s.entry.quality for s in tight]
    assert qualities == sorted(qualities, reverse=True)
    assert "qwen3-8b" not in {s.entry.key for s in tight}


def test_an_entry_offers_its_default_file_unless_another_runs_better() -> None:
    raw = json.loads(CATALOGUE_FILE.read_text(encoding="utf-8"))["models"][7]  # Qwen3 4B, default Q4_K_M first
    raw["files"] = list(reversed(raw["files"]))  # now the Q8_0 file is the default
    qwen = parse_entry(raw, 0)
    roomy = suggest(qwen, FreeMemory(ram_bytes=64 * GB, gpu_bytes=80 * GB))
    assert roomy.file == qwen.default_file and roomy.verdict.fit is Fit.GPU
    # Room on the GPU for the small file only: the small file is offered, on the GPU.
    small_gpu = suggest(qwen, FreeMemory(ram_bytes=64 * GB, gpu_bytes=int(4.6 * GB)))
    assert small_gpu.verdict.fit is Fit.GPU and small_gpu.file.quant == "Q4_K_M"
    assert fit_file(qwen, qwen.default_file, FreeMemory(ram_bytes=64 * GB, gpu_bytes=int(4.6 * GB))).fit is Fit.PARTIAL


def test_on_the_cpu_a_slow_big_model_comes_after_the_useful_ones() -> None:
    order = [s.entry.key for s in ranked(shipped_catalogue(), FreeMemory(ram_bytes=16 * GB))]
    assert order.index("qwen3-4b") < order.index("qwen3-8b")  # its only files are over 6 GB


def test_vision_entries_name_their_projector_and_say_so() -> None:
    entries = {e.key: e for e in shipped_catalogue()}
    smolvlm, gemma = entries["smolvlm-500m-instruct"], entries["gemma-3-4b-it"]
    assert smolvlm.vision and smolvlm.projector is not None
    assert smolvlm.projector.name == "mmproj-SmolVLM-500M-Instruct-Q8_0.gguf"
    assert gemma.projector is not None and gemma.projector.name == "mmproj-model-f16.gguf"
    assert not entries["qwen3-4b"].vision and entries["qwen3-4b"].projector is None
    assert [e.key for e in search(shipped_catalogue(), "vision")] == ["gemma-3-4b-it", "smolvlm-500m-instruct"]
    # the sources say where the projector's name was seen
    assert any("mmproj" in source for source in smolvlm.checked_against + gemma.checked_against)
