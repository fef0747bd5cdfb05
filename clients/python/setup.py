"""The robot library's build (setuptools; the rest is in pyproject.toml). Built inside the
repository — `pip install ./clients/python` — its version says which commit it is, as the relay's
does: VERSION on the release's tag, VERSION.devN+gHASH between releases (scripts/lib.sh's
`package_version python`, the one rule for every part). Built outside it (from an sdist, or the
copy scripts/package-robot.sh stamps) it keeps the version its `_version.py` holds."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = Path(__file__).resolve().parent
VERSION_FILE = Path("wimz_robot") / "_version.py"
STAMP = '"""The version of the robot library: the package\'s, stamped at its build (setup.py)."""\n\n__version__ = "{}"\n'


def stamped_version() -> str:
    match = re.search(r'__version__ = "([^"]+)"', (HERE / VERSION_FILE).read_text())
    if not match:
        raise RuntimeError(f"no __version__ in {VERSION_FILE}")
    return match[1]


def checkout_version() -> str | None:
    """The version scripts/lib.sh gives this checkout, or None outside the repository."""
    repository = HERE.parents[1]
    if not (repository / "scripts" / "lib.sh").is_file() or not (repository / "VERSION").is_file():
        return None
    try:
        found = subprocess.run(["bash", "-c", "source scripts/lib.sh && package_version python"], cwd=repository,
                               capture_output=True, text=True, check=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return found.stdout.strip() or None


VERSION = checkout_version() or stamped_version()


def stamp(target: Path) -> None:
    """Writes VERSION into a built copy of `_version.py`, which may be a hard link to the
    checkout's file: replaced, never written through."""
    target.unlink()
    target.write_text(STAMP.format(VERSION))


class StampedBuild(build_py):
    """The built package's `_version.py` says VERSION, so `wimz-robot --version` does too."""

    def run(self) -> None:
        super().run()
        stamp(Path(self.build_lib) / VERSION_FILE)


class StampedSdist(sdist):
    """An sdist carries the version it was made with (it is built outside the repository later)."""

    def make_release_tree(self, base_dir: str, files: list[str]) -> None:
        super().make_release_tree(base_dir, files)
        stamp(Path(base_dir) / VERSION_FILE)


setup(version=VERSION, cmdclass={"build_py": StampedBuild, "sdist": StampedSdist})
