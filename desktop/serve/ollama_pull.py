"""`POST /api/pull` in Ollama's shape: a GGUF from the Hugging Face Hub, named as Ollama names one.

`hf.co/OWNER/REPO[:QUANT]` (or `huggingface.co/…`) goes through what `ember models pull` uses:
the consent already given for the Hub's host (zero-egress mode stays on: a server cannot ask,
so a pull before the consent is a 403 that says how to give it), the same file choice, download,
digest check and network ledger, into Ember's models folder. Progress comes as Ollama's status
lines (`pulling manifest`, `pulling <digest>` with `total`/`completed`, `verifying sha256
digest`, `writing manifest`, `success`), streamed as NDJSON unless `"stream": false`. Ollama's
own library names (`llama3.2`, …) are not on the Hub: a clear `{"error": "…"}`.

A client that leaves mid-pull cancels it; the `.part` files stay, and the next pull resumes them.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator
from typing import Any

from starlette.responses import JSONResponse, Response, StreamingResponse

from desktop.serve.errors import ApiError
from engine.api.errors import EngineError
from engine.api.values import CancelToken

_PREFIXES = ("hf.co/", "huggingface.co/", "https://hf.co/", "https://huggingface.co/")
NOT_HUB = (
    "pull model manifest: Ember pulls GGUF models from the Hugging Face Hub only: name one as "
    "hf.co/OWNER/REPO:QUANT (e.g. hf.co/bartowski/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M)"
)
_DONE = object()


def hub_spec(name: str) -> str | None:
    """`OWNER/REPO[:QUANT]` for a Hub name; None for anything else (Ollama's library names)."""
    lowered = name.strip().lower()
    prefix = next((p for p in _PREFIXES if lowered.startswith(p)), None)
    if prefix is None:
        return None
    spec = name.strip()[len(prefix) :]
    return spec.removesuffix(":latest") or None


async def pull(body: dict[str, Any]) -> Response:
    """The pull `body` asks for (checked here; the Hub is reached only with its consent)."""
    name = body.get("model") or body.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ApiError(400, "'model' must name the model to pull (hf.co/OWNER/REPO:QUANT)")
    spec = hub_spec(name)
    if spec is None:
        raise ApiError(400, NOT_HUB)
    job = _Pull(spec)
    job.check()
    if body.get("stream", True) is not False:
        return StreamingResponse(job.lines(), media_type="application/x-ndjson")
    last: dict[str, Any] = {}
    async for line in job.updates():
        last = line
    if "error" in last:
        raise ApiError(500, str(last["error"]))
    return JSONResponse(last)


class _Pull:
    """One pull on a thread of its own; its status lines handed to the event loop as they come."""

    def __init__(self, spec: str) -> None:
        from engine.api.downloads import HubClient, HubError, parse_spec
        from engine.api.program import ember_paths

        try:
            self.repo, self.selector = parse_spec(spec)
            self.client = HubClient()
        except HubError as exc:
            raise ApiError(400, f"pull model manifest: {exc}") from None
        self.paths = ember_paths()
        self.cancel = CancelToken()

    def check(self) -> None:
        """A 403 (before anything is reached) while downloads from the Hub are not allowed."""
        from engine.api.downloads import downloads_allowed, refusal_line

        if not downloads_allowed(self.paths, self.client):
            raise ApiError(403, refusal_line(self.client))

    async def lines(self) -> AsyncIterator[str]:
        async for update in self.updates():
            yield json.dumps(update, ensure_ascii=False) + "\n"

    async def updates(self) -> AsyncIterator[dict[str, Any]]:
        """The status lines, ending with `success` or one `error` line; leaving early cancels the pull."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Any] = asyncio.Queue()

        def put(item: Any) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, item)

        worker = threading.Thread(target=self._run, args=(put,), name="api-pull", daemon=True)
        worker.start()
        try:
            while (item := await queue.get()) is not _DONE:
                yield item
        finally:
            self.cancel.cancel()  # the client left (or the pull ended): the thread stops at its next block

    def _run(self, put: Any) -> None:
        from engine.api.downloads import Progress, default_models_dir, download, pick_files

        try:
            put({"status": "pulling manifest"})
            files = pick_files(self.client.list_gguf(self.repo), self.selector)
            digest = f"sha256:{files[0].sha256}" if files[0].sha256 else ""

            def progress(p: Progress) -> None:
                put(
                    {
                        "status": f"pulling {digest[7:19] or p.file}",
                        "digest": digest,
                        "total": p.total,
                        "completed": p.done,
                    }
                )

            download(files, default_models_dir(self.paths), client=self.client, progress=progress, cancel=self.cancel)
            put({"status": "verifying sha256 digest"})  # download() checked every file it fetched
            put({"status": "writing manifest"})
            put({"status": "success"})
        except EngineError as exc:  # HubError, DownloadError: one line each
            put({"error": str(exc)})
        except Exception as exc:  # a bug must still end the stream with a line
            put({"error": f"internal error: {type(exc).__name__}"})
        finally:
            put(_DONE)
