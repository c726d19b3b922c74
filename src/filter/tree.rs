//! Our view of expr-lang's AST.
//!
//! expr-lang 2.1 keeps its AST private: `expr::Program` is public but opaque,
//! and the `Node` enum lives in a private module. The only window onto it is
//! `Program`'s derived `Debug` output, which is a faithful, mechanical
//! rendering of the tree. We read that text back into `Node` — the least bad
//! option: the alternatives were a second parser of our own (the brief rules
//! that out, and it could disagree with expr-lang on precedence) or a vendored
//! fork. The coupling is why `Cargo.toml` pins `expr-lang = "=2.1.0"` with no
//! default features (the `regex` feature would add a `compiled_regex` field);
//! any shape we do not recognise is reported as an internal compile error,
//! never a panic, and the unit tests cover every node kind.

use super::lex::{Negations, WordOp};

/// An expression, mirroring expr-lang's `Node` (postfix operators are folded
/// into their own variants).
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Node {
    Ident(String),
    Int(i64),
    Float(f64),
    Str(String),
    Bool(bool),
    Nil,
    Array(Vec<Node>),
    /// `a..b`
    Range(Box<Node>, Box<Node>),
    /// `name(args)` or `name(args, predicate)`; `x | name(args)` arrives here
    /// with `x` as the first argument.
    Call {
        name: String,
        args: Vec<Node>,
        pred: Option<Box<Prog>>,
    },
    Unary(UnOp, Box<Node>),
    Binary(BinOp, Box<Node>, Box<Node>),
    /// `a[k]`, `a.k`, `a?.k`, `a?.[k]`
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
    /// `a ?? b`
    Default(Box<Node>, Box<Node>),
    /// `c ? a : b`
    Ternary(Box<Node>, Box<Node>, Box<Node>),
    /// `a.Name(args)`
    Method {
        base: Box<Node>,
        name: String,
        args: Vec<Node>,
    },
    /// `if c { … } else { … }`
    If(Box<Node>, Box<Prog>, Box<Prog>),
}

/// `let` bindings followed by an expression (a whole filter, a predicate body
/// or an `if` branch).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Prog {
    pub(super) lets: Vec<(String, Node)>,
    pub(super) expr: Node,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum UnOp {
    Not,
    Plus,
    Minus,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Pow,
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
    And,
    Or,
    In,
    NotIn,
    Contains,
    StartsWith,
    EndsWith,
    Matches,
}

impl BinOp {
    fn from_name(name: &str) -> Option<BinOp> {
        Some(match name {
            "Add" => BinOp::Add,
            "Subtract" => BinOp::Sub,
            "Multiply" => BinOp::Mul,
            "Divide" => BinOp::Div,
            "Modulo" => BinOp::Mod,
            "Pow" => BinOp::Pow,
            "Equal" => BinOp::Eq,
            "NotEqual" => BinOp::Ne,
            "GreaterThan" => BinOp::Gt,
            "GreaterThanOrEqual" => BinOp::Ge,
            "LessThan" => BinOp::Lt,
            "LessThanOrEqual" => BinOp::Le,
            "And" => BinOp::And,
            "Or" => BinOp::Or,
            "In" => BinOp::In,
            "NotIn" => BinOp::NotIn,
            "Contains" => BinOp::Contains,
            "StartsWith" => BinOp::StartsWith,
            "EndsWith" => BinOp::EndsWith,
            "Matches" => BinOp::Matches,
            _ => return None,
        })
    }

    fn word(self) -> Option<WordOp> {
        match self {
            BinOp::Contains => Some(WordOp::Contains),
            BinOp::StartsWith => Some(WordOp::StartsWith),
            BinOp::EndsWith => Some(WordOp::EndsWith),
            BinOp::Matches => Some(WordOp::Matches),
            _ => None,
        }
    }

    /// The operator as expr source.
    pub(super) fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Mod => "%",
            BinOp::Pow => "**",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::And => "&&",
            BinOp::Or => "||",
            BinOp::In => "in",
            BinOp::NotIn => "not in",
            BinOp::Contains => "contains",
            BinOp::StartsWith => "startsWith",
            BinOp::EndsWith => "endsWith",
            BinOp::Matches => "matches",
        }
    }
}

