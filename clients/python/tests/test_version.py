"""The installed library says which build it is, as the relay and the packages do: the test
command installs it with `pip install ./clients/python`, as the README has robot developers do,
so at a development commit it must say VERSION.devN+gHASH, not the release it leads to."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def checkout_version() -> str:
    return subprocess.run(["bash", "-c", "source scripts/lib.sh && package_version python"], cwd=ROOT,
                          capture_output=True, text=True, check=True).stdout.strip()


def test_the_installed_library_says_which_commit_it_was_built_from(tmp_path):
    expected = checkout_version()
    assert expected.startswith((ROOT / "VERSION").read_text().strip())
    assert metadata.version("wimz-robot") == expected
    # The installed command, away from the checkout (whose own _version.py names the release).
    command = Path(sys.executable).parent / "wimz-robot"
    said = subprocess.run([str(command), "--version"], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert said.stdout.strip() == expected
