"""The app library on an emulated lossy link (docs/clients.md, step 6): ``wimz-app-demo`` in a
phone's network namespace, the relay in this one, 50 ms each way between them, and the link losing
every packet of one connection after its handshake (Tests/testkit/lossy_link.py) — the upgrade's,
the relay's greeting after an upgrade, a first request's. The library must try again beside the
lost attempt before the wait that would otherwise end it (the transport's 10 s for an upgrade, the
24 s liveness interval for a socket that hears nothing, URLSession's 60 s for a request): the
library tries again after 1 s, about 4 s and 5 s, so a busy machine has 9, 20 and 55 s of slack,
and a client that waited and then retried fails however fast the machine is."""

from __future__ import annotations

import json
import os
import subprocess
import threading

import pytest

from lossy_link import Flow, LossyLink
from wimz_testkit import Database, RelayNode

DEVICE = "lossy-robot"


@pytest.fixture
def relay():
    database = Database(prefix="lossy")
    node = RelayNode(database, host="0.0.0.0")  # the phone reaches it on the link's address
    node.start()
    _, app_token = database.add_device(DEVICE)
    yield node, app_token
    node.stop()
    database.drop()


def demo(link: LossyLink, node: RelayNode, *arguments: str) -> list[str]:
    return link.inside([os.path.join(os.environ["WIMZ_BIN_DIR"], "wimz-app-demo"), "--url", f"http://{link.cloud}:{node.port}",
                        "--device", DEVICE, *arguments])


def retried_within(flows: list[Flow], request: bytes, otherwise: float) -> float:
    """One connection carrying ``request`` was lost, and another carried it sooner than
    ``otherwise`` (the wait that would end the lost attempt without the library's race); returns
    how long after the first that was."""
    lost = [flow.sent(request) for flow in flows if flow.blackholed]
    sent_again = [flow.sent(request) for flow in flows if not flow.blackholed]
    assert len(lost) == 1 and sent_again, flows
    after = min(sent_again) - lost[0]
    assert after < otherwise, f"sent again {after:.1f} s after the lost one: a timeout's doing, not the library's race"
    return after


def attached_after_loss(link: LossyLink, node: RelayNode, app_token: str) -> list[Flow]:
    """Runs the demo until the relay's greeting shows (``robot=offline``); the upgrades' connections."""
    app = subprocess.Popen(demo(link, node, "--plain"), env=dict(os.environ, WIMZ_APP_TOKEN=app_token),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    attached = threading.Event()
    lines: list[str] = []

    def read() -> None:
        assert app.stdout is not None
        for line in app.stdout:
            lines.append(line)
            if "robot=offline" in line:  # the relay's device_status: upgraded and attached
                attached.set()
    threading.Thread(target=read, daemon=True).start()
    try:
        assert attached.wait(60), "".join(lines[-5:])
        return link.flows_carrying(b"GET /ws/app")
    finally:
        app.kill()
        app.wait()


@pytest.mark.parametrize(("lose", "otherwise"), [
    (lambda link: link.blackhole_first(b"GET /ws/app"), 10),  # the upgrade: the transport's timeout
    (lambda link: link.blackhole_after_head(b"HTTP/1.1 101"), 24),  # the greeting: the liveness interval
], ids=["upgrade", "greeting"])
def test_a_lost_upgrade_or_greeting_is_tried_again_beside_it(relay, lose, otherwise):
    node, app_token = relay
    with LossyLink() as link:
        lose(link)
        upgrades = attached_after_loss(link, node, app_token)
    after = retried_within(upgrades, b"GET /ws/app", otherwise)
    print(f"a new socket {after:.1f} s after the lost one, {len(upgrades)} attempts")


def test_a_lost_request_is_sent_again_beside_it(relay):
    node, app_token = relay
    request = f"GET /api/devices/{DEVICE}/state".encode()
    with LossyLink() as link:
        link.blackhole_first(request)
        done = subprocess.run(demo(link, node, "--state"), env=dict(os.environ, WIMZ_APP_TOKEN=app_token),
                              capture_output=True, text=True, timeout=90)
        asked = link.flows_carrying(request)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout.splitlines()[-1])["online"] is False
    after = retried_within(asked, request, otherwise=60)
    print(f"the request sent again {after:.1f} s after the lost one, on {len(asked)} connections")
