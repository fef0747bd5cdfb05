"""Real components for the robot library's tests, from the repository's test kit
(Tests/testkit/wimz_testkit.py): the wimz-relay daemon built by scripts/test.sh, a fresh
database in the suite's PostgreSQL cluster, and a real coturn."""

from __future__ import annotations

import pytest

from wimz_testkit import Database, RelayNode


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
