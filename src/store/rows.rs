//! Typed, panic-free access to result rows.

use super::hrana::Value;
use super::StoreError;

/// A column that was missing or of an unexpected type: a bug in our SQL or
/// a foreign schema, reported as a database error rather than a panic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowError(pub String);

impl From<RowError> for StoreError {
    fn from(e: RowError) -> Self {
        StoreError::Failed(e.0)
    }
}

/// One result row.
#[derive(Debug, Clone, Copy)]
pub struct Row<'a> {
    values: &'a [Value],
}

impl<'a> Row<'a> {
    pub(crate) fn new(values: &'a [Value]) -> Self {
        Row { values }
    }

    fn get(&self, i: usize) -> Result<&'a Value, RowError> {
        self.values
            .get(i)
            .ok_or_else(|| RowError(format!("result column {i} missing")))
    }

    /// An INTEGER column; NULL reads as 0.
    pub fn int(&self, i: usize) -> Result<i64, RowError> {
        match self.get(i)? {
            Value::Integer { value } => Ok(*value),
            Value::Null => Ok(0),
            Value::Float { value } => Ok(*value as i64),
            other => Err(RowError(format!(
                "column {i}: expected integer, got {other:?}"
            ))),
        }
    }

    /// A TEXT column; NULL reads as `None`.
    pub fn opt_text(&self, i: usize) -> Result<Option<&'a str>, RowError> {
        match self.get(i)? {
            Value::Text { value } => Ok(Some(value.as_str())),
            Value::Null => Ok(None),
            other => Err(RowError(format!(
                "column {i}: expected text, got {other:?}"
            ))),
        }
    }

    /// A TEXT column; NULL reads as "".
    pub fn text(&self, i: usize) -> Result<&'a str, RowError> {
        Ok(self.opt_text(i)?.unwrap_or(""))
    }

    /// A BLOB column as standard padded base64, re-padded without decoding
    /// (servers may omit padding). NULL and zero-length read as "".
    pub fn blob_base64(&self, i: usize) -> Result<String, RowError> {
        match self.get(i)? {
            Value::Blob { base64 } => {
                let trimmed = base64.trim_end_matches('=');
                let mut padded = String::with_capacity(trimmed.len() + 3);
                padded.push_str(trimmed);
                while padded.len() % 4 != 0 {
                    padded.push('=');
                }
                Ok(padded)
            }
            Value::Null => Ok(String::new()),
            other => Err(RowError(format!(
                "column {i}: expected blob, got {other:?}"
            ))),
        }
    }
}
