"""Push figures (issue 24 §8) for scripts/bench-push.sh: one relay node, the test kit's APNs stand-in.

  push-rate: robots send bark_detected at RATE events/s in all for SECONDS; every event is a push
             (WIMZ_PUSH_INTERVAL 0.001 s, one registration per device). Prints the pushes the stand-in
             received per second, the relay's CPU seconds per push (utime + stime from /proc), and the
             event → APNs request latency (the event's send time rides in its dog_name, the push's
             first loc-arg): p50 and p99.
  memory:    the relay's RSS with no registrations and with COUNT (loaded at start), per registration.
  live:      Live Activities (issue 52 §6): DEVICES robots each run a mission, mission_progress at
             5 Hz (the status changing every 5 s, the rest progress), each device with one Live
             Activity of an app with no socket. Prints robot event → stand-in request p50/p99 (the
             event whose state the request carries: coalescing included) and the requests per
             activity per minute that reach APNs, by priority.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "Tests" / "testkit"))

from websockets.asyncio.client import connect  # noqa: E402
from websockets.sync.client import connect as sync_connect  # noqa: E402

from apns_standin import APNsStandIn, new_p256_key  # noqa: E402
from wimz_testkit import Database, RelayNode, http_json, self_signed  # noqa: E402


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))] if ordered else float("nan")


def standin() -> APNsStandIn:
    directory = Path(tempfile.mkdtemp(prefix="wimz-bench-apns-"))
    cert, key = self_signed(directory, ("127.0.0.1",))
    key_path, private = new_p256_key(directory)
    s = APNsStandIn(public_key=private.public_key(), key_id="BENCHKEY01", team_id="BENCHTEAM1", topic="bench",
                    cert=cert, key=key).start()
    s.key_path, s.ca = key_path, cert
    return s


def relay_env(apns: APNsStandIn, interval: str) -> dict[str, str]:
    return {"WIMZ_APNS_KEY_FILE": str(apns.key_path), "WIMZ_APNS_KEY_ID": apns.key_id, "WIMZ_APNS_TEAM_ID": apns.team_id,
            "WIMZ_APNS_TOPIC": apns.topic, "WIMZ_APNS_URL": apns.url, "WIMZ_APNS_SANDBOX_URL": apns.url,
            "WIMZ_APNS_CA_FILE": str(apns.ca), "WIMZ_PUSH_INTERVAL": interval, "WIMZ_LOG_LEVEL": "warn"}


async def push_rate(rate: int, seconds: float, devices: int) -> None:
    apns = standin()
    database = Database(prefix="benchpush")
    relay = RelayNode.started(database, env=relay_env(apns, "0.001"))
    try:
        tokens = {f"bp{k:04d}": database.add_device(f"bp{k:04d}") for k in range(devices)}
        for device, (_, app) in tokens.items():
            status, body = http_json(f"{relay.url}/api/devices/{device}/push", app, "PUT",
                                     {"platform": "apns", "token": secrets.token_hex(32), "environment": "production",
                                      "events": ["bark_detected"]})
            assert status == 200, body
        await asyncio.sleep(1)
        robots = [await connect(f"ws://127.0.0.1:{relay.port}/ws/robot?device_id={d}", proxy=None,
                                additional_headers={"Authorization": f"Bearer {r}"}) for d, (r, _) in tokens.items()]
        cpu_before, sent, start = cpu_seconds(relay.process.pid), 0, time.monotonic()
        period = len(robots) / rate  # each robot sends once per period
        while time.monotonic() - start < seconds:
            tick = time.monotonic()
            for robot in robots:
                await robot.send(json.dumps({"type": "event", "event": "bark_detected",
                                             "data": {"dog_name": repr(time.monotonic())}}))
                sent += 1
            await asyncio.sleep(max(0.0, period - (time.monotonic() - tick)))
        elapsed = time.monotonic() - start
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(apns.delivered()) < sent:
            await asyncio.sleep(0.1)
        cpu = cpu_seconds(relay.process.pid) - cpu_before
        delivered = apns.delivered()
        latencies = [(r.at - float(r.body["aps"]["alert"]["loc-args"][0])) * 1000 for r in delivered]
        print(f"push-rate target {rate}/s: {sent} events in {elapsed:.1f} s, {len(delivered)} pushes received "
              f"({len(delivered) / elapsed:.0f}/s); relay CPU {cpu:.2f} s = {cpu / max(1, len(delivered)) * 1e6:.0f} us per push; "
              f"event -> APNs request p50 {percentile(latencies, 0.5):.1f} ms, p99 {percentile(latencies, 0.99):.1f} ms")
        for robot in robots:
            await robot.close()
    finally:
        relay.stop()
        apns.stop()
        database.drop()


async def live_activities(devices: int, seconds: float) -> None:
    apns = standin()
    database = Database(prefix="benchlive")
    relay = RelayNode.started(database, env=relay_env(apns, "60"))
    try:
        tokens = {f"bl{k:04d}": database.add_device(f"bl{k:04d}") for k in range(devices)}
        phones = {}
        for device, (_, app) in tokens.items():
            phones[device] = secrets.token_hex(32)
            status, body = http_json(f"{relay.url}/api/devices/{device}/live-activity/activities/bench-1", app, "PUT",
                                     {"token": phones[device], "environment": "production"})
            assert status == 200, body
        await asyncio.sleep(1)
        robots = {d: await connect(f"ws://127.0.0.1:{relay.port}/ws/robot?device_id={d}", proxy=None,
                                   additional_headers={"Authorization": f"Bearer {r}"}) for d, (r, _) in tokens.items()}
        start, step = time.monotonic(), 0
        while time.monotonic() - start < seconds:
            tick = time.monotonic()
            status = ("watching", "success")[int((tick - start) // 5) % 2]
            for robot in robots.values():
                # The send time rides in trick (a string of the state, ≤ 64 characters).
                await robot.send(json.dumps({"type": "event", "event": "mission_progress",
                                             "data": {"status": status, "trick": repr(time.monotonic()), "dog_name": "Rex",
                                                      "progress": (step % 50) / 50}}))
            step += 1
            await asyncio.sleep(max(0.0, 0.2 - (time.monotonic() - tick)))
        elapsed = time.monotonic() - start
        await asyncio.sleep(3)
        live = [r for r in apns.delivered() if r.headers.get("apns-push-type") == "liveactivity"]
        minutes = elapsed / 60
        figures = []
        for priority in ("10", "5"):
            sent = [r for r in live if r.headers["apns-priority"] == priority]
            latencies = [(r.at - float(r.body["aps"]["content-state"]["trick"])) * 1000 for r in sent]
            figures.append(f"priority {priority}: {len(sent) / devices / minutes:.1f} per activity per minute, robot event -> "
                           f"APNs request p50 {percentile(latencies, 0.5):.0f} ms, p99 {percentile(latencies, 0.99):.0f} ms")
        print(f"live: {devices} devices, mission_progress at 5 Hz each for {elapsed:.0f} s ({step * devices} events), "
              f"{len(live)} requests ({len(live) / devices / minutes:.1f} per activity per minute); " + "; ".join(figures))
        for robot in robots.values():
            await robot.close()
    finally:
        relay.stop()
        apns.stop()
        database.drop()


def memory(count: int) -> None:
    apns = standin()
    database = Database(prefix="benchpushmem")
    try:
        device, (robot, app) = "bm0000", database.add_device("bm0000")
        app_id = database.psql("SELECT id FROM tokens WHERE role = 'app' LIMIT 1").strip()
        figures = []
        for n in (0, count):
            database.psql("DELETE FROM push_registrations")
            if n:
                database.psql(f"""INSERT INTO push_registrations (device_id, token, environment, app_token_id, events)
                    SELECT '{device}', md5(g::text) || md5((g + 1)::text), 'production', {app_id},
                           '{{bark_detected,dog_detected,treat_dispensed,mission_completed,robot_offline}}'
                    FROM generate_series(1, {n}) g""")
            relay = RelayNode.started(database, env=relay_env(apns, "60"))
            # A node holds the registrations of the devices it serves: the robot connects.
            with sync_connect(f"ws://127.0.0.1:{relay.port}/ws/robot?device_id={device}", proxy=None,
                              additional_headers={"Authorization": f"Bearer {robot}"}):
                time.sleep(2)
                figures.append(rss_kib(relay.process.pid))
            relay.stop()
        per = (figures[1] - figures[0]) * 1024 / count
        print(f"memory: RSS {figures[0]} KiB without registrations, {figures[1]} KiB with {count} held (their device's robot "
              f"connected): {per:.0f} bytes per registration")
    finally:
        apns.stop()
        database.drop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rates", default="250,500,1000")
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--devices", type=int, default=50)
    parser.add_argument("--registrations", type=int, default=20000)
    parser.add_argument("--live-devices", type=int, default=100)
    parser.add_argument("--live-seconds", type=float, default=60)
    parser.add_argument("--sections", default="rate,memory,live", help="which of rate, memory, live to run")
    args = parser.parse_args()
    sections = set(args.sections.split(","))
    if "rate" in sections:
        for rate in (int(r) for r in args.rates.split(",")):
            asyncio.run(push_rate(rate, args.seconds, args.devices))
    if "memory" in sections:
        memory(args.registrations)
    if "live" in sections:
        asyncio.run(live_activities(args.live_devices, args.live_seconds))


if __name__ == "__main__":
    main()
