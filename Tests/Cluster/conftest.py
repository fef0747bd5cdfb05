"""The cluster tests: a real HAProxy (Debian's) in front of real wimz-relay nodes on loopback,
one database in the suite's PostgreSQL. scripts/test.sh exports WIMZ_RELAY_BIN,
WIMZ_MIGRATIONS_DIR and WIMZ_TEST_DATABASE_URL."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "cluster"))

from wimz_cluster import Cluster  # noqa: E402


@pytest.fixture(scope="module")
def cluster():
    c = Cluster(3, admin_url=os.environ["WIMZ_TEST_DATABASE_URL"],
                node_env={"WIMZ_TURN_URLS": "turn:127.0.0.1:3478"})
    yield c
    c.close()
