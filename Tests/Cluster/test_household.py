"""The household (docs/protocol.md v1.3), end to end with real
components: a relay on its own database, a real coturn with its management CLI, real sockets.
Owners invite family and guests from the phone; each level may do what the access table says,
from both sides (a refused frame or request never reaches the robot); a guest's access ends on
time; a removal cuts sockets, HTTP, push and the video on coturn; a removal on one node closes
sockets on another."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import websockets

from turn_probe import TurnProbe
from wimz_testkit import Coturn, Database, RelayNode, http_json

STATIC_SECRET = "household-static-secret-0123456789"
CLI_PASSWORD = "cli-" + secrets.token_hex(8)


def iso(seconds_from_now: float) -> str:
    return (datetime.now(timezone.utc) + timedelta(seconds=seconds_from_now)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class CLIGate:
    """A TCP forwarder in front of coturn's CLI that a test can shut and open: "the TURN CLI is
    down at removal and back later"."""

    def __init__(self, target_port: int) -> None:
        self.target = target_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.open = True
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            client, _ = self.listener.accept()
            if not self.open:
                client.close()
                continue
            upstream = socket.create_connection(("127.0.0.1", self.target))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(4096):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


@pytest.fixture(scope="module")
def coturn():
    server = Coturn(static_secret=STATIC_SECRET, cli_password=CLI_PASSWORD)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def home(coturn, apns):
    """A relay with TURN (coturn's CLI behind a gate), push (the APNs stand-in) and the admin
    API, on a database of its own."""
    gate = CLIGate(coturn.cli_port)
    password_file = Path(tempfile.mkdtemp(prefix="wimz-turn-cli-")) / "password"
    password_file.write_text(CLI_PASSWORD + "\n")
    database = Database(prefix="household")
    admin = secrets.token_hex(16)
    node = RelayNode.started(database, env={
        "WIMZ_TURN_URLS": f"turn:127.0.0.1:{coturn.port}?transport=udp", "WIMZ_TURN_SECRET": STATIC_SECRET,
        "WIMZ_TURN_ADMIN": f"127.0.0.1:{gate.port}", "WIMZ_TURN_ADMIN_PASSWORD_FILE": str(password_file),
        "WIMZ_ADMIN_TOKEN": admin, **apns.relay_env})
    node.gate = gate
    node.admin = admin
    yield node
    node.stop()
    database.drop()


class Household:
    """One device: its robot token, an owner's app token, and helpers to invite and redeem."""

    def __init__(self, node: RelayNode) -> None:
        self.node = node
        self.device = "home-" + secrets.token_hex(4)
        self.robot_token, self.owner = node.database.add_device(self.device)
        self.owner_id = int(node.database.psql(f"SELECT max(id) FROM tokens WHERE device_id = '{self.device}' AND role = 'app'"))

    def call(self, method: str, path: str, token: str | None, body: dict | None = None) -> tuple[int, dict]:
        return http_json(f"{self.node.url}/api/devices/{self.device}/{path}", token, method, body)

    def invite(self, access: str, label: str = "someone", **fields) -> dict:
        status, body = self.call("POST", "invites", self.owner, {"access": access, "label": label, **fields})
        assert status == 201, body
        return body

    def join(self, access: str, label: str = "someone", **fields) -> tuple[str, int, dict]:
        """Invites and redeems: (token, token_id, redemption body)."""
        code = self.invite(access, label, **fields)["code"]
        status, body = http_json(f"{self.node.url}/api/pairing", None, "POST", {"code": code})
        assert status == 201, body
        return body["token"], body["token_id"], body

    async def robot(self, senders: bool = True):
        return await websockets.connect(
            f"ws://127.0.0.1:{self.node.port}/ws/robot?device_id={self.device}{'&senders=1' if senders else ''}",
            additional_headers={"Authorization": f"Bearer {self.robot_token}"})

    async def app(self, token: str):
        ws = await websockets.connect(f"ws://127.0.0.1:{self.node.port}/ws/app?device_id={self.device}&token={token}")
        assert json.loads(await ws.recv())["event"] == "device_status"
        return ws


async def next_json(ws, kinds: tuple[str, ...] = ("command", "signal", "error", "http_request"), timeout: float = 5) -> dict:
    """The next frame of one of ``kinds`` (relay chatter such as app_presence skipped)."""
    deadline = time.monotonic() + timeout
    while True:
        frame = json.loads(await asyncio.wait_for(ws.recv(), max(0.05, deadline - time.monotonic())))
        if frame.get("type") in kinds:
            return frame


