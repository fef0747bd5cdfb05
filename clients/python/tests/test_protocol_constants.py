"""The robot library's protocol constants are the relay's (WimzProtocol, printed by
`wimz-relay protocol-constants`): close codes and what they mean for a reconnect, the replayed
events, the quick-reconnect threshold, the bridge's chunk size."""

from __future__ import annotations

import json
import os
import subprocess

from wimz_robot import bridge, client


def relay_constants() -> dict:
    out = subprocess.run([os.environ["WIMZ_RELAY_BIN"], "protocol-constants"], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def test_the_robot_library_agrees_with_the_relay():
    constants = relay_constants()
    codes = {name: entry["code"] for name, entry in constants["close_codes"].items()}
    assert client.CLOSE_GOING_AWAY == codes["goingAway"]
    assert client.CLOSE_RECONNECT_NOW == codes["reconnectNow"]
    assert client.CLOSE_REPLACED == codes["replaced"]
    assert client.CLOSE_REVOKED == codes["revoked"]
    assert client.CLOSE_SLOW_CONSUMER == codes["slowConsumer"]
    assert client.CLOSE_RATE_LIMITED == codes["rateLimited"]
    reconnect = {entry["code"]: entry["reconnect"] for entry in constants["close_codes"].values()}
    # The client's own reconnect rules, code by code, are the relay's classes.
    assert {c for c, r in reconnect.items() if r == "at_once"} == {client.CLOSE_GOING_AWAY, client.CLOSE_RECONNECT_NOW}
    assert {c for c, r in reconnect.items() if r == "slow_backoff"} == {client.CLOSE_SLOW_CONSUMER, client.CLOSE_RATE_LIMITED}
    assert {c for c, r in reconnect.items() if r == "never"} == {client.CLOSE_REVOKED, client.CLOSE_REPLACED}
    assert client.QUICK_RECONNECT_AFTER == constants["limits"]["quick_reconnect_after_seconds"]
    assert client.REPLAYED_EVENTS == frozenset(constants["replayed_events"])
    assert bridge.CHUNK_BYTES == constants["limits"]["robot_http_chunk_bytes"]
    # A request with the largest default body fits in one frame the client accepts.
    assert client.MAX_MESSAGE_BYTES >= constants["limits"]["robot_http_max_body"] * 4 // 3 + 64 * 1024
    assert set(bridge.RELAY_EVENTS) <= set(constants["relay_events"])
