//! Group commit (docs/engine.md#group-commit): write programs of one queue
//! that are in flight at the same time reach the database as **one**
//! pipeline, one `BEGIN IMMEDIATE … COMMIT`, each program inside its own
//! savepoint, so sqld's fixed cost per request (a connection, parsing, two
//! fsyncs of its log per commit) is paid once per batch instead of once
//! per RPC.
//!
//! One protocol, three pieces, all here:
//! * [`merge`] splices the pipelines members would have sent alone into
//!   one batch: each member's `BEGIN` becomes `SAVEPOINT member`, its
//!   `COMMIT` `RELEASE member`, its `ROLLBACK` `ROLLBACK TO member` (then
//!   `RELEASE`), its conditions shifted to where its steps now stand;
//! * [`split`] turns the batch's answer back into the answer each member
//!   would have had alone, so the store classifies it exactly as before;
//! * [`Coalescer`] forms the batches: a lone submission goes out at once
//!   (no timer, no linger); what arrives while a batch is in flight forms
//!   the next one, bounded by [`Bounds`]. Each batch is sent by one of its
//!   own members (the first), so every request makes at most one database
//!   request per attempt.
//!
//! Members run one after another in one transaction: each sees the effects
//! of those before it, exactly as if they had run alone in that order, and
//! a member whose guard fires rolls back only its own savepoint. The batch
//! commits only if every member closed its savepoint; when it does not
//! commit, no member applied, and each is told so ([`Verdict::Retry`]).

use std::collections::VecDeque;
use std::sync::Mutex;

use futures_channel::oneshot;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use std::borrow::Cow;

use super::fold::Fold;
use super::hrana::{Condition, HranaError};
use super::program::gate_closed;
use super::transport::{Carried, Group, HttpReply, Transport, TransportError};

/// What a batch may hold, well inside Turso's 5 s transaction limit and
/// sqld's request limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// Members per batch.
    pub members: usize,
    /// Encoded pipeline bytes per batch (members' bodies added up).
    pub bytes: usize,
    /// Statements per batch.
    pub statements: usize,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            members: 64,
            bytes: 4 * 1024 * 1024,
            statements: 1_000,
        }
    }
}

/// Largest pipeline a member may be: a larger program (a Send near the
/// request cap) goes to the database directly, on its own.
pub const MEMBER_MAX_BYTES: usize = 512 * 1024;

/// What one member learns of its batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The database's answer as it would have been to the member alone: its
    /// status and a pipeline response holding its own batch result.
    Answer(HttpReply),
    /// Provably not applied (the batch did not commit, or was never sent):
    /// the member may be sent again.
    Retry(String),
    /// The batch may have committed, but its answer was lost.
    Lost(String),
    /// The submission is not a write program's pipeline.
    Invalid(String),
}

impl Verdict {
    /// The verdict as a transport outcome, for the store's usual
    /// classification (an invalid submission never reached the database).
    pub fn into_reply(self) -> Result<HttpReply, TransportError> {
        match self {
            Verdict::Answer(reply) => Ok(reply),
            Verdict::Retry(m) | Verdict::Invalid(m) => Err(TransportError::NotSent(m)),
            Verdict::Lost(m) => Err(TransportError::AnswerLost(m)),
        }
    }
}

/// One member, parsed from the pipeline it would have sent alone
/// (`store::encode`: `BEGIN IMMEDIATE`, its steps, `COMMIT`, `ROLLBACK`).
#[derive(Debug)]
pub struct Member {
    steps: Vec<InStep>,
    bytes: usize,
    /// Its commit can make messages claimable on the queue (a Send, an
    /// Abandon): the batch then reads the database clock before `COMMIT`,
    /// so the carrier can wake the queue's waiters itself.
    wakes: bool,
}

#[derive(Debug, Deserialize)]
struct InPipeline {
    requests: Vec<InRequest>,
}

#[derive(Debug, Deserialize)]
struct InRequest {
    #[serde(default)]
    batch: Option<InBatch>,
}

#[derive(Debug, Deserialize)]
struct InBatch {
    steps: Vec<InStep>,
}

#[derive(Debug, Deserialize)]
struct InStep {
    #[serde(default)]
    condition: Option<Condition>,
    stmt: Box<RawValue>,
}

impl Member {
    /// Parses a write program's pipeline body; anything else is refused.
    pub fn parse(body: &str) -> Result<Member, String> {
        let pipeline: InPipeline =
            serde_json::from_str(body).map_err(|e| format!("not a pipeline: {e}"))?;
        let mut batches = pipeline.requests.into_iter().filter_map(|r| r.batch);
        let (Some(batch), None) = (batches.next(), batches.next()) else {
            return Err("a member carries exactly one batch".into());
        };
        let steps = batch.steps;
        let n = steps.len();
        let shaped = n >= 4
            && steps[0].condition.is_none()
            && steps[0].stmt.get().contains("\"BEGIN IMMEDIATE\"")
            && steps[n - 2].stmt.get().contains("\"COMMIT\"")
            && steps[n - 1].stmt.get().contains("\"ROLLBACK\"");
        if !shaped {
            return Err("a member is a write program: BEGIN IMMEDIATE … COMMIT, ROLLBACK".into());
        }
        Ok(Member {
            steps,
            bytes: body.len(),
            wakes: false,
        })
    }

    /// Marks it as a write whose commit can make messages claimable.
    pub fn waking(self, wakes: bool) -> Member {
        Member { wakes, ..self }
    }

    fn statements(&self) -> usize {
        self.steps.len() + 2
    }

    /// Its statements between `BEGIN` and `COMMIT`, when each of them and
    /// the `COMMIT` run whenever every statement before them succeeded (a
    /// chain, or a gate whose steps then run too): only such a member may
    /// be folded, since a fold answers it with every statement succeeded.
    fn chained_statements(&self) -> Option<Vec<&RawValue>> {
        let n = self.steps.len();
        let chained = self.steps[1..n - 1]
            .iter()
            .enumerate()
            .all(|(i, s)| s.condition.as_ref().is_some_and(|c| runs_after(c, i + 1)));
        chained.then(|| self.steps[1..n - 2].iter().map(|s| &*s.stmt).collect())
    }
}

/// Whether a step whose condition is `condition` runs when the `done`
/// steps before it all succeeded.
fn runs_after(condition: &Condition, done: usize) -> bool {
    match condition {
        Condition::Ok { step } => *step < done,
        Condition::Not { cond } => !runs_after(cond, done),
        Condition::And { conds } => conds.iter().all(|c| runs_after(c, done)),
        Condition::Or { conds } => conds.iter().any(|c| runs_after(c, done)),
    }
}

/// The kinds of member that fold (docs/engine.md#folding), as the engine
/// defines them; none: every member takes a savepoint of its own.
pub type Folds = &'static [&'static dyn Fold];

/// Where a savepoint's steps stand in the merged batch: one member's, or
/// a folded run's.
struct Placement {
    /// Index of its `SAVEPOINT` (a lone member's own step 0).
    base: usize,
    /// Its steps as a member alone has them (`BEGIN` … `ROLLBACK`): a lone
    /// member's own count, a run's statements and three.
    len: usize,
    /// The members it serves (indices into the batch).
    members: Vec<usize>,
    /// The fold serving them, for a run.
    fold: Option<&'static dyn Fold>,
}

impl Placement {
    fn release(&self) -> usize {
        self.base + self.len - 2
    }
    fn rollback_to(&self) -> usize {
        self.base + self.len - 1
    }
    fn release_after_rollback(&self) -> usize {
        self.base + self.len
    }
    /// Its `ROLLBACK TO` runs when its savepoint opened and its `RELEASE`
    /// did not run.
    fn own_rollback(&self) -> Condition {
        Condition::And {
            conds: vec![
                Condition::Ok { step: self.base },
                Condition::Not {
                    cond: Box::new(Condition::Ok {
                        step: self.release(),
                    }),
                },
            ],
        }
    }
    /// Its savepoint was closed either way: the transaction is still open
    /// and the next member may start.
    fn closed(&self) -> Condition {
        Condition::Or {
            conds: vec![
                Condition::Ok {
                    step: self.release(),
                },
                Condition::Ok {
                    step: self.release_after_rollback(),
                },
            ],
        }
    }
}

#[derive(Serialize)]
struct OutPipeline<'a> {
    baton: Option<String>,
    requests: [OutRequest<'a>; 2],
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum OutRequest<'a> {
    Batch { batch: OutBatch<'a> },
    Close,
}

#[derive(Serialize)]
struct OutBatch<'a> {
    steps: Vec<OutStep<'a>>,
}

#[derive(Serialize)]
struct OutStep<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    condition: Option<Condition>,
    stmt: &'a RawValue,
}

/// The statements the batch adds around its members (texts constant, as
/// every statement the store sends).
const BEGIN: &str = r#"{"sql":"BEGIN IMMEDIATE","args":[],"want_rows":false}"#;
const SAVEPOINT: &str = r#"{"sql":"SAVEPOINT member","args":[],"want_rows":false}"#;
const RELEASE: &str = r#"{"sql":"RELEASE member","args":[],"want_rows":false}"#;
const ROLLBACK_TO: &str = r#"{"sql":"ROLLBACK TO member","args":[],"want_rows":false}"#;
const COMMIT: &str = r#"{"sql":"COMMIT","args":[],"want_rows":false}"#;
/// The database clock (the engine's own, epoch ms), read after every
/// member and before `COMMIT` when a member wakes: a time at or after each
/// member's own commit time, for the wake board's mark
/// (docs/semantics.md#long-polling).
const CLOCK: &str = const_format::concatcp!(
    r#"{"sql":"SELECT "#,
    super::statement::DATABASE_NOW,
    r#"","args":[],"want_rows":true}"#
);
const ROLLBACK: &str = r#"{"sql":"ROLLBACK","args":[],"want_rows":false}"#;

