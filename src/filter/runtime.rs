//! Evaluation: the message as expr variables, and the functions the lowered
//! program (`check.rs`) calls.
//!
//! Every function here returns an error instead of panicking, and every
//! construct that can make evaluation allocate or loop out of proportion to
//! the message draws on a per-evaluation budget (`BUDGET`), like expr's
//! memory budget: a filter that exhausts it fails closed instead of taking the
//! isolate down with an out-of-memory abort.

use std::cell::{Cell, OnceCell};

use expr::{Context, ContextProvider, Environment, Program, Value};

use super::time;
use super::FilterInput;

type Outcome = expr::Result<Value>;

fn fail<T>(message: impl Into<String>) -> expr::Result<T> {
    Err(expr::Error::ExprError(message.into()))
}

// ---------------------------------------------------------------------------
// Budget.

/// Predicate evaluations plus array elements created, per evaluation.
const STEP_BUDGET: u64 = 1_000_000;
/// Bytes copied out of variables, concatenated or joined, per evaluation.
const BYTE_BUDGET: u64 = 64 << 20;
/// Bytes searched by `matches`, per evaluation (a lazy DFA scans a MiB in
/// milliseconds, but a pathological pattern can take ~0.2 s).
const SCAN_BUDGET: u64 = 8 << 20;

thread_local! {
    /// Remaining (steps, bytes, scanned) of the evaluation on this thread.
    static BUDGET: Cell<(u64, u64, u64)> = const { Cell::new((0, 0, 0)) };
}

/// Starts a fresh budget for one evaluation.
pub(super) fn reset_budget() {
    let _ = BUDGET.try_with(|b| b.set((STEP_BUDGET, BYTE_BUDGET, SCAN_BUDGET)));
}

/// Takes `steps`, `bytes` and `scanned` from the budget, or fails.
fn spend(steps: u64, bytes: u64, scanned: u64) -> expr::Result<()> {
    let ok = BUDGET
        .try_with(|b| {
            let (s, y, r) = b.get();
            let left = (
                s.checked_sub(steps),
                y.checked_sub(bytes),
                r.checked_sub(scanned),
            );
            if let (Some(s), Some(y), Some(r)) = left {
                b.set((s, y, r));
                true
            } else {
                false
            }
        })
        .unwrap_or(false);
    if ok {
        Ok(())
    } else {
        fail("filter exceeded its evaluation budget")
    }
}

/// Approximate size of a value in bytes (8 per value plus string contents).
fn weight(value: &Value) -> u64 {
    let mut total = 0u64;
    let mut stack = vec![value];
    while let Some(v) = stack.pop() {
        total = total.saturating_add(8);
        match v {
            Value::String(s) => total = total.saturating_add(s.len() as u64),
            Value::Bytes(b) => total = total.saturating_add(b.len() as u64),
            Value::Array(items) => stack.extend(items),
            Value::Map(m) => {
                for (k, v) in m {
                    total = total.saturating_add(k.len() as u64);
                    stack.push(v);
                }
            }
            Value::KeyedMap(pairs) => {
                for (k, v) in pairs {
                    stack.push(k);
                    stack.push(v);
                }
            }
            _ => {}
        }
    }
    total
}

/// Charges for a value copied out of a variable or produced by `map`.
fn charged(value: Value) -> Outcome {
    spend(0, weight(&value), 0)?;
    Ok(value)
}

// ---------------------------------------------------------------------------
// The message as variables.

/// Variable names, in the order of `Message`'s cells.
const VARIABLES: [&str; 14] = [
    "subject",
    "properties",
    "group_id",
    "correlation_id",
    "reply_to",
    "message_id",
    "content_type",
    "enqueued_at",
    "visible_at",
    "subject_parts",
    "body_size",
    "property_keys",
    "body_text",
    "body_json",
];

/// A message seen as filter variables. Each variable is built on first use
/// and only then, so `body_text` and `body_json` cost nothing for filters
/// that do not reach them.
pub(super) struct Message<'m, 'a> {
    input: &'m FilterInput<'a>,
    cells: [OnceCell<Value>; VARIABLES.len()],
}

impl<'m, 'a> Message<'m, 'a> {
    pub(super) fn new(input: &'m FilterInput<'a>) -> Self {
        Message {
            input,
            cells: Default::default(),
        }
    }

    /// Whether variable `name` has been built.
    #[cfg(test)]
    pub(super) fn materialised(&self, name: &str) -> bool {
        VARIABLES
            .iter()
            .position(|v| *v == name)
            .is_some_and(|i| self.cells[i].get().is_some())
    }

