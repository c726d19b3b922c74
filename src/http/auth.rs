//! Bearer authentication and route permissions (docs/http-api.md#credentials).

use super::config::AuthMode;
use crate::engine::{is_managed_format, KeyCheck, Permissions};
use crate::wire::ApiError;

/// What a route requires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Permission {
    Send,
    Listen,
    Manage,
    /// Observe and `/metrics`: `manage`, or a configured monitor token.
    Observe,
    /// AuthService: `manage`, and only while authentication is on.
    ManageKeys,
}

impl Permission {
    /// The permission bits a managed key needs for this route.
    pub fn key_bits(self) -> Permissions {
        match self {
            Permission::Send => Permissions::SEND,
            Permission::Listen => Permissions::LISTEN,
            Permission::Manage | Permission::Observe | Permission::ManageKeys => {
                Permissions::MANAGE_ONLY
            }
        }
    }
}

/// Who is calling, as far as configuration alone can tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    /// Auth is off: everything is open except key management.
    Anonymous,
    /// A configured administrator token: `manage`, which includes the rest.
    Admin,
    /// A configured monitor token: Observe and `/metrics` only.
    Monitor,
    /// A token in the managed-key format: the database decides.
    Managed(String),
}

/// A configuration-level answer for a principal and a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Granted,
    Denied,
    /// Key management while auth is off (docs/http-api.md#credentials).
    AuthDisabled,
    /// Only the key store can tell.
    AskDatabase,
}

impl Principal {
    pub fn access(&self, permission: Permission) -> Access {
        match (self, permission) {
            (Principal::Anonymous, Permission::ManageKeys) => Access::AuthDisabled,
            (Principal::Anonymous | Principal::Admin, _) => Access::Granted,
            (Principal::Monitor, Permission::Observe) => Access::Granted,
            (Principal::Monitor, _) => Access::Denied,
            (Principal::Managed(_), _) => Access::AskDatabase,
        }
    }

    /// The check a managed token's requests run, needing `required`.
    pub fn key_check(&self, required: Permissions) -> Option<KeyCheck> {
        match self {
            Principal::Managed(token) => KeyCheck::from_token(token, required),
            _ => None,
        }
    }

    /// What Observe reports as `access`.
    pub fn access_name(&self) -> &'static str {
        match self {
            Principal::Anonymous => "anonymous",
            Principal::Monitor => "monitor",
            Principal::Admin | Principal::Managed(_) => "manage",
        }
    }
}

/// Resolves the request's credential against configuration. Exactly one
/// `Authorization` header, scheme `Bearer` (any case), then one token free
/// of spaces and commas. Configured administrators win over everything,
/// then monitor tokens; a token in the managed format is left to the key
/// store; anything else is 401, which never says which rule failed.
pub fn authenticate<'a>(
    mode: &AuthMode,
    monitor_tokens: &[String],
    authorization: impl Iterator<Item = &'a str>,
) -> Result<Principal, ApiError> {
    let AuthMode::On { admin_tokens } = mode else {
        return Ok(Principal::Anonymous);
    };
    let token = bearer_token(authorization).ok_or_else(ApiError::unauthenticated)?;
    if matches_any(admin_tokens, token) {
        Ok(Principal::Admin)
    } else if matches_any(monitor_tokens, token) {
        Ok(Principal::Monitor)
    } else if is_managed_format(token) {
        Ok(Principal::Managed(token.to_owned()))
    } else {
        Err(ApiError::unauthenticated())
    }
}

/// Compares against every configured token, without early exit.
fn matches_any(tokens: &[String], token: &str) -> bool {
    tokens.iter().fold(false, |found, t| {
        found | constant_time_eq(t.as_bytes(), token.as_bytes())
    })
}

pub(super) fn bearer_token<'a>(mut headers: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let value = headers.next()?;
    if headers.next().is_some() {
        return None;
    }
    let (scheme, rest) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("Bearer") {
        return None;
    }
    let token = rest.trim_start_matches(' ');
    let valid = !token.is_empty()
        && !token
            .chars()
            .any(|c| matches!(c, ' ' | '\t' | '\r' | '\n' | ','));
    valid.then_some(token)
}

/// Equal-length comparison whose time does not depend on where bytes differ.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: &str = "unit-admin-token-0123456789abcdef";

    fn on(tokens: &[&str]) -> AuthMode {
        AuthMode::On {
            admin_tokens: tokens.iter().map(|t| t.to_string()).collect(),
        }
    }

    /// A token matches only byte for byte: differences that cancel out
    /// (two bytes swapped, the same bits flipped twice) are still different.
    #[test]
    fn tokens_match_only_when_equal() {
        assert!(constant_time_eq(b"ab", b"ab"));
        assert!(!constant_time_eq(b"ab", b"ba"));
        assert!(!constant_time_eq(b"ac", b"bd"));
        assert!(!constant_time_eq(b"ab", b"abc"));
        let swapped = format!("{}{}", &T[1..2], &T[..1]) + &T[2..];
        assert_ne!(swapped, T);
        assert_eq!(
            authenticate(
                &on(&[T]),
                &[],
                [format!("Bearer {swapped}").as_str()].into_iter()
            ),
            Err(ApiError::unauthenticated())
        );
    }

    /// A bearer credential is one token: nothing with a space, tab, line
    /// break or comma in it, and not empty (c20-c23).
    #[test]
    fn a_bearer_token_is_one_word() {
        for value in [
            "Bearer a,b",
            "Bearer a b",
            "Bearer a\tb",
            "Bearer ",
            "Bearer  ",
        ] {
            assert_eq!(bearer_token([value].into_iter()), None, "{value:?}");
        }
        assert_eq!(bearer_token(["Bearer  ab"].into_iter()), Some("ab"));
    }

    #[test]
    fn c18_c19_scheme_is_case_insensitive_and_spaces_are_skipped() {
        let mode = on(&[T]);
        assert_eq!(
            authenticate(&mode, &[], [format!("bearer {T}").as_str()].into_iter()),
            Ok(Principal::Admin)
        );
        assert_eq!(
            authenticate(&mode, &[], [format!("Bearer   {T}").as_str()].into_iter()),
            Ok(Principal::Admin)
        );
    }

    #[test]
    fn c16_c17_c20_c21_c22_c23_malformed_or_unknown_credentials_are_401() {
        let mode = on(&[T]);
        let bearer = format!("Bearer {T}");
        let (spaced, comma) = (format!("{bearer} x"), format!("{bearer},x"));
        for headers in [
            vec![],
            vec!["Bearer nope"],
            vec![T],
            vec!["Basic dXNlcjpwYXNz"],
            vec![spaced.as_str()],
            vec![comma.as_str()],
            vec![bearer.as_str(), bearer.as_str()],
            vec!["Bearer "],
        ] {
            assert_eq!(
                authenticate(&mode, &[], headers.clone().into_iter()),
                Err(ApiError::unauthenticated()),
                "{headers:?}"
            );
        }
    }

    #[test]
    fn unset_tokens_fail_closed() {
        assert_eq!(
            authenticate(&on(&[]), &[], ["Bearer anything"].into_iter()),
            Err(ApiError::unauthenticated())
        );
    }
}
