//! Builtin functions without a predicate (docs/semantics.md#filters). Arity and
//! static types were checked at compile time; `any` arguments are checked
//! here, and everything a call builds or reads is charged to the evaluation
//! budget.

use std::sync::Arc;

use super::eval::{Eval, Result};
use super::program::Func;
use super::time;
use super::value::{to_text, Value};

/// 2^63: the floats in `-I64_SPAN..I64_SPAN` are exactly those `as i64`
/// converts without saturating (NaN and the infinities fall outside).
const I64_SPAN: f64 = 9_223_372_036_854_775_808.0;

fn wrong(name: &str, wanted: &str, got: &Value) -> String {
    format!("{name}() needs {wanted}, not {}", got.type_name())
}

fn text<'v>(name: &str, v: Option<&'v Value>) -> Result<&'v Arc<str>> {
    match v {
        Some(Value::Str(s)) => Ok(s),
        Some(v) => Err(wrong(name, "a string", v)),
        None => Err(format!("{name}(): missing argument")),
    }
}

fn int(name: &str, v: Option<&Value>) -> Result<i64> {
    match v {
        Some(Value::Int(n)) => Ok(*n),
        Some(v) => Err(wrong(name, "an integer", v)),
        None => Err(format!("{name}(): missing argument")),
    }
}

fn string_result(ev: &mut Eval<'_, '_>, s: String) -> Result<Value> {
    ev.memory(s.len() as u64)?;
    Ok(Value::str(&s))
}

