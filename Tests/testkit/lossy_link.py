"""An emulated link between this namespace (the cloud) and a phone's network namespace: a pair of
TUN devices, one moved into the phone's namespace, and a thread that carries IPv4 packets between
them after a fixed one-way delay — and drops every packet of one chosen TCP connection once its
first request (or an answer) is seen, as a cellular link that loses a connection's packets after
its handshake does. (This kernel has no netem and no packet filter; a TUN pair needs neither.)

Each connection the phone opens is a ``Flow``: when its handshake began and the requests it carried
(the first bytes of each packet that starts one, with when it was sent), so a test can see when a
client tried again. (When a client gave up on a connection is not on the wire: a socket closed
with its request unacknowledged sends its FIN behind the next retransmission.)"""

from __future__ import annotations

import fcntl
import heapq
import itertools
import os
import secrets
import select
import struct
import subprocess
import threading
import time
from dataclasses import dataclass, field

TUNSETIFF = 0x400454CA
IFF_TUN, IFF_NO_PI = 0x0001, 0x1000
TCP_SYN, TCP_ACK = 0x02, 0x10
REQUEST_STARTS = (b"GET ", b"POST ", b"PUT ", b"DELETE ", b"HEAD ")


@dataclass
class Flow:
    """One TCP connection from the phone, by its source port."""
    port: int
    opened: float
    requests: list[tuple[float, bytes]] = field(default_factory=list)
    blackholed: bool = False

    def sent(self, prefix: bytes) -> float | None:
        """When this connection first carried a request starting with ``prefix``."""
        return next((at for at, start in self.requests if start.startswith(prefix)), None)


def _tun(name: str) -> int:
    descriptor = os.open("/dev/net/tun", os.O_RDWR)
    fcntl.ioctl(descriptor, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TUN | IFF_NO_PI))
    return descriptor


def _checksum(data: bytes) -> int:
    """The Internet checksum (RFC 1071)."""
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def _cut(packet: bytes, length: int) -> bytes:
    """An IPv4 TCP packet's first ``length`` bytes, its lengths and checksums made right again."""
    header = (packet[0] & 0x0F) * 4
    cut = bytearray(packet[:length])
    cut[2:4], cut[10:12] = struct.pack("!H", length), b"\0\0"
    cut[10:12] = struct.pack("!H", _checksum(bytes(cut[:header])))
    cut[header + 16:header + 18] = b"\0\0"
    pseudo = bytes(cut[12:20]) + struct.pack("!BBH", 0, 6, length - header)
    cut[header + 16:header + 18] = struct.pack("!H", _checksum(pseudo + bytes(cut[header:])))
    return bytes(cut)


def _run(*argv: str) -> None:
    subprocess.run(list(argv), check=True, capture_output=True)


