"""A guest's end is a new epoch with no owner's app running (docs/protocol.md "Sealed devices
(v1.5)"): an owner's app signs the departures ahead, the robot keeps them (across a restart) and
accepts each when its own clock reaches it; a schedule that would do anything else is refused."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from wimz_robot import RobotClient
from wimz_robot.sealed import Identity, Member, Roster, RosterRejected, Sender, departure_chain, verify_chain
from wimz_robot.sealed.device import SealedDevice
from wimz_testkit import http_json

from test_robot_client import app_socket, eventually
from test_sealed_relay import hand_over_keys, issue
from test_sealed_robot import epoch_for

DEVICE = "dev-departures"


def household(tmp_path: Path, guest_end_ms: int) -> tuple[SealedDevice, Identity, Identity, Roster]:
    """A robot in epoch 1 with an owner and a guest whose access ends at ``guest_end_ms``."""
    owner, guest = Identity.generate(), Identity.generate()
    sealed = SealedDevice(tmp_path / "seal", DEVICE)
    sealed.pin_first_owner(owner.public)
    roster = Roster.make(DEVICE, 1, None, int(time.time() * 1000), sealed.identity.public,
                         [Member(owner.public, "owner", True, None, "owner"), Member(guest.public, "guest", False, guest_end_ms, "sitter")])
    sealed.accept(roster.signed(owner))
    return sealed, owner, guest, roster


def test_a_schedule_only_takes_out_whom_it_may_and_outlives_a_restart(tmp_path: Path) -> None:
    now = int(time.time() * 1000)
    sealed, owner, guest, roster = household(tmp_path, now + 3_600_000)
    chain = departure_chain(roster, owner, now)
    assert [signed.roster.epoch for signed in chain] == [2]
    assert [m.kid for m in chain[0].roster.members] == [owner.kid] and chain[0].roster.made == now + 3_600_000

    def refused(schedule: list, why: str) -> None:
        with pytest.raises(RosterRejected, match=why):
            sealed.schedule_departures(schedule)

    refused([], "1 to 32")
    # Signed by the guest, not an owner; a roster that adds someone; one that drops the guest before
    # its end; one due before the current roster was made; a roster of another epoch.
    refused([Roster.make(DEVICE, 2, roster.hash, now + 3_600_000, sealed.identity.public, [roster.members[0]]).signed(guest)],
            "signed by an owner")
    stranger = Member(Identity.generate().public, "family", True, None, "stranger")
    refused([Roster.make(DEVICE, 2, roster.hash, now + 3_600_000, sealed.identity.public, [*roster.members, stranger]).signed(owner)],
            "only takes out")
    refused([Roster.make(DEVICE, 2, roster.hash, now + 1_000, sealed.identity.public, [roster.members[0]]).signed(owner)],
            "only takes out")
    refused([Roster.make(DEVICE, 2, roster.hash, roster.made - 1, sealed.identity.public, [roster.members[0]]).signed(owner)],
            "comes later")
    refused([Roster.make(DEVICE, 3, roster.hash, now + 3_600_000, sealed.identity.public, [roster.members[0]]).signed(owner)],
            "does not follow")
    assert sealed.next_departure() is None and sealed.rejected["roster"] == 6

    sealed.schedule_departures(chain)
    # Kept on disk with the epochs: a robot restarted before the guest's end still applies it.
    again = SealedDevice(tmp_path / "seal", DEVICE)
    assert again.next_departure() == chain[0]
    # Any other roster accepted first (here: the guest's control granted) ends the schedule.
    granted = Roster.make(DEVICE, 2, roster.hash, now, sealed.identity.public,
                          [roster.members[0], Member(guest.public, "guest", True, now + 3_600_000, "sitter")])
    again.accept(granted.signed(owner))
    assert again.next_departure() is None and verify_chain(departure_chain(granted, owner, now), granted)


async def test_a_guests_end_is_a_new_epoch_with_no_owners_app_running(relay, database, tmp_path: Path) -> None:
    robot_token, owner_token = database.add_device(DEVICE)
    # The guest's end in the roster (what the robot enforces) a moment ahead; its token's on the
    # relay later, so that the relay's expiry plays no part. The schedule is made as of the roster
    # (the app's clock could be past that end on a busy machine) and the test waits for what
    # follows, however long that takes, never for a time it set.
    guest_token = issue(database, relay, DEVICE, "--access", "guest", "--label", "sitter",
                        "--until", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 7200)))
    end = int(time.time() * 1000) + 2_000
    sealed, owner, guest, roster = household(tmp_path, end)
    base = f"{relay.url}/api/devices/{DEVICE}/sealed"
    for token, identity in ((owner_token, owner), (guest_token, guest)):
        assert hand_over_keys(base, token, identity)[0] == 200

    async with RobotClient(relay.url, DEVICE, robot_token, sealed=sealed) as client:
        await client.wait_connected(timeout=10)
        await client.accept_roster(sealed.signed.to_json())  # type: ignore[union-attr]
        # The owner's app hands the robot the departures, sealed, and goes away.
        app = await app_socket(relay, DEVICE, owner_token)
        schedule = {"type": "roster_schedule", "rosters": [s.to_json() for s in departure_chain(roster, owner, roster.made)]}
        await app.send(json.dumps(Sender(owner, DEVICE).seal(epoch_for(base, owner_token, owner), json.dumps(schedule).encode())))
        await eventually(lambda: sealed.next_departure() is not None, timeout=30)
        await app.close()

        await eventually(lambda: sealed.epoch is not None and sealed.epoch.number == 2, timeout=60)
        assert [m.kid for m in sealed.epoch.roster.members] == [owner.kid]  # type: ignore[union-attr]
        assert sealed.epoch.roster.made == end <= time.time() * 1000  # type: ignore[union-attr]
        # The relay holds epoch 2; the owner opens it, the guest has no package in it and, as for
        # any member a roster drops, its token is revoked.
        await eventually(lambda: http_json(base, owner_token)[1] == {"sealed": True, "epoch": 2}, timeout=30)
        assert epoch_for(base, owner_token, owner).secret == sealed.epoch.secret  # type: ignore[union-attr]
        def packages(epoch: int) -> list[str]:
            return database.psql(f"SELECT kid FROM sealed_packages WHERE device_id = '{DEVICE}' AND epoch = {epoch} ORDER BY kid").split()
        assert packages(1) == sorted([owner.kid, guest.kid]) and packages(2) == [owner.kid]
        assert http_json(base, guest_token)[0] == 401
    assert sealed.next_departure() is None


async def test_a_guest_signed_in_leaves_on_time_with_no_owners_app_after_the_one_that_signed_it_in(
        relay, database, tmp_path: Path) -> None:
    """The owner's app that signs a guest in hands over the departures with that roster
    (``POST …/sealed/rosters`` with ``"departures"``); here the robot is away then, takes both
    from the relay when it returns, and the guest leaves at its end with no app running."""
    device_id = f"{DEVICE}-2"
    robot_token, owner_token = database.add_device(device_id)
    guest_token = issue(database, relay, device_id, "--access", "guest", "--label", "sitter",
                        "--until", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 7200)))
    owner, guest = Identity.generate(), Identity.generate()
    base = f"{relay.url}/api/devices/{device_id}/sealed"
    for token, identity in ((owner_token, owner), (guest_token, guest)):
        assert hand_over_keys(base, token, identity)[0] == 200
    sealed = SealedDevice(tmp_path / "seal", device_id)
    sealed.pin_first_owner(owner.public)
    owner_member = Member(owner.public, "owner", True, None, "owner")
    first = Roster.make(device_id, 1, None, int(time.time() * 1000), sealed.identity.public, [owner_member])
    async with RobotClient(relay.url, device_id, robot_token, sealed=sealed) as client:
        await client.wait_connected(timeout=10)
        await client.accept_roster(first.signed(owner).to_json())

    # The robot is away. The owner's app signs the guest in, with its departure, and is gone.
    made = int(time.time() * 1000)
    second = Roster.make(device_id, 2, first.hash, made, sealed.identity.public,
                         [owner_member, Member(guest.public, "guest", False, made + 2_000, "sitter")])
    departures = [signed.to_json() for signed in departure_chain(second, owner, made)]
    proposal = {**second.signed(owner).to_json(), "departures": departures}
    # The relay checks the shape: a list of signed rosters of this device, epochs 3, 4, …
    for bad in ([], departures * 2, [second.signed(owner).to_json()], "x"):
        status, answer = http_json(f"{base}/rosters", owner_token, "POST", {**proposal, "departures": bad})
        assert (status, answer["error"]) == (400, "bad_request"), bad
    assert http_json(f"{base}/rosters", owner_token, "POST", proposal) == (202, {"epoch": 2})

    async with RobotClient(relay.url, device_id, robot_token, sealed=sealed) as client:
        await client.wait_connected(timeout=10)
        await eventually(lambda: sealed.epoch is not None and sealed.epoch.number == 3, timeout=60)
        assert [m.kid for m in sealed.epoch.roster.members] == [owner.kid]  # type: ignore[union-attr]
        assert sealed.epoch.roster.made == made + 2_000  # type: ignore[union-attr]
        await eventually(lambda: http_json(base, owner_token)[1] == {"sealed": True, "epoch": 3}, timeout=30)
        assert http_json(base, guest_token)[0] == 401
