"""Reading a document into text blocks, one format at a time, each through a library made for it.

    for block in extract(path):      # Block(text, page, start)
        ...

- plain text, Markdown, source code: streamed through Python's incremental UTF-8 decoder, so a
  1 GB file is read 1 MiB at a time;
- HTML: the standard library's `html.parser`, fed piece by piece; scripts and styles dropped,
  block elements become paragraph breaks;
- PDF: `pypdfium2` (PDFium), one page at a time (page numbers kept, each page closed before
  the next); a PDF with no text
  layer or one that needs a password is refused in one line; a page that cannot be read (damaged,
  or too large: `engine.docs.pdf_page`) is named in a note and the other pages are used;
- DOCX: `python-docx`, after the zip's declared sizes are checked (a zip bomb is refused
  before anything is inflated) and every part is inflated a piece at a time, counting the bytes
  that come out (a part that lies about its size gets no more than it declared); headings become
  Markdown headings so chunking can follow them.

Only regular files are read (`engine.docs.regular`): a pipe, a device or a socket is refused
before it is opened, and a file found in a folder (`follow=False`) is never a symbolic link.
Text produced is bounded per file by what comes out, not by declared sizes (docs/hardening.md):
at most MAX_FILE_CHARS characters of a PDF or a DOCX (formats whose text can be far larger than
the file); an HTML tag or other unparsed run past HTML_MAX_PENDING characters is dropped.

`start` is the block's character offset in its page's text (PDF) or in the document's text
(every other format), so a passage's offsets point back into what was extracted.
A file that cannot be read raises `DocumentError` naming it, in one line.
"""

from __future__ import annotations

import codecs
import contextlib
import io
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Protocol

from engine.cancel import CancelToken
from engine.docs.compressed import inner_name, is_compressed, open_inflated
from engine.docs.errors import DocumentError
from engine.docs.names import shown
from engine.docs.pdf_page import PageUnreadable, page_text, pypdfium2
from engine.docs.regular import NotRegular, not_regular, open_regular
from engine.docs.zip_member import ZIP_ERRORS, inflated_member

READ_BYTES = 1 << 20  # text is read and handed on in pieces of about this size
SNIFF_BYTES = 8192
DOCX_MAX_PART = 64 << 20  # declared size of word/document.xml (a long book is a few MB)
DOCX_MAX_TOTAL = 256 << 20  # every part together (python-docx reads them all into memory)
MAX_FILE_CHARS = 256 << 20  # characters of text taken from one PDF or DOCX at most
HTML_MAX_PENDING = 128 << 10  # an unclosed tag, comment or script this long is dropped
HTML_FEED_CHARS = 64 << 10  # fed to the parser at a time (each feed scans what is pending again)
BAD_PAGES_SHOWN = 10  # pages named in a PDF's note at most (then "and N more")

TEXT_SUFFIXES = frozenset(
    ".txt .text .md .markdown .mdx .rst .adoc .org .tex .csv .tsv .log .json .jsonl .yaml .yml .toml .ini .cfg "
    ".conf .xml .py .pyi .js .jsx .ts .tsx .mjs .cjs .c .h .cc .cpp .cxx .hpp .hh .cs .java .kt .kts .go .rs .rb "
    ".php .swift .scala .lua .pl .r .jl .sh .bash .zsh .fish .ps1 .bat .sql .css .scss .less .vue .svelte .dart "
    ".ex .exs .erl .hs .ml .mli .clj .el .vim .cmake .gradle .proto .graphql .tf .nix .zig .m .mm .f90 .asm".split()
)
HTML_SUFFIXES = frozenset({".html", ".htm", ".xhtml"})
KNOWN_NAMES = frozenset({"readme", "license", "makefile", "dockerfile", "changelog", "authors", "notice"})


class Readable(Protocol):
    def read(self, size: int, /) -> bytes: ...


Note = Callable[[str], None]  # a one-line note about a file that was read in part


