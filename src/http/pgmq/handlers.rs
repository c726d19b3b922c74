//! One arm per pgmq route: validate (422 / 400), one engine call, encode.

use serde_json::json;

use super::routes::{Handler, Params, PgmqRoute};
use super::{error, Body, Config, Response};
use crate::engine::{Engine, Waiter};
use crate::http::Databases;
use crate::store::Transport;
use crate::wire::pgmq::{self as wire, validate, PgmqCode, PgmqError, ReadKind};

/// A matched, authorized request.
pub(super) struct Call<'a, W> {
    pub route: &'a PgmqRoute,
    pub params: &'a Params,
    pub query: &'a str,
    pub config: &'a Config,
    pub waiter: &'a W,
}

/// `/health` and `/v1/health`: never touch the database.
pub(super) fn health(auth_enabled: bool) -> Response {
    Response::json(
        200,
        json!({
            "status": "ok",
            "version": env!("CARGO_PKG_VERSION"),
            "auth": if auth_enabled { "enabled" } else { "disabled" },
        })
        .to_string(),
    )
}

/// The public routes: health, and readiness (one ping of every database,
/// at once).
pub(super) async fn public<T: Transport>(
    handler: Handler,
    config: &Config,
    databases: &Databases<T>,
) -> Response {
    match handler {
        Handler::Ready => match databases.each(Engine::pgmq_ping).await {
            Ok(_) => Response::json(200, json!({"status": "ok"}).to_string()),
            Err(e) => error(&PgmqError::new(
                PgmqCode::DependencyUnavailable,
                format!("the database did not answer: {}", PgmqError::from(e).body()),
            )),
        },
        _ => health(config.auth_enabled()),
    }
}

