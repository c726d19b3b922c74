//! Wake-hint measurements shared by the end-to-end suite (`tests/wake.rs`)
//! and the bench (`mqlite-wake`): one waiting Receive and one Send at a
//! chosen moment, timed from the client's side.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::{b64, Stack};

/// One timed wake-up.
#[derive(Debug, Clone, Copy)]
pub struct Woken {
    /// From the Send's answer to the Receive's answer (0 when the Receive
    /// answered first: the hint goes out after the commit, not after the
    /// Send's answer reaches its client).
    pub latency: Duration,
    /// How long the Receive waited in all.
    pub waited: Duration,
}

/// A Receive waiting `wait_ms` on `queue` while another client sends one
/// message `send_after` into the wait. Fails unless the Receive gets it.
pub fn wake_once(
    stack: &Arc<Stack>,
    queue: &str,
    wait_ms: u64,
    send_after: Duration,
) -> Result<Woken, String> {
    let sender = stack.clone();
    let target = queue.to_owned();
    let body = b64(&format!("wake {}", send_after.as_millis()));
    let expected = body.clone();
    let send = std::thread::spawn(move || {
        std::thread::sleep(send_after);
        let reply = sender.rpc(
            "QueueService/Send",
            &json!({"queue": target, "messages": [{"body": body}]}),
        );
        (reply.status, Instant::now())
    });
    let started = Instant::now();
    let reply = stack.rpc(
        "QueueService/Receive",
        &json!({"queue": queue, "wait_time_ms": wait_ms}),
    );
    let answered = Instant::now();
    let (sent_status, sent) = send.join().map_err(|_| "the sender panicked")?;
    if sent_status != 200 || reply.status != 200 {
        return Err(format!(
            "send {sent_status}, receive {}: {}",
            reply.status, reply.text
        ));
    }
    let got = reply.json();
    let messages = got["messages"].as_array().cloned().unwrap_or_default();
    let [message] = messages.as_slice() else {
        return Err(format!("expected the one message sent, got {got}"));
    };
    if message["body"] != expected.as_str() {
        return Err(format!("received another message: {got}"));
    }
    let settled = stack.rpc(
        "QueueService/Complete",
        &json!({"queue": queue, "seq_number": message["seq_number"],
                "lock_token": message["lock_token"]}),
    );
    if settled.status != 200 {
        return Err(format!("complete: {}", settled.text));
    }
    Ok(Woken {
        latency: answered.saturating_duration_since(sent),
        waited: answered - started,
    })
}

/// An empty wait of `wait_ms` on `queue`: how long it took and the database
/// requests it made (0 when the database does not count them).
pub fn empty_wait(stack: &Stack, queue: &str, wait_ms: u64) -> Result<(Duration, u64), String> {
    let before = stack.round_trips();
    let started = Instant::now();
    let reply = stack.rpc(
        "QueueService/Receive",
        &json!({"queue": queue, "wait_time_ms": wait_ms}),
    );
    let waited = started.elapsed();
    if reply.status != 200 || reply.json() != json!({"messages": []}) {
        return Err(format!(
            "empty wait answered {}: {}",
            reply.status, reply.text
        ));
    }
    Ok((waited, stack.round_trips().saturating_sub(before)))
}

/// The `q`-quantile (0..=1) of `samples`, nearest rank.
pub fn quantile(samples: &[Duration], q: f64) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}
