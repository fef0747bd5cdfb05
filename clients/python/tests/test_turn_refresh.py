"""The seed's failure reproduced and shown fixed: with short-lived TURN credentials, an
allocation with the first credential fails with 401 once it expired, while one made with
``client.ice_servers()`` at the same moment succeeds — against a real coturn."""

from __future__ import annotations

import asyncio
import time

import pytest
from aioice import turn
from aioice.stun import TransactionFailed

from wimz_testkit import Coturn, RelayNode
from wimz_robot import RobotClient, TurnCredentials

TTL = 20


@pytest.fixture
def turn_stack(database):
    """A coturn reading the database's secrets, and a relay minting TTL-second credentials for it."""
    database.cli("turn-secret", "add")
    coturn = Coturn(database.url)
    relay = RelayNode.started(database, env={
        "WIMZ_TURN_URLS": f"turn:127.0.0.1:{coturn.port}?transport=udp",
        "WIMZ_TURN_TTL": str(TTL), "WIMZ_TURN_TTL_MIN": str(TTL),
    })
    yield relay, coturn
    relay.stop()
    coturn.stop()


async def allocate(port: int, username: str, password: str) -> None:
    """A real TURN allocation through aioice (what aiortc does for a peer connection)."""
    transport, _ = await turn.create_turn_endpoint(asyncio.DatagramProtocol, ("127.0.0.1", port),
                                                   username=username, password=password, transport="udp")
    transport.close()


def turn_entry(servers) -> tuple[str, str]:
    entry = next(s for s in servers if s.username)
    return entry.username, entry.credential


async def test_ice_servers_stay_fresh_past_the_first_credentials_expiry(turn_stack, device):
    relay, coturn = turn_stack
    device_id, robot_token, _ = device
    async with RobotClient(relay.url, device_id, robot_token) as client:
        await client.wait_connected(timeout=10)
        started = time.monotonic()
        first = await client.turn_credentials()
        assert first.ttl == TTL
        await allocate(coturn.port, first.username, first.credential)  # valid now

        await asyncio.sleep(30 - (time.monotonic() - started))
        with pytest.raises(TransactionFailed) as failed:
            await allocate(coturn.port, first.username, first.credential)
        assert "401" in str(failed.value)  # the seed's "STUN transaction failed (401)"

        servers = await client.ice_servers()
        username, credential = turn_entry(servers)
        assert username != first.username
        await allocate(coturn.port, username, credential)
        assert servers[0].urls == [f"stun:127.0.0.1:{coturn.port}"]


async def test_credentials_are_fetched_over_http_when_no_push_came(turn_stack, device):
    """Without the socket (no pushes), the client fetches from /api/turn/credentials and
    fetches again once the credential passes refresh_at."""
    relay, coturn = turn_stack
    device_id, robot_token, _ = device
    client = RobotClient(relay.url, device_id, robot_token)  # never started: no socket
    first = await client.turn_credentials()
    assert first is await client.turn_credentials()  # fresh: no second fetch
    await asyncio.sleep((first.refresh_at - first.refresh_at.now(first.refresh_at.tzinfo)).total_seconds() + 1.1)
    second = await client.turn_credentials()
    assert second.username != first.username and second.is_fresh()
    await allocate(coturn.port, second.username, second.credential)
    fetches = [line for line in relay.lines if "/api/turn/credentials" in line and '"status":200' in line]
    assert len(fetches) == 2


def test_credentials_parse_the_endpoint_body():
    body = {"urls": ["turn:t:3478?transport=udp"], "username": "1795400000:dev.robot", "credential": "c2VjcmV0",
            "ttl": 600, "expires_at": "2026-11-23T04:13:20Z", "refresh_at": "2026-11-23T04:08:20Z",
            "ice_servers": [{"urls": ["stun:t:3478"]},
                            {"urls": ["turn:t:3478?transport=udp"], "username": "1795400000:dev.robot",
                             "credential": "c2VjcmV0"}]}
    credentials = TurnCredentials.from_json(body)
    assert credentials.expires_at.isoformat() == "2026-11-23T04:13:20+00:00"
    servers = credentials.to_rtc_ice_servers()
    assert [s.urls for s in servers] == [["stun:t:3478"], ["turn:t:3478?transport=udp"]]
    assert servers[1].username == "1795400000:dev.robot" and servers[0].username is None
