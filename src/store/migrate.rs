//! Schema migrations: numbered SQL files embedded in the binary, applied in
//! order, each in one transaction that also advances `schema_version`.
//!
//! Concurrency: every migration runs under `BEGIN IMMEDIATE` and first checks
//! that the recorded version is still the one it migrates from, so two
//! isolates racing on a fresh database apply each migration exactly once.
//! A database at a version newer than this build knows is refused untouched.

use super::hrana::Value;
use super::hrana::{Args, Batch, BatchStep, Condition, PipelineRequest, Stmt, StreamRequest};
use super::{RunStats, Store, StoreError, Transport};

/// One migration file.
pub struct Migration {
    pub version: i64,
    pub name: &'static str,
    pub sql: &'static str,
}

/// Every migration, in order. Versions are consecutive from 1.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "0001_init.sql",
        sql: include_str!("../../migrations/0001_init.sql"),
    },
    Migration {
        version: 2,
        name: "0002_group_heads.sql",
        sql: include_str!("../../migrations/0002_group_heads.sql"),
    },
    Migration {
        version: 3,
        name: "0003_subscription_revisions.sql",
        sql: include_str!("../../migrations/0003_subscription_revisions.sql"),
    },
    Migration {
        version: 4,
        name: "0004_lean_writes.sql",
        sql: include_str!("../../migrations/0004_lean_writes.sql"),
    },
    Migration {
        version: 5,
        name: "0005_pgmq.sql",
        sql: include_str!("../../migrations/0005_pgmq.sql"),
    },
    Migration {
        version: 6,
        name: "0006_waiters.sql",
        sql: include_str!("../../migrations/0006_waiters.sql"),
    },
    Migration {
        version: 7,
        name: "0007_no_lock_token_index.sql",
        sql: include_str!("../../migrations/0007_no_lock_token_index.sql"),
    },
    Migration {
        version: 8,
        name: "0008_state_index_without_hot_rows.sql",
        sql: include_str!("../../migrations/0008_state_index_without_hot_rows.sql"),
    },
    Migration {
        version: 9,
        name: "0009_placements.sql",
        sql: include_str!("../../migrations/0009_placements.sql"),
    },
    Migration {
        version: 10,
        name: "0010_redrive_across.sql",
        sql: include_str!("../../migrations/0010_redrive_across.sql"),
    },
    Migration {
        version: 11,
        name: "0011_redrive_trips.sql",
        sql: include_str!("../../migrations/0011_redrive_trips.sql"),
    },
];

/// The schema version this build reads and writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS[MIGRATIONS.len() - 1].version;

/// What [`ensure_schema`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationReport {
    pub from: i64,
    pub to: i64,
}

/// Brings the database to [`SCHEMA_VERSION`], or refuses a newer one.
pub async fn ensure_schema<T: Transport>(store: &Store<T>) -> Result<MigrationReport, StoreError> {
    ensure_schema_within(store, &mut RunStats::default()).await
}

/// [`ensure_schema`], counting its requests in `stats` (a run that meets an
/// old schema migrates within its own fetch budget).
pub(crate) async fn ensure_schema_within<T: Transport>(
    store: &Store<T>,
    stats: &mut RunStats,
) -> Result<MigrationReport, StoreError> {
    let from = current_version(store, stats).await?;
    let mut version = from;
    if version > SCHEMA_VERSION {
        return Err(StoreError::SchemaTooNew {
            found: version,
            supported: SCHEMA_VERSION,
        });
    }
    for migration in MIGRATIONS {
        if migration.version <= version {
            continue;
        }
        apply(store, migration, stats).await?;
        // Re-read: another isolate may have applied it (and more) meanwhile.
        version = current_version(store, stats).await?;
        if version > SCHEMA_VERSION {
            return Err(StoreError::SchemaTooNew {
                found: version,
                supported: SCHEMA_VERSION,
            });
        }
    }
    Ok(MigrationReport { from, to: version })
}

/// The recorded version; 0 for a database that has never been migrated.
async fn current_version<T: Transport>(
    store: &Store<T>,
    stats: &mut RunStats,
) -> Result<i64, StoreError> {
    let batch = Batch {
        steps: vec![step(
            "SELECT coalesce((SELECT max(version) FROM schema_version), 0)",
            None,
        )],
    };
    let result = store.send_raw(&pipeline(batch), false, stats).await?;
    if let Some(Some(error)) = result.step_errors.first() {
        if error.message.contains("no such table") {
            return Ok(0);
        }
        return Err(StoreError::Failed(error.message.clone()));
    }
    let version = result
        .step_results
        .first()
        .and_then(Option::as_ref)
        .and_then(|r| r.rows.first())
        .and_then(|row| row.first())
        .cloned();
    match version {
        Some(Value::Integer { value }) => Ok(value),
        other => Err(StoreError::Failed(format!(
            "unreadable schema version: {other:?}"
        ))),
    }
}

