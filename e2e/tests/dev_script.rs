//! `make dev` (scripts/dev.sh) end to end: it prints its URL and admin
//! token, serves an authenticated request, hands its secrets to wrangler
//! through `.dev.vars` (mode 0600) and never on a command line, and on
//! SIGTERM leaves no process behind (wrangler, workerd, the libSQL server).
//! `make serve` (the same script with `MQLITE_SERVE=workerd`) likewise, on
//! two plain workerd processes, with concurrent writes through each one's
//! group commit objects.
//!
//! Needs `MQLITE_E2E_ROOT` (the repository, with the Worker built and the
//! tools installed, as `scripts/test.sh` leaves them).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mqlite_e2e::free_port;

/// Startup includes building what is missing (the native migrate tool on a
/// fresh checkout), so it may take minutes.
const STARTUP: Duration = Duration::from_secs(1200);
const SHUTDOWN: Duration = Duration::from_secs(30);

/// A process, told apart from a later one reusing its pid by start time.
type Proc = (u32, u64);

fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let line = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = line.rsplit_once(") ")?.1;
    Some(rest.split(' ').map(str::to_owned).collect())
}

/// Running (not gone, not a zombie) and still the same process.
fn alive(proc: Proc) -> bool {
    stat_fields(proc.0).is_some_and(|f| {
        f.first().map(String::as_str) != Some("Z")
            && f.get(19).and_then(|s| s.parse().ok()) == Some(proc.1)
    })
}

