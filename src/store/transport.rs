//! The I/O seam: one HTTP POST of a Hrana pipeline, implemented over
//! `worker::Fetch` in the Worker and over a native client (or an in-process
//! server) elsewhere.

use std::future::Future;

/// What the database's HTTP endpoint answered.
#[derive(Debug, Clone)]
pub struct HttpReply {
    pub status: u16,
    pub body: Vec<u8>,
}

/// A failed exchange, split by what it proves about the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransportError {
    /// The request provably never reached the server (connection refused,
    /// name resolution failed): nothing ran, so any request may be retried.
    NotSent(String),
    /// The request may have reached the server but no complete answer came
    /// back (reset, timeout, truncated body): a write may have committed.
    AnswerLost(String),
}

/// Sends one pipeline request body to `{database}/v2/pipeline` and returns the
/// raw reply. Implementations bound every call with a timeout. The body is
/// borrowed: a program's retries resend the one encoding instead of copying
/// a pipeline that can be as large as the request cap.
pub trait Transport {
    fn send_pipeline(&self, body: &str) -> impl Future<Output = Result<HttpReply, TransportError>>;

    /// Waits between retry attempts on the platform's own timer.
    fn pause(&self, millis: u32) -> impl Future<Output = ()>;
}

impl<T: Transport> Transport for &T {
    fn send_pipeline(&self, body: &str) -> impl Future<Output = Result<HttpReply, TransportError>> {
        (**self).send_pipeline(body)
    }

    fn pause(&self, millis: u32) -> impl Future<Output = ()> {
        (**self).pause(millis)
    }
}
