"""Several nodes behind a real HAProxy (issue 9): after a node is killed, restarted, added,
and after a rolling restart of every node, each device's fresh app sees its robot and gets a
command answered within 5 s; presence is right through the balancer; revocation, disable and
TURN secret rotation reach every node within 1 s; no audit event of a gracefully stopped node
is lost."""

from __future__ import annotations

import asyncio
import json
import time

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from fleet import Fleet, check_all
from turn_probe import turn_password
from wimz_testkit import http_json

DEVICES = 60


async def assert_whole(cluster, devices, step: str) -> None:
    results = await check_all(cluster.haproxy.url, devices, timeout=5.0)
    failed = [r for r in results if not r["ok"]]
    assert not failed, f"{step}: {len(failed)} of {len(results)} devices not whole within 5 s, e.g. {failed[:3]}"
    assert all(r["replayed"] for r in results), f"{step}: the replayed mode_changed event went missing"


def presence(cluster, devices) -> dict[str, dict]:
    return {d: http_json(f"{cluster.haproxy.url}/api/devices/{d}/status", tokens[1])[1] for d, tokens in devices.items()}


def wait_until(predicate, timeout: float, step: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"{step}: not within {timeout} s")


def split_devices(cluster) -> int:
    return int(cluster.cli("cluster", "status").strip().splitlines()[-1].split(", ")[1].split()[0])


async def test_devices_stay_whole_through_kill_restart_scale_out_and_rolling_restart(cluster):
    devices = cluster.add_devices(DEVICES, prefix="life")
    mark = int(cluster.psql("SELECT coalesce(max(id), 0) FROM audit_log"))
    fleet = Fleet(cluster.haproxy.url, devices)
    await fleet.start()
    try:
        await assert_whole(cluster, devices, "three nodes up")
        # Presence is written in 100 ms batches, and a device that moved while the fleet
        # connected is offline in it between the old node's row and the new one's.
        wait_until(lambda: all(v["online"] for v in presence(cluster, devices).values()), 3, "every device online in presence")
        views = presence(cluster, devices)
        assert all(v["online"] and v["scope"] == "cluster" for v in views.values()), views

        cluster.nodes["node2"].kill()
        # The killed node's lease (3 s here) runs out and its presence goes with it.
        wait_until(lambda: "node2" not in {n["node_id"] for n in cluster.live_nodes()}, 5, "node2's lease expiry")
        await assert_whole(cluster, devices, "node2 killed")

        cluster.nodes["node2"].start()
        cluster.wait_balanced()
        await assert_whole(cluster, devices, "node2 restarted")
        wait_until(lambda: split_devices(cluster) == 0, 3, "no device split after node2 returned")

        cluster.add_node()
        await assert_whole(cluster, devices, "node4 added")
        assert len(cluster.live_nodes()) == 4

        for name, node in list(cluster.nodes.items()):
            seconds = node.stop()
            assert seconds < 8, f"{name} took {seconds:.1f} s to drain and exit"
            assert node.process.returncode == 0, node.lines[-20:]
            await assert_whole(cluster, devices, f"{name} stopped (rolling)")
            node.start()
            cluster.wait_balanced()
            await assert_whole(cluster, devices, f"{name} back (rolling)")

        wait_until(lambda: split_devices(cluster) == 0, 3, "no device split after the roll")
        wait_until(lambda: all(v["online"] and len(v["nodes"]) == 1 for v in presence(cluster, devices).values()), 3,
                   "every device online on one node in presence")
        views = presence(cluster, devices)
        assert all(v["online"] and len(v["nodes"]) == 1 for v in views.values()), views
        listed = {d["id"]: d["online"] for d in cluster.admin("devices")[1]["devices"]}
        assert all(listed[d] for d in devices)
    finally:
        await fleet.stop()

    # Every socket opened since the mark on a node that stopped gracefully has its disconnect
    # event (node2's killed life may not: SIGKILL takes its in-memory queue with it).
    await asyncio.sleep(1.5)
    rows = cluster.psql(
        f"""SELECT details->>'node', details->>'connection', event FROM audit_log
            WHERE id > {mark} AND event IN ('robot_connected', 'robot_disconnected', 'app_connected', 'app_disconnected')""")
    opened: dict[tuple, int] = {}
    closed: dict[tuple, int] = {}
    for line in rows.splitlines():
        node, connection, event = line.split("|")
        key = (node, connection, event.split("_")[0])
        (opened if event.endswith("_connected") else closed)[key] = 1 + (opened if event.endswith("_connected") else closed).get(key, 0)
    missing = [k for k, n in opened.items() if closed.get(k, 0) < n and k[0] != "node2"]
    assert len(opened) > 2 * DEVICES and not missing, f"{len(missing)} disconnects missing, e.g. {missing[:5]}"


async def robot_socket(cluster, device: str, token: str):
    url = cluster.haproxy.url.replace("http://", "ws://") + f"/ws/robot?device_id={device}"
    ws = await connect(url, additional_headers={"Authorization": f"Bearer {token}"}, compression=None, proxy=None)
    return ws


