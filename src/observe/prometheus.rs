//! `/metrics` (docs/http-api.md#metrics): the Observe answer as Prometheus text format 0.0.4.
//! A serializer only — no clock, database or counter access — so both
//! endpoints always report the same observation. Each family is one
//! contiguous block with HELP and TYPE; a family with no sample this time
//! (queue gauges after a failed collection, the ping after a failed probe,
//! the size of a remote database) is left out entirely rather than shown as
//! a zero.

use std::fmt::{self, Display, Write as _};

use crate::wire::observe::{
    Histogram, ObserveResponse, QueueObservation, SizeHistogram, StorageOperation,
};

pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Route paths carry this prefix; the `rpc` label drops it.
const ROUTE_PREFIX: &str = "/mqlite.v1.";

pub fn render(o: &ObserveResponse) -> String {
    let mut out = String::with_capacity(64 * 1024);
    runtime(&mut out, o);
    collection(&mut out, o);
    queues(&mut out, o.queues.as_deref().unwrap_or_default());
    messages(&mut out, o);
    storage(&mut out, o);
    maintenance(&mut out, o);
    http(&mut out, o);
    out
}

fn runtime(out: &mut String, o: &ObserveResponse) {
    let rt = &o.runtime;
    gauge(
        out,
        "mqlite_info",
        "Build and storage backend of this broker; always 1.",
        |f| {
            let labels = [
                ("version", o.version.as_str()),
                ("backend", o.backend.as_str()),
                ("schema_version", rt.schema_version.as_str()),
            ];
            f.sample("", &labels, 1);
        },
    );
    gauge(
        out,
        "mqlite_storage_read_available",
        "1 when the latest SELECT 1 read probe succeeded (not a write health check).",
        |f| f.sample("", &[], u8::from(rt.read_available)),
    );
    gauge(
        out,
        "mqlite_storage_ping_seconds",
        "Round trip of the latest read probe; absent when the probe failed.",
        |f| {
            if rt.read_available {
                f.sample("", &[], Float(rt.ping_seconds));
            }
        },
    );
    gauge(
        out,
        "mqlite_storage_size_available",
        "1 when a local database footprint can be measured; a remote database has none.",
        |f| f.sample("", &[], u8::from(rt.db_size_available)),
    );
    gauge(
        out,
        "mqlite_storage_size_bytes",
        "Local database footprint; absent when it cannot be measured.",
        |f| {
            if rt.db_size_available {
                f.sample("", &[], rt.db_size_bytes);
            }
        },
    );
    gauge(
        out,
        "mqlite_start_time_seconds",
        "When this isolate started counting, as Unix seconds; counters reset with it.",
        |f| f.sample("", &[], Millis(o.started_at_ms)),
    );
    gauge(
        out,
        "mqlite_sample_timestamp_seconds",
        "When this observation was sampled, as Unix seconds.",
        |f| f.sample("", &[], Millis(o.sampled_at_ms)),
    );
}

fn collection(out: &mut String, o: &ObserveResponse) {
    let c = &o.collection;
    let success = c.state == "available";
    gauge(
        out,
        "mqlite_collection_last_success_timestamp_seconds",
        "Latest successful queue collection in this isolate as Unix seconds; 0 before one.",
        |f| f.sample("", &[], Millis(c.last_success_at_ms)),
    );
    gauge(
        out,
        "mqlite_collection_duration_seconds",
        "Elapsed time of the latest queue collection.",
        |f| f.sample("", &[], Float(c.duration_seconds)),
    );
    gauge(
        out,
        "mqlite_collection_success",
        "1 when the latest queue collection succeeded, else 0.",
        |f| f.sample("", &[], u8::from(success)),
    );
    gauge(
        out,
        "mqlite_collection_status",
        "Latest collection state and bounded failure category; always 1.",
        |f| f.sample("", &[("state", &c.state), ("error_code", &c.error_code)], 1),
    );
    gauge(
        out,
        "mqlite_database_up",
        "With several databases: 1 when the database answered the latest collection, else 0.",
        |f| {
            for database in &o.databases {
                let up = u8::from(database.state == "available");
                f.sample("", &[("database", &database.name)], up);
            }
        },
    );
    gauge(
        out,
        "mqlite_entities",
        "Plain queues and subscriptions; absent when the collection failed.",
        |f| {
            if success {
                f.sample("", &[("kind", "queue")], o.queue_count);
                f.sample("", &[("kind", "subscription")], o.subscription_count);
            }
        },
    );
}

