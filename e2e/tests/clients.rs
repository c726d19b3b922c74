//! The clients (issue 25) against the Worker in workerd:
//!
//! * `cli_commands_and_exit_codes`: the `mqlite-edge` command line, command by command,
//!   its outputs (text and json with the wire's field names) and exit codes; a received
//!   message is acknowledged only once it was written to stdout.
//! * `mcp_stdio_session`: `mqlite-edge-mcp` driven over stdio through initialize,
//!   tools/list, create_queue, send, receive, complete and stats.
//! * `consumer_replays_a_lost_receive_answer`: a fault proxy between the consumer and the
//!   Worker cuts the first Receive answer; the retry with the same attempt id gets the
//!   same batch (delivery count 1), nothing is handled twice.
//! * `consumer_renews_a_slow_handlers_lease`: handlers that outlive the lock duration
//!   keep their lease by auto-renewal; nothing is redelivered while leased.
//! * `consumer_survives_a_database_restart`: the database is SIGKILLed and restarted
//!   while the consumer runs; every message is handled and completed, and no message is
//!   handled by two handlers at once.
//!
//! * `service_binding_in_both_dialects`: a second Worker (e2e/fixtures/binding-caller)
//!   with a `[[services]]` binding to mqlite-edge, both run by one `wrangler dev` (only the
//!   caller has a port); the Rust client and pgmq's routes reach mqlite-edge through it.
//!
//! The binaries come from `MQLITE_E2E_CLIENT_BINS` (default `target/debug` under the
//! root; scripts/test.sh builds them first).

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mqlite_e2e::proxy::{Fault, FaultProxy};
use mqlite_e2e::{b64, Database, Stack, StackOptions, Tools};
use mqlite_edge_client::types::{Message, SendRequest};
use mqlite_edge_client::{Client, Consumer, ConsumerOptions, Error, HandlerResult, Stop};
use serde_json::{json, Value};

macro_rules! check {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!($($fmt)+));
        }
    };
}

type Scenario = fn(&Tools, &Stack) -> Result<String, String>;

fn main() {
    let tools = match Tools::from_env() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("clients: {e}");
            std::process::exit(1);
        }
    };
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let stack = match Stack::start(
        &tools,
        StackOptions {
            vars: &[],
            database_url: None,
        },
    ) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("clients: {e}");
            std::process::exit(1);
        }
    };
    let scenarios: &[(&str, Scenario)] = &[
        ("cli_commands_and_exit_codes", cli_commands_and_exit_codes),
        ("mcp_stdio_session", mcp_stdio_session),
        (
            "consumer_replays_a_lost_receive_answer",
            consumer_replays_a_lost_receive_answer,
        ),
        (
            "consumer_renews_a_slow_handlers_lease",
            consumer_renews_a_slow_handlers_lease,
        ),
        (
            "consumer_survives_a_database_restart",
            consumer_survives_a_database_restart,
        ),
        (
            "service_binding_in_both_dialects",
            service_binding_in_both_dialects,
        ),
    ];
    let mut failed = 0;
    for (name, scenario) in scenarios {
        if !only.is_empty() && !only.iter().any(|w| name.contains(w.as_str())) {
            continue;
        }
        let started = Instant::now();
        match scenario(&tools, &stack) {
            Ok(figures) => println!(
                "test {name} ... ok ({} ms)\n    {figures}",
                started.elapsed().as_millis()
            ),
            Err(e) => {
                failed += 1;
                println!("test {name} ... FAILED\n    {e}");
            }
        }
    }
    // `exit` runs no destructors: stop the stack's processes first.
    drop(stack);
    if failed > 0 {
        std::process::exit(1);
    }
}

fn binary(tools: &Tools, name: &str) -> PathBuf {
    std::env::var_os("MQLITE_E2E_CLIENT_BINS")
        .map(PathBuf::from)
        .unwrap_or_else(|| tools.root.join("target/debug"))
        .join(name)
}

