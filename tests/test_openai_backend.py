"""OpenAIBackend against a stub server on 127.0.0.1 (real HTTP, scripted faults) and httpx fakes."""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sse_stub import DONE, PING, Reply, StubServer, chunk, free_port, json_body, sse

from engine.api.factory import make_backend, parse_backend_spec
from engine.backends.base import Backend, Request, Sampling, StreamInfo, make_request
from engine.backends.openai import (
    DEFAULT_RETRY_DELAYS_S,
    THINK_CLOSE,
    THINK_OPEN,
    OpenAIBackend,
    list_models,
)
from engine.cancel import CancelToken
from engine.errors import BackendError, ConfigError
from engine.events import Piece
from engine.reply.pipeline import ReplyPipeline

FAST = (0.01,)  # retry delays for tests
SECRET = "sk-test-5EcReT-9f8e7d"


def _request(**kwargs: object) -> Request:
    return make_request([{"role": "user", "content": "hi"}], **kwargs)


def _backend(stub: StubServer, **kwargs: Any) -> OpenAIBackend:
    kwargs.setdefault("retry_delays", FAST)
    return OpenAIBackend(stub.url, **kwargs)


def _run(backend: OpenAIBackend, request: Request | None = None) -> tuple[list[Piece], StreamInfo]:
    info = StreamInfo()
    pieces = list(backend.stream(request or _request(), CancelToken(), info))
    return pieces, info


def _until_error(stream: Iterator[Piece]) -> tuple[list[Piece], BackendError]:
    """The pieces a stream yielded before it failed, and the failure."""
    got: list[Piece] = []
    try:
        for piece in stream:
            got.append(piece)
    except BackendError as exc:
        return got, exc
    raise AssertionError(f"the stream ended without an error after {got!r}")


def _texts(pieces: list[Piece]) -> list[str]:
    return [p.text for p in pieces]


def _stub(stubs: list[StubServer], *replies: Reply) -> StubServer:
    stub = StubServer(replies).start()
    stubs.append(stub)
    return stub


# --- the happy path and the request body ---------------------------------------------


def test_streams_content_and_sends_the_request(stubs: list[StubServer]) -> None:
    stub = _stub(stubs, Reply([chunk("Hel"), chunk("lo"), chunk(finish="stop"), DONE]))
    backend = _backend(stub, model="qwen3")
    sampling = Sampling(temperature=0.3, top_p=0.9, top_k=20, min_p=0.1, repeat_penalty=1.05, seed=7)
    tools = ({"type": "function", "function": {"name": "now", "parameters": {}}},)
    request = _request(sampling=sampling, max_tokens=32, tools=tools, grammar='root ::= "x"')

    pieces, info = _run(backend, request)

    assert _texts(pieces) == ["Hel", "lo"]
    assert not any(p.special for p in pieces)
    assert info.finish_reason == "stop"
    assert info.retries == 0
    [sent] = stub.requests
    assert (sent.method, sent.path) == ("POST", "/v1/chat/completions")
    body = sent.body
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["messages"] == [{"role": "user", "content": "hi"}]
    assert body["model"] == "qwen3"
    assert (body["temperature"], body["top_p"], body["seed"], body["max_tokens"]) == (0.3, 0.9, 7, 32)
    assert (body["top_k"], body["min_p"], body["repeat_penalty"]) == (20, 0.1, 1.05)
    assert body["tools"] == [dict(t) for t in tools]
    assert body["grammar"] == 'root ::= "x"'
    assert "authorization" not in {k.lower() for k in sent.headers}
    backend.close()


def test_optional_fields_are_left_out(stubs: list[StubServer]) -> None:
    stub = _stub(stubs, Reply([chunk("a"), DONE]))
    _run(_backend(stub), _request(sampling=Sampling(seed=None)))
    body = stub.requests[0].body
    assert not {"model", "seed", "tools", "grammar"} & body.keys()


def test_is_a_backend_and_does_nothing_at_construction() -> None:
    calls: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        return httpx.Response(500)

    backend = OpenAIBackend("http://example.invalid/v1", transport=httpx.MockTransport(handler))
    gen = backend.stream(_request(), CancelToken(), StreamInfo())  # not iterated: no request
    assert isinstance(backend, Backend)
    assert backend.capabilities.grammar is False
    assert backend.name == "openai@example.invalid"
    gen.close()
    backend.close()
    assert calls == []


