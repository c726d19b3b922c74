//! Static files the Worker answers with but does not carry (docs/http-api.md,
//! "Open routes"): the console's three files and the merged OpenAPI
//! document. Compiled into native builds; on a Worker they are Workers
//! static assets (`wrangler.toml` `[assets]`, copied there by
//! `scripts/build-worker.sh`), which keeps about 27 KB of gzipped bytes out
//! of the module every cold start loads. The HTTP layer still decides
//! everything about the answer (status, headers, revalidation, the console
//! switch); the platform only supplies the bytes.

/// The asset paths, as `build/assets` holds them.
pub const CONSOLE_INDEX: &str = "/ui/index.html";
pub const CONSOLE_SCRIPT: &str = "/ui/console.js";
pub const CONSOLE_STYLE: &str = "/ui/console.css";
pub const OPENAPI: &str = "/openapi.json";

/// The file at `path` (one of the constants above), compiled in.
#[cfg(not(target_arch = "wasm32"))]
pub fn bytes(path: &str) -> &'static [u8] {
    match path {
        CONSOLE_INDEX => include_bytes!("../../console/index.html"),
        CONSOLE_SCRIPT => include_bytes!("../../console/console.js"),
        CONSOLE_STYLE => include_bytes!("../../console/console.css"),
        OPENAPI => super::docs::OPENAPI_JSON.as_bytes(),
        _ => b"",
    }
}
