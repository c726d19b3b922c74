//! Wake hints on Cloudflare (docs/semantics.md#long-polling): the
//! `QueueWaker` Durable Object, one per queue name (`idFromName`), holding
//! only a [`Board`] of parked waiters, and the Worker's client of it.
//! Every call is bounded; any failure makes the caller fall back to plain
//! re-polling, since the database alone decides what is claimable.

use std::cell::{Cell, RefCell};
use std::pin::pin;
use std::time::Duration;

use futures_channel::oneshot;
use futures_util::future::{select, Either};
use wasm_bindgen::prelude::wasm_bindgen;
use worker::wasm_bindgen::{JsCast, JsValue};
use worker::wasm_bindgen_futures::JsFuture;
use worker::worker_sys::DurableObjectNamespace;
use worker::{durable_object, DurableObject, Env, Request, Response, Result, State};
use worker::{js_sys, web_sys};

use super::{body_bytes, describe, DatabaseFetch};
use crate::engine::{Parked, PARK_MAX_MS};
use crate::store::group::{Coalescer, Verdict, MEMBER_MAX_BYTES};
use crate::store::lone::IDLE_FOR_MS;
use crate::store::{Carried, Group, HttpReply, TransportError};
use crate::wake::{Board, Slot};

/// The binding `wrangler.toml` declares.
pub const BINDING: &str = "MQLITE_WAKER";
/// Slack beyond a park's own time before the Worker gives up on the object.
const PARK_SLACK_MS: u64 = 1_500;
/// Bound on one notification (sent after the answer, off its path).
const NOTIFY_TIMEOUT_MS: u64 = 2_000;
/// Objects are addressed by name; the host is never resolved.
const ORIGIN: &str = "https://queue-waker";

/// A parked waiter's end of the channel.
struct Waiting(oneshot::Sender<()>);

impl Slot for Waiting {
    fn abandoned(&self) -> bool {
        self.0.is_canceled()
    }
    fn wake(self) {
        let _ = self.0.send(());
    }
}

/// What the test-only `MQLITE_WAKE_FAULT` var makes the object do, so the
/// end-to-end suite can prove the fallbacks: `error` answers every call
/// 500, `drop` accepts notifications and wakes nobody (a lost hint), nor
/// wakes anyone on its own commits; `drop-notify` loses only the Worker's
/// notifications, so only the object's own wakes are left.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fault {
    None,
    Error,
    Drop,
    DropNotify,
}

/// One queue's object: parked waiters and the latest notification's
/// database time, and the queue's group commit (`/commit`,
/// docs/engine.md#group-commit): the writes of the queue in flight at the
/// same time go to the database as one transaction. It keeps no storage,
/// so an evicted object is simply a fresh board and an idle coalescer
/// (waiters re-check the database at least every `PARK_MAX_MS`).
#[durable_object(fetch)]
pub struct QueueWaker {
    board: RefCell<Board<Waiting>>,
    coalescer: Coalescer,
    /// Every configured database: the queue's writes name theirs.
    databases: std::result::Result<Vec<DatabaseFetch>, String>,
    fault: Fault,
    /// When the last write reached the object (its clock): writes coming
    /// closer together than `IDLE_FOR_MS` mean others write the queue, from
    /// this isolate or another, even when none meet in a batch.
    last_write_ms: Cell<Option<u64>>,
}

impl DurableObject for QueueWaker {
    fn new(_state: State, env: Env) -> Self {
        let fault = match env.var("MQLITE_WAKE_FAULT").map(|v| v.to_string()) {
            Ok(v) if v == "error" => Fault::Error,
            Ok(v) if v == "drop" => Fault::Drop,
            Ok(v) if v == "drop-notify" => Fault::DropNotify,
            _ => Fault::None,
        };
        QueueWaker {
            board: RefCell::new(Board::default()),
            coalescer: Coalescer::default().folding(crate::engine::FOLDS),
            databases: DatabaseFetch::all_from_env(&|name| super::binding(&env, name))
                .map(|all| all.into_iter().map(DatabaseFetch::copying_body).collect()),
            fault,
            last_write_ms: Cell::new(None),
        }
    }