@dataclass(frozen=True, slots=True)
class Block:
    text: str
    page: int | None  # 1-based page of a PDF; None for formats without pages
    start: int  # offset of text[0] in the page's text (PDF) or the document's text


def kind_of(path: Path, *, follow: bool = True) -> str | None:
    """'text', 'html', 'pdf' or 'docx' by name, else by the first bytes; None: not a document.

    A compressed file (`.gz`, `.bz2`, `.xz`) is the kind of text it holds, by its inner name or
    its first inflated bytes; only text and HTML are read from inside one.
    """
    kind = kind_by_name(path) or _sniff(path, follow)
    return kind if not is_compressed(path) or kind in ("text", "html") else None


def kind_by_name(path: Path) -> str | None:
    """The kind a file's name says, without opening it; None when the name does not say."""
    if is_compressed(path):
        inner = kind_by_name(inner_name(path))
        return inner if inner in ("text", "html") else None
    suffix = path.suffix.lower()
    if suffix == ".pdf":
        return "pdf"
    if suffix == ".docx":
        return "docx"
    if suffix == ".epub":
        return "epub"
    if suffix in HTML_SUFFIXES:
        return "html"
    if suffix in TEXT_SUFFIXES or path.name.lower() in KNOWN_NAMES:
        return "text"
    return None


def _sniff(path: Path, follow: bool) -> str | None:
    try:
        with _opened(path, follow) as f:
            head = f.read(SNIFF_BYTES)
    except (OSError, ValueError, DocumentError):
        return None
    if head.startswith(b"%PDF-"):
        return "pdf"
    if not head or b"\x00" in head:
        return None
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError:
        return None
    return "text"


def extract(
    path: Path, cancel: CancelToken | None = None, *, follow: bool = True, note: Note | None = None
) -> Iterator[Block]:
    """The document's text as blocks; DocumentError (one line, naming the file) when it cannot be read.

    `follow=False`: a symbolic link is refused (a file found in a folder). `note` hears of a
    file read only in part (a PDF's unreadable pages, text cut at MAX_FILE_CHARS).
    """
    reason = not_regular(path, follow=follow)
    if reason:
        raise DocumentError(path, reason)
    kind = kind_of(path, follow=follow)
    stop = cancel or CancelToken()
    told: Note = note or _unheard
    match kind:
        case "text":
            return _checked_text(path, _text_blocks(path, stop, follow))
        case "html":
            return _checked_text(path, _html_blocks(path, stop, follow))
        case "pdf":
            return _capped(path, _pdf_blocks(path, stop, told), told)
        case "docx":
            return _capped(path, _checked_text(path, _docx_blocks(path, follow)), told)
        case "epub":
            return _capped(path, _checked_text(path, _epub_blocks(path, stop, follow)), told)
        case _ if is_compressed(path):
            raise DocumentError(
                path, f"holds no text Ember reads ({path.suffix} of a binary file, an archive or a PDF); skipped"
            )
        case _:
            raise DocumentError(
                path,
                f"unsupported type ({path.suffix or 'no extension'}); Ember reads text, "
                "Markdown, source code, HTML, PDF, DOCX and EPUB (also as .gz, .bz2, .xz)",
            )


def _unheard(_: str) -> None:
    """Where notes go when nobody listens."""


def _checked_text(path: Path, blocks: Iterator[Block]) -> Iterator[Block]:
    try:
        yield from blocks
    except NotRegular as exc:
        raise DocumentError(path, str(exc)) from exc
    except OSError as exc:
        raise DocumentError(path, f"cannot be read ({exc.strerror or exc})") from exc


def _capped(path: Path, blocks: Iterator[Block], note: Note) -> Iterator[Block]:
    """At most MAX_FILE_CHARS characters of `blocks` (the rest is not read; a note says so)."""
    left = MAX_FILE_CHARS
    try:
        for block in blocks:
            if len(block.text) >= left:
                if block.text[:left].strip():
                    yield Block(block.text[:left], block.page, block.start)
                note(f"{shown(path.name)}: only the first {MAX_FILE_CHARS:,} characters of text were read")
                return
            left -= len(block.text)
            yield block
    finally:
        close = getattr(blocks, "close", None)
        if callable(close):
            close()