/// One `mqlite-edge` run against `stack` (MQLITE_ENDPOINT/MQLITE_TOKEN), with `stdout`.
fn cli_with(tools: &Tools, stack: &Stack, args: &[&str], stdout: Stdio) -> Output {
    let mut command = Command::new(binary(tools, "mqlite-edge"));
    command
        .args(args)
        .env("MQLITE_ENDPOINT", &stack.base)
        .env("MQLITE_TOKEN", &stack.token)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::piped());
    match command.spawn().and_then(|c| c.wait_with_output()) {
        Ok(o) => o,
        Err(e) => panic!("cannot run mqlite-edge: {e}"),
    }
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn cli(tools: &Tools, stack: &Stack, args: &[&str]) -> Run {
    let o = cli_with(tools, stack, args, Stdio::piped());
    Run {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// Runs `args`, expecting exit `code`; returns stdout.
fn expect(tools: &Tools, stack: &Stack, args: &[&str], code: i32) -> Result<String, String> {
    let run = cli(tools, stack, args);
    check!(
        run.code == code,
        "mqlite-edge {args:?}: exit {} (want {code})\nstdout: {}\nstderr: {}",
        run.code,
        run.stdout,
        run.stderr
    );
    Ok(run.stdout)
}

fn json_of(text: &str) -> Result<Value, String> {
    serde_json::from_str(text).map_err(|e| format!("not JSON ({e}): {text}"))
}

fn stats(stack: &Stack, queue: &str) -> Value {
    stack.ok("QueueService/Stats", json!({"queue": queue}))
}

fn cli_commands_and_exit_codes(tools: &Tools, stack: &Stack) -> Result<String, String> {
    let x = |args: &[&str], code| expect(tools, stack, args, code);
    // Exit codes of the grammar.
    check!(x(&["version"], 0)?.starts_with("mqlite-edge "), "version");
    x(&[], 2)?;
    x(&["frobnicate"], 2)?;
    x(&["send", "q", "--bogus", "x"], 2)?;
    x(&["complete", "q", "-1", "tok"], 2)?;
    x(&["receive", "q", "--wait", "5"], 2)?;
    x(&["complete", "q", "1", "tok", "--delay", "1s"], 2)?;
    x(&["send", "-h"], 0)?;
    x(&["list", "extra"], 1)?;
    x(&["list", "--output", "jsno"], 1)?;
    x(&["complete", "q", "0", "tok"], 1)?;
    let no_endpoint = Command::new(binary(tools, "mqlite-edge"))
        .args(["list"])
        .env_remove("MQLITE_ENDPOINT")
        .output()
        .map_err(|e| e.to_string())?;
    check!(
        no_endpoint.status.code() == Some(1)
            && String::from_utf8_lossy(&no_endpoint.stderr).contains("MQLITE_ENDPOINT"),
        "no endpoint: {no_endpoint:?}"
    );
    // Credentials: a wrong token is exit 1; MQLITE_TOKEN stays with MQLITE_ENDPOINT.
    let bad = cli(tools, stack, &["list", "--token", "wrong"]);
    check!(
        bad.code == 1 && bad.stderr.starts_with("error: mqlite: unauthenticated"),
        "wrong token: {} {}",
        bad.code,
        bad.stderr
    );
    let other = format!("{}/", stack.base.replace("127.0.0.1", "localhost"));
    let moved = cli(tools, stack, &["list", "--endpoint", &other]);
    check!(
        moved.code == 1 && moved.stderr.contains("MQLITE_TOKEN was not forwarded"),
        "changed endpoint: {} {}",
        moved.code,
        moved.stderr
    );
    let same = format!("{}/", stack.base);
    x(&["list", "--endpoint", &same], 0)?;

    // Queues.
    check!(
        x(
            &["create-queue", "cli", "--lock", "3s", "--max-delivery", "5"],
            0
        )? == "ok: action=create-queue queue=cli\n",
        "create-queue text"
    );
    let listed = json_of(&x(&["list", "--output", "json"], 0)?)?;
    let cli_queue = listed
        .as_array()
        .and_then(|a| a.iter().find(|q| q["name"] == "cli").cloned())
        .ok_or(format!("list: {listed}"))?;
    check!(
        cli_queue["lock_duration_ms"] == 3000 && cli_queue["max_delivery_count"] == 5,
        "list json: {cli_queue}"
    );
    check!(
        x(&["list"], 0)?.contains(&format!("{:<24} kind={:<12} lock=3000ms", "cli", "queue")),
        "list text"
    );

    // Send in both outputs; peek shows the wire's base64 body.
    let sent = x(&["send", "cli", "hello", "world", "--message-id", "m1"], 0)?;
    check!(sent.starts_with("ok: queue=cli seq="), "send: {sent}");
    let sent = json_of(&x(
        &["send", "cli", "two", "--output", "json", "--group", "g"],
        0,
    )?)?;
    check!(
        sent["queue"] == "cli" && sent["seq"].as_i64().is_some_and(|s| s > 0),
        "send json: {sent}"
    );
    let peeked = json_of(&x(&["peek", "cli", "--output", "json"], 0)?)?;
    check!(
        peeked[0]["body"] == b64("hello world")
            && peeked[0]["state"] == "active"
            && peeked[0].get("lock_token").is_none(),
        "peek json: {peeked}"
    );
    check!(
        x(&["peek", "cli"], 0)?.contains("state=active deliveries=0 body=\"hello world\""),
        "peek text"
    );

    // Auto-ack refuses the null device before claiming anything.
    let null = std::fs::File::create("/dev/null").map_err(|e| e.to_string())?;
    let o = cli_with(tools, stack, &["receive", "cli"], Stdio::from(null));
    check!(o.status.code() == Some(1), "receive >/dev/null: {o:?}");
    check!(
        stats(stack, "cli")["locked"] == 0,
        "receive >/dev/null claimed something"
    );

    // Output that cannot be written leaves the message locked, not completed.
    let mut child = Command::new(binary(tools, "mqlite-edge"))
        .args(["receive", "cli"])
        .env("MQLITE_ENDPOINT", &stack.base)
        .env("MQLITE_TOKEN", &stack.token)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    drop(child.stdout.take());
    let o = child.wait_with_output().map_err(|e| e.to_string())?;
    let after = stats(stack, "cli");
    check!(
        o.status.code() == Some(1) && after["locked"] == 1 && after["total"] == 2,
        "receive into a closed pipe: {o:?} {after}"
    );

    // --no-ack prints the lock token; settle later by hand; a second settle is lock lost.
    std::thread::sleep(Duration::from_millis(3_200)); // the cut receive's lease runs out
    let got = json_of(&x(
        &[
            "receive", "cli", "--no-ack", "--max", "5", "--output", "json",
        ],
        0,
    )?)?;
    let got = got.as_array().cloned().unwrap_or_default();
    check!(got.len() == 2, "receive --no-ack: {got:?}");
    let (seq, token) = (
        got[0]["seq_number"].to_string(),
        got[0]["lock_token"].as_str().unwrap_or_default().to_owned(),
    );
    check!(!token.is_empty(), "no lock token in --no-ack: {got:?}");
    check!(
        x(&["complete", "cli", &seq, &token], 0)?
            == format!("ok: action=complete queue=cli seq={seq}\n"),
        "complete"
    );
    // The same settlement again is replayed; a wrong token is lock lost.
    x(&["complete", "cli", &seq, &token], 0)?;
    let wrong = cli(tools, stack, &["complete", "cli", &seq, "not-the-token"]);
    check!(
        wrong.code == 1
            && wrong
                .stderr
                .starts_with("error: mqlite: lock lost or already settled"),
        "complete with a wrong token: {} {}",
        wrong.code,
        wrong.stderr
    );
    let (seq2, token2) = (
        got[1]["seq_number"].to_string(),
        got[1]["lock_token"].as_str().unwrap_or_default().to_owned(),
    );
    x(&["renew", "cli", &seq2, &token2], 0)?;
    x(&["defer", "cli", &seq2, &token2], 0)?;
    let deferred = x(&["receive-deferred", "cli", "--seq", &seq2], 0)?;
    check!(
        deferred.contains("lock-token="),
        "receive-deferred: {deferred}"
    );
    let token3 = deferred
        .split_whitespace()
        .find_map(|w| w.strip_prefix("lock-token="))
        .unwrap_or_default()
        .to_owned();
    x(&["reject", "cli", &seq2, &token3, "--reason", "bad"], 0)?;
    check!(stats(stack, "cli")["dead_lettered"] == 1, "reject");
    check!(
        x(&["redrive", "cli"], 0)? == "ok: action=redrive moved=1\n",
        "redrive"
    );

    // Auto-ack: printed, then completed with one CompleteBatch.
    let printed = x(&["receive", "cli", "--max", "3"], 0)?;
    check!(
        printed.starts_with("seq=")
            && printed.lines().count() == 1
            && printed.ends_with("body=\"two\"\n")
            && !printed.contains("lock-token"),
        "receive text: {printed}"
    );
    check!(stats(stack, "cli")["total"] == 0, "auto-ack left messages");
    check!(
        x(&["receive", "cli"], 0)? == "(no messages)\n",
        "empty receive"
    );
    check!(
        x(&["receive", "cli", "--output", "json"], 0)?.trim() == "[]",
        "empty json"
    );

    // Receive-and-delete, abandon with a delay, schedule and cancel.
    x(&["send", "cli", "gone"], 0)?;
    check!(
        x(&["receive", "cli", "--delete"], 0)?.contains("body=\"gone\""),
        "receive --delete"
    );
    check!(
        stats(stack, "cli")["total"] == 0,
        "--delete kept the message"
    );
    let scheduled = x(&["schedule", "cli", "later", "--at", "1h"], 0)?;
    check!(
        scheduled.contains(" at=") && scheduled.ends_with("Z\n"),
        "schedule: {scheduled}"
    );
    let seq = scheduled
        .split_whitespace()
        .find_map(|w| w.strip_prefix("seq="))
        .unwrap_or_default()
        .to_owned();
    x(
        &["schedule", "cli", "past", "--at", "2000-01-01T00:00:00Z"],
        1,
    )?;
    x(&["schedule", "cli", "nowhen"], 1)?;
    check!(
        x(&["cancel", "cli", &seq], 0)? == format!("ok: action=cancel queue=cli seq={seq}\n"),
        "cancel"
    );
    x(&["cancel", "cli", &seq], 1)?;

    // Metrics, status, subscriptions, filters, purge's guard.
    check!(
        x(&["metrics", "cli"], 0)?
            == "queue=cli active=0 locked=0 deferred=0 scheduled=0 dead=0 total=0 oldest=0ms\n",
        "metrics text"
    );
    let m = json_of(&x(&["metrics", "cli", "--output", "json"], 0)?)?;
    check!(
        m["dead_lettered"] == 0 && m["oldest_message_age_ms"] == 0,
        "metrics json: {m}"
    );
    check!(x(&["status"], 0)?.starts_with("version:"), "status text");
    let s = json_of(&x(&["status", "--output", "json"], 0)?)?;
    check!(
        s["remote"] == true && s["queues"].as_i64().is_some(),
        "status json: {s}"
    );
    check!(
        x(
            &["subscribe", "news", "eu", "--expr", "subject == \"eu\""],
            0
        )? == "ok: action=subscribe subscription=eu topic=news\n",
        "subscribe"
    );
    let subs = json_of(&x(&["list-subscriptions", "--output", "json"], 0)?)?;
    check!(
        subs[0]["topic"] == "news" && subs[0]["expr"] == "subject == \"eu\"",
        "subs: {subs}"
    );
    check!(
        x(
            &[
                "test-filter",
                "subject == \"eu\"",
                "body",
                "--subject",
                "eu"
            ],
            0
        )? == "ok: valid; sample MATCHED\n",
        "test-filter match"
    );
    x(&["test-filter", "subject ="], 1)?;
    check!(
        x(&["send", "news", "hi", "--subject", "us"], 0)? == "ok: queue=news seq=0\n",
        "publish nobody takes"
    );
    x(&["purge-dlq", "cli"], 1)?;
    x(&["purge-dlq", "cli", "--all", "--max", "0"], 1)?;
    x(&["purge-dlq", "cli", "--older-than", "500us"], 1)?;
    check!(
        x(&["purge-dlq", "cli", "--all"], 0)? == "ok: action=purge-dlq purged=0\n",
        "purge-dlq --all"
    );
    x(&["metrics", "missing"], 1)?;
    Ok("every command, both outputs, exit codes 0/1/2".into())
}

/// One JSON-RPC exchange line by line.
struct Mcp {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
}

impl Mcp {
    fn request(&mut self, message: Value) -> Result<Value, String> {
        writeln!(self.stdin, "{message}").map_err(|e| e.to_string())?;
        self.stdin.flush().map_err(|e| e.to_string())?;
        let mut line = String::new();
        self.stdout
            .read_line(&mut line)
            .map_err(|e| e.to_string())?;
        json_of(line.trim())
    }

    fn notify(&mut self, message: Value) -> Result<(), String> {
        writeln!(self.stdin, "{message}").map_err(|e| e.to_string())
    }

    /// tools/call `name`; the tool result's text parsed as JSON, or its error text.
    fn tool(&mut self, id: i64, name: &str, arguments: Value) -> Result<Value, String> {
        let reply = self.request(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}}))?;
        check!(reply["id"] == id, "{name}: id {reply}");
        let text = reply["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default();
        check!(reply["result"]["isError"] == false, "{name}: {reply}");
        json_of(text)
    }
}

