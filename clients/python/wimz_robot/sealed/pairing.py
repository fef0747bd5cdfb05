"""The first owner's trust path on the home network (docs/protocol.md "Sealed devices (v1.5)"):
for a window its owner opens (a button on the robot, ``wimz-robot pair``), the robot's library
answers on the LAN — its public keys, and it pins the first app that hands over its own. The
relay is not on this path, so neither side learns the other's key from it.

- ``GET /wimz/sealed/robot`` → 200 ``{"device_id","kid","sign","hpke","code"}`` (``code``: the
  robot's verification code, for the person to compare with what the robot shows or says).
- ``POST /wimz/sealed/owner`` ``{"kid","sign","hpke"}`` → 200 the robot's keys as above, and the
  app's key pinned as first owner; the same key again: 200 again; another key once one is
  pinned: 409 ``already_paired``; outside the window: 403 ``pairing_closed``; a body that is not
  keys: 400 ``bad_request``.

Anyone on the LAN during the window could pair first: the window is short, it closes on the
first pairing, and the robot logs the owner's verification code so a person can compare it with
the one the app shows. When they differ, ``SealedDevice.unpin_first_owner()`` starts over (before
the first epoch only) and a new window pins again.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .device import SealedDevice
from .keys import PublicKeys

log = logging.getLogger("wimz_robot.sealed.pairing")

ROBOT_PATH = "/wimz/sealed/robot"
OWNER_PATH = "/wimz/sealed/owner"
#: A pairing request is a few hundred bytes.
MAX_BODY = 4096


class PairingServer:
    """Serves the pairing endpoints on ``host:port`` from a thread of its own until :meth:`close`.
    ``window``: seconds from :meth:`start` during which an owner may pair."""

    def __init__(self, device: SealedDevice, host: str = "0.0.0.0", port: int = 8765, window: float = 300.0) -> None:
        self.device = device
        self.window = window
        self.paired = threading.Event()
        self._closes_at = 0.0
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer((host, port), _handler(self))
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def open(self) -> bool:
        return time.monotonic() < self._closes_at and not self.paired.is_set()

    def robot(self) -> dict[str, Any]:
        keys = self.device.identity.public
        return {"device_id": self.device.device_id, **keys.to_json(), "code": keys.verification_code}

    def start(self) -> "PairingServer":
        self._closes_at = time.monotonic() + self.window
        self._thread = threading.Thread(target=self._server.serve_forever, name="wimz-pairing", daemon=True)
        self._thread.start()
        log.info("pairing open for %.0f s on port %d; this robot's code is %s", self.window, self.port,
                 self.device.identity.public.verification_code)
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def pair(self, body: Any) -> tuple[int, dict[str, Any]]:
        """The answer to ``POST /wimz/sealed/owner``."""
        try:
            owner = PublicKeys.from_json(body)
        except ValueError as error:
            return 400, {"error": "bad_request", "message": str(error)}
        with self._lock:
            if self.device.first_owner == owner:
                return 200, self.robot()
            if self.device.first_owner is not None:
                return 409, {"error": "already_paired", "message": "the robot has a first owner"}
            if not self.open:
                return 403, {"error": "pairing_closed", "message": "pairing is not open on the robot"}
            self.device.pin_first_owner(owner)
            self.paired.set()
        log.info("first owner pinned: kid %s, code %s", owner.kid, owner.verification_code)
        return 200, self.robot()


def _handler(server: PairingServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 — the stdlib's name
            if self.path == ROBOT_PATH:
                self._answer(200, server.robot())
            else:
                self._answer(404, {"error": "not_found", "message": "no such path"})

        def do_POST(self) -> None:  # noqa: N802
            if self.path != OWNER_PATH:
                return self._answer(404, {"error": "not_found", "message": "no such path"})
            length = int(self.headers.get("Content-Length") or 0)
            if not 0 < length <= MAX_BODY:
                return self._answer(400, {"error": "bad_request", "message": f"a body of 1–{MAX_BODY} bytes"})
            try:
                body = json.loads(self.rfile.read(length))
            except (ValueError, RecursionError):
                body = None
            self._answer(*server.pair(body))

        def _answer(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 — the stdlib's signature
            log.debug(format, *args)

    return Handler
