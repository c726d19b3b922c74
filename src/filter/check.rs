//! Static checking (docs/semantics.md#filters): unknown names and functions,
//! ill-typed operations and a result that cannot be boolean are compile
//! errors. One pass infers a [`Ty`] for every node and builds the
//! [`Expr`] the evaluator runs.
//!
//! `any` is the type of values only known at run time (members of
//! `body_json`, elements of untyped arrays); operations on `any` are allowed
//! and checked when evaluated, failing closed. Times and durations never mix
//! with other types (in `?:`, `??`, `==`, `in`, array literals or generic
//! functions such as `string()`): that keeps them out of `any`, so every
//! time operation is checked here.

use std::fmt;

use super::ast::{BinOp, Node, UnOp};
use super::program::{Expr, Func, Pred, Var};
use super::time;
use super::value::Value;

/// Static type of an expression.
#[derive(Debug, Clone, PartialEq)]
enum Ty {
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

    fn numeric(&self) -> bool {
        self.number() || self.dynamic()
    }

    fn int(&self) -> bool {
        *self == Ty::Int || self.dynamic()
    }

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

    /// Element type when iterated — `any` for dynamic values.
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

/// Whether `==`, `!=` and `in` may compare these types: anything with
/// anything (different types are unequal), but times and durations only
/// with their own kind or nil.
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

fn variable_type(var: Var) -> Ty {
    match var {
        Var::Properties => Ty::Map(Box::new(Ty::Str)),
        Var::EnqueuedAt | Var::VisibleAt => Ty::Time,
        Var::SubjectParts | Var::PropertyKeys => Ty::Array(Box::new(Ty::Str)),
        Var::BodySize => Ty::Int,
        Var::BodyJson => Ty::Map(Box::new(Ty::Any)),
        _ => Ty::Str,
    }
}

fn mismatch(op: &str, a: &Ty, b: &Ty) -> String {
    format!("invalid operation: {op} (mismatched types {a} and {b})")
}

/// Checks a whole filter and returns what to evaluate.
pub(super) fn check(node: &Node) -> Result<Expr, String> {
    let mut checker = Checker { scopes: Vec::new() };
    let (ty, expr) = checker.expr(node)?;
    if !ty.boolish() || ty == Ty::Nil {
        return Err(format!(
            "filter must be a boolean expression, but its type is {ty}"
        ));
    }
    Ok(expr)
}

enum Scope {
    Let(String, Ty),
    /// Inside a predicate: `#` is the element, `#index` its position; two
    /// slots.
    Item(Ty),
}

struct Checker {
    scopes: Vec<Scope>,
}

type Out = Result<(Ty, Expr), String>;

fn boxed(expr: Expr) -> Box<Expr> {
    Box::new(expr)
}

impl Checker {
    /// The type and slot of a local name.
    fn local(&self, name: &str) -> Option<(Ty, usize)> {
        let mut slot: usize = self
            .scopes
            .iter()
            .map(|s| if matches!(s, Scope::Item(_)) { 2 } else { 1 })
            .sum();
        for scope in self.scopes.iter().rev() {
            match scope {
                Scope::Let(n, ty) => {
                    slot -= 1;
                    if n == name {
                        return Some((ty.clone(), slot));
                    }
                }
                Scope::Item(ty) => {
                    slot -= 2;
                    match name {
                        "#" => return Some((ty.clone(), slot)),
                        "#index" => return Some((Ty::Int, slot + 1)),
                        _ => {}
                    }
                }
            }
        }
        None
    }

    fn name(&self, name: &str) -> Out {
        if let Some((ty, slot)) = self.local(name) {
            return Ok((ty, Expr::Local(slot)));
        }
        match Var::from_name(name) {
            Some(var) => Ok((variable_type(var), Expr::Var(var))),
            None if name == "#" || name == "#index" => {
                Err(format!("{name} is only defined inside a predicate"))
            }
            None => Err(format!("unknown name {name}")),
        }
    }

