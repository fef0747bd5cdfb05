"""The sealed household's costs (issue 62 §6), for docs/performance.md:

- per 1 KB frame in the robot library: seal + sign, and verify + open (the robot's checks);
- an epoch change in a household of 20: from the owner's POST of the roster until every one of
  20 apps has learnt of it (16 on their sockets, a device's limit; 4 by asking), fetched its
  package and opened it (one release relay, the
  robot library as the robot, the apps in this process);
- the relay's CPU per delivered message, sealed against plain of the same size: a sealed device's
  robot sends the robot library's sealed events (kind ``bark_detected``) to an app, a plain
  device's robot the same event unsealed and padded to the same length, and the app of each
  sends messages of that length back (sealed, and a plain ``signal``). CPU is the relay's
  threads' time on CPU (/proc/PID/task/*/schedstat) over the messages, rounds alternating.

Run by scripts/bench-sealed.sh (a private PostgreSQL, the release relay)."""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "Tests" / "testkit"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "clients" / "python"))

from websockets.asyncio.client import connect  # noqa: E402

from wimz_robot import RobotClient  # noqa: E402
from wimz_robot.sealed import (Epoch, Identity, Member, Roster, RobotOpener, SealedDevice, Sender, SignedRoster,  # noqa: E402
                               new_epoch, open_package)
from wimz_testkit import Database, RelayNode, http_json  # noqa: E402


def per_frame(rounds: int, frames: int) -> None:
    robot, app = Identity.generate(), Identity.generate()
    roster = Roster.make("bench", 1, None, 0, robot.public, [Member(app.public, "owner", True, None, "")])
    epoch, _ = new_epoch(roster.signed(app), robot)
    plaintext = json.dumps({"type": "command", "id": "1", "command": "treat", "data": {"pad": "x" * 953}}).encode()
    assert len(plaintext) == 1024
    seal_us, open_us = [], []
    for _ in range(rounds):
        sender = Sender(app, "bench")
        opener = RobotOpener("bench")
        opener.announce(epoch, now=0)
        start = time.perf_counter()
        sealed = [sender.seal(epoch, plaintext) for _ in range(frames)]
        seal_us.append((time.perf_counter() - start) / frames * 1e6)
        now_ms = int(time.time() * 1000)
        start = time.perf_counter()
        for frame in sealed:
            opener.open(frame, now_ms=now_ms, now=1)
        open_us.append((time.perf_counter() - start) / frames * 1e6)
    print(f"robot library (pyca), {len(plaintext)}-byte frame, best of {rounds} x {frames}: "
          f"seal + sign {min(seal_us):.1f} µs, verify + open {min(open_us):.1f} µs")


async def epoch_change(members: int, changes: int) -> None:
    database = Database(prefix="bench_sealed")
    relay = RelayNode.started(database)
    try:
        device = "bench-household"
        robot_token, owner_token = database.add_device(device)
        tokens = [owner_token] + [database.cli("token", "issue", "--device", device, "--role", "app", "--access", "family")
                                  .strip().splitlines()[-1] for _ in range(members - 1)]
        for token in tokens:
            relay.wait_known(device, token)
        identities = [Identity.generate() for _ in tokens]
        base = f"{relay.url}/api/devices/{device}/sealed"
        for token, identity in zip(tokens, identities):
            keys = identity.public.to_json()
            assert http_json(f"{base}/member-key", token, "PUT", {"sign": keys["sign"], "hpke": keys["hpke"]})[0] == 200
        sealed = SealedDevice(Path(tempfile.mkdtemp(prefix="wimz-bench-sealed-")), device)
        sealed.pin_first_owner(identities[0].public)
        roster_members = [Member(i.public, "owner" if k == 0 else "family", True, None, f"m{k}") for k, i in enumerate(identities)]
        async with RobotClient(relay.url, device, robot_token, sealed=sealed) as client:
            await client.wait_connected(timeout=10)
            # A device takes 16 app sockets: the members past them learn of the epoch by asking.
            sockets = [await connect(f"ws://127.0.0.1:{relay.port}/ws/app?device_id={device}&token={t}", proxy=None)
                       for t in tokens[:16]]
            sockets += [None] * (len(tokens) - len(sockets))

            async def member_holds(socket, token: str, identity: Identity, number: int) -> None:
                while socket is not None:
                    message = json.loads(await socket.recv())
                    if message.get("type") == "epoch" and message.get("epoch") == number:
                        break
                while socket is None and (await asyncio.to_thread(http_json, base, token))[1].get("epoch") != number:
                    await asyncio.sleep(0.02)
                answer = await asyncio.to_thread(http_json, f"{base}/epochs/current", token)
                signed = SignedRoster.from_json(answer[1]["roster"])
                Epoch(signed.roster, open_package(answer[1]["package"], identity, signed.roster))

            timings = []
            previous: str | None = None
            for number in range(1, changes + 1):
                roster = Roster.make(device, number, previous, int(time.time() * 1000), sealed.identity.public, roster_members)
                waits = [asyncio.ensure_future(member_holds(s, t, i, number)) for s, t, i in zip(sockets, tokens, identities)]
                start = time.perf_counter()
                assert http_json(f"{base}/rosters", owner_token, "POST", roster.signed(identities[0]).to_json())[0] == 202
                await asyncio.wait_for(asyncio.gather(*waits), timeout=60)
                timings.append((time.perf_counter() - start) * 1000)
                previous = roster.hash
            for socket in sockets:
                if socket is not None:
                    await socket.close()
        print(f"epoch change, household of {members} (POST of the roster → every app holds the new secret; 16 told on "
              f"their sockets, the rest polling GET …/sealed every 20 ms), "
              f"{changes} changes: p50 {statistics.median(timings):.0f} ms, max {max(timings):.0f} ms")
    finally:
        relay.stop()
        database.drop()