fn mcp_stdio_session(tools: &Tools, stack: &Stack) -> Result<String, String> {
    let mut child = Command::new(binary(tools, "mqlite-edge-mcp"))
        .env("MQLITE_ENDPOINT", format!("{}/", stack.base))
        .env("MQLITE_TOKEN", &stack.token)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| e.to_string())?;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err("no pipes".into());
    };
    let mut mcp = Mcp {
        child,
        stdin,
        stdout: BufReader::new(stdout),
    };
    let init = mcp.request(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "e2e", "version": "1"}}}))?;
    check!(
        init["result"]["protocolVersion"] == "2025-06-18"
            && init["result"]["capabilities"]["tools"].is_object()
            && init["result"]["serverInfo"]["name"] == "mqlite-edge-mcp",
        "initialize: {init}"
    );
    // Never answered: the next reply read must be the tools/list one.
    mcp.notify(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
    mcp.notify(json!("not a request"))?;
    let listed = mcp.request(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))?;
    check!(listed["id"] == 2, "a notification was answered: {listed}");
    let tools_listed = listed["result"]["tools"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    check!(tools_listed.len() == 14, "tools/list: {listed}");
    check!(
        tools_listed
            .iter()
            .all(|t| t["inputSchema"]["type"] == "object" && t["description"].is_string()),
        "schemas: {listed}"
    );
    mcp.tool(3, "create_queue", json!({"name": "mcp"}))?;
    let sent = mcp.tool(4, "send", json!({"queue": "mcp", "body": "from an agent"}))?;
    let seq = sent["seq_numbers"][0]
        .as_i64()
        .ok_or(format!("send: {sent}"))?;
    let got = mcp.tool(5, "receive", json!({"queue": "mcp", "wait_time_ms": 1000}))?;
    let message = &got["messages"][0];
    check!(
        message["seq_number"] == seq && message["body"] == b64("from an agent"),
        "receive: {got}"
    );
    let done = mcp.tool(
        6,
        "complete",
        json!({"queue": "mcp", "seq_number": seq, "lock_token": message["lock_token"]}),
    )?;
    check!(done == json!({"ok": true}), "complete: {done}");
    let counts = mcp.tool(7, "stats", json!({"queue": "mcp"}))?;
    check!(counts["total"] == 0, "stats: {counts}");
    // A broker error is a tool result with isError, not a JSON-RPC error.
    let again = mcp.request(json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call",
        "params": {"name": "complete", "arguments":
            {"queue": "mcp", "seq_number": seq, "lock_token": "not-the-token"}}}))?;
    check!(
        again["result"]["isError"] == true
            && again["result"]["content"][0]["text"]
                .as_str()
                .is_some_and(|t| t.starts_with("error: broker 409: ")),
        "complete with a wrong token: {again}"
    );
    let unknown = mcp.request(json!({"jsonrpc": "2.0", "id": 9, "method": "resources/list"}))?;
    check!(
        unknown["error"]["code"] == -32601,
        "unknown method: {unknown}"
    );
    drop(mcp.stdin);
    let status = mcp.child.wait().map_err(|e| e.to_string())?;
    check!(status.success(), "mcp exit at EOF: {status}");
    Ok("initialize, tools/list (14), create_queue, send, receive, complete, stats".into())
}

