"""A robot stand-in that speaks the integration guide (shared/guide, Build 31): its REST API's
Quick Reference endpoints with the guide's JSON shapes, and on ``/ws/control`` the guide's §7
events with their exact fields. For tests and the demo; ``wimz-robot standin --port 8000``.

Besides the guide's API it answers a few paths of its own under ``/standin/`` (for tests):
``/standin/echo`` (the request back as JSON: method, path, headers, length, SHA-256, small bodies), ``/standin/blob?size=N`` (N bytes),
``/standin/hang`` (never answers in time), ``/standin/emit`` (POST ``{"event":NAME}``: sends
the guide's example of that event), ``/standin/reset`` (POST: idle, no mission or program).

Commands on ``/ws/control`` (``{"type":"command","id":ID,"command":NAME,"data":{...}}``) get
``{"type":"response","id":ID,"ok":true,"data":{...}}``; the commands it knows: ``ping``,
``start_mission``, ``set_mode``, ``treat``.

Needs aiohttp (the ``standin`` extra).
"""

from __future__ import annotations

import asyncio
import hashlib
import copy
import json
from datetime import datetime, timezone
from typing import Any

from aiohttp import WSMsgType, web

#: The guide's §7 examples, field for field.
EVENTS: dict[str, dict[str, Any]] = {
    "mission_progress": {"status": "watching", "trick": "sit", "stage": 2, "total_stages": 5, "dog_name": "Elsa",
                         "rewards": 1, "progress": 2.5, "target_sec": 5.0},
    "mode_changed": {"mode": "mission", "previous_mode": "idle", "locked": True,
                     "lock_reason": "Mission active: sit_training"},
    "audio_state": {"state": "playing", "track": "default/Wimz_theme.mp3", "playing": True, "playlist_index": 3,
                    "playlist_length": 14},
    "bark_detected": {"emotion": "alert", "confidence": 0.85, "loudness_db": 75.2, "dog_id": "aruco_315",
                      "dog_name": "Elsa"},
    "dog_detected": {"dog_id": "aruco_315", "dog_name": "Elsa", "bbox": [100, 150, 400, 500], "confidence": 0.92},
    "treat_dispensed": {"dog_id": "aruco_315", "dog_name": "Elsa", "behavior": "sit", "daily_count": 5,
                        "daily_limit": 15},
}

MISSIONS = [
    {"name": "sit_training", "description": "Practice sit command 5 times", "enabled": True, "max_rewards": 5,
     "duration_minutes": 30, "stages": 5},
    {"name": "down_sustained", "description": "Hold down position for 30 seconds", "enabled": True, "max_rewards": 3,
     "duration_minutes": 15, "stages": 3},
    {"name": "quiet_training", "description": "Bark prevention training", "enabled": True, "max_rewards": 5,
     "duration_minutes": 20, "stages": 5},
]

PROGRAMS = [
    {"name": "puppy_basics", "display_name": "Puppy Basics", "description": "Foundation training: sit, down, quiet",
     "missions": ["sit_training", "down_sustained", "quiet_progressive"], "created_by": "preset", "daily_treat_limit": 15},
    {"name": "quiet_dog", "display_name": "Quiet Dog", "description": "Bark reduction focus",
     "missions": ["quiet_progressive", "bark_prevention"], "created_by": "preset", "daily_treat_limit": 12},
    {"name": "trick_master", "display_name": "Trick Master", "description": "Advanced tricks training",
     "missions": ["spin_training", "speak_training"], "created_by": "preset", "daily_treat_limit": 20},
]

WEEKLY = {"success": True, "report": {
    "week_start": "2026-01-27T00:00:00", "week_end": "2026-02-02T23:59:59", "week_number": 5, "year": 2026,
    "bark_stats": {"total": 45, "avg_loudness": 72.5, "by_emotion": {"alert": 20, "attention": 15, "anxious": 10},
                   "by_dog": {"Elsa": 30, "Bezik": 15}},
    "reward_stats": {"total_treats": 28, "by_behavior": {"sit": 12, "down": 8, "quiet": 8},
                     "by_dog": {"Elsa": 18, "Bezik": 10}},
    "coaching": {"sessions": 12, "success_rate": 0.75, "tricks_practiced": {"sit": 5, "down": 4, "speak": 3}},
    "highlights": ["Elsa improved sit success rate by 15%", "Bark frequency down 20% from last week"]}}

