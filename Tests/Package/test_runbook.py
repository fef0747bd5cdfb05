"""docs/operations.md's runbook, run as it is written, on a clean Debian 12 root with Debian's own
PostgreSQL 15 as it installs (peer authentication on the local socket, scram over TCP): install,
the first device, coturn on the same host, HAProxy with the API's certificate by ACME, a backup, the database lost and restored onto a fresh server, an upgrade to a
release whose migration alters tables as the service role, and a roll back.

Every block of the page marked `<!-- runbook: NAME -->` is read from the Markdown, so a change to
the docs changes what runs here; each command runs in the root exactly as written but for these
stand-ins, which the page states too:
- `sudo CMD` runs CMD as root, `sudo -u USER CMD` as `runuser -u USER -- CMD` (the root has no sudo);
- systemd can't be PID 1 here: `systemctl` is Tests/Package/systemctl-stand-in.sh, which runs
  the units' own commands as their unit files say (and starts Debian's clusters for PostgreSQL);
- apt-get asks before it installs dependencies: the root's apt answers yes (APT::Get::Assume-Yes)
  and keeps a configuration file that is already there;
- the sandbox's 20,000 descriptors are too few for the HAProxy recipe's maxconn: /etc/default/haproxy
  caps it (-n 5000);
- `sudoedit` opens an editor: the settings this test needs are already right (the setup wrote
  WIMZ_DATABASE_URL; the example's TURN URLs serve), so it is skipped;
- the `.deb` and the dump a block names stand for the package under test and the backup made;
- the root runs in a network namespace of its own (its PostgreSQL on 5432 and relay on 8080 meet
  nothing of the host's), so the packages its `apt-get install` lines need are downloaded into
  its apt cache first, over the host's network.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from debian_root import DebianRoot
from wimz_testkit import self_signed
from test_deb import deb_path

ROOT = Path(__file__).resolve().parents[2]
RUNBOOK = ROOT / "docs" / "operations.md"
STAND_IN = Path(__file__).with_name("systemctl-stand-in.sh")
PUBLIC_ADDRESS = "203.0.113.10"


def package_version() -> str:
    """The version of the package under test, as its control file says."""
    return subprocess.run(["dpkg-deb", "-f", str(deb_path()), "Version"], capture_output=True, text=True,
                          check=True).stdout.strip()


def runbook_blocks(text: str) -> dict[str, list[str]]:
    """NAME → the commands of each ```sh block under a `<!-- runbook: NAME -->` line: continuation
    lines joined, comment lines dropped, a trailing comment (two spaces, then #) cut off."""
    blocks: dict[str, list[str]] = {}
    for name, body in re.findall(r"^<!-- runbook: ([\w ]+) -->\n```sh\n(.*?)^```$", text, re.M | re.S):
        commands: list[str] = []
        for line in body.replace("\\\n", " ").splitlines():
            line = re.sub(r"\s{2,}#.*$", "", line).strip()
            if line and not line.startswith("#"):
                commands.append(line)
        blocks[name] = commands
    return blocks


def test_the_runbook_reader_reads_blocks_as_written():
    text = ("<!-- runbook: demo -->\n```sh\nsudo a --x 'q # not a comment'  # a comment\n"
            "# a comment line\nb \\\n    --long\n```\n<!-- runbook: other -->\n```sh\nc\n```\n")
    assert runbook_blocks(text) == {"demo": ["sudo a --x 'q # not a comment'", "b      --long"], "other": ["c"]}
    assert set(runbook_blocks(RUNBOOK.read_text())) >= {"install", "first device", "coturn", "certificates", "backup",
                                                        "restore", "upgrade", "roll back"}


