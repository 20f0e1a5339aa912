"""The "Get models" page (issue #34): fit marks, search, download progress, cancel, use; offscreen.

The Hub is the fake of tests/hub_fakes.py (a client and a download function of our own);
free memory is given, not measured, so the marks do not depend on this machine.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import gguf_factory as gf
import pytest
from fake_hub import FakeHub, sha256_of
from gui_helpers import WAIT_MS, Chat, click, open_picker, widget_texts
from gui_helpers import FakeModelsPrompts as Prompts
from hub_fakes import (
    GB,
    TINY_FILE,
    TINY_REPO,
    TINY_TARGET,
    FakeDownloader,
    FakeHubClient,
    Gate,
    catalogue_entry,
    page_options,
    small_catalogue,
    small_hub,
)
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from desktop.core.hub_seam import default_services
from desktop.core.model_choice import ModelInfo, local_choice
from desktop.qt.chat.empty_state import EmptyState
from desktop.qt.models.get_models import GetModelsDialog
from desktop.qt.models.offer_row import OfferRow
from models.library.catalogue import CatalogueEntry
from models.library.fit import FreeMemory
from models.library.projectors import pair
from tests.projector_fixture import write_projector_fixture

pytest_plugins = ["gui_helpers"]


@pytest.fixture
def tiny_bytes(tmp_path: Path) -> bytes:
    return gf.write_tiny_llama(tmp_path / "source.gguf", name="Tiny chat").read_bytes()


@pytest.fixture
def entries(tiny_bytes: bytes) -> list[CatalogueEntry]:
    return small_catalogue(len(tiny_bytes))


@pytest.fixture
def hub(tiny_bytes: bytes) -> FakeHubClient:
    return small_hub(tiny_bytes)


def open_page(qtbot: QtBot, **options: Any) -> GetModelsDialog:
    page = GetModelsDialog(None, **options)
    qtbot.addWidget(page)
    page.show()
    qtbot.waitExposed(page)
    qtbot.waitUntil(lambda: "measure" not in page.jobs, timeout=WAIT_MS)
    return page


def row(page: GetModelsDialog, key: str) -> OfferRow:
    found = page.row(key)
    assert found is not None, f"no row {key}: {[r.offer.key for r in page.rows]}"
    return found


def test_rows_show_fit_marks_sizes_and_licence_best_first(qtbot: QtBot, entries, hub, tmp_path: Path) -> None:
    prompts = Prompts()
    page = open_page(
        qtbot,
        **page_options(
            entries, hub, FakeDownloader(), tmp_path / "models", Gate(), prompts, FreeMemory(ram_bytes=8 * GB)
        ),
    )
    assert "8.0 GB free memory · no GPU" in page.machine.text()
    assert [r.offer.key for r in page.rows] == ["middle-model", "tiny-chat"]  # what fits, best first
    middle = row(page, "middle-model")
    assert middle.mark.text() == "✓ Runs on the CPU" and "of the 8.0 GB free memory" in middle.reason.text()
    assert middle.action.text() == "Download 3.0 GB"
    click(qtbot, page.more)  # "Show all 3"
    huge = row(page, "huge-model")
    assert huge.mark.text() == "✕ Too big" and "only 8.0 GB is free" in huge.reason.text()
    huge.licence.linkActivated.emit(huge.offer.licence_url)
    assert prompts.links == ["https://www.apache.org/licenses/LICENSE-2.0"]
    assert hub.calls == [] and prompts.asked == []  # looking is offline


def test_a_gpu_changes_the_marks(qtbot: QtBot, entries, hub, tmp_path: Path) -> None:
    free = FreeMemory(ram_bytes=16 * GB, gpu_bytes=2 * GB, gpu_name="Test GPU")
    page = open_page(qtbot, **page_options(entries, hub, FakeDownloader(), tmp_path, Gate(), Prompts(), free))
    assert row(page, "tiny-chat").mark.text() == "✓ Runs on the GPU"
    assert row(page, "middle-model").mark.text() == "◐ Partly offloaded"
    assert "Test GPU" in row(page, "middle-model").reason.text()


def test_search_filters_the_catalogue_and_the_hub_is_asked_only_once_allowed(
    qtbot: QtBot, entries, hub, tmp_path: Path
) -> None:
    gate, prompts = Gate(), Prompts(False, True)
    page = open_page(
        qtbot, **page_options(entries, hub, FakeDownloader(), tmp_path, gate, prompts, FreeMemory(ram_bytes=8 * GB))
    )
    qtbot.keyClicks(page.search_box, "tiny")
    assert [r.offer.key for r in page.rows] == ["tiny-chat"] and hub.calls == []
    qtbot.keyClick(page.search_box, Qt.Key.Key_Return)  # search Hugging Face: asks first; refused
    assert prompts.asked == ["hub.test"] and hub.calls == [] and not gate.allowed
    assert "stay off" in page.message.text()
    qtbot.keyClick(page.search_box, Qt.Key.Key_Return)  # asked again, allowed this time
    qtbot.waitUntil(lambda: "search" not in page.jobs, timeout=WAIT_MS)
    assert gate.allows == 1 and hub.calls[0] == "search tiny"
    extra = row(page, "hub:someone/tiny-chat-extra-GGUF")  # the catalogue's own repository is not repeated
    assert [f.name for f in extra.offer.files] == ["extra-Q8_0.gguf"]  # the projector is not offered
    assert extra.files.currentText().startswith("Q8_0")
    assert len([r for r in page.rows if r.offer.repo == TINY_REPO]) == 1
    qtbot.keyClick(page.search_box, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: "search" not in page.jobs, timeout=WAIT_MS)
    assert prompts.asked == ["hub.test", "hub.test"]  # never again once allowed


def test_download_shows_progress_in_place_then_offers_use(
    qtbot: QtBot, entries, hub, tmp_path: Path, tiny_bytes: bytes
) -> None:
    downloader = FakeDownloader(chunk=max(1, len(tiny_bytes) // 8), pause=True)
    gate, prompts, models = Gate(), Prompts(True), tmp_path / "models"
    page = open_page(
        qtbot, **page_options(entries, hub, downloader, models, gate, prompts, FreeMemory(ram_bytes=8 * GB))
    )
    tiny = row(page, "tiny-chat")
    click(qtbot, tiny.action)
    assert prompts.asked == ["hub.test"] and gate.allowed
    assert downloader.reached.wait(5)
    qtbot.waitUntil(lambda: tiny.progress.value() > 0, timeout=WAIT_MS)
    assert tiny.progress.isVisible() and tiny.cancel.isVisible() and not tiny.action.isVisible()
    assert " of " in tiny.progress_label.text() and "/s" in tiny.progress_label.text()
    assert "left" in tiny.progress_label.text()
    downloader.resume.set()
    qtbot.waitUntil(lambda: tiny.ready, timeout=WAIT_MS)
    assert (models / TINY_TARGET).read_bytes() == tiny_bytes
    assert not list(models.glob("*.part")) and not tiny.progress.isVisible()
    assert f"Downloaded to {models}" in tiny.note.text()
    with qtbot.waitSignal(page.useModel, timeout=WAIT_MS) as used:
        click(qtbot, tiny.action)
    assert used.args == [models / TINY_TARGET]


def test_cancel_stops_the_download_and_offers_to_resume_it(
    qtbot: QtBot, entries, hub, tmp_path: Path, tiny_bytes: bytes
) -> None:
    downloader = FakeDownloader(chunk=max(1, len(tiny_bytes) // 8), pause=True)
    models = tmp_path / "models"
    page = open_page(
        qtbot,
        **page_options(entries, hub, downloader, models, Gate(allowed=True), Prompts(), FreeMemory(ram_bytes=8 * GB)),
    )
    tiny = row(page, "tiny-chat")
    click(qtbot, tiny.action)
    assert downloader.reached.wait(5)
    click(qtbot, tiny.cancel)
    assert tiny.progress_label.text() == "Stopping…"
    downloader.resume.set()
    qtbot.waitUntil(lambda: not tiny.downloading, timeout=WAIT_MS)
    assert tiny.note.text() == "Download cancelled; what was downloaded is kept."
    kept = (models / TINY_TARGET).with_name(TINY_FILE + ".part").stat().st_size
    assert 0 < kept < len(tiny_bytes)
    assert tiny.action.isVisible() and tiny.action.text().startswith("Resume download (")  # was "Download …"
    # Resume continues from the part, and its bar starts at the bytes already there.
    starts: list[int] = []
    downloader.pause = False
    original = tiny.show_progress

    def first_done(done: int, *rest: Any) -> None:
        starts.append(done)
        original(done, *rest)

    tiny.show_progress = first_done  # type: ignore[method-assign]
    click(qtbot, tiny.action)
    qtbot.waitUntil(lambda: tiny.ready, timeout=WAIT_MS)
    assert starts[0] >= kept
    assert (models / TINY_TARGET).read_bytes() == tiny_bytes


def test_a_download_left_part_way_earlier_is_offered_as_a_resume(
    qtbot: QtBot, entries, hub, tmp_path: Path, tiny_bytes: bytes
) -> None:
    models = tmp_path / "models"
    part = (models / TINY_TARGET).with_name(TINY_FILE + ".part")
    part.parent.mkdir(parents=True)
    part.write_bytes(tiny_bytes[:100])  # a pull cancelled in another session
    downloader = FakeDownloader()
    page = open_page(
        qtbot,
        **page_options(entries, hub, downloader, models, Gate(allowed=True), Prompts(), FreeMemory(ram_bytes=8 * GB)),
    )
    tiny = row(page, "tiny-chat")
    assert tiny.action.text().startswith("Resume download (100 B of ")
    click(qtbot, tiny.action)
    qtbot.waitUntil(lambda: tiny.ready, timeout=WAIT_MS)
    assert (models / TINY_TARGET).read_bytes() == tiny_bytes


def test_a_hub_address_that_is_no_address_is_one_line_on_the_page(
    qtbot: QtBot, entries, hub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_ENDPOINT", "https://[::1")  # HB52a: was a ValueError out of HubClient()
    options = page_options(entries, hub, FakeDownloader(), tmp_path, Gate(), Prompts(), FreeMemory(ram_bytes=8 * GB))
    page = open_page(qtbot, **(options | {"services": default_services}))
    click(qtbot, row(page, "tiny-chat").action)
    assert page.message.text().startswith("not a Hub address: 'https://[::1' (")
    assert "tiny-chat" not in page.jobs


def test_a_failed_download_says_why_in_one_line(qtbot: QtBot, entries, hub, tmp_path: Path) -> None:
    page = open_page(
        qtbot,
        **page_options(
            entries, hub, FakeDownloader(), tmp_path, Gate(allowed=True), Prompts(), FreeMemory(ram_bytes=8 * GB)
        ),
    )
    middle = row(page, "middle-model")  # its repository is not on the fake Hub
    click(qtbot, middle.action)
    qtbot.waitUntil(lambda: not middle.downloading, timeout=WAIT_MS)
    assert middle.note.text() == "test/middle-GGUF is not on hub.test (404)"
    assert not middle.ready


def test_searching_the_hub_needs_words(qtbot: QtBot, entries, hub, tmp_path: Path) -> None:
    prompts = Prompts(True)
    page = open_page(
        qtbot, **page_options(entries, hub, FakeDownloader(), tmp_path, Gate(), prompts, FreeMemory(ram_bytes=8 * GB))
    )
    click(qtbot, page.hub_button)
    assert page.message.text().startswith("Type what to look for") and prompts.asked == [] and hub.calls == []


def test_a_file_already_in_the_models_folder_is_ready_to_use(
    qtbot: QtBot, entries, hub, tmp_path: Path, tiny_bytes: bytes
) -> None:
    models = tmp_path / "models"
    (models / TINY_TARGET).parent.mkdir(parents=True)
    (models / TINY_TARGET).write_bytes(tiny_bytes)
    page = open_page(
        qtbot, **page_options(entries, hub, FakeDownloader(), models, Gate(), Prompts(), FreeMemory(ram_bytes=8 * GB))
    )
    assert row(page, "tiny-chat").ready


# --- through the window -----------------------------------------------------------------------


def test_the_picker_leads_to_the_page_and_use_loads_the_download(
    make_chat, qtbot: QtBot, entries, hub, tmp_path: Path
) -> None:
    chat: Chat = make_chat("scripted")
    models = tmp_path / "models"
    chat.models.page_options = page_options(
        entries, hub, FakeDownloader(), models, Gate(), Prompts(True), FreeMemory(ram_bytes=8 * GB)
    )
    picker = open_picker(chat)
    click(qtbot, picker.get_models)
    page = chat.models.get_models
    assert page is not None and page.isVisible() and not picker.isVisible()
    tiny = row(page, "tiny-chat")
    click(qtbot, tiny.action)
    qtbot.waitUntil(lambda: tiny.ready, timeout=WAIT_MS)
    click(qtbot, tiny.action)  # "Use this model": loads it through the window's model switch
    qtbot.waitUntil(
        lambda: (
            chat.controller.models.choice is not None and chat.controller.models.choice.path == models / TINY_TARGET
        ),
        timeout=WAIT_MS * 24,
    )  # the first llama.cpp load of a run may probe CPU variants
    from engine.llama.llama import LlamaBackend

    backend = chat.engine.backend
    assert isinstance(backend, LlamaBackend) and backend.path == models / TINY_TARGET
    assert chat.window.header.model_label == "Tiny chat (F32)" and not page.isVisible()


def test_the_empty_chat_names_a_better_model_and_links_to_the_page(
    make_chat, qtbot: QtBot, entries, hub, tmp_path: Path
) -> None:
    chat: Chat = make_chat("scripted")
    chat.models.page_options = page_options(
        entries, hub, FakeDownloader(), tmp_path, Gate(), Prompts(), FreeMemory(ram_bytes=8 * GB)
    )
    empty: EmptyState = chat.window.conversation.empty_state
    assert empty.better.isHidden()  # a scripted model is no small built-in one
    empty.show_model(ModelInfo("SmolLM2", "CPU"), local_choice(tmp_path / "own.gguf"))
    assert empty.better.isHidden()  # nor is the user's own file
    empty.show_model(ModelInfo("SmolLM2", "CPU"), local_choice(None))  # the built-in model
    assert not empty.better.isHidden()
    empty.show_model(None)
    assert not empty.better.isHidden() and empty.better.text().startswith("A better model: ")
    assert "Get models…" in empty.better.text()
    empty.better.linkActivated.emit("get-models")
    page = chat.models.get_models
    assert page is not None and page.isVisible()
    assert any("Best for this machine" in t for t in widget_texts(page))


@pytest.mark.slow
def test_the_page_searches_and_downloads_through_the_real_client_and_the_loopback_hub(
    qtbot: QtBot, smollm_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real engine.hub services (default_services) against tests/fake_hub.py: the consent
    lands in network.json, search and download go over loopback, the file is verified and ready."""
    repo, name = "ember-test/SmolLM2-135M-Instruct-GGUF", "SmolLM2-135M-Instruct.Q4_1.gguf"
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # never the user's saved token
    monkeypatch.delenv("HF_TOKEN", raising=False)
    with FakeHub({repo: {name: smollm_path}}) as fake:
        monkeypatch.setenv("HF_ENDPOINT", fake.url)
        services = default_services()
        prompts = Prompts(True)
        page = open_page(
            qtbot,
            services=lambda: services,
            prompts=prompts,
            entries=[],
            free_memory=lambda: FreeMemory(8 * GB),
            quick_memory=lambda: FreeMemory(8 * GB),
        )
        qtbot.keyClicks(page.search_box, "SmolLM2")
        qtbot.keyClick(page.search_box, Qt.Key.Key_Return)
        qtbot.waitUntil(lambda: "search" not in page.jobs, timeout=WAIT_MS)
        assert prompts.asked == [services.client.host] and services.allowed()
        found = row(page, f"hub:{repo}")
        click(qtbot, found.action)
        qtbot.waitUntil(lambda: found.ready, timeout=WAIT_MS * 3)
    target = services.models_dir / repo.split("/")[0] / repo.split("/")[1] / name
    assert sha256_of(target) == sha256_of(smollm_path) and not list(target.parent.glob("*.part"))
    with qtbot.waitSignal(page.useModel, timeout=WAIT_MS) as used:
        click(qtbot, found.action)
    assert used.args == [target]


