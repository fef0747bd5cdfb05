"""Robots that stay connected through the cluster, and the check that a fresh app of each
device sees its robot and gets a command answered (the cluster tests' and benchmark's probe)."""

from __future__ import annotations

import asyncio
import json
import time
from urllib.parse import quote

from websockets.asyncio.client import connect
from wimz_robot import Backoff, RobotClient


class Fleet:
    """One ``RobotClient`` per device (the robot library, as robots run it), each answering
    ``ping`` and reporting a replayed ``mode_changed`` event once connected."""

    def __init__(self, url: str, devices: dict[str, tuple[str, str]]) -> None:
        self.url = url
        self.devices = devices
        self.robots: dict[str, RobotClient] = {}

    async def start(self, timeout: float = 30) -> None:
        for device, (robot_token, _) in self.devices.items():
            robot = RobotClient(self.url, device, robot_token, backoff=Backoff(base=0.2, cap=1.0))

            @robot.command("ping")
            async def ping(data, device=device):
                return {"pong": device}

            self.robots[device] = robot
            robot.start()
        await asyncio.wait_for(asyncio.gather(*(r.wait_connected() for r in self.robots.values())), timeout)
        await asyncio.gather(*(r.send_event("mode_changed", {"mode": "training"}) for r in self.robots.values()))

    async def stop(self) -> None:
        await asyncio.gather(*(r.close() for r in self.robots.values()), return_exceptions=True)


async def app_check(url: str, device: str, app_token: str, timeout: float = 5.0) -> dict:
    """A fresh app socket through the balancer: waits until the robot is online, sends a
    command and waits for its response. Returns what it saw; ``ok`` when all of it happened
    within ``timeout`` (reconnecting when the relay says 1012, as the app does)."""
    ws_url = url.replace("http://", "ws://") + f"/ws/app?device_id={quote(device)}&token={quote(app_token)}"
    started = time.monotonic()
    seen: dict = {"device": device, "ok": False, "statuses": [], "replayed": False, "reconnects": 0}
    deadline = started + timeout
    while time.monotonic() < deadline:
        try:
            async with connect(ws_url, open_timeout=deadline - time.monotonic(), compression=None, proxy=None) as ws:
                sent = False
                while True:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return seen
                    message = json.loads(await asyncio.wait_for(ws.recv(), remaining))
                    if message.get("event") == "device_status":
                        online = message["data"]["online"]
                        seen["statuses"].append(online)
                        seen["since"] = message["data"].get("since")
                        if online and not sent:
                            await ws.send(json.dumps({"type": "command", "id": "probe-1", "command": "ping"}))
                            sent = True
                    elif message.get("event") == "mode_changed":
                        seen["replayed"] = True
                    elif message.get("type") == "error" and message.get("code") == "device_offline":
                        sent = False  # the robot left between status and command: wait for it again
                    elif message.get("type") == "response" and message.get("id") == "probe-1":
                        seen["ok"] = message.get("ok") is True and message.get("data", {}).get("pong") == device
                        seen["seconds"] = time.monotonic() - started
                        return seen
        except asyncio.TimeoutError:
            return seen
        except Exception as error:  # closed (1012: the device moved) or refused: once more
            seen["reconnects"] += 1
            seen["last_error"] = repr(error)
            await asyncio.sleep(0.05)
    return seen


async def check_all(url: str, devices: dict[str, tuple[str, str]], timeout: float = 5.0,
                    concurrency: int = 200) -> list[dict]:
    """``app_check`` for every device (bounded concurrency); the results."""
    gate = asyncio.Semaphore(concurrency)

    async def one(device: str, app_token: str) -> dict:
        async with gate:
            return await app_check(url, device, app_token, timeout)

    return await asyncio.gather(*(one(d, tokens[1]) for d, tokens in devices.items()))