/// What handlers saw: per seq, every (lock token, delivery count, start, end).
#[derive(Default)]
struct Handled {
    runs: HashMap<i64, Vec<(String, i64, Instant, Instant)>>,
    errors: Vec<String>,
}

fn send_bodies(client: &Client, queue: &str, n: usize, prefix: &str) -> Result<Vec<i64>, String> {
    let messages = (0..n)
        .map(|i| Message {
            message_id: format!("{prefix}{i}"),
            ..Message::with_body(format!("{prefix}{i}"))
        })
        .collect();
    client
        .send(&SendRequest {
            queue: queue.into(),
            messages,
            ..SendRequest::default()
        })
        .map(|r| r.seq_numbers)
        .map_err(|e| e.to_string())
}

/// Runs a consumer on `queue` until `until` says so (checked every 100 ms) or 90 s pass.
fn consume(
    client: &Client,
    queue: &str,
    options: ConsumerOptions,
    work: Duration,
    until: impl Fn(&Handled) -> bool,
) -> Result<Handled, String> {
    let handled = Mutex::new(Handled::default());
    let stop = Stop::new();
    let consumer = Consumer::new(client, queue, options);
    let result = std::thread::scope(|scope| {
        let running = scope.spawn(|| {
            consumer.run(
                &stop,
                |m: &Message| -> HandlerResult {
                    let start = Instant::now();
                    std::thread::sleep(work);
                    let mut h = handled.lock().unwrap_or_else(|p| p.into_inner());
                    h.runs.entry(m.seq_number).or_default().push((
                        m.lock_token.clone(),
                        m.delivery_count,
                        start,
                        Instant::now(),
                    ));
                    Ok(())
                },
                |e: &Error| {
                    let mut h = handled.lock().unwrap_or_else(|p| p.into_inner());
                    h.errors.push(e.to_string());
                },
            )
        });
        let deadline = Instant::now() + Duration::from_secs(90);
        while Instant::now() < deadline
            && !until(&handled.lock().unwrap_or_else(|p| p.into_inner()))
        {
            std::thread::sleep(Duration::from_millis(100));
        }
        stop.stop();
        running.join()
    });
    match result {
        Ok(Ok(())) => Ok(handled.into_inner().unwrap_or_else(|p| p.into_inner())),
        Ok(Err(e)) => Err(format!("the consumer stopped on {e}")),
        Err(_) => Err("the consumer panicked".into()),
    }
}

