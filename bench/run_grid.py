#!/usr/bin/python3
"""run_grid.py: run a comparison grid in parts and merge it into one table.

usage: run_grid.py [--grid FILE] [--out DIR] [-j N] [--tp-bench PATH] [--only NAME,...]
                   [--policies LIST] [--base DIR] [--force] [-- COMPARE_ARGS...]

The full grid (bench/grid-full.txt: 50 cells, seeds 1-3) takes about 1.5 hours on 2 cores, too
long for one `tp-bench compare` to be convenient, so it is kept as parts, one per line of the
grid file: a name, then that part's `tp-bench compare` arguments. Each part runs as its own
process (at most N at once, -j, default 2) and writes DIR/NAME.json (its `--json`), NAME.txt
(its tables) and NAME.err (its progress); then bench/compare_merge.py merges the parts into
DIR/grid.json and DIR/grid.md (the per-cell table in Markdown) and prints the whole-grid table.

A part whose JSON is already in DIR from the same arguments and the same build (DIR/NAME.args:
the arguments, then tp-bench's and libtopoplace's paths, sizes and modification times) is
kept, not run again, so an interrupted grid resumes where it stopped and a rebuilt one runs
again; --force runs every part again.
--only runs and merges the named parts only. COMPARE_ARGS (after --) are appended to every
part's arguments (later options win: `-- --seeds 4,5,6`). --policies LIST reruns those
policies alone (`--policies topoplace`); with --base DIR0, a full run's directory, the merge
takes every part of DIR0 first and DIR's after it, so the rerun policies replace DIR0's and
the others come from DIR0 (compare_merge.py's rule: a later file overrides an earlier one
policy by policy).

Parts run at once share the machine's cores: the planner-time columns (p99_ms) then include
time spent waiting for a core; the GPU-hours, waits and gains do not depend on it.

Progress is printed on stderr as each part starts and ends. Exit status: 0; 1 when a part
failed (its name, exit status and last lines of stderr printed; nothing merged); 2 on bad
usage or a bad grid file (the file, line and reason named; nothing run).
"""
import os
import shlex
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MERGE = os.path.join(HERE, "compare_merge.py")
USAGE = __doc__.split("\n\n")[1]


class Bad(Exception):
    pass