class RunbookHost:
    """A Debian 12 root in a network namespace of its own, systemctl stood in for."""

    def __init__(self, base: Path) -> None:
        self.netns = f"wimz-runbook-{secrets.token_hex(3)}"
        subprocess.run(["ip", "netns", "add", self.netns], check=True)
        subprocess.run(["ip", "netns", "exec", self.netns, "ip", "link", "set", "lo", "up"], check=True)
        # The host's network card, with the runbook's example public address for coturn to listen
        # and relay on: one end of a veth pair, whose other end stays down and unaddressed, so
        # nothing leaves the namespace.
        card = f"wrb{self.netns[-6:]}"
        subprocess.run(["ip", "link", "add", f"{card}h", "type", "veth", "peer", "name", card, "netns", self.netns], check=True)
        for step in (["ip", "addr", "add", f"{PUBLIC_ADDRESS}/24", "dev", card], ["ip", "link", "set", card, "up"]):
            subprocess.run(["ip", "netns", "exec", self.netns, *step], check=True)
        self.root, seconds = DebianRoot.bootstrap(Path(tempfile.mkdtemp(prefix="runbook-root-", dir=base)) / "root")
        print(f"a clean Debian 12 minbase root: {seconds:.0f} s")
        self.root.file("/run/systemd/system").mkdir(parents=True)
        # Where Debian's systemd puts them: maintainer scripts look for an init (invoke-rc.d) and
        # run systemctl from a PATH without /usr/sbin (pg_createcluster).
        for path, content in (("/usr/bin/systemctl", STAND_IN.read_bytes()),
                              ("/sbin/init", b"#!/bin/sh\n# systemd on a server; nothing is PID 1 in this root.\nexit 1\n")):
            self.root.file(path).write_bytes(content)
            self.root.file(path).chmod(0o755)
        # The operator's answers: yes to apt, keep a configuration file already there.
        self.root.file("/etc/apt/apt.conf.d/90runbook-answers").write_text(
            'APT::Get::Assume-Yes "true";\nDpkg::Options { "--force-confdef"; "--force-confold"; };\n')
        # This sandbox allows 20,000 descriptors, too few for the HAProxy recipe's maxconn 200000
        # (HAProxy refuses to start below its limits): the place Debian gives for HAProxy's extra
        # options caps it, as an operator on such a host would.
        self.root.file("/etc/default/haproxy").write_text('EXTRAOPTS="-S /run/haproxy-master.sock -n 5000"\n')
        self.deb = f"/root/{deb_path().name}"
        self.root.file(self.deb).write_bytes(deb_path().read_bytes())
        # Over the host's network, once: what the runbook's apt-get lines will install, and curl.
        self.root.run("apt-get", "install", "-y", "-q", "--download-only", self.deb, "postgresql", "postgresql-client",
                      "coturn", "haproxy", "certbot")
        self.root.run("apt-get", "install", "-y", "-q", "curl")

    def run(self, command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """``command`` through sh in the root, inside the namespace, as root, from /root."""
        argv = ["ip", "netns", "exec", self.netns, *self.root.command("sh", "-c", f"cd /root && {command}")]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        if check and done.returncode != 0:
            raise AssertionError(f"{command}: exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}\n"
                                 + self.logs())
        return done

    def logs(self) -> str:
        """The relay's output and what systemctl was asked, for a failure's message."""
        found = []
        for name in ("/var/log/wimz-relay.service.log", "/var/log/coturn.service.log", "/var/log/haproxy.service.log",
                     "/var/log/systemctl-calls"):
            log = self.root.file(name)
            found.append(f"{name}:\n" + (log.read_text()[-3000:] if log.exists() else "(none)"))
        return "\n".join(found)

    def cli(self, arguments: str) -> str:
        """The CLI as the service, the way the runbook's blocks call it."""
        return self.run(f"runuser -u wimz-relay -- sh -c 'set -a; . /etc/wimz-relay/wimz-relay.env; exec wimz-relay {arguments}'").stdout

    def psql(self, sql: str) -> str:
        return self.run(f"runuser -u postgres -- psql -X -qtA -d wimz -c {shlex.quote(sql)}").stdout.strip()

    def python(self, script: str, *args: str) -> str:
        """``script`` run by this test's Python inside the namespace (the test kits importable);
        its output."""
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).parent), str(ROOT / "Tests/testkit")]))
        done = subprocess.run(["ip", "netns", "exec", self.netns, sys.executable, "-c", script, *args],
                              capture_output=True, text=True, timeout=60, cwd=Path(__file__).parent, env=env)
        assert done.returncode == 0, done.stdout + done.stderr + self.logs()
        return done.stdout

    def pair(self, device: str, robot_token: str, app_token: str) -> dict:
        """A robot and an app paired through the root's relay (a client inside the namespace)."""
        script = ("import asyncio, json, sys; from test_deb import _pair; "
                  "print(json.dumps(asyncio.run(_pair('http://127.0.0.1:8080', *sys.argv[1:]))))")
        return json.loads(self.python(script, device, robot_token, app_token).splitlines()[-1])

    def turn_allocation(self, robot_token: str) -> int:
        """A TURN allocation at the root's coturn with the credential the relay issues the robot,
        then a permission for a public peer (nothing is sent to it): the permission's status."""
        script = ("import json, sys, urllib.request; from turn_probe import TurnProbe\n"
                  "request = urllib.request.Request('http://127.0.0.1:8080/api/turn/credentials',"
                  " headers={'Authorization': 'Bearer ' + sys.argv[1]})\n"
                  "turn = json.load(urllib.request.urlopen(request, timeout=5))\n"
                  f"probe = TurnProbe(('{PUBLIC_ADDRESS}', 3478), turn['username'], turn['credential'])\n"
                  "print(probe.permit('8.8.8.8')); probe.close()\n")
        return int(self.python(script, robot_token).split()[-1])

    def start_pebble(self) -> None:
        """pebble, Debian's ACME test server, in the namespace with its mock DNS (every name is the
        host's public address), checking HTTP-01 on port 80; certbot in the root pointed at it and
        its first-run questions answered (root's ~/.config/letsencrypt/cli.ini)."""
        work = Path(tempfile.mkdtemp(prefix="pebble-", dir=self.root.path.parent))
        cert, key = self_signed(work, ("127.0.0.1",))
        (work / "pebble.json").write_text(json.dumps({"pebble": {
            "listenAddress": "127.0.0.1:14000", "managementListenAddress": "127.0.0.1:15000", "certificate": str(cert),
            "privateKey": str(key), "httpPort": 80, "tlsPort": 5001, "ocspResponderURL": "",
            "externalAccountBindingRequired": False}}))
        in_namespace = ["ip", "netns", "exec", self.netns]
        self.pebble = [
            subprocess.Popen([*in_namespace, "pebble-challtestsrv", "-defaultIPv4", PUBLIC_ADDRESS, "-defaultIPv6", "",
                              "-dns01", "127.0.0.1:8053", "-http01", "", "-https01", "", "-tlsalpn01", "",
                              "-management", "127.0.0.1:8055"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
            subprocess.Popen([*in_namespace, "pebble", "-config", str(work / "pebble.json"), "-dnsserver", "127.0.0.1:8053"],
                             env=dict(os.environ, PEBBLE_VA_NOSLEEP="1", PEBBLE_WFE_NONCEREJECT="0"),
                             stdout=(work / "pebble.log").open("w"), stderr=subprocess.STDOUT)]
        # root's own cli.ini (the package's /etc/letsencrypt/cli.ini is a conffile).
        self.root.file("/root/.config/letsencrypt").mkdir(parents=True, exist_ok=True)
        self.root.file("/root/.config/letsencrypt/cli.ini").write_text(
            "server = https://127.0.0.1:14000/dir\nno-verify-ssl = true\nagree-tos = true\n"
            "register-unsafely-without-email = true\nnon-interactive = true\n")
        self.run("for i in $(seq 100); do curl -skf https://127.0.0.1:14000/dir >/dev/null && exit 0; sleep 0.1; done; exit 1")

    def served_certificate(self) -> tuple[str, int]:
        """The issuer of the certificate HAProxy serves for api.wimzai.com on the host's public
        address, and the status of /healthz through it."""
        script = ("import socket, ssl, subprocess\n"
                  "context = ssl._create_unverified_context()\n"
                  f"raw = socket.create_connection(('{PUBLIC_ADDRESS}', 443), timeout=5)\n"
                  "tls = context.wrap_socket(raw, server_hostname='api.wimzai.com')\n"
                  "der = tls.getpeercert(binary_form=True)\n"
                  "tls.sendall(b'GET /healthz HTTP/1.1\\r\\nHost: api.wimzai.com\\r\\nConnection: close\\r\\n\\r\\n')\n"
                  "status = tls.recv(64).split()[1].decode()\n"
                  "issuer = subprocess.run(['openssl', 'x509', '-inform', 'DER', '-noout', '-issuer'], input=der,"
                  " capture_output=True).stdout.decode().strip()\n"
                  "print(status, issuer)\n")
        status, issuer = self.python(script).strip().split(" ", 1)
        return issuer, int(status)

    def close(self) -> None:
        for process in getattr(self, "pebble", []):
            process.terminate()
            process.wait(timeout=10)
        # Whatever runs from the root (the relay, PostgreSQL) goes with it, then the root.
        for proc in Path("/proc").iterdir():
            if proc.name.isdigit():
                try:
                    if os.readlink(proc / "root") == str(self.root.path):
                        os.kill(int(proc.name), 9)
                except OSError:
                    pass
        subprocess.run(["ip", "netns", "delete", self.netns], check=False)
        shutil.rmtree(self.root.path.parent, ignore_errors=True)


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    base = Path(os.environ.get("WIMZ_TEST_WORKDIR") or tmp_path_factory.mktemp("runbook"))
    made = RunbookHost(base)
    yield made
    made.close()


def run_block(host: RunbookHost, name: str, deb: str | None = None, dump: str | None = None) -> list[str]:
    """Runs the runbook's block NAME as written (with the stand-ins of this module's docstring);
    each command's output."""
    outputs = []
    for command in runbook_blocks(RUNBOOK.read_text())[name]:
        if command.startswith("sudoedit "):
            continue
        command = re.sub(r"^sudo -u (\S+) ", r"runuser -u \1 -- ", command)
        command = re.sub(r"^sudo ", "", command)
        command = re.sub(r"\./wimz-relay_\S+_amd64\.deb", deb or host.deb, command)
        if dump:
            command = re.sub(r"\bwimz-\d{8}T\d{6}Z\.dump\b", dump, command)
        done = host.run(command)
        if command.startswith("curl") and "/readyz" in command:
            assert json.loads(done.stdout) == {"status": "ready"}, done.stdout
        outputs.append(done.stdout)
    return outputs


def test_install_then_the_first_device_pairs(host):
    run_block(host, "install")
    # Debian's PostgreSQL as it installed: root is not let in as postgres over the local socket
    # (peer), which is why the setup runs psql as the postgres user.
    refused = host.run("psql -X 'host=/var/run/postgresql user=postgres' -c 'SELECT 1'", check=False)
    assert refused.returncode != 0 and "Peer authentication failed" in refused.stderr, refused.stderr
    url = re.search(r"^WIMZ_DATABASE_URL=(.*)$", host.root.file("/etc/wimz-relay/wimz-relay.env").read_text(), re.M)[1]
    assert re.fullmatch(r"postgresql://wimz_relay:[A-Za-z0-9]{32}@localhost/wimz", url), url
    assert host.root.stat("/etc/wimz-relay/coturn-userdb") == ("root", "root", "600")
    assert host.psql("SELECT has_table_privilege('coturn', 'turn_secret', 'SELECT'), "
                     "has_table_privilege('coturn', 'tokens', 'SELECT')") == "t|f"
    outputs = run_block(host, "first device")
    host.tokens = {"robot": outputs[1].split()[-1], "app": outputs[2].split()[-1]}  # type: ignore[attr-defined]
    assert host.pair("robot-42", host.tokens["robot"], host.tokens["app"])["data"] == {"confidence": 0.9}  # type: ignore[attr-defined]


def test_coturn_on_the_same_host_allocates_with_the_relays_credentials(host):
    run_block(host, "coturn")
    assert host.root.stat("/etc/turnserver.conf") == ("root", "turnserver", "640")
    assert host.root.stat("/etc/wimz-relay/turn-cli-password") == ("root", "wimz-relay", "640")
    env = host.root.file("/etc/wimz-relay/wimz-relay.env").read_text()
    assert "\nWIMZ_TURN_ADMIN=127.0.0.1:5766\n" in env and "turn:turn.wimzai.com:3478?transport=udp" in env
    assert '"turn_admin_unset"' not in host.root.file("/var/log/wimz-relay.service.log").read_text().split('"listening"')[-1]
    assert host.turn_allocation(host.tokens["robot"]) == 200  # type: ignore[attr-defined]


def test_haproxy_gets_the_apis_certificate_from_the_acme_server(host):
    host.start_pebble()
    run_block(host, "certificates")
    assert host.root.stat("/etc/haproxy/certs/api.wimzai.com.pem") == ("root", "root", "600")
    issuer, health = host.served_certificate()
    assert "Pebble" in issuer and health == 200, (issuer, health)
    # The API's certificate reached HAProxy only: coturn keeps what it had (none: no TURN name).
    assert not host.root.file("/etc/coturn/certs/fullchain.pem").exists()


def test_the_database_lost_is_restored_from_the_backup_onto_a_fresh_server(host):
    run_block(host, "backup")
    dumps = sorted(host.root.file("/var/lib/wimz-relay/backups").glob("wimz-*.dump"))
    assert len(dumps) == 1 and dumps[0].read_bytes()[:5] == b"PGDMP", dumps
    password_before = host.root.file("/etc/wimz-relay/wimz-relay.env").read_text()

    # The database server is lost: its cluster, roles and package gone. The relay host keeps its
    # env file (WIMZ_DATABASE_URL and its password) and the backup.
    host.run("pg_dropcluster --stop 15 main && apt-get purge -y -q postgresql postgresql-15 && rm -rf /var/lib/postgresql/15")
    assert host.run("curl -s http://127.0.0.1:8080/readyz", check=False).stdout != '{"status":"ready"}'

    run_block(host, "restore", dump=f"/var/lib/wimz-relay/backups/{dumps[0].name}")
    assert host.root.file("/etc/wimz-relay/wimz-relay.env").read_text() == password_before, "the password moved"
    # Everything the relay migrates is its own again, not postgres's.
    assert host.psql("SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND tableowner <> 'wimz_relay'") == "0"
    assert host.psql("SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
                     "WHERE n.nspname = 'public' AND pg_get_userbyid(p.proowner) <> 'wimz_relay'") == "0"
    assert host.psql("SELECT has_table_privilege('coturn', 'turn_secret', 'SELECT')") == "t"
    # The old tokens pair on the restored database, and coturn reads its secrets again as coturn.
    assert host.pair("robot-42", host.tokens["robot"], host.tokens["app"])["data"] == {"confidence": 0.9}  # type: ignore[attr-defined]
    assert host.turn_allocation(host.tokens["robot"]) == 200  # type: ignore[attr-defined]


def _next_release(host: RunbookHost, tmp_path: Path) -> str:
    """The package as the next release (its version +next) whose migration alters tables, drops
    and makes a trigger and replaces a function, as later releases' migrations do; its path in the root."""
    unpacked = tmp_path / "next"
    subprocess.run(["dpkg-deb", "-R", str(deb_path()), str(unpacked)], check=True)
    (unpacked / "usr/share/wimz-relay/migrations/0999_next_release.sql").write_text(
        "ALTER TABLE devices ADD COLUMN next_release_note text;\n"
        "ALTER TABLE tokens ALTER COLUMN label SET DEFAULT '';\n"
        "DROP TRIGGER devices_notify ON devices;\n"
        "CREATE TRIGGER devices_notify AFTER INSERT OR UPDATE OF disabled_at ON devices\n"
        "    FOR EACH ROW EXECUTE FUNCTION wimz_notify_device();\n"
        "ALTER FUNCTION wimz_notify_device() SET search_path = public;\n"
        "CREATE TABLE next_release_table (id bigint PRIMARY KEY);\n")
    control = unpacked / "DEBIAN/control"
    version = package_version()
    control.write_text(control.read_text().replace(f"Version: {version}\n", f"Version: {version}+next\n"))
    name = f"/root/wimz-relay_{version}+next_amd64.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "-z1", "-b", str(unpacked), str(host.root.file(name))],
                   check=True, capture_output=True)
    return name


def test_an_upgrade_migrates_as_the_service_role_and_a_roll_back_serves_on(host, tmp_path):
    run_block(host, "upgrade", deb=_next_release(host, tmp_path))
    assert host.run("dpkg-query -W -f '${Version}' wimz-relay").stdout == f"{package_version()}+next"
    assert host.psql("SELECT version FROM schema_migrations ORDER BY version DESC LIMIT 1") == "999"
    assert host.psql("SELECT tableowner FROM pg_tables WHERE tablename = 'next_release_table'") == "wimz_relay"
    assert host.pair("robot-42", host.tokens["robot"], host.tokens["app"])["data"] == {"confidence": 0.9}  # type: ignore[attr-defined]

    # Back to the release before: it serves the newer schema, whose floor it meets.
    run_block(host, "roll back")
    assert host.run("dpkg-query -W -f '${Version}' wimz-relay").stdout == package_version()
    assert "999" in host.cli("migrate")  # "…migrations this binary does not know: [999]"
    assert host.pair("robot-42", host.tokens["robot"], host.tokens["app"])["data"] == {"confidence": 0.9}  # type: ignore[attr-defined]
