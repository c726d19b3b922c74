//! Differential test: random well-typed expressions are generated as trees,
//! printed as source with only the parentheses the precedence table (semantics
//! docs/semantics.md#filters) requires (plus some random extra ones and alternate spellings), and
//! evaluated twice: by the filter engine from the source, and by the small
//! reference evaluator below, written from the contract (docs/semantics.md#filters) against the generator's
//! own tree. Both must agree on every message, errors included.

use std::collections::BTreeMap;

use super::{Filter, FilterInput};

/// xorshift64: deterministic test input.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn pick(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    fn choose<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.pick(items.len())]
    }
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum T {
    Bool,
    Int,
    Float,
    Str,
    StrArr,
    IntArr,
    Dur,
    Time,
}

/// An expression of the generator: what is printed, and what the reference
/// evaluates.
#[derive(Clone, Debug)]
enum R {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Var(&'static str),
    /// The predicate element `#`.
    Item,
    Prop(String),
    Json(String),
    Array(Vec<R>),
    Not(Box<R>),
    Neg(Box<R>),
    /// Binary operator by its canonical spelling; `negated` for `not in` etc.
    Bin(&'static str, bool, Box<R>, Box<R>),
    Ternary(Box<R>, Box<R>, Box<R>),
    Index(Box<R>, Box<R>),
    Slice(Box<R>, i64, i64),
    Call(&'static str, Vec<R>),
    Pred(&'static str, Box<R>, Box<R>),
    Method(Box<R>, &'static str),
}

fn b(r: R) -> Box<R> {
    Box::new(r)
}

const STRINGS: [&str; 7] = ["a", "b.c", "", "eu", "orders", "é", "gold"];
const PATTERNS: [&str; 5] = ["^a", "u$", "[0-9]", "(?i)ORD", "e.n"];

struct Gen {
    rng: Rng,
    in_predicate: bool,
}

impl Gen {
    fn gen(&mut self, t: T, depth: u32) -> R {
        let leaf = depth == 0 || self.rng.chance(25);
        let d = depth.saturating_sub(1);
        match t {
            T::Bool if leaf => R::Bool(self.rng.chance(50)),
            T::Bool => match self.rng.pick(9) {
                0 => {
                    let op = self.rng.choose(&["==", "!=", "<", ">", "<=", ">="]);
                    let ty = [T::Int, T::Str, T::Dur, T::Time, T::Float][self.rng.pick(5)];
                    R::Bin(op, false, b(self.gen(ty, d)), b(self.gen(ty, d)))
                }
                1 | 2 => {
                    let op = self.rng.choose(&["and", "or"]);
                    R::Bin(op, false, b(self.gen(T::Bool, d)), b(self.gen(T::Bool, d)))
                }
                3 => R::Not(b(self.gen(T::Bool, d))),
                4 => {
                    let op = self
                        .rng
                        .choose(&["contains", "startsWith", "endsWith", "matches"]);
                    let negated = self.rng.chance(30);
                    let right = if op == "matches" {
                        R::Str(self.rng.choose(&PATTERNS).to_string())
                    } else {
                        self.gen(T::Str, d)
                    };
                    R::Bin(op, negated, b(self.gen(T::Str, d)), b(right))
                }
                5 => {
                    let negated = self.rng.chance(30);
                    let (item, set) = match self.rng.pick(3) {
                        0 => (self.gen(T::Str, d), self.gen(T::StrArr, d)),
                        1 => (self.gen(T::Int, d), self.gen(T::IntArr, d)),
                        _ => (self.gen(T::Str, d), R::Var("properties")),
                    };
                    R::Bin("in", negated, b(item), b(set))
                }
                6 => {
                    let name = self.rng.choose(&["all", "any", "none", "one"]);
                    let array = self.gen(T::StrArr, d);
                    let body = self.predicate(T::Bool, d);
                    R::Pred(name, b(array), b(body))
                }
                7 => R::Ternary(
                    b(self.gen(T::Bool, d)),
                    b(self.gen(T::Bool, d)),
                    b(self.gen(T::Bool, d)),
                ),
                _ => {
                    let op = self.rng.choose(&["==", "!=", ">", "<="]);
                    let json = R::Json(self.rng.choose(&["n", "s", "flag"]).to_string());
                    let left = if self.rng.chance(50) {
                        R::Bin("??", false, b(json), b(R::Int(self.rng.pick(3) as i64)))
                    } else {
                        json
                    };
                    R::Bin(op, false, b(left), b(self.gen(T::Int, d)))
                }
            },
            T::Int if leaf => match self.rng.pick(3) {
                0 => R::Var("body_size"),
                _ => R::Int(self.rng.pick(12) as i64),
            },
            T::Int => match self.rng.pick(8) {
                0 | 1 => {
                    let op = self.rng.choose(&["+", "-", "*", "%"]);
                    R::Bin(op, false, b(self.gen(T::Int, d)), b(self.gen(T::Int, d)))
                }
                2 => R::Neg(b(self.gen(T::Int, d))),
                3 => {
                    let ty = [T::Str, T::StrArr, T::IntArr][self.rng.pick(3)];
                    R::Call("len", vec![self.gen(ty, d)])
                }
                4 => {
                    let array = self.gen(T::StrArr, d);
                    R::Pred("count", b(array), b(self.predicate(T::Bool, d)))
                }
                5 => {
                    let method = self
                        .rng
                        .choose(&["Year", "Month", "Day", "Hour", "Weekday", "Unix"]);
                    R::Method(b(self.gen(T::Time, d)), method)
                }
                6 => R::Ternary(
                    b(self.gen(T::Bool, d)),
                    b(self.gen(T::Int, d)),
                    b(self.gen(T::Int, d)),
                ),
                _ => R::Index(b(self.gen(T::IntArr, d)), b(self.gen(T::Int, d))),
            },
            T::Float if leaf => R::Float([0.5, 1.5, 2.0][self.rng.pick(3)]),
            T::Float => match self.rng.pick(3) {
                0 => R::Bin("/", false, b(self.gen(T::Int, d)), b(self.gen(T::Int, d))),
                1 => R::Bin(
                    "**",
                    false,
                    b(R::Int(self.rng.pick(4) as i64)),
                    b(R::Int(self.rng.pick(4) as i64)),
                ),
                _ => R::Method(
                    b(self.gen(T::Dur, d)),
                    self.rng.choose(&["Hours", "Minutes"]),
                ),
            },
            T::Str if leaf => match self.rng.pick(4) {
                0 if self.in_predicate => R::Item,
                0 => R::Var(
                    self.rng
                        .choose(&["subject", "group_id", "content_type", "body_text"]),
                ),
                1 => R::Prop(
                    self.rng
                        .choose(&["tier", "region", "x", "missing"])
                        .to_string(),
                ),
                _ => R::Str(self.rng.choose(&STRINGS).to_string()),
            },
            T::Str => match self.rng.pick(6) {
                0 => R::Bin("+", false, b(self.gen(T::Str, d)), b(self.gen(T::Str, d))),
                1 => R::Call(
                    self.rng.choose(&["lower", "upper", "trim"]),
                    vec![self.gen(T::Str, d)],
                ),
                2 => R::Call("string", vec![self.gen(T::Int, d)]),
                3 => R::Index(b(self.gen(T::StrArr, d)), b(self.gen(T::Int, d))),
                4 => R::Bin(
                    "??",
                    false,
                    b(R::Call("first", vec![self.gen(T::StrArr, d)])),
                    b(self.gen(T::Str, d)),
                ),
                _ => R::Ternary(
                    b(self.gen(T::Bool, d)),
                    b(self.gen(T::Str, d)),
                    b(self.gen(T::Str, d)),
                ),
            },
            T::StrArr if leaf => R::Var(self.rng.choose(&["subject_parts", "property_keys"])),
            T::StrArr => match self.rng.pick(5) {
                0 => R::Array(vec![self.gen(T::Str, d), self.gen(T::Str, d)]),
                1 => {
                    let array = self.gen(T::StrArr, d);
                    R::Pred("filter", b(array), b(self.predicate(T::Bool, d)))
                }
                2 => {
                    let array = self.gen(T::StrArr, d);
                    R::Pred("map", b(array), b(self.predicate(T::Str, d)))
                }
                3 => R::Call("split", vec![self.gen(T::Str, d), R::Str(".".into())]),
                _ => R::Slice(
                    b(self.gen(T::StrArr, d)),
                    self.rng.pick(5) as i64 - 2,
                    self.rng.pick(5) as i64 - 1,
                ),
            },
            T::IntArr => match self.rng.pick(3) {
                0 => R::Bin(
                    "..",
                    false,
                    b(R::Int(self.rng.pick(4) as i64)),
                    b(R::Int(self.rng.pick(6) as i64)),
                ),
                1 if !leaf => R::Array(vec![self.gen(T::Int, d), self.gen(T::Int, d)]),
                _ => R::Array(vec![R::Int(1), R::Int(self.rng.pick(5) as i64)]),
            },
            T::Dur if leaf => {
                let unit = self
                    .rng
                    .choose(&["seconds", "minutes", "hours", "days", "weeks"]);
                R::Call(unit, vec![R::Int(self.rng.pick(30) as i64)])
            }
            T::Dur => match self.rng.pick(4) {
                0 => {
                    let op = self.rng.choose(&["+", "-"]);
                    R::Bin(op, false, b(self.gen(T::Dur, d)), b(self.gen(T::Dur, d)))
                }
                1 => R::Bin(
                    "*",
                    false,
                    b(self.gen(T::Dur, d)),
                    b(R::Int(self.rng.pick(4) as i64)),
                ),
                2 => R::Bin("-", false, b(self.gen(T::Time, d)), b(self.gen(T::Time, d))),
                _ => R::Call(
                    "duration",
                    vec![R::Str(
                        self.rng
                            .choose(&["1h30m", "1d12h", "1.5d", "-2m", "1w", "0"])
                            .into(),
                    )],
                ),
            },
            T::Time if leaf => R::Var(self.rng.choose(&["enqueued_at", "visible_at"])),
            T::Time => {
                let op = self.rng.choose(&["+", "-"]);
                R::Bin(op, false, b(self.gen(T::Time, d)), b(self.gen(T::Dur, d)))
            }
        }
    }

    fn predicate(&mut self, t: T, depth: u32) -> R {
        let outer = std::mem::replace(&mut self.in_predicate, true);
        let body = self.gen(t, depth);
        self.in_predicate = outer;
        body
    }
}

// ---------------------------------------------------------------------------
// Printing with the precedence table of docs/semantics.md#filters.

/// Precedence of an expression's top operator (higher binds tighter).
fn precedence(r: &R) -> u32 {
    match r {
        R::Ternary(..) => 0,
        R::Bin(op, ..) => match *op {
            "or" => 10,
            "and" => 15,
            "==" | "!=" | "<" | ">" | "<=" | ">=" | "in" | "contains" | "startsWith"
            | "endsWith" | "matches" => 20,
            ".." => 25,
            "+" | "-" => 30,
            "*" | "/" | "%" => 60,
            "**" => 100,
            _ => 200, // ??
        },
        R::Not(_) => 50,
        R::Neg(_) => 90,
        _ => 1000,
    }
}

fn print(rng: &mut Rng, r: &R, min: u32) -> String {
    let p = precedence(r);
    let text = match r {
        R::Bool(v) => v.to_string(),
        R::Int(n) => n.to_string(),
        R::Float(f) => format!("{f:?}"),
        R::Str(s) => quote(rng, s),
        R::Var(name) => name.to_string(),
        R::Item => "#".to_string(),
        R::Prop(k) if rng.chance(50) => format!("properties.{k}"),
        R::Prop(k) => format!("properties[{}]", quote(rng, k)),
        R::Json(k) => format!("body_json.{k}"),
        R::Array(items) => {
            let items: Vec<String> = items.iter().map(|i| print(rng, i, 0)).collect();
            format!("[{}]", items.join(", "))
        }
        R::Not(x) => {
            let word = if rng.chance(50) { "not " } else { "!" };
            format!("{word}{}", print(rng, x, 50))
        }
        R::Neg(x) => format!("-{}", print(rng, x, 90)),
        R::Bin(op, negated, left, right) => {
            let (lmin, rmin) = if *op == "**" { (p + 1, p) } else { (p, p + 1) };
            let spelled = match *op {
                "and" if rng.chance(50) => "&&",
                "or" if rng.chance(50) => "||",
                "**" if rng.chance(50) => "^",
                op => op,
            };
            let not = if *negated { "not " } else { "" };
            let l = print(rng, left, lmin);
            let r = print(rng, right, rmin);
            format!("{l} {not}{spelled} {r}")
        }
        R::Ternary(c, a, e) => format!(
            "{} ? {} : {}",
            print(rng, c, 1),
            print(rng, a, 0),
            print(rng, e, 0)
        ),
        R::Index(base, i) => format!("{}[{}]", print(rng, base, 1000), print(rng, i, 0)),
        R::Slice(base, s, e) => format!("{}[{s}:{e}]", print(rng, base, 1000)),
        R::Call(name, args) => {
            let args: Vec<String> = args.iter().map(|a| print(rng, a, 0)).collect();
            format!("{name}({})", args.join(", "))
        }
        R::Pred(name, array, body) => {
            let array = print(rng, array, 0);
            let body = print(rng, body, 0);
            if rng.chance(30) {
                format!("{name}({array}, {{{body}}})")
            } else {
                format!("{name}({array}, {body})")
            }
        }
        R::Method(base, name) => format!("{}.{name}()", print(rng, base, 1000)),
    };
    if p < min || rng.chance(5) {
        format!("({text})")
    } else {
        text
    }
}

fn quote(rng: &mut Rng, s: &str) -> String {
    if rng.chance(50) {
        format!("{s:?}")
    } else {
        format!("'{s}'")
    }
}

// ---------------------------------------------------------------------------
// The reference evaluator.

#[derive(Clone, Debug, PartialEq)]
enum V {
    Nil,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Arr(Vec<V>),
    Dur(i64),
    Time(i64),
}

/// A failure; which one does not matter, only that both sides fail.
type Out = Result<V, ()>;

struct Msg {
    subject: String,
    properties: BTreeMap<String, String>,
    content_type: String,
    body: String,
    enqueued_ms: i64,
    visible_ms: i64,
}

fn num(v: &V) -> Option<f64> {
    match v {
        V::Int(n) => Some(*n as f64),
        V::Float(f) => Some(*f),
        _ => None,
    }
}

fn eq(a: &V, b: &V) -> bool {
    match (num(a), num(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

/// Days since 1970-01-01 to (year, month, day), counting days year by year.
fn date(mut days: i64) -> (i64, i64, i64) {
    let leap = |y: i64| (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let mut year = 1970;
    loop {
        let len = if leap(year) { 366 } else { 365 };
        if days < len {
            break;
        }
        days -= len;
        year += 1;
    }
    let lengths = [
        31,
        if leap(year) { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    let mut month = 1;
    for len in lengths {
        if days < len {
            break;
        }
        days -= len;
        month += 1;
    }
    (year, month, days + 1)
}

impl Msg {
    fn json(&self, key: &str) -> V {
        if !self.content_type.contains("json") {
            return V::Nil;
        }
        match serde_json::from_str::<serde_json::Value>(&self.body) {
            Ok(serde_json::Value::Object(members)) => match members.get(key) {
                Some(serde_json::Value::Number(n)) => V::Float(n.as_f64().unwrap_or(0.0)),
                Some(serde_json::Value::String(s)) => V::Str(s.clone()),
                Some(serde_json::Value::Bool(b)) => V::Bool(*b),
                _ => V::Nil,
            },
            _ => V::Nil,
        }
    }

    fn eval(&self, r: &R, item: Option<&V>) -> Out {
        let ev = |x: &R| self.eval(x, item);
        Ok(match r {
            R::Bool(v) => V::Bool(*v),
            R::Int(n) => V::Int(*n),
            R::Float(f) => V::Float(*f),
            R::Str(s) => V::Str(s.clone()),
            R::Item => item.cloned().ok_or(())?,
            R::Var(name) => match *name {
                "subject" => V::Str(self.subject.clone()),
                "group_id" => V::Str(String::new()),
                "content_type" => V::Str(self.content_type.clone()),
                "body_text" => V::Str(self.body.clone()),
                "body_size" => V::Int(self.body.len() as i64),
                "subject_parts" if self.subject.is_empty() => V::Arr(Vec::new()),
                "subject_parts" => {
                    V::Arr(self.subject.split('.').map(|p| V::Str(p.into())).collect())
                }
                "property_keys" => {
                    V::Arr(self.properties.keys().map(|k| V::Str(k.clone())).collect())
                }
                "enqueued_at" => V::Time(self.enqueued_ms * 1_000_000),
                "visible_at" => V::Time(self.visible_ms * 1_000_000),
                _ => return Err(()),
            },
            R::Prop(k) => V::Str(self.properties.get(k).cloned().unwrap_or_default()),
            R::Json(k) => self.json(k),
            R::Array(items) => V::Arr(items.iter().map(ev).collect::<Result<_, _>>()?),
            R::Not(x) => match ev(x)? {
                V::Bool(v) => V::Bool(!v),
                _ => return Err(()),
            },
            R::Neg(x) => match ev(x)? {
                V::Int(n) => V::Int(n.wrapping_neg()),
                _ => return Err(()),
            },
            R::Bin(op, negated, left, right) => {
                let value = self.binary(op, left, right, item)?;
                match (negated, value) {
                    (true, V::Bool(v)) => V::Bool(!v),
                    (_, v) => v,
                }
            }
            R::Ternary(c, a, e) => match ev(c)? {
                V::Bool(true) => ev(a)?,
                V::Bool(false) => ev(e)?,
                _ => return Err(()),
            },
            R::Index(base, i) => match (ev(base)?, ev(i)?) {
                (V::Arr(items), V::Int(i)) => {
                    let at = if i < 0 { i + items.len() as i64 } else { i };
                    usize::try_from(at)
                        .ok()
                        .and_then(|at| items.get(at).cloned())
                        .ok_or(())?
                }
                _ => return Err(()),
            },
            R::Slice(base, s, e) => {
                let V::Arr(items) = ev(base)? else {
                    return Err(());
                };
                let len = items.len() as i64;
                let fix = |x: i64| (if x < 0 { x + len } else { x }).clamp(0, len) as usize;
                let (from, to) = (fix(*s), fix(*e));
                V::Arr(if from < to {
                    items[from..to].to_vec()
                } else {
                    Vec::new()
                })
            }
            R::Call(name, args) => {
                let args: Vec<V> = args.iter().map(ev).collect::<Result<_, _>>()?;
                call(name, &args)?
            }
            R::Pred(name, array, body) => {
                let V::Arr(items) = ev(array)? else {
                    return Err(());
                };
                let mut verdicts = Vec::new();
                for element in &items {
                    let v = self.eval(body, Some(element))?;
                    if *name == "map" {
                        verdicts.push(v);
                        continue;
                    }
                    let V::Bool(yes) = v else { return Err(()) };
                    // all/any/none stop at the first decisive element.
                    match (*name, yes) {
                        ("all", false) => return Ok(V::Bool(false)),
                        ("any", true) => return Ok(V::Bool(true)),
                        ("none", true) => return Ok(V::Bool(false)),
                        _ => {}
                    }
                    verdicts.push(V::Bool(yes));
                }
                let yes = verdicts.iter().filter(|v| **v == V::Bool(true)).count();
                match *name {
                    "all" | "none" => V::Bool(true),
                    "any" => V::Bool(false),
                    "one" => V::Bool(yes == 1),
                    "count" => V::Int(yes as i64),
                    "map" => V::Arr(verdicts),
                    _ => V::Arr(
                        items
                            .into_iter()
                            .zip(verdicts)
                            .filter(|(_, v)| *v == V::Bool(true))
                            .map(|(i, _)| i)
                            .collect(),
                    ),
                }
            }
            R::Method(base, name) => match ev(base)? {
                V::Time(ns) => {
                    let secs = ns.div_euclid(1_000_000_000);
                    let days = secs.div_euclid(86_400);
                    let (y, m, d) = date(days);
                    V::Int(match *name {
                        "Year" => y,
                        "Month" => m,
                        "Day" => d,
                        "Hour" => secs.rem_euclid(86_400) / 3600,
                        "Weekday" => (days + 4).rem_euclid(7),
                        _ => secs,
                    })
                }
                V::Dur(ns) => V::Float(ns as f64 / if *name == "Hours" { 3.6e12 } else { 6e10 }),
                _ => return Err(()),
            },
        })
    }

    fn binary(&self, op: &str, left: &R, right: &R, item: Option<&V>) -> Out {
        let a = self.eval(left, item)?;
        // Short circuits.
        match (op, &a) {
            ("and", V::Bool(false)) | ("or", V::Bool(true)) => return Ok(a),
            ("??", v) if *v != V::Nil => return Ok(a),
            _ => {}
        }
        if let (R::Var("properties"), V::Str(k)) = (right, &a) {
            return Ok(V::Bool(self.properties.contains_key(k)));
        }
        let b = self.eval(right, item)?;
        Ok(match (op, &a, &b) {
            ("and" | "or", V::Bool(_), V::Bool(_)) | ("??", ..) => b,
            ("==", ..) => V::Bool(eq(&a, &b)),
            ("!=", ..) => V::Bool(!eq(&a, &b)),
            ("<" | ">" | "<=" | ">=", ..) => {
                let ord = match (&a, &b) {
                    (V::Str(x), V::Str(y)) => x.partial_cmp(y),
                    (V::Dur(x), V::Dur(y)) | (V::Time(x), V::Time(y)) => x.partial_cmp(y),
                    _ => num(&a)
                        .zip(num(&b))
                        .map(|(x, y)| x.partial_cmp(&y))
                        .ok_or(())?,
                };
                V::Bool(ord.is_some_and(|o| match op {
                    "<" => o.is_lt(),
                    ">" => o.is_gt(),
                    "<=" => o.is_le(),
                    _ => o.is_ge(),
                }))
            }
            ("in", _, V::Arr(items)) => V::Bool(items.iter().any(|i| eq(&a, i))),
            ("contains", V::Str(x), V::Str(y)) => V::Bool(x.contains(y.as_str())),
            ("startsWith", V::Str(x), V::Str(y)) => V::Bool(x.starts_with(y.as_str())),
            ("endsWith", V::Str(x), V::Str(y)) => V::Bool(x.ends_with(y.as_str())),
            ("matches", V::Str(x), V::Str(y)) => {
                V::Bool(regex::Regex::new(y).map_err(|_| ())?.is_match(x))
            }
            ("..", V::Int(x), V::Int(y)) => V::Arr((*x..=*y).map(V::Int).collect()),
            ("+", V::Int(x), V::Int(y)) => V::Int(x.wrapping_add(*y)),
            ("-", V::Int(x), V::Int(y)) => V::Int(x.wrapping_sub(*y)),
            ("*", V::Int(x), V::Int(y)) => V::Int(x.wrapping_mul(*y)),
            ("%", V::Int(_), V::Int(0)) => return Err(()),
            ("%", V::Int(x), V::Int(y)) => V::Int(x.wrapping_rem(*y)),
            ("/", V::Int(x), V::Int(y)) => V::Float(*x as f64 / *y as f64),
            ("**", V::Int(x), V::Int(y)) => V::Float((*x as f64).powf(*y as f64)),
            ("+", V::Str(x), V::Str(y)) => V::Str(format!("{x}{y}")),
            ("+", V::Dur(x), V::Dur(y)) => V::Dur(x + y),
            ("-", V::Dur(x), V::Dur(y)) => V::Dur(x - y),
            ("*", V::Dur(x), V::Int(y)) => V::Dur(x * y),
            ("-", V::Time(x), V::Time(y)) => V::Dur(x - y),
            ("+", V::Time(x), V::Dur(y)) => V::Time(x + y),
            ("-", V::Time(x), V::Dur(y)) => V::Time(x - y),
            _ => return Err(()),
        })
    }
}

fn call(name: &str, args: &[V]) -> Out {
    let unit = |ns: i64| match args {
        [V::Int(n)] => Ok(V::Dur(n * ns)),
        _ => Err(()),
    };
    Ok(match (name, args) {
        ("len", [V::Str(s)]) => V::Int(s.chars().count() as i64),
        ("len", [V::Arr(items)]) => V::Int(items.len() as i64),
        ("lower", [V::Str(s)]) => V::Str(s.to_lowercase()),
        ("upper", [V::Str(s)]) => V::Str(s.to_uppercase()),
        ("trim", [V::Str(s)]) => V::Str(s.trim().to_string()),
        ("string", [V::Int(n)]) => V::Str(n.to_string()),
        ("first", [V::Arr(items)]) => items.first().cloned().unwrap_or(V::Nil),
        ("split", [V::Str(s), V::Str(sep)]) => {
            V::Arr(s.split(sep.as_str()).map(|p| V::Str(p.into())).collect())
        }
        ("seconds", _) => unit(1_000_000_000)?,
        ("minutes", _) => unit(60_000_000_000)?,
        ("hours", _) => unit(3_600_000_000_000)?,
        ("days", _) => unit(86_400_000_000_000)?,
        ("weeks", _) => unit(604_800_000_000_000)?,
        ("duration", [V::Str(s)]) => V::Dur(match s.as_str() {
            "1h30m" => 5_400_000_000_000,
            "1d12h" | "1.5d" => 129_600_000_000_000,
            "-2m" => -120_000_000_000,
            "1w" => 604_800_000_000_000,
            _ => 0,
        }),
        _ => return Err(()),
    })
}

/// Thousands of random well-typed filters over random messages: the engine
/// and the reference agree on every result and every failure.
#[test]
fn engine_agrees_with_the_reference() {
    const SEED: u64 = 0x5eed_f11e_7e12_0001;
    const CASES: usize = 4_000;
    let mut gen = Gen {
        rng: Rng(SEED),
        in_predicate: false,
    };
    let mut msg_rng = Rng(SEED ^ 0xabcdef);
    let (mut matched, mut failed, mut runs) = (0, 0, 0);
    for case in 0..CASES {
        let depth = 1 + gen.rng.pick(4) as u32;
        let tree = gen.gen(T::Bool, depth);
        let source = print(&mut gen.rng, &tree, 0);
        let filter = Filter::compile(&source)
            .unwrap_or_else(|e| panic!("case {case}: {source:?} does not compile: {e}"));
        for _ in 0..3 {
            let msg = random_message(&mut msg_rng);
            let input = FilterInput {
                subject: &msg.subject,
                group_id: "",
                correlation_id: "",
                reply_to: "",
                message_id: "",
                content_type: &msg.content_type,
                properties: &msg.properties,
                body: msg.body.as_bytes(),
                enqueued_at_ms: msg.enqueued_ms,
                visible_at_ms: msg.visible_ms,
                now_ms: msg.enqueued_ms,
            };
            let engine = filter.evaluate(&input);
            let reference = msg.eval(&tree, None);
            runs += 1;
            match (&engine, &reference) {
                (Ok(x), Ok(V::Bool(y))) if x == y => matched += usize::from(*x),
                (Err(_), Err(())) => failed += 1,
                _ => panic!(
                    "case {case}: {source:?} on subject {:?}, properties {:?}, body {:?} ({}): \
                     engine {engine:?}, reference {reference:?}",
                    msg.subject, msg.properties, msg.body, msg.content_type
                ),
            }
        }
    }
    // The mix exercises both outcomes and the failure path.
    assert!(
        matched > runs / 5 && failed > runs / 50,
        "{matched} matched, {failed} failed of {runs}"
    );
}

fn random_message(rng: &mut Rng) -> Msg {
    let subject = rng.choose(&["", "a", "a.b", "orders.eu.new", "x.y.z.w", "é.u"]);
    let mut properties = BTreeMap::new();
    for (k, values) in [
        ("tier", ["gold", "silver"]),
        ("region", ["eu", "a"]),
        ("x", ["", "b.c"]),
    ] {
        if rng.chance(60) {
            properties.insert(k.to_string(), values[rng.pick(2)].to_string());
        }
    }
    let body = rng.choose(&[
        r#"{"n": 1.5, "s": "eu", "flag": true}"#,
        r#"{"n": 3, "s": "orders"}"#,
        r#"{"n": "x"}"#,
        "{}",
        "orders urgent",
    ]);
    let content_type = rng.choose(&["application/json", "text/plain"]);
    // 2000-01-01 .. 2040, on any second.
    let enqueued_ms = 946_684_800_000 + (rng.next() % 1_262_304_000) as i64 * 1000;
    let visible_ms = enqueued_ms + rng.pick(3) as i64 * 3_600_000;
    Msg {
        subject: subject.to_string(),
        properties,
        content_type: content_type.to_string(),
        body: body.to_string(),
        enqueued_ms,
        visible_ms,
    }
}
