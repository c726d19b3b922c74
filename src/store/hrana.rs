//! Hrana-over-HTTP protocol types (the JSON encoding of `/v2/pipeline`).
//!
//! Only the requests this project sends are modelled: `batch` and `close`.
//! Integers travel as decimal strings and blobs as base64, as the protocol says.

use std::borrow::Cow;

use serde::ser::SerializeSeq;
use serde::{Deserialize, Serialize, Serializer};

/// One pipeline: a fresh stream (`baton: null`), our requests, then `close`.
#[derive(Debug, Serialize)]
pub struct PipelineRequest<'a> {
    pub baton: Option<String>,
    pub requests: Vec<StreamRequest<'a>>,
}

#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StreamRequest<'a> {
    Batch { batch: Batch<'a> },
    Close,
}

#[derive(Debug, Serialize)]
pub struct Batch<'a> {
    pub steps: Vec<BatchStep<'a>>,
}

#[derive(Debug, Serialize)]
pub struct BatchStep<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub condition: Option<Condition>,
    pub stmt: Stmt<'a>,
}

/// A statement: the engine's are constants; migrations' are read from files.
#[derive(Debug, Serialize)]
pub struct Stmt<'a> {
    pub sql: Cow<'a, str>,
    pub args: Args<'a>,
    pub want_rows: bool,
}

/// A statement's positional arguments, borrowed from the program (message
/// bodies are never copied to encode them), followed by the clock
/// parameter when the statement has one (see `store::statement`).
#[derive(Debug, Clone, Copy)]
pub struct Args<'a> {
    pub values: &'a [Value],
    /// 1-based index of the clock parameter; 0 = none.
    pub clock_param: usize,
    /// The clock parameter's value: `None` binds NULL (the database clock).
    pub now: Option<i64>,
}

impl Args<'_> {
    pub const NONE: Args<'static> = Args {
        values: &[],
        clock_param: 0,
        now: None,
    };
}

impl Serialize for Args<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let len = self.values.len().max(self.clock_param);
        let mut seq = serializer.serialize_seq(Some(len))?;
        for value in self.values {
            seq.serialize_element(value)?;
        }
        if self.clock_param > 0 {
            for _ in self.values.len() + 1..self.clock_param {
                seq.serialize_element(&Value::Null)?;
            }
            match self.now {
                Some(value) => seq.serialize_element(&Value::Integer { value })?,
                None => seq.serialize_element(&Value::Null)?,
            }
        }
        seq.end()
    }
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
