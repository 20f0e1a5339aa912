"""Re-running a recorded reply from its receipt, and saying whether it matches token for token.

    result = reproduce(store, message_id, open_model)   # open_model(path, receipt) -> Backend

The prompt is rebuilt from the history (the branch up to the reply's question) with the
system message the receipt kept; the model file is found by its SHA-256 (the digest cache,
the built-in model, the library), so a renamed or moved file still counts. The prompt's own
digest is compared first: a conversation edited or trimmed to fit the context is reported
as such, not as a model that changed its mind. Then the reply's token digest is compared.
Greedy replies are deterministic on one build and device; a sampled one is re-run with the
seed it used and usually matches there too.

A receipt may come from an import, so it is checked like any input (`check_receipt`): each
field Ember uses must have its type and range, or the re-run is refused in one line; a
prompt that cannot fit the receipt's context, counted in characters before anything is
tokenized, is refused too. The re-run starts with a cold KV cache. A reply made with part of
its prompt already in the cache was computed in other batch shapes, so its float results
(and a greedy choice between near-equal tokens) can differ: the verdict says so by name.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from engine.backends.base import Backend, Request, Sampling, StreamInfo, make_request
from engine.cancel import CancelToken
from engine.errors import EngineError
from engine.events import Piece
from engine.history.store import HistoryStore
from engine.session.messages import branch_messages
from engine.turns.context_policy import join_runs
from models.library.digests import file_sha256, known_files
from models.library.json_schema import describe, holds, int_in, is_int, is_number, is_text, optional

MAX_CONTEXT = 1 << 24  # the largest context a model setting allows
CHARS_PER_TOKEN = 32  # no tokenizer packs more characters into one token: a prompt longer cannot fit

# Each field `reproduce` reads, and what it must be; anything else in a receipt is not used.
_FIELDS = {
    "context_size": (optional(int_in(1, MAX_CONTEXT)), "a context size (1 to 16777216 tokens)"),
    "max_tokens": (optional(int_in(1)), "a token count"),
    "seed": (optional(is_int), "a seed (an integer)"),
    "system": (optional(is_text), "text"),
    "device": (optional(is_text), "text"),
}
_SAMPLING = {
    "temperature": is_number,
    "top_p": is_number,
    "min_p": is_number,
    "repeat_penalty": is_number,
    "top_k": is_int,
}

OpenModel = Callable[[Path, Mapping[str, Any]], Backend]


class CannotReproduce(EngineError):
    """The reply cannot be re-run here; the message says why in one line."""


@dataclass(frozen=True, slots=True)
class Reproduction:
    message_id: int
    matched: bool
    prompt_matched: bool
    recorded: Mapping[str, Any]  # {"tokens", "sha256"} of the recorded reply
    reproduced: Mapping[str, Any]
    text: str  # the re-run reply, as the model wrote it
    line: str  # the verdict in one line

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if k != "line"} | {"verdict": self.line}


def receipt_of(store: HistoryStore, message_id: int) -> Mapping[str, Any]:
    msg = store.message(message_id)
    receipt = msg.stats.get("receipt") if msg.role == "assistant" else None
    if not isinstance(receipt, dict):
        what = "is not a reply" if msg.role != "assistant" else "has no receipt (recorded before receipts existed)"
        raise CannotReproduce(f"message {message_id} {what}")
    return cast(dict[str, Any], receipt)


def reproduce(
    store: HistoryStore,
    message_id: int,
    open_model: OpenModel,
    candidates: Callable[[], Iterator[Path]] = lambda: iter(()),
) -> Reproduction:
    receipt = receipt_of(store, message_id)
    _check_reproducible(receipt)
    check_receipt(receipt)
    request = _request(store, message_id, receipt)
    _check_fits(request, receipt)
    path = find_model(receipt, candidates())
    backend = open_model(path, receipt)
    try:
        info = StreamInfo()
        text = "".join(p.text for p in backend.stream(request, CancelToken(), info) if isinstance(p, Piece))
    finally:
        backend.close()
    return _verdict(message_id, receipt, info.receipt, text)


def _check_reproducible(receipt: Mapping[str, Any]) -> None:
    if receipt.get("backend") != "llama.cpp":
        raise CannotReproduce(
            f"the reply came from {receipt.get('backend', 'another backend')}; "
            "only replies of a local model can be re-run"
        )
    if receipt.get("tools") or receipt.get("grammar"):
        raise CannotReproduce("the reply used tools or a JSON schema; its last prompt is not in the history")


def check_receipt(receipt: Mapping[str, Any]) -> None:
    """CannotReproduce (one line) naming the first field `reproduce` uses that has a wrong type or range."""
    for name, (check, what) in _FIELDS.items():
        if not holds(check, receipt.get(name)):
            raise CannotReproduce(f"the receipt's {name} ({describe(receipt.get(name))}) is not {what}")
    sampling = receipt.get("sampling", {})
    if not isinstance(sampling, dict):
        raise CannotReproduce(f"the receipt's sampling ({describe(sampling)}) is not a set of sampling settings")
    for name, check in _SAMPLING.items():
        value = cast(dict[str, Any], sampling).get(name)
        if value is not None and not holds(check, value):
            kind = "an integer" if check is is_int else "a number"
            raise CannotReproduce(f"the receipt's sampling.{name} ({describe(value)}) is not {kind}")


def _check_fits(request: Request, receipt: Mapping[str, Any]) -> None:
    n_ctx = int(receipt.get("context_size") or MAX_CONTEXT)  # checked by check_receipt
    chars = sum(len(str(m.get("content") or "")) for m in request.messages)
    if chars > n_ctx * CHARS_PER_TOKEN:
        raise CannotReproduce(
            f"the rebuilt prompt ({chars:,} characters) cannot fit the receipt's {n_ctx:,}-token context"
        )


def find_model(receipt: Mapping[str, Any], candidates: Iterator[Path]) -> Path:
    """The file whose SHA-256 is the receipt's: cached digests first, then `candidates` by name."""
    model = _part(receipt, "model")
    sha, name = model.get("sha256"), str(model.get("file", "?"))
    if not isinstance(sha, str):
        raise CannotReproduce(f"the receipt has no digest of {name}")
    for path in known_files(sha):
        if file_sha256(path) == sha:
            return path
    for path in candidates:
        if path.is_file() and path.name == name and file_sha256(path) == sha:
            return path
    raise CannotReproduce(f"the model file {name} (sha256 {sha[:12]}…) is not on this machine")


