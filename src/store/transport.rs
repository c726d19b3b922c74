//! The I/O seam: one HTTP POST of a Hrana pipeline, implemented over
//! `worker::Fetch` in the Worker and over a native client (or an in-process
//! server) elsewhere.

use std::future::Future;

/// What the database's HTTP endpoint answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpReply {
    pub status: u16,
    pub body: Vec<u8>,
}

/// How a grouped write reached the database (docs/engine.md#group-commit),
/// for Observe and `/metrics`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Carried {
    /// In its own request: group commit off, no coalescer, a member too
    /// large, or the coalescer would not take it.
    Direct,
    /// In its own request because its queue's object said nobody else was
    /// writing the queue (`store::lone`, docs/engine.md#lone-writes).
    Lone,
    /// In one transaction with the other writes of its queue in flight.
    Batch {
        /// Writes the batch carried, itself included (1: it went alone).
        members: u32,
        /// It was the batch's first member: the one that counts the batch,
        /// so batches are counted once whichever isolate sees them.
        first: bool,
        /// Its statements were folded with those of others of its kind
        /// (docs/engine.md#folding).
        folded: bool,
    },
}

/// What a grouped write is grouped on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Group<'a> {
    /// The queue whose writes in flight it may share a transaction with.
    pub queue: &'a str,
    /// Its commit can make messages claimable there (a Send, an Abandon):
    /// a carrier that keeps the queue's wake board wakes the waiters itself
    /// (docs/semantics.md#long-polling).
    pub wakes: bool,
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

impl TransportError {
    /// Classifies a failed fetch by the platform's message: only a fetch
    /// that provably never left is `NotSent` (refused connection, name
    /// resolution, a bad URL, or the platform's subrequest limit, which
    /// refuses the fetch without sending it); anything else may have been
    /// delivered.
    pub fn from_fetch_failure(message: &str) -> TransportError {
        let lower = message.to_ascii_lowercase();
        let never_sent = [
            "connection refused",
            "econnrefused",
            "dns",
            "invalid url",
            "fetch api cannot load",
            "too many subrequests",
        ];
        if never_sent.iter().any(|p| lower.contains(p)) {
            TransportError::NotSent(message.to_owned())
        } else {
            TransportError::AnswerLost(message.to_owned())
        }
    }
}

/// Sends one pipeline request body to `{database}/v2/pipeline` and returns the
/// raw reply. Implementations bound every call with a timeout. The body is
/// borrowed: a program's retries resend the one encoding instead of copying
/// a pipeline that can be as large as the request cap.
pub trait Transport {
    fn send_pipeline(&self, body: &str) -> impl Future<Output = Result<HttpReply, TransportError>>;

    /// Sends a write program's pipeline that may share one transaction with
    /// the other writes on `group.queue` in flight (group commit,
    /// [`super::group`]); the answer is the one it would have had alone,
    /// beside how it was carried. A transport without a coalescer sends it
    /// alone.
    fn send_grouped(
        &self,
        group: Group<'_>,
        body: &str,
    ) -> impl Future<Output = (Result<HttpReply, TransportError>, Carried)> {
        let _ = group;
        async move { (self.send_pipeline(body).await, Carried::Direct) }
    }

    /// Waits between retry attempts on the platform's own timer.
    fn pause(&self, millis: u32) -> impl Future<Output = ()>;
}

impl<T: Transport> Transport for &T {
    fn send_pipeline(&self, body: &str) -> impl Future<Output = Result<HttpReply, TransportError>> {
        (**self).send_pipeline(body)
    }

    fn send_grouped(
        &self,
        group: Group<'_>,
        body: &str,
    ) -> impl Future<Output = (Result<HttpReply, TransportError>, Carried)> {
        (**self).send_grouped(group, body)
    }

    fn pause(&self, millis: u32) -> impl Future<Output = ()> {
        (**self).pause(millis)
    }
}

#[cfg(test)]
mod tests {
    use super::TransportError;

    /// Issue 9 item 3: the subrequest limit refuses a fetch before it is
    /// sent, so a write that meets it is retried, never `outcome_unknown`.
    #[test]
    fn too_many_subrequests_is_never_sent_and_a_reset_may_have_arrived() {
        let over = "Error: Too many subrequests.";
        assert_eq!(
            TransportError::from_fetch_failure(over),
            TransportError::NotSent(over.into())
        );
        let refused = "TypeError: connect ECONNREFUSED 127.0.0.1:1";
        assert_eq!(
            TransportError::from_fetch_failure(refused),
            TransportError::NotSent(refused.into())
        );
        let lost = "Network connection lost.";
        assert_eq!(
            TransportError::from_fetch_failure(lost),
            TransportError::AnswerLost(lost.into())
        );
    }
}
