//! A client for mqlite-edge's Connect-JSON API (docs/clients.md): typed requests and
//! answers for every RPC ([`Client`]), the error table as an enum ([`ErrorCode`]), and a
//! consumer loop with mqlite's SDK semantics ([`Consumer`]). Blocking, on `ureq`, with a
//! timeout on every call. Native only: the Worker never builds it.

mod client;
pub mod consumer;
mod endpoint;
mod error;
pub mod types;

pub use client::{Client, RawAnswer, CALL_TIMEOUT, CONNECT_TIMEOUT};
pub use consumer::{Consumer, ConsumerOptions, HandlerResult, Stop};
pub use endpoint::{Endpoint, DEFAULT_PORT};
pub use error::{Error, ErrorCode};

/// This crate's version, as `mqlite-edge version` prints it.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