def _request(store: HistoryStore, message_id: int, receipt: Mapping[str, Any]) -> Request:
    msg = store.message(message_id)
    system = receipt.get("system")
    path = store.path(msg.conversation_id, leaf_id=msg.parent_id)
    messages = list(join_runs(branch_messages(path, system=system if isinstance(system, str) else "")))
    known = {f.name for f in dataclasses.fields(Sampling)}
    sampling: dict[str, Any] = {k: v for k, v in _part(receipt, "sampling").items() if k in known}
    sampling["seed"] = receipt.get("seed")
    return make_request(messages, sampling=Sampling(**sampling), max_tokens=int(receipt.get("max_tokens") or 1))


def _part(receipt: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = receipt.get(key)
    return cast(dict[str, Any], value) if isinstance(value, dict) else {}


def _verdict(message_id: int, receipt: Mapping[str, Any], again: Mapping[str, Any], text: str) -> Reproduction:
    recorded, reproduced = _part(receipt, "reply"), _part(again, "reply")
    prompt_ok = _part(receipt, "prompt").get("sha256") == _part(again, "prompt").get("sha256")
    matched = prompt_ok and bool(recorded.get("sha256")) and recorded.get("sha256") == reproduced.get("sha256")
    n, m = reproduced.get("tokens", 0), recorded.get("tokens", 0)
    if matched:
        line = f"reply {message_id}: matches token for token ({n} tokens, reply sha256 {str(recorded['sha256'])[:12]}…)"
    elif not prompt_ok:
        line = (
            f"reply {message_id}: cannot compare: the rebuilt prompt differs from the recorded one "
            "(the conversation was edited, or trimmed to fit the context)"
        )
    else:
        line = f"reply {message_id}: DIFFERS: {n} tokens re-run vs {m} recorded{_why(receipt, again)}"
    return Reproduction(message_id, matched, prompt_ok, recorded, reproduced, text, line)


def _why(receipt: Mapping[str, Any], again: Mapping[str, Any]) -> str:
    """What differed between the recorded run and the re-run, by name (older receipts lack some fields)."""
    changed = [
        label
        for key, label in (
            ("llama_cpp_python", "llama-cpp-python version"),
            ("chat_template_sha256", "chat template"),
            ("cpu_variant", "CPU variant"),
            ("prompt_lookup", "prompt-lookup drafting"),
            ("draft_model", "draft model"),
        )
        if key in receipt and receipt.get(key) != again.get(key)
    ]
    if device_kind(receipt.get("device")) != device_kind(again.get("device")):
        changed.insert(0, "device")
    cache, cache_again = _part(receipt, "kv_cache"), _part(again, "kv_cache")
    if "type" in cache and cache.get("type") != cache_again.get("type"):
        changed.append("KV cache type")
    notes = [f"changed since: {', '.join(changed)}"] if changed else []
    warm = cache.get("warm_tokens")
    if is_int(warm) and warm > 0 and warm != cache_again.get("warm_tokens"):
        notes.append(f"the reply reused {warm} prompt tokens from a warm KV cache and the re-run started cold")
    return f" ({'; '.join(notes or ['nothing the receipt records changed'])})"


def device_kind(device: object) -> str:
    """The device itself: `CPU`, or the GPU line with its layers and name; not the note on why."""
    text = str(device or "")
    return "CPU" if text.startswith("CPU") else text