def relay_cpu_ns(relay: RelayNode) -> int:
    """Nanoseconds the relay's threads have run so far."""
    assert relay.process is not None
    total = 0
    for task in Path(f"/proc/{relay.process.pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError):
            pass  # a thread that ended meanwhile
    return total


async def relay_cost(messages: int, rounds: int) -> None:
    database = Database(prefix="bench_sealed_cpu")
    # The apps send as fast as they can: no per-socket rate limit in the way.
    relay = RelayNode.started(database, env={"WIMZ_APP_RATE_LIMIT": "1000000", "WIMZ_APP_RATE_BURST": "1000000"})
    try:
        owner = Identity.generate()
        tokens: dict[str, tuple[str, str]] = {}
        for device in ("bench-plain", "bench-sealed"):
            tokens[device] = database.add_device(device)
        # The sealed device: its first epoch stored as the robot library stores it.
        sealed = SealedDevice(Path(tempfile.mkdtemp(prefix="wimz-bench-sealed-")), "bench-sealed")
        sealed.pin_first_owner(owner.public)
        roster = Roster.make("bench-sealed", 1, None, int(time.time() * 1000), sealed.identity.public,
                             [Member(owner.public, "owner", True, None, "")])
        body = sealed.accept(roster.signed(owner))
        assert http_json(f"{relay.url}/api/devices/bench-sealed/sealed/epochs/1", tokens["bench-sealed"][0], "PUT", body)[0] == 201
        event = {"type": "event", "event": "bark_detected", "data": {"confidence": 0.9, "pad": "x" * 420}}
        robot_sealer, app_sealer = sealed.sender(), Sender(owner, "bench-sealed")
        assert sealed.epoch is not None
        sealed_up = [json.dumps(sealed.seal(robot_sealer, event), separators=(",", ":")) for _ in range(messages)]
        sealed_down = [json.dumps(app_sealer.seal(sealed.epoch, json.dumps(event).encode()), separators=(",", ":"))
                       for _ in range(messages)]
        size = len(sealed_up[0])

        def padded(message: dict, length: int) -> str:
            text = json.dumps(message, separators=(",", ":"))
            return text.replace('"pad":"', '"pad":"' + "x" * (length - len(text)), 1)
        plain_up = [padded({**event, "data": {"confidence": 0.9, "pad": ""}}, size)] * messages
        plain_down = [padded({"type": "signal", "data": {"pad": ""}}, len(sealed_down[0]))] * messages
        frames = {"bench-plain": (plain_up, plain_down), "bench-sealed": (sealed_up, sealed_down)}

        async def one_round(device: str) -> float:
            up, down = frames[device]
            robot_token, app_token = tokens[device]
            async with connect(f"ws://127.0.0.1:{relay.port}/ws/robot?device_id={device}", proxy=None, compression=None,
                               additional_headers={"Authorization": f"Bearer {robot_token}"}, max_size=1 << 20) as robot, \
                    connect(f"ws://127.0.0.1:{relay.port}/ws/app?device_id={device}&token={app_token}", proxy=None,
                            compression=None, max_size=1 << 20) as app:
                await asyncio.sleep(0.2)  # greetings (status, presence, credentials) before the count starts

                # A window of messages in flight each way: the relay's queues never fill, so it
                # never closes a reader as a slow consumer.
                window = 256
                received = {"up": 0, "down": 0}
                progress = asyncio.Condition()

                async def receive(ws, count: int, kind: str, way: str) -> None:
                    while received[way] < count:
                        if f'"type":"{kind}"' in await ws.recv():
                            async with progress:
                                received[way] += 1
                                progress.notify_all()

                async def send(ws, texts: list[str], way: str) -> None:
                    for sent, text in enumerate(texts):
                        async with progress:
                            await progress.wait_for(lambda: sent - received[way] < window)
                        await ws.send(text)
                start = relay_cpu_ns(relay)
                kind_up = "sealed" if device == "bench-sealed" else "event"
                kind_down = "sealed" if device == "bench-sealed" else "signal"
                await asyncio.gather(send(robot, up, "up"), receive(app, len(up), kind_up, "up"),
                                     send(app, down, "down"), receive(robot, len(down), kind_down, "down"))
                return (relay_cpu_ns(relay) - start) / (len(up) + len(down))
        costs: dict[str, list[float]] = {"bench-plain": [], "bench-sealed": []}
        for _ in range(rounds):
            for device in costs:
                costs[device].append(await one_round(device))
        plain, sealed_cost = statistics.median(costs["bench-plain"]), statistics.median(costs["bench-sealed"])
        print(f"relay CPU per delivered message, {size}-byte robot events and {len(sealed_down[0])}-byte app messages, "
              f"{messages} each way, median of {rounds} rounds: plain {plain / 1000:.2f} µs, sealed {sealed_cost / 1000:.2f} µs, "
              f"sealed/plain {sealed_cost / plain:.3f}")
    finally:
        relay.stop()
        database.drop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--frames", type=int, default=2000)
    parser.add_argument("--members", type=int, default=20)
    parser.add_argument("--changes", type=int, default=10)
    parser.add_argument("--messages", type=int, default=50_000, help="relay CPU: messages each way per round")
    parser.add_argument("--cpu-rounds", type=int, default=5, help="relay CPU: rounds per variant")
    args = parser.parse_args()
    per_frame(args.rounds, args.frames)
    asyncio.run(epoch_change(args.members, args.changes))
    asyncio.run(relay_cost(args.messages, args.cpu_rounds))


if __name__ == "__main__":
    main()
