//! One endpoint over several databases (docs/databases.md): names are
//! placed by rendezvous hashing and recorded in the catalog; an RPC on a
//! known name makes one request, on its own database; views cover every
//! database; a database that is down fails only its own names.

mod support;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

use mqlite_edge::engine::{Clock, Engine, Limits, Waiter};
use mqlite_edge::http::{rendezvous, Config, Isolate, Request, Response, Service};
use mqlite_edge::store::{HttpReply, Transport, TransportError};
use serde_json::{json, Value};
use support::*;

/// One database: the in-process server, a request count, a switch that
/// makes it unreachable (nothing sent), and a countdown after which every
/// request fails (negative: never): applied with its answer lost, or, with
/// `refuse`, refused unsent.
#[derive(Clone)]
struct Db {
    inner: InProcess,
    requests: Arc<AtomicU64>,
    /// The request (counted from 0) held until `release` is notified.
    hold: Arc<AtomicI64>,
    release: Arc<tokio::sync::Notify>,
    down: Arc<AtomicBool>,
    answers_left: Arc<AtomicI64>,
    refuse: Arc<AtomicBool>,
}

impl Db {
    fn over(temp: &TempDb) -> Self {
        Db {
            inner: InProcess {
                db: temp.db.clone(),
            },
            requests: Arc::default(),
            hold: Arc::new(AtomicI64::new(-1)),
            release: Arc::default(),
            down: Arc::default(),
            answers_left: Arc::new(AtomicI64::new(-1)),
            refuse: Arc::default(),
        }
    }

    /// Answers `n` more requests, then loses the answer of every later one
    /// (`n` negative: answers all again).
    fn lose_answers_after(&self, n: i64) {
        self.refuse.store(false, Ordering::SeqCst);
        self.answers_left.store(n, Ordering::SeqCst);
    }

    /// Answers `n` more requests, then refuses every later one unsent.
    fn refuse_after(&self, n: i64) {
        self.refuse.store(true, Ordering::SeqCst);
        self.answers_left.store(n, Ordering::SeqCst);
    }
}

impl Transport for Db {
    async fn send_pipeline(&self, body: &str) -> Result<HttpReply, TransportError> {
        let left = self.answers_left.load(Ordering::SeqCst);
        let refused = left == 0 && self.refuse.load(Ordering::SeqCst);
        if self.down.load(Ordering::SeqCst) || refused {
            return Err(TransportError::NotSent("connection refused".into()));
        }
        let n = self.requests.fetch_add(1, Ordering::SeqCst);
        if i64::try_from(n) == Ok(self.hold.load(Ordering::SeqCst)) {
            self.release.notified().await;
        }
        let reply = self.inner.send_pipeline(body).await;
        if left == 0 {
            return Err(TransportError::AnswerLost("connection reset".into()));
        }
        if left > 0 {
            self.answers_left.store(left - 1, Ordering::SeqCst);
        }
        reply
    }

    async fn pause(&self, _millis: u32) {}
}

/// The databases of a deployment, and isolates over them.
struct Deployment {
    names: Vec<String>,
    dbs: Vec<Db>,
    _temps: Vec<TempDb>,
    clock: Clock,
}

impl Deployment {
    fn new(n: usize) -> Self {
        let temps: Vec<TempDb> = (0..n).map(|_| TempDb::new()).collect();
        let dbs = temps.iter().map(Db::over).collect();
        Deployment {
            names: (0..n).map(|i| format!("db{i}")).collect(),
            dbs,
            _temps: temps,
            clock: Clock::manual(T0),
        }
    }

    /// The same databases plus one more, listed last.
    fn with_one_more(mut self) -> Self {
        let temp = TempDb::new();
        self.dbs.push(Db::over(&temp));
        self.names.push(format!("db{}", self.names.len()));
        self._temps.push(temp);
        self
    }

    /// A fresh isolate over every database.
    fn isolate(&self) -> Broker {
        self.isolate_over(self.names.len())
    }

    /// A fresh isolate over the first `count` databases only.
    fn isolate_over(&self, count: usize) -> Broker {
        let list: Vec<String> = self
            .names
            .iter()
            .take(count)
            .map(|n| format!("{n}=libsql://{n}.invalid"))
            .collect();
        let list = list.join(",");
        let config = Config::from_vars(|name| match name {
            "MQLITE_TOKENS" => Some(ADMIN.into()),
            "MQLITE_DATABASES" => Some(list.clone()),
            "MQLITE_METRICS" => Some("on".into()),
            _ => None,
        });
        let setup = config.map(|c| (c, self.dbs[..count].to_vec()));
        Broker {
            service: Service::over(setup, self.clock.clone(), Arc::new(Isolate::new(T0))),
        }
    }

    /// Requests each database has served so far.
    fn requests(&self) -> Vec<u64> {
        self.dbs
            .iter()
            .map(|d| d.requests.load(Ordering::SeqCst))
            .collect()
    }

    /// Requests each database has served since `before` was taken.
    fn requests_since(&self, before: &[u64]) -> Vec<u64> {
        self.requests()
            .iter()
            .zip(before)
            .map(|(now, then)| now - then)
            .collect()
    }

    /// An engine straight on database `index`, for inspection.
    fn engine(&self, index: usize) -> Engine<InProcess> {
        Engine::new(
            self.dbs[index].inner.clone(),
            self.clock.clone(),
            Limits::default(),
        )
    }

    /// The queues database `index` itself holds.
    async fn queues_in(&self, index: usize) -> BTreeSet<String> {
        let queues = self.engine(index).list_queues().await.expect("list");
        queues.into_iter().map(|q| q.name).collect()
    }

    /// Rows of the relay's tables in every database: messages in transit
    /// and arrivals whose trip has not been marked done.
    async fn relay_rows(&self) -> (i64, i64) {
        let mut rows = (0, 0);
        for index in 0..self.dbs.len() {
            let engine = self.engine(index);
            let count = |sql: &'static str| {
                let engine = &engine;
                async move { query(engine, sql).await[0][0].as_i64().expect("a count") }
            };
            rows.0 += count("SELECT count(*) FROM redrive_outbox").await;
            rows.1 += count("SELECT count(*) FROM redrive_arrivals WHERE done_at = 0").await;
        }
        rows
    }

    /// Runs `statements` on database `index` as they are, in one
    /// transaction, bypassing the schema check (a test that rewinds a
    /// database to an older schema).
    async fn raw(&self, index: usize, statements: &[String]) {
        let mut requests = vec![json!({"type": "execute", "stmt": {"sql": "BEGIN"}})];
        for sql in statements {
            requests.push(json!({"type": "execute", "stmt": {"sql": sql}}));
        }
        requests.push(json!({"type": "execute", "stmt": {"sql": "COMMIT"}}));
        requests.push(json!({"type": "close"}));
        let body = json!({"baton": null, "requests": requests}).to_string();
        let reply = self.dbs[index]
            .inner
            .send_pipeline(&body)
            .await
            .expect("sent");
        let text = String::from_utf8_lossy(&reply.body).into_owned();
        assert!(!text.contains("\"error\""), "{statements:?}: {text}");
    }

    /// Arrivals every database keeps, done or not.
    async fn arrivals(&self) -> i64 {
        let mut total = 0;
        for index in 0..self.dbs.len() {
            let rows = query(&self.engine(index), "SELECT count(*) FROM redrive_arrivals").await;
            total += rows[0][0].as_i64().expect("a count");
        }
        total
    }

    /// Runs `first` until database `index` holds its next request, then
    /// `meanwhile` to its end, then lets the held request go on; both
    /// answers.
    async fn interleaved<A: std::future::Future, B: std::future::Future>(
        &self,
        index: usize,
        first: A,
        meanwhile: B,
    ) -> (A::Output, B::Output) {
        let db = &self.dbs[index];
        let next = db.requests.load(Ordering::SeqCst);
        db.hold.store(next as i64, Ordering::SeqCst);
        let second = async {
            while db.requests.load(Ordering::SeqCst) <= next {
                tokio::task::yield_now().await;
            }
            let answer = meanwhile.await;
            db.hold.store(-1, Ordering::SeqCst);
            db.release.notify_one();
            answer
        };
        tokio::join!(first, second)
    }

    /// A fresh isolate with `src` holding `n` dead letters (`m0`, …) and
    /// an empty `dst` in another database.
    async fn dead_letters_apart(&self, n: usize) -> (Broker, String, String) {
        let broker = self.isolate();
        let (src, dst) = self.apart();
        broker.create(&src).await;
        broker.create(&dst).await;
        broker.dead_letters(&src, "m", n).await;
        (broker, src, dst)
    }

    /// A fresh isolate and the `n` queues it created (`q0`, …).
    async fn with_queues(&self, n: usize) -> (Broker, Vec<String>) {
        let broker = self.isolate();
        let queues = names(n);
        for name in &queues {
            broker.create(name).await;
        }
        (broker, queues)
    }

    /// Two names rendezvous hashing puts in different databases.
    fn apart(&self) -> (String, String) {
        let all = names(30);
        let first = all[0].clone();
        let other = all
            .iter()
            .find(|n| self.chosen(n) != self.chosen(&first))
            .expect("another database")
            .clone();
        (first, other)
    }

    /// A name (`q0` … `q29`) rendezvous hashing puts in database `index`.
    fn name_in(&self, index: usize) -> String {
        names(30)
            .into_iter()
            .find(|n| self.chosen(n) == index)
            .expect("a name for that database")
    }

    /// The index of the database rendezvous hashing picks for `name`.
    fn chosen(&self, name: &str) -> usize {
        let picked = rendezvous(&self.names, name);
        self.names.iter().position(|n| n == picked).expect("a name")
    }
}

