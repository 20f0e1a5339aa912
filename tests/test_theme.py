"""The design tokens: every text colour meets WCAG AA on the backgrounds it is used on."""

from __future__ import annotations

import pytest

from desktop.qt.look.theme import (
    AA_TEXT,
    DARK,
    LIGHT,
    TEXT_PAIRS,
    TEXT_SCALES,
    Palette,
    contrast_ratio,
    next_scale,
    palette_for,
)


def test_contrast_ratio_matches_the_wcag_reference_values() -> None:
    assert contrast_ratio("#000000", "#ffffff") == pytest.approx(21.0)
    assert contrast_ratio("#ffffff", "#ffffff") == pytest.approx(1.0)
    assert contrast_ratio("#777777", "#ffffff") == pytest.approx(4.48, abs=0.01)  # the famous near miss


@pytest.mark.parametrize("palette", [LIGHT, DARK], ids=["light", "dark"])
@pytest.mark.parametrize(("fg", "bg"), TEXT_PAIRS)
def test_text_meets_aa(palette: Palette, fg: str, bg: str) -> None:
    ratio = contrast_ratio(getattr(palette, fg), getattr(palette, bg))
    assert ratio >= AA_TEXT, f"{palette.name}: {fg} on {bg} is {ratio:.2f}:1"


@pytest.mark.parametrize("palette", [LIGHT, DARK], ids=["light", "dark"])
@pytest.mark.parametrize("role", ["keyword", "string", "comment", "number", "function", "builtin", "operator"])
def test_code_colours_meet_aa_on_code_blocks(palette: Palette, role: str) -> None:
    ratio = contrast_ratio(getattr(palette.syntax, role), palette.surface_alt)
    assert ratio >= AA_TEXT, f"{palette.name}: {role} code on a code block is {ratio:.2f}:1"


def test_system_mode_follows_the_system_and_explicit_modes_do_not() -> None:
    assert palette_for("system", system_dark=True) is DARK
    assert palette_for("system", system_dark=False) is LIGHT
    assert palette_for("light", system_dark=True) is LIGHT
    assert palette_for("dark", system_dark=False) is DARK


def test_text_scale_steps_and_clamps() -> None:
    assert next_scale(1.0, +1) == 1.1
    assert next_scale(1.0, -1) == 0.9
    assert next_scale(TEXT_SCALES[-1], +1) == TEXT_SCALES[-1]
    assert next_scale(TEXT_SCALES[0], -1) == TEXT_SCALES[0]
