"""What the model picker lists and says about each model, as plain values. No Qt here.

`library_rows()` reads the whole library (every header, so call it off the GUI thread)
and adds the saved remote servers; each row carries the `ModelChoice` that loads it and,
for a file that cannot be used, the one-line reason. `detail_items()` and
`memory_note()` turn a row into the facts the details pane shows.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from desktop.core.model_choice import ModelChoice, local_choice, remote_choice
from desktop.core.model_words import problem_words, summary_line, template_words
from engine.api.errors import GGUFError
from engine.api.library import (
    LibraryEntry,
    LibraryState,
    RemoteServer,
    Source,
    library_entries,
    load_api_key,
    skipped_files,
)
from engine.api.models import (
    BASE_MODEL_NOTE,
    DEFAULT_NAME,
    MarkerKind,
    MemoryEstimate,
    ModelMetadata,
    ProjectorInfo,
    estimate_memory,
    format_bytes,
    metadata_problem,
    pair,
)
from engine.api.program import ember_paths

SOURCE_NAMES = {
    Source.BUILTIN: "Built in",
    Source.MODELS_DIR: "Models folder",
    Source.FOLDER: "Added folder",
    Source.RECENT: "Opened file",
}
SERVER_SOURCE = "Server"
UNKNOWN = "—"


@dataclass(frozen=True, slots=True)
class ModelRow:
    """One line of the picker: its name and line in words, the choice that loads it, why it cannot load."""

    choice: ModelChoice
    name: str
    source: str
    title: str = ""  # the model's own name (general.name), shown under the file name
    error: str | None = None
    metadata: ModelMetadata | None = None
    path: Path | None = None
    server: RemoteServer | None = None
    summary: str = ""  # one line in words: "Llama · 135M · Q4_1 · 98 MB · 8K context · thinks"
    problem: str = ""  # the error in words ("Incomplete download: …"); `error` keeps the reader's own
    skipped: bool = False  # named like a model in a folder, but not one: listed greyed, never loaded
    projector: ProjectorInfo | None = None  # the vision projector that goes with it (a sibling mmproj)

    @property
    def loadable(self) -> bool:
        return self.error is None and not self.skipped

    @property
    def line(self) -> str:
        """The line under the file name: what is wrong with it, else the summary in words."""
        return self.problem or self.summary

    @property
    def base_model(self) -> bool:
        """A local file without a chat template (`models.gguf.builtin_templates.BASE_MODEL_NOTE`)."""
        return self.metadata is not None and self.metadata.base_model


def entry_row(entry: LibraryEntry) -> ModelRow:
    meta = entry.metadata
    error = entry.error or (metadata_problem(meta) if meta else None)
    n_ctx_train = meta.n_ctx_train if meta else None
    path = None if entry.source is Source.BUILTIN else entry.path  # the built-in is the default choice
    base = meta is not None and meta.base_model
    choice = local_choice(path, n_ctx_train=n_ctx_train)
    chosen = choice.settings.projector if choice.settings is not None else None
    projector = _projector(entry.path, meta, chosen) if meta and not error else None
    return ModelRow(
        choice=choice,
        # Named by file, as the header's chip names it: three copies of one model differ only there.
        name=DEFAULT_NAME if entry.source is Source.BUILTIN else entry.path.name,
        title=meta.name if meta and meta.name else "",
        source=SOURCE_NAMES.get(entry.source, str(entry.source)),
        error=error,
        metadata=meta,
        path=entry.path,
        summary=summary_line(meta, entry.size_bytes, vision=projector is not None, base_model=base) if meta else "",
        problem=problem_words(error, entry.path, entry.size_bytes) if error else "",
        projector=projector,
    )


def skipped_row(path: Path, source: Source) -> ModelRow:
    """A file named like a model that is not one (a PDF renamed, an HTML error page): greyed, with why."""
    size = _size(path)
    return ModelRow(
        choice=local_choice(path),
        name=path.name,
        source=SOURCE_NAMES.get(source, str(source)),
        error="not a GGUF file",
        path=path,
        problem=problem_words("not a GGUF file", path, size),
        skipped=True,
    )


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def skipped_rows(state: LibraryState) -> list[ModelRow]:
    """The files the library left out of the models folder and the added folders."""
    folders = ((ember_paths().models_dir, Source.MODELS_DIR), *((f, Source.FOLDER) for f in state.folders))
    return [skipped_row(p, source) for folder, source in folders for p in skipped_files(folder)]


def _projector(path: Path, meta: ModelMetadata, chosen: str | None) -> ProjectorInfo | None:
    """The model's vision projector, when one fits it: the one chosen in its settings, else one
    beside it (read from headers, not loaded)."""
    try:
        return pair(path, meta.embedding_length, Path(chosen).expanduser() if chosen else None).projector
    except GGUFError:
        return None


def server_row(server: RemoteServer) -> ModelRow:
    return ModelRow(
        choice=remote_choice(server),
        name=server.model or server.name,
        source=SERVER_SOURCE,
        error=None if server.model else "no model chosen for this server",
        server=server,
        summary=f"Runs on {server.base_url}",
        problem="" if server.model else "No model chosen for this server",
    )


def library_rows(state: LibraryState) -> list[ModelRow]:
    """Every local model (the built-in first), then the saved servers. Reads headers: slow."""
    rows = [entry_row(e) for e in library_entries(state)]
    known = {r.path for r in rows}
    skipped = [r for r in skipped_rows(state) if r.path not in known]  # an opened one is a row already
    return rows + [server_row(s) for s in state.remote_servers] + skipped


# --- the details pane ---------------------------------------------------------------------


def _markers(meta: ModelMetadata, kind: MarkerKind) -> str:
    found = [m.text for m in meta.markers if m.kind == kind]
    return ", ".join(found) if found else "none"


def metadata_items(meta: ModelMetadata) -> list[tuple[str, str]]:
    heads = f"{meta.head_count or UNKNOWN} (KV {meta.head_count_kv or UNKNOWN})"
    vocab = f"{meta.vocab_size:,}" if meta.vocab_size else UNKNOWN
    return [
        ("Architecture", meta.architecture),
        ("Parameters", meta.size_label or UNKNOWN),
        ("Quantization", meta.quantization),
        ("Size on disk", format_bytes(meta.size_bytes)),
        ("Training context", f"{meta.n_ctx_train:,}" if meta.n_ctx_train else UNKNOWN),
        ("Layers", str(meta.block_count or UNKNOWN)),
        ("Embedding", str(meta.embedding_length or UNKNOWN)),
        ("Attention heads", heads),
        ("Vocabulary", f"{vocab} ({meta.tokenizer_model or 'unknown'} tokenizer)"),
        ("Chat template", template_words(meta)),
        ("Thinking markers", _markers(meta, MarkerKind.THINKING)),
        ("Tool-call markers", _markers(meta, MarkerKind.TOOL_CALL)),
        ("BOS / EOS", f"{meta.bos_token or UNKNOWN} / {meta.eos_token or UNKNOWN}"),
        ("GGUF", f"version {meta.gguf_version}, {meta.tensor_count} tensors, {meta.shard_count} file(s)"),
    ]


def projector_items(row: ModelRow) -> list[tuple[str, str]]:
    """The vision projector's line in the details (none for a text-only model)."""
    if row.projector is None:
        return []
    return [("Vision", f"{row.projector.path.name}: {row.projector.summary()}")]


