"""History for a newcomer in a sealed household (docs/protocol.md v1.6), through the real relay: an
owner's app seals an earlier epoch's secret to a family member with HPKE and signs the grant; the
relay checks the signature against the current roster's owners and hands it to that member alone
with its epoch answers, never to a guest; a roster that makes the member a guest takes it away.
The member opens the earlier secret with its own key."""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta, timezone

from wimz_robot.sealed import Identity, Member, PublicKeys, Roster, SignedRoster, b64decode, b64encode, new_epoch, open_package
from wimz_robot.sealed.epoch import SUITE
from wimz_testkit import http_json

from test_sealed_relay import hand_over_keys, issue


def history_info(device_id: str, epoch: int, kid: str) -> bytes:
    return b"\x00".join([b"wimz-sealed-v1 history", device_id.encode(), str(epoch).encode(), kid.encode()])


def test_an_owner_shares_earlier_history_with_family_and_no_one_else(relay, database, device) -> None:
    device_id, robot_token, owner_token = device
    family_token = issue(database, relay, device_id, "--access", "family", "--label", "family")
    until = (datetime.now(timezone.utc) + timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    guest_token = issue(database, relay, device_id, "--access", "guest", "--label", "guest", "--until", until)
    base = f"{relay.url}/api/devices/{device_id}/sealed"
    robot, owner, family, guest = (Identity.generate() for _ in range(4))
    for token, identity in ((owner_token, owner), (family_token, family), (guest_token, guest)):
        assert hand_over_keys(base, token, identity) == (200, {"kid": identity.kid})
    guest_until = int((time.time() + 7200) * 1000)

    def epoch_of(number: int, prev: str | None, members: list[Member]):
        roster = Roster.make(device_id, number, prev, int(time.time() * 1000), robot.public, members)
        epoch, body = new_epoch(SignedRoster(roster, owner.kid, owner.sign(roster.raw)), robot)
        assert http_json(f"{base}/epochs/{number}", robot_token, "PUT", body) == (201, {"epoch": number})
        return roster, epoch

    me = Member(owner.public, "owner", True, None, "owner")
    first, epoch1 = epoch_of(1, None, [me])
    as_family = Member(family.public, "family", True, None, "family")
    as_guest = Member(guest.public, "guest", False, guest_until, "guest")
    second, _ = epoch_of(2, first.hash, [me, as_family, as_guest])

    def grant_for(member: Identity, signer: Identity, **overrides) -> dict:
        inner = {"device_id": device_id, "kid": member.kid,
                 "epochs": [{"epoch": 1, "sealed": b64encode(SUITE.encrypt(epoch1.secret, member.public.hpke_key(),
                                                                           info=history_info(device_id, 1, member.kid)))}]}
        raw = json.dumps(inner | overrides).encode()
        return {"grant": b64encode(raw), "by": signer.kid, "sig": b64encode(signer.sign(raw))}

    # Refused: another signer than an owner, a forged grant, another device's or member's, the
    # owner itself, a guest, a family token.
    history = f"{base}/history/{family.kid}"
    assert http_json(history, owner_token, "PUT", grant_for(family, family))[1]["error"] == "invalid_grant"
    tampered = grant_for(family, owner) | {"sig": grant_for(family, owner, kid=guest.kid)["sig"]}
    assert http_json(history, owner_token, "PUT", tampered)[1]["error"] == "invalid_grant"
    assert http_json(history, owner_token, "PUT", grant_for(family, owner, device_id="another"))[1]["error"] == "invalid_grant"
    assert http_json(f"{base}/history/{owner.kid}", owner_token, "PUT", grant_for(owner, owner))[1]["error"] == "invalid_grant"
    assert http_json(f"{base}/history/{guest.kid}", owner_token, "PUT", grant_for(guest, owner)) == \
        (403, {"error": "forbidden", "message": "a guest is not given the household's history"})
    assert http_json(history, family_token, "PUT", grant_for(family, owner))[1]["error"] == "forbidden"
    assert http_json(history, owner_token, "PUT", {"grant": "x"})[1]["error"] == "invalid_grant"
    assert "history" not in http_json(f"{base}/epochs/current", family_token)[1]

    # Stored, and handed with the member's epoch answers only.
    grant = grant_for(family, owner)
    assert http_json(history, owner_token, "PUT", grant) == (200, {"kid": family.kid, "epochs": [1]})
    status, answer = http_json(f"{base}/epochs/current", family_token)
    assert status == 200 and answer["history"] == grant, answer
    for token in (owner_token, guest_token):
        assert "history" not in http_json(f"{base}/epochs/current", token)[1]
    # The member checks the owner's signature under a roster it holds, then opens epoch 1's secret.
    raw = b64decode(answer["history"]["grant"])
    roster = SignedRoster.from_json(answer["roster"]).roster
    signer = roster.member(answer["history"]["by"])
    assert signer is not None and signer.role == "owner" and signer.keys.verifies(b64decode(answer["history"]["sig"]), raw)
    sealed = json.loads(raw)["epochs"][0]["sealed"]
    assert SUITE.decrypt(b64decode(sealed), family.hpke_private, info=history_info(device_id, 1, family.kid)) == epoch1.secret
    assert open_package(answer["package"], family, roster) != epoch1.secret

    # Made a guest through the household (v1.3): the history goes at once, before any new roster.
    token_id = int(database.psql(f"SELECT app_token_id FROM sealed_member_keys WHERE kid = '{family.kid}'"))
    assert http_json(f"{relay.url}/api/devices/{device_id}/members/{token_id}", owner_token, "PATCH",
                     {"access": "guest", "until": until})[0] == 200
    assert "history" not in http_json(f"{base}/epochs/current", family_token)[1]
    assert database.psql(f"SELECT count(*) FROM sealed_history_grants WHERE kid = '{family.kid}'") == "0"
    assert http_json(f"{relay.url}/api/devices/{device_id}/members/{token_id}", owner_token, "PATCH", {"access": "family"})[0] == 200
    assert http_json(history, owner_token, "PUT", grant) == (200, {"kid": family.kid, "epochs": [1]})
    # A roster that makes the member a guest takes the history away too.
    demoted = Member(family.public, "guest", False, guest_until, "family")
    epoch_of(3, second.hash, [me, demoted, as_guest])
    assert "history" not in http_json(f"{base}/epochs/current", family_token)[1]
    audit = database.psql("SELECT count(*) FROM audit_log WHERE event = 'sealed_history_granted'")
    assert audit == "2"
