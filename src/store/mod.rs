//! The store: runs one [`Program`] as one Hrana pipeline request, retries only
//! what provably did not run, and classifies every other failure.
//!
//! Outcome rules (docs/semantics.md#outcomes):
//! * a request that never left (`NotSent`), a `429`, or a transaction the
//!   server rolled back for contention (`SQLITE_BUSY`) is retried with
//!   back-off; when the attempts run out nothing applied: `Unavailable`;
//! * a read whose answer was lost, garbled or a 5xx is retried;
//! * a write answered by anything that does not prove the commit failed (a
//!   lost or cut answer, a body that does not parse, any 5xx status, a
//!   proxy's 520–524 included) is `OutcomeUnknown`, never retried;
//! * a structured error from the server is a definite non-commit: `Failed`;
//! * a 4xx other than 429 (the database refused us: credentials, a bad
//!   request) is a definite non-commit too, and not worth retrying:
//!   `Refused`;
//! * a guard or the credential prelude "fires" only with the guard's own
//!   error ([`hrana::HranaError::is_guard`]); any other error there is a
//!   failure of the database, never a domain answer;
//! * every fetch a run makes (retries and migrations included) is counted
//!   against [`RunStats::fetch_limit`], so a caller can bound the requests
//!   one API call spends (the platform allows 50 per request);
//! * while the isolate's write breaker is open ([`health`]), a write is not
//!   sent at all: [`StoreError::WritesPaused`].

pub mod fold;
pub mod group;
pub mod health;
pub mod hrana;
pub mod lone;
pub mod migrate;
#[cfg(feature = "native")]
pub mod native;
mod program;
mod rows;
pub mod said;
pub mod statement;
pub mod transport;

pub use health::{Policy, WriteHealth, WriteState};
pub(crate) use program::SCHEMA_CHECK;
pub use program::{Gate, Program, StepId};
pub use rows::{Row, RowError};
pub use statement::Statement;
pub use transport::{Carried, Group, HttpReply, Transport, TransportError};

use std::sync::Arc;

use hrana::{BatchResult, HranaError, PipelineRequest, PipelineResponse, StmtResult};
use hrana::{StreamRequest, StreamResponse, StreamResult};
use program::Role;

/// Attempts per program for failures that provably did not apply.
const MAX_ATTEMPTS: u32 = 5;
/// Back-off unit between attempts (the reference uses 40 ms × attempt).
const BACKOFF_MS: u32 = 40;

/// Why a program did not commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreError {
    /// The database could not be reached (never sent, or no usable answer
    /// after bounded retries); nothing was applied.
    Unavailable(String),
    /// The database refused the request before running it (a 4xx other
    /// than 429: our credentials, a malformed request); nothing applied,
    /// and retrying will not help.
    Refused(String),
    /// A write was sent but its answer was lost: it may or may not have
    /// committed. Callers must reconcile, never blindly retry.
    OutcomeUnknown(String),
    /// The database ran the request and reported an error; nothing committed.
    Failed(String),
    /// The database holds a schema newer than this build: refused, untouched.
    SchemaTooNew { found: i64, supported: i64 },
    /// Recent writes went unanswered, so this write was not sent (nothing
    /// applied); writes are tried again in about `retry_after_ms`.
    WritesPaused { retry_after_ms: i64 },
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::Unavailable(m) => write!(f, "database unavailable: {m}"),
            StoreError::Refused(m) => write!(f, "database refused the request: {m}"),
            StoreError::OutcomeUnknown(m) => write!(f, "commit outcome unknown: {m}"),
            StoreError::Failed(m) => write!(f, "database error: {m}"),
            StoreError::SchemaTooNew { found, supported } => write!(
                f,
                "database schema version {found} is newer than this build supports ({supported}); \
                 refusing to touch it: deploy a newer mqlite-edge"
            ),
            StoreError::WritesPaused { retry_after_ms } => write!(
                f,
                "the database is not accepting writes (recent writes went unanswered); \
                 this write was not sent; retry in {retry_after_ms} ms"
            ),
        }
    }
}

/// The result of running a program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunError {
    /// A guard fired: the transaction rolled back with this domain answer.
    Rejected(StepId),
    /// The program's prelude (the credential check) fired: nothing ran.
    PreludeRejected,
    Store(StoreError),
}

impl From<StoreError> for RunError {
    fn from(e: StoreError) -> Self {
        RunError::Store(e)
    }
}

