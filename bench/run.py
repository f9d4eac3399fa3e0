#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""run.py: runs rocmmemd's benchmarks and writes the report (REPORT.md and REPORT.json).

Usage: run.py --build-dir DIR [--mode tiny|quick|full] [--out DIR] [--only NAME,... [--merge]]
              [--no-profile] [--check]

Every benchmark program measures its subject and its baseline in the same run, interleaved,
and writes JSON; this script adds the machine, the versions and the load average, evaluates
each figure against its target (the ratios of DESIGN.md's "Targets"), and explains the gaps
with the profile the programs gathered. --check then verifies the report's shape (the smoke
test): the JSON parses, every benchmark is present, every ratio is positive. Timings are never
checked: they belong to the machine. --only NAME --merge reruns some benchmarks into the report
already in --out, keeping the others' figures; the report says which were taken separately,
when, at which commit and under which load.
"""

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import before_after  # noqa: E402  (beside this file)
except ImportError:  # a bundle that carries run.py alone (scripts/gpu_bundle.py): no such table
    before_after = None

BENCHMARKS = ["roundtrip", "throughput", "scale", "replay", "backfill", "evict", "telemetry", "gpu"]
TIMEOUTS = {"tiny": 150, "quick": 600, "full": 1800}


# ---------------------------------------------------------------------------------------------
# The machine and the versions


def read(path, default=""):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return default


def loadavg():
    parts = read("/proc/loadavg").split()
    return [float(x) for x in parts[:3]] if len(parts) >= 3 else []


def machine():
    cpuinfo = read("/proc/cpuinfo")
    model = re.search(r"^model name\s*:\s*(.+)$", cpuinfo, re.M)
    meminfo = read("/proc/meminfo")
    total = re.search(r"^MemTotal:\s*(\d+)", meminfo, re.M)
    virt = "hypervisor" in (re.search(r"^flags\s*:(.*)$", cpuinfo, re.M) or [None, ""])[1]
    try:
        usable = len(os.sched_getaffinity(0))
    except OSError:
        usable = os.cpu_count()
    thp = read("/sys/kernel/mm/transparent_hugepage/shmem_enabled").strip()
    return {
        "cpu_model": model.group(1).strip() if model else platform.processor(),
        "cpus_online": os.cpu_count(),
        "cpus_usable": usable,
        "memory_gib": round(int(total.group(1)) / 1048576, 1) if total else None,
        "kernel": platform.release(),
        "virtualized": virt,
        "shmem_thp": thp,
        "nofile_limit": _nofile(),
    }


def _nofile():
    try:
        import resource

        return list(resource.getrlimit(resource.RLIMIT_NOFILE))
    except (ImportError, OSError):
        return None


def first_line(cmd):
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
        text = (out.stdout or out.stderr).strip()
        return text.splitlines()[0] if text else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def versions(build, rocmmemd):
    info = {}
    try:
        with open(os.path.join(build, "bench", "build_info.json"), encoding="utf-8") as f:
            info = json.load(f)
    except (OSError, ValueError):
        pass
    v = {
        "rocmmemd": first_line([rocmmemd, "--version"]),
        "project": info.get("project_version", ""),
        "git_commit": info.get("git_commit", ""),
        "compiler": info.get("compiler", ""),
        "build_type": info.get("build_type", ""),
        "c_flags": info.get("c_flags", ""),
        "libuv": info.get("libuv", ""),
        "protobuf_c": info.get("protobuf_c", ""),
        "python": platform.python_version(),
    }
    # The source tree, if it is here: the commit now, and whether it differs from it.
    src = info.get("source_dir", "")
    # (.git is a file in a worktree)
    if src and os.path.exists(os.path.join(src, ".git")) and shutil.which("git"):
        commit = first_line(["git", "-C", src, "rev-parse", "HEAD"])
        if commit:
            v["git_commit"] = commit
        try:
            out = subprocess.run(["git", "-C", src, "status", "--porcelain", "--untracked-files=no"],
                                 capture_output=True, text=True, timeout=30)
            v["git_dirty"] = bool(out.stdout.strip())
        except (OSError, subprocess.SubprocessError):
            pass
    return v


# ---------------------------------------------------------------------------------------------
# Running the programs


def run_program(name, argv, env, log_path, timeout):
    start = time.monotonic()
    with open(log_path, "w", encoding="utf-8") as log:
        try:
            rc = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                                timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
        except OSError as e:
            log.write("Could not run %s: %s\n" % (argv[0], e))
            rc = "not found"
    return rc, time.monotonic() - start


def tail(path, lines=15):
    return "\n".join(read(path).splitlines()[-lines:])


def run_all(args, build, out):
    raw = os.path.join(out, "raw")
    profile = os.path.join(out, "profile")
    os.makedirs(raw, exist_ok=True)
    rocmmemd = os.path.join(build, "rocmmemd")
    bindir = os.path.join(build, "bench")
    fake = os.path.join(build, "tests", "fakegpu", "cuda", "libcuda.so.1")
    env = dict(os.environ)
    env["ROCMMEMD"] = rocmmemd
    if args.lib_dir:
        env["LD_LIBRARY_PATH"] = args.lib_dir + (":" + env["LD_LIBRARY_PATH"]
                                                 if env.get("LD_LIBRARY_PATH") else "")
    plan = []
    for name in BENCHMARKS:
        extra = []
        if name == "roundtrip":
            extra = ["--breakdown"]
            if not args.no_profile and args.mode != "tiny":
                os.makedirs(profile, exist_ok=True)
                extra += ["--profile", profile]
        if name == "scale" and os.path.exists(fake):
            extra = ["--fake-cuda", fake]
        plan.append((name, "bench_" + name, extra, env))
    if os.path.exists(fake):
        # The GPU path's code, run over the stand-in driver: proof that it works, no figure.
        fenv = dict(env, ROCMMEM_CUDA_LIBRARY=fake, FAKECUDA_DEVICES="8G")
        plan.append(("gpu_stand_in", "bench_gpu", ["--runtime", "cuda", "--stand-in"], fenv))
    results = {}
    for name, program, extra, penv in plan:
        if args.only and name not in args.only and name.split("_")[0] not in args.only:
            continue
        path = os.path.join(raw, name + ".json")
        log = os.path.join(raw, name + ".log")
        if os.path.exists(path):
            os.unlink(path)
        argv = [os.path.join(bindir, program), "--rocmmemd", rocmmemd, "--mode", args.mode,
                "--json", path] + extra
        print("run.py: %s ..." % name, file=sys.stderr, flush=True)
        load_before = loadavg()
        rc, took = run_program(name, argv, penv, log, TIMEOUTS[args.mode])
        entry = {"program": program, "args": extra, "exit": rc, "seconds": round(took, 1),
                 "load_before": load_before, "load_after": loadavg()}
        try:
            with open(path, encoding="utf-8") as f:
                entry["data"] = json.load(f)
        except (OSError, ValueError) as e:
            entry["data"] = None
            entry["parse_error"] = str(e)
        if rc == 0 and entry["data"] is not None:
            status = entry["data"].get("status", "ok")
            entry["status"] = "not run" if status.startswith("not run") else "ok"
        else:
            entry["status"] = "error"
            entry["log_tail"] = tail(log)
            print("run.py: %s failed (%s):\n%s" % (name, rc, entry["log_tail"]), file=sys.stderr)
        print("run.py: %s %s in %.1f s" % (name, entry["status"], took), file=sys.stderr)
        results[name] = entry
    return results, profile


# ---------------------------------------------------------------------------------------------
# Figures and targets


def verdict(ok):
    return "met" if ok else "not met"


def fig(benchmark, fid, title, unit, subject=None, baseline=None, ratio=None, target="",
        verdict_text="", value=None, note=""):
    f = {"id": fid, "benchmark": benchmark, "title": title, "unit": unit, "value": value,
         "ratio": ratio, "target": target, "verdict": verdict_text, "note": note}
    if subject:
        f.update({"p50": subject.get("p50"), "p99": subject.get("p99"),
                  "p999": subject.get("p999"), "n": subject.get("n")})
    if baseline:
        f["baseline"] = {"name": baseline[0], "p50": baseline[1].get("p50"),
                         "p99": baseline[1].get("p99"), "p999": baseline[1].get("p999")}
    return f


def _round_tails(p):
    """How the rounds' own p99s spread (each over the run's p50), the daemon's and the floor's:
    a burst of other work on the machine lands in a few rounds of both."""
    d, f = p.get("daemon_round_p99_over_p50"), p.get("floor_round_p99_over_p50")
    if not d or not f or not d.get("rounds"):
        return ""
    return ("; over %d rounds, each round's p99/p50: median %.2f, worst %.2f, over 2 in %d (the floor's: "
            "median %.2f, worst %.2f, over 2 in %d)"
            % (d["rounds"], d["median"], d["worst"], d["rounds_over_2"], f["median"], f["worst"],
               f["rounds_over_2"]))


def figures_roundtrip(d):
    out = []
    arena = d.get("arena_in_use", True)
    no_arena = ("" if arena else "the daemon handed this client a memfd per lease (%s fds for 4 "
                "leases): no host arena in this build, so both rows measure the per-lease path"
                % d.get("daemon_fds_for_4_leases_arena"))
    for p in d.get("placements", []):
        name = p["name"]
        floor = ("raw SEQPACKET 2 round trips + 1 fd", p["floor"])
        r = p["ratio_p50"]
        lane = ("; vs the lane floor (no fd, a shared page): %.2f" % p["ratio_p50_vs_floor_lane"]
                if "ratio_p50_vs_floor_lane" in p else "")
        out.append(fig("roundtrip", "roundtrip.%s.p50" % name,
                       "Lease round trip, %s, host arena through the request lane "
                       "(acquire+touch+release; librocmmem's defaults)" % name, "us", p["daemon"],
                       floor, r, "p50 <= 1.3x floor", verdict(r <= 1.3),
                       note=no_arena or "vs the floor without an fd: %.2f; vs the floor doing "
                       "the arena's kernel work (punch, one fault): %.2f%s"
                       % (p["ratio_p50_vs_floor_no_fd"], p["ratio_p50_vs_floor_with_arena_work"],
                          lane)))
        t = p["daemon_p99_over_p50"]
        out.append(fig("roundtrip", "roundtrip.%s.tail" % name,
                       "Lease round trip tail, %s, host arena: p99 / p50" % name, "ratio",
                       p["daemon"], None, t, "p99 <= 2x p50", verdict(t <= 2.0),
                       note="the floor's own p99/p50 in the same run: %.2f%s"
                       % (p["floor_p99_over_p50"], _round_tails(p))))
        if "daemon_socket" in p:
            out.append(fig("roundtrip", "roundtrip.%s.socket.p50" % name,
                           "Lease round trip, %s, host arena on the socket alone (before the "
                           "lane: ROCMMEM_LANE=0)" % name, "us", p["daemon_socket"], floor,
                           p["socket_ratio_p50"], "(before; the lane row above is after)", "info",
                           note="p99/p50 %.2f; through the lane p50 / socket-only p50: %.2f"
                           % (p["socket_p99_over_p50"], p["lane_over_socket_p50"])))
        if "floor_lane" in p:
            out.append(fig("roundtrip", "roundtrip.%s.vs_lane_floor" % name,
                           "Lease round trip vs the lane floor (the floor's two round trips "
                           "through a shared page: eventfd doorbell, futex wait and wake, no fd), "
                           "%s" % name, "us", p["daemon"],
                           ("lane page, 2 round trips, no fd", p["floor_lane"]),
                           p["ratio_p50_vs_floor_lane"],
                           "(no target: what rocmmemd and librocmmem add beyond the lane's own "
                           "IPC)", "info",
                           note="the lane floor itself: %.2fx the raw socket floor"
                           % p["floor_lane_ratio_p50"]))
        if "daemon_per_lease" in p:
            r = p["per_lease_ratio_p50"]
            out.append(fig("roundtrip", "roundtrip.%s.per_lease.p50" % name,
                           "Lease round trip, %s, memfd per lease (before: ROCMMEM_HOST_ARENA=0, "
                           "acquire+map+touch+unmap+release)" % name, "us",
                           p["daemon_per_lease"], floor, r,
                           "(before; the arena row above is after)", "info",
                           note="p99/p50 %.2f; vs the floor doing the same memory work: %.2f; "
                           "arena p50 / per-lease p50: %.2f"
                           % (p["per_lease_p99_over_p50"],
                              p["per_lease_ratio_p50_vs_floor_with_memory_work"],
                              p["arena_over_per_lease_p50"])))
        out.append(fig("roundtrip", "roundtrip.%s.vs_arena_floor" % name,
                       "Lease round trip vs the floor doing the arena's kernel work, %s" % name,
                       "us", p["daemon"], ("floor + hole punch + one fault in a kept mapping",
                                           p["floor_with_arena_work"]),
                       p["ratio_p50_vs_floor_with_arena_work"],
                       "(no target: what rocmmemd and librocmmem add beyond the kernel's work)",
                       "info"))
        if "floor_epoll" in p:
            out.append(fig("roundtrip", "roundtrip.%s.vs_epoll_floor" % name,
                           "Lease round trip vs an event loop answering the floor's ping-pong "
                           "(epoll_wait, then receive until empty), %s" % name, "us",
                           p["daemon"], ("epoll server, 2 round trips + 1 fd", p["floor_epoll"]),
                           p["ratio_p50_vs_floor_epoll"],
                           "(no target: what rocmmemd and librocmmem add beyond serving many "
                           "sockets)", "info",
                           note="the epoll server itself: %.2fx the raw floor%s"
                           % (p["floor_epoll_ratio_p50"], "; the round trip on the socket alone "
                              "(ROCMMEM_LANE=0) over it: %.2f" % bench_ratio(
                                  p["daemon_socket"]["p50"], p["floor_epoll"]["p50"])
                              if "daemon_socket" in p else "")))
    return out


def figures_throughput(d):
    out = []
    # Without the arena every grant makes a memfd in the daemon: not what librocmmem does.
    arena = ("" if d.get("host_arena", True) else
             "; the daemon refused the host arena: a memfd per grant, unlike librocmmem's")
    for lv in d.get("levels", []):
        n = lv["clients"]
        r = lv["ratio"]
        share = lv["rocmmemd"]["share_min_over_mean"]
        at64 = n == 64
        out.append(fig("throughput", "throughput.%d.rate" % n,
                       "Request rate, %d closed-loop client(s), mixed requests" % n, "req/s",
                       lv["rocmmemd"]["latency"], ("epoll echo server", lv["echo"]["latency"]), r,
                       ">= 0.70x echo at 64 clients" if at64 else "(shown for the curve)",
                       verdict(r >= 0.70) if at64 else "info", value=lv["rocmmemd"]["rate_per_s"],
                       note="echo: %.0f req/s%s" % (lv["echo"]["rate_per_s"], arena)))
        out.append(fig("throughput", "throughput.%d.fairness" % n,
                       "Fairness, %d client(s): smallest client's share / mean share" % n, "ratio",
                       None, None, None,
                       "no client under half the mean share at 64 clients" if at64 else
                       "(shown for the curve)", verdict(share >= 0.5) if at64 else "info",
                       value=share, note="echo server in the same run: %.2f"
                       % lv["echo"]["share_min_over_mean"]))
    return out


def _scale_note(lv):
    return ("daemon CPU per op %.1f us (x%.2f); on the connection holding the most leases p50 "
            "%.1f us (x%.2f); daemon memory per lease: VmRSS %.0f B, heap %s B; kernel slab %.0f "
            "B (system-wide, noisy); %s daemon fds; a full status reply (%d leases listed) %.1f ms"
            % (lv["daemon_cpu_us_per_op"], lv["ratio_cpu_vs_first"],
               lv.get("fullest_p50_us_median_of_rounds", 0),
               lv.get("ratio_fullest_p50_vs_first", 0), lv.get("rss_bytes_per_item", 0),
               "%.0f" % lv["heap_bytes_per_item"] if "heap_bytes_per_item" in lv else "-",
               lv.get("kernel_slab_bytes_per_item_noisy", 0), lv.get("daemon_fds"),
               lv.get("status_leases_listed", 0), lv.get("status_ms", 0)))


def _scale_clients(run, unit):
    out = []
    lv = run[-1] if run else None
    if lv:
        per = lv.get("rss_bytes_per_item", 0) / 1024.0
        out.append(fig("scale", "scale.clients.memory",
                       "Daemon memory per connected client (VmRSS growth, %d clients)"
                       % lv[unit], "KiB", None, None, None, "<= 16 KiB per client",
                       verdict(per <= 16.0), value=round(per, 2),
                       note="Pss growth: %.2f KiB per client"
                       % (lv.get("pss_bytes_per_item", 0) / 1024.0)))
        out.append(fig("scale", "scale.clients.cost",
                       "Lease op with %d idle clients connected vs none" % lv[unit], "us",
                       lv["op"], ("no other client", run[0]["op"]),
                       lv["ratio_p50_vs_first"], "(flat: within 1.5x)",
                       verdict(lv["ratio_p50_vs_first"] <= 1.5)))
    return out


def _scale_fds(name, s, first, top):
    """The daemon's descriptors from the first level to the top: O(connections), or one per
    lease."""
    per = s.get("leases_per_filler_connection") or 1
    conns = -(-top["leases"] // per) - -(-first["leases"] // per)
    grown = top["daemon_fds"] - first["daemon_fds"]
    leases = top["leases"] - first["leases"]
    arena = not s.get("fd_per_lease")
    return fig("scale", "scale.%s.fds" % name,
               "Daemon descriptors at %d live leases, %s (from %d at %d)"
               % (top["leases"], name, first["daemon_fds"], first["leases"]), "fds", None, None,
               None, "O(connections): at most 3 more per connection added" if arena else
               "(one per lease by design)",
               verdict(grown <= 3 * max(conns, 0) + 2) if arena else "info",
               value=top["daemon_fds"],
               note="%+d fds for %+d leases and %+d filler connections; DaemonInfo.fds_open %s"
               % (grown, leases, conns, top.get("daemon_fds_open_status", "-")))


def figures_scale(d):
    out = []
    for s in d.get("series", []):
        name = s["name"]
        if s.get("not_run"):
            out.append(fig("scale", "scale.%s" % name, "Scaling series '%s'" % name, "", None,
                           None, None, "", "not run", note=s["not_run"]))
            continue
        levels = s.get("levels", [])
        run = [lv for lv in levels if not lv.get("not_run")]
        unit = s["unit"]
        if name == "clients":
            out += _scale_clients(run, unit)
            continue
        first = run[0] if run else None
        stand_in = name not in ("host", "arena", "per-lease")
        for lv in run[1:]:
            r = max(lv["ratio_p50_vs_first"], lv.get("ratio_fullest_p50_vs_first", 0))
            out.append(fig("scale", "scale.%s.%d" % (name, lv[unit]),
                           "Lease op (acquire+release) at %d live leases, %s" % (lv[unit], name),
                           "us", lv["op"], ("%d live leases" % first[unit], first["op"]), r,
                           "(stand-in driver: its own costs grow, see Profile: scaling)"
                           if stand_in else "within 1.5x of 1k leases",
                           "info" if stand_in else verdict(r <= 1.5), note=_scale_note(lv)))
        if len(run) > 1 and not stand_in:
            top = run[-1]
            out.append(_scale_fds(name, s, first, top))
            out.append(fig("scale", "scale.%s.memory" % name,
                           "Daemon memory per live lease, %s (growth from %d to %d leases)"
                           % (name, first["leases"], top["leases"]), "B", None, None, None,
                           "(reported)", "info", value=round(top.get("rss_bytes_per_item", 0)),
                           note="VmRSS growth per lease; heap (DaemonInfo.heap_bytes) %s B per "
                           "lease; kernel slab %.0f B per lease (system-wide, noisy)"
                           % ("%.0f" % top["heap_bytes_per_item"]
                              if "heap_bytes_per_item" in top else "-",
                              top.get("kernel_slab_bytes_per_item_noisy", 0))))
        for lv in levels:
            if lv.get("not_run"):
                out.append(fig("scale", "scale.%s.%d" % (name, lv[unit]),
                               "Lease op at %d live leases, %s" % (lv[unit], name), "us",
                               None, None, None, "within 1.5x of 1k leases", "not run",
                               note=lv["not_run"]))
    return out


def figures_replay(d):
    out = []
    u, r, j = d["uncoordinated"], d["residency"], d.get("residency_one_acquire_per_step")
    out.append(fig("replay", "replay.failed", "Contention replay: failed steps through rocmmemd "
                   "residency (FramePack as it acquires its models)", "steps", None, None, None,
                   "zero failed steps through rocmmemd (uncoordinated fails some)",
                   verdict(r["failed_steps"] == 0 and u["failed_steps"] > 0),
                   value=r["failed_steps"],
                   note="uncoordinated: %d of %d steps failed; residency: %d of %d (%d timed "
                   "out waiting)" % (u["failed_steps"], u["steps"], r["failed_steps"], r["steps"],
                                      r.get("timed_out_steps", 0))))
    if j:
        out.append(fig("replay", "replay.failed_one_acquire", "Contention replay: failed steps, "
                       "FramePack's text encoders as one model (one acquire per step)", "steps",
                       None, None, None, "zero failed steps", verdict(j["failed_steps"] == 0),
                       value=j["failed_steps"],
                       note="%d of %d steps" % (j["failed_steps"], j["steps"])))
    for key, m in (("residency", r), ("one_acquire", j)):
        if not m:
            continue
        ratio = m["ratio_makespan_vs_ideal_median"]
        out.append(fig("replay", "replay.makespan.%s" % key,
                       "Contention replay makespan vs ideal serial schedule (%s)" %
                       ("residency" if key == "residency" else "one acquire per step"), "ms",
                       None, None, ratio, "makespan <= 1.1x the sum of the work times",
                       verdict(ratio <= 1.1), value=m["makespan_ms_median"],
                       note="ideal %.1f ms; model loads %.1f ms per run; waits %.1f ms per run; "
                       "%d evictions" % (m["ideal_serial_ms_median"], m["load_ms_per_run"],
                                         m["acquire_wait_ms_per_run"], m["evictions"])))
    out.append(fig("replay", "replay.makespan.uncoordinated",
                   "Contention replay makespan, uncoordinated (failed steps skip their work)",
                   "ms", None, None, u["ratio_makespan_vs_ideal_median"], "(baseline)", "info",
                   value=u["makespan_ms_median"]))
    return out


def figures_backfill(d):
    off, on = d["backfill_off"], d["backfill_on"]
    w50, w99, span = d["ratio_script_wait_p50"], d["ratio_script_wait_p99"], d["ratio_makespan_p50"]
    failed = off["failed_steps"] + on["failed_steps"]
    return [
        fig("backfill", "backfill.script_wait", "Backfilling replay: the small-lease script's "
            "total wait per run, backfilling on vs off", "us", on["script_total_wait"],
            ("--backfill off", off["script_total_wait"]), w50, "wait ratio < 1 (better)",
            verdict(w50 < 1.0), note="p99 ratio %.2f (p99 of %d runs: the largest); %d leases "
            "of %d MiB per run" % (w99, on["runs"], d["script_leases"],
                                   d["script_lease_bytes"] >> 20)),
        fig("backfill", "backfill.makespan", "Backfilling replay makespan, on vs off", "us",
            on["makespan"], ("--backfill off", off["makespan"]), span,
            "makespan ratio <= 1.05", verdict(span <= 1.05),
            note="waits per run, on / off: FramePack %.1f / %.1f ms, ComfyUI %.1f / %.1f ms"
            % (on["framepack_wait_ms_per_run"], off["framepack_wait_ms_per_run"],
               on["comfyui_wait_ms_per_run"], off["comfyui_wait_ms_per_run"])),
        fig("backfill", "backfill.failed", "Backfilling replay: failed steps, on and off",
            "steps", None, None, None, "zero failed steps", verdict(failed == 0), value=failed,
            note="on: %d of %d, off: %d of %d" % (on["failed_steps"], on["steps"],
                                                  off["failed_steps"], off["steps"])),
        fig("backfill", "backfill.lease_wait", "Backfilling replay: each of the script's "
            "acquires, on vs off", "us", on["script_lease_wait"],
            ("--backfill off", off["script_lease_wait"]),
            bench_ratio(on["script_lease_wait"]["p99"], off["script_lease_wait"]["p99"]),
            "(no target: p99 ratio shown)", "info"),
    ]


def bench_ratio(a, b):
    return a / b if b else None


def figures_evict(d):
    o = d["rocmmemd"]["overhead"]
    p99 = o["p99"]
    ok50, ok99 = o["p50"] <= 1000, p99 <= 1000
    v = "met" if ok99 else ("met at p50, not at p99" if ok50 else "not met")
    return [fig("evict", "evict.overhead", "Eviction turnaround minus the owner's unload time",
                "us", o, ("raw relay requester->relay->owner->relay->requester",
                          d["floor"]["overhead"]), d["ratio_overhead_p50_vs_floor"],
                "<= 1 ms beyond the owner's unload", v,
                note="turnaround p50 %.0f us, owner's unload p50 %.0f us (munmap of %d MiB)"
                % (d["rocmmemd"]["turnaround"]["p50"], d["rocmmemd"]["owner_unload"]["p50"],
                   d["weights_unmapped_bytes"] >> 20))]


def figures_telemetry(d):
    out = []
    off = next((c for c in d["configs"] if c["name"] == "off"), None)
    for c in d["configs"]:
        if c["name"] == "off":
            continue
        extra = c["extra_core_share_vs_off_median"] * 100
        is100 = c["name"] == "100Hz"
        out.append(fig("telemetry", "telemetry.%s.cpu" % c["name"],
                       "Daemon CPU with subscribers at %s (%d subscriber(s), samples + events)"
                       % (c["name"], c["subscribers"]), "% of a core", None, None, None,
                       "<= 1% of a core at 100 Hz" if is100 else "(shown for the curve)",
                       verdict(extra <= 1.0) if is100 else "info", value=round(extra, 3),
                       note="absolute %.3f%% (none: %.3f%%); %.0f samples/s received of %.0f asked"
                       % (c["daemon_core_share_schedstat"] * 100,
                          off["daemon_core_share_schedstat"] * 100 if off else 0,
                          c["samples_per_s_received"], c["samples_per_s_asked"])))
        out.append(fig("telemetry", "telemetry.%s.rt" % c["name"],
                       "Lease round trip p99 with subscribers at %s vs none" % c["name"], "us",
                       c["lease_round_trip"], ("no subscriber", off["lease_round_trip"]),
                       c["ratio_p99_vs_off_median"], "(no target: the ratio shown)", "info"))
    return out


def figures_gpu(d, name="gpu"):
    if d.get("status", "").startswith("not run"):
        return [fig(name, name, "GPU path (lease round trip with --backend cuda/hip)", "", None,
                    None, None, "", d["status"], note=d.get("why", ""))]
    out = []
    for s in d.get("sizes", []):
        base = ("in-process cuMemAlloc/hipMalloc", s["runtime_alloc_free"]) \
            if isinstance(s.get("runtime_alloc_free"), dict) else None
        ratio = s.get("ratio_p50_vs_runtime_alloc") or s.get("ratio_p50_vs_in_process_vmm")
        if not base and "runtime_vmm_create_map_free" in s:
            base = ("in-process VMM create+map", s["runtime_vmm_create_map_free"])
        out.append(fig(name, "%s.%d" % (name, s["bytes"]), "GPU lease round trip, warm (the "
                       "daemon's chunk pool), %d MiB (%s)"
                       % (s["bytes"] >> 20, d.get("status")), "us", s["lease_round_trip"], base,
                       ratio, "(no target in DESIGN.md)", "info",
                       note="cold (the daemon allocates) p50 %s us; import p50 %.1f us; trim "
                       "round trip p50 %s us; %s warm grants"
                       % (s.get("lease_cold_round_trip", {}).get("p50", "-"),
                          s["import_p50_us"], s.get("trim_round_trip", {}).get("p50", "-"),
                          d.get("pool_warm_grants", "-"))))
    return out


EXTRACT = {"roundtrip": figures_roundtrip, "throughput": figures_throughput,
           "scale": figures_scale, "replay": figures_replay, "backfill": figures_backfill,
           "evict": figures_evict,
           "telemetry": figures_telemetry, "gpu": figures_gpu,
           "gpu_stand_in": lambda d: figures_gpu(d, "gpu_stand_in")}


# ---------------------------------------------------------------------------------------------
# Profiles


def _strace_rows(path, ops):
    rows = []
    for line in read(path).splitlines():
        parts = line.split()
        if len(parts) < 5 or not re.match(r"^[\d.]+$", parts[0]) or parts[-1] == "total":
            continue
        try:
            calls = int(parts[3])
            errors = int(parts[4]) if len(parts) == 6 else 0
        except ValueError:
            continue
        rows.append({"syscall": parts[-1], "per_op": round(calls / ops, 2),
                     "errors_per_op": round(errors / ops, 2)})
    return rows


def perf_top(data, lines=18):
    if not os.path.exists(data) or not shutil.which("perf"):
        return []
    try:
        out = subprocess.run(["perf", "report", "-i", data, "--stdio", "--no-children",
                              "--sort", "dso,symbol", "-g", "none", "--percent-limit", "1"],
                             capture_output=True, text=True, timeout=120).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    rows = []
    for line in out.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+(\S+)\s+\[[.k]\]\s+(\S+)", line)
        if m:
            rows.append({"percent": float(m.group(1)), "dso": m.group(2), "symbol": m.group(3)})
    return rows[:lines]


def perf_by_dso(data):
    if not os.path.exists(data) or not shutil.which("perf"):
        return []
    try:
        out = subprocess.run(["perf", "report", "-i", data, "--stdio", "--no-children",
                              "--sort", "dso", "-g", "none"],
                             capture_output=True, text=True, timeout=120).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    rows = []
    for line in out.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+(\S+)", line)
        if m:
            rows.append({"percent": float(m.group(1)), "dso": m.group(2)})
    return rows


# The clients bench_roundtrip profiles: (key in the profile, file prefix, what the report says).
PROFILED = (("", ""), ("socket_", "socket-"), ("per_lease_", "per-lease-"))
PROFILED_WHAT = {"": "arena client through the request lane (librocmmem's defaults)",
                 "socket_": "arena client on the socket alone (ROCMMEM_LANE=0)",
                 "per_lease_": "per-lease client on the socket alone (ROCMMEM_HOST_ARENA=0, "
                 "ROCMMEM_LANE=0: the design before issue 18)"}


def profiles(results, profile_dir):
    prof = {}
    rt = results.get("roundtrip", {}).get("data") or {}
    p = rt.get("profile")
    if p:
        ops = max(p.get("ops", 1), 1)
        prof["roundtrip_ops"] = ops
        # The arena client's through the lane (as before: "strace-daemon.txt"), the same on
        # the socket alone, then the per-lease client's.
        for key, pre in PROFILED:
            if p.get("strace"):
                for side in ("daemon", "client"):
                    path = os.path.join(profile_dir, "%sstrace-%s.txt" % (pre, side))
                    if os.path.exists(path):
                        prof["%sstrace_%s" % (key, side)] = _strace_rows(path, ops)
            data = os.path.join(profile_dir, pre + "perf.data")
            if p.get("perf") and os.path.exists(data):
                prof[key + "perf_daemon_top"] = perf_top(data)
                prof[key + "perf_daemon_by_dso"] = perf_by_dso(data)
    return prof


# ---------------------------------------------------------------------------------------------
# The report


def us(v):
    if v is None:
        return "-"
    return "%.1f" % v if v < 1000 else "%.0f" % v


def num(v, digits=2):
    if v is None:
        return "-"
    if isinstance(v, float):
        return ("%%.%df" % digits) % v
    return str(v)


def write_markdown(path, report):
    m = report["machine"]
    v = report["versions"]
    L = []
    w = L.append
    w("# rocmmemd benchmark report")
    w("")
    w("Generated by `scripts/bench.sh` (`bench/run.py --mode %s`) on %s. How to run it and how to "
      "read it: [bench/README.md](../README.md)." % (report["mode"], report["date"]))
    w("")
    w("## Machine")
    w("")
    w("| | |")
    w("|---|---|")
    w("| CPU | %s, %s CPUs online (%s usable)%s |" % (
        m["cpu_model"], m["cpus_online"], m["cpus_usable"],
        ", virtual machine" if m["virtualized"] else ""))
    w("| memory | %s GiB |" % m["memory_gib"])
    w("| kernel | %s (shmem THP: %s) |" % (m["kernel"], m["shmem_thp"]))
    w("| load average before | %s |" % " ".join("%.2f" % x for x in report["load_before"]))
    w("| load average after | %s |" % " ".join("%.2f" % x for x in report["load_after"]))
    w("| RLIMIT_NOFILE | %s |" % (m["nofile_limit"],))
    w("")
    for sep in report.get("separately", []):
        load = "load average not recorded"
        if sep.get("load_before") and sep.get("load_after"):
            load = "load average before %s, after %s" % (
                " ".join("%.2f" % x for x in sep["load_before"]),
                " ".join("%.2f" % x for x in sep["load_after"]))
        w("Taken separately (`run.py --only %s`): %s on %s at commit %s%s%s, %s; the rest of the "
          "report is the run above." % (
              ",".join(sep["benchmarks"]), ", ".join(sep["benchmarks"]), sep["date"],
              sep.get("git_commit") or "unknown",
              " (working tree differs from it)" if sep.get("git_dirty") else "",
              " (%s)" % sep["note"] if sep.get("note") else "", load))
        w("")
    if report.get("shared_machine_note"):
        w(report["shared_machine_note"])
        w("")
    w("## Versions")
    w("")
    w("| | |")
    w("|---|---|")
    w("| rocmmemd | %s |" % v.get("rocmmemd"))
    w("| git commit | %s%s |" % (v.get("git_commit") or "unknown",
                                 " (working tree differs from it)" if v.get("git_dirty") else ""))
    w("| compiler | %s, %s, `%s` |" % (v.get("compiler"), v.get("build_type"), v.get("c_flags")))
    w("| libuv | %s |" % v.get("libuv"))
    w("| protobuf-c | %s |" % v.get("protobuf_c"))
    w("")
    w("## Targets")
    w("")
    w("Each target of DESIGN.md, measured against its baseline in the same run (ratios; the "
      "absolute times belong to this machine).")
    w("")
    w("| target | figure | measured | verdict |")
    w("|---|---|---|---|")
    for f in report["figures"]:
        if f["verdict"] in ("info",):
            continue
        measured = []
        if f.get("ratio") is not None:
            measured.append("ratio %s" % num(f["ratio"]))
        if f.get("value") is not None:
            measured.append("%s %s" % (num(f["value"]), f["unit"]))
        if f.get("p50") is not None:
            measured.append("p50 %s us" % us(f["p50"]))
        w("| %s | %s | %s | **%s** |" % (f["target"] or "-", f["title"], ", ".join(measured) or
                                        f.get("note", ""), f["verdict"]))
    w("")
    if before_after:
        L.extend(before_after.markdown(report.get("before_after")))
    w("## Figures")
    w("")
    w("Latencies in microseconds. The ratio is the subject over its baseline (for rates, "
      "the subject's rate over the baseline's).")
    w("")
    w("| figure | p50 | p99 | p99.9 | baseline | base p50 | base p99 | base p99.9 | ratio | "
      "value | verdict | note |")
    w("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for f in report["figures"]:
        b = f.get("baseline") or {}
        w("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            f["title"], us(f.get("p50")), us(f.get("p99")), us(f.get("p999")),
            b.get("name", "-"), us(b.get("p50")), us(b.get("p99")), us(b.get("p999")),
            num(f.get("ratio")), "-" if f.get("value") is None else "%s %s" % (
                num(f["value"]), f["unit"]), f["verdict"], f.get("note", "")))
    w("")
    for name, text in report.get("explanations", []):
        w("## %s" % name)
        w("")
        w(text)
        w("")
    w("## Runs")
    w("")
    w("| benchmark | status | seconds | program |")
    w("|---|---|---|---|")
    for name, e in report["benchmarks"].items():
        w("| %s | %s | %s | `%s %s` |" % (name, e["status"], e["seconds"], e["program"],
                                          " ".join(e["args"][:2])))
    w("")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(L))


def _syscalls(rows):
    return sum(r["per_op"] for r in rows or [] if r["syscall"] not in ("restart_syscall",
                                                                       "wait4", "kill"))


def _roundtrip_gap(rt, prof):
    """Where the arena round trip stands against its floors, same-core, in this run's numbers."""
    p = next((x for x in rt.get("placements", []) if x["name"] == "same-core"), None)
    if not p or "floor_with_arena_work" not in p or not rt.get("arena_in_use", True):
        return ""
    c = p["cpu_us_per_op"]
    kernel = p["floor_with_arena_work"]["p50"] / p["floor"]["p50"]
    text = ("Same-core, the arena's kernel work alone over the raw ping-pong (\"floor + arena "
            "work\": a hole punch at every release, a fault at every first touch) is %.2fx the "
            "floor. rocmmemd does less of it in this loop: a range its client releases and "
            "leases again at the same size within 250 ms stays warm (neither punched nor "
            "faulted again), so that floor is an upper reference, and rocmmemd through an arena "
            "and the request lane is %.2fx it (%.2fx the bare floor). What it adds: daemon CPU "
            "%.1f us per round trip against that floor server's %.1f, librocmmem's %.1f against "
            "its client's %.1f"
            % (kernel, p["ratio_p50_vs_floor_with_arena_work"], p["ratio_p50"],
               c.get("daemon_server", 0), c.get("floor_with_arena_work_server", 0),
               c.get("daemon_client", 0), c.get("floor_with_arena_work_client", 0)))
    if "floor_lane" in p:
        text += ("; the lane floor (the same two round trips with no fd, through a page the two "
                 "processes share: the client writes the request, writes the eventfd and waits "
                 "on a futex; the server, woken by epoll_wait, reads the eventfd, copies the "
                 "request out, writes the reply and wakes the client) is %.2fx the floor, and "
                 "rocmmemd through the lane %.2fx it: daemon CPU %.1f us per round trip against "
                 "the lane floor server's %.1f, librocmmem %.1f against its client's %.1f"
                 % (p["floor_lane_ratio_p50"], p["ratio_p50_vs_floor_lane"],
                    c.get("daemon_server", 0), c.get("floor_lane_server", 0),
                    c.get("daemon_client", 0), c.get("floor_lane_client", 0)))
    if "daemon_socket" in p:
        text += ("; the same client on the socket alone (ROCMMEM_LANE=0: every request a "
                 "sendmsg and its reply a recvmsg, as before the lane) is %.2fx the floor, and "
                 "the round trip through the lane %.2fx that one"
                 % (p["socket_ratio_p50"], p["lane_over_socket_p50"]))
    if prof.get("strace_daemon"):
        text += ("; system calls per round trip through the lane: the daemon %.0f (per request "
                 "an epoll_wait, the doorbell's eventfd read and a futex wake; the bytes move "
                 "through the page), the lane floor's server 6 (the same three per request); "
                 "librocmmem %.0f (per request the doorbell's eventfd write and a futex wait on "
                 "the reply's seq, skipped when the reply is already there), the lane floor's "
                 "client at most 4 (the same two per request)"
                 % (_syscalls(prof["strace_daemon"]), _syscalls(prof.get("strace_client"))))
    if prof.get("socket_strace_daemon"):
        text += ("; on the socket alone: the daemon %.0f (an epoll_wait per request, a second "
                 "recvmsg per request that finds nothing: the read loop drains the socket, "
                 "which reading one packet per wake-up made slower, not faster), the arena-work "
                 "floor's server 5 (2 recvmsg, 2 sendmsg, the punch); librocmmem %.0f (a "
                 "blocking recvmsg under SO_RCVTIMEO, no poll), the floor client 4"
                 % (_syscalls(prof["socket_strace_daemon"]),
                    _syscalls(prof.get("socket_strace_client"))))
    if "floor_epoll" in p:
        sock = "daemon_socket" if "daemon_socket" in p else "daemon"
        text += ("; an event loop answering the floor's own ping-pong with the daemon's socket "
                 "system calls (epoll_wait, then receive until the socket is empty) is %.2fx "
                 "the floor, and rocmmemd on the socket %.2fx that event loop: daemon CPU %.1f "
                 "us per round trip against its %.1f, librocmmem %.1f against the raw client's "
                 "%.1f"
                 % (p["floor_epoll_ratio_p50"],
                    bench_ratio(p[sock]["p50"], p["floor_epoll"]["p50"]) or 0,
                    c.get(sock + "_server", 0), c.get("floor_epoll_server", 0),
                    c.get(sock + "_client", 0), c.get("floor_epoll_client", 0)))
    return text + (". The rest is user space: protobuf, libuv, the books and the state file "
                   "record, policy, events (perf below).")


