//! PLACEHOLDER until the expr-lang filter module lands (branch `filter`).
use std::collections::BTreeMap;

pub struct Filter {
    match_all: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompileError(pub String);

impl std::fmt::Display for CompileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

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
    pub fn compile(source: &str) -> Result<Filter, CompileError> {
        if source.trim().is_empty() {
            Ok(Filter { match_all: true })
        } else if source.trim().ends_with("==") {
            Err(CompileError("unexpected end".into()))
        } else {
            Ok(Filter { match_all: false })
        }
    }
    pub fn is_match_all(&self) -> bool {
        self.match_all
    }
    pub fn evaluate(&self, m: &FilterInput<'_>) -> Result<bool, String> {
        Ok(self.match_all || !m.subject.is_empty())
    }
}