/// The committed results of a program, read by [`StepId`].
#[derive(Debug)]
pub struct Committed {
    results: Vec<Option<StmtResult>>,
    first: usize,
}

impl Committed {
    /// Rows returned by a statement (empty when it returned none).
    pub fn rows(&self, step: StepId) -> impl Iterator<Item = Row<'_>> {
        self.raw_rows(step).iter().map(|values| Row::new(values))
    }

    /// The first row of a statement, if any.
    pub fn first_row(&self, step: StepId) -> Option<Row<'_>> {
        self.rows(step).next()
    }

    /// The raw values of a statement's rows (inspection and tests).
    pub fn raw_rows(&self, step: StepId) -> &[Vec<hrana::Value>] {
        self.result(step).map_or(&[], |r| r.rows.as_slice())
    }

    /// How many rows a statement itself changed, as the database counted
    /// them: a count without `RETURNING` every row just to count it
    /// (0 when it did not run).
    pub fn affected(&self, step: StepId) -> u64 {
        self.result(step).map_or(0, |r| r.affected_row_count)
    }

    fn result(&self, step: StepId) -> Option<&StmtResult> {
        self.results
            .get(if step == StepId::HEAD {
                program::SCHEMA_CHECK_INDEX
            } else {
                self.first + step.0
            })
            .and_then(Option::as_ref)
    }
}

/// What running a program took beyond its answer, and how many database
/// requests it may make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunStats {
    /// Attempts repeated because the one before provably did not apply
    /// (not sent, busy, a read's answer lost); 0 when the first attempt
    /// decided the outcome.
    pub retries: u32,
    /// Requests sent to the database (every attempt and migration step).
    pub fetches: u32,
    /// Requests this run may send in all; once `fetches` reaches it, the
    /// run stops with what it has (nothing more is sent).
    pub fetch_limit: u32,
    /// How the last grouped write attempt was carried; `None` for reads and
    /// for writes that are never grouped.
    pub carried: Option<Carried>,
}

impl Default for RunStats {
    fn default() -> Self {
        RunStats {
            retries: 0,
            fetches: 0,
            fetch_limit: u32::MAX,
            carried: None,
        }
    }
}

impl RunStats {
    /// Fresh statistics for a run that may send at most `limit` requests.
    pub fn limited_to(limit: u32) -> Self {
        RunStats {
            fetch_limit: limit,
            ..RunStats::default()
        }
    }
}

/// How one attempt ended.
enum Attempt {
    Done(Result<Committed, RunError>),
    /// A guard fired; the results of the statements before it are kept.
    Rejected(StepId, Committed),
    Retry(StoreError),
    SchemaBehind,
}

/// A libSQL database reached over Hrana pipelines.
pub struct Store<T> {
    /// Shared with the stores made by [`Store::sharing`]: one type for every
    /// store of an isolate, so the engine is compiled once (a store over
    /// `&T` beside one over `T` doubled the Worker's wasm).
    transport: Arc<T>,
    /// The isolate's write breaker; `None` sends every write.
    health: Option<Arc<WriteHealth>>,
}

impl<T: Transport> Store<T> {
    pub fn new(transport: T) -> Self {
        Store {
            transport: Arc::new(transport),
            health: None,
        }
    }

    /// Another store over the same transport, without a write breaker.
    pub fn sharing(&self) -> Self {
        Store {
            transport: self.transport.clone(),
            health: None,
        }
    }

    /// Gates writes on the isolate-wide breaker `health`.
    pub fn with_write_health(mut self, health: Arc<WriteHealth>) -> Self {
        self.health = Some(health);
        self
    }

    /// The breaker this store reports to, if any.
    pub fn write_health(&self) -> Option<&Arc<WriteHealth>> {
        self.health.as_ref()
    }

    pub fn transport(&self) -> &T {
        &self.transport
    }

    /// Runs a program as one pipeline request. Applies pending migrations
    /// first if the database is behind (only then is there more than one
    /// round trip), and retries only what provably did not apply.
    pub async fn run(&self, program: &Program<'_>) -> Result<Committed, RunError> {
        self.run_keeping(program, &mut RunStats::default())
            .await
            .map_err(|(e, _)| e)
    }