pub(super) fn call(ev: &mut Eval<'_, '_>, func: Func, args: Vec<Value>) -> Result<Value> {
    let first = args.first();
    match func {
        Func::Len => match first {
            Some(Value::Str(s)) => {
                ev.scan(s.len() as u64)?;
                Ok(Value::Int(s.chars().count() as i64))
            }
            Some(Value::Array(items)) => Ok(Value::Int(items.len() as i64)),
            Some(Value::Map(members)) => Ok(Value::Int(members.len() as i64)),
            Some(v) => Err(format!("invalid argument for len ({})", v.type_name())),
            None => Err("len(): missing argument".to_string()),
        },
        Func::First | Func::Last => match first {
            Some(Value::Array(items)) => Ok(if func == Func::First {
                items.first()
            } else {
                items.last()
            }
            .cloned()
            .unwrap_or(Value::Nil)),
            Some(v) => Err(wrong(
                if func == Func::First { "first" } else { "last" },
                "an array",
                v,
            )),
            None => Err("first(): missing argument".to_string()),
        },
        Func::Lower => {
            let s = text("lower", first)?.to_lowercase();
            string_result(ev, s)
        }
        Func::Upper => {
            let s = text("upper", first)?.to_uppercase();
            string_result(ev, s)
        }
        Func::Trim => {
            let s = text("trim", first)?;
            // A trim may read all of `s` and keep nothing: charged as read.
            ev.scan(s.len() as u64)?;
            let trimmed = match args.get(1) {
                None => s.trim(),
                cutset => {
                    let cutset = text("trim", cutset)?;
                    s.trim_matches(|c| cutset.contains(c))
                }
            };
            string_result(ev, trimmed.to_string())
        }
        Func::Split => {
            let s = text("split", first)?;
            let separator = text("split", args.get(1))?;
            let limit = match args.get(2) {
                None => -1,
                n => int("split", n)?,
            };
            split(ev, s, separator, limit)
        }
        Func::Join => {
            let Some(Value::Array(items)) = first else {
                return Err(wrong("join", "an array", first.unwrap_or(&Value::Nil)));
            };
            let separator = match args.get(1) {
                None => "",
                s => text("join", s)?,
            };
            let mut parts = Vec::with_capacity(items.len());
            for item in items.iter() {
                parts.push(&**text("join", Some(item))?);
            }
            let size = separator.len().saturating_mul(items.len())
                + parts.iter().map(|p| p.len()).sum::<usize>();
            ev.memory(size as u64)?;
            Ok(Value::str(&parts.join(separator)))
        }
        Func::Abs => match first {
            Some(Value::Int(n)) => Ok(Value::Int(n.wrapping_abs())),
            Some(Value::Float(f)) => Ok(Value::Float(f.abs())),
            Some(v) => Err(format!("invalid argument for abs ({})", v.type_name())),
            None => Err("abs(): missing argument".to_string()),
        },
        Func::Int => match first {
            Some(Value::Int(n)) => Ok(Value::Int(*n)),
            // Truncation toward zero, as Go converts; NaN and out-of-range
            // values are errors rather than Go's unspecified result.
            Some(Value::Float(f)) if (-I64_SPAN..I64_SPAN).contains(f) => Ok(Value::Int(*f as i64)),
            Some(Value::Str(s)) => {
                ev.scan(s.len() as u64)?;
                s.parse()
                    .map(Value::Int)
                    .map_err(|_| format!("int(): invalid syntax {s:?}"))
            }
            Some(v) => Err(format!("int(): cannot convert {}", v.type_name())),
            None => Err("int(): missing argument".to_string()),
        },
        Func::Float => match first {
            Some(Value::Int(n)) => Ok(Value::Float(*n as f64)),
            Some(Value::Float(f)) => Ok(Value::Float(*f)),
            Some(Value::Str(s)) => {
                ev.scan(s.len() as u64)?;
                s.parse()
                    .map(Value::Float)
                    .map_err(|_| format!("float(): invalid syntax {s:?}"))
            }
            Some(v) => Err(format!("float(): cannot convert {}", v.type_name())),
            None => Err("float(): missing argument".to_string()),
        },
        Func::String => {
            let value = first.unwrap_or(&Value::Nil);
            // Bounded by the memory already charged for the value itself.
            let s = to_text(value)
                .ok_or_else(|| format!("string(): cannot convert {}", value.type_name()))?;
            string_result(ev, s)
        }
        Func::Keys | Func::Values => {
            let Some(Value::Map(members)) = first else {
                return Err(wrong("keys", "a map", first.unwrap_or(&Value::Nil)));
            };
            ev.memory(16 * members.len() as u64)?;
            Ok(Value::array(if func == Func::Keys {
                members.keys().map(|k| Value::str(k)).collect()
            } else {
                members.values().cloned().collect()
            }))
        }
        Func::Units(name, unit) => {
            let n = int(name, first)?;
            n.checked_mul(unit)
                .map(Value::Dur)
                .ok_or_else(|| format!("{name}({n}): duration out of range"))
        }
        Func::Duration => {
            let s = text("duration", first)?;
            ev.scan(s.len() as u64)?;
            time::parse_duration(s).map(Value::Dur)
        }
        Func::Now => Ok(Value::Time(time::from_millis(ev.input.now_ms))),
    }
}

/// `split(s, sep[, n])` with Go's `strings.SplitN` semantics: `n < 0` all
/// pieces, `n == 0` none, `n > 0` at most `n` (the last holds the rest); an
/// empty separator splits into characters.
fn split(ev: &mut Eval<'_, '_>, s: &str, separator: &str, limit: i64) -> Result<Value> {
    if limit == 0 {
        return Ok(Value::array(Vec::new()));
    }
    let max = usize::try_from(limit).unwrap_or(usize::MAX);
    ev.scan(s.len() as u64)?;
    let count = if separator.is_empty() {
        s.chars().count()
    } else {
        s.matches(separator).count() + 1
    }
    .min(max);
    ev.steps(count as u64)?;
    ev.memory(16 * count as u64 + s.len() as u64)?;
    let pieces = if separator.is_empty() {
        let mut pieces = Vec::with_capacity(count);
        let mut rest = s;
        while let Some(c) = rest.chars().next() {
            if pieces.len() + 1 == count {
                pieces.push(Value::str(rest));
                break;
            }
            let (head, tail) = rest.split_at(c.len_utf8());
            pieces.push(Value::str(head));
            rest = tail;
        }
        pieces
    } else {
        s.splitn(count, separator).map(Value::str).collect()
    };
    Ok(Value::array(pieces))
}