def _roundtrip_table(rt):
    """The round trip's table: each subject's p50, the CPU and switches per operation."""
    def both(c, keys):
        return " / ".join(us(c.get(k)) for k in keys)

    t = ["Where a lease round trip's time goes (same run, p50 in us; CPU and context switches "
         "per operation; \"lane\": through the request lane, librocmmem's default; \"socket\": "
         "a connection made with ROCMMEM_LANE=0):", "",
         "| placement | floor | floor, no fd | floor, lane | floor + arena work | floor + "
         "per-lease memory work | rocmmemd, arena, lane | rocmmemd, arena, socket | rocmmemd, "
         "per lease | rocmmemd arena, log warn | daemon CPU (lane / socket / per lease) | floor "
         "server CPU (socket / lane) | client CPU (lane / socket / per lease) | floor client CPU "
         "(socket / lane) | daemon switches/op (lane / socket) |",
         "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for p in rt.get("placements", []):
        c = p["cpu_us_per_op"]
        s = p.get("context_switches_per_op", {})
        t.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s / %s |"
                 % (p["name"], us(p["floor"]["p50"]), us(p.get("floor_no_fd", {}).get("p50")),
                    us(p.get("floor_lane", {}).get("p50")),
                    us(p.get("floor_with_arena_work", {}).get("p50")),
                    us(p["floor_with_memory_work"]["p50"]), us(p["daemon"]["p50"]),
                    us(p.get("daemon_socket", {}).get("p50")),
                    us(p.get("daemon_per_lease", {}).get("p50")),
                    us(p.get("daemon_log_warn", {}).get("p50")),
                    both(c, ("daemon_server", "daemon_socket_server", "daemon_per_lease_server")),
                    both(c, ("floor_server", "floor_lane_server")),
                    both(c, ("daemon_client", "daemon_socket_client", "daemon_per_lease_client")),
                    both(c, ("floor_client", "floor_lane_client")),
                    num(s.get("daemon_server")), num(s.get("daemon_socket_server"))))
    return t


