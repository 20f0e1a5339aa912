"""Ember's design tokens in one place: type scale, spacing grid, radii, one accent, two palettes.

Everything the window draws takes its colours and measures from here (the stylesheet in
`desktop/qt/look/stylesheet.py`, the Qt palette, code highlighting, icons). The palettes are
checked for WCAG AA text contrast (4.5:1) by `tests/test_theme.py`, using `contrast_ratio`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Mode = Literal["system", "light", "dark"]
MODES: tuple[Mode, ...] = ("system", "light", "dark")

# Spacing: multiples of 4 px.
SPACE_XS, SPACE_SM, SPACE_MD, SPACE_LG, SPACE_XL = 4, 8, 12, 16, 24
# Corner radii.
RADIUS_SM, RADIUS_MD, RADIUS_LG = 6, 10, 16
# Type scale, relative to the body size (which follows the system font and the user's zoom).
# "reading": a reply's text, larger than the chrome around it (15 px from the default 12 px body).
TYPE_SCALE = {"caption": 0.86, "small": 0.93, "body": 1.0, "reading": 1.25, "title": 1.14, "display": 1.6}
# Qt's percentage is of the font's own line spacing (about 1.16 of its size here): 130 % gives
# lines about 1.5 times the text size apart, the leading long answers read best at.
READING_LINE_HEIGHT = 130
# Text size steps for Ctrl+= / Ctrl+- (a factor on the system font size).
TEXT_SCALES = (0.8, 0.9, 1.0, 1.1, 1.25, 1.4, 1.6, 1.8)
ICON_PX = 18
AA_TEXT = 4.5  # WCAG 2.x AA for normal text


@dataclass(frozen=True, slots=True)
class Syntax:
    """Code colours (Pygments token families)."""

    keyword: str
    string: str
    comment: str
    number: str
    function: str
    builtin: str
    operator: str


@dataclass(frozen=True, slots=True)
class Palette:
    """Colour roles, as #rrggbb. `*_text` roles are meant to be read on their `*_bg`/fill."""

    name: Literal["light", "dark"]
    window: str  # chrome: header, sidebar, composer bar
    surface: str  # the conversation and text fields
    surface_alt: str  # hovered rows, code blocks, thinking pane
    border: str
    text: str
    muted: str  # secondary text: labels, hints, timings
    accent: str  # the one accent: primary button, focus ring, links, chip
    accent_text: str  # text on the accent fill
    accent_soft: str  # the user's bubble, selections
    warning_bg: str
    warning_border: str
    warning_text: str
    error_bg: str
    error_border: str
    error_text: str
    link: str
    syntax: Syntax


LIGHT = Palette(
    name="light",
    window="#f6f6f7",
    surface="#ffffff",
    surface_alt="#f1f1f3",
    border="#e0e0e5",
    text="#1b1b1f",
    muted="#5c5c66",
    accent="#c2410c",
    accent_text="#ffffff",
    accent_soft="#fbece2",
    warning_bg="#fff5e6",
    warning_border="#f0c27a",
    warning_text="#5c3a00",
    error_bg="#fdeeee",
    error_border="#efb3b3",
    error_text="#7a1c1c",
    link="#b13a0b",
    syntax=Syntax(
        keyword="#c21f2c",
        string="#0a3069",
        comment="#5f6670",
        number="#0550ae",
        function="#7443d0",
        builtin="#953800",
        operator="#1b1b1f",
    ),
)

DARK = Palette(
    name="dark",
    window="#17171a",
    surface="#1e1e22",
    surface_alt="#27272c",
    border="#36363d",
    text="#ececef",
    muted="#a3a3ad",
    accent="#f08a4b",
    accent_text="#1a1207",
    accent_soft="#3b2a1f",
    warning_bg="#352a12",
    warning_border="#7a5a1a",
    warning_text="#f5d99a",
    error_bg="#3a1d20",
    error_border="#7a3035",
    error_text="#f6c3c3",
    link="#f6a36f",
    syntax=Syntax(
        keyword="#ff7b72",
        string="#a5d6ff",
        comment="#9198a1",
        number="#79c0ff",
        function="#d2a8ff",
        builtin="#ffa657",
        operator="#ececef",
    ),
)

PALETTES = {"light": LIGHT, "dark": DARK}

# Text/background pairs that must meet AA in every palette (foreground role, background role).
TEXT_PAIRS: tuple[tuple[str, str], ...] = (
    ("text", "surface"),
    ("text", "window"),
    ("text", "surface_alt"),
    ("text", "accent_soft"),
    ("muted", "surface"),
    ("muted", "window"),
    ("muted", "surface_alt"),
    ("accent_text", "accent"),
    ("link", "surface"),
    ("accent", "surface"),
    ("warning_text", "warning_bg"),
    ("error_text", "error_bg"),
)


def palette_for(mode: Mode, system_dark: bool) -> Palette:
    if mode == "system":
        return DARK if system_dark else LIGHT
    return PALETTES[mode]


def rgb(hex_colour: str) -> tuple[int, int, int]:
    value = hex_colour.lstrip("#")
    return int(value[0:2], 16), int(value[2:4], 16), int(value[4:6], 16)


def relative_luminance(hex_colour: str) -> float:
    """WCAG 2.x relative luminance of an sRGB colour."""

    def channel(c: int) -> float:
        s = c / 255
        return s / 12.92 if s <= 0.04045 else ((s + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(c) for c in rgb(hex_colour))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast_ratio(foreground: str, background: str) -> float:
    """WCAG contrast ratio, 1.0 (none) to 21.0 (black on white)."""
    a, b = relative_luminance(foreground), relative_luminance(background)
    light, dark = max(a, b), min(a, b)
    return (light + 0.05) / (dark + 0.05)


def blend(a: str, b: str, t: float) -> str:
    """`a` moved a fraction `t` of the way towards `b`, as #rrggbb."""
    ra, rb = rgb(a), rgb(b)
    return "#" + "".join(f"{round(x + (y - x) * t):02x}" for x, y in zip(ra, rb, strict=True))


def next_scale(current: float, step: int) -> float:
    """The text scale one step up (+1) or down (-1) from `current`, clamped to TEXT_SCALES."""
    nearest = min(range(len(TEXT_SCALES)), key=lambda i: abs(TEXT_SCALES[i] - current))
    return TEXT_SCALES[max(0, min(len(TEXT_SCALES) - 1, nearest + step))]
