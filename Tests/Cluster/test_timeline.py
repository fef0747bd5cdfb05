"""The household's timeline (docs/protocol.md v1.6), end to end with real components: two relay
nodes on one database. What the robot says that the timeline keeps is stored as it was sent and
read by cursor both ways with no duplicate and no gap, the same from every node; a guest's view
begins when it joined; retention and erasure; the live notice; the robot gone 30 s and back;
bad input gets the contract's errors."""

from __future__ import annotations

import asyncio
import json
import re
import time
import urllib.parse
import urllib.request
from datetime import datetime, timedelta, timezone

import pytest
import websockets

import household_kit
from household_kit import two_nodes
from wimz_testkit import Database, RelayNode, http_json

MILLISECONDS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


@pytest.fixture(scope="module")
def nodes():
    with two_nodes("timeline") as both:
        yield both


class Home(household_kit.Home):
    def __init__(self, node: RelayNode) -> None:
        super().__init__(node, prefix="tl")

    def timeline(self, token: str | None = None, node: RelayNode | None = None, **query) -> tuple[int, dict]:
        text = urllib.parse.urlencode(query)
        return http_json(f"{(node or self.node).url}/api/devices/{self.device}/timeline{'?' + text if text else ''}", token or self.owner)

    def page(self, **query) -> dict:
        status, body = self.timeline(**query)
        assert status == 200, body
        return body


async def entries_become(home: Home, count: int, timeout: float = 10, **query) -> list[dict]:
    """The newest-first entries once there are ``count`` (the writer stores within a second)."""
    deadline = time.monotonic() + timeout
    while len(entries := home.page(limit=500, **query)["entries"]) < count:
        assert time.monotonic() < deadline, entries
        await asyncio.sleep(0.05)
    return entries


def event(name: str, **data) -> str:
    return json.dumps({"type": "event", "event": name, "data": data})


async def test_what_is_kept_is_stored_as_sent_and_paged_both_ways_without_gap_or_duplicate(nodes):
    first, second = nodes
    home = Home(first)
    robot = await home.robot()
    # Kept: as sent, member order, spacing and number spelling included.
    bark = '{"type":"event",  "event":"bark_detected","data":{"loudness":1.50,"dog":"Rex"}}'
    await robot.send(bark)
    for text in (event("audio_state", playing=True), event("mission_progress", status="running", stage=1),
                 json.dumps({"type": "response", "id": "x", "ok": True}), json.dumps({"type": "signal", "sdp": "v=0"})):
        await robot.send(text)  # not kept
    await robot.send(event("mission_progress", status="completed", trick="sit"))
    await robot.send(event("treat_dispensed", count=1))
    await robot.send(event("dog_detected", dog="Rex"))
    await robot.send(event("mode_changed", mode="training"))
    entries = await entries_become(home, 6)
    assert [e["event"] for e in entries] == ["mode_changed", "dog_detected", "treat_dispensed", "mission_progress", "bark_detected",
                                             "robot_online"], entries
    assert entries[-1]["source"] == "relay" and entries[-1]["message"]["data"]["since"], entries[-1]
    assert all(MILLISECONDS.match(e["at"]) for e in entries) and all(e["source"] == "robot" for e in entries[:-1])
    # The message is embedded as the frame's own text.
    request = urllib.request.Request(f"{home.node.url}/api/devices/{home.device}/timeline", headers={"Authorization": f"Bearer {home.owner}"})
    assert bark.encode() in urllib.request.urlopen(request, timeout=5).read()

    # 120 more; pages of 50 newest first, then oldest first from begins: every entry once, in order.
    for k in range(120):
        await robot.send(event("treat_dispensed", count=k))
    everything = await entries_become(home, 126)
    ids = [e["id"] for e in everything]
    assert ids == sorted(ids, reverse=True) and len(set(ids)) == 126
    seen, cursor = [], None
    while True:
        page = home.page(limit=50, **({"before": cursor} if cursor else {}))
        seen += [e["id"] for e in page["entries"]]
        cursor = page["next"]
        if cursor is None:
            break
        assert cursor == page["entries"][-1]["id"]
    assert seen == ids
    forward, cursor = [], ""
    while cursor is not None:
        page = home.page(limit=50, after=cursor)
        forward += [e["id"] for e in page["entries"]]
        cursor = page["next"]
    assert forward == ids[::-1]
    # Only some names; a name outside the timeline matches nothing.
    assert {e["event"] for e in home.page(events="dog_detected,mode_changed")["entries"]} == {"dog_detected", "mode_changed"}
    assert home.page(events="audio_state")["entries"] == []
    # The other node gives the same pages.
    status, other = home.timeline(node=second, limit=50)
    assert status == 200 and other["entries"] == home.page(limit=50)["entries"]
    # /metrics counts what was written and served: the second node answered one page of 50.
    assert first.metric("wimz_timeline_entries_written_total") >= 126
    assert second.metric('wimz_timeline_pages_served_total{order="newest_first"}') == 1
    assert second.metric('wimz_timeline_pages_served_total{order="oldest_first"}') == 0
    assert second.metric("wimz_timeline_entries_served_total") == 50
    await robot.close()


