//! Hrana-over-HTTP protocol types (the JSON encoding of `/v2/pipeline`).
//!
//! Only the requests this project sends are modelled: `batch` and `close`.
//! Integers travel as decimal strings and blobs as base64, as the protocol says.

use std::borrow::Cow;

use serde::ser::{SerializeSeq, SerializeStruct};
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
/// bodies are never copied to encode them), then its blobs of pieces if any,
/// followed by the clock parameter when the statement has one (see
/// `store::statement`).
#[derive(Debug, Clone, Copy)]
pub struct Args<'a> {
    pub values: &'a [Value],
    /// Bound right after `values`, in order: each one's pieces,
    /// concatenated, as one blob.
    pub blobs: &'a [Vec<&'a [u8]>],
    /// 1-based index of the clock parameter; 0 = none.
    pub clock_param: usize,
    /// The clock parameter's value: `None` binds NULL (the database clock).
    pub now: Option<i64>,
}

impl Args<'_> {
    pub const NONE: Args<'static> = Args {
        values: &[],
        blobs: &[],
        clock_param: 0,
        now: None,
    };
}

impl Serialize for Args<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let bound = self.values.len() + self.blobs.len();
        let len = bound.max(self.clock_param);
        let mut seq = serializer.serialize_seq(Some(len))?;
        for value in self.values {
            seq.serialize_element(value)?;
        }
        for pieces in self.blobs {
            seq.serialize_element(&BlobPieces(pieces))?;
        }
        if self.clock_param > 0 {
            for _ in bound + 1..self.clock_param {
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

/// A blob made of pieces, encoded as `{"type":"blob","base64":…}` with the
/// base64 written straight into the output: the whole blob never exists as
/// a string of its own.
struct BlobPieces<'a>(&'a [&'a [u8]]);

impl Serialize for BlobPieces<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut value = serializer.serialize_struct("Value", 2)?;
        value.serialize_field("type", "blob")?;
        value.serialize_field("base64", &Base64Of(self.0))?;
        value.end()
    }
}

/// The standard padded base64 of the concatenated pieces, produced a few
/// KiB at a time.
struct Base64Of<'a>(&'a [&'a [u8]]);

impl Serialize for Base64Of<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // serde_json streams `collect_str` into its writer (no temporary).
        serializer.collect_str(self)
    }
}

impl std::fmt::Display for Base64Of<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // A multiple of 3, so only the last chunk can need padding.
        const CHUNK: usize = 3 * 1024;
        let mut staged = [0u8; CHUNK];
        let mut out = [0u8; CHUNK / 3 * 4];
        let mut len = 0;
        for piece in self.0 {
            let mut rest: &[u8] = piece;
            while !rest.is_empty() {
                let take = (CHUNK - len).min(rest.len());
                staged[len..len + take].copy_from_slice(&rest[..take]);
                len += take;
                rest = &rest[take..];
                if len == CHUNK {
                    write_base64(f, &staged, &mut out)?;
                    len = 0;
                }
            }
        }
        write_base64(f, &staged[..len], &mut out)
    }
}

fn write_base64(f: &mut std::fmt::Formatter<'_>, input: &[u8], out: &mut [u8]) -> std::fmt::Result {
    use base64::Engine as _;
    let n = base64::engine::general_purpose::STANDARD
        .encode_slice(input, out)
        .map_err(|_| std::fmt::Error)?;
    f.write_str(std::str::from_utf8(&out[..n]).map_err(|_| std::fmt::Error)?)
}

/// Step conditions evaluated by the server between steps of one batch
/// (read back by the group commit, `store::group`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Condition {
    Ok { step: usize },
    Not { cond: Box<Condition> },
    And { conds: Vec<Condition> },
    Or { conds: Vec<Condition> },
}

