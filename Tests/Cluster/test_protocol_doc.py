"""docs/protocol.md covers the protocol as built: every HTTP endpoint of the OpenAPI document
(which the route table is held to) and every frame type and relay event the relay speaks."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROTOCOL = (ROOT / "docs" / "protocol.md").read_text()


def test_every_endpoint_is_in_the_protocol_document():
    paths = json.loads((ROOT / "docs" / "openapi.json").read_text())["paths"]
    missing = []
    for path in paths:
        # Written in full, or (for a device's sub-resources) from its last literal segment on,
        # as the document abbreviates `/api/devices/{device_id}/…`.
        tail = re.search(r"/[a-z-]+(/\{[a-z_+]+\})?$", path)
        if path not in PROTOCOL and not (tail and f"/{tail.group(0).lstrip('/')}" in PROTOCOL):
            missing.append(path)
    assert missing == []


def test_every_frame_type_and_relay_event_is_in_the_protocol_document():
    source = (ROOT / "clients/swift/Sources/WimzProtocol/WimzProtocol.swift").read_text()
    names = set()
    for block in ("MessageType", "RelayEventName"):
        body = re.search(rf"enum {block} \{{(.*?)\n    \}}", source, re.DOTALL)
        assert body, block
        names |= set(re.findall(r'static let \w+ = "([a-z_]+)"', body.group(1)))
    assert {"command", "http_request", "device_status", "turn_credentials"} <= names
    assert sorted(n for n in names if f'"{n}"' not in PROTOCOL and f"`{n}`" not in PROTOCOL) == []
