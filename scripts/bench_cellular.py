"""Live again on a cellular link (issue 74 §3), for docs/performance.md.

The relay and its database in the cloud namespace of the link emulator ``linkem.py`` (the bench
yardstick: a phone, a cloud and a home in three network namespaces, a cellular profile on the
phone's link, an outage or an address change on command), the robot library at home sending a
``bark_detected`` event every 250 ms (its ``dog_id`` the event's number), and ``wimz-app-demo
--json`` on the phone, in the foreground, with the library's defaults. For each profile:

- **outage**: the phone's link drops everything for ``--outage`` seconds (a tunnel; the phone keeps
  its address); *live again* is from the outage's end until the demo prints the first event the
  robot sent after that end;
- **rebind**: the phone's address changes under the live socket and its old flows die silently (a
  carrier NAT forgetting the mapping); *live again* is from the change until the demo prints the
  first event sent after it;
- over the whole run: events lost (sent, never printed), duplicated and reordered, and the relay's
  4008 closes (a slow consumer);
- bytes on the phone's link (both ways, IP packets) per event while the stream flows, and a minute
  of a quiet link (the robot online, sending nothing).

Roles, each a process of this script: the orchestrator (the root namespace: starts linkem, one
``measure`` per profile inside the cloud namespace, prints the table), ``measure`` (the relay, the
demo through ``ip netns exec PREFIX-phone``, the robot through ``ip netns exec PREFIX-home``) and
``robot``. Needs root (namespaces, TUN). Run by scripts/bench-cellular.sh."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "Tests" / "testkit"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "clients" / "python"))

PROFILES = ("LTE", "3G", "Edge", "VeryBad")
PREFIX = "wimzcell"
CLOUD_IP = "198.18.2.1"
DEVICE = "cellular-robot"
EVENT_INTERVAL = 0.25
#: How long a recovery may take before the run calls it "not live" and goes on.
RECOVERY_LIMIT = 90.0


# ---- robot (in PREFIX-home) ------------------------------------------------------------------

async def robot(url: str, token: str) -> None:
    """Sends a numbered event every 250 ms while not paused; prints ``sent N UNIX_TIME`` for each
    one the library took. Reads ``pause``, ``resume`` and ``stop`` on stdin."""
    from wimz_robot import RobotClient

    paused = asyncio.Event()
    stopped = asyncio.Event()
    loop = asyncio.get_running_loop()

    def commands() -> None:
        for line in sys.stdin:
            word = line.strip()
            if word == "pause":
                loop.call_soon_threadsafe(paused.set)
            elif word == "resume":
                loop.call_soon_threadsafe(paused.clear)
            elif word == "stop":
                break
        loop.call_soon_threadsafe(stopped.set)

    threading.Thread(target=commands, daemon=True).start()
    async with RobotClient(url, DEVICE, token) as client:
        await client.wait_connected(timeout=60)
        print("connected", flush=True)
        number = 0
        while not stopped.is_set():
            if not paused.is_set():
                number += 1
                at = time.time()
                data = {"emotion": "alert", "confidence": 0.9, "loudness_db": 71.5, "dog_id": str(number), "dog_name": "Rex"}
                if await client.send_event("bark_detected", data):
                    print(f"sent {number} {at:.6f}", flush=True)
            try:
                await asyncio.wait_for(stopped.wait(), EVENT_INTERVAL)
            except asyncio.TimeoutError:
                pass


# ---- measure (in PREFIX-cloud) ---------------------------------------------------------------

class Lines:
    """A child process's stdout lines, each with the wall-clock time it was read."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.lines: list[tuple[float, str]] = []
        self.changed = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with self.changed:
                self.lines.append((time.time(), line.rstrip("\n")))
                self.changed.notify_all()

    def wait_for(self, accept, timeout: float):
        """The first line (time, text) from the start for which ``accept(time, text)``, or None."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while True:
                for at, text in self.lines:
                    if accept(at, text):
                        return at, text
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.changed.wait(left)


def received(demo: Lines) -> list[tuple[float, int]]:
    """(arrival time, event number) of every event the demo printed."""
    out = []
    for at, text in list(demo.lines):
        try:
            line = json.loads(text)
        except ValueError:
            continue
        if line.get("event") == "bark_detected" and line.get("decoded"):
            out.append((at, int(line["decoded"]["dog_id"])))
    return out


def sent(robot_lines: Lines) -> dict[int, float]:
    """Event number → the time the robot sent it."""
    return {int(w[1]): float(w[2]) for w in (t.split() for _, t in list(robot_lines.lines)) if len(w) == 3 and w[0] == "sent"}


def first_after(demo: Lines, robot_lines: Lines, moment: float) -> float | None:
    """Seconds from ``moment`` until the demo printed an event the robot sent after it."""
    def accept(at: float, text: str) -> bool:
        if '"bark_detected"' not in text:
            return False
        number = int(json.loads(text)["decoded"]["dog_id"])
        when = sent(robot_lines).get(number)
        return when is not None and when >= moment
    found = demo.wait_for(accept, RECOVERY_LIMIT)
    return None if found is None else found[0] - moment


def linkem(ctl: str, command: str) -> dict:
    """One control command to the running emulator (its Unix socket reaches across namespaces)."""
    import socket
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(10)
        s.connect(ctl)
        s.sendall((command + "\n").encode())
        answer = b""
        while not answer.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            answer += chunk
    return json.loads(answer)


def phone_bytes(ctl: str) -> int:
    """Bytes the phone sent and received so far (IP packets: what it sent, lost or not, and what
    reached it)."""
    phone = linkem(ctl, "stats")["phone"]
    return phone["up"]["bytes_in"] + phone["down"]["bytes_out"]


def metric_sum(node, prefix: str) -> float:
    """The sum of the relay's metric lines that start with ``prefix``."""
    import urllib.request
    with urllib.request.urlopen(f"{node.url}/metrics", timeout=5) as response:
        return sum(float(line.split()[-1]) for line in response.read().decode().splitlines() if line.startswith(prefix))


