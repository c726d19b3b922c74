//! Precedence-climbing parser (expr's precedence, docs/semantics.md#filters).
//!
//! Recursion is bounded before it can exhaust a Worker's stack: every
//! bracket, prefix operator, right-associative operand, `?:` branch, `if`
//! and `let` counts as one level of nesting (at most [`MAX_NESTING`]), and
//! left-associative chains are built in a loop. Nodes are counted as they are
//! made, so an oversized filter stops parsing at node 1001.

use super::ast::{BinOp, Node, UnOp};
use super::lex::{self, Tok, Token};

/// Deepest nesting of brackets, prefix operators, `?:`, `if` and `let`
/// (real filters stay in single digits).
pub(super) const MAX_NESTING: usize = 64;

/// Parses a whole filter; `max_nodes` bounds the tree (docs/semantics.md#filters).
pub(super) fn parse(source: &str, max_nodes: usize) -> Result<Node, String> {
    let tokens = lex::tokenize(source)?;
    let mut parser = Parser {
        source,
        tokens,
        pos: 0,
        nodes: 0,
        max_nodes,
        nesting: 0,
    };
    let node = parser.sequence()?;
    if parser.peek() != &Tok::End {
        return Err(parser.unexpected());
    }
    Ok(node)
}

struct Parser<'s> {
    source: &'s str,
    tokens: Vec<Token>,
    pos: usize,
    nodes: usize,
    max_nodes: usize,
    nesting: usize,
}

type Parsed = Result<Node, String>;

