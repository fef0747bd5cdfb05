"""The robot's settings through the real relay (docs/protocol.md v1.6): ``@client.settings`` gets
the desired document when the robot connects and on each change, and what it returns is stored as
reported; on a sealed device the document goes both ways sealed, an old one is never applied as a
new one, and the relay stores and logs nothing it could read."""

from __future__ import annotations

import json
import secrets
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from wimz_robot import RobotClient
from wimz_robot.sealed import Identity, Sender

from test_robot_client import eventually
from test_sealed_robot import assert_marker_nowhere, one_owner_household, open_from_robot


def write(relay_url: str, device_id: str, token: str, doc: dict[str, Any], read: int) -> dict[str, Any]:
    """PUT the desired settings, naming version ``read``; the answer's body."""
    request = urllib.request.Request(f"{relay_url}/api/devices/{device_id}/settings", data=json.dumps(doc).encode(), method="PUT",
                                     headers={"Authorization": f"Bearer {token}", "If-Match": f'"{read}"',
                                              "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=5) as response:
        return dict(json.loads(response.read()))


def reported(relay_url: str, device_id: str, token: str) -> dict[str, Any] | None:
    request = urllib.request.Request(f"{relay_url}/api/devices/{device_id}/settings", headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=5) as response:
        return json.loads(response.read())["reported"]  # type: ignore[no-any-return]


async def test_the_handler_gets_desired_and_what_it_runs_is_reported(relay, device) -> None:
    device_id, robot_token, app_token = device
    # Written while the robot is away: it gets it when it connects.
    assert write(relay.url, device_id, app_token, {"volume": 0.9, "treat_limit": 5}, 0)["version"] == 1
    asked: list[dict[str, Any]] = []
    async with RobotClient(relay.url, device_id, robot_token) as client:
        @client.settings
        def apply(doc: dict[str, Any]) -> dict[str, Any]:
            asked.append(doc)
            return {**doc, "volume": min(doc["volume"], 0.8)}  # a value it refuses is capped

        await eventually(lambda: (reported(relay.url, device_id, app_token) or {}).get("version") == 1)
        assert reported(relay.url, device_id, app_token)["doc"] == {"volume": 0.8, "treat_limit": 5}  # type: ignore[index]
        write(relay.url, device_id, app_token, {"volume": 0.3}, 1)
        await eventually(lambda: (reported(relay.url, device_id, app_token) or {}).get("version") == 2)
        assert reported(relay.url, device_id, app_token)["doc"] == {"volume": 0.3}  # type: ignore[index]
    assert asked == [{"volume": 0.9, "treat_limit": 5}, {"volume": 0.3}]


def sealed_settings(owner: Identity, device_id: str, epoch: Any, version: int, doc: dict[str, Any]) -> dict[str, Any]:
    """An owner's app's sealed document: the settings frame for ``version`` inside, kind settings."""
    inner = json.dumps({"type": "settings", "version": version, "doc": doc}).encode()
    return Sender(owner, device_id).seal(epoch, inner, "settings")


async def test_sealed_settings_go_both_ways_sealed_and_an_old_one_is_not_applied_again(relay, database, device, tmp_path: Path) -> None:
    device_id, _, owner_token = device
    marker = "quiet-" + secrets.token_hex(6)
    owner = Identity.generate()
    async with one_owner_household(relay.url, device, tmp_path, owner=owner) as (client, epoch):
        asked: list[dict[str, Any]] = []

        @client.settings
        async def apply(doc: dict[str, Any]) -> None:
            asked.append(doc)

        first = sealed_settings(owner, device_id, epoch, 1, {"night": marker})
        # A plain document is refused for a sealed device.
        try:
            write(relay.url, device_id, owner_token, {"night": marker}, 0)
            raise AssertionError("a plain document was accepted")
        except urllib.error.HTTPError as error:
            assert error.code == 409 and json.loads(error.read())["error"] == "sealed_device"
        assert write(relay.url, device_id, owner_token, first, 0)["version"] == 1
        await eventually(lambda: (reported(relay.url, device_id, owner_token) or {}).get("version") == 1)
        answer = reported(relay.url, device_id, owner_token)
        assert answer is not None and answer["doc"]["type"] == "sealed" and answer["doc"]["kind"] == "settings"
        opened = open_from_robot(epoch, client.sealed.identity.public, device_id, answer["doc"])  # type: ignore[union-attr]
        assert opened == {"type": "settings_applied", "version": 1, "doc": {"night": marker}}
        # The relay replays the first document as version 2: the robot applies nothing.
        write(relay.url, device_id, owner_token, first, 1)
        await eventually(lambda: client.sealed is not None and client.sealed.rejected.get("replayed", 0) == 1)
        write(relay.url, device_id, owner_token, sealed_settings(owner, device_id, epoch, 3, {"night": "late"}), 2)
        await eventually(lambda: (reported(relay.url, device_id, owner_token) or {}).get("version") == 3)
        assert asked == [{"night": marker}, {"night": "late"}]
        assert client.sealed is not None and client.sealed.settings_version == 3
    assert_marker_nowhere(marker, database, relay)
