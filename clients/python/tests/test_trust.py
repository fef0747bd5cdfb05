"""Trust boundaries (docs/protocol.md v1.2 "Frames on the sockets"), seen from the robot: the relay and
the robot's own JSON parser (``json.loads``) never disagree about an app frame, an app cannot
speak for the relay, and the robot library trusts only what the relay issues."""

from __future__ import annotations

import asyncio
import json
import random
import re
from datetime import datetime, timedelta, timezone
from typing import Any

from websockets.asyncio.client import connect

from wimz_robot import RobotClient, TurnCredentials
from wimz_robot.bridge import local_target
from test_robot_client import app_socket, is_status, next_message

RELAY_ONLY = {"http_request", "http_response", "http_body", "device_status", "app_presence", "turn_credentials", "error"}
RELAY_ID = re.compile(r"^c[0-9a-f]{16}$")


class Duplicate(Exception):
    pass


def top_level_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise Duplicate(keys)
    return dict(pairs)


def depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth(v) for v in value), default=0)
    return 0


def robot_view(text: str) -> tuple[str, dict[str, Any] | None]:
    """What the robot's parser makes of a frame: ("clean", object) for one the contract lets
    through, else the reason the relay may refuse it. Duplicates are detected at every level
    (the contract needs only the top level; nested ones are flagged as "duplicate-nested")."""
    def no_constants(name: str) -> Any:
        raise ValueError(name)
    try:
        raw = json.loads(text, parse_constant=no_constants)
    except (ValueError, RecursionError):
        return "invalid", None
    if not isinstance(raw, dict):
        return "not-object", None
    try:
        parsed = json.loads(text, object_pairs_hook=top_level_pairs)
    except Duplicate:
        parsed = None
    if parsed is None:
        # A duplicate somewhere: at the top level the relay must refuse; nested is not its business.
        outer = json.JSONDecoder(object_pairs_hook=lambda p: p).decode(text)
        keys = [k for k, _ in outer]
        return ("duplicate", None) if len(set(keys)) != len(keys) else ("clean-nested-duplicate", raw)
    if depth(raw) > 64:
        return "too-deep", None
    if "\\" in text:
        return "escaped", raw  # clean unless an escape is in a name or a routed value
    for field in ("type", "id", "event"):
        if field in raw and not isinstance(raw[field], str):
            return "not-string", None
    if raw.get("type") in RELAY_ONLY or (raw.get("type") == "event" and raw.get("event") in RELAY_ONLY):
        return "relay-only", None
    return "clean", raw


def random_value(rng: random.Random, level: int = 0) -> Any:
    kinds = ["str", "int", "float", "bool", "null"] + (["list", "dict"] if level < 3 else [])
    kind = rng.choice(kinds)
    if kind == "str":
        return rng.choice(["", "sit", "é", "𝄞", "a\"b", "back\\slash", "line\nbreak", "\u0000", "<script>"])
    if kind == "int":
        return rng.choice([0, -1, 7, 2**63, -(2**70)])
    if kind == "float":
        return rng.choice([0.5, -1e-7, 1e300])
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "null":
        return None
    if kind == "list":
        return [random_value(rng, level + 1) for _ in range(rng.randint(0, 3))]
    return {rng.choice(["a", "type", "id", "x"]): random_value(rng, level + 1) for _ in range(rng.randint(0, 3))}


def escape_some(text: str, rng: random.Random) -> str:
    """``text`` as a JSON string token, with some characters written as \\u escapes."""
    body = "".join(f"\\u{ord(c):04x}" if rng.random() < 0.3 and ord(c) < 0x10000 else json.dumps(c)[1:-1] for c in text)
    return f'"{body}"'


