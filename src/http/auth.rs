//! Bearer authentication and route permissions (wire §3).

use super::config::AuthMode;
use crate::wire::ApiError;

/// What a route requires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Permission {
    Send,
    Listen,
    Manage,
}

/// Who is calling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Principal {
    /// Auth is off: everything is open.
    Anonymous,
    /// A configured administrator token: `manage`, which includes the rest.
    Admin,
}

impl Principal {
    /// Whether this caller holds `permission`. Both principals that exist
    /// today (administrators, and everyone when auth is off) hold all of
    /// them; restricted managed keys and monitor tokens are not served yet.
    pub fn may(self, _permission: Permission) -> bool {
        match self {
            Principal::Anonymous | Principal::Admin => true,
        }
    }
}

/// Resolves the request's credential. Exactly one `Authorization` header,
/// scheme `Bearer` (any case), then one token free of spaces and commas.
/// The 401 never says which rule failed.
pub fn authenticate<'a>(
    mode: &AuthMode,
    authorization: impl Iterator<Item = &'a str>,
) -> Result<Principal, ApiError> {
    let AuthMode::On { admin_tokens } = mode else {
        return Ok(Principal::Anonymous);
    };
    let token = bearer_token(authorization).ok_or_else(ApiError::unauthenticated)?;
    // Compare against every configured token, without early exit.
    let matched = admin_tokens.iter().fold(false, |found, admin| {
        found | constant_time_eq(admin.as_bytes(), token.as_bytes())
    });
    if matched {
        Ok(Principal::Admin)
    } else {
        Err(ApiError::unauthenticated())
    }
}

fn bearer_token<'a>(mut headers: impl Iterator<Item = &'a str>) -> Option<&'a str> {
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

    fn on(tokens: &[&str]) -> AuthMode {
        AuthMode::On {
            admin_tokens: tokens.iter().map(|t| t.to_string()).collect(),
        }
    }

    #[test]
    fn c18_c19_scheme_is_case_insensitive_and_spaces_are_skipped() {
        let mode = on(&["T"]);
        assert_eq!(
            authenticate(&mode, ["bearer T"].into_iter()),
            Ok(Principal::Admin)
        );
        assert_eq!(
            authenticate(&mode, ["Bearer   T"].into_iter()),
            Ok(Principal::Admin)
        );
    }

    #[test]
    fn c16_c17_c20_c21_c22_c23_malformed_or_unknown_credentials_are_401() {
        let mode = on(&["T"]);
        for headers in [
            vec![],
            vec!["Bearer nope"],
            vec!["T"],
            vec!["Basic dXNlcjpwYXNz"],
            vec!["Bearer T x"],
            vec!["Bearer T,x"],
            vec!["Bearer T", "Bearer T"],
            vec!["Bearer "],
        ] {
            assert_eq!(
                authenticate(&mode, headers.clone().into_iter()),
                Err(ApiError::unauthenticated()),
                "{headers:?}"
            );
        }
    }

    #[test]
    fn unset_tokens_fail_closed() {
        assert_eq!(
            authenticate(&on(&[]), ["Bearer anything"].into_iter()),
            Err(ApiError::unauthenticated())
        );
    }
}
