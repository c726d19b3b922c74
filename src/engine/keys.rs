//! Managed access keys (docs/semantics.md#keys, docs/http-api.md#rpcs) and the per-request
//! check of a managed credential.
//!
//! Only the SHA-256 digest of a token is stored. A request made with a
//! managed key carries a [`KeyCheck`] that every program of that request
//! runs first, inside its own transaction: authenticating costs no extra
//! round trip, a revocation applies to the next request, and a rejected key
//! leaves no side effect. Only when a request fails without reaching the
//! database, or the check fires, does the caller look the key up on its own
//! to tell 401 from 403.

use std::sync::atomic::{AtomicBool, Ordering};

use base64::Engine as _;
use sha2::{Digest, Sha256};

use super::{random_hex, unexpected, Engine, EngineError};
use crate::store::hrana::Value;
use crate::store::Statement;
use crate::store::{Program, RunError, Transport};

/// A key's permission set, stored as send=1, listen=2, send+listen=3,
/// manage=7 (manage includes the other two).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Permissions(i64);

impl Permissions {
    pub const SEND: Permissions = Permissions(1);
    pub const LISTEN: Permissions = Permissions(2);
    pub const MANAGE: Permissions = Permissions(7);
    /// The bit only `manage` has: what administrative routes require.
    pub const MANAGE_ONLY: Permissions = Permissions(4);

    /// Parses and normalises a requested list (docs/deviations.md D10).
    pub fn parse(names: &[String]) -> Result<Self, EngineError> {
        if names.is_empty() {
            return Err(EngineError::InvalidArgument(
                "at least one key permission is required".into(),
            ));
        }
        let mut bits = 0;
        for name in names {
            bits |= match name.as_str() {
                "send" => 1,
                "listen" => 2,
                "manage" => 7,
                other => {
                    return Err(EngineError::InvalidArgument(format!(
                        "unknown key permission {other:?}"
                    )))
                }
            };
        }
        Ok(Permissions(bits))
    }

    fn from_stored(bits: i64) -> Option<Self> {
        matches!(bits, 1 | 2 | 3 | 7).then_some(Permissions(bits))
    }

    /// Whether this set holds everything `required` asks for.
    pub fn includes(self, required: Permissions) -> bool {
        self.0 & required.0 == required.0
    }

    pub fn names(self) -> Vec<&'static str> {
        match self.0 {
            7 => vec!["manage"],
            3 => vec!["send", "listen"],
            2 => vec!["listen"],
            _ => vec!["send"],
        }
    }
}

/// A managed credential presented by a request, with what its route needs.
#[derive(Debug)]
pub struct KeyCheck {
    digest: [u8; 32],
    required: Permissions,
    verified: AtomicBool,
}

/// Guard: the key is unknown, revoked, expired (the expiry instant counts
/// as expired) or lacks the permission bits `?2`.
pub(super) const KEY_REFUSED: Statement = crate::guard!(
    "NOT EXISTS (SELECT 1 FROM access_keys WHERE token_hash = ?1 \
     AND revoked_at = 0 AND (expires_at = 0 OR expires_at > {now}) AND (permissions & ?2) = ?2)"
);

impl KeyCheck {
    /// A check for `token` if it has the generated format (`mqk_` + 64
    /// lowercase hex); any other string can never be a managed key.
    pub fn from_token(token: &str, required: Permissions) -> Option<KeyCheck> {
        is_managed_format(token).then(|| KeyCheck {
            digest: Sha256::digest(token.as_bytes()).into(),
            required,
            verified: AtomicBool::new(false),
        })
    }

    /// The SHA-256 digest of the token: what the key store is keyed by.
    pub fn digest(&self) -> &[u8; 32] {
        &self.digest
    }

    /// What the request's route requires.
    pub fn required(&self) -> Permissions {
        self.required
    }

    /// Whether a program of this request already passed the check.
    pub fn is_verified(&self) -> bool {
        self.verified.load(Ordering::SeqCst)
    }

    pub(super) fn mark_verified(&self) {
        self.verified.store(true, Ordering::SeqCst);
    }

    pub(super) fn attach(&self, program: &mut Program) {
        program.set_prelude(
            &KEY_REFUSED,
            vec![blob(&self.digest), self.required.0.into()],
        );
    }
}

/// Whether `token` has the generated format (`mqk_` + 64 lowercase hex),
/// the only strings the key store is ever asked about.
pub fn is_managed_format(token: &str) -> bool {
    token.strip_prefix("mqk_").is_some_and(|hex| {
        hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    })
}

/// What the key store says about a presented managed key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyState {
    Unknown,
    Revoked,
    Expired,
    Valid(Permissions),
}

