"""The Debian package, installed the way an operator installs it: `apt-get install ./….deb` into a
clean Debian 12 root (debootstrap) that has never seen Swift, then the relay run from it end to
end against a PostgreSQL on loopback, upgraded, removed and purged. scripts/test.sh builds the
package (scripts/package.sh) and the robot wheel (scripts/package-robot.sh) and passes their
paths in WIMZ_DEB and WIMZ_ROBOT_WHEEL.

The tests of this module share one root and run in file order: install and look, the robot's
venv, run (with the bridge and a backup), upgrade, remove, purge; lintian last."""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import re
import signal
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from websockets.asyncio.client import connect

from debian_root import DebianRoot, parse_env_file
from wimz_testkit import LoopbackPostgres, free_port, http_json

ROOT = Path(__file__).resolve().parents[2]
VERSION = (ROOT / "VERSION").read_text().strip()


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True).stdout.strip()


def expected_package_version(python: bool = False) -> str:
    """VERSION on the commit tagged with it; between releases VERSION~dev.N+gHASH, N the commits so
    far, so that apt upgrades from one development build to the next and on to the release; the
    wheel's the same in PEP 440's words (VERSION.devN+gHASH), so that pip orders them alike."""
    head = git("rev-parse", "HEAD")
    tagged = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "-q", "--verify", f"refs/tags/{VERSION}^{{commit}}"],
                            capture_output=True, text=True).stdout.strip()
    if tagged == head:
        return VERSION
    count, short = git("rev-list", "--count", "HEAD"), git("rev-parse", "--short=10", "HEAD")
    return f"{VERSION}.dev{count}+g{short}" if python else f"{VERSION}~dev.{count}+g{short}"


PACKAGE_VERSION = expected_package_version()
WHEEL_VERSION = expected_package_version(python=True)


def deb_path() -> Path:
    return Path(os.environ["WIMZ_DEB"]).resolve()


# systemd cannot run as PID 1 in this sandbox, so the maintainer scripts meet a stand-in for
# systemctl that records each call with the package and script that made it (dpkg's
# DPKG_MAINTSCRIPT_* variables) and answers as a host with one relay instance running would.
# /run/systemd/system tells the scripts systemd is there, as on a server.
SYSTEMCTL_STAND_IN = """#!/bin/sh
echo "${DPKG_MAINTSCRIPT_PACKAGE:-none} ${DPKG_MAINTSCRIPT_NAME:-none}: $*" >> /var/log/systemctl-calls
case "$*" in
    *list-units*) echo "wimz-relay@8081.service loaded active running WIM-Z cloud relay node on port 8081" ;;
    *is-enabled*) echo disabled; exit 1 ;;
esac
exit 0
"""


def systemctl_calls(debian: DebianRoot) -> list[str]:
    """The calls the relay's maintainer scripts made since the last look (the log is emptied)."""
    log = debian.file("/var/log/systemctl-calls")
    lines = log.read_text().splitlines() if log.exists() else []
    log.write_text("")
    return [line.split(": ", 1)[0].split()[1] + ": " + line.split(": ", 1)[1] for line in lines if line.startswith("wimz-relay ")]


@pytest.fixture(scope="module")
def debian(tmp_path_factory) -> DebianRoot:
    base = Path(os.environ.get("WIMZ_TEST_WORKDIR") or tmp_path_factory.mktemp("package"))
    root, seconds = DebianRoot.bootstrap(base / "debian-root")
    print(f"a clean Debian 12 minbase root: {seconds:.0f} s")
    root.file("/run/systemd/system").mkdir(parents=True)
    # apt runs dpkg with PATH=/usr/sbin:/usr/bin:… (DPkg::Path): this one comes first.
    stand_in = root.file("/usr/sbin/systemctl")
    stand_in.write_text(SYSTEMCTL_STAND_IN)
    stand_in.chmod(0o755)
    (root.file("/tmp") / deb_path().name).write_bytes(deb_path().read_bytes())
    root.run("apt-get", "install", "-y", "-q", f"/tmp/{deb_path().name}")
    root.install_calls = systemctl_calls(root)  # type: ignore[attr-defined]
    return root


