"""Passage vectors: one contiguous float32 matrix per collection, and the nearest rows to a query.

This is the only documents module that imports numpy, and it is imported only where vectors
are used (an embedder embedding, vectors written, a search given a query vector), so
`ember chat --help` and the window's start never load numpy, nor llama.cpp, which must load
before it (engine.llama.llama_first, issue #15).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

# isort: off
import engine.llama.llama_first  # noqa: F401  # pyright: ignore[reportUnusedImport]  (llama.cpp before numpy)
import numpy as np
import numpy.typing as npt
# isort: on

Vector = npt.NDArray[np.float32]
Ids = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class Matrix:
    """A collection's vectors, read once and kept until the database changes (`version`)."""

    version: int
    ids: Ids  # the chunk id of each row
    rows: Vector  # (len(ids), width), C-contiguous, unit-length rows

    @classmethod
    def load(cls, version: int, rows: Iterable[tuple[int, bytes]]) -> Matrix:
        """From (chunk id, float32 blob) rows; a blob of another width than the first is skipped."""
        ids: list[int] = []
        blobs: list[bytes] = []
        for chunk_id, blob in rows:
            if not blobs or len(blob) == len(blobs[0]):
                ids.append(chunk_id)
                blobs.append(blob)
        width = len(blobs[0]) // 4 if blobs else 0
        matrix = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), width)
        return cls(version, np.asarray(ids, dtype=np.int64), matrix)

    def nearest(self, query: Vector, limit: int) -> list[int]:
        """The chunk ids of the `limit` rows most similar to `query` (cosine: the rows are unit length)."""
        return self.top(self.scores(query), limit)

    def scores(self, query: Vector) -> Vector:
        """Every row's cosine similarity to `query` (empty when the widths differ)."""
        query = np.ascontiguousarray(query, dtype=np.float32).reshape(-1)
        if not len(self.ids) or self.rows.shape[1] != query.shape[0]:
            return np.zeros(0, dtype=np.float32)
        # One core's loop, not `rows @ query`: OpenBLAS splits a matrix-vector product over its
        # threads, which costs far more than it saves on a busy machine (10k × 384: 20 ms, not 1.3).
        return np.einsum("ij,j->i", self.rows, query)

    def top(self, scores: Vector, limit: int) -> list[int]:
        if not len(scores) or limit <= 0:
            return []
        top = min(limit, len(scores))
        best = np.argpartition(scores, len(scores) - top)[len(scores) - top :]  # O(n), not a full sort
        best = best[np.argsort(-scores[best], kind="stable")]
        return [int(i) for i in self.ids[best]]

    def similarity(self, scores: Vector) -> dict[int, float]:
        """Chunk id -> cosine, from `scores`."""
        return dict(zip(self.ids.tolist(), scores.tolist(), strict=False)) if len(scores) else {}


def blob(vector: Vector) -> bytes:
    """One vector as stored in the `vectors` table."""
    return np.ascontiguousarray(vector, dtype=np.float32).tobytes()


def stack(rows: Sequence[Any], width: int) -> Vector:
    """Embedding rows as one float32 matrix ((0, width) when there are none)."""
    if not rows:
        return np.zeros((0, width), dtype=np.float32)
    return np.asarray(rows, dtype=np.float32)


def concat(parts: Sequence[Vector]) -> Vector:
    """Row groups as one matrix ((0, 0) when there are none)."""
    if not parts:
        return np.zeros((0, 0), dtype=np.float32)
    return np.concatenate(parts, axis=0)
