//! One function per RPC: decode the wire request, call the engine, encode
//! the wire response. Handlers stay short; errors convert through the wire
//! error table.

use serde::Serialize;

use super::auth::Principal;
use super::config::Config;
use super::routes::Rpc;
use super::Databases;
use super::Isolate;
use crate::engine::{
    compile_filter, Effects, Engine, EngineError, EntityCounts, KeyCheck, KeyCopy, KeySort,
    KeyState, QueueConfigInput, Settlement, Waiter,
};
use crate::observe::{classify, Collection};
use crate::store::migrate::SCHEMA_VERSION;
use crate::store::Transport;
use crate::wire::admin::{
    CreateQueueRequest, DeleteQueueRequest, DeleteQueueResponse, Empty, ListQueuesResponse,
    ListSubscriptionsResponse, PurgeRequest, PurgeResponse, QueueOut, RedriveRequest,
    RedriveResponse, StatusResponse, SubscribeRequest, TestFilterRequest, TestFilterResponse,
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
    databases: &Databases<T>,
    rpc: Rpc,
    body: Vec<u8>,
    context: &Context<'_, W>,
) -> Result<String, ApiError> {
    let waiter = context.waiter;
    let catalog = databases.catalog();
    match rpc {
        Rpc::Send | Rpc::Schedule => {
            let request: SendRequest = decode(&body)?;
            // The decoded bodies replace the request bytes: holding both
            // through the database call would double the peak.
            drop(body);
            let engine = databases.of(&request.queue).await?;
            let seq_numbers = engine.send(&request.into()).await?;
            json(&SendResponse { seq_numbers })
        }
        Rpc::Receive => {
            let request: ReceiveRequest = decode(&body)?;
            let engine = databases.of(&request.queue).await?;
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
            let engine = databases.of(&request.queue).await?;
            engine.settle(&request.target(), &how).await?;
            json(&OkResponse { ok: true })
        }
        Rpc::Renew => {
            let request: SettleRequest = decode(&body)?;
            let engine = databases.of(&request.queue).await?;
            engine.renew(&request.target()).await?;
            json(&OkResponse { ok: true })
        }
        Rpc::CompleteBatch | Rpc::RenewBatch => {
            let request: BatchItemsRequest = decode(&body)?;
            let items = request.items();
            let engine = databases.of(&request.queue).await?;
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
            let engine = databases.of(&request.queue).await?;
            let messages = engine
                .receive_deferred(&request.queue, &request.seq_numbers)
                .await?;
            json(&ReceiveResponse {
                messages: messages.into_iter().map(Into::into).collect(),
            })
        }
        Rpc::Cancel => {
            let request: CancelRequest = decode(&body)?;
            let engine = databases.of(&request.queue).await?;
            engine.cancel(&request.queue, request.seq_number).await?;
            json(&OkResponse { ok: true })
        }
        Rpc::Peek => {
            let request: PeekRequest = decode(&body)?;
            let engine = databases.of(&request.queue).await?;
            let messages = engine.peek(&request.into()).await?;
            json(&PeekResponse {
                messages: messages.into_iter().map(Into::into).collect(),
            })
        }
        Rpc::Stats => {
            let request: StatsRequest = decode(&body)?;
            let stats = databases
                .of(&request.queue)
                .await?
                .stats(&request.queue)
                .await?;
            json(&StatsResponse::from(stats))
        }
        Rpc::CreateQueue => {
            let request: CreateQueueRequest = decode(&body)?;
            let config: QueueConfigInput = request.config.unwrap_or_default().into();
            // A refused configuration places nothing.
            config.check()?;
            let engine = databases
                .placing_in(&request.name, &request.database)
                .await?;
            engine.create_queue(&request.name, &config).await?;
            json(&Empty {})
        }
        Rpc::Redrive => {
            let request: RedriveRequest = decode(&body)?;
            let moved = databases.redrive(&request.into(), waiter).await?;
            json(&RedriveResponse { moved })
        }
        Rpc::Purge => {
            let request: PurgeRequest = decode(&body)?;
            let engine = databases.of(&request.queue).await?;
            let purged = engine
                .purge(&request.queue, request.max, request.older_than_ms)
                .await?;
            json(&PurgeResponse { purged })
        }
        Rpc::ListQueues => {
            let each = databases.each(Engine::list_queues).await?;
            // Several databases: each queue says which holds it.
            let several = each.len() > 1;
            let mut queues: Vec<QueueOut> = each
                .into_iter()
                .zip(databases.names())
                .flat_map(|(queues, database)| {
                    queues.into_iter().map(move |q| QueueOut {
                        database: several.then(|| database.clone()),
                        ..q.into()
                    })
                })
                .collect();
            queues.sort_by(|a, b| a.name.cmp(&b.name));
            json(&ListQueuesResponse { queues })
        }
        Rpc::Subscribe => {
            let request: SubscribeRequest = decode(&body)?;
            let expr = request.filter.map(|f| f.expr).unwrap_or_default();
            // A refused filter places nothing.
            compile_filter(&expr)?;
            let engine = databases
                .placing_beside(&request.name, &request.topic)
                .await?;
            engine
                .subscribe(&request.topic, &request.name, &expr)
                .await?;
            json(&Empty {})
        }
        Rpc::ListSubscriptions => {
            let mut subscriptions: Vec<_> = databases.gather(Engine::list_subscriptions).await?;
            subscriptions.sort_by(|a, b| (&a.topic, &a.name).cmp(&(&b.topic, &b.name)));
            json(&ListSubscriptionsResponse {
                subscriptions: subscriptions.into_iter().map(Into::into).collect(),
            })
        }
        Rpc::TestFilter => {
            let request: TestFilterRequest = decode(&body)?;
            let sample = request.sample(catalog.clock().wall_ms());
            let result = catalog.test_filter(&request.expr, sample.as_ref());
            json(&TestFilterResponse::from(result))
        }
        Rpc::DeleteQueue => {
            let request: DeleteQueueRequest = decode(&body)?;
            let engine = databases.of(&request.name).await?;
            engine
                .delete_queue(&request.name, &request.generation)
                .await?;
            json(&DeleteQueueResponse { deleted: true })
        }
        Rpc::Status => status(databases, context).await,
        Rpc::Observe => {
            let _: ObserveRequest = decode(&body)?;
            json(&observe(databases, context).await?)
        }
        Rpc::CreateKey => {
            let request: CreateKeyRequest = decode(&body)?;
            let created = catalog.create_key(&request.into()).await?;
            // Every database checks the key itself (docs/databases.md).
            let copy = KeyCopy::of(&created);
            databases.copy_to_others(|e| e.copy_key(&copy)).await?;
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
            let page = catalog
                .list_keys(&request.after_id, request.limit, sort)
                .await?;
            json(&ListKeysResponse::from(page))
        }
        Rpc::RevokeKey => {
            let request: RevokeKeyRequest = decode(&body)?;
            catalog.revoke_key(&request.id).await?;
            databases
                .copy_to_others(|e| e.revoke_copy(&request.id))
                .await?;
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
    databases: &Databases<T>,
    context: &Context<'_, W>,
) -> Result<String, ApiError> {
    let started = context.waiter.elapsed_ms();
    let counts = databases.each(Engine::entity_counts).await.map(|each| {
        each.into_iter()
            .fold(EntityCounts::default(), |sum, counts| EntityCounts {
                queues: sum.queues + counts.queues,
                subscriptions: sum.subscriptions + counts.subscriptions,
            })
    });
    let ping_ms = context.waiter.elapsed_ms().saturating_sub(started) as i64;
    let (ping_ms, counts) = match counts {
        Ok(counts) => (ping_ms, counts),
        Err(EngineError::CredentialRejected) => return Err(EngineError::CredentialRejected.into()),
        Err(_) => (-1, Default::default()),
    };
    let uptime_ms = databases.catalog().clock().wall_ms() - context.isolate.started_at_ms;
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
        writes: if context.isolate.writes_paused() {
            "paused"
        } else {
            "accepting"
        },
    })
}

