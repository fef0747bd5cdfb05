"""Limits that keep the Swift code readable (issue 44): no file over 450 lines and no function over
80, counted as code — lines with something left once comments and string literals' contents are
taken out (a long SQL statement or help text does not count, its Swift does) — and no folder of
Sources/ or clients/swift/Sources/ with more than 20 Swift files directly in it (HTTP/ at most 8: the front door only)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_FILE_LINES = 450
MAX_FUNCTION_LINES = 80
MAX_FILES_PER_FOLDER = 20
MAX_FILES_IN_HTTP = 8
# The app libraries, a package of their own.
SOURCES_OF_CLIENTS = "clients/swift/Sources"

STRING_START = re.compile(r'(#*)("""|")')
DECLARATION = re.compile(r"(?<![.\w])(?:func\s+[^\s(<]+|init[?!]?(?=\s*[(<])|deinit\b|subscript(?=\s*[(<]))")


def code_of(source: str) -> str:
    """``source`` with comments removed and every string literal reduced to ``""``; line breaks
    inside them are kept, so line numbers stay the same."""
    out: list[str] = []
    i, n = 0, len(source)
    while i < n:
        if source.startswith("//", i):
            end = source.find("\n", i)
            i = n if end < 0 else end
        elif source.startswith("/*", i):
            depth = 0
            while i < n:
                if source.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif source.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    out.append("\n" if source[i] == "\n" else "")
                    i += 1
                if depth == 0:
                    break
        elif (match := STRING_START.match(source, i)) and (source[i] == '"' or match.group(1)):
            i = skip_string(source, i, match, out)
        else:
            out.append(source[i])
            i += 1
    return "".join(out)


def skip_string(source: str, i: int, match: re.Match[str], out: list[str]) -> int:
    """Skips the literal that ``match`` opens at ``i`` (raw, multi-line, with interpolations),
    leaving ``""`` and its line breaks in ``out``; the index after it."""
    hashes, quote = match.group(1), match.group(2)
    close, j, n = quote + hashes, match.end(), len(source)
    escape = "\\" + hashes
    out.append('""')
    while j < n:
        if source.startswith(escape + "(", j):
            depth, j = 1, j + len(escape) + 1
            while j < n and depth:
                depth += {"(": 1, ")": -1}.get(source[j], 0)
                if source[j] == "\n":
                    out.append("\n")
                j += 1
        elif source.startswith(escape, j):
            j += len(escape) + 1
        elif source.startswith(close, j):
            j += len(close)
            break
        else:
            if source[j] == "\n":
                out.append("\n")
            j += 1
    return j


def counted(lines: list[str]) -> int:
    """Lines of code among ``lines``: not blank, not a lone brace or bracket."""
    return sum(1 for line in lines if line.strip() and line.strip() not in {"{", "}", "(", ")", "[", "]", "})", "])"})


def functions(code: str) -> list[tuple[str, int, int]]:
    """Every function, initializer and subscript with a body: (name, first line, lines of code)."""
    found = []
    for match in DECLARATION.finditer(code):
        depth, j = 0, match.end()
        while j < len(code) and not (code[j] == "{" and depth == 0):
            depth += {"(": 1, ")": -1, "[": 1, "]": -1}.get(code[j], 0)
            if code[j] == "}" and depth == 0:  # a protocol requirement: no body
                break
            j += 1
        if j >= len(code) or code[j] != "{":
            continue
        start, braces = j, 0
        while j < len(code):
            braces += {"{": 1, "}": -1}.get(code[j], 0)
            if braces == 0:
                break
            j += 1
        first = code.count("\n", 0, match.start()) + 1
        found.append((match.group(0), first, counted(code[match.start():j + 1].split("\n"))))
    return found


def swift_files() -> list[Path]:
    return sorted(path for folder in ("Sources", "Tests", SOURCES_OF_CLIENTS) for path in (ROOT / folder).rglob("*.swift")
                  if "/.build" not in str(path))


def test_no_file_over_450_lines_of_code():
    long = {str(path.relative_to(ROOT)): lines for path in swift_files()
            if (lines := counted(code_of(path.read_text()).split("\n"))) > MAX_FILE_LINES}
    assert long == {}


def test_no_function_over_80_lines_of_code():
    long = [f"{path.relative_to(ROOT)}:{line} {name} ({lines} lines)" for path in swift_files()
            for name, line, lines in functions(code_of(path.read_text())) if lines > MAX_FUNCTION_LINES]
    assert long == []


def test_no_crowded_folder():
    crowded = {}
    roots = [ROOT / "Sources", ROOT / SOURCES_OF_CLIENTS]
    for folder in [*roots, *(path for root in roots for path in root.rglob("*") if "/.build" not in str(path))]:
        if folder.is_dir():
            count = len(list(folder.glob("*.swift")))
            limit = MAX_FILES_IN_HTTP if folder.name == "HTTP" else MAX_FILES_PER_FOLDER
            if count > limit:
                crowded[str(folder.relative_to(ROOT))] = count
    assert crowded == {}


def test_the_counter_sees_what_it_should():
    source = '''
    struct S {
        // a comment { that opens a brace
        func short() -> Int {
            let sql = """
                SELECT 1
                FROM t
                """
            return "\\(sql) }".count + #"raw "quote" }"#.count
        }
        init(x: Int) { self.x = x }
        subscript(i: Int) -> Int { i }
    }
    protocol P { func required() }
    '''
    code = code_of(source)
    assert "SELECT" not in code and "comment" not in code and "quote" not in code
    found = {name: lines for name, _, lines in functions(code)}
    assert found == {"func short": 3, "init": 1, "subscript": 1}
    long = "func big() {\n" + "    call()\n" * 81 + "}\n"
    assert [lines for _, _, lines in functions(code_of(long))] == [82]