/// Queue gauges: one sample per collected queue, none when collection failed.
fn queues(out: &mut String, queues: &[QueueObservation]) {
    gauge(
        out,
        "mqlite_queue_messages",
        "Stored messages of a queue by state.",
        |f| {
            for q in queues {
                for (state, n) in [
                    ("active", q.active),
                    ("locked", q.locked),
                    ("deferred", q.deferred),
                    ("scheduled", q.scheduled),
                    ("dead_lettered", q.dead_lettered),
                ] {
                    f.sample("", &[("queue", &q.queue), ("state", state)], n);
                }
            }
        },
    );
    per_queue(
        out,
        queues,
        "mqlite_queue_retained_messages",
        "All stored rows of a queue, unexpected states included.",
        |q| q.total,
    );
    per_queue(
        out,
        queues,
        "mqlite_queue_unexpected_messages",
        "Stored rows of a queue outside the five known states.",
        |q| q.unexpected,
    );
    per_queue(
        out,
        queues,
        "mqlite_queue_oldest_message_age_seconds",
        "Age of the oldest active or locked message since enqueue; 0 when none.",
        |q| Millis(q.oldest_message_age_ms),
    );
    per_queue(
        out,
        queues,
        "mqlite_queue_total",
        "Deprecated alias of mqlite_queue_retained_messages.",
        |q| q.total,
    );
    per_queue(
        out,
        queues,
        "mqlite_queue_oldest_message_age_ms",
        "Deprecated alias of mqlite_queue_oldest_message_age_seconds, in milliseconds.",
        |q| q.oldest_message_age_ms,
    );
}

/// One gauge family with a sample per queue.
fn per_queue<V: Display>(
    out: &mut String,
    queues: &[QueueObservation],
    name: &str,
    help: &str,
    value: impl Fn(&QueueObservation) -> V,
) {
    gauge(out, name, help, |f| {
        for q in queues {
            f.sample("", &[("queue", &q.queue)], value(q));
        }
    });
}

fn messages(out: &mut String, o: &ObserveResponse) {
    counter(
        out,
        "mqlite_message_events_total",
        "Confirmed message effects in this isolate; categories overlap, so never sum them.",
        |f| {
            for m in &o.messages {
                f.sample("", &[("queue", &m.queue), ("event", &m.event)], m.count);
            }
        },
    );
    counter(
        out,
        "mqlite_messages_completed_total",
        "Legacy view of mqlite_message_events_total{event=\"completed\"}.",
        |f| {
            for m in o.messages.iter().filter(|m| m.event == "completed") {
                f.sample("", &[("queue", &m.queue)], m.count);
            }
        },
    );
}

fn storage(out: &mut String, o: &ObserveResponse) {
    let ops = &o.storage.operations;
    counter(
        out,
        "mqlite_storage_operations_total",
        "Finished storage calls (one pipeline each) by outcome and error category.",
        |f| {
            for op in ops {
                f.sample("", &storage_labels(op), op.duration.count);
            }
        },
    );
    histogram(
        out,
        "mqlite_storage_operation_duration_seconds",
        "Elapsed time of storage calls, retries included.",
        |f| {
            for op in ops {
                f.histogram(&storage_labels(op), &op.duration);
            }
        },
    );
    counter(
        out,
        "mqlite_storage_retries_total",
        "Safe retries made inside finished storage calls.",
        |f| {
            for op in ops {
                f.sample("", &storage_labels(op), op.retries);
            }
        },
    );
    let pool = &o.storage.pool;
    gauge(
        out,
        "mqlite_storage_pool_connections",
        "Database connections of this code's pool by state; a Worker holds none between calls.",
        |f| {
            for (state, n) in [
                ("max_open", pool.max_open),
                ("open", pool.open),
                ("in_use", pool.in_use),
                ("idle", pool.idle),
            ] {
                f.sample("", &[("state", state)], n);
            }
        },
    );
    counter(
        out,
        "mqlite_storage_pool_waits_total",
        "Waits for a connection of this code's pool.",
        |f| f.sample("", &[], pool.wait_count),
    );
    counter(
        out,
        "mqlite_storage_pool_wait_duration_seconds_total",
        "Time spent waiting for a connection of this code's pool.",
        |f| f.sample("", &[], Float(pool.wait_duration_seconds)),
    );
    let group = &o.storage.group_commit;
    counter(
        out,
        "mqlite_group_commit_writes_total",
        "Writes that may share their queue's transaction, by how they were carried: in a batch, in a request of their own, or in one of their own because their queue was idle (lone).",
        |f| {
            f.sample("", &[("carried", "batch")], group.batched_writes);
            f.sample("", &[("carried", "direct")], group.direct_writes);
            f.sample("", &[("carried", "lone")], group.lone_writes);
        },
    );
    counter(
        out,
        "mqlite_group_commit_folded_writes_total",
        "Writes of a batch served by one statement with the others of their kind (folded), a subset of the batched ones.",
        |f| f.sample("", &[], group.folded_writes),
    );
    histogram(
        out,
        "mqlite_group_commit_batch_members",
        "Writes per group commit batch, each batch counted once.",
        |f| f.size_histogram(&[], &group.batch_members),
    );
}