    async fn fetch(&self, mut req: Request) -> Result<Response> {
        let url = req.inner().url();
        let target = crate::http::path_and_query(&url);
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        if path == "/commit" {
            return self.commit(&mut req, query).await;
        }
        if self.fault == Fault::Error {
            return Response::error("wake fault injected", 500);
        }
        // Only this module writes these queries: plain `name=integer` pairs.
        let arg = |name: &str| {
            query
                .split('&')
                .filter_map(|pair| pair.split_once('='))
                .find(|(k, _)| *k == name)
                .and_then(|(_, v)| v.parse::<i64>().ok())
        };
        match path {
            "/wait" => {
                let (Some(since), Some(ms)) = (arg("since"), arg("ms")) else {
                    return Response::error("since and ms are required", 400);
                };
                let (sender, woken) = oneshot::channel();
                // The borrow ends before any await: calls interleave.
                let parked = self.board.borrow_mut().park(since, Waiting(sender));
                if parked.is_err() {
                    return Response::ok("woken");
                }
                let ms = ms.clamp(0, PARK_MAX_MS as i64) as u64;
                let timeout = worker::Delay::from(Duration::from_millis(ms));
                match select(woken, pin!(timeout)).await {
                    Either::Left((Ok(()), _)) => Response::ok("woken"),
                    _ => Response::ok("timeout"),
                }
            }
            "/notify" => {
                let Some(at) = arg("at") else {
                    return Response::error("at is required", 400);
                };
                if matches!(self.fault, Fault::Drop | Fault::DropNotify) {
                    return Response::ok("0");
                }
                let woken = self.board.borrow_mut().notify(at);
                Response::ok(woken.to_string())
            }
            _ => Response::error("not found", 404),
        }
    }
}

impl QueueWaker {
    /// One write program of this queue, run in the next batch. A write
    /// that wakes (`x-mqlite-wakes: 1`) and committed wakes this board's
    /// waiters at the batch's clock, so the Worker sends no hint for it
    /// (the answer says `x-mqlite-group-woke: 1`).
    async fn commit(&self, req: &mut Request, query: &str) -> Result<Response> {
        let databases = match (&self.databases, self.fault) {
            (_, Fault::Error) => {
                return verdict_response(GROUP_UNAVAILABLE, "fault injected", None)
            }
            (Err(e), _) => return verdict_response(GROUP_UNAVAILABLE, e, None),
            (Ok(databases), _) => databases,
        };
        // `db=<name>`: the database the queue lives in, which never changes
        // (docs/databases.md), so every write of this object names the same.
        let named = query.strip_prefix("db=").unwrap_or_default();
        let Some(database) = databases.iter().find(|d| d.name == named) else {
            return verdict_response(GROUP_UNAVAILABLE, "unknown database", None);
        };
        let arrived_ms = worker::Date::now().as_millis();
        let written_recently = self
            .last_write_ms
            .replace(Some(arrived_ms))
            .is_some_and(|at| arrived_ms.saturating_sub(at) < IDLE_FOR_MS);
        let wakes = req.headers().get(WAKES)?.is_some_and(|v| v == "1");
        // One `arrayBuffer()`: `text()` would decode the pipeline into a JS
        // string only for it to be encoded back into wasm memory.
        let body = req.bytes().await?;
        let Ok(body) = std::str::from_utf8(&body) else {
            return verdict_response(GROUP_UNAVAILABLE, "a pipeline that is not UTF-8", None);
        };
        let submitted = self.coalescer.submit(database, body, wakes).await;
        // Before this write's own commit wakes them.
        let parked = self.board.borrow().has_waiters();
        let woke = match submitted.woke_at {
            Some(at) if self.fault != Fault::Drop => {
                self.board.borrow_mut().notify(at);
                true
            }
            _ => false,
        };
        let (verdict, carried) = (submitted.verdict, submitted.carried);
        // The write went alone, no other came within `IDLE_FOR_MS` before
        // it, nothing is behind it and nobody was waiting: the Worker may
        // send the queue's next writes directly for a while (`store::lone`).
        let idle = matches!(carried, Carried::Batch { members: 1, .. })
            && !written_recently
            && self.coalescer.idle()
            && !parked;
        let mut response = match verdict {
            Verdict::Answer(reply) => verdict_response(GROUP_ANSWER, "", Some(reply)),
            Verdict::Retry(m) => verdict_response(GROUP_RETRY, &m, None),
            Verdict::Lost(m) => verdict_response(GROUP_LOST, &m, None),
            Verdict::Invalid(m) => verdict_response(GROUP_UNAVAILABLE, &m, None),
        }?;
        if let Carried::Batch {
            members,
            first,
            folded,
        } = carried
        {
            let headers = response.headers_mut();
            headers.set(GROUP_MEMBERS, &members.to_string())?;
            headers.set(GROUP_FIRST, if first { "1" } else { "0" })?;
            headers.set(GROUP_FOLDED, if folded { "1" } else { "0" })?;
        }
        if woke {
            response.headers_mut().set(GROUP_WOKE, "1")?;
        }
        if idle {
            response.headers_mut().set(GROUP_IDLE, "1")?;
        }
        Ok(response)
    }
}

