"""What the "Get models" page shows, as plain values; no Qt here.

A row (`ModelOffer`) is a catalogue entry, or a repository found on the Hub, with the files
it offers, each with its size and its "fits this machine" mark (models.library.fit), the one
to offer by default, and whether it is already in the models folder. Catalogue rows come
ranked best first for this machine; the default list is the best few that fit.

Also here: the free memory measured for the marks (RAM always, the GPU through llama.cpp's
device list when it has one), the file(s) a download fetches from a repository's listing,
and the words for a download's progress.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from engine.api.errors import EmberError
from engine.api.library import CatalogueEntry, CatalogueFile
from engine.api.machine import (
    USEFUL_TPS,
    FreeMemory,
    MachineProfile,
    Prediction,
    Suggestion,
    Verdict,
    available_memory,
    estimate_need,
    fit_file,
    judge,
    predict_file,
    ranked,
    short_list,
)
from engine.api.models import (
    DEFAULT_CONTEXT_LENGTH,
    format_bytes,
    is_first_part,
    is_projector_name,
    model_key,
    quant_in_name,
    useful_tps,
)

if TYPE_CHECKING:  # engine.api.downloads brings httpx: the page imports it when it first asks the Hub
    from engine.api.downloads import HubFile, HubRepo

log = logging.getLogger("desktop.get_models")

SHORT_LIST = 5
HUB_ROWS = 8  # Hub results listed with their files (each needs one listing request)
_F = TypeVar("_F", bound="HubFile")


class DownloadChoiceError(EmberError):
    """The file a row offers is not in the repository's listing; one line."""


@dataclass(frozen=True, slots=True)
class OfferedFile:
    name: str
    quant: str
    size: int
    verdict: Verdict
    prediction: Prediction | None = None  # its speed here (models.library.speed), when a profile is known

    @property
    def label(self) -> str:
        """'Q4_K_M · 2.5 GB' for the file menu (and '· about 6 words a second here')."""
        speed = f" · {self.prediction.words()}" if self.prediction is not None else ""
        return f"{self.quant} · {format_bytes(self.size)}{speed}"


@dataclass(frozen=True, slots=True)
class ModelOffer:
    """One row of the page."""

    key: str  # the catalogue key, or "hub:owner/name"
    title: str
    repo: str
    facts: str
    licence: str
    licence_url: str
    files: tuple[OfferedFile, ...]
    default_index: int = 0
    entry: CatalogueEntry | None = None
    gated: bool = False
    downloaded: Path | None = None
    kept: tuple[str, int, int] | None = None  # (file, bytes, size) of a download left part-way: Resume

    @property
    def default_file(self) -> OfferedFile:
        return self.files[self.default_index]


def quant_of(name: str) -> str:
    """The quantisation named in a GGUF file name ('Qwen3-4B-Q4_K_M.gguf' -> 'Q4_K_M'), else '?'."""
    return quant_in_name(name) or "?"


def facts_line(entry: CatalogueEntry) -> str:
    """'4B parameters · vision (with its 851 MB image projector) · thinks · 40,960-token context'."""
    parts = [f"{entry.parameters} parameters"]
    if entry.projector is not None:
        parts.append(f"vision (with its {format_bytes(entry.projector.size)} image projector)")
    if entry.thinks:
        parts.append("thinks")
    if entry.tool_calls:
        parts.append("tool calls")
    parts.append(f"{entry.context_length:,}-token context")
    return " · ".join(parts)


def existing_file(models_dir: Path, repo: str, name: str) -> Path | None:
    """`repo`'s file `name` where a download puts it (`models/<owner>/<name>/<file>`, as
    `engine.hub.download.target_path` does), when a complete copy is there."""
    path = models_dir.joinpath(*repo.split("/"), *Path(name).parts)
    try:
        return path if path.is_file() and path.stat().st_size > 0 else None
    except OSError:
        return None


def kept_part(models_dir: Path, repo: str, files: Sequence[OfferedFile]) -> tuple[int, tuple[str, int, int]] | None:
    """(index, (file, bytes, size)) of the first file a cancelled or cut download left as a `.part`."""
    for i, f in enumerate(files):
        part = models_dir.joinpath(*repo.split("/"), *Path(f.name).parts)
        try:
            have = part.with_name(part.name + ".part").stat().st_size
        except OSError:
            continue
        if 0 < have:
            return i, (f.name, have, f.size)
    return None


def _offered(
    entry: CatalogueEntry, file: CatalogueFile, verdict: Verdict, profile: MachineProfile | None
) -> OfferedFile:
    return OfferedFile(file.name, file.quant, file.size, verdict, predict_file(entry, file, verdict, profile))


