//! The Cloudflare Worker entry point: converts `worker` types to the plain
//! [`crate::http`] types and back, and implements the platform seams
//! (database fetch with a timeout, timers). Nothing clever lives here.

use std::pin::pin;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures_util::future::{select, Either};

use worker::wasm_bindgen::{JsCast, JsValue};
use worker::wasm_bindgen_futures::JsFuture;
use worker::{
    event, js_sys, web_sys, Context, Date, Delay, Env, Headers, Request, Response, ScheduleContext,
    ScheduledEvent,
};

use crate::engine::{Clock, Effects, Engine, Parked, Waiter};
use crate::http::{self, body_too_large, Config, Isolate, Service};
use crate::store::lone::LoneWrites;
use crate::store::{pipeline_url, Carried, Group, HttpReply, Transport, TransportError};
use crate::wire::ApiError;

mod waker;

use waker::{Committer, Grouped, Waker};

/// Room a pipeline needs beyond its request's bytes (statement texts,
/// copies): see [`WorkerBody::read`].
const PIPELINE_SLACK: usize = 64 * 1024;

/// Bodies up to this size are read with one `arrayBuffer()` call; larger
/// ones are streamed into one buffer (see [`WorkerBody::read`]).
const ONE_CALL_BODY_BYTES: usize = 64 * 1024;
/// The one JS buffer a large request body is read through.
const READ_CHUNK_BYTES: u32 = 64 * 1024;

/// Default bound on one database request.
const DEFAULT_DB_TIMEOUT_MS: u64 = 10_000;

#[event(start)]
fn start() {
    // A panic must leave a readable trace, not a silently poisoned isolate.
    console_error_panic_hook::set_once();
    crate::engine::set_wall_clock(wall_ms);
}

/// `Date.now()`: it advances only across I/O, so it decides nothing about
/// message state (the database clock does); it stamps isolate facts.
fn wall_ms() -> i64 {
    Date::now().as_millis() as i64
}

/// What this isolate keeps between requests.
fn isolate() -> Arc<Isolate> {
    static ISOLATE: OnceLock<Arc<Isolate>> = OnceLock::new();
    ISOLATE
        .get_or_init(|| Arc::new(Isolate::new(wall_ms())))
        .clone()
}

/// Which queues this isolate may write directly, on their objects' word
/// that nobody else writes them (`store::lone`).
fn lone_writes() -> &'static LoneWrites {
    static LONE: OnceLock<LoneWrites> = OnceLock::new();
    LONE.get_or_init(LoneWrites::default)
}

/// A var or secret binding by name.
fn binding(env: &Env, name: &str) -> Option<String> {
    env.secret(name)
        .map(|s| s.to_string())
        .or_else(|_| env.var(name).map(|v| v.to_string()))
        .ok()
}

/// The configuration and each database's settings (the catalog first),
/// parsed on the isolate's first event only (bindings do not change during
/// an isolate's life). A configuration error is answered 500 on every RPC,
/// and each answer's log line says what is wrong.
fn setup(isolate: &Isolate, env: &Env) -> Result<(Config, Vec<DatabaseFetch>), String> {
    static DATABASES: OnceLock<Result<Vec<DatabaseFetch>, String>> = OnceLock::new();
    let lookup = |name: &str| binding(env, name);
    let config = isolate.config(|name| {
        let value = lookup(name);
        if name == "MQLITE_TOKENS" && value.as_deref().is_none_or(|v| v.trim().is_empty()) {
            worker::console_warn!(
                "MQLITE_TOKENS is not set: authentication is on with no administrator token, \
                 so every RPC is refused (401). Set it with `wrangler secret put MQLITE_TOKENS`."
            );
        }
        value
    });
    let databases = DATABASES
        .get_or_init(|| DatabaseFetch::all_from_env(&lookup))
        .clone();
    Ok((config?, databases?))
}

/// Whether wake hints are on (`MQLITE_WAKE`), read on the isolate's first
/// request like the rest of the configuration.
fn wake_switch(env: &Env) -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| waker::switched_on(binding(env, "MQLITE_WAKE")))
}

/// Whether group commit is on (`MQLITE_COALESCE`), read on the isolate's
/// first request like the rest of the configuration.
fn coalesce_switch(env: &Env) -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| waker::coalescing_on(binding(env, "MQLITE_COALESCE")))
}

