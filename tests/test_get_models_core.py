"""The "Get models" page's Qt-free side: rows, Hub results, which files a download fetches, words."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hub_fakes import GB, FakeHubFile, FakeHubRepo

from desktop.core.get_models import (
    DownloadChoiceError,
    better_model_line,
    catalogue_offers,
    default_offers,
    files_to_fetch,
    hub_offer,
    measure_free_memory,
    progress_text,
    projector_to_fetch,
    quant_of,
)
from engine.api.downloads import HubFile
from models.library.catalogue import shipped_catalogue
from models.library.fit import Fit, FreeMemory
from models.library.memory import format_bytes


def listing(*names_sizes: tuple[str, int]) -> list[HubFile]:
    return [FakeHubFile("o/r", name, size, None) for name, size in names_sizes]


@pytest.mark.parametrize(
    ("name", "quant"),
    [
        ("Qwen_Qwen3-4B-Q4_K_M.gguf", "Q4_K_M"),
        ("SmolLM2-360M-Instruct.Q6_K.gguf", "Q6_K"),
        ("Phi-4-mini-instruct.Q8_0.gguf", "Q8_0"),
        ("model-IQ4_XS.gguf", "IQ4_XS"),
        ("model-f16.gguf", "F16"),
        ("qwen2.5-7b-instruct-q4_k_m-00001-of-00002.gguf", "Q4_K_M"),
        ("plain.gguf", "?"),
    ],
)
def test_the_quantisation_is_read_from_the_file_name(name: str, quant: str) -> None:
    assert quant_of(name) == quant


def test_a_download_fetches_the_named_file() -> None:
    files = listing(("m-Q4_K_M.gguf", 10), ("m-Q8_0.gguf", 20))
    assert [f.path for f in files_to_fetch(files, "m-Q8_0.gguf")] == ["m-Q8_0.gguf"]


def test_a_split_model_downloads_as_one_item() -> None:
    files = listing(("m-q8_0-00002-of-00002.gguf", 5), ("m-q8_0-00001-of-00002.gguf", 5), ("m-q4_k_m.gguf", 4))
    assert [f.path for f in files_to_fetch(files, "m-q8_0-00001-of-00002.gguf")] == [
        "m-q8_0-00001-of-00002.gguf",
        "m-q8_0-00002-of-00002.gguf",
    ]


def test_a_split_model_the_hub_lists_in_part_is_refused_as_the_pull_refuses_it() -> None:
    files = listing(("m-q8_0-00001-of-00002.gguf", 5), ("m-q4_k_m.gguf", 4))
    with pytest.raises(DownloadChoiceError, match=r"split in 2 files and the Hub lists 1 of them"):
        files_to_fetch(files, "m-q8_0-00001-of-00002.gguf")


def test_a_renamed_file_is_found_by_its_quantisation_else_refused() -> None:
    files = listing(("Qwen_Qwen3-4B-Q4_K_M.gguf", 10), ("Qwen_Qwen3-4B-Q8_0.gguf", 20))
    assert [f.path for f in files_to_fetch(files, "Qwen3-4B-Q4_K_M.gguf")] == ["Qwen_Qwen3-4B-Q4_K_M.gguf"]
    with pytest.raises(DownloadChoiceError, match=r"^Qwen3-4B-Q6_K.gguf is not in the repository any more"):
        files_to_fetch(files, "Qwen3-4B-Q6_K.gguf")


def test_a_hub_result_offers_its_models_not_projectors_nor_later_parts(tmp_path: Path) -> None:
    files = listing(
        ("m-Q8_0.gguf", 8 * GB),
        ("m-Q4_K_M.gguf", 4 * GB),
        ("mmproj-m-f16.gguf", GB),
        ("m-f16-00001-of-00002.gguf", 8 * GB),
        ("m-f16-00002-of-00002.gguf", 7 * GB),
    )
    offer = hub_offer(FakeHubRepo("o/m-GGUF", 1234, 5, False, None), files, FreeMemory(ram_bytes=10 * GB), tmp_path)
    assert offer is not None
    assert [(f.quant, f.size) for f in offer.files] == [("Q4_K_M", 4 * GB), ("Q8_0", 8 * GB), ("F16", 15 * GB)]
    assert offer.default_file.quant == "Q4_K_M" and offer.default_file.verdict.fit is Fit.CPU
    assert offer.files[-1].verdict.fit is Fit.TOO_BIG  # the two parts together
    assert offer.facts == "Hugging Face · 1,234 downloads · 5 likes"
    assert offer.title == "o/m-GGUF"  # the uploader shows: on the Hub it is the first thing to trust
    assert (
        hub_offer(FakeHubRepo("o/x", 1, 1, False, None), listing(("mmproj-x.gguf", 1)), FreeMemory(GB), tmp_path)
        is None
    )
    gated = hub_offer(FakeHubRepo("o/g", 1, 1, True, None), files, FreeMemory(GB), tmp_path)
    assert gated is not None and gated.gated and gated.facts.endswith("gated: needs a Hugging Face token (HF_TOKEN)")


def test_catalogue_rows_come_best_first_and_know_what_is_on_disk(tmp_path: Path) -> None:
    entries = shipped_catalogue()
    qwen = next(e for e in entries if e.key == "qwen3-4b")
    target = tmp_path.joinpath(*qwen.repo.split("/"), qwen.files[1].name)  # where a download lands
    target.parent.mkdir(parents=True)
    target.write_bytes(b"x")  # its Q5_K_M is already downloaded
    offers = catalogue_offers(entries, FreeMemory(ram_bytes=8 * GB), tmp_path)
    assert offers[0].key == "qwen3-4b"
    assert offers[0].downloaded == target and offers[0].default_index == 1
    shown = default_offers(offers)
    assert len(shown) == 5 and all(o.default_file.verdict.fits for o in shown)
    assert "phi-4" not in {o.key for o in shown}


def test_progress_and_the_better_model_line_in_words() -> None:
    assert (
        progress_text(1_200_000_000, 4_700_000_000, 12_300_000, 290)
        == "1.2 GB of 4.7 GB · 12.3 MB/s · about 5 min left"
    )
    assert progress_text(10, 0, 0, None) == "10 B"
    line = better_model_line(shipped_catalogue(), FreeMemory(ram_bytes=8 * GB))
    assert line == "Qwen3 4B, which runs on the CPU here"
    assert better_model_line(shipped_catalogue(), FreeMemory(ram_bytes=100_000_000)) is None


def test_this_machines_free_memory_is_measured_through_llama_cpp() -> None:
    free = measure_free_memory()
    assert free.ram_bytes is not None and free.ram_bytes > 0
    from engine.llama.llama_devices import gpu_devices

    gpus = gpu_devices()
    assert (free.gpu_bytes is None) == (not gpus)  # no GPU in llama.cpp's list: no GPU figure
    assert free.describe().startswith(f"{format_bytes(free.ram_bytes)} free memory")


def test_a_vision_entry_fetches_its_projector_and_counts_as_downloaded_only_with_it(tmp_path: Path) -> None:
    gemma = next(e for e in shipped_catalogue() if e.key == "gemma-3-4b-it")
    repo_files = [
        FakeHubFile(gemma.repo, n, s, None)
        for n, s in (
            ("gemma-3-4b-it-Q4_K_M.gguf", 2 * GB),
            ("gemma-3-4b-it-Q8_0.gguf", 4 * GB),
            ("mmproj-model-f16.gguf", 851_000_000),
        )
    ]
    chosen = files_to_fetch(repo_files, "gemma-3-4b-it-Q8_0.gguf") + projector_to_fetch(repo_files, gemma)
    assert [f.path for f in chosen] == ["gemma-3-4b-it-Q8_0.gguf", "mmproj-model-f16.gguf"]
    text_only = next(e for e in shipped_catalogue() if e.key == "qwen3-4b")
    assert projector_to_fetch(repo_files, text_only) == [] and projector_to_fetch(repo_files, None) == []
    gone = re.escape("mmproj-model-f16.gguf, the image projector of Gemma 3 4B, is not")
    with pytest.raises(DownloadChoiceError, match=gone):
        projector_to_fetch(repo_files[:2], gemma)
    # on the page: "vision", and a model file without its projector is not ready to use
    model = tmp_path.joinpath(*gemma.repo.split("/"), gemma.files[0].name)
    model.parent.mkdir(parents=True)
    model.write_bytes(b"x")
    [offer] = catalogue_offers([gemma], FreeMemory(ram_bytes=8 * GB), tmp_path)
    assert "vision (with its 851" in offer.facts and offer.downloaded is None
    (model.parent / "mmproj-model-f16.gguf").write_bytes(b"x")
    [offer] = catalogue_offers([gemma], FreeMemory(ram_bytes=8 * GB), tmp_path)
    assert offer.downloaded == model