@pytest.mark.slow
def test_a_vision_offer_says_so_and_downloads_with_its_projector_as_one_item(
    qtbot: QtBot, smollm_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A catalogue vision entry through the real engine.hub and the loopback Hub: "vision" on the
    row, one progress over model and projector, both in one folder, and the library pairs them."""
    repo, name, projector = "ember-test/SmolVLM-like-GGUF", "SmolLM2-135M-Instruct.Q4_1.gguf", "mmproj-smol-f16.gguf"
    source = write_projector_fixture(tmp_path / projector)
    vision = catalogue_entry(
        "vision-chat",
        repo,
        name,
        smollm_path.stat().st_size,
        quality=2,
        projector={"file": projector, "size": source.stat().st_size},
    )
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    with FakeHub({repo: {name: smollm_path, projector: source}}) as fake:
        monkeypatch.setenv("HF_ENDPOINT", fake.url)
        real = default_services()
        fetched: list[list[str]] = []
        totals: list[int] = []

        def download(files: Any, dest: Path, *, client: Any, progress: Any, cancel: Any) -> list[Path]:
            fetched.append([f.path for f in files])

            def show(p: Any) -> None:
                totals.append(p.total)
                progress(p)

            return real.download(files, dest, client=client, cancel=cancel, progress=show)

        services = dataclasses.replace(real, download=download)
        page = open_page(
            qtbot,
            services=lambda: services,
            prompts=Prompts(True),
            entries=[vision],
            free_memory=lambda: FreeMemory(8 * GB),
            quick_memory=lambda: FreeMemory(8 * GB),
        )
        offer = row(page, "vision-chat")
        assert "vision (with its" in offer.facts.text()
        click(qtbot, offer.action)
        qtbot.waitUntil(lambda: offer.ready, timeout=WAIT_MS * 3)
    folder = services.models_dir.joinpath(*repo.split("/"))
    assert sorted(p.name for p in folder.iterdir()) == sorted([name, projector])
    assert fetched == [[name, projector]]  # one item
    assert set(totals) == {smollm_path.stat().st_size + source.stat().st_size}  # one progress over both
    paired = pair(folder / name, 576).projector
    assert paired is not None and paired.path == folder / projector
    with qtbot.waitSignal(page.useModel, timeout=WAIT_MS) as used:
        click(qtbot, offer.action)
    assert used.args == [folder / name]