def explain(results, prof):
    """The profile behind each figure: where the time goes, in this run's numbers."""
    ex = []
    rt = (results.get("roundtrip") or {}).get("data")
    if rt:
        t = []
        t.extend(_roundtrip_table(rt))
        gap = _roundtrip_gap(rt, prof)
        if gap:
            t.append("")
            t.append(gap)
        pcs = rt.get("pieces")
        if pcs:
            t.append("")
            t.append("The kernel work a lease needs, timed alone in the same rounds (p50 / p99 "
                     "us): " + "; ".join("%s %s / %s" % (k.replace("_", " "), us(v["p50"]),
                                                           us(v["p99"])) for k, v in pcs.items()))
        for key, _ in PROFILED:
            what = PROFILED_WHAT[key]
            if prof.get(key + "strace_daemon"):
                t.append("")
                t.append("System calls per lease round trip, %s (strace -c over %d operations): "
                         "daemon: " % (what, prof["roundtrip_ops"]) + ", ".join(
                             "%s %s" % (r["syscall"], num(r["per_op"], 1))
                             for r in prof[key + "strace_daemon"]) + "; client (librocmmem): " +
                         ", ".join("%s %s" % (r["syscall"], num(r["per_op"], 1))
                                   for r in prof.get(key + "strace_client", [])) + ".")
            if prof.get(key + "perf_daemon_by_dso"):
                t.append("")
                t.append("perf (cpu-clock, the daemon only), %s: by object " % what + ", ".join(
                    "%s %.1f%%" % (r["dso"], r["percent"])
                    for r in prof[key + "perf_daemon_by_dso"][:6]) + "; top symbols " +
                    ", ".join("%s %.1f%%" % (r["symbol"], r["percent"])
                              for r in prof.get(key + "perf_daemon_top", [])[:10]) + ".")
        t.append("")
        t.append(ROUNDTRIP_READING)
        ex.append(("Profile: the lease round trip", "\n".join(t)))
    tp = (results.get("throughput") or {}).get("data")
    try:
        ncpu = len(os.sched_getaffinity(0))
    except OSError:
        ncpu = os.cpu_count() or 1
    if tp:
        t = ["Server CPU per request and share of a core during its windows (the bench's client "
             "threads share the same CPUs):", "",
             "| clients | rocmmemd req/s | echo req/s | rocmmemd CPU us/req | echo CPU us/req | "
             "rocmmemd core share | echo core share | clients' CPU us/req (rocmmemd / echo) | "
             "CPU-bound ceiling, %d CPUs (rocmmemd / echo) | status reply bytes |" % ncpu,
             "|---|---|---|---|---|---|---|---|---|---|"]
        for lv in tp.get("levels", []):
            a, b = lv["rocmmemd"], lv["echo"]
            ca = a["server_cpu_us_per_request"] + a["clients_cpu_us_per_request"]
            cb = b["server_cpu_us_per_request"] + b["clients_cpu_us_per_request"]
            t.append("| %d | %.0f | %.0f | %.1f | %.1f | %.2f | %.2f | %.1f / %.1f | %.0f / %.0f "
                     "| %d |" % (
                         lv["clients"], a["rate_per_s"], b["rate_per_s"],
                         a["server_cpu_us_per_request"], b["server_cpu_us_per_request"],
                         a["server_cpu_share"], b["server_cpu_share"],
                         a["clients_cpu_us_per_request"], b["clients_cpu_us_per_request"],
                         ncpu * 1e6 / ca if ca else 0, ncpu * 1e6 / cb if cb else 0,
                         lv["status_reply_bytes"]))
        kinds = [lv for lv in tp.get("levels", []) if lv.get("server_cpu_us_per_kind")]
        if kinds:
            t.append("")
            t.append("Each server's CPU per request kind, timed alone on one more connection "
                     "while the level's clients sat connected (us; lease and model as "
                     "acquire+release pairs; rocmmemd / echo): " + "; ".join(
                         "%d clients: %s" % (lv["clients"], ", ".join(
                             "%s %.1f / %.1f" % (k.replace("_", " "), v["rocmmemd"], v["echo"])
                             for k, v in lv["server_cpu_us_per_kind"].items()))
                         for lv in kinds) + ".")
        t.append("")
        t.append(THROUGHPUT_READING)
        ex.append(("Profile: throughput and fairness", "\n".join(t)))
    rp = (results.get("replay") or {}).get("data")
    if rp:
        r = rp["residency"]
        t = [REPLAY_READING % {"timeouts": r.get("timed_out_steps", 0),
                               "wait": rp.get("wait_ms", 0)}]
        ex.append(("Profile: the contention replay", "\n".join(t)))
    bf = (results.get("backfill") or {}).get("data")
    if bf:
        ex.append(("Profile: backfilling", BACKFILL_READING % {
            "work": bf["work_ms"], "sections": bf["framepack_sections"],
            "switches": bf["comfyui_switches"], "leases": bf["script_leases"],
            "runs": bf["backfill_on"]["runs"]}))
    sc = (results.get("scale") or {}).get("data")
    if sc:
        why = ("the daemon read a meminfo fixture saying %d GiB (ROCMMEM_HOST_MEMINFO), which is "
               "accounting only: no lease is ever touched, arenas and memfds are sparse."
               % (sc.get("host_device_total_bytes", 0) >> 30)
               if sc.get("host_total_from_meminfo_fixture") else
               "the host's own MemAvailable (%d GiB) was used."
               % (sc.get("host_device_total_bytes", 0) >> 30))
        ex.append(("Profile: scaling", SCALE_READING % {"nofile": sc.get("rlimit_nofile"),
                                                        "why": why}))
    return ex


