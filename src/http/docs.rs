//! The HTTP contract as a document: `/openapi.json` (OpenAPI 3.1, merged from
//! `openapi/*.json` by `build.rs` at build time) and its two renderings,
//! `/docs` (Swagger UI) and `/redoc` (ReDoc). All three are public, like `/`
//! and `/healthz`. The pages load their scripts and styles from this Worker
//! (`scripts/build-worker.sh` vendors them from npm into the static assets
//! under `/docs/swagger-ui/` and `/redoc/`), never from a CDN.

use super::Response;

/// The merged document, fixed for a build; a Worker serves it as a static
/// asset (`super::assets`) instead of carrying it.
#[cfg(not(target_arch = "wasm32"))]
pub const OPENAPI_JSON: &str = include_str!(concat!(env!("OUT_DIR"), "/openapi.json"));

/// Its entity tag (quoted), computed by `build.rs` from the document.
pub const OPENAPI_ETAG: &str = include_str!(concat!(env!("OUT_DIR"), "/openapi.etag"));

/// The document changes only with a deployment: let clients and edges keep
/// it a few minutes, and revalidate after that.
const CACHE: &str = "public, max-age=300";

const SWAGGER_UI: &str = r##"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>mqlite-edge API</title>
<link rel="stylesheet" href="/docs/swagger-ui/swagger-ui.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="/docs/swagger-ui/swagger-ui-bundle.js"></script>
<script>
window.ui = SwaggerUIBundle({ url: "/openapi.json", dom_id: "#swagger-ui", deepLinking: true });
</script>
</body>
</html>
"##;

const REDOC: &str = r##"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>mqlite-edge API</title>
</head>
<body>
<div id="redoc"></div>
<script src="/redoc/redoc.standalone.js"></script>
<script>
Redoc.init("/openapi.json", {}, document.getElementById("redoc"));
</script>
</body>
</html>
"##;

/// The answer for a documentation path, or `None` for any other path. A
/// revalidation of the current document (`If-None-Match`) is `304`.
pub fn serve(method: &str, path: &str, if_none_match: Option<&str>) -> Option<Response> {
    let (content_type, body) = match path {
        "/openapi.json" => ("application/json", Body::Asset(super::assets::OPENAPI)),
        "/docs" => ("text/html; charset=utf-8", Body::Page(SWAGGER_UI)),
        "/redoc" => ("text/html; charset=utf-8", Body::Page(REDOC)),
        _ => return None,
    };
    if method != "GET" && method != "HEAD" {
        let mut response = Response::error(&crate::wire::ApiError::new(
            crate::wire::ErrorCode::Unimplemented,
            "GET required",
        ));
        response.headers.push(("Allow".into(), "GET, HEAD".into()));
        return Some(response);
    }
    let mut headers = vec![
        ("Content-Type".into(), content_type.into()),
        ("Cache-Control".into(), CACHE.into()),
    ];
    if path == "/openapi.json" {
        headers.push(("ETag".into(), OPENAPI_ETAG.into()));
        let current = |tag: &str| {
            let tag = tag.trim().trim_start_matches("W/");
            tag == "*" || tag == OPENAPI_ETAG
        };
        if if_none_match.is_some_and(|tags| tags.split(',').any(current)) {
            return Some(Response::new(304, headers, Vec::new()));
        }
    }
    if method == "HEAD" {
        return Some(Response::new(200, headers, Vec::new()));
    }
    Some(match body {
        Body::Asset(path) => Response::static_file(headers, path),
        Body::Page(page) => Response::new(200, headers, page.as_bytes().to_vec()),
    })
}

/// A document's bytes: a page compiled in, or a static asset.
enum Body {
    Page(&'static str),
    Asset(&'static str),
}
