"""The `ember serve` part of `ember bench` (no Qt in this process).

On one loaded model, interleaved rounds of the same greedy story request, every side sent the
same messages (the engine's, its no-tools line folded in: the API adds nothing, so Ember
renders the same prompt on both of its sides):
- the in-process engine (`tests.bench.llama.time_engine`), its KV cache emptied first;
- one streaming client of `ember serve` on 127.0.0.1 (the same engine behind HTTP + SSE), its
  KV cache emptied first too: `serve_vs_engine_tps_ratio` and the TTFT overhead;
- llama-cpp-python's own server (`llama_cpp.server`, the `server` extra) in a child process on
  the same file, threads, context, batch and flash-attention setting, when it is installed,
  and beside it `ember serve` once more without emptying its cache: llama-cpp-python reuses the
  prefix its last request left in its context, and so does Ember, so both read the prompt from
  a warm cache. Tokens/s and time to first token are Ember's warm side over it.
Then 8, and 32, concurrent streaming clients against `ember serve` (one model: they take
turns), as total completion tokens per second of wall time. Every figure is reported, never
asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import socket
import statistics
import subprocess
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx

from desktop.serve.admission import ModelLine
from desktop.serve.app import ServeState
from desktop.serve.server import ServerThread, bind
from desktop.serve.state import model_id_for
from desktop.serve.wire import Defaults
from engine.backends.base import Sampling
from engine.errors import BenchError
from engine.runtime import Engine
from tests.bench import llama as bench_llama
from tests.bench.suite import BenchConfig
from tests.llama_child import module_command

CLIENTS = 32
FEW_CLIENTS = 8  # what a handful of editors and scripts sharing one server look like
CLIENT_TOKENS, CLIENT_TOKENS_QUICK = 32, 16
SERVER_START_S = 120


def collect(
    args: argparse.Namespace, config: BenchConfig, say: Callable[[str], None], notes: list[str]
) -> dict[str, Any]:
    runs = args.serve_runs if args.serve_runs is not None else config.runs
    if runs <= 0:
        return {}
    say(
        f"ember serve: {runs} interleaved rounds against the engine and llama-cpp-python's server, "
        f"then {FEW_CLIENTS} and {CLIENTS} clients"
    )
    client_tokens = min(config.max_tokens, CLIENT_TOKENS_QUICK if args.quick else CLIENT_TOKENS)
    try:
        return measure_serve(config, runs, client_tokens, notes)
    except (httpx.HTTPError, OSError, BenchError) as exc:  # e.g. loopback connections refused by a policy
        hint = (
            "; zero-egress mode covers loopback too: `ember network allow 127.0.0.1` lets the bench "
            "reach its own server"
            if "zero-egress" in str(exc)
            else ""
        )
        notes.append(f"ember serve: not measured ({exc}){hint}")
        return {}


def measure_serve(config: BenchConfig, runs: int, client_tokens: int, notes: list[str]) -> dict[str, Any]:
    model = config.model_path()
    threads = config.thread_count()
    backend = bench_llama.open_backend(model, config.n_ctx, threads, config.gpu_layers)
    engine = Engine(backend)
    greedy = Sampling.greedy()
    state = ServeState(
        engine,
        model_id=model_id_for(engine),
        defaults=lambda: Defaults(greedy, config.max_tokens, backend.n_ctx),
        line=ModelLine(CLIENTS),
    )
    server = ServerThread(state, bind("127.0.0.1", 0))
    server.start()
    work = bench_llama.Workload.story(config.max_tokens)
    try:
        _reach(server.address)  # before starting anything else: the bench's own loopback client must connect
        with _llama_cpp_server(config, threads, backend.flash_attn_mode, notes) as llama_url:

            def in_process() -> bench_llama.RunTiming:
                _wait_idle(engine)
                return bench_llama.time_engine(backend, work)

            def served(*, cold: bool = True) -> bench_llama.RunTiming:
                _wait_idle(engine)
                if cold:  # like the engine runs: the whole prompt is evaluated
                    backend.reset_cache()
                return time_stream(server.address, work, work.raw_messages)

            sides: list[Callable[[], bench_llama.RunTiming]] = [in_process, served]
            if llama_url:  # the same messages; each server's cache holds its previous run's prompt
                sides.append(lambda: time_stream(llama_url, work, work.raw_messages))
                sides.append(lambda: served(cold=False))
            for side in sides:  # warm-up
                side()
            rounds = list(bench_llama.interleaved_rounds(sides, runs))
        report = summarize(rounds, has_llama=bool(llama_url))
        report["serve_flash_attn"] = backend.flash_attn_mode
        report["serve_8_clients_total_tps"] = asyncio.run(_many_clients(server.address, FEW_CLIENTS, client_tokens))
        report["serve_32_clients_total_tps"] = asyncio.run(_many_clients(server.address, CLIENTS, client_tokens))
        report["serve_clients_tokens_each"] = client_tokens
        return report
    finally:
        server.stop()
        engine.close_sync()


def _reach(base_url: str) -> None:
    try:
        httpx.get(f"{base_url}/models", timeout=30).raise_for_status()
    except httpx.HTTPError as exc:
        raise BenchError(f"cannot reach ember serve on {base_url}: {exc}") from exc


def _wait_idle(engine: Engine) -> None:
    """Wait (briefly) until the server's last turn has left the model thread; then only this thread uses it."""
    deadline = time.monotonic() + 10
    while engine.busy:
        if time.monotonic() > deadline:
            raise BenchError("the engine is still busy between bench runs")
        time.sleep(0.005)


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 2) if values else 0.0


