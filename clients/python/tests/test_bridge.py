"""HTTP to the robot through the relay, end to end: the real relay, the real ``wimz-robot bridge``
and the guide-speaking stand-in robot (docs/protocol.md v1.1)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import socket
import urllib.error
import urllib.request

import pytest

from wimz_testkit import RelayNode, free_port
from test_robot_client import app_socket, eventually, next_message
from wimz_robot.bridge import Bridge, local_target
from wimz_robot.standin import EVENTS, serve

#: The guide's Quick Reference (and the rest of §3–§6) as (method, path, JSON body).
QUICK_REFERENCE = [
    ("GET", "/missions/available", None),
    ("POST", "/missions/start", {"mission_name": "sit_training", "parameters": {"dog_id": "elsa"}}),
    ("GET", "/missions/status", None),
    ("POST", "/missions/pause", None),
    ("POST", "/missions/resume", None),
    ("POST", "/missions/stop", None),
    ("GET", "/programs/available", None),
    ("POST", "/programs/start", {"program_name": "puppy_basics", "dog_id": "elsa"}),
    ("GET", "/programs/status", None),
    ("POST", "/programs/stop", None),
    ("POST", "/programs/create", {"name": "morning_routine", "display_name": "Morning Routine",
                                  "missions": ["sit_training"], "daily_treat_limit": 8}),
    ("DELETE", "/programs/morning_routine", None),
    ("DELETE", "/programs/puppy_basics", None),
    ("GET", "/mode", None),
    ("POST", "/mode", {"mode": "coach"}),
    ("GET", "/reports/weekly", None),
    ("GET", "/reports/dog/elsa?weeks=8", None),
    ("GET", "/reports/trends?weeks=8", None),
    ("GET", "/reports/compare", None),
]


def call(base: str, method: str, path: str, token: str | None = None, body: bytes | None = None,
         headers: dict[str, str] | None = None, timeout: float = 30) -> tuple[int, dict[str, str], bytes]:
    """One blocking HTTP request; (status, headers with lower-case names, body)."""
    request = urllib.request.Request(base + path, data=body, method=method, headers=dict(headers or {}))
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    except urllib.error.HTTPError as error:
        return error.code, {k.lower(): v for k, v in error.headers.items()}, error.read()


async def acall(*args, **kwargs):
    return await asyncio.to_thread(call, *args, **kwargs)


def raw_request(port: int, data: bytes) -> bytes:
    """Sends raw request bytes; everything the relay answers."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(data)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
        return out


@pytest.fixture
async def standin():
    port = free_port()
    robot, runner = await serve("127.0.0.1", port)
    robot.url = f"http://127.0.0.1:{port}"
    yield robot
    await runner.cleanup()


@pytest.fixture
async def bridge(relay, device, standin, tmp_path):
    device_id, robot_token, _ = device
    b = Bridge(relay.url, device_id, robot_token, standin.url, turn_file=str(tmp_path / "turn.json"))
    task = asyncio.create_task(b.run())
    await b.client.wait_connected(timeout=10)
    await eventually(lambda: b.local_connected)
    yield b
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass


def robot_base(relay, device_id: str) -> str:
    return f"{relay.url}/api/devices/{device_id}/robot"


async def test_every_quick_reference_endpoint_answers_through_the_relay_as_it_does_directly(relay, device, standin, bridge):
    device_id, _, app_token = device
    for method, path, body in QUICK_REFERENCE:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if data else {}
        # The stand-in has state (mission, mode): each call goes direct, then through the relay,
        # each from the same state, and the two must agree on status, content type and JSON.
        await acall(standin.url, "POST", "/standin/reset")
        direct = await acall(standin.url, method, path, body=data, headers=headers)
        await acall(standin.url, "POST", "/standin/reset")
        relayed = await acall(robot_base(relay, device_id), method, path, app_token, body=data, headers=headers)
        assert relayed[0] == direct[0], (method, path, relayed)
        assert relayed[1].get("content-type") == direct[1].get("content-type"), (method, path)
        assert json.loads(relayed[2]) == json.loads(direct[2]), (method, path)
    # The relay passed the app's query string as it was sent.
    status, _, body = await acall(robot_base(relay, device_id), "GET", "/reports/dog/elsa?weeks=3", app_token)
    assert status == 200 and json.loads(body)["progress"]["weeks_analyzed"] == 3


