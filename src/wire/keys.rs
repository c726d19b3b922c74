//! AuthService JSON shapes (docs/http-api.md#rpcs). No shape here ever carries a
//! key's digest; only CreateKey's answer carries its token, once.

use serde::{Deserialize, Serialize};

use super::decode::nullable;
use crate::engine::{AccessKey, CreatedKey, KeyPage, NewKey};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateKeyRequest {
    #[serde(default, deserialize_with = "nullable")]
    pub id: String,
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    #[serde(default, deserialize_with = "nullable")]
    pub permissions: Vec<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub expires_at_ms: i64,
}

impl From<CreateKeyRequest> for NewKey {
    fn from(r: CreateKeyRequest) -> Self {
        NewKey {
            id: r.id,
            name: r.name,
            permissions: r.permissions,
            expires_at_ms: r.expires_at_ms,
        }
    }
}

#[derive(Debug, Serialize)]
pub struct AccessKeyOut {
    pub id: String,
    pub name: String,
    pub permissions: Vec<&'static str>,
    pub created_at_ms: i64,
    pub expires_at_ms: i64,
    pub revoked_at_ms: i64,
}

impl From<AccessKey> for AccessKeyOut {
    fn from(k: AccessKey) -> Self {
        AccessKeyOut {
            id: k.id,
            name: k.name,
            permissions: k.permissions.names(),
            created_at_ms: k.created_at_ms,
            expires_at_ms: k.expires_at_ms,
            revoked_at_ms: k.revoked_at_ms,
        }
    }
}

#[derive(Debug, Serialize)]
pub struct CreateKeyResponse {
    pub key: AccessKeyOut,
    pub token: String,
}

impl From<CreatedKey> for CreateKeyResponse {
    fn from(c: CreatedKey) -> Self {
        CreateKeyResponse {
            key: c.key.into(),
            token: c.token,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListKeysRequest {
    #[serde(default, deserialize_with = "nullable")]
    pub after_id: String,
    #[serde(default, deserialize_with = "nullable")]
    pub limit: i64,
    #[serde(default, deserialize_with = "nullable")]
    pub sort: String,
}

#[derive(Debug, Serialize)]
pub struct ListKeysResponse {
    pub keys: Vec<AccessKeyOut>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_after_id: Option<String>,
}

impl From<KeyPage> for ListKeysResponse {
    fn from(p: KeyPage) -> Self {
        ListKeysResponse {
            keys: p.keys.into_iter().map(Into::into).collect(),
            next_after_id: p.next_after_id,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RevokeKeyRequest {
    #[serde(default, deserialize_with = "nullable")]
    pub id: String,
}
