"""A sealed robot through the real relay (docs/protocol.md "The sealed household (v1.5)"): the robot
library seals everything it sends and opens only what a member sealed, enforcing the roster's
roles itself; a marker in every command, response and event crosses the relay and is found in
none of its tables nor its log. The app side here is the contract written out from the
primitives' library (pyca), as a third implementation would: the Swift library's own checks are
in WimzSealedTests."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

from wimz_robot import RobotClient
from wimz_robot.sealed import (Epoch, Identity, Member, PublicKeys, Roster, RosterRejected, Sender, SignedRoster, associated_data,
                               b64decode, b64encode, frame_key, frame_nonce, open_package)
from wimz_robot.sealed.device import SealedDevice
from conftest import push_env
from wimz_testkit import RelayNode, http_json

from test_recovery import app_socket as recovering_socket
from test_turn_refresh import allocate, turn_stack  # noqa: F401 — turn_stack is the fixture
from test_robot_client import app_socket, eventually, next_message
from test_sealed_relay import hand_over_keys, issue


def open_from_robot(epoch: Epoch, robot: PublicKeys, device_id: str, frame: dict[str, Any]) -> dict[str, Any]:
    """An app's opening of the robot's frame: the robot's signature, then the AEAD."""
    kind = frame.get("kind")
    aad = associated_data(device_id, frame["epoch"], frame["kid"], frame["sid"], frame["n"], frame["ts"], kind)
    ct = b64decode(frame["ct"])
    assert frame["kid"] == robot.kid and robot.verifies(b64decode(frame["sig"]), aad + ct)
    key = frame_key(epoch.secret, b64decode(frame["sid"]), device_id, frame["kid"])
    return dict(json.loads(ChaCha20Poly1305(key).decrypt(frame_nonce(frame["n"]), ct, aad)))


def epoch_for(base: str, token: str, identity: Identity) -> Epoch:
    """The current epoch as an app gets it: its own package from ``{base}/epochs/current``, opened."""
    answer = http_json(f"{base}/epochs/current", token)[1]
    signed = SignedRoster.from_json(answer["roster"])
    return Epoch(signed.roster, open_package(answer["package"], identity, signed.roster))


def assert_marker_nowhere(marker: str, database, relay: RelayNode) -> None:
    """``marker`` is in none of the relay's tables and not in its log."""
    tables = database.psql("SELECT string_agg(table_name, ' ') FROM information_schema.tables "
                           "WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'").split()
    assert "audit_log" in tables and "device_state_events" in tables
    for table in tables:
        assert marker not in database.psql(f"SELECT coalesce(string_agg(t::text, ' '), '') FROM {table} t"), table
    assert not any(marker in line for line in relay.lines)


@asynccontextmanager
async def one_owner_household(relay_url: str, device: tuple[str, str, str], tmp_path: Path,
                              owner: Identity | None = None) -> AsyncIterator[tuple[RobotClient, Epoch]]:
    """The robot library on a sealed device whose roster is its owner alone (epoch 1), and the
    owner's epoch as its app opened it. ``owner``: the owner's identity (a new one by default)."""
    device_id, robot_token, owner_token = device
    owner = owner or Identity.generate()
    base = f"{relay_url}/api/devices/{device_id}/sealed"
    assert hand_over_keys(base, owner_token, owner)[0] == 200
    sealed = SealedDevice(tmp_path / "seal", device_id)
    sealed.pin_first_owner(owner.public)
    async with RobotClient(relay_url, device_id, robot_token, sealed=sealed) as client:
        await client.wait_connected(timeout=10)
        roster = Roster.make(device_id, 1, None, int(time.time() * 1000), sealed.identity.public,
                             [Member(owner.public, "owner", True, None, "owner")])
        await client.accept_roster(roster.signed(owner).to_json())
        yield client, epoch_for(base, owner_token, owner)