/// A parsed program as our tree, with its node count as expr-lang counts
/// nodes (every `Node` value, including those in predicates and branches).
pub(super) struct Read {
    pub(super) prog: Prog,
    pub(super) nodes: usize,
}

/// Reads `program` (parsed from a source prepared with `negations`).
pub(super) fn read(program: &expr::Program, negations: &Negations) -> Result<Read, String> {
    let text = format!("{program:?}");
    let value = DebugParser::new(&text).document()?;
    let mut reader = Reader {
        negations,
        seen: [0; 4],
        nodes: 0,
    };
    let prog = reader.program(&value)?;
    Ok(Read {
        prog,
        nodes: reader.nodes,
    })
}

// ---------------------------------------------------------------------------
// Generic `Debug` syntax.

/// One value in Rust `Debug` notation.
#[derive(Debug)]
enum D {
    /// A bare name: `None`, `true`, `Nil`, `Add`.
    Word(String),
    Str(String),
    Num(String),
    /// `Name(a, b)`, or `(a, b)` with an empty name.
    Tuple(String, Vec<D>),
    /// `Name { field: value, … }`
    Struct(String, Vec<(String, D)>),
    /// `[a, b]`
    List(Vec<D>),
    /// `{k: v, …}`
    Map,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Name(String),
    Str(String),
    Num(String),
    Punct(char),
}

struct DebugParser<'t> {
    chars: std::iter::Peekable<std::str::CharIndices<'t>>,
    peeked: Option<Tok>,
}

impl<'t> DebugParser<'t> {
    fn new(text: &'t str) -> Self {
        DebugParser {
            chars: text.char_indices().peekable(),
            peeked: None,
        }
    }

    fn document(&mut self) -> Result<D, String> {
        let value = self.value()?;
        match self.next()? {
            None => Ok(value),
            Some(t) => Err(unexpected(&format!("trailing {t:?}"))),
        }
    }

    fn lex(&mut self) -> Result<Option<Tok>, String> {
        while self.chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        let Some((_, c)) = self.chars.next() else {
            return Ok(None);
        };
        Ok(Some(match c {
            '"' => Tok::Str(self.string()?),
            c if c.is_ascii_alphabetic() || c == '_' => {
                let mut name = String::from(c);
                while let Some((_, c)) = self
                    .chars
                    .next_if(|(_, c)| c.is_ascii_alphanumeric() || *c == '_')
                {
                    name.push(c);
                }
                Tok::Name(name)
            }
            c if c.is_ascii_digit() || c == '-' => {
                let mut number = String::from(c);
                while let Some((_, c)) = self
                    .chars
                    .next_if(|(_, c)| c.is_ascii_alphanumeric() || *c == '.')
                {
                    number.push(c);
                    if matches!(c, 'e' | 'E') {
                        if let Some((_, sign)) = self.chars.next_if(|(_, c)| matches!(c, '+' | '-'))
                        {
                            number.push(sign);
                        }
                    }
                }
                Tok::Num(number)
            }
            '(' | ')' | '[' | ']' | '{' | '}' | ',' | ':' => Tok::Punct(c),
            c => return Err(unexpected(&format!("character {c:?}"))),
        }))
    }

    /// The rest of a `Debug`-escaped string after its opening quote.
    fn string(&mut self) -> Result<String, String> {
        let mut out = String::new();
        loop {
            match self.chars.next().map(|(_, c)| c) {
                None => return Err(unexpected("end of string")),
                Some('"') => return Ok(out),
                Some('\\') => match self.chars.next().map(|(_, c)| c) {
                    Some('n') => out.push('\n'),
                    Some('r') => out.push('\r'),
                    Some('t') => out.push('\t'),
                    Some('0') => out.push('\0'),
                    Some(c @ ('\\' | '"' | '\'')) => out.push(c),
                    Some('u') => {
                        let mut hex = String::new();
                        if self.chars.next().map(|(_, c)| c) != Some('{') {
                            return Err(unexpected("\\u escape"));
                        }
                        loop {
                            match self.chars.next().map(|(_, c)| c) {
                                Some('}') => break,
                                Some(h) if h.is_ascii_hexdigit() && hex.len() < 6 => hex.push(h),
                                _ => return Err(unexpected("\\u escape")),
                            }
                        }
                        let c = u32::from_str_radix(&hex, 16)
                            .ok()
                            .and_then(char::from_u32)
                            .ok_or_else(|| unexpected("\\u escape"))?;
                        out.push(c);
                    }
                    _ => return Err(unexpected("string escape")),
                },
                Some(c) => out.push(c),
            }
        }
    }

