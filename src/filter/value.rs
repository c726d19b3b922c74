//! Run-time values, their equality and ordering, and their text form.
//!
//! Strings, arrays and maps are shared (`Arc`), so reading a variable or
//! passing a value on never copies a message body; compiled filters hold
//! constants of this type and must stay `Send + Sync`.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

#[derive(Debug, Clone)]
pub(super) enum Value {
    Nil,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(Arc<str>),
    /// Nanoseconds since the Unix epoch, UTC.
    Time(i64),
    /// Nanoseconds, like Go's `time.Duration`.
    Dur(i64),
    Array(Arc<Vec<Value>>),
    Map(Arc<BTreeMap<String, Value>>),
}

impl Value {
    pub(super) fn str(s: &str) -> Value {
        Value::Str(Arc::from(s))
    }

    pub(super) fn array(items: Vec<Value>) -> Value {
        Value::Array(Arc::new(items))
    }

    pub(super) fn type_name(&self) -> &'static str {
        match self {
            Value::Nil => "nil",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Float(_) => "float",
            Value::Str(_) => "string",
            Value::Time(_) => "time",
            Value::Dur(_) => "duration",
            Value::Array(_) => "array",
            Value::Map(_) => "map",
        }
    }

    /// Approximate memory a value holds, for the evaluation budget.
    pub(super) fn weight(&self) -> u64 {
        16 + match self {
            Value::Str(s) => s.len() as u64,
            Value::Array(items) => 16 * items.len() as u64,
            Value::Map(members) => 48 * members.len() as u64,
            _ => 0,
        }
    }
}

/// `==`: values of different types are unequal, except that ints and floats
/// compare as numbers (docs/semantics.md#filters); arrays and maps compare deeply.
pub(super) fn equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Nil, Value::Nil) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Int(x), Value::Int(y)) => x == y,
        (Value::Str(x), Value::Str(y)) => x == y,
        (Value::Time(x), Value::Time(y)) | (Value::Dur(x), Value::Dur(y)) => x == y,
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y.iter()).all(|(a, b)| equal(a, b))
        }
        (Value::Map(x), Value::Map(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y.iter())
                    .all(|((k, a), (l, b))| k == l && equal(a, b))
        }
        _ => match (number(a), number(b)) {
            (Some(x), Some(y)) => x == y,
            _ => false,
        },
    }
}

/// A number as a float (ints and floats mix in arithmetic and comparisons).
pub(super) fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Int(n) => Some(*n as f64),
        Value::Float(f) => Some(*f),
        _ => None,
    }
}

/// `<`, `>`, … on numbers, strings, times and durations; `None` when the
/// operands cannot be ordered (or a float is NaN, when every comparison is
/// false).
pub(super) fn order(
    a: &Value,
    b: &Value,
) -> Result<Option<Ordering>, (&'static str, &'static str)> {
    Ok(match (a, b) {
        (Value::Int(x), Value::Int(y)) => Some(x.cmp(y)),
        (Value::Str(x), Value::Str(y)) => Some(x.cmp(y)),
        (Value::Time(x), Value::Time(y)) | (Value::Dur(x), Value::Dur(y)) => Some(x.cmp(y)),
        _ => match (number(a), number(b)) {
            (Some(x), Some(y)) => x.partial_cmp(&y),
            _ => return Err((a.type_name(), b.type_name())),
        },
    })
}

/// `string(x)`: the text Go's `fmt` prints for `%v`, as expr's `string()`
/// does (`1.0` is `"1"`, `1e6` is `"1e+06"`, arrays `[a b]`, maps
/// `map[k:v]`). `None` for times and durations, which the checker keeps out.
pub(super) fn to_text(v: &Value) -> Option<String> {
    let mut out = String::new();
    write_text(&mut out, v)?;
    Some(out)
}

fn write_text(out: &mut String, v: &Value) -> Option<()> {
    match v {
        Value::Nil => out.push_str("<nil>"),
        Value::Bool(b) => {
            let _ = write!(out, "{b}");
        }
        Value::Int(n) => {
            let _ = write!(out, "{n}");
        }
        Value::Float(f) => out.push_str(&go_float(*f)),
        Value::Str(s) => out.push_str(s),
        Value::Time(_) | Value::Dur(_) => return None,
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                write_text(out, item)?;
            }
            out.push(']');
        }
        Value::Map(members) => {
            out.push_str("map[");
            for (i, (k, item)) in members.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                out.push_str(k);
                out.push(':');
                write_text(out, item)?;
            }
            out.push(']');
        }
    }
    Some(())
}

/// A float as Go's `%v` (`strconv.FormatFloat(f, 'g', -1, 64)`): the
/// shortest digits that round-trip, in exponent form when the decimal
/// exponent is below -4 or at least 6 (Go decides with precision 6 when the
/// precision is "shortest").
fn go_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".to_string();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.to_string();
    }
    // Rust's `{:e}` gives the same shortest round-trip digits: `d.ddde±x`.
    let sci = format!("{:e}", f.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let sign = if f.is_sign_negative() && f != 0.0 {
        "-"
    } else {
        ""
    };
    if !(-4..6).contains(&exp) {
        let (head, tail) = digits.split_at(1);
        let dot = if tail.is_empty() { "" } else { "." };
        let esign = if exp < 0 { '-' } else { '+' };
        return format!("{sign}{head}{dot}{tail}e{esign}{:02}", exp.abs());
    }
    let point = exp + 1; // digits before the decimal point
    let text = if point <= 0 {
        format!("0.{}{digits}", "0".repeat(point.unsigned_abs() as usize))
    } else if point as usize >= digits.len() {
        format!("{digits}{}", "0".repeat(point as usize - digits.len()))
    } else {
        let (int, frac) = digits.split_at(point as usize);
        format!("{int}.{frac}")
    };
    format!("{sign}{text}")
}

#[cfg(test)]
mod tests {
    use super::go_float;

    #[test]
    fn floats_print_as_go_does() {
        for (f, text) in [
            (1.0, "1"),
            (1.5, "1.5"),
            (-0.25, "-0.25"),
            (100000.0, "100000"),
            (1e6, "1e+06"),
            (1234567.0, "1.234567e+06"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1e21, "1e+21"),
            (0.0, "0"),
            (f64::INFINITY, "+Inf"),
        ] {
            assert_eq!(go_float(f), text, "{f}");
        }
    }
}
