"""What the Hub lists, as plain values, and which of a repository's files one pull takes.

A repository of GGUF files usually holds one model in many quantisations
(`Qwen2.5-7B-Instruct-Q4_K_M.gguf`, `…-Q8_0.gguf`), some split in shards
(`…-Q8_0-00001-of-00002.gguf`), sometimes with a vision projector (`mmproj-…gguf`).
`pick_files` turns what the user typed after the colon (`REPO:Q4_K_M`, `REPO:FILE.gguf`, or
nothing) into the files of one model: every shard of a split model, never half of one (a
split model the Hub lists incompletely is refused), and a file listed twice once.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from engine.hub.errors import HubError
from models.gguf.names import is_projector_name, model_key, quant_in_name, shard_of

# The quantisation picked when the user names none: small, good, and what most repositories carry.
PREFERRED_QUANTS = ("Q4_K_M", "Q4_K_S", "Q5_K_M", "IQ4_XS", "Q4_0", "Q5_K_S", "Q6_K", "Q8_0", "Q4_1")
_REPO = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}")


@dataclass(frozen=True, slots=True)
class HubFile:
    """One file of a repository at a pinned revision (the commit sha)."""

    repo: str
    path: str  # inside the repository, `/`-separated
    size: int  # bytes (the LFS size)
    sha256: str | None  # the LFS SHA-256, None for a file not stored with LFS
    revision: str  # the commit sha the listing was taken at

    @property
    def name(self) -> str:
        return PurePosixPath(self.path).name

    @property
    def is_projector(self) -> bool:
        return is_projector_name(self.name)

    @property
    def quant(self) -> str | None:
        """`Q4_K_M` for `Model-Q4_K_M.gguf` (upper-case), None when the name carries none."""
        return quant_in_name(self.name)


@dataclass(frozen=True, slots=True)
class HubRepo:
    """A repository found by a search; `gguf_files` is None until the repository is listed."""

    repo: str
    downloads: int
    likes: int
    gated: bool
    gguf_files: tuple[HubFile, ...] | None = None


def check_repo_id(repo: str) -> str:
    """`owner/name` as the Hub spells repository ids; HubError (one line) for anything else."""
    if not _REPO.fullmatch(repo) or ".." in repo:
        raise HubError(f"not a repository: {repo!r} (expected owner/name, e.g. bartowski/Qwen2.5-7B-Instruct-GGUF)")
    return repo


def parse_spec(text: str) -> tuple[str, str | None]:
    """`owner/name[:FILE|QUANT]` → (repository, what follows the colon or None)."""
    repo, _, selector = text.strip().partition(":")
    return check_repo_id(repo.strip()), (selector.strip() or None)


def total_size(files: Iterable[HubFile]) -> int:
    return sum(f.size for f in files)


def models_in(files: Sequence[HubFile]) -> list[tuple[HubFile, ...]]:
    """The repository's GGUF files grouped into models (a split model's shards together, in order)."""
    groups: dict[str, list[HubFile]] = {}
    for f in files:
        groups.setdefault(model_key(f.path), []).append(f)
    return [tuple(sorted(g, key=lambda f: f.path)) for g in groups.values()]


def pick_files(files: Sequence[HubFile], selector: str | None) -> list[HubFile]:
    """The files of the one model `selector` names (a file path or name, or a quantisation).

    No selector: the only model, else the first of PREFERRED_QUANTS the repository has.
    HubError (one line, naming the choices) when nothing or more than one model matches, or
    when the model is split and the Hub does not list every shard.
    """
    return _whole(_pick(list({f.path: f for f in files}.values()), selector))


def _pick(files: Sequence[HubFile], selector: str | None) -> list[HubFile]:
    models = [m for m in models_in(files) if not m[0].is_projector] or models_in(files)
    if not models:
        raise HubError("the repository has no GGUF files")
    if selector is None:
        return list(_default_model(models))
    wanted = selector.lower()
    by_file = [m for m in models_in(files) if any(wanted in (f.path.lower(), f.name.lower()) for f in m)]
    if by_file:
        return list(by_file[0])
    by_quant = [m for m in models if (m[0].quant or "").lower() == wanted]
    if len(by_quant) == 1:
        return list(by_quant[0])
    if by_quant:
        names = ", ".join(m[0].path for m in by_quant)
        raise HubError(f"{selector} matches {len(by_quant)} models ({names}); name the file instead")
    raise HubError(f"no GGUF file matches {selector!r}; this repository has {choices(models)}")


def _whole(model: list[HubFile]) -> list[HubFile]:
    """`model` if every shard of it is listed; HubError naming what is missing otherwise."""
    info = shard_of(model[0].name)
    if info is None:
        return model
    have = {i[1] for f in model if (i := shard_of(f.name)) is not None}
    missing = [n for n in range(1, info[2] + 1) if n not in have]
    if missing or len(model) != info[2]:
        shown = ", ".join(str(n) for n in missing[:10]) + (" …" if len(missing) > 10 else "")
        raise HubError(
            f"{model[0].repo}: {info[0]} is split in {info[2]} files and the Hub lists {len(model)} of them"
            + (f" (missing {shown})" if missing else "")
            + "; a part of a model cannot be used, so nothing was downloaded"
        )
    return model


def _default_model(models: Sequence[tuple[HubFile, ...]]) -> tuple[HubFile, ...]:
    if len(models) == 1:
        return models[0]
    for quant in PREFERRED_QUANTS:
        found = [m for m in models if m[0].quant == quant]
        if len(found) == 1:
            return found[0]
    raise HubError(f"the repository has {len(models)} models; name one after a colon: {choices(models)}")


def choices(models: Sequence[tuple[HubFile, ...]]) -> str:
    """The models as the user would name them: their quantisations, else their file names."""
    names = [m[0].quant or m[0].name for m in models]
    shown = ", ".join(dict.fromkeys(names[:20]))
    return shown + (f" and {len(names) - 20} more" if len(names) > 20 else "")
