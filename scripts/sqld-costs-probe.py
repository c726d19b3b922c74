#!/usr/bin/env python3
"""Where sqld's time per request goes, measured on sqld itself (docs/bench.md,
"Where a request's CPU and the database's time go").

Usage: SQLD_BIN=/path/to/sqld python3 scripts/sqld-costs-probe.py [N]
(after `bash scripts/build-worker.sh`, which writes build/index_bg.wasm).

1. sqld's CPU and the wall time per Hrana pipeline (utime + stime of the
   sqld process over N pipelines on one keep-alive connection) on a fresh stream per pipeline
   (what the Worker sends: `baton: null` ... `close`) and on one stream
   reused through its baton; empty, `SELECT 1`, and a one-row write
   transaction.
2. Whether an idle reused stream holds a connection: with
   `--max-concurrent-connections 1`, a fresh stream opened while another
   stream sits idle (the reason the Worker does not pool streams).
3. Preparing against executing the engine's Send statement: its
   `query_duration_ms` with no message to insert (preparing it, plus a
   statement that does nothing) against inserting one. The statement text is
   read from the built Worker, so it is exactly what production sends.
4. Parsing a statement that never runs: sqld's CPU per pipeline of one batch
   step that its condition skips, the step `SELECT 1` or the Send statement
   (as is, and padded with spaces to twice its bytes: the same tokens). sqld
   parses every step of a batch before it runs the first, so a batch pays for
   the text of the steps its gates skip too; the difference from `SELECT 1` is
   that parse (docs/bench.md, "What sqld spends a batch on").
5. What the schema costs every request: sqld's CPU per one-row write
   pipeline on a fresh stream, on this database (the migrations applied in
   step 3) against a second sqld holding only the written table, in
   alternating rounds. A fresh stream is a fresh connection, which parses
   every CREATE in the schema before its first statement, so each table,
   index and trigger (and any view) costs every request, whether it uses
   them or not (docs/engine.md, "What a batch costs sqld").
"""
import glob
import http.client
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
N = int(sys.argv[1]) if len(sys.argv) > 1 else 500


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start_sqld():
    """A fresh sqld on a temporary database: (process, port); `stop_sqld` ends it."""
    sqld = os.environ.get("SQLD_BIN")
    if not sqld:
        sys.exit("SQLD_BIN must name the sqld binary")
    port = free_port()
    path = tempfile.mkdtemp(prefix="mqlite-sqld-costs-")
    proc = subprocess.Popen(
        [sqld, "--db-path", os.path.join(path, "db"), "--http-listen-addr",
         f"127.0.0.1:{port}", "--no-welcome", "--max-concurrent-connections", "1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    proc.db_dir = path
    for _ in range(200):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/health")
            c.getresponse().read()
            return proc, port
        except OSError:
            time.sleep(0.05)
    stop_sqld(proc)
    sys.exit("sqld did not start")


def stop_sqld(proc):
    proc.kill()
    proc.wait()
    shutil.rmtree(proc.db_dir, ignore_errors=True)


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Client:
    def __init__(self, port, timeout=30):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)

    def pipeline(self, requests, baton=None):
        body = json.dumps({"baton": baton, "requests": requests})
        self.conn.request("POST", "/v2/pipeline", body, {"Content-Type": "application/json"})
        reply = self.conn.getresponse()
        return reply.status, reply.read()


def execute(sql, args=()):
    return {"type": "execute", "stmt": {"sql": sql, "args": list(args)}}


CLOSE = {"type": "close"}
# The table steps 1 and 5 write to, and their one-row write pipeline.
CREATE_WRITTEN_TABLE = "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)"
ONE_ROW_WRITE = ["BEGIN IMMEDIATE", "INSERT INTO t (v) VALUES ('x')", "COMMIT"]


def text(v):
    return {"type": "text", "value": v}


def integer(v):
    return {"type": "integer", "value": str(v)}


NULL = {"type": "null"}


def statements(path):
    """The statements of a migration file (triggers kept whole)."""
    out, current, in_trigger = [], [], False
    for line in open(path):
        stripped = line.strip()
        if not stripped or stripped.startswith("--"):
            continue
        current.append(line)
        if stripped.upper().startswith("CREATE TRIGGER"):
            in_trigger = True
        if (in_trigger and stripped.upper().startswith("END;")) or (
                not in_trigger and stripped.endswith(";")):
            out.append("".join(current))
            current, in_trigger = [], False
    return out


def send_statement():
    """The engine's Send statement, as the built Worker carries it."""
    wasm = open(os.path.join(ROOT, "build", "index_bg.wasm"), "rb").read()
    start = wasm.find(b"INSERT INTO messages (queue, state, visible_at, enqueued_at")
    while start >= 0:
        end = wasm.find(b"RETURNING id", start)
        candidate = wasm[start:end + len(b"RETURNING id")]
        if end > 0 and b"SELECT cp.queue" in candidate and b"\x00" not in candidate:
            return candidate.decode()
        start = wasm.find(b"INSERT INTO messages (queue, state", start + 1)
    sys.exit("the Send statement is not in build/index_bg.wasm: run scripts/build-worker.sh")


def stream_costs(port, pid):
    client = Client(port)
    client.pipeline([execute(CREATE_WRITTEN_TABLE), CLOSE])
    write = [execute(sql) for sql in ONE_ROW_WRITE]
    print(f"1. sqld CPU / wall time per pipeline, {N} pipelines each (ms)")
    print(f"   {'pipeline':<20} {'fresh stream':>16} {'reused stream':>16}")
    for name, requests in [("empty", []), ("SELECT 1", [execute("SELECT 1")]),
                           ("one-row write", write)]:
        before, started = cpu_seconds(pid), time.time()
        for _ in range(N):
            client.pipeline(requests + [CLOSE])
        fresh = (cpu_seconds(pid) - before) / N * 1000
        fresh_wall = (time.time() - started) / N * 1000
        _, body = client.pipeline([])
        baton = json.loads(body)["baton"]
        before, started = cpu_seconds(pid), time.time()
        for _ in range(N):
            _, body = client.pipeline(requests, baton)
            baton = json.loads(body)["baton"]
        reused = (cpu_seconds(pid) - before) / N * 1000
        reused_wall = (time.time() - started) / N * 1000
        client.pipeline([CLOSE], baton)
        print(f"   {name:<20} {fresh:>7.3f} / {fresh_wall:>6.3f} {reused:>7.3f} / {reused_wall:>6.3f}")


def idle_stream_holds_a_connection(port):
    _, body = Client(port).pipeline([execute("SELECT 1")])
    baton = json.loads(body)["baton"]
    started = time.time()
    status, body = Client(port).pipeline([execute("SELECT 1"), CLOSE])
    waited = time.time() - started
    Client(port).pipeline([CLOSE], baton)
    print("2. a fresh stream while another sits idle (--max-concurrent-connections 1): "
          f"HTTP {status} after {waited:.2f} s {body[:80]!r}")


def prepare_share(port):
    client = Client(port)
    for path in sorted(glob.glob(os.path.join(ROOT, "migrations", "*.sql"))):
        for sql in statements(path):
            client.pipeline([execute(sql), CLOSE])
    client.pipeline([execute(
        "INSERT INTO queues (name, generation, created_at, updated_at) VALUES ('q', 'g', 0, 0)"),
        CLOSE])
    sql = send_statement()
    blob = {"type": "blob", "base64": "aGk="}

    def args(copies):
        return ([text("q"), text("0:0"), text(json.dumps(copies)), text('["q"]'),
                 integer(0), integer(0), blob] + [NULL] * 16)

    one = [["q", "k", "h", None, None, None, None, None, None, None, 0, 2, 1, 0]]
    print("3. the Send statement on sqld, median query_duration_ms of "
          f"{N} fresh-stream runs (rows written)")
    for name, copies in [("no message (prepare)", []), ("one message", one)]:
        durations, written = [], None
        for _ in range(N):
            _, body = client.pipeline([execute("BEGIN IMMEDIATE"), execute(sql, args(copies)),
                                       execute("ROLLBACK"), CLOSE])
            result = json.loads(body)["results"][1]
            if result["type"] != "ok":
                sys.exit(f"the Send statement failed: {result}")
            durations.append(result["response"]["result"]["query_duration_ms"])
            written = result["response"]["result"].get("rows_written")
        print(f"   {name:<22} {statistics.median(durations):.3f} ms ({written})")


def cpu_ms_per_pipeline(client, pid, requests, problem):
    """sqld's CPU (ms) per pipeline over N runs of `requests`; `problem(status,
    body)` names what went wrong with an answer, or None."""
    before = cpu_seconds(pid)
    for _ in range(N):
        status, body = client.pipeline(requests)
        wrong = problem(status, body)
        if wrong:
            sys.exit(wrong)
    return (cpu_seconds(pid) - before) / N * 1000


def parse_share(port, pid):
    client = Client(port)
    # An empty "or" is false: the step never runs.
    never = {"type": "or", "conds": []}
    sql = send_statement()
    texts = [("SELECT 1", "SELECT 1"), ("the Send statement", sql),
             ("the same, padded to twice its bytes", sql + " " * len(sql))]
    rounds = 3
    print(f"4. sqld CPU per pipeline of one skipped step, {N} pipelines, {rounds} rounds (ms)")
    cpu = {name: [] for name, _ in texts}

    def skipped(status, body):
        result = json.loads(body)["results"][0] if status == 200 else {}
        if result.get("type") == "ok" and result["response"]["result"]["step_results"] == [None]:
            return None
        return f"the step was not skipped: HTTP {status} {body[:200]!r}"

    for _ in range(rounds):
        for name, sql_text in texts:
            step = {"stmt": {"sql": sql_text, "args": []}, "condition": never}
            requests = [{"type": "batch", "batch": {"steps": [step]}}, CLOSE]
            cpu[name].append(cpu_ms_per_pipeline(client, pid, requests, skipped))
    for name, sql_text in texts:
        runs = " ".join(f"{ms:.3f}" for ms in cpu[name])
        print(f"   {name:<36} {len(sql_text):>5} bytes  {runs}")


def schema_share(port, pid):
    bare, bare_port = start_sqld()
    try:
        Client(bare_port).pipeline([execute(CREATE_WRITTEN_TABLE), CLOSE])
        _, answer = Client(port).pipeline([execute(
            "SELECT sum(length(sql)) FROM sqlite_schema WHERE name <> 't'"), CLOSE])
        result = json.loads(answer)["results"][0]["response"]["result"]
        schema_bytes = result["rows"][0][0]["value"]
        write = [execute(sql) for sql in ONE_ROW_WRITE] + [CLOSE]
        servers = [("one table", bare_port, bare.pid),
                   (f"the migrated schema ({schema_bytes} bytes of SQL)", port, pid)]
        rounds = 3
        cpu = {name: [] for name, _, _ in servers}

        def written(status, body):
            if status == 200 and b'"error"' not in body:
                return None
            return f"the write failed: HTTP {status} {body[:200]!r}"

        for _ in range(rounds):
            for name, server_port, server_pid in servers:
                cpu[name].append(
                    cpu_ms_per_pipeline(Client(server_port), server_pid, write, written))
        print(f"5. sqld CPU per one-row write pipeline on a fresh stream, {N} pipelines, "
              f"{rounds} rounds (ms)")
        for name, _, _ in servers:
            runs = " ".join(f"{ms:.3f}" for ms in cpu[name])
            print(f"   {name:<48} {runs}")
    finally:
        stop_sqld(bare)


def main():
    proc, port = start_sqld()
    try:
        stream_costs(port, proc.pid)
        idle_stream_holds_a_connection(port)
        prepare_share(port)
        parse_share(port, proc.pid)
        schema_share(port, proc.pid)
    finally:
        stop_sqld(proc)


main()
