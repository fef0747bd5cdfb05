"""The signed roster (docs/protocol.md "The sealed household (v1.5)"): who is in the household in one
epoch, signed by an owner, chained to the previous roster by its hash. Its bytes are kept as they
arrived: nobody re-serialises a roster, its hash is SHA-256 of those bytes."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from .keys import Identity, PublicKeys, b64decode, b64encode

ROLES = ("owner", "family", "guest")
LOCK_SCREEN_POLICIES = ("off", "status", "full")


class RosterRejected(ValueError):
    """A roster this end does not accept, and why (logged by the robot, shown by an app)."""


@dataclass(frozen=True)
class Member:
    """One member of a roster: keys, role, whether it may steer the robot, its end (ms since
    1970, or None) and a label for people."""

    keys: PublicKeys
    role: str
    control: bool
    until: int | None
    label: str

    @property
    def kid(self) -> str:
        return self.keys.kid

    @property
    def may_control(self) -> bool:
        """Owners and family always steer the robot; a guest only with ``control`` (as v1.3)."""
        return self.role != "guest" or self.control

    def active(self, now_ms: int) -> bool:
        """Whether the member is still in the household at ``now_ms`` (a guest's ``until`` not passed)."""
        return self.until is None or now_ms < self.until

    def to_json(self) -> dict[str, Any]:
        return self.keys.to_json() | {"role": self.role, "control": self.control, "until": self.until, "label": self.label}

    @classmethod
    def from_json(cls, item: Any) -> "Member":
        keys = PublicKeys.from_json(item)
        role, control, until, label = item.get("role"), item.get("control"), item.get("until"), item.get("label", "")
        if role not in ROLES or not isinstance(control, bool) or not isinstance(label, str):
            raise ValueError("member: role, control or label")
        if until is not None and (not isinstance(until, int) or isinstance(until, bool)):
            raise ValueError("member: until")
        return cls(keys, role, control, until, label)


@dataclass(frozen=True)
class Roster:
    """One epoch's household. ``raw`` is the exact signed bytes."""

    device_id: str
    epoch: int
    prev: str | None
    made: int
    robot: PublicKeys
    members: tuple[Member, ...]
    lock_screen: str
    raw: bytes

    @property
    def hash(self) -> str:
        """SHA-256 of the exact bytes, lower-case hex: what the next roster's ``prev`` names."""
        return hashlib.sha256(self.raw).hexdigest()

    def member(self, kid: str) -> Member | None:
        return next((member for member in self.members if member.kid == kid), None)

    def is_owner(self, kid: str) -> bool:
        member = self.member(kid)
        return member is not None and member.role == "owner"

    @classmethod
    def make(cls, device_id: str, epoch: int, prev: str | None, made: int, robot: PublicKeys,
             members: list[Member], lock_screen: str = "status") -> "Roster":
        """A new roster, serialised once (what an owner's end does before it signs)."""
        body = {"device_id": device_id, "epoch": epoch, "prev": prev, "made": made, "robot": robot.to_json(),
                "members": [member.to_json() for member in members], "lock_screen": lock_screen}
        return cls.parse(json.dumps(body, separators=(",", ":")).encode())

    @classmethod
    def parse(cls, raw: bytes) -> "Roster":
        """The roster in ``raw``; RosterRejected when it is not one."""
        try:
            body = json.loads(raw)
            members = tuple(Member.from_json(item) for item in body["members"])
            roster = cls(body["device_id"], body["epoch"], body["prev"], body["made"], PublicKeys.from_json(body["robot"]),
                         members, body.get("lock_screen", "status"), raw)
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise RosterRejected(f"malformed roster: {error}") from error
        if not isinstance(roster.device_id, str) or not isinstance(roster.epoch, int) or roster.epoch < 1:
            raise RosterRejected("malformed roster: device_id or epoch")
        if not isinstance(roster.made, int) or (roster.prev is not None and not isinstance(roster.prev, str)):
            raise RosterRejected("malformed roster: made or prev")
        if roster.lock_screen not in LOCK_SCREEN_POLICIES:
            raise RosterRejected("malformed roster: lock_screen")
        if len({member.kid for member in members}) != len(members) or not any(m.role == "owner" for m in members):
            raise RosterRejected("malformed roster: a member twice, or no owner")
        return roster

    def signed(self, owner: Identity) -> "SignedRoster":
        return SignedRoster(self, owner.kid, owner.sign(self.raw))


@dataclass(frozen=True)
class SignedRoster:
    """``{"roster":B64,"by":KID,"sig":B64}``: a roster and an owner's Ed25519 signature of its bytes."""

    roster: Roster
    by: str
    sig: bytes

    def to_json(self) -> dict[str, str]:
        return {"roster": b64encode(self.roster.raw), "by": self.by, "sig": b64encode(self.sig)}

    @classmethod
    def from_json(cls, item: Any) -> "SignedRoster":
        try:
            return cls(Roster.parse(b64decode(item["roster"])), str(item["by"]), b64decode(item["sig"]))
        except (KeyError, TypeError, ValueError) as error:
            if isinstance(error, RosterRejected):
                raise
            raise RosterRejected(f"malformed signed roster: {error}") from error


def verify_next(signed: SignedRoster, *, previous: Roster | None, device_id: str, robot: PublicKeys,
                first_owner: PublicKeys | None = None) -> Roster:
    """The roster of the next epoch, when every rule holds; RosterRejected otherwise.

    - the device and the robot's keys are this robot's;
    - epoch 1: no ``prev``, signed by the pinned first owner, who is an owner in it;
    - later: epoch = previous + 1, ``prev`` = the previous roster's hash, signed by an owner of
      the previous roster (so a roster never rises by more than one, and never goes back)."""
    roster = signed.roster
    if roster.device_id != device_id:
        raise RosterRejected("another device's roster")
    if roster.robot != robot:
        raise RosterRejected("the roster names another robot key")
    if previous is None:
        if first_owner is None:
            raise RosterRejected("no first owner pinned yet")
        if roster.epoch != 1 or roster.prev is not None:
            raise RosterRejected("the first roster must be epoch 1 without prev")
        signer = first_owner
        named = roster.member(first_owner.kid)
        if named is None or named.role != "owner" or named.keys != first_owner:
            raise RosterRejected("the pinned first owner is not an owner of the first roster")
    else:
        if roster.epoch != previous.epoch + 1:
            raise RosterRejected(f"epoch {roster.epoch} does not follow {previous.epoch}")
        if roster.prev != previous.hash:
            raise RosterRejected("prev is not the previous roster's hash")
        owner = previous.member(signed.by)
        if owner is None or owner.role != "owner":
            raise RosterRejected("not signed by an owner of the previous roster")
        signer = owner.keys
    if signed.by != signer.kid or not signer.verifies(signed.sig, roster.raw):
        raise RosterRejected("the owner's signature does not verify")
    return roster
