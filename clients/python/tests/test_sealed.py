"""The sealed household's cryptography in the robot library (wimz_robot.sealed): the contract's
bytes against vectors computed from the primitives alone (Tests/Fixtures/sealed/vectors.py), and
every check the robot makes on an app's frame, each one shown to refuse."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import hpke
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from wimz_robot.sealed import (Epoch, Identity, Member, Reason, Rejected, RobotOpener, Roster, RosterRejected,
                               SealedDevice, Sender, SignedRoster, accepted_by, associated_data, b64decode, b64encode,
                               departure_chain, frame_key, new_epoch, open_package, verify_chain, verify_next)

FIXTURES = Path(__file__).resolve().parents[3] / "Tests/Fixtures/sealed"
VECTORS: dict[str, Any] = json.loads((FIXTURES / "vectors.json").read_text())
DEVICE = VECTORS["device_id"]
NOW_MS = 1_795_000_061_500


def vector_identity(name: str) -> Identity:
    keys = VECTORS["identities"][name]
    return Identity.from_private_bytes(bytes.fromhex(keys["sign_private"]), bytes.fromhex(keys["hpke_private"]))


def vector_epoch() -> Epoch:
    signed = SignedRoster.from_json(VECTORS["roster"]["signed"])
    return Epoch(signed.roster, bytes.fromhex(VECTORS["epoch"]["secret"]))


def test_the_vectors_are_what_their_generator_computes_and_pycas_hpke_opens_them() -> None:
    generated = subprocess.run([sys.executable, str(FIXTURES / "vectors.py")], check=True, capture_output=True, text=True)
    assert json.loads(generated.stdout) == VECTORS
    # The generator's HPKE is RFC 9180 written out from HMAC and X25519; pyca's own HPKE agrees.
    family = X25519PrivateKey.from_private_bytes(bytes.fromhex(VECTORS["identities"]["family"]["hpke_private"]))
    suite = hpke.Suite(hpke.KEM.X25519, hpke.KDF.HKDF_SHA256, hpke.AEAD.AES_128_GCM)
    opened = suite.decrypt(b64decode(VECTORS["epoch"]["package"]["sealed"]), family, info=b64decode(VECTORS["epoch"]["info"]))
    assert opened.hex() == VECTORS["epoch"]["secret"]


def test_keys_roster_and_epoch_match_the_vectors() -> None:
    for name in ("robot", "owner", "family"):
        identity = vector_identity(name)
        assert identity.public.to_json() == {key: VECTORS["identities"][name][key] for key in ("kid", "sign", "hpke")}
    robot, owner, family = vector_identity("robot"), vector_identity("owner"), vector_identity("family")
    assert robot.public.verification_code == VECTORS["robot_verification_code"]
    signed = SignedRoster.from_json(VECTORS["roster"]["signed"])
    assert signed.roster.hash == VECTORS["roster"]["hash"]
    # Ed25519 is deterministic: the library's signature of the same bytes is the vector's.
    assert signed.roster.signed(owner).to_json() == VECTORS["roster"]["signed"]
    roster = verify_next(signed, previous=None, device_id=DEVICE, robot=robot.public, first_owner=owner.public)
    secret = open_package(VECTORS["epoch"]["package"], family, roster)
    assert secret.hex() == VECTORS["epoch"]["secret"]
    assert accepted_by(robot.public, roster, VECTORS["epoch"]["robot_sig"])


def test_frames_seal_to_the_vectors_bytes_and_open() -> None:
    epoch = vector_epoch()
    for vector in VECTORS["frames"]:
        frame = vector["frame"]
        sender = Sender(vector_identity(vector["sender"]), DEVICE, sid=b64decode(frame["sid"]))
        sender.n = frame["n"] - 1
        sealed = sender.seal(epoch, vector["plaintext"].encode(), frame.get("kind"), ts=frame["ts"])
        assert sealed == frame
        assert associated_data(DEVICE, 1, frame["kid"], frame["sid"], frame["n"], frame["ts"], frame.get("kind")) \
            == b64decode(vector["aad"])
        assert frame_key(epoch.secret, b64decode(frame["sid"]), DEVICE, frame["kid"]).hex() == vector["key"]
    family_frame = next(v for v in VECTORS["frames"] if v["sender"] == "family")
    opener = RobotOpener(DEVICE)
    opener.announce(epoch, now=0)
    opened = opener.open(family_frame["frame"], now_ms=NOW_MS, now=1)
    assert opened.plaintext.decode() == family_frame["plaintext"] and opened.member.role == "family"


def household(now_ms: int = NOW_MS, guest_until: int | None = None) -> tuple[Identity, Identity, Identity, Epoch]:
    robot, owner, guest = Identity.generate(), Identity.generate(), Identity.generate()
    roster = Roster.make(DEVICE, 1, None, now_ms, robot.public,
                         [Member(owner.public, "owner", True, None, "owner"),
                          Member(guest.public, "guest", False, guest_until, "sitter")])
    epoch, _ = new_epoch(roster.signed(owner), robot)
    return owner, guest, robot, epoch


def test_the_robot_refuses_each_frame_a_relay_could_forge_or_replay() -> None:
    owner, guest, robot, epoch = household(guest_until=NOW_MS + 60_000)
    opener = RobotOpener(DEVICE)
    opener.announce(epoch, now=0)
    sender = Sender(owner, DEVICE)
    command = b'{"type":"command","command":"treat","data":{}}'

    def refused(frame: dict[str, Any], reason: Reason, **clock: Any) -> None:
        with pytest.raises(Rejected) as caught:
            opener.open(frame, **({"now_ms": NOW_MS, "now": 1.0} | clock))
        assert caught.value.reason is reason

    first = sender.seal(epoch, command, ts=NOW_MS)
    assert opener.open(first, now_ms=NOW_MS, now=1).plaintext == command
    refused(first, Reason.REPLAYED)
    later, earlier = sender.seal(epoch, command, ts=NOW_MS), sender.seal(epoch, command, ts=NOW_MS)
    assert opener.open(earlier, now_ms=NOW_MS, now=1).plaintext == command
    refused(later, Reason.REPLAYED)  # reordered: n 3 opened, so n 2 never will
    flipped = sender.seal(epoch, command, ts=NOW_MS)
    flipped["ct"] = b64encode(bytes([b64decode(flipped["ct"])[0] ^ 1]) + b64decode(flipped["ct"])[1:])
    refused(flipped, Reason.TAMPERED)
    retagged = sender.seal(epoch, command, ts=NOW_MS) | {"kind": "bark_detected"}
    refused(retagged, Reason.TAMPERED)  # the kind is in the signed associated data
    refused(sender.seal(epoch, command, ts=NOW_MS - 121_000), Reason.STALE)
    refused(sender.seal(epoch, command, ts=NOW_MS) | {"epoch": 2}, Reason.UNKNOWN_EPOCH)
    stranger = Sender(Identity.generate(), DEVICE).seal(epoch, command, ts=NOW_MS)
    refused(stranger, Reason.NOT_MEMBER)
    refused({"type": "sealed", "v": 1, "epoch": 1}, Reason.MALFORMED)
    refused({"type": "command"}, Reason.MALFORMED)
    # A guest past its until is no member, even with a frame sealed while it was one.
    guest_frame = Sender(guest, DEVICE).seal(epoch, command, ts=NOW_MS + 60_000)
    refused(guest_frame, Reason.NOT_MEMBER, now_ms=NOW_MS + 60_000)


def test_the_previous_epoch_is_opened_for_60_s_after_a_new_one() -> None:
    owner, _, robot, first = household()
    opener = RobotOpener(DEVICE)
    opener.announce(first, now=0)
    second_roster = Roster.make(DEVICE, 2, first.roster.hash, NOW_MS, robot.public, list(first.roster.members))
    second, _ = new_epoch(second_roster.signed(owner), robot)
    opener.announce(second, now=100)
    sender = Sender(owner, DEVICE)
    assert opener.open(sender.seal(first, b"{}", ts=NOW_MS), now_ms=NOW_MS, now=160).epoch == 1
    with pytest.raises(Rejected) as caught:
        opener.open(sender.seal(first, b"{}", ts=NOW_MS), now_ms=NOW_MS, now=160.5)
    assert caught.value.reason is Reason.STALE
    assert opener.open(sender.seal(second, b"{}", ts=NOW_MS), now_ms=NOW_MS, now=161).epoch == 2


def test_rosters_chain_and_only_owners_sign_them() -> None:
    owner, guest, robot, first = household()
    members = list(first.roster.members)

    def nxt(prev: str | None, epoch: int, signer: Identity) -> SignedRoster:
        return Roster.make(DEVICE, epoch, prev, NOW_MS, robot.public, members).signed(signer)

    def verify(signed: SignedRoster) -> Roster:
        return verify_next(signed, previous=first.roster, device_id=DEVICE, robot=robot.public)

    assert verify(nxt(first.roster.hash, 2, owner)).epoch == 2
    for signed, why in ((nxt(first.roster.hash, 2, guest), "not signed by an owner"),
                        (nxt(first.roster.hash, 3, owner), "does not follow"),
                        (nxt(first.roster.hash, 1, owner), "does not follow"),
                        (nxt("00" * 32, 2, owner), "prev"),
                        (SignedRoster(nxt(first.roster.hash, 2, owner).roster, owner.kid, bytes(64)), "signature")):
        with pytest.raises(RosterRejected, match=why):
            verify(signed)
    with pytest.raises(RosterRejected, match="first owner"):
        verify_next(first.roster.signed(guest), previous=None, device_id=DEVICE, robot=robot.public, first_owner=guest.public)
    with pytest.raises(RosterRejected, match="another robot"):
        verify_next(first.roster.signed(owner), previous=None, device_id=DEVICE, robot=owner.public, first_owner=owner.public)


def test_a_member_left_out_gets_no_package_and_cannot_open_anothers() -> None:
    owner, guest, robot, epoch = household()
    _, body = new_epoch(epoch.roster.signed(owner), robot)
    assert sorted(package["kid"] for package in body["packages"]) == sorted([owner.kid, guest.kid])
    owners = next(package for package in body["packages"] if package["kid"] == owner.kid)
    with pytest.raises(ValueError):
        open_package(owners | {"kid": guest.kid}, guest, epoch.roster)
    assert len(open_package(owners, owner, epoch.roster)) == 32


def test_the_identity_file_is_the_users_alone(tmp_path: Path) -> None:
    path = tmp_path / "keys" / "identity.json"
    made = Identity.load_or_create(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert Identity.load_or_create(path).public == made.public
    path.chmod(0o640)
    with pytest.raises(PermissionError):
        Identity.load_or_create(path)


def test_a_sealed_robot_reads_only_the_relays_own_unsealed_frames(tmp_path: Path) -> None:
    # The relay refuses unsealed app frames on a sealed device; the robot does not rely on it.
    device = SealedDevice(tmp_path, DEVICE)
    assert device.reads_unsealed({"type": "event", "event": "turn_credentials", "data": {}})
    assert device.reads_unsealed({"type": "roster"}) and device.reads_unsealed({"type": "error", "code": "x"})
    for forged in ({"type": "command", "id": "1", "command": "treat"}, {"type": "event", "event": "bark_detected"},
                   {"type": "http_request", "id": "h1"}, {"type": "signal", "sdp": "v=0"}):
        assert not device.reads_unsealed(forged)
    assert device.rejected == {"unsealed": 4}


def test_departures_signed_ahead_match_the_vectors() -> None:
    vector = VECTORS["departures"]
    roster = Roster.parse(b64decode(vector["roster"]))
    chain = departure_chain(roster, vector_identity("owner"), vector["now"])
    assert [signed.to_json() for signed in chain] == vector["chain"]
    assert verify_chain(chain, roster) == chain
