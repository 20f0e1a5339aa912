"""Issue 49's words and states that need no real display: the load figure, the reply's timing,
the calm base-model note, and Settings without build commands."""

from __future__ import annotations

from pytestqt.qtbot import QtBot

from desktop.core.model_words import load_progress_words
from desktop.core.receipt_text import timing_lines
from desktop.qt.frame.notice_banner import NoticeBanner
from desktop.qt.models.settings_dialog import _for_users  # pyright: ignore[reportPrivateUsage]
from engine.llama.gpu_pick import ADD_VULKAN


def test_a_load_never_says_100_percent_before_it_is_done() -> None:
    assert load_progress_words(None) == ""
    assert load_progress_words(40) == " 40 %"
    assert load_progress_words(100) == " almost ready"


def test_reply_details_say_how_fast_the_reply_came() -> None:
    assert timing_lines({"ttft_ms": 420.0, "tokens_per_s": 18.26}) == [
        "First token after 420 ms",
        "Speed: 18.3 tokens/s",
    ]
    assert timing_lines({"ttft_ms": 2500.0}) == ["First token after 2.5 s"]
    assert timing_lines({"ttft_ms": "x", "tokens_per_s": 0}) == [] and timing_lines(None) == []


def test_a_base_model_note_is_calm_and_a_failure_is_not(qtbot: QtBot) -> None:
    banner = NoticeBanner()
    qtbot.addWidget(banner)
    banner.show_notice("It looks like a base model.", offer_models=True, calm=True)
    assert banner.property("calm") is True and banner.choose_button.isVisibleTo(banner)
    banner.show_notice("The model did not load.", offer_models=True)
    assert banner.property("calm") is False


def test_settings_point_to_the_readme_instead_of_printing_build_commands() -> None:
    said = _for_users(f"CPU only: {ADD_VULKAN}")
    assert "packaging/" not in said and "uv sync" not in said and "glslc" not in said
    assert said.startswith("CPU only: this build has no GPU support") and "Using a GPU" in said
    assert _for_users("GPU: Vulkan · AMD Radeon") == "GPU: Vulkan · AMD Radeon"