@pytest.fixture(scope="module")
def database(debian):
    base = Path(os.environ.get("WIMZ_TEST_WORKDIR") or debian.path.parent)
    server = LoopbackPostgres(base / "package-pg", free_port())
    password = "relay-" + os.urandom(12).hex()
    server.sql(f"CREATE ROLE wimz_relay LOGIN PASSWORD '{password}'")
    server.sql("CREATE DATABASE wimz OWNER wimz_relay")
    yield f"postgresql://wimz_relay:{password}@127.0.0.1:{server.port}/wimz"
    server.stop()


def test_the_root_has_no_swift_and_the_binary_links_none(debian):
    assert debian.run("sh", "-c", "command -v swift", check=False).returncode != 0
    assert not list(debian.path.glob("usr/lib/**/libswift*")), "a Swift runtime library in the root"
    libraries = debian.run("ldd", "/usr/bin/wimz-relay").stdout
    assert "not found" not in libraries, libraries
    assert not re.search(r"swift|Foundation|dispatch|BlocksRuntime|icu", libraries, re.I), libraries
    # The package's version, to the commit: a pre-release never passes for the release.
    assert debian.run("wimz-relay", "--version").stdout == PACKAGE_VERSION + "\n"
    # Also where /proc is not mounted: Swift reads its arguments there, the binary takes glibc's.
    bare = subprocess.run(["chroot", str(debian.path), "/usr/bin/wimz-relay", "--version"], capture_output=True, text=True)
    assert bare.stdout == PACKAGE_VERSION + "\n", bare.stdout[:200]


def test_the_package_says_what_it_is(debian):
    fields = {f: subprocess.run(["dpkg-deb", "-f", str(deb_path()), f], capture_output=True, text=True).stdout.strip()
              for f in ("Package", "Version", "Architecture", "Depends")}
    assert fields["Package"] == "wimz-relay" and fields["Version"] == PACKAGE_VERSION
    assert deb_path().name == f"wimz-relay_{PACKAGE_VERSION}_{fields['Architecture']}.deb"
    depends = [d.strip().split()[0] for d in fields["Depends"].split(",")]
    for needed in ("libwebsockets17", "libwebsockets-evlib-ev", "libpq5", "libssl3", "libc6", "adduser", "procps", "openssl"):
        assert needed in depends, fields["Depends"]
    assert not any("swift" in d for d in depends)
    status = debian.run("dpkg-query", "-s", "wimz-relay").stdout
    assert "Status: install ok installed" in status and f"Version: {PACKAGE_VERSION}\n" in status
    assert re.search(r"^Conffiles:\n /etc/wimz-relay/wimz-relay.env [0-9a-f]{32}$", status, re.M), status


def test_development_builds_upgrade_in_order():
    # What apt sees across a release cycle: each development build after the one before, the
    # release after all of them, the next cycle's builds after the release.
    order = ["1.0.0", "1.1.0~dev.390+g0123456789", "1.1.0~dev.391+gfedcba9876", "1.1.0", "1.1.0+upgrade1",
             "1.2.0~dev.392+g00aa00aa00", "1.2.0"]
    for older, newer in zip(order, order[1:]):
        assert subprocess.run(["dpkg", "--compare-versions", older, "lt", newer]).returncode == 0, (older, newer)
    assert re.fullmatch(re.escape(VERSION) + r"(~dev\.\d+\+g[0-9a-f]{10})?", PACKAGE_VERSION), PACKAGE_VERSION
    # VERSION names the release being made: once its tag exists, later commits name the next one
    # (else their builds would sort below the release). A clone without tags can't tell.
    tagged = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "-q", "--verify", f"refs/tags/{VERSION}^{{commit}}"],
                            capture_output=True, text=True).stdout.strip()
    assert not tagged or tagged == git("rev-parse", "HEAD"), f"{VERSION} is released: raise VERSION (scripts/generate.sh)"


