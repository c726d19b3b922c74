//! The route catalogue (docs/http-api.md#rpcs): path, permission and handler of every RPC
//! this build serves, in catalogue order. The discovery card lists exactly
//! these paths, so adding an RPC here is what makes it served.

use super::auth::Permission;

/// Every RPC this build serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rpc {
    Send,
    Receive,
    Complete,
    CompleteBatch,
    RenewBatch,
    Abandon,
    Reject,
    Defer,
    ReceiveDeferred,
    Renew,
    Schedule,
    Cancel,
    Peek,
    Stats,
    CreateQueue,
    Subscribe,
    ListQueues,
    ListSubscriptions,
    TestFilter,
    Redrive,
    Purge,
    Status,
    DeleteQueue,
    Observe,
    CreateKey,
    ListKeys,
    RevokeKey,
}

#[derive(Debug, Clone, Copy)]
pub struct Route {
    pub path: &'static str,
    pub rpc: Rpc,
    pub permission: Permission,
}

const fn route(path: &'static str, rpc: Rpc, permission: Permission) -> Route {
    Route {
        path,
        rpc,
        permission,
    }
}

/// Served routes, in the order of the catalogue in docs/http-api.md#rpcs.
#[rustfmt::skip]
pub const ROUTES: &[Route] = &[
    route("/mqlite.v1.QueueService/Send", Rpc::Send, Permission::Send),
    route("/mqlite.v1.QueueService/Receive", Rpc::Receive, Permission::Listen),
    route("/mqlite.v1.QueueService/Complete", Rpc::Complete, Permission::Listen),
    route("/mqlite.v1.QueueService/CompleteBatch", Rpc::CompleteBatch, Permission::Listen),
    route("/mqlite.v1.QueueService/RenewBatch", Rpc::RenewBatch, Permission::Listen),
    route("/mqlite.v1.QueueService/Abandon", Rpc::Abandon, Permission::Listen),
    route("/mqlite.v1.QueueService/Reject", Rpc::Reject, Permission::Listen),
    route("/mqlite.v1.QueueService/Defer", Rpc::Defer, Permission::Listen),
    route("/mqlite.v1.QueueService/ReceiveDeferred", Rpc::ReceiveDeferred, Permission::Listen),
    route("/mqlite.v1.QueueService/Renew", Rpc::Renew, Permission::Listen),
    route("/mqlite.v1.QueueService/Schedule", Rpc::Schedule, Permission::Send),
    route("/mqlite.v1.QueueService/Cancel", Rpc::Cancel, Permission::Send),
    route("/mqlite.v1.QueueService/Peek", Rpc::Peek, Permission::Listen),
    route("/mqlite.v1.QueueService/Stats", Rpc::Stats, Permission::Listen),
    route("/mqlite.v1.AdminService/CreateQueue", Rpc::CreateQueue, Permission::Manage),
    route("/mqlite.v1.AdminService/Subscribe", Rpc::Subscribe, Permission::Manage),
    route("/mqlite.v1.AdminService/ListQueues", Rpc::ListQueues, Permission::Manage),
    route("/mqlite.v1.AdminService/ListSubscriptions", Rpc::ListSubscriptions, Permission::Manage),
    route("/mqlite.v1.AdminService/TestFilter", Rpc::TestFilter, Permission::Manage),
    route("/mqlite.v1.AdminService/Redrive", Rpc::Redrive, Permission::Manage),
    route("/mqlite.v1.AdminService/Purge", Rpc::Purge, Permission::Manage),
    route("/mqlite.v1.AdminService/Status", Rpc::Status, Permission::Manage),
    route("/mqlite.v1.AdminService/DeleteQueue", Rpc::DeleteQueue, Permission::Manage),
    route("/mqlite.v1.AdminService/Observe", Rpc::Observe, Permission::Observe),
    route("/mqlite.v1.AuthService/CreateKey", Rpc::CreateKey, Permission::ManageKeys),
    route("/mqlite.v1.AuthService/ListKeys", Rpc::ListKeys, Permission::ManageKeys),
    route("/mqlite.v1.AuthService/RevokeKey", Rpc::RevokeKey, Permission::ManageKeys),
];

pub fn find(path: &str) -> Option<&'static Route> {
    ROUTES.iter().find(|r| r.path == path)
}
