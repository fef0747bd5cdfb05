"""The robot's settings (docs/protocol.md v1.6), end to end with real components: two relay nodes
on one database. A write names the version it read; the robot gets a newer desired document when
it connects and on every change, on whichever node it is; what it applied is stored as reported;
apps hear of every change; a sealed device takes only sealed documents; nothing of it can be sent
by an app."""

from __future__ import annotations

import asyncio
import json
import re
import time
import urllib.error
import urllib.request
from email.message import Message

import pytest

import household_kit
from household_kit import two_nodes
from wimz_testkit import RelayNode

MILLISECONDS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


@pytest.fixture(scope="module")
def nodes():
    with two_nodes("settings") as both:
        yield both


def settings_call(node: RelayNode, device: str, token: str, method: str = "GET", body: bytes | None = None,
                  if_match: str | None = None) -> tuple[int, dict, Message]:
    """(status, body, headers) of a settings request, the body sent as these exact bytes."""
    request = urllib.request.Request(f"{node.url}/api/devices/{device}/settings", data=body, method=method)
    request.add_header("Authorization", f"Bearer {token}")
    if body is not None:
        request.add_header("Content-Type", "application/json")
    if if_match is not None:
        request.add_header("If-Match", if_match)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read()), response.headers
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}"), error.headers


class Home(household_kit.Home):
    """A device with its robot token, an owner, and members invited on `node`."""

    def __init__(self, node: RelayNode) -> None:
        super().__init__(node, prefix="set")

    def put(self, doc: bytes, version: str | None, token: str | None = None, node: RelayNode | None = None):
        return settings_call(node or self.node, self.device, token or self.owner, "PUT", doc, version)

    def get(self, token: str | None = None, node: RelayNode | None = None) -> dict:
        status, body, _ = settings_call(node or self.node, self.device, token or self.owner)
        assert status == 200, body
        return body


async def next_of(ws, kind: str, timeout: float = 10) -> tuple[dict, str]:
    """The next frame of type ``kind`` (others skipped), parsed and as sent."""
    deadline = time.monotonic() + timeout
    while True:
        raw = await asyncio.wait_for(ws.recv(), max(0.05, deadline - time.monotonic()))
        frame = json.loads(raw)
        if frame.get("type") == kind:
            return frame, raw


async def reported_becomes(home: Home, version: int, timeout: float = 10) -> dict:
    deadline = time.monotonic() + timeout
    while (reported := home.get()["reported"]) is None or reported["version"] != version:
        assert time.monotonic() < deadline, reported
        await asyncio.sleep(0.05)
    return reported


def test_a_write_names_the_version_it_read_and_bad_ones_store_nothing(nodes):
    home = Home(nodes[0])
    status, body, headers = settings_call(home.node, home.device, home.owner)
    assert (status, body, headers["ETag"]) == (200, {"desired": None, "reported": None}, '"0"')
    doc = b'{"treat_limit": 5,  "volume":0.50, "quiet":{"from":"22:00"}}'
    status, body, _ = home.put(doc, None)
    assert (status, body["error"]) == (428, "precondition_required"), body
    for malformed in ('1', '"01"', 'W/"0"', '"0", "1"', '*', '"-1"'):
        status, body, _ = home.put(doc, malformed)
        assert (status, body["error"]) == (400, "bad_request"), (malformed, body)
    status, body, _ = home.put(doc, '"1"')
    assert (status, body["error"], body["desired"]) == (412, "version_conflict", None), body
    for bad in (b"[1, 2]", b'"x"', b"{", b'{"a":1} {}'):
        status, body, _ = home.put(bad, '"0"')
        assert (status, body["error"]) == (400, "invalid_settings"), (bad, body)
    status, body, _ = home.put(b'{"pad":"' + b"x" * (16 * 1024) + b'"}', '"0"')
    assert (status, body["error"]) == (413, "too_large"), body
    status, body, _ = settings_call(home.node, home.device, home.robot_token, "PUT", doc, '"0"')
    assert (status, body["error"]) == (403, "wrong_role"), body
    assert home.get() == {"desired": None, "reported": None}

    status, desired, headers = home.put(doc, '"0"')
    assert status == 200 and headers["ETag"] == '"1"', desired
    assert desired["version"] == 1 and desired["by"] == home.owner_id and MILLISECONDS.match(desired["at"]), desired
    assert desired["doc"] == json.loads(doc)
    # Stored as sent: the answer embeds the document's own text (spacing and number spelling kept).
    raw = urllib.request.urlopen(urllib.request.Request(f"{home.node.url}/api/devices/{home.device}/settings",
                                                        headers={"Authorization": f"Bearer {home.owner}"}), timeout=5).read()
    assert doc in raw, raw
    status, body, _ = home.put(b'{"treat_limit": 9}', '"0"')
    assert (status, body["error"]) == (412, "version_conflict") and body["desired"] == desired, body
    # Every node answers the same (one store).
    assert home.get(node=nodes[1])["desired"] == desired
    assert home.get(token=home.robot_token)["desired"] == desired
    audit = home.node.database.psql(
        f"SELECT token_id || ' ' || (details->>'version') FROM audit_log WHERE event = 'settings_changed' AND device_id = '{home.device}'")
    assert audit.split("\n") == [f"{home.owner_id} 1"], audit


