//! The JSON contract: request/response shapes (serde, one source of truth)
//! and the error-code table. Converts between wire shapes and engine types.

pub mod admin;
mod decode;
mod error;
pub mod keys;
pub mod observe;
pub mod pgmq;
pub mod queue;

pub use decode::decode;
pub use error::{ApiError, ErrorCode};
