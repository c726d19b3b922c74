//! `openapi/pgmq.json` describes exactly the routes of `PGMQ_ROUTES`: the
//! same (method, path) pairs, public exactly where the table says so.

use std::collections::BTreeSet;

use mqlite_edge::http::PGMQ_ROUTES;

#[test]
fn the_pgmq_fragment_and_the_route_table_agree() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/openapi/pgmq.json"))
        .expect("openapi/pgmq.json");
    let doc: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    let mut documented = BTreeSet::new();
    let mut public = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().expect("path item") {
            let key = (method.to_uppercase(), path.clone());
            if operation.get("security") == Some(&serde_json::json!([])) {
                public.insert(key.clone());
            }
            documented.insert(key);
        }
    }
    let served: BTreeSet<(String, String)> = PGMQ_ROUTES
        .iter()
        .map(|r| (r.method.to_owned(), r.path.to_owned()))
        .collect();
    assert_eq!(documented, served);
    let open: BTreeSet<(String, String)> = PGMQ_ROUTES
        .iter()
        .filter(|r| r.permission.is_none())
        .map(|r| (r.method.to_owned(), r.path.to_owned()))
        .collect();
    assert_eq!(public, open);
    for name in doc["components"]["schemas"]
        .as_object()
        .expect("schemas")
        .keys()
    {
        assert!(name.starts_with("Pgmq"), "{name}");
    }
}
