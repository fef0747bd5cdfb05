"""The HAProxy recipes, run for real in front of a relay node (deploy/haproxy/haproxy.cfg and
haproxy-443.cfg with this machine's ports, certificate and syslog): what they log carries no
query string and no token in any form, and the public front answers the public API only —
the admin API and /metrics are reached through the internal listener, not through it."""

from __future__ import annotations

import asyncio
import re
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from websockets.asyncio.client import connect

from wimz_testkit import Cluster, free_port, self_signed, wait_for_port

ROOT = Path(__file__).resolve().parents[2]


class SyslogSink:
    """A UDP syslog receiver on loopback: HAProxy's log lines, as they arrive."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.lines: list[str] = []
        self.running = True
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while self.running:
            try:
                self.lines.append(self.sock.recv(65536).decode(errors="replace"))
            except socket.timeout:
                continue

    def close(self) -> None:
        self.running = False
        self.thread.join()
        self.sock.close()


def local_config(recipe: str, work: Path, node_port: int, ports: dict[str, int], syslog: int) -> str:
    """The recipe with this machine's addresses; everything else as shipped."""
    config = (ROOT / "deploy/haproxy" / recipe).read_text()
    config = config.replace("/etc/haproxy/certs/api.wimzai.com.pem", str(work / "bundle.pem"))
    config = config.replace("/run/haproxy/admin.sock", str(work / "admin.sock"))
    config = config.replace("log /dev/log local0", f"log 127.0.0.1:{syslog} local0")
    config = config.replace("maxconn 200000", "maxconn 5000")  # this sandbox's 20,000 descriptors
    config = config.replace("bind :443", f"bind 127.0.0.1:{ports['public']}")
    config = config.replace("bind :80", f"bind 127.0.0.1:{ports['plain']}")
    config = config.replace("bind 127.0.0.1:9080", f"bind 127.0.0.1:{ports['internal']}")
    config = config.replace("bind 127.0.0.1:8405", f"bind 127.0.0.1:{ports['exporter']}")
    config = config.replace("abns@wimz-api", f"abns@wimz-api-{ports['public']}")
    config = re.sub(r"    server (relay|core)1 .*\n(    server (relay|core)\d .*\n)*", f"    server relay1 127.0.0.1:{node_port}\n",
                    config)
    return config


@pytest.fixture(scope="module")
def node():
    cluster = Cluster(1)
    yield cluster
    cluster.close()


@pytest.fixture(params=["haproxy.cfg", "haproxy-443.cfg"])
def front(request, node):
    work = Path(tempfile.mkdtemp(prefix="wimz-haproxy-recipe-"))
    cert, _ = self_signed(work)
    sink = SyslogSink()
    ports = {name: free_port() for name in ("public", "plain", "internal", "exporter")}
    (work / "haproxy.cfg").write_text(local_config(request.param, work, node.nodes["node1"].port, ports, sink.port))
    subprocess.run(["haproxy", "-c", "-q", "-f", work / "haproxy.cfg"], check=True)
    haproxy = subprocess.Popen(["haproxy", "-f", work / "haproxy.cfg", "-db"], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        wait_for_port(ports["public"])
        time.sleep(1.5)  # the first health checks of the relay
        context = ssl.create_default_context(cafile=str(cert))
        yield {"ports": ports, "ssl": context, "sink": sink, "cluster": node}
    finally:
        haproxy.terminate()
        haproxy.wait(timeout=10)
        sink.close()


def public_request(front, path: str, token: str | None = None) -> int:
    """An HTTPS request through the public front (SNI api.wimzai.com, as the app sends it)."""
    request = urllib.request.Request(f"https://api.wimzai.com:{front['ports']['public']}{path}")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    handler = urllib.request.HTTPSHandler(context=front["ssl"])
    opener = urllib.request.build_opener(handler)
    original = socket.getaddrinfo

    def resolve(host, *args, **kwargs):  # api.wimzai.com → this machine, for this request only
        return original("127.0.0.1" if host == "api.wimzai.com" else host, *args, **kwargs)

    socket.getaddrinfo = resolve
    try:
        with opener.open(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
    finally:
        socket.getaddrinfo = original


def internal_request(front, path: str, token: str | None = None) -> int:
    request = urllib.request.Request(f"http://127.0.0.1:{front['ports']['internal']}{path}")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def test_the_public_front_serves_the_public_api_only(front):
    cluster = front["cluster"]
    robot, app = cluster.add_devices(1, prefix=f"pub{front['ports']['public']}-")[f"pub{front['ports']['public']}-0000"]
    device = f"pub{front['ports']['public']}-0000"
    assert public_request(front, f"/api/devices/{device}/status", app) == 200
    assert public_request(front, "/healthz") == 200
    for path in ("/admin/devices", "/admin/cluster/nodes", "/metrics", "/readyz", "/admin", "/"):
        assert public_request(front, path, cluster.admin_token) == 404, path
    # The operators' door answers them.
    assert internal_request(front, "/admin/devices", cluster.admin_token) == 200
    assert internal_request(front, "/metrics") == 200


def test_what_the_front_logs_carries_no_token(front):
    cluster = front["cluster"]
    device = f"log{front['ports']['public']}-0000"
    robot, app = cluster.add_devices(1, prefix=f"log{front['ports']['public']}-")[device]
    port = front["ports"]["public"]

    async def sockets() -> None:
        for role, query in (("app", f"device_id={device}&token={app}&recover=1"), ("robot", f"device_id={device}&token={robot}")):
            async with connect(f"wss://127.0.0.1:{port}/ws/{role}?{query}", ssl=front["ssl"],
                               server_hostname="api.wimzai.com", proxy=None) as ws:
                await asyncio.wait_for(ws.recv(), 5)

    asyncio.run(sockets())
    public_request(front, f"/api/turn/credentials?ttl=600&token={app}", app)
    public_request(front, f"/api/devices/{device}/status?token={robot}")
    internal_request(front, f"/admin/tokens?device_id={device}", cluster.admin_token)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and sum(f"/ws/app" in line for line in front["sink"].lines) < 1:
        time.sleep(0.1)
    time.sleep(0.5)
    lines = front["sink"].lines
    assert any("/api/devices/" in line for line in lines), lines  # the front does log requests
    assert any("/ws/app" in line for line in lines), lines
    for line in lines:
        for secret in (app, robot, cluster.admin_token):
            assert secret not in line, line
        assert "token=" not in line and "device_id=" not in line and "?" not in line, line
