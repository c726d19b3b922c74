//! A blocking native HTTP transport (ureq), for the `mqlite-edge-migrate`
//! command and native tooling. The Worker uses `worker::Fetch` instead.

use std::time::Duration;

use super::{pipeline_url, HttpReply, Transport, TransportError};

pub struct HttpTransport {
    url: String,
    auth_token: Option<String>,
    agent: ureq::Agent,
}

impl HttpTransport {
    /// `database_url` is `http(s)://…` or `libsql://…`.
    pub fn new(database_url: &str, auth_token: Option<String>, timeout: Duration) -> Self {
        HttpTransport {
            url: pipeline_url(database_url),
            auth_token,
            agent: ureq::AgentBuilder::new().timeout(timeout).build(),
        }
    }
}

impl Transport for HttpTransport {
    async fn send_pipeline(&self, body: &str) -> Result<HttpReply, TransportError> {
        let mut request = self
            .agent
            .post(&self.url)
            .set("Content-Type", "application/json");
        if let Some(token) = &self.auth_token {
            request = request.set("Authorization", &format!("Bearer {token}"));
        }
        let response = match request.send_string(body) {
            Ok(r) => r,
            Err(ureq::Error::Status(_, r)) => r,
            Err(ureq::Error::Transport(t)) => {
                let never_sent = matches!(
                    t.kind(),
                    ureq::ErrorKind::Dns
                        | ureq::ErrorKind::ConnectionFailed
                        | ureq::ErrorKind::InvalidUrl
                );
                let message = t.to_string();
                return Err(if never_sent {
                    TransportError::NotSent(message)
                } else {
                    TransportError::AnswerLost(message)
                });
            }
        };
        let status = response.status();
        let mut body = Vec::new();
        std::io::Read::read_to_end(&mut response.into_reader(), &mut body)
            .map_err(|e| TransportError::AnswerLost(format!("answer cut short: {e}")))?;
        Ok(HttpReply { status, body })
    }

    async fn pause(&self, millis: u32) {
        std::thread::sleep(Duration::from_millis(millis.into()));
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    /// The back-off between retries (`Store`'s 40 ms more each attempt)
    /// really waits: a pause returns no sooner than asked.
    #[test]
    fn a_pause_waits_at_least_what_it_was_asked() {
        let transport = HttpTransport::new("http://127.0.0.1:9", None, Duration::from_secs(1));
        let started = Instant::now();
        pollster::block_on(transport.pause(30));
        assert!(started.elapsed() >= Duration::from_millis(30));
    }
}
