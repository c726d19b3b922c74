//! One function per RPC: decode the wire request, call the engine, encode
//! the wire response. Handlers stay short; errors convert through the wire
//! error table.

use serde::Serialize;

use super::auth::Principal;
use super::config::Config;
use super::routes::Rpc;
use super::Isolate;
use crate::engine::{
    Effects, Engine, EngineError, KeyCheck, KeySort, KeyState, Settlement, Waiter,
};
use crate::observe::{classify, Collection};
use crate::store::migrate::SCHEMA_VERSION;
use crate::store::{Transport, WriteState};
use crate::wire::admin::{
    CreateQueueRequest, DeleteQueueRequest, DeleteQueueResponse, Empty, ListQueuesResponse,
    ListSubscriptionsResponse, PurgeRequest, PurgeResponse, RedriveRequest, RedriveResponse,
    StatusResponse, SubscribeRequest, TestFilterRequest, TestFilterResponse,
};
use crate::wire::keys::{
    CreateKeyRequest, CreateKeyResponse, ListKeysRequest, ListKeysResponse, RevokeKeyRequest,
};
use crate::wire::observe::{ObserveRequest, ObserveResponse};
use crate::wire::queue::{
    BatchItemsRequest, BatchResultsResponse, CancelRequest, OkResponse, PeekRequest, PeekResponse,
    ReceiveDeferredRequest, ReceiveRequest, ReceiveResponse, SendRequest, SendResponse,
    SettleRequest, StatsRequest, StatsResponse,
};
use crate::wire::{decode, ApiError};

/// RPCs that take no request object: their body is never read [quirk].
pub fn reads_body(rpc: Rpc) -> bool {
    !matches!(rpc, Rpc::ListQueues | Rpc::ListSubscriptions | Rpc::Status)
}

/// RPCs answered without any database request (so without a transaction
/// that would check a managed key).
pub fn reaches_database(rpc: Rpc) -> bool {
    !matches!(rpc, Rpc::TestFilter)
}

/// What handlers beyond the engine may need about the request.
pub struct Context<'a, W> {
    pub config: &'a Config,
    pub isolate: &'a Isolate,
    /// The request's journal, which the engine reports to.
    pub effects: &'a Effects,
    pub principal: &'a Principal,
    pub waiter: &'a W,
}

pub async fn call<T: Transport, W: Waiter>(
    engine: &Engine<T>,
    rpc: Rpc,
    body: Vec<u8>,
    context: &Context<'_, W>,
) -> Result<String, ApiError> {
    let waiter = context.waiter;
    match rpc {
        Rpc::Send | Rpc::Schedule => {
            let request: SendRequest = decode(&body)?;
            // The decoded bodies replace the request bytes: holding both
            // through the database call would double the peak.
            drop(body);
            let seq_numbers = engine.send(&request.into()).await?;
            json(&SendResponse { seq_numbers })
        }
        Rpc::Receive => {
            let request: ReceiveRequest = decode(&body)?;
            let (messages, _) = engine.receive(&request.into(), waiter).await?;
            json(&ReceiveResponse {
                messages: messages.into_iter().map(Into::into).collect(),
            })
        }
        Rpc::Complete | Rpc::Abandon | Rpc::Reject | Rpc::Defer => {
            let request: SettleRequest = decode(&body)?;
            let how = match rpc {
                Rpc::Abandon => request.abandon(),
                Rpc::Reject => request.reject(),
                Rpc::Defer => Settlement::Defer,
                _ => Settlement::Complete,
            };
            engine.settle(&request.target(), &how).await?;
            json(&OkResponse { ok: true })
        }
        Rpc::Renew => {
            let request: SettleRequest = decode(&body)?;
            engine.renew(&request.target()).await?;
            json(&OkResponse { ok: true })
        }
        Rpc::CompleteBatch | Rpc::RenewBatch => {
            let request: BatchItemsRequest = decode(&body)?;
            let items = request.items();
            let results = if rpc == Rpc::CompleteBatch {
                engine.complete_batch(&request.queue, &items).await?
            } else {
                engine.renew_batch(&request.queue, &items).await?
            };
            json(&BatchResultsResponse {
                results: results.into_iter().map(Into::into).collect(),
            })
        }
        Rpc::ReceiveDeferred => {
            let request: ReceiveDeferredRequest = decode(&body)?;
            let messages = engine
                .receive_deferred(&request.queue, &request.seq_numbers)
                .await?;
            json(&ReceiveResponse {
                messages: messages.into_iter().map(Into::into).collect(),
            })
        }
        Rpc::Cancel => {
            let request: CancelRequest = decode(&body)?;
            engine.cancel(&request.queue, request.seq_number).await?;
            json(&OkResponse { ok: true })
        }
        Rpc::Peek => {
            let request: PeekRequest = decode(&body)?;
            let messages = engine.peek(&request.into()).await?;
            json(&PeekResponse {
                messages: messages.into_iter().map(Into::into).collect(),
            })
        }
        Rpc::Stats => {
            let request: StatsRequest = decode(&body)?;
            let stats = engine.stats(&request.queue).await?;
            json(&StatsResponse::from(stats))
        }
        Rpc::CreateQueue => {
            let request: CreateQueueRequest = decode(&body)?;
            let config = request.config.unwrap_or_default().into();
            engine.create_queue(&request.name, &config).await?;
            json(&Empty {})
        }
        Rpc::Redrive => {
            let request: RedriveRequest = decode(&body)?;
            let moved = engine.redrive(&request.into(), waiter).await?;
            json(&RedriveResponse { moved })
        }
        Rpc::Purge => {
            let request: PurgeRequest = decode(&body)?;
            let purged = engine
                .purge(&request.queue, request.max, request.older_than_ms)
                .await?;
            json(&PurgeResponse { purged })
        }
        Rpc::ListQueues => {
            let queues = engine.list_queues().await?;
            json(&ListQueuesResponse {
                queues: queues.into_iter().map(Into::into).collect(),
            })
        }
        Rpc::Subscribe => {
            let request: SubscribeRequest = decode(&body)?;
            let expr = request.filter.map(|f| f.expr).unwrap_or_default();
            engine
                .subscribe(&request.topic, &request.name, &expr)
                .await?;
            json(&Empty {})
        }
        Rpc::ListSubscriptions => {
            let subscriptions = engine.list_subscriptions().await?;
            json(&ListSubscriptionsResponse {
                subscriptions: subscriptions.into_iter().map(Into::into).collect(),
            })
        }
        Rpc::TestFilter => {
            let request: TestFilterRequest = decode(&body)?;
            let sample = request.sample(engine.clock().wall_ms());
            let result = engine.test_filter(&request.expr, sample.as_ref());
            json(&TestFilterResponse::from(result))
        }
        Rpc::DeleteQueue => {
            let request: DeleteQueueRequest = decode(&body)?;
            engine
                .delete_queue(&request.name, &request.generation)
                .await?;
            json(&DeleteQueueResponse { deleted: true })
        }
        Rpc::Status => status(engine, context).await,
        Rpc::Observe => {
            let _: ObserveRequest = decode(&body)?;
            json(&observe(engine, context).await?)
        }
        Rpc::CreateKey => {
            let request: CreateKeyRequest = decode(&body)?;
            let created = engine.create_key(&request.into()).await?;
            // This isolate just minted it: its first use needs no lookup.
            if let Some(key) = KeyCheck::from_token(&created.token, created.key.permissions) {
                let state = KeyState::Valid(created.key.permissions);
                context.isolate.keys.learn(*key.digest(), state);
            }
            json(&CreateKeyResponse::from(created))
        }
        Rpc::ListKeys => {
            let request: ListKeysRequest = decode(&body)?;
            let sort = KeySort::parse(&request.sort)?;
            let page = engine
                .list_keys(&request.after_id, request.limit, sort)
                .await?;
            json(&ListKeysResponse::from(page))
        }
        Rpc::RevokeKey => {
            let request: RevokeKeyRequest = decode(&body)?;
            engine.revoke_key(&request.id).await?;
            json(&OkResponse { ok: true })
        }
    }
}

