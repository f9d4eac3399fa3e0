#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""gpu_run.py: runs a bundle made by scripts/gpu-bundle.sh on this machine and writes one
report, REPORT.md and REPORT.json.

Usage: run-gpu.sh [--bench tiny|quick|full|none] [--out DIR] [--python PYTHON]

In order: what this machine has (GPU device nodes, nvidia-smi / rocm-smi, PyTorch); a check
that the bundle itself runs here (its rocmmemd on host memory, rocmmemctl status, a lease
through the Python package and librocmmem); every test CTest labels gpu, as the bundle's
manifest lists them (the real-GPU end-to-end test and rocmmem.torch against this machine's
own PyTorch), each under its time limit, a skip (exit 77: no GPU, or no PyTorch with one)
reported with its reason; then the GPU benchmark through bench/run.py. Exit status 0 when
nothing failed (skips are not failures), else 1. Needs only python3: no compiler, no CMake,
no network.
"""

import argparse
import datetime
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def expand(value, python):
    return value.replace("{BUNDLE}", HERE).replace("{PYTHON}", python)


def base_env(manifest, python):
    env = dict(os.environ)
    lib = os.path.join(HERE, "lib")
    env["LD_LIBRARY_PATH"] = lib + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH")
                                    else "")
    # Programs built with the build tree's paths compiled in find the bundle's copies instead.
    env["ROCMMEMD"] = expand(manifest["carried"]["rocmmemd"], python)
    env["ROCMMEMCTL"] = expand(manifest["carried"]["rocmmemctl"], python)
    env.pop("ROCMMEM_SOCKET", None)
    return env


def run(argv, env, cwd, timeout, log_path):
    """Runs argv to its end or its time limit (then kills its process group). Returns
    (exit status or "timeout", seconds, output)."""
    start = time.monotonic()
    with open(log_path, "w+", encoding="utf-8", errors="replace") as log:
        try:
            p = subprocess.Popen(argv, env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, start_new_session=True)
        except OSError as e:
            log.write("could not run %s: %s\n" % (argv[0], e))
            return "not found", 0.0, str(e)
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            rc = "timeout"
        log.seek(0)
        output = log.read()
    return rc, time.monotonic() - start, output


def last_lines(text, n=12):
    return "\n".join([line for line in text.splitlines() if line.strip()][-n:])


def first_output(argv, timeout=30):
    if not shutil.which(argv[0]):
        return None
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        return (out.stdout or out.stderr).strip()[:2000]
    except (OSError, subprocess.SubprocessError) as e:
        return "failed: %s" % e


def machine(python):
    torch = first_output([python, "-c", "import torch; print(torch.__version__, "
                          "'hip ' + str(torch.version.hip) if getattr(torch.version, 'hip', None)"
                          " else 'cuda ' + str(torch.version.cuda), torch.cuda.is_available(),"
                          " torch.cuda.device_count() and torch.cuda.get_device_name(0))"], 120)
    return {
        "host": platform.node(),
        "kernel": platform.release(),
        "python": python,
        "device_nodes": [d for d in ("/dev/kfd", "/dev/nvidiactl", "/dev/nvidia0", "/dev/dri")
                         if os.path.exists(d)],
        "nvidia_smi": first_output(["nvidia-smi", "-L"]),
        "rocm_smi": first_output(["rocm-smi", "--showproductname"]),
        "torch": torch,
    }


def wait_socket(path, proc, timeout=60):
    end = time.monotonic() + timeout
    while time.monotonic() < end and proc.poll() is None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            s.connect(path)
            return True
        except OSError:
            time.sleep(0.05)
        finally:
            s.close()
    return False


CHECK_LEASE = """
import rocmmem, sys
with rocmmem.connect(socket=sys.argv[1], name="bundle-check", timeout=30) as c:
    with c.lease("4M", timeout=30, tag="check") as lease:
        lease.buffer[:4] = b"GPU!"
        assert bytes(lease.buffer[:4]) == b"GPU!"
        assert c.status()["devices"][0]["leased_bytes"] == 4 << 20
    print("a 4 MiB lease written and read through librocmmem and the Python package")
