//! `mqlite-libsql`: serves one SQLite file as a libSQL (Hrana over HTTP)
//! database on 127.0.0.1.
//!
//! Usage: `mqlite-libsql --db FILE [--port 8080] [--token SECRET]`
//! Routes: `POST /v2/pipeline`, `POST /v3/pipeline`, `GET /stats`, `GET /health`.

use std::sync::Arc;

use mqlite_libsql::{Database, Reply};

const WORKER_THREADS: usize = 8;

struct Args {
    db: String,
    port: u16,
    token: Option<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        db: String::new(),
        port: 8080,
        token: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--db" => args.db = value()?,
            "--port" => args.port = value()?.parse().map_err(|e| format!("--port: {e}"))?,
            "--token" => args.token = Some(value()?).filter(|t| !t.is_empty()),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if args.db.is_empty() {
        return Err("--db FILE is required".into());
    }
    Ok(args)
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!(
                "mqlite-libsql: {e}\nusage: mqlite-libsql --db FILE [--port N] [--token SECRET]"
            );
            std::process::exit(2);
        }
    };
    let database = match Database::open(&args.db, args.token.clone()) {
        Ok(d) => Arc::new(d),
        Err(e) => {
            eprintln!("mqlite-libsql: {e}");
            std::process::exit(1);
        }
    };
    let server = match listen(args.port) {
        Ok(s) => Arc::new(s),
        Err(e) => {
            eprintln!(
                "mqlite-libsql: cannot listen on 127.0.0.1:{}: {e}",
                args.port
            );
            std::process::exit(1);
        }
    };
    eprintln!(
        "mqlite-libsql: serving {} at http://127.0.0.1:{} (auth {})",
        args.db,
        args.port,
        if args.token.is_some() { "on" } else { "off" }
    );
    // SQLite in WAL mode is durable at every commit: stopping is just exiting.
    if let Err(e) = ctrlc::set_handler(|| {
        eprintln!("mqlite-libsql: stopped");
        std::process::exit(0);
    }) {
        eprintln!("mqlite-libsql: cannot install signal handler: {e}");
    }
    let workers: Vec<_> = (0..WORKER_THREADS)
        .map(|_| {
            let (server, database) = (server.clone(), database.clone());
            std::thread::spawn(move || {
                for request in server.incoming_requests() {
                    serve(&database, request);
                }
            })
        })
        .collect();
    for worker in workers {
        let _ = worker.join();
    }
}

/// A listener whose accepted connections have Nagle's algorithm off (Linux
/// copies TCP_NODELAY from the listening socket): tiny_http writes headers
/// and body separately, and with Nagle on, the body would wait for the
/// client's delayed ACK (~40 ms per round trip).
fn listen(port: u16) -> Result<tiny_http::Server, String> {
    use socket2::{Domain, Socket, Type};
    let address = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None).map_err(|e| e.to_string())?;
    socket.set_reuse_address(true).map_err(|e| e.to_string())?;
    socket.set_nodelay(true).map_err(|e| e.to_string())?;
    socket.bind(&address.into()).map_err(|e| e.to_string())?;
    socket.listen(128).map_err(|e| e.to_string())?;
    let listener: std::net::TcpListener = socket.into();
    tiny_http::Server::from_listener(listener, None).map_err(|e| e.to_string())
}

fn serve(database: &Database, mut request: tiny_http::Request) {
    let path = request.url().split('?').next().unwrap_or("").to_owned();
    let reply = match (request.method(), path.as_str()) {
        (tiny_http::Method::Post, "/v2/pipeline" | "/v3/pipeline") => {
            let mut body = Vec::new();
            if let Err(e) = request.as_reader().read_to_end(&mut body) {
                Reply {
                    status: 400,
                    body: format!("{{\"error\":\"unreadable body: {e}\"}}"),
                }
            } else {
                let auth = request
                    .headers()
                    .iter()
                    .find(|h| h.field.equiv("Authorization"))
                    .map(|h| h.value.as_str().to_owned());
                database.pipeline(auth.as_deref(), &body)
            }
        }
        (tiny_http::Method::Get, "/stats") => database.stats(),
        (tiny_http::Method::Get, "/health" | "/") => Reply {
            status: 200,
            body: "{}".into(),
        },
        _ => Reply {
            status: 404,
            body: "{\"error\":\"not found\"}".into(),
        },
    };
    let mut response = tiny_http::Response::from_string(reply.body).with_status_code(reply.status);
    if let Ok(header) =
        tiny_http::Header::from_bytes(&b"Content-Type"[..], &b"application/json"[..])
    {
        response = response.with_header(header);
    }
    let _ = request.respond(response);
}
