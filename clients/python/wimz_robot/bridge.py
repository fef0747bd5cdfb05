"""``wimz-robot bridge``: puts a robot whose stack already serves the integration guide's API
(REST on ``http://127.0.0.1:8000``, events and commands on ``ws://127.0.0.1:8000/ws/control``)
on the relay without a code change (docs/protocol.md v1.1 "The robot bridge").

- ``http_request`` frames from the relay become HTTP requests to ``--local`` and nowhere else:
  the target must be a plain path (no scheme or host, no ``//`` start, no ``.``/``..`` segment
  however percent-encoded or followed by ``;`` parameters, no backslash or control character); anything else is answered 400
  ``bad_path`` without a request. The answer goes back as ``http_response`` plus ``http_body``
  frames of at most 32 KiB each. The local API unreachable: 502 ``robot_unreachable``.
- every message of the local ``/ws/control`` goes to the relay as the robot's (events reach
  every app, ``response``\\ s the app that asked); every app message from the relay goes to the
  local ``/ws/control`` as it came (the relay's own ``app_presence`` and ``turn_credentials``
  events stay here).
- fresh TURN credentials are written to ``--turn-file`` (the ``/api/turn/credentials`` JSON,
  replaced atomically) whenever a newer one arrives: on connect, on every push, and when the
  client refreshes before ``refresh_at``. The robot's WebRTC code reads that file.
- both legs reconnect with capped, jittered back-off; a malformed message is logged and skipped.
- on a sealed device (v1.5, ``sealed=``) both legs carry only sealed frames: an app's
  ``http_request`` arrives sealed and is answered sealed, the robot's own roles apply (a guest
  without ``control`` gets 403 ``forbidden`` for anything but GET and HEAD, without a request),
  and the local ``/ws/control`` sees the opened messages and its messages go out sealed. A body
  over one frame comes in parts as answers go (``"more":true``, then ``http_body`` frames), kept
  per member and id until the last: at most ``max_body`` (else 413 ``too_large``), 16 requests at
  once (else 503 ``busy``), the parts within 30 s.
"""

from __future__ import annotations

import asyncio
import base64
import http.client
import json
import logging
import os
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import unquote, urlsplit

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake

from .backoff import Backoff
from .client import RobotClient
from .household import Sender
from .sealed.device import SealedDevice
from .protocol import RELAY_EVENTS, ROBOT_HTTP_CHUNK_BYTES
from .turn import TurnCredentials

log = logging.getLogger("wimz_robot.bridge")

#: Body bytes per ``http_response``/``http_body`` frame: 32 KiB is ~44 KiB of base64, well under
#: the relay's 64 KiB default message limit.
CHUNK_BYTES = ROBOT_HTTP_CHUNK_BYTES
#: A sealed request whose body comes in parts: how many may be gathered at once, and how long
#: its parts may take (the app has given up by then: its own timeout is shorter).
MAX_REQUESTS_IN_PARTS = 16
PARTS_TIMEOUT = 30.0
#: Not passed to the local API: hop-by-hop fields and the ones the bridge sets itself.
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding",
                        "upgrade", "content-length", "host", "expect"})


def local_target(path: Any, query: Any) -> str | None:
    """The request target for the local API, or None when the path could reach anything but
    ``--local``'s own paths (see the module's rules)."""
    if not isinstance(path, str) or not path.startswith("/") or path.startswith("//"):
        return None
    if query is not None and not isinstance(query, str):
        return None
    for text in (path, query or ""):
        if any(ord(c) <= 0x20 or ord(c) >= 0x7F or c in "\\#" for c in text):
            return None
    # Decode until nothing changes (double encoding), then look for what a server might fold.
    decoded = path
    for _ in range(4):
        step = unquote(decoded)
        if step == decoded:
            break
        decoded = step
    else:
        return None
    if decoded.startswith("//") or "\\" in decoded or any(ord(c) < 0x20 or ord(c) == 0x7F for c in decoded):
        return None
    # Path parameters (``/..;/x``) are dropped by servers that take them (Tomcat, Jetty) before
    # they resolve dot-segments: a segment is judged without them.
    if any(segment.split(";", 1)[0] in (".", "..") for segment in decoded.split("/")):
        return None
    return path + (f"?{query}" if query else "")


