//! Lexical pre-pass: what has to happen to the source text before expr-lang
//! parses it.
//!
//! expr-lang's parser has a few defects that cannot be repaired after the
//! fact, because the information is gone once it has built its AST, and one
//! that panics. This pass tokenises the source (it does not parse it) and
//! rewrites or rejects exactly those spots:
//!
//! * **String literals** are re-encoded. expr-lang unescapes with a chain of
//!   `replace` calls, so `"a\\nb"` becomes a newline, `\u00e9` and `\'` stay
//!   verbatim. We decode every literal here (the usual escapes, as Go does)
//!   and hand expr-lang a raw backtick literal, which it copies untouched.
//! * **`not contains` / `not matches` / `not startsWith` / `not endsWith`** do
//!   not exist in expr-lang's grammar. The `not` is blanked out and the
//!   operator's occurrence number recorded; the AST reader (`tree.rs`) wraps
//!   the matching operation in a negation.
//! * **`a ?? b`**: expr-lang's `??` swallows everything to its right
//!   (`x ?? 0 > 5` parses as `x ?? (0 > 5)`); in expr (Go) it binds tighter
//!   than any binary operator. Parenthesising the right operand cannot help
//!   (the grammar reads a whole expression after `??`), so we parenthesise
//!   the pair: `(x ?? 0) > 5`. A chain `a ?? b ?? c` becomes
//!   `(a ?? (b) ?? c)`, which is the same value.
//! * **Map literals** are rejected: expr-lang's parser panics on a map literal
//!   whose value is not a constant (and silently truncates `{a: 1 + 2}`).
//! * **Bytes literals** (`b"…"`) are rejected: no filter variable is bytes.
//! * **Limits that protect the stack and the CPU.** Parsing, printing and
//!   evaluating are recursive, and a Worker has about 1 MB of stack (a stack
//!   overflow traps the whole isolate). Bracket nesting plus `?`/`??`/`if` is
//!   capped at `MAX_NESTING`. Every literal, name, operator, postfix, call,
//!   array and `if` token is an AST node, so counting them gives a lower bound
//!   on the node count (exact in practice): more than `max_nodes` is already
//!   the "too many nodes" error, which also bounds the AST depth (a chain of
//!   binary operators is at most ~500 deep) before anything recursive runs. Nested indexes are capped at
//!   `MAX_INDEX_NESTING` because expr-lang's parser takes exponential time in
//!   their depth.

use std::fmt::Write as _;

/// Maximum bracket nesting plus ternaries, `??` and `if`s (each of which makes
/// expr-lang's parser recurse). Real filters stay in single digits.
pub(super) const MAX_NESTING: usize = 64;

/// Maximum nesting of index brackets inside index brackets (`a[b[c]]` is 2).
/// expr-lang's grammar tries `a[x:…]` before `a[x]`, parsing `x` twice when it
/// is an index, so the parse time doubles per nested level (20 levels take
/// ten seconds; at 3, a maximal source parses in ~35 ms natively).
pub(super) const MAX_INDEX_NESTING: usize = 3;

/// Binary operators that have a `not` form in expr (Go) but not in expr-lang.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum WordOp {
    Contains,
    StartsWith,
    EndsWith,
    Matches,
}

impl WordOp {
    fn from_word(word: &str) -> Option<WordOp> {
        match word {
            "contains" => Some(WordOp::Contains),
            "startsWith" => Some(WordOp::StartsWith),
            "endsWith" => Some(WordOp::EndsWith),
            "matches" => Some(WordOp::Matches),
            _ => None,
        }
    }

    pub(super) fn slot(self) -> usize {
        self as usize
    }
}

/// For each `WordOp`, one flag per occurrence as a binary operator, in
/// source order: `true` when it was written `not <op>`.
#[derive(Debug, Default)]
pub(super) struct Negations(pub(super) [Vec<bool>; 4]);

impl Negations {
    /// Whether occurrence `index` of `op` was negated; `None` if the lexer
    /// never saw that occurrence (the reader treats it as an internal error).
    pub(super) fn get(&self, op: WordOp, index: usize) -> Option<bool> {
        self.0[op.slot()].get(index).copied()
    }
}

/// The source as expr-lang should see it.
#[derive(Debug)]
pub(super) struct Prepared {
    pub(super) source: String,
    pub(super) negations: Negations,
    /// The lower bound on the node count that `prepare` enforced.
    #[cfg(test)]
    pub(super) nodes: usize,
}

