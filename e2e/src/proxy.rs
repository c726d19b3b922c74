//! A fault-injecting HTTP proxy between the Worker and the database.
//!
//! Each request the Worker sends is forwarded to the database whole (so a
//! write commits there), then answered according to the next scripted
//! [`Fault`]: passed on, held past the Worker's fetch timeout, cut in the
//! middle of the body, or replaced by a status. With no fault scripted it
//! passes everything. HTTP/1.1 with `Content-Length` or chunked bodies, one
//! upstream connection per request; the Worker's connection is kept alive
//! except where a fault cuts it.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What happens to one request's answer (the request itself always reaches
/// the database).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The whole answer, after this many milliseconds.
    Delay(u64),
    /// The headers and half of the body, then a pause of this many
    /// milliseconds, then the rest.
    StallMidBody(u64),
    /// The headers and half of the body, then the connection is closed.
    CutMidBody,
    /// This status with an HTML body instead of the answer (a gateway).
    Status(u16),
}

struct Shared {
    upstream: String,
    script: Mutex<VecDeque<Fault>>,
    forwarded: AtomicU64,
    faulted: AtomicU64,
    /// The sum of every step's `rows_written` in the database's answers.
    rows_written: AtomicU64,
    stop: AtomicBool,
}

pub struct FaultProxy {
    pub url: String,
    shared: Arc<Shared>,
}

impl FaultProxy {
    /// Listens on a free local port and forwards to `upstream`
    /// (`http://host:port`).
    pub fn start(upstream: &str) -> Result<FaultProxy, String> {
        let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
        let port = listener.local_addr().map_err(|e| e.to_string())?.port();
        let shared = Arc::new(Shared {
            upstream: upstream.trim_start_matches("http://").to_owned(),
            script: Mutex::default(),
            forwarded: AtomicU64::new(0),
            faulted: AtomicU64::new(0),
            rows_written: AtomicU64::new(0),
            stop: AtomicBool::new(false),
        });
        let accepting = shared.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if accepting.stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let shared = accepting.clone();
                std::thread::spawn(move || serve(&shared, stream));
            }
        });
        Ok(FaultProxy {
            url: format!("http://127.0.0.1:{port}"),
            shared,
        })
    }

    /// Applies `fault` to each of the next `n` answers.
    pub fn fault_next(&self, fault: Fault, n: usize) {
        let mut script = lock(&self.shared.script);
        script.clear();
        script.extend(std::iter::repeat_n(fault, n));
    }

    /// Faults scripted but not yet applied.
    pub fn pending(&self) -> usize {
        lock(&self.shared.script).len()
    }

    /// Requests forwarded to the database so far.
    pub fn forwarded(&self) -> u64 {
        self.shared.forwarded.load(Ordering::SeqCst)
    }

    /// Rows the database reported written so far, summed over every step
    /// of every answer (what Turso bills, rolled-back steps included).
    pub fn rows_written(&self) -> u64 {
        self.shared.rows_written.load(Ordering::SeqCst)
    }

    /// Answers faulted so far.
    pub fn faulted(&self) -> u64 {
        self.shared.faulted.load(Ordering::SeqCst)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.url.trim_start_matches("http://"));
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One parsed HTTP message.
struct Message {
    head: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Message {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Reads one message; `None` at a clean end of stream. `to_eof` reads a
/// body without a length up to the end of the stream (a response).
fn read_message(reader: &mut impl BufRead, to_eof: bool) -> Option<Message> {
    let mut head = String::new();
    while head.trim().is_empty() {
        head.clear();
        if reader.read_line(&mut head).ok()? == 0 {
            return None;
        }
    }
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            headers.push((name.trim().to_owned(), value.trim().to_owned()));
        }
    }
    let mut message = Message {
        head: head.trim_end().to_owned(),
        headers,
        body: Vec::new(),
    };
    if message
        .header("Transfer-Encoding")
        .is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
    {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size).ok()?;
            let size = usize::from_str_radix(size.trim().split(';').next()?, 16).ok()?;
            if size == 0 {
                let mut trailer = String::new();
                while reader.read_line(&mut trailer).ok()? > 2 {
                    trailer.clear();
                }
                break;
            }
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk).ok()?;
            message.body.extend_from_slice(&chunk[..size]);
        }
    } else if let Some(len) = message.header("Content-Length") {
        let mut body = vec![0; len.parse().ok()?];
        reader.read_exact(&mut body).ok()?;
        message.body = body;
    } else if to_eof {
        reader.read_to_end(&mut message.body).ok()?;
    }
    Some(message)
}