async fn apply<T: Transport>(
    store: &Store<T>,
    migration: &Migration,
    stats: &mut RunStats,
) -> Result<(), StoreError> {
    let mut steps = vec![
        step("BEGIN IMMEDIATE", None),
        step(
            "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL) STRICT",
            None,
        ),
        step(
            "INSERT INTO schema_version (version) \
             SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM schema_version)",
            None,
        ),
        step(
            &format!(
                "SELECT json(CASE WHEN (SELECT max(version) FROM schema_version) <> {} \
                 THEN 'abort' ELSE '0' END)",
                migration.version - 1
            ),
            None,
        ),
    ];
    for sql in split_statements(migration.sql) {
        steps.push(step(&sql, None));
    }
    steps.push(step(
        &format!("UPDATE schema_version SET version = {}", migration.version),
        None,
    ));
    // Chain every step on its predecessor, then COMMIT or ROLLBACK.
    for (i, step) in steps.iter_mut().enumerate().skip(1) {
        step.condition = Some(Condition::Ok { step: i - 1 });
    }
    let commit = steps.len();
    steps.push(step("COMMIT", Some(Condition::Ok { step: commit - 1 })));
    steps.push(step(
        "ROLLBACK",
        Some(Condition::Not {
            cond: Box::new(Condition::Ok { step: commit }),
        }),
    ));
    let guard_index = 3;
    let result = store
        .send_raw(&pipeline(Batch { steps }), true, stats)
        .await?;
    if result.step_results.get(commit).is_some_and(Option::is_some) {
        return Ok(());
    }
    match result
        .step_errors
        .iter()
        .enumerate()
        .find_map(|(i, e)| e.as_ref().map(|e| (i, e)))
    {
        // Someone else moved the version on first: not an error.
        Some((i, _)) if i == guard_index => Ok(()),
        Some((_, e)) if e.is_busy() => Ok(()),
        Some((_, e)) => Err(StoreError::Failed(format!(
            "migration {} failed: {}",
            migration.name, e.message
        ))),
        None => Err(StoreError::Failed(format!(
            "migration {} did not commit",
            migration.name
        ))),
    }
}

fn step(sql: &str, condition: Option<Condition>) -> BatchStep<'static> {
    BatchStep {
        condition,
        stmt: Stmt {
            sql: sql.to_owned().into(),
            args: Args::NONE,
            want_rows: true,
        },
    }
}

fn pipeline(batch: Batch) -> String {
    let request = PipelineRequest {
        baton: None,
        requests: vec![StreamRequest::Batch { batch }, StreamRequest::Close],
    };
    serde_json::to_string(&request).unwrap_or_default()
}

/// Splits a migration file into statements at top-level semicolons,
/// skipping `--` comments and respecting quoted strings and identifiers.
pub fn split_statements(sql: &str) -> Vec<String> {
    let mut statements = Vec::new();
    let mut current = String::new();
    let mut chars = sql.chars().peekable();
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        match quote {
            Some(q) => {
                current.push(c);
                if c == q {
                    quote = None;
                }
            }
            None => match c {
                '\'' | '"' | '`' => {
                    quote = Some(c);
                    current.push(c);
                }
                '-' if chars.peek() == Some(&'-') => {
                    for skipped in chars.by_ref() {
                        if skipped == '\n' {
                            current.push('\n');
                            break;
                        }
                    }
                }
                // A trigger body holds statements of its own: it ends at `END;`.
                ';' if in_trigger_body(&current) => current.push(c),
                ';' => {
                    let statement = current.trim();
                    if !statement.is_empty() {
                        statements.push(statement.to_owned());
                    }
                    current.clear();
                }
                _ => current.push(c),
            },
        }
    }
    let tail = current.trim();
    if !tail.is_empty() {
        statements.push(tail.to_owned());
    }
    statements
}

/// Inside `CREATE TRIGGER … BEGIN … END` before its closing `END`.
fn in_trigger_body(statement: &str) -> bool {
    let upper = statement.trim_start().to_ascii_uppercase();
    upper.starts_with("CREATE TRIGGER") && !upper.trim_end().ends_with("END")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_at_top_level_semicolons_only() {
        let sql =
            "-- a; comment\nCREATE TABLE a (x TEXT DEFAULT ';');\n\nINSERT INTO a VALUES ('--');";
        assert_eq!(
            split_statements(sql),
            vec![
                "CREATE TABLE a (x TEXT DEFAULT ';')".to_owned(),
                "INSERT INTO a VALUES ('--')".to_owned()
            ]
        );
    }

    /// A lone `-` is an operator; only `--` starts a comment.
    #[test]
    fn a_minus_sign_is_not_a_comment() {
        assert_eq!(
            split_statements("UPDATE t SET x = x - 1; -- done\nSELECT 3;"),
            vec!["UPDATE t SET x = x - 1".to_owned(), "SELECT 3".to_owned()]
        );
    }

    #[test]
    fn trigger_bodies_stay_whole() {
        let sql = "CREATE TABLE t (x);\nCREATE TRIGGER g AFTER INSERT ON t BEGIN\n  DELETE FROM t;\n  INSERT INTO t VALUES (1);\nEND;\nCREATE INDEX i ON t (x);";
        let statements = split_statements(sql);
        assert_eq!(statements.len(), 3, "{statements:#?}");
        assert!(statements[1].ends_with("END"));
    }

    #[test]
    fn versions_are_consecutive_from_one() {
        for (i, m) in MIGRATIONS.iter().enumerate() {
            assert_eq!(m.version, i as i64 + 1, "{}", m.name);
        }
    }
}
