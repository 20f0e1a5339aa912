"""Checking a GBNF grammar in a child process before llama.cpp builds it in ours.

llama.cpp parses grammars recursively in native code: a grammar it cannot handle may be
rejected cleanly, or may overflow the stack and kill the whole process (a segfault no
Python code can catch). So a grammar never seen before is first built once in a short-lived
child (`python -c …` with the grammar on stdin; the frozen app answers `-c` the same way),
which loads only the model's vocabulary. The child's verdict — usable, rejected, or crashed — is cached per
grammar hash, in memory and in a small file under the data folder, so each grammar costs
one child process per machine, not one per request.

    problem = grammar_problem(model_path, gbnf)    # None when the grammar is safe to use
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import logging
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, cast

from engine.child_env import function_child
from models.library.json_input import JsonInputError, read_json_input
from models.library.paths import ember_paths

log = logging.getLogger("engine.grammar")

CHECK_TIMEOUT_S = 60.0
# Larger grammars are refused outright: a schema never needs this much text.
MAX_GRAMMAR_CHARS = 256 * 1024
_CACHE_FILE = "grammar_verdicts.json"
_CACHE_LIMIT = 500
_OK = ""  # the cached verdict of a usable grammar
_UNCHECKED = "the grammar could not be checked"

_lock = threading.Lock()
_memory: dict[str, str] = {}


def grammar_problem(model_path: str | Path, gbnf: str) -> str | None:
    """None if llama.cpp can build `gbnf` without harm; else why not (one line)."""
    if len(gbnf) > MAX_GRAMMAR_CHARS:
        return f"the grammar is too large ({len(gbnf) // 1024} KB)"
    key = hashlib.sha256(f"{_llama_version()}\n{gbnf}".encode()).hexdigest()
    with _lock:
        verdict = _memory.get(key)
        if verdict is None:
            verdict = _load_cache().get(key)
        if verdict is None:
            verdict = _check_in_child(Path(model_path), gbnf)
            if _is_verdict(verdict):
                _store(key, verdict)
        if _is_verdict(verdict):
            _memory[key] = verdict
    return verdict or None


def _is_verdict(verdict: str) -> bool:
    """False for "could not be checked": a judgement on the checker, not on the grammar."""
    return not verdict.startswith(_UNCHECKED)


def forget() -> None:
    """Drop the in-memory verdicts (tests)."""
    with _lock:
        _memory.clear()


_CHILD = "engine.llama.grammar_guard:run_child"


def _llama_version() -> str:
    """Part of the cache key: another llama.cpp may judge a grammar differently."""
    try:
        return importlib.metadata.version("llama-cpp-python")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _check_in_child(model_path: Path, gbnf: str) -> str:
    child = function_child(_CHILD, str(model_path.absolute()))
    try:
        done = subprocess.run(
            child.argv,
            input=gbnf.encode("utf-8"),
            capture_output=True,
            timeout=CHECK_TIMEOUT_S,
            env=child.env,
            cwd=child.cwd,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"llama.cpp took over {CHECK_TIMEOUT_S:.0f} s to build the grammar"
    except OSError as exc:
        log.warning("grammar check: cannot start the checker (%s); the grammar is not used", exc)
        return f"{_UNCHECKED} ({exc.strerror or exc})"
    if done.returncode == 0:
        return _OK
    if done.returncode == 1:
        return "llama.cpp rejected the grammar"
    if done.returncode < 0:
        log.warning("grammar check: building the grammar killed the checker (signal %d)", -done.returncode)
        return "llama.cpp crashes on this grammar"
    tail = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [f"exit {done.returncode}"]
    log.warning("grammar check failed: %s", tail[0])
    return f"{_UNCHECKED} ({tail[0][:200]})"


# -- the verdict cache on disk ------------------------------------------------------------


def _cache_path() -> Path:
    return ember_paths().data_dir / _CACHE_FILE


def _load_cache() -> dict[str, str]:
    try:
        data: Any = read_json_input(_cache_path())
    except JsonInputError:
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in cast(dict[Any, Any], data).items() if isinstance(k, str) and isinstance(v, str)}


def _store(key: str, verdict: str) -> None:
    cache = _load_cache()
    cache[key] = verdict
    if len(cache) > _CACHE_LIMIT:
        cache = dict(list(cache.items())[-_CACHE_LIMIT:])
    path = _cache_path()
    with contextlib.suppress(OSError):  # an unwritable cache only costs a re-check
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(cache), encoding="utf-8")
        tmp.replace(path)


# -- the child ----------------------------------------------------------------------------


def run_child() -> int:
    """The child's work: model path in argv[1], grammar on stdin; 0 usable, 1 rejected (or a crash)."""
    return _child(sys.argv[1], sys.stdin.buffer.read())


def _child(model_path: str, gbnf: bytes) -> int:
    import llama_cpp as lc

    lc.llama_backend_init()
    params = lc.llama_model_default_params()
    params.vocab_only = True
    model = lc.llama_model_load_from_file(model_path.encode("utf-8"), params)
    if not model:
        sys.stderr.write("cannot load the model's vocabulary\n")
        return 2
    vocab = lc.llama_model_get_vocab(model)
    if not vocab:
        sys.stderr.write("the model has no vocabulary\n")
        return 2
    sampler = lc.llama_sampler_init_grammar(vocab, gbnf, b"root")
    if not sampler:
        return 1
    lc.llama_sampler_free(sampler)
    return 0