/// A SQL value in Hrana's JSON encoding. Read through [`wire::Value`]: an
/// internally tagged enum would buffer every cell into serde's `Content`
/// and parse it twice.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", try_from = "wire::Value")]
pub enum Value {
    Null,
    Integer {
        #[serde(serialize_with = "int_as_string")]
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

/// Hrana writes 64-bit integers as strings (JSON numbers lose precision).
fn int_as_string<S: Serializer>(value: &i64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&value.to_string())
}

#[derive(Debug, Deserialize)]
pub struct PipelineResponse {
    pub results: Vec<StreamResult>,
}

/// One request's outcome. Read through [`wire::StreamResult`], a flat
/// struct serde streams into (an internally tagged enum would first copy
/// the whole answer, rows included, into serde's `Content`: a tenth of a
/// one-fetch request's CPU on workerd, measured with perf).
#[derive(Debug, Deserialize)]
#[serde(try_from = "wire::StreamResult")]
pub enum StreamResult {
    Ok { response: StreamResponse },
    Error { error: HranaError },
}

#[derive(Debug)]
pub enum StreamResponse {
    Batch { result: BatchResult },
    Close,
    Other,
}

/// Hrana's tagged objects as flat structs: the `type` tag is one more
/// field, so each object is parsed once, straight from the answer's bytes.
mod wire {
    use std::fmt;

    use serde::de::{Deserializer, Visitor};
    use serde::Deserialize;

    use super::{BatchResult, HranaError};

    #[derive(Deserialize)]
    pub struct StreamResult {
        #[serde(rename = "type")]
        kind: String,
        #[serde(default)]
        response: Option<StreamResponse>,
        #[serde(default)]
        error: Option<HranaError>,
    }

    #[derive(Deserialize)]
    pub struct StreamResponse {
        #[serde(rename = "type")]
        kind: String,
        /// Only a `batch` response's result is read; other requests'
        /// results (never sent by this project) are skipped unparsed.
        #[serde(default, deserialize_with = "batch_result")]
        result: Option<BatchResult>,
    }

    /// A response's `result`, kept only when it has a batch's shape.
    fn batch_result<'de, D: Deserializer<'de>>(d: D) -> Result<Option<BatchResult>, D::Error> {
        #[derive(Deserialize)]
        struct Maybe {
            #[serde(default)]
            step_results: Option<Vec<Option<super::StmtResult>>>,
            #[serde(default)]
            step_errors: Option<Vec<Option<HranaError>>>,
        }
        let maybe = Maybe::deserialize(d)?;
        Ok(match (maybe.step_results, maybe.step_errors) {
            (Some(step_results), Some(step_errors)) => Some(BatchResult {
                step_results,
                step_errors,
            }),
            _ => None,
        })
    }

    impl TryFrom<StreamResult> for super::StreamResult {
        type Error = String;

        fn try_from(wire: StreamResult) -> Result<Self, String> {
            match (wire.kind.as_str(), wire.response, wire.error) {
                ("ok", Some(response), _) => Ok(super::StreamResult::Ok {
                    response: match (response.kind.as_str(), response.result) {
                        ("batch", Some(result)) => super::StreamResponse::Batch { result },
                        ("batch", None) => return Err("a batch response without its result".into()),
                        ("close", _) => super::StreamResponse::Close,
                        _ => super::StreamResponse::Other,
                    },
                }),
                ("error", _, Some(error)) => Ok(super::StreamResult::Error { error }),
                (kind, _, _) => Err(format!("a stream result of type {kind:?} without its body")),
            }
        }
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "snake_case")]
    enum Kind {
        Null,
        Integer,
        Float,
        Text,
        Blob,
    }

    #[derive(Deserialize)]
    pub struct Value {
        #[serde(rename = "type")]
        kind: Kind,
        #[serde(default)]
        value: Option<Scalar>,
        #[serde(default)]
        base64: Option<String>,
    }

    /// A `value` member: a string (text, or an integer as Hrana writes
    /// it) or a JSON number.
    enum Scalar {
        Text(String),
        Int(i64),
        Float(f64),
    }

