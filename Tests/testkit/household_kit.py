"""A household on relay nodes of one database, for the tests of v1.6's timeline and settings: a
device with its robot and owner tokens, members invited and redeemed as the app does, and the
two sockets — on whichever node a test names."""

from __future__ import annotations

import json
import secrets
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from typing import Iterator

import websockets

from wimz_testkit import Database, RelayNode, http_json


@contextmanager
def two_nodes(prefix: str) -> Iterator[tuple[RelayNode, RelayNode]]:
    """Two relay nodes on a database of their own (one store: a cluster), stopped and dropped after."""
    database = Database(prefix=prefix)
    nodes = RelayNode(database, name=f"{prefix}-a"), RelayNode(database, name=f"{prefix}-b")
    try:
        for node in nodes:
            node.start()
        yield nodes
    finally:
        for node in nodes:
            node.stop()
        database.drop()


class Home:
    """One device on `node`'s database: its robot token, an owner's app token and helpers."""

    def __init__(self, node: RelayNode, prefix: str = "home") -> None:
        self.node = node
        self.device = f"{prefix}-{secrets.token_hex(4)}"
        self.robot_token, self.owner = node.database.add_device(self.device)
        self.owner_id = int(node.database.psql(f"SELECT max(id) FROM tokens WHERE device_id = '{self.device}' AND role = 'app'"))

    def join(self, access: str, **fields) -> str:
        """Invites (a guest until an hour from now) and redeems: the new member's token, once every node knows it."""
        until = (datetime.now(timezone.utc) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
        status, invite = http_json(f"{self.node.url}/api/devices/{self.device}/invites", self.owner, "POST",
                                   {"access": access, "label": access, **({"until": until} if access == "guest" else {}), **fields})
        assert status == 201, invite
        status, joined = http_json(f"{self.node.url}/api/pairing", None, "POST", {"code": invite["code"]})
        assert status == 201, joined
        for node in self.node.database.nodes:
            node.wait_known(self.device, joined["token"])
        return str(joined["token"])

    async def robot(self, node: RelayNode | None = None):
        return await websockets.connect(f"ws://127.0.0.1:{(node or self.node).port}/ws/robot?device_id={self.device}",
                                        additional_headers={"Authorization": f"Bearer {self.robot_token}"})

    async def app(self, token: str | None = None, node: RelayNode | None = None):
        ws = await websockets.connect(f"ws://127.0.0.1:{(node or self.node).port}/ws/app?device_id={self.device}"
                                      f"&token={token or self.owner}")
        assert json.loads(await ws.recv())["event"] == "device_status"
        return ws
