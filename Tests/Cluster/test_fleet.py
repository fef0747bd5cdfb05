"""A node holds the tokens its clients present, not the fleet's: it starts with none, reads a
storm of unknown tokens in batches (not a statement per socket), and keeps what it read current
(revocation, disabling) like any token. How big a real storm's batches are depends on how fast the
handshakes arrive (scripts/bench-storm.sh measures it); here the tokens table is locked until the
whole storm waits, so what is checked is that everything waiting is read in one statement. The same for the phones' push registrations and Live
Activity tokens: none held at rest, those of the devices it serves read with the storm."""

import asyncio
import subprocess
import time

import websockets

from wimz_testkit import Database, RelayNode, http_json

DEVICES = 400


def provision(db: Database, count: int) -> dict[str, str]:
    """``count`` devices with a robot, an app and a spare app token each, two push registrations
    and a Live Activity start token, written in SQL (the API would take minutes); device → its app
    token's secret."""
    db.psql(f"""
        INSERT INTO devices (id) SELECT 'fleet' || g FROM generate_series(1, {count}) g;
        INSERT INTO tokens (device_id, role, digest)
        SELECT 'fleet' || g, k.role, sha256(convert_to(k.prefix || g, 'UTF8'))
        FROM generate_series(1, {count}) g,
             (VALUES ('robot', 'wimz_r_fleetrobot'), ('app', 'wimz_a_fleetapp'), ('app', 'wimz_a_fleetspare')) AS k(role, prefix);
        INSERT INTO push_registrations (device_id, token, environment, app_token_id, events)
        SELECT t.device_id, md5(t.id || '-' || n) || md5(n || '-' || t.id), 'production', t.id, '{{bark_detected,robot_offline}}'
        FROM tokens t, generate_series(1, 2) n WHERE t.role = 'app' AND t.digest = sha256(convert_to('wimz_a_fleetapp' ||
             substr(t.device_id, 6), 'UTF8'));
        INSERT INTO live_activity_start_tokens (device_id, app_token_id, token, environment)
        SELECT device_id, app_token_id, min(token), 'production' FROM push_registrations GROUP BY device_id, app_token_id
        """)
    return {f"fleet{g}": f"wimz_a_fleetapp{g}" for g in range(1, count + 1)}


def transactions(db: Database) -> int:
    return int(db.psql("SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()"))