/// A key record as listed (never the token or its digest).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessKey {
    pub id: String,
    pub name: String,
    pub permissions: Permissions,
    pub created_at_ms: i64,
    pub expires_at_ms: i64,
    pub revoked_at_ms: i64,
}

/// A key as another database's copy of it holds it: its row and digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyCopy {
    pub key: AccessKey,
    digest: [u8; 32],
}

impl KeyCopy {
    /// The copy of a key just minted.
    pub fn of(created: &CreatedKey) -> KeyCopy {
        KeyCopy {
            key: created.key.clone(),
            digest: Sha256::digest(created.token.as_bytes()).into(),
        }
    }
}

/// A CreateKey request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewKey {
    pub id: String,
    pub name: String,
    pub permissions: Vec<String>,
    /// 0 = never.
    pub expires_at_ms: i64,
}

/// The new record and its secret, which exists only in this answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreatedKey {
    pub key: AccessKey,
    pub token: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeySort {
    IdAsc,
    CreatedDesc,
}

impl KeySort {
    pub fn parse(sort: &str) -> Result<Self, EngineError> {
        match sort {
            "" | "id_asc" => Ok(KeySort::IdAsc),
            "created_desc" => Ok(KeySort::CreatedDesc),
            _ => Err(EngineError::InvalidArgument(
                "key sort must be id_asc or created_desc".into(),
            )),
        }
    }
}

/// One ListKeys page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyPage {
    pub keys: Vec<AccessKey>,
    /// The last id on the page, when more rows follow.
    pub next_after_id: Option<String>,
}

const DEFAULT_PAGE: i64 = 100;
const MAX_PAGE: i64 = 1000;

const LOOKUP: Statement = crate::statement!(
    "SELECT permissions, revoked_at, \
     CASE WHEN expires_at <> 0 AND expires_at <= {now} THEN 1 ELSE 0 END \
     FROM access_keys WHERE token_hash = ?1"
);

const EXPIRY_NOT_FUTURE: Statement = crate::guard!("?1 <> 0 AND ?1 <= {now}");

/// Inserts unless the id or the digest exists (either is `key_conflict`).
const INSERT_KEY: Statement = crate::statement!(
    "\
INSERT INTO access_keys (id, name, token_hash, permissions, created_at, expires_at)
VALUES (?1, ?2, ?3, ?4, {now}, ?5) ON CONFLICT DO NOTHING RETURNING created_at"
);

/// A key the catalog made, copied into another database (docs/databases.md):
/// the same id, digest, permissions and times; a copy there already stays.
const COPY_KEY: Statement = crate::statement!(
    "\
INSERT INTO access_keys (id, name, token_hash, permissions, created_at, expires_at, revoked_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT DO NOTHING"
);

macro_rules! key_columns {
    () => {
        "id, name, permissions, created_at, expires_at, revoked_at"
    };
}

/// A key by its digest, as ListKeys shows it.
const KEY_ROW: Statement = crate::statement!(concat!(
    "SELECT ",
    key_columns!(),
    " FROM access_keys WHERE token_hash = ?1"
));

/// ListKeys by id, after `?1`, `?2` rows.
const KEYS_BY_ID: Statement = crate::statement!(concat!(
    "SELECT ",
    key_columns!(),
    " FROM access_keys WHERE id > ?1 ORDER BY id LIMIT ?2"
));

/// ListKeys newest first, after the key `?1` ('' = from the start).
const KEYS_BY_CREATION: Statement = crate::statement!(concat!(
    "SELECT ",
    key_columns!(),
    " FROM access_keys WHERE ?1 = '' OR (created_at, id) < \
     (SELECT created_at, id FROM access_keys WHERE id = ?1) \
     ORDER BY created_at DESC, id DESC LIMIT ?2"
));

/// Guard: the cursor key `?1` of a newest-first page does not exist.
const CURSOR_MISSING: Statement =
    crate::guard!("?1 <> '' AND NOT EXISTS (SELECT 1 FROM access_keys WHERE id = ?1)");

const KEY_MISSING: Statement =
    crate::guard!("NOT EXISTS (SELECT 1 FROM access_keys WHERE id = ?1)");

/// Revocation is permanent and keeps its first instant.
const REVOKE: Statement = crate::statement!(
    "UPDATE access_keys SET revoked_at = max({now}, 1) WHERE id = ?1 AND revoked_at = 0"
);

fn blob(bytes: &[u8]) -> Value {
    Value::Blob {
        base64: base64::engine::general_purpose::STANDARD.encode(bytes),
    }
}

/// A client-chosen key id: exactly 32 lowercase hex characters.
fn check_id(id: &str) -> Result<(), EngineError> {
    if id.len() == 32 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        Ok(())
    } else {
        Err(EngineError::InvalidArgument(
            "key id must be 32 lowercase hex characters".into(),
        ))
    }
}

