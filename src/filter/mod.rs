//! Subscription filters (docs/semantics.md#filters): compile once at Subscribe or publish,
//! evaluate per message, fail closed.
//!
//! The language is expr's (docs/semantics.md#filters), implemented here directly:
//!
//! 1. size limit on the source (`expression too long (N > 4096 bytes)`);
//! 2. `lex` → `parse`: tokens, then a precedence-climbing parser building an
//!    `ast::Node` tree; more than 1000 nodes is an error as soon as node 1001
//!    is made, nesting is bounded while parsing, the tree's depth after;
//! 3. `check`: static types (unknown names and functions, ill-typed
//!    operations, a non-boolean result, constant invalid regexes and
//!    durations are compile errors), producing the `program::Expr` tree with
//!    constant patterns compiled once per filter;
//! 4. `eval`: a tree walk per message under one budget (steps, memory, text
//!    scanned and regexes compiled at run time); exceeding it fails closed.
//!
//! # Choices where the contract leaves room, or differs from expr (Go)
//!
//! * **Constant arguments are validated at compile time** (case 203):
//!   `duration("1y")` or `subject matches "("` is a compile error (Subscribe
//!   400, TestFilter `valid:false`); with a non-constant argument the same
//!   problem is a runtime error (fail closed). TestFilter uses this same
//!   compile, so both paths agree.
//! * **`??` binds tighter than every binary operator** (expr's precedence
//!   table), and may be mixed with them: `x ?? 0 > 5` is `(x ?? 0) > 5`.
//!   expr (Go) rejects that mix without parentheses; accepting it keeps
//!   filters stored by earlier versions valid and means the same wherever
//!   Go accepts the expression.
//! * **Ordering comparisons chain** as in expr: `1 < x < 3` is
//!   `1 < x && x < 3`.
//! * **Indexing**: `properties["missing"]` is `""` (a Go `map[string]string`
//!   zero value); a missing `body_json` member is nil; an array index out
//!   of range is a runtime error; negative indexes count from the end.
//! * **Strings** take the escapes `\\ \/ \b \f \n \r \t \uXXXX` and their own
//!   quote; backtick strings are raw. `len()` counts code points.
//! * **Regular expressions** use the `regex` crate with only `std`,
//!   `perf-dfa`, `unicode-perl` and `unicode-case`: RE2 syntax, linear-time
//!   search by a lazy DFA, program and cache capped at 1 MiB each. Unlike RE2,
//!   `\d \w \s \b` are Unicode-aware; `\pL`-style general-category and
//!   script classes are compile errors (their tables are not built in).
//! * **Times** are UTC nanoseconds and must not mix with other types (`?:`,
//!   `??`, `==`, `in`, array literals, generic functions such as
//!   `string()`): compile error. Time methods: `Year Month Day Hour Minute
//!   Second Weekday Unix` (docs/deviations.md D8: `Month()` 1–12, `Weekday()` 0 =
//!   Sunday, plain integers); durations: `Hours Minutes Seconds`.
//! * **Functions** are the contract's MUST and SHOULD lists (`len all any none
//!   filter map one count first last lower upper trim split join abs int
//!   float string keys values seconds minutes hours days weeks duration
//!   now`); other expr builtins are unknown functions. `let`, `if/else`,
//!   ternary, `??`, `?.`, slices, pipes, `#index` and array literals work;
//!   `$env`, bytes and map literals are rejected. `keys()`/`values()` are
//!   in key order (Go's map order is random); `string()` prints as Go's
//!   `%v`; `split` follows Go's `strings.SplitN`.
//! * **Limits beyond the contract's** (compile errors, far above real filters):
//!   nesting of brackets, prefix operators, `?:`, `if` and `let` ≤ 64, tree
//!   depth ≤ [`MAX_DEPTH`] (a chain of `&&`/`||` is one level); they keep
//!   parsing, checking and evaluation inside a Worker's stack.
//! * `body_text` is the body decoded as UTF-8 with invalid sequences replaced
//!   by U+FFFD. `now()` reads [`FilterInput::now_ms`], the engine's clock.

mod ast;
mod check;
mod eval;
mod funcs;
mod lex;
mod parse;
mod program;
mod time;
mod value;

#[cfg(test)]
mod bench;
#[cfg(test)]
mod reference;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fmt;

/// Longest accepted source, in bytes (docs/semantics.md#filters).
pub const MAX_SOURCE_BYTES: usize = 4096;
/// Largest accepted tree, in nodes (docs/semantics.md#filters).
pub const MAX_NODES: usize = 1000;
/// Deepest accepted tree. Checking and evaluation recurse per level;
/// 128 keeps well inside a Worker's stack.
pub const MAX_DEPTH: usize = 128;

/// A filter that failed to compile; the message is user-facing (no prefix).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompileError(pub String);

impl fmt::Display for CompileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CompileError {}

/// A compiled subscription filter. Compile once, evaluate per message.
pub struct Filter {
    /// `None` for the match-all (empty) filter.
    compiled: Option<program::Expr>,
}

/// The message fields a filter sees (docs/semantics.md#filters). Absent strings are `""`.
pub struct FilterInput<'a> {
    pub subject: &'a str,
    pub group_id: &'a str,
    pub correlation_id: &'a str,
    pub reply_to: &'a str,
    pub message_id: &'a str,
    pub content_type: &'a str,
    pub properties: &'a BTreeMap<String, String>,
    pub body: &'a [u8],
    pub enqueued_at_ms: i64,
    pub visible_at_ms: i64,
    /// What `now()` reads: the engine clock's wall time (a manual test
    /// clock reaches filters through it).
    pub now_ms: i64,
}

impl Filter {
    /// Compiles and type-checks `source`. Empty/whitespace source = match-all.
    pub fn compile(source: &str) -> Result<Filter, CompileError> {
        if source.len() > MAX_SOURCE_BYTES {
            return Err(CompileError(format!(
                "expression too long ({} > {MAX_SOURCE_BYTES} bytes)",
                source.len()
            )));
        }
        if source.trim().is_empty() {
            return Ok(Filter { compiled: None });
        }
        compile(source)
            .map(|compiled| Filter {
                compiled: Some(compiled),
            })
            .map_err(CompileError)
    }

    /// Whether this filter accepts every message (the empty filter).
    pub fn is_match_all(&self) -> bool {
        self.compiled.is_none()
    }

    /// `Ok(true/false)`: matched or not; `Err(message)`: runtime error (the
    /// caller fails closed: not routed).
    pub fn evaluate(&self, message: &FilterInput<'_>) -> Result<bool, String> {
        let Some(expr) = &self.compiled else {
            return Ok(true);
        };
        match eval::Eval::new(message).eval(expr)? {
            value::Value::Bool(matched) => Ok(matched),
            other => Err(format!("filter returned {}, not bool", other.type_name())),
        }
    }
}

fn compile(source: &str) -> Result<program::Expr, String> {
    let tree = parse::parse(source, MAX_NODES)?;
    let depth = parse::depth(&tree);
    if depth > MAX_DEPTH {
        return Err(format!(
            "expression nested too deeply ({depth} > {MAX_DEPTH} levels)"
        ));
    }
    check::check(&tree)
}
