"""`ember serve`: the loaded model as a local OpenAI-compatible API (Qt-free; the CLI and the window start it)."""

# Here, not in server.py, so the window can show the address without importing the ASGI stack
# (uvicorn, starlette) before its first paint: that waits for a click on Serve.
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080
