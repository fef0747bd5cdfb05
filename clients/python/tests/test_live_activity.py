"""Live Activity tokens (docs/protocol.md v1.4 "Tokens the app hands over") against a relay with an
APNs key: the endpoints' rules and errors, what is stored and audited, and the tokens going with
their app token."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from websockets.asyncio.client import connect

from conftest import event, phone, push_env
from wimz_testkit import RelayNode, http_json

ADMIN = secrets.token_hex(16)


@pytest.fixture
def pushing(database, apns):
    """A relay with an APNs key (the stand-in's) and an admin token."""
    relay = RelayNode.started(database, env=push_env(apns, WIMZ_ADMIN_TOKEN=ADMIN))
    yield relay
    relay.stop()


def live(relay, device: str, *path: str) -> str:
    return "/".join([f"{relay.url}/api/devices/{device}/live-activity", *path])


def put(relay, device: str, token: str, *path: str, body: object) -> tuple[int, dict]:
    return http_json(live(relay, device, *path), token, "PUT", body)  # type: ignore[arg-type]


def test_tokens_follow_the_contract(database, pushing, relay, device):
    device_id, robot_token, app_token = device
    start = phone().upper()
    # Without an APNs key: 501, as push registrations.
    assert put(relay, device_id, app_token, "start-token", body={"token": start, "environment": "sandbox"})[1]["error"] == \
        "push_not_configured"
    assert http_json(live(relay, device_id), app_token)[0] == 501

    assert http_json(live(pushing, device_id), app_token) == (200, {"start_token": None, "activities": []})
    assert put(pushing, device_id, app_token, "start-token", body={"token": start, "environment": "sandbox"}) == \
        (200, {"token": start.lower(), "environment": "sandbox"})
    # A new start token replaces the old one (iOS rotates it).
    rotated = phone()
    assert put(pushing, device_id, app_token, "start-token", body={"token": rotated, "environment": "production"})[0] == 200
    activity = phone()
    assert put(pushing, device_id, app_token, "activities", "A1B2-c3", body={"token": activity, "environment": "sandbox"}) == \
        (200, {"activity_id": "A1B2-c3", "token": activity, "environment": "sandbox"})
    status, listed = http_json(live(pushing, device_id), app_token)
    assert status == 200 and listed["start_token"] == {"token": rotated, "environment": "production"}
    assert [(a["activity_id"], a["token"], a["environment"]) for a in listed["activities"]] == [("A1B2-c3", activity, "sandbox")]
    assert listed["activities"][0]["created_at"].endswith("Z")

    # At most four activities per app token and device; a held one can still get a new token.
    for n in range(3):
        assert put(pushing, device_id, app_token, "activities", f"act-{n}", body={"token": phone(), "environment": "sandbox"})[0] == 200
    assert put(pushing, device_id, app_token, "activities", "act-9", body={"token": phone(), "environment": "sandbox"}) == \
        (409, {"error": "too_many_activities",
               "message": "this app token has 4 Live Activities on this device; delete one first"})
    assert put(pushing, device_id, app_token, "activities", "act-0", body={"token": phone(), "environment": "production"})[0] == 200

    # Malformed bodies, tokens and ids: 400, nothing stored.
    before = http_json(live(pushing, device_id), app_token)[1]
    for bad in ({"token": "abc", "environment": "sandbox"}, {"token": "zz" * 32, "environment": "sandbox"},
                {"token": phone(), "environment": "dev"}, {"token": phone()}, {"environment": "sandbox"},
                {"token": 12, "environment": "sandbox"}, [1], "text", None):
        assert put(pushing, device_id, app_token, "start-token", body=bad)[0] == 400, bad
        assert put(pushing, device_id, app_token, "activities", "act-0", body=bad)[0] == 400, bad
    for bad_id in ("a" * 65, "has_underscore", "dot.ted", "sp%20ace"):
        assert put(pushing, device_id, app_token, "activities", bad_id, body={"token": phone(), "environment": "sandbox"})[0] == 400
        assert http_json(live(pushing, device_id, "activities", bad_id), app_token, "DELETE")[0] == 404
    assert http_json(live(pushing, device_id), app_token)[1] == before

    # Only the device's app tokens: a robot token is 403 wrong_role, no token 401.
    assert put(pushing, device_id, robot_token, "start-token", body={"token": phone(), "environment": "sandbox"}) == \
        (403, {"error": "wrong_role", "message": "Live Activity tokens take an app token"})
    assert http_json(live(pushing, device_id), None)[0] == 401

    # Operators see every app token's: the admin API and the CLI.
    status, admin = http_json(f"{pushing.url}/admin/devices/{device_id}/live-activities", ADMIN)
    assert status == 200 and [(r["kind"], r["activity_id"]) for r in admin["live_activities"]] == \
        [("start_token", None), ("activity", "A1B2-c3"), ("activity", "act-0"), ("activity", "act-1"), ("activity", "act-2")]
    assert "A1B2-c3" in database.cli("push", "live-activities", "--device", device_id)

    # Delete: 204, then 404.
    assert http_json(live(pushing, device_id, "activities", "A1B2-c3"), app_token, "DELETE")[0] == 204
    assert http_json(live(pushing, device_id, "activities", "A1B2-c3"), app_token, "DELETE")[0] == 404
    assert http_json(live(pushing, device_id, "start-token"), app_token, "DELETE")[0] == 204
    assert http_json(live(pushing, device_id, "start-token"), app_token, "DELETE")[0] == 404
    audit = database.psql("SELECT event || ':' || coalesce(details->>'kind', '') || ':' || coalesce(details->>'reason', '') "
                          "FROM audit_log WHERE event LIKE 'live_activity%' ORDER BY id").split()
    assert audit.count("live_activity_registered:start_token:") == 2
    assert "live_activity_removed:activity:app" in audit and "live_activity_removed:start_token:app" in audit


def wait_for_count(database, sql: str, want: str, seconds: float = 3) -> str:
    deadline = time.monotonic() + seconds
    while (got := database.psql(sql)) != want and time.monotonic() < deadline:
        time.sleep(0.05)
    return got


def test_tokens_go_with_their_app_token(database, pushing, device):
    device_id, robot_token, app_token = device
    count = "SELECT (SELECT count(*) FROM live_activities) + (SELECT count(*) FROM live_activity_start_tokens)"

    def hand_over(token: str) -> None:
        assert put(pushing, device_id, token, "start-token", body={"token": phone(), "environment": "sandbox"})[0] == 200
        assert put(pushing, device_id, token, "activities", "a1", body={"token": phone(), "environment": "sandbox"})[0] == 200

    def issue(*extra: str) -> tuple[str, str]:
        token = database.cli("token", "issue", "--device", device_id, "--role", "app", *extra).strip().splitlines()[-1]
        pushing.wait_known(device_id, token)
        return token, database.psql(f"SELECT max(id) FROM tokens WHERE device_id = '{device_id}' AND role = 'app'")

    # Revoked (the robot's DELETE app-tokens/ID).
    hand_over(app_token)
    token_id = database.psql(f"SELECT min(id) FROM tokens WHERE device_id = '{device_id}' AND role = 'app'")
    assert http_json(f"{pushing.url}/api/devices/{device_id}/app-tokens/{token_id}", robot_token, "DELETE")[0] == 200
    assert wait_for_count(database, count, "0") == "0"
    # A removed member (the owner's DELETE members/ID).
    owner, _ = issue("--access", "owner")
    guest, guest_id = issue("--access", "guest", "--until", "2099-01-01T00:00:00Z")
    hand_over(guest)
    assert http_json(f"{pushing.url}/api/devices/{device_id}/members/{guest_id}", owner, "DELETE")[0] == 204
    assert wait_for_count(database, count, "0") == "0"
    # Expired (time passed: the relay's once-a-second sweep).
    short, _ = issue("--expires-in", "2")
    hand_over(short)
    assert wait_for_count(database, count, "0", seconds=6) == "0"
    # A disabled device.
    hand_over(owner)
    database.cli("device", "disable", device_id)
    assert wait_for_count(database, count, "0") == "0"
    reasons = set(database.psql("SELECT details->>'reason' FROM audit_log WHERE event = 'live_activity_removed'").split())
    assert reasons == {"token_revoked", "token_expired", "device_disabled"}


def test_the_swift_app_library_hands_its_tokens_over(database, pushing, device):
    """wimz-app-demo --live-activity-start/--live-activity/--live-activities, on WimzRelayClient."""
    device_id, robot_token, app_token = device
    demo = [os.path.join(os.environ["WIMZ_BIN_DIR"], "wimz-app-demo"), "--url", pushing.url, "--device", device_id,
            "--token", app_token, "--push-environment", "production"]
    start, first, second = phone(), phone(), phone()
    done = subprocess.run(demo + ["--live-activity-start", start, "--live-activity", f"Run-1:{first}",
                                  "--live-activity", f"Run-2:{second}"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert [json.loads(line) for line in done.stdout.splitlines()] == [
        {"environment": "production", "token": start},
        {"activity_id": "Run-1", "environment": "production", "token": first},
        {"activity_id": "Run-2", "environment": "production", "token": second}]
    listed = json.loads(subprocess.run(demo + ["--live-activities"], capture_output=True, text=True, timeout=60, check=True).stdout)
    assert listed["start_token"] == {"environment": "production", "token": start}
    assert [(a["activity_id"], a["token"]) for a in listed["activities"]] == [("Run-1", first), ("Run-2", second)]
    # A refusal is the relay's error and exit 2.
    refused = subprocess.run(demo + ["--live-activity", f"no_underscores:{phone()}"], capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "bad_request" in refused.stdout


def metric(relay, line: str) -> int:
    """The value of ``line`` (a series with its labels) in the relay's /metrics (0 when absent)."""
    with urllib.request.urlopen(f"{relay.url}/metrics") as response:
        for text in response.read().decode().splitlines():
            if text.startswith(line + " "):
                return int(float(text.split()[-1]))
    return 0


async def test_a_run_follows_the_robot_and_survives_a_restart(database, apns, device):
    """docs/protocol.md v1.4 "A mission run": begun, changed, ended by completed, by leaving mission
    mode and by the robot staying away; stored, so a restarted relay continues the same run."""
    device_id, robot_token, app_token = device
    relay = RelayNode.started(database, env=push_env(apns, WIMZ_PUSH_OFFLINE_AFTER="2"))
    stored = "SELECT coalesce((SELECT state::text FROM device_mission_runs WHERE device_id = 'robot-1'), 'none')"

    async def until_stored(want, seconds: float = 4) -> dict | None:
        deadline = time.monotonic() + seconds
        while True:
            text = database.psql(stored)
            got = None if text == "none" else json.loads(text)
            if (got == want if not callable(want) else want(got)) or time.monotonic() > deadline:
                return got
            await asyncio.sleep(0.05)

    try:
        assert put(relay, device_id, app_token, "activities", "run-1", body={"token": phone(), "environment": "sandbox"})[0] == 200
        # A start token keeps the device watched after the first run's end forgets the activity.
        assert put(relay, device_id, app_token, "start-token", body={"token": phone(), "environment": "sandbox"})[0] == 200
        await asyncio.sleep(0.3)  # the tokens reach the node's mirror: the device is watched
        robot = await connect(f"ws://127.0.0.1:{relay.port}/ws/robot?device_id={device_id}", proxy=None,
                              additional_headers={"Authorization": f"Bearer {robot_token}"})
        await robot.send(event("mission_progress", status="completed", trick="sit"))
        await robot.send(event("mode_changed", mode="mission", previous_mode="idle"))
        await robot.send(event("mission_progress", status="waiting_for_dog", trick="sit", dog_name="Rex", stage=1, total_stages=5,
                               extra="ignored"))
        state = {"status": "waiting_for_dog", "trick": "sit", "stage": 1, "total_stages": 5, "dog_name": "Rex", "rewards": None,
                 "progress": None, "target_sec": None, "robot_online": True}
        assert await until_stored(state) == state
        await robot.send(event("mission_progress", status="watching", trick="sit", dog_name="Rex", stage=2, total_stages=5,
                               progress=0.5, target_sec=3))
        assert (await until_stored(lambda s: s and s["status"] == "watching"))["progress"] == 0.5
        opened = database.psql("SELECT opened_at FROM device_mission_runs")
        assert metric(relay, 'wimz_mission_runs_total{event="began"}') == 1

        # A restart mid-run: the same run continues (no second beginning), its state moving on.
        relay.stop()
        relay.start()
        await robot.close()
        robot = await connect(f"ws://127.0.0.1:{relay.port}/ws/robot?device_id={device_id}", proxy=None,
                              additional_headers={"Authorization": f"Bearer {robot_token}"})
        await asyncio.sleep(0.5)  # the node reads the stored run when the device arrives
        await robot.send(event("mission_progress", status="watching", trick="sit", dog_name="Rex", stage=3, total_stages=5))
        assert (await until_stored(lambda s: s and s["stage"] == 3))["stage"] == 3
        assert database.psql("SELECT opened_at FROM device_mission_runs") == opened
        assert metric(relay, 'wimz_mission_runs_total{event="began"}') == 0
        assert metric(relay, 'wimz_mission_runs_total{event="changed"}') >= 1

        # Completed ends it; leaving mission mode ends the next.
        await robot.send(event("mission_progress", status="completed", trick="sit", dog_name="Rex", rewards=3))
        assert await until_stored(None) is None
        await robot.send(event("mission_progress", status="watching", trick="down"))
        assert (await until_stored(lambda s: s is not None)) is not None
        await robot.send(event("mode_changed", mode="idle", previous_mode="mission"))
        assert await until_stored(None) is None
        assert metric(relay, 'wimz_mission_runs_total{event="completed"}') == 1
        assert metric(relay, 'wimz_mission_runs_total{event="left_mission"}') == 1

        # The robot away: robot_online false at once, the end after WIMZ_PUSH_OFFLINE_AFTER.
        await robot.send(event("mission_progress", status="watching", trick="stay"))
        assert (await until_stored(lambda s: s is not None)) is not None
        await robot.close()
        assert (await until_stored(lambda s: s is not None and not s["robot_online"]))["robot_online"] is False
        assert await until_stored(None, seconds=8) is None
        assert metric(relay, 'wimz_mission_runs_total{event="robot_away"}') == 1
        # Each ended run is in the household's timeline (v1.6): when it began and ended, its last state.
        runs = []
        deadline = time.monotonic() + 5
        while len(runs) < 3 and time.monotonic() < deadline:
            runs = [json.loads(line) for line in database.psql(
                "SELECT message FROM timeline_entries WHERE event = 'mission_run' ORDER BY number").splitlines()]
            await asyncio.sleep(0.05)
        assert [(r["data"]["state"]["status"], r["data"]["state"]["trick"]) for r in runs] == \
            [("completed", "sit"), ("watching", "down"), ("watching", "stay")], runs
        assert all(r["data"]["began"] <= r["data"]["ended"] for r in runs) and runs[0]["data"]["state"]["rewards"] == 3
    finally:
        relay.stop()


def shape(value):
    """``value`` with every leaf replaced by its JSON type (null, a number, …): what a decoder sees."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shape(v) for v in value]
    return "number" if isinstance(value, (int, float)) and not isinstance(value, bool) else type(value).__name__


def live_requests(apns, token: str) -> list:
    return [r for r in list(apns.received) if r.token == token and r.headers.get("apns-push-type") == "liveactivity"]


async def test_a_whole_mission_reaches_the_lock_screen_with_the_app_closed(database, apns, device):
    """docs/protocol.md v1.4 "What the relay sends": one start to the push-to-start token,
    updates carrying the robot's states at the contract's priorities, coalesced progress with
    the newest state last, the end with its dismissal date; then the activities are forgotten."""
    device_id, robot_token, app_token = device
    relay = RelayNode.started(database, env=push_env(apns, WIMZ_LIVE_ACTIVITY_INTERVAL="1"))
    try:
        start_token, activity_token = phone(), phone()
        other_app = database.cli("token", "issue", "--device", device_id, "--role", "app").strip().splitlines()[-1]
        relay.wait_known(device_id, other_app)
        assert put(relay, device_id, app_token, "start-token", body={"token": start_token, "environment": "sandbox"})[0] == 200
        assert put(relay, device_id, other_app, "activities", "watching-1",
                   body={"token": activity_token, "environment": "sandbox"})[0] == 200
        await asyncio.sleep(0.3)
        robot = await connect(f"ws://127.0.0.1:{relay.port}/ws/robot?device_id={device_id}", proxy=None,
                              additional_headers={"Authorization": f"Bearer {robot_token}"})
        sent_states = []

        async def progress(**data):
            sent_states.append(data)
            await robot.send(event("mission_progress", **data))

        await progress(status="waiting_for_dog", trick="sit", dog_name="Rex", stage=1, total_stages=5)
        apns.wait_for(lambda seen: live_requests(apns, start_token) and live_requests(apns, activity_token))
        [start] = live_requests(apns, start_token)
        assert start.headers["apns-topic"] == "com.wimzai.app.push-type.liveactivity" and start.headers["apns-priority"] == "10"
        aps = start.body["aps"]
        assert aps["event"] == "start" and aps["attributes-type"] == "MissionActivityAttributes"
        assert aps["attributes"] == {"device_id": device_id, "robot_name": ""} and aps["input-push-token"] == 1
        assert aps["alert"]["body"] == {"loc-key": "WIMZ_MISSION_STARTED", "loc-args": ["Rex", "sit"]}
        assert aps["content-state"]["status"] == "waiting_for_dog" and aps["stale-date"] == aps["timestamp"] + 120
        assert start.body["wimz"] == {"device_id": device_id}

        # Five stages; in each, progress at 5 Hz, then success. The app of the start token hands
        # over the activity iOS started for it (input-push-token), as it would.
        started_activity = phone()
        assert put(relay, device_id, app_token, "activities", "started-1",
                   body={"token": started_activity, "environment": "sandbox"})[0] == 200
        await asyncio.sleep(0.3)
        for stage in range(1, 6):
            for step in range(8):
                await progress(status="watching", trick="sit", dog_name="Rex", stage=stage, total_stages=5, progress=step / 8,
                               target_sec=3)
                await asyncio.sleep(0.2)
            await progress(status="success", trick="sit", dog_name="Rex", stage=stage, total_stages=5, rewards=stage)
        # 50 progress events in 2 s (longer on a busy machine): at most one update a second per
        # activity (WIMZ_LIVE_ACTIVITY_INTERVAL), so a few requests, the last with the last state.
        burst_from = {token: len(live_requests(apns, token)) for token in (activity_token, started_activity)}
        burst_began = time.monotonic()
        for step in range(50):
            await progress(status="watching", trick="sit", dog_name="Rex", stage=5, total_stages=5, rewards=5, progress=step / 50,
                           target_sec=3)
            await asyncio.sleep(0.04)
        burst_seconds = time.monotonic() - burst_began
        await asyncio.sleep(2.5)  # the last coalesced update goes when its interval has passed
        for token, before in burst_from.items():
            burst = live_requests(apns, token)[before:]
            states = [r.body["aps"]["content-state"] for r in burst]
            # One an interval while the events came, the one pending before, the last one after.
            assert 1 <= len(burst) <= int(burst_seconds) + 3, (burst_seconds, states)
            coalesced = [r.at for r in burst if r.headers["apns-priority"] == "5"]
            assert all(later - earlier > 0.5 for earlier, later in zip(coalesced, coalesced[1:])), (coalesced, states)
            assert burst[-1].body["aps"]["content-state"]["progress"] == 0.98 and burst[-1].headers["apns-priority"] == "5"
        await progress(status="completed", trick="sit", dog_name="Rex", stage=5, total_stages=5, rewards=5)
        apns.wait_for(lambda seen: any(r.body["aps"]["event"] == "end" for r in live_requests(apns, activity_token))
                      and any(r.body["aps"]["event"] == "end" for r in live_requests(apns, started_activity)))

        # The shapes the app library's test decodes (Tests/Fixtures, captured from this test).
        fixtures = Path(__file__).resolve().parents[3] / "Tests" / "Fixtures"
        captured = {event: shape(json.loads((fixtures / f"live-activity-{event}.json").read_text()))
                    for event in ("start", "update", "end")}
        assert shape(start.body) == captured["start"]
        assert captured["update"] in [shape(r.body) for r in live_requests(apns, activity_token)]
        assert shape(live_requests(apns, activity_token)[-1].body) == captured["end"]
        for token in (activity_token, started_activity):
            requests = live_requests(apns, token)
            updates, end = requests[:-1], requests[-1]
            assert all(r.body["aps"]["event"] == "update" for r in updates) and end.body["aps"]["event"] == "end"
            # Each update's state is one the robot sent; status changes go at 10, the rest at 5,
            # and timestamps never go back.
            robot_states = [{k: data.get(k) for k in ("status", "trick", "stage", "total_stages", "dog_name", "rewards", "progress")}
                            for data in sent_states]
            last_status, last_time = None, 0
            for r in updates:
                state = r.body["aps"]["content-state"]
                assert {k: state[k] for k in robot_states[0]} in robot_states and state["robot_online"] is True
                assert r.headers["apns-priority"] == ("10" if state["status"] != last_status else "5"), (state, last_status)
                assert r.body["aps"]["timestamp"] >= last_time and r.body["aps"]["stale-date"] == r.body["aps"]["timestamp"] + 120
                last_status, last_time = state["status"], r.body["aps"]["timestamp"]
            assert any(r.headers["apns-priority"] == "5" for r in updates), "coalesced progress at 5"
            aps = end.body["aps"]
            assert end.headers["apns-priority"] == "10" and aps["content-state"]["status"] == "completed"
            assert aps["dismissal-date"] == aps["timestamp"] + 900 and aps["timestamp"] >= last_time
            assert aps["alert"] == {"loc-key": "WIMZ_MISSION_COMPLETED", "loc-args": ["Rex", "sit"]}
        assert len(live_requests(apns, start_token)) == 1, "one start per app token and run"
        # Ended activities are forgotten (the app registers new ones for the next mission).
        deadline = time.monotonic() + 3
        while http_json(live(relay, device_id), other_app)[1]["activities"] and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert http_json(live(relay, device_id), other_app)[1]["activities"] == []
        assert "ended" in database.psql("SELECT details->>'reason' FROM audit_log WHERE event = 'live_activity_removed'")
        await robot.close()
    finally:
        relay.stop()


async def test_local_first_the_catch_up_the_robot_away_and_leaving_mission_mode(database, apns, device):
    device_id, robot_token, app_token = device
    relay = RelayNode.started(database, env=push_env(apns, WIMZ_PUSH_OFFLINE_AFTER="2", WIMZ_LIVE_ACTIVITY_INTERVAL="1"))
    try:
        token = phone()
        assert put(relay, device_id, app_token, "activities", "a1", body={"token": token, "environment": "sandbox"})[0] == 200
        assert put(relay, device_id, app_token, "start-token", body={"token": phone(), "environment": "sandbox"})[0] == 200
        await asyncio.sleep(0.3)
        robot = await connect(f"ws://127.0.0.1:{relay.port}/ws/robot?device_id={device_id}", proxy=None,
                              additional_headers={"Authorization": f"Bearer {robot_token}"})
        app = await connect(f"ws://127.0.0.1:{relay.port}/ws/app?device_id={device_id}", proxy=None,
                            additional_headers={"Authorization": f"Bearer {app_token}"})
        # Local first: the open app updates its own activity; the relay sends it nothing.
        await robot.send(event("mission_progress", status="watching", trick="sit", stage=1))
        await robot.send(event("mission_progress", status="success", trick="sit", stage=2))
        await asyncio.sleep(1.5)
        assert live_requests(apns, token) == []
        # Its last socket closes mid-run: one catch-up update with the current state within 2 s.
        closed = time.monotonic()
        await app.close()
        [catch_up] = apns.wait_for(lambda seen: live_requests(apns, token), timeout=3) and live_requests(apns, token)
        assert catch_up.at - closed < 2.5 and catch_up.body["aps"]["event"] == "update"
        assert catch_up.body["aps"]["content-state"]["stage"] == 2
        # The robot away: robot_online false at priority 5, then the end after WIMZ_PUSH_OFFLINE_AFTER.
        await robot.close()
        apns.wait_for(lambda seen: any(not r.body["aps"]["content-state"]["robot_online"] for r in live_requests(apns, token)))
        away = [r for r in live_requests(apns, token) if not r.body["aps"]["content-state"]["robot_online"]][0]
        assert away.body["aps"]["event"] == "update" and away.headers["apns-priority"] == "5"
        apns.wait_for(lambda seen: any(r.body["aps"]["event"] == "end" for r in live_requests(apns, token)), timeout=8)
        end = live_requests(apns, token)[-1]
        assert end.body["aps"]["content-state"]["robot_online"] is False and end.body["aps"]["content-state"]["stage"] == 2
        assert "alert" not in end.body["aps"], "only a completed run's end alerts"
        # Leaving mission mode ends the next run.
        second = phone()
        assert put(relay, device_id, app_token, "activities", "a2", body={"token": second, "environment": "sandbox"})[0] == 200
        await asyncio.sleep(0.3)
        robot = await connect(f"ws://127.0.0.1:{relay.port}/ws/robot?device_id={device_id}", proxy=None,
                              additional_headers={"Authorization": f"Bearer {robot_token}"})
        await robot.send(event("mission_progress", status="waiting_for_dog", trick="down"))
        await robot.send(event("mode_changed", mode="idle", previous_mode="mission"))
        apns.wait_for(lambda seen: [r.body["aps"]["event"] for r in live_requests(apns, second)] == ["update", "end"])
        await robot.close()
    finally:
        relay.stop()


async def test_apns_answers_and_a_restart_mid_run(database, apns, device):
    """410 and BadDeviceToken forget a token; 429 then 200 delivers the newest state; a restart
    mid-run keeps the run (no second start) and its timestamps rising."""
    device_id, robot_token, app_token = device
    env = push_env(apns, WIMZ_LIVE_ACTIVITY_INTERVAL="1")
    relay = RelayNode.started(database, env=env)
    try:
        gone, bad, slow, start = phone(), phone(), phone(), phone()
        apns.answers[gone] = [(410, "Unregistered")]
        apns.answers[bad] = [(400, "BadDeviceToken")]
        apns.answers[slow] = [(429, "TooManyRequests")]
        for n, token in enumerate((gone, bad, slow)):
            other = app_token if n == 0 else database.cli("token", "issue", "--device", device_id, "--role", "app").strip().splitlines()[-1]
            relay.wait_known(device_id, other)
            assert put(relay, device_id, other, "activities", f"act-{n}", body={"token": token, "environment": "sandbox"})[0] == 200
        # An app with a start token and no activity: it gets the run's start.
        starter = database.cli("token", "issue", "--device", device_id, "--role", "app").strip().splitlines()[-1]
        relay.wait_known(device_id, starter)
        assert put(relay, device_id, starter, "start-token", body={"token": start, "environment": "sandbox"})[0] == 200
        await asyncio.sleep(0.3)
        robot = await connect(f"ws://127.0.0.1:{relay.port}/ws/robot?device_id={device_id}", proxy=None,
                              additional_headers={"Authorization": f"Bearer {robot_token}"})
        await robot.send(event("mission_progress", status="watching", trick="sit", progress=0.1))
        apns.wait_for(lambda seen: all(live_requests(apns, t) for t in (gone, bad, slow)))
        # Meanwhile the state moves on: the retry after the 429 carries the newest, not the refused one.
        await robot.send(event("mission_progress", status="watching", trick="sit", progress=0.9))
        apns.wait_for(lambda seen: any(r.answered == 200 for r in live_requests(apns, slow)), timeout=6)
        retried = [r for r in live_requests(apns, slow) if r.answered == 200][0]
        assert retried.body["aps"]["content-state"]["progress"] == 0.9
        stored = "SELECT string_agg(activity_id, ',' ORDER BY activity_id) FROM live_activities"
        deadline = time.monotonic() + 3
        while database.psql(stored) != "act-2" and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert database.psql(stored) == "act-2", "410 and BadDeviceToken forget the activity"
        reasons = database.psql("SELECT details->>'reason' FROM audit_log WHERE event = 'live_activity_removed'").split()
        assert reasons.count("unregistered") == 2
        before = max(r.body["aps"]["timestamp"] for r in live_requests(apns, slow))
        # A restart mid-run: the run goes on (no second start), its timestamps rising.
        relay.stop()
        relay.start()
        await robot.close()
        robot = await connect(f"ws://127.0.0.1:{relay.port}/ws/robot?device_id={device_id}", proxy=None,
                              additional_headers={"Authorization": f"Bearer {robot_token}"})
        await asyncio.sleep(0.5)
        await robot.send(event("mission_progress", status="success", trick="sit"))
        apns.wait_for(lambda seen: any(r.body["aps"]["content-state"]["status"] == "success" for r in live_requests(apns, slow)))
        after = [r for r in live_requests(apns, slow) if r.body["aps"]["content-state"]["status"] == "success"][0]
        assert after.body["aps"]["timestamp"] >= before and after.headers["apns-priority"] == "10"
        assert len(live_requests(apns, start)) == 1, "the run continued: no second start"
        await robot.close()
    finally:
        relay.stop()