impl<W: Waiter> Call<'_, W> {
    pub(super) async fn serve<T: Transport>(
        &self,
        databases: &Databases<T>,
        body: impl Body,
    ) -> Response {
        let (status, result) = match self.route.handler {
            Handler::Health | Handler::Ready => {
                return public(self.route.handler, self.config, databases).await
            }
            Handler::CreateQueue => (201, self.create(databases).await),
            Handler::ListQueues => (200, list(databases).await),
            Handler::MetricsAll => (200, metrics_all(databases).await),
            handler => match databases.of(self.queue()).await {
                Err(e) => (200, Err(e.into())),
                Ok(engine) => match handler {
                    Handler::Send | Handler::SendBatch => (201, self.send(engine, body).await),
                    Handler::DropQueue => (204, self.drop_queue(engine).await),
                    Handler::DeleteOne | Handler::ArchiveOne => (204, self.one_by_id(engine).await),
                    _ => (200, self.other(engine, body).await),
                },
            },
        };
        match result {
            Ok(body) if status == 204 => Response::new(204, Vec::new(), body.into_bytes()),
            Ok(body) => Response::json(status, body),
            Err(e) => error(&e),
        }
    }

    fn queue(&self) -> &str {
        &self.params.queue
    }

    async fn read_body(&self, body: impl Body) -> Result<Vec<u8>, PgmqError> {
        body.read(self.config.max_request_bytes)
            .await
            .map_err(|e| PgmqError::new(PgmqCode::PayloadTooLarge, e.message))
    }

    async fn create<T: Transport>(&self, databases: &Databases<T>) -> Result<String, PgmqError> {
        let unlogged = query_param(self.query, "unlogged");
        let unlogged = validate::query_bool("unlogged", unlogged.as_deref())?;
        wire::check_queue_name(self.queue())?;
        let engine = databases.placing(self.queue()).await?;
        engine.pgmq_create(self.queue()).await?;
        Ok(json!({"queue_name": self.queue(), "unlogged": unlogged}).to_string())
    }

    async fn drop_queue<T: Transport>(&self, engine: &Engine<T>) -> Result<String, PgmqError> {
        engine.pgmq_drop(self.queue()).await?;
        Ok(String::new())
    }

    async fn send<T: Transport>(
        &self,
        engine: &Engine<T>,
        body: impl Body,
    ) -> Result<String, PgmqError> {
        let bytes = self.read_body(body).await?;
        let caps = self.config.pgmq.caps;
        if self.route.handler == Handler::Send {
            let request = wire::send(self.queue(), &bytes)?;
            drop(bytes);
            let ids = engine
                .pgmq_send(&request)
                .await
                .map_err(PgmqError::from_send)?;
            let id = ids.first().copied().ok_or_else(|| {
                PgmqError::new(PgmqCode::SendFailed, "send returned no message id")
            })?;
            Ok(json!({ "msg_id": id }).to_string())
        } else {
            let request = wire::send_batch(self.queue(), &bytes, caps)?;
            drop(bytes);
            if request.messages.is_empty() {
                // Nothing to write; the queue must still exist.
                engine.pgmq_metrics(self.queue()).await?;
                return Ok(json!({ "msg_ids": [] }).to_string());
            }
            let ids = engine
                .pgmq_send(&request)
                .await
                .map_err(PgmqError::from_send)?;
            Ok(json!({ "msg_ids": ids }).to_string())
        }
    }

    async fn one_by_id<T: Transport>(&self, engine: &Engine<T>) -> Result<String, PgmqError> {
        let id = validate::path_int("msg_id", &self.params.msg_id)?;
        let done = if self.route.handler == Handler::ArchiveOne {
            engine.pgmq_archive(self.queue(), &[id]).await?
        } else {
            engine.pgmq_delete(self.queue(), &[id]).await?
        };
        if done.is_empty() {
            return Err(PgmqError::new(
                PgmqCode::MessageNotFound,
                format!("Message {id} does not exist"),
            ));
        }
        Ok(String::new())
    }

    async fn other<T: Transport>(
        &self,
        engine: &Engine<T>,
        body: impl Body,
    ) -> Result<String, PgmqError> {
        let caps = self.config.pgmq.caps;
        let queue = self.queue();
        match self.route.handler {
            Handler::Purge => {
                let purged = engine.pgmq_purge(queue).await?;
                Ok(json!({ "purged": purged }).to_string())
            }
            Handler::Metrics => {
                Ok(wire::metrics_json(&engine.pgmq_metrics(queue).await?).to_string())
            }
            Handler::Read | Handler::ReadPoll | Handler::Pop => {
                let kind = match self.route.handler {
                    Handler::Read => ReadKind::Read,
                    Handler::ReadPoll => ReadKind::Poll,
                    _ => ReadKind::Pop,
                };
                let bytes = self.read_body(body).await?;
                let request = wire::read(queue, &bytes, kind, caps)?;
                let messages = engine.pgmq_read(&request, self.waiter).await?;
                Ok(wire::messages_json(&messages))
            }
            Handler::DeleteBatch | Handler::ArchiveBatch => {
                let bytes = self.read_body(body).await?;
                let ids = wire::msg_ids(&bytes)?;
                let done = if self.route.handler == Handler::ArchiveBatch {
                    engine.pgmq_archive(queue, &ids).await?
                } else {
                    engine.pgmq_delete(queue, &ids).await?
                };
                Ok(json!({ "msg_ids": done }).to_string())
            }
            Handler::SetVt => {
                let id = validate::path_int("msg_id", &self.params.msg_id)?;
                let bytes = self.read_body(body).await?;
                let vt = wire::set_vt(&bytes)?;
                let message = engine.pgmq_set_vt(queue, id, vt).await.map_err(|e| {
                    match PgmqError::from(e) {
                        PgmqError::App {
                            code: PgmqCode::MessageNotFound,
                            ..
                        } => PgmqError::new(
                            PgmqCode::MessageNotFound,
                            format!("Message {id} does not exist"),
                        ),
                        other => other,
                    }
                })?;
                Ok(wire::message_json(&message))
            }
            _ => Err(PgmqError::new(PgmqCode::NotFound, "no such route")),
        }
    }
}

/// `GET /v1/queues` over every database: the queues in order of creation,
/// as one database lists them.
async fn list<T: Transport>(databases: &Databases<T>) -> Result<String, PgmqError> {
    let mut queues: Vec<_> = databases.gather(Engine::pgmq_list).await?;
    queues.sort_by(|a, b| (a.created_at_ms, &a.name).cmp(&(b.created_at_ms, &b.name)));
    Ok(wire::queues_json(&queues))
}

/// `GET /v1/metrics` over every database, in name order.
async fn metrics_all<T: Transport>(databases: &Databases<T>) -> Result<String, PgmqError> {
    let mut all: Vec<_> = databases.gather(Engine::pgmq_metrics_all).await?;
    all.sort_by(|a, b| a.queue_name.cmp(&b.queue_name));
    let list: Vec<_> = all.iter().map(wire::metrics_json).collect();
    Ok(json!({ "queues": list }).to_string())
}

/// The first value of query parameter `name` (no decoding needed for
/// the dialect's only parameter, a boolean).
fn query_param(query: &str, name: &str) -> Option<String> {
    query
        .split('&')
        .filter_map(|pair| pair.split_once('=').or(Some((pair, ""))))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_owned())
}
