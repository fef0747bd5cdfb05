"""Early answers reach a client that is still sending (docs/protocol.md "HTTP", early answers): the relay
refuses a request from its head (413, 401, 403, 429, 400) before the body is in, and a client that
writes its whole body before it reads anything — Python's urllib does — must still get that
answer, never a reset. Each case runs many times with both cores kept busy by other processes,
the conditions under which a plain close lost the answer to a broken pipe."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from wimz_testkit import RelayNode

ROUNDS = 12
MEBIBYTE = 1 << 20


@pytest.fixture
def busy_cores() -> Iterator[None]:
    """Every core spinning in another process for the length of the test (bounded: killed after)."""
    spinners = [subprocess.Popen([sys.executable, "-c", "import time\nend = time.time() + 600\nwhile time.time() < end: pass"])
                for _ in range(os.cpu_count() or 2)]
    yield
    for spinner in spinners:
        spinner.kill()
        spinner.wait()


@pytest.fixture
def strict_relay(database):
    """A relay that slows a failing address after 16 failures (the 429 case)."""
    r = RelayNode.started(database, env={"WIMZ_AUTH_FAILURE_BURST": "16", "WIMZ_AUTH_FAILURE_RATE": "0.01"})
    yield r
    r.stop()


def urllib_status(url: str, method: str, token: str | None, body: bytes) -> tuple[int, str]:
    """urllib's way: the whole body written, then the answer read. (status, error code)."""
    request = urllib.request.Request(url, data=body, method=method, headers={"Content-Type": "application/octet-stream"})
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, ""
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())["error"]


def raw_status(port: int, head: bytes, body: bytes) -> tuple[int, str]:
    """A head the relay refuses as malformed, then a body nobody announced properly, all written
    before anything is read; the answer must still be there, followed by the relay's FIN."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(head + body)
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    status_line, _, rest = answer.partition(b"\r\n")
    return int(status_line.split()[1]), json.loads(rest.partition(b"\r\n\r\n")[2])["error"]


def test_every_early_answer_reaches_a_client_still_writing_its_body(strict_relay, device, busy_cores):
    device_id, robot_token, app_token = device
    robot_api = f"{strict_relay.url}/api/devices/{device_id}/robot/standin/echo"
    over = os.urandom(MEBIBYTE + 1)  # one byte over the robot API's limit
    body = os.urandom(MEBIBYTE)
    for _ in range(ROUNDS):
        assert urllib_status(robot_api, "PUT", app_token, over) == (413, "too_large")
        assert urllib_status(robot_api, "PUT", robot_token, body) == (403, "wrong_role")
        assert raw_status(strict_relay.port, b"POST /api/devices HTTP/1.1\r\nHost: relay\r\nContent-Length: ten\r\n\r\n",
                          body) == (400, "bad_request")
    # Failing authentications (the 403s above count too): 401 until the address is slowed, then
    # 429, each with the body unread.
    answers = [urllib_status(robot_api, "PUT", "wimz_a_" + "0" * 43, body) for _ in range(ROUNDS)]
    assert answers[0] == (401, "unknown_token") and answers[-1] == (429, "rate_limited")
    assert set(answers) == {(401, "unknown_token"), (429, "rate_limited")}