fn raw(text: &'static str) -> &'static RawValue {
    // The texts above are valid JSON: the fallback is never taken.
    serde_json::from_str(text).unwrap_or(RawValue::NULL)
}

/// The merged pipeline of `members`, in order, and where each one stands.
pub struct Merged {
    pub body: String,
    placements: Vec<Placement>,
    /// Index of the [`CLOCK`] step, when a member wakes.
    clock: Option<usize>,
    commit: usize,
    /// Members in the batch.
    members: usize,
}

impl Merged {
    /// Whether member `i` is served by a folded run.
    pub fn folded(&self, i: usize) -> bool {
        self.placements
            .iter()
            .any(|at| at.fold.is_some() && at.members.contains(&i))
    }
}

/// Shifts a member's condition by `base`; its step 0 (`BEGIN`) is now its
/// `SAVEPOINT`, at `base`.
fn shift(condition: &Condition, base: usize) -> Condition {
    match condition {
        Condition::Ok { step } => Condition::Ok { step: base + step },
        Condition::Not { cond } => Condition::Not {
            cond: Box::new(shift(cond, base)),
        },
        Condition::And { conds } => Condition::And {
            conds: conds.iter().map(|c| shift(c, base)).collect(),
        },
        Condition::Or { conds } => Condition::Or {
            conds: conds.iter().map(|c| shift(c, base)).collect(),
        },
    }
}

/// What one savepoint of a batch holds, before its steps are laid out.
enum Unit {
    Alone(usize),
    Run {
        fold: &'static dyn Fold,
        members: Vec<usize>,
        statements: Vec<Box<RawValue>>,
    },
}

/// The batch's savepoints in order: the members of a kind that folds, two
/// or more, as runs of at most the fold's capacity, each run where its
/// first member stands; every other member alone, in arrival order.
/// Members in flight together have no order of their own (any order is one
/// they could have run in one after another), so a later Send may run
/// before an earlier Receive of the same batch; a run keeps its members'
/// order, and everything else keeps its own.
fn units(members: &[Member], folds: Folds) -> Vec<Unit> {
    let kind = |m: &Member| {
        let statements = m.chained_statements()?;
        folds.iter().position(|f| f.accepts(&statements))
    };
    let kinds: Vec<Option<usize>> = members.iter().map(kind).collect();
    let mut placed = vec![false; members.len()];
    let mut units = Vec::with_capacity(members.len());
    for i in 0..members.len() {
        if placed[i] {
            continue;
        }
        let Some(fold) = kinds[i].and_then(|k| folds.get(k)) else {
            placed[i] = true;
            units.push(Unit::Alone(i));
            continue;
        };
        let same: Vec<usize> = (i..members.len())
            .filter(|&j| !placed[j] && kinds[j] == kinds[i])
            .collect();
        for run in same.chunks(fold.capacity().max(1)) {
            for &j in run {
                placed[j] = true;
            }
            units.extend(fold_run(members, *fold, run));
        }
    }
    units
}

/// `run` as one folded savepoint, or each alone when it is one member or
/// the fold declines.
fn fold_run(members: &[Member], fold: &'static dyn Fold, run: &[usize]) -> Vec<Unit> {
    let statements: Vec<Vec<&RawValue>> = run
        .iter()
        .filter_map(|&j| members[j].chained_statements())
        .collect();
    let folded = (run.len() > 1)
        .then(|| fold.fold(&statements))
        .flatten()
        .map(|texts| {
            texts
                .into_iter()
                .map(RawValue::from_string)
                .collect::<Result<Vec<_>, _>>()
        });
    match folded {
        Some(Ok(statements)) if !statements.is_empty() => vec![Unit::Run {
            fold,
            members: run.to_vec(),
            statements,
        }],
        _ => run.iter().map(|&j| Unit::Alone(j)).collect(),
    }
}

/// A run's gate, when a statement stands behind it (a gate that is the run's
/// last statement must succeed like any other).
fn gate_of(fold: &dyn Fold, statements: usize) -> Option<usize> {
    fold.gate().filter(|&g| g + 1 < statements)
}

/// Splices `members` into one transaction (see the module doc), folding
/// the runs `folds` serve.
pub fn merge(members: &[Member], folds: Folds) -> Merged {
    let units = units(members, folds);
    let mut steps: Vec<OutStep> = vec![OutStep {
        condition: None,
        stmt: raw(BEGIN),
    }];
    let mut placements = Vec::with_capacity(units.len());
    let mut open = Condition::Ok { step: 0 };
    for unit in &units {
        let base = steps.len();
        steps.push(OutStep {
            condition: Some(open),
            stmt: raw(SAVEPOINT),
        });
        let at = match unit {
            Unit::Alone(i) => {
                let member = &members[*i];
                let at = Placement {
                    base,
                    len: member.steps.len(),
                    members: vec![*i],
                    fold: None,
                };
                let last = member.steps.len() - 1;
                for (s, step) in member.steps.iter().enumerate().skip(1) {
                    let (condition, stmt) = if s == last {
                        // Its own ROLLBACK ran when its COMMIT did not.
                        (Some(at.own_rollback()), raw(ROLLBACK_TO))
                    } else if s == last - 1 {
                        (
                            step.condition.as_ref().map(|c| shift(c, base)),
                            raw(RELEASE),
                        )
                    } else {
                        (step.condition.as_ref().map(|c| shift(c, base)), &*step.stmt)
                    };
                    steps.push(OutStep { condition, stmt });
                }
                at
            }
            Unit::Run {
                fold,
                members,
                statements,
            } => {
                let at = Placement {
                    base,
                    len: statements.len() + 3,
                    members: members.clone(),
                    fold: Some(*fold),
                };
                // Each statement only if the one before it succeeded; the
                // one behind the fold's gate only if the gate passed, and
                // the next one also when the gate failed (nothing to do).
                let gate = gate_of(*fold, statements.len());
                let mut required = Condition::Ok { step: base };
                let mut open_gate: Option<(usize, Condition)> = None;
                for (k, stmt) in statements.iter().enumerate() {
                    let index = steps.len();
                    let condition = match &open_gate {
                        Some((gate_step, _)) => Condition::Ok { step: *gate_step },
                        None => required.clone(),
                    };
                    steps.push(OutStep {
                        condition: Some(condition),
                        stmt,
                    });
                    required = match open_gate.take() {
                        Some((gate_step, before)) => gate_closed(gate_step, index, before),
                        None if gate == Some(k) => {
                            open_gate = Some((index, required.clone()));
                            continue;
                        }
                        None => Condition::Ok { step: index },
                    };
                }
                steps.push(OutStep {
                    condition: Some(required),
                    stmt: raw(RELEASE),
                });
                steps.push(OutStep {
                    condition: Some(at.own_rollback()),
                    stmt: raw(ROLLBACK_TO),
                });
                at
            }
        };
        steps.push(OutStep {
            condition: Some(Condition::Ok {
                step: at.rollback_to(),
            }),
            stmt: raw(RELEASE),
        });
        open = at.closed();
        placements.push(at);
    }
    let clock = members.iter().any(|m| m.wakes).then(|| {
        steps.push(OutStep {
            condition: Some(open.clone()),
            stmt: raw(CLOCK),
        });
        steps.len() - 1
    });
    let commit = steps.len();
    steps.push(OutStep {
        condition: Some(open),
        stmt: raw(COMMIT),
    });
    steps.push(OutStep {
        condition: Some(Condition::Not {
            cond: Box::new(Condition::Ok { step: commit }),
        }),
        stmt: raw(ROLLBACK),
    });
    let pipeline = OutPipeline {
        baton: None,
        requests: [
            OutRequest::Batch {
                batch: OutBatch { steps },
            },
            OutRequest::Close,
        ],
    };
    Merged {
        body: serde_json::to_string(&pipeline).unwrap_or_default(),
        placements,
        clock,
        commit,
        members: members.len(),
    }
}

#[derive(Deserialize)]
struct AnswerPipeline {
    results: Vec<AnswerResult>,
}

#[derive(Deserialize)]
struct AnswerResult {
    #[serde(default)]
    response: Option<AnswerResponse>,
    #[serde(default)]
    error: Option<HranaError>,
}

#[derive(Deserialize)]
struct AnswerResponse {
    #[serde(default)]
    result: Option<AnswerBatch>,
}

#[derive(Deserialize)]
struct AnswerBatch {
    step_results: Vec<Option<Box<RawValue>>>,
    step_errors: Vec<Option<Box<RawValue>>>,
}

#[derive(Serialize)]
struct MemberAnswer<'a> {
    baton: Option<String>,
    base_url: Option<String>,
    results: [MemberResult<'a>; 2],
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum MemberResult<'a> {
    Ok { response: MemberResponse<'a> },
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum MemberResponse<'a> {
    Batch { result: MemberBatch<'a> },
    Close,
}

#[derive(Serialize)]
struct MemberBatch<'a> {
    step_results: Vec<Option<Cow<'a, RawValue>>>,
    step_errors: Vec<Option<Cow<'a, RawValue>>>,
}

fn pick(list: &[Option<Box<RawValue>>], i: usize) -> Option<&RawValue> {
    list.get(i).and_then(|v| v.as_deref())
}

/// A statement's result where the member's own `COMMIT` stood: the batch
/// committed with the member's savepoint released.
const COMMITTED: &str = r#"{"cols":[],"rows":[],"affected_row_count":0,"last_insert_rowid":null}"#;

/// The result of a folded run's statement its gate skipped.
const NO_ROWS: &str = r#"{"cols":[],"rows":[],"affected_row_count":0}"#;

/// What the database's answer to a batch says.
pub struct Split {
    /// Each member's verdict, in member order.
    pub verdicts: Vec<Verdict>,
    /// The database clock the batch read before `COMMIT` (epoch ms), when
    /// a member wakes and the batch committed.
    pub clock: Option<i64>,
}

/// Each member's verdict from the database's answer to the batch `merged`
/// made of `members`, and the batch's clock.
pub fn split(
    members: &[Member],
    merged: &Merged,
    reply: Result<HttpReply, TransportError>,
) -> Split {
    let all = |verdict: Verdict| Split {
        verdicts: vec![verdict; merged.members],
        clock: None,
    };
    let reply = match reply {
        Ok(reply) => reply,
        Err(TransportError::NotSent(m)) => return all(Verdict::Retry(m)),
        Err(TransportError::AnswerLost(m)) => return all(Verdict::Lost(m)),
    };
    if reply.status != 200 {
        // The same status for everyone: the store classifies it as before.
        return all(Verdict::Answer(reply));
    }
    let parsed: AnswerPipeline = match serde_json::from_slice(&reply.body) {
        Ok(p) => p,
        Err(e) => return all(Verdict::Lost(format!("unreadable batch answer: {e}"))),
    };
    let Some(first) = parsed.results.into_iter().next() else {
        return all(Verdict::Lost("batch answer without results".into()));
    };
    let batch = match (first.response.and_then(|r| r.result), first.error) {
        (Some(batch), _) => batch,
        // The stream itself failed before the batch ran: nothing applied.
        (None, Some(error)) => return all(Verdict::Retry(error.message)),
        (None, None) => return all(Verdict::Lost("batch answer without its result".into())),
    };
    let ran = |i: usize| batch.step_results.get(i).is_some_and(Option::is_some);
    if !ran(merged.commit) {
        // No COMMIT: the final ROLLBACK ran, or the transaction was already
        // gone (an error that rolls back everything). Either way nothing of
        // the batch applied. Only a ROLLBACK that failed for another reason
        // leaves the outcome open.
        let rollback_failed = batch
            .step_errors
            .get(merged.commit + 1)
            .and_then(Option::as_ref)
            .and_then(|e| serde_json::from_str::<HranaError>(e.get()).ok());
        return match rollback_failed {
            Some(e) if !e.message.contains("no transaction is active") => all(Verdict::Lost(
                format!("the batch's rollback failed: {}", e.message),
            )),
            _ => all(Verdict::Retry("the batch did not commit".into())),
        };
    }
    let committed = raw(COMMITTED);
    let mut verdicts: Vec<Option<Verdict>> = vec![None; merged.members];
    for at in &merged.placements {
        let answers = match at.fold {
            None => vec![alone_answer(at, &batch, committed)],
            Some(fold) => run_answers(fold, members, at, &batch, committed),
        };
        for (&member, answer) in at.members.iter().zip(answers) {
            if let Some(slot) = verdicts.get_mut(member) {
                *slot = Some(answer);
            }
        }
    }
    let clock = merged
        .clock
        .and_then(|at| pick(&batch.step_results, at))
        .and_then(super::fold::Rows::parse)
        .and_then(|r| r.rows.first().and_then(|row| row.first().copied()))
        .and_then(super::fold::int_cell);
    Split {
        verdicts: verdicts
            .into_iter()
            .map(|v| v.unwrap_or_else(|| Verdict::Lost("no answer for the member".into())))
            .collect(),
        clock,
    }
}

/// A lone member's own steps, back where it had them.
fn alone_answer(at: &Placement, batch: &AnswerBatch, committed: &RawValue) -> Verdict {
    let ran = |i: usize| batch.step_results.get(i).is_some_and(Option::is_some);
    let mut step_results = Vec::with_capacity(at.len);
    let mut step_errors = Vec::with_capacity(at.len);
    for i in 0..at.len {
        let index = at.base + i;
        if i == at.len - 2 {
            // Its COMMIT: released and the batch committed. (The RELEASE's
            // own result would do as well: this far, the batch committed,
            // so a member released iff it committed; the marker says what
            // it means.)
            step_results.push(ran(at.release()).then_some(Cow::Borrowed(committed)));
            step_errors.push(None);
        } else {
            // Its statements, and as its ROLLBACK its ROLLBACK TO
            // (`at.rollback_to()`, the step after its RELEASE).
            step_results.push(pick(&batch.step_results, index).map(Cow::Borrowed));
            step_errors.push(pick(&batch.step_errors, index).map(Cow::Borrowed));
        }
    }
    member_answer(step_results, step_errors)
}

/// Each member of a folded run: its statements' results rebuilt by the
/// fold when the run released; when it did not, the run's first error on
/// the statement the fold blames, and the run's `ROLLBACK TO` as its own.
fn run_answers(
    fold: &dyn Fold,
    members: &[Member],
    at: &Placement,
    batch: &AnswerBatch,
    committed: &RawValue,
) -> Vec<Verdict> {
    let count = at.members.len();
    let own_statements: Vec<Vec<&RawValue>> = at
        .members
        .iter()
        .filter_map(|&j| members.get(j).and_then(Member::chained_statements))
        .collect();
    // A member's statements (folded members are of one kind: as many each).
    let Some(statements) = own_statements.first().map(Vec::len) else {
        return vec![Verdict::Lost("a folded run without its members".into()); count];
    };
    let run = at.base + 1..at.release();
    let begin = pick(&batch.step_results, at.base).map(Cow::Borrowed);
    let own = |results: Vec<Option<Cow<RawValue>>>, errors| {
        let mut step_results = vec![begin.clone()];
        step_results.extend(results);
        let mut step_errors = vec![None];
        step_errors.extend(errors);
        member_answer(step_results, step_errors)
    };
    // The fold's gate and the statement behind it, which read as no rows
    // when the gate found nothing to do.
    let gate = gate_of(fold, run.len());
    let gated = |k: usize| gate.is_some_and(|g| k == g || k == g + 1);
    if pick(&batch.step_results, at.release()).is_some() {
        // Released: every statement succeeded, or the gate failed and
        // skipped the one behind it.
        let no_rows = raw(NO_ROWS);
        let results: Option<Vec<&RawValue>> = run
            .enumerate()
            .map(|(k, i)| pick(&batch.step_results, i).or_else(|| gated(k).then_some(no_rows)))
            .collect();
        let each = results
            .and_then(|r| fold.unfold(&own_statements, &r))
            .filter(|each| each.len() == count && each.iter().all(|e| e.len() == statements));
        let Some(each) = each else {
            return vec![Verdict::Lost("a folded run's answer does not add up".into()); count];
        };
        return each
            .into_iter()
            .map(|texts| {
                let mut results: Vec<Option<Cow<RawValue>>> = texts
                    .into_iter()
                    .map(|t| RawValue::from_string(t).ok().map(Cow::Owned))
                    .collect();
                results.push(Some(Cow::Borrowed(committed)));
                results.push(None);
                let errors = vec![None; results.len()];
                own(results, errors)
            })
            .collect();
    }
    let failed = run
        .enumerate()
        .filter(|&(k, _)| gate != Some(k))
        .find_map(|(k, i)| pick(&batch.step_errors, i).map(|e| (fold.blame(k), e)));
    let mut errors: Vec<Option<Cow<RawValue>>> = vec![None; statements + 2];
    if let Some((blamed, error)) = failed {
        if let Some(slot) = errors.get_mut(blamed) {
            *slot = Some(Cow::Borrowed(error));
        }
    }
    let mut results: Vec<Option<Cow<RawValue>>> = vec![None; statements + 1];
    results.push(pick(&batch.step_results, at.rollback_to()).map(Cow::Borrowed));
    vec![own(results, errors); count]
}

fn member_answer(
    step_results: Vec<Option<Cow<RawValue>>>,
    step_errors: Vec<Option<Cow<RawValue>>>,
) -> Verdict {
    let answer = MemberAnswer {
        baton: None,
        base_url: None,
        results: [
            MemberResult::Ok {
                response: MemberResponse::Batch {
                    result: MemberBatch {
                        step_results,
                        step_errors,
                    },
                },
            },
            MemberResult::Ok {
                response: MemberResponse::Close,
            },
        ],
    };
    match serde_json::to_vec(&answer) {
        Ok(body) => Verdict::Answer(HttpReply { status: 200, body }),
        Err(e) => Verdict::Lost(format!("member answer not encodable: {e}")),
    }
}

/// The verdict of a member whose batch went away mid-flight: it may have run.
fn abandoned() -> Verdict {
    Verdict::Lost("the batch was abandoned".into())
}

/// What a submission came to.
#[derive(Debug)]
pub struct Submitted {
    pub verdict: Verdict,
    pub carried: Carried,
    /// For a write that wakes, in a batch that committed: the database
    /// clock read before its `COMMIT`, at or after the write's own commit
    /// time. Its carrier may notify the queue's wake board at that time
    /// instead of waiting for the Worker's hint.
    pub woke_at: Option<i64>,
}

impl Submitted {
    fn direct(verdict: Verdict) -> Self {
        Submitted {
            verdict,
            carried: Carried::Direct,
            woke_at: None,
        }
    }
}

/// A submission waiting for its batch.
struct Waiting {
    member: Member,
    signal: oneshot::Sender<Signal>,
}

enum Signal {
    /// Send the next batch: the waiter is its first member, and learns its
    /// own verdict on the receiver it is handed.
    Lead(oneshot::Receiver<Signal>),
    /// The member's verdict, how it was carried, and the batch's clock
    /// when it wakes (see [`Submitted::woke_at`]).
    Done(Verdict, Carried, Option<i64>),
}

#[derive(Default)]
struct State {
    /// A batch is in flight (or about to be): new arrivals wait.
    busy: bool,
    waiting: VecDeque<Waiting>,
}

/// How batches formed, for Observe and `make bench`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct BatchStats {
    pub batches: u64,
    pub members: u64,
    /// The largest batch so far.
    pub largest: u64,
}

/// Forms batches of the submissions of one queue to one database (one per
/// database in a wake object, [`PerDatabase`], or one per queue in a native
/// process): every submission names the same transport, since a batch goes
/// through its leader's. Single-writer state behind a mutex that is never
/// held across an await.
#[derive(Default)]
pub struct Coalescer {
    state: Mutex<State>,
    bounds: Bounds,
    folds: Folds,
    stats: Mutex<BatchStats>,
}

impl Coalescer {
    pub fn new(bounds: Bounds) -> Self {
        Coalescer {
            bounds,
            ..Coalescer::default()
        }
    }

    /// Folds the runs of members `folds` serve (docs/engine.md#folding).
    pub fn folding(self, folds: Folds) -> Self {
        Coalescer { folds, ..self }
    }

    pub fn stats(&self) -> BatchStats {
        self.stats.lock().map(|s| *s).unwrap_or_default()
    }

    /// Submissions waiting for the next batch.
    pub fn waiting(&self) -> usize {
        self.state().waiting.len()
    }

    /// No batch in flight and none waiting: a write answered now went
    /// alone and left nobody behind it (`store::lone`).
    pub fn idle(&self) -> bool {
        let state = self.state();
        !state.busy && state.waiting.is_empty()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `body` (a write program's pipeline; `wakes`: its commit can
    /// make messages claimable) in the next batch through `transport`, and
    /// answers what the member would have been answered alone, with how it
    /// was carried (`Direct`: in no batch it knows of, being invalid or
    /// abandoned).
    pub async fn submit<T: Transport>(&self, transport: &T, body: &str, wakes: bool) -> Submitted {
        let member = match Member::parse(body) {
            Ok(member) => member.waking(wakes),
            Err(e) => return Submitted::direct(Verdict::Invalid(e)),
        };
        let (signal, signalled) = oneshot::channel();
        let lead_now = {
            let mut state = self.state();
            state.waiting.push_back(Waiting { member, signal });
            !std::mem::replace(&mut state.busy, true)
        };
        let own = if lead_now {
            signalled
        } else {
            let mut wait = Wait {
                coalescer: self,
                signalled,
            };
            match (&mut wait.signalled).await {
                Ok(Signal::Done(verdict, carried, woke_at)) => {
                    return Submitted {
                        verdict,
                        carried,
                        woke_at,
                    }
                }
                Ok(Signal::Lead(own)) => own,
                // The batch holding it was dropped mid-flight: it may have run.
                Err(_) => return Submitted::direct(abandoned()),
            }
        };
        let handoff = Handoff(self);
        self.lead(transport).await;
        drop(handoff);
        match own.await {
            Ok(Signal::Done(verdict, carried, woke_at)) => Submitted {
                verdict,
                carried,
                woke_at,
            },
            _ => Submitted::direct(abandoned()),
        }
    }

    /// Takes the next batch from the front (the leader's own submission
    /// first), sends it, and answers every member.
    async fn lead<T: Transport>(&self, transport: &T) {
        let batch = self.take_batch();
        let (members, signals): (Vec<Member>, Vec<_>) =
            batch.into_iter().map(|w| (w.member, w.signal)).unzip();
        if let Ok(mut stats) = self.stats.lock() {
            stats.batches += 1;
            stats.members += members.len() as u64;
            stats.largest = stats.largest.max(members.len() as u64);
        }
        let size = u32::try_from(members.len()).unwrap_or(u32::MAX);
        let merged = merge(&members, self.folds);
        let reply = transport.send_pipeline(&merged.body).await;
        let Split { verdicts, clock } = split(&members, &merged, reply);
        for (i, (signal, verdict)) in signals.into_iter().zip(verdicts).enumerate() {
            let carried = Carried::Batch {
                members: size,
                first: i == 0,
                folded: merged.folded(i),
            };
            let woke_at = clock.filter(|_| members[i].wakes);
            let _ = signal.send(Signal::Done(verdict, carried, woke_at));
        }
    }

    fn take_batch(&self) -> Vec<Waiting> {
        let mut state = self.state();
        // The batch's own: BEGIN, COMMIT, ROLLBACK (members' steps and two
        // each cover the rest), and the clock when a member wakes.
        let (mut bytes, mut statements) = (0, 3);
        let mut batch = Vec::new();
        while let Some(next) = state.waiting.front() {
            if next.signal.is_canceled() {
                // Its requester is gone before it ran: it never runs.
                state.waiting.pop_front();
                continue;
            }
            let fits = batch.len() < self.bounds.members
                && bytes + next.member.bytes <= self.bounds.bytes
                && statements + next.member.statements() <= self.bounds.statements;
            if !fits && !batch.is_empty() {
                break;
            }
            bytes += next.member.bytes;
            statements += next.member.statements();
            if let Some(waiting) = state.waiting.pop_front() {
                batch.push(waiting);
            }
        }
        batch
    }
}

/// A submission waiting behind a batch in flight. Dropped after the lead
/// was handed to it but before it led (its request went away), it passes
/// the lead on, so the waiters behind it are never stranded.
struct Wait<'a> {
    coalescer: &'a Coalescer,
    signalled: oneshot::Receiver<Signal>,
}

impl Drop for Wait<'_> {
    fn drop(&mut self) {
        // The lead's receiver (this member's own verdict channel) must be
        // gone before the hand-off: alive, it would take the lead back to
        // this member's entry, which nobody polls, stranding every waiter.
        let handed = matches!(self.signalled.try_recv(), Ok(Some(Signal::Lead(_))));
        if handed {
            drop(Handoff(self.coalescer));
        }
    }
}

/// Passes the lead on when a leader finishes or is dropped mid-batch: the
/// first waiter still listening sends the next batch (its own submission
/// back at the front); with none, the coalescer is idle again.
struct Handoff<'a>(&'a Coalescer);

