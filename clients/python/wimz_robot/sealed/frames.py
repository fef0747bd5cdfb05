"""Sealed frames (docs/protocol.md "The sealed household (v1.5)", "Sealed frames"):
``{"type":"sealed","v":1,"epoch","kid","sid","n","ts","kind","ct","sig"}``, the v1–v1.4 frame's
exact bytes under ChaCha20-Poly1305 with a key per (epoch, sender, connection), signed with the
sender's Ed25519 key over the associated data and the ciphertext."""

from __future__ import annotations

import json
import os
import struct
import time
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from ..protocol import PUSH_KINDS, REPLAYED_EVENTS
from .epoch import Epoch
from .keys import Identity, b64decode, b64encode
from .roster import Member

#: What the relay may read of a frame: a robot event it pushes or replays, or none.
#: The kind of a sealed settings document (v1.6), both ways.
SETTINGS_KIND = "settings"
KINDS: frozenset[str] = (PUSH_KINDS - {"robot_offline"}) | REPLAYED_EVENTS | {SETTINGS_KIND}
#: ``ts`` within this much of the robot's clock (ms).
CLOCK_WINDOW_MS = 120_000
#: The previous epoch's frames are opened this long after a new one is announced (s).
PREVIOUS_EPOCH_GRACE = 60.0
#: A connection's ``sid`` and its highest ``n`` are remembered at least this long (s).
SID_MEMORY = 240.0
SID_BYTES = 16


def associated_data(device_id: str, epoch: int, kid: str, sid: str, n: int, ts: int, kind: str | None) -> bytes:
    """``wimz-sealed-v1`` 0x00 device 0x00 E 0x00 KID 0x00 SID 0x00 N 0x00 MS 0x00 K (K empty when absent)."""
    parts = ["wimz-sealed-v1", device_id, str(epoch), kid, sid, str(n), str(ts), kind or ""]
    return b"\x00".join(part.encode() for part in parts)


def frame_key(secret: bytes, sid: bytes, device_id: str, kid: str) -> bytes:
    """HKDF-SHA256(the epoch secret, salt = the sid's bytes, ``wimz-sealed-v1 frame`` 0x00 device 0x00 KID)."""
    info = b"\x00".join([b"wimz-sealed-v1 frame", device_id.encode(), kid.encode()])
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=sid, info=info).derive(secret)


def frame_nonce(n: int) -> bytes:
    return bytes(4) + struct.pack(">Q", n)


class Reason(Enum):
    """Why a frame was dropped unread."""

    MALFORMED = "malformed"
    UNKNOWN_EPOCH = "unknown_epoch"
    STALE = "stale"
    NOT_MEMBER = "not_member"
    REPLAYED = "replayed"
    TAMPERED = "tampered"


class Rejected(Exception):
    """A sealed frame this end does not open, and why."""

    def __init__(self, reason: Reason, detail: str = "") -> None:
        super().__init__(f"{reason.value}: {detail}" if detail else reason.value)
        self.reason = reason


class Sender:
    """One connection's sealing: a fresh ``sid`` and ``n`` from 1 (a key and nonce never repeat,
    restarts included). Make a new one for every connection."""

    def __init__(self, identity: Identity, device_id: str, sid: bytes | None = None) -> None:
        self.identity = identity
        self.device_id = device_id
        self.sid = sid if sid is not None else os.urandom(SID_BYTES)
        self.sid_text = b64encode(self.sid)
        self.n = 0
        self._keys: dict[int, bytes] = {}

    def seal(self, epoch: Epoch, plaintext: bytes, kind: str | None = None, ts: int | None = None) -> dict[str, Any]:
        """The sealed frame carrying ``plaintext`` (the v1–v1.4 frame's exact bytes)."""
        if kind is not None and kind not in KINDS:
            raise ValueError(f"kind {kind!r} is not one the relay may see")
        self.n += 1
        ts = int(time.time() * 1000) if ts is None else ts
        kid = self.identity.kid
        key = self._keys.get(epoch.number)
        if key is None:
            key = self._keys[epoch.number] = frame_key(epoch.secret, self.sid, self.device_id, kid)
        aad = associated_data(self.device_id, epoch.number, kid, self.sid_text, self.n, ts, kind)
        ct = ChaCha20Poly1305(key).encrypt(frame_nonce(self.n), plaintext, aad)
        frame: dict[str, Any] = {"type": "sealed", "v": 1, "epoch": epoch.number, "kid": kid, "sid": self.sid_text,
                                 "n": self.n, "ts": ts}
        if kind is not None:
            frame["kind"] = kind
        frame["ct"] = b64encode(ct)
        frame["sig"] = b64encode(self.identity.sign(aad + ct))
        return frame


@dataclass(frozen=True)
class Opened:
    """A frame that passed every check: who sent it and the v1–v1.4 frame inside."""

    member: Member
    plaintext: bytes
    epoch: int
    ts: int
    kind: str | None

    def message(self) -> Any:
        return json.loads(self.plaintext)


@dataclass
class _Seen:
    highest: int
    at: float