struct Broker {
    service: Service<Db>,
}

impl Broker {
    async fn request(&self, method: &str, path: &str, body: &[u8]) -> (u16, Value) {
        self.request_as(ADMIN, method, path, body).await
    }

    async fn request_as(&self, token: &str, method: &str, path: &str, body: &[u8]) -> (u16, Value) {
        self.request_waiting(token, method, path, body, &NoWait)
            .await
    }

    async fn request_waiting(
        &self,
        token: &str,
        method: &str,
        path: &str,
        body: &[u8],
        waiter: &impl Waiter,
    ) -> (u16, Value) {
        let request = Request {
            method: method.into(),
            path: path.into(),
            headers: vec![("Authorization".into(), format!("Bearer {token}"))],
        };
        let response = self.service.handle(&request, body.to_vec(), waiter).await;
        (response.status, json_body(&response))
    }

    /// A GET's body as text.
    async fn text(&self, path: &str) -> String {
        let request = Request {
            method: "GET".into(),
            path: path.into(),
            headers: vec![("Authorization".into(), ADMIN_AUTH.into())],
        };
        let response = self.service.handle(&request, Vec::new(), &NoWait).await;
        assert_eq!(response.status, 200, "GET {path}");
        String::from_utf8(response.body).expect("UTF-8")
    }

    /// A Send of one message made with `token`: its status.
    async fn send_as(&self, token: &str, queue: &str) -> u16 {
        let body = json!({"queue": queue, "messages": [{"body": b64("k")}]});
        let path = "/mqlite.v1.QueueService/Send";
        let body = body.to_string();
        self.request_as(token, "POST", path, body.as_bytes())
            .await
            .0
    }

    async fn rpc(&self, rpc: &str, body: Value) -> (u16, Value) {
        self.request(
            "POST",
            &format!("/mqlite.v1.{rpc}"),
            body.to_string().as_bytes(),
        )
        .await
    }

    async fn ok(&self, rpc: &str, body: Value) -> Value {
        let (status, json) = self.rpc(rpc, body.clone()).await;
        assert_eq!(status, 200, "{rpc} {body} -> {json}");
        json
    }

    /// A Redrive of `queue`'s dead letters into `target`: its answer.
    async fn redrive(&self, queue: &str, target: &str) -> (u16, Value) {
        let response = self.redrive_response(queue, target).await;
        (response.status, json_body(&response))
    }

    /// [`Broker::redrive`]'s whole response, its wake hints included.
    async fn redrive_response(&self, queue: &str, target: &str) -> Response {
        let request = Request {
            method: "POST".into(),
            path: "/mqlite.v1.AdminService/Redrive".into(),
            headers: vec![("Authorization".into(), ADMIN_AUTH.into())],
        };
        let body = json!({"queue": queue, "target": target}).to_string();
        let waiter = Hinting { elapsed_ms: 0 };
        self.service
            .handle(&request, body.into_bytes(), &waiter)
            .await
    }

    async fn create(&self, name: &str) {
        self.ok(
            "AdminService/CreateQueue",
            json!({"name": name, "config": {}}),
        )
        .await;
    }

    async fn send(&self, queue: &str, text: &str) -> (u16, Value) {
        self.rpc(
            "QueueService/Send",
            json!({"queue": queue, "messages": [{"body": b64(text)}]}),
        )
        .await
    }

    /// Receives one message of `queue` and completes it; its body's text.
    async fn take(&self, queue: &str) -> String {
        let got = self
            .ok(
                "QueueService/Receive",
                json!({"queue": queue, "max_messages": 1}),
            )
            .await;
        let message = &got["messages"][0];
        let token = message["lock_token"].as_str().expect("a message");
        self.ok(
            "QueueService/Complete",
            json!({"queue": queue, "seq_number": message["seq_number"], "lock_token": token}),
        )
        .await;
        use base64::Engine as _;
        let body = base64::engine::general_purpose::STANDARD
            .decode(message["body"].as_str().expect("body"))
            .expect("base64");
        String::from_utf8(body).expect("utf-8")
    }
}

/// An answer that must be the error `code` with `status`.
fn assert_refused(status: u16, json: &Value, expected: u16, code: &str) {
    assert_eq!(
        (status, json["code"].as_str()),
        (expected, Some(code)),
        "{json}"
    );
}

fn names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("q{i}")).collect()
}

#[tokio::test]
async fn queues_spread_over_the_databases_and_each_lives_in_one() {
    let deployment = Deployment::new(3);
    let broker = deployment.isolate();
    for name in names(30) {
        broker.create(&name).await;
    }
    let mut seen = BTreeSet::new();
    for index in 0..3 {
        let held = deployment.queues_in(index).await;
        assert!(!held.is_empty(), "database {index} holds no queue");
        for name in &held {
            assert_eq!(deployment.chosen(name), index, "{name}");
            assert!(seen.insert(name.clone()), "{name} lives twice");
        }
    }
    assert_eq!(seen, names(30).into_iter().collect());
}

#[tokio::test]
async fn an_rpc_on_a_known_queue_makes_one_request_on_its_own_database() {
    let deployment = Deployment::new(3);
    let name = deployment.name_in(2);
    deployment.isolate().create(&name).await;

    // A fresh isolate reads the placement once from the catalog.
    let broker = deployment.isolate();
    let before = deployment.requests();
    assert_eq!(broker.send(&name, "first").await.0, 200);
    assert_eq!(deployment.requests_since(&before), [1, 0, 1]);
    // Then every RPC on it is one request, on its own database.
    for _ in 0..3 {
        let before = deployment.requests();
        assert_eq!(broker.send(&name, "again").await.0, 200);
        assert_eq!(deployment.requests_since(&before), [0, 0, 1]);
    }
}

#[tokio::test]
async fn messages_go_round_on_every_database() {
    let deployment = Deployment::new(3);
    let broker = deployment.isolate();
    let queues = names(12);
    for name in &queues {
        broker.create(name).await;
        assert_eq!(broker.send(name, &format!("to {name}")).await.0, 200);
    }
    // Another isolate finds every queue where it lives.
    let other = deployment.isolate();
    for name in &queues {
        assert_eq!(other.take(name).await, format!("to {name}"));
        let stats = other.ok("QueueService/Stats", json!({"queue": name})).await;
        assert_eq!(stats["active"], 0, "{stats}");
    }
    // A name never created is the catalog's to refuse.
    let (status, json) = other.send("nowhere", "x").await;
    assert_refused(status, &json, 404, "not_found");
}