/// The cron trigger: one maintenance pass over every queue (idle queues
/// converge, janitors, DLQ retention). Requests never depend on it.
#[event(scheduled)]
async fn scheduled(_event: ScheduledEvent, env: Env, _ctx: ScheduleContext) {
    let isolate = isolate();
    let (config, databases) = match setup(&isolate, &env) {
        Ok(setup) => setup,
        Err(e) => {
            worker::console_error!("maintenance sweep skipped: {e}");
            return;
        }
    };
    let effects = Arc::new(Effects::default());
    // Every database's queues, one database at a time (a cron event's
    // subrequests are bounded like a request's).
    for (index, (transport, spec)) in databases.into_iter().zip(&config.databases).enumerate() {
        let engine = Engine::new(transport, Clock::Database, config.limits.clone())
            .with_effects(effects.clone())
            .with_write_health(isolate.write_health_of(index));
        if let Err(e) = engine.sweep(&config.retention).await {
            worker::console_error!("maintenance sweep of database {} failed: {e:?}", spec.name);
        }
    }
    isolate.registry.record_effects(effects.take());
}

#[event(fetch)]
async fn fetch(mut req: Request, env: Env, ctx: Context) -> worker::Result<Response> {
    let waker = Waker::from_env(&env, wake_switch(&env));
    let waiter = WorkerWaiter::start(waker.clone());
    let isolate = isolate();
    let woken = Woken::default();
    let setup = setup(&isolate, &env).map(|(config, databases)| {
        let transports = databases
            .into_iter()
            .map(|database| {
                let committer = Committer::from_env(&env, coalesce_switch(&env), &database);
                WorkerTransport {
                    database,
                    committer,
                    woken: woken.clone(),
                }
            })
            .collect();
        (config, transports)
    });
    let service = Service::over(setup, Clock::Database, isolate);
    let request = http::Request {
        method: req.method().to_string(),
        // The query string rides along: the pgmq dialect reads `?unlogged`.
        path: http::path_and_query(&req.inner().url()).to_owned(),
        headers: req.headers().entries().collect(),
    };
    let content_length = req
        .headers()
        .get("Content-Length")
        .ok()
        .flatten()
        .and_then(|v| v.parse::<usize>().ok());
    let body = WorkerBody {
        request: &mut req,
        content_length,
    };
    let mut response = service.handle(&request, body, &waiter).await;
    if let Some(path) = response.asset() {
        match asset_bytes(&env, path).await {
            Ok(bytes) => response.body = bytes,
            Err(e) => {
                worker::console_error!("static asset {path}: {e}");
                response = http::Response::asset_unavailable();
            }
        }
    }
    if let Some(line) = response.log_line() {
        worker::console_error!("{} {}: {line}", request.method, request.path);
    }
    if let Some(waker) = waker {
        notify_after(&ctx, waker, response.wake_hints(), &woken);
    }
    to_worker_response(response)
}

/// The binding of the Worker's static assets (`wrangler.toml` `[assets]`).
const ASSETS_BINDING: &str = "ASSETS";
/// The platform serves assets by path; the host is never resolved.
const ASSETS_ORIGIN: &str = "https://assets.invalid";
/// Bound on one asset fetch (the platform serves them from its own cache).
const ASSET_TIMEOUT_MS: u64 = 5_000;

/// The bytes of the static asset at `path` (`http::assets`), from the
/// `ASSETS` binding, bounded.
async fn asset_bytes(env: &Env, path: &str) -> Result<Vec<u8>, String> {
    let assets = env
        .assets(ASSETS_BINDING)
        .map_err(|e| format!("no {ASSETS_BINDING} binding: {e}"))?;
    let url = format!("{ASSETS_ORIGIN}{path}");
    let exchange = async {
        let mut answer = assets.fetch(url, None).await.map_err(|e| e.to_string())?;
        match answer.status_code() {
            200 => answer.bytes().await.map_err(|e| e.to_string()),
            status => Err(format!("answered {status}")),
        }
    };
    let timeout = Delay::from(Duration::from_millis(ASSET_TIMEOUT_MS));
    let answer = match select(pin!(exchange), pin!(timeout)).await {
        Either::Left((answer, _)) => answer,
        Either::Right(_) => Err(format!("no answer within {ASSET_TIMEOUT_MS} ms")),
    };
    answer
}

/// Sends the answer's wake hints once it is on its way, off its path: a
/// hint that fails or is lost costs a waiter at most one park. A queue
/// whose object already woke its waiters for every commit this request
/// made on it gets none.
fn notify_after(ctx: &Context, waker: Waker, hints: &[http::WakeHint], woken: &Woken) {
    let woken = woken.borrow();
    let hints: Vec<http::WakeHint> = hints
        .iter()
        .filter(|h| !woken.covers(&h.queue))
        .cloned()
        .collect();
    if hints.is_empty() {
        return;
    }
    ctx.wait_until(async move {
        for hint in hints {
            if waker.notify(&hint.queue, hint.at_ms).await.is_none() {
                worker::console_warn!("wake hint for queue {:?} failed", hint.queue);
            }
        }
    });
}