async def test_a_sealed_household_through_the_relay_leaves_no_marker_behind(relay, database, device, tmp_path: Path) -> None:
    device_id, robot_token, owner_token = device
    until = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 7200))
    guest_token = issue(database, relay, device_id, "--access", "guest", "--until", until, "--label", "sitter")
    marker = f"MARKER-{secrets.token_hex(8)}"
    owner, guest = Identity.generate(), Identity.generate()
    sealed = SealedDevice(tmp_path / "seal", device_id)
    sealed.pin_first_owner(owner.public)  # learned on the home Wi-Fi, not through the relay
    base = f"{relay.url}/api/devices/{device_id}/sealed"
    for token, identity in ((owner_token, owner), (guest_token, guest)):
        assert hand_over_keys(base, token, identity)[0] == 200

    seen: list[Any] = []
    async with RobotClient(relay.url, device_id, robot_token, sealed=sealed) as client:
        @client.command("treat")
        def treat(data: dict[str, Any], sender: Any) -> dict[str, Any]:
            seen.append((data, sender))
            return {"echo": data["note"]}

        @client.on_message
        async def signalling(message: dict[str, Any], sender: Any) -> None:
            # WebRTC signalling: the robot answers an offer (its SDP and DTLS fingerprint sealed).
            if message.get("type") == "webrtc_offer":
                await client.send({"type": "webrtc_answer", "sdp": message["sdp"].replace("offer", "answer"),
                                   "to": sender.kid})

        await client.wait_connected(timeout=10)
        app = await app_socket(relay, device_id, owner_token)
        roster = Roster.make(device_id, 1, None, int(time.time() * 1000), sealed.identity.public,
                             [Member(owner.public, "owner", True, None, "owner"),
                              Member(guest.public, "guest", False, int(time.time() * 1000) + 3_600_000, "sitter")])
        assert await client.accept_roster(roster.signed(owner).to_json()) == 1
        assert http_json(base, owner_token)[1] == {"sealed": True, "epoch": 1}
        # The node serving the device heard of it: the connected app is told, and from now on
        # the relay itself refuses what would go around the seal.
        assert await next_message(app, lambda m: m.get("type") == "epoch", timeout=30) == {"type": "epoch", "epoch": 1}
        status, refusal = http_json(f"{relay.url}/api/devices/{device_id}/robot/status", owner_token)
        assert (status, refusal["error"]) == (409, "sealed_device")

        # Each app fetches its own package and opens it.
        owner_epoch, guest_epoch = epoch_for(base, owner_token, owner), epoch_for(base, guest_token, guest)
        assert owner_epoch.secret == guest_epoch.secret == sealed.epoch.secret  # type: ignore[union-attr]

        sealer = Sender(owner, device_id)
        command = {"type": "command", "id": "c1", "command": "treat", "data": {"note": marker}}
        await app.send(json.dumps(sealer.seal(owner_epoch, json.dumps(command).encode())))
        frame = await next_message(app, lambda m: m.get("type") == "sealed")
        response = open_from_robot(owner_epoch, sealed.identity.public, device_id, frame)
        assert response == {"type": "response", "id": "c1", "ok": True, "data": {"echo": marker}}
        assert seen[0][1].kid == owner.kid and seen[0][1].access == "owner" and seen[0][1].token_id is None

        # WebRTC signalling both ways, sealed: the relay never sees an SDP, so it can't swap a fingerprint.
        sdp = f"v=0 offer a=fingerprint:sha-256 AB:CD {marker}"
        await app.send(json.dumps(sealer.seal(owner_epoch, json.dumps({"type": "webrtc_offer", "sdp": sdp}).encode())))
        frame = await next_message(app, lambda m: m.get("type") == "sealed")
        answer = open_from_robot(owner_epoch, sealed.identity.public, device_id, frame)
        assert answer == {"type": "webrtc_answer", "sdp": sdp.replace("offer", "answer"), "to": owner.kid}

        # The robot's events go sealed, with the kind the relay may see.
        assert await client.send_event("bark_detected", {"confidence": 0.9, "note": marker})
        frame = await next_message(app, lambda m: m.get("type") == "sealed")
        assert frame["kind"] == "bark_detected" and marker not in json.dumps(frame)
        assert open_from_robot(owner_epoch, sealed.identity.public, device_id, frame)["data"]["note"] == marker
        assert await client.send_event("mode_changed", {"mode": marker})  # one the relay keeps as last-known state
        frame = await next_message(app, lambda m: m.get("type") == "sealed")
        assert frame["kind"] == "mode_changed"
        held = frame["ct"].encode()  # the relay keeps it for the next app's greeting

        # An unsealed command is the relay's to refuse; what the robot refuses itself: a flipped
        # byte, a replay, a guest without control. None closes the socket or reaches the handler.
        await app.send(json.dumps({"type": "command", "id": "c2", "command": "treat", "data": {"note": "plain"}}))
        refused_plain = await next_message(app, lambda m: m.get("type") == "error")
        assert refused_plain["code"] == "sealed_device" and refused_plain["id"] == "c2"
        flipped = sealer.seal(owner_epoch, json.dumps(command | {"id": "c3"}).encode())
        flipped["ct"] = b64encode(bytes([b64decode(flipped["ct"])[0] ^ 1]) + b64decode(flipped["ct"])[1:])
        await app.send(json.dumps(flipped))
        good = sealer.seal(owner_epoch, json.dumps(command | {"id": "c4"}).encode())
        await app.send(json.dumps(good))
        await app.send(json.dumps(good))
        frame = await next_message(app, lambda m: m.get("type") == "sealed")
        assert open_from_robot(owner_epoch, sealed.identity.public, device_id, frame)["id"] == "c4"
        await eventually(lambda: sealed.rejected.get("replayed", 0) >= 1)
        assert sealed.rejected == {"tampered": 1, "replayed": 1} and len(seen) == 2

        guest_app = await app_socket(relay, device_id, guest_token)
        guest_sealer = Sender(guest, device_id)
        await guest_app.send(json.dumps(guest_sealer.seal(guest_epoch, json.dumps(command | {"id": "g1"}).encode())))
        # (Its greeting replays the last mode_changed, sealed, by its kind; the answer has none.)
        frame = await next_message(guest_app, lambda m: m.get("type") == "sealed" and "kind" not in m)
        refused = open_from_robot(guest_epoch, sealed.identity.public, device_id, frame)
        assert refused["id"] == "g1" and refused["error"]["code"] == "forbidden" and len(seen) == 2
        await guest_app.close()
        await app.close()
        # Its memory, as a dump would show it after the frames passed: the sealed frame it holds
        # is there (so the search reads what the relay holds), the marker is not.
        assert relay.memory_holds([marker.encode(), held]) == {held}

    # The marker crossed the relay in commands, responses, SDP and events; it is in none of its tables and not in its log.
    assert_marker_nowhere(marker, database, relay)


