//! Wire §1.2: the checks run in one order and the first failing one
//! decides. Each case fails exactly two adjacent checks at once, so the
//! answer shows which runs first: 401 before 404, 404 before 403, 403
//! before 405, 405 before 413, 413 before 400; and for a managed key, 401
//! and 403 before anything about the body (docs/http-api.md, "Credentials").

mod support;

use support::{json_body, Api, ADMIN};

const SEND: &str = "/mqlite.v1.QueueService/Send";
const MONITOR: &str = "monitor-token-0123456789abcdef-0123";

/// Method, path, credential, body, and the answer expected.
type Case<'a> = (&'a str, &'a str, Option<&'a str>, &'a [u8], (u16, &'a str));

fn code(r: &mqlite_edge::http::Response) -> (u16, String) {
    (
        r.status,
        json_body(r)["code"].as_str().unwrap_or_default().to_owned(),
    )
}

#[tokio::test]
async fn each_check_runs_before_the_next() {
    let api = Api::new(&[
        ("MQLITE_MONITOR_TOKENS", MONITOR),
        ("MQLITE_MAX_REQUEST_BYTES", "64"),
    ]);
    let admin = format!("Bearer {ADMIN}");
    let monitor = format!("Bearer {MONITOR}");
    let huge_garbage = vec![b'{'; 65];
    let cases: [Case; 6] = [
        ("POST", "/nope", None, b"", (401, "unauthenticated")),
        ("POST", "/nope", Some(&monitor), b"", (404, "not_found")),
        ("GET", SEND, Some(&monitor), b"", (403, "permission_denied")),
        (
            "GET",
            SEND,
            Some(&admin),
            &huge_garbage,
            (405, "unimplemented"),
        ),
        (
            "POST",
            SEND,
            Some(&admin),
            &huge_garbage,
            (413, "message_too_large"),
        ),
        ("POST", SEND, Some(&admin), b"{", (400, "invalid_argument")),
    ];
    for (method, path, auth, body, (status, expected)) in cases {
        let headers: Vec<(&str, &str)> = auth.map(|a| ("Authorization", a)).into_iter().collect();
        let r = api.request(method, path, &headers, body).await;
        assert_eq!(
            code(&r),
            (status, expected.to_owned()),
            "{method} {path} {auth:?}"
        );
    }
}

#[tokio::test]
async fn a_managed_key_is_decided_before_method_and_body() {
    let minting = Api::new(&[]);
    let listen = format!("Bearer {}", minting.mint_key(&["listen"]).await);
    let api = Api::over(&minting, &[("MQLITE_MAX_REQUEST_BYTES", "64")]);
    let unknown = format!("Bearer mqk_{}", "c".repeat(64));
    let huge_garbage = vec![b'{'; 65];
    for (method, auth, expected) in [
        ("GET", &unknown, (401, "unauthenticated")),
        ("POST", &unknown, (401, "unauthenticated")),
        ("GET", &listen, (403, "permission_denied")),
        ("POST", &listen, (403, "permission_denied")),
    ] {
        for body in [&b"{"[..], &huge_garbage] {
            let r = api
                .request(method, SEND, &[("Authorization", auth)], body)
                .await;
            assert_eq!(
                code(&r),
                (expected.0, expected.1.to_owned()),
                "{method} {auth} {} bytes",
                body.len()
            );
        }
    }
}