impl Drop for Handoff<'_> {
    fn drop(&mut self) {
        let mut state = self.0.state();
        while let Some(next) = state.waiting.pop_front() {
            let (own, learns) = oneshot::channel();
            if next.signal.send(Signal::Lead(learns)).is_ok() {
                state.waiting.push_front(Waiting {
                    member: next.member,
                    signal: own,
                });
                return;
            }
        }
        state.busy = false;
    }
}

/// A queue's coalescers in its wake object, one per database its writes
/// name. A batch is one transaction in one database, yet one queue name's
/// writes can name two: while the name is being placed, a Worker that has
/// not seen the placement sends its write to the catalog (where the name
/// does not exist yet) as another sends to the placed database
/// (docs/databases.md). Each database forms its own batches, so no write
/// runs in a database other than the one it names.
pub struct PerDatabase<T> {
    lanes: Vec<(String, T, Coalescer)>,
}

impl<T: Transport> PerDatabase<T> {
    /// `databases` by name, each with its own coalescer folding `folds`.
    pub fn new(databases: impl IntoIterator<Item = (String, T)>, folds: Folds) -> Self {
        let lanes = databases
            .into_iter()
            .map(|(name, transport)| (name, transport, Coalescer::default().folding(folds)))
            .collect();
        PerDatabase { lanes }
    }