def test_a_restarted_robot_keeps_its_epoch_and_its_first_owner(tmp_path: Path) -> None:
    device_id = "robot-restart"
    first = SealedDevice(tmp_path, device_id)
    owner = Identity.generate()
    first.pin_first_owner(owner.public)
    roster = Roster.make(device_id, 1, None, 0, first.identity.public, [Member(owner.public, "owner", True, None, "")])
    first.accept(roster.signed(owner))
    again = SealedDevice(tmp_path, device_id)
    assert again.identity.public == first.identity.public and again.first_owner == owner.public
    assert again.epoch is not None and again.epoch.secret == first.epoch.secret  # type: ignore[union-attr]
    assert oct((tmp_path / "state.json").stat().st_mode & 0o777) == "0o600"
    # The same roster again (a frame and a catch-up) gives the epoch's body as the owner signed it,
    # whatever signature came with the repeat.
    repeat = again.accept(SignedRoster(roster, owner.kid, bytes(64)))
    assert repeat["roster"] == roster.signed(owner).to_json() and again.epoch.secret == first.epoch.secret  # type: ignore[union-attr]
    frame = Sender(owner, device_id).seal(again.epoch, b'{"type":"command","id":"1","command":"x"}')
    assert again.open(frame) is not None


async def test_rosters_an_owner_signs_reach_the_robot_through_the_relay(relay, database, device, tmp_path: Path) -> None:
    device_id, robot_token, owner_token = device
    family_token = issue(database, relay, device_id, "--access", "family", "--label", "family")
    owner, family = Identity.generate(), Identity.generate()
    sealed = SealedDevice(tmp_path / "seal", device_id)
    sealed.pin_first_owner(owner.public)
    base = f"{relay.url}/api/devices/{device_id}/sealed"

    def roster(epoch: int, prev: str | None, members: list[Member]) -> dict[str, Any]:
        return Roster.make(device_id, epoch, prev, int(time.time() * 1000), sealed.identity.public, members).signed(owner).to_json()

    me = Member(owner.public, "owner", True, None, "owner")
    async with RobotClient(relay.url, device_id, robot_token, sealed=sealed) as client:
        await client.wait_connected(timeout=10)
        app = await app_socket(relay, device_id, owner_token)
        # The first roster goes through the relay too: the robot checks it against the owner it pinned.
        assert http_json(f"{base}/rosters", family_token, "POST", roster(1, None, [me]))[1]["error"] == "forbidden"
        assert http_json(f"{base}/rosters", owner_token, "POST", roster(2, None, [me]))[1]["error"] == "conflict"
        assert http_json(f"{base}/rosters", owner_token, "POST", roster(1, None, [me])) == (202, {"epoch": 1})
        assert await next_message(app, lambda m: m.get("type") == "epoch", timeout=30) == {"type": "epoch", "epoch": 1}
        first = sealed.epoch.roster  # type: ignore[union-attr]
        await app.close()
    # Signed while the robot was away: it takes it when it is back.
    family_member = Member(family.public, "family", True, None, "family")
    assert http_json(f"{base}/rosters", owner_token, "POST", roster(2, first.hash, [me, family_member])) == (202, {"epoch": 2})
    async with RobotClient(relay.url, device_id, robot_token, sealed=SealedDevice(tmp_path / "seal", device_id)) as back:
        await eventually(lambda: back.sealed is not None and back.sealed.epoch is not None and back.sealed.epoch.number == 2,
                         timeout=30)
        second = back.sealed.epoch.roster  # type: ignore[union-attr]
    assert http_json(base, owner_token)[1] == {"sealed": True, "epoch": 2}
    # A roster the robot does not accept (the family member making itself owner) becomes no epoch.
    usurper = Member(family.public, "owner", True, None, "family")
    forged = Roster.make(device_id, 3, second.hash, 0, sealed.identity.public, [usurper]).signed(family).to_json()
    assert http_json(f"{base}/rosters", owner_token, "POST", forged)[0] == 202  # the relay cannot tell; the robot can
    refusing = SealedDevice(tmp_path / "seal", device_id)
    async with RobotClient(relay.url, device_id, robot_token, sealed=refusing):
        # Refused once or twice: it may come both as a frame and when the robot catches up.
        await eventually(lambda: refusing.rejected.get("roster", 0) >= 1, timeout=30)
    assert http_json(base, owner_token)[1] == {"sealed": True, "epoch": 2} and refusing.epoch.number == 2  # type: ignore[union-attr]


