//! Static type checking, and lowering to the program expr-lang evaluates.
//!
//! expr-lang has no type checker, but a filter must be rejected at Subscribe
//! for unknown names, unknown functions, ill-typed operations and a result
//! that cannot be a boolean. One pass over our tree does both jobs: it infers
//! a `Ty` for every node and prints the node as expr source, replacing the
//! constructs where expr-lang's semantics differ from the spec by calls to
//! our own functions (`runtime.rs`). The printed program is what runs.
//!
//! `any` is the type of values only known at run time (members of
//! `body_json`, elements of untyped arrays); operations on `any` are allowed
//! and checked when evaluated, failing closed.
//!
//! Times and durations are represented at run time as integer nanoseconds
//! (expr-lang's own time support would add 1.5 MB of time-zone data to the
//! wasm). That is only sound because the checker knows statically where every
//! time and duration is: a time never flows into an `any` (mixing one with
//! another type in `?:`, `??`, `if`, array literals, `==` or `in` is a compile
//! error, as are generic functions such as `string()` on a time), so plain
//! integer arithmetic and comparison on the representation are exactly the
//! time operations the spec lists.

use std::fmt;

use super::lex::encode_string;
use super::runtime::{self, DurUnit};
use super::time;
use super::tree::{BinOp, Node, Prog, UnOp};

/// Static type of an expression.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Ty {
    Bool,
    Int,
    Float,
    Str,
    Time,
    Dur,
    Nil,
    Any,
    Array(Box<Ty>),
    /// String-keyed map with values of the given type.
    Map(Box<Ty>),
}

impl fmt::Display for Ty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ty::Bool => f.write_str("bool"),
            Ty::Int => f.write_str("int"),
            Ty::Float => f.write_str("float"),
            Ty::Str => f.write_str("string"),
            Ty::Time => f.write_str("time"),
            Ty::Dur => f.write_str("duration"),
            Ty::Nil => f.write_str("nil"),
            Ty::Any => f.write_str("any"),
            Ty::Array(e) => write!(f, "[]{e}"),
            Ty::Map(v) => write!(f, "map[string]{v}"),
        }
    }
}

impl Ty {
    /// Known only at run time (`nil` included: operations on it fail there).
    fn dynamic(&self) -> bool {
        matches!(self, Ty::Any | Ty::Nil)
    }

    fn number(&self) -> bool {
        matches!(self, Ty::Int | Ty::Float)
    }

    /// A number, or possibly one.
    fn numeric(&self) -> bool {
        self.number() || self.dynamic()
    }

    /// A string, or possibly one.
    fn stringy(&self) -> bool {
        *self == Ty::Str || self.dynamic()
    }

    fn boolish(&self) -> bool {
        *self == Ty::Bool || self.dynamic()
    }

    fn has_time(&self) -> bool {
        match self {
            Ty::Time | Ty::Dur => true,
            Ty::Array(t) | Ty::Map(t) => t.has_time(),
            _ => false,
        }
    }

    /// Element type when iterated (arrays) — `any` for dynamic values.
    fn element(&self) -> Option<Ty> {
        match self {
            Ty::Array(e) if **e == Ty::Nil => Some(Ty::Any),
            Ty::Array(e) => Some((**e).clone()),
            t if t.dynamic() => Some(Ty::Any),
            _ => None,
        }
    }
}

/// The type of a value that is one of `a` or `b`.
fn join(a: &Ty, b: &Ty) -> Result<Ty, String> {
    match (a, b) {
        _ if a == b => Ok(a.clone()),
        (Ty::Nil, t) | (t, Ty::Nil) => Ok(t.clone()),
        (Ty::Array(x), Ty::Array(y)) => Ok(Ty::Array(Box::new(join(x, y)?))),
        (Ty::Map(x), Ty::Map(y)) => Ok(Ty::Map(Box::new(join(x, y)?))),
        _ if a.has_time() || b.has_time() => Err(format!(
            "cannot mix {a} and {b} values (times and durations only combine with their own kind)"
        )),
        _ => Ok(Ty::Any),
    }
}

/// Whether `==`, `!=` and `in` may compare these types. Anything compares
/// with anything (different types are unequal) except times and durations,
/// whose integer representation must never meet another type.
fn comparable(a: &Ty, b: &Ty) -> bool {
    if !a.has_time() && !b.has_time() {
        return true;
    }
    match (a, b) {
        (Ty::Nil, _) | (_, Ty::Nil) => true,
        (Ty::Array(x), Ty::Array(y)) | (Ty::Map(x), Ty::Map(y)) => comparable(x, y),
        _ => a == b,
    }
}