def test_files_owners_and_modes(debian):
    expected = {
        "/usr/bin/wimz-relay": ("root", "root", "755"),
        "/usr/lib/wimz-relay/wimz-relay-backup": ("root", "root", "755"),
        "/usr/lib/wimz-relay/wimz-relay-deploy-hook": ("root", "root", "755"),
        "/usr/sbin/wimz-relay-setup": ("root", "root", "755"),
        "/usr/share/man/man8/wimz-relay-setup.8.gz": ("root", "root", "644"),
        "/lib/systemd/system/wimz-relay-backup.service": ("root", "root", "644"),
        "/lib/systemd/system/wimz-relay-backup.timer": ("root", "root", "644"),
        "/lib/systemd/system/wimz-relay.service": ("root", "root", "644"),
        "/lib/systemd/system/wimz-relay@.service": ("root", "root", "644"),
        "/usr/share/wimz-relay/migrations": ("root", "root", "755"),
        "/etc/wimz-relay": ("root", "wimz-relay", "750"),
        "/etc/wimz-relay/wimz-relay.env": ("root", "wimz-relay", "640"),
        "/etc/wimz-relay/admin-token": ("root", "wimz-relay", "640"),
        "/var/lib/wimz-relay": ("wimz-relay", "wimz-relay", "750"),
        "/var/lib/wimz-relay/spool": ("wimz-relay", "wimz-relay", "750"),
        "/usr/share/doc/wimz-relay/copyright": ("root", "root", "644"),
        "/usr/share/man/man8/wimz-relay.8.gz": ("root", "root", "644"),
    }
    for path, owner in expected.items():
        assert debian.stat(path) == owner, path
    shipped = sorted(p.name for p in (ROOT / "migrations").glob("*.sql"))
    installed = sorted(p.name for p in debian.file("/usr/share/wimz-relay/migrations").glob("*.sql"))
    assert installed == shipped
    user = debian.file("/etc/passwd").read_text()
    entry = next(line.split(":") for line in user.splitlines() if line.startswith("wimz-relay:"))
    assert int(entry[2]) < 1000 and entry[6] == "/usr/sbin/nologin", entry
    token = debian.file("/etc/wimz-relay/admin-token").read_text().strip()
    assert re.fullmatch(r"wimz_admin_[A-Za-z0-9]{40,}", token), "the first install's admin token"
    env = parse_env_file(debian.file("/etc/wimz-relay/wimz-relay.env").read_text())
    assert env["WIMZ_ADMIN_TOKEN_FILE"] == "/etc/wimz-relay/admin-token" and "WIMZ_MIGRATIONS_DIR" not in env
    copyright_text = debian.file("/usr/share/doc/wimz-relay/copyright").read_text()
    assert copyright_text.startswith("Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/")
    assert "Apache License" in copyright_text and "Version 2.0, January 2004" in copyright_text
    with gzip.open(debian.file("/usr/share/man/man8/wimz-relay.8.gz"), "rt") as page:
        assert "wimz\\-relay token issue" in page.read()
    with gzip.open(debian.file("/usr/share/doc/wimz-relay/changelog.gz"), "rt") as log:
        assert log.readline().startswith(f"wimz-relay ({PACKAGE_VERSION})")


def test_the_units_verify_and_reload_with_sighup(debian):
    for unit in ("wimz-relay.service", "wimz-relay@.service"):
        text = debian.file(f"/lib/systemd/system/{unit}").read_text()
        assert "ExecReload=/bin/kill -HUP $MAINPID" in text
        assert "ExecStart=/usr/bin/wimz-relay serve" in text and "User=wimz-relay" in text
    # systemd as a server has it (a minbase root has none), then an instance of the template as
    # systemd would load it.
    debian.run("apt-get", "install", "-y", "-q", "--no-install-recommends", "systemd")
    link = debian.file("/lib/systemd/system/wimz-relay@8081.service")
    link.symlink_to("wimz-relay@.service")
    try:
        done = subprocess.run(["systemd-analyze", "verify", f"--root={debian.path}", "wimz-relay.service",
                               "wimz-relay@8081.service", "wimz-relay-backup.service", "wimz-relay-backup.timer"],
                              capture_output=True, text=True)
    finally:
        link.unlink()
    assert done.returncode == 0, done.stdout + done.stderr
    problems = [line for line in done.stderr.splitlines() if "wimz-relay" in line]
    assert not problems, done.stderr


def test_the_first_install_enables_starts_and_stops_nothing(debian):
    assert debian.install_calls == ["postinst: --system daemon-reload"]  # type: ignore[attr-defined]
    for name in ("postinst", "prerm", "postrm"):
        code = [line for line in debian.file(f"/var/lib/dpkg/info/wimz-relay.{name}").read_text().splitlines()
                if not line.lstrip().startswith("#")]
        assert not [line for line in code if re.search(r"apt-get|invoke-rc\.d|\b(enable|unmask|disable|mask)\b", line)], name


