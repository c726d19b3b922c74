//! The pgmq route table (docs/pgmq.md, "Routes"): method, path template,
//! permission and handler of every route of the dialect, described once.
//! Routing, the OpenAPI drift test and the counters all read this table.

use super::super::auth::Permission;

/// What a route does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handler {
    Health,
    Ready,
    CreateQueue,
    ListQueues,
    DropQueue,
    Purge,
    MetricsAll,
    Metrics,
    Send,
    SendBatch,
    Read,
    ReadPoll,
    Pop,
    DeleteOne,
    DeleteBatch,
    ArchiveOne,
    ArchiveBatch,
    SetVt,
}

#[derive(Debug, Clone, Copy)]
pub struct PgmqRoute {
    pub method: &'static str,
    /// `{queue}` and `{msg_id}` are path parameters.
    pub path: &'static str,
    /// `None`: public (no credential, §1).
    pub permission: Option<Permission>,
    pub handler: Handler,
}

const fn route(
    method: &'static str,
    path: &'static str,
    permission: Option<Permission>,
    handler: Handler,
) -> PgmqRoute {
    PgmqRoute {
        method,
        path,
        permission,
        handler,
    }
}

const SEND: Option<Permission> = Some(Permission::Send);
const LISTEN: Option<Permission> = Some(Permission::Listen);
const MANAGE: Option<Permission> = Some(Permission::Manage);

/// Every route, in matching order: the first whose method and path match
/// serves (a literal segment such as `messages/delete` is listed before
/// the parameter it would otherwise match).
#[rustfmt::skip]
pub const PGMQ_ROUTES: &[PgmqRoute] = &[
    route("GET", "/health", None, Handler::Health),
    route("GET", "/v1/health", None, Handler::Health),
    route("GET", "/v1/ready", None, Handler::Ready),
    route("PUT", "/v1/queues/{queue}", MANAGE, Handler::CreateQueue),
    route("GET", "/v1/queues", MANAGE, Handler::ListQueues),
    route("DELETE", "/v1/queues/{queue}", MANAGE, Handler::DropQueue),
    route("POST", "/v1/queues/{queue}/purge", MANAGE, Handler::Purge),
    route("GET", "/v1/metrics", MANAGE, Handler::MetricsAll),
    route("GET", "/v1/queues/{queue}/metrics", MANAGE, Handler::Metrics),
    route("POST", "/v1/queues/{queue}/messages", SEND, Handler::Send),
    route("POST", "/v1/queues/{queue}/messages/batch", SEND, Handler::SendBatch),
    route("POST", "/v1/queues/{queue}/read", LISTEN, Handler::Read),
    route("POST", "/v1/queues/{queue}/read-poll", LISTEN, Handler::ReadPoll),
    route("POST", "/v1/queues/{queue}/pop", LISTEN, Handler::Pop),
    route("POST", "/v1/queues/{queue}/messages/delete", LISTEN, Handler::DeleteBatch),
    route("POST", "/v1/queues/{queue}/messages/archive", LISTEN, Handler::ArchiveBatch),
    route("DELETE", "/v1/queues/{queue}/messages/{msg_id}", LISTEN, Handler::DeleteOne),
    route("POST", "/v1/queues/{queue}/messages/{msg_id}/archive", LISTEN, Handler::ArchiveOne),
    route("POST", "/v1/queues/{queue}/messages/{msg_id}/vt", LISTEN, Handler::SetVt),
];

/// The path parameters of a matched route (percent-decoded).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Params {
    pub queue: String,
    pub msg_id: String,
}

/// What a method and path address.
#[derive(Debug)]
pub enum Lookup {
    Found(&'static PgmqRoute, Params),
    /// The path exists with other methods (405).
    WrongMethod,
    NotFound,
}

/// Whether `path` belongs to this dialect.
pub fn serves(path: &str) -> bool {
    path == "/health" || path == "/v1" || path.starts_with("/v1/")
}

pub fn find(method: &str, path: &str) -> Lookup {
    let mut path_matched = false;
    for route in PGMQ_ROUTES {
        if let Some(params) = matches(route.path, path) {
            if route.method == method {
                return Lookup::Found(route, params);
            }
            path_matched = true;
        }
    }
    if path_matched {
        Lookup::WrongMethod
    } else {
        Lookup::NotFound
    }
}

fn matches(template: &str, path: &str) -> Option<Params> {
    let mut params = Params::default();
    let mut t = template.split('/');
    let mut p = path.split('/');
    loop {
        match (t.next(), p.next()) {
            (None, None) => return Some(params),
            (Some("{queue}"), Some(s)) if !s.is_empty() => params.queue = percent_decode(s),
            (Some("{msg_id}"), Some(s)) if !s.is_empty() => params.msg_id = percent_decode(s),
            (Some(a), Some(b)) if a == b => {}
            _ => return None,
        }
    }
}

/// `%XX` escapes of a path segment (invalid UTF-8 is replaced).
fn percent_decode(segment: &str) -> String {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                out.push((hex(h).unwrap_or(0) * 16 + hex(l).unwrap_or(0)) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only a `%` with two hex digits is an escape; anything else stays as
    /// written.
    #[test]
    fn percent_escapes_decode_and_malformed_ones_stay() {
        for (segment, decoded) in [
            ("a%20b", "a b"),
            ("%41%7a", "Az"),
            ("%e2%82%AC", "€"),
            ("%zz", "%zz"),
            ("%4g", "%4g"),
            ("%g4", "%g4"),
            ("50%", "50%"),
            ("%4", "%4"),
            ("%%41", "%A"),
        ] {
            assert_eq!(percent_decode(segment), decoded, "{segment}");
        }
    }

    #[test]
    fn literal_segments_win_over_parameters_and_methods_are_checked() {
        match find("POST", "/v1/queues/q/messages/delete") {
            Lookup::Found(r, p) => {
                assert_eq!(r.handler, Handler::DeleteBatch);
                assert_eq!(p.queue, "q");
            }
            other => panic!("{other:?}"),
        }
        match find("DELETE", "/v1/queues/a%20b/messages/7") {
            Lookup::Found(r, p) => {
                assert_eq!(r.handler, Handler::DeleteOne);
                assert_eq!((p.queue.as_str(), p.msg_id.as_str()), ("a b", "7"));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(find("GET", "/v1/queues/q"), Lookup::WrongMethod));
        assert!(matches!(find("GET", "/v1/nothing"), Lookup::NotFound));
        assert!(matches!(find("PUT", "/v1/queues/"), Lookup::NotFound));
        // An empty message id is no id: the segment names no route.
        assert!(matches!(
            find("DELETE", "/v1/queues/q/messages/"),
            Lookup::NotFound
        ));
        assert!(matches!(
            find("POST", "/v1/queues/q/messages//archive"),
            Lookup::NotFound
        ));
    }
}
