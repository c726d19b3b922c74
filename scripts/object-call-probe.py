#!/usr/bin/env python3
"""What one call to a Durable Object costs workerd by itself (docs/bench.md,
step 7 and "The object's `commit` as a Workers RPC method"): no wasm, no
database, only the call.

Usage: MQLITE_BENCH_WORKERD=/path/to/workerd python3 scripts/object-call-probe.py [N]

A plain JavaScript Worker with one Durable Object class runs on a fresh
workerd. Each request to it makes N calls to one object in a row, with a
4 KB body and an answer of 512 bytes and a few headers, the shape a
grouped write's call to its object had as a `fetch`; four such requests run
at once. Three ways: `noop` (the loop alone), `fetch` (`stub.fetch`, as the
Worker's wake hints still go) and `rpc` (a method called on the stub, the
Workers RPC a class that extends `DurableObject` takes, as grouped writes
go). Printed: workerd's
CPU (utime + stime of its process) per call, each way measured twice,
interleaved.
"""
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

WORKER = r"""
import { DurableObject } from "cloudflare:workers";

export class Probe extends DurableObject {
  async fetch(request) {
    const body = new Uint8Array(await request.arrayBuffer());
    const answer = new Response(body.subarray(0, 512));
    answer.headers.set("x-mqlite-group", "answer");
    answer.headers.set("x-mqlite-db-status", "200");
    answer.headers.set("x-mqlite-group-members", "8");
    return answer;
  }
  async commit(body, wakes) {
    return { verdict: "answer", status: 200, members: 8, wakes, body: body.subarray(0, 512) };
  }
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const calls = Number(url.searchParams.get("n"));
    const way = url.pathname.slice(1);
    const body = new Uint8Array(4000).fill(65);
    const stub = env.PROBE.get(env.PROBE.idFromName("queue"));
    let seen = 0;
    for (let i = 0; i < calls; i++) {
      if (way === "fetch") {
        const r = await stub.fetch("http://object/commit", {
          method: "POST", body, headers: { "x-mqlite-wakes": "1" },
        });
        seen += (await r.arrayBuffer()).byteLength + r.headers.get("x-mqlite-group").length;
      } else if (way === "rpc") {
        const a = await stub.commit(body, true);
        seen += a.body.length + a.verdict.length;
      } else {
        await Promise.resolve();
      }
    }
    return new Response(String(seen));
  }
};
"""

CONFIG = """using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [(name = "main", worker = .worker)],
  sockets = [(name = "http", address = "127.0.0.1:{port}", http = (), service = "main")],
);
const worker :Workerd.Worker = (
  modules = [(name = "worker.js", esModule = embed "worker.js")],
  compatibilityDate = "2025-09-01",
  bindings = [(name = "PROBE", durableObjectNamespace = "Probe")],
  durableObjectNamespaces = [(className = "Probe", uniqueKey = "probe", enableSql = true)],
  durableObjectStorage = (inMemory = void),
);
"""

CLIENTS = 4
TICKS = os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def get(url):
    with urllib.request.urlopen(url, timeout=120) as r:
        r.read()


def run_way(base, pid, way, calls):
    """workerd's CPU microseconds per call, over CLIENTS loops at once."""
    before = cpu_seconds(pid)
    threads = [
        threading.Thread(target=get, args=(f"{base}/{way}?n={calls}",)) for _ in range(CLIENTS)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return (cpu_seconds(pid) - before) * 1e6 / (CLIENTS * calls)


def main():
    workerd = os.environ.get("MQLITE_BENCH_WORKERD")
    if not workerd or not os.access(workerd, os.X_OK):
        sys.exit("MQLITE_BENCH_WORKERD (the workerd binary) is not set")
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    with tempfile.TemporaryDirectory(prefix="mqlite-object-call-") as tmp:
        port = free_port()
        with open(os.path.join(tmp, "worker.js"), "w") as f:
            f.write(WORKER)
        with open(os.path.join(tmp, "probe.capnp"), "w") as f:
            f.write(CONFIG.replace("{port}", str(port)))
        proc = subprocess.Popen(
            [workerd, "serve", os.path.join(tmp, "probe.capnp"), "--experimental"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            base = f"http://127.0.0.1:{port}"
            deadline = time.time() + 30
            while True:
                try:
                    get(f"{base}/noop?n=1")
                    break
                except OSError:
                    if time.time() > deadline or proc.poll() is not None:
                        sys.exit("the probe's workerd did not start")
                    time.sleep(0.2)
            get(f"{base}/fetch?n=50")
            get(f"{base}/rpc?n=50")
            print(f"one call to a Durable Object, {CLIENTS} loops of {calls} calls at once")
            results = {"noop": [], "fetch": [], "rpc": []}
            for _ in range(2):
                for way in results:
                    results[way].append(run_way(base, proc.pid, way, calls))
            for way, each in results.items():
                shown = ", ".join(f"{us:.0f}" for us in each)
                print(f"  {way:5}: workerd CPU per call {shown} us")
        finally:
            proc.terminate()
            proc.wait(timeout=10)


if __name__ == "__main__":
    main()
