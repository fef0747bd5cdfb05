"""A throwaway Debian 12 root to install the package into, as Debian tests packages: debootstrap
(minbase) from the mirror this machine's apt uses, then commands run in it with chroot. Every
command runs in a mount namespace of its own (unshare), so /proc and /dev, mounted for it there,
vanish with it: nothing is left mounted below the test's folder, whatever fails."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

SUITE = "bookworm"


def debian_sources() -> list[tuple[str, str, str]]:
    """(uri, suite, components) of this machine's Debian 12 apt sources, one- and deb822-style."""
    found: list[tuple[str, str, str]] = []
    files = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*.list")),
             *sorted(Path("/etc/apt/sources.list.d").glob("*.sources"))]
    for path in files:
        if not path.is_file():
            continue
        text = path.read_text()
        if path.suffix == ".sources":
            for stanza in re.split(r"\n\s*\n", text):
                fields = dict(re.findall(r"^(\w[\w-]*):\s*(.*)$", stanza, re.M))
                if "deb" not in fields.get("Types", "").split() or fields.get("Enabled", "yes") == "no":
                    continue
                for uri in fields.get("URIs", "").split():
                    for suite in fields.get("Suites", "").split():
                        found.append((uri, suite, fields.get("Components", "main")))
        else:
            for line in text.splitlines():
                words = re.sub(r"\[[^]]*\]", "", line.split("#", 1)[0]).split()
                if len(words) >= 4 and words[0] == "deb":
                    found.append((words[1], words[2], " ".join(words[3:])))
    return [s for s in found if s[1] == SUITE or s[1].startswith(SUITE + "-") or s[1].startswith(SUITE + "/")]


class DebianRoot:
    """A Debian 12 minbase root at ``path``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def bootstrap(cls, path: Path) -> tuple["DebianRoot", float]:
        """A new root at ``path``; it and the seconds it took. A copy of WIMZ_DEBIAN_ROOT_TEMPLATE
        when that names one (the test command debootstraps it while it builds), else debootstrapped
        here."""
        template = os.environ.get("WIMZ_DEBIAN_ROOT_TEMPLATE")
        if template and Path(template, "etc/debian_version").is_file():
            started = time.monotonic()
            subprocess.run(["cp", "-a", "--reflink=auto", template, str(path)], check=True)
            return cls(path), time.monotonic() - started
        return cls.debootstrap(path)

    @classmethod
    def debootstrap(cls, path: Path) -> tuple["DebianRoot", float]:
        """debootstraps a new root; it and the seconds it took."""
        sources = debian_sources()
        mirror = next((uri for uri, suite, _ in sources if suite == SUITE), "http://deb.debian.org/debian")
        started = time.monotonic()
        done = subprocess.run(["unshare", "--mount", "--propagation", "private",
                               "debootstrap", "--variant=minbase", SUITE, str(path), mirror],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"debootstrap failed: {done.stdout[-2000:]}{done.stderr[-2000:]}")
        root = cls(path)
        # The same archive sections as the host (point releases and security updates), so the
        # package's versioned dependencies resolve as they do on an up-to-date server.
        lines = [f"deb {uri} {suite} {components}" for uri, suite, components in sources] or [f"deb {mirror} {SUITE} main"]
        (path / "etc/apt/sources.list").write_text("\n".join(dict.fromkeys(lines)) + "\n")
        shutil.copy("/etc/resolv.conf", path / "etc/resolv.conf")
        root.run("apt-get", "update", "-q")
        return root, time.monotonic() - started

    def command(self, *argv: str, user: str | None = None, env: dict[str, str] | None = None) -> list[str]:
        """The host command line that runs ``argv`` inside the root (as ``user``, a user name of the
        root's own, with only ``env``)."""
        environment = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8", "HOME": "/root",
                       "DEBIAN_FRONTEND": "noninteractive", **(env or {})}
        inner = ["env", "-i", *(f"{k}={v}" for k, v in environment.items()), *argv]
        # Numeric ids: chroot may look a name up on the host first, where it means someone else.
        chroot = ["chroot", *([f"--userspec={self.ids(user)}"] if user else []), str(self.path), *inner]
        mounts = (f"mount -t proc proc {shlex.quote(str(self.path / 'proc'))} && "
                  f"mount --bind /dev {shlex.quote(str(self.path / 'dev'))} && exec \"$@\"")
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c", mounts, "sh", *chroot]

    def ids(self, user: str) -> str:
        """``uid:gid`` of the root's ``user``."""
        line = next(l for l in self.file("/etc/passwd").read_text().splitlines() if l.startswith(user + ":"))
        fields = line.split(":")
        return f"{fields[2]}:{fields[3]}"

    def run(self, *argv: str, user: str | None = None, env: dict[str, str] | None = None,
            check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(self.command(*argv, user=user, env=env), capture_output=True, text=True)
        if check and done.returncode != 0:
            raise AssertionError(f"{' '.join(argv)} in the root: exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        return done

    def spawn(self, *argv: str, user: str | None = None, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        return subprocess.Popen(self.command(*argv, user=user, env=env), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)

    def file(self, path: str) -> Path:
        return self.path / path.lstrip("/")

    def stat(self, path: str) -> tuple[str, str, str]:
        """(owner, group, octal mode) of ``path`` as the root's own users and groups name them."""
        out = self.run("stat", "-c", "%U %G %a", path).stdout.split()
        return out[0], out[1], out[2]


def parse_env_file(text: str) -> dict[str, str]:
    """KEY=VALUE lines as systemd's EnvironmentFile= reads the package's env file (no quoting used)."""
    return dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#") and "=" in line)


if __name__ == "__main__":
    # python3 debian_root.py PATH: debootstraps a root there (the test command's template).
    _, seconds = DebianRoot.debootstrap(Path(sys.argv[1]))
    print(f"debootstrap of a Debian 12 minbase root: {seconds:.0f} s")
