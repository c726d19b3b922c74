//! A program is the list of statements one RPC runs, encoded as a single
//! Hrana batch: `BEGIN`, the schema check, the statements chained on success,
//! then `COMMIT` (or `ROLLBACK` when anything failed). One batch = one HTTP
//! request = one round trip, whatever the statement count.

use super::hrana::{Batch, BatchStep, Condition, Stmt, Value};
use super::migrate::SCHEMA_VERSION;

/// Handle of a statement inside a [`Program`], used to read its rows back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepId(pub(crate) usize);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    Data,
    Guard,
}

#[derive(Debug)]
pub(crate) struct ProgramStep {
    pub sql: String,
    pub args: Vec<Value>,
    pub role: Role,
}

/// Statements that run in one transaction, in order, each only if every
/// earlier one succeeded.
#[derive(Debug)]
pub struct Program {
    pub(crate) write: bool,
    pub(crate) steps: Vec<ProgramStep>,
    /// A guard that runs before every step (the caller's credential check),
    /// so a request authenticated by the database costs no extra round trip.
    pub(crate) prelude: Option<ProgramStep>,
}

impl Program {
    /// A write transaction (`BEGIN IMMEDIATE`): takes the write lock up
    /// front so a stale read snapshot can never fail the upgrade later.
    pub fn write() -> Self {
        Program {
            write: true,
            steps: Vec::new(),
            prelude: None,
        }
    }

    /// A read-only transaction: one consistent snapshot, no write lock.
    pub fn read() -> Self {
        Program {
            write: false,
            steps: Vec::new(),
            prelude: None,
        }
    }

    /// Whether this program writes (runs under `BEGIN IMMEDIATE`).
    pub fn is_write(&self) -> bool {
        self.write
    }

    /// Adds a statement whose rows the caller will read.
    pub fn step(&mut self, sql: impl Into<String>, args: Vec<Value>) -> StepId {
        self.push(sql.into(), args, Role::Data)
    }

    /// Adds a guard: a statement that fails exactly when the transaction must
    /// abort with a domain answer (see [`guard_sql`]). When it fails the
    /// whole transaction rolls back and the run reports this step.
    pub fn guard(&mut self, violated_when: &str, args: Vec<Value>) -> StepId {
        self.push(guard_sql(violated_when), args, Role::Guard)
    }

    /// Sets the guard that runs before every other statement; when it fires
    /// the run reports [`super::RunError::PreludeRejected`].
    pub fn set_prelude(&mut self, violated_when: &str, args: Vec<Value>) {
        self.prelude = Some(ProgramStep {
            sql: guard_sql(violated_when),
            args,
            role: Role::Guard,
        });
    }

    /// Batch index of the first program statement: after `BEGIN`, the
    /// schema check and the prelude.
    pub(crate) fn first_step(&self) -> usize {
        2 + usize::from(self.prelude.is_some())
    }

    /// Batch index of the prelude, when there is one.
    pub(crate) fn prelude_index(&self) -> Option<usize> {
        self.prelude.as_ref().map(|_| 2)
    }

    fn push(&mut self, sql: String, args: Vec<Value>, role: Role) -> StepId {
        self.steps.push(ProgramStep { sql, args, role });
        StepId(self.steps.len() - 1)
    }

    /// Batch index of the COMMIT step.
    pub(crate) fn commit_index(&self) -> usize {
        self.first_step() + self.steps.len()
    }

    /// Encodes the program as one Hrana batch.
    pub(crate) fn to_batch(&self) -> Batch {
        let begin = if self.write {
            "BEGIN IMMEDIATE"
        } else {
            "BEGIN"
        };
        let mut steps = Vec::with_capacity(self.steps.len() + 4);
        steps.push(plain(begin, None));
        steps.push(plain(&schema_check_sql(), Some(Condition::Ok { step: 0 })));
        for (i, step) in self.prelude.iter().chain(&self.steps).enumerate() {
            steps.push(BatchStep {
                condition: Some(Condition::Ok { step: 2 + i - 1 }),
                stmt: Stmt {
                    sql: step.sql.clone(),
                    args: step.args.clone(),
                    want_rows: step.role == Role::Data,
                },
            });
        }
        let commit = self.commit_index();
        steps.push(plain("COMMIT", Some(Condition::Ok { step: commit - 1 })));
        steps.push(plain(
            "ROLLBACK",
            Some(Condition::Not {
                cond: Box::new(Condition::Ok { step: commit }),
            }),
        ));
        Batch { steps }
    }
}

fn plain(sql: &str, condition: Option<Condition>) -> BatchStep {
    BatchStep {
        condition,
        stmt: Stmt {
            sql: sql.to_owned(),
            args: Vec::new(),
            want_rows: false,
        },
    }
}

/// A statement that raises an SQL error exactly when `violated_when` is true.
///
/// SQLite has no `RAISE` outside triggers, so the guard feeds `json()` a
/// string that is valid JSON (`'0'`) or not (`'abort'`) depending on the
/// condition. The argument depends on the condition itself, so no constant
/// folding can evaluate the failing branch early. The statement only reads,
/// so a guard never takes a write lock of its own.
pub fn guard_sql(violated_when: &str) -> String {
    format!("SELECT json(CASE WHEN {violated_when} THEN 'abort' ELSE '0' END)")
}

/// The first statement of every program: fails unless the database is at
/// exactly the schema version this build was written for.
pub(crate) fn schema_check_sql() -> String {
    format!(
        "SELECT json(CASE WHEN version = {SCHEMA_VERSION} THEN '0' ELSE 'abort' END) \
         FROM schema_version"
    )
}
