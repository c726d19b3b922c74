//! The cron sweep does no work and no writes on an idle deployment: it
//! reads once to learn whether anything is due and takes the write lock
//! only when something is. Each kind of due work still gets its pass.

mod support;

use std::sync::{Arc, Mutex};

use mqlite_edge::engine::{
    Clock, Engine, Limits, OutgoingMessage, QueueConfigInput, Retention, SendRequest,
};
use mqlite_edge::store::{HttpReply, Transport, TransportError};
use support::*;

/// Records whether each pipeline it passes on is a write transaction.
#[derive(Clone)]
struct Recording {
    inner: InProcess,
    writes: Arc<Mutex<Vec<bool>>>,
}

impl Transport for Recording {
    async fn send_pipeline(&self, body: &str) -> Result<HttpReply, TransportError> {
        if let Ok(mut w) = self.writes.lock() {
            w.push(body.contains("BEGIN IMMEDIATE"));
        }
        self.inner.send_pipeline(body).await
    }

    async fn pause(&self, millis: u32) {
        self.inner.pause(millis).await
    }
}

struct Deployment {
    engine: Engine<Recording>,
    clock: Clock,
    writes: Arc<Mutex<Vec<bool>>>,
    _temp: TempDb,
}

impl Deployment {
    fn new() -> Self {
        let temp = TempDb::new();
        let writes = Arc::new(Mutex::new(Vec::new()));
        let clock = Clock::manual(T0);
        let transport = Recording {
            inner: InProcess {
                db: temp.db.clone(),
            },
            writes: writes.clone(),
        };
        Deployment {
            engine: Engine::new(transport, clock.clone(), Limits::default()),
            clock,
            writes,
            _temp: temp,
        }
    }

    /// The write flags of the pipelines one sweep sent.
    async fn sweep(&self, retention: &Retention) -> Vec<bool> {
        self.writes.lock().map(|mut w| w.clear()).ok();
        self.engine.sweep(retention).await.expect("sweep");
        self.writes.lock().map(|w| w.clone()).unwrap_or_default()
    }

    async fn send(&self, queue: &str, ttl_ms: i64) {
        let request = SendRequest {
            queue: queue.into(),
            messages: vec![OutgoingMessage {
                body: b"x".to_vec(),
                ..OutgoingMessage::default()
            }],
            ttl_ms,
            ..SendRequest::default()
        };
        self.engine.send(&request).await.expect("send");
    }
}

#[tokio::test]
async fn an_idle_deployment_costs_one_read_and_no_write() {
    let d = Deployment::new();
    d.engine
        .create_queue("q", &QueueConfigInput::default())
        .await
        .expect("create");
    d.send("q", 0).await;
    assert_eq!(d.sweep(&Retention::default()).await, vec![false]);
    // Something due (a TTL that ran out): the pass writes.
    d.send("q", 1_000).await;
    d.clock.advance(2_000);
    assert_eq!(d.sweep(&Retention::default()).await, vec![false, true]);
    assert_eq!(
        d.engine.stats("q").await.expect("stats").dead_lettered,
        1,
        "the pass ran"
    );
    // Settled again: idle.
    assert_eq!(d.sweep(&Retention::default()).await, vec![false]);
    // A dead letter past the broker's count bound is due work too.
    let bound = Retention {
        max_count: 0,
        ..Retention::off()
    };
    assert_eq!(d.sweep(&bound).await, vec![false]);
    let bound = Retention {
        max_age_ms: 1,
        ..Retention::off()
    };
    assert_eq!(d.sweep(&bound).await, vec![false, true]);
    assert_eq!(d.engine.stats("q").await.expect("stats").dead_lettered, 0);
}