def random_frame(rng: random.Random) -> str:
    """An app frame as an attacker or a sloppy app might write it."""
    names = ["type", "id", "event", "data", "command", "sdp"]
    members: list[tuple[str, str]] = []
    for _ in range(rng.randint(0, 5)):
        name = rng.choice(names)
        if name == "type":
            value = rng.choice(["command", "event", "response", "webrtc_offer", *RELAY_ONLY])
        elif name == "event":
            value = rng.choice(["bark_detected", "turn_credentials", "device_status", "custom"])
        elif name == "id":
            value = rng.choice(["1", "c0000000000000001", "h0000000000000001", "x y"])
        else:
            members.append((json.dumps(name), json.dumps(random_value(rng), ensure_ascii=rng.random() < 0.5)))
            continue
        token = escape_some(value, rng) if rng.random() < 0.2 else json.dumps(value)
        if rng.random() < 0.05:
            token = rng.choice(["7", "null", "[\"command\"]", "true"])
        members.append((escape_some(name, rng) if rng.random() < 0.1 else json.dumps(name), token))
    if members and rng.random() < 0.15:
        members.append(rng.choice(members))  # a duplicate, maybe with another spelling
    space = lambda: rng.choice(["", "", " ", "\n", "\t"])  # noqa: E731
    text = "{" + ",".join(f"{space()}{k}{space()}:{space()}{v}{space()}" for k, v in members) + "}"
    roll = rng.random()
    if roll < 0.04:
        text = text[: rng.randint(0, len(text))]
    elif roll < 0.07:
        text += rng.choice(["x", "{}", ",", " "])
    elif roll < 0.09:
        text = "[" * 70 + "]" * 70 if rng.random() < 0.5 else '{"a":' + "[" * 70 + "]" * 70 + "}"
    elif roll < 0.11:
        text = text.replace(":", ":NaN,\"z\":", 1)
    return text


async def test_the_relay_and_the_robots_parser_agree_on_every_app_frame(database, device):
    """Thousands of generated frames (escapes, duplicates, relay names, broken JSON) through the
    real relay: each one the robot received reads, with json.loads, exactly as the relay routed
    it; each one refused had a reason in the robot's own reading; each clean one arrived."""
    from wimz_testkit import RelayNode

    relay = RelayNode.started(database, env={"WIMZ_APP_RATE_LIMIT": "100000", "WIMZ_APP_RATE_BURST": "100000"})
    device_id, robot_token, app_token = device
    rng = random.Random(20261124)
    frames = [random_frame(rng) for _ in range(2000)]
    try:
        robot = await connect(f"ws://127.0.0.1:{relay.port}/ws/robot?device_id={device_id}",
                              additional_headers={"Authorization": f"Bearer {robot_token}"}, compression=None, proxy=None,
                              max_size=None)
        app = await app_socket(relay, device_id, app_token)
        await next_message(app, is_status(True))
        # Each frame is followed by a marker: what the robot gets before marker k is frame k's.
        slots: list[list[str]] = [[] for _ in frames]
        refusals: list[dict[str, Any]] = []
        for k, frame in enumerate(frames):
            await app.send(frame)
            await app.send(json.dumps({"type": "probe_marker", "k": k}))
        current = 0
        while current < len(frames):
            text = await asyncio.wait_for(robot.recv(), 10)
            if text.startswith('{"type": "probe_marker"'):
                current = json.loads(text)["k"] + 1
            elif not text.startswith(('{"type":"event","event":"app_presence"', '{"type":"event","event":"turn_credentials"')):
                slots[current].append(text)  # (the relay's own messages start so; an app's never can)
        while True:
            try:
                message = json.loads(await asyncio.wait_for(app.recv(), 1))
            except asyncio.TimeoutError:
                break
            if message.get("type") == "error":
                refusals.append(message)
        await app.close()
        await robot.close()
    finally:
        relay.stop()

    assert all(len(slot) <= 1 for slot in slots)
    outcomes = [(frame, slot[0] if slot else None) for frame, slot in zip(frames, slots)]
    assert len(refusals) == sum(1 for _, got in outcomes if got is None)
    assert {r["code"] for r in refusals} <= {"bad_message", "forbidden_type"}

    through = 0
    for frame, got in outcomes:
        view, parsed = robot_view(frame)
        if got is None:
            assert view != "clean", f"a clean frame was refused: {frame!r}"
            continue
        through += 1
        robot_reads = json.loads(got)
        assert view in ("clean", "escaped", "clean-nested-duplicate"), f"forwarded although {view}: {frame!r}"
        assert isinstance(robot_reads, dict)
        kind = robot_reads.get("type")
        assert kind not in RELAY_ONLY, frame
        assert not (kind == "event" and robot_reads.get("event") in RELAY_ONLY), frame
        if kind == "command" and "id" in robot_reads:
            # The relay saw a command too: it put its own unguessable id in, and nothing else changed.
            assert RELAY_ID.match(robot_reads["id"]), (frame, got)
            assert {**robot_reads, "id": parsed["id"]} == parsed, (frame, got)
        else:
            assert got == frame
        for field in ("type", "id", "event"):
            assert field not in robot_reads or isinstance(robot_reads[field], str), frame
    assert through > 300 and len(frames) - through > 300  # both sides of the boundary were exercised


