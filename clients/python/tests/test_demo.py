"""The newcomer's path, end to end: scripts/run.sh (with its private PostgreSQL and coturn)
serves TURN credentials that allocate at its coturn, and the two examples — the simulated
robot (Python) and the terminal app (Swift) — talk to each other through it."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from wimz_testkit import free_port
from test_turn_refresh import allocate

REPO = Path(__file__).resolve().parents[3]


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def http_get(url: str, token: str | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=3) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()
    except OSError:
        return 0, b""


def port_in_use(port: int, kind: int) -> bool:
    with socket.socket(socket.AF_INET, kind) as s:
        try:
            s.bind(("127.0.0.1", port))
            return False
        except OSError:
            return True


async def test_run_sh_serves_turn_and_the_examples_talk_through_it():
    state = tempfile.mkdtemp(prefix="wimz-demo-")
    os.chmod(state, 0o755)  # the private cluster runs as 'postgres'
    listen = f"127.0.0.1:{free_port()}"
    turn_port = free_port()
    env = dict(os.environ, WIMZ_STATE_DIR=state, WIMZ_LISTEN=listen, WIMZ_TURN_PORT=str(turn_port),
               WIMZ_BUILD_CONFIG="debug", WIMZ_PYTHON=sys.executable)
    for name in ("WIMZ_DATABASE_URL", "WIMZ_TURN_URLS"):
        env.pop(name, None)
    log = open(os.path.join(state, "run.log"), "w+")
    run = subprocess.Popen([str(REPO / "scripts/run.sh")], env=env, stdout=log, stderr=subprocess.STDOUT,
                           start_new_session=True)
    try:
        wait_for(lambda: http_get(f"http://{listen}/readyz")[0] == 200 or run.poll() is not None, 180, "run.sh")
        assert run.poll() is None, Path(log.name).read_text()[-3000:]
        demo = dict(line.split("=", 1) for line in Path(state, "demo.env").read_text().split())
        printed = Path(log.name).read_text()
        assert f"private coturn listens on 127.0.0.1:{turn_port}" in printed
        assert f"curl -s -H \"Authorization: Bearer {demo['DEMO_ROBOT_TOKEN']}\" http://{listen}/api/turn/credentials" in printed

        # The printed curl: 200, and the credential allocates at run.sh's coturn.
        status, body = http_get(f"http://{listen}/api/turn/credentials", demo["DEMO_ROBOT_TOKEN"])
        assert status == 200, body
        credentials = json.loads(body)
        assert credentials["urls"][0] == f"turn:127.0.0.1:{turn_port}?transport=udp"
        await allocate(turn_port, credentials["username"], credentials["credential"])

        robot = subprocess.Popen([str(REPO / "scripts/example-robot.sh"), "--step-seconds", "0.3"], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            app = await asyncio.to_thread(
                subprocess.run, [str(REPO / "scripts/example-app.sh"), "--plain", "--command", "treat",
                                 "--exit-after", "6"], env=env, capture_output=True, text=True, timeout=120)
        finally:
            robot.terminate()
            robot_output = robot.communicate(timeout=10)[0]
        screen = app.stdout
        assert app.returncode == 0, app.stdout + app.stderr
        assert "relay=connected" in screen and "robot=online" in screen, screen
        # Whichever of the robot's missions runs when the app connects (they take turns, ~2 s each).
        assert re.search(r"mission=Elsa · (sit|down|quiet) · watching · stage \d/3 · \d treats \[[#.]+\] \d+%", screen), screen
        assert re.search(r"mode=mission \(locked: Mission active: (sit|down|quiet)_\w+\)", screen), screen
        assert "command treat: ok" in screen and '"dispensed":true' in screen, screen
        assert "TURN credential expires " in screen, screen
        assert "connected to" in robot_output and "command treat: " in robot_output and "/15 today" in robot_output, robot_output
        assert "TURN: 2 ICE servers" in robot_output, robot_output
        await sealed_household(env, Path(state, "sealed"))
    finally:
        if run.poll() is None:
            run.send_signal(signal.SIGTERM)
        run.wait(timeout=60)
        log.close()
    # Stopping run.sh stopped what it started.
    printed = Path(log.name).read_text()
    assert "stopping the private coturn" in printed and "stopping the private PostgreSQL" in printed, printed[-2000:]
    wait_for(lambda: not port_in_use(turn_port, socket.SOCK_DGRAM), 10, "coturn to exit")
    assert not Path(state, "pg", "data", "postmaster.pid").exists()


async def example_app(env: dict[str, str], *args: str, token: str | None = None) -> str:
    """scripts/example-app.sh with ``args`` (as ``token``'s app, else the demo's owner); its output."""
    done = await asyncio.to_thread(subprocess.run, [str(REPO / "scripts/example-app.sh"), *args],
                                   env=dict(env, WIMZ_APP_TOKEN=token) if token else env, capture_output=True, text=True,
                                   timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


async def sealed_household(env: dict[str, str], keys: Path) -> None:
    """The sealed demo (v1.5): the robot pairs its first owner on the LAN; the owner invites
    family and a guest with an end date by links that carry the robot's code, and signs them in;
    every app opens what the relay only carries and keeps sealed."""
    pair_port = free_port()
    robot = subprocess.Popen([str(REPO / "scripts/example-robot.sh"), "--step-seconds", "0.3", "--sealed", str(keys / "robot"),
                              "--pair-listen", f"127.0.0.1:{pair_port}"], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: http_get(f"http://127.0.0.1:{pair_port}/wimz/sealed/robot")[0] == 200, 60, "the robot's pairing window")
        owner = ["--sealed-keys", str(keys / "owner.json")]
        paired = json.loads(await example_app(env, *owner, "--pair-robot", f"http://127.0.0.1:{pair_port}"))
        assert paired["epoch"] == 1
        owner += ["--robot-code", paired["robot_code"]]
        until = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))
        links = {label: json.loads(await example_app(env, *owner, "--invite", access, "--label", label, *extra))["link"]
                 for label, access, extra in (("family", "family", []), ("sitter", "guest", ["--until", until]))}
        assert links["family"].startswith("wimz://join?device=demo-robot&code=") and paired["robot_code"] in links["family"]
        joined = {label: json.loads(await example_app(env, "--sealed-keys", str(keys / f"{label}.json"), "--join", link, "--label", label))
                  for label, link in links.items()}
        signed = json.loads(await example_app(env, *owner, "--sign-pending"))
        assert signed["epoch"] == 2 and sorted(signed["added"]) == ["family", "sitter"] and signed["robot_key"] == "verified"

        def watch(label: str) -> list[str]:
            return ["--sealed-keys", str(keys / f"{label}.json"), "--robot-code", joined[label]["robot_code"], "--plain",
                    "--command", "treat", "--exit-after", "6"]
        family = await example_app(env, *watch("family"), token=joined["family"]["token"])
        assert "mission=Elsa · " in family and "command treat: ok" in family, family
        # The guest has no control: the relay can't see a sealed command, the robot refuses it itself.
        sitter = await example_app(env, *watch("sitter"), token=joined["sitter"]["token"])
        assert "mission=Elsa · " in sitter and "command treat: failed" in sitter and "forbidden" in sitter, sitter
        # What the relay keeps next to what the owner's app opens of it.
        views = {line["event"]: line for line in map(json.loads, (await example_app(env, *owner, "--relay-view")).splitlines())}
        mission = views["mission_progress"]
        assert mission["relay_stores"]["type"] == "sealed" and mission["relay_stores"]["kind"] == "mission_progress"
        assert "Elsa" not in json.dumps(mission["relay_stores"]) and mission["app_opens"]["data"]["dog_name"] == "Elsa"
    finally:
        robot.terminate()
        robot_output = robot.communicate(timeout=10)[0]
    assert f"pairing open on http://127.0.0.1:{pair_port}" in robot_output, robot_output
    assert f"code is {paired['robot_code']}" in robot_output and "command treat from family " in robot_output, robot_output
    assert "command treat from guest" not in robot_output, robot_output
