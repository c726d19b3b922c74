//! `/openapi.json` and the routes the Worker serves cannot drift: every
//! served (method, path) is documented, every documented operation is
//! served (asked through the full HTTP pipeline, it never answers "no such
//! path" nor a wrong-method 405), and the document is well-formed.

mod support;

use std::collections::BTreeSet;

use mqlite_edge::http::{FIXED_ROUTES, OPENAPI_ETAG, OPENAPI_JSON, PGMQ_ROUTES, ROUTES};
use serde_json::Value;
use support::*;

const METHODS: &[&str] = &["get", "put", "post", "delete", "patch", "head", "options"];

/// Every (lowercase method, path template) the Worker serves. A further
/// route table plugs in here with one `extend` line.
fn served() -> BTreeSet<(String, String)> {
    let mut served = BTreeSet::new();
    served.extend(
        ROUTES
            .iter()
            .map(|r| ("post".to_owned(), r.path.to_owned())),
    );
    served.extend(
        FIXED_ROUTES
            .iter()
            .map(|(method, path)| (method.to_ascii_lowercase(), (*path).to_owned())),
    );
    served.extend(
        PGMQ_ROUTES
            .iter()
            .map(|r| (r.method.to_ascii_lowercase(), r.path.to_owned())),
    );
    served
}

fn document() -> Value {
    serde_json::from_str(OPENAPI_JSON).expect("the merged document is JSON")
}

fn documented(doc: &Value) -> BTreeSet<(String, String)> {
    let mut ops = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (key, _) in item.as_object().expect("path item") {
            assert!(
                METHODS.contains(&key.as_str()),
                "{path}: unexpected `{key}`"
            );
            ops.insert((key.clone(), path.clone()));
        }
    }
    ops
}

/// A path template with every `{parameter}` filled in.
fn concrete(template: &str) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let end = rest[start..]
            .find('}')
            .map_or(rest.len(), |e| start + e + 1);
        out.push_str("drift");
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

#[test]
fn every_served_route_is_documented_and_every_documented_path_is_served() {
    let doc = document();
    let documented = documented(&doc);
    let served = served();
    let undocumented: Vec<_> = served.difference(&documented).collect();
    let unserved: Vec<_> = documented.difference(&served).collect();
    assert!(
        undocumented.is_empty(),
        "served but not documented: {undocumented:?}"
    );
    assert!(
        unserved.is_empty(),
        "documented but not served: {unserved:?}"
    );
}

#[tokio::test]
async fn every_documented_operation_reaches_a_handler() {
    let api = Api::new(&[("MQLITE_METRICS", "on")]);
    let auth = format!("Bearer {ADMIN}");
    for (method, path) in documented(&document()) {
        let path = concrete(&path);
        let r = api
            .request(
                &method.to_ascii_uppercase(),
                &path,
                &[("Authorization", &auth)],
                b"{}",
            )
            .await;
        let error = serde_json::from_slice::<Value>(&r.body).unwrap_or(Value::Null);
        assert_ne!(
            error["message"],
            format!("no such path: {path}"),
            "{method} {path} is documented but not routed"
        );
        assert_ne!(r.status, 405, "{method} {path}: wrong method: {error}");
    }
}

#[tokio::test]
async fn the_fixed_routes_answer_the_documented_content_type_without_a_credential() {
    let api = Api::new(&[]);
    let doc = document();
    for path in ["/", "/healthz", "/openapi.json", "/docs", "/redoc"] {
        let r = api.request("GET", path, &[], b"").await;
        assert_eq!(r.status, 200, "{path}");
        let op = &doc["paths"][path]["get"];
        assert_eq!(op["security"], Value::Array(vec![]), "{path} is public");
        let content = op["responses"]["200"]["content"]
            .as_object()
            .expect("200 content");
        let served = r.header("Content-Type").unwrap_or_default();
        assert!(
            content.keys().any(|k| served.starts_with(k.as_str())),
            "{path}: served {served}, documented {:?}",
            content.keys().collect::<Vec<_>>()
        );
    }
}

#[test]
fn every_reference_resolves_and_every_rpc_documents_its_shapes() {
    let doc = document();
    assert_eq!(doc["openapi"], "3.1.0");
    let mut refs = Vec::new();
    collect_refs(&doc, &mut refs);
    assert!(refs.len() > 50, "{} references", refs.len());
    for r in refs {
        let pointer = r.strip_prefix('#').expect("local reference");
        assert!(doc.pointer(pointer).is_some(), "dangling {r}");
    }
    for route in ROUTES {
        let op = &doc["paths"][route.path]["post"];
        assert!(
            op["requestBody"]["content"]["application/json"]["schema"].is_object(),
            "{}",
            route.path
        );
        assert!(
            op["responses"]["200"]["content"]["application/json"]["schema"].is_object(),
            "{}",
            route.path
        );
        for status in ["401", "403", "500", "503"] {
            assert!(
                op["responses"][status].is_object(),
                "{} lacks {status}",
                route.path
            );
        }
    }
}

fn collect_refs(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                match (k.as_str(), v) {
                    ("$ref", Value::String(s)) => out.push(s.clone()),
                    _ => collect_refs(v, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_refs(v, out)),
        _ => {}
    }
}

#[tokio::test]
async fn the_document_is_cacheable_json_and_other_methods_are_refused() {
    let api = Api::new(&[]);
    let r = api.request("GET", "/openapi.json", &[], b"").await;
    assert_eq!(r.header("Content-Type"), Some("application/json"));
    assert_eq!(r.header("Cache-Control"), Some("public, max-age=300"));
    assert_eq!(json_body(&r), document());
    let etag = r.header("ETag").unwrap_or_default().to_owned();
    assert_eq!(etag, OPENAPI_ETAG);
    assert!(
        etag.starts_with('"') && etag.ends_with('"') && etag.len() == 18,
        "{etag}"
    );
    // A client holding the current document revalidates to an empty 304.
    for held in [
        etag.clone(),
        format!("W/{etag}"),
        format!("\"other\", {etag}"),
    ] {
        let r = api
            .request("GET", "/openapi.json", &[("If-None-Match", &held)], b"")
            .await;
        assert_eq!(r.status, 304, "{held}");
        assert!(r.body.is_empty());
        assert_eq!(r.header("ETag"), Some(etag.as_str()));
    }
    let r = api
        .request(
            "GET",
            "/openapi.json",
            &[("If-None-Match", "\"other\"")],
            b"",
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(json_body(&r), document());
    let r = api.request("POST", "/openapi.json", &[], b"").await;
    assert_eq!(r.status, 405);
    assert_eq!(json_body(&r)["code"], "unimplemented");
}
