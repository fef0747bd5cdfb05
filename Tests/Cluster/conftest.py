"""The cluster tests: a real HAProxy (Debian's) in front of real wimz-relay nodes on loopback,
one database in the suite's PostgreSQL, all from the test kit (Tests/testkit/wimz_testkit.py)."""

import tempfile
from pathlib import Path

import pytest

from apns_standin import APNsStandIn, new_p256_key
from wimz_testkit import Cluster, self_signed


@pytest.fixture(scope="module")
def cluster():
    c = Cluster(3, node_env={"WIMZ_TURN_URLS": "turn:127.0.0.1:3478"})
    yield c
    c.close()


@pytest.fixture(scope="module")
def apns():
    """An APNs stand-in (TLS on loopback, a P-256 key of its own); ``relay_env`` is what a relay
    needs to push to it."""
    directory = Path(tempfile.mkdtemp(prefix="wimz-apns-"))
    cert, key = self_signed(directory, ("127.0.0.1",))
    key_path, private = new_p256_key(directory)
    standin = APNsStandIn(public_key=private.public_key(), key_id="KEYSTANDIN", team_id="TEAMSTANDN",
                          topic="com.wimzai.app", cert=cert, key=key).start()
    standin.relay_env = {"WIMZ_APNS_KEY_FILE": str(key_path), "WIMZ_APNS_KEY_ID": standin.key_id,
                         "WIMZ_APNS_TEAM_ID": standin.team_id, "WIMZ_APNS_TOPIC": standin.topic,
                         "WIMZ_APNS_URL": standin.url, "WIMZ_APNS_SANDBOX_URL": standin.url,
                         "WIMZ_APNS_CA_FILE": str(cert)}
    yield standin
    standin.stop()