    impl<'de> Deserialize<'de> for Scalar {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct ScalarVisitor;
            impl Visitor<'_> for ScalarVisitor {
                type Value = Scalar;
                fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                    f.write_str("a string or a number")
                }
                fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Scalar, E> {
                    Ok(Scalar::Text(v.to_owned()))
                }
                fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Scalar, E> {
                    Ok(Scalar::Text(v))
                }
                fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Scalar, E> {
                    Ok(Scalar::Int(v))
                }
                fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Scalar, E> {
                    i64::try_from(v)
                        .map(Scalar::Int)
                        .map_err(|_| E::custom("integer out of range"))
                }
                fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Scalar, E> {
                    Ok(Scalar::Float(v))
                }
            }
            d.deserialize_any(ScalarVisitor)
        }
    }

    impl TryFrom<Value> for super::Value {
        type Error = String;

        fn try_from(wire: Value) -> Result<Self, String> {
            Ok(match (wire.kind, wire.value, wire.base64) {
                (Kind::Null, _, _) => super::Value::Null,
                (Kind::Integer, Some(Scalar::Int(value)), _) => super::Value::Integer { value },
                (Kind::Integer, Some(Scalar::Text(text)), _) => super::Value::Integer {
                    value: text.parse().map_err(|e| format!("integer {text:?}: {e}"))?,
                },
                (Kind::Float, Some(Scalar::Float(value)), _) => super::Value::Float { value },
                (Kind::Float, Some(Scalar::Int(value)), _) => super::Value::Float {
                    value: value as f64,
                },
                (Kind::Text, Some(Scalar::Text(value)), _) => super::Value::Text { value },
                (Kind::Blob, _, Some(base64)) => super::Value::Blob { base64 },
                _ => return Err("a value whose member does not match its type".into()),
            })
        }
    }
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
    /// Rows the statement itself inserted, updated or deleted (SQLite's
    /// `changes()`: trigger work not included).
    #[serde(default)]
    pub affected_row_count: u64,
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

    /// The error a guard raises on purpose: `json()` fed its `'abort'`
    /// marker (see [`crate::guard!`]). Any other error on a guard step is
    /// the database failing, not the guard firing.
    pub fn is_guard(&self) -> bool {
        self.message.contains("malformed JSON")
    }

    /// A table the statement reads does not exist (a database never migrated).
    pub fn is_missing_table(&self) -> bool {
        self.message.contains("no such table")
    }
}

#[cfg(test)]
mod tests {
    use base64::Engine as _;

    use super::*;