ROUNDTRIP_READING = """Reading: the floor is the IPC alone (two round trips, the grant \
carrying one fd, packets as large as the daemon's); "floor, no fd" the same without the fd; \
"floor, lane" the same two round trips with no fd through a 4 KiB page shared by the two \
processes, with the request lane's system calls (docs/protocol.md "The request lane"): the \
client writes the request into the page, writes an eventfd and waits on a futex; the server, \
woken by epoll_wait, reads the eventfd, copies the request out, writes the reply and wakes the \
client. A lease also needs the kernel's memory work. Through the client's arena (librocmmem's \
default, docs/protocol.md "Host arenas") the arena's memfd is sent and mapped once; a lease is \
an offset, its work one page fault at first touch and, at release, a hole punch in the daemon: \
"floor + arena work" does exactly that over the raw ping-pong. librocmmem sends its requests \
through the lane by default: "rocmmemd, arena, lane" is that path (the arena's first grant, \
which carries its memfd, comes on the socket); "rocmmemd, arena, socket" is the same client on a \
connection made with ROCMMEM_LANE=0, every request and reply on the socket as before the lane. \
Through a memfd per lease (a connection made with ROCMMEM_HOST_ARENA=0: the compatibility path, \
and every host lease before arenas) the daemon creates, sizes and seals a memfd per lease and \
punches and closes it at release, and the client maps it 2 MiB aligned and unmaps it: "floor + \
per-lease memory work" (that connection is made with ROCMMEM_LANE=0 too: the design before \
issue 18, every request on the socket). rocmmemd over the matching floor is \
what the daemon and the library add (protobuf, libuv, the books and the state file record, \
policy, events). The lane, socket and per-lease rows are one daemon, three connections, \
batches interleaved; the profiles (strace, perf) are of the same three connections."""

