#!/usr/bin/env python3
"""Reproduces sqld's write deadlock under concurrent write transactions.

Starts its own sqld (the libSQL server behind Turso) on a free loopback port in a
temporary directory, then runs N plain Hrana clients, each looping one pipeline
`BEGIN IMMEDIATE; INSERT; UPDATE; COMMIT` (no broker involved). Every second it
prints commits per second and sqld's thread count; when no commit lands for
--stall-seconds it declares a stall, checks that a read and a plain CREATE TABLE
behave as the issue describes, and (with --dump) summarises a gdb thread dump.

    scripts/sqld-deadlock-repro.py --sqld "$SQLD_BIN" --clients 12 --seconds 120
    scripts/sqld-deadlock-repro.py --sqld "$SQLD_BIN" --clients 16 --seconds 300 \
        --max-concurrent-connections 4 --expect no-stall

Python 3 standard library only. The last line is a JSON summary; with --expect
the exit status says whether the run matched (0) or not (1).
"""

import argparse
import collections
import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

REQUEST_TIMEOUT_S = 10.0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stmt(sql, args=()):
    return {"sql": sql, "args": [{"type": "integer", "value": str(a)} for a in args]}


def pipeline(port, requests, timeout=REQUEST_TIMEOUT_S, conn=None):
    """One POST /v2/pipeline; returns (results, connection to reuse)."""
    body = json.dumps({"baton": None, "requests": requests + [{"type": "close"}]})
    if conn is None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    conn.request("POST", "/v2/pipeline", body, {"Content-Type": "application/json"})
    reply = conn.getresponse()
    data = reply.read()
    if reply.status != 200:
        raise RuntimeError(f"HTTP {reply.status}: {data[:200]!r}")
    return json.loads(data)["results"], conn


def write_batch(client, n):
    """BEGIN IMMEDIATE; INSERT; UPDATE; COMMIT, each step only if the previous
    succeeded, ROLLBACK otherwise: the shape of every broker write."""
    steps = [
        {"stmt": stmt("BEGIN IMMEDIATE")},
        {"condition": {"type": "ok", "step": 0},
         "stmt": stmt("INSERT INTO log(client, n) VALUES (?, ?)", (client, n))},
        {"condition": {"type": "ok", "step": 1},
         "stmt": stmt("UPDATE counters SET n = n + 1 WHERE client = ?", (client,))},
        {"condition": {"type": "ok", "step": 2}, "stmt": stmt("COMMIT")},
        {"condition": {"type": "not", "cond": {"type": "ok", "step": 3}},
         "stmt": stmt("ROLLBACK")},
    ]
    return [{"type": "batch", "batch": {"steps": steps}}]


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.commits = 0
        self.busy = 0
        self.timeouts = 0
        self.errors = 0
        self.last_commit = time.monotonic()

    def add(self, field):
        with self.lock:
            setattr(self, field, getattr(self, field) + 1)
            if field == "commits":
                self.last_commit = time.monotonic()


def client_loop(port, client, stats, stop, keep_alive):
    conn = None
    n = 0
    while not stop.is_set():
        n += 1
        try:
            results, conn = pipeline(port, write_batch(client, n), conn=conn)
            if not keep_alive:
                conn.close()
                conn = None
            result = results[0]
            if result["type"] != "ok":
                stats.add("errors")
                continue
            batch = result["response"]["result"]
            if batch["step_results"][3] is not None:
                stats.add("commits")
            else:
                stats.add("busy")
        except (socket.timeout, TimeoutError):
            # Abandoned request: sqld keeps its thread (the growth the issue saw).
            stats.add("timeouts")
            conn = None
        except (OSError, http.client.HTTPException, RuntimeError, ValueError, KeyError):
            stats.add("errors")
            conn = None
            time.sleep(0.05)


