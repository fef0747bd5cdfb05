"""The app libraries' package (clients/swift, issue 54): an app that depends on it, published as
the README's SwiftPM line names it (scripts/publish-client.sh), resolves none of the daemon's
packages."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLIENT = "wimz-relay-client"
# The daemon's own packages, by name: an app must never resolve these, whatever the manifests say.
DAEMON_PACKAGES = {"async-http-client", "swift-argument-parser", "swift-log", "swift-metrics", "swift-prometheus"}

APP_MANIFEST = """// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "scratch-app",
    platforms: [.iOS(.v17), .macOS(.v14)],
    dependencies: [.package(url: "file://{published}", branch: "main")],
    targets: [
        .target(name: "App", dependencies: [
            .product(name: "WimzRelayClient", package: "{client}"),
            .product(name: "WimzRobot", package: "{client}"),
        ]),
    ]
)
"""


def dependency_tree(package: Path, scratch: Path | None = None) -> dict:
    """SwiftPM's resolved graph of ``package`` (``show-dependencies``: each node with its own)."""
    command = ["swift", "package", "--package-path", str(package)]
    if scratch:
        command += ["--scratch-path", str(scratch)]
    done = subprocess.run(command + ["show-dependencies", "--format", "json"], capture_output=True, text=True,
                          timeout=600, env={**os.environ, "SWIFTPM_DISABLE_SANDBOX": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout[done.stdout.index("{"):])


def names(node: dict) -> set[str]:
    """Every package below ``node`` (not the node itself), by its manifest's name (a package
    depended on by path has its folder's name as identity)."""
    found: set[str] = set()
    for child in node.get("dependencies", []):
        found |= {child["name"]} | names(child)
    return found


def find(node: dict, name: str) -> dict | None:
    for child in node.get("dependencies", []):
        if child["name"] == name:
            return child
        if (below := find(child, name)) is not None:
            return below
    return None


def declared(manifest: Path) -> set[str]:
    """The packages a manifest names by URL."""
    return set(re.findall(r'\.package\(url: "https://github\.com/[^/"]+/([^/"]+?)(?:\.git)?"', manifest.read_text()))


def test_an_app_depending_on_the_client_resolves_none_of_the_daemons_packages(tmp_path):
    # Daemon-only: the daemon's own packages, what its manifest names and the client's doesn't, and
    # whatever else its graph holds outside the client package's part of it.
    daemon = dependency_tree(ROOT)
    client = find(daemon, CLIENT)
    assert client is not None, f"the daemon no longer depends on {CLIENT}"
    client_closure = names(client)
    daemon_direct = declared(ROOT / "Package.swift") - declared(ROOT / "clients" / "swift" / "Package.swift")
    assert DAEMON_PACKAGES <= names(daemon)
    daemon_only = (names(daemon) - client_closure - {CLIENT}) | daemon_direct | DAEMON_PACKAGES
    assert "swift-nio" in client_closure

    published = tmp_path / f"{CLIENT}.git"
    subprocess.run([str(ROOT / "scripts" / "publish-client.sh"), "--to", str(published)], check=True, timeout=120)
    app = tmp_path / "app"
    (app / "Sources" / "App").mkdir(parents=True)
    (app / "Package.swift").write_text(APP_MANIFEST.format(published=published, client=CLIENT))
    (app / "Sources" / "App" / "App.swift").write_text("import WimzRobot\n")

    resolved = names(dependency_tree(app, tmp_path / ".build-app"))
    assert CLIENT in resolved
    assert resolved & daemon_only == set(), "the app resolves packages only the daemon needs"
    assert resolved - {CLIENT} <= client_closure