    /// Runs `body` in the next batch of the database `named`
    /// ([`Coalescer::submit`]); `None` when no database has that name.
    pub async fn submit(&self, named: &str, body: &str, wakes: bool) -> Option<Submitted> {
        let (_, transport, coalescer) = self.lanes.iter().find(|(name, ..)| name == named)?;
        Some(coalescer.submit(transport, body, wakes).await)
    }

    /// No batch in flight and none waiting in any database.
    pub fn idle(&self) -> bool {
        self.lanes.iter().all(|(.., coalescer)| coalescer.idle())
    }
}

/// A transport whose grouped writes go through one [`Coalescer`] per
/// queue in this process: the native counterpart of the Worker's wake
/// objects, for tests and tools that share one process.
pub struct GroupedTransport<T> {
    inner: T,
    bounds: Bounds,
    folds: Folds,
    queues: Mutex<std::collections::HashMap<String, std::sync::Arc<Coalescer>>>,
}

impl<T> GroupedTransport<T> {
    pub fn new(inner: T, bounds: Bounds) -> Self {
        GroupedTransport {
            inner,
            bounds,
            folds: &[],
            queues: Mutex::default(),
        }
    }

    /// Folds the runs of members `folds` serve (docs/engine.md#folding).
    pub fn folding(self, folds: Folds) -> Self {
        GroupedTransport { folds, ..self }
    }

    pub fn inner(&self) -> &T {
        &self.inner
    }

    /// The batches formed so far, over every queue.
    pub fn stats(&self) -> BatchStats {
        let queues = self.queues.lock().unwrap_or_else(|p| p.into_inner());
        queues.values().fold(BatchStats::default(), |sum, c| {
            let s = c.stats();
            BatchStats {
                batches: sum.batches + s.batches,
                members: sum.members + s.members,
                largest: sum.largest.max(s.largest),
            }
        })
    }

