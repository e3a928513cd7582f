#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Generate the cffi cdef of libtopoplace from its public headers, and the cffi C source.

The API is never retyped: the headers go through the C preprocessor (with TP_API defined empty),
only the declarations that come from our own headers are kept, enum values become `...` (cffi
takes them from the real header when it compiles the module), and every #define of the headers
whose expansion is an integer constant becomes `#define NAME ...`.

    gen_cdef.py --cpp 'cc' -I include -I build/include --cdef out.cdef --csource out.c \
                include/topoplace.h [include/topoplace-hwloc.h ...]

What cffi cannot parse (a declaration that names a type of another library, such as hwloc's
hwloc_topology_t) is dropped with a note on standard error; the module lists those in
`tp__binding_left_out`, which topoplace._native exposes as LEFT_OUT. Every other declared
function is bound: the library exports exactly what its headers declare (the abi suite), so a
missing one fails the build instead of a call at run time.

Option defaults are not generated here: each options struct has a public
`tp_<name>_init(ptr, version)` function, which the Python layer calls.

Without --csource only the cdef is written (for a look at what cffi sees).
"""

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile

# A preprocessor line marker: `# 42 "path/to/file.h" 1`.
LINE_MARKER = re.compile(r'^#\s*(\d+)\s+"([^"]*)"')
DEFINE = re.compile(r'^\s*#\s*define\s+(TP_[A-Za-z0-9_]+)(\(?)')
# What an integer constant expression looks like after expansion: numbers, casts to plain
# integer types, operators and parentheses.
INT_EXPR = re.compile(r'^[\s()0-9a-fA-FxXuUlL+\-*/%<>|&^~]+$')
ENUM = re.compile(r'\benum\s+(\w+)\s*\{([^}]*)\}', re.S)


def run_cpp(cpp, includes, text, markers=True):
    """Preprocess `text` (a C file's contents); the output keeps line markers if asked."""
    with tempfile.NamedTemporaryFile('w', suffix='.c', delete=False) as f:
        f.write(text)
        name = f.name
    try:
        cmd = list(cpp) + ['-E', '-DTP_API='] + ([] if markers else ['-P'])
        cmd += ['-I' + i for i in includes] + [name]
        res = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             universal_newlines=True)
        if res.returncode != 0:
            sys.exit('gen_cdef: the preprocessor failed:\n' + res.stderr)
        return res.stdout
    finally:
        os.unlink(name)


def own_declarations(cpp_out, own):
    """The lines of the preprocessed output that come from one of our headers (basenames)."""
    keep = []
    current = None
    for line in cpp_out.splitlines():
        m = LINE_MARKER.match(line)
        if m:
            current = os.path.basename(m.group(2))
            continue
        if line.startswith('#'):
            continue            # #pragma and the like
        if current in own and line.strip():
            keep.append(line)
    return '\n'.join(keep) + '\n'


def enums_with_dots(decls):
    """`enum e { A = -1, B = (2) }` -> `enum e { A, B, ... }`: values come from the header."""
    def repl(m):
        names = []
        for item in m.group(2).split(','):
            item = item.strip()
            if item:
                names.append(item.split('=')[0].strip())
        return 'enum %s {\n\t%s,\n\t...\n}' % (m.group(1), ',\n\t'.join(names))
    return ENUM.sub(repl, decls)


def integer_defines(cpp, includes, headers):
    """Names of the object-like TP_ macros of the headers that expand to integer constants."""
    names = []
    for h in headers:
        with open(h) as f:
            for line in f:
                m = DEFINE.match(line)
                if m and not m.group(2) and not m.group(1).startswith('TP__') \
                        and m.group(1) != 'TP_API' and m.group(1) not in names:
                    names.append(m.group(1))
    if not names:
        return []
    probe = ''.join('#include "%s"\n' % os.path.abspath(h) for h in headers)
    probe += ''.join('tp__probe_%s = %s ;\n' % (n, n) for n in names)
    out = run_cpp(cpp, includes, probe, markers=False)
    found = []
    for m in re.finditer(r'\btp__probe_(\w+) = ([^;]*);', out):
        value = m.group(2)
        # UINT32_MAX and friends expand to a cast-free constant with a suffix; reject strings,
        # braces (initialisers) and identifiers that survived (they are not constants).
        if INT_EXPR.match(value) and re.search(r'\d', value):
            found.append(m.group(1))
    return found


