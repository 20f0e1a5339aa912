"""Model files, Qt-free: what Ember knows about a GGUF without loading its weights.

formats   the one table of model formats (thinking and tool-call markers per family)
errors    EmberError, the root of every error, and the model errors
gguf/     header (a bounded streaming GGUF reader), meta (ModelMetadata from a header),
          ggml_types, architectures (what the bundled llama.cpp loads), templates
          (chat-template families, thinking pre-fill), diagnose (why a file will not load)
library/  scan (the model library: folders, shards, projectors, recent files), settings
          (per-model settings), memory (weights + KV cache against available memory),
          jsonstore (atomic JSON writes), paths, default_model (the built-in SmolLM2),
          remote_keys (API keys of saved servers)
"""
