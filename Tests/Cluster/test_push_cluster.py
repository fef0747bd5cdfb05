"""Push in a cluster (PROTOCOL.md v1.2 "In a cluster each push is sent once"): three nodes behind
HAProxy, one APNs stand-in. A robot's events are pushed once, by the node that serves it; its
robot_offline is pushed once even when that node is killed, by a node that noticed."""

from __future__ import annotations

import asyncio
import json
import secrets
import tempfile
import time
from pathlib import Path

import pytest
from websockets.asyncio.client import connect

from apns_standin import APNsStandIn, new_p256_key
from wimz_testkit import Cluster, http_json, self_signed


@pytest.fixture(scope="module")
def apns():
    directory = Path(tempfile.mkdtemp(prefix="wimz-apns-cluster-"))
    cert, key = self_signed(directory, ("127.0.0.1",))
    key_path, private = new_p256_key(directory)
    standin = APNsStandIn(public_key=private.public_key(), key_id="KEYCLUSTER", team_id="TEAMCLUSTR",
                          topic="com.wimzai.app", cert=cert, key=key).start()
    standin.key_path, standin.ca = key_path, cert
    yield standin
    standin.stop()


@pytest.fixture(scope="module")
def cluster(apns):
    c = Cluster(3, node_env={"WIMZ_APNS_KEY_FILE": str(apns.key_path), "WIMZ_APNS_KEY_ID": apns.key_id,
                             "WIMZ_APNS_TEAM_ID": apns.team_id, "WIMZ_APNS_TOPIC": apns.topic,
                             "WIMZ_APNS_URL": apns.url, "WIMZ_APNS_SANDBOX_URL": apns.url, "WIMZ_APNS_CA_FILE": str(apns.ca),
                             "WIMZ_PUSH_INTERVAL": "2", "WIMZ_PUSH_OFFLINE_AFTER": "2"})
    yield c
    c.close()


async def test_each_push_is_sent_once_and_robot_offline_survives_its_node(cluster, apns):
    devices = cluster.add_devices(4, prefix="pushc")
    phones = {device: secrets.token_hex(32) for device in devices}
    for device, (_, app_token) in devices.items():
        status, _ = http_json(f"{cluster.haproxy.url}/api/devices/{device}/push", app_token, "PUT",
                              {"platform": "apns", "token": phones[device], "environment": "production",
                               "events": ["bark_detected", "robot_offline"]})
        assert status == 200
    await asyncio.sleep(0.5)
    ws_url = cluster.haproxy.url.replace("http://", "ws://")
    robots = {}
    for device, (robot_token, _) in devices.items():
        robots[device] = await connect(f"{ws_url}/ws/robot?device_id={device}", proxy=None,
                                       additional_headers={"Authorization": f"Bearer {robot_token}"})
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
    victim = http_json(f"{cluster.haproxy.url}/api/devices/{next(iter(devices))}/status", devices[next(iter(devices))][1])[1]["nodes"][0]
    on_victim = [d for d in devices
                 if http_json(f"{cluster.haproxy.url}/api/devices/{d}/status", devices[d][1])[1]["nodes"] == [victim]]
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
