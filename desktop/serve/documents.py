"""`"ember": {"collection": "NAME"}`: a chat completion answered from an `ember docs` collection.

The request's last user message carries the collection's best passages that fit, numbered
(the same `TurnDocuments` as `ember chat --docs` and the window), and each choice of the
response carries an Ember extension object:

    "ember": {"sources": [{"n": 1, "path": ..., "page": null, "start": 0, "end": 812,
                           "score": 0.03, "text": ...}, ...],
              "paragraphs": [{"start": 0, "end": 120, "sources": [1], "cited": false}, ...],
              "answer_from": {"basis": "paragraphs", "sources": [1]}}

`paragraphs` says which passages support each paragraph of the answer (`content[start:end]`):
the model's own `[n]` (`cited`), or `engine.docs.attribution`'s when it cited none.
`answer_from` is what to show as the answer's origin, never empty while `sources` is not:
`basis` "paragraphs", the passages that support a paragraph; `basis` "given", no paragraph
matched one, so every passage the model was given (to be shown as that, not as support).
Streamed, the object comes with the choice's finish chunk (the answer is whole only then). A
request naming no collection gets no such field; OpenAI's clients keep it as an extra field.
"""

from __future__ import annotations

import asyncio
from typing import Any

from desktop.serve.errors import ApiError
from engine.api import documents
from engine.api.documents import TurnDocuments
from engine.api.values import Sources

PARAM = "ember.collection"


def check_collection(name: str) -> None:
    """A 404 naming `name` when no such collection exists (before the request waits for the model)."""
    try:
        documents.check_collection(name)
    except documents.DocsDatabaseError as exc:
        raise ApiError(404, str(exc), param=PARAM, code="collection_not_found") from None


async def open_collection(name: str) -> TurnDocuments:
    """The collection with its embedder, opened on a worker thread (the embedder is kept for the process).

    Raises `DocsDatabaseError` (gone since the check) or `ModelLoadError` (its embedder).
    """
    return await asyncio.to_thread(TurnDocuments.open, (), name)


def extension(sources: Sources | None) -> dict[str, Any] | None:
    """The choice's `ember` object: the passages, and each paragraph's once the answer is whole."""
    if sources is None:
        return None
    out: dict[str, Any] = {"sources": [s.to_json() for s in sources.sources]}
    answer_from = sources.answer_from()
    if sources.paragraphs is not None and answer_from is not None:
        out["paragraphs"] = [p.to_json() for p in sources.paragraphs]
        out["answer_from"] = answer_from.to_json()
    return out