fn all_handled(seqs: &[i64]) -> impl Fn(&Handled) -> bool + '_ {
    move |h| seqs.iter().all(|s| h.runs.contains_key(s))
}

/// No seq was in two handlers at once.
fn no_overlap(h: &Handled) -> Result<(), String> {
    for (seq, runs) in &h.runs {
        for (i, a) in runs.iter().enumerate() {
            for b in &runs[i + 1..] {
                check!(
                    a.3 <= b.2 || b.3 <= a.2,
                    "seq {seq} was handled twice at once"
                );
            }
        }
    }
    Ok(())
}

fn consumer_replays_a_lost_receive_answer(_: &Tools, stack: &Stack) -> Result<String, String> {
    let direct = Client::new(&stack.base, &stack.token);
    stack.ok(
        "AdminService/CreateQueue",
        json!({"name": "lost", "config": {}}),
    );
    let seqs = send_bodies(&direct, "lost", 4, "lost-")?;
    let proxy = FaultProxy::start(&stack.base)?;
    proxy.fault_next(Fault::CutMidBody, 1);
    let through_proxy = Client::new(&proxy.url, &stack.token);
    let options = ConsumerOptions {
        concurrency: 4,
        wait_time_ms: 1_000,
        ..ConsumerOptions::default()
    };
    let handled = consume(
        &through_proxy,
        "lost",
        options,
        Duration::ZERO,
        all_handled(&seqs),
    )?;
    check!(
        proxy.faulted() == 1,
        "the proxy cut {} answers",
        proxy.faulted()
    );
    for seq in &seqs {
        let runs = handled.runs.get(seq).cloned().unwrap_or_default();
        check!(runs.len() == 1, "seq {seq} handled {} times", runs.len());
        // A replay, not a redelivery after the lease ran out.
        check!(
            runs[0].1 == 1,
            "seq {seq} came with delivery count {}",
            runs[0].1
        );
    }
    check!(stats(stack, "lost")["total"] == 0, "not all completed");
    Ok(format!(
        "4 messages, first answer cut, replayed once; {} errors reported",
        handled.errors.len()
    ))
}