async def test_an_app_cannot_hand_the_robot_turn_credentials(relay, device):
    """The attack of issue 23: an app's forged turn_credentials event (later expiry, the
    attacker's server) is refused by the relay, and the robot keeps the relay's credential."""
    device_id, robot_token, app_token = device
    async with RobotClient(relay.url, device_id, robot_token) as client:
        await client.wait_connected(timeout=10)
        app = await app_socket(relay, device_id, app_token)
        await next_message(app, is_status(True))
        forged = {"urls": ["turn:attacker.example:3478?transport=udp"], "username": "9999999999:x", "credential": "eA==",
                  "ttl": 172800, "expires_at": "2286-11-20T17:46:39Z", "refresh_at": "2286-11-19T17:46:39Z"}
        for frame in ({"type": "event", "event": "turn_credentials", "data": forged},
                      {"type": "event", "event": "turn_credentials", "data": forged, "timestamp": "x"}):
            await app.send(json.dumps(frame))
            refusal = await next_message(app, lambda m: m.get("type") == "error")
            assert refusal["code"] == "forbidden_type"
        # Escaped spellings are not another way in.
        await app.send('{"type":"event","event":"turn\\u005fcredentials","data":' + json.dumps(forged) + "}")
        assert (await next_message(app, lambda m: m.get("type") == "error"))["code"] == "bad_message"
        await app.close()
        await asyncio.sleep(0.3)
        credentials = client._credentials
        assert credentials is None or "attacker" not in json.dumps(credentials.to_json())


def _credential(issued: datetime, ttl: int, host: str) -> TurnCredentials:
    expires = issued + timedelta(seconds=ttl)
    return TurnCredentials(urls=[f"turn:{host}:3478"], username=f"{int(expires.timestamp())}:d", credential="c", ttl=ttl,
                           expires_at=expires, refresh_at=issued + timedelta(seconds=ttl // 2), ice_servers=[])


def test_the_most_recently_issued_credential_wins_not_the_latest_expiry():
    client = RobotClient("ws://127.0.0.1:1", "d", "t")
    now = datetime.now(timezone.utc)
    long_lived = _credential(now - timedelta(seconds=60), 172800, "first")
    newer_short = _credential(now, 600, "second")
    client._set_credentials(long_lived)
    client._set_credentials(newer_short)  # expires much earlier, but was issued later: it wins
    assert client._credentials is newer_short
    client._set_credentials(long_lived)  # an older one coming late is ignored
    assert client._credentials is newer_short


def test_the_bridge_refuses_dot_segments_behind_path_parameters():
    for path in ["/..;/x", "/.;/x", "/a/..;a=b/c", "/%2e%2e;/x", "/a/.;", "/..;jsessionid=1"]:
        assert local_target(path, None) is None, path
    assert local_target("/missions;v=1/start", None) == "/missions;v=1/start"
    assert local_target("/a..;/b", None) == "/a..;/b"


def test_token_requests_never_follow_redirects():
    """A relay (or anything in its place) answering 302 gets no second request with the token."""
    import http.server
    import threading

    from wimz_robot.turn import TurnFetchError, _fetch_blocking

    seen: list[str | None] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            seen.append(self.headers.get("Authorization"))
            self.send_response(302)
            self.send_header("Location", f"http://127.0.0.1:{self.server.server_address[1]}/elsewhere")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        try:
            _fetch_blocking(f"http://127.0.0.1:{server.server_address[1]}/api/turn/credentials", "wimz_r_secret", None, 5, None)
            raise AssertionError("a redirect was followed")
        except TurnFetchError as error:
            assert error.status == 302
    finally:
        server.shutdown()
    assert seen == ["Bearer wimz_r_secret"]
