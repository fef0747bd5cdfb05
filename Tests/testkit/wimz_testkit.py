"""The one test kit for everything Python that needs real components: a fresh database in the
suite's PostgreSQL, ``wimz-relay serve`` nodes, a real HAProxy in front of several, and a real
coturn. Used by the robot library's tests (clients/python/tests), the cluster tests
(Tests/Cluster), the cluster benchmark and scripts/cluster.sh.

scripts/test.sh exports what it needs: WIMZ_RELAY_BIN, WIMZ_MIGRATIONS_DIR and
WIMZ_TEST_DATABASE_URL (a libpq conninfo with dbname=postgres)."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path


def env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise RuntimeError(f"{name} is not set: run the suite with scripts/test.sh")
    return value


def free_port(span: int = 1) -> int:
    """A port on 127.0.0.1 (with the ``span - 1`` after it) that neither TCP nor UDP holds now.

    Drawn below Linux's ephemeral range (32768–60999), where every client socket takes its local
    port: a server told to listen there may find it taken by a connection made meanwhile, and
    coturn then does not exit but retries the bind for ever."""
    for _ in range(200):
        port = 20000 + secrets.randbelow(12000 - span)
        if all(_bindable(p) for p in range(port, port + span)):
            return port
    raise RuntimeError("no free port found below the ephemeral range")


def _bindable(port: int) -> bool:
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
        with socket.socket(socket.AF_INET, kind) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


def listening_sockets(port: int) -> set[tuple[str, str]]:
    """(protocol, address) of every TCP and UDP socket listening on ``port``, e.g. ("udp", "[::1]")."""
    lines = subprocess.run(["ss", "-Hlnut", f"sport = :{port}"], capture_output=True, text=True).stdout.splitlines()
    return {(fields[0], fields[4].rsplit(":", 1)[0]) for fields in map(str.split, lines) if len(fields) >= 5}


def wait_for_port(port: int, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


def self_signed(directory: Path, names: tuple[str, ...] = ("api.wimzai.com",)) -> tuple[Path, Path]:
    """A throwaway certificate for ``names`` (host names or IP addresses) in ``directory``, and
    ``bundle.pem`` (certificate and key in one file, as HAProxy takes them). Returns (certificate, key)."""
    key, cert = directory / "key.pem", directory / "cert.pem"
    alt = ",".join(f"IP:{n}" if n.replace(".", "").isdigit() or ":" in n else f"DNS:{n}" for n in names)
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "1",
                    "-subj", f"/CN={names[0]}", "-addext", "subjectAltName=" + alt],
                   check=True, capture_output=True)
    (directory / "bundle.pem").write_text(cert.read_text() + key.read_text())
    return cert, key


def http_json(url: str, token: str | None = None, method: str = "GET", body: dict | None = None,
              timeout: float = 5) -> tuple[int, dict]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as error:
        body = error.read() or b"{}"
        try:
            return error.code, json.loads(body)
        except ValueError:  # not the relay's answer: HAProxy's own error page (a node just died)
            return error.code, {"error": "not_json", "message": body.decode(errors="replace")[:200]}


class Database:
    """A database of its own in ``admin_url``'s server, migrated (empty with ``migrated=False``, for
    a restore); ``drop()`` removes it."""

    def __init__(self, admin_url: str | None = None, relay_bin: str | None = None, migrations: str | None = None,
                 prefix: str = "kit", migrated: bool = True, existing_url: str | None = None) -> None:
        """``existing_url``: a database made elsewhere (its URL as the relay gets it), used as it is
        and not dropped."""
        self.admin_url = admin_url or env("WIMZ_TEST_DATABASE_URL")
        self.relay_bin = relay_bin or env("WIMZ_RELAY_BIN")
        self.migrations = migrations or env("WIMZ_MIGRATIONS_DIR")
        self.name = f"{prefix}_{secrets.token_hex(5)}"
        self.url = existing_url or self.admin_url.replace("dbname=postgres", f"dbname={self.name}")
        self.owned = existing_url is None
        #: Relays started on this database (``add_device`` waits until they know new tokens).
        self.nodes: list[RelayNode] = []
        if self.owned:
            self.psql(f"CREATE DATABASE {self.name}", admin=True)
        if migrated:
            self.cli("migrate")

    def psql(self, sql: str, admin: bool = False) -> str:
        return subprocess.run(["psql", self.admin_url if admin else self.url, "-qtAc", sql], check=True,
                              capture_output=True, text=True).stdout.strip()

    def cli(self, *args: str) -> str:
        """Runs ``wimz-relay ARGS`` on this database; its stdout."""
        done = subprocess.run([self.relay_bin, *args], env=dict(os.environ, WIMZ_DATABASE_URL=self.url,
                                                                  WIMZ_MIGRATIONS_DIR=self.migrations),
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"wimz-relay {' '.join(args)} failed: {done.stderr}")
        return done.stdout

    def add_device(self, device: str) -> tuple[str, str]:
        """Adds a device with the CLI; its (robot token, app token), once every relay started on
        this database knows them (a running relay learns of new tokens by a notification, a few
        milliseconds after the CLI's commit: a test that used them at once raced it)."""
        self.cli("device", "add", device)
        robot = self.cli("token", "issue", "--device", device, "--role", "robot").strip().splitlines()[-1]
        app = self.cli("token", "issue", "--device", device, "--role", "app").strip().splitlines()[-1]
        for node in list(self.nodes):
            node.wait_known(device, app)
        return robot, app

    def drop(self) -> None:
        if self.owned:
            self.psql(f"DROP DATABASE IF EXISTS {self.name} WITH (FORCE)", admin=True)


class LoopbackPostgres:
    """A private PostgreSQL 15 cluster of its own, listening on 127.0.0.1:``port`` with scram
    passwords over TCP (as a production database is reached) and trusting its Unix socket in
    ``directory`` (which the ``postgres`` user must reach): the package test's database, and the
    fresh server a backup is restored into."""

    def __init__(self, directory: Path, port: int) -> None:
        self.directory, self.port = directory, port
        self.bindir = Path(subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True).stdout.strip())
        if not (self.bindir / "initdb").exists():
            self.bindir = sorted(Path("/usr/lib/postgresql").glob("*/bin"))[-1]
        directory.mkdir(parents=True)
        shutil.chown(directory, "postgres", "postgres")
        self._as_postgres(str(self.bindir / "initdb"), "-D", str(directory / "data"), "-U", "postgres", "-E", "UTF8",
                          "--auth-local=trust", "--auth-host=scram-sha-256", "--no-sync")
        self._as_postgres(str(self.bindir / "pg_ctl"), "-D", str(directory / "data"), "-l", str(directory / "log"), "-w",
                          "-o", f"-c listen_addresses=127.0.0.1 -p {port} -c unix_socket_directories={directory} -c fsync=off",
                          "start")

    def _as_postgres(self, *argv: str) -> None:
        subprocess.run(["runuser", "-u", "postgres", "--", *argv], check=True, capture_output=True)

    @property
    def admin_url(self) -> str:
        """The conninfo of its ``postgres`` database over the Unix socket, as the superuser."""
        return f"host={self.directory} port={self.port} user=postgres dbname=postgres"

    def sql(self, statement: str) -> str:
        return subprocess.run(["psql", self.admin_url, "-qtAc", statement], check=True, capture_output=True,
                              text=True).stdout.strip()

    def stop(self) -> None:
        subprocess.run(["runuser", "-u", "postgres", "--", str(self.bindir / "pg_ctl"), "-D", str(self.directory / "data"),
                        "-m", "immediate", "-w", "stop"], capture_output=True)