#[derive(Debug, Clone, PartialEq)]
enum Kind {
    /// Identifier or keyword.
    Word,
    Number,
    /// A string literal with its decoded value.
    Str(String),
    /// Punctuation; the text is the source slice.
    Punct,
    /// Anything else; expr-lang will report it.
    Other,
}

#[derive(Debug)]
struct Token {
    kind: Kind,
    start: usize,
    end: usize,
}

/// Tokenises `source`, applies the rewrites described in the module docs and
/// enforces the nesting and node-count bounds.
pub(super) fn prepare(source: &str, max_nodes: usize) -> Result<Prepared, String> {
    let tokens = tokenize(source)?;
    let text = |t: &Token| &source[t.start..t.end];
    let is = |i: usize, s: &str| {
        tokens
            .get(i)
            .is_some_and(|t| matches!(t.kind, Kind::Word | Kind::Punct) && text(t) == s)
    };

    // The matching bracket of every bracket (unbalanced input is left to
    // expr-lang's parser to report).
    let mut partner = vec![usize::MAX; tokens.len()];
    let mut open: Vec<(usize, bool)> = Vec::new(); // (token, is an index bracket)
    let (mut depth_max, mut bumps, mut indexes, mut indexes_max) = (0, 0, 0, 0);
    for (i, token) in tokens.iter().enumerate() {
        if token.kind != Kind::Punct && token.kind != Kind::Word {
            continue;
        }
        match text(token) {
            "(" | "[" | "{" => {
                // `[` right after an operand is an index or a slice.
                let index = text(token) == "["
                    && i > 0
                    && ends_operand(&tokens[i - 1], text(&tokens[i - 1]));
                indexes += usize::from(index);
                indexes_max = indexes_max.max(indexes);
                open.push((i, index));
                depth_max = depth_max.max(open.len());
            }
            ")" | "]" | "}" => {
                if let Some((o, index)) = open.pop() {
                    partner[o] = i;
                    partner[i] = o;
                    indexes -= usize::from(index);
                }
            }
            "?" | "??" if token.kind == Kind::Punct => bumps += 1,
            "if" if token.kind == Kind::Word => bumps += 1,
            _ => {}
        }
    }
    if depth_max + bumps > MAX_NESTING {
        return Err(format!(
            "expression nested too deeply (more than {MAX_NESTING} levels of brackets, `?`, `??` and `if`)"
        ));
    }
    if indexes_max > MAX_INDEX_NESTING {
        return Err(format!(
            "indexes nested too deeply (more than {MAX_INDEX_NESTING} levels of `a[…[…]]`)"
        ));
    }

    let mut edits: Vec<(usize, usize, String)> = Vec::new(); // (start, end, replacement)
    let mut inserts: Vec<(usize, bool)> = Vec::new(); // (position, is_open)
    let mut negations = Negations::default();
    // A lower bound on the AST's node count: every literal and name is a
    // node, and so is every operator, postfix, call, array and `if`.
    let mut nodes = 0usize;
    let mut negated = None; // the operator after a `not` just blanked
    for (i, token) in tokens.iter().enumerate() {
        let word = text(token);
        let after_operand = i > 0 && ends_operand(&tokens[i - 1], text(&tokens[i - 1]));
        match &token.kind {
            Kind::Str(value) => {
                edits.push((token.start, token.end, encode_string(value)));
                nodes += 1;
            }
            Kind::Number => nodes += 1,
            // A member name (a string node), or `map(xs, .name)`'s name; a
            // method name is part of its call.
            Kind::Word if i > 0 && (is(i - 1, ".") || is(i - 1, "?.")) => {
                nodes += usize::from(!is(i + 1, "("));
            }
            Kind::Word => {
                if word == "not" && after_operand {
                    if let Some(op) = tokens.get(i + 1).and_then(|t| WordOp::from_word(text(t))) {
                        // `a not contains b`: blank the `not` (keeping byte
                        // positions) and remember which occurrence it negated.
                        edits.push((token.start, token.end, "   ".to_string()));
                        negations.0[op.slot()].push(true);
                        nodes += 2; // the operation and its negation
                        negated = Some(i + 1);
                        continue;
                    }
                }
                if negated == Some(i) {
                    continue; // counted with its `not`
                }
                if let Some(op) = WordOp::from_word(word).filter(|_| after_operand) {
                    negations.0[op.slot()].push(false);
                    nodes += 1;
                    continue;
                }
                nodes += match word {
                    "and" | "or" | "in" | "if" => 1,
                    "not" => usize::from(!is(i + 1, "in")),
                    "else" | "let" => 0,
                    _ if i > 0 && is(i - 1, "let") => 0, // a `let` name
                    _ => 1,                              // a name, or a call
                };
            }
            Kind::Punct => {
                if word == "{" && is_map_literal(&tokens, i, source) {
                    return Err("map literals are not supported in filters".to_string());
                }
                nodes += match word {
                    "." => usize::from(after_operand),
                    "[" => usize::from(!(i > 0 && is(i - 1, "?."))),
                    "+" | "-" | "*" | "/" | "%" | "**" | "^" | "==" | "!=" | "<" | ">" | "<="
                    | ">=" | "&&" | "||" | "!" | ".." | "??" | "?" | "?." | "|" => 1,
                    _ => 0,
                };
                if word == "??" {
                    let left = term_before(&tokens, i, &partner, source);
                    let right = term_after(&tokens, i + 1, &partner, source);
                    if let (Some(from), Some((_, to))) = (left, right) {
                        inserts.push((tokens[from].start, true));
                        inserts.push((tokens[to].end, false));
                    }
                }
            }
            Kind::Other => {}
        }
    }
    if nodes > max_nodes {
        return Err(format!(
            "expression too complex (more than {max_nodes} AST nodes)"
        ));
    }

    // Apply: edits never overlap each other (they are whole tokens); inserts
    // sit on token boundaries. At one position, `)` goes before `(`.
    let mut points: Vec<(usize, u8, usize, String)> = Vec::new();
    for (start, end, text) in edits {
        points.push((start, 2, end, text));
    }
    for (pos, is_open) in inserts {
        let text = if is_open { "(" } else { ")" };
        points.push((pos, if is_open { 1 } else { 0 }, pos, text.to_string()));
    }
    points.sort_by_key(|p| (p.0, p.1));
    let mut out = String::with_capacity(source.len() + 16);
    let mut at = 0;
    for (start, _, end, text) in points {
        out.push_str(source.get(at..start).unwrap_or(""));
        out.push_str(&text);
        at = at.max(end);
    }
    out.push_str(source.get(at..).unwrap_or(""));
    Ok(Prepared {
        source: out,
        negations,
        #[cfg(test)]
        nodes,
    })
}