    /// Like [`Store::run`], but a fired guard also hands back the rows of
    /// the statements that ran before it (they were read inside the
    /// transaction, then rolled back with it). `stats` learns the retries
    /// made, whatever the outcome.
    pub async fn run_keeping(
        &self,
        program: &Program<'_>,
        stats: &mut RunStats,
    ) -> Result<Committed, (RunError, Option<Committed>)> {
        let body = encode(program);
        let mut migrated = false;
        let mut last = StoreError::Unavailable("no attempt made".into());
        for attempt in 1..=MAX_ATTEMPTS {
            match self.attempt(program, &body, stats).await {
                Attempt::Done(result) => return result.map_err(|e| (e, None)),
                Attempt::Rejected(step, partial) => {
                    return Err((RunError::Rejected(step), Some(partial)))
                }
                Attempt::Retry(error) => last = error,
                Attempt::SchemaBehind if !migrated => {
                    migrate::ensure_schema_within(self, stats)
                        .await
                        .map_err(|e| (e.into(), None))?;
                    migrated = true;
                    continue;
                }
                Attempt::SchemaBehind => {
                    return Err((
                        StoreError::Failed("schema check still failing after migration".into())
                            .into(),
                        None,
                    ))
                }
            }
            if attempt < MAX_ATTEMPTS && stats.fetches < stats.fetch_limit {
                self.transport.pause(BACKOFF_MS * attempt).await;
                stats.retries += 1;
            } else {
                break;
            }
        }
        Err((last.into(), None))
    }

    /// Sends a raw pipeline body, with the same transport classification
    /// as [`Store::run`] but no schema check (used by migrations).
    pub(crate) async fn send_raw(
        &self,
        body: &str,
        write: bool,
        stats: &mut RunStats,
    ) -> Result<BatchResult, StoreError> {
        let mut last = StoreError::Unavailable("no attempt made".into());
        for attempt in 1..=MAX_ATTEMPTS {
            match self.exchange(body, write, None, stats).await {
                Ok(result) => return Ok(result),
                Err(Retryable::Yes(e)) => last = e,
                Err(Retryable::No(e)) => return Err(e),
            }
            if attempt < MAX_ATTEMPTS && stats.fetches < stats.fetch_limit {
                self.transport.pause(BACKOFF_MS * attempt).await;
                stats.retries += 1;
            } else {
                break;
            }
        }
        Err(last)
    }

    async fn attempt(&self, program: &Program<'_>, body: &str, stats: &mut RunStats) -> Attempt {
        let group = program.group().filter(|_| program.write);
        let result = match self.exchange(body, program.write, group, stats).await {
            Ok(result) => result,
            Err(Retryable::Yes(e)) => return Attempt::Retry(e),
            Err(Retryable::No(e)) => return Attempt::Done(Err(e.into())),
        };
        classify(program, result)
    }

    /// One HTTP exchange, parsed down to the batch result. A write first
    /// asks the breaker, and tells it whether the database answered. A run
    /// whose fetch budget is spent sends nothing: `Unavailable`. A write
    /// with a `group` may go out in one batch with that queue's other
    /// writes in flight (the transport decides).
    async fn exchange(
        &self,
        body: &str,
        write: bool,
        group: Option<Group<'_>>,
        stats: &mut RunStats,
    ) -> Result<BatchResult, Retryable> {
        if stats.fetches >= stats.fetch_limit {
            return Err(Retryable::No(StoreError::Unavailable(
                "this request's database request budget is spent".into(),
            )));
        }
        let permit = match self
            .health
            .as_deref()
            .filter(|_| write)
            .map(WriteHealth::admit)
        {
            Some(Err(retry_after_ms)) => {
                return Err(Retryable::No(StoreError::WritesPaused { retry_after_ms }))
            }
            Some(Ok(permit)) => Some(permit),
            None => None,
        };
        stats.fetches += 1;
        let sent = match group {
            Some(group) => {
                let (sent, carried) = self.transport.send_grouped(group, body).await;
                stats.carried = Some(carried);
                sent
            }
            None => self.transport.send_pipeline(body).await,
        };
        if let Some(permit) = permit {
            match &sent {
                Err(TransportError::AnswerLost(_)) => permit.no_progress(),
                Ok(reply) if reply.status == 429 || reply.status >= 500 => permit.no_progress(),
                Ok(_) => permit.succeeded(),
                // Never reached the database: no verdict either way.
                Err(TransportError::NotSent(_)) => drop(permit),
            }
        }
        let reply = match sent {
            Ok(reply) => reply,
            Err(TransportError::NotSent(m)) => {
                return Err(Retryable::Yes(StoreError::Unavailable(m)))
            }
            Err(TransportError::AnswerLost(m)) if write => {
                return Err(Retryable::No(StoreError::OutcomeUnknown(m)))
            }
            Err(TransportError::AnswerLost(m)) => {
                return Err(Retryable::Yes(StoreError::Unavailable(m)))
            }
        };
        if reply.status != 200 {
            return Err(classify_status(reply, write));
        }
        let parsed: PipelineResponse = match serde_json::from_slice(&reply.body) {
            Ok(p) => p,
            Err(e) if write => {
                return Err(Retryable::No(StoreError::OutcomeUnknown(format!(
                    "unreadable pipeline answer: {e}"
                ))))
            }
            Err(e) => {
                return Err(Retryable::Yes(StoreError::Unavailable(format!(
                    "unreadable pipeline answer: {e}"
                ))))
            }
        };
        match parsed.results.into_iter().next() {
            Some(StreamResult::Ok {
                response: StreamResponse::Batch { result },
            }) => Ok(result),
            Some(StreamResult::Error { error }) => {
                Err(Retryable::No(StoreError::Failed(error.message)))
            }
            // Parsed, but it says nothing about the batch: not a proof.
            _ => Err(unproven(write, "pipeline answer without a batch result")),
        }
    }
}

