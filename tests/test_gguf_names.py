"""One reading of GGUF file names (models/gguf/names.py), and `ember models pull` and the
window's Get models page agreeing on every real-world name below."""

from __future__ import annotations

from pathlib import Path

import pytest

from desktop.core.get_models import files_to_fetch, hub_offer, quant_of
from engine.hub.files import HubFile, HubRepo, models_in, pick_files
from models.gguf.names import is_first_part, is_projector_name, model_key, quant_in_name, shard_of
from models.library.fit import FreeMemory

GB = 1_000_000_000

# name → (quantisation, projector), as published on the Hub.
NAMES: dict[str, tuple[str | None, bool]] = {
    "Qwen2-VL-mmproj-f16.gguf": ("F16", True),
    "mmproj-model-f16.gguf": ("F16", True),
    "mmproj-SmolVLM-500M-Instruct-Q8_0.gguf": ("Q8_0", True),
    "gemma-3-4b-it-mmproj-bf16.gguf": ("BF16", True),
    "Qwen3-4B-Q4_K_M.gguf": ("Q4_K_M", False),
    "Qwen2.5-7B-Instruct.IQ4_XS.gguf": ("IQ4_XS", False),
    "SmolLM2-360M-Instruct.Q4_K_M.gguf": ("Q4_K_M", False),
    "Qwen2.5-7B-Instruct-Q8_0-00001-of-00003.gguf": ("Q8_0", False),
    "Qwen2.5-7B-Instruct-Q8_0-00002-of-00003.gguf": ("Q8_0", False),
    "Qwen2.5-7B-Instruct-Q8_0-00003-of-00003.gguf": ("Q8_0", False),
    "gemma-3-1b-it-f16.gguf": ("F16", False),
    "Llama-3.2-1B-Instruct-bf16.gguf": ("BF16", False),
    "phi-4-q4.gguf": ("Q4", False),
    "phi-4-Q4_K_M.gguf": ("Q4_K_M", False),
    "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf": ("Q4_K_M", False),
    "Qwen3-30B-A3B-UD-Q4_K_XL.gguf": ("Q4_K_XL", False),
    "tinyllama-1.1b-chat-v1.0.Q2_K.gguf": ("Q2_K", False),
    "ggml-model-q4_0.gguf": ("Q4_0", False),
    "gpt-oss-20b-MXFP4.gguf": ("MXFP4", False),
    "ibm-granite_granite-3.2-8b-instruct-IQ4_XS.gguf": ("IQ4_XS", False),
    "Qwen2-VL-2B-Instruct-F32.gguf": ("F32", False),
    "model.gguf": (None, False),
}


@pytest.mark.parametrize(("name", "expected"), NAMES.items())
def test_a_names_quantisation_and_projectorhood(name: str, expected: tuple[str | None, bool]) -> None:
    quant, projector = expected
    assert quant_in_name(name) == quant
    assert is_projector_name(name) is projector
    assert is_projector_name(f"some/folder/{name}") is projector


def test_split_files_name_their_part_and_share_one_key() -> None:
    assert shard_of("Q8_0/Qwen2.5-7B-Instruct-Q8_0-00002-of-00003.gguf") == ("Qwen2.5-7B-Instruct-Q8_0", 2, 3)
    assert shard_of("Qwen3-4B-Q4_K_M.gguf") is None and shard_of("x-1-of-3.gguf") is None
    assert is_first_part("m-00001-of-00002.gguf") and not is_first_part("m-00002-of-00002.gguf")
    assert model_key("a/m-00001-of-00002.gguf") == model_key("a/m-00002-of-00002.gguf")
    assert model_key("a/m-00001-of-00002.gguf") != model_key("b/m-00001-of-00002.gguf")  # another folder
    assert model_key("a/m-00001-of-00002.gguf") != model_key("a/m-00001-of-00003.gguf")  # another split


def _listing(names: list[str]) -> list[HubFile]:
    return [HubFile("o/r", n, (i + 1) * 100_000_000, None, "abc") for i, n in enumerate(names)]


def test_pull_and_the_get_models_page_agree_on_every_name(tmp_path: Path) -> None:
    listing = _listing([*NAMES, "Q5_K_M/Big-Q5_K_M-00001-of-00002.gguf", "Q5_K_M/Big-Q5_K_M-00002-of-00002.gguf"])
    offer = hub_offer(HubRepo("o/r", 1, 1, False), listing, FreeMemory(ram_bytes=1000 * GB), tmp_path)
    assert offer is not None
    pulled = {m[0].path: m for m in models_in(listing) if not m[0].is_projector}
    offered = {o.name: o for o in offer.files}
    assert set(offered) == set(pulled)  # the same models, no projector among them
    for name, choice in offered.items():
        assert choice.quant == (pulled[name][0].quant or "?") == quant_of(name)
        fetched = [f.path for f in files_to_fetch(listing, name)]
        assert fetched == [f.path for f in pick_files(listing, name)] == [f.path for f in pulled[name]]
    big = offered["Q5_K_M/Big-Q5_K_M-00001-of-00002.gguf"]
    assert big.quant == "Q5_K_M"
    assert not any(is_projector_name(n) for n in offered)


def test_the_hub_file_reads_its_name_by_the_one_rule() -> None:
    for f in _listing(list(NAMES)):
        assert (f.quant, f.is_projector) == NAMES[f.name]