/// A checked, lowered expression.
struct Out {
    ty: Ty,
    code: String,
    /// Whether `code` is a single term (call, literal, name, brackets) that
    /// needs no parentheses as an operand.
    atomic: bool,
    /// The value, when it is a constant string.
    constant: Option<String>,
}

impl Out {
    fn term(ty: Ty, code: String) -> Out {
        Out {
            ty,
            code,
            atomic: true,
            constant: None,
        }
    }

    fn compound(ty: Ty, code: String) -> Out {
        Out {
            ty,
            code,
            atomic: false,
            constant: None,
        }
    }

    /// The code, parenthesised unless it is a single term.
    fn operand(&self) -> String {
        if self.atomic {
            self.code.clone()
        } else {
            format!("({})", self.code)
        }
    }
}

/// The program to hand to expr-lang, plus the constant regular expressions it
/// refers to by index.
pub(super) struct Lowered {
    pub(super) code: String,
    pub(super) regexes: Vec<regex::Regex>,
}

/// Checks a whole filter and lowers it.
pub(super) fn lower(prog: &Prog) -> Result<Lowered, String> {
    let mut checker = Checker {
        scopes: Vec::new(),
        regexes: Vec::new(),
    };
    let out = checker.program(prog)?;
    if !out.ty.boolish() || out.ty == Ty::Nil {
        return Err(format!(
            "filter must be a boolean expression, but its type is {}",
            out.ty
        ));
    }
    Ok(Lowered {
        code: out.code,
        regexes: checker.regexes,
    })
}

/// The filter variables (semantics §13.3) and their types.
pub(super) fn variable(name: &str) -> Option<Ty> {
    Some(match name {
        "subject" | "group_id" | "correlation_id" | "reply_to" | "message_id" | "content_type"
        | "body_text" => Ty::Str,
        "properties" => Ty::Map(Box::new(Ty::Str)),
        "enqueued_at" | "visible_at" => Ty::Time,
        "subject_parts" | "property_keys" => Ty::Array(Box::new(Ty::Str)),
        "body_size" => Ty::Int,
        "body_json" => Ty::Map(Box::new(Ty::Any)),
        _ => return None,
    })
}

enum Scope {
    Let(String, Ty),
    /// Inside a predicate: `#` is the element, `#index` its position.
    Item(Ty),
}

struct Checker {
    scopes: Vec<Scope>,
    regexes: Vec<regex::Regex>,
}

fn mismatch(op: &str, a: &Ty, b: &Ty) -> String {
    format!("invalid operation: {op} (mismatched types {a} and {b})")
}

/// Index mode flags understood by the runtime's index functions.
const OPTIONAL: u8 = 1;
const ZERO_STRING: u8 = 2;

impl Checker {
    fn program(&mut self, prog: &Prog) -> Result<Out, String> {
        let mut code = String::new();
        let scopes = self.scopes.len();
        for (name, value) in &prog.lets {
            if variable(name).is_some() || name.starts_with('#') || name.starts_with('$') {
                return Err(format!("cannot redeclare variable {name}"));
            }
            let out = self.expr(value)?;
            code.push_str(&format!("let {name} = {}; ", out.code));
            self.scopes.push(Scope::Let(name.clone(), out.ty));
        }
        let out = self.expr(&prog.expr);
        self.scopes.truncate(scopes);
        let out = out?;
        if code.is_empty() {
            return Ok(out);
        }
        code.push_str(&out.code);
        Ok(Out::compound(out.ty, code))
    }

    /// The type of a name in scope.
    fn lookup(&self, name: &str) -> Option<Ty> {
        for scope in self.scopes.iter().rev() {
            match scope {
                Scope::Let(n, ty) if n == name => return Some(ty.clone()),
                Scope::Item(ty) if name == "#" => return Some(ty.clone()),
                Scope::Item(_) if name == "#index" => return Some(Ty::Int),
                _ => {}
            }
        }
        variable(name)
    }