def dumped_mappings(pid: int) -> list[tuple[int, int]]:
    """(start, end) of each readable mapping of process ``pid`` that a core dump holds (its
    /proc/PID/smaps VmFlags without ``dd``)."""
    mappings: list[tuple[int, int]] = []
    readable: tuple[int, int] | None = None
    with open(f"/proc/{pid}/smaps") as smaps:
        for line in smaps:
            fields = line.split()
            if re.fullmatch(r"[0-9a-f]+-[0-9a-f]+", fields[0]):
                start, end = (int(value, 16) for value in fields[0].split("-"))
                readable = (start, end) if fields[1].startswith("r") else None
            elif fields[0] == "VmFlags:" and readable is not None:
                if "dd" not in fields[1:]:
                    mappings.append(readable)
                readable = None
    return mappings


class RelayNode:
    """One ``wimz-relay serve`` on a fixed loopback port (so it restarts on the same one), ready
    when ``/readyz`` says 200 (the store is reachable and the token mirror loaded). ``host``: the
    address it listens on (``0.0.0.0`` for clients in other network namespaces too); it is asked
    over loopback either way."""

    def __init__(self, database: Database, name: str | None = None, env: dict[str, str] | None = None,
                 echo: bool = False, workdir: str | None = None, host: str = "127.0.0.1") -> None:
        self.database = database
        self.name = name or "relay"
        self.host = host
        self.port = free_port()
        self.env = env or {}
        self.echo = echo
        self.spool = tempfile.mkdtemp(prefix=f"wimz-{self.name}-spool-", dir=workdir)
        self.lines: list[str] = []
        self.process: subprocess.Popen[str] | None = None

    @classmethod
    def started(cls, database: Database, env: dict[str, str] | None = None) -> "RelayNode":
        """A relay for ``database`` on its own port, started and ready."""
        node = cls(database, env=env)
        node.start()
        return node

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, wait: bool = True) -> None:
        environment = dict(os.environ, WIMZ_DATABASE_URL=self.database.url, WIMZ_MIGRATIONS_DIR=self.database.migrations,
                           WIMZ_LISTEN=f"{self.host}:{self.port}", WIMZ_SPOOL_DIR=self.spool,
                           # A first token read may wait this long for the store (2 s in production):
                           # on a loaded machine it can take longer, and a test must not fail on it.
                           **{"WIMZ_CREDENTIAL_HOLD": "15", **self.env})
        if self.name != "relay":
            environment["WIMZ_NODE_ID"] = self.name
        self.process = subprocess.Popen([self.database.relay_bin, "serve"], env=environment, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True)
        threading.Thread(target=self._collect, args=(self.process,), daemon=True).start()
        if self not in self.database.nodes:
            self.database.nodes.append(self)
        if wait:
            self.wait_ready()

    def _collect(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            self.lines.append(line.rstrip("\n"))
            if self.echo:
                print(f"[{self.name}] {line}", end="", flush=True)

    def memory_holds(self, needles: list[bytes]) -> set[bytes]:
        """Which of ``needles`` are anywhere in the running process's memory (every readable
        mapping through /proc/PID/mem, as a core dump would hold it: not the mappings marked
        don't-dump, such as AddressSanitizer's terabytes of shadow). Same user, no ptrace."""
        assert self.process is not None and self.process.poll() is None
        found: set[bytes] = set()
        overlap = max(len(needle) for needle in needles)
        with open(f"/proc/{self.process.pid}/mem", "rb", buffering=0) as mem:
            for start, end in dumped_mappings(self.process.pid):
                tail = b""
                for offset in range(start, end, 1 << 20):
                    try:
                        mem.seek(offset)
                        chunk = tail + mem.read(min(1 << 20, end - offset))
                    except OSError:
                        break  # a guard page or a mapping gone meanwhile
                    found.update(needle for needle in needles if needle in chunk)
                    tail = chunk[-overlap:]
        return found

    def ready(self) -> bool:
        try:
            return http_json(f"{self.url}/readyz", timeout=1)[0] == 200
        except (OSError, ValueError):
            return False

    def wait_known(self, device: str, app_token: str, timeout: float = 5) -> None:
        """Waits until this relay (if it is running and ready) accepts ``app_token`` of ``device``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None or not self.ready():
                return
            try:
                if http_json(f"{self.url}/api/devices/{device}/status", app_token, timeout=2)[0] != 401:
                    return
            except OSError:  # stopped meanwhile
                return
            time.sleep(0.005)

    def wait_ready(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                break
            if self.ready():
                return
            time.sleep(0.05)
        raise RuntimeError(f"{self.name} did not become ready:\n" + "\n".join(self.lines[-30:]))

    def stop(self, timeout: float = 30) -> float:
        """SIGTERM (a drain); the seconds until the process exited (killed past ``timeout``)."""
        started = time.monotonic()
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return time.monotonic() - started

    def kill(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def restart(self) -> None:
        self.stop()
        self.start()

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def metric(self, series: str) -> float:
        """One series of ``/metrics`` as exported, labels included: ``name`` or ``name{a="b"}``."""
        with urllib.request.urlopen(f"{self.url}/metrics", timeout=5) as response:
            for line in response.read().decode().splitlines():
                if line.startswith(series + " "):
                    return float(line.split()[-1])
        raise AssertionError(f"{series} not in /metrics")


class HAProxy:
    """HAProxy in front of relay nodes, configured as deploy/haproxy/haproxy.cfg's backend (one
    hash key per device, /readyz checks, shutdown-sessions) with loopback addresses and faster
    checks; ``start`` again reloads it (``-sf``) with a new server list."""

    def __init__(self, workdir: str | None = None, port: int | None = None) -> None:
        self.port = port or free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="wimz-haproxy-", dir=workdir))
        self.pidfile = self.dir / "haproxy.pid"
        self.process: subprocess.Popen[str] | None = None
        #: The process a reload replaced; it finishes its tunnels (soft stop, ``-sf``).
        self.previous: subprocess.Popen[str] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def config(self, nodes: list[RelayNode]) -> str:
        servers = "\n".join(f"    server {n.name} 127.0.0.1:{n.port}" for n in nodes)
        return f"""global
    maxconn 9000
    pidfile {self.pidfile}
