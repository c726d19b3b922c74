//! Subscription filters (semantics §13): compile once at Subscribe or publish,
//! evaluate per message, fail closed.
//!
//! The language is expr's; parsing and evaluation are done by the `expr-lang`
//! crate (2.1.0). It has no type checker and some semantics differ from expr
//! (Go) and the spec, so compiling is a pipeline around it:
//!
//! 1. size limit on the source (`expression too long (N > 4096 bytes)`);
//! 2. `lex`: a lexical pass that repairs what expr-lang's parser gets wrong
//!    and bounds nesting and node count before anything recursive runs;
//! 3. `expr::compile` — syntax errors are expr-lang's;
//! 4. `tree`: read expr-lang's (private) AST back through its `Debug` output,
//!    count nodes (> 1000 is an error), balance `&&`/`||` chains, cap depth;
//! 5. `check`: static types (unknown names and functions, ill-typed
//!    operations, a non-boolean result, constant invalid regexes and
//!    durations are compile errors), printing an equivalent program in which
//!    every construct whose expr-lang semantics differ calls our functions;
//! 6. `expr::compile` of that program, evaluated per message by expr-lang
//!    with `runtime`'s functions and variables.
//!
//! # Deviations from expr-lang, and how they are handled
//!
//! | expr-lang 2.1 | spec / expr (Go) | handling |
//! |---|---|---|
//! | AST private, no type checker | compile-time type errors | AST read via `Debug` (`tree`), own checker (`check`) |
//! | `arr[i]` out of range → nil | runtime error | `__idx`/`__vidx` |
//! | `properties["missing"]` → nil | `""` (Go zero value) | index mode `ZERO_STRING` for `map[string]string` |
//! | string escapes decoded by `replace` chains (`"\\n"` → newline; `\u00e9`, `\'` kept verbatim) | usual escapes | literals re-encoded by `lex` |
//! | no `not contains`/`not matches`/`not startsWith`/`not endsWith` | supported | `not` blanked and the operation negated (`lex`, `tree`) |
//! | `a ?? b + c` = `a ?? (b + c)` (the right side is a whole expression) | `(a ?? b) + c` | `lex` parenthesises `a ?? b` (both operand terms) |
//! | map literal with a non-constant value panics | (not in the subset) | map literals rejected at compile time |
//! | `all(xs, true)` without `#`: not a predicate | second argument is the predicate | `check` makes it one |
//! | predicates returning non-bools count as yes/no | runtime error | own `all/any/none/one/filter/map/count` |
//! | unknown name inside a predicate reads `#.name` | compile error (only `.name`/bare `name` as the whole predicate means `#.name`) | `check` |
//! | `contains` on arrays/maps | strings only | static check; `any` operands checked at run time |
//! | `matches` needs the `regex` feature (regex with all defaults, ~1 MB of wasm) | RE2 search | `__match`/`__matches` on `regex` with minimal features (see below); constant invalid pattern is a compile error |
//! | time support needs `temporal` (+1.5 MB wasm, chrono-tz); `Month()`/`Weekday()` are enum values that do not equal integers | decisions #8: plain integers | own time/duration as integer nanoseconds (`time`) |
//! | `duration()` has no `d`/`w` units | `d`, `w` | own parser (`time::parse_duration`) |
//! | no `seconds()`…`weeks()` | spec functions | `__dur` |
//! | `split(s, "")` adds empty first/last pieces | Go `strings.SplitN` | own `split` |
//! | `a..b` allocates without bound; string `+`, `join`, `map` likewise; every variable use clones its value (a 1 MiB body per mention) | (Go has a memory budget) | per-evaluation budget in `runtime` (10⁶ steps, 64 MiB copied, 8 MiB searched by `matches`), variables read through `__var` |
//! | deep nesting overflows the ~1 MB wasm stack (a trap kills the isolate) | — | nesting ≤ 64 (`lex`), depth ≤ [`MAX_DEPTH`] after balancing |
//!
//! Further choices:
//!
//! * **Constant arguments are validated at compile time** (case 203):
//!   `duration("1y")` or `subject matches "("` is a compile error (Subscribe
//!   400, TestFilter `valid:false`); with a non-constant argument the same
//!   problem is a runtime error (fail closed). TestFilter uses this same
//!   compile, so both paths agree.
//! * **Regular expressions** use the `regex` crate with only `std`,
//!   `perf-dfa`, `unicode-perl` and `unicode-case`: RE2 syntax, linear-time
//!   search by a lazy DFA, program and cache capped at 1 MiB each. Unlike RE2,
//!   `\d \w \s \b` are Unicode-aware; `\pL`-style general-category and
//!   script classes are compile errors (their tables are not built in).
//!   (`regex-lite` would save ~0.35 MB of optimised wasm, ~0.15 MB gzipped,
//!   but its NFA simulation needs seconds per MiB of body for patterns like
//!   `[a-z]{100}x`, on the publish path.)
//! * **Times** must not mix with other types (`?:`, `??`, `==`, `in`, array
//!   literals, generic functions such as `string()`): compile error. Time
//!   methods: `Year Month Day Hour Minute Second Weekday Unix`; durations:
//!   `Hours Minutes Seconds`.
//! * **Functions** are the spec's MUST and SHOULD lists (`len all any none
//!   filter map one count first last lower upper trim split join abs int
//!   float string keys values seconds minutes hours days weeks duration now`);
//!   other expr-lang builtins are unknown functions. `let`, `if/else`,
//!   ternary, `??`, `?.`, slices, pipes, `#index` and array literals work;
//!   `$env`, bytes and map literals are rejected.
//! * **Limits beyond the spec's** (compile errors, far above real filters):
//!   nesting of brackets/`?`/`??`/`if` ≤ 64, AST depth ≤ [`MAX_DEPTH`] after
//!   `&&`/`||` chains are balanced; they keep parsing and evaluation inside
//!   the Worker's stack (checked in wasm under V8 with a third of its stack).
//!   Indexes nest at most 3 deep (`a[b[c[d]]]`): expr-lang's parser takes
//!   time exponential in that depth.
//! * `body_text` is the body decoded as UTF-8 with invalid sequences replaced
//!   by U+FFFD. `now()` reads the Worker's clock (`Date.now()`).

