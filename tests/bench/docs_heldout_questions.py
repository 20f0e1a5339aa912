"""40 questions over the held-out corpus (`docs_heldout_corpus`), written from file names and headings only.

KEYWORD questions use the headings' own words; PARAPHRASE questions use other words for what a
heading promises, as a user who has not read the file would ask. The answer is the file's stem
(`answer_key`). Written before any passage was read (issue #50's held-out check), and not
changed after the first measurement.
"""

from __future__ import annotations

ISO = "iso-codes-README.md"
YQ = "yq-README.rst"
XKB = "xkb-data-README"
FREETYPE = "libfreetype6-README"
DATE = "util-linux-parse-date.txt"
WIZARD = "libjpeg62-turbo-dev-wizard.txt"
USAGE = "libjpeg62-turbo-dev-usage.txt"
XZ = "liblzma-dev-xz-file-format.txt"
GCC = "cpp-12-README"
DPMS = "xextproto-dpms.txt"
DEJAVU = "fonts-dejavu-core-README"
FAKEROOT = "fakeroot-README"

KEYWORD: list[tuple[str, str]] = [
    ("iso-codes ISO 3166-2 status of translations", ISO),
    ("yq --yaml-roundtrip preserving tags and styles", YQ),
    ("xkb-data support of Apple keyboards, Fn key not working", XKB),
    ("FreeType 2 mailing lists and patches", FREETYPE),
    ("parse_datetime relative items in date strings", DATE),
    ("cjpeg quantization table adjustment and sampling factor adjustment", WIZARD),
    ("djpeg command line switches for advanced users", USAGE),
    (".xz stream header magic bytes and CRC32", XZ),
    ("g++ undefined reference to static const array in class", GCC),
    ("DPMS extension requests, events and encoding", DPMS),
    ("DejaVu fonts characters from Arev fonts", DEJAVU),
    ("fakeroot saving state, rsync backup of a remote machine", FAKEROOT),
    ("xz file format block header: compressed size and uncompressed size", XZ),
    ("jpegtran switches and the comment utilities wrjpgcom", USAGE),
    ("cleaning /etc/X11/xkb", XKB),
    ("date input formats: seconds since the Epoch", DATE),
    ("C++ exceptions don't work with C libraries", GCC),
    ("multiple scan / progression control", WIZARD),
    ("yq XML support and TOML support", YQ),
    ("iso-codes developing using pkgconfig", ISO),
]

PARAPHRASE: list[tuple[str, str]] = [
    ("Where do the translated names of countries and languages come from, and how can I help translate them?", ISO),
    ("Is there a command-line tool like jq for YAML files that keeps comments and formatting?", YQ),
    ("The special function key on my Mac keyboard does nothing under X; what can I do?", XKB),
    ("How do I report a problem with the font rendering library or send a fix?", FREETYPE),
    ("Which ways of writing a day and time, such as 'next Thursday' or 'two weeks ago', are understood?", DATE),
    ("How do I write my own plan of which coefficients go into each pass when compressing a photo?", WIZARD),
    ("Which options make decompressing a photo faster at the cost of some quality?", USAGE),
    ("How does a reader check that a compressed container file was not truncated or damaged?", XZ),
    (
        "I get a linker error about a constant member of a class that I never defined outside it; is it a "
        "compiler bug?",
        GCC,
    ),
    ("How can a program tell the monitor to go into standby or switch off to save power?", DPMS),
    ("Which typeface family borrowed glyphs from another font project, and who holds their copyright?", DEJAVU),
    ("How do I keep file owners right when copying a whole system as a normal user without root?", FAKEROOT),
    ("What goes wrong when an exception is thrown through a callback from a plain C library?", GCC),
    ("Where is the list of every keyboard model, layout and variant I can choose from?", XKB),
    ("Which command can rotate or crop an existing photo file without losing quality?", USAGE),
    ("How are large numbers stored in a variable number of bytes in this compressed file layout?", XZ),
    ("How should I report a problem with the system's C compiler on this distribution?", GCC),
    ("What does a bare number such as 1230 mean when it is given as a time?", DATE),
    ("Which standard codes for currencies and for writing systems are included?", ISO),
    ("How do I convert between this data format and TOML or XML on the command line?", YQ),
]