defaults
    mode http
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    timeout tunnel 1h
    timeout http-request 10s
    retries 2
    option redispatch 1
frontend api
    bind 127.0.0.1:{self.port}
    option forwardfor
    default_backend relays
backend relays
    # One key per device for everything of it: device_id= on sockets and credential requests,
    # the path segment on /api/devices/ID/... (HTTP to the robot, status). A client cannot set it.
    http-request del-header X-Wimz-Device
    http-request set-header X-Wimz-Device %[url_param(device_id)] if {{ url_param(device_id) -m found }}
    http-request set-header X-Wimz-Device %[path,field(4,/)] if {{ path_beg /api/devices/ }}
    balance hdr(X-Wimz-Device)
    hash-type consistent
    option httpchk GET /readyz
    http-check expect status 200
    default-server check inter 500ms fall 2 rise 2 on-marked-down shutdown-sessions
{servers}
"""

    def start(self, nodes: list[RelayNode]) -> None:
        cfg = self.dir / "haproxy.cfg"
        cfg.write_text(self.config(nodes))
        subprocess.run(["haproxy", "-c", "-q", "-f", str(cfg)], check=True)
        args = ["haproxy", "-f", str(cfg), "-db"]
        old = self.process
        if old is not None and old.poll() is None:
            args += ["-sf", str(old.pid)]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        wait_for_port(self.port)
        self.previous = old

    def stop(self) -> None:
        for p in (self.process, self.previous):
            if p is not None and p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    p.kill()


class Cluster:
    """A fresh database, ``size`` relay nodes named node1…, and HAProxy in front."""

    def __init__(self, size: int = 3, *, admin_url: str | None = None, relay_bin: str | None = None,
                 migrations: str | None = None, node_env: dict[str, str] | None = None, haproxy_port: int | None = None,
                 echo: bool = False) -> None:
        self.workdir = tempfile.mkdtemp(prefix="wimz-cluster-")
        self.admin_token = secrets.token_hex(16)
        self.node_env = {"WIMZ_DRAIN": "1.5", "WIMZ_CLUSTER_LEASE": "3", "WIMZ_ADMIN_TOKEN": self.admin_token,
                         "WIMZ_TRUSTED_PROXIES": "127.0.0.1", "WIMZ_LOG_LEVEL": os.environ.get("WIMZ_LOG_LEVEL", "warn"),
                         **(node_env or {})}
        self.echo = echo
        self.database = Database(admin_url, relay_bin, migrations, prefix="cluster")
        self.database_url = self.database.url
        self.relay_bin = self.database.relay_bin
        self.nodes: dict[str, RelayNode] = {}
        for i in range(1, size + 1):
            self.nodes[f"node{i}"] = self._node(f"node{i}")
        for node in self.nodes.values():
            node.start(wait=False)
        for node in self.nodes.values():
            node.wait_ready()
        self.haproxy = HAProxy(self.workdir, haproxy_port)
        self.haproxy.start(list(self.nodes.values()))
        self.wait_balanced()

    def _node(self, name: str) -> RelayNode:
        return RelayNode(self.database, name, env=self.node_env, echo=self.echo, workdir=self.workdir)

    def psql(self, sql: str) -> str:
        return self.database.psql(sql)

    def cli(self, *args: str) -> str:
        return self.database.cli(*args)

    def admin(self, path: str, method: str = "GET", body: dict | None = None) -> tuple[int, dict]:
        return http_json(f"{self.haproxy.url}/admin/{path}", self.admin_token, method, body)

    def add_devices(self, count: int, prefix: str = "dev") -> dict[str, tuple[str, str]]:
        """Creates devices through the admin API: id → (robot token, app token)."""
        out = {}
        for i in range(count):
            device = f"{prefix}{i:04d}"
            assert self.admin("devices", "POST", {"id": device})[0] == 201
            robot = self.admin(f"devices/{device}/tokens", "POST", {"role": "robot"})[1]["secret"]
            app = self.admin(f"devices/{device}/tokens", "POST", {"role": "app"})[1]["secret"]
            out[device] = (robot, app)
        return out

    def live_nodes(self) -> list[dict]:
        # Round robin may pick a node that was just killed (HAProxy answers 502 until its checks
        # mark it down): ask again.
        for _ in range(20):
            status, body = self.admin("cluster/nodes")
            if status == 200:
                return [n for n in body["nodes"] if n["live"]]
            time.sleep(0.1)
        raise RuntimeError(f"cluster/nodes kept failing: {status} {body}")

    def wait_balanced(self, timeout: float = 30) -> None:
        """Until every running node is ready and HAProxy had time to see it (rise 2 × 500 ms)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(n.ready() for n in self.nodes.values() if n.running):
                time.sleep(1.2)
                return
            time.sleep(0.1)
        raise RuntimeError("nodes did not become ready")

    def add_node(self) -> RelayNode:
        name = f"node{len(self.nodes) + 1}"
        node = self._node(name)
        self.nodes[name] = node
        node.start()
        self.haproxy.start(list(self.nodes.values()))
        self.wait_balanced()
        return node

    def close(self) -> None:
        self.haproxy.stop()
        for node in self.nodes.values():
            node.stop(timeout=20)
        self.database.drop()


