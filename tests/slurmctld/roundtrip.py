#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A round trip through a real slurmctld: start Debian's slurmctld on loopback (no slurmd) with a
generated slurm.conf and topology.conf, drain and down two nodes, submit a job, then read back
what the real commands print (`scontrol show topology`, `sinfo --json`, `squeue --json`; Slurm
22.05's scontrol has no --json, see docs/importers.md) with `python3 -m topoplace import slurm`,
and check that the scenario holds the same tree, the GRES GPU counts and the node states.

usage: roundtrip.py   (exit 0 pass, 1 fail, 77 skip: slurmctld or the Slurm clients are not
installed; scripts/install-deps installs them)
"""
import getpass
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

SKIP = 77
TOOLS = ["slurmctld", "scontrol", "sinfo", "squeue", "sbatch"]

TOPOLOGY = """# a spine over two leaf switches; big[1-2] have 8 GPUs of a named type
SwitchName=leaf0 Nodes=gpu[001-004]
SwitchName=leaf1 Nodes=gpu[005-006],big[1-2]
SwitchName=spine0 Switches=leaf[0-1]
"""
# what the scenario must say: node -> (path, gpus)
EXPECT = {**{"gpu%03d" % i: (["spine0", "leaf0"], 4) for i in range(1, 5)},
          **{"gpu%03d" % i: (["spine0", "leaf1"], 4) for i in range(5, 7)},
          "big1": (["spine0", "leaf1"], 8), "big2": (["spine0", "leaf1"], 8)}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def find(tool):
    return shutil.which(tool) or next(
        (p for p in ("/usr/sbin/" + tool, "/usr/bin/" + tool) if os.path.exists(p)), None)


def slurm_conf(d, port):
    return "\n".join([
        "ClusterName=tproundtrip",
        "SlurmctldHost=localhost(127.0.0.1)",
        "SlurmctldPort=%d" % port,
        "SlurmdPort=%d" % free_port(),
        "AuthType=auth/none",
        "CredType=cred/none",
        "SlurmUser=%s" % getpass.getuser(),
        "StateSaveLocation=%s/state" % d,
        "SlurmctldPidFile=%s/slurmctld.pid" % d,
        "SlurmctldLogFile=%s/slurmctld.log" % d,
        "SlurmdSpoolDir=%s/spool" % d,
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "TopologyPlugin=topology/tree",
        "GresTypes=gpu",
        "MpiDefault=none",
        "JobCompType=jobcomp/none",
        "AccountingStorageType=accounting_storage/none",
        "NodeName=gpu[001-006] NodeAddr=127.0.0.[11-16] CPUs=8 RealMemory=1000 Gres=gpu:4",
        "NodeName=big[1-2] NodeAddr=127.0.0.[21-22] CPUs=8 RealMemory=1000 Gres=gpu:h100:8",
        "PartitionName=all Nodes=ALL Default=YES State=UP",
        ""])


def run(cmd, env, **kw):
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60, **kw)


def check(cond, what, ctx=""):
    if not cond:
        print("FAIL: %s%s" % (what, ("\n" + ctx) if ctx else ""))
        sys.exit(1)


def main():
    missing = [t for t in TOOLS if not find(t)]
    if missing:
        print("SKIP: %s not installed (Debian's slurmctld and slurm-client; scripts/install-deps "
              "installs them)" % ", ".join(missing))
        return SKIP
    d = tempfile.mkdtemp(prefix="tp-slurmctld-")
    for sub in ("state", "spool"):
        os.mkdir(os.path.join(d, sub))
    conf = os.path.join(d, "slurm.conf")
    with open(conf, "w") as f:
        f.write(slurm_conf(d, free_port()))
    with open(os.path.join(d, "topology.conf"), "w") as f:
        f.write(TOPOLOGY)
    env = dict(os.environ, SLURM_CONF=conf)
    ctld = subprocess.Popen([find("slurmctld"), "-D", "-i", "-f", conf], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        return roundtrip(d, env, ctld)
    finally:
        ctld.terminate()
        try:
            out, _ = ctld.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            ctld.kill()
            out, _ = ctld.communicate()
        if os.environ.get("TP_SLURMCTLD_LOG"):
            print(out)
        shutil.rmtree(d, ignore_errors=True)


def roundtrip(d, env, ctld):
    for _ in range(100):
        if ctld.poll() is not None:
            check(False, "slurmctld exited with %s" % ctld.returncode, ctld.stdout.read())
        if run([find("scontrol"), "ping"], env).returncode == 0:
            break
        time.sleep(0.2)
    else:
        check(False, "slurmctld did not answer scontrol ping in 20 s")
    sc = find("scontrol")
    for node, state in (("gpu003", "drain"), ("gpu005", "down")):
        r = run([sc, "update", "nodename=" + node, "state=" + state, "reason=roundtrip"], env)
        check(r.returncode == 0, "scontrol update %s state=%s" % (node, state), r.stderr)
    r = run([find("sbatch"), "-N", "1", "--gres=gpu:2", "--wrap", "true"], env)
    check(r.returncode == 0, "sbatch", r.stderr)
    outputs = {}
    for name, cmd in (("topology.txt", [sc, "show", "topology"]),
                      ("nodes.json", [find("sinfo"), "--json"]),
                      ("jobs.json", [find("squeue"), "--json"])):
        r = run(cmd, env)
        check(r.returncode == 0 and r.stdout.strip(), " ".join(cmd[-2:]) + " printed nothing",
              r.stderr)
        outputs[name] = os.path.join(d, name)
        with open(outputs[name], "w") as f:
            f.write(r.stdout)
    print("scontrol show topology:\n" + open(outputs["topology.txt"]).read())
    # Slurm 22.05: `scontrol show nodes --json` does not exist (23.02 added it); say so
    r = run([sc, "show", "nodes", "--json"], env)
    print("scontrol show nodes --json: %s" % ("available" if r.returncode == 0 else
                                              "not in this Slurm (%s)" % r.stderr.strip()[:80]))
    py = os.environ.get("TOPOPLACE_PYTHON", sys.executable)
    docs = {}
    for label, topo in (("show topology", outputs["topology.txt"]),
                        ("topology.conf", os.path.join(d, "topology.conf"))):
        r = run([py, "-m", "topoplace", "import", "slurm", "--topology", topo, "--nodes",
                 outputs["nodes.json"], "--jobs", outputs["jobs.json"]], env)
        check(r.returncode == 0, "import slurm (%s) exit %d" % (label, r.returncode),
              r.stdout + r.stderr)
        check("warning" not in r.stderr, "import slurm (%s) warned" % label, r.stderr)
        docs[label] = json.loads(r.stdout)
    doc = docs["show topology"]
    check(doc["topology"] == docs["topology.conf"]["topology"],
          "scontrol show topology and topology.conf give different trees",
          json.dumps(docs, indent=1))
    check(doc["topology"]["levels"] == ["switch1", "switch0", "node"], "levels",
          json.dumps(doc["topology"]["levels"]))
    got = {n["name"]: (n["path"], n["gpus"]) for n in doc["topology"]["nodes"]}
    check(got == EXPECT, "nodes, paths and GRES GPU counts", json.dumps(got))
    # No slurmd ever registers, so every node stays UNKNOWN (down); gpu003 also carries DRAIN
    # and gpu005 is DOWN: all eight are down, none merely cordoned.
    st = doc.get("state", {})
    check(sorted(st.get("down", [])) == sorted(EXPECT), "down nodes", json.dumps(st))
    check("cordoned" not in st and "jobs" not in st, "no cordoned node, no running job "
          "(the job is pending)", json.dumps(st))
    nodes = json.load(open(outputs["nodes.json"]))["nodes"]
    flags = {n["name"]: n.get("state_flags", n.get("state")) for n in nodes}
    check("DRAIN" in flags["gpu003"], "sinfo --json shows the drain", json.dumps(flags))
    # the scenario is one the CLI reads
    path = os.path.join(d, "scenario.json")
    with open(path, "w") as f:
        json.dump(doc, f)
    r = run([py, "-m", "topoplace", "frag", path], env)
    check(r.returncode == 0, "frag on the imported scenario", r.stdout + r.stderr)
    check(json.loads(r.stdout)["down"] == 40, "frag counts 40 down GPUs (6 x 4 + 2 x 8)", r.stdout)
    print("ok: %d nodes, the same tree from scontrol show topology and topology.conf"
          % len(got))
    return 0


if __name__ == "__main__":
    sys.exit(main())