async def test_bodies_arrive_intact_both_ways_up_to_a_mebibyte(relay, device, standin, bridge):
    device_id, _, app_token = device
    base = robot_base(relay, device_id)
    payload = os.urandom(1 << 20)
    status, headers, body = await acall(base, "PUT", "/standin/echo?x=1", app_token, body=payload,
                                        headers={"Content-Type": "application/octet-stream", "X-App": "a1"})
    echoed = json.loads(body)
    assert status == 200 and headers.get("x-standin") == "echo"
    assert echoed["length"] == len(payload) and echoed["sha256"] == hashlib.sha256(payload).hexdigest()
    assert echoed["method"] == "PUT" and echoed["path"] == "/standin/echo?x=1"
    assert echoed["headers"].get("x-app") == "a1" and "authorization" not in echoed["headers"]
    status, _, body = await acall(base, "GET", "/standin/blob?size=1048576", app_token)
    assert status == 200 and body == bytes(i % 251 for i in range(1 << 20))
    # One byte over, either way.
    assert (await acall(base, "PUT", "/standin/echo", app_token, body=b"x" * ((1 << 20) + 1)))[0] == 413
    status, _, body = await acall(base, "GET", "/standin/blob?size=1048577", app_token)
    assert status == 502 and json.loads(body)["error"] == "response_too_large"


async def test_offline_down_and_refusals(relay, device, database):
    device_id, robot_token, app_token = device
    other_robot, other_app = database.add_device("robot-2")
    base = robot_base(relay, device_id)
    status, headers, body = await acall(base, "GET", "/mode", app_token)
    assert status == 503 and headers.get("retry-after") == "1" and json.loads(body)["error"] == "device_offline"
    assert (await acall(base, "GET", "/mode", None))[0] == 401
    assert json.loads((await acall(base, "GET", "/mode", other_app))[2])["error"] == "wrong_device"
    assert (await acall(base, "GET", "/mode", robot_token))[0] == 403
    # A bridge whose robot API is down: 502 robot_unreachable.
    b = Bridge(relay.url, device_id, robot_token, f"http://127.0.0.1:{free_port()}")
    task = asyncio.create_task(b.run())
    try:
        await b.client.wait_connected(timeout=10)
        status, _, body = await acall(base, "GET", "/mode", app_token)
        assert status == 502 and json.loads(body)["error"] == "robot_unreachable"
    finally:
        task.cancel()


async def test_a_hanging_robot_api_gets_504_within_the_timeout(database, device, standin):
    device_id, robot_token, app_token = device
    relay = RelayNode.started(database, env={"WIMZ_ROBOT_HTTP_TIMEOUT": "2"})
    b = Bridge(relay.url, device_id, robot_token, standin.url, local_timeout=3)
    task = asyncio.create_task(b.run())
    try:
        await b.client.wait_connected(timeout=10)
        started = asyncio.get_running_loop().time()
        status, _, body = await acall(robot_base(relay, device_id), "GET", "/standin/hang", app_token)
        assert status == 504 and json.loads(body)["error"] == "robot_timeout"
        assert asyncio.get_running_loop().time() - started < 6, "the relay's 2 s timeout, not a hang"
    finally:
        task.cancel()
        relay.stop()


ESCAPES = [
    "/../../etc/passwd", "/%2e%2e/%2e%2e/etc/passwd", "/missions/%2E%2E/%2e%2E/x", "/%252e%252e/x", "//evil.example/x",
    "/%2f%2fevil.example/x", "/.%2e/x", "/..%5cx", "/x%0d%0aInjected:%20yes", "/x%00",
]


