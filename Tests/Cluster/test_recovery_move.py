"""Missed-event recovery across a move between nodes (docs/protocol.md v1.1): an app drops while its
device is on one node, the device moves (a node returns and the balancer's hash sends it there),
and the app resumes on the new node with exactly what it missed — the hand-off carried the history."""

from __future__ import annotations

import asyncio
import json
import time

from websockets.asyncio.client import connect

DEVICES = 8
EVENTS = 20


async def next_message(ws, predicate, timeout: float = 10.0) -> dict:
    async def find():
        while True:
            message = json.loads(await ws.recv())
            if predicate(message):
                return message
    return await asyncio.wait_for(find(), timeout)


async def test_an_app_resumes_on_the_node_its_device_moved_to(cluster):
    devices = cluster.add_devices(DEVICES, prefix="move")
    ws_url = cluster.haproxy.url.replace("http://", "ws://")
    cluster.nodes["node2"].kill()
    deadline = time.monotonic() + 10
    while "node2" in {n["node_id"] for n in cluster.live_nodes()} and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    await asyncio.sleep(1.5)  # HAProxy marks node2 down (fall 2 × 500 ms)

    robots, marks = {}, {}
    for device, (robot_token, app_token) in devices.items():
        robots[device] = await connect(f"{ws_url}/ws/robot?device_id={device}", proxy=None,
                                       additional_headers={"Authorization": f"Bearer {robot_token}"})
        app = await connect(f"{ws_url}/ws/app?device_id={device}&token={app_token}&recover=1", proxy=None)
        status = (await next_message(app, lambda m: m.get("event") == "device_status"))["data"]
        marks[device] = (status["epoch"], status["seq"])
        await app.close()
    for device, robot in robots.items():
        for n in range(EVENTS):
            await robot.send(json.dumps({"type": "event", "event": "bark_detected", "data": {"device": device, "n": n}}))
    await asyncio.sleep(0.5)

    # node2 returns: the balancer hashes some devices to it again; the resume lands there, node2
    # claims the device, the old node closes its sockets (1012) and hands the history over.
    cluster.nodes["node2"].start()
    cluster.wait_balanced()
    for device, (_, app_token) in devices.items():
        epoch, seq = marks[device]
        app = await connect(f"{ws_url}/ws/app?device_id={device}&token={app_token}&since={epoch}:{seq}", proxy=None)
        status = (await next_message(app, lambda m: m.get("event") == "device_status"))["data"]
        assert status["recovered"] is True and status["epoch"] == epoch, (device, status)
        # (past any timeline notice: v1.6 keeps barks and tells connected apps once they are stored)
        missed = [await next_message(app, lambda m: m.get("type") != "timeline") for _ in range(EVENTS)]
        assert [m["seq"] for m in missed] == list(range(seq + 1, seq + EVENTS + 1)), device
        assert [m["data"]["n"] for m in missed] == list(range(EVENTS)) and all(m["data"]["device"] == device for m in missed)
        await app.close()
    # Devices that moved: their robot socket on the old node was told 1012.
    await asyncio.sleep(0.5)
    moved = [d for d, robot in robots.items() if robot.close_code == 1012]
    assert moved, f"no device moved to the returning node: the test proved nothing {[r.close_code for r in robots.values()]} {[cluster.admin(f'devices/{d}/presence')[1] for d in devices]}"
    for robot in robots.values():
        await robot.close()
