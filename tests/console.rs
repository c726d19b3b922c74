//! The admin console's routes (docs/http-api.md "Open routes", conformance case 10 with the
//! console on): open, redirected, cacheable, locked down by CSP, and gone
//! with `MQLITE_UI=off`. The browser-driven test is e2e/tests/console.rs.

mod support;

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::json;
use support::*;

/// Wire §11 / §2.3: the values that turn the console off.
const OFF: [&str; 5] = ["off", "false", "0", "no", " OFF "];

/// What the deployment may grow by (issue 11): 150 KB gzipped.
const SIZE_BUDGET_GZIPPED: usize = 150 * 1024;

const FILES: [&str; 3] = ["index.html", "console.js", "console.css"];

fn console_file(name: &str) -> String {
    let path = format!("{}/console/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[tokio::test]
async fn c010_console_on_by_default_is_open_and_redirects() {
    let api = Api::new(&[]);
    let r = api.request("GET", "/ui", &[], b"").await;
    assert_eq!(r.status, 301);
    assert_eq!(r.header("Location"), Some("/ui/"));

    let r = api.request("GET", "/ui/", &[], b"").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("Content-Type"), Some("text/html; charset=utf-8"));
    assert_eq!(r.body, console_file("index.html").as_bytes());
    let csp = r.header("Content-Security-Policy").unwrap_or_default();
    for directive in [
        "default-src 'none'",
        "script-src 'self'",
        "connect-src 'self'",
        "frame-ancestors 'none'",
    ] {
        assert!(csp.contains(directive), "{directive} in {csp}");
    }
    assert_eq!(r.header("X-Content-Type-Options"), Some("nosniff"));

    let r = api.request("GET", "/ui/index.html", &[], b"").await;
    assert_eq!(r.status, 200);
    for (file, content_type) in [
        ("console.js", "text/javascript; charset=utf-8"),
        ("console.css", "text/css; charset=utf-8"),
    ] {
        let r = api.request("GET", &format!("/ui/{file}"), &[], b"").await;
        assert_eq!(r.status, 200, "{file}");
        assert_eq!(r.header("Content-Type"), Some(content_type), "{file}");
        assert_eq!(r.body, console_file(file).as_bytes(), "{file}");
    }

    // The prefix is exact, and an unknown console file is the catch-all.
    assert_eq!(api.request("POST", "/uixyz", &[], b"").await.status, 401);
    let r = api.request("GET", "/ui/nope.js", &[], b"").await;
    assert_eq!(r.status, 404);
    assert_eq!(
        json_body(&r),
        json!({"code":"not_found","message":"no such path: /ui/nope.js"})
    );
}

#[tokio::test]
async fn c001_card_lists_the_console_when_it_is_on() {
    let api = Api::new(&[]);
    let r = api.request("GET", "/", &[], b"").await;
    let text = String::from_utf8_lossy(&r.body).into_owned();
    assert_eq!(json_body(&r)["ui"], "/ui");
    // Members in contract order: `ui` last (docs/http-api.md, "Open routes").
    assert!(
        text.ends_with(r#""health":"/healthz","ui":"/ui"}"#),
        "{text}"
    );
    let api = Api::new(&[("MQLITE_METRICS", "on")]);
    let text = String::from_utf8_lossy(&api.request("GET", "/", &[], b"").await.body).into_owned();
    assert!(
        text.ends_with(r#""metrics":"/metrics","ui":"/ui"}"#),
        "{text}"
    );
}

#[tokio::test]
async fn mqlite_ui_off_removes_the_console_and_its_card_member() {
    for off in OFF {
        let api = Api::new(&[("MQLITE_UI", off)]);
        for path in ["/ui", "/ui/", "/ui/console.js"] {
            let r = api.request("GET", path, &[], b"").await;
            assert_eq!(r.status, 404, "{off:?} {path}");
            assert_eq!(
                json_body(&r),
                json!({"code":"not_found","message":format!("no such path: {path}")})
            );
        }
        let card = json_body(&api.request("GET", "/", &[], b"").await);
        assert!(card.get("ui").is_none(), "{off:?}: {card}");
    }
    for on in ["on", "true", "1", "yes", ""] {
        let api = Api::new(&[("MQLITE_UI", on)]);
        assert_eq!(
            api.request("GET", "/ui/", &[], b"").await.status,
            200,
            "{on:?}"
        );
    }
}

#[tokio::test]
async fn console_files_revalidate_with_their_etag() {
    let api = Api::new(&[]);
    let first = api.request("GET", "/ui/console.js", &[], b"").await;
    let etag = first.header("ETag").expect("ETag").to_owned();
    assert_eq!(first.header("Cache-Control"), Some("no-cache"));
    let again = api
        .request("GET", "/ui/console.js", &[("If-None-Match", &etag)], b"")
        .await;
    assert_eq!(again.status, 304);
    assert!(again.body.is_empty());
    assert_eq!(again.header("ETag"), Some(etag.as_str()));
    let stale = api
        .request("GET", "/ui/console.js", &[("If-None-Match", "\"0\"")], b"")
        .await;
    assert_eq!(stale.status, 200);
    // Each file has its own validator.
    let css = api.request("GET", "/ui/console.css", &[], b"").await;
    assert_ne!(css.header("ETag"), Some(etag.as_str()));
}

#[tokio::test]
async fn console_files_answer_get_and_head_only() {
    let api = Api::new(&[]);
    let head = api.request("HEAD", "/ui/", &[], b"").await;
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());
    let post = api.request("POST", "/ui/", &[], b"").await;
    assert_eq!(post.status, 405);
    assert_eq!(json_body(&post)["code"], "unimplemented");
    assert_eq!(post.header("Allow"), Some("GET, HEAD"));
}

#[tokio::test]
async fn console_is_served_with_authentication_off() {
    let api = Api::new(&[("MQLITE_TOKENS", "off")]);
    assert_eq!(api.request("GET", "/ui/", &[], b"").await.status, 200);
}

/// The page loads only its own two files: nothing from elsewhere.
#[test]
fn console_page_references_only_its_own_files() {
    let html = console_file("index.html");
    let mut refs = Vec::new();
    for attr in ["src=\"", "href=\""] {
        for part in html.split(attr).skip(1) {
            refs.push(part.split('"').next().unwrap_or_default().to_owned());
        }
    }
    refs.sort();
    assert_eq!(
        refs,
        [
            "#/",
            "#/",
            "#/keys",
            "#/topics",
            "console.css",
            "console.js",
            "data:,"
        ]
    );
}

/// Every call the console makes is a public RPC of the wire catalogue.
#[test]
fn console_calls_only_public_rpcs() {
    let js = console_file("console.js");
    let called: Vec<&str> = js
        .split("rpc(\"")
        .skip(1)
        .filter_map(|s| s.split('"').next())
        .collect();
    assert!(called.len() >= 15, "{called:?}");
    for name in called {
        let path = format!("/mqlite.v1.{name}");
        assert!(
            mqlite_edge::http::ROUTES.iter().any(|r| r.path == path),
            "{path} is not a served RPC"
        );
    }
    // And the only URL it fetches is the RPC prefix.
    assert_eq!(js.matches("fetch(").count(), 1);
    assert!(js.contains("fetch(\"/mqlite.v1.\" + name"));
}

#[test]
fn console_adds_at_most_150_kb_gzipped() {
    let mut total = 0;
    for file in FILES {
        let mut gzip = Command::new("gzip")
            .args(["-9", "-c"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("gzip (Debian's gzip package) must be installed");
        gzip.stdin
            .take()
            .expect("stdin")
            .write_all(console_file(file).as_bytes())
            .expect("write to gzip");
        let out = gzip.wait_with_output().expect("gzip output");
        assert!(out.status.success());
        total += out.stdout.len();
    }
    println!("console: {total} bytes gzipped");
    assert!(total > 1000, "suspiciously small: {total}");
    assert!(
        total <= SIZE_BUDGET_GZIPPED,
        "{total} > {SIZE_BUDGET_GZIPPED}"
    );
}