async def closed_with(ws, within: float) -> int | None:
    """The close code the relay sent within ``within`` seconds (None: still open)."""
    try:
        while True:
            await asyncio.wait_for(ws.recv(), within)
    except websockets.ConnectionClosed as closed:
        return closed.rcvd.code if closed.rcvd else None
    except asyncio.TimeoutError:
        return None


async def answer_http(robot, answered: list[dict]) -> None:
    """The robot's side of HTTP through the relay: every request recorded, answered 200."""
    async for raw in robot:
        frame = json.loads(raw)
        if frame.get("type") == "http_request":
            answered.append(frame)
            await robot.send(json.dumps({"type": "http_response", "id": frame["id"], "status": 200,
                                         "headers": {"content-type": "application/json"},
                                         "body": base64.b64encode(b'{"ok":true}').decode(), "more": False}))


def robot_http(house: Household, method: str, token: str, path: str = "missions/start") -> int:
    return http_json(f"{house.node.url}/api/devices/{house.device}/robot/{path}", token, method,
                     {"mission": "sit"} if method != "GET" else None)[0]


async def test_every_level_does_what_the_access_table_says_from_both_sides(home):
    house = Household(home)
    family, family_id, _ = house.join("family", "Sam")
    guest, guest_id, joined = house.join("guest", "Dog-sitter", until=iso(3600))
    driver, driver_id, _ = house.join("guest", "Walker", control=True, until=iso(3600))
    assert joined["access"] == "guest" and joined["control"] is False and joined["until"]
    robot = await house.robot()
    sockets = {name: await house.app(token) for name, token in
               (("owner", house.owner), ("family", family), ("guest", guest), ("driver", driver))}
    ids = {"owner": house.owner_id, "family": family_id, "guest": guest_id, "driver": driver_id}
    expected = {"owner": ("owner", True), "family": ("family", True), "guest": ("guest", False), "driver": ("guest", True)}

    for name, ws in sockets.items():
        access, control = expected[name]
        await ws.send(json.dumps({"type": "command", "id": f"c-{name}", "command": "treat"}))
        if control:
            seen = await next_json(robot)
            assert seen["from"] == {"token_id": ids[name], "access": access, "control": control}, seen
            assert list(seen)[0] == "from" and seen["command"] == "treat"
        else:
            refused = await next_json(ws)
            assert refused["code"] == "forbidden" and refused["id"] == f"c-{name}", refused
        # Other frames (WebRTC signalling) go through from everyone, with who sent them.
        await ws.send(json.dumps({"type": "signal", "sdp": name}))
        seen = await next_json(robot)
        assert seen["sdp"] == name and seen["from"]["token_id"] == ids[name], seen
    # An app never speaks as someone else: a top-level "from" is refused whoever sends it.
    await sockets["owner"].send(json.dumps({"type": "signal", "from": {"token_id": 1}}))
    assert (await next_json(sockets["owner"]))["code"] == "bad_message"

    # HTTP to the robot: everyone reads; a guest without control writes nothing.
    answered: list[dict] = []
    task = asyncio.create_task(answer_http(robot, answered))
    try:
        for name, token in (("owner", house.owner), ("family", family), ("guest", guest), ("driver", driver)):
            assert await asyncio.to_thread(robot_http, house, "GET", token, "status") == 200
            status = await asyncio.to_thread(robot_http, house, "POST", token)
            assert status == (403 if name == "guest" else 200), (name, status)
        methods = [(f["method"], f["from"]["token_id"]) for f in answered]
        assert ("POST", guest_id) not in methods and ("GET", guest_id) in methods and ("POST", driver_id) in methods
        assert all(list(f)[0] == "from" for f in answered)
    finally:
        task.cancel()

    # The household endpoints by level.
    assert house.call("GET", "members", family)[0] == 200
    assert house.call("GET", "members", guest) == (403, {"error": "forbidden", "message": "guests can't list the household"})
    for token in (family, guest, driver):
        assert house.call("POST", "invites", token, {"access": "family", "label": "x"})[0] == 403
        assert house.call("GET", "invites", token)[0] == 403
        assert house.call("PATCH", f"members/{house.owner_id}", token, {"access": "guest"})[0] == 403
        assert house.call("DELETE", f"members/{house.owner_id}", token)[0] == 403
    assert house.call("POST", "invites", house.robot_token, {"access": "family", "label": "x"})[0] == 403
    status, listed = house.call("GET", "members", house.owner)
    members = {m["token_id"]: m for m in listed["members"]}
    assert set(members) == set(ids.values()) and all(m["online"] for m in members.values())
    assert members[guest_id]["access"] == "guest" and members[guest_id]["control"] is False and members[guest_id]["until"]
    assert members[family_id]["control"] is True and members[family_id]["until"] is None
    # A robot that did not opt in sees frames byte for byte, without "from".
    await robot.close()
    plain = await house.robot(senders=False)
    frame = '{"type":"signal","sdp":"exact"}'
    await sockets["family"].send(frame)
    while (received := await asyncio.wait_for(plain.recv(), 5)) != frame:
        assert json.loads(received)["type"] == "event", received  # relay chatter (app_presence, turn_credentials)
    await plain.close()


