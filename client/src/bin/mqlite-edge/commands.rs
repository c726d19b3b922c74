//! Every command but `receive` (receive.rs): arity and local checks, one RPC, the output
//! (mqlite-clients.md §2.6–§2.8).

use std::io::{Read, Write};

use mqlite_edge_client::types::*;
use mqlite_edge_client::Error;
use serde_json::Value;

use crate::args::{boolean, value};
use crate::output::{self, Progress};
use crate::text::{format_rfc3339_ms, parse_duration_ms, parse_duration_ns, parse_rfc3339_ms};
use crate::{Command, Context, Failure};

/// The most a body read from stdin may hold.
const STDIN_LIMIT: usize = 16 * 1024 * 1024;

pub const ALL: &[Command] = &[
    Command {
        names: &["create-queue"],
        usage: "create-queue <name> [--lock d] [--max-delivery n] [--ttl d] [--dedup d] [--ordering mode] [--dlq-max-age d] [--dlq-max-count n] [--dlq-max-bytes n]",
        flags: &[
            value("lock", "lock duration (default 30s)"),
            value("max-delivery", "deliveries before dead-lettering (default 10)"),
            value("ttl", "default time to live (0 = unlimited)"),
            value("dedup", "duplicate-detection window (0 = off)"),
            value("ordering", "standard, group_fifo or strict_fifo"),
            value("dlq-max-age", "dead-letter retention age (0 = broker's)"),
            value("dlq-max-count", "dead-letter retention count (0 = broker's, -1 = unbounded)"),
            value("dlq-max-bytes", "dead-letter retention bytes (0 = broker's, -1 = unbounded)"),
        ],
        run: create_queue,
    },
    Command {
        names: &["subscribe", "create-subscription"],
        usage: "subscribe <topic> <name> [--expr filter]",
        flags: &[value("expr", "filter expression (empty = match all)")],
        run: subscribe,
    },
    Command {
        names: &["send"],
        usage: "send <queue> <body…|-> [--file path] [--message-id id] [--group g] [--subject s] [--reply-to r] [--ttl d]",
        flags: &[
            value("file", "read the body from this file"),
            value("message-id", "message id (duplicate detection)"),
            value("group", "group id"),
            value("subject", "subject"),
            value("reply-to", "reply-to"),
            value("ttl", "time to live (0 = the queue's default)"),
        ],
        run: send,
    },
    Command {
        names: &["schedule"],
        usage: "schedule <queue> <body…|-> --at <time|duration> [--file path] [--message-id id] [--group g] [--subject s]",
        flags: &[
            value("at", "delivery time: RFC 3339, or a duration from now"),
            value("file", "read the body from this file"),
            value("message-id", "message id (duplicate detection)"),
            value("group", "group id"),
            value("subject", "subject"),
        ],
        run: schedule,
    },
    Command {
        names: &["cancel"],
        usage: "cancel <queue> <seq>",
        flags: &[],
        run: cancel,
    },
    Command {
        names: &["receive"],
        usage: "receive <queue> [--max n] [--wait d] [--no-ack] [--delete]",
        flags: &[
            value("max", "most messages (default 1)"),
            value("wait", "long-poll up to this long (default 0)"),
            boolean("no-ack", "leave the messages locked and print their lock tokens"),
            boolean("delete", "receive-and-delete (at most once)"),
        ],
        run: crate::receive::receive,
    },
    Command {
        names: &["receive-deferred"],
        usage: "receive-deferred <queue> --seq n,n,…",
        flags: &[value("seq", "comma-separated seq numbers")],
        run: receive_deferred,
    },
    Command {
        names: &["complete"],
        usage: "complete <queue> <seq> <lock-token>",
        flags: &[],
        run: complete,
    },
    Command {
        names: &["abandon"],
        usage: "abandon <queue> <seq> <lock-token> [--delay d]",
        flags: &[value("delay", "redeliver after this long")],
        run: abandon,
    },
    Command {
        names: &["reject"],
        usage: "reject <queue> <seq> <lock-token> [--reason r] [--detail text]",
        flags: &[
            value("reason", "dead-letter reason"),
            value("detail", "dead-letter description"),
        ],
        run: reject,
    },
    Command {
        names: &["defer"],
        usage: "defer <queue> <seq> <lock-token>",
        flags: &[],
        run: defer,
    },
    Command {
        names: &["renew"],
        usage: "renew <queue> <seq> <lock-token>",
        flags: &[],
        run: renew,
    },
    Command {
        names: &["peek"],
        usage: "peek <queue> [--state s] [--from seq] [--max n]",
        flags: &[
            value("state", "active, locked, deferred, scheduled or dead_lettered"),
            value("from", "first seq"),
            value("max", "most messages (default 16)"),
        ],
        run: peek,
    },
    Command {
        names: &["metrics"],
        usage: "metrics <queue>",
        flags: &[],
        run: metrics,
    },
    Command {
        names: &["status"],
        usage: "status",
        flags: &[],
        run: status,
    },
    Command {
        names: &["list"],
        usage: "list",
        flags: &[],
        run: list,
    },
    Command {
        names: &["list-subscriptions"],
        usage: "list-subscriptions",
        flags: &[],
        run: list_subscriptions,
    },
    Command {
        names: &["test-filter"],
        usage: "test-filter <expr> [<body…|->] [--file path] [--subject s] [--group g] [--prop k=v,…]",
        flags: &[
            value("file", "read the sample body from this file"),
            value("subject", "sample subject"),
            value("group", "sample group id"),
            value("prop", "sample properties k=v,k=v"),
        ],
        run: test_filter,
    },
    Command {
        names: &["redrive"],
        usage: "redrive <queue> [--to queue] [--max n] [--older-than d]",
        flags: &[
            value("to", "target queue (default: back to the source)"),
            value("max", "most messages (0 = all)"),
            value("older-than", "only dead letters older than this"),
        ],
        run: redrive,
    },
    Command {
        names: &["purge-dlq"],
        usage: "purge-dlq <queue> (--max n | --older-than d | --all)",
        flags: &[
            value("max", "most messages"),
            value("older-than", "only dead letters older than this"),
            boolean("all", "the whole dead-letter queue"),
        ],
        run: purge_dlq,
    },
];

