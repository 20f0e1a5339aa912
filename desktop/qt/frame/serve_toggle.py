"""The window's "Serve on localhost:PORT" toggle: a status-bar button with a small menu.

Off, the menu offers "Serve on localhost:PORT", "Port…" (the port the user prefers, kept in
`serve.json` in the config folder; 8080 until set) and "Web pages allowed…" (origins whose pages
may call the server besides loopback ones, kept there too; `EMBER_ORIGINS` adds more; never `*`,
as the window's server has no key). When that port is taken (another server, a
second Ember), the next free one of `PORT_TRIES` is used and the status bar says so. On, the
button reads "API server on · 127.0.0.1:PORT · N requests" with the real port, and the menu
shows the address (copyable),
the request count and "Stop serving". The server
(`desktop/serve/`) runs on its own thread and loop and shares the window's engine, so the
window's own replies and API requests take turns on the one model; it stops with the window.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, cast

from PySide6.QtCore import QTimer
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QInputDialog, QMenu, QStatusBar, QToolButton, QWidget

from desktop.core.controller import ChatController
from desktop.qt.look.menu_place import keep_inside
from desktop.serve import DEFAULT_HOST, DEFAULT_PORT
from engine.api.errors import ConfigError
from engine.api.program import ember_paths, load_json_object, write_json_atomic
from engine.api.session import resolve

if TYPE_CHECKING:
    from desktop.serve.server import ServerThread

log = logging.getLogger("desktop.serve_toggle")

REFRESH_MS = 500  # how often the request count is read while serving
PORT_TRIES = 20  # the preferred port, then the next 19: 8080 busy → 8081 …
PREFS_FILE = "serve.json"
MAX_ORIGINS = 64


def _prefs() -> dict[str, Any]:
    return load_json_object(ember_paths().config_dir / PREFS_FILE, {})


def saved_port() -> int:
    """The port the user chose in the window (8080 until then; a bad file means the default)."""
    port = _prefs().get("port")
    return port if isinstance(port, int) and not isinstance(port, bool) and 1 <= port <= 65535 else DEFAULT_PORT


def saved_origins() -> list[str]:
    """The origins the user allowed in the window (none until then; anything but strings is dropped)."""
    origins = _prefs().get("origins")
    items = cast(list[Any], origins)[:MAX_ORIGINS] if isinstance(origins, list) else []
    return [o for o in items if isinstance(o, str) and len(o) <= 512]


def save_port(port: int) -> None:
    _save(port=port)


def _save(**changes: Any) -> None:
    try:
        write_json_atomic(ember_paths().config_dir / PREFS_FILE, {**_prefs(), **changes})
    except OSError as exc:  # a read-only config folder: the choice lasts this run
        log.warning("could not save the serve settings: %s", exc)


class ServeToggle(QToolButton):
    """Starts and stops the local API server on `port` (or the next free one) for `controller`'s engine.

    `port` None: the user's saved choice; 0: any free port (tests).
    """

    def __init__(
        self,
        controller: ChatController,
        parent: QWidget | None = None,
        *,
        port: int | None = None,
        tries: int = PORT_TRIES,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("ServeToggle")
        self.setAccessibleName("Local API server")
        self.setAutoRaise(True)
        self.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.controller = controller
        self.port = saved_port() if port is None else port
        self.origins = saved_origins()
        self.tries = tries
        self.server: ServerThread | None = None
        self.problem = ""
        self._menu = QMenu(self)
        self._menu.aboutToShow.connect(self._fill_menu)
        self.setMenu(self._menu)
        keep_inside(self._menu, self, upward=True)  # from the status bar: upward, inside the window
        self._timer = QTimer(self)
        self._timer.setInterval(REFRESH_MS)
        self._timer.timeout.connect(self._refresh)
        self._refresh()

    @property
    def serving(self) -> bool:
        return self.server is not None and self.server.running

    @property
    def requests(self) -> int:
        return self.server.state.requests if self.server is not None else 0

    def start(self) -> bool:
        """Serve on localhost:port; False (and `problem` says why, in one line) when it cannot."""
        if self.serving:
            return True
        # The ASGI stack loads on the first Serve, not before the window's first paint (#23).
        from desktop.serve.app import ServeState
        from desktop.serve.origins import OriginPolicy
        from desktop.serve.server import ServerThread, bind_near
        from desktop.serve.state import defaults_for, model_id_for

        engine = self.controller.engine
        try:
            origins = OriginPolicy.build(self.origins)  # loopback pages, EMBER_ORIGINS, the saved ones; never `*`
            sock = bind_near(DEFAULT_HOST, self.port, tries=self.tries)
        except ConfigError as exc:
            self._show_problem(str(exc))
            return False
        state = ServeState(
            engine, model_id=model_id_for(engine), defaults=defaults_for(engine, self._settings), origins=origins
        )
        self.server = ServerThread(state, sock)
        self.server.start()
        self.problem = ""
        if self.port and self.server.port != self.port:
            self._show_message(f"Port {self.port} is in use: serving on {self.server.address}")
        log.info("serving on %s", self.server.address)
        self._timer.start()
        self._refresh()
        return True

    def stop(self) -> None:
        server, self.server = self.server, None
        self._timer.stop()
        if server is not None:
            server.stop()
            log.info("stopped serving after %d requests", server.state.requests)
        self._refresh()

    def _settings(self):
        choice = self.controller.models.choice
        return resolve(choice.settings if choice is not None else None)

    def set_port(self, port: int) -> None:
        """The port to serve on from now on (remembered); takes effect at the next start."""
        self.port = port
        save_port(port)
        self._refresh()

    def set_origins(self, origins: list[str]) -> bool:
        """Allow pages from `origins` from the next start (remembered); False (and `problem`) for a bad one."""
        from desktop.serve.origins import OriginPolicy

        try:
            OriginPolicy.build(origins, environ={})
        except ConfigError as exc:
            self._show_problem(str(exc))
            return False
        self.origins = origins
        _save(origins=origins)
        return True

    def _ask_origins(self) -> None:
        text, ok = QInputDialog.getText(
            self.window(),
            "Web pages allowed",
            "Besides pages on localhost, pages from these origins may use the model\n"
            "(comma-separated, e.g. https://chat.example.com):",
            text=", ".join(self.origins),
        )
        if ok:
            self.set_origins([o.strip() for o in text.split(",") if o.strip()])

    def _ask_port(self) -> None:
        port, ok = QInputDialog.getInt(
            self.window(), "Local API port", "Serve on localhost, port:", self.port or DEFAULT_PORT, 1024, 65535
        )
        if ok:
            self.set_port(port)

    def _show_problem(self, text: str) -> None:
        self.problem = text
        self._show_message(text)

    def _show_message(self, text: str) -> None:
        bar = self.parentWidget()
        if isinstance(bar, QStatusBar):
            bar.showMessage(text, 8000)

    def _refresh(self) -> None:
        if self.server is not None and not self.server.running:  # it ended on its own
            self.server = None
            self._timer.stop()
        if self.server is None:
            self.setText("Serve")
            self.setToolTip(f"Serve the model as an OpenAI-compatible API on localhost:{self.port}")
        else:
            where = self.server.address.removeprefix("http://").removesuffix("/v1")
            self.setText(f"API server on · {where} · {_requests(self.requests)}")
            self.setToolTip(f"{self.server.address} · {_requests(self.requests)}")

    def _fill_menu(self) -> None:
        menu = self._menu
        menu.clear()
        if self.server is None:
            menu.addAction(f"Serve on localhost:{self.port}", self.start)
            menu.addAction("Port…", self._ask_port)
            menu.addAction("Web pages allowed…", self._ask_origins)
            return
        address = self.server.address
        menu.addAction(address).setEnabled(False)
        menu.addAction(f"{_requests(self.requests)} served").setEnabled(False)
        menu.addSeparator()
        menu.addAction("Copy address", lambda: QGuiApplication.clipboard().setText(address))
        menu.addAction("Stop serving", self.stop)


def _requests(n: int) -> str:
    return f"{n} request" if n == 1 else f"{n} requests"