def thread_count(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return -1


def cpu_percent(pid, seconds=2.0):
    """sqld's CPU use over a short window (a stalled sqld spins)."""
    def ticks():
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    try:
        before = ticks()
        time.sleep(seconds)
        return round(100 * (ticks() - before) / os.sysconf("SC_CLK_TCK") / seconds)
    except OSError:
        return -1


def summarize_dump(pid, raw_path=None):
    """Groups a gdb `thread apply all bt` by identical stacks.

    The sqld release binary is stripped, so frames inside sqld show as bare
    addresses; threads with the same address sequence are waiting at the same
    place. The innermost named frame (futex `syscall`, `epoll_wait`, ...) says
    how they wait.
    """
    gdb = shutil.which("gdb")
    if gdb is None:
        return {"error": "gdb not installed"}
    try:
        out = subprocess.run(
            [gdb, "-p", str(pid), "-batch", "-ex", "thread apply all bt"],
            capture_output=True, text=True, timeout=300,
        ).stdout
    except subprocess.TimeoutExpired:
        return {"error": "gdb timed out"}
    if raw_path:
        with open(raw_path, "w") as f:
            f.write(out)
    groups = collections.Counter()
    for block in re.split(r"\n(?=Thread \d+ )", out):
        header = re.match(r'Thread \d+ \(.*?\) "([^"]*)"', block)
        if not header:
            continue
        frames = re.findall(r"^#\d+\s+(?:(0x[0-9a-f]+) in )?(\S+)", block, re.M)
        signature = tuple(addr if name == "??" else name for addr, name in frames)
        waits_in = next((name for _, name in frames if name != "??"), "?")
        groups[(header.group(1), waits_in, len(frames), signature)] += 1
    return {
        "threads": sum(groups.values()),
        "stacks": [
            {"threads": n, "name": name, "waits_in": waits_in, "depth": depth}
            for (name, waits_in, depth, _), n in groups.most_common(8)
        ],
    }


def probe(port, requests, timeout):
    started = time.monotonic()
    try:
        results, _ = pipeline(port, requests, timeout=timeout)
        ok = results[0]["type"] == "ok"
        return {"answered": True, "ok": ok, "ms": round((time.monotonic() - started) * 1000)}
    except (OSError, http.client.HTTPException, RuntimeError, ValueError):
        return {"answered": False, "after_ms": round((time.monotonic() - started) * 1000)}


def start_sqld(path, data, port, max_conns):
    args = [path, "--db-path", os.path.join(data, "db"), "--http-listen-addr",
            f"127.0.0.1:{port}", "--no-welcome"]
    if max_conns:
        args += ["--max-concurrent-connections", str(max_conns)]
    log = open(os.path.join(data, "sqld.log"), "w")
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"sqld exited with {proc.returncode}; see {data}/sqld.log")
        try:
            pipeline(port, [{"type": "execute", "stmt": stmt("SELECT 1")}], timeout=2)
            return proc
        except (OSError, http.client.HTTPException, RuntimeError):
            time.sleep(0.2)
    proc.kill()
    sys.exit("sqld did not answer within 60 s")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sqld", default=os.environ.get("SQLD_BIN"), help="sqld binary (default $SQLD_BIN)")
    ap.add_argument("--clients", type=int, default=12)
    ap.add_argument("--seconds", type=float, default=120)
    ap.add_argument("--max-concurrent-connections", type=int, default=0,
                    help="pass this flag to sqld (0: sqld's default)")
    ap.add_argument("--stall-seconds", type=float, default=15,
                    help="no commit for this long = stall (must exceed the request timeout)")
    ap.add_argument("--dump", action="store_true", help="summarise a gdb thread dump at the stall")
    ap.add_argument("--dump-file", help="with --dump, also keep gdb's raw output here")
    ap.add_argument("--keep-running", action="store_true",
                    help="after a stall, keep loading until --seconds (watch threads grow)")
    ap.add_argument("--keep-alive", action="store_true",
                    help="reuse each client's HTTP connection (default: one per request)")
    ap.add_argument("--expect", choices=["stall", "no-stall"])
    a = ap.parse_args()
    if not a.sqld:
        sys.exit("no sqld: pass --sqld PATH or set SQLD_BIN (e.g. a sqld from libSQL's releases, or "
                 "the sqld that `turso dev` runs)")

    data = tempfile.mkdtemp(prefix="sqld-repro-")
    port = free_port()
    proc = start_sqld(a.sqld, data, port, a.max_concurrent_connections)
    summary = {"clients": a.clients, "seconds": a.seconds, "keep_alive": a.keep_alive,
               "max_concurrent_connections": a.max_concurrent_connections or None}
    try:
        pipeline(port, [
            {"type": "execute", "stmt": stmt(
                "CREATE TABLE log(id INTEGER PRIMARY KEY, client INTEGER, n INTEGER, "
                "at TEXT DEFAULT (datetime('now')))")},
            {"type": "execute", "stmt": stmt(
                "CREATE TABLE counters(client INTEGER PRIMARY KEY, n INTEGER NOT NULL)")},
            {"type": "execute", "stmt": stmt(
                "WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i < ?) "
                "INSERT INTO counters SELECT i, 0 FROM c",
                (a.clients,))},
        ])
        stats, stop = Stats(), threading.Event()
        workers = [threading.Thread(target=client_loop, args=(port, i, stats, stop, a.keep_alive),
                                    daemon=True)
                   for i in range(a.clients)]
        started = time.monotonic()
        for w in workers:
            w.start()
        last, max_threads, stall = 0, 0, None
        while time.monotonic() - started < a.seconds:
            time.sleep(1)
            now = time.monotonic()
            with stats.lock:
                commits, busy, timeouts, errors = stats.commits, stats.busy, stats.timeouts, stats.errors
                idle = now - stats.last_commit
            threads = thread_count(proc.pid)
            max_threads = max(max_threads, threads)
            print(f"t={now - started:6.1f}s commits={commits:7d} (+{commits - last:5d}/s) "
                  f"busy={busy} timeouts={timeouts} errors={errors} sqld_threads={threads}",
                  flush=True)
            last = commits
            if stall is None and idle >= a.stall_seconds:
                stall = {"commits_before_stall": commits,
                         "stalled_after_s": round(now - started - idle, 1),
                         "threads_at_detection": threads}
                print(f"STALL: no commit for {idle:.0f} s after {commits} commits", flush=True)
                stall["sqld_cpu_percent"] = cpu_percent(proc.pid)
                stall["read_probe"] = probe(port, [{"type": "execute", "stmt": stmt(
                    "SELECT count(*) FROM log")}], 5)
                stall["create_table_probe"] = probe(port, [{"type": "execute", "stmt": stmt(
                    "CREATE TABLE probe(x)")}], 10)
                if a.dump:
                    stall["thread_dump"] = summarize_dump(proc.pid, a.dump_file)
                print("stall evidence: " + json.dumps(stall), flush=True)
                if not a.keep_running:
                    break
        stop.set()
        elapsed = time.monotonic() - started
        summary.update({
            "elapsed_s": round(elapsed, 1), "commits": stats.commits,
            "commits_per_s": round(stats.commits / elapsed, 1), "busy": stats.busy,
            "timeouts": stats.timeouts, "errors": stats.errors,
            "max_sqld_threads": max_threads, "final_sqld_threads": thread_count(proc.pid),
            "stalled": stall is not None, "stall": stall,
        })
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(data, ignore_errors=True)
    print(json.dumps(summary), flush=True)
    if a.expect:
        sys.exit(0 if summary["stalled"] == (a.expect == "stall") else 1)


if __name__ == "__main__":
    main()
