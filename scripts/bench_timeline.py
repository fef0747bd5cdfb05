"""The household's timeline (issue 73 §6) for scripts/bench-timeline.sh, against a release relay on a
private PostgreSQL (fsync off, as every benchmark here):

1. Forwarding with timeline events in the mix: a robot sends SECONDS × RATE events to one app,
   first `audio_state` (not kept), then `bark_detected` (kept: each one also an entry), and the
   relay's CPU per message (its /proc time) for each.
2. Entries written: during the kept run, the entries and batches the relay stored
   (`wimz_timeline_entries_written_total`, `wimz_timeline_batches_total`): entries a second and
   transactions per 100 entries.
3. Reading at size: the table filled to SMALL and then LARGE entries (PER_DEVICE a device, over 30
   day partitions), then a first page (limit 50) and a 500-entry page (`after=` from the oldest) of
   sample devices, p50/p99 of each at each size, and the larger's over the smaller's.
4. A phone away for a week: 2,000 entries of one device caught up from `after=` empty in pages
   of 500, seconds.
5. Pruning a day at the ceiling while traffic flows: a day partition 366 days old of PRUNE rows,
   dropped by the relay's retention round while a robot's events reach an app every 10 ms: the
   forwarding latency before and during, and when the partition went.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "Tests" / "testkit"))

import psycopg  # noqa: E402
from websockets.sync.client import connect  # noqa: E402

from wimz_testkit import Database, RelayNode  # noqa: E402

PER_DEVICE = 1_000
DAYS = 30
#: The filled entries' frame: a bark as the guide's robot sends it.
MESSAGE = '{"type":"event","event":"bark_detected","data":{"dog_name":"Elsa","loudness_db":72.5,"confidence":0.85}}'


def percentiles(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return ordered[len(ordered) // 2], ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def get(node: RelayNode, path: str, token: str) -> tuple[float, dict]:
    request = urllib.request.Request(f"{node.url}{path}", headers={"Authorization": f"Bearer {token}"})
    start = time.monotonic()
    with urllib.request.urlopen(request, timeout=30) as response:
        body = json.loads(response.read())
    return (time.monotonic() - start) * 1000, body


def sockets(node: RelayNode, device: str, robot_token: str, app_token: str):
    robot = connect(f"ws://127.0.0.1:{node.port}/ws/robot?device_id={device}", additional_headers={"Authorization": f"Bearer {robot_token}"})
    app = connect(f"ws://127.0.0.1:{node.port}/ws/app?device_id={device}&token={app_token}")
    return robot, app


def forwarding(node: RelayNode, device: str, robot_token: str, app_token: str, seconds: float, rate: int) -> None:
    robot, app = sockets(node, device, robot_token, app_token)
    time.sleep(0.5)
    for name in ("audio_state", "bark_detected"):
        count = int(seconds * rate)
        written, batches = node.metric("wimz_timeline_entries_written_total"), node.metric("wimz_timeline_batches_total")
        received = [0]

        def drain() -> None:
            while received[0] < count:
                if json.loads(app.recv()).get("event") == name:
                    received[0] += 1

        reader = threading.Thread(target=drain)
        reader.start()
        cpu, start = cpu_seconds(node.process.pid), time.monotonic()
        for k in range(count):
            robot.send(json.dumps({"type": "event", "event": name, "data": {"dog_name": "Elsa", "loudness_db": 70 + k % 10, "k": k}}))
            time.sleep(max(0.0, start + (k + 1) / rate - time.monotonic()))
        reader.join()
        time.sleep(1.0)  # the last batch
        used = cpu_seconds(node.process.pid) - cpu
        stored = node.metric("wimz_timeline_entries_written_total") - written
        txs = node.metric("wimz_timeline_batches_total") - batches
        print(f"forwarding {name:14} {count} events at {rate}/s: relay CPU {used / count * 1e6:.1f} µs a message"
              + (f"; {stored:.0f} entries stored, {stored / seconds:.0f} a second, {100 * txs / max(stored, 1):.2f} transactions per 100"
                 if stored else ""))
    robot.close()
    app.close()


def fill(db: Database, total: int, offset: int) -> None:
    """Entries `offset` … `total` − 1: devices `bench-N` of PER_DEVICE entries each, spread over DAYS."""
    with psycopg.connect(db.url, autocommit=True) as conn:
        start = time.monotonic()
        conn.execute(
            f"""
            INSERT INTO timeline_entries (device_id, number, at, source, event, message)
            SELECT 'bench-' || (i / {PER_DEVICE}), i % {PER_DEVICE} + 1,
                   now() - make_interval(secs => ({PER_DEVICE} - i % {PER_DEVICE}) * {DAYS * 86400.0 / PER_DEVICE}),
                   'robot', 'bark_detected', '{MESSAGE}'
            FROM generate_series({offset}, {total - 1}) AS i
            """)
        # Read on a quiet database, as a relay's reads are between bursts: the fill's dirty pages
        # written out and its rows vacuumed now, not by the checkpointer and autovacuum during
        # the reads.
        conn.execute("VACUUM (ANALYZE) timeline_entries")
        conn.execute("CHECKPOINT")
        size = conn.execute("SELECT sum(pg_total_relation_size(inhrelid)) FROM pg_inherits "
                            "WHERE inhparent = 'timeline_entries'::regclass").fetchone()[0]
        print(f"filled to {total:,} entries in {time.monotonic() - start:.0f} s: {size / 2**20:,.0f} MiB on disk with the index, "
              f"{size / total:.0f} bytes an entry (a {len(MESSAGE)}-byte message)")


def reads(node: RelayNode, tokens: dict[str, str], label: str) -> dict[str, tuple[float, float]]:
    figures = {}
    for name, path in (("first page (50)", "/timeline"), ("500-entry page", "/timeline?after=&limit=500")):
        samples = []
        for _ in range(3):
            for device, token in tokens.items():
                samples.append(get(node, f"/api/devices/{device}{path}", token)[0])
        figures[name] = percentiles(samples)
        print(f"{label}: {name}: p50 {figures[name][0]:.2f} ms, p99 {figures[name][1]:.2f} ms ({len(samples)} requests)")
    return figures


def catch_up(node: RelayNode, db: Database, device: str, token: str) -> None:
    with psycopg.connect(db.url, autocommit=True) as conn:
        conn.execute(
            f"""
            INSERT INTO timeline_entries (device_id, number, at, source, event, message)
            SELECT '{device}', 1000000 + i, now() - make_interval(secs => (2000 - i) * 302.4), 'robot', 'treat_dispensed',
                   '{{"type":"event","event":"treat_dispensed","data":{{"dog_name":"Rex","daily_count":3}}}}'
            FROM generate_series(1, 2000) AS i
            """)
    start, cursor, seen, pages = time.monotonic(), "", 0, 0
    while cursor is not None:
        _, page = get(node, f"/api/devices/{device}/timeline?limit=500&after={cursor}", token)
        seen += len(page["entries"])
        pages += 1
        cursor = page["next"]
    print(f"a phone away for a week: {seen} entries caught up in {pages} pages, {time.monotonic() - start:.2f} s")


def prune_under_traffic(db: Database, rows: int) -> None:
    old = (datetime.now(timezone.utc) - timedelta(days=366)).replace(hour=0, minute=0, second=0, microsecond=0)
    name = f"timeline_entries_p{old:%Y%m%d}"
    robot_token, app_token = db.add_device("prune-robot")
    with psycopg.connect(db.url, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {name} PARTITION OF timeline_entries FOR VALUES FROM ('{old.isoformat()}') TO "
                     f"('{(old + timedelta(days=1)).isoformat()}')")
        conn.execute(f"""INSERT INTO {name} (device_id, number, at, source, event, message)
                         SELECT 'old-' || (i / 100), i, '{(old + timedelta(hours=12)).isoformat()}', 'robot', 'bark_detected', '{{}}'
                         FROM generate_series(1, {rows}) AS i""")
    node = RelayNode(db, name="prune", env={"WIMZ_RETENTION_INTERVAL": "5"})
    node.start()
    robot, app = sockets(node, "prune-robot", robot_token, app_token)
    latencies: list[tuple[float, float]] = []
    dropped_at = [0.0]

    def watch() -> None:
        with psycopg.connect(db.url, autocommit=True) as conn:
            while not dropped_at[0]:
                if conn.execute(f"SELECT to_regclass('{name}')").fetchone()[0] is None:
                    dropped_at[0] = time.monotonic()
                time.sleep(0.01)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    start = time.monotonic()
    while time.monotonic() - start < 20 and (not dropped_at[0] or time.monotonic() - dropped_at[0] < 2):
        sent = time.monotonic()
        robot.send(json.dumps({"type": "event", "event": "audio_state", "data": {"t": sent}}))
        while json.loads(app.recv()).get("event") != "audio_state":
            pass
        latencies.append((sent, (time.monotonic() - sent) * 1000))
        time.sleep(0.01)
    if not dropped_at[0]:
        print("prune: the partition was not dropped within 20 s")
    else:
        near = [ms for at, ms in latencies if abs(at - dropped_at[0]) < 1.0]
        far = [ms for at, ms in latencies if abs(at - dropped_at[0]) >= 1.0]
        print(f"prune: a {rows:,}-row day partition 366 days old dropped {dropped_at[0] - start:.1f} s after start; "
              f"forwarding within 1 s of it p50 {percentiles(near)[0]:.2f} ms, max {max(near):.2f} ms ({len(near)} events); "
              f"otherwise p50 {percentiles(far)[0]:.2f} ms, max {max(far):.2f} ms")
    robot.close()
    app.close()
    node.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", type=int, default=1_000_000)
    parser.add_argument("--large", type=int, default=20_000_000)
    parser.add_argument("--samples", type=int, default=40, help="devices whose pages are read")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rate", type=int, default=1000, help="events a second in the forwarding runs")
    parser.add_argument("--prune-rows", type=int, default=1_000_000)
    parser.add_argument("--per-device", type=int, default=1_000, help="entries of each device in the filled table")
    args = parser.parse_args()
    global PER_DEVICE
    PER_DEVICE = args.per_device
    db = Database(prefix="bench_timeline")
    try:
        with psycopg.connect(db.url, autocommit=True) as conn:  # the days the filled entries fall on
            # The filled entries are older than the migration: the relay is told it held them all along.
            conn.execute(f"UPDATE timeline_started SET started_at = now() - interval '{DAYS + 400} days'")
            for age in range(DAYS + 1):
                day = (datetime.now(timezone.utc) - timedelta(days=age)).replace(hour=0, minute=0, second=0, microsecond=0)
                conn.execute(f"CREATE TABLE IF NOT EXISTS timeline_entries_p{day:%Y%m%d} PARTITION OF timeline_entries "
                             f"FOR VALUES FROM ('{day.isoformat()}') TO ('{(day + timedelta(days=1)).isoformat()}')")
        node = RelayNode(db, name="bench")
        node.start()
        robot_token, app_token = db.add_device("live-robot")
        forwarding(node, "live-robot", robot_token, app_token, args.seconds, args.rate)
        step = max(1, args.small // PER_DEVICE // args.samples)
        tokens = {}
        for k in range(args.samples):
            device = f"bench-{k * step}"
            tokens[device] = db.add_device(device)[1]
        fill(db, args.small, 0)
        small = reads(node, tokens, f"{args.small:,} entries")
        fill(db, args.large, args.small)
        large = reads(node, tokens, f"{args.large:,} entries")
        for name in small:
            print(f"{name}: p50 {large[name][0] / small[name][0]:.2f}×, p99 {large[name][1] / small[name][1]:.2f}× at "
                  f"{args.large // args.small}× the entries")
        away_robot, away_app = db.add_device("away-phone")
        catch_up(node, db, "away-phone", away_app)
        node.stop()
        prune_under_traffic(db, args.prune_rows)
    finally:
        db.drop()


if __name__ == "__main__":
    main()
