"""`ember serve` builds its turn through the session (issue #36): the request is the prompt, measured
by the session's own fit (`Plan.fit`) before the model sees it, refused whole when it does not fit
(never cut), and `--record` records through `ChatSession`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from serve_helpers import Served, serve

from desktop.serve.record import ApiHistory
from engine.backends.base import Message, Request
from engine.backends.scripted import SCRIPT_MESSAGE_OVERHEAD, ScriptedBackend
from engine.errors import ContextOverflowError
from engine.history.store import HistoryStore
from engine.session.session import Plan
from engine.turns.context_policy import ContextPolicy

CONTEXT = 64


def _words(tokens: int) -> list[Any]:
    """One user message the scripted backend counts as `tokens` prompt tokens."""
    return [{"role": "user", "content": "word " * (tokens - SCRIPT_MESSAGE_OVERHEAD - 1)}]


def _post(s: Served, messages: list[Any]) -> httpx.Response:
    return httpx.post(f"{s.url}/chat/completions", json={"messages": messages}, timeout=20)


def test_the_api_plan_is_the_request_measured_as_sent_and_never_cut() -> None:
    backend = ScriptedBackend([], n_ctx=CONTEXT)
    history: list[Message] = [{"role": "user", "content": "word " * 30}, {"role": "assistant", "content": "ok"}]
    request = Request(messages=(*history, *_words(20)), max_tokens=CONTEXT)
    plan = Plan.of_request(request).fit(backend)
    assert plan.request.messages == request.messages and plan.request.verbatim  # nothing added, nothing cut
    assert plan.policy is ContextPolicy.STOP and plan.ask.text == _words(20)[0]["content"]
    # The window's turn would keep the newest exchange and drop the oldest; the API's is refused.
    try:
        Plan.of_request(Request(messages=(*history, *_words(40)))).fit(backend)
    except ContextOverflowError:
        pass
    else:
        raise AssertionError("a request larger than the context was not refused")


def test_a_request_that_does_not_fit_is_refused_before_the_model_sees_it(served: list[Served]) -> None:
    backend = ScriptedBackend([["Yes."]], n_ctx=CONTEXT)
    s = serve(backend)
    served.append(s)
    refused = _post(s, _words(CONTEXT))  # no room left for one token of reply
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "context_length_exceeded"
    assert f"{CONTEXT}-token context" in refused.json()["error"]["message"]
    longer = _post(
        s, [{"role": "user", "content": "word " * 30}, {"role": "assistant", "content": "ok"}, *_words(40)]
    )  # the newest turn alone would fit: the window would cut the oldest
    assert longer.status_code == 400 and longer.json()["error"]["code"] == "context_length_exceeded"
    assert "does not fit" in longer.json()["error"]["message"]
    assert "policy" not in longer.json()["error"]["message"]  # no advice about the window's settings
    assert backend.requests == []  # the session's fit refused it, not the backend
    fits = _post(s, _words(CONTEXT - 1))  # the same bound the backend checks: one token of room
    assert fits.status_code == 200, fits.text
    [sent] = backend.requests
    assert sent.messages == tuple(_words(CONTEXT - 1))


def test_record_goes_through_the_session_and_a_refused_request_stores_nothing(
    served: list[Served], tmp_path: Path
) -> None:
    db = tmp_path / "history.db"
    s = serve(ScriptedBackend([["Green."]], n_ctx=CONTEXT), history=ApiHistory(lambda: HistoryStore(db)))
    served.append(s)
    assert _post(s, _words(CONTEXT)).status_code == 400
    convo: list[Any] = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Sky colour?"},
        {"role": "assistant", "content": "Blue."},
        {"role": "user", "content": "Grass colour?"},
    ]
    assert _post(s, convo).status_code == 200
    s.close()
    served.remove(s)
    store = HistoryStore(db)
    try:
        [conversation] = store.conversations()  # the refused request left no conversation behind
        assert conversation.settings.get("system") == "Be brief."
        path = store.path(conversation.id)
        assert [(m.role, m.content) for m in path] == [
            ("user", "Sky colour?"),
            ("assistant", "Blue."),
            ("user", "Grass colour?"),
            ("assistant", "Green."),
        ]
        assert path[-1].status == "complete"
    finally:
        store.close()
