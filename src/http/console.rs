//! The admin console (docs/http-api.md, "Open routes"): three static files from `console/`
//! ([`assets`]: static assets on a Worker, compiled in elsewhere). The console is a client of the public
//! RPCs only; this module just hands out its files, and the API path pays
//! nothing for it beyond the prefix check in [`owns`].

use super::{assets, Request, Response};
use crate::wire::{ApiError, ErrorCode};

/// Where the console lives; also the card's `ui` member.
pub const PREFIX: &str = "/ui";

/// Only scripts, styles and API calls from this origin; no inline code, no
/// framing, no forms posting elsewhere. The console builds its DOM with
/// `textContent`, so message bodies can never become markup.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";

struct Asset {
    name: &'static str,
    content_type: &'static str,
    /// Where the bytes are ([`assets`]).
    path: &'static str,
    /// A digest of the file computed by the compiler, so serving a file
    /// never hashes it (and the Worker never carries the bytes to do so).
    etag: u64,
}

const ASSETS: [Asset; 3] = [
    Asset {
        name: "index.html",
        content_type: "text/html; charset=utf-8",
        path: assets::CONSOLE_INDEX,
        etag: fnv1a(include_bytes!("../../console/index.html")),
    },
    Asset {
        name: "console.js",
        content_type: "text/javascript; charset=utf-8",
        path: assets::CONSOLE_SCRIPT,
        etag: fnv1a(include_bytes!("../../console/console.js")),
    },
    Asset {
        name: "console.css",
        content_type: "text/css; charset=utf-8",
        path: assets::CONSOLE_STYLE,
        etag: fnv1a(include_bytes!("../../console/console.css")),
    },
];

/// 64-bit FNV-1a: a cache validator, not a security boundary.
const fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut i = 0;
    while i < bytes.len() {
        hash ^= bytes[i] as u64;
        hash = hash.wrapping_mul(0x0100_0000_01b3);
        i += 1;
    }
    hash
}

/// Whether `path` is the console's: exactly `/ui` or anything under `/ui/`
/// (`/uixyz` is an ordinary, authenticated path).
pub fn owns(path: &str) -> bool {
    path.strip_prefix(PREFIX)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// Answers a console path: `/ui` redirects to `/ui/`, `/ui/` is the page,
/// and a disabled console or an unknown file is the catch-all 404. `path`
/// is the request's path without its query string.
pub fn serve(enabled: bool, request: &Request, path: &str) -> Response {
    if !enabled {
        return Response::error(&ApiError::no_such_path(path));
    }
    if path == PREFIX {
        return Response::new(301, vec![("Location".into(), "/ui/".into())], Vec::new());
    }
    let name = match path.get(PREFIX.len() + 1..) {
        Some("") | None => "index.html",
        Some(name) => name,
    };
    let Some(asset) = ASSETS.iter().find(|a| a.name == name) else {
        return Response::error(&ApiError::no_such_path(path));
    };
    if request.method != "GET" && request.method != "HEAD" {
        let mut response =
            Response::error(&ApiError::new(ErrorCode::Unimplemented, "GET required"));
        response.headers.push(("Allow".into(), "GET, HEAD".into()));
        return response;
    }
    let etag = format!("\"{:016x}\"", asset.etag);
    let fresh = request
        .header_values("If-None-Match")
        .flat_map(|v| v.split(','))
        .any(|tag| tag.trim() == etag || tag.trim() == "*");
    let mut headers = vec![
        ("ETag".into(), etag),
        // File names carry no version: the browser revalidates every load
        // and gets a bodiless 304 while the build is unchanged.
        ("Cache-Control".into(), "no-cache".into()),
        ("X-Content-Type-Options".into(), "nosniff".into()),
        ("Referrer-Policy".into(), "no-referrer".into()),
    ];
    if fresh {
        return Response::new(304, headers, Vec::new());
    }
    headers.push(("Content-Type".into(), asset.content_type.into()));
    if asset.name == "index.html" {
        headers.push((
            "Content-Security-Policy".into(),
            CONTENT_SECURITY_POLICY.into(),
        ));
        headers.push(("X-Frame-Options".into(), "DENY".into()));
    }
    if request.method == "HEAD" {
        return Response::new(200, headers, Vec::new());
    }
    Response::static_file(headers, asset.path)
}

#[cfg(test)]
mod tests {
    use super::fnv1a;

    /// The published FNV-1a 64-bit vectors: an ETag that is not FNV-1a
    /// (e.g. OR-ing each byte in) collides for files that differ.
    #[test]
    fn etags_are_fnv1a_64() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
    }
}
