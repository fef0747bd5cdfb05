"""PostgreSQL that fails over, on loopback: pg_auto_failover's monitor and two data nodes, built
with the recipe an operator runs (deploy/pg-auto-failover/pg-auto-failover.sh) — trust and no TLS
here, where everything is 127.0.0.1 — and the relay's role and database on the primary."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from wimz_testkit import free_port

RECIPE = Path(__file__).resolve().parents[2] / "deploy" / "pg-auto-failover" / "pg-auto-failover.sh"


class Formation:
    """``url`` is the relay's: both data nodes, ``target_session_attrs=read-write``."""

    def __init__(self, password: str = "relay-password-0123") -> None:
        # Under /tmp itself: `postgres` must reach it (pytest's own temporary folders are root's 0700).
        directory = Path(tempfile.mkdtemp(prefix="wimz-pgaf-"))
        self.dir = directory
        for sub in ("config", "data"):
            (directory / sub).mkdir(exist_ok=True)
        subprocess.run(["chown", "-R", "postgres:", str(directory)], check=True)
        os.chmod(directory, 0o755)
        self.env = dict(os.environ, PGAF_AUTH="trust", PGAF_SSL="--no-ssl",
                        XDG_CONFIG_HOME=str(directory / "config"), XDG_DATA_HOME=str(directory / "data"))
        base = free_port(3)
        self.ports = {"monitor": base, "node1": base + 1, "node2": base + 2}
        self.processes: dict[str, subprocess.Popen] = {}
        self.recipe("monitor", self.pgdata("monitor"), str(base), "127.0.0.1")
        self.run("monitor")
        self.wait(lambda: self.recipe("monitor-uri", self.pgdata("monitor"), check=False), 30, "the monitor")
        self.recipe("tune", self.pgdata("monitor"))
        monitor_uri = self.recipe("monitor-uri", self.pgdata("monitor"))
        for name in ("node1", "node2"):
            self.recipe("node", self.pgdata(name), str(self.ports[name]), "127.0.0.1", monitor_uri)
            self.run(name)
        self.wait(lambda: sorted(self.states().values()) == [("primary", "primary"), ("secondary", "secondary")], 60,
                  "a primary and a secondary")
        self.recipe("database", self.pgdata(self.primary()), "wimz", password)
        self.url = self.recipe("relay-url", self.pgdata("monitor"), "wimz", password)

    def pgdata(self, name: str) -> str:
        return str(self.dir / name)

    def recipe(self, *args: str, check: bool = True) -> str:
        done = subprocess.run([str(RECIPE), *args], env=self.env, capture_output=True, text=True)
        if check and done.returncode != 0:
            raise RuntimeError(f"pg-auto-failover.sh {' '.join(args[:1])} failed: {done.stdout}{done.stderr}")
        return done.stdout.strip() if done.returncode == 0 else ""

    def run(self, name: str) -> None:
        log = open(self.dir / f"{name}.log", "a")
        self.processes[name] = subprocess.Popen([str(RECIPE), "run", self.pgdata(name)], env=self.env, stdout=log,
                                                stderr=subprocess.STDOUT, start_new_session=True)

    def states(self) -> dict[str, tuple[str, str]]:
        """Each data node's (reported, assigned) state, as the monitor has them."""
        text = self.recipe("state", self.pgdata("monitor"), check=False)
        states = {}
        for line in text.splitlines():
            cells = [c.strip() for c in line.split("|")]
            if len(cells) == 7 and cells[0].startswith("node_"):
                states[f"node{cells[0].removeprefix('node_')}"] = (cells[5], cells[6])
        return states

    def primary(self) -> str | None:
        return next((name for name, (reported, assigned) in self.states().items()
                     if reported == assigned == "primary" or reported == assigned == "wait_primary"), None)

    def kill(self, name: str) -> None:
        """The data node dies whole: its pg_autoctl and its PostgreSQL, at once."""
        process = self.processes.pop(name)
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        subprocess.run(["pkill", "-9", "-f", f"postgres -D {self.pgdata(name)} "], capture_output=True)

    def wait(self, predicate, timeout: float, what: str) -> float:
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            if predicate():
                return time.monotonic() - started
            time.sleep(0.1)
        raise AssertionError(f"pg_auto_failover: {what} not within {timeout} s:\n{self.recipe('state', self.pgdata('monitor'), check=False)}")

    def close(self) -> None:
        for process in self.processes.values():
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for name in self.ports:
            subprocess.run(["pkill", "-9", "-f", f"postgres -D {self.pgdata(name)} "], capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)