fn json(value: &impl Serialize) -> Result<String, ApiError> {
    serde_json::to_string(value)
        .map_err(|e| ApiError::new(crate::wire::ErrorCode::Internal, e.to_string()))
}

/// Status (docs/http-api.md#rpcs): one read for the ping and the counts; a failed read
/// reports `ping_ms: -1` and zero counts rather than failing the call.
async fn status<T: Transport, W: Waiter>(
    engine: &Engine<T>,
    context: &Context<'_, W>,
) -> Result<String, ApiError> {
    let started = context.waiter.elapsed_ms();
    let counts = engine.entity_counts().await;
    let ping_ms = context.waiter.elapsed_ms().saturating_sub(started) as i64;
    let (ping_ms, counts) = match counts {
        Ok(counts) => (ping_ms, counts),
        Err(EngineError::CredentialRejected) => return Err(EngineError::CredentialRejected.into()),
        Err(_) => (-1, Default::default()),
    };
    let uptime_ms = engine.clock().wall_ms() - context.isolate.started_at_ms;
    json(&StatusResponse {
        version: env!("CARGO_PKG_VERSION"),
        backend: "remote libSQL/Turso",
        remote: true,
        location: context.config.location.clone(),
        schema_version: SCHEMA_VERSION.to_string(),
        ping_ms,
        db_size_bytes: 0,
        queues: counts.queues,
        subscriptions: counts.subscriptions,
        uptime_ms: uptime_ms.max(0),
        auth: context.config.auth_enabled(),
        writes: match context.isolate.write_health.state() {
            WriteState::Accepting => "accepting",
            WriteState::Paused => "paused",
        },
    })
}

/// One observation (docs/http-api.md#rpcs): the isolate's counters plus one database
/// collection, which doubles as the read probe. A failed collection is
/// reported as unavailable, never as zeros; a refused managed key is not a
/// collection failure but the request's answer.
pub async fn observe<T: Transport, W: Waiter>(
    engine: &Engine<T>,
    context: &Context<'_, W>,
) -> Result<ObserveResponse, ApiError> {
    let started = context.waiter.elapsed_ms();
    let gauges = engine.gauges().await;
    let seconds = context.waiter.elapsed_ms().saturating_sub(started) as f64 / 1000.0;
    let result = match gauges {
        Ok(queues) => Ok(queues),
        Err(EngineError::CredentialRejected) => return Err(EngineError::CredentialRejected.into()),
        Err(EngineError::Store(e)) => Err(classify(&e).to_owned()),
        Err(_) => Err("other".to_owned()),
    };
    let collection = Collection {
        ping_seconds: result.is_ok().then_some(seconds),
        result,
        duration_seconds: seconds,
        schema_version: SCHEMA_VERSION.to_string(),
    };
    // This request's own storage calls so far belong in its answer.
    let registry = &context.isolate.registry;
    registry.record_effects(context.effects.take());
    Ok(registry.observe(
        context.principal.access_name(),
        &collection,
        engine.clock().wall_ms(),
    ))
}
