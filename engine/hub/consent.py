"""The one-time permission to download: the Hub's host as an allowed destination in `network.json`.

Zero-egress mode stays on. Allowing downloads adds one entry (`huggingface.co:443`, or the
`HF_ENDPOINT` host) that `ember network` lists and `ember network remove` takes away again.
The Hub sends the bytes of large files from file servers of its own (a CDN whose host names
change); a download from the allowed host may follow those redirects while it runs, and
only then (`engine.network.guard.granted`), only to the file servers the Hub publishes, at
public addresses (`engine.hub.route`). Every lookup and connection is in the ledger either way.
"""

from __future__ import annotations

from typing import Protocol

from engine.hub.route import allowed_words
from engine.network.destinations import Destination
from engine.network.policy import EgressPolicy, NetworkSettings, load_settings, save_settings
from models.library.paths import EmberPaths


class HubClient(Protocol):
    """What consent needs of `engine.hub.client.HubClient` (a protocol: the client imports this module)."""

    @property
    def host(self) -> str: ...

    @property
    def destination(self) -> Destination: ...


def consent_question(client: HubClient) -> str:
    """The question asked once, before the first search or download."""
    return (
        f"Allow downloads from {client.host}? Ember stays offline otherwise: this adds {client.destination} "
        f"to the allowed destinations (ember network); a download may connect to "
        f"{allowed_words(client.destination)}. Every lookup and connection is in the network ledger."
    )


def refusal_line(client: HubClient) -> str:
    """What a search or download says while the Hub is not allowed (zero-egress mode)."""
    return (
        f"zero-egress mode: downloads from {client.host} are not allowed yet; allow them once with "
        f"`ember models pull --allow …` (or in the window's Get models page), or run: "
        f"ember network allow {client.destination}"
    )


def downloads_allowed(paths: EmberPaths, client: HubClient) -> bool:
    dest = client.destination
    return EgressPolicy(paths).view().permits(dest.host, dest.port)


def allow_downloads(paths: EmberPaths, client: HubClient) -> None:
    """Store the consent: the Hub's host becomes an allowed destination (once; zero-egress stays on)."""
    settings = load_settings(paths)
    entry = str(client.destination)
    if entry not in settings.allow:
        save_settings(paths, NetworkSettings(settings.zero_egress, (*settings.allow, entry)))