    fn expr(&mut self, node: &Node) -> Out {
        Ok(match node {
            Node::Nil => (Ty::Nil, Expr::Const(Value::Nil)),
            Node::Bool(b) => (Ty::Bool, Expr::Const(Value::Bool(*b))),
            Node::Int(n) => (Ty::Int, Expr::Const(Value::Int(*n))),
            Node::Float(f) => (Ty::Float, Expr::Const(Value::Float(*f))),
            Node::Str(s) => (Ty::Str, Expr::Const(Value::str(s))),
            Node::Ident(name) => self.name(name)?,
            Node::Array(items) => {
                let mut ty = Ty::Nil;
                let mut exprs = Vec::with_capacity(items.len());
                for item in items {
                    let (t, e) = self.expr(item)?;
                    ty = join(&ty, &t)?;
                    exprs.push(e);
                }
                (Ty::Array(Box::new(ty)), Expr::Array(exprs))
            }
            Node::Unary(op, operand) => {
                let (ty, e) = self.expr(operand)?;
                match op {
                    UnOp::Not if ty.boolish() => (Ty::Bool, Expr::Not(boxed(e))),
                    UnOp::Minus | UnOp::Plus
                        if matches!(ty, Ty::Int | Ty::Float | Ty::Dur) || ty.dynamic() =>
                    {
                        let ty = if ty.dynamic() { Ty::Any } else { ty };
                        (ty, Expr::Sign(*op == UnOp::Minus, boxed(e)))
                    }
                    _ => {
                        let symbol = match op {
                            UnOp::Not => "not",
                            UnOp::Minus => "-",
                            UnOp::Plus => "+",
                        };
                        return Err(format!("invalid operation: {symbol} on {ty}"));
                    }
                }
            }
            Node::Binary(op, left, right) => self.binary(*op, left, right)?,
            Node::Chain(op, items) => {
                let mut exprs = Vec::with_capacity(items.len());
                for item in items {
                    let (ty, e) = self.expr(item)?;
                    if !ty.boolish() {
                        return Err(mismatch(op.symbol(), &ty, &Ty::Bool));
                    }
                    exprs.push(e);
                }
                (Ty::Bool, Expr::Logic(*op == BinOp::And, exprs))
            }
            Node::Index {
                base,
                key,
                optional,
            } => self.index(base, key, *optional)?,
            Node::Slice { base, start, end } => {
                let (ty, base) = self.expr(base)?;
                let ty = match ty {
                    Ty::Array(_) | Ty::Str => ty,
                    t if t.dynamic() => Ty::Any,
                    t => return Err(format!("cannot slice {t}")),
                };
                let mut bound = |b: &Option<Box<Node>>| -> Result<Option<Box<Expr>>, String> {
                    let Some(b) = b else { return Ok(None) };
                    let (t, e) = self.expr(b)?;
                    if !t.int() {
                        return Err(format!("slice bounds must be int, not {t}"));
                    }
                    Ok(Some(boxed(e)))
                };
                let (start, end) = (bound(start)?, bound(end)?);
                (ty, Expr::Slice(boxed(base), start, end))
            }
            Node::Ternary(condition, then, other) => {
                let (c, condition) = self.expr(condition)?;
                if !c.boolish() {
                    return Err(format!("condition must be bool, not {c}"));
                }
                let ((a, then), (b, other)) = (self.expr(then)?, self.expr(other)?);
                (
                    join(&a, &b)?,
                    Expr::Ternary(boxed(condition), boxed(then), boxed(other)),
                )
            }
            Node::Let(name, value, body) => {
                if Var::from_name(name).is_some() || name.starts_with(['#', '$']) {
                    return Err(format!("cannot redeclare variable {name}"));
                }
                let (ty, value) = self.expr(value)?;
                self.scopes.push(Scope::Let(name.clone(), ty));
                let body = self.expr(body);
                self.scopes.pop();
                let (ty, body) = body?;
                (ty, Expr::Let(boxed(value), boxed(body)))
            }
            Node::Method { base, name, args } => self.method(base, name, args)?,
            Node::Call { name, args } => self.call(name, args)?,
            Node::Closure(_) => return Err("a predicate is only allowed as an argument".into()),
        })
    }