async def test_escape_attempts_never_reach_anything_but_the_local_api(relay, device, standin, bridge):
    device_id, _, app_token = device
    for path in ESCAPES:
        request = (f"GET /api/devices/{device_id}/robot{path} HTTP/1.1\r\nHost: x\r\n"
                   f"Authorization: Bearer {app_token}\r\n\r\n").encode()
        answer = await asyncio.to_thread(raw_request, relay.port, request)
        status = int(answer.split(b" ", 2)[1])
        assert status == 400, (path, answer[:200])
        assert b"Injected" not in answer.split(b"\r\n\r\n", 1)[0]
    # Absolute-form and authority-form targets are refused by the relay itself.
    for target in (f"http://evil.example/api/devices/{device_id}/robot/mode", "evil.example:80"):
        answer = await asyncio.to_thread(raw_request, relay.port,
                                         f"GET {target} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {app_token}\r\n\r\n".encode())
        assert answer.startswith(b"HTTP/1.1 400"), answer[:100]
    # Nothing of the above reached the stand-in.
    assert all(".." not in seen and "passwd" not in seen and "evil" not in seen for seen in standin.seen), standin.seen
    # The bridge's own check, on frames a relay could send.
    for path in ESCAPES + ["missions", "http://evil/x", "/a\\b", "/a b", "/%2e", "/ok/%2e%2e%2f"]:
        assert local_target(path, None) is None, path
    assert local_target("/missions/start", "a=1&b=%20") == "/missions/start?a=1&b=%20"
    assert local_target("/reports/dog/elsa", None) == "/reports/dog/elsa"
    assert local_target("/a", "x\r\nHost: evil") is None


async def test_events_and_commands_cross_the_bridge_both_ways(relay, device, standin, bridge):
    device_id, _, app_token = device
    app1 = await app_socket(relay, device_id, app_token)
    app2 = await app_socket(relay, device_id, app_token)
    for app in (app1, app2):
        await next_message(app, lambda m: m.get("event") == "device_status")
    await eventually(lambda: bridge.client.apps == 2)
    for name in EVENTS:
        status, _, _ = await acall(standin.url, "POST", "/standin/emit", body=json.dumps({"event": name}).encode(),
                                   headers={"Content-Type": "application/json"})
        assert status == 200
        for app in (app1, app2):
            received = await next_message(app, lambda m, n=name: m.get("event") == n)
            assert received["type"] == "event" and received["data"] == EVENTS[name] and "timestamp" in received
    # A command from app1 reaches the robot's /ws/control; the answer goes to app1 only.
    await app1.send(json.dumps({"type": "command", "id": "mine-1", "command": "ping", "data": {}}))
    response = await next_message(app1, lambda m: m.get("type") == "response")
    assert response == {"type": "response", "id": "mine-1", "ok": True, "data": {"pong": True}}
    assert standin.commands[-1]["command"] == "ping"
    await app2.send(json.dumps({"type": "command", "id": "x", "command": "treat", "data": {}}))
    treat = await next_message(app2, lambda m: m.get("event") == "treat_dispensed")
    assert treat["data"]["daily_count"] == 5 and treat["data"]["daily_limit"] == 15
    answer = await next_message(app2, lambda m: m.get("type") == "response")
    assert answer["id"] == "x"
    with pytest.raises(asyncio.TimeoutError):
        await next_message(app1, lambda m: m.get("type") == "response", timeout=0.5)
    await app1.close()
    await app2.close()


async def test_bridge_keeps_fresh_turn_credentials_in_its_file(database, device, standin, tmp_path):
    device_id, robot_token, _ = device
    relay = RelayNode.started(database, env={"WIMZ_TURN_SECRET": "s3cret", "WIMZ_TURN_URLS": "turn:127.0.0.1:3478?transport=udp",
                                 "WIMZ_TURN_TTL": "300"})
    turn_file = tmp_path / "run" / "turn.json"
    b = Bridge(relay.url, device_id, robot_token, standin.url, turn_file=str(turn_file))
    task = asyncio.create_task(b.run())
    try:
        await eventually(turn_file.exists)
        written = json.loads(turn_file.read_text())
        assert written["username"].split(":", 1)[1].startswith(device_id) and written["credential"] and written["ttl"] == 300
        assert written["urls"] == ["turn:127.0.0.1:3478?transport=udp"]
        # A newer credential (here: fetched by the client a second later) replaces the file.
        await asyncio.sleep(1.1)
        b.client._credentials = None
        await b.client.turn_credentials()
        await eventually(lambda: json.loads(turn_file.read_text())["username"] != written["username"]
                         or json.loads(turn_file.read_text())["credential"] != written["credential"], timeout=5)
    finally:
        task.cancel()
        relay.stop()


