"""Downloads: the Hugging Face Hub client, the consent that lets it connect, which files a
request means, and fetching them into the models folder.

What `ember models pull`, the window's Get models page and the server's Ollama pull use.
Importing this loads httpx: the window imports it only when the page first asks the Hub.
"""

from __future__ import annotations

from engine.hub.client import HubClient
from engine.hub.consent import allow_downloads, consent_question, downloads_allowed, refusal_line
from engine.hub.download import Progress, default_models_dir, download
from engine.hub.errors import HubError
from engine.hub.files import HubFile, HubRepo, parse_spec, pick_files, total_size

__all__ = [
    "HubClient",
    "HubError",
    "HubFile",
    "HubRepo",
    "Progress",
    "allow_downloads",
    "consent_question",
    "default_models_dir",
    "download",
    "downloads_allowed",
    "parse_spec",
    "pick_files",
    "refusal_line",
    "total_size",
]
