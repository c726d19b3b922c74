//! Request validation with FastAPI's 422 answers: each failure is an item
//! `{"type","loc","msg","input"}` of `{"detail":[…]}`, `loc` naming where
//! (`["body","qty"]`, `["path","msg_id"]`). Types follow pydantic's lax
//! mode, as the reference adapter validates: integers also from integral
//! floats, booleans and numeric strings.

use std::collections::BTreeMap;

use serde_json::value::RawValue;
use serde_json::{json, Map, Value};

use super::error::PgmqError;
use super::time::parse_iso;

static NULL: Value = Value::Null;

/// One 422 item.
pub fn item(kind: &str, loc: Vec<Value>, msg: &str, input: &Value) -> Value {
    json!({"type": kind, "loc": loc, "msg": msg, "input": input})
}

/// A request body's top-level fields, each both as the text the client
/// sent (a payload is stored as that text, never re-encoded) and parsed,
/// for validation and for the `input` a 422 echoes.
pub struct BodyObject<'a> {
    raw: BTreeMap<String, &'a RawValue>,
    values: Map<String, Value>,
}

/// `text` parsed for an error's `input`; a number JSON allows but serde's
/// `Value` cannot hold (`1e400`) shows as the text itself.
fn lossy(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

/// The request body as a JSON object, or the 422 FastAPI answers for a
/// missing body, malformed JSON or another JSON type.
pub fn body_object(body: &[u8]) -> Result<BodyObject<'_>, PgmqError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(PgmqError::Validation(vec![item(
            "missing",
            vec!["body".into()],
            "Field required",
            &Value::Null,
        )]));
    }
    let whole = serde_json::from_slice::<&RawValue>(body).map_err(|e| json_invalid(body, &e))?;
    if !whole.get().starts_with('{') {
        return Err(PgmqError::Validation(vec![item(
            "model_attributes_type",
            vec!["body".into()],
            "Input should be a valid dictionary or object to extract fields from",
            &lossy(whole.get()),
        )]));
    }
    let raw: BTreeMap<String, &RawValue> =
        serde_json::from_str(whole.get()).map_err(|e| json_invalid(body, &e))?;
    let values = raw
        .iter()
        .map(|(k, v)| (k.clone(), lossy(v.get())))
        .collect();
    Ok(BodyObject { raw, values })
}

/// FastAPI's answer for malformed JSON. Python reports where the offending
/// value starts; serde where it stopped reading: back up to the token's
/// start.
fn json_invalid(body: &[u8], e: &serde_json::Error) -> PgmqError {
    let stopped = body
        .split(|b| *b == b'\n')
        .take(e.line().saturating_sub(1))
        .map(|line| line.len() + 1)
        .sum::<usize>()
        + e.column().saturating_sub(1);
    let stopped = stopped.min(body.len());
    let position = body[..stopped]
        .iter()
        .rposition(|b| !b.is_ascii_alphanumeric())
        .map_or(0, |i| i + 1);
    PgmqError::Validation(vec![json!({
        "type": "json_invalid",
        "loc": ["body", position],
        "msg": "JSON decode error",
        "input": {},
        "ctx": {"error": e.to_string()},
    })])
}

/// A lax integer, or the error type and message for `value`.
pub fn lax_int(value: &Value) -> Result<i64, (&'static str, &'static str)> {
    const NOT_INT: (&str, &str) = ("int_type", "Input should be a valid integer");
    match value {
        Value::Number(n) => n.as_i64().map_or_else(
            || match n.as_f64() {
                Some(f) if f.fract() == 0.0 && f.abs() < 9.0e18 => Ok(f as i64),
                Some(f) if f.is_finite() && f.fract() != 0.0 => Err((
                    "int_from_float",
                    "Input should be a valid integer, got a number with a fractional part",
                )),
                _ => Err(NOT_INT),
            },
            Ok,
        ),
        Value::Bool(b) => Ok(i64::from(*b)),
        Value::String(s) => s.trim().parse::<i64>().map_err(|_| {
            (
                "int_parsing",
                "Input should be a valid integer, unable to parse string as an integer",
            )
        }),
        _ => Err(NOT_INT),
    }
}

/// An integer or a date-time (pgmq's `Union[int, datetime]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntOrInstant {
    Int(i64),
    AtMs(i64),
}

/// Collects every field's failure, as pydantic reports them all at once.
pub struct Fields<'a> {
    object: &'a Map<String, Value>,
    raw: &'a BTreeMap<String, &'a RawValue>,
    errors: Vec<Value>,
}

impl<'a> Fields<'a> {
    pub fn new(body: &'a BodyObject<'a>) -> Self {
        Fields {
            object: &body.values,
            raw: &body.raw,
            errors: Vec::new(),
        }
    }

    fn loc(name: &str) -> Vec<Value> {
        vec!["body".into(), name.into()]
    }

    fn fail(&mut self, kind: &str, loc: Vec<Value>, msg: &str, input: &Value) {
        self.errors.push(item(kind, loc, msg, input));
    }

