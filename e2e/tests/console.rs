//! The admin console in a real browser: starts the stack the way the
//! end-to-end suite does (wrangler dev over the local libSQL server) and
//! runs `scripts/console-browser-test.py`, which drives Debian's headless
//! Chromium through chromedriver and checks every step against the API.
//! Screenshots and the browser's log land in `target/ui-test/`.
//!
//! Needs `MQLITE_E2E_PYTHON` (a Python with Selenium), `MQLITE_E2E_CHROMIUM`
//! and `MQLITE_E2E_CHROMEDRIVER` besides the e2e variables; `make test`
//! installs and sets them. A missing one fails the run.

use std::process::Command;
use std::time::{Duration, Instant};

use mqlite_e2e::{Stack, StackOptions, Tools};

/// The driver's own waits are 15 s each; the whole run takes well under a
/// minute. Past this bound something hangs.
const RUN_LIMIT: Duration = Duration::from_secs(240);

fn main() {
    if let Err(e) = run() {
        eprintln!("console: {e}");
        println!("0 passed, 1 failed");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let tools = Tools::from_env()?;
    let var = |name: &str| {
        std::env::var(name)
            .ok()
            .filter(|v| !v.is_empty())
            .ok_or(format!(
                "{name} is not set: run the console test with `make test`"
            ))
    };
    let (python, chromium, chromedriver) = (
        var("MQLITE_E2E_PYTHON")?,
        var("MQLITE_E2E_CHROMIUM")?,
        var("MQLITE_E2E_CHROMEDRIVER")?,
    );
    let out = tools.root.join("target/ui-test");
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    println!("console: database is {}", tools.database_name());
    let stack = Stack::start(
        &tools,
        StackOptions {
            vars: &[],
            database_url: None,
        },
    )?;
    let mut child = Command::new(python)
        .arg(tools.root.join("scripts/console-browser-test.py"))
        .env("MQLITE_URL", &stack.base)
        .env("MQLITE_TOKEN", &stack.token)
        .env("OUT_DIR", &out)
        .env("CHROMIUM", chromium)
        .env("CHROMEDRIVER", chromedriver)
        // Selenium must use the given driver, never look for one online.
        .env("SE_OFFLINE", "true")
        .spawn()
        .map_err(|e| format!("cannot run the browser driver: {e}"))?;
    let started = Instant::now();
    let status = loop {
        match child.try_wait().map_err(|e| e.to_string())? {
            Some(status) => break status,
            None if started.elapsed() > RUN_LIMIT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("the browser test ran past {RUN_LIMIT:?}"));
            }
            None => std::thread::sleep(Duration::from_millis(200)),
        }
    };
    drop(stack);
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "the browser test failed ({status}); see {}",
            out.display()
        ))
    }
}