TRENDS = {"success": True, "trends": {
    "weeks_analyzed": 8,
    "bark_trend": [{"week": w, "count": c} for w, c in enumerate([80, 65, 55, 50, 48, 45, 42, 40], start=1)],
    "summary": {"bark_change_percent": -50.0, "best_performing_dog": "Elsa"}}}


def _static(body: dict[str, Any]) -> Any:
    async def handle(_: web.Request) -> web.Response:
        return web.json_response(body)
    return handle


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def event(name: str, data: dict[str, Any] | None = None) -> dict[str, Any]:
    """A guide-format event: ``{"type":"event","event":NAME,"data":{...},"timestamp":...}``."""
    return {"type": "event", "event": name, "data": data if data is not None else copy.deepcopy(EVENTS[name]),
            "timestamp": _now()}


class StandInRobot:
    """The stand-in's state and its aiohttp application."""

    def __init__(self) -> None:
        self.mode = "idle"
        self.locked = False
        self.mission: dict[str, Any] | None = None
        self.program: dict[str, Any] | None = None
        self.sockets: set[web.WebSocketResponse] = set()
        #: Every request target received, in order (tests check that nothing escaped the API).
        self.seen: list[str] = []
        #: Every command received on /ws/control.
        self.commands: list[dict[str, Any]] = []
        self.app = web.Application(client_max_size=16 << 20, middlewares=[self._record])
        r = self.app.router
        r.add_get("/ws/control", self.control)
        r.add_get("/missions/available", _static({"missions": MISSIONS}))
        r.add_post("/missions/start", self.start_mission)
        r.add_get("/missions/status", self.mission_status)
        for action in ("stop", "pause", "resume"):
            r.add_post(f"/missions/{action}", self._mission_action(action))
        r.add_get("/programs/available", _static({"success": True, "programs": PROGRAMS, "count": 5}))
        r.add_post("/programs/start", self.start_program)
        r.add_get("/programs/status", self.program_status)
        for action in ("stop", "pause", "resume"):
            r.add_post(f"/programs/{action}", self._program_action(action))
        r.add_post("/programs/create", self.create_program)
        r.add_delete("/programs/{name}", self.delete_program)
        r.add_get("/mode", self.get_mode)
        r.add_post("/mode", self.set_mode)
        r.add_get("/reports/weekly", _static(WEEKLY))
        r.add_get("/reports/dog/{id}", self.dog_report)
        r.add_get("/reports/trends", _static(TRENDS))
        r.add_get("/reports/compare", self.compare)
        r.add_route("*", "/standin/echo", self.echo)
        r.add_get("/standin/blob", self.blob)
        r.add_get("/standin/hang", self.hang)
        r.add_post("/standin/emit", self.emit)
        r.add_post("/standin/reset", self.reset)

    async def reset(self, _: web.Request) -> web.Response:
        self.mode, self.locked, self.mission, self.program = "idle", False, None, None
        return web.json_response({"success": True})

    @web.middleware
    async def _record(self, request: web.Request, handler: Any) -> web.StreamResponse:
        self.seen.append(request.raw_path)
        response: web.StreamResponse = await handler(request)
        return response

    async def broadcast(self, message: dict[str, Any]) -> None:
        text = json.dumps(message)
        for ws in list(self.sockets):
            try:
                await ws.send_str(text)
            except ConnectionResetError:
                self.sockets.discard(ws)

    # -- /ws/control -------------------------------------------------------------------------

    async def control(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(max_msg_size=4 << 20)
        await ws.prepare(request)
        self.sockets.add(ws)
        try:
            async for message in ws:
                if message.type != WSMsgType.TEXT:
                    continue
                try:
                    command = json.loads(message.data)
                except ValueError:
                    continue
                if isinstance(command, dict) and command.get("type") == "command":
                    self.commands.append(command)
                    await ws.send_str(json.dumps(await self.answer(command)))
        finally:
            self.sockets.discard(ws)
        return ws

    async def answer(self, command: dict[str, Any]) -> dict[str, Any]:
        name = command.get("command")
        given = command.get("data")
        data: dict[str, Any] = given if isinstance(given, dict) else {}
        response: dict[str, Any] = {"type": "response", "id": command.get("id")}
        if name == "ping":
            response.update(ok=True, data={"pong": True})
        elif name == "start_mission":
            response.update(ok=True, data=await self._start_mission(str(data.get("mission_name", "sit_training"))))
        elif name == "set_mode":
            response.update(ok=True, data=await self._set_mode(str(data.get("mode", "idle"))))
        elif name == "treat":
            await self.broadcast(event("treat_dispensed"))
            response.update(ok=True, data={"dispensed": True})
        else:
            response.update(ok=False, error={"code": "unknown_command", "message": f"no command {name!r}"})
        return response

    # -- missions ----------------------------------------------------------------------------------

    async def start_mission(self, request: web.Request) -> web.Response:
        body = await request.json()
        return web.json_response(await self._start_mission(str(body.get("mission_name", ""))))

    async def _start_mission(self, name: str) -> dict[str, Any]:
        self.mission = {"mission_id": 42, "mission_name": name}
        previous, self.mode, self.locked = self.mode, "mission", True
        await self.broadcast(event("mode_changed", {"mode": "mission", "previous_mode": previous, "locked": True,
                                                    "lock_reason": f"Mission active: {name}"}))
        await self.broadcast(event("mission_progress", {"status": "waiting_for_dog", "trick": "sit", "stage": 1,
                                                        "total_stages": 5, "dog_name": "Elsa", "rewards": 0,
                                                        "progress": 0.0, "target_sec": 5.0}))
        return {"success": True, "message": f"Mission '{name}' started successfully", "mission_name": name,
                "mission_id": 42}

    async def mission_status(self, _: web.Request) -> web.Response:
        if self.mission is None:
            return web.json_response({"active": False})
        return web.json_response({
            "active": True, "mission_id": 42, "mission_name": self.mission["mission_name"], "dog_id": "aruco_315",
            "dog_name": "Elsa", "state": "watching", "trick_requested": "sit", "current_stage": 2, "total_stages": 5,
            "stage_info": {"name": "Sit Practice 2", "timeout": 60.0, "elapsed": 15.3,
                           "success_event": "VisionEvent.Pose.Sit"},
            "rewards_given": 1, "max_rewards": 5, "duration": 180.5, "max_duration": 1800})

    def _mission_action(self, action: str) -> Any:
        async def handle(_: web.Request) -> web.Response:
            if action == "stop":
                self.mission, self.mode, self.locked = None, "idle", False
            return web.json_response({"success": True, "message": f"Mission {action}{'ped' if action == 'stop' else 'd'}"})
        return handle

    # -- programs ----------------------------------------------------------------------------------

    async def start_program(self, request: web.Request) -> web.Response:
        body = await request.json()
        name = str(body.get("program_name", ""))
        self.program = {"program_name": name}
        return web.json_response({"success": True, "message": f"Program '{name}' started", "status": {
            "state": "running", "program_name": name, "current_mission": "sit_training", "current_mission_index": 0,
            "total_missions": 3, "treats_dispensed": 0}})

    async def program_status(self, _: web.Request) -> web.Response:
        return web.json_response({
            "state": "running" if self.program else "idle", "program_name": "puppy_basics",
            "display_name": "Puppy Basics", "current_mission": "down_sustained", "current_mission_index": 1,
            "total_missions": 3, "missions_completed": ["sit_training"], "missions_failed": [], "treats_dispensed": 4,
            "daily_treat_limit": 15, "elapsed_seconds": 420})

    def _program_action(self, action: str) -> Any:
        async def handle(_: web.Request) -> web.Response:
            if action == "stop":
                self.program = None
            return web.json_response({"success": True, "message": f"Program {action}"})
        return handle

    async def create_program(self, request: web.Request) -> web.Response:
        body = await request.json()
        return web.json_response({"success": True, "message": f"Program '{body.get('name')}' created"})

    async def delete_program(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if any(p["name"] == name for p in PROGRAMS):
            return web.json_response({"success": False, "error": "Preset programs cannot be deleted"}, status=400)
        return web.json_response({"success": True, "message": f"Program '{name}' deleted"})

    # -- mode ---------------------------------------------------------------------------------------

    async def get_mode(self, _: web.Request) -> web.Response:
        return web.json_response({"mode": self.mode, "mode_info": {
            "locked": self.locked, "lock_reason": "Mission active: sit_training" if self.locked else None,
            "since": "2026-01-30T10:15:30"}})

    async def set_mode(self, request: web.Request) -> web.Response:
        body = await request.json()
        return web.json_response(await self._set_mode(str(body.get("mode", ""))))

    async def _set_mode(self, mode: str) -> dict[str, Any]:
        if self.locked:
            return {"success": False, "error": "Mode locked: Mission active: sit_training"}
        previous, self.mode = self.mode, mode
        await self.broadcast(event("mode_changed", {"mode": mode, "previous_mode": previous, "locked": False,
                                                    "lock_reason": None}))
        return {"success": True, "mode": mode, "previous_mode": previous}

    # -- reports ------------------------------------------------------------------------------------

    async def dog_report(self, request: web.Request) -> web.Response:
        return web.json_response({"success": True, "progress": {
            "dog_id": "aruco_315", "dog_name": request.match_info["id"].capitalize(),
            "weeks_analyzed": int(request.query.get("weeks", "8")),
            "tricks": {"sit": {"attempts": 45, "successes": 38, "rate": 0.84, "trend": "improving"},
                       "down": {"attempts": 30, "successes": 22, "rate": 0.73, "trend": "stable"},
                       "speak": {"attempts": 20, "successes": 15, "rate": 0.75, "trend": "new"}},
            "bark_stats": {"total": 180, "weekly_average": 22.5, "trend": "decreasing"},
            "treats_earned": 85, "coaching_sessions": 28, "improvement_areas": ["down", "crosses"],
            "strengths": ["sit", "speak"]}})

    async def compare(self, _: web.Request) -> web.Response:
        return web.json_response({"success": True, "comparison": {
            "dogs": [{"dog_id": "elsa", "name": "Elsa", "total_treats": 85, "coaching_sessions": 28, "bark_count": 180,
                      "best_trick": "sit", "needs_work": "crosses"},
                     {"dog_id": "bezik", "name": "Bezik", "total_treats": 62, "coaching_sessions": 22,
                      "bark_count": 95, "best_trick": "down", "needs_work": "speak"}],
            "leader_board": {"most_treats": "elsa", "quietest": "bezik", "best_learner": "elsa"}}})

    # -- test helpers -------------------------------------------------------------------------------

    async def echo(self, request: web.Request) -> web.Response:
        body = await request.read()
        return web.json_response({"method": request.method, "path": request.raw_path,
                                  "headers": {k.lower(): v for k, v in request.headers.items()},
                                  "length": len(body), "sha256": hashlib.sha256(body).hexdigest(),
                                  "body": body.decode("utf-8", "replace") if len(body) <= 4096 else None},
                                 headers={"X-Standin": "echo"})

    async def blob(self, request: web.Request) -> web.Response:
        size = int(request.query.get("size", "1024"))
        return web.Response(body=bytes(i % 251 for i in range(size)), content_type="application/octet-stream")

    async def hang(self, _: web.Request) -> web.Response:
        await asyncio.sleep(3600)
        return web.json_response({})

    async def emit(self, request: web.Request) -> web.Response:
        name = (await request.json()).get("event")
        if name not in EVENTS:
            return web.json_response({"success": False, "error": f"unknown event {name!r}"}, status=400)
        await self.broadcast(event(name))
        return web.json_response({"success": True})


async def serve(host: str = "127.0.0.1", port: int = 8000) -> tuple[StandInRobot, web.AppRunner]:
    """Starts the stand-in; returns it and its runner (``await runner.cleanup()`` stops it)."""
    robot = StandInRobot()
    runner = web.AppRunner(robot.app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return robot, runner