async def _pair(base: str, device: str, robot_token: str, app_token: str) -> dict:
    """A robot and an app paired through the relay; what the app received from the robot."""
    ws = base.replace("http://", "ws://")
    async with connect(f"{ws}/ws/robot?device_id={device}", additional_headers={"Authorization": f"Bearer {robot_token}"}) as robot:
        async with connect(f"{ws}/ws/app?device_id={device}&token={app_token}") as app:
            status = json.loads(await asyncio.wait_for(app.recv(), 5))
            assert status["event"] == "device_status" and status["data"]["online"] is True, status
            while True:
                seen = json.loads(await asyncio.wait_for(robot.recv(), 5))
                if seen.get("event") == "app_presence" and seen["data"]["apps"] == 1:
                    break
            await robot.send(json.dumps({"type": "event", "event": "bark_detected", "data": {"confidence": 0.9}}))
            while True:
                message = json.loads(await asyncio.wait_for(app.recv(), 5))
                if message.get("event") == "bark_detected":
                    return message


def _pip_trust(debian: DebianRoot) -> dict[str, str]:
    """pip in the root trusts what pip here trusts: where PyPI is reached through a TLS proxy with
    a CA of its own (PIP_CERT, as on this machine), that bundle is copied in."""
    bundle = os.environ.get("PIP_CERT") or os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("SSL_CERT_FILE")
    if not bundle or not Path(bundle).is_file():
        return {}
    debian.file("/tmp/host-ca-bundle.crt").write_bytes(Path(bundle).read_bytes())
    return {"PIP_CERT": "/tmp/host-ca-bundle.crt"}


def test_the_robot_library_installs_into_its_venv(debian):
    wheel = Path(os.environ["WIMZ_ROBOT_WHEEL"]).resolve()
    (debian.file("/tmp") / wheel.name).write_bytes(wheel.read_bytes())
    debian.run("apt-get", "install", "-y", "-q", "--no-install-recommends", "python3-venv")
    # clients/python/README.md, "Install on the robot".
    debian.run("python3", "-m", "venv", "/opt/wimz-robot/venv")
    debian.run("/opt/wimz-robot/venv/bin/pip", "install", "-q", "--disable-pip-version-check", f"/tmp/{wheel.name}",
               env=_pip_trust(debian))
    assert debian.run("/opt/wimz-robot/venv/bin/wimz-robot", "--version").stdout.strip() == WHEEL_VERSION
    debian.run("adduser", "--system", "--group", "--no-create-home", "wimz-robot")
    debian.run("adduser", "--system", "--no-create-home", "robotcode")
    debian.run("adduser", "robotcode", "wimz-robot")
    debian.run("adduser", "--system", "--no-create-home", "stranger")
    unit = (ROOT / "deploy/robot/wimz-robot-bridge.service").read_text()
    debian.file("/etc/systemd/system").mkdir(parents=True, exist_ok=True)
    debian.file("/etc/systemd/system/wimz-robot-bridge.service").write_text(unit)
    done = subprocess.run(["systemd-analyze", "verify", f"--root={debian.path}", "wimz-robot-bridge.service"],
                          capture_output=True, text=True)
    assert done.returncode == 0 and "wimz-robot" not in done.stderr, done.stderr


class Served:
    """`wimz-relay serve` from the package, as its unit runs it, with its output collected."""

    def __init__(self, debian: DebianRoot, env: dict[str, str], port: int, tokens: dict[tuple[str, str], str]) -> None:
        self.base = f"http://127.0.0.1:{port}"
        #: (device, role) → the token the CLI issued.
        self.tokens = tokens
        self.process = debian.spawn("/usr/bin/wimz-relay", "serve", user="wimz-relay", env=env)
        self.lines: list[str] = []
        self.reader = threading.Thread(target=lambda: self.lines.extend(self.process.stdout or []), daemon=True)
        self.reader.start()

    def output(self) -> str:
        return "".join(self.lines)

    def wait_ready(self) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert self.process.poll() is None, "serve exited:\n" + self.output()[-3000:]
            try:
                with urllib.request.urlopen(f"{self.base}/readyz", timeout=1) as answer:
                    if answer.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise AssertionError("/readyz never answered 200:\n" + self.output()[-3000:])

    def wait_for_line(self, needle: str, timeout: float = 5) -> None:
        deadline = time.monotonic() + timeout
        while needle not in self.output():
            assert time.monotonic() < deadline, f"no {needle} in the log:\n" + self.output()[-3000:]
            time.sleep(0.1)

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=30)
        self.reader.join(timeout=5)
        return self.process.returncode