    fn build(&self, name: &str) -> Value {
        let m = self.input;
        let text = |s: &str| Value::String(s.to_string());
        match name {
            "subject" => text(m.subject),
            "properties" => Value::Map(
                m.properties
                    .iter()
                    .map(|(k, v)| (k.clone(), text(v)))
                    .collect(),
            ),
            "group_id" => text(m.group_id),
            "correlation_id" => text(m.correlation_id),
            "reply_to" => text(m.reply_to),
            "message_id" => text(m.message_id),
            "content_type" => text(m.content_type),
            "enqueued_at" => Value::Integer(time::from_millis(m.enqueued_at_ms)),
            "visible_at" => Value::Integer(time::from_millis(m.visible_at_ms)),
            "subject_parts" if m.subject.is_empty() => Value::Array(Vec::new()),
            "subject_parts" => Value::Array(m.subject.split('.').map(text).collect()),
            "body_size" => Value::Integer(i64::try_from(m.body.len()).unwrap_or(i64::MAX)),
            "property_keys" => Value::Array(m.properties.keys().map(|k| text(k)).collect()),
            "body_text" => Value::String(String::from_utf8_lossy(m.body).into_owned()),
            "body_json" => body_json(m.content_type, m.body),
            _ => Value::Nil,
        }
    }
}

impl ContextProvider for Message<'_, '_> {
    fn get(&self, key: &str) -> Option<&Value> {
        let i = VARIABLES.iter().position(|v| *v == key)?;
        Some(self.cells[i].get_or_init(|| self.build(key)))
    }

    fn to_context(&self) -> Context {
        VARIABLES
            .iter()
            .filter_map(|k| Some((*k, self.get(k)?.clone())))
            .collect()
    }
}

/// `body_json`: the body as a JSON object when the content type allows JSON
/// (empty, or containing `json` in any case), else — or when the body is not
/// a JSON object — an empty map. Numbers become floats, `null` nil.
fn body_json(content_type: &str, body: &[u8]) -> Value {
    let empty = || Value::Map(Default::default());
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
        serde_json::Value::String(s) => Value::String(s),
        serde_json::Value::Array(items) => Value::Array(items.into_iter().map(from_json).collect()),
        serde_json::Value::Object(members) => Value::Map(
            members
                .into_iter()
                .map(|(k, v)| (k, from_json(v)))
                .collect(),
        ),
    }
}

/// The scope of one predicate evaluation: `#` and `#index` over the caller's.
struct Item<'p> {
    parent: &'p dyn ContextProvider,
    item: Value,
    index: Value,
}

impl ContextProvider for Item<'_> {
    fn get(&self, key: &str) -> Option<&Value> {
        match key {
            "#" => Some(&self.item),
            "#index" => Some(&self.index),
            _ => self.parent.get(key),
        }
    }

    fn to_context(&self) -> Context {
        let mut context = self.parent.to_context();
        context.insert("#", self.item.clone());
        context.insert("#index", self.index.clone());
        context
    }
}

// ---------------------------------------------------------------------------
// Helpers.

pub(super) fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Integer(_) => "int",
        Value::Bool(_) => "bool",
        Value::Float(_) => "float",
        Value::Nil => "nil",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Bytes(_) => "bytes",
        Value::Map(_) | Value::KeyedMap(_) => "map",
    }
}

fn int_arg(name: &str, value: Option<&Value>) -> expr::Result<i64> {
    match value {
        Some(Value::Integer(n)) => Ok(*n),
        Some(v) => fail(format!("{name}() needs an integer, not {}", type_name(v))),
        None => fail(format!("{name}(): missing argument")),
    }
}

fn str_arg<'v>(name: &str, value: Option<&'v Value>) -> expr::Result<&'v str> {
    match value {
        Some(Value::String(s)) => Ok(s),
        Some(v) => fail(format!("{name}() needs a string, not {}", type_name(v))),
        None => fail(format!("{name}(): missing argument")),
    }
}

/// The array a predicate builtin iterates.
fn array_arg(name: &str, args: Vec<Value>) -> expr::Result<Vec<Value>> {
    match args.into_iter().next() {
        Some(Value::Array(items)) => Ok(items),
        Some(v) => fail(format!("{name}() needs an array, not {}", type_name(&v))),
        None => fail(format!("{name}(): missing argument")),
    }
}

/// Runs a predicate for one element.
fn test(
    env: &Environment,
    ctx: &dyn ContextProvider,
    predicate: Option<&Program>,
    item: &Value,
    index: usize,
) -> Outcome {
    let Some(predicate) = predicate else {
        return fail("missing predicate");
    };
    spend(1, 0, 0)?;
    let scope = Item {
        parent: ctx,
        item: item.clone(),
        index: Value::Integer(i64::try_from(index).unwrap_or(i64::MAX)),
    };
    env.run(predicate, &scope)
}

