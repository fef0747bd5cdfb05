"""How often a healthy, quiet example app wakes (issue 74 §4), for docs/performance.md.

One release relay, the robot library as an online robot that sends nothing, and
``wimz-app-demo --plain`` watching the device. After a settling time the demo's threads'
voluntary context switches (/proc/PID/task/*/status: each is a thread going to sleep, that is
one wake-up it had) are counted over a window and printed per minute, with the threads that
woke most; then the same for a demo that went to the background half-way through the settling
time (``--background-after``), what an iPhone app's scene phase does.

Run by scripts/bench-app-wakeups.sh (a private PostgreSQL, the release relay and demo)."""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "Tests" / "testkit"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "clients" / "python"))

from wimz_robot import RobotClient  # noqa: E402
from wimz_testkit import Database, RelayNode  # noqa: E402


def switches(pid: int) -> dict[str, int]:
    """Voluntary context switches by thread (name:tid), of every live thread of ``pid``."""
    counts: dict[str, int] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            status = (task / "status").read_text()
        except OSError:
            continue  # the thread ended
        fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
        counts[f"{fields['Name'].strip()}:{task.name}"] = int(fields["voluntary_ctxt_switches"])
    return counts


async def measure(demo: str, settle: float, window: float, background: bool, turn: bool) -> None:
    database = Database(prefix="wakeups")
    # Credentials are minted from the secret; no TURN server is needed for them.
    turn_env = {"WIMZ_TURN_URLS": "turn:127.0.0.1:3478", "WIMZ_TURN_SECRET": "bench-secret-0123456789abcdef"}
    relay = RelayNode.started(database, env=turn_env if turn else {})
    try:
        robot_token, app_token = database.add_device("wakeups-robot")
        async with RobotClient(relay.url, "wakeups-robot", robot_token) as robot:
            await robot.wait_connected(timeout=10)
            arguments = [demo, "--url", relay.url, "--device", "wakeups-robot", "--plain",
                         "--exit-after", str(settle + window + 5)]
            if background:
                arguments += ["--background-after", str(settle / 2)]
            process = subprocess.Popen(arguments, env=dict(os.environ, WIMZ_APP_TOKEN=app_token),
                                       stdout=open(os.environ.get("WIMZ_DEMO_LOG", os.devnull), "w"), stderr=subprocess.STDOUT)
            await asyncio.sleep(settle)
            before, started = switches(process.pid), time.monotonic()
            await asyncio.sleep(window)
            after, elapsed = switches(process.pid), time.monotonic() - started
            process.wait(timeout=30)
        per_thread = {name: after[name] - before.get(name, 0) for name in after}
        total = sum(per_thread.values())
        busiest = sorted(per_thread.items(), key=lambda item: -item[1])[:5]
        where = ("background" if background else "foreground") + ("" if turn else ", no TURN configured at the relay (503)")
        print(f"wimz-app-demo, quiet, {where}: {total / elapsed * 60:.0f} wake-ups a minute "
              f"({total} in {elapsed:.0f} s, {len(after)} threads); most: "
              + ", ".join(f"{name.split(':')[0]} {count}" for name, count in busiest))
    finally:
        relay.stop()
        database.drop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--settle", type=float, default=10, help="seconds before counting (default 10)")
    parser.add_argument("--window", type=float, default=60, help="seconds counted (default 60)")
    parser.add_argument("--without-turn", action="store_true", help="also a relay with no TURN configured (foreground)")
    arguments = parser.parse_args()
    demo = os.environ["WIMZ_APP_DEMO_BIN"]
    for background in (False, True):
        asyncio.run(measure(demo, arguments.settle, arguments.window, background, turn=True))
    if arguments.without_turn:
        asyncio.run(measure(demo, arguments.settle, arguments.window, False, turn=False))


if __name__ == "__main__":
    main()