#[tokio::test]
async fn views_cover_every_database() {
    let deployment = Deployment::new(3);
    let broker = deployment.isolate();
    let queues = names(9);
    for name in &queues {
        broker.create(name).await;
        assert_eq!(broker.send(name, "x").await.0, 200);
    }
    let listed = broker.ok("AdminService/ListQueues", json!({})).await;
    let listed = listed["queues"].as_array().expect("queues");
    for queue in listed {
        let name = queue["name"].as_str().expect("name");
        let home = &deployment.names[deployment.chosen(name)];
        assert_eq!(queue["database"].as_str(), Some(home.as_str()), "{queue}");
    }
    let listed: Vec<&str> = listed
        .iter()
        .map(|q| q["name"].as_str().expect("name"))
        .collect();
    let mut sorted = queues.clone();
    sorted.sort();
    assert_eq!(listed, sorted);

    let status = broker.ok("AdminService/Status", json!({})).await;
    assert_eq!(status["queues"], 9, "{status}");
    assert_eq!(
        status["uptime_ms"], 0,
        "the manual clock has not moved: {status}"
    );
    assert!(status["ping_ms"].as_i64().expect("ping") >= 0);

    let observed = broker.ok("AdminService/Observe", json!({})).await;
    assert_eq!(observed["databases"].as_array().map(Vec::len), Some(3));
    assert!(observed["databases"]
        .as_array()
        .into_iter()
        .flatten()
        .all(|d| d["state"] == "available"));
    let gauges = observed["queues"].as_array().expect("queues");
    assert_eq!(gauges.len(), 9, "{observed}");
    assert!(gauges.iter().all(|g| g["active"] == 1), "{observed}");

    let (status, pgmq) = broker.request("GET", "/v1/queues", b"").await;
    assert_eq!(status, 200, "{pgmq}");
    assert_eq!(pgmq["queues"].as_array().expect("list").len(), 9, "{pgmq}");
    let (status, metrics) = broker.request("GET", "/v1/metrics", b"").await;
    assert_eq!(status, 200, "{metrics}");
    assert_eq!(metrics["queues"].as_array().expect("queues").len(), 9);
}

#[tokio::test]
async fn one_database_lists_its_queues_as_it_always_did() {
    let deployment = Deployment::new(1);
    let broker = deployment.isolate();
    broker.create("only").await;
    let listed = broker.ok("AdminService/ListQueues", json!({})).await;
    assert_eq!(listed["queues"][0]["name"], "only");
    assert!(listed["queues"][0].get("database").is_none(), "{listed}");
    let observed = broker.ok("AdminService/Observe", json!({})).await;
    assert!(observed.get("databases").is_none(), "one database: no list");
}

#[tokio::test]
async fn a_topic_and_its_subscriptions_live_together() {
    let deployment = Deployment::new(3);
    let broker = deployment.isolate();
    for sub in ["s0", "s1", "s2", "s3"] {
        broker
            .ok(
                "AdminService/Subscribe",
                json!({"topic": "news", "name": sub}),
            )
            .await;
    }
    let home = deployment.chosen("news");
    assert_eq!(
        deployment.queues_in(home).await,
        ["s0", "s1", "s2", "s3"].map(String::from).into()
    );
    // A publish from another isolate reaches every subscription.
    let other = deployment.isolate();
    assert_eq!(other.send("news", "extra").await.0, 200);
    for sub in ["s0", "s1", "s2", "s3"] {
        assert_eq!(other.take(sub).await, "extra");
    }
    let status = other.ok("AdminService/Status", json!({})).await;
    let counts = (status["queues"].as_i64(), status["subscriptions"].as_i64());
    assert_eq!(counts, (Some(0), Some(4)), "{status}");
    let subscriptions = other.ok("AdminService/ListSubscriptions", json!({})).await;
    assert_eq!(
        subscriptions["subscriptions"].as_array().map(Vec::len),
        Some(4)
    );

    // A queue placed elsewhere cannot become one of its subscriptions.
    let elsewhere = names(30)
        .into_iter()
        .find(|n| deployment.chosen(n) != home)
        .expect("a name elsewhere");
    broker.create(&elsewhere).await;
    let (status, json) = broker
        .rpc(
            "AdminService/Subscribe",
            json!({"topic": "news", "name": elsewhere}),
        )
        .await;
    assert_refused(status, &json, 409, "name_conflict");
}

/// Names Subscribe and CreateQueue refuse are refused before anything is
/// placed: no request reaches any database.
#[tokio::test]
async fn refused_names_place_nothing() {
    let deployment = Deployment::new(3);
    let broker = deployment.isolate();
    for (rpc, body, status, code) in [
        (
            "AdminService/Subscribe",
            json!({"topic": "t", "name": ""}),
            400,
            "invalid_argument",
        ),
        (
            "AdminService/Subscribe",
            json!({"topic": "", "name": "s"}),
            400,
            "invalid_argument",
        ),
        (
            "AdminService/Subscribe",
            json!({"topic": "t", "name": "t"}),
            409,
            "name_conflict",
        ),
        (
            "AdminService/CreateQueue",
            json!({"name": "", "config": {}}),
            400,
            "invalid_argument",
        ),
        // A configuration or a filter refused: the name stays unplaced.
        (
            "AdminService/CreateQueue",
            json!({"name": "orders", "config": {"kind": "bogus"}, "database": "db1"}),
            400,
            "invalid_argument",
        ),
        (
            "AdminService/Subscribe",
            json!({"topic": "t", "name": "s", "filter": {"expr": "(("}}),
            400,
            "invalid_argument",
        ),
    ] {
        let before = deployment.requests();
        let (got, json) = broker.rpc(rpc, body.clone()).await;
        assert_refused(got, &json, status, code);
        assert_eq!(
            deployment.requests_since(&before),
            [0, 0, 0],
            "{rpc} {body}"
        );
    }
}

#[tokio::test]
async fn a_deleted_name_is_created_again_where_it_was() {
    let deployment = Deployment::new(3);
    let broker = deployment.isolate();
    broker.create("again").await;
    let home = deployment.chosen("again");
    let listed = broker.ok("AdminService/ListQueues", json!({})).await;
    let generation = listed["queues"][0]["generation"].clone();
    broker
        .ok(
            "AdminService/DeleteQueue",
            json!({"name": "again", "generation": generation}),
        )
        .await;
    assert!(deployment.queues_in(home).await.is_empty());
    deployment.isolate().create("again").await;
    assert_eq!(
        deployment.queues_in(home).await,
        ["again".to_string()].into()
    );
    // The first isolate's placement still holds.
    assert_eq!(broker.send("again", "x").await.0, 200);
}

impl Broker {
    /// `n` dead letters in `queue` (Reject), with bodies `{prefix}0`, ….
    async fn dead_letters(&self, queue: &str, prefix: &str, n: usize) {
        for i in 0..n {
            self.send(queue, &format!("{prefix}{i}")).await;
            let got = self
                .ok(
                    "QueueService/Receive",
                    json!({"queue": queue, "max_messages": 1}),
                )
                .await;
            let message = &got["messages"][0];
            self.ok(
                "QueueService/Reject",
                json!({"queue": queue, "seq_number": message["seq_number"],
                       "lock_token": message["lock_token"]}),
            )
            .await;
        }
    }

    /// Every message `queue` delivers, completed: their bodies' texts.
    async fn drain(&self, queue: &str) -> Vec<String> {
        let mut bodies = Vec::new();
        loop {
            let stats = self.ok("QueueService/Stats", json!({"queue": queue})).await;
            if stats["active"] == 0 {
                return bodies;
            }
            bodies.push(self.take(queue).await);
        }
    }

    async fn dead_lettered(&self, queue: &str) -> i64 {
        let stats = self.ok("QueueService/Stats", json!({"queue": queue})).await;
        stats["dead_lettered"].as_i64().expect("a count")
    }
}

