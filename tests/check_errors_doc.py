#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Keep docs/errors.md honest.

usage: check_errors_doc.py DOCS/errors.md TESTS_DIR [SCENARIO_TEST.py]

C-API tables (| function | bad input | code | message | checked by |): every row names a
Criterion test `file.c` suite::name that exists in TESTS_DIR/file.c, and that test (its body,
the file-local macros and helpers it uses, and a table named as "(table NAME)") calls the row's
function, mentions the row's code, and, when the row has a message, holds a string literal that
is a distinctive piece of that message. No row may say "none asserts the message".

CLI table (| command | exit | message | case |): every `test_scenario.py` INVALID[n] exists,
runs the row's command and expects a fragment of the row's message, and test_scenario.py has
test_catalog_rows_are_the_real_answers, which asserts each row's whole message.

The last line of the file must be the summary "N rows, every one checked by a named test" with
N the number of rows of both kinds.
"""
import ast
import os
import re
import sys

C_HEADER = "| function | bad input | code | message (from a real run) | checked by |"
CLI_HEADER = "| command | exit | message | case |"
MIN_LITERAL = 6        # a literal wholly inside the message is at least this long
MIN_COMMON = 14        # or it shares this many consecutive characters with the message



_PATHS = {}


def test_paths(tests_dir):
    """Every test source under tests/ (a folder per large module), by file name."""
    if tests_dir not in _PATHS:
        found = {}
        for root, dirs, names in os.walk(tests_dir):
            dirs[:] = sorted(d for d in dirs if d not in ("data", "fuzz"))
            for n in names:
                if n.startswith("test_") and n.endswith(".c"):
                    found.setdefault(n, os.path.join(root, n))
        _PATHS[tests_dir] = found
    return _PATHS[tests_dir]

def table_rows(lines, header):
    """(line number, cells) of each row of every table with this header."""
    rows, inside = [], False
    for no, line in enumerate(lines, 1):
        s = line.strip()
        if s == header:
            inside = True
            continue
        if inside and s.startswith("|---"):
            continue
        if inside and s.startswith("|"):
            cells = [c.strip() for c in split_cells(s)]
            rows.append((no, cells))
            continue
        inside = False
    return rows


def split_cells(row):
    """Split a table row on '|' outside backticks."""
    cells, cur, tick = [], "", False
    for ch in row.strip()[1:-1]:
        if ch == "`":
            tick = not tick
        if ch == "|" and not tick:
            cells.append(cur)
            cur = ""
        else:
            cur += ch
    cells.append(cur)
    return cells


def unquote(cell):
    m = re.fullmatch(r"`(.*)`", cell)
    return m.group(1) if m else None


def block_after(text, start):
    """The text of the brace block that opens at or after start."""
    i = text.index("{", start)
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i:j + 1]
    return text[i:]


def c_literals(code):
    """The C string literals of a piece of code, adjacent ones joined, escapes undone."""
    out = []
    for m in re.finditer(r'"(?:[^"\\\n]|\\.)*"(?:\s*"(?:[^"\\\n]|\\.)*")*', code):
        parts = re.findall(r'"((?:[^"\\\n]|\\.)*)"', m.group(0))
        s = "".join(parts)
        s = s.replace('\\"', '"').replace("\\\\", "\\").replace("\\n", "\n")
        out.append(s)
    return out


def longest_common(a, b):
    best = 0
    prev = [0] * (len(b) + 1)
    for i in range(1, len(a) + 1):
        cur = [0] * (len(b) + 1)
        for j in range(1, len(b) + 1):
            if a[i - 1] == b[j - 1]:
                cur[j] = prev[j - 1] + 1
                best = max(best, cur[j])
        prev = cur
    return best


def distinctive(literal, message):
    if len(literal) >= MIN_LITERAL and literal in message:
        return True
    return longest_common(literal, message) >= MIN_COMMON


class CFile:
    def __init__(self, path):
        with open(path, encoding="utf-8") as f:
            self.text = f.read()
        self.tests = {}
        for m in re.finditer(r"^Test\(\s*(\w+)\s*,\s*(\w+)\s*[,)]", self.text, re.M):
            self.tests["%s::%s" % (m.group(1), m.group(2))] = block_after(self.text, m.end())
        # file-local macros and static functions, for one level of indirection
        self.helpers = {}
        for m in re.finditer(r"^#define\s+(\w+)\((?:[^\n\\]|\\\n)*", self.text, re.M):
            self.helpers[m.group(1)] = m.group(0)
        for m in re.finditer(r"^static\s[^;{=]*?\b(\w+)\s*\([^;{]*\)\s*\{", self.text, re.M):
            self.helpers[m.group(1)] = block_after(self.text, m.start())

    def code_of(self, test, table=None):
        body = self.tests[test]
        code = [body]
        for name in set(re.findall(r"\b(\w+)\s*\(", body)):
            if name in self.helpers:
                code.append(self.helpers[name])
        if table:
            m = re.search(r"\b%s\s*\[\s*\]\s*=" % re.escape(table), self.text)
            if m:
                code.append(block_after(self.text, m.end()))
        return "\n".join(code)


def check_c_rows(rows, tests_dir, problems):
    files = {}
    for no, cells in rows:
        if len(cells) != 5:
            problems.append("line %d: %d cells, expected 5" % (no, len(cells)))
            continue
        func, _, code, message, checked = cells
        func, code = unquote(func), unquote(code)
        where = "line %d (%s, %s)" % (no, func, cells[1])
        if "none asserts the message" in checked:
            problems.append("%s: none asserts the message" % where)
            continue
        # `file.c` suite::name, then optionally "(table NAME)" or another note in parentheses
        m = re.fullmatch(r"`(test_\w+\.c)`\s+(\w+::\w+)(?:\s+\((?:table (\w+)|[^()]*)\))?",
                         checked)
        if not m:
            problems.append("%s: 'checked by' is not `file.c` suite::name: %r" % (where, checked))
            continue
        fname, test, table = m.groups()
        path = test_paths(tests_dir).get(fname, os.path.join(tests_dir, fname))
        if fname not in files:
            files[fname] = CFile(path) if os.path.exists(path) else None
        cf = files[fname]
        if cf is None:
            problems.append("%s: no file %s under tests/" % (where, fname))
            continue
        if test not in cf.tests:
            problems.append("%s: no test %s in tests/%s" % (where, test, fname))
            continue
        body = cf.code_of(test, table)
        if not func or not re.search(r"\b%s\b" % re.escape(func), body):
            problems.append("%s: %s does not call %s" % (where, test, func))
        if not code or not re.search(r"\b%s\b" % re.escape(code), body):
            problems.append("%s: %s does not check the code %s" % (where, test, code))
        text = unquote(message)
        if text is None:
            continue  # *no message object* / *read-only: no message*
        if not any(distinctive(lit, text) for lit in c_literals(body)):
            problems.append("%s: %s asserts no distinctive piece of '%s'" % (where, test, text))


def scenario_cases(path):
    """INVALID of test_scenario.py as (command, fragment) pairs, read without importing it."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "INVALID" for t in node.targets):
            return [(e.elts[1].value, e.elts[2].value) for e in node.value.elts]
    return None


