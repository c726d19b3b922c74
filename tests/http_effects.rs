//! What the HTTP layer does with a request's effects (docs/semantics.md#long-polling,
//! docs/http-api.md, "Errors"): the wake hints it hands the platform with the
//! answer, and the counters it records once the request is answered, as the
//! Worker sees them with a fresh `Service` per request over one isolate.

mod support;

use std::sync::Arc;

use mqlite_edge::engine::{Clock, Parked, Waiter};
use mqlite_edge::http::{Config, Isolate, Request, Response, Service, WakeHint};
use serde_json::{json, Value};
use support::*;

/// One isolate over one database; every request gets a `Service` of its
/// own, as on a Worker.
struct Worker {
    isolate: Arc<Isolate>,
    temp: TempDb,
    clock: Clock,
    /// How long each request takes, as its waiter tells it.
    elapsed_ms: u64,
}

impl Worker {
    fn new() -> Self {
        Worker {
            isolate: Arc::new(Isolate::new(T0)),
            temp: TempDb::new(),
            clock: Clock::manual(T0),
            elapsed_ms: 0,
        }
    }

    async fn call(&self, rpc: &str, body: Value) -> Response {
        let waiter = Hinting {
            elapsed_ms: self.elapsed_ms,
        };
        self.call_waiting(rpc, body, &waiter).await
    }

    /// [`Worker::call`] with the request's waiter.
    async fn call_waiting(&self, rpc: &str, body: Value, waiter: &impl Waiter) -> Response {
        let config = Config::from_vars(|name| (name == "MQLITE_TOKENS").then(|| ADMIN.into()));
        let transport = InProcess {
            db: self.temp.db.clone(),
        };
        let service = Service::new(
            config.map(|c| (c, transport)),
            self.clock.clone(),
            self.isolate.clone(),
        );
        let request = Request {
            method: "POST".into(),
            path: format!("/mqlite.v1.{rpc}"),
            headers: vec![("Authorization".into(), ADMIN_AUTH.into())],
        };
        service
            .handle(&request, body.to_string().into_bytes(), waiter)
            .await
    }

    async fn ok(&self, rpc: &str, body: Value) -> Value {
        let response = self.call(rpc, body.clone()).await;
        assert_eq!(response.status, 200, "{rpc} {body}");
        json_body(&response)
    }
}

#[tokio::test]
async fn a_publish_hands_the_platform_one_hint_per_waited_on_subscription() {
    let worker = Worker::new();
    for sub in ["a", "b"] {
        worker
            .ok("AdminService/Subscribe", json!({"topic": "t", "name": sub}))
            .await;
        // A claim that waits marks the subscription as waited on.
        let got = worker
            .ok(
                "QueueService/Receive",
                json!({"queue": sub, "wait_time_ms": 50}),
            )
            .await;
        assert_eq!(got["messages"], json!([]));
    }
    worker.clock.advance(5);
    let response = worker
        .call(
            "QueueService/Send",
            json!({"queue": "t", "messages": [{"body": b64("x")}, {"body": b64("y")}]}),
        )
        .await;
    assert_eq!(response.status, 200);
    let at_ms = T0 + 5;
    assert_eq!(
        response.wake_hints(),
        [
            WakeHint {
                queue: "a".into(),
                at_ms
            },
            WakeHint {
                queue: "b".into(),
                at_ms
            }
        ]
    );
}