# -- plain text --------------------------------------------------------------------------


def _opened(path: Path, follow: bool) -> contextlib.AbstractContextManager[Readable]:
    """The file's bytes: as they are, or inflated (bounded: engine.docs.compressed) when compressed."""
    return open_inflated(path, follow=follow) if is_compressed(path) else open_regular(path, follow=follow)


def _decoded_pieces(path: Path, stop: CancelToken, follow: bool) -> Iterator[str]:
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    with _opened(path, follow) as f:
        first = True
        while not stop.cancelled:
            raw = f.read(READ_BYTES)
            text = decoder.decode(raw, final=not raw)
            if first:
                if b"\x00" in raw[:SNIFF_BYTES]:
                    raise DocumentError(path, "looks binary, not text")
                text = text.removeprefix("\ufeff")
                first = False
            if text:
                yield text.replace("\r\n", "\n").replace("\r", "\n")
            if not raw:
                return


def _text_blocks(path: Path, stop: CancelToken, follow: bool) -> Iterator[Block]:
    yield from _split_pieces(_decoded_pieces(path, stop, follow))


def _split_pieces(pieces: Iterator[str]) -> Iterator[Block]:
    """Re-cut a stream of text into blocks of about READ_BYTES characters, at paragraph breaks."""
    buffer, offset = "", 0
    for piece in pieces:
        buffer += piece
        while len(buffer) >= READ_BYTES:
            cut = _break_before(buffer, READ_BYTES)
            yield Block(buffer[:cut], None, offset)
            offset += cut
            buffer = buffer[cut:]
    if buffer.strip():
        yield Block(buffer, None, offset)


