"""The relay protocol's constants, read from ``protocol-constants.json`` — the file
``wimz-relay protocol-constants`` prints from the relay's own WimzProtocol module (the relay's
tests keep the committed copy equal to it; ``scripts/generate.sh`` rewrites it)."""

from __future__ import annotations

import json
from enum import IntEnum
from importlib import resources
from typing import Any
from urllib.parse import quote

_CONSTANTS: dict[str, Any] = json.loads(resources.files(__package__).joinpath("protocol-constants.json").read_text())
_CLOSE: dict[str, dict[str, Any]] = _CONSTANTS["close_codes"]
_LIMITS: dict[str, Any] = _CONSTANTS["limits"]


class CloseCode(IntEnum):
    """WebSocket close codes (docs/protocol.md "Keepalive, limits and close codes")."""

    NORMAL = _CLOSE["normal"]["code"]
    GOING_AWAY = _CLOSE["goingAway"]["code"]
    INVALID_PAYLOAD = _CLOSE["invalidPayload"]["code"]
    TOO_LARGE = _CLOSE["tooLarge"]["code"]
    RECONNECT_NOW = _CLOSE["reconnectNow"]["code"]
    REPLACED = _CLOSE["replaced"]["code"]
    REVOKED = _CLOSE["revoked"]["code"]
    SLOW_CONSUMER = _CLOSE["slowConsumer"]["code"]
    RATE_LIMITED = _CLOSE["rateLimited"]["code"]

    @property
    def reconnect(self) -> str:
        """``at_once``, ``backoff``, ``slow_backoff`` or ``never``: how a client reconnects after it."""
        return str(next(entry["reconnect"] for entry in _CLOSE.values() if entry["code"] == self.value))

    @classmethod
    def reconnect_after(cls, code: int | None) -> str:
        """How a client reconnects after a close with ``code`` (none, or one the relay does not
        name: with the back-off)."""
        try:
            return cls(code).reconnect if code is not None else "backoff"
        except ValueError:
            return "backoff"


#: Every error code the relay answers with, and its HTTP status.
ERROR_STATUS: dict[str, int] = dict(_CONSTANTS["error_codes"])
#: Events the relay replays to apps that connect later (its default replay set).
REPLAYED_EVENTS: frozenset[str] = frozenset(_CONSTANTS["replayed_events"])
#: Events only the relay sends.
RELAY_EVENTS: frozenset[str] = frozenset(_CONSTANTS["relay_events"])
#: 1001/1012 reconnect at once only after a connection that lasted this long (seconds).
QUICK_RECONNECT_AFTER: float = float(_LIMITS["quick_reconnect_after_seconds"])
#: Body bytes per ``http_response``/``http_body`` frame.
ROBOT_HTTP_CHUNK_BYTES: int = int(_LIMITS["robot_http_chunk_bytes"])
#: The relay's default limit on a body to or from the robot's API.
ROBOT_HTTP_MAX_BODY: int = int(_LIMITS["robot_http_max_body"])
#: The longest chain of a sealed household's departures signed ahead that a robot keeps (v1.5).
MAX_SCHEDULED_DEPARTURES: int = int(_LIMITS["scheduled_departures"])
#: What a phone can be woken for.
PUSH_KINDS: frozenset[str] = frozenset(_CONSTANTS["push_kinds"])

_PATHS: dict[str, Any] = _CONSTANTS["paths"]
#: The robot's WebSocket path.
ROBOT_SOCKET_PATH: str = str(_PATHS["robot_socket"])
#: ``GET`` it for TURN credentials.
TURN_CREDENTIALS_PATH: str = str(_PATHS["turn_credentials"])


def device_path(device_id: str, resource: str, *segments: str) -> str:
    """``/api/devices/<device_id>/<resource>[/<segment>…]``; ``resource`` is a key of the relay's
    device resources (``status``, ``app_tokens``, ``pairing_codes``, …). The id and segments are
    percent-encoded."""
    path = str(_PATHS["device"]).replace("{device_id}", quote(device_id, safe=""))
    return "/".join([path, str(_PATHS["device_resources"][resource]), *(quote(s, safe="") for s in segments)])
