//! The tree-walking evaluator, with one budget per evaluation.
//!
//! Everything a filter can make the Worker do in proportion to something
//! other than its own (bounded) size is charged to the [`Budget`]: node
//! evaluations and iterated or created elements (steps), bytes of values it
//! builds (memory), and bytes of text it searches plus the regular
//! expressions it compiles at run time (scan). Running out is a runtime
//! error, so the filter fails closed (docs/semantics.md#filters) within milliseconds
//! instead of holding the isolate.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::ast::BinOp;
use super::program::{Expr, Pred, Var};
use super::value::{equal, order, Value};
use super::{funcs, time, FilterInput};

/// Node evaluations plus elements iterated or created, per evaluation.
const STEPS: u64 = 1_000_000;
/// Bytes of strings, arrays and maps built (variables included), per
/// evaluation.
const MEMORY: u64 = 64 << 20;
/// Units of text work per evaluation: a byte compared or searched by a
/// string operation costs 1, a byte scanned by `matches` [`REGEX_BYTE`]
/// (its lazy DFA is slower, worst case ~0.2 s per MiB).
const SCAN: u64 = 64 << 20;
const REGEX_BYTE: u64 = 8;
/// Scan units per regular expression compiled at run time (a pattern that
/// is not a constant): a compile near the 1 MiB program limit takes ~10 ms
/// of optimised wasm, so at most 8 per evaluation; repeats of one pattern
/// within an evaluation are compiled once.
const REGEX_COMPILE: u64 = 8 << 20;

pub(super) const BUDGET_EXCEEDED: &str = "filter exceeded its evaluation budget";

pub(super) type Result<T> = std::result::Result<T, String>;

/// What one evaluation may still spend.
pub(super) struct Budget {
    steps: u64,
    memory: u64,
    scan: u64,
}

impl Budget {
    fn new() -> Budget {
        Budget {
            steps: STEPS,
            memory: MEMORY,
            scan: SCAN,
        }
    }
}

fn take(left: &mut u64, cost: u64) -> Result<()> {
    *left = left
        .checked_sub(cost)
        .ok_or_else(|| BUDGET_EXCEEDED.to_string())?;
    Ok(())
}

/// The regular expression behind `matches` (RE2 syntax, a search): program
/// and lazy-DFA cache capped at 1 MiB each (the defaults are 10 and 2 MiB).
pub(super) fn regex(pattern: &str) -> std::result::Result<regex::Regex, regex::Error> {
    regex::RegexBuilder::new(pattern)
        .size_limit(1 << 20)
        .dfa_size_limit(1 << 20)
        .build()
}

/// One evaluation of a filter against one message.
pub(super) struct Eval<'m, 'a> {
    pub(super) input: &'m FilterInput<'a>,
    /// Variables built on first use (only then: `body_text` and `body_json`
    /// cost nothing for filters that never reach them).
    vars: [Option<Value>; Var::COUNT],
    /// `let` values and predicates' `#` / `#index`, by slot.
    locals: Vec<Value>,
    budget: Budget,
    /// Patterns compiled during this evaluation.
    patterns: Vec<(Arc<str>, regex::Regex)>,
}

impl<'m, 'a> Eval<'m, 'a> {
    pub(super) fn new(input: &'m FilterInput<'a>) -> Self {
        Eval {
            input,
            vars: Default::default(),
            locals: Vec::new(),
            budget: Budget::new(),
            patterns: Vec::new(),
        }
    }

    /// Whether variable `var` has been built.
    #[cfg(test)]
    pub(super) fn materialised(&self, var: Var) -> bool {
        self.vars[var as usize].is_some()
    }

    pub(super) fn steps(&mut self, n: u64) -> Result<()> {
        take(&mut self.budget.steps, n)
    }

    pub(super) fn memory(&mut self, bytes: u64) -> Result<()> {
        take(&mut self.budget.memory, bytes)
    }

    pub(super) fn scan(&mut self, bytes: u64) -> Result<()> {
        take(&mut self.budget.scan, bytes)
    }

    fn var(&mut self, var: Var) -> Result<Value> {
        if let Some(value) = &self.vars[var as usize] {
            return Ok(value.clone());
        }
        let value = self.build(var);
        // A decoded JSON body holds about as much as the body, nested.
        let nested = if var == Var::BodyJson {
            self.input.body.len() as u64
        } else {
            0
        };
        self.memory(value.weight() + nested)?;
        self.vars[var as usize] = Some(value.clone());
        Ok(value)
    }

