//! The checked tree the evaluator walks: names resolved to variables or
//! stack slots, functions to [`Func`], constant regular expressions compiled
//! and constant durations parsed.

use super::ast::BinOp;
use super::value::Value;

#[derive(Debug)]
pub(super) enum Expr {
    Const(Value),
    Var(Var),
    /// A `let` value, or a predicate's `#` / `#index`: a slot counted from
    /// the bottom of the evaluation's stack of locals.
    Local(usize),
    Array(Vec<Expr>),
    Not(Box<Expr>),
    /// Unary `-` (`negate`) or `+`.
    Sign(bool, Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// `&&` (true) or `||` (false) over a chain, short-circuiting.
    Logic(bool, Vec<Expr>),
    Index {
        base: Box<Expr>,
        key: Box<Expr>,
        /// `?.`: a nil base gives nil.
        optional: bool,
        /// A missing key of a `map[string]string` reads as `""` (docs/semantics.md#filters).
        zero_string: bool,
    },
    Slice(Box<Expr>, Option<Box<Expr>>, Option<Box<Expr>>),
    /// `matches` with a constant pattern, compiled once per filter.
    Matches(Box<Expr>, Box<regex::Regex>),
    Ternary(Box<Expr>, Box<Expr>, Box<Expr>),
    /// `let`: the value goes in the next slot while the body runs.
    Let(Box<Expr>, Box<Expr>),
    /// `all`, `map`, … with the array and the predicate (whose `#` and
    /// `#index` take the next two slots); `count` may have none.
    Iterate(Pred, Box<Expr>, Option<Box<Expr>>),
    Call(Func, Vec<Expr>),
    /// A time method (`Year()` …) or duration method (`Hours()` …).
    Method(&'static str, Box<Expr>),
}

/// The message variables (docs/semantics.md#filters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Var {
    Subject,
    Properties,
    GroupId,
    CorrelationId,
    ReplyTo,
    MessageId,
    ContentType,
    EnqueuedAt,
    VisibleAt,
    SubjectParts,
    BodySize,
    PropertyKeys,
    BodyText,
    BodyJson,
}

impl Var {
    pub(super) const COUNT: usize = 14;

    pub(super) fn from_name(name: &str) -> Option<Var> {
        Some(match name {
            "subject" => Var::Subject,
            "properties" => Var::Properties,
            "group_id" => Var::GroupId,
            "correlation_id" => Var::CorrelationId,
            "reply_to" => Var::ReplyTo,
            "message_id" => Var::MessageId,
            "content_type" => Var::ContentType,
            "enqueued_at" => Var::EnqueuedAt,
            "visible_at" => Var::VisibleAt,
            "subject_parts" => Var::SubjectParts,
            "body_size" => Var::BodySize,
            "property_keys" => Var::PropertyKeys,
            "body_text" => Var::BodyText,
            "body_json" => Var::BodyJson,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Pred {
    All,
    Any,
    None,
    One,
    Filter,
    Map,
    Count,
}

impl Pred {
    pub(super) fn from_name(name: &str) -> Option<Pred> {
        Some(match name {
            "all" => Pred::All,
            "any" => Pred::Any,
            "none" => Pred::None,
            "one" => Pred::One,
            "filter" => Pred::Filter,
            "map" => Pred::Map,
            "count" => Pred::Count,
            _ => return None,
        })
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            Pred::All => "all",
            Pred::Any => "any",
            Pred::None => "none",
            Pred::One => "one",
            Pred::Filter => "filter",
            Pred::Map => "map",
            Pred::Count => "count",
        }
    }
}

/// Builtins without a predicate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Func {
    Len,
    First,
    Last,
    Lower,
    Upper,
    Trim,
    Split,
    Join,
    Abs,
    Int,
    Float,
    String,
    Keys,
    Values,
    /// `seconds()` … `weeks()`: nanoseconds per unit.
    Units(&'static str, i64),
    Duration,
    Now,
}
