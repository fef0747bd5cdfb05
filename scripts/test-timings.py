#!/usr/bin/env python3
"""Where scripts/test.sh spent its time, printed at the end of a run: every step, then the slowest
suites of every runner (swift test's "Suite X passed after N seconds" lines, pytest's JUnit reports
summed by test file). Reads the folder test.sh records into; prints nothing it cannot read.
    python3 scripts/test-timings.py FOLDER [HOW_MANY]"""

from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ElementTree
from collections import defaultdict
from pathlib import Path

SWIFT_SUITE = re.compile(r"^[✔✘] Suite (\S+) (?:passed|failed) after ([0-9.]+) seconds")


def steps(folder: Path) -> list[tuple[str, float]]:
    path = folder / "steps"
    if not path.exists():
        return []
    rows = [line.rsplit("\t", 1) for line in path.read_text().splitlines() if "\t" in line]
    return [(name, float(seconds)) for name, seconds in rows]


def swift_suites(folder: Path) -> dict[str, float]:
    """Each suite's own time (a suite's tests run in parallel, so these overlap)."""
    suites: dict[str, float] = {}
    for log in sorted(folder.glob("swift-*.log")):
        # swift-address-XXXX.log: the run under that sanitizer.
        sanitizer = log.name.split("-")[1] if log.name.count("-") > 1 else ""
        sanitized = f" ({sanitizer})" if sanitizer else ""
        for line in log.read_text(errors="replace").splitlines():
            if match := SWIFT_SUITE.match(line):
                name = f"swift {match[1]}{sanitized}"
                suites[name] = max(suites.get(name, 0.0), float(match[2]))
    return suites


def pytest_files(folder: Path) -> dict[str, float]:
    """Each test file's summed test time (pytest runs one test at a time)."""
    files: dict[str, float] = defaultdict(float)
    for report in sorted(folder.glob("junit-*.xml")):
        try:
            root = ElementTree.parse(report).getroot()
        except ElementTree.ParseError:
            continue
        for case in root.iter("testcase"):
            module = case.get("classname", "?").split(".")
            # "tests.test_bridge" or "test_fleet.TestX": the part that names the file.
            name = next((part for part in module if part.startswith("test_")), module[-1])
            files[f"pytest {report.stem.removeprefix('junit-')}/{name}.py"] += float(case.get("time", 0) or 0)
    return files


def main() -> None:
    folder = Path(sys.argv[1])
    how_many = int(sys.argv[2]) if len(sys.argv) > 2 else 15
    recorded = steps(folder)
    if recorded:
        print("\nwhere the time went (seconds):")
        for name, seconds in recorded:
            print(f"  {seconds:7.0f}  {name}")
    suites = {**swift_suites(folder), **pytest_files(folder)}
    if suites:
        print(f"the slowest suites (of {len(suites)}; swift suites overlap, pytest files do not):")
        for name, seconds in sorted(suites.items(), key=lambda item: -item[1])[:how_many]:
            print(f"  {seconds:7.1f}  {name}")


if __name__ == "__main__":
    main()