    fn next(&mut self) -> Result<Option<Tok>, String> {
        match self.peeked.take() {
            Some(t) => Ok(Some(t)),
            None => self.lex(),
        }
    }

    fn peek(&mut self) -> Result<Option<&Tok>, String> {
        if self.peeked.is_none() {
            self.peeked = self.lex()?;
        }
        Ok(self.peeked.as_ref())
    }

    fn eat(&mut self, c: char) -> Result<bool, String> {
        if self.peek()? == Some(&Tok::Punct(c)) {
            self.peeked = None;
            return Ok(true);
        }
        Ok(false)
    }

    fn expect(&mut self, c: char) -> Result<(), String> {
        if self.eat(c)? {
            Ok(())
        } else {
            Err(unexpected(&format!("missing {c:?}")))
        }
    }

    fn value(&mut self) -> Result<D, String> {
        match self.next()? {
            Some(Tok::Name(name)) => {
                if self.eat('(')? {
                    Ok(D::Tuple(name, self.items(')')?))
                } else if self.eat('{')? {
                    let mut fields = Vec::new();
                    while !self.eat('}')? {
                        if !fields.is_empty() {
                            self.expect(',')?;
                        }
                        let Some(Tok::Name(field)) = self.next()? else {
                            return Err(unexpected("field name"));
                        };
                        self.expect(':')?;
                        fields.push((field, self.value()?));
                    }
                    Ok(D::Struct(name, fields))
                } else {
                    Ok(D::Word(name))
                }
            }
            Some(Tok::Str(s)) => Ok(D::Str(s)),
            Some(Tok::Num(n)) => Ok(D::Num(n)),
            Some(Tok::Punct('(')) => Ok(D::Tuple(String::new(), self.items(')')?)),
            Some(Tok::Punct('[')) => Ok(D::List(self.items(']')?)),
            Some(Tok::Punct('{')) => {
                // Only map literals print this way; the lexer rejects those, so
                // the contents are skipped rather than modelled.
                while !self.eat('}')? {
                    if !self.eat(',')? {
                        self.value()?;
                        self.expect(':')?;
                        self.value()?;
                    }
                }
                Ok(D::Map)
            }
            other => Err(unexpected(&format!("{other:?}"))),
        }
    }

    fn items(&mut self, close: char) -> Result<Vec<D>, String> {
        let mut items = Vec::new();
        while !self.eat(close)? {
            if !items.is_empty() {
                self.expect(',')?;
                if self.eat(close)? {
                    break;
                }
            }
            items.push(self.value()?);
        }
        Ok(items)
    }
}

fn unexpected(what: &str) -> String {
    format!("internal error: unexpected expr-lang AST ({what})")
}

// ---------------------------------------------------------------------------
// `Debug` values to our tree.

struct Reader<'n> {
    negations: &'n Negations,
    /// Occurrences of each word operator seen so far, in source order.
    seen: [usize; 4],
    nodes: usize,
}

fn field<'d>(fields: &'d [(String, D)], name: &str) -> Result<&'d D, String> {
    fields
        .iter()
        .find(|(f, _)| f == name)
        .map(|(_, d)| d)
        .ok_or_else(|| unexpected(&format!("missing field {name}")))
}

fn string(d: &D) -> Result<String, String> {
    match d {
        D::Str(s) => Ok(s.clone()),
        other => Err(unexpected(&format!("{other:?} is not a string"))),
    }
}

