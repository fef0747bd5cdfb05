"""What the docs name exists: every repository path written in code (`scripts/…`, `deploy/…`),
every `WIMZ_*` setting, every section cited by its title (`operations.md "Roll back"`, also from
code comments) and every `wimz-relay` command. A rename that leaves the docs behind fails here."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from test_docs_links import markdown_files

ROOT = Path(__file__).resolve().parents[2]
PATH = re.compile(r"(?<![\w./-])((?:scripts|deploy|docs|systemd|migrations|clients|Tests|Sources)/[\w./@-]*[\w/])")
# A placeholder inside a path: the reader fills it in.
PLACEHOLDER = re.compile(r"NAME|VERSION|KEYID|…|\*|<|\{")
SECTION = re.compile(r"(?<![\w/.-])((?:[\w./-]+/)?(?:[\w-]+\.md|README))(?:'s)?,? (?:part two, )?\"([^\"\n]{3,80})\"")
SETTING = re.compile(r"\bWIMZ_[A-Z0-9_]*[A-Z0-9]\b")


def tracked(*patterns: str) -> list[Path]:
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", *patterns], capture_output=True, text=True, check=True)
    return [ROOT / name for name in listed.stdout.split()]


def code_spans(text: str) -> list[str]:
    """Fenced blocks and inline code spans of a Markdown text."""
    return re.findall(r"^```.*?^```", text, flags=re.M | re.S) + re.findall(r"`[^`\n]+`", text)


def headings(markdown: Path) -> list[str]:
    text = re.sub(r"^```.*?^```", "", markdown.read_text(), flags=re.M | re.S)
    return [h.strip().lower() for h in re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", text, flags=re.M)]


def resolve_doc(name: str, cited_from: Path) -> Path | None:
    """The Markdown file a citation names: as a path from the repository's root or the citing
    file, or by its file name under docs/ and the root."""
    name = "README.md" if name == "README" else name
    for candidate in (ROOT / name, cited_from.parent / name, ROOT / "docs" / Path(name).name, ROOT / Path(name).name):
        if candidate.is_file():
            return candidate
    return None


def missing_paths(markdown: Path) -> list[str]:
    if markdown.name == "CHANGELOG.md":
        return []  # history: it names what was removed
    found = []
    for span in code_spans(markdown.read_text()):
        for path in PATH.findall(span):
            if not PLACEHOLDER.search(path) and not (ROOT / path).exists():
                found.append(f"{markdown.relative_to(ROOT)}: {path}")
    return found


def missing_sections(files: list[Path]) -> list[str]:
    found = []
    for source in files:
        where = source.relative_to(ROOT) if ROOT in source.parents else source.name
        for name, title in SECTION.findall(source.read_text(errors="replace")):
            target = resolve_doc(name, source)
            if target is None:
                found.append(f"{where}: {name} does not exist")
            elif not any(h.startswith(title.lower()) for h in headings(target)):
                found.append(f"{where}: {name} has no section \"{title}\"")
    return found


def test_every_path_the_docs_write_exists():
    problems = [problem for markdown in markdown_files() for problem in missing_paths(markdown)]
    assert problems == [], "\n".join(problems)


def test_every_section_cited_by_title_exists_in_docs_and_code():
    files = [p for p in tracked("*.md", "*.swift", "*.py", "*.sh", "*.sql", "*.yml", "*.cfg", "*.conf", "*.service")
             if p.is_file()] + [p for p in (ROOT / "deploy").rglob("*") if p.is_file() and not p.suffix]
    problems = missing_sections([p for p in files if p != Path(__file__).resolve()])  # (its own probes below)
    assert problems == [], "\n".join(problems)


def test_every_setting_the_docs_name_is_read_somewhere():
    code = "\n".join(p.read_text(errors="replace") for p in tracked("*.swift", "*.sh", "*.py", "*.example", "*.service")
                     if p.is_file())
    known = set(SETTING.findall(code))
    # The push alerts' localisation keys: "WIMZ_" + the kind's raw value, upper case (PushKind.locKey).
    kinds = (ROOT / "clients/swift/Sources/WimzProtocol/WimzProtocol.swift").read_text().split("enum PushKind", 1)[1].split("}", 1)[0]
    known |= {"WIMZ_" + kind.upper() for kind in re.findall(r'case \w+ = "(\w+)"', kinds)}
    problems = sorted({f"{markdown.relative_to(ROOT)}: {name}" for markdown in markdown_files()
                       for name in SETTING.findall(markdown.read_text()) if name not in known})
    assert problems == [], "\n".join(problems)


def test_every_relay_command_the_docs_show_exists():
    relay = os.environ["WIMZ_RELAY_BIN"]
    top = subprocess.run([relay, "--help"], capture_output=True, text=True, check=True).stdout
    commands = set(re.findall(r"^\s{2,}([a-z][a-z-]+)\s", top.split("SUBCOMMANDS:")[-1], flags=re.M))
    assert {"serve", "migrate", "token", "device"} <= commands, top
    problems = set()
    for markdown in markdown_files():
        for span in code_spans(markdown.read_text()):
            for match in re.finditer(r"(?:^|[\s;'(])wimz-relay ([a-z][a-z-]+)", span, flags=re.M):
                command = match.group(1)
                if command not in commands and not span[:match.start() + 1].endswith("-u "):  # sudo -u wimz-relay sh
                    problems.add(f"{markdown.relative_to(ROOT)}: wimz-relay {command}")
    assert not problems, "\n".join(sorted(problems))


def test_the_checkers_catch_what_they_should(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("See `scripts/no-such.sh`, `deploy/debian/postinst`, `scripts/NAME.sh`.\n"
                    'As operations.md "Roll back" and README "No such section" say; docs/gone.md "X y z".\n')
    assert missing_paths_under(page) == ["scripts/no-such.sh"]
    assert [p.split(": ", 1)[1] for p in missing_sections([page])] == [
        'README has no section "No such section"', "docs/gone.md does not exist"]


def missing_paths_under(page: Path) -> list[str]:
    """missing_paths for a page outside the repository (the checker's own test)."""
    return [path for span in code_spans(page.read_text()) for path in PATH.findall(span)
            if not PLACEHOLDER.search(path) and not (ROOT / path).exists()]


def readme_layout() -> set[str]:
    """The paths the README's layout block names, each from its place in the tree: an entry's
    names stand before its description (two spaces or more), separated by commas or spaces, each
    under the nearest folder above it that is indented less; deeper-indented lines continue a
    description."""
    text = (ROOT / "README.md").read_text()
    block = re.search(r"^### Layout\n+```\n(.*?)^```", text, flags=re.M | re.S)
    assert block, "README.md has no layout block under ### Layout"
    named: set[str] = set()
    parents: list[tuple[int, str]] = []  # (indent, folder) of the entries above
    for line in block[1].splitlines():
        indent = len(line) - len(line.lstrip(" "))
        if not line.strip() or indent > 8:
            continue  # a description's next line
        names = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0]
        while parents and parents[-1][0] >= indent:
            parents.pop()
        base = parents[-1][1] if parents else ""
        tokens = [t for t in re.split(r"[,\s]+", names) if t]
        for token in tokens:
            named.add(base + token.rstrip("/"))
        if len(tokens) == 1 and tokens[0].endswith("/"):
            parents.append((indent, base + tokens[0]))
    return named


