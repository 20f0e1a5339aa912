"""The library: the models the user has, the servers they use, and the models they could get.

The window's model picker and `ember models` list the library here (the scanned folders, the
files skipped and why, the recent and last-used entries, the saved servers and their keys); the
Get models page, `ember models catalogue` and `ember models pull` read the shipped catalogue.
Names only: each lives in `models.library`. What one file is and opening it: `engine.api.models`.
"""

from __future__ import annotations

from models.library.catalogue import (
    CatalogueEntry,
    CatalogueError,
    CatalogueFile,
    entry_for_repo,
    search,
    shipped_catalogue,
)
from models.library.remote_keys import load_api_key, save_api_key
from models.library.scan import (
    LibraryEntry,
    LibraryState,
    RemoteServer,
    Source,
    last_used_entry,
    library_entries,
    load_library_state,
    note_opened,
    note_server_used,
    save_library_state,
    skipped_files,
)

__all__ = [
    "CatalogueEntry",
    "CatalogueError",
    "CatalogueFile",
    "LibraryEntry",
    "LibraryState",
    "RemoteServer",
    "Source",
    "entry_for_repo",
    "last_used_entry",
    "library_entries",
    "load_api_key",
    "load_library_state",
    "note_opened",
    "note_server_used",
    "save_api_key",
    "save_library_state",
    "search",
    "shipped_catalogue",
    "skipped_files",
]