impl Reader<'_> {
    fn program(&mut self, d: &D) -> Result<Prog, String> {
        let D::Struct(name, fields) = d else {
            return Err(unexpected("program"));
        };
        if name != "Program" {
            return Err(unexpected(name));
        }
        let D::List(lines) = field(fields, "lines")? else {
            return Err(unexpected("lines"));
        };
        let mut lets = Vec::new();
        for line in lines {
            match line {
                D::Tuple(t, pair) if t.is_empty() && pair.len() == 2 => {
                    lets.push((string(&pair[0])?, self.node(&pair[1])?));
                }
                _ => return Err(unexpected("let line")),
            }
        }
        let expr = self.node(field(fields, "expr")?)?;
        Ok(Prog { lets, expr })
    }

    fn boxed(&mut self, d: &D) -> Result<Box<Node>, String> {
        Ok(Box::new(self.node(d)?))
    }

    fn nodes(&mut self, d: &D) -> Result<Vec<Node>, String> {
        match d {
            D::List(items) => items.iter().map(|i| self.node(i)).collect(),
            _ => Err(unexpected("list of nodes")),
        }
    }

    fn optional(&mut self, d: &D) -> Result<Option<Box<Node>>, String> {
        match d {
            D::Word(w) if w == "None" => Ok(None),
            D::Tuple(t, inner) if t == "Some" && inner.len() == 1 => {
                Ok(Some(self.boxed(&inner[0])?))
            }
            _ => Err(unexpected("optional node")),
        }
    }

    fn node(&mut self, d: &D) -> Result<Node, String> {
        self.nodes += 1;
        match d {
            D::Tuple(kind, inner) => match (kind.as_str(), inner.as_slice()) {
                ("Ident", [name]) => Ok(Node::Ident(string(name)?)),
                ("Array", [items]) => Ok(Node::Array(self.nodes(items)?)),
                ("Range", [a, b]) => Ok(Node::Range(self.boxed(a)?, self.boxed(b)?)),
                ("Value", [value]) => literal(value),
                _ => Err(unexpected(kind)),
            },
            D::Struct(kind, fields) => match kind.as_str() {
                "Func" => {
                    let name = string(field(fields, "ident")?)?;
                    let args = self.nodes(field(fields, "args")?)?;
                    let pred = self.predicate(field(fields, "predicate")?)?;
                    Ok(Node::Call { name, args, pred })
                }
                "Unary" => {
                    let op = match field(fields, "operator")? {
                        D::Word(w) if w == "Not" => UnOp::Not,
                        D::Word(w) if w == "Positive" => UnOp::Plus,
                        D::Word(w) if w == "Negative" => UnOp::Minus,
                        _ => return Err(unexpected("unary operator")),
                    };
                    Ok(Node::Unary(op, self.boxed(field(fields, "node")?)?))
                }
                "Operation" => {
                    let op = match field(fields, "operator")? {
                        D::Word(w) => BinOp::from_name(w).ok_or_else(|| unexpected(w))?,
                        _ => return Err(unexpected("operator")),
                    };
                    // In source order: left operand, this operator, right operand.
                    let left = self.boxed(field(fields, "left")?)?;
                    let negated = match op.word() {
                        Some(word) => {
                            let index = self.seen[word.slot()];
                            self.seen[word.slot()] += 1;
                            self.negations
                                .get(word, index)
                                .ok_or_else(|| unexpected("operator occurrences"))?
                        }
                        None => false,
                    };
                    let right = self.boxed(field(fields, "right")?)?;
                    let node = Node::Binary(op, left, right);
                    Ok(if negated {
                        self.nodes += 1; // as expr (Go) has it: `not (a op b)`
                        Node::Unary(UnOp::Not, Box::new(node))
                    } else {
                        node
                    })
                }
                "Postfix" => {
                    let base = self.boxed(field(fields, "node")?)?;
                    self.postfix(base, field(fields, "operator")?)
                }
                "Conditional" => {
                    let condition = self.boxed(field(fields, "condition")?)?;
                    let then = self.program(field(fields, "consequent")?)?;
                    let other = self.program(field(fields, "alternative")?)?;
                    Ok(Node::If(condition, Box::new(then), Box::new(other)))
                }
                _ => Err(unexpected(kind)),
            },
            _ => Err(unexpected("node")),
        }
    }

    fn predicate(&mut self, d: &D) -> Result<Option<Box<Prog>>, String> {
        match d {
            D::Word(w) if w == "None" => Ok(None),
            D::Tuple(t, inner) if t == "Some" && inner.len() == 1 => {
                Ok(Some(Box::new(self.program(&inner[0])?)))
            }
            _ => Err(unexpected("predicate")),
        }
    }

    fn postfix(&mut self, base: Box<Node>, op: &D) -> Result<Node, String> {
        match op {
            D::Struct(kind, fields) => match kind.as_str() {
                "Index" => {
                    let key = self.boxed(field(fields, "idx")?)?;
                    let optional = matches!(field(fields, "optional")?, D::Word(w) if w == "true");
                    Ok(Node::Index {
                        base,
                        key,
                        optional,
                    })
                }
                "Range" => {
                    let start = self.optional(field(fields, "start")?)?;
                    let end = self.optional(field(fields, "end")?)?;
                    Ok(Node::Slice { base, start, end })
                }
                "Ternary" => {
                    let then = self.boxed(field(fields, "left")?)?;
                    let other = self.boxed(field(fields, "right")?)?;
                    Ok(Node::Ternary(base, then, other))
                }
                "Method" => {
                    let name = string(field(fields, "ident")?)?;
                    let args = self.nodes(field(fields, "args")?)?;
                    Ok(Node::Method { base, name, args })
                }
                _ => Err(unexpected(kind)),
            },
            D::Tuple(kind, inner) if inner.len() == 1 => match kind.as_str() {
                "Default" => Ok(Node::Default(base, self.boxed(&inner[0])?)),
                "Pipe" => match self.node(&inner[0])? {
                    Node::Call {
                        name,
                        mut args,
                        pred,
                    } => {
                        args.insert(0, *base);
                        Ok(Node::Call { name, args, pred })
                    }
                    _ => Err("the right side of `|` must be a function call".to_string()),
                },
                _ => Err(unexpected(kind)),
            },
            _ => Err(unexpected("postfix operator")),
        }
    }
}

