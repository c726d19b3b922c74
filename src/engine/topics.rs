//! Topics (docs/semantics.md#filters, #administration): Subscribe, ListSubscriptions, TestFilter,
//! and the isolate's cache of compiled subscription filters that lets a
//! publish evaluate filters before its single round trip.
//!
//! A publish is evaluated against the cached view of its topic and carries
//! that view's fingerprint into its transaction; a guard aborts the
//! transaction if the topic changed since (see migration 0003). The aborted
//! attempt already read the current subscriptions, so a stale or cold cache
//! costs exactly one more round trip and never applies a stale filter.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::{random_hex, unexpected, Engine, EngineError};
use crate::filter::{Filter, FilterInput};
use crate::store::Statement;
use crate::store::{Program, RunError, Transport};

/// Topics whose compiled filters one isolate keeps; past this the cache
/// starts over (a miss costs one extra round trip, never a wrong answer).
const MAX_CACHED_TOPICS: usize = 512;

/// One subscription of a topic with its compiled filter.
pub struct Subscription {
    pub name: String,
    /// `None` when the stored filter no longer compiles: fail closed.
    filter: Option<Filter>,
}

impl Subscription {
    /// Whether this subscription takes the message; a runtime error (or an
    /// uncompilable stored filter) routes nothing and is reported.
    pub fn accepts(&self, message: &FilterInput<'_>) -> Result<bool, String> {
        match &self.filter {
            Some(filter) => filter.evaluate(message),
            None => Err("stored filter does not compile".into()),
        }
    }
}

/// A topic's subscriptions in ascending name order, as of `fingerprint`.
pub struct TopicView {
    pub fingerprint: String,
    pub subscriptions: Vec<Subscription>,
}

/// The fingerprint of a name without subscriptions (not a topic).
const NO_TOPIC: &str = "0:0";

impl TopicView {
    /// What a name is assumed to be before anything is known: not a topic.
    pub fn none() -> Arc<TopicView> {
        Arc::new(TopicView {
            fingerprint: NO_TOPIC.into(),
            subscriptions: Vec::new(),
        })
    }

    pub fn is_topic(&self) -> bool {
        !self.subscriptions.is_empty()
    }

    /// Builds the view from a topic's `(name, filter, revision)` rows in
    /// ascending name order.
    pub(super) fn new(rows: Vec<(String, Option<String>, i64)>) -> Self {
        let mut max_revision = 0;
        let subscriptions: Vec<Subscription> = rows
            .into_iter()
            .map(|(name, source, revision)| {
                max_revision = max_revision.max(revision);
                Subscription {
                    name,
                    filter: Filter::compile(source.as_deref().unwrap_or_default()).ok(),
                }
            })
            .collect();
        TopicView {
            fingerprint: format!("{}:{}", subscriptions.len(), max_revision),
            subscriptions,
        }
    }
}

/// Compiled topic views of one database, shared by the requests an isolate
/// serves.
#[derive(Default)]
pub struct TopicCache {
    topics: Mutex<HashMap<String, Arc<TopicView>>>,
}

impl TopicCache {
    pub fn get(&self, topic: &str) -> Arc<TopicView> {
        let topics = self.topics.lock().unwrap_or_else(|p| p.into_inner());
        topics.get(topic).cloned().unwrap_or_else(TopicView::none)
    }

    pub fn put(&self, topic: &str, view: Arc<TopicView>) {
        let mut topics = self.topics.lock().unwrap_or_else(|p| p.into_inner());
        if topics.len() >= MAX_CACHED_TOPICS {
            topics.clear();
        }
        topics.insert(topic.to_owned(), view);
    }
}

/// One ListSubscriptions entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriptionSummary {
    pub topic: String,
    pub name: String,
    /// `None` = match all.
    pub expr: Option<String>,
}

/// What TestFilter found (docs/http-api.md#rpcs).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FilterTest {
    pub valid: bool,
    pub error: Option<String>,
    pub ran: bool,
    pub matched: bool,
}

/// Subscribe's namespace guards, in the wire contract's order.
const TOPIC_IS_QUEUE: Statement = crate::guard!("EXISTS (SELECT 1 FROM queues WHERE name = ?1)");
const NAME_IS_PLAIN_QUEUE: Statement =
    crate::guard!("EXISTS (SELECT 1 FROM queues WHERE name = ?1 AND kind = 'queue')");
const NAME_IN_OTHER_TOPIC: Statement =
    crate::guard!("EXISTS (SELECT 1 FROM subscriptions WHERE subscription = ?2 AND topic <> ?1)");
const NAME_IS_TOPIC: Statement =
    crate::guard!("EXISTS (SELECT 1 FROM subscriptions WHERE topic = ?1)");