def test_base_url_normalisation_and_bad_urls() -> None:
    assert OpenAIBackend("localhost:8080/v1/").base_url == "http://localhost:8080/v1"
    with pytest.raises(ConfigError):
        OpenAIBackend("ftp://host/v1")
    with pytest.raises(ConfigError):
        OpenAIBackend("http://host/v1", max_retries=-1)


def test_factory_builds_it_without_network() -> None:
    backend = make_backend(parse_backend_spec(f"openai:http://127.0.0.1:{free_port()}/v1"), model_name="m")
    assert isinstance(backend, OpenAIBackend)
    assert backend.model == "m"
    backend.close()


def test_length_and_usage(stubs: list[StubServer]) -> None:
    usage = sse({"id": "c1", "choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 2}})
    stub = _stub(stubs, Reply([chunk("a"), chunk("b", finish="length"), usage, DONE]))
    pieces, info = _run(_backend(stub))
    assert _texts(pieces) == ["a", "b"]
    assert info.finish_reason == "length"
    assert info.prompt_tokens == 12


# --- thinking ------------------------------------------------------------------------


def test_reasoning_content_is_wrapped_in_special_think_markers(stubs: list[StubServer]) -> None:
    parts = [chunk(reasoning="Let me"), chunk(reasoning=" think"), chunk("Answer"), chunk(" here"), DONE]
    stub = _stub(stubs, Reply(parts))
    pieces, _ = _run(_backend(stub))
    assert pieces == [THINK_OPEN, Piece("Let me"), Piece(" think"), THINK_CLOSE, Piece("Answer"), Piece(" here")]
    assert THINK_OPEN == Piece("<think>", special=True)
    assert THINK_CLOSE == Piece("</think>", special=True)


def test_through_the_reply_pipeline(stubs: list[StubServer]) -> None:
    # The remote path gets the same splitter and guardrail as a local model.
    parts = [
        chunk(reasoning="Let me"),
        chunk(reasoning=" think"),
        chunk("Answer"),
        chunk(" <tool_"),
        chunk('call>{"name": "f"}</tool'),
        chunk("_call>"),
    ]
    stub = _stub(stubs, Reply([*parts, DONE]))
    pipeline = ReplyPipeline()
    for piece in _run(_backend(stub))[0]:
        pipeline.feed(piece)
    pipeline.flush()
    assert (pipeline.thinking, pipeline.content.strip()) == ("Let me think", "Answer")
    assert pipeline.stripped_chars > 0


def test_vllm_reasoning_field_and_thinking_closed_at_stream_end(stubs: list[StubServer]) -> None:
    stub = _stub(stubs, Reply([chunk(reasoning="hmm", reasoning_key="reasoning"), chunk(finish="length")]))
    pieces, info = _run(_backend(stub))
    assert pieces == [THINK_OPEN, Piece("hmm"), THINK_CLOSE]
    assert info.finish_reason == "length"


def test_think_tags_in_content_and_split_scaffolding_pass_through_in_order(stubs: list[StubServer]) -> None:
    # The splitter and the guardrail downstream handle these; the backend must not reorder or merge.
    parts = [chunk("<thi"), chunk("nk>x</think>Hi"), chunk("<tool_"), chunk("call>{}</tool_call>"), DONE]
    stub = _stub(stubs, Reply(parts))
    pieces, _ = _run(_backend(stub))
    assert _texts(pieces) == ["<thi", "nk>x</think>Hi", "<tool_", "call>{}</tool_call>"]
    assert not any(p.special for p in pieces)


# --- robustness of the stream --------------------------------------------------------


def test_keep_alive_comments_and_missing_done(stubs: list[StubServer]) -> None:
    stub = _stub(stubs, Reply([PING, chunk("a"), PING, b"event: message\nid: 3\n", chunk("b", finish="stop")]))
    pieces, info = _run(_backend(stub))
    assert _texts(pieces) == ["a", "b"]
    assert info.finish_reason == "stop"  # a finish reason without [DONE] is a finished reply


def test_a_stream_ending_without_finish_reason_or_done_is_cut_off(stubs: list[StubServer]) -> None:
    stub = _stub(stubs, Reply([chunk("a"), chunk("b")]))
    pieces, error = _until_error(_backend(stub).stream(_request(), CancelToken(), StreamInfo()))
    assert "ended the stream without finishing the reply (cut off)" in str(error)
    assert _texts(pieces) == ["a", "b"]  # the partial reply reached the consumer


def test_events_split_across_network_chunks_and_crlf(stubs: list[StubServer]) -> None:
    event = chunk("whole")
    stub = _stub(stubs, Reply([event[:9], event[9:20], event[20:], b"data: [DO", b"NE]\r\n\r\n"]))
    pieces, _ = _run(_backend(stub))
    assert _texts(pieces) == ["whole"]


def test_malformed_lines_are_skipped_with_a_debug_log(
    stubs: list[StubServer], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="engine.openai_backend")
    parts = [b"data: {not json\n\n", b"garbage\n\n", sse([1, 2]), chunk("ok", finish="stop"), sse({"odd": 1}), DONE]
    stub = _stub(stubs, Reply(parts))
    pieces, info = _run(_backend(stub))
    assert _texts(pieces) == ["ok"]
    assert info.finish_reason == "stop"
    assert sum("malformed" in r.getMessage() for r in caplog.records) == 3


def test_nothing_readable_is_an_error(stubs: list[StubServer]) -> None:
    stub = _stub(stubs, Reply([b"data: nope\n\n", DONE]), Reply(json_body({"not": "sse"}), content_type="text/html"))
    backend = _backend(stub)
    with pytest.raises(BackendError, match=rf"^{stub.host} sent no readable stream data \(1 malformed"):
        _run(backend)
    with pytest.raises(BackendError, match="no readable stream data"):
        _run(backend)


def test_empty_stream_without_done_is_an_error_but_done_alone_is_an_empty_reply(stubs: list[StubServer]) -> None:
    stub = _stub(stubs, Reply([]), Reply([DONE]))
    backend = _backend(stub)
    with pytest.raises(BackendError, match="ended the reply stream without sending anything"):
        _run(backend)
    assert _run(backend)[0] == []


def test_unknown_fields_and_tool_call_deltas_are_ignored(
    stubs: list[StubServer], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="engine.openai_backend")
    call = {"index": 0, "id": "t", "function": {"name": "now", "arguments": "{}"}}
    odd = {"choices": [{"index": 0, "delta": {"tool_calls": [call], "x": 1}, "logprobs": None}], "timings": {}}
    stub = _stub(stubs, Reply([chunk("a"), sse(odd), chunk(finish="tool_calls"), DONE]))
    pieces, info = _run(_backend(stub))
    assert _texts(pieces) == ["a"]
    assert info.finish_reason == "stop"
    assert "tool calls" in caplog.text


def test_older_vllm_error_shape_in_the_stream(stubs: list[StubServer]) -> None:
    vllm = {"object": "error", "message": "prompt too long", "type": "BadRequestError", "code": 400}
    stub = _stub(stubs, Reply([sse(vllm), DONE]))
    with pytest.raises(BackendError, match=r"reported an error: prompt too long$"):
        _run(_backend(stub))


def test_error_object_in_the_stream(stubs: list[StubServer]) -> None:
    stub = _stub(stubs, Reply([chunk("a"), sse({"error": {"message": "KV cache\nfull", "code": 500}}), DONE]))
    got, err = _until_error(_backend(stub).stream(_request(), CancelToken(), StreamInfo()))
    assert got == [Piece("a")]
    assert str(err) == f"{stub.host} reported an error: KV cache full"
    assert len(stub.requests) == 1


# --- retries before the first piece --------------------------------------------------


def test_connection_refused_is_retried_then_reported() -> None:
    port = free_port()
    info = StreamInfo()
    backend = OpenAIBackend(f"http://127.0.0.1:{port}/v1", retry_delays=FAST)
    with pytest.raises(BackendError) as err:
        list(backend.stream(_request(), CancelToken(), info))
    assert info.retries == 2
    message = str(err.value)
    assert message.startswith(f"cannot connect to 127.0.0.1:{port}: ")
    assert "refused" in message
    assert "\n" not in message


def test_503_before_the_first_piece_is_retried(stubs: list[StubServer]) -> None:
    stub = _stub(
        stubs,
        Reply(json_body({"error": {"message": "loading model"}}), status=503, content_type="application/json"),
        Reply([chunk("fine"), DONE]),
    )
    pieces, info = _run(_backend(stub))
    assert _texts(pieces) == ["fine"]
    assert info.retries == 1
    assert len(stub.requests) == 2


def test_429_is_retried_and_exhaustion_reports_the_last_error(stubs: list[StubServer]) -> None:
    busy = Reply(json_body({"error": "slow down"}), status=429, content_type="application/json")
    stub = _stub(stubs, busy, busy, busy, Reply([chunk("never"), DONE]))
    info = StreamInfo()
    with pytest.raises(BackendError) as err:
        list(_backend(stub).stream(_request(), CancelToken(), info))
    assert str(err.value) == f"{stub.host} returned HTTP 429 Too Many Requests: slow down"
    assert info.retries == 2
    assert len(stub.requests) == 3


def test_4xx_is_not_retried_and_quotes_the_server(stubs: list[StubServer]) -> None:
    missing = {"error": {"message": "model 'big' not found", "type": "invalid_request_error"}}
    stub = _stub(stubs, Reply(json_body(missing), status=404, content_type="application/json"))
    info = StreamInfo()
    with pytest.raises(BackendError) as err:
        list(_backend(stub, model="big").stream(_request(), CancelToken(), info))
    assert str(err.value) == f"{stub.host} returned HTTP 404 Not Found: model 'big' not found"
    assert info.retries == 0
    assert len(stub.requests) == 1


def test_fastapi_validation_error_is_readable(stubs: list[StubServer]) -> None:
    detail = {"detail": [{"loc": ["body", "messages"], "msg": "field required", "type": "missing"}]}
    stub = _stub(stubs, Reply(json_body(detail), status=422, content_type="application/json"))
    with pytest.raises(BackendError, match=r"HTTP 422 Unprocessable Entity: body.messages: field required$"):
        _run(_backend(stub))


def test_reset_after_content_is_not_retried_and_keeps_the_pieces(stubs: list[StubServer]) -> None:
    stub = _stub(stubs, Reply([chunk("Hello"), chunk(" wor")], gate=True, then="reset"), Reply([chunk("x"), DONE]))
    info = StreamInfo()
    gen = _backend(stub).stream(_request(), CancelToken(), info)
    got = [next(gen), next(gen)]
    stub.proceed.set()
    with pytest.raises(BackendError) as err:
        next(gen)
    assert _texts(got) == ["Hello", " wor"]
    assert str(err.value).startswith(f"{stub.host} dropped the connection")
    assert info.retries == 0
    assert len(stub.requests) == 1


def test_reset_before_any_content_is_retried(stubs: list[StubServer]) -> None:
    stub = _stub(stubs, Reply([PING], then="reset"), Reply([chunk("ok"), DONE]))
    stub.proceed.set()
    pieces, info = _run(_backend(stub))
    assert _texts(pieces) == ["ok"]
    assert info.retries == 1


def test_a_server_that_stops_sending_times_out(stubs: list[StubServer]) -> None:
    stub = _stub(stubs, Reply([chunk("partial")], then="stall"))
    info = StreamInfo()
    started = time.monotonic()
    got, err = _until_error(_backend(stub, timeout=0.3).stream(_request(), CancelToken(), info))
    assert time.monotonic() - started < 2
    assert got == [Piece("partial")]
    assert str(err) == f"{stub.host}: the server stopped sending (no data for 0.3 s)"
    assert info.retries == 0  # a read timeout is never retried: the server may still be working


def test_default_backoff_is_short() -> None:
    assert len(DEFAULT_RETRY_DELAYS_S) == 2
    assert sum(DEFAULT_RETRY_DELAYS_S) < 1.0


def test_cancel_during_backoff_stops_without_error() -> None:
    cancel = CancelToken()
    info = StreamInfo()
    backend = OpenAIBackend(f"http://127.0.0.1:{free_port()}/v1", retry_delays=(3.0,))
    threading.Timer(0.1, cancel.cancel).start()
    started = time.monotonic()
    assert list(backend.stream(_request(), cancel, info)) == []
    assert time.monotonic() - started < 2.5  # before the 3 s backoff ends: not a timing target
    assert info.finish_reason == "cancelled"
    assert info.retries == 0


# --- stop and the response's lifetime ------------------------------------------------


def test_cancel_between_events_ends_the_stream_and_hangs_up(stubs: list[StubServer]) -> None:
    stub = _stub(stubs, Reply([chunk(reasoning="r"), chunk("a")], then="trickle"))
    cancel = CancelToken()
    info = StreamInfo()
    got: list[Piece] = []
    for piece in _backend(stub).stream(_request(), cancel, info):
        got.append(piece)
        if piece == Piece("a"):
            cancel.cancel()
    assert got == [THINK_OPEN, Piece("r"), THINK_CLOSE, Piece("a")]
    assert info.finish_reason == "cancelled"
    assert stub.client_gone.wait(2)


def test_consumer_closing_the_generator_early_closes_the_response(stubs: list[StubServer]) -> None:
    stub = _stub(stubs, Reply([chunk("a"), chunk("b")], then="trickle"))
    gen = _backend(stub).stream(_request(), CancelToken(), StreamInfo())
    assert next(gen) == Piece("a")
    gen.close()
    assert stub.client_gone.wait(2)


class _TrackedStream(httpx.SyncByteStream):
    """A response body that records whether it was closed, optionally failing midway."""

    def __init__(self, parts: list[bytes], fail: bool = False) -> None:
        self.parts = parts
        self.fail = fail
        self.closed = False

    def __iter__(self) -> Iterator[bytes]:
        yield from self.parts
        if self.fail:
            raise httpx.ReadError("connection reset by peer")

    def close(self) -> None:
        self.closed = True


def _tracked_backend(body: _TrackedStream) -> OpenAIBackend:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=body)

    return OpenAIBackend("http://fake/v1", transport=httpx.MockTransport(handler), retry_delays=FAST)


@pytest.mark.parametrize("exit_path", ["end", "error", "cancel", "early_close", "consumer_raises"])
def test_the_response_is_closed_on_every_exit_path(exit_path: str) -> None:
    failing = exit_path == "error"
    body = _TrackedStream([chunk("a"), chunk("b")] + ([] if failing else [DONE]), fail=failing)
    cancel = CancelToken()
    gen = _tracked_backend(body).stream(_request(), cancel, StreamInfo())
    assert next(gen) == Piece("a")
    assert not body.closed
    if exit_path == "early_close":
        gen.close()
    elif exit_path == "consumer_raises":
        with pytest.raises(KeyError):
            gen.throw(KeyError("boom"))
    elif exit_path == "cancel":
        cancel.cancel()
        assert list(gen) == []
    elif exit_path == "error":
        with pytest.raises(BackendError, match="fake dropped the connection"):
            list(gen)
    else:
        assert list(gen) == [Piece("b")]
    assert body.closed


# --- the API key ---------------------------------------------------------------------


def test_api_key_is_sent_but_never_leaked(stubs: list[StubServer], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)  # every logger, httpx and httpcore included
    echo = {"error": {"message": f"Incorrect API key provided: {SECRET}"}}
    stub = _stub(
        stubs,
        Reply(json_body({"error": f"overloaded ({SECRET})"}), status=503, content_type="application/json"),
        Reply(json_body(echo), status=401, content_type="application/json"),
        Reply([chunk("ok"), sse({"error": f"bad key {SECRET}"})]),
        Reply(json_body({"data": [{"id": "m"}]}), content_type="application/json"),
    )
    backend = _backend(stub, api_key=SECRET, model="m")

    with pytest.raises(BackendError) as unauthorized:
        _run(backend)
    with pytest.raises(BackendError) as in_stream:
        _run(backend)
    assert list_models(stub.url, api_key=SECRET) == ["m"]

    assert all(r.headers.get("Authorization") == f"Bearer {SECRET}" for r in stub.requests)
    assert str(unauthorized.value).endswith("Incorrect API key provided: *** (check the API key)")
    texts = [
        repr(backend),
        backend.name,
        str(unauthorized.value),
        str(in_stream.value),
        *("".join(traceback.format_exception(e.value)) for e in (unauthorized, in_stream)),
        *(r.getMessage() for r in caplog.records),
        caplog.text,
    ]
    assert "api_key=***" in repr(backend)
    assert not [t for t in texts if SECRET in t]
    backend.close()


@pytest.mark.parametrize("key", ["sk-a\nb", "sk a", "sk-ä"])
def test_an_api_key_a_header_cannot_carry_is_refused_without_echoing_it(key: str) -> None:
    with pytest.raises(ConfigError) as err:
        OpenAIBackend("http://h/v1", api_key=key)
    assert key not in str(err.value)
    with pytest.raises(ConfigError):
        list_models("http://h/v1", api_key=key)


# --- list_models ---------------------------------------------------------------------


def test_list_models_reads_data_and_models(stubs: list[StubServer]) -> None:
    listing = {"data": [{"id": "a"}, {"id": "b"}], "models": [{"name": "b", "model": "b"}, {"model": "c"}]}
    stub = _stub(stubs, Reply(json_body(listing), content_type="application/json"))
    assert list_models(stub.url) == ["a", "b", "c"]
    assert stub.requests[0].path == "/v1/models"
    assert "authorization" not in {k.lower() for k in stub.requests[0].headers}


def test_list_models_errors_are_one_readable_line(stubs: list[StubServer]) -> None:
    stub = _stub(stubs, Reply([b"<html>oops</html>"], content_type="text/html"))
    with pytest.raises(BackendError, match=rf"^{stub.host} did not answer /models with a JSON object$"):
        list_models(stub.url)
    port = free_port()
    with pytest.raises(BackendError, match=rf"^cannot connect to 127.0.0.1:{port}: .*refused"):
        list_models(f"http://127.0.0.1:{port}/v1")


def test_list_models_with_a_transport() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.headers["authorization"] == f"Bearer {SECRET}"
        return httpx.Response(401, json={"error": {"message": "nope"}})

    with pytest.raises(BackendError) as err:
        list_models("http://fake:9/v1", api_key=SECRET, transport=httpx.MockTransport(handler))
    assert str(err.value) == "fake:9 returned HTTP 401 Unauthorized: nope (check the API key)"


def test_a_stop_while_the_server_is_silent_returns_at_once(stubs: list[StubServer]) -> None:
    stub = _stub(stubs, Reply([], then="stall"))  # headers, then nothing (a long prompt being read)
    cancel = CancelToken()
    info = StreamInfo()
    got: list[Piece] = []
    worker = threading.Thread(target=lambda: got.extend(_backend(stub, timeout=30).stream(_request(), cancel, info)))
    worker.start()
    deadline = time.monotonic() + 5
    while not stub.requests and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.1)  # let the client block in its read
    cancel.cancel()
    worker.join(timeout=2)  # far below the 30 s read timeout and the stub's 5 s stall cap
    still_reading = worker.is_alive()
    stub.release.set()
    worker.join(timeout=5)
    assert not still_reading
    assert got == [] and info.finish_reason == "cancelled"


