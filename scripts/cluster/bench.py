"""Cluster figures (issue 9): how long a device takes to be whole again after its node
returns (p50/p99, seen by a fresh app through the balancer), and presence writes per 1,000
connects; and what the cluster asks of PostgreSQL per 1,000 devices (issue 25): transactions,
rows written per table and the server's CPU, for the fleet connecting, for each device's app
registering a phone for push (the nodes run with an APNs key; nothing is pushed: the fleet sends
no push-worthy event and no robot stays away for WIMZ_PUSH_OFFLINE_AFTER), and for a node's
return (hand-offs, with the registrations in place). Run by scripts/bench-cluster.sh."""

from __future__ import annotations

import argparse
import asyncio
import re
import secrets
import statistics
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "Tests", "testkit"))
from fleet import Fleet, check_all  # noqa: E402
from wimz_testkit import Cluster, http_json  # noqa: E402


def metric_sum(cluster: Cluster, name: str) -> float:
    total = 0.0
    for node in cluster.nodes.values():
        if not node.running:
            continue
        text = urllib.request.urlopen(f"{node.url}/metrics", timeout=5).read().decode()
        total += sum(float(v) for v in re.findall(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.M))
    return total


def postgres_cpu_seconds() -> float:
    """User + system CPU of every PostgreSQL process on the machine (the bench's private server
    is the only one running), with the exited backends' (the postmaster's reaped children)."""
    total = 0
    for pid in os.listdir("/proc"):
        try:
            if not pid.isdigit() or os.stat(f"/proc/{pid}").st_uid != POSTGRES_UID:
                continue
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
            total += sum(int(field) for field in fields[11:15])  # utime, stime, cutime, cstime
        except OSError:
            continue
    return total / os.sysconf("SC_CLK_TCK")


POSTGRES_UID = next((int(line.split(":")[2]) for line in open("/etc/passwd") if line.startswith("postgres:")), -1)

# PostgreSQL 15 publishes a backend's counters when it goes idle, at the latest 10 s later.
STATS_SETTLE_SECONDS = 11


class DatabaseLoad:
    """Counters of the cluster's database at one moment: transactions, rows per table, CPU."""

    def __init__(self, cluster: Cluster) -> None:
        self.commits = int(cluster.psql("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"))
        self.rows: dict[str, tuple[int, int, int]] = {}
        for line in cluster.psql("SELECT relname, n_tup_ins, n_tup_upd, n_tup_del FROM pg_stat_user_tables").splitlines():
            name, ins, upd, dele = line.split("|")
            self.rows[name] = (int(ins), int(upd), int(dele))
        self.cpu = postgres_cpu_seconds()

    def report(self, earlier: "DatabaseLoad", label: str, devices: int) -> None:
        per = 1000 / devices
        changed = []
        for name, now in sorted(self.rows.items()):
            then = earlier.rows.get(name, (0, 0, 0))
            delta = [(a - b) * per for a, b in zip(now, then)]
            if any(delta):
                changed.append(f"{name} +{delta[0]:.0f}/~{delta[1]:.0f}/-{delta[2]:.0f}")
        print(f"postgres per 1,000 devices, {label}: {(self.commits - earlier.commits) * per:.0f} transactions, "
              f"{(self.cpu - earlier.cpu) * per:.2f} s CPU; rows inserted/updated/deleted: {', '.join(changed) or 'none'}")


def apns_environment() -> dict[str, str]:
    """An APNs configuration for the nodes (a fresh P-256 key from the openssl command): push
    registrations are accepted; the provider URL is never reached in this benchmark."""
    key = os.path.join(tempfile.mkdtemp(prefix="wimz-bench-apns-"), "AuthKey_BENCH.p8")
    subprocess.run(f"openssl ecparam -name prime256v1 -genkey -noout | openssl pkcs8 -topk8 -nocrypt -out {key}",
                   shell=True, check=True, stderr=subprocess.DEVNULL)
    return {"WIMZ_APNS_KEY_FILE": key, "WIMZ_APNS_KEY_ID": "BENCHKEY01", "WIMZ_APNS_TEAM_ID": "BENCHTEAM1",
            "WIMZ_APNS_TOPIC": "com.wimzai.app", "WIMZ_APNS_URL": "https://127.0.0.1:9",
            "WIMZ_APNS_SANDBOX_URL": "https://127.0.0.1:9"}


