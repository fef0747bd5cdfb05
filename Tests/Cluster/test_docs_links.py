"""Every link in the repository's Markdown points inside the repository, at a file that exists
and, with a #fragment, at a heading that exists there (GitHub's anchors). A link that leaves
the repository — a path above its root or a web address — fails: a clone must be complete."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|^\s*\[[^\]\n]+\]:\s*(\S+)", re.MULTILINE)


def markdown_files() -> list[Path]:
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "*.md"], capture_output=True, text=True, check=True)
    return [ROOT / name for name in listed.stdout.split()]


def prose(text: str) -> str:
    """The text without fenced code blocks and code spans (links there are examples)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)
    return re.sub(r"`[^`\n]*`", "", text)


def anchors(markdown: Path) -> set[str]:
    """GitHub's heading anchors (lower case, punctuation dropped, spaces as hyphens, -N for
    repeats) and explicit `<a id>` ones."""
    seen: dict[str, int] = {}
    out = set()
    text = re.sub(r"^```.*?^```", "", markdown.read_text(), flags=re.MULTILINE | re.DOTALL)
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", text, flags=re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        out.add(slug if count == 0 else f"{slug}-{count}")
    return out | set(re.findall(r'<a (?:id|name)="([^"]+)"', text))  # explicit anchors (the runbook's alert names)


def broken_links(markdown: Path) -> list[str]:
    problems = []
    for match in LINK.finditer(prose(markdown.read_text())):
        target = match.group(1) or match.group(2)
        where = f"{markdown.relative_to(ROOT)}: {target}"
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):
            problems.append(f"{where} leaves the repository")
            continue
        path, _, fragment = target.partition("#")
        resolved = (markdown.parent / path).resolve() if path else markdown
        if ROOT not in resolved.parents and resolved != ROOT:
            problems.append(f"{where} leaves the repository")
        elif not resolved.exists():
            problems.append(f"{where} points to a missing file")
        elif fragment and resolved.suffix == ".md" and fragment not in anchors(resolved):
            problems.append(f"{where} points to a missing anchor")
    return problems


def test_every_markdown_link_stays_inside_the_repository_and_resolves():
    files = markdown_files()
    assert len(files) >= 10, files  # the docs are there to check
    problems = [problem for markdown in files for problem in broken_links(markdown)]
    assert problems == [], "\n".join(problems)


def test_the_checker_catches_what_it_should(tmp_path):
    page = ROOT / "docs" / "protocol.md"
    assert "the-two-sockets" in anchors(page) and "client-conventions-wimzrelayclient-wimz-robot" in anchors(page)
    bad = ROOT / "docs" / ".link-check-probe.md"
    bad.write_text("[a](../../outside.md) [b](missing.md) [c](protocol.md#no-such-heading) [d](https://example.com)\n"
                   "[e](protocol.md#the-two-sockets) `[f](https://in-code.example)`\n")
    try:
        found = broken_links(bad)
    finally:
        bad.unlink()
    assert [p.split(" ", 2)[2] for p in found] == ["leaves the repository", "points to a missing file",
                                                   "points to a missing anchor", "leaves the repository"]


def test_architecture_names_only_what_exists():
    """Every `Type.member`, `function()` and `File.swift` docs/architecture.md names exists in
    the Swift sources or tests (a renamed function leaves the document stale otherwise)."""
    sources = {path: path.read_text() for folder in ("Sources", "Tests", "clients/swift/Sources")
               for path in (ROOT / folder).rglob("*.swift") if "/.build" not in str(path)}
    everything = "\n".join(sources.values())
    names = set(re.findall(r"`([^`\n]+)`", (ROOT / "docs" / "architecture.md").read_text()))
    stale = []
    for code in names:
        for file in re.findall(r"([\w+/]+\.swift)", code):
            # A path (`Turn/TurnEndpoint.swift`) must name the folders the file is in too.
            if not any(f"/{path.relative_to(ROOT)}".endswith("/" + file) for path in sources):
                stale.append(f"file {file}")
        for type_name, member in re.findall(r"\b([A-Z][A-Za-z0-9]+)\.([a-z][A-Za-z0-9]*)\b(?!\.swift)", code):
            if member == "swift":
                continue
            homes = [text for text in sources.values()
                     if re.search(rf"\b(class|struct|enum|actor|protocol|extension|typealias)\s+{type_name}\b", text)]
            if not homes:
                stale.append(f"type {type_name}")
            elif not any(re.search(rf"\b(func|var|let|case)\s+{member}\b|case\s[^\n]*\b{member}\b", text) for text in homes):
                stale.append(f"{type_name}.{member}")
        for function in re.findall(r"\b([a-z][A-Za-z0-9]+)\(\)", code):
            if not re.search(rf"func\s+{function}\b", everything):
                stale.append(f"{function}()")
    assert sorted(set(stale)) == []
