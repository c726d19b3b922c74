//! mqlite-edge: mqlite's Connect-style JSON API as a Cloudflare Worker over
//! a remote libSQL/Turso database.
//!
//! Data flows one way: [`http`] (routing, auth, caps) → [`wire`] (JSON shapes
//! and the error table) → [`engine`] (queue semantics as SQL) → [`store`]
//! (one Hrana pipeline per call) → libSQL. Only `worker_shell` touches the
//! Workers runtime; everything else builds and tests natively.

pub mod engine;
pub mod filter;
pub mod http;
pub mod observe;
pub mod store;
pub mod wake;
pub mod wire;

#[cfg(target_arch = "wasm32")]
mod worker_shell;