def offer_from_suggestion(
    suggestion: Suggestion,
    free: FreeMemory,
    models_dir: Path,
    *,
    profile: MachineProfile | None = None,
) -> ModelOffer:
    entry = suggestion.entry
    files = tuple(_offered(entry, f, fit_file(entry, f, free), profile) for f in entry.files)
    default = entry.files.index(suggestion.file)
    # A file of this entry already downloaded is the one to use, whatever the default.
    downloaded = next(
        ((i, p) for i, f in enumerate(entry.files) if (p := existing_file(models_dir, entry.repo, f.name))), None
    )
    if (
        downloaded is not None
        and entry.projector is not None
        and existing_file(models_dir, entry.repo, entry.projector.name) is None
    ):
        downloaded = None  # a vision model without its projector: the download brings the projector
    kept = kept_part(models_dir, entry.repo, files) if downloaded is None else None
    if downloaded is not None:
        default = downloaded[0]
    elif kept is not None:
        default = kept[0]  # the row offers to resume it
    return ModelOffer(
        entry.key,
        entry.name,
        entry.repo,
        facts_line(entry),
        entry.licence,
        entry.licence_url,
        files,
        default,
        entry,
        downloaded=downloaded[1] if downloaded else None,
        kept=kept[1] if kept else None,
    )


def catalogue_offers(
    entries: Sequence[CatalogueEntry],
    free: FreeMemory,
    models_dir: Path,
    *,
    profile: MachineProfile | None = None,
    useful_tps: float = USEFUL_TPS,
) -> list[ModelOffer]:
    """Every entry as a row, best first for this machine (with `profile`: the useful speed first)."""
    return [
        offer_from_suggestion(s, free, models_dir, profile=profile)
        for s in ranked(entries, free, profile=profile, useful_tps=useful_tps)
    ]


def default_offers(offers: Sequence[ModelOffer], limit: int = SHORT_LIST) -> list[ModelOffer]:
    """The short default list: the best `limit` rows that fit (downloaded ones always shown)."""
    fitting = [o for o in offers if o.default_file.verdict.fits or o.downloaded is not None]
    return fitting[:limit]


def best_suggestion(
    entries: Sequence[CatalogueEntry],
    free: FreeMemory,
    profile: MachineProfile | None = None,
    useful_tps: float = USEFUL_TPS,
) -> Suggestion | None:
    found = short_list(ranked(entries, free, profile=profile, useful_tps=useful_tps), limit=1)
    return found[0] if found else None


def _models(files: Sequence[HubFile]) -> list[tuple[str, int]]:
    """The models a user chooses among, as (first file, size of all its parts): no projectors,
    one line per split model (grouped as `ember models pull` groups them)."""
    groups: dict[str, list[HubFile]] = {}
    for f in files:
        if not is_projector_name(f.path):
            groups.setdefault(model_key(f.path), []).append(f)
    firsts = ((min(g, key=lambda f: f.path).path, sum(f.size for f in g)) for g in groups.values())
    return [(name, size) for name, size in firsts if is_first_part(name)]


def hub_offer(
    repo: HubRepo,
    files: Sequence[HubFile],
    free: FreeMemory,
    models_dir: Path,
) -> ModelOffer | None:
    """A Hub search result as a row (None when it has no GGUF model file)."""
    offered: list[OfferedFile] = []
    for name, size in _models(files):
        need = estimate_need(size, DEFAULT_CONTEXT_LENGTH)  # the page marks fit at the default context
        offered.append(OfferedFile(name, quant_of(name), need.weights, judge(need, free)))
    if not offered:
        return None
    offered.sort(key=lambda o: o.size)
    fitting = [i for i, o in enumerate(offered) if o.verdict.fits]
    default = next((i for i in fitting if offered[i].quant.startswith("Q4")), fitting[-1] if fitting else 0)
    facts = f"Hugging Face · {repo.downloads:,} downloads · {repo.likes:,} likes"
    if repo.gated:
        facts += " · gated: needs a Hugging Face token (HF_TOKEN)"
    downloaded = existing_file(models_dir, repo.repo, offered[default].name)
    kept = kept_part(models_dir, repo.repo, offered) if downloaded is None else None
    if kept is not None:
        default = kept[0]
    return ModelOffer(
        f"hub:{repo.repo}",
        repo.repo,  # "owner/name": on the Hub, the uploader is the first thing to trust or not
        repo.repo,
        facts,
        "see the model card",
        f"https://huggingface.co/{repo.repo}",
        tuple(offered),
        default,
        gated=repo.gated,
        downloaded=downloaded,
        kept=kept[1] if kept else None,
    )