/// Prints through one buffered, flushed writer; any write error fails the command.
pub fn print(f: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) -> Result<(), Failure> {
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    f(&mut out)
        .and_then(|()| out.flush())
        .map_err(|e| Failure::Error(format!("writing the output: {e}")))
}

/// One call with a spinner on a terminal.
pub fn call<T>(label: &str, f: impl FnOnce() -> Result<T, Error>) -> Result<T, Failure> {
    let _progress = Progress::start(label.to_owned());
    f().map_err(Failure::from)
}

fn flag_int(c: &Context, name: &str) -> Result<i64, Failure> {
    match c.args.get(name) {
        None => Ok(0),
        Some(v) => v.parse().map_err(|_| {
            Failure::Flags(format!("invalid value {v:?} for flag -{name}: parse error"))
        }),
    }
}

fn flag_duration(c: &Context, name: &str) -> Result<i64, Failure> {
    match c.args.get(name) {
        None => Ok(0),
        Some(v) => parse_duration_ms(v)
            .map_err(|e| Failure::Flags(format!("invalid value {v:?} for flag -{name}: {e}"))),
    }
}

/// A `<seq>` positional: a base-10 integer above 0.
fn seq(text: &str) -> Result<i64, Failure> {
    match text.parse::<i64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(Failure::Error(format!(
            "invalid seq {text:?}: want a positive integer"
        ))),
    }
}

/// The body of send, schedule and test-filter: the words, `-` (stdin) or `--file`.
fn body(c: &Context, words: &[String], required: bool) -> Result<Option<Vec<u8>>, Failure> {
    match (words.first(), c.args.get("file")) {
        (Some(_), Some(_)) => Err(Failure::Error(
            "give the body as words, - or --file, not both".into(),
        )),
        (None, Some(path)) => std::fs::read(path)
            .map(Some)
            .map_err(|e| Failure::Error(format!("reading {path}: {e}"))),
        (Some(first), None) if first == "-" => {
            let mut bytes = vec![];
            std::io::stdin()
                .take(STDIN_LIMIT as u64 + 1)
                .read_to_end(&mut bytes)
                .map_err(|e| Failure::Error(format!("reading stdin: {e}")))?;
            if bytes.len() > STDIN_LIMIT {
                return Err(Failure::Error(format!(
                    "stdin holds more than {STDIN_LIMIT} bytes: use --file"
                )));
            }
            Ok(Some(bytes))
        }
        (Some(_), None) => Ok(Some(words.join(" ").into_bytes())),
        (None, None) if required => Err(Failure::Error("no body: give words, - or --file".into())),
        (None, None) => Ok(None),
    }
}

