"""The third-party licence texts the frozen app carries (packaging/ember.spec).

Every distribution Ember needs at run time (ember-chat's requirements, followed through theirs,
as the environment it is built from has them) gives the licence files of its .dist-info folder;
each goes to THIRD-PARTY/<name>-<version>/ in the app, and THIRD-PARTY/README.txt lists every
distribution with the licence its metadata names. PySide6 and shiboken6 ship no licence file,
so the LGPLv3 (and the GPLv3 it builds on) come from packaging/licenses/.

    uv run --no-sync python packaging/licence_files.py     # the list, as README.txt has it
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

HERE = Path(__file__).resolve().parent
FOLDER = "THIRD-PARTY"
PROJECT = "ember-chat"
QT_TEXTS = (HERE / "licenses" / "LGPL-3.0.txt", HERE / "licenses" / "GPL-3.0.txt")
EXTRA_TEXTS = {"pyside6-essentials": QT_TEXTS, "shiboken6": QT_TEXTS}
LICENCE_NAME = re.compile(r"licen[cs]e|copying|notice|authors", re.IGNORECASE)


def _key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def runtime_distributions(project: str = PROJECT) -> list[metadata.Distribution]:
    """The project's run-time requirements, followed through theirs (no extras, markers for here)."""
    found: dict[str, metadata.Distribution] = {}
    todo = [project]
    while todo:
        name = todo.pop()
        if _key(name) in found:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # a requirement for another platform or Python
        found[_key(name)] = dist
        for line in dist.requires or []:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    found.pop(_key(project), None)  # Ember's own LICENSE travels at the top of the app
    return sorted(found.values(), key=lambda d: _key(d.metadata["Name"]))


def licence_of(dist: metadata.Distribution) -> str:
    """The licence its metadata names: License-Expression, else the classifiers, else License."""
    md = dist.metadata
    if expression := _field(md, "License-Expression"):
        return expression
    classifiers = [c.split("::")[-1].strip() for c in md.get_all("Classifier") or [] if c.startswith("License ::")]
    if classifiers:
        return "; ".join(classifiers)
    text = _field(md, "License").strip()
    return text.splitlines()[0] if text else "not stated in its metadata"


def _field(md: metadata.PackageMetadata, key: str) -> str:
    values = md.get_all(key) or []  # get_all: a missing field is None, never a KeyError
    return str(values[0]) if values else ""


def licence_texts(dist: metadata.Distribution) -> Iterator[tuple[Path, str]]:
    """(file, its path under the distribution's folder in THIRD-PARTY) for each licence text."""
    for file in dist.files or ():
        parts = Path(str(file)).parts
        if parts and parts[0].endswith(".dist-info") and any(LICENCE_NAME.search(p) for p in parts[1:]):
            yield Path(str(dist.locate_file(file))).resolve(), "/".join(parts[1:])
    for extra in EXTRA_TEXTS.get(_key(dist.metadata["Name"]), ()):
        yield extra, extra.name


def python_licence() -> Path | None:
    """The running Python's own LICENSE.txt (the PSF licence), where this installation has it."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (Path(sys.base_prefix, "lib", version, "LICENSE.txt"), Path(sys.base_prefix, "LICENSE.txt")):
        if candidate.is_file():
            return candidate
    return None


def folder_name(dist: metadata.Distribution) -> str:
    return f"{_key(dist.metadata['Name'])}-{dist.version}"


def readme(dists: list[metadata.Distribution]) -> str:
    lines = [
        "Third-party software in Ember, with the licence each distribution's metadata names.",
        "Each folder beside this file holds the licence texts that distribution ships.",
        "PySide6 and Qt are used under the LGPLv3, dynamically linked: the libraries in this",
        "folder's parent (_internal/PySide6) may be replaced with compatible builds of your own.",
        "",
    ]
    for dist in dists:
        texts = "" if any(True for _ in licence_texts(dist)) else "  (no licence file in its distribution)"
        lines.append(f"{dist.metadata['Name']} {dist.version}: {licence_of(dist)}{texts}")
    return "\n".join(lines) + "\n"


def spec_datas(work: Path) -> list[tuple[str, str]]:
    """PyInstaller `datas` entries: every licence text, and README.txt written into `work`."""
    dists = runtime_distributions()
    out: list[tuple[str, str]] = []
    for dist in dists:
        for source, relative in licence_texts(dist):
            dest = Path(FOLDER, folder_name(dist), relative).parent
            out.append((str(source), dest.as_posix()))
    python = python_licence()
    if python is not None:  # the interpreter and standard library the app carries
        out.append((str(python), f"{FOLDER}/python-{sys.version_info.major}.{sys.version_info.minor}"))
    work.mkdir(parents=True, exist_ok=True)
    (work / "README.txt").write_text(readme(dists), encoding="utf-8")
    out.append((str(work / "README.txt"), FOLDER))
    return out


if __name__ == "__main__":
    sys.stdout.write(readme(runtime_distributions()))
