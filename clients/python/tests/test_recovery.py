"""Missed-event recovery against the real relay (docs/protocol.md v1.1 "Recovering missed events"): an app that
drops and resumes with since=E:N gets exactly what it missed, in order, then the live stream."""

from __future__ import annotations

import asyncio
import json

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from wimz_testkit import RelayNode
from test_robot_client import next_message


async def robot_socket(relay, device_id: str, token: str):
    ws = await connect(f"ws://127.0.0.1:{relay.port}/ws/robot?device_id={device_id}", proxy=None, compression=None,
                       additional_headers={"Authorization": f"Bearer {token}"})
    await next_message(ws, lambda m: m.get("event") == "app_presence")
    return ws


async def app_socket(relay, device_id: str, token: str, query: str = ""):
    return await connect(f"ws://127.0.0.1:{relay.port}/ws/app?device_id={device_id}&token={token}{query}",
                         proxy=None, compression=None)


async def status_of(app) -> dict:
    return (await next_message(app, lambda m: m.get("event") == "device_status"))["data"]


async def next_frame(ws) -> str:
    """The next frame from ``ws``, its exact text, past the relay's timeline notices (v1.6): barks and
    modes are kept, and a notice goes out once they are stored, whenever that is."""
    while True:
        raw = await asyncio.wait_for(ws.recv(), 5.0)
        if not raw.startswith('{"type":"timeline",'):
            return raw


def bark(n: int) -> str:
    return json.dumps({"type": "event", "event": "bark_detected", "data": {"n": n, "loudness_db": 70.0 + n}})


async def test_an_app_that_drops_gets_exactly_the_events_it_missed_then_live(relay, device):
    device_id, robot_token, app_token = device
    robot = await robot_socket(relay, device_id, robot_token)
    v1 = await app_socket(relay, device_id, app_token)
    assert "epoch" not in await status_of(v1)
    app = await app_socket(relay, device_id, app_token, "&recover=1")
    status = await status_of(app)
    epoch, seq = status["epoch"], status["seq"]
    await robot.send(bark(0))
    first = json.loads(await next_frame(app))
    assert list(first)[0] == "seq" and first["seq"] == seq + 1
    assert await next_frame(v1) == bark(0), "apps that don't ask see v1 bytes"
    await app.close()
    for n in range(1, 51):
        await robot.send(bark(n))
    for n in range(1, 51):
        assert await next_frame(v1) == bark(n)
    back = await app_socket(relay, device_id, app_token, f"&since={epoch}:{first['seq']}")
    status = await status_of(back)
    assert status["recovered"] is True and status["epoch"] == epoch and status["seq"] == first["seq"] + 50
    missed = [json.loads(await next_frame(back)) for _ in range(50)]
    assert [m["seq"] for m in missed] == list(range(first["seq"] + 1, first["seq"] + 51))
    assert [m["data"]["n"] for m in missed] == list(range(1, 51))
    await robot.send(bark(51))
    live = json.loads(await next_frame(back))
    assert live["seq"] == first["seq"] + 51 and live["data"]["n"] == 51
    # The numbered copy is the robot's bytes with "seq" put first.
    await robot.send('{"type":"event","event":"x", "data" : {"a":1}}')
    raw = await next_frame(back)
    assert raw == '{"seq":%d,"type":"event","event":"x", "data" : {"a":1}}' % (first["seq"] + 52)
    for ws in (robot, v1, back):
        await ws.close()


async def test_over_the_buffer_and_after_a_crash_the_app_gets_the_replay(database, device):
    device_id, robot_token, app_token = device
    relay = RelayNode.started(database, env={"WIMZ_RECOVERY_MESSAGES": "10"})
    try:
        robot = await robot_socket(relay, device_id, robot_token)
        app = await app_socket(relay, device_id, app_token, "&recover=1")
        epoch = (await status_of(app))["epoch"]
        await app.close()
        await robot.send(json.dumps({"type": "event", "event": "mode_changed", "data": {"mode": "coach", "locked": False}}))
        for n in range(20):
            await robot.send(bark(n))
        back = await app_socket(relay, device_id, app_token, f"&since={epoch}:0")
        status = await status_of(back)
        assert status["recovered"] is False
        replayed = json.loads(await next_frame(back))
        assert replayed["event"] == "mode_changed" and replayed["seq"] == 1, "the v1 replay instead, numbered"
        await back.close()
        await robot.close()

        # A crash loses the history: the restarted relay numbers in a new epoch.
        relay.process.kill()
        relay.process.wait()
        relay.start()
        robot = await robot_socket(relay, device_id, robot_token)
        again = await app_socket(relay, device_id, app_token, f"&since={epoch}:21")
        status = await status_of(again)
        assert status["recovered"] is False and status["epoch"] != epoch and status["seq"] == 0
        await again.close()
        await robot.close()
    finally:
        relay.stop()


@pytest.mark.parametrize("query", ["&since=nocolon", "&since=e:x", "&recover=yes", "&since=a:1&since=a:2"])
async def test_a_malformed_since_or_recover_is_400(relay, device, query):
    device_id, _, app_token = device
    with pytest.raises(InvalidStatus) as refused:
        await app_socket(relay, device_id, app_token, query)
    assert refused.value.response.status_code == 400