    fn build(&mut self, var: Var) -> Value {
        let m = self.input;
        match var {
            Var::Subject => Value::str(m.subject),
            Var::Properties => Value::Map(Arc::new(
                m.properties
                    .iter()
                    .map(|(k, v)| (k.clone(), Value::str(v)))
                    .collect(),
            )),
            Var::GroupId => Value::str(m.group_id),
            Var::CorrelationId => Value::str(m.correlation_id),
            Var::ReplyTo => Value::str(m.reply_to),
            Var::MessageId => Value::str(m.message_id),
            Var::ContentType => Value::str(m.content_type),
            Var::EnqueuedAt => Value::Time(time::from_millis(m.enqueued_at_ms)),
            Var::VisibleAt => Value::Time(time::from_millis(m.visible_at_ms)),
            Var::SubjectParts if m.subject.is_empty() => Value::array(Vec::new()),
            Var::SubjectParts => Value::array(m.subject.split('.').map(Value::str).collect()),
            Var::BodySize => Value::Int(i64::try_from(m.body.len()).unwrap_or(i64::MAX)),
            Var::PropertyKeys => Value::array(m.properties.keys().map(|k| Value::str(k)).collect()),
            Var::BodyText => Value::str(&String::from_utf8_lossy(m.body)),
            Var::BodyJson => body_json(m.content_type, m.body),
        }
    }

    pub(super) fn eval(&mut self, expr: &Expr) -> Result<Value> {
        self.steps(1)?;
        match expr {
            Expr::Const(v) => Ok(v.clone()),
            Expr::Var(var) => self.var(*var),
            Expr::Local(slot) => self
                .locals
                .get(*slot)
                .cloned()
                .ok_or_else(|| "internal error: unbound local".to_string()),
            Expr::Array(items) => {
                self.memory(16 * items.len() as u64)?;
                let mut values = Vec::with_capacity(items.len());
                for item in items {
                    values.push(self.eval(item)?);
                }
                Ok(Value::array(values))
            }
            Expr::Not(operand) => match self.eval(operand)? {
                Value::Bool(b) => Ok(Value::Bool(!b)),
                v => Err(format!("invalid operation: not on {}", v.type_name())),
            },
            Expr::Sign(negate, operand) => match (self.eval(operand)?, negate) {
                (v, false) if matches!(v, Value::Int(_) | Value::Float(_) | Value::Dur(_)) => Ok(v),
                (Value::Int(n), true) => Ok(Value::Int(n.wrapping_neg())),
                (Value::Float(f), true) => Ok(Value::Float(-f)),
                (Value::Dur(d), true) => Ok(Value::Dur(d.wrapping_neg())),
                (v, _) => Err(format!(
                    "invalid operation: {} on {}",
                    if *negate { "-" } else { "+" },
                    v.type_name()
                )),
            },
            Expr::Logic(and, items) => {
                for item in items {
                    match self.eval(item)? {
                        Value::Bool(b) if b != *and => return Ok(Value::Bool(b)),
                        Value::Bool(_) => {}
                        v => {
                            let op = if *and { "&&" } else { "||" };
                            return Err(format!(
                                "invalid operation: {op} (mismatched types {} and bool)",
                                v.type_name()
                            ));
                        }
                    }
                }
                Ok(Value::Bool(*and))
            }
            Expr::Binary(BinOp::Default, left, right) => match self.eval(left)? {
                Value::Nil => self.eval(right),
                v => Ok(v),
            },
            Expr::Binary(BinOp::In, key, map) if matches!(**map, Expr::Var(Var::Properties)) => {
                // Key presence without building the whole map.
                match self.eval(key)? {
                    Value::Str(k) => Ok(Value::Bool(self.input.properties.contains_key(&*k))),
                    v => Err(mismatch("in", v.type_name(), "map")),
                }
            }
            Expr::Binary(op, left, right) => {
                let a = self.eval(left)?;
                let b = self.eval(right)?;
                self.binary(*op, a, b)
            }
            Expr::Index {
                base,
                key,
                optional,
                zero_string,
            } => {
                if matches!(**base, Expr::Var(Var::Properties)) {
                    // `properties[k]` reads the message without building the map.
                    return match self.eval(key)? {
                        Value::Str(k) => Ok(Value::str(
                            self.input.properties.get(&*k).map_or("", String::as_str),
                        )),
                        k => Err(format!("cannot index map with {}", k.type_name())),
                    };
                }
                let base = self.eval(base)?;
                if *optional && matches!(base, Value::Nil) {
                    return Ok(Value::Nil);
                }
                let key = self.eval(key)?;
                index(&base, &key, *zero_string)
            }
            Expr::Slice(base, start, end) => {
                let base = self.eval(base)?;
                let start = self.bound(start.as_deref())?;
                let end = self.bound(end.as_deref())?;
                self.slice(&base, start, end)
            }
            Expr::Matches(text, regex) => {
                let text = self.eval(text)?;
                self.search(&text, regex)
            }
            Expr::Ternary(condition, then, other) => match self.eval(condition)? {
                Value::Bool(true) => self.eval(then),
                Value::Bool(false) => self.eval(other),
                v => Err(format!("condition must be bool, not {}", v.type_name())),
            },
            Expr::Let(value, body) => {
                let value = self.eval(value)?;
                let slot = self.locals.len();
                self.locals.push(value);
                let result = self.eval(body);
                self.locals.truncate(slot);
                result
            }
            Expr::Iterate(pred, array, body) => {
                let array = self.eval(array)?;
                let slot = self.locals.len();
                let result = self.iterate(*pred, &array, body.as_deref());
                self.locals.truncate(slot);
                result
            }
            Expr::Call(func, args) => {
                let mut values = Vec::with_capacity(args.len());
                for arg in args {
                    values.push(self.eval(arg)?);
                }
                funcs::call(self, *func, values)
            }
            Expr::Method(name, base) => match self.eval(base)? {
                Value::Time(nanos) => time::field(nanos, name)
                    .map(Value::Int)
                    .ok_or_else(|| format!("time has no method {name}")),
                Value::Dur(nanos) => time::duration_in(nanos, name)
                    .map(Value::Float)
                    .ok_or_else(|| format!("duration has no method {name}")),
                v => Err(format!("cannot call {name}() on {}", v.type_name())),
            },
        }
    }

