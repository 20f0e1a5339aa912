"""Generated documents for the documents benchmarks (and tests): prose, needle corpora, PDFs.

PDFs are written with pypdfium2 itself (PDFium's page-object API, the standard Helvetica
font), so a benchmark needs nothing beyond Ember's own dependencies.
"""

from __future__ import annotations

import ctypes
import importlib
import itertools
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

WORDS = (
    "river stone window garden market ledger harbor candle meadow copper lantern orchard violet thunder "
    "pepper saddle timber velvet anchor bridge cellar falcon glacier hammer island jacket kettle ladder "
    "magnet needle oyster pillar quartz ribbon signal tunnel umbrella valley walnut yarrow zephyr basket "
    "canyon dagger engine feather goblet hollow insect jungle kernel lemon mirror nutmeg olive parrot "
    "the of and to in is was for on with as by at from that this it are be or"
).split()
_SYLLABLES = "ka lo mi ru te za po ve shi dra quo fen bal tor wix yun gar hel nym ost".split()


def prose(rng: random.Random, words: int, vocabulary: Sequence[str] = WORDS) -> str:
    """Sentences of `vocabulary`'s words, a paragraph break every ~60 words."""
    out: list[str] = []
    for i in range(words):
        word = rng.choice(vocabulary)
        out.append(word.capitalize() if i % 12 == 0 else word)
        if i % 12 == 11:
            out[-1] += "."
        if i % 60 == 59:
            out[-1] += "\n\n"
    return " ".join(out).replace("\n\n ", "\n\n")


# The commonest English words, most frequent first: the head of the Zipf vocabulary below.
FUNCTION_WORDS = (
    "the of and to a in is that for it was on with as be by at this are from or have an not but "
    "they which one you were all we her she there their been has would more if will can when who "
    "what so up out about into than them only other its some could these two may then do first "
    "any my now such like our over man me even most made after also did many before must through "
    "back years where much your way well down should because each just those people how too "
    "little state good very make world still own see men work long get here between both life "
    "being under never day same another know while last might us great old year off come since "
    "against go came right used take three"
).split()


@dataclass(frozen=True, slots=True)
class ZipfVocabulary:
    """A deterministic vocabulary whose word frequencies follow Zipf's law, as natural text does.

    The word of rank r is drawn with probability proportional to 1 / r: a few words ("the",
    "of") are in nearly every passage, most are rare, so a question's content words match a
    few passages, not all of them (the search benchmark's corpus; no download, same every run).
    """

    words: tuple[str, ...]
    cum_weights: tuple[float, ...]

    @classmethod
    def build(cls, size: int = 30_000, seed: int = 21) -> ZipfVocabulary:
        rng = random.Random(seed)
        words = list(dict.fromkeys(FUNCTION_WORDS))
        seen = set(words)
        while len(words) < size:
            word = "".join(rng.choice(_SYLLABLES) for _ in range(rng.choice((2, 3, 3, 4))))
            if word not in seen:
                seen.add(word)
                words.append(word)
        return cls(tuple(words), tuple(itertools.accumulate(1.0 / rank for rank in range(1, size + 1))))

    def passage(self, rng: random.Random, words: int) -> str:
        """`words` words drawn by frequency, in sentences of twelve."""
        drawn = rng.choices(self.words, cum_weights=self.cum_weights, k=words)
        sentences = (" ".join(drawn[i : i + 12]).capitalize() + "." for i in range(0, words, 12))
        return " ".join(sentences)

    def question(self, rng: random.Random, passage: str) -> str:
        """A question about `passage`: three of its less common words, in a sentence of common ones."""
        common = set(self.words[: len(FUNCTION_WORDS)])
        content = sorted({w for w in passage.lower().replace(".", " ").split() if w not in common})
        picked = rng.sample(content, min(3, len(content)))
        return f"What is the {' '.join(picked[:2])} of {' '.join(picked[2:])}?"


def name(rng: random.Random) -> str:
    return "".join(rng.choice(_SYLLABLES) for _ in range(3)).capitalize()


@dataclass(frozen=True, slots=True)
class Needle:
    path: Path
    question: str
    answer: str


def needle_corpus(folder: Path, files: int = 200, words: int = 500, seed: int = 11) -> list[Needle]:
    """`files` Markdown files, each hiding one unique fact; the questions that find them."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    needles: list[Needle] = []
    used: set[str] = set()
    for i in range(files):
        project = name(rng)
        while project in used:
            project = name(rng)
        used.add(project)
        code = f"{rng.randint(1000, 9999)}-{name(rng).lower()}"
        fact = f"The access code for project {project} is {code}."
        body = prose(rng, words)
        cut = body.index("\n\n", len(body) // 3) if "\n\n" in body[len(body) // 3 :] else len(body)
        text = f"# Notes {i}\n\n{body[:cut]}\n\n{fact}\n\n{body[cut:].lstrip()}\n"
        path = folder / f"notes-{i:03d}.md"
        path.write_text(text, encoding="utf-8")
        needles.append(Needle(path, f"What is the access code for project {project}?", code))
    return needles


def write_pdf(
    path: Path, pages: Sequence[str] | Iterator[str], lines_per_page: int = 45, chars_per_line: int = 95
) -> int:
    """A PDF with a text layer, one page per text (wrapped to lines); returns the page count.

    Pages are written in small documents of `GROUP` pages and then imported into the file:
    PDFium's page writing slows down as one document grows (2,000 pages written into one
    document take minutes; this way, seconds).
    """
    pdfium: Any = importlib.import_module("pypdfium2")  # untyped
    out = pdfium.PdfDocument.new()
    count = 0
    try:
        group: list[str] = []
        for text in pages:
            group.append(text)
            if len(group) == GROUP:
                count += _import_group(out, group, lines_per_page, chars_per_line)
                group = []
        if group:
            count += _import_group(out, group, lines_per_page, chars_per_line)
        out.save(str(path))
    finally:
        out.close()
    return count


GROUP = 50


def _import_group(out: Any, texts: list[str], lines_per_page: int, chars_per_line: int) -> int:
    pdfium: Any = importlib.import_module("pypdfium2")  # untyped
    raw: Any = importlib.import_module("pypdfium2.raw")
    pdf = pdfium.PdfDocument.new()
    pointer_to: Any = ctypes.POINTER
    wide: Any = pointer_to(raw.FPDF_WCHAR)  # UTF-16 text, as FPDFText_SetText takes it
    try:
        font = raw.FPDFText_LoadStandardFont(pdf.raw, b"Helvetica")  # one font object for every line
        for text in texts:
            page = pdf.new_page(612, 792)
            for row, line in enumerate(_wrap(text, chars_per_line)[:lines_per_page]):
                obj = raw.FPDFPageObj_CreateTextObj(pdf.raw, font, 10.0)
                buffer = ctypes.create_string_buffer((line + "\0").encode("utf-16-le"))
                raw.FPDFText_SetText(obj, ctypes.cast(buffer, wide))
                raw.FPDFPageObj_Transform(obj, 1, 0, 0, 1, 40, 750 - row * 15)
                raw.FPDFPage_InsertObject(page.raw, obj)
            raw.FPDFPage_GenerateContent(page.raw)
            page.close()
        out.import_pages(pdf)
    finally:
        pdf.close()
    return len(texts)


def _wrap(text: str, width: int) -> list[str]:
    lines: list[str] = []
    for paragraph in text.split("\n"):
        line = ""
        for word in paragraph.split():
            if line and len(line) + 1 + len(word) > width:
                lines.append(line)
                line = word
            else:
                line = f"{line} {word}" if line else word
        lines.append(line)
    return lines
