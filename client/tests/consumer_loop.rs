//! The consumer loop against a scripted fake broker (no workerd): what it sends when a
//! Receive answer is lost, how it settles, and when it stops. The same behaviours run
//! against the real Worker in e2e/tests/clients.rs.

mod fake;

use std::sync::Mutex;
use std::time::Duration;

use fake::{fake_broker, routes};

use mqlite_edge_client::{Client, Consumer, ConsumerOptions, Error, ErrorCode, Stop};
use serde_json::{json, Value};

fn message(seq: i64) -> Value {
    json!({"seq_number": seq, "lock_token": format!("t{seq}"), "delivery_count": 1,
           "body": "aGk="})
}

fn quick() -> ConsumerOptions {
    ConsumerOptions {
        concurrency: 2,
        wait_time_ms: 100,
        ..ConsumerOptions::default()
    }
}

#[test]
fn a_lost_receive_answer_is_retried_once_with_the_same_attempt_id() {
    let (url, seen) = fake_broker(|route, n, _| match (route.rsplit('/').next(), n) {
        (Some("Receive"), 1) => None,
        (Some("Receive"), 2) => Some((200, json!({"messages": [message(7)]}))),
        (Some("Receive"), _) => Some((200, json!({"messages": []}))),
        _ => Some((200, json!({"ok": true}))),
    });
    let client = Client::new(&url, "");
    let stop = Stop::new();
    let handled = Mutex::new(vec![]);
    std::thread::scope(|s| {
        s.spawn(|| {
            while routes(&seen, "/Complete").is_empty() {
                std::thread::sleep(Duration::from_millis(20));
            }
            stop.stop();
        });
        let result = Consumer::new(&client, "q", quick()).run(
            &stop,
            |m| {
                handled.lock().unwrap().push(m.seq_number);
                Ok(())
            },
            |_| {},
        );
        assert_eq!(result, Ok(()));
    });
    let receives = routes(&seen, "/Receive");
    let id = |i: usize| {
        receives[i]["receive_attempt_id"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(id(0).len(), 32);
    assert_eq!(id(0), id(1), "the retry must replay the lost attempt");
    if receives.len() > 2 {
        assert_ne!(id(1), id(2), "a new round needs a new attempt id");
    }
    assert_eq!(
        receives[0]["max_messages"], 2,
        "claims what the free slots hold"
    );
    assert_eq!(*handled.lock().unwrap(), vec![7]);
    assert_eq!(
        routes(&seen, "/Complete")[0],
        json!({"queue": "q", "seq_number": 7, "lock_token": "t7"})
    );
}

#[test]
fn a_handler_error_abandons_and_an_unknown_queue_stops_the_run() {
    let (url, seen) = fake_broker(|route, n, _| match (route.rsplit('/').next(), n) {
        (Some("Receive"), 1) => Some((200, json!({"messages": [message(3)]}))),
        (Some("Receive"), _) => Some((
            404,
            json!({"code": "not_found", "message": "mqlite: queue not found"}),
        )),
        _ => Some((200, json!({"ok": true}))),
    });
    let client = Client::new(&url, "");
    let reported = Mutex::new(0);
    let result = Consumer::new(&client, "q", quick()).run(
        &Stop::new(),
        |_| Err("no".into()),
        |_| *reported.lock().unwrap() += 1,
    );
    assert!(
        matches!(
            &result,
            Err(Error::Api {
                code: ErrorCode::NotFound,
                ..
            })
        ),
        "{result:?}"
    );
    assert_eq!(routes(&seen, "/Abandon").len(), 1);
    assert!(routes(&seen, "/Complete").is_empty());
    assert_eq!(*reported.lock().unwrap(), 1);
}

#[test]
fn an_unknown_outcome_of_complete_is_retried_until_it_answers() {
    let (url, seen) = fake_broker(|route, n, _| match (route.rsplit('/').next(), n) {
        (Some("Receive"), 1) => Some((200, json!({"messages": [message(5)]}))),
        (Some("Receive"), _) => Some((200, json!({"messages": []}))),
        (Some("Complete"), 1) => Some((503, json!({"code": "outcome_unknown", "message": "lost"}))),
        _ => Some((200, json!({"ok": true}))),
    });
    let client = Client::new(&url, "");
    let stop = Stop::new();
    std::thread::scope(|s| {
        s.spawn(|| {
            while routes(&seen, "/Complete").len() < 2 {
                std::thread::sleep(Duration::from_millis(20));
            }
            stop.stop();
        });
        let result = Consumer::new(&client, "q", quick()).run(&stop, |_| Ok(()), |_| {});
        assert_eq!(result, Ok(()));
    });
    let completes = routes(&seen, "/Complete");
    assert_eq!(completes.len(), 2);
    assert_eq!(
        completes[0], completes[1],
        "the retry is the same settlement"
    );
}