/// Whether a token can end an operand, so that a following word is a binary
/// operator rather than a prefix.
fn ends_operand(token: &Token, text: &str) -> bool {
    match token.kind {
        Kind::Number | Kind::Str(_) => true,
        Kind::Word => !matches!(
            text,
            "not"
                | "and"
                | "or"
                | "in"
                | "contains"
                | "startsWith"
                | "endsWith"
                | "matches"
                | "if"
                | "else"
                | "let"
        ),
        Kind::Punct => matches!(text, ")" | "]" | "}"),
        Kind::Other => false,
    }
}

/// `{` opens a map literal (rather than a predicate or an `if` block) when it
/// is empty or starts with `key:`; a program can never start that way.
fn is_map_literal(tokens: &[Token], i: usize, source: &str) -> bool {
    let text = |j: usize| tokens.get(j).map(|t| &source[t.start..t.end]);
    match tokens.get(i + 1) {
        Some(t) if t.kind == Kind::Punct && text(i + 1) == Some("}") => true,
        Some(t) if matches!(t.kind, Kind::Word | Kind::Str(_)) => {
            tokens.get(i + 2).is_some_and(|c| c.kind == Kind::Punct) && text(i + 2) == Some(":")
        }
        _ => false,
    }
}

/// The first token of the operand ending just before token `op`: a primary
/// (literal, name, call, parenthesised expression or array) with its
/// member/index/method chain, but without prefix operators (`-a ?? b` is
/// `-(a ?? b)` in expr). `None` for anything else.
fn term_before(tokens: &[Token], op: usize, partner: &[usize], source: &str) -> Option<usize> {
    let text = |j: usize| tokens.get(j).map(|t| &source[t.start..t.end]);
    let punct = |j: usize, s: &str| {
        tokens.get(j).is_some_and(|t| t.kind == Kind::Punct) && text(j) == Some(s)
    };
    let name = |j: usize| {
        tokens.get(j).is_some_and(|t| t.kind == Kind::Word)
            && ends_operand(&tokens[j], text(j).unwrap_or(""))
    };
    let mut j = op.checked_sub(1)?;
    loop {
        let token = tokens.get(j)?;
        match &token.kind {
            Kind::Punct if matches!(text(j), Some(")" | "]")) => {
                let open = *partner.get(j).filter(|&&p| p != usize::MAX)?;
                j = open;
                if punct(open, "(") && open > 0 && name(open - 1) {
                    j = open - 1; // a call or method name
                } else if punct(open, "[") && open > 0 && punct(open - 1, "?.") {
                    j = open - 1; // `?.[k]`
                }
            }
            Kind::Number | Kind::Str(_) => {}
            Kind::Word if name(j) => {}
            _ => return None,
        }
        // Is this element a postfix continuing a chain to its left?
        let member =
            j > 0 && (punct(j - 1, ".") || punct(j - 1, "?.")) && tokens[j].kind == Kind::Word;
        let chained = punct(j, "?.")
            || (punct(j, "[") && j > 0 && ends_operand(&tokens[j - 1], text(j - 1).unwrap_or("")));
        if member {
            j = j.checked_sub(2)?;
        } else if chained {
            j = j.checked_sub(1)?;
        } else {
            return Some(j);
        }
    }
}