fn literal(d: &D) -> Result<Node, String> {
    match d {
        D::Word(w) if w == "Nil" => Ok(Node::Nil),
        D::Tuple(kind, inner) => match (kind.as_str(), inner.as_slice()) {
            ("Integer", [D::Num(n)]) => n.parse().map(Node::Int).map_err(|_| unexpected(n)),
            ("Float", [D::Num(n)]) => n.parse().map(Node::Float).map_err(|_| unexpected(n)),
            ("Bool", [D::Word(b)]) => Ok(Node::Bool(b == "true")),
            ("String", [D::Str(s)]) => Ok(Node::Str(s.clone())),
            _ => Err(format!("{kind} literals are not supported in filters")),
        },
        _ => Err(unexpected("literal")),
    }
}

// ---------------------------------------------------------------------------
// Shape.

impl Node {
    /// Rebuilds every chain of `&&` (or of `||`) as a balanced tree.
    ///
    /// `a || b || c || …` parses left-deep, so a long chain of alternatives
    /// would be as deep as it is long, and evaluation recursion is what the
    /// depth limit protects. Both operators are associative over booleans
    /// with left-to-right short-circuiting (and an error for a non-boolean
    /// operand either way), so regrouping changes neither results, nor which
    /// operands are evaluated, nor in which order.
    pub(super) fn balanced(self) -> Node {
        match self {
            Node::Binary(op @ (BinOp::And | BinOp::Or), left, right) => {
                let mut operands = vec![*right];
                let mut rest = *left;
                loop {
                    match rest {
                        Node::Binary(inner, l, r) if inner == op => {
                            operands.push(*r);
                            rest = *l;
                        }
                        other => {
                            operands.push(other);
                            break;
                        }
                    }
                }
                operands.reverse();
                let operands: Vec<Node> = operands.into_iter().map(Node::balanced).collect();
                join_balanced(op, operands)
            }
            Node::Binary(op, l, r) => {
                Node::Binary(op, Box::new((*l).balanced()), Box::new((*r).balanced()))
            }
            Node::Array(items) => Node::Array(items.into_iter().map(Node::balanced).collect()),
            Node::Range(a, b) => Node::Range(Box::new((*a).balanced()), Box::new((*b).balanced())),
            Node::Call { name, args, pred } => Node::Call {
                name,
                args: args.into_iter().map(Node::balanced).collect(),
                pred: pred.map(|p| Box::new(p.balanced())),
            },
            Node::Unary(op, n) => Node::Unary(op, Box::new((*n).balanced())),
            Node::Index {
                base,
                key,
                optional,
            } => Node::Index {
                base: Box::new((*base).balanced()),
                key: Box::new((*key).balanced()),
                optional,
            },
            Node::Slice { base, start, end } => Node::Slice {
                base: Box::new((*base).balanced()),
                start: start.map(|s| Box::new((*s).balanced())),
                end: end.map(|e| Box::new((*e).balanced())),
            },
            Node::Default(a, b) => {
                Node::Default(Box::new((*a).balanced()), Box::new((*b).balanced()))
            }
            Node::Ternary(c, a, b) => Node::Ternary(
                Box::new((*c).balanced()),
                Box::new((*a).balanced()),
                Box::new((*b).balanced()),
            ),
            Node::Method { base, name, args } => Node::Method {
                base: Box::new((*base).balanced()),
                name,
                args: args.into_iter().map(Node::balanced).collect(),
            },
            Node::If(c, a, b) => Node::If(
                Box::new((*c).balanced()),
                Box::new(a.balanced()),
                Box::new(b.balanced()),
            ),
            leaf => leaf,
        }
    }

