"""Retention at 10 million rows (issue 43 §2) for scripts/bench-retention.sh: batched pruning
against monthly partitions, and what a prune costs the audit writer and forwarding.

1. Fills ``audit_log`` with ROWS rows spread evenly over DAYS days, in time order with ordered
   event ids (as the audit writer appends them), with fsync on.
2. Batches: the pruner's own statement (RetentionRepository) on the oldest rows, BATCH sizes
   1,000, 5,000 and 20,000, five batches each: ms per batch.
3. A prune while the relay works: a release relay with WIMZ_AUDIT_RETENTION_DAYS=RETAIN prunes
   the rows older than that (its first round, one interval after start) while
   - a writer inserts 50 audit rows every 20 ms the way the audit writer does (one INSERT of
     unnest()ed arrays, one commit): insert latency before and during the prune;
   - a robot sends an event every 10 ms to an app through the relay: forwarding latency before
     and during.
   The round's rows and duration are the relay's own `retention_pruned` line.
4. Partitions instead: converting the same table to monthly range partitions (what a migration
   would do: copy every row; the relay cannot write its audit log meanwhile) and dropping one
   month's partition.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "Tests" / "testkit"))

import psycopg  # noqa: E402
from websockets.exceptions import ConnectionClosed  # noqa: E402
from websockets.sync.client import connect  # noqa: E402

from wimz_testkit import Database, RelayNode  # noqa: E402


def percentiles(values: list[float]) -> str:
    if not values:
        return "no samples"
    ordered = sorted(values)
    pick = lambda p: ordered[min(len(ordered) - 1, int(p * len(ordered)))]  # noqa: E731
    return f"p50 {pick(0.5):.2f} ms, p99 {pick(0.99):.2f} ms, max {ordered[-1]:.2f} ms ({len(values)} samples)"


def timed(conn: psycopg.Connection, sql: str) -> float:
    start = time.monotonic()
    conn.execute(sql)
    return (time.monotonic() - start) * 1000


def fill(db: Database, rows: int, days: int) -> None:
    with psycopg.connect(db.url, autocommit=True) as conn:
        start = time.monotonic()
        conn.execute(
            f"""
            INSERT INTO audit_log (event_id, at, event, actor, device_id, token_id, remote_addr, details)
            SELECT lpad(to_hex(i), 32, '0')::uuid, now() - make_interval(secs => ({rows} - i) * {days * 86400.0 / rows}),
                   'app_connected', 'app', 'robot-' || (i % 2000), i % 5000, '198.51.100.' || (i % 250),
                   jsonb_build_object('node', 'relay-1', 'session', i, 'user_agent', 'WIMZ/1.4 iOS 18.1')
            FROM generate_series(1, {rows}) i
            """)
        filled = time.monotonic() - start
        conn.execute("VACUUM ANALYZE audit_log")
        size = conn.execute("SELECT pg_size_pretty(pg_total_relation_size('audit_log'))").fetchone()[0]
    print(f"filled audit_log: {rows:,} rows over {days} days in {filled:.0f} s; {size} with its indexes")


def batch_sizes(db: Database, days: int) -> None:
    # The oldest rows only, so that the relay's round below still finds its share.
    with psycopg.connect(db.url, autocommit=True) as conn:
        for batch in (1_000, 5_000, 20_000):
            times = []
            for _ in range(5):
                with conn.transaction():
                    conn.execute("SET LOCAL wimz.audit_prune = 'on'")
                    start = time.monotonic()
                    conn.execute(
                        f"""DELETE FROM audit_log WHERE ctid = ANY(ARRAY(SELECT ctid FROM audit_log
                            WHERE at < now() - make_interval(days => {days - 8}) LIMIT {batch}))""")
                    times.append((time.monotonic() - start) * 1000)
            print(f"batch of {batch:>6,}: {sum(times) / len(times):7.1f} ms a batch on average "
                  f"(max {max(times):.1f}), {batch / (sum(times) / len(times)) * 1000:,.0f} rows/s")


class Writer(threading.Thread):
    """The audit writer's shape: 50 rows in one INSERT … unnest() and one commit every 20 ms."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url, self.samples, self.running = url, [], True

    def run(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            n = 0
            while self.running:
                ids = [f"ff{(n * 50 + k):030x}" for k in range(50)]
                start = time.monotonic()
                conn.execute(
                    """INSERT INTO audit_log (event_id, at, event, actor, device_id, details)
                       SELECT * FROM unnest(%s::uuid[], %s::timestamptz[], %s::text[], %s::text[], %s::text[], %s::jsonb[])""",
                    (ids, ["now"] * 50, ["app_connected"] * 50, ["app"] * 50, ["robot-1"] * 50, ['{"node":"bench"}'] * 50))
                self.samples.append((start, (time.monotonic() - start) * 1000))
                n += 1
                time.sleep(0.02)


class Forwarding(threading.Thread):
    """A robot's event every 10 ms to an app through the relay; each one's latency."""

    def __init__(self, node: RelayNode, robot: str, app: str) -> None:
        super().__init__(daemon=True)
        self.samples: list[tuple[float, float]] = []
        self.running = True
        base = f"ws://127.0.0.1:{node.port}"
        self.robot = connect(f"{base}/ws/robot?device_id=dev1", additional_headers={"Authorization": f"Bearer {robot}"},
                             proxy=None)
        self.app = connect(f"{base}/ws/app?device_id=dev1&token={app}", proxy=None)
        self.app.recv(timeout=5)  # device_status

    def run(self) -> None:
        sent = threading.Thread(target=self._send, daemon=True)
        sent.start()
        while self.running:
            try:
                message = json.loads(self.app.recv(timeout=1))
            except TimeoutError:
                continue
            except ConnectionClosed:
                return
            if message.get("event") == "bench":
                start = message["data"]["t"]
                self.samples.append((start, (time.monotonic() - start) * 1000))

    def _send(self) -> None:
        while self.running:
            try:
                self.robot.send(json.dumps({"type": "event", "event": "bench", "data": {"t": time.monotonic()}}))
            except ConnectionClosed:
                return
            time.sleep(0.01)


def prune_with_relay(db: Database, retain: int, wait: float) -> None:
    robot, app = db.add_device("dev1")
    node = RelayNode(db, env={"WIMZ_AUDIT_RETENTION_DAYS": str(retain), "WIMZ_RETENTION_INTERVAL": str(wait)})
    node.start()
    writer, forwarding = Writer(db.url), Forwarding(node, robot, app)
    writer.start()
    forwarding.start()
    deadline = time.monotonic() + wait + 600
    line = None
    while line is None and time.monotonic() < deadline:
        line = next((json.loads(x) for x in node.lines if '"retention_pruned"' in x), None)
        time.sleep(0.05)
    ended = time.monotonic()
    time.sleep(2)
    writer.running = forwarding.running = False
    node.stop()
    if line is None:
        raise SystemExit("the relay did not prune")
    began = ended - line["ms"] / 1000
    print(f"relay's round: {line.get('audit_log', 0):,} audit rows in {line['ms'] / 1000:.1f} s "
          f"(batches of 5,000 with 50 ms between them)")
    for name, samples in (("audit insert (50 rows)", writer.samples), ("forwarding robot→app", forwarding.samples)):
        before = [ms for t, ms in samples if t < began - 0.5]
        during = [ms for t, ms in samples if began <= t <= ended]
        print(f"{name}: before the prune {percentiles(before)}")
        print(f"{name}: during the prune {percentiles(during)}")


def partitions(db: Database, days: int) -> None:
    with psycopg.connect(db.url, autocommit=True) as conn:
        first = conn.execute("SELECT date_trunc('month', min(at)) FROM audit_log").fetchone()[0]
        conn.execute("CREATE TABLE audit_part (LIKE audit_log INCLUDING DEFAULTS) PARTITION BY RANGE (at)")
        months = conn.execute("SELECT count(*) FROM generate_series(%s::timestamptz, now() + interval '1 month', '1 month')",
                              (first,)).fetchone()[0]
        for m in range(months):
            conn.execute(f"""CREATE TABLE audit_part_{m} PARTITION OF audit_part FOR VALUES
                             FROM ('{first}'::timestamptz + interval '{m} months')
                             TO ('{first}'::timestamptz + interval '{m + 1} months')""")
        copy = timed(conn, "INSERT INTO audit_part SELECT * FROM audit_log")
        index = timed(conn, "ALTER TABLE audit_part ADD PRIMARY KEY (id, at)")
        index += timed(conn, "CREATE UNIQUE INDEX ON audit_part (event_id, at)")
        index += timed(conn, "CREATE INDEX ON audit_part (device_id, at)")
        rows = conn.execute("SELECT count(*) FROM audit_part_1").fetchone()[0]
        drop = timed(conn, "DROP TABLE audit_part_1")
    print(f"partitions: converting {months} monthly partitions: copy {copy / 1000:.0f} s + indexes {index / 1000:.0f} s "
          f"(the audit log unwritable meanwhile); dropping a month ({rows:,} rows): {drop:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--days", type=int, default=400, help="the rows' span")
    parser.add_argument("--retain", type=int, default=365, help="the relay's WIMZ_AUDIT_RETENTION_DAYS")
    parser.add_argument("--wait", type=float, default=15, help="seconds before the relay's first round")
    args = parser.parse_args()
    db = Database(prefix="retention")
    # Commits and the prune's writes as on a production server: fsync on (the test server runs without).
    db.psql("ALTER SYSTEM SET fsync = on", admin=True)
    db.psql("SELECT pg_reload_conf()", admin=True)
    try:
        fill(db, args.rows, args.days)
        batch_sizes(db, args.days)
        prune_with_relay(db, args.retain, args.wait)
        partitions(db, args.days)
    finally:
        db.drop()


if __name__ == "__main__":
    main()