/// Serves one Worker connection, request after request.
fn serve(shared: &Shared, client: TcpStream) {
    let Ok(read_half) = client.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(read_half);
    let mut client = client;
    // A head and a body written apart would otherwise wait out the peer's
    // delayed acknowledgement (Nagle's algorithm): about 40 ms an answer.
    let _ = client.set_nodelay(true);
    while let Some(request) = read_message(&mut reader, false) {
        let answer = forward(shared, &request);
        shared.forwarded.fetch_add(1, Ordering::SeqCst);
        let fault = lock(&shared.script).pop_front();
        if fault.is_some() {
            shared.faulted.fetch_add(1, Ordering::SeqCst);
        }
        let (status, body) = match answer {
            Some(a) => a,
            None => (502, b"upstream unreachable".to_vec()),
        };
        shared
            .rows_written
            .fetch_add(rows_written(&body), Ordering::SeqCst);
        let head = |status: u16, len: usize| {
            format!(
                "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n\
                 Content-Length: {len}\r\n\r\n"
            )
        };
        let half = body.len() / 2;
        let kept = match fault {
            None => write_all(&mut client, &[head(status, body.len()).as_bytes(), &body]),
            Some(Fault::Delay(ms)) => {
                std::thread::sleep(Duration::from_millis(ms));
                write_all(&mut client, &[head(status, body.len()).as_bytes(), &body])
            }
            Some(Fault::StallMidBody(ms)) => {
                let first = write_all(
                    &mut client,
                    &[head(status, body.len()).as_bytes(), &body[..half]],
                );
                std::thread::sleep(Duration::from_millis(ms));
                first && write_all(&mut client, &[&body[half..]])
            }
            Some(Fault::CutMidBody) => {
                let _ = write_all(
                    &mut client,
                    &[head(status, body.len()).as_bytes(), &body[..half]],
                );
                false
            }
            Some(Fault::Status(code)) => {
                let page = b"<html>origin error</html>";
                write_all(&mut client, &[head(code, page.len()).as_bytes(), page])
            }
        };
        if !kept {
            let _ = client.shutdown(Shutdown::Both);
            return;
        }
    }
}

/// The sum of the `"rows_written":N` fields of a Hrana answer, read
/// without parsing it (answers are the database's own JSON, no spaces).
fn rows_written(body: &[u8]) -> u64 {
    const FIELD: &[u8] = b"\"rows_written\":";
    let mut sum = 0;
    let mut rest = body;
    while let Some(at) = rest.windows(FIELD.len()).position(|w| w == FIELD) {
        rest = &rest[at + FIELD.len()..];
        let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        sum += std::str::from_utf8(&rest[..digits])
            .ok()
            .and_then(|d| d.parse::<u64>().ok())
            .unwrap_or(0);
    }
    sum
}

fn write_all(stream: &mut TcpStream, parts: &[&[u8]]) -> bool {
    parts.iter().all(|p| stream.write_all(p).is_ok()) && stream.flush().is_ok()
}

/// Sends `request` to the database on a fresh connection; its status and
/// body, or `None` when the database cannot be reached.
fn forward(shared: &Shared, request: &Message) -> Option<(u16, Vec<u8>)> {
    let mut upstream = TcpStream::connect(&shared.upstream).ok()?;
    upstream.set_nodelay(true).ok()?;
    upstream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .ok()?;
    let path = request.head.split_whitespace().nth(1).unwrap_or("/");
    let method = request.head.split_whitespace().next().unwrap_or("POST");
    let mut out = format!(
        "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\
         Content-Length: {}\r\n",
        shared.upstream,
        request.body.len()
    );
    for name in ["Content-Type", "Authorization"] {
        if let Some(value) = request.header(name) {
            out.push_str(&format!("{name}: {value}\r\n"));
        }
    }
    out.push_str("\r\n");
    upstream.write_all(out.as_bytes()).ok()?;
    upstream.write_all(&request.body).ok()?;
    let mut reader = BufReader::new(upstream);
    let answer = read_message(&mut reader, true)?;
    let status = answer.head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, answer.body))
}

#[cfg(test)]
mod tests {
    use super::{read_message, rows_written, FaultProxy};
    use std::io::{BufReader, Write};
    use std::net::{TcpListener, TcpStream};
    use std::time::{Duration, Instant};

    /// An upstream that answers every request at once, one connection each.
    fn instant_upstream() -> String {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("port").port();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().expect("clone"));
                if read_message(&mut reader, false).is_some() {
                    let _ = stream.write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}",
                    );
                }
            }
        });
        format!("http://127.0.0.1:{port}")
    }

    /// The proxy writes an answer's head and body apart: without
    /// `TCP_NODELAY` the body waits for the client's delayed acknowledgement
    /// of the head (about 40 ms on Linux once a connection turns
    /// request-response), which every measurement through it then carries.
    /// Forty round trips on one connection took 1.7 s with the stall (about
    /// 40 ms each) and take a small fraction of the bound without it, so the
    /// bound is far from both.
    #[test]
    fn answers_are_not_held_for_the_peers_acknowledgement() {
        let proxy = FaultProxy::start(&instant_upstream()).expect("proxy");
        let mut client =
            TcpStream::connect(proxy.url.trim_start_matches("http://")).expect("connect");
        client
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let started = Instant::now();
        for _ in 0..40 {
            client
                .write_all(b"POST /v2/pipeline HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
                .expect("request");
            let mut reader = BufReader::new(client.try_clone().expect("clone"));
            let answer = read_message(&mut reader, false).expect("answer");
            assert_eq!(answer.body, b"{}");
            assert!(reader.buffer().is_empty(), "nothing beyond the answer");
        }
        let took = started.elapsed();
        assert!(
            took < Duration::from_millis(600),
            "40 round trips took {took:?}: answers wait for acknowledgements"
        );
    }

    #[test]
    fn rows_written_sums_every_step_of_an_answer() {
        let body = br#"{"results":[{"type":"ok","response":{"type":"execute","result":{"rows_read":3,"rows_written":2}}},{"type":"ok","response":{"type":"execute","result":{"rows_written":17,"rows_read":0}}},{"type":"error"}]}"#;
        assert_eq!(rows_written(body), 19);
        assert_eq!(rows_written(b"upstream unreachable"), 0);
    }
}