async def test_a_change_of_access_applies_to_live_sockets_at_once(home):
    house = Household(home)
    guest, guest_id, _ = house.join("guest", "Sitter", until=iso(3600))
    robot = await house.robot()
    ws = await house.app(guest)
    await ws.send(json.dumps({"type": "command", "id": "1", "command": "treat"}))
    assert (await next_json(ws))["code"] == "forbidden"
    status, member = house.call("PATCH", f"members/{guest_id}", house.owner, {"control": True})
    assert status == 200 and member["control"] is True and member["online"] is True
    await ws.send(json.dumps({"type": "command", "id": "2", "command": "treat"}))
    assert (await next_json(robot))["from"] == {"token_id": guest_id, "access": "guest", "control": True}
    # A guest made family loses its until unless one is given; family made guest needs one.
    status, member = house.call("PATCH", f"members/{guest_id}", house.owner, {"access": "family"})
    assert status == 200 and member["access"] == "family" and member["until"] is None
    assert house.call("PATCH", f"members/{guest_id}", house.owner, {"access": "guest"})[1]["error"] == "invalid_until"
    status, member = house.call("PATCH", f"members/{guest_id}", house.owner, {"access": "guest", "until": iso(600)})
    assert status == 200 and member["control"] is False
    await ws.send(json.dumps({"type": "command", "id": "3", "command": "treat"}))
    assert (await next_json(ws))["code"] == "forbidden"
    assert await closed_with(ws, 0.3) is None  # no reconnect was needed, and none happened
    await ws.close()
    await robot.close()


async def test_an_app_learns_its_own_access_from_its_greeting_and_the_status_answer(home):
    house = Household(home)
    until = iso(3600)
    guest, guest_id, _ = house.join("guest", "Sitter", until=until)
    ws = await websockets.connect(f"ws://127.0.0.1:{home.port}/ws/app?device_id={house.device}&token={guest}")
    greeting = json.loads(await ws.recv())
    own = greeting["data"]["member"]
    assert own["token_id"] == guest_id and own["access"] == "guest" and own["control"] is False
    assert own["until"].startswith(until[:19])
    await ws.close()
    status, body = house.call("GET", "status", guest)
    assert status == 200 and body["member"] == own
    status, body = house.call("GET", "status", house.owner)
    assert body["member"] == {"token_id": house.owner_id, "access": "owner", "control": True, "until": None}
    status, body = house.call("GET", "status", house.robot_token)
    assert status == 200 and "member" not in body  # a robot is no member