    fn binary(&mut self, op: BinOp, left: &Node, right: &Node) -> Out {
        let ((a, l), (b, r)) = (self.expr(left)?, self.expr(right)?);
        let (a, b) = (&a, &b);
        let dynamic_numbers = (a.dynamic() && b.numeric()) || (b.dynamic() && a.numeric());
        let ty = match op {
            BinOp::Add => match (a, b) {
                (Ty::Int, Ty::Int) => Ty::Int,
                _ if a.number() && b.number() => Ty::Float,
                (Ty::Time, Ty::Dur) | (Ty::Dur, Ty::Time) => Ty::Time,
                (Ty::Dur, Ty::Dur) => Ty::Dur,
                (Ty::Str, Ty::Str) => {
                    // Folded, so `matches "a" + "b"` is a constant pattern.
                    if let (Expr::Const(Value::Str(x)), Expr::Const(Value::Str(y))) = (&l, &r) {
                        return Ok((Ty::Str, Expr::Const(Value::str(&format!("{x}{y}")))));
                    }
                    Ty::Str
                }
                _ if (a.dynamic() && (b.numeric() || b.stringy()))
                    || (b.dynamic() && (a.numeric() || a.stringy())) =>
                {
                    Ty::Any
                }
                _ => return Err(mismatch("+", a, b)),
            },
            BinOp::Sub => match (a, b) {
                (Ty::Int, Ty::Int) => Ty::Int,
                _ if a.number() && b.number() => Ty::Float,
                (Ty::Time, Ty::Time) | (Ty::Dur, Ty::Dur) => Ty::Dur,
                (Ty::Time, Ty::Dur) => Ty::Time,
                _ if dynamic_numbers => Ty::Any,
                _ => return Err(mismatch("-", a, b)),
            },
            BinOp::Mul => match (a, b) {
                (Ty::Int, Ty::Int) => Ty::Int,
                _ if a.number() && b.number() => Ty::Float,
                (Ty::Dur, Ty::Int) | (Ty::Int, Ty::Dur) => Ty::Dur,
                _ if dynamic_numbers => Ty::Any,
                _ => return Err(mismatch("*", a, b)),
            },
            BinOp::Div | BinOp::Pow if a.numeric() && b.numeric() => Ty::Float,
            BinOp::Mod if a.int() && b.int() => Ty::Int,
            BinOp::Range if a.int() && b.int() => Ty::Array(Box::new(Ty::Int)),
            BinOp::Eq | BinOp::Ne if comparable(a, b) => Ty::Bool,
            BinOp::Lt | BinOp::Gt | BinOp::Le | BinOp::Ge
                if (a.numeric() && b.numeric())
                    || (a.stringy() && b.stringy())
                    || (a == b && matches!(a, Ty::Time | Ty::Dur)) =>
            {
                Ty::Bool
            }
            BinOp::In => {
                let ok = match b {
                    Ty::Array(e) => comparable(a, e),
                    Ty::Map(_) => a.stringy(),
                    t if t.dynamic() => !a.has_time(),
                    _ => false,
                };
                if !ok {
                    return Err(mismatch("in", a, b));
                }
                Ty::Bool
            }
            BinOp::Contains | BinOp::StartsWith | BinOp::EndsWith if a.stringy() && b.stringy() => {
                Ty::Bool
            }
            BinOp::Matches if a.stringy() && b.stringy() => {
                if let Expr::Const(Value::Str(pattern)) = &r {
                    let regex = super::eval::regex(pattern)
                        .map_err(|e| format!("invalid regular expression {pattern:?}: {e}"))?;
                    return Ok((Ty::Bool, Expr::Matches(boxed(l), Box::new(regex))));
                }
                Ty::Bool
            }
            BinOp::Default => join(a, b)?,
            _ => return Err(mismatch(op.symbol(), a, b)),
        };
        Ok((ty, Expr::Binary(op, boxed(l), boxed(r))))
    }

    fn index(&mut self, base: &Node, key: &Node, optional: bool) -> Out {
        let ((base_ty, base), (k, key)) = (self.expr(base)?, self.expr(key)?);
        let (ty, zero_string) = match &base_ty {
            Ty::Array(e) if k.int() => (element_or_any(e), false),
            Ty::Map(v) if k.stringy() => ((**v).clone(), **v == Ty::Str),
            t if t.dynamic() && !k.has_time() => (Ty::Any, false),
            t => return Err(format!("cannot index {t} with {k}")),
        };
        let expr = Expr::Index {
            base: boxed(base),
            key: boxed(key),
            optional,
            zero_string,
        };
        Ok((ty, expr))
    }

