//! Hrana-over-HTTP protocol types (the JSON encoding of `/v2/pipeline`).
//!
//! Only the requests this project sends are modelled: `batch` and `close`.
//! Integers travel as decimal strings and blobs as base64, as the protocol says.

use serde::{Deserialize, Serialize};

/// One pipeline: a fresh stream (`baton: null`), our requests, then `close`.
#[derive(Debug, Serialize)]
pub struct PipelineRequest {
    pub baton: Option<String>,
    pub requests: Vec<StreamRequest>,
}

#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StreamRequest {
    Batch { batch: Batch },
    Close,
}

#[derive(Debug, Serialize)]
pub struct Batch {
    pub steps: Vec<BatchStep>,
}

#[derive(Debug, Serialize)]
pub struct BatchStep {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub condition: Option<Condition>,
    pub stmt: Stmt,
}

#[derive(Debug, Serialize)]
pub struct Stmt {
    pub sql: String,
    pub args: Vec<Value>,
    pub want_rows: bool,
}

/// Step conditions evaluated by the server between steps of one batch.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Condition {
    Ok { step: usize },
    Not { cond: Box<Condition> },
}

/// A SQL value in Hrana's JSON encoding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Value {
    Null,
    Integer {
        #[serde(with = "int_as_string")]
        value: i64,
    },
    Float {
        value: f64,
    },
    Text {
        value: String,
    },
    /// Base64 as the server sent it (padding optional on input).
    Blob {
        base64: String,
    },
}

impl From<i64> for Value {
    fn from(value: i64) -> Self {
        Value::Integer { value }
    }
}

impl From<&str> for Value {
    fn from(value: &str) -> Self {
        Value::Text {
            value: value.to_owned(),
        }
    }
}

impl From<String> for Value {
    fn from(value: String) -> Self {
        Value::Text { value }
    }
}

impl From<Option<&str>> for Value {
    fn from(value: Option<&str>) -> Self {
        value.map_or(Value::Null, Value::from)
    }
}

mod int_as_string {
    use serde::{de::Error, Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(value: &i64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&value.to_string())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Repr {
            Text(String),
            Number(i64),
        }
        match Repr::deserialize(d)? {
            Repr::Text(text) => text.parse().map_err(D::Error::custom),
            Repr::Number(n) => Ok(n),
        }
    }
}

#[derive(Debug, Deserialize)]
pub struct PipelineResponse {
    pub results: Vec<StreamResult>,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StreamResult {
    Ok { response: StreamResponse },
    Error { error: HranaError },
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StreamResponse {
    Batch {
        result: BatchResult,
    },
    Close,
    #[serde(other)]
    Other,
}

#[derive(Debug, Deserialize)]
pub struct BatchResult {
    pub step_results: Vec<Option<StmtResult>>,
    pub step_errors: Vec<Option<HranaError>>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct StmtResult {
    #[serde(default)]
    pub rows: Vec<Vec<Value>>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct HranaError {
    pub message: String,
    #[serde(default)]
    pub code: Option<String>,
}

impl HranaError {
    /// SQLITE_BUSY / "database is locked": the statement did not run and the
    /// whole transaction rolled back, so a retry cannot double-apply.
    pub fn is_busy(&self) -> bool {
        let code = self.code.as_deref().unwrap_or("");
        code.contains("BUSY")
            || code.contains("LOCKED")
            || self.message.contains("database is locked")
            || self.message.contains("SQLITE_BUSY")
    }
}
