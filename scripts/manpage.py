"""Writes wimz-relay(8) to stdout from the binary's own help: its command tree
(``--experimental-dump-help``) and each command's ``--help``, so the page never disagrees with
the binary it ships with. Used by scripts/package.sh.

    python3 scripts/manpage.py BINARY VERSION EPOCH
"""

from __future__ import annotations

import json
import subprocess
import sys
import time


def roff_text(text: str) -> str:
    """Plain text as roff: backslashes and minus signs escaped, no line read as a request."""
    lines = []
    for line in text.rstrip().splitlines():
        line = line.replace("\\", "\\e").replace("-", "\\-")
        if line.startswith((".", "'")):
            line = "\\&" + line
        lines.append(line)
    return "\n".join(lines)


def commands(node: dict, path: list[str]) -> list[list[str]]:
    """Every command's path below the top, depth first, help commands left out."""
    found = []
    for sub in node.get("subcommands", []):
        if sub["commandName"] == "help" or not sub.get("shouldDisplay", True):
            continue
        here = path + [sub["commandName"]]
        found.append(here)
        found += commands(sub, here)
    return found


def main() -> None:
    binary, version, epoch = sys.argv[1], sys.argv[2], int(sys.argv[3])
    tree = json.loads(subprocess.run([binary, "--experimental-dump-help"], check=True, capture_output=True, text=True).stdout)["command"]
    date = time.strftime("%Y-%m-%d", time.gmtime(epoch))
    out = [
        f'.TH WIMZ\\-RELAY 8 "{date}" "wimz\\-relay {version}" "System Administration"',
        ".SH NAME",
        "wimz\\-relay \\- " + roff_text(tree["abstract"]).replace("\n", " "),
        ".SH SYNOPSIS",
        ".B wimz\\-relay",
        ".I command",
        ".RI [ options ]",
        ".br",
        ".B wimz\\-relay \\-\\-version",
        ".SH DESCRIPTION",
        roff_text(" ".join(tree.get("discussion", "").split())),
        ".PP",
        "The service runs as",
        ".B wimz\\-relay serve",
        "under systemd (wimz\\-relay.service, or wimz\\-relay@PORT.service for one process per core),",
        "with its settings from /etc/wimz\\-relay/wimz\\-relay.env.",
        "SIGHUP re\\-reads the TLS certificate and key and the APNs key",
        "(systemctl reload); SIGTERM drains and stops.",
        ".SH COMMANDS",
    ]
    for path in commands(tree, []):
        help_text = subprocess.run([binary, *path, "--help"], check=True, capture_output=True, text=True).stdout
        out += [f'.SS "wimz\\-relay {roff_text(" ".join(path))}"', ".nf", roff_text(help_text), ".fi"]
    out += [
        ".SH FILES",
        ".TP",
        ".I /etc/wimz\\-relay/wimz\\-relay.env",
        "Every setting of serve, commented (root:wimz\\-relay 0640).",
        ".TP",
        ".I /etc/wimz\\-relay/admin\\-token",
        "The admin API's bearer token, made on the first install.",
        ".TP",
        ".I /usr/share/wimz\\-relay/migrations",
        "The database migrations that migrate applies.",
        ".TP",
        ".I /var/lib/wimz\\-relay/spool",
        "Audit events kept while the database is unreachable.",
        ".SH SEE ALSO",
        ".BR systemctl (1),",
        ".BR turnserver (1),",
        ".BR haproxy (1);",
        "/usr/share/doc/wimz\\-relay/README.md and operations.md beside it.",
    ]
    print("\n".join(out))


if __name__ == "__main__":
    main()
