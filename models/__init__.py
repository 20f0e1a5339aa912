"""Model files, Qt-free: what Ember knows about a GGUF without loading its weights.

    gguf_header   strict streaming GGUF header reader (metadata, tensor infos, bounds)
    gguf_meta     ModelMetadata / ModelProfile from a header; read_metadata(), bench_header()
    templates     chat-template family detection, thinking pre-fill detection
    markers       thinking and tool-call marker strings
    architectures the architectures the bundled llama.cpp can load
    diagnose      explain_load_failure(): one-line reasons a file will not load
    library       the model library: folders, shards, projectors, recent files, state
    settings      per-model settings, persisted in the config directory
    memory        weights + KV cache estimate against available memory
    errors        GGUFError
    jsonstore     atomic JSON writes, forgiving reads
    paths, default_model   where things live; the built-in SmolLM2
"""