@pytest.fixture(scope="class")
def served(debian, database):
    # The operator's edit (sudoedit), then the CLI with the service's settings as the README shows.
    env_file = debian.file("/etc/wimz-relay/wimz-relay.env")
    text = re.sub(r"^WIMZ_DATABASE_URL=.*$", f"WIMZ_DATABASE_URL={database}", env_file.read_text(), flags=re.M)
    env_file.write_text(re.sub(r"^WIMZ_TURN_URLS=.*$", "WIMZ_TURN_URLS=turn:127.0.0.1:3478?transport=udp", text, flags=re.M))

    def cli(*args: str) -> str:
        return debian.run("sh", "-c", 'set -a; . /etc/wimz-relay/wimz-relay.env; exec wimz-relay "$@"', "sh", *args,
                          user="wimz-relay").stdout

    # No WIMZ_MIGRATIONS_DIR: the packaged migrations are the default.
    assert "0001_initial" in cli("migrate")
    tokens = {}
    for device in ("robot-pkg", "robot-bridge"):
        cli("device", "add", device)
        for role in ("robot", "app"):
            tokens[device, role] = cli("token", "issue", "--device", device, "--role", role).split()[-1]
    cli("turn-secret", "add")
    # An operator's APNs key, placed as the docs say (root:wimz-relay 0640): the service user reads it.
    key = debian.file("/etc/wimz-relay/AuthKey_TEST.p8")
    key.write_text(subprocess.run("openssl ecparam -name prime256v1 -genkey -noout | openssl pkcs8 -topk8 -nocrypt",
                                  shell=True, check=True, capture_output=True, text=True).stdout)
    debian.run("sh", "-c", "chown root:wimz-relay /etc/wimz-relay/AuthKey_TEST.p8 && chmod 0640 /etc/wimz-relay/AuthKey_TEST.p8")
    port = free_port()
    # The service's environment as the unit gives it: the env file, and what its unit adds.
    env = parse_env_file(env_file.read_text())
    env.update(WIMZ_LISTEN=f"127.0.0.1:{port}", WIMZ_APNS_KEY_FILE="/etc/wimz-relay/AuthKey_TEST.p8", WIMZ_APNS_KEY_ID="ABCDEFGHIJ",
               WIMZ_APNS_TEAM_ID="TEAMID1234", WIMZ_APNS_TOPIC="com.wimzai.app",
               GLIBC_TUNABLES="glibc.malloc.tcache_count=4096")
    relay = Served(debian, env, port, tokens)
    try:
        relay.wait_ready()
        yield relay
    finally:
        status = relay.stop()
    assert status == 0, relay.output()[-3000:]


