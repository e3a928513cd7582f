# SPDX-License-Identifier: MIT
"""`python3 -m topoplace import hwloc|nvidia-smi FILE` (issue 16 item 4): the node type as JSON
in the issue's shape, or one JSON error object naming the file and why, exit 2."""

import json
import os
import subprocess

import pytest

from conftest import PKG_SRC, python

DATA = os.path.normpath(os.path.join(PKG_SRC, "..", "..", "tests", "data"))
KEYS = {"gpus", "nics", "pcie_switches", "nvswitches"}
GPU_KEYS = {"index", "bus_id", "pcie_switch", "nearest_nic", "nvlink"}

# A DGX-like matrix written for this test: 4 GPUs, all pairs NV12 (12 x 25 GB/s), GPUs 0-1
# and NIC0 behind one PCIe switch (PIX), GPUs 2-3 and NIC1 behind another, named by the NIC
# Legend.
DGX = ("\tGPU0\tGPU1\tGPU2\tGPU3\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
       "GPU0\t X \tNV12\tNV12\tNV12\tPIX\tSYS\t0-31\t0\t\tN/A\n"
       "GPU1\tNV12\t X \tNV12\tNV12\tPIX\tSYS\t0-31\t0\t\tN/A\n"
       "GPU2\tNV12\tNV12\t X \tNV12\tSYS\tPIX\t32-63\t1\t\tN/A\n"
       "GPU3\tNV12\tNV12\tNV12\t X \tSYS\tPIX\t32-63\t1\t\tN/A\n"
       "NIC0\tPIX\tPIX\tSYS\tSYS\t X \tSYS\n"
       "NIC1\tSYS\tSYS\tPIX\tPIX\tSYS\t X \n"
       "\nLegend:\n\n  X    = Self\n\nNIC Legend:\n\n  NIC0: mlx5_0\n  NIC1: mlx5_1\n")


def run(*args, stdin=None):
    p = subprocess.run([python(), "-m", "topoplace", "import"] + list(args), input=stdin,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=60)
    assert "Traceback" not in p.stderr, p.stderr
    lines = p.stdout.splitlines()
    assert len(lines) == 1, p.stdout          # one JSON document on one line
    return p.returncode, json.loads(lines[0])


def in_process(*args):
    import io
    from topoplace import cli
    out = io.StringIO()
    rc = cli.main(["import"] + list(args), stdout=out)
    return rc, json.loads(out.getvalue())


def test_nvidia_smi_matrix(tp, tmp_path):
    f = tmp_path / "dgx.txt"
    f.write_text(DGX)
    rc, out = run("nvidia-smi", str(f))
    assert rc == 0, out

    def gpu(i, switch, nic):
        return {"index": i, "bus_id": None, "pcie_switch": switch, "nearest_nic": nic,
                "nvlink": {str(j): 300.0 for j in range(4) if j != i}}
    assert out == {"gpus": [gpu(0, 0, "mlx5_0"), gpu(1, 0, "mlx5_0"), gpu(2, 1, "mlx5_1"),
                            gpu(3, 1, "mlx5_1")],
                   "nics": [{"name": "mlx5_0", "pcie_switch": 0},
                            {"name": "mlx5_1", "pcie_switch": 1}],
                   "pcie_switches": [{"parent": None}, {"parent": None}],
                   "nvswitches": 0}
    # NVLink 5: NV12 is 12 x 50 GB/s; standard input reads the same
    rc, out = run("nvidia-smi", "-", "--nvlink-gbps", "50", stdin=DGX)
    assert rc == 0 and out["gpus"][0]["nvlink"] == {"1": 600.0, "2": 600.0, "3": 600.0}


def test_nvidia_smi_pasted_outputs(tp):
    rc, out = run("nvidia-smi", os.path.join(DATA, "nvsmi", "8x4090-2nic.txt"))
    assert rc == 0, out
    assert set(out) == KEYS and [g["index"] for g in out["gpus"]] == list(range(8))
    assert all(set(g) == GPU_KEYS and g["nvlink"] == {} for g in out["gpus"])
    # NIC0 and NIC1 are PIX to each other: one switch; every GPU's nearest NIC is NIC0
    assert out["nics"] == [{"name": "NIC0", "pcie_switch": 0}, {"name": "NIC1", "pcie_switch": 0}]
    assert out["pcie_switches"] == [{"parent": None}]
    assert {g["nearest_nic"] for g in out["gpus"]} == {"NIC0"}
    rc, out = run("nvidia-smi", os.path.join(DATA, "nvsmi", "2x5090-workstation.txt"))
    assert rc == 0 and len(out["gpus"]) == 2 and out["nics"] == [] and out["nvswitches"] == 0
    assert [g["nearest_nic"] for g in out["gpus"]] == [None, None]


def test_hwloc_file(tp):
    # tests/data/README.md describes the machine: GPUs 0-1 and mlx5_0 behind the first
    # switch, GPUs 2-3 behind the second, eth0 on the host bridge, one NVSwitch
    rc, out = run("hwloc", os.path.join(DATA, "two-switch-nics.xml"))
    assert rc == 0, out
    assert [(g["index"], g["bus_id"], g["pcie_switch"], g["nearest_nic"]) for g in out["gpus"]] \
        == [(0, "0000:03:00.0", 0, "mlx5_0"), (1, "0000:04:00.0", 0, "mlx5_0"),
            (2, "0000:0a:00.0", 1, "mlx5_0"), (3, "0000:0b:00.0", 1, "mlx5_0")]
    assert out["gpus"][0]["nvlink"] == {"1": 50.0, "2": 25.0, "3": 25.0}
    assert out["gpus"][1]["nvlink"] == {"0": 50.0}
    assert out["nics"] == [{"name": "mlx5_0", "pcie_switch": 0},
                           {"name": "eth0", "pcie_switch": None}]
    assert out["pcie_switches"] == [{"parent": None}, {"parent": None}]
    assert out["nvswitches"] == 1


