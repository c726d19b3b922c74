//! `GET /`: the discovery card (docs/http-api.md#open-routes), members in contract order.

use serde::Serialize;

use super::routes::ROUTES;

#[derive(Serialize)]
struct Card {
    name: &'static str,
    description: &'static str,
    version: &'static str,
    status: &'static str,
    auth: &'static str,
    docs: &'static str,
    endpoints: Vec<&'static str>,
    health: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    metrics: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ui: Option<&'static str>,
}

pub fn discovery_card(auth_enabled: bool, metrics: bool, ui: bool) -> String {
    serde_json::to_string(&Card {
        name: "mqlite",
        description:
            "Lightweight SQLite-backed message queue with Azure Service Bus-style semantics.",
        version: env!("CARGO_PKG_VERSION"),
        status: "ok",
        auth: if auth_enabled { "bearer" } else { "none" },
        docs: "https://github.com/mqlitehq/mqlite",
        endpoints: ROUTES.iter().map(|r| r.path).collect(),
        health: "/healthz",
        metrics: metrics.then_some("/metrics"),
        ui: ui.then_some(super::console::PREFIX),
    })
    .unwrap_or_default()
}