/// The header a `/commit` answer carries its verdict in; an answer
/// without it (the runtime failing the object) proves nothing.
const GROUP_VERDICT: &str = "x-mqlite-group";
/// The database's own status, beside an `answer` verdict.
const GROUP_DB_STATUS: &str = "x-mqlite-db-status";
/// How many writes the batch carried (Observe, `/metrics`).
const GROUP_MEMBERS: &str = "x-mqlite-group-members";
/// `1` on the answer to the batch's first member, which counts the batch.
const GROUP_FIRST: &str = "x-mqlite-group-first";
/// `1` when the write was folded with others of its kind.
const GROUP_FOLDED: &str = "x-mqlite-group-folded";
/// `1` when the object woke the queue's waiters on this write's commit.
const GROUP_WOKE: &str = "x-mqlite-group-woke";
/// `1` when the write went alone, no other reached the object within
/// `IDLE_FOR_MS` before it, nothing waits behind it and no waiter was
/// parked: the queue is idle (`store::lone`).
const GROUP_IDLE: &str = "x-mqlite-group-idle";
/// On a `/commit` call: `1` when the write's commit can make messages
/// claimable (`store::Group::wakes`).
const WAKES: &str = "x-mqlite-wakes";
const GROUP_ANSWER: &str = "answer";
const GROUP_RETRY: &str = "retry";
const GROUP_LOST: &str = "lost";
/// The object will not run it (no database configured, a fault): the
/// Worker sends it directly.
const GROUP_UNAVAILABLE: &str = "unavailable";

fn verdict_response(verdict: &str, detail: &str, reply: Option<HttpReply>) -> Result<Response> {
    let (status, body) = match reply {
        Some(reply) => (reply.status, reply.body),
        None => (0, detail.as_bytes().to_vec()),
    };
    let mut response = Response::from_bytes(body)?;
    let headers = response.headers_mut();
    headers.set(GROUP_VERDICT, verdict)?;
    headers.set(GROUP_DB_STATUS, &status.to_string())?;
    Ok(response)
}

/// Whether the `MQLITE_COALESCE` value leaves group commit on (unset: on).
pub fn coalescing_on(switch: Option<String>) -> bool {
    switched_on(switch)
}

/// A Durable Object stub called with a URL and an init: `worker` binds
/// only `fetch(request)`, and its `Response` reads a body through a stream
/// reader whose release throws (and captures the stack of) a `TypeError`
/// on every call (docs/bench.md, "What perf found"); these calls are on
/// every grouped write's path.
#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(extends = js_sys::Object)]
    type ObjectStub;

    #[wasm_bindgen(method, catch, js_name = fetch)]
    fn fetch_with_init(
        this: &ObjectStub,
        url: &str,
        init: &web_sys::RequestInit,
    ) -> std::result::Result<js_sys::Promise, JsValue>;
}

/// The binding's namespace as the platform hands it over.
fn namespace(env: &Env) -> Option<DurableObjectNamespace> {
    let namespace = env.durable_object(BINDING).ok()?;
    Some(JsValue::from(namespace).unchecked_into())
}

