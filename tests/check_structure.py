#!/usr/bin/python3
"""The shape of src/: file and function sizes, and which module may include which.

usage: check_structure.py [--stats] SRC_DIR
       check_structure.py --self-test   (the checks themselves, on made-up trees)

Fails (exit 1, naming each offender) when
  - a file in SRC_DIR is over MAX_FILE_LINES lines,
  - a function is over MAX_FUNC_LINES lines (its body, from the opening brace to the closing
    one; a function's body starts with '{' at column 0 and ends with '}' at column 0),
  - an `#include "..."` between modules of SRC_DIR goes from a lower layer to a higher one,
    between two importers, or forms a cycle among files or among modules (a module: a file
    and its private header, or a split family such as place*.c over place_internal.h).
Files in NOT_YET_SPLIT are still to be split by work in progress elsewhere: their size
findings are printed as 'not yet split' and do not fail; include rules apply to them all the
same. Empty the list once those splits land. docs/architecture.md explains the layers.

With --stats, also print the table: files, lines, largest file, longest function.
"""
import os
import re
import sys

MAX_FILE_LINES = 1200
MAX_FUNC_LINES = 120

# Layers, lowest first: a file may include headers of its own layer or of a lower one.
# Importers sit above the model and the solver but may not include each other.
LAYERS = [
    ("model", [r"common\..", r"topology.*", r"nodetype\..", r"cluster.*", r"request_data\..",
               r"frag\.."]),
    ("solver", [r"request\..", r"request_.*", r"cost\..", r"place.*", r"sizing\..", r"serving_.*"]),
    ("planner", [r"defrag.*"]),
    ("importer", [r"hwloc_import.*", r"slurm_.*", r"scenario_.*", r"nvsmi_import.*"]),
]