def _break_before(text: str, limit: int) -> int:
    """Where to cut `text` at or before `limit`: a blank line, else a line end, else a space."""
    for sep in ("\n\n", "\n", " "):
        at = text.rfind(sep, limit // 2, limit)
        if at > 0:
            return at + len(sep)
    return limit


# -- HTML --------------------------------------------------------------------------------

_SKIP = frozenset({"script", "style", "noscript", "template", "svg", "head"})
_BLOCKS = frozenset(
    "p div section article main header footer aside nav li ul ol dl dt dd table tr blockquote pre figure "
    "figcaption form fieldset address hr br h1 h2 h3 h4 h5 h6 title".split()
)
_HEADINGS = {f"h{n}": "#" * n for n in range(1, 7)}


class _TextOfHtml(HTMLParser):
    """Collects an HTML page's visible text: block elements break paragraphs, headings become Markdown."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skipping = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIP:
            self._skipping += 1
        elif tag in _BLOCKS:
            self.parts.append("\n\n" + (_HEADINGS.get(tag, "") + " " if tag in _HEADINGS else ""))

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIP:
            self._skipping = max(0, self._skipping - 1)
        elif tag in _BLOCKS:
            self.parts.append("\n\n")

    def handle_data(self, data: str) -> None:
        if not self._skipping:
            self.parts.append(" ".join(data.split()) + (" " if data[-1:].isspace() else ""))

    def take(self) -> str:
        text, self.parts = "".join(self.parts), []
        return text

    def give_up_on_pending(self) -> None:
        """Drop an unparsed run past HTML_MAX_PENDING characters: an unclosed tag, comment or script.

        `html.parser` keeps an unfinished construct in `rawdata` and matches it again at every
        `feed`, with a regex whose memory grows with the attributes (about 150 bytes a character
        of tag), then builds all the attributes at once: one unclosed 18 MB tag took 68 s and
        2.4 GB. What is dropped is markup a browser would not show as text either; what follows
        it is parsed afresh.
        """
        if len(self.rawdata) > HTML_MAX_PENDING:
            self.rawdata = ""


def _html_blocks(path: Path, stop: CancelToken, follow: bool) -> Iterator[Block]:
    def pieces() -> Iterator[str]:
        parser = _TextOfHtml()
        for raw in _decoded_pieces(path, stop, follow):
            for at in range(0, len(raw), HTML_FEED_CHARS):
                parser.feed(raw[at : at + HTML_FEED_CHARS])
                parser.give_up_on_pending()
            yield _tidy(parser.take())
        parser.close()
        yield _tidy(parser.take())

    yield from _split_pieces(p for p in pieces() if p)


def _epub_blocks(path: Path, stop: CancelToken, follow: bool) -> Iterator[Block]:
    """An EPUB's chapters in reading order, each read by the HTML reader (engine.docs.epub bounds the zip)."""
    from engine.docs.epub import chapters

    def pieces() -> Iterator[str]:
        for chapter in chapters(path, follow=follow):
            if stop.cancelled:
                return
            parser = _TextOfHtml()
            for at in range(0, len(chapter), HTML_FEED_CHARS):
                parser.feed(chapter[at : at + HTML_FEED_CHARS])
                parser.give_up_on_pending()
            parser.close()
            yield _tidy(parser.take()) + "\n\n"

    yield from _split_pieces(p for p in pieces() if p.strip())


def _tidy(text: str) -> str:
    """Runs of blank lines (from nested blocks) become one paragraph break."""
    lines = [line.strip() for line in text.split("\n")]
    out: list[str] = []
    for line in lines:
        if line or (out and out[-1]):
            out.append(line)
    return "\n".join(out).replace("\n\n\n", "\n\n")


# -- PDF ---------------------------------------------------------------------------------


def _pdf_blocks(path: Path, stop: CancelToken, note: Note) -> Iterator[Block]:
    pdfium = pypdfium2()
    try:
        pdf = pdfium.PdfDocument(str(path))
    except pdfium.PdfiumError as exc:
        raise DocumentError(path, _pdf_open_reason(str(exc))) from exc
    try:
        texts = 0
        bad: list[tuple[int, str]] = []  # pages that cannot be read: named, the others used
        for index in range(len(pdf)):
            if stop.cancelled:
                break
            try:
                text = page_text(pdf, index)
            except PageUnreadable as exc:
                bad.append((index + 1, str(exc)))
                continue
            if text.strip():
                texts += 1
                yield Block(text, index + 1, 0)
        pages = len(pdf)
        if bad and (texts or len(bad) < pages):
            note(f"{shown(path.name)}: {_bad_pages(bad)}; the other {pages - len(bad):,} pages were read")
        elif bad:
            raise DocumentError(path, _bad_pages(bad))
        if pages and not texts and not bad and not stop.cancelled:
            raise DocumentError(
                path,
                f"has no text layer ({pages} page{'s' * (pages != 1)} of images, e.g. a "
                "scan); Ember does not read text from images",
            )
    finally:
        pdf.close()


def _bad_pages(bad: list[tuple[int, str]]) -> str:
    """ "pages 20-33 cannot be read (Failed to load page.)": runs of pages, each reason once."""
    reasons: dict[str, list[int]] = {}
    for page, reason in bad:
        reasons.setdefault(reason, []).append(page)
    parts: list[str] = []
    for reason, pages in reasons.items():
        runs = _runs(pages)
        shown_runs = ", ".join(runs[:BAD_PAGES_SHOWN]) + (
            f" and {len(runs) - BAD_PAGES_SHOWN:,} more" if len(runs) > BAD_PAGES_SHOWN else ""
        )
        word = "page" if len(pages) == 1 else "pages"
        parts.append(f"{word} {shown_runs} cannot be read ({shown(reason)})")
    return "; ".join(parts)


def _runs(pages: list[int]) -> list[str]:
    runs: list[str] = []
    first = last = pages[0]
    for page in [*pages[1:], 0]:
        if page == last + 1:
            last = page
            continue
        runs.append(str(first) if first == last else f"{first}-{last}")
        first = last = page
    return runs


def _pdf_open_reason(message: str) -> str:
    lowered = message.lower()
    if "password" in lowered:
        return "is encrypted (needs a password); Ember cannot read it"
    if "format" in lowered or "file" in lowered:
        return "is not a readable PDF (damaged or not a PDF)"
    return f"cannot be opened as a PDF ({message})"


# -- DOCX --------------------------------------------------------------------------------


def _check_docx_zip(path: Path, archive: zipfile.ZipFile) -> list[zipfile.ZipInfo]:
    """Refuse a DOCX whose parts say they would inflate beyond the limits, before inflating anything."""
    infos = archive.infolist()
    names = {info.filename: info for info in infos}
    main = names.get("word/document.xml")
    if main is None:
        raise DocumentError(path, "is not a Word document (no word/document.xml)")
    total = sum(info.file_size for info in infos)
    if main.file_size > DOCX_MAX_PART or total > DOCX_MAX_TOTAL:
        raise DocumentError(path, f"would inflate to {total / (1 << 20):,.0f} MB (a zip bomb?); refused")
    return infos


def _inflated_docx(path: Path, follow: bool) -> io.BytesIO:
    """The DOCX's parts inflated a piece at a time into a new stored (uncompressed) zip in memory.

    The pieces are counted as they come out: `zipfile` inflates a whole member in one call when
    asked for all of it, so a part that declared 1 KB and held 2 GB took 2.1 GB before its size
    was ever seen. Read READ_BYTES at a time, a member gives at most the size it declared
    (`zipfile` stops there), and python-docx then reads only these bytes.
    """
    out = io.BytesIO()
    try:
        with open_regular(path, follow=follow) as f:
            try:
                archive = zipfile.ZipFile(f)
            except (zipfile.BadZipFile, EOFError, ValueError) as exc:
                raise DocumentError(path, "is not a readable DOCX (not a zip archive)") from exc
            with archive, zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as copy:
                total = 0
                for info in _check_docx_zip(path, archive):
                    if not info.is_dir():
                        data = _inflated_part(path, archive, info, DOCX_MAX_TOTAL - total)
                        total += len(data)
                        copy.writestr(info.filename, data)
    except ZIP_ERRORS as exc:
        raise DocumentError(path, f"is not a readable DOCX ({shown(str(exc))})") from exc
    out.seek(0)
    return out


def _inflated_part(path: Path, archive: zipfile.ZipFile, info: zipfile.ZipInfo, budget: int) -> bytes:
    limit = min(budget, DOCX_MAX_PART) if info.filename == "word/document.xml" else budget
    return inflated_member(path, archive, info, limit)


def _docx_blocks(path: Path, follow: bool) -> Iterator[Block]:
    inflated = _inflated_docx(path, follow)
    import docx  # python-docx
    from docx.table import Table

    try:
        document = docx.Document(inflated)
        paragraphs: list[str] = []
        for item in document.iter_inner_content():
            if isinstance(item, Table):
                paragraphs.extend(" | ".join(cell.text.strip() for cell in row.cells) for row in item.rows)
                continue
            text = item.text.strip()
            if text:
                paragraphs.append(_heading_prefix(item.style.name if item.style else "") + text)
    except (zipfile.BadZipFile, KeyError, ValueError) as exc:
        raise DocumentError(path, f"is not a readable DOCX ({exc})") from exc
    except Exception as exc:  # lxml's XMLSyntaxError and python-docx's own errors
        raise DocumentError(path, f"is not a readable DOCX ({type(exc).__name__})") from exc
    yield from _split_pieces(iter(["\n\n".join(paragraphs)]))


def _heading_prefix(style: str | None) -> str:
    if style and style.startswith("Heading "):
        level = style.removeprefix("Heading ").strip()
        if level.isdigit():
            return "#" * min(6, int(level)) + " "
    if style == "Title":
        return "# "
    return ""