def test_the_readmes_layout_names_what_exists_and_every_target_folder():
    named = readme_layout()
    missing = sorted(path for path in named if not (ROOT / path).exists())
    assert missing == [], f"README's layout names what does not exist: {missing}"
    # Every target's folder (the daemon's, the app libraries', the tests') and every feature
    # folder of the server is in the tree.
    folders = [p for pattern in ("Sources/*", "clients/swift/Sources/*", "Sources/RelayServer/*", "Tests/*")
               for p in ROOT.glob(pattern) if p.is_dir() and any(tracked(str(p.relative_to(ROOT))))]
    unnamed = sorted(str(p.relative_to(ROOT)) for p in folders if str(p.relative_to(ROOT)) not in named)
    assert unnamed == [], f"README's layout leaves out: {unnamed}"


def test_the_layout_reader_places_names_under_their_folders(monkeypatch, tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("### Layout\n\n```\nSources/            the daemon\n  A, B               two targets\n"
                      "                     A/ a continued description\n  Core/\n    X.swift        a file\n"
                      "  Auth/ Turn/        folders\ndocs/                the docs\n```\n")
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    assert readme_layout() == {"Sources", "Sources/A", "Sources/B", "Sources/Core", "Sources/Core/X.swift",
                               "Sources/Auth", "Sources/Turn", "docs"}