    fn expr(&mut self, node: &Node) -> Result<Out, String> {
        match node {
            Node::Ident(name) => {
                let ty = self.lookup(name).ok_or_else(|| match name.as_str() {
                    "#" | "#index" => format!("{name} is only defined inside a predicate"),
                    _ => format!("unknown name {name}"),
                })?;
                Ok(Out::term(ty, format!("__var(\"{name}\")")))
            }
            Node::Int(n) => Ok(Out::term(Ty::Int, int_code(*n))),
            Node::Float(f) => Ok(Out::term(Ty::Float, format!("{f:?}"))),
            Node::Str(s) => Ok(Out {
                constant: Some(s.clone()),
                ..Out::term(Ty::Str, encode_string(s))
            }),
            Node::Bool(b) => Ok(Out::term(Ty::Bool, b.to_string())),
            Node::Nil => Ok(Out::term(Ty::Nil, "nil".to_string())),
            Node::Array(items) => {
                let mut ty = Ty::Nil;
                let mut codes = Vec::new();
                for item in items {
                    let out = self.expr(item)?;
                    ty = join(&ty, &out.ty)?;
                    codes.push(out.code);
                }
                Ok(Out::term(
                    Ty::Array(Box::new(ty)),
                    format!("[{}]", codes.join(", ")),
                ))
            }
            Node::Range(a, b) => {
                let (a, b) = (self.expr(a)?, self.expr(b)?);
                if !(a.ty == Ty::Int || a.ty.dynamic()) || !(b.ty == Ty::Int || b.ty.dynamic()) {
                    return Err(mismatch("..", &a.ty, &b.ty));
                }
                Ok(Out::term(
                    Ty::Array(Box::new(Ty::Int)),
                    format!("__range({}, {})", a.code, b.code),
                ))
            }
            Node::Unary(op, operand) => self.unary(*op, operand),
            Node::Binary(op, left, right) => self.binary(*op, left, right),
            Node::Index {
                base,
                key,
                optional,
            } => self.index(base, key, *optional),
            Node::Slice { base, start, end } => {
                let base = self.expr(base)?;
                let ty = match &base.ty {
                    Ty::Array(_) | Ty::Str => base.ty.clone(),
                    t if t.dynamic() => Ty::Any,
                    t => return Err(format!("cannot slice {t}")),
                };
                let mut bound = |b: &Option<Box<Node>>| -> Result<String, String> {
                    match b {
                        None => Ok(String::new()),
                        Some(b) => {
                            let out = self.expr(b)?;
                            if out.ty != Ty::Int && !out.ty.dynamic() {
                                return Err(format!("slice bounds must be int, not {}", out.ty));
                            }
                            Ok(out.code)
                        }
                    }
                };
                let (start, end) = (bound(start)?, bound(end)?);
                Ok(Out::compound(
                    ty,
                    format!("{}[{start}:{end}]", base.operand()),
                ))
            }
            Node::Default(value, fallback) => {
                let (value, fallback) = (self.expr(value)?, self.expr(fallback)?);
                let ty = join(&value.ty, &fallback.ty)?;
                Ok(Out::compound(
                    ty,
                    format!("{} ?? ({})", value.operand(), fallback.code),
                ))
            }
            Node::Ternary(condition, then, other) => {
                let condition = self.condition(condition)?;
                let (then, other) = (self.expr(then)?, self.expr(other)?);
                let ty = join(&then.ty, &other.ty)?;
                Ok(Out::compound(
                    ty,
                    format!("({condition}) ? ({}) : ({})", then.code, other.code),
                ))
            }
            Node::If(condition, then, other) => {
                let condition = self.condition(condition)?;
                let (then, other) = (self.program(then)?, self.program(other)?);
                let ty = join(&then.ty, &other.ty)?;
                Ok(Out::compound(
                    ty,
                    format!(
                        "if ({condition}) {{ {} }} else {{ {} }}",
                        then.code, other.code
                    ),
                ))
            }
            Node::Method { base, name, args } => self.method(base, name, args),
            Node::Call { name, args, pred } => self.call(name, args, pred.as_deref()),
        }
    }

    fn condition(&mut self, node: &Node) -> Result<String, String> {
        let out = self.expr(node)?;
        if !out.ty.boolish() {
            return Err(format!("condition must be bool, not {}", out.ty));
        }
        Ok(out.code)
    }

