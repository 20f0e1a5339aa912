"""`ember serve` on the real built-in model: a client resending a growing conversation reuses the KV cache."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from lazy_import import lazy_module
from serve_helpers import serve

from engine.llama.llama import LlamaBackend

if TYPE_CHECKING:
    import openai
else:  # imported when a test first uses it: collection stays light (#53)
    openai = lazy_module("openai")


@pytest.mark.slow
@pytest.mark.timeout(400)  # three real-model replies: on a busy shared machine this takes minutes
def test_a_growing_conversation_reuses_the_kv_prefix(smollm_path: Path) -> None:
    s = serve(LlamaBackend(smollm_path, n_ctx=2048), max_tokens=12, context_size=2048)
    try:
        client = openai.OpenAI(base_url=s.url, api_key="x", max_retries=0, timeout=120)
        convo: list[Any] = [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Name three colours."},
        ]
        first = client.chat.completions.create(model="default", messages=convo, temperature=0, max_tokens=12)
        answer = first.choices[0].message.content or ""
        assert answer.strip() and "<|im_" not in answer
        convo += [{"role": "assistant", "content": answer}, {"role": "user", "content": "And three animals?"}]
        second = client.chat.completions.create(model="default", messages=convo, temperature=0, max_tokens=12)
        assert first.usage is not None and second.usage is not None
        details = second.usage.prompt_tokens_details
        assert details is not None and details.cached_tokens is not None
        # The whole first prompt came from the cache; only the new tail was evaluated.
        assert first.usage.prompt_tokens - 1 <= details.cached_tokens < second.usage.prompt_tokens
        streamed = client.chat.completions.create(
            model="default", messages=convo, temperature=0, max_tokens=12, stream=True
        )
        text = "".join(c.choices[0].delta.content or "" for c in streamed if c.choices)
        assert text == second.choices[0].message.content  # greedy: the same answer streamed or not
    finally:
        s.close()