/// Starts one `POST` of `body` to `url` on `queue`'s object (`wakes`:
/// with the header saying its commit can make messages claimable); `None`
/// when no call could be made (no stub, no headers): nothing was sent.
fn post_to_object(
    namespace: &DurableObjectNamespace,
    queue: &str,
    url: &str,
    body: &[u8],
    wakes: bool,
) -> Option<std::result::Result<js_sys::Promise, JsValue>> {
    let stub: ObjectStub = namespace.get_by_name(queue).ok()?.unchecked_into();
    let init = web_sys::RequestInit::new();
    init.set_method("POST");
    if !body.is_empty() {
        init.set_body(&js_sys::Uint8Array::from(body));
    }
    if wakes {
        let headers = web_sys::Headers::new().ok()?;
        headers.set(WAKES, "1").ok()?;
        init.set_headers(&headers);
    }
    Some(stub.fetch_with_init(url, &init))
}

/// The object's answer to a call [`post_to_object`] started. Unbounded:
/// the callers race it against their own bound.
async fn object_answer(
    call: std::result::Result<js_sys::Promise, JsValue>,
) -> std::result::Result<web_sys::Response, JsValue> {
    JsFuture::from(call?).await?.dyn_into()
}

/// The Worker's side of the group commit: a write program goes to its
/// queue's object, which answers what the database answered it.
#[derive(Clone)]
pub struct Committer {
    namespace: DurableObjectNamespace,
    /// The object's path for this database's writes (`/commit?db=<name>`).
    path: String,
    /// Bound on one call: the batch before it and its own.
    timeout_ms: u64,
}

/// What the Worker does with a grouped write.
pub enum Grouped {
    /// The object ran it (or may have).
    Outcome {
        outcome: std::result::Result<HttpReply, TransportError>,
        carried: Carried,
        /// The object woke the queue's waiters on its commit.
        woke: bool,
        /// The object said the queue was idle (`store::lone`).
        idle: bool,
    },
    /// The object did not take it: send it to the database directly.
    Direct,
}

impl Committer {
    /// The binding, unless absent or `on` is false (`MQLITE_COALESCE=off`).
    pub fn from_env(env: &Env, on: bool, database: &DatabaseFetch) -> Option<Self> {
        if !on {
            return None;
        }
        namespace(env).map(|namespace| Committer {
            namespace,
            path: format!("{ORIGIN}/commit?db={}", database.name),
            timeout_ms: 2 * database.timeout_ms + PARK_SLACK_MS,
        })
    }

    /// Runs `body` in its queue's next batch.
    pub async fn commit(&self, group: Group<'_>, body: &str) -> Grouped {
        if body.len() > MEMBER_MAX_BYTES {
            return Grouped::Direct;
        }
        let Some(call) = post_to_object(
            &self.namespace,
            group.queue,
            &self.path,
            body.as_bytes(),
            group.wakes,
        ) else {
            return Grouped::Direct;
        };
        let exchange = async {
            let response = match object_answer(call).await {
                Ok(response) => response,
                // The platform refused the call before the object saw it (a
                // plan limit, an overloaded object): nothing ran.
                Err(e) if refused_before_delivery(&describe(&e)) => return Ok(None),
                Err(e) => {
                    return Err(TransportError::AnswerLost(format!(
                        "group commit object: {}",
                        describe(&e)
                    )))
                }
            };
            let headers = response.headers();
            let header = |name: &str| headers.get(name).ok().flatten();
            let verdict = header(GROUP_VERDICT);
            let db_status = header(GROUP_DB_STATUS).and_then(|s| s.parse::<u16>().ok());
            let carried = match header(GROUP_MEMBERS).and_then(|s| s.parse::<u32>().ok()) {
                Some(members) => Carried::Batch {
                    members,
                    first: header(GROUP_FIRST).is_some_and(|f| f == "1"),
                    folded: header(GROUP_FOLDED).is_some_and(|f| f == "1"),
                },
                None => Carried::Direct,
            };
            let woke = header(GROUP_WOKE).is_some_and(|w| w == "1");
            let idle = header(GROUP_IDLE).is_some_and(|w| w == "1");
            let body = body_bytes(&response).await.map_err(|e| {
                TransportError::AnswerLost(format!("group commit answer: {}", describe(&e)))
            })?;
            Ok(Some((verdict, db_status, body, carried, woke, idle)))
        };
        let timeout = worker::Delay::from(Duration::from_millis(self.timeout_ms));
        let answer = match select(pin!(exchange), pin!(timeout)).await {
            Either::Left((answer, _)) => answer,
            Either::Right(_) => {
                return Grouped::failed(TransportError::AnswerLost(format!(
                    "no group commit answer within {} ms",
                    self.timeout_ms
                )))
            }
        };
        let text = |body: &[u8]| String::from_utf8_lossy(body).into_owned();
        let (verdict, db_status, body, carried, woke, idle) = match answer {
            Err(e) => return Grouped::failed(e),
            Ok(None) => return Grouped::Direct,
            Ok(Some(answer)) => answer,
        };
        let outcome = match (verdict.as_deref(), db_status) {
            (Some(GROUP_ANSWER), Some(status)) => Ok(HttpReply { status, body }),
            (Some(GROUP_RETRY), _) => Err(TransportError::NotSent(text(&body))),
            (Some(GROUP_UNAVAILABLE), _) => return Grouped::Direct,
            _ => Err(TransportError::AnswerLost(format!(
                "group commit object: {}",
                text(&body).chars().take(200).collect::<String>()
            ))),
        };
        Grouped::Outcome {
            outcome,
            carried,
            woke,
            idle,
        }
    }
}

