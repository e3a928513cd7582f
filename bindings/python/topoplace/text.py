# SPDX-License-Identifier: MIT
"""``--format text``: the CLI's answers rendered for a person.

A placement is drawn as a picture of the fleet: one line per domain of the level above the node
(a rack), one character per node::

    . free   + partly free   # busy (held, cordoned)   x down   N the new job   R replacement

A defrag or compact plan is drawn twice: before its moves, with ``M`` where a migrated job
leaves and ``V`` where a preempted job (a victim) stops, and after them (the plan carried out
on a copy of the state, then rolled back), with ``m`` where a migrated job lands and ``N`` the
new job; then each step with its devices ``from -> to``.

Large fleets show only the lines the answer touches. A frag report is a table.
"""

MAX_LINES = 48
LEGEND = ("legend: . free  + partly free  # busy or cordoned  x down  N new job  "
          "R replacement  J the job's other nodes")
PLAN_LEGEND = ("legend: . free  + partly free  # busy or cordoned  x down  M a migrated job "
               "leaves  V a preempted job stops  m a migrated job lands  N new job")


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
    if command in ("defrag", "compact") and status == "ok" and ctx.get("plan") is not None:
        return _plan(doc, ctx)
    if command == "compact":
        return "%s: %s" % (status, doc.get("message", ""))
    lines = []
    pl = ctx.get("placement")
    topo = ctx.get("topo")
    if status == "ok":
        lines.append(_summary(command, doc, pl, topo))
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
    return "\n".join(lines)


def _plan(doc, ctx):
    """A defrag or compact plan: the summary, the fleet before and after the moves, and the
    steps with ``from -> to``."""
    topo, cluster, plan = ctx["topo"], ctx["cluster"], ctx["plan"]
    command = ctx.get("command")
    pdoc = doc.get("plan") or {}
    lines = []
    if command == "defrag":
        lines.append(_summary(command, doc, plan.placement, topo))
    else:
        for lv, doms in (doc.get("free_domains") or {}).items():
            lines.append("compact: %d %s%s fully free after the plan%s"
                         % (len(doms), lv, "" if len(doms) == 1 else "s",
                            (": " + ", ".join(doms)) if len(doms) <= 8 else ""))
    before, after = plan_marks(topo, plan)
    lines.append("")
    lines.append("before the moves:")
    lines.extend(fleet_picture(topo, cluster, None, command, marks=before,
                               touched=set(before) | set(after), legend=PLAN_LEGEND))
    lines.append("")
    lines.append("after the moves:")
    with cluster.savepoint(rollback=True):
        for i in range(len(plan.steps)):
            if plan.steps[i].action != "place":
                cluster.apply_step(plan, i)
        lines.extend(fleet_picture(topo, cluster, None, command, marks=after,
                                   touched=set(before) | set(after), legend=None))
    lines.append("")
    lines.append("plan: %d step(s), %s job(s) moved, %s device(s), cost %s s"
                 % (len(pdoc.get("steps", [])), pdoc.get("moved_jobs"),
                    pdoc.get("moved_devices"), pdoc.get("cost_s")))
    for st in plan.steps:
        if st.action == "migrate":
            what = "%s -> %s" % (devices_text(st.from_devices), devices_text(st.to_devices))
        elif st.action == "preempt":
            what = "%s (stopped)" % devices_text(st.from_devices)
        else:
            what = "-> %s" % devices_text(st.to_devices)
        n = len(st.to_devices or st.from_devices)
        lines.append("  %-8s %s (%d device%s): %s"
                     % (st.action, st.job, n, "" if n == 1 else "s", what))
    return "\n".join(lines)


def plan_marks(topo, plan):
    """({node: mark} before the moves, {node: mark} after them) of a plan: before, ``V`` on
    the nodes of a preempted job and ``M`` on those a migrated job leaves (``V`` wins); after,
    ``N`` on the new job's nodes and ``m`` where a migrated job lands (``N`` wins)."""
    before, after = {}, {}
    for st in plan.steps:
        if st.action in ("migrate", "preempt"):
            mark = "M" if st.action == "migrate" else "V"
            for d in st.from_ids:
                n = topo.device_node(d)
                if before.get(n) != "V":
                    before[n] = mark
        if st.action in ("migrate", "place"):
            mark = "m" if st.action == "migrate" else "N"
            for d in st.to_ids:
                n = topo.device_node(d)
                if after.get(n) != "N":
                    after[n] = mark
    return before, after


MAX_NODE_GROUPS = 12


def devices_text(devices, most=MAX_NODE_GROUPS):
    """Device names ``node/index`` in order, a node's run of indices written once:
    ``x1/0-3 x2/0,2``; past ``most`` runs, the first ones and how many more (the JSON
    answer lists them all)."""
    groups = []
    for name in devices:
        node, _, idx = name.rpartition("/")
        if groups and groups[-1][0] == node:
            groups[-1][1].append(idx)
        else:
            groups.append((node, [idx]))
    shown = groups if len(groups) <= most else groups[:most // 2]
    text = " ".join("%s/%s" % (node, _ranges(idx)) for node, idx in shown)
    if len(shown) < len(groups):
        text += " ... and %d more node runs" % (len(groups) - len(shown))
    return text


def _ranges(indices):
    """"0-3,5" for ["0", "1", "2", "3", "5"] (runs of consecutive integers, in the given
    order)."""
    try:
        nums = [int(i) for i in indices]
    except ValueError:
        return ",".join(indices)
    out = []
    start = prev = nums[0]
    for x in nums[1:] + [None]:
        if x is not None and x == prev + 1:
            prev = x
            continue
        out.append(str(start) if start == prev else "%d-%d" % (start, prev))
        if x is not None:
            start = prev = x
    return ",".join(out)


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


def fleet_picture(topo, cluster, pl, command, job=None, marks=None, touched=None,
                  legend=LEGEND):
    """One line per domain of the level above the node (the whole cluster for a one-level
    topology), one character per node. ``marks`` ({node: character}) draws those nodes so;
    ``touched`` (nodes) widens the lines a large fleet shows; ``legend`` None leaves it out."""
    marks = marks or {}
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
            shown = sorted({topo.node_domain(n, gl)
                            for n in new_nodes | other_nodes | set(marks) | set(touched or ())})
            doms = shown[:MAX_LINES] if shown else range(MAX_LINES)
        groups = [(topo.domain_path(gl, d), topo.domain_nodes(gl, d)) for d in doms]
    width = max(len(name) for name, _ in groups) if groups else 0
    lines = [legend] if legend else []
    for name, nodes in groups:
        chars = []
        for n in nodes:
            if n in marks:
                chars.append(marks[n])
            elif n in new_nodes:
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
