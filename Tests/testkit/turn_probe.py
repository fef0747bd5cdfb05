"""A minimal TURN client (RFC 5389/5766/6156) for the recipe tests: one UDP allocation with the
TURN REST credential scheme, then CreatePermission for a peer or a Refresh of the allocation, and
the server's answer. It asks for a permission only: nothing is ever sent to the peer."""

from __future__ import annotations

import hashlib
import hmac
import base64
import ipaddress
import os
import socket
import struct
import time

MAGIC = 0x2112A442
ALLOCATE, REFRESH, CREATE_PERMISSION = 0x0003, 0x0004, 0x0008
LIFETIME = 0x000D
USERNAME, MESSAGE_INTEGRITY, ERROR_CODE, XOR_PEER_ADDRESS = 0x0006, 0x0008, 0x0009, 0x0012
REALM, NONCE, REQUESTED_FAMILY, REQUESTED_TRANSPORT = 0x0014, 0x0015, 0x0017, 0x0019


def turn_password(secret: str, username: str) -> str:
    """The TURN REST password of ``username`` under ``secret`` (base64 of HMAC-SHA1): what the
    relay must answer and coturn's use-auth-secret accepts. The tests' one copy of the rule."""
    return base64.b64encode(hmac.new(secret.encode(), username.encode(), hashlib.sha1).digest()).decode()


def rest_credentials(secret: str, user: str = "probe", ttl: int = 600) -> tuple[str, str]:
    """The TURN REST username and password coturn's use-auth-secret accepts."""
    username = f"{int(time.time()) + ttl}:{user}"
    return username, turn_password(secret, username)


def _attribute(kind: int, value: bytes) -> bytes:
    return struct.pack("!HH", kind, len(value)) + value + b"\0" * (-len(value) % 4)


class TurnProbe:
    """One allocation on ``server`` (host, port); ``family`` 4 or 6 is the relayed address's."""

    def __init__(self, server: tuple[str, int], username: str, password: str, family: int = 4,
                 relay_transport: str = "udp") -> None:
        self.server = server
        self.username = username
        self.password = password
        # A TCP relay (RFC 6062) is asked for over a TCP connection to the server.
        self.tcp = relay_transport == "tcp"
        self.sock = socket.socket(socket.AF_INET6 if ":" in server[0] else socket.AF_INET,
                                  socket.SOCK_STREAM if self.tcp else socket.SOCK_DGRAM)
        self.sock.settimeout(3)
        if self.tcp:
            self.sock.connect(server)
        self.realm = b""
        self.nonce = b""
        extra = _attribute(REQUESTED_FAMILY, bytes([2, 0, 0, 0])) if family == 6 else b""
        body = _attribute(REQUESTED_TRANSPORT, bytes([6 if self.tcp else 17, 0, 0, 0])) + extra
        status, attributes = self._request(ALLOCATE, body, signed=False)
        if status == 401:
            self.realm, self.nonce = attributes[REALM], attributes[NONCE]
            status, attributes = self._request(ALLOCATE, body)
        if status != 200:
            raise RuntimeError(f"allocation refused: {status}")

    def permit(self, peer: str) -> int:
        """CreatePermission for ``peer``: 200, or the error code (403: forbidden peer)."""
        address = ipaddress.ip_address(peer)
        transaction = os.urandom(12)
        if address.version == 4:
            x = bytes(a ^ b for a, b in zip(address.packed, struct.pack("!I", MAGIC)))
            value = struct.pack("!BBH", 0, 1, 9 ^ (MAGIC >> 16)) + x
        else:
            x = bytes(a ^ b for a, b in zip(address.packed, struct.pack("!I", MAGIC) + transaction))
            value = struct.pack("!BBH", 0, 2, 9 ^ (MAGIC >> 16)) + x
        status, _ = self._request(CREATE_PERMISSION, _attribute(XOR_PEER_ADDRESS, value), transaction=transaction)
        return status

    def refresh(self, lifetime: int = 600) -> int:
        """Refresh of the allocation: 200, or the error code (437: the server has no such
        allocation any more, e.g. after its session was cancelled through the CLI)."""
        try:
            status, _ = self._request(REFRESH, _attribute(LIFETIME, struct.pack("!I", lifetime)))
        except (socket.timeout, ConnectionError):
            return 0
        return status

    def _receive(self) -> bytes:
        if not self.tcp:
            return self.sock.recvfrom(4096)[0]
        data = b""
        while len(data) < 20 or len(data) < 20 + struct.unpack("!H", data[2:4])[0]:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise RuntimeError("the server closed the connection")
            data += chunk
        return data

    def close(self) -> None:
        self.sock.close()

    def _request(self, method: int, body: bytes, signed: bool = True,
                 transaction: bytes | None = None) -> tuple[int, dict[int, bytes]]:
        transaction = transaction or os.urandom(12)
        if signed:
            body += _attribute(USERNAME, self.username.encode()) + _attribute(REALM, self.realm) + _attribute(NONCE, self.nonce)
            key = hashlib.md5(self.username.encode() + b":" + self.realm + b":" + self.password.encode()).digest()
            header = struct.pack("!HHI", method, len(body) + 24, MAGIC) + transaction
            body += _attribute(MESSAGE_INTEGRITY, hmac.new(key, header + body, hashlib.sha1).digest())
        message = struct.pack("!HHI", method, len(body), MAGIC) + transaction + body
        if self.tcp:
            self.sock.sendall(message)
        else:
            self.sock.sendto(message, self.server)
        while True:
            data = self._receive()
            kind, length, _, answered = struct.unpack("!HHI12s", data[:20])
            if answered == transaction:
                break
        attributes: dict[int, bytes] = {}
        offset = 20
        while offset + 4 <= 20 + length:
            a, n = struct.unpack("!HH", data[offset:offset + 4])
            attributes[a] = data[offset + 4:offset + 4 + n]
            offset += 4 + n + (-n % 4)
        if kind & 0x0110 == 0x0100:  # success response
            return 200, attributes
        error = attributes.get(ERROR_CODE, b"\0\0\0\0")
        return (error[2] & 0x7) * 100 + error[3], attributes
