"""Removal figures (issue 42 §8) for scripts/bench-household.sh: one relay node, a real coturn
with its management CLI.

For each of REMOVALS guests (invited and redeemed, so each is a member of its own): the guest
fetches a TURN credential, allocates on coturn with it (a live video session) and connects its
app socket; after SETTLE seconds (a member who has been watching for a while: its issuance is in
the database) the owner removes it with DELETE /members/ID. Measured from the DELETE's answer
being sent for:
  socket closed  the guest's socket receives its close (4003);
  coturn gone    coturn's own CLI (`ps <username>`, polled every 20 ms) lists no session of it.
Prints p50, p99 and max of each, in milliseconds.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import sys
import tempfile
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "Tests" / "testkit"))

from websockets.asyncio.client import connect  # noqa: E402

from turn_probe import TurnProbe  # noqa: E402
from wimz_testkit import Coturn, Database, RelayNode, http_json  # noqa: E402


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))] if ordered else float("nan")


def coturn_gone_after(coturn: Coturn, username: str, start: float, limit: float = 10) -> float:
    """Seconds from ``start`` until coturn lists no session of ``username`` (polled)."""
    while time.monotonic() - start < limit:
        if not coturn.sessions(username):
            return time.monotonic() - start
        time.sleep(0.02)
    return float("inf")


async def one_removal(node: RelayNode, coturn: Coturn, device: str, owner: str, settle: float) -> tuple[float, float]:
    until = (datetime.now(timezone.utc) + timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    base = f"{node.url}/api/devices/{device}"
    status, invite = http_json(f"{base}/invites", owner, "POST", {"access": "guest", "label": "bench", "until": until})
    assert status == 201, invite
    status, guest = http_json(f"{node.url}/api/pairing", None, "POST", {"code": invite["code"]})
    assert status == 201, guest
    status, credential = http_json(f"{node.url}/api/turn/credentials", guest["token"])
    assert status == 200, credential
    probe = TurnProbe(("127.0.0.1", coturn.port), credential["username"], credential["credential"])
    assert coturn.sessions(credential["username"]), "the guest's allocation is not on coturn"
    ws = await connect(f"ws://127.0.0.1:{node.port}/ws/app?device_id={device}",
                       additional_headers={"Authorization": f"Bearer {guest['token']}"})
    await ws.recv()  # device_status
    await asyncio.sleep(settle)

    start = time.monotonic()
    gone: list[float] = []
    poller = threading.Thread(target=lambda: gone.append(coturn_gone_after(coturn, credential["username"], start)))
    status, _ = await asyncio.to_thread(http_json, f"{base}/members/{guest['token_id']}", owner, "DELETE")
    start = time.monotonic()  # from the answer: the removal is committed
    poller.start()
    assert status == 204
    try:
        while True:
            await ws.recv()
    except Exception:
        closed = time.monotonic() - start
    assert ws.close_code == 4003, ws.close_code
    await asyncio.to_thread(poller.join)
    probe.close()
    return closed, gone[0]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--removals", type=int, default=50)
    parser.add_argument("--settle", type=float, default=1.0, help="seconds between connecting and the removal")
    options = parser.parse_args()

    static_secret = secrets.token_hex(16)
    cli_password = secrets.token_hex(8)
    coturn = Coturn(static_secret=static_secret, cli_password=cli_password)
    password_file = Path(tempfile.mkdtemp(prefix="wimz-bench-cli-")) / "password"
    password_file.write_text(cli_password + "\n")
    database = Database(prefix="benchhousehold")
    node = RelayNode.started(database, env={
        "WIMZ_TURN_URLS": f"turn:127.0.0.1:{coturn.port}?transport=udp", "WIMZ_TURN_SECRET": static_secret,
        "WIMZ_TURN_ADMIN": f"127.0.0.1:{coturn.cli_port}", "WIMZ_TURN_ADMIN_PASSWORD_FILE": str(password_file)})
    try:
        device = "bench-home"
        _, owner = database.add_device(device)
        closed: list[float] = []
        gone: list[float] = []
        for _ in range(options.removals):
            socket_closed, coturn_gone = await one_removal(node, coturn, device, owner, options.settle)
            closed.append(socket_closed * 1000)
            gone.append(coturn_gone * 1000)
        print(f"{options.removals} removals (a guest with a live TURN allocation and an app socket each, "
              f"removed {options.settle:g} s after connecting), from the DELETE's 204:")
        for name, values in (("socket closed (4003)", closed), ("coturn session gone", gone)):
            print(f"  {name:22} p50 {percentile(values, 0.5):7.1f} ms   p99 {percentile(values, 0.99):7.1f} ms"
                  f"   max {max(values):7.1f} ms")
    finally:
        node.stop()
        coturn.stop()
        database.drop()


if __name__ == "__main__":
    asyncio.run(main())