impl Grouped {
    /// The call to the object failed after it may have run the write.
    fn failed(error: TransportError) -> Self {
        Grouped::Outcome {
            outcome: Err(error),
            carried: Carried::Direct,
            woke: false,
            idle: false,
        }
    }
}

/// A stub call the platform refused without delivering it: a plan's
/// request limit ("exceeded"), or an object shedding load ("overloaded").
fn refused_before_delivery(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    ["exceeded", "overloaded", "too many requests"]
        .iter()
        .any(|p| lower.contains(p))
}

/// Whether the `MQLITE_WAKE` value leaves wake hints on (unset: on).
pub fn switched_on(switch: Option<String>) -> bool {
    !switch.is_some_and(|v| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "off" | "false" | "0" | "no"
        )
    })
}

/// The Worker's client of the wake objects.
#[derive(Clone)]
pub struct Waker {
    namespace: DurableObjectNamespace,
}

impl Waker {
    /// The binding, unless absent or `on` is false (`MQLITE_WAKE=off`).
    pub fn from_env(env: &Env, on: bool) -> Option<Self> {
        if !on {
            return None;
        }
        namespace(env).map(|namespace| Waker { namespace })
    }

    /// Parks on `queue`'s object, bounded by `millis` plus a slack.
    pub async fn park(&self, queue: &str, since_ms: i64, millis: u64) -> Parked {
        let path = format!("/wait?since={since_ms}&ms={millis}");
        match self.call(queue, &path, millis + PARK_SLACK_MS).await {
            Some(answer) if answer == "woken" => Parked::Woken,
            Some(answer) if answer == "timeout" => Parked::TimedOut,
            _ => Parked::Failed,
        }
    }

    /// Notifies `queue`'s object of a change committed at `at_ms`; answers
    /// how many waiters were parked (`None`: the object failed).
    pub async fn notify(&self, queue: &str, at_ms: i64) -> Option<u64> {
        let answer = self
            .call(queue, &format!("/notify?at={at_ms}"), NOTIFY_TIMEOUT_MS)
            .await?;
        answer.parse().ok()
    }

    /// One bounded call to `queue`'s object: its answer text on a 200.
    async fn call(&self, queue: &str, path: &str, timeout_ms: u64) -> Option<String> {
        let call = post_to_object(
            &self.namespace,
            queue,
            &format!("{ORIGIN}{path}"),
            &[],
            false,
        )?;
        let exchange = async {
            let response = object_answer(call).await.ok()?;
            if response.status() != 200 {
                return None;
            }
            String::from_utf8(body_bytes(&response).await.ok()?).ok()
        };
        let timeout = worker::Delay::from(Duration::from_millis(timeout_ms));
        let answer = match select(pin!(exchange), pin!(timeout)).await {
            Either::Left((answer, _)) => answer,
            Either::Right(_) => None,
        };
        answer
    }
}
