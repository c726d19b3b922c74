//! AdminService JSON shapes (wire §5.2, §6.11, §6.13).

use serde::{Deserialize, Serialize};

use super::decode::nullable;
use crate::engine::{QueueConfigInput, QueueSummary, RedriveRequest as EngineRedrive};

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
