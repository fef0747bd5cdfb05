"""The newcomer's path, end to end: scripts/run.sh (with its private PostgreSQL and coturn)
serves TURN credentials that allocate at its coturn, and the two examples — the simulated
robot (Python) and the terminal app (Swift) — talk to each other through it."""

from __future__ import annotations

import asyncio
import json
import os
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
        assert "mission=Elsa · sit · watching · stage " in screen and "%" in screen, screen
        assert "mode=mission (locked: Mission active: sit_training)" in screen, screen
        assert "command treat: ok" in screen and '"dispensed":true' in screen, screen
        assert "TURN credential expires " in screen, screen
        assert "connected to" in robot_output and "command treat: " in robot_output and "/15 today" in robot_output, robot_output
        assert "TURN: 2 ICE servers" in robot_output, robot_output
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