def read_grid(path):
    """The parts of a grid file: [(name, [args])], in file order."""
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise Bad(f"{path}: cannot read the grid file: {e.strerror}")
    parts, seen = [], set()
    for n, line in enumerate(lines, 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            words = shlex.split(line)
        except ValueError as e:
            raise Bad(f"{path}:{n}: {e}")
        name, args = words[0], words[1:]
        if not all(c.isalnum() or c in "-_." for c in name):
            raise Bad(f"{path}:{n}: part name '{name}' is not letters, digits, '-', '_', '.'")
        if name in seen:
            raise Bad(f"{path}:{n}: part '{name}' is named twice")
        if not args:
            raise Bad(f"{path}:{n}: part '{name}' has no `tp-bench compare` arguments")
        for a in args:
            if a in ("--json", "--csv", "--plot") or a.startswith(("--json=", "--csv=",
                                                                      "--plot=")):
                raise Bad(f"{path}:{n}: part '{name}' gives {a}: the runner names the outputs")
        seen.add(name)
        parts.append((name, args))
    if not parts:
        raise Bad(f"{path}: no part (one line per part: a name, then compare's arguments)")
    return parts


def parse(argv):
    o = {"grid": os.path.join(HERE, "grid-full.txt"), "out": os.path.join(HERE, "out", "grid"),
         "jobs": 2, "tp_bench": os.path.join(ROOT, "build", "bench", "tp-bench"),
         "only": None, "policies": None, "base": None, "force": False, "extra": []}
    i = 0
    value_opts = {"--grid": "grid", "--out": "out", "-j": "jobs", "--tp-bench": "tp_bench",
                  "--only": "only", "--policies": "policies", "--base": "base"}
    while i < len(argv):
        a = argv[i]
        if a == "--":
            o["extra"] = argv[i + 1:]
            break
        if a in ("-h", "--help"):
            print(USAGE)
            sys.exit(0)
        if a == "--force":
            o["force"] = True
        elif a in value_opts:
            if i + 1 == len(argv):
                raise Bad(f"{a}: needs a value")
            o[value_opts[a]] = argv[i + 1]
            i += 1
        else:
            raise Bad(f"unknown option '{a}'\n{USAGE}")
        i += 1
    try:
        o["jobs"] = int(o["jobs"])
    except ValueError:
        raise Bad(f"-j: '{o['jobs']}' is not a whole number")
    if o["jobs"] < 1:
        raise Bad(f"-j: {o['jobs']}: at least 1 part must run at a time")
    if o["only"] is not None:
        o["only"] = [x for x in o["only"].split(",") if x]
    if o["base"] is not None and not os.path.isdir(o["base"]):
        raise Bad(f"--base: {o['base']}: not a directory")
    if not os.access(o["tp_bench"], os.X_OK):
        raise Bad(f"--tp-bench: {o['tp_bench']}: not an executable (build it: meson setup "
                  f"build && meson compile -C build)")
    return o


def part_args(o, args):
    return ["compare"] + args + (["--policies", o["policies"]] if o["policies"] else []) + \
        o["extra"]


def build_id(tp_bench):
    """The build a part ran with: tp-bench and the libtopoplace it loads (the build tree's
    src/ beside bench/, and any LD_LIBRARY_PATH directory), by path, size and modification
    time, so that a rebuild runs every part again."""
    exe = os.path.realpath(tp_bench)
    dirs = [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d]
    dirs.append(os.path.join(os.path.dirname(exe), "..", "src"))
    files = [exe]
    for d in dirs:
        try:
            files += sorted(os.path.join(d, f) for f in os.listdir(d)
                            if f.startswith("libtopoplace.so"))
        except OSError:
            pass
    out = []
    for f in files:
        st = os.stat(f)
        out.append(f"{os.path.realpath(f)}:{st.st_size}:{st.st_mtime_ns}")
    return " ".join(out)


def stamp(o, args):
    """NAME.args: the part's arguments, then the build (build_id)."""
    return shlex.join(args) + "\n" + build_id(o["tp_bench"]) + "\n"


def kept(o, name, args):
    """Whether DIR/NAME.json is there from these arguments and this build."""
    if o["force"]:
        return False
    try:
        with open(os.path.join(o["out"], name + ".args")) as f:
            same = f.read() == stamp(o, args)
    except OSError:
        return False
    return same and os.path.exists(os.path.join(o["out"], name + ".json"))


def run_parts(o, parts):
    """Runs the parts not kept, at most o["jobs"] at once; returns the failures."""
    todo, running, failed = [], [], []
    for name, args in parts:
        a = part_args(o, args)
        if kept(o, name, a):
            print(f"run_grid: {name}: kept (DIR has its JSON from the same arguments and "
                  f"build)",
                  file=sys.stderr)
        else:
            todo.append((name, a))
    total, done, t0 = len(todo), 0, time.time()
    while todo or running:
        while todo and len(running) < o["jobs"]:
            name, a = todo.pop(0)
            base = os.path.join(o["out"], name)
            for ext in (".json", ".args"):
                if os.path.exists(base + ext):
                    os.remove(base + ext)
            cmd = [o["tp_bench"]] + a + ["--json", base + ".json"]
            out, err = open(base + ".txt", "w"), open(base + ".err", "w")
            p = subprocess.Popen(cmd, stdout=out, stderr=err)
            running.append((name, a, p, out, err, time.time()))
            print(f"run_grid: {name}: started: {shlex.join(cmd)}", file=sys.stderr)
        time.sleep(0.2)
        for r in list(running):
            name, a, p, out, err, started = r
            if p.poll() is None:
                continue
            running.remove(r)
            out.close()
            err.close()
            done += 1
            base = os.path.join(o["out"], name)
            took = time.time() - started
            if p.returncode == 0 and os.path.exists(base + ".json"):
                with open(base + ".args", "w") as f:
                    f.write(stamp(o, a))
                print(f"run_grid: {name}: done in {took:.0f} s ({done} of {total} parts, "
                      f"{time.time() - t0:.0f} s elapsed)", file=sys.stderr)
            else:
                with open(base + ".err") as f:
                    lines = f.read().splitlines()
                if len(lines) > 4:  # the first lines name a bad option, the last a failed run
                    lines = lines[:2] + ["..."] + lines[-2:]
                failed.append(name)
                print(f"run_grid: {name}: failed (exit status {p.returncode}) after {took:.0f} "
                      f"s; its stderr ({base}.err):", file=sys.stderr)
                for line in lines:
                    print(f"    {line}", file=sys.stderr)
    return failed


def main(argv):
    o = parse(argv)
    parts = read_grid(o["grid"])
    if o["only"] is not None:
        names = [n for n, _ in parts]
        unknown = [x for x in o["only"] if x not in names]
        if unknown:
            raise Bad(f"--only: no part {', '.join(unknown)} in {o['grid']} (its parts: "
                      f"{', '.join(names)})")
        parts = [(n, a) for n, a in parts if n in o["only"]]
    if o["base"] is not None:
        missing = [n for n, _ in parts if not os.path.exists(os.path.join(o["base"],
                                                                          n + ".json"))]
        if missing:
            raise Bad(f"--base: {o['base']} has no JSON for {', '.join(missing)}")
    os.makedirs(o["out"], exist_ok=True)
    failed = run_parts(o, parts)
    if failed:
        print(f"run_grid: {len(failed)} part(s) failed ({', '.join(failed)}): nothing merged",
              file=sys.stderr)
        return 1
    files = ([os.path.join(o["base"], n + ".json") for n, _ in parts] if o["base"] else []) + \
        [os.path.join(o["out"], n + ".json") for n, _ in parts]
    grid_json = os.path.join(o["out"], "grid.json")
    md = subprocess.run([sys.executable, MERGE, "--md"] + files, capture_output=True, text=True)
    if md.returncode != 0:
        print(md.stderr, end="", file=sys.stderr)
        return 2
    with open(os.path.join(o["out"], "grid.md"), "w") as f:
        f.write(md.stdout)
    p = subprocess.run([sys.executable, MERGE, "--json", grid_json] + files)
    if p.returncode == 0:
        print(f"run_grid: merged {len(files)} files into {grid_json} and "
              f"{os.path.join(o['out'], 'grid.md')}", file=sys.stderr)
    return p.returncode


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except Bad as e:
        print(f"run_grid: {e}", file=sys.stderr)
        sys.exit(2)
