//! Migrations: applied by the first request, exactly once under concurrency,
//! and a database from a newer build is refused untouched.

mod support;

use std::sync::Arc;

use mqlite_edge::engine::{Clock, Engine, EngineError, Limits, QueueConfigInput};
use mqlite_edge::store::migrate::{ensure_schema, MigrationReport, SCHEMA_VERSION};
use mqlite_edge::store::{Program, Statement, StoreError};
use support::*;

fn engine(temp: &TempDb) -> Engine<InProcess> {
    Engine::new(
        InProcess {
            db: temp.db.clone(),
        },
        Clock::manual(T0),
        Limits::default(),
    )
}

#[tokio::test]
async fn the_first_request_migrates_a_fresh_database() {
    let temp = TempDb::new();
    let e = engine(&temp);
    e.create_queue("q", &QueueConfigInput::default())
        .await
        .expect("create on a fresh database");
    let version = query(&e, "SELECT version FROM schema_version").await;
    assert_eq!(version, vec![vec![serde_json::json!(SCHEMA_VERSION)]]);
    let report = ensure_schema(e.store()).await.expect("idempotent");
    assert_eq!(
        report,
        MigrationReport {
            from: SCHEMA_VERSION,
            to: SCHEMA_VERSION
        }
    );
}

#[tokio::test]
async fn concurrent_first_requests_apply_each_migration_once() {
    let temp = TempDb::new();
    let engines: Vec<_> = (0..8).map(|_| Arc::new(engine(&temp))).collect();
    let tasks: Vec<_> = engines
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let e = e.clone();
            tokio::spawn(async move {
                e.create_queue(&format!("q{i}"), &QueueConfigInput::default())
                    .await
            })
        })
        .collect();
    for t in tasks {
        t.await
            .expect("task")
            .expect("every first request succeeds");
    }
    let e = &engines[0];
    assert_eq!(
        query(e, "SELECT count(*) FROM schema_version").await,
        vec![vec![serde_json::json!(1)]]
    );
    assert_eq!(e.list_queues().await.expect("list").len(), 8);
}

#[tokio::test]
async fn a_newer_schema_is_refused_and_left_untouched() {
    let temp = TempDb::new();
    let e = engine(&temp);
    e.create_queue("q", &QueueConfigInput::default())
        .await
        .expect("create");
    const BUMP: Statement = mqlite_edge::statement!("UPDATE schema_version SET version = 99");
    let mut bump = Program::write();
    bump.step(&BUMP, vec![]);
    // Runs under the current schema check, then moves the version on.
    e.store().run(&bump).await.expect("bump");
    let err = e
        .create_queue("other", &QueueConfigInput::default())
        .await
        .expect_err("refused");
    assert_eq!(
        err,
        EngineError::Store(StoreError::SchemaTooNew {
            found: 99,
            supported: SCHEMA_VERSION
        })
    );
    let raw = temp.db.pipeline(
        None,
        br#"{"baton":null,"requests":[{"type":"execute","stmt":{"sql":"SELECT version, (SELECT count(*) FROM queues) FROM schema_version"}},{"type":"close"}]}"#,
    );
    assert!(
        raw.body
            .contains(r#""value":"99"},{"type":"integer","value":"1"}"#),
        "{}",
        raw.body
    );
}

#[tokio::test]
async fn a_schema_check_still_failing_after_the_migration_is_a_failure_not_a_loop() {
    let temp = TempDb::new();
    let e = engine(&temp);
    e.create_queue("q", &QueueConfigInput::default())
        .await
        .expect("create");
    // A second, older version row: the migration finds nothing to apply
    // (the newest version is current), yet every program's schema check
    // still fires on that row. One migration, then a definite failure.
    const OLDER_ROW: Statement = mqlite_edge::statement!(
        "INSERT INTO schema_version (version) SELECT max(version) - 1 FROM schema_version"
    );
    let mut older = Program::write();
    older.step(&OLDER_ROW, vec![]);
    // Runs under the current schema check, then adds the row.
    e.store().run(&older).await.expect("older row");
    let err = e.list_queues().await.expect_err("refused");
    assert_eq!(
        err,
        EngineError::Store(StoreError::Failed(
            "schema check still failing after migration".into()
        ))
    );
}