    fn binary(&mut self, op: BinOp, a: Value, b: Value) -> Result<Value> {
        use Value::{Array, Bool, Dur, Float, Int, Str, Time};
        let bad = || mismatch(op.symbol(), a.type_name(), b.type_name());
        let float = |x: f64| Ok(Float(x));
        let numbers = super::value::number(&a).zip(super::value::number(&b));
        Ok(match op {
            BinOp::Eq => Bool(equal(&a, &b)),
            BinOp::Ne => Bool(!equal(&a, &b)),
            BinOp::Lt | BinOp::Gt | BinOp::Le | BinOp::Ge => {
                let ordering = order(&a, &b).map_err(|_| bad())?;
                Bool(ordering.is_some_and(|o| match op {
                    BinOp::Lt => o.is_lt(),
                    BinOp::Gt => o.is_gt(),
                    BinOp::Le => o.is_le(),
                    _ => o.is_ge(),
                }))
            }
            BinOp::In => match &b {
                Array(items) => {
                    self.steps(items.len() as u64)?;
                    Bool(items.iter().any(|item| equal(&a, item)))
                }
                Value::Map(members) => match &a {
                    Str(k) => Bool(members.contains_key(&**k)),
                    _ => return Err(bad()),
                },
                Value::Nil => Bool(false),
                _ => return Err(bad()),
            },
            BinOp::Contains | BinOp::StartsWith | BinOp::EndsWith => {
                let (Str(x), Str(y)) = (&a, &b) else {
                    return Err(bad());
                };
                let work = if op == BinOp::Contains {
                    x.len()
                } else {
                    y.len()
                };
                self.scan(work as u64)?;
                Bool(match op {
                    BinOp::Contains => x.contains(&**y),
                    BinOp::StartsWith => x.starts_with(&**y),
                    _ => x.ends_with(&**y),
                })
            }
            BinOp::Matches => {
                let (Str(text), Str(pattern)) = (&a, &b) else {
                    return Err(bad());
                };
                let at = self.pattern(pattern)?;
                self.scan(REGEX_BYTE.saturating_mul(text.len() as u64))?;
                // Borrowed, not cloned: a cloned `Regex` starts with an empty
                // lazy-DFA cache.
                Bool(self.patterns[at].1.is_match(text))
            }
            BinOp::Range => {
                let (Int(from), Int(to)) = (&a, &b) else {
                    return Err(bad());
                };
                let count = u64::try_from(i128::from(*to) - i128::from(*from) + 1).unwrap_or(0);
                self.steps(count)?;
                self.memory(count.saturating_mul(16))?;
                Value::array(if count == 0 {
                    Vec::new()
                } else {
                    (*from..=*to).map(Int).collect()
                })
            }
            BinOp::Add => match (&a, &b) {
                (Int(x), Int(y)) => Int(x.wrapping_add(*y)),
                (Str(x), Str(y)) => {
                    self.memory((x.len() + y.len()) as u64)?;
                    Value::str(&format!("{x}{y}"))
                }
                (Time(t), Dur(d)) | (Dur(d), Time(t)) => Time(shift(*t, *d)?),
                (Dur(x), Dur(y)) => Dur(x.wrapping_add(*y)),
                _ => match numbers {
                    Some((x, y)) => return float(x + y),
                    None => return Err(bad()),
                },
            },
            BinOp::Sub => match (&a, &b) {
                (Int(x), Int(y)) => Int(x.wrapping_sub(*y)),
                (Time(x), Time(y)) => Dur(x.saturating_sub(*y)),
                (Time(t), Dur(d)) => Time(shift(*t, d.checked_neg().ok_or_else(out_of_range)?)?),
                (Dur(x), Dur(y)) => Dur(x.wrapping_sub(*y)),
                _ => match numbers {
                    Some((x, y)) => return float(x - y),
                    None => return Err(bad()),
                },
            },
            BinOp::Mul => match (&a, &b) {
                (Int(x), Int(y)) => Int(x.wrapping_mul(*y)),
                (Dur(d), Int(n)) | (Int(n), Dur(d)) => Dur(d.wrapping_mul(*n)),
                _ => match numbers {
                    Some((x, y)) => return float(x * y),
                    None => return Err(bad()),
                },
            },
            BinOp::Div => match numbers {
                Some((x, y)) => Float(x / y),
                None => return Err(bad()),
            },
            BinOp::Pow => match numbers {
                Some((x, y)) => Float(x.powf(y)),
                None => return Err(bad()),
            },
            BinOp::Mod => match (&a, &b) {
                (Int(_), Int(0)) => return Err("integer divide by zero".to_string()),
                (Int(x), Int(y)) => Int(x.wrapping_rem(*y)),
                _ => return Err(bad()),
            },
            BinOp::Or | BinOp::And | BinOp::Default => return Err(bad()),
        })
    }

