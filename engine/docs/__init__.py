"""Chat with your documents: extraction, chunking, the index (FTS5 + vectors), retrieval, citations.

Qt-free. `extract` reads a file into text blocks (page numbers kept), `chunk` cuts them into
overlapping passages with their offsets, `index` stores them in SQLite (FTS5 BM25, optional
vectors, reciprocal-rank fusion), `indexer` keeps a collection in step with its files
(incremental, resumable, cancellable), `context` turns a question plus documents into the
numbered passages a prompt carries and the sources a reply cites.
"""
