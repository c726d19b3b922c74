//! sqld (the libSQL server behind Turso) for the benchmarks, from `SQLD_BIN`:
//! a fresh database in a temporary folder on a free loopback port, started
//! with the connection cap that keeps it from deadlocking (docs/sqld-concurrency.md),
//! killed on drop.

use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

pub struct Sqld {
    pub child: Child,
    dir: PathBuf,
    pub url: String,
}

impl Sqld {
    /// `Ok(None)` when `SQLD_BIN` is not set.
    pub fn start_from_env() -> Result<Option<Sqld>, String> {
        let Ok(bin) = std::env::var("SQLD_BIN") else {
            return Ok(None);
        };
        static STARTED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let nth = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let port = mqlite_e2e::free_port();
        let dir =
            std::env::temp_dir().join(format!("mqlite-bench-sqld-{}-{nth}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let child = mqlite_e2e::sqld_command(bin.as_ref(), &dir.join("db"), port)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start {bin}: {e}"))?;
        let sqld = Sqld {
            child,
            dir,
            url: format!("http://127.0.0.1:{port}"),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > deadline {
                return Err(format!("sqld did not listen on port {port} within 30 s"));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(Some(sqld))
    }
}

impl Drop for Sqld {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