fn create_queue(c: &Context) -> Result<(), Failure> {
    let name = c.positionals(1, ALL[0].usage)?[0].clone();
    let config = QueueConfig {
        lock_duration_ms: flag_duration(c, "lock")?,
        max_delivery_count: flag_int(c, "max-delivery")?,
        default_ttl_ms: flag_duration(c, "ttl")?,
        dedup_window_ms: flag_duration(c, "dedup")?,
        ordering_mode: c.args.string("ordering"),
        dlq_max_age_ms: flag_duration(c, "dlq-max-age")?,
        dlq_max_count: flag_int(c, "dlq-max-count")?,
        dlq_max_bytes: flag_int(c, "dlq-max-bytes")?,
        ..QueueConfig::default()
    };
    call("creating the queue", || {
        c.client.create_queue(&CreateQueueRequest {
            name: name.clone(),
            config,
        })
    })?;
    print(|o| {
        output::ok(
            o,
            c.format,
            &[("action", "create-queue".into()), ("queue", name.into())],
        )
    })
}

fn subscribe(c: &Context) -> Result<(), Failure> {
    let p = c.positionals(2, "subscribe <topic> <name> [--expr filter]")?;
    let (topic, name) = (p[0].clone(), p[1].clone());
    let expr = c.args.string("expr");
    call("subscribing", || {
        c.client.subscribe(&SubscribeRequest {
            topic: topic.clone(),
            name: name.clone(),
            filter: (!expr.is_empty()).then_some(Filter { expr }),
        })
    })?;
    print(|o| {
        output::ok(
            o,
            c.format,
            &[
                ("action", "subscribe".into()),
                ("subscription", name.into()),
                ("topic", topic.into()),
            ],
        )
    })
}

/// The one message of send and schedule.
fn outgoing(c: &Context, usage: &str) -> Result<(String, Message), Failure> {
    let p = &c.args.positionals;
    let Some(queue) = p.first() else {
        return Err(Failure::Error(format!("usage: mqlite-edge {usage}")));
    };
    let body = body(c, &p[1..], true)?.unwrap_or_default();
    Ok((
        queue.clone(),
        Message {
            body,
            message_id: c.args.string("message-id"),
            group_id: c.args.string("group"),
            subject: c.args.string("subject"),
            reply_to: c.args.string("reply-to"),
            ..Message::default()
        },
    ))
}