    /// Sqld's answer shapes, parsed by the flat wire structs: every value
    /// type (integers as strings or numbers), step errors, an error result
    /// and the `close` response.
    #[test]
    fn answers_parse_into_results_values_and_errors() {
        let answer = r#"{"baton":null,"base_url":null,"results":[
          {"type":"ok","response":{"type":"batch","result":{
            "step_results":[{"cols":[{"name":"a","decltype":null}],"rows":[[
              {"type":"integer","value":"9007199254740993"},{"type":"integer","value":7},
              {"type":"float","value":1.5},{"type":"float","value":2},
              {"type":"text","value":"héllo"},{"type":"blob","base64":"AAE="},{"type":"null"}]],
              "affected_row_count":3,"last_insert_rowid":null,"rows_read":1,"rows_written":0,
              "query_duration_ms":0.01},null],
            "step_errors":[null,{"message":"no such table: x","code":"SQLITE_ERROR"}]}}},
          {"type":"error","error":{"message":"stream expired"}},
          {"type":"ok","response":{"type":"close"}}]}"#;
        let parsed: PipelineResponse = serde_json::from_str(answer).expect("parses");
        let [first, second, third] = parsed.results.as_slice() else {
            panic!("three results: {parsed:?}");
        };
        let StreamResult::Ok {
            response: StreamResponse::Batch { result },
        } = first
        else {
            panic!("a batch: {first:?}");
        };
        let step = result.step_results[0].as_ref().expect("step 0 ran");
        assert_eq!(step.affected_row_count, 3);
        assert_eq!(
            step.rows[0],
            vec![
                Value::Integer {
                    value: 9_007_199_254_740_993
                },
                Value::Integer { value: 7 },
                Value::Float { value: 1.5 },
                Value::Float { value: 2.0 },
                Value::from("héllo"),
                Value::Blob {
                    base64: "AAE=".into()
                },
                Value::Null,
            ]
        );
        assert!(result.step_results[1].is_none());
        let error = result.step_errors[1].as_ref().expect("step 1 failed");
        assert!(error.is_missing_table());
        assert!(
            matches!(second, StreamResult::Error { error } if error.message == "stream expired")
        );
        assert!(matches!(
            third,
            StreamResult::Ok {
                response: StreamResponse::Close
            }
        ));
    }

    /// A member that does not match its type is an error, never a default.
    #[test]
    fn mismatched_answers_are_errors() {
        for bad in [
            r#"{"type":"integer","value":"x"}"#,
            r#"{"type":"integer"}"#,
            r#"{"type":"text","value":3}"#,
            r#"{"type":"blob","value":"AAE="}"#,
            r#"{"type":"date","value":"1"}"#,
        ] {
            assert!(serde_json::from_str::<Value>(bad).is_err(), "{bad}");
        }
        for bad in [
            r#"{"type":"ok","response":{"type":"batch"}}"#,
            r#"{"type":"ok"}"#,
            r#"{"type":"error"}"#,
        ] {
            assert!(serde_json::from_str::<StreamResult>(bad).is_err(), "{bad}");
        }
        // What an unreadable value's error says (it ends up in the store's
        // "unreadable pipeline answer" detail).
        let err = serde_json::from_str::<Value>(r#"{"type":"text","value":true}"#)
            .map(|_| ())
            .map_err(|e| e.to_string());
        assert!(
            err.as_ref()
                .is_err_and(|e| e.contains("expected a string or a number")),
            "{err:?}"
        );
    }

    /// Busy is told by the code or by the message, any one of them alone;
    /// a missing table only by its own message.
    #[test]
    fn busy_and_missing_table_errors_are_told_apart() {
        let error = |code: Option<&str>, message: &str| HranaError {
            message: message.into(),
            code: code.map(str::to_owned),
        };
        for busy in [
            error(Some("SQLITE_BUSY"), "x"),
            error(Some("SQLITE_LOCKED_SHAREDCACHE"), "x"),
            error(None, "database is locked"),
            error(Some(""), "SQLITE_BUSY: cannot start a transaction"),
        ] {
            assert!(busy.is_busy(), "{busy:?}");
            assert!(!busy.is_missing_table(), "{busy:?}");
        }
        let missing = error(Some("SQLITE_ERROR"), "no such table: schema_version");
        assert!(missing.is_missing_table() && !missing.is_busy());
        let io = error(Some("SQLITE_IOERR"), "disk I/O error");
        assert!(!io.is_missing_table() && !io.is_busy() && !io.is_guard());
    }

    /// The streamed blob is exactly the base64 of the concatenation, across
    /// chunk boundaries, odd piece lengths and empty pieces.
    #[test]
    fn blob_pieces_encode_as_the_base64_of_their_concatenation() {
        let a: Vec<u8> = (0..5000u32).map(|i| (i * 7) as u8).collect();
        let b: Vec<u8> = (0..3073u32).map(|i| (i * 13) as u8).collect();
        let pieces: Vec<&[u8]> = vec![&a, b"", &b, b"x", &a[..1]];
        let blobs = [pieces];
        let args = Args {
            values: &[Value::Integer { value: 1 }],
            blobs: &blobs,
            clock_param: 4,
            now: None,
        };
        let json: serde_json::Value =
            serde_json::from_str(&serde_json::to_string(&args).unwrap_or_default())
                .unwrap_or_default();
        let whole = [&a[..], &b, b"x", &a[..1]].concat();
        let expected = base64::engine::general_purpose::STANDARD.encode(&whole);
        assert_eq!(
            json,
            serde_json::json!([
                {"type": "integer", "value": "1"},
                {"type": "blob", "base64": expected},
                {"type": "null"},
                {"type": "null"},
            ])
        );
    }
}
