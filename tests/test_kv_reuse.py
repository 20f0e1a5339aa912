"""The KV cache shift when a conversation's window moves (engine/llama/kv_reuse.py).

A fake cache stands for llama.cpp's: it records the spans dropped, so each test checks what
would have been removed and shifted, and that the kept record is exactly the new prompt's
start. The real model's cache is checked in tests/test_kv_shift_real.py (slow).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.llama.kv_reuse import MIN_REUSE, reuse_shifted

SYSTEM = list(range(1, 21))  # the system prompt and first exchange: the head the policy keeps
DROPPED = list(range(1000, 1300))  # old turns the window no longer shows
KEPT = list(range(2000, 2400))  # the tail it still shows
REPLY = [5000, 5001, 5002]  # the last reply, decoded after the prompt
NEW = [7000 + i for i in range(30)]  # the new turn


@dataclass
class FakeCache:
    tokens: list[int]
    shiftable: bool = True
    refuses: bool = False
    drops: list[tuple[int, int]] = field(default_factory=list)

    def can_shift(self) -> bool:
        return self.shiftable

    def drop_span(self, start: int, end: int) -> bool:
        if self.refuses:
            return False
        self.drops.append((start, end))
        del self.tokens[start:end]
        return True


def test_a_moved_window_drops_the_middle_and_keeps_the_tail_for_the_new_prompt() -> None:
    cache = FakeCache(SYSTEM + DROPPED + KEPT + REPLY)
    prompt = SYSTEM + KEPT + REPLY + NEW
    saved = reuse_shifted(cache, prompt)
    assert cache.drops == [(len(SYSTEM), len(SYSTEM) + len(DROPPED))]
    assert saved == len(KEPT) + len(REPLY)
    assert cache.tokens == prompt[: len(cache.tokens)]  # the record is the prompt's start, position by position
    assert len(prompt) - len(cache.tokens) == len(NEW)  # only the new turn is left to evaluate


def test_a_reply_the_template_renders_differently_is_cut_where_it_stops_matching() -> None:
    cache = FakeCache(SYSTEM + DROPPED + KEPT + [9999])  # the raw reply ended in a token the template rewrites
    prompt = SYSTEM + KEPT + REPLY + NEW
    assert reuse_shifted(cache, prompt) == len(KEPT)
    assert cache.tokens[: len(SYSTEM) + len(KEPT)] == prompt[: len(SYSTEM) + len(KEPT)]


def test_a_model_whose_positions_cannot_shift_is_left_to_evaluate_again() -> None:
    cache = FakeCache(SYSTEM + DROPPED + KEPT, shiftable=False)
    assert reuse_shifted(cache, SYSTEM + KEPT + NEW) == 0
    assert cache.tokens == SYSTEM + DROPPED + KEPT and not cache.drops


def test_a_cache_that_refuses_the_removal_is_left_as_it_was() -> None:
    cache = FakeCache(SYSTEM + DROPPED + KEPT, refuses=True)
    assert reuse_shifted(cache, SYSTEM + KEPT + NEW) == 0
    assert cache.tokens == SYSTEM + DROPPED + KEPT


def test_nothing_moves_when_the_prompt_extends_the_cache_or_too_little_would_be_kept() -> None:
    extends = FakeCache(SYSTEM + KEPT)
    assert reuse_shifted(extends, SYSTEM + KEPT + NEW) == 0 and not extends.drops
    short_tail = KEPT[: MIN_REUSE - 1]
    short = FakeCache(SYSTEM + DROPPED + short_tail)
    assert reuse_shifted(short, SYSTEM + short_tail + NEW * 3) == 0 and not short.drops
    assert reuse_shifted(FakeCache([]), NEW) == 0
