//! `mqlite-serve`: the built Worker on plain `workerd` (no wrangler), the
//! production-like runtime behind `make serve` (scripts/dev.sh with
//! `MQLITE_SERVE=workerd`): the `QueueWaker` Durable Object bound as in
//! `wrangler.toml`, `[vars]` from `wrangler.toml`, and every `MQLITE_*`
//! variable of the environment on top (`MQLITE_TOKENS` and `MQLITE_DB` or
//! `MQLITE_DATABASES` required; secrets arrive in the environment, never
//! on a command line).
//! With `--processes N`, N workerd processes serve on ports `--port` …
//! `--port + N - 1`. They share one object per queue, as Workers on many
//! machines do on Cloudflare: the first process hosts the objects and
//! serves them to the others on a Unix socket in its private directory
//! (`mqlite_e2e::workerd::Objects`), so every write of a queue meets the
//! others in one batch and every commit wakes every waiter of its queue.
//! Runs until it is signalled or a process exits.
//!
//! Usage: `mqlite-serve --port 8787 [--processes 1]`, with
//! `MQLITE_SERVE_WORKERD` naming the workerd binary and `MQLITE_E2E_ROOT`
//! the checkout (default: the current directory).

use std::path::PathBuf;
use std::time::Duration;

use mqlite_e2e::workerd::{Objects, Workerd};

/// Variables that configure this launcher, not the Worker.
const OWN: [&str; 4] = [
    "MQLITE_SERVE",
    "MQLITE_SERVE_WORKERD",
    "MQLITE_DB",
    "MQLITE_TOKENS",
];

fn main() {
    let mut port = 8787u16;
    let mut processes = 1u16;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().and_then(|v| v.parse::<u16>().ok());
        match (flag.as_str(), value) {
            ("--port", Some(p)) => port = p,
            ("--processes", Some(n)) if n >= 1 => processes = n,
            _ => fail("usage: mqlite-serve --port P [--processes N]"),
        }
    }
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let workerd = env("MQLITE_SERVE_WORKERD")
        .map(PathBuf::from)
        .unwrap_or_else(|| fail("MQLITE_SERVE_WORKERD (the workerd binary) is not set"));
    let root = env("MQLITE_E2E_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    // Several databases (docs/databases.md) reach the Worker as
    // `MQLITE_DATABASES`, among the variables passed on below.
    let db = match (env("MQLITE_DB"), env("MQLITE_DATABASES")) {
        (Some(db), _) => db,
        (None, Some(_)) => String::new(),
        (None, None) => fail("MQLITE_DB (or MQLITE_DATABASES) is not set"),
    };
    let tokens = env("MQLITE_TOKENS").unwrap_or_else(|| fail("MQLITE_TOKENS is not set"));
    let extra: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| k.starts_with("MQLITE_") && !k.starts_with("MQLITE_E2E"))
        .filter(|(k, _)| !OWN.contains(&k.as_str()))
        .collect();
    let mut served: Vec<Workerd> = Vec::new();
    for i in 0..processes {
        let objects = match (processes, served.first()) {
            (1, _) => Objects::Own,
            (_, None) => Objects::Host,
            (_, Some(host)) => match host.objects_socket() {
                Some(socket) => Objects::Remote(socket.to_owned()),
                None => fail("the first process serves no objects"),
            },
        };
        let at = Some(port + i);
        match Workerd::start_sharing(&workerd, &root, &db, &tokens, &extra, at, objects) {
            Ok(w) => {
                println!("workerd {} serving {} (pid {})", i + 1, w.base, w.pid());
                served.push(w);
            }
            Err(e) => fail(&e),
        }
    }
    loop {
        std::thread::sleep(Duration::from_millis(500));
        for w in served.iter_mut() {
            if w.exited() {
                fail(&format!("workerd {} exited", w.base));
            }
        }
    }
}

fn fail(message: &str) -> ! {
    eprintln!("mqlite-serve: {message}");
    std::process::exit(1);
}