def check_cli_rows(rows, scenario, problems):
    cases = scenario_cases(scenario) if scenario and os.path.exists(scenario) else None
    if rows and cases is None:
        problems.append("the CLI table needs %s and its INVALID list" % scenario)
        return
    if rows:
        with open(scenario, encoding="utf-8") as f:
            if not re.search(r"^def test_catalog_rows_are_the_real_answers\(", f.read(), re.M):
                problems.append("%s does not compare the CLI rows with the real answers "
                                "(test_catalog_rows_are_the_real_answers)" % scenario)
    for no, cells in rows:
        if len(cells) != 4:
            problems.append("line %d: %d cells, expected 4" % (no, len(cells)))
            continue
        cmd, _, message, case = cells
        m = re.fullmatch(r"`test_scenario\.py`\s+INVALID\[(\d+)\]", case)
        if not m:
            problems.append("line %d: case is not `test_scenario.py` INVALID[n]: %r" % (no, case))
            continue
        i = int(m.group(1))
        if i >= len(cases):
            problems.append("line %d: INVALID[%d] does not exist (%d cases)" % (no, i, len(cases)))
            continue
        want_cmd, fragment = cases[i]
        if unquote(cmd) != want_cmd:
            problems.append("line %d: INVALID[%d] runs %s, not %s" % (no, i, want_cmd, cmd))
        if fragment not in message:
            problems.append("line %d: INVALID[%d] expects '%s', not in '%s'"
                            % (no, i, fragment, message))


def main(argv):
    if len(argv) not in (3, 4):
        sys.stderr.write(__doc__)
        return 2
    doc, tests_dir = argv[1], argv[2]
    scenario = argv[3] if len(argv) == 4 else None
    with open(doc, encoding="utf-8") as f:
        lines = f.read().splitlines()
    problems = []
    c_rows = table_rows(lines, C_HEADER)
    cli_rows = table_rows(lines, CLI_HEADER)
    if not c_rows:
        problems.append("no C-API table found")
    check_c_rows(c_rows, tests_dir, problems)
    check_cli_rows(cli_rows, scenario, problems)
    total = len(c_rows) + len(cli_rows)
    summary = "%d rows, every one checked by a named test." % total
    last = next((l.strip() for l in reversed(lines) if l.strip()), "")
    if last != summary:
        problems.append("the last line should be '%s', not '%s'" % (summary, last))
    for p in problems:
        print(p)
    print("%d C-API rows, %d CLI rows, %d problem(s)" % (len(c_rows), len(cli_rows), len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
