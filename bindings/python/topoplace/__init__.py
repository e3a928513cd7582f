# SPDX-License-Identifier: MIT
"""libtopoplace for Python: topology-aware placement of GPU jobs.

    >>> import topoplace as tp
    >>> topo = tp.Topology.nvl72(blocks=2, racks_per_block=8)
    >>> cluster = tp.Cluster(topo)
    >>> p = cluster.place(tp.Request(count=512, group_size=4, preferred="block",
    ...                              slices=[("rack", 64)]))
    >>> p.status, len(p.devices)
    ('ok', 512)

The classes wrap the C API (include/topoplace.h) through cffi; see docs/python.md. They live
in one module per object family: :mod:`topoplace.topology`, :mod:`topoplace.cluster`,
:mod:`topoplace.request`, :mod:`topoplace.placement` and :mod:`topoplace.defrag` (the errors
in :mod:`topoplace.errors`); import them from here. The command-line tool is
``python3 -m topoplace place|frag|replace|defrag|compact FILE`` and ``python3 -m topoplace
import hwloc|nvidia-smi FILE`` (:mod:`topoplace.cli`).
:mod:`topoplace.scenario` (the scenario format) needs no C library, so the names below are
loaded on first use.
"""

# In a build tree the compiled module sits in <build>/bindings/python/topoplace/ while these files
# stay in the source tree; with both folders on PYTHONPATH (meson devenv, the tests) they form
# one package. Installed, it is one folder and this changes nothing.
__path__ = __import__("pkgutil").extend_path(__path__, __name__)

__all__ = [
    # objects
    "Topology", "TopologyBuilder", "NodeType", "Fabric", "Cluster", "Savepoint", "JobInfo",
    # requests and answers
    "Request", "Slice", "DomainCap", "Spread", "Colocate", "Select", "Box", "Placement", "Fit",
    "Partition", "FragReport", "LevelFrag", "JobShape", "DefragPolicy", "Plan", "PlanStep",
    "DefragStats", "StepModel", "step_us", "efficiency", "NIC_KINDS", "place", "commit", "replace",
    # serving
    "Model", "SizingOption", "size_model", "place_model", "hbm_gbps", "PDInstance", "place_pd",
    "release_pd_failed",
    # errors
    "TopoplaceError", "InvalidArgument", "OutOfMemory", "NotFound", "AlreadyExists",
    "Infeasible", "Busy", "Fragmented", "NoPlan", "ParseError", "LimitExceeded", "Corrupt",
    "ClosedError", "check",
    # misc
    "version", "version_string", "strerror", "err_name", "JOB_CLASSES", "LINK_KINDS",
]

# Where each name lives: the errors need no compiled module, the rest do.
_MODULES = {}
for _mod, _names in (
        ("errors", ("TopoplaceError", "InvalidArgument", "OutOfMemory", "NotFound",
                    "AlreadyExists", "Infeasible", "Busy", "Fragmented", "NoPlan", "ParseError",
                    "LimitExceeded", "Corrupt", "ClosedError", "check")),
        ("_core", ("version", "version_string", "strerror", "err_name", "JOB_CLASSES",
                   "LINK_KINDS", "NIC_KINDS")),
        ("cost", ("StepModel", "step_us", "efficiency")),
        ("topology", ("Topology", "TopologyBuilder", "NodeType", "Fabric")),
        ("cluster", ("Cluster", "Savepoint", "JobInfo", "place", "commit", "replace")),
        ("request", ("Request", "Slice", "DomainCap", "Spread", "Colocate", "Select", "Box")),
        ("placement", ("Placement", "Fit", "Partition")),
        ("defrag", ("FragReport", "LevelFrag", "JobShape", "DefragPolicy", "Plan", "PlanStep",
                    "DefragStats")),
        ("sizing", ("Model", "SizingOption", "size_model", "place_model", "hbm_gbps",
                    "PDInstance", "place_pd", "release_pd_failed"))):
    for _name in _names:
        _MODULES[_name] = _mod
del _mod, _names, _name


def __getattr__(name):
    """The public names, each loaded from its family's module on first use, so that
    `import topoplace.scenario` (and the CLI's validation) work without the compiled module;
    a missing build shows up as an ImportError here."""
    import importlib
    if name == "__version__":
        return importlib.import_module("._core", __name__).version_string()
    mod = _MODULES.get(name)
    if mod is not None:
        return getattr(importlib.import_module("." + mod, __name__), name)
    raise AttributeError("module 'topoplace' has no attribute %r" % name)


def __dir__():
    return sorted(set(globals()) | set(__all__))
