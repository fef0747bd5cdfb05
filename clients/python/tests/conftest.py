"""Real components for the robot library's tests: the wimz-relay daemon built by
scripts/test.sh, a fresh database in the suite's PostgreSQL cluster, and a real coturn.

scripts/test.sh exports WIMZ_RELAY_BIN, WIMZ_TEST_DATABASE_URL and WIMZ_MIGRATIONS_DIR."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import pytest


def _env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise RuntimeError(f"{name} is not set: run the suite with scripts/test.sh")
    return value


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Database:
    """A database of its own in the suite's cluster, migrated, dropped afterwards."""

    def __init__(self) -> None:
        self.admin_url = _env("WIMZ_TEST_DATABASE_URL")
        self.name = f"py_{secrets.token_hex(6)}"
        self.url = self.admin_url.replace("dbname=postgres", f"dbname={self.name}")
        self.psql(f"CREATE DATABASE {self.name}", admin=True)
        self.cli("migrate")

    def psql(self, sql: str, admin: bool = False) -> str:
        return subprocess.run(["psql", self.admin_url if admin else self.url, "-qtAc", sql], check=True,
                              capture_output=True, text=True).stdout.strip()

    def cli(self, *args: str) -> str:
        """Runs ``wimz-relay ARGS`` on this database; its stdout."""
        env = dict(os.environ, WIMZ_DATABASE_URL=self.url, WIMZ_MIGRATIONS_DIR=_env("WIMZ_MIGRATIONS_DIR"))
        done = subprocess.run([_env("WIMZ_RELAY_BIN"), *args], env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"wimz-relay {' '.join(args)} failed: {done.stderr}")
        return done.stdout

    def add_device(self, device: str) -> tuple[str, str]:
        """Adds a device; its (robot token, app token)."""
        self.cli("device", "add", device)
        robot = self.cli("token", "issue", "--device", device, "--role", "robot").strip().splitlines()[-1]
        app = self.cli("token", "issue", "--device", device, "--role", "app").strip().splitlines()[-1]
        return robot, app

    def drop(self) -> None:
        self.psql(f"DROP DATABASE IF EXISTS {self.name} WITH (FORCE)", admin=True)


class Relay:
    """``wimz-relay serve`` on a fixed loopback port (so it can be restarted on the same one)."""

    def __init__(self, database: Database, env: dict[str, str] | None = None) -> None:
        self.database = database
        self.port = free_port()
        self.extra_env = env or {}
        self.lines: list[str] = []
        self.process: subprocess.Popen[str] | None = None
        self.spool = tempfile.mkdtemp(prefix="wimz-py-spool-")
        self.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        env = dict(os.environ, WIMZ_DATABASE_URL=self.database.url, WIMZ_MIGRATIONS_DIR=_env("WIMZ_MIGRATIONS_DIR"),
                   WIMZ_LISTEN=f"127.0.0.1:{self.port}", WIMZ_SPOOL_DIR=self.spool, **self.extra_env)
        self.process = subprocess.Popen([_env("WIMZ_RELAY_BIN"), "serve"], env=env, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True)
        threading.Thread(target=self._collect, args=(self.process,), daemon=True).start()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            if any("credentials_loaded" in line for line in self.lines) and self._ready():
                return
            time.sleep(0.05)
        raise RuntimeError("relay did not become ready:\n" + "\n".join(self.lines[-30:]))

    def _collect(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            self.lines.append(line.rstrip("\n"))

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/readyz", timeout=1) as response:
                return response.status == 200
        except OSError:
            return False

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def restart(self) -> None:
        self.stop()
        self.start()


class Coturn:
    """A real coturn on loopback in REST-secret mode, reading secrets from the database's
    turn_secret table (the deploy recipe's shared-DB mode)."""

    def __init__(self, conninfo: str, realm: str = "wimz") -> None:
        self.dir = tempfile.mkdtemp(prefix="wimz-py-coturn-")
        self.log = os.path.join(self.dir, "turnserver.log")
        for _ in range(5):
            self.port = free_port(socket.SOCK_DGRAM)
            relay_base = 41000 + secrets.randbelow(18000)
            self.process = subprocess.Popen(
                ["turnserver", "-n", "--listening-ip=127.0.0.1", "--relay-ip=127.0.0.1",
                 f"--listening-port={self.port}", "--use-auth-secret", f"--realm={realm}",
                 f"--psql-userdb={conninfo}", "--no-tls", "--no-dtls", "--no-cli", "--allow-loopback-peers",
                 f"--min-port={relay_base}", f"--max-port={relay_base + 100}", f"--log-file={self.log}",
                 "--simple-log", f"--pidfile={self.dir}/turnserver.pid"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and self.process.poll() is None:
                if self._listening():
                    return
                time.sleep(0.05)
            self.stop()
        raise RuntimeError("coturn did not start: " + Path(self.log).read_text(errors="replace")[-800:])

    def _listening(self) -> bool:
        out = subprocess.run(["ss", "-Hlnu", f"sport = :{self.port}"], capture_output=True, text=True).stdout
        return bool(out.strip())

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)


@pytest.fixture
def database():
    db = Database()
    yield db
    db.drop()


@pytest.fixture
def device(database):
    """(device id, robot token, app token) of a fresh device."""
    robot, app = database.add_device("robot-1")
    return "robot-1", robot, app


@pytest.fixture
def relay(database):
    r = Relay(database)
    yield r
    r.stop()