async def test_the_app_library_decodes_every_event_of_the_stand_in_into_the_guides_models(relay, device, standin, bridge):
    """`wimz-app-demo --json` (the Swift app library) through the relay: every §7 event the stand-in
    sends comes out as the guide's model, re-encoded by its own coding keys — field for field."""
    device_id, _, app_token = device
    demo = await asyncio.create_subprocess_exec(
        os.path.join(os.environ["WIMZ_BIN_DIR"], "wimz-app-demo"), "--url", relay.url, "--device", device_id,
        "--token", app_token, "--json", "--exit-after", "20", stdout=asyncio.subprocess.PIPE)
    try:
        await eventually(lambda: bridge.client.apps == 1)
        for name in EVENTS:
            await acall(standin.url, "POST", "/standin/emit", body=json.dumps({"event": name}).encode(),
                        headers={"Content-Type": "application/json"})
        seen: dict[str, dict] = {}
        while len(seen) < len(EVENTS):
            line = await asyncio.wait_for(demo.stdout.readline(), 10)
            assert line, "wimz-app-demo ended early"
            parsed = json.loads(line)
            seen[parsed["event"]] = parsed["decoded"]
        assert seen == EVENTS
    finally:
        demo.terminate()
        await demo.wait()


async def test_the_app_library_reads_the_last_known_state_while_the_robot_is_offline(relay, device, standin, bridge):
    """`wimz-app-demo --state`: after the robot's events and its departure, the app library reads
    what the relay kept (docs/protocol.md v1.2) as the guide's models — field for field."""
    device_id, _, app_token = device
    await eventually(lambda: bridge.client.connected)
    replayed = ["mode_changed", "mission_progress", "audio_state", "program_progress"]
    for name in [n for n in replayed if n in EVENTS] + ["bark_detected"]:
        await acall(standin.url, "POST", "/standin/emit", body=json.dumps({"event": name}).encode(),
                    headers={"Content-Type": "application/json"})
    await asyncio.sleep(0.5)
    await bridge.client.close()
    await asyncio.sleep(1.5)  # the relay's write-behind tick and presence batch
    run = await asyncio.create_subprocess_exec(
        os.path.join(os.environ["WIMZ_BIN_DIR"], "wimz-app-demo"), "--url", relay.url, "--device", device_id,
        "--token", app_token, "--state", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(run.communicate(), 30)
    assert run.returncode == 0, err.decode()
    state = json.loads(out)
    assert state["device_id"] == device_id and state["online"] is False and state["last_seen"]
    assert sorted(state["events"]) == sorted(name for name in replayed if name in EVENTS)
    for name, kept in state["events"].items():
        assert kept["decoded"] == EVENTS[name] and kept["received_at"], name


async def api_check(relay, device_id: str, app_token: str, direct: str | None) -> list[dict]:
    args = [os.path.join(os.environ["WIMZ_BIN_DIR"], "wimz-app-demo"), "--url", relay.url, "--device", device_id,
            "--token", app_token, "--api-check"] + (["--direct", direct, "--probe-timeout", "10"] if direct else [])
    run = await asyncio.create_subprocess_exec(*args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(run.communicate(), 60)
    assert run.returncode == 0, err.decode()
    return [json.loads(line) for line in out.decode().splitlines()]


async def test_robot_api_answers_the_same_direct_and_through_the_relay(relay, device, standin, bridge):
    """The app library's RobotAPI over both routes, and its automatic choice."""
    device_id, _, app_token = device
    await acall(standin.url, "POST", "/standin/reset")
    direct = await api_check(relay, device_id, app_token, standin.url)
    await acall(standin.url, "POST", "/standin/reset")
    relayed = await api_check(relay, device_id, app_token, None)
    await acall(standin.url, "POST", "/standin/reset")
    fallback = await api_check(relay, device_id, app_token, f"http://127.0.0.1:{free_port()}")  # nothing on the LAN
    assert {c["route"] for c in direct} == {"direct"}
    assert {c["route"] for c in relayed} == {"relay"} and {c["route"] for c in fallback} == {"relay"}
    strip = lambda calls: [{k: v for k, v in c.items() if k != "route"} for c in calls]  # noqa: E731
    assert strip(direct) == strip(relayed) == strip(fallback)
    calls = {c["call"]: c for c in relayed}
    assert [m["name"] for m in calls["missions/available"]["decoded"]] == ["sit_training", "down_sustained", "quiet_training"]
    assert calls["missions/available"]["decoded"][0]["max_rewards"] == 5
    assert calls["missions/start"]["decoded"]["mission_id"] == 42
    assert calls["missions/status"]["decoded"]["stage_info"]["success_event"] == "VisionEvent.Pose.Sit"
    assert calls["mode/locked"]["decoded"] == {"success": False, "error": "Mode locked: Mission active: sit_training"}
    assert calls["mode/set"]["decoded"] == {"success": True, "mode": "coach", "previous_mode": "idle"}
    assert calls["reports/weekly"]["decoded"]["report"]["bark_stats"]["by_dog"] == {"Elsa": 30, "Bezik": 15}
    assert calls["reports/compare"]["decoded"]["comparison"]["leader_board"]["quietest"] == "bezik"
    assert "400" in calls["programs/delete-preset"]["error"]


async def test_bad_frames_are_skipped_and_the_bridge_goes_on(relay, device, standin, bridge, caplog):
    """Frames a relay should never send (and junk) are logged and skipped, never fatal."""
    device_id, _, app_token = device
    sent: list[dict] = []
    real_send = bridge.client.send

    async def recording_send(message):
        sent.append(message)
        return await real_send(message)
    bridge.client.send = recording_send
    for junk in ['{"type":"http_request"}', '{"type":"http_request","id":"h1","method":"TRACE","path":"/mode"}',
                 '{"type":"http_request","id":"h2","method":"POST","path":"/mode","body":"***"}',
                 '{"type":"http_request","id":"h3","method":"GET","path":null}', "not json", b"\x00\x01"]:
        bridge._from_relay(junk)
    await eventually(lambda: len(sent) == 3)
    assert sorted((m["id"], m["status"]) for m in sent) == [("h1", 400), ("h2", 400), ("h3", 400)]
    status, _, body = await acall(robot_base(relay, device_id), "GET", "/mode", app_token)
    assert status == 200 and json.loads(body)["mode"] == "idle"


async def test_the_robots_api_hears_who_is_asking_and_no_app_can_say_it_for_itself(relay, device, standin, bridge):
    device_id, _, app_token = device
    token_id = int(relay.database.psql(f"SELECT max(id) FROM tokens WHERE device_id = '{device_id}' AND role = 'app'"))
    status, _, body = await acall(relay.url, "POST", f"/api/devices/{device_id}/robot/standin/echo", body=b"{}",
                                  headers={"Authorization": f"Bearer {app_token}", "Content-Type": "application/json",
                                           "X-Wimz-Access": "owner", "X-Wimz-Member": "1"})
    assert status == 200
    headers = json.loads(body)["headers"]
    # The relay's word (from "from"), never the app's own X-Wimz-* headers.
    assert headers["x-wimz-member"] == str(token_id) and headers["x-wimz-access"] == "owner"
    assert headers["x-wimz-control"] == "true"
    app = await app_socket(relay, device_id, app_token)
    await next_message(app, lambda m: m.get("event") == "device_status")
    await app.send(json.dumps({"type": "command", "id": "who", "command": "ping", "data": {}}))
    await next_message(app, lambda m: m.get("type") == "response")
    assert standin.commands[-1]["from"] == {"token_id": token_id, "access": "owner", "control": True}
    await app.close()