class LossyLink:
    """``cloud`` is this namespace's address on the link (a relay listening on 0.0.0.0 is reached
    there), ``inside(argv)`` runs a command in the phone's namespace. Use as a context manager."""

    def __init__(self, delay: float = 0.05) -> None:
        tag = secrets.token_hex(3)
        subnet = f"10.231.{int(tag[:2], 16)}"
        self.cloud, self.phone, self.delay = f"{subnet}.1", f"{subnet}.2", delay
        self.namespace = f"wimz-phone-{tag}"
        self.flows: dict[int, Flow] = {}
        # The next connection to lose: (from the phone?, what the packet that starts it starts with).
        self._blackhole: tuple[bool, bytes] | None = None
        self._lock = threading.Lock()
        _run("ip", "netns", "add", self.namespace)
        self._cloud_end, self._phone_end = _tun(f"wzc{tag}"), _tun(f"wzp{tag}")
        # The phone's end keeps working through its descriptor here once it is in the other namespace.
        _run("ip", "link", "set", f"wzp{tag}", "netns", self.namespace)
        _run("ip", "addr", "add", self.cloud, "peer", self.phone, "dev", f"wzc{tag}")
        _run("ip", "link", "set", f"wzc{tag}", "up")
        for step in (("ip", "link", "set", "lo", "up"), ("ip", "addr", "add", self.phone, "peer", self.cloud, "dev", f"wzp{tag}"),
                     ("ip", "link", "set", f"wzp{tag}", "up")):
            _run(*self.inside(list(step)))
        self._wake_read, self._wake_write = os.pipe()
        self._stopping = False
        self._thread = threading.Thread(target=self._carry, daemon=True)
        self._thread.start()

    def inside(self, argv: list[str]) -> list[str]:
        """``argv`` run in the phone's namespace."""
        return ["ip", "netns", "exec", self.namespace, *argv]

    def blackhole_first(self, request: bytes) -> None:
        """The next connection to send a request starting with ``request`` loses that packet and
        every one after it, both ways (its retransmissions, its FIN, the other end's answers)."""
        with self._lock:
            self._blackhole = (True, request)

    def blackhole_after_head(self, answer: bytes) -> None:
        """The next connection whose answer from the cloud starts with ``answer`` (``HTTP/1.1
        101``: an upgrade) gets that answer's head and loses everything after it, both ways — the
        rest of that packet too (the relay's first frame travels in the 101's segment)."""
        with self._lock:
            self._blackhole = (False, answer)

    def flows_carrying(self, request: bytes) -> list[Flow]:
        """The connections that sent a request starting with ``request``, in the order they opened."""
        with self._lock:
            return sorted((f for f in self.flows.values() if f.sent(request) is not None), key=lambda f: f.opened)

    def _carried(self, packet: bytes, from_phone: bool) -> bytes | None:
        """Records what the packet says of its connection; what goes on (None: lost)."""
        if len(packet) < 20 or packet[0] >> 4 != 4:
            return None  # only IPv4 is routed over the link (the kernels' IPv6 chatter is not)
        header = (packet[0] & 0x0F) * 4
        if packet[9] != 6 or len(packet) < header + 20:
            return packet
        source, destination = struct.unpack("!HH", packet[header:header + 4])
        flags = packet[header + 13]
        payload_at = header + (packet[header + 12] >> 4) * 4
        payload = packet[payload_at:struct.unpack("!H", packet[2:4])[0]]
        port, now = (source if from_phone else destination), time.monotonic()
        with self._lock:
            flow = self.flows.get(port)
            if from_phone and flags & TCP_SYN and not flags & TCP_ACK:
                flow = self.flows[port] = Flow(port, now)
            if flow is None:
                return packet
            if flow.blackholed:
                return None
            if from_phone and payload.startswith(REQUEST_STARTS):
                flow.requests.append((now, bytes(payload[:80])))
            rule = self._blackhole
            if rule is None or rule[0] != from_phone or not payload.startswith(rule[1]):
                return packet
            flow.blackholed, self._blackhole = True, None
            if from_phone:
                return None
            head_ends = payload.find(b"\r\n\r\n")
            return packet if head_ends < 0 else _cut(packet, payload_at + head_ends + 4)

    def _carry(self) -> None:
        due: list[tuple[float, int, int, bytes]] = []
        order = itertools.count()
        ends = {self._cloud_end: self._phone_end, self._phone_end: self._cloud_end}
        while not self._stopping:
            wait = max(0.0, due[0][0] - time.monotonic()) if due else None
            ready, _, _ = select.select([*ends, self._wake_read], [], [], wait)
            for end in ready:
                if end == self._wake_read:
                    continue
                packet = os.read(end, 65_535)
                carried = self._carried(packet, from_phone=end == self._phone_end)
                if carried is not None:
                    heapq.heappush(due, (time.monotonic() + self.delay, next(order), ends[end], carried))
            while due and due[0][0] <= time.monotonic():
                _, _, out, packet = heapq.heappop(due)
                os.write(out, packet)

    def close(self) -> None:
        self._stopping = True
        os.write(self._wake_write, b"x")
        self._thread.join(timeout=5)
        for descriptor in (self._cloud_end, self._phone_end, self._wake_read, self._wake_write):
            os.close(descriptor)  # the TUN devices go with their descriptors
        subprocess.run(["ip", "netns", "delete", self.namespace], check=False)

    def __enter__(self) -> "LossyLink":
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