/// An answer that proves nothing about the commit: a write's outcome is
/// unknown; a read is simply tried again.
fn unproven(write: bool, detail: &str) -> Retryable {
    if write {
        Retryable::No(StoreError::OutcomeUnknown(detail.to_owned()))
    } else {
        Retryable::Yes(StoreError::Unavailable(detail.to_owned()))
    }
}

enum Retryable {
    Yes(StoreError),
    No(StoreError),
}

/// The pipeline endpoint of a database URL: `libsql://` means HTTPS; a
/// trailing slash is tolerated.
pub fn pipeline_url(database_url: &str) -> String {
    let url = database_url.trim().trim_end_matches('/');
    let url = match url.strip_prefix("libsql://") {
        Some(rest) => format!("https://{rest}"),
        None => url.to_owned(),
    };
    format!("{url}/v2/pipeline")
}

fn encode(program: &Program) -> String {
    let request = PipelineRequest {
        baton: None,
        requests: vec![
            StreamRequest::Batch {
                batch: program.to_batch(),
            },
            StreamRequest::Close,
        ],
    };
    // Sized up front: see `Program::encoded_len_hint`.
    let mut out = Vec::with_capacity(program.encoded_len_hint());
    // Serializing plain data into memory cannot fail, and serde_json writes
    // UTF-8; an empty body would be rejected by the server as a definite
    // non-commit.
    match serde_json::to_writer(&mut out, &request) {
        Ok(()) => String::from_utf8(out).unwrap_or_default(),
        Err(_) => String::new(),
    }
}

/// A non-200 answer. Only a 4xx proves the request was refused before it
/// ran: 429 (the server is out of connections) is retried, any other 4xx
/// (bad credentials, a malformed request) is reported at once. Every
/// other status (a 500 from the server, a gateway's 502–504, a proxy's
/// 520–524, anything unexpected) may have followed a commit: a write's
/// outcome is unknown, a read is retried.
fn classify_status(reply: HttpReply, write: bool) -> Retryable {
    let text = String::from_utf8_lossy(&reply.body);
    let detail = format!(
        "HTTP {}: {}",
        reply.status,
        text.chars().take(200).collect::<String>()
    );
    match reply.status {
        429 => Retryable::Yes(StoreError::Unavailable(detail)),
        400..=499 => Retryable::No(StoreError::Refused(detail)),
        _ => unproven(write, &detail),
    }
}