def statements(decls):
    """Split declarations at the semicolons outside braces: [(first line, last line, text)]."""
    out = []
    depth = 0
    start = 0
    line = first = 1
    for i, ch in enumerate(decls):
        if ch == '{':
            depth += 1
        elif ch == '}':
            depth -= 1
        elif ch == ';' and depth == 0:
            out.append((first, line, decls[start:i + 1]))
            start = i + 1
            first = line
        if ch == '\n':
            line += 1
            if decls[start:i + 1].strip() == '':
                first = line
    return out


FUNC = re.compile(r'\b(tp_\w+)\s*\(')


def function_name(stmt):
    """The name of the function a statement declares, or None (typedefs, structs)."""
    text = stmt.strip()
    if text.startswith('typedef') or '{' in text:
        return None
    m = FUNC.search(text)
    return m.group(1) if m else None


def drop_unparsable(stmts):
    """Drop, one at a time, the statements cffi cannot parse. Returns (kept, dropped names)."""
    import cffi
    dropped = []
    while True:
        text = ''.join(st[2] for st in stmts)
        try:
            cffi.FFI().cdef(text)
            return stmts, dropped
        except cffi.CDefError as e:
            m = re.search(r'<cdef source string>:(\d+):', str(e))
            if not m:
                raise
            bad = int(m.group(1))
            # line numbers of the joined text
            line = 1
            for k, st in enumerate(stmts):
                end = line + st[2].count('\n')
                if line <= bad <= end:
                    name = function_name(st[2]) or st[2].strip().split('\n')[0][:60]
                    sys.stderr.write('gen_cdef: dropped %s (cffi cannot parse it: %s)\n'
                                     % (name, str(e).splitlines()[-1]))
                    dropped.append(name)
                    del stmts[k]
                    break
                line = end
            else:
                raise


def make_cdef(cpp, includes, headers):
    """(cdef text, declarations cffi cannot parse)."""
    text = ''.join('#include "%s"\n' % os.path.abspath(h) for h in headers)
    own = {os.path.basename(h) for h in headers} | {'topoplace-version.h'}
    decls = enums_with_dots(own_declarations(run_cpp(cpp, includes, text), own))
    stmts = statements(decls)
    stmts, unparsable = drop_unparsable(stmts)
    defines = integer_defines(cpp, includes, headers + [
        h for h in (os.path.join(i, 'topoplace-version.h') for i in includes)
        if os.path.exists(h)][:1])
    head = '/* Generated by gen_cdef.py from %s: do not edit. */\n' % ', '.join(
        os.path.basename(h) for h in headers)
    body = ''.join(st[2] for st in stmts).strip() + '\n'
    tail = 'static const char *const tp__binding_left_out;\n'
    return head + ''.join('#define %s ...\n' % n for n in defines) + body + tail, unparsable


def write_csource(cdef, left_out, headers, out_c, module):
    import cffi
    ffi = cffi.FFI()
    ffi.cdef(cdef)
    source = ''.join('#include "%s"\n' % os.path.basename(h) for h in headers)
    source += 'static const char *const tp__binding_left_out = "%s";\n' % ' '.join(left_out)
    ffi.set_source(module, source)
    saved, sys.stdout = sys.stdout, sys.stderr      # cffi says "generating ..." on stdout
    try:
        ffi.emit_c_code(out_c)
    finally:
        sys.stdout = saved


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--cpp', default='cc', help='the C compiler (a shell word list)')
    ap.add_argument('-I', dest='includes', action='append', default=[])
    ap.add_argument('--cdef', help='write the cdef here (default: stdout)')
    ap.add_argument('--csource', help='also write the cffi C source of the module here')
    ap.add_argument('--module', default='topoplace._topoplace_cffi')
    ap.add_argument('headers', nargs='+')
    args = ap.parse_args(argv)
    cpp = shlex.split(args.cpp)
    headers = list(dict.fromkeys(os.path.abspath(h) for h in args.headers))
    cdef, left_out = make_cdef(cpp, args.includes, headers)
    if args.cdef:
        with open(args.cdef, 'w') as f:
            f.write(cdef)
    elif not args.csource:
        sys.stdout.write(cdef)
    if args.csource:
        write_csource(cdef, left_out, headers, args.csource, args.module)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