fn to_worker_response(response: http::Response) -> worker::Result<Response> {
    let headers = Headers::new();
    for (name, value) in &response.headers {
        headers.append(name, value)?;
    }
    let out = if response.body.is_empty() {
        Response::empty()?
    } else {
        Response::from_bytes(response.body)?
    };
    Ok(out.with_status(response.status).with_headers(headers))
}

/// Reads the request body only after routing and auth passed, refusing an
/// oversized one by its declared length before reading it, and one without
/// a length as soon as it passes the cap.
struct WorkerBody<'a> {
    request: &'a mut Request,
    content_length: Option<usize>,
}

impl http::Body for WorkerBody<'_> {
    async fn read(self, cap: usize) -> Result<Vec<u8>, ApiError> {
        if self.content_length.is_some_and(|n| n > cap) {
            return Err(body_too_large(cap));
        }
        // A small body with a declared length is read in one call: the
        // stream's reader costs a promise per chunk and, when released, a
        // TypeError with a captured stack (3-5 % of a small RPC's CPU in a
        // perf profile of workerd, docs/bench.md), which only large bodies
        // repay.
        if self
            .content_length
            .is_some_and(|n| n <= ONE_CALL_BODY_BYTES)
        {
            return self
                .request
                .bytes()
                .await
                .map_err(|e| ApiError::invalid(format!("unreadable request body: {e}")));
        }
        // Chunk by chunk into one buffer sized by the declared length:
        // `Request::bytes` would first hold the whole body in a JS
        // ArrayBuffer (alive until the next GC) beside its wasm copy.
        // The slack lets a Send's pipeline, which is about as long as its
        // request plus the statements, later reuse this buffer's place once
        // it is freed, instead of growing the isolate's memory (wasm memory
        // never shrinks) by another request's worth.
        let declared = self.content_length.unwrap_or(0);
        let mut bytes = Vec::with_capacity(declared + declared / 64 + PIPELINE_SLACK);
        let Some(stream) = self.request.inner().body() else {
            // No body at all.
            return Ok(bytes);
        };
        let unreadable =
            |e: JsValue| ApiError::invalid(format!("unreadable request body: {}", describe(&e)));
        // A BYOB reader fills one JS buffer over and over: a default
        // reader hands out a fresh ArrayBuffer per chunk, which stays
        // garbage until the next GC, so a 32 MiB request would hold a
        // second 32 MiB in the JS heap beside its wasm copy (measured: a
        // 32 MiB Send grew workerd by 4.1-4.3x the request, 3.8x with this
        // reader, before `fetch` got a view of the pipeline below).
        let reader = web_sys::ReadableStreamByobReader::new(&stream).map_err(unreadable)?;
        let mut view = js_sys::Uint8Array::new_with_length(READ_CHUNK_BYTES);
        loop {
            let result: web_sys::ReadableStreamReadResult =
                JsFuture::from(reader.read_with_array_buffer_view(&view))
                    .await
                    .map_err(unreadable)?
                    .unchecked_into();
            if result.get_done().unwrap_or(true) {
                break;
            }
            let filled: js_sys::Uint8Array = result.get_value().unchecked_into();
            let n = filled.length() as usize;
            if bytes.len() + n > cap {
                return Err(body_too_large(cap));
            }
            let start = bytes.len();
            bytes.resize(start + n, 0);
            filled.copy_to(&mut bytes[start..]);
            // The read transferred the buffer into `filled`: read into it again.
            view = js_sys::Uint8Array::new_with_byte_offset_and_length(
                &filled.buffer(),
                0,
                READ_CHUNK_BYTES,
            );
        }
        Ok(bytes)
    }
}

/// Long-poll timing on the Worker clock (which advances across I/O), and
/// the wake objects when the binding is there.
struct WorkerWaiter {
    started_ms: u64,
    waker: Option<Waker>,
}

impl WorkerWaiter {
    fn start(waker: Option<Waker>) -> Self {
        WorkerWaiter {
            started_ms: Date::now().as_millis(),
            waker,
        }
    }
}

impl Waiter for WorkerWaiter {
    fn elapsed_ms(&self) -> u64 {
        Date::now().as_millis().saturating_sub(self.started_ms)
    }