THROUGHPUT_READING = """Reading: both servers answer the same client code with replies of the \
same sizes (the echo server replays what rocmmemd sent for each kind of request in this run). \
The clients ask rocmmemd for the host arena, as librocmmem does: the arena's memfd comes with \
a client's first grant, later grants are offsets, and the echo server replays one of those \
(no fd); requests go on the socket for both (not the request lane, which the echo server does \
not have). The load generator runs on the same CPUs as the server, so the whole run is \
CPU-bound: a request costs the server's CPU plus the clients' (the ceiling column divides the \
CPUs by that sum), and neither server reaches a full core. rocmmemd's extra CPU per request \
is mostly the status replies, which list every client with its process's books (the reply \
grows with the clients, and so does its cost; the daemon's descriptor count in each is one \
stat of /proc/self/fd), then protobuf and the books and policy of each lease and model \
request, which stay flat with the number of clients. The per-kind CPU is timed with \
the server idle between requests, so it includes each wake-up (on this VM most of a lease \
pair's). Fairness is decided mostly by the kernel's scheduling of the client threads, which is \
why the echo server's own fairness is shown beside rocmmemd's."""

REPLAY_READING = """Reading: uncoordinated, a step fails whenever the other host holds the \
memory (an out-of-memory error today). Through residency every step gets its memory by \
waiting and eviction. FramePack acquires its two text encoders one after the other; when \
ComfyUI's request for a large model arrives between the two acquires, it waits at the head of \
the device's queue for memory that the first text encoder holds (in use), while FramePack's \
second acquire waits behind it: a hold-and-wait cycle across two clients. The daemon breaks \
it by granting the second acquire ahead of the head, which it does only when the head cannot \
be granted without that client releasing and the acquire fits now (docs/residency.md, "Let a \
holder through"); FramePack then finishes its step, releases, and the head is granted. Before \
that rule the cycle ended only when a wait timed out (%(wait)s ms here, FramePack's \
integration default of 3600 s scaled); now %(timeouts)s step(s) timed out. With the two \
encoders registered as one model (one acquire per step) no step fails either. The makespan \
over the sum of the work times includes the model loads that evictions force (a \
one-large-model budget makes FramePack reload its transformer every section), shown per run; \
the waits are the time a host spent in acquire while the GPU computed for the other. On this \
shared two-core machine the ratio moves by a few hundredths from run to run (1.08 to 1.13 for \
residency in four runs), around the 1.1 target."""

