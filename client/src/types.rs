//! The Connect-JSON shapes, as the client sends and reads them (docs/http-api.md#shapes and
//! openapi/connect.json). Own types rather than the server's `wire` module: those are
//! one-way (requests only deserialize, answers only serialize), strict, and tied to the
//! engine, so depending on them would build the engine into every client. Each shape here
//! serializes the way the broker answers it: empty members are left out, so a value
//! printed with `--output json` *is* the wire object.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// `body` travels as standard padded base64; the client holds the bytes.
mod base64_body {
    use base64::Engine as _;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = Option::<String>::deserialize(d)?.unwrap_or_default();
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(serde::de::Error::custom)
    }
}

/// A message: what Send carries, what Receive, ReceiveDeferred and Peek answer. Members the
/// broker sets are empty on a send (and ignored by the broker if not).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Message {
    #[serde(skip_serializing_if = "is_zero")]
    pub seq_number: i64,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub state: String,
    #[serde(with = "base64_body", skip_serializing_if = "Vec::is_empty")]
    pub body: Vec<u8>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message_id: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub group_id: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub correlation_id: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub subject: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reply_to: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub content_type: String,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub properties: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "is_zero")]
    pub delivery_count: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub enqueued_at_ms: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub visible_at_ms: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub expires_at_ms: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub locked_until_ms: i64,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub lock_token: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub dead_letter_reason: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub dead_letter_description: String,
}

impl Message {
    /// A message to send with this body and nothing else.
    pub fn with_body(body: impl Into<Vec<u8>>) -> Message {
        Message {
            body: body.into(),
            ..Message::default()
        }
    }
}

/// Send and Schedule (one shape; Schedule requires `scheduled_enqueue_time_ms`).
#[derive(Debug, Clone, Default, Serialize)]
pub struct SendRequest {
    pub queue: String,
    pub messages: Vec<Message>,
    #[serde(skip_serializing_if = "is_zero")]
    pub scheduled_enqueue_time_ms: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub ttl_ms: i64,
}

/// One entry per message, positional; `0` for one not enqueued.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct SendResponse {
    pub seq_numbers: Vec<i64>,
}

/// Receive mode 0: the message stays, locked, until settled.
pub const PEEK_LOCK: i64 = 0;
/// Receive mode 1: removed as it is returned (at most once).
pub const RECEIVE_AND_DELETE: i64 = 1;

#[derive(Debug, Clone, Default, Serialize)]
pub struct ReceiveRequest {
    pub queue: String,
    #[serde(skip_serializing_if = "is_zero")]
    pub max_messages: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub wait_time_ms: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub receive_mode: i64,
    /// Replays an answer that was lost: the same id gets the same batch.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub receive_attempt_id: String,
}

/// Receive, ReceiveDeferred and Peek.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct MessagesResponse {
    pub messages: Vec<Message>,
}

/// Complete, Abandon, Reject, Defer, Renew: the message and its lease.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SettleRequest {
    pub queue: String,
    pub seq_number: i64,
    pub lock_token: String,
    /// Abandon only.
    #[serde(skip_serializing_if = "is_zero")]
    pub delay_ms: i64,
    /// Reject only.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub dead_letter_reason: String,
    /// Reject only.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub dead_letter_description: String,
}

