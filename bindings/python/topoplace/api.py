# SPDX-License-Identifier: MIT
"""Compatibility module: the names of the Pythonic layer, as ``topoplace.api`` gave them before
the layer was split by object family. New code imports them from :mod:`topoplace` itself.

The families live in :mod:`topoplace.topology` (:class:`NodeType`, :class:`TopologyBuilder`,
:class:`Topology`, :class:`Fabric`), :mod:`topoplace.cluster` (:class:`Cluster`,
:class:`Savepoint`, :class:`JobInfo`, :func:`place`, :func:`commit`, :func:`replace`),
:mod:`topoplace.request` (:class:`Request` and its parts), :mod:`topoplace.placement`
(:class:`Placement`, :class:`Fit`) and :mod:`topoplace.defrag` (fragmentation reports, policies
and plans); :mod:`topoplace._core` holds what they share and :mod:`topoplace._defaults` the
option defaults read from the header.
"""

from ._core import JOB_CLASSES, LINK_KINDS, strerror, version, version_string
from ._core import NONE  # noqa: F401  (topoplace.api.NONE was importable)
from .cluster import Cluster, JobInfo, Savepoint, commit, place, replace
from .defrag import DefragPolicy, FragReport, JobShape, LevelFrag, Plan, PlanStep
from .placement import Fit, Partition, Placement
from .request import Box, Colocate, DomainCap, Request, Select, Slice, Spread
from .topology import Fabric, NodeType, Topology, TopologyBuilder

__all__ = ["version", "version_string", "strerror", "NodeType", "TopologyBuilder", "Topology",
           "Fabric", "Cluster", "Savepoint", "JobInfo", "Slice", "DomainCap", "Spread",
           "Colocate", "Select", "Box", "Request", "Fit", "Placement", "Partition", "LevelFrag",
           "FragReport",
           "JobShape", "DefragPolicy", "Plan", "PlanStep", "place", "commit", "replace",
           "JOB_CLASSES", "LINK_KINDS"]
