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
from PySide6.QtGui import QColor, QFont, QFontInfo, QFontMetrics, QImage, QPainter
from PySide6.QtSvg import QSvgRenderer

log = logging.getLogger(__name__)
CACHE_SIZE = 512
DISPLAY_SCALE = 1.2  # display math reads a little larger than inline math


@lru_cache(maxsize=CACHE_SIZE)
def math_image(tex: str, display: bool, pixel_size: int, colour: str, device_ratio: float = 1.0) -> QImage | None:
    """`tex` drawn at about `pixel_size` px text height in `colour`; None when it cannot be parsed."""
    svg = _svg(tex, display, pixel_size, colour)
    if svg is None:
        return None
    renderer = QSvgRenderer(QByteArray(svg.encode("utf-8")))
    if not renderer.isValid():
        return None
    size = renderer.defaultSize()
    if size.isEmpty():
        return None
    image = QImage(
        QSize(round(size.width() * device_ratio), round(size.height() * device_ratio)),
        QImage.Format.Format_ARGB32_Premultiplied,
    )
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    renderer.render(painter, QRectF(0, 0, image.width(), image.height()))
    painter.end()
    image.setDevicePixelRatio(device_ratio)
    return image


def _svg(tex: str, display: bool, pixel_size: int, colour: str) -> str | None:
    # Imported on first use: loading its font takes a moment, and most answers have no math.
    from ziamath.config import config
    from ziamath.zmath import Latex

    config.svg2 = False  # plain paths: Qt's SVG renderer (SVG Tiny) draws no <symbol>
    size = pixel_size * (DISPLAY_SCALE if display else 1.0)
    try:
        math = Latex(tex, size=size, color=colour, inline=not display)
        return math.svg()
    except Exception as exc:
        log.info("math not rendered (%s): %s", type(exc).__name__, tex[:80])
        return None


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