    /// Nesting depth as evaluation recurses: one per node, plus the frames a
    /// predicate or branch costs (running a program through a builtin).
    pub(super) fn depth(&self) -> usize {
        const PROGRAM: usize = 2;
        let max = |nodes: &[Node]| nodes.iter().map(Node::depth).max().unwrap_or(0);
        1 + match self {
            Node::Ident(_)
            | Node::Int(_)
            | Node::Float(_)
            | Node::Str(_)
            | Node::Bool(_)
            | Node::Nil => 0,
            Node::Array(items) => max(items),
            Node::Range(a, b) | Node::Binary(_, a, b) | Node::Default(a, b) => {
                a.depth().max(b.depth())
            }
            Node::Call { args, pred, .. } => {
                max(args).max(pred.as_ref().map_or(0, |p| PROGRAM + p.depth()))
            }
            Node::Unary(_, n) => n.depth(),
            Node::Index { base, key, .. } => base.depth().max(key.depth()),
            Node::Slice { base, start, end } => base
                .depth()
                .max(start.as_ref().map_or(0, |s| s.depth()))
                .max(end.as_ref().map_or(0, |e| e.depth())),
            Node::Ternary(c, a, b) => c.depth().max(a.depth()).max(b.depth()),
            Node::Method { base, args, .. } => base.depth().max(max(args)),
            Node::If(c, a, b) => c.depth().max(PROGRAM + a.depth().max(b.depth())),
        }
    }
}

impl Prog {
    pub(super) fn balanced(self) -> Prog {
        Prog {
            lets: self
                .lets
                .into_iter()
                .map(|(n, v)| (n, v.balanced()))
                .collect(),
            expr: self.expr.balanced(),
        }
    }

    pub(super) fn depth(&self) -> usize {
        self.lets
            .iter()
            .map(|(_, n)| n.depth())
            .chain(std::iter::once(self.expr.depth()))
            .max()
            .unwrap_or(0)
    }
}

fn join_balanced(op: BinOp, mut operands: Vec<Node>) -> Node {
    if operands.len() <= 1 {
        return operands.pop().unwrap_or(Node::Bool(op == BinOp::And));
    }
    let right = operands.split_off(operands.len() / 2);
    Node::Binary(
        op,
        Box::new(join_balanced(op, operands)),
        Box::new(join_balanced(op, right)),
    )
}
