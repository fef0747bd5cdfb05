"""The robot's end of the WIM-Z relay: one WebSocket to ``/ws/robot``, kept up for as long as
the client runs, plus always-fresh TURN credentials.

Messages (docs/protocol.md; the conventions for commands and responses are the project's own,
documented in docs/protocol.md):

- in:  ``{"type":"command","id":ID,"command":NAME,"data":{...}}`` from an app (the relay
  rewrites ``id``; answer with the id you got),
  ``{"type":"event","event":"app_presence","data":{"apps":N}}`` and
  ``{"type":"event","event":"turn_credentials","data":{...}}`` from the relay, and anything
  else an app sends (WebRTC signalling, ...), handed to ``on_message`` handlers.
- out: ``{"type":"event","event":NAME,"data":{...},"timestamp":ISO8601}`` and
  ``{"type":"response","id":ID,"ok":true,"data":RESULT}`` or
  ``{"type":"response","id":ID,"ok":false,"error":{"code":CODE,"message":TEXT}}``.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Awaitable, Callable
from urllib.parse import quote, urlsplit, urlunsplit

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from .backoff import Backoff
from .household import AppToken, Sender, list_app_tokens
from .protocol import QUICK_RECONNECT_AFTER, REPLAYED_EVENTS, ROBOT_SOCKET_PATH, CloseCode, device_path
from .sealed.device import SealedDevice
from .sealed.frames import Sender as FrameSender
from .sealed.keeper import RosterKeeper
from .settings import SettingsHandler, applied
from .turn import TurnCredentials, TurnFetchError, fetch_turn_credentials, get_json

log = logging.getLogger("wimz_robot")

#: Command and message handlers take the message (a command: its ``data``), and also who sent
#: it when they have a parameter named ``sender``.
CommandHandler = Callable[..., Any]
MessageHandler = Callable[..., Any]
RawHandler = Callable[[str | bytes], Any]
StateHandler = Callable[["ConnectionState"], Any]
CredentialsHandler = Callable[[TurnCredentials], Any]

#: Largest message the client accepts from the relay: an ``http_request`` carries its body as
#: base64 in one frame (4/3 of the relay's 1 MiB default body limit, plus its headers).
MAX_MESSAGE_BYTES = 4 << 20



class RelayRefused(Exception):
    """The relay refused this robot for good: a bad, revoked or foreign token (HTTP 401/403,
    close 4003), or another robot connected with the same device (close 4001). The client
    stops reconnecting; ``status`` is the HTTP status or the close code."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"relay refused the robot ({status}): {reason}")
        self.status = status
        self.reason = reason


@dataclass(frozen=True, slots=True)
class ConnectionState:
    """What the client's connection is doing, for ``RobotClient.on_state`` handlers.

    ``kind`` is ``"connecting"``, ``"connected"``, ``"disconnected"`` (``code``/``reason``: the
    close code and reason, None/"" when the connection just dropped; the client reconnects) or
    ``"refused"`` (``code``: the HTTP status or close code, ``reason``: the relay's message; the
    client stops for good)."""

    kind: str
    code: int | None = None
    reason: str = ""


