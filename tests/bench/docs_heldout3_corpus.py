"""Issue #50's third held-out corpus: 17 documents of a Debian machine that no other set here uses.

A documentation folder as a user would add one, chosen by file name and size only, before any
was opened: two HTML pages (Debian's users-and-groups guide, the Expat API reference), Markdown
(two Node.js API pages, three pages of pip's documentation, stress's README), a man page
(zstd, roff as installed), plain text (lsof's quick start, GnuPG's DETAILS, two OpenSSH
READMEs, tmux's README) and the NEWS of tar, GNU make and xz-utils (make's in ISO-8859-1, not
UTF-8); 10 of them gzipped, copied as they are so the collection reads `.gz` too. About
550,000 characters of text, HTML markup included. Two files first chosen turned out to be in
the Debian set already and are not here: less's NEWS (xz-utils' NEWS stands in for it) and
zstd's README.

The questions (`docs_heldout3_questions`) were written and committed before the documents were
opened, then given their quotes; nothing of Ember's was run on them and nothing is tuned on
them. The files are not copied into the repository (their licences differ: GPL, BSD, ISC
and MIT among them); each is named with its SHA-256, so a figure is only ever measured on
exactly these bytes: a file that is absent or different is reported and the corpus is skipped
rather than measured on other text.
"""

from __future__ import annotations

from pathlib import Path

from tests.bench.docs_heldout2_corpus import copy_corpus, problems_in

# (absolute source path, name in the collection, SHA-256 of the source's bytes)
MANIFEST = (
    (
        "/usr/share/doc/lsof/00QUICKSTART.gz",
        "lsof-00QUICKSTART.gz",
        "f0031c597809b59b3c2c7396e33de19c148a66f55b8aa25fc47c8bd937c02012",
    ),
    (
        "/usr/share/doc/gnupg/DETAILS.gz",
        "gnupg-DETAILS.gz",
        "ca4d06c01726859e79770e8c68ed6373574edc01c7d28f6b94fb4883c85d9e6c",
    ),
    (
        "/usr/share/man/man1/zstd.1.gz",
        "zstd-zstd.1.gz",
        "76160c367eee57c069d9a6dbc009690244928e896668666f4cc5194da798301c",
    ),
    (
        "/usr/share/doc/nodejs/api/readline.md",
        "nodejs-readline.md",
        "8bbdfc894091704801a2254cb628762c28e016727a109ca7d6152d2d6c8a9f47",
    ),
    (
        "/usr/share/doc/nodejs/api/timers.md",
        "nodejs-timers.md",
        "d103a136412491998ca846978f05cf9f2112047b48f5800045bd37a0ffd38a51",
    ),
    (
        "/usr/share/doc/python3-pip/html/topics/caching.md.gz",
        "pip-caching.md.gz",
        "70197afef37a9419c60cc4c24c8426de477a7ba9d416bc815b23962cd5057d94",
    ),
    (
        "/usr/share/doc/python3-pip/html/reference/requirements-file-format.md.gz",
        "pip-requirements-file-format.md.gz",
        "674683f94f965b31f3dfa136bf95f6c4ecc7cc63f9667ce6379188b0a3b3bbdf",
    ),
    (
        "/usr/share/doc/python3-pip/html/topics/configuration.md.gz",
        "pip-configuration.md.gz",
        "215e646f3b275cefafefcc837e627488c06478bd52c71ad95b659c89ce53fb26",
    ),
    (
        "/usr/share/doc/openssh-client/README.tun.gz",
        "openssh-README-tun.gz",
        "16cbd1334e2e0db83f5c6ec0442c2b9d06368f1a1a6d069b317b5fad83bc2f53",
    ),
    (
        "/usr/share/doc/openssh-client/README.dns",
        "openssh-README-dns",
        "e1aed1364b3c5fee3d204acd43cdc0a0bbd0a015d01843645ede1fb0ea76bc7c",
    ),
    (
        "/usr/share/doc/base-passwd/users-and-groups.html",
        "base-passwd-users-and-groups.html",
        "0d3faf981eddd55fca42b15670ecc0a3170bc0949c65d346ff471d10a5190c0e",
    ),
    (
        "/usr/share/doc/libexpat1-dev/expat.html/reference.html",
        "expat-reference.html",
        "8cfd380f135b672249ccea46d59225703c8ac8ac8115d2d3cac563049d41f4d7",
    ),
    ("/usr/share/doc/tar/NEWS.gz", "tar-NEWS.gz", "f3ea32262c80e5884d3e774eda6e1f1a6958179d29b15eef86500ac74656cec5"),
    ("/usr/share/doc/make/NEWS.gz", "make-NEWS.gz", "dadddea14d5920e5751d565c2aeb4e48a7a39e9f0c6bef99822308def4d02727"),
    (
        "/usr/share/doc/xz-utils/NEWS.gz",
        "xz-utils-NEWS.gz",
        "82eba951f032c47551fbac2c90307d1ef9cdccf93789fd14faffe8eb2bf7ebb5",
    ),
    ("/usr/share/doc/tmux/README", "tmux-README", "3c2cc8170bf586d62e67db7a01fff8540ae6b5461f421afe9f0edf0ad466b572"),
    (
        "/usr/share/doc/stress/README.md",
        "stress-README.md",
        "0ee85a57858271e68b2962a2aef2f12ba42d054a179e83fd72fb5491392ea4b2",
    ),
)


def answer_key(name: str) -> str:
    """The stem a question's answer is known by, as the bench ranks files: "tar-NEWS.gz" -> "tar-NEWS"."""
    return Path(name).stem


KEYS = frozenset(answer_key(name) for _, name, _ in MANIFEST)


def problems() -> list[str]:
    return problems_in(MANIFEST)


def write_corpus(folder: Path) -> tuple[list[Path], list[str]]:
    """As the second set's (`copy_corpus`): nothing is copied unless every file is there as recorded."""
    return copy_corpus(folder, MANIFEST)