    /// The index of `pattern` among this evaluation's compiled patterns,
    /// compiling (and paying for) it the first time.
    fn pattern(&mut self, pattern: &Arc<str>) -> Result<usize> {
        if let Some(at) = self.patterns.iter().position(|(p, _)| p == pattern) {
            return Ok(at);
        }
        self.scan(REGEX_COMPILE.saturating_add(REGEX_BYTE * pattern.len() as u64))?;
        let compiled =
            regex(pattern).map_err(|e| format!("invalid regular expression {pattern:?}: {e}"))?;
        self.patterns.push((pattern.clone(), compiled));
        Ok(self.patterns.len() - 1)
    }

    fn search(&mut self, text: &Value, regex: &regex::Regex) -> Result<Value> {
        let Value::Str(text) = text else {
            return Err(mismatch("matches", text.type_name(), "string"));
        };
        self.scan(REGEX_BYTE.saturating_mul(text.len() as u64))?;
        Ok(Value::Bool(regex.is_match(text)))
    }

    fn bound(&mut self, bound: Option<&Expr>) -> Result<Option<i64>> {
        match bound.map(|b| self.eval(b)).transpose()? {
            None => Ok(None),
            Some(Value::Int(n)) => Ok(Some(n)),
            Some(v) => Err(format!("slice bounds must be int, not {}", v.type_name())),
        }
    }

    /// `a[s:e]` as expr slices: negative bounds count from the end, bounds
    /// are clamped to the array, and an empty range gives an empty slice.
    fn slice(&mut self, base: &Value, start: Option<i64>, end: Option<i64>) -> Result<Value> {
        let len = match base {
            Value::Array(items) => items.len(),
            Value::Str(s) => s.chars().count(),
            v => return Err(format!("cannot slice {}", v.type_name())),
        };
        let clamp = |bound: i64| {
            let len = i64::try_from(len).unwrap_or(i64::MAX);
            let at = if bound < 0 {
                bound.saturating_add(len)
            } else {
                bound
            };
            usize::try_from(at.clamp(0, len)).unwrap_or(0)
        };
        let from = start.map_or(0, clamp);
        let to = end.map_or(len, clamp).max(from);
        self.steps((to - from) as u64)?;
        match base {
            Value::Array(items) => {
                self.memory(16 * (to - from) as u64)?;
                Ok(Value::array(items[from..to].to_vec()))
            }
            Value::Str(s) => {
                let piece: String = s.chars().skip(from).take(to - from).collect();
                self.memory(piece.len() as u64)?;
                Ok(Value::str(&piece))
            }
            _ => Err("cannot slice".to_string()),
        }
    }

