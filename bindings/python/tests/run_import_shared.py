#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""`python3 -m topoplace import hwloc FILE` on the real machines of ../shared/hwloc, for
meson's 'shared' suite: every file gives either a node type in the issue's shape (exit 0) or
one JSON error naming the file (exit 2), and the machines the folder's README describes give
what it says. Exit 77 (skip) when the folder is absent.

    run_import_shared.py SHARED_DIR
"""

import json
import os
import subprocess
import sys

SKIP = 77

# What ../shared/hwloc/README.md says of each machine: (exit, GPUs, NVSwitches, NVLink GB/s
# between GPUs 0 and 1 or None) or, for a refusal, (2, fragment of the message).
KNOWN = {
    "nvidiaDGX2.xml": (0, 16, 12, 150.0),          # 16 V100, 12 NVSwitches
    "power8gpudistances.xml": (0, 4, 0, 40.0),      # 4 GPUs, direct NVLink
    "96em64t-4n4d3ca2co-pci.xml": (2, "has no GPU"),  # NICs and a display GPU, no NVIDIA
}


def check_shape(doc):
    """The problems of a node type document, as strings (none: it is well formed)."""
    bad = []
    if set(doc) != {"gpus", "nics", "pcie_switches", "nvswitches"}:
        return ["keys %s" % sorted(doc)]
    nsw, names = len(doc["pcie_switches"]), [n["name"] for n in doc["nics"]]
    for k, sw in enumerate(doc["pcie_switches"]):
        if sw["parent"] is not None and not 0 <= sw["parent"] < k:
            bad.append("pcie_switches[%d].parent %r" % (k, sw["parent"]))
    for n in doc["nics"]:
        if n["pcie_switch"] is not None and not 0 <= n["pcie_switch"] < nsw:
            bad.append("nic %s pcie_switch %r" % (n["name"], n["pcie_switch"]))
    gpus = doc["gpus"]
    for i, g in enumerate(gpus):
        if set(g) != {"index", "bus_id", "pcie_switch", "nearest_nic", "nvlink"} or \
                g["index"] != i:
            bad.append("gpus[%d] %r" % (i, g))
            continue
        if g["pcie_switch"] is not None and not 0 <= g["pcie_switch"] < nsw:
            bad.append("gpus[%d].pcie_switch %r" % (i, g["pcie_switch"]))
        if (g["nearest_nic"] is None) != (not names) or \
                (g["nearest_nic"] is not None and g["nearest_nic"] not in names):
            bad.append("gpus[%d].nearest_nic %r" % (i, g["nearest_nic"]))
        for j, gbps in g["nvlink"].items():
            other = gpus[int(j)]["nvlink"] if 0 <= int(j) < len(gpus) else {}
            if int(j) == i or other.get(str(i)) != gbps or not gbps > 0:
                bad.append("gpus[%d].nvlink[%s] %r is not symmetric" % (i, j, gbps))
    bus = [g.get("bus_id") for g in gpus]
    if None not in bus and bus != sorted(bus):
        bad.append("GPUs not in bus-id order: %s" % bus)
    return bad


def main(argv):
    folder = os.path.join(os.path.abspath(argv[0]), "hwloc") if argv else ""
    if not os.path.isdir(folder):
        print("SKIP: ../shared not found (no %s)" % folder)
        return SKIP
    files = sorted(f for f in os.listdir(folder) if f.endswith(".xml"))
    failures = 0
    for name in files:
        path = os.path.join(folder, name)
        p = subprocess.run([sys.executable, "-m", "topoplace", "import", "hwloc", path],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=120)
        problems = []
        try:
            doc = json.loads(p.stdout)
        except ValueError:
            doc, problems = None, ["not one JSON document: %r" % p.stdout[:200]]
        if "Traceback" in p.stderr:
            problems.append("a traceback: %s" % p.stderr[-500:])
        if doc is not None and p.returncode == 0:
            problems += check_shape(doc)
        elif doc is not None and p.returncode == 2:
            if doc.get("status") != "invalid" or not doc.get("message", "").startswith(path):
                problems.append("the error does not name the file: %r" % doc)
        elif doc is not None:
            problems.append("exit %d: %r" % (p.returncode, doc))
        want = KNOWN.get(name)
        if want and not problems:
            if p.returncode != want[0]:
                problems.append("exit %d, README says %d" % (p.returncode, want[0]))
            elif want[0] == 0:
                n01 = doc["gpus"][0]["nvlink"].get("1") if len(doc["gpus"]) > 1 else None
                got = (len(doc["gpus"]), doc["nvswitches"], n01)
                if got != want[1:]:
                    problems.append("(GPUs, NVSwitches, NVLink 0-1) %r, README says %r"
                                    % (got, want[1:]))
            elif want[1] not in doc["message"]:
                problems.append("message %r lacks %r" % (doc["message"], want[1]))
        print("%s %s: exit %d%s" % ("FAIL" if problems else "ok", name, p.returncode,
                                    "".join("\n  " + x for x in problems)))
        failures += bool(problems)
    print("%d of %d files as expected" % (len(files) - failures, len(files)))
    return 1 if failures or not files else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