async def test_a_sealed_device_is_pushed_and_replayed_by_kind(pushing, apns, database, device, tmp_path: Path) -> None:
    """Pushes by `kind` carry the sealed frame, opened here as the app's Notification Service
    Extension would; the last-known state is kept and replayed as sealed frames."""
    device_id, robot_token, owner_token = device
    marker = f"MARKER-{secrets.token_hex(8)}"
    phone_token = secrets.token_hex(32)
    assert http_json(f"{pushing.url}/api/devices/{device_id}/push", owner_token, "PUT",
                     {"platform": "apns", "token": phone_token, "environment": "sandbox",
                      "events": ["bark_detected", "mission_completed"]})[0] == 200
    async with one_owner_household(pushing.url, device, tmp_path) as (client, epoch):
        sealed = client.sealed
        assert sealed is not None
        assert await client.send_event("bark_detected", {"dog_name": marker, "confidence": 0.9})
        assert await client.send_event("mission_progress", {"status": "completed", "trick": marker, "dog_name": "Rex"})
        assert await client.send_event("mode_changed", {"mode": marker})
        seen = apns.wait_for(lambda got: {r.body["wimz"]["event"] for r in got if r.answered == 200}
                             >= {"bark_detected", "mission_completed"}, timeout=30)
        for push in (r for r in seen if r.answered == 200):
            assert marker not in json.dumps(push.body)
            assert push.body["aps"]["alert"] == {"loc-key": "WIMZ_SEALED"} and push.body["aps"]["mutable-content"] == 1
            opened = open_from_robot(epoch, sealed.identity.public, device_id, push.body["wimz"]["sealed"])
            assert marker in json.dumps(opened)
        # An app that connects now gets the last mode_changed as the robot sealed it.
        app = await app_socket(pushing, device_id, owner_token)
        replayed = await next_message(app, lambda m: m.get("type") == "sealed" and m.get("kind") == "mode_changed", timeout=30)
        assert open_from_robot(epoch, sealed.identity.public, device_id, replayed)["data"] == {"mode": marker}
        await app.close()