    /// Writes of `queue` waiting for its next batch.
    pub fn waiting(&self, queue: &str) -> usize {
        self.coalescer(queue).waiting()
    }

    fn coalescer(&self, queue: &str) -> std::sync::Arc<Coalescer> {
        let mut queues = self.queues.lock().unwrap_or_else(|p| p.into_inner());
        queues
            .entry(queue.to_owned())
            .or_insert_with(|| std::sync::Arc::new(Coalescer::new(self.bounds).folding(self.folds)))
            .clone()
    }
}

impl<T: Transport> Transport for GroupedTransport<T> {
    async fn send_pipeline(&self, body: &str) -> Result<HttpReply, TransportError> {
        self.inner.send_pipeline(body).await
    }

    async fn send_grouped(
        &self,
        group: Group<'_>,
        body: &str,
    ) -> (Result<HttpReply, TransportError>, Carried) {
        if body.len() > MEMBER_MAX_BYTES {
            return (self.inner.send_pipeline(body).await, Carried::Direct);
        }
        // No wake board lives here: the engine's hints wake native waiters,
        // and the batch's clock goes unused.
        let submitted = self
            .coalescer(group.queue)
            .submit(&self.inner, body, group.wakes)
            .await;
        (submitted.verdict.into_reply(), submitted.carried)
    }