impl SettleRequest {
    pub fn new(queue: &str, seq_number: i64, lock_token: &str) -> SettleRequest {
        SettleRequest {
            queue: queue.to_owned(),
            seq_number,
            lock_token: lock_token.to_owned(),
            ..SettleRequest::default()
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct OkResponse {
    pub ok: bool,
}

/// Stats and DeleteQueue's answer-less requests name one queue.
#[derive(Debug, Clone, Default, Serialize)]
pub struct QueueRequest {
    pub queue: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Stats {
    pub queue: String,
    pub active: i64,
    pub locked: i64,
    pub deferred: i64,
    pub scheduled: i64,
    pub dead_lettered: i64,
    pub total: i64,
    pub oldest_message_age_ms: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SettleItem {
    pub seq_number: i64,
    pub lock_token: String,
}

/// CompleteBatch and RenewBatch.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BatchRequest {
    pub queue: String,
    pub messages: Vec<SettleItem>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct BatchResult {
    pub seq_number: i64,
    pub ok: bool,
    /// RenewBatch: the deadline the broker committed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub locked_until_ms: Option<i64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct BatchResponse {
    pub results: Vec<BatchResult>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct ReceiveDeferredRequest {
    pub queue: String,
    pub seq_numbers: Vec<i64>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct CancelRequest {
    pub queue: String,
    pub seq_number: i64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct PeekRequest {
    pub queue: String,
    #[serde(skip_serializing_if = "is_zero")]
    pub from_seq: i64,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub state: String,
    #[serde(skip_serializing_if = "is_zero")]
    pub max: i64,
}

/// CreateQueue's configuration: zero and empty members take the broker's defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct QueueConfig {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(skip_serializing_if = "is_zero")]
    pub lock_duration_ms: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub max_delivery_count: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub default_ttl_ms: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dead_letter_on_expire: Option<bool>,
    #[serde(skip_serializing_if = "is_zero")]
    pub dedup_window_ms: i64,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub ordering_mode: String,
    #[serde(skip_serializing_if = "is_zero")]
    pub dlq_max_age_ms: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub dlq_max_count: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub dlq_max_bytes: i64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct CreateQueueRequest {
    pub name: String,
    pub config: QueueConfig,
}

/// An answer with no members (CreateQueue, Subscribe).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Empty {}

/// A queue as ListQueues shows it (effective values).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct QueueInfo {
    pub name: String,
    pub kind: String,
    pub lock_duration_ms: i64,
    pub max_delivery_count: i64,
    pub default_ttl_ms: i64,
    pub dedup_window_ms: i64,
    /// DeleteQueue needs it.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub generation: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ListQueuesResponse {
    pub queues: Vec<QueueInfo>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct DeleteQueueRequest {
    pub name: String,
    pub generation: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct DeleteQueueResponse {
    pub deleted: bool,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct RedriveRequest {
    pub queue: String,
    /// Empty: back to the source queue.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub target: String,
    #[serde(skip_serializing_if = "is_zero")]
    pub max: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub older_than_ms: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub rate_per_sec: i64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct RedriveResponse {
    pub moved: i64,
}

/// Purge of dead letters; both bounds omitted is the whole dead-letter queue.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PurgeRequest {
    pub queue: String,
    #[serde(skip_serializing_if = "is_zero")]
    pub max: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub older_than_ms: i64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct PurgeResponse {
    pub purged: i64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Filter {
    pub expr: String,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct SubscribeRequest {
    pub topic: String,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filter: Option<Filter>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Subscription {
    pub topic: String,
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub expr: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ListSubscriptionsResponse {
    pub subscriptions: Vec<Subscription>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct TestFilterRequest {
    pub expr: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TestFilterResponse {
    pub valid: bool,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub error: String,
    pub ran: bool,
    pub matched: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Status {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub version: String,
    pub backend: String,
    pub remote: bool,
    pub location: String,
    pub schema_version: String,
    pub ping_ms: i64,
    pub db_size_bytes: i64,
    pub queues: i64,
    pub subscriptions: i64,
    pub uptime_ms: i64,
    pub auth: bool,
    /// mqlite-edge: `accepting` or `paused`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub writes: String,
}

/// Observe's answer. Its nested sections are kept as JSON: they are read by dashboards,
/// not by this client's logic, and the broker may add counters.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Observation {
    pub sampled_at_ms: i64,
    pub started_at_ms: i64,
    pub backend: String,
    pub version: String,
    pub access: String,
    pub queue_count: i64,
    pub subscription_count: i64,
    pub runtime: serde_json::Value,
    pub collection: serde_json::Value,
    pub queues: Option<Vec<serde_json::Value>>,
    pub messages: Vec<serde_json::Value>,
    pub storage: serde_json::Value,
    pub maintenance: Vec<serde_json::Value>,
    pub filters: Vec<serde_json::Value>,
    pub http: serde_json::Value,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct CreateKeyRequest {
    /// 32 lowercase hex chosen by the client (a retry with the same id is safe).
    pub id: String,
    pub name: String,
    pub permissions: Vec<String>,
    #[serde(skip_serializing_if = "is_zero")]
    pub expires_at_ms: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AccessKey {
    pub id: String,
    pub name: String,
    pub permissions: Vec<String>,
    pub created_at_ms: i64,
    pub expires_at_ms: i64,
    pub revoked_at_ms: i64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct CreateKeyResponse {
    pub key: AccessKey,
    /// Shown only in this answer.
    pub token: String,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct ListKeysRequest {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub after_id: String,
    #[serde(skip_serializing_if = "is_zero")]
    pub limit: i64,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub sort: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ListKeysResponse {
    pub keys: Vec<AccessKey>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_after_id: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct RevokeKeyRequest {
    pub id: String,
}

/// Requests of the RPCs that read no body (ListQueues, ListSubscriptions, Status) or
/// take an empty object (Observe).
#[derive(Debug, Clone, Default, Serialize)]
pub struct NoArguments {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_serializes_as_the_wire_does_empty_members_left_out() {
        let m = Message {
            seq_number: 7,
            body: b"hi".to_vec(),
            ..Message::default()
        };
        assert_eq!(
            serde_json::to_string(&m).unwrap(),
            r#"{"seq_number":7,"body":"aGk="}"#
        );
        let empty = Message::default();
        assert_eq!(serde_json::to_string(&empty).unwrap(), "{}");
    }

    #[test]
    fn a_received_message_decodes_with_its_body_bytes() {
        let m: Message = serde_json::from_str(
            r#"{"seq_number":3,"body":"AP8=","lock_token":"t","locked_until_ms":5,"extra":1}"#,
        )
        .unwrap();
        assert_eq!(m.body, vec![0, 255]);
        assert_eq!((m.seq_number, m.lock_token.as_str()), (3, "t"));
        assert!(serde_json::from_str::<Message>(r#"{"body":"!!"}"#).is_err());
    }
}