    fn unary(&mut self, op: UnOp, operand: &Node) -> Result<Out, String> {
        let out = self.expr(operand)?;
        let (symbol, ty) = match op {
            UnOp::Not if out.ty.boolish() => ("!", Ty::Bool),
            UnOp::Minus | UnOp::Plus if matches!(out.ty, Ty::Int | Ty::Float | Ty::Dur) => {
                (if op == UnOp::Minus { "-" } else { "+" }, out.ty.clone())
            }
            UnOp::Minus | UnOp::Plus if out.ty.dynamic() => {
                (if op == UnOp::Minus { "-" } else { "+" }, Ty::Any)
            }
            _ => {
                let symbol = match op {
                    UnOp::Not => "not",
                    UnOp::Minus => "-",
                    UnOp::Plus => "+",
                };
                return Err(format!("invalid operation: {symbol} on {}", out.ty));
            }
        };
        Ok(Out::compound(ty, format!("{symbol}{}", out.operand())))
    }

    fn binary(&mut self, op: BinOp, left: &Node, right: &Node) -> Result<Out, String> {
        let (l, r) = (self.expr(left)?, self.expr(right)?);
        let (a, b) = (&l.ty, &r.ty);
        let native = |ty: Ty| {
            Out::compound(
                ty,
                format!("{} {} {}", l.operand(), op.symbol(), r.operand()),
            )
        };
        let call =
            |ty: Ty, function: &str| Out::term(ty, format!("{function}({}, {})", l.code, r.code));
        // A dynamic operand with a number or another dynamic operand.
        let dynamic_numbers = (a.dynamic() && b.numeric()) || (b.dynamic() && a.numeric());
        let out = match op {
            BinOp::Add => match (a, b) {
                (Ty::Int, Ty::Int) => native(Ty::Int),
                _ if a.number() && b.number() => native(Ty::Float),
                (Ty::Time, Ty::Dur) | (Ty::Dur, Ty::Time) => native(Ty::Time),
                (Ty::Dur, Ty::Dur) => native(Ty::Dur),
                (Ty::Str, Ty::Str) => {
                    let constant = l
                        .constant
                        .as_ref()
                        .zip(r.constant.as_ref())
                        .map(|(x, y)| format!("{x}{y}"));
                    Out {
                        constant,
                        ..call(Ty::Str, "__add")
                    }
                }
                _ if (a.dynamic() && (b.numeric() || b.stringy()))
                    || (b.dynamic() && (a.numeric() || a.stringy())) =>
                {
                    call(Ty::Any, "__add")
                }
                _ => return Err(mismatch("+", a, b)),
            },
            BinOp::Sub => match (a, b) {
                (Ty::Int, Ty::Int) => native(Ty::Int),
                _ if a.number() && b.number() => native(Ty::Float),
                (Ty::Time, Ty::Time) | (Ty::Dur, Ty::Dur) => native(Ty::Dur),
                (Ty::Time, Ty::Dur) => native(Ty::Time),
                _ if dynamic_numbers => native(Ty::Any),
                _ => return Err(mismatch("-", a, b)),
            },
            BinOp::Mul => match (a, b) {
                (Ty::Int, Ty::Int) => native(Ty::Int),
                _ if a.number() && b.number() => native(Ty::Float),
                (Ty::Dur, Ty::Int) | (Ty::Int, Ty::Dur) => native(Ty::Dur),
                _ if dynamic_numbers => native(Ty::Any),
                _ => return Err(mismatch("*", a, b)),
            },
            BinOp::Div | BinOp::Pow if a.numeric() && b.numeric() => native(Ty::Float),
            BinOp::Mod if (*a == Ty::Int || a.dynamic()) && (*b == Ty::Int || b.dynamic()) => {
                native(Ty::Int)
            }
            BinOp::Div | BinOp::Pow | BinOp::Mod => return Err(mismatch(op.symbol(), a, b)),
            BinOp::Eq | BinOp::Ne if comparable(a, b) => native(Ty::Bool),
            BinOp::Gt | BinOp::Ge | BinOp::Lt | BinOp::Le
                if (a.numeric() && b.numeric())
                    || (a.stringy() && b.stringy())
                    || (a == b && matches!(a, Ty::Time | Ty::Dur)) =>
            {
                native(Ty::Bool)
            }
            BinOp::And | BinOp::Or if a.boolish() && b.boolish() => native(Ty::Bool),
            BinOp::In | BinOp::NotIn => {
                let ok = match b {
                    Ty::Array(e) => comparable(a, e),
                    Ty::Map(_) => a.stringy(),
                    t if t.dynamic() => !a.has_time(),
                    _ => false,
                };
                if !ok {
                    return Err(mismatch(op.symbol(), a, b));
                }
                native(Ty::Bool)
            }
            BinOp::Contains | BinOp::StartsWith | BinOp::EndsWith if a.stringy() && b.stringy() => {
                if *a == Ty::Str && *b == Ty::Str {
                    native(Ty::Bool)
                } else {
                    // expr-lang's `contains` also searches arrays and maps;
                    // the spec's operators take strings, so check at run time.
                    Out::term(
                        Ty::Bool,
                        format!("__text(\"{}\", {}, {})", op.symbol(), l.code, r.code),
                    )
                }
            }
            BinOp::Matches if a.stringy() && b.stringy() => match &r.constant {
                Some(pattern) => {
                    let regex = runtime::regex(pattern)
                        .map_err(|e| format!("invalid regular expression {pattern:?}: {e}"))?;
                    self.regexes.push(regex);
                    Out::term(
                        Ty::Bool,
                        format!("__match({}, {})", l.code, self.regexes.len() - 1),
                    )
                }
                None => call(Ty::Bool, "__matches"),
            },
            _ => return Err(mismatch(op.symbol(), a, b)),
        };
        Ok(out)
    }