#[tokio::test]
async fn c172_a_redrive_across_databases_moves_every_dead_letter_once() {
    let deployment = Deployment::new(3);
    let (broker, src, dst) = deployment.dead_letters_apart(5).await;
    let before = deployment.requests();
    assert_eq!(broker.redrive(&src, &dst).await, (200, json!({"moved": 5})));
    // The four steps of one chunk, two in each database; the catalog is
    // not asked again.
    let spent = deployment.requests_since(&before);
    assert_eq!(spent[deployment.chosen(&src)], 2, "{spent:?}");
    assert_eq!(spent[deployment.chosen(&dst)], 2, "{spent:?}");
    assert_eq!(spent.iter().sum::<u64>(), 4, "{spent:?}");
    assert_eq!(broker.dead_lettered(&src).await, 0);
    // Fresh active copies, in seq order, bodies as they were (T19).
    let peeked = broker
        .ok("QueueService/Peek", json!({"queue": dst, "max": 10}))
        .await;
    let copies = messages(&peeked);
    assert_eq!(copies.len(), 5);
    for message in copies {
        assert_eq!(message["state"], "active", "{message}");
        // A zero delivery count and no reason are left out of the answer.
        assert!(message.get("delivery_count").is_none(), "{message}");
        assert!(message.get("dead_letter_reason").is_none(), "{message}");
    }
    assert_eq!(broker.drain(&dst).await, ["m0", "m1", "m2", "m3", "m4"]);
    assert_eq!(deployment.relay_rows().await, (0, 0));
    // Nothing left: a second Redrive moves nothing.
    let again = broker
        .ok("AdminService/Redrive", json!({"queue": src, "target": dst}))
        .await;
    assert_eq!(again, json!({"moved": 0}));
}

#[tokio::test]
async fn c174_a_redrive_across_databases_keeps_max_and_pacing() {
    let deployment = Deployment::new(3);
    let (broker, src, dst) = deployment.dead_letters_apart(5).await;
    let moved = broker
        .ok(
            "AdminService/Redrive",
            json!({"queue": src, "target": dst, "max": 2}),
        )
        .await;
    assert_eq!(moved, json!({"moved": 2}));
    assert_eq!(broker.drain(&dst).await, ["m0", "m1"]);
    // Paced two a chunk; this waiter's time budget is spent after the
    // first chunk, so each call moves one chunk and callers repeat.
    let paced = json!({"queue": src, "target": dst, "rate_per_sec": 2});
    let moved = broker.ok("AdminService/Redrive", paced.clone()).await;
    assert_eq!(moved, json!({"moved": 2}));
    let moved = broker.ok("AdminService/Redrive", paced).await;
    assert_eq!(moved, json!({"moved": 1}));
    assert_eq!(broker.drain(&dst).await, ["m2", "m3", "m4"]);
    assert_eq!(broker.dead_lettered(&src).await, 0);
    assert_eq!(deployment.relay_rows().await, (0, 0));
}

/// A waiter that has always waited this long and whose pauses take no
/// time: with little elapsed a paced Redrive moves every chunk in one call.
struct Elapsed(u64);

impl Waiter for Elapsed {
    fn elapsed_ms(&self) -> u64 {
        self.0
    }

    async fn sleep(&self, _millis: u64) {}
}

impl Broker {
    async fn redrive_after(&self, elapsed_ms: u64, body: Value) -> Value {
        let body = body.to_string();
        let path = "/mqlite.v1.AdminService/Redrive";
        let waiter = Elapsed(elapsed_ms);
        let (status, json) = self
            .request_waiting(ADMIN, "POST", path, body.as_bytes(), &waiter)
            .await;
        assert_eq!(status, 200, "{json}");
        json
    }
}

/// A paced Redrive makes another chunk while the pause still ends within
/// the 25 s budget (exactly at it included), else answers what it moved;
/// in one database and across two.
#[tokio::test]
async fn a_paced_redrive_goes_on_while_its_time_budget_allows() {
    for databases in [1, 2] {
        let deployment = Deployment::new(databases);
        let (broker, src, dst) = if databases == 1 {
            let broker = deployment.isolate();
            broker.create("src").await;
            broker.create("dst").await;
            broker.dead_letters("src", "m", 5).await;
            (broker, "src".to_string(), "dst".to_string())
        } else {
            deployment.dead_letters_apart(5).await
        };
        let paced = json!({"queue": src, "target": dst, "rate_per_sec": 2});
        let spent = broker.redrive_after(u64::MAX / 2, paced.clone()).await;
        assert_eq!(spent, json!({"moved": 2}), "{databases} database(s)");
        let at_budget = broker.redrive_after(24_000, paced).await;
        assert_eq!(at_budget, json!({"moved": 3}), "{databases} database(s)");
    }
}

#[tokio::test]
async fn c174_a_paced_redrive_across_databases_stops_at_max() {
    let deployment = Deployment::new(2);
    let (broker, src, dst) = deployment.dead_letters_apart(5).await;
    let before = deployment.requests();
    let paced = json!({"queue": src, "target": dst, "rate_per_sec": 2, "max": 3});
    let moved = broker.redrive_after(0, paced).await;
    assert_eq!(moved, json!({"moved": 3}));
    // A chunk of 2, then of 1: four requests each, and none after.
    assert_eq!(deployment.requests_since(&before).iter().sum::<u64>(), 8);
    assert_eq!(broker.drain(&dst).await, ["m0", "m1", "m2"]);
    assert_eq!(broker.dead_lettered(&src).await, 2);
}

/// A Redrive without a target (or naming its own queue) stays inside the
/// queue's database, wherever that is: one request there, none elsewhere.
#[tokio::test]
async fn c172_a_redrive_in_place_stays_in_its_own_database() {
    let deployment = Deployment::new(3);
    let src = deployment.name_in(2);
    let broker = deployment.isolate();
    broker.create(&src).await;
    for (round, target) in ["", src.as_str()].into_iter().enumerate() {
        broker.dead_letters(&src, &format!("r{round}-"), 2).await;
        let before = deployment.requests();
        let moved = broker
            .ok(
                "AdminService/Redrive",
                json!({"queue": src, "target": target}),
            )
            .await;
        assert_eq!(moved, json!({"moved": 2}), "target {target:?}");
        assert_eq!(
            deployment.requests_since(&before),
            [0, 0, 1],
            "target {target:?}"
        );
        assert_eq!(broker.dead_lettered(&src).await, 0, "target {target:?}");
        let prefix = format!("r{round}-");
        assert_eq!(
            broker.drain(&src).await,
            [format!("{prefix}0"), format!("{prefix}1")],
            "target {target:?}"
        );
    }
}

#[tokio::test]
async fn a_redrive_across_databases_to_a_missing_target_moves_nothing() {
    let deployment = Deployment::new(3);
    let broker = deployment.isolate();
    let (src, dst) = deployment.apart();
    broker.create(&src).await;
    broker.dead_letters(&src, "m", 2).await;
    // `dst` was never created: the catalog answers for it.
    let (status, json) = broker.redrive(&src, &dst).await;
    assert_refused(status, &json, 404, "not_found");
    assert_eq!(broker.dead_lettered(&src).await, 2);
    assert_eq!(deployment.relay_rows().await, (0, 0));
    // With nothing to move the target is still checked.
    broker.ok("AdminService/Purge", json!({"queue": src})).await;
    let (status, json) = broker.redrive(&src, &dst).await;
    assert_refused(status, &json, 404, "not_found");
}

/// Every point at which a Redrive across databases can be cut: the answer
/// of its `cut`-th request to the source's database (or the target's) is
/// lost. Whatever the first call answered, a second one finishes the move:
/// every dead letter reaches the target exactly once.
#[tokio::test]
async fn a_redrive_across_databases_cut_anywhere_never_loses_or_copies_a_message() {
    for (in_target, cut) in [(true, 0), (false, 0), (true, 1), (false, 1), (true, 2)] {
        let deployment = Deployment::new(2);
        let (broker, src, dst) = deployment.dead_letters_apart(3).await;
        let side = if in_target { &dst } else { &src };
        deployment.dbs[deployment.chosen(side)].lose_answers_after(cut);
        let (status, first) = broker.redrive(&src, &dst).await;
        deployment.dbs[deployment.chosen(side)].lose_answers_after(-1);
        let case = format!(
            "answer {cut} of the {} lost",
            if in_target { "target" } else { "source" }
        );
        let first_moved = if status == 200 {
            first["moved"].as_i64().expect("moved")
        } else {
            assert_eq!(status, 503, "{case}: {first}");
            0
        };
        let second = broker
            .ok("AdminService/Redrive", json!({"queue": src, "target": dst}))
            .await;
        let second_moved = second["moved"].as_i64().expect("moved");
        assert_eq!(broker.dead_lettered(&src).await, 0, "{case}");
        assert_eq!(broker.drain(&dst).await, ["m0", "m1", "m2"], "{case}");
        assert!(
            first_moved + second_moved <= 3,
            "{case}: {first} then {second}"
        );
        assert_eq!(
            deployment.relay_rows().await.0,
            0,
            "{case}: nothing in transit"
        );
    }
}