    /// `Some(value)` when present and not null.
    fn present(&mut self, name: &str, required: bool) -> Option<&'a Value> {
        match self.object.get(name) {
            Some(Value::Null) | None if required => {
                let input = Value::Object(self.object.clone());
                if self.object.contains_key(name) {
                    // A required field sent as null fails its type instead.
                    return Some(&NULL);
                }
                self.fail("missing", Self::loc(name), "Field required", &input);
                None
            }
            Some(Value::Null) | None => None,
            Some(v) => Some(v),
        }
    }

    /// An integer field: `default` when absent (null is accepted only if
    /// `nullable`).
    pub fn int(&mut self, name: &str, default: i64, nullable: bool) -> i64 {
        let value = match self.object.get(name) {
            None => return default,
            Some(Value::Null) if nullable => return default,
            Some(v) => v,
        };
        match lax_int(value) {
            Ok(n) => n,
            Err((kind, msg)) => {
                self.fail(kind, Self::loc(name), msg, value);
                default
            }
        }
    }

    /// A JSON object field, as the text the client sent.
    pub fn dict(&mut self, name: &str, required: bool) -> Option<&'a RawValue> {
        let value = self.present(name, required)?;
        match self.raw.get(name) {
            Some(raw) if is_object(raw) => Some(*raw),
            _ => {
                self.not_a_dict(Self::loc(name), value);
                None
            }
        }
    }

    fn not_a_dict(&mut self, loc: Vec<Value>, input: &Value) {
        self.fail(
            "dict_type",
            loc,
            "Input should be a valid dictionary",
            input,
        );
    }

    /// A list of JSON objects, each as the text the client sent.
    pub fn dict_list(&mut self, name: &str, required: bool) -> Option<Vec<&'a RawValue>> {
        let value = self.present(name, required)?;
        let items = self
            .raw
            .get(name)
            .and_then(|raw| serde_json::from_str::<Vec<&'a RawValue>>(raw.get()).ok());
        let Some(items) = items else {
            self.not_a_list(name, value);
            return None;
        };
        let mut out = Vec::with_capacity(items.len());
        for (i, raw) in items.into_iter().enumerate() {
            if is_object(raw) {
                out.push(raw);
            } else {
                let loc = vec!["body".into(), name.into(), i.into()];
                self.not_a_dict(loc, &lossy(raw.get()));
            }
        }
        Some(out)
    }

    /// A list of integers.
    pub fn int_list(&mut self, name: &str) -> Option<Vec<i64>> {
        let items = self.list(name, true)?;
        let mut out = Vec::with_capacity(items.len());
        for (i, v) in items.iter().enumerate() {
            match lax_int(v) {
                Ok(n) => out.push(n),
                Err((kind, msg)) => {
                    self.fail(kind, vec!["body".into(), name.into(), i.into()], msg, v)
                }
            }
        }
        Some(out)
    }

    fn list(&mut self, name: &str, required: bool) -> Option<&'a Vec<Value>> {
        match self.present(name, required)? {
            Value::Array(items) => Some(items),
            other => {
                self.not_a_list(name, other);
                None
            }
        }
    }

    fn not_a_list(&mut self, name: &str, input: &Value) {
        self.fail(
            "list_type",
            Self::loc(name),
            "Input should be a valid list",
            input,
        );
    }

    /// `Union[int, datetime]`: an integer, or an ISO-8601 date-time string.
    /// With `non_negative`, a negative integer fails as pgmq's `delay`
    /// validator does.
    pub fn int_or_instant(
        &mut self,
        name: &str,
        required: bool,
        non_negative: bool,
    ) -> Option<IntOrInstant> {
        let value = self.present(name, required)?;
        if let Value::Bool(_) = value {
            if non_negative {
                self.negative(name, value);
                return None;
            }
        }
        if let Ok(n) = lax_int(value) {
            if non_negative && n < 0 {
                self.negative(name, value);
                return None;
            }
            return Some(IntOrInstant::Int(n));
        }
        if let Some(ms) = value.as_str().and_then(parse_iso) {
            return Some(IntOrInstant::AtMs(ms));
        }
        let (kind, msg) = lax_int(value)
            .err()
            .unwrap_or(("int_type", "Input should be a valid integer"));
        self.fail(
            kind,
            vec!["body".into(), name.into(), "int".into()],
            msg,
            value,
        );
        self.fail(
            "datetime_from_date_parsing",
            vec!["body".into(), name.into(), "datetime".into()],
            "Input should be a valid datetime or date",
            value,
        );
        None
    }

    fn negative(&mut self, name: &str, value: &Value) {
        self.errors.push(json!({
            "type": "value_error",
            "loc": Self::loc(name),
            "msg": format!("Value error, {name} must be a non-negative integer or datetime"),
            "input": value,
            "ctx": {"error": {}},
        }));
    }

    /// `Ok` when every field validated.
    pub fn finish(self) -> Result<(), PgmqError> {
        if self.errors.is_empty() {
            Ok(())
        } else {
            Err(PgmqError::Validation(self.errors))
        }
    }
}

/// Whether a value as sent is a JSON object (the text of a valid value
/// starts with `{` exactly when it is one).
fn is_object(raw: &RawValue) -> bool {
    raw.get().starts_with('{')
}

/// A path parameter that must be an integer (`["path", name]`).
pub fn path_int(name: &str, text: &str) -> Result<i64, PgmqError> {
    text.parse::<i64>().map_err(|_| {
        PgmqError::Validation(vec![item(
            "int_parsing",
            vec!["path".into(), name.into()],
            "Input should be a valid integer, unable to parse string as an integer",
            &Value::String(text.to_owned()),
        )])
    })
}

/// A query parameter that must be a boolean, pydantic's spellings.
pub fn query_bool(name: &str, text: Option<&str>) -> Result<bool, PgmqError> {
    let Some(text) = text else {
        return Ok(false);
    };
    match text.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" | "t" | "y" => Ok(true),
        "false" | "0" | "no" | "off" | "f" | "n" => Ok(false),
        _ => Err(PgmqError::Validation(vec![item(
            "bool_parsing",
            vec!["query".into(), name.into()],
            "Input should be a valid boolean, unable to interpret input",
            &Value::String(text.to_owned()),
        )])),
    }
}
