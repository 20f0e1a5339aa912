"""The window's Qt-free pieces: Markdown line breaks, unfenced code and math; load errors; model defaults."""

from __future__ import annotations

from pathlib import Path

import gguf_factory as gf
import pytest

from desktop.core.markdown_blocks import MarkdownStream, brackets_to_dollars, looks_like_code, math_source
from engine.api.models import model_settings
from models.library.settings import ModelSettings, save_model_settings


def parts(text: str) -> list[tuple[str, str]]:
    return [(p.kind, p.html if p.kind == "text" else p.source) for p in MarkdownStream().update(text, final=True).parts]


def test_a_single_newline_is_a_line_break() -> None:
    ((kind, html),) = parts("Roses are red,\nviolets are blue,\nsugar is sweet.")
    assert kind == "text" and html.count("<br") == 2


def test_unfenced_code_becomes_a_code_block_with_its_lines() -> None:
    text = "Here:\n\ndef reverse(s):\n    return s[::-1]\nprint(reverse('abc'))\n\nDone."
    kinds = parts(text)
    assert [k for k, _ in kinds] == ["text", "code", "text"]
    assert kinds[1][1] == "def reverse(s):\n    return s[::-1]\nprint(reverse('abc'))"


@pytest.mark.parametrize(
    "prose",
    [
        "Roses are red,\nviolets are blue.",
        "First, open the file.\nThen read it line by line.",
        "If you want, I can explain more.\nFor example: the loop.",
    ],
)
def test_prose_is_not_mistaken_for_code(prose: str) -> None:
    assert not looks_like_code(prose)


def test_math_becomes_a_math_image_with_its_tex() -> None:
    ((kind, html),) = parts("Einstein: $E = mc^2$, and \\[ \\int_0^1 x\\,dx \\]")
    assert kind == "text" and html.count('src="math:') == 2
    keys = [chunk.split('"', 1)[0] for chunk in html.split('src="math:')[1:]]
    assert math_source(keys[0]) == ("E = mc^2", False)
    source = math_source(keys[1])
    assert source is not None and source[0] == "\\int_0^1 x\\,dx" and source[1] is True


def test_prices_and_code_are_not_math() -> None:
    ((_, html),) = parts("It costs $5 and $10 today.")
    assert "math:" not in html and "$5" in html
    assert brackets_to_dollars("`\\[x\\]` and \\(y\\)") == "`\\[x\\]` and $y$"


def test_a_models_own_recommendations_are_its_defaults_and_saved_settings_win(tmp_path: Path) -> None:
    model = gf.write_tiny_llama(
        tmp_path / "m.gguf",
        extra={"general.sampling.temp": 0.3, "general.sampling.penalty_repeat": 1.2, "general.sampling.top_k": 20},
    )
    defaults = model_settings(model)
    assert defaults.temperature == pytest.approx(0.3) and defaults.repeat_penalty == pytest.approx(1.2)
    assert defaults.top_k == 20
    save_model_settings(model, ModelSettings(temperature=0.9))
    saved = model_settings(model)
    assert saved.temperature == pytest.approx(0.9) and saved.repeat_penalty == 1.0  # what was saved, as saved
