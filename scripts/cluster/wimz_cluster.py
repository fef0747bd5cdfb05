"""A local wimz-relay cluster: N relay nodes on loopback behind a real HAProxy, one PostgreSQL.

Used by the cluster tests (Tests/Cluster), the cluster benchmark (scripts/cluster/bench.py) and
scripts/cluster.sh (a newcomer's 3-node cluster). The HAProxy backend is the one in
deploy/haproxy/haproxy.cfg (hash on device_id, consistent; /readyz health checks;
on-marked-down shutdown-sessions), with loopback addresses and faster checks."""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import tempfile
import threading
import time
import json
import urllib.request
import urllib.error
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
        return error.code, json.loads(error.read() or b"{}")


class Node:
    """One ``wimz-relay serve`` process with a fixed port and node id (restartable)."""

    def __init__(self, cluster: "Cluster", name: str) -> None:
        self.cluster = cluster
        self.name = name
        self.port = free_port()
        self.spool = tempfile.mkdtemp(prefix=f"wimz-{name}-spool-", dir=cluster.workdir)
        self.lines: list[str] = []
        self.process: subprocess.Popen[str] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, wait: bool = True) -> None:
        env = dict(os.environ, WIMZ_DATABASE_URL=self.cluster.database_url,
                   WIMZ_MIGRATIONS_DIR=self.cluster.migrations, WIMZ_LISTEN=f"127.0.0.1:{self.port}",
                   WIMZ_NODE_ID=self.name, WIMZ_SPOOL_DIR=self.spool, WIMZ_ADMIN_TOKEN=self.cluster.admin_token,
                   WIMZ_TRUSTED_PROXIES="127.0.0.1", WIMZ_LOG_LEVEL=os.environ.get("WIMZ_LOG_LEVEL", "warn"),
                   **self.cluster.node_env)
        self.process = subprocess.Popen([self.cluster.relay_bin, "serve"], env=env, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True)
        threading.Thread(target=self._collect, args=(self.process,), daemon=True).start()
        if wait:
            self.wait_ready()

    def _collect(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            self.lines.append(line.rstrip("\n"))
            if self.cluster.echo:
                print(f"[{self.name}] {line}", end="", flush=True)

    def ready(self) -> bool:
        try:
            return http_json(f"{self.url}/readyz", timeout=1)[0] == 200
        except OSError:
            return False

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
        """SIGTERM (drain); the seconds until the process exited."""
        started = time.monotonic()
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=timeout)
        return time.monotonic() - started

    def kill(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


class HAProxy:
    """HAProxy in front of the nodes; reloads (``-sf``) when the server list changes."""

    def __init__(self, cluster: "Cluster", port: int | None = None) -> None:
        self.cluster = cluster
        self.port = port or free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="wimz-haproxy-", dir=cluster.workdir))
        self.pidfile = self.dir / "haproxy.pid"
        self.process: subprocess.Popen[str] | None = None
        #: The process a reload replaced; it finishes its tunnels (soft stop, ``-sf``).
        self.previous: subprocess.Popen[str] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def config(self, nodes: list[Node]) -> str:
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

    def start(self, nodes: list[Node]) -> None:
        cfg = self.dir / "haproxy.cfg"
        cfg.write_text(self.config(nodes))
        subprocess.run(["haproxy", "-c", "-q", "-f", str(cfg)], check=True)
        args = ["haproxy", "-f", str(cfg), "-db"]
        old = self.process
        if old is not None and old.poll() is None:
            args += ["-sf", str(old.pid)]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    break
            except OSError:
                time.sleep(0.05)
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
    """A database (created fresh in ``admin_url``'s server unless ``database_url`` is given),
    ``size`` nodes named node1…, and HAProxy in front."""

    def __init__(self, size: int = 3, *, admin_url: str | None = None, database_url: str | None = None,
                 relay_bin: str | None = None, migrations: str | None = None, node_env: dict[str, str] | None = None,
                 haproxy_port: int | None = None, echo: bool = False) -> None:
        self.relay_bin = relay_bin or os.environ["WIMZ_RELAY_BIN"]
        self.migrations = migrations or os.environ["WIMZ_MIGRATIONS_DIR"]
        self.workdir = tempfile.mkdtemp(prefix="wimz-cluster-")
        self.admin_token = secrets.token_hex(16)
        self.node_env = {"WIMZ_DRAIN": "1.5", "WIMZ_CLUSTER_LEASE": "3", **(node_env or {})}
        self.echo = echo
        self.admin_url = admin_url
        self.db_name: str | None = None
        if database_url is None:
            assert admin_url, "admin_url or database_url"
            self.db_name = f"cluster_{secrets.token_hex(5)}"
            self.psql(f"CREATE DATABASE {self.db_name}", url=admin_url)
            database_url = admin_url.replace("dbname=postgres", f"dbname={self.db_name}")
        self.database_url = database_url
        self.cli("migrate")
        self.nodes: dict[str, Node] = {}
        for i in range(1, size + 1):
            self.nodes[f"node{i}"] = Node(self, f"node{i}")
        for node in self.nodes.values():
            node.start(wait=False)
        for node in self.nodes.values():
            node.wait_ready()
        self.haproxy = HAProxy(self, haproxy_port)
        self.haproxy.start(list(self.nodes.values()))
        self.wait_balanced()

    # -- helpers ---------------------------------------------------------------------------

    def psql(self, sql: str, url: str | None = None) -> str:
        return subprocess.run(["psql", url or self.database_url, "-qtAc", sql], check=True, capture_output=True,
                              text=True).stdout.strip()

    def cli(self, *args: str) -> str:
        env = dict(os.environ, WIMZ_DATABASE_URL=self.database_url, WIMZ_MIGRATIONS_DIR=self.migrations)
        done = subprocess.run([self.relay_bin, *args], env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"wimz-relay {' '.join(args)} failed: {done.stderr}")
        return done.stdout

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
        return [n for n in self.admin("cluster/nodes")[1]["nodes"] if n["live"]]

    def wait_balanced(self, timeout: float = 30) -> None:
        """Until every running node is ready and HAProxy had time to see it (rise 2 × 500 ms)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(n.ready() for n in self.nodes.values() if n.running):
                time.sleep(1.2)
                return
            time.sleep(0.1)
        raise RuntimeError("nodes did not become ready")

    def add_node(self) -> Node:
        name = f"node{len(self.nodes) + 1}"
        node = Node(self, name)
        self.nodes[name] = node
        node.start()
        self.haproxy.start(list(self.nodes.values()))
        self.wait_balanced()
        return node

    def close(self) -> None:
        self.haproxy.stop()
        for node in self.nodes.values():
            try:
                node.stop(timeout=20)
            except subprocess.TimeoutExpired:
                node.kill()
        if self.db_name and self.admin_url:
            self.psql(f"DROP DATABASE IF EXISTS {self.db_name} WITH (FORCE)", url=self.admin_url)


def main() -> None:
    """``python3 wimz_cluster.py --admin-url URL [--nodes 3] [--port 8080]``: starts a local
    cluster and takes commands on stdin until ``quit`` (or end of input / Ctrl-C)."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--admin-url", required=True, help="libpq conninfo of a PostgreSQL server (dbname=postgres)")
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--port", type=int, default=8080, help="HAProxy's port on 127.0.0.1")
    parser.add_argument("--relay-bin", required=True)
    parser.add_argument("--migrations", required=True)
    args = parser.parse_args()
    cluster = Cluster(args.nodes, admin_url=args.admin_url, relay_bin=args.relay_bin, migrations=args.migrations,
                      haproxy_port=args.port, node_env={"WIMZ_DRAIN": "3"})
    try:
        (device, (robot, app)), = cluster.add_devices(1, prefix="demo").items()
        status = f"WIMZ_DATABASE_URL='{cluster.database_url}' {args.relay_bin} cluster status"
        print(f"""
{args.nodes} relay nodes behind HAProxy at {cluster.haproxy.url} (nodes: {', '.join(f'{n.name}={n.url}' for n in cluster.nodes.values())})
admin token: {cluster.admin_token}
demo device {device}: robot token {robot}
                      app token   {app}
watch the cluster:   watch -n1 "{status}"
a robot:             WIMZ_RELAY_URL={cluster.haproxy.url} WIMZ_DEVICE_ID={device} WIMZ_ROBOT_TOKEN={robot} scripts/example-robot.sh
commands here: status | kill NODE | stop NODE | start NODE | add | quit
""", flush=True)
        for line in iter(input, "quit"):
            words = line.split()
            node = cluster.nodes.get(words[1]) if len(words) > 1 else None
            if not words:
                continue
            if words[0] == "status":
                print(cluster.cli("cluster", "status"), end="")
            elif words[0] == "add":
                print(f"added {cluster.add_node().name}")
            elif node and words[0] == "kill":
                node.kill()
            elif node and words[0] == "stop":
                print(f"{node.name} drained and exited in {node.stop():.1f} s")
            elif node and words[0] == "start":
                node.start()
            else:
                print("commands: status | kill NODE | stop NODE | start NODE | add | quit")
    except (EOFError, KeyboardInterrupt):
        pass
    finally:
        cluster.close()


if __name__ == "__main__":
    main()
