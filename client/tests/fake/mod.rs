//! A scripted fake broker for the crate's integration tests: one thread per connection,
//! HTTP/1.1 with Content-Length, answers chosen by a script per route and call number.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use serde_json::Value;

/// One request the fake broker saw: its route and JSON body.
pub type Seen = Arc<Mutex<Vec<(String, Value)>>>;

/// What the fake answers to the n-th request on a route: a status and body, or `None`
/// to close the connection without an answer.
pub type Script = fn(route: &str, n: usize, body: &Value) -> Option<(u16, Value)>;

fn read_request(stream: &mut BufReader<TcpStream>) -> Option<(String, Value)> {
    let mut line = String::new();
    stream.read_line(&mut line).ok()?;
    let route = line.split_whitespace().nth(1)?.to_owned();
    let mut length = 0;
    loop {
        let mut header = String::new();
        stream.read_line(&mut header).ok()?;
        if header.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().ok()?;
            }
        }
    }
    let mut body = vec![0; length];
    stream.read_exact(&mut body).ok()?;
    Some((route, serde_json::from_slice(&body).unwrap_or(Value::Null)))
}

/// A broker on a free port answering by `script`, one connection per request.
pub fn fake_broker(script: Script) -> (String, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let seen: Seen = Arc::default();
    let log = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let log = log.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream);
                while let Some((route, body)) = read_request(&mut reader) {
                    let n = {
                        let mut log = log.lock().unwrap_or_else(|p| p.into_inner());
                        log.push((route.clone(), body.clone()));
                        log.iter().filter(|(r, _)| *r == route).count()
                    };
                    let Some((status, answer)) = script(&route, n, &body) else {
                        return;
                    };
                    let text = answer.to_string();
                    let head = format!(
                        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n\
                         Content-Length: {}\r\n\r\n",
                        text.len()
                    );
                    let stream = reader.get_mut();
                    if stream.write_all(head.as_bytes()).is_err()
                        || stream.write_all(text.as_bytes()).is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    (url, seen)
}

/// The bodies of the requests whose route ends with `suffix`, in order.
pub fn routes(seen: &Seen, suffix: &str) -> Vec<Value> {
    seen.lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .filter(|(r, _)| r.ends_with(suffix))
        .map(|(_, b)| b.clone())
        .collect()
}
