"""Stop sequences on streamed text, whatever the chunking: the API's `stop` on the visible
content (desktop.serve), a plain transcript's next turn label in the llama backend.

Text that could still be the start of a stop sequence is held back until the next chunk
decides it; at a match, the text before it is released and `hit` is set (the caller then
stops the generation). The stop sequence itself is never returned, as with OpenAI.
"""

from __future__ import annotations


class StopMatcher:
    def __init__(self, stops: tuple[str, ...]) -> None:
        self._stops = tuple(s for s in stops if s)
        self._held = ""
        self.hit = False

    def feed(self, text: str) -> str:
        """The part of `text` (plus what was held) that is certainly before any stop sequence."""
        if self.hit:
            return ""
        if not self._stops:
            return text
        buffer = self._held + text
        found = min((i for i in (buffer.find(s) for s in self._stops) if i >= 0), default=-1)
        if found >= 0:
            self.hit = True
            self._held = ""
            return buffer[:found]
        keep = self._partial_suffix(buffer)
        self._held = buffer[len(buffer) - keep :] if keep else ""
        return buffer[: len(buffer) - keep]

    def flush(self) -> str:
        """The held text at the end of the reply (it did not become a stop sequence)."""
        held, self._held = self._held, ""
        return "" if self.hit else held

    def _partial_suffix(self, buffer: str) -> int:
        """The length of the longest suffix of `buffer` that is a proper prefix of a stop sequence."""
        best = 0
        for stop in self._stops:
            for n in range(min(len(stop) - 1, len(buffer)), best, -1):
                if buffer.endswith(stop[:n]):
                    best = n
                    break
        return best