fn consumer_renews_a_slow_handlers_lease(_: &Tools, stack: &Stack) -> Result<String, String> {
    let client = Client::new(&stack.base, &stack.token);
    stack.ok(
        "AdminService/CreateQueue",
        json!({"name": "slow", "config": {"lock_duration_ms": 2000}}),
    );
    let seqs = send_bodies(&client, "slow", 3, "slow-")?;
    let options = ConsumerOptions {
        concurrency: 2,
        prefetch: 5,
        auto_renew: true,
        wait_time_ms: 1_000,
    };
    let handled = consume(
        &client,
        "slow",
        options,
        Duration::from_millis(5_000),
        all_handled(&seqs),
    )?;
    for seq in &seqs {
        let runs = handled.runs.get(seq).cloned().unwrap_or_default();
        check!(
            runs.len() == 1 && runs[0].1 == 1,
            "seq {seq}: {} runs, delivery count {:?}",
            runs.len(),
            runs.first().map(|r| r.1)
        );
    }
    no_overlap(&handled)?;
    check!(stats(stack, "slow")["total"] == 0, "not all completed");
    Ok(
        "3 handlers of 5 s on a 2 s lock, concurrency 2 (prefetch 5 capped): none redelivered"
            .into(),
    )
}

fn consumer_survives_a_database_restart(tools: &Tools, _: &Stack) -> Result<String, String> {
    let mut database = Database::start(tools)?;
    let stack = Stack::start(
        tools,
        StackOptions {
            vars: &[("MQLITE_DB_TIMEOUT_MS", "2000")],
            database_url: Some(database.url.clone()),
        },
    )?;
    stack.ok(
        "AdminService/CreateQueue",
        json!({"name": "restart", "config": {"lock_duration_ms": 4000, "dedup_window_ms": 600000}}),
    );
    let client = Client::new(&stack.base, &stack.token);
    let seqs: Arc<Mutex<HashSet<i64>>> = Arc::default();
    let producer = {
        let (client, seqs) = (client.clone(), seqs.clone());
        std::thread::spawn(move || {
            for batch in 0..30 {
                // A failed send is sent again with the same message ids.
                let deadline = Instant::now() + Duration::from_secs(60);
                while Instant::now() < deadline {
                    if let Ok(s) = send_bodies(&client, "restart", 5, &format!("r{batch}-")) {
                        let mut seqs = seqs.lock().unwrap_or_else(|p| p.into_inner());
                        seqs.extend(s);
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(200));
                }
                std::thread::sleep(Duration::from_millis(150));
            }
        })
    };
    let killer = std::thread::spawn(move || -> Result<Database, String> {
        std::thread::sleep(Duration::from_millis(1_500));
        database.kill();
        std::thread::sleep(Duration::from_millis(2_000));
        database.restart()?;
        Ok(database)
    });
    let options = ConsumerOptions {
        concurrency: 4,
        auto_renew: true,
        wait_time_ms: 1_000,
        ..ConsumerOptions::default()
    };
    let empty = || {
        client
            .stats(&mqlite_edge_client::types::QueueRequest {
                queue: "restart".into(),
            })
            .is_ok_and(|s| s.total == 0)
    };
    // Until everything sent was handled and completed (a settlement lost in the outage
    // is redelivered once its lease runs out, and handled again).
    let handled = consume(
        &client,
        "restart",
        options,
        Duration::from_millis(50),
        |h| {
            let seqs = seqs.lock().unwrap_or_else(|p| p.into_inner());
            producer.is_finished() && seqs.iter().all(|s| h.runs.contains_key(s)) && empty()
        },
    )?;
    let _database = killer.join().map_err(|_| "the killer panicked")??;
    producer.join().map_err(|_| "the producer panicked")?;
    let seqs = seqs.lock().unwrap_or_else(|p| p.into_inner()).clone();
    check!(
        seqs.len() == 150,
        "{} of 150 messages acknowledged",
        seqs.len()
    );
    let lost: Vec<&i64> = seqs
        .iter()
        .filter(|s| !handled.runs.contains_key(s))
        .collect();
    check!(lost.is_empty(), "never handled: {lost:?}");
    no_overlap(&handled)?;
    let twice = handled.runs.values().filter(|r| r.len() > 1).count();
    let left = stats(&stack, "restart");
    check!(left["total"] == 0, "messages left: {left}");
    Ok(format!(
        "150 messages, database down 2 s: all handled, {twice} handled again after a lost \
         settlement (never at once), {} errors reported",
        handled.errors.len()
    ))
}

