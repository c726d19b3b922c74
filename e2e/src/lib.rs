//! End-to-end fixtures: a database server (the project's local libSQL
//! server, or sqld when `MQLITE_E2E_SQLD` names one) plus `wrangler dev`
//! (workerd running the real wasm build) on free ports, driven over HTTP.
//! Every process is started in its own process group and killed on drop.

use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub mod proxy;
pub mod rng;
pub mod wake;
pub mod workerd;

/// sqld's flag that avoids its write deadlock under concurrent writers
/// (docs/sqld-concurrency.md): every sqld the project starts uses it.
pub const SQLD_FLAGS: [&str; 2] = ["--max-concurrent-connections", "1"];

/// Paths handed over by `scripts/test.sh`.
pub struct Tools {
    pub root: PathBuf,
    pub wrangler: PathBuf,
    pub libsql: PathBuf,
    /// When set, stacks start this sqld instead of the local server.
    pub sqld: Option<PathBuf>,
}

impl Tools {
    pub fn from_env() -> Result<Tools, String> {
        let var = |name: &str| {
            std::env::var(name).map(PathBuf::from).map_err(|_| {
                format!("{name} is not set: run the end-to-end tests with `make test`")
            })
        };
        Ok(Tools {
            root: var("MQLITE_E2E_ROOT")?,
            wrangler: var("MQLITE_E2E_WRANGLER")?,
            libsql: var("MQLITE_E2E_LIBSQL")?,
            sqld: std::env::var_os("MQLITE_E2E_SQLD")
                .filter(|p| !p.is_empty())
                .map(PathBuf::from),
        })
    }

    /// Which database server stacks start, for the run's log.
    pub fn database_name(&self) -> String {
        match &self.sqld {
            Some(path) => format!("sqld ({}, {})", path.display(), SQLD_FLAGS.join(" ")),
            None => "the local libSQL server".into(),
        }
    }
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(0)
}

/// A child process in its own process group, killed (group-wide) on drop.
struct Group(Child);

impl Group {
    fn spawn(command: &mut Command) -> Result<Group, String> {
        command
            .process_group(0)
            .spawn()
            .map(Group)
            .map_err(|e| format!("cannot start {command:?}: {e}"))
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        let group = format!("-{}", self.0.id());
        let _ = Command::new("kill")
            .args(["-TERM", "--", &group])
            .stderr(Stdio::null())
            .status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = Command::new("kill")
            .args(["-KILL", "--", &group])
            .stderr(Stdio::null())
            .status();
        let _ = self.0.wait();
    }
}

/// The libSQL server plus the Worker.
pub struct Stack {
    pub base: String,
    pub db_url: String,
    pub token: String,
    /// Whether the database is the local server (which counts round trips).
    local_database: bool,
    dir: PathBuf,
    // Dropped in order: Worker first, then the database.
    worker: Group,
    database: Option<Group>,
}

pub struct StackOptions<'a> {
    /// Extra Worker vars.
    pub vars: &'a [(&'a str, &'a str)],
    /// Point the Worker at this URL instead of starting a database.
    pub database_url: Option<String>,
}

impl Stack {
    pub fn start(tools: &Tools, options: StackOptions) -> Result<Stack, String> {
        let dir =
            std::env::temp_dir().join(format!("mqlite-e2e-{}-{}", std::process::id(), free_port()));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let local_database = tools.sqld.is_none();
        let (libsql, db_url) = match options.database_url {
            Some(url) => (None, url),
            None => {
                let (group, url) = start_database(tools, &dir)?;
                (Some(group), url)
            }
        };
        let token = "e2e-admin-token-0123456789abcdef".to_owned();
        let port = free_port();
        let mut command = Command::new(&tools.wrangler);
        command
            .current_dir(&tools.root)
            .env("MQLITE_SKIP_BUILD", "1")
            .env("WRANGLER_SEND_METRICS", "false")
            .env("WRANGLER_SEND_ERROR_REPORTS", "false")
            .env("CLOUDFLARE_CF_FETCH_ENABLED", "false")
            .env("CI", "true")
            .args([
                "dev",
                "--local",
                "--ip",
                "127.0.0.1",
                "--port",
                &port.to_string(),
            ])
            .args(["--inspector-port", &free_port().to_string()])
            .args(["--persist-to", &dir.join("wrangler").to_string_lossy()])
            .args(["--show-interactive-dev-session=false"])
            // Exposes /__scheduled so tests can fire the cron handler.
            .args(["--test-scheduled"])
            .args(["--var", &format!("MQLITE_DB:{db_url}")])
            .args(["--var", &format!("MQLITE_TOKENS:{token}")]);
        for (k, v) in options.vars {
            command.args(["--var", &format!("{k}:{v}")]);
        }
        let log = std::fs::File::create(dir.join("wrangler.log")).map_err(|e| e.to_string())?;
        let worker = Group::spawn(
            command
                .stdout(log.try_clone().map_err(|e| e.to_string())?)
                .stderr(log),
        )?;
        let base = format!("http://127.0.0.1:{port}");
        wait_ready(&format!("{base}/healthz"), Duration::from_secs(90)).map_err(|e| {
            let log = std::fs::read_to_string(dir.join("wrangler.log")).unwrap_or_default();
            format!("{e}\n--- wrangler.log ---\n{log}")
        })?;
        Ok(Stack {
            base,
            db_url,
            token,
            local_database,
            dir,
            worker,
            database: libsql,
        })
    }