#[tokio::test]
async fn a_target_deleted_while_its_messages_travel_gives_them_back() {
    let deployment = Deployment::new(2);
    let (broker, src, dst) = deployment.dead_letters_apart(2).await;
    let peek = json!({"queue": src, "max": 10, "state": "dead_lettered"});
    let dead_letters = |peeked: Value| -> Vec<(Value, Value)> {
        messages(&peeked)
            .iter()
            .map(|m| (m["seq_number"].clone(), m["body"].clone()))
            .collect()
    };
    let before = dead_letters(broker.ok("QueueService/Peek", peek.clone()).await);
    assert_eq!(before.len(), 2);
    // The target's database refuses the delivery: the messages stay in
    // transit, and their queue cannot be deleted meanwhile.
    let target_db = &deployment.dbs[deployment.chosen(&dst)];
    target_db.refuse_after(0);
    let (status, json) = broker.redrive(&src, &dst).await;
    assert_refused(status, &json, 503, "unavailable");
    target_db.lose_answers_after(-1);
    assert_eq!(deployment.relay_rows().await, (2, 0));
    assert_eq!(broker.dead_lettered(&src).await, 0);
    let generation_of = |listed: &Value, name: &str| {
        listed["queues"]
            .as_array()
            .and_then(|qs| qs.iter().find(|q| q["name"] == json!(name)))
            .map(|q| q["generation"].clone())
            .expect("listed")
    };
    let listed = broker.ok("AdminService/ListQueues", json!({})).await;
    let (status, json) = broker
        .rpc(
            "AdminService/DeleteQueue",
            json!({"name": src, "generation": generation_of(&listed, &src)}),
        )
        .await;
    assert_refused(status, &json, 409, "queue_not_empty");
    // The target goes; the next Redrive puts the messages back as they
    // were, seqs included, and answers that the target is missing.
    broker
        .ok(
            "AdminService/DeleteQueue",
            json!({"name": dst, "generation": generation_of(&listed, &dst)}),
        )
        .await;
    let (status, json) = broker.redrive(&src, &dst).await;
    assert_refused(status, &json, 404, "not_found");
    assert_eq!(deployment.relay_rows().await, (0, 0));
    assert_eq!(
        dead_letters(broker.ok("QueueService/Peek", peek).await),
        before
    );
    // The same seqs travel again, on a new trip, once the target is back.
    broker.create(&dst).await;
    assert_eq!(broker.redrive(&src, &dst).await, (200, json!({"moved": 2})));
    assert_eq!(broker.drain(&dst).await, ["m0", "m1"]);
}

/// A delivery that committed with its answer lost, then the copies
/// consumed and the target deleted: the next Redrive finds the trip's
/// arrival and clears the outbox, it does not put the messages back (they
/// would be delivered twice).
#[tokio::test]
async fn a_delivery_whose_answer_was_lost_is_not_put_back_when_its_target_goes() {
    let deployment = Deployment::new(2);
    let (broker, src, dst) = deployment.dead_letters_apart(3).await;
    let target_db = &deployment.dbs[deployment.chosen(&dst)];
    target_db.lose_answers_after(0);
    let (status, json) = broker.redrive(&src, &dst).await;
    assert_refused(status, &json, 503, "outcome_unknown");
    target_db.lose_answers_after(-1);
    assert_eq!(deployment.relay_rows().await, (3, 1));
    assert_eq!(broker.drain(&dst).await, ["m0", "m1", "m2"]);
    let listed = broker.ok("AdminService/ListQueues", json!({})).await;
    let generation = listed["queues"]
        .as_array()
        .and_then(|qs| qs.iter().find(|q| q["name"] == json!(dst)))
        .map(|q| q["generation"].clone())
        .expect("listed");
    broker
        .ok(
            "AdminService/DeleteQueue",
            json!({"name": dst, "generation": generation}),
        )
        .await;
    assert_eq!(broker.redrive(&src, &dst).await, (200, json!({"moved": 3})));
    assert_eq!(broker.dead_lettered(&src).await, 0);
    assert_eq!(deployment.relay_rows().await, (0, 0));
    let (status, json) = broker.redrive(&src, &dst).await;
    assert_refused(status, &json, 404, "not_found");
}

/// A database upgraded (migration 0011) while a delivered chunk was still
/// in its outbox, its receipts in the target's database: the chunk becomes
/// a trip whose arrival is the receipts', so the next Redrive clears it
/// without copying it again.
#[tokio::test]
async fn a_chunk_in_transit_before_the_upgrade_is_not_copied_again() {
    let deployment = Deployment::new(2);
    let broker = deployment.isolate();
    let (src, dst) = deployment.apart();
    broker.create(&src).await;
    broker.create(&dst).await;
    // The chunk's seqs do not start at 1.
    broker.send(&src, "gone").await;
    assert_eq!(broker.take(&src).await, "gone");
    broker.dead_letters(&src, "m", 3).await;
    let (source, target) = (deployment.chosen(&src), deployment.chosen(&dst));
    deployment.dbs[target].lose_answers_after(0);
    let (status, _) = broker.redrive(&src, &dst).await;
    assert_eq!(status, 503);
    deployment.dbs[target].lose_answers_after(-1);
    // Back to schema 10: the outbox without trips, a receipt per seq.
    let seqs = query(
        &deployment.engine(source),
        "SELECT seq FROM redrive_outbox ORDER BY seq",
    )
    .await;
    assert_eq!(seqs.len(), 3);
    let receipts: Vec<String> = seqs
        .iter()
        .map(|row| {
            format!(
                "INSERT INTO redrive_receipts VALUES ('{}', {}, 1)",
                deployment.names[source], row[0]
            )
        })
        .collect();
    let to_10 = |statements: &[&str]| -> Vec<String> {
        let mut all: Vec<String> = statements.iter().map(|s| (*s).to_owned()).collect();
        all.push("UPDATE schema_version SET version = 10".into());
        all
    };
    deployment
        .raw(
            source,
            &to_10(&[
                "ALTER TABLE redrive_outbox DROP COLUMN trip",
                "DROP TABLE redrive_arrivals",
                "CREATE TABLE redrive_receipts (source_database TEXT NOT NULL, seq INTEGER NOT NULL, \
                 received_at INTEGER NOT NULL, PRIMARY KEY (source_database, seq)) STRICT, WITHOUT ROWID",
            ]),
        )
        .await;
    let mut rewind = to_10(&[
        "DROP TABLE redrive_arrivals",
        "ALTER TABLE redrive_outbox DROP COLUMN trip",
        "CREATE TABLE redrive_receipts (source_database TEXT NOT NULL, seq INTEGER NOT NULL, \
         received_at INTEGER NOT NULL, PRIMARY KEY (source_database, seq)) STRICT, WITHOUT ROWID",
    ]);
    rewind.splice(3..3, receipts);
    deployment.raw(target, &rewind).await;
    assert_eq!(broker.redrive(&src, &dst).await, (200, json!({"moved": 3})));
    assert_eq!(broker.drain(&dst).await, ["m0", "m1", "m2"]);
    // The receipts of the chunk's other seqs stay behind, never read.
    assert_eq!(deployment.relay_rows().await, (0, 2));
}

