//! QueueService JSON shapes (docs/http-api.md#shapes, #rpcs) and their conversion to engine
//! inputs and from engine outputs.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::decode::{base64_bytes, nullable, string_map};
use crate::engine::{
    BatchResult, OutgoingMessage, PeekRequest as EnginePeek, PeekedMessage, QueueStats,
    ReceiveMode, ReceiveRequest as EngineReceive, ReceivedMessage, SendRequest as EngineSend,
    SettleItem, SettleRequest as EngineSettle, Settlement,
};

/// A message as sent. Broker-set members are known (so strict decoding
/// accepts them, type-checked) but ignored [quirk].
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MessageIn {
    #[serde(default, deserialize_with = "base64_bytes")]
    pub body: Vec<u8>,
    #[serde(default, deserialize_with = "nullable")]
    pub message_id: String,
    #[serde(default, deserialize_with = "nullable")]
    pub correlation_id: String,
    #[serde(default, deserialize_with = "nullable")]
    pub reply_to: String,
    #[serde(default, deserialize_with = "nullable")]
    pub group_id: String,
    #[serde(default, deserialize_with = "nullable")]
    pub content_type: String,
    #[serde(default, deserialize_with = "nullable")]
    pub subject: String,
    #[serde(default, deserialize_with = "string_map")]
    pub properties: BTreeMap<String, String>,
    #[serde(default, rename = "seq_number", deserialize_with = "nullable")]
    _seq_number: i64,
    /// Ignored on Send; TestFilter's sample publish time.
    #[serde(default, deserialize_with = "nullable")]
    pub enqueued_at_ms: i64,
    #[serde(default, rename = "expires_at_ms", deserialize_with = "nullable")]
    _expires_at_ms: i64,
    /// Ignored on Send; TestFilter's sample visible time.
    #[serde(default, deserialize_with = "nullable")]
    pub visible_at_ms: i64,
    #[serde(default, rename = "locked_until_ms", deserialize_with = "nullable")]
    _locked_until_ms: i64,
    #[serde(default, rename = "delivery_count", deserialize_with = "nullable")]
    _delivery_count: i64,
    #[serde(default, rename = "lock_token", deserialize_with = "nullable")]
    _lock_token: String,
    #[serde(default, rename = "state", deserialize_with = "nullable")]
    _state: String,
    #[serde(default, rename = "dead_letter_reason", deserialize_with = "nullable")]
    _dead_letter_reason: String,
    #[serde(
        default,
        rename = "dead_letter_description",
        deserialize_with = "nullable"
    )]
    _dead_letter_description: String,
}

fn non_empty(s: String) -> Option<String> {
    (!s.is_empty()).then_some(s)
}