def test_who_may_write_follows_the_access_table(nodes):
    home = Home(nodes[0])
    family = home.join("family")
    guest = home.join("guest")
    driver = home.join("guest", control=True)
    status, body, _ = home.put(b'{"a":1}', '"0"', token=guest)
    assert (status, body["error"]) == (403, "forbidden"), body
    assert home.get(token=guest) == {"desired": None, "reported": None}
    assert home.put(b'{"a":1}', '"0"', token=driver)[0] == 200
    assert home.put(b'{"a":2}', '"1"', token=family)[0] == 200
    assert home.get(token=guest)["desired"]["version"] == 2


async def test_the_robot_gets_what_it_lacks_on_any_node_and_what_it_applied_is_stored(nodes):
    first, second = nodes
    home = Home(first)
    doc = b'{"treat_limit": 5, "volume":0.50}'
    assert home.put(doc, '"0"')[0] == 200
    # The robot connects to the other node: desired is newer than what it reported (nothing).
    robot = await home.robot(node=second)
    frame, raw = await next_of(robot, "settings")
    assert frame == {"type": "settings", "version": 1, "doc": json.loads(doc)} and doc.decode() in raw, raw
    app = await home.app(node=second)
    # A write on the first node reaches the robot and the apps on the second.
    assert home.put(b'{"treat_limit": 3}', '"1"')[0] == 200
    assert (await next_of(robot, "settings"))[0]["version"] == 2
    assert (await next_of(app, "settings_changed"))[0] == {"type": "settings_changed", "desired_version": 2, "reported_version": None}
    # What the robot runs may differ from what was asked.
    await robot.send(json.dumps({"type": "settings_applied", "version": 2, "doc": {"treat_limit": 4}}))
    assert (await next_of(app, "settings_changed"))[0] == {"type": "settings_changed", "desired_version": 2, "reported_version": 2}
    reported = await reported_becomes(home, 2)
    assert reported["doc"] == {"treat_limit": 4} and MILLISECONDS.match(reported["at"]), reported
    # A version never asked for is ignored; an older one is stored, and desired goes again.
    await robot.send(json.dumps({"type": "settings_applied", "version": 9, "doc": {"treat_limit": 9}}))
    await robot.send(json.dumps({"type": "settings_applied", "version": 1, "doc": {"treat_limit": 5}}))
    assert (await next_of(robot, "settings"))[0]["version"] == 2
    assert (await reported_becomes(home, 1))["doc"] == {"treat_limit": 5}
    # Malformed reports are dropped, the robot kept.
    for bad in ({"type": "settings_applied", "version": "2", "doc": {}}, {"type": "settings_applied", "version": 2, "doc": [1]},
                {"type": "settings_applied", "version": -1, "doc": {}}, {"type": "settings_applied", "doc": {}}):
        await robot.send(json.dumps(bad))
    await robot.send(json.dumps({"type": "settings_applied", "version": 2, "doc": {"treat_limit": 3}}))
    assert (await reported_becomes(home, 2))["doc"] == {"treat_limit": 3}
    await robot.close()
    # Up to date: a robot that connects again is handed nothing until the next write.
    robot = await home.robot(node=second)
    assert home.put(b'{"treat_limit": 2}', '"2"')[0] == 200
    assert (await next_of(robot, "settings"))[0]["version"] == 3
    await robot.close()
    await app.close()


async def test_an_app_may_not_speak_the_settings_frames(nodes):
    home = Home(nodes[0])
    robot = await home.robot()
    app = await home.app()
    for kind in ("settings", "settings_applied", "settings_changed", "timeline"):
        await app.send(json.dumps({"type": kind, "version": 1, "doc": {}}))
        error, _ = await next_of(app, "error")
        assert error["code"] == "forbidden_type", error
    await app.send(json.dumps({"type": "command", "command": "sit", "id": "1"}))
    assert (await next_of(robot, "command"))[0]["command"] == "sit"  # nothing of the above reached the robot
    assert home.get()["reported"] is None
    await robot.close()
    await app.close()


async def test_a_sealed_device_takes_only_sealed_documents_both_ways(nodes):
    home = Home(nodes[0])
    # Sealed at epoch 1 (the roster's signatures are v1.5's to check; the relay goes by the row).
    home.node.database.psql(
        "INSERT INTO sealed_epochs (device_id, epoch, roster, signed_by, signature, robot_sig) "
        f"VALUES ('{home.device}', 1, 'r', '{'0' * 32}', 's', 's')")
    status, body, _ = home.put(b'{"treat_limit": 5}', '"0"')
    assert (status, body["error"]) == (409, "sealed_device"), body
    sealed = {"type": "sealed", "kind": "settings", "epoch": 1, "nonce": "bm9uY2U", "ct": "c2VhbGVk"}
    status, desired, _ = home.put(json.dumps(sealed).encode(), '"0"')
    assert status == 200 and desired["doc"] == sealed, desired
    robot = await home.robot()
    assert (await next_of(robot, "settings"))[0] == {"type": "settings", "version": 1, "doc": sealed}
    await robot.send(json.dumps({"type": "settings_applied", "version": 1, "doc": {"treat_limit": 5}}))  # plain: dropped
    await robot.send(json.dumps({"type": "settings_applied", "version": 1, "doc": dict(sealed, ct="YXBwbGllZA")}))
    assert (await reported_becomes(home, 1))["doc"]["ct"] == "YXBwbGllZA"
    await robot.close()