    fn method(&mut self, base: &Node, name: &str, args: &[Node]) -> Out {
        const TIME: [&str; 8] = [
            "Year", "Month", "Day", "Hour", "Minute", "Second", "Weekday", "Unix",
        ];
        const DURATION: [&str; 3] = ["Hours", "Minutes", "Seconds"];
        let (ty, base) = self.expr(base)?;
        let (result, known) = match ty {
            Ty::Time => (Ty::Int, TIME.iter().find(|m| **m == name)),
            Ty::Dur => (Ty::Float, DURATION.iter().find(|m| **m == name)),
            t => return Err(format!("{t} has no methods (called {name})")),
        };
        let Some(method) = known else {
            return Err(format!("{ty} has no method {name}"));
        };
        if !args.is_empty() {
            return Err(format!("{name}() takes no arguments"));
        }
        Ok((result, Expr::Method(method, boxed(base))))
    }

    /// A predicate with `#` bound to `item`. A bare unknown name as the
    /// whole predicate (`map(xs, name)`), like `.name`, reads `#.name`.
    fn predicate(&mut self, node: &Node, item: Ty) -> Out {
        let node = match node {
            Node::Closure(body) => body,
            other => other,
        };
        self.scopes.push(Scope::Item(item));
        let shorthand = match node {
            Node::Ident(name) if self.local(name).is_none() && Var::from_name(name).is_none() => {
                Some(Node::Index {
                    base: Box::new(Node::Ident("#".to_string())),
                    key: Box::new(Node::Str(name.clone())),
                    optional: false,
                })
            }
            _ => None,
        };
        let out = self.expr(shorthand.as_ref().unwrap_or(node));
        self.scopes.pop();
        out
    }

    fn call(&mut self, name: &str, args: &[Node]) -> Out {
        if let Some(pred) = Pred::from_name(name) {
            return self.iterate(pred, args);
        }
        let Some((func, min, max)) = builtin(name) else {
            return Err(format!("unknown function {name}"));
        };
        if args.iter().any(|a| matches!(a, Node::Closure(_))) {
            return Err(format!("{name}() does not take a predicate"));
        }
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
        let mut types = Vec::with_capacity(args.len());
        let mut exprs = Vec::with_capacity(args.len());
        for arg in args {
            let (t, e) = self.expr(arg)?;
            types.push(t);
            exprs.push(e);
        }
        let bad = |i: usize| format!("invalid argument {} for {name} ({})", i + 1, types[i]);
        let all = |ok: &dyn Fn(usize, &Ty) -> bool| match types
            .iter()
            .enumerate()
            .find(|(i, t)| !ok(*i, t))
        {
            Some((i, _)) => Err(bad(i)),
            None => Ok(()),
        };
        let ty = match func {
            Func::Len => {
                let t = &types[0];
                if !matches!(t, Ty::Str | Ty::Array(_) | Ty::Map(_)) && !t.dynamic() {
                    return Err(format!("invalid argument for len ({t})"));
                }
                Ty::Int
            }
            Func::First | Func::Last => types[0]
                .element()
                .ok_or_else(|| format!("{name}() needs an array, not {}", types[0]))?,
            Func::Lower | Func::Upper | Func::Trim => {
                all(&|_, t| t.stringy())?;
                Ty::Str
            }
            Func::Split => {
                all(&|i, t| if i < 2 { t.stringy() } else { t.int() })?;
                Ty::Array(Box::new(Ty::Str))
            }
            Func::Join => {
                all(&|i, t| match i {
                    0 => t.dynamic() || matches!(t, Ty::Array(e) if e.stringy()),
                    _ => t.stringy(),
                })?;
                Ty::Str
            }
            Func::Abs => match &types[0] {
                t @ (Ty::Int | Ty::Float) => t.clone(),
                t if t.dynamic() => Ty::Any,
                t => return Err(format!("invalid argument for abs ({t})")),
            },
            Func::Int | Func::Float => {
                all(&|_, t| t.numeric() || t.stringy())?;
                if func == Func::Int {
                    Ty::Int
                } else {
                    Ty::Float
                }
            }
            Func::String => {
                all(&|_, t| !t.has_time())?;
                Ty::Str
            }
            Func::Keys | Func::Values => match (&types[0], func) {
                (Ty::Map(_), Func::Keys) => Ty::Array(Box::new(Ty::Str)),
                (Ty::Map(v), _) => Ty::Array(v.clone()),
                (t, Func::Keys) if t.dynamic() => Ty::Array(Box::new(Ty::Str)),
                (t, _) if t.dynamic() => Ty::Array(Box::new(Ty::Any)),
                (t, _) => return Err(format!("{name}() needs a map, not {t}")),
            },
            Func::Units(..) => {
                all(&|_, t| t.int())?;
                Ty::Dur
            }
            Func::Duration => {
                if !types[0].stringy() {
                    return Err(format!("invalid argument for duration ({})", types[0]));
                }
                // A constant argument is parsed now, so an invalid one is a
                // compile error (case 203).
                if let Some(Expr::Const(Value::Str(text))) = exprs.first() {
                    let nanos = time::parse_duration(text)?;
                    return Ok((Ty::Dur, Expr::Const(Value::Dur(nanos))));
                }
                Ty::Dur
            }
            Func::Now => Ty::Time,
        };
        Ok((ty, Expr::Call(func, exprs)))
    }