def test_cancel_callbacks_run_once_and_can_be_forgotten() -> None:
    calls: list[str] = []
    token = CancelToken()
    forget = token.on_cancel(lambda: calls.append("a"))
    token.on_cancel(lambda: calls.append("b"))
    forget()
    token.cancel()
    token.cancel()
    token.on_cancel(lambda: calls.append("late"))  # already cancelled: runs at once
    assert calls == ["b", "late"]


# --- limits the client enforces itself (issue #14) ---------------------------------------


def test_a_server_ignoring_max_tokens_is_cut_off_client_side(stubs: list[StubServer]) -> None:
    stub = _stub(stubs, Reply([chunk("x") for _ in range(500)]))  # would go on; no finish, no [DONE]
    pieces, info = _run(_backend(stub), make_request([{"role": "user", "content": "hi"}], max_tokens=16))
    assert len(pieces) == 16
    assert info.finish_reason == "length"


def test_one_huge_piece_is_trimmed_to_the_token_budget(stubs: list[StubServer]) -> None:
    stub = _stub(stubs, Reply([chunk("y" * 1_000_000), DONE]))
    pieces, info = _run(_backend(stub), make_request([{"role": "user", "content": "hi"}], max_tokens=16))
    assert sum(len(p.text) for p in pieces) <= 16 * 32
    assert info.finish_reason == "length"


