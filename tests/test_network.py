"""Zero-egress mode (engine/network): refused before connecting, allowed when allowed, all in the ledger.

Everything here stays on loopback: a stub server on 127.0.0.1 counts the connections it
accepts, so "refused before connecting" is checked by the counter staying at 0.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sse_stub import DONE, Reply, StubServer, chunk

from engine.backends.base import Request, StreamInfo
from engine.backends.openai import OpenAIBackend, list_models
from engine.cancel import CancelToken
from engine.network import guard as network_guard
from engine.network.destinations import Destination, parse_destination
from engine.network.guard import EgressRefused, Guard, enforced
from engine.network.ledger import LEDGER_FILE, Ledger, read_ledger_file
from engine.network.policy import Allowed, EgressPolicy, PolicyView, load_settings
from models.library.paths import ember_paths


class CountingStub(StubServer):
    """The SSE stub, counting every TCP connection it accepts."""

    def __init__(self, replies: list[Reply]) -> None:
        super().__init__(replies)
        self.connections = 0
        self._count_lock = threading.Lock()
        accept = self._httpd.verify_request

        def counted(request: Any, address: Any) -> bool:
            with self._count_lock:
                self.connections += 1
            return accept(request, address)

        self._httpd.verify_request = counted  # type: ignore[method-assign]


def _eventually(check: Any, seconds: float = 5.0) -> bool:
    """The stub counts a raw connection on its own thread, a moment after connect() returns."""
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def _reply() -> Reply:
    return Reply([chunk("Hello"), chunk(finish="stop"), DONE])


@pytest.fixture
def stub() -> Iterator[CountingStub]:
    server = CountingStub([_reply(), _reply()])
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _guard(tmp_path: Path, *allowed: str, zero_egress: bool = True) -> Guard:
    view = PolicyView(zero_egress, tuple(Allowed(parse_destination(a), "test") for a in allowed))
    return Guard(EgressPolicy.fixed(view, ember_paths()), Ledger(tmp_path / LEDGER_FILE))


def _stream(backend: OpenAIBackend) -> str:
    request = Request(messages=({"role": "user", "content": "hi"},), max_tokens=8)
    return "".join(p.text for p in backend.stream(request, CancelToken(), StreamInfo()))


def test_a_remote_backend_not_allowed_is_refused_before_connecting(tmp_path: Path, stub: CountingStub) -> None:
    guard = _guard(tmp_path)
    with enforced(guard), pytest.raises(EgressRefused) as refused:
        _stream(OpenAIBackend(stub.url, model="m", max_retries=2))
    assert stub.connections == 0
    message = str(refused.value)
    assert "\n" not in message
    assert stub.host in message and f"ember network allow {stub.host}" in message
    [attempt] = guard.ledger.entries()
    assert (attempt.destination, attempt.allowed, attempt.feature) == (stub.host, False, "remote server")


def test_an_allowed_remote_backend_connects_and_the_ledger_records_both(tmp_path: Path, stub: CountingStub) -> None:
    guard = _guard(tmp_path, stub.host)
    with enforced(guard):
        assert _stream(OpenAIBackend(stub.url, model="m")) == "Hello"
    assert stub.connections == 1
    refusing = _guard(tmp_path)  # the same ledger file: a later run that is not allowed
    with enforced(refusing), pytest.raises(EgressRefused):
        list_models(stub.url)
    assert stub.connections == 1
    recorded = [(a.destination, a.verdict, a.feature) for a in read_ledger_file(tmp_path / LEDGER_FILE)]
    assert recorded == [(stub.host, "allowed", "remote server"), (stub.host, "refused", "remote server")]


def test_a_destination_allowed_by_name_connects_by_address(tmp_path: Path, stub: CountingStub) -> None:
    guard = _guard(tmp_path, f"localhost:{stub.port}")
    with enforced(guard):
        assert _stream(OpenAIBackend(f"http://localhost:{stub.port}/v1", model="m")) == "Hello"
    assert stub.connections == 1
    assert [a.verdict for a in guard.ledger.entries()] == ["allowed"]


def test_the_audit_hook_refuses_any_python_connection(tmp_path: Path, stub: CountingStub) -> None:
    guard = _guard(tmp_path)
    with enforced(guard):
        with pytest.raises(PermissionError, match="zero-egress mode refused"):
            socket.create_connection(("127.0.0.1", stub.port), timeout=2)
        with network_guard.feature("update check"), pytest.raises(EgressRefused):
            socket.create_connection(("127.0.0.1", stub.port), timeout=2)
    assert stub.connections == 0
    assert [a.feature for a in guard.ledger.entries()] == ["unnamed code", "update check"]


def test_a_name_lookup_that_is_not_allowed_never_leaves_the_process(tmp_path: Path) -> None:
    guard = _guard(tmp_path)
    with enforced(guard), pytest.raises(EgressRefused, match=r"example\.invalid"):
        socket.getaddrinfo("example.invalid", 443)
    [attempt] = guard.ledger.entries()
    assert (attempt.action, attempt.destination) == ("lookup", "example.invalid")


def test_off_allows_and_records(tmp_path: Path, stub: CountingStub) -> None:
    guard = _guard(tmp_path, zero_egress=False)
    with enforced(guard):
        socket.create_connection(("127.0.0.1", stub.port), timeout=2).close()
    assert [a.verdict for a in guard.ledger.entries()] == ["allowed"]


def test_listening_and_unix_sockets_are_not_egress(tmp_path: Path) -> None:
    guard = _guard(tmp_path)
    with enforced(guard):
        with socket.create_server(("127.0.0.1", 0)) as server:  # inbound: `ember serve` one day
            assert server.getsockname()[1] > 0
        path = str(tmp_path / "s.sock")
        with socket.socket(socket.AF_UNIX) as listener, socket.socket(socket.AF_UNIX) as client:
            listener.bind(path)
            listener.listen()
            client.connect(path)
        a, b = socket.socketpair()
        a.close()
        b.close()
    assert guard.ledger.entries() == []


def test_the_guard_is_gone_after_the_block(tmp_path: Path, stub: CountingStub) -> None:
    with enforced(_guard(tmp_path)):
        pass
    socket.create_connection(("127.0.0.1", stub.port), timeout=2).close()
    assert _eventually(lambda: stub.connections == 1)


def test_destinations_parse_the_ways_users_write_them() -> None:
    assert parse_destination("Example.COM") == Destination("example.com", None)
    assert parse_destination("example.com:8080") == Destination("example.com", 8080)
    assert parse_destination("https://api.example.com/v1") == Destination("api.example.com", 443)
    assert str(parse_destination("[::1]:8080")) == "[::1]:8080"
    assert Destination("example.com").matches("EXAMPLE.com.", 1234)
    with pytest.raises(Exception, match="not a destination"):
        parse_destination("a b")


# -- the setting, through the command line ------------------------------------------------


def _ember(*argv: str) -> int:
    from desktop.cli.main import main

    return main(list(argv))


@pytest.mark.slow  # starts `ember` under unshare (tests/slow_marks.py)
def test_a_fresh_install_is_zero_egress_with_nothing_allowed(capsys: pytest.CaptureFixture[str]) -> None:
    assert load_settings(ember_paths()).zero_egress
    assert _ember("doctor", "--network", "--json") == 0
    report = json.loads(capsys.readouterr().out)
    assert report["zero_egress"] is True
    assert report["allowed"] == []
    assert report["totals"] == {"allowed": 0, "refused": 0}


def test_network_allow_remove_on_off(capsys: pytest.CaptureFixture[str]) -> None:
    assert _ember("network", "allow", "http://127.0.0.1:8080/v1") == 0
    assert _ember("network", "allow", "mcp:fetch") == 0
    view = EgressPolicy(ember_paths()).view()
    assert view.permits("127.0.0.1", 8080) and not view.permits("127.0.0.1", 8081)
    assert view.mcp_network == {"fetch"}
    assert _ember("network", "remove", "127.0.0.1:8080") == 0
    assert not EgressPolicy(ember_paths()).view().permits("127.0.0.1", 8080)
    assert _ember("network", "off") == 0
    assert EgressPolicy(ember_paths()).view().permits("example.com", 443)
    assert _ember("network", "on") == 0
    capsys.readouterr()
    assert _ember("network", "allow", "no such host") == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_a_saved_server_is_allowed() -> None:
    from models.library.scan import RemoteServer, load_library_state, save_library_state

    save_library_state(load_library_state().with_remote_server(RemoteServer("box", "http://10.0.0.5:8080/v1", None)))
    view = EgressPolicy(ember_paths()).view()
    assert view.permits("10.0.0.5", 8080)
    assert [a.source for a in view.allowed] == ["saved server 'box'"]


def test_the_cli_refuses_a_server_in_one_line_and_records_it(
    stub: CountingStub, capsys: pytest.CaptureFixture[str]
) -> None:
    status = _ember("chat", "--backend", f"openai:{stub.url}", "--max-tokens", "8", "hi")
    err = capsys.readouterr().err
    assert status != 0
    assert stub.connections == 0
    assert f"zero-egress mode refused a connection to {stub.host}" in err
    assert _ember("doctor", "--network") == 0
    out = capsys.readouterr().out
    assert "Zero-egress mode: on" in out and "0 allowed, 1 refused" in out and stub.host in out

    assert _ember("network", "allow", stub.host) == 0
    assert _ember("chat", "--backend", f"openai:{stub.url}", "--max-tokens", "8", "hi") == 0
    assert stub.connections == 1
    assert "Hello" in capsys.readouterr().out


# -- MCP servers Ember starts ----------------------------------------------------------------

MCP_STUB = str(Path(__file__).with_name("mcp_stub_server.py"))


def _dial_from_mcp_server(port: int) -> tuple[str, str]:
    import sys

    from engine.tools.mcp_config import ServerConfig
    from engine.tools.mcp_tools import McpServers
    from engine.tools.registry import ToolSet

    notes: list[str] = []
    pool = McpServers({"dialer": ServerConfig("dialer", sys.executable, (MCP_STUB, "dial"))}, start_timeout_s=30.0)
    try:
        tools = pool.tools_for(["dialer"], warn=notes.append)
        return ToolSet(tools).run("dial", {"port": port}), " ".join(notes)
    finally:
        pool.close()


needs_netns = pytest.mark.skipif(
    not network_guard.isolation().available, reason=f"not enforceable here: {network_guard.isolation().how}"
)


@pytest.mark.slow
@needs_netns
def test_an_mcp_server_that_connects_out_is_refused(tmp_path: Path, stub: CountingStub) -> None:
    with enforced(_guard(tmp_path)):
        answer, notes = _dial_from_mcp_server(stub.port)
    assert answer.startswith("failed"), answer
    assert notes == ""
    assert stub.connections == 0


@pytest.mark.slow
def test_an_mcp_server_allowed_network_connects(tmp_path: Path, stub: CountingStub) -> None:
    view = PolicyView(True, mcp_network=frozenset({"dialer"}))
    with enforced(Guard(EgressPolicy.fixed(view, ember_paths()), Ledger(None))):
        answer, _ = _dial_from_mcp_server(stub.port)
    assert answer == "connected"
    assert stub.connections == 1
