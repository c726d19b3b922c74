//! `mqlite-edge-migrate`: applies the embedded migrations to a libSQL/Turso
//! database, exactly as the Worker does on first use (same code, same
//! version check), so a deployment can be migrated before traffic arrives.
//!
//! Usage: `mqlite-edge-migrate --url URL [--token TOKEN]`
//! (or `LIBSQL_URL` / `LIBSQL_AUTH_TOKEN` in the environment).

use std::process::ExitCode;
use std::time::Duration;

use mqlite_edge::store::migrate::{ensure_schema, SCHEMA_VERSION};
use mqlite_edge::store::native::HttpTransport;
use mqlite_edge::store::Store;

fn main() -> ExitCode {
    let mut url = std::env::var("LIBSQL_URL").ok();
    let mut token = std::env::var("LIBSQL_AUTH_TOKEN")
        .ok()
        .filter(|t| !t.is_empty());
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        match (flag.as_str(), args.next()) {
            ("--url", Some(v)) => url = Some(v),
            ("--token", Some(v)) => token = Some(v).filter(|t| !t.is_empty()),
            _ => {
                eprintln!("usage: mqlite-edge-migrate --url URL [--token TOKEN]");
                return ExitCode::from(2);
            }
        }
    }
    let Some(url) = url else {
        eprintln!("mqlite-edge-migrate: no database URL (--url or LIBSQL_URL)");
        return ExitCode::from(2);
    };
    let store = Store::new(HttpTransport::new(&url, token, Duration::from_secs(30)));
    match pollster::block_on(ensure_schema(&store)) {
        Ok(report) if report.from == report.to => {
            println!(
                "schema already at version {} (this build: {SCHEMA_VERSION})",
                report.to
            );
            ExitCode::SUCCESS
        }
        Ok(report) => {
            println!(
                "schema migrated from version {} to {}",
                report.from, report.to
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("mqlite-edge-migrate: {e}");
            ExitCode::FAILURE
        }
    }
}
