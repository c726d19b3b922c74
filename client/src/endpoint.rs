//! Endpoint strings (mqlite-clients.md §1.1): `http(s)://…` as given minus trailing `/`,
//! or the `mqlite://[tok@]host[:port][?tls=true]` and `mqlites://…` DSNs (default port
//! 6754). The base URL computed here is also the endpoint's identity: the token boundary
//! of the command line compares these strings byte for byte.

use crate::Error;

/// The port a DSN without one dials.
pub const DEFAULT_PORT: u16 = 6754;

/// A parsed endpoint: the base URL routes are appended to, and a DSN's token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub base: String,
    pub token: String,
}

impl Endpoint {
    pub fn parse(endpoint: &str) -> Result<Endpoint, Error> {
        let invalid = |why: &str| Error::Invalid(format!("invalid endpoint {endpoint:?}: {why}"));
        if endpoint.is_empty() {
            return Err(invalid("empty"));
        }
        let Some((scheme, rest)) = endpoint.split_once("://") else {
            return Err(invalid("not a URL"));
        };
        match scheme {
            "http" | "https" => {
                let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
                if host.is_empty() {
                    return Err(invalid("no host"));
                }
                Ok(Endpoint {
                    base: endpoint.trim_end_matches('/').to_owned(),
                    token: String::new(),
                })
            }
            "mqlite" | "mqlites" => {
                let (authority, query) = match rest.split_once('?') {
                    Some((a, q)) => (a, q),
                    None => (rest, ""),
                };
                let authority = authority.split(['/', '#']).next().unwrap_or_default();
                let (token, hostport) = match authority.rsplit_once('@') {
                    Some((user, host)) => (user.split(':').next().unwrap_or_default(), host),
                    None => ("", authority),
                };
                if hostport.is_empty() {
                    return Err(invalid("no host"));
                }
                let has_port = match hostport.rfind(']') {
                    Some(close) => hostport[close..].contains(':'),
                    None => hostport.contains(':'),
                };
                let hostport = if has_port {
                    hostport.to_owned()
                } else {
                    format!("{hostport}:{DEFAULT_PORT}")
                };
                let tls = scheme == "mqlites"
                    || query
                        .split('&')
                        .any(|pair| pair.eq_ignore_ascii_case("tls=true"));
                let scheme = if tls { "https" } else { "http" };
                Ok(Endpoint {
                    base: format!("{scheme}://{hostport}"),
                    token: token.to_owned(),
                })
            }
            _ => Err(invalid("use mqlite://, mqlites://, http://, https://")),
        }
    }

    /// Whether two endpoint strings name the same broker (never when either fails to
    /// parse).
    pub fn same_broker(a: &str, b: &str) -> bool {
        match (Endpoint::parse(a), Endpoint::parse(b)) {
            (Ok(a), Ok(b)) => a.base == b.base,
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_urls_lose_only_their_trailing_slashes() {
        let e = Endpoint::parse("https://gw/prod//").unwrap();
        assert_eq!(e.base, "https://gw/prod");
        assert!(Endpoint::parse("http://").is_err());
        assert!(Endpoint::parse("ftp://h").is_err());
        assert!(Endpoint::parse("").is_err());
    }

    #[test]
    fn dsns_expand_to_a_dial_url_and_a_token() {
        let e = Endpoint::parse("mqlite://tok@h").unwrap();
        assert_eq!(
            (e.base.as_str(), e.token.as_str()),
            ("http://h:6754", "tok")
        );
        assert_eq!(
            Endpoint::parse("mqlite://h:9?tls=true").unwrap().base,
            "https://h:9"
        );
        assert_eq!(
            Endpoint::parse("mqlites://[::1]").unwrap().base,
            "https://[::1]:6754"
        );
        assert!(Endpoint::parse("mqlite://").is_err());
    }

    #[test]
    fn identity_follows_the_reference_table() {
        assert!(Endpoint::same_broker(
            "http://127.0.0.1:6754",
            "http://127.0.0.1:6754/"
        ));
        assert!(Endpoint::same_broker("mqlite://h", "http://h:6754"));
        assert!(Endpoint::same_broker("mqlites://h", "https://h:6754"));
        assert!(Endpoint::same_broker(
            "mqlite://tok@h:6754",
            "http://h:6754"
        ));
        assert!(!Endpoint::same_broker("http://h", "http://h:6754"));
        assert!(!Endpoint::same_broker("https://gw/prod", "https://gw/dev"));
        assert!(!Endpoint::same_broker(
            "http://Host:6754",
            "http://host:6754"
        ));
        assert!(!Endpoint::same_broker("", ""));
    }
}