/// The token range `[from, to]` of the unary term starting at `from`: prefix
/// operators, a primary (literal, name, call, parenthesised expression or
/// array) and its member/index/method chain. `None` when it is something this
/// pass does not model (an `if`, a map), which is then left unwrapped.
fn term_after(
    tokens: &[Token],
    mut i: usize,
    partner: &[usize],
    source: &str,
) -> Option<(usize, usize)> {
    let text = |j: usize| tokens.get(j).map(|t| &source[t.start..t.end]);
    let punct = |j: usize, s: &str| {
        tokens.get(j).is_some_and(|t| t.kind == Kind::Punct) && text(j) == Some(s)
    };
    let from = i;
    while punct(i, "-")
        || punct(i, "+")
        || punct(i, "!")
        || (tokens.get(i)?.kind == Kind::Word && text(i) == Some("not"))
    {
        i += 1;
    }
    let token = tokens.get(i)?;
    let mut end = match &token.kind {
        Kind::Number | Kind::Str(_) => i,
        Kind::Word if matches!(text(i), Some("if" | "let" | "else")) => return None,
        Kind::Word if punct(i + 1, "(") => *partner.get(i + 1).filter(|&&p| p != usize::MAX)?,
        Kind::Word => i,
        Kind::Punct if matches!(text(i), Some("(" | "[")) => {
            *partner.get(i).filter(|&&p| p != usize::MAX)?
        }
        _ => return None,
    };
    loop {
        let next = end + 1;
        if (punct(next, ".") || punct(next, "?."))
            && tokens.get(next + 1).is_some_and(|t| t.kind == Kind::Word)
        {
            end = next + 1;
            if punct(end + 1, "(") {
                end = *partner.get(end + 1).filter(|&&p| p != usize::MAX)?;
            }
        } else if punct(next, "?.") && punct(next + 1, "[") {
            end = *partner.get(next + 1).filter(|&&p| p != usize::MAX)?;
        } else if punct(next, "[") {
            end = *partner.get(next).filter(|&&p| p != usize::MAX)?;
        } else {
            return Some((from, end));
        }
    }
}

/// A string as a literal expr-lang reads back exactly: a raw backtick literal,
/// or — when the value itself contains backticks — a parenthesised
/// concatenation of raw pieces and `"`"` literals.
pub(super) fn encode_string(value: &str) -> String {
    if !value.contains('`') {
        return format!("`{value}`");
    }
    let mut out = String::from("(");
    for (i, piece) in value.split('`').enumerate() {
        if i > 0 {
            out.push_str(" + \"`\" + ");
        }
        let _ = write!(out, "`{piece}`");
    }
    out.push(')');
    out
}