def summarize(rounds: list[list[bench_llama.RunTiming]], *, has_llama: bool) -> dict[str, Any]:
    engine_tps = _median([r[0].tokens_per_s for r in rounds])
    serve_tps = _median([r[1].tokens_per_s for r in rounds])
    engine_ttft = _median([r[0].ttft_ms for r in rounds])
    serve_ttft = _median([r[1].ttft_ms for r in rounds])
    out: dict[str, Any] = {
        "serve_tps": serve_tps,
        "serve_engine_tps": engine_tps,
        "serve_vs_engine_tps_ratio": round(serve_tps / engine_tps, 3) if engine_tps else None,
        "serve_ttft_ms": serve_ttft,
        "serve_ttft_overhead_ms": round(serve_ttft - engine_ttft, 2),
        "serve_runs": len(rounds),
        "serve_outputs_match": all(r[0].text == r[1].text for r in rounds),
        "llama_cpp_server_tps": None,
        "serve_vs_llama_cpp_server_tps_ratio": None,
        "serve_ttft_vs_llama_cpp_server_ratio": None,
    }
    if has_llama:  # r[2]: llama-cpp-python's server, r[3]: ember serve with its cache as it was
        llama_tps = _median([r[2].tokens_per_s for r in rounds])
        llama_ttft = _median([r[2].ttft_ms for r in rounds])
        warm_tps = _median([r[3].tokens_per_s for r in rounds])
        warm_ttft = _median([r[3].ttft_ms for r in rounds])
        out.update(
            llama_cpp_server_tps=llama_tps,
            llama_cpp_server_ttft_ms=llama_ttft,
            serve_warm_tps=warm_tps,
            serve_warm_ttft_ms=warm_ttft,
            serve_vs_llama_cpp_server_tps_ratio=round(warm_tps / llama_tps, 3) if llama_tps else None,
            # Lower is better (target <= 1.0): Ember's first token over its, in the same rounds.
            serve_ttft_vs_llama_cpp_server_ratio=round(warm_ttft / llama_ttft, 3) if llama_ttft else None,
            serve_outputs_match_llama_cpp_server=all(r[3].text == r[2].text for r in rounds),
            llama_cpp_server_kv_reuse="both servers keep the prefix their previous request left in the KV cache",
        )
    return out


def _body(work: bench_llama.Workload, messages: list[Any], max_tokens: int | None = None) -> dict[str, Any]:
    s = work.request.sampling
    return {
        "model": "bench",
        "messages": messages,
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": max_tokens or work.request.max_tokens,
        "temperature": s.temperature,
        "top_p": s.top_p,
        "top_k": s.top_k,
        "min_p": s.min_p,
        "repeat_penalty": s.repeat_penalty,
        "seed": bench_llama.SEED,
    }


def time_stream(base_url: str, work: bench_llama.Workload, messages: list[Any]) -> bench_llama.RunTiming:
    """One streaming request, timed from outside like the engine runs: first visible text → end."""
    start = time.perf_counter()
    first: float | None = None
    parts: list[str] = []
    usage_tokens = 0
    with httpx.stream("POST", f"{base_url}/chat/completions", json=_body(work, messages), timeout=600) as response:
        if response.status_code != 200:
            raise BenchError(f"{base_url} answered {response.status_code}: {response.read()[:200]!r}")
        for line in response.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if chunk.get("usage"):
                usage_tokens = int(chunk["usage"].get("completion_tokens") or 0)
            for choice in chunk.get("choices") or []:
                text = (choice.get("delta") or {}).get("content")
                if text:
                    first = first or time.perf_counter()
                    parts.append(text)
    end = time.perf_counter()
    first = first or end
    return bench_llama.RunTiming(
        round((first - start) * 1000, 2), usage_tokens or len(parts), end - first, "".join(parts)
    )