/// A predicate's verdict; anything but a boolean is an error (expr-lang would
/// treat it as "no" or "yes" depending on the builtin).
fn truth(name: &str, value: Value) -> expr::Result<bool> {
    match value {
        Value::Bool(b) => Ok(b),
        v => fail(format!(
            "{name}() predicate returned {}, not bool",
            type_name(&v)
        )),
    }
}

/// Indexing with the spec's semantics (expr-lang yields nil for an index out
/// of range and for a missing `properties` key).
fn index(base: &Value, key: &Value, mode: i64) -> Outcome {
    let optional = mode & 1 != 0;
    let zero_string = mode & 2 != 0;
    match (base, key) {
        (Value::Nil, _) if optional => Ok(Value::Nil),
        (Value::Array(items), Value::Integer(i)) => {
            let len = i64::try_from(items.len()).unwrap_or(i64::MAX);
            let at = if *i < 0 { i + len } else { *i };
            match usize::try_from(at).ok().and_then(|at| items.get(at)) {
                Some(item) => Ok(item.clone()),
                None => fail(format!("index out of range: {i} (array length is {len})")),
            }
        }
        (Value::Map(members), Value::String(k)) => Ok(match members.get(k) {
            Some(v) => v.clone(),
            None if zero_string => Value::String(String::new()),
            None => Value::Nil,
        }),
        (Value::Nil, k) => fail(format!("cannot fetch {k} from nil")),
        (b, k) => fail(format!(
            "cannot index {} with {}",
            type_name(b),
            type_name(k)
        )),
    }
}

/// The bounded regular expression used for `matches`: compiled program and
/// lazy-DFA cache capped at 1 MiB each (the defaults are 10 and 2 MiB).
pub(super) fn regex(pattern: &str) -> Result<regex::Regex, regex::Error> {
    regex::RegexBuilder::new(pattern)
        .size_limit(1 << 20)
        .dfa_size_limit(1 << 20)
        .build()
}

/// `seconds()` … `weeks()`: the unit code the lowered program passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum DurUnit {
    Seconds = 1,
    Minutes = 2,
    Hours = 3,
    Days = 4,
    Weeks = 5,
}

impl DurUnit {
    pub(super) fn from_function(name: &str) -> Option<DurUnit> {
        Some(match name {
            "seconds" => DurUnit::Seconds,
            "minutes" => DurUnit::Minutes,
            "hours" => DurUnit::Hours,
            "days" => DurUnit::Days,
            "weeks" => DurUnit::Weeks,
            _ => return None,
        })
    }

    fn from_code(code: i64) -> Option<(&'static str, i64)> {
        Some(match code {
            1 => ("seconds", time::NANOS_PER_SECOND),
            2 => ("minutes", time::NANOS_PER_MINUTE),
            3 => ("hours", time::NANOS_PER_HOUR),
            4 => ("days", time::NANOS_PER_DAY),
            5 => ("weeks", time::NANOS_PER_WEEK),
            _ => return None,
        })
    }
}

/// Wall-clock time in nanoseconds (for `now()`).
fn now_nanos() -> i64 {
    #[cfg(target_arch = "wasm32")]
    let ms = i64::try_from(worker::Date::now().as_millis()).unwrap_or(i64::MAX);
    #[cfg(not(target_arch = "wasm32"))]
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    time::from_millis(ms)
}

// ---------------------------------------------------------------------------
// The environment.

