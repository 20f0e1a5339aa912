"""Issue #50's second held-out corpus: 20 documents of a Debian machine that no other set here uses.

A documentation folder as a user would add one: four HTML manuals (ninja, GNU time, bzip2,
fontconfig) and Valgrind's Cachegrind chapter, the sed FAQ, a man page (xargs, roff as
installed), Markdown API pages (Node.js path, querystring, string_decoder), git's README and
four release notes (two of them security notes of the same maintenance line, nearly alike),
short READMEs, NEWS files and a Debian copyright file; 7 of them gzipped, copied as they are so
the collection reads `.gz` too. About 490,000 characters of text.

The questions (`docs_heldout2_questions`) were written from these files by an engineer who had
not seen the other sets' questions, before anything of Ember's was run on them; nothing is
tuned on them. The files are not copied into the repository (their licences differ:
GPL, GFDL, Apache, MIT, bzip2's); each is named with its SHA-256, so a figure is only ever
measured on exactly these bytes: a file that is absent or different is reported and the corpus
is skipped rather than measured on other text.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

# (absolute source path, name in the collection, SHA-256 of the source's bytes)
MANIFEST = (
    ("/usr/share/doc/bc/README", "bc-README", "1f1a3c4cc0eb5ad7b4f58d9275abb5fc9b6a8d6b235802527f98ad7dfb0a77e2"),
    ("/usr/share/doc/bc/NEWS.gz", "bc-NEWS.gz", "9d2fdc3836e2c8b966955ee615566bfd1177d6a910126406b1d0c70fee3627a7"),
    ("/usr/share/doc/time/NEWS.gz", "time-NEWS.gz", "d4f91cf3292a209fdc81cf957d9811dd1120d8161a2df08444c09962be435de8"),
    (
        "/usr/share/doc/time/time.html",
        "time-manual.html",
        "e90753640f8ca23c9ca57c1cda5dee2b3a6520e78ddefae48dabf484c615f026",
    ),
    ("/usr/share/doc/sed/BUGS.gz", "sed-BUGS.gz", "d68bb90cd87548cc68aa6fddf861b98ca4b862e2d3e82aec16c3f1c01c04289c"),
    (
        "/usr/share/doc/sed/sedfaq.txt.gz",
        "sed-sedfaq.txt.gz",
        "25d2d2e4b84e90c4e09684c93a07ba0695b21ccc23360ece4509eacedf6fb7b8",
    ),
    (
        "/usr/share/doc/git/README.md",
        "git-README.md",
        "1af61b4ef89b0b290946bb6436a08ca7432ddf0845ea9b0236e6981da45a22ea",
    ),
    (
        "/usr/share/doc/git/RelNotes/2.38.0.txt",
        "git-RelNotes-2.38.0.txt",
        "9085a542b2bd8ac81d8d1bbb0918a9f94c9b70a2d6e3d37e0569d2544cdae70e",
    ),
    (
        "/usr/share/doc/git/RelNotes/2.30.7.txt",
        "git-RelNotes-2.30.7.txt",
        "4fe123c5a626e4cc5a420d8d0d7633d1acb0300672ea1869c502d6fa7d830ebc",
    ),
    (
        "/usr/share/doc/git/RelNotes/2.30.9.txt",
        "git-RelNotes-2.30.9.txt",
        "2bf6cf597573494f3276b1cd2af891cc3fe14edb39dd9bf124b1e1f20be7fe4f",
    ),
    (
        "/usr/share/doc/git/RelNotes/2.39.3.txt",
        "git-RelNotes-2.39.3.txt",
        "3d05145c07fa9d05887aa44df525a58bb5b9fb5231eeca9d4072a413714597fe",
    ),
    (
        "/usr/share/doc/nodejs/api/string_decoder.md",
        "nodejs-string_decoder.md",
        "16dc71931f8842da192d70c7bde34b6752c60eb83c7e87f8a333a285906ebe2f",
    ),
    (
        "/usr/share/doc/nodejs/api/querystring.md",
        "nodejs-querystring.md",
        "be244b22c9801710b1b5be4a79366a5c69e0d486a32d0cc7291892623f483382",
    ),
    (
        "/usr/share/doc/nodejs/api/path.md",
        "nodejs-path.md",
        "742b6c9e70b6b871d7a3476878a730b428c9ec50ce7fab0800240c0ec34e50e6",
    ),
    (
        "/usr/share/doc/ninja-build/manual.html",
        "ninja-build-manual.html",
        "b1a2f010c30cfe7da72773b5e510eef3668a02f862e678462262780b3326f004",
    ),
    (
        "/usr/share/doc/ninja-build/copyright",
        "ninja-build-copyright",
        "1134fe05b5a52ce2a81fb233e421655bb45e5f5db74164478ea85343baf52b86",
    ),
    (
        "/usr/share/doc/bzip2/manual.html",
        "bzip2-manual.html",
        "34f5eaeb37488b51662316b8d9f54228c96f72b54aec3bfc17cd731e3ce9bbd2",
    ),
    (
        "/usr/share/doc/fontconfig/fontconfig-user.html",
        "fontconfig-user.html",
        "202611a4cdadf782cbc48e46d5e6e9a36221dc90c5c408bfb54d265ed6691397",
    ),
    (
        "/usr/share/doc/valgrind/html/cg-manual.html",
        "valgrind-cg-manual.html",
        "b5ae35e64c23dbbfa416e050198a43b964f73d91efc65bd61f1e4508709a7ac6",
    ),
    (
        "/usr/share/man/man1/xargs.1.gz",
        "findutils-xargs.1.gz",
        "0f485b50e182c6ef978c4a38a7022c4785b0b4ee592ab186b06e0d90e3c40c3f",
    ),
)


def answer_key(name: str) -> str:
    """The stem a question's answer is known by, as the bench ranks files: "sed-BUGS.gz" -> "sed-BUGS"."""
    return Path(name).stem


KEYS = frozenset(answer_key(name) for _, name, _ in MANIFEST)


Manifest = tuple[tuple[str, str, str], ...]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def problems_in(manifest: Manifest) -> list[str]:
    """One line per manifest file that is absent or not the bytes the questions were written on."""
    out: list[str] = []
    for source, _, digest in manifest:
        path = Path(source)
        if not path.is_file():
            out.append(f"{source}: missing")
        elif _sha256(path) != digest:
            out.append(f"{source}: differs from the file the questions were written on (SHA-256)")
    return out


def copy_corpus(folder: Path, manifest: Manifest) -> tuple[list[Path], list[str]]:
    """The files copied into `folder` as they are (gzipped stays gzipped); and what was absent or changed.

    Nothing is copied unless every file is there with its recorded bytes: a partial corpus
    would give figures that look comparable and are not.
    """
    missing = problems_in(manifest)
    if missing:
        return [], missing
    folder.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for source, name, _ in manifest:
        out = folder / name
        shutil.copyfile(source, out)
        written.append(out)
    return written, []


def problems() -> list[str]:
    return problems_in(MANIFEST)


def write_corpus(folder: Path) -> tuple[list[Path], list[str]]:
    return copy_corpus(folder, MANIFEST)