fn tokenize(source: &str) -> Result<Vec<Token>, String> {
    let bytes = source.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        let start = i;
        let kind = match c {
            b' ' | b'\t' | b'\r' | b'\n' => {
                i += 1;
                continue;
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                match source[i + 2..].find("*/") {
                    Some(end) => i += 2 + end + 2,
                    None => return Err(format!("unterminated comment at byte {i}")),
                }
                continue;
            }
            b'"' | b'\'' => {
                let (value, end) = quoted(source, i)?;
                i = end;
                Kind::Str(value)
            }
            b'`' => match source[i + 1..].find('`') {
                Some(end) => {
                    let value = source[i + 1..i + 1 + end].to_string();
                    i += end + 2;
                    Kind::Str(value)
                }
                None => return Err(format!("unterminated string literal at byte {i}")),
            },
            b'0'..=b'9' => {
                i = number_end(bytes, i);
                Kind::Number
            }
            b'.' if bytes.get(i + 1).is_some_and(u8::is_ascii_digit) => {
                i = number_end(bytes, i);
                Kind::Number
            }
            b'a'..=b'z' | b'A'..=b'Z' | b'_' | b'$' | b'#' => {
                i += 1;
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                if (c == b'b' || c == b'B')
                    && i == start + 1
                    && matches!(bytes.get(i), Some(b'"' | b'\''))
                {
                    return Err("bytes literals are not supported in filters".to_string());
                }
                Kind::Word
            }
            _ => {
                const PUNCT: [&str; 30] = [
                    "**", "==", "!=", "<=", ">=", "&&", "||", "..", "??", "?.", "+", "-", "*", "/",
                    "%", "^", "<", ">", "!", "?", "|", ".", "[", "]", "(", ")", "{", "}", ",", ":",
                ];
                match PUNCT.iter().find(|p| source[i..].starts_with(*p)) {
                    Some(p) => {
                        i += p.len();
                        Kind::Punct
                    }
                    None => {
                        i += source[i..].chars().next().map_or(1, char::len_utf8);
                        Kind::Other
                    }
                }
            }
        };
        tokens.push(Token {
            kind,
            start,
            end: i,
        });
    }
    Ok(tokens)
}

/// End of a numeric literal starting at `i` (precision only matters for not
/// splitting one literal into several tokens).
fn number_end(bytes: &[u8], mut i: usize) -> usize {
    let hex = bytes.get(i) == Some(&b'0')
        && matches!(
            bytes.get(i + 1),
            Some(b'x' | b'X' | b'o' | b'O' | b'b' | b'B')
        );
    if hex {
        i += 2;
        while i < bytes.len() && (bytes[i].is_ascii_hexdigit() || bytes[i] == b'_') {
            i += 1;
        }
        return i;
    }
    let digits = |mut i: usize| {
        while i < bytes.len() && (bytes[i].is_ascii_digit() || bytes[i] == b'_') {
            i += 1;
        }
        i
    };
    i = digits(i);
    if bytes.get(i) == Some(&b'.') && bytes.get(i + 1) != Some(&b'.') {
        i = digits(i + 1);
    }
    if matches!(bytes.get(i), Some(b'e' | b'E')) {
        let mut j = i + 1;
        if matches!(bytes.get(j), Some(b'+' | b'-')) {
            j += 1;
        }
        if bytes.get(j).is_some_and(u8::is_ascii_digit) {
            i = digits(j);
        }
    }
    i
}

/// Decodes the quoted literal starting at `start` with the escapes expr's
/// grammar allows (`\\ \/ \b \f \n \r \t \uXXXX` and the literal's own quote).
/// Returns the value and the byte after the closing quote.
fn quoted(source: &str, start: usize) -> Result<(String, usize), String> {
    let quote = source.as_bytes()[start] as char;
    let mut value = String::new();
    let mut chars = source[start + 1..].char_indices();
    let offset = start + 1;
    while let Some((at, c)) = chars.next() {
        match c {
            c if c == quote => return Ok((value, offset + at + 1)),
            '\r' | '\n' => break,
            '\\' => {
                let escape = chars.next().map(|(_, e)| e);
                match escape {
                    Some(e) if e == quote => value.push(e),
                    Some('\\') => value.push('\\'),
                    Some('/') => value.push('/'),
                    Some('b') => value.push('\u{8}'),
                    Some('f') => value.push('\u{c}'),
                    Some('n') => value.push('\n'),
                    Some('r') => value.push('\r'),
                    Some('t') => value.push('\t'),
                    Some('u') => {
                        let hex: String = (0..4)
                            .filter_map(|_| chars.next().map(|(_, h)| h))
                            .collect();
                        let code = (hex.len() == 4 && hex.chars().all(|h| h.is_ascii_hexdigit()))
                            .then(|| u32::from_str_radix(&hex, 16).ok())
                            .flatten();
                        match code.and_then(char::from_u32) {
                            Some(decoded) => value.push(decoded),
                            None => {
                                return Err(format!(
                                    "invalid \\u escape in string literal at byte {}",
                                    offset + at
                                ))
                            }
                        }
                    }
                    _ => {
                        return Err(format!(
                            "invalid escape in string literal at byte {}",
                            offset + at
                        ))
                    }
                }
            }
            c => value.push(c),
        }
    }
    Err(format!("unterminated string literal at byte {start}"))
}