def register_phones(url: str, devices: dict[str, tuple[str, str]], concurrency: int) -> int:
    """One phone per device, registered by its app through the balancer; returns how many got 200."""
    def register(item: tuple[str, tuple[str, str]]) -> bool:
        device, (_, app_token) = item
        status, _ = http_json(f"{url}/api/devices/{device}/push", app_token, "PUT",
                              {"platform": "apns", "token": secrets.token_hex(32), "environment": "production",
                               "events": ["bark_detected", "treat_dispensed", "mission_completed", "robot_offline"]},
                              timeout=10)
        return status == 200
    with ThreadPoolExecutor(max_workers=max(1, min(concurrency, 32))) as pool:
        return sum(pool.map(register, devices.items()))


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--admin-url", required=True)
    parser.add_argument("--relay-bin", required=True)
    parser.add_argument("--migrations", required=True)
    parser.add_argument("--devices", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=100)
    args = parser.parse_args()

    cluster = Cluster(3, admin_url=args.admin_url, relay_bin=args.relay_bin, migrations=args.migrations,
                      node_env=apns_environment())
    try:
        devices = cluster.add_devices(args.devices, prefix="bench")
        fleet = Fleet(cluster.haproxy.url, devices)
        time.sleep(STATS_SETTLE_SECONDS)
        idle = DatabaseLoad(cluster)
        before = {m: metric_sum(cluster, m) for m in ("wimz_cluster_presence_rows_total",
                                                      "wimz_cluster_presence_statements_total",
                                                      "wimz_handshake_seconds_count")}
        await fleet.start(timeout=120)
        results = await check_all(cluster.haproxy.url, devices, timeout=10, concurrency=args.concurrency)
        await asyncio.sleep(1)
        after = {m: metric_sum(cluster, m) for m in before}
        connects = after["wimz_handshake_seconds_count"] - before["wimz_handshake_seconds_count"]
        rows = after["wimz_cluster_presence_rows_total"] - before["wimz_cluster_presence_rows_total"]
        statements = after["wimz_cluster_presence_statements_total"] - before["wimz_cluster_presence_statements_total"]
        print(f"baseline: {sum(r['ok'] for r in results)}/{len(results)} devices whole")
        print(f"presence writes: {connects:.0f} connects (robots + apps) -> {rows:.0f} rows in {statements:.0f} "
              f"statements = {1000 * rows / connects:.0f} rows and {1000 * statements / connects:.1f} statements "
              f"per 1,000 connects")
        await asyncio.sleep(STATS_SETTLE_SECONDS)
        connected = DatabaseLoad(cluster)
        connected.report(idle, f"connecting (each robot once, {args.devices} apps checking in)", args.devices)

        registered = register_phones(cluster.haproxy.url, devices, args.concurrency)
        print(f"push registrations: {registered}/{len(devices)} phones registered (one per device)")
        await asyncio.sleep(STATS_SETTLE_SECONDS)
        with_phones = DatabaseLoad(cluster)
        with_phones.report(connected, "registering phones (one per device, through the balancer)", args.devices)
        connected = with_phones

        cluster.nodes["node2"].kill()
        await asyncio.sleep(4)  # lease (3 s) expired; its robots reconnected elsewhere
        deadline = time.monotonic() + 60
        while not all(r.connected for r in fleet.robots.values()) and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        cluster.nodes["node2"].start()
        cluster.wait_balanced()
        started = time.monotonic()
        results = await check_all(cluster.haproxy.url, devices, timeout=10, concurrency=args.concurrency)
        elapsed = time.monotonic() - started
        whole = [r for r in results if r["ok"]]
        moved = [r["seconds"] for r in whole if r["statuses"] and r["statuses"][0] is False]
        times = [r["seconds"] for r in whole]
        print(f"node2 returned: {len(whole)}/{len(results)} devices whole within 10 s "
              f"({elapsed:.1f} s for all, {args.concurrency} apps at a time)")
        print(f"  time to whole, all devices: p50 {1000 * statistics.median(times):.0f} ms, "
              f"p99 {1000 * percentile(times, 99):.0f} ms")
        if moved:
            print(f"  time to whole, the {len(moved)} devices that had to move to node2: "
                  f"p50 {1000 * statistics.median(moved):.0f} ms, p99 {1000 * percentile(moved, 99):.0f} ms")
        await asyncio.sleep(STATS_SETTLE_SECONDS)
        DatabaseLoad(cluster).report(connected, "a node's death and return (robots moving, hand-offs, apps checking)",
                                     args.devices)
        await fleet.stop()
    finally:
        cluster.close()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
