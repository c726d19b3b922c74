//! `AdminService/Observe` shapes (docs/http-api.md#rpcs). Every member is always
//! present, zeros included: the reference client rejects an observation with
//! a missing member rather than reading it as a healthy zero. The only
//! `null` is `queues` when the database could not be read.

use serde::{Deserialize, Serialize};

/// The request must be exactly `{}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObserveRequest {}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ObserveResponse {
    pub sampled_at_ms: i64,
    pub started_at_ms: i64,
    pub backend: String,
    pub runtime: Runtime,
    pub collection: CollectionStatus,
    pub queue_count: i64,
    pub subscription_count: i64,
    /// `None` (JSON `null`) when the collection failed: unknown, not empty.
    pub queues: Option<Vec<QueueObservation>>,
    pub messages: Vec<MessageCounter>,
    pub storage: Storage,
    pub maintenance: Vec<MaintenanceObservation>,
    pub filters: Vec<FilterCounter>,
    pub version: String,
    pub access: String,
    pub http: Http,
    /// [Worker extension] With several databases (docs/databases.md):
    /// whether each answered this collection; absent with one.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub databases: Vec<DatabaseObservation>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DatabaseObservation {
    pub name: String,
    /// `available` or `unavailable`.
    pub state: String,
    /// `""` when it answered, otherwise a bounded category.
    pub error_code: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Runtime {
    pub schema_version: String,
    pub read_available: bool,
    pub ping_seconds: f64,
    pub db_size_available: bool,
    pub db_size_bytes: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CollectionStatus {
    /// `available` or `unavailable`.
    pub state: String,
    pub last_success_at_ms: i64,
    pub duration_seconds: f64,
    /// `""` on success, otherwise a bounded category.
    pub error_code: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QueueObservation {
    pub queue: String,
    pub kind: String,
    pub active: i64,
    pub locked: i64,
    pub deferred: i64,
    pub scheduled: i64,
    pub dead_lettered: i64,
    /// The five states plus `unexpected`.
    pub total: i64,
    pub oldest_message_age_ms: i64,
    pub unexpected: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MessageCounter {
    pub queue: String,
    pub event: String,
    pub count: u64,
}

/// Cumulative finite buckets; `count` doubles as the `+Inf` bucket.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Histogram {
    pub bounds_seconds: Vec<f64>,
    pub bucket_counts: Vec<u64>,
    pub count: u64,
    pub sum_seconds: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Storage {
    pub operations: Vec<StorageOperation>,
    pub pool: Pool,
    pub group_commit: GroupCommit,
}

/// How the writes that may share their queue's transaction were carried
/// (docs/engine.md#group-commit), in this isolate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupCommit {
    /// Sent in a request of their own.
    pub direct_writes: u64,
    /// Sent in a request of their own because their queue's object said
    /// nobody else was writing the queue (docs/engine.md#lone-writes).
    pub lone_writes: u64,
    /// Sent in a batch (of one, when nobody else was in flight).
    pub batched_writes: u64,
    /// Of those, served by one statement with others of their kind
    /// (docs/engine.md#folding).
    pub folded_writes: u64,
    /// The batches that formed, by members; each counted once, by its
    /// first member's isolate.
    pub batch_members: SizeHistogram,
}

/// A histogram of counts: `bucket_counts[i]` observations at most
/// `bounds[i]` (cumulative), `count` in all, summing to `sum`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SizeHistogram {
    pub bounds: Vec<u64>,
    pub bucket_counts: Vec<u64>,
    pub count: u64,
    pub sum: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StorageOperation {
    pub operation: String,
    pub outcome: String,
    pub error_code: String,
    pub duration: Histogram,
    pub retries: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Pool {
    pub max_open: i64,
    pub open: i64,
    pub in_use: i64,
    pub idle: i64,
    pub wait_count: u64,
    pub wait_duration_seconds: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MaintenanceObservation {
    pub enabled: bool,
    pub task: String,
    /// Every finished pass; `failures` and `interrupted` are subsets.
    pub runs: u64,
    pub interrupted: u64,
    pub failures: u64,
    pub last_success_at_ms: i64,
    pub duration: Histogram,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FilterCounter {
    pub stage: String,
    pub count: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Http {
    /// `available` (a server answers) or `not_applicable` (embedded use).
    pub state: String,
    pub requests: Vec<RequestObservation>,
    pub authentication: Vec<AuthenticationObservation>,
    pub handler_latency: Vec<RpcLatency>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RequestObservation {
    /// The full route path, e.g. `/mqlite.v1.QueueService/Send`.
    pub rpc: String,
    pub code: String,
    pub count: u64,
    /// Cumulative whole-request time of these requests.
    pub duration_seconds: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuthenticationObservation {
    pub outcome: String,
    pub count: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RpcLatency {
    /// The full route path, as in `requests`.
    pub rpc: String,
    pub buckets: Vec<LatencyBucket>,
    pub count: u64,
    pub sum_seconds: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LatencyBucket {
    pub upper_bound_seconds: f64,
    pub count: u64,
}