class RobotClient:
    """The robot's connection to the relay.

    ::

        async with RobotClient("wss://api.wimzai.com", "robot-42", token) as client:
            @client.command("start_mission")
            async def start_mission(data):
                return {"started": data["mission"]}

            await client.send_event("mission_progress", {"step": 1, "total": 5})
            pc = RTCPeerConnection(RTCConfiguration(iceServers=await client.ice_servers()))

    ``url`` is the relay's base URL (``ws://``, ``wss://``, ``http://`` or ``https://``).
    With ``senders=True`` the relay says which member sent each app message (docs/protocol.md v1.3):
    ``Sender.of(message)`` in message handlers, and a command handler with a ``sender``
    parameter (``def treat(data, sender)``) gets it — e.g. a daily treat limit for guests.
    The client reconnects with capped exponential back-off and full jitter, at once after
    1001/1012, and stops for good on 401/403/4001/4003 (:attr:`refused` tells why).

    What arrives on a connection reaches its handlers in the order it arrived, one message at a
    time: a slow handler delays the next message, not the socket's reader. At most ``inbox``
    messages wait; past that a message is dropped (:attr:`dropped` counts them, each logged) and
    a command among them is answered ``{"ok":false,"error":{"code":"robot_busy"}}`` at once.
    """

    def __init__(self, url: str, device_id: str, token: str, *, backoff: Backoff | None = None,
                 ssl: Any = None, open_timeout: float = 10.0, turn_ttl: int | None = None,
                 answer_commands: bool = True, senders: bool = False, inbox: int = 1000,
                 sealed: SealedDevice | None = None) -> None:
        parts = urlsplit(url)
        secure = parts.scheme in ("wss", "https")
        if parts.scheme not in ("ws", "wss", "http", "https") or not parts.netloc:
            raise ValueError(f"not a relay URL: {url!r}")
        base_path = parts.path.rstrip("/")
        self.device_id = device_id
        self._token = token
        self._ws_url = urlunsplit(("wss" if secure else "ws", parts.netloc,
                                   f"{base_path}{ROBOT_SOCKET_PATH}",
                                   f"device_id={quote(device_id, safe='')}{'&senders=1' if senders else ''}", ""))
        self._http_base = urlunsplit(("https" if secure else "http", parts.netloc, base_path, "", ""))
        self._ssl = ssl
        self._open_timeout = open_timeout
        self._turn_ttl = turn_ttl
        self.backoff = backoff or Backoff()

        self._commands: dict[str, CommandHandler] = {}
        self._message_handlers: list[MessageHandler] = []
        self._raw_handlers: list[RawHandler] = []
        self._state_handlers: list[StateHandler] = []
        self._credentials_handlers: list[CredentialsHandler] = []
        self._settings_handler: SettingsHandler | None = None
        #: False: commands are not answered here but go to the message handlers like any other
        #: message (a bridge passes them on and relays the robot's own responses).
        self.answer_commands = answer_commands
        self._ws: ClientConnection | None = None
        self._connected = asyncio.Event()
        self._closing = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self._inbox_size = inbox
        #: Messages dropped because ``inbox`` of them were waiting for the handlers.
        self.dropped = 0
        self._runner: asyncio.Task[None] | None = None
        self._refresher: asyncio.Task[None] | None = None
        self._credentials: TurnCredentials | None = None
        self._credentials_changed = asyncio.Event()
        self._fetch_lock = asyncio.Lock()
        #: The latest replayed event of each name, re-sent after every reconnect.
        self._state_events: dict[str, dict[str, Any]] = {}

        #: The device's seal (v1.5): once it holds an epoch, every frame to and from the apps is
        #: sealed, and an unsealed one from an app is dropped unread.
        self.sealed = sealed
        self._sealer: FrameSender | None = None
        #: Its rosters over time: accepted, caught up on connect, departures applied.
        self._rosters = None if sealed is None else RosterKeeper(sealed, store_epoch=self._store_epoch,
                                                                 pending_rosters=self._pending_rosters, relay_failure=TurnFetchError)

        #: App sockets the relay last reported for this device (``app_presence``).
        self.apps: int = 0
        #: Why the client stopped for good, if it did.
        self.refused: RelayRefused | None = None
        #: Successful connections so far (1 after the first, 2 after one reconnect, ...).
        self.connections: int = 0

    # -- lifecycle -------------------------------------------------------------------------

    async def __aenter__(self) -> "RobotClient":
        self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def start(self) -> None:
        """Starts the connection loop and the TURN refresher (``async with`` does this)."""
        if self._runner is None:
            self._runner = asyncio.create_task(self._run(), name=f"wimz-robot {self.device_id}")
            self._refresher = asyncio.create_task(self._refresh_turn(), name="wimz-robot turn refresher")
            if self._rosters is not None:
                self._spawn(self._rosters.apply_departures())

    async def close(self) -> None:
        """Closes the socket (1000) and stops reconnecting."""
        self._closing = True
        if self._ws is not None:
            await self._ws.close()
        for task in (self._runner, self._refresher, *self._tasks):
            if task is not None:
                task.cancel()
        for task in (self._runner, self._refresher, *self._tasks):
            if task is not None:
                try:
                    await task
                except (asyncio.CancelledError, Exception):
                    pass

    @property
    def connected(self) -> bool:
        """True while the socket to the relay is open."""
        return self._connected.is_set()

    async def wait_connected(self, timeout: float | None = None) -> None:
        """Waits until the socket is open; raises :class:`RelayRefused` if it never will be."""
        waiter = asyncio.create_task(self._connected.wait())
        done, _ = await asyncio.wait({waiter, self._runner} if self._runner else {waiter}, timeout=timeout,
                                     return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        if self.refused:
            raise self.refused
        if not self._connected.is_set():
            raise TimeoutError(f"not connected to the relay within {timeout} s")

    # -- handlers --------------------------------------------------------------------------

    def command(self, name: str) -> Callable[[CommandHandler], CommandHandler]:
        """Registers a handler for the command ``name`` (sync or async). It gets the command's
        ``data`` object; its return value (JSON-serialisable) becomes the response's ``data``;
        an exception becomes ``{"ok":false,"error":{"code":"command_failed",...}}``."""
        def register(handler: CommandHandler) -> CommandHandler:
            self._commands[name] = handler
            return handler
        return register

    def settings(self, handler: SettingsHandler) -> SettingsHandler:
        """Registers the handler of the robot's settings (docs/protocol.md v1.6; sync or async):
        it gets the desired document when the robot connects and desired is newer than what it
        reported, and on every change; it returns the document the robot now runs (None: as
        asked), which the relay stores as reported (``wimz_robot.settings``)."""
        self._settings_handler = handler
        return handler

    def on_message(self, handler: MessageHandler) -> MessageHandler:
        """Registers a handler for every other JSON message from the apps (e.g. WebRTC signalling;
        on a sealed device the opened frames), with its ``sender`` when it has that parameter."""
        self._message_handlers.append(handler)
        return handler

    def on_raw(self, handler: RawHandler) -> RawHandler:
        """Registers a handler for every message from the relay exactly as received (``str``
        for text, ``bytes`` for binary), before any other handling."""
        self._raw_handlers.append(handler)
        return handler

    def on_state(self, handler: StateHandler) -> StateHandler:
        """Registers a handler for every change of the connection (a ``ConnectionState``)."""
        self._state_handlers.append(handler)
        return handler

    def _state(self, kind: str, code: int | None = None, reason: str = "") -> None:
        state = ConnectionState(kind, code, reason)
        for handler in self._state_handlers:
            self._spawn(_call(handler, state))

    def on_turn_credentials(self, handler: CredentialsHandler) -> CredentialsHandler:
        """Registers a handler called with every newer TURN credential (pushed or fetched), e.g.
        to restart ICE or to hand it to other code."""
        self._credentials_handlers.append(handler)
        return handler

    # -- sending ---------------------------------------------------------------------------

    async def send_event(self, name: str, data: dict[str, Any] | None = None) -> bool:
        """Sends ``{"type":"event","event":name,"data":data,"timestamp":now}`` to every app.
        Returns False (and sends nothing) while the relay is not connected."""
        timestamp = datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        message = {"type": "event", "event": name, "data": data or {}, "timestamp": timestamp}
        if name in REPLAYED_EVENTS:
            self._state_events[name] = message
        return await self.send(message)

    async def send(self, message: dict[str, Any]) -> bool:
        """Sends any JSON message (sealed on a sealed device); False while not connected."""
        sent = await self._send_text(self._outgoing(message))
        # A sealed mission's progress also goes in clear for the lock screen, as the policy allows.
        lock_screen = self.sealed.lock_screen(message) if self.sealed is not None and sent else None
        if lock_screen is not None:
            await self._send_text(json.dumps(lock_screen, separators=(",", ":")))
        return sent

    async def send_raw(self, message: str | bytes) -> bool:
        """Sends a text (``str``) or binary (``bytes``) message as it is; False while not
        connected, and on a sealed device (only :meth:`send` seals)."""
        if self.is_sealed:
            log.warning("send_raw on a sealed device: not sent (use send)")
            return False
        return await self._send_text(message)

    @property
    def is_sealed(self) -> bool:
        """True once the device is sealed (v1.5): everything :meth:`send` sends is sealed, and
        handlers see only what a member sealed."""
        return self.sealed is not None and self.sealed.sealed

    def _outgoing(self, message: dict[str, Any]) -> str:
        """The text that goes out for ``message``: on a sealed device a sealed frame (a
        ``lock_screen`` frame is the one the policy leaves in clear)."""
        if self.sealed is not None and self.is_sealed and message.get("type") != "lock_screen":
            message = self.sealed.seal(self._connection_sealer(), message)
        return json.dumps(message, separators=(",", ":"))

    def _connection_sealer(self) -> FrameSender:
        """This connection's sealing (a fresh sid per connection)."""
        assert self.sealed is not None
        if self._sealer is None:
            self._sealer = self.sealed.sender()
        return self._sealer

    async def accept_roster(self, signed: dict[str, Any]) -> int:
        """Accepts the household's next roster (v1.5): verified against the pinned first owner
        or the current roster, a new epoch secret sealed to every member and stored on the
        relay; the departures signed ahead with it are scheduled. Returns the new epoch; raises
        RosterRejected or TurnFetchError."""
        if self._rosters is None:
            raise RuntimeError("this client has no SealedDevice")
        return await self._rosters.accept(signed)

    async def _store_epoch(self, epoch: int, body: dict[str, Any]) -> None:
        url = f"{self._http_base}{device_path(self.device_id, 'sealed', 'epochs', str(epoch))}"
        try:
            await asyncio.to_thread(get_json, url, self._token, 10.0, self._ssl, "PUT", body)
        except TurnFetchError as error:
            if error.status != 409:  # 409: the relay holds this epoch already
                raise

    async def _pending_rosters(self) -> list[Any]:
        url = f"{self._http_base}{device_path(self.device_id, 'sealed', 'rosters')}"
        pending = await asyncio.to_thread(get_json, url, self._token, 10.0, self._ssl)
        rosters = pending.get("rosters", []) if isinstance(pending, dict) else []
        return rosters if isinstance(rosters, list) else []

    async def _send_text(self, message: str | bytes) -> bool:
        ws = self._ws
        if ws is None:
            return False
        try:
            await ws.send(message)
            return True
        except ConnectionClosed:
            return False

    # -- TURN --------------------------------------------------------------------------------

    async def turn_credentials(self) -> TurnCredentials:
        """A credential that is before its ``refresh_at``: the newest pushed by the relay, or
        fetched from ``/api/turn/credentials`` when none is fresh."""
        current = self._credentials
        if current is not None and current.is_fresh():
            return current
        async with self._fetch_lock:
            current = self._credentials
            if current is not None and current.is_fresh():
                return current
            fetched = await fetch_turn_credentials(self._http_base, self._token, ttl=self._turn_ttl, ssl_context=self._ssl)
            self._set_credentials(fetched)
            return fetched

    async def app_tokens(self) -> list[AppToken]:
        """The device's app tokens with their household access (``access``, ``control``,
        ``until``); raises :class:`TurnFetchError` (status and error code) when the relay refuses."""
        return await list_app_tokens(self._http_base, self.device_id, self._token, ssl_context=self._ssl)

    async def ice_servers(self) -> list[Any]:
        """aiortc ``RTCIceServer``s (STUN, then TURN) with a fresh credential: pass them to
        ``RTCConfiguration(iceServers=...)`` for every new peer connection."""
        return (await self.turn_credentials()).to_rtc_ice_servers()

    def _set_credentials(self, credentials: TurnCredentials) -> None:
        # The most recently issued one wins, not the one that expires last: a credential's
        # expiry says nothing of who issued it, and the relay is the only issuer (it refuses
        # turn_credentials events from apps, docs/protocol.md v1.2).
        current = self._credentials
        if current is None or credentials.issued_at >= current.issued_at:
            self._credentials = credentials
            self._credentials_changed.set()
            if credentials != current:
                for handler in self._credentials_handlers:
                    self._spawn(_call(handler, credentials))

    async def _refresh_turn(self) -> None:
        """Fetches over HTTP shortly before ``refresh_at`` when no push replaced the credential
        (the relay pushes earlier, ttl/10 and at most a minute before it)."""
        failures = Backoff(base=1.0, cap=30.0)
        while True:
            current = self._credentials
            if current is None:
                self._credentials_changed.clear()
                await self._credentials_changed.wait()
                continue
            margin = timedelta(seconds=min(current.ttl / 20, 30))
            wait = (current.refresh_at - margin - datetime.now(timezone.utc)).total_seconds()
            if wait > 0:
                self._credentials_changed.clear()
                try:
                    await asyncio.wait_for(self._credentials_changed.wait(), timeout=wait)
                    continue  # a newer credential arrived: plan from it
                except asyncio.TimeoutError:
                    pass
            if self._credentials is not current:
                continue
            try:
                self._set_credentials(await fetch_turn_credentials(self._http_base, self._token,
                                                                   ttl=self._turn_ttl, ssl_context=self._ssl))
                failures.reset()
            except TurnFetchError as error:
                log.warning("TURN refresh failed: %s", error)
                if error.status in (401, 403):
                    return
                await asyncio.sleep(failures.next_delay())

    # -- the connection loop -----------------------------------------------------------------

    async def _run(self) -> None:
        headers = {"Authorization": f"Bearer {self._token}"}
        while not self._closing:
            slow = False
            self._state("connecting")
            try:
                async with connect(self._ws_url, additional_headers=headers, ssl=self._ssl, compression=None,
                                   proxy=None, open_timeout=self._open_timeout, max_size=MAX_MESSAGE_BYTES) as ws:
                    self._ws = ws
                    self._sealer = None  # a fresh sid for every connection
                    opened = asyncio.get_running_loop().time()
                    self.connections += 1
                    self.backoff.reset()
                    # The latest replayed events go out before anyone is told the robot is
                    # connected: a send_event() racing them could otherwise be overtaken by an
                    # older state event and leave the apps with stale state.
                    for event in list(self._state_events.values()):
                        await ws.send(self._outgoing(event))
                    self._connected.set()
                    self._state("connected")
                    if self._rosters is not None:
                        self._spawn(self._rosters.catch_up())
                    log.info("connected to %s", self._ws_url)
                    # This connection's messages, in order, to one worker that runs the handlers.
                    inbox: asyncio.Queue[str | bytes | None] = asyncio.Queue(self._inbox_size)
                    self._spawn(self._work(inbox))
                    try:
                        async for message in ws:
                            self._receive(message, inbox)
                    except ConnectionClosed:
                        pass  # any close code other than 1000: decided on below
                    finally:
                        self._connected.clear()
                        self._ws = None
                        self._end_of(inbox)
                code = ws.close_code
                reason = ws.close_reason or ""
                lasted = asyncio.get_running_loop().time() - opened
            except InvalidStatus as error:
                status = error.response.status_code
                reason = _error_message(error.response.body)
                if status in (401, 403):
                    self.refused = RelayRefused(status, reason)
                    log.error("%s", self.refused)
                    self._state("refused", status, reason)
                    return
                log.warning("upgrade refused: %s %s", status, reason)
                self._state("disconnected", status, reason)
                slow = status == 429
                await asyncio.sleep(self.backoff.next_delay(slow=slow))
                continue
            except (OSError, InvalidHandshake, asyncio.TimeoutError, ConnectionClosed) as error:
                log.warning("cannot reach the relay: %s", error)
                self._state("disconnected", None, str(error))
                await asyncio.sleep(self.backoff.next_delay())
                continue
            if self._closing:
                self._state("disconnected", code, reason)
                return
            # What the close means for a reconnect is the relay's (protocol-constants.json).
            reconnect = CloseCode.reconnect_after(code)
            if reconnect == "never" and code is not None:
                self.refused = RelayRefused(code, reason or ("token revoked" if code == CloseCode.REVOKED else "replaced"))
                log.error("%s", self.refused)
                self._state("refused", code, self.refused.reason)
                return
            self._state("disconnected", code, reason)
            if reconnect == "at_once" and lasted >= QUICK_RECONNECT_AFTER:
                log.info("relay asked us to reconnect (%s %s)", code, reason)
                continue  # at once: the balancer sends us to a live node (a node that keeps
                # closing fresh sockets at once falls through to the back-off below)
            slow = reconnect == "slow_backoff"
            log.warning("connection closed (%s %s)", code, reason)
            await asyncio.sleep(self.backoff.next_delay(slow=slow))

    def _receive(self, message: str | bytes, inbox: asyncio.Queue[str | bytes | None]) -> None:
        """The socket reader's part: the relay's own events at once, the rest queued in order."""
        parsed = _json_object(message) if isinstance(message, str) else None
        if parsed is not None and parsed.get("type") == "event" and parsed.get("event") == "turn_credentials":
            try:
                self._set_credentials(TurnCredentials.from_json(parsed.get("data") or {}))
            except (KeyError, ValueError, TypeError) as error:
                log.warning("malformed turn_credentials event: %s", error)
        elif parsed is not None and parsed.get("type") == "event" and parsed.get("event") == "app_presence":
            self.apps = int((parsed.get("data") or {}).get("apps", 0))
        try:
            inbox.put_nowait(message)
        except asyncio.QueueFull:
            self.dropped += 1
            log.warning("handlers %d messages behind: dropping one (%d so far)", inbox.qsize(), self.dropped)
            if parsed is not None and parsed.get("type") == "command" and self.answer_commands:
                self._spawn(self.send({"type": "response", "id": parsed.get("id"), "ok": False,
                                       "error": {"code": "robot_busy", "message": "the robot's handlers are behind"}}))

    def _end_of(self, inbox: asyncio.Queue[str | bytes | None]) -> None:
        """The connection ended: its worker stops after what is queued."""
        try:
            inbox.put_nowait(None)
        except asyncio.QueueFull:
            self._spawn(inbox.put(None))  # once the worker has made room

    async def _work(self, inbox: asyncio.Queue[str | bytes | None]) -> None:
        """One connection's handlers, one message at a time, in the order the messages came."""
        while (message := await inbox.get()) is not None:
            for raw_handler in self._raw_handlers:
                await _guarded(_call(raw_handler, message))
            parsed = _json_object(message) if isinstance(message, str) else None
            if parsed is None:
                continue
            sender = None
            if self._rosters is not None and parsed.get("type") == "roster":
                await _guarded(self._rosters.accept_frame(parsed))
                continue
            if parsed.get("type") == "settings":
                await _guarded(self._apply_settings(parsed))
                continue
            if self.sealed is not None and self.is_sealed:
                if parsed.get("type") == "sealed":
                    inner = self.sealed.open(parsed)
                    if inner is None:
                        continue
                    member = inner.opened.member
                    parsed, sender = inner.message, Sender(None, member.role, member.may_control, member.kid)
                    if parsed.get("type") == "roster_schedule" and self._rosters is not None:
                        self._rosters.schedule(parsed, sender)
                        continue
                elif not self.sealed.reads_unsealed(parsed):
                    continue
            if parsed.get("type") == "command" and self.answer_commands:
                await _guarded(self._answer(parsed, sender))
                continue
            for handler in self._message_handlers:
                await _guarded(_call_with_sender(handler, parsed, sender or Sender.of(parsed)))

    async def _apply_settings(self, frame: dict[str, Any]) -> None:
        """The relay's desired settings, through the handler; what it runs goes back as
        ``settings_applied`` (its envelope in clear: the relay stores it)."""
        if self._settings_handler is None:
            log.warning("settings version %s arrived and no @client.settings handler is registered", frame.get("version"))
            return
        answer = await applied(frame, self._settings_handler, self.sealed, self._connection_sealer, _call)
        if answer is not None and not await self._send_text(json.dumps(answer, separators=(",", ":"))):
            log.warning("settings_applied %s lost: not connected (the relay sends desired again)", answer["version"])

    def _spawn(self, coroutine: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _answer(self, command: dict[str, Any], sealed_sender: Sender | None = None) -> None:
        """Runs the command's handler. ``sealed_sender``: the roster member who sealed it, whose
        role the robot enforces itself (a guest without control is refused, whatever the relay let through)."""
        name = command.get("command")
        handler = self._commands.get(name) if isinstance(name, str) else None
        response: dict[str, Any] = {"type": "response", "id": command.get("id")}
        if sealed_sender is not None and not sealed_sender.control:
            response.update(ok=False, error={"code": "forbidden", "message": "a guest without control can't send commands"})
        elif handler is None:
            response.update(ok=False, error={"code": "unknown_command", "message": f"no handler for {name!r}"})
        else:
            try:
                data = command.get("data") or {}
                result = await _call_with_sender(handler, data, sealed_sender or Sender.of(command))
                response.update(ok=True, data=result)
            except Exception as error:  # the handler's failure is the app's answer, not ours
                log.exception("command %s failed", name)
                response.update(ok=False, error={"code": "command_failed", "message": str(error)})
        if not await self.send(response):
            log.warning("response to %s lost: not connected", name)


def _json_object(text: str) -> dict[str, Any] | None:
    try:
        message = json.loads(text)
    except (ValueError, RecursionError):
        log.warning("ignoring a message that is not JSON")
        return None
    return message if isinstance(message, dict) else None


async def _guarded(call: Awaitable[Any]) -> None:
    """A handler's failure is logged and the next message goes on."""
    try:
        await call
    except Exception:  # noqa: BLE001 - a handler of the application's own
        log.exception("a message handler failed")


async def _call_with_sender(handler: Callable[..., Any], argument: Any, sender: Sender | None) -> Any:
    """A handler with a parameter named ``sender`` also gets who sent the message: the roster's
    member on a sealed device, else the relay's ``from`` (``senders=True``; None otherwise)."""
    if "sender" not in inspect.signature(handler).parameters:
        return await _call(handler, argument)
    result = handler(argument, sender=sender)
    return await result if inspect.isawaitable(result) else result


async def _call(handler: Callable[[Any], Any], argument: Any) -> Any:
    result = handler(argument)
    return await result if inspect.isawaitable(result) else result


def _error_message(body: bytes | bytearray | None) -> str:
    """The relay's JSON error body (``{"error":CODE,"message":TEXT}``) as one line."""
    try:
        parsed = json.loads(body or b"{}")
        return f"{parsed.get('error', '')}: {parsed.get('message', '')}"
    except ValueError:
        return (body or b"").decode("utf-8", "replace")[:200]
