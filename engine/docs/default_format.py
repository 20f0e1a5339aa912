"""The default embedder in the format llama.cpp runs fastest on this CPU, made once from the checked
f16 conversion, beside it, by llama.cpp itself.

Embedding is most of the time of indexing a folder, and which format is fastest depends on the
CPU's kernels (`python -m tests.bench.docs_embed_parts`, the same passages interleaved, CPU time
per passage; docs/performance.md, issue #50):

- AVX512_BF16 (Zen 4, Cooper Lake): BF16, ×1.2-1.4 Q8_0's rate; its dot products are one
  instruction (`vdpbf16ps`) and its vectors are f16's (cosine 1.0000 on the reference set).
  Only where the variant loaded has it (`cooperlake`, `zen4`, a native build): the default
  four-variant build has none, so such a CPU runs `skylakex` and Q8_0 (docs/performance.md);
- AVX2 without AVX-512: the f16 file itself, ×1.27 Q8_0's rate (no repacked Q8_0 kernel on x86);
- anything else (AVX-512 without BF16, AMX, ARM, whose Q8_0 is repacked): Q8_0, as before.

Every one of them stays within cosine 0.99 of f16 on the reference sentences
(tests/test_docs_speed.py), and within 0.999 of each other: a collection embedded in one format
and searched in another (a machine upgrade, a data folder moved) ranks the same, so nothing is
embedded again. The copy is written under a name of this process's own, recorded (SHA-256 of its
bytes, as the f16 file's) and renamed into place, so two first starts never mix their writes; a
copy that does not match its record is made again. When llama.cpp cannot write it (a full disk),
the f16 file is used: slower, never wrong.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from models.library.default_embedder import read_record, sha256, write_record

FILENAMES = {"Q8_0": "all-MiniLM-L6-v2.q8_0.gguf", "BF16": "all-MiniLM-L6-v2.bf16.gguf"}
log = logging.getLogger(__name__)


def fastest_format(features: str) -> str:
    """The default embedder's format for a CPU whose llama.cpp features read `features`
    (`llama_print_system_info`: "CPU : SSE3 = 1 | AVX2 = 1 | …"): "BF16", "F16" or "Q8_0"."""
    flags: set[str] = set()
    for part in features.split("|"):
        name, _, value = part.rpartition("=")
        if value.strip() == "1":
            flags.add(name.rpartition(":")[2].strip())
    if "AMX_INT8" in flags:  # llama.cpp's AMX kernels take Q8_0; BF16 there is unmeasured
        return "Q8_0"
    if "AVX512_BF16" in flags:
        return "BF16"
    if "AVX2" in flags and "AVX512" not in flags:
        return "F16"
    return "Q8_0"


def cpu_format() -> str:
    """`fastest_format` of the CPU backend llama.cpp runs here (loading it first)."""
    import llama_cpp

    from engine.llama.cpu import ensure_cpu_runs

    ensure_cpu_runs()  # the variant that runs here decides the kernels (a forced lower one too)
    return fastest_format(llama_cpp.llama_print_system_info().decode("utf-8", "replace"))


def copy_path(f16: Path, fmt: str) -> Path:
    return f16 if fmt == "F16" else f16.with_name(FILENAMES[fmt])


def default_copy(f16: Path, fmt: str) -> Path:
    """The checked f16 default in `fmt` (made on first use); `f16` itself for F16 or when it cannot be made."""
    target = copy_path(f16, fmt)
    if target == f16 or (target.is_file() and read_record(target) == sha256(target)):
        return target
    from engine.rewrite.requantize import RequantizeError, requantize

    partial = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    try:
        requantize(f16, partial, fmt)
        digest = sha256(partial)
        os.replace(partial, target)
        write_record(target, digest)  # until then another process finds no record and makes its own
    except (RequantizeError, OSError) as exc:
        log.warning("the default embedder stays f16: %s", exc)
        return f16
    finally:
        partial.unlink(missing_ok=True)
    return target