"""


def bundle_check(manifest, env, python, logs):
    """The bundle's own programs and libraries run here: rocmmemd on host memory, rocmmemctl
    status, a lease through the Python package. Returns a result like a test's."""
    tmp = tempfile.mkdtemp(prefix="rocmmem-bundle-")
    sock = os.path.join(tmp, "rocmmemd.sock")
    log_path = os.path.join(logs, "bundle_check.log")
    daemon = env["ROCMMEMD"]
    start = time.monotonic()
    result = {"name": "bundle_check", "status": "failed"}
    with open(os.path.join(tmp, "daemon.log"), "w") as dlog:
        proc = subprocess.Popen([daemon, "--socket", sock, "--config", "/dev/null", "--backend",
                                 "host", "--budget", "64M"], env=env, stdout=dlog,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    notes = []
    try:
        if not wait_socket(sock, proc):
            notes.append("rocmmemd from the bundle did not start")
        else:
            ctl = subprocess.run([env["ROCMMEMCTL"], "--socket", sock, "status", "--json"],
                                 env=env, capture_output=True, text=True, timeout=60)
            backend = json.loads(ctl.stdout)["daemon"]["backend"] if ctl.returncode == 0 else None
            notes.append("rocmmemctl status: exit %d, backend %s" % (ctl.returncode, backend))
            penv = dict(env, ROCMMEM_LIBRARY=expand(manifest["carried"]["library"], python),
                        PYTHONPATH=expand(manifest["carried"]["python_package"], python))
            py = subprocess.run([python, "-c", CHECK_LEASE, sock], env=penv, capture_output=True,
                                text=True, timeout=120)
            notes.append((py.stdout + py.stderr).strip() or "python: exit %d" % py.returncode)
            if ctl.returncode == 0 and backend == "host" and py.returncode == 0:
                result["status"] = "passed"
    except (OSError, ValueError, KeyError, subprocess.SubprocessError) as e:
        notes.append("error: %s" % e)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = proc.wait()
        notes.append("rocmmemd exited %s" % rc)
        if rc != 0:
            result["status"] = "failed"
        with open(os.path.join(tmp, "daemon.log"), encoding="utf-8", errors="replace") as f:
            daemon_log = f.read()
        shutil.rmtree(tmp, ignore_errors=True)
    with open(log_path, "w", encoding="utf-8") as f:
        f.write("\n".join(notes) + "\n--- rocmmemd's log ---\n" + daemon_log)
    result.update(seconds=round(time.monotonic() - start, 1), detail="; ".join(notes),
                  log=os.path.relpath(log_path, HERE))
    return result


def run_test(t, env, python, logs):
    tenv = dict(env)
    tenv.update({k: expand(v, python) for k, v in t["env"].items()})
    argv = [expand(a, python) for a in t["argv"]]
    log_path = os.path.join(logs, t["name"] + ".log")
    print("gpu_run: %s ..." % t["name"], file=sys.stderr, flush=True)
    rc, took, output = run(argv, tenv, expand(t["cwd"], python), t["timeout"], log_path)
    if rc == 0:
        status = "passed"
    elif t["skip_code"] is not None and rc == t["skip_code"]:
        status = "skipped"
    elif rc == "timeout":
        status = "timed out"
    else:
        status = "failed"
    r = {"name": t["name"], "status": status, "exit": rc, "seconds": round(took, 1),
         "log": os.path.relpath(log_path, HERE)}
    if status != "passed":
        r["detail"] = last_lines(output)
    print("gpu_run: %s %s in %.1f s" % (t["name"], status, took), file=sys.stderr)
    return r


def run_bench(mode, env, python, out, logs):
    bench_out = os.path.join(out, "bench")
    argv = [python, os.path.join(HERE, "bench_run.py"), "--build-dir",
            os.path.join(HERE, "build"), "--lib-dir", os.path.join(HERE, "lib"), "--mode", mode,
            "--only", "gpu", "--no-profile", "--out", bench_out]
    print("gpu_run: the GPU benchmark (%s) ..." % mode, file=sys.stderr, flush=True)
    rc, took, output = run(argv, env, HERE, 3600, os.path.join(logs, "bench.log"))
    r = {"status": "failed", "exit": rc, "seconds": round(took, 1),
         "report": os.path.relpath(os.path.join(bench_out, "REPORT.md"), HERE)}
    try:
        with open(os.path.join(bench_out, "REPORT.json"), encoding="utf-8") as f:
            report = json.load(f)
        entry = report.get("benchmarks", {}).get("gpu", {})
        r["status"] = entry.get("status", "failed") if rc == 0 else "failed"
        r["figures"] = [f for f in report.get("figures", []) if f.get("benchmark") == "gpu"]
        r["versions"] = report.get("versions")
    except (OSError, ValueError) as e:
        r["detail"] = "no report: %s\n%s" % (e, last_lines(output))
    return r


def markdown(report):
    lines = ["# rocmmemd GPU bundle report", "",
             "%s on %s (kernel %s); bundle made %s from commit %s%s." %
             (report["date"], report["machine"]["host"], report["machine"]["kernel"],
              report["bundle"]["made"], report["bundle"]["git_commit"][:12] or "?",
              " (with uncommitted changes)" if report["bundle"]["git_dirty"] else ""), ""]
    m = report["machine"]
    lines += ["## This machine", "",
              "- GPU device nodes: %s" % (", ".join(m["device_nodes"]) or "none"),
              "- nvidia-smi: %s" % (m["nvidia_smi"] or "not installed").replace("\n", "; "),
              "- rocm-smi: %s" % (m["rocm_smi"] or "not installed").replace("\n", "; "),
              "- PyTorch (%s): %s" % (m["python"], (m["torch"] or "-").replace("\n", " ")), ""]
    lines += ["## Tests", "", "| test | result | seconds | detail |", "|---|---|---|---|"]
    for t in [report["bundle_check"]] + report["tests"]:
        detail = (t.get("detail") or "").replace("|", "\\|").replace("\n", "<br>")
        lines.append("| %s | %s | %s | %s |" % (t["name"], t["status"], t["seconds"], detail))
    b = report.get("bench")
    lines += ["", "## GPU benchmark", ""]
    if not b:
        lines.append("Not run (--bench none).")
    else:
        lines.append("Status: %s (%s s); its own report: %s." % (b["status"], b["seconds"],
                                                               b["report"]))
        if b.get("figures"):
            lines += ["", "| figure | p50 | p99 | baseline p50 | ratio | verdict | note |",
                      "|---|---|---|---|---|---|---|"]
            for f in b["figures"]:
                base = f.get("baseline") or {}
                lines.append("| %s | %s | %s | %s | %s | %s | %s |" % (
                    f.get("title"), f.get("p50", "-"), f.get("p99", "-"),
                    base.get("p50", "-") if isinstance(base, dict) else "-",
                    "-" if f.get("ratio") is None else f["ratio"], f.get("verdict", ""),
                    (f.get("note") or "").replace("|", "\\|")))
        if b.get("detail"):
            lines += ["", "```", b["detail"], "```"]
    lines += ["", "Verdict: **%s**." % report["verdict"], ""]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", choices=["tiny", "quick", "full", "none"], default="quick",
                    help="the GPU benchmark's mode (default quick), or none")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--python", default=sys.executable or "python3",
                    help="the interpreter whose PyTorch is tested (default: this one)")
    args = ap.parse_args()
    with open(os.path.join(HERE, "manifest.json"), encoding="utf-8") as f:
        manifest = json.load(f)
    out = os.path.abspath(args.out)
    logs = os.path.join(out, "logs")
    os.makedirs(logs, exist_ok=True)
    env = base_env(manifest, args.python)
    report = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "bundle": {k: manifest[k] for k in ("made", "made_on", "git_commit", "git_dirty")},
              "machine": machine(args.python)}
    report["bundle_check"] = bundle_check(manifest, env, args.python, logs)
    report["tests"] = [run_test(t, env, args.python, logs) for t in manifest["tests"]]
    report["bench"] = (None if args.bench == "none" else
                       run_bench(args.bench, env, args.python, out, logs))
    results = [report["bundle_check"]] + report["tests"]
    failed = [t["name"] for t in results if t["status"] not in ("passed", "skipped")]
    if report["bench"] and report["bench"]["status"] not in ("ok", "not run"):
        failed.append("bench")
    report["failed"] = failed
    report["verdict"] = "failed: " + ", ".join(failed) if failed else "no failure"
    with open(os.path.join(out, "REPORT.json"), "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1)
        f.write("\n")
    with open(os.path.join(out, "REPORT.md"), "w", encoding="utf-8") as f:
        f.write(markdown(report))
    print("gpu_run: %s; wrote %s/REPORT.md and REPORT.json" % (report["verdict"], out),
          file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