impl Parser<'_> {
    fn peek(&self) -> &Tok {
        self.peek_at(0)
    }

    fn peek_at(&self, ahead: usize) -> &Tok {
        self.tokens
            .get(self.pos + ahead)
            .map_or(&Tok::End, |t| &t.tok)
    }

    fn bump(&mut self) {
        self.pos = (self.pos + 1).min(self.tokens.len().saturating_sub(1));
    }

    fn is_punct(&self, p: &str) -> bool {
        matches!(self.peek(), Tok::Punct(q) if *q == p)
    }

    fn is_word(&self, w: &str) -> bool {
        matches!(self.peek(), Tok::Word(v) if v == w)
    }

    fn unexpected(&self) -> String {
        let at = self
            .tokens
            .get(self.pos)
            .map_or(self.source.len(), |t| t.at);
        let detail = match self.peek() {
            Tok::End => "unexpected end of expression".to_string(),
            Tok::Word(w) => format!("unexpected token {w}"),
            Tok::Int(n) => format!("unexpected token {n}"),
            Tok::Float(f) => format!("unexpected token {f}"),
            Tok::Str(s) => format!("unexpected token {s:?}"),
            Tok::Punct(p) => format!("unexpected token {p}"),
        };
        lex::syntax_error(self.source, at, &detail)
    }

    fn expect_punct(&mut self, p: &str) -> Result<(), String> {
        if self.is_punct(p) {
            self.bump();
            Ok(())
        } else {
            Err(self.unexpected())
        }
    }

    /// Counts one node against the limit.
    fn node(&mut self, node: Node) -> Parsed {
        self.nodes += 1;
        if self.nodes > self.max_nodes {
            return Err(format!(
                "expression too complex (more than {} AST nodes)",
                self.max_nodes
            ));
        }
        Ok(node)
    }

    /// Runs `f` one nesting level deeper.
    fn nested<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T, String>) -> Result<T, String> {
        if self.nesting >= MAX_NESTING {
            return Err(format!(
                "expression nested too deeply (more than {MAX_NESTING} levels of brackets, \
                 prefix operators, `?:`, `if` and `let`)"
            ));
        }
        self.nesting += 1;
        let parsed = f(self);
        self.nesting -= 1;
        parsed
    }

    /// `let name = value; …` bindings, then an expression.
    fn sequence(&mut self) -> Parsed {
        if !self.is_word("let") {
            return self.expr(0);
        }
        self.bump();
        let Tok::Word(name) = self.peek().clone() else {
            return Err(self.unexpected());
        };
        self.bump();
        self.expect_punct("=")?;
        let value = self.nested(|p| p.expr(0))?;
        self.expect_punct(";")?;
        let body = self.nested(Self::sequence)?;
        self.node(Node::Let(name, Box::new(value), Box::new(body)))
    }

    /// The binary operator at the cursor: `(op, precedence, right-assoc,
    /// negated, tokens)`, or `None` when the expression ends here.
    fn operator(&self) -> Option<(BinOp, u8, bool, bool, usize)> {
        let text = |tok: &Tok| match tok {
            Tok::Word(w) => Some(w.clone()),
            Tok::Punct(p) => Some((*p).to_string()),
            _ => None,
        };
        let first = text(self.peek())?;
        if first == "not" {
            let (op, prec, right) = BinOp::parse(&text(self.peek_at(1))?)?;
            return op.negatable().then_some((op, prec, right, true, 2));
        }
        let (op, prec, right) = BinOp::parse(&first)?;
        // `and`, `in`, … are words; any other word is not an operator.
        Some((op, prec, right, false, 1))
    }

    fn expr(&mut self, min: u8) -> Parsed {
        if min == 0 && self.is_word("if") {
            return self.if_else();
        }
        let mut left = self.unary()?;
        loop {
            if min == 0 && self.is_punct("|") {
                self.bump();
                let Tok::Word(name) = self.peek().clone() else {
                    return Err(self.unexpected());
                };
                self.bump();
                left = self.call(name, vec![left])?;
                continue;
            }
            let Some((op, prec, right_assoc, negated, tokens)) = self.operator() else {
                if self.is_word("not") {
                    self.bump();
                    return Err(self.unexpected());
                }
                break;
            };
            if prec < min {
                break;
            }
            self.pos += tokens;
            if op.chains() {
                left = self.comparison(left, op, prec)?;
                continue;
            }
            let next = if right_assoc { prec } else { prec + 1 };
            let right = if right_assoc {
                self.nested(|p| p.expr(next))?
            } else {
                self.expr(next)?
            };
            left = match (op, left) {
                (BinOp::And | BinOp::Or, Node::Chain(c, mut items)) if c == op => {
                    items.push(right);
                    self.node(Node::Chain(op, items))?
                }
                (BinOp::And | BinOp::Or, left) => self.node(Node::Chain(op, vec![left, right]))?,
                (_, left) => self.node(Node::Binary(op, Box::new(left), Box::new(right)))?,
            };
            if negated {
                left = self.node(Node::Unary(UnOp::Not, Box::new(left)))?;
            }
        }
        if min == 0 && self.is_punct("?") {
            self.bump();
            let then = self.nested(|p| p.expr(0))?;
            self.expect_punct(":")?;
            let other = self.nested(|p| p.expr(0))?;
            left = self.node(Node::Ternary(
                Box::new(left),
                Box::new(then),
                Box::new(other),
            ))?;
        }
        Ok(left)
    }

    /// `a < b <= c`: each comparison with the next operand, joined by `&&`
    /// (expr's chained comparisons).
    fn comparison(&mut self, left: Node, mut op: BinOp, prec: u8) -> Parsed {
        let mut operand = left;
        let mut parts = Vec::new();
        loop {
            let right = self.expr(prec + 1)?;
            parts.push(self.node(Node::Binary(op, Box::new(operand), Box::new(right.clone())))?);
            operand = right;
            match self.operator() {
                Some((next, _, _, false, 1)) if next.chains() => {
                    self.bump();
                    op = next;
                }
                _ => break,
            }
        }
        if parts.len() == 1 {
            return Ok(parts.remove(0));
        }
        self.node(Node::Chain(BinOp::And, parts))
    }

    fn if_else(&mut self) -> Parsed {
        self.bump();
        let condition = self.nested(|p| p.expr(0))?;
        let branch = |p: &mut Self| {
            p.expect_punct("{")?;
            let body = p.nested(Self::sequence)?;
            p.expect_punct("}")?;
            Ok::<Node, String>(body)
        };
        let then = branch(self)?;
        if !self.is_word("else") {
            return Err(self.unexpected());
        }
        self.bump();
        let other = branch(self)?;
        self.node(Node::Ternary(
            Box::new(condition),
            Box::new(then),
            Box::new(other),
        ))
    }

    fn unary(&mut self) -> Parsed {
        let (op, prec) = match self.peek() {
            Tok::Word(w) if w == "not" => (UnOp::Not, 50),
            Tok::Punct("!") => (UnOp::Not, 50),
            Tok::Punct("-") => (UnOp::Minus, 90),
            Tok::Punct("+") => (UnOp::Plus, 90),
            Tok::Punct("(") => {
                self.bump();
                let inner = self.nested(Self::sequence)?;
                self.expect_punct(")")?;
                return self.postfix(inner);
            }
            _ => {
                let primary = self.primary()?;
                return self.postfix(primary);
            }
        };
        self.bump();
        let operand = self.nested(|p| p.expr(prec))?;
        self.node(Node::Unary(op, Box::new(operand)))
    }

    fn primary(&mut self) -> Parsed {
        let tok = self.peek().clone();
        let node = match tok {
            Tok::Int(n) => Node::Int(n),
            Tok::Float(f) => Node::Float(f),
            Tok::Str(s) => Node::Str(s),
            Tok::Word(w) => match w.as_str() {
                "true" => Node::Bool(true),
                "false" => Node::Bool(false),
                "nil" => Node::Nil,
                "not" | "and" | "or" | "in" | "matches" | "contains" | "startsWith"
                | "endsWith" | "let" | "if" | "else" => return Err(self.unexpected()),
                _ if matches!(self.peek_at(1), Tok::Punct("(")) => {
                    self.bump();
                    return self.call(w, Vec::new());
                }
                _ => Node::Ident(w),
            },
            Tok::Punct("[") => {
                self.bump();
                return self.nested(|p| {
                    let items = p.list("]")?;
                    p.node(Node::Array(items))
                });
            }
            Tok::Punct("{") if self.map_literal() => {
                return Err("map literals are not supported in filters".to_string())
            }
            // `.name` inside a predicate is `#.name`; the `.` stays for
            // `postfix` to read.
            Tok::Punct(".") if matches!(self.peek_at(1), Tok::Word(_)) => {
                return self.node(Node::Ident("#".to_string()));
            }
            _ => return Err(self.unexpected()),
        };
        self.bump();
        self.node(node)
    }

    /// Whether the `{` at the cursor opens a map literal (`{}` or `{key: …`)
    /// rather than a predicate.
    fn map_literal(&self) -> bool {
        match self.peek_at(1) {
            Tok::Punct("}") => true,
            Tok::Word(_) | Tok::Str(_) => matches!(self.peek_at(2), Tok::Punct(":")),
            _ => false,
        }
    }

    /// Comma-separated expressions up to `close` (a trailing comma is
    /// allowed); the cursor is after the opening bracket, and the caller
    /// counts the bracket's nesting level.
    fn list(&mut self, close: &str) -> Result<Vec<Node>, String> {
        let mut items = Vec::new();
        while !self.is_punct(close) {
            if !items.is_empty() {
                self.expect_punct(",")?;
                if self.is_punct(close) {
                    break;
                }
            }
            let item = if self.is_punct("{") && !self.map_literal() {
                self.bump();
                let body = self.nested(Self::sequence)?;
                self.expect_punct("}")?;
                self.node(Node::Closure(Box::new(body)))?
            } else {
                self.expr(0)?
            };
            items.push(item);
        }
        self.bump();
        Ok(items)
    }

    /// `name(…)` with the cursor on `(`; `args` holds a piped value.
    fn call(&mut self, name: String, mut args: Vec<Node>) -> Parsed {
        self.expect_punct("(")?;
        let rest = self.nested(|p| p.list(")"))?;
        args.extend(rest);
        self.node(Node::Call { name, args })
    }

    /// Member, index, slice and method postfixes, left to right.
    fn postfix(&mut self, mut base: Node) -> Parsed {
        loop {
            let optional = self.is_punct("?.");
            if optional || self.is_punct(".") {
                self.bump();
                if optional && self.is_punct("[") {
                    self.bump();
                    let key = self.nested(|p| p.expr(0))?;
                    self.expect_punct("]")?;
                    base = self.index(base, key, true)?;
                    continue;
                }
                let Tok::Word(name) = self.peek().clone() else {
                    return Err(self.unexpected());
                };
                self.bump();
                if self.is_punct("(") {
                    self.bump();
                    let args = self.nested(|p| p.list(")"))?;
                    base = self.node(Node::Method {
                        base: Box::new(base),
                        name,
                        args,
                    })?;
                } else {
                    let key = self.node(Node::Str(name))?;
                    base = self.index(base, key, optional)?;
                }
            } else if self.is_punct("[") {
                self.bump();
                base = self.nested(|p| p.subscript(base))?;
            } else {
                return Ok(base);
            }
        }
    }

    /// `[k]` or `[s:e]` after `base`, the cursor after `[`.
    fn subscript(&mut self, base: Node) -> Parsed {
        let start = if self.is_punct(":") {
            None
        } else {
            let key = self.expr(0)?;
            if self.is_punct("]") {
                self.bump();
                return self.index(base, key, false);
            }
            Some(Box::new(key))
        };
        self.expect_punct(":")?;
        let end = if self.is_punct("]") {
            None
        } else {
            Some(Box::new(self.expr(0)?))
        };
        self.expect_punct("]")?;
        self.node(Node::Slice {
            base: Box::new(base),
            start,
            end,
        })
    }

    fn index(&mut self, base: Node, key: Node, optional: bool) -> Parsed {
        self.node(Node::Index {
            base: Box::new(base),
            key: Box::new(key),
            optional,
        })
    }
}

/// Depth of a tree: a node is one level more than its deepest child (a
/// chain of `&&` or `||` is a single level).
pub(super) fn depth(node: &Node) -> usize {
    let max = |nodes: &[Node]| nodes.iter().map(depth).max().unwrap_or(0);
    1 + match node {
        Node::Nil | Node::Bool(_) | Node::Int(_) | Node::Float(_) | Node::Str(_) => 0,
        Node::Ident(_) => 0,
        Node::Array(items) | Node::Chain(_, items) | Node::Call { args: items, .. } => max(items),
        Node::Unary(_, n) | Node::Closure(n) => depth(n),
        Node::Binary(_, a, b) | Node::Let(_, a, b) => depth(a).max(depth(b)),
        Node::Index { base, key, .. } => depth(base).max(depth(key)),
        Node::Slice { base, start, end } => depth(base)
            .max(start.as_deref().map_or(0, depth))
            .max(end.as_deref().map_or(0, depth)),
        Node::Method { base, args, .. } => depth(base).max(max(args)),
        Node::Ternary(c, a, b) => depth(c).max(depth(a)).max(depth(b)),
    }
}
