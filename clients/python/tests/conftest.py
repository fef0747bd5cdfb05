"""Real components for the robot library's tests, from the repository's test kit
(Tests/testkit/wimz_testkit.py): the wimz-relay daemon built by scripts/test.sh, a fresh
database in the suite's PostgreSQL cluster, a real coturn, and the APNs stand-in (HTTP/2 + TLS,
the provider token verified with the key's public half) with a relay that pushes to it."""

from __future__ import annotations

import json
import secrets
import tempfile
from pathlib import Path

import pytest

from apns_standin import APNsStandIn, new_p256_key
from wimz_testkit import Database, RelayNode, self_signed

TOPIC = "com.wimzai.app"
INTERVAL = 2


@pytest.fixture
def database():
    db = Database(prefix="py")
    yield db
    db.drop()


@pytest.fixture
def device(database):
    """(device id, robot token, app token) of a fresh device."""
    robot, app = database.add_device("robot-1")
    return "robot-1", robot, app


@pytest.fixture
def relay(database):
    r = RelayNode.started(database)
    yield r
    r.stop()


@pytest.fixture
def apns():
    directory = Path(tempfile.mkdtemp(prefix="wimz-apns-"))
    cert, key = self_signed(directory, ("127.0.0.1",))
    key_path, private = new_p256_key(directory)
    standin = APNsStandIn(public_key=private.public_key(), key_id="KEY1234567", team_id="TEAM123456", topic=TOPIC,
                          cert=cert, key=key).start()
    standin.key_path, standin.ca = key_path, cert
    yield standin
    standin.stop()


def push_env(apns, **extra: str) -> dict[str, str]:
    return {"WIMZ_APNS_KEY_FILE": str(apns.key_path), "WIMZ_APNS_KEY_ID": apns.key_id, "WIMZ_APNS_TEAM_ID": apns.team_id,
            "WIMZ_APNS_TOPIC": TOPIC, "WIMZ_APNS_URL": apns.url, "WIMZ_APNS_SANDBOX_URL": apns.url,
            "WIMZ_APNS_CA_FILE": str(apns.ca), "WIMZ_PUSH_INTERVAL": str(INTERVAL), **extra}


@pytest.fixture
def pushing(database, apns):
    relay = RelayNode.started(database, env=push_env(apns))
    yield relay
    relay.stop()


def phone() -> str:
    return secrets.token_hex(32)


def event(name: str, **data) -> str:
    """A robot's event frame."""
    return json.dumps({"type": "event", "event": name, "data": data, "timestamp": "2026-11-24T07:00:00Z"})