async def test_a_cut_off_frame_is_forwarded_but_never_breaks_a_page(nodes):
    """The forwarding path reads only a frame's envelope: a kept event cut off after its name
    reaches the app as sent, and the timeline leaves it out (counted) rather than embed it."""
    first, _ = nodes
    home = Home(first)
    robot = await home.robot()
    before = first.metric("wimz_timeline_entries_malformed_total")
    await robot.send('{"type":"event","event":"bark_detected","data":{"dog_name":"Rex"')
    await robot.send(event("bark_detected", dog_name="Rex"))
    entries = await entries_become(home, 2)  # robot_online and the whole bark
    assert [e["event"] for e in entries] == ["bark_detected", "robot_online"] and entries[0]["message"]["data"] == {"dog_name": "Rex"}
    deadline = time.monotonic() + 5
    while first.metric("wimz_timeline_entries_malformed_total") < before + 1:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
    await robot.close()


def test_bad_cursors_limits_and_tokens_get_the_contracts_errors(nodes):
    home, other = Home(nodes[0]), Home(nodes[0])
    stranger = "A" * 11 + "-" + "0" * 16
    for query, code in (({"before": "x", "after": ""}, "invalid_cursor"), ({"before": "nope"}, "invalid_cursor"),
                        ({"after": stranger}, "invalid_cursor"), ({"before": ""}, "invalid_cursor"),
                        ({"limit": ""}, "invalid_limit"), ({"limit": "0"}, "invalid_limit"), ({"limit": "501"}, "invalid_limit"),
                        ({"limit": "ten"}, "invalid_limit"), ({"limit": "-1"}, "invalid_limit")):
        status, body = home.timeline(**query)
        assert (status, body.get("error")) == (400, code), (query, body)
    # Another device's ID is refused, even with no entry behind it.
    status, body = other.timeline(limit=5)
    assert status == 200 and body["next"] is None and body["entries"] == []
    fake_other = home.page(after="")  # this device's empty view
    assert fake_other["entries"] == [] and MILLISECONDS.match(fake_other["begins"])
    status, body = http_json(f"{home.node.url}/api/devices/{home.device}/timeline", home.robot_token)
    assert (status, body["error"]) == (403, "wrong_role"), body
    status, body = http_json(f"{home.node.url}/api/devices/{home.device}/timeline", other.owner)
    assert status == 403, body


async def test_a_guest_sees_from_when_it_joined_and_retention_and_erasure_are_the_owners(nodes):
    home = Home(nodes[0])
    robot = await home.robot()
    await robot.send(event("bark_detected", loudness=1))
    await entries_become(home, 2)  # robot_online, bark
    guest, family = home.join("guest"), home.join("family")
    await robot.send(event("dog_detected", dog="Rex"))
    await entries_become(home, 5)
    status, seen = home.timeline(token=guest)
    assert status == 200 and [e["event"] for e in seen["entries"]] == ["dog_detected"], seen  # no household change either
    assert seen["begins"] > home.page()["begins"]
    # The owner sees who joined, with what access.
    joined = [e for e in home.page()["entries"] if e["event"] == "member_joined"]
    assert [(e["source"], e["message"]["data"]["access"], e["message"]["data"]["control"]) for e in joined] == \
        [("relay", "family", True), ("relay", "guest", False)], joined
    assert set(joined[0]["message"]["data"]) == {"token_id", "label", "access", "control", "until"}
    # Retention: any member reads it, the owner sets it within the ceiling.
    base = f"{home.node.url}/api/devices/{home.device}/timeline"
    assert http_json(f"{base}/settings", home.robot_token) == (200, {"days": 30})
    assert http_json(f"{base}/settings", guest) == (200, {"days": 30})
    for body in ({"days": 0}, {"days": 366}, {"days": "7"}, {"days": 7.5}, {"days": 7, "x": 1}, {}):
        status, answer = http_json(f"{base}/settings", home.owner, "PUT", body)
        assert (status, answer.get("error")) == (400, "invalid_days"), (body, answer)
    assert http_json(f"{base}/settings", family, "PUT", {"days": 7})[0] == 403
    assert http_json(f"{base}/settings", home.owner, "PUT", {"days": 7}) == (200, {"days": 7})
    assert http_json(f"{base}/settings", family) == (200, {"days": 7})
    # What an operator sees: counts, bytes, times and the retention; never an entry's contents.
    shown = home.node.database.cli("device", "timeline", home.device).splitlines()
    assert shown[0].split() == ["ENTRIES", "BYTES", "OLDEST", "NEWEST", "DAYS", "ERASED"], shown
    values = shown[1].split()
    assert values[0] == str(len(home.page(limit=500)["entries"])) and values[4] == "7" and values[5] == "-", shown
    assert "Rex" not in "\n".join(shown)
    # Erasure: the owner's; what was there is gone, its IDs still cursors.
    newest = home.page()["entries"][0]["id"]
    assert http_json(base, family, "DELETE")[0] == 403
    assert http_json(base, home.owner, "DELETE")[0] == 204
    after = home.page(before=newest)
    assert after["entries"] == [] and after["begins"] >= home.page()["begins"] and home.page()["entries"] == []
    await robot.send(event("treat_dispensed", count=1))
    assert [e["event"] for e in await entries_become(home, 1)] == ["treat_dispensed"]
    audit = home.node.database.psql(f"SELECT string_agg(event, ' ' ORDER BY id) FROM audit_log WHERE device_id = '{home.device}' "
                                    "AND event LIKE 'timeline%'")
    assert audit == "timeline_settings_changed timeline_erased", audit
    await robot.close()