class Coturn:
    """A real coturn on loopback in TURN REST mode: secrets from the database's turn_secret table
    (``conninfo``, the deploy recipe's shared-database mode) or one static secret; with
    ``cert``/``key`` it also listens for TURN over TLS on ``tls_port``."""

    def __init__(self, conninfo: str | None = None, *, static_secret: str | None = None, realm: str = "wimz",
                 cert: str | None = None, key: str | None = None, cli_password: str | None = None) -> None:
        self.dir = tempfile.mkdtemp(prefix="wimz-coturn-")
        #: With ``cli_password``: its management CLI on 127.0.0.1:``cli_port`` (``ps``/``cs``).
        self.cli_password = cli_password
        self.log = os.path.join(self.dir, "turnserver.log")
        secret = [f"--psql-userdb={conninfo}"] if conninfo else [f"--static-auth-secret={static_secret}"]
        for _ in range(5):
            self.port = free_port()
            self.tls_port = free_port() if cert else None
            tls = [f"--tls-listening-port={self.tls_port}", f"--cert={cert}", f"--pkey={key}"] if cert else ["--no-tls"]
            relay_base = 41000 + secrets.randbelow(18000)
            self.cli_port = free_port() if cli_password else None
            cli = ([f"--cli-ip=127.0.0.1", f"--cli-port={self.cli_port}", f"--cli-password={cli_password}"]
                   if cli_password else ["--no-cli"])
            self.process = subprocess.Popen(
                ["turnserver", "-n", "--listening-ip=127.0.0.1", "--relay-ip=127.0.0.1", f"--listening-port={self.port}",
                 "--use-auth-secret", f"--realm={realm}", *secret, *tls, "--no-dtls", *cli, "--allow-loopback-peers",
                 f"--min-port={relay_base}", f"--max-port={relay_base + 100}", f"--log-file={self.log}", "--simple-log",
                 f"--pidfile={self.dir}/turnserver.pid"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and self.process.poll() is None:
                if self._listening():
                    return
                time.sleep(0.05)
            self.stop()
        raise RuntimeError("coturn did not start: " + Path(self.log).read_text(errors="replace")[-800:])

    def _listening(self) -> bool:
        # coturn opens its UDP and TCP listeners from different threads: wait for every one in use.
        wanted = {("udp", "127.0.0.1"), ("tcp", "127.0.0.1")}
        return wanted <= listening_sockets(self.port) and (
            self.tls_port is None or ("tcp", "127.0.0.1") in listening_sockets(self.tls_port)) and (
            self.cli_port is None or ("tcp", "127.0.0.1") in listening_sockets(self.cli_port))

    def sessions(self, username: str) -> list[str]:
        """The ids of ``username``'s sessions, as coturn's own CLI lists them (``ps``)."""
        with socket.create_connection(("127.0.0.1", self.cli_port), timeout=3) as cli:
            def until_prompt() -> str:
                out = b""
                while not out.endswith(b"> ") and b"Enter password" not in out:
                    chunk = cli.recv(4096)
                    if not chunk:
                        break
                    out += chunk
                return out.decode(errors="replace")
            until_prompt()
            cli.sendall(f"{self.cli_password}\r\n".encode())
            until_prompt()
            cli.sendall(f"ps {username}\r\n".encode())
            listing = until_prompt()
        return [line.split("id=")[1].split(",")[0] for line in listing.splitlines()
                if "id=" in line and f"user <{username}>" in line]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)
