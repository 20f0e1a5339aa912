"""Search benchmark: how long `HistoryStore.search` takes over a large history (for `ember bench`)."""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from pathlib import Path

from engine.history.store import HistoryStore

MESSAGES_PER_CONVERSATION = 20
# Queries a user might type: a common word, a rarer one, two words, a short prefix.
QUERIES = ("python", "quantum", "error handling", "reci", "garden tomato")

# Common words make up most text; topical words come up now and then, as in real chats.
_COMMON = (
    "the a of to and in is it you that for on with as are this be at or have from by not but what all "
    "were when we there can an your which their said if do will each about how up out them then she many "
    "some so these would other into has more her two like him see time could no make than first been"
).split()
_TOPICAL = (
    "python error handling function class module recipe garden tomato travel budget quantum physics "
    "history music guitar chord poem summary translate french german email meeting schedule database "
    "query index migration backup network router printer battery laptop kernel driver compile rust"
).split()


def _sentence(rng: random.Random, words: int) -> str:
    picks = [rng.choice(_TOPICAL if rng.random() < 0.2 else _COMMON) for _ in range(words)]
    return " ".join(picks).capitalize() + "."


def fill(store: HistoryStore, n_messages: int, *, seed: int = 7) -> None:
    """Add `n_messages` alternating user/assistant messages in conversations of 20."""
    rng = random.Random(seed)
    with store.transaction():
        conversation_id, parent = 0, None
        for i in range(n_messages):
            if i % MESSAGES_PER_CONVERSATION == 0:
                conversation_id = store.create_conversation(title=_sentence(rng, 4)).id
                parent = None
            role = "user" if i % 2 == 0 else "assistant"
            text = " ".join(_sentence(rng, rng.randint(6, 18)) for _ in range(rng.randint(1, 6)))
            parent = store.add_message(conversation_id, role, text, parent_id=parent)


def bench_search(n_messages: int = 10_000, *, repeats: int = 5) -> float:
    """Median milliseconds of one search over `n_messages` messages (target: under 100 ms)."""
    with tempfile.TemporaryDirectory(prefix="ember-bench-") as tmp:
        store = HistoryStore(Path(tmp) / "history.sqlite3")
        try:
            fill(store, n_messages)
            store.search(QUERIES[0])  # warm the page cache, as a running app would be
            timings: list[float] = []
            for _ in range(repeats):
                for query in QUERIES:
                    started = time.perf_counter()
                    store.search(query)
                    timings.append((time.perf_counter() - started) * 1000)
        finally:
            store.close()
    return round(statistics.median(timings), 2)


if __name__ == "__main__":
    print(f"search over 10,000 messages: {bench_search():.2f} ms (median)")
