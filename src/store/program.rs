//! A program is the list of statements one RPC runs, encoded as a single
//! Hrana batch: `BEGIN`, the schema check, the statements chained on success,
//! then `COMMIT` (or `ROLLBACK` when anything failed). One batch = one HTTP
//! request = one round trip, whatever the statement count.

use super::hrana::{Args, Batch, BatchStep, Condition, Stmt, Value};
use super::migrate::SCHEMA_VERSION;
use super::Statement;

/// Handle of a statement inside a [`Program`], used to read its rows back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepId(pub(crate) usize);

impl StepId {
    /// The program's head (see [`Program::head`]).
    pub(crate) const HEAD: StepId = StepId(usize::MAX);
}

/// Batch index of the schema check, or of the head that carries it.
pub(crate) const SCHEMA_CHECK_INDEX: usize = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    Data,
    Guard,
    /// Fails exactly when the steps it gates are not needed (see
    /// [`Program::gate`]); its failure skips them and aborts nothing.
    Gate,
}

/// Handle of a gate inside a [`Program`] (see [`Program::gate`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gate(usize);

#[derive(Debug)]
pub(crate) struct ProgramStep<'a> {
    pub statement: &'static Statement,
    pub args: Vec<Value>,
    /// Blobs bound right after `args`, each made of borrowed pieces (see
    /// [`Program::step_with_blobs`]).
    pub blobs: Vec<Vec<&'a [u8]>>,
    pub role: Role,
    /// The gate (an index into the program's steps) this step runs behind.
    pub gated_by: Option<usize>,
}

/// Statements that run in one transaction, in order, each only if every
/// earlier one succeeded. `'a` is the lifetime of the bytes a step borrows
/// as a blob.
#[derive(Debug)]
pub struct Program<'a> {
    pub(crate) write: bool,
    pub(crate) steps: Vec<ProgramStep<'a>>,
    /// A guard that runs before every step (the caller's credential check),
    /// so a request authenticated by the database costs no extra round trip.
    pub(crate) prelude: Option<ProgramStep<'a>>,
    /// The value bound to every statement's clock parameter: `None` lets
    /// the database clock decide (production), a manual clock sets it.
    pub(crate) now: Option<i64>,
    /// A read that also performs the schema check (see [`Program::head`]).
    pub(crate) head: Option<ProgramStep<'a>>,
    /// The queue whose concurrent writes this one may share a transaction
    /// with (group commit, `store::group`); `None` always goes alone.
    pub(crate) group: Option<String>,
    /// Its commit can make messages claimable on the group's queue.
    pub(crate) wakes: bool,
}

impl<'a> Program<'a> {
    /// A write transaction (`BEGIN IMMEDIATE`): takes the write lock up
    /// front so a stale read snapshot can never fail the upgrade later.
    pub fn write() -> Self {
        Program {
            write: true,
            steps: Vec::new(),
            prelude: None,
            now: None,
            head: None,
            group: None,
            wakes: false,
        }
    }

    /// A write transaction on `queue` that may run in one batch with the
    /// other writes on that queue in flight at the same time (group commit,
    /// docs/engine.md#group-commit): it answers exactly as it would alone.
    pub fn write_on(queue: &str) -> Self {
        Program {
            group: Some(queue.to_owned()),
            ..Program::write()
        }
    }

    /// Marks a grouped write whose commit can make messages claimable on
    /// its queue (a Send, an Abandon), so the queue's wake object can wake
    /// its waiters itself (docs/semantics.md#long-polling).
    pub fn waking(self, wakes: bool) -> Self {
        Program { wakes, ..self }
    }