def recoveries(args: argparse.Namespace, demo: Lines, robot_lines: Lines) -> tuple[list[float | None], list[float | None]]:
    """``--repeats`` times an outage, then an address change: how long after each the phone was
    live again (None: not within RECOVERY_LIMIT)."""
    outages: list[float | None] = []
    rebinds: list[float | None] = []
    for _ in range(args.repeats):
        linkem(args.ctl, f"outage {args.outage}")
        ends = time.time() + args.outage
        time.sleep(args.outage)
        outages.append(first_after(demo, robot_lines, ends))
        time.sleep(args.settle)
        moment = time.time()
        linkem(args.ctl, "rebind")
        rebinds.append(first_after(demo, robot_lines, moment))
        time.sleep(args.settle)
    return outages, rebinds


def delivery(demo: Lines, robot_lines: Lines) -> dict[str, int]:
    """Events the robot sent since the demo's first one, and of them those never printed, printed
    twice, or printed after a later one."""
    numbers = [n for _, n in received(demo)]
    first = numbers[0] if numbers else 0  # the demo starts after the robot: earlier ones are not expected
    expected = {n for n in sent(robot_lines) if n >= first}
    return {"events_sent": len(expected), "lost": len(expected - set(numbers)),
            "duplicated": len(numbers) - len(set(numbers)),
            "reordered": sum(1 for a, b in zip(numbers, numbers[1:]) if b < a)}