def hub_offers(
    repos: Sequence[HubRepo], listings: Mapping[str, Sequence[HubFile]], free: FreeMemory, models_dir: Path
) -> list[ModelOffer]:
    offers = [hub_offer(r, listings.get(r.repo) or r.gguf_files or (), free, models_dir) for r in repos]
    return [o for o in offers if o is not None]


def files_to_fetch(listing: Sequence[HubFile], wanted: str) -> list[HubFile]:
    """The file(s) to download for `wanted`, by `ember models pull`'s rules (`pick_files`): that
    file, or every part of a split model; the one model of the same quantisation when the
    repository renamed the file. DownloadChoiceError (one line) when there is none."""
    from engine.api.downloads import HubError, pick_files

    name = Path(wanted).name
    listed = any(f.path == wanted or f.name == name for f in listing)
    gone = f"{name} is not in the repository any more; search the Hub for another file"
    try:
        return pick_files(listing, wanted if listed else quant_in_name(name) or wanted)
    except HubError as exc:  # listed: the pull's own reason (a split model the Hub lists in part)
        raise DownloadChoiceError(str(exc) if listed else gone) from exc


def projector_to_fetch(listing: Sequence[_F], entry: CatalogueEntry | None) -> list[_F]:
    """The image projector a vision entry's download brings along (none for a text model).

    DownloadChoiceError (one line) when the repository no longer has it: the model alone would
    be downloaded as if it saw images, so nothing is.
    """
    if entry is None or entry.projector is None:
        return []
    found = [f for f in listing if Path(f.path).name == entry.projector.name]
    if not found:
        raise DownloadChoiceError(
            f"{entry.projector.name}, the image projector of {entry.name}, is not in "
            f"{entry.repo} any more; nothing was downloaded"
        )
    return found[:1]


# --- measuring and wording -----------------------------------------------------------------


def measure_free_memory() -> FreeMemory:
    """Free RAM now and, when llama.cpp can use a GPU, its free memory. Slow the first time
    (llama.cpp loads): call it off the GUI thread."""
    ram = available_memory()
    try:
        from engine.api.machine import gpu_devices

        gpus = gpu_devices()
    except Exception as exc:
        log.debug("no GPU figures for the model catalogue: %s", exc)
        gpus = []
    if not gpus:
        return FreeMemory(ram)
    names = sorted({g.description or g.name for g in gpus})
    return FreeMemory(ram, sum(g.free_bytes for g in gpus), " + ".join(names))


def quick_free_memory() -> FreeMemory:
    """Free RAM only (no llama.cpp): cheap enough for the GUI thread."""
    return FreeMemory(available_memory())


def duration_text(seconds: float) -> str:
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    if seconds < 90 * 60:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"


def progress_text(done: int, total: int, bytes_per_s: float, seconds_left: float | None, waiting_s: float = 0.0) -> str:
    """'1.2 GB of 4.7 GB · 12.3 MB/s · about 5 min left', or '… · waiting for the server (12 s)'."""
    parts = [f"{format_bytes(done)} of {format_bytes(total)}" if total > 0 else format_bytes(done)]
    if waiting_s > 0:  # no speed and no time left are made up while nothing arrives
        parts.append(f"waiting for the server ({duration_text(waiting_s)})")
        return " · ".join(parts)
    if bytes_per_s > 0:
        parts.append(f"{format_bytes(int(bytes_per_s))}/s")
    if seconds_left is not None and seconds_left >= 0:
        parts.append(f"about {duration_text(seconds_left)} left")
    return " · ".join(parts)


def better_model_line(
    entries: Sequence[CatalogueEntry], free: FreeMemory, profile: MachineProfile | None = None
) -> str | None:
    """'Qwen2.5 1.5B Instruct, which runs on the CPU here (about 9 words a second)' for the empty
    chat's "A better model" line, or None."""
    best = best_suggestion(entries, free, profile, useful_tps())
    if best is None:
        return None
    speed = f" ({best.prediction.words().removesuffix(' here')})" if best.prediction is not None else ""
    return f"{best.entry.name}, which {best.verdict.fit.value} here{speed}"


def cached_profile() -> MachineProfile | None:
    """This machine's speed profile when measured before (a small file read; never measures)."""
    try:
        from engine.api.machine import cached

        return cached()
    except (OSError, EmberError) as exc:
        log.debug("no machine profile: %s", exc)
        return None