class TokensLocked:
    """A psql session holding the tokens table (ACCESS EXCLUSIVE, which even a SELECT waits for)
    from construction until ``release()``: lookups queue behind it."""

    def __init__(self, db: Database) -> None:
        self.session = subprocess.Popen(["psql", db.url, "-qtA"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.session.stdin and self.session.stdout
        self.session.stdin.write("BEGIN; LOCK TABLE tokens IN ACCESS EXCLUSIVE MODE; SELECT 'locked';\n")
        self.session.stdin.flush()
        assert self.session.stdout.readline().strip() == "locked"

    def release(self) -> None:
        if self.session.poll() is None:
            assert self.session.stdin
            self.session.stdin.write("COMMIT;\n")
            self.session.stdin.close()
            self.session.wait(timeout=10)


async def storm(node: RelayNode, tokens: dict[str, str], lock: TokensLocked) -> list[object]:
    """Every device's app connects at once; the lock is released once all of them wait for their
    token."""
    async def one(device: str, token: str):
        async with websockets.connect(f"ws://127.0.0.1:{node.port}/ws/app?device_id={device}&token={token}",
                                      open_timeout=20) as ws:
            await asyncio.wait_for(ws.recv(), 10)  # the relay's hello: the socket is paired and served
            return ws
    handshakes = asyncio.gather(*(one(d, t) for d, t in tokens.items()), return_exceptions=True)
    deadline = time.monotonic() + 10  # the relay holds a waiting upgrade for 15 s (RelayNode)
    while await asyncio.to_thread(node.metric, "wimz_credential_lookups_waiting") < len(tokens):
        assert time.monotonic() < deadline, "the storm's upgrades did not all wait for their tokens"
        await asyncio.sleep(0.05)
    lock.release()
    return await handshakes


def test_a_cold_node_reads_a_storm_of_tokens_in_batches_and_keeps_them_current():
    db = Database(prefix="fleet")
    node = None
    try:
        tokens = provision(db, DEVICES)
        node = RelayNode.started(db)
        # Nothing is loaded at start: the fleet's 1,200 tokens and 800 push registrations stay in the store.
        assert node.metric("wimz_credentials_cached") == 0
        assert node.metric("wimz_push_registrations") == 0 and node.metric("wimz_devices_followed") == 0

        time.sleep(1.5)  # let the statistics of the start settle
        lock = TokensLocked(db)
        before = transactions(db)
        started = time.monotonic()
        try:
            results = asyncio.run(storm(node, tokens, lock))
        finally:
            lock.release()
        seconds = time.monotonic() - started
        failures = [r for r in results if isinstance(r, BaseException)]
        assert not failures, f"{len(failures)} of {DEVICES} handshakes failed, first: {failures[0]!r}"
        time.sleep(1.5)  # PostgreSQL publishes a backend's counts at most once a second
        spent = transactions(db) - before
        statements = node.metric("wimz_credential_lookup_statements_total")
        print(f"storm: {DEVICES} handshakes in {seconds:.2f} s, {statements:.0f} lookup statements, {spent} transactions "
              "in all (the other threads' too)")
        # The one read when the lock was taken, then everything that queued behind it at once.
        assert node.metric("wimz_credential_lookups_total") == DEVICES
        assert statements <= 2, f"{statements} lookup statements for {DEVICES} handshakes that all waited"
        assert node.metric("wimz_credentials_cached") == DEVICES
        # The registrations of the devices served are read after the storm's lookups (they hold
        # no handshake): once lookups pause for 100 ms, 2 s at the most.
        assert node.metric("wimz_devices_followed") == DEVICES
        deadline = time.monotonic() + 10
        while node.metric("wimz_push_registrations") < 2 * DEVICES and time.monotonic() < deadline:
            time.sleep(0.05)
        assert node.metric("wimz_push_registrations") == 2 * DEVICES

        # What was read is kept current: a revocation, then a disabled device, each within a second.
        revoked, disabled = "fleet1", "fleet2"
        db.psql(f"UPDATE tokens SET revoked_at = now() WHERE device_id = '{revoked}' AND role = 'app' "
                f"AND digest = sha256(convert_to('{tokens[revoked]}', 'UTF8'))")
        db.cli("device", "disable", disabled)
        deadline = time.monotonic() + 1.5
        statuses = {}
        while time.monotonic() < deadline:
            statuses = {d: http_json(f"{node.url}/api/devices/{d}/status", tokens[d])[0] for d in (revoked, disabled, "fleet3")}
            if statuses[revoked] == 401 and statuses[disabled] == 403:
                break
            time.sleep(0.05)
        assert statuses == {revoked: 401, disabled: 403, "fleet3": 200}, statuses
    finally:
        if node:
            node.stop()
        db.drop()


def test_a_process_holds_four_named_connections():
    db = Database(prefix="conns")
    node = RelayNode(db, name="conns-node")
    try:
        node.start()
        time.sleep(1.5)  # every thread has connected by now
        names = db.psql("SELECT application_name FROM pg_stat_activity WHERE datname = current_database() "
                        "AND application_name LIKE 'wimz-relay/%' ORDER BY 1").splitlines()
        assert names == [f"wimz-relay/conns-node/{role}"
                         for role in ("audit_writer", "cluster_agent", "database_worker", "store_monitor")], names
        others = db.psql("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                         "AND application_name NOT LIKE 'wimz-relay/%' AND pid <> pg_backend_pid()")
        assert others == "0", f"{others} unnamed connections"
    finally:
        node.stop()
        db.drop()
