"""The catalogue shipped with Ember: a reviewed list of instruction GGUF models (issue #34).

`catalogue.json` beside this module holds about 15 well-known models from 360M to 14B
parameters. Each entry names its Hugging Face repository, the files offered per quantisation
with their approximate size, the licence and its link, the context length, whether the model
thinks, its tool-call family (a key of `models.formats.BY_KEY`, or none), for a vision model
the image projector (`mmproj*.gguf`) every download of it brings along, and, where they
were checked, the architecture figures the memory estimate needs. `checked_against` records
the stored copy of the repository listing or model card each entry was checked against
(docs/catalogue.md has the table). Exact sizes and SHA-256 come from the Hub at download time.

Reading it touches no network: the catalogue works offline.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, cast

from models.errors import EmberError
from models.formats import BY_KEY
from models.gguf.names import is_gguf_name, is_projector_name
from models.library.json_input import JsonInputError, read_json_input
from models.library.memory import KV_CACHE_TYPES

CATALOGUE_FILE = Path(__file__).with_name("catalogue.json")
CATALOGUE_MAX_BYTES = 1024 * 1024
CATALOGUE_VERSION = 1


class CatalogueError(EmberError):
    """The shipped catalogue cannot be read; `str(err)` is one line."""


@dataclass(frozen=True, slots=True)
class Architecture:
    """The figures a KV-cache estimate needs, from the model's config."""

    layers: int
    kv_heads: int
    head_dim: int
    embedding: int

    def kv_bytes_per_token(self, kv_cache: str = "f16") -> float:
        """K and V of every layer for one position, in bytes of the cache type."""
        return 2 * self.layers * self.kv_heads * self.head_dim * KV_CACHE_TYPES[kv_cache]


@dataclass(frozen=True, slots=True)
class CatalogueFile:
    """One downloadable file of an entry: its quantisation, name in the repository, approximate size."""

    quant: str
    name: str
    size: int


@dataclass(frozen=True, slots=True)
class CatalogueProjector:
    """A vision model's image projector (`mmproj*.gguf`), downloaded with whichever file is chosen."""

    name: str
    size: int


@dataclass(frozen=True, slots=True)
class CatalogueEntry:
    key: str
    name: str
    repo: str
    parameters: str  # as the model's authors say it: "360M", "7B"
    parameters_b: float  # billions, for estimates and ordering
    quality: int  # the reviewers' rank, 1 (smallest) to 10: "best first" among what fits
    licence: str
    licence_url: str
    context_length: int
    thinks: bool
    tool_calls: str | None  # a models.formats key, None when the table has no family for it
    architecture: Architecture | None
    files: tuple[CatalogueFile, ...]
    checked_against: tuple[str, ...]
    unchecked: tuple[str, ...] = ()
    projector: CatalogueProjector | None = None

    @property
    def vision(self) -> bool:
        """Whether the entry sees images: it names the projector its download brings along."""
        return self.projector is not None

    @property
    def default_file(self) -> CatalogueFile:
        return self.files[0]

    @property
    def page_url(self) -> str:
        return f"https://huggingface.co/{self.repo}"

    def file(self, quant_or_name: str) -> CatalogueFile | None:
        """The file with this quantisation or file name (case-insensitive), if the entry has it."""
        wanted = quant_or_name.casefold()
        return next((f for f in self.files if wanted in (f.quant.casefold(), f.name.casefold())), None)

    def matches(self, text: str) -> bool:
        """Whether every word of `text` appears in the name, repository, size or licence."""
        haystack = " ".join(
            (
                self.name,
                self.repo,
                self.parameters,
                self.licence,
                self.key,
                "thinking" if self.thinks else "",
                "vision" if self.vision else "",
            )
        ).casefold()
        return all(word in haystack for word in text.casefold().split())


# --- reading -------------------------------------------------------------------------------


