"""RobotClient against the real relay: commands, events, reconnects, refusals."""

from __future__ import annotations

import asyncio
import json
import random

import pytest
from websockets.asyncio.client import connect

from wimz_robot import Backoff, RelayRefused, RobotClient


async def app_socket(relay, device_id: str, app_token: str):
    return await connect(f"ws://127.0.0.1:{relay.port}/ws/app?device_id={device_id}&token={app_token}",
                         compression=None, proxy=None)


async def next_message(ws, predicate, timeout: float = 5.0) -> dict:
    """The next JSON message from ``ws`` that satisfies ``predicate``."""
    async def find():
        while True:
            message = json.loads(await ws.recv())
            if predicate(message):
                return message
    return await asyncio.wait_for(find(), timeout)


def is_status(online: bool):
    return lambda m: m.get("event") == "device_status" and m["data"]["online"] is online


async def eventually(condition, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.05)


async def test_commands_are_answered_and_events_reach_the_app(relay, device):
    device_id, robot_token, app_token = device
    async with RobotClient(relay.url, device_id, robot_token) as client:
        @client.command("treat")
        async def treat(data):
            return {"dispensed": data["count"]}

        @client.command("fail")
        def fail(data):
            raise RuntimeError("hopper empty")

        await client.wait_connected(timeout=10)
        app = await app_socket(relay, device_id, app_token)
        await next_message(app, is_status(True))
        await eventually(lambda: client.apps == 1)

        assert await client.send_event("mission_progress", {"step": 2, "total": 5})
        event = await next_message(app, lambda m: m.get("event") == "mission_progress")
        assert event["type"] == "event" and event["data"] == {"step": 2, "total": 5}
        assert event["timestamp"].endswith("Z")

        await app.send(json.dumps({"type": "command", "id": "a-1", "command": "treat", "data": {"count": 2}}))
        response = await next_message(app, lambda m: m.get("type") == "response")
        assert response == {"type": "response", "id": "a-1", "ok": True, "data": {"dispensed": 2}}

        await app.send(json.dumps({"type": "command", "id": "a-2", "command": "fail"}))
        response = await next_message(app, lambda m: m.get("type") == "response")
        assert response["id"] == "a-2" and response["ok"] is False
        assert response["error"] == {"code": "command_failed", "message": "hopper empty"}

        await app.send(json.dumps({"type": "command", "id": "a-3", "command": "fly"}))
        response = await next_message(app, lambda m: m.get("type") == "response")
        assert response["ok"] is False and response["error"]["code"] == "unknown_command"
        await app.close()


async def test_other_app_messages_reach_on_message_handlers(relay, device):
    device_id, robot_token, app_token = device
    received: asyncio.Queue[dict] = asyncio.Queue()
    async with RobotClient(relay.url, device_id, robot_token) as client:
        client.on_message(received.put_nowait)
        await client.wait_connected(timeout=10)
        app = await app_socket(relay, device_id, app_token)
        await next_message(app, is_status(True))
        await app.send(json.dumps({"type": "webrtc_offer", "sdp": "v=0"}))
        while True:
            message = await asyncio.wait_for(received.get(), 5)
            if message.get("type") == "webrtc_offer":
                break
        assert message["sdp"] == "v=0"
        await app.close()


async def test_reconnects_after_the_relay_restarts(relay, device):
    device_id, robot_token, app_token = device
    async with RobotClient(relay.url, device_id, robot_token, backoff=Backoff(base=0.2, cap=1.0)) as client:
        await client.wait_connected(timeout=10)
        await asyncio.to_thread(relay.restart)  # SIGTERM: the relay closes with 1001
        await eventually(lambda: client.connections == 2 and client.connected, timeout=15)
        app = await app_socket(relay, device_id, app_token)
        await next_message(app, is_status(True))
        await app.close()
        assert client.refused is None


async def test_revocation_stops_reconnecting(relay, database, device):
    device_id, robot_token, _ = device
    async with RobotClient(relay.url, device_id, robot_token, backoff=Backoff(base=0.1, cap=0.2)) as client:
        await client.wait_connected(timeout=10)
        token_id = database.psql("SELECT id FROM tokens WHERE role = 'robot'")
        database.cli("token", "revoke", token_id)
        await eventually(lambda: client.refused is not None, timeout=5)
        assert client.refused.status == 4003
        await asyncio.sleep(1.0)  # several back-off periods: no new connection is attempted
        assert client.connections == 1 and not client.connected


async def test_a_bad_token_is_refused_without_retrying(relay, device):
    device_id, _, app_token = device
    client = RobotClient(relay.url, device_id, "wimz_r_" + "x" * 43, backoff=Backoff(base=0.05, cap=0.1))
    async with client:
        with pytest.raises(RelayRefused) as refused:
            await client.wait_connected(timeout=10)
        assert refused.value.status == 401
    # An app token is for the other role: 403.
    async with RobotClient(relay.url, device_id, app_token) as client:
        with pytest.raises(RelayRefused) as refused:
            await client.wait_connected(timeout=10)
        assert refused.value.status == 403
    def refusals() -> list[str]:
        return [line for line in relay.lines if '"path":"/ws/robot"' in line and '"status":40' in line]
    await eventually(lambda: len(refusals()) >= 2, timeout=3)
    await asyncio.sleep(0.5)
    assert len(refusals()) == 2, refusals()  # one attempt each: no retry after 401/403


