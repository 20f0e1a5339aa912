"""Vision projectors: metadata read without loading, pairing with a model, refusal of a misfit."""

from __future__ import annotations

from pathlib import Path

import pytest

from models.errors import GGUFError
from models.gguf.diagnose import explain_load_failure
from models.gguf.projector import read_projector
from models.library.projectors import pair, sibling_projectors
from tests import gguf_factory as gf
from tests.projector_fixture import write_projector_fixture


def test_the_projector_metadata_is_read_from_its_header(tmp_path: Path) -> None:
    info = read_projector(write_projector_fixture(tmp_path / "mmproj-x.gguf"))
    assert (info.projector_type, info.image_size, info.projection_width, info.vision) == ("mlp", 28, 576, True)
    assert info.summary() == "vision projector (mlp, 28 px) for models 576 wide"


def test_the_width_falls_back_to_the_last_projection_tensor(tmp_path: Path) -> None:
    # the older projector shape: no projection_dim key, mm.0.weight of shape (out 4, in 32)
    info = read_projector(gf.write_projector(tmp_path / "old-mmproj.gguf"))
    assert info.projection_width == 4


def test_a_chat_model_is_not_a_projector(tmp_path: Path) -> None:
    with pytest.raises(GGUFError, match="not a vision projector"):
        read_projector(gf.write_tiny_llama(tmp_path / "m.gguf"))


def test_a_fitting_sibling_is_paired_and_a_misfit_passed_over(tmp_path: Path) -> None:
    model = gf.write_tiny_llama(tmp_path / "tiny-Q8_0.gguf", n_embd=64)
    write_projector_fixture(tmp_path / "mmproj-other.gguf", projection=576)
    assert pair(model, 64).projector is None
    assert "does not go with tiny-Q8_0.gguf: it projects images to 576 values" in pair(model, 64).note
    write_projector_fixture(tmp_path / "mmproj-tiny-f16.gguf", projection=64)
    paired = pair(model, 64).projector
    assert paired is not None and paired.path.name == "mmproj-tiny-f16.gguf"
    assert sibling_projectors(model)[0].name == "mmproj-tiny-f16.gguf"  # the one naming the model first


def test_a_chosen_projector_that_does_not_fit_is_refused_in_one_line(tmp_path: Path) -> None:
    model = gf.write_tiny_llama(tmp_path / "tiny.gguf", n_embd=64)
    wrong = write_projector_fixture(tmp_path / "elsewhere.gguf", projection=576)
    with pytest.raises(GGUFError) as caught:
        pair(model, 64, wrong)
    assert str(caught.value) == (
        "elsewhere.gguf does not go with tiny.gguf: it projects images to 576 values, "
        "the model's embeddings are 64 wide"
    )


def test_a_projector_opened_as_the_model_says_what_it_is_and_what_it_goes_with(tmp_path: Path) -> None:
    gf.write_tiny_llama(tmp_path / "tiny.gguf", n_embd=576)
    gf.write_tiny_llama(tmp_path / "other.gguf", n_embd=64)
    projector = write_projector_fixture(tmp_path / "mmproj-tiny.gguf")
    assert explain_load_failure(projector) == (
        "a vision projector (mlp, 28 px) for models 576 wide, not a chat model; it goes with tiny.gguf"
    )


def test_the_picker_marks_a_model_whose_projector_sits_beside_it(ember_home: Path) -> None:
    from desktop.core.model_rows import detail_items, entry_row
    from models.library.paths import ember_paths
    from models.library.scan import library_entries

    models_dir = ember_paths().models_dir
    models_dir.mkdir(parents=True)
    gf.write_tiny_llama(models_dir / "seeing.gguf", name="Seeing", n_embd=576)
    gf.write_tiny_llama(models_dir / "other.gguf", name="Blind", n_embd=64)
    write_projector_fixture(models_dir / "mmproj-seeing-f16.gguf")
    rows = {e.path.name: entry_row(e) for e in library_entries() if e.path.parent == models_dir}
    assert "mmproj-seeing-f16.gguf" not in rows  # a projector is no chat model of the list
    assert "vision" in rows["seeing.gguf"].line.split(" · ")
    assert "vision" not in rows["other.gguf"].line.split(" · ")
    assert ("Vision", "mmproj-seeing-f16.gguf: vision projector (mlp, 28 px) for models 576 wide") in detail_items(
        rows["seeing.gguf"]
    )


def test_the_picker_marks_a_model_whose_projector_was_chosen_in_its_settings(ember_home: Path, tmp_path: Path) -> None:
    from desktop.core.model_rows import entry_row
    from models.library.paths import ember_paths
    from models.library.scan import library_entries
    from models.library.settings import ModelSettings, save_model_settings

    models_dir = ember_paths().models_dir
    models_dir.mkdir(parents=True)
    model = models_dir / "seeing.gguf"
    gf.write_tiny_llama(model, name="Seeing", n_embd=576)
    elsewhere = tmp_path / "projectors"
    elsewhere.mkdir()
    write_projector_fixture(elsewhere / "mmproj-seeing-f16.gguf")  # not beside the model: no sibling to find

    def marks() -> list[str]:
        return next(entry_row(e) for e in library_entries() if e.path == model).line.split(" · ")

    assert "vision" not in marks()
    save_model_settings(model, ModelSettings(projector=str(elsewhere / "mmproj-seeing-f16.gguf")))
    assert "vision" in marks()