def test_keep_alives_without_content_hit_the_idle_timeout(stubs: list[StubServer]) -> None:
    stub = _stub(stubs, Reply([chunk("partial")], then="trickle"))
    backend = _backend(stub, idle_timeout=0.3)
    pieces, error = _until_error(backend.stream(_request(), CancelToken(), StreamInfo()))
    stub.release.set()
    assert _texts(pieces) == ["partial"]
    assert "sent no reply text for 0.3 s" in str(error) and "EMBER_IDLE_TIMEOUT_S" in str(error)


def test_the_idle_timeout_is_configurable(monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.backends.openai import DEFAULT_IDLE_TIMEOUT_S, default_idle_timeout

    assert default_idle_timeout() == DEFAULT_IDLE_TIMEOUT_S
    monkeypatch.setenv("EMBER_IDLE_TIMEOUT_S", "7.5")
    assert default_idle_timeout() == 7.5
    for bad in ("0", "-1", "nan", "inf", "soon"):
        monkeypatch.setenv("EMBER_IDLE_TIMEOUT_S", bad)
        with pytest.raises(ConfigError, match="EMBER_IDLE_TIMEOUT_S"):
            OpenAIBackend("http://127.0.0.1:1/v1")


@pytest.mark.parametrize("port", ["0", "99999", "65536"])
def test_an_impossible_port_is_refused(port: str) -> None:
    with pytest.raises(ConfigError, match="port"):
        OpenAIBackend(f"http://127.0.0.1:{port}/v1")
