"""The coturn recipes, run for real: each deploy/coturn/turnserver-*.conf (with this machine's
ports and a test secret in place of its certificate and secret lines) refuses a relayed
permission to the operator's own networks — the cloud metadata service, carrier-grade NAT,
IPv6 link-local and IPv4-mapped loopback among them — and grants one to a public peer.
A permission sends nothing to its peer: no packet leaves this machine."""

import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from turn_probe import TurnProbe, rest_credentials
from wimz_testkit import free_port, listening_sockets

ROOT = Path(__file__).resolve().parents[2]
RECIPES = sorted((ROOT / "deploy/coturn").glob("turnserver-*.conf"))
DENY_BLOCK = (ROOT / "deploy/coturn/peer-deny.conf").read_text()
# Lines a test host must replace: its ports, addresses, certificate, secret and log.
REPLACED = ("listening-port", "tls-listening-port", "cert", "pkey", "psql-userdb", "static-auth-secret", "log-file",
            "min-port", "max-port", "external-ip", "listening-ip", "relay-ip", "cli-ip", "cli-port", "cli-password")

REFUSED_V4 = ["169.254.169.254", "100.64.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "127.0.0.1", "0.0.0.0",
              "192.0.2.1", "198.18.0.1", "224.0.0.1", "255.255.255.255"]
REFUSED_V6 = ["fe80::1", "::ffff:127.0.0.1", "::ffff:169.254.169.254", "::1", "fd00::1", "64:ff9b::a9fe:a9fe",
              "2001:db8::1", "2002:a9fe:a9fe::1", "ff02::1"]
PUBLIC_V4 = "8.8.8.8"
PUBLIC_V6 = "2606:4700:4700::1111"


def test_every_recipe_carries_the_deny_block():
    assert len(RECIPES) == 3
    for recipe in RECIPES:
        assert DENY_BLOCK.strip() in recipe.read_text(), f"{recipe.name} lacks deploy/coturn/peer-deny.conf verbatim"


@pytest.fixture(params=RECIPES, ids=lambda p: p.name)
def recipe_server(request):
    """The recipe's coturn on 127.0.0.1 and ::1 (relaying from both), with a static test secret."""
    secret = secrets.token_hex(16)
    cli_password = secrets.token_hex(8)
    # The recipe's way: the CLI's password stored hashed (turnadmin -P).
    hashed = subprocess.run(["turnadmin", "-P", "-p", cli_password], capture_output=True, text=True,
                            check=True).stdout.strip().splitlines()[-1]
    directory = Path(tempfile.mkdtemp(prefix="wimz-recipe-"))
    lines = [line for line in request.param.read_text().splitlines() if line.split("=", 1)[0].strip() not in REPLACED]
    log = directory / "turn.log"
    for _ in range(3):
        # With two listening addresses coturn also listens on port + 1 (RFC 5780's alternate port).
        port = free_port(span=2)
        relay_base = 42000 + secrets.randbelow(15000)
        cli_port = free_port()
        config = directory / "turnserver.conf"
        config.write_text("\n".join(lines + [
            "listening-ip=127.0.0.1", "listening-ip=::1", "relay-ip=127.0.0.1", "relay-ip=::1", f"listening-port={port}",
            "no-tls", f"static-auth-secret={secret}", f"min-port={relay_base}", f"max-port={relay_base + 50}",
            f"log-file={log}", "simple-log", f"pidfile={directory}/turn.pid",
            "cli-ip=127.0.0.1", f"cli-port={cli_port}", f"cli-password={hashed}"]) + "\n")
        log.unlink(missing_ok=True)
        process = subprocess.Popen(["turnserver", "-c", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if _listens(process, port, directory):
            break
        process.kill()
        process.wait(timeout=10)
    else:
        pytest.fail(f"coturn did not listen (3 ports tried): {_log(directory)}")
    yield port, secret, directory, (cli_port, cli_password)
    process.terminate()
    process.wait(timeout=10)
    shutil.rmtree(directory, ignore_errors=True)


def test_recipe_refuses_special_purpose_peers_and_allows_public_ones(recipe_server):
    port, secret, directory, _ = recipe_server
    for family, refused, public in ((4, REFUSED_V4, PUBLIC_V4), (6, REFUSED_V6, PUBLIC_V6)):
        probe = TurnProbe(("127.0.0.1", port), *rest_credentials(secret), family=family)
        try:
            answers = {peer: probe.permit(peer) for peer in refused}
            assert all(status == 403 for status in answers.values()), (answers, _log(directory))
            assert probe.permit(public) == 200, _log(directory)
        finally:
            probe.close()


def test_recipe_refuses_tcp_relays(recipe_server):
    """no-tcp-relay: an RFC 6062 TCP allocation (a proxy to any TCP service) is refused."""
    port, secret, directory, _ = recipe_server
    with pytest.raises(RuntimeError, match="allocation refused"):
        TurnProbe(("127.0.0.1", port), *rest_credentials(secret), relay_transport="tcp")


def test_recipe_cli_takes_the_plain_password_of_its_hashed_one(recipe_server):
    """What the relay does at a removal: log in to the CLI and list a user's sessions."""
    _, _, _, (cli_port, cli_password) = recipe_server
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and ("tcp", "127.0.0.1") not in listening_sockets(cli_port):
        time.sleep(0.05)
    with socket.create_connection(("127.0.0.1", cli_port), timeout=5) as cli:
        def until(marker: bytes) -> bytes:
            out = b""
            while marker not in out:
                chunk = cli.recv(4096)
                assert chunk, out
                out += chunk
            return out
        until(b"Enter password")
        cli.sendall(cli_password.encode() + b"\r\n")
        until(b"> ")
        cli.sendall(b"ps 1795400000:robot-42/17\r\n")
        assert b"Total sessions: 0" in until(b"> ")


def _listens(process: subprocess.Popen, port: int, directory: Path) -> bool:
    """Whether the recipe coturn opened all its listeners on ``port`` within 10 s. UDP and TCP
    open from different threads (the TCP-relay test needs the latter); a port taken meanwhile is
    not fatal to coturn, which retries the bind: False at once then, for another port."""
    wanted = {(protocol, address) for protocol in ("udp", "tcp") for address in ("127.0.0.1", "[::1]")}
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and process.poll() is None and "Cannot bind" not in _log(directory):
        if wanted <= listening_sockets(port):
            return True
        time.sleep(0.05)
    return False


def _log(directory: Path) -> str:
    log = directory / "turn.log"
    return log.read_text(errors="replace")[-3000:] if log.exists() else ""