def server_items(server: RemoteServer) -> list[tuple[str, str]]:
    key = "saved (not shown)" if load_api_key(server.base_url) else "none"
    return [
        ("Server", server.base_url),
        ("Model", server.model or "none chosen"),
        ("API key", key),
        ("Runs on", "the server; Ember contacts it only when this model is loaded"),
    ]


def detail_items(row: ModelRow) -> list[tuple[str, str]]:
    """(label, value) facts for the details pane, source and location first."""
    where = [("Source", row.source)]
    if row.path is not None:
        where.append(("File", str(row.path)))
    if row.error:
        where.append(("Cannot load", row.problem or row.error))
    if row.base_model:
        where.append(("Note", BASE_MODEL_NOTE))
    if row.server is not None:
        return where + server_items(row.server)
    return where + projector_items(row) + (metadata_items(row.metadata) if row.metadata else [])


def memory_estimate(row: ModelRow) -> MemoryEstimate | None:
    """The memory the row's model needs at its chosen context (None when not a local model, or not loadable)."""
    settings = row.choice.settings
    if row.metadata is None or settings is None or row.error is not None:
        return None  # a file that cannot load has no honest estimate ("context 0 B" helped nobody)
    return estimate_memory(row.metadata, settings.context_length, kv_cache=settings.kv_cache)


def _kv_type(estimate: MemoryEstimate) -> str:
    return f", {estimate.kv_cache} cache" if estimate.kv_cache != "f16" else ""


def memory_note(estimate: MemoryEstimate) -> str:
    free = f"; {format_bytes(estimate.available_bytes)} free now" if estimate.available_bytes else ""
    return (
        f"About {format_bytes(estimate.total_bytes)} at a {estimate.context_length:,}-token context "
        f"(model {format_bytes(estimate.weights_bytes)} + context {format_bytes(estimate.kv_cache_bytes)}"
        f"{_kv_type(estimate)}){free}."
    )
