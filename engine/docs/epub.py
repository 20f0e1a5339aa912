"""An EPUB's chapters, in reading order, as XHTML text (the HTML reader in `extract` takes it from there).

An EPUB is a zip: `META-INF/container.xml` names the package file (OPF), whose spine lists the
chapters in reading order through its manifest. Bounded like DOCX: the declared sizes are
checked before anything is inflated (a chapter over `MAX_PART`, all parts over `MAX_TOTAL`,
more than `MAX_MEMBERS` entries: refused), and each chapter is inflated a piece at a time and
counted, so a member that lies about its size stops at its limit. A spine may name a member any
number of times (an 88 KB file listing one 60 MB chapter 12 times made 268 M characters): each
chapter is read once, and what the spine inflates is counted against `MAX_TOTAL` as a whole.
"""

from __future__ import annotations

import posixpath
import zipfile
from collections.abc import Iterator
from pathlib import Path
from xml.etree import ElementTree

from engine.docs.errors import DocumentError
from engine.docs.names import shown
from engine.docs.regular import open_regular
from engine.docs.zip_member import ZIP_ERRORS, inflated_member

MAX_PART = 64 << 20  # one chapter (a long book's chapter is well under 1 MB)
MAX_TOTAL = 256 << 20  # every part together
MAX_MEMBERS = 20_000
MAX_XML = 4 << 20  # container.xml and the OPF
_XHTML = frozenset({"application/xhtml+xml", "text/html", "application/xml", "text/xml"})


def chapters(path: Path, *, follow: bool = True) -> Iterator[str]:
    """Each spine document's text (UTF-8, undecodable bytes replaced); DocumentError (one line) when unusable."""
    try:
        with open_regular(path, follow=follow) as f:
            try:
                archive = zipfile.ZipFile(f)
            except (zipfile.BadZipFile, EOFError, ValueError) as exc:
                raise DocumentError(path, "is not a readable EPUB (not a zip archive)") from exc
            with archive:
                _check_sizes(path, archive)
                left = MAX_TOTAL
                for name in _spine(path, archive):
                    data = inflated_member(path, archive, name, min(MAX_PART, left))
                    left -= len(data)
                    yield data.decode("utf-8", errors="replace")
    except (*ZIP_ERRORS, KeyError) as exc:  # KeyError: the spine names a member that is not there
        raise DocumentError(path, f"is not a readable EPUB ({shown(str(exc))})") from exc


def _check_sizes(path: Path, archive: zipfile.ZipFile) -> None:
    infos = archive.infolist()
    total = sum(i.file_size for i in infos)
    if len(infos) > MAX_MEMBERS or total > MAX_TOTAL or any(i.file_size > MAX_PART for i in infos):
        raise DocumentError(
            path, f"would inflate to {total / (1 << 20):,.0f} MB in {len(infos):,} parts (a zip bomb?); refused"
        )


def _spine(path: Path, archive: zipfile.ZipFile) -> list[str]:
    """The chapters' names in the zip, in reading order, each once (the first time the spine names it)."""
    try:
        container = ElementTree.fromstring(inflated_member(path, archive, "META-INF/container.xml", MAX_XML))
        rootfile = next(e for e in container.iter() if e.tag.endswith("rootfile"))
        opf_name = rootfile.attrib["full-path"]
        opf = ElementTree.fromstring(inflated_member(path, archive, opf_name, MAX_XML))
    except (ElementTree.ParseError, StopIteration) as exc:
        raise DocumentError(path, "is not a readable EPUB (no package file)") from exc
    base = posixpath.dirname(opf_name)
    manifest = {e.attrib.get("id"): e.attrib for e in opf.iter() if e.tag.endswith("}item") or e.tag == "item"}
    names: list[str] = []
    for ref in (e for e in opf.iter() if e.tag.endswith("itemref")):
        item = manifest.get(ref.attrib.get("idref"))
        if item is not None and item.get("media-type", "") in _XHTML and item.get("href"):
            names.append(posixpath.normpath(posixpath.join(base, item["href"].split("#")[0])))
    if not names:
        raise DocumentError(path, "is an EPUB with no chapters in its spine")
    return list(dict.fromkeys(names))