fn classify(program: &Program, result: BatchResult) -> Attempt {
    let BatchResult {
        step_results,
        step_errors,
    } = result;
    let commit = program.commit_index();
    let first = program.first_step();
    if step_results.get(commit).is_some_and(Option::is_some) {
        return Attempt::Done(Ok(Committed {
            results: step_results,
            first,
        }));
    }
    // A gate that failed with its own marker is an answer (nothing to do),
    // never the failure; any other error there is the database failing.
    let Some((index, error)) = step_errors
        .iter()
        .enumerate()
        .filter_map(|(i, e)| e.as_ref().map(|e| (i, e)))
        .find(|(i, e)| !(program.is_gate(*i) && e.is_guard()))
    else {
        // No commit and no error: the answer contradicts itself.
        let detail = "the answer shows neither a commit nor an error";
        return Attempt::Done(Err(if program.write {
            StoreError::OutcomeUnknown(detail.into()).into()
        } else {
            StoreError::Failed(detail.into()).into()
        }));
    };
    if error.is_busy() {
        return Attempt::Retry(StoreError::Unavailable(error.message.clone()));
    }
    if index == program::SCHEMA_CHECK_INDEX && (error.is_guard() || error.is_missing_table()) {
        return Attempt::SchemaBehind;
    }
    if !error.is_guard() {
        // Whatever step failed, the transaction rolled back: a definite
        // non-commit, but a fault of the database, not a domain answer.
        return Attempt::Done(Err(failed(error).into()));
    }
    if Some(index) == program.prelude_index() {
        return Attempt::Done(Err(RunError::PreludeRejected));
    }
    match index
        .checked_sub(first)
        .and_then(|i| program.steps.get(i).map(|s| (i, s)))
    {
        Some((i, step)) if step.role == Role::Guard => Attempt::Rejected(
            StepId(i),
            Committed {
                results: step_results,
                first,
            },
        ),
        _ => Attempt::Done(Err(failed(error).into())),
    }
}

fn failed(error: &HranaError) -> StoreError {
    StoreError::Failed(error.message.clone())
}

#[cfg(test)]
mod tests {
    use super::{encode, hrana, pipeline_url, Program, Statement};

    /// `Program::encoded_len_hint` bounds the pipeline's encoding from above
    /// (its buffer never grows), and not by much: the buffer is allocated
    /// up front, in an isolate of 128 MB. Texts that escape to twice their
    /// length, plain texts, base64 values, blob pieces and integers.
    #[test]
    fn the_encoding_fits_its_length_hint_with_little_to_spare() {
        const STEP: Statement = crate::statement!("INSERT INTO t VALUES (?1, ?2, ?3)");
        // SQL whose quotes JSON escapes: each `"` becomes two characters.
        const QUOTED: Statement = crate::statement!(
            "SELECT \"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\""
        );
        let escaping = "\"\\\n".repeat(100_000);
        let plain = "x".repeat(300_000);
        let base64 = "QUJD".repeat(75_000);
        let piece = vec![7u8; 150_000];
        let text = |value: &str| hrana::Value::Text {
            value: value.into(),
        };
        type Case<'a> = (Vec<hrana::Value>, Vec<Vec<&'a [u8]>>);
        let cases: Vec<Case> = vec![
            (vec![text(&escaping)], vec![]),
            (vec![text(&plain), 7.into()], vec![]),
            (vec![hrana::Value::Blob { base64 }], vec![]),
            (vec![], vec![vec![&piece, &piece]]),
            ((0..1_000).map(hrana::Value::from).collect(), vec![]),
        ];
        let mut programs: Vec<Program> = cases
            .into_iter()
            .map(|(args, blobs)| {
                let mut program = Program::write();
                program.step_with_blobs(&STEP, args, blobs);
                program
            })
            .collect();
        let mut tiny = Program::read();
        tiny.step(&STEP, vec![]);
        programs.push(tiny);
        let mut many = Program::write();
        for _ in 0..200 {
            many.step(&QUOTED, vec![]);
        }
        programs.push(many);
        for (i, program) in programs.iter().enumerate() {
            let (encoded, hint) = (encode(program).len(), program.encoded_len_hint());
            assert!(encoded <= hint, "case {i}: {encoded} > {hint}");
            assert!(hint <= 2 * encoded + 4096, "case {i}: {hint} for {encoded}");
        }
    }

    /// `LIBSQL_URL` as Turso prints it (`libsql://`), as sqld serves it
    /// locally, and with the slash or spaces a pasted value carries.
    #[test]
    fn pipeline_urls_of_database_urls() {
        assert_eq!(
            pipeline_url("libsql://queues-acme.turso.io"),
            "https://queues-acme.turso.io/v2/pipeline"
        );
        assert_eq!(
            pipeline_url(" http://127.0.0.1:8080/ "),
            "http://127.0.0.1:8080/v2/pipeline"
        );
        assert_eq!(
            pipeline_url("https://db.example/"),
            "https://db.example/v2/pipeline"
        );
    }
}