/// Messages in transit to a database an isolate does not list stay in
/// transit there (an isolate that lists it may be delivering them: putting
/// them back would copy them twice); an isolate that lists it delivers them.
#[tokio::test]
async fn messages_bound_for_a_database_an_isolate_does_not_list_wait_for_one_that_does() {
    let deployment = Deployment::new(2).with_one_more();
    let broker = deployment.isolate();
    let create_in = |name: &str, index: usize| json!({"name": name, "config": {}, "database": deployment.names[index]});
    for (name, index) in [("src", 0), ("dst", 1), ("far", 2)] {
        broker
            .ok("AdminService/CreateQueue", create_in(name, index))
            .await;
    }
    broker.dead_letters("src", "m", 2).await;
    // `db2` is not in this isolate's MQLITE_DATABASES (a configuration
    // being rolled out); its Redrive runs while the other's delivery into
    // `db2` is held.
    let narrower = deployment.isolate_over(2);
    let (wide, (status, json)) = deployment
        .interleaved(
            2,
            broker.redrive("src", "far"),
            narrower.redrive("src", "dst"),
        )
        .await;
    assert_refused(status, &json, 503, "unavailable");
    assert_eq!(wide, (200, json!({"moved": 2})));
    assert_eq!(broker.drain("far").await, ["m0", "m1"]);
    assert_eq!(narrower.drain("dst").await, Vec::<String>::new());
    assert_eq!(deployment.relay_rows().await, (0, 0));
}

/// pgmq's drop takes the queue's messages in transit with it: with no
/// Redrive under way, a trip not yet delivered never arrives, and nothing
/// is left behind.
#[tokio::test]
async fn pgmq_drop_takes_the_dead_letters_in_transit() {
    let deployment = Deployment::new(2);
    let (broker, src, dst) = deployment.dead_letters_apart(2).await;
    let target_db = &deployment.dbs[deployment.chosen(&dst)];
    target_db.refuse_after(0);
    assert_eq!(broker.redrive(&src, &dst).await.0, 503);
    target_db.lose_answers_after(-1);
    assert_eq!(deployment.relay_rows().await, (2, 0));
    let (status, _) = broker
        .request("DELETE", &format!("/v1/queues/{src}"), b"")
        .await;
    assert_eq!(status, 204);
    assert_eq!(deployment.relay_rows().await, (0, 0));
    broker.create(&src).await;
    assert_eq!(broker.redrive(&src, &dst).await, (200, json!({"moved": 0})));
    assert_eq!(broker.drain(&dst).await, Vec::<String>::new());
}