def test_hwloc_1x_site_file(tp):
    """Lassen (hwloc 1.x XML): GPUs in bus-id order, each paired with an HCA, never with
    one of the two 1 GbE ports."""
    rc, out = run("hwloc", os.path.join(DATA, "hwloc", "lassen-v1.xml"))
    assert rc == 0, out
    bus = [g["bus_id"] for g in out["gpus"]]
    assert len(bus) == 4 and bus == sorted(bus)
    names = [n["name"] for n in out["nics"]]
    assert {"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"} <= set(names)
    assert all(g["nearest_nic"].startswith("mlx5_") for g in out["gpus"])


@pytest.mark.parametrize("args,message", [
    (("hwloc", "{data}/nvsmi/8x4090-2nic.txt"),
     "{data}/nvsmi/8x4090-2nic.txt: the XML buffer (707 bytes) is refused: it looks like "
     "nvidia-smi topo -m output, not hwloc XML (read it with tp_nodetype_from_nvsmi_topo())"),
    (("nvidia-smi", "{tmp}/nope.txt"), "{tmp}/nope.txt: cannot read it: No such file or directory"),
    (("nvidia-smi", "{tmp}/empty.txt"),
     "{tmp}/empty.txt: the file is empty (expected the output of `nvidia-smi topo -m`)"),
    (("hwloc", "{tmp}/empty.txt"), "{tmp}/empty.txt: the file is empty (expected an hwloc XML "
                                   "topology)"),
    (("nvidia-smi", "{tmp}/bad.txt"),
     "{tmp}/bad.txt: line 2, column 20: 'NVX' is not a topology entry (X, NV#, PIX, PXB, PHB, "
     "NODE, SYS)"),
    (("nvidia-smi", "{tmp}/dgx.txt", "--nvlink-gbps", "1000"),
     "--nvlink-gbps 1000: opts.nvlink_link_gbps 1000 is not a number > 0 and up to 156.25"),
    (("hwloc", "{tmp}/dgx.txt", "--nvlink-gbps", "50"),
     "--nvlink-gbps applies to nvidia-smi only (hwloc XML gives the NVLink bandwidths)"),
    (("nvidia-smi", "{tmp}/dgx.txt", "--max-input-bytes", "100"),
     "{tmp}/dgx.txt: larger than 100 bytes, the most an import reads (--max-input-bytes sets "
     "it)"),
    (("tar", "x"), "usage: import takes a format first: hwloc, nvidia-smi, slurm or k8s, not "
                   "'tar' (python3 -m topoplace import {{hwloc|nvidia-smi}} FILE "
                   "[--nvlink-gbps GBPS] [--max-input-bytes N]; python3 -m topoplace import "
                   "{{slurm|k8s}} --help)"),
    (("nvidia-smi", "{tmp}/dgx.txt", "--nvlink-gbps", "x"),
     "usage: argument --nvlink-gbps: --nvlink-gbps: 'x' is not a positive number "
     "(python3 -m topoplace import {{hwloc|nvidia-smi}} FILE [--nvlink-gbps GBPS] "
     "[--max-input-bytes N])"),
])
def test_errors_name_the_file_and_why(tp, tmp_path, args, message):
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "dgx.txt").write_text(DGX)
    (tmp_path / "bad.txt").write_text(DGX.replace("NV12\tPIX", "NVX\tPIX", 1))
    fill = {"data": DATA, "tmp": str(tmp_path)}
    rc, out = in_process(*[a.format(**fill) for a in args])
    assert (rc, out) == (2, {"status": "invalid", "message": message.format(**fill)})


def test_import_without_a_format_is_a_usage_error(tp, tmp_path):
    rc, out = run()
    assert rc == 2 and out["status"] == "invalid" and out["message"].startswith("usage:")
    import io
    from topoplace import cli
    buf = io.StringIO()
    assert cli.main(["--strict", "import", "hwloc"], stdout=buf) == 2
    msg = json.loads(buf.getvalue())["message"]
    assert msg.startswith("usage: import takes a format first: python3 -m topoplace import "
                          "{hwloc|nvidia-smi} FILE"), msg


def test_node_type_to_dict_matches_the_getters(tp, tmp_path):
    nt = tp.NodeType(3)
    sw = nt.add_pcie_switch()
    sub = nt.add_pcie_switch(sw)
    nt.set_gpu_switch(0, sw).set_gpu_switch(1, sub)
    nt.add_nic("ib0", sub, 50.0)
    nt.set_nvlink(0, 1, 100.0)
    nt.set_gpu_bus_id(2, "0000:c1:00.0")
    assert nt.to_dict() == {
        "gpus": [{"index": 0, "bus_id": None, "pcie_switch": 0, "nearest_nic": "ib0",
                  "nvlink": {"1": 100.0}},
                 {"index": 1, "bus_id": None, "pcie_switch": 1, "nearest_nic": "ib0",
                  "nvlink": {"0": 100.0}},
                 {"index": 2, "bus_id": "0000:c1:00.0", "pcie_switch": None,
                  "nearest_nic": "ib0", "nvlink": {}}],
        "nics": [{"name": "ib0", "pcie_switch": 1}],
        "pcie_switches": [{"parent": None}, {"parent": 0}],
        "nvswitches": 0}
