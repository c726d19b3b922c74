#!/usr/bin/env python3
"""Wall time of one Hrana pipeline against a running sqld, without the broker.

Usage: scripts/sqld-latency-probe.py PORT [N]

Prints the mean wall time of N sequential pipelines over one keep-alive HTTP
connection: a minimal write transaction (BEGIN IMMEDIATE; INSERT; COMMIT) on a
new stream per request (what the Worker sends), the same on one reused stream,
and a `SELECT 1` on a new stream. It bounds what any statement design can
reach: write RPCs are serialised by the single writer, so one database serves
at most about 1000 / (write ms) write RPCs per second (docs/engine.md).
Only talks to 127.0.0.1.
"""
import http.client
import json
import sys
import time


def main() -> None:
    port = int(sys.argv[1])
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def post(body):
        conn.request("POST", "/v2/pipeline", json.dumps(body), {"Content-Type": "application/json"})
        return json.loads(conn.getresponse().read())

    post({"baton": None, "requests": [
        {"type": "execute", "stmt": {"sql": "CREATE TABLE IF NOT EXISTS latency_probe(x)"}},
        {"type": "close"}]})
    write = {"type": "batch", "batch": {"steps": [
        {"stmt": {"sql": "BEGIN IMMEDIATE"}},
        {"stmt": {"sql": "INSERT INTO latency_probe VALUES (1)"}, "condition": {"type": "ok", "step": 0}},
        {"stmt": {"sql": "COMMIT"}, "condition": {"type": "ok", "step": 1}}]}}
    read = {"type": "batch", "batch": {"steps": [{"stmt": {"sql": "SELECT 1"}}]}}

    def mean_ms(step):
        started = time.time()
        for _ in range(n):
            step()
        return (time.time() - started) / n * 1000

    fresh_write = mean_ms(lambda: post({"baton": None, "requests": [write, {"type": "close"}]}))
    baton = [post({"baton": None, "requests": []})["baton"]]

    def reused():
        baton[0] = post({"baton": baton[0], "requests": [write]})["baton"]

    reused_write = mean_ms(reused)
    fresh_read = mean_ms(lambda: post({"baton": None, "requests": [read, {"type": "close"}]}))
    print(f"write transaction, new stream: {fresh_write:.2f} ms")
    print(f"write transaction, reused stream: {reused_write:.2f} ms")
    print(f"SELECT 1, new stream: {fresh_read:.2f} ms")


if __name__ == "__main__":
    main()
