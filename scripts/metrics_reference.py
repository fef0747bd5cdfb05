#!/usr/bin/env python3
"""docs/metrics.md's table from what a relay exports: every metric's name, type, label names and
help text, read from its /metrics text (Prometheus exposition format) on standard input. The help
texts are the ones the code that counts writes (each component's `report(to:)`), so the table says
what the code does. scripts/generate.sh writes the table from a relay it starts, and
Tests/Cluster/test_dashboard.py checks it against a live relay.
    curl -s http://127.0.0.1:8080/metrics | python3 scripts/metrics_reference.py"""

from __future__ import annotations

import re
import sys

BEGIN = "<!-- metrics:begin (scripts/generate.sh) -->\n"
END = "<!-- metrics:end -->"
SERIES = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? ")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="')


def metrics(text: str) -> dict[str, dict[str, object]]:
    """name → {"type", "help", "labels"} for every metric the text declares."""
    found: dict[str, dict[str, object]] = {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name, _, help_text = line[len("# HELP "):].partition(" ")
            found.setdefault(name, {"type": "", "help": "", "labels": set()})["help"] = help_text.replace("\\\\", "\\")
        elif line.startswith("# TYPE "):
            name, _, kind = line[len("# TYPE "):].partition(" ")
            found.setdefault(name, {"type": "", "help": "", "labels": set()})["type"] = kind
        elif (match := SERIES.match(line)) and match[2]:
            name = re.sub(r"_(bucket|sum|count)$", "", match[1]) if match[1] not in found else match[1]
            if name in found:
                labels = found[name]["labels"]
                assert isinstance(labels, set)
                labels.update(label for label in LABEL.findall(match[2]) if label != "le")
    return found


def table(text: str) -> str:
    """The Markdown table of the relay's own metrics (wimz_…), by name."""
    rows = ["| metric | type | labels | what it counts |", "|---|---|---|---|"]
    for name, metric in sorted(metrics(text).items()):
        if not name.startswith("wimz_"):
            continue
        labels = ", ".join(f"`{label}`" for label in sorted(metric["labels"]))  # type: ignore[call-overload]
        help_text = str(metric["help"]).replace("|", "\\|")
        rows.append(f"| `{name}` | {metric['type']} | {labels} | {help_text} |")
    return "\n".join(rows) + "\n"


def replaced(document: str, text: str) -> str:
    """``document`` with the table between its markers made from ``text``."""
    head, rest = document.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return head + BEGIN + table(text) + END + tail


if __name__ == "__main__":
    print(table(sys.stdin.read()), end="")
