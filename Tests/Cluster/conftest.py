"""The cluster tests: a real HAProxy (Debian's) in front of real wimz-relay nodes on loopback,
one database in the suite's PostgreSQL, all from the test kit (Tests/testkit/wimz_testkit.py)."""

import pytest

from wimz_testkit import Cluster


@pytest.fixture(scope="module")
def cluster():
    c = Cluster(3, node_env={"WIMZ_TURN_URLS": "turn:127.0.0.1:3478"})
    yield c
    c.close()
