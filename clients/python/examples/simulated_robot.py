"""A simulated WIM-Z robot on wimz_robot.RobotClient: runs training missions (mode_changed,
mission_progress step by step, bark_detected, treat_dispensed), answers the app's commands,
and shows the TURN credential it would give aiortc.

    python simulated_robot.py --url http://127.0.0.1:8080 --device demo-robot --token "$DEMO_ROBOT_TOKEN"
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import random
from datetime import datetime, timezone

from wimz_robot import RobotClient

MISSIONS = ["sit_stay", "come_here", "quiet_please"]


def say(text: str) -> None:
    print(f"{datetime.now().strftime('%H:%M:%S')} {text}", flush=True)


async def run_mission(client: RobotClient, name: str, steps: int, step_seconds: float) -> None:
    await client.send_event("mode_changed", {"mode": "training", "previous_mode": "idle"})
    for step in range(1, steps + 1):
        status = "completed" if step == steps else "running"
        await client.send_event("mission_progress", {"mission": name, "step": step, "total_steps": steps,
                                                     "progress": round(step / steps, 3), "status": status})
        say(f"mission {name}: step {step}/{steps} {status}")
        if random.random() < 0.3:
            await client.send_event("bark_detected", {"confidence": round(random.uniform(0.6, 0.99), 2)})
        await asyncio.sleep(step_seconds)
    await client.send_event("treat_dispensed", {"count": 1, "remaining": random.randint(5, 30)})
    await client.send_event("mode_changed", {"mode": "idle", "previous_mode": "training"})


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="http://127.0.0.1:8080", help="relay base URL")
    parser.add_argument("--device", default="demo-robot")
    parser.add_argument("--token", default=os.environ.get("WIMZ_ROBOT_TOKEN"), help="robot token (env WIMZ_ROBOT_TOKEN)")
    parser.add_argument("--missions", type=int, default=0, help="stop after this many missions (default: run forever)")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--step-seconds", type=float, default=1.0)
    args = parser.parse_args()
    if not args.token:
        parser.error("a robot token is required: --token or WIMZ_ROBOT_TOKEN")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    async with RobotClient(args.url, args.device, args.token) as client:
        @client.command("treat")
        async def treat(data):
            count = int(data.get("count", 1))
            await client.send_event("treat_dispensed", {"count": count, "remaining": 20})
            say(f"command treat: dispensed {count}")
            return {"dispensed": count}

        @client.command("start_mission")
        def start_mission(data):
            say(f"command start_mission: {data}")
            return {"queued": data.get("mission", MISSIONS[0])}

        @client.on_message
        def other(message):
            if message.get("event") == "app_presence":
                say(f"apps watching: {message['data']['apps']}")

        await client.wait_connected(timeout=30)
        say(f"connected to {args.url} as {args.device}")
        try:
            turn = await client.turn_credentials()
            left = (turn.expires_at - datetime.now(timezone.utc)).total_seconds()
            say(f"TURN: {len(turn.ice_servers)} ICE servers, credential expires in {int(left)} s, "
                f"refreshed before {turn.refresh_at.isoformat()}")
        except Exception as error:  # the demo goes on without TURN
            say(f"TURN credentials unavailable: {error}")

        done = 0
        while args.missions == 0 or done < args.missions:
            await run_mission(client, MISSIONS[done % len(MISSIONS)], args.steps, args.step_seconds)
            done += 1
        if client.refused:
            say(f"stopped: {client.refused}")
            return 2
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(asyncio.run(main()))
    except KeyboardInterrupt:
        pass