fn check_name(name: &str) -> Result<(), EngineError> {
    let trimmed = name.trim();
    if name.is_empty() || name.len() > 128 || trimmed != name || name.contains('\0') {
        Err(EngineError::InvalidArgument(
            "key name must be 1-128 bytes of UTF-8 without NUL or surrounding whitespace".into(),
        ))
    } else {
        Ok(())
    }
}

impl<T: Transport> Engine<T> {
    /// Looks a presented managed key up on its own (the error paths of a
    /// request whose programs never ran the check).
    pub async fn key_state(&self, key: &KeyCheck) -> Result<KeyState, EngineError> {
        let mut program = Program::read();
        let lookup = program.step(&LOOKUP, vec![blob(&key.digest)]);
        let committed = self
            .run_uncredentialed(&mut program)
            .await
            .map_err(|(e, _)| unexpected(e))?;
        let Some(row) = committed.first_row(lookup) else {
            return Ok(KeyState::Unknown);
        };
        let Some(permissions) = Permissions::from_stored(row.int(0)?) else {
            return Ok(KeyState::Unknown);
        };
        Ok(if row.int(1)? != 0 {
            KeyState::Revoked
        } else if row.int(2)? != 0 {
            KeyState::Expired
        } else {
            KeyState::Valid(permissions)
        })
    }

    /// Mints a key. The secret is drawn before the transaction, so the
    /// store's transparent retries reuse the same id and secret.
    pub async fn create_key(&self, request: &NewKey) -> Result<CreatedKey, EngineError> {
        check_id(&request.id)?;
        check_name(&request.name)?;
        let permissions = Permissions::parse(&request.permissions)?;
        if request.expires_at_ms < 0 {
            return Err(EngineError::InvalidArgument(
                "expires_at_ms must be 0 or in the future".into(),
            ));
        }
        super::at_most(
            "expires_at_ms",
            request.expires_at_ms,
            super::MAX_INSTANT_MS,
        )?;
        let token = format!("mqk_{}", random_hex(32)?);
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let mut program = Program::write();
        let past = program.guard(&EXPIRY_NOT_FUTURE, vec![request.expires_at_ms.into()]);
        let insert = program.step(
            &INSERT_KEY,
            vec![
                request.id.as_str().into(),
                request.name.as_str().into(),
                blob(&digest),
                permissions.0.into(),
                request.expires_at_ms.into(),
            ],
        );
        let committed = match self.run(&mut program).await {
            Ok(committed) => committed,
            Err(RunError::Rejected(step)) if step == past => {
                return Err(EngineError::InvalidArgument(
                    "expires_at_ms must be 0 or in the future".into(),
                ))
            }
            Err(e) => return Err(unexpected(e)),
        };
        let Some(row) = committed.first_row(insert) else {
            return Err(EngineError::KeyConflict);
        };
        Ok(CreatedKey {
            key: AccessKey {
                id: request.id.clone(),
                name: request.name.clone(),
                permissions,
                created_at_ms: row.int(0)?,
                expires_at_ms: request.expires_at_ms,
                revoked_at_ms: 0,
            },
            token,
        })
    }

    /// One page of managed keys, by keyset pagination.
    pub async fn list_keys(
        &self,
        after_id: &str,
        limit: i64,
        sort: KeySort,
    ) -> Result<KeyPage, EngineError> {
        let limit = match limit {
            0 => DEFAULT_PAGE,
            1..=MAX_PAGE => limit,
            _ => {
                return Err(EngineError::InvalidArgument(format!(
                    "limit must be between 1 and {MAX_PAGE} (got {limit})"
                )))
            }
        };
        if !after_id.is_empty() {
            check_id(after_id)?;
        }
        let mut program = Program::read();
        let args = vec![after_id.into(), (limit + 1).into()];
        let (unknown_cursor, page) = match sort {
            KeySort::IdAsc => (None, program.step(&KEYS_BY_ID, args)),
            KeySort::CreatedDesc => (
                Some(program.guard(&CURSOR_MISSING, vec![after_id.into()])),
                program.step(&KEYS_BY_CREATION, args),
            ),
        };
        let committed = match self.run(&mut program).await {
            Ok(committed) => committed,
            Err(RunError::Rejected(step)) if Some(step) == unknown_cursor => {
                return Err(EngineError::InvalidArgument(
                    "after_id does not name an existing key".into(),
                ))
            }
            Err(e) => return Err(unexpected(e)),
        };
        let mut keys = Vec::new();
        for row in committed.rows(page) {
            keys.push(AccessKey {
                id: row.text(0)?.to_owned(),
                name: row.text(1)?.to_owned(),
                permissions: Permissions::from_stored(row.int(2)?).unwrap_or(Permissions::SEND),
                created_at_ms: row.int(3)?,
                expires_at_ms: row.int(4)?,
                revoked_at_ms: row.int(5)?,
            });
        }
        let more = keys.len() as i64 > limit;
        keys.truncate(limit as usize);
        let next_after_id = more.then(|| keys.last().map(|k| k.id.clone())).flatten();
        Ok(KeyPage {
            keys,
            next_after_id,
        })
    }

