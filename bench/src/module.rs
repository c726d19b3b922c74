//! `mqlite-module`: what every cold start of the Worker pays for its module
//! (docs/bench.md, "Module size"). Prints the size of `build/index_bg.wasm`
//! raw and gzipped (`gzip -9`, as an upload is measured), the time V8 takes
//! to compile it (`new WebAssembly.Module` in a fresh Node process, the
//! median of five), and the time from starting a fresh plain `workerd`
//! process to its first answer (`/healthz`: the process, the module's
//! compilation and instantiation, one request; median of five) beside the
//! steady-state latency of the same request.
//!
//! Usage: `mqlite-module`, with `MQLITE_BENCH_WORKERD` naming the workerd
//! binary, `MQLITE_E2E_ROOT` the checkout (default: the current directory)
//! and `node` on PATH (`MQLITE_BENCH_NODE` overrides).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mqlite_e2e::workerd::Workerd;

/// Fresh processes per measurement.
const RUNS: usize = 5;
/// Requests for the steady-state latency.
const WARM_REQUESTS: usize = 50;

fn main() {
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let root = env("MQLITE_E2E_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    let module = root.join("build/index_bg.wasm");
    let bytes = std::fs::read(&module).unwrap_or_else(|e| {
        fail(&format!(
            "{}: {e} (build the Worker first)",
            module.display()
        ))
    });
    let gzipped = gzip_size(&bytes);
    println!(
        "module: {} bytes, {} gzipped (gzip -9); budget 650,000 gzipped (scripts/test.sh)",
        bytes.len(),
        gzipped
    );
    let node = env("MQLITE_BENCH_NODE").unwrap_or_else(|| "node".into());
    let compiles: Vec<f64> = (0..RUNS).map(|_| compile_ms(&node, &module)).collect();
    println!(
        "compile (V8, new WebAssembly.Module, fresh process): median {:.1} ms of {RUNS} ({})",
        median(&compiles),
        listed(&compiles)
    );
    let workerd = env("MQLITE_BENCH_WORKERD")
        .map(PathBuf::from)
        .unwrap_or_else(|| fail("MQLITE_BENCH_WORKERD (the workerd binary) is not set"));
    // /healthz needs no database: nothing listens where this one points.
    let db = "http://127.0.0.1:9";
    let token = "coldstart-token-0123456789abcdef";
    let mut cold = Vec::new();
    let mut warm = Vec::new();
    for _ in 0..RUNS {
        let started = Instant::now();
        let served =
            Workerd::start_with(&workerd, &root, db, token, &[], None).unwrap_or_else(|e| fail(&e));
        cold.push(ms(started.elapsed()));
        let url = format!("{}/healthz", served.base);
        for _ in 0..WARM_REQUESTS {
            let t = Instant::now();
            if let Err(e) = ureq::get(&url).call() {
                fail(&format!("{url}: {e}"));
            }
            warm.push(ms(t.elapsed()));
        }
    }
    println!(
        "fresh workerd to its first answer: median {:.1} ms of {RUNS} ({}); a warm /healthz: median {:.2} ms",
        median(&cold),
        listed(&cold),
        median(&warm)
    );
}

fn gzip_size(bytes: &[u8]) -> usize {
    let mut child = Command::new("gzip")
        .arg("-9c")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| fail(&format!("gzip: {e}")));
    let mut stdin = child.stdin.take().unwrap_or_else(|| fail("gzip: no stdin"));
    let input = bytes.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let output = child
        .wait_with_output()
        .unwrap_or_else(|e| fail(&format!("gzip: {e}")));
    if !matches!(writer.join(), Ok(Ok(()))) || !output.status.success() {
        fail("gzip failed");
    }
    output.stdout.len()
}

/// One compilation of the module in a fresh Node process, in milliseconds.
fn compile_ms(node: &str, module: &Path) -> f64 {
    let script = "const b = require('fs').readFileSync(process.argv[1]); \
        const t = performance.now(); new WebAssembly.Module(b); \
        console.log(performance.now() - t);";
    let output = Command::new(node)
        .args(["-e", script])
        .arg(module)
        .output()
        .unwrap_or_else(|e| fail(&format!("{node}: {e}")));
    String::from_utf8_lossy(&output.stdout)
        .trim()
        .parse()
        .unwrap_or_else(|_| {
            fail(&format!(
                "{node}: {}",
                String::from_utf8_lossy(&output.stderr)
            ))
        })
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN)
}

fn listed(values: &[f64]) -> String {
    values
        .iter()
        .map(|v| format!("{v:.1}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn fail(message: &str) -> ! {
    eprintln!("mqlite-module: {message}");
    std::process::exit(1);
}
