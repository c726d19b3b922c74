//! Gated steps (`Program::gate`): a gate that fails skips only the steps
//! behind it and the program commits; a gate that passes runs them; a
//! failure behind a passed gate still rolls the whole program back.

mod support;

use mqlite_edge::store::{Program, RunError, Statement, Store};
use support::*;

const CREATE: Statement = mqlite_edge::statement!("CREATE TABLE IF NOT EXISTS t (v TEXT)");
const MARK: Statement = mqlite_edge::statement!("INSERT INTO t (v) VALUES (?1)");
/// Fails (skips what it gates) unless `?1` is 1.
const GATE: Statement =
    mqlite_edge::statement!("SELECT json(CASE WHEN ?1 = 1 THEN '0' ELSE 'closed' END)");
const BROKEN: Statement = mqlite_edge::statement!("INSERT INTO no_such_table VALUES (1)");
const MARKS: Statement = mqlite_edge::statement!("SELECT group_concat(v, ',') FROM t");

async fn marks(store: &Store<InProcess>) -> String {
    let mut read = Program::read();
    let step = read.step(&MARKS, vec![]);
    let done = store.run(&read).await.expect("read marks");
    let text = done
        .first_row(step)
        .and_then(|r| r.opt_text(0).ok().flatten().map(str::to_owned));
    text.unwrap_or_default()
}

async fn run_gated(store: &Store<InProcess>, open: bool, broken: bool) -> Result<(), RunError> {
    let mut program = Program::write();
    program.step(&MARK, vec!["before".into()]);
    let gate = program.gate(&GATE, vec![i64::from(open).into()]);
    program.gated(gate, &MARK, vec!["gated-1".into()]);
    if broken {
        program.gated(gate, &BROKEN, vec![]);
    }
    program.gated(gate, &MARK, vec!["gated-2".into()]);
    program.step(&MARK, vec!["after".into()]);
    store.run(&program).await.map(|_| ())
}

async fn setup() -> (TempDb, Store<InProcess>) {
    let temp = TempDb::new();
    let store = Store::new(InProcess {
        db: temp.db.clone(),
    });
    let mut program = Program::write();
    program.step(&CREATE, vec![]);
    store.run(&program).await.expect("create");
    (temp, store)
}

#[tokio::test]
async fn a_closed_gate_skips_its_steps_and_the_rest_commits() {
    let (_temp, store) = setup().await;
    run_gated(&store, false, false).await.expect("commits");
    assert_eq!(marks(&store).await, "before,after");
}

#[tokio::test]
async fn an_open_gate_runs_its_steps_in_order() {
    let (_temp, store) = setup().await;
    run_gated(&store, true, false).await.expect("commits");
    assert_eq!(marks(&store).await, "before,gated-1,gated-2,after");
}

#[tokio::test]
async fn a_failure_behind_an_open_gate_rolls_everything_back() {
    let (_temp, store) = setup().await;
    let outcome = run_gated(&store, true, true).await;
    assert!(outcome.is_err(), "{outcome:?}");
    assert_eq!(marks(&store).await, "");
}

#[tokio::test]
async fn a_closed_gate_never_hides_a_later_failure() {
    let (_temp, store) = setup().await;
    let mut program = Program::write();
    program.step(&MARK, vec!["before".into()]);
    let gate = program.gate(&GATE, vec![0.into()]);
    program.gated(gate, &MARK, vec!["gated".into()]);
    program.step(&BROKEN, vec![]);
    let outcome = store.run(&program).await;
    match outcome {
        Err(RunError::Store(e)) => assert!(e.to_string().contains("no_such_table"), "{e}"),
        other => panic!("expected the broken step's error, got {other:?}"),
    }
    assert_eq!(marks(&store).await, "");
}

/// Only a guard's failure is a domain answer: a data step failing the same
/// way (its own `json()` of text that is not JSON) is the database failing,
/// and the program rolls back.
#[tokio::test]
async fn a_data_step_failing_like_a_guard_is_a_failure_not_a_rejection() {
    const NOT_JSON: Statement = mqlite_edge::statement!("SELECT json('not json')");
    let (_temp, store) = setup().await;
    let mut program = Program::write();
    program.step(&MARK, vec!["before".into()]);
    program.step(&NOT_JSON, vec![]);
    let outcome = store.run(&program).await.map(|_| ());
    assert!(
        matches!(
            outcome,
            Err(RunError::Store(mqlite_edge::store::StoreError::Failed(_)))
        ),
        "{outcome:?}"
    );
    assert_eq!(marks(&store).await, "");
}

/// The prelude (the managed-key check) runs before every other statement:
/// when it fires, the run says so (`PreludeRejected`, answered 401) and
/// nothing behind it applied; when it passes, the program runs.
#[tokio::test]
async fn a_fired_prelude_is_reported_as_the_prelude_and_nothing_runs() {
    let (_temp, store) = setup().await;
    for open in [false, true] {
        let mut program = Program::write();
        program.set_prelude(&GATE, vec![i64::from(open).into()]);
        program.step(&MARK, vec![format!("open {open}").into()]);
        let outcome = store.run(&program).await.map(|_| ());
        if open {
            assert_eq!(outcome, Ok(()));
        } else {
            assert_eq!(outcome, Err(RunError::PreludeRejected));
        }
    }
    assert_eq!(marks(&store).await, "open true");
}