BACKFILL_READING = """Reading: the replay of issue 15 (tests/integration/\
test_backfill_replay.c's shape) on a 2 GiB budget scaled to 32 MiB: FramePack samples with its \
transformer (3/4 GiB) in use, then acquires its VAE (1/2 GiB) before releasing the transformer \
(%(sections)s sections), ComfyUI switches between two 1 GiB checkpoints (%(switches)s \
switches), a script takes %(leases)s leases of 256 MiB one after the other; one step's compute \
is %(work)s ms, and a host reads evict requests only at its next call into the library. Without \
backfilling the script's small lease queues behind a large request that waits for an eviction \
or for a model in use (a host that is computing), with memory free that it fits in; with it, \
the lease is granted at once when it delays nobody ahead. Two daemons run side by side \
(`--backfill off`, and the defaults: on, 16 passes, 5 s), each round on both, the order \
swapped every round (%(runs)s rounds). The total wait is per run (its p50 and p99 over the \
runs); the makespan is from the start of the three processes to the end of the last one."""

SCALE_READING = """Reading: one operation is a lease acquire and release of 2 MiB (fd closed, \
unmapped), timed on a probe connection holding nothing and on the connection holding the most \
leases (its books and, with arenas, its allocator at their largest), the daemon and the bench \
pinned to one CPU. Leases are held by filler connections (50000 each with arenas, 4000 per-lease) \
that never touch them. "arena": every connection offers FEATURE_HOST_ARENA, a lease is a range \
of its connection's arena and costs the daemon no descriptor. "per-lease": no feature bit, a \
sealed memfd per lease, one descriptor each in the daemon; of RLIMIT_NOFILE (%(nofile)s here, \
not raisable without CAP_SYS_RESOURCE) one uid may hold about half of what the daemon keeps for \
host leases, so that series stops where the descriptors do and 100k is reported as not run. \
100k leases of 2 MiB are a 195 GiB budget and a host budget may not exceed MemAvailable: %(why)s \
The memory per lease is the daemon's VmRSS and heap growth (DaemonInfo.heap_bytes) divided by \
the leases added, from the first level to the top; a status reply lists every lease (its time is \
O(leases) by design: streamed in parts of 256 as the requester reads). The stand-in CUDA series \
(informational) shows the stand-in driver's own bookkeeping, which walks a list per allocation."""