async def test_invite_rules_and_bad_input_store_nothing(home):
    house = Household(home)
    count = lambda: int(home.database.psql(f"SELECT count(*) FROM pairing_codes WHERE device_id = '{house.device}'"))
    bad = [
        ("not json", "invalid_json"), ([1, 2], "invalid_json"),
        ({"access": "owner", "label": "x"}, "bad_request"), ({"access": "admin", "label": "x"}, "bad_request"),
        ({"access": "family"}, "bad_request"), ({"access": "family", "label": ""}, "bad_request"),
        ({"access": "family", "label": "x" * 65}, "bad_request"), ({"access": "family", "label": "bell\u0007"}, "bad_request"),
        ({"access": "family", "label": "a\nb"}, "bad_request"), ({"access": "family", "label": "x", "extra": 1}, "bad_request"),
        ({"access": "family", "label": "x", "control": "yes"}, "bad_request"),
        ({"access": "family", "label": "x", "expires_in": 299}, "bad_request"),
        ({"access": "family", "label": "x", "expires_in": 604801}, "bad_request"),
        ({"access": "guest", "label": "x"}, "invalid_until"), ({"access": "guest", "label": "x", "until": None}, "invalid_until"),
        ({"access": "guest", "label": "x", "until": iso(-60)}, "invalid_until"),
        ({"access": "guest", "label": "x", "until": iso(31 * 86400)}, "invalid_until"),
        ({"access": "guest", "label": "x", "until": "tomorrow"}, "invalid_until"),
        ({"access": "guest", "label": "x", "until": "2030-01-01T00:00:00"}, "invalid_until"),
        ({"access": "guest", "label": "x", "until": 1893456000}, "invalid_until"),
        ({"access": "family", "label": "x", "until": iso(-1)}, "invalid_until"),
    ]
    for body, code in bad:
        raw = body if isinstance(body, str) else json.dumps(body)
        request = subprocess.run(["curl", "-s", "-X", "POST", "-H", f"Authorization: Bearer {house.owner}",
                                  "-H", "Content-Type: application/json", "--data-binary", raw,
                                  f"{home.url}/api/devices/{house.device}/invites"], capture_output=True, text=True)
        assert json.loads(request.stdout)["error"] == code, (body, request.stdout)
    assert count() == 0
    # Family's control is always true; the code is shown once and never listed.
    created = house.invite("family", "Grandma", control=False)
    assert created["control"] is True and created["until"] is None and "code" in created
    listed = house.call("GET", "invites", house.owner)[1]["invites"]
    assert [i["invite_id"] for i in listed] == [created["invite_id"]] and "code" not in listed[0]
    # Cancelled: the code stops working (the same 404 as a wrong one).
    assert house.call("DELETE", f"invites/{created['invite_id']}", house.owner)[0] == 204
    assert http_json(f"{home.url}/api/pairing", None, "POST", {"code": created["code"]})[1]["error"] == "invalid_code"
    assert house.call("DELETE", f"invites/{created['invite_id']}", house.owner)[0] == 404
    # 20 pending at most.
    for k in range(20):
        house.invite("guest", f"g{k}", until=iso(86400))
    status, body = house.call("POST", "invites", house.owner, {"access": "family", "label": "one too many"})
    assert status == 409 and body["error"] == "too_many_invites"
    # The invitee's own label replaces the invite's.
    code = house.call("GET", "invites", house.owner)[1]["invites"][0]
    assert house.call("DELETE", f"invites/{code['invite_id']}", house.owner)[0] == 204
    fresh = house.invite("family", "Uncle")
    status, body = http_json(f"{home.url}/api/pairing", None, "POST", {"code": fresh["code"], "label": "Bob's iPhone"})
    assert status == 201 and body["access"] == "family"
    labels = [m["label"] for m in house.call("GET", "members", house.owner)[1]["members"]]
    assert "Bob's iPhone" in labels and "Uncle" not in labels
    audit = home.database.psql(f"SELECT string_agg(event, ' ') FROM audit_log WHERE device_id = '{house.device}'")
    for event in ("invite_created", "invite_cancelled", "invite_redeemed"):
        assert event in audit


