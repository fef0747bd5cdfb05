"""How long writes fail while PostgreSQL fails over (issue 51 §2): pg_auto_failover on loopback,
built with deploy/pg-auto-failover/pg-auto-failover.sh (the monitor tuned by its `tune`), a
release relay given both hosts, and ROUNDS times: the primary killed whole while the relay takes
a write every 50 ms (`POST /admin/devices`, answered from the database worker), then the old
primary brought back as the standby. Prints, per round and as p50 and max: the seconds from the
kill to the promotion, and the window in which the relay's writes failed (first failure to the
first success after it)."""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "Tests" / "testkit"))

from pg_failover import Formation  # noqa: E402
from wimz_testkit import Database, RelayNode, http_json  # noqa: E402

ADMIN = "admin-token-for-the-failover-bench-0123"


def writes(node: RelayNode, round_: int, results: list[tuple[float, bool]], stop: threading.Event) -> None:
    i = 0
    while not stop.is_set():
        i += 1
        try:
            status = http_json(f"{node.url}/admin/devices", ADMIN, "POST", {"id": f"w{round_}-{i}"}, timeout=10)[0]
        except OSError:
            status = 0
        results.append((time.monotonic(), status == 201))
        time.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    rounds = parser.parse_args().rounds
    formation = Formation()
    node = None
    try:
        db = Database(existing_url=formation.url)
        node = RelayNode(db, env={"WIMZ_ADMIN_TOKEN": ADMIN, "WIMZ_LOG_LEVEL": "warn"})
        node.start()
        promotions, windows = [], []
        for round_ in range(1, rounds + 1):
            results: list[tuple[float, bool]] = []
            stop = threading.Event()
            writer = threading.Thread(target=writes, args=(node, round_, results, stop))
            writer.start()
            time.sleep(1)
            old = formation.primary()
            killed = time.monotonic()
            formation.kill(old)
            promotion = formation.wait(lambda: formation.primary() not in (None, old), 120, "the promotion")
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not (results and results[-1][0] > killed + promotion and results[-1][1]):
                time.sleep(0.05)
            stop.set()
            writer.join()
            failed = [t for t, ok in results if not ok and t >= killed]
            first_failure = failed[0] if failed else None
            recovered = next((t for t, ok in results if ok and first_failure is not None and t > first_failure), None)
            window = (recovered - first_failure) if first_failure and recovered else 0.0
            promotions.append(promotion)
            windows.append(window)
            print(f"round {round_}: primary {old} killed; promoted after {promotion:.1f} s; writes failed for {window:.1f} s "
                  f"({len(failed)} of {len(results)} writes)", flush=True)
            formation.run(old)
            formation.wait(lambda: sorted(formation.states().values()) == [("primary", "primary"), ("secondary", "secondary")],
                           120, "the old primary back as the standby")
        print(f"over {rounds} failovers: promotion p50 {statistics.median(promotions):.1f} s, max {max(promotions):.1f} s; "
              f"writes failed p50 {statistics.median(windows):.1f} s, max {max(windows):.1f} s")
    finally:
        if node:
            node.stop()
        formation.close()


if __name__ == "__main__":
    main()