/// A process group killed (TERM, then KILL) on drop.
struct Group(std::process::Child);

impl Drop for Group {
    fn drop(&mut self) {
        for signal in ["-TERM", "-KILL"] {
            let _ = Command::new("kill")
                .args([signal, "--", &format!("-{}", self.0.id())])
                .stderr(Stdio::null())
                .status();
            std::thread::sleep(Duration::from_millis(500));
        }
        let _ = self.0.wait();
    }
}

/// mqlite-edge's wrangler.toml for a second config beside the caller's: absolute paths, a
/// name of its own (the caller binds it by name), its vars inline, no build step.
fn bound_config(tools: &Tools, name: &str, db_url: &str, token: &str) -> Result<String, String> {
    let root = tools.root.display();
    let original =
        std::fs::read_to_string(tools.root.join("wrangler.toml")).map_err(|e| e.to_string())?;
    check!(
        original.trim_end().lines().any(|l| l == "[vars]"),
        "wrangler.toml has no [vars]"
    );
    let config = original
        .replace("name = \"mqlite-edge\"", &format!("name = \"{name}\""))
        .replace(
            "main = \"build/worker/shim.mjs\"",
            &format!("main = \"{root}/build/worker/shim.mjs\""),
        )
        .replace(
            "directory = \"build/assets\"",
            &format!("directory = \"{root}/build/assets\""),
        )
        .replace("[build]\ncommand = \"bash scripts/build-worker.sh\"\n", "");
    check!(
        !config.contains("[build]") && config.contains(&format!("{root}/build/worker")),
        "config rewrite failed:\n{config}"
    );
    // [vars] is the file's last table.
    Ok(format!(
        "{config}MQLITE_DB = \"{db_url}\"\nMQLITE_TOKENS = \"{token}\"\n"
    ))
}