def other_node(cluster, device: str, token: str):
    holder = http_json(f"{cluster.haproxy.url}/api/devices/{device}/status", token)[1]["nodes"]
    assert len(holder) == 1, holder
    return next(n for n in cluster.nodes.values() if n.running and n.name != holder[0])


async def closed_within(ws, seconds: float) -> tuple[int | None, float]:
    started = time.monotonic()
    try:
        while True:
            await asyncio.wait_for(ws.recv(), seconds)
    except ConnectionClosed:
        return ws.close_code, time.monotonic() - started
    except asyncio.TimeoutError:
        return None, seconds


async def wait_presence(cluster, device, token) -> None:
    """Until every node (asked directly) reports the device online on one node: presence
    batches are written every 100 ms, so this takes a fraction of a second."""
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        views = [http_json(f"{n.url}/api/devices/{device}/status", token)[1] for n in cluster.nodes.values() if n.running]
        if all(v.get("online") and len(v.get("nodes", [])) == 1 for v in views):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{device} not online on one node in every node's view within 3 s")


async def test_revocation_on_one_node_closes_the_socket_on_another_within_a_second(cluster):
    device, (robot_token, app_token) = next(iter(cluster.add_devices(1, prefix="revoke").items()))
    ws = await robot_socket(cluster, device, robot_token)
    await wait_presence(cluster, device, app_token)
    elsewhere = other_node(cluster, device, app_token)
    token_id = next(t["id"] for t in cluster.admin(f"tokens?device_id={device}")[1]["tokens"] if t["role"] == "robot")
    status, _ = http_json(f"{elsewhere.url}/admin/tokens/{token_id}/revoke", cluster.admin_token, "POST", {})
    assert status == 200
    code, seconds = await closed_within(ws, 1.0)
    assert code == 4003, f"robot socket not closed with 4003 within 1 s (got {code})"


async def test_disable_on_one_node_closes_the_socket_on_another_within_a_second(cluster):
    device, (robot_token, app_token) = next(iter(cluster.add_devices(1, prefix="disable").items()))
    ws = await robot_socket(cluster, device, robot_token)
    await wait_presence(cluster, device, app_token)
    elsewhere = other_node(cluster, device, app_token)
    status, _ = http_json(f"{elsewhere.url}/admin/devices/{device}/disable", cluster.admin_token, "POST", {})
    assert status == 200
    code, seconds = await closed_within(ws, 1.0)
    assert code == 4003, f"robot socket not closed with 4003 within 1 s (got {code})"


def test_turn_secret_rotation_reaches_every_node_within_a_second(cluster):
    device, (robot_token, _) = next(iter(cluster.add_devices(1, prefix="rotate").items()))
    status, _ = http_json(f"{cluster.nodes['node1'].url}/admin/turn-secrets/rotate", cluster.admin_token, "POST", {})
    assert status == 201
    rotated = time.monotonic()
    secret = cluster.psql("SELECT value FROM turn_secret WHERE realm = 'wimz' ORDER BY id DESC LIMIT 1")
    for node in cluster.nodes.values():
        while True:
            status, body = http_json(f"{node.url}/api/turn/credentials", robot_token)
            assert status == 200, body
            expected = turn_password(secret, body["username"])
            if body["credential"] == expected:
                break
            assert time.monotonic() - rotated < 1.0, f"{node.name} still signs with the old secret after 1 s"
            time.sleep(0.05)


async def test_a_code_minted_on_one_node_pairs_on_another_and_the_robot_revokes_everywhere(cluster):
    """Pairing across nodes (docs/protocol.md v1.1): the code lives in the database, the new token
    works on every node, and the robot's revocation closes the app's socket within a second."""
    device, (robot_token, _) = next(iter(cluster.add_devices(1, prefix="pair").items()))
    robot = await robot_socket(cluster, device, robot_token)
    nodes = [n for n in cluster.nodes.values() if n.running]
    status, minted = http_json(f"{nodes[0].url}/api/devices/{device}/pairing-codes", robot_token, "POST", {})
    assert status == 201, minted
    status, paired = http_json(f"{nodes[1].url}/api/pairing", None, "POST", {"code": minted["code"], "label": "phone"})
    assert status == 201 and paired["device_id"] == device, paired
    # The new token opens an app socket through the balancer (wherever the device is).
    url = cluster.haproxy.url.replace("http://", "ws://") + f"/ws/app?device_id={device}&token={paired['token']}"
    app = await connect(url, compression=None, proxy=None)
    assert json.loads(await app.recv())["event"] == "device_status"
    # Single use on every node.
    assert http_json(f"{nodes[2].url}/api/pairing", None, "POST", {"code": minted["code"]})[0] == 404
    # The robot revokes through another node than the one holding the socket.
    elsewhere = other_node(cluster, device, robot_token)
    status, _ = http_json(f"{elsewhere.url}/api/devices/{device}/app-tokens/{paired['token_id']}", robot_token, "DELETE")
    assert status == 200
    code, _ = await closed_within(app, 1.0)
    assert code == 4003, f"app socket not closed with 4003 within 1 s (got {code})"
    await robot.close()