async def _many_clients(base_url: str, clients: int, max_tokens: int) -> float:
    work = bench_llama.Workload.story(max_tokens)
    tokens = 0

    async def one(http: httpx.AsyncClient) -> None:
        nonlocal tokens
        body = _body(work, work.raw_messages, max_tokens)
        async with http.stream("POST", f"{base_url}/chat/completions", json=body) as response:
            async for line in response.aiter_lines():
                if line.startswith("data: {") and '"usage"' in line:
                    usage = json.loads(line[6:]).get("usage") or {}
                    tokens += int(usage.get("completion_tokens") or 0)

    start = time.perf_counter()
    async with httpx.AsyncClient(timeout=600, limits=httpx.Limits(max_connections=clients)) as http:
        await asyncio.gather(*(one(http) for _ in range(clients)))
    return round(tokens / (time.perf_counter() - start), 2)


@contextlib.contextmanager
def _llama_cpp_server(config: BenchConfig, threads: int, flash_attn: str, notes: list[str]) -> Iterator[str | None]:
    """llama-cpp-python's server on the same model in a child process, set up as Ember's backend is
    (threads for decode and batch, batch size, flash attention: `flash_attn` is the loaded
    context's "on"/"off"); None (and a note) without it."""
    try:
        import llama_cpp.server  # noqa: F401  # pyright: ignore[reportUnusedImport]
    except ImportError as exc:
        notes.append(f"llama-cpp-python's server is not installed (the `server` extra): {exc.name}")
        yield None
        return
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = module_command(
        "llama_cpp.server",
        "--model",
        str(config.model_path().absolute()),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(config.n_ctx),
        "--n_threads",
        str(threads),
        "--n_threads_batch",
        str(threads),
        "--n_batch",
        str(min(512, config.n_ctx)),
        "--flash_attn",
        str(flash_attn == "on"),
        "--n_gpu_layers",
        str(config.gpu_layers),
        "--verbose",
        "False",
    )
    proc = subprocess.Popen(
        command.argv, env=command.env, cwd=command.cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        if not _wait_ready(url, proc):
            tail = (proc.stderr.read() if proc.stderr and proc.poll() is not None else "")[-300:]
            notes.append(f"llama-cpp-python's server did not start: {tail.strip() or 'timed out'}")
            yield None
        else:
            yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait_ready(url: str, proc: subprocess.Popen[str]) -> bool:
    deadline = time.monotonic() + SERVER_START_S
    while time.monotonic() < deadline and proc.poll() is None:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                return True
        time.sleep(0.3)
    return False


def report_rows(r: dict[str, Any], row: Callable[[str, str], str]) -> list[str]:
    if r.get("serve_tps") is None:
        return []
    rows = [
        row("ember serve, one client", f"{r['serve_tps']} tokens/s, x{r['serve_vs_engine_tps_ratio']} of the engine"),
        row(
            "ember serve TTFT overhead",
            f"{r['serve_ttft_overhead_ms']} ms over the engine's (first token at {r['serve_ttft_ms']} ms)",
        ),
    ]
    if r.get("llama_cpp_server_tps") is not None:
        rows.append(
            row(
                "ember serve vs llama-cpp-python's server",
                f"x{r['serve_vs_llama_cpp_server_tps_ratio']} its tokens/s ({r['serve_warm_tps']} vs "
                f"{r['llama_cpp_server_tps']}), first token x{r['serve_ttft_vs_llama_cpp_server_ratio']} its time "
                f"({r['serve_warm_ttft_ms']} vs {r['llama_cpp_server_ttft_ms']} ms); both caches warm, "
                f"flash attention {r.get('serve_flash_attn', '?')} on both",
            )
        )
    return [
        *rows,
        row(
            f"ember serve, {FEW_CLIENTS} clients",
            f"{r['serve_8_clients_total_tps']} tokens/s in total ({r['serve_clients_tokens_each']} tokens each)",
        ),
        row(
            f"ember serve, {CLIENTS} clients",
            f"{r['serve_32_clients_total_tps']} tokens/s in total "
            f"({r['serve_clients_tokens_each']} tokens each, one model taking turns)",
        ),
    ]
