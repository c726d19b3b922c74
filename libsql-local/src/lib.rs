//! A local libSQL server: Hrana v2/v3 pipelines over HTTP on a SQLite file,
//! built on the `hrana-server` library. Used by `make dev`, the end-to-end
//! tests and (in-process) the engine tests, so all of them speak exactly the
//! protocol a Turso database speaks.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hrana_server::{
    handle_pipeline, ConnectionInfo, HranaBackend, HranaConfig, HranaError, PipelineError,
    PipelineRequest, SessionManager,
};

/// How long a statement waits for another connection's write lock.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

struct FileBackend {
    path: PathBuf,
    token: Option<String>,
}

impl HranaBackend for FileBackend {
    fn authenticate(&self, token: &str) -> Result<String, HranaError> {
        match &self.token {
            Some(expected) if expected != token => Err(HranaError {
                message: "invalid auth token".into(),
                code: "UNAUTHORIZED".into(),
            }),
            _ => Ok("main".into()),
        }
    }

    fn connection(&self, _database_id: &str) -> Result<ConnectionInfo, HranaError> {
        let conn = open(&self.path).map_err(|e| HranaError {
            message: e.to_string(),
            code: "INTERNAL".into(),
        })?;
        Ok(ConnectionInfo {
            conn: Arc::new(Mutex::new(conn)),
            query_timer: None,
        })
    }

    fn is_writable(&self, _database_id: &str) -> bool {
        true
    }
}

fn open(path: &Path) -> rusqlite::Result<rusqlite::Connection> {
    let conn = rusqlite::Connection::open(path)?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    Ok(conn)
}

/// An HTTP-shaped answer.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub body: String,
}

/// One database file served over Hrana.
pub struct Database {
    backend: FileBackend,
    sessions: SessionManager,
    config: HranaConfig,
    pipeline_requests: AtomicU64,
}

impl Database {
    /// Opens (creating if needed) the SQLite file in WAL mode. With a
    /// `token`, every request must carry `Authorization: Bearer <token>`.
    pub fn open(path: impl Into<PathBuf>, token: Option<String>) -> Result<Self, String> {
        let path = path.into();
        open(&path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        let config = HranaConfig {
            // mqlite-edge sends whole RPCs as one batch: allow large ones.
            max_batch_steps: 100_000,
            max_pipeline_requests: 1_000,
            max_sql_length: 4 * 1024 * 1024,
            ..HranaConfig::default()
        };
        Ok(Database {
            backend: FileBackend { path, token },
            sessions: SessionManager::new(&config),
            config,
            pipeline_requests: AtomicU64::new(0),
        })
    }

    /// Pipeline requests served so far (round trips, for tests and benchmarks).
    pub fn pipeline_requests(&self) -> u64 {
        self.pipeline_requests.load(Ordering::SeqCst)
    }

    /// Serves one `POST /v2/pipeline` or `/v3/pipeline` body.
    pub fn pipeline(&self, authorization: Option<&str>, body: &[u8]) -> Reply {
        self.pipeline_requests.fetch_add(1, Ordering::SeqCst);
        let token = authorization
            .and_then(|h| h.strip_prefix("Bearer "))
            .unwrap_or("");
        let request: PipelineRequest = match serde_json::from_slice(body) {
            Ok(r) => r,
            Err(e) => return error(400, &format!("invalid pipeline request: {e}")),
        };
        match handle_pipeline(&self.backend, &self.sessions, &self.config, token, request) {
            Ok(response) => match serde_json::to_string(&response) {
                Ok(body) => Reply { status: 200, body },
                Err(e) => error(500, &e.to_string()),
            },
            Err(PipelineError::Unauthorized(m)) => error(401, &m),
            Err(PipelineError::BadRequest(m)) => error(400, &m),
            Err(PipelineError::ReadOnly(m)) => error(403, &m),
            Err(PipelineError::Internal(m)) => error(500, &m),
        }
    }

    /// `GET /stats`: the round-trip counter.
    pub fn stats(&self) -> Reply {
        Reply {
            status: 200,
            body: serde_json::json!({ "pipeline_requests": self.pipeline_requests() }).to_string(),
        }
    }
}

fn error(status: u16, message: &str) -> Reply {
    Reply {
        status,
        body: serde_json::json!({ "error": message }).to_string(),
    }
}