fn all_pids() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .map(|dir| {
            dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Every process below `root` now, with its start time and name.
fn descendants(root: u32) -> Vec<(Proc, String)> {
    let mut parents = Vec::new();
    for pid in all_pids() {
        if let Some(f) = stat_fields(pid) {
            let ppid = f.get(1).and_then(|s| s.parse::<u32>().ok());
            let start = f.get(19).and_then(|s| s.parse::<u64>().ok());
            if let (Some(ppid), Some(start)) = (ppid, start) {
                parents.push((pid, ppid, start));
            }
        }
    }
    let mut found = Vec::new();
    let mut frontier = vec![root];
    while let Some(parent) = frontier.pop() {
        for &(pid, ppid, start) in &parents {
            if ppid == parent {
                // A process that exits between the two reads has no name
                // left: it keeps the one seen before (a loaded machine
                // widens that window).
                let name = std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .unwrap_or_default()
                    .trim()
                    .to_owned();
                if !name.is_empty() {
                    found.push(((pid, start), name));
                }
                frontier.push(pid);
            }
        }
    }
    found
}

/// Processes whose command line contains `secret`.
fn command_lines_with(secret: &[u8]) -> Vec<String> {
    let mut hits = Vec::new();
    for pid in all_pids() {
        if let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) {
            if cmdline.windows(secret.len()).any(|w| w == secret) {
                hits.push(String::from_utf8_lossy(&cmdline).replace('\0', " "));
            }
        }
    }
    hits
}

/// Sends SIGTERM to one process, by id.
fn terminate(pid: u32) {
    let _ = Command::new("bash")
        .args(["-c", &format!("kill -TERM {pid}")])
        .status();
}

/// Stops dev.sh if the test fails half-way.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            terminate(self.0.id());
            let deadline = Instant::now() + SHUTDOWN;
            while Instant::now() < deadline && matches!(self.0.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

fn secret_token() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let seed = format!("{nanos:032x}{:08x}", std::process::id());
    let hex: String = seed.chars().cycle().take(64).collect();
    format!("mqk_{hex}")
}

#[test]
fn make_dev_keeps_secrets_off_command_lines_and_stops_cleanly() {
    run_script(Runtime::WranglerDev);
}

#[test]
fn make_serve_runs_plain_workerd_processes_and_stops_cleanly() {
    run_script(Runtime::PlainWorkerd {
        processes: 2,
        shards: 1,
    });
}

/// `SQLD_SHARDS=3 make serve`: three local databases behind one endpoint
/// (docs/databases.md).
#[test]
fn make_serve_with_sqld_shards_spreads_queues_over_its_databases() {
    run_script(Runtime::PlainWorkerd {
        processes: 1,
        shards: 3,
    });
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Runtime {
    WranglerDev,
    PlainWorkerd { processes: u16, shards: u16 },
}

fn run_script(runtime: Runtime) {
    let root = PathBuf::from(
        std::env::var("MQLITE_E2E_ROOT").expect("MQLITE_E2E_ROOT must name the repository"),
    );
    let dev_vars = root.join(".dev.vars");
    let dev = runtime == Runtime::WranglerDev;
    assert!(
        !dev || !dev_vars.exists(),
        "{} exists: make dev refuses to overwrite it",
        dev_vars.display()
    );
    let token = secret_token();
    let port = free_port();
    let mut command = Command::new("bash");
    if let Runtime::PlainWorkerd { processes, shards } = runtime {
        command
            .env("MQLITE_SERVE", "workerd")
            .env("SERVE_PROCESSES", processes.to_string())
            .env("SQLD_SHARDS", shards.to_string())
            // A 10 s long poll of one 5 s park between two claims, the
            // rest kept for claims to the deadline: a park on another
            // process's object would end only when it ran out
            // (`wakes_across_processes`).
            .env("MQLITE_POLL_MAX_REQUESTS", "5");
    }
    let child = command
        .arg("scripts/dev.sh")
        .current_dir(&root)
        .env("PORT", port.to_string())
        .env("LIBSQL_PORT", free_port().to_string())
        .env("INSPECTOR_PORT", free_port().to_string())
        .env("MQLITE_TOKENS", &token)
        // The local libSQL server, whatever the suite runs against.
        .env_remove("SQLD_BIN")
        .env_remove("LIBSQL_URL")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("start scripts/dev.sh");
    let mut running = Running(child);
    let script = running.0.id();

    // Watch every process's command line and the process tree throughout.
    let stop = Arc::new(AtomicBool::new(false));
    let leaks = Arc::new(Mutex::new(Vec::<String>::new()));
    let seen = Arc::new(Mutex::new(BTreeMap::<Proc, String>::new()));
    let watcher = {
        let (stop, leaks, seen, secret) = (
            stop.clone(),
            leaks.clone(),
            seen.clone(),
            token.clone().into_bytes(),
        );
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                let hits = command_lines_with(&secret);
                if let Ok(mut leaks) = leaks.lock() {
                    leaks.extend(hits);
                }
                if let Ok(mut seen) = seen.lock() {
                    seen.extend(descendants(script));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };

    // The banner: URL and admin token.
    let stdout = running.0.stdout.take().expect("piped stdout");
    let (lines_tx, lines_rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + STARTUP;
    let (mut url, mut printed_token) = (None, None);
    while printed_token.is_none() {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = lines_rx
            .recv_timeout(left)
            .expect("make dev printed its URL and admin token in time");
        if let Some(v) = line.trim().strip_prefix("URL:") {
            url = Some(v.trim().to_owned());
        }
        if let Some(v) = line.trim().strip_prefix("admin token:") {
            printed_token = Some(v.trim().to_owned());
        }
    }
    let url = url.expect("URL printed before the token");
    assert_eq!(url, format!("http://127.0.0.1:{port}"));
    assert_eq!(printed_token.as_deref(), Some(token.as_str()));

    if dev {
        let mode = std::fs::metadata(&dev_vars)
            .expect(".dev.vars exists while make dev runs")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, ".dev.vars mode {mode:o}");
    }
    if let Runtime::PlainWorkerd { processes, shards } = runtime {
        concurrent_writes_on_every_process(port, processes, &token);
        if shards > 1 {
            let listed = queues_spread_over_databases(port, shards, &token);
            redrive_across_databases(port, &token, &listed);
        }
    }

    let answer = ureq::post(&format!("{url}/mqlite.v1.AdminService/ListQueues"))
        .set("Authorization", &format!("Bearer {token}"))
        .send_string("{}")
        .expect("an authenticated request succeeds");
    assert_eq!(answer.status(), 200);
    let refused = ureq::post(&format!("{url}/mqlite.v1.AdminService/ListQueues"))
        .set(
            "Authorization",
            "Bearer wrong-token-0123456789abcdef-0123456789",
        )
        .send_string("{}");
    assert!(
        matches!(refused, Err(ureq::Error::Status(401, _))),
        "the token is what authenticates"
    );

    if let Ok(mut seen) = seen.lock() {
        seen.extend(descendants(script));
    }
    terminate(script);
    let deadline = Instant::now() + SHUTDOWN;
    let status = loop {
        if let Ok(Some(status)) = running.0.try_wait() {
            break Some(status);
        }
        if Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        status.is_some(),
        "make dev did not stop within {SHUTDOWN:?} of SIGTERM"
    );
    stop.store(true, Ordering::SeqCst);
    let _ = watcher.join();

    let seen = seen.lock().map(|s| s.clone()).unwrap_or_default();
    let expected: &[&str] = if dev {
        &["mqlite-libsql", "workerd"]
    } else {
        &["mqlite-libsql", "workerd", "mqlite-serve"]
    };
    for name in expected {
        assert!(
            seen.values().any(|n| n == *name),
            "{name} was among the processes watched: {seen:?}"
        );
    }
    let survivors: Vec<String> = seen
        .keys()
        .filter(|p| alive(**p))
        .map(|(pid, _)| {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            format!(
                "{pid}: {}",
                String::from_utf8_lossy(&cmd).replace('\0', " ")
            )
        })
        .collect();
    assert!(survivors.is_empty(), "left running: {survivors:#?}");
    let leaks = leaks.lock().map(|l| l.clone()).unwrap_or_default();
    assert!(
        leaks.is_empty(),
        "the admin token on a command line: {leaks:#?}"
    );
    if dev {
        assert!(!dev_vars.exists(), ".dev.vars removed on exit");
    }
}

/// Queues created through one endpoint land in every database, and
/// ListQueues says where each lives.
fn queues_spread_over_databases(port: u16, shards: u16, token: &str) -> serde_json::Value {
    let rpc = |name: &str, body: String| -> serde_json::Value {
        let reply = ureq::post(&format!("http://127.0.0.1:{port}/mqlite.v1.{name}"))
            .set("Authorization", &format!("Bearer {token}"))
            .send_string(&body)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        reply.into_json().expect("a JSON answer")
    };
    // 48 names: all three databases get some but with odds of 1 in 10^8.
    for i in 0..48 {
        let name = format!("spread-{port}-{i}");
        rpc(
            "AdminService/CreateQueue",
            format!(r#"{{"name":"{name}","config":{{}}}}"#),
        );
    }
    let listed = rpc("AdminService/ListQueues", "{}".into());
    let databases: std::collections::BTreeSet<String> = listed["queues"]
        .as_array()
        .expect("queues")
        .iter()
        .filter(|q| q["name"].as_str().is_some_and(|n| n.starts_with("spread-")))
        .map(|q| q["database"].as_str().expect("a database").to_owned())
        .collect();
    let expected: std::collections::BTreeSet<String> = (1..=shards)
        .map(|i| {
            if i == 1 {
                "main".into()
            } else {
                format!("db{i}")
            }
        })
        .collect();
    assert_eq!(databases, expected, "{listed}");
    listed
}

/// Dead letters redriven into a queue of another database arrive once
/// each, bodies intact (docs/databases.md, "Redrive across databases").
fn redrive_across_databases(port: u16, token: &str, listed: &serde_json::Value) {
    let rpc = |name: &str, body: serde_json::Value| -> serde_json::Value {
        let reply = ureq::post(&format!("http://127.0.0.1:{port}/mqlite.v1.{name}"))
            .set("Authorization", &format!("Bearer {token}"))
            .send_string(&body.to_string())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        reply.into_json().expect("a JSON answer")
    };
    // Two fresh queues (a local database outlives a run), placed in two
    // different databases by name (CreateQueue's `database`).
    let databases: std::collections::BTreeSet<&str> = listed["queues"]
        .as_array()
        .expect("queues")
        .iter()
        .filter_map(|q| q["database"].as_str())
        .collect();
    let mut databases = databases.into_iter();
    let (from, to) = (databases.next(), databases.next());
    let run = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let (src, dst) = (format!("redrive-src-{run}"), format!("redrive-dst-{run}"));
    for (name, database) in [(&src, from), (&dst, to)] {
        let database = database.expect("two databases");
        rpc(
            "AdminService/CreateQueue",
            serde_json::json!({"name": name, "config": {}, "database": database}),
        );
    }
    let bodies = ["YQ==", "", "/w=="];
    for body in bodies {
        let message = serde_json::json!({"queue": src, "messages": [{"body": body}]});
        rpc("QueueService/Send", message);
        let got = rpc(
            "QueueService/Receive",
            serde_json::json!({"queue": src, "max_messages": 1}),
        );
        let message = &got["messages"][0];
        rpc(
            "QueueService/Reject",
            serde_json::json!({"queue": src, "seq_number": message["seq_number"],
                               "lock_token": message["lock_token"]}),
        );
    }
    let moved = rpc(
        "AdminService/Redrive",
        serde_json::json!({"queue": src, "target": dst}),
    );
    assert_eq!(moved, serde_json::json!({"moved": 3}));
    let got = rpc(
        "QueueService/Receive",
        serde_json::json!({"queue": dst, "max_messages": 10}),
    );
    let received: Vec<&str> = got["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| m["body"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(received, bodies, "{got}");
    let stats = rpc("QueueService/Stats", serde_json::json!({"queue": src}));
    assert_eq!(stats["dead_lettered"], 0, "{stats}");
}

/// Every process serves, and concurrent Sends through each (its group
/// commit objects) all commit, each with its own seq.
fn concurrent_writes_on_every_process(port: u16, processes: u16, token: &str) {
    let rpc = |port: u16, name: &str, body: &str| {
        ureq::post(&format!("http://127.0.0.1:{port}/mqlite.v1.{name}"))
            .set("Authorization", &format!("Bearer {token}"))
            .send_string(body)
            .map_err(|e| format!("{name} on port {port}: {e}"))
            .and_then(|r| r.into_string().map_err(|e| e.to_string()))
    };
    // `make serve` keeps its data in `data/` across runs: a queue of its own.
    let queue = format!("serve-{port}-{}", std::process::id());
    let create = format!(r#"{{"name":"{queue}","config":{{}}}}"#);
    rpc(port, "AdminService/CreateQueue", &create).expect("CreateQueue");
    let send = format!(r#"{{"queue":"{queue}","messages":[{{"body":"aGk="}}]}}"#);
    let seqs: Vec<String> = std::thread::scope(|scope| {
        let sends: Vec<_> = (0..16u16)
            .map(|i| {
                let port = port + i % processes;
                let (rpc, send) = (&rpc, &send);
                scope.spawn(move || rpc(port, "QueueService/Send", send))
            })
            .collect();
        sends
            .into_iter()
            .map(|s| s.join().expect("a sender").expect("a Send commits"))
            .collect()
    });
    let mut unique = seqs.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 16, "16 distinct seqs: {seqs:?}");
    let stats = rpc(
        port + processes - 1,
        "QueueService/Stats",
        &format!(r#"{{"queue":"{queue}"}}"#),
    )
    .expect("Stats");
    assert!(stats.contains(r#""active":16"#), "{stats}");
    // Every Send went through an object's batch (or, arriving after the
    // others were answered, alone on its object's word that the queue was
    // idle: docs/engine.md#lone-writes), and every batch was counted once,
    // by the process its first member came from.
    let (mut batched, mut members, mut direct, mut lone) = (0, 0, 0, 0);
    for p in 0..processes {
        let observed = rpc(port + p, "AdminService/Observe", "{}").expect("Observe");
        let observed: serde_json::Value = serde_json::from_str(&observed).expect("JSON");
        let group = &observed["storage"]["group_commit"];
        batched += group["batched_writes"].as_u64().expect("batched_writes");
        members += group["batch_members"]["sum"].as_u64().expect("sum");
        direct += group["direct_writes"].as_u64().expect("direct_writes");
        lone += group["lone_writes"].as_u64().expect("lone_writes");
    }
    // The static assets reach the Worker through workerd's disk service.
    for (path, marker) in [("/openapi.json", "\"openapi\""), ("/ui/", "<html")] {
        let page = ureq::get(&format!("http://127.0.0.1:{port}{path}"))
            .call()
            .map_err(|e| e.to_string())
            .and_then(|r| r.into_string().map_err(|e| e.to_string()))
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        assert!(page.contains(marker), "{path}: {page:.200}");
    }
    assert!(
        batched + lone >= 16,
        "{batched} writes in batches, {lone} alone"
    );
    assert!(batched >= 1, "{batched} writes in batches");
    assert_eq!(members, batched, "each batch counted once");
    assert_eq!(direct, 0, "nothing went around the objects");
    if processes > 1 {
        wakes_across_processes(port, processes, &rpc);
    }
}

/// The processes share one object per queue: a Send through the first
/// process wakes a long-poll parked through the last at once, not when its
/// park times out (`PARK_MAX_MS`, 5 s: docs/semantics.md#long-polling), as
/// it would if each process had objects of its own (a budget of five: a
/// claim, a park, its claim, two more claims to the deadline).
fn wakes_across_processes(
    port: u16,
    processes: u16,
    rpc: &(dyn Fn(u16, &str, &str) -> Result<String, String> + Sync),
) {
    let queue = format!("serve-wake-{port}-{}", std::process::id());
    let create = format!(r#"{{"name":"{queue}","config":{{}}}}"#);
    rpc(port, "AdminService/CreateQueue", &create).expect("CreateQueue");
    let receive = format!(r#"{{"queue":"{queue}","max_messages":1,"wait_time_ms":10000}}"#);
    let send = format!(r#"{{"queue":"{queue}","messages":[{{"body":"d2FrZQ=="}}]}}"#);
    let (got, waited) = std::thread::scope(|scope| {
        let waiter = scope.spawn(|| rpc(port + processes - 1, "QueueService/Receive", &receive));
        // Long enough for the Receive to claim nothing and park.
        std::thread::sleep(Duration::from_millis(1500));
        assert!(!waiter.is_finished(), "the Receive waits for a message");
        let sent = Instant::now();
        rpc(port, "QueueService/Send", &send).expect("Send");
        let got = waiter.join().expect("the waiter").expect("Receive");
        (got, sent.elapsed())
    });
    assert!(got.contains(r#""body":"d2FrZQ==""#), "{got}");
    assert!(
        waited < Duration::from_millis(2500),
        "woken {waited:?} after the Send, not at once"
    );
}