def test_backoff_is_capped_full_jitter():
    backoff = Backoff(base=0.5, cap=8.0, slow_floor=5.0, slow_cap=60.0, rng=random.Random(7))
    delays = [backoff.next_delay() for _ in range(40)]
    assert all(0 <= d <= 8.0 for d in delays)
    assert max(delays[:2]) <= 1.0            # 0.5, then 1.0 at most
    assert len({round(d, 6) for d in delays}) == len(delays)  # jittered, not lock-step
    slow = [backoff.next_delay(slow=True) for _ in range(20)]
    assert all(5.0 <= d <= 60.0 for d in slow)
    backoff.reset()
    assert backoff.next_delay() <= 0.5


async def test_state_changes_and_new_credentials_reach_their_handlers(database, device):
    """on_state sees connecting → connected → disconnected → … → refused; on_turn_credentials
    gets each newer credential; after a reconnect the replayed state goes out before
    wait_connected returns (an app connecting right then gets it from the restarted relay)."""
    from wimz_testkit import RelayNode
    from wimz_robot import ConnectionState
    device_id, robot_token, app_token = device
    relay = RelayNode.started(database, env={"WIMZ_TURN_SECRET": "s3cret", "WIMZ_TURN_URLS": "turn:127.0.0.1:3478"})
    states: list[ConnectionState] = []
    credentials = []
    try:
        async with RobotClient(relay.url, device_id, robot_token, backoff=Backoff(base=0.05, cap=0.2)) as client:
            client.on_state(states.append)
            client.on_turn_credentials(credentials.append)
            await client.wait_connected(timeout=10)
            await eventually(lambda: len(credentials) == 1)  # the relay pushes one on connect
            assert await client.send_event("mode_changed", {"mode": "coach", "previous_mode": "idle", "locked": False})
            await asyncio.sleep(1.1)  # so the next push expires a second later (equal ones are not news)
            relay.restart()  # a new process: it has no replay until the robot sends it again
            await eventually(lambda: client.connections == 2)
            await client.wait_connected(timeout=10)
            app = await app_socket(relay, device_id, app_token)
            replayed = await next_message(app, lambda m: m.get("event") == "mode_changed")
            assert replayed["data"]["mode"] == "coach"
            await app.close()
            await eventually(lambda: len(credentials) == 2)
            assert credentials[1].expires_at >= credentials[0].expires_at
            database.cli("token", "revoke", database.psql(f"SELECT id FROM tokens WHERE device_id = '{device_id}' AND role = 'robot'"))
            await eventually(lambda: client.refused is not None)
            await eventually(lambda: states and states[-1].kind == "refused")
        kinds = [s.kind for s in states]
        assert kinds[:2] == ["connecting", "connected"] and "disconnected" in kinds, kinds
        assert states[-1] == ConnectionState("refused", 4003, states[-1].reason) and "revoked" in states[-1].reason
    finally:
        relay.stop()


async def test_messages_reach_handlers_in_order_one_at_a_time_and_a_full_inbox_drops_with_an_answer(relay, device):
    """A slow handler delays the next message, not the socket's reader (the relay's own events
    are read meanwhile); past the inbox, messages are dropped, counted, and a command among them
    is answered robot_busy at once."""
    device_id, robot_token, app_token = device
    async with RobotClient(relay.url, device_id, robot_token, inbox=5) as client:
        seen: list[int] = []
        running = 0
        release = asyncio.Event()

        @client.on_message
        async def slow(message):
            nonlocal running
            if message.get("type") != "event" or message.get("event") != "n":
                return
            running += 1
            assert running == 1, "one message at a time"
            await release.wait() if message["data"]["n"] == 0 else await asyncio.sleep(random.random() / 50)
            seen.append(message["data"]["n"])
            running -= 1

        await client.wait_connected(timeout=10)
        app = await app_socket(relay, device_id, app_token)
        await next_message(app, is_status(True))
        # The first handler waits; meanwhile the reader still takes the relay's app_presence.
        await eventually(lambda: client.apps == 1)
        for n in range(4):
            await app.send(json.dumps({"type": "event", "event": "n", "data": {"n": n}}))
        await eventually(lambda: running == 1)
        # Four queued behind the first (five in all, the inbox): the next ones are dropped, and a
        # command among them is answered at once.
        for n in range(4, 7):
            await app.send(json.dumps({"type": "event", "event": "n", "data": {"n": n}}))
        await app.send(json.dumps({"type": "command", "id": "c1", "command": "treat", "data": {}}))
        answer = await next_message(app, lambda m: m.get("type") == "response")
        assert answer["ok"] is False and answer["error"]["code"] == "robot_busy" and answer["id"] == "c1"
        assert client.dropped >= 2
        release.set()
        await eventually(lambda: len(seen) >= 5)
        assert seen == sorted(seen) and seen[:4] == [0, 1, 2, 3]
        await app.close()
