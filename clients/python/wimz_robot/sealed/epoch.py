"""Epoch secrets (docs/protocol.md "The sealed household (v1.5)"): for each roster it accepts the robot
draws 32 random bytes and seals them to every member with HPKE (RFC 9180 base mode,
DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-128-GCM, single-shot), and signs that it accepted
the roster. A member left out gets no package and reads nothing of the epoch."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives import hpke

from .keys import Identity, PublicKeys, b64decode, b64encode
from .roster import Roster, SignedRoster

SUITE = hpke.Suite(hpke.KEM.X25519, hpke.KDF.HKDF_SHA256, hpke.AEAD.AES_128_GCM)
SECRET_BYTES = 32


def _statement(label: bytes, device_id: str, epoch: int, roster_hash: str) -> bytes:
    return b"\x00".join([label, device_id.encode(), str(epoch).encode(), roster_hash.encode()])


def package_info(roster: Roster) -> bytes:
    """HPKE's ``info``: ``wimz-sealed-v1 epoch`` 0x00 device 0x00 E 0x00 roster hash."""
    return _statement(b"wimz-sealed-v1 epoch", roster.device_id, roster.epoch, roster.hash)


def accept_statement(roster: Roster) -> bytes:
    """What ``robot_sig`` signs: ``wimz-sealed-v1 accept`` 0x00 device 0x00 E 0x00 roster hash."""
    return _statement(b"wimz-sealed-v1 accept", roster.device_id, roster.epoch, roster.hash)


@dataclass(frozen=True)
class Epoch:
    """One epoch as an end holds it: its roster and secret."""

    roster: Roster
    secret: bytes

    @property
    def number(self) -> int:
        return self.roster.epoch


def seal_packages(roster: Roster, secret: bytes) -> list[dict[str, str]]:
    """One ``{"kid","sealed"}`` per member: B64 of the encapsulated key followed by the ciphertext."""
    info = package_info(roster)
    return [{"kid": member.kid, "sealed": b64encode(SUITE.encrypt(secret, member.keys.hpke_key(), info=info))}
            for member in roster.members]


def open_package(package: Any, identity: Identity, roster: Roster) -> bytes:
    """The epoch secret in this end's package; ValueError when the package is not for it, or does
    not open (tampered, or sealed for another roster)."""
    if not isinstance(package, dict) or package.get("kid") != identity.kid:
        raise ValueError("not this end's package")
    try:
        secret = SUITE.decrypt(b64decode(package["sealed"]), identity.hpke_private, info=package_info(roster))
    except Exception as error:  # pyca raises InvalidTag or ValueError; either way it does not open
        raise ValueError("the package does not open") from error
    if len(secret) != SECRET_BYTES:
        raise ValueError("the epoch secret is not 32 bytes")
    return secret


def new_epoch(signed: SignedRoster, robot: Identity) -> tuple[Epoch, dict[str, Any]]:
    """The robot's side of an accepted roster: a fresh secret, and the body it uploads."""
    epoch = Epoch(signed.roster, os.urandom(SECRET_BYTES))
    return epoch, upload_body(signed, epoch.secret, robot)


def upload_body(signed: SignedRoster, secret: bytes, robot: Identity) -> dict[str, Any]:
    """What the robot uploads for an epoch (``PUT …/sealed/epochs/{E}``): the signed roster, its
    acceptance, and ``secret`` sealed afresh to every member."""
    return {"roster": signed.to_json(), "robot_sig": b64encode(robot.sign(accept_statement(signed.roster))),
            "packages": seal_packages(signed.roster, secret)}


def accepted_by(robot: PublicKeys, roster: Roster, robot_sig: str) -> bool:
    """Whether ``robot_sig`` is the robot's acceptance of ``roster``."""
    try:
        return robot.verifies(b64decode(robot_sig), accept_statement(roster))
    except ValueError:
        return False