    async fn sleep(&self, millis: u64) {
        Delay::from(Duration::from_millis(millis)).await;
    }

    fn hints(&self) -> bool {
        self.waker.is_some()
    }

    async fn park(&self, queue: &str, since_ms: i64, millis: u64) -> Parked {
        match &self.waker {
            Some(waker) => {
                // The queue's writes go through its object while a waiter is
                // parked there: the object wakes it on their commit itself.
                lone_writes().waiting(queue);
                waker.park(queue, since_ms, millis).await
            }
            None => Parked::Failed,
        }
    }
}

/// Hrana pipelines over `fetch`, one POST per call, bounded by a timeout.
#[derive(Clone)]
struct DatabaseFetch {
    /// The database's configured name (docs/databases.md).
    name: String,
    pipeline_url: String,
    auth_token: Option<String>,
    timeout_ms: u64,
    /// Hand `fetch` a view of the pipeline in wasm memory instead of a JS
    /// copy (see [`DatabaseFetch::post`]); never in a Durable Object.
    view_body: bool,
}

impl DatabaseFetch {
    /// Every configured database, the catalog first: `MQLITE_DATABASES`,
    /// or `MQLITE_DB` alone. A database's token is its own secret
    /// (`MQLITE_DB_AUTH_TOKEN_<NAME>`) or the shared `MQLITE_DB_AUTH_TOKEN`.
    fn all_from_env(lookup: &impl Fn(&str) -> Option<String>) -> Result<Vec<Self>, String> {
        let shared_token = lookup("MQLITE_DB_AUTH_TOKEN").filter(|t| !t.is_empty());
        let timeout_ms = lookup("MQLITE_DB_TIMEOUT_MS")
            .and_then(|v| v.parse().ok())
            .unwrap_or(DEFAULT_DB_TIMEOUT_MS);
        http::database_specs(lookup)?
            .into_iter()
            .map(|spec| {
                let url = spec
                    .url
                    .clone()
                    .ok_or("MQLITE_DB is not set (the libSQL/Turso database URL)")?;
                Ok(DatabaseFetch {
                    pipeline_url: pipeline_url(&url),
                    auth_token: lookup(&spec.token_var())
                        .filter(|t| !t.is_empty())
                        .or_else(|| shared_token.clone()),
                    timeout_ms,
                    view_body: true,
                    name: spec.name,
                })
            })
            .collect()
    }

    /// The same database for a Durable Object: its outgoing fetch may read
    /// the body after other requests of the object ran (and grew wasm
    /// memory, detaching any view of it: seen as empty pipelines on plain
    /// workerd), so it sends a JS copy.
    fn copying_body(self) -> Self {
        DatabaseFetch {
            view_body: false,
            ..self
        }
    }

    async fn post(&self, body: &str) -> Result<HttpReply, TransportError> {
        let not_sent = |e: JsValue| TransportError::NotSent(describe(&e));
        let headers = web_sys::Headers::new().map_err(not_sent)?;
        headers
            .set("Content-Type", "application/json")
            .map_err(not_sent)?;
        if let Some(token) = &self.auth_token {
            headers
                .set("Authorization", &format!("Bearer {token}"))
                .map_err(not_sent)?;
        }
        let init = web_sys::RequestInit::new();
        init.set_method("POST");
        init.set_headers(&headers);
        // The timeout bounds the whole exchange, the body included: the
        // signal aborts the fetch and the reading of its answer, so a
        // server that sends its headers and then stalls mid-body cannot
        // hold the request (and a subrequest) forever (e2e faults test).
        // `AbortSignal.timeout` is one platform timer, where a `Delay`
        // raced against the exchange costs a closure and two calls more.
        init.set_signal(Some(&web_sys::AbortSignal::timeout_with_f64(
            self.timeout_ms as f64,
        )));
        // `web_sys` directly, not `worker::Fetch`: its `Response::bytes`
        // reads the answer through a stream reader whose release throws
        // (and captures the stack of) a TypeError on every call, a few
        // percent of a request's CPU on workerd (measured with perf);
        // `arrayBuffer()` is one promise.
        let global: web_sys::WorkerGlobalScope = js_sys::global().unchecked_into();
        // Bytes, not a string (a JS string would be decoded from UTF-8 and
        // re-encoded, two more copies of a pipeline up to the request cap),
        // and a view of the pipeline in wasm memory rather than a JS copy
        // of it: `fetch` takes its own copy of a BufferSource body before
        // it returns (blanking the pipeline right after the call leaves the
        // request intact), so a JS copy was a third whole pipeline in
        // memory (a 32 MiB Send grew plain workerd by 3.9x the request
        // with it, 2.9x without; docs/bench.md).
        //
        // SAFETY: a view of wasm memory is valid until the memory grows or
        // its bytes are freed. Nothing runs in wasm between taking it and
        // `fetch` reading it (these are calls into JS, which allocate no
        // wasm memory), and `body` outlives the whole exchange.
        let view = if self.view_body {
            unsafe { js_sys::Uint8Array::view(body.as_bytes()) }
        } else {
            js_sys::Uint8Array::from(body.as_bytes())
        };
        init.set_body(&view);
        let pending = global.fetch_with_str_and_init(&self.pipeline_url, &init);
        let response: web_sys::Response = JsFuture::from(pending)
            .await
            .and_then(|r| r.dyn_into())
            .map_err(|e| self.failure(&e))?;
        let status = response.status();
        let body = body_bytes(&response)
            .await
            .map_err(|e| TransportError::AnswerLost(self.cut_short(&e)))?;
        Ok(HttpReply { status, body })
    }