def build_report(args, build, results, prof, before, after):
    figures = []
    for name, e in results.items():
        d = e.get("data")
        if e["status"] == "error" or d is None:
            figures.append(fig(name, name, "%s: the program failed" % name, "", None, None, None,
                               "", "error", note=(e.get("log_tail") or "")[-300:]))
            continue
        try:
            figures += EXTRACT[name](d)
        except (KeyError, TypeError, IndexError, ZeroDivisionError) as ex:
            figures.append(fig(name, name, "%s: unreadable output" % name, "", None, None, None,
                               "", "error", note="%s: %s" % (type(ex).__name__, ex)))
    report = {
        "schema": 1,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "mode": args.mode,
        "machine": machine(),
        "versions": versions(build, os.path.join(build, "rocmmemd")),
        "load_before": before,
        "load_after": after,
        "benchmarks": {k: {kk: vv for kk, vv in v.items() if kk != "data"}
                       for k, v in results.items()},
        "figures": figures,
        "profile": prof,
        "explanations": explain(results, prof),
        "before_after": before_after.rows(results) if before_after else [],
        "data": {k: v.get("data") for k, v in results.items()},
    }
    cpus = report["machine"]["cpus_usable"] or 1
    busy = max(before + after) if before and after else 0
    if busy > 0.5 * cpus:
        report["shared_machine_note"] = (
            "**Noisy machine:** the load average (up to %.2f on %d CPUs) shows other work ran "
            "during these measurements (this machine is shared). Baselines ran interleaved with "
            "their subjects, so ratios hold better than absolute times, but tails (p99, p99.9) "
            "carry that noise." % (busy, cpus))
    return report


