"""TURN over TLS on port 443 beside the API (deploy/haproxy/haproxy-443.cfg, deploy/coturn/
turnserver-443.conf), for real: HAProxy routes each TLS connection by SNI, the API answers
through the port, and turnutils_uclient allocates over TLS through the same port with the
credential the API handed out."""

from __future__ import annotations

import json
import re
import secrets
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from wimz_testkit import Cluster, Coturn, free_port, self_signed, wait_for_port

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def stack():
    work = Path(tempfile.mkdtemp(prefix="wimz-443-"))
    cert, key = self_signed(work, ("api.wimzai.com", "turn.wimzai.com"))
    secret = secrets.token_hex(16)
    coturn = Coturn(static_secret=secret, cert=str(cert), key=str(key))
    turn_port, turn_tls_port, public_port = coturn.port, coturn.tls_port, free_port()
    urls = (f"turn:127.0.0.1:{turn_port}?transport=udp,turn:127.0.0.1:{turn_port}?transport=tcp,"
            f"turns:turn.wimzai.com:{public_port}?transport=tcp")
    cluster = Cluster(1, node_env={"WIMZ_TURN_SECRET": secret, "WIMZ_TURN_URLS": urls, "WIMZ_TURN_REALM": "wimz"})
    node = cluster.nodes["node1"]
    # The recipe as shipped, with this machine's ports, certificate and relay.
    config = (ROOT / "deploy/haproxy/haproxy-443.cfg").read_text()
    config = config.replace("bind :443", f"bind 127.0.0.1:{public_port}")
    config = config.replace("/etc/haproxy/certs/api.wimzai.com.pem", str(work / "bundle.pem"))
    config = config.replace("127.0.0.1:5349", f"127.0.0.1:{turn_tls_port}")
    config = config.replace("abns@wimz-api", f"abns@wimz-api-{public_port}")
    config = re.sub(r"    server relay1 .*\n(    server relay\d .*\n)*", f"    server relay1 127.0.0.1:{node.port}\n", config)
    config = config.replace("    log /dev/log local0\n", "")
    config = config.replace("maxconn 200000", "maxconn 5000")  # this sandbox's 20,000 descriptors
    (work / "haproxy.cfg").write_text(config)
    subprocess.run(["haproxy", "-c", "-q", "-f", work / "haproxy.cfg"], check=True)
    haproxy = subprocess.Popen(["haproxy", "-f", work / "haproxy.cfg", "-db"], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        wait_for_port(public_port)
        time.sleep(1.5)  # HAProxy's first health check of the relay (rise 3 × 1 s would be 3 s)
        yield {"port": public_port, "cert": cert, "cluster": cluster, "urls": urls}
    finally:
        haproxy.terminate()
        haproxy.wait(timeout=10)
        coturn.stop()
        cluster.close()


def https(stack, path: str, token: str | None = None) -> tuple[int, str]:
    """curl with SNI api.wimzai.com to the 443 port, verifying the (self-signed) certificate."""
    port = stack["port"]
    args = ["curl", "-s", "-o", "-", "-w", "\n%{http_code}", "--resolve", f"api.wimzai.com:{port}:127.0.0.1",
            "--cacert", str(stack["cert"]), f"https://api.wimzai.com:{port}{path}"]
    if token:
        args += ["-H", f"Authorization: Bearer {token}"]
    out = subprocess.run(args, capture_output=True, text=True, timeout=30).stdout
    body, _, status = out.rpartition("\n")
    return int(status or 0), body


def allocate_over_tls(port: int, username: str, credential: str) -> bool:
    done = subprocess.run(["turnutils_uclient", "-S", "-t", "-c", "-y", "-I", "-z", "1", "-n", "1", "-m", "1", "-l", "64",
                           "-u", username, "-w", credential, "-p", str(port), "127.0.0.1"],
                          capture_output=True, text=True, timeout=60)
    return done.returncode == 0


def test_turn_over_tls_and_the_api_share_port_443(stack):
    cluster = stack["cluster"]
    devices = cluster.add_devices(1, prefix="tls")
    device, (robot_token, _) = next(iter(devices.items()))
    deadline = time.monotonic() + 10
    while https(stack, "/readyz")[0] != 200 and time.monotonic() < deadline:
        time.sleep(0.2)
    status, body = https(stack, "/api/turn/credentials", robot_token)
    assert status == 200, body
    credentials = json.loads(body)
    # turns: on 443 after the UDP and TCP entries, in the configured order, in both lists.
    assert credentials["urls"] == stack["urls"].split(",")
    assert credentials["ice_servers"][-1]["urls"][-1] == f"turns:turn.wimzai.com:{stack['port']}?transport=tcp"
    # TURN over TLS through the same port allocates with that credential, and not with a wrong one.
    assert allocate_over_tls(stack["port"], credentials["username"], credentials["credential"])
    assert not allocate_over_tls(stack["port"], credentials["username"], "d3Jvbmc=")
    # The API still answers through the port.
    assert https(stack, f"/api/devices/{device}/status", robot_token)[0] == 200
