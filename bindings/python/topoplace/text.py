# SPDX-License-Identifier: MIT
"""``--format text``: the CLI's answers rendered for a person.

A placement is drawn as a picture of the fleet: one line per domain of the level above the node
(a rack), one character per node::

    . free   + partly free   # busy (held, cordoned)   x down   N the new job   R replacement

Large fleets show only the lines the answer touches. A frag report is a table.
"""

MAX_LINES = 48
LEGEND = ("legend: . free  + partly free  # busy or cordoned  x down  N new job  "
          "R replacement  J the job's other nodes")


def render(answer):
    doc = answer.doc
    status = doc.get("status")
    ctx = answer.ctx
    if status == "invalid":
        return "invalid input: %s" % doc.get("message", "")
    if status in ("error", "unsupported"):
        return "%s: %s" % (status, doc.get("message", ""))
    command = ctx.get("command")
    if ctx.get("render"):          # a command with its own renderer (size)
        return ctx["render"](doc)
    if command == "frag":
        return _frag(doc)
    lines = []
    pl = ctx.get("placement")
    topo = ctx.get("topo")
    if status == "ok":
        lines.append(_summary(command, doc, pl, topo))
        if command == "defrag":
            lines.append("  (drawn on the cluster as it stands, before the plan's moves)")
    else:
        fit = doc.get("fit") or {}
        msg = doc.get("message", "")
        lines.append(msg if msg.startswith(status) else "%s: %s" % (status, msg))
        if fit:
            lines.append("  needed %s devices, %s free and matching; one %s takes at most %s"
                         % (fit.get("needed"), fit.get("free_total"), fit.get("level"),
                            fit.get("best")))
    if topo is not None and ctx.get("cluster") is not None:
        lines.append("")
        lines.extend(fleet_picture(topo, ctx["cluster"], pl if status == "ok" else None,
                                   command, ctx.get("job")))
    if status == "ok" and command == "replace" and doc.get("replaced"):
        lines.append("")
        lines.append("replaced:")
        for a, b in doc["replaced"].items():
            lines.append("  %s -> %s" % (a, b))
    if status == "ok" and command == "defrag":
        plan = doc.get("plan") or {}
        lines.append("")
        lines.append("plan: %d step(s), %s job(s) moved, cost %s s"
                     % (len(plan.get("steps", [])), plan.get("moved_jobs"), plan.get("cost_s")))
        for st in plan.get("steps", []):
            lines.append("  %-8s %s (%d devices)" % (st.get("action"), st.get("job"),
                                                   len(st.get("to") or st.get("from") or [])))
    return "\n".join(lines)


def _summary(command, doc, pl, topo):
    placement = doc.get("placement") or {}
    devices = placement.get("devices", [])
    parts = []
    for lv, doms in (placement.get("domains") or {}).items():
        if len(doms) <= 4:
            parts.append("%d %s (%s)" % (len(doms), lv, ", ".join(
                "%s: %d" % (k, v) for k, v in doms.items())))
        else:
            parts.append("%d %ss" % (len(doms), lv))
    parts.append("%d node%s" % (len(placement.get("nodes", {})),
                                "" if len(placement.get("nodes", {})) == 1 else "s"))
    job = doc.get("job") or (pl.job if pl is not None else "")
    head = "%s %s: %d devices on %s" % ("replaced" if command == "replace" else "placed",
                                        job, len(devices), ", ".join(parts))
    score = doc.get("score") or {}
    if "step_comm_us" in score:
        head += "\n  modelled all-reduce of 1 GiB: %.1f us" % score["step_comm_us"]
    return head


def fleet_picture(topo, cluster, pl, command, job=None):
    """One line per domain of the level above the node (the whole cluster for a one-level
    topology), one character per node."""
    nl = len(topo.levels) - 1
    new_nodes, other_nodes = set(), set()
    if pl is not None:
        if command == "replace":
            repl = set(pl.replaced.values())
            for d in pl.device_ids:
                n = topo.device_node(d)
                (new_nodes if topo.device_name(d) in repl else other_nodes).add(n)
            other_nodes -= new_nodes
        else:
            new_nodes = {topo.device_node(d) for d in pl.device_ids}
    mark = "R" if command == "replace" else "N"
    if nl == 0:
        groups = [("cluster", range(topo.node_count))]
    else:
        gl = nl - 1
        count = topo.domain_count(gl)
        doms = range(count)
        if count > MAX_LINES:
            touched = sorted({topo.node_domain(n, gl) for n in new_nodes | other_nodes})
            doms = touched[:MAX_LINES] if touched else range(MAX_LINES)
        groups = [(topo.domain_path(gl, d), topo.domain_nodes(gl, d)) for d in doms]
    width = max(len(name) for name, _ in groups) if groups else 0
    lines = [LEGEND]
    for name, nodes in groups:
        chars = []
        for n in nodes:
            if n in new_nodes:
                chars.append(mark)
            elif n in other_nodes:
                chars.append("J")
            else:
                chars.append(node_char(topo, cluster, n))
        lines.append("%-*s  %s" % (width, name, "".join(chars)))
    shown = len(groups)
    total = topo.domain_count(nl - 1) if nl > 0 else 1
    if shown < total:
        lines.append("(%d of %d %ss shown: those the answer touches)"
                     % (shown, total, topo.levels[nl - 1]))
    return lines


def node_char(topo, cluster, node):
    """'.' every device free, 'x' every device down, '#' none free, '+' some free."""
    size = len(topo.node_devices(node))
    free = cluster.free_count(topo.node_level, node)
    if free == size:
        return "."
    if free == 0 and all(cluster.device_down(d) for d in topo.node_devices(node)):
        return "x"
    return "#" if free == 0 else "+"


def _frag(doc):
    rows = [("level", "domains", "free", "fully free", "largest free", "fragmentation")]
    for lv, f in doc.get("levels", {}).items():
        rows.append((lv, str(f["domains"]), str(f["free"]), str(f["fully_free"]),
                     str(f["largest_free"]), "%.4f" % f["fragmentation"]))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for k, r in enumerate(rows):
        out.append("  ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i])
                             for i, c in enumerate(r)))
        if k == 0:
            out.append("  ".join("-" * w for w in widths))
    out.append("")
    out.append("devices: %d free, %d down, %d cordoned"
               % (doc.get("free", 0), doc.get("down", 0), doc.get("cordoned", 0)))
    return "\n".join(out)
