"""One indexer per collection: an exclusive OS lock held while a collection is indexed.

Two indexers on one collection (two `ember docs add`, or the window's Re-index beside a CLI
`reindex`) both reused a file's row, both wrote its passages, and left duplicates for good.
The lock is a small file beside the database (`docs.sqlite3.locks/<collection id>.lock`),
locked with the history writers' `try_lock` (flock: two opens in one process conflict too,
like two processes). The OS drops it when the process dies, however it dies. A second
indexer does not wait: it is refused in one line (`CollectionBusy`). An in-memory index (a
message's attachments) belongs to one caller and takes no lock.
"""

from __future__ import annotations

from collections.abc import Generator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from engine.docs.names import shown
from engine.docs.schema import DocsDatabaseError
from engine.history.lock import try_lock

if TYPE_CHECKING:
    from engine.docs.index import Collection, DocIndex


class CollectionBusy(DocsDatabaseError):
    """Another indexer (this process or another) holds the collection."""


@contextmanager
def collection_lock(index: DocIndex, coll: Collection) -> Generator[None]:
    if index.path == ":memory:":
        yield
        return
    folder = Path(index.path + ".locks")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle = open(folder / f"{coll.id}.lock", "a+b")  # closed below, which drops the lock
    except OSError as exc:
        raise DocsDatabaseError(
            f"cannot lock collection {shown(coll.name)!s} for indexing: {exc.strerror or exc}"
        ) from exc
    with handle:
        if not try_lock(handle):
            raise CollectionBusy(
                f"collection {shown(coll.name)} is being indexed by another Ember right now; "
                "try again when it has finished"
            )
        yield
