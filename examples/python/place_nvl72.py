#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Place a 512-GPU training job on a GB200 NVL72 fleet and print where it went.

Run from a build tree:  meson devenv -C build python3 examples/python/place_nvl72.py

The fleet has 2 blocks of 8 NVL72 racks (18 nodes x 4 GPUs each). Three racks of block0 already
run a small job on 6 of their nodes, so only 48 GPUs are free there. The new job asks for
groups of 4 GPUs (one node each), slices of 64 GPUs that each stay inside one rack, at most 64
GPUs per rack, and preferably one block: it should land in exactly 8 racks of block1.
"""

import sys

import topoplace as tp


def main():
    fleet = tp.Topology.nvl72(blocks=2, racks_per_block=8)
    cluster = tp.Cluster(fleet)

    # Running jobs: one node-sized job on each of the first 6 nodes of three racks of block0.
    for rack in (0, 3, 5):
        nodes = ["block0-rack%d-node%d" % (rack, n) for n in range(6)]
        cluster.assign("small-%d" % rack, nodes, tenant="t2", migratable=True)

    request = tp.Request(
        id="train-512", count=512, tenant="t1",
        group_size=4, group_level="node",          # one group per node
        preferred="block",                        # one block if any can hold it
        slices=[tp.Slice("rack", 64)],            # 64 consecutive ranks per rack
        max_per_domain=[tp.DomainCap("rack", devices=64)],
    )
    placement = cluster.place(request)
    if not placement.ok:
        print("%s: %s" % (placement.status, placement.message))
        print("fit: %s" % (placement.fit,))
        return 1

    print("placed %s: %d GPUs" % (placement.job, len(placement.devices)))
    for level in fleet.levels[:-1]:
        used = placement.domains[level]
        print("  %-5s %d used: %s" % (level, len(used),
                                      ", ".join("%s=%d" % kv for kv in used.items())))
    print("  nodes %d used" % len(placement.nodes))
    print("  ranks 0-3 on %s, ranks 508-511 on %s"
          % (", ".join(placement.devices[:4]), ", ".join(placement.devices[-4:])))
    print("  modelled 1 GiB all-reduce: %.0f us" % placement.step_comm_us)

    cluster.commit(placement)                     # the job now runs there
    print("free GPUs after commit: %d of %d" % (cluster.free_total_count, fleet.device_count))
    return 0


if __name__ == "__main__":
    sys.exit(main())