impl From<MessageIn> for OutgoingMessage {
    fn from(m: MessageIn) -> Self {
        OutgoingMessage {
            body: m.body,
            message_id: non_empty(m.message_id),
            correlation_id: non_empty(m.correlation_id),
            reply_to: non_empty(m.reply_to),
            group_id: non_empty(m.group_id),
            content_type: non_empty(m.content_type),
            subject: non_empty(m.subject),
            properties: m.properties,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SendRequest {
    #[serde(default, deserialize_with = "nullable")]
    pub queue: String,
    #[serde(default, deserialize_with = "nullable")]
    pub messages: Vec<MessageIn>,
    #[serde(default, deserialize_with = "nullable")]
    pub scheduled_enqueue_time_ms: i64,
    #[serde(default, deserialize_with = "nullable")]
    pub ttl_ms: i64,
}

impl From<SendRequest> for EngineSend {
    fn from(r: SendRequest) -> Self {
        EngineSend {
            queue: r.queue,
            messages: r.messages.into_iter().map(Into::into).collect(),
            scheduled_enqueue_time_ms: r.scheduled_enqueue_time_ms,
            ttl_ms: r.ttl_ms,
        }
    }
}

#[derive(Debug, Serialize)]
pub struct SendResponse {
    pub seq_numbers: Vec<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReceiveRequest {
    #[serde(default, deserialize_with = "nullable")]
    pub queue: String,
    #[serde(default, deserialize_with = "nullable")]
    pub max_messages: i64,
    #[serde(default, deserialize_with = "nullable")]
    pub wait_time_ms: i64,
    #[serde(default, deserialize_with = "nullable")]
    pub receive_mode: i64,
    #[serde(default, deserialize_with = "nullable")]
    pub receive_attempt_id: String,
}

impl From<ReceiveRequest> for EngineReceive {
    fn from(r: ReceiveRequest) -> Self {
        EngineReceive {
            queue: r.queue,
            max_messages: r.max_messages,
            wait_time_ms: r.wait_time_ms,
            // Any value other than 1 behaves as peek-lock [quirk].
            mode: if r.receive_mode == 1 {
                ReceiveMode::ReceiveAndDelete
            } else {
                ReceiveMode::PeekLock
            },
            attempt_id: r.receive_attempt_id,
        }
    }
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// The Receive output shape: exactly these members, each omitted when empty.
#[derive(Debug, Serialize)]
pub struct ReceivedOut {
    #[serde(skip_serializing_if = "is_zero")]
    pub seq_number: i64,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub body: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub properties: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "is_zero")]
    pub delivery_count: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub enqueued_at_ms: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub locked_until_ms: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lock_token: Option<String>,
}

impl From<ReceivedMessage> for ReceivedOut {
    fn from(m: ReceivedMessage) -> Self {
        let properties = properties_map(m.properties);
        let blank = |s: Option<String>| s.filter(|s| !s.is_empty());
        ReceivedOut {
            seq_number: m.seq_number,
            body: m.body_base64,
            message_id: blank(m.message_id),
            group_id: blank(m.group_id),
            correlation_id: blank(m.correlation_id),
            reply_to: blank(m.reply_to),
            subject: blank(m.subject),
            content_type: blank(m.content_type),
            properties,
            delivery_count: m.delivery_count,
            enqueued_at_ms: m.enqueued_at_ms,
            locked_until_ms: m.locked_until_ms.unwrap_or(0),
            lock_token: blank(m.lock_token),
        }
    }
}

#[derive(Debug, Serialize)]
pub struct ReceiveResponse {
    pub messages: Vec<ReceivedOut>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SettleRequest {
    #[serde(default, deserialize_with = "nullable")]
    pub queue: String,
    #[serde(default, deserialize_with = "nullable")]
    pub seq_number: i64,
    #[serde(default, deserialize_with = "nullable")]
    pub lock_token: String,
    #[serde(default, deserialize_with = "nullable")]
    pub delay_ms: i64,
    #[serde(default, deserialize_with = "nullable")]
    pub dead_letter_reason: String,
    #[serde(default, deserialize_with = "nullable")]
    pub dead_letter_description: String,
}

impl SettleRequest {
    pub fn target(&self) -> EngineSettle {
        EngineSettle {
            queue: self.queue.clone(),
            seq_number: self.seq_number,
            lock_token: self.lock_token.clone(),
        }
    }

    pub fn abandon(&self) -> Settlement {
        Settlement::Abandon {
            delay_ms: self.delay_ms,
        }
    }

    pub fn reject(&self) -> Settlement {
        Settlement::Reject {
            reason: self.dead_letter_reason.clone(),
            description: self.dead_letter_description.clone(),
        }
    }
}

#[derive(Debug, Serialize)]
pub struct OkResponse {
    pub ok: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatsRequest {
    #[serde(default, deserialize_with = "nullable")]
    pub queue: String,
}

/// Stats: every member always present.
#[derive(Debug, Serialize)]
pub struct StatsResponse {
    pub queue: String,
    pub active: i64,
    pub locked: i64,
    pub deferred: i64,
    pub scheduled: i64,
    pub dead_lettered: i64,
    pub total: i64,
    pub oldest_message_age_ms: i64,
}

impl From<QueueStats> for StatsResponse {
    fn from(s: QueueStats) -> Self {
        StatsResponse {
            queue: s.queue,
            active: s.active,
            locked: s.locked,
            deferred: s.deferred,
            scheduled: s.scheduled,
            dead_lettered: s.dead_lettered,
            total: s.total,
            oldest_message_age_ms: s.oldest_message_age_ms,
        }
    }
}

/// A (seq, token) pair of CompleteBatch/RenewBatch; both members always accepted.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SettleItemIn {
    #[serde(default, deserialize_with = "nullable")]
    pub seq_number: i64,
    #[serde(default, deserialize_with = "nullable")]
    pub lock_token: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchItemsRequest {
    #[serde(default, deserialize_with = "nullable")]
    pub queue: String,
    #[serde(default, deserialize_with = "nullable")]
    pub messages: Vec<SettleItemIn>,
}

impl BatchItemsRequest {
    pub fn items(&self) -> Vec<SettleItem> {
        self.messages
            .iter()
            .map(|m| SettleItem {
                seq_number: m.seq_number,
                lock_token: m.lock_token.clone(),
            })
            .collect()
    }
}

/// One positional batch result: `ok` always present, `locked_until_ms` only
/// on renewed items.
#[derive(Debug, Serialize)]
pub struct BatchResultOut {
    pub seq_number: i64,
    pub ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub locked_until_ms: Option<i64>,
}

impl From<BatchResult> for BatchResultOut {
    fn from(r: BatchResult) -> Self {
        BatchResultOut {
            seq_number: r.seq_number,
            ok: r.ok,
            locked_until_ms: r.locked_until_ms,
        }
    }
}

#[derive(Debug, Serialize)]
pub struct BatchResultsResponse {
    pub results: Vec<BatchResultOut>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReceiveDeferredRequest {
    #[serde(default, deserialize_with = "nullable")]
    pub queue: String,
    #[serde(default, deserialize_with = "nullable")]
    pub seq_numbers: Vec<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CancelRequest {
    #[serde(default, deserialize_with = "nullable")]
    pub queue: String,
    #[serde(default, deserialize_with = "nullable")]
    pub seq_number: i64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeekRequest {
    #[serde(default, deserialize_with = "nullable")]
    pub queue: String,
    #[serde(default, deserialize_with = "nullable")]
    pub from_seq: i64,
    #[serde(default, deserialize_with = "nullable")]
    pub state: String,
    #[serde(default, deserialize_with = "nullable")]
    pub max: i64,
}

impl From<PeekRequest> for EnginePeek {
    fn from(r: PeekRequest) -> Self {
        EnginePeek {
            queue: r.queue,
            from_seq: r.from_seq,
            state: r.state,
            max: r.max,
        }
    }
}

/// The Peek output shape: never a lock token.
#[derive(Debug, Serialize)]
pub struct PeekedOut {
    #[serde(skip_serializing_if = "is_zero")]
    pub seq_number: i64,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub state: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub body: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply_to: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
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
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dead_letter_reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dead_letter_description: Option<String>,
}

impl From<PeekedMessage> for PeekedOut {
    fn from(m: PeekedMessage) -> Self {
        let blank = |s: Option<String>| s.filter(|s| !s.is_empty());
        PeekedOut {
            seq_number: m.seq_number,
            state: m.state,
            body: m.body_base64,
            message_id: blank(m.message_id),
            group_id: blank(m.group_id),
            correlation_id: blank(m.correlation_id),
            reply_to: blank(m.reply_to),
            subject: blank(m.subject),
            content_type: blank(m.content_type),
            properties: properties_map(m.properties),
            delivery_count: m.delivery_count,
            enqueued_at_ms: m.enqueued_at_ms,
            visible_at_ms: m.visible_at_ms,
            expires_at_ms: m.expires_at_ms,
            locked_until_ms: m.locked_until_ms,
            dead_letter_reason: blank(m.dead_letter_reason),
            dead_letter_description: blank(m.dead_letter_description),
        }
    }
}

#[derive(Debug, Serialize)]
pub struct PeekResponse {
    pub messages: Vec<PeekedOut>,
}

fn properties_map(stored: Option<String>) -> BTreeMap<String, String> {
    stored
        .and_then(|p| serde_json::from_str(&p).ok())
        .unwrap_or_default()
}