/// The backing queue with default configuration, unless it exists (its
/// configuration is never reset by a re-subscribe).
const CREATE_BACKING_QUEUE: Statement = crate::statement!(
    "\
INSERT INTO queues (name, kind, generation, created_at, updated_at)
VALUES (?1, 'subscription', ?2, {now}, {now})
ON CONFLICT (name) DO NOTHING"
);

/// Insert or replace the mapping's filter, stamping a revision above every
/// other so the topic's fingerprint changes.
const UPSERT_SUBSCRIPTION: Statement = crate::statement!(
    "\
INSERT INTO subscriptions (topic, subscription, filter, created_at, revision)
VALUES (?1, ?2, ?3, {now}, (SELECT coalesce(max(revision), 0) + 1 FROM subscriptions))
ON CONFLICT (topic, subscription) DO UPDATE SET
  filter = excluded.filter, revision = excluded.revision"
);

const LIST_SUBSCRIPTIONS: Statement = crate::statement!(
    "SELECT topic, subscription, filter FROM subscriptions ORDER BY topic, subscription"
);

/// Compiles a filter as Subscribe and TestFilter do.
pub fn compile_filter(source: &str) -> Result<Filter, EngineError> {
    Filter::compile(source).map_err(|e| {
        EngineError::InvalidArgument(format!(
            "mqlite: invalid subscription filter expression: {e}"
        ))
    })
}

impl<T: Transport> Engine<T> {
    /// Creates or updates a subscription (docs/semantics.md#administration).
    pub async fn subscribe(&self, topic: &str, name: &str, expr: &str) -> Result<(), EngineError> {
        if topic.is_empty() || name.is_empty() {
            return Err(EngineError::InvalidArgument(
                "topic and subscription name required".into(),
            ));
        }
        if topic == name {
            return Err(EngineError::NameConflict(format!(
                "mqlite: subscription {name:?} cannot be named after its own topic"
            )));
        }
        let filter = compile_filter(expr)?;
        let stored = (!filter.is_match_all()).then_some(expr);
        let generation = random_hex(16)?;
        let mut program = Program::write();
        let both = || vec![topic.into(), name.into()];
        let conflicts = [
            (
                program.guard(&TOPIC_IS_QUEUE, vec![topic.into()]),
                format!("mqlite: topic {topic:?} is the name of a queue"),
            ),
            (
                program.guard(&NAME_IS_PLAIN_QUEUE, vec![name.into()]),
                format!("mqlite: {name:?} is a plain queue"),
            ),
            (
                program.guard(&NAME_IN_OTHER_TOPIC, both()),
                format!("mqlite: {name:?} is already subscribed to another topic"),
            ),
            (
                program.guard(&NAME_IS_TOPIC, vec![name.into()]),
                format!("mqlite: {name:?} is a topic"),
            ),
        ];
        program.step(&CREATE_BACKING_QUEUE, vec![name.into(), generation.into()]);
        program.step(
            &UPSERT_SUBSCRIPTION,
            vec![topic.into(), name.into(), stored.into()],
        );
        match self.run(&mut program).await {
            Ok(_) => Ok(()),
            Err(RunError::Rejected(step)) => {
                match conflicts.into_iter().find(|(s, _)| *s == step) {
                    Some((_, message)) => Err(EngineError::NameConflict(message)),
                    None => Err(unexpected(RunError::Rejected(step))),
                }
            }
            Err(e) => Err(unexpected(e)),
        }
    }

    /// Every subscription, ordered by topic then name.
    pub async fn list_subscriptions(&self) -> Result<Vec<SubscriptionSummary>, EngineError> {
        let mut program = Program::read();
        let list = program.step(&LIST_SUBSCRIPTIONS, vec![]);
        let committed = self.run(&mut program).await.map_err(unexpected)?;
        committed
            .rows(list)
            .map(|row| {
                Ok(SubscriptionSummary {
                    topic: row.text(0)?.to_owned(),
                    name: row.text(1)?.to_owned(),
                    expr: row.opt_text(2)?.map(str::to_owned),
                })
            })
            .collect()
    }

    /// Compiles `expr` and, given a sample, evaluates it exactly as fan-out
    /// would (docs/semantics.md#filters). Stores nothing.
    pub fn test_filter(&self, expr: &str, sample: Option<&FilterInput<'_>>) -> FilterTest {
        let filter = match Filter::compile(expr) {
            Ok(filter) => filter,
            Err(e) => {
                return FilterTest {
                    error: Some(e.to_string()),
                    ..FilterTest::default()
                }
            }
        };
        let Some(sample) = sample else {
            return FilterTest {
                valid: true,
                ..FilterTest::default()
            };
        };
        match filter.evaluate(sample) {
            Ok(matched) => FilterTest {
                valid: true,
                error: None,
                ran: true,
                matched,
            },
            Err(e) => FilterTest {
                valid: true,
                error: Some(e),
                ran: true,
                matched: false,
            },
        }
    }
}