fn send(c: &Context) -> Result<(), Failure> {
    let (queue, message) = outgoing(c, ALL[2].usage)?;
    let request = SendRequest {
        queue: queue.clone(),
        messages: vec![message],
        ttl_ms: flag_duration(c, "ttl")?,
        ..SendRequest::default()
    };
    let answer = call("sending", || c.client.send(&request))?;
    let seq = answer.seq_numbers.first().copied().unwrap_or(0);
    print(|o| output::ok(o, c.format, &[("queue", queue.into()), ("seq", seq.into())]))
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn schedule(c: &Context) -> Result<(), Failure> {
    let (queue, message) = outgoing(c, ALL[3].usage)?;
    let Some(at) = c.args.get("at") else {
        return Err(Failure::Error("schedule needs --at".into()));
    };
    let now = now_ms();
    let at_ms =
        parse_rfc3339_ms(at).or_else(|e| parse_duration_ms(at).map(|d| now + d).map_err(|_| e))?;
    if at_ms <= now {
        return Err(Failure::Error(format!("--at {at} is not in the future")));
    }
    let request = SendRequest {
        queue: queue.clone(),
        messages: vec![message],
        scheduled_enqueue_time_ms: at_ms,
        ..SendRequest::default()
    };
    let answer = call("scheduling", || c.client.schedule(&request))?;
    let seq = answer.seq_numbers.first().copied().unwrap_or(0);
    print(|o| {
        output::ok(
            o,
            c.format,
            &[
                ("queue", queue.into()),
                ("seq", seq.into()),
                ("at", format_rfc3339_ms(at_ms).into()),
            ],
        )
    })
}

fn cancel(c: &Context) -> Result<(), Failure> {
    let p = c.positionals(2, "cancel <queue> <seq>")?;
    let (queue, seq) = (p[0].clone(), seq(&p[1])?);
    call("cancelling", || {
        c.client.cancel(&CancelRequest {
            queue: queue.clone(),
            seq_number: seq,
        })
    })?;
    print(|o| {
        output::ok(
            o,
            c.format,
            &[
                ("action", "cancel".into()),
                ("queue", queue.into()),
                ("seq", seq.into()),
            ],
        )
    })
}

fn receive_deferred(c: &Context) -> Result<(), Failure> {
    let queue = c.positionals(1, "receive-deferred <queue> --seq n,n,…")?[0].clone();
    let seqs = c
        .args
        .string("seq")
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(seq)
        .collect::<Result<Vec<_>, _>>()?;
    if seqs.is_empty() {
        return Err(Failure::Error("receive-deferred needs --seq".into()));
    }
    let answer = call("receiving deferred messages", || {
        c.client.receive_deferred(&ReceiveDeferredRequest {
            queue,
            seq_numbers: seqs,
        })
    })?;
    print(|o| output::received(o, c.format, &answer.messages))
}

/// complete|abandon|reject|defer|renew <queue> <seq> <lock-token>.
fn settle(
    c: &Context,
    verb: &str,
    build: impl FnOnce(&mut SettleRequest) -> Result<(), Failure>,
    rpc: impl FnOnce(&SettleRequest) -> Result<(), Error>,
) -> Result<(), Failure> {
    let p = c.positionals(3, &format!("{verb} <queue> <seq> <lock-token>"))?;
    let mut request = SettleRequest::new(&p[0], seq(&p[1])?, &p[2]);
    build(&mut request)?;
    call(verb, || rpc(&request))?;
    print(|o| {
        output::ok(
            o,
            c.format,
            &[
                ("action", verb.into()),
                ("queue", request.queue.clone().into()),
                ("seq", request.seq_number.into()),
            ],
        )
    })
}

fn complete(c: &Context) -> Result<(), Failure> {
    settle(c, "complete", |_| Ok(()), |r| c.client.complete(r))
}

fn abandon(c: &Context) -> Result<(), Failure> {
    let delay = flag_duration(c, "delay")?;
    settle(
        c,
        "abandon",
        |r| {
            r.delay_ms = delay;
            Ok(())
        },
        |r| c.client.abandon(r),
    )
}

fn reject(c: &Context) -> Result<(), Failure> {
    settle(
        c,
        "reject",
        |r| {
            r.dead_letter_reason = c.args.string("reason");
            r.dead_letter_description = c.args.string("detail");
            Ok(())
        },
        |r| c.client.reject(r),
    )
}

fn defer(c: &Context) -> Result<(), Failure> {
    settle(c, "defer", |_| Ok(()), |r| c.client.defer(r))
}

fn renew(c: &Context) -> Result<(), Failure> {
    settle(c, "renew", |_| Ok(()), |r| c.client.renew(r))
}

fn peek(c: &Context) -> Result<(), Failure> {
    let queue = c.positionals(1, "peek <queue> [--state s] [--from seq] [--max n]")?[0].clone();
    let max = match flag_int(c, "max")? {
        0 if !c.args.given("max") => 16,
        n => n,
    };
    let from_seq = flag_int(c, "from")?;
    let answer = call("peeking", || {
        c.client.peek(&PeekRequest {
            queue,
            from_seq,
            state: c.args.string("state"),
            max,
        })
    })?;
    print(|o| output::peeked(o, c.format, &answer.messages))
}

fn metrics(c: &Context) -> Result<(), Failure> {
    let queue = c.positionals(1, "metrics <queue>")?[0].clone();
    let stats = call("reading the counters", || {
        c.client.stats(&QueueRequest { queue })
    })?;
    print(|o| output::stats(o, c.format, &stats))
}

fn status(c: &Context) -> Result<(), Failure> {
    c.positionals(0, "status")?;
    let status = call("asking the broker", || c.client.status(&NoArguments {}))?;
    print(|o| output::status(o, c.format, &status))
}

fn list(c: &Context) -> Result<(), Failure> {
    c.positionals(0, "list")?;
    let answer = call("listing queues", || c.client.list_queues(&NoArguments {}))?;
    print(|o| output::queues(o, c.format, &answer.queues))
}

fn list_subscriptions(c: &Context) -> Result<(), Failure> {
    c.positionals(0, "list-subscriptions")?;
    let answer = call("listing subscriptions", || {
        c.client.list_subscriptions(&NoArguments {})
    })?;
    print(|o| output::subscriptions(o, c.format, &answer.subscriptions))
}

/// `--prop k=v,k=v`: split on `,`, then on the first `=`; keys trimmed.
fn properties(text: &str) -> Result<std::collections::BTreeMap<String, String>, Failure> {
    text.split(',')
        .filter(|pair| !pair.is_empty())
        .map(|pair| match pair.split_once('=') {
            Some((k, v)) => Ok((k.trim().to_owned(), v.to_owned())),
            None => Err(Failure::Error(format!("invalid --prop {pair:?}: want k=v"))),
        })
        .collect()
}

fn test_filter(c: &Context) -> Result<(), Failure> {
    let p = &c.args.positionals;
    let Some(expr) = p.first().cloned() else {
        return Err(Failure::Error(format!(
            "usage: mqlite-edge {}",
            ALL[17].usage
        )));
    };
    let body = body(c, &p[1..], false)?;
    let sample_given =
        body.is_some() || c.args.given("subject") || c.args.given("group") || c.args.given("prop");
    let message = sample_given
        .then(|| -> Result<Message, Failure> {
            Ok(Message {
                body: body.unwrap_or_default(),
                subject: c.args.string("subject"),
                group_id: c.args.string("group"),
                properties: properties(&c.args.string("prop"))?,
                ..Message::default()
            })
        })
        .transpose()?;
    let answer = call("testing the filter", || {
        c.client.test_filter(&TestFilterRequest { expr, message })
    })?;
    let verdict = match (answer.valid, answer.ran, answer.matched) {
        (false, _, _) => Err(format!("invalid filter: {}", answer.error)),
        (true, true, _) if !answer.error.is_empty() => {
            Err(format!("filter errored on the sample: {}", answer.error))
        }
        (true, false, _) => Ok("ok: expression is valid (no sample given)"),
        (true, true, true) => Ok("ok: valid; sample MATCHED"),
        (true, true, false) => Ok("ok: valid; sample did NOT match"),
    };
    match (c.format, &verdict) {
        (crate::Format::Json, _) => print(|o| output::json(o, &answer))?,
        (crate::Format::Text, Ok(line)) => print(|o| writeln!(o, "{line}"))?,
        (crate::Format::Text, Err(_)) => {}
    }
    verdict.map(|_| ()).map_err(Failure::Error)
}

/// Bounds of redrive and purge-dlq: never negative, never a sub-millisecond age.
fn bounds(c: &Context, command: &str) -> Result<(String, i64, i64), Failure> {
    let queue = c.positionals(1, &format!("{command} <queue> …"))?[0].clone();
    let max = flag_int(c, "max")?;
    let older_than = match c.args.get("older-than") {
        None => 0,
        Some(text) => {
            let ns = parse_duration_ns(text).map_err(|e| {
                Failure::Flags(format!("invalid value {text:?} for flag -older-than: {e}"))
            })?;
            if ns > 0.0 && ns < 1e6 {
                return Err(Failure::Error(format!(
                    "--older-than {text} is under 1ms: it would mean no bound"
                )));
            }
            (ns / 1e6) as i64
        }
    };
    if max < 0 || older_than < 0 {
        return Err(Failure::Error(
            "--max and --older-than cannot be negative".into(),
        ));
    }
    Ok((queue, max, older_than))
}

fn redrive(c: &Context) -> Result<(), Failure> {
    let (queue, max, older_than_ms) = bounds(c, "redrive")?;
    let answer = call("redriving", || {
        c.client.redrive(&RedriveRequest {
            queue,
            target: c.args.string("to"),
            max,
            older_than_ms,
            ..RedriveRequest::default()
        })
    })?;
    print(|o| {
        output::ok(
            o,
            c.format,
            &[("action", "redrive".into()), ("moved", answer.moved.into())],
        )
    })
}

fn purge_dlq(c: &Context) -> Result<(), Failure> {
    let (queue, max, older_than_ms) = bounds(c, "purge-dlq")?;
    let all = c.args.bool("all");
    if !all && max == 0 && older_than_ms == 0 {
        return Err(Failure::Error(
            "refusing an unbounded purge: give --max, --older-than or --all".into(),
        ));
    }
    if all && (c.args.given("max") || c.args.given("older-than")) {
        return Err(Failure::Error(
            "--all cannot be combined with --max or --older-than".into(),
        ));
    }
    let answer = call("purging dead letters", || {
        c.client.purge(&PurgeRequest {
            queue,
            max,
            older_than_ms,
        })
    })?;
    print(|o| {
        output::ok(
            o,
            c.format,
            &[
                ("action", "purge-dlq".into()),
                ("purged", Value::from(answer.purged)),
            ],
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seqs_must_be_positive_integers() {
        assert_eq!(seq("7").ok(), Some(7));
        assert!(seq("0").is_err() && seq("-1").is_err() && seq("x").is_err());
    }

    #[test]
    fn properties_split_on_commas_then_the_first_equals() {
        let p = properties(" a=1,b=x=y").ok().unwrap();
        assert_eq!(p.get("a").map(String::as_str), Some("1"));
        assert_eq!(p.get("b").map(String::as_str), Some("x=y"));
        assert!(properties("novalue").is_err());
    }

    #[test]
    fn usage_indexes_name_their_commands() {
        assert!(ALL[0].usage.starts_with("create-queue"));
        assert!(ALL[2].usage.starts_with("send"));
        assert!(ALL[3].usage.starts_with("schedule"));
        assert!(ALL[17].usage.starts_with("test-filter"));
    }
}
