"""The real token stream of SmolLM2, forced by a grammar to spell out LFM2 scaffolding."""

from __future__ import annotations

import pytest

from engine.backends.base import Sampling, make_request
from engine.events import ContentDelta, Recovery, TurnDone
from engine.llama.llama import LlamaBackend
from engine.turns.runner import TurnRunner

pytestmark = pytest.mark.slow

LFM2_CALL = "<|tool_call_start|>[read(path='/homelab/backup-notes.md')]<|tool_call_end|>"


def test_forced_scaffolding_never_reaches_content(smollm: LlamaBackend) -> None:
    gbnf = 'root ::= "' + LFM2_CALL.replace('"', '\\"') + '"'
    assert smollm.check_grammar(gbnf) is None
    request = make_request(
        [{"role": "user", "content": "Where are my backup notes?"}],
        sampling=Sampling.greedy(),
        max_tokens=64,
        grammar=gbnf,
    )
    events = list(TurnRunner(smollm).run(request))
    # Round 1 streams nothing but the forced span; the filter removes all of it, so the
    # policy's one recovery round runs (without the grammar: it steers the first round only).
    recovery = next(i for i, e in enumerate(events) if isinstance(e, Recovery))
    assert not [e for e in events[:recovery] if isinstance(e, ContentDelta)]
    answer = "".join(e.text for e in events if isinstance(e, ContentDelta))
    assert answer.strip() and "<|" not in answer and "read(" not in answer
    done = events[-1]
    assert isinstance(done, TurnDone)
    # The span really streamed token by token and was counted once, in round 1.
    assert done.stats.scaffold_stripped == len(LFM2_CALL)
    assert done.stats.tokens > 10


def test_an_invalid_grammar_is_refused_not_a_crash(smollm: LlamaBackend) -> None:
    assert smollm.check_grammar("root ::= (") is not None