mod check;
mod lex;
mod runtime;
mod time;
mod tree;

#[cfg(test)]
mod bench;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fmt;

/// Longest accepted source, in bytes (wire §8).
pub const MAX_SOURCE_BYTES: usize = 4096;
/// Largest accepted AST, in nodes (wire §8).
pub const MAX_NODES: usize = 1000;
/// Deepest accepted AST after `&&`/`||` balancing. Evaluation recurses per
/// level (several frames each); 128 keeps well inside a Worker's stack.
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
    compiled: Option<Compiled>,
}

struct Compiled {
    program: expr::Program,
    env: expr::Environment<'static>,
}

/// The message fields a filter sees (semantics §13.3). Absent strings are `""`.
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
        let Some(compiled) = &self.compiled else {
            return Ok(true);
        };
        runtime::reset_budget();
        let context = runtime::Message::new(message);
        match compiled.env.run(&compiled.program, &context) {
            Ok(expr::Value::Bool(matched)) => Ok(matched),
            Ok(other) => Err(format!(
                "filter returned {}, not bool",
                runtime::type_name(&other)
            )),
            Err(e) => Err(e.to_string()),
        }
    }
}

fn compile(source: &str) -> Result<Compiled, String> {
    let prepared = lex::prepare(source, MAX_NODES)?;
    let parsed = match expr::compile(&prepared.source) {
        Ok(program) => program,
        // Report positions in the user's text, not the prepared one (the
        // rewrites never turn a valid source invalid or vice versa).
        Err(e) => return Err(syntax_error(&expr::compile(source).err().unwrap_or(e))),
    };
    let read = tree::read(&parsed, &prepared.negations)?;
    drop(parsed);
    if read.nodes > MAX_NODES {
        return Err(format!(
            "expression too complex ({} > {MAX_NODES} AST nodes)",
            read.nodes
        ));
    }
    let prog = read.prog.balanced();
    let depth = prog.depth();
    if depth > MAX_DEPTH {
        return Err(format!(
            "expression nested too deeply ({depth} > {MAX_DEPTH} levels)"
        ));
    }
    let lowered = check::lower(&prog)?;
    let program = expr::compile(&lowered.code)
        .map_err(|e| format!("internal error: lowered filter does not parse: {e}"))?;
    Ok(Compiled {
        program,
        env: runtime::environment(lowered.regexes),
    })
}

/// One line from expr-lang's multi-line parse error: `syntax error at line L,
/// column C: expected …`.
fn syntax_error(error: &expr::Error) -> String {
    let text = error.to_string();
    let position = text
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("--> "))
        .and_then(|p| p.split_once(':'));
    let detail = text
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("= "))
        .unwrap_or("invalid syntax");
    match position {
        Some((line, column)) => format!("syntax error at line {line}, column {column}: {detail}"),
        None => format!(
            "syntax error: {}",
            text.split_whitespace().collect::<Vec<_>>().join(" ")
        ),
    }
}