    async fn pause(&self, millis: u32) {
        self.inner.pause(millis).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A write program's pipeline as `store::encode` writes it: BEGIN, one
    /// statement, COMMIT, ROLLBACK.
    fn member(sql: &str) -> Member {
        Member::parse(&program(sql)).expect("a write program")
    }

    fn program(sql: &str) -> String {
        format!(
            r#"{{"baton":null,"requests":[{{"type":"batch","batch":{{"steps":[
              {{"stmt":{{"sql":"BEGIN IMMEDIATE","args":[],"want_rows":false}}}},
              {{"condition":{{"type":"ok","step":0}},"stmt":{{"sql":"{sql}","args":[],"want_rows":true}}}},
              {{"condition":{{"type":"ok","step":1}},"stmt":{{"sql":"COMMIT","args":[],"want_rows":false}}}},
              {{"condition":{{"type":"not","cond":{{"type":"ok","step":2}}}},"stmt":{{"sql":"ROLLBACK","args":[],"want_rows":false}}}}
            ]}}}},{{"type":"close"}}]}}"#
        )
    }

    fn answer(results: &[Option<&str>], errors: &[Option<&str>]) -> HttpReply {
        let list = |items: &[Option<&str>]| {
            items
                .iter()
                .map(|i| i.unwrap_or("null").to_owned())
                .collect::<Vec<_>>()
                .join(",")
        };
        let body = format!(
            r#"{{"baton":null,"base_url":null,"results":[{{"type":"ok","response":{{"type":"batch","result":{{"step_results":[{}],"step_errors":[{}]}}}}}},{{"type":"ok","response":{{"type":"close"}}}}]}}"#,
            list(results),
            list(errors)
        );
        HttpReply {
            status: 200,
            body: body.into_bytes(),
        }
    }

    const OK: Option<&str> = Some(r#"{"cols":[],"rows":[],"affected_row_count":0}"#);
    const ROW: Option<&str> =
        Some(r#"{"cols":[],"rows":[[{"type":"integer","value":"7"}]],"affected_row_count":1}"#);

    /// The merged batch: BEGIN, then per member SAVEPOINT, its statement,
    /// RELEASE, ROLLBACK TO, RELEASE; COMMIT; ROLLBACK.
    #[test]
    fn members_are_spliced_into_savepoints_with_shifted_conditions() {
        let members = [member("SELECT 1"), member("SELECT 2")];
        let merged = merge(&members, &[]);
        let v: serde_json::Value = serde_json::from_str(&merged.body).expect("json");
        let steps = v["requests"][0]["batch"]["steps"]
            .as_array()
            .expect("steps");
        let sql: Vec<&str> = steps
            .iter()
            .map(|s| s["stmt"]["sql"].as_str().unwrap_or(""))
            .collect();
        assert_eq!(
            sql,
            [
                "BEGIN IMMEDIATE",
                "SAVEPOINT member",
                "SELECT 1",
                "RELEASE member",
                "ROLLBACK TO member",
                "RELEASE member",
                "SAVEPOINT member",
                "SELECT 2",
                "RELEASE member",
                "ROLLBACK TO member",
                "RELEASE member",
                "COMMIT",
                "ROLLBACK"
            ]
        );
        // Member 2's statement runs after its own SAVEPOINT (its step 0).
        assert_eq!(
            steps[7]["condition"],
            serde_json::json!({"type":"ok","step":6})
        );
        // Member 2 starts only once member 1 closed its savepoint either way.
        assert_eq!(
            steps[6]["condition"],
            serde_json::json!({"type":"or","conds":[{"type":"ok","step":3},{"type":"ok","step":5}]})
        );
        assert_eq!(
            steps[11]["condition"],
            serde_json::json!({"type":"or","conds":[{"type":"ok","step":8},{"type":"ok","step":10}]})
        );
        assert_eq!(merged.commit, 11);
        // Member 2's ROLLBACK TO runs when its savepoint opened but its
        // RELEASE did not; the RELEASE after it only when it ran (after a
        // released savepoint there is nothing left to release).
        assert_eq!(
            steps[9]["condition"],
            serde_json::json!({"type":"and","conds":[{"type":"ok","step":6},{"type":"not","cond":{"type":"ok","step":8}}]})
        );
        assert_eq!(
            steps[10]["condition"],
            serde_json::json!({"type":"ok","step":9})
        );
        assert_eq!(
            steps[5]["condition"],
            serde_json::json!({"type":"ok","step":4})
        );
    }

    #[test]
    fn each_member_gets_its_own_steps_back() {
        let members = [member("SELECT 1"), member("SELECT 2")];
        let merged = merge(&members, &[]);
        let guard = Some(r#"{"message":"malformed JSON","code":"SQLITE_ERROR"}"#);
        // Member 1 committed a row; member 2's statement failed and rolled back.
        let reply = answer(
            &[
                OK, OK, ROW, OK, None, None, OK, None, None, OK, OK, OK, None,
            ],
            &[
                None, None, None, None, None, None, None, guard, None, None, None, None, None,
            ],
        );
        let verdicts = split(&members, &merged, Ok(reply)).verdicts;
        let parsed: Vec<serde_json::Value> = verdicts
            .iter()
            .map(|v| match v {
                Verdict::Answer(r) => serde_json::from_slice(&r.body).expect("json"),
                other => panic!("an answer: {other:?}"),
            })
            .collect();
        let result = |i: usize| &parsed[i]["results"][0]["response"]["result"];
        assert_eq!(result(0)["step_results"][1]["rows"][0][0]["value"], "7");
        assert!(
            result(0)["step_results"][2].is_object(),
            "member 1 committed"
        );
        assert!(result(1)["step_results"][2].is_null(), "member 2 did not");
        assert_eq!(result(1)["step_errors"][1]["message"], "malformed JSON");
        assert!(result(0)["step_errors"][1].is_null());
        // Each member's own ROLLBACK is its ROLLBACK TO: member 2's ran,
        // member 1's did not.
        assert!(
            result(1)["step_results"][3].is_object(),
            "member 2 rolled back"
        );
        assert!(result(0)["step_results"][3].is_null(), "member 1 did not");
    }

    /// A member with `steps` (conditions as JSON, `None` for none) between
    /// `BEGIN` and its `COMMIT` (conditioned on `commit`), each statement
    /// `S<i>`.
    fn shaped(steps: &[&str], commit: &str) -> Member {
        let mut all = vec![r#"{"stmt":{"sql":"BEGIN IMMEDIATE","args":[]}}"#.to_owned()];
        for (i, condition) in steps.iter().enumerate() {
            all.push(format!(
                r#"{{"condition":{condition},"stmt":{{"sql":"S{}","args":[]}}}}"#,
                i + 1
            ));
        }
        let n = steps.len() + 1;
        all.push(format!(
            r#"{{"condition":{commit},"stmt":{{"sql":"COMMIT","args":[]}}}}"#
        ));
        all.push(format!(
            r#"{{"condition":{{"type":"not","cond":{{"type":"ok","step":{n}}}}},"stmt":{{"sql":"ROLLBACK","args":[]}}}}"#
        ));
        let body = format!(
            r#"{{"requests":[{{"type":"batch","batch":{{"steps":[{}]}}}}]}}"#,
            all.join(",")
        );
        Member::parse(&body).expect("a write program")
    }

    /// A member folds when each of its statements, and its COMMIT, runs
    /// whenever every statement before it succeeded: a chain, or a gate
    /// whose steps then run (`Program::gate`); not when one runs only after
    /// a failure, or waits on a statement after it.
    #[test]
    fn only_members_that_run_every_statement_on_success_may_fold() {
        let ok = |step: usize| format!(r#"{{"type":"ok","step":{step}}}"#);
        let not = |c: String| format!(r#"{{"type":"not","cond":{c}}}"#);
        let or = |a: String, b: String| format!(r#"{{"type":"or","conds":[{a},{b}]}}"#);
        let and = |a: String, b: String| format!(r#"{{"type":"and","conds":[{a},{b}]}}"#);
        let chain = shaped(&[&ok(0), &ok(1)], &ok(2));
        assert_eq!(chain.chained_statements().map(|s| s.len()), Some(2));
        // Head, gate, gated step, then the gate closed: what a Receive sends.
        let closed = or(ok(3), and(not(ok(2)), ok(1)));
        let gated = shaped(&[&ok(0), &ok(1), &ok(2), &closed], &ok(4));
        assert_eq!(gated.chained_statements().map(|s| s.len()), Some(4));
        let after_failure = shaped(&[&ok(0), &not(ok(1))], &ok(2));
        assert!(after_failure.chained_statements().is_none());
        let ahead = shaped(&[&ok(0), &ok(3)], &ok(2));
        assert!(ahead.chained_statements().is_none());
        let on_itself = shaped(&[&ok(0), &ok(2)], &ok(2));
        assert!(on_itself.chained_statements().is_none());
        let unconditioned = shaped(&["null", &ok(1)], &ok(2));
        assert!(unconditioned.chained_statements().is_none());
        let commit_after_failure = shaped(&[&ok(0)], &not(ok(1)));
        assert!(commit_after_failure.chained_statements().is_none());
    }

    /// A fold of the members whose one statement is `FOLD n`: one run
    /// statement `FOLDED`, each member's result the run's rows whose first
    /// cell is its position in the run.
    struct Numbered;

    impl Fold for Numbered {
        fn capacity(&self) -> usize {
            3
        }
        fn accepts(&self, statements: &[&RawValue]) -> bool {
            matches!(statements, [s] if s.get().contains("\"FOLD "))
        }
        fn fold(&self, members: &[Vec<&RawValue>]) -> Option<Vec<String>> {
            // A member `FOLD 0` makes the fold decline.
            let declines = members.iter().flatten().any(|s| s.get().contains("FOLD 0"));
            (!declines).then(|| vec![r#"{"sql":"FOLDED","args":[],"want_rows":true}"#.to_owned()])
        }
        fn unfold(
            &self,
            members: &[Vec<&RawValue>],
            results: &[&RawValue],
        ) -> Option<Vec<Vec<String>>> {
            let rows = super::super::fold::Rows::parse(results.first()?)?;
            (0..members.len())
                .map(|m| {
                    let own = rows
                        .rows
                        .iter()
                        .filter(|r| {
                            r.first().and_then(|c| super::super::fold::int_cell(c))
                                == Some(m as i64)
                        })
                        .cloned()
                        .collect();
                    let own = super::super::fold::Rows {
                        rows: own,
                        affected_row_count: 0,
                    };
                    Some(vec![own.to_json()])
                })
                .collect()
        }
        fn blame(&self, _run_step: usize) -> usize {
            0
        }
    }

    static NUMBERED: Folds = &[&Numbered];

    fn sql_of(merged: &Merged) -> Vec<String> {
        let v: serde_json::Value = serde_json::from_str(&merged.body).expect("json");
        v["requests"][0]["batch"]["steps"]
            .as_array()
            .expect("steps")
            .iter()
            .map(|s| s["stmt"]["sql"].as_str().unwrap_or("").to_owned())
            .collect()
    }

    /// Members of a kind that folds run together, where the first of them
    /// stood, at most `capacity` a run; a lone one of the kind, and a run
    /// the fold declines, take a savepoint each.
    #[test]
    fn members_of_a_folding_kind_run_together_where_the_first_stood() {
        let members = [
            member("SELECT 1"),
            member("FOLD 1"),
            member("SELECT 2"),
            member("FOLD 2"),
            member("FOLD 3"),
            member("FOLD 4"),
            member("FOLD 5"),
        ];
        let merged = merge(&members, NUMBERED);
        let sql = sql_of(&merged);
        let run = [
            "SAVEPOINT member",
            "FOLDED",
            "RELEASE member",
            "ROLLBACK TO member",
            "RELEASE member",
        ];
        let alone = |s: &str| {
            vec![
                "SAVEPOINT member".to_owned(),
                s.to_owned(),
                "RELEASE member".into(),
                "ROLLBACK TO member".into(),
                "RELEASE member".into(),
            ]
        };
        let mut expected = vec!["BEGIN IMMEDIATE".to_owned()];
        expected.extend(alone("SELECT 1"));
        // FOLD 1, 2, 3 (capacity 3), then FOLD 4, 5, all where FOLD 1 stood.
        expected.extend(run.iter().map(|s| s.to_string()));
        expected.extend(run.iter().map(|s| s.to_string()));
        expected.extend(alone("SELECT 2"));
        expected.extend(["COMMIT".to_owned(), "ROLLBACK".to_owned()]);
        assert_eq!(sql, expected);
        assert!(!merged.folded(0) && !merged.folded(2));
        assert!((1..7).filter(|&i| i != 2).all(|i| merged.folded(i)));

        let lone = [member("SELECT 1"), member("FOLD 1")];
        let merged = merge(&lone, NUMBERED);
        assert_eq!(
            sql_of(&merged)[7],
            "FOLD 1",
            "a run of one is a member alone"
        );
        assert!(!merged.folded(1));
        let declined = [member("FOLD 0"), member("FOLD 1")];
        let merged = merge(&declined, NUMBERED);
        assert_eq!(
            (sql_of(&merged)[2].as_str(), sql_of(&merged)[7].as_str()),
            ("FOLD 0", "FOLD 1")
        );
        assert!(!merged.folded(0) && !merged.folded(1));
    }

    /// Each member's batch result, from verdicts that are all answers.
    fn batch_results(verdicts: &[Verdict]) -> Vec<serde_json::Value> {
        verdicts
            .iter()
            .map(|v| match v {
                Verdict::Answer(r) => {
                    let v: serde_json::Value = serde_json::from_slice(&r.body).expect("json");
                    v["results"][0]["response"]["result"].clone()
                }
                other => panic!("an answer: {other:?}"),
            })
            .collect()
    }

    /// A released run answers each member with the results the fold
    /// rebuilt, committed; a run whose statement failed answers each with
    /// that error on the statement the fold blames, rolled back, in the
    /// shape of its own pipeline.
    #[test]
    fn a_folded_run_answers_each_member_in_its_own_shape() {
        let members = [member("FOLD 1"), member("FOLD 2")];
        let merged = merge(&members, NUMBERED);
        // BEGIN, SAVEPOINT, FOLDED, RELEASE, ROLLBACK TO, RELEASE, COMMIT, ROLLBACK
        let rows = Some(
            r#"{"cols":[],"rows":[[{"type":"integer","value":"1"}],[{"type":"integer","value":"0"}],[{"type":"integer","value":"1"}]],"affected_row_count":3}"#,
        );
        let reply = answer(&[OK, OK, rows, OK, None, None, OK, None], &[None; 8]);
        let each = batch_results(&split(&members, &merged, Ok(reply)).verdicts);
        for (m, own) in each.iter().enumerate() {
            let steps = own["step_results"].as_array().expect("results");
            assert_eq!(steps.len(), 4, "BEGIN, its statement, COMMIT, ROLLBACK");
            assert!(
                steps[2].is_object() && steps[3].is_null(),
                "member {m} committed"
            );
            let mine = steps[1]["rows"].as_array().expect("rows").len();
            assert_eq!(mine, if m == 0 { 1 } else { 2 });
        }
        let error = Some(r#"{"message":"disk I/O error","code":"SQLITE_IOERR"}"#);
        let reply = answer(
            &[OK, OK, None, None, OK, OK, OK, None],
            &[None, None, error, None, None, None, None, None],
        );
        for own in batch_results(&split(&members, &merged, Ok(reply)).verdicts) {
            let steps = own["step_results"].as_array().expect("results");
            assert_eq!(steps.len(), 4);
            assert!(steps[2].is_null(), "not committed");
            assert!(
                steps[3].is_object(),
                "its ROLLBACK is the run's ROLLBACK TO"
            );
            assert_eq!(own["step_errors"][1]["message"], "disk I/O error");
        }
        // Rows that do not add up: nobody can be told what it did.
        let unfolded =
            |r: &[Option<&str>]| split(&members, &merged, Ok(answer(r, &[None; 8]))).verdicts;
        assert!(unfolded(&[OK, OK, Some("{}"), OK, None, None, OK, None])
            .iter()
            .all(|v| matches!(v, Verdict::Answer(_))));
        let garbled = Some(r#"{"rows":"nope"}"#);
        assert!(unfolded(&[OK, OK, garbled, OK, None, None, OK, None])
            .iter()
            .all(|v| matches!(v, Verdict::Lost(_))));
    }

    /// A fold of the members whose one statement is `GATED n`: run
    /// statements `HEAD`, `GATE`, `BEHIND` and `LAST`, the one it names a
    /// gate; each member's result is the run's results as one array.
    struct GateFold(Option<usize>);

    impl Fold for GateFold {
        fn capacity(&self) -> usize {
            8
        }
        fn accepts(&self, statements: &[&RawValue]) -> bool {
            matches!(statements, [s] if s.get().contains("\"GATED "))
        }
        fn fold(&self, _members: &[Vec<&RawValue>]) -> Option<Vec<String>> {
            let statement = |sql: &str| format!(r#"{{"sql":"{sql}","args":[],"want_rows":true}}"#);
            Some(["HEAD", "GATE", "BEHIND", "LAST"].map(statement).to_vec())
        }
        fn unfold(
            &self,
            members: &[Vec<&RawValue>],
            results: &[&RawValue],
        ) -> Option<Vec<Vec<String>>> {
            let all: Vec<&str> = results.iter().map(|r| r.get()).collect();
            Some(vec![vec![format!("[{}]", all.join(","))]; members.len()])
        }
        fn blame(&self, _run_step: usize) -> usize {
            0
        }
        fn gate(&self) -> Option<usize> {
            self.0
        }
    }

    static GATING: Folds = &[&GateFold(Some(1))];

    /// A run's gate is encoded as a program's (`Program::gate`): the
    /// statement behind it runs only when it passed, the next one when that
    /// statement succeeded or the gate failed with all before it in order;
    /// a failed gate reads, with the statement it skipped, as no rows, and
    /// is never the error a failed run is answered with.
    #[test]
    fn a_folds_gate_skips_the_statement_behind_it_and_the_run_goes_on() {
        let members = [member("GATED 1"), member("GATED 2")];
        let merged = merge(&members, GATING);
        let v: serde_json::Value = serde_json::from_str(&merged.body).expect("json");
        let steps = v["requests"][0]["batch"]["steps"]
            .as_array()
            .expect("steps");
        let condition = |i: usize| steps[i]["condition"].clone();
        let ok = |step: usize| serde_json::json!({"type": "ok", "step": step});
        assert_eq!(
            sql_of(&merged)[1..7],
            [
                "SAVEPOINT member",
                "HEAD",
                "GATE",
                "BEHIND",
                "LAST",
                "RELEASE member"
            ]
        );
        assert_eq!(condition(2), ok(1));
        assert_eq!(condition(3), ok(2));
        assert_eq!(condition(4), ok(3), "behind the gate: only if it passed");
        let closed = serde_json::json!({"type": "or", "conds": [
            ok(4),
            {"type": "and", "conds": [{"type": "not", "cond": ok(3)}, ok(2)]},
        ]});
        assert_eq!(condition(5), closed);
        assert_eq!(condition(6), ok(5));

        let own_results =
            |reply: HttpReply| batch_results(&split(&members, &merged, Ok(reply)).verdicts);
        // BEGIN, SAVEPOINT, HEAD, GATE, BEHIND, LAST, RELEASE, ROLLBACK TO,
        // RELEASE, COMMIT, ROLLBACK
        let nothing_due = Some(r#"{"message":"nothing due","code":"SQLITE_ERROR"}"#);
        let mut errors = [None; 11];
        errors[3] = nothing_due;
        let head = Some(r#"{"cols":[],"rows":[],"affected_row_count":7}"#);
        let released = answer(
            &[OK, OK, head, None, None, OK, OK, None, None, OK, None],
            &errors,
        );
        let no_rows: serde_json::Value = serde_json::from_str(NO_ROWS).expect("json");
        for own in own_results(released) {
            let run = &own["step_results"][1];
            assert_eq!(run[0]["affected_row_count"], 7);
            assert_eq!((&run[1], &run[2]), (&no_rows, &no_rows), "{own}");
            assert!(own["step_results"][2].is_object(), "committed");
        }
        let disk = Some(r#"{"message":"disk I/O error","code":"SQLITE_IOERR"}"#);
        errors[5] = disk;
        let failed = answer(
            &[OK, OK, head, None, None, None, None, OK, OK, OK, None],
            &errors,
        );
        for own in own_results(failed) {
            assert_eq!(own["step_errors"][1]["message"], "disk I/O error");
            assert!(own["step_results"][2].is_null(), "not committed");
        }
    }

    /// Without a gate, or with the run's last statement named one (no
    /// statement stands behind it), every statement runs only if the one
    /// before it succeeded, and any failure rolls the run back with it.
    #[test]
    fn a_run_without_a_usable_gate_is_a_chain() {
        static CHAINED: Folds = &[&GateFold(None)];
        static LAST: Folds = &[&GateFold(Some(3))];
        let members = [member("GATED 1"), member("GATED 2")];
        for (folds, failing) in [(CHAINED, 3), (LAST, 5)] {
            let merged = merge(&members, folds);
            let v: serde_json::Value = serde_json::from_str(&merged.body).expect("json");
            let steps = v["requests"][0]["batch"]["steps"]
                .as_array()
                .expect("steps");
            for (i, step) in steps.iter().enumerate().take(7).skip(2) {
                assert_eq!(
                    step["condition"],
                    serde_json::json!({"type": "ok", "step": i - 1}),
                    "step {i} of {}",
                    merged.body
                );
            }
            // BEGIN, SAVEPOINT, HEAD, GATE, BEHIND, LAST, RELEASE, ROLLBACK
            // TO, RELEASE, COMMIT, ROLLBACK; the statement at `failing`
            // failed, and nothing after it in the run ran.
            let mut results = [OK, OK, OK, OK, OK, OK, None, OK, OK, OK, None];
            for r in &mut results[failing..7] {
                *r = None;
            }
            let mut errors = [None; 11];
            errors[failing] = Some(r#"{"message":"nothing due","code":"SQLITE_ERROR"}"#);
            let verdicts = split(&members, &merged, Ok(answer(&results, &errors))).verdicts;
            for own in batch_results(&verdicts) {
                assert_eq!(own["step_errors"][1]["message"], "nothing due", "{own}");
                assert!(own["step_results"][2].is_null(), "not committed: {own}");
            }
        }
    }

    #[test]
    fn a_batch_that_did_not_commit_is_retried_by_everyone() {
        let members = [member("SELECT 1"), member("SELECT 2")];
        let merged = merge(&members, &[]);
        let busy = Some(r#"{"message":"database is locked","code":"SQLITE_BUSY"}"#);
        let no_txn = Some(r#"{"message":"cannot rollback - no transaction is active"}"#);
        let other = Some(r#"{"message":"disk I/O error"}"#);
        let mut results = vec![None; 13];
        let mut errors = vec![None; 13];
        errors[0] = busy;
        results[12] = OK;
        let all_retry = |v: &[Verdict]| v.iter().all(|v| matches!(v, Verdict::Retry(_)));
        assert!(all_retry(
            &split(&members, &merged, Ok(answer(&results, &errors))).verdicts
        ));
        results[12] = None;
        errors[12] = no_txn;
        assert!(all_retry(
            &split(&members, &merged, Ok(answer(&results, &errors))).verdicts
        ));
        errors[12] = other;
        let verdicts = split(&members, &merged, Ok(answer(&results, &errors))).verdicts;
        assert!(
            verdicts.iter().all(|v| matches!(v, Verdict::Lost(_))),
            "{verdicts:?}"
        );
    }

    const CLOCK_ROW: Option<&str> = Some(
        r#"{"cols":[],"rows":[[{"type":"integer","value":"1733000000123"}]],"affected_row_count":0}"#,
    );

    /// A batch holding a write that wakes reads the database clock right
    /// before its COMMIT, under the same condition, and learns it only
    /// when it committed; every member still answers as it would alone.
    #[test]
    fn a_batch_with_a_waking_member_reads_the_clock_before_it_commits() {
        let quiet = [member("SELECT 1"), member("SELECT 2")];
        let quiet_merged = merge(&quiet, &[]);
        assert!(!quiet_merged.body.contains("unixepoch"), "no member wakes");
        let members = [member("SELECT 1"), member("SELECT 2").waking(true)];
        let merged = merge(&members, &[]);
        let body: serde_json::Value = serde_json::from_str(&merged.body).expect("json");
        let steps = body["requests"][0]["batch"]["steps"]
            .as_array()
            .expect("steps");
        // BEGIN, two members of five steps, the clock, COMMIT, ROLLBACK.
        assert_eq!(steps.len(), 14);
        assert_eq!(
            steps[11]["stmt"]["sql"],
            "SELECT CAST(round(unixepoch('subsec') * 1000) AS INTEGER)"
        );
        assert_eq!(steps[11]["condition"], steps[12]["condition"]);
        assert_eq!(steps[12]["stmt"]["sql"], "COMMIT");
        assert_eq!(
            steps[13]["condition"],
            serde_json::json!({"type":"not","cond":{"type":"ok","step":12}})
        );
        let members_ok = [OK, OK, ROW, OK, None, OK, OK, ROW, OK, None, OK];
        let with = |tail: &[Option<&'static str>]| {
            let mut results = members_ok.to_vec();
            results.extend_from_slice(tail);
            answer(&results, &vec![None; results.len()])
        };
        let committed = split(&members, &merged, Ok(with(&[CLOCK_ROW, OK, None])));
        assert_eq!(committed.clock, Some(1_733_000_000_123));
        let alone = split(&quiet, &quiet_merged, Ok(with(&[OK, None]))).verdicts;
        assert_eq!(committed.verdicts, alone, "the clock changes no answer");
        // The clock ran but COMMIT did not: nothing applied, no clock.
        let failed = split(&members, &merged, Ok(with(&[CLOCK_ROW, None, OK])));
        assert_eq!(failed.clock, None);
        assert!(
            failed
                .verdicts
                .iter()
                .all(|v| matches!(v, Verdict::Retry(_))),
            "{:?}",
            failed.verdicts
        );
    }

    /// A database answering every batch as committed, with the clock when
    /// the batch reads it.
    struct Commits;

    impl Transport for Commits {
        async fn send_pipeline(&self, body: &str) -> Result<HttpReply, TransportError> {
            // BEGIN, SAVEPOINT, the statement, RELEASE, ROLLBACK TO, RELEASE.
            let mut results = vec![OK, OK, ROW, OK, None, OK];
            if body.contains("unixepoch") {
                results.push(CLOCK_ROW);
            }
            results.extend([OK, None]);
            Ok(answer(&results, &vec![None; results.len()]))
        }
        async fn pause(&self, _millis: u32) {}
    }

    /// A member of up to `MEMBER_MAX_BYTES` goes through the coalescer; one
    /// byte more goes alone, directly.
    #[tokio::test]
    async fn a_member_of_the_size_limit_is_grouped_and_one_byte_more_goes_alone() {
        let grouped = GroupedTransport::new(Commits, Bounds::default());
        let group = Group {
            queue: "q",
            wakes: false,
        };
        let sized = |len: usize| {
            let bare = program("SELECT ''").len();
            program(&format!("SELECT '{}'", "x".repeat(len - bare)))
        };
        let at_limit = sized(MEMBER_MAX_BYTES);
        assert_eq!(at_limit.len(), MEMBER_MAX_BYTES);
        let (reply, carried) = grouped.send_grouped(group, &at_limit).await;
        assert!(reply.is_ok(), "{reply:?}");
        assert!(matches!(carried, Carried::Batch { .. }), "{carried:?}");
        let over = sized(MEMBER_MAX_BYTES + 1);
        let (_, carried) = grouped.send_grouped(group, &over).await;
        assert_eq!(carried, Carried::Direct);
    }

    /// Only a write that wakes learns the batch's clock.
    #[tokio::test]
    async fn only_a_waking_write_learns_when_its_batch_committed() {
        let coalescer = Coalescer::default();
        let woke = coalescer.submit(&Commits, &program("SELECT 1"), true).await;
        assert!(matches!(woke.verdict, Verdict::Answer(_)), "{woke:?}");
        assert_eq!(woke.woke_at, Some(1_733_000_000_123));
        let quiet = coalescer
            .submit(&Commits, &program("SELECT 1"), false)
            .await;
        assert!(matches!(quiet.verdict, Verdict::Answer(_)), "{quiet:?}");
        assert_eq!(quiet.woke_at, None);
    }

    /// A database whose every batch waits for a permit, then is refused
    /// before it ran (every member: retry).
    struct Gated(tokio::sync::Semaphore);

    impl Transport for Gated {
        async fn send_pipeline(&self, _body: &str) -> Result<HttpReply, TransportError> {
            let _permit = self.0.acquire().await;
            Err(TransportError::NotSent("refused".into()))
        }
        async fn pause(&self, _millis: u32) {}
    }

    /// How a write that formed a batch by itself was carried.
    const ALONE_IN_ITS_BATCH: Carried = Carried::Batch {
        members: 1,
        first: true,
        folded: false,
    };

    /// Polls `future` once.
    async fn poll_once<F: std::future::Future + Unpin>(
        future: &mut F,
    ) -> std::task::Poll<F::Output> {
        std::future::poll_fn(|cx| std::task::Poll::Ready(std::pin::Pin::new(&mut *future).poll(cx)))
            .await
    }

    /// A waiter handed the lead whose request goes away before it led
    /// passes the lead on: the waiter behind it still gets its answer.
    #[tokio::test]
    async fn a_waiter_dropped_with_the_lead_passes_it_on() {
        let coalescer = Coalescer::default();
        let database = Gated(tokio::sync::Semaphore::new(0));
        let pipeline = program;
        let (a, b, c) = (
            pipeline("SELECT 1"),
            pipeline("SELECT 2"),
            pipeline("SELECT 3"),
        );
        let mut first = Box::pin(coalescer.submit(&database, &a, false));
        let mut second = Box::pin(coalescer.submit(&database, &b, false));
        let mut third = Box::pin(coalescer.submit(&database, &c, false));
        // The first leads and waits on the database; the others queue.
        assert!(poll_once(&mut first).await.is_pending());
        assert!(poll_once(&mut second).await.is_pending());
        assert!(poll_once(&mut third).await.is_pending());
        // Its batch answered, it hands the lead to the second...
        database.0.add_permits(8);
        let verdict = first.await.verdict;
        assert!(matches!(verdict, Verdict::Retry(_)), "{verdict:?}");
        // ...whose request goes away before it is polled again.
        drop(second);
        let third = tokio::time::timeout(std::time::Duration::from_secs(5), third).await;
        let Submitted {
            verdict, carried, ..
        } = third.expect("the third was stranded");
        assert!(matches!(verdict, Verdict::Retry(_)), "{verdict:?}");
        assert_eq!(carried, ALONE_IN_ITS_BATCH);
    }

    /// Idle only with no batch in flight and none waiting: what lets a
    /// lone write's answer tell the Worker its queue is idle (`store::lone`).
    #[tokio::test]
    async fn idle_only_with_no_batch_in_flight_and_none_waiting() {
        let coalescer = Coalescer::default();
        assert!(coalescer.idle());
        let database = Gated(tokio::sync::Semaphore::new(0));
        let (a, b) = (program("SELECT 1"), program("SELECT 2"));
        let mut first = Box::pin(coalescer.submit(&database, &a, false));
        assert!(poll_once(&mut first).await.is_pending());
        assert!(!coalescer.idle(), "a batch in flight");
        let mut second = Box::pin(coalescer.submit(&database, &b, false));
        assert!(poll_once(&mut second).await.is_pending());
        database.0.add_permits(8);
        first.await;
        assert!(!coalescer.idle(), "the second leads next");
        second.await;
        assert!(coalescer.idle());
    }

    /// A database that keeps the pipelines it was sent, each batch waiting
    /// for a permit, then refused (every member: retry).
    struct Keeping {
        gate: tokio::sync::Semaphore,
        seen: Mutex<Vec<String>>,
    }

    impl Keeping {
        fn new(permits: usize) -> Self {
            Keeping {
                gate: tokio::sync::Semaphore::new(permits),
                seen: Mutex::default(),
            }
        }

        fn saw(&self, sql: &str) -> usize {
            let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
            seen.iter().filter(|body| body.contains(sql)).count()
        }
    }

    impl Transport for Keeping {
        async fn send_pipeline(&self, body: &str) -> Result<HttpReply, TransportError> {
            let _permit = self.gate.acquire().await;
            let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
            seen.push(body.to_owned());
            Err(TransportError::NotSent("refused".into()))
        }
        async fn pause(&self, _millis: u32) {}
    }

    /// Writes of one queue naming two databases (a name being placed) never
    /// meet in a batch: each runs in the database it names, and one
    /// database's batch in flight does not hold up the other's writes.
    #[tokio::test]
    async fn writes_naming_another_database_form_their_own_batches() {
        let lanes = PerDatabase::new(
            [
                ("main".to_owned(), Keeping::new(0)),
                ("eu".to_owned(), Keeping::new(8)),
            ],
            &[],
        );
        let (a, b, c) = (
            program("SELECT 1"),
            program("SELECT 2"),
            program("SELECT 3"),
        );
        let mut first = Box::pin(lanes.submit("main", &a, false));
        let mut second = Box::pin(lanes.submit("main", &b, false));
        assert!(
            poll_once(&mut first).await.is_pending(),
            "main's batch in flight"
        );
        assert!(poll_once(&mut second).await.is_pending(), "behind it");
        let eu = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            lanes.submit("eu", &c, false),
        )
        .await
        .expect("eu's write waited behind main's batch");
        let Some(Submitted { carried, .. }) = eu else {
            panic!("eu is configured");
        };
        assert_eq!(carried, ALONE_IN_ITS_BATCH);
        assert!(!lanes.idle(), "main's batch is still in flight");
        let (main, eu) = (&lanes.lanes[0].1, &lanes.lanes[1].1);
        main.gate.add_permits(8);
        assert!(first.await.is_some());
        assert!(second.await.is_some());
        assert!(lanes.idle());
        assert_eq!(
            (
                main.saw("SELECT 1"),
                main.saw("SELECT 2"),
                main.saw("SELECT 3")
            ),
            (1, 1, 0)
        );
        assert_eq!(
            (eu.saw("SELECT 1"), eu.saw("SELECT 2"), eu.saw("SELECT 3")),
            (0, 0, 1)
        );
        assert!(lanes.submit("us", &a, false).await.is_none());
    }

    #[test]
    fn transport_outcomes_reach_every_member() {
        let members = [member("SELECT 1"), member("SELECT 2")];
        let merged = merge(&members, &[]);
        let sent = |r| split(&members, &merged, r).verdicts;
        assert!(sent(Err(TransportError::NotSent("refused".into())))
            .iter()
            .all(|v| matches!(v, Verdict::Retry(_))));
        assert!(sent(Err(TransportError::AnswerLost("reset".into())))
            .iter()
            .all(|v| matches!(v, Verdict::Lost(_))));
        let gateway = HttpReply {
            status: 502,
            body: b"bad gateway".to_vec(),
        };
        assert_eq!(
            sent(Ok(gateway.clone())),
            vec![Verdict::Answer(gateway.clone()), Verdict::Answer(gateway)]
        );
        let garbled = HttpReply {
            status: 200,
            body: b"{\"results\":[".to_vec(),
        };
        assert!(sent(Ok(garbled))
            .iter()
            .all(|v| matches!(v, Verdict::Lost(_))));
        let stream_error = HttpReply {
            status: 200,
            body: br#"{"results":[{"type":"error","error":{"message":"stream expired"}}]}"#
                .to_vec(),
        };
        assert!(sent(Ok(stream_error))
            .iter()
            .all(|v| matches!(v, Verdict::Retry(_))));
    }

    #[test]
    fn only_write_programs_are_members() {
        let read = r#"{"baton":null,"requests":[{"type":"batch","batch":{"steps":[
            {"stmt":{"sql":"BEGIN","args":[],"want_rows":false}},
            {"stmt":{"sql":"SELECT 1","args":[],"want_rows":true}},
            {"stmt":{"sql":"COMMIT","args":[],"want_rows":false}},
            {"stmt":{"sql":"ROLLBACK","args":[],"want_rows":false}}]}},{"type":"close"}]}"#;
        assert!(Member::parse(read).is_err());
        assert!(Member::parse("{}").is_err());
        assert!(Member::parse("not json").is_err());
    }
}
