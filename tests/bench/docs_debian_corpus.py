"""A corpus of real text nobody here wrote: Debian's licence texts and package READMEs, FAQs and NEWS.

Issue #39's "Why" was measured on such a corpus (62 files, 1,014 passages) that was not kept;
this one is rebuilt the same way from what the machine has installed: the 14 licence texts of
/usr/share/common-licenses (the symlinks GPL, LGPL and GFDL left out) and 48 files under
/usr/share/doc, each decompressed when gzipped. A file a machine lacks is left out and said so.
"""

from __future__ import annotations

import gzip
from pathlib import Path

LICENCES = Path("/usr/share/common-licenses")
DOCS = Path("/usr/share/doc")
LICENCE_FILES = (
    "Apache-2.0",
    "Artistic",
    "BSD",
    "CC0-1.0",
    "GFDL-1.2",
    "GFDL-1.3",
    "GPL-1",
    "GPL-2",
    "GPL-3",
    "LGPL-2",
    "LGPL-2.1",
    "LGPL-3",
    "MPL-1.1",
    "MPL-2.0",
)
DOC_FILES = (  # under /usr/share/doc
    "adduser/README.gz",
    "apt/README.md.gz",
    "base-files/README",
    "base-passwd/README",
    "bash/README.gz",
    "coreutils/README.gz",
    "ca-certificates/README.Debian",
    "dbus/README.gz",
    "gdb/README.gz",
    "gnupg/README.gz",
    "gzip/README.gz",
    "jq/README",
    "libcrypt-dev/README.md.gz",
    "libffi8/README.md.gz",
    "libjpeg-dev/README.md.gz",
    "libpng16-16/README.gz",
    "make/README.gz",
    "man-db/FAQ",
    "man-db/README.md.gz",
    "mawk/README",
    "openssh-client/README.Debian.gz",
    "openssl/README.md.gz",
    "procps/FAQ.gz",
    "python3.11/README.venv",
    "scrot/FAQ.gz",
    "systemd/README.gz",
    "valgrind/FAQ.txt.gz",
    "xz-utils/faq.txt.gz",
    "zlib1g-dev/FAQ.gz",
    "zstd/README.md.gz",
    "fonts-noto-mono/FAQ.md.gz",
    "libkrb5-3/README.gz",
    "postgresql-common/README.Debian.gz",
    "init-system-helpers/README.policy-rc.d.gz",
    "libgcrypt20/README.gz",
    "nodejs/README.md",
    "tcl8.6/README.md.gz",
    "wget/README",
    "xz-utils/README.gz",
    "pkgconf-bin/README.md.gz",
    "grep/NEWS.gz",
    "sed/NEWS.gz",
    "gzip/NEWS.gz",
    "less/NEWS.gz",
    "wget/NEWS.gz",
    "openssh-client/NEWS.Debian.gz",
    "diffutils/NEWS.gz",
    "patch/NEWS.gz",
)


def doc_stem(rel: str) -> str:
    """ "gzip/NEWS.gz" -> "gzip-NEWS": the corpus file's stem, the answer key of a question."""
    package, name = rel.split("/", 1)
    return f"{package}-{name.removesuffix('.gz').removesuffix('.md').removesuffix('.txt').removesuffix('.rst')}"


def licence_stem(name: str) -> str:
    return f"licence-{name}"


def _read(path: Path) -> str:
    data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    return data.decode("utf-8", errors="replace")


def write_corpus(folder: Path) -> tuple[list[Path], list[str]]:
    """The corpus's files written into `folder` (Markdown stays .md, the rest .txt); and what was missing."""
    folder.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    missing: list[str] = []
    sources = [(LICENCES / n, licence_stem(n), ".txt") for n in LICENCE_FILES]
    sources += [(DOCS / r, doc_stem(r), ".md" if ".md" in r else ".txt") for r in DOC_FILES]
    for source, stem, ext in sources:
        if not source.is_file():
            missing.append(str(source))
            continue
        out = folder / f"{stem}{ext}"
        out.write_text(_read(source), encoding="utf-8")
        written.append(out)
    return written, missing
