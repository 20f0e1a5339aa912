"""TeX math in answers, drawn as images by ziamath (pure Python, offline, its own STIX math font).

`desktop/core/markdown_blocks.py` turns `$…$`, `$$…$$`, `\\(…\\)` and `\\[…\\]` into image
references `math:<key>`; a `TextSegment` asks `math_image` for each while it lays out. The
SVG ziamath writes is drawn with Qt's SVG renderer at the text's size, in the text's colour,
and cached. Math ziamath cannot parse shows as its TeX source in monospace-ish text, never as
an error dialog.
"""

from __future__ import annotations

import logging
from functools import lru_cache

from PySide6.QtCore import QByteArray, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QFont, QFontInfo, QFontMetrics, QFontMetricsF, QImage, QPainter
from PySide6.QtSvg import QSvgRenderer

log = logging.getLogger(__name__)
CACHE_SIZE = 512
DISPLAY_SCALE = 1.2  # display math reads a little larger than inline math


@lru_cache(maxsize=CACHE_SIZE)
def math_image(
    tex: str, display: bool, pixel_size: int, colour: str, device_ratio: float = 1.0, descent: float = 0.0
) -> QImage | None:
    """`tex` drawn at about `pixel_size` px text height in `colour`; None when it cannot be parsed.

    Inline math (`descent` > 0: the surrounding text's descent) is padded below so that its own
    baseline sits on the text's: see `bottom_padding`.
    """
    drawn = _svg(tex, display, pixel_size, colour)
    if drawn is None:
        return None
    svg, depth = drawn
    renderer = QSvgRenderer(QByteArray(svg.encode("utf-8")))
    if not renderer.isValid():
        return None
    size = renderer.defaultSize()
    if size.isEmpty():
        return None
    below = bottom_padding(depth, descent) if not display else 0
    image = QImage(
        QSize(round(size.width() * device_ratio), round((size.height() + below) * device_ratio)),
        QImage.Format.Format_ARGB32_Premultiplied,
    )
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    renderer.render(painter, QRectF(0, 0, image.width(), size.height() * device_ratio))
    painter.end()
    image.setDevicePixelRatio(device_ratio)
    return image


def bottom_padding(depth: float, descent: float) -> int:
    """Transparent rows below inline math that put its baseline on the text's.

    The answer places a math image with `vertical-align: bottom` (markdown_blocks): Qt puts its
    bottom on the line's bottom, the text's `descent` below the baseline, and the line keeps
    its height unless the math is taller. The math's own baseline is `depth` above the
    picture's bottom, so `descent - depth` rows lower it onto the text's. (`middle`, used
    before, left it a pixel or two low, review 3 D23.) Math deeper than the text's descent (a
    fraction) keeps its bottom on the line's.
    """
    return max(0, round(descent - depth))


def _svg(tex: str, display: bool, pixel_size: int, colour: str) -> tuple[str, float] | None:
    """The SVG of `tex` and its depth: the pixels from its baseline down to the picture's bottom."""
    # Imported on first use: loading its font takes a moment, and most answers have no math.
    from ziamath.config import config
    from ziamath.zmath import Latex

    config.svg2 = False  # plain paths: Qt's SVG renderer (SVG Tiny) draws no <symbol>
    size = pixel_size * (DISPLAY_SCALE if display else 1.0)
    try:
        math = Latex(tex, size=size, color=colour, inline=not display)
        return math.svg(), math.margin - math.getyofst()  # ziamath's y runs up from the baseline
    except Exception as exc:
        log.info("math not rendered (%s): %s", type(exc).__name__, tex[:80])
        return None


def text_descent(font: QFont) -> float:
    """How far text in `font` reaches below its baseline: where an inline image's bottom goes."""
    return QFontMetricsF(font).descent()


def text_pixel_size(font: QFont) -> int:
    """The math's size for text in `font`: a little over the font's pixel size (math glyphs run small)."""
    return max(10, round(QFontInfo(font).pixelSize() * 1.25))


def fallback_image(tex: str, font: QFont, colour: str) -> QImage:
    """The TeX source itself, drawn as text: math that could not be rendered still reads."""
    metrics = QFontMetrics(font)
    size = QSize(metrics.horizontalAdvance(tex) + 4, metrics.height())
    image = QImage(size, QImage.Format.Format_ARGB32_Premultiplied)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.setFont(font)
    painter.setPen(QColor(colour))
    painter.drawText(2, metrics.ascent(), tex)
    painter.end()
    return image