/// expr-lang's builtins plus ours; `regexes` are the filter's constant
/// `matches` patterns, referred to by index.
pub(super) fn environment(regexes: Vec<regex::Regex>) -> Environment<'static> {
    let mut env = Environment::new();

    env.add_function("__var", |c| {
        let name = str_arg("__var", c.args.first())?;
        match c.ctx.get(name) {
            Some(v) => charged(v.clone()),
            None => fail(format!("unknown name {name}")),
        }
    });
    env.add_function("__vidx", |c| {
        let name = str_arg("__vidx", c.args.first())?;
        let Some(base) = c.ctx.get(name) else {
            return fail(format!("unknown name {name}"));
        };
        let mode = int_arg("__vidx", c.args.get(2))?;
        charged(index(base, c.args.get(1).unwrap_or(&Value::Nil), mode)?)
    });
    env.add_function("__idx", |c| {
        let mode = int_arg("__idx", c.args.get(2))?;
        let (Some(base), Some(key)) = (c.args.first(), c.args.get(1)) else {
            return fail("__idx(): missing argument");
        };
        index(base, key, mode)
    });

    env.add_function("__add", |c| match (c.args.first(), c.args.get(1)) {
        (Some(Value::Integer(a)), Some(Value::Integer(b))) => {
            Ok(Value::Integer(a.wrapping_add(*b)))
        }
        (Some(Value::Float(a)), Some(Value::Float(b))) => Ok(Value::Float(a + b)),
        (Some(Value::Integer(a)), Some(Value::Float(b))) => Ok(Value::Float(*a as f64 + b)),
        (Some(Value::Float(a)), Some(Value::Integer(b))) => Ok(Value::Float(a + *b as f64)),
        (Some(Value::String(a)), Some(Value::String(b))) => {
            spend(0, (a.len() + b.len()) as u64, 0)?;
            Ok(Value::String(format!("{a}{b}")))
        }
        (Some(a), Some(b)) => fail(format!(
            "invalid operation: + (mismatched types {} and {})",
            type_name(a),
            type_name(b)
        )),
        _ => fail("+: missing operand"),
    });
    env.add_function("__text", |c| {
        let op = str_arg("__text", c.args.first())?;
        match (c.args.get(1), c.args.get(2)) {
            (Some(Value::String(a)), Some(Value::String(b))) => Ok(Value::Bool(match op {
                "contains" => a.contains(b.as_str()),
                "startsWith" => a.starts_with(b.as_str()),
                _ => a.ends_with(b.as_str()),
            })),
            (Some(a), Some(b)) => fail(format!(
                "invalid operation: {op} (mismatched types {} and {})",
                type_name(a),
                type_name(b)
            )),
            _ => fail(format!("{op}: missing operand")),
        }
    });
    env.add_function("__match", move |c| {
        let text = str_arg("matches", c.args.first())?;
        let i = int_arg("matches", c.args.get(1))?;
        let Some(regex) = usize::try_from(i).ok().and_then(|i| regexes.get(i)) else {
            return fail("matches: unknown pattern");
        };
        spend(0, 0, text.len() as u64)?;
        Ok(Value::Bool(regex.is_match(text)))
    });
    env.add_function("__matches", |c| {
        let text = str_arg("matches", c.args.first())?;
        let pattern = str_arg("matches", c.args.get(1))?;
        let regex = regex(pattern).map_err(|e| {
            expr::Error::ExprError(format!("invalid regular expression {pattern:?}: {e}"))
        })?;
        spend(0, 0, (text.len() + pattern.len()) as u64)?;
        Ok(Value::Bool(regex.is_match(text)))
    });

    env.add_function("__range", |c| {
        let from = int_arg("range", c.args.first())?;
        let to = int_arg("range", c.args.get(1))?;
        let count = (i128::from(to) - i128::from(from) + 1).max(0);
        spend(u64::try_from(count).unwrap_or(u64::MAX), 0, 0)?;
        Ok(Value::Array(if count == 0 {
            Vec::new()
        } else {
            (from..=to).map(Value::Integer).collect()
        }))
    });

    env.add_function("__all", |c| {
        for (i, item) in array_arg("all", c.args)?.iter().enumerate() {
            if !truth("all", test(c.env, c.ctx, c.predicate, item, i)?)? {
                return Ok(Value::Bool(false));
            }
        }
        Ok(Value::Bool(true))
    });
    env.add_function("__any", |c| {
        for (i, item) in array_arg("any", c.args)?.iter().enumerate() {
            if truth("any", test(c.env, c.ctx, c.predicate, item, i)?)? {
                return Ok(Value::Bool(true));
            }
        }
        Ok(Value::Bool(false))
    });
    env.add_function("__none", |c| {
        for (i, item) in array_arg("none", c.args)?.iter().enumerate() {
            if truth("none", test(c.env, c.ctx, c.predicate, item, i)?)? {
                return Ok(Value::Bool(false));
            }
        }
        Ok(Value::Bool(true))
    });
    env.add_function("__one", |c| {
        let mut found = false;
        for (i, item) in array_arg("one", c.args)?.iter().enumerate() {
            if truth("one", test(c.env, c.ctx, c.predicate, item, i)?)? {
                if found {
                    return Ok(Value::Bool(false));
                }
                found = true;
            }
        }
        Ok(Value::Bool(found))
    });
    env.add_function("__filter", |c| {
        let mut kept = Vec::new();
        for (i, item) in array_arg("filter", c.args)?.into_iter().enumerate() {
            if truth("filter", test(c.env, c.ctx, c.predicate, &item, i)?)? {
                kept.push(item);
            }
        }
        Ok(Value::Array(kept))
    });
    env.add_function("__map", |c| {
        let items = array_arg("map", c.args)?;
        let mut mapped = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            mapped.push(charged(test(c.env, c.ctx, c.predicate, item, i)?)?);
        }
        Ok(Value::Array(mapped))
    });
    env.add_function("__count", |c| {
        let mut count = 0i64;
        for (i, item) in array_arg("count", c.args)?.iter().enumerate() {
            let verdict = match c.predicate {
                Some(_) => test(c.env, c.ctx, c.predicate, item, i)?,
                None => item.clone(),
            };
            if truth("count", verdict)? {
                count += 1;
            }
        }
        Ok(Value::Integer(count))
    });

    env.add_function("__split", |c| {
        let text = str_arg("split", c.args.first())?;
        let separator = str_arg("split", c.args.get(1))?;
        let limit = match c.args.get(2) {
            None => -1,
            some => int_arg("split", some)?,
        };
        Ok(Value::Array(split(text, separator, limit)?))
    });
    env.add_function("__join", |c| {
        let Some(Value::Array(items)) = c.args.first() else {
            return fail("join() needs an array");
        };
        let separator = match c.args.get(1) {
            None => "",
            some => str_arg("join", some)?,
        };
        let mut parts = Vec::with_capacity(items.len());
        let mut size = separator.len().saturating_mul(items.len());
        for item in items {
            let part = str_arg("join", Some(item))?;
            size = size.saturating_add(part.len());
            parts.push(part);
        }
        spend(0, size as u64, 0)?;
        Ok(Value::String(parts.join(separator)))
    });

    env.add_function("__dur", |c| {
        let Some((name, unit)) = DurUnit::from_code(int_arg("__dur", c.args.get(1))?) else {
            return fail("unknown duration unit");
        };
        let n = int_arg(name, c.args.first())?;
        match n.checked_mul(unit) {
            Some(nanos) => Ok(Value::Integer(nanos)),
            None => fail(format!("{name}({n}): duration out of range")),
        }
    });
    env.add_function("__duration", |c| {
        let text = str_arg("duration", c.args.first())?;
        time::parse_duration(text)
            .map(Value::Integer)
            .map_err(expr::Error::ExprError)
    });
    env.add_function("__now", |_| Ok(Value::Integer(now_nanos())));
    env.add_function("__time", |c| {
        let field = str_arg("__time", c.args.get(1))?;
        match c.args.first() {
            Some(Value::Integer(nanos)) => match time::field(*nanos, field) {
                Some(value) => Ok(Value::Integer(value)),
                None => fail(format!("time has no method {field}")),
            },
            Some(v) => fail(format!("cannot call {field}() on {}", type_name(v))),
            None => fail(format!("{field}(): missing receiver")),
        }
    });
    env.add_function("__dur_in", |c| {
        let unit = str_arg("__dur_in", c.args.get(1))?;
        match c.args.first() {
            Some(Value::Integer(nanos)) => match time::duration_in(*nanos, unit) {
                Some(value) => Ok(Value::Float(value)),
                None => fail(format!("duration has no method {unit}")),
            },
            Some(v) => fail(format!("cannot call {unit}() on {}", type_name(v))),
            None => fail(format!("{unit}(): missing receiver")),
        }
    });
    env
}

