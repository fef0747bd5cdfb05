"""Push through APNs (docs/protocol.md v1.2) against the test kit's APNs stand-in (HTTP/2 + TLS, the
provider token verified with the key's public half): registrations, what is pushed and when,
APNs's answers, robot_offline, a relay restart in the middle of a window."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
import urllib.request
from pathlib import Path

from websockets.asyncio.client import connect

from apns_standin import new_p256_key
from conftest import INTERVAL, TOPIC, event, phone, push_env
from test_robot_client import next_message
from wimz_testkit import RelayNode, http_json


def register(relay, device: str, token: str, phone_token: str, events=("bark_detected", "treat_dispensed",
                                                                        "mission_completed", "robot_offline", "dog_detected"),
             environment: str = "sandbox") -> tuple[int, dict]:
    return http_json(f"{relay.url}/api/devices/{device}/push", token, "PUT",
                     {"platform": "apns", "token": phone_token, "environment": environment, "events": list(events)})


async def robot_socket(relay, device: str, token: str):
    return await connect(f"ws://127.0.0.1:{relay.port}/ws/robot?device_id={device}", proxy=None,
                         additional_headers={"Authorization": f"Bearer {token}"})


def test_registrations_follow_the_contract(database, pushing, relay, device):
    device_id, robot_token, app_token = device
    url = f"{pushing.url}/api/devices/{device_id}/push"
    # Without an APNs key: 501.
    assert http_json(f"{relay.url}/api/devices/{device_id}/push", app_token, "PUT",
                     {"platform": "apns", "token": phone(), "environment": "sandbox", "events": ["bark_detected"]})[0] == 501
    token = phone().upper()
    status, body = register(pushing, device_id, app_token, token, events=("bark_detected", "bark_detected"))
    assert status == 200 and body == {"platform": "apns", "token": token.lower(), "environment": "sandbox",
                                      "events": ["bark_detected"]}
    # The same token again replaces its events.
    assert register(pushing, device_id, app_token, token, events=("robot_offline",))[1]["events"] == ["robot_offline"]
    assert http_json(url, app_token)[1] == {"registrations": [
        {"platform": "apns", "token": token.lower(), "environment": "sandbox", "events": ["robot_offline"]}]}
    for bad in ({"platform": "fcm", "token": phone(), "environment": "sandbox", "events": ["bark_detected"]},
                {"platform": "apns", "token": "abc", "environment": "sandbox", "events": ["bark_detected"]},
                {"platform": "apns", "token": "zz" * 32, "environment": "sandbox", "events": ["bark_detected"]},
                {"platform": "apns", "token": phone(), "environment": "dev", "events": ["bark_detected"]},
                {"platform": "apns", "token": phone(), "environment": "sandbox", "events": []},
                {"platform": "apns", "token": phone(), "environment": "sandbox", "events": ["fire"]}, [1]):
        assert http_json(url, app_token, "PUT", bad)[0] == 400, bad
    assert http_json(url, robot_token, "PUT", {"platform": "apns", "token": phone(), "environment": "sandbox",
                                               "events": ["bark_detected"]}) == (403, {"error": "wrong_role",
                                                                                      "message": "push registrations take an app token"})
    assert http_json(url, None)[0] == 401
    # At most 10 per app token: the eleventh new one is refused, an update of a held one is not.
    for _ in range(9):
        assert register(pushing, device_id, app_token, phone())[0] == 200
    assert register(pushing, device_id, app_token, phone())[0] == 409
    assert register(pushing, device_id, app_token, token)[0] == 200
    # Delete: 204, then 404.
    assert http_json(f"{url}/{token}", app_token, "DELETE")[0] == 204
    assert http_json(f"{url}/{token}", app_token, "DELETE")[0] == 404
    events = database.psql("SELECT event || ':' || coalesce(details->>'reason', '') FROM audit_log WHERE event LIKE 'push%' ORDER BY id")
    assert "push_registered:" in events and "push_unregistered:app" in events


async def test_events_are_pushed_once_per_window_and_the_counts_add_up(pushing, apns, device):
    device_id, robot_token, app_token = device
    token = phone()
    assert register(pushing, device_id, app_token, token)[0] == 200
    await asyncio.sleep(0.3)  # the registration reaches the node's mirror
    robot = await robot_socket(pushing, device_id, robot_token)
    for n in range(6):
        await robot.send(event("bark_detected", dog_name="Rex", n=n))
    await robot.send(event("treat_dispensed", dog_name="Rex", daily_count=4, daily_limit=10))
    await robot.send(event("mission_progress", status="watching", trick="sit", dog_name="Rex"))
    await robot.send(event("mission_progress", status="completed", trick="sit", dog_name="Rex"))
    apns.wait_for(lambda seen: sum(r.body["wimz"]["count"] for r in seen if r.answered == 200
                                   and r.body["wimz"]["event"] == "bark_detected") == 6, timeout=INTERVAL * 3 + 5)
    barks = [r for r in apns.delivered(token) if r.body["wimz"]["event"] == "bark_detected"]
    assert [r.body["wimz"]["count"] for r in barks] == [1, 5]
    assert barks[1].at - barks[0].at >= INTERVAL - 0.5, "the trailing push waits for the window's end"
    first = barks[0]
    assert first.body["aps"] == {"alert": {"loc-key": "WIMZ_BARK_DETECTED", "loc-args": ["Rex"]}, "sound": "default",
                                 "thread-id": device_id, "mutable-content": 1}
    assert first.body["wimz"]["device_id"] == device_id and first.body["wimz"]["epoch"] and first.body["wimz"]["seq"] >= 1
    assert barks[1].body["wimz"]["seq"] > first.body["wimz"]["seq"]
    assert first.headers["apns-topic"] == TOPIC and first.headers["apns-push-type"] == "alert"
    assert int(first.headers["apns-expiration"]) > time.time() and first.headers["apns-collapse-id"]
    kinds = {r.body["wimz"]["event"]: r.body for r in apns.delivered(token)}
    assert kinds["treat_dispensed"]["aps"]["alert"]["loc-args"] == ["Rex", "4", "10"]
    assert kinds["mission_completed"]["aps"]["alert"] == {"loc-key": "WIMZ_MISSION_COMPLETED", "loc-args": ["Rex", "sit"]}
    assert sum(1 for r in apns.delivered(token) if r.body["wimz"]["event"] == "mission_completed") == 1
    assert len(apns.jwts) == 1, "one provider token, reused"
    await robot.close()


async def test_an_open_app_gets_no_push(pushing, apns, device):
    device_id, robot_token, app_token = device
    token = phone()
    register(pushing, device_id, app_token, token)
    await asyncio.sleep(0.3)
    app = await connect(f"ws://127.0.0.1:{pushing.port}/ws/app?device_id={device_id}&token={app_token}", proxy=None)
    robot = await robot_socket(pushing, device_id, robot_token)
    await robot.send(event("bark_detected", dog_name="Rex"))
    await asyncio.sleep(INTERVAL + 1.5)
    assert not apns.delivered(token)
    await app.close()
    await asyncio.sleep(0.2)
    await robot.send(event("bark_detected", dog_name="Rex"))
    apns.wait_for(lambda seen: any(r.token == token for r in seen))
    await robot.close()


async def test_apns_answers_unregistered_expired_token_retries_and_garbage(pushing, apns, database, device):
    device_id, robot_token, app_token = device
    gone, refreshed, busy, broken = phone(), phone(), phone(), phone()
    apns.answers[gone] = [(410, "Unregistered")]
    apns.answers[refreshed] = [(403, "ExpiredProviderToken")]
    apns.answers[busy] = [(429, "TooManyRequests"), (503, "ServiceUnavailable")]
    apns.answers[broken] = ["garbage", "reset"]
    for token in (gone, refreshed, busy, broken):
        assert register(pushing, device_id, app_token, token, events=("bark_detected",))[0] == 200
    await asyncio.sleep(0.3)
    robot = await robot_socket(pushing, device_id, robot_token)
    await robot.send(event("bark_detected", dog_name="Rex"))
    apns.wait_for(lambda seen: all(any(r.token == t and r.answered == 200 for r in seen) for t in (refreshed, busy, broken)),
                  timeout=20)
    # 410: the registration is gone (and audited); the others were retried to delivery.
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(r["token"] == gone for r in
                                              http_json(f"{pushing.url}/api/devices/{device_id}/push", app_token)[1]["registrations"]):
        await asyncio.sleep(0.1)
    assert all(r["token"] != gone for r in http_json(f"{pushing.url}/api/devices/{device_id}/push", app_token)[1]["registrations"])
    assert "unregistered" in database.psql("SELECT details->>'reason' FROM audit_log WHERE event = 'push_unregistered'")
    assert len(apns.jwts) == 2, "a fresh provider token after ExpiredProviderToken"
    with urllib.request.urlopen(f"{pushing.url}/metrics") as response:
        metrics = response.read().decode()
    assert 'wimz_pushes_total{kind="bark_detected",result="unregistered"} 1' in metrics
    assert 'wimz_pushes_total{kind="bark_detected",result="delivered"} 3' in metrics
    await robot.close()


async def test_robot_offline_is_pushed_once_after_the_robot_is_gone(database, apns, device):
    relay = RelayNode.started(database, env=push_env(apns, WIMZ_PUSH_OFFLINE_AFTER="2"))
    try:
        device_id, robot_token, app_token = device
        token = phone()
        register(relay, device_id, app_token, token, events=("robot_offline",))
        await asyncio.sleep(0.3)
        robot = await robot_socket(relay, device_id, robot_token)
        await asyncio.sleep(0.5)
        await robot.close()
        apns.wait_for(lambda seen: any(r.token == token for r in seen), timeout=10)
        await asyncio.sleep(3)
        offline = [r for r in apns.delivered(token)]
        assert len(offline) == 1 and offline[0].body["wimz"] == {"device_id": device_id, "event": "robot_offline", "count": 1}
        assert offline[0].body["aps"]["alert"] == {"loc-key": "WIMZ_ROBOT_OFFLINE", "loc-args": []}
    finally:
        relay.stop()


async def test_a_restart_in_the_middle_of_a_window_loses_no_count(database, apns, device):
    relay = RelayNode.started(database, env=push_env(apns, WIMZ_PUSH_INTERVAL="60"))
    device_id, robot_token, app_token = device
    token = phone()
    register(relay, device_id, app_token, token, events=("bark_detected",))
    await asyncio.sleep(0.3)
    robot = await robot_socket(relay, device_id, robot_token)
    for _ in range(4):
        await robot.send(event("bark_detected", dog_name="Rex"))
    apns.wait_for(lambda seen: any(r.token == token for r in seen))
    await asyncio.sleep(0.3)
    relay.stop()  # SIGTERM: the 3 counted barks go out before the process ends
    counts = [r.body["wimz"]["count"] for r in apns.delivered(token)]
    assert counts == [1, 3], counts


async def test_registrations_go_with_their_app_token_on_every_node_and_the_app_library_registers(pushing, database, device):
    device_id, robot_token, app_token = device
    token = phone()
    # The Swift app library, as an app would: wimz-app-demo --register-push.
    run = await asyncio.create_subprocess_exec(
        os.path.join(os.environ["WIMZ_BIN_DIR"], "wimz-app-demo"), "--url", pushing.url, "--device", device_id,
        "--token", app_token, "--register-push", token, "--push-environment", "production",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(run.communicate(), 30)
    assert run.returncode == 0, err.decode()
    assert json.loads(out) == {"platform": "apns", "token": token, "environment": "production",
                               "events": sorted(["bark_detected", "dog_detected", "treat_dispensed", "mission_completed",
                                                 "robot_offline"])}
    # Operators see it: the CLI and the admin API.
    assert token in database.cli("push", "list", "--device", device_id)
    # A body over the limit is refused before it is read; junk is a 400.
    assert http_json(f"{pushing.url}/api/devices/{device_id}/push", app_token, "PUT", {"pad": "x" * 70_000})[0] == 413
    # Revoking the app token removes its registrations (a trigger; every node's mirror hears it).
    token_id = database.psql(f"SELECT id FROM tokens WHERE device_id = '{device_id}' AND role = 'app'").strip()
    revoked = time.monotonic()
    database.cli("token", "revoke", token_id)
    while time.monotonic() - revoked < 1 and database.psql("SELECT count(*) FROM push_registrations").strip() != "0":
        await asyncio.sleep(0.05)
    assert database.psql("SELECT count(*) FROM push_registrations").strip() == "0"
    assert "token_revoked" in database.psql("SELECT details->>'reason' FROM audit_log WHERE event = 'push_unregistered'")


async def test_a_slow_apns_a_tls_failure_and_a_new_key_leave_the_relay_unharmed(database, apns, device, tmp_path):
    device_id, robot_token, app_token = device
    # A relay that does not trust the stand-in's certificate: every connection fails its TLS handshake.
    distrustful = RelayNode.started(database, env={**push_env(apns), "WIMZ_APNS_CA_FILE": "/etc/ssl/certs/ca-certificates.crt"})
    try:
        token = phone()
        register(distrustful, device_id, app_token, token, events=("bark_detected",))
        await asyncio.sleep(0.3)
        robot = await robot_socket(distrustful, device_id, robot_token)
        app = await connect(f"ws://127.0.0.1:{distrustful.port}/ws/app?device_id={device_id}&token={app_token}", proxy=None)
        await app.recv()  # device_status
        await app.close()
        await robot.send(event("bark_detected", dog_name="Rex"))
        # The HTTP client tries a failing TLS handshake again until its 10 s connect timeout, so
        # the failure is logged ~10 s after the push leaves (this wait was 10 s, and passed only
        # while the push left within a tenth of a second of the event).
        deadline = time.monotonic() + 25
        while time.monotonic() < deadline and not any("apns_unreachable" in line for line in distrustful.lines):
            await asyncio.sleep(0.1)
        assert any("apns_unreachable" in line for line in distrustful.lines)
        assert not apns.delivered(token)
        # Forwarding goes on meanwhile.
        app = await connect(f"ws://127.0.0.1:{distrustful.port}/ws/app?device_id={device_id}&token={app_token}", proxy=None)
        await app.recv()
        await robot.send(event("mode_changed", mode="idle"))
        # (past a timeline notice for the bark: v1.6 keeps it, and its notice may come now)
        assert (await next_message(app, lambda m: m.get("type") != "timeline"))["event"] == "mode_changed"
        await app.close()
        await robot.close()
    finally:
        distrustful.stop()

    relay = RelayNode.started(database, env=push_env(apns))
    try:
        slow, quick = phone(), phone()
        apns.answers[slow] = [("slow", 3)]
        for t in (slow, quick):
            register(relay, device_id, app_token, t, events=("bark_detected",))
        await asyncio.sleep(0.3)
        robot = await robot_socket(relay, device_id, robot_token)
        await robot.send(event("bark_detected", dog_name="Rex"))
        apns.wait_for(lambda seen: any(r.token == quick and r.answered == 200 for r in seen), timeout=2)
        apns.wait_for(lambda seen: any(r.token == slow and r.answered == 200 for r in seen), timeout=10)
        # A new key, the same path, SIGHUP: the next provider token is signed with it.
        new_path, new_key = new_p256_key(tmp_path)
        Path(apns.key_path).write_bytes(new_path.read_bytes())
        relay.process.send_signal(signal.SIGHUP)
        apns.public_key = new_key.public_key()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not any("apns_key_reloaded" in line for line in relay.lines):
            await asyncio.sleep(0.1)
        third = phone()
        register(relay, device_id, app_token, third, events=("bark_detected",))
        await asyncio.sleep(0.3)
        await robot.send(event("bark_detected", dog_name="Rex"))
        apns.wait_for(lambda seen: any(r.token == third and r.answered == 200 for r in seen), timeout=5)
        await robot.close()
    finally:
        relay.stop()