async def test_member_rules_last_owner_leaving_and_other_devices(home):
    house = Household(home)
    other = Household(home)
    family, family_id, _ = house.join("family", "Sam")
    # The last owner can't be downgraded or removed; with a second owner it can.
    assert house.call("PATCH", f"members/{house.owner_id}", house.owner, {"access": "family"})[1]["error"] == "last_owner"
    assert house.call("DELETE", f"members/{house.owner_id}", house.owner)[1]["error"] == "last_owner"
    # PATCH of unknown fields, wrong types, nothing: 400; another device's member: 404.
    for body in ({"label": "x"}, {"access": "root"}, {"control": 1}, {}, {"until": "soon"}):
        status, answer = house.call("PATCH", f"members/{family_id}", house.owner, body)
        assert status == 400 and answer["error"] in ("bad_request", "invalid_until"), (body, answer)
    assert house.call("PATCH", f"members/{other.owner_id}", house.owner, {"access": "family"})[0] == 404
    assert house.call("DELETE", f"members/{other.owner_id}", house.owner)[0] == 404
    assert house.call("DELETE", "members/99999999", house.owner)[0] == 404
    assert house.call("PATCH", f"members/{family_id}", house.owner, {"access": "owner"})[0] == 200
    assert house.call("PATCH", f"members/{house.owner_id}", house.owner, {"access": "family"})[0] == 200
    # Now family: no longer an owner anywhere, at once.
    assert house.call("GET", "invites", house.owner)[0] == 403
    # Anyone may leave: the socket closes with 4003.
    ws = await house.app(house.owner)
    assert house.call("DELETE", f"members/{house.owner_id}", house.owner)[0] == 204
    assert await closed_with(ws, 1.5) == 4003
    assert house.call("GET", "members", house.owner)[0] == 401
    changed = home.database.psql(f"SELECT details->>'by' FROM audit_log WHERE device_id = '{house.device}' AND event = 'member_changed'")
    removed = home.database.psql(f"SELECT details->>'by' FROM audit_log WHERE device_id = '{house.device}' AND event = 'member_removed'")
    assert set(changed.split()) == {"owner"} and removed.split() == ["member"]


def test_the_app_demo_invites_lists_and_removes(home):
    """wimz-app-demo --invite, --members and --remove, on WimzRelayClient, against the relay."""
    house = Household(home)

    def demo(*arguments: str, token: str = house.owner) -> tuple[int, str]:
        done = subprocess.run([os.path.join(os.environ["WIMZ_BIN_DIR"], "wimz-app-demo"), "--url", home.url,
                               "--device", house.device, "--token", token, *arguments],
                              capture_output=True, text=True, timeout=60)
        return done.returncode, done.stdout.strip()

    code, out = demo("--invite", "guest", "--label", "Dog sitter", "--until", iso(7200)[:19] + "Z")
    invite = json.loads(out)
    assert code == 0 and invite["access"] == "guest" and invite["control"] is False
    status, redeemed = http_json(f"{home.url}/api/pairing", None, "POST", {"code": invite["code"]})
    assert status == 201 and redeemed["access"] == "guest"
    code, out = demo("--members")
    listed = {m["token_id"]: m for m in json.loads(out)["members"]}
    assert code == 0 and listed[redeemed["token_id"]]["label"] == "Dog sitter" and listed[house.owner_id]["access"] == "owner"
    # A guest may not list the household: the relay's refusal, exit 2.
    code, out = demo("--members", token=redeemed["token"])
    assert code == 2 and "forbidden" in out
    code, out = demo("--remove", str(redeemed["token_id"]))
    assert code == 0 and json.loads(out) == {"removed": redeemed["token_id"]}
    assert house.call("GET", "status", redeemed["token"])[0] == 401


async def test_a_guests_access_ends_on_time_while_the_other_core_is_busy(home, apns):
    house = Household(home)
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        token = house.node.database.cli("token", "issue", "--device", house.device, "--role", "app", "--access", "guest",
                                        "--until", iso(3)).strip().splitlines()[-1]
        home.wait_known(house.device, token)
        status, _ = house.call("PUT", "push", token, {"platform": "apns", "token": "ab" * 32, "environment": "sandbox",
                                                      "events": ["bark_detected"]})
        assert status == 200
        until = time.monotonic() + 3
        ws = await house.app(token)
        code = await closed_with(ws, 3 + 1.2)
        late = time.monotonic() - until
        assert code == 4003 and late < 1.2, (code, late)
    finally:
        busy.kill()
    assert house.call("GET", "status", token)[0] == 401
    # Its push registrations go; the expiry is audited.
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and home.database.psql(
            f"SELECT count(*) FROM push_registrations WHERE device_id = '{house.device}'") != "0":
        time.sleep(0.1)
    assert home.database.psql(f"SELECT count(*) FROM push_registrations WHERE device_id = '{house.device}'") == "0"
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and "member_expired" not in home.database.psql(
            f"SELECT string_agg(event, ' ') FROM audit_log WHERE device_id = '{house.device}'"):
        time.sleep(0.1)
    assert "member_expired" in home.database.psql(f"SELECT string_agg(event, ' ') FROM audit_log WHERE device_id = '{house.device}'")