    /// POST `/mqlite.v1.<rpc>` as the admin.
    pub fn rpc(&self, rpc: &str, body: &Value) -> Reply {
        self.raw(
            "POST",
            &format!("/mqlite.v1.{rpc}"),
            Some(&self.token),
            body.to_string().as_bytes(),
        )
    }

    /// An RPC that must answer 200; returns its JSON.
    pub fn ok(&self, rpc: &str, body: Value) -> Value {
        let reply = self.rpc(rpc, &body);
        assert_eq!(reply.status, 200, "{rpc} {body} -> {}", reply.text);
        reply.json()
    }

    pub fn raw(&self, method: &str, path: &str, token: Option<&str>, body: &[u8]) -> Reply {
        reply(self.request(method, path, token).send_bytes(body))
    }

    /// Like [`Stack::raw`], with the body sent chunked: no Content-Length,
    /// so the Worker learns its size only by reading it.
    pub fn raw_chunked(&self, path: &str, token: Option<&str>, body: &[u8]) -> Reply {
        reply(self.request("POST", path, token).send(body))
    }

    fn request(&self, method: &str, path: &str, token: Option<&str>) -> ureq::Request {
        let agent = ureq::AgentBuilder::new()
            .timeout(Duration::from_secs(60))
            .build();
        let request = agent.request(method, &format!("{}{path}", self.base));
        match token {
            Some(token) => request.set("Authorization", &format!("Bearer {token}")),
            None => request,
        }
    }

    /// What `wrangler dev` and the Worker logged so far (a panic would show
    /// here as `panicked at`).
    pub fn worker_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("wrangler.log")).unwrap_or_default()
    }

    /// The process id of `wrangler dev` (its workerd runs as a descendant).
    pub fn worker_pid(&self) -> u32 {
        self.worker.0.id()
    }

    /// The workerd processes running this stack's Worker: `wrangler dev`'s
    /// children in the stack's process group whose command is `workerd`.
    pub fn workerd_pids(&self) -> Vec<u32> {
        let group = self.worker.0.id();
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        entries
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| {
                let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                    return false;
                };
                // `pid (comm) state ppid pgrp …`; comm may hold spaces.
                let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
                    return false;
                };
                let comm = &stat[open + 1..close];
                let pgrp = stat[close + 1..].split_whitespace().nth(2);
                comm.starts_with("workerd") && pgrp == Some(&group.to_string())
            })
            .collect()
    }

    /// Resets the peak resident set of the Worker's workerd processes (see
    /// [`reset_peak_memory`]).
    pub fn reset_workerd_peak(&self) -> Result<(), String> {
        reset_peak_memory(&self.workerd_pids())
    }

    /// Resident memory of the Worker's workerd processes (see [`memory_of`]).
    pub fn workerd_memory(&self) -> Memory {
        memory_of(&self.workerd_pids())
    }

    /// The database server's process id, when this stack started one.
    pub fn database_pid(&self) -> Option<u32> {
        self.database.as_ref().map(|g| g.0.id())
    }

    /// Whether [`Stack::round_trips`] counts anything: only the local
    /// server reports its pipeline requests (sqld has no such counter).
    pub fn counts_round_trips(&self) -> bool {
        self.local_database
    }

    /// Pipeline requests the database has served (our local server only).
    pub fn round_trips(&self) -> u64 {
        ureq::get(&format!("{}/stats", self.db_url))
            .call()
            .ok()
            .and_then(|r| r.into_json::<Value>().ok())
            .and_then(|v| v["pipeline_requests"].as_u64())
            .unwrap_or(0)
    }
}

