//! Wake hints on Cloudflare (docs/semantics.md#long-polling): the
//! `QueueWaker` Durable Object, one per queue name (`idFromName`), holding
//! only a [`Board`] of parked waiters, and the Worker's client of it.
//! Every call is bounded; any failure makes the caller fall back to plain
//! re-polling, since the database alone decides what is claimable.

use std::cell::{Cell, RefCell};
use std::pin::pin;
use std::rc::Rc;
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
use crate::store::group::{PerDatabase, Verdict, MEMBER_MAX_BYTES};
use crate::store::lone::IDLE_FOR_MS;
use crate::store::said::{refused_before_delivery, Said, ANSWER, LOST, RETRY, UNAVAILABLE};
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
    /// Shared with the `commit` calls in flight: a Workers RPC method's
    /// future outlives the borrow of the object it was called on.
    core: Rc<Core>,
}

struct Core {
    board: RefCell<Board<Waiting>>,
    /// Every configured database with its coalescer: the queue's writes
    /// name theirs.
    databases: std::result::Result<PerDatabase<DatabaseFetch>, String>,
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
        let core = Core {
            board: RefCell::new(Board::default()),
            databases: DatabaseFetch::all_from_env(&|name| super::binding(&env, name)).map(|all| {
                let named = all.into_iter().map(|d| (d.name.clone(), d.copying_body()));
                PerDatabase::new(named, crate::engine::FOLDS)
            }),
            fault,
            last_write_ms: Cell::new(None),
        };
        QueueWaker {
            core: Rc::new(core),
        }
    }

    async fn fetch(&self, req: Request) -> Result<Response> {
        let url = req.inner().url();
        let target = crate::http::path_and_query(&url);
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        if self.core.fault == Fault::Error {
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
                let parked = self.core.board.borrow_mut().park(since, Waiting(sender));
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
                if matches!(self.core.fault, Fault::Drop | Fault::DropNotify) {
                    return Response::ok("0");
                }
                let woken = self.core.board.borrow_mut().notify(at);
                Response::ok(woken.to_string())
            }
            _ => Response::error("not found", 404),
        }
    }
}

#[wasm_bindgen]
impl QueueWaker {
    /// `commit(db, pipeline, wakes)`, a Workers RPC method (the build makes
    /// the class extend `DurableObject`, scripts/build-worker.sh): one write
    /// program of this queue, for database `db`, run in the next batch
    /// (docs/engine.md#group-commit). Answers `[said, body]` ([`Said`]).
    /// An RPC call costs workerd about half of a `fetch` (docs/bench.md).
    #[wasm_bindgen(js_name = commit)]
    pub fn commit_call(
        &self,
        db: String,
        pipeline: js_sys::Uint8Array,
        wakes: bool,
    ) -> js_sys::Promise {
        let core = self.core.clone();
        worker::wasm_bindgen_futures::future_to_promise(async move {
            let (said, body) = core.commit(&db, &pipeline.to_vec(), wakes).await;
            let answer = js_sys::Array::new();
            answer.push(&JsValue::from_str(&said));
            answer.push(&js_sys::Uint8Array::from(body.as_slice()));
            Ok(answer.into())
        })
    }
}

impl Core {
    /// Runs `pipeline` in the next batch for database `named`. A write that
    /// wakes and committed wakes this board's waiters at the batch's clock,
    /// so the Worker sends no hint for it.
    async fn commit(&self, named: &str, pipeline: &[u8], wakes: bool) -> (String, Vec<u8>) {
        let databases = match (&self.databases, self.fault) {
            (_, Fault::Error) => return unavailable("fault injected"),
            (Err(e), _) => return unavailable(e),
            (Ok(databases), _) => databases,
        };
        let arrived_ms = worker::Date::now().as_millis();
        let written_recently = self
            .last_write_ms
            .replace(Some(arrived_ms))
            .is_some_and(|at| arrived_ms.saturating_sub(at) < IDLE_FOR_MS);
        let Ok(body) = std::str::from_utf8(pipeline) else {
            return unavailable("a pipeline that is not UTF-8");
        };
        let Some(submitted) = databases.submit(named, body, wakes).await else {
            return unavailable("unknown database");
        };
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
            && databases.idle()
            && !parked;
        let (verdict, status, body) = match verdict {
            Verdict::Answer(reply) => (ANSWER, reply.status, reply.body),
            Verdict::Retry(m) => (RETRY, 0, m.into_bytes()),
            Verdict::Lost(m) => (LOST, 0, m.into_bytes()),
            Verdict::Invalid(m) => (UNAVAILABLE, 0, m.into_bytes()),
        };
        let said = Said {
            verdict,
            status,
            carried,
            woke,
            idle,
        };
        (said.to_string(), body)
    }
}

/// A `commit` answer for a write the object will not run: the Worker sends
/// it directly.
fn unavailable(detail: &str) -> (String, Vec<u8>) {
    let said = Said {
        verdict: UNAVAILABLE,
        status: 0,
        carried: Carried::Direct,
        woke: false,
        idle: false,
    };
    (said.to_string(), detail.as_bytes().to_vec())
}

