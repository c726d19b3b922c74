//! Tokens of the filter language (docs/semantics.md#filters): names and keywords,
//! numbers, strings with their escapes, operators and brackets, comments.

/// What a token is; literals carry their decoded value.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Tok {
    /// A name or keyword (`subject`, `and`, `#`, `#index`, `$env`).
    Word(String),
    Int(i64),
    Float(f64),
    Str(String),
    /// Operators and brackets, e.g. `==`, `?.`, `(`.
    Punct(&'static str),
    End,
}

#[derive(Debug, Clone)]
pub(super) struct Token {
    pub(super) tok: Tok,
    /// Byte offset in the source, for error positions.
    pub(super) at: usize,
}

/// Longest first, so `**` wins over `*` and `?.` over `?`.
const PUNCT: [&str; 32] = [
    "**", "==", "!=", "<=", ">=", "&&", "||", "..", "??", "?.", "+", "-", "*", "/", "%", "^", "<",
    ">", "!", "?", "|", ".", "[", "]", "(", ")", "{", "}", ",", ":", ";", "=",
];

/// `syntax error at line L, column C: detail`, with a 1-based column in
/// characters (as expr reports positions).
pub(super) fn syntax_error(source: &str, at: usize, detail: &str) -> String {
    let before = source.get(..at).unwrap_or(source);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
    format!("syntax error at line {line}, column {column}: {detail}")
}

/// Splits `source` into tokens, ending with [`Tok::End`].
pub(super) fn tokenize(source: &str) -> Result<Vec<Token>, String> {
    let bytes = source.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        let at = i;
        let tok = match c {
            b' ' | b'\t' | b'\r' | b'\n' => {
                i += 1;
                continue;
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                i = source[i..].find('\n').map_or(bytes.len(), |n| i + n);
                continue;
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                match source[i + 2..].find("*/") {
                    Some(end) => i += end + 4,
                    None => return Err(syntax_error(source, at, "unterminated comment")),
                }
                continue;
            }
            b'"' | b'\'' => {
                let (value, end) = quoted(source, i)?;
                i = end;
                Tok::Str(value)
            }
            b'`' => match source[i + 1..].find('`') {
                Some(end) => {
                    let value = source[i + 1..i + 1 + end].to_string();
                    i += end + 2;
                    Tok::Str(value)
                }
                None => return Err(format!("unterminated string literal at byte {i}")),
            },
            b'0'..=b'9' => {
                let (tok, end) = number(source, i)?;
                i = end;
                tok
            }
            b'.' if bytes.get(i + 1).is_some_and(u8::is_ascii_digit) => {
                let (tok, end) = number(source, i)?;
                i = end;
                tok
            }
            b'a'..=b'z' | b'A'..=b'Z' | b'_' | b'$' | b'#' => {
                i += 1;
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                if matches!(c, b'b' | b'B')
                    && i == at + 1
                    && matches!(bytes.get(i), Some(b'"' | b'\''))
                {
                    return Err("bytes literals are not supported in filters".to_string());
                }
                Tok::Word(source[at..i].to_string())
            }
            _ => match PUNCT.iter().find(|p| source[i..].starts_with(**p)) {
                Some(p) => {
                    i += p.len();
                    Tok::Punct(p)
                }
                None => {
                    let ch = source[i..].chars().next().unwrap_or('?');
                    return Err(syntax_error(
                        source,
                        at,
                        &format!("unexpected character {ch:?}"),
                    ));
                }
            },
        };
        tokens.push(Token { tok, at });
    }
    tokens.push(Token {
        tok: Tok::End,
        at: source.len(),
    });
    Ok(tokens)
}

