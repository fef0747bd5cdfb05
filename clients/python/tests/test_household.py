"""The household from the robot's side (docs/protocol.md v1.3): who sent each command and message
(``senders=True``), what the bridge tells the robot's own API, and the access levels in
``app_tokens()``."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

from wimz_robot import RobotClient, Sender

from test_robot_client import app_socket, eventually, next_message


def guest_token(database, device_id: str, control: bool) -> tuple[str, int]:
    until = (datetime.now(timezone.utc) + timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    out = database.cli("token", "issue", "--device", device_id, "--role", "app", "--label", "sitter", "--access", "guest",
                       "--until", until, *(["--control"] if control else [])).strip().splitlines()
    token_id = int(out[0].split("token ")[1].split()[0])
    return out[-1], token_id


async def test_commands_and_messages_say_who_sent_them(relay, database, device):
    device_id, robot_token, owner_token = device
    driver, driver_id = guest_token(database, device_id, control=True)
    for node in database.nodes:
        node.wait_known(device_id, driver)
    seen: list[tuple[str, Sender | None]] = []
    async with RobotClient(relay.url, device_id, robot_token, senders=True) as client:
        @client.command("treat")
        def treat(data, sender):
            seen.append(("treat", sender))
            return {"by": sender.access if sender else None}

        client.on_message(lambda message: seen.append((message.get("type", ""), Sender.of(message))))
        await client.wait_connected(timeout=10)
        app = await app_socket(relay, device_id, driver)
        await app.send(json.dumps({"type": "command", "id": "1", "command": "treat"}))
        response = await next_message(app, lambda m: m.get("type") == "response")
        assert response["data"] == {"by": "guest"}
        await app.send(json.dumps({"type": "signal", "sdp": "offer"}))
        await eventually(lambda: any(kind == "signal" for kind, _ in seen))
        assert ("treat", Sender(driver_id, "guest", True)) in seen
        assert ("signal", Sender(driver_id, "guest", True)) in seen
        tokens = {t.id: t for t in await client.app_tokens()}
        assert tokens[driver_id].access == "guest" and tokens[driver_id].control is True and tokens[driver_id].until
        assert any(t.access == "owner" and t.until is None for t in tokens.values())
        await app.close()


def test_a_sender_is_read_only_from_the_relays_member():
    assert Sender.of({"type": "signal"}) is None
    assert Sender.of({"from": {"token_id": "7", "access": "guest", "control": False}}) is None
    assert Sender.of({"from": {"token_id": 7, "access": "root", "control": False}}) is None
    sender = Sender.of({"from": {"token_id": 7, "access": "family", "control": True}})
    assert sender == Sender(7, "family", True)
    assert sender.headers() == {"X-Wimz-Member": "7", "X-Wimz-Access": "family", "X-Wimz-Control": "true"}