#[tokio::test]
async fn each_answered_request_is_counted_by_its_code_in_the_isolate() {
    // Each request takes 1.5 s, as its waiter tells it.
    let worker = Worker {
        elapsed_ms: 1500,
        ..Worker::new()
    };
    worker
        .ok(
            "AdminService/CreateQueue",
            json!({"name": "q", "config": {}}),
        )
        .await;
    worker
        .ok(
            "QueueService/Send",
            json!({"queue": "q", "messages": [{"body": b64("x")}]}),
        )
        .await;
    let missing = worker
        .call("QueueService/Stats", json!({"queue": "nowhere"}))
        .await;
    assert_eq!(missing.status, 404);
    // Another request's Service reads what the earlier ones recorded.
    let observed = worker.ok("AdminService/Observe", json!({})).await;
    let enqueued: Vec<&Value> = observed["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["queue"] == "q" && m["event"] == "enqueued")
        .collect();
    assert_eq!(enqueued.len(), 1, "{:?}", observed["messages"]);
    assert_eq!(enqueued[0]["count"], 1);
    let requests = observed["http"]["requests"].as_array().expect("requests");
    let counted = |rpc: &str, code: &str| {
        requests
            .iter()
            .filter(|r| r["rpc"] == format!("/mqlite.v1.{rpc}") && r["code"] == code)
            .map(|r| r["count"].as_u64().unwrap_or(0))
            .sum::<u64>()
    };
    assert_eq!(
        counted("QueueService/Stats", "not_found"),
        1,
        "not found once"
    );
    assert_eq!(counted("QueueService/Stats", "ok"), 0, "never ok");
    assert_eq!(counted("QueueService/Send", "ok"), 1, "sent once");
    // Times are counted in seconds.
    let send = requests
        .iter()
        .find(|r| r["rpc"] == "/mqlite.v1.QueueService/Send" && r["code"] == "ok")
        .expect("Send counted");
    assert_eq!(send["duration_seconds"], 1.5);
    let latency = observed["http"]["handler_latency"]
        .as_array()
        .expect("latency")
        .iter()
        .find(|r| r["rpc"] == "/mqlite.v1.QueueService/Send")
        .expect("Send's latency");
    assert_eq!(
        (latency["count"].clone(), latency["sum_seconds"].clone()),
        (json!(1), json!(1.5))
    );
}

/// A waiter whose clock moves 750 ms each time it is read.
struct Ticking {
    reads: std::sync::atomic::AtomicU64,
}

impl Waiter for Ticking {
    fn elapsed_ms(&self) -> u64 {
        750 * self.reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
    }

    async fn sleep(&self, _millis: u64) {}

    fn hints(&self) -> bool {
        false
    }

    async fn park(&self, _queue: &str, _since_ms: i64, _millis: u64) -> Parked {
        Parked::TimedOut
    }
}

/// Observe times its database collection in seconds, from the request's
/// own clock: the read before it and the one after, 750 ms apart here.
#[tokio::test]
async fn observe_times_its_collection_in_seconds() {
    let worker = Worker::new();
    let waiter = Ticking {
        reads: Default::default(),
    };
    let response = worker
        .call_waiting("AdminService/Observe", json!({}), &waiter)
        .await;
    assert_eq!(response.status, 200);
    let observed = json_body(&response);
    assert_eq!(
        observed["collection"]["duration_seconds"], 0.75,
        "{observed}"
    );
    assert_eq!(observed["runtime"]["ping_seconds"], 0.75, "{observed}");
}

/// A Redrive hints its destination when it moved messages there and a
/// claim waits on it, and only then (in place and into another queue).
#[tokio::test]
async fn a_redrive_hints_its_destination_only_when_it_moved_something() {
    let worker = Worker::new();
    for name in ["src", "dst"] {
        worker
            .ok(
                "AdminService/CreateQueue",
                json!({"name": name, "config": {}}),
            )
            .await;
        let got = worker
            .ok(
                "QueueService/Receive",
                json!({"queue": name, "wait_time_ms": 50}),
            )
            .await;
        assert_eq!(got["messages"], json!([]));
    }
    for (redrive, destination) in [
        (json!({"queue": "src", "target": "dst"}), "dst"),
        (json!({"queue": "src"}), "src"),
    ] {
        let nothing = worker.call("AdminService/Redrive", redrive.clone()).await;
        assert_eq!(json_body(&nothing), json!({"moved": 0}));
        assert_eq!(nothing.wake_hints(), [], "{redrive}");
        worker
            .ok(
                "QueueService/Send",
                json!({"queue": "src", "messages": [{"body": b64("x")}]}),
            )
            .await;
        let got = worker
            .ok("QueueService/Receive", json!({"queue": "src"}))
            .await;
        let message = &got["messages"][0];
        worker
            .ok(
                "QueueService/Reject",
                json!({"queue": "src", "seq_number": message["seq_number"],
                       "lock_token": message["lock_token"]}),
            )
            .await;
        let moved = worker.call("AdminService/Redrive", redrive.clone()).await;
        assert_eq!(json_body(&moved), json!({"moved": 1}));
        let hinted: Vec<String> = moved.wake_hints().iter().map(|h| h.queue.clone()).collect();
        assert_eq!(hinted, [destination], "{redrive}");
        // Take it away again for the next round.
        let got = worker
            .ok("QueueService/Receive", json!({"queue": destination}))
            .await;
        let message = &got["messages"][0];
        worker
            .ok(
                "QueueService/Complete",
                json!({"queue": destination, "seq_number": message["seq_number"],
                       "lock_token": message["lock_token"]}),
            )
            .await;
    }
    // Counted: a copy into another queue is enqueued there; a redrive in
    // place enqueues nothing new.
    let observed = worker.ok("AdminService/Observe", json!({})).await;
    let count = |queue: &str, event: &str| {
        observed["messages"]
            .as_array()
            .expect("messages")
            .iter()
            .filter(|m| m["queue"] == queue && m["event"] == event)
            .map(|m| m["count"].as_u64().unwrap_or(0))
            .sum::<u64>()
    };
    assert_eq!(count("dst", "enqueued"), 1, "{observed}");
    assert_eq!(count("src", "enqueued"), 2, "{observed}");
    assert_eq!(count("src", "redriven"), 2, "{observed}");
}
