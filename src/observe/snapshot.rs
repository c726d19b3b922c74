//! Builds the Observe answer from the counters plus one database collection.
//! Ordering is fixed (docs/deviations.md D7): queues by name; messages by queue, then
//! event name in byte order; requests by route, then code; storage by
//! operation, outcome, code — all byte order, so two samples line up.

use super::counters::Counters;
use super::histogram::sanitize_seconds;
use super::vocab::{collection_error_code, AuthOutcome, Event, FilterStage, Task, REQUEST_CODES};
use super::{Collection, QueueGauge};
use crate::wire::observe::{
    AuthenticationObservation, CollectionStatus, DatabaseObservation, FilterCounter, Http,
    MaintenanceObservation, MessageCounter, ObserveResponse, Pool, QueueObservation,
    RequestObservation, Runtime, Storage, StorageOperation,
};

/// Cloudflare Workers allow six simultaneous outgoing connections per
/// request; every database call is one `fetch`, so that is the true ceiling
/// on concurrent database connections.
const WORKER_MAX_OPEN_CONNECTIONS: i64 = 6;

impl Counters {
    /// Records the collection's outcome, then samples every counter.
    pub(super) fn observe(
        &mut self,
        started_at_ms: i64,
        access: &str,
        collection: &Collection,
        now_ms: i64,
    ) -> ObserveResponse {
        let queues = match &collection.result {
            Ok(gauges) => {
                self.last_collection_success_ms = now_ms;
                self.collected
                    .extend(gauges.iter().map(|g| g.queue.clone()));
                Some(queue_observations(gauges))
            }
            Err(_) => None,
        };
        let (state, error_code) = match &collection.result {
            Ok(_) => ("available", ""),
            Err(code) => ("unavailable", collection_error_code(code)),
        };
        let subscription_count = queues.as_ref().map_or(0, |qs| {
            qs.iter().filter(|q| q.kind == "subscription").count()
        });
        let queue_count = queues
            .as_ref()
            .map_or(0, |qs| qs.len() - subscription_count);
        ObserveResponse {
            sampled_at_ms: now_ms,
            started_at_ms,
            backend: "remote".to_string(),
            runtime: runtime(collection),
            collection: CollectionStatus {
                state: state.to_string(),
                last_success_at_ms: self.last_collection_success_ms,
                duration_seconds: sanitize_seconds(collection.duration_seconds),
                error_code: error_code.to_string(),
            },
            queue_count: count(queue_count),
            subscription_count: count(subscription_count),
            queues,
            messages: self.messages(),
            storage: self.storage(),
            maintenance: self.maintenance(),
            filters: FilterStage::ALL
                .iter()
                .map(|&stage| FilterCounter {
                    stage: stage.as_str().to_string(),
                    count: self.filters[stage as usize],
                })
                .collect(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            access: access.to_string(),
            http: self.http(),
            databases: collection
                .databases
                .iter()
                .map(|(name, failure)| DatabaseObservation {
                    name: name.clone(),
                    state: if failure.is_some() {
                        "unavailable"
                    } else {
                        "available"
                    }
                    .to_string(),
                    error_code: failure
                        .as_deref()
                        .map_or("", collection_error_code)
                        .to_string(),
                })
                .collect(),
        }
    }

    /// Every known queue × all 20 events, zeros included. Known = queues
    /// with an effect in this isolate plus queues any successful collection
    /// has listed.
    fn messages(&self) -> Vec<MessageCounter> {
        let mut events: Vec<Event> = Event::ALL.to_vec();
        events.sort_unstable_by_key(|e| e.as_str());
        let mut queues: Vec<&String> = self.collected.iter().collect();
        queues.extend(self.events.keys());
        queues.sort_unstable();
        queues.dedup();
        let mut out = Vec::with_capacity(queues.len() * events.len());
        for queue in queues {
            let row = self.events.get(queue);
            for &event in &events {
                out.push(MessageCounter {
                    queue: queue.clone(),
                    event: event.as_str().to_string(),
                    count: row.map_or(0, |r| r[event as usize]),
                });
            }
        }
        out
    }

    fn storage(&self) -> Storage {
        Storage {
            operations: self
                .storage
                .iter()
                .map(|cell| StorageOperation {
                    operation: cell.operation.as_str().to_string(),
                    outcome: cell.outcome.as_str().to_string(),
                    error_code: cell.error_code.to_string(),
                    duration: cell.duration.to_wire(),
                    retries: cell.retries,
                })
                .collect(),
            // These describe a connection pool owned by this code, and the
            // Worker owns none: each database call is one `fetch` to the
            // libSQL HTTP endpoint, no connection object outlives it, and any
            // socket reuse or queueing happens inside the Workers runtime,
            // invisible here. So no connection of ours is open, in use or
            // idle, and nothing ever waited for one: zeros that are true, not
            // placeholders. `max_open` is the platform's ceiling on
            // simultaneous outgoing connections per request.
            pool: Pool {
                max_open: WORKER_MAX_OPEN_CONNECTIONS,
                open: 0,
                in_use: 0,
                idle: 0,
                wait_count: 0,
                wait_duration_seconds: 0.0,
            },
            group_commit: self.group_commit.to_wire(),
        }
    }

    fn maintenance(&self) -> Vec<MaintenanceObservation> {
        Task::ALL
            .iter()
            .map(|&task| {
                let cell = &self.maintenance[task as usize];
                MaintenanceObservation {
                    enabled: task.enabled(),
                    task: task.as_str().to_string(),
                    runs: cell.runs,
                    interrupted: cell.interrupted,
                    failures: cell.failures,
                    last_success_at_ms: cell.last_success_at_ms,
                    duration: cell.duration.to_wire(),
                }
            })
            .collect()
    }

    fn http(&self) -> Http {
        let mut codes: Vec<(usize, &str)> = REQUEST_CODES.iter().copied().enumerate().collect();
        codes.sort_unstable_by_key(|(_, code)| *code);
        let mut requests = Vec::with_capacity(self.routes.len() * codes.len());
        for route in &self.routes {
            for &(index, code) in &codes {
                let cell = route.codes[index];
                requests.push(RequestObservation {
                    rpc: route.path.clone(),
                    code: code.to_string(),
                    count: cell.count,
                    duration_seconds: cell.seconds,
                });
            }
        }
        Http {
            state: "available".to_string(),
            requests,
            authentication: AuthOutcome::ALL
                .iter()
                .map(|&outcome| AuthenticationObservation {
                    outcome: outcome.as_str().to_string(),
                    count: self.auth[outcome as usize],
                })
                .collect(),
            handler_latency: self
                .routes
                .iter()
                .map(|route| route.latency.to_latency(&route.path))
                .collect(),
        }
    }
}

/// The probe facts. A remote database has no local footprint to measure,
/// so size is reported unavailable rather than as a zero-byte file.
fn runtime(collection: &Collection) -> Runtime {
    Runtime {
        schema_version: collection.schema_version.clone(),
        read_available: collection.ping_seconds.is_some(),
        ping_seconds: collection.ping_seconds.map_or(0.0, sanitize_seconds),
        db_size_available: false,
        db_size_bytes: 0,
    }
}

fn queue_observations(gauges: &[QueueGauge]) -> Vec<QueueObservation> {
    let mut out: Vec<QueueObservation> = gauges
        .iter()
        .map(|g| QueueObservation {
            queue: g.queue.clone(),
            kind: g.kind.clone(),
            active: g.active,
            locked: g.locked,
            deferred: g.deferred,
            scheduled: g.scheduled,
            dead_lettered: g.dead_lettered,
            total: [
                g.active,
                g.locked,
                g.deferred,
                g.scheduled,
                g.dead_lettered,
                g.unexpected,
            ]
            .iter()
            .fold(0i64, |sum, n| sum.saturating_add(*n)),
            oldest_message_age_ms: g.oldest_message_age_ms,
            unexpected: g.unexpected,
        })
        .collect();
    out.sort_by(|a, b| a.queue.cmp(&b.queue));
    out
}

fn count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
