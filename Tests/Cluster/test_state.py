"""Last-known state across nodes (docs/protocol.md v1.2): what a robot last said is the same from
every node — while it is online on one of them, and after that node died."""

from __future__ import annotations

import asyncio
import json
import time

from websockets.asyncio.client import connect

from wimz_testkit import http_json


def state(node, device: str, token: str) -> dict:
    status, body = http_json(f"http://127.0.0.1:{node.port}/api/devices/{device}/state", token)
    assert status == 200, body
    return body


async def test_every_node_answers_the_same_state_even_after_the_robots_node_died(cluster):
    device = "state0000"
    robot_token, app_token = cluster.add_devices(1, prefix="state")[device]
    ws_url = cluster.haproxy.url.replace("http://", "ws://")
    robot = await connect(f"{ws_url}/ws/robot?device_id={device}", proxy=None,
                          additional_headers={"Authorization": f"Bearer {robot_token}"})
    await robot.send(json.dumps({"type": "event", "event": "audio_state",
                                 "data": {"playing": True, "track": "good_dog.mp3"}, "timestamp": "2026-11-24T06:00:00Z"}))
    await robot.send(json.dumps({"type": "event", "event": "mode_changed", "data": {"mode": "training"}}))
    await asyncio.sleep(1.5)  # the write-behind tick
    views = {name: state(node, device, app_token) for name, node in cluster.nodes.items() if node.running}
    for name, view in views.items():
        assert view["online"] is True, (name, view)
        assert view["events"]["audio_state"]["message"]["data"]["track"] == "good_dog.mp3", (name, view)
        assert view["events"]["mode_changed"]["message"]["data"]["mode"] == "training"
    # Which node holds the robot: the one whose presence says so.
    holder = http_json(f"{cluster.haproxy.url}/api/devices/{device}/status", app_token)[1]["nodes"][0]
    cluster.nodes[holder].kill()
    await robot.close()
    deadline = time.monotonic() + 15
    others = [node for name, node in cluster.nodes.items() if name != holder and node.running]
    while time.monotonic() < deadline and any(state(n, device, app_token)["online"] for n in others):
        await asyncio.sleep(0.2)
    for node in others:
        view = state(node, device, app_token)
        assert view["online"] is False and view["last_seen"], view
        assert view["events"]["audio_state"]["message"]["timestamp"] == "2026-11-24T06:00:00Z"
    cluster.nodes[holder].start()
    cluster.wait_balanced()
