"""The relay on PostgreSQL that fails over (pg_auto_failover for real, on loopback, built with
deploy/pg-auto-failover/pg-auto-failover.sh): the primary killed mid-traffic and the standby
promoted, then a planned switchover. Pairs keep forwarding, `/readyz` is ready again within 15 s
of the promotion, every TURN credential is answered 200, every audit event the relay made and
every timeline entry it received is in the database once, and what changes after the failover (a token issued, a member's token
revoked, a device disabled) takes effect within a second."""

from __future__ import annotations

import asyncio
import json
import threading
import time

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from pg_failover import Formation
from wimz_testkit import Database, RelayNode, http_json

ADMIN = "admin-token-for-failover-tests-0123456789"


class Traffic:
    """A robot that sends an event every 50 ms to its app, and TURN credentials fetched every
    200 ms, while the database fails over; what each saw. In a thread of its own (`start`), so
    the test's own waits never pause it."""

    def __init__(self, node: RelayNode, device: str, robot_token: str, app_token: str) -> None:
        self.node, self.device, self.robot_token, self.app_token = node, device, robot_token, app_token
        self.arrivals: list[float] = []
        self.sent = 0  # the robot's events sent: each one kept in the timeline
        self.turn_statuses: list[int] = []
        self.closed: list[str] = []
        self.running = True
        self.thread = threading.Thread(target=lambda: asyncio.run(self.run()), daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.running = False
        self.thread.join(10)

    async def run(self) -> None:
        base = self.node.url.replace("http://", "ws://")
        async with connect(f"{base}/ws/robot?device_id={self.device}", proxy=None, compression=None,
                           additional_headers={"Authorization": f"Bearer {self.robot_token}"}) as robot, \
                connect(f"{base}/ws/app?device_id={self.device}&token={self.app_token}", proxy=None, compression=None) as app:
            await asyncio.gather(self.send(robot), self.receive(app), self.fetch_turn())

    async def send(self, robot) -> None:
        n = 0
        try:
            while self.running:
                n += 1
                await robot.send(json.dumps({"type": "event", "event": "treat_dispensed", "data": {"n": n}}))
                self.sent = n
                await asyncio.sleep(0.05)
        except ConnectionClosed as closed:
            self.closed.append(f"robot {closed}")

    async def receive(self, app) -> None:
        try:
            while self.running:
                try:
                    message = json.loads(await asyncio.wait_for(app.recv(), 0.5))
                except asyncio.TimeoutError:
                    continue
                if message.get("event") == "treat_dispensed":
                    self.arrivals.append(time.monotonic())
        except ConnectionClosed as closed:
            self.closed.append(f"app {closed}")

    async def fetch_turn(self) -> None:
        loop = asyncio.get_running_loop()
        while self.running:
            status, _ = await loop.run_in_executor(None, lambda: http_json(f"{self.node.url}/api/turn/credentials",
                                                                           self.robot_token, timeout=5))
            self.turn_statuses.append(status)
            await asyncio.sleep(0.2)

    def longest_gap(self, since: float) -> float:
        times = [t for t in self.arrivals if t >= since]
        return max((b - a for a, b in zip(times, times[1:])), default=float("inf"))


def ready(node: RelayNode) -> bool:
    try:
        return http_json(f"{node.url}/readyz", timeout=1)[0] == 200
    except OSError:
        return False


async def closed_within(ws, seconds: float) -> int | None:
    try:
        while True:
            await asyncio.wait_for(ws.recv(), seconds)
    except ConnectionClosed:
        return ws.close_code
    except asyncio.TimeoutError:
        return None


async def changes_take_effect(node: RelayNode, db: Database, step: str) -> None:
    """A token issued, a member's token revoked and a device disabled, each within a second."""
    device = f"{step}dev"
    db.cli("device", "add", device)
    started = time.monotonic()
    issued = db.cli("token", "issue", "--device", device, "--role", "app").strip().splitlines()[-1]
    while http_json(f"{node.url}/api/devices/{device}/status", issued)[0] != 200:
        assert time.monotonic() - started < 1, f"{step}: a token issued was not accepted within 1 s"
        await asyncio.sleep(0.02)

    base = node.url.replace("http://", "ws://")
    member = await connect(f"{base}/ws/app?device_id={device}&token={issued}", proxy=None, compression=None)
    token_id = next(t["id"] for t in http_json(f"{node.url}/admin/tokens?device_id={device}", ADMIN)[1]["tokens"]
                    if t["role"] == "app")
    assert http_json(f"{node.url}/admin/tokens/{token_id}/revoke", ADMIN, "POST", {})[0] == 200
    assert await closed_within(member, 1.0) == 4003, f"{step}: a revoked member's socket not closed within 1 s"

    robot_token = db.cli("token", "issue", "--device", device, "--role", "robot").strip().splitlines()[-1]
    robot = await connect(f"{base}/ws/robot?device_id={device}", proxy=None, compression=None,
                          additional_headers={"Authorization": f"Bearer {robot_token}"})
    assert http_json(f"{node.url}/admin/devices/{device}/disable", ADMIN, "POST", {})[0] == 200
    assert await closed_within(robot, 1.0) == 4003, f"{step}: a disabled device's socket not closed within 1 s"


async def test_the_relay_rides_a_failover_and_a_switchover():
    formation = Formation()
    node = None
    try:
        db = Database(existing_url=formation.url)
        node = RelayNode(db, env={"WIMZ_ADMIN_TOKEN": ADMIN, "WIMZ_TURN_URLS": "turn:127.0.0.1:3478", "WIMZ_TURN_REQUEST_RATE": "20",
                                  "WIMZ_TURN_SECRET": "static-secret-for-failover-tests-0123"})
        node.start()
        robot_token, app_token = db.add_device("pair1")
        traffic = Traffic(node, "pair1", robot_token, app_token)
        traffic.start()
        await asyncio.sleep(1)

        # The primary dies whole; the monitor promotes the standby.
        old = formation.primary()
        killed = time.monotonic()
        formation.kill(old)
        promoted = killed + await asyncio.get_running_loop().run_in_executor(
            None, lambda: formation.wait(lambda: formation.primary() not in (None, old), 90, "the standby promoted"))
        while not ready(node):
            assert time.monotonic() - promoted < 15, "/readyz not ready within 15 s of the promotion"
            await asyncio.sleep(0.1)
        print(f"failover: promoted {promoted - killed:.1f} s after the kill, ready {time.monotonic() - promoted:.1f} s after")
        await changes_take_effect(node, db, "failover")

        # The old primary comes back as the standby; then a planned switchover.
        formation.run(old)
        await asyncio.get_running_loop().run_in_executor(None, lambda: formation.wait(
            lambda: sorted(formation.states().values()) == [("primary", "primary"), ("secondary", "secondary")], 90,
            "the old primary back as the standby"))
        formation.recipe("switchover", formation.pgdata("monitor"))
        switched = time.monotonic()
        await asyncio.get_running_loop().run_in_executor(None, lambda: formation.wait(
            lambda: formation.primary() == old, 90, "the switchover"))
        while not ready(node):
            assert time.monotonic() - switched < 30, "/readyz not ready after the switchover"
            await asyncio.sleep(0.1)
        await changes_take_effect(node, db, "switchover")

        traffic.stop()
        assert not traffic.closed, f"the pair's sockets closed: {traffic.closed}"
        gap = traffic.longest_gap(killed - 1)
        assert gap < 1.0, f"the pair stopped forwarding for {gap:.2f} s"
        assert traffic.turn_statuses and set(traffic.turn_statuses) == {200}, \
            f"TURN answers: {sorted(set(traffic.turn_statuses))}"

        # Every credential the relay answered is in the database once, with its audit event.
        answered = len(traffic.turn_statuses)
        deadline = time.monotonic() + 10
        while int(db.psql("SELECT count(*) FROM turn_issuances WHERE via = 'http'")) < answered and time.monotonic() < deadline:
            time.sleep(0.2)
        counts = db.psql("""
            SELECT count(*), count(DISTINCT i.issuance_id), count(a.event_id)
            FROM turn_issuances i LEFT JOIN audit_log a ON a.event_id = i.issuance_id AND a.event = 'turn_credential_issued'
            WHERE i.via = 'http'""").split("|")
        assert counts == [str(answered)] * 3, f"{answered} credentials answered; issuances, distinct, audited: {counts}"

        # Every event the robot sent is in the timeline once, in the order sent: the batches the
        # database did not take were written again after the promotion, none of them twice.
        kept = "FROM timeline_entries WHERE device_id = 'pair1' AND event = 'treat_dispensed'"
        deadline = time.monotonic() + 10
        while int(db.psql(f"SELECT count(*) {kept}")) < traffic.sent and time.monotonic() < deadline:
            time.sleep(0.2)
        order = db.psql(f"SELECT string_agg(message::json->'data'->>'n', ',' ORDER BY number) {kept}")
        assert order == ",".join(str(n) for n in range(1, traffic.sent + 1)), f"{traffic.sent} sent; the timeline holds {order}"
    finally:
        if node:
            node.stop()
        formation.close()
