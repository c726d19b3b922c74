//! The blocking client: one typed method per RPC, each one `POST <base><route>` with a
//! JSON body (mqlite-clients.md §1.2), every call bounded by a timeout.

use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::types::*;
use crate::{Endpoint, Error, ErrorCode};

/// How long a connection attempt may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long any call may take besides the long-poll it asked for.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// The status and body of an answer, whatever the status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawAnswer {
    pub status: u16,
    pub body: String,
    pub retry_after: Option<String>,
}

/// A connection to one broker. Cheap to clone; clones share the connection pool.
#[derive(Clone)]
pub struct Client {
    base: String,
    token: String,
    agent: ureq::Agent,
    call_timeout: Duration,
}

macro_rules! rpcs {
    ($($(#[$doc:meta])* $name:ident($request:ty) -> $response:ty = $route:literal;)*) => {
        $(
            $(#[$doc])*
            pub fn $name(&self, request: &$request) -> Result<$response, Error> {
                self.call($route, request, self.call_timeout)
            }
        )*
    };
}

impl Client {
    /// A client for `endpoint` (an `http(s)://` URL or an `mqlite://` DSN). A non-empty
    /// `token` replaces the DSN's own.
    pub fn open(endpoint: &str, token: &str) -> Result<Client, Error> {
        let parsed = Endpoint::parse(endpoint)?;
        let token = if token.is_empty() {
            parsed.token
        } else {
            token.to_owned()
        };
        Ok(Client::new(&parsed.base, &token))
    }

    /// A client for the base URL as given (no parsing) and this token (empty: none).
    pub fn new(base: &str, token: &str) -> Client {
        Client {
            base: base.trim_end_matches('/').to_owned(),
            token: token.to_owned(),
            agent: ureq::AgentBuilder::new()
                .timeout_connect(CONNECT_TIMEOUT)
                .build(),
            call_timeout: CALL_TIMEOUT,
        }
    }

    /// Bounds every call other than a long-poll's wait (default [`CALL_TIMEOUT`]).
    pub fn with_call_timeout(mut self, timeout: Duration) -> Client {
        self.call_timeout = timeout;
        self
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    /// POSTs `body` to `route` and returns whatever answered; only "no answer" is an
    /// error. The MCP server forwards broker answers verbatim through this.
    pub fn post_raw(&self, route: &str, body: &str, timeout: Duration) -> Result<RawAnswer, Error> {
        let mut request = self
            .agent
            .post(&format!("{}{route}", self.base))
            .timeout(timeout)
            .set("Content-Type", "application/json");
        if !self.token.is_empty() {
            request = request.set("Authorization", &format!("Bearer {}", self.token));
        }
        let response = match request.send_string(body) {
            Ok(r) | Err(ureq::Error::Status(_, r)) => r,
            Err(ureq::Error::Transport(t)) => return Err(Error::Transport(t.to_string())),
        };
        let status = response.status();
        let retry_after = response.header("Retry-After").map(str::to_owned);
        let body = response
            .into_string()
            .map_err(|e| Error::Transport(format!("reading the answer: {e}")))?;
        Ok(RawAnswer {
            status,
            body,
            retry_after,
        })
    }

    fn call<Req: Serialize, Resp: DeserializeOwned>(
        &self,
        route: &str,
        request: &Req,
        timeout: Duration,
    ) -> Result<Resp, Error> {
        let body = serde_json::to_string(request).map_err(|e| Error::Invalid(e.to_string()))?;
        let answer = self.post_raw(route, &body, timeout)?;
        if (200..300).contains(&answer.status) {
            return serde_json::from_str(&answer.body)
                .map_err(|e| Error::Decode(format!("{route}: {e}")));
        }
        Err(error_of(route, answer))
    }

    rpcs! {
        /// Send: one entry per message in `seq_numbers`.
        send(SendRequest) -> SendResponse = "/mqlite.v1.QueueService/Send";
        /// Schedule: Send with a delivery time.
        schedule(SendRequest) -> SendResponse = "/mqlite.v1.QueueService/Schedule";
        complete_raw(SettleRequest) -> OkResponse = "/mqlite.v1.QueueService/Complete";
        abandon_raw(SettleRequest) -> OkResponse = "/mqlite.v1.QueueService/Abandon";
        reject_raw(SettleRequest) -> OkResponse = "/mqlite.v1.QueueService/Reject";
        defer_raw(SettleRequest) -> OkResponse = "/mqlite.v1.QueueService/Defer";
        renew_raw(SettleRequest) -> OkResponse = "/mqlite.v1.QueueService/Renew";
        /// One result per item, positional; per-item failures are `ok: false`.
        complete_batch(BatchRequest) -> BatchResponse = "/mqlite.v1.QueueService/CompleteBatch";
        /// At most 512 items; each renewed item reports its committed deadline.
        renew_batch(BatchRequest) -> BatchResponse = "/mqlite.v1.QueueService/RenewBatch";
        receive_deferred(ReceiveDeferredRequest) -> MessagesResponse = "/mqlite.v1.QueueService/ReceiveDeferred";
        cancel(CancelRequest) -> OkResponse = "/mqlite.v1.QueueService/Cancel";
        peek(PeekRequest) -> MessagesResponse = "/mqlite.v1.QueueService/Peek";
        stats(QueueRequest) -> Stats = "/mqlite.v1.QueueService/Stats";
        /// An upsert: every configuration member not given goes back to its default.
        create_queue(CreateQueueRequest) -> Empty = "/mqlite.v1.AdminService/CreateQueue";
        delete_queue(DeleteQueueRequest) -> DeleteQueueResponse = "/mqlite.v1.AdminService/DeleteQueue";
        list_queues(NoArguments) -> ListQueuesResponse = "/mqlite.v1.AdminService/ListQueues";
        subscribe(SubscribeRequest) -> Empty = "/mqlite.v1.AdminService/Subscribe";
        list_subscriptions(NoArguments) -> ListSubscriptionsResponse = "/mqlite.v1.AdminService/ListSubscriptions";
        test_filter(TestFilterRequest) -> TestFilterResponse = "/mqlite.v1.AdminService/TestFilter";
        redrive(RedriveRequest) -> RedriveResponse = "/mqlite.v1.AdminService/Redrive";
        purge(PurgeRequest) -> PurgeResponse = "/mqlite.v1.AdminService/Purge";
        status(NoArguments) -> Status = "/mqlite.v1.AdminService/Status";
        observe(NoArguments) -> Observation = "/mqlite.v1.AdminService/Observe";
        create_key(CreateKeyRequest) -> CreateKeyResponse = "/mqlite.v1.AuthService/CreateKey";
        list_keys(ListKeysRequest) -> ListKeysResponse = "/mqlite.v1.AuthService/ListKeys";
        revoke_key(RevokeKeyRequest) -> OkResponse = "/mqlite.v1.AuthService/RevokeKey";
    }

    /// Receive: the call's timeout is its long-poll wait plus the usual bound.
    pub fn receive(&self, request: &ReceiveRequest) -> Result<MessagesResponse, Error> {
        let wait = Duration::from_millis(request.wait_time_ms.clamp(0, 20_000) as u64);
        self.call(
            "/mqlite.v1.QueueService/Receive",
            request,
            wait + self.call_timeout,
        )
    }

    /// Complete; a `200 {"ok":false}` is lock lost too.
    pub fn complete(&self, request: &SettleRequest) -> Result<(), Error> {
        settled(self.complete_raw(request)?)
    }

    /// Abandon (with `delay_ms`); redelivered after the delay.
    pub fn abandon(&self, request: &SettleRequest) -> Result<(), Error> {
        settled(self.abandon_raw(request)?)
    }

    /// Reject (with a reason and description): straight to the dead-letter queue.
    pub fn reject(&self, request: &SettleRequest) -> Result<(), Error> {
        settled(self.reject_raw(request)?)
    }

    /// Defer: kept aside until ReceiveDeferred names it.
    pub fn defer(&self, request: &SettleRequest) -> Result<(), Error> {
        settled(self.defer_raw(request)?)
    }

    /// Renew: the lease again for the queue's lock duration.
    pub fn renew(&self, request: &SettleRequest) -> Result<(), Error> {
        settled(self.renew_raw(request)?)
    }
}

fn settled(answer: OkResponse) -> Result<(), Error> {
    if answer.ok {
        Ok(())
    } else {
        Err(Error::Api {
            status: 200,
            code: ErrorCode::LockLost,
            message: "the broker answered ok:false".into(),
            retry_after_ms: None,
        })
    }
}

/// The error of a non-2xx answer (mqlite-clients.md §1.3).
fn error_of(route: &str, answer: RawAnswer) -> Error {
    #[derive(serde::Deserialize, Default)]
    #[serde(default)]
    struct Envelope {
        code: String,
        message: String,
    }
    let envelope: Envelope = serde_json::from_str(&answer.body).unwrap_or_default();
    if answer.status == 404
        && (envelope.code.is_empty() || envelope.message.starts_with("no such path"))
    {
        return Error::Unsupported {
            route: route.to_owned(),
        };
    }
    Error::Api {
        status: answer.status,
        code: ErrorCode::parse(&envelope.code),
        message: envelope.message,
        retry_after_ms: answer
            .retry_after
            .and_then(|s| s.trim().parse::<i64>().ok())
            .map(|seconds| seconds.saturating_mul(1000)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(status: u16, body: &str) -> RawAnswer {
        RawAnswer {
            status,
            body: body.into(),
            retry_after: Some("2".into()),
        }
    }

    #[test]
    fn a_no_such_path_404_means_the_broker_lacks_the_route() {
        let e = error_of(
            "/x",
            answer(404, r#"{"code":"not_found","message":"no such path: /x"}"#),
        );
        assert_eq!(e, Error::Unsupported { route: "/x".into() });
        let e = error_of(
            "/x",
            answer(
                404,
                r#"{"code":"not_found","message":"mqlite: queue not found"}"#,
            ),
        );
        assert_eq!(e.code(), Some(&ErrorCode::NotFound));
    }

    #[test]
    fn an_error_keeps_its_code_and_retry_after() {
        let e = error_of(
            "/x",
            answer(503, r#"{"code":"unavailable","message":"paused"}"#),
        );
        assert_eq!(
            e,
            Error::Api {
                status: 503,
                code: ErrorCode::Unavailable,
                message: "paused".into(),
                retry_after_ms: Some(2000),
            }
        );
        let e = error_of("/x", answer(502, "<html>bad gateway</html>"));
        assert_eq!(e.code(), Some(&ErrorCode::Other(String::new())));
    }

    #[test]
    fn ok_false_is_lock_lost() {
        assert!(settled(OkResponse { ok: false })
            .unwrap_err()
            .is_lock_lost());
        assert!(settled(OkResponse { ok: true }).is_ok());
    }
}