class TestServedFromThePackage:
    def test_ready_with_turn_credentials_and_the_admin_token(self, debian, served):
        status, turn = http_json(f"{served.base}/api/turn/credentials", served.tokens["robot-pkg", "robot"])
        assert status == 200 and turn["username"] and turn["urls"] == ["turn:127.0.0.1:3478?transport=udp"], turn
        admin = debian.file("/etc/wimz-relay/admin-token").read_text().strip()
        assert http_json(f"{served.base}/admin/devices", admin)[0] == 200, "the package's admin token opens the admin API"
        assert http_json(f"{served.base}/admin/devices", admin + "x")[0] == 401

    def test_a_robot_and_an_app_pair(self, served):
        message = asyncio.run(_pair(served.base, "robot-pkg", served.tokens["robot-pkg", "robot"],
                                    served.tokens["robot-pkg", "app"]))
        assert message["data"] == {"confidence": 0.9}

    def test_the_bridge_writes_its_turn_file_for_its_group_only(self, debian, served):
        # As the bridge's unit runs it: user wimz-robot, UMask 0027, a 0750 runtime directory.
        debian.run("install", "-d", "-o", "wimz-robot", "-g", "wimz-robot", "-m", "0750", "/run/wimz-robot")
        bridge = debian.spawn("sh", "-c", "umask 027 && exec /opt/wimz-robot/venv/bin/wimz-robot bridge "
                              f"--relay {served.base} --device robot-bridge --local http://127.0.0.1:9 "
                              "--turn-file /run/wimz-robot/turn.json", user="wimz-robot",
                              env={"WIMZ_ROBOT_TOKEN": served.tokens["robot-bridge", "robot"]})
        try:
            deadline = time.monotonic() + 15
            while not debian.file("/run/wimz-robot/turn.json").exists():
                assert bridge.poll() is None and time.monotonic() < deadline, "no TURN file from the bridge"
                time.sleep(0.1)
        finally:
            bridge.terminate()
            bridge.communicate(timeout=10)
        assert debian.stat("/run/wimz-robot/turn.json") == ("wimz-robot", "wimz-robot", "640")
        member = debian.run("su", "-s", "/bin/sh", "robotcode", "-c", "cat /run/wimz-robot/turn.json", check=False)
        assert member.returncode == 0 and ":robot-bridge." in json.loads(member.stdout)["username"], member.stderr
        stranger = debian.run("su", "-s", "/bin/sh", "stranger", "-c", "cat /run/wimz-robot/turn.json", check=False)
        assert stranger.returncode != 0 and "Permission denied" in stranger.stderr

    def test_the_backup_service_dumps_and_rotates(self, debian, served):
        # The backup unit's command, as its unit runs it (the service user, the env file); pg_dump
        # comes with the package's Recommends.
        unit = debian.file("/lib/systemd/system/wimz-relay-backup.service").read_text()
        command = re.search(r"^ExecStart=(.*)$", unit, re.M).group(1).replace("--keep 14", "--keep 1")
        debian.run("install", "-d", "-o", "wimz-relay", "-g", "wimz-relay", "-m", "0700", "/var/lib/wimz-relay/backups")
        for _ in range(2):
            debian.run("sh", "-c", f"set -a; . /etc/wimz-relay/wimz-relay.env; umask 077; exec {command}", user="wimz-relay")
            time.sleep(1.1)  # the names have a second's resolution
        dumps = sorted(debian.file("/var/lib/wimz-relay/backups").glob("wimz-*.dump"))
        assert len(dumps) == 1, dumps
        assert dumps[0].read_bytes()[:5] == b"PGDMP"
        assert debian.stat(f"/var/lib/wimz-relay/backups/{dumps[0].name}")[0] == "wimz-relay"

    def test_reload_rereads_the_key_and_serves_on(self, served):
        # What `systemctl reload` does (ExecReload=/bin/kill -HUP $MAINPID).
        served.process.send_signal(signal.SIGHUP)
        served.wait_for_line('"apns_key_reloaded"')
        assert served.process.poll() is None
        assert http_json(f"{served.base}/api/devices/robot-pkg/status", served.tokens["robot-pkg", "app"])[0] == 200


def _later_version(debian: DebianRoot, tmp_path: Path, suffix: str, new_setting: str | None = None) -> str:
    """The package as version PACKAGE_VERSION+suffix (its env file with ``new_setting`` added), copied into
    the root; its path there."""
    unpacked = tmp_path / suffix
    subprocess.run(["dpkg-deb", "-R", str(deb_path()), str(unpacked)], check=True)
    if new_setting:
        shipped = unpacked / "etc/wimz-relay/wimz-relay.env"
        shipped.write_text(shipped.read_text() + new_setting + "\n")
    control = unpacked / "DEBIAN/control"
    control.write_text(control.read_text().replace(f"Version: {PACKAGE_VERSION}\n", f"Version: {PACKAGE_VERSION}+{suffix}\n"))
    name = f"/tmp/wimz-relay_{PACKAGE_VERSION}+{suffix}.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "-z1", "-b", str(unpacked), str(debian.file(name))],
                   check=True, capture_output=True)
    return name


