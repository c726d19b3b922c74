//! One function per RPC: decode the wire request, call the engine, encode
//! the wire response. Handlers stay short; errors convert through the wire
//! error table.

use serde::Serialize;

use super::routes::Rpc;
use crate::engine::Settlement;
use crate::engine::{Engine, Waiter};
use crate::store::Transport;
use crate::wire::admin::{
    CreateQueueRequest, Empty, ListQueuesResponse, PurgeRequest, PurgeResponse, RedriveRequest,
    RedriveResponse,
};
use crate::wire::queue::{
    BatchItemsRequest, BatchResultsResponse, CancelRequest, OkResponse, PeekRequest, PeekResponse,
    ReceiveDeferredRequest, ReceiveRequest, ReceiveResponse, SendRequest, SendResponse,
    SettleRequest, StatsRequest, StatsResponse,
};
use crate::wire::{decode, ApiError};

/// RPCs that take no request object: their body is never read [quirk].
pub fn reads_body(rpc: Rpc) -> bool {
    !matches!(rpc, Rpc::ListQueues)
}

pub async fn call<T: Transport>(
    engine: &Engine<T>,
    rpc: Rpc,
    body: &[u8],
    waiter: &impl Waiter,
) -> Result<String, ApiError> {
    match rpc {
        Rpc::Send | Rpc::Schedule => {
            let request: SendRequest = decode(body)?;
            let seq_numbers = engine.send(&request.into()).await?;
            json(&SendResponse { seq_numbers })
        }
        Rpc::Receive => {
            let request: ReceiveRequest = decode(body)?;
            let (messages, _) = engine.receive(&request.into(), waiter).await?;
            json(&ReceiveResponse {
                messages: messages.into_iter().map(Into::into).collect(),
            })
        }
        Rpc::Complete | Rpc::Abandon | Rpc::Reject | Rpc::Defer => {
            let request: SettleRequest = decode(body)?;
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
            let request: SettleRequest = decode(body)?;
            engine.renew(&request.target()).await?;
            json(&OkResponse { ok: true })
        }
        Rpc::CompleteBatch | Rpc::RenewBatch => {
            let request: BatchItemsRequest = decode(body)?;
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
            let request: ReceiveDeferredRequest = decode(body)?;
            let messages = engine
                .receive_deferred(&request.queue, &request.seq_numbers)
                .await?;
            json(&ReceiveResponse {
                messages: messages.into_iter().map(Into::into).collect(),
            })
        }
        Rpc::Cancel => {
            let request: CancelRequest = decode(body)?;
            engine.cancel(&request.queue, request.seq_number).await?;
            json(&OkResponse { ok: true })
        }
        Rpc::Peek => {
            let request: PeekRequest = decode(body)?;
            let messages = engine.peek(&request.into()).await?;
            json(&PeekResponse {
                messages: messages.into_iter().map(Into::into).collect(),
            })
        }
        Rpc::Stats => {
            let request: StatsRequest = decode(body)?;
            let stats = engine.stats(&request.queue).await?;
            json(&StatsResponse::from(stats))
        }
        Rpc::CreateQueue => {
            let request: CreateQueueRequest = decode(body)?;
            let config = request.config.unwrap_or_default().into();
            engine.create_queue(&request.name, &config).await?;
            json(&Empty {})
        }
        Rpc::Redrive => {
            let request: RedriveRequest = decode(body)?;
            let moved = engine.redrive(&request.into(), waiter).await?;
            json(&RedriveResponse { moved })
        }
        Rpc::Purge => {
            let request: PurgeRequest = decode(body)?;
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
    }
}

fn json(value: &impl Serialize) -> Result<String, ApiError> {
    serde_json::to_string(value)
        .map_err(|e| ApiError::new(crate::wire::ErrorCode::Internal, e.to_string()))
}
