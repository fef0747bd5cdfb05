"""The robot library's protocol constants come from ``protocol-constants.json`` (the relay's
WimzProtocol, as ``wimz-relay protocol-constants`` prints it; a Swift test keeps the committed copy
equal to the module). What is checked here needs no relay."""

from __future__ import annotations

import json
from importlib import resources

from wimz_robot import bridge, client, protocol
from wimz_robot.protocol import CloseCode


def shipped() -> dict:
    return json.loads(resources.files("wimz_robot").joinpath("protocol-constants.json").read_text())


def test_close_codes_are_the_relays_and_carry_its_reconnect_rule():
    constants = shipped()
    assert {code.value for code in CloseCode} == {entry["code"] for entry in constants["close_codes"].values()}
    assert {c for c in CloseCode if c.reconnect == "at_once"} == {CloseCode.GOING_AWAY, CloseCode.RECONNECT_NOW}
    assert {c for c in CloseCode if c.reconnect == "slow_backoff"} == {CloseCode.SLOW_CONSUMER, CloseCode.RATE_LIMITED}
    assert {c for c in CloseCode if c.reconnect == "never"} == {CloseCode.REVOKED, CloseCode.REPLACED}
    assert CloseCode.REVOKED == 4003 and CloseCode.RECONNECT_NOW == 1012


def test_limits_events_and_error_codes_come_from_the_file():
    constants = shipped()
    assert protocol.QUICK_RECONNECT_AFTER == constants["limits"]["quick_reconnect_after_seconds"]
    assert client.REPLAYED_EVENTS == frozenset(constants["replayed_events"])
    assert bridge.CHUNK_BYTES == constants["limits"]["robot_http_chunk_bytes"]
    assert bridge.RELAY_EVENTS == frozenset(constants["relay_events"])
    assert protocol.ERROR_STATUS["device_offline"] == 503 and protocol.ERROR_STATUS["missing_token"] == 401
    assert "robot_offline" in protocol.PUSH_KINDS
    # A request with the largest default body fits in one frame the client accepts.
    assert client.MAX_MESSAGE_BYTES >= protocol.ROBOT_HTTP_MAX_BODY * 4 // 3 + 64 * 1024