def test_an_upgrade_keeps_the_configuration_and_restarts_only_when_asked(debian, tmp_path):
    env_file = debian.file("/etc/wimz-relay/wimz-relay.env")
    env_file.write_text(env_file.read_text() + "WIMZ_LOG_LEVEL=debug\n")
    token_before = debian.file("/etc/wimz-relay/admin-token").read_text()
    systemctl_calls(debian)

    upgraded = debian.run("apt-get", "install", "-y", "-q", _later_version(debian, tmp_path, "upgrade1"))
    assert f"Version: {PACKAGE_VERSION}+upgrade1" in debian.run("dpkg-query", "-s", "wimz-relay").stdout
    assert env_file.read_text().endswith("WIMZ_LOG_LEVEL=debug\n"), "the operator's env file was replaced"
    assert debian.file("/etc/wimz-relay/admin-token").read_text() == token_before, "a new admin token on upgrade"
    assert debian.stat("/etc/wimz-relay/wimz-relay.env") == ("root", "wimz-relay", "640")
    # Not asked: the running instance is named, not restarted.
    calls = systemctl_calls(debian)
    assert not any("restart" in call or "stop" in call for call in calls), calls
    assert "wimz-relay@8081.service" in upgraded.stderr and "WIMZ_RESTART_ON_UPGRADE=yes" in upgraded.stderr

    # Asked, through the server installer: deploy/install.sh --restart.
    debian.file("/tmp/deploy").mkdir(exist_ok=True)
    debian.file("/tmp/deploy/install.sh").write_bytes((ROOT / "deploy/install.sh").read_bytes())
    # This one ships a changed env file: the operator's stays, the new one lands beside it.
    debian.run("bash", "/tmp/deploy/install.sh", _later_version(debian, tmp_path, "upgrade2", "#WIMZ_NEW_SETTING="),
               "--restart")
    assert f"Version: {PACKAGE_VERSION}+upgrade2" in debian.run("dpkg-query", "-s", "wimz-relay").stdout
    assert env_file.read_text().endswith("WIMZ_LOG_LEVEL=debug\n"), "the operator's env file was replaced"
    assert debian.file("/etc/wimz-relay/wimz-relay.env.dpkg-dist").read_text().endswith("#WIMZ_NEW_SETTING=\n")
    calls = systemctl_calls(debian)
    assert "postinst: --quiet --system restart wimz-relay@8081.service" in calls, calls
    assert all("wimz-relay" in call or call.endswith("daemon-reload") for call in calls), calls


def test_remove_stops_only_the_relay_and_keeps_the_configuration(debian):
    systemctl_calls(debian)
    debian.run("apt-get", "remove", "-y", "-q", "wimz-relay")
    assert systemctl_calls(debian) == ["prerm: stop wimz-relay.service wimz-relay@*.service wimz-relay-backup.timer",
                                       "postrm: --system daemon-reload"]
    assert not debian.file("/usr/bin/wimz-relay").exists()
    assert not debian.file("/lib/systemd/system/wimz-relay.service").exists()
    for kept in ("/etc/wimz-relay/wimz-relay.env", "/etc/wimz-relay/admin-token", "/var/lib/wimz-relay/spool"):
        assert debian.file(kept).exists(), kept
    assert "wimz-relay:" in debian.file("/etc/passwd").read_text()


def test_purge_removes_it_and_keeps_only_the_operators_keys(debian):
    debian.file("/etc/systemd/system/multi-user.target.wants").mkdir(parents=True, exist_ok=True)
    debian.file("/etc/systemd/system/multi-user.target.wants/wimz-relay@8081.service").symlink_to(
        "/lib/systemd/system/wimz-relay@.service")
    debian.run("apt-get", "purge", "-y", "-q", "wimz-relay")
    assert not debian.file("/etc/systemd/system/multi-user.target.wants/wimz-relay@8081.service").is_symlink()
    # The backup made earlier stays (a purge must not take the last copy of the data); the rest goes.
    assert sorted(p.name for p in debian.file("/var/lib/wimz-relay").iterdir()) == ["backups"]
    assert len(list(debian.file("/var/lib/wimz-relay/backups").glob("wimz-*.dump"))) == 1
    assert not debian.file("/etc/wimz-relay/wimz-relay.env").exists()
    assert not debian.file("/etc/wimz-relay/admin-token").exists()
    # The operator's APNs key is not the package's to delete (Apple keeps no copy of it).
    assert sorted(p.name for p in debian.file("/etc/wimz-relay").iterdir()) == ["AuthKey_TEST.p8"]
    debian.file("/etc/wimz-relay/AuthKey_TEST.p8").unlink()
    debian.file("/etc/wimz-relay").rmdir()
    assert "wimz-relay" not in debian.run("dpkg-query", "-W", "-f", "${Package} ${Status}\n").stdout


def test_lintian_finds_nothing_unexplained():
    # Every tag left is overridden in deploy/debian/lintian-overrides with its reason.
    done = subprocess.run(["lintian", "--fail-on", "error,warning,info", "--display-info", str(deb_path())],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
