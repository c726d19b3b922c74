//! AdminService JSON shapes (docs/http-api.md#shapes, #rpcs).

use serde::{Deserialize, Serialize};

use super::decode::nullable;
use super::queue::MessageIn;
use crate::engine::{
    FilterTest, QueueConfigInput, QueueSummary, RedriveRequest as EngineRedrive,
    SubscriptionSummary,
};
use crate::filter::FilterInput;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueConfig {
    #[serde(default, deserialize_with = "nullable")]
    pub kind: String,
    #[serde(default, deserialize_with = "nullable")]
    pub lock_duration_ms: i64,
    #[serde(default, deserialize_with = "nullable")]
    pub max_delivery_count: i64,
    #[serde(default, deserialize_with = "nullable")]
    pub default_ttl_ms: i64,
    /// Absent or null → dead-letter; only an explicit `false` discards.
    #[serde(default)]
    pub dead_letter_on_expire: Option<bool>,
    #[serde(default, deserialize_with = "nullable")]
    pub dedup_window_ms: i64,
    #[serde(default, deserialize_with = "nullable")]
    pub ordering_mode: String,
    #[serde(default, deserialize_with = "nullable")]
    pub dlq_max_age_ms: i64,
    #[serde(default, deserialize_with = "nullable")]
    pub dlq_max_count: i64,
    #[serde(default, deserialize_with = "nullable")]
    pub dlq_max_bytes: i64,
}

