"""Documents: collections, their indexing, search, the embedder, and the context a turn gets.

What the window's Documents dialog and citations, `ember docs`, `ember chat --docs` and the
server's embeddings and collections use, the documents a turn reads (`TurnDocuments`), an
answer's paragraphs attributed to its passages, and an index run's pace in words. Names only,
except `check_collection`: each lives in `engine.docs` (`TurnDocuments` in `engine.session`).
"""

from __future__ import annotations

from engine.docs.attribution import AnswerSources
from engine.docs.context import label, no_match_line, numbered
from engine.docs.embed import (
    DEFAULT_EMBEDDER,
    LlamaEmbedder,
    chat_model_warning,
    embedder_kind,
    resolve_embedder,
    shared_embedder,
)
from engine.docs.index import Collection, CollectionInfo, DocIndex, default_path
from engine.docs.indexer import IndexReport, Progress, find_files, index_collection, prune
from engine.docs.pace import pace_words
from engine.docs.schema import DocsDatabaseError
from engine.docs.sources import CollectionSource
from engine.session.turn_documents import TurnDocuments

__all__ = [
    "DEFAULT_EMBEDDER",
    "AnswerSources",
    "Collection",
    "CollectionInfo",
    "CollectionSource",
    "DocIndex",
    "DocsDatabaseError",
    "IndexReport",
    "LlamaEmbedder",
    "Progress",
    "TurnDocuments",
    "chat_model_warning",
    "check_collection",
    "default_path",
    "embedder_kind",
    "find_files",
    "index_collection",
    "label",
    "no_match_line",
    "numbered",
    "pace_words",
    "prune",
    "resolve_embedder",
    "shared_embedder",
]


def check_collection(name: str) -> None:
    """Raises `DocsDatabaseError` (one line naming it) when no collection `name` exists."""
    with DocIndex.open(default_path()) as index:
        index.collection(name)