async def test_the_lock_screen_shows_what_the_policy_allows(apns, database, device, tmp_path: Path) -> None:
    """A sealed mission reaches the lock screen (v1.4) from the robot's unsealed lock_screen
    frames: with the default policy `status`, its state and stage, never the trick or the dog."""
    device_id, robot_token, owner_token = device
    relay = RelayNode.started(database, env=push_env(apns))
    try:
        marker = f"MARKER-{secrets.token_hex(8)}"
        owner, start_token = Identity.generate(), secrets.token_hex(32)
        assert http_json(f"{relay.url}/api/devices/{device_id}/live-activity/start-token", owner_token, "PUT",
                         {"token": start_token, "environment": "sandbox"})[0] == 200
        sealed = SealedDevice(tmp_path / "seal", device_id)
        sealed.pin_first_owner(owner.public)
        async with RobotClient(relay.url, device_id, robot_token, sealed=sealed) as client:
            await client.wait_connected(timeout=10)
            roster = Roster.make(device_id, 1, None, 0, sealed.identity.public, [Member(owner.public, "owner", True, None, "")])
            await client.accept_roster(roster.signed(owner).to_json())
            await client.send_event("mission_progress", {"status": "waiting_for_dog", "trick": marker, "dog_name": marker,
                                                         "stage": 1, "total_stages": 5, "progress": 0.0, "rewards": 0})
            seen = apns.wait_for(lambda got: any(r.token == start_token and r.answered == 200 for r in got), timeout=30)
        start = next(r for r in seen if r.token == start_token)
        state = start.body["aps"]["content-state"]
        assert state["status"] == "waiting_for_dog" and state["stage"] == 1 and state["total_stages"] == 5
        assert state.get("trick") is None and state.get("dog_name") is None and marker not in json.dumps(start.body)
    finally:
        relay.stop()


def test_each_lock_screen_policy_lets_through_what_it_says(tmp_path: Path) -> None:
    owner = Identity.generate()
    progress = {"type": "event", "event": "mission_progress",
                "data": {"status": "watching", "trick": "sit", "dog_name": "Rex", "stage": 2, "total_stages": 5, "progress": 0.4}}
    for policy, expected in (("off", None), ("status", {"status": "watching", "stage": 2, "total_stages": 5, "progress": 0.4}),
                             ("full", progress["data"])):
        sealed = SealedDevice(tmp_path / policy, "robot-1")
        sealed.pin_first_owner(owner.public)
        roster = Roster.make("robot-1", 1, None, 0, sealed.identity.public, [Member(owner.public, "owner", True, None, "")], policy)
        sealed.accept(roster.signed(owner))
        frame = sealed.lock_screen(progress)
        assert (frame["data"] if frame else None) == expected
        assert sealed.lock_screen({"type": "event", "event": "bark_detected", "data": {}}) is None