@dataclass
class RobotOpener:
    """The robot's checks on an app's frame, in the contract's order of cost: the epoch (current,
    or the previous one within its 60 s), a member of that roster not past ``until``, ``ts``
    within 120 s of the robot's clock, ``n`` above every n of that (kid, sid), the signature,
    the AEAD. The replay state is updated only by a frame that opened."""

    device_id: str
    current: Epoch | None = None
    previous: Epoch | None = None
    previous_until: float = 0.0
    _seen: dict[tuple[str, str], _Seen] = field(default_factory=dict)
    _keys: dict[tuple[int, str, str], bytes] = field(default_factory=dict)

    def announce(self, epoch: Epoch, now: float | None = None) -> None:
        """A new current epoch; the one it replaces is opened for 60 s more."""
        now = time.monotonic() if now is None else now
        self.previous, self.current = self.current, epoch
        self.previous_until = now + PREVIOUS_EPOCH_GRACE
        self._keys = {key: value for key, value in self._keys.items() if key[0] in (epoch.number, self._previous_number)}

    @property
    def _previous_number(self) -> int:
        return self.previous.number if self.previous is not None else 0

    def open(self, frame: dict[str, Any], now_ms: int | None = None, now: float | None = None) -> Opened:
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        now = time.monotonic() if now is None else now
        parsed = _parse(frame)
        number, kid, sid, n, ts, kind, ct, sig = parsed
        epoch = self._epoch(number, now)
        member = epoch.roster.member(kid)
        if member is None or not member.active(now_ms):
            raise Rejected(Reason.NOT_MEMBER, kid)
        if abs(ts - now_ms) > CLOCK_WINDOW_MS:
            raise Rejected(Reason.STALE, f"ts {ts} is {abs(ts - now_ms)} ms from the robot's clock")
        self._forget(now)
        seen = self._seen.get((kid, sid))
        if seen is not None and n <= seen.highest:
            raise Rejected(Reason.REPLAYED, f"n {n} after {seen.highest}")
        aad = associated_data(self.device_id, number, kid, sid, n, ts, kind)
        if not member.keys.verifies(sig, aad + ct):
            raise Rejected(Reason.TAMPERED, "the signature does not verify")
        key = self._keys.get((number, kid, sid))
        if key is None:
            key = self._keys[(number, kid, sid)] = frame_key(epoch.secret, b64decode(sid), self.device_id, kid)
        try:
            plaintext = ChaCha20Poly1305(key).decrypt(frame_nonce(n), ct, aad)
        except InvalidTag:
            raise Rejected(Reason.TAMPERED, "the AEAD does not open") from None
        self._seen[(kid, sid)] = _Seen(n, now)
        return Opened(member, plaintext, number, ts, kind)

    def open_settings(self, frame: dict[str, Any], now_ms: int | None = None) -> Opened:
        """A sealed settings document (v1.6), which waits at the relay while the robot is away: it
        opens at any age with either epoch the robot holds (no ``ts`` window, no grace), from a
        member of that roster not past ``until``, of kind ``settings``, signature and AEAD checked.
        Its replay check is the caller's: the version inside, above the one last applied."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        number, kid, sid, n, ts, kind, ct, sig = _parse(frame)
        if kind != SETTINGS_KIND:
            raise Rejected(Reason.MALFORMED, f"kind {kind!r} is not settings")
        epoch = next((e for e in (self.current, self.previous) if e is not None and e.number == number), None)
        if epoch is None:
            raise Rejected(Reason.UNKNOWN_EPOCH, str(number))
        member = epoch.roster.member(kid)
        if member is None or not member.active(now_ms):
            raise Rejected(Reason.NOT_MEMBER, kid)
        aad = associated_data(self.device_id, number, kid, sid, n, ts, kind)
        if not member.keys.verifies(sig, aad + ct):
            raise Rejected(Reason.TAMPERED, "the signature does not verify")
        try:
            plaintext = ChaCha20Poly1305(frame_key(epoch.secret, b64decode(sid), self.device_id, kid)).decrypt(frame_nonce(n), ct, aad)
        except InvalidTag:
            raise Rejected(Reason.TAMPERED, "the AEAD does not open") from None
        return Opened(member, plaintext, number, ts, kind)

    def _epoch(self, number: int, now: float) -> Epoch:
        if self.current is not None and number == self.current.number:
            return self.current
        if self.previous is not None and number == self.previous.number:
            if now <= self.previous_until:
                return self.previous
            raise Rejected(Reason.STALE, f"epoch {number} ended")
        raise Rejected(Reason.UNKNOWN_EPOCH, str(number))

    def _forget(self, now: float) -> None:
        # A sid is forgotten only long after its frames' ts left the 120 s window: a replay of one
        # of its frames is stale by then.
        if len(self._seen) > 64:
            self._seen = {key: seen for key, seen in self._seen.items() if now - seen.at < SID_MEMORY}
            self._keys = {key: value for key, value in self._keys.items() if (key[1], key[2]) in self._seen}


def _parse(frame: Any) -> tuple[int, str, str, int, int, str | None, bytes, bytes]:
    """The fields of a sealed frame, every one of its type; Rejected(MALFORMED) otherwise."""
    try:
        if frame.get("type") != "sealed" or frame.get("v") != 1:
            raise ValueError("type or v")
        number, kid, sid, n, ts, kind = (frame["epoch"], frame["kid"], frame["sid"], frame["n"], frame["ts"],
                                          frame.get("kind"))
        if not all(isinstance(value, int) and not isinstance(value, bool) for value in (number, n, ts)) or n < 1:
            raise ValueError("epoch, n or ts")
        if not isinstance(kid, str) or not isinstance(sid, str) or (kind is not None and not isinstance(kind, str)):
            raise ValueError("kid, sid or kind")
        if len(b64decode(sid)) != SID_BYTES:
            raise ValueError("sid")
        return number, kid, sid, n, ts, kind, b64decode(frame["ct"]), b64decode(frame["sig"])
    except (AttributeError, KeyError, TypeError, ValueError) as error:
        raise Rejected(Reason.MALFORMED, str(error)) from None
