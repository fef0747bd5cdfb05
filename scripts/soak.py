"""Soak driver for scripts/soak.sh: churn + traffic + TURN requests against a running relay for a
bounded time, sampling the relay's RSS and open descriptors every 10 s. Exits non-zero when
either grows after the warm-up (a leak), or when the relay stops answering.

    python3 scripts/soak.py --port P --tokens tokens.csv --pid PID --minutes 10
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import os
import random
import time
import urllib.request

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

stats = {"connects": 0, "refused": 0, "events": 0, "commands": 0, "responses": 0, "turn": 0, "turn_errors": 0}


def sample(pid: int) -> tuple[int, int]:
    with open(f"/proc/{pid}/status") as f:
        rss = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


async def robot(url: str, device: str, token: str, stop: float) -> None:
    """One robot: answers commands, sends an event every 50 ms, reconnects now and then."""
    while time.monotonic() < stop:
        try:
            async with connect(f"{url}/ws/robot?device_id={device}", additional_headers={"Authorization": f"Bearer {token}"},
                               compression=None, proxy=None) as ws:
                stats["connects"] += 1
                until = min(stop, time.monotonic() + random.uniform(20, 60))

                async def answer():
                    async for message in ws:
                        m = json.loads(message)
                        if m.get("type") == "command":
                            await ws.send(json.dumps({"type": "response", "id": m["id"], "ok": True, "data": {}}))
                asker = asyncio.create_task(answer())
                step = 0
                while time.monotonic() < until:
                    step += 1
                    await ws.send(json.dumps({"type": "event", "event": "mission_progress", "data": {"step": step}}))
                    stats["events"] += 1
                    await asyncio.sleep(0.05)
                asker.cancel()
        except (OSError, ConnectionClosed, InvalidStatus):
            stats["refused"] += 1
            await asyncio.sleep(0.5)


async def app(url: str, device: str, token: str, stop: float) -> None:
    """One app that keeps coming and going (cellular churn) and sends a command each visit."""
    while time.monotonic() < stop:
        try:
            async with connect(f"{url}/ws/app?device_id={device}&token={token}", compression=None, proxy=None) as ws:
                stats["connects"] += 1
                await ws.send(json.dumps({"type": "command", "id": "x", "command": "sit"}))
                stats["commands"] += 1
                until = time.monotonic() + random.uniform(0.5, 5)
                while time.monotonic() < until:
                    try:
                        m = json.loads(await asyncio.wait_for(ws.recv(), timeout=until - time.monotonic()))
                        if m.get("type") == "response":
                            stats["responses"] += 1
                    except asyncio.TimeoutError:
                        break
        except (OSError, ConnectionClosed, InvalidStatus):
            stats["refused"] += 1
            await asyncio.sleep(0.5)
        await asyncio.sleep(random.uniform(0, 1))


def turn_request(url: str, token: str) -> bool:
    request = urllib.request.Request(f"{url}/api/turn/credentials", headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status == 200
    except OSError:
        return False


async def turn_load(url: str, tokens: list[str], stop: float) -> None:
    while time.monotonic() < stop:
        ok = await asyncio.to_thread(turn_request, url, random.choice(tokens))
        stats["turn" if ok else "turn_errors"] += 1
        await asyncio.sleep(0.02)


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--tokens", required=True)
    parser.add_argument("--pid", type=int, required=True)
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--devices", type=int, default=50)
    args = parser.parse_args()
    rows = list(csv.DictReader(open(args.tokens)))[: args.devices]
    http, ws = f"http://127.0.0.1:{args.port}", f"ws://127.0.0.1:{args.port}"
    start = time.monotonic()
    stop = start + args.minutes * 60
    tasks = [asyncio.create_task(robot(ws, r["device_id"], r["robot_token"], stop)) for r in rows]
    tasks += [asyncio.create_task(app(ws, r["device_id"], r["app_token"], stop)) for r in rows for _ in range(2)]
    tasks.append(asyncio.create_task(turn_load(http, [r["robot_token"] for r in rows], stop)))
    samples = []
    print("  min   RSS kB   fds  connects  events  commands  responses  TURN ok/err  refused", flush=True)
    while time.monotonic() < stop:
        await asyncio.sleep(10)
        rss, fds = sample(args.pid)
        minute = (time.monotonic() - start) / 60
        samples.append((minute, rss, fds))
        print(f"{minute:5.1f} {rss:8d} {fds:5d} {stats['connects']:9d} {stats['events']:7d} {stats['commands']:9d} "
              f"{stats['responses']:10d} {stats['turn']:6d}/{stats['turn_errors']:<4d} {stats['refused']:8d}", flush=True)
    await asyncio.gather(*tasks, return_exceptions=True)
    await asyncio.sleep(3)  # let the last sockets close
    rss_end, fds_end = sample(args.pid)
    warm = [s for s in samples if s[0] >= min(2, args.minutes / 3)]
    base_rss = min(s[1] for s in warm) if warm else samples[0][1]
    peak_rss = max(s[1] for s in warm) if warm else rss_end
    base_fds = samples[0][2]
    print(f"after warm-up: RSS {base_rss}..{peak_rss} kB ({(peak_rss - base_rss) / base_rss * 100:.1f} % spread); "
          f"fds {base_fds} at the first sample, {fds_end} after the load stopped; "
          f"{stats['connects']} connects, {stats['events']} events, {stats['commands']} commands, "
          f"{stats['responses']} responses, {stats['turn']} TURN credentials ({stats['turn_errors']} errors)")
    leak = peak_rss > base_rss * 1.15 or fds_end > base_fds + 20
    print("verdict: " + ("GROWING (look for a leak)" if leak else "flat"))
    return 1 if leak else 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
