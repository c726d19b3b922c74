//! `receive` (mqlite-clients.md §2.7): one Receive; in auto-ack mode the batch is
//! completed with one CompleteBatch only after it was written to stdout (flush included),
//! its leases kept alive meanwhile. Output that cannot be delivered is refused before
//! anything is claimed.

use std::time::Duration;

use mqlite_edge_client::types::{
    BatchRequest, Message, ReceiveRequest, SettleItem, PEEK_LOCK, RECEIVE_AND_DELETE,
};
use mqlite_edge_client::{Client, Stop};

use crate::commands::{call, print};
use crate::text::parse_duration_ms;
use crate::{output, Context, Failure};

/// RenewBatch's item limit.
const RENEW_CHUNK: usize = 512;

pub fn receive(c: &Context) -> Result<(), Failure> {
    let queue = c.positionals(
        1,
        "receive <queue> [--max n] [--wait d] [--no-ack] [--delete]",
    )?[0]
        .clone();
    let (no_ack, delete) = (c.args.bool("no-ack"), c.args.bool("delete"));
    if no_ack && delete {
        return Err(Failure::Error(
            "--no-ack and --delete are mutually exclusive".into(),
        ));
    }
    let max = match c.args.get("max") {
        None => 1,
        Some(v) => v.parse::<i64>().map_err(|_| {
            Failure::Flags(format!("invalid value {v:?} for flag -max: parse error"))
        })?,
    }
    .max(1);
    let wait_time_ms = match c.args.get("wait") {
        None => 0,
        Some(v) => parse_duration_ms(v)
            .map_err(|e| Failure::Flags(format!("invalid value {v:?} for flag -wait: {e}")))?,
    };
    let auto_ack = !no_ack && !delete;
    if auto_ack && stdout_is_null() {
        return Err(Failure::Error(
            "stdout is the null device: received messages would be completed unseen; \
             redirect stdout, or use --no-ack or --delete"
                .into(),
        ));
    }
    let request = ReceiveRequest {
        queue: queue.clone(),
        max_messages: max,
        wait_time_ms,
        receive_mode: if delete {
            RECEIVE_AND_DELETE
        } else {
            PEEK_LOCK
        },
        receive_attempt_id: String::new(),
    };
    let messages = call(&format!("receiving from {queue}"), || {
        c.client.receive(&request)
    })?
    .messages;
    if !auto_ack || messages.is_empty() {
        return print(|o| output::received(o, c.format, &messages));
    }
    let items: Vec<SettleItem> = messages
        .iter()
        .map(|m| SettleItem {
            seq_number: m.seq_number,
            lock_token: m.lock_token.clone(),
        })
        .collect();
    let keeper = Stop::new();
    spawn_lease_keeper(
        &c.client,
        &queue,
        &items,
        earliest_deadline(&messages),
        &keeper,
    );
    let shown: Vec<Message> = messages
        .iter()
        .map(|m| Message {
            lock_token: String::new(),
            ..m.clone()
        })
        .collect();
    let settled = print(|o| output::received(o, c.format, &shown))
        .map_err(|e| match e {
            Failure::Error(e) => Failure::Error(format!(
                "{e}; {} message(s) left locked for redelivery",
                items.len()
            )),
            e => e,
        })
        .and_then(|()| {
            call("completing", || {
                c.client.complete_batch(&BatchRequest {
                    queue: queue.clone(),
                    messages: items.clone(),
                })
            })
        });
    // A renewal still in flight is harmless after the batch was settled; the command
    // does not wait for it.
    keeper.stop();
    let results = settled?.results;
    let unsettled: Vec<String> = results
        .iter()
        .filter(|r| !r.ok)
        .map(|r| r.seq_number.to_string())
        .collect();
    if unsettled.is_empty() && results.len() == items.len() {
        return Ok(());
    }
    Err(Failure::Error(format!(
        "{} of {} message(s) not settled [{}]; they will be redelivered",
        items.len() - (results.len() - unsettled.len()),
        items.len(),
        unsettled.join(" ")
    )))
}

fn earliest_deadline(messages: &[Message]) -> Option<i64> {
    messages
        .iter()
        .map(|m| m.locked_until_ms)
        .filter(|&t| t > 0)
        .min()
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// How long until the next renewal protecting `until` (mqlite-clients.md §2.7): a third
/// of what remains, at least 50 ms, never past half of it; 1 s with no deadline.
pub fn next_renewal(until: Option<i64>, now: i64) -> Duration {
    let Some(until) = until else {
        return Duration::from_secs(1);
    };
    let remaining = until - now;
    if remaining <= 1 {
        return Duration::ZERO;
    }
    Duration::from_millis((remaining / 3).max(50).min(remaining / 2) as u64)
}

/// Renews the batch's leases (RenewBatch, chunks of 512) until `stop`.
fn spawn_lease_keeper(
    client: &Client,
    queue: &str,
    items: &[SettleItem],
    until: Option<i64>,
    stop: &Stop,
) {
    let (client, queue, items, stop) = (
        client.clone().with_call_timeout(Duration::from_secs(5)),
        queue.to_owned(),
        items.to_vec(),
        stop.clone(),
    );
    std::thread::spawn(move || {
        let mut until = until;
        let mut idle = false;
        loop {
            let wait = if idle {
                Duration::from_secs(1)
            } else {
                next_renewal(until, now_ms())
            };
            if stop.sleep(wait) {
                return;
            }
            let renewed = items
                .chunks(RENEW_CHUNK)
                .filter_map(|chunk| {
                    client
                        .renew_batch(&BatchRequest {
                            queue: queue.clone(),
                            messages: chunk.to_vec(),
                        })
                        .ok()
                })
                .flat_map(|answer| answer.results)
                .filter(|r| r.ok)
                .filter_map(|r| r.locked_until_ms)
                .min();
            until = renewed.or(until.filter(|&u| u > now_ms()));
            idle = wait.is_zero() && renewed.is_none();
        }
    });
}

/// Whether stdout is the null device (also what a closed stdout becomes at start).
#[cfg(unix)]
fn stdout_is_null() -> bool {
    use std::os::fd::AsFd;
    use std::os::unix::fs::MetadataExt;
    let Ok(fd) = std::io::stdout().as_fd().try_clone_to_owned() else {
        return true;
    };
    match (
        std::fs::File::from(fd).metadata(),
        std::fs::metadata("/dev/null"),
    ) {
        (Ok(out), Ok(null)) => out.dev() == null.dev() && out.ino() == null.ino(),
        _ => false,
    }
}

#[cfg(not(unix))]
fn stdout_is_null() -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renewals_come_before_the_deadline() {
        assert_eq!(next_renewal(None, 0), Duration::from_secs(1));
        assert_eq!(next_renewal(Some(30_000), 0), Duration::from_millis(10_000));
        assert_eq!(next_renewal(Some(80), 0), Duration::from_millis(40));
        assert_eq!(next_renewal(Some(100), 200), Duration::ZERO);
    }
}