def _error_body(code: str, message: str) -> bytes:
    return json.dumps({"error": code, "message": message}).encode()


class Bridge:
    """One robot's bridge between the relay and its local API. ``run()`` until cancelled."""

    def __init__(self, relay_url: str, device_id: str, token: str, local_url: str = "http://127.0.0.1:8000", *,
                 turn_file: str | None = None, max_body: int = 1 << 20, local_timeout: float = 60.0,
                 ssl: Any = None, sealed: SealedDevice | None = None) -> None:
        parts = urlsplit(local_url)
        if parts.scheme != "http" or not parts.hostname or parts.path not in ("", "/") or parts.query:
            raise ValueError(f"--local must be http://HOST:PORT, not {local_url!r}")
        self.local_host = parts.hostname
        self.local_port = parts.port or 80
        self.local_ws_url = f"ws://{parts.netloc}/ws/control"
        self.turn_file = turn_file
        self.max_body = max_body
        self.local_timeout = local_timeout
        #: Local HTTP calls block a thread each: a pool of the bridge's own, so a busy default
        #: executor in the same process can never hold the robot's answers back.
        self._http_pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="wimz-bridge-http")
        # senders: every app message and HTTP request says which member sent it (docs/protocol.md v1.3).
        self.client = RobotClient(relay_url, device_id, token, ssl=ssl, answer_commands=False, senders=True,
                                  sealed=sealed)
        self.client.on_raw(self._from_relay)
        self.client.on_message(self._opened_from_relay)
        self.client.on_turn_credentials(self._write_turn_file)
        self._to_local: asyncio.Queue[str | bytes] = asyncio.Queue(maxsize=1024)
        self._local_connected = asyncio.Event()
        self._tasks: set[asyncio.Task[Any]] = set()
        #: Requests answered, by status (for logs and tests).
        self.http_answered = 0
        #: Sealed requests whose body is still coming in parts, by (member, id): the request,
        #: its body so far and when it started.
        self._in_parts: dict[tuple[str, str], tuple[dict[str, Any], bytearray, float]] = {}

    @property
    def local_connected(self) -> bool:
        return self._local_connected.is_set()

    async def run(self) -> None:
        self.client.start()
        try:
            await asyncio.gather(self._local_leg(), self._first_credentials())
        finally:
            await self.client.close()
            for task in list(self._tasks):
                task.cancel()
            self._http_pool.shutdown(wait=False, cancel_futures=True)

    async def _first_credentials(self) -> None:
        """Fetches a credential at start (the relay also pushes one on connect), so the file
        exists as soon as the relay answers; the client keeps it fresh from then on."""
        if self.turn_file is None:
            return
        backoff = Backoff(base=1.0, cap=30.0)
        while True:
            try:
                await self.client.turn_credentials()
                return
            except Exception as error:  # noqa: BLE001 — keep trying; the push may come first
                log.warning("TURN credentials not fetched yet: %s", error)
                await asyncio.sleep(backoff.next_delay())

    # -- relay → robot --------------------------------------------------------------------

    def _from_relay(self, message: str | bytes) -> None:
        if self.client.is_sealed:
            return  # only what a member sealed, opened (below)
        if isinstance(message, str):
            try:
                parsed = json.loads(message)
            except (ValueError, RecursionError):
                parsed = None
            if isinstance(parsed, dict):
                if parsed.get("type") == "http_request":
                    self._spawn(self._http(parsed))
                    return
                if parsed.get("type") == "event" and parsed.get("event") in RELAY_EVENTS:
                    return
        self._queue_for_local(message)

    def _opened_from_relay(self, message: dict[str, Any], sender: Sender | None) -> None:
        """A sealed device's messages, as the client opened them (unsealed ones never get here)."""
        if not self.client.is_sealed:
            return  # passed on as it came (above)
        kind = message.get("type")
        if kind == "http_body" or (kind == "http_request" and message.get("more") is True):
            self._request_part(message, sender)
        elif kind == "http_request":
            self._spawn(self._http(message, sender))
        elif not (message.get("type") == "event" and message.get("event") in RELAY_EVENTS):
            self._queue_for_local(json.dumps(message, separators=(",", ":")))

    def _request_part(self, message: dict[str, Any], sender: Sender | None) -> None:
        """One part of a sealed request's body (the module's rules): the request is served when
        its last part is in; one over the bounds is answered at once and its later parts dropped."""
        request_id = message.get("id")
        if sender is None or sender.kid is None or not isinstance(request_id, str):
            return
        now = time.monotonic()
        for stale in [key for key, (_, _, started) in self._in_parts.items() if now - started > PARTS_TIMEOUT]:
            del self._in_parts[stale]
        key = (sender.kid, request_id)
        if message.get("type") == "http_request":
            if len(self._in_parts) >= MAX_REQUESTS_IN_PARTS:
                self._refuse(request_id, 503, "busy", f"{MAX_REQUESTS_IN_PARTS} requests are arriving in parts already")
                return
            self._in_parts[key] = (message, bytearray(), now)
        elif key not in self._in_parts:
            return  # refused, timed out, or never begun
        request, body, _ = self._in_parts[key]
        try:
            body += base64.b64decode(message.get("body") or "", validate=True)
        except (ValueError, TypeError):
            del self._in_parts[key]
            self._refuse(request_id, 400, "bad_request", "body is not base64")
            return
        if len(body) > self.max_body:
            del self._in_parts[key]
            self._refuse(request_id, 413, "too_large", f"the request body is over {self.max_body} bytes")
        elif message.get("more") is not True:
            del self._in_parts[key]
            self._spawn(self._http({**request, "body": base64.b64encode(body).decode()}, sender))

    def _refuse(self, request_id: str, status: int, code: str, message: str) -> None:
        self._spawn(self._answer(request_id, status, {"content-type": "application/json"}, _error_body(code, message)))

    def _queue_for_local(self, message: str | bytes) -> None:
        try:
            self._to_local.put_nowait(message)
        except asyncio.QueueFull:
            log.warning("local /ws/control is not keeping up: an app message was dropped")

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _http(self, request: dict[str, Any], sealed_sender: Sender | None = None) -> None:
        """``sealed_sender``: the roster's member who sealed the request, whose role the robot
        applies itself (docs/protocol.md v1.3's table, as the relay applies it to plain requests)."""
        request_id = request.get("id")
        if not isinstance(request_id, str):
            log.warning("http_request without an id: skipped")
            return
        if sealed_sender is not None and not sealed_sender.control and request.get("method") not in ("GET", "HEAD"):
            status, headers, body = 403, {"content-type": "application/json"}, _error_body(
                "forbidden", "a guest without control may only read")
        else:
            status, headers, body = await self._call_local(request, sealed_sender or Sender.of(request))
        await self._answer(request_id, status, headers, body)

    async def _call_local(self, request: dict[str, Any], sender: Sender | None) -> tuple[int, dict[str, Any], bytes]:
        method = request.get("method")
        target = local_target(request.get("path"), request.get("query"))
        if method not in ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"):
            return 400, {"content-type": "application/json"}, _error_body("bad_request", "unsupported method")
        if target is None:
            log.warning("refused a request path that could leave the local API")
            return 400, {"content-type": "application/json"}, _error_body("bad_path", "the path is not a plain local path")
        try:
            body = base64.b64decode(request["body"], validate=True) if request.get("body") else b""
        except (ValueError, TypeError):
            return 400, {"content-type": "application/json"}, _error_body("bad_request", "body is not base64")
        headers: dict[str, str] = {}
        raw_headers = request.get("headers")
        if isinstance(raw_headers, dict):
            for name, value in raw_headers.items():
                # X-Wimz-* is only ever the relay's word (the relay strips an app's, and so do we).
                if isinstance(name, str) and isinstance(value, str) and name.lower() not in HOP_BY_HOP \
                        and not name.lower().startswith("x-wimz-"):
                    headers[name] = value
        if sender is not None:
            headers.update(sender.headers())
        try:
            return await asyncio.get_running_loop().run_in_executor(
                self._http_pool, self._request_blocking, method, target, headers, body)
        except (OSError, http.client.HTTPException, ValueError) as error:
            log.warning("local API unreachable: %s", error)
            return 502, {"content-type": "application/json"}, _error_body("robot_unreachable", "the robot's API did not answer")

    def _request_blocking(self, method: str, target: str, headers: dict[str, str],
                          body: bytes) -> tuple[int, dict[str, Any], bytes]:
        connection = http.client.HTTPConnection(self.local_host, self.local_port, timeout=self.local_timeout)
        try:
            connection.request(method, target, body=body if body or method in ("POST", "PUT", "PATCH") else None,
                               headers=headers)
            response = connection.getresponse()
            data = response.read(self.max_body + 1)
            if len(data) > self.max_body:
                return 502, {"content-type": "application/json"}, _error_body(
                    "response_too_large", f"the robot's response is over {self.max_body} bytes")
            out: dict[str, Any] = {}
            for name, value in response.getheaders():
                lower = name.lower()
                if lower in HOP_BY_HOP:
                    continue
                if lower in out:
                    out[lower] = (out[lower] if isinstance(out[lower], list) else [out[lower]]) + [value]
                else:
                    out[lower] = value
            return response.status, out, data
        finally:
            connection.close()

    async def _answer(self, request_id: str, status: int, headers: dict[str, Any], body: bytes) -> None:
        chunks = [body[i:i + CHUNK_BYTES] for i in range(0, len(body), CHUNK_BYTES)] or [b""]
        first = {"type": "http_response", "id": request_id, "status": status, "headers": headers,
                 "body": base64.b64encode(chunks[0]).decode() if chunks[0] else None, "more": len(chunks) > 1}
        if not await self.client.send(first):
            log.warning("answer to %s lost: the relay is not connected", request_id)
            return
        for index, chunk in enumerate(chunks[1:], start=2):
            if not await self.client.send({"type": "http_body", "id": request_id,
                                           "body": base64.b64encode(chunk).decode(), "more": index < len(chunks)}):
                return
        self.http_answered += 1

    # -- robot → relay ----------------------------------------------------------------------

    async def _local_leg(self) -> None:
        backoff = Backoff(base=0.5, cap=15.0)
        while True:
            try:
                async with connect(self.local_ws_url, open_timeout=10, max_size=1 << 20, proxy=None) as ws:
                    backoff.reset()
                    self._local_connected.set()
                    log.info("connected to the robot's %s", self.local_ws_url)
                    pump = asyncio.create_task(self._pump_to_local(ws))
                    try:
                        async for message in ws:
                            if not await self._to_relay(message):
                                log.warning("the relay is not connected: a robot message was dropped")
                    finally:
                        pump.cancel()
                        self._local_connected.clear()
            except (OSError, InvalidHandshake, asyncio.TimeoutError, ConnectionClosed) as error:
                log.warning("robot's /ws/control unreachable: %s", error)
            await asyncio.sleep(backoff.next_delay())

    async def _to_relay(self, message: str | bytes) -> bool:
        """The robot's message as it came, or on a sealed device sealed (a JSON object only)."""
        if not self.client.is_sealed:
            return await self.client.send_raw(message)
        try:
            parsed = json.loads(message)
        except (ValueError, RecursionError):
            parsed = None
        if not isinstance(parsed, dict):
            log.warning("the robot's message is not a JSON object: a sealed device sends none such")
            return True
        return await self.client.send(parsed)

    async def _pump_to_local(self, ws: Any) -> None:
        while True:
            message = await self._to_local.get()
            try:
                await ws.send(message)
            except ConnectionClosed:
                return

    # -- TURN -----------------------------------------------------------------------------------

    def _write_turn_file(self, credentials: TurnCredentials) -> None:
        if self.turn_file is None:
            return
        directory = os.path.dirname(os.path.abspath(self.turn_file))
        os.makedirs(directory, exist_ok=True)
        fd, temporary = tempfile.mkstemp(prefix=".turn-", dir=directory)
        with os.fdopen(fd, "w") as out:
            json.dump(credentials.to_json(), out)
        os.chmod(temporary, 0o640)
        os.replace(temporary, self.turn_file)
        log.info("TURN credentials written to %s (refresh at %s)", self.turn_file, credentials.refresh_at.isoformat())
