"""Push in a cluster (docs/protocol.md v1.2 "Push notifications"): three nodes behind
HAProxy, one APNs stand-in. A robot's events are pushed once, by the node that serves it; its
robot_offline is pushed once even when that node is killed, by a node that noticed."""

from __future__ import annotations

import asyncio
import json
import secrets

import pytest
from websockets.asyncio.client import connect

from wimz_testkit import Cluster, http_json


@pytest.fixture(scope="module")
def cluster(apns):
    c = Cluster(3, node_env={**apns.relay_env, "WIMZ_PUSH_INTERVAL": "2", "WIMZ_PUSH_OFFLINE_AFTER": "2"})
    yield c
    c.close()


async def connect_robots(cluster, devices: dict) -> dict:
    """Each device's robot, connected through HAProxy."""
    ws_url = cluster.haproxy.url.replace("http://", "ws://")
    return {device: await connect(f"{ws_url}/ws/robot?device_id={device}", proxy=None,
                                  additional_headers={"Authorization": f"Bearer {robot_token}"})
            for device, (robot_token, _) in devices.items()}


def node_of_the_first(cluster, devices: dict) -> tuple[str, list[str]]:
    """The node serving the first of ``devices``, and every one of them it serves."""
    def nodes(device: str) -> list[str]:
        return http_json(f"{cluster.haproxy.url}/api/devices/{device}/status", devices[device][1])[1]["nodes"]
    victim = nodes(next(iter(devices)))[0]
    return victim, [d for d in devices if nodes(d) == [victim]]


async def test_each_push_is_sent_once_and_robot_offline_survives_its_node(cluster, apns):
    devices = cluster.add_devices(4, prefix="pushc")
    phones = {device: secrets.token_hex(32) for device in devices}
    for device, (_, app_token) in devices.items():
        status, _ = http_json(f"{cluster.haproxy.url}/api/devices/{device}/push", app_token, "PUT",
                              {"platform": "apns", "token": phones[device], "environment": "production",
                               "events": ["bark_detected", "robot_offline"]})
        assert status == 200
    await asyncio.sleep(0.5)
    robots = await connect_robots(cluster, devices)
    for device, robot in robots.items():
        for n in range(3):
            await robot.send(json.dumps({"type": "event", "event": "bark_detected", "data": {"dog_name": "Rex", "n": n}}))
    apns.wait_for(lambda seen: all(sum(r.body["wimz"]["count"] for r in seen if r.token == phones[d] and r.answered == 200
                                       and r.body["wimz"]["event"] == "bark_detected") == 3 for d in devices), timeout=15)
    await asyncio.sleep(2.5)
    for device in devices:
        barks = [r.body["wimz"]["count"] for r in apns.delivered(phones[device]) if r.body["wimz"]["event"] == "bark_detected"]
        assert barks == [1, 2], (device, barks)  # once, not once per node

    # Kill the node that holds the first device; its robots are gone with it.
    victim, on_victim = node_of_the_first(cluster, devices)
    cluster.nodes[victim].kill()
    for device in on_victim:
        await robots[device].close()
    # Its lease runs out (3 s), a live node records the departure, and 2 s later robot_offline goes out.
    apns.wait_for(lambda seen: all(any(r.token == phones[d] and r.body["wimz"]["event"] == "robot_offline" and r.answered == 200
                                       for r in seen) for d in on_victim), timeout=20)
    await asyncio.sleep(3)
    for device in on_victim:
        offline = [r for r in apns.delivered(phones[device]) if r.body["wimz"]["event"] == "robot_offline"]
        assert len(offline) == 1, (device, len(offline))
    for device, robot in robots.items():
        if device not in on_victim:
            await robot.close()
    cluster.nodes[victim].start()
    cluster.wait_balanced()


async def test_live_activity_requests_are_sent_once_and_a_dead_nodes_run_is_ended_once(cluster, apns):
    """docs/protocol.md v1.4 in a cluster: each Live Activity request is sent once, by the node
    that serves the device; a run whose robot died with its node is ended once, by a live node."""
    devices = cluster.add_devices(4, prefix="livec")
    phones = {device: secrets.token_hex(32) for device in devices}
    for device, (_, app_token) in devices.items():
        assert http_json(f"{cluster.haproxy.url}/api/devices/{device}/live-activity/activities/run-1", app_token, "PUT",
                         {"token": phones[device], "environment": "production"})[0] == 200
    await asyncio.sleep(0.5)
    robots = await connect_robots(cluster, devices)

    def live(device):
        return [r for r in list(apns.received) if r.token == phones[device] and r.headers.get("apns-push-type") == "liveactivity"]

    for status in ("waiting_for_dog", "watching", "success"):
        for device, robot in robots.items():
            await robot.send(json.dumps({"type": "event", "event": "mission_progress",
                                         "data": {"status": status, "trick": "sit", "dog_name": "Rex"}}))
        await asyncio.sleep(0.3)
    apns.wait_for(lambda seen: all(len(live(d)) >= 3 for d in devices), timeout=15)
    await asyncio.sleep(1.5)
    for device in devices:
        statuses = [r.body["aps"]["content-state"]["status"] for r in live(device)]
        assert statuses == ["waiting_for_dog", "watching", "success"], (device, statuses)  # once, not once per node

    # The node serving the first device dies with its robots mid-run: a live node ends each run
    # once (robot_online false), when the robot has been gone WIMZ_PUSH_OFFLINE_AFTER.
    victim, on_victim = node_of_the_first(cluster, devices)
    await asyncio.sleep(1.2)  # the runs are written behind (once a second) before the node dies
    cluster.nodes[victim].kill()
    for device in on_victim:
        await robots[device].close()
    apns.wait_for(lambda seen: all(any(r.body["aps"]["event"] == "end" for r in live(d)) for d in on_victim), timeout=20)
    await asyncio.sleep(3)
    for device in on_victim:
        ends = [r for r in live(device) if r.body["aps"]["event"] == "end"]
        assert len(ends) == 1 and ends[0].body["aps"]["content-state"]["robot_online"] is False, (device, len(ends))
    for device, robot in robots.items():
        if device not in on_victim:
            await robot.close()
    cluster.nodes[victim].start()
    cluster.wait_balanced()
