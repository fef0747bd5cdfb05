"""An APNs stand-in for the push tests: HTTP/2 over TLS on loopback (h2 + asyncio on a thread of
its own), speaking the provider API as Apple documents it — `POST /3/device/{token}`, the
provider token checked (ES256 signature with the team's public key, `kid`, `iss`, `iat`), the
topic and push type checked — and answering each device token as a test asks: a list of answers
to give in turn (`(status, reason)`, `("slow", seconds)`, `"reset"` for a reset stream,
`"garbage"` for a non-JSON error body), then 200. Every request is recorded."""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import h2.config
import h2.connection
import h2.events
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature


def b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def new_p256_key(directory: Path) -> tuple[Path, Any]:
    """A fresh `.p8`-style (PKCS #8 PEM) P-256 key in `directory`; returns its path and the key."""
    key = ec.generate_private_key(ec.SECP256R1())
    path = directory / "AuthKey_TEST.p8"
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    return path, key


@dataclass
class Received:
    token: str
    headers: dict[str, str]
    body: dict[str, Any] | None
    jwt: str
    at: float
    answered: int = 0


@dataclass
class APNsStandIn:
    public_key: Any
    key_id: str
    team_id: str
    topic: str
    cert: Path
    key: Path
    port: int = 0
    received: list[Received] = field(default_factory=list)
    answers: dict[str, list[Any]] = field(default_factory=dict)
    jwts: set[str] = field(default_factory=set)

    def start(self) -> "APNsStandIn":
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        assert self._ready.wait(10), "the APNs stand-in did not start"
        return self

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._server.close)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def delivered(self, token: str | None = None) -> list[Received]:
        return [r for r in list(self.received) if r.answered == 200 and (token is None or r.token == token)]

    def wait_for(self, predicate, timeout: float = 10.0) -> list[Received]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate(list(self.received)):
                return list(self.received)
            time.sleep(0.05)
        raise AssertionError(f"the stand-in never saw what was expected; it saw {[(r.token[-6:], r.answered, r.body) for r in self.received]}")

    # -- the server -----------------------------------------------------------------------------

    def _run(self) -> None:
        self._loop = asyncio.new_event_loop()
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(self.cert), str(self.key))
        context.set_alpn_protocols(["h2"])
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._connection, "127.0.0.1", self.port, ssl=context))
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
        conn.initiate_connection()
        writer.write(conn.data_to_send())
        streams: dict[int, dict[str, Any]] = {}
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                for event in conn.receive_data(data):
                    if isinstance(event, h2.events.RequestReceived):
                        streams[event.stream_id] = {"headers": dict(event.headers), "body": b""}
                    elif isinstance(event, h2.events.DataReceived):
                        streams[event.stream_id]["body"] += event.data
                        conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                    elif isinstance(event, h2.events.StreamEnded):
                        stream = streams.pop(event.stream_id)
                        asyncio.ensure_future(self._answer(conn, writer, event.stream_id, stream))
                writer.write(conn.data_to_send())
                await writer.drain()
        except (ConnectionError, ssl.SSLError, h2.exceptions.ProtocolError):
            pass
        finally:
            writer.close()

    async def _answer(self, conn, writer, stream_id: int, stream: dict[str, Any]) -> None:
        headers = stream["headers"]
        path = headers.get(":path", "")
        token = path.rsplit("/", 1)[-1]
        jwt = headers.get("authorization", "").removeprefix("bearer ")
        try:
            body = json.loads(stream["body"])
        except ValueError:
            body = None
        record = Received(token=token, headers=headers, body=body, jwt=jwt, at=time.monotonic())
        self.received.append(record)
        planned = self.answers.get(token) or []
        answer = planned.pop(0) if planned else None
        if isinstance(answer, tuple) and answer[0] == "slow":
            await asyncio.sleep(answer[1])
            answer = None
        status, reason = 200, ""
        problem = self._check(headers, path, jwt, body)
        if problem:
            status, reason = problem
        elif answer == "reset":
            conn.reset_stream(stream_id)
            writer.write(conn.data_to_send())
            return
        elif answer == "garbage":
            status, reason = 500, None
        elif answer is not None:
            status, reason = answer
        record.answered = status
        if status == 200:
            conn.send_headers(stream_id, [(":status", "200"), ("apns-id", str(uuid.uuid4()))], end_stream=True)
        else:
            payload = b"<html>upstream exploded</html>" if reason is None else json.dumps({"reason": reason}).encode()
            conn.send_headers(stream_id, [(":status", str(status)), ("content-length", str(len(payload)))])
            conn.send_data(stream_id, payload, end_stream=True)
        writer.write(conn.data_to_send())

    def _check(self, headers: dict[str, str], path: str, jwt: str, body: Any) -> tuple[int, str] | None:
        if headers.get(":method") != "POST" or not path.startswith("/3/device/"):
            return 404, "BadPath"
        if not self._jwt_ok(jwt):
            return 403, "InvalidProviderToken"
        # Alerts go to the app's topic; Live Activity requests (v1.4) to its .push-type.liveactivity
        # topic, at priority 5 or 10.
        push_type = headers.get("apns-push-type")
        if push_type not in ("alert", "liveactivity"):
            return 400, "InvalidPushType"
        if headers.get("apns-topic") != self.topic + (".push-type.liveactivity" if push_type == "liveactivity" else ""):
            return 400, "TopicDisallowed"
        if push_type == "liveactivity" and headers.get("apns-priority") not in ("5", "10"):
            return 400, "BadPriority"
        if not isinstance(body, dict) or len(json.dumps(body)) > 4096:
            return 400, "PayloadTooLarge" if body else "PayloadEmpty"
        return None

    def _jwt_ok(self, jwt: str) -> bool:
        try:
            header_b64, claims_b64, signature_b64 = jwt.split(".")
            header, claims = json.loads(b64url_decode(header_b64)), json.loads(b64url_decode(claims_b64))
            signature = b64url_decode(signature_b64)
            if header != {"alg": "ES256", "kid": self.key_id} or claims.get("iss") != self.team_id:
                return False
            if abs(int(claims["iat"]) - time.time()) > 3600 or len(signature) != 64:
                return False
            der = encode_dss_signature(int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big"))
            self.public_key.verify(der, f"{header_b64}.{claims_b64}".encode(), ec.ECDSA(hashes.SHA256()))
        except (ValueError, KeyError, InvalidSignature):
            return False
        self.jwts.add(jwt)
        return True
