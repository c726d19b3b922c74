//! The syntax tree the parser builds and the checker reads.

/// An expression as written (names unresolved, types unknown).
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Node {
    Nil,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    /// A variable, a `let` name, `#` or `#index`.
    Ident(String),
    Array(Vec<Node>),
    Unary(UnOp, Box<Node>),
    Binary(BinOp, Box<Node>, Box<Node>),
    /// `a && b && …` or `a || b || …` (one level, however long the chain, so
    /// checking and evaluating long chains does not recurse per operand).
    Chain(BinOp, Vec<Node>),
    /// `a[k]`, `a.k`, and with `optional` `a?.k`, `a?.[k]`.
    Index {
        base: Box<Node>,
        key: Box<Node>,
        optional: bool,
    },
    /// `a[s:e]`
    Slice {
        base: Box<Node>,
        start: Option<Box<Node>>,
        end: Option<Box<Node>>,
    },
    /// `a.Name(args)`
    Method {
        base: Box<Node>,
        name: String,
        args: Vec<Node>,
    },
    /// `name(args)`; `x | name(args)` arrives with `x` as the first argument.
    Call {
        name: String,
        args: Vec<Node>,
    },
    /// A braced predicate argument `{ … }`.
    Closure(Box<Node>),
    /// `c ? a : b`, and `if c { a } else { b }`.
    Ternary(Box<Node>, Box<Node>, Box<Node>),
    /// `let name = value; body`
    Let(String, Box<Node>, Box<Node>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum UnOp {
    Not,
    Plus,
    Minus,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum BinOp {
    Or,
    And,
    Eq,
    Ne,
    Lt,
    Gt,
    Le,
    Ge,
    In,
    Matches,
    Contains,
    StartsWith,
    EndsWith,
    Range,
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Pow,
    Default,
}

impl BinOp {
    /// The binary operator spelled `text`, with its precedence and whether it
    /// is right-associative (expr's precedence, docs/semantics.md#filters; `??` binds tightest).
    pub(super) fn parse(text: &str) -> Option<(BinOp, u8, bool)> {
        Some(match text {
            "or" | "||" => (BinOp::Or, 10, false),
            "and" | "&&" => (BinOp::And, 15, false),
            "==" => (BinOp::Eq, 20, false),
            "!=" => (BinOp::Ne, 20, false),
            "<" => (BinOp::Lt, 20, false),
            ">" => (BinOp::Gt, 20, false),
            "<=" => (BinOp::Le, 20, false),
            ">=" => (BinOp::Ge, 20, false),
            "in" => (BinOp::In, 20, false),
            "matches" => (BinOp::Matches, 20, false),
            "contains" => (BinOp::Contains, 20, false),
            "startsWith" => (BinOp::StartsWith, 20, false),
            "endsWith" => (BinOp::EndsWith, 20, false),
            ".." => (BinOp::Range, 25, false),
            "+" => (BinOp::Add, 30, false),
            "-" => (BinOp::Sub, 30, false),
            "*" => (BinOp::Mul, 60, false),
            "/" => (BinOp::Div, 60, false),
            "%" => (BinOp::Mod, 60, false),
            "**" | "^" => (BinOp::Pow, 100, true),
            "??" => (BinOp::Default, 200, false),
            _ => return None,
        })
    }

    /// Whether `not op` is an operator (`not in`, `not matches`, …).
    pub(super) fn negatable(self) -> bool {
        matches!(
            self,
            BinOp::In | BinOp::Matches | BinOp::Contains | BinOp::StartsWith | BinOp::EndsWith
        )
    }

    /// Ordering comparisons chain as in expr: `a < b < c` is `a < b && b < c`.
    pub(super) fn chains(self) -> bool {
        matches!(self, BinOp::Lt | BinOp::Gt | BinOp::Le | BinOp::Ge)
    }

    pub(super) fn symbol(self) -> &'static str {
        match self {
            BinOp::Or => "||",
            BinOp::And => "&&",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Lt => "<",
            BinOp::Gt => ">",
            BinOp::Le => "<=",
            BinOp::Ge => ">=",
            BinOp::In => "in",
            BinOp::Matches => "matches",
            BinOp::Contains => "contains",
            BinOp::StartsWith => "startsWith",
            BinOp::EndsWith => "endsWith",
            BinOp::Range => "..",
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Mod => "%",
            BinOp::Pow => "**",
            BinOp::Default => "??",
        }
    }
}