    /// What this write may be grouped on.
    pub fn group(&self) -> Option<super::Group<'_>> {
        self.group.as_deref().map(|queue| super::Group {
            queue,
            wakes: self.wakes,
        })
    }

    /// A read-only transaction: one consistent snapshot, no write lock.
    pub fn read() -> Self {
        Program {
            write: false,
            ..Program::write()
        }
    }

    /// Whether this program writes (runs under `BEGIN IMMEDIATE`).
    pub fn is_write(&self) -> bool {
        self.write
    }

    /// Binds every clock parameter to `now` (a manual clock) instead of
    /// NULL (the database clock).
    pub fn set_now(&mut self, now: Option<i64>) {
        self.now = now;
    }

    /// Replaces the schema check that opens every program with `statement`,
    /// a read whose first column performs the same check (build it with
    /// [`crate::schema_checked!`]): a lookup the program needs anyway
    /// (does the queue exist, is there an earlier answer to replay) then
    /// costs no statement of its own.
    pub fn head(&mut self, statement: &'static Statement, args: Vec<Value>) -> StepId {
        self.head = Some(ProgramStep {
            statement,
            args,
            blobs: Vec::new(),
            role: Role::Data,
            gated_by: None,
        });
        StepId::HEAD
    }

    /// Adds a statement whose rows the caller will read.
    pub fn step(&mut self, statement: &'static Statement, args: Vec<Value>) -> StepId {
        self.push(statement, args, Vec::new(), Role::Data)
    }

    /// Adds a statement whose rows the caller will read, binding each of
    /// `blobs` (its pieces concatenated) as one blob parameter, in order,
    /// right after `args`. The pieces are borrowed and written as base64
    /// straight into the pipeline, so a request's bodies are never copied
    /// into a blob of their own.
    pub fn step_with_blobs(
        &mut self,
        statement: &'static Statement,
        args: Vec<Value>,
        blobs: Vec<Vec<&'a [u8]>>,
    ) -> StepId {
        self.push(statement, args, blobs, Role::Data)
    }

    /// Adds a guard (see [`crate::guard!`]): a statement that fails exactly
    /// when the transaction must abort with a domain answer. When it fails
    /// the whole transaction rolls back and the run reports this step.
    pub fn guard(&mut self, statement: &'static Statement, args: Vec<Value>) -> StepId {
        self.push(statement, args, Vec::new(), Role::Guard)
    }

    /// Adds a gate: a statement shaped like a guard (see
    /// [`crate::guard!`]) that fails exactly when the steps added behind it
    /// with [`Program::gated`] have nothing to do. A failed gate skips them
    /// on the server, without a round trip, and the rest of the program
    /// runs and commits as if they had done nothing: lazy housekeeping then
    /// costs one small read instead of its writes' seeks when nothing is due.
    pub fn gate(&mut self, statement: &'static Statement, args: Vec<Value>) -> Gate {
        Gate(self.push(statement, args, Vec::new(), Role::Gate).0)
    }

    /// Adds a statement that runs only when `gate` passed, right after the
    /// gate and the steps already behind it. Its rows read as none when the
    /// gate skipped it.
    pub fn gated(&mut self, gate: Gate, statement: &'static Statement, args: Vec<Value>) -> StepId {
        let id = self.push(statement, args, Vec::new(), Role::Data);
        if let Some(step) = self.steps.get_mut(id.0) {
            step.gated_by = Some(gate.0);
        }
        id
    }

    /// Whether the program step at `batch_index` is a gate, whose failure
    /// is an answer (nothing to do), not an error.
    pub(crate) fn is_gate(&self, batch_index: usize) -> bool {
        batch_index
            .checked_sub(self.first_step())
            .and_then(|i| self.steps.get(i))
            .is_some_and(|s| s.role == Role::Gate)
    }

    /// Sets the guard that runs before every other statement; when it fires
    /// the run reports [`super::RunError::PreludeRejected`].
    pub fn set_prelude(&mut self, statement: &'static Statement, args: Vec<Value>) {
        self.prelude = Some(ProgramStep {
            statement,
            args,
            blobs: Vec::new(),
            role: Role::Guard,
            gated_by: None,
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

    fn push(
        &mut self,
        statement: &'static Statement,
        args: Vec<Value>,
        blobs: Vec<Vec<&'a [u8]>>,
        role: Role,
    ) -> StepId {
        self.steps.push(ProgramStep {
            statement,
            args,
            blobs,
            role,
            gated_by: None,
        });
        StepId(self.steps.len() - 1)
    }

    /// Batch index of the COMMIT step.
    pub(crate) fn commit_index(&self) -> usize {
        self.first_step() + self.steps.len()
    }

    /// An upper bound, for any text but control characters, of the length
    /// of the program's JSON encoding: encoding into a buffer this large
    /// never reallocates, where doubling a buffer near the request cap
    /// would briefly hold it twice and leave a hole as large in the
    /// isolate's memory (wasm memory never shrinks).
    pub(crate) fn encoded_len_hint(&self) -> usize {
        // Escaping at most doubles text (quotes, backslashes, newlines).
        let value = |v: &Value| match v {
            Value::Text { value } => 2 * value.len() + 32,
            Value::Blob { base64 } => base64.len() + 40,
            _ => 48,
        };
        let step = |s: &ProgramStep| {
            let blobs: usize = s
                .blobs
                .iter()
                .map(|b| b.iter().map(|p| p.len()).sum::<usize>().div_ceil(3) * 4 + 40)
                .sum();
            2 * s.statement.sql.len() + 128 + s.args.iter().map(value).sum::<usize>() + blobs
        };
        let fixed = 2 * SCHEMA_CHECK.sql.len() + 1024;
        fixed
            + self
                .head
                .iter()
                .chain(&self.prelude)
                .chain(&self.steps)
                .map(step)
                .sum::<usize>()
    }

    /// Encodes the program as one Hrana batch, borrowing its arguments.
    pub(crate) fn to_batch(&self) -> Batch<'_> {
        let begin = if self.write {
            &BEGIN_WRITE
        } else {
            &BEGIN_READ
        };
        let mut steps = Vec::with_capacity(self.steps.len() + 5);
        steps.push(plain(begin, None));
        match &self.head {
            Some(head) => steps.push(self.encode(head, Condition::Ok { step: 0 })),
            None => steps.push(plain(&SCHEMA_CHECK, Some(Condition::Ok { step: 0 }))),
        }
        // `required`: every step that must succeed so far did. A gated run
        // of steps satisfies it either by succeeding to its last step or by
        // its gate failing (nothing to do).
        let mut required = Condition::Ok { step: 1 };
        let mut open: Option<OpenGate> = None;
        for (i, step) in self.prelude.iter().chain(&self.steps).enumerate() {
            let index = 2 + i;
            let step_gate = step.gated_by.map(|g| g + self.first_step());
            match (&mut open, step_gate) {
                (Some(gate), Some(g)) if g == gate.index => {
                    steps.push(self.encode(step, Condition::Ok { step: gate.last }));
                    gate.last = index;
                    continue;
                }
                _ => {}
            }
            if let Some(gate) = open.take() {
                required = gate.close();
            }
            steps.push(self.encode(step, required.clone()));
            if step.role == Role::Gate {
                open = Some(OpenGate {
                    index,
                    last: index,
                    before: required.clone(),
                });
            } else {
                required = Condition::Ok { step: index };
            }
        }
        if let Some(gate) = open.take() {
            required = gate.close();
        }
        steps.push(plain(&COMMIT, Some(required)));
        let commit = self.commit_index();
        steps.push(plain(
            &ROLLBACK,
            Some(Condition::Not {
                cond: Box::new(Condition::Ok { step: commit }),
            }),
        ));
        Batch { steps }
    }
}

/// A gate being encoded and the steps behind it so far.
struct OpenGate {
    index: usize,
    last: usize,
    /// What had to hold before the gate ran.
    before: Condition,
}

impl OpenGate {
    fn close(self) -> Condition {
        gate_closed(self.index, self.last, self.before)
    }
}

/// What holds after the steps behind the gate at step `gate`, the last of
/// them at step `last`: that one succeeded (so the gate passed), or the
/// gate ran and failed with everything before it (`before`) in order. A
/// gate with no steps behind it leaves `before`. Programs and folded runs
/// (`group.rs`) close their gates alike.
pub(super) fn gate_closed(gate: usize, last: usize, before: Condition) -> Condition {
    if last == gate {
        return before;
    }
    Condition::Or {
        conds: vec![
            Condition::Ok { step: last },
            Condition::And {
                conds: vec![
                    Condition::Not {
                        cond: Box::new(Condition::Ok { step: gate }),
                    },
                    before,
                ],
            },
        ],
    }
}

const BEGIN_WRITE: Statement = crate::statement!("BEGIN IMMEDIATE");
const BEGIN_READ: Statement = crate::statement!("BEGIN");
const COMMIT: Statement = crate::statement!("COMMIT");
const ROLLBACK: Statement = crate::statement!("ROLLBACK");

/// The first statement of every program: fails unless the database is at
/// exactly the schema version this build was written for.
pub(crate) const SCHEMA_CHECK: Statement =
    crate::statement!(super::statement::const_format::concatcp!(
        "SELECT json(CASE WHEN version = ",
        SCHEMA_VERSION,
        " THEN '0' ELSE 'abort' END) FROM schema_version"
    ));

impl Program<'_> {
    fn encode<'s>(&'s self, step: &'s ProgramStep, condition: Condition) -> BatchStep<'s> {
        BatchStep {
            condition: Some(condition),
            stmt: Stmt {
                sql: step.statement.sql.into(),
                args: Args {
                    values: &step.args,
                    blobs: &step.blobs,
                    clock_param: step.statement.clock_param,
                    now: self.now,
                },
                want_rows: step.role == Role::Data,
            },
        }
    }
}

/// The columns `$columns` (and any `FROM`/`WHERE` tail) of a program's
/// head, after the schema check every program opens with; the check is
/// column 0.
#[macro_export]
macro_rules! schema_checked {
    ($columns:expr) => {
        $crate::store::statement::const_format::concatcp!(
            "SELECT json(CASE WHEN (SELECT version FROM schema_version) = ",
            $crate::store::migrate::SCHEMA_VERSION,
            " THEN '0' ELSE 'abort' END), ",
            $columns
        )
    };
}

fn plain(statement: &'static Statement, condition: Option<Condition>) -> BatchStep<'static> {
    BatchStep {
        condition,
        stmt: Stmt {
            sql: statement.sql.into(),
            args: Args::NONE,
            want_rows: false,
        },
    }
}