/// Whether the `MQLITE_COALESCE` value leaves group commit on (unset: on).
pub fn coalescing_on(switch: Option<String>) -> bool {
    switched_on(switch)
}

/// A Durable Object stub, called with a URL and an init (`worker` binds
/// only `fetch(request)`, and its `Response` reads a body through a stream
/// reader whose release throws, and captures the stack of, a `TypeError`
/// on every call: docs/bench.md, "What perf found") or through a method
/// of the object's (Workers RPC), as every grouped write is.
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

    /// [`QueueWaker::commit_call`], through the stub (Workers RPC).
    #[wasm_bindgen(method, catch, js_name = commit)]
    fn commit_call(
        this: &ObjectStub,
        db: &str,
        pipeline: &js_sys::Uint8Array,
        wakes: bool,
    ) -> std::result::Result<js_sys::Promise, JsValue>;
}

/// The binding's namespace as the platform hands it over.
fn namespace(env: &Env) -> Option<DurableObjectNamespace> {
    let namespace = env.durable_object(BINDING).ok()?;
    Some(JsValue::from(namespace).unchecked_into())
}

/// `queue`'s object, as the stub that calls it.
fn stub(namespace: &DurableObjectNamespace, queue: &str) -> Option<ObjectStub> {
    Some(namespace.get_by_name(queue).ok()?.unchecked_into())
}

/// Starts one `POST` to `url` on `queue`'s object; `None` when no call
/// could be made (no stub): nothing was sent.
fn post_to_object(
    namespace: &DurableObjectNamespace,
    queue: &str,
    url: &str,
) -> Option<std::result::Result<js_sys::Promise, JsValue>> {
    let init = web_sys::RequestInit::new();
    init.set_method("POST");
    Some(stub(namespace, queue)?.fetch_with_init(url, &init))
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
    /// The database these writes go to, by its name (docs/databases.md).
    db: String,
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
            db: database.name.clone(),
            timeout_ms: 2 * database.timeout_ms + PARK_SLACK_MS,
        })
    }

    /// Runs `body` in its queue's next batch.
    pub async fn commit(&self, group: Group<'_>, body: &str) -> Grouped {
        if body.len() > MEMBER_MAX_BYTES {
            return Grouped::Direct;
        }
        let Some(stub) = stub(&self.namespace, group.queue) else {
            return Grouped::Direct;
        };
        let pipeline = js_sys::Uint8Array::from(body.as_bytes());
        let call = stub.commit_call(&self.db, &pipeline, group.wakes);
        let exchange = async {
            let answer = match call {
                Ok(call) => JsFuture::from(call).await,
                Err(e) => Err(e),
            };
            let answer = match answer {
                Ok(answer) => js_sys::Array::from(&answer),
                // The platform refused the call before the object saw it (a
                // plan limit, an overloaded object): nothing ran.
                Err(e) if refused_before_delivery(&describe(&e), overloaded(&e)) => {
                    return Ok(None)
                }
                Err(e) => {
                    return Err(TransportError::AnswerLost(format!(
                        "group commit object: {}",
                        describe(&e)
                    )))
                }
            };
            let said = answer.get(0).as_string();
            let body = answer.get(1).dyn_into::<js_sys::Uint8Array>().ok();
            match (said, body) {
                (Some(said), Some(body)) => Ok(Some((said, body.to_vec()))),
                _ => Err(TransportError::AnswerLost(
                    "group commit object: an answer without its verdict".into(),
                )),
            }
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
        let (said, body) = match answer {
            Err(e) => return Grouped::failed(e),
            Ok(None) => return Grouped::Direct,
            Ok(Some(answer)) => answer,
        };
        let text = |body: &[u8]| String::from_utf8_lossy(body).into_owned();
        let Some(said) = Said::parse(&said) else {
            return Grouped::failed(TransportError::AnswerLost(format!(
                "group commit object: {said}"
            )));
        };
        let outcome = match said.verdict {
            ANSWER => Ok(HttpReply {
                status: said.status,
                body,
            }),
            RETRY => Err(TransportError::NotSent(text(&body))),
            UNAVAILABLE => return Grouped::Direct,
            _ => Err(TransportError::AnswerLost(format!(
                "group commit object: {}",
                text(&body).chars().take(200).collect::<String>()
            ))),
        };
        Grouped::Outcome {
            outcome,
            carried: said.carried,
            woke: said.woke,
            idle: said.idle,
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

/// The `.overloaded` flag the platform sets on an error of an object
/// shedding load (Durable Objects error handling).
fn overloaded(error: &JsValue) -> bool {
    js_sys::Reflect::get(error, &JsValue::from_str("overloaded"))
        .is_ok_and(|flag| flag.as_bool() == Some(true))
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
        let call = post_to_object(&self.namespace, queue, &format!("{ORIGIN}{path}"))?;
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