    /// A failed fetch, classified by its message; a timeout is an answer
    /// lost (the request may have been applied).
    fn failure(&self, error: &JsValue) -> TransportError {
        if is_timeout(error) {
            return TransportError::AnswerLost(self.no_answer());
        }
        TransportError::from_fetch_failure(&describe(error))
    }

    fn cut_short(&self, error: &JsValue) -> String {
        if is_timeout(error) {
            return self.no_answer();
        }
        format!("answer cut short: {}", describe(error))
    }

    fn no_answer(&self) -> String {
        format!("no complete answer within {} ms", self.timeout_ms)
    }
}

/// `AbortSignal.timeout` rejects with a `TimeoutError` DOMException.
fn is_timeout(error: &JsValue) -> bool {
    js_sys::Reflect::get(error, &JsValue::from_str("name"))
        .ok()
        .and_then(|name| name.as_string())
        .is_some_and(|name| name == "TimeoutError")
}

/// A response's body with one `arrayBuffer()` (not `worker`'s stream
/// reader: see `DatabaseFetch::post`).
async fn body_bytes(response: &web_sys::Response) -> Result<Vec<u8>, JsValue> {
    let buffer = JsFuture::from(response.array_buffer()?).await?;
    Ok(js_sys::Uint8Array::new(&buffer).to_vec())
}

/// A JS error as `String(error)` ("TypeError: …", what `fetch` rejects
/// with), or its debug form.
pub(crate) fn describe(error: &JsValue) -> String {
    error
        .dyn_ref::<js_sys::Error>()
        .map(|e| String::from(e.to_string()))
        .or_else(|| error.as_string())
        .unwrap_or_else(|| format!("{error:?}"))
}

/// The Worker's transport: pipelines to the database, and grouped writes
/// through their queue's object when group commit is on.
struct WorkerTransport {
    database: DatabaseFetch,
    committer: Option<Committer>,
    /// The queues whose object woke their waiters on this request's commits.
    woken: Woken,
}

/// One request's queues whose waiters were woken by their object.
type Woken = std::rc::Rc<std::cell::RefCell<crate::wake::RequestWakes>>;

impl Transport for WorkerTransport {
    async fn send_pipeline(&self, body: &str) -> Result<HttpReply, TransportError> {
        self.database.post(body).await
    }

    async fn send_grouped(
        &self,
        group: Group<'_>,
        body: &str,
    ) -> (Result<HttpReply, TransportError>, Carried) {
        if let Some(committer) = &self.committer {
            let write = lone_writes().start(group.queue, Date::now().as_millis());
            if write.lone {
                self.woken.borrow_mut().bypassed(group.queue);
                return (self.database.post(body).await, Carried::Lone);
            }
            let grouped = committer.commit(group, body).await;
            if let Grouped::Outcome {
                outcome,
                carried,
                woke,
                idle,
            } = grouped
            {
                lone_writes().answered(group.queue, idle, Date::now().as_millis());
                if woke {
                    self.woken.borrow_mut().woke(group.queue);
                }
                return (outcome, carried);
            }
        }
        self.woken.borrow_mut().bypassed(group.queue);
        (self.database.post(body).await, Carried::Direct)
    }

    async fn pause(&self, millis: u32) {
        self.database.pause(millis).await
    }
}

impl Transport for DatabaseFetch {
    async fn send_pipeline(&self, body: &str) -> Result<HttpReply, TransportError> {
        self.post(body).await
    }

    async fn pause(&self, millis: u32) {
        Delay::from(Duration::from_millis(millis.into())).await;
    }
}