    fn index(&mut self, base: &Node, key: &Node, optional: bool) -> Result<Out, String> {
        let key_out = self.expr(key)?;
        // A named base is passed by name so the runtime can index it in place
        // instead of cloning the whole map or array first.
        let (base_ty, base_code, by_name) = match base {
            Node::Ident(name) => {
                let out = self.expr(base)?;
                (out.ty, format!("\"{name}\""), true)
            }
            _ => {
                let out = self.expr(base)?;
                (out.ty, out.code, false)
            }
        };
        let k = &key_out.ty;
        let (ty, mut mode) = match &base_ty {
            Ty::Array(e) if *k == Ty::Int || k.dynamic() => (self_or_any(e), 0),
            Ty::Map(v) if k.stringy() => {
                let zero = if **v == Ty::Str { ZERO_STRING } else { 0 };
                ((**v).clone(), zero)
            }
            t if t.dynamic() && !k.has_time() => (Ty::Any, 0),
            t => return Err(format!("cannot index {t} with {k}")),
        };
        if optional {
            mode |= OPTIONAL;
        }
        let function = if by_name { "__vidx" } else { "__idx" };
        Ok(Out::term(
            ty,
            format!("{function}({base_code}, {}, {mode})", key_out.code),
        ))
    }

    fn method(&mut self, base: &Node, name: &str, args: &[Node]) -> Result<Out, String> {
        let base = self.expr(base)?;
        let ty = match (&base.ty, name) {
            (
                Ty::Time,
                "Year" | "Month" | "Day" | "Hour" | "Minute" | "Second" | "Weekday" | "Unix",
            ) => Ty::Int,
            (Ty::Dur, "Hours" | "Minutes" | "Seconds") => Ty::Float,
            (Ty::Time | Ty::Dur, _) => return Err(format!("{} has no method {name}", base.ty)),
            (t, _) => return Err(format!("{t} has no methods (called {name})")),
        };
        if !args.is_empty() {
            return Err(format!("{name}() takes no arguments"));
        }
        let function = if ty == Ty::Int { "__time" } else { "__dur_in" };
        Ok(Out::term(
            ty,
            format!("{function}({}, \"{name}\")", base.code),
        ))
    }

    /// Checks a predicate with `#` bound to `item`.
    fn predicate(&mut self, prog: &Prog, item: Ty) -> Result<Out, String> {
        self.scopes.push(Scope::Item(item));
        // `map(xs, .name)` (and the bare `map(xs, name)` expr-lang accepts)
        // reads member `name` of the element unless `name` is a variable.
        let shorthand = match &prog.expr {
            Node::Ident(name) if prog.lets.is_empty() && self.lookup(name).is_none() => {
                Some(Prog {
                    lets: Vec::new(),
                    expr: Node::Index {
                        base: Box::new(Node::Ident("#".to_string())),
                        key: Box::new(Node::Str(name.clone())),
                        optional: false,
                    },
                })
            }
            _ => None,
        };
        let out = self.program(shorthand.as_ref().unwrap_or(prog));
        self.scopes.pop();
        let out = out?;
        Ok(Out::term(out.ty, format!("{{{}}}", out.code)))
    }

