"""HTTP to the robot through the real HAProxy and three relay nodes: requests for a device reach
the node that holds its robot's socket (one hash key for both), also after a node returns, and
the balancer keeps an app's connection alive across requests while each node closes per request."""

from __future__ import annotations

import asyncio
import json
import socket
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

from wimz_robot.bridge import Bridge
from wimz_robot.standin import serve

DEVICES = 12
#: The test's blocking HTTP calls get threads of their own (the default executor is small).
POOL = ThreadPoolExecutor(max_workers=DEVICES + 4)


def get(url: str, token: str) -> tuple[int, dict]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=20) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


async def all_answer(cluster, devices, timeout: float) -> list[tuple[str, int, dict]]:
    """Every device's GET /mode through the balancer until all are 200 (or the time is up)."""
    deadline = time.monotonic() + timeout
    while True:
        loop = asyncio.get_running_loop()
        results = await asyncio.gather(*(loop.run_in_executor(POOL, get, f"{cluster.haproxy.url}/api/devices/{d}/robot/mode", t[1])
                                         for d, t in devices.items()))
        failed = [(d, s, b) for d, (s, b) in zip(devices, results) if s != 200]
        if not failed or time.monotonic() > deadline:
            return failed
        await asyncio.sleep(0.2)


def keep_alive_requests(port: int, path: str, token: str, count: int) -> list[int]:
    """`count` requests one after another over one client connection; their statuses."""
    statuses = []
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        reader = s.makefile("rb")
        for _ in range(count):
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: api\r\nAuthorization: Bearer {token}\r\n\r\n".encode())
            status_line = reader.readline()
            headers = {}
            while (line := reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode().partition(":")
                headers[name.strip().lower()] = value.strip()
            reader.read(int(headers.get("content-length", "0")))
            assert headers.get("connection", "").lower() != "close", headers
            statuses.append(int(status_line.split()[1]))
    return statuses


async def test_robot_http_reaches_the_robots_node_through_the_balancer_and_after_a_node_returns(cluster):
    devices = cluster.add_devices(DEVICES, prefix="http")
    port = socket.socket()
    port.bind(("127.0.0.1", 0))
    standin_port = port.getsockname()[1]
    port.close()
    standin, runner = await serve("127.0.0.1", standin_port)
    bridges = [Bridge(cluster.haproxy.url, d, t[0], f"http://127.0.0.1:{standin_port}") for d, t in devices.items()]
    tasks = [asyncio.create_task(b.run()) for b in bridges]
    try:
        for b in bridges:
            await b.client.wait_connected(timeout=15)
        # A request that hashed to a node without the robot's socket would get 503 there: 200
        # from every device means each request met its robot.
        failed = await all_answer(cluster, devices, timeout=10)
        assert not failed, f"not answered through the balancer: {failed[:3]}"

        # 20 REST calls over one connection to the balancer: one handshake, every answer kept alive.
        device, (_, app_token) = next(iter(devices.items()))
        statuses = await asyncio.to_thread(keep_alive_requests, cluster.haproxy.port,
                                           f"/api/devices/{device}/robot/missions/available", app_token, 20)
        assert statuses == [200] * 20

        # A node goes and comes back: its devices move away and back, and answer again.
        cluster.nodes["node2"].kill()
        failed = await all_answer(cluster, devices, timeout=20)
        assert not failed, f"after node2 died: {failed[:3]}"
        cluster.nodes["node2"].start()
        cluster.wait_balanced()
        failed = await all_answer(cluster, devices, timeout=20)
        assert not failed, f"after node2 returned: {failed[:3]}"
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await runner.cleanup()
