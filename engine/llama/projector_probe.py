"""A first picture encoded in a child process, once per projector file, before the window, the
CLI or the server hands that projector a picture in their own process.

The header checks (`models.gguf.projector_check`) catch the hostile numbers we know clip
trusts; a projector can still hold a shape only a real encode exercises, and ggml answers
those with an assertion that aborts the process (the whole window, every client of
`ember serve`). So the first time a projector is paired, `check_projector` loads it in a child
beside the model's vocabulary only (no weights: cheap), encodes one picture of the encoder's
own size, and reports how the child ended. A child that dies of a signal refuses the projector
in one line; one that ends normally (an encode, or clip refusing the file in its own words)
lets it through. The verdict is cached by the file's header digest and size and the llama.cpp
build (`cpu`'s cache folder), so each file is probed once per machine and build.
"""

from __future__ import annotations

import hashlib
import logging
import sys
from pathlib import Path
from typing import Any

from engine.llama import cpu
from engine.llama.machine_cache import read_entry, write_entry
from models.gguf.header import read_header

log = logging.getLogger("engine.llama")

CACHE_FILE = "projector-probe.json"
PROBE_CHILD = "engine.llama.projector_probe:probe_child"
PROBE_TIMEOUT_S = 180.0  # one encode of one picture on a loaded 2-core machine, with room
MAX_PROBE_SIDE = 448  # the probe picture's side, at most (dynamic-size encoders take any)
MAX_CACHED = 64  # verdicts kept (the newest)


def check_projector(model: Path, projector: Path, timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """Why the projector cannot be used (one line, it aborted the probe); None when it can."""
    key = _key(projector)
    cached = _read(key)
    if cached is not None:
        return cached or None
    done = cpu.run(PROBE_CHILD, [str(model.absolute()), str(projector.absolute())], timeout)
    verdict = _verdict(projector, done)
    if done is not None:  # a child that timed out is let through, once: waiting at every load helps no one
        write_entry(CACHE_FILE, key, verdict or "", keep=MAX_CACHED)
    return verdict


def _verdict(projector: Path, done: Any) -> str | None:
    if done is None or done.returncode >= 0:
        if done is not None and done.returncode != 0:  # clip refused it in its own words, or it took too long
            why = "timed out" if done.returncode == cpu.TIMED_OUT else (done.stderr or "").strip()[-300:]
            log.info("projector probe of %s: %s", projector.name, why)
        return None
    return (
        f"{projector.name} is refused: llama.cpp {cpu.ending(done)} encoding a first picture "
        "with it (a damaged or hostile projector)"
    )


def _key(projector: Path) -> str:
    """The projector's header (metadata and tensor shapes) and size, and the llama.cpp build."""
    header = read_header(projector, keep_tokens=False)
    digest = hashlib.sha256()
    with projector.open("rb") as f:
        digest.update(f.read(min(header.data_offset, 64 << 20)))
    return f"{digest.hexdigest()}:{header.file_size}:{cpu.llama_build()}"


def _read(key: str) -> str | None:
    value = read_entry(CACHE_FILE, key)
    return value if isinstance(value, str) else None


# --- in the child ------------------------------------------------------------------------------


def probe_child() -> int:
    """argv: MODEL PROJECTOR. Loads the model's vocabulary, the projector, and encodes one grey
    picture of the encoder's size; prints `encoded`. An abort kills the child, which is the verdict."""
    import ctypes

    import llama_cpp
    from llama_cpp import mtmd_cpp

    m: Any = mtmd_cpp  # untyped, as in llama_media: the stubs type pointers more narrowly than ctypes takes

    from engine.llama.cpu import ensure_cpu_runs

    model_path, projector_path = sys.argv[1], sys.argv[2]
    ensure_cpu_runs()
    llama_cpp.llama_backend_init()
    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    model = llama_cpp.llama_model_load_from_file(model_path.encode(), params)
    if not model:
        print("the model's vocabulary did not load", file=sys.stderr)
        return 3
    cparams = m.mtmd_context_params_default()
    cparams.use_gpu, cparams.n_threads, cparams.print_timings, cparams.warmup = False, 1, False, False
    ctx = m.mtmd_init_from_file(projector_path.encode(), model, cparams)
    if not ctx:
        print("the projector did not load", file=sys.stderr)
        return 3
    side = _side(Path(projector_path))
    pixels = (ctypes.c_uint8 * (side * side * 3)).from_buffer_copy(b"\x80" * (side * side * 3))
    bitmap = m.mtmd_bitmap_init(side, side, pixels)
    chunks = m.mtmd_input_chunks_init()
    marker = m.mtmd_default_marker()
    text = m.mtmd_input_text(marker, len(marker), False, True)
    code = m.mtmd_tokenize(ctx, chunks, ctypes.byref(text), (m.mtmd_bitmap_p_ctypes * 1)(bitmap), 1)
    if code != 0:
        print(f"the picture was not tokenized (mtmd returned {code})", file=sys.stderr)
        return 3
    for i in range(m.mtmd_input_chunks_size(chunks)):
        chunk = m.mtmd_input_chunks_get(chunks, i)
        if m.mtmd_input_chunk_get_type(chunk) != m.MTMD_INPUT_CHUNK_TYPE_TEXT and m.mtmd_encode_chunk(ctx, chunk):
            print("the picture was not encoded", file=sys.stderr)
            return 3
    print("encoded", flush=True)
    return 0


def _side(projector: Path) -> int:
    size = read_header(projector, keep_tokens=False).kv.get("clip.vision.image_size")
    return max(16, min(size, MAX_PROBE_SIDE)) if isinstance(size, int) else 224
