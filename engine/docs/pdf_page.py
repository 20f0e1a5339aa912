"""Reading a PDF page's text, bounded (docs/hardening.md): the one way Ember turns a PDF page into text.

Pages are read one at a time on the thread that indexes (extract.py). Worker processes on the
spare cores were measured against that (tests/tools/pdf_index_time.py, docs/performance.md) and
did not shorten the indexing a user waits for, so there are none.
"""

from __future__ import annotations

import ctypes
import importlib
from typing import Any

# A page with more objects is not read: PDFium's text page costs about 150 to 250 bytes per
# character, and each object can hold thousands (an ordinary page has a few thousand objects;
# a 284 KB file can hold 625,000 of them, 50 MB of text). Checking costs ~5 µs per object.
MAX_PAGE_OBJECTS = 100_000
MAX_PAGE_CHARS = 1 << 20  # characters kept of one page (an ordinary page has a few thousand)


def pypdfium2() -> Any:
    """pypdfium2 (untyped; a native library, loaded only when a PDF is read)."""
    return importlib.import_module("pypdfium2")


class PageUnreadable(Exception):
    """PDFium could not load a page (the message is PDFium's)."""


def page_text(pdf: Any, index: int) -> str:
    """Page `index` (0-based) of an open `pypdfium2.PdfDocument` as text, line ends normalised.

    Bounded (docs/hardening.md): a page of more than MAX_PAGE_OBJECTS objects is refused before
    PDFium builds its text page (about 150 to 250 bytes per character); text objects lying wholly
    off the page, whose text `get_text_bounded` never returns, are switched off first, so they cost
    nothing either; and at most MAX_PAGE_CHARS characters are kept.
    """
    pdfium = pypdfium2()
    try:
        page = pdf[index]
    except pdfium.PdfiumError as exc:
        raise PageUnreadable(str(exc)) from exc
    try:
        _drop_offpage_text(page)
        textpage = page.get_textpage()
        try:
            text = str(textpage.get_text_bounded())[:MAX_PAGE_CHARS]
        finally:
            textpage.close()
    finally:
        page.close()
    return text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")


def _drop_offpage_text(page: Any) -> None:
    """Refuse a page with too many objects; switch off text objects that lie off the page."""
    raw = _raw()
    handle = page.raw
    count = int(raw.FPDFPage_CountObjects(handle))
    if count > MAX_PAGE_OBJECTS:
        raise PageUnreadable(f"too large to read: {count:,} objects, at most {MAX_PAGE_OBJECTS:,}")
    page_left, page_bottom, page_right, page_top = page.get_bbox()  # what get_text_bounded reads
    width, height = page_right - page_left, page_top - page_bottom
    margin = 72.0  # an inch: a glyph's box can reach past its object's bounds
    box = [ctypes.c_float() for _ in range(4)]
    refs = [ctypes.byref(b) for b in box]
    left, bottom, right, top = box
    get_object, get_type, get_bounds, text = (
        raw.FPDFPage_GetObject,
        raw.FPDFPageObj_GetType,
        raw.FPDFPageObj_GetBounds,
        raw.FPDF_PAGEOBJ_TEXT,
    )
    for i in range(count):
        obj = get_object(handle, i)
        if get_type(obj) != text or not get_bounds(obj, *refs):
            continue
        # Wholly off the page (its text is never returned), or one run spread over more than
        # three pages' width or height (millions of glyphs, of which a line or two would show).
        if (
            right.value < page_left - margin
            or left.value > page_right + margin
            or top.value < page_bottom - margin
            or bottom.value > page_top + margin
            or right.value - left.value > 3 * width
            or top.value - bottom.value > 3 * height
        ):
            raw.FPDFPageObj_SetIsActive(obj, False)


def _raw() -> Any:
    """pypdfium2's raw PDFium functions (untyped ctypes bindings)."""
    return importlib.import_module("pypdfium2.raw")