    /// `all(xs, pred)` and the other predicate builtins; the second argument
    /// is the predicate, braced or not.
    fn iterate(&mut self, pred: Pred, args: &[Node]) -> Out {
        let name = pred.name();
        let (array, body) = match args {
            [array, body] => (array, Some(body)),
            [array] if pred == Pred::Count => (array, None),
            [_] => return Err(format!("{name}() needs a predicate")),
            _ => return Err(format!("{name}() takes an array and a predicate")),
        };
        if matches!(array, Node::Closure(_)) {
            return Err(format!("{name}() needs an array, not a predicate"));
        }
        let (ty, array) = self.expr(array)?;
        let item = ty
            .element()
            .ok_or_else(|| format!("{name}() needs an array, not {ty}"))?;
        let Some(body) = body else {
            if !item.boolish() {
                return Err(format!(
                    "count() without a predicate needs an array of bool, not {ty}"
                ));
            }
            return Ok((Ty::Int, Expr::Iterate(pred, boxed(array), None)));
        };
        let (body_ty, body) = self.predicate(body, item.clone())?;
        if pred != Pred::Map && !body_ty.boolish() {
            return Err(format!("{name}() predicate must be bool, not {body_ty}"));
        }
        let ty = match pred {
            Pred::Map => Ty::Array(Box::new(body_ty)),
            Pred::Filter => Ty::Array(Box::new(item)),
            Pred::Count => Ty::Int,
            _ => Ty::Bool,
        };
        Ok((ty, Expr::Iterate(pred, boxed(array), Some(boxed(body)))))
    }
}

/// A builtin without a predicate, with its arity (the contract's MUST and
/// SHOULD lists, docs/semantics.md#filters).
fn builtin(name: &str) -> Option<(Func, usize, usize)> {
    Some(match name {
        "len" => (Func::Len, 1, 1),
        "first" => (Func::First, 1, 1),
        "last" => (Func::Last, 1, 1),
        "lower" => (Func::Lower, 1, 1),
        "upper" => (Func::Upper, 1, 1),
        "trim" => (Func::Trim, 1, 2),
        "split" => (Func::Split, 2, 3),
        "join" => (Func::Join, 1, 2),
        "abs" => (Func::Abs, 1, 1),
        "int" => (Func::Int, 1, 1),
        "float" => (Func::Float, 1, 1),
        "string" => (Func::String, 1, 1),
        "keys" => (Func::Keys, 1, 1),
        "values" => (Func::Values, 1, 1),
        "seconds" => (Func::Units("seconds", time::NANOS_PER_SECOND), 1, 1),
        "minutes" => (Func::Units("minutes", time::NANOS_PER_MINUTE), 1, 1),
        "hours" => (Func::Units("hours", time::NANOS_PER_HOUR), 1, 1),
        "days" => (Func::Units("days", time::NANOS_PER_DAY), 1, 1),
        "weeks" => (Func::Units("weeks", time::NANOS_PER_WEEK), 1, 1),
        "duration" => (Func::Duration, 1, 1),
        "now" => (Func::Now, 0, 0),
        _ => return None,
    })
}

/// An array's element type, `any` for the empty literal's `nil`.
fn element_or_any(element: &Ty) -> Ty {
    if *element == Ty::Nil {
        Ty::Any
    } else {
        element.clone()
    }
}
