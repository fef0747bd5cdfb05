"""The sealed household through the real relay (docs/protocol.md "The sealed household (v1.5)"):
apps hand over their keys, an owner signs the roster, the robot stores each epoch with every
member's sealed package, and each app gets its own package back and opens it. A roster that
drops a member removes it as v1.3 does. Real crypto at both ends (wimz_robot.sealed); the relay
only stores and hands out what it cannot open."""

from __future__ import annotations

import time
from typing import Any

from wimz_robot.sealed import Identity, Member, PublicKeys, Roster, SignedRoster, b64decode, new_epoch, open_package, verify_next
from wimz_testkit import http_json


def issue(database, relay, device_id: str, *args: str) -> str:
    """A new app token of the device (`wimz-relay token issue` with `args`), once the relay knows it."""
    token = database.cli("token", "issue", "--device", device_id, "--role", "app", *args).strip().splitlines()[-1]
    relay.wait_known(device_id, token)
    return token


def hand_over_keys(base: str, token: str, identity: Identity) -> tuple[int, dict]:
    """`PUT …/sealed/member-key` with the identity's public keys, as an app does."""
    keys = identity.public.to_json()
    return http_json(f"{base}/member-key", token, "PUT", {"sign": keys["sign"], "hpke": keys["hpke"]})


def test_epochs_reach_each_member_and_a_dropped_member_is_removed(relay, database, device) -> None:
    device_id, robot_token, owner_token = device
    family_token = issue(database, relay, device_id, "--access", "family", "--label", "family")
    outsider_token = issue(database, relay, device_id, "--access", "family", "--label", "family")
    base = f"{relay.url}/api/devices/{device_id}/sealed"
    robot, owner, family, outsider = Identity.generate(), Identity.generate(), Identity.generate(), Identity.generate()

    assert http_json(base, robot_token) == (200, {"sealed": False, "epoch": None})
    for token, identity in ((owner_token, owner), (family_token, family), (outsider_token, outsider)):
        assert hand_over_keys(base, token, identity) == (200, {"kid": identity.kid})
    status, pending = http_json(f"{base}/members", owner_token)
    assert status == 200 and {m["kid"] for m in pending["members"]} == {owner.kid, family.kid, outsider.kid}
    listed = {m["kid"]: m for m in pending["members"]}
    assert listed[family.kid]["access"] == "family" and PublicKeys.from_json(listed[family.kid]) == family.public

    # The owner's app signs the first roster (the owner and the family member; not the outsider);
    # the robot, which pinned the owner's key on the home Wi-Fi, verifies it and seals the epoch.
    def roster_of(epoch: int, prev: str | None, people: list[Identity]) -> SignedRoster:
        members = [Member(PublicKeys.from_json(listed[p.kid]), listed[p.kid]["access"], True, None, listed[p.kid]["label"])
                   for p in people]
        return Roster.make(device_id, epoch, prev, int(time.time() * 1000), robot.public, members).signed(owner)

    first = verify_next(roster_of(1, None, [owner, family]), previous=None, device_id=device_id, robot=robot.public,
                        first_owner=owner.public)
    epoch1, body1 = new_epoch(SignedRoster(first, owner.kid, owner.sign(first.raw)), robot)
    assert http_json(f"{base}/epochs/1", owner_token, "PUT", body1)[1]["error"] == "wrong_role"
    missing_one = body1 | {"packages": body1["packages"][:1]}
    assert http_json(f"{base}/epochs/1", robot_token, "PUT", missing_one)[0] == 400
    assert http_json(f"{base}/epochs/2", robot_token, "PUT", body1)[0] == 400  # the roster says epoch 1
    assert http_json(f"{base}/epochs/1", robot_token, "PUT", body1) == (201, {"epoch": 1})
    assert http_json(f"{base}/epochs/1", robot_token, "PUT", body1)[1]["error"] == "conflict"
    assert http_json(base, owner_token) == (200, {"sealed": True, "epoch": 1})

    def secret_of(token: str, identity: Identity, epoch: str = "current") -> bytes:
        status, answer = http_json(f"{base}/epochs/{epoch}", token)
        assert status == 200, answer
        roster = SignedRoster.from_json(answer["roster"]).roster
        return open_package(answer["package"], identity, roster)

    assert secret_of(owner_token, owner) == secret_of(family_token, family) == secret_of(family_token, family, "1") == epoch1.secret
    assert http_json(f"{base}/epochs/current", outsider_token)[1]["error"] == "not_in_roster"
    assert http_json(f"{base}/epochs/7", owner_token)[0] == 404
    status, pending = http_json(f"{base}/members", owner_token)
    assert [m["kid"] for m in pending["members"]] == [outsider.kid] and pending["departed"] == []

    # Epoch 2 without the family member: its token goes, as a v1.3 removal's does.
    second = verify_next(roster_of(2, first.hash, [owner]), previous=first, device_id=device_id, robot=robot.public)
    epoch2, body2 = new_epoch(SignedRoster(second, owner.kid, owner.sign(second.raw)), robot)
    assert http_json(f"{base}/epochs/2", robot_token, "PUT", body2) == (201, {"epoch": 2})
    assert secret_of(owner_token, owner) == epoch2.secret != epoch1.secret
    # The token is revoked: each node drops it from its cache when the store tells it, a moment later.
    deadline = time.monotonic() + 30
    while http_json(f"{base}/epochs/current", family_token)[0] != 401 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert http_json(f"{base}/epochs/current", family_token)[0] == 401
    audit = database.psql("SELECT event || ':' || coalesce(details->>'reason', details->>'epoch', '') FROM audit_log "
                          "WHERE event IN ('sealed_epoch_added', 'member_removed', 'sealed_member_key_set') ORDER BY at")
    assert audit.split() == ["sealed_member_key_set:"] * 3 + ["sealed_epoch_added:1", "sealed_epoch_added:2", "member_removed:roster"]

    # What the relay stores opens nothing: neither secret is anywhere in its tables.
    stored = database.psql("SELECT string_agg(t::text, ' ') FROM (SELECT * FROM sealed_packages) t") \
        + database.psql("SELECT string_agg(t::text, ' ') FROM (SELECT * FROM sealed_epochs) t")
    for secret in (epoch1.secret, epoch2.secret):
        assert secret.hex() not in stored and secret.hex().upper() not in stored
    assert b64decode(body2["packages"][0]["sealed"]) != epoch2.secret