def test_the_pairing_window_pins_one_first_owner(tmp_path: Path) -> None:
    """The first owner's trust path on the home network: the robot's keys for the asking, and the
    first app's keys pinned while the window is open; no second owner, no pairing after it."""
    from wimz_robot.sealed.pairing import PairingServer
    from wimz_testkit import free_port

    device = SealedDevice(tmp_path / "seal", "robot-1")
    pairing = PairingServer(device, "127.0.0.1", free_port(), window=60).start()
    base = f"http://127.0.0.1:{pairing.port}/wimz/sealed"
    try:
        status, robot = http_json(f"{base}/robot")
        assert status == 200 and robot["device_id"] == "robot-1" and PublicKeys.from_json(robot) == device.identity.public
        assert robot["code"] == device.identity.public.verification_code
        owner, other = Identity.generate(), Identity.generate()
        assert http_json(f"{base}/owner", method="POST", body={"kid": "0" * 32, "sign": "AA", "hpke": "AA"})[0] == 400
        assert http_json(f"{base}/owner", method="POST", body=owner.public.to_json()) == (200, robot)
        assert device.first_owner == owner.public and pairing.paired.is_set()
        assert http_json(f"{base}/owner", method="POST", body=owner.public.to_json())[0] == 200  # the same app, again
        status, refusal = http_json(f"{base}/owner", method="POST", body=other.public.to_json())
        assert (status, refusal["error"]) == (409, "already_paired") and device.first_owner == owner.public
    finally:
        pairing.close()
    # Kept across a restart, and a window that has closed pins no one.
    assert SealedDevice(tmp_path / "seal", "robot-1").first_owner == owner.public
    # A wrong pairing (the codes differ) starts over before the first epoch: the next window pins
    # the right app; once a roster that owner signed is accepted, only rosters move ownership.
    device.unpin_first_owner()
    assert SealedDevice(tmp_path / "seal", "robot-1").first_owner is None
    again = PairingServer(device, "127.0.0.1", free_port(), window=60).start()
    try:
        assert http_json(f"http://127.0.0.1:{again.port}/wimz/sealed/owner", method="POST", body=other.public.to_json())[0] == 200
    finally:
        again.close()
    device.accept(Roster.make("robot-1", 1, None, 0, device.identity.public, [Member(other.public, "owner", True, None, "")]).signed(other))
    with pytest.raises(RosterRejected, match="rosters"):
        device.unpin_first_owner()
    assert device.first_owner == other.public
    fresh = SealedDevice(tmp_path / "fresh", "robot-2")
    closed = PairingServer(fresh, "127.0.0.1", free_port(), window=0).start()
    try:
        status, refusal = http_json(f"http://127.0.0.1:{closed.port}/wimz/sealed/owner", method="POST", body=owner.public.to_json())
        assert (status, refusal["error"]) == (403, "pairing_closed") and fresh.first_owner is None
    finally:
        closed.close()


async def test_a_sealed_device_recovers_missed_frames_and_keeps_its_video(turn_stack, device, tmp_path: Path) -> None:
    """Missed-event recovery (v1.1) and TURN work for a sealed device: the relay numbers sealed
    frames it cannot read, an app that dropped gets exactly those it missed (and they open), and
    both ends still get credentials that allocate at a real coturn."""
    relay, coturn = turn_stack
    device_id, robot_token, owner_token = device
    async with one_owner_household(relay.url, device, tmp_path) as (client, epoch):
        sealed = client.sealed
        assert sealed is not None
        app = await recovering_socket(relay, device_id, owner_token, "&recover=1")
        status = (await next_message(app, lambda m: m.get("event") == "device_status", timeout=30))["data"]
        assert await client.send_event("bark_detected", {"n": 0})
        first = await next_message(app, lambda m: m.get("type") == "sealed", timeout=30)
        assert first["seq"] == status["seq"] + 1
        await app.close()
        for n in range(1, 6):
            assert await client.send_event("bark_detected", {"n": n})
        back = await recovering_socket(relay, device_id, owner_token, f"&since={status['epoch']}:{first['seq']}")
        resumed = await next_message(back, lambda m: m.get("event") == "device_status", timeout=30)
        assert resumed["data"]["recovered"] is True
        missed = [await next_message(back, lambda m: m.get("type") == "sealed", timeout=30) for _ in range(5)]
        assert [m["seq"] for m in missed] == list(range(first["seq"] + 1, first["seq"] + 6))
        # The relay's number sits outside the seal: each frame opens as the robot sealed it.
        assert [open_from_robot(epoch, sealed.identity.public, device_id, m)["data"]["n"] for m in missed] == [1, 2, 3, 4, 5]
        await back.close()
        for token in (robot_token, owner_token):
            status_code, credentials = http_json(f"{relay.url}/api/turn/credentials", token)
            assert status_code == 200
            await allocate(coturn.port, credentials["username"], credentials["credential"])