    fn call(&mut self, name: &str, args: &[Node], pred: Option<&Prog>) -> Result<Out, String> {
        const PREDICATED: [&str; 7] = ["all", "any", "none", "one", "filter", "map", "count"];
        const PLAIN: [&str; 21] = [
            "len", "first", "last", "lower", "upper", "trim", "split", "join", "abs", "int",
            "float", "string", "keys", "values", "seconds", "minutes", "hours", "days", "weeks",
            "duration", "now",
        ];
        let takes_predicate = PREDICATED.contains(&name);
        if !takes_predicate && !PLAIN.contains(&name) {
            return Err(format!("unknown function {name}"));
        }
        // `all(xs, true)`: expr-lang only turns the last argument into a
        // predicate when it mentions `#`; in expr every second argument is one.
        let implicit;
        let (args, pred) = match pred {
            None if takes_predicate && args.len() == 2 => {
                implicit = Prog {
                    lets: Vec::new(),
                    expr: args[1].clone(),
                };
                (&args[..1], Some(&implicit))
            }
            _ => (args, pred),
        };
        if pred.is_some() && !takes_predicate {
            return Err(format!("{name}() does not take a predicate"));
        }
        let arity = |min: usize, max: usize| -> Result<(), String> {
            if args.len() < min || args.len() > max {
                let expected = if min == max {
                    min.to_string()
                } else {
                    format!("{min} to {max}")
                };
                return Err(format!(
                    "{name}() takes {expected} argument(s), got {}",
                    args.len()
                ));
            }
            Ok(())
        };
        match name {
            "all" | "any" | "none" | "one" | "filter" | "map" | "count" => {
                if args.len() != 1 {
                    return Err(format!("{name}() takes an array and a predicate"));
                }
                let array = self.expr(&args[0])?;
                let item = array
                    .ty
                    .element()
                    .ok_or_else(|| format!("{name}() needs an array, not {}", array.ty))?;
                let Some(pred) = pred else {
                    if name != "count" {
                        return Err(format!("{name}() needs a predicate"));
                    }
                    if !item.boolish() {
                        return Err(format!(
                            "count() without a predicate needs an array of bool, not {}",
                            array.ty
                        ));
                    }
                    return Ok(Out::term(Ty::Int, format!("__count({})", array.code)));
                };
                let body = self.predicate(pred, item.clone())?;
                let ty = match name {
                    "map" => Ty::Array(Box::new(body.ty.clone())),
                    "filter" => Ty::Array(Box::new(item)),
                    "count" => Ty::Int,
                    _ => Ty::Bool,
                };
                if name != "map" && !body.ty.boolish() {
                    return Err(format!("{name}() predicate must be bool, not {}", body.ty));
                }
                Ok(Out::term(
                    ty,
                    format!("__{name}({}, {})", array.code, body.code),
                ))
            }
            "len" => {
                arity(1, 1)?;
                let x = self.expr(&args[0])?;
                if !matches!(x.ty, Ty::Str | Ty::Array(_) | Ty::Map(_)) && !x.ty.dynamic() {
                    return Err(format!("invalid argument for len ({})", x.ty));
                }
                Ok(Out::term(Ty::Int, format!("len({})", x.code)))
            }
            "first" | "last" => {
                arity(1, 1)?;
                let x = self.expr(&args[0])?;
                let item =
                    x.ty.element()
                        .ok_or_else(|| format!("{name}() needs an array, not {}", x.ty))?;
                Ok(Out::term(item, format!("{name}({})", x.code)))
            }
            "lower" | "upper" | "trim" => {
                arity(1, if name == "trim" { 2 } else { 1 })?;
                let codes = self.typed_args(name, args, &[|t| t.stringy(), |t| t.stringy()])?;
                Ok(Out::term(Ty::Str, format!("{name}({})", codes.join(", "))))
            }
            "split" => {
                arity(2, 3)?;
                let codes = self.typed_args(
                    name,
                    args,
                    &[
                        |t| t.stringy(),
                        |t| t.stringy(),
                        |t| *t == Ty::Int || t.dynamic(),
                    ],
                )?;
                Ok(Out::term(
                    Ty::Array(Box::new(Ty::Str)),
                    format!("__split({})", codes.join(", ")),
                ))
            }
            "join" => {
                arity(1, 2)?;
                let codes = self.typed_args(
                    name,
                    args,
                    &[
                        |t| t.dynamic() || matches!(t, Ty::Array(e) if e.stringy()),
                        |t| t.stringy(),
                    ],
                )?;
                Ok(Out::term(Ty::Str, format!("__join({})", codes.join(", "))))
            }
            "abs" => {
                arity(1, 1)?;
                let x = self.expr(&args[0])?;
                let ty = match x.ty {
                    Ty::Int | Ty::Float => x.ty.clone(),
                    t if t.dynamic() => Ty::Any,
                    t => return Err(format!("invalid argument for abs ({t})")),
                };
                Ok(Out::term(ty, format!("abs({})", x.code)))
            }
            "int" | "float" => {
                arity(1, 1)?;
                let codes = self.typed_args(name, args, &[|t| t.numeric() || t.stringy()])?;
                let ty = if name == "int" { Ty::Int } else { Ty::Float };
                Ok(Out::term(ty, format!("{name}({})", codes[0])))
            }
            "string" => {
                arity(1, 1)?;
                let codes = self.typed_args(name, args, &[|t| !t.has_time()])?;
                Ok(Out::term(Ty::Str, format!("string({})", codes[0])))
            }
            "keys" | "values" => {
                arity(1, 1)?;
                let x = self.expr(&args[0])?;
                let ty = match (&x.ty, name) {
                    (Ty::Map(_), "keys") => Ty::Array(Box::new(Ty::Str)),
                    (Ty::Map(v), _) => Ty::Array(v.clone()),
                    (t, "keys") if t.dynamic() => Ty::Array(Box::new(Ty::Str)),
                    (t, _) if t.dynamic() => Ty::Array(Box::new(Ty::Any)),
                    (t, _) => return Err(format!("{name}() needs a map, not {t}")),
                };
                Ok(Out::term(ty, format!("{name}({})", x.code)))
            }
            "seconds" | "minutes" | "hours" | "days" | "weeks" => {
                arity(1, 1)?;
                let codes = self.typed_args(name, args, &[|t| *t == Ty::Int || t.dynamic()])?;
                let unit = DurUnit::from_function(name)
                    .ok_or_else(|| format!("unknown function {name}"))?;
                Ok(Out::term(
                    Ty::Dur,
                    format!("__dur({}, {})", codes[0], unit as u8),
                ))
            }
            "duration" => {
                arity(1, 1)?;
                let x = self.expr(&args[0])?;
                if !x.ty.stringy() {
                    return Err(format!("invalid argument for duration ({})", x.ty));
                }
                match &x.constant {
                    // Constant arguments are parsed now, so an invalid one is
                    // a compile error (see the module docs, case 203).
                    Some(text) => {
                        let nanos = time::parse_duration(text)?;
                        Ok(Out::term(Ty::Dur, int_code(nanos)))
                    }
                    None => Ok(Out::term(Ty::Dur, format!("__duration({})", x.code))),
                }
            }
            "now" => {
                arity(0, 0)?;
                Ok(Out::term(Ty::Time, "__now()".to_string()))
            }
            _ => Err(format!("unknown function {name}")),
        }
    }

    /// Checks each argument against its predicate; returns their code.
    fn typed_args(
        &mut self,
        name: &str,
        args: &[Node],
        accept: &[fn(&Ty) -> bool],
    ) -> Result<Vec<String>, String> {
        let mut codes = Vec::new();
        for (i, arg) in args.iter().enumerate() {
            let out = self.expr(arg)?;
            if !accept.get(i).is_some_and(|ok| ok(&out.ty)) {
                return Err(format!(
                    "invalid argument {} for {name} ({})",
                    i + 1,
                    out.ty
                ));
            }
            codes.push(out.code);
        }
        Ok(codes)
    }
}

/// An array's element type, `any` for the empty literal's `nil`.
fn self_or_any(element: &Ty) -> Ty {
    if *element == Ty::Nil {
        Ty::Any
    } else {
        element.clone()
    }
}

/// An integer as expr source (negative values as a parenthesised negation; the
/// grammar has no negative literals and `-9223372036854775808` overflows).
fn int_code(n: i64) -> String {
    match n {
        i64::MIN => "(-9223372036854775807 - 1)".to_string(),
        n if n < 0 => format!("(-{})", n.unsigned_abs()),
        n => n.to_string(),
    }
}