def test_a_member_removed_as_v13_removes_is_listed_as_departed(relay, database, device) -> None:
    """An owner's app learns whom to sign out: a member removed through the relay (v1.3) whose
    key is in the current epoch is `departed` until a roster without it is stored."""
    device_id, robot_token, owner_token = device
    family_token = issue(database, relay, device_id, "--access", "family", "--label", "family")
    base = f"{relay.url}/api/devices/{device_id}/sealed"
    robot, owner, family = Identity.generate(), Identity.generate(), Identity.generate()
    for token, identity in ((owner_token, owner), (family_token, family)):
        assert hand_over_keys(base, token, identity)[0] == 200

    def store(epoch: int, prev: str | None, people: list[Identity]) -> str:
        roster = Roster.make(device_id, epoch, prev, int(time.time() * 1000), robot.public,
                             [Member(p.public, "owner" if p is owner else "family", True, None, "") for p in people])
        assert http_json(f"{base}/epochs/{epoch}", robot_token, "PUT", new_epoch(roster.signed(owner), robot)[1])[0] == 201
        return roster.hash
    first = store(1, None, [owner, family])
    members = {m["label"]: m for m in http_json(f"{relay.url}/api/devices/{device_id}/members", owner_token)[1]["members"]}
    family_id = members["family"]["token_id"]

    def signed_in(*people: tuple[Identity, str]) -> list[dict[str, Any]]:
        """`signed_in` as the relay lists it: each member's token as it is now."""
        return sorted(({"kid": identity.kid, "token_id": members[label]["token_id"], "access": members[label]["access"],
                        "control": True, "until": None} for identity, label in people), key=lambda m: m["token_id"])

    everyone = signed_in((owner, next(label for label in members if label != "family")), (family, "family"))
    assert http_json(f"{base}/members", owner_token)[1] == {"members": [], "departed": [], "signed_in": everyone}
    assert http_json(f"{relay.url}/api/devices/{device_id}/members/{family_id}", owner_token, "DELETE")[0] == 204
    assert http_json(f"{base}/members", owner_token)[1] == {"members": [], "departed": [family.kid], "signed_in": everyone[:1]}
    store(2, first, [owner])
    assert http_json(f"{base}/members", owner_token)[1] == {"members": [], "departed": [], "signed_in": everyone[:1]}


def test_bodies_that_are_not_the_contracts_are_refused(relay, device) -> None:
    device_id, robot_token, owner_token = device
    base = f"{relay.url}/api/devices/{device_id}/sealed"
    short = {"sign": "AAAA", "hpke": "AAAA"}
    padded = Identity.generate().public.to_json()
    bad_bodies: list[Any] = [short, {"sign": padded["sign"] + "=", "hpke": padded["hpke"]}, {"sign": padded["sign"]}, ["x"]]
    for body in bad_bodies:
        status, answer = http_json(f"{base}/member-key", owner_token, "PUT", body)
        assert (status, answer["error"]) == (400, "bad_request"), body
    for epoch in ("0", "-1", "x", "99999999999"):
        assert http_json(f"{base}/epochs/{epoch}", robot_token, "PUT", {})[0] == 400
    assert http_json(f"{base}/epochs/1", robot_token, "PUT", {"roster": {}})[0] == 400
    assert b64decode(padded["sign"]) and http_json(f"{base}/epochs/current", owner_token)[0] == 404
