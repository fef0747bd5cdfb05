"""The household as the robot sees it (docs/protocol.md v1.3): who sent an app message (``from``, with
``senders=True``) and the device's app tokens with their access levels (``app_tokens()``)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from .protocol import device_path
from .turn import get_json


@dataclass(frozen=True)
class Sender:
    """The member that sent an app message or HTTP request: its app token's id, its access level
    (``owner``, ``family`` or ``guest``) and whether it may control the robot (always true for
    owners and family; a guest's grant). On a sealed device (v1.5) the roster says who sent a
    frame: ``kid`` is the member's key id and ``token_id`` None (the relay's ids are not sealed)."""

    token_id: int | None
    access: str
    control: bool
    kid: str | None = None

    @classmethod
    def of(cls, message: dict[str, Any]) -> "Sender | None":
        """The ``from`` the relay inserted into ``message`` (None: the robot did not opt in, or the
        message is the relay's own)."""
        member = message.get("from")
        if not isinstance(member, dict):
            return None
        token_id, access, control = member.get("token_id"), member.get("access"), member.get("control")
        if not isinstance(token_id, int) or access not in ("owner", "family", "guest") or not isinstance(control, bool):
            return None
        return cls(token_id, access, control)

    def headers(self) -> dict[str, str]:
        """What the bridge tells the robot's local API about the caller."""
        member = self.kid if self.kid is not None else str(self.token_id)
        return {"X-Wimz-Member": member, "X-Wimz-Access": self.access,
                "X-Wimz-Control": "true" if self.control else "false"}


@dataclass(frozen=True)
class AppToken:
    """One app token of the device (never its secret): the robot's ``GET …/app-tokens``."""

    id: int
    label: str
    access: str
    control: bool
    until: str | None
    created_at: str
    last_used_at: str | None
    expires_at: str | None
    revoked_at: str | None

    @classmethod
    def from_json(cls, item: dict[str, Any]) -> "AppToken":
        return cls(int(item["id"]), str(item.get("label", "")), str(item.get("access", "owner")),
                   bool(item.get("control", True)), item.get("until"), str(item["created_at"]),
                   item.get("last_used_at"), item.get("expires_at"), item.get("revoked_at"))


async def list_app_tokens(http_base: str, device_id: str, token: str, *, timeout: float = 10.0,
                          ssl_context: Any = None) -> list[AppToken]:
    """``GET {http_base}/api/devices/{device_id}/app-tokens`` with the robot token."""
    url = http_base.rstrip("/") + device_path(device_id, "app_tokens")
    body = await asyncio.to_thread(get_json, url, token, timeout, ssl_context)
    return [AppToken.from_json(item) for item in body["tokens"]]
