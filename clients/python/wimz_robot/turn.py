"""TURN credentials as the relay hands them out.

The body of ``GET /api/turn/credentials`` and the ``data`` of the ``turn_credentials`` event
pushed to robots are the same JSON (docs/protocol.md)::

    {"urls": [...], "username": "<expiry>:<user>", "credential": "...", "ttl": 86400,
     "expires_at": "2026-11-23T04:13:20Z", "refresh_at": "2026-11-22T16:13:20Z",
     "ice_servers": [{"urls": ["stun:..."]}, {"urls": [...], "username": "...", "credential": "..."}]}
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from .protocol import TURN_CREDENTIALS_PATH


class TurnFetchError(Exception):
    """``GET /api/turn/credentials`` did not answer 200."""

    def __init__(self, status: int | None, code: str, message: str) -> None:
        super().__init__(f"TURN credentials: {status or 'no answer'} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message


def _parse_time(text: str) -> datetime:
    # The relay writes ISO 8601 UTC with a trailing Z; fromisoformat wants an offset on 3.10.
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


@dataclass(frozen=True)
class TurnCredentials:
    """One issued credential. Times are timezone-aware UTC datetimes."""

    urls: list[str]
    username: str
    credential: str
    ttl: int
    expires_at: datetime
    refresh_at: datetime
    ice_servers: list[dict[str, Any]]

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> "TurnCredentials":
        """Parses the endpoint's body (or a ``turn_credentials`` event's data)."""
        return cls(
            urls=list(body["urls"]),
            username=str(body["username"]),
            credential=str(body["credential"]),
            ttl=int(body["ttl"]),
            expires_at=_parse_time(body["expires_at"]),
            refresh_at=_parse_time(body["refresh_at"]),
            ice_servers=list(body.get("ice_servers") or [{"urls": body["urls"], "username": body["username"],
                                                           "credential": body["credential"]}]),
        )

    def to_json(self) -> dict[str, Any]:
        """The endpoint's body again (what the bridge writes to its credentials file)."""
        def iso(t: datetime) -> str:
            return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        return {"urls": self.urls, "username": self.username, "credential": self.credential, "ttl": self.ttl,
                "expires_at": iso(self.expires_at), "refresh_at": iso(self.refresh_at), "ice_servers": self.ice_servers}

    @property
    def issued_at(self) -> datetime:
        """When the relay issued it: the expiry less the ttl (docs/protocol.md)."""
        return self.expires_at - timedelta(seconds=self.ttl)

    def is_fresh(self, now: datetime | None = None) -> bool:
        """True until ``refresh_at``: after it the credential still works but should be replaced."""
        return (now or datetime.now(timezone.utc)) < self.refresh_at

    def to_rtc_ice_servers(self) -> list[Any]:
        """The ``ice_servers`` list as aiortc ``RTCIceServer`` objects (needs aiortc)."""
        from aiortc import RTCIceServer  # imported here: aiortc is only needed for WebRTC

        return [RTCIceServer(urls=s["urls"], username=s.get("username"), credential=s.get("credential"))
                for s in self.ice_servers]


def get_json(url: str, token: str, timeout: float, ssl_context: Any, method: str = "GET", body: Any = None) -> Any:
    """One blocking call to the relay with ``token`` (and ``body`` as JSON, if any); the JSON
    answer, or :class:`TurnFetchError` (status and the relay's error code) for a refusal or an
    unreachable relay. Redirects are not followed: urllib would send the ``Authorization``
    header on to wherever they point."""
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
    data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
    if data is not None:
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=ssl_context), _NoRedirects())
    try:
        with opener.open(request, timeout=timeout) as response:
            return json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        try:
            body = json.loads(error.read() or b"{}")
        except ValueError:
            body = {}
        raise TurnFetchError(error.code, body.get("error", "http_error"), body.get("message", str(error))) from None
    except (urllib.error.URLError, OSError, ValueError) as error:
        raise TurnFetchError(None, "unreachable", str(error)) from None


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> None:
        return None


def _fetch_blocking(url: str, token: str, ttl: int | None, timeout: float, ssl_context: Any) -> TurnCredentials:
    if ttl is not None:
        url += f"?ttl={int(ttl)}"
    try:
        return TurnCredentials.from_json(get_json(url, token, timeout, ssl_context))
    except (KeyError, ValueError, TypeError, AttributeError) as error:
        raise TurnFetchError(None, "unreachable", str(error)) from None


async def fetch_turn_credentials(http_base: str, token: str, *, ttl: int | None = None, timeout: float = 10.0,
                                 ssl_context: Any = None) -> TurnCredentials:
    """``GET {http_base}/api/turn/credentials`` with the token; raises :class:`TurnFetchError`."""
    url = http_base.rstrip("/") + TURN_CREDENTIALS_PATH
    return await asyncio.to_thread(_fetch_blocking, url, token, ttl, timeout, ssl_context)