    /// Revokes a key for good; revoking again keeps the first instant.
    /// The key whose digest `key` carries, as another database's copy of
    /// it would hold it (docs/databases.md); `None` when there is none.
    pub async fn key_copy(&self, key: &KeyCheck) -> Result<Option<KeyCopy>, EngineError> {
        let mut program = Program::read();
        let row = program.step(&KEY_ROW, vec![blob(&key.digest)]);
        let committed = self
            .run_uncredentialed(&mut program)
            .await
            .map_err(|(e, _)| unexpected(e))?;
        let Some(row) = committed.first_row(row) else {
            return Ok(None);
        };
        let Some(permissions) = Permissions::from_stored(row.int(2)?) else {
            return Ok(None);
        };
        Ok(Some(KeyCopy {
            key: AccessKey {
                id: row.text(0)?.to_owned(),
                name: row.text(1)?.to_owned(),
                permissions,
                created_at_ms: row.int(3)?,
                expires_at_ms: row.int(4)?,
                revoked_at_ms: row.int(5)?,
            },
            digest: key.digest,
        }))
    }

    /// Copies a key of the catalog into this database, so that the programs
    /// that run here check it in their own transaction.
    pub async fn copy_key(&self, copy: &KeyCopy) -> Result<(), EngineError> {
        let key = &copy.key;
        let mut program = Program::write();
        program.step(
            &COPY_KEY,
            vec![
                key.id.as_str().into(),
                key.name.as_str().into(),
                blob(&copy.digest),
                key.permissions.0.into(),
                key.created_at_ms.into(),
                key.expires_at_ms.into(),
                key.revoked_at_ms.into(),
            ],
        );
        self.run(&mut program).await.map_err(unexpected)?;
        Ok(())
    }

    /// Revokes this database's copy of key `id`, if it holds one.
    pub async fn revoke_copy(&self, id: &str) -> Result<(), EngineError> {
        check_id(id)?;
        let mut program = Program::write();
        program.step(&REVOKE, vec![id.into()]);
        self.run(&mut program).await.map_err(unexpected)?;
        Ok(())
    }

    pub async fn revoke_key(&self, id: &str) -> Result<(), EngineError> {
        check_id(id)?;
        let mut program = Program::write();
        let missing = program.guard(&KEY_MISSING, vec![id.into()]);
        program.step(&REVOKE, vec![id.into()]);
        match self.run(&mut program).await {
            Ok(_) => Ok(()),
            Err(RunError::Rejected(step)) if step == missing => Err(EngineError::NotFound),
            Err(e) => Err(unexpected(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c222_permissions_normalise() {
        let p = |names: &[&str]| {
            Permissions::parse(&names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
        };
        assert_eq!(
            p(&["send", "manage"]).map(Permissions::names),
            Ok(vec!["manage"])
        );
        assert_eq!(
            p(&["listen", "send"]).map(Permissions::names),
            Ok(vec!["send", "listen"])
        );
        assert!(p(&[]).is_err());
        assert!(p(&["admin"]).is_err());
    }

    #[test]
    fn c32_only_the_generated_format_is_a_managed_key() {
        let lower = format!("mqk_{}", "a".repeat(64));
        let upper = format!("mqk_{}", "A".repeat(64));
        assert!(KeyCheck::from_token(&lower, Permissions::SEND).is_some());
        assert!(KeyCheck::from_token(&upper, Permissions::SEND).is_none());
        assert!(
            KeyCheck::from_token(&format!("mqk_{}", "a".repeat(32)), Permissions::SEND).is_none()
        );
        assert!(KeyCheck::from_token("T", Permissions::SEND).is_none());
    }

    #[test]
    fn c221_name_rules() {
        assert!(check_name("orders-producer").is_ok());
        assert!(check_name(&"é".repeat(64)).is_ok());
        for bad in ["", " x", "x ", "a\0b"] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        assert!(check_name(&"x".repeat(129)).is_err());
        assert!(check_id(&"a".repeat(31)).is_err());
        assert!(check_id(&"A".repeat(32)).is_err());
        assert!(check_id(&"0".repeat(32)).is_ok());
    }
}
