"""The robot's API and its /ws/control on a sealed device (docs/protocol.md "Sealed devices
(v1.5)"): the real relay, ``wimz-robot bridge`` with a sealed device, the guide's stand-in robot,
and apps that seal their requests as the contract says. The relay carries the requests and
answers without reading them; the robot applies the roster's roles to them itself."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import secrets
import time
from pathlib import Path
from typing import Any

import pytest

from wimz_robot.bridge import Bridge
from wimz_robot.sealed import Epoch, Identity, Member, Roster, Sender
from wimz_robot.sealed.device import SealedDevice
from wimz_testkit import http_json

from test_bridge import standin  # noqa: F401 — the fixture
from test_robot_client import app_socket, eventually, next_message
from test_sealed_relay import hand_over_keys, issue
from test_sealed_robot import assert_marker_nowhere, epoch_for, open_from_robot


class SealedApp:
    """An app of the household on its own socket: seals what it sends, opens the robot's frames."""

    def __init__(self, socket: Any, identity: Identity, epoch: Epoch, device: SealedDevice, device_id: str) -> None:
        self.socket, self.epoch, self.device, self.device_id = socket, epoch, device, device_id
        self.sealer = Sender(identity, device_id)

    async def send(self, message: dict[str, Any]) -> None:
        await self.socket.send(json.dumps(self.sealer.seal(self.epoch, json.dumps(message).encode())))

    async def receive(self, predicate: Any) -> dict[str, Any]:
        """The next opened frame of the robot's that satisfies ``predicate``."""
        while True:
            frame = await next_message(self.socket, lambda m: m.get("type") == "sealed", timeout=30)
            opened = open_from_robot(self.epoch, self.device.identity.public, self.device_id, frame)
            if predicate(opened):
                return opened

    async def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        """One call of the robot's API as sealed ``http_request`` and ``http_response`` frames; a
        body over 32 KiB in parts (``http_body`` frames), spaced as the relay's rate allows."""
        request_id = f"h{secrets.token_hex(8)}"
        parts = [body[i:i + 32768] for i in range(0, len(body), 32768)] if body else [b""]
        await self.send({"type": "http_request", "id": request_id, "method": method, "path": path, "query": None,
                         "headers": {"content-type": "application/json"} if body else {},
                         "body": base64.b64encode(parts[0]).decode() if body else None, "more": len(parts) > 1})
        for index, part in enumerate(parts[1:], start=2):
            if index > 8:
                await asyncio.sleep(0.05)  # the relay's 20 a second (40 at once) per app socket
            await self.send({"type": "http_body", "id": request_id, "body": base64.b64encode(part).decode(),
                             "more": index < len(parts)})
        first = await self.receive(lambda m: m.get("type") == "http_response" and m.get("id") == request_id)
        data, more = base64.b64decode(first["body"] or ""), first["more"]
        while more:
            part = await self.receive(lambda m: m.get("type") == "http_body" and m.get("id") == request_id)
            data, more = data + base64.b64decode(part["body"]), part["more"]
        return first["status"], data


@pytest.fixture
async def household(relay, database, device, standin, tmp_path: Path):  # noqa: F811 — standin is the fixture
    """A sealed bridge in front of the stand-in, an owner and a guest without control, epoch 1."""
    device_id, robot_token, owner_token = device
    until = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 7200))
    guest_token = issue(database, relay, device_id, "--access", "guest", "--until", until, "--label", "sitter")
    owner, guest = Identity.generate(), Identity.generate()
    sealed = SealedDevice(tmp_path / "seal", device_id)
    sealed.pin_first_owner(owner.public)
    base = f"{relay.url}/api/devices/{device_id}/sealed"
    for token, identity in ((owner_token, owner), (guest_token, guest)):
        assert hand_over_keys(base, token, identity)[0] == 200
    bridge = Bridge(relay.url, device_id, robot_token, standin.url, sealed=sealed)
    task = asyncio.create_task(bridge.run())
    await bridge.client.wait_connected(timeout=30)
    await eventually(lambda: bridge.local_connected, timeout=30)
    now = int(time.time() * 1000)
    roster = Roster.make(device_id, 1, None, now, sealed.identity.public,
                         [Member(owner.public, "owner", True, None, "owner"), Member(guest.public, "guest", False, now + 3_600_000, "sitter")])
    assert await bridge.client.accept_roster(roster.signed(owner).to_json()) == 1
    apps = []
    for token, identity in ((owner_token, owner), (guest_token, guest)):
        apps.append(SealedApp(await app_socket(relay, device_id, token), identity, epoch_for(base, token, identity), sealed, device_id))
    yield bridge, apps[0], apps[1]
    for app in apps:
        await app.socket.close()
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass


async def test_the_robots_api_is_served_sealed_and_the_relay_reads_none_of_it(relay, database, device, standin, household):  # noqa: F811
    device_id, _, owner_token = device
    bridge, owner, guest = household
    marker = f"MARKER-{secrets.token_hex(8)}"
    status, body = await owner.request("GET", "/missions/available")
    assert status == 200 and "missions" in json.loads(body)
    status, body = await owner.request("POST", "/standin/echo", json.dumps({"note": marker}).encode())
    echoed = json.loads(body)
    assert status == 200 and echoed["method"] == "POST" and marker in echoed["body"]
    # Who asked, as the roster says it (the relay's token ids are not sealed).
    assert echoed["headers"]["x-wimz-access"] == "owner" and echoed["headers"]["x-wimz-member"] == owner.sealer.identity.kid
    # A body over one frame comes in parts, each sealed: answers, and requests up to the bridge's
    # limit (1 MiB); a larger one is refused by the robot.
    status, body = await owner.request("GET", "/standin/blob?size=100000")
    assert status == 200 and body == bytes(i % 251 for i in range(100_000))
    upload = marker.encode() + secrets.token_bytes(bridge.max_body - len(marker))
    status, body = await owner.request("PUT", "/standin/echo", upload)
    echoed = json.loads(body)
    assert status == 200 and (echoed["length"], echoed["sha256"]) == (len(upload), hashlib.sha256(upload).hexdigest())
    calls = len(standin.seen)
    status, body = await owner.request("PUT", "/standin/echo", upload + b"x")
    assert (status, json.loads(body)["error"]) == (413, "too_large") and len(standin.seen) == calls

    # A guest without control may read, and nothing else: the robot says so itself.
    assert (await guest.request("GET", "/mode"))[0] == 200
    calls = len(standin.seen)
    status, body = await guest.request("POST", "/mode", json.dumps({"mode": "coach"}).encode())
    assert (status, json.loads(body)["error"]) == (403, "forbidden") and len(standin.seen) == calls

    # Plain HTTP to a sealed robot is the relay's to refuse.
    status, refusal = http_json(f"{relay.url}/api/devices/{device_id}/robot/mode", owner_token)
    assert (status, refusal["error"]) == (409, "sealed_device")
    assert_marker_nowhere(marker, database, relay)
    assert not relay.memory_holds([marker.encode()])


async def test_the_local_control_socket_speaks_through_the_seal(standin, household):  # noqa: F811
    bridge, owner, _ = household
    marker = f"MARKER-{secrets.token_hex(8)}"
    # An app's command reaches the robot's own /ws/control opened; its answer goes back sealed.
    await owner.send({"type": "command", "id": "c1", "command": "set_mode", "data": {"mode": "coach", "note": marker}})
    answer = await owner.receive(lambda m: m.get("type") == "response" and m.get("id") == "c1")
    assert answer["ok"] and standin.commands[-1]["data"]["note"] == marker
    # The robot's events go sealed, with the kind the relay may see.
    await asyncio.to_thread(http_json, f"{standin.url}/standin/emit", None, method="POST", body={"event": "bark_detected"})
    event = await owner.receive(lambda m: m.get("type") == "event")
    assert event["event"] == "bark_detected"
    assert bridge.client.sealed is not None and bridge.client.sealed.rejected == {}


async def test_requests_in_parts_are_bounded(standin, household):  # noqa: F811
    """Parts the bridge keeps for requests not complete yet: 16 requests at once (the next gets
    503 ``busy``), a part that is not base64 ends its request with 400; a complete one still goes."""
    bridge, owner, _ = household
    for n in range(16):
        await owner.send({"type": "http_request", "id": f"open{n}", "method": "PUT", "path": "/standin/echo", "query": None,
                          "headers": {}, "body": base64.b64encode(b"x").decode(), "more": True})
    await owner.send({"type": "http_request", "id": "one-more", "method": "PUT", "path": "/standin/echo", "query": None,
                      "headers": {}, "body": None, "more": True})
    busy = await owner.receive(lambda m: m.get("type") == "http_response" and m.get("id") == "one-more")
    assert (busy["status"], json.loads(base64.b64decode(busy["body"]))["error"]) == (503, "busy")
    await owner.send({"type": "http_body", "id": "open0", "body": "not base64!", "more": False})
    bad = await owner.receive(lambda m: m.get("type") == "http_response" and m.get("id") == "open0")
    assert (bad["status"], json.loads(base64.b64decode(bad["body"]))["error"]) == (400, "bad_request")
    await owner.send({"type": "http_body", "id": "open1", "body": base64.b64encode(b"yz").decode(), "more": False})
    done = await owner.receive(lambda m: m.get("type") == "http_response" and m.get("id") == "open1")
    assert done["status"] == 200 and json.loads(base64.b64decode(done["body"]))["length"] == 3