# ---------------------------------------------------------------------------------------------
# Merging a separate run into a report


def load_for_merge(args, out):
    path = os.path.join(out, "REPORT.json")
    try:
        with open(path, encoding="utf-8") as f:
            old = json.load(f)
    except (OSError, ValueError) as e:
        print("run.py: --merge needs a report in %s: %s" % (out, e), file=sys.stderr)
        return None
    if not args.only:
        print("run.py: --merge goes with --only", file=sys.stderr)
        return None
    if old.get("mode") != args.mode:
        print("run.py: --merge: the report in %s is of mode %s, not %s"
              % (out, old.get("mode"), args.mode), file=sys.stderr)
        return None
    return old


def merge_report(args, build, old, new_results, prof, before, after):
    """The old report's benchmarks, those run now replacing theirs, in the old order."""
    results = {}
    for name, e in old.get("benchmarks", {}).items():
        results[name] = dict(e, data=old.get("data", {}).get(name))
    results.update(new_results)
    # The old run's order, new benchmarks where BENCHMARKS puts them.
    order = [n for n in BENCHMARKS if n in results]
    order += [n for n in results if n not in order]
    results = {n: results[n] for n in order}
    if "roundtrip" not in new_results:
        prof = old.get("profile", {})
    report = build_report(args, build, results, prof, old.get("load_before", []),
                          old.get("load_after", []))
    for k in ("date", "machine", "versions"):
        if k in old:
            report[k] = old[k]
    v = versions(build, os.path.join(build, "rocmmemd"))
    separate = [m for m in old.get("separately", []) if not set(m["benchmarks"]) & set(new_results)]
    separate.append({"benchmarks": list(new_results),
                     "date": datetime.datetime.now(datetime.timezone.utc).strftime(
                         "%Y-%m-%d %H:%M UTC"),
                     "git_commit": v.get("git_commit", ""), "git_dirty": v.get("git_dirty"),
                     "load_before": before, "load_after": after})
    report["separately"] = separate
    cpus = report["machine"].get("cpus_usable") or 1
    loads = (report["load_before"] or []) + (report["load_after"] or [])
    for m in separate:
        loads += (m.get("load_before") or []) + (m.get("load_after") or [])
    busy = max(loads) if loads else 0
    if busy > 0.5 * cpus and not report.get("shared_machine_note"):
        report["shared_machine_note"] = (
            "**Noisy machine:** the load average (up to %.2f on %d CPUs) shows other work ran "
            "during these measurements (this machine is shared). Baselines ran interleaved with "
            "their subjects, so ratios hold better than absolute times, but tails (p99, p99.9) "
            "carry that noise." % (busy, cpus))
    return report


# ---------------------------------------------------------------------------------------------
# The smoke test's check


def check(report_path):
    problems = []
    try:
        with open(report_path, encoding="utf-8") as f:
            report = json.load(f)
    except (OSError, ValueError) as e:
        return ["REPORT.json does not parse: %s" % e]
    for key in ("date", "machine", "versions", "load_before", "load_after", "figures"):
        if key not in report:
            problems.append("REPORT.json lacks %s" % key)
    for name in BENCHMARKS:
        e = report.get("benchmarks", {}).get(name)
        if not e:
            problems.append("benchmark %s missing" % name)
        elif e.get("status") not in ("ok", "not run"):
            problems.append("benchmark %s: %s" % (name, e.get("status")))
        if not any(f["benchmark"] == name for f in report.get("figures", [])):
            problems.append("no figure for %s" % name)
    for f in report.get("figures", []):
        r = f.get("ratio")
        if r is not None and not (isinstance(r, (int, float)) and r > 0):
            problems.append("figure %s has ratio %r" % (f["id"], r))
        for k in ("p50", "p99", "p999"):
            if f.get(k) is not None and not f[k] > 0:
                problems.append("figure %s has %s %r" % (f["id"], k, f[k]))
        if f.get("verdict") == "error":
            problems.append("figure %s: %s" % (f["id"], f.get("note")))
    md = os.path.join(os.path.dirname(report_path), "REPORT.md")
    if "# rocmmemd benchmark report" not in read(md):
        problems.append("REPORT.md missing or empty")
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", required=True,
                    help="the build directory (rocmmemd, bench/bench_*; copied ones work too)")
    ap.add_argument("--mode", choices=["tiny", "quick", "full"], default="full")
    ap.add_argument("--out", help="where the report goes (default: the source's bench/results "
                    "for a full run, else BUILD/bench/results-MODE)")
    ap.add_argument("--only", help="comma-separated benchmarks: " + ",".join(BENCHMARKS))
    ap.add_argument("--merge", action="store_true",
                    help="with --only: keep the other benchmarks of the report already in --out "
                    "(same mode) and replace only those run; the report says they were taken "
                    "separately, with their date, commit and load average")
    ap.add_argument("--lib-dir", help="added to LD_LIBRARY_PATH (shared libraries carried with "
                    "a copied build)")
    ap.add_argument("--no-profile", action="store_true", help="skip perf and strace")
    ap.add_argument("--check", action="store_true",
                    help="verify the report's shape afterwards (exit 1 if not)")
    args = ap.parse_args()
    args.only = set(args.only.split(",")) if args.only else None
    build = os.path.abspath(args.build_dir)
    if not os.path.exists(os.path.join(build, "rocmmemd")):
        print("run.py: no rocmmemd in %s: build it first (scripts/bench.sh does)" % build,
              file=sys.stderr)
        return 2
    out = args.out or (os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
                       if args.mode == "full" else
                       os.path.join(build, "bench", "results-" + args.mode))
    out = os.path.abspath(out)
    os.makedirs(out, exist_ok=True)
    old = None
    if args.merge:
        old = load_for_merge(args, out)
        if old is None:
            return 2
    before = loadavg()
    results, profile_dir = run_all(args, build, out)
    after = loadavg()
    prof = profiles(results, profile_dir)
    if old is not None:
        report = merge_report(args, build, old, results, prof, before, after)
    else:
        report = build_report(args, build, results, prof, before, after)
    with open(os.path.join(out, "REPORT.json"), "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1, sort_keys=False)
        f.write("\n")
    write_markdown(os.path.join(out, "REPORT.md"), report)
    print("run.py: wrote %s/REPORT.md and REPORT.json" % out, file=sys.stderr)
    failed = [n for n, e in results.items() if e["status"] == "error"]
    if args.check:
        if args.only:
            print("run.py: --check needs every benchmark; ignoring --only for it",
                  file=sys.stderr)
        problems = check(os.path.join(out, "REPORT.json"))
        for p in problems:
            print("run.py: check: %s" % p, file=sys.stderr)
        if problems:
            return 1
        print("run.py: check: the report is well-formed", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