# Files whose split is in progress on other branches (size limits reported, not enforced).
NOT_YET_SPLIT = set()

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
# A function definition at file scope: a line at column 0 that names a function and is not a
# declaration, whose body opens with '{' at column 0 and closes with '}' at column 0.
FUNC_NAME = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(")


def layer_of(name):
    for i, (layer, patterns) in enumerate(LAYERS):
        if any(re.fullmatch(p, name) for p in patterns):
            return i, layer
    return None, None


FAMILIES = ("place", "defrag", "topology", "cluster", "scenario", "slurm")


def module_of(name):
    """The module a file belongs to: cluster.c and cluster_impl.h are one, and so are all the
    files of a split family (place.c, place_table.c, place_internal.h)."""
    stem = re.sub(r"_(impl|internal)$", "", name.rsplit(".", 1)[0])
    for fam in FAMILIES:
        if stem == fam or stem.startswith(fam + "_"):
            return fam
    return stem


def functions(path):
    """(name, first line, length in lines) of each function defined in the file."""
    with open(path, errors="replace") as f:
        lines = f.read().split("\n")
    out = []
    start = None
    name = None
    for i, line in enumerate(lines):
        if start is None:
            if line.startswith("{") and i > 0:
                # walk back to the line that holds the function's name
                j = i - 1
                while j > 0 and lines[j][:1] in (" ", "\t") and "(" not in lines[j].split("//")[0]:
                    j -= 1
                while j > 0 and not FUNC_NAME.search(lines[j]):
                    j -= 1
                # a declarator split over lines: go up to the line that opens the parameter list
                k = j
                while k > 0 and lines[k][:1] in (" ", "\t"):
                    k -= 1
                m = FUNC_NAME.search(lines[k])
                if m and not lines[k].rstrip().endswith(";") and "=" not in lines[k].split("(")[0]:
                    start, name, brace = k, m.group(1), i
        elif line.startswith("}"):
            out.append((name, start + 1, i - brace + 1))
            start = None
    return out


def scan(src):
    files = sorted(f for f in os.listdir(src) if os.path.isfile(os.path.join(src, f)))
    info = {}
    for f in files:
        path = os.path.join(src, f)
        with open(path, errors="replace") as fh:
            text = fh.read()
        nlines = text.count("\n")
        incs = [i for i in INCLUDE.findall(text) if os.path.exists(os.path.join(src, i))]
        funcs = functions(path) if f.endswith((".c", ".h")) else []
        info[f] = (nlines, incs, funcs)
    return info


def find_cycle(graph):
    """One include cycle as a list of files, or None."""
    state = {}
    stack = []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in graph.get(n, []):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                cyc = visit(m)
                if cyc:
                    return cyc
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            cyc = visit(n)
            if cyc:
                return cyc
    return None


def check(info):
    errors, pending = [], []
    for f, (nlines, incs, funcs) in info.items():
        bucket = pending if f in NOT_YET_SPLIT else errors
        if nlines > MAX_FILE_LINES:
            bucket.append(f"{f}: {nlines} lines (limit {MAX_FILE_LINES})")
        for name, line, length in funcs:
            if length > MAX_FUNC_LINES:
                bucket.append(f"{f}:{line}: function {name} is {length} lines "
                              f"(limit {MAX_FUNC_LINES})")
        li, lname = layer_of(f)
        for inc in incs:
            ii, iname = layer_of(inc)
            if li is None or ii is None:
                errors.append(f"{f} includes {inc}: "
                              f"{f if li is None else inc} is in no layer of check_structure.py")
            elif ii > li:
                errors.append(f"{f} ({lname}) includes {inc} ({iname}): a lower layer may not "
                              f"include a higher one")
            elif ii == li and lname == "importer" and module_of(inc) != module_of(f):
                errors.append(f"{f} includes {inc}: importers may not include each other")
    cyc = find_cycle({f: v[1] for f, v in info.items()})
    if cyc:
        errors.append("include cycle: " + " -> ".join(cyc))
    mods = {}
    for f, v in info.items():
        for inc in v[1]:
            a, b = module_of(f), module_of(inc)
            if a != b:
                mods.setdefault(a, set()).add(b)
    cyc = find_cycle({m: sorted(v) for m, v in mods.items()})
    if cyc:
        errors.append("module include cycle: " + " -> ".join(cyc))
    for f in sorted(NOT_YET_SPLIT):
        if f not in info:
            errors.append(f"{f} is in NOT_YET_SPLIT but does not exist: remove it from the list")
    return errors, pending


def stats(info):
    print("| files of src/ | files | lines | largest file | longest function |")
    print("|---|---|---|---|---|")
    rest = {f: v for f, v in info.items() if f not in NOT_YET_SPLIT}
    for label, part in (("all", info), ("without NOT_YET_SPLIT", rest)):
        if not part:
            continue
        total = sum(v[0] for v in part.values())
        big = max(part, key=lambda f: part[f][0])
        longest = max(((f, n, ln) for f, v in part.items() for n, _, ln in v[2]),
                      key=lambda x: x[2])
        print(f"| {label} | {len(part)} | {total} | {big} ({part[big][0]} lines) | "
              f"{longest[0]} {longest[1]} ({longest[2]} lines) |")


def self_test():
    """Each rule fails on a tree that breaks it, and a clean tree passes."""
    import tempfile

    def run(files):
        with tempfile.TemporaryDirectory() as d:
            for name, text in files.items():
                with open(os.path.join(d, name), "w") as f:
                    f.write(text)
            return check(scan(d))[0]

    body = "int f(void)\n{\n" + "\treturn 0;\n" * (MAX_FUNC_LINES - 2) + "}\n"
    cases = [
        ({"place.c": '#include "cluster_impl.h"\n' + body, "cluster_impl.h": ""}, None),
        ({"place.c": "x;\n" * (MAX_FILE_LINES + 1)}, "place.c: 1201 lines"),
        ({"place.c": body.replace("{\n", "{\n\tx();\n")}, "function f is 121 lines"),
        ({"cluster.c": '#include "place_internal.h"\n', "place_internal.h": ""},
         "a lower layer may not include a higher one"),
        ({"place_a.h": '#include "place_b.h"\n', "place_b.h": '#include "place_a.h"\n'},
         "include cycle: place_a.h -> place_b.h -> place_a.h"),
        ({"cluster.c": '#include "request.h"\n', "request.h": "",
          "request.c": '#include "cluster_impl.h"\n', "cluster_impl.h": ""},
         "module include cycle: cluster -> request -> cluster"),
        ({"hwloc_import.c": '#include "slurm_import.h"\n', "slurm_import.h": ""},
         "importers may not include each other"),
        ({"place.c": '#include "mystery.h"\n', "mystery.h": ""}, "is in no layer"),
    ]
    bad = 0
    for files, want in cases:
        errs = [e for e in run(files) if "NOT_YET_SPLIT" not in e]
        ok = not errs if want is None else any(want in e for e in errs)
        if not ok:
            bad += 1
            print(f"self-test FAIL: {sorted(files)} expected {want!r}, got {errs}")
    print(f"self-test: {len(cases) - bad} of {len(cases)} cases as expected")
    return 1 if bad else 0


def main(argv):
    if "--self-test" in argv:
        return self_test()
    args = [a for a in argv[1:] if not a.startswith("--")]
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    info = scan(args[0])
    if "--stats" in argv:
        stats(info)
    errors, pending = check(info)
    for p in pending:
        print(f"NOT YET SPLIT (allowed for now): {p}")
    for e in errors:
        print(f"FAIL: {e}")
    if not errors:
        print(f"ok: {len(info)} files within {MAX_FILE_LINES} lines and {MAX_FUNC_LINES}-line "
              f"functions (but {len(pending)} 'not yet split' findings), includes follow the layers")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