def measure(args: argparse.Namespace) -> dict:
    """One profile's run (in the cloud namespace, the emulator already running): its figures."""
    from wimz_testkit import Database, RelayNode

    database = Database(prefix="cellular")
    turn_env = {"WIMZ_TURN_URLS": f"turn:{CLOUD_IP}:3478", "WIMZ_TURN_SECRET": "bench-secret-0123456789abcdef"}
    relay = RelayNode(database, env=turn_env, host="0.0.0.0")
    relay.start()
    processes: list[subprocess.Popen[str]] = []
    try:
        robot_token, app_token = database.add_device(DEVICE)
        url = f"http://{CLOUD_IP}:{relay.port}"
        robot_process = subprocess.Popen(
            ["ip", "netns", "exec", f"{PREFIX}-home", sys.executable, __file__, "robot", "--url", url, "--token", robot_token],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        processes.append(robot_process)
        robot_lines = Lines(robot_process)
        assert robot_lines.wait_for(lambda _, t: t == "connected", 60), "the robot did not connect"
        demo_process = subprocess.Popen(
            ["ip", "netns", "exec", f"{PREFIX}-phone", args.demo, "--url", url, "--device", DEVICE, "--json"],
            env=dict(os.environ, WIMZ_APP_TOKEN=app_token), stdout=subprocess.PIPE, text=True)
        processes.append(demo_process)
        demo = Lines(demo_process)
        assert demo.wait_for(lambda _, t: '"bark_detected"' in t, 60), "the demo printed no event"

        def robot_says(word: str) -> None:
            assert robot_process.stdin is not None
            robot_process.stdin.write(word + "\n")
            robot_process.stdin.flush()

        # The stream flowing: bytes on the phone's link per event.
        time.sleep(2)
        bytes_before, events_before = phone_bytes(args.ctl), len(received(demo))
        time.sleep(args.stream)
        per_event = (phone_bytes(args.ctl) - bytes_before) / max(1, len(received(demo)) - events_before)

        # A quiet link (before any outage: the relay's retransmissions to a dead address are not
        # the phone's): the robot online and sending nothing.
        robot_says("pause")
        time.sleep(3)  # what was in flight arrives
        bytes_before = phone_bytes(args.ctl)
        time.sleep(args.idle)
        idle_per_minute = (phone_bytes(args.ctl) - bytes_before) * 60 / args.idle if args.idle else None
        robot_says("resume")
        assert demo.wait_for(lambda at, _: at > time.time() - 0.5, 30), "the stream did not resume"
        time.sleep(args.settle)

        outages, rebinds = recoveries(args, demo, robot_lines)

        robot_says("stop")
        robot_process.wait(timeout=30)
        time.sleep(2 + 2 * args.settle)  # the last events reach the phone

        return {"profile": args.profile, "outage_live_s": outages, "rebind_live_s": rebinds,
                **delivery(demo, robot_lines),
                "closes_4008": metric_sum(relay, 'wimz_closes_total{code="4008"'),
                "bytes_per_event": round(per_event),
                "idle_bytes_per_minute": None if idle_per_minute is None else round(idle_per_minute)}
    finally:
        for process in processes:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
        relay.stop()
        database.drop()


# ---- orchestrator (the root namespace) -------------------------------------------------------

def run_profile(args: argparse.Namespace, profile: str) -> dict:
    ctl = f"/tmp/{PREFIX}.ctl"
    emulator = subprocess.Popen([sys.executable, args.linkem, "--profile", profile, "--prefix", PREFIX, "--ctl", ctl],
                                stdout=subprocess.PIPE, text=True)
    try:
        assert emulator.stdout is not None
        ready = json.loads(emulator.stdout.readline() or "{}")
        assert ready.get("ready"), f"linkem did not start ({profile})"
        command = [sys.executable, __file__, "measure", "--profile", profile, "--ctl", ctl, "--demo", args.demo,
                   "--outage", str(args.outage), "--repeats", str(args.repeats), "--settle", str(args.settle),
                   "--stream", str(args.stream), "--idle", str(args.idle)]
        done = subprocess.run(["ip", "netns", "exec", f"{PREFIX}-cloud", *command], stdout=subprocess.PIPE, text=True)
        if done.returncode != 0:
            raise SystemExit(f"the {profile} run failed (exit {done.returncode})")
        return json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        emulator.terminate()
        emulator.wait(timeout=30)


def seconds(values: list[float | None]) -> str:
    return ", ".join("not live" if v is None else f"{v:.1f}" for v in values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("role", nargs="?", default="bench", choices=("bench", "measure", "robot"))
    parser.add_argument("--profiles", default=",".join(PROFILES))
    parser.add_argument("--profile")
    parser.add_argument("--linkem", default=os.environ.get("WIMZ_LINKEM", ""))
    parser.add_argument("--demo", default=os.environ.get("WIMZ_APP_DEMO_BIN", ""))
    parser.add_argument("--ctl")
    parser.add_argument("--outage", type=float, default=20.0, help="seconds of each outage (default 20)")
    parser.add_argument("--repeats", type=int, default=2, help="outages and rebinds a profile (default 2)")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds of a live stream between them (default 5)")
    parser.add_argument("--stream", type=float, default=10.0, help="seconds of stream measured for bytes per event (default 10)")
    parser.add_argument("--idle", type=float, default=60.0, help="seconds of a quiet link measured (default 60; 0: none)")
    parser.add_argument("--url")
    parser.add_argument("--token")
    args = parser.parse_args()
    if args.role == "robot":
        asyncio.run(robot(args.url, args.token))
        return
    if args.role == "measure":
        print(json.dumps(measure(args)), flush=True)
        return
    if not args.linkem or not args.demo:
        raise SystemExit("--linkem (or WIMZ_LINKEM) and --demo (or WIMZ_APP_DEMO_BIN) are needed")
    print(f"{'profile':<8} {'live after outage, s':<22} {'after rebind, s':<22} {'lost/dup/reord':<15} {'4008':<5} "
          f"{'B/event':<8} {'idle B/min':<10}", flush=True)
    for profile in args.profiles.split(","):
        r = run_profile(args, profile)
        print(f"{profile:<8} {seconds(r['outage_live_s']):<22} {seconds(r['rebind_live_s']):<22} "
              f"{r['lost']}/{r['duplicated']}/{r['reordered']} of {r['events_sent']:<5} {r['closes_4008']:<5.0f} "
              f"{r['bytes_per_event']:<8} {r['idle_bytes_per_minute']}", flush=True)


if __name__ == "__main__":
    main()
