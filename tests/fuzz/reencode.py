#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Rewrite a saved fuzz input so that the wide-range decoders read it as the decoders before
them did (refmodel.h, "Numbers over a type's whole range"):

    tests/fuzz/reencode.py build/tests/fuzz/trace_api IN OUT

trace_<name> (a -DFZ_TRACE replay) notes every byte that means something else now ("escape"
lines). Each is rewritten, one at a time and replaying in between: a byte that was v % n
becomes the largest byte below the escapes with the same residue; a byte that now reads one
more (a cap of 16 devices or 8 groups, a version over the whole range) gets that extra byte
inserted after it with the old value. A priority of 127 or -128 (now INT_MAX / INT_MIN) has
no old equivalent: it becomes 126 or -127, and the script says so. Compare the traces of the
old and the new input afterwards: they must be the same, step by step. Run it once, on an
input written for the old decoders (an inserted byte is not told apart from an old one).
"""
import re
import subprocess
import sys

ESCAPE = 248


def escapes(exe, path):
    err = subprocess.run([exe, path], capture_output=True).stderr.decode(errors='replace')
    return re.finditer(r'escape (\d+) from the end: (.*)', err)


def reencode(exe, src, dst):
    data = bytearray(open(src, 'rb').read())
    notes, handled = [], set()
    for _ in range(1000):
        open(dst, 'wb').write(data)
        todo = None
        for m in escapes(exe, dst):
            key = (len(data) - int(m.group(1)), m.group(2)[:8])
            if key not in handled:
                todo = key, m.group(2)
                break
        if not todo:
            return notes
        key, what = todo
        handled.add(key)
        off, v = key[0], data[key[0]]
        if what.startswith('byte'):
            mod = int(re.findall(r'\d+', what)[1])
            if mod == 0:
                data[off] = 126 if v == 127 else 129
                notes.append(f'offset {off}: priority byte {v} -> {data[off]} (no old equivalent)')
            else:
                w = next(x for x in range(ESCAPE - 1, -1, -1) if x % mod == v % mod)
                data[off] = w
                notes.append(f'offset {off}: {v} -> {w} (% {mod})')
        else:
            k = int(re.findall(r'\d+', what)[0])
            at = off + (2 if 'after' in what else 1)
            data[at:at] = bytes([k])
            notes.append(f'offset {off}: insert {k} at {at}')
    sys.exit(f'{src}: did not converge')


if __name__ == '__main__':
    print('\n'.join(reencode(*sys.argv[1:4])) or 'unchanged')
