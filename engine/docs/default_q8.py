"""The default embedder as Q8_0: made once from the checked f16 conversion, beside it, by llama.cpp itself.

Embedding is most of the time of indexing a folder (MiniLM at f16 read 4.1-4.6 passages/s on a
quiet 2-core machine). Q8_0 is what llama.cpp runs fastest on a CPU (its matrices are repacked at
load for the AVX2/AVX-512 kernels) and its vectors stay within cosine 0.99 of f16's on the
reference sentences (tests/test_docs_speed.py), so it is the default's format.

The f16 file stays the checked source (`models.library.default_embedder`: its content against
the known conversion, its bytes against their record). The Q8_0 copy is written under a name of
this process's own, recorded (SHA-256 of its bytes, as the f16 file's) and renamed into place, so
two first starts never mix their writes; a copy that does not match its record is made again.
When llama.cpp cannot write it (a full disk), the f16 file is used: slower, never wrong.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from models.library.default_embedder import read_record, sha256, write_record

FILENAME = "all-MiniLM-L6-v2.q8_0.gguf"
log = logging.getLogger(__name__)


def q8_path(f16: Path) -> Path:
    return f16.with_name(FILENAME)


def default_q8(f16: Path) -> Path:
    """The Q8_0 copy of the checked f16 default (made on first use); `f16` itself when it cannot be made."""
    target = q8_path(f16)
    if target.is_file() and read_record(target) == sha256(target):
        return target
    from engine.backends.requantize import RequantizeError, requantize

    partial = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    try:
        requantize(f16, partial, "Q8_0")
        digest = sha256(partial)
        os.replace(partial, target)
        write_record(target, digest)  # until then another process finds no record and makes its own
    except (RequantizeError, OSError) as exc:
        log.warning("the default embedder stays f16: %s", exc)
        return f16
    finally:
        partial.unlink(missing_ok=True)
    return target