async def test_apps_hear_of_new_entries_at_most_once_a_second_and_the_robot_gone_30_s(nodes):
    first, second = nodes
    home = Home(first)
    app = await home.app()
    robot = await home.robot()
    notices = []

    async def listen():
        try:
            async for raw in app:
                frame = json.loads(raw)
                if frame.get("type") == "timeline":
                    notices.append((time.monotonic(), frame["newest"]))
        except websockets.ConnectionClosed:
            pass  # the robot's move to the other node takes the device's sockets along

    listener = asyncio.ensure_future(listen())
    started = time.monotonic()
    for k in range(30):
        await robot.send(event("treat_dispensed", count=k))
        await asyncio.sleep(0.02)
    entries = await entries_become(home, 31)
    deadline = time.monotonic() + 5
    while (not notices or notices[-1][1] != entries[0]["id"]) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert notices and notices[-1][1] == entries[0]["id"], (notices, entries[0])
    # The relay sends a device's notices at least a second apart, all of them within what this
    # test saw: n notices need n - 1 seconds of it (a slow machine only makes it longer).
    assert len(notices) <= 1 + int(notices[-1][0] - started), notices
    # The robot leaves: 30 s later the timeline says so, once; back, it says that too.
    await robot.close()
    left = time.monotonic()
    deadline = left + 45
    while not (found := [e for e in home.page(limit=5)["entries"] if e["event"] == "robot_offline"]):
        assert time.monotonic() < deadline
        await asyncio.sleep(0.5)
    assert time.monotonic() - left >= 29, "robot_offline before 30 s"
    offline = found[0]
    assert offline["source"] == "relay" and offline["message"]["data"]["since"] < offline["at"], offline
    robot = await home.robot(node=second)  # back on another node: the entry follows the offline one all the same
    back = [e for e in (await entries_become(home, 33)) if e["event"] in ("robot_online", "robot_offline")]
    assert [e["event"] for e in back] == ["robot_online", "robot_offline", "robot_online"], back
    listener.cancel()
    await robot.close()
    await app.close()


async def test_old_entries_go_by_whole_partitions_or_per_device_and_are_never_served():
    database = Database(prefix="tlprune")
    node = RelayNode(database, name="timeline-prune", env={"WIMZ_RETENTION_INTERVAL": "1"})
    try:
        short, long = "tl-short", "tl-long"
        _, short_owner = database.add_device(short)
        database.add_device(long)
        database.psql(f"INSERT INTO timeline_devices (device_id, days) VALUES ('{short}', NULL), ('{long}', 60)")
        today = datetime.now(timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
        for age in (40, 70):
            start = today - timedelta(days=age)
            database.psql(f"CREATE TABLE timeline_entries_p{start:%Y%m%d} PARTITION OF timeline_entries "
                          f"FOR VALUES FROM ('{start.isoformat()}') TO ('{(start + timedelta(days=1)).isoformat()}')")
            for number, device in enumerate((short, long), start=1):
                database.psql("INSERT INTO timeline_entries (device_id, number, at, source, event, message) VALUES "
                              f"('{device}', {age * 10 + number}, '{(start + timedelta(hours=12)).isoformat()}', 'robot', 'bark_detected', "
                              """'{"type":"event","event":"bark_detected","data":{}}')""")
        node.start()
        # Never served past the device's days, pruned or not.
        status, page = http_json(f"{node.url}/api/devices/{short}/timeline", short_owner)
        assert status == 200 and page["entries"] == [], page
        forty, seventy = (f"timeline_entries_p{today - timedelta(days=age):%Y%m%d}" for age in (40, 70))
        deadline = time.monotonic() + 30
        while True:
            partitions = set(database.psql("SELECT string_agg(relname, ' ') FROM pg_class WHERE relname LIKE 'timeline_entries_p%'").split())
            left = database.psql(f"SELECT coalesce(string_agg(device_id, ' ' ORDER BY device_id), '') FROM {forty}")
            if seventy not in partitions and left == long:
                break
            assert time.monotonic() < deadline, (partitions, left)
            await asyncio.sleep(0.2)
        # The day partitions ahead were made, and the one the longer retention still holds stays.
        assert forty in partitions and f"timeline_entries_p{today + timedelta(days=2):%Y%m%d}" in partitions
    finally:
        node.stop()
        database.drop()
