"""A simulated WIM-Z robot on wimz_robot.RobotClient: runs training missions with the
integration guide's events and fields (mode_changed with locked/lock_reason, mission_progress
stage by stage with the hold in seconds, dog_detected, bark_detected, treat_dispensed),
answers the app's commands, and shows the TURN credential it would give aiortc.

    python simulated_robot.py --url http://127.0.0.1:8080 --device demo-robot --token "$DEMO_ROBOT_TOKEN"

With ``--sealed DIR`` the robot seals its device (v1.5): its keys and epochs in DIR, and while no
first owner is pinned a pairing window on ``--pair-listen`` (the home Wi-Fi in real life) for the
owner's app; rosters the owner signs arrive through the relay and are accepted as they come.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import random
from datetime import datetime, timezone

from pathlib import Path

from wimz_robot import RobotClient
from wimz_robot.sealed.device import SealedDevice
from wimz_robot.sealed.pairing import PairingServer

#: (mission name, trick, hold seconds): the integration guide's missions (§3.1).
MISSIONS = [("sit_training", "sit", 5.0), ("down_sustained", "down", 3.0), ("quiet_training", "quiet", 4.0)]
DOG = {"dog_id": "aruco_315", "dog_name": "Elsa"}
DAILY_LIMIT = 15


def say(text: str) -> None:
    print(f"{datetime.now().strftime('%H:%M:%S')} {text}", flush=True)


class Robot:
    """The state the events report: today's treats, the mode."""

    def __init__(self, client: RobotClient) -> None:
        self.client = client
        self.treats_today = 0
        self.mode = "idle"

    async def set_mode(self, mode: str, locked: bool = False, reason: str | None = None) -> None:
        await self.client.send_event("mode_changed", {"mode": mode, "previous_mode": self.mode, "locked": locked,
                                                      "lock_reason": reason})
        self.mode = mode

    async def treat(self, behavior: str) -> None:
        self.treats_today = min(self.treats_today + 1, DAILY_LIMIT)
        await self.client.send_event("treat_dispensed", {**DOG, "behavior": behavior, "daily_count": self.treats_today,
                                                         "daily_limit": DAILY_LIMIT})

    async def run_mission(self, name: str, trick: str, target: float, stages: int, step_seconds: float) -> None:
        """One mission as the guide's §7.1 describes it: per stage greeting → command → watching
        (the hold's progress in seconds) → success, then completed; events with the guide's fields."""
        await self.set_mode("mission", locked=True, reason=f"Mission active: {name}")
        rewards = 0

        async def progress(status: str, stage: int, held: float = 0.0) -> None:
            await self.client.send_event("mission_progress", {
                "status": status, "trick": trick, "stage": stage, "total_stages": stages, "dog_name": DOG["dog_name"],
                "rewards": rewards, "progress": round(held, 1), "target_sec": target})

        await progress("waiting_for_dog", 1)
        await self.client.send_event("dog_detected", {**DOG, "bbox": [100, 150, 400, 500], "confidence": 0.92})
        for stage in range(1, stages + 1):
            for status in ("greeting", "command"):
                await progress(status, stage)
                await asyncio.sleep(step_seconds / 3)
            for held in (target / 2, target):
                await progress("watching", stage, held)
                say(f"mission {name}: stage {stage}/{stages} watching {held:.1f}/{target:.1f} s")
                if random.random() < 0.3:
                    await self.client.send_event("bark_detected", {
                        "emotion": random.choice(["alert", "attention", "anxious"]),
                        "confidence": round(random.uniform(0.6, 0.99), 2),
                        "loudness_db": round(random.uniform(60, 85), 1), **DOG})
                await asyncio.sleep(step_seconds / 2)
            rewards += 1
            await progress("success", stage, target)
            await self.treat(trick)
        await progress("completed", stages, target)
        await self.set_mode("idle")


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="http://127.0.0.1:8080", help="relay base URL")
    parser.add_argument("--device", default="demo-robot")
    parser.add_argument("--token", default=os.environ.get("WIMZ_ROBOT_TOKEN"), help="robot token (env WIMZ_ROBOT_TOKEN)")
    parser.add_argument("--missions", type=int, default=0, help="stop after this many missions (default: run forever)")
    parser.add_argument("--stages", type=int, default=3, help="stages per mission")
    parser.add_argument("--step-seconds", type=float, default=1.0, help="seconds per stage step")
    parser.add_argument("--sealed", metavar="DIR", help="seal the device (v1.5): the robot's keys and epochs in DIR")
    parser.add_argument("--pair-listen", default="127.0.0.1:8765", help="--sealed: where the first owner's app pairs (HOST:PORT)")
    parser.add_argument("--pair-window", type=float, default=600.0, help="--sealed: seconds the pairing window stays open")
    args = parser.parse_args()
    if not args.token:
        parser.error("a robot token is required: --token or WIMZ_ROBOT_TOKEN")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    sealed = SealedDevice(Path(args.sealed), args.device) if args.sealed else None
    pairing = None
    if sealed is not None:
        code = sealed.identity.public.verification_code
        if sealed.first_owner is None:
            host, port = args.pair_listen.rsplit(":", 1)
            pairing = PairingServer(sealed, host, int(port), window=args.pair_window).start()
            say(f"sealed: pairing open on http://{args.pair_listen} for {int(args.pair_window)} s; this robot's code is {code}")
        else:
            say(f"sealed: first owner {sealed.first_owner.kid}, epoch {sealed.epoch.number if sealed.epoch else None}; code {code}")

    try:
        async with RobotClient(args.url, args.device, args.token, sealed=sealed) as client:
            robot = Robot(client)

            @client.command("treat")
            async def treat(data, sender=None):
                await robot.treat(str(data.get("behavior", "manual")))
                who = f" from {sender.access} {sender.kid or sender.token_id}" if sender is not None else ""
                say(f"command treat{who}: {robot.treats_today}/{DAILY_LIMIT} today")
                return {"dispensed": True, "daily_count": robot.treats_today, "daily_limit": DAILY_LIMIT}

            @client.command("start_mission")
            def start_mission(data):
                say(f"command start_mission: {data}")
                return {"queued": data.get("mission_name", MISSIONS[0][0])}

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
                name, trick, target = MISSIONS[done % len(MISSIONS)]
                await robot.run_mission(name, trick, target, args.stages, args.step_seconds)
                done += 1
            if client.refused:
                say(f"stopped: {client.refused}")
                return 2
    finally:
        if pairing is not None:
            pairing.close()
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(asyncio.run(main()))
    except KeyboardInterrupt:
        pass