/// `split(s, sep[, n])` with Go's `strings.SplitN` semantics: `n < 0` all
/// pieces, `n == 0` none, `n > 0` at most `n` (the last holds the rest); an
/// empty separator splits into characters (expr-lang would add empty pieces
/// at both ends).
fn split(text: &str, separator: &str, limit: i64) -> expr::Result<Vec<Value>> {
    if limit == 0 {
        return Ok(Vec::new());
    }
    let max = usize::try_from(limit).unwrap_or(usize::MAX);
    let count = if separator.is_empty() {
        text.chars().count()
    } else {
        text.matches(separator).count() + 1
    }
    .min(max);
    spend(count as u64, 0, 0)?;
    let pieces: Vec<Value> = if separator.is_empty() {
        let mut pieces: Vec<Value> = Vec::with_capacity(count);
        let mut rest = text;
        while let Some(c) = rest.chars().next() {
            if pieces.len() + 1 == count {
                pieces.push(Value::String(rest.to_string()));
                break;
            }
            let (head, tail) = rest.split_at(c.len_utf8());
            pieces.push(Value::String(head.to_string()));
            rest = tail;
        }
        pieces
    } else {
        text.splitn(count, separator)
            .map(|p| Value::String(p.to_string()))
            .collect()
    };
    Ok(pieces)
}