/// Resets the peak resident set (VmHWM) of `pids` to their current one
/// (`/proc/PID/clear_refs`, value 5), so the next [`memory_of`] reports the
/// peak of what follows.
pub fn reset_peak_memory(pids: &[u32]) -> Result<(), String> {
    if pids.is_empty() {
        return Err("no workerd process found".into());
    }
    for pid in pids {
        std::fs::write(format!("/proc/{pid}/clear_refs"), "5")
            .map_err(|e| format!("cannot reset the peak RSS of workerd {pid}: {e}"))?;
    }
    Ok(())
}

/// Resident memory of `pids`, summed, from `/proc/PID/status`: measured,
/// not estimated.
pub fn memory_of(pids: &[u32]) -> Memory {
    let mut total = Memory::default();
    for pid in pids {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let kib = |field: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(field))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                .unwrap_or(0)
        };
        total.rss_bytes += kib("VmRSS:") * 1024;
        total.peak_bytes += kib("VmHWM:") * 1024;
    }
    total
}

/// A Send to `queue` of distinct 1 MiB bodies, as many as fit in the 32 MiB
/// request cap: the request's JSON and each body's base64, in order.
/// Distinct bytes per body, so a body sliced from the wrong place shows.
pub fn full_send(queue: &str) -> (String, Vec<String>) {
    const MIB: usize = 1 << 20;
    let mut json = format!(r#"{{"queue":"{queue}","messages":["#);
    let mut bodies = vec![];
    for i in 0..32usize {
        let body: Vec<u8> = (0..MIB)
            .map(|j| (j.wrapping_mul(31) ^ i.wrapping_mul(131)) as u8)
            .collect();
        let encoded = b64_bytes(&body);
        let piece = format!(
            r#"{}{{"body":"{encoded}"}}"#,
            if bodies.is_empty() { "" } else { "," }
        );
        if json.len() + piece.len() + 2 > 32 * MIB {
            break;
        }
        json.push_str(&piece);
        bodies.push(encoded);
    }
    json.push_str("]}");
    (json, bodies)
}

/// The status, headers and text of an answer (a transport error is status 0).
fn reply(result: Result<ureq::Response, ureq::Error>) -> Reply {
    let response = match result {
        Ok(r) | Err(ureq::Error::Status(_, r)) => r,
        Err(e) => {
            return Reply {
                status: 0,
                text: e.to_string(),
                headers: vec![],
            }
        }
    };
    let status = response.status();
    let headers = response
        .headers_names()
        .into_iter()
        .filter_map(|n| response.header(&n).map(|v| (n.clone(), v.to_owned())))
        .collect();
    let text = response.into_string().unwrap_or_default();
    Reply {
        status,
        text,
        headers,
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Resident memory of a set of processes, in bytes.
#[derive(Debug, Clone, Copy, Default)]
pub struct Memory {
    /// Current resident set (VmRSS).
    pub rss_bytes: u64,
    /// Peak resident set since start or the last reset (VmHWM).
    pub peak_bytes: u64,
}

#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub text: String,
    pub headers: Vec<(String, String)>,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or(Value::Null)
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// sqld serving a database in `db_path` on `127.0.0.1:port`, with the flags
/// every part of the project starts it with ([`SQLD_FLAGS`]).
pub fn sqld_command(bin: &std::path::Path, db_path: &std::path::Path, port: u16) -> Command {
    let mut command = Command::new(bin);
    command
        .arg("--db-path")
        .arg(db_path)
        .args(["--http-listen-addr", &format!("127.0.0.1:{port}")])
        .arg("--no-welcome")
        .args(SQLD_FLAGS);
    command
}

/// Starts the stack's own database: sqld (with [`SQLD_FLAGS`]) when the run
/// names one, otherwise the local server. Returns it and its URL.
fn start_database(tools: &Tools, dir: &std::path::Path) -> Result<(Group, String), String> {
    let port = free_port();
    let group = spawn_database(tools, dir, port)?;
    let url = format!("http://127.0.0.1:{port}");
    wait_ready(&format!("{url}/health"), Duration::from_secs(60))?;
    Ok((group, url))
}

/// The database server of `tools` on `port`, its data in `dir`.
fn spawn_database(tools: &Tools, dir: &std::path::Path, port: u16) -> Result<Group, String> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("database.log"))
        .map_err(|e| e.to_string())?;
    let mut command = match &tools.sqld {
        Some(sqld) => sqld_command(sqld, &dir.join("sqld"), port),
        None => {
            let mut c = Command::new(&tools.libsql);
            c.args(["--db", &dir.join("e2e.db").to_string_lossy()])
                .args(["--port", &port.to_string()]);
            c
        }
    };
    Group::spawn(command.stdout(Stdio::null()).stderr(log))
}

/// A database server the test controls: killed with SIGKILL and restarted
/// on the same data directory and port.
pub struct Database {
    pub url: String,
    port: u16,
    dir: PathBuf,
    tools: Tools,
    group: Option<Group>,
}

impl Database {
    /// Starts the run's database server (sqld or the local one) in a fresh
    /// directory on a free port.
    pub fn start(tools: &Tools) -> Result<Database, String> {
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("mqlite-e2e-db-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let mut database = Database {
            url: format!("http://127.0.0.1:{port}"),
            port,
            dir,
            tools: Tools {
                root: tools.root.clone(),
                wrangler: tools.wrangler.clone(),
                libsql: tools.libsql.clone(),
                sqld: tools.sqld.clone(),
            },
            group: None,
        };
        database.restart()?;
        Ok(database)
    }

    /// SIGKILLs the server's whole process group and waits for it to die:
    /// no shutdown, no flush beyond what the server already wrote.
    pub fn kill(&mut self) {
        if let Some(mut group) = self.group.take() {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", group.0.id())])
                .stderr(Stdio::null())
                .status();
            let _ = group.0.wait();
        }
    }

    /// Starts the server again on the same data and port, and waits until
    /// it answers.
    pub fn restart(&mut self) -> Result<(), String> {
        self.kill();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let group = spawn_database(&self.tools, &self.dir, self.port)?;
            match wait_ready(&format!("{}/health", self.url), Duration::from_secs(20)) {
                Ok(()) => {
                    self.group = Some(group);
                    return Ok(());
                }
                // The port may still be held for a moment after the kill.
                Err(e) if Instant::now() > deadline => return Err(e),
                Err(_) => drop(group),
            }
        }
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Threads of a process (from `/proc`), e.g. to see sqld's grow.
pub fn thread_count(pid: u32) -> Option<usize> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()
        .map(|d| d.count())
}

fn wait_ready(url: &str, limit: Duration) -> Result<(), String> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        match ureq::get(url).timeout(Duration::from_secs(2)).call() {
            Ok(_) | Err(ureq::Error::Status(..)) => return Ok(()),
            Err(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    }
    Err(format!("{url} did not answer within {limit:?}"))
}

/// Standard padded base64 of UTF-8 text.
pub fn b64(text: &str) -> String {
    b64_bytes(text.as_bytes())
}

/// Standard padded base64 of bytes.
pub fn b64_bytes(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The fenced code block of README.md between `<!-- walkthrough:NAME:start -->`
/// and `<!-- walkthrough:NAME:end -->`, exactly as a reader sees it.
pub fn readme_walkthrough(root: &std::path::Path, name: &str) -> Result<String, String> {
    let readme = std::fs::read_to_string(root.join("README.md")).map_err(|e| e.to_string())?;
    let start_marker = format!("<!-- walkthrough:{name}:start -->");
    let end_marker = format!("<!-- walkthrough:{name}:end -->");
    let start = readme
        .find(&start_marker)
        .ok_or(format!("README.md has no {start_marker}"))?;
    let end = readme[start..]
        .find(&end_marker)
        .ok_or(format!("README.md has no {end_marker}"))?
        + start;
    let section = &readme[start..end];
    let fence = "```bash\n";
    let code_start = section
        .find(fence)
        .ok_or(format!("walkthrough {name}: no ```bash block"))?
        + fence.len();
    let code_end = section[code_start..]
        .find("```")
        .ok_or(format!("walkthrough {name}: unterminated block"))?
        + code_start;
    Ok(section[code_start..code_end].to_owned())
}

/// Runs README walkthrough `name` verbatim with `bash -euo pipefail`, with
/// `MQLITE_URL` and `MQLITE_TOKEN` pointing at `stack` plus `env`; returns
/// its standard output, or the failure with both outputs.
pub fn run_readme_walkthrough(
    root: &std::path::Path,
    name: &str,
    stack: &Stack,
    env: &[(&str, &str)],
) -> Result<String, String> {
    let script = readme_walkthrough(root, name)?;
    let output = Command::new("bash")
        .args(["-euo", "pipefail", "-c", &script])
        .env("MQLITE_URL", &stack.base)
        .env("MQLITE_TOKEN", &stack.token)
        .envs(env.iter().copied())
        .output()
        .map_err(|e| e.to_string())?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    if !output.status.success() {
        return Err(format!(
            "walkthrough {name} failed: {stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(stdout)
}
