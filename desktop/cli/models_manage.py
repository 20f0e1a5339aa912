"""`ember models add PATH` and `ember models rm NAME|PATH`: the library's list from the command line.

`add` puts a GGUF file the user has into the library (as the window's "Add file…" does),
after reading its header. `rm` deletes only what Ember downloaded or keeps in its models
folder (`models.library.removal`); a file added from elsewhere is only taken off the list,
and the built-in model is never removed.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path

from desktop.cli.common import EXIT_OK, EXIT_USAGE, fail
from engine.api.errors import EmberError, GGUFError
from engine.api.library import LibraryEntry, Source, library_entries, load_library_state, save_library_state
from engine.api.models import owned_by_ember, read_metadata, remove_model
from engine.api.program import ember_paths
from engine.api.text import cell


def add(path: Path, *, as_json: bool) -> int:
    path = Path(os.path.abspath(path.expanduser()))
    try:
        meta = read_metadata(path)
    except GGUFError as exc:
        return fail(f"{path}: {exc.reason}")
    if meta.is_projector:
        return fail(f"{path}: a vision projector, not a chat model")
    state = load_library_state()
    # Listed like a recently opened file, without becoming the model the window opens next.
    save_library_state(
        dataclasses.replace(state.with_opened(path), last_used=state.last_used, last_used_server=state.last_used_server)
    )
    if as_json:
        sys.stdout.write(json.dumps({"added": str(path), "name": meta.name}, ensure_ascii=False) + "\n")
    else:
        print(f"added {cell(meta.name)} ({path}); chat with it: ember chat --model {cell(str(path))}")
    return EXIT_OK


def rm(what: str, *, as_json: bool) -> int:
    paths = ember_paths()
    try:
        entry = _find(what)
    except LookupError as exc:
        return fail(str(exc))
    if entry.source is Source.BUILTIN:
        return fail("the built-in model is part of Ember and cannot be removed")
    if owned_by_ember(entry.path, paths):
        try:
            deleted = remove_model(entry.path, paths)
        except (EmberError, OSError) as exc:
            return fail(f"{entry.path}: {exc}")
        _done(
            {"deleted": [str(p) for p in deleted]},
            f"deleted {entry.path}" + (f" and {len(deleted) - 1} more file(s)" if len(deleted) > 1 else ""),
            as_json,
        )
        return EXIT_OK
    state = load_library_state()
    if entry.source is Source.RECENT:
        save_library_state(state.without_recent(entry.path))
        _done(
            {"unlisted": str(entry.path)},
            f"took {entry.path} off the library's list; the file itself stays (Ember deletes only files it downloaded)",
            as_json,
        )
        return EXIT_OK
    return fail(
        f"{entry.path} is in a folder you added to the library; Ember deletes only files it downloaded "
        f"(remove the folder in the window to stop listing it)",
        EXIT_USAGE,
    )


def _find(what: str) -> LibraryEntry:
    """The library entry `what` names: a path, a file name, or a model name (LookupError otherwise)."""
    entries = library_entries(read=True)
    as_path = Path(what).expanduser()
    if as_path.exists() or os.sep in what:
        wanted = os.path.normcase(os.path.abspath(as_path))
        found = [e for e in entries if os.path.normcase(os.path.abspath(e.path)) == wanted]
    else:
        low = what.lower()
        found = [e for e in entries if low in (e.name.lower(), e.path.name.lower())]
    if not found:
        raise LookupError(f"{what}: not in Ember's library (see: ember models)")
    if len(found) > 1:
        raise LookupError(
            f"{what} names {len(found)} models; give the path: " + ", ".join(str(e.path) for e in found[:5])
        )
    return found[0]


def _done(data: dict[str, object], text: str, as_json: bool) -> None:
    if as_json:
        sys.stdout.write(json.dumps(data, ensure_ascii=False) + "\n")
    else:
        print(cell(text))