fn maintenance(out: &mut String, o: &ObserveResponse) {
    let tasks = &o.maintenance;
    counter(
        out,
        "mqlite_maintenance_runs_total",
        "Finished maintenance passes in this isolate by task and outcome.",
        |f| {
            for m in tasks {
                let success = m
                    .runs
                    .saturating_sub(m.failures)
                    .saturating_sub(m.interrupted);
                for (outcome, n) in [
                    ("success", success),
                    ("error", m.failures),
                    ("interrupted", m.interrupted),
                ] {
                    f.sample("", &[("task", &m.task), ("outcome", outcome)], n);
                }
            }
        },
    );
    gauge(
        out,
        "mqlite_maintenance_enabled",
        "1 when the deployment runs the task automatically (the cron sweep).",
        |f| {
            for m in tasks {
                f.sample("", &[("task", &m.task)], u8::from(m.enabled));
            }
        },
    );
    histogram(
        out,
        "mqlite_maintenance_duration_seconds",
        "Elapsed time of maintenance passes by task.",
        |f| {
            for m in tasks {
                f.histogram(&[("task", &m.task)], &m.duration);
            }
        },
    );
    gauge(
        out,
        "mqlite_maintenance_last_success_timestamp_seconds",
        "Latest successful pass in this isolate as Unix seconds; 0 before one.",
        |f| {
            for m in tasks {
                f.sample("", &[("task", &m.task)], Millis(m.last_success_at_ms));
            }
        },
    );
    counter(
        out,
        "mqlite_filter_failures_total",
        "Routing filter failures while fanning out published messages (mismatches excluded).",
        |f| {
            for s in &o.filters {
                f.sample("", &[("stage", &s.stage)], s.count);
            }
        },
    );
}

fn http(out: &mut String, o: &ObserveResponse) {
    let requests = &o.http.requests;
    counter(
        out,
        "mqlite_rpc_requests_total",
        "Finished requests to registered RPCs by result code, auth rejections included.",
        |f| {
            for r in requests {
                f.sample(
                    "",
                    &[("rpc", rpc_label(&r.rpc)), ("code", &r.code)],
                    r.count,
                );
            }
        },
    );
    counter(
        out,
        "mqlite_rpc_request_duration_seconds_total",
        "Cumulative whole-request time of registered RPCs by result code.",
        |f| {
            for r in requests {
                let labels = [("rpc", rpc_label(&r.rpc)), ("code", r.code.as_str())];
                f.sample("", &labels, Float(r.duration_seconds));
            }
        },
    );
    counter(
        out,
        "mqlite_authentication_total",
        "Final authentication or authorization outcome of each protected request.",
        |f| {
            for a in &o.http.authentication {
                f.sample("", &[("outcome", &a.outcome)], a.count);
            }
        },
    );
    histogram(
        out,
        "mqlite_rpc_duration_seconds",
        "Latency of registered RPCs.",
        |f| {
            for l in &o.http.handler_latency {
                let h = Histogram {
                    bounds_seconds: l.buckets.iter().map(|b| b.upper_bound_seconds).collect(),
                    bucket_counts: l.buckets.iter().map(|b| b.count).collect(),
                    count: l.count,
                    sum_seconds: l.sum_seconds,
                };
                f.histogram(&[("rpc", rpc_label(&l.rpc))], &h);
            }
        },
    );
}

/// `/mqlite.v1.QueueService/Send` → `QueueService/Send`.
fn rpc_label(route: &str) -> &str {
    route.strip_prefix(ROUTE_PREFIX).unwrap_or(route)
}

