"""Certificates by ACME, end to end against pebble (Debian's ACME test server, its CA trusted only
inside this test): HAProxy as deploy/haproxy/haproxy.cfg ships it, certbot (Debian's) answering the
HTTP-01 challenge behind HAProxy's port 80, and deploy/certbot/wimz-relay-deploy-hook handing each
certificate to where its name belongs: the API's to HAProxy, the TURN host's to coturn, two
lineages on one host. Issuance of both, a forced renewal of each leaving the other in place, TLS
clients seeing each new certificate through HAProxy and coturn, and a WebSocket opened before the
renewals still delivering events after them. Port 80 serves the challenge and nothing else."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import websockets

from test_haproxy_recipes import local_config
from wimz_testkit import Coturn, Database, RelayNode, free_port, self_signed, wait_for_port

ROOT = Path(__file__).resolve().parents[2]
HOOK = ROOT / "deploy" / "certbot" / "wimz-relay-deploy-hook"
DOMAIN = "api.wimz.test"
TURN_DOMAIN = "turn.wimz.test"


def served_certificate(port: int, cafile: str | None = None, server_name: str = DOMAIN) -> dict:
    """The certificate a TLS client sees on 127.0.0.1:PORT with SNI ``server_name`` (verified
    against ``cafile`` when given, for that name): its serial and issuer."""
    context = ssl.create_default_context(cafile=cafile) if cafile else ssl._create_unverified_context()
    if cafile:
        context.check_hostname = True
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with context.wrap_socket(raw, server_hostname=server_name) as tls:
            der = tls.getpeercert(binary_form=True)
    text = subprocess.run(["openssl", "x509", "-inform", "DER", "-noout", "-serial", "-issuer"], input=der,
                          capture_output=True, check=True).stdout.decode()
    fields = dict(line.split("=", 1) for line in text.strip().splitlines())
    return {"serial": fields["serial"], "issuer": fields["issuer"]}


class Pebble:
    """pebble on loopback with its mock DNS (pebble-challtestsrv: every name is 127.0.0.1), checking
    HTTP-01 challenges on ``http_port``, its own HTTPS listener under a throwaway certificate."""

    def __init__(self, work: Path, http_port: int) -> None:
        self.listener_cert, key = self_signed(work, ("127.0.0.1",))
        self.port, management, dns = free_port(), free_port(), free_port()
        (work / "pebble.json").write_text(json.dumps({"pebble": {
            "listenAddress": f"127.0.0.1:{self.port}", "managementListenAddress": f"127.0.0.1:{management}",
            "certificate": str(self.listener_cert), "privateKey": str(key), "httpPort": http_port,
            "tlsPort": free_port(), "ocspResponderURL": "", "externalAccountBindingRequired": False}}))
        self.dns = subprocess.Popen(["pebble-challtestsrv", "-defaultIPv4", "127.0.0.1", "-defaultIPv6", "",
                                     "-dns01", f"127.0.0.1:{dns}", "-http01", "", "-https01", "", "-tlsalpn01", "",
                                     "-management", f"127.0.0.1:{free_port()}"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.log = work / "pebble.log"
        self.process = subprocess.Popen(["pebble", "-config", str(work / "pebble.json"), "-dnsserver", f"127.0.0.1:{dns}"],
                                        env=dict(os.environ, PEBBLE_VA_NOSLEEP="1", PEBBLE_WFE_NONCEREJECT="0"),
                                        stdout=self.log.open("w"), stderr=subprocess.STDOUT)
        wait_for_port(self.port)
        wait_for_port(management)
        # The root that signs what pebble issues (it makes a new one at every start).
        context = ssl.create_default_context(cafile=str(self.listener_cert))
        with urllib.request.urlopen(f"https://127.0.0.1:{management}/roots/0", context=context, timeout=5) as answer:
            self.root = work / "pebble-root.pem"
            self.root.write_bytes(answer.read())

    @property
    def directory(self) -> str:
        return f"https://127.0.0.1:{self.port}/dir"

    def stop(self) -> None:
        for process in (self.process, self.dns):
            process.terminate()
            process.wait(timeout=10)


@pytest.fixture(scope="module")
def site():
    """A relay behind HAProxy (the shipped recipe, master-worker so a reload is HAProxy's own),
    pebble checking challenges on HAProxy's port 80, and certbot's own folders."""
    work = Path(tempfile.mkdtemp(prefix="wimz-acme-"))
    database = Database(prefix="acme")
    node = RelayNode.started(database)
    ports = {name: free_port() for name in ("public", "plain", "internal", "exporter")}
    config = local_config("haproxy.cfg", work, node.port, ports, free_port())
    certbot_port = free_port()
    config = config.replace("server certbot 127.0.0.1:8402", f"server certbot 127.0.0.1:{certbot_port}")
    (work / "haproxy.cfg").write_text(config)
    hook_env = dict(os.environ, HAPROXY_PEM=str(work / "bundle.pem"), COTURN_CERT_DIR=str(work / "coturn-certs"),
                    COTURN_GROUP=str(os.getgid()), RELAY_TLS_DIR="", API_DOMAIN=DOMAIN, TURN_DOMAIN=TURN_DOMAIN)
    # Before the first issuance HAProxy needs a certificate to start with: the hook's placeholder.
    subprocess.run([str(HOOK), "--placeholder", DOMAIN], env=dict(hook_env, HAPROXY_RELOAD="", COTURN_CERT_DIR=""),
                   check=True)
    haproxy = subprocess.Popen(["haproxy", "-W", "-db", "-f", str(work / "haproxy.cfg")],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_port(ports["public"])
    pebble = Pebble(work, ports["plain"])
    state = {"work": work, "node": node, "ports": ports, "pebble": pebble, "haproxy": haproxy,
             "certbot_port": certbot_port, "coturn": None,
             # coturn starts after the first issuance (it needs the certificate); the renewal reloads it.
             "hook_env": dict(hook_env, HAPROXY_RELOAD=f"kill -USR2 {haproxy.pid}", COTURN_RELOAD="")}
    yield state
    if state["coturn"]:
        state["coturn"].stop()
    pebble.stop()
    haproxy.terminate()
    haproxy.wait(timeout=10)
    node.stop()
    database.drop()


def certbot(site, *arguments: str) -> None:
    work = site["work"]
    done = subprocess.run(
        ["certbot", *arguments, "--non-interactive", "--agree-tos", "--register-unsafely-without-email",
         "--server", site["pebble"].directory, "--config-dir", str(work / "le"), "--work-dir", str(work / "le-work"),
         "--logs-dir", str(work / "le-logs")],
        env=dict(site["hook_env"], REQUESTS_CA_BUNDLE=str(site["pebble"].listener_cert)),
        capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr + site["pebble"].log.read_text()[-2000:]


def plain_status(site, path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{site['ports']['plain']}{path}", timeout=5) as answer:
            return answer.status
    except urllib.error.HTTPError as error:
        return error.code


def wait_for_certificate(port: int, cafile: str, other_than: str | None, timeout: float = 10,
                         server_name: str = DOMAIN) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        try:
            seen = served_certificate(port, cafile, server_name)
            if seen["serial"] != other_than:
                return seen
        except (ssl.SSLError, OSError):
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"no new certificate on port {port}")
        time.sleep(0.2)


def test_port_80_serves_the_acme_challenge_and_nothing_else(site):
    for path in ("/", "/api/turn/credentials", "/ws/app", "/healthz", "/admin/devices", "/metrics"):
        assert plain_status(site, path) == 404, path
    # The challenge path goes to certbot's backend (down between runs: 503, never the relays).
    assert plain_status(site, "/.well-known/acme-challenge/anything") == 503


def serial_of(pem: Path) -> str:
    text = subprocess.run(["openssl", "x509", "-in", str(pem), "-noout", "-serial"], capture_output=True, text=True,
                          check=True).stdout
    return text.strip().split("=", 1)[1]


def test_two_lineages_each_issued_and_renewed_reach_only_their_server_without_dropping_a_socket(site):
    pebble, ports, work = site["pebble"], site["ports"], site["work"]
    assert "CN" in served_certificate(ports["public"])["issuer"]  # the placeholder, self-signed
    issue = ["certonly", "--standalone", "--preferred-challenges", "http", "--http-01-address", "127.0.0.1",
             "--http-01-port", str(site["certbot_port"]), "--deploy-hook", str(HOOK)]
    certbot(site, *issue, "-d", DOMAIN)
    api_first = wait_for_certificate(ports["public"], str(pebble.root), None)
    assert "Pebble" in api_first["issuer"]
    coturn_dir = work / "coturn-certs"
    assert not coturn_dir.exists(), "the API's certificate was handed to coturn"
    # The TURN host's, on the same machine: coturn gets it, HAProxy keeps the API's.
    certbot(site, *issue, "-d", TURN_DOMAIN)
    turn_first = serial_of(coturn_dir / "fullchain.pem")
    assert (coturn_dir / "privkey.pem").stat().st_mode & 0o777 == 0o640
    assert served_certificate(ports["public"], str(pebble.root))["serial"] == api_first["serial"]
    coturn = Coturn(static_secret="acme-test-secret-0123456789", cert=str(coturn_dir / "fullchain.pem"),
                    key=str(coturn_dir / "privkey.pem"))
    site["coturn"] = coturn
    assert served_certificate(coturn.tls_port, None)["serial"] == turn_first

    # A robot and an app through HAProxy's TLS front, opened before the renewals. The event loop
    # runs throughout (the blocking steps in threads), so the sockets answer the relay's pings
    # however long the renewals take.
    robot_token, app_token = site["node"].database.add_device("acme-robot")
    context = ssl.create_default_context(cafile=str(pebble.root))

    async def scenario() -> dict:
        url = f"wss://{DOMAIN}:{ports['public']}"
        robot = await websockets.connect(f"{url}/ws/robot?device_id=acme-robot", ssl=context, host="127.0.0.1",
                                         server_hostname=DOMAIN,
                                         additional_headers={"Authorization": f"Bearer {robot_token}"})
        app = await websockets.connect(f"{url}/ws/app?device_id=acme-robot", ssl=context, host="127.0.0.1",
                                       server_hostname=DOMAIN, additional_headers={"Authorization": f"Bearer {app_token}"})
        assert json.loads(await app.recv())["event"] == "device_status"
        # The renewals: certbot reuses each lineage's stored options and hook (HAProxy reload,
        # coturn's SIGUSR2). (Without a terminal certbot waits up to 8 minutes first, as the
        # timer's renewals do.)
        site["hook_env"]["COTURN_RELOAD"] = f"kill -USR2 {coturn.process.pid}"
        renew = ["renew", "--force-renewal", "--no-random-sleep-on-renew", "--cert-name"]
        await asyncio.to_thread(certbot, site, *renew, DOMAIN)
        api_second = await asyncio.to_thread(wait_for_certificate, ports["public"], str(pebble.root), api_first["serial"])
        assert "Pebble" in api_second["issuer"] and api_second["serial"] != api_first["serial"]
        assert served_certificate(coturn.tls_port, None)["serial"] == turn_first, "the API's renewal reached coturn"
        await asyncio.to_thread(certbot, site, *renew, TURN_DOMAIN)
        turn_second = await asyncio.to_thread(wait_for_certificate, coturn.tls_port, str(pebble.root), turn_first,
                                              server_name=TURN_DOMAIN)
        assert turn_second["serial"] == serial_of(coturn_dir / "fullchain.pem")
        assert served_certificate(ports["public"], str(pebble.root))["serial"] == api_second["serial"], \
            "the TURN host's renewal reached HAProxy"
        # The sockets opened before the renewals still carry events.
        await robot.send(json.dumps({"type": "event", "event": "bark_detected", "data": {"loudness_db": 71}}))
        try:
            while True:
                message = json.loads(await asyncio.wait_for(app.recv(), 10))
                if message.get("event") == "bark_detected":
                    return message
        finally:
            await app.close()
            await robot.close()

    assert asyncio.run(scenario())["data"] == {"loudness_db": 71}


def test_one_certificate_for_both_names_goes_to_both_and_one_for_neither_to_nobody(tmp_path):
    def lineage(*names: str) -> Path:
        folder = tmp_path / "-".join(names).replace("*", "star")
        folder.mkdir()
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                        "-days", "1", "-subj", f"/CN={names[0]}", "-addext",
                        "subjectAltName=" + ",".join(f"DNS:{name}" for name in names),
                        "-keyout", str(folder / "privkey.pem"), "-out", str(folder / "fullchain.pem")],
                       check=True, capture_output=True)
        return folder

    def hook(folder: Path, target: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(HOOK)], capture_output=True, text=True, env=dict(
            os.environ, RENEWED_LINEAGE=str(folder), API_DOMAIN=DOMAIN, TURN_DOMAIN=TURN_DOMAIN,
            HAPROXY_PEM=str(target / "haproxy.pem"), HAPROXY_RELOAD="", COTURN_CERT_DIR=str(target / "coturn"),
            COTURN_GROUP=str(os.getgid()), COTURN_RELOAD="", RELAY_TLS_DIR=""))

    for names in ((DOMAIN, TURN_DOMAIN), ("*.wimz.test",)):
        target = tmp_path / f"both-{len(names)}"
        assert hook(lineage(*names), target).returncode == 0
        serial = serial_of(tmp_path / "-".join(names).replace("*", "star") / "fullchain.pem")
        assert serial_of(target / "haproxy.pem") == serial and serial_of(target / "coturn" / "fullchain.pem") == serial
    target = tmp_path / "neither"
    done = hook(lineage("www.wimz.test"), target)
    assert done.returncode == 1 and "handed to nobody" in done.stderr, done.stderr
    assert not target.exists()


def test_the_coturn_recipes_read_the_certificate_where_the_hook_puts_it():
    hook = HOOK.read_text()
    assert "COTURN_CERT_DIR=/etc/coturn/certs" in hook
    for recipe in sorted((ROOT / "deploy" / "coturn").glob("turnserver-*.conf")):
        lines = recipe.read_text().splitlines()
        assert "cert=/etc/coturn/certs/fullchain.pem" in lines and "pkey=/etc/coturn/certs/privkey.pem" in lines, recipe
