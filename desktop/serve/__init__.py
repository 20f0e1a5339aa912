"""`ember serve`: the loaded model as a local OpenAI-compatible API (Qt-free; the CLI and the window start it)."""