def _need(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    value = obj.get(key)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise CatalogueError(f"{where}: '{key}' is missing or not a {getattr(kind, '__name__', kind)}")
    return value


def _object(raw: object) -> dict[str, Any] | None:
    return cast(dict[str, Any], raw) if isinstance(raw, dict) else None


def _architecture(raw: object, where: str) -> Architecture | None:
    if raw is None:
        return None
    obj = _object(raw)
    if obj is None:
        raise CatalogueError(f"{where}: 'architecture' is not an object")
    figures = [_need(obj, k, int, where) for k in ("layers", "kv_heads", "head_dim", "embedding")]
    if min(figures) <= 0:
        raise CatalogueError(f"{where}: architecture figures must be positive")
    return Architecture(*figures)


def _file(raw: object, where: str) -> CatalogueFile:
    obj = _object(raw)
    if obj is None:
        raise CatalogueError(f"{where}: a file is not an object")
    name = _need(obj, "name", str, where)
    if not name.endswith(".gguf") or "/" in name:
        raise CatalogueError(f"{where}: file name {name!r} is not a .gguf file name")
    size = _need(obj, "size", int, where)
    if size <= 0:
        raise CatalogueError(f"{where}: file {name} has no size")
    return CatalogueFile(_need(obj, "quant", str, where), name, size)


def _projector(raw: object, where: str, files: Sequence[CatalogueFile]) -> CatalogueProjector | None:
    if raw is None:
        return None
    obj = _object(raw)
    if obj is None:
        raise CatalogueError(f"{where}: 'projector' is not an object")
    name = _need(obj, "file", str, where)
    if not is_gguf_name(name) or "/" in name or not is_projector_name(name):
        raise CatalogueError(f"{where}: projector {name!r} is not an mmproj*.gguf file name")
    if any(f.name == name for f in files):
        raise CatalogueError(f"{where}: projector {name} is also offered as a model file")
    size = _need(obj, "size", int, where)
    if size <= 0:
        raise CatalogueError(f"{where}: projector {name} has no size")
    return CatalogueProjector(name, size)


def _strings(raw: object, where: str, key: str) -> tuple[str, ...]:
    items = cast(list[object], raw) if isinstance(raw, list) else None
    if items is None or not all(isinstance(s, str) for s in items):
        raise CatalogueError(f"{where}: '{key}' is not a list of strings")
    return tuple(str(s) for s in items)


def parse_entry(raw: object, index: int) -> CatalogueEntry:
    """One entry from its JSON object; CatalogueError (one line) for anything malformed."""
    obj = _object(raw)
    if obj is None:
        raise CatalogueError(f"entry {index} is not an object")
    where = f"entry {obj.get('key', index)!s}"
    tool_calls = obj.get("tool_calls")
    if tool_calls is not None and tool_calls not in BY_KEY:
        raise CatalogueError(f"{where}: tool-call family {tool_calls!r} is not in models.formats")
    files = cast(list[object], obj["files"]) if isinstance(obj.get("files"), list) else []
    if not files:
        raise CatalogueError(f"{where}: 'files' is missing or empty")
    checked = _strings(obj.get("checked_against"), where, "checked_against")
    if not checked:
        raise CatalogueError(f"{where}: no source it was checked against")
    repo = _need(obj, "repo", str, where)
    if repo.count("/") != 1:
        raise CatalogueError(f"{where}: repository {repo!r} is not owner/name")
    model_files = tuple(_file(f, where) for f in files)
    return CatalogueEntry(
        key=_need(obj, "key", str, where),
        name=_need(obj, "name", str, where),
        repo=repo,
        parameters=_need(obj, "parameters", str, where),
        parameters_b=float(_need(obj, "parameters_b", (int, float), where)),
        quality=_need(obj, "quality", int, where),
        licence=_need(obj, "licence", str, where),
        licence_url=_need(obj, "licence_url", str, where),
        context_length=_need(obj, "context_length", int, where),
        thinks=_need(obj, "thinks", bool, where),
        tool_calls=tool_calls,
        architecture=_architecture(obj.get("architecture"), where),
        files=model_files,
        checked_against=checked,
        unchecked=_strings(obj.get("unchecked", []), where, "unchecked"),
        projector=_projector(obj.get("projector"), where, model_files),
    )


def parse_catalogue(data: object) -> tuple[CatalogueEntry, ...]:
    obj = _object(data)
    if obj is None or obj.get("version") != CATALOGUE_VERSION:
        raise CatalogueError(f"not a version {CATALOGUE_VERSION} catalogue")
    models = obj.get("models")
    if not isinstance(models, list):
        raise CatalogueError("'models' is not a list")
    entries = tuple(parse_entry(raw, i) for i, raw in enumerate(cast(list[object], models)))
    keys = [e.key for e in entries]
    if len(set(keys)) != len(keys):
        raise CatalogueError("two entries share a key")
    return entries


def read_catalogue(path: Path = CATALOGUE_FILE) -> tuple[CatalogueEntry, ...]:
    """Every entry of the catalogue at `path`; CatalogueError (one line) when it cannot be used."""
    try:
        data = read_json_input(path, max_bytes=CATALOGUE_MAX_BYTES)
    except JsonInputError as exc:
        raise CatalogueError(f"the model catalogue cannot be read: {exc}") from exc
    return parse_catalogue(data)


@cache
def shipped_catalogue() -> tuple[CatalogueEntry, ...]:
    """The catalogue shipped with this Ember (read once)."""
    return read_catalogue()


def search(entries: Iterable[CatalogueEntry], text: str) -> list[CatalogueEntry]:
    """The entries matching every word of `text` (all of them for blank text), in catalogue order."""
    return [e for e in entries if e.matches(text)] if text.strip() else list(entries)


def entry_for_repo(entries: Iterable[CatalogueEntry], repo: str) -> CatalogueEntry | None:
    """The entry that downloads from `repo` (case-insensitive, as the Hub treats ids), if any."""
    return next((e for e in entries if e.repo.casefold() == repo.casefold()), None)