async def test_removal_cuts_the_guests_video_on_coturn(home, coturn):
    house = Household(home)
    guest, guest_id, joined = house.join("guest", "Sitter", until=iso(1800))
    status, credential = http_json(f"{home.url}/api/turn/credentials?ttl=86400", guest)
    assert status == 200, credential
    # The member is named in the username, and the credential ends by its until.
    assert credential["username"].endswith(f":{house.device}/{guest_id}")
    assert credential["expires_at"] <= joined["until"] and credential["ttl"] <= 1800
    probe = TurnProbe(("127.0.0.1", coturn.port), credential["username"], credential["credential"])
    assert coturn.sessions(credential["username"]) != []
    ws = await house.app(guest)
    removed_at = time.monotonic()
    assert house.call("DELETE", f"members/{guest_id}", house.owner)[0] == 204
    assert await closed_with(ws, 1.5) == 4003
    while time.monotonic() - removed_at < 5 and coturn.sessions(credential["username"]):
        time.sleep(0.1)
    assert coturn.sessions(credential["username"]) == [], "coturn still holds the removed guest's session"
    assert probe.refresh() != 200
    probe.close()
    # Audited once the cut is final: after its last pass, 3 s after the removal.
    events = ""
    while time.monotonic() - removed_at < 6 and not events:
        events = home.database.psql(f"SELECT details FROM audit_log WHERE device_id = '{house.device}' AND event = 'turn_sessions_cut'")
        time.sleep(0.1)
    assert json.loads(events)["sessions"] == 1
    assert http_json(f"{home.url}/api/turn/credentials", guest)[0] == 401


async def test_a_cut_waits_for_a_turn_cli_that_is_down_and_happens_when_it_is_back(home, coturn):
    house = Household(home)
    family, family_id, _ = house.join("family", "Sam")
    credential = http_json(f"{home.url}/api/turn/credentials", family)[1]
    probe = TurnProbe(("127.0.0.1", coturn.port), credential["username"], credential["credential"])
    time.sleep(0.5)  # the issuance reaches the store through the audit writer's batches
    home.gate.open = False
    try:
        assert house.call("DELETE", f"members/{family_id}", house.owner)[0] == 204
        time.sleep(4.5)  # past the cutter's early pass and its last one
        assert coturn.sessions(credential["username"]) != []  # the CLI was unreachable: nothing cut yet
        assert "0" != home.database.psql(f"SELECT count(*) FROM turn_cuts WHERE token_id = {family_id} AND done_at IS NULL")
    finally:
        home.gate.open = True
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and coturn.sessions(credential["username"]):
        time.sleep(0.2)
    assert coturn.sessions(credential["username"]) == []
    assert probe.refresh() != 200
    probe.close()
    metrics = urllib.request.urlopen(f"{home.url}/metrics", timeout=5).read().decode()
    assert any(line.startswith('wimz_turn_cuts_total{outcome="retry"}') and not line.endswith(" 0") for line in metrics.splitlines())


async def test_removal_on_one_node_closes_the_members_socket_on_another(cluster):
    device = "house-" + secrets.token_hex(4)
    robot_token, owner = cluster.add_devices(1, prefix=device)[f"{device}0000"]
    device = f"{device}0000"
    for _ in range(100):  # until the node the balancer picks has heard of the new token
        status, invite = http_json(f"{cluster.haproxy.url}/api/devices/{device}/invites", owner, "POST",
                                   {"access": "family", "label": "Sam"})
        if status != 401:
            break
        time.sleep(0.05)
    assert status == 201, invite
    joined = http_json(f"{cluster.haproxy.url}/api/pairing", None, "POST", {"code": invite["code"]})[1]
    # Through the balancer: the device's sockets live on one node.
    ws = None
    for _ in range(50):
        try:
            ws = await websockets.connect(f"ws://{cluster.haproxy.url.split('//')[1]}/ws/app?device_id={device}&token={joined['token']}")
            break
        except Exception:
            await asyncio.sleep(0.1)
    assert ws is not None
    assert json.loads(await ws.recv())["event"] == "device_status"
    serving = cluster.admin(f"devices/{device}/presence")[1]["nodes"]
    others = [n for name, n in cluster.nodes.items() if n.running and name not in serving]
    assert others, "every node serves the device?"
    # The DELETE goes straight to a node that does not serve the device.
    others[0].wait_known(device, owner)
    status, _ = http_json(f"{others[0].url}/api/devices/{device}/members/{joined['token_id']}", owner, "DELETE")
    assert status == 204
    assert await closed_with(ws, 1.5) == 4003
