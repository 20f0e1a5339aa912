"""What a GGUF file's *name* says: its quantisation, whether it is a projector, which shard it is.

One set of rules for every reader of names: the Hub pull (`engine.hub.files`), the window's
Get models page (`desktop.core.get_models`), the library scan, projector pairing and the
catalogue. Names are what a repository listing or a folder shows before any byte is read;
what a file's header says (`models.gguf.meta`, `models.gguf.projector`) decides once it is
on disk.
"""

from __future__ import annotations

import re
from pathlib import PurePath, PurePosixPath

# `name-00001-of-00003.gguf`: llama.cpp's gguf-split naming.
_SHARD = re.compile(r"^(?P<base>.+)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$", re.IGNORECASE)
# A quantisation between separators: Q4_K_M, IQ4_XS, Q8_0, Q4, TQ1_0, MXFP4, BF16, F16, F32.
_QUANT = re.compile(r"(?:^|[-_.])((?:IQ|TQ|Q)\d(?:_[A-Z0-9]+)*|MXFP4(?:_MOE)?|BF16|F16|F32)(?=[-_.]|$)", re.IGNORECASE)


def is_gguf_name(name: str) -> bool:
    return name.casefold().endswith(".gguf")


def is_projector_name(name: str) -> bool:
    """A vision/audio projector by name: `mmproj-model-f16.gguf`, `Qwen2-VL-mmproj-f16.gguf`."""
    return "mmproj" in PurePosixPath(name).name.casefold()


def shard_of(name: str) -> tuple[str, int, int] | None:
    """(base name, shard number, shard count) for `base-00001-of-00003.gguf`, else None."""
    m = _SHARD.match(PurePosixPath(name).name)
    return (m["base"], int(m["no"]), int(m["count"])) if m else None


def shard_name(base: str, number: int, count: int) -> str:
    return f"{base}-{number:05d}-of-{count:05d}.gguf"


def quant_in_name(name: str) -> str | None:
    """`Q4_K_M` for `Model-Q4_K_M.gguf` (upper-case, the last one named), None when none is."""
    shard = shard_of(name)
    stem = shard[0] if shard else PurePosixPath(name).name
    stem = stem[: -len(".gguf")] if is_gguf_name(stem) else stem
    found = _QUANT.findall(stem)
    return found[-1].upper() if found else None


def model_key(path: str | PurePath) -> str:
    """One key per model in a listing: a split model's shards share it (its folder, base, count)."""
    p = PurePosixPath(str(path).replace("\\", "/"))
    shard = shard_of(p.name)
    return f"{p.parent}/{shard[0]}#{shard[2]}" if shard else str(p)


def is_first_part(name: str) -> bool:
    """The file a split model is named by (its first shard), or an unsplit file."""
    shard = shard_of(name)
    return shard is None or shard[1] == 1