impl From<QueueConfig> for QueueConfigInput {
    fn from(c: QueueConfig) -> Self {
        QueueConfigInput {
            kind: c.kind,
            lock_duration_ms: c.lock_duration_ms,
            max_delivery_count: c.max_delivery_count,
            default_ttl_ms: c.default_ttl_ms,
            dead_letter_on_expire: c.dead_letter_on_expire,
            dedup_window_ms: c.dedup_window_ms,
            ordering_mode: c.ordering_mode,
            dlq_max_age_ms: c.dlq_max_age_ms,
            dlq_max_count: c.dlq_max_count,
            dlq_max_bytes: c.dlq_max_bytes,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateQueueRequest {
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    #[serde(default)]
    pub config: Option<QueueConfig>,
    /// This Worker's addition: the database a new name is placed in
    /// instead of the one rendezvous hashing picks (docs/databases.md).
    #[serde(default, deserialize_with = "nullable")]
    pub database: String,
}

/// `{}`: the empty success object.
#[derive(Debug, Serialize)]
pub struct Empty {}

#[derive(Debug, Serialize)]
pub struct QueueOut {
    pub name: String,
    pub kind: String,
    pub lock_duration_ms: i64,
    pub max_delivery_count: i64,
    pub default_ttl_ms: i64,
    pub dedup_window_ms: i64,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub generation: String,
    /// [Worker extension] The database the queue lives in, when the
    /// deployment has several (docs/databases.md); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub database: Option<String>,
}

impl From<QueueSummary> for QueueOut {
    fn from(q: QueueSummary) -> Self {
        QueueOut {
            name: q.name,
            kind: q.kind,
            lock_duration_ms: q.lock_duration_ms,
            max_delivery_count: q.max_delivery_count,
            default_ttl_ms: q.default_ttl_ms,
            dedup_window_ms: q.dedup_window_ms,
            generation: q.generation,
            database: None,
        }
    }
}

#[derive(Debug, Serialize)]
pub struct ListQueuesResponse {
    pub queues: Vec<QueueOut>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedriveRequest {
    #[serde(default, deserialize_with = "nullable")]
    pub queue: String,
    #[serde(default, deserialize_with = "nullable")]
    pub target: String,
    #[serde(default, deserialize_with = "nullable")]
    pub max: i64,
    #[serde(default, deserialize_with = "nullable")]
    pub older_than_ms: i64,
    #[serde(default, deserialize_with = "nullable")]
    pub rate_per_sec: i64,
}

impl From<RedriveRequest> for EngineRedrive {
    fn from(r: RedriveRequest) -> Self {
        EngineRedrive {
            queue: r.queue,
            target: r.target,
            max: r.max,
            older_than_ms: r.older_than_ms,
            rate_per_sec: r.rate_per_sec,
        }
    }
}

#[derive(Debug, Serialize)]
pub struct RedriveResponse {
    pub moved: i64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PurgeRequest {
    #[serde(default, deserialize_with = "nullable")]
    pub queue: String,
    #[serde(default, deserialize_with = "nullable")]
    pub max: i64,
    #[serde(default, deserialize_with = "nullable")]
    pub older_than_ms: i64,
}

#[derive(Debug, Serialize)]
pub struct PurgeResponse {
    pub purged: i64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilterIn {
    #[serde(default, deserialize_with = "nullable")]
    pub expr: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubscribeRequest {
    #[serde(default, deserialize_with = "nullable")]
    pub topic: String,
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    #[serde(default)]
    pub filter: Option<FilterIn>,
}

#[derive(Debug, Serialize)]
pub struct SubscriptionOut {
    pub topic: String,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expr: Option<String>,
}

impl From<SubscriptionSummary> for SubscriptionOut {
    fn from(s: SubscriptionSummary) -> Self {
        SubscriptionOut {
            topic: s.topic,
            name: s.name,
            expr: s.expr,
        }
    }
}

#[derive(Debug, Serialize)]
pub struct ListSubscriptionsResponse {
    pub subscriptions: Vec<SubscriptionOut>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestFilterRequest {
    #[serde(default, deserialize_with = "nullable")]
    pub expr: String,
    #[serde(default)]
    pub message: Option<MessageIn>,
}

impl TestFilterRequest {
    /// The sample as a filter sees it: `enqueued_at` defaults to `now`,
    /// `visible_at` to the enqueued time (docs/http-api.md#rpcs).
    pub fn sample(&self, now_ms: i64) -> Option<FilterInput<'_>> {
        let m = self.message.as_ref()?;
        let enqueued_at_ms = if m.enqueued_at_ms != 0 {
            m.enqueued_at_ms
        } else {
            now_ms
        };
        let visible_at_ms = if m.visible_at_ms != 0 {
            m.visible_at_ms
        } else {
            enqueued_at_ms
        };
        Some(FilterInput {
            subject: &m.subject,
            group_id: &m.group_id,
            correlation_id: &m.correlation_id,
            reply_to: &m.reply_to,
            message_id: &m.message_id,
            content_type: &m.content_type,
            properties: &m.properties,
            body: &m.body,
            enqueued_at_ms,
            visible_at_ms,
            now_ms,
        })
    }
}

#[derive(Debug, Serialize)]
pub struct TestFilterResponse {
    pub valid: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub ran: bool,
    pub matched: bool,
}

impl From<FilterTest> for TestFilterResponse {
    fn from(t: FilterTest) -> Self {
        TestFilterResponse {
            valid: t.valid,
            error: t.error,
            ran: t.ran,
            matched: t.matched,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeleteQueueRequest {
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    #[serde(default, deserialize_with = "nullable")]
    pub generation: String,
}

#[derive(Debug, Serialize)]
pub struct DeleteQueueResponse {
    pub deleted: bool,
}

/// Status (docs/http-api.md#rpcs): never a connection string or a token.
#[derive(Debug, Serialize)]
pub struct StatusResponse {
    pub version: &'static str,
    pub backend: &'static str,
    pub remote: bool,
    pub location: String,
    pub schema_version: String,
    pub ping_ms: i64,
    pub db_size_bytes: i64,
    pub queues: i64,
    pub subscriptions: i64,
    pub uptime_ms: i64,
    pub auth: bool,
    /// [Worker extension] `accepting`, or `paused` while this isolate's
    /// write breaker refuses writes because the database stopped answering
    /// them (reads, including this call's ping, still work).
    pub writes: &'static str,
}