fn service_binding_in_both_dialects(tools: &Tools, _: &Stack) -> Result<String, String> {
    let database = Database::start(tools)?;
    let port = mqlite_e2e::free_port();
    let dir = std::env::temp_dir().join(format!("mqlite-binding-{}-{port}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let token = "binding-admin-token-0123456789abcdef";
    let bound = format!("mqlite-edge-bound-{port}");
    let write = |file: &str, text: &str| {
        std::fs::write(dir.join(file), text).map_err(|e| format!("{file}: {e}"))
    };
    write(
        "mqlite.toml",
        &bound_config(tools, &bound, &database.url, token)?,
    )?;
    let caller_js = tools.root.join("e2e/fixtures/binding-caller/caller.js");
    write(
        "caller.toml",
        &format!(
            "name = \"binding-caller\"\nmain = \"{}\"\ncompatibility_date = \"2025-09-01\"\n\n\
             [[services]]\nbinding = \"MQLITE\"\nservice = \"{bound}\"\n",
            caller_js.display()
        ),
    )?;
    let log = std::fs::File::create(dir.join("wrangler.log")).map_err(|e| e.to_string())?;
    let log_err = log.try_clone().map_err(|e| e.to_string())?;
    use std::os::unix::process::CommandExt;
    let worker = Group(
        Command::new(&tools.wrangler)
            .current_dir(&dir)
            .env("MQLITE_SKIP_BUILD", "1")
            .env("WRANGLER_SEND_METRICS", "false")
            .env("WRANGLER_SEND_ERROR_REPORTS", "false")
            .env("CLOUDFLARE_CF_FETCH_ENABLED", "false")
            .env("CI", "true")
            .args(["dev", "-c", "caller.toml", "-c", "mqlite.toml", "--local"])
            .args(["--ip", "127.0.0.1", "--port", &port.to_string()])
            .args(["--inspector-port", &mqlite_e2e::free_port().to_string()])
            .args(["--persist-to", &dir.join("state").to_string_lossy()])
            .args(["--show-interactive-dev-session=false"])
            .process_group(0)
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .map_err(|e| format!("cannot start wrangler: {e}"))?,
    );
    let base = format!("http://127.0.0.1:{port}");
    let log_text = || std::fs::read_to_string(dir.join("wrangler.log")).unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut card = None;
    while Instant::now() < deadline && card.is_none() {
        card = ureq::get(&format!("{base}/healthz"))
            .timeout(Duration::from_secs(2))
            .call()
            .ok();
        std::thread::sleep(Duration::from_millis(200));
    }
    let Some(health) = card else {
        return Err(format!(
            "the caller did not answer\n--- wrangler.log ---\n{}",
            log_text()
        ));
    };
    check!(
        health.header("x-through-binding") == Some("binding-caller"),
        "/healthz did not come through the caller"
    );
    let result = (|| -> Result<String, String> {
        // Connect-JSON through the binding, with the Rust client.
        let client = Client::new(&base, token);
        client
            .create_queue(&mqlite_edge_client::types::CreateQueueRequest {
                name: "bound".into(),
                ..Default::default()
            })
            .map_err(|e| format!("CreateQueue through the binding: {e}"))?;
        let seqs = send_bodies(&client, "bound", 2, "b-")?;
        // pgmq through the binding: read what Connect-JSON sent, then send one more.
        let read = ureq::post(&format!("{base}/v1/queues/bound/read"))
            .set("Authorization", &format!("Bearer {token}"))
            .send_string(r#"{"vt":30,"qty":5}"#)
            .map_err(|e| format!("pgmq read through the binding: {e}"))?;
        check!(
            read.header("x-through-binding") == Some("binding-caller"),
            "pgmq answer not marked by the caller"
        );
        let read: Value = read.into_json().map_err(|e| e.to_string())?;
        let ids: Vec<i64> = read["messages"]
            .as_array()
            .map(|a| a.iter().filter_map(|m| m["msg_id"].as_i64()).collect())
            .unwrap_or_default();
        check!(ids == seqs, "pgmq read {read} (sent {seqs:?})");
        ureq::post(&format!("{base}/v1/queues/bound/messages"))
            .set("Authorization", &format!("Bearer {token}"))
            .send_string(r#"{"message":{"via":"pgmq"}}"#)
            .map_err(|e| format!("pgmq send through the binding: {e}"))?;
        let counts = client
            .stats(&mqlite_edge_client::types::QueueRequest {
                queue: "bound".into(),
            })
            .map_err(|e| e.to_string())?;
        check!(
            counts.locked == 2 && counts.active == 1,
            "stats through the binding: {counts:?}"
        );
        Ok("caller Worker → [[services]] binding → mqlite-edge: Connect-JSON and pgmq".into())
    })();
    drop(worker);
    let _ = std::fs::remove_dir_all(&dir);
    result
}
