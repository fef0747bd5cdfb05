"""The TCP options on the relay's clients' sockets (docs/operations.md, Cellular links), read back
from the relay's own end of live connections: the descriptor duplicated out of the running relay
(pidfd_getfd; the suite runs as root) and asked with getsockopt — a connection still sending its
head (the gate's) and an upgraded WebSocket (handed to lws), with the defaults and with settings
of an operator's."""

from __future__ import annotations

import asyncio
import ctypes
import os
import socket
import struct
import subprocess
from pathlib import Path

from websockets.asyncio.client import connect

from wimz_testkit import Database, RelayNode

SYS_PIDFD_OPEN = 434
SYS_PIDFD_GETFD = 438
TCP_RTO_MAX_MS = 44  # Linux 6.15; Python's socket module predates it
KERNEL_CAPS_RETRANSMISSIONS = Path("/proc/sys/net/ipv4/tcp_rto_max_ms").exists()


def relay_end(pid: int, relay_port: int, client_port: int) -> socket.socket:
    """A duplicate of the relay's socket connected to our ``client_port``."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, remote = (int(address.rsplit(":", 1)[1], 16) for address in fields[1:3])
            if local == relay_port and remote == client_port:
                inodes.add(fields[9])
    assert len(inodes) == 1, f"the relay's end of port {client_port}: {inodes}"
    wanted = f"socket:[{inodes.pop()}]"
    number = next(int(fd) for fd in os.listdir(f"/proc/{pid}/fd") if os.readlink(f"/proc/{pid}/fd/{fd}") == wanted)
    libc = ctypes.CDLL(None, use_errno=True)
    pidfd = libc.syscall(SYS_PIDFD_OPEN, pid, 0)
    assert pidfd >= 0, os.strerror(ctypes.get_errno())
    try:
        duplicate = libc.syscall(SYS_PIDFD_GETFD, pidfd, number, 0)
        assert duplicate >= 0, os.strerror(ctypes.get_errno())
    finally:
        os.close(pidfd)
    return socket.socket(fileno=duplicate)


def options(sock: socket.socket) -> dict[str, int]:
    tcp = socket.IPPROTO_TCP
    read = {"TCP_USER_TIMEOUT": sock.getsockopt(tcp, socket.TCP_USER_TIMEOUT),
            "SO_KEEPALIVE": sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
            "TCP_KEEPIDLE": sock.getsockopt(tcp, socket.TCP_KEEPIDLE),
            "TCP_KEEPINTVL": sock.getsockopt(tcp, socket.TCP_KEEPINTVL),
            "TCP_KEEPCNT": sock.getsockopt(tcp, socket.TCP_KEEPCNT)}
    if KERNEL_CAPS_RETRANSMISSIONS:
        read["TCP_RTO_MAX_MS"] = struct.unpack("i", sock.getsockopt(tcp, TCP_RTO_MAX_MS, 4))[0]
    return read


async def options_of_live_sockets(node: RelayNode, device: str, app_token: str) -> tuple[dict[str, int], dict[str, int]]:
    """(a connection in the middle of its head, an upgraded app socket): their options at the relay."""
    assert node.process is not None
    with socket.create_connection(("127.0.0.1", node.port)) as half:
        half.sendall(b"GET /healthz HTTP/1.1\r\nHost: relay\r\n")  # no blank line yet: the gate waits
        for _ in range(100):  # the gate accepts once the first bytes are in (TCP_DEFER_ACCEPT)
            try:
                end = relay_end(node.process.pid, node.port, half.getsockname()[1])
                break
            except (AssertionError, StopIteration):
                await asyncio.sleep(0.05)
        with end:
            reading_head = options(end)
    async with connect(f"ws://127.0.0.1:{node.port}/ws/app?device_id={device}&token={app_token}") as app:
        await app.recv()  # device_status: upgraded and attached
        client_port = app.transport.get_extra_info("sockname")[1]
        with relay_end(node.process.pid, node.port, client_port) as end:
            upgraded = options(end)
    return reading_head, upgraded


async def test_client_sockets_get_the_documented_defaults():
    database = Database(prefix="tcp")
    node = RelayNode.started(database)
    try:
        _, app_token = database.add_device("tcp-robot")
        for read in await options_of_live_sockets(node, "tcp-robot", app_token):
            expected = {"TCP_USER_TIMEOUT": 40_000, "SO_KEEPALIVE": 1, "TCP_KEEPIDLE": 20, "TCP_KEEPINTVL": 5, "TCP_KEEPCNT": 4}
            if KERNEL_CAPS_RETRANSMISSIONS:
                expected["TCP_RTO_MAX_MS"] = 2_000
            assert read == expected
    finally:
        node.stop()
        database.drop()
    # A kernel that has every option hears of no refusal; one without TCP_RTO_MAX_MS is told at start.
    refused = [line for line in node.lines if "tcp_option_unavailable" in line]
    assert refused == [] if KERNEL_CAPS_RETRANSMISSIONS else len(refused) == 1 and "TCP_RTO_MAX_MS" in refused[0], refused


async def test_an_operators_settings_reach_the_sockets():
    database = Database(prefix="tcp_set")
    node = RelayNode.started(database, env={"WIMZ_TCP_RTO_MAX": "3.5", "WIMZ_TCP_USER_TIMEOUT": "0", "WIMZ_TCP_KEEPALIVE": "0"})
    try:
        _, app_token = database.add_device("tcp-robot")
        for read in await options_of_live_sockets(node, "tcp-robot", app_token):
            assert read["TCP_USER_TIMEOUT"] == 0 and read["SO_KEEPALIVE"] == 0
            assert read.get("TCP_RTO_MAX_MS", 3_500) == 3_500
    finally:
        node.stop()
        database.drop()


def test_a_user_timeout_shorter_than_one_retransmission_is_refused_at_start():
    database = Database(prefix="tcp_bad")
    try:
        done = subprocess.run([database.relay_bin, "serve", "--listen", "127.0.0.1:0"], capture_output=True, text=True, timeout=60,
                              env=dict(os.environ, WIMZ_DATABASE_URL=database.url, WIMZ_MIGRATIONS_DIR=database.migrations,
                                       WIMZ_TCP_RTO_MAX="10", WIMZ_TCP_USER_TIMEOUT="5"))
        assert done.returncode != 0 and "WIMZ_TCP_USER_TIMEOUT" in done.stderr, done.stderr
    finally:
        database.drop()