/// One observation (docs/http-api.md#rpcs): the isolate's counters plus one database
/// collection, which doubles as the read probe. A failed collection is
/// reported as unavailable, never as zeros; a refused managed key is not a
/// collection failure but the request's answer.
pub async fn observe<T: Transport, W: Waiter>(
    databases: &Databases<T>,
    context: &Context<'_, W>,
) -> Result<ObserveResponse, ApiError> {
    let started = context.waiter.elapsed_ms();
    // Every database at once, each answer kept: one that fails is named.
    let each = databases
        .each(|engine| async { Ok(engine.gauges().await) })
        .await?;
    let seconds = context.waiter.elapsed_ms().saturating_sub(started) as f64 / 1000.0;
    let mut gauges = Vec::new();
    let mut failures = Vec::new();
    for answer in each {
        match answer {
            Ok(more) => {
                gauges.extend(more);
                failures.push(None);
            }
            Err(EngineError::CredentialRejected) => {
                return Err(EngineError::CredentialRejected.into())
            }
            Err(EngineError::Store(e)) => failures.push(Some(classify(&e).to_owned())),
            Err(_) => failures.push(Some("other".to_owned())),
        }
    }
    gauges.sort_by(|a, b| a.queue.cmp(&b.queue));
    // The whole collection fails with any database: a partial list would
    // read as queues that are not there (docs/databases.md).
    let result = match failures.iter().flatten().next() {
        Some(failure) => Err(failure.clone()),
        None => Ok(gauges),
    };
    let several = failures.len() > 1;
    let collection = Collection {
        ping_seconds: result.is_ok().then_some(seconds),
        result,
        duration_seconds: seconds,
        schema_version: SCHEMA_VERSION.to_string(),
        databases: match several {
            true => databases.names().iter().cloned().zip(failures).collect(),
            false => Vec::new(),
        },
    };
    // This request's own storage calls so far belong in its answer.
    let registry = &context.isolate.registry;
    registry.record_effects(context.effects.take());
    Ok(registry.observe(
        context.principal.access_name(),
        &collection,
        databases.catalog().clock().wall_ms(),
    ))
}