/// A numeric literal at `start`: decimal, `0x`/`0o`/`0b` integers, floats
/// with a fraction or exponent; `_` separates digits. `1..2` is a range, so a
/// `.` followed by another `.` ends the number.
fn number(source: &str, start: usize) -> Result<(Tok, usize), String> {
    let bytes = source.as_bytes();
    let digits = |mut i: usize, ok: fn(&u8) -> bool| {
        while bytes.get(i).is_some_and(|b| ok(b) || *b == b'_') {
            i += 1;
        }
        i
    };
    let invalid = |end: usize| {
        syntax_error(
            source,
            start,
            &format!("invalid number literal {}", &source[start..end]),
        )
    };
    let radix = match (bytes[start], bytes.get(start + 1)) {
        (b'0', Some(b'x' | b'X')) => 16,
        (b'0', Some(b'o' | b'O')) => 8,
        (b'0', Some(b'b' | b'B')) => 2,
        _ => 10,
    };
    if radix != 10 {
        let end = digits(start + 2, u8::is_ascii_alphanumeric);
        let text = source[start + 2..end].replace('_', "");
        return i64::from_str_radix(&text, radix)
            .map(|n| (Tok::Int(n), end))
            .map_err(|_| invalid(end));
    }
    let mut end = digits(start, u8::is_ascii_digit);
    let mut float = false;
    if bytes.get(end) == Some(&b'.')
        && !bytes
            .get(end + 1)
            .is_some_and(|b| *b == b'.' || b.is_ascii_alphabetic() || *b == b'_')
    {
        float = true;
        end = digits(end + 1, u8::is_ascii_digit);
    }
    if matches!(bytes.get(end), Some(b'e' | b'E')) {
        let mut j = end + 1;
        if matches!(bytes.get(j), Some(b'+' | b'-')) {
            j += 1;
        }
        if bytes.get(j).is_some_and(u8::is_ascii_digit) {
            float = true;
            end = digits(j, u8::is_ascii_digit);
        }
    }
    if bytes.get(end).is_some_and(|b| b.is_ascii_alphanumeric()) {
        return Err(invalid(end + 1));
    }
    let text = source[start..end].replace('_', "");
    let tok = if float {
        text.parse().map(Tok::Float).map_err(|_| invalid(end))?
    } else {
        text.parse().map(Tok::Int).map_err(|_| invalid(end))?
    };
    Ok((tok, end))
}

/// Decodes the quoted literal starting at `start` with the usual escapes
/// (`\\ \/ \b \f \n \r \t \uXXXX` and the literal's own quote). Returns the
/// value and the byte after the closing quote.
fn quoted(source: &str, start: usize) -> Result<(String, usize), String> {
    let quote = char::from(source.as_bytes()[start]);
    let mut value = String::new();
    let offset = start + 1;
    let mut chars = source[offset..].char_indices();
    while let Some((at, c)) = chars.next() {
        match c {
            c if c == quote => return Ok((value, offset + at + 1)),
            '\r' | '\n' => break,
            '\\' => {
                let decoded = match chars.next().map(|(_, e)| e) {
                    Some(e) if e == quote || e == '\\' || e == '/' => e,
                    Some('b') => '\u{8}',
                    Some('f') => '\u{c}',
                    Some('n') => '\n',
                    Some('r') => '\r',
                    Some('t') => '\t',
                    Some('u') => {
                        let hex: String = chars.by_ref().take(4).map(|(_, h)| h).collect();
                        let code = (hex.len() == 4 && hex.chars().all(|h| h.is_ascii_hexdigit()))
                            .then(|| u32::from_str_radix(&hex, 16).ok())
                            .flatten();
                        code.and_then(char::from_u32).ok_or_else(|| {
                            format!(
                                "invalid \\u escape in string literal at byte {}",
                                offset + at
                            )
                        })?
                    }
                    _ => {
                        return Err(format!(
                            "invalid escape in string literal at byte {}",
                            offset + at
                        ))
                    }
                };
                value.push(decoded);
            }
            c => value.push(c),
        }
    }
    Err(format!("unterminated string literal at byte {start}"))
}
