# SPDX-License-Identifier: MIT
"""before_after.py: the report's before/after table of host leases (issue 18), from one run.

"Before" is a host lease as a memfd of its own on the socket alone (the design before issue 18,
still the path of a client that offers neither feature: ROCMMEM_HOST_ARENA=0 ROCMMEM_LANE=0, or an
older librocmmem); "after" is a lease as a range of the client's arena, its requests through the
connection's request lane (librocmmem's defaults); the round trip also shows the arena on the
socket alone (ROCMMEM_LANE=0) between the two. bench_roundtrip and bench_scale measure them in the
same run, side by side, so every row compares figures taken minutes apart on one machine.
"""


def _ratio(v):
    return "-" if v is None else "%.2f" % v


def _level(series, n):
    for lv in series.get("levels", []):
        if lv.get("leases") == n:
            return lv
    return None


def _top(series):
    run = [lv for lv in series.get("levels", []) if not lv.get("not_run")]
    return (run[0], run[-1]) if len(run) > 1 else (None, None)


def _cost(series):
    """The top level's op cost over the first level's (the worse of probe and fullest)."""
    first, top = _top(series)
    if not top:
        return None, "%s" % series.get("not_run", "not run")
    r = max(top["ratio_p50_vs_first"], top.get("ratio_fullest_p50_vs_first", 0))
    return r, "%.2f (%d -> %d leases)" % (r, first["leases"], top["leases"])


def _roundtrip_rows(rt, rows):
    arena = rt.get("arena_in_use", True)
    for p in rt.get("placements", []):
        same = p["name"] == "same-core"
        r = p.get("ratio_p50")
        rows.append(("Round trip p50 / floor, %s" % p["name"], _ratio(p.get("per_lease_ratio_p50")),
                     _ratio(r), "<= 1.3" if same else "(info)",
                     ("met" if r <= 1.3 else "not met") if same and arena else
                     "no arena in this build" if not arena else "info"))
        t = p.get("daemon_p99_over_p50")
        rows.append(("Round trip p99 / p50, %s" % p["name"], _ratio(p.get("per_lease_p99_over_p50")),
                     _ratio(t), "<= 2" if same else "(info)",
                     ("met" if t <= 2 else "not met") if same and arena else
                     "no arena in this build" if not arena else "info"))
        rows.append(("Round trip p50 (us), %s" % p["name"],
                     "%.1f" % p["daemon_per_lease"]["p50"], "%.1f" % p["daemon"]["p50"],
                     "floor %.1f us" % p["floor"]["p50"], "info"))
        if "daemon_socket" in p:
            rows.append(("Round trip p50 / floor, %s, the arena on the socket alone "
                         "(ROCMMEM_LANE=0)" % p["name"], _ratio(p.get("per_lease_ratio_p50")),
                         "%s (p50 %.1f us; through the lane: %s of it)"
                         % (_ratio(p.get("socket_ratio_p50")), p["daemon_socket"]["p50"],
                            _ratio(p.get("lane_over_socket_p50"))), "(info)", "info"))


def _scale_rows(sc, rows):
    series = {s["name"]: s for s in sc.get("series", [])}
    before, after = series.get("per-lease", {}), series.get("arena", {})
    b100, a100 = _level(before, 100000), _level(after, 100000)
    if b100 is not None or a100 is not None:
        a_text = (after["not_run"] if after.get("not_run") else
                  a100.get("not_run") if a100 and a100.get("not_run") else
                  "ran: op p50 %.1f us" % a100["op"]["p50"] if a100 else "not asked")
        b_text = (b100.get("not_run") if b100 and b100.get("not_run") else
                  "ran: op p50 %.1f us" % b100["op"]["p50"] if b100 else "not asked")
        rows.append(("100k live leases point (host backend, RLIMIT_NOFILE %s)"
                     % sc.get("rlimit_nofile"), b_text, a_text, "runs",
                     "met" if a100 and not a100.get("not_run") else "not met"))
    rb, tb = _cost(before)
    ra, ta = _cost(after)
    rows.append(("Op cost ratio, top level / first level (1k) of live leases", tb, ta, "<= 1.5",
                 ("met" if ra <= 1.5 else "not met") if ra is not None else "not run"))
    for key, what, fmt in (("daemon_fds", "Daemon descriptors at the top level", "%d"),
                           ("rss_bytes_per_item", "Daemon VmRSS per lease (B)", "%.0f"),
                           ("heap_bytes_per_item", "Daemon heap per lease (B)", "%.0f"),
                           ("kernel_slab_bytes_per_item_noisy",
                            "Kernel slab per lease (B, system-wide, noisy)", "%.0f"),
                           ("status_ms", "Full status reply at the top level (ms)", "%.1f")):
        vals = []
        for s in (before, after):
            first, top = _top(s)
            vals.append(fmt % top[key] + " (%d leases)" % top["leases"]
                        if top and key in top else "-")
        rows.append((what, vals[0], vals[1], "O(connections)" if key == "daemon_fds" else "-",
                     "info"))
    vals = ["%.1f ms (%d leases)" % (s["hangup_op_ms"], s["hangup_leases"])
            if s.get("hangup_op_ms") is not None else "-" for s in (before, after)]
    rows.append(("A probe's op right after the fullest connection hangs up (its leases freed "
                 "first)", vals[0], vals[1], "-", "info"))


def rows(results):
    """The table's rows: (figure, before, after, target, verdict)."""
    out = []
    rt = (results.get("roundtrip") or {}).get("data")
    sc = (results.get("scale") or {}).get("data")
    if rt and "per_lease_ratio_p50" in (rt.get("placements") or [{}])[0]:
        _roundtrip_rows(rt, out)
    if sc:
        _scale_rows(sc, out)
    return out


def markdown(table):
    """The section's lines, or none without rows."""
    if not table:
        return []
    lines = ["## Before and after: host arenas and the request lane (issue 18)", "",
             "Before: a memfd per host lease, every request on the socket (a client without "
             "either feature: `ROCMMEM_HOST_ARENA=0 ROCMMEM_LANE=0`, or an older librocmmem). "
             "After: a range of the client's arena, requests through the connection's request "
             "lane (librocmmem's defaults). All measured in this run, on one machine, side by "
             "side (the round trip: one daemon, three connections, batches interleaved; scaling: "
             "fresh daemons climbing the levels, each series in each round).", "",
             "| figure | before (memfd per lease, socket) | after (arena, lane) | target | "
             "verdict |",
             "|---|---|---|---|---|"]
    for r in table:
        lines.append("| %s | %s | %s | %s | %s |" % r)
    lines.append("")
    return lines