    fn iterate(&mut self, pred: Pred, array: &Value, body: Option<&Expr>) -> Result<Value> {
        let name = pred.name();
        let Value::Array(items) = array else {
            return Err(format!(
                "{name}() needs an array, not {}",
                array.type_name()
            ));
        };
        let slot = self.locals.len();
        self.locals.extend([Value::Nil, Value::Nil]);
        let mut found = 0i64;
        let mut kept = Vec::new();
        for (i, item) in items.iter().enumerate() {
            self.steps(1)?;
            let verdict = match body {
                Some(body) => {
                    self.locals[slot] = item.clone();
                    self.locals[slot + 1] = Value::Int(i64::try_from(i).unwrap_or(i64::MAX));
                    self.eval(body)?
                }
                None => item.clone(),
            };
            if pred == Pred::Map {
                self.memory(verdict.weight())?;
                kept.push(verdict);
                continue;
            }
            let Value::Bool(yes) = verdict else {
                return Err(format!(
                    "{name}() predicate returned {}, not bool",
                    verdict.type_name()
                ));
            };
            match (pred, yes) {
                (Pred::All, false) => return Ok(Value::Bool(false)),
                (Pred::Any, true) => return Ok(Value::Bool(true)),
                (Pred::None, true) => return Ok(Value::Bool(false)),
                (Pred::One, true) if found == 1 => return Ok(Value::Bool(false)),
                (Pred::Filter, true) => {
                    self.memory(16)?;
                    kept.push(item.clone());
                }
                _ => {}
            }
            found += i64::from(yes);
        }
        Ok(match pred {
            Pred::All | Pred::None => Value::Bool(true),
            Pred::Any => Value::Bool(false),
            Pred::One => Value::Bool(found == 1),
            Pred::Count => Value::Int(found),
            Pred::Filter | Pred::Map => Value::array(kept),
        })
    }
}

pub(super) fn mismatch(op: &str, a: &str, b: &str) -> String {
    format!("invalid operation: {op} (mismatched types {a} and {b})")
}

fn out_of_range() -> String {
    "time out of range".to_string()
}

/// A time moved by a duration (both nanoseconds); beyond `i64` is an error.
fn shift(time: i64, by: i64) -> Result<i64> {
    time.checked_add(by).ok_or_else(out_of_range)
}

/// Indexing (docs/semantics.md#filters): arrays by int (negative from the end, out of
/// range is an error), maps by string (missing is nil, or `""` for a
/// `map[string]string`).
fn index(base: &Value, key: &Value, zero_string: bool) -> Result<Value> {
    match (base, key) {
        (Value::Array(items), Value::Int(i)) => {
            let len = i64::try_from(items.len()).unwrap_or(i64::MAX);
            let at = if *i < 0 { i.saturating_add(len) } else { *i };
            usize::try_from(at)
                .ok()
                .and_then(|at| items.get(at))
                .cloned()
                .ok_or_else(|| format!("index out of range: {i} (array length is {len})"))
        }
        (Value::Map(members), Value::Str(k)) => Ok(match members.get(&**k) {
            Some(v) => v.clone(),
            None if zero_string => Value::str(""),
            None => Value::Nil,
        }),
        (Value::Nil, k) => Err(format!(
            "cannot fetch {} from nil",
            super::value::to_text(k).unwrap_or_default()
        )),
        (b, k) => Err(format!(
            "cannot index {} with {}",
            b.type_name(),
            k.type_name()
        )),
    }
}

/// `body_json` (docs/semantics.md#filters): the body as a JSON object when the content
/// type is empty or contains `json` (any case); otherwise, or when the body
/// is not a JSON object, an empty map. Numbers become floats, `null` nil.
fn body_json(content_type: &str, body: &[u8]) -> Value {
    let empty = || Value::Map(Arc::new(BTreeMap::new()));
    if !(content_type.is_empty() || content_type.to_ascii_lowercase().contains("json")) {
        return empty();
    }
    match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(object @ serde_json::Value::Object(_)) => from_json(object),
        _ => empty(),
    }
}

/// serde_json limits nesting to 128 levels while parsing, which bounds this
/// recursion.
fn from_json(json: serde_json::Value) -> Value {
    match json {
        serde_json::Value::Null => Value::Nil,
        serde_json::Value::Bool(b) => Value::Bool(b),
        serde_json::Value::Number(n) => n.as_f64().map_or(Value::Nil, Value::Float),
        serde_json::Value::String(s) => Value::str(&s),
        serde_json::Value::Array(items) => Value::array(items.into_iter().map(from_json).collect()),
        serde_json::Value::Object(members) => Value::Map(Arc::new(
            members
                .into_iter()
                .map(|(k, v)| (k, from_json(v)))
                .collect(),
        )),
    }
}