/// Two Redrives of one source overlap: the first moves a trip and its
/// delivery is held; the second reads that trip, delivers it, clears the
/// outbox and marks the arrival done; only then does the first's delivery
/// run. It copies nothing, wakes nothing and counts nothing.
#[tokio::test]
async fn overlapping_redrives_across_databases_deliver_a_trip_once() {
    let deployment = Deployment::new(2);
    let (broker, src, dst) = deployment.dead_letters_apart(3).await;
    // A claim waits on the target: the copies wake it, the late call's
    // delivery (which copies nothing) does not.
    let waiting = json!({"queue": dst, "wait_time_ms": 50}).to_string();
    let (status, got) = broker
        .request_waiting(
            ADMIN,
            "POST",
            "/mqlite.v1.QueueService/Receive",
            waiting.as_bytes(),
            &Hinting { elapsed_ms: 0 },
        )
        .await;
    assert_eq!((status, &got["messages"]), (200, &json!([])));
    let target = deployment.chosen(&dst);
    let (late, first) = deployment
        .interleaved(
            target,
            broker.redrive_response(&src, &dst),
            broker.redrive_response(&src, &dst),
        )
        .await;
    let answer = |r: &Response| (r.status, json_body(r));
    assert_eq!(answer(&first), (200, json!({"moved": 3})));
    assert_eq!(answer(&late), (200, json!({"moved": 0})));
    let hinted =
        |r: &Response| -> Vec<String> { r.wake_hints().iter().map(|h| h.queue.clone()).collect() };
    assert_eq!(hinted(&first), vec![dst.clone()]);
    assert_eq!(hinted(&late), Vec::<String>::new());
    // Enqueued into the target once.
    let observed = broker.ok("AdminService/Observe", json!({})).await;
    let enqueued: u64 = observed["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["queue"] == json!(dst) && m["event"] == "enqueued")
        .map(|m| m["count"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(enqueued, 3, "{observed}");
    assert_eq!(broker.drain(&dst).await, ["m0", "m1", "m2"]);
    assert_eq!(deployment.relay_rows().await, (0, 0));
}

/// A delivery that reaches the target's database after its window closed
/// copies nothing and answers 503; the trip stays in transit and the next
/// Redrive delivers it once.
#[tokio::test]
async fn a_delivery_held_past_its_window_copies_nothing() {
    let deployment = Deployment::new(2);
    let (broker, src, dst) = deployment.dead_letters_apart(2).await;
    let source = deployment.chosen(&src);
    // The source reads the trip at the time its request was made; a
    // delivery made 15 minutes later still copies.
    let fifteen_minutes = 15 * 60 * 1000;
    let (on_time, ()) = deployment
        .interleaved(source, broker.redrive(&src, &dst), async {
            deployment.clock.advance(fifteen_minutes)
        })
        .await;
    assert_eq!(on_time, (200, json!({"moved": 2})));
    assert_eq!(broker.drain(&dst).await, ["m0", "m1"]);
    // One made a millisecond later does not.
    broker.dead_letters(&src, "n", 2).await;
    let ((status, json), ()) = deployment
        .interleaved(source, broker.redrive(&src, &dst), async {
            deployment.clock.advance(fifteen_minutes + 1)
        })
        .await;
    assert_refused(status, &json, 503, "unavailable");
    assert_eq!(deployment.relay_rows().await, (2, 0));
    assert_eq!(deployment.arrivals().await, 1, "the first trip's only");
    assert_eq!(broker.redrive(&src, &dst).await, (200, json!({"moved": 2})));
    assert_eq!(broker.drain(&dst).await, ["n0", "n1"]);
}

/// Arrivals outlive their trip by a day, then the next trip done in their
/// database drops them.
#[tokio::test]
async fn arrivals_are_dropped_a_day_after_their_trip_ended() {
    let deployment = Deployment::new(2);
    let (broker, src, dst) = deployment.dead_letters_apart(2).await;
    assert_eq!(broker.redrive(&src, &dst).await, (200, json!({"moved": 2})));
    assert_eq!(deployment.arrivals().await, 1);
    let day = 24 * 60 * 60 * 1000;
    deployment.clock.advance(day);
    broker.dead_letters(&src, "n", 1).await;
    assert_eq!(broker.redrive(&src, &dst).await.0, 200);
    assert_eq!(deployment.arrivals().await, 2, "kept for a whole day");
    deployment.clock.advance(1);
    broker.dead_letters(&src, "o", 1).await;
    assert_eq!(broker.redrive(&src, &dst).await.0, 200);
    assert_eq!(deployment.arrivals().await, 2, "the first one dropped");
    assert_eq!(deployment.relay_rows().await, (0, 0));
}

/// A trip refused because its target was missing, whose messages could not
/// be put back yet: once the target exists again, the next Redrive puts the
/// trip back (it must never be copied now) and moves its messages again, as
/// a new trip, into the target.
#[tokio::test]
async fn a_refused_trip_goes_back_and_travels_again_once_its_target_exists() {
    let deployment = Deployment::new(2);
    let broker = deployment.isolate();
    let (src, dst) = deployment.apart();
    broker.create(&src).await;
    broker.dead_letters(&src, "m", 2).await;
    // `dst` does not exist yet; the put back is refused unsent.
    let source_db = &deployment.dbs[deployment.chosen(&src)];
    source_db.refuse_after(1);
    let (status, json) = broker.redrive(&src, &dst).await;
    assert_refused(status, &json, 503, "unavailable");
    source_db.lose_answers_after(-1);
    assert_eq!(deployment.relay_rows().await, (2, 1));
    broker.create(&dst).await;
    assert_eq!(broker.redrive(&src, &dst).await, (200, json!({"moved": 2})));
    assert_eq!(broker.drain(&dst).await, ["m0", "m1"]);
    assert_eq!(deployment.relay_rows().await, (0, 0));
}

#[tokio::test]
async fn a_database_that_is_down_fails_only_its_own_queues() {
    let deployment = Deployment::new(3);
    let (broker, queues) = deployment.with_queues(12).await;
    deployment.dbs[1].down.store(true, Ordering::SeqCst);
    for name in &queues {
        let (status, json) = broker.send(name, "x").await;
        if deployment.chosen(name) == 1 {
            assert_refused(status, &json, 503, "unavailable");
            // The answer says nothing applied and names an incident, never
            // the database's own words.
            let message = json["message"].as_str().expect("a message");
            assert!(message.contains("nothing was applied"), "{message}");
            assert!(message.contains("(id "), "{message}");
            assert!(!message.contains("connection refused"), "{message}");
        } else {
            assert_eq!(status, 200, "{name}: {json}");
        }
    }
    // A view is not answered with a database missing from it.
    let (status, _) = broker.rpc("AdminService/ListQueues", json!({})).await;
    assert_eq!(status, 503);
    // Observe and /metrics name the database that did not answer.
    let observed = broker.ok("AdminService/Observe", json!({})).await;
    assert_eq!(observed["collection"]["state"], "unavailable");
    assert_eq!(observed["queues"], Value::Null);
    let states: Vec<(&str, &str)> = observed["databases"]
        .as_array()
        .expect("databases")
        .iter()
        .map(|d| {
            (
                d["name"].as_str().unwrap_or(""),
                d["state"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        states,
        [
            ("db0", "available"),
            ("db1", "unavailable"),
            ("db2", "available")
        ]
    );
    assert_eq!(observed["databases"][1]["error_code"], "connection");
    let metrics = broker.text("/metrics").await;
    for line in [
        r#"mqlite_database_up{database="db0"} 1"#,
        r#"mqlite_database_up{database="db1"} 0"#,
        r#"mqlite_database_up{database="db2"} 1"#,
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} in\n{metrics}");
    }
}

#[tokio::test]
async fn names_already_placed_are_served_while_the_catalog_is_down() {
    let deployment = Deployment::new(3);
    let (broker, queues) = deployment.with_queues(12).await;
    deployment.dbs[0].down.store(true, Ordering::SeqCst);
    for name in &queues {
        let (status, json) = broker.send(name, "x").await;
        if deployment.chosen(name) == 0 {
            assert_refused(status, &json, 503, "unavailable");
        } else {
            assert_eq!(status, 200, "{name}: {json}");
        }
    }
    // A new name needs the catalog to be placed; a fresh isolate needs it
    // to find any name.
    let (status, json) = broker
        .rpc(
            "AdminService/CreateQueue",
            json!({"name": "brand-new", "config": {}}),
        )
        .await;
    assert_refused(status, &json, 503, "unavailable");
    let elsewhere = queues
        .iter()
        .find(|n| deployment.chosen(n) != 0)
        .expect("a name");
    let (status, json) = deployment.isolate().send(elsewhere, "x").await;
    assert_refused(status, &json, 503, "unavailable");
}

#[tokio::test]
async fn a_database_added_later_takes_new_names_only() {
    let deployment = Deployment::new(2);
    let broker = deployment.isolate();
    let old = names(20);
    for name in &old {
        broker.create(name).await;
        assert_eq!(broker.send(name, name).await.0, 200);
    }
    let deployment = deployment.with_one_more();
    let broker = deployment.isolate();
    // Every old queue is still where it was, and found there.
    for name in &old {
        assert_eq!(broker.take(name).await, *name);
    }
    assert!(deployment.queues_in(2).await.is_empty());
    let new: Vec<String> = (0..30).map(|i| format!("new{i}")).collect();
    for name in &new {
        broker.create(name).await;
    }
    let held = deployment.queues_in(2).await;
    assert!(!held.is_empty());
    assert!(held.iter().all(|n| n.starts_with("new")), "{held:?}");
}

#[tokio::test]
async fn pgmq_queues_are_placed_and_served_on_their_database() {
    let deployment = Deployment::new(3);
    let broker = deployment.isolate();
    let name = deployment.name_in(1);
    let (status, json) = broker
        .request("PUT", &format!("/v1/queues/{name}"), b"")
        .await;
    assert_eq!(status, 201, "{json}");
    assert_eq!(deployment.queues_in(1).await, [name.clone()].into());
    let other = deployment.isolate();
    let (status, json) = other
        .request(
            "POST",
            &format!("/v1/queues/{name}/messages"),
            br#"{"message":{"n":1}}"#,
        )
        .await;
    assert_eq!(status, 201, "{json}");
    let (status, json) = other
        .request("POST", &format!("/v1/queues/{name}/read"), br#"{"qty":1}"#)
        .await;
    assert_eq!(status, 200, "{json}");
    assert_eq!(json["messages"][0]["message"], json!({"n": 1}), "{json}");
}

#[tokio::test]
async fn a_managed_key_works_on_every_database_and_its_revocation_bites_on_each() {
    let deployment = Deployment::new(3);
    let (broker, queues) = deployment.with_queues(12).await;
    let created = broker
        .ok(
            "AuthService/CreateKey",
            json!({"id": "0123456789abcdef0123456789abcdef", "name": "k",
                   "permissions": ["send"]}),
        )
        .await;
    let token = created["token"].as_str().expect("token").to_owned();
    // A second isolate, which learns the key valid once and then lets each
    // database's own transaction check it.
    let other = deployment.isolate();
    for name in &queues {
        assert_eq!(other.send_as(&token, name).await, 200, "{name}");
    }
    broker
        .ok(
            "AuthService/RevokeKey",
            json!({"id": "0123456789abcdef0123456789abcdef"}),
        )
        .await;
    for name in &queues {
        assert_eq!(other.send_as(&token, name).await, 401, "{name}");
    }
}

#[tokio::test]
async fn a_key_minted_before_a_database_was_added_is_copied_there_on_first_use() {
    let deployment = Deployment::new(2);
    let mint = |id: &'static str| {
        let broker = deployment.isolate();
        async move {
            let created = broker
                .ok(
                    "AuthService/CreateKey",
                    json!({"id": id, "name": "old", "permissions": ["send", "manage"]}),
                )
                .await;
            created["token"].as_str().expect("token").to_owned()
        }
    };
    let connect_key = mint("00000000000000000000000000000001").await;
    let pgmq_key = mint("00000000000000000000000000000002").await;
    let deployment = deployment.with_one_more();
    let broker = deployment.isolate();
    let mut late = (0..90)
        .map(|i| format!("late_{i}"))
        .filter(|n| deployment.chosen(n) == 2);
    let (queue, pgmq) = (late.next().expect("a name"), late.next().expect("another"));
    broker.create(&queue).await;
    let (status, _) = broker
        .request("PUT", &format!("/v1/queues/{pgmq}"), b"")
        .await;
    assert_eq!(status, 201);
    // The new database refuses each key once, and has a copy after that.
    assert_eq!(broker.send_as(&connect_key, &queue).await, 503);
    assert_eq!(broker.send_as(&connect_key, &queue).await, 200);
    let path = format!("/v1/queues/{pgmq}/messages");
    let (status, json) = broker
        .request_as(&pgmq_key, "POST", &path, br#"{"message":{}}"#)
        .await;
    assert_eq!(status, 503, "{json}");
    let (status, json) = broker
        .request_as(&pgmq_key, "POST", &path, br#"{"message":{}}"#)
        .await;
    assert_eq!(status, 201, "{json}");
}

/// A RevokeKey that runs while a key is being copied into a database that
/// lacked it (between the copy's read of the catalog and its write) leaves
/// no valid copy behind: the isolate that knew the key valid is refused.
#[tokio::test]
async fn a_key_revoked_while_it_is_copied_is_revoked_in_the_copy() {
    let deployment = Deployment::new(2);
    let id = "00000000000000000000000000000004";
    let created = deployment
        .isolate()
        .ok(
            "AuthService/CreateKey",
            json!({"id": id, "name": "late", "permissions": ["send", "manage"]}),
        )
        .await;
    let token = created["token"].as_str().expect("token").to_owned();
    let deployment = deployment.with_one_more();
    let broker = deployment.isolate();
    let queue = (0..90)
        .map(|i| format!("late_{i}"))
        .find(|n| deployment.chosen(n) == 2)
        .expect("a name");
    broker.create(&queue).await;
    // The new database's next request after the refused Send is the copy.
    let new = &deployment.dbs[2];
    let refused_at = new.requests.load(Ordering::SeqCst);
    new.hold.store(
        i64::try_from(refused_at + 1).expect("a count"),
        Ordering::SeqCst,
    );
    let send = broker.send_as(&token, &queue);
    let revoke = async {
        while new.requests.load(Ordering::SeqCst) < refused_at + 2 {
            tokio::task::yield_now().await;
        }
        let revoked = deployment
            .isolate()
            .rpc("AuthService/RevokeKey", json!({"id": id}))
            .await;
        new.release.notify_one();
        revoked
    };
    let (healed, (revoked, _)) = tokio::join!(send, revoke);
    assert_eq!((healed, revoked), (503, 200));
    assert_eq!(broker.send_as(&token, &queue).await, 401);
}

/// A refusal by the database is what makes a key be copied: a request that
/// ran nothing answers as it would with one database.
#[tokio::test]
async fn a_request_that_runs_nothing_keeps_its_own_answer() {
    for n in [1, 3] {
        let deployment = Deployment::new(n);
        let broker = deployment.isolate();
        let created = broker
            .ok(
                "AuthService/CreateKey",
                json!({"id": "00000000000000000000000000000003", "name": "k",
                       "permissions": ["manage"]}),
            )
            .await;
        let token = created["token"].as_str().expect("token");
        // Not JSON: refused before any program runs.
        let (status, json) = broker
            .request_as(token, "POST", "/mqlite.v1.QueueService/Send", b"{")
            .await;
        assert_refused(status, &json, 400, "invalid_argument");
        // A parameter pgmq refuses, before any placement or program.
        let (status, json) = broker
            .request_as(token, "PUT", "/v1/queues/fine?unlogged=maybe", b"")
            .await;
        assert_eq!(status, 422, "{n} databases, pgmq: {json}");
    }
}

#[tokio::test]
async fn a_transport_missing_for_a_database_is_a_configuration_error() {
    let deployment = Deployment::new(2);
    let config = Config::from_vars(|name| match name {
        "MQLITE_TOKENS" => Some(ADMIN.into()),
        "MQLITE_DATABASES" => {
            Some("a=libsql://a.invalid,b=libsql://b.invalid,c=libsql://c.invalid".into())
        }
        _ => None,
    });
    let broker = Broker {
        service: Service::over(
            config.map(|c| (c, deployment.dbs.clone())),
            deployment.clock.clone(),
            Arc::new(Isolate::new(T0)),
        ),
    };
    let (status, json) = broker.rpc("AdminService/ListQueues", json!({})).await;
    assert_refused(status, &json, 500, "internal");
}

#[tokio::test]
async fn create_queue_may_name_the_database_a_new_name_lives_in() {
    let deployment = Deployment::new(3);
    let broker = deployment.isolate();
    let name = "pinned";
    let picked = deployment.chosen(name);
    let other = (picked + 1) % 3;
    let database = deployment.names[other].clone();
    let create = |database: &str| json!({"name": name, "config": {}, "database": database});
    // An unknown database places nothing.
    let before = deployment.requests();
    let (status, json) = broker
        .rpc("AdminService/CreateQueue", create("nowhere"))
        .await;
    assert_refused(status, &json, 400, "invalid_argument");
    assert_eq!(deployment.requests_since(&before), [0, 0, 0]);
    broker
        .ok("AdminService/CreateQueue", create(&database))
        .await;
    assert_eq!(deployment.queues_in(other).await, [name.to_string()].into());
    assert!(deployment.queues_in(picked).await.is_empty());
    // Created again where it lives: as ever; anywhere else: it never moves.
    broker
        .ok("AdminService/CreateQueue", create(&database))
        .await;
    for isolate in [&broker, &deployment.isolate()] {
        let (status, json) = isolate
            .rpc(
                "AdminService/CreateQueue",
                create(&deployment.names[picked]),
            )
            .await;
        assert_refused(status, &json, 409, "name_conflict");
    }
    // A fresh isolate finds it where it was put.
    let fresh = deployment.isolate();
    assert_eq!(fresh.send(name, "x").await.0, 200);
    assert_eq!(fresh.take(name).await, "x");
}

#[tokio::test]
async fn one_database_takes_its_own_name_at_create_queue() {
    let deployment = Deployment::new(1);
    let broker = deployment.isolate();
    broker
        .ok(
            "AdminService/CreateQueue",
            json!({"name": "q", "config": {}, "database": "db0"}),
        )
        .await;
    let (status, json) = broker
        .rpc(
            "AdminService/CreateQueue",
            json!({"name": "q", "config": {}, "database": "main"}),
        )
        .await;
    assert_refused(status, &json, 400, "invalid_argument");
}

/// One call stays within the Free plan's 50 subrequests: ten chunks of 128
/// (four requests each, 40 in all), then it answers what it moved and the
/// next call goes on (docs/databases.md).
#[tokio::test]
async fn a_redrive_across_databases_stops_within_its_request_budget() {
    let deployment = Deployment::new(2);
    let broker = deployment.isolate();
    let (src, dst) = deployment.apart();
    broker
        .ok(
            "AdminService/CreateQueue",
            json!({"name": src, "config": {"max_delivery_count": 1}}),
        )
        .await;
    broker.create(&dst).await;
    // 1,300 dead letters: every lease runs out on its only delivery.
    for _ in 0..13 {
        let batch: Vec<Value> = (0..100).map(|_| json!({"body": b64("x")})).collect();
        broker
            .ok(
                "QueueService/Send",
                json!({"queue": src, "messages": batch}),
            )
            .await;
        broker
            .ok(
                "QueueService/Receive",
                json!({"queue": src, "max_messages": 100}),
            )
            .await;
    }
    deployment.clock.advance(60_000);
    assert_eq!(broker.dead_lettered(&src).await, 1_300);
    let before = deployment.requests();
    let redrive = json!({"queue": src, "target": dst});
    let first = broker.ok("AdminService/Redrive", redrive.clone()).await;
    assert_eq!(first, json!({"moved": 1_280}));
    assert_eq!(deployment.requests_since(&before).iter().sum::<u64>(), 40);
    let second = broker.ok("AdminService/Redrive", redrive).await;
    assert_eq!(second, json!({"moved": 20}));
    let stats = broker.ok("QueueService/Stats", json!({"queue": dst})).await;
    assert_eq!(stats["active"], 1_300);
}

/// Messages an interrupted Redrive left bound for another queue, deleted
/// since, go back to the dead letters; the Redrive asked for goes on and
/// moves them too.
#[tokio::test]
async fn messages_left_bound_for_a_deleted_queue_go_back_and_the_redrive_goes_on() {
    let deployment = Deployment::new(2);
    let (broker, src, dst) = deployment.dead_letters_apart(2).await;
    let home = deployment.chosen(&dst);
    // Another queue beside `dst`.
    let beside = json!({"name": "gone", "config": {}, "database": deployment.names[home]});
    broker.ok("AdminService/CreateQueue", beside).await;
    deployment.dbs[home].refuse_after(0);
    let (status, _) = broker
        .rpc(
            "AdminService/Redrive",
            json!({"queue": src, "target": "gone"}),
        )
        .await;
    assert_eq!(status, 503);
    deployment.dbs[home].lose_answers_after(-1);
    assert_eq!(deployment.relay_rows().await, (2, 0));
    let listed = broker.ok("AdminService/ListQueues", json!({})).await;
    let generation = listed["queues"]
        .as_array()
        .and_then(|qs| qs.iter().find(|q| q["name"] == "gone"))
        .map(|q| q["generation"].clone())
        .expect("listed");
    broker
        .ok(
            "AdminService/DeleteQueue",
            json!({"name": "gone", "generation": generation}),
        )
        .await;
    assert_eq!(broker.redrive(&src, &dst).await, (200, json!({"moved": 2})));
    assert_eq!(broker.drain(&dst).await, ["m0", "m1"]);
    assert_eq!(deployment.relay_rows().await, (0, 0));
}

#[tokio::test]
async fn a_redrive_from_a_missing_queue_into_another_database_is_404() {
    let deployment = Deployment::new(3);
    let broker = deployment.isolate();
    // A name never created is answered by the catalog (database 0): the
    // target must live elsewhere for the Redrive to span two databases.
    let dst = names(30)
        .into_iter()
        .find(|n| deployment.chosen(n) != 0)
        .expect("a name outside the catalog");
    broker.create(&dst).await;
    let (status, json) = broker
        .rpc(
            "AdminService/Redrive",
            json!({"queue": "never-created", "target": dst}),
        )
        .await;
    assert_refused(status, &json, 404, "not_found");
}