fn storage_labels(op: &StorageOperation) -> [(&'static str, &str); 3] {
    [
        ("operation", &op.operation),
        ("outcome", &op.outcome),
        ("error_code", &op.error_code),
    ]
}

fn gauge(out: &mut String, name: &str, help: &str, fill: impl FnOnce(&mut Family)) {
    family(out, name, "gauge", help, fill);
}

fn counter(out: &mut String, name: &str, help: &str, fill: impl FnOnce(&mut Family)) {
    family(out, name, "counter", help, fill);
}

fn histogram(out: &mut String, name: &str, help: &str, fill: impl FnOnce(&mut Family)) {
    family(out, name, "histogram", help, fill);
}

/// Writes one family's block, or nothing when it has no sample.
fn family(out: &mut String, name: &str, kind: &str, help: &str, fill: impl FnOnce(&mut Family)) {
    let mut f = Family {
        name,
        samples: String::new(),
    };
    fill(&mut f);
    if !f.samples.is_empty() {
        // Writing into a String cannot fail.
        let _ = write!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n");
        out.push_str(&f.samples);
    }
}

struct Family<'a> {
    name: &'a str,
    samples: String,
}

impl Family<'_> {
    fn sample(&mut self, suffix: &str, labels: &[(&str, &str)], value: impl Display) {
        let _ = write!(self.samples, "{}{suffix}", self.name);
        if !labels.is_empty() {
            self.samples.push('{');
            for (i, (key, value)) in labels.iter().enumerate() {
                if i > 0 {
                    self.samples.push(',');
                }
                let _ = write!(self.samples, "{key}=\"{}\"", Escaped(value));
            }
            self.samples.push('}');
        }
        let _ = writeln!(self.samples, " {value}");
    }

    fn histogram(&mut self, labels: &[(&str, &str)], h: &Histogram) {
        let bounds = h.bounds_seconds.iter().map(|b| Float(*b).to_string());
        let sum = Float(h.sum_seconds);
        self.buckets(labels, bounds, &h.bucket_counts, h.count, sum);
    }

    fn size_histogram(&mut self, labels: &[(&str, &str)], h: &SizeHistogram) {
        let bounds = h.bounds.iter().map(u64::to_string);
        self.buckets(labels, bounds, &h.bucket_counts, h.count, h.sum);
    }

    /// `_bucket` per finite bound plus `+Inf`, then `_sum` and `_count`.
    fn buckets(
        &mut self,
        labels: &[(&str, &str)],
        bounds: impl Iterator<Item = String>,
        cumulative: &[u64],
        count: u64,
        sum: impl Display,
    ) {
        let infinity = std::iter::once("+Inf".to_string());
        let counts = cumulative.iter().copied().chain([count]);
        for (le, n) in bounds.chain(infinity).zip(counts) {
            let mut with_le = labels.to_vec();
            with_le.push(("le", &le));
            self.sample("_bucket", &with_le, n);
        }
        self.sample("_sum", labels, sum);
        self.sample("_count", labels, count);
    }
}

/// A label value with only backslash, newline and double quote escaped, as
/// the text format defines (any other character is literal UTF-8).
struct Escaped<'a>(&'a str);

impl Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in self.0.chars() {
            match c {
                '\\' => f.write_str("\\\\")?,
                '\n' => f.write_str("\\n")?,
                '"' => f.write_str("\\\"")?,
                c => f.write_char(c)?,
            }
        }
        Ok(())
    }
}

/// A float in the text format's spelling (`NaN`, `+Inf`, `-Inf`, otherwise
/// the shortest decimal that round-trips).
struct Float(f64);

impl Display for Float {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            v if v.is_nan() => f.write_str("NaN"),
            v if v == f64::INFINITY => f.write_str("+Inf"),
            v if v == f64::NEG_INFINITY => f.write_str("-Inf"),
            v => write!(f, "{v}"),
        }
    }
}

/// Epoch or age milliseconds shown as seconds (Prometheus' base unit).
struct Millis(i64);

impl Display for Millis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Precision loss only beyond 2^53 ms (about 285,000 years).
        Float(self.0 as f64 / 1000.0).fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_escape_only_three_characters() {
        assert_eq!(
            Escaped("a\\b\n\"c\"\td é").to_string(),
            "a\\\\b\\n\\\"c\\\"\td é"
        );
    }

    #[test]
    fn floats_use_the_text_format_spelling() {
        assert_eq!(Float(0.0025).to_string(), "0.0025");
        assert_eq!(Float(20.0).to_string(), "20");
        assert_eq!(Float(f64::INFINITY).to_string(), "+Inf");
        assert_eq!(Float(f64::NAN).to_string(), "NaN");
        assert_eq!(Millis(1_500).to_string(), "1.5");
    }

    #[test]
    fn rpc_label_drops_the_package_prefix() {
        assert_eq!(
            rpc_label("/mqlite.v1.AdminService/ListQueues"),
            "AdminService/ListQueues"
        );
    }

    #[test]
    fn an_empty_family_writes_nothing() {
        let mut out = String::new();
        gauge(&mut out, "mqlite_x", "x", |_| {});
        assert!(out.is_empty());
    }
}
